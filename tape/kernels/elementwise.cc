#include "tape/kernels/elementwise.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tape/kernels/reduce.h"

namespace tapeflow::kernels {

template <class T>
void broadcast_to(const T* x, const Shape& sx, T* y, const Shape& sy) {
  const std::int64_t n = sy.num_elements();
  if (n == 0) return;
  const auto plan = internal::make_broadcast_plan<1>({&sx}, sy, "broadcast_to");
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    internal::for_each_run<1>(plan, s, e, [&](std::int64_t o, const auto& offs, std::int64_t len, const auto& st) {
      if (st[0] == 1) std::copy(x + offs[0], x + offs[0] + len, y + o);
      else if (st[0] == 0) std::fill(y + o, y + o + len, x[offs[0]]);
      else
        for (std::int64_t j = 0; j < len; ++j) y[o + j] = x[offs[0] + j * st[0]];
    });
  });
}

template <class T>
void sum_to_shape(const T* x, const Shape& sx, T* y, const Shape& sy) {
  auto fail = [&] {
    throw std::invalid_argument("sum_to_shape: " + sy.to_string() + " does not broadcast to " + sx.to_string());
  };
  // Drop leading 1s of sy beyond the rank of sx.
  Shape t;
  int extra = sy.rank() - sx.rank();
  for (int i = 0; i < sy.rank(); ++i) {
    if (i < extra) {
      if (sy[i] != 1) fail();
    } else {
      t.push_back(sy[i]);
    }
  }
  const int off = sx.rank() - t.rank();
  if (off < 0) fail();
  std::uint32_t mask = 0;
  for (int i = 0; i < sx.rank(); ++i) {
    const std::int64_t d = i < off ? 1 : t[i - off];
    if (d == sx[i]) continue;
    if (d != 1) fail();
    mask |= 1u << i;
  }
  reduce_sum(x, sx, mask, y);
}

#define TAPEFLOW_BROADCAST(T) template void broadcast_to<T>(const T*, const Shape&, T*, const Shape&);
TAPEFLOW_BROADCAST(float)
TAPEFLOW_BROADCAST(double)
TAPEFLOW_BROADCAST(std::int32_t)
TAPEFLOW_BROADCAST(std::int64_t)
TAPEFLOW_BROADCAST(bool)
#undef TAPEFLOW_BROADCAST

#define TAPEFLOW_SUM_TO(T) template void sum_to_shape<T>(const T*, const Shape&, T*, const Shape&);
TAPEFLOW_SUM_TO(float)
TAPEFLOW_SUM_TO(double)
TAPEFLOW_SUM_TO(std::int32_t)
TAPEFLOW_SUM_TO(std::int64_t)
#undef TAPEFLOW_SUM_TO

}  // namespace tapeflow::kernels
