// tf.custom_gradient: a function that supplies its own gradient. Two classic uses from
// TensorFlow's "Advanced automatic differentiation" guide: clipping the gradient that flows back,
// and a numerically stable gradient for log(1 + exp(x)).
// Usage: example_custom_gradient
#include <tapeflow/tapeflow.h>

#include <cmath>
#include <cstdio>

namespace tf = tapeflow;

int main() {
  // Identity forward; backward clips the incoming gradient to norm 0.5.
  auto clip_gradients = tf::custom_gradient([](const tf::Tensor& y) {
    return std::make_pair(y, std::function<tf::Tensor(const tf::Tensor&)>(
                                 [](const tf::Tensor& dy) { return tf::clip_by_norm(dy, 0.5); }));
  });
  tf::Variable v(tf::constant(std::vector<double>{3.0, 4.0}, tf::Shape{2}));
  tf::Tensor clipped_grad;
  {
    tf::GradientTape tape;
    const tf::Tensor loss = tf::reduce_sum(clip_gradients(v) * 2.0);  // plain gradient: [2, 2], norm 2.83
    clipped_grad = *tape.gradient(loss, v);
  }
  const auto g = clipped_grad.to_vector<double>();
  std::printf("clipped gradient: [%.4f, %.4f] (norm %.4f)\n", g[0], g[1], std::hypot(g[0], g[1]));

  // log(1 + e^x) has gradient e^x / (1 + e^x) = 1 - 1 / (1 + e^x): finite where e^x overflows.
  auto log1pexp = tf::custom_gradient([](const tf::Tensor& x) {
    const tf::Tensor e = tf::exp(x);
    return std::make_pair(tf::log(1.0 + e), std::function<tf::Tensor(const tf::Tensor&)>(
                                                [e](const tf::Tensor& dy) { return dy * (1.0 - 1.0 / (1.0 + e)); }));
  });
  tf::Variable x(100.0);
  tf::GradientTape tape;
  const tf::Tensor y = log1pexp(x);
  const double dy_dx = tape.gradient(y, x)->item();
  std::printf("d/dx log(1 + e^x) at x = 100: %g (the ops' own gradient would give inf / inf = nan)\n", dy_dx);
  return std::abs(std::hypot(g[0], g[1]) - 0.5) < 1e-12 && dy_dx == 1.0 ? 0 : 1;
}
