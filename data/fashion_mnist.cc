#include "data/fashion_mnist.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "data/idx.h"

namespace tapeflow::data {
namespace {

namespace fs = std::filesystem;

// The path of `stem` (.gz preferred) in dir. Errors: runtime_error naming the package.
std::string find_file(const std::string& dir, const std::string& stem) {
  const fs::path base = fs::path(dir) / stem;
  for (const std::string& name : {base.string() + ".gz", base.string()})
    if (fs::is_regular_file(name)) return name;
  throw std::runtime_error("load_fashion_mnist: " + base.string() +
                           "[.gz] not found; install it with `apt-get install dataset-fashion-mnist` "
                           "or pass the directory that holds it");
}

// Largest image side accepted (Fashion-MNIST's images are 28 x 28; this only keeps rows * cols sane).
constexpr std::int64_t kMaxSide = 1 << 15;

void check_layout(const IdxArray& a, const std::string& path, std::size_t rank, const char* what) {
  if (a.type != IdxType::kUInt8 || a.dims.size() != rank)
    throw std::runtime_error("load_fashion_mnist: " + path + ": " + what + " must be " +
                             std::to_string(rank) + "-D uint8, got " + describe(a));
}

FashionMnistSplit load_split(const std::string& dir, const std::string& prefix, std::int64_t limit) {
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  check_layout(images, images_path, 3, "images");
  check_layout(labels, labels_path, 1, "labels");
  if (images.dims[0] != labels.dims[0])
    throw std::runtime_error("load_fashion_mnist: " + images_path + " holds " +
                             std::to_string(images.dims[0]) + " images but " + labels_path + " holds " +
                             std::to_string(labels.dims[0]) + " labels");
  if (images.dims[0] == 0) throw std::runtime_error("load_fashion_mnist: " + images_path + " holds no images");
  if (images.dims[1] < 1 || images.dims[2] < 1 || images.dims[1] > kMaxSide || images.dims[2] > kMaxSide)
    throw std::runtime_error("load_fashion_mnist: " + images_path + ": images of " + std::to_string(images.dims[1]) +
                             " x " + std::to_string(images.dims[2]) + " pixels; each side must be 1 to " +
                             std::to_string(kMaxSide) + " (Fashion-MNIST's are 28 x 28)");
  const auto bad = std::find_if(labels.bytes.begin(), labels.bytes.end(), [](auto v) { return v >= 10; });
  if (bad != labels.bytes.end())
    throw std::runtime_error("load_fashion_mnist: " + labels_path + ": label " + std::to_string(*bad) +
                             " at index " + std::to_string(bad - labels.bytes.begin()) +
                             " is out of range [0, 10)");

  FashionMnistSplit s{.count = images.dims[0], .rows = images.dims[1], .cols = images.dims[2],
                      .images = std::move(images.bytes), .labels = std::move(labels.bytes)};
  if (limit > 0 && limit < s.count) {
    s.count = limit;
    s.images.resize(static_cast<std::size_t>(s.count * s.rows * s.cols));
    s.labels.resize(static_cast<std::size_t>(s.count));
  }
  return s;
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string& dir, std::int64_t limit) {
  if (limit < 0)
    throw std::invalid_argument("load_fashion_mnist: limit must be >= 0, got " + std::to_string(limit));
  if (!std::filesystem::is_directory(dir))
    throw std::runtime_error("load_fashion_mnist: directory " + dir +
                             " not found; install the dataset with `apt-get install dataset-fashion-mnist` "
                             "or pass the directory that holds it");
  return {load_split(dir, "train", limit), load_split(dir, "t10k", limit)};
}

std::array<const char*, 10> fashion_mnist_class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

}  // namespace tapeflow::data
