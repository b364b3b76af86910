// The C++ side of the TensorFlow.js checks (see check.mjs and tests/CMakeLists.txt).
//   tfjs_models export DIR   writes DIR/<model>/ (export_tfjs) and DIR/<model>/expected.json
//                            (fixed inputs and tapeflow's predictions) for: an MLP with
//                            BatchNormalization (trained a few steps, predicting in inference
//                            mode), a functional model with two inputs, a skip connection and every
//                            other built-in layer, and a wide model whose weights span two shards.
//   tfjs_models check DIR    loads every DIR/<model>/ saved by TensorFlow.js (load_tfjs) and
//                            compares its predictions with TensorFlow.js's (|a - b| <= 1e-5).
// Exit status 0 on success, 1 on any mismatch or error (printed).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "layers/layers.h"
#include "models/models.h"
#include "optimizers/optimizers.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

tf::Tensor fixed_input(const tf::Shape& shape, std::uint64_t seed) {
  tf::Generator g(seed);
  return tf::random_normal(shape, g, 0.0, 1.0, tf::DType::kFloat32);
}

json tensor_json(const tf::Tensor& t) {
  const float* p = t.data<float>();
  return {{"shape", std::vector<std::int64_t>(t.shape().begin(), t.shape().end())},
          {"data", std::vector<double>(p, p + t.num_elements())}};
}

tf::Tensor tensor_from(const json& j) {
  std::vector<std::int64_t> shape = j["shape"].get<std::vector<std::int64_t>>();
  std::vector<float> data;
  for (const json& v : j["data"]) data.push_back(v.get<float>());
  return tf::constant(data, tf::Shape(shape));
}

void write_expected(const fs::path& dir, const std::vector<tf::Tensor>& inputs, const std::vector<tf::Tensor>& outputs) {
  json j = {{"inputs", json::array()}, {"outputs", json::array()}};
  for (const auto& t : inputs) j["inputs"].push_back(tensor_json(t));
  for (const auto& t : outputs) j["outputs"].push_back(tensor_json(t));
  std::ofstream(dir / "expected.json") << j.dump();
}

