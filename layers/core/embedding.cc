#include "layers/core/embedding.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

Embedding::Embedding(EmbeddingOptions options)
    : Layer("Embedding", options.name, options.seed, options.dtype), options_(std::move(options)) {
  if (options_.input_dim < 1 || options_.output_dim < 1)
    throw std::invalid_argument(describe() + ": input_dim and output_dim must be >= 1, got " +
                                std::to_string(options_.input_dim) + " and " + std::to_string(options_.output_dim));
}

void Embedding::build(const Shape& input_shape) {
  embeddings_ = add_weight("embeddings", {options_.input_dim, options_.output_dim}, options_.embeddings_initializer);
  Layer::build(input_shape);
}

Shape Embedding::compute_output_shape(const Shape& input_shape) const {
  Shape out = input_shape;
  out.push_back(options_.output_dim);
  return out;
}

Tensor Embedding::call(const Tensor& inputs, bool) {
  const Tensor ids = is_floating(inputs.dtype()) ? cast(inputs, DType::kInt32) : inputs;
  try {
    return gather(embeddings_.read(), ids, 0);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(describe() + " (input_dim " + std::to_string(options_.input_dim) +
                                "): ids of shape " + inputs.shape().to_string() + ": " + e.what());
  }
}

Tensor Embedding::compute_mask(const Tensor& inputs) const {
  if (!options_.mask_zero) return Tensor();
  const Tensor ids = is_floating(inputs.dtype()) ? cast(inputs, DType::kInt32) : inputs;
  return not_equal(ids, scalar(0.0, ids.dtype()));
}

const Variable& Embedding::embeddings() const {
  if (!embeddings_.defined()) throw std::logic_error(describe() + ": embeddings() before the layer is built");
  return embeddings_;
}

Config Embedding::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["input_dim"] = options_.input_dim;
  c["output_dim"] = options_.output_dim;
  c["embeddings_initializer"] = serialize_initializer(options_.embeddings_initializer);
  c["embeddings_regularizer"] = nullptr;
  c["activity_regularizer"] = nullptr;
  c["embeddings_constraint"] = nullptr;
  c["mask_zero"] = options_.mask_zero;
  return config;
}

std::shared_ptr<Embedding> Embedding::from_config(const Config& config) {
  ConfigReader r(config, "Embedding");
  for (const char* k : {"embeddings_regularizer", "activity_regularizer", "embeddings_constraint"}) r.require_null(k);
  EmbeddingOptions o{.input_dim = r.integer("input_dim"),
                     .output_dim = r.integer("output_dim"),
                     .embeddings_initializer = r.initializer("embeddings_initializer", "random_uniform"),
                     .mask_zero = r.boolean("mask_zero", false),
                     .name = r.name(),
                     .dtype = r.dtype()};
  try {
    return r.finish(std::make_shared<Embedding>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("input_dim/output_dim", e.what());
  }
}

}  // namespace tapeflow::layers
