// Model::fit / evaluate with a distribute::Context as replica context, under mpirun (1, 2 or 3
// ranks): same weights as one process with the global batch, identical on every rank,
// deterministic; metrics averaged; uneven data; callbacks and stop_training from rank 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "distribute/distribute.h"
#include "models/architectures.h"
#include "models/losses.h"
#include "optimizers/sgd.h"
#include "tape/core/random.h"
#include "tests/distribute/mpi_test_util.h"

namespace tapeflow::distribute::testing {
namespace {

constexpr std::int64_t kExamples = 48, kFeatures = 6, kClasses = 3;

struct Data {
  Tensor x, y;
};

Data make_data(std::int64_t n) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < kFeatures; ++j) x.push_back(std::sin(0.7f * static_cast<float>(i * kFeatures + j)));
    y.push_back((i * 7) % kClasses);
  }
  return {constant(x, Shape{n, kFeatures}), constant(y, Shape{n})};
}

// No BatchNormalization: its batch statistics are per rank (local), so only a BN-free model can
// match one process exactly.
std::shared_ptr<models::Sequential> make_model() {
  auto m = models::make_classifier_mlp(
      {.inputs = kFeatures, .hidden = {8}, .classes = kClasses, .batch_norm = false, .seed = 7});
  m->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.2,
                                                                                   .momentum = 0.5}),
              .loss = std::make_shared<models::SparseCategoricalCrossentropy>(
                  models::CrossentropyOptions{.from_logits = true}),
              .metrics = {"accuracy"}});
  return m;
}

std::shared_ptr<Context> shared_context() {
  return std::shared_ptr<Context>(&context(), [](Context*) {});  // not owned
}

std::vector<Tensor> values(const models::Model& m) {
  std::vector<Tensor> out;
  for (const Variable& v : m.variables()) out.push_back(v.value());
  return out;
}

TEST(FitTest, SameWeightsAsOneProcessWithTheGlobalBatch) {
  const Data d = make_data(kExamples);
  const std::int64_t global_batch = 12;  // 4 steps per epoch; 12 / N per rank for N = 1, 2, 3
  auto reference = make_model();
  const models::History ref = reference->fit(d.x, d.y, {.batch_size = global_batch, .epochs = 3, .verbose = 0, .seed = 5});

  auto model = make_model();
  const models::History h = model->fit(
      d.x, d.y, {.batch_size = global_batch, .epochs = 3, .verbose = 0, .seed = 5, .replica_context = shared_context()});
  EXPECT_EQ(model->optimizer()->iterations(), 3 * kExamples / global_batch);
  const auto want = values(*reference), got = values(*model);
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto a = want[i].to_vector<float>(), b = got[i].to_vector<float>();
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (context().size() == 1) {
        EXPECT_EQ(a[k], b[k]) << "one rank: bit-identical to no context";
      } else {
        EXPECT_NEAR(a[k], b[k], 2e-6 + 2e-6 * std::abs(a[k])) << "variable " << i << " element " << k;
      }
    }
  }
  EXPECT_TRUE(same_on_every_rank(hash_bytes(got))) << "weights differ across ranks";
  // The logs are averaged across ranks: the same as one process over the same examples.
  ASSERT_EQ(h.epoch.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(h["loss"][e], ref["loss"][e], 1e-5) << "epoch " << e;
    EXPECT_NEAR(h["accuracy"][e], ref["accuracy"][e], 1e-9) << "epoch " << e;
  }
  // Deterministic at a fixed number of ranks.
  auto again = make_model();
  again->fit(d.x, d.y, {.batch_size = global_batch, .epochs = 3, .verbose = 0, .seed = 5,
                        .replica_context = shared_context()});
  EXPECT_EQ(hash_bytes(values(*again)), hash_bytes(got));
}

