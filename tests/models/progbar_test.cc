// Progbar / ProgbarLogger: Keras's bar format, in-place redraws ending in one newline, and fit's
// verbose 1 output per epoch.
#include "models/progbar.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "models/architectures.h"
#include "models/callbacks.h"
#include "optimizers/sgd.h"
#include "tape/tapeflow.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

TEST(Progbar, KerasBarFormat) {
  Progbar bar({.target = 469});
  EXPECT_EQ(bar.bar_line(123, {{"loss", 0.42674}, {"accuracy", 0.84451}}, 1.23, false),
            "123/469 [======>.......................] - ETA: 3s - loss: 0.4267 - accuracy: 0.8445");
  EXPECT_EQ(bar.bar_line(469, {{"loss", 0.0004}}, 2.814, true),
            "469/469 [==============================] - 3s 6ms/step - loss: 4.0000e-04");
  EXPECT_EQ(bar.bar_line(7, {}, 0.5, false), "  7/469 [..............................] - ETA: 33s");
  EXPECT_EQ(format_eta(65), "1:05");
  EXPECT_EQ(format_eta(3723), "1:02:03");
  EXPECT_EQ(format_time_per_step(2e-5), " 20us/step");
  EXPECT_THROW(Progbar({.verbose = 3}), std::invalid_argument);
}

TEST(Progbar, RedrawsInPlaceAndEndsWithOneNewline) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progbar bar({.target = 4, .interval = 0, .width = 4, .out = f, .dynamic_display = true});
  for (int i = 1; i <= 4; ++i) bar.update(i, {{"loss", 1.0 / i}}, i == 4);
  const std::string out = contents(f);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 4) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_THAT(out, HasSubstr("\r1/4 [>...] - ETA: "));
  EXPECT_THAT(out, HasSubstr("\r4/4 [====] - 0s "));
  EXPECT_THAT(out, HasSubstr("loss: 0.2500\n"));
  std::fclose(f);
}

// A file or a pipe (not a terminal) gets no '\r': one line per finished bar (Keras's Progbar
// without _dynamic_display), so logs and `| tee` stay readable.
TEST(Progbar, WritesOneLinePerBarWhenTheOutputIsNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progbar bar({.target = 4, .interval = 0, .width = 4, .out = f});  // default: decided by isatty
  for (int i = 1; i <= 4; ++i) bar.update(i, {{"loss", 1.0 / i}}, i == 4);
  const std::string out = contents(f);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 0) << out;
  EXPECT_EQ(out.substr(0, 12), "4/4 [====] -") << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  std::fclose(f);
}

TEST(ProgbarLogger, FitVerboseOnePrintsAnEpochTitleAndABarPerEpoch) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  auto model = make_classifier_mlp({.inputs = 4, .hidden = {8}, .classes = 2, .batch_norm = false, .seed = 1});
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(), .loss = "sparse_categorical_crossentropy"});
  Generator g(2);
  const Tensor x = random_uniform(Shape{40, 4}, g);
  const Tensor y = constant(std::vector<std::int32_t>(40, 1), Shape{40});
  auto logger = std::make_shared<ProgbarLogger>(ProgbarLoggerOptions{.verbose = 1, .epochs = 2, .steps = 4, .out = f});
  model->fit(x, y, {.batch_size = 10, .epochs = 2, .verbose = 0, .callbacks = {logger}});
  const std::string out = contents(f);
  EXPECT_THAT(out, HasSubstr("Epoch 1/2\n"));
  EXPECT_THAT(out, HasSubstr("Epoch 2/2\n"));
  EXPECT_THAT(out, HasSubstr("4/4 [==============================] - "));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4) << out;  // two titles, two finished bars
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 0) << out;  // a file: line mode
  EXPECT_THROW(ProgbarLogger({.verbose = 0}), std::invalid_argument);
  std::fclose(f);
}

}  // namespace
}  // namespace tapeflow::models
