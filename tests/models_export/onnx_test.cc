// export_onnx (models/export/onnx.h): the file ONNX's own checker reads back, and the errors. That
// ONNX Runtime computes what predict() does is checked by tests/interop/onnx_check.py.
#include "layers/internal/serialization_json.h"
#include "models/export/onnx.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "layers/layers.h"
#include "models/models.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::models {
namespace {
namespace fs = std::filesystem;
namespace L = layers;
using ::testing::HasSubstr;

// A layer class ONNX export has no mapping for.
class Scale : public L::Layer {
 public:
  Scale() : L::Layer("Scale", "my_scale") {}
  Tensor call(const Tensor& x, bool) override { return x * 2.0; }
  Config get_config() const override { return base_config(); }
};

// A subclassed model: call() is code, there is no config to walk.
class Subclassed : public Model {
 public:
  Subclassed() : Model("subclassed", "Subclassed") { dense_ = track_layer(std::make_shared<L::Dense>(2)); }
  Tensor call(const Tensor& x, bool training) override { return (*dense_)(x, training); }

 private:
  std::shared_ptr<L::Dense> dense_;
};

fs::path scratch(const std::string& name) {
  fs::path dir = fs::path(TAPEFLOW_BINARY_DIR) / "tests" / "models_export_onnx" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

onnx::ModelProto load(const fs::path& p) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(read(p))) << p;
  return m;
}

std::shared_ptr<Sequential> with_custom_layer() {
  auto m = std::make_shared<Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::Dense>(L::DenseOptions{.units = 4, .seed = 1}), std::make_shared<Scale>(),
      std::make_shared<L::Dense>(L::DenseOptions{.units = 2, .seed = 2})});
  m->build(Shape{1, 3});
  return m;
}

TEST(OnnxExportTest, TheCheckerPassesTheExportedClassifiers) {
  const fs::path dir = scratch("checker");
  auto mlp = make_classifier_mlp({.seed = 1});
  auto cnn = make_classifier_cnn({.seed = 2});
  for (auto [name, model] : std::vector<std::pair<std::string, std::shared_ptr<Model>>>{{"mlp", mlp}, {"cnn", cnn}}) {
    const fs::path p = dir / (name + ".onnx");
    export_onnx(*model, p.string());
    const onnx::ModelProto m = load(p);
    EXPECT_NO_THROW(onnx::checker::check_model(m)) << name;
    EXPECT_NO_THROW(onnx::checker::check_model(p.string())) << name;
    EXPECT_EQ(m.ir_version(), 8);
    ASSERT_EQ(m.opset_import_size(), 1);
    EXPECT_EQ(m.opset_import(0).domain(), "");
    EXPECT_EQ(m.opset_import(0).version(), 17);
    ASSERT_EQ(m.graph().input_size(), 1);
    const auto& in = m.graph().input(0).type().tensor_type().shape();
    ASSERT_EQ(in.dim_size(), 2) << name;
    EXPECT_EQ(in.dim(0).dim_param(), "batch");  // dynamic batch
    EXPECT_EQ(in.dim(1).dim_value(), 784);
    const auto& out = m.graph().output(0).type().tensor_type().shape();
    EXPECT_EQ(out.dim(0).dim_param(), "batch");
    EXPECT_EQ(out.dim(1).dim_value(), 10);
  }
  // The convnet's kernels are transposed to ONNX's [F, C, kh, kw]; the Dense after Flatten keeps [in, units].
  const onnx::ModelProto m = load(dir / "cnn.onnx");
  std::map<std::string, std::vector<std::int64_t>> dims;
  for (const auto& t : m.graph().initializer()) dims[t.name()] = {t.dims().begin(), t.dims().end()};
  const std::string conv = cnn->layers()[1]->name(), dense = cnn->layers().back()->name();
  EXPECT_EQ(dims[conv + "/kernel"], (std::vector<std::int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(dims[dense + "/kernel"], (std::vector<std::int64_t>{1600, 10}));
  // One Transpose into NCHW before the first Conv and one back before Flatten.
  int transposes = 0;
  for (const auto& n : m.graph().node()) transposes += n.op_type() == "Transpose";
  EXPECT_EQ(transposes, 2);
}

TEST(OnnxExportTest, OpsetsFrom13To17ArePassedByTheChecker) {
  const fs::path dir = scratch("opsets");
  auto mlp = make_classifier_mlp({.hidden = {8}, .seed = 1});
  for (int opset : {13, 15, 17}) {
    const fs::path p = dir / ("m" + std::to_string(opset) + ".onnx");
    export_onnx(*mlp, p.string(), {.opset = opset});
    EXPECT_EQ(load(p).opset_import(0).version(), opset);
    EXPECT_NO_THROW(onnx::checker::check_model(p.string()));
  }
  for (int opset : {12, 18}) {
    try {
      export_onnx(*mlp, (dir / "bad.onnx").string(), {.opset = opset});
      ADD_FAILURE() << "opset " << opset << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("opset " + std::to_string(opset) + " is outside 13..17"));
    }
  }
  EXPECT_FALSE(fs::exists(dir / "bad.onnx"));
}

TEST(OnnxExportTest, AnUnmappableLayerIsNamedWithItsClassAndNoFileIsWritten) {
  const fs::path dir = scratch("unmappable");
  const fs::path p = dir / "m.onnx";
  auto model = with_custom_layer();
  try {
    export_onnx(*model, p.string());
    FAIL() << "exported a layer without a mapping";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(p.string()));
    EXPECT_THAT(e.what(), HasSubstr("layer 'my_scale' (Scale) cannot be exported to ONNX"));
    EXPECT_THAT(e.what(), HasSubstr("no ONNX mapping for class Scale"));
  }
  EXPECT_TRUE(fs::is_empty(dir)) << "a partial or temporary file was left behind";
}

