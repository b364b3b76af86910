// SGD: gradient descent with optional (Nesterov) momentum.
//
// Facts:    momentum = 0: var -= lr·g. Otherwise slot "momentum" (zeros): m = momentum·m - lr·g;
//           var += m, or with nesterov var += momentum·m - lr·g (Keras 3's formulation).
// Errors:   std::invalid_argument for momentum outside [0, 1] (and the base class's errors).
// Ref:      keras/src/optimizers/sgd.py
#pragma once

#include "optimizers/optimizer.h"

namespace tapeflow::optimizers {

struct SGDOptions {
  LearningRate learning_rate = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "SGD";
};

class SGD : public Optimizer {
 public:
  explicit SGD(SGDOptions options = {});
  const SGDOptions& options() const { return options_; }
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "SGD"; }

 protected:
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  SGDOptions options_;
};

}  // namespace tapeflow::optimizers
