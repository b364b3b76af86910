// save_weights / load_weights: round trips for every layer type, the Keras layout read back with
// the HDF5 C API, matching by name and by order, and every error path.
#include "models/saving.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <fstream>

#include "layers/layers.h"
#include "models/sequential.h"
#include "tape/tapeflow.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;
using L = std::shared_ptr<layers::Layer>;

// Every layer type, built on [2, 4, 3] inputs.
std::shared_ptr<Sequential> all_layers(std::uint64_t seed, const std::string& prefix = "") {
  auto name = [&](const char* n) { return prefix.empty() ? std::string() : prefix + n; };
  auto m = std::make_shared<Sequential>(std::vector<L>{
      std::make_shared<layers::Flatten>(layers::FlattenOptions{.name = name("flat")}),
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 6, .activation = "relu", .name = name("d1"), .seed = seed}),
      std::make_shared<layers::BatchNormalization>(layers::BatchNormalizationOptions{.name = name("bn")}),
      std::make_shared<layers::Dropout>(layers::DropoutOptions{.rate = 0.5, .name = name("drop")}),
      std::make_shared<layers::LeakyReLU>(layers::LeakyReLUOptions{.name = name("leaky")}),
      std::make_shared<layers::Reshape>(layers::ReshapeOptions{.target_shape = {2, 3}, .name = name("reshape")}),
      std::make_shared<layers::Activation>(layers::ActivationOptions{.activation = "tanh", .name = name("act")}),
      std::make_shared<layers::Flatten>(layers::FlattenOptions{.name = name("flat2")}),
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .use_bias = false, .name = name("d2"), .seed = seed + 1,
                                                           .dtype = DType::kFloat64})});
  m->build(Shape{2, 4, 3});
  return m;
}

void perturb(layers::Layer& m) {  // make BN moving stats differ from their initial values
  for (const Variable& v : m.variables())
    if (v.dtype() == DType::kFloat32) v.assign_add(fill(v.shape(), 0.25, DType::kFloat32));
}

void expect_same_weights(const layers::Layer& a, const layers::Layer& b) {
  auto va = a.variables(), vb = b.variables();
  ASSERT_EQ(va.size(), vb.size());
  for (std::size_t i = 0; i < va.size(); ++i) {
    ASSERT_EQ(va[i].shape(), vb[i].shape()) << va[i].name();
    EXPECT_EQ(0, std::memcmp(va[i].value().raw_data(), vb[i].value().raw_data(), va[i].value().nbytes())) << va[i].name();
  }
}

class Saving : public ScratchDir {};

TEST_F(Saving, RoundTripEveryLayerType) {
  auto a = all_layers(1);
  perturb(*a);
  save_weights(*a, file("w.h5"));
  auto b = all_layers(99);
  load_weights(*b, file("w.h5"));  // names differ (dense_3 vs dense_1): matched by order
  expect_same_weights(*a, *b);
  Generator gen(5);
  Tensor x = random_normal(Shape{2, 4, 3}, gen);
  EXPECT_EQ((*a)(x).to_vector<double>(), (*b)(x).to_vector<double>());
  EXPECT_EQ(entries(), std::vector<std::string>{"w.h5"});  // no temporary file left
}

std::vector<std::string> string_attr(hid_t obj, const char* name) {
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t type = H5Aget_type(attr);
  hid_t space = H5Aget_space(attr);
  const auto n = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space));
  std::vector<std::string> out;
  if (H5Tis_variable_str(type) > 0) {
    std::vector<char*> p(n);
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    H5Aread(attr, mem, p.data());
    for (char* s : p) out.emplace_back(s ? s : "");
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, p.data());
    H5Tclose(mem);
  } else {
    const std::size_t len = H5Tget_size(type);
    std::vector<char> buf(n * len);
    H5Aread(attr, type, buf.data());
    for (std::size_t i = 0; i < n; ++i) out.emplace_back(std::string(buf.data() + i * len, len).c_str());
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Aclose(attr);
  return out;
}

