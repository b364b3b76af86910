// GradientTape::jacobian / batch_jacobian on element-wise ops and reductions: the seed examples,
// finite differences (float64), parallel == sequential (bitwise), vectorized == loop, error paths.
#include <gtest/gtest.h>

#include <cstring>

#include "tape/autodiff/custom_gradient.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

tf::JacobianOptions loop(int parallel = 1) { return {.parallel_iterations = parallel, .experimental_use_pfor = false}; }

bool bitwise_equal(const tf::Tensor& a, const tf::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(SeedJacobian, SquareOfVector) {
  tf::Tensor x = tf::Tensor({1.0, 2.0});
  tf::GradientTape g;
  g.watch(x);
  tf::Tensor y = x * x;
  auto j = g.jacobian(y, x);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->shape(), tf::Shape({2, 2}));
  EXPECT_EQ(j->to_vector<float>(), (std::vector<float>{2, 0, 0, 4}));
}

TEST(SeedJacobian, BatchJacobianOfSquare) {
  tf::Tensor x = tf::Tensor({{1.0, 2.0}, {3.0, 4.0}});
  tf::GradientTape g;
  g.watch(x);
  tf::Tensor y = x * x;
  auto j = g.batch_jacobian(y, x);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->shape(), tf::Shape({2, 2, 2}));
  EXPECT_EQ(j->to_vector<float>(), (std::vector<float>{2, 0, 0, 4, 6, 0, 0, 8}));
}

TEST(SeedJacobian, ScalarSourceHasTargetShape) {
  tf::Tensor x = tf::linspace(-10.0, 10.0, 201);
  tf::Variable delta(tf::scalar(0.0));
  tf::GradientTape tape;
  tf::Tensor y = tf::sigmoid(x + delta);
  auto dy = tape.jacobian(y, delta);
  ASSERT_TRUE(dy);
  EXPECT_EQ(dy->shape(), y.shape());
  EXPECT_TRUE(all_close(*dy, y * (1.0 - y), 1e-5, 1e-7));  // sigmoid' = y (1 - y)
}

// A graph touching every batched rule family: broadcasting binaries, unary math, reductions
// (sum/mean/max/min, keepdims or not), where, reshape, broadcast_to. x [3, 4], w [4] -> [24].
tf::Tensor mixed(const tf::Tensor& x, const tf::Tensor& w) {
  tf::Tensor a = tf::tanh(x * w) + tf::exp(x) / (1.0 + tf::square(w)) - tf::sin(w) * tf::cos(x);
  tf::Tensor r = tf::reduce_sum(a, 1, true) * tf::reduce_mean(tf::sigmoid(a), 0);
  tf::Tensor m = tf::reduce_max(a, 0) - tf::reduce_min(x, 1, true) + tf::reduce_mean(tf::log(tf::square(x) + 1.0));
  tf::Tensor e = tf::elu(r - m) + tf::maximum(a, r) + tf::minimum(a, w) + tf::where(tf::greater(x, r), x, w * 2.0) +
                 tf::relu(a) + tf::leaky_relu(a, 0.3) + tf::softplus(a) + tf::sqrt(tf::abs(x) + 1.0) +
                 tf::pow(tf::abs(a) + 1.0, tf::reshape(w, tf::Shape{1, 4}));
  return tf::reshape(tf::broadcast_to(e, tf::Shape{2, 3, 4}), tf::Shape{24}) * tf::rsqrt(tf::reduce_sum(tf::square(w)) + 1.0);
}

tf::Tensor fd_jacobian(const std::function<tf::Tensor(const tf::Tensor&)>& f, const tf::Tensor& x, double eps = 1e-6) {
  tf::Tensor y0 = f(x);
  const std::int64_t ny = y0.num_elements(), nx = x.num_elements();
  std::vector<double> j(static_cast<std::size_t>(ny * nx));
  for (std::int64_t k = 0; k < nx; ++k) {
    auto xv = x.to_vector<double>();
    xv[static_cast<std::size_t>(k)] += eps;
    auto yp = f(tf::constant(xv, x.shape())).to_vector<double>();
    xv[static_cast<std::size_t>(k)] -= 2 * eps;
    auto ym = f(tf::constant(xv, x.shape())).to_vector<double>();
    for (std::int64_t i = 0; i < ny; ++i)
      j[static_cast<std::size_t>(i * nx + k)] = (yp[static_cast<std::size_t>(i)] - ym[static_cast<std::size_t>(i)]) / (2 * eps);
  }
  tf::Shape s = y0.shape();
  for (auto d : x.shape()) s.push_back(d);
  return tf::constant(j, s);
}

