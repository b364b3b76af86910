#include "tape/autodiff/custom_gradient.h"

#include <memory>
#include <stdexcept>

#include "tape/runtime/batching.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {

std::vector<Tensor> call_with_custom_gradient(const CustomForwardFn& forward, const std::vector<Tensor>& inputs) {
  std::pair<std::vector<Tensor>, CustomGradFn> result;
  {
    RecordingPause pause;  // the custom gradient replaces the inner ops' gradients
    result = forward(inputs);
  }
  if (!result.second) throw std::invalid_argument("custom_gradient: the forward function returned no gradient function");
  std::vector<Tensor> outputs;
  for (const Tensor& y : result.first) outputs.push_back(y.alias());  // fresh ids: outputs of this call
  if (!is_recording()) return outputs;
  auto grad_fn = std::make_shared<const GradientFn>(
      [fn = std::move(result.second)](const GradContext& ctx, std::span<const Tensor> upstream) {
        std::vector<Tensor> dx = fn(std::vector<Tensor>(upstream.begin(), upstream.end()));
        if (static_cast<int>(dx.size()) != ctx.num_inputs())
          throw std::invalid_argument("custom_gradient: gradient function returned " + std::to_string(dx.size()) +
                                      " gradients for " + std::to_string(ctx.num_inputs()) + " inputs");
        TensorList out;
        for (std::size_t i = 0; i < dx.size(); ++i) {
          // Per-example shapes: in a vectorized jacobian the gradients carry a leading K (batching.h).
          if (dx[i].defined() && logical_shape(dx[i]) != ctx.input_shape(static_cast<int>(i)))
            throw std::invalid_argument("custom_gradient: gradient " + std::to_string(i) + " has shape " +
                                        logical_shape(dx[i]).to_string() + ", input has shape " +
                                        ctx.input_shape(static_cast<int>(i)).to_string());
          out.push_back(dx[i]);
        }
        return out;
      });
  static const OpDef& op = op_def("CustomGradient");
  record_custom(op, inputs, outputs, Attrs{}, std::move(grad_fn));
  return outputs;
}

std::function<std::vector<Tensor>(const std::vector<Tensor>&)> custom_gradient(CustomForwardFn forward) {
  return [forward = std::move(forward)](const std::vector<Tensor>& inputs) {
    return call_with_custom_gradient(forward, inputs);
  };
}

std::function<Tensor(const Tensor&)> custom_gradient(
    std::function<std::pair<Tensor, std::function<Tensor(const Tensor&)>>(const Tensor&)> forward) {
  CustomForwardFn general = [forward = std::move(forward)](const std::vector<Tensor>& in) {
    auto [y, grad] = forward(in[0]);
    CustomGradFn g = [grad](const std::vector<Tensor>& dy) { return std::vector<Tensor>{grad(dy[0])}; };
    return std::make_pair(std::vector<Tensor>{y}, g);
  };
  return [general](const Tensor& x) { return call_with_custom_gradient(general, {x})[0]; };
}

}  // namespace tapeflow
