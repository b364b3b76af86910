#include "data/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>

#include "tape/kernels/parallel.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x [n, 2] float with rows {i, 10 i}; y [n] int64 = i.
Example make_xy(std::int64_t n) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    x.push_back(static_cast<float>(i));
    x.push_back(static_cast<float>(10 * i));
    y.push_back(i);
  }
  return {constant(x, Shape{n, 2}), constant(y, Shape{n})};
}

// The y values of every example of one pass (examples or batches), flattened.
std::vector<std::int64_t> labels(const Dataset& ds) {
  std::vector<std::int64_t> out;
  for (const Example& e : ds) {
    auto v = e[1].to_vector<std::int64_t>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

template <class F>
void expect_invalid(F&& f, const std::string& part) {
  try {
    f();
    FAIL() << "expected std::invalid_argument containing " << part;
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(DatasetTest, FromTensorSlicesYieldsRows) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(3));
  EXPECT_EQ(ds.cardinality(), 3);
  const auto all = ds.collect();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2][0].shape(), (Shape{2}));
  EXPECT_EQ(all[2][0].dtype(), DType::kFloat32);
  EXPECT_THAT(all[2][0].to_vector<float>(), ElementsAre(2.0f, 20.0f));
  EXPECT_EQ(all[2][1].shape(), Shape{});
  EXPECT_EQ(all[2][1].item<std::int64_t>(), 2);
}

TEST(DatasetTest, FromTensorSlicesErrors) {
  expect_invalid([] { Dataset::from_tensor_slices({}); }, "no components");
  expect_invalid([] { Dataset::from_tensor_slices({Tensor(1.0)}); }, "rank >= 1");
  expect_invalid([] { Dataset::from_tensor_slices({zeros(Shape{3, 2}), zeros(Shape{4})}); },
                 "first dimension: {[3, 2], [4]}");
  expect_invalid([] { Dataset::from_tensors({}); }, "no components");
  expect_invalid([] { Dataset::from_tensors({Tensor()}); }, "undefined");
}

TEST(DatasetTest, FromTensorsIsOneExample) {
  const Dataset ds = Dataset::from_tensors({zeros(Shape{3, 2})});
  EXPECT_EQ(ds.cardinality(), 1);
  const auto all = ds.collect();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0][0].shape(), (Shape{3, 2}));
}

TEST(DatasetTest, BatchStacksRowsAndKeepsRemainder) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(5)).batch(2);
  EXPECT_EQ(ds.cardinality(), 3);
  const auto all = ds.collect();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0][0].shape(), (Shape{2, 2}));
  EXPECT_THAT(all[1][0].to_vector<float>(), ElementsAre(2, 20, 3, 30));
  EXPECT_EQ(all[2][0].shape(), (Shape{1, 2}));
  EXPECT_THAT(all[2][1].to_vector<std::int64_t>(), ElementsAre(4));

  const Dataset dropped = Dataset::from_tensor_slices(make_xy(5)).batch(2, /*drop_remainder=*/true);
  EXPECT_EQ(dropped.cardinality(), 2);
  EXPECT_THAT(labels(dropped), ElementsAre(0, 1, 2, 3));
}

TEST(DatasetTest, BatchOfMappedExamplesUsesTheGeneralPath) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(4))
                         .map([](const Example& e) { return Example{e[0] * 2.0, e[1]}; })
                         .batch(3);
  const auto all = ds.collect();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_THAT(all[0][0].to_vector<float>(), ElementsAre(0, 0, 2, 20, 4, 40));
  EXPECT_THAT(all[1][1].to_vector<std::int64_t>(), ElementsAre(3));
}

TEST(DatasetTest, BatchErrors) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(4));
  expect_invalid([&] { ds.batch(0); }, "batch_size must be >= 1, got 0");
  // Examples of different shapes cannot be stacked.
  const Dataset ragged = ds.map([](const Example& e) {
    const bool odd = e[1].item<std::int64_t>() % 2 == 1;
    return Example{odd ? zeros(Shape{3}) : zeros(Shape{2})};
  });
  expect_invalid([&] { ragged.batch(2).collect(); }, "example 0 is {[2] float32}, example 1 is {[3] float32}");
}