struct Mixed {
  tf::Tensor x = random_f64({3, 4}, 11, -1.5, 1.5), w = random_f64({4}, 12, 0.2, 1.2);
};

TEST(Jacobian, MatchesFiniteDifferencesOnEveryPath) {
  Mixed in;
  tf::Tensor fd_x = fd_jacobian([&](const tf::Tensor& x) { return mixed(x, in.w); }, in.x);
  tf::Tensor fd_w = fd_jacobian([&](const tf::Tensor& w) { return mixed(in.x, w); }, in.w);
  for (tf::JacobianOptions opt : {tf::JacobianOptions{}, loop(1), loop(0), tf::JacobianOptions{.parallel_iterations = 5}}) {
    tf::GradientTape tape({.persistent = true});
    tape.watch(std::vector<tf::Tensor>{in.x, in.w});
    tf::Tensor y = mixed(in.x, in.w);
    auto j = tape.jacobian(y, std::vector<tf::Tensor>{in.x, in.w}, opt);
    ASSERT_TRUE(j[0] && j[1]);
    EXPECT_EQ(j[0]->shape(), tf::Shape({24, 3, 4}));
    EXPECT_EQ(j[1]->shape(), tf::Shape({24, 4}));
    EXPECT_TRUE(all_close(*j[0], fd_x, 1e-6, 1e-7)) << "pfor " << opt.experimental_use_pfor;
    EXPECT_TRUE(all_close(*j[1], fd_w, 1e-6, 1e-7)) << "pfor " << opt.experimental_use_pfor;
  }
}

TEST(Jacobian, VectorizedEqualsLoopAndParallelIsBitwiseSequential) {
  for (tf::DType dtype : {tf::DType::kFloat32, tf::DType::kFloat64}) {
    Mixed in;
    tf::Tensor x = tf::convert(in.x, dtype), w = tf::convert(in.w, dtype);
    tf::GradientTape tape({.persistent = true});
    tape.watch(std::vector<tf::Tensor>{x, w});
    tf::Tensor y = mixed(x, w);
    auto seq = tape.jacobian(y, std::vector<tf::Tensor>{x, w}, loop(1));
    auto par = tape.jacobian(y, std::vector<tf::Tensor>{x, w}, loop(0));
    auto par3 = tape.jacobian(y, std::vector<tf::Tensor>{x, w}, loop(3));
    auto vec = tape.jacobian(y, std::vector<tf::Tensor>{x, w});
    auto chunked = tape.jacobian(y, std::vector<tf::Tensor>{x, w}, {.parallel_iterations = 7});
    const double tol = dtype == tf::DType::kFloat64 ? 1e-13 : 1e-5;
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(vec[k]->dtype(), dtype);
      EXPECT_TRUE(bitwise_equal(*seq[k], *par[k]));
      EXPECT_TRUE(bitwise_equal(*seq[k], *par3[k]));
      EXPECT_TRUE(all_close(*vec[k], *seq[k], tol, tol));
      EXPECT_TRUE(all_close(*chunked[k], *vec[k], tol, tol));
    }
  }
}

TEST(Jacobian, ParallelLoopIsBitwiseSequentialOnLargerTarget) {
  tf::Tensor x = random_f64({16, 8}, 3), w = random_f64({8, 8}, 4);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = tf::tanh(tf::matmul(tf::exp(x), w)) * tf::reduce_sum(x, 0);
  auto seq = tape.jacobian(y, x, loop(1));
  auto par = tape.jacobian(y, x, loop(2));
  auto vec = tape.jacobian(y, x);
  EXPECT_TRUE(bitwise_equal(*seq, *par));
  EXPECT_TRUE(all_close(*vec, *seq, 1e-13, 1e-13));
}