TEST(OnnxExportTest, AFailedExportLeavesAnExistingFileAsItWas) {
  const fs::path dir = scratch("keep");
  const fs::path p = dir / "m.onnx";
  export_onnx(*make_classifier_mlp({.hidden = {8}, .seed = 1}), p.string());
  const std::string before = read(p);
  EXPECT_THROW(export_onnx(*with_custom_layer(), p.string()), std::invalid_argument);
  EXPECT_EQ(read(p), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporary file
}

TEST(OnnxExportTest, AnUnwritablePathIsAnErrorNamingIt) {
  const fs::path p = scratch("unwritable") / "no_such_dir" / "m.onnx";
  try {
    export_onnx(*make_classifier_mlp({.hidden = {8}, .seed = 1}), p.string());
    FAIL() << "wrote into a missing directory";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(p.string()));
  }
}

TEST(OnnxExportTest, AnUnbuiltModelIsRefused) {
  const fs::path dir = scratch("unbuilt");
  Sequential model({std::make_shared<L::Dense>(4)});
  try {
    export_onnx(model, (dir / "m.onnx").string());
    FAIL() << "exported a model without an input shape";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("has no input shape"));
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(OnnxExportTest, Float64WeightsAreRefusedNamingTheWeight) {
  const fs::path dir = scratch("float64");
  Sequential model({std::make_shared<L::Dense>(L::DenseOptions{.units = 4, .name = "wide"})}, "", DType::kFloat64);
  model.build(Shape{1, 3});
  try {
    export_onnx(model, (dir / "m.onnx").string());
    FAIL() << "exported float64 weights as float32";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 'wide' (Dense)"));
    EXPECT_THAT(e.what(), HasSubstr("weight 'wide/kernel:0' is float64"));
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(OnnxExportTest, BatchNormalizationOverTheBatchAxisIsRefused) {
  const fs::path dir = scratch("bn_axis");
  Sequential model({std::make_shared<L::BatchNormalization>(L::BatchNormalizationOptions{.axis = 0, .name = "bn0"})});
  model.build(Shape{4, 3});
  try {
    export_onnx(model, (dir / "m.onnx").string());
    FAIL() << "exported a batch-axis normalization";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 'bn0' (BatchNormalization)"));
    EXPECT_THAT(e.what(), HasSubstr("not a feature axis"));
  }
}

TEST(OnnxExportTest, ASubclassedModelIsRefusedBeforeAnythingIsWritten) {
  const fs::path dir = scratch("subclassed");
  Subclassed model;
  model.build(Shape{1, 3});
  EXPECT_THROW(export_onnx(model, (dir / "m.onnx").string()), std::logic_error);
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(OnnxExportTest, TwoInputsBecomeTwoGraphInputsNamedAfterTheirInputLayers) {
  const fs::path dir = scratch("two_inputs");
  auto a = L::Input({.shape = {4}, .name = "left"});
  auto b = L::Input({.shape = {2, 3}, .name = "right"});
  auto fa = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 6, .seed = 1}))(a);
  auto fb = (*std::make_shared<L::Flatten>())(b);
  auto out = (*std::make_shared<L::Multiply>())({fa, fb});
  Functional model({a, b}, {out, fa});
  export_onnx(model, (dir / "m.onnx").string());
  const onnx::ModelProto m = load(dir / "m.onnx");
  EXPECT_NO_THROW(onnx::checker::check_model(m));
  ASSERT_EQ(m.graph().input_size(), 2);
  EXPECT_EQ(m.graph().input(0).name(), "left");
  EXPECT_EQ(m.graph().input(1).name(), "right");
  EXPECT_EQ(m.graph().input(1).type().tensor_type().shape().dim_size(), 3);
  ASSERT_EQ(m.graph().output_size(), 2);
  EXPECT_EQ(m.graph().output(0).name(), "output_0");
  EXPECT_EQ(m.graph().output(1).name(), "output_1");
}

TEST(OnnxExportTest, RecurrentLayersWithoutAnOnnxFormAreRefusedNamingWhatIsMissing) {
  const fs::path dir = scratch("recurrent");
  auto refused = [&](std::shared_ptr<L::Layer> layer, const std::string& what) {
    Sequential model({layer});
    model.build(Shape{1, 5, 3});
    try {
      export_onnx(model, (dir / "m.onnx").string());
      ADD_FAILURE() << "exported " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("layer '" + layer->name() + "' (" + layer->class_name() + ")"));
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  refused(std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .recurrent_activation = "hard_sigmoid"}),
          "activation 'hard_sigmoid' of a recurrent layer has no ONNX mapping");
  refused(std::make_shared<L::GRU>(L::GRUOptions{.units = 4, .return_state = true}), "return_state");
  refused(std::make_shared<L::Bidirectional>(
              std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .recurrent_activation = "hard_sigmoid"})),
          "activation 'hard_sigmoid' of a recurrent layer has no ONNX mapping");
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(OnnxExportTest, AnLstmKeepsKerasGatesInOnnxOrder) {
  const fs::path dir = scratch("lstm_gates");
  auto lstm = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .seed = 1});
  Sequential model({lstm});
  model.build(Shape{1, 4, 3});
  export_onnx(model, (dir / "m.onnx").string());
  const onnx::ModelProto m = load(dir / "m.onnx");
  const Tensor kernel = lstm->variables()[0].value();  // [3, 8]: i, f, c, o blocks of 2 columns
  ASSERT_EQ(kernel.shape(), (Shape{3, 8}));
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != lstm->name() + "/kernel") continue;
    ASSERT_EQ(std::vector<std::int64_t>(t.dims().begin(), t.dims().end()), (std::vector<std::int64_t>{1, 8, 3}));
    const auto* w = reinterpret_cast<const float*>(t.raw_data().data());  // [8, 3]: i, o, f, c blocks of 2 rows
    const int keras_block[4] = {0, 3, 1, 2};
    for (int g = 0; g < 4; ++g)
      for (int j = 0; j < 2; ++j)
        for (int d = 0; d < 3; ++d)
          EXPECT_EQ(w[(g * 2 + j) * 3 + d], kernel.data<float>()[d * 8 + keras_block[g] * 2 + j]) << g << j << d;
    return;
  }
  FAIL() << "no initializer " << lstm->name() << "/kernel";
}

