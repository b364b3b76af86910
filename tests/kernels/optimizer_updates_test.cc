// kernels::sgd_update & co. (tape/kernels/optimizer_updates.h) at every instruction-set level this
// CPU has, forced with set_max_cpu_isa: the same bits at every level (as the header states) and,
// at each, within rounding of float64 loops of the same formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/optimizer_updates.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

// 4 arrays (w, slots...) and g; n leaves a tail after every vector width (4, 8, 16 lanes).
constexpr std::int64_t kN = 1000 + 13;

template <class T>
struct Arrays {
  std::vector<std::vector<T>> a;  // w, s1, s2, s3
  std::vector<T> g;
};

template <class T>
Arrays<T> random_arrays(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), pos(0.01, 1.0);
  Arrays<T> r;
  r.a.resize(4);
  for (std::int64_t i = 0; i < kN; ++i) {
    r.a[0].push_back(static_cast<T>(u(gen)));
    r.a[1].push_back(static_cast<T>(pos(gen)));  // positive: rms / v / accumulators
    r.a[2].push_back(static_cast<T>(u(gen)));
    r.a[3].push_back(static_cast<T>(pos(gen)));
    r.g.push_back(static_cast<T>(u(gen)));
  }
  // RMSprop centered needs rms > mg²: keep the average gradient small.
  for (auto& x : r.a[2]) x = static_cast<T>(x * 0.05);
  return r;
}

// One update of each kind over copies of `in`: the arrays after it.
template <class T>
std::vector<std::vector<std::vector<T>>> run_all(const Arrays<T>& in) {
  std::vector<std::function<void(std::vector<std::vector<T>>&, const T*)>> updates = {
      [](auto& a, const T* g) { sgd_update<T>(a[0].data(), nullptr, g, kN, T(0.1), T(0), false); },
      [](auto& a, const T* g) { sgd_update<T>(a[0].data(), a[2].data(), g, kN, T(0.1), T(0.9), false); },
      [](auto& a, const T* g) { sgd_update<T>(a[0].data(), a[2].data(), g, kN, T(0.1), T(0.9), true); },
      [](auto& a, const T* g) {
        adam_update<T>(a[0].data(), a[2].data(), a[1].data(), nullptr, g, kN, T(1e-3), T(1e-7), T(0.1), T(0.001));
      },
      [](auto& a, const T* g) {
        adam_update<T>(a[0].data(), a[2].data(), a[1].data(), a[3].data(), g, kN, T(1e-3), T(1e-7), T(0.1), T(0.001));
      },
      [](auto& a, const T* g) {
        rmsprop_update<T>(a[0].data(), a[1].data(), nullptr, nullptr, g, kN, T(0.9), T(1e-7), T(1e-2), T(0));
      },
      [](auto& a, const T* g) {
        rmsprop_update<T>(a[0].data(), a[1].data(), a[3].data(), a[2].data(), g, kN, T(0.9), T(1e-7), T(1e-2), T(0.5));
      },
      [](auto& a, const T* g) { adagrad_update<T>(a[0].data(), a[1].data(), g, kN, T(1e-7), T(1e-2)); },
  };
  std::vector<std::vector<std::vector<T>>> out;
  for (const auto& u : updates) {
    auto a = in.a;
    u(a, in.g.data());
    out.push_back(a);
  }
  return out;
}

// The same formulas in float64, one element at a time.
std::vector<std::vector<std::vector<double>>> reference(const Arrays<double>& in) {
  std::vector<std::vector<std::vector<double>>> out;
  const auto& g = in.g;
  auto each = [&](auto f) {
    auto a = in.a;
    for (std::int64_t i = 0; i < kN; ++i) f(a, i);
    out.push_back(a);
  };
  each([&](auto& a, std::int64_t i) { a[0][i] -= 0.1 * g[i]; });
  each([&](auto& a, std::int64_t i) {
    a[2][i] = 0.9 * a[2][i] - 0.1 * g[i];
    a[0][i] += a[2][i];
  });
  each([&](auto& a, std::int64_t i) {
    a[2][i] = 0.9 * a[2][i] - 0.1 * g[i];
    a[0][i] += 0.9 * a[2][i] - 0.1 * g[i];
  });
  for (bool ams : {false, true})
    each([&](auto& a, std::int64_t i) {
      a[2][i] += (g[i] - a[2][i]) * 0.1;
      a[1][i] += (g[i] * g[i] - a[1][i]) * 0.001;
      double v = a[1][i];
      if (ams) v = a[3][i] = std::max(a[3][i], v);
      a[0][i] -= a[2][i] * 1e-3 / (std::sqrt(v) + 1e-7);
    });
  each([&](auto& a, std::int64_t i) {
    a[1][i] = 0.9 * a[1][i] + 0.1 * g[i] * g[i];
    a[0][i] -= 1e-2 * g[i] / std::sqrt(a[1][i] + 1e-7);
  });
  each([&](auto& a, std::int64_t i) {
    a[1][i] = 0.9 * a[1][i] + 0.1 * g[i] * g[i];
    a[2][i] = 0.9 * a[2][i] + 0.1 * g[i];
    a[3][i] = 0.5 * a[3][i] + 1e-2 * g[i] / std::sqrt(a[1][i] - a[2][i] * a[2][i] + 1e-7);
    a[0][i] -= a[3][i];
  });
  each([&](auto& a, std::int64_t i) {
    a[1][i] += g[i] * g[i];
    a[0][i] -= 1e-2 * g[i] / std::sqrt(a[1][i] + 1e-7);
  });
  return out;
}

using testing::IsaCap;  // tests/testing/isa_cap.h

template <class T>
void check_levels(double rtol) {
  const Arrays<T> in = random_arrays<T>(3);
  Arrays<double> wide;
  for (const auto& v : in.a) wide.a.emplace_back(v.begin(), v.end());
  wide.g.assign(in.g.begin(), in.g.end());
  const auto ref = reference(wide);
  std::vector<std::vector<std::vector<T>>> first;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > host_cpu_isa()) continue;
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    const IsaCap cap(isa);
    ASSERT_EQ(cpu_isa(), isa);
    const auto got = run_all(in);
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t u = 0; u < got.size(); ++u)
      for (std::size_t k = 0; k < 4; ++k)
        for (std::int64_t i = 0; i < kN; ++i) {
          const double want = ref[u][k][i], have = got[u][k][i];
          ASSERT_LE(std::abs(have - want), rtol * (std::abs(want) + 1e-3))
              << "update " << u << " array " << k << " element " << i;
        }
    if (first.empty()) first = got;
    else EXPECT_EQ(got, first) << "bits differ from the baseline's";
  }
}

TEST(OptimizerUpdates, EveryLevelGivesTheSameBitsWithinRoundingOfFloat64Float) { check_levels<float>(1e-5); }
TEST(OptimizerUpdates, EveryLevelGivesTheSameBitsWithinRoundingOfFloat64Double) { check_levels<double>(1e-13); }

}  // namespace
}  // namespace tapeflow::kernels
