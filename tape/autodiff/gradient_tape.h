// GradientTape: records operations for reverse-mode automatic differentiation.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"

namespace tapeflow {

namespace internal {
class TapeState;
}

// What gradient() returns for a source that the target does not depend on.
// Ref: tf.UnconnectedGradients
enum class UnconnectedGradients { kNone, kZero };

// A differentiation source: a tensor (watched, or an intermediate result) or a variable.
class Source {
 public:
  // A tensor source (watched, or an intermediate result of recorded ops).
  Source(const Tensor& tensor) : tensor_(tensor) {}       // NOLINT: implicit, like TF's nests
  // A variable source (differentiated through its reads).
  Source(const Variable& variable) : variable_(variable) {}  // NOLINT
  Source(double) = delete;  // a literal is never a source
  // True for a variable source, false for a tensor source.
  bool is_variable() const { return variable_.defined(); }
  // The id tapes know it by (the variable's handle id for variables).
  std::int64_t id() const { return is_variable() ? variable_.handle_id() : tensor_.id(); }
  // Current value (for shapes, dtypes and zeros).
  Tensor value() const { return is_variable() ? variable_.value() : tensor_; }
  // The variable (undefined for a tensor source).
  const Variable& variable() const { return variable_; }

 private:
  Tensor tensor_;
  Variable variable_;
};

// Keyword arguments of GradientTape.__init__.
struct GradientTapeOptions {
  bool persistent = false;               // allow several gradient()/jacobian() calls
  bool watch_accessed_variables = true;  // watch trainable variables read while recording
};

// Keyword arguments of GradientTape.gradient.
struct GradientOptions {
  // One gradient per target (its shape and dtype), seeding the backward pass; default ones.
  std::vector<Tensor> output_gradients;
  // What a source the target does not depend on gets: None (kNone, default) or zeros (kZero).
  UnconnectedGradients unconnected_gradients = UnconnectedGradients::kNone;
  // Called during the reverse sweep, on the calling thread, as soon as source i's gradient is final
  // (right after the last recorded op that contributes to it has been processed; before the sweep
  // goes on to earlier ops), in the order gradients become final -- e.g. the last layer's weights
  // before the first layer's, so their all-reduce can overlap the rest of the backward pass. The
  // value is exactly what gradient() returns for source i. Sources the targets do not reach are
  // reported at the end of the sweep, in source order, with an undefined Tensor (kNone) or zeros
  // (kZero). Every floating source is reported exactly once; non-floating sources are not reported.
  // An exception thrown by the hook propagates out of gradient(). Not a TF option (Horovod's hook).
  std::function<void(std::size_t source_index, const Tensor& gradient)> on_gradient_final;
};

// Keyword arguments of GradientTape.jacobian. Ref: tf.GradientTape.jacobian
struct JacobianOptions {
  // What a source the target does not depend on gets: None (kNone, default) or zeros (kZero).
  UnconnectedGradients unconnected_gradients = UnconnectedGradients::kNone;
  // Loop path: rows computed at once on oneTBB threads (1 = sequential, 0 = all threads).
  // Vectorized path: one-hot cotangents per batched backward pass (0 = all in one pass, whose
  // result stays differentiable); several passes run in parallel on oneTBB threads.
  int parallel_iterations = 0;
  // Push all one-hot cotangents through one batched backward pass (falls back to the loop, logged
  // at warning level once per op name, when an op on the way cannot batch: OpDef::loop_only or no
  // batching rule).
  bool experimental_use_pfor = true;
};

// Keyword arguments of GradientTape.batch_jacobian. Ref: tf.GradientTape.batch_jacobian
struct BatchJacobianOptions {
  // What a source the target does not depend on gets: None (kNone, default) or zeros (kZero).
  UnconnectedGradients unconnected_gradients = UnconnectedGradients::kNone;
  // Loop path: as in JacobianOptions. Vectorized path: one-hot cotangents per batched backward
  // pass; 0 = automatic (chunks sized to stay in cache, run in parallel on oneTBB threads).
  int parallel_iterations = 0;
  // Vectorized path (batched backward passes); false: the loop of one-hot passes (as JacobianOptions).
  bool experimental_use_pfor = true;
  // Verify that target[i] depends on source[i] only (2·ceil(log2 b) random probe cotangents);
  // unset = on in debug builds (NDEBUG undefined), off otherwise.
  std::optional<bool> check_independence = std::nullopt;
};

// Records operations executed on this thread while it is active, for automatic differentiation.
// Construction starts recording (the `with` block); stop() or destruction ends it. An op is recorded
// if at least one of its floating inputs is tracked: watched, a watched variable's read, or an output
// of a recorded op. Gradients are computed with tapeflow ops, so an enclosing tape records the
// backward pass: nested tapes give higher-order derivatives. Tapes are per thread.
// Errors: std::logic_error on a second gradient() of a non-persistent tape (message says to use
// persistent = true) and on any use of a moved-from tape; std::invalid_argument for output
// gradients whose count, shape or dtype do not match the targets.
// Ref: tf.GradientTape (tensorflow/python/eager/backprop.py), TF's eager C++ tape (c/eager/tape.h).
class GradientTape {
 public:
  // Starts recording on this thread (TF's `with tf.GradientTape(persistent=...) as tape:`).
  explicit GradientTape(GradientTapeOptions options = {});
  ~GradientTape();
  // Takes over other's recording; `other` can no longer be used (std::logic_error).
  GradientTape(GradientTape&& other) noexcept;
  // Stops this tape's recording and takes over other's; `other` can no longer be used.
  GradientTape& operator=(GradientTape&& other) noexcept;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // Ensures `tensor` is traced by this tape. Non-floating tensors are not watched (logged warning).
  void watch(const Tensor& tensor);
  // Ensures reads of `variable` are traced (needed for non-trainable variables, or with
  // watch_accessed_variables = false). Non-floating variables are not watched (logged warning).
  void watch(const Variable& variable);
  // watch(tensor) for each of `tensors`.
  void watch(const std::vector<Tensor>& tensors);
  // watch(variable) for each of `variables`.
  void watch(const std::vector<Variable>& variables);

