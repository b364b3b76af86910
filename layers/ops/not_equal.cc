#include "layers/ops/not_equal.h"

#include <cmath>
#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

NotEqual::NotEqual(NotEqualOptions options) : Layer("NotEqual", options.name) {
  set_autocast(false);  // compares the values as given (integer ids stay integers)
  if (options.x2) set_x2(*options.x2);
}

void NotEqual::set_x2(double x2) {
  if (!std::isfinite(x2)) throw std::invalid_argument(describe() + ": x2 must be finite, got " + std::to_string(x2));
  if (x2_ && *x2_ != x2)
    throw std::invalid_argument(describe() + ": called with x2 " + std::to_string(x2) + " after x2 " +
                                std::to_string(*x2_) + " (one constant per layer, as Keras's one operation per call)");
  x2_ = x2;
}

Config NotEqual::get_config() const { return Config().set("name", name()); }

std::shared_ptr<NotEqual> NotEqual::from_config(const Config& config) {
  ConfigReader r(config, "NotEqual");
  return std::make_shared<NotEqual>(NotEqualOptions{.name = r.name()});
}

Tensor NotEqual::call(const Tensor& x, bool) {
  if (!x2_)
    throw std::invalid_argument(describe() + ": x2 (the constant compared with) is not known: give it in "
                                             "NotEqualOptions or as the node's second argument");
  return not_equal(x, scalar(*x2_, x.dtype()));
}

}  // namespace tapeflow::layers
