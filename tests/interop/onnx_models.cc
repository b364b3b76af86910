// The C++ side of the ONNX Runtime checks (onnx_check.py, tests/interop/CMakeLists.txt).
//   onnx_models export DIR      builds, briefly trains and exports (export_onnx) to DIR/<name>.onnx:
//                               mlp (make_classifier_mlp: Dense, BatchNormalization, ReLU), cnn
//                               (make_classifier_cnn: Reshape, Conv2D, MaxPooling2D, Flatten,
//                               Dropout), functional (two branches joined by Add and Concatenate,
//                               a nested Sequential, BatchNormalization, softmax) and conv_zoo (every
//                               other mapped layer: strided/dilated/"same" convolutions, transposed
//                               convolutions with output padding, BatchNormalization on channels, the
//                               pools, UpSampling2D, ZeroPadding2D, Concatenate of images, Multiply,
//                               Average, LeakyReLU, Activation, hard_sigmoid), and two_inputs (a Functional
//                               model of two Inputs, the halves of each image), and TF's DCGAN
//                               generator (100 normal noise vectors in, images out) and
//                               discriminator (images [28, 28, 1] in), untrained, and recurrent
//                               (LSTM, GRU, SimpleRNN, Bidirectional over the image rows), lstm
//                               (make_classifier_lstm), vit (make_classifier_vit, 2 blocks), conv1d
//                               (Conv1D, 1-D pools, RMS/LayerNormalization, Permute, gelu, a cross
//                               MultiHeadAttention) and tokens (Embedding, PositionEmbedding,
//                               self-attention, LSTM, Bidirectional GRU; its input: 28 float ids
//                               per image, the rows' mean brightness in 16 levels); beside each,
//                               <name>.input.bin (two_inputs: and <name>.input1.bin)
//                               (100 Fashion-MNIST test images, float32 [100, 784]) and
//                               <name>.expected.bin (tapeflow's predict on them, float32).
//   onnx_models predict MODEL.h5 OUT
//                               load_model(MODEL.h5), writes OUT.input.bin / OUT.expected.bin the
//                               same way (for the models train_classifier saved).
// Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
// Exit status 0 on success, 1 on any error (printed).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "data/fashion_mnist_tensors.h"
#include "layers/layers.h"
#include "models/export/onnx.h"
#include "models/models.h"
#include "optimizers/optimizers.h"
#include "tape/ops/array_ops.h"

namespace tf = tapeflow;
namespace L = tapeflow::layers;

namespace {

constexpr std::int64_t kTestImages = 100;

void write_floats(const std::string& path, const tf::Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  if (!out) throw std::runtime_error(path + ": cannot write");
}

tf::Tensor test_images() {
  return tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, kTestImages).x_test;
}

void write_io(tf::models::Model& model, const std::string& base) {
  const tf::Tensor x = test_images();
  write_floats(base + ".input.bin", x);
  write_floats(base + ".expected.bin", model.predict(x, {.batch_size = 32}));
}

// Two inputs: the top and bottom halves of each image (<base>.input.bin, <base>.input1.bin).
void write_io_halves(tf::models::Functional& model, const std::string& base) {
  const tf::Tensor x = test_images();
  const tf::Tensor top = tf::slice(x, {0, 0}, {kTestImages, 392}), bottom = tf::slice(x, {0, 392}, {kTestImages, 392});
  write_floats(base + ".input.bin", top);
  write_floats(base + ".input1.bin", bottom);
  write_floats(base + ".expected.bin", model.predict(std::vector<tf::Tensor>{top, bottom}, {.batch_size = 32}));
}

// Two Inputs (the halves of the image), a Dense on each, Add, a skip Concatenate with one input.
std::shared_ptr<tf::models::Functional> two_inputs() {
  auto top = L::Input({.shape = {392}, .name = "top"});
  auto bottom = L::Input({.shape = {392}, .name = "bottom"});
  auto a = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 24, .activation = "relu", .seed = 6}))(top);
  auto b = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 24, .activation = "sigmoid", .seed = 7}))(bottom);
  auto sum = (*std::make_shared<L::Add>())({a, b});
  auto cat = (*std::make_shared<L::Concatenate>())({sum, top});
  auto out = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .seed = 8}))(cat);
  return std::make_shared<tf::models::Functional>(std::vector<L::KerasTensor>{top, bottom},
                                                  std::vector<L::KerasTensor>{out}, "two_inputs");
}

