// The models' fusion pass (models/internal/fusion.h), through Sequential and Functional: where it
// fires (the ops a model records) and where it must not, and that the fused ops give the values and
// gradients (to second order) of the layers called one by one as written — bit for bit where the
// header says so, including windows whose maximum is <= 0 and windows with tied maxima.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "layers/layers.h"
#include "models/functional.h"
#include "models/sequential.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

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

// A tensor's values as doubles (float32 widens exactly, so equality stays bit equality).
std::vector<double> values(const Tensor& t) { return cast(t, DType::kFloat64).to_vector<double>(); }

// Output, first-order gradients (input, kernel, bias) and the second-order gradient of the
// input-gradient penalty w.r.t. the kernel and bias, with `forward` as the model's call on `x`.
std::vector<std::vector<double>> derivatives(const layers::Conv2D& conv,
                                             const std::function<Tensor(const Tensor&)>& forward,
                                             const Tensor& x = input()) {
  const std::vector<Variable> w = {conv.kernel(), conv.bias()};
  GradientTape outer;
  GradientTape inner;
  inner.watch(x);
  const Tensor y = forward(x);
  const Tensor loss = reduce_sum(square(y));
  const auto g = inner.gradient(loss, std::vector<Source>{x, w[0], w[1]});
  const Tensor penalty = reduce_sum(square(*g[0]));
  const auto gg = outer.gradient(penalty, w);
  return {values(y), values(*g[0]), values(*g[1]), values(*g[2]), values(*gg[0]), values(*gg[1])};
}

Tensor as_written(Sequential& m, const Tensor& x) {
  Tensor y = x;
  for (const auto& l : m.layers()) y = (*l)(y, true);
  return y;
}

