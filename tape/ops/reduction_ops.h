// Reductions: sum, mean, max, min over an axis list or all axes, with keepdims.
//
// Shapes:   x [d0, ..., dn]; the reduced axes are removed (kept as 1 with keepdims).
//           No axes argument = all axes. Negative axes count from the end.
// DTypes:   float32, float64, int32, int64 (mean of integers truncates, as TF).
// Errors:   std::invalid_argument for an axis out of range or repeated (names the op and shape).
// Gradient: sum: broadcast g back; mean: broadcast g / count; max/min: g split evenly between
//           the tied extreme elements (TF's _MinOrMaxGrad).
// Ref:      tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min, tf.norm
#pragma once

#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

Tensor reduce_sum(const Tensor& x);
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_sum(const Tensor& x, int axis, bool keepdims = false);
Tensor reduce_mean(const Tensor& x);
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_mean(const Tensor& x, int axis, bool keepdims = false);
Tensor reduce_max(const Tensor& x);
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_max(const Tensor& x, int axis, bool keepdims = false);
Tensor reduce_min(const Tensor& x);
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
Tensor reduce_min(const Tensor& x, int axis, bool keepdims = false);

}  // namespace tapeflow