// One epoch on the first `examples` training images (so BatchNormalization's moving statistics are
// not 0 / 1); `logits`: the model ends without softmax.
void train(tf::models::Model& model, std::int64_t examples, bool logits) {
  const auto ds = tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, examples);
  model.compile({.optimizer = std::make_shared<tf::optimizers::Adam>(),
                 .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                     tf::models::CrossentropyOptions{.from_logits = logits})});
  model.fit(ds.x_train, ds.y_train, {.batch_size = 32, .epochs = 1, .verbose = 0, .seed = 5});
}

std::shared_ptr<tf::models::Functional> functional() {
  auto in = L::Input({.shape = {784}, .name = "pixels"});
  auto h1 = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 32, .activation = "relu", .seed = 1}))(in);
  auto h2 = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 32, .seed = 2}))(in);
  auto sum = (*std::make_shared<L::Add>())({h1, h2});
  auto inner = std::make_shared<tf::models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::Dense>(L::DenseOptions{.units = 16, .activation = "tanh", .seed = 3}),
      std::make_shared<L::Dropout>(0.2)}, "inner");
  auto h3 = (*inner)(in);
  auto cat = (*std::make_shared<L::Concatenate>())({sum, h3, h1});
  auto bn = (*std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{.momentum = 0.5}))(cat);
  auto probs = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .activation = "softmax", .seed = 4}))(bn);
  auto logits = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .seed = 5}))(bn);
  auto out = (*std::make_shared<L::Concatenate>())({probs, logits});  // softmax squashes errors: logits too
  return std::make_shared<tf::models::Functional>(in, out, "functional");
}

std::shared_ptr<tf::models::Functional> conv_zoo() {
  auto conv = [](std::int64_t filters, std::int64_t k, std::int64_t s, const char* padding, const char* act,
                 std::int64_t d = 1) {
    return std::make_shared<L::Conv2D>(L::Conv2DOptions{.filters = filters, .kernel_size = {k, k}, .strides = {s, s},
                                                        .padding = padding, .dilation_rate = {d, d},
                                                        .activation = act});
  };
  auto deconv = [](std::int64_t filters, std::array<std::int64_t, 2> k, std::int64_t s, const char* padding,
                   bool bias = true) {
    return std::make_shared<L::Conv2DTranspose>(L::Conv2DOptions{
        .filters = filters, .kernel_size = k, .strides = {s, s}, .padding = padding, .use_bias = bias});
  };
  auto in = L::Input({.shape = {784}, .name = "pixels"});
  auto x = (*std::make_shared<L::Reshape>(L::ReshapeOptions{.target_shape = {28, -1, 1}}))(in);
  auto c1 = (*conv(8, 3, 2, "same", "relu"))(x);                               // 14x14x8
  auto b1 = (*std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{.momentum = 0.5}))(c1);
  auto t1 = (*deconv(4, {3, 3}, 2, "same"))(b1);                                // 28x28x4
  auto p1 = (*std::make_shared<L::AveragePooling2D>(L::Pooling2DOptions{
      .pool_size = {3, 3}, .strides = std::array<std::int64_t, 2>{2, 2}, .padding = "same"}))(t1);  // 14x14x4
  auto cat = (*std::make_shared<L::Concatenate>())({b1, p1});                   // 14x14x12
  auto z = (*std::make_shared<L::ZeroPadding2D>(L::ZeroPadding2DOptions{.padding = {{{1, 0}, {2, 1}}}}))(cat);  // 15x17
  auto m = (*std::make_shared<L::MaxPooling2D>(L::Pooling2DOptions{.padding = "same"}))(z);  // 8x9x12
  auto u = (*std::make_shared<L::UpSampling2D>())(m);                           // 16x18x12
  auto t2 = (*deconv(3, {3, 3}, 2, "valid"))(u);                                // 33x37x3
  auto t3 = (*conv(4, 5, 1, "valid", "elu", 2))(t2);                            // 25x29x4
  auto sm = (*std::make_shared<L::Activation>("softmax"))(t3);                  // over the channels
  auto lr = (*std::make_shared<L::LeakyReLU>(L::LeakyReLUOptions{.alpha = 0.1}))(
      (*std::make_shared<L::Add>())({t3, sm}));
  auto g1 = (*std::make_shared<L::GlobalMaxPooling2D>())(lr);                   // 4
  auto t4 = (*deconv(2, {2, 3}, 3, "valid", false))(m);                         // 24x27x2 (output padding 1)
  auto g2 = (*std::make_shared<L::GlobalAveragePooling2D>())(t4);               // 2
  auto g3 = (*std::make_shared<L::GlobalAveragePooling2D>(L::GlobalPooling2DOptions{.keepdims = true}))(t4);
  auto f3 = (*std::make_shared<L::Flatten>())(g3);                              // 2
  auto f = (*std::make_shared<L::Flatten>())(m);                                // 864, NHWC order
  auto d = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .activation = "softplus"}))(f);
  auto s = (*std::make_shared<L::Activation>("sigmoid"))(d);
  auto hs = (*std::make_shared<L::Activation>("hard_sigmoid"))(d);
  auto mul = (*std::make_shared<L::Multiply>())({d, s, hs});
  auto avg = (*std::make_shared<L::Average>())({mul, d});
  auto cat2 = (*std::make_shared<L::Concatenate>())({g1, g2, f3, avg});         // 18
  auto out = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 10}))(cat2);  // logits: no softmax to hide errors
  return std::make_shared<tf::models::Functional>(in, out, "conv_zoo");
}

