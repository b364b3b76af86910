// Optimizer and learning-rate-schedule configs in Keras's JSON form, and optimizer variables in the
// order and with the names tf.keras 2.15 writes them to a model file's optimizer_weights.
//
// Facts:    serialize(optimizer) = {"class_name": "Adam", "config": {name, weight_decay,
//           clipnorm, global_clipnorm, clipvalue, use_ema: false, ema_momentum: 0.99,
//           ema_overwrite_frequency: null, jit_compile: false, is_legacy_optimizer: false,
//           learning_rate (a number or {"class_name": "ExponentialDecay", "config": ...}),
//           then the algorithm's fields (Adam: beta_1, beta_2, epsilon, amsgrad)}.
//           keras_weights(): iteration first, then the slots in Keras's creation order
//           (Optimizer::keras_slot_order: Adam m0, v0, m1, v1, ..., then vhat0, vhat1, ...;
//           RMSprop every velocity, then momentums, then average gradients), named as tf.keras
//           names them: "iteration:0", "m/dense/kernel:0", "velocity/dense/kernel:0" (tapeflow's
//           slot "rms" is Keras's "velocity", "mg" is "average_gradient", SGD's "momentum" is "m").
// Errors:   std::invalid_argument naming the optimizer class and the field for an unknown class,
//           a missing or mistyped field, or an unsupported feature (use_ema, weight_decay on an
//           optimizer without it).
// Ref:      tf_keras/src/optimizers/optimizer.py (get_config, variables), adam.py, rmsprop.py,
//           keras.optimizers.schedules
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optimizers/optimizer.h"
#include "tape/core/config.h"

namespace tapeflow::optimizers {

// {"class_name": optimizer.class_name(), "config": optimizer.get_config()} (see above).
// Errors: std::logic_error for an optimizer class without get_config. Ref: keras.optimizers.serialize
Config serialize(const Optimizer& optimizer);
// A new optimizer from {"class_name", "config"}: Adam, AdamW, SGD, RMSprop or Adagrad (tf_keras's
// "Custom>Adam" too); absent fields take Keras's defaults. Ref: keras.optimizers.deserialize
// Errors: std::invalid_argument for an unknown class (lists the known ones), a field that is
//         mistyped or out of range (names the class and the field), use_ema, or weight_decay on an
//         optimizer other than AdamW.
std::shared_ptr<Optimizer> deserialize(const Config& optimizer_config);


// The optimizer's variables for `model_variables` (built first if needed) as Keras orders and names them.
std::vector<std::pair<std::string, Variable>> keras_weights(Optimizer& optimizer,
                                                            const std::vector<Variable>& model_variables);

}  // namespace tapeflow::optimizers
