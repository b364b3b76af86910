// SimpleRNN / LSTM / GRU / Bidirectional: Keras weight names and layout, initial values, configs
// (layer, Sequential, Functional, save_model / load_model), dropout, errors, second derivatives and
// vectorized jacobians through an LSTM. Numbers against Keras 3 are in rnn_keras_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "layers/internal/serialization_json.h"
#include "layers/dense.h"
#include "layers/input_layer.h"
#include "layers/keras_tensor.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/gru.h"
#include "layers/rnn/lstm.h"
#include "layers/rnn/simple_rnn.h"
#include "layers/serialization.h"
#include "models/config.h"
#include "models/functional.h"
#include "models/saving_model.h"
#include "models/sequential.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
namespace L = tapeflow::layers;
using ::testing::HasSubstr;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(Lstm, KerasWeightNamesShapesAndInitialValues) {
  L::LSTM lstm(L::LSTMOptions{.units = 4, .name = "lstm", .seed = 3});
  tf::Tensor y = lstm(tf::zeros({2, 5, 3}));
  EXPECT_EQ(y.shape(), tf::Shape({2, 4}));
  const auto w = lstm.variables();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].name(), "lstm/lstm_cell/kernel:0");
  EXPECT_EQ(w[1].name(), "lstm/lstm_cell/recurrent_kernel:0");
  EXPECT_EQ(w[2].name(), "lstm/lstm_cell/bias:0");
  EXPECT_EQ(w[0].shape(), tf::Shape({3, 16}));
  EXPECT_EQ(w[1].shape(), tf::Shape({4, 16}));
  EXPECT_EQ(w[2].shape(), tf::Shape({16}));
  EXPECT_EQ(lstm.count_params(), 3 * 16 + 4 * 16 + 16);
  // unit_forget_bias: gates i, f, c, o -> the f quarter is 1.
  const auto b = w[2].value().to_vector<float>();
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b[j], j >= 4 && j < 8 ? 1.0f : 0.0f) << j;
  // Orthogonal recurrent kernel [4, 16]: orthonormal rows.
  tf::Tensor r = w[1].value();
  EXPECT_TRUE(all_close(tf::matmul(r, r, false, true), tf::convert(tf::Tensor{{1.0, 0.0, 0.0, 0.0}, {0.0, 1.0, 0.0, 0.0},
                                                                          {0.0, 0.0, 1.0, 0.0}, {0.0, 0.0, 0.0, 1.0}},
                                                                tf::DType::kFloat32),
                        1e-5, 1e-5));
}

TEST(Gru, BiasLayoutFollowsResetAfter) {
  L::GRU a(L::GRUOptions{.units = 3, .name = "gru"});
  a.build(tf::Shape{1, 2, 5});
  EXPECT_EQ(a.variables()[0].name(), "gru/gru_cell/kernel:0");
  EXPECT_EQ(a.variables()[0].shape(), tf::Shape({5, 9}));
  EXPECT_EQ(a.variables()[1].shape(), tf::Shape({3, 9}));
  EXPECT_EQ(a.variables()[2].shape(), tf::Shape({2, 9}));
  L::GRU b(L::GRUOptions{.units = 3, .reset_after = false});
  b.build(tf::Shape{1, 2, 5});
  EXPECT_EQ(b.variables()[2].shape(), tf::Shape({9}));
  L::SimpleRNN s(L::SimpleRNNOptions{.units = 3, .name = "simple_rnn"});
  s.build(tf::Shape{1, 2, 5});
  EXPECT_EQ(s.variables()[1].name(), "simple_rnn/simple_rnn_cell/recurrent_kernel:0");
  EXPECT_EQ(s.variables()[1].shape(), tf::Shape({3, 3}));
}

