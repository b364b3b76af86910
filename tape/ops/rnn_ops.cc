// Recurrent-cell ops: fused kernels (tape/kernels/rnn.h) and gradients written with ops.
#include "tape/ops/rnn_ops.h"

#include <stdexcept>
#include <string>

#include "tape/kernels/rnn.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/execute.h"
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

// g = (g_h, g_c, g_gates, g_tc); see the header for the formulas.
TensorList lstm_block_cell_gradient(const GradContext& c, std::span<const Tensor> g) {
  const Tensor& cp = c.input(1);
  const Tensor& gates = c.output(2);
  const Tensor& tc = c.output(3);
  const std::vector<Tensor> q = split(gates, 4, -1);  // i, f, g, o
  const std::vector<Tensor> gg = split(g[2], 4, -1);
  const Tensor gc = g[1] + (g[3] + g[0] * q[3]) * (1.0 - tc * tc);
  TensorList out;
  out.push_back(concat({(gc * q[2] + gg[0]) * q[0] * (1.0 - q[0]), (gc * cp + gg[1]) * q[1] * (1.0 - q[1]),
                        (gc * q[0] + gg[2]) * (1.0 - q[2] * q[2]), (g[0] * tc + gg[3]) * q[3] * (1.0 - q[3])},
                       -1));
  out.push_back(c.needs_gradient(1) ? gc * q[1] : Tensor());
  return out;
}

}  // namespace

LstmCellOutputs lstm_block_cell(const Tensor& z, const Tensor& c_prev) {
  static const OpDef& op = op_def("LSTMBlockCell");
  const Tensor in[] = {z, c_prev};
  const TensorList out = execute(op, in);
  return {out[0], out[1], out[2], out[3]};
}

void register_rnn_ops(OpRegistry& r) {
  r.add({"LSTMBlockCell", lstm_block_cell_forward, lstm_block_cell_gradient, kSaveAll,
         batching::fold_into_axis0({0, 1})});
}

}  // namespace tapeflow
