// The advanced-autodiff guide's Jacobian, batch Jacobian and Hessian examples on Dense layers
// (../shared/seeds/003), with the guide's checks, plus path agreement on the same graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "layers/batch_normalization.h"
#include "layers/dense.h"
#include "tape/autodiff/hessian.h"
#include "tape/autodiff/newton.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;

namespace {

double max_abs_diff(const tf::Tensor& a, const tf::Tensor& b) {
  return tf::reduce_max(tf::abs(tf::convert(a, tf::DType::kFloat64) - tf::convert(b, tf::DType::kFloat64))).item();
}

TEST(SeedDenseJacobian, LayerOutputWithRespectToKernel) {
  tf::Generator gen(1);
  tf::Tensor x = tf::random_normal({7, 5}, gen);
  tf::layers::Dense layer({.units = 10, .activation = "relu", .seed = 2});
  tf::GradientTape tape({.persistent = true});
  tf::Tensor y = layer(x);
  EXPECT_EQ(y.shape(), tf::Shape({7, 10}));
  auto j = tape.jacobian(y, layer.kernel());
  ASSERT_TRUE(j);
  EXPECT_EQ(j->shape(), tf::Shape({7, 10, 5, 10}));
  auto g = tape.gradient(y, layer.kernel());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->shape(), tf::Shape({5, 10}));
  tf::Tensor j_sum = tf::reduce_sum(*j, {0, 1});
  EXPECT_LT(max_abs_diff(*g, j_sum), 1e-3);
  // The loop agrees with the vectorized path; the parallel loop bit for bit with the sequential one.
  auto seq = tape.jacobian(y, layer.kernel(), {.parallel_iterations = 1, .experimental_use_pfor = false});
  auto par = tape.jacobian(y, layer.kernel(), {.parallel_iterations = 0, .experimental_use_pfor = false});
  EXPECT_EQ(seq->to_vector<float>(), par->to_vector<float>());
  EXPECT_TRUE(all_close(*j, *seq, 1e-6, 1e-6));
}

TEST(SeedDenseJacobian, BatchJacobianEqualsSummedFullJacobian) {
  tf::Generator gen(3);
  tf::Tensor x = tf::random_normal({7, 5}, gen);
  tf::layers::Dense layer1({.units = 8, .activation = "elu", .seed = 4});
  tf::layers::Dense layer2({.units = 6, .activation = "elu", .seed = 5});
  tf::GradientTape tape({.persistent = true, .watch_accessed_variables = false});
  tape.watch(x);
  tf::Tensor y = layer2(layer1(x));
  auto j = tape.jacobian(y, x);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->shape(), tf::Shape({7, 6, 7, 5}));
  tf::Tensor j_sum = tf::reduce_sum(*j, 2);
  for (bool pfor : {true, false}) {
    auto jb = tape.batch_jacobian(y, x, {.experimental_use_pfor = pfor, .check_independence = true});
    ASSERT_TRUE(jb);
    EXPECT_EQ(jb->shape(), tf::Shape({7, 6, 5}));
    EXPECT_LT(max_abs_diff(*jb, j_sum), 1e-3);
  }
}

TEST(SeedDenseJacobian, BatchNormTrainingIsNotIndependent) {
  tf::Generator gen(6);
  tf::Tensor x = tf::random_normal({7, 5}, gen);
  tf::layers::Dense layer1({.units = 8, .activation = "elu", .seed = 7});
  tf::layers::BatchNormalization bn;
  tf::layers::Dense layer2({.units = 6, .activation = "elu", .seed = 8});
  tf::GradientTape tape({.persistent = true, .watch_accessed_variables = false});
  tape.watch(x);
  tf::Tensor y = layer2(bn(layer1(x), true));
  auto j = tape.jacobian(y, x);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->shape(), tf::Shape({7, 6, 7, 5}));
  try {
    tape.batch_jacobian(y, x, {.check_independence = true});
    ADD_FAILURE() << "batch_jacobian accepted BatchNormalization(training = true)";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not independent"), std::string::npos) << e.what();
  }
  auto jb = tape.batch_jacobian(y, x, {.check_independence = false});  // TF's behaviour: runs anyway
  ASSERT_TRUE(jb);
  EXPECT_EQ(jb->shape(), tf::Shape({7, 6, 5}));
}

// |H - Hᵀ| for a square matrix.
double asymmetry(const tf::Tensor& h) {
  auto v = tf::convert(h, tf::DType::kFloat64).to_vector<double>();
  const std::int64_t n = h.shape()[0];
  double worst = 0;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < n; ++c)
      worst = std::max(worst, std::abs(v[static_cast<std::size_t>(r * n + c)] - v[static_cast<std::size_t>(c * n + r)]));
  return worst;
}

tf::Tensor seeded_normal(const tf::Shape& s, std::uint64_t seed, tf::DType dtype) {
  tf::Generator gen(seed);
  return tf::convert(tf::random_normal(s, gen), dtype);
}

// The guide's model: x [7, 5] -> Dense(8, relu) -> Dense(6, relu), loss mean(y²).
struct TwoLayerModel {
  tf::Tensor x;
  tf::layers::Dense layer1, layer2;
  explicit TwoLayerModel(tf::DType dtype = tf::DType::kFloat32)
      : x(seeded_normal({7, 5}, 9, dtype)),
        layer1({.units = 8, .activation = "relu", .seed = 10, .dtype = dtype}),
        layer2({.units = 6, .activation = "relu", .seed = 11, .dtype = dtype}) {
    layer2(layer1(x));  // build
  }
  tf::Tensor loss() { return tf::reduce_mean(tf::square(layer2(layer1(x)))); }
};

