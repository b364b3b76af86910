// Float64 first- and second-order gradient checks of the element-wise math ops.
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using tf::testing::GradCheckCase;
using tf::testing::random_f64;

namespace {

std::function<std::vector<tf::Tensor>()> inputs(std::vector<tf::Shape> shapes, double lo = -1.0, double hi = 1.0) {
  return [shapes, lo, hi] {
    std::vector<tf::Tensor> out;
    std::uint64_t seed = 1;
    for (const auto& s : shapes) out.push_back(random_f64(s, seed++, lo, hi));
    return out;
  };
}

tf::testing::TestFn binary(tf::Tensor (*fn)(const tf::Tensor&, const tf::Tensor&)) {
  return [fn](const std::vector<tf::Tensor>& in) { return fn(in[0], in[1]); };
}
tf::testing::TestFn unary(tf::Tensor (*fn)(const tf::Tensor&)) {
  return [fn](const std::vector<tf::Tensor>& in) { return fn(in[0]); };
}

const tf::Shape k23{2, 3};

tf::testing::RegisterGradChecks rows({
    {"AddV2", "same shape", binary(tf::add), inputs({k23, k23})},
    {"AddV2", "broadcast [2,3] + [3]", binary(tf::add), inputs({k23, {3}})},
    {"Sub", "broadcast [2,1] - [3]", binary(tf::subtract), inputs({{2, 1}, {3}})},
    {"Mul", "broadcast [2,3] * []", binary(tf::multiply), inputs({k23, {}})},
    {"RealDiv", "broadcast [2,3] / [3]", binary(tf::divide), inputs({k23, {3}}, 0.5, 2.0)},
    {"Pow", "positive base", binary(tf::pow), inputs({k23, k23}, 0.5, 2.0)},
    {"Maximum", "broadcast", binary(tf::maximum), inputs({k23, {3}})},
    {"Minimum", "broadcast", binary(tf::minimum), inputs({k23, {3}})},
    {"Neg", "", unary(tf::negative), inputs({k23})},
    {"Square", "", unary(tf::square), inputs({k23})},
    {"Sqrt", "", unary(tf::sqrt), inputs({k23}, 0.5, 2.0)},
    {"Rsqrt", "", unary(tf::rsqrt), inputs({k23}, 0.5, 2.0)},
    {"Reciprocal", "", unary(tf::reciprocal), inputs({k23}, 0.5, 2.0)},
    {"Exp", "", unary(tf::exp), inputs({k23})},
    {"Log", "", unary(tf::log), inputs({k23}, 0.5, 2.0)},
    {"Abs", "away from 0", unary(tf::abs), inputs({k23}, 0.2, 1.0)},
    {"Sign", "zero gradient", unary(tf::sign), inputs({k23}, 0.2, 1.0)},
    {"Sin", "", unary(tf::sin), inputs({k23})},
    {"Cos", "", unary(tf::cos), inputs({k23})},
    {"Tanh", "", unary(tf::tanh), inputs({k23})},
    {"Sigmoid", "", unary(tf::sigmoid), inputs({k23})},
    {"Relu", "away from 0", unary(tf::relu), inputs({k23}, 0.1, 1.0)},
    {"Relu", "negative side", unary(tf::relu), inputs({k23}, -1.0, -0.1)},
    {"Elu", "both sides", unary(tf::elu), inputs({k23}, -2.0, 2.0)},
    {"LeakyRelu", "both sides", [](const std::vector<tf::Tensor>& in) { return tf::leaky_relu(in[0], 0.3); }, inputs({k23})},
    {"TanhGrad", "y inside (-1, 1)", binary(tf::tanh_grad), inputs({k23, k23}, -0.9, 0.9)},
    {"ReluGrad", "features on both sides", binary(tf::relu_grad),
     [] { return std::vector<tf::Tensor>{random_f64(k23, 1, -1.0, 1.0), tf::constant(std::vector<double>{-0.7, 0.4, 0.9, -0.2, 0.6, -1.0}, k23)}; }},
    {"EluGrad", "y on both sides", binary(tf::elu_grad),
     [] { return std::vector<tf::Tensor>{random_f64(k23, 1, -1.0, 1.0), tf::constant(std::vector<double>{-0.7, 0.4, 0.9, -0.2, 0.6, -0.95}, k23)}; }},
    {"LeakyReluGrad", "features on both sides", [](const std::vector<tf::Tensor>& in) { return tf::leaky_relu_grad(in[0], in[1], 0.3); },
     [] { return std::vector<tf::Tensor>{random_f64(k23, 1, -1.0, 1.0), tf::constant(std::vector<double>{-0.7, 0.4, 0.9, -0.2, 0.6, -1.0}, k23)}; }},
    {"Softplus", "", unary(tf::softplus), inputs({k23}, -3.0, 3.0)},
    {"Identity", "", unary(tf::identity), inputs({k23})},
    {"Cast", "float64 -> float64 via float32 and back", [](const std::vector<tf::Tensor>& in) {
       return tf::cast(in[0] * 1.0, tf::DType::kFloat64); }, inputs({k23})},
    {"SelectV2", "broadcast condition", [](const std::vector<tf::Tensor>& in) {
       return tf::where(tf::greater(in[0], tf::scalar(0.0, tf::DType::kFloat64)), in[0] * in[1], in[1]); },
     inputs({k23, {3}})},
    {"Reshape", "", [](const std::vector<tf::Tensor>& in) { return tf::reshape(in[0] * in[0], std::vector<std::int64_t>{3, -1}); }, inputs({k23})},
    {"BroadcastTo", "", [](const std::vector<tf::Tensor>& in) { return tf::broadcast_to(in[0], tf::Shape{2, 2, 3}) * in[0]; }, inputs({{3}})},
    {"SumToShape", "", [](const std::vector<tf::Tensor>& in) { return tf::sum_to_shape(in[0] * in[0], tf::Shape{3}); }, inputs({k23})},
});

TEST(MathOpsGradCheck, FirstAndSecondOrder) {
  tf::testing::run_gradcheck_cases({"AddV2", "Sub", "Mul", "RealDiv", "Pow", "Maximum", "Minimum", "Neg", "Square",
                                    "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log", "Abs", "Sign", "Sin", "Cos", "Tanh",
                                    "Sigmoid", "Relu", "Elu", "LeakyRelu", "TanhGrad", "ReluGrad", "EluGrad", "LeakyReluGrad", "Softplus", "Identity", "Cast", "SelectV2",
                                    "Reshape", "BroadcastTo", "SumToShape"});
}

}  // namespace
