// SGD: gradient descent with optional (Nesterov) momentum.
//
// Facts:    momentum = 0: var -= lr·g. Otherwise slot "momentum" (zeros): m = momentum·m - lr·g;
//           var += m, or with nesterov var += momentum·m - lr·g (Keras 3's formulation).
// Errors:   std::invalid_argument for momentum outside [0, 1] (and the base class's errors).
// Ref:      keras/src/optimizers/sgd.py
#pragma once

#include "optimizers/optimizer.h"

namespace tapeflow::optimizers {

// SGD's keyword arguments, in Keras's order. Ref: keras.optimizers.SGD
struct SGDOptions {
  // A constant (default 0.01) or a schedule of the iteration count.
  LearningRate learning_rate = 0.01;
  // In [0, 1]; 0: plain gradient descent, no slot.
  double momentum = 0.0;
  // Nesterov momentum (Keras 3's formulation).
  bool nesterov = false;
  // Clip each gradient to this L2 norm (before the update).
  std::optional<double> clipnorm = std::nullopt;
  // Clip each gradient element to [-clipvalue, clipvalue].
  std::optional<double> clipvalue = std::nullopt;
  // Clip all gradients together to this global L2 norm.
  std::optional<double> global_clipnorm = std::nullopt;
  // The optimizer's name (in configs and checkpoints).
  std::string name = "SGD";
};

// Gradient descent with optional (Nesterov) momentum (see the file comment). Ref: keras.optimizers.SGD
class SGD : public Optimizer {
 public:
  // Errors: std::invalid_argument for momentum outside [0, 1] and the base class's option errors.
  explicit SGD(SGDOptions options = {});
  // The options it was made with.
  const SGDOptions& options() const { return options_; }
  Config get_config() const override;
  // "SGD".
  std::string class_name() const override { return "SGD"; }

 protected:
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  SGDOptions options_;
};

}  // namespace tapeflow::optimizers