TEST(Jacobian, SourcesAsMapAndUnconnected) {
  tf::Tensor x = tf::Tensor({1.0, 2.0, 3.0}), z = tf::Tensor({5.0});
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(z);
  tf::Tensor y = tf::reduce_sum(x * x, 0, true);  // [1]
  auto m = tape.jacobian(y, std::map<std::string, tf::Source>{{"x", x}, {"z", z}});
  ASSERT_TRUE(m["x"]);
  EXPECT_EQ(m["x"]->to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(m["x"]->shape(), tf::Shape({1, 3}));
  EXPECT_FALSE(m["z"]);
  for (bool pfor : {true, false}) {
    auto zz = tape.jacobian(y, z, {.unconnected_gradients = tf::UnconnectedGradients::kZero, .experimental_use_pfor = pfor});
    ASSERT_TRUE(zz);
    EXPECT_EQ(zz->shape(), tf::Shape({1, 1}));
    EXPECT_EQ(zz->to_vector<float>(), std::vector<float>{0});
  }
  auto bz = tape.batch_jacobian(tf::reshape(y, tf::Shape{1, 1}), tf::Source(tf::reshape(z, tf::Shape{1, 1})),
                                {.unconnected_gradients = tf::UnconnectedGradients::kZero});
  ASSERT_TRUE(bz);
  EXPECT_EQ(bz->shape(), tf::Shape({1, 1, 1}));
}

TEST(Jacobian, TargetThatIsTheSourceGivesIdentity) {
  tf::Tensor x = tf::Tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor eye = tf::reshape(tf::eye(6), tf::Shape{2, 3, 2, 3});
  for (bool pfor : {true, false}) {
    auto j = tape.jacobian(x, x, {.experimental_use_pfor = pfor});
    ASSERT_TRUE(j);
    EXPECT_TRUE(bitwise_equal(*j, eye));
  }
  auto bj = tape.batch_jacobian(x, x);
  ASSERT_TRUE(bj);
  EXPECT_EQ(bj->to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
}

TEST(Jacobian, IntegerTargetOrSourceGivesNone) {
  tf::Tensor x = tf::Tensor({1.0, 2.0});
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * 2.0;
  EXPECT_FALSE(tape.jacobian(tf::cast(y, tf::DType::kInt32), x));
  EXPECT_FALSE(tape.jacobian(y, tf::range(0, 2)));
}

TEST(Jacobian, VectorizedResultIsDifferentiable) {
  tf::Tensor x = tf::Tensor({1.0, 2.0, 3.0});
  tf::GradientTape outer;
  outer.watch(x);
  std::optional<tf::Tensor> j;
  {
    tf::GradientTape inner;
    inner.watch(x);
    tf::Tensor y = x * x * x;
    j = inner.jacobian(y, x);  // diag(3 x²)
  }
  auto d = outer.gradient(*j, x);  // d/dx sum(diag(3x²)) = 6x
  ASSERT_TRUE(d);
  EXPECT_EQ(d->to_vector<float>(), (std::vector<float>{6, 12, 18}));
}

TEST(Jacobian, CustomGradientFallsBackToTheLoop) {
  auto twice_grad = tf::custom_gradient([](const tf::Tensor& v) {
    return std::make_pair(v * v, std::function<tf::Tensor(const tf::Tensor&)>([v](const tf::Tensor& dy) { return dy * v * 4.0; }));
  });
  tf::Tensor x = tf::Tensor({1.0, 2.0});
  tf::GradientTape tape;  // non-persistent: the vectorized request still succeeds through the fallback
  tape.watch(x);
  tf::Tensor y = tf::exp(twice_grad(x));
  auto j = tape.jacobian(y, x);
  ASSERT_TRUE(j);
  auto yv = y.to_vector<float>();
  std::vector<float> expect{yv[0] * 4.0f, 0, 0, yv[1] * 8.0f};
  auto got = j->to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[static_cast<std::size_t>(i)], expect[static_cast<std::size_t>(i)]);
}

TEST(Jacobian, ErrorPaths) {
  tf::Tensor x = tf::Tensor({1.0, 2.0});
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = x * x;
    EXPECT_THROW(tape.jacobian(y, x, loop()), std::logic_error);  // TF: loop needs a persistent tape
  }
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = x * x;
    EXPECT_TRUE(tape.jacobian(y, x));
    EXPECT_THROW(tape.jacobian(y, x), std::logic_error);  // second call on a non-persistent tape
  }
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * x;
  EXPECT_THROW(tape.jacobian(tf::Tensor(), x), std::invalid_argument);
  tf::Tensor x2 = tf::Tensor({{1.0, 2.0}, {3.0, 4.0}});
  tape.watch(x2);
  tf::Tensor y2 = x2 * 2.0;
  EXPECT_THROW(tape.batch_jacobian(y, x2), std::invalid_argument);  // target rank 1
  EXPECT_THROW(tape.batch_jacobian(y2, x), std::invalid_argument);  // source rank 1
  try {
    tape.batch_jacobian(y2, tf::Source(tf::reshape(x2, tf::Shape{1, 4})));
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("first dimensions"), std::string::npos) << e.what();
  }
  {
    tf::GradientTape t2;
    t2.watch(x2);
    tf::Tensor z = x2 * x2;
    EXPECT_THROW(t2.batch_jacobian(z, x2, {.experimental_use_pfor = false}), std::logic_error);
  }
}

