#include "apps/common/app_common.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "tape/kernels/parallel.h"

namespace tapeflow::apps {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

std::string number_text(double v) { return fmt::format("{:g}", v); }

// Creates and removes a probe file in `dir`; returns "" or why that failed.
std::string probe_write(const std::string& dir) {
  const std::string probe = (fs::path(dir) / (".tapeflow-write-test-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

}  // namespace

const char* const kExitCodesHelp =
    "Exit codes: 0 success; 1 data, file or checkpoint error (the message names the file or flag); "
    "2 usage error (bad or conflicting flags); 3 training diverged (the loss became NaN or infinite); "
    "130 interrupted by Ctrl-C (the newest checkpoint is kept).";

void add_common_flags(CLI::App& app, CommonFlags& f) {
  app.add_option("--data-dir", f.data_dir, "Directory with the Fashion-MNIST IDX files (Debian: dataset-fashion-mnist)")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Seed of the weights and the shuffling (same seed, same threads: same result)")
      ->capture_default_str()->check(integer_at_least<std::uint64_t>(0));
  app.add_option("--threads", f.threads, "Kernel threads (0: all cores)")->capture_default_str()->check(integer_at_least(0));
  app.add_option("--limit", f.limit, "Use only the first N training and the first N test examples (0: all)")
      ->capture_default_str()->check(integer_at_least<std::int64_t>(0));
  app.add_option("--metrics-out", f.metrics_out, "Write the final metrics as JSON to FILE");
  app.add_option("--log-level", f.log_level, "Log level")
      ->capture_default_str()->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--verbose", f.verbose,
                 "Training progress as Keras's fit: 0 silent, 1 progress bar, 2 one line per epoch and a line "
                 "every few seconds (default: 1 on a terminal, else 2)")
      ->check(in_range(0, 2));
  app.footer(kExitCodesHelp);
}

void add_tensorboard_flags(CLI::App& app, TensorBoardFlags& f) {
  app.add_option("--tensorboard-dir", f.dir,
                 "Write TensorBoard event files (training curves, weight histograms, images) under DIR; "
                 "view them with `tensorboard --logdir DIR`");
  app.add_option("--tensorboard-update-freq", f.update_freq,
                 "With --tensorboard-dir: also log batch_* scalars every N training steps (0: per epoch only)")
      ->capture_default_str()->check(at_least(0));
}

CLI::Validator at_least(double min) {
  return CLI::Validator(
      [min](std::string& input) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(input.c_str(), &end);
        if (end == input.c_str() || *end != '\0' || errno == ERANGE) return "expected a number, got '" + input + "'";
        if (!(v >= min)) return "must be at least " + number_text(min) + ", got " + input;
        return "";
      },
      ">= " + number_text(min));
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(input.c_str(), &end);
        if (end == input.c_str() || *end != '\0' || errno == ERANGE) return "expected a number, got '" + input + "'";
        if (!(v > 0)) return "must be positive, got " + input;
        return "";
      },
      "> 0");
}

CLI::Validator in_range(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& input) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(input.c_str(), &end);
        if (end == input.c_str() || *end != '\0' || errno == ERANGE) return "expected a number, got '" + input + "'";
        if (!(v >= min && v <= max))
          return "must be between " + number_text(min) + " and " + number_text(max) + ", got " + input;
        return "";
      },
      "in [" + number_text(min) + ", " + number_text(max) + "]");
}

CLI::Validator integer_in(long double min, long double max) {
  return CLI::Validator(
      [min, max](std::string& input) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long double v = std::strtold(input.c_str(), &end);
        if (end == input.c_str() || *end != '\0') return "expected a whole number, got '" + input + "'";
        if (v != std::floor(v)) return "expected a whole number, got " + input;
        if (!(v >= min)) return "must be at least " + fmt::format("{:.0f}", static_cast<double>(min)) + ", got " + input;
        if (errno == ERANGE || v > max)
          return "must be at most " + fmt::format("{:.0f}", max) + ", got " + input;
        return "";
      },
      "integer >= " + fmt::format("{:.0f}", static_cast<double>(min)));
}

std::string prescan_flag(int argc, char** argv, const std::string& flag, const std::string& fallback) {
  std::string value = fallback;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag && i + 1 < argc) value = argv[++i];
    else if (a.starts_with(flag + "=")) value = a.substr(flag.size() + 1);
  }
  return value;
}

std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "%s: usage error: %s (see --help)\n", app.get_name().c_str(), message.c_str());
    return kExitUsage;
  }
}

int run_app(const std::string& app, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: usage error: %s\n", app.c_str(), e.what());
    return kExitUsage;
  } catch (const DivergedError& e) {
    std::fprintf(stderr, "%s: error: %s\n", app.c_str(), e.what());
    return kExitDiverged;
  } catch (const InterruptedError& e) {
    std::fprintf(stderr, "%s: %s\n", app.c_str(), e.what());
    return kExitInterrupted;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", app.c_str(), e.what());
    return kExitError;
  }
}

