// What every bundled app shares: the common flags and their effects, flag parsing with one exit-code
// convention, start-up checks of output locations, the training configuration stored in
// checkpoints, Ctrl-C handling, and the dataset loading with a helpful message when Fashion-MNIST is
// missing.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/fashion_mnist.h"
#include "data/fashion_mnist_tensors.h"

namespace tapeflow::apps {

// Exit codes of every app (listed by --help and in the README).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;          // data, file or checkpoint problem (the message names it)
inline constexpr int kExitUsage = 2;          // bad or conflicting flags (one line naming the flag)
inline constexpr int kExitDiverged = 3;       // the loss became NaN or infinite (TerminateOnNaN)
inline constexpr int kExitInterrupted = 130;  // Ctrl-C; the message names the checkpoint that was kept
// The "Exit codes:" paragraph of --help.
extern const char* const kExitCodesHelp;

// A flag that is wrong or conflicts with the files it names (exit kExitUsage).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Training produced a non-finite loss (exit kExitDiverged).
class DivergedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The user pressed Ctrl-C; what() says which checkpoint was kept (exit kExitInterrupted).
class InterruptedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Flags of every app; an app's own Flags derive from this.
struct CommonFlags {
  std::string data_dir = data::kDefaultFashionMnistDir;
  std::uint64_t seed = 42;
  int threads = 0;          // 0: all cores
  std::int64_t limit = 0;   // 0: all examples
  std::string metrics_out;  // JSON file, empty: none
  std::string log_level = "info";
  int verbose = -1;         // Keras fit verbosity; -1: 1 (progress bar) on a terminal, else 2
};

// Adds --data-dir, --seed, --threads, --limit, --metrics-out, --log-level and --verbose, and the
// exit codes to the --help footer.
void add_common_flags(CLI::App& app, CommonFlags& flags);

// --tensorboard-dir DIR and --tensorboard-update-freq N of the training apps: TensorBoard event files
// (models/callbacks/tensorboard.h) under DIR, read with `tensorboard --logdir DIR`.
struct TensorBoardFlags {
  std::string dir;               // empty: no event files
  std::int64_t update_freq = 0;  // 0: scalars per epoch; N: also batch_* scalars every N steps
};
void add_tensorboard_flags(CLI::App& app, TensorBoardFlags& flags);

// Validators whose messages are words ("must be at least 1, got 0"), not CLI11's ranges of
// 309-digit numbers.
CLI::Validator at_least(double min);
CLI::Validator positive();  // > 0
CLI::Validator in_range(double min, double max);
// Integer flags: a whole number of T's range (no silent saturation: 99999999999999999999 for an
// int64 flag is refused, "must be at most 9223372036854775807, got ...") and >= min.
template <class T>
CLI::Validator integer_at_least(T min);
CLI::Validator integer_in(long double min, long double max);
template <class T>
CLI::Validator integer_at_least(T min) {
  return integer_in(static_cast<long double>(min), static_cast<long double>(std::numeric_limits<T>::max()));
}

// The value of `--flag V` / `--flag=V` on the command line (the last one), or `fallback`. For
// choices that must be known before the flags are declared, such as the --model whose defaults
// --help shows.
std::string prescan_flag(int argc, char** argv, const std::string& flag, const std::string& fallback);

// Parses the command line. Returns nullopt to go on, or the exit code to return now: 0 after
// --help, kExitUsage after a one-line "<app>: usage error: ..." on stderr.
std::optional<int> parse_flags(CLI::App& app, int argc, char** argv);

// Runs an app's body, mapping exceptions to the exit codes above with one "<app>: error: ..." line.
int run_app(const std::string& app, const std::function<int()>& body);

// Applies --log-level and --threads (--verbose 0 also lowers the log to warnings and errors: only
// the app's result line is printed), installs the Ctrl-C handler, and checks --metrics-out.
// Errors: std::runtime_error naming --metrics-out if it cannot be written (before any training).
void apply_common_flags(const CommonFlags& flags);

// Makes `dir` (and parents) and checks that a file can be created in it.
// Errors: std::runtime_error "<flag>: cannot write to '<dir>': <reason>".
void check_writable_directory(const std::string& flag, const std::string& dir);
// Checks that `path` can be written (its directory exists and takes a file; an existing file is
// writable) without creating or changing it. Errors: std::runtime_error naming the flag.
void check_writable_file(const std::string& flag, const std::string& path);
// An output that is a file (a name with an extension: check_writable_file) or a directory to be
// made (no extension, or a trailing '/': its nearest existing parent must take a directory and
// `path` must not be a file). Nothing is created. Errors: std::runtime_error naming the flag.
void check_writable_output(const std::string& flag, const std::string& path);

// The fit verbosity for --verbose: as given, or -1 -> 1 (progress bar) when stdout is a terminal,
// 2 (one line per epoch plus a line every few seconds) otherwise.
int fit_verbosity(const CommonFlags& flags);

// Ctrl-C: the first SIGINT sets a flag the training loops poll (the epoch in progress is dropped,
// the newest checkpoint kept); a second one ends the process at once.
bool interrupted();
// Throws InterruptedError if interrupted(): "interrupted (Ctrl-C) during <where>; <kept>".
void throw_if_interrupted(const std::string& where, const std::string& kept);

// The training configuration an app stores in its checkpoints: each flag that shapes the result,
// with its value as text. Flags marked may_differ (e.g. --epochs on --resume, --threads) only warn
// when they change.
struct ConfigEntry {
  std::string flag;   // "--lambda"
  std::string value;  // "5"
  bool may_differ = false;
};
using AppConfig = std::vector<ConfigEntry>;
// "--flag=value" lines.
std::string encode_config(const AppConfig& config);
// Compares the configuration stored in checkpoint `file` with the current one. Logs a warning per
// changed may_differ flag (and when the file stores none). Errors: UsageError naming `file` and
// every other differing flag with both values.
void check_config(const std::string& file, const std::string& stored, const AppConfig& now);

// Loads Fashion-MNIST from --data-dir (first --limit examples of the training and the test set).
// Errors: std::runtime_error saying what went wrong and how to install the Debian package.
data::FashionMnistTensors load_fashion_mnist(const CommonFlags& flags);
// The same, printing that message to stderr and returning nullopt instead of throwing (apps then
// exit with kExitError).
std::optional<data::FashionMnistTensors> load_fashion_mnist_or_explain(const char* app, const CommonFlags& flags);

}  // namespace tapeflow::apps
