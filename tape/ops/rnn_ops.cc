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
#include "tape/ops/reduction_ops.h"
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
  check_arity("block_lstm", in, 6);
  const Tensor &x = in[0], &wx = in[1], &wh = in[2], &b = in[3], &h0 = in[4], &c0 = in[5];
  const bool ok = x.rank() == 3 && x.shape()[0] >= 1 && wh.rank() == 2 && wh.shape()[1] == 4 * wh.shape()[0] &&
                  wx.shape() == Shape{x.shape()[2], wh.shape()[1]} && b.shape() == Shape{wh.shape()[1]} &&
                  h0.shape() == Shape{x.shape()[1], wh.shape()[0]} && c0.shape() == h0.shape();
  auto all = [&] {
    return "x " + describe(x) + ", wx " + describe(wx) + ", wh " + describe(wh) + ", b " + describe(b) + ", h0 " +
           describe(h0) + ", c0 " + describe(c0);
  };
  if (!ok)
    throw std::invalid_argument(
        "block_lstm: expected x [steps >= 1, batch, in], wx [in, 4u], wh [u, 4u], b [4u], h0 and c0 [batch, u], got " +
        all());
  for (const Tensor* t : {&wx, &wh, &b, &h0, &c0})
    if (t->dtype() != x.dtype()) throw std::invalid_argument("block_lstm: inputs must have one dtype, got " + all());
  const std::int64_t steps = x.shape()[0], rows = x.shape()[1], u = wh.shape()[0];
  const Shape su{steps, rows, u};
  Tensor h = Tensor::empty(su, x.dtype()), cs = Tensor::empty(su, x.dtype());
  Tensor gates = Tensor::empty({steps, rows, 4 * u}, x.dtype()), tc = Tensor::empty(su, x.dtype());
  dispatch_floating(x.dtype(), "block_lstm", [&](auto tag) {
    using T = decltype(tag);
    kernels::lstm_sequence<T>(x.data<T>(), wx.data<T>(), wh.data<T>(), b.data<T>(), h0.data<T>(), c0.data<T>(),
                              steps, rows, x.shape()[2], u, h.mutable_data<T>(), cs.mutable_data<T>(),
                              gates.mutable_data<T>(), tc.mutable_data<T>());
  });
  return TensorList{h, cs, gates, tc};
}

// The backward through time with ops (second order, vectorized jacobians): per step the cell's ops
// and a MatMul for the recurrence, then dx, dwx, dwh and db as one op each over all steps.
TensorList block_lstm_gradient_ops(const GradContext& c, std::span<const Tensor> g) {
  const Tensor &x = c.input(0), &wx = c.input(1), &wh = c.input(2), &h0 = c.input(4), &c0 = c.input(5);
  const Tensor &h = c.output(0), &cs = c.output(1);
  const std::int64_t steps = c.input_shape(0).dim(0), rows = c.input_shape(0).dim(1), in = c.input_shape(0).dim(2),
                     u = c.input_shape(2).dim(0);
  // Undefined output gradients (none received, OpDef::takes_missing_grads): zeros for h and c, none
  // for gates and tc (cell_backward skips them).
  auto steps_of = [&](const Tensor& v, int k) {
    if (v.defined()) return unstack(v, 0);
    if (k >= 2) return std::vector<Tensor>(static_cast<std::size_t>(steps));
    return unstack(zeros(c.output(k).shape(), c.output(k).dtype()), 0);
  };
  const std::vector<Tensor> gh = steps_of(g[0], 0), gc = steps_of(g[1], 1), gg = steps_of(g[2], 2),
                            gt = steps_of(g[3], 3);
  const std::vector<Tensor> cst = unstack(cs, 0), gates = unstack(c.output(2), 0), tc = unstack(c.output(3), 0);
  std::vector<Tensor> dz(static_cast<std::size_t>(steps));
  Tensor dh_rec, dc_rec;
  for (std::int64_t t = steps - 1; t >= 0; --t) {
    const auto k = static_cast<std::size_t>(t);
    const Tensor dh = dh_rec.defined() ? gh[k] + dh_rec : gh[k];
    const Tensor dc = dc_rec.defined() ? gc[k] + dc_rec : gc[k];
    auto [z, dcp] = cell_backward(dh, dc, gg[k], gt[k], t == 0 ? c0 : cst[k - 1], gates[k], tc[k], true);
    dh_rec = matmul(z, wh, false, true);
    dc_rec = std::move(dcp);
    dz[k] = std::move(z);
  }
  const Tensor dzs = reshape(stack(dz, 0), std::vector<std::int64_t>{steps * rows, 4 * u});
  TensorList out;
  out.push_back(c.needs_gradient(0) ? reshape(matmul(dzs, wx, false, true), c.input_shape(0)) : Tensor());
  out.push_back(c.needs_gradient(1) ? matmul(reshape(x, std::vector<std::int64_t>{steps * rows, in}), dzs, true, false)
                                    : Tensor());
  Tensor dwh;
  if (c.needs_gradient(2)) {
    Tensor hprev = expand_dims(h0, 0);
    if (steps > 1) hprev = concat({hprev, slice(h, {0, 0, 0}, {steps - 1, -1, -1})}, 0);
    dwh = matmul(reshape(hprev, std::vector<std::int64_t>{steps * rows, u}), dzs, true, false);
  }
  out.push_back(dwh);
  out.push_back(c.needs_gradient(3) ? reduce_sum(dzs, 0) : Tensor());
  out.push_back(c.needs_gradient(4) ? dh_rec : Tensor());
  out.push_back(c.needs_gradient(5) ? dc_rec : Tensor());
  return out;
}

