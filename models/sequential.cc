#include "models/sequential.h"

#include <stdexcept>

#include "models/internal/functional_masks.h"
#include "models/internal/fusion.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::models {

Sequential::Sequential(std::vector<std::shared_ptr<layers::Layer>> layers, std::string name,
                       std::optional<DType> dtype)
    : Model(std::move(name), "Sequential", dtype) {
  for (auto& l : layers) add(std::move(l));
}

void Sequential::add(std::shared_ptr<layers::Layer> layer) {
  if (!layer) throw std::invalid_argument(describe() + ": add() got a null layer");
  if (!dtype_is_set() && layers().empty() && layer->dtype_is_set()) {  // the first layer's compute dtype
    set_dtype(layer->dtype());
    set_autocast(true);
  }
  track_layer(std::move(layer));
}

Tensor Sequential::call(const Tensor& inputs, bool training) {
  if (layers().empty()) throw std::logic_error(describe() + ": call() on a Sequential model with no layers");
  const auto& ls = layers();
  const std::vector<internal::FusedCall> plan = internal::plan_chain_fusion(ls);  // models/internal/fusion.h
  Tensor x = inputs;
  Tensor mask;  // Keras's mask, as in Functional (models/internal/functional_masks.h); undefined: none
  for (std::size_t i = 0; i < ls.size(); ++i) {
    if (plan[i].run != internal::FusedRun::kAsWritten) {
      x = internal::run_planned(plan[i], *ls[i], x, training);
      mask = Tensor();  // the fused layers drop masks
    } else if (mask.defined() || internal::makes_mask(*ls[i])) {
      internal::MaskedOutput r = internal::call_with_masks(*ls[i], {x}, {mask}, false, {}, training);
      x = r.outputs[0];
      mask = r.mask;
    } else {
      x = (*ls[i])(x, training);
    }
  }
  return x;
}

void Sequential::build(const Shape& input_shape) {
  Model::build(input_shape);
  if (input_shape.rank() == 0 || layers().empty()) return;
  // One zero example through every layer in inference mode builds the weights.
  Shape one = input_shape;
  one[0] = 1;
  RecordingPause pause;
  Tensor x = zeros(one, dtype());
  for (const auto& l : layers()) x = (*l)(x, /*training=*/false);
}

Shape Sequential::compute_output_shape(const Shape& input_shape) const {
  Shape s = input_shape;
  for (const auto& l : layers()) s = l->compute_output_shape(s);
  return s;
}

std::vector<std::string> Sequential::summary_output_shapes() const {
  std::vector<std::string> out;
  std::optional<Shape> s = build_input_shape();
  for (const auto& l : layers()) {
    if (s) s = l->compute_output_shape(*s);
    out.push_back(s ? batch_shape_string(*s) : "?");
  }
  return out;
}

}  // namespace tapeflow::models
