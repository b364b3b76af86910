#include "data/fashion_mnist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/data/idx_test_files.h"

namespace tapeflow::data {
namespace {

using ::testing::HasSubstr;
using testing::idx_bytes;
using testing::TempDir;

std::vector<std::uint8_t> iota_bytes(std::size_t n, std::uint8_t start) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(start + i);
  return v;
}

// A tiny Fashion-MNIST directory: train 5 images of 2x3 (gzipped), t10k 3 images (plain files).
class FashionMnistFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    write("train-images-idx3-ubyte", idx_bytes(0x08, {5, 2, 3}, iota_bytes(30, 0)), true);
    write("train-labels-idx1-ubyte", idx_bytes(0x08, {5}, {9, 0, 0, 3, 1}), true);
    write("t10k-images-idx3-ubyte", idx_bytes(0x08, {3, 2, 3}, iota_bytes(18, 100)), false);
    write("t10k-labels-idx1-ubyte", idx_bytes(0x08, {3}, {9, 2, 1}), false);
  }
  std::string write(const std::string& stem, const std::vector<std::uint8_t>& bytes, bool gzip) {
    const std::string base = dir_.path() + "/" + stem;
    std::filesystem::remove(base);
    std::filesystem::remove(base + ".gz");
    return dir_.write(gzip ? stem + ".gz" : stem, bytes, gzip);
  }
  // Expects load_fashion_mnist to throw std::runtime_error holding each of `parts`.
  void expect_load_error(const std::vector<std::string>& parts) {
    try {
      load_fashion_mnist(dir_.path());
      ADD_FAILURE() << "load_fashion_mnist did not throw";
    } catch (const std::runtime_error& e) {
      for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
    }
  }
  TempDir dir_;
};

TEST_F(FashionMnistFiles, LoadsBothSplits) {
  const FashionMnist d = load_fashion_mnist(dir_.path());
  EXPECT_EQ(d.train.count, 5);
  EXPECT_EQ(d.train.rows, 2);
  EXPECT_EQ(d.train.cols, 3);
  EXPECT_EQ(d.train.images, iota_bytes(30, 0));
  EXPECT_EQ(d.train.labels, (std::vector<std::uint8_t>{9, 0, 0, 3, 1}));
  EXPECT_EQ(d.test.count, 3);
  EXPECT_EQ(d.test.images, iota_bytes(18, 100));
  EXPECT_EQ(d.test.labels, (std::vector<std::uint8_t>{9, 2, 1}));
}

TEST_F(FashionMnistFiles, LimitKeepsFirstExamplesOfEachSplit) {
  const FashionMnist d = load_fashion_mnist(dir_.path(), 4);
  EXPECT_EQ(d.train.count, 4);
  EXPECT_EQ(d.train.images, iota_bytes(24, 0));
  EXPECT_EQ(d.train.labels, (std::vector<std::uint8_t>{9, 0, 0, 3}));
  EXPECT_EQ(d.test.count, 3);  // fewer than the limit: all kept
  EXPECT_EQ(d.test.labels.size(), 3u);
  EXPECT_THROW(load_fashion_mnist(dir_.path(), -1), std::invalid_argument);
}

TEST_F(FashionMnistFiles, NamesPackageWhenDirectoryOrFileIsMissing) {
  try {
    load_fashion_mnist(dir_.path() + "/nowhere");
    ADD_FAILURE() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir_.path() + "/nowhere"));
    EXPECT_THAT(e.what(), HasSubstr("apt-get install dataset-fashion-mnist"));
  }
  std::filesystem::remove(dir_.path() + "/t10k-labels-idx1-ubyte");
  expect_load_error({"t10k-labels-idx1-ubyte[.gz] not found", "apt-get install dataset-fashion-mnist"});
}

TEST_F(FashionMnistFiles, RejectsWrongLayouts) {
  const std::string images = write("train-images-idx3-ubyte", idx_bytes(0x08, {5, 6}, iota_bytes(30, 0)), true);
  expect_load_error({images, "images must be 3-D uint8, got uint8 [5, 6]"});
  write("train-images-idx3-ubyte", idx_bytes(0x08, {5, 2, 3}, iota_bytes(30, 0)), true);
  const std::string labels = write("train-labels-idx1-ubyte", idx_bytes(0x0C, {1}, {0, 0, 0, 1}), false);
  expect_load_error({labels, "labels must be 1-D uint8, got int32 [1]"});
}

