// Save / load throughput of the HDF5 layer against raw fwrite + fsync / fread of the same bytes.
// ~10 MiB of float32 in 10 datasets of [512, 512]; files go to the system temp directory (pass
// --dir=<path> to measure another file system). After the runs it prints MB/s and the ratio
// h5 time / raw time (the target is <= 2).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/io/h5_io.h"

namespace {

using tapeflow::DType;
using tapeflow::io::H5Reader;
using tapeflow::io::H5Writer;

constexpr int kDatasets = 10;
constexpr std::int64_t kRows = 512, kCols = 512;
constexpr double kBytes = double(kDatasets) * kRows * kCols * 4;

std::string g_dir = std::filesystem::temp_directory_path().string();

std::vector<std::vector<float>> make_weights() {
  std::vector<std::vector<float>> w(kDatasets, std::vector<float>(kRows * kCols));
  for (int k = 0; k < kDatasets; ++k)
    for (std::size_t i = 0; i < w[k].size(); ++i) w[k][i] = static_cast<float>((i * 2654435761u + k) % 1000) * 1e-3f;
  return w;
}

std::string h5_path() { return g_dir + "/tapeflow_bench_" + std::to_string(::getpid()) + ".h5"; }
std::string raw_path() { return g_dir + "/tapeflow_bench_" + std::to_string(::getpid()) + ".bin"; }

void h5_save(const std::vector<std::vector<float>>& w) {
  H5Writer writer(h5_path());
  for (int k = 0; k < kDatasets; ++k)
    writer.write_dataset("layer" + std::to_string(k) + "/kernel:0", DType::kFloat32, {kRows, kCols}, w[k].data());
  writer.commit();
}

void raw_save(const std::vector<std::vector<float>>& w) {
  std::FILE* f = std::fopen(raw_path().c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot open " + raw_path());
  for (const auto& v : w) std::fwrite(v.data(), sizeof(float), v.size(), f);
  std::fflush(f);
  ::fsync(::fileno(f));
  std::fclose(f);
}

void set_counters(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBytes));
}

void BM_H5Save(benchmark::State& state) {
  const auto w = make_weights();
  for (auto _ : state) h5_save(w);
  set_counters(state);
}
BENCHMARK(BM_H5Save)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RawSave(benchmark::State& state) {
  const auto w = make_weights();
  for (auto _ : state) raw_save(w);
  set_counters(state);
}
BENCHMARK(BM_RawSave)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_H5Load(benchmark::State& state) {
  h5_save(make_weights());
  for (auto _ : state) {
    H5Reader reader(h5_path());
    for (int k = 0; k < kDatasets; ++k)
      benchmark::DoNotOptimize(reader.read_dataset("layer" + std::to_string(k) + "/kernel:0").bytes.data());
  }
  set_counters(state);
}
BENCHMARK(BM_H5Load)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RawLoad(benchmark::State& state) {
  raw_save(make_weights());
  for (auto _ : state) {
    std::FILE* f = std::fopen(raw_path().c_str(), "rb");
    for (int k = 0; k < kDatasets; ++k) {
      std::vector<float> v(kRows * kCols);
      if (std::fread(v.data(), sizeof(float), v.size(), f) != v.size()) state.SkipWithError("short read");
      benchmark::DoNotOptimize(v.data());
    }
    std::fclose(f);
  }
  set_counters(state);
}
BENCHMARK(BM_RawLoad)->UseRealTime()->Unit(benchmark::kMillisecond);

// Console output plus the per-iteration real time of each benchmark, for the ratio summary.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    // One run per benchmark, or with --benchmark_repetitions its median.
    for (const Run& run : runs)
      if ((run.run_type == Run::RT_Iteration && run.iterations > 0) ||
          (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median"))
        seconds_[run.run_name.function_name] = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
    ConsoleReporter::ReportRuns(runs);
  }
  void summary() const {
    auto line = [&](const char* what, const std::string& h5, const std::string& raw) {
      if (!seconds_.count(h5) || !seconds_.count(raw)) return;
      const double a = seconds_.at(h5), b = seconds_.at(raw);
      std::printf("%s: h5 %.1f MB/s, raw %.1f MB/s, h5/raw time ratio %.2f\n", what, kBytes / a / 1e6,
                  kBytes / b / 1e6, a / b);
    };
    line("save (incl. fsync)", "BM_H5Save", "BM_RawSave");
    line("load (page cache) ", "BM_H5Load", "BM_RawLoad");
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--dir=", 6) == 0) g_dir = argv[i] + 6;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.summary();
  std::error_code ec;
  std::filesystem::remove(h5_path(), ec);
  std::filesystem::remove(raw_path(), ec);
  benchmark::Shutdown();
  return 0;
}
