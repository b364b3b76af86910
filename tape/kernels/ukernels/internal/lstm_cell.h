// The float LSTM cell's element-wise rows, forward and backward (tape/kernels/rnn.cc's float path),
// compiled once per instruction-set level into kernels::isa_<level>::uk (tape/CMakeLists.txt):
// Eigen packets of the level's width (baseline 4 floats, AVX2 8, AVX-512 16), the gate
// activations as rational approximations on them.
// Shapes:   row-major rows; a gate row [4u] holds i, f, g (Keras's c), o; a state row [u].
// Facts:    Every element is the same sequence of packet operations at any width and position (a
//           row's last u mod lanes elements go through a padded packet): the AVX2 and AVX-512 copies
//           give the same bits (both fuse multiply-adds), the baseline's multiply then add.
//           σ(x) is Eigen's rational logistic (x >= -9; exp(x) / (1 + exp(x)) below, as
//           Eigen) and tanh Eigen's generic fast tanh, about 1 ulp from the exact values.
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// lstm_cell_rows: for each of `rows` rows, z = (p + b) + zr (b or zr null: not added) [4u], then
//                 gates = (σ(z_i), σ(z_f), tanh(z_g), σ(z_o)), c = f·cp + i·g (f·cp fused with
//                 the add where the level fuses), tc = tanh(c), h = o·tc. Row strides: p, zr and
//                 gates 4u; cp, h, c, tc u.
// lstm_cell_grad_rows: for each row, with dh = gh + dhr and dc = gc + dcr (a null operand: not
//                 added; gh and dhr not both null, nor gc and dcr), the gradients gg [4u] / gt [u]
//                 of gates / tc (null: zeros) and the saved cp, gates, tc:
//                 ĝc = dc + (gt + dh·o)(1 - tc²); dz = ((ĝc·g + gg_i)·i(1-i), (ĝc·cp + gg_f)·f(1-f),
//                 (ĝc·i + gg_g)(1-g²), (dh·tc + gg_o)·o(1-o)) and dcp = ĝc·f. dcp may be dcr (in
//                 place). Row strides as above (dz as gates).
#define TAPEFLOW_LSTM_CELL_DECLARE                                                                                 \
  void lstm_cell_rows(const float* p, const float* b, const float* zr, const float* cp, std::int64_t rows,       \
                      std::int64_t u, float* h, float* c, float* gates, float* tc);                               \
  void lstm_cell_grad_rows(const float* gh, const float* dhr, const float* gc, const float* dcr, const float* gg, \
                           const float* gt, const float* cp, const float* gates, const float* tc, std::int64_t rows, \
                           std::int64_t u, float* dz, float* dcp);

namespace isa_baseline::uk {
TAPEFLOW_LSTM_CELL_DECLARE
}  // namespace isa_baseline::uk
namespace isa_avx2::uk {
TAPEFLOW_LSTM_CELL_DECLARE
}  // namespace isa_avx2::uk
namespace isa_avx512::uk {
TAPEFLOW_LSTM_CELL_DECLARE
}  // namespace isa_avx512::uk

#undef TAPEFLOW_LSTM_CELL_DECLARE

}  // namespace tapeflow::kernels
