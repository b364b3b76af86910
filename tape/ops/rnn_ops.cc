// Recurrent-cell ops: fused kernels (tape/kernels/rnn.h) and gradients written with ops.
#include "tape/ops/rnn_ops.h"

#include <stdexcept>
#include <string>

#include "tape/kernels/rnn.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/recorder.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::check_arity;
using ops_internal::describe;

namespace {

TensorList lstm_block_cell_forward(std::span<const Tensor> in, const Attrs&) {
  check_arity("lstm_block_cell", in, 2);
  const Tensor &z = in[0], &cp = in[1];
  if (z.rank() != 2 || z.shape()[1] % 4 != 0 || cp.rank() != 2 || cp.shape()[0] != z.shape()[0] ||
      cp.shape()[1] * 4 != z.shape()[1])
    throw std::invalid_argument("lstm_block_cell: expected z [batch, 4u] and c_prev [batch, u], got z " + describe(z) +
                                ", c_prev " + describe(cp));
  if (z.dtype() != cp.dtype())
    throw std::invalid_argument("lstm_block_cell: z and c_prev must have one dtype, got z " + describe(z) +
                                ", c_prev " + describe(cp));
  const std::int64_t rows = z.shape()[0], u = cp.shape()[1];
  Tensor h = Tensor::empty(cp.shape(), z.dtype()), c = Tensor::empty(cp.shape(), z.dtype());
  Tensor gates = Tensor::empty(z.shape(), z.dtype()), tc = Tensor::empty(cp.shape(), z.dtype());
  dispatch_floating(z.dtype(), "lstm_block_cell", [&](auto tag) {
    using T = decltype(tag);
    kernels::lstm_cell<T>(z.data<T>(), cp.data<T>(), rows, u, h.mutable_data<T>(), c.mutable_data<T>(),
                          gates.mutable_data<T>(), tc.mutable_data<T>());
  });
  return TensorList{h, c, gates, tc};
}

// One step's backward with ops (the formulas in the header): the gradients of h, c, gates and tc
// (gg, gt: undefined for none) and the saved c_prev, gates, tc -> {dz, dc_prev}; dc_prev only if
// need_dcp.
std::pair<Tensor, Tensor> cell_backward(const Tensor& gh, const Tensor& gc_in, const Tensor& gg_in, const Tensor& gt,
                                        const Tensor& cp, const Tensor& gates, const Tensor& tc, bool need_dcp) {
  const std::vector<Tensor> q = split(gates, 4, -1);  // i, f, g, o
  const Tensor dh_o = gt.defined() ? gt + gh * q[3] : gh * q[3];
  const Tensor gc = gc_in + dh_o * (1.0 - tc * tc);
  std::vector<Tensor> gg = gg_in.defined() ? split(gg_in, 4, -1) : std::vector<Tensor>{};
  auto plus_gg = [&](Tensor v, int k) { return gg.empty() ? v : v + gg[static_cast<std::size_t>(k)]; };
  Tensor dz = concat({plus_gg(gc * q[2], 0) * q[0] * (1.0 - q[0]), plus_gg(gc * cp, 1) * q[1] * (1.0 - q[1]),
                      plus_gg(gc * q[0], 2) * (1.0 - q[2] * q[2]), plus_gg(gh * tc, 3) * q[3] * (1.0 - q[3])},
                     -1);
  return {std::move(dz), need_dcp ? gc * q[1] : Tensor()};
}

// g = (g_h, g_c, g_gates, g_tc); see the header for the formulas.
TensorList lstm_block_cell_gradient(const GradContext& c, std::span<const Tensor> g) {
  auto [dz, dcp] = cell_backward(g[0], g[1], g[2], g[3], c.input(1), c.output(2), c.output(3), c.needs_gradient(1));
  TensorList out;
  out.push_back(std::move(dz));
  out.push_back(std::move(dcp));
  return out;
}

TensorList block_lstm_forward(std::span<const Tensor> in, const Attrs&) {
  check_arity("block_lstm", in, 4);
  const Tensor &xp = in[0], &w = in[1], &h0 = in[2], &c0 = in[3];
  const bool ok = xp.rank() == 3 && xp.shape()[0] >= 1 && xp.shape()[2] % 4 == 0 && w.rank() == 2 &&
                  w.shape()[0] * 4 == xp.shape()[2] && w.shape()[1] == xp.shape()[2] &&
                  h0.shape() == Shape{xp.shape()[1], w.shape()[0]} && c0.shape() == h0.shape();
  if (!ok)
    throw std::invalid_argument("block_lstm: expected xp [steps >= 1, batch, 4u], w [u, 4u], h0 and c0 [batch, u], got xp " +
                                describe(xp) + ", w " + describe(w) + ", h0 " + describe(h0) + ", c0 " + describe(c0));
  for (const Tensor* t : {&w, &h0, &c0})
    if (t->dtype() != xp.dtype())
      throw std::invalid_argument("block_lstm: inputs must have one dtype, got xp " + describe(xp) + ", w " +
                                  describe(w) + ", h0 " + describe(h0) + ", c0 " + describe(c0));
  const std::int64_t steps = xp.shape()[0], rows = xp.shape()[1], u = w.shape()[0];
  const Shape su{steps, rows, u};
  Tensor h = Tensor::empty(su, xp.dtype()), cs = Tensor::empty(su, xp.dtype());
  Tensor gates = Tensor::empty(xp.shape(), xp.dtype()), tc = Tensor::empty(su, xp.dtype());
  dispatch_floating(xp.dtype(), "block_lstm", [&](auto tag) {
    using T = decltype(tag);
    kernels::lstm_sequence<T>(xp.data<T>(), w.data<T>(), h0.data<T>(), c0.data<T>(), steps, rows, u,
                              h.mutable_data<T>(), cs.mutable_data<T>(), gates.mutable_data<T>(), tc.mutable_data<T>());
  });
  return TensorList{h, cs, gates, tc};
}

// The backward through time with ops (second order, vectorized jacobians): per step the cell's ops
// and a MatMul for the recurrence, then dw as one MatMul over all steps.
TensorList block_lstm_gradient_ops(const GradContext& c, std::span<const Tensor> g) {
  const Tensor &w = c.input(1), &h0 = c.input(2), &c0 = c.input(3);
  const Tensor &h = c.output(0), &cs = c.output(1);
  const std::int64_t steps = c.input_shape(0).dim(0), rows = c.input_shape(0).dim(1), u = c.input_shape(1).dim(0);
  const std::vector<Tensor> gh = unstack(g[0], 0), gc = unstack(g[1], 0), gg = unstack(g[2], 0), gt = unstack(g[3], 0);
  const std::vector<Tensor> cst = unstack(cs, 0), gates = unstack(c.output(2), 0), tc = unstack(c.output(3), 0);
  std::vector<Tensor> dz(static_cast<std::size_t>(steps));
  Tensor dh_rec, dc_rec;
  for (std::int64_t t = steps - 1; t >= 0; --t) {
    const auto k = static_cast<std::size_t>(t);
    const Tensor dh = dh_rec.defined() ? gh[k] + dh_rec : gh[k];
    const Tensor dc = dc_rec.defined() ? gc[k] + dc_rec : gc[k];
    auto [z, dcp] = cell_backward(dh, dc, gg[k], gt[k], t == 0 ? c0 : cst[k - 1], gates[k], tc[k], true);
    dh_rec = matmul(z, w, false, true);
    dc_rec = std::move(dcp);
    dz[k] = std::move(z);
  }
  Tensor dxp = stack(dz, 0);
  Tensor dw;
  if (c.needs_gradient(1)) {
    Tensor hprev = expand_dims(h0, 0);
    if (steps > 1) hprev = concat({hprev, slice(h, {0, 0, 0}, {steps - 1, -1, -1})}, 0);
    dw = matmul(reshape(hprev, std::vector<std::int64_t>{steps * rows, u}),
                reshape(dxp, std::vector<std::int64_t>{steps * rows, 4 * u}), true, false);
  }
  return TensorList{dxp, dw, c.needs_gradient(2) ? dh_rec : Tensor(), c.needs_gradient(3) ? dc_rec : Tensor()};
}

// g = (g_h, g_c, g_gates, g_tc): one kernel when nothing records the backward pass or batches it.
TensorList block_lstm_gradient(const GradContext& c, std::span<const Tensor> g) {
  bool fused = !is_recording();
  if (const BatchScope* scope = BatchScope::current())
    for (const Tensor& t : g) fused = fused && !(t.defined() && scope->carries_batch(t));
  for (const Tensor& t : g) fused = fused && t.defined();
  if (!fused) return block_lstm_gradient_ops(c, g);
  const Tensor &w = c.input(1), &h0 = c.input(2), &c0 = c.input(3);
  const Tensor &h = c.output(0), &cs = c.output(1), &gates = c.output(2), &tc = c.output(3);
  const std::int64_t steps = h.shape()[0], rows = h.shape()[1], u = h.shape()[2];
  Tensor dz = Tensor::empty(gates.shape(), gates.dtype()), dw = Tensor::empty(w.shape(), w.dtype());
  Tensor dh0 = Tensor::empty(h0.shape(), h0.dtype()), dc0 = Tensor::empty(c0.shape(), c0.dtype());
  dispatch_floating(h.dtype(), "block_lstm", [&](auto tag) {
    using T = decltype(tag);
    kernels::lstm_sequence_grad<T>(w.data<T>(), h0.data<T>(), c0.data<T>(), h.data<T>(), cs.data<T>(),
                                   gates.data<T>(), tc.data<T>(), g[0].data<T>(), g[1].data<T>(), g[2].data<T>(),
                                   g[3].data<T>(), steps, rows, u, dz.mutable_data<T>(), dw.mutable_data<T>(),
                                   dh0.mutable_data<T>(), dc0.mutable_data<T>());
  });
  return TensorList{dz, dw, dh0, dc0};
}

}  // namespace

LstmCellOutputs lstm_block_cell(const Tensor& z, const Tensor& c_prev) {
  static const OpDef& op = op_def("LSTMBlockCell");
  const Tensor in[] = {z, c_prev};
  const TensorList out = execute(op, in);
  return {out[0], out[1], out[2], out[3]};
}

LstmSequenceOutputs block_lstm(const Tensor& xp, const Tensor& w, const Tensor& h0, const Tensor& c0) {
  static const OpDef& op = op_def("BlockLSTM");
  const Tensor in[] = {xp, w, h0, c0};
  const TensorList out = execute(op, in);
  return {out[0], out[1], out[2], out[3]};
}

void register_rnn_ops(OpRegistry& r) {
  r.add({"LSTMBlockCell", lstm_block_cell_forward, lstm_block_cell_gradient, kSaveAll,
         batching::fold_into_axis0({0, 1})});
  r.add({"BlockLSTM", block_lstm_forward, block_lstm_gradient, kSaveAll, &batching::sequential});
}

}  // namespace tapeflow
