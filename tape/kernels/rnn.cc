#include "tape/kernels/rnn.h"

#include <cmath>

#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

template <class T>
void lstm_cell(const T* z, const T* c_prev, std::int64_t rows, std::int64_t u, T* h, T* c, T* gates, T* tc) {
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / std::max<std::int64_t>(4 * u, 1));
  parallel_for(rows, grain, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* zr = z + b * 4 * u;
      T* gr = gates + b * 4 * u;
      const T one = T(1);
      for (std::int64_t j = 0; j < u; ++j) gr[j] = one / (one + std::exp(-zr[j]));
      for (std::int64_t j = u; j < 2 * u; ++j) gr[j] = one / (one + std::exp(-zr[j]));
      for (std::int64_t j = 2 * u; j < 3 * u; ++j) gr[j] = std::tanh(zr[j]);
      for (std::int64_t j = 3 * u; j < 4 * u; ++j) gr[j] = one / (one + std::exp(-zr[j]));
      const T* cp = c_prev + b * u;
      T *cr = c + b * u, *tr = tc + b * u, *hr = h + b * u;
      for (std::int64_t j = 0; j < u; ++j) {
        cr[j] = gr[u + j] * cp[j] + gr[j] * gr[2 * u + j];
        tr[j] = std::tanh(cr[j]);
        hr[j] = gr[3 * u + j] * tr[j];
      }
    }
  });
}

template void lstm_cell<float>(const float*, const float*, std::int64_t, std::int64_t, float*, float*, float*, float*);
template void lstm_cell<double>(const double*, const double*, std::int64_t, std::int64_t, double*, double*, double*,
                                double*);

}  // namespace tapeflow::kernels