int count_ops(const onnx::ModelProto& m, const std::string& op) {
  int n = 0;
  for (const auto& node : m.graph().node()) n += node.op_type() == op;
  return n;
}

// Functional nodes are read by the Functional reader (read_inbound_node), in Keras 3's form as
// get_config writes them: call arguments the export cannot express are refused by name.
TEST(OnnxExportTest, NodeCallArgumentsAreReadAsTheFunctionalReaderReadsThem) {
  const fs::path dir = scratch("node_arguments");
  auto x = L::Input({.shape = {5, 3}});
  auto h0 = L::Input({.shape = {4}});
  auto c0 = L::Input({.shape = {4}});
  auto y = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .name = "dec"}))(std::vector<L::KerasTensor>{x, h0, c0});
  Functional states({x, h0, c0}, {y});
  try {
    export_onnx(states, (dir / "m.onnx").string());
    ADD_FAILURE() << "exported an initial_state";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 'dec' (LSTM) cannot be exported to ONNX"));
    EXPECT_THAT(e.what(), HasSubstr("an initial_state of 2 tensor(s) is not exported"));
  }
  auto v = L::Input({.shape = {4}});
  auto h = (*std::make_shared<L::Dense>(3))(v);
  Functional inference(v, std::make_shared<L::Dropout>(0.5)->call_all({h}, {.training = false})[0]);
  EXPECT_NO_THROW(export_onnx(inference, (dir / "inference.onnx").string()));  // training=False: as exported
  EXPECT_NO_THROW(onnx::checker::check_model((dir / "inference.onnx").string()));
  auto drop = std::make_shared<L::Dropout>(L::DropoutOptions{.rate = 0.5, .name = "always"});
  Functional training(v, drop->call_all({h}, {.training = true})[0]);
  try {
    export_onnx(training, (dir / "training.onnx").string());
    ADD_FAILURE() << "exported a Dropout fixed in training mode";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 'always' (Dropout) cannot be exported to ONNX"));
    EXPECT_THAT(e.what(), HasSubstr("\"training\":true"));
  }
}