TEST(SeedHessian, TwoLayerModelKernelHessianAndNewtonStep) {
  TwoLayerModel m;
  std::optional<tf::Tensor> g, h;
  {
    tf::GradientTape t2;
    std::optional<tf::Tensor> inner_g;
    {
      tf::GradientTape t1;
      tf::Tensor loss = m.loss();
      g = t1.gradient(loss, m.layer1.kernel());
    }
    h = t2.jacobian(*g, m.layer1.kernel());
  }
  ASSERT_TRUE(h);
  EXPECT_EQ(h->shape(), tf::Shape({5, 8, 5, 8}));
  const std::int64_t n = 40;
  tf::Tensor h_mat = tf::reshape(*h, tf::Shape{n, n});
  EXPECT_LT(asymmetry(h_mat), 1e-6);
  // hessian() gives the same matrix and gradient.
  tf::HessianResult hr = tf::hessian([&] { return m.loss(); }, std::vector<tf::Variable>{m.layer1.kernel()});
  EXPECT_TRUE(all_close(hr.matrix, h_mat, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(hr.gradient, tf::reshape(*g, tf::Shape{n}), 1e-6, 1e-7));
  // The guide's Newton step lowers the loss.
  tf::NewtonStepResult step = tf::newton_step([&] { return m.loss(); }, {m.layer1.kernel()});
  EXPECT_LT(step.loss_after, step.loss_before);
  EXPECT_GT(step.step_norm, 0.0);
  EXPECT_EQ(step.updates.size(), 1u);
  EXPECT_EQ(step.updates[0].shape(), tf::Shape({5, 8}));
}

TEST(SeedHessian, WholeModelHessianInFloat64AndPaths) {
  TwoLayerModel m(tf::DType::kFloat64);
  std::vector<tf::Variable> vars = m.layer1.trainable_variables();
  for (const auto& v : m.layer2.trainable_variables()) vars.push_back(v);
  auto f = [&] { return m.loss(); };
  tf::HessianResult vec = tf::hessian(f, vars, {.blocks = true});
  tf::HessianResult chunked = tf::hessian(f, vars, {.parallel_iterations = 17});
  tf::HessianResult seq = tf::hessian(f, vars, {.experimental_use_pfor = false, .parallel_iterations = 1});
  tf::HessianResult par = tf::hessian(f, vars, {.experimental_use_pfor = false});
  const std::int64_t n = 5 * 8 + 8 + 8 * 6 + 6;
  EXPECT_EQ(vec.matrix.shape(), tf::Shape({n, n}));
  EXPECT_EQ(vec.offsets, (std::vector<std::int64_t>{0, 40, 48, 96, 102}));
  EXPECT_EQ(seq.matrix.to_vector<double>(), par.matrix.to_vector<double>());
  EXPECT_TRUE(all_close(vec.matrix, seq.matrix, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(chunked.matrix, vec.matrix, 1e-12, 1e-12));
  EXPECT_LT(asymmetry(vec.matrix), 1e-12);
  ASSERT_EQ(vec.blocks.size(), 4u);
  EXPECT_EQ(vec.blocks[0][2].shape(), tf::Shape({5, 8, 8, 6}));
  EXPECT_EQ(vec.blocks[3][1].shape(), tf::Shape({6, 8}));
  EXPECT_DOUBLE_EQ(vec.blocks[0][2].at({1, 2, 3, 4}), vec.matrix.at({1 * 8 + 2, 48 + 3 * 6 + 4}));
  // Finite differences of the gradient, column by column (float64).
  const double eps = 1e-6;
  for (std::int64_t col : {0, 13, 41, 50, 99}) {
    std::size_t vi = 0;
    while (vec.offsets[vi + 1] <= col) ++vi;
    const tf::Variable& v = vars[vi];
    auto base = v.value().to_vector<double>();
    auto grad_at = [&](double delta) {
      auto p = base;
      p[static_cast<std::size_t>(col - vec.offsets[vi])] += delta;
      v.assign(tf::constant(p, v.shape()));
      tf::HessianResult r = tf::hessian(f, vars);  // its gradient field
      return r.gradient.to_vector<double>();
    };
    auto gp = grad_at(eps), gm = grad_at(-eps);
    v.assign(tf::constant(base, v.shape()));
    for (std::int64_t row = 0; row < n; ++row) {
      double fd = (gp[static_cast<std::size_t>(row)] - gm[static_cast<std::size_t>(row)]) / (2 * eps);
      EXPECT_NEAR(vec.matrix.at({row, col}), fd, 1e-6 + 1e-4 * std::abs(fd)) << row << ", " << col;
    }
  }
  // HVP == H v, without forming H.
  std::vector<tf::Tensor> vs;
  std::vector<double> flat;
  std::uint64_t seed = 40;
  for (const auto& v : vars) {
    vs.push_back(tf::testing::random_f64(v.shape(), seed++));
    auto part = vs.back().to_vector<double>();
    flat.insert(flat.end(), part.begin(), part.end());
  }
  std::vector<tf::Source> sources(vars.begin(), vars.end());
  std::vector<tf::Tensor> hv = tf::hessian_vector_product(f, sources, vs);
  tf::Tensor expect = tf::matmul(vec.matrix, tf::constant(flat, tf::Shape{n, 1}));
  std::vector<double> got;
  for (const auto& t : hv) {
    auto part = t.to_vector<double>();
    got.insert(got.end(), part.begin(), part.end());
  }
  EXPECT_TRUE(all_close(tf::constant(got, tf::Shape{n, 1}), expect, 1e-10, 1e-12));
}

}  // namespace
