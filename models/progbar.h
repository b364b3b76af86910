// Progbar: training progress as Keras prints it — a bar redrawn in place on a terminal, or a log
// line every few seconds when the output is a file or a pipe. ProgbarLogger drives it from fit.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::models {

// Options of a Progbar (Keras's Progbar arguments; ProgbarLogger fills them).
struct ProgbarOptions {
  std::int64_t target = -1;   // total steps; -1 when unknown
  int verbose = 1;            // 1: the bar (stdout, redrawn with '\r'); 2: periodic log lines; 0: nothing
  double interval = 0.05;     // verbose 1: seconds between redraws (the last step always draws)
  double log_interval = 5.0;  // verbose 2: seconds between log lines
  std::string prefix;         // verbose 2: start of each line, e.g. "Epoch 3/10"
  int width = 30;             // characters of the bar
  std::FILE* out = stdout;    // verbose 1 destination (verbose 2 logs through spdlog, info)
  // verbose 1: redraw the bar in place with '\r' (true), or print only each finished bar as one
  // line (false, for files and pipes); unset: whether `out` is a terminal (Keras's _dynamic_display).
  std::optional<bool> dynamic_display = std::nullopt;
};

// One pass over `target` steps.
// Facts:    verbose 1 draws "  123/469 [=======>......................] - ETA: 3s - loss: 0.4267"
//           while running and "469/469 [==============================] - 3s 6ms/step - loss: ..."
//           plus a newline when finalized (Keras's format: values %.4f, or %.4e below 1e-3); without
//           a dynamic display (out not a terminal) only the finalized line is written, no '\r'.
//           verbose 2 logs "<prefix> - 123/469 - 12.3s - loss: 0.4267 - ..." every log_interval
//           seconds and nothing at the end (fit logs the epoch's line).
// Errors:   std::invalid_argument for verbose outside 0..2 or a non-positive width.
// Ref:      keras.utils.Progbar
class Progbar {
 public:
  // (name, value) pairs shown after the bar in this order, e.g. {"loss", 0.43}, {"accuracy", 0.85}.
  using Values = std::vector<std::pair<std::string, double>>;
  // Starts the pass (the clock for ETA and step time); draws nothing yet.
  // Errors: std::invalid_argument for verbose outside 0..2 or width < 1.
  explicit Progbar(ProgbarOptions options);
  // Records that `current` steps are done, with the current values (running means, as fit's logs).
  // `finalize` draws the final bar and ends its line (verbose 1).
  void update(std::int64_t current, const Values& values, bool finalize = false);
  // The bar line for `current` steps after `elapsed` seconds (what verbose 1 draws, without '\r').
  std::string bar_line(std::int64_t current, const Values& values, double elapsed, bool finalize) const;

 private:
  ProgbarOptions options_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::size_t last_width_ = 0;
  bool drawn_ = false, finished_ = false;
};

// "3s", "1:05", "1:02:03" (Keras's ETA format).
std::string format_eta(double seconds);
// " 6ms/step" style: the time per step in s, ms or us.
std::string format_time_per_step(double seconds);

}  // namespace tapeflow::models
