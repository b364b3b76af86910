#include "apps/common/app_common.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "tape/kernels/parallel.h"

namespace tapeflow::apps {

void add_common_flags(CLI::App& app, CommonFlags& f) {
  app.add_option("--data-dir", f.data_dir, "Directory with the Fashion-MNIST IDX files (Debian: dataset-fashion-mnist)")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Seed of the weights and the shuffling (same seed, same threads: same result)")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "Kernel threads (0: all cores)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--limit", f.limit, "Use only the first N training and test examples (0: all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--metrics-out", f.metrics_out, "Write the final metrics as JSON to FILE");
  app.add_option("--log-level", f.log_level, "Log level")
      ->capture_default_str()->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

void apply_common_flags(const CommonFlags& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (f.threads > 0) kernels::set_num_threads(f.threads);
  if (!f.metrics_out.empty() && !std::ofstream(f.metrics_out, std::ios::app))  // fail before training
    throw std::runtime_error("--metrics-out: cannot write '" + f.metrics_out + "'");
}

std::optional<data::FashionMnistTensors> load_fashion_mnist_or_explain(const char* app, const CommonFlags& f) {
  try {
    return data::load_fashion_mnist_tensors(f.data_dir, f.limit);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr,
                 "%s: cannot load Fashion-MNIST from '%s':\n  %s\n"
                 "Install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
                 "or pass --data-dir DIR holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].\n",
                 app, f.data_dir.c_str(), e.what());
    return std::nullopt;
  }
}

}  // namespace tapeflow::apps
