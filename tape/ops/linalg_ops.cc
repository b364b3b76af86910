// Linear-algebra ops: forward kernels (Eigen GEMM / LU) and gradients written with ops.
#include "tape/ops/linalg_ops.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tape/kernels/matmul.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {

using ops_internal::check_arity;
using ops_internal::check_same_dtype;

namespace {

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// Offset (in matrices) of output batch index i inside an operand with batch shape `sb`
// (right-aligned against `out`; dims of 1 repeat).
std::int64_t batch_offset(std::int64_t i, const Shape& out, const Shape& sb) {
  std::int64_t offset = 0, stride = 1;
  for (int d = out.rank() - 1, e = sb.rank() - 1; d >= 0; --d, --e) {
    const std::int64_t idx = i % out[d];
    i /= out[d];
    if (e >= 0) {
      if (sb[e] != 1) offset += idx * stride;
      stride *= sb[e];
    }
  }
  return offset;
}

std::string flags(bool ta, bool tb) {
  if (!ta && !tb) return "";
  return std::string(" (transpose_a=") + (ta ? "true" : "false") + ", transpose_b=" + (tb ? "true" : "false") + ")";
}

TensorList matmul_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("matmul", in, 2);
  const Tensor &a = in[0], &b = in[1];
  const bool ta = at.get_bool("transpose_a"), tb = at.get_bool("transpose_b");
  if (a.rank() < 2) throw std::invalid_argument("matmul: a must have rank >= 2, got " + a.shape().to_string());
  if (b.rank() < 2) throw std::invalid_argument("matmul: b must have rank >= 2, got " + b.shape().to_string());
  check_same_dtype("matmul", a, b);
  const Shape &sa = a.shape(), &sb = b.shape();
  const std::int64_t m = ta ? sa.dim(-1) : sa.dim(-2), ka = ta ? sa.dim(-2) : sa.dim(-1);
  const std::int64_t kb = tb ? sb.dim(-1) : sb.dim(-2), n = tb ? sb.dim(-2) : sb.dim(-1);
  if (ka != kb)
    throw std::invalid_argument("matmul: inner dimensions differ: a " + sa.to_string() + ", b " + sb.to_string() +
                                flags(ta, tb));
  const Shape ba = batch_of(sa), bb = batch_of(sb);
  Shape out_batch;
  try {
    out_batch = broadcast_shapes(ba, bb, "matmul");
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("matmul: batch dimensions do not broadcast: a " + sa.to_string() + ", b " +
                                sb.to_string());
  }
  Shape sy = out_batch;
  sy.push_back(m);
  sy.push_back(n);
  Tensor y = Tensor::empty(sy, a.dtype());
  const std::int64_t nb = out_batch.num_elements(), na = ba.num_elements(), nbb = bb.num_elements();
  dispatch_floating(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* py = y.mutable_data<T>();
    const std::int64_t mat_a = m * ka, mat_b = ka * n;
    // Fast paths: each operand is either one matrix (stride 0) or one per output batch entry.
    if ((na == 1 || na == nb) && (nbb == 1 || nbb == nb)) {
      kernels::matmul(pa, pb, py, nb, m, ka, n, ta, tb, na == 1 ? 0 : mat_a, nbb == 1 ? 0 : mat_b);
      return;
    }
    for (std::int64_t i = 0; i < nb; ++i)
      kernels::matmul(pa + batch_offset(i, out_batch, ba) * mat_a, pb + batch_offset(i, out_batch, bb) * mat_b,
                      py + i * m * n, 1, m, ka, n, ta, tb, 0, 0);
  });
  return {y};
}

// TF's _MatMulGrad for C = op(a) op(b); results are summed over broadcast batch dims.
TensorList matmul_gradient(const GradContext& c, std::span<const Tensor> g) {
  const Tensor &a = c.input(0), &b = c.input(1), &gy = g[0];
  const bool ta = c.attrs().get_bool("transpose_a"), tb = c.attrs().get_bool("transpose_b");
  Tensor da, db;
  const bool na = c.needs_gradient(0), nb = c.needs_gradient(1);
  if (!ta && !tb) {  // C = a b: da = g bᵀ, db = aᵀ g
    if (na) da = matmul(gy, b, false, true);
    if (nb) db = matmul(a, gy, true, false);
  } else if (!ta && tb) {  // C = a bᵀ: da = g b, db = gᵀ a
    if (na) da = matmul(gy, b, false, false);
    if (nb) db = matmul(gy, a, true, false);
  } else if (ta && !tb) {  // C = aᵀ b: da = b gᵀ, db = a g
    if (na) da = matmul(b, gy, false, true);
    if (nb) db = matmul(a, gy, false, false);
  } else {  // C = aᵀ bᵀ: da = bᵀ gᵀ, db = gᵀ aᵀ
    if (na) da = matmul(b, gy, true, true);
    if (nb) db = matmul(gy, a, true, true);
  }
  return {na ? sum_to_shape(da, c.input_shape(0)) : Tensor(), nb ? sum_to_shape(db, c.input_shape(1)) : Tensor()};
}

