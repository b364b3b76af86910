// The TensorBoard callback under fit: the directories and files it makes, how many events it writes
// and under which tags (TensorBoard's reader checks the values: tests/interop/tensorboard_check.py),
// and its errors.
#include "models/callbacks/tensorboard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "layers/dense.h"
#include "models/sequential.h"
#include "optimizers/sgd.h"
#include "tape/core/random.h"
#include "tape/ops/math_ops.h"
#include "tests/testing/tfrecords.h"

namespace tapeflow::models {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tapeflow::testing::event_files;
using tapeflow::testing::read_tfrecords;

class TensorBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tapeflow_tb_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    model_ = std::make_shared<Sequential>();
    model_->add(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .activation = "relu", .name = "hidden"}));
    model_->add(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .name = "out"}));
    model_->compile({.optimizer = std::make_shared<optimizers::SGD>(), .loss = "mse", .metrics = {"binary_accuracy"}});
    Generator gen(1);
    x_ = random_normal(Shape{8, 4}, gen);
    y_ = random_normal(Shape{8, 2}, gen);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Payloads of the one event file in dir_/run.
  std::vector<std::string> events(const std::string& run) {
    const auto files = event_files(dir_ / run);
    EXPECT_EQ(files.size(), 1u) << run;
    return files.empty() ? std::vector<std::string>{} : read_tfrecords(files[0].string());
  }
  static int count(const std::vector<std::string>& events, const std::string& tag) {
    int n = 0;
    for (const auto& e : events) n += e.find(tag) != std::string::npos;
    return n;
  }

  fs::path dir_;
  std::shared_ptr<Sequential> model_;
  Tensor x_, y_;
};

TEST_F(TensorBoardTest, EpochScalarsOnlyByDefault) {
  auto board = std::make_shared<TensorBoard>(dir_.string());
  model_->fit(x_, y_, {.batch_size = 4, .epochs = 3, .verbose = 0, .callbacks = {board}});
  const auto train = events("train");
  EXPECT_EQ(train.size(), 1u + 3 * 3);  // file version; epoch_loss, epoch_binary_accuracy, epoch_learning_rate per epoch
  EXPECT_EQ(count(train, "epoch_loss"), 3);
  EXPECT_EQ(count(train, "epoch_binary_accuracy"), 3);
  EXPECT_EQ(count(train, "epoch_learning_rate"), 3);
  EXPECT_EQ(count(train, "batch_"), 0);
  EXPECT_FALSE(fs::exists(dir_ / "validation"));  // no validation data
}

TEST_F(TensorBoardTest, BatchScalarsValidationHistogramsAndImages) {
  auto board = std::make_shared<TensorBoard>(
      dir_.string(), TensorBoardOptions{.update_freq = 3, .histogram_freq = 2, .write_images = true});
  model_->fit(x_, y_, {.batch_size = 2, .epochs = 3, .verbose = 0, .callbacks = {board}, .validation_data = {x_, y_}});
  const auto train = events("train");
  // 12 global batches; every 3rd: 4 of them, each batch_loss and batch_binary_accuracy.
  EXPECT_EQ(count(train, "batch_loss"), 4);
  EXPECT_EQ(count(train, "batch_binary_accuracy"), 4);
  EXPECT_EQ(count(train, "epoch_loss"), 3);
  // Epochs 0 and 2: 4 weights, each a histogram and an image (kernels 4x3 and 3x2, biases).
  EXPECT_EQ(count(train, "hidden/kernel/histogram"), 2);
  EXPECT_EQ(count(train, "out/bias/histogram"), 2);
  EXPECT_EQ(count(train, "/histogram"), 8);
  EXPECT_EQ(count(train, "/image"), 8);
  EXPECT_EQ(train.size(), 1u + 8 + 3 * 3 + 8 + 8);
  const auto validation = events("validation");
  EXPECT_EQ(count(validation, "epoch_loss"), 3);
  EXPECT_EQ(count(validation, "epoch_binary_accuracy"), 3);
  EXPECT_EQ(count(validation, "evaluation_loss_vs_iterations"), 3);
  EXPECT_EQ(count(validation, "evaluation_binary_accuracy_vs_iterations"), 3);
  EXPECT_EQ(count(validation, "val_"), 0);
  EXPECT_EQ(validation.size(), 1u + 4 * 3);
}

TEST_F(TensorBoardTest, EachFitCallWritesNewFiles) {
  auto board = std::make_shared<TensorBoard>(dir_.string());
  model_->fit(x_, y_, {.epochs = 1, .verbose = 0, .callbacks = {board}});
  model_->fit(x_, y_, {.epochs = 1, .verbose = 0, .callbacks = {board}});
  EXPECT_EQ(event_files(dir_ / "train").size(), 2u);
}

TEST_F(TensorBoardTest, UnwritableLogDirIsNamed) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  const std::string log_dir = (dir_ / "file" / "logs").string();
  auto board = std::make_shared<TensorBoard>(log_dir);
  try {
    model_->fit(x_, y_, {.epochs = 1, .verbose = 0, .callbacks = {board}});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(log_dir));
  }
}

TEST_F(TensorBoardTest, BadOptionsAreRefused) {
  EXPECT_THROW(TensorBoard("logs", {.update_freq = -1}), std::invalid_argument);
  EXPECT_THROW(TensorBoard("logs", {.histogram_freq = -2}), std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow::models
