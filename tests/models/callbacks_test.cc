// Callbacks driven by a model whose train_step replays a scripted loss per epoch.
#include "models/callbacks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "layers/dense.h"
#include "models/model.h"
#include "optimizers/sgd.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One Dense weight; epoch k (one batch per epoch) reports loss = script[k] and bumps the weight by 1.
class Scripted : public Model {
 public:
  explicit Scripted(std::vector<double> script) : Model("scripted"), script_(std::move(script)) {
    dense_ = track_layer(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 1, .use_bias = false,
                                                                               .kernel_initializer = "zeros"}));
    (*dense_)(zeros(Shape{1, 1}));
    compile({.optimizer = std::make_shared<optimizers::SGD>(), .loss = "mse"});
  }
  Tensor call(const Tensor& x, bool) override { return (*dense_)(x); }
  Logs train_step(const data::Example&) override {
    const Variable w = variables()[0];
    w.assign(w.value() + 1.0);
    const double loss = script_.at(static_cast<std::size_t>(calls_++));
    return {{"loss", loss}, {"acc", -loss}};
  }
  double weight() const { return variables()[0].value().item(); }

 private:
  std::vector<double> script_;
  std::shared_ptr<layers::Dense> dense_;
  int calls_ = 0;
};

const Tensor kX = zeros(Shape{1, 1});
const Tensor kY = zeros(Shape{1, 1});

History fit(Scripted& m, std::vector<std::shared_ptr<Callback>> cbs, int epochs) {
  return m.fit(kX, kY, {.batch_size = 1, .epochs = epochs, .verbose = 0, .callbacks = std::move(cbs)});
}

TEST(CallbacksTest, HistoryRecordsEveryEpoch) {
  Scripted m({3, 2, 1});
  const History h = fit(m, {}, 3);
  EXPECT_THAT(h.epoch, ElementsAre(0, 1, 2));
  EXPECT_THAT(h["loss"], ElementsAre(3, 2, 1));
  EXPECT_THAT(h["acc"], ElementsAre(-3, -2, -1));
  EXPECT_THROW(h["val_loss"], std::out_of_range);
}

TEST(CallbacksTest, EarlyStoppingWaitsForPatienceAndRestoresBestWeights) {
  Scripted m({5, 4, 4.5, 4.2, 4.1, 3, 1});
  auto es = std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.monitor = "loss", .patience = 2, .restore_best_weights = true});
  const History h = fit(m, {es}, 7);
  EXPECT_THAT(h["loss"], ElementsAre(5, 4, 4.5, 4.2));  // best at epoch 1, two epochs without improvement
  EXPECT_EQ(es->stopped_epoch(), 3);
  EXPECT_EQ(es->best_epoch(), 1);
  EXPECT_EQ(m.weight(), 2.0);  // the weight after epoch 1 (epoch k leaves k + 1)
}

TEST(CallbacksTest, EarlyStoppingMinDeltaModeAndMissingMonitor) {
  Scripted m({1, 1.05, 1.08, 1.09});
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "acc", .min_delta = 0.1});
  EXPECT_EQ(fit(m, {es}, 4)["loss"].size(), 2u);  // acc is maximised; -1.05 does not beat -1 + 0.1
  Scripted m2({3, 2, 1});
  auto missing = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss"});
  EXPECT_EQ(fit(m2, {missing}, 3)["loss"].size(), 3u);  // warns and never stops
  EXPECT_THROW(EarlyStopping({.patience = -1}), std::invalid_argument);
  EXPECT_TRUE(monitor_maximizes("val_accuracy", MonitorMode::kAuto));
  EXPECT_FALSE(monitor_maximizes("val_loss", MonitorMode::kAuto));
  EXPECT_TRUE(monitor_maximizes("val_loss", MonitorMode::kMax));
}

TEST(CallbacksTest, EarlyStoppingBaseline) {
  // Keras: an improvement that misses the baseline keeps the patience counter running.
  Scripted m({5, 5, 5, 5});
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "loss", .patience = 2, .baseline = 1.0});
  EXPECT_EQ(fit(m, {es}, 4)["loss"].size(), 2u);
  Scripted m2({5, 5, 5, 5});
  auto plain = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "loss", .patience = 2});
  EXPECT_EQ(fit(m2, {plain}, 4)["loss"].size(), 3u);
}

