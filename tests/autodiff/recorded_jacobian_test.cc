// jacobian, batch_jacobian and hessian while an outer tape or a function trace records: their
// results must be differentiable (against float64 finite differences of the plain results) and
// traceable (a replay on new inputs equals a fresh computation), on the batched and loop paths.
#include <gtest/gtest.h>

#include <functional>

#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

// Central differences of scalar f at x (float64), one element at a time.
tf::Tensor finite_difference(const std::function<double(const tf::Tensor&)>& f, const tf::Tensor& x) {
  std::vector<double> v = x.to_vector<double>(), d(v.size());
  const double h = 1e-6;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::vector<double> p = v, m = v;
    p[i] += h, m[i] -= h;
    d[i] = (f(tf::constant(p, x.shape())) - f(tf::constant(m, x.shape()))) / (2 * h);
  }
  return tf::constant(d, x.shape());
}

const tf::Tensor& weights() {
  static const tf::Tensor w = random_f64(tf::Shape{3, 4}, 21);
  return w;
}
// A per-example map that mixes features (matmul) and bends them (tanh, square).
tf::Tensor model(const tf::Tensor& x) { return tf::tanh(tf::matmul(x, weights())) * tf::reduce_sum(x * x, 1, true); }

// sum(J ⊙ C) for a fixed C: a scalar that depends on every Jacobian entry.
double weighted_sum(const tf::Tensor& j) {
  const tf::Tensor c = random_f64(j.shape(), 5);
  return tf::reduce_sum(j * c).item();
}

tf::Tensor batch_jacobian_of(const tf::Tensor& x, bool pfor) {
  tf::GradientTape t({.persistent = !pfor});
  t.watch(x);
  tf::Tensor y = model(x);
  return *t.batch_jacobian(y, x, {.experimental_use_pfor = pfor});
}

TEST(RecordedJacobian, BatchJacobianIsDifferentiableByAnOuterTape) {
  const tf::Tensor x = random_f64(tf::Shape{2, 3}, 3);
  for (bool pfor : {true, false}) {
    tf::GradientTape outer;
    outer.watch(x);
    const tf::Tensor j = batch_jacobian_of(x, pfor);
    const tf::Tensor c = random_f64(j.shape(), 5);
    const tf::Tensor s = tf::reduce_sum(j * c);
    auto d = outer.gradient(s, x);
    ASSERT_TRUE(d) << "pfor=" << pfor;
    const tf::Tensor expected = finite_difference([&](const tf::Tensor& p) { return weighted_sum(batch_jacobian_of(p, pfor)); }, x);
    EXPECT_TRUE(all_close(*d, expected, 1e-6, 1e-7)) << "pfor=" << pfor << "\n" << *d << "\n" << expected;
  }
}

TEST(RecordedJacobian, ChunkedAndLoopJacobiansAreDifferentiableByAnOuterTape) {
  const tf::Tensor x = random_f64(tf::Shape{1, 3}, 4);
  const std::vector<tf::JacobianOptions> paths = {{.parallel_iterations = 2},  // batched, in chunks
                                                  {.parallel_iterations = 2, .experimental_use_pfor = false}};
  for (const tf::JacobianOptions& o : paths) {
    auto jac = [&](const tf::Tensor& p) {
      tf::GradientTape t({.persistent = true});
      t.watch(p);
      return *t.jacobian(model(p), p, o);
    };
    tf::GradientTape outer;
    outer.watch(x);
    const tf::Tensor j = jac(x);
    auto d = outer.gradient(tf::reduce_sum(j * random_f64(j.shape(), 5)), x);
    ASSERT_TRUE(d) << "pfor=" << o.experimental_use_pfor;
    const tf::Tensor expected = finite_difference([&](const tf::Tensor& p) { return weighted_sum(jac(p)); }, x);
    EXPECT_TRUE(all_close(*d, expected, 1e-6, 1e-7)) << "pfor=" << o.experimental_use_pfor;
  }
}