TEST(ModelFusion, ConvReluMaxPoolMatchesTheLayersAsWrittenToSecondOrder) {
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

TEST(ModelFusion, ReluRunsOnThePooledTensorOnlyAfterMaxPooling) {
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

TEST(ModelFusion, FunctionalModelsRewriteWhenTheConvFeedsOnlyThePool) {
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


// The op names a traced call records.
std::vector<std::string> ops_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  const FunctionGraph g = trace("f", [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; }, {x});
  std::vector<std::string> ops;
  for (const FunctionNode& n : g.nodes)
    if (n.kind == FunctionNode::Kind::kOp) ops.push_back(n.op);  // not the inputs and constants
  return ops;
}
std::vector<std::string> ops_of(Model& m, const Tensor& x, bool training = true) {
  return ops_of([&](const Tensor& in) { return m(in, training); }, x);
}
long count(const std::vector<std::string>& ops, const std::string& op) { return std::count(ops.begin(), ops.end(), op); }

std::shared_ptr<layers::Conv2D> conv2d(const std::string& activation, bool use_bias = true,
                                       std::optional<DType> dtype = std::nullopt) {
  return std::make_shared<layers::Conv2D>(layers::Conv2DOptions{.filters = 3, .kernel_size = {3, 3},
                                                                .activation = activation, .use_bias = use_bias,
                                                                .seed = 1, .dtype = dtype});
}

std::shared_ptr<Sequential> sequential(std::vector<std::shared_ptr<layers::Layer>> ls,
                                       std::optional<DType> dtype = DType::kFloat64) {
  auto m = std::make_shared<Sequential>(std::move(ls), "", dtype);
  m->build(Shape{2, 6, 6, 2});
  return m;
}

// The layer has no fusion of its own: called directly, a Conv2D records the convolution, the bias
// add and the relu; the pass runs the same layer in a model as one FusedConv2D, in training and in
// inference.
TEST(ModelFusion, ConvBiasReluFusesInAModelOnlyInTrainingAndInference) {
  auto conv = conv2d("relu");
  auto m = sequential({conv, std::make_shared<layers::Flatten>()});
  const auto alone = ops_of([&](const Tensor& x) { return (*conv)(x, true); }, input());
  EXPECT_EQ(alone, (std::vector<std::string>{"Conv2D", "AddV2", "Relu"}));
  for (bool training : {true, false}) {
    const auto ops = ops_of(*m, input(), training);
    EXPECT_EQ(count(ops, "FusedConv2D"), 1) << training;
    EXPECT_EQ(count(ops, "Conv2D") + count(ops, "AddV2") + count(ops, "Relu"), 0) << training;
  }
  for (const char* linear : {"", "linear"}) {
    auto l = sequential({conv2d(linear), std::make_shared<layers::MaxPooling2D>()});
    // A linear conv is not moved past the pool: FusedConv2D, then MaxPool.
    EXPECT_EQ(ops_of(*l, input()), (std::vector<std::string>{"FusedConv2D", "MaxPool"})) << linear;
    const auto nodes = recorded(*l);
    const auto conv_node =
        std::find_if(nodes.begin(), nodes.end(), [](const FunctionNode& n) { return n.op == "FusedConv2D"; });
    ASSERT_NE(conv_node, nodes.end());
    EXPECT_EQ(conv_node->attrs.get_string("activation"), "linear");  // the op spells "" so
  }
}

// Where no pattern holds, the layers run as written.
TEST(ModelFusion, OtherConvsAndPoolsRunAsWritten) {
  const auto pool = [] { return std::make_shared<layers::MaxPooling2D>(); };
  // Another activation: neither fused op (tanh does not commute with max pooling).
  EXPECT_EQ(ops_of(*sequential({conv2d("tanh"), pool()}), input()),
            (std::vector<std::string>{"Conv2D", "AddV2", "Tanh", "MaxPool"}));
  // No bias: the plain convolution (no fused op takes a missing bias).
  EXPECT_EQ(ops_of(*sequential({conv2d("relu", false)}), input()), (std::vector<std::string>{"Conv2D", "Relu"}));
  // A pool of another dtype casts the conv's output first: the pair stays apart.
  {
    auto m = sequential({conv2d("relu", true, DType::kFloat64),
                         std::make_shared<layers::MaxPooling2D>(layers::Pooling2DOptions{.dtype = DType::kFloat32})},
                        std::nullopt);
    EXPECT_EQ(ops_of(*m, input()), (std::vector<std::string>{"FusedConv2D", "Cast", "MaxPool"}));
  }
  // Conv2DTranspose(relu) -> MaxPool: conv -> pool -> relu, without a fused op (none exists).
  {
    auto t = std::make_shared<layers::Conv2DTranspose>(
        layers::Conv2DTransposeOptions{.filters = 2, .kernel_size = {3, 3}, .activation = "relu", .seed = 3});
    auto m = sequential({t, pool()});
    const auto ops = ops_of(*m, input());
    EXPECT_EQ(ops.back(), "Relu");
    EXPECT_EQ(ops[ops.size() - 2], "MaxPool");
    EXPECT_EQ(count(ops, "Relu"), 1);
    Tensor y = input();
    for (const auto& l : m->layers()) y = (*l)(y, true);
    EXPECT_EQ(values((*m)(input(), true)), values(y));
  }
}

// Functional: a conv whose output a second layer also reads keeps its relu before the pool (the
// pool cannot absorb it); it still runs as one FusedConv2D. Values and derivatives are those of the
// layers called one by one.
TEST(ModelFusion, FunctionalConvReadTwiceIsNotFoldedIntoItsPool) {
  auto conv = conv2d("relu");
  auto pool = std::make_shared<layers::MaxPooling2D>();
  auto flat1 = std::make_shared<layers::Flatten>(), flat2 = std::make_shared<layers::Flatten>();
  auto cat = std::make_shared<layers::Concatenate>();
  auto in = layers::Input({.shape = {6, 6, 2}, .dtype = DType::kFloat64});
  const layers::KerasTensor c = (*conv)(in);
  auto f = std::make_shared<Functional>(in, (*cat)(std::vector{(*flat1)((*pool)(c)), (*flat2)(c)}));
  const auto by_hand = [&](const Tensor& x) {
    const Tensor y = (*conv)(x, true);
    return (*cat)(std::vector{(*flat1)((*pool)(y, true), true), (*flat2)(y, true)}, true);
  };
  const auto ops = ops_of(*f, input());
  EXPECT_EQ(count(ops, "FusedConv2DMaxPool"), 0);
  EXPECT_EQ(count(ops, "FusedConv2D"), 1);
  EXPECT_EQ(count(ops, "MaxPool"), 1);
  EXPECT_EQ(count(ops, "Relu"), 0);
  EXPECT_EQ(derivatives(*conv, [&](const Tensor& x) { return (*f)(x, true); }), derivatives(*conv, by_hand));
}

// float32, random values (no exact sums to hide a different rounding): the fused conv + bias +
// relu gives the values and the derivatives of the three ops, bit for bit, to second order.
TEST(ModelFusion, FusedConvBiasReluDerivativesAreTheUnfusedOnesBitForBit) {
  for (const char* activation : {"relu", ""}) {
    auto conv = std::make_shared<layers::Conv2D>(layers::Conv2DOptions{
        .filters = 5, .kernel_size = {3, 3}, .padding = "same", .activation = activation, .seed = 4});
    auto m = sequential({conv, std::make_shared<layers::Flatten>(),
                         std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = 5})},
                        DType::kFloat32);
    Generator gen(6);
    conv->set_weights({random_normal(Shape{3, 3, 2, 5}, gen), random_normal(Shape{5}, gen)});
    const Tensor x = random_normal(Shape{2, 6, 6, 2}, gen);
    ASSERT_EQ(count(ops_of(*m, x), "FusedConv2D"), 1);
    EXPECT_EQ(derivatives(*conv, [&](const Tensor& in) { return (*m)(in, true); }, x),
              derivatives(*conv, [&](const Tensor& in) { return as_written(*m, in); }, x))
        << activation;
  }
}