TEST(Bidirectional, KerasNamesAndOutputShapes) {
  auto inner = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 3, .return_sequences = true, .name = "lstm"});
  L::Bidirectional bi(inner, {.name = "bidirectional"});
  tf::Tensor y = bi(tf::zeros({2, 5, 4}));
  EXPECT_EQ(y.shape(), tf::Shape({2, 5, 6}));
  const auto w = bi.variables();
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[0].name(), "bidirectional/forward_lstm/lstm_cell/kernel:0");
  EXPECT_EQ(w[3].name(), "bidirectional/backward_lstm/lstm_cell/kernel:0");
  EXPECT_TRUE(bi.backward_layer()->rnn_options().go_backwards);
  L::Bidirectional sum(inner, {.merge_mode = "sum"});
  EXPECT_EQ(sum(tf::zeros({2, 5, 4})).shape(), tf::Shape({2, 5, 3}));
  EXPECT_THAT(error_of([&] { L::Bidirectional(inner, {.merge_mode = "max"}); }), HasSubstr("merge_mode"));
}

TEST(Rnn, ConfigsRoundTrip) {
  L::LSTM lstm(L::LSTMOptions{.units = 5, .recurrent_activation = "hard_sigmoid", .unit_forget_bias = false,
                              .dropout = 0.25, .return_sequences = true, .go_backwards = true});
  const nlohmann::json c = json_of(lstm.get_config());
  EXPECT_EQ(c["units"], 5);
  EXPECT_EQ(c["recurrent_activation"], "hard_sigmoid");
  EXPECT_EQ(c["recurrent_initializer"]["class_name"], "Orthogonal");
  EXPECT_EQ(c["unit_forget_bias"], false);
  auto again = L::deserialize({{"class_name", "LSTM"}, {"config", c}});
  EXPECT_EQ(json_of(again->get_config()), c);
  L::GRU gru(L::GRUOptions{.units = 2, .reset_after = false, .return_state = true});
  auto g2 = L::deserialize(L::serialize_json(gru));
  EXPECT_EQ(json_of(g2->get_config()), json_of(gru.get_config()));
  EXPECT_EQ(json_of(g2->get_config())["reset_after"], false);
  L::SimpleRNN s(L::SimpleRNNOptions{.units = 2, .activation = "relu"});
  EXPECT_EQ(json_of(L::deserialize(L::serialize_json(s))->get_config()), json_of(s.get_config()));
  L::Bidirectional bi(std::make_shared<L::GRU>(L::GRUOptions{.units = 2}), {.merge_mode = "mul"});
  EXPECT_EQ(json_of(L::deserialize(L::serialize_json(bi))->get_config()), json_of(bi.get_config()));
  // Features tapeflow lacks are refused naming the field.
  nlohmann::json bad = c;
  bad["stateful"] = true;
  EXPECT_THAT(error_of([&] { L::deserialize({{"class_name", "LSTM"}, {"config", bad}}); }), HasSubstr("stateful"));
  bad = c;
  bad["kernel_regularizer"] = {{"class_name", "L2"}, {"config", {{"l2", 0.1}}}};
  EXPECT_THAT(error_of([&] { L::deserialize({{"class_name", "LSTM"}, {"config", bad}}); }),
              HasSubstr("kernel_regularizer"));
}

TEST(Rnn, ErrorsNameTheLayerAndShapes) {
  L::LSTM lstm(L::LSTMOptions{.units = 4, .name = "my_lstm"});
  lstm(tf::zeros({2, 5, 3}));
  std::string e = error_of([&] { lstm(tf::zeros({2, 5, 7})); });
  EXPECT_THAT(e, HasSubstr("my_lstm"));
  EXPECT_THAT(e, HasSubstr("[2, 5, 7]"));
  EXPECT_THAT(e, HasSubstr("3]"));
  EXPECT_THAT(error_of([&] { lstm(tf::zeros({2, 3})); }), HasSubstr("[2, 3]"));
  EXPECT_THAT(error_of([&] { lstm(tf::zeros({2, 0, 3})); }), HasSubstr("no timesteps"));
  e = error_of([&] { lstm.call(tf::zeros({2, 5, 3}), tf::zeros({2, 4}, tf::DType::kBool)); });
  EXPECT_THAT(e, HasSubstr("mask of shape [2, 4]"));
  EXPECT_THAT(e, HasSubstr("[2, 5, 3]"));
  e = error_of([&] { lstm.call_with_state(tf::zeros({2, 5, 3}), {tf::zeros({2, 4})}); });
  EXPECT_THAT(e, HasSubstr("expected 2 initial states"));
  e = error_of([&] { lstm.call_with_state(tf::zeros({2, 5, 3}), {tf::zeros({2, 4}), tf::zeros({3, 4})}); });
  EXPECT_THAT(e, HasSubstr("initial state of shape [3, 4]"));
  EXPECT_THAT(error_of([&] { L::LSTM(L::LSTMOptions{.units = 0}); }), HasSubstr("units must be positive"));
  EXPECT_THAT(error_of([&] { L::GRU(L::GRUOptions{.units = 2, .dropout = 1.0}); }), HasSubstr("dropout"));
  EXPECT_THAT(error_of([&] { L::SimpleRNN(L::SimpleRNNOptions{.units = 2, .activation = "nope"}); }),
              HasSubstr("nope"));
  EXPECT_THAT(error_of([&] { lstm.cell()->call(tf::zeros({2, 3}), false); }), HasSubstr("call_cell"));
}

