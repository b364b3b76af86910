// Second derivatives: the Hessian of a loss over a layer's weights and damped Newton steps,
// (H + λI) u = g, v -= u, as in TensorFlow's "Advanced automatic differentiation" guide.
// Usage: example_newton_step
#include <tapeflow/tapeflow.h>

#include <cstdio>

namespace tf = tapeflow;

int main() {
  // A linear least-squares problem: one Newton step lands (almost) on the minimum.
  tf::Generator gen(5);
  const tf::Tensor x = tf::random_uniform({64, 3}, gen, -1.0, 1.0, tf::DType::kFloat64);
  const tf::Tensor w_true = tf::constant(std::vector<double>{1.5, -2.0, 0.25}, tf::Shape{3, 1});
  const tf::Tensor y = tf::matmul(x, w_true) + 0.7;
  auto layer = std::make_shared<tf::layers::Dense>(tf::layers::DenseOptions{.units = 1, .dtype = tf::DType::kFloat64});
  (*layer)(x);  // builds kernel [3, 1] and bias [1]
  const auto loss_fn = [&] { return tf::reduce_mean(tf::square((*layer)(x) - y)); };

  const tf::HessianResult h = tf::hessian(loss_fn, layer->trainable_variables());
  std::printf("Hessian of the loss over the 4 weights: %s, gradient %s\n", h.matrix.shape().to_string().c_str(),
              h.gradient.shape().to_string().c_str());
  double loss = 0;
  for (int step = 1; step <= 2; ++step) {
    const tf::NewtonStepResult r = tf::newton_step(loss_fn, layer->trainable_variables(), {.damping = 1e-6});
    std::printf("Newton step %d: loss %.3g -> %.3g (solver %s)\n", step, r.loss_before, r.loss_after, r.solver.c_str());
    loss = r.loss_after;
  }
  const auto w = layer->get_weights();
  std::printf("kernel %s, bias %s\n", w[0].to_string().c_str(), w[1].to_string().c_str());
  return loss < 1e-12 ? 0 : 1;
}
