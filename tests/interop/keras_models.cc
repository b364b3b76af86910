// The C++ side of the Keras 3 file checks (keras_files.py runs it; see tests/interop/CMakeLists.txt).
//   keras_models save KIND PATH
//       builds tapeflow's KIND (mlp: Dense + BatchNormalization + Dropout, Adam; cnn: Conv2D +
//       MaxPooling2D + Flatten + Dense, SGD with momentum; functional: Dense branches joined by Add
//       and Concatenate, RMSprop), fits it 2 epochs on fixed data, saves it to PATH (.keras or .h5
//       by extension); the sequence kinds as keras_files.py builds them in Keras 3 (lstm_text,
//       bigru_text, transformer, conv1d, simple_rnn: Adam / AdamW / SGD), on padded token ids for the
//       *_text kinds; the Functional node kinds (attention, lstm_state, masked_rnn, explicit_mask:
//       Adam) as keras_files.py builds them; and writes PATH.x0, PATH.x1, ... (the inputs, float32)
//       and PATH.pred (tapeflow's predictions).
//   keras_models check PATH X SHAPE Y EPOCHS
//       loads PATH (made by Keras), predicts the float32 inputs in files X ("a.bin;b.bin", one per
//       model input) of SHAPE ("64,8,6;64,8,8"), writes
//       them to PATH.tapeflow_pred, saves the loaded model again as PATH.tapeflow.keras and
//       PATH.tapeflow.h5, then fits EPOCHS epochs on X and the int32 labels in file Y from
//       the loaded optimizer state (no shuffle, batch 16), and prints one JSON line:
//       {"iterations_loaded": n, "iterations_after": m, "losses": [...]}.
// Prints a JSON line on stdout; exit status 1 (with the error) on any exception.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "layers/layers.h"
#include "data/dataset.h"
#include "models/models.h"
#include "optimizers/optimizers.h"

namespace tf = tapeflow;
namespace L = tf::layers;
using nlohmann::json;

namespace {

void write_floats(const std::string& path, const tf::Tensor& t) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(t.data<float>()),
                                              static_cast<std::streamsize>(t.num_elements() * sizeof(float)));
}

template <class T>
std::vector<T> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Labels: argmax of a fixed linear map of the flattened inputs, so the task is learnable.
tf::Tensor labels_for(const tf::Tensor& x, int classes) {
  const std::int64_t n = x.shape()[0], d = x.num_elements() / n;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    int best = 0;
    double best_v = -1e300;
    for (int c = 0; c < classes; ++c) {
      double v = 0;
      for (std::int64_t k = 0; k < d; ++k) v += x.data<float>()[i * d + k] * std::sin(1.0 + k * 0.37 + c * 1.91);
      if (v > best_v) best_v = v, best = c;
    }
    y.push_back(best);
  }
  return tf::constant(y, tf::Shape{n});
}

std::shared_ptr<tf::models::SparseCategoricalCrossentropy> sparse_ce() {
  return std::make_shared<tf::models::SparseCategoricalCrossentropy>(tf::models::CrossentropyOptions{.from_logits = true});
}

// Adam(0.01) on SparseCategoricalCrossentropy(from_logits=True), as keras_files.py compiles those kinds.
void compile_adam(tf::models::Model& m) {
  m.compile({.optimizer = std::make_shared<tf::optimizers::Adam>(tf::optimizers::AdamOptions{.learning_rate = 0.01}),
             .loss = sparse_ce()});
}

// Token ids 1..19 as float32 (Embedding casts integral floats), each row padded with trailing zeros
// (the mask) to a length of 2 or more.
tf::Tensor token_ids(const tf::Shape& shape, tf::Generator& g) {
  const tf::Tensor u = tf::random_uniform(shape, g, 0.0, 1.0, tf::DType::kFloat32);
  const tf::Tensor len = tf::random_uniform(tf::Shape{shape[0]}, g, 0.0, 1.0, tf::DType::kFloat32);
  std::vector<float> ids(static_cast<std::size_t>(u.num_elements()));
  for (std::int64_t i = 0; i < shape[0]; ++i) {
    const auto n = 2 + static_cast<std::int64_t>(len.data<float>()[i] * static_cast<float>(shape[1] - 1));
    for (std::int64_t t = 0; t < shape[1]; ++t)
      ids[i * shape[1] + t] = t < n ? 1.0f + std::floor(u.data<float>()[i * shape[1] + t] * 19.0f) : 0.0f;
  }
  return tf::constant(ids, shape);
}