TEST(Rnn, CellCallIsOneStepOfTheLayer) {
  L::GRU gru(L::GRUOptions{.units = 3, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = random_f64({2, 1, 4}, 1);
  const auto out = gru.call_with_state(x);
  const auto step = gru.cell()->call_cell(tf::reshape(x, std::vector<std::int64_t>{2, 4}), {tf::zeros({2, 3}, tf::DType::kFloat64)});
  EXPECT_TRUE(all_close(step[0], out[0], 0, 0));
}

TEST(Rnn, DropoutOnlyWhenTraining) {
  L::LSTM lstm(L::LSTMOptions{.units = 3, .dropout = 0.5, .recurrent_dropout = 0.3, .seed = 1,
                              .dtype = tf::DType::kFloat64});
  L::LSTM plain(L::LSTMOptions{.units = 3, .seed = 1, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = random_f64({4, 6, 2}, 2);
  plain(x);
  lstm(x);
  plain.set_weights(lstm.get_weights());
  EXPECT_TRUE(all_close(lstm(x, false), plain(x, false), 0, 0));
  const tf::Tensor a = lstm(x, true), b = lstm(x, true);
  EXPECT_FALSE(all_close(a, plain(x, false), 1e-6, 1e-6));
  EXPECT_FALSE(all_close(a, b, 1e-6, 1e-6));  // fresh masks per call
  EXPECT_NE(lstm.training_generator(), nullptr);
  EXPECT_EQ(plain.training_generator(), nullptr);
}

TEST(Rnn, MaskedStepsCarryTheStateAndGoBackwardsReverses) {
  L::SimpleRNN a(L::SimpleRNNOptions{.units = 2, .return_sequences = true, .seed = 4, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = random_f64({1, 3, 2}, 3);
  const tf::Tensor all = a(x);
  // A mask of [1, 1, 0]: the last output repeats the second.
  const tf::Tensor m = tf::constant<bool>({true, true, false}, tf::Shape{1, 3});
  const auto y = a.call(x, m).to_vector<double>();
  const auto full = all.to_vector<double>();
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[j], full[j]);
  EXPECT_EQ(y[4], y[2]);
  EXPECT_EQ(y[5], y[3]);
  // go_backwards on reversed inputs = forward on the original (outputs in processing order).
  L::SimpleRNN b(L::SimpleRNNOptions{.units = 2, .return_sequences = true, .go_backwards = true,
                                     .dtype = tf::DType::kFloat64});
  b(x);
  b.set_weights(a.get_weights());
  const tf::Tensor xr = tf::concat({tf::slice(x, {0, 2, 0}, {1, 1, 2}), tf::slice(x, {0, 1, 0}, {1, 1, 2}),
                                    tf::slice(x, {0, 0, 0}, {1, 1, 2})},
                                   1);
  EXPECT_TRUE(all_close(b(xr), all, 1e-14, 1e-14));
}

// d/dW of the input-gradient penalty ||d loss / d x||² (the double-backward of adversarial
// regularization) through an LSTM, against central differences on the kernel, in float64.
TEST(Lstm, InputGradientPenaltyGradientMatchesFiniteDifferences) {
  L::LSTM lstm(L::LSTMOptions{.units = 3, .seed = 5, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = random_f64({2, 4, 2}, 6);
  const tf::Tensor coeff = random_f64({2, 3}, 7);
  lstm(x);
  auto penalty = [&] {
    tf::GradientTape inner;
    inner.watch(x);
    tf::Tensor loss = tf::reduce_sum(lstm(x) * coeff);
    tf::Tensor gx = *inner.gradient(loss, x);
    return tf::reduce_sum(tf::square(gx));
  };
  tf::Variable kernel = lstm.variables()[0];
  tf::GradientTape outer;
  const tf::Tensor p = penalty();
  const tf::Tensor dk = *outer.gradient(p, kernel);
  const std::vector<double> analytic = dk.to_vector<double>();
  const tf::Tensor k0 = kernel.value();
  std::vector<double> base = k0.to_vector<double>();
  const double eps = 1e-6;
  for (std::size_t i = 0; i < base.size(); ++i) {
    std::vector<double> plus = base, minus = base;
    plus[i] += eps;
    minus[i] -= eps;
    kernel.assign(tf::constant(plus, k0.shape(), tf::DType::kFloat64));
    const double fp = penalty().item();
    kernel.assign(tf::constant(minus, k0.shape(), tf::DType::kFloat64));
    const double fm = penalty().item();
    EXPECT_NEAR(analytic[i], (fp - fm) / (2 * eps), 1e-6 + 1e-5 * std::abs(analytic[i])) << "kernel element " << i;
  }
  kernel.assign(k0);
}

TEST(Lstm, FirstAndSecondOrderGradcheckWithRespectToInputs) {
  auto lstm = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .return_sequences = true, .seed = 8,
                                                       .dtype = tf::DType::kFloat64});
  auto gru = std::make_shared<L::GRU>(L::GRUOptions{.units = 2, .reset_after = false, .seed = 9,
                                                    .dtype = tf::DType::kFloat64});
  const tf::Tensor x = random_f64({2, 3, 2}, 10);
  const tf::Tensor m = tf::constant<bool>({true, false, true, true, true, false}, tf::Shape{2, 3});
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) { return lstm->call(in[0], m); }, {x}));
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) { return (*gru)(in[0]); }, {x}));
}