// batch_jacobian == the full jacobian summed over the duplicate batch axis.
TEST(BatchJacobian, EqualsFullJacobianSummedOverBatchAxis) {
  tf::Tensor x = random_f64({5, 3}, 21), w = random_f64({3}, 22);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor h = tf::tanh(x * w + 0.5);
  tf::Tensor y = tf::reshape(tf::broadcast_to(tf::reshape(tf::reduce_sum(h, 1, true), tf::Shape{5, 1, 1}), tf::Shape{5, 2, 1}) *
                                 tf::reshape(tf::elu(h), tf::Shape{5, 1, 3}),
                             tf::Shape{5, 2, 3});  // [5, 2, 3]
  auto full = tape.jacobian(y, x);          // [5, 2, 3, 5, 3]
  tf::Tensor summed = tf::reduce_sum(*full, 3);  // [5, 2, 3, 3]
  for (tf::BatchJacobianOptions opt :
       {tf::BatchJacobianOptions{.check_independence = true}, tf::BatchJacobianOptions{.parallel_iterations = 4},
        tf::BatchJacobianOptions{.parallel_iterations = 1, .experimental_use_pfor = false},
        tf::BatchJacobianOptions{.parallel_iterations = 0, .experimental_use_pfor = false, .check_independence = true}}) {
    auto bj = tape.batch_jacobian(y, x, opt);
    ASSERT_TRUE(bj);
    EXPECT_EQ(bj->shape(), tf::Shape({5, 2, 3, 3}));
    EXPECT_TRUE(all_close(*bj, summed, 1e-12, 1e-12));
  }
  auto seq = tape.batch_jacobian(y, x, {.parallel_iterations = 1, .experimental_use_pfor = false});
  auto par = tape.batch_jacobian(y, x, {.parallel_iterations = 0, .experimental_use_pfor = false});
  EXPECT_TRUE(bitwise_equal(*seq, *par));
}

// [b, n] targets take the one-hot-seed shortcut (scales, adds, then a broadcast product for the
// first matmul); it must agree with the loop, also when an op forces the dense form (reshape).
TEST(BatchJacobian, OneHotSeedShortcutEqualsLoop) {
  tf::Tensor x = random_f64({5, 3}, 51), w1 = random_f64({3, 4}, 52), w2 = random_f64({2, 4}, 53);
  tf::Tensor b1 = random_f64({4}, 54);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor h = tf::tanh(tf::matmul(x, w1) + b1);                                        // [5, 4]
  std::vector<tf::Tensor> targets = {
      tf::elu(tf::matmul(h, w2, false, true) + 0.5),                                      // shortcut to the matmul
      tf::sigmoid(tf::matmul(h, w2, false, true)) * 2.0 - 1.0,                            // Mul: dense from there
      tf::reshape(tf::exp(tf::matmul(x, w1)), tf::Shape{5, 4}) + h,                       // fan-out + reshape
  };
  for (const tf::Tensor& y : targets) {
    auto slow = tape.batch_jacobian(y, x, {.parallel_iterations = 1, .experimental_use_pfor = false});
    ASSERT_TRUE(slow);
    // All columns in one pass, the automatic chunks, and chunks of 1 and 3 of the 2 or 4 columns
    // (the shortcut then takes only its chunk's columns).
    for (int chunk : {0, 1, 3, 100}) {
      SCOPED_TRACE("parallel_iterations=" + std::to_string(chunk));
      auto fast = tape.batch_jacobian(y, x, {.parallel_iterations = chunk});
      ASSERT_TRUE(fast);
      EXPECT_TRUE(all_close(*fast, *slow, 1e-14, 1e-14));
    }
  }
}

TEST(BatchJacobian, IndependenceCheckNamesTheMixingOp) {
  tf::Tensor x = random_f64({6, 3}, 31);
  for (bool pfor : {true, false}) {
    tf::GradientTape tape({.persistent = true});
    tape.watch(x);
    tf::Tensor h = tf::exp(x);
    tf::Tensor y = tf::tanh(h - tf::reduce_mean(h, 0));  // batch-norm-like centring mixes examples
    try {
      tape.batch_jacobian(y, x, {.experimental_use_pfor = pfor, .check_independence = true});
      ADD_FAILURE() << "no throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("op Mean"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(tape.batch_jacobian(y, x, {.experimental_use_pfor = pfor, .check_independence = false}));
  }
  // A single mixed pair (example 5 reads example 2) is caught too.
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor sel = tf::constant(std::vector<double>{0, 0, 0, 0, 0, 1}, tf::Shape{6, 1});
  tf::Tensor pick = tf::constant(std::vector<double>{0, 0, 1, 0, 0, 0}, tf::Shape{6, 1});
  tf::Tensor y = tf::sin(x) + sel * tf::reduce_sum(x * pick, 0, true);
  EXPECT_THROW(tape.batch_jacobian(y, x, {.check_independence = true}), std::invalid_argument);
}

}  // namespace