// True when some element of p[0, n) is non-zero (NaN counts). Branch-free over blocks of 64, so the
// compiler vectorises it: the all-zero rows this path looks for are read to their end.
template <typename T>
bool any_nonzero(const T* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 64) {
    const std::int64_t end = std::min(n, i + 64);
    unsigned any = 0;
    for (std::int64_t j = i; j < end; ++j) any |= static_cast<unsigned>(p[j] != T(0));
    if (any) return true;
  }
  return false;
}

// a [rows, inner] · op(b) computed on a's non-zero rows only, when at most half of them are non-zero
// and b is finite (so 0 · b is exactly 0); nullopt otherwise. A jacobian through independent
// examples has such cotangents: the one-hot row of example i reaches example i only. In raw memory,
// so only when nothing records (the result would not show its dependence on the zero rows).
std::optional<Tensor> matmul_nonzero_rows(const Tensor& a, const Tensor& b, bool tb) {
  const std::int64_t rows = a.shape()[0], inner = a.shape()[1];
  if (rows < 8 || inner == 0 || a.dtype() != b.dtype()) return std::nullopt;
  std::optional<Tensor> out;
  dispatch_floating(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    // Every 8th row first: a dense cotangent (a Hessian's, most rows non-zero) is turned away after
    // reading an eighth of it, rather than half.
    std::int64_t sampled = 0, sampled_nonzero = 0;
    for (std::int64_t r = 0; r < rows; r += 8, ++sampled) sampled_nonzero += any_nonzero(pa + r * inner, inner);
    if (2 * sampled_nonzero > sampled) return;
    std::vector<std::int64_t> keep;
    for (std::int64_t r = 0; r < rows; ++r) {
      if (any_nonzero(pa + r * inner, inner)) {
        keep.push_back(r);
        if (2 * static_cast<std::int64_t>(keep.size()) > rows) return;  // dense enough: one GEMM
      }
    }
    const T* pb = b.data<T>();
    if (!std::all_of(pb, pb + b.num_elements(), [](T v) { return std::isfinite(v); })) return;
    const std::int64_t nnz = static_cast<std::int64_t>(keep.size());
    Tensor compact = Tensor::empty(Shape{nnz, inner}, a.dtype());
    for (std::int64_t j = 0; j < nnz; ++j)
      std::copy(pa + keep[static_cast<std::size_t>(j)] * inner, pa + (keep[static_cast<std::size_t>(j)] + 1) * inner,
                compact.mutable_data<T>() + j * inner);
    Tensor yc = matmul(compact, b, false, tb);
    const std::int64_t n = yc.shape()[1];
    Tensor y = zeros(Shape{rows, n}, a.dtype());  // untouched zero pages cost nothing (Buffer::allocate_zeroed)
    T* py = y.mutable_data<T>();
    const T* pc = yc.data<T>();
    for (std::int64_t j = 0; j < nnz; ++j) std::copy(pc + j * n, pc + (j + 1) * n, py + keep[static_cast<std::size_t>(j)] * n);
    out = y;
  });
  return out;
}

// Batched operands are padded to the common batch rank behind K and broadcast by the kernel. When
// only a is batched, untransposed, and b is a plain matrix, K folds into a's rows: one GEMM. One-hot a
// (batch_jacobian's seeds): result[k] = s[:, o + k] ⊗ op(b)[o + k, :], a broadcast product, no GEMM.
TensorList matmul_batch(std::span<const Tensor> in, const BatchContext& c) {
  const bool ta = c.attrs().get_bool("transpose_a"), tb = c.attrs().get_bool("transpose_b");
  const std::int64_t k = c.size();
  const Shape sa = c.shape(0), sb = c.shape(1);
  if (c.one_hot(0) && !c.batched(1) && !ta && sa.rank() == 2 && sb.rank() == 2) {
    const std::int64_t rows = sa[0], n = sa[1], off = c.one_hot_offset();
    Tensor opb = tb ? transpose(in[1]) : in[1];  // op(b) [n, m]
    const std::int64_t m = opb.shape()[1];
    Tensor st = transpose(in[0]);  // [n, rows]
    if (k != n) {  // this chunk's columns only
      st = slice(st, {off, 0}, {k, rows});
      opb = slice(opb, {off, 0}, {k, m});
    }
    return {reshape(st, Shape{k, rows, 1}) * reshape(opb, Shape{k, 1, m})};
  }
  const Tensor a = c.batched(0) ? c.dense(0) : in[0], b = c.batched(1) ? c.dense(1) : in[1];
  if (c.batched(0) && !c.batched(1) && !ta && sb.rank() == 2) {
    const std::int64_t inner = sa.dim(-1), rows = k * (inner ? sa.num_elements() / inner : 0);
    const Tensor flat = reshape(a, Shape{rows, inner});
    std::optional<Tensor> sparse;
    if (!is_recording()) sparse = matmul_nonzero_rows(flat, b, tb);
    Tensor y = sparse ? *sparse : matmul(flat, b, false, tb);
    Shape out{k};
    for (int i = 0; i + 1 < sa.rank(); ++i) out.push_back(sa[i]);
    out.push_back(y.shape()[1]);
    return {reshape(y, out)};
  }
  const int rank = std::max(sa.rank(), sb.rank());
  const Tensor args[2] = {c.batched(0) ? reshape(a, batching::padded(k, sa, rank)) : a,
                          c.batched(1) ? reshape(b, batching::padded(k, sb, rank)) : b};
  return batching::run(c, args, c.attrs());
}