TEST_F(Saving, KerasLayoutReadWithTheHdf5CApi) {
  auto m = std::make_shared<Sequential>(std::vector<L>{
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5, .name = "dense"}),
      std::make_shared<layers::BatchNormalization>(layers::BatchNormalizationOptions{.name = "batch_normalization"}),
      std::make_shared<layers::Dropout>(layers::DropoutOptions{.rate = 0.1, .name = "dropout"})});
  m->build(Shape{1, 3});
  save_weights(*m, file("k.h5"));
  hid_t f = H5Fopen(file("k.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_THAT(string_attr(f, "layer_names"), testing::ElementsAre("dense", "batch_normalization", "dropout"));
  EXPECT_THAT(string_attr(f, "backend"), testing::ElementsAre("tensorflow"));
  EXPECT_THAT(string_attr(f, "keras_version")[0], testing::StartsWith("2."));
  hid_t g = H5Gopen2(f, "dense", H5P_DEFAULT);
  EXPECT_THAT(string_attr(g, "weight_names"), testing::ElementsAre("dense/kernel:0", "dense/bias:0"));
  H5Gclose(g);
  g = H5Gopen2(f, "batch_normalization", H5P_DEFAULT);
  EXPECT_THAT(string_attr(g, "weight_names"),
              testing::ElementsAre("batch_normalization/gamma:0", "batch_normalization/beta:0",
                                   "batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"));
  H5Gclose(g);
  g = H5Gopen2(f, "dropout", H5P_DEFAULT);
  EXPECT_TRUE(string_attr(g, "weight_names").empty());
  H5Gclose(g);
  hid_t d = H5Dopen2(f, "dense/dense/kernel:0", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  hid_t space = H5Dget_space(d);
  hsize_t dims[2] = {0, 0};
  EXPECT_EQ(H5Sget_simple_extent_dims(space, dims, nullptr), 2);
  EXPECT_EQ(dims[0], 3u);  // kernel [in, out]
  EXPECT_EQ(dims[1], 5u);
  std::vector<float> k(15);
  H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, k.data());
  EXPECT_EQ(k, m->variables()[0].value().to_vector<float>());
  hid_t dcpl = H5Dget_create_plist(d);
  EXPECT_GT(H5Pget_nfilters(dcpl), 0);  // Fletcher-32
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

TEST_F(Saving, MatchesByNameWhenNamesAgree) {
  auto make = [](std::vector<std::string> order) {
    std::vector<L> ls;
    for (auto& n : order) ls.push_back(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .name = n}));
    auto m = std::make_shared<Sequential>(ls);
    m->build(Shape{1, 3});
    return m;
  };
  auto a = make({"p", "q"});
  perturb(*a->layers()[0]);
  a->save_weights(file("n.h5"));
  auto b = make({"q", "p"});  // same names, swapped order
  b->load_weights(file("n.h5"));
  expect_same_weights(*a->layers()[0], *b->layers()[1]);
  expect_same_weights(*a->layers()[1], *b->layers()[0]);
}

TEST_F(Saving, MismatchNamesLayerWeightAndBothShapes) {
  auto a = std::make_shared<Sequential>(std::vector<L>{std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5, .name = "dense"})});
  a->build(Shape{1, 3});
  save_weights(*a, file("a.h5"));
  auto b = std::make_shared<Sequential>(std::vector<L>{std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5, .name = "dense"})});
  b->build(Shape{1, 4});
  Tensor before = b->variables()[0].value();
  EXPECT_RUNTIME_ERROR(load_weights(*b, file("a.h5")), file("a.h5"), "layer 'dense'", "weight 'dense/kernel:0'", "[3, 5]",
                       "[4, 5]");
  EXPECT_TRUE(b->variables()[0].value().is_same(before));  // nothing assigned
  auto c = std::make_shared<Sequential>(std::vector<L>{std::make_shared<layers::Dense>(
      layers::DenseOptions{.units = 5, .name = "dense", .dtype = DType::kFloat64})});
  c->build(Shape{1, 3});
  EXPECT_RUNTIME_ERROR(load_weights(*c, file("a.h5")), "dtype in file float32", "float64");
  auto d = std::make_shared<Sequential>(std::vector<L>{std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5}),
                                                       std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5})});
  d->build(Shape{1, 3});
  EXPECT_RUNTIME_ERROR(load_weights(*d, file("a.h5")), "file has 1 layers with weights, the model has 2");
  auto unbuilt = std::make_shared<Sequential>(std::vector<L>{std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5})});
  EXPECT_RUNTIME_ERROR(load_weights(*unbuilt, file("a.h5")), "the model has 0 (build the model first)");
  auto e = std::make_shared<Sequential>(std::vector<L>{
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 5, .use_bias = false, .name = "dense"})});
  e->build(Shape{1, 3});
  EXPECT_RUNTIME_ERROR(load_weights(*e, file("a.h5")), "has 2 weights, the model layer has 1");
}

