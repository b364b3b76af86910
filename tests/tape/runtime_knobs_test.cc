// The public runtime knobs: tapeflow::set_num_threads / get_num_threads and tapeflow's logger
// (set_log_level, logger()).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

// Captures what tapeflow's logger writes while alive; restores the level afterwards.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)), level_(tf::get_log_level()) {
    tf::logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = tf::logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    tf::set_log_level(level_);
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  tf::LogLevel level_;
};

// GradientTape's warning for a watched integer tensor (TF logs the same).
void watch_an_integer() {
  tf::GradientTape tape;
  tape.watch(tf::Tensor(3));
}

TEST(Logging, LibraryWarningsGoThroughTapeflowsLogger) {
  LogCapture capture;
  tf::set_log_level(tf::LogLevel::kInfo);
  watch_an_integer();
  EXPECT_NE(capture.text().find("must be floating"), std::string::npos) << capture.text();
  EXPECT_EQ(tf::logger()->name(), "tapeflow");
}

TEST(Logging, SetLogLevelSilencesTapeflowOnly) {
  LogCapture capture;
  const auto default_level = spdlog::default_logger()->level();
  tf::set_log_level(tf::LogLevel::kError);
  EXPECT_EQ(tf::get_log_level(), tf::LogLevel::kError);
  watch_an_integer();
  EXPECT_EQ(capture.text(), "");
  EXPECT_EQ(spdlog::default_logger()->level(), default_level);  // the program's own logging is untouched
  tf::set_log_level("warning");
  EXPECT_EQ(tf::get_log_level(), tf::LogLevel::kWarn);
  watch_an_integer();
  EXPECT_NE(capture.text().find("must be floating"), std::string::npos);
  tf::set_log_level("off");
  EXPECT_EQ(tf::get_log_level(), tf::LogLevel::kOff);
}

TEST(Logging, SpdlogGlobalLevelReachesTapeflowsLogger) {
  LogCapture capture;
  const auto global = spdlog::get_level();
  spdlog::set_level(spdlog::level::critical);  // what the apps' --log-level does
  EXPECT_EQ(tf::get_log_level(), tf::LogLevel::kCritical);
  spdlog::set_level(global);
}

TEST(Logging, UnknownLevelNameThrowsListingTheKnownOnes) {
  try {
    tf::set_log_level("verbose");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("set_log_level: unknown level 'verbose'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("warning"), std::string::npos) << e.what();
  }
}

TEST(Threads, SetAndGetNumThreads) {
  const int previous = tf::set_num_threads(1);
  EXPECT_EQ(tf::get_num_threads(), 1);
  EXPECT_EQ(tf::set_num_threads(0), 1);  // returns the previous cap
  EXPECT_GE(tf::get_num_threads(), 1);
  tf::set_num_threads(previous);
}

TEST(Threads, NegativeCountThrowsNamingTheValue) {
  try {
    tf::set_num_threads(-2);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("set_num_threads: negative thread count -2"), std::string::npos) << e.what();
  }
}

}  // namespace
