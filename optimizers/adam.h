// Adam and AdamW: adaptive moment estimation (with optional AMSGrad) and decoupled weight decay.
//
// Facts:    slots "m", "v" (zeros) and "vhat" (amsgrad); get_slot also takes Keras 3's names
//           "momentum", "velocity", "velocity_hat". With t = iterations + 1:
//           lr_t = lr·sqrt(1 - β2^t)/(1 - β1^t); m += (g - m)(1 - β1); v += (g² - v)(1 - β2);
//           amsgrad: vhat = max(vhat, v), v̂ = vhat else v̂ = v; var -= lr_t·m/(sqrt(v̂) + ε).
//           AdamW first applies var -= var·weight_decay·lr (Keras default weight_decay 0.004).
// Errors:   std::invalid_argument for betas outside [0, 1), epsilon < 0, weight_decay < 0.
// Ref:      keras/src/optimizers/adam.py, adamw.py, base_optimizer.py (_apply_weight_decay)
#pragma once

#include "optimizers/optimizer.h"

namespace tapeflow::optimizers {

// Adam's keyword arguments, in Keras's order. Ref: keras.optimizers.Adam
struct AdamOptions {
  // A constant (default 0.001) or a schedule of the iteration count.
  LearningRate learning_rate = 0.001;
  // Decay of the first moment, in [0, 1).
  double beta_1 = 0.9;
  // Decay of the second moment, in [0, 1).
  double beta_2 = 0.999;
  // Added to sqrt(v̂) (>= 0; Keras's default 1e-7).
  double epsilon = 1e-7;
  // AMSGrad: divide by the running maximum of v (slot "vhat").
  bool amsgrad = false;
  // Clip each gradient to this L2 norm (before the update).
  std::optional<double> clipnorm = std::nullopt;
  // Clip each gradient element to [-clipvalue, clipvalue].
  std::optional<double> clipvalue = std::nullopt;
  // Clip all gradients together to this global L2 norm.
  std::optional<double> global_clipnorm = std::nullopt;
  // The optimizer's name (in configs and checkpoints).
  std::string name = "Adam";
};

// Adam (optionally AMSGrad); see the file comment for the update. Ref: keras.optimizers.Adam
class Adam : public Optimizer {
 public:
  // Errors: std::invalid_argument for betas outside [0, 1), epsilon < 0 (names the option and value).
  explicit Adam(AdamOptions options = {});
  // The options it was made with.
  const AdamOptions& options() const { return options_; }
  Config get_config() const override;
  // "Adam".
  std::string class_name() const override { return "Adam"; }
  std::vector<std::vector<std::string>> keras_slot_order() const override { return {{"m", "v"}, {"vhat"}}; }

 protected:
  // AdamW's constructor: Adam's update after decoupled weight decay (>= 0).
  Adam(AdamOptions options, double weight_decay);
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  AdamOptions options_;
};

// AdamW's keyword arguments, in Keras's order. Ref: keras.optimizers.AdamW
struct AdamWOptions {
  // A constant (default 0.001) or a schedule of the iteration count.
  LearningRate learning_rate = 0.001;
  // Decoupled weight decay per step, var -= var·weight_decay·lr (>= 0).
  double weight_decay = 0.004;
  // Decay of the first moment, in [0, 1).
  double beta_1 = 0.9;
  // Decay of the second moment, in [0, 1).
  double beta_2 = 0.999;
  // Added to sqrt(v̂) (>= 0; Keras's default 1e-7).
  double epsilon = 1e-7;
  // AMSGrad: divide by the running maximum of v (slot "vhat").
  bool amsgrad = false;
  // Clip each gradient to this L2 norm (before the update).
  std::optional<double> clipnorm = std::nullopt;
  // Clip each gradient element to [-clipvalue, clipvalue].
  std::optional<double> clipvalue = std::nullopt;
  // Clip all gradients together to this global L2 norm.
  std::optional<double> global_clipnorm = std::nullopt;
  // The optimizer's name (in configs and checkpoints).
  std::string name = "AdamW";
};

// Adam with decoupled weight decay (var -= var·weight_decay·lr first). Ref: keras.optimizers.AdamW
class AdamW : public Adam {
 public:
  // Errors: Adam's, and std::invalid_argument for weight_decay < 0.
  explicit AdamW(AdamWOptions options = {});
  Config get_config() const override;
  // "AdamW".
  std::string class_name() const override { return "AdamW"; }
};

}  // namespace tapeflow::optimizers
