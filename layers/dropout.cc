#include "layers/dropout.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/nn_ops.h"

namespace tapeflow::layers {

Dropout::Dropout(DropoutOptions options)
    : Layer("Dropout", options.name, options.seed, options.dtype), options_(std::move(options)) {
  if (!(options_.rate >= 0 && options_.rate < 1))
    throw std::invalid_argument(describe() + ": rate must be in [0, 1), got " + std::to_string(options_.rate));
}

Config Dropout::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["rate"] = options_.rate;
  c["noise_shape"] = nullptr;
  c["seed"] = options_.seed ? nlohmann::json(*options_.seed) : nlohmann::json(nullptr);
  return config;
}

std::shared_ptr<Dropout> Dropout::from_config(const Config& config) {
  ConfigReader r(config, "Dropout");
  r.require_null("noise_shape");
  const double rate = r.number("rate");
  if (!(rate >= 0 && rate < 1)) r.fail("rate", "must be in [0, 1), got " + std::to_string(rate));
  return r.finish(std::make_shared<Dropout>(
      DropoutOptions{.rate = rate, .seed = r.seed("seed"), .name = r.name(), .dtype = r.dtype()}));
}

Tensor Dropout::call(const Tensor& x, bool training) {
  if (!training || options_.rate == 0) return x;
  const std::int64_t n = x.num_elements();
  Tensor bits = Tensor::empty(Shape{(n + 31) / 32}, DType::kInt32);
  const double rate = options_.rate;
  double scale = 0;
  dispatch_floating(x.dtype(), "Dropout", [&](auto tag) {
    using T = decltype(tag);
    scale = static_cast<T>(1.0 / (1.0 - rate));  // the float mask's value, exactly
    // bit i: u_i >= rate, u_i fill_uniform's [0, 1) draw (fill_keep_mask's draws, packed)
    generator().fill_keep_bits<T>(reinterpret_cast<std::uint32_t*>(bits.mutable_data<std::int32_t>()), n,
                                  static_cast<T>(rate));
  });
  return apply_dropout_mask(x, bits, scale);  // x · mask, mask = kept ? 1 / (1 - rate) : 0
}

}  // namespace tapeflow::layers
