// predict: loads any saved model (save_model's .h5, a train_classifier checkpoint ckpt-N.h5, or a
// TensorFlow.js directory) without the code that defined it, and prints its predictions for IDX
// images (class, Fashion-MNIST class name, probability) and, given labels, the accuracy.
// Serving without the training code; see --help.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "apps/common/app_common.h"
#include "json.h"  // tapeflow::to_json (the Config <-> nlohmann-json bridge)

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "models/models.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tf = tapeflow;

namespace {

struct Flags {
  std::string model;
  std::string images;
  std::string labels;
  std::int64_t batch_size = 1000;
  std::int64_t limit = 0;
  std::int64_t show = 10;
  std::string metrics_out;
};

// A train_classifier checkpoint (ckpt-N.h5): the architecture is the --model stored among the
// checkpoint's flags, the weights are the checkpoint's (its optimizer state is not needed).
std::shared_ptr<tf::models::Model> load_checkpoint(const std::string& path) {
  tf::models::Checkpoint flags_only;
  flags_only.read(path);  // tracks nothing: reads the stored flags
  const std::string& config = flags_only.loaded_config();
  const auto at = config.find("--model=");
  if (at == std::string::npos)
    throw std::runtime_error(path + ": the checkpoint does not say which --model it holds (written by another app "
                             "or an older train_classifier); save the model with train_classifier --save-model");
  const std::string name = config.substr(at + 8, config.find('\n', at) - at - 8);
  std::shared_ptr<tf::models::Model> model;
  if (name == "mlp") model = tf::models::make_classifier_mlp();
  else if (name == "cnn") model = tf::models::make_classifier_cnn();
  else if (name == "lstm") model = tf::models::make_classifier_lstm();
  else if (name == "vit") model = tf::models::make_classifier_vit();
  else
    throw std::runtime_error(path + ": a checkpoint of --model " + name +
                             ", which predict cannot rebuild; save the model with train_classifier --save-model");
  model->build(tf::Shape{1, 784});  // train_classifier feeds flattened 28 x 28 images
  tf::models::Checkpoint weights({.model = model});
  weights.read(path);
  return model;
}

// A .h5 or .keras file (save_model, or Keras), a checkpoint ckpt-N.h5, or a TensorFlow.js model directory /
// model.json.
std::shared_ptr<tf::models::Model> load_any(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path) || path.ends_with(".json")) return tf::models::load_tfjs(path);
  const std::string file = fs::path(path).filename().string();
  if (file.starts_with("ckpt-") && file.ends_with(".h5")) return load_checkpoint(path);
  return tf::models::load_model(path, {.compile = false});
}

// uint8 images [n, ...] -> float32 in [0, 1] shaped [n, <the model's input shape>].
tf::Tensor images_tensor(const tf::data::IdxArray& a, std::int64_t n, const tf::Shape& example_shape, const std::string& file) {
  if (a.type != tf::data::IdxType::kUInt8 || a.dims.empty())
    throw std::runtime_error(file + ": expected uint8 images [n, ...], got " + tf::data::describe(a));
  const std::int64_t per = a.num_elements() / std::max<std::int64_t>(a.dims[0], 1);
  if (per != example_shape.num_elements())
    throw std::runtime_error(file + ": images have " + std::to_string(per) + " values each, the model expects " +
                             example_shape.to_string() + " (" + std::to_string(example_shape.num_elements()) + ")");
  std::vector<std::int64_t> dims{n};
  dims.insert(dims.end(), example_shape.begin(), example_shape.end());
  tf::Tensor x = tf::Tensor::empty(tf::Shape(dims), tf::DType::kFloat32);
  float* p = x.mutable_data<float>();
  for (std::int64_t i = 0; i < n * per; ++i) p[i] = static_cast<float>(a.bytes[i]) / 255.0f;
  return x;
}

