#include "layers/reshaping/permute.h"

#include <algorithm>
#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::layers {

Permute::Permute(PermuteOptions o) : Layer("Permute", o.name, std::nullopt, o.dtype), dims_(std::move(o.dims)) {
  std::vector<int> sorted = dims_;
  std::sort(sorted.begin(), sorted.end());
  bool ok = !sorted.empty();
  for (std::size_t i = 0; i < sorted.size(); ++i) ok = ok && sorted[i] == static_cast<int>(i) + 1;
  if (!ok) {
    std::string got;
    for (int d : dims_) got += (got.empty() ? "" : ", ") + std::to_string(d);
    throw std::invalid_argument(describe() + ": dims must be a permutation of 1.." + std::to_string(dims_.size()) +
                                ", got (" + got + ")");
  }
}

void Permute::check_rank(const Shape& s) const {
  if (s.rank() != static_cast<int>(dims_.size()) + 1)
    throw std::invalid_argument(describe() + ": expected inputs of rank " + std::to_string(dims_.size() + 1) +
                                " (batch + " + std::to_string(dims_.size()) + " permuted axes), got shape " +
                                s.to_string());
}

Shape Permute::compute_output_shape(const Shape& s) const {
  check_rank(s);
  Shape out{s[0]};
  for (int d : dims_) out.push_back(s[d]);
  return out;
}

Tensor Permute::call(const Tensor& x, bool) {
  check_rank(x.shape());
  std::vector<int> perm{0};
  perm.insert(perm.end(), dims_.begin(), dims_.end());
  return transpose(x, perm);
}

Config Permute::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["dims"] = dims_;
  return config;
}

std::shared_ptr<Permute> Permute::from_config(const Config& config) {
  ConfigReader r(config, "Permute");
  std::vector<int> dims;
  for (std::int64_t d : r.integers("dims")) dims.push_back(static_cast<int>(d));
  try {
    return r.finish(std::make_shared<Permute>(PermuteOptions{.dims = dims, .name = r.name(), .dtype = r.dtype()}));
  } catch (const std::invalid_argument& e) {
    r.fail("dims", e.what());
  }
}

}  // namespace tapeflow::layers