// fp16 compression (ContextOptions::compression) over the network sum: the weights stay within
// half's rounding of one process's (each gradient and each sum rounded to ~3 decimal digits,
// through Adam's normalisation) and the same bits on every rank.
TEST(FitTest, Fp16CompressionStaysCloseToOneProcessAndTheSameOnEveryRank) {
  if (context().size() == 1) GTEST_SKIP() << "one rank: nothing crosses the network";
  const Data d = make_data(kExamples);
  auto reference = make_model();
  reference->fit(d.x, d.y, {.batch_size = 12, .epochs = 3, .verbose = 0, .seed = 5});
  context().set_shared_memory(false);
  context().set_compression(Compression::kFp16);
  auto model = make_model();
  model->fit(d.x, d.y, {.batch_size = 12, .epochs = 3, .verbose = 0, .seed = 5, .replica_context = shared_context()});
  context().set_compression(Compression::kNone);
  context().set_shared_memory(true);
  const auto want = values(*reference), got = values(*model);
  ASSERT_EQ(want.size(), got.size());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto a = want[i].to_vector<float>(), b = got[i].to_vector<float>();
    for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, static_cast<double>(std::abs(a[k] - b[k])));
  }
  EXPECT_LT(worst, 2e-3) << "fp16 gradients moved the weights too far";
  EXPECT_GT(worst, 0.0) << "the compression must show (the half roundings)";
  EXPECT_TRUE(same_on_every_rank(hash_bytes(got))) << "weights differ across ranks";
}

TEST(FitTest, UnevenTailIsDroppedAndEvaluateAveragesShards) {
  const Data d = make_data(29);  // 29 = 2 global batches of 12 + 5 left over
  auto model = make_model();
  const models::History h =
      model->fit(d.x, d.y, {.batch_size = 12, .epochs = 2, .verbose = 0, .replica_context = shared_context()});
  EXPECT_EQ(model->optimizer()->iterations(), context().size() == 1 ? 2 * 3 : 2 * 2);
  // evaluate: every example once across the shards (uneven: 29 over N ranks), logs averaged.
  const models::Logs local = model->evaluate(d.x, d.y, {.batch_size = 4});
  const models::Logs spread = model->evaluate(d.x, d.y, {.batch_size = 4, .replica_context = shared_context()});
  EXPECT_NEAR(spread.at("loss"), local.at("loss"), 1e-6);
  EXPECT_NEAR(spread.at("accuracy"), local.at("accuracy"), 1e-12);
}

TEST(FitTest, RanksWithDifferentDatasetLengthsRunTheSameSteps) {
  Context& c = context();
  const Data d = make_data(kExamples);
  // Rank r has 3 + r batches of 4: everyone runs 3 per epoch, nobody waits for a missing rank.
  const data::Dataset mine = data::Dataset::from_tensor_slices({d.x, d.y}).take(4 * (3 + c.rank())).batch(4);
  auto model = make_model();
  const models::History h = model->fit(mine, {.epochs = 2, .verbose = 0, .replica_context = shared_context()});
  EXPECT_EQ(h.epoch.size(), 2u);
  EXPECT_EQ(model->optimizer()->iterations(), 6);
  EXPECT_TRUE(same_on_every_rank(hash_bytes(values(*model))));
}

// Counts calls and stops training at the end of epoch 0 (it only runs on rank 0).
class StopAfterFirstEpoch : public models::Callback {
 public:
  void on_epoch_end(int epoch, models::Logs&) override {
    ++calls;
    model().set_stop_training(true);
  }
  int calls = 0;
};

TEST(FitTest, CallbacksRunOnRankZeroAndItsStopReachesEveryRank) {
  Context& c = context();
  const Data d = make_data(kExamples);
  auto stop = std::make_shared<StopAfterFirstEpoch>();
  auto model = make_model();
  const models::History h = model->fit(
      d.x, d.y, {.batch_size = 12, .epochs = 5, .verbose = 0, .callbacks = {stop}, .replica_context = shared_context()});
  EXPECT_EQ(stop->calls, c.rank() == 0 ? 1 : 0);
  EXPECT_EQ(h.epoch.size(), 1u);  // every rank stopped after epoch 0
  EXPECT_TRUE(same_on_every_rank(hash_bytes(values(*model))));
}

TEST(FitTest, GlobalBatchSmallerThanTheRanksIsAnError) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "needs two ranks";
  const Data d = make_data(kExamples);
  auto model = make_model();
  try {
    model->fit(d.x, d.y, {.batch_size = 1, .verbose = 0, .replica_context = shared_context()});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("batch_size (the global batch) must be >= the number of replicas, got 1 "
                                               "for " + std::to_string(c.size()) + " replicas"));
  }
}

}  // namespace
}  // namespace tapeflow::distribute::testing