  // Ends recording (leaving the `with` block). Idempotent.
  void stop();
  // True from construction until stop() (or the gradient() of a non-persistent tape); still true
  // inside a stop_recording() scope, which only pauses it.
  bool recording() const;
  // GradientTapeOptions::persistent: whether gradient()/jacobian() may be called more than once.
  bool persistent() const;

  // Scope guard returned by stop_recording(): the tape records nothing while it lives.
  class StopRecording {
   public:
    ~StopRecording();
    // Takes over the pause: recording resumes when the new guard is destroyed (not the moved-from one).
    StopRecording(StopRecording&&) noexcept;
    StopRecording(const StopRecording&) = delete;
    StopRecording& operator=(const StopRecording&) = delete;
    StopRecording& operator=(StopRecording&&) = delete;

   private:
    friend class GradientTape;
    StopRecording(std::shared_ptr<internal::TapeState> state, int position);
    std::shared_ptr<internal::TapeState> state_;
    int position_;
  };
  // Temporarily stops recording. Errors: std::logic_error if the tape is not currently recording.
  [[nodiscard]] StopRecording stop_recording();

  // Clears everything recorded and watched; recording continues if it was on. Ref: GradientTape.reset
  void reset();
  // Variables watched by this tape, in order of construction.
  std::vector<Variable> watched_variables() const;