TEST(OnnxExportTest, AKerasMaskThatReachesALayerUsingItIsRefusedNamingBothLayers) {
  const fs::path dir = scratch("mask");
  for (const std::string consumer : {"LSTM", "GlobalAveragePooling1D", "MultiHeadAttention"}) {
    std::shared_ptr<L::Layer> last;
    if (consumer == "LSTM") last = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 3, .name = "reader"});
    if (consumer == "GlobalAveragePooling1D")
      last = std::make_shared<L::GlobalAveragePooling1D>(L::GlobalPooling1DOptions{.name = "reader"});
    if (consumer == "MultiHeadAttention")
      last = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 1, .key_dim = 2,
                                                                                  .name = "reader"});
    Sequential model({std::make_shared<L::Embedding>(L::EmbeddingOptions{
                          .input_dim = 5, .output_dim = 4, .mask_zero = true, .name = "tokens"}),
                      std::make_shared<L::Dense>(L::DenseOptions{.units = 4}),  // passes the mask on
                      last});
    model.build(Shape{1, 6});
    try {
      export_onnx(model, (dir / "m.onnx").string());
      ADD_FAILURE() << "exported a mask " << consumer << " reads";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("layer 'reader' (" + consumer + ") cannot be exported to ONNX"));
      EXPECT_THAT(e.what(), HasSubstr("Keras mask of layer 'tokens' (Embedding mask_zero)"));
    }
    EXPECT_TRUE(fs::is_empty(dir)) << consumer;
  }
  // A mask that a layer drops (Flatten) before anything reads it changes nothing: exported.
  Sequential dropped({std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 5, .output_dim = 4,
                                                                         .mask_zero = true}),
                      std::make_shared<L::Flatten>(), std::make_shared<L::Dense>(2)});
  dropped.build(Shape{1, 6});
  EXPECT_NO_THROW(export_onnx(dropped, (dir / "dropped.onnx").string()));
  EXPECT_NO_THROW(onnx::checker::check_model((dir / "dropped.onnx").string()));
}

