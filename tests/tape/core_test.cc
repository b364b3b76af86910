// tape/core: Shape (dims, strides, printing, broadcasting, axes), DType (sizes, names, dispatch) and
// Tensor (identity and sharing, typed access, element access, printing, creation functions), with
// every documented error. Braced-list construction and shape overflow: tensor_braces_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tape/core/dtype.h"
#include "tape/core/random.h"
#include "tape/core/shape.h"
#include "tape/core/tensor.h"

namespace tf = tapeflow;

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---- Shape ----
TEST(Shape, DimsElementsAndStrides) {
  const tf::Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s[1], 3);
  EXPECT_EQ(s.dim(-1), 4);
  EXPECT_EQ(s.dim(-3), 2);
  EXPECT_EQ(s.to_vector(), (std::vector<std::int64_t>{2, 3, 4}));
  const auto st = s.strides();
  EXPECT_EQ(st[0], 12);
  EXPECT_EQ(st[1], 4);
  EXPECT_EQ(st[2], 1);
  EXPECT_EQ(tf::Shape{}.rank(), 0);
  EXPECT_EQ(tf::Shape{}.num_elements(), 1);  // a scalar has one element
  EXPECT_EQ((tf::Shape{3, 0, 2}).num_elements(), 0);
  const std::vector<int> dims{5, 6};
  EXPECT_EQ(tf::Shape(dims.begin(), dims.end()), (tf::Shape{5, 6}));
  EXPECT_EQ(tf::Shape(std::vector<std::int64_t>{5, 6}), (tf::Shape{5, 6}));
  EXPECT_NE((tf::Shape{5, 6}), (tf::Shape{6, 5}));
  EXPECT_NE((tf::Shape{5}), (tf::Shape{5, 1}));
}

TEST(Shape, PrintsAsListAndAsTensorFlowTuple) {
  EXPECT_EQ((tf::Shape{2, 3}).to_string(), "[2, 3]");
  EXPECT_EQ(tf::Shape{}.to_string(), "[]");
  EXPECT_EQ((tf::Shape{2, 3}).to_tf_string(), "(2, 3)");
  EXPECT_EQ((tf::Shape{4}).to_tf_string(), "(4,)");  // Python's one-element tuple
  EXPECT_EQ(tf::Shape{}.to_tf_string(), "()");
}

TEST(Shape, Errors) {
  EXPECT_THAT(([] { (void)tf::Shape{2, -1}; }), ThrowsMessage<tf::ShapeError>(HasSubstr("Shape: negative dimension -1")));
  EXPECT_THAT(([] { (void)tf::Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}; }),
              ThrowsMessage<tf::ShapeError>(HasSubstr("Shape: rank exceeds the maximum of 8")));
  tf::Shape eight{1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_THROW(eight.push_back(1), tf::ShapeError);
  EXPECT_THAT([] { (void)(tf::Shape{2, 3}).dim(2); },
              ThrowsMessage<std::out_of_range>(HasSubstr("Shape::dim: axis 2 out of range for [2, 3]")));
  EXPECT_THROW((void)(tf::Shape{2, 3}).dim(-3), std::out_of_range);
  static_assert(std::is_base_of_v<std::invalid_argument, tf::ShapeError>, "ShapeError is an invalid_argument");
}