int export_models(const fs::path& root) {
  namespace L = tf::layers;
  // 1. MLP with BatchNormalization, a few training steps so the moving statistics are not 0 / 1.
  auto mlp = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::Dense>(L::DenseOptions{.units = 16, .activation = "relu", .kernel_regularizer_l2 = 1e-4}),
      std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{.momentum = 0.5}),
      std::make_shared<L::Dropout>(0.3), std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .activation = "softmax"})});
  mlp->build(tf::Shape{1, 20});
  mlp->compile({.optimizer = std::make_shared<tf::optimizers::Adam>(), .loss = "sparse_categorical_crossentropy"});
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 64; ++i) labels.push_back(i % 10);
  mlp->fit(fixed_input({64, 20}, 1), tf::constant(labels, tf::Shape{64}), {.batch_size = 16, .epochs = 2, .verbose = 0});
  const tf::Tensor x1 = fixed_input({7, 20}, 2);
  tf::models::export_tfjs(*mlp, (root / "mlp").string());
  write_expected(root / "mlp", {x1}, {mlp->predict(x1)});

  // 2. Functional: two inputs, a skip connection, every merge layer and the other built-in layers.
  auto a = L::Input({.shape = {6}});
  auto b = L::Input({.shape = {6}});
  auto h = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 6, .activation = "tanh",
                                                       .kernel_initializer = "he_normal",
                                                       .bias_initializer = L::initializers::constant(0.1)}))(a);
  auto skip = (*std::make_shared<L::Add>())({a, h});
  auto bn = (*std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{
      .epsilon = 0.01, .moving_variance_initializer = L::initializers::constant(2.0)}))(skip);
  auto prod = (*std::make_shared<L::Multiply>())({bn, b});
  auto avg = (*std::make_shared<L::Average>())({prod, (*std::make_shared<L::LeakyReLU>(L::LeakyReLUOptions{.alpha = 0.2}))(b)});
  auto cat = (*std::make_shared<L::Concatenate>())({avg, (*std::make_shared<L::Dropout>(0.5))(b)});
  auto reshaped = (*std::make_shared<L::Reshape>(L::ReshapeOptions{.target_shape = {3, 4}}))(cat);
  auto flat = (*std::make_shared<L::Flatten>())(reshaped);
  auto act = (*std::make_shared<L::Activation>("elu"))(flat);
  auto out = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 3, .activation = "softmax",
                                                         .kernel_initializer = L::initializers::random_uniform(-0.5, 0.5)}))(act);
  tf::models::Functional functional({a, b}, {out});
  const tf::Tensor xa = fixed_input({5, 6}, 3), xb = fixed_input({5, 6}, 4);
  tf::models::export_tfjs(functional, (root / "functional").string());
  write_expected(root / "functional", {xa, xb}, {functional.predict(std::vector<tf::Tensor>{xa, xb})});

  // 3. Weights over 4 MiB: two shards.
  auto wide = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::Dense>(L::DenseOptions{.units = 1100, .activation = "sigmoid"}), std::make_shared<L::Dense>(4)});
  wide->build(tf::Shape{1, 1000});
  const tf::Tensor xw = fixed_input({2, 1000}, 5);
  tf::models::export_tfjs(*wide, (root / "wide").string());
  write_expected(root / "wide", {xw}, {wide->predict(xw)});
  if (!fs::exists(root / "wide" / "group1-shard2of2.bin")) {
    std::cerr << "tfjs_models: the wide model should have two shards\n";
    return 1;
  }
  // 4. A convnet with every conv / pooling / 2-D reshaping layer (their Keras configs, HWIO kernels).
  auto cnn = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::ZeroPadding2D>(L::ZeroPadding2DOptions{.padding = {{{1, 0}, {0, 1}}}}),
      std::make_shared<L::Conv2D>(L::Conv2DOptions{.filters = 4, .kernel_size = {3, 3}, .padding = "same", .activation = "relu"}),
      std::make_shared<L::MaxPooling2D>(L::Pooling2DOptions{.pool_size = {2, 2}}),
      std::make_shared<L::Conv2DTranspose>(
          L::Conv2DOptions{.filters = 3, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same", .activation = "tanh"}),
      std::make_shared<L::UpSampling2D>(L::UpSampling2DOptions{.size = {1, 2}}),
      std::make_shared<L::AveragePooling2D>(L::Pooling2DOptions{.pool_size = {2, 2}, .padding = "same"}),
      std::make_shared<L::Conv2D>(L::Conv2DOptions{.filters = 5, .kernel_size = {2, 2}, .dilation_rate = {2, 2}}),
      std::make_shared<L::GlobalMaxPooling2D>(), std::make_shared<L::Dense>(L::DenseOptions{.units = 3, .activation = "softmax"})});
  cnn->build(tf::Shape{1, 9, 9, 2});
  const tf::Tensor xc = fixed_input({2, 9, 9, 2}, 7);
  tf::models::export_tfjs(*cnn, (root / "cnn").string());
  write_expected(root / "cnn", {xc}, {cnn->predict(xc)});
  std::cout << "exported mlp, functional, wide, cnn to " << root << "\n";
  return 0;
}

int check_models(const fs::path& root) {
  int failures = 0, seen = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "model.json")) continue;
    ++seen;
    const std::string name = entry.path().filename().string();
    try {
      auto model = tf::models::load_tfjs(entry.path().string());
      json expected = json::parse(std::ifstream(entry.path() / "expected.json"));
      std::vector<tf::Tensor> inputs;
      for (const json& t : expected["inputs"]) inputs.push_back(tensor_from(t));
      tf::Tensor got;
      if (auto* f = dynamic_cast<tf::models::Functional*>(model.get())) got = f->predict(inputs);
      else got = model->predict(inputs[0]);
      const tf::Tensor want = tensor_from(expected["outputs"][0]);
      double worst = 0.0;
      if (got.shape() != want.shape()) worst = INFINITY;
      else
        for (std::int64_t i = 0; i < got.num_elements(); ++i)
          worst = std::max(worst, std::abs(double(got.data<float>()[i]) - double(want.data<float>()[i])));
      const bool ok = worst <= 1e-5;
      failures += !ok;
      std::printf("%s %s: max |tapeflow - tfjs| = %.2e (%zu layers)\n", ok ? "ok  " : "FAIL", name.c_str(), worst,
                  model->layers().size());
    } catch (const std::exception& e) {
      std::printf("FAIL %s: %s\n", name.c_str(), e.what());
      ++failures;
    }
  }
  if (seen == 0) {
    std::printf("FAIL: no TensorFlow.js models in %s\n", root.string().c_str());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tfjs_models export DIR | check DIR\n");
    return 2;
  }
  try {
    const std::string cmd = argv[1];
    if (cmd == "export") return export_models(argv[2]);
    if (cmd == "check") return check_models(argv[2]);
    std::fprintf(stderr, "tfjs_models: unknown command '%s'\n", argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfjs_models: error: %s\n", e.what());
    return 1;
  }
}