// Fashion-MNIST rows as sequences (28 steps of 28 pixels) through every recurrent layer and option
// ONNX maps: LSTM and GRU returning sequences (the GRU going backwards), SimpleRNN, GRU without
// reset_after, LSTM going backwards, Bidirectional in each merge mode (concat, sum, ave, mul).
std::shared_ptr<tf::models::Functional> recurrent() {
  auto in = L::Input({.shape = {784}, .name = "pixels"});
  auto x = (*std::make_shared<L::Reshape>(L::ReshapeOptions{.target_shape = {28, 28}}))(in);
  auto a = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = 16, .return_sequences = true, .seed = 1}))(x);
  auto b = (*std::make_shared<L::GRU>(L::GRUOptions{.units = 12, .return_sequences = true, .go_backwards = true,
                                                    .seed = 2}))(a);
  auto c = (*std::make_shared<L::SimpleRNN>(L::SimpleRNNOptions{.units = 8, .seed = 3}))(b);
  auto d = (*std::make_shared<L::GRU>(L::GRUOptions{.units = 6, .reset_after = false, .seed = 4}))(x);
  auto e = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = 5, .go_backwards = true, .seed = 5}))(x);
  // Bidirectional in each merge mode.
  auto bi = [](std::shared_ptr<L::RNN> layer, const char* merge) {
    return std::make_shared<L::Bidirectional>(layer, L::BidirectionalOptions{.merge_mode = merge});
  };
  auto f = (*bi(std::make_shared<L::LSTM>(L::LSTMOptions{.units = 6, .return_sequences = true, .seed = 7}), "concat"))(x);
  auto h = (*bi(std::make_shared<L::GRU>(L::GRUOptions{.units = 4, .seed = 8}), "sum"))(f);
  auto i = (*bi(std::make_shared<L::SimpleRNN>(L::SimpleRNNOptions{.units = 3, .seed = 9}), "ave"))(x);
  auto j = (*bi(std::make_shared<L::GRU>(L::GRUOptions{.units = 3, .reset_after = false, .seed = 10}), "mul"))(x);
  auto cat = (*std::make_shared<L::Concatenate>())({c, d, e, h, i, j});
  auto out = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .seed = 6}))(cat);
  return std::make_shared<tf::models::Functional>(in, out, "recurrent");
}

