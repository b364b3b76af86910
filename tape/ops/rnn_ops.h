// Recurrent ops: the fused element-wise part of an LSTM step (its GEMMs stay MatMul ops), and a whole
// LSTM sequence in one op (the recurrent GEMM of every step inside).
//
// DTypes:   float32, float64; all inputs of one call must match.
// Errors:   std::invalid_argument naming the op and the shapes received.
// Ref:      tf.raw_ops.LSTMBlockCell / BlockLSTM (tensorflow/core/kernels/rnn/lstm_ops.cc) without
//           peepholes and cell clip; Keras's gate order i, f, c, o (keras/src/layers/rnn/lstm.py)
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

// The outputs of a whole LSTM sequence, time-major: each LstmCellOutputs field of every step.
struct LstmSequenceOutputs {
  Tensor h;      // [steps, batch, u]
  Tensor c;      // [steps, batch, u]
  Tensor gates;  // [steps, batch, 4u]
  Tensor tc;     // [steps, batch, u]
};

// A whole LSTM sequence: for t = 0 .. steps-1, lstm_block_cell((x[t] wx + b) + h_{t-1} wh, c_{t-1})
// from h_{-1} = h0, c_{-1} = c0 (Keras's LSTM with tanh / sigmoid, no mask, no dropout).
// Op "BlockLSTM" (kernels::lstm_sequence: blocks of batch rows through every step, wh and wx packed
// once, the float cell rows vectorised per ISA).
// Shapes:   x [steps, batch, in] (time-major), wx [in, 4u], wh [u, 4u], b [4u], h0 and c0 [batch, u]
//           -> each output as above. Values: those of the step by step ops, bit for bit on the
//           packed GEMM (AVX2 and up).
// Errors:   std::invalid_argument unless x is rank 3 with steps >= 1, wx [in, 4u], wh [u, 4u], b [4u],
//           h0 and c0 [batch, u]; dtypes other than float32/float64 or differing.
// Gradient: the step formulas of lstm_block_cell back through time (dz_t, the gradient of the gate
//           pre-activations), plus dh_{t-1} += dz_t whᵀ; then dwx = Σ_t x_tᵀ dz_t, dwh = Σ_t h_{t-1}ᵀ
//           dz_t, db = Σ_t Σ_rows dz_t, dx_t = dz_t wxᵀ. With no recorder and no batched cotangent it is
//           one kernel (kernels::lstm_sequence_grad: dwx, dwh and db in one GEMM over all steps);
//           when a tape records the backward pass (second order) or under a vectorized jacobian, the
//           same math with ops (MatMul per step, the cell's ops), so every order works. Backward saves
//           every input and output (kSaveAll); outputs that receive no gradient get none, not zeros
//           (OpDef::takes_missing_grads). Batching: sequential (one call per k).
LstmSequenceOutputs block_lstm(const Tensor& x, const Tensor& wx, const Tensor& wh, const Tensor& b, const Tensor& h0,
                               const Tensor& c0);

}  // namespace tapeflow
