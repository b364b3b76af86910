// Second-order workloads of ../shared/peers/RESULTS.md: W2 (Hessian + Newton step, small 40x40 and
// large 1024x1024) and W3 (batch_jacobian [256, 64] -> [256, 64, 64]), each with 1 and 2 threads
// (the argument), plus the loop paths for comparison. PyTorch 1.13 figures (OpenBLAS-SKX, 2 threads,
// best method): W2 small 285 µs, W2 large 17.1 ms, W3 4.0 ms.
#include <benchmark/benchmark.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "tape/autodiff/hessian.h"
#include "tape/autodiff/newton.h"
#include "tape/kernels/cholesky.h"
#include "tape/kernels/parallel.h"
#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

// Keras glorot_uniform: U(±sqrt(6 / (fan_in + fan_out))).
tf::Tensor glorot(tf::Generator& gen, std::int64_t fan_in, std::int64_t fan_out) {
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return tf::random_uniform({fan_in, fan_out}, gen, -limit, limit);
}

// W2: h = relu(x W1 + b1); y = relu(h W2 + b2); loss = mean(y²); Hessian w.r.t. W1.
struct W2 {
  tf::Tensor x, w1_init, w2, b1, b2;
  tf::Variable w1;
  W2(std::int64_t n, std::int64_t din, std::int64_t h1, std::int64_t h2) {
    tf::Generator gen(0);
    x = tf::random_normal({n, din}, gen);
    w1_init = glorot(gen, din, h1);
    w2 = glorot(gen, h1, h2);
    b1 = tf::zeros({h1});
    b2 = tf::zeros({h2});
    w1 = tf::Variable(w1_init, {.name = "W1", .trainable = true, .dtype = std::nullopt});
  }
  tf::Tensor loss() const {
    tf::Tensor h = tf::relu(tf::matmul(x, w1) + b1);
    tf::Tensor y = tf::relu(tf::matmul(h, w2) + b2);
    return tf::reduce_mean(tf::square(y));
  }
};

void run_w2(benchmark::State& state, std::int64_t n, std::int64_t din, std::int64_t h1, std::int64_t h2, bool step,
            tf::HessianOptions hopt = {}) {
  const int prev = tf::kernels::set_num_threads(static_cast<int>(state.range(0)));
  W2 w(n, din, h1, h2);
  auto loss = [&] { return w.loss(); };
  tf::NewtonOptions opt{.damping = 1e-3, .evaluate_loss_after = false, .hessian = hopt};
  for (auto _ : state) {
    w.w1.assign(w.w1_init);
    if (step) {
      tf::NewtonStepResult r = tf::newton_step(loss, {w.w1}, opt);
      benchmark::DoNotOptimize(r.step_norm);
    } else {
      tf::HessianResult r = tf::hessian(loss, std::vector<tf::Variable>{w.w1}, hopt);
      benchmark::DoNotOptimize(r.matrix.raw_data());
    }
  }
  tf::kernels::set_num_threads(prev);
}

void BM_W2SmallHessianNewton(benchmark::State& s) { run_w2(s, 7, 5, 8, 6, true); }
void BM_W2SmallHessianOnly(benchmark::State& s) { run_w2(s, 7, 5, 8, 6, false); }
void BM_W2SmallHessianNewtonLoop(benchmark::State& s) {
  run_w2(s, 7, 5, 8, 6, true, {.experimental_use_pfor = false, .parallel_iterations = 1});
}
void BM_W2LargeHessianNewton(benchmark::State& s) { run_w2(s, 64, 32, 32, 16, true); }
void BM_W2LargeHessianOnly(benchmark::State& s) { run_w2(s, 64, 32, 32, 16, false); }
void BM_W2LargeHessianNewtonChunk256(benchmark::State& s) {
  run_w2(s, 64, 32, 32, 16, true, {.parallel_iterations = 256});
}
void BM_W2LargeHessianNewtonParallelLoop(benchmark::State& s) {
  run_w2(s, 64, 32, 32, 16, true, {.experimental_use_pfor = false});
}

// W3: y = elu(elu(x W1 + b1) W2 + b2), J[b, i, j] = dy[b, i] / dx[b, j], forward included.
void run_w3(benchmark::State& state, tf::BatchJacobianOptions opt) {
  const int prev = tf::kernels::set_num_threads(static_cast<int>(state.range(0)));
  tf::Generator gen(0);
  tf::Tensor x = tf::random_normal({256, 64}, gen);
  tf::Tensor w1 = glorot(gen, 64, 128), w2 = glorot(gen, 128, 64);
  tf::Tensor b1 = tf::zeros({128}), b2 = tf::zeros({64});
  for (auto _ : state) {
    tf::GradientTape tape({.persistent = !opt.experimental_use_pfor});
    tape.watch(x);
    tf::Tensor y = tf::elu(tf::matmul(tf::elu(tf::matmul(x, w1) + b1), w2) + b2);
    auto j = tape.batch_jacobian(y, x, opt);
    benchmark::DoNotOptimize(j->raw_data());
  }
  tf::kernels::set_num_threads(prev);
}

