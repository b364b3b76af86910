// What every bundled app shares: the common flags, their effects, and the dataset loading with a
// helpful message when Fashion-MNIST is missing.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "data/fashion_mnist.h"
#include "data/fashion_mnist_tensors.h"

namespace tapeflow::apps {

// Flags of every app; an app's own Flags derive from this.
struct CommonFlags {
  std::string data_dir = data::kDefaultFashionMnistDir;
  std::uint64_t seed = 42;
  int threads = 0;          // 0: all cores
  std::int64_t limit = 0;   // 0: all examples
  std::string metrics_out;  // JSON file, empty: none
  std::string log_level = "info";
};

// Adds --data-dir, --seed, --threads, --limit, --metrics-out and --log-level.
void add_common_flags(CLI::App& app, CommonFlags& flags);

// Applies --log-level and --threads. Errors: std::runtime_error if --metrics-out is not writable
// (checked before any training starts).
void apply_common_flags(const CommonFlags& flags);

// Loads Fashion-MNIST from --data-dir (first --limit examples). If that fails, prints to stderr what
// went wrong and how to install the Debian package, and returns nullopt (apps then exit with 2).
std::optional<data::FashionMnistTensors> load_fashion_mnist_or_explain(const char* app, const CommonFlags& flags);

}  // namespace tapeflow::apps
