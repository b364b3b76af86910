// ReduceLROnPlateau and ModelCheckpoint against Keras's semantics, driven epoch by epoch with
// scripted logs. The expected learning rates were produced by Keras 3's ReduceLROnPlateau.on_epoch_end
// logic (keras/src/callbacks/reduce_lr_on_plateau.py) run on the same values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "models/architectures.h"
#include "models/callbacks/model_checkpoint.h"
#include "models/callbacks/reduce_lr_on_plateau.h"
#include "models/saving_model.h"
#include "models/sequential.h"
#include "optimizers/schedules.h"
#include "optimizers/sgd.h"

namespace tapeflow::models {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::shared_ptr<Sequential> compiled_model(optimizers::LearningRate lr = 1.0) {
  auto model = make_classifier_mlp({.inputs = 4, .hidden = {8}, .classes = 2, .batch_norm = false, .seed = 1});
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = lr}),
                  .loss = "sparse_categorical_crossentropy"});
  model->build(Shape{1, 4});
  return model;
}

TEST(ReduceLROnPlateau, FollowsKerasPatienceCooldownAndMinLr) {
  auto model = compiled_model();
  ReduceLROnPlateau cb({.monitor = "val_loss", .factor = 0.5, .patience = 2, .min_delta = 0.01, .cooldown = 2,
                        .min_lr = 0.2});
  cb.set_model(model.get());
  cb.on_train_begin({});
  const std::vector<double> val_loss = {1.0, 0.995, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  std::vector<double> logged, after;
  for (std::size_t e = 0; e < val_loss.size(); ++e) {
    Logs logs{{"loss", 0.5}, {"val_loss", val_loss[e]}};
    cb.on_epoch_end(static_cast<int>(e), logs);
    logged.push_back(*logs.get("learning_rate"));
    after.push_back(model->optimizer()->current_learning_rate());
  }
  // Keras: 0.995 is no improvement (min_delta 0.01); the epoch that ends the cooldown counts as waiting.
  EXPECT_THAT(logged, ElementsAreArray({1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2}));
  EXPECT_THAT(after, ElementsAreArray({1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2}));
  EXPECT_EQ(cb.reductions(), 3);
}

TEST(ReduceLROnPlateau, MaximizesAccuracyAndRefusesWhatKerasRefuses) {
  auto model = compiled_model();
  ReduceLROnPlateau cb({.monitor = "val_accuracy", .factor = 0.1, .patience = 1, .min_delta = 0});
  cb.set_model(model.get());
  cb.on_train_begin({});
  for (double acc : {0.5, 0.6, 0.6}) {
    Logs logs{{"val_accuracy", acc}};
    cb.on_epoch_end(0, logs);
  }
  EXPECT_NEAR(model->optimizer()->current_learning_rate(), 0.1, 1e-15);  // only the last epoch did not improve
  Logs missing{{"loss", 1.0}};
  cb.on_epoch_end(3, missing);  // warns, changes nothing
  EXPECT_NEAR(model->optimizer()->current_learning_rate(), 0.1, 1e-15);
  EXPECT_THROW(ReduceLROnPlateau({.factor = 1.0}), std::invalid_argument);
  EXPECT_THROW(ReduceLROnPlateau({.patience = -1}), std::invalid_argument);
  auto scheduled = compiled_model(optimizers::CosineDecay(0.1, 100));
  ReduceLROnPlateau on_schedule;
  on_schedule.set_model(scheduled.get());
  on_schedule.on_train_begin({});
  Logs logs{{"val_loss", 1.0}};
  try {
    on_schedule.on_epoch_end(0, logs);
    FAIL();
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("learning rate is a schedule"));
  }
}

TEST(ModelCheckpoint, SavesOnlyTheBestAndNamesFilesByEpoch) {
  const fs::path dir = fs::temp_directory_path() / ("tapeflow_model_checkpoint_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto model = compiled_model();
  ModelCheckpoint best({.filepath = (dir / "m-{epoch:02d}.h5").string(), .monitor = "val_loss", .save_best_only = true});
  best.set_model(model.get());
  for (auto [epoch, v] : std::vector<std::pair<int, double>>{{0, 3.0}, {1, 2.0}, {2, 2.5}, {3, 2.0}, {4, 1.0}}) {
    Logs logs{{"val_loss", v}};
    best.on_epoch_end(epoch, logs);
  }
  EXPECT_EQ(best.saves(), 3);  // 3.0, 2.0 and 1.0; 2.5 is worse, the second 2.0 not strictly better
  EXPECT_TRUE(fs::exists(dir / "m-01.h5"));
  EXPECT_TRUE(fs::exists(dir / "m-02.h5"));
  EXPECT_FALSE(fs::exists(dir / "m-03.h5"));
  EXPECT_FALSE(fs::exists(dir / "m-04.h5"));
  EXPECT_EQ(best.last_saved(), (dir / "m-05.h5").string());
  EXPECT_EQ(load_model(best.last_saved())->count_params(), model->count_params());  // a whole model

  ModelCheckpoint every({.filepath = (dir / "w{epoch}.weights.h5").string(), .save_weights_only = true});
  every.set_model(model.get());
  for (int epoch = 0; epoch < 2; ++epoch) {
    Logs logs{{"loss", 1.0}};
    every.on_epoch_end(epoch, logs);
  }
  EXPECT_TRUE(fs::exists(dir / "w1.weights.h5"));
  EXPECT_TRUE(fs::exists(dir / "w2.weights.h5"));
  ModelCheckpoint accuracy({.filepath = (dir / "acc.h5").string(), .monitor = "val_accuracy", .save_best_only = true});
  accuracy.set_model(model.get());
  for (double acc : {0.5, 0.4, 0.7}) {
    Logs logs{{"val_accuracy", acc}};
    accuracy.on_epoch_end(0, logs);
  }
  EXPECT_EQ(accuracy.saves(), 2);  // "auto" maximizes names with "acc"
  EXPECT_THROW(ModelCheckpoint({.filepath = ""}), std::invalid_argument);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tapeflow::models
