// save_weights / load_weights / Checkpoint of a ~10 MB float32 model against raw fwrite + fsync /
// fread of the same bytes. Model: Dense 512->1024, 1024->1024, 1024->1024 (2.6 M parameters,
// 10.5 MB). Files go to the system temp directory (--dir=<path> for another file system). After
// the runs it prints MB/s and the ratio model time / raw time (medians of 7) (the target is <= 2).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/layers.h"
#include "models/checkpoint.h"
#include "models/saving.h"
#include "models/sequential.h"
#include "optimizers/adam.h"

namespace {

namespace tf = tapeflow;
using L = std::shared_ptr<tf::layers::Layer>;

std::string g_dir = std::filesystem::temp_directory_path().string();
std::string path(const char* ext) { return g_dir + "/tapeflow_ckpt_bench_" + std::to_string(::getpid()) + ext; }

std::shared_ptr<tf::models::Sequential> make_model() {
  auto m = std::make_shared<tf::models::Sequential>(std::vector<L>{
      std::make_shared<tf::layers::Dense>(tf::layers::DenseOptions{.units = 1024, .seed = 1}),
      std::make_shared<tf::layers::Dense>(tf::layers::DenseOptions{.units = 1024, .seed = 2}),
      std::make_shared<tf::layers::Dense>(tf::layers::DenseOptions{.units = 1024, .seed = 3})});
  m->build(tf::Shape{1, 512});
  return m;
}

double model_bytes(const tf::layers::Layer& m) {
  double b = 0;
  for (const auto& v : m.variables()) b += static_cast<double>(v.value().nbytes());
  return b;
}

void raw_save(const tf::layers::Layer& m) {
  std::FILE* f = std::fopen(path(".bin").c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path(".bin"));
  for (const auto& v : m.variables()) std::fwrite(v.value().raw_data(), 1, v.value().nbytes(), f);
  std::fflush(f);
  ::fsync(::fileno(f));
  std::fclose(f);
}

void raw_load(const tf::layers::Layer& m) {
  std::FILE* f = std::fopen(path(".bin").c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path(".bin"));
  for (const auto& v : m.variables()) {
    tf::Tensor t = tf::Tensor::empty(v.shape(), v.dtype());
    if (std::fread(t.mutable_raw_data(), 1, t.nbytes(), f) != t.nbytes()) throw std::runtime_error("short read");
    v.assign(t);
  }
  std::fclose(f);
}

void finish(benchmark::State& state, double bytes) {
  state.SetBytesProcessed(static_cast<std::int64_t>(static_cast<double>(state.iterations()) * bytes));
}

void BM_SaveWeights(benchmark::State& state) {
  auto m = make_model();
  for (auto _ : state) tf::models::save_weights(*m, path(".h5"));
  finish(state, model_bytes(*m));
}
BENCHMARK(BM_SaveWeights)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RawSave(benchmark::State& state) {
  auto m = make_model();
  for (auto _ : state) raw_save(*m);
  finish(state, model_bytes(*m));
}
BENCHMARK(BM_RawSave)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_LoadWeights(benchmark::State& state) {
  auto m = make_model();
  tf::models::save_weights(*m, path(".h5"));
  for (auto _ : state) tf::models::load_weights(*m, path(".h5"));
  finish(state, model_bytes(*m));
}
BENCHMARK(BM_LoadWeights)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RawLoad(benchmark::State& state) {
  auto m = make_model();
  raw_save(*m);
  for (auto _ : state) raw_load(*m);
  finish(state, model_bytes(*m));
}
BENCHMARK(BM_RawLoad)->UseRealTime()->Unit(benchmark::kMillisecond);

// A full training checkpoint (weights + Adam m, v: 3x the bytes) through the manager.
void BM_CheckpointManagerSave(benchmark::State& state) {
  auto m = make_model();
  auto opt = std::make_shared<tf::optimizers::Adam>();
  auto ckpt = std::make_shared<tf::models::Checkpoint>(tf::models::CheckpointOptions{.model = m, .optimizer = opt});
  const std::string dir = path(".dir");
  tf::models::CheckpointManager manager(ckpt, dir, 2);
  for (auto _ : state) manager.save();
  finish(state, 3 * model_bytes(*m));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
BENCHMARK(BM_CheckpointManagerSave)->UseRealTime()->Unit(benchmark::kMillisecond);

// Median wall time of `runs` calls of fn, in seconds.
template <class Fn>
double median_seconds(int runs, Fn fn) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The figure: model save/load time over raw save/load time of the same bytes.
void print_ratios() {
  auto m = make_model();
  const double bytes = model_bytes(*m);
  const double save = median_seconds(7, [&] { tf::models::save_weights(*m, path(".h5")); });
  const double raw_save_s = median_seconds(7, [&] { raw_save(*m); });
  const double load = median_seconds(7, [&] { tf::models::load_weights(*m, path(".h5")); });
  const double raw_load_s = median_seconds(7, [&] { raw_load(*m); });
  std::printf("%.1f MB model, median of 7:\n", bytes / 1e6);
  std::printf("save_weights (incl. fsync): %.1f MB/s, raw %.1f MB/s, ratio %.2f\n", bytes / save / 1e6,
              bytes / raw_save_s / 1e6, save / raw_save_s);
  std::printf("load_weights (page cache):  %.1f MB/s, raw %.1f MB/s, ratio %.2f\n", bytes / load / 1e6,
              bytes / raw_load_s / 1e6, load / raw_load_s);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--dir=", 6) == 0) g_dir = argv[i] + 6;
  benchmark::RunSpecifiedBenchmarks();
  print_ratios();
  std::error_code ec;
  std::filesystem::remove(path(".h5"), ec);
  std::filesystem::remove(path(".bin"), ec);
  benchmark::Shutdown();
  return 0;
}
