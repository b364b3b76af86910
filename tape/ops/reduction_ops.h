// Reductions: sum, mean, max, min over an axis list or all axes, with keepdims.
//
// Shapes:   x [d0, ..., dn]; the reduced axes are removed (kept as 1 with keepdims).
//           No axes argument = all axes. Negative axes count from the end.
// DTypes:   float32, float64, int32, int64 (mean of integers truncates, as TF).
// Errors:   std::invalid_argument for an axis out of range or repeated (names the op and shape).
// Gradient: sum: broadcast g back; mean: broadcast g / count; max/min: g split evenly between
//           the tied extreme elements (TF's _MinOrMaxGrad).
// Batching: axes shift by one behind the batch dimension (batching_rules.h: reduction()); inside a
//           vectorized backward pass axes are per example.
// Ref:      tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min, tf.norm
#pragma once

#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

// Sum of the elements over `axes` (none given: all axes).
// Shapes:   x [d0, ..., dn] -> x without the reduced axes ([] for all), or with them as 1 (keepdims).
// DTypes:   float32, float64, int32, int64; the result has x's dtype. The sum over an empty axis is 0.
// Errors:   std::invalid_argument "Sum: axis A out of range for rank R" / "axis A repeated for shape S";
//           bool inputs (names reduce_sum and the dtype).
// Gradient: dx = broadcast of g (reshaped with the reduced axes as 1) to x's shape.
// Ref:      tf.math.reduce_sum
Tensor reduce_sum(const Tensor& x);
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_sum(const Tensor& x, int axis, bool keepdims = false);

// Mean of the elements over `axes` (none given: all axes).
// Shapes:   as reduce_sum.
// DTypes:   as reduce_sum; the mean of integers truncates toward zero (as TF); over an empty axis it is
//           0 here (TF gives NaN for floats).
// Errors:   as reduce_sum (messages name Mean / reduce_mean).
// Gradient: dx = broadcast of g / n, n = number of reduced elements per output.
// Ref:      tf.math.reduce_mean
Tensor reduce_mean(const Tensor& x);
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_mean(const Tensor& x, int axis, bool keepdims = false);

// Largest element over `axes` (none given: all axes). NaN propagates.
// Shapes:   as reduce_sum.
// DTypes:   float32, float64, int32, int64.
// Errors:   as reduce_sum (Max / reduce_max); std::invalid_argument "reduce_max: empty reduction of
//           shape S" when a reduced axis has size 0 and the result is not empty.
// Gradient: g split evenly among the elements equal to the maximum (ties share it: [1, 3, 3] gets
//           [0, g/2, g/2]), TF's _MinOrMaxGrad; second order through the same ops.
// Ref:      tf.math.reduce_max
Tensor reduce_max(const Tensor& x);
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_max(const Tensor& x, int axis, bool keepdims = false);

// Smallest element over `axes` (none given: all axes). As reduce_max, with ties of the minimum.
// Ref:      tf.math.reduce_min
Tensor reduce_min(const Tensor& x);
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_min(const Tensor& x, int axis, bool keepdims = false);

}  // namespace tapeflow
