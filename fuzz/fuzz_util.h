// Shared by the libFuzzer harnesses (fuzz/README.md): inputs as files in a per-process scratch
// directory, and the small model the weight and checkpoint harnesses read into.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "models/architectures.h"
#include "models/sequential.h"
#include "optimizers/adam.h"

namespace tapeflow::fuzz {

// $TMPDIR/tapeflow-fuzz-<pid>/, made once.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("tapeflow-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes bytes to scratch_dir()/name and returns the path.
inline std::string write_file(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// The MLP 4-8-BN-ReLU-3, built, with an Adam optimizer built on its variables.
struct TinyModel {
  std::shared_ptr<models::Sequential> model;
  std::shared_ptr<optimizers::Adam> optimizer;
};
inline TinyModel tiny_model() {
  TinyModel t;
  t.model = models::make_classifier_mlp({.inputs = 4, .hidden = {8}, .classes = 3, .seed = 1});
  t.model->build(Shape{1, 4});
  t.optimizer = std::make_shared<optimizers::Adam>();
  t.optimizer->build(t.model->trainable_variables());
  return t;
}

}  // namespace tapeflow::fuzz
