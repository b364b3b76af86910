// The LSTM kernels' float rows (tape/kernels/rnn.h over ukernels/lstm_cell.cc): the same bits at
// kAvx2 and kAvx512 and for 1 and 2 threads, on units that are and are not a multiple of the
// packets' lanes, with pre-activations past the rational approximations' cut-offs; and values
// within float rounding of float64 loops of the exact functions.
#include "tape/kernels/rnn.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tests/kernels/reference.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

using testing::IsaCap;
using testref::random_vector;

struct Sizes {
  std::int64_t steps, rows, in, u;
};

// Everything lstm_sequence and lstm_sequence_grad produce for one problem, concatenated; gates
// pre-activations spread over [-spread, spread] (wide enough to pass σ's -9 and tanh's ±8 cut-offs).
std::vector<float> sequence_outputs(const Sizes& s, double spread) {
  const std::int64_t su = s.steps * s.rows * s.u, sz = 4 * su;
  const auto x = random_vector<float>(s.steps * s.rows * s.in, 1, -spread, spread);
  const auto wx = random_vector<float>(s.in * 4 * s.u, 2), wh = random_vector<float>(s.u * 4 * s.u, 3, -0.5, 0.5);
  const auto b = random_vector<float>(4 * s.u, 4, -spread, spread);
  const auto h0 = random_vector<float>(s.rows * s.u, 5), c0 = random_vector<float>(s.rows * s.u, 6, -3, 3);
  std::vector<float> h(su), c(su), tc(su), gates(sz);
  lstm_sequence<float>(x.data(), wx.data(), wh.data(), b.data(), h0.data(), c0.data(), s.steps, s.rows, s.in, s.u,
                       h.data(), c.data(), gates.data(), tc.data());
  const auto gh = random_vector<float>(su, 7), gc = random_vector<float>(su, 8), gg = random_vector<float>(sz, 9),
             gt = random_vector<float>(su, 10);
  std::vector<float> out;
  for (const auto* v : {&h, &c, &tc, &gates}) out.insert(out.end(), v->begin(), v->end());
  for (int variant = 0; variant < 2; ++variant) {  // every cotangent, then h's alone
    std::vector<float> dx(s.steps * s.rows * s.in), dwx(s.in * 4 * s.u), dwh(s.u * 4 * s.u), db(4 * s.u),
        dh0(s.rows * s.u), dc0(s.rows * s.u);
    const bool all = variant == 0;
    lstm_sequence_grad<float>(x.data(), wx.data(), wh.data(), h0.data(), c0.data(), h.data(), c.data(), gates.data(),
                              tc.data(), gh.data(), all ? gc.data() : nullptr, all ? gg.data() : nullptr,
                              all ? gt.data() : nullptr, s.steps, s.rows, s.in, s.u, dx.data(), dwx.data(),
                              dwh.data(), db.data(), dh0.data(), dc0.data());
    for (const auto* v : {&dx, &dwx, &dwh, &db, &dh0, &dc0}) out.insert(out.end(), v->begin(), v->end());
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const Sizes kSizes[] = {{3, 5, 2, 5}, {4, 19, 3, 16}, {2, 70, 28, 37}, {3, 130, 28, 128}};

TEST(LstmKernels, FloatRowsSameBitsAtAvx2AndAvx512) {
  if (host_cpu_isa() < CpuIsa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512F/BW/VL";
  for (const Sizes& s : kSizes) {
    std::vector<float> wide, narrow;
    {
      const IsaCap cap(CpuIsa::kAvx512);
      wide = sequence_outputs(s, 12.0);
    }
    {
      const IsaCap cap(CpuIsa::kAvx2);
      narrow = sequence_outputs(s, 12.0);
    }
    EXPECT_TRUE(same_bits(wide, narrow)) << "u " << s.u << ", rows " << s.rows;
  }
}

TEST(LstmKernels, FloatSequenceSameBitsForOneAndTwoThreads) {
  for (const Sizes& s : kSizes) {
    std::vector<float> one, two;
    tbb::task_arena(1).execute([&] { one = sequence_outputs(s, 4.0); });
    tbb::task_arena(2).execute([&] { two = sequence_outputs(s, 4.0); });
    EXPECT_TRUE(same_bits(one, two)) << "u " << s.u << ", rows " << s.rows;
  }
}

// lstm_cell (float) against float64 loops of the exact σ and tanh, at every level the CPU has.
TEST(LstmKernels, FloatCellCloseToExactFunctions) {
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (host_cpu_isa() < isa) continue;
    const IsaCap cap(isa);
    for (std::int64_t u : {1, 7, 16, 45}) {
      const std::int64_t rows = 9;
      const auto z = random_vector<float>(rows * 4 * u, 11, -20, 20), cp = random_vector<float>(rows * u, 12, -3, 3);
      std::vector<float> h(rows * u), c(rows * u), tc(rows * u), gates(rows * 4 * u);
      lstm_cell<float>(z.data(), cp.data(), rows, u, h.data(), c.data(), gates.data(), tc.data());
      auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < u; ++j) {
          const float* zr = z.data() + r * 4 * u;
          const double i = sig(zr[j]), f = sig(zr[u + j]), g = std::tanh(double(zr[2 * u + j])), o = sig(zr[3 * u + j]);
          const double cv = f * cp[r * u + j] + i * g;
          const std::int64_t k = r * u + j;
          const float* gr = gates.data() + r * 4 * u;
          EXPECT_NEAR(gr[j], i, 1e-6 * (1 + i)) << cpu_isa_name(isa) << " u " << u << " z " << zr[j];
          EXPECT_NEAR(gr[u + j], f, 1e-6 * (1 + f)) << cpu_isa_name(isa) << " u " << u;
          EXPECT_NEAR(gr[2 * u + j], g, 1e-6) << cpu_isa_name(isa) << " u " << u;
          EXPECT_NEAR(gr[3 * u + j], o, 1e-6 * (1 + o)) << cpu_isa_name(isa) << " u " << u;
          EXPECT_NEAR(c[k], cv, 1e-5) << cpu_isa_name(isa) << " u " << u;
          EXPECT_NEAR(tc[k], std::tanh(double(c[k])), 1e-6) << cpu_isa_name(isa) << " u " << u;
          EXPECT_NEAR(h[k], gr[3 * u + j] * std::tanh(double(c[k])), 2e-6) << cpu_isa_name(isa) << " u " << u;
        }
    }
  }
}

}  // namespace
}  // namespace tapeflow::kernels