TEST(DatasetTest, ShuffleIsAPermutationAndRepeatsForASeed) {
  const Dataset base = Dataset::from_tensor_slices(make_xy(50));
  const Dataset a = base.shuffle(50, 7);
  const Dataset b = base.shuffle(50, 7);
  const auto a0 = labels(a), a1 = labels(a), b0 = labels(b), b1 = labels(b);
  EXPECT_EQ(a0, b0);  // same seed, same pass -> same order
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a0, a1);  // reshuffled on the next pass
  std::vector<std::int64_t> sorted = a0, expect(50);
  std::sort(sorted.begin(), sorted.end());
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(sorted, expect);
  EXPECT_NE(a0, expect);
  EXPECT_NE(labels(base.shuffle(50, 8)), a0);  // another seed, another order

  const Dataset fixed = base.shuffle(50, 7, /*reshuffle_each_iteration=*/false);
  EXPECT_EQ(labels(fixed), labels(fixed));
  expect_invalid([&] { base.shuffle(0, 1); }, "buffer_size must be >= 1, got 0");
}

TEST(DatasetTest, SmallShuffleBufferOnlyMovesElementsLocally) {
  // With a buffer of 2 the k-th output is one of the first k + 2 inputs.
  const auto order = labels(Dataset::from_tensor_slices(make_xy(30)).shuffle(2, 3));
  ASSERT_EQ(order.size(), 30u);
  for (std::size_t k = 0; k < order.size(); ++k) EXPECT_LE(order[k], static_cast<std::int64_t>(k) + 1);
  EXPECT_EQ(labels(Dataset::from_tensor_slices(make_xy(5)).shuffle(1, 3)), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
}

TEST(DatasetTest, ShuffleThenBatchGathersTheShuffledRows) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(10)).shuffle(10, 1).batch(4);
  for (const Example& e : ds) {
    const auto x = e[0].to_vector<float>();
    const auto y = e[1].to_vector<std::int64_t>();
    for (std::size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(x[2 * i], static_cast<float>(y[i]));
      EXPECT_EQ(x[2 * i + 1], static_cast<float>(10 * y[i]));
    }
  }
}

TEST(DatasetTest, RepeatAndTake) {
  const Dataset base = Dataset::from_tensor_slices(make_xy(3));
  EXPECT_EQ(base.repeat(2).cardinality(), 6);
  EXPECT_THAT(labels(base.repeat(2)), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_EQ(base.repeat().cardinality(), kInfiniteCardinality);
  EXPECT_THAT(labels(base.repeat().take(7)), ElementsAre(0, 1, 2, 0, 1, 2, 0));
  EXPECT_EQ(base.repeat().take(7).cardinality(), 7);
  EXPECT_THAT(labels(base.take(2)), ElementsAre(0, 1));
  EXPECT_EQ(base.take(10).cardinality(), 3);
  EXPECT_EQ(base.take(-1).cardinality(), 3);
  EXPECT_TRUE(labels(base.take(0)).empty());
  EXPECT_TRUE(labels(base.take(0).repeat()).empty());  // an empty input repeated forever ends
  EXPECT_THROW(base.repeat().collect(), std::logic_error);
  // Batches may cross pass boundaries, as in tf.data.
  EXPECT_THAT(labels(base.repeat(2).batch(4)), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_EQ(base.repeat(2).batch(4).cardinality(), 2);
}

TEST(DatasetTest, ShuffleBeforeRepeatReshufflesEveryPass) {
  const auto order = labels(Dataset::from_tensor_slices(make_xy(20)).shuffle(20, 5).repeat(2));
  ASSERT_EQ(order.size(), 40u);
  EXPECT_NE(std::vector<std::int64_t>(order.begin(), order.begin() + 20),
            std::vector<std::int64_t>(order.begin() + 20, order.end()));
}

TEST(DatasetTest, MapSeesMaterialisedExamples) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(3)).map([](const Example& e) {
    return Example{e[0] + 1.0};
  });
  EXPECT_EQ(ds.cardinality(), 3);
  const auto all = ds.collect();
  ASSERT_EQ(all.size(), 3u);
  ASSERT_EQ(all[1].size(), 1u);
  EXPECT_THAT(all[1][0].to_vector<float>(), ElementsAre(2, 11));
  EXPECT_THROW(Dataset::from_tensor_slices(make_xy(3)).map(nullptr), std::invalid_argument);
}

TEST(DatasetTest, MapErrorsPropagate) {
  const Dataset ds = Dataset::from_tensor_slices(make_xy(3)).map([](const Example& e) -> Example {
    if (e[1].item<std::int64_t>() == 1) throw std::runtime_error("map: bad example 1");
    return e;
  });
  auto it = ds.make_iterator();
  EXPECT_TRUE(it.next().has_value());
  EXPECT_THROW(it.next(), std::runtime_error);
}

