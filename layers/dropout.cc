#include "layers/dropout.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/math_ops.h"

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
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  const double rate = options_.rate;
  dispatch_floating(x.dtype(), "Dropout", [&](auto tag) {
    using T = decltype(tag);
    T* m = mask.mutable_data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - rate)), r = static_cast<T>(rate);
    const std::int64_t n = x.num_elements();
    generator().fill_keep_mask<T>(m, n, r, keep);  // u >= rate ? keep : 0, u fill_uniform's [0, 1) draw
  });
  return x * mask;
}

}  // namespace tapeflow::layers