TEST(OnnxExportTest, IntegerIdsAreAGraphInputOfTheirTypeGatheredWithoutACast) {
  const fs::path dir = scratch("int_ids");
  auto ids = L::Input({.shape = {6}, .dtype = DType::kInt32, .name = "ids"});
  auto e = (*std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 9, .output_dim = 3, .seed = 1}))(ids);
  auto f = (*std::make_shared<L::Flatten>())(e);
  Functional model(ids, f);
  export_onnx(model, (dir / "m.onnx").string());
  const onnx::ModelProto m = load(dir / "m.onnx");
  EXPECT_NO_THROW(onnx::checker::check_model(m));
  EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::INT32);
  EXPECT_EQ(count_ops(m, "Gather"), 1);
  EXPECT_EQ(count_ops(m, "Cast"), 0);
}

TEST(OnnxExportTest, LayerNormalizationIsOneOpAtOpset17AndComposedBelow) {
  const fs::path dir = scratch("layer_norm");
  Sequential model({std::make_shared<L::LayerNormalization>(), std::make_shared<L::RMSNormalization>()});
  model.build(Shape{1, 5, 4});
  for (int opset : {17, 13}) {
    const fs::path p = dir / ("m" + std::to_string(opset) + ".onnx");
    export_onnx(model, p.string(), {.opset = opset});
    const onnx::ModelProto m = load(p);
    EXPECT_NO_THROW(onnx::checker::check_model(m)) << opset;
    EXPECT_EQ(count_ops(m, "LayerNormalization"), opset == 17 ? 1 : 0) << opset;
    EXPECT_EQ(count_ops(m, "ReduceMean"), opset == 17 ? 1 : 3) << opset;  // RMSNormalization's mean of squares
  }
}

TEST(OnnxExportTest, Conv1DRunsOnNcwWithTransposedKernelsAndOneTransposeAtEachEnd) {
  const fs::path dir = scratch("conv1d");
  auto conv = std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 6, .kernel_size = 3, .seed = 1});
  Sequential model({conv, std::make_shared<L::MaxPooling1D>(),
                    std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 2, .kernel_size = 2, .padding = "causal"}),
                    std::make_shared<L::Flatten>()});
  model.build(Shape{1, 12, 4});
  export_onnx(model, (dir / "m.onnx").string());
  const onnx::ModelProto m = load(dir / "m.onnx");
  EXPECT_NO_THROW(onnx::checker::check_model(m));
  EXPECT_EQ(count_ops(m, "Transpose"), 2);
  const Tensor kernel = conv->variables()[0].value();  // [3, 4, 6]
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != conv->name() + "/kernel") continue;
    ASSERT_EQ(std::vector<std::int64_t>(t.dims().begin(), t.dims().end()), (std::vector<std::int64_t>{6, 4, 3}));
    const auto* w = reinterpret_cast<const float*>(t.raw_data().data());
    for (int f = 0; f < 6; ++f)
      for (int c = 0; c < 4; ++c)
        for (int k = 0; k < 3; ++k) EXPECT_EQ(w[(f * 4 + c) * 3 + k], kernel.data<float>()[(k * 4 + c) * 6 + f]);
    return;
  }
  FAIL() << "no initializer " << conv->name() << "/kernel";
}

}  // namespace
}  // namespace tapeflow::models
