// newton_step and hessian() on small closed-form problems: exact steps, damping strategies,
// non-finite errors naming the variable, and the argument checks of hessian / HVP.
#include <gtest/gtest.h>

#include <cmath>

#include "tape/autodiff/hessian.h"
#include "tape/autodiff/internal/tape_state.h"
#include "tape/autodiff/newton.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;

namespace {

// f(a, b) = 0.5 [a;b]ᵀ A [a;b] - cᵀ [a;b] with A SPD: H = A, g = A z - c, one undamped step lands
// on A⁻¹ c.
struct Quadratic {
  tf::Tensor A = tf::constant(std::vector<double>{4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0}, tf::Shape{3, 3});
  tf::Tensor c = tf::constant(std::vector<double>{1.0, 2.0, 3.0}, tf::Shape{3, 1});
  tf::DType dtype;
  tf::Variable a, b;
  explicit Quadratic(tf::DType d)
      : dtype(d), a(tf::Tensor({0.3, -0.2}), {.name = "a", .dtype = d}), b(tf::Tensor({{0.7}}), {.name = "b", .dtype = d}) {
  }
  // z = [a; b] written blockwise (A symmetric): 0.5 aᵀA₁₁a + aᵀA₁₂b + 0.5 bᵀA₂₂b - c₁ᵀa - c₂b.
  tf::Tensor loss() {
    auto block = [&](std::vector<double> v, tf::Shape s) { return tf::convert(tf::constant(v, s), dtype); };
    tf::Tensor za = tf::reshape(a.read(), tf::Shape{2, 1}), zb = b.read();
    tf::Tensor a11 = block({4.0, 1.0, 1.0, 3.0}, {2, 2}), a12 = block({0.5, 0.2}, {2, 1}), a22 = block({2.0}, {1, 1});
    tf::Tensor c1 = block({1.0, 2.0}, {2, 1}), c2 = block({3.0}, {1, 1});
    tf::Tensor quad = 0.5 * tf::matmul(za, tf::matmul(a11, za), true) + tf::matmul(za, tf::matmul(a12, zb), true) +
                      0.5 * tf::matmul(zb, tf::matmul(a22, zb), true);
    return tf::reduce_sum(quad - tf::matmul(c1, za, true) - c2 * zb);
  }
};

TEST(NewtonStep, QuadraticLandsOnTheMinimumInBothDtypes) {
  for (tf::DType dtype : {tf::DType::kFloat32, tf::DType::kFloat64}) {
    Quadratic q(dtype);
    tf::HessianResult h = tf::hessian([&] { return q.loss(); }, std::vector<tf::Variable>{q.a, q.b});
    EXPECT_EQ(h.matrix.dtype(), dtype);
    EXPECT_TRUE(all_close(tf::convert(h.matrix, tf::DType::kFloat64), q.A, 1e-6, 1e-6));
    tf::NewtonStepResult r = tf::newton_step([&] { return q.loss(); }, {q.a, q.b}, {.damping = 0.0});
    EXPECT_EQ(r.solver, "llt");
    // A⁻¹ c computed independently (float64 LU).
    tf::Tensor z = tf::solve(q.A, q.c);
    auto zv = z.to_vector<double>();
    const double tol = dtype == tf::DType::kFloat64 ? 1e-12 : 1e-5;
    EXPECT_NEAR(q.a.value().at({0}), zv[0], tol);
    EXPECT_NEAR(q.a.value().at({1}), zv[1], tol);
    EXPECT_NEAR(q.b.value().at({0, 0}), zv[2], tol);
    EXPECT_LT(r.loss_after, r.loss_before);
    EXPECT_GT(r.step_norm, 0.0);
    EXPECT_EQ(r.updates[1].shape(), tf::Shape({1, 1}));
  }
}

// f(x, y) = x² - y² (+ a little quartic): a saddle, H = diag(2, -2) is indefinite.
tf::Tensor saddle(const tf::Variable& v) {
  tf::Tensor x = v.read();
  tf::Tensor w = tf::Tensor({1.0, -1.0});
  return tf::reduce_sum(tf::convert(w, v.dtype()) * x * x + 0.01 * tf::square(tf::square(x)));
}

TEST(NewtonStep, IndefiniteHessianRaisesDampingOrUsesLdlt) {
  tf::Variable v(tf::Tensor({0.5, 0.5}), {.name = "v", .dtype = tf::DType::kFloat64});
  tf::NewtonStepResult lm = tf::newton_step([&] { return saddle(v); }, {v});
  EXPECT_EQ(lm.solver, "llt (damping raised)");
  EXPECT_GT(lm.damping, 2.0);  // past the negative eigenvalue
  EXPECT_LT(lm.loss_after, lm.loss_before);  // a descent step once H + λI is positive definite
  tf::Variable w(tf::Tensor({0.5, 0.5}), {.name = "w", .dtype = tf::DType::kFloat64});
  tf::NewtonStepResult ldlt = tf::newton_step([&] { return saddle(w); }, {w}, {.fallback = tf::NewtonFallback::kIndefinite});
  EXPECT_EQ(ldlt.solver, "ldlt");
  EXPECT_DOUBLE_EQ(ldlt.damping, 1e-3);
  // The pure Newton step jumps to the saddle's stationary point (0, 0) up to the quartic term.
  EXPECT_NEAR(w.value().at({0}), 0.0, 0.02);
  EXPECT_NEAR(w.value().at({1}), 0.0, 0.02);
  // An LM run that may not raise the damping far enough falls back to LDLT.
  tf::Variable u(tf::Tensor({0.5, 0.5}), {.name = "u", .dtype = tf::DType::kFloat64});
  tf::NewtonStepResult capped = tf::newton_step([&] { return saddle(u); }, {u}, {.max_damping_increases = 1});
  EXPECT_EQ(capped.solver, "ldlt");
  EXPECT_TRUE(std::isnan(tf::newton_step([&] { return saddle(u); }, {u}, {.evaluate_loss_after = false}).loss_after));
}

TEST(NewtonStep, NonFiniteGradientOrHessianNamesTheVariable) {
  tf::Variable ok(tf::Tensor({1.0}), {.name = "ok", .dtype = tf::DType::kFloat32});
  tf::Variable bad(tf::Tensor({0.0, 1.0}), {.name = "bad_one", .dtype = tf::DType::kFloat32});
  try {
    tf::newton_step([&] { return tf::reduce_sum(ok.read() * ok.read()) + tf::reduce_sum(tf::sqrt(bad.read())); }, {ok, bad});
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'bad_one'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gradient"), std::string::npos) << e.what();
  }
  // Finite gradient, infinite curvature: d²/dx² of x^1.5 at 0.
  tf::Variable cusp(tf::Tensor({0.0}), {.name = "cusp", .dtype = tf::DType::kFloat64});
  try {
    tf::newton_step([&] { return tf::reduce_sum(tf::pow(cusp.read(), 1.5)); }, {cusp});
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Hessian entry"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'cusp' x 'cusp'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tf::newton_step([&] { return ok.read(); }, {}), std::invalid_argument);
}

TEST(Hessian, UnconnectedSourceGivesZeroRowsAndColumns) {
  tf::Variable x(tf::Tensor({1.0, 2.0}), {.name = "x", .dtype = tf::DType::kFloat32});
  tf::Variable unused(tf::Tensor({3.0}), {.name = "unused", .dtype = tf::DType::kFloat32});
  for (bool pfor : {true, false}) {
    tf::HessianResult h = tf::hessian([&] { return tf::reduce_sum(tf::pow(x.read(), 3.0)); }, std::vector<tf::Variable>{unused, x},
                                      {.experimental_use_pfor = pfor});
    EXPECT_EQ(h.matrix.to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 6, 0, 0, 0, 12}));
    EXPECT_EQ(h.gradient.to_vector<float>(), (std::vector<float>{0, 3, 12}));
    EXPECT_FLOAT_EQ(h.loss.item(), 9.0f);
  }
  std::vector<tf::Tensor> hv = tf::hessian_vector_product([&] { return tf::reduce_sum(tf::pow(x.read(), 3.0)); },
                                                          {unused, x}, {tf::Tensor({1.0}), tf::Tensor({1.0, 1.0})});
  EXPECT_EQ(hv[0].to_vector<float>(), std::vector<float>{0});
  EXPECT_EQ(hv[1].to_vector<float>(), (std::vector<float>{6, 12}));
}

