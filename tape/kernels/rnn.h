// Recurrent-cell kernels: the element-wise part of one LSTM step, fused (TF's LSTMBlockCell without
// its GEMMs), and a whole LSTM sequence with its backward (TF's BlockLSTM / BlockLSTMGrad without
// peepholes and cell clip). Pure compute on spans; no autodiff.
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// For each of `rows` rows: z [4u] pre-activations of the gates i, f, c, o (Keras's order) and c_prev [u]
// -> gates [4u] = (σ(z_i), σ(z_f), tanh(z_c), σ(z_o)), c = f·c_prev + i·g, tc = tanh(c), h = o·tc.
// σ is the logistic sigmoid. Row-major, rows independent (parallel over rows). Float rows run on the
// cell rows of cpu_isa()'s level (ukernels/internal/lstm_cell.h: the same bits at kAvx2 and kAvx512);
// double rows on scalar loops.
template <class T>
void lstm_cell(const T* z, const T* c_prev, std::int64_t rows, std::int64_t u, T* h, T* c, T* gates, T* tc);

// A whole LSTM sequence: for t = 0 .. steps-1, z_t = (x_t wx + b) + h_{t-1} wh and
// lstm_cell(z_t, c_{t-1}) -> h_t, c_t, gates_t, tc_t, from h_{-1} = h0, c_{-1} = c0.
// Shapes:   x [steps, rows, in] (time-major), wx [in, 4u], wh [u, 4u], b [4u], h0 and c0 [rows, u]
//           -> h, c, tc [steps, rows, u], gates [steps, rows, 4u].
// Facts:    A row of the batch depends on that row alone through the whole sequence, so blocks of
//           rows run every step in parallel (one task per thread, no synchronisation per step); wh is
//           packed once (MatmulRhs) for all steps and blocks, the bias added inside the cell rows.
//           x_t wx runs per block and step too (wx packed once) where each block's product takes
//           the packed GEMM (AVX2 and up, >= 6 rows and kMatmulSerialWork multiply-adds), else for
//           all steps in one GEMM up front. Each z_t has the bits of
//           (matmul(x_t, wx) + b) + matmul(h_{t-1}, wh) and each row those of lstm_cell: the values of
//           the step by step ops, for any thread count.
template <class T>
void lstm_sequence(const T* x, const T* wx, const T* wh, const T* b, const T* h0, const T* c0, std::int64_t steps,
                   std::int64_t rows, std::int64_t in, std::int64_t u, T* h, T* c, T* gates, T* tc);

// The backward of lstm_sequence from the gradients of its four outputs (gh, gc, gtc [steps, rows, u],
// ggates [steps, rows, 4u]; any may be null for zeros) and its saved values (x, wx, wh, h0, c0 and the
// outputs h, c, gates, tc): dx [steps, rows, in] (null: not wanted), dwx [in, 4u], dwh [u, 4u],
// db [4u], dh0, dc0 [rows, u].
// Math per step, from t = steps-1 down, with dh = gh_t + dz_{t+1} whᵀ and dc = gc_t + ĝc_{t+1}·f_{t+1}:
//           ĝc = dc + (gtc_t + dh·o)(1 - tc²); dz_t = ((ĝc·g + gg_i)·i(1-i), (ĝc·c_{t-1} + gg_f)·f(1-f),
//           (ĝc·i + gg_g)(1-g²), (dh·tc + gg_o)·o(1-o)); dh0 = dz_0 whᵀ, dc0 = ĝc_0·f_0; then
//           [dwx; dwh; db] = [x_t, h_{t-1}, 1]ᵀ dz over every step's rows as one GEMM
//           [in + u + 1, steps·rows] x [steps·rows, 4u], and dx = dz wxᵀ.
// Facts:    Parallel over blocks of rows as lstm_sequence (whᵀ packed once), then the GEMMs on the
//           parallel matmul; deterministic for any thread count. With the packed GEMM (AVX2 and
//           up) dz is written straight into that GEMM's packed-B panels (internal::PackBBlock), so
//           the dW GEMM copies its B blocks instead of packing a row-major dz (same bits). Scratch
//           comes from Buffer::allocate, whose large blocks are reused from step to step.
template <class T>
void lstm_sequence_grad(const T* x, const T* wx, const T* wh, const T* h0, const T* c0, const T* h, const T* c,
                        const T* gates, const T* tc, const T* gh, const T* gc, const T* ggates, const T* gtc,
                        std::int64_t steps, std::int64_t rows, std::int64_t in, std::int64_t u, T* dx, T* dwx, T* dwh,
                        T* db, T* dh0, T* dc0);

}  // namespace tapeflow::kernels
