// Hessians over several variables at once, and Hessian-vector products by double backward.
//
// Shapes:   n = total number of scalars of the sources; each source is flattened row-major (as
//           tf.reshape does) and placed in the order given. matrix [n, n], gradient [n];
//           blocks[i][j] has shape sources[i].shape + sources[j].shape.
// DTypes:   float32, float64; all sources must share one dtype (the result's).
// Errors:   std::invalid_argument for no sources, mixed or non-float dtypes, a loss that is not a
//           single element, HVP vectors whose count or shapes do not match; std::logic_error as for
//           GradientTape::jacobian (loop path on a non-persistent tape, second use).
// Facts:    a source the loss does not depend on gets zero rows and columns. The matrix is built by
//           batched backward passes over the gradient graph (n one-hot cotangents, in chunks, see
//           HessianOptions::parallel_iterations), or by a loop of backward passes when the
//           graph has an op without a batched rule, and assembled in raw memory. While a tape or
//           a function trace records on this thread, everything (gradient, matrix, blocks) is
//           built by ops instead, in one pass on this thread: differentiable (third derivatives)
//           and traceable, as in TF.
// Ref:      the "Example: Hessian" section of TF's advanced autodiff guide; torch.autograd.functional.hessian
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "tape/autodiff/gradient_tape.h"

namespace tapeflow {

// A loss closure: reads the variables (or watched tensors) and returns a scalar.
using LossFn = std::function<Tensor()>;

// Options of hessian(): the block form, and how the batched or loop backward passes run.
struct HessianOptions {
  bool blocks = false;  // also fill HessianResult::blocks
  bool experimental_use_pfor = true;  // one batched backward pass (else the loop)
  // Loop: threads (1 = sequential, 0 = all). Batched pass: rows of H per pass, the passes running
  // in parallel on oneTBB threads; 0 = automatic, so that one batched gradient stays within
  // max(n² / 16, 2^16) elements and there are two passes per thread (peak memory < 2 H, not K x H).
  int parallel_iterations = 0;
};

// What hessian() returns: the flattened Hessian and gradient, the loss, where each source sits, and
// optionally the per-source blocks (shapes above).
struct HessianResult {
  Tensor matrix;     // [n, n]
  Tensor gradient;   // [n], the flattened gradient at the same point
  Tensor loss;       // the loss value (from the closure form; undefined from the tape form)
  std::vector<std::int64_t> offsets;  // sources[i] occupies [offsets[i], offsets[i + 1])
  std::vector<std::vector<Tensor>> blocks;  // d²loss / d sources[i] d sources[j], when requested
};

// Hessian of loss_fn() w.r.t. the sources (variables or tensors), with nested tapes.
HessianResult hessian(const LossFn& loss_fn, const std::vector<Source>& sources, const HessianOptions& options = {});
// Any container of Variable or Tensor (e.g. layer.trainable_variables()).
template <typename C>
  requires requires(const C& c) { Source(*std::begin(c)); } && (!std::is_same_v<C, std::vector<Source>>)
HessianResult hessian(const LossFn& loss_fn, const C& sources, const HessianOptions& options = {}) {
  return hessian(loss_fn, std::vector<Source>(std::begin(sources), std::end(sources)), options);
}

// Tape form: `gradients[i]` = d loss / d sources[i], computed with an inner tape while `tape`
// (which watches the sources) was recording, as in the guide. Consumes one use of `tape`.
HessianResult hessian(GradientTape& tape, const std::vector<Tensor>& gradients, const std::vector<Source>& sources,
                      const HessianOptions& options = {});

// Hessian-vector product H v without forming H: the gradient of <d loss / d x, v> (double
// backward). One vector per source, of its shape; returns one result per source.
std::vector<Tensor> hessian_vector_product(const LossFn& loss_fn, const std::vector<Source>& sources,
                                           const std::vector<Tensor>& vectors);

}  // namespace tapeflow
