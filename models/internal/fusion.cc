#include "models/internal/fusion.h"

#include <map>
#include <string>

#include "layers/conv2d.h"
#include "layers/pooling2d.h"
#include "tape/ops/conv_ops.h"

namespace tapeflow::models::internal {
namespace {

// "valid" -> "VALID", "same" -> "SAME" (the ops' spelling of the layers' padding).
const char* op_padding(const std::string& p) { return p == "same" ? "SAME" : "VALID"; }

// A Conv2D with a bias and an activation fused_conv2d applies itself.
const layers::Conv2D* fusable_conv(const layers::Layer& layer) {
  const auto* conv = dynamic_cast<const layers::Conv2D*>(&layer);
  if (!conv || !conv->options().use_bias) return nullptr;
  const std::string& a = conv->options().activation;
  return a.empty() || a == "linear" || a == "relu" ? conv : nullptr;
}

// `conv` (a ConvBase) when its activation is relu and `pool` is a MaxPooling2D of its dtype: the
// pair may run as conv -> pool -> relu.
layers::ConvBase* relu_commutes_with(layers::Layer& conv_layer, const layers::Layer& pool) {
  auto* conv = dynamic_cast<layers::ConvBase*>(&conv_layer);
  if (!conv || conv->options().activation != "relu" || !dynamic_cast<const layers::MaxPooling2D*>(&pool) ||
      pool.dtype() != conv->dtype())
    return nullptr;
  return conv;
}

}  // namespace

std::vector<FusedCall> plan_fusion(const std::vector<LayerCall>& calls, const std::vector<std::size_t>& outputs) {
  std::vector<FusedCall> plan(calls.size());
  std::map<std::size_t, int> uses;
  std::map<std::size_t, std::size_t> producer;  // slot -> index of the call writing it
  for (std::size_t i = 0; i < calls.size(); ++i) {
    for (std::size_t k : calls[i].inputs) ++uses[k];
    producer[calls[i].output] = i;
  }
  for (std::size_t k : outputs) ++uses[k];
  // 1. conv -> max pool, where the conv's output has no other reader.
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const LayerCall& pool = calls[i];
    if (pool.inputs.size() != 1 || uses[pool.inputs[0]] != 1) continue;
    const auto p = producer.find(pool.inputs[0]);
    if (p == producer.end() || calls[p->second].inputs.size() != 1) continue;
    if (layers::ConvBase* conv = relu_commutes_with(*calls[p->second].layer, *pool.layer)) {
      plan[p->second] = {FusedRun::kPassOn, conv};
      plan[i] = {FusedRun::kConvMaxPool, conv};
    }
  }
  // 2. conv + bias + activation.
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (plan[i].run == FusedRun::kAsWritten && calls[i].inputs.size() == 1 && fusable_conv(*calls[i].layer))
      plan[i].run = FusedRun::kConvBias;
  return plan;
}

std::vector<FusedCall> plan_chain_fusion(const std::vector<std::shared_ptr<layers::Layer>>& chain) {
  std::vector<LayerCall> calls;
  for (std::size_t i = 0; i < chain.size(); ++i) calls.push_back({chain[i].get(), {i}, i + 1});
  return plan_fusion(calls, {chain.size()});
}

Tensor run_planned(const FusedCall& plan, layers::Layer& layer, const Tensor& x, bool training) {
  switch (plan.run) {
    case FusedRun::kAsWritten:
      return layer(x, training);
    case FusedRun::kPassOn:
      return x;
    case FusedRun::kConvBias: {
      auto& conv = dynamic_cast<layers::Conv2D&>(layer);
      const Tensor in = conv.begin_call(x);
      conv.compute_output_shape(in.shape());  // rank, channels and size errors name the layer
      const layers::Conv2DOptions& o = conv.options();
      return fused_conv2d(in, conv.kernel().read(), conv.bias().read(), o.strides, op_padding(o.padding),
                          o.dilation_rate, o.activation);
    }
    case FusedRun::kConvMaxPool: {
      layers::ConvBase& conv = *plan.conv;
      const auto& pool = dynamic_cast<const layers::MaxPooling2D&>(layer);
      const Tensor in = conv.begin_call(x);
      pool.compute_output_shape(conv.compute_output_shape(in.shape()));  // errors name the layer they concern
      const layers::Conv2DOptions& o = conv.options();
      if (dynamic_cast<const layers::Conv2D*>(&conv) && o.use_bias)
        return fused_conv2d_max_pool2d(in, conv.kernel().read(), conv.bias().read(), o.strides, op_padding(o.padding),
                                       o.dilation_rate, pool.pool_size(), pool.strides(), op_padding(pool.padding()),
                                       "relu")
            .first;
      return conv.activate(layer(conv.convolution(in), training));
    }
  }
  return layer(x, training);  // not reached: every FusedRun is handled above
}

}  // namespace tapeflow::models::internal