// The inputs of KIND: token ids for the *_text kinds and masked_rnn, else normal floats; a second
// input is a 0/1 mask (attention: [B, T, S] with the diagonal kept, so no causal row is empty;
// explicit_mask: [B, T] with step 0 kept).
std::vector<tf::Tensor> model_inputs(const std::string& kind, const std::vector<tf::Shape>& shapes, tf::Generator& g) {
  std::vector<tf::Tensor> xs;
  const bool ids = kind.ends_with("_text") || kind == "masked_rnn";
  xs.push_back(ids ? token_ids(shapes[0], g) : tf::random_normal(shapes[0], g, 0.0, 1.0, tf::DType::kFloat32));
  for (std::size_t i = 1; i < shapes.size(); ++i) {
    const tf::Tensor u = tf::random_uniform(shapes[i], g, 0.0, 1.0, tf::DType::kFloat32);
    std::vector<float> m(static_cast<std::size_t>(u.num_elements()));
    const std::int64_t last = shapes[i][shapes[i].rank() - 1];
    const std::int64_t rows = shapes[i].rank() == 3 ? shapes[i][1] : 1;
    for (std::int64_t k = 0; k < u.num_elements(); ++k) {
      const std::int64_t col = k % last, row = (k / last) % rows;
      const bool keep = shapes[i].rank() == 3 ? col == row : col == 0;
      m[static_cast<std::size_t>(k)] = keep || u.data<float>()[k] > 0.35f ? 1.0f : 0.0f;
    }
    xs.push_back(tf::constant(m, shapes[i]));
  }
  return xs;
}

tf::Tensor predict(tf::models::Model& model, const std::vector<tf::Tensor>& xs) {
  if (xs.size() == 1) return model.predict(xs[0]);
  auto* f = dynamic_cast<tf::models::Functional*>(&model);
  if (!f) throw std::runtime_error("a model of several inputs that is not Functional");
  return f->predict(xs);
}

