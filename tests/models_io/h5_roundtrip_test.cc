#include <cstring>
#include <numeric>

#include "models/io/h5_io.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::io {
namespace {

using testing::ScratchDir;
using RoundTrip = ScratchDir;

template <typename T>
std::vector<T> iota_values(std::size_t n, T start) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i) * static_cast<T>(3));
  return v;
}

template <typename T>
std::vector<T> as_values(const ArrayData& a) {
  std::vector<T> v(a.bytes.size() / sizeof(T));
  if (!a.bytes.empty()) std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

template <typename T>
void check_round_trip(const std::string& file, DType dtype, const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<T> values = iota_values<T>(static_cast<std::size_t>(n), T(1));
  {
    H5Writer w(file);
    w.write_dataset("group/sub/data", dtype, shape, values.data());
    w.commit();
  }
  H5Reader r(file);
  ArrayData a = r.read_dataset("/group/sub/data");
  EXPECT_EQ(a.dtype, dtype);
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(as_values<T>(a), values);
  EXPECT_EQ(r.dataset_shape("group/sub/data"), shape);
  EXPECT_EQ(r.dataset_dtype("group/sub/data"), dtype);
}

TEST_F(RoundTrip, EveryDtypeAndShape) {
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {3, 0, 2}, {7}, {2, 3, 4}, {600, 700}};
  int i = 0;
  for (const auto& shape : shapes) {
    SCOPED_TRACE(::testing::Message() << "rank " << shape.size() << " case " << i);
    check_round_trip<float>(file("f32_" + std::to_string(i)), DType::kFloat32, shape);
    check_round_trip<double>(file("f64_" + std::to_string(i)), DType::kFloat64, shape);
    check_round_trip<std::int32_t>(file("i32_" + std::to_string(i)), DType::kInt32, shape);
    check_round_trip<std::int64_t>(file("i64_" + std::to_string(i)), DType::kInt64, shape);
    ++i;
  }
}

TEST_F(RoundTrip, BoolIsStoredAsByteValues) {
  const bool values[] = {true, false, false, true, true};
  H5Writer w(file("b.h5"));
  w.write_dataset("flags", DType::kBool, {5}, values);
  w.write_dataset("scalar_flag", DType::kBool, {}, values);
  w.commit();
  H5Reader r(file("b.h5"));
  ArrayData a = r.read_dataset("flags");
  EXPECT_EQ(a.dtype, DType::kBool);
  ASSERT_EQ(a.bytes.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(static_cast<int>(a.bytes[i]), values[i] ? 1 : 0);
  EXPECT_EQ(r.read_dataset("scalar_flag").shape, std::vector<std::int64_t>{});
}

TEST_F(RoundTrip, Attributes) {
  H5Writer w(file("a.h5"));
  w.create_group("dense");
  w.write_attribute("/", "layer_names", std::vector<std::string>{"dense", "batch_normalization_12", ""});
  w.write_attribute("/", "backend", std::string("tensorflow"));
  w.write_attribute("dense", "weight_names", std::vector<std::string>{});
  w.write_attribute("dense", "epoch", std::int64_t{-1234567890123});
  w.write_attribute("dense", "epoch", std::int64_t{42});  // replaces
  w.commit();
  H5Reader r(file("a.h5"));
  EXPECT_EQ(r.read_string_array_attribute("", "layer_names"),
            (std::vector<std::string>{"dense", "batch_normalization_12", ""}));
  EXPECT_EQ(r.read_string_attribute("/", "backend"), "tensorflow");
  EXPECT_EQ(r.read_string_array_attribute("/", "backend"), std::vector<std::string>{"tensorflow"});
  EXPECT_EQ(r.read_string_array_attribute("dense", "weight_names"), std::vector<std::string>{});
  EXPECT_EQ(r.read_int_attribute("/dense", "epoch"), 42);
  EXPECT_TRUE(r.has_attribute("dense", "epoch"));
  EXPECT_FALSE(r.has_attribute("dense", "nope"));
}

// Beyond HDF5's 64 KiB object-header limit (where TF-Keras splits `layer_names` into chunks): the
// 1.8+ format keeps large attributes in dense storage, so one attribute holds them all.
TEST_F(RoundTrip, LargeStringArrayAttribute) {
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) names.push_back("layer_with_a_long_name_" + std::to_string(i));
  H5Writer w(file("big.h5"));
  w.write_attribute("/", "layer_names", names);
  w.commit();
  EXPECT_EQ(H5Reader(file("big.h5")).read_string_array_attribute("/", "layer_names"), names);
  EXPECT_RUNTIME_ERROR(H5Reader(file("big.h5"), {.max_attribute_bytes = 1000}).read_string_array_attribute("/", "layer_names"),
                       file("big.h5"), "attribute 'layer_names'", "absurd");
}

TEST_F(RoundTrip, ListGroupInCreationOrder) {
  H5Writer w(file("g.h5"));
  const float x = 1.0f;
  w.write_dataset("m/zeta", DType::kFloat32, {}, &x);
  w.create_group("m/alpha");
  w.write_dataset("m/beta:0", DType::kFloat32, {1}, &x);
  w.create_group("m/alpha");  // no-op
  w.commit();
  H5Reader r(file("g.h5"));
  EXPECT_EQ(r.list_group("m"), (std::vector<std::string>{"zeta", "alpha", "beta:0"}));
  EXPECT_EQ(r.list_group("/"), std::vector<std::string>{"m"});
  EXPECT_TRUE(r.exists("m/alpha"));
  EXPECT_TRUE(r.exists("/"));
  EXPECT_FALSE(r.exists("m/gamma"));
  EXPECT_FALSE(r.exists("q/gamma"));
  EXPECT_TRUE(r.is_group("m/alpha"));
  EXPECT_FALSE(r.is_group("m/zeta"));
  EXPECT_TRUE(r.is_dataset("m/zeta"));
  EXPECT_FALSE(r.is_dataset("m/nope"));
}

}  // namespace
}  // namespace tapeflow::io
