#include "tape/runtime/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace tapeflow {
namespace {

static_assert(static_cast<int>(LogLevel::kTrace) == spdlog::level::trace &&
              static_cast<int>(LogLevel::kWarn) == spdlog::level::warn &&
              static_cast<int>(LogLevel::kError) == spdlog::level::err &&
              static_cast<int>(LogLevel::kOff) == spdlog::level::off);

std::shared_ptr<spdlog::logger> make_logger() {
  // A logger the program registered under "tapeflow" before our first message is used as is.
  if (auto existing = spdlog::get("tapeflow")) return existing;
  auto sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("tapeflow", std::move(sink));
  // Registers it (so spdlog::set_level reaches it) with spdlog's global level and pattern.
  spdlog::initialize_logger(log);
  return log;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = make_logger();
  return log;
}

void set_log_level(LogLevel level) { logger()->set_level(static_cast<spdlog::level::level_enum>(level)); }

void set_log_level(const std::string& name) {
  static constexpr const char* kNames[] = {"trace", "debug", "info", "warning", "error", "critical", "off"};
  for (int i = 0; i < 7; ++i) {
    if (name == kNames[i] || (i == 3 && name == "warn")) {
      set_log_level(static_cast<LogLevel>(i));
      return;
    }
  }
  throw std::invalid_argument("set_log_level: unknown level '" + name +
                              "' (known: trace, debug, info, warning, warn, error, critical, off)");
}

LogLevel get_log_level() { return static_cast<LogLevel>(logger()->level()); }

}  // namespace tapeflow
