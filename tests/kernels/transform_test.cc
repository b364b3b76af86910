#include "tape/kernels/transform.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::unravel;

template <class T>
std::vector<T> iota_vec(std::int64_t n) {
  std::vector<T> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(i);
  return v;
}

template <class T>
void check_transpose(const Shape& sx, std::vector<int> perm) {
  auto x = iota_vec<T>(sx.num_elements());
  Shape sy;
  for (int p : perm) sy.push_back(sx[p]);
  std::vector<T> y(sy.num_elements());
  transpose(x.data(), sx, perm.data(), y.data());
  const auto st = sx.strides();
  for (std::int64_t i = 0; i < sy.num_elements(); ++i) {
    auto idx = unravel(i, sy);
    std::int64_t src = 0;
    for (int d = 0; d < sy.rank(); ++d) src += idx[d] * st[perm[d]];
    ASSERT_EQ(y[i], x[src]) << sx.to_string() << " at " << i;
  }
}

TEST(Transpose, AllPermutationsRank2To4) {
  for (int r = 2; r <= 4; ++r) {
    const Shape s = r == 2 ? Shape{5, 7} : r == 3 ? Shape{3, 4, 5} : Shape{2, 3, 4, 5};
    std::vector<int> perm(r);
    std::iota(perm.begin(), perm.end(), 0);
    do {
      check_transpose<float>(s, perm);
      check_transpose<std::int64_t>(s, perm);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(Transpose, LargeBlockedAndBatchedAndOtherDTypes) {
  check_transpose<double>({300, 257}, {1, 0});
  check_transpose<std::int32_t>({3, 70, 90}, {0, 2, 1});
  check_transpose<float>({1, 5, 1, 3}, {3, 2, 1, 0});
  check_transpose<float>({0, 3}, {1, 0});
  bool x[6] = {true, false, false, true, true, false}, y[6];
  int perm[2] = {1, 0};
  transpose(x, Shape{2, 3}, perm, y);
  EXPECT_EQ(std::vector<bool>(y, y + 6), std::vector<bool>({true, true, false, true, false, false}));
}

TEST(Transpose, BadPermThrows) {
  float x[6] = {}, y[6];
  int dup[2] = {0, 0}, big[2] = {0, 2};
  EXPECT_THROW(transpose(x, Shape{2, 3}, dup, y), std::invalid_argument);
  EXPECT_THROW(transpose(x, Shape{2, 3}, big, y), std::invalid_argument);
}

TEST(Slice, CopiesSubBoxAndChecksBounds) {
  const Shape sx{4, 5, 6};
  auto x = iota_vec<double>(sx.num_elements());
  const std::int64_t begin[3] = {1, 0, 2};
  const Shape sy{2, 5, 3};
  std::vector<double> y(sy.num_elements());
  slice(x.data(), sx, begin, sy, y.data());
  for (std::int64_t i = 0; i < sy.num_elements(); ++i) {
    auto idx = unravel(i, sy);
    ASSERT_EQ(y[i], x[(idx[0] + 1) * 30 + idx[1] * 6 + idx[2] + 2]);
  }
  const std::int64_t bad[3] = {3, 0, 0};
  EXPECT_THROW(slice(x.data(), sx, bad, sy, y.data()), std::invalid_argument);
  EXPECT_THROW(slice(x.data(), sx, begin, Shape{2, 5}, y.data()), std::invalid_argument);
  bool b[4] = {false, true, true, false}, by[2];
  const std::int64_t one[1] = {1};
  slice(b, Shape{4}, one, Shape{2}, by);
  EXPECT_TRUE(by[0] && by[1]);
  slice(x.data(), sx, begin, Shape{0, 5, 3}, y.data());  // empty: no-op
}

TEST(Concat, AlongEachAxis) {
  const Shape s0{2, 3}, s1{2, 1};
  auto a = iota_vec<std::int32_t>(6), b = std::vector<std::int32_t>{100, 101};
  const std::int32_t* xs[2] = {a.data(), b.data()};
  Shape shapes[2] = {s0, s1};
  std::vector<std::int32_t> y(8);
  concat(xs, shapes, 2, 1, y.data());
  EXPECT_EQ(y, std::vector<std::int32_t>({0, 1, 2, 100, 3, 4, 5, 101}));
  Shape rows[2] = {Shape{2, 3}, Shape{1, 3}};
  std::vector<std::int32_t> c = {7, 8, 9};
  const std::int32_t* xr[2] = {a.data(), c.data()};
  std::vector<std::int32_t> y2(9);
  concat(xr, rows, 2, -2, y2.data());
  EXPECT_EQ(y2, std::vector<std::int32_t>({0, 1, 2, 3, 4, 5, 7, 8, 9}));
  Shape bad[2] = {Shape{2, 3}, Shape{3, 1}};
  EXPECT_THROW(concat(xs, bad, 2, 1, y.data()), std::invalid_argument);
  EXPECT_THROW(concat(xs, shapes, 0, 1, y.data()), std::invalid_argument);
  EXPECT_THROW(concat(xs, shapes, 2, 2, y.data()), std::invalid_argument);
}

TEST(Gather, AxisZeroAndOne) {
  const Shape sp{3, 4};
  auto p = iota_vec<float>(12);
  const std::int64_t idx[3] = {2, 0, 2};
  std::vector<float> y(12);
  gather(p.data(), sp, idx, 3, 0, y.data());
  EXPECT_EQ(y, std::vector<float>({8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  const std::int32_t idx32[2] = {3, 1};
  std::vector<float> y2(6);
  gather(p.data(), sp, idx32, 2, 1, y2.data());
  EXPECT_EQ(y2, std::vector<float>({3, 1, 7, 5, 11, 9}));
}

TEST(Gather, OutOfRangeNamesIndexAndRange) {
  auto p = iota_vec<double>(5);
  const std::int32_t idx[2] = {1, 7};
  double y[2];
  try {
    gather(p.data(), Shape{5}, idx, 2, 0, y);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "gather: index 7 out of range [0, 5)");
  }
  const std::int64_t neg[1] = {-1};
  EXPECT_THROW(gather(p.data(), Shape{5}, neg, 1, 0, y), std::invalid_argument);
}

TEST(UnsortedSegmentSum, AddsRowsAndIsGatherGradient) {
  const std::vector<double> data = {1, 2, 3, 4, 5, 6, 7, 8};  // 4 rows of 2
  const std::int64_t ids[4] = {2, 0, 2, -1};                  // -1 dropped as in TF
  std::vector<double> y(6, 99.0);
  unsorted_segment_sum(data.data(), 4, 2, ids, 3, y.data());
  EXPECT_EQ(y, std::vector<double>({3, 4, 0, 0, 6, 8}));
  const std::int32_t bad[1] = {3};
  EXPECT_THROW(unsorted_segment_sum(data.data(), 1, 2, bad, 3, y.data()), std::invalid_argument);
}

TEST(UnsortedSegmentSum, LargeMatchesSerial) {
  const std::int64_t rows = 300, cols = 1000, segs = 7;
  auto data = testref::random_vector<float>(rows * cols, 3);
  std::vector<std::int32_t> ids(rows);
  for (std::int64_t r = 0; r < rows; ++r) ids[r] = static_cast<std::int32_t>((r * 5) % segs);
  std::vector<float> y(segs * cols);
  unsorted_segment_sum(data.data(), rows, cols, ids.data(), segs, y.data());
  std::vector<float> want(segs * cols, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) want[ids[r] * cols + j] += data[r * cols + j];
  EXPECT_EQ(y, want);  // same per-column order => bitwise equal
}

TEST(OneHot, OutOfRangeGivesOffRow) {
  const std::int64_t idx[3] = {1, 3, -1};
  std::vector<float> y(9);
  one_hot(idx, 3, 3, 1.0f, 0.0f, y.data());
  EXPECT_EQ(y, std::vector<float>({0, 1, 0, 0, 0, 0, 0, 0, 0}));
  const std::int32_t i32[2] = {0, 2};
  std::vector<std::int64_t> yi(6);
  one_hot(i32, 2, 3, std::int64_t{5}, std::int64_t{-1}, yi.data());
  EXPECT_EQ(yi, std::vector<std::int64_t>({5, -1, -1, -1, -1, 5}));
  bool yb[6];
  one_hot(i32, 2, 3, true, false, yb);
  EXPECT_EQ(std::vector<bool>(yb, yb + 6), std::vector<bool>({true, false, false, false, false, true}));
}

}  // namespace
}  // namespace tapeflow::kernels
