// tapeflow's log: one spdlog logger, named "tapeflow", for every message the library writes
// (dtype warnings of tapes, solver fallbacks, EarlyStopping, Model.fit's epoch lines, ...).
//
// Facts:    The logger writes to stdout (spdlog's colour sink, as spdlog's default logger) and starts
//           at spdlog's global level (info unless spdlog::set_level changed it; spdlog::set_level
//           also changes it later, as the apps' --log-level does). set_log_level changes only
//           tapeflow's logger, so a program can silence tapeflow without touching its own logging
//           and without including spdlog. logger() gives the logger itself (include
//           <spdlog/spdlog.h> to use it), e.g. to add a file sink or change the pattern; a logger
//           that the program registers with spdlog under "tapeflow" before tapeflow's first
//           message is used instead.
// Errors:   set_log_level(name): std::invalid_argument for an unknown name (lists the known ones).
// Ref:      tf.get_logger().setLevel, tf.autograph.set_verbosity; spdlog::level
#pragma once

#include <memory>
#include <string>

namespace spdlog {
class logger;
}  // namespace spdlog

namespace tapeflow {

// Severity threshold: messages below it are dropped. kOff drops everything.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// Sets the threshold of tapeflow's logger.
void set_log_level(LogLevel level);
// Sets it by spdlog's name: "trace", "debug", "info", "warning" (or "warn"), "error", "critical", "off".
void set_log_level(const std::string& name);
// The current threshold of tapeflow's logger.
LogLevel get_log_level();
// tapeflow's spdlog logger (created on first use; thread-safe).
std::shared_ptr<spdlog::logger> logger();

}  // namespace tapeflow
