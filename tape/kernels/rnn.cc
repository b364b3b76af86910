#include "tape/kernels/rnn.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

namespace {

// The gate activations of one row: σ on i, f, o and tanh on g; Eigen's packet logistic / tanh for
// float (as the Sigmoid and Tanh ops), the scalar functions for double.
template <class T>
void gate_activations(const T* zr, T* gr, std::int64_t u) {
  if constexpr (std::is_same_v<T, float>) {
    using Map = Eigen::Map<Eigen::ArrayXf>;
    using CMap = Eigen::Map<const Eigen::ArrayXf>;
    Map(gr, 2 * u) = CMap(zr, 2 * u).logistic();
    Map(gr + 2 * u, u) = CMap(zr + 2 * u, u).tanh();
    Map(gr + 3 * u, u) = CMap(zr + 3 * u, u).logistic();
  } else {
    const auto sig = [](T v) { return v >= 0 ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v)); };
    for (std::int64_t j = 0; j < 2 * u; ++j) gr[j] = sig(zr[j]);
    for (std::int64_t j = 2 * u; j < 3 * u; ++j) gr[j] = std::tanh(zr[j]);
    for (std::int64_t j = 3 * u; j < 4 * u; ++j) gr[j] = sig(zr[j]);
  }
}

}  // namespace

template <class T>
void lstm_cell(const T* z, const T* c_prev, std::int64_t rows, std::int64_t u, T* h, T* c, T* gates, T* tc) {
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / std::max<std::int64_t>(4 * u, 1));
  parallel_for(rows, grain, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      T* gr = gates + b * 4 * u;
      gate_activations(z + b * 4 * u, gr, u);
      const T* cp = c_prev + b * u;
      T *cr = c + b * u, *tr = tc + b * u, *hr = h + b * u;
      for (std::int64_t j = 0; j < u; ++j) cr[j] = gr[u + j] * cp[j] + gr[j] * gr[2 * u + j];
      if constexpr (std::is_same_v<T, float>) {
        Eigen::Map<Eigen::ArrayXf>(tr, u) = Eigen::Map<const Eigen::ArrayXf>(cr, u).tanh();
      } else {
        for (std::int64_t j = 0; j < u; ++j) tr[j] = std::tanh(cr[j]);
      }
      for (std::int64_t j = 0; j < u; ++j) hr[j] = gr[3 * u + j] * tr[j];
    }
  });
}

template void lstm_cell<float>(const float*, const float*, std::int64_t, std::int64_t, float*, float*, float*, float*);
template void lstm_cell<double>(const double*, const double*, std::int64_t, std::int64_t, double*, double*, double*,
                                double*);

}  // namespace tapeflow::kernels