// g = (g_h, g_c, g_gates, g_tc): one kernel when nothing records the backward pass or batches it.
TensorList block_lstm_gradient(const GradContext& c, std::span<const Tensor> g) {
  bool fused = !is_recording();
  if (const BatchScope* scope = BatchScope::current())
    for (const Tensor& t : g) fused = fused && !(t.defined() && scope->carries_batch(t));
  if (!fused) return block_lstm_gradient_ops(c, g);
  const Tensor &x = c.input(0), &wx = c.input(1), &wh = c.input(2), &b = c.input(3), &h0 = c.input(4),
               &c0 = c.input(5);
  const Tensor &h = c.output(0), &cs = c.output(1), &gates = c.output(2), &tc = c.output(3);
  const std::int64_t steps = x.shape()[0], rows = x.shape()[1], in = x.shape()[2], u = wh.shape()[0];
  const DType dt = x.dtype();
  Tensor dx = c.needs_gradient(0) ? Tensor::empty(x.shape(), dt) : Tensor();
  Tensor dwx = Tensor::empty(wx.shape(), dt), dwh = Tensor::empty(wh.shape(), dt), db = Tensor::empty(b.shape(), dt);
  Tensor dh0 = Tensor::empty(h0.shape(), dt), dc0 = Tensor::empty(c0.shape(), dt);
  dispatch_floating(dt, "block_lstm", [&](auto tag) {
    using T = decltype(tag);
    auto data = [](const Tensor& v) { return v.defined() ? v.data<T>() : nullptr; };  // null: zeros
    kernels::lstm_sequence_grad<T>(x.data<T>(), wx.data<T>(), wh.data<T>(), h0.data<T>(), c0.data<T>(), h.data<T>(),
                                   cs.data<T>(), gates.data<T>(), tc.data<T>(), data(g[0]), data(g[1]), data(g[2]),
                                   data(g[3]), steps, rows, in, u, dx.defined() ? dx.mutable_data<T>() : nullptr,
                                   dwx.mutable_data<T>(), dwh.mutable_data<T>(), db.mutable_data<T>(),
                                   dh0.mutable_data<T>(), dc0.mutable_data<T>());
  });
  return TensorList{dx, dwx, dwh, db, dh0, dc0};
}

}  // namespace

LstmCellOutputs lstm_block_cell(const Tensor& z, const Tensor& c_prev) {
  static const OpDef& op = op_def("LSTMBlockCell");
  const Tensor in[] = {z, c_prev};
  const TensorList out = execute(op, in);
  return {out[0], out[1], out[2], out[3]};
}

LstmSequenceOutputs block_lstm(const Tensor& x, const Tensor& wx, const Tensor& wh, const Tensor& b, const Tensor& h0,
                               const Tensor& c0) {
  static const OpDef& op = op_def("BlockLSTM");
  const Tensor in[] = {x, wx, wh, b, h0, c0};
  const TensorList out = execute(op, in);
  return {out[0], out[1], out[2], out[3]};
}

void register_rnn_ops(OpRegistry& r) {
  r.add({"LSTMBlockCell", lstm_block_cell_forward, lstm_block_cell_gradient, kSaveAll,
         batching::fold_into_axis0({0, 1})});
  r.add({.name = "BlockLSTM",
         .forward = block_lstm_forward,
         .gradient = block_lstm_gradient,
         .saves = kSaveAll,
         .batch = &batching::sequential,
         .takes_missing_grads = true});
}

}  // namespace tapeflow
