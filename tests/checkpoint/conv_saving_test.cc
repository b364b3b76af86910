// The convolutional layers in Keras's weights layout: dataset names and shapes read back with the
// HDF5 C API, and a save/load round trip of the convnet and the DCGAN generator.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>

#include "layers/layers.h"
#include "models/architectures.h"
#include "models/saving.h"
#include "models/sequential.h"
#include "tape/tapeflow.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;
using L = std::shared_ptr<layers::Layer>;

class ConvSaving : public ScratchDir {};

std::vector<hsize_t> dims_of(hid_t f, const char* path) {
  hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
  if (d < 0) return {};
  hid_t space = H5Dget_space(d);
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  H5Dclose(d);
  return dims;
}

TEST_F(ConvSaving, KerasNamesAndShapes) {
  auto m = std::make_shared<Sequential>(std::vector<L>{
      std::make_shared<layers::Conv2D>(layers::Conv2DOptions{.filters = 32, .kernel_size = {3, 3}, .name = "conv2d"}),
      std::make_shared<layers::MaxPooling2D>(layers::Pooling2DOptions{.name = "max_pooling2d"}),
      std::make_shared<layers::Conv2DTranspose>(
          layers::Conv2DTransposeOptions{.filters = 8, .kernel_size = {5, 5}, .strides = {2, 2}, .padding = "same",
                                         .name = "conv2d_transpose"})});
  m->build(Shape{1, 28, 28, 1});
  save_weights(*m, file("c.h5"));
  hid_t f = H5Fopen(file("c.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_EQ(dims_of(f, "conv2d/conv2d/kernel:0"), (std::vector<hsize_t>{3, 3, 1, 32}));  // [kh, kw, in, out]
  EXPECT_EQ(dims_of(f, "conv2d/conv2d/bias:0"), (std::vector<hsize_t>{32}));
  EXPECT_EQ(dims_of(f, "conv2d_transpose/conv2d_transpose/kernel:0"), (std::vector<hsize_t>{5, 5, 8, 32}));  // [kh, kw, out, in]
  EXPECT_EQ(dims_of(f, "conv2d_transpose/conv2d_transpose/bias:0"), (std::vector<hsize_t>{8}));
  const hid_t pool = H5Gopen2(f, "max_pooling2d", H5P_DEFAULT);  // a weightless layer still has its group
  EXPECT_GE(pool, 0);
  if (pool >= 0) H5Gclose(pool);
  H5Fclose(f);
}

TEST_F(ConvSaving, ConvnetAndDcganGeneratorRoundTrip) {
  for (int which = 0; which < 2; ++which) {
    auto a = which == 0 ? make_classifier_cnn({.seed = 1}) : make_dcgan_generator({.seed = 1});
    auto b = which == 0 ? make_classifier_cnn({.seed = 2}) : make_dcgan_generator({.seed = 2});
    save_weights(*a, file("m.h5"));
    load_weights(*b, file("m.h5"));
    const auto va = a->variables(), vb = b->variables();
    ASSERT_EQ(va.size(), vb.size());
    for (std::size_t i = 0; i < va.size(); ++i)
      EXPECT_EQ(0, std::memcmp(va[i].value().raw_data(), vb[i].value().raw_data(), va[i].value().nbytes()))
          << va[i].name();
    Generator gen(3);
    const Tensor x = which == 0 ? random_uniform(Shape{2, 784}, gen) : random_normal(Shape{2, 100}, gen);
    EXPECT_EQ((*a)(x).to_vector<float>(), (*b)(x).to_vector<float>());
  }
}

}  // namespace
}  // namespace tapeflow::models