TEST(Lstm, VectorizedJacobianMatchesLoop) {
  L::LSTM lstm(L::LSTMOptions{.units = 3, .return_sequences = true, .seed = 11, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = random_f64({2, 3, 2}, 12);
  tf::Tensor jac[2];
  for (int v = 0; v < 2; ++v) {
    tf::GradientTape tape({.persistent = true});
    tape.watch(x);
    const tf::Tensor y = lstm(x);
    jac[v] = *tape.jacobian(y, x, {.experimental_use_pfor = v == 0});
  }
  EXPECT_EQ(jac[0].shape(), tf::Shape({2, 3, 3, 2, 3, 2}));
  EXPECT_TRUE(all_close(jac[0], jac[1], 1e-12, 1e-12));
}

TEST(Rnn, SequentialAndFunctionalSaveAndLoad) {
  namespace M = tf::models;
  auto in = L::Input({.shape = {5, 3}});
  auto h = (*std::make_shared<L::Bidirectional>(
      std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .return_sequences = true}), L::BidirectionalOptions{}))(in);
  auto h2 = (*std::make_shared<L::GRU>(L::GRUOptions{.units = 3}))(h);
  auto out = (*std::make_shared<L::Dense>(2))(h2);
  auto model = std::make_shared<M::Functional>(in, out);
  const std::string summary = model->summary();
  EXPECT_THAT(summary, HasSubstr("Bidirectional"));
  EXPECT_THAT(summary, HasSubstr("GRU"));
  tf::Generator gen(1);
  const tf::Tensor x = tf::random_normal({2, 5, 3}, gen);
  const tf::Tensor y = (*model)(x);
  auto same = M::model_from_json(M::to_json(*model));
  EXPECT_EQ(M::to_json(*same), M::to_json(*model));
  const std::string path = (std::filesystem::temp_directory_path() / "tapeflow_rnn_model.h5").string();
  M::save_model(*model, path);
  auto loaded = M::load_model(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(all_close((*loaded)(x), y, 0, 0));
  std::vector<std::string> names;
  for (const auto& v : loaded->variables()) names.push_back(v.name());
  EXPECT_THAT(names, ::testing::Contains(::testing::MatchesRegex("bidirectional.*/forward_lstm.*/lstm_cell/kernel:0")));
  // initial_state as further inputs (the Functional API's initial_state).
  auto seq = L::Input({.shape = {5, 3}});
  auto s0 = L::Input({.shape = {4}});
  auto rnn = std::make_shared<L::SimpleRNN>(L::SimpleRNNOptions{.units = 4});
  auto with_state = std::make_shared<M::Functional>(std::vector<L::KerasTensor>{seq, s0},
                                                    std::vector<L::KerasTensor>{(*rnn)({seq, s0})});
  const tf::Tensor st = tf::random_normal({2, 4}, gen);
  EXPECT_TRUE(all_close((*with_state)({x, st}), rnn->call_with_state(x, {st})[0], 0, 0));
}

}  // namespace