void BM_W3BatchJacobian(benchmark::State& s) { run_w3(s, {.check_independence = false}); }
void BM_W3BatchJacobianChecked(benchmark::State& s) { run_w3(s, {.check_independence = true}); }
void BM_W3BatchJacobianLoop(benchmark::State& s) {
  run_w3(s, {.parallel_iterations = 1, .experimental_use_pfor = false, .check_independence = false});
}
void BM_W3BatchJacobianParallelLoop(benchmark::State& s) {
  run_w3(s, {.parallel_iterations = 0, .experimental_use_pfor = false, .check_independence = false});
}

// Issue 11: jacobian of a softmax classifier's output w.r.t. its input (batch 64, 784 -> 256 -> 10,
// relu), J [64, 10, 64, 784], forward included: vectorized (batching rules through Softmax) vs the loop.
void run_softmax_classifier(benchmark::State& state, tf::JacobianOptions opt) {
  const int prev = tf::kernels::set_num_threads(static_cast<int>(state.range(0)));
  tf::Generator gen(0);
  tf::Tensor x = tf::random_normal({64, 784}, gen);
  tf::Tensor w1 = glorot(gen, 784, 256), w2 = glorot(gen, 256, 10);
  tf::Tensor b1 = tf::zeros({256}), b2 = tf::zeros({10});
  for (auto _ : state) {
    tf::GradientTape tape({.persistent = !opt.experimental_use_pfor});
    tape.watch(x);
    tf::Tensor y = tf::softmax(tf::matmul(tf::relu(tf::matmul(x, w1) + b1), w2) + b2);
    auto j = tape.jacobian(y, x, opt);
    benchmark::DoNotOptimize(j->raw_data());
  }
  tf::kernels::set_num_threads(prev);
}
void BM_SoftmaxClassifierJacobian(benchmark::State& s) { run_softmax_classifier(s, {}); }
void BM_SoftmaxClassifierJacobianLoop(benchmark::State& s) {
  run_softmax_classifier(s, {.parallel_iterations = 0, .experimental_use_pfor = false});
}

// The Newton step's factorisation alone, n x n float32 SPD: ours (blocked, parallel) against
// Eigen's LLT (what newton_step used before), same matrix, same run.
std::vector<float> spd_matrix(std::int64_t n) {
  tf::Generator gen(1);
  Eigen::MatrixXf m = Eigen::Map<const Eigen::MatrixXf>(tf::random_normal({n, n}, gen).data<float>(), n, n);
  Eigen::MatrixXf a = m * m.transpose() + static_cast<float>(n) * Eigen::MatrixXf::Identity(n, n);
  return std::vector<float>(a.data(), a.data() + n * n);
}
void BM_CholeskyOurs(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int prev = tf::kernels::set_num_threads(static_cast<int>(state.range(1)));
  const std::vector<float> a = spd_matrix(n);
  std::vector<float> l(a.size());
  for (auto _ : state) {
    l = a;
    if (!tf::kernels::cholesky_lower(l.data(), n)) state.SkipWithError("not positive definite");
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(n) * n * n / 3.0, benchmark::Counter::kIsIterationInvariantRate);
  tf::kernels::set_num_threads(prev);
}
void BM_CholeskyEigenLLT(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<float> a = spd_matrix(n);
  Eigen::MatrixXf l(n, n);
  for (auto _ : state) {
    l = Eigen::Map<const Eigen::MatrixXf>(a.data(), n, n);
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXf>> llt(l);
    benchmark::DoNotOptimize(llt.info());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(n) * n * n / 3.0, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_CholeskyEigenLLT)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CholeskyOurs)->Args({1024, 1})->Args({1024, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W2SmallHessianNewton)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_W2SmallHessianOnly)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_W2SmallHessianNewtonLoop)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_W2LargeHessianNewton)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W2LargeHessianOnly)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W2LargeHessianNewtonChunk256)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W2LargeHessianNewtonParallelLoop)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W3BatchJacobian)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W3BatchJacobianChecked)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W3BatchJacobianLoop)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W3BatchJacobianParallelLoop)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxClassifierJacobian)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxClassifierJacobianLoop)->Arg(2)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
