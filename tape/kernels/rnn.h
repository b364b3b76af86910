// Recurrent-cell kernels: the element-wise part of one LSTM step, fused (TF's LSTMBlockCell without
// its GEMMs). Pure compute on spans; no autodiff.
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// For each of `rows` rows: z [4u] pre-activations of the gates i, f, c, o (Keras's order) and c_prev [u]
// -> gates [4u] = (σ(z_i), σ(z_f), tanh(z_c), σ(z_o)), c = f·c_prev + i·g, tc = tanh(c), h = o·tc.
// σ is the logistic sigmoid. Row-major, rows independent (parallel over rows).
template <class T>
void lstm_cell(const T* z, const T* c_prev, std::int64_t rows, std::int64_t u, T* h, T* c, T* gates, T* tc);

}  // namespace tapeflow::kernels