TEST(Hessian, TapeFormMatchesClosureForm) {
  tf::Tensor x = tf::Tensor({0.5, -1.0, 2.0});
  tf::GradientTape outer({.persistent = true});
  outer.watch(x);
  std::optional<tf::Tensor> g;
  {
    tf::GradientTape inner;
    inner.watch(x);
    g = inner.gradient(tf::reduce_sum(tf::sin(x) * tf::reduce_sum(x)), x);
  }
  tf::HessianResult a = tf::hessian(outer, {*g}, {x});
  tf::HessianResult b = tf::hessian([&] { return tf::reduce_sum(tf::sin(x) * tf::reduce_sum(x)); }, std::vector<tf::Tensor>{x});
  EXPECT_TRUE(all_close(a.matrix, b.matrix, 1e-6, 1e-7));
  EXPECT_FALSE(a.loss.defined());
}

TEST(Hessian, ArgumentErrors) {
  tf::Variable f32(tf::Tensor({1.0}), {.name = "f32", .dtype = tf::DType::kFloat32});
  tf::Variable f64(tf::Tensor({1.0}), {.name = "f64", .dtype = tf::DType::kFloat64});
  auto loss = [&] { return tf::reduce_sum(f32.read()); };
  EXPECT_THROW(tf::hessian(loss, std::vector<tf::Source>{}), std::invalid_argument);
  try {
    tf::hessian(loss, std::vector<tf::Variable>{f32, f64});
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'f64'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tf::hessian([&] { return f32.read() * tf::Tensor({1.0, 2.0}); }, std::vector<tf::Variable>{f32}),
               std::invalid_argument);  // non-scalar loss
  EXPECT_THROW(tf::hessian_vector_product(loss, {f32}, {}), std::invalid_argument);
  EXPECT_THROW(tf::hessian_vector_product(loss, {f32}, {tf::Tensor({1.0, 2.0})}), std::invalid_argument);
  tf::Tensor x = tf::Tensor({1.0});
  tf::GradientTape once;
  once.watch(x);
  tf::Tensor y = x * x;
  EXPECT_THROW(tf::hessian(once, {y, y}, {x}), std::invalid_argument);  // count mismatch
  EXPECT_THROW(tf::hessian(once, {y}, {x}, {.experimental_use_pfor = false}), std::logic_error);  // loop, not persistent
}

}  // namespace

