#include "models/progbar.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <unistd.h>
#include "tape/runtime/logging.h"

namespace tapeflow::models {
namespace {

std::string format_values(const Progbar::Values& values) {
  std::string out;
  for (const auto& [name, v] : values)
    out += fmt::format(" - {}: ", name) +
           (std::isfinite(v) && v != 0 && std::abs(v) < 1e-3 ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v));
  return out;
}

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::string format_eta(double seconds) {
  const auto s = static_cast<long long>(seconds);
  if (s > 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s % 3600) / 60, s % 60);
  if (s > 60) return fmt::format("{}:{:02d}", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_time_per_step(double seconds) {
  if (seconds >= 1) return fmt::format(" {:.0f}s/step", seconds);
  if (seconds >= 1e-3) return fmt::format(" {:.0f}ms/step", seconds * 1e3);
  return fmt::format(" {:.0f}us/step", seconds * 1e6);
}

Progbar::Progbar(ProgbarOptions options) : options_(std::move(options)) {
  if (options_.verbose < 0 || options_.verbose > 2)
    throw std::invalid_argument("Progbar: verbose must be 0, 1 or 2, got " + std::to_string(options_.verbose));
  if (options_.width < 1) throw std::invalid_argument("Progbar: width must be positive, got " + std::to_string(options_.width));
  if (!options_.dynamic_display) options_.dynamic_display = options_.out != nullptr && isatty(fileno(options_.out)) == 1;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

std::string Progbar::bar_line(std::int64_t current, const Values& values, double elapsed, bool finalize) const {
  std::string line;
  const std::int64_t target = options_.target;
  if (target > 0) {
    const int digits = static_cast<int>(std::to_string(target).size());
    line = fmt::format("{:>{}}/{} [", current, digits, target);
    const double fraction = std::min(1.0, static_cast<double>(current) / static_cast<double>(target));
    const int filled = static_cast<int>(options_.width * fraction);
    if (filled > 0) line += std::string(static_cast<std::size_t>(filled - 1), '=') + (current < target ? '>' : '=');
    line += std::string(static_cast<std::size_t>(options_.width - filled), '.') + "]";
  } else {
    line = fmt::format("{}/Unknown", current);
  }
  const double per_step = current > 0 ? elapsed / static_cast<double>(current) : 0;
  if (finalize || (target > 0 && current >= target))
    line += fmt::format(" - {:.0f}s{}", elapsed, format_time_per_step(per_step));
  else if (target > 0)
    line += " - ETA: " + format_eta(per_step * static_cast<double>(target - current));
  else
    line += fmt::format(" - {:.0f}s{}", elapsed, format_time_per_step(per_step));
  return line + format_values(values);
}

void Progbar::update(std::int64_t current, const Values& values, bool finalize) {
  if (options_.verbose == 0 || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = seconds_between(start_, now);
  if (options_.verbose == 2) {
    if (!finalize && seconds_between(last_draw_, now) >= options_.log_interval) {
      last_draw_ = now;
      const std::string where =
          options_.target > 0 ? fmt::format("{}/{}", current, options_.target) : fmt::format("{}", current);
      logger()->info("{}{}{} - {:.1f}s{}", options_.prefix, options_.prefix.empty() ? "" : " - ", where, elapsed,
                   format_values(values));
    }
    finished_ = finalize;
    return;
  }
  if (!*options_.dynamic_display) {  // a file or a pipe: one line per finished bar, as a log reads
    if (!finalize) return;
    finished_ = true;
    const std::string line = bar_line(current, values, elapsed, finalize) + "\n";
    std::fputs(line.c_str(), options_.out);
    std::fflush(options_.out);
    return;
  }
  const bool last = finalize || (options_.target > 0 && current >= options_.target);
  if (!last && drawn_ && seconds_between(last_draw_, now) < options_.interval) return;
  last_draw_ = now;
  drawn_ = true;
  std::string line = bar_line(current, values, elapsed, finalize);
  const std::size_t width = line.size();
  if (width < last_width_) line += std::string(last_width_ - width, ' ');  // erase the longer previous line
  last_width_ = width;
  std::fputc('\r', options_.out);
  std::fputs(line.c_str(), options_.out);
  if (finalize) {
    std::fputc('\n', options_.out);
    finished_ = true;
  }
  std::fflush(options_.out);
}

}  // namespace tapeflow::models
