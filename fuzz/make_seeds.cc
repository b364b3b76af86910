// make_seeds DIR: a seed corpus per harness from files tapeflow writes (DIR/<harness>/...): the
// small model as JSON, .h5 (compiled, one training step so optimizer weights exist), TF.js
// (model.json, a NUL byte, its shard), weights and checkpoint files, and a small IDX file.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz/fuzz_util.h"
#include "models/checkpoint.h"
#include "models/config.h"
#include "models/losses.h"
#include "models/saving.h"
#include "models/saving_model.h"
#include "models/tfjs.h"
#include "tape/ops/math_ops.h"

namespace fs = std::filesystem;
namespace tf = tapeflow;

static std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* h : {"model_json", "tfjs", "h5_model", "h5_weights", "keras", "idx"}) fs::create_directories(dir / h);
  tf::fuzz::TinyModel t = tf::fuzz::tiny_model();
  t.model->compile({.optimizer = t.optimizer,
                    .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                        tf::models::CrossentropyOptions{.from_logits = true}),
                    .metrics = {"accuracy"}});
  tf::Generator gen(3);
  t.model->fit(tf::random_normal(tf::Shape{4, 4}, gen), tf::cast(tf::Tensor({0.0, 1.0, 2.0, 0.0}), tf::DType::kInt64),
               {.epochs = 1, .batch_size = 4, .verbose = 0});
  std::ofstream(dir / "model_json" / "mlp.json") << tf::models::to_json(*t.model);
  tf::models::save_model(*t.model, (dir / "h5_model" / "mlp.h5").string());
  tf::models::save_model(*t.model, (dir / "keras" / "mlp.keras").string());
  const fs::path web = tf::fuzz::scratch_dir() / "web";
  tf::models::export_tfjs(*t.model, web.string());
  std::ofstream(dir / "tfjs" / "mlp.bin", std::ios::binary)
      << slurp(web / "model.json") << '\0' << slurp(web / "group1-shard1of1.bin");
  tf::models::save_weights(*t.model, (tf::fuzz::scratch_dir() / "w.h5").string());
  std::ofstream(dir / "h5_weights" / "weights.bin", std::ios::binary) << '\0' << slurp(tf::fuzz::scratch_dir() / "w.h5");
  tf::models::Checkpoint ckpt({.model = t.model, .optimizer = t.optimizer});
  ckpt.write((tf::fuzz::scratch_dir() / "c.h5").string());
  std::ofstream(dir / "h5_weights" / "checkpoint.bin", std::ios::binary) << '\1' << slurp(tf::fuzz::scratch_dir() / "c.h5");
  const unsigned char idx[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};
  std::ofstream(dir / "idx" / "images.idx", std::ios::binary).write(reinterpret_cast<const char*>(idx), sizeof idx);
  fs::remove_all(tf::fuzz::scratch_dir());
  std::printf("make_seeds: seeds in %s\n", dir.c_str());
  return 0;
}
