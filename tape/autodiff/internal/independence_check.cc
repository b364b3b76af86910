#include "tape/autodiff/internal/independence_check.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "tape/autodiff/internal/tape_state.h"

namespace tapeflow::internal {
namespace {

bool in_probe(std::int64_t example, int probe) { return ((example >> (probe / 2)) & 1) == (probe % 2); }

// Largest |value| on the examples inside and outside the probe; g viewed as [b, rest].
struct Leak {
  double inside = 0, outside = 0;
  std::int64_t example = -1;  // first example outside the probe with a non-zero gradient
};

Leak measure(const double* p, std::int64_t b, std::int64_t rest, int probe) {
  Leak leak;
  for (std::int64_t i = 0; i < b; ++i) {
    double m = 0;
    for (std::int64_t r = 0; r < rest; ++r) m = std::max(m, std::abs(p[i * rest + r]));
    if (in_probe(i, probe)) {
      leak.inside = std::max(leak.inside, m);
    } else {
      if (m > leak.outside && leak.example < 0) leak.example = i;
      leak.outside = std::max(leak.outside, m);
    }
  }
  return leak;
}

// g holds `count` gradients [b, rest] back to back; returns the leak of gradient `which`.
Leak measure(const Tensor& g, std::int64_t count, std::int64_t which, std::int64_t b, int probe) {
  Tensor d = convert(g, DType::kFloat64);
  const std::int64_t per = g.num_elements() / count;
  return measure(d.data<double>() + which * per, b, per / b, probe);
}

bool leaks(const Leak& l, DType dtype) {
  const double tol = dtype == DType::kFloat64 ? 1e-12 : 1e-5;
  return !(l.outside <= tol * l.inside);  // NaN counts as a leak
}

}  // namespace

void check_batch_independence(const TapeState& tape, const Tensor& target, std::int64_t source_id, bool vectorized) {
  const std::int64_t b = target.shape()[0], ny = target.num_elements() / b;
  int bits = 0;
  while ((std::int64_t{1} << bits) < b) ++bits;
  const int probes = 2 * bits;
  // Random cotangents in ±[1, 2) on the probe's examples, zeros elsewhere; fixed seed: repeatable.
  std::mt19937_64 rng(0x5eedULL);
  std::uniform_real_distribution<double> mag(1.0, 2.0);
  std::vector<double> values(static_cast<std::size_t>(probes * b * ny), 0.0);
  for (int p = 0; p < probes; ++p)
    for (std::int64_t i = 0; i < b; ++i)
      if (in_probe(i, p))
        for (std::int64_t y = 0; y < ny; ++y)
          values[static_cast<std::size_t>((p * b + i) * ny + y)] = (rng() & 1 ? 1.0 : -1.0) * mag(rng);
  Shape batched{probes};
  for (std::int64_t d : target.shape()) batched.push_back(d);
  Tensor all = constant(values, batched, target.dtype());
  const std::int64_t id = source_id;
  std::span<const std::int64_t> ids(&id, 1);
  std::span<const Tensor> targets(&target, 1);
  RecordingPause pause;
  auto probe_seed = [&](int p) {
    Shape one{1};
    for (std::int64_t d : target.shape()) one.push_back(d);
    std::vector<double> v(values.begin() + p * b * ny, values.begin() + (p + 1) * b * ny);
    return constant(v, one, target.dtype());
  };
  int failing = -1;
  if (vectorized) {
    Tensor g = tape.backward(targets, std::span<const Tensor>(&all, 1), ids, {.batch = probes})[0];
    if (!g.defined()) return;
    Tensor d = convert(g, DType::kFloat64);
    const std::int64_t per = g.num_elements() / probes;
    for (int p = 0; p < probes && failing < 0; ++p)
      if (leaks(measure(d.data<double>() + p * per, b, per / b, p), g.dtype())) failing = p;
  } else {
    for (int p = 0; p < probes && failing < 0; ++p) {
      Tensor seed = probe_seed(p).with_shape(target.shape());
      Tensor g = tape.backward(targets, std::span<const Tensor>(&seed, 1), ids)[0];
      if (!g.defined()) return;
      if (leaks(measure(g, 1, 0, b, p), g.dtype())) failing = p;
    }
  }
  if (failing < 0) return;
  // Name the culprit: the first op whose input gradient (an input with b leading rows) leaks.
  Tensor seed = probe_seed(failing);
  BackwardOptions culprit;
  culprit.batch = 1;
  culprit.on_op = [&](const OpRecord& r, std::size_t index, std::span<const Tensor> in_grads) {
                     for (std::size_t j = 0; j < in_grads.size(); ++j) {
                       const Shape& s = r.input_shapes[j];
                       if (!in_grads[j].defined() || s.rank() < 1 || s[0] != b) continue;
                       Leak l = measure(in_grads[j], 1, 0, b, failing);
                       if (!leaks(l, in_grads[j].dtype())) continue;
                       throw std::invalid_argument(
                           "GradientTape::batch_jacobian: examples are not independent: the gradient of op " +
                           (r.custom_gradient ? std::string("CustomGradient") : r.op->name) + " (recorded op #" +
                           std::to_string(index) + ", input " + std::to_string(j) + " of shape " + s.to_string() +
                           ") carries other examples' cotangents into example " + std::to_string(l.example) +
                           "; batch_jacobian needs target[i] to depend on source[i] only (BatchNormalization "
                           "with training = true breaks this). Use jacobian() and sum over the duplicate batch "
                           "axis, or set check_independence = false");
                     }
                   };
  tape.backward(targets, std::span<const Tensor>(&seed, 1), ids, culprit);
  throw std::invalid_argument("GradientTape::batch_jacobian: examples are not independent (the gradient of target "
                              "examples reaches other source examples); use jacobian() instead");
}

}  // namespace tapeflow::internal