// Fits `epochs` epochs in batches of 16 (one input: fit(x, y); several: a Dataset of {x..., y}).
tf::models::History fit(tf::models::Model& model, const std::vector<tf::Tensor>& xs, const tf::Tensor& y, int epochs,
                        bool shuffle) {
  if (xs.size() == 1) return model.fit(xs[0], y, {.batch_size = 16, .epochs = epochs, .verbose = 0, .shuffle = shuffle});
  std::vector<tf::Tensor> parts = xs;
  parts.push_back(y);
  auto ds = tf::data::Dataset::from_tensor_slices(parts);
  if (shuffle) ds = ds.shuffle(64, 7);
  return model.fit(ds.batch(16), {.epochs = epochs, .verbose = 0});
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

int save(const std::string& kind, const std::string& path) {
  std::shared_ptr<tf::models::Model> model;
  std::vector<tf::Shape> x_shapes;  // one per model input
  int classes = 10;
  if (kind == "mlp") {
    auto m = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
        std::make_shared<L::Dense>(L::DenseOptions{.units = 32, .activation = "relu"}),
        std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{.momentum = 0.5}),
        std::make_shared<L::Dropout>(0.2), std::make_shared<L::Dense>(10)});
    m->build(tf::Shape{1, 20});
    m->compile({.optimizer = std::make_shared<tf::optimizers::Adam>(),
                .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                    tf::models::CrossentropyOptions{.from_logits = true}),
                .metrics = {"accuracy"}});
    model = m;
    x_shapes = {tf::Shape{64, 20}};
  } else if (kind == "cnn") {
    auto m = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
        std::make_shared<L::Conv2D>(L::Conv2DOptions{.filters = 8, .kernel_size = {3, 3}, .activation = "relu"}),
        std::make_shared<L::MaxPooling2D>(L::Pooling2DOptions{.pool_size = {2, 2}}), std::make_shared<L::Flatten>(),
        std::make_shared<L::Dense>(10)});
    m->build(tf::Shape{1, 12, 12, 1});
    m->compile({.optimizer = std::make_shared<tf::optimizers::SGD>(tf::optimizers::SGDOptions{.momentum = 0.9}),
                .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                    tf::models::CrossentropyOptions{.from_logits = true})});
    model = m;
    x_shapes = {tf::Shape{64, 12, 12, 1}};
  } else if (kind == "functional") {
    auto in = L::Input({.shape = {16}});
    auto a = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 8, .activation = "tanh"}))(in);
    auto b = (*std::make_shared<L::Dense>(8))(in);
    auto sum = (*std::make_shared<L::Add>())({a, b});
    auto cat = (*std::make_shared<L::Concatenate>())({sum, a});
    auto out = (*std::make_shared<L::Dense>(3))(cat);
    auto m = std::make_shared<tf::models::Functional>(in, out);
    m->compile({.optimizer = std::make_shared<tf::optimizers::RMSprop>(),
                .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                    tf::models::CrossentropyOptions{.from_logits = true})});
    model = m;
    x_shapes = {tf::Shape{64, 16}};
    classes = 3;
  } else if (kind == "lstm_text" || kind == "bigru_text") {
    std::shared_ptr<L::Layer> rnn;
    if (kind == "lstm_text")
      rnn = std::make_shared<L::LSTM>(8);
    else
      rnn = std::make_shared<L::Bidirectional>(std::make_shared<L::GRU>(5));
    auto m = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
        std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 20, .output_dim = 6, .mask_zero = true}), rnn,
        std::make_shared<L::Dense>(3)});
    m->build(tf::Shape{1, 9});
    compile_adam(*m);
    model = m;
    x_shapes = {tf::Shape{64, 9}};
    classes = 3;
  } else if (kind == "transformer") {
    auto in = L::Input({.shape = {8, 6}});
    auto norm = [](const L::KerasTensor& t) {
      return (*std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.epsilon = 1e-6}))(t);
    };
    auto h = norm(in);
    auto att = (*std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 4}))(
        std::vector<L::KerasTensor>{h, h});
    auto x = (*std::make_shared<L::Add>())({in, att});
    auto mlp = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 12, .activation = "gelu"}))(norm(x));
    auto y = (*std::make_shared<L::Add>())({x, (*std::make_shared<L::Dense>(6))(mlp)});
    auto out = (*std::make_shared<L::Dense>(3))((*std::make_shared<L::GlobalAveragePooling1D>())(y));
    auto m = std::make_shared<tf::models::Functional>(in, out);
    m->compile({.optimizer = std::make_shared<tf::optimizers::AdamW>(
                    tf::optimizers::AdamWOptions{.learning_rate = 0.003, .weight_decay = 1e-4}),
                .loss = sparse_ce()});
    model = m;
    x_shapes = {tf::Shape{64, 8, 6}};
    classes = 3;
  } else if (kind == "conv1d") {
    auto m = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
        std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 6, .kernel_size = 3, .activation = "relu"}),
        std::make_shared<L::MaxPooling1D>(),
        std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 4, .kernel_size = 3, .padding = "same"}),
        std::make_shared<L::AveragePooling1D>(), std::make_shared<L::GlobalMaxPooling1D>(),
        std::make_shared<L::Dense>(3)});
    m->build(tf::Shape{1, 16, 3});
    m->compile({.optimizer = std::make_shared<tf::optimizers::SGD>(
                    tf::optimizers::SGDOptions{.learning_rate = 0.05, .momentum = 0.9}),
                .loss = sparse_ce()});
    model = m;
    x_shapes = {tf::Shape{64, 16, 3}};
    classes = 3;
  } else if (kind == "simple_rnn") {
    auto m = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
        std::make_shared<L::SimpleRNN>(L::SimpleRNNOptions{.units = 5, .return_sequences = true}),
        std::make_shared<L::SimpleRNN>(4), std::make_shared<L::Dense>(3)});
    m->build(tf::Shape{1, 6, 3});
    compile_adam(*m);
    model = m;
    x_shapes = {tf::Shape{64, 6, 3}};
    classes = 3;
  } else if (kind == "attention") {
    // q = LayerNorm(x), v = Dense(x), k = Dense(x); o, s = MultiHeadAttention(q, v, k,
    // attention_mask=m, use_causal_mask=True, return_attention_scores=True);
    // Dense(3)(Concatenate([GlobalAveragePooling1D(o), Flatten(s)])): every MultiHeadAttention call
    // argument of Keras 3 in one node.
    auto x = L::Input({.shape = {8, 6}});
    auto m = L::Input({.shape = {8, 8}});
    auto q = (*std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.epsilon = 1e-6}))(x);
    auto v = (*std::make_shared<L::Dense>(6))(x);
    auto k = (*std::make_shared<L::Dense>(5))(x);
    auto mha = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 4});
    const auto os = mha->call_all({q, v, k, m}, {.use_causal_mask = true, .return_attention_scores = true,
                                                 .attention_mask = true});
    auto pooled = (*std::make_shared<L::GlobalAveragePooling1D>())(os[0]);
    auto flat = (*std::make_shared<L::Flatten>())(os[1]);
    auto out = (*std::make_shared<L::Dense>(3))((*std::make_shared<L::Concatenate>())({pooled, flat}));
    auto f = std::make_shared<tf::models::Functional>(std::vector<L::KerasTensor>{x, m}, std::vector<L::KerasTensor>{out});
    compile_adam(*f);
    model = f;
    x_shapes = {tf::Shape{64, 8, 6}, tf::Shape{64, 8, 8}};
    classes = 3;
  } else if (kind == "lstm_state") {
    // o, h, c = LSTM(5, return_sequences, return_state)(x); y = LSTM(5)(o, initial_state=[h, c]);
    // Dense(3)(Concatenate([y, h])).
    auto x = L::Input({.shape = {6, 3}});
    const auto s = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 5, .return_sequences = true, .return_state = true})
                       ->call_all({x});
    auto y = (*std::make_shared<L::LSTM>(5))(std::vector<L::KerasTensor>{s[0], s[1], s[2]});
    auto out = (*std::make_shared<L::Dense>(3))((*std::make_shared<L::Concatenate>())({y, s[1]}));
    auto f = std::make_shared<tf::models::Functional>(x, out);
    compile_adam(*f);
    model = f;
    x_shapes = {tf::Shape{64, 6, 3}};
    classes = 3;
  } else if (kind == "masked_rnn") {
    // e = Embedding(20, 6, mask_zero)(ids); the mask flows into Bidirectional(GRU(4,
    // return_sequences)) -> LSTM(5) and into GRU(3); Dense(3)(Concatenate([lstm, gru])).
    auto ids = L::Input({.shape = {9}});
    auto e = (*std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 20, .output_dim = 6, .mask_zero = true}))(ids);
    auto b = (*std::make_shared<L::Bidirectional>(
        std::make_shared<L::GRU>(L::GRUOptions{.units = 4, .return_sequences = true})))(e);
    auto l = (*std::make_shared<L::LSTM>(5))(b);
    auto g = (*std::make_shared<L::GRU>(3))(e);
    auto out = (*std::make_shared<L::Dense>(3))((*std::make_shared<L::Concatenate>())({l, g}));
    auto f = std::make_shared<tf::models::Functional>(ids, out);
    compile_adam(*f);
    model = f;
    x_shapes = {tf::Shape{64, 9}};
    classes = 3;
  } else if (kind == "explicit_mask") {
    // y = LSTM(4)(x, mask=m); Dropout(0.1)(y, training=False); Dense(3).
    auto x = L::Input({.shape = {5, 3}});
    auto m = L::Input({.shape = {5}});
    auto y = std::make_shared<L::LSTM>(4)->call_all({x, m}, {.mask = true})[0];
    auto d = std::make_shared<L::Dropout>(0.1)->call_all({y}, {.training = false})[0];
    auto out = (*std::make_shared<L::Dense>(3))(d);
    auto f = std::make_shared<tf::models::Functional>(std::vector<L::KerasTensor>{x, m}, std::vector<L::KerasTensor>{out});
    compile_adam(*f);
    model = f;
    x_shapes = {tf::Shape{64, 5, 3}, tf::Shape{64, 5}};
    classes = 3;
  } else {
    std::fprintf(stderr,
                 "keras_models: unknown model kind '%s' (mlp, cnn, functional, lstm_text, bigru_text, transformer, "
                 "conv1d, simple_rnn, attention, lstm_state, masked_rnn, explicit_mask)\n",
                 kind.c_str());
    return 2;
  }
  tf::Generator g(7);
  const std::vector<tf::Tensor> xs = model_inputs(kind, x_shapes, g);
  const tf::Tensor y = labels_for(xs[0], classes);
  fit(*model, xs, y, 2, true);
  tf::models::save_model(*model, path);
  json shapes = json::array();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    write_floats(path + ".x" + std::to_string(i), xs[i]);
    shapes.push_back(std::vector<std::int64_t>(xs[i].shape().begin(), xs[i].shape().end()));
  }
  const tf::Tensor pred = predict(*model, xs);
  write_floats(path + ".pred", pred);
  std::cout << json{{"x_shapes", shapes},
                    {"pred_shape", std::vector<std::int64_t>(pred.shape().begin(), pred.shape().end())},
                    {"iterations", model->optimizer()->iterations()}}
                   .dump()
            << "\n";
  return 0;
}