TEST(RecordedJacobian, HessianIsDifferentiableByAnOuterTape) {
  const tf::Tensor x = random_f64(tf::Shape{3}, 6), w = random_f64(tf::Shape{3, 2}, 7);
  for (bool pfor : {true, false}) {
    // Two sources, so H has off-diagonal blocks; the outer tape differentiates by x only.
    auto hess = [&](const tf::Tensor& p) {
      return tf::hessian([&] { return tf::reduce_sum(tf::tanh(tf::matmul(tf::reshape(p, tf::Shape{1, 3}), w)) * tf::reduce_sum(p * p)); },
                         std::vector<tf::Tensor>{p, w}, {.blocks = true, .experimental_use_pfor = pfor});
    };
    tf::GradientTape outer({.persistent = true});
    outer.watch(x);
    const tf::HessianResult h = hess(x);
    const tf::Tensor c = random_f64(h.matrix.shape(), 8);
    auto dh = outer.gradient(tf::reduce_sum(h.matrix * c), x);
    auto dg = outer.gradient(tf::reduce_sum(h.gradient * random_f64(h.gradient.shape(), 9)), x);
    auto db = outer.gradient(tf::reduce_sum(h.blocks[0][1]), x);
    ASSERT_TRUE(dh && dg && db) << "pfor=" << pfor;
    auto fd = [&](const std::function<double(const tf::HessianResult&)>& f) {
      return finite_difference([&](const tf::Tensor& p) { return f(hess(p)); }, x);
    };
    EXPECT_TRUE(all_close(*dh, fd([&](const tf::HessianResult& r) { return tf::reduce_sum(r.matrix * c).item(); }), 1e-6, 1e-7))
        << "pfor=" << pfor;
    EXPECT_TRUE(all_close(*dg, fd([&](const tf::HessianResult& r) {
                            return tf::reduce_sum(r.gradient * random_f64(r.gradient.shape(), 9)).item();
                          }), 1e-6, 1e-7))
        << "pfor=" << pfor;
    EXPECT_TRUE(all_close(*db, fd([&](const tf::HessianResult& r) { return tf::reduce_sum(r.blocks[0][1]).item(); }), 1e-6, 1e-7))
        << "pfor=" << pfor;
    // The recorded result equals the plain one (computed with no recorder active).
    outer.stop();
    const tf::HessianResult plain = hess(x);
    EXPECT_TRUE(all_close(h.matrix, plain.matrix, 1e-12, 1e-13)) << "pfor=" << pfor;
    EXPECT_TRUE(all_close(h.gradient, plain.gradient, 1e-12, 1e-13)) << "pfor=" << pfor;
  }
}

TEST(RecordedJacobian, TracedFunctionReplaysBatchJacobianAndHessianOnNewInputs) {
  auto fn = [](const std::vector<tf::Tensor>& in) -> std::vector<tf::Tensor> {
    const tf::Tensor& x = in[0];
    tf::GradientTape t;
    t.watch(x);
    const tf::Tensor j = *t.batch_jacobian(model(x), x);
    const tf::HessianResult h = tf::hessian([&] { return tf::reduce_sum(model(x)); }, std::vector<tf::Tensor>{x});
    return {j, h.matrix};
  };
  tf::FunctionGraph g = tf::trace("recorded_jacobians", fn, {random_f64(tf::Shape{2, 3}, 1)});
  const tf::Tensor x = random_f64(tf::Shape{2, 3}, 2);
  const std::vector<tf::Tensor> replay = g.call({x}), fresh = fn({x});
  EXPECT_TRUE(all_close(replay[0], fresh[0], 1e-12, 1e-13));
  EXPECT_TRUE(all_close(replay[1], fresh[1], 1e-12, 1e-13));
  EXPECT_FALSE(all_close(replay[0], fn({random_f64(tf::Shape{2, 3}, 1)})[0], 1e-6, 1e-6));  // it depends on x
}

}  // namespace
