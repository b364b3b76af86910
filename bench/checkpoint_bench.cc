// save_weights / load_weights / Checkpoint write and read of a ~10 MB float32 model against raw
// fwrite + fsync / fread (into fresh tensors, then assigned) of the same bytes. Model: Dense
// 512->1024, 1024->1024, 1024->1024 (2.6 M parameters, 10.5 MB; 31.5 MB with Adam's slots in a
// Checkpoint). Files go to the system temp directory (--dir=<path> for another file system).
// After the runs it prints MB/s and the ratio model time / raw time, each operation timed next to
// its raw counterpart, medians of 15 runs (see print_ratios; the target is <= 2).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
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

// What a checkpoint holds: the model's weights, plus the optimizer's variables when it has one.
std::vector<tf::Variable> saved_variables(const tf::layers::Layer& m, const tf::optimizers::Optimizer* opt = nullptr) {
  std::vector<tf::Variable> vars = m.variables();
  if (opt != nullptr)
    for (const auto& v : opt->variables()) vars.push_back(v);
  return vars;
}

double total_bytes(const std::vector<tf::Variable>& vars) {
  double b = 0;
  for (const auto& v : vars) b += static_cast<double>(v.value().nbytes());
  return b;
}

void raw_save(const std::vector<tf::Variable>& vars, const std::string& file = path(".bin")) {
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot open " + file);
  for (const auto& v : vars) std::fwrite(v.value().raw_data(), 1, v.value().nbytes(), f);
  std::fflush(f);
  ::fsync(::fileno(f));
  std::fclose(f);
}

// Reads each variable's bytes into a fresh tensor and assigns it: what load_weights does, minus
// HDF5, names, checks and checksums.
void raw_load(const std::vector<tf::Variable>& vars, const std::string& file = path(".bin")) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + file);
  for (const auto& v : vars) {
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
  finish(state, total_bytes(m->variables()));
}
BENCHMARK(BM_SaveWeights)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RawSave(benchmark::State& state) {
  auto m = make_model();
  for (auto _ : state) raw_save(m->variables());
  finish(state, total_bytes(m->variables()));
}
BENCHMARK(BM_RawSave)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_LoadWeights(benchmark::State& state) {
  auto m = make_model();
  tf::models::save_weights(*m, path(".h5"));
  for (auto _ : state) tf::models::load_weights(*m, path(".h5"));
  finish(state, total_bytes(m->variables()));
}
BENCHMARK(BM_LoadWeights)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RawLoad(benchmark::State& state) {
  auto m = make_model();
  raw_save(m->variables());
  for (auto _ : state) raw_load(m->variables());
  finish(state, total_bytes(m->variables()));
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
  finish(state, 3 * total_bytes(m->variables()));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
BENCHMARK(BM_CheckpointManagerSave)->UseRealTime()->Unit(benchmark::kMillisecond);

// Restoring that checkpoint (weights + Adam slots, 3x the bytes).
void BM_CheckpointRestore(benchmark::State& state) {
  auto m = make_model();
  auto opt = std::make_shared<tf::optimizers::Adam>();
  tf::models::Checkpoint ckpt(tf::models::CheckpointOptions{.model = m, .optimizer = opt});
  ckpt.write(path(".ckpt.h5"));
  for (auto _ : state) ckpt.read(path(".ckpt.h5"));
  finish(state, total_bytes(saved_variables(*m, opt.get())));
}
BENCHMARK(BM_CheckpointRestore)->UseRealTime()->Unit(benchmark::kMillisecond);

// One timed call: wall seconds, and this thread's CPU seconds (user + system: the kernel's page
// cache copies count, time spent preempted or waiting for the disk does not).
struct Timing {
  double wall, cpu;
};

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Evicts the caches (L3 is 32 MB here), so each run starts from the same state whatever ran before
// it: alternating runs otherwise hand each other warm or cold variables.
void flush_caches() {
  static std::vector<unsigned char> junk(std::size_t{64} << 20);
  static unsigned char round = 0;
  std::memset(junk.data(), ++round, junk.size());
  benchmark::DoNotOptimize(junk.data());
}

template <class Fn>
Timing timed(Fn fn) {
  flush_caches();
  const double cpu = thread_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  fn();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), thread_cpu_seconds() - cpu};
}

double median(const std::vector<Timing>& runs, double Timing::*field) {
  std::vector<double> t;
  for (const Timing& r : runs) t.push_back(r.*field);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The figures: save/load time over raw save/load time of the same bytes. Each model
// operation runs right next to its raw counterpart, alternating, kRuns times, each from flushed
// caches (the file itself stays in the page cache); ratios of the median wall times. On a shared machine a load (a few ms) is often preempted for a whole time
// slice, which inflates wall times, so the ratio of median CPU times follows: for the loads (all
// from the page cache) it is what the code costs; for the saves it leaves out the fsync wait.
void print_ratios() {
  constexpr int kRuns = 15;
  auto m = make_model();
  auto opt = std::make_shared<tf::optimizers::Adam>();
  tf::models::Checkpoint ckpt(tf::models::CheckpointOptions{.model = m, .optimizer = opt});
  ckpt.write(path(".ckpt.h5"));  // builds the Adam slots
  const std::vector<tf::Variable> weights = saved_variables(*m), all = saved_variables(*m, opt.get());
  struct Pair {
    const char* what;
    double bytes;
    std::function<void()> model, raw;
    std::vector<Timing> model_runs = {}, raw_runs = {};
  };
  const std::string all_bin = path(".all.bin");
  std::vector<Pair> pairs = {
      {"save_weights (incl. fsync)", total_bytes(weights), [&] { tf::models::save_weights(*m, path(".h5")); },
       [&] { raw_save(weights); }},
      {"load_weights (page cache)", total_bytes(weights), [&] { tf::models::load_weights(*m, path(".h5")); },
       [&] { raw_load(weights); }},
      {"Checkpoint write (fsync)", total_bytes(all), [&] { ckpt.write(path(".ckpt.h5")); },
       [&] { raw_save(all, all_bin); }},
      {"Checkpoint read (cache)", total_bytes(all), [&] { ckpt.read(path(".ckpt.h5")); },
       [&] { raw_load(all, all_bin); }},
  };
  for (Pair& p : pairs) {  // warm up (page cache, allocator) and create the files
    p.model();
    p.raw();
  }
  for (Pair& p : pairs)
    for (int i = 0; i < kRuns; ++i) {
      p.model_runs.push_back(timed(p.model));
      p.raw_runs.push_back(timed(p.raw));
    }
  std::printf("%.1f MB model (%.1f MB with Adam slots), medians of %d runs, each next to its raw run:\n",
              total_bytes(weights) / 1e6, total_bytes(all) / 1e6, kRuns);
  for (const Pair& p : pairs) {
    const double a = median(p.model_runs, &Timing::wall), b = median(p.raw_runs, &Timing::wall);
    std::printf("%-27s %7.1f MB/s, raw %7.1f MB/s, ratio %.2f (CPU time ratio %.2f)\n",
                (p.what + std::string(":")).c_str(), p.bytes / a / 1e6, p.bytes / b / 1e6, a / b,
                median(p.model_runs, &Timing::cpu) / median(p.raw_runs, &Timing::cpu));
  }
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
  for (const char* ext : {".bin", ".all.bin", ".ckpt.h5"}) std::filesystem::remove(path(ext), ec);
  benchmark::Shutdown();
  return 0;
}
