// Reductions: sum, mean, max, min over an axis list or all axes, with keepdims.
//
// Shapes:   x [d0, ..., dn]; the reduced axes are removed (kept as 1 with keepdims).
//           Which axes, as TF's `axis` argument:
//             reduce_sum(x)                      all axes                    (axis=None)
//             reduce_sum(x, std::nullopt, true)  all axes, kept as 1s        (axis=None, keepdims=True)
//             reduce_sum(x, {0, 2}), (x, -1)     those axes; negative ones count from the end
//             reduce_sum(x, {}, keepdims)        no axis: x unchanged        (axis=[])
//           Note the last: an empty list reduces nothing, as in TF; all axes is std::nullopt.
// DTypes:   float32, float64, int32, int64 (mean of integers truncates, as TF).
// Errors:   std::invalid_argument for an axis out of range or repeated (names the op and shape).
// Gradient: sum: broadcast g back; mean: broadcast g / count; max/min: g split evenly between
//           the tied extreme elements (TF's _MinOrMaxGrad).
// Ref:      tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min, tf.norm
#pragma once

#include <concepts>
#include <optional>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

template <class I>
concept ReductionAxis = std::integral<I> && !std::same_as<I, bool>;

Tensor reduce_sum(const Tensor& x);
Tensor reduce_sum(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
Tensor reduce_sum(const Tensor& x, I axis, bool keepdims = false) { return reduce_sum(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }
Tensor reduce_mean(const Tensor& x);
Tensor reduce_mean(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
Tensor reduce_mean(const Tensor& x, I axis, bool keepdims = false) { return reduce_mean(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }
Tensor reduce_max(const Tensor& x);
Tensor reduce_max(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
Tensor reduce_max(const Tensor& x, I axis, bool keepdims = false) { return reduce_max(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }
Tensor reduce_min(const Tensor& x);
Tensor reduce_min(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
Tensor reduce_min(const Tensor& x, I axis, bool keepdims = false) { return reduce_min(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }

}  // namespace tapeflow
