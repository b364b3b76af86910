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

struct AdamOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "Adam";
};

class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {});
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(AdamOptions options, double weight_decay);
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  AdamOptions options_;
};

struct AdamWOptions {
  LearningRate learning_rate = 0.001;
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "AdamW";
};

class AdamW : public Adam {
 public:
  explicit AdamW(AdamWOptions options = {});
};

}  // namespace tapeflow::optimizers