  // d(sum of target)/d(source). None (empty optional) if unconnected and unconnected_gradients is
  // kNone, zeros of the source's shape if kZero. Integer/bool targets or sources give None and a
  // logged warning, as in TF. A non-persistent tape stops recording when asked for its gradient.
  std::optional<Tensor> gradient(const Tensor& target, const Source& source, const GradientOptions& options = {});
  // One gradient per source (in order), each as gradient(target, source) says, in a single backward
  // pass. Ref: tape.gradient(target, [sources])
  std::vector<std::optional<Tensor>> gradient(const Tensor& target, const std::vector<Source>& sources,
                                              const GradientOptions& options = {});
  // Sources in a string-keyed map (TF's dict of sources); the result has the same keys.
  // (A template only so that a braced list {a, b} always means the vector overload.)
  template <typename M>
    requires std::is_same_v<M, std::map<std::string, Source>>
  std::map<std::string, std::optional<Tensor>> gradient(const Tensor& target, const M& sources,
                                                        const GradientOptions& options = {}) {
    return gradient_map(target, sources, options);
  }
  // Several targets: gradients of their sum (each seeded by its output_gradients entry if given).
  std::vector<std::optional<Tensor>> gradient(const std::vector<Tensor>& targets, const std::vector<Source>& sources,
                                              const GradientOptions& options = {});
  // Any container of Tensor or Variable (e.g. layer.trainable_variables()).
  template <typename C>
    requires requires(const C& c) { Source(*std::begin(c)); } && (!std::is_same_v<C, std::vector<Source>>) &&
             (!std::is_same_v<C, std::map<std::string, Source>>)
  std::vector<std::optional<Tensor>> gradient(const Tensor& target, const C& sources,
                                              const GradientOptions& options = {}) {
    return gradient(target, std::vector<Source>(std::begin(sources), std::end(sources)), options);
  }

  // d target / d source for every element pair (implemented in tape/autodiff/jacobian.cc).
  // Shapes:   one result per source, shape target.shape + source.shape (scalar target: the source's
  //           shape). Sources as for gradient(): one, a vector, a map or any container.
  // Paths:    experimental_use_pfor: batched backward passes (parallel_iterations rows each, in
  //           parallel; 0 = one pass); otherwise a loop of one-hot backward passes, on
  //           parallel_iterations oneTBB threads, bit-identical to the sequential loop.
  //           While another tape or a function trace records on this thread, either path runs in
  //           one pass (or in order) on this thread and builds its result with ops, so the result
  //           is differentiable and traceable (as in TF).
  // Errors:   std::logic_error for a non-persistent tape without experimental_use_pfor (TF's rule)
  //           and on a second call of a non-persistent tape.
  std::optional<Tensor> jacobian(const Tensor& target, const Source& source, const JacobianOptions& options = {});
  // One jacobian per source (in order), as jacobian(target, source).
  std::vector<std::optional<Tensor>> jacobian(const Tensor& target, const std::vector<Source>& sources,
                                              const JacobianOptions& options = {});
  // A jacobian per entry of a string-keyed map of sources; the result has the same keys.
  std::map<std::string, std::optional<Tensor>> jacobian(const Tensor& target,
                                                        const std::map<std::string, Source>& sources,
                                                        const JacobianOptions& options = {});
  // Jacobians for any container of Tensor or Variable (e.g. layer.trainable_variables()).
  template <typename C>
    requires requires(const C& c) { Source(*std::begin(c)); } && (!std::is_same_v<C, std::vector<Source>>) &&
             (!std::is_same_v<C, std::map<std::string, Source>>)
  std::vector<std::optional<Tensor>> jacobian(const Tensor& target, const C& sources,
                                              const JacobianOptions& options = {}) {
    return jacobian(target, std::vector<Source>(std::begin(sources), std::end(sources)), options);
  }
  // Per-example jacobians: result[i] = d target[i] / d source[i], in prod(y) backward passes
  // (or batched passes), assuming target[i] depends on source[i] only. Recording tapes and traces
  // see the result as for jacobian() (then built by ops in one pass on this thread).
  // Shapes:   target [b, y...], source [b, x...] -> [b, y..., x...].
  // Errors:   std::invalid_argument if either rank is < 2 or the first dimensions differ, and (with
  //           check_independence) if examples mix, naming the first op whose gradient mixes them;
  //           std::logic_error as for jacobian().
  std::optional<Tensor> batch_jacobian(const Tensor& target, const Source& source,
                                       const BatchJacobianOptions& options = {});

  // gradient() of a string-keyed map of sources, by name (what the map overload of gradient() calls).
  // The result has the same keys.
  std::map<std::string, std::optional<Tensor>> gradient_map(const Tensor& target,
                                                            const std::map<std::string, Source>& sources,
                                                            const GradientOptions& options = {});

  // The shared state (for jacobian/hessian code in tape/autodiff). Errors: std::logic_error if moved from.
  internal::TapeState& state() const;

 private:
  std::shared_ptr<internal::TapeState> state_;
};

}  // namespace tapeflow
