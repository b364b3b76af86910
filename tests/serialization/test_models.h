// Shared fixtures of the serialization tests: small models and exact comparisons.
#pragma once

#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "layers/layers.h"
#include "models/models.h"
#include "optimizers/optimizers.h"
#include "tape/core/random.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::testing_io {

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

inline Tensor random_input(Shape shape, std::uint64_t seed) {
  Generator g(seed);
  return random_normal(shape, g, 0.0, 1.0, DType::kFloat32);
}

// Dense -> BatchNormalization -> Dropout -> Dense(3).
inline std::shared_ptr<models::Sequential> mlp(std::int64_t in = 6) {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 8, .activation = "relu", .kernel_regularizer_l2 = 1e-3}),
      std::make_shared<layers::BatchNormalization>(layers::BatchNormalizationOptions{.momentum = 0.9}),
      std::make_shared<layers::Dropout>(0.25),
      std::make_shared<layers::Dense>(3)});
  m->build(Shape{1, in});
  return m;
}

// Two inputs a [.., 4], b [.., 3]; a skip connection around a Dense; Concatenate; one output [.., 2].
inline std::shared_ptr<models::Functional> skip_two_inputs() {
  auto a = layers::Input({.shape = {4}});
  auto b = layers::Input({.shape = {3}});
  // Seeded: unseeded layers draw from a process-wide counter, so their weights (and anything trained
  // from them) would depend on which tests ran before in the same process.
  auto h = (*std::make_shared<layers::Dense>(layers::DenseOptions{.units = 4, .activation = "tanh", .seed = 11}))(a);
  auto s = (*std::make_shared<layers::Add>())({a, h});
  auto c = (*std::make_shared<layers::Concatenate>())({s, b});
  auto out = (*std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .seed = 12}))(c);
  return std::make_shared<models::Functional>(std::vector<layers::KerasTensor>{a, b}, std::vector<layers::KerasTensor>{out});
}

inline void compile_adam(models::Model& m, bool amsgrad = false) {
  m.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{
                 .learning_rate = optimizers::ExponentialDecay(0.01, 10, 0.9), .amsgrad = amsgrad}),
             .loss = std::make_shared<models::SparseCategoricalCrossentropy>(models::CrossentropyOptions{.from_logits = true}),
             .metrics = {"accuracy"}});
}

inline std::string temp_path(const std::string& name) {
  return std::string(TAPEFLOW_BINARY_DIR) + "/tests/serialization_" + name;
}

}  // namespace tapeflow::testing_io