TEST_F(Saving, HostileFiles) {
  auto m = std::make_shared<Sequential>(std::vector<L>{std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .name = "dense"})});
  m->build(Shape{1, 2});
  { std::ofstream(file("text.h5")) << "this is not hdf5"; }
  EXPECT_RUNTIME_ERROR(load_weights(*m, file("text.h5")), file("text.h5"), "not an HDF5 file");
  EXPECT_RUNTIME_ERROR(load_weights(*m, file("absent.h5")), file("absent.h5"), "does not exist");
  {
    io::H5Writer w(file("no_names.h5"));
    w.create_group("dense");
    w.commit();
  }
  EXPECT_RUNTIME_ERROR(load_weights(*m, file("no_names.h5")), file("no_names.h5"), "no 'layer_names' attribute");
  {
    io::H5Writer w(file("no_group.h5"));
    w.write_attribute("", "layer_names", std::vector<std::string>{"dense"});
    w.commit();
  }
  EXPECT_RUNTIME_ERROR(load_weights(*m, file("no_group.h5")), "no group 'dense'");
  {
    io::H5Writer w(file("no_wn.h5"));
    w.write_attribute("", "layer_names", std::vector<std::string>{"dense"});
    w.create_group("dense");
    w.commit();
  }
  EXPECT_RUNTIME_ERROR(load_weights(*m, file("no_wn.h5")), "'dense' has no 'weight_names' attribute");
  {
    io::H5Writer w(file("no_ds.h5"));
    w.write_attribute("", "layer_names", std::vector<std::string>{"dense"});
    w.create_group("dense");
    w.write_attribute("dense", "weight_names", std::vector<std::string>{"dense/kernel:0", "dense/bias:0"});
    w.commit();
  }
  EXPECT_RUNTIME_ERROR(load_weights(*m, file("no_ds.h5")), "missing dataset 'dense/dense/kernel:0'");
  // Truncated file.
  save_weights(*m, file("ok.h5"));
  const auto size = std::filesystem::file_size(file("ok.h5"));
  std::filesystem::resize_file(file("ok.h5"), size / 2);
  EXPECT_THROW(load_weights(*m, file("ok.h5")), std::runtime_error);
}

// Weights above the streaming-copy threshold (a [501, 301] kernel: 603204 bytes, not a multiple of
// 64) load exactly, and a tensor still holding a variable's old value keeps it (copy-on-write).
TEST_F(Saving, LargeWeightsLoadExactlyAndOldValuesSurvive) {
  auto make = [](std::uint64_t seed) {
    auto m = std::make_shared<Sequential>(std::vector<L>{
        std::make_shared<layers::Dense>(layers::DenseOptions{.units = 301, .name = "big", .seed = seed})});
    m->build(Shape{1, 501});
    return m;
  };
  auto a = make(1);
  perturb(*a);
  save_weights(*a, file("big.h5"));
  auto b = make(2);
  const Tensor old_kernel = b->variables()[0].value();
  const std::vector<float> old_values = old_kernel.to_vector<float>();
  load_weights(*b, file("big.h5"));
  expect_same_weights(*a, *b);
  EXPECT_EQ(old_kernel.to_vector<float>(), old_values);
}

// A checksum error in the last weight read leaves every weight as it was, including those read
// (and verified) before it.
TEST_F(Saving, DamagedWeightDataIsAnErrorAndChangesNothing) {
  auto a = all_layers(1, "s_");
  perturb(*a);
  save_weights(*a, file("w.h5"));
  // The data of the last dataset read (s_d2's kernel, float64 [6, 2]): flip its middle byte.
  haddr_t addr = 0;
  hsize_t size = 0;
  {
    hid_t f = H5Fopen(file("w.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "s_d2/s_d2/kernel:0", H5P_DEFAULT);
    const hsize_t origin[2] = {0, 0};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(d, origin, &mask, &addr, &size), 0);
    H5Dclose(d);
    H5Fclose(f);
  }
  ASSERT_GT(size, 4u);
  {
    std::fstream f(file("w.h5"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(addr + size / 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(static_cast<std::streamoff>(addr + size / 2));
    f.write(&c, 1);
  }
  auto b = all_layers(99, "s_");
  auto before = all_layers(99, "s_");
  EXPECT_RUNTIME_ERROR(load_weights(*b, file("w.h5")), file("w.h5"), "s_d2/s_d2/kernel:0", "checksum mismatch");
  expect_same_weights(*b, *before);
}

}  // namespace
}  // namespace tapeflow::models