void apply_common_flags(const CommonFlags& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (f.verbose == 0 && spdlog::get_level() < spdlog::level::warn) spdlog::set_level(spdlog::level::warn);
  if (f.threads > 0) kernels::set_num_threads(f.threads);
  std::signal(SIGINT, on_sigint);
  if (!f.metrics_out.empty()) check_writable_file("--metrics-out", f.metrics_out);  // fail before training
}

void check_writable_directory(const std::string& flag, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(flag + ": cannot create '" + dir + "': " + ec.message());
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(flag + ": '" + dir + "' is not a directory");
  if (const std::string why = probe_write(dir); !why.empty())
    throw std::runtime_error(flag + ": cannot write to '" + dir + "': " + why);
}

void check_writable_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw std::runtime_error(flag + ": cannot write '" + path + "': it is a directory");
  if (fs::exists(path, ec)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // no O_TRUNC: nothing changes
    if (fd < 0) throw std::runtime_error(flag + ": cannot write '" + path + "': " + std::strerror(errno));
    ::close(fd);
    return;
  }
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec))
    throw std::runtime_error(flag + ": cannot write '" + path + "': directory '" + parent.string() + "' does not exist");
  if (const std::string why = probe_write(parent.string()); !why.empty())
    throw std::runtime_error(flag + ": cannot write '" + path + "': " + why);
}

void check_writable_output(const std::string& flag, const std::string& path) {
  const fs::path p(path);
  const bool directory = path.ends_with('/') || !p.has_extension();
  if (!directory) return check_writable_file(flag, path);
  std::error_code ec;
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    throw std::runtime_error(flag + ": cannot write the directory '" + path + "': a file of that name exists");
  fs::path existing = p;
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  if (!fs::is_directory(existing, ec))
    throw std::runtime_error(flag + ": cannot write '" + path + "': '" + existing.string() + "' is not a directory");
  if (const std::string why = probe_write(existing.string()); !why.empty())
    throw std::runtime_error(flag + ": cannot write '" + path + "': " + why);
}

int fit_verbosity(const CommonFlags& f) {
  if (f.verbose >= 0) return f.verbose;
  return ::isatty(STDOUT_FILENO) ? 1 : 2;
}

bool interrupted() { return g_interrupted.load(); }

void throw_if_interrupted(const std::string& where, const std::string& kept) {
  if (interrupted()) throw InterruptedError("interrupted (Ctrl-C) during " + where + "; " + kept);
}

std::string encode_config(const AppConfig& config) {
  std::string out;
  for (const ConfigEntry& e : config) out += e.flag + "=" + e.value + "\n";
  return out;
}

void check_config(const std::string& file, const std::string& stored, const AppConfig& now) {
  if (stored.empty()) {
    spdlog::warn("{} stores no training flags (written by an older tapeflow): they cannot be checked", file);
    return;
  }
  std::map<std::string, std::string> saved;
  std::size_t start = 0;
  while (start < stored.size()) {
    std::size_t end = stored.find('\n', start);
    if (end == std::string::npos) end = stored.size();
    const std::string line = stored.substr(start, end - start);
    if (const auto eq = line.find('='); eq != std::string::npos) saved[line.substr(0, eq)] = line.substr(eq + 1);
    start = end + 1;
  }
  std::string refused, warned;
  for (const ConfigEntry& e : now) {
    const auto it = saved.find(e.flag);
    const std::string was = it == saved.end() ? "(not stored)" : it->second;
    if (was == e.value) continue;
    std::string& list = e.may_differ ? warned : refused;
    list += (list.empty() ? "" : ", ") + e.flag + " " + e.value + " (stored: " + was + ")";
  }
  if (!warned.empty()) spdlog::warn("{} was written with other flags, continuing with {}", file, warned);
  if (!refused.empty())
    throw UsageError(file + " was trained with other flags: " + refused +
                     "; rerun with the stored values or use another --checkpoint-dir");
}

data::FashionMnistTensors load_fashion_mnist(const CommonFlags& f) {
  try {
    return data::load_fashion_mnist_tensors(f.data_dir, f.limit);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("cannot load Fashion-MNIST from '" + f.data_dir + "':\n  " + e.what() +
                             "\nInstall the Debian package dataset-fashion-mnist (apt-get install "
                             "dataset-fashion-mnist) or pass --data-dir DIR holding "
                             "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].");
  }
}

std::optional<data::FashionMnistTensors> load_fashion_mnist_or_explain(const char* app, const CommonFlags& f) {
  try {
    return load_fashion_mnist(f);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "%s: error: %s\n", app, e.what());
    return std::nullopt;
  }
}

}  // namespace tapeflow::apps