TEST(Shape, BroadcastingFollowsNumPy) {
  EXPECT_EQ(tf::broadcast_shapes({2, 1, 3}, {4, 1}, "op"), (tf::Shape{2, 4, 3}));
  EXPECT_EQ(tf::broadcast_shapes({}, {2, 3}, "op"), (tf::Shape{2, 3}));
  EXPECT_EQ(tf::broadcast_shapes({3}, {0, 1}, "op"), (tf::Shape{0, 3}));
  EXPECT_EQ(tf::broadcast_shapes({5}, {5}, "op"), tf::Shape{5});
  EXPECT_THAT([] { tf::broadcast_shapes({2, 3}, {2}, "my_op"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("my_op: incompatible shapes for broadcasting: [2, 3] and [2]")));
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(tf::normalize_axis(-1, 3, "op"), 2);
  EXPECT_EQ(tf::normalize_axis(0, 3, "op"), 0);
  EXPECT_EQ(tf::normalize_axis(0, 0, "op"), 0);  // a scalar accepts axis 0
  EXPECT_THAT([] { tf::normalize_axis(3, 3, "my_op"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("my_op: axis 3 out of range for rank 3")));
  EXPECT_THAT([] { tf::normalize_axis(-4, 3, "my_op"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("my_op: axis -4 out of range for rank 3")));
}

// ---- DType ----
TEST(DType, SizesNamesAndKinds) {
  using tf::DType;
  const std::vector<DType> all{DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool};
  const std::vector<std::size_t> sizes{4, 8, 4, 8, 1};
  const std::vector<std::string> names{"float32", "float64", "int32", "int64", "bool"};
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(tf::dtype_size(all[i]), sizes[i]) << names[i];
    EXPECT_EQ(tf::dtype_name(all[i]), names[i]);
    EXPECT_EQ(tf::dtype_from_name(names[i]), all[i]);
    EXPECT_EQ(tf::is_floating(all[i]), i < 2) << names[i];
    EXPECT_EQ(tf::is_integer(all[i]), i == 2 || i == 3) << names[i];
  }
  static_assert(tf::dtype_of<float>() == DType::kFloat32 && tf::dtype_of<double>() == DType::kFloat64 &&
                tf::dtype_of<std::int32_t>() == DType::kInt32 && tf::dtype_of<std::int64_t>() == DType::kInt64 &&
                tf::dtype_of<bool>() == DType::kBool);
  EXPECT_THAT([] { tf::dtype_from_name("float16"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("dtype_from_name: unknown dtype 'float16'")));
}

TEST(DType, DispatchCallsTheMatchingCppType) {
  using tf::DType;
  auto size_of = [](auto tag) { return sizeof(tag); };
  EXPECT_EQ(tf::dispatch_dtype(DType::kFloat64, size_of), 8u);
  EXPECT_EQ(tf::dispatch_dtype(DType::kInt32, size_of), 4u);
  EXPECT_EQ(tf::dispatch_dtype(DType::kBool, [](auto tag) { return std::is_same_v<decltype(tag), bool>; }), true);
  EXPECT_EQ(tf::dispatch_numeric(DType::kInt64, "op", [](auto tag) { return std::is_same_v<decltype(tag), std::int64_t>; }),
            true);
  EXPECT_EQ(tf::dispatch_floating(DType::kFloat32, "op", [](auto tag) { return std::is_same_v<decltype(tag), float>; }),
            true);
  EXPECT_THAT([&] { tf::dispatch_numeric(DType::kBool, "my_op", size_of); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("my_op: bool tensors are not supported")));
  EXPECT_THAT([&] { tf::dispatch_floating(DType::kInt32, "my_op", size_of); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("my_op: expected a floating dtype, got int32")));
}

// ---- Tensor ----
TEST(Tensor, IdsAliasesAndSharedStorage) {
  const tf::Tensor a = tf::zeros({64, 4});  // 1 KiB: heap storage
  const tf::Tensor copy = a;
  EXPECT_TRUE(copy.is_same(a));  // copies are the same tensor (same id, same storage)
  EXPECT_EQ(copy.id(), a.id());
  const tf::Tensor alias = a.alias();
  EXPECT_FALSE(alias.is_same(a));
  EXPECT_NE(alias.id(), a.id());  // a new id: tapes see a new value
  EXPECT_EQ(alias.raw_data(), a.raw_data());  // but the elements are shared
  const tf::Tensor flat = a.with_shape({256});
  EXPECT_EQ(flat.shape(), tf::Shape{256});
  EXPECT_EQ(flat.raw_data(), a.raw_data());
  EXPECT_EQ(a.use_count(), 2);      // two handles (a, copy) on one tensor
  EXPECT_EQ(alias.use_count(), 3);  // one handle, but a, alias and flat view the same storage
  EXPECT_EQ(a.with_id(12345).id(), 12345);
  const std::int64_t first = tf::zeros({2}).id(), second = tf::zeros({2}).id();
  EXPECT_LT(first, second);  // fresh, increasing ids
  const tf::Tensor small = tf::ones({3});  // inline storage: with_shape copies the few bytes
  EXPECT_EQ(small.with_shape({3, 1}).to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_THAT([&] { a.with_shape({255}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("reshape: cannot reshape [64, 4] (256 elements) to [255]")));
}

TEST(Tensor, EmptyHasShapeDtypeAndBytes) {
  const tf::Tensor t = tf::Tensor::empty({3, 5}, tf::DType::kFloat64);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (tf::Shape{3, 5}));
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.dtype(), tf::DType::kFloat64);
  EXPECT_EQ(t.num_elements(), 15);
  EXPECT_EQ(t.nbytes(), 120u);
  EXPECT_EQ(tf::Tensor::empty({0, 7}, tf::DType::kInt32).nbytes(), 0u);
  EXPECT_FALSE(tf::Tensor().defined());
}

TEST(Tensor, TypedAndElementAccess) {
  const tf::Tensor m = tf::constant(std::vector<double>{1, 2, 3, 4, 5, 6}, tf::Shape{2, 3});
  EXPECT_EQ(m.data<double>()[4], 5.0);
  EXPECT_EQ(m.at({1, 2}), 6.0);
  EXPECT_EQ(m.at({0, 1}), 2.0);
  EXPECT_EQ(m.to_vector<int>(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tf::scalar(7, tf::DType::kInt64).item<std::int64_t>(), 7);
  EXPECT_EQ(tf::constant(std::vector<bool>{true, false}, tf::Shape{2}).to_vector<int>(), (std::vector<int>{1, 0}));
  EXPECT_THAT([&] { m.data<float>(); },
              ThrowsMessage<std::invalid_argument>(
                  HasSubstr("Tensor: requested element type float32 from a float64 tensor of shape [2, 3]")));
  EXPECT_THAT([&] { m.item(); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Tensor::item: expected one element, got shape [2, 3]")));
  EXPECT_THAT([&] { m.at({1}); }, ThrowsMessage<std::out_of_range>(HasSubstr("Tensor::at: index of rank 1 for shape [2, 3]")));
  EXPECT_THAT([&] { m.at({0, 3}); },
              ThrowsMessage<std::out_of_range>(HasSubstr("Tensor::at: index 3 out of range for axis 1 of shape [2, 3]")));
  EXPECT_THROW(m.at({-1, 0}), std::out_of_range);
  EXPECT_THAT([] { tf::Tensor().dtype(); },
              ThrowsMessage<std::logic_error>(HasSubstr("Tensor: use of an undefined (empty or moved-from) tensor")));
}

TEST(Tensor, PrintsLikeTensorFlowEager) {
  EXPECT_EQ(tf::constant(std::vector<bool>{true, false}, tf::Shape{2}).to_string(),
            "tf.Tensor([True False], shape=(2,), dtype=bool)");
  EXPECT_EQ(tf::constant(std::vector<std::int32_t>{1, -2}, tf::Shape{2}).to_string(),
            "tf.Tensor([1 -2], shape=(2,), dtype=int32)");
  EXPECT_EQ(tf::scalar(0.25, tf::DType::kFloat64).to_string(), "tf.Tensor(0.25, shape=(), dtype=float64)");
  EXPECT_EQ(tf::scalar(3, tf::DType::kFloat64).values_string(), "3.0");  // Python prints 3.0, not 3
  EXPECT_EQ(tf::zeros({2, 2}).values_string(), "[[0.0 0.0]\n [0.0 0.0]]");
  EXPECT_EQ(tf::zeros({2, 1, 2}).values_string(), "[[[0.0 0.0]]\n\n [[0.0 0.0]]]");  // NumPy's blank line
  EXPECT_EQ(tf::Tensor().to_string(), "tf.Tensor(<undefined>)");
  std::ostringstream os;
  os << tf::scalar(1.5);
  EXPECT_EQ(os.str(), "tf.Tensor(1.5, shape=(), dtype=float32)");
}

// zeros() takes a fresh zero-page mapping from Buffer::kZeroedMapBytes up; below it, memset. Both
// must read zero even where an earlier, freed tensor of the same size left other values.
TEST(Tensor, ZerosAreZeroAtEverySizeAndAfterReuse) {
  for (std::int64_t n : {std::int64_t{3}, std::int64_t{16}, std::int64_t{1000},
                         static_cast<std::int64_t>(tf::Buffer::kZeroedMapBytes / 4 - 1),
                         static_cast<std::int64_t>(tf::Buffer::kZeroedMapBytes / 4 + 3), std::int64_t{1} << 22}) {
    for (int round = 0; round < 2; ++round) {
      {
        tf::Tensor dirty = tf::fill(tf::Shape{n}, 7.0);  // freed before zeros() allocates
        ASSERT_EQ(dirty.data<float>()[n - 1], 7.0f);
      }
      tf::Tensor z = tf::zeros(tf::Shape{n});
      const float* p = z.data<float>();
      std::int64_t nonzero = 0;
      for (std::int64_t i = 0; i < n; ++i) nonzero += p[i] != 0.0f;
      EXPECT_EQ(nonzero, 0) << "n = " << n;
      z.mutable_data<float>()[n / 2] = 1.0f;  // writable
      EXPECT_EQ(z.data<float>()[n / 2], 1.0f);
    }
  }
  tf::Tensor d = tf::zeros(tf::Shape{1 << 18}, tf::DType::kFloat64);  // 2 MiB, mapped
  EXPECT_EQ(d.dtype(), tf::DType::kFloat64);
  EXPECT_EQ(d.nbytes(), std::size_t{1} << 21);
  EXPECT_EQ(d.data<double>()[(1 << 18) - 1], 0.0);
}

TEST(Tensor, CreationFunctions) {
  using tf::DType;
  EXPECT_EQ(tf::scalar(2.5, DType::kFloat64).dtype(), DType::kFloat64);
  EXPECT_EQ(tf::scalar(2.9, DType::kInt32).item(), 2.0);  // converted as static_cast does
  EXPECT_EQ(tf::constant(std::vector<double>{1.5, -1.5}, tf::Shape{2}, DType::kInt64).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, -1}));
  const tf::Tensor x = tf::constant(std::vector<float>{2.7f, -2.7f, 0.0f}, tf::Shape{3});
  EXPECT_EQ(tf::convert(x, DType::kInt32).to_vector<int>(), (std::vector<int>{2, -2, 0}));  // truncation toward 0
  EXPECT_EQ(tf::convert(x, DType::kBool).to_vector<int>(), (std::vector<int>{1, 1, 0}));
  EXPECT_TRUE(tf::convert(x, DType::kFloat32).is_same(x));  // same dtype: the tensor itself
  EXPECT_EQ(tf::fill({2}, 7.0, DType::kInt32).to_vector<int>(), (std::vector<int>{7, 7}));
  EXPECT_EQ(tf::zeros_like(x).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(tf::ones_like(tf::convert(x, DType::kInt64)).dtype(), DType::kInt64);
  EXPECT_EQ(tf::eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(tf::eye(3, -1, DType::kFloat64).shape(), (tf::Shape{3, 3}));
  EXPECT_EQ(tf::linspace(0, 1, 5, DType::kFloat64).to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(tf::linspace(3, 9, 1).to_vector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(tf::range(5, 0, -2).to_vector<int>(), (std::vector<int>{5, 3, 1}));
  EXPECT_EQ(tf::range(0, 1, 0.25, DType::kFloat32).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(tf::range(3, 1).num_elements(), 0);  // an empty range, as in TF
  EXPECT_THAT([] { tf::constant(std::vector<float>{1, 2, 3}, tf::Shape{2, 2}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("constant: 3 values do not fill shape [2, 2]")));
  EXPECT_THAT([] { tf::constant(std::vector<double>{1}, tf::Shape{2}, DType::kFloat64); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("constant: 1 values do not fill shape [2]")));
  EXPECT_THAT([] { tf::linspace(0, 1, 0); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("linspace: num must be positive, got 0")));
  EXPECT_THAT([] { tf::range(0, 1, 0); }, ThrowsMessage<std::invalid_argument>(HasSubstr("range: delta must not be zero")));
  tf::Generator g1(3), g2(3), g3(4);
  const tf::Tensor u = tf::random_uniform({1000}, g1, -2.0, 2.0, DType::kFloat64);
  EXPECT_EQ(u.to_vector<double>(), tf::random_uniform({1000}, g2, -2.0, 2.0, DType::kFloat64).to_vector<double>());
  EXPECT_NE(u.to_vector<double>(), tf::random_uniform({1000}, g3, -2.0, 2.0, DType::kFloat64).to_vector<double>());
  for (double v : u.to_vector<double>()) {
    ASSERT_GE(v, -2.0);
    ASSERT_LT(v, 2.0);
  }
}

TEST(Tensor, PrintingAndCreation) {
  EXPECT_EQ(tf::scalar(6.0).to_string(), "tf.Tensor(6.0, shape=(), dtype=float32)");
  tf::Tensor m{{1.0, 2.0}, {3.0, 4.0}};
  EXPECT_EQ(m.to_string(), "tf.Tensor([[1.0 2.0]\n [3.0 4.0]], shape=(2, 2), dtype=float32)");
  EXPECT_EQ(tf::eye(2).to_vector<float>(), (std::vector<float>{1, 0, 0, 1}));
  EXPECT_EQ(tf::linspace(-10, 10, 201).shape(), (tf::Shape{201}));
  EXPECT_EQ(tf::range(0, 5).to_vector<int>(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_THROW(tf::Tensor({{1.0, 2.0}, {3.0}}), std::invalid_argument);
  EXPECT_THROW(tf::scalar(1.0).data<double>(), std::invalid_argument);
  EXPECT_THROW(tf::Tensor().shape(), std::logic_error);
  EXPECT_THROW(tf::zeros({2}).item(), std::invalid_argument);
  tf::Generator g1(7), g2(7);
  EXPECT_EQ(tf::random_normal({5}, g1).to_vector<float>(), tf::random_normal({5}, g2).to_vector<float>());
}

}  // namespace