// Double backward through relu/tanh/leaky_relu/elu/sigmoid emits their gradient ops (ReluGrad,
// TanhGrad, ...): the batched Hessian must have rules for them (no fallback to the loop, which is
// ~10x slower) and agree with the loop, also in several parallel chunks.
TEST(Hessian, BatchedPassCoversActivationGradientOps) {
  tf::Generator gen(7);
  tf::Tensor x = tf::random_normal({6, 4}, gen, 0.0, 1.0, tf::DType::kFloat64);
  tf::Variable w1(tf::random_normal({4, 5}, gen, 0.0, 0.7, tf::DType::kFloat64), {.name = "w1"});
  tf::Variable w2(tf::random_normal({5, 3}, gen, 0.0, 0.7, tf::DType::kFloat64), {.name = "w2"});
  auto loss = [&] {
    tf::Tensor h = tf::matmul(x, w1.read());
    h = tf::relu(h) + tf::tanh(h) + tf::leaky_relu(h, 0.2) + tf::elu(h) + tf::sigmoid(h);
    return tf::reduce_mean(tf::square(tf::tanh(tf::matmul(h, w2.read()))));
  };
  {
    tf::GradientTape outer({.persistent = true});
    tf::Tensor g;
    {
      tf::GradientTape inner;
      tf::Tensor l = loss();
      g = *inner.gradient(l, std::vector<tf::Source>{w1})[0];
    }
    // The one backward pass with K = 3 cotangents runs without falling back (it would throw
    // BatchingUnsupported for an op without a batching rule).
    tf::Tensor seeds = tf::ones(tf::Shape{3, 4, 5}, tf::DType::kFloat64);
    const std::int64_t id = tf::Source(w1).id();
    EXPECT_NO_THROW(outer.state().backward(std::span<const tf::Tensor>(&g, 1), std::span<const tf::Tensor>(&seeds, 1),
                                           std::span<const std::int64_t>(&id, 1), {.batch = 3}));
  }
  const std::vector<tf::Variable> vars{w1, w2};
  tf::HessianResult loop = tf::hessian(loss, vars, {.experimental_use_pfor = false, .parallel_iterations = 1});
  for (int chunk : {0, 7, 35}) {
    SCOPED_TRACE("parallel_iterations=" + std::to_string(chunk));
    tf::HessianResult batched = tf::hessian(loss, vars, {.parallel_iterations = chunk});
    EXPECT_TRUE(all_close(batched.matrix, loop.matrix, 1e-12, 1e-12));
  }
}