int run(const Flags& f) {
  if (!f.metrics_out.empty()) tf::apps::check_writable_file("--metrics-out", f.metrics_out);  // before the work
  auto model = load_any(f.model);
  spdlog::info("Loaded {} '{}' ({} parameters) from {}", model->class_name(), model->name(), model->count_params(), f.model);
  const tf::data::IdxArray images = tf::data::read_idx(f.images);
  std::int64_t n = images.dims.empty() ? 0 : images.dims[0];
  if (f.limit > 0) n = std::min(n, f.limit);
  // The model's input shape without the batch axis, from its config.
  nlohmann::json config = tf::to_json(tf::models::model_to_config(*model))["config"];
  std::vector<std::int64_t> input;
  for (const auto& l : config["layers"]) {
    // An InputLayer, or (as TensorFlow.js writes Sequential models) the first layer's batch_input_shape.
    const auto& c = l["config"];
    if (c.contains("batch_input_shape") && c["batch_input_shape"].is_array()) {
      for (std::size_t i = 1; i < c["batch_input_shape"].size(); ++i)
        input.push_back(c["batch_input_shape"][i].get<std::int64_t>());
      break;
    }
  }
  if (input.empty()) throw std::runtime_error(f.model + ": the model config has no input shape");
  const tf::Tensor x = images_tensor(images, n, tf::Shape(input), f.images);
  const tf::Tensor scores = model->predict(x, {.batch_size = f.batch_size});
  const tf::Tensor predicted = tf::argmax(scores, -1);
  const std::int64_t* p = predicted.data<std::int64_t>();
  // Probabilities: the outputs as they are when each row already is a distribution (a softmax
  // layer), else their softmax (logits).
  tf::Tensor probs = tf::cast(scores, tf::DType::kFloat64);
  if (n > 0 && !(tf::reduce_min(probs).item() >= 0 &&
                 tf::reduce_max(tf::abs(tf::reduce_sum(probs, {-1}) - 1.0)).item() < 1e-3))
    probs = tf::softmax(probs, -1);
  const double* q = probs.data<double>();
  const std::int64_t classes = scores.shape()[scores.rank() - 1];
  const auto names = tf::data::fashion_mnist_class_names();
  for (std::int64_t i = 0; i < std::min(n, f.show); ++i) {
    const std::int64_t k = p[i];
    std::printf("%lld: class %lld%s%s (%.4f)\n", (long long)i, (long long)k, classes == 10 ? " " : "",
                classes == 10 ? names[static_cast<std::size_t>(k)] : "", q[i * classes + k]);
  }
  if (!f.labels.empty()) {
    const tf::data::IdxArray labels = tf::data::read_idx(f.labels);
    if (labels.type != tf::data::IdxType::kUInt8 || labels.dims.size() != 1 || labels.dims[0] < n)
      throw std::runtime_error(f.labels + ": expected at least " + std::to_string(n) + " uint8 labels, got " +
                               tf::data::describe(labels));
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; ++i) correct += p[i] == labels.bytes[i];
    const double acc = n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
    std::printf("accuracy: %.4f (%lld / %lld)\n", acc, (long long)correct, (long long)n);
    if (!f.metrics_out.empty()) {
      std::ofstream out(f.metrics_out);
      out << nlohmann::json{{"accuracy", acc}, {"correct", correct}, {"examples", n}}.dump(2) << "\n";
      if (!out.flush()) throw std::runtime_error("--metrics-out: cannot write '" + f.metrics_out + "'");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Load a saved model (.h5, .keras, a train_classifier checkpoint ckpt-N.h5 or a TensorFlow.js "
               "directory) and predict classes of IDX images.",
               "predict"};
  app.add_option("--model", f.model,
                 "Model file (.h5 or .keras), a train_classifier checkpoint (ckpt-N.h5), or a TensorFlow.js "
                 "directory / model.json")->required()->check(CLI::ExistingPath);
  app.add_option("--images", f.images, "IDX images (uint8, optionally .gz), scaled to [0, 1]")->required()->check(CLI::ExistingFile);
  auto* labels = app.add_option("--labels", f.labels, "IDX labels: print the accuracy")->check(CLI::ExistingFile);
  app.add_option("--batch-size", f.batch_size, "Examples per forward pass")->capture_default_str()->check(tf::apps::integer_at_least<std::int64_t>(1));
  app.add_option("--limit", f.limit, "Use only the first N images (0: all)")->capture_default_str()->check(tf::apps::integer_at_least<std::int64_t>(0));
  app.add_option("--show", f.show, "Print the first N predictions")->capture_default_str()->check(tf::apps::integer_at_least<std::int64_t>(0));
  app.add_option("--metrics-out", f.metrics_out, "Write the accuracy as JSON to this file (needs --labels)")
      ->needs(labels);
  app.footer(tf::apps::kExitCodesHelp);
  // One convention with the other apps: usage errors exit 2, data/file errors 1 (apps/common).
  if (auto code = tf::apps::parse_flags(app, argc, argv)) return *code;
  return tf::apps::run_app("predict", [&] { return run(f); });
}
