#include "layers/internal/normalized_axes.h"

#include <algorithm>
#include <stdexcept>

#include "tape/core/internal/config_json.h"

namespace tapeflow::layers::internal {

void check_axis_and_epsilon(const std::string& who, const std::vector<int>& axis, double epsilon) {
  if (axis.empty()) throw std::invalid_argument(who + ": axis must name at least one axis");
  if (!(epsilon >= 0)) throw std::invalid_argument(who + ": epsilon must be >= 0, got " + std::to_string(epsilon));
}

std::vector<int> normalized_axes(const std::string& who, const std::vector<int>& axis, const Shape& s) {
  std::vector<int> axes;
  for (int a : axis) {
    if (a >= s.rank() || a < -s.rank())
      throw std::invalid_argument(who + ": axis " + std::to_string(a) + " is out of range for input shape " + s.to_string());
    const int n = a < 0 ? a + s.rank() : a;
    if (std::find(axes.begin(), axes.end(), n) != axes.end())
      throw std::invalid_argument(who + ": axis " + std::to_string(a) + " is repeated");
    axes.push_back(n);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

std::vector<int> axis_from_config(const ConfigReader& r) {
  std::vector<int> axis;
  if (r.has("axis") && json_of(r.config()).at("axis").is_array()) {
    for (std::int64_t a : r.integers("axis")) axis.push_back(static_cast<int>(a));
  } else {
    axis.push_back(static_cast<int>(r.integer("axis", -1)));
  }
  return axis;
}

}  // namespace tapeflow::layers::internal