// Conv1D (same, causal dilated, strided valid), the 1-D pools, BatchNormalization and Concatenate on
// channels-first sequences, the global 1-D pools (keepdims too), RMSNormalization, LayerNormalization
// over a non-trailing axis (composed) and over two axes, Permute, a gelu Dense and a cross
// MultiHeadAttention (query, value, key of three tensors, value_dim and output_shape set, no biases).
std::shared_ptr<tf::models::Functional> conv1d() {
  auto in = L::Input({.shape = {784}, .name = "pixels"});
  auto call = [](std::shared_ptr<L::Layer> layer, const L::KerasTensor& x) { return (*layer)(x); };
  auto conv = [](std::int64_t f, std::int64_t k, std::int64_t s, const char* padding, std::int64_t d, const char* act,
                 std::uint64_t seed) {
    return std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = f, .kernel_size = k, .strides = s,
                                                        .padding = padding, .dilation_rate = d, .activation = act,
                                                        .seed = seed});
  };
  auto x = call(std::make_shared<L::Reshape>(L::ReshapeOptions{.target_shape = {28, 28}}), in);
  auto c1 = call(conv(8, 3, 1, "same", 1, "relu", 1), x);                          // 28x8
  auto c2 = call(conv(6, 3, 1, "causal", 2, "tanh", 2), c1);                       // 28x6
  auto bn = call(std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{.momentum = 0.5}), c2);
  auto mp = call(std::make_shared<L::MaxPooling1D>(L::Pooling1DOptions{.pool_size = 3, .strides = 2, .padding = "same"}),
                 bn);                                                               // 14x6
  auto ap = call(std::make_shared<L::AveragePooling1D>(L::Pooling1DOptions{.pool_size = 3, .strides = 2,
                                                                           .padding = "same"}), c1);  // 14x8
  auto cat = (*std::make_shared<L::Concatenate>())(std::vector<L::KerasTensor>{mp, ap});  // 14x14
  auto c3 = call(conv(5, 4, 2, "valid", 1, "gelu", 3), cat);                       // 6x5
  auto g1 = call(std::make_shared<L::GlobalMaxPooling1D>(), c3);                   // 5
  auto g2 = call(std::make_shared<L::GlobalAveragePooling1D>(L::GlobalPooling1DOptions{.keepdims = true}), c3);
  auto f2 = call(std::make_shared<L::Flatten>(), g2);                              // 5
  auto rms = call(std::make_shared<L::RMSNormalization>(), cat);
  auto ln1 = call(std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.axis = {1}}), rms);
  auto ln2 = call(std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.axis = {-2, -1}}), ln1);
  auto pm = call(std::make_shared<L::Permute>(L::PermuteOptions{.dims = {2, 1}}), ln2);  // 14x14
  auto ge = call(std::make_shared<L::Dense>(L::DenseOptions{.units = 12, .activation = "gelu", .seed = 4}), pm);
  auto mha = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{
      .num_heads = 3, .key_dim = 4, .value_dim = 5, .use_bias = false, .output_shape = 7, .seed = 5});
  auto att = (*mha)(std::vector<L::KerasTensor>{ge, c1, x});                        // 14x7
  auto ga = call(std::make_shared<L::GlobalAveragePooling1D>(), att);              // 7
  auto all = (*std::make_shared<L::Concatenate>())(std::vector<L::KerasTensor>{g1, f2, ga});
  auto out = call(std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .seed = 6}), all);
  return std::make_shared<tf::models::Functional>(in, out, "conv1d");
}

// Token ids in: Embedding -> + PositionEmbedding -> LayerNormalization -> self MultiHeadAttention ->
// Add -> LSTM, and a GRU / Bidirectional branch; the ids come as float32 (cast as tapeflow casts).
std::shared_ptr<tf::models::Functional> tokens() {
  auto in = L::Input({.shape = {28}, .name = "ids"});
  auto call = [](std::shared_ptr<L::Layer> layer, const L::KerasTensor& x) { return (*layer)(x); };
  auto e = call(std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 16, .output_dim = 12, .seed = 1}), in);
  auto p = call(std::make_shared<L::PositionEmbedding>(L::PositionEmbeddingOptions{.sequence_length = 32, .seed = 2}), e);
  auto h = (*std::make_shared<L::Add>())(std::vector<L::KerasTensor>{e, p});
  auto n = call(std::make_shared<L::LayerNormalization>(), h);
  auto mha = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 6, .seed = 3});
  auto a = (*std::make_shared<L::Add>())(std::vector<L::KerasTensor>{(*mha)(std::vector<L::KerasTensor>{n, n}), h});
  auto l = call(std::make_shared<L::LSTM>(L::LSTMOptions{.units = 8, .seed = 4}), a);
  auto b = call(std::make_shared<L::Bidirectional>(
                    std::make_shared<L::GRU>(L::GRUOptions{.units = 5, .seed = 5}), L::BidirectionalOptions{}), e);
  auto cat = (*std::make_shared<L::Concatenate>())(std::vector<L::KerasTensor>{l, b});
  auto out = call(std::make_shared<L::Dense>(L::DenseOptions{.units = 10, .seed = 6}), cat);
  return std::make_shared<tf::models::Functional>(in, out, "tokens");
}

// Each image's 28 row means as ids 0..15.
tf::Tensor token_ids() {
  const tf::Tensor x = test_images();
  std::vector<float> ids(static_cast<std::size_t>(kTestImages * 28));
  for (std::int64_t i = 0; i < kTestImages; ++i)
    for (std::int64_t r = 0; r < 28; ++r) {
      double sum = 0;
      for (std::int64_t c = 0; c < 28; ++c) sum += x.data<float>()[i * 784 + r * 28 + c];
      ids[i * 28 + r] = static_cast<float>(std::min<std::int64_t>(15, static_cast<std::int64_t>(sum / 28 * 16)));
    }
  return tf::constant(ids, tf::Shape{kTestImages, 28});
}