TensorList solve_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("solve", in, 2);
  const Tensor &a = in[0], &b = in[1];
  const bool adjoint = at.get_bool("adjoint");
  if (a.rank() < 2) throw std::invalid_argument("solve: matrix must have rank >= 2, got " + a.shape().to_string());
  if (b.rank() < 2) throw std::invalid_argument("solve: rhs must have rank >= 2, got " + b.shape().to_string());
  check_same_dtype("solve", a, b);
  const std::int64_t n = a.shape().dim(-1);
  if (a.shape().dim(-2) != n)
    throw std::invalid_argument("solve: matrix must be square, got " + a.shape().to_string());
  if (b.shape().dim(-2) != n)
    throw std::invalid_argument("solve: rhs rows must equal the matrix size: matrix " + a.shape().to_string() +
                                ", rhs " + b.shape().to_string());
  if (batch_of(a.shape()) != batch_of(b.shape()))
    throw std::invalid_argument("solve: batch dimensions differ: matrix " + a.shape().to_string() + ", rhs " +
                                b.shape().to_string());
  const std::int64_t k = b.shape().dim(-1), batch = batch_of(a.shape()).num_elements();
  Tensor x = Tensor::empty(b.shape(), b.dtype());
  dispatch_floating(a.dtype(), "solve", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> at_buf(adjoint ? static_cast<std::size_t>(n * n) : 0);
    for (std::int64_t i = 0; i < batch; ++i) {
      const T* pa = a.data<T>() + i * n * n;
      if (adjoint) {
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t q = 0; q < n; ++q) at_buf[static_cast<std::size_t>(q * n + r)] = pa[r * n + q];
        pa = at_buf.data();
      }
      kernels::solve(pa, b.data<T>() + i * n * k, x.mutable_data<T>() + i * n * k, n, k);
    }
  });
  return {x};
}

// TF's _MatrixSolveGrad: drhs = solve(Aᵀ, g) (adjoint flipped); dA = -drhs xᵀ (or -x drhsᵀ for adjoint).
TensorList solve_gradient(const GradContext& c, std::span<const Tensor> g) {
  const bool adjoint = c.attrs().get_bool("adjoint");
  const Tensor &a = c.input(0), &x = c.output(0);
  Tensor db = solve(a, g[0], !adjoint);
  Tensor da = adjoint ? negative(matmul(x, db, false, true)) : negative(matmul(db, x, false, true));
  return {da, db};
}

// A plain matrix with batched right-hand sides [K, n, r] solves all of them at once as [n, K*r];
// otherwise both operands are broadcast to [K, batch..., n, *] (solve needs equal batch dims).
TensorList solve_batch(std::span<const Tensor> in, const BatchContext& c) {
  const std::int64_t k = c.size();
  const Shape sa = c.shape(0), sb = c.shape(1);
  if (!c.batched(0) && sa.rank() == 2 && sb.rank() == 2) {
    const std::int64_t n = sb[0], r = sb[1];
    Tensor rhs = reshape(transpose(c.dense(1), {1, 0, 2}), Shape{n, k * r});
    Tensor x = solve(in[0], rhs, c.attrs().get_bool("adjoint"));
    return {transpose(reshape(x, Shape{n, k, r}), {1, 0, 2})};
  }
  const Tensor args[2] = {c.dense(0), c.dense(1)};
  return batching::run(c, args, c.attrs());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  static const OpDef& op = op_def("MatMul");
  return execute1(op, {a, b}, Attrs().set("transpose_a", transpose_a).set("transpose_b", transpose_b));
}

Tensor solve(const Tensor& matrix, const Tensor& rhs, bool adjoint) {
  static const OpDef& op = op_def("MatrixSolve");
  return execute1(op, {matrix, rhs}, Attrs().set("adjoint", adjoint));
}

void register_linalg_ops(OpRegistry& r) {
  r.add({"MatMul", matmul_forward, matmul_gradient, kSaveInputs, BatchRule(matmul_batch, /*accepts_one_hot=*/true)});
  r.add({"MatrixSolve", solve_forward, solve_gradient, kSaveAll, solve_batch});
}

}  // namespace tapeflow
