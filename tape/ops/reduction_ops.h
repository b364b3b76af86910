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
// Batching: axes shift by one behind the batch dimension (batching_rules.h: reduction()); inside a
//           vectorized backward pass axes are per example.
// Ref:      tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min, tf.norm
#pragma once

#include <concepts>
#include <optional>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

template <class I>
concept ReductionAxis = std::integral<I> && !std::same_as<I, bool>;

// Sum of the elements over the axes (see above for which).
// Shapes:   x [d0, ..., dn] -> without the reduced axes ([] for all), or with them as 1 (keepdims).
// DTypes:   float32, float64, int32, int64; the result has x's dtype. The sum over an empty axis is 0.
// Errors:   std::invalid_argument "Sum: axis A out of range for rank R" / "axis A repeated for shape S";
//           bool inputs (names reduce_sum and the dtype).
// Gradient: dx = broadcast of g (reshaped with the reduced axes as 1) to x's shape.
// Ref:      tf.math.reduce_sum
Tensor reduce_sum(const Tensor& x);
// Sum over all axes; keepdims keeps them as 1s (shape [1, ..., 1]). TF's axis=None.
Tensor reduce_sum(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
// Sum over the listed axes (negative count from the end; an empty list reduces nothing).
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
// Sum over one axis: reduce_sum(x, {axis}, keepdims).
Tensor reduce_sum(const Tensor& x, I axis, bool keepdims = false) { return reduce_sum(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }

// Mean of the elements over the axes.
// Shapes:   as reduce_sum.
// DTypes:   as reduce_sum; the mean of integers truncates toward zero (as TF); over an empty axis it is
//           0 here (TF gives NaN for floats).
// Errors:   as reduce_sum (messages name Mean / reduce_mean).
// Gradient: dx = broadcast of g / n, n = number of reduced elements per output.
// Ref:      tf.math.reduce_mean
Tensor reduce_mean(const Tensor& x);
// Mean over all axes; keepdims keeps them as 1s (shape [1, ..., 1]). TF's axis=None.
Tensor reduce_mean(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
// Mean over the listed axes (negative count from the end; an empty list reduces nothing).
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
// Mean over one axis: reduce_mean(x, {axis}, keepdims).
Tensor reduce_mean(const Tensor& x, I axis, bool keepdims = false) { return reduce_mean(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }

// Largest element over the axes. NaN propagates.
// Shapes:   as reduce_sum.
// DTypes:   float32, float64, int32, int64.
// Errors:   as reduce_sum (Max / reduce_max); std::invalid_argument "reduce_max: empty reduction of
//           shape S" when a reduced axis has size 0 and the result is not empty.
// Gradient: g split evenly among the elements equal to the maximum (ties share it: [1, 3, 3] gets
//           [0, g/2, g/2]), TF's _MinOrMaxGrad; second order through the same ops.
// Ref:      tf.math.reduce_max
Tensor reduce_max(const Tensor& x);
// Largest element over all axes; keepdims keeps them as 1s (shape [1, ..., 1]). TF's axis=None.
Tensor reduce_max(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
// Largest element over the listed axes (negative count from the end; an empty list reduces nothing).
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
// Largest element over one axis: reduce_max(x, {axis}, keepdims).
Tensor reduce_max(const Tensor& x, I axis, bool keepdims = false) { return reduce_max(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }

// Smallest element over the axes. As reduce_max, with ties of the minimum.
// Ref:      tf.math.reduce_min
Tensor reduce_min(const Tensor& x);
// Smallest element over all axes; keepdims keeps them as 1s (shape [1, ..., 1]). TF's axis=None.
Tensor reduce_min(const Tensor& x, std::nullopt_t all_axes, bool keepdims);
// Smallest element over the listed axes (negative count from the end; an empty list reduces nothing).
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
template <ReductionAxis I>
// Smallest element over one axis: reduce_min(x, {axis}, keepdims).
Tensor reduce_min(const Tensor& x, I axis, bool keepdims = false) { return reduce_min(x, std::vector<int>{static_cast<int>(axis)}, keepdims); }

}  // namespace tapeflow