TEST(CallbacksTest, CSVLoggerWritesSortedKeys) {
  const std::string path = (std::filesystem::temp_directory_path() / "tapeflow_csv_logger_test.csv").string();
  Scripted m({0.5, 0.25});
  fit(m, {std::make_shared<CSVLogger>(path)}, 2);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "epoch,acc,loss\n0,-0.5,0.5\n1,-0.25,0.25\n");
  Scripted m2({0.125});
  fit(m2, {std::make_shared<CSVLogger>(path, ';', /*append=*/true)}, 1);
  std::ifstream in2(path);
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  EXPECT_EQ(ss2.str(), "epoch,acc,loss\n0,-0.5,0.5\n1,-0.25,0.25\n0;-0.125;0.125\n");
  std::filesystem::remove(path);
  Scripted m3({1});
  try {
    fit(m3, {std::make_shared<CSVLogger>("/nonexistent-dir/x.csv")}, 1);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-dir/x.csv"));
  }
}

TEST(CallbacksTest, LearningRateSchedulerSetsTheOptimizerRate) {
  Scripted m({1, 1, 1});
  auto sched = std::make_shared<LearningRateScheduler>([](int epoch, double lr) { return epoch == 0 ? 0.5 : lr / 2; });
  const History h = fit(m, {sched}, 3);
  EXPECT_THAT(h["learning_rate"], ElementsAre(0.5, 0.25, 0.125));
  EXPECT_DOUBLE_EQ(m.optimizer()->current_learning_rate(), 0.125);
  EXPECT_THROW(LearningRateScheduler(nullptr), std::invalid_argument);
  Scripted m2({1});
  auto bad = std::make_shared<LearningRateScheduler>([](int, double) { return std::nan(""); });
  EXPECT_THROW(fit(m2, {bad}, 1), std::invalid_argument);
}

TEST(CallbacksTest, CheckpointHookEveryNAndBestOnly) {
  std::vector<int> saved;
  auto every2 = std::make_shared<CheckpointHook>(
      CheckpointHookOptions{.save = [&](int e, const Logs&) { saved.push_back(e); }, .every_n_epochs = 2});
  Scripted m({5, 4, 6, 3, 7});
  fit(m, {every2}, 5);
  EXPECT_THAT(saved, ElementsAre(1, 3));
  EXPECT_EQ(every2->saves(), 2);

  saved.clear();
  auto best = std::make_shared<CheckpointHook>(CheckpointHookOptions{
      .save = [&](int e, const Logs& logs) { saved.push_back(e); }, .monitor = "loss", .save_best_only = true});
  Scripted m2({5, 4, 6, 3, 7});
  fit(m2, {best}, 5);
  EXPECT_THAT(saved, ElementsAre(0, 1, 3));
  EXPECT_THROW(CheckpointHook({}), std::invalid_argument);
  EXPECT_THROW(CheckpointHook({.save = [](int, const Logs&) {}, .every_n_epochs = 0}), std::invalid_argument);
}

TEST(CallbacksTest, HooksRunInOrderAndCanStopTraining) {
  std::vector<std::string> events;
  Scripted m({1, 2, 3});
  auto cb = std::make_shared<LambdaCallback>(LambdaCallbackOptions{
      .on_epoch_begin = [&](int e, const Logs&) { events.push_back("begin" + std::to_string(e)); },
      .on_epoch_end = [&](int e, const Logs&) {
        events.push_back("end" + std::to_string(e));
        if (e == 1) const_cast<Scripted&>(m).set_stop_training(true);
      },
      .on_train_batch_end = [&](std::int64_t b, const Logs&) { events.push_back("batch" + std::to_string(b)); }});
  fit(m, {cb}, 3);
  EXPECT_THAT(events, ElementsAre("begin0", "batch0", "end0", "begin1", "batch0", "end1"));
  struct Probe : Callback {
    void probe() { model(); }
  } probe;
  EXPECT_THROW(probe.probe(), std::logic_error);
}

TEST(CallbacksTest, LogsKeepInsertionOrder) {
  Logs logs{{"loss", 1}, {"accuracy", 2}};
  logs.set("loss", 3);
  logs.set("val_loss", 4);
  EXPECT_EQ(logs.keys_string(), "loss, accuracy, val_loss");
  EXPECT_EQ(logs.at("loss"), 3);
  try {
    logs.at("nope");
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_THAT(e.what(), HasSubstr("no entry 'nope' (have: loss, accuracy, val_loss)"));
  }
}

}  // namespace
}  // namespace tapeflow::models