// W8's conv2 (float32, 3x3 VALID, 32 -> 64 channels, 2x2 pool) runs Winograd inside the fused op:
// values and derivatives within rounding of the layers as written (not bit for bit).
TEST(ModelFusion, WinogradConvUnderAPoolIsWithinRoundingOfTheLayersAsWritten) {
  auto conv = std::make_shared<layers::Conv2D>(
      layers::Conv2DOptions{.filters = 64, .kernel_size = {3, 3}, .activation = "relu", .seed = 7});
  auto m = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{conv,
                                                                                    std::make_shared<layers::MaxPooling2D>()});
  m->build(Shape{2, 13, 13, 32});
  Generator gen(8);
  const Tensor x = random_normal(Shape{2, 13, 13, 32}, gen);
  ASSERT_EQ(ops_of(*m, x), std::vector<std::string>{"FusedConv2DMaxPool"});
  const auto fused = derivatives(*conv, [&](const Tensor& in) { return (*m)(in, true); }, x);
  const auto written = derivatives(*conv, [&](const Tensor& in) { return as_written(*m, in); }, x);
  for (std::size_t i = 0; i < fused.size(); ++i) {
    ASSERT_EQ(fused[i].size(), written[i].size());
    double scale = 0, worst = 0;
    for (std::size_t k = 0; k < fused[i].size(); ++k) {
      scale = std::max(scale, std::abs(written[i][k]));
      worst = std::max(worst, std::abs(fused[i][k] - written[i][k]));
    }
    EXPECT_GT(scale, 0.0) << "derivative " << i;
    EXPECT_LE(worst, 1e-4 * scale) << "derivative " << i;
  }
}

// Shape errors on the fused path name the layer they concern.
TEST(ModelFusion, FusedCallsNameTheLayerInShapeErrors) {
  auto m = make_net(std::make_shared<layers::MaxPooling2D>(layers::Pooling2DOptions{.pool_size = {3, 3}}), "valid");
  const auto message = [&](const Shape& s) {
    try {
      (*m)(zeros(s, DType::kFloat64), true);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string channels = message(Shape{2, 6, 6, 3});
  EXPECT_NE(channels.find("Conv2D '"), std::string::npos) << channels;
  EXPECT_NE(channels.find("2 channels"), std::string::npos) << channels;
  const std::string small = message(Shape{2, 4, 4, 2});  // conv 2x2, too small for the 3x3 pool
  EXPECT_NE(small.find("MaxPooling2D"), std::string::npos) << small;
}

}  // namespace
}  // namespace tapeflow::models
