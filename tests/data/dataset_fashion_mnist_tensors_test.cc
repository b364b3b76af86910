#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/fashion_mnist_tensors.h"
#include "tests/data/idx_test_files.h"

namespace tapeflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;

FashionMnistSplit tiny_split() {
  return {.count = 2, .rows = 1, .cols = 2, .images = {0, 255, 51, 102}, .labels = {9, 3}};
}

TEST(FashionMnistTensorsTest, ImagesScaleToUnitInterval) {
  const Tensor flat = images_to_tensor(tiny_split());
  EXPECT_EQ(flat.shape(), (Shape{2, 2}));
  EXPECT_EQ(flat.dtype(), DType::kFloat32);
  EXPECT_THAT(flat.to_vector<float>(), ElementsAre(0.0f, 1.0f, FloatEq(0.2f), FloatEq(0.4f)));
  EXPECT_EQ(images_to_tensor(tiny_split(), /*flatten=*/false).shape(), (Shape{2, 1, 2}));
  FashionMnistSplit bad = tiny_split();
  bad.images.pop_back();
  EXPECT_THROW(images_to_tensor(bad), std::invalid_argument);
  // An IDX header [0, 4294967295, 4294967295]: rows * cols overflows int64 (was undefined behaviour,
  // then "Shape: negative dimension").
  const FashionMnistSplit huge{.count = 0, .rows = 4294967295, .cols = 4294967295};
  try {
    images_to_tensor(huge);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("4294967295 x 4294967295 pixels: the sizes must be >= 0 and rows * cols must fit"));
  }
}

TEST(FashionMnistTensorsTest, LabelsAsInt32OrInt64) {
  const Tensor y64 = labels_to_tensor(tiny_split());
  EXPECT_EQ(y64.dtype(), DType::kInt64);
  EXPECT_THAT(y64.to_vector<std::int64_t>(), ElementsAre(9, 3));
  const Tensor y32 = labels_to_tensor(tiny_split(), DType::kInt32);
  EXPECT_EQ(y32.dtype(), DType::kInt32);
  EXPECT_THAT(y32.to_vector<std::int32_t>(), ElementsAre(9, 3));
  try {
    labels_to_tensor(tiny_split(), DType::kFloat32);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("int32 or int64, got float32"));
  }
}

TEST(FashionMnistTensorsTest, LoadsADirectory) {
  testing::TempDir dir;
  dir.write("train-images-idx3-ubyte.gz", testing::idx_bytes(0x08, {3, 2, 2}, std::vector<std::uint8_t>(12, 255)), true);
  dir.write("train-labels-idx1-ubyte.gz", testing::idx_bytes(0x08, {3}, {1, 2, 3}), true);
  dir.write("t10k-images-idx3-ubyte", testing::idx_bytes(0x08, {1, 2, 2}, {0, 0, 0, 0}), false);
  dir.write("t10k-labels-idx1-ubyte", testing::idx_bytes(0x08, {1}, {7}), false);
  const FashionMnistTensors t = load_fashion_mnist_tensors(dir.path(), /*limit=*/2, DType::kInt32);
  EXPECT_EQ(t.x_train.shape(), (Shape{2, 4}));
  EXPECT_THAT(t.x_train.to_vector<float>(), ::testing::Each(1.0f));
  EXPECT_THAT(t.y_train.to_vector<std::int32_t>(), ElementsAre(1, 2));
  EXPECT_EQ(t.x_test.shape(), (Shape{1, 4}));
  EXPECT_THAT(t.y_test.to_vector<std::int32_t>(), ElementsAre(7));
  EXPECT_THROW(load_fashion_mnist_tensors(dir.path(), 0, DType::kBool), std::invalid_argument);
}

TEST(FashionMnistTensorsTest, MissingDirectoryNamesTheDebianPackage) {
  try {
    load_fashion_mnist_tensors("/nonexistent/tapeflow-fmnist");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("dataset-fashion-mnist"));
  }
}

}  // namespace
}  // namespace tapeflow::data
