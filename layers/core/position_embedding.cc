#include "layers/core/position_embedding.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::layers {

PositionEmbedding::PositionEmbedding(PositionEmbeddingOptions options)
    : Layer("PositionEmbedding", options.name, options.seed, options.dtype), options_(std::move(options)) {
  if (options_.sequence_length < 1)
    throw std::invalid_argument(describe() + ": sequence_length must be >= 1, got " +
                                std::to_string(options_.sequence_length));
}

void PositionEmbedding::check(const Shape& s) const {
  if (s.rank() != 3 || s[1] > options_.sequence_length)
    throw std::invalid_argument(describe() + ": expected inputs [batch, steps <= " +
                                std::to_string(options_.sequence_length) + ", features], got shape " + s.to_string());
  if (embeddings_.defined() && s[2] != embeddings_.shape()[1])
    throw std::invalid_argument(describe() + ": inputs have " + std::to_string(s[2]) +
                                " features, the built embeddings " + embeddings_.shape().to_string());
}

void PositionEmbedding::build(const Shape& s) {
  check(s);
  embeddings_ = add_weight("embeddings", {options_.sequence_length, s[2]}, options_.initializer);
  Layer::build(s);
}

Tensor PositionEmbedding::call(const Tensor& x, bool) {
  const Shape& s = x.shape();
  check(s);
  Tensor e = embeddings_.read();
  if (s[1] != options_.sequence_length) e = slice(e, {0, 0}, {s[1], s[2]});
  return broadcast_to(e, s);
}

Config PositionEmbedding::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["sequence_length"] = options_.sequence_length;
  c["initializer"] = serialize_initializer(options_.initializer);
  return config;
}

std::shared_ptr<PositionEmbedding> PositionEmbedding::from_config(const Config& config) {
  ConfigReader r(config, "PositionEmbedding");
  PositionEmbeddingOptions o{.sequence_length = r.integer("sequence_length"),
                             .initializer = r.initializer("initializer", "glorot_uniform"),
                             .name = r.name(),
                             .dtype = r.dtype()};
  try {
    return r.finish(std::make_shared<PositionEmbedding>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("sequence_length", e.what());
  }
}

}  // namespace tapeflow::layers
