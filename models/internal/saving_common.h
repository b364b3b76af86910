// What the whole-model file formats (.h5 in saving_model.cc, .keras in keras_saving.cc) share:
// the compile state as Keras writes it, the optimizer's variables in Keras 3's order, and reading
// one weight into a checked value. Not public API.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"
#include "models/saving.h"

namespace tapeflow::models::internal {

// Keras's training_config pieces of a compiled model: {"loss", "metrics", "optimizer"} (configs in
// Keras 2's form), or null when the model is not compiled.
nlohmann::json compile_state(const Model& model);
// CompileOptions from an optimizer config, a loss config or name, and a metrics list (null or
// names), in Keras 2 or 3 form. Keras 3 optimizer fields tapeflow lacks (loss_scale_factor,
// gradient_accumulation_steps) must be null. Errors: std::invalid_argument naming the field.
CompileOptions compile_options(const nlohmann::json& optimizer, const nlohmann::json& loss, const nlohmann::json& metrics);
// Keras 3's optimizer.variables for the model's trainable variables: iteration, learning_rate
// (only when it is a number, not a schedule: `nullopt` marks its place) and the slots in Keras's
// creation order. The learning_rate entry is the optimizer's current rate as a float32 scalar.
std::vector<std::pair<std::string, std::optional<Variable>>> keras3_optimizer_variables(optimizers::Optimizer& optimizer,
                                                                                         const Model& model);
// `value` (read from a file) made ready to assign to `var`: shapes must match; an integer value
// for an integer variable (Keras 3 writes the iteration count as int32) is cast. Errors:
// std::runtime_error "<file>: <what>: shape / dtype in file ..., expected ...".
Tensor checked_value(const std::string& file, const std::string& what, Tensor value, const Variable& var);

}  // namespace tapeflow::models::internal