int export_models(const std::string& dir) {
  auto mlp = tf::models::make_classifier_mlp({.seed = 1});
  train(*mlp, 2000, true);
  auto cnn = tf::models::make_classifier_cnn({.seed = 2});
  train(*cnn, 500, true);
  auto fn = functional();
  train(*fn, 1000, true);
  auto zoo = conv_zoo();
  train(*zoo, 200, true);
  for (auto [name, model] : std::vector<std::pair<std::string, std::shared_ptr<tf::models::Model>>>{
           {"mlp", mlp}, {"cnn", cnn}, {"functional", fn}, {"conv_zoo", zoo}}) {
    tf::models::export_onnx(*model, dir + "/" + name + ".onnx", {.opset = 17});
    write_io(*model, dir + "/" + name);
    std::cout << "exported " << name << "\n";
  }
  auto rnn = recurrent();
  train(*rnn, 200, true);
  tf::models::export_onnx(*rnn, dir + "/recurrent.onnx", {.opset = 17});
  write_io(*rnn, dir + "/recurrent");
  // The sequence and attention layers: the W11 LSTM classifier, a small ViT (trained briefly), the
  // Conv1D model and the token model (untrained: their ids are not the training images).
  auto lstm = tf::models::make_classifier_lstm({.units = 32, .seed = 12});
  train(*lstm, 200, true);
  auto vit = tf::models::make_classifier_vit({.transformer_layers = 2, .seed = 13});
  train(*vit, 128, true);
  auto c1d = conv1d();
  train(*c1d, 200, true);
  for (auto [name, model] : std::vector<std::pair<std::string, std::shared_ptr<tf::models::Model>>>{
           {"lstm", lstm}, {"vit", vit}, {"conv1d", c1d}}) {
    tf::models::export_onnx(*model, dir + "/" + name + ".onnx", {.opset = 17});
    write_io(*model, dir + "/" + name);
    std::cout << "exported " << name << "\n";
  }
  auto tok = tokens();
  tf::models::export_onnx(*tok, dir + "/tokens.onnx", {.opset = 17});
  {
    const tf::Tensor ids = token_ids();
    write_floats(dir + "/tokens.input.bin", ids);
    write_floats(dir + "/tokens.expected.bin", tok->predict(ids, {.batch_size = 32}));
  }
  // TF's DCGAN tutorial networks (untrained): image inputs [batch, 28, 28, 1] straight into a Conv2D,
  // and an image output that leaves NCHW at the end of the graph.
  auto disc = tf::models::make_dcgan_discriminator({.seed = 9});
  tf::models::export_onnx(*disc, dir + "/dcgan_discriminator.onnx", {.opset = 17});
  {
    const tf::Tensor x = test_images().with_shape(tf::Shape{kTestImages, 28, 28, 1});
    write_floats(dir + "/dcgan_discriminator.input.bin", x);
    write_floats(dir + "/dcgan_discriminator.expected.bin", disc->predict(x, {.batch_size = 32}));
  }
  auto gen = tf::models::make_dcgan_generator({.seed = 10});
  tf::models::export_onnx(*gen, dir + "/dcgan_generator.onnx", {.opset = 17});
  {
    tf::Generator noise(11);
    const tf::Tensor z = tf::random_normal(tf::Shape{kTestImages, 100}, noise, 0.0, 1.0, tf::DType::kFloat32);
    write_floats(dir + "/dcgan_generator.input.bin", z);
    write_floats(dir + "/dcgan_generator.expected.bin", gen->predict(z, {.batch_size = 32}));
  }
  auto two = two_inputs();  // untrained: it has no moving statistics
  tf::models::export_onnx(*two, dir + "/two_inputs.onnx", {.opset = 17});
  write_io_halves(*two, dir + "/two_inputs");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "export" && argc == 3) return export_models(argv[2]);
    if (cmd == "predict" && argc == 4) {
      auto model = tf::models::load_model(argv[2]);
      write_io(*model, argv[3]);
      return 0;
    }
    std::cerr << "usage: onnx_models export DIR | onnx_models predict MODEL.h5 OUT\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "onnx_models: " << e.what() << "\n";
    return 1;
  }
}
