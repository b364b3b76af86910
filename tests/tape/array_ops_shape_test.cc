// Forward values and error messages of the shape ops: transpose, expand_dims, squeeze, concat,
// stack, unstack, split, slice, pad, tile (hand-computed expectations).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/tape/array_ops_test_util.h"

namespace tf = tapeflow;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

using tf::testing::invalid;
using tf::testing::vals;

// [[0, 1, 2], [3, 4, 5]] as float32.
tf::Tensor m23() { return tf::Tensor({{0, 1, 2}, {3, 4, 5}}); }
// 0..n-1 as `dtype` in `shape`.
tf::Tensor iota(const tf::Shape& shape, tf::DType dtype = tf::DType::kFloat32) {
  return tf::reshape(tf::range(0, static_cast<double>(shape.num_elements()), 1, dtype), shape);
}

TEST(ArrayOpsTranspose, DefaultReversesAxes) {
  tf::Tensor y = tf::transpose(m23());
  EXPECT_EQ(y.shape(), (tf::Shape{3, 2}));
  EXPECT_THAT(vals(y), ElementsAre(0, 3, 1, 4, 2, 5));
  tf::Tensor z = tf::transpose(iota({2, 3, 4}));
  EXPECT_EQ(z.shape(), (tf::Shape{4, 3, 2}));
  EXPECT_EQ(z.at({3, 2, 1}), 12 + 2 * 4 + 3);  // z[k, j, i] = x[i, j, k]
}

TEST(ArrayOpsTranspose, PermThreeDIntAndBool) {
  tf::Tensor x = iota({2, 3, 4}, tf::DType::kInt32);
  tf::Tensor y = tf::transpose(x, {2, 0, 1});  // y[k, i, j] = x[i, j, k]
  EXPECT_EQ(y.shape(), (tf::Shape{4, 2, 3}));
  EXPECT_EQ(y.dtype(), tf::DType::kInt32);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(y.at({k, i, j}), x.at({i, j, k}));
  tf::Tensor b = tf::constant<bool>({true, false, false, true, true, false}, {2, 3});
  EXPECT_THAT(tf::permute(b, {1, 0}).to_vector<int>(), ElementsAre(1, 1, 0, 1, 0, 0));
}

