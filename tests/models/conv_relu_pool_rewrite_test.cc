// The models' one rewrite (models/sequential.h, functional.h): a Conv2D with activation relu that
// feeds a MaxPooling2D runs as conv -> pool -> relu. Values and gradients to second order must be those of
// the layers called one by one as written, bit for bit, including windows whose maximum is <= 0 and
// windows with tied maxima; the recorded ops show where the relu went.
#include <gtest/gtest.h>

#include <algorithm>

#include "layers/layers.h"
#include "models/functional.h"
#include "models/sequential.h"
#include "tape/tapeflow.h"

namespace tapeflow::models {
namespace {

// Conv2D(3, 3x3, relu) -> pool -> Flatten -> Dense(2), float64. Small integer weights and inputs
// make many tied maxima; biases of -4 and -2 make many windows entirely <= 0.
std::shared_ptr<Sequential> make_net(std::shared_ptr<layers::Layer> pool, const std::string& padding = "same") {
  auto m = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, "", DType::kFloat64);
  m->add(std::make_shared<layers::Conv2D>(layers::Conv2DOptions{
      .filters = 3, .kernel_size = {3, 3}, .padding = padding, .activation = "relu", .seed = 1}));
  m->add(std::move(pool));
  m->add(std::make_shared<layers::Flatten>());
  m->add(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .seed = 2}));
  m->build(Shape{2, 6, 6, 2});
  Generator gen(7);
  auto& conv = dynamic_cast<layers::Conv2D&>(*m->layers()[0]);
  conv.set_weights({round(random_uniform(Shape{3, 3, 2, 3}, gen, -1.5, 1.5, DType::kFloat64)),
                    constant(std::vector<double>{-4.0, -2.0, 0.0}, Shape{3})});
  return m;
}

Tensor input() {
  Generator gen(11);
  return round(random_uniform(Shape{2, 6, 6, 2}, gen, -1.5, 1.5, DType::kFloat64));
}

// Output, first-order gradients (input, kernel, bias) and the second-order gradient of the
// input-gradient penalty w.r.t. the kernel and bias, with `forward` as the model's call.
std::vector<std::vector<double>> derivatives(const layers::Conv2D& conv,
                                             const std::function<Tensor(const Tensor&)>& forward) {
  const Tensor x = input();
  const std::vector<Variable> w = {conv.kernel(), conv.bias()};
  GradientTape outer;
  GradientTape inner;
  inner.watch(x);
  const Tensor y = forward(x);
  const Tensor loss = reduce_sum(square(y));
  const auto g = inner.gradient(loss, std::vector<Source>{x, w[0], w[1]});
  const Tensor penalty = reduce_sum(square(*g[0]));
  const auto gg = outer.gradient(penalty, w);
  return {y.to_vector<double>(), g[0]->to_vector<double>(), g[1]->to_vector<double>(), g[2]->to_vector<double>(),
          gg[0]->to_vector<double>(), gg[1]->to_vector<double>()};
}

Tensor as_written(Sequential& m, const Tensor& x) {
  Tensor y = x;
  for (const auto& l : m.layers()) y = (*l)(y, true);
  return y;
}

TEST(ConvReluPoolRewrite, ConvReluMaxPoolMatchesTheLayersAsWrittenToSecondOrder) {
  for (const char* padding : {"same", "valid"}) {
    for (auto pool_opts : {layers::Pooling2DOptions{}, layers::Pooling2DOptions{.pool_size = {3, 3}, .strides = {{1, 2}}},
                           layers::Pooling2DOptions{.pool_size = {3, 3}, .strides = {{2, 2}}, .padding = "same"}}) {
      SCOPED_TRACE(std::string(padding) + " pool " + std::to_string(pool_opts.pool_size[0]) + " " + pool_opts.padding);
      auto m = make_net(std::make_shared<layers::MaxPooling2D>(pool_opts), padding);
      // The cases the rewrite must get right are present: windows that are all <= 0 before the
      // relu, and windows whose maximum is tied.
      const auto& conv = dynamic_cast<const layers::Conv2D&>(*m->layers()[0]);
      const Tensor z = conv2d(input(), conv.kernel().read(), {1, 1}, padding == std::string("same") ? "SAME" : "VALID") +
                       conv.bias().read();
      const Tensor p = max_pool2d(z, {pool_opts.pool_size[0], pool_opts.pool_size[1]},
                                  pool_opts.strides.value_or(pool_opts.pool_size),
                                  pool_opts.padding == "same" ? "SAME" : "VALID");
      const auto pv = p.to_vector<double>();
      EXPECT_GT(std::count_if(pv.begin(), pv.end(), [](double v) { return v <= 0.0; }), 2);
      EXPECT_GT(std::count_if(pv.begin(), pv.end(), [](double v) { return v > 0.0; }), 2);

      const auto rewritten = derivatives(conv, [&](const Tensor& x) { return (*m)(x, true); });
      const auto written = derivatives(conv, [&](const Tensor& x) { return as_written(*m, x); });
      ASSERT_EQ(rewritten.size(), written.size());
      for (std::size_t i = 0; i < written.size(); ++i) EXPECT_EQ(rewritten[i], written[i]) << "derivative " << i;
    }
  }
}