namespace {

// The fused paths (BlockLSTM for a whole unmasked sequence, LSTMBlockCell per step with a mask) and
// the composed ops agree: outputs, gradients, and a second derivative (the input-gradient penalty's
// gradient w.r.t. the recurrent kernel), forwards and backwards, with and without a mask.
TEST(Lstm, FusedAndComposedStepsAgree) {
  const tf::Tensor x = random_f64({3, 5, 2}, 22);
  const tf::Tensor m = tf::constant<bool>({true, true, false, true, true, true, true, true, true, false, true, false,
                                           true, true, true},
                                          tf::Shape{3, 5});
  for (bool masked : {true, false}) {
    for (bool backwards : {false, true}) {
      for (bool sequences : {true, false}) {
        SCOPED_TRACE(std::string(masked ? "masked" : "unmasked") + (backwards ? " go_backwards" : "") +
                     (sequences ? " return_sequences" : ""));
        const L::LSTMOptions o{
            .units = 4, .return_sequences = sequences, .go_backwards = backwards, .seed = 21, .dtype = tf::DType::kFloat64};
        L::LSTM fused(o), composed(o);
        std::dynamic_pointer_cast<L::LSTMCell>(fused.cell())->set_fused(true);
        std::dynamic_pointer_cast<L::LSTMCell>(composed.cell())->set_fused(false);
        fused(x);
        composed(x);
        composed.set_weights(fused.get_weights());
        std::vector<double> penalty_grads[2];
        tf::Tensor outs[2], dx[2];
        L::LSTM* layers[2] = {&fused, &composed};
        for (int k = 0; k < 2; ++k) {
          tf::GradientTape outer;
          tf::GradientTape inner;
          inner.watch(x);
          outs[k] = masked ? layers[k]->call(x, m) : layers[k]->call(x, false);
          dx[k] = *inner.gradient(tf::reduce_sum(tf::square(outs[k])), x);
          const tf::Tensor p = tf::reduce_sum(tf::square(dx[k]));
          penalty_grads[k] = outer.gradient(p, layers[k]->variables()[1])->to_vector<double>();
        }
        EXPECT_TRUE(all_close(outs[0], outs[1], 1e-14, 1e-14));
        EXPECT_TRUE(all_close(dx[0], dx[1], 1e-13, 1e-13));
        ASSERT_EQ(penalty_grads[0].size(), penalty_grads[1].size());
        for (std::size_t i = 0; i < penalty_grads[0].size(); ++i)
          EXPECT_NEAR(penalty_grads[0][i], penalty_grads[1][i], 1e-12 + 1e-11 * std::abs(penalty_grads[1][i])) << i;
        // The first-order gradients with nothing recording the backward pass (BlockLSTM's kernel).
        tf::GradientTape plain[2];
        std::vector<double> g[2];
        for (int k = 0; k < 2; ++k) {
          const tf::Tensor y = masked ? layers[k]->call(x, m) : layers[k]->call(x, false);
          for (const auto& v : plain[k].gradient(tf::reduce_sum(tf::square(y)), layers[k]->trainable_variables()))
            for (double e : v->to_vector<double>()) g[k].push_back(e);
        }
        ASSERT_EQ(g[0].size(), g[1].size());
        for (std::size_t i = 0; i < g[0].size(); ++i) EXPECT_NEAR(g[0][i], g[1][i], 1e-13 + 1e-12 * std::abs(g[1][i])) << i;
      }
    }
  }
}

}  // namespace
