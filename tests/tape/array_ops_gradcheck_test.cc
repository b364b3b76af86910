// Float64 first- and second-order gradient checks of the array and index ops (registered rows for
// the coverage test), plus the composites built from them (expand_dims, squeeze, stack, unstack,
// split, tile). Each function squares the op's output so the backward pass depends on the input
// and the second-order check differentiates the op's gradient itself.
#include <gtest/gtest.h>

#include <algorithm>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using tf::testing::random_f64;
using In = std::vector<tf::Tensor>;

namespace {

std::function<In()> inputs(std::vector<tf::Shape> shapes, std::vector<tf::Tensor> extra = {}) {
  return [random = tf::testing::random_inputs(std::move(shapes), 11), extra] {
    In out = random();
    for (const auto& t : extra) out.push_back(t);
    return out;
  };
}

tf::Tensor i32(std::vector<std::int32_t> v, const tf::Shape& s) { return tf::constant(v, s); }
tf::Tensor i64(std::vector<std::int64_t> v, const tf::Shape& s) { return tf::constant(v, s); }

tf::testing::TestFn transpose_fn(std::vector<int> perm) {
  return [perm](const In& in) { return tf::square(perm.empty() ? tf::transpose(in[0]) : tf::transpose(in[0], perm)); };
}
tf::testing::TestFn concat_fn(int axis) {
  return [axis](const In& in) { return tf::square(tf::concat(in, axis)); };
}
tf::testing::TestFn gather_fn(int axis) {
  return [axis](const In& in) { return tf::square(tf::gather(in[0], in[1], axis)); };
}
tf::testing::TestFn segment_fn(std::int64_t num_segments) {
  return [num_segments](const In& in) { return tf::square(tf::unsorted_segment_sum(in[0], in[1], num_segments)); };
}

// The blocks of split in another order (every output used), or only block `only` (the others get
// the tape's zero gradients).
tf::testing::TestFn split_fn(std::vector<std::int64_t> sizes, int axis, int only = -1) {
  return [sizes, axis, only](const In& in) {
    std::vector<tf::Tensor> parts = tf::split(in[0], sizes, axis);
    if (only >= 0) return tf::square(parts[static_cast<std::size_t>(only)]);
    std::reverse(parts.begin(), parts.end());
    return tf::square(tf::concat(parts, axis));
  };
}

tf::testing::RegisterGradChecks rows({
    {"SplitV", "sizes {1,2} axis 1 of [2,3]", split_fn({1, 2}, 1), inputs({{2, 3}})},
    {"SplitV", "three blocks axis 0 of [4,2,2]", split_fn({1, 1, 2}, 0), inputs({{4, 2, 2}})},
    {"SplitV", "block 1 only, axis 2", split_fn({2, 1, 1}, 2, 1), inputs({{2, 2, 4}})},
    {"Transpose", "default reverse [2,3]", transpose_fn({}), inputs({{2, 3}})},
    {"Transpose", "perm {2,0,1} of [2,3,4]", transpose_fn({2, 0, 1}), inputs({{2, 3, 4}})},
    {"Transpose", "perm {1,3,0,2} of [2,1,3,2]", transpose_fn({1, 3, 0, 2}), inputs({{2, 1, 3, 2}})},
    {"ConcatV2", "axis 0, two inputs", concat_fn(0), inputs({{2, 3}, {1, 3}})},
    {"ConcatV2", "axis -1, three inputs", concat_fn(-1), inputs({{2, 1}, {2, 3}, {2, 2}})},
    {"ConcatV2", "axis 1 of rank 3", concat_fn(1), inputs({{2, 1, 2}, {2, 2, 2}})},
    {"Slice", "[3,4] begin {1,1} size {2,-1}",
     [](const In& in) { return tf::square(tf::slice(in[0], {1, 1}, {2, -1})); }, inputs({{3, 4}})},
    {"Slice", "[2,3,4] interior block",
     [](const In& in) { return tf::square(tf::slice(in[0], {1, 0, 1}, {1, 2, 2})); }, inputs({{2, 3, 4}})},
    {"Pad", "[2,3] with constant 1.5",
     [](const In& in) { return tf::square(tf::pad(in[0], {{1, 0}, {2, 1}}, 1.5)); }, inputs({{2, 3}})},
    {"GatherV2", "rows, int32, duplicates", gather_fn(0), inputs({{4, 3}}, {i32({3, 0, 3, 1}, {4})})},
    {"GatherV2", "axis 1, int64", gather_fn(1), inputs({{2, 4, 3}}, {i64({2, 0, 2}, {3})})},
    {"GatherV2", "axis -1, 2-D indices", gather_fn(-1), inputs({{3, 4}}, {i32({1, 3, 3, 0}, {2, 2})})},
    {"GatherV2", "scalar index", gather_fn(0), inputs({{3, 2}}, {i64({2}, {})})},
    {"UnsortedSegmentSum", "int32 ids, an empty segment", segment_fn(4), inputs({{5, 2}}, {i32({0, 3, 0, 1, 3}, {5})})},
    {"UnsortedSegmentSum", "negative id dropped", segment_fn(2), inputs({{4}}, {i64({1, -1, 0, 1}, {4})})},
    {"UnsortedSegmentSum", "2-D ids", segment_fn(3), inputs({{2, 2, 3}}, {i32({2, 0, 0, 2}, {2, 2})})},
});

TEST(ArrayOpsGradCheck, FirstAndSecondOrder) {
  tf::testing::run_gradcheck_cases({"Transpose", "ConcatV2", "Slice", "SplitV", "Pad", "GatherV2", "UnsortedSegmentSum"});
}

// Composites of reshape / concat / slice / broadcast_to: no gradient code of their own, checked here.
TEST(ArrayOpsGradCheck, Composites) {
  using tf::testing::gradcheck_both;
  auto x = [](const tf::Shape& s) { return In{random_f64(s, 5)}; };
  EXPECT_TRUE(gradcheck_both([](const In& in) { return tf::square(tf::expand_dims(in[0], -2)); }, x({2, 3})));
  EXPECT_TRUE(gradcheck_both([](const In& in) { return tf::square(tf::squeeze(in[0])); }, x({1, 3, 1})));
  EXPECT_TRUE(gradcheck_both([](const In& in) { return tf::square(tf::stack(in, -1)); },
                             In{random_f64({2, 3}, 1), random_f64({2, 3}, 2), random_f64({2, 3}, 3)}));
  EXPECT_TRUE(gradcheck_both([](const In& in) { return tf::square(tf::unstack(in[0], 1)[2]) * tf::unstack(in[0], 1)[0]; },
                             x({2, 3, 2})));
  EXPECT_TRUE(gradcheck_both([](const In& in) {
    auto parts = tf::split(in[0], std::vector<std::int64_t>{1, -1}, -1);
    return tf::square(parts[1]) * parts[0];
  }, x({3, 4})));
  EXPECT_TRUE(gradcheck_both([](const In& in) { return tf::square(tf::tile(in[0], {2, 1, 3})); }, x({2, 3, 1})));
}

// Third order through slice -> pad -> slice: d³/dx³ of sum(slice(x)^4) = 24 slice(x) padded.
TEST(ArrayOpsGradCheck, ThirdOrderThroughSliceAndPad) {
  tf::Tensor x = tf::constant<double>({1, 2, 3}, {3});
  tf::GradientTape t3;
  t3.watch(x);
  tf::GradientTape t2;
  t2.watch(x);
  tf::GradientTape t1;
  t1.watch(x);
  tf::Tensor y = tf::reduce_sum(tf::pow(tf::slice(x, {1}, {2}), 4.0));
  tf::Tensor d1 = *t1.gradient(y, x);
  tf::Tensor d2 = *t2.gradient(d1, x);
  tf::Tensor d3 = *t3.gradient(d2, x);
  EXPECT_EQ(d3.to_vector<double>(), (std::vector<double>{0, 48, 72}));
}

}  // namespace