// The ops the model records: which op applies the relu, and to what.
std::vector<FunctionNode> recorded(Model& m) {
  const FunctionGraph g = trace("net", [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{m(in[0], true)}; },
                                {input()});
  return g.nodes;
}

TEST(ConvReluPoolRewrite, ReluRunsOnThePooledTensorOnlyAfterMaxPooling) {
  {
    // Conv, bias, pool and the relu on its pooled output as one op.
    auto m = make_net(std::make_shared<layers::MaxPooling2D>());
    const auto nodes = recorded(*m);
    EXPECT_TRUE(std::none_of(nodes.begin(), nodes.end(), [](const FunctionNode& n) {
      return n.op == "FusedConv2D" || n.op == "MaxPool" || n.op == "Relu";
    }));
    const auto fused =
        std::find_if(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "FusedConv2DMaxPool"; });
    ASSERT_NE(fused, nodes.end());
    EXPECT_EQ(fused->attrs.get_string("activation"), "relu");
  }
  // Without a bias: the conv (no activation), the pool, then the relu.
  {
    auto m = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, "", DType::kFloat64);
    m->add(std::make_shared<layers::Conv2D>(layers::Conv2DOptions{
        .filters = 3, .kernel_size = {3, 3}, .activation = "relu", .use_bias = false, .seed = 1}));
    m->add(std::make_shared<layers::MaxPooling2D>());
    const auto nodes = recorded(*m);
    const auto relu = std::find_if(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "Relu"; });
    ASSERT_NE(relu, nodes.end());
    EXPECT_EQ(nodes[static_cast<std::size_t>(relu->inputs[0].node)].op, "MaxPool");
  }
  // Relu does not commute with averaging: the conv keeps its relu and no Relu op follows the pool.
  {
    auto m = make_net(std::make_shared<layers::AveragePooling2D>());
    const auto nodes = recorded(*m);
    const auto conv = std::find_if(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "FusedConv2D"; });
    ASSERT_NE(conv, nodes.end());
    EXPECT_EQ(conv->attrs.get_string("activation"), "relu");
    EXPECT_TRUE(std::none_of(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "Relu"; }));
  }
}

// The same layers as a Functional model: Input -> conv -> pool -> Flatten -> Dense, plus (with
// `conv_is_output`) the conv's output as a second model output, which keeps its relu.
std::shared_ptr<Functional> make_functional(const Sequential& net, bool conv_is_output) {
  const auto& ls = net.layers();
  auto in = layers::Input({.shape = {6, 6, 2}, .dtype = DType::kFloat64});
  const layers::KerasTensor c = (*ls[0])(in);
  const layers::KerasTensor out = (*ls[3])((*ls[2])((*ls[1])(c)));
  if (conv_is_output) return std::make_shared<Functional>(std::vector<layers::KerasTensor>{in}, std::vector{out, c});
  return std::make_shared<Functional>(in, out);
}

TEST(ConvReluPoolRewrite, FunctionalModelsRewriteWhenTheConvFeedsOnlyThePool) {
  auto net = make_net(std::make_shared<layers::MaxPooling2D>());
  auto f = make_functional(*net, false);
  const auto& conv = dynamic_cast<const layers::Conv2D&>(*net->layers()[0]);
  EXPECT_EQ(derivatives(conv, [&](const Tensor& x) { return (*f)(x, true); }),
            derivatives(conv, [&](const Tensor& x) { return as_written(*net, x); }));
  auto nodes = recorded(*f);
  EXPECT_TRUE(std::none_of(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "Relu"; }));
  auto fused = std::find_if(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "FusedConv2DMaxPool"; });
  ASSERT_NE(fused, nodes.end());
  EXPECT_EQ(fused->attrs.get_string("activation"), "relu");

  // The conv's output is also a model output: it must be the relu'd value, so no rewrite.
  auto both = make_functional(*net, true);
  const std::vector<Tensor> outs = both->call_all({input()}, true);
  EXPECT_EQ(outs[1].to_vector<double>(), (*net->layers()[0])(input(), true).to_vector<double>());
  EXPECT_EQ(outs[0].to_vector<double>(), as_written(*net, input()).to_vector<double>());
  const FunctionGraph g = trace("both", [&](const std::vector<Tensor>& in) { return both->call_all(in, true); },
                                {input()});
  EXPECT_TRUE(std::none_of(g.nodes.begin(), g.nodes.end(), [](const FunctionNode& n) { return n.op == "Relu"; }));
}

}  // namespace
}  // namespace tapeflow::models
