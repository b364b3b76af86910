#include "layers/reshape.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::layers {

namespace {
std::string to_string(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}
}  // namespace

Reshape::Reshape(ReshapeOptions options)
    : Layer("Reshape", options.name, std::nullopt, options.dtype), target_(std::move(options.target_shape)) {
  int unknown = 0;
  for (std::int64_t d : target_) {
    if (d < -1) throw std::invalid_argument(describe() + ": invalid target_shape " + to_string(target_));
    unknown += d == -1;
  }
  if (unknown > 1)
    throw std::invalid_argument(describe() + ": at most one -1 in target_shape, got " + to_string(target_));
}

Shape Reshape::compute_output_shape(const Shape& s) const {
  if (s.rank() < 1) throw std::invalid_argument(describe() + ": expected inputs with a batch axis, got a scalar");
  std::int64_t have = 1, known = 1;
  for (int i = 1; i < s.rank(); ++i) have *= s[i];
  int unknown_at = -1;
  for (std::size_t i = 0; i < target_.size(); ++i) {
    if (target_[i] == -1) unknown_at = int(i);
    else known *= target_[i];
  }
  std::vector<std::int64_t> out{s[0]};
  out.insert(out.end(), target_.begin(), target_.end());
  bool ok = unknown_at < 0 ? known == have : known != 0 && have % known == 0;
  if (!ok)
    throw std::invalid_argument(describe() + ": cannot reshape input " + s.to_string() + " to target_shape " +
                                to_string(target_));
  if (unknown_at >= 0) out[unknown_at + 1] = have / known;
  return Shape(out);
}

Config Reshape::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["target_shape"] = target_;
  return config;
}

std::shared_ptr<Reshape> Reshape::from_config(const Config& config) {
  ConfigReader r(config, "Reshape");
  try {
    return r.finish(std::make_shared<Reshape>(
        ReshapeOptions{.target_shape = r.integers("target_shape"), .name = r.name(), .dtype = r.dtype()}));
  } catch (const std::invalid_argument& e) {
    r.fail("target_shape", e.what());
  }
}

Tensor Reshape::call(const Tensor& x, bool) { return reshape(x, compute_output_shape(x.shape())); }

}  // namespace tapeflow::layers