TEST(DatasetTest, PrefetchKeepsOrderAndRethrows) {
  const Dataset base = Dataset::from_tensor_slices(make_xy(100)).shuffle(100, 9).batch(7);
  const auto expect = labels(base);  // pass 0 of a twin pipeline
  const Dataset twin = Dataset::from_tensor_slices(make_xy(100)).shuffle(100, 9).batch(7);
  EXPECT_EQ(labels(twin.prefetch(3)), expect);
  EXPECT_EQ(twin.prefetch(3).cardinality(), 15);
  expect_invalid([&] { base.prefetch(0); }, "buffer_size must be >= 1, got 0");

  const Dataset failing = Dataset::from_tensor_slices(make_xy(10))
                              .map([](const Example& e) -> Example {
                                if (e[1].item<std::int64_t>() == 6) throw std::runtime_error("bad 6");
                                return e;
                              })
                              .prefetch(2);
  auto it = failing.make_iterator();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(it.next().has_value());
  EXPECT_THROW(it.next(), std::runtime_error);
}

TEST(DatasetTest, PrefetchWorksWithOneThreadAndEarlyDestruction) {
  const int previous = kernels::set_num_threads(1);
  {
    const Dataset ds = Dataset::from_tensor_slices(make_xy(20)).batch(3).prefetch(2);
    EXPECT_EQ(labels(ds).size(), 20u);
    auto it = ds.make_iterator();
    EXPECT_TRUE(it.next().has_value());  // destroyed with work pending
  }
  kernels::set_num_threads(previous);
}

TEST(DatasetTest, IteratorOutlivesItsDataset) {
  std::optional<Dataset::Iterator> it;
  {
    const Dataset ds = Dataset::from_tensor_slices(make_xy(3)).map([](const Example& e) { return e; }).batch(2);
    it.emplace(ds.make_iterator());
  }
  ASSERT_TRUE(it->next().has_value());
  ASSERT_TRUE(it->next().has_value());
  EXPECT_FALSE(it->next().has_value());
}

TEST(DatasetTest, ShardsTogetherVisitEveryExampleOnce) {
  for (std::int64_t n : {0, 1, 7, 10, 11, 12}) {
    for (std::int64_t shards : {1, 2, 3}) {
      std::vector<std::int64_t> all;
      for (std::int64_t k = 0; k < shards; ++k) {
        // Each "rank" builds its own pipeline (a shuffle counts its passes; pass 0 everywhere).
        const Dataset base = Dataset::from_tensor_slices(make_xy(std::max<std::int64_t>(n, 1))).take(n).shuffle(13, 5);
        const Dataset shard = base.shard(shards, k);
        const auto mine = labels(shard);
        EXPECT_EQ(static_cast<std::int64_t>(mine.size()), shard.cardinality()) << "n " << n << " shard " << k;
        if (shards > 1 && n > 1) {
          EXPECT_NE(labels(shard), mine) << "the next pass is reshuffled";
        }
        EXPECT_EQ(shard.cardinality(), n > k ? (n - k + shards - 1) / shards : 0);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      // Same seed on every "rank": the shards of one pass partition that pass.
      std::sort(all.begin(), all.end());
      std::vector<std::int64_t> expect(static_cast<std::size_t>(n));
      std::iota(expect.begin(), expect.end(), 0);
      EXPECT_EQ(all, expect) << "n " << n << " shards " << shards;
    }
  }
  // Element i goes to shard i % num_shards (tf.data), before batching.
  const Dataset ds = Dataset::from_tensor_slices(make_xy(7));
  EXPECT_THAT(labels(ds.shard(3, 1)), ElementsAre(1, 4));
  EXPECT_THAT(labels(ds.shard(3, 0).batch(2)), ElementsAre(0, 3, 6));
  EXPECT_EQ(ds.repeat().shard(2, 1).cardinality(), kInfiniteCardinality);
  expect_invalid([&] { ds.shard(0, 0); }, "Dataset::shard: num_shards must be >= 1, got 0");
  expect_invalid([&] { ds.shard(2, 2); }, "index must be in [0, 2), got 2");
  expect_invalid([&] { ds.shard(2, -1); }, "got -1");
}

TEST(DatasetTest, GatherRows) {
  const Tensor x = make_xy(4)[0];
  EXPECT_THAT(gather_rows(x, {3, 0, 3}).to_vector<float>(), ElementsAre(3, 30, 0, 0, 3, 30));
  EXPECT_EQ(gather_rows(x, {}).shape(), (Shape{0, 2}));
  expect_invalid([&] { gather_rows(x, {4}); }, "index 4 out of range for shape [4, 2]");
  expect_invalid([&] { gather_rows(x, {-1}); }, "index -1");
  expect_invalid([&] { gather_rows(Tensor(1.0), {0}); }, "rank >= 1");
}

}  // namespace
}  // namespace tapeflow::data