TEST(ArrayOpsTranspose, IdentityPermAndLowRank) {
  tf::Tensor x = m23();
  tf::Tensor y = tf::transpose(x, {0, 1});
  EXPECT_FALSE(y.is_same(x));
  EXPECT_THAT(vals(y), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(tf::transpose(tf::scalar(2.0)).item(), 2.0);
  EXPECT_THAT(vals(tf::transpose(tf::Tensor({1, 2}))), ElementsAre(1, 2));
}

TEST(ArrayOpsTranspose, BadPermErrors) {
  EXPECT_THAT(
      [] {
        tf::transpose(m23(), {0, 0});
      },
      invalid(AllOf(HasSubstr("transpose"), HasSubstr("[0, 0]"), HasSubstr("[2, 3]"))));
  EXPECT_THAT([] { tf::transpose(m23(), {0}); }, invalid(AllOf(HasSubstr("transpose"), HasSubstr("[0]"))));
  EXPECT_THAT([] { tf::transpose(m23(), {0, 2}); }, invalid(AllOf(HasSubstr("transpose"), HasSubstr("[0, 2]"))));
  EXPECT_THAT([] { tf::transpose(m23(), {-1, 0}); }, invalid(HasSubstr("transpose")));
}

TEST(ArrayOpsExpandSqueeze, Values) {
  EXPECT_EQ(tf::expand_dims(m23(), 0).shape(), (tf::Shape{1, 2, 3}));
  EXPECT_EQ(tf::expand_dims(m23(), 1).shape(), (tf::Shape{2, 1, 3}));
  EXPECT_EQ(tf::expand_dims(m23(), -1).shape(), (tf::Shape{2, 3, 1}));
  EXPECT_EQ(tf::expand_dims(tf::scalar(1.0), 0).shape(), (tf::Shape{1}));
  tf::Tensor x = iota({1, 2, 1, 3});
  EXPECT_EQ(tf::squeeze(x).shape(), (tf::Shape{2, 3}));
  EXPECT_EQ(tf::squeeze(x, {0}).shape(), (tf::Shape{2, 1, 3}));
  EXPECT_EQ(tf::squeeze(x, {-2, 0}).shape(), (tf::Shape{2, 3}));
  EXPECT_THAT(vals(tf::squeeze(x)), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(tf::squeeze(tf::ones({1, 1})).shape(), tf::Shape{});
}

TEST(ArrayOpsExpandSqueeze, Errors) {
  EXPECT_THAT([] { tf::expand_dims(m23(), 3); }, invalid(AllOf(HasSubstr("expand_dims"), HasSubstr("axis 3"))));
  EXPECT_THAT([] { tf::expand_dims(m23(), -4); }, invalid(HasSubstr("expand_dims")));
  EXPECT_THAT([] { tf::squeeze(m23(), {1}); },
              invalid(AllOf(HasSubstr("squeeze"), HasSubstr("axis 1"), HasSubstr("[2, 3]"))));
  EXPECT_THAT([] { tf::squeeze(m23(), {2}); }, invalid(HasSubstr("squeeze")));
}

TEST(ArrayOpsConcat, ValuesOnEveryAxis) {
  tf::Tensor a = m23(), b = tf::Tensor({{6, 7, 8}});
  tf::Tensor y0 = tf::concat({a, b}, 0);
  EXPECT_EQ(y0.shape(), (tf::Shape{3, 3}));
  EXPECT_THAT(vals(y0), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8));
  tf::Tensor c = tf::reshape(tf::Tensor({9, 10}), tf::Shape{2, 1});
  tf::Tensor y1 = tf::concat({a, c, c}, -1);
  EXPECT_EQ(y1.shape(), (tf::Shape{2, 5}));
  EXPECT_THAT(vals(y1), ElementsAre(0, 1, 2, 9, 9, 3, 4, 5, 10, 10));
  EXPECT_THAT(vals(tf::concat({a}, 1)), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(ArrayOpsConcat, IntAndBool) {
  tf::Tensor a = tf::constant<std::int64_t>({1, 2}, {2}), b = tf::constant<std::int64_t>({3}, {1});
  tf::Tensor y = tf::concat({a, b}, 0);
  EXPECT_EQ(y.dtype(), tf::DType::kInt64);
  EXPECT_THAT(y.to_vector<std::int64_t>(), ElementsAre(1, 2, 3));
  tf::Tensor p = tf::constant<bool>({true}, {1, 1}), q = tf::constant<bool>({false, true}, {1, 2});
  EXPECT_THAT(tf::concat({p, q}, 1).to_vector<int>(), ElementsAre(1, 0, 1));
}

TEST(ArrayOpsConcat, Errors) {
  EXPECT_THAT([] { tf::concat({}, 0); }, invalid(AllOf(HasSubstr("concat"), HasSubstr("at least one"))));
  EXPECT_THAT(
      [] {
        tf::concat({tf::scalar(1.0), tf::scalar(2.0)}, 0);
      },
      invalid(AllOf(HasSubstr("concat"), HasSubstr("scalars"))));
  EXPECT_THAT(
      [] {
        tf::concat({m23(), m23()}, 2);
      },
      invalid(AllOf(HasSubstr("concat"), HasSubstr("axis 2"), HasSubstr("[2, 3] float32"))));
  EXPECT_THAT(
      [] {
        tf::concat({m23(), tf::ones({3, 3})}, 1);
      },
      invalid(AllOf(HasSubstr("concat"), HasSubstr("[2, 3] float32, [3, 3] float32"))));
  EXPECT_THAT(
      [] {
        tf::concat({m23(), tf::ones({2, 3}, tf::DType::kFloat64)}, 0);
      },
      invalid(AllOf(HasSubstr("concat"), HasSubstr("[2, 3] float64"))));
  EXPECT_THAT([] { tf::concat({m23(), tf::ones({6})}, 0); }, invalid(AllOf(HasSubstr("concat"), HasSubstr("[6]"))));
}

TEST(ArrayOpsStack, ValuesAndErrors) {
  tf::Tensor a = tf::Tensor({1, 2}), b = tf::Tensor({3, 4});
  tf::Tensor s0 = tf::stack({a, b});
  EXPECT_EQ(s0.shape(), (tf::Shape{2, 2}));
  EXPECT_THAT(vals(s0), ElementsAre(1, 2, 3, 4));
  tf::Tensor s1 = tf::stack({a, b, a}, -1);
  EXPECT_EQ(s1.shape(), (tf::Shape{2, 3}));
  EXPECT_THAT(vals(s1), ElementsAre(1, 3, 1, 2, 4, 2));
  EXPECT_EQ(tf::stack({a}).shape(), (tf::Shape{1, 2}));
  tf::Tensor si = tf::stack({tf::scalar(1, tf::DType::kInt32), tf::scalar(5, tf::DType::kInt32)});
  EXPECT_THAT(si.to_vector<int>(), ElementsAre(1, 5));
  EXPECT_THAT([] { tf::stack({}); }, invalid(HasSubstr("stack")));
  EXPECT_THAT(
      [&] {
        tf::stack({a, tf::Tensor({1, 2, 3})});
      },
      invalid(AllOf(HasSubstr("stack"), HasSubstr("[2] float32, [3] float32"))));
  EXPECT_THAT(
      [&] {
        tf::stack({a, tf::ones({2}, tf::DType::kInt32)});
      },
      invalid(AllOf(HasSubstr("stack"), HasSubstr("[2] int32"))));
  EXPECT_THAT([&] { tf::stack({a, b}, 2); }, invalid(AllOf(HasSubstr("stack"), HasSubstr("axis 2"))));
}

TEST(ArrayOpsSplit, UnstackAndSplitValues) {
  auto parts = tf::unstack(m23(), 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (tf::Shape{2}));
  EXPECT_THAT(vals(parts[2]), ElementsAre(2, 5));
  auto rows = tf::unstack(m23());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(vals(rows[1]), ElementsAre(3, 4, 5));
  auto halves = tf::split(iota({2, 4}), 2, -1);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_THAT(vals(halves[1]), ElementsAre(2, 3, 6, 7));
  auto sized = tf::split(iota({5}), std::vector<std::int64_t>{1, -1, 2});
  ASSERT_EQ(sized.size(), 3u);
  EXPECT_THAT(vals(sized[0]), ElementsAre(0));
  EXPECT_THAT(vals(sized[1]), ElementsAre(1, 2));
  EXPECT_THAT(vals(sized[2]), ElementsAre(3, 4));
}

TEST(ArrayOpsSplit, UnstackOfEmptyAxisIsEmpty) { EXPECT_TRUE(tf::unstack(tf::zeros({2, 0}), 1).empty()); }

// DESIGN: drop what backward does not need. Only gather / segment sums keep their (index) inputs.
TEST(ArrayOpsRegistry, SavesOnlyWhatBackwardNeeds) {
  auto& registry = tf::OpRegistry::global();
  for (const char* name : {"Transpose", "ConcatV2", "Slice", "Pad", "OneHot", "ArgMax", "ArgMin"})
    EXPECT_EQ(registry.get(name).saves, tf::kSaveNone) << name;
  EXPECT_EQ(registry.get("GatherV2").saves, tf::kSaveInputs);
  EXPECT_EQ(registry.get("UnsortedSegmentSum").saves, tf::kSaveInputs);
}

TEST(ArrayOpsSplit, Errors) {
  EXPECT_THAT([] { tf::split(iota({5}), 2); },
              invalid(AllOf(HasSubstr("split"), HasSubstr("[5]"), HasSubstr("2 equal parts"))));
  EXPECT_THAT(
      [] {
        tf::split(iota({5}), std::vector<std::int64_t>{1, 2});
      },
      invalid(AllOf(HasSubstr("split"), HasSubstr("[1, 2]"), HasSubstr("add up to 5"))));
  EXPECT_THAT([] { tf::split(iota({5}), std::vector<std::int64_t>{4, -1, 2}); }, invalid(HasSubstr("split")));
  EXPECT_THAT([] { tf::split(iota({5}), std::vector<std::int64_t>{-2, 7}); }, invalid(HasSubstr("split")));
  EXPECT_THAT([] { tf::split(tf::scalar(1.0), 1); }, invalid(HasSubstr("split: cannot split a scalar")));
  EXPECT_THAT([] { tf::unstack(tf::scalar(1.0)); }, invalid(HasSubstr("unstack")));
  EXPECT_THAT([] { tf::unstack(m23(), 2); }, invalid(AllOf(HasSubstr("unstack"), HasSubstr("axis 2"))));
}

TEST(ArrayOpsSlice, ValuesWithMinusOne) {
  tf::Tensor x = iota({3, 4});
  tf::Tensor y = tf::slice(x, {1, 1}, {2, -1});
  EXPECT_EQ(y.shape(), (tf::Shape{2, 3}));
  EXPECT_THAT(vals(y), ElementsAre(5, 6, 7, 9, 10, 11));
  tf::Tensor z = tf::slice(iota({2, 3, 4}, tf::DType::kInt32), {1, 0, 2}, {1, 2, 1});
  EXPECT_EQ(z.dtype(), tf::DType::kInt32);
  EXPECT_THAT(z.to_vector<int>(), ElementsAre(14, 18));
  EXPECT_EQ(tf::slice(x, {0, 4}, {3, 0}).shape(), (tf::Shape{3, 0}));
  EXPECT_THAT(vals(tf::slice(x, {0, 0}, {-1, -1})), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  tf::Tensor b = tf::constant<bool>({true, false, true}, {3});
  EXPECT_THAT(tf::slice(b, {1}, {2}).to_vector<int>(), ElementsAre(0, 1));
}

TEST(ArrayOpsSlice, Errors) {
  EXPECT_THAT(
      [] {
        tf::slice(iota({3, 4}), {0}, {1});
      },
      invalid(AllOf(HasSubstr("slice"), HasSubstr("one entry per axis"), HasSubstr("[3, 4]"))));
  EXPECT_THAT([] { tf::slice(iota({3, 4}), {0, 0}, {1}); }, invalid(HasSubstr("slice")));
  EXPECT_THAT(
      [] {
        tf::slice(iota({3, 4}), {2, 0}, {2, 1});
      },
      invalid(AllOf(HasSubstr("slice"), HasSubstr("axis 0"), HasSubstr("begin [2, 0], size [2, 1]"))));
  EXPECT_THAT([] { tf::slice(iota({3, 4}), {-1, 0}, {1, 1}); }, invalid(HasSubstr("slice: begin out of range")));
  EXPECT_THAT([] { tf::slice(iota({3, 4}), {0, 0}, {1, -2}); }, invalid(HasSubstr("axis 1")));
}

TEST(ArrayOpsPad, ValuesAndDtypes) {
  tf::Tensor y = tf::pad(tf::Tensor({{1, 2}}), {{1, 0}, {0, 2}});
  EXPECT_EQ(y.shape(), (tf::Shape{2, 4}));
  EXPECT_THAT(vals(y), ElementsAre(0, 0, 0, 0, 1, 2, 0, 0));
  tf::Tensor yi = tf::pad(tf::constant<std::int32_t>({7}, {1}), {{2, 1}}, -1.0);
  EXPECT_THAT(yi.to_vector<int>(), ElementsAre(-1, -1, 7, -1));
  tf::Tensor yb = tf::pad(tf::constant<bool>({false}, {1}), {{1, 1}}, 1.0);
  EXPECT_THAT(yb.to_vector<int>(), ElementsAre(1, 0, 1));
  EXPECT_EQ(tf::pad(tf::scalar(3.0), {}).item(), 3.0);
  EXPECT_EQ(tf::pad(tf::zeros({0, 2}), {{1, 1}, {0, 0}}).shape(), (tf::Shape{2, 2}));
}

TEST(ArrayOpsPad, Errors) {
  EXPECT_THAT(
      [] {
        tf::pad(m23(), {{1, 1}});
      },
      invalid(AllOf(HasSubstr("pad"), HasSubstr("[1, 1]"), HasSubstr("[2, 3] float32"))));
  EXPECT_THAT([] { tf::pad(m23(), {{1, 1}, {-1, 0}}); }, invalid(AllOf(HasSubstr("pad"), HasSubstr("[1, 1, -1, 0]"))));
}

TEST(ArrayOpsTile, ValuesAndErrors) {
  tf::Tensor y = tf::tile(tf::Tensor({{1, 2}, {3, 4}}), {2, 3});
  EXPECT_EQ(y.shape(), (tf::Shape{4, 6}));
  EXPECT_THAT(vals(tf::slice(y, {0, 0}, {1, -1})), ElementsAre(1, 2, 1, 2, 1, 2));
  EXPECT_THAT(vals(tf::slice(y, {3, 0}, {1, -1})), ElementsAre(3, 4, 3, 4, 3, 4));
  tf::Tensor yi = tf::tile(tf::constant<std::int32_t>({5, 6}, {2, 1}), {1, 2});
  EXPECT_THAT(yi.to_vector<int>(), ElementsAre(5, 5, 6, 6));
  EXPECT_EQ(tf::tile(m23(), {0, 1}).shape(), (tf::Shape{0, 3}));
  EXPECT_THAT([] { tf::tile(m23(), {2}); }, invalid(AllOf(HasSubstr("tile"), HasSubstr("[2]"), HasSubstr("[2, 3]"))));
  EXPECT_THAT([] { tf::tile(m23(), {1, -1}); }, invalid(AllOf(HasSubstr("tile"), HasSubstr("[1, -1]"))));
}

}  // namespace