int check(const std::string& path, const std::string& x_file, const std::string& shape_text,
          const std::string& y_file, int epochs) {
  // X: one file per model input, ';'-separated; SHAPE likewise ("64,8,6;64,8,8").
  const std::vector<std::string> files = split(x_file, ';'), shapes = split(shape_text, ';');
  if (files.size() != shapes.size()) throw std::runtime_error("check: " + std::to_string(files.size()) +
                                                              " input files but " + std::to_string(shapes.size()) + " shapes");
  std::vector<tf::Tensor> xs;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::vector<std::int64_t> dims;
    for (const std::string& d : split(shapes[i], ',')) dims.push_back(std::stoll(d));
    xs.push_back(tf::constant(read_file<float>(files[i]), tf::Shape(dims)));
  }
  std::vector<std::int64_t> labels;
  for (std::int32_t v : read_file<std::int32_t>(y_file)) labels.push_back(v);
  const tf::Tensor y = tf::constant(labels, tf::Shape{static_cast<std::int64_t>(labels.size())});
  auto model = tf::models::load_model(path);
  write_floats(path + ".tapeflow_pred", predict(*model, xs));
  // Saved again by tapeflow, for Keras to load (the layers tapeflow's own `save` does not build).
  tf::models::save_model(*model, path + ".tapeflow.keras");
  tf::models::save_model(*model, path + ".tapeflow.h5");
  if (!model->optimizer()) throw std::runtime_error(path + ": loaded without an optimizer");
  const std::int64_t loaded = model->optimizer()->iterations();
  const tf::models::History h = fit(*model, xs, y, epochs, false);
  std::cout << json{{"iterations_loaded", loaded},
                    {"iterations_after", model->optimizer()->iterations()},
                    {"losses", h["loss"]}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 3 && a[0] == "save") return save(a[1], a[2]);
    if (a.size() == 6 && a[0] == "check") return check(a[1], a[2], a[3], a[4], std::stoi(a[5]));
    std::fprintf(stderr, "usage: keras_models save KIND PATH | check PATH X SHAPE Y EPOCHS\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "keras_models: error: %s\n", e.what());
    return 1;
  }
}
