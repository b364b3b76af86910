// Neural-network kernels over the last axis: softmax, log_softmax and the fused sparse softmax
// cross-entropy.
// Shapes:   x [rows, cols]; softmax over cols. sparse_softmax_xent: logits [rows, cols], labels
//           [rows] -> loss [rows], backprop [rows, cols] (backprop may be null).
// DTypes:   float, double; labels int32, int64.
// Facts:    Numerically stable (the row max is subtracted before exp).
//           loss[r] = logsumexp(x_r) - x_r[label_r]; backprop = softmax(x) - onehot(label).
// Errors:   sparse_softmax_xent: std::invalid_argument naming the label and cols if a label is
//           outside [0, cols).
// Ref:      tf.nn.softmax, tf.nn.log_softmax, tf.nn.sparse_softmax_cross_entropy_with_logits
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

template <class T>
void softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y);
template <class T>
void log_softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y);
template <class T, class I>
void sparse_softmax_xent(const T* logits, const I* labels, std::int64_t rows, std::int64_t cols, T* loss,
                         T* backprop);

}  // namespace tapeflow::kernels
