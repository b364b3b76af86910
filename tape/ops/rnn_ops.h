// Recurrent-cell ops: the fused element-wise part of an LSTM step (the GEMMs stay MatMul ops).
//
// DTypes:   float32, float64; z and c_prev must match.
// Errors:   std::invalid_argument naming the op and the shapes received.
// Ref:      tf.raw_ops.LSTMBlockCell (tensorflow/core/kernels/rnn/lstm_ops.cc) without its GEMMs and
//           peepholes; Keras's gate order i, f, c, o (keras/src/layers/rnn/lstm.py)
#pragma once

#include "tape/core/tensor.h"

namespace tapeflow {

// The outputs of one fused LSTM step.
struct LstmCellOutputs {
  Tensor h;      // [batch, u] = o·tanh(c)
  Tensor c;      // [batch, u] = f·c_prev + i·g
  Tensor gates;  // [batch, 4u] = (i, f, g, o) = (σ(z_i), σ(z_f), tanh(z_c), σ(z_o))
  Tensor tc;     // [batch, u] = tanh(c)
};

// One LSTM step's element-wise math, fused: from the gate pre-activations z = x Wx + h_prev Wh + b and
// the previous cell state. Op "LSTMBlockCell" (one kernel, outputs h, c, gates, tc).
// Shapes:   z [batch, 4u], c_prev [batch, u] -> each output as above.
// Errors:   std::invalid_argument unless z is rank 2 with a last dim divisible by 4 and c_prev is
//           [batch, u]; dtypes other than float32/float64 or differing.
// Gradient: with ops on the saved c_prev, gates and tc, so every order works: with
//           ĝc = g_c + (g_tc + g_h·o)(1 - tc²): dz = (ĝc·g + g_i)·i(1-i), (ĝc·c_prev + g_f)·f(1-f),
//           (ĝc·i + g_g)(1-g²), (g_h·tc + g_o)·o(1-o); dc_prev = ĝc·f.
//           Backward saves the input c_prev and the outputs gates and tc (kSaveAll).
LstmCellOutputs lstm_block_cell(const Tensor& z, const Tensor& c_prev);

}  // namespace tapeflow