TEST_F(FashionMnistFiles, RejectsCountMismatchAndBadLabels) {
  const std::string labels = write("t10k-labels-idx1-ubyte", idx_bytes(0x08, {2}, {1, 2}), false);
  expect_load_error({dir_.path() + "/t10k-images-idx3-ubyte holds 3 images but", labels + " holds 2 labels"});
  write("t10k-labels-idx1-ubyte", idx_bytes(0x08, {3}, {1, 2, 10}), false);
  expect_load_error({labels, "label 10 at index 2 is out of range [0, 10)"});
}

// Files that hold no usable image are refused naming the file, before any model sees them (they gave
// "Dataset::shuffle: buffer_size must be >= 1, got 0", a Dense shape error, or overflowed rows * cols).
TEST_F(FashionMnistFiles, RefusesNoImagesAndImagesWithoutPixels) {
  std::string images = write("train-images-idx3-ubyte", idx_bytes(0x08, {0, 28, 28}, {}), true);
  write("train-labels-idx1-ubyte", idx_bytes(0x08, {0}, {}), true);
  expect_load_error({images, "holds no images"});
  SetUp();
  images = write("train-images-idx3-ubyte", idx_bytes(0x08, {5, 28, 0}, {}), true);
  expect_load_error({images, "images of 28 x 0 pixels; each side must be 1 to 32768"});
  images = write("t10k-images-idx3-ubyte", idx_bytes(0x08, {0, 4294967295u, 4294967295u}, {}), false);
  write("train-images-idx3-ubyte", idx_bytes(0x08, {5, 2, 3}, iota_bytes(30, 0)), true);
  write("t10k-labels-idx1-ubyte", idx_bytes(0x08, {0}, {}), false);
  expect_load_error({images, "holds no images"});
}

TEST_F(FashionMnistFiles, PassesOnReadErrors) {
  const std::string images = write("t10k-images-idx3-ubyte", idx_bytes(0x08, {3, 2, 3}, iota_bytes(17, 0)), true);
  expect_load_error({"read_idx: " + images, "truncated payload"});
}

TEST(FashionMnistClassNames, FollowTheDatasetOrder) {
  const auto names = fashion_mnist_class_names();
  EXPECT_STREQ(names[0], "T-shirt/top");
  EXPECT_STREQ(names[6], "Shirt");
  EXPECT_STREQ(names[9], "Ankle boot");
}

TEST(FashionMnistRealData, MatchesThePublishedDataset) {
  if (!std::filesystem::is_directory(kDefaultFashionMnistDir))
    GTEST_SKIP() << kDefaultFashionMnistDir << " not found (apt-get install dataset-fashion-mnist)";
  const FashionMnist d = load_fashion_mnist();
  for (const FashionMnistSplit* s : {&d.train, &d.test}) {
    EXPECT_EQ(s->rows, 28);
    EXPECT_EQ(s->cols, 28);
    ASSERT_EQ(s->images.size(), static_cast<std::size_t>(s->count * 28 * 28));
    ASSERT_EQ(s->labels.size(), static_cast<std::size_t>(s->count));
    EXPECT_EQ(s->labels[0], 9);  // both splits start with an ankle boot
    EXPECT_EQ(*std::max_element(s->images.begin(), s->images.end()), 255);
    for (int c = 0; c < 10; ++c)  // balanced classes, which also bounds every label below 10
      EXPECT_EQ(std::count(s->labels.begin(), s->labels.end(), c), s->count / 10) << "class " << c;
  }
  EXPECT_EQ(d.train.count, 60000);
  EXPECT_EQ(d.test.count, 10000);
  EXPECT_EQ(d.train.labels[1], 0);  // zcat train-labels-idx1-ubyte.gz: 9 0 0 3 ...
  EXPECT_EQ(d.test.labels[1], 2);   // zcat t10k-labels-idx1-ubyte.gz: 9 2 1 1 ...
}

}  // namespace
}  // namespace tapeflow::data
