// Loader for the Fashion-MNIST dataset as raw uint8 arrays (IDX files, gzip or plain).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tapeflow::data {

// One split of Fashion-MNIST.
// Shapes:  images [count, rows, cols] row-major uint8 pixels 0..255; labels [count], each 0..9.
struct FashionMnistSplit {
  std::int64_t count = 0,  // Number of examples (images and labels).
      rows = 0,            // Each image's height in pixels (28 for Fashion-MNIST).
      cols = 0;            // Each image's width in pixels (28 for Fashion-MNIST).
  // count * rows * cols pixels, image after image, each row-major, values 0..255.
  std::vector<std::uint8_t> images;
  // count class labels in [0, 10), one per image (fashion_mnist_class_names() names them).
  std::vector<std::uint8_t> labels;
};

// The train (60,000 examples) and test (10,000 examples) splits.
struct FashionMnist {
  FashionMnistSplit train,  // The training split (train-*-ubyte: 60,000 examples).
      test;                 // The test split (t10k-*-ubyte: 10,000 examples).
};

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir` (the .gz name is tried first).
// `limit` > 0 keeps only the first `limit` examples of each split; 0 keeps all.
// Errors:  std::invalid_argument for limit < 0. std::runtime_error naming the file(s) for: a missing
//          file (the message names the Debian package dataset-fashion-mnist), any read_idx error,
//          images not 3-D uint8, labels not 1-D uint8, no images, an image side of 0 or above 32768,
//          image and label counts that differ, a label >= 10.
// Ref:     https://github.com/zalandoresearch/fashion-mnist, tf.keras.datasets.fashion_mnist.load_data
FashionMnist load_fashion_mnist(const std::string& dir = kDefaultFashionMnistDir, std::int64_t limit = 0);

// Names of the ten classes, by label: "T-shirt/top", "Trouser", ..., "Ankle boot".
std::array<const char*, 10> fashion_mnist_class_names();

}  // namespace tapeflow::data
