#include "models/internal/functional_masks.h"

#include "layers/activation.h"
#include "layers/attention/multi_head_attention.h"
#include "layers/batch_normalization.h"
#include "layers/core/embedding.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/merge.h"
#include "layers/normalization/layer_normalization.h"
#include "layers/pooling/global_pooling1d.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/rnn.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::models::internal {

namespace L = layers;

namespace {

template <class... Ts>
bool is_any(const L::Layer& layer) {
  return (... || (dynamic_cast<const Ts*>(&layer) != nullptr));
}

// A mask as float keep-weights [B, n] (bool or numbers: nonzero = keep).
Tensor as_float(const Tensor& mask, DType dtype) {
  return mask.dtype() == DType::kBool ? cast(mask, dtype) : cast(not_equal(mask, scalar_like(mask, 0.0)), dtype);
}

// Keras's _compute_attention_mask from the query, value and key masks: [B, T, S] (1 = attend).
Tensor attention_mask(const Tensor& query, const Tensor& value, const Tensor& qmask, const Tensor& vmask,
                      const Tensor& kmask) {
  const std::int64_t b = query.shape()[0], t = query.shape()[1], s = value.shape()[1];
  Tensor m = ones({b, t, s}, DType::kFloat32);
  if (qmask.defined()) m = m * expand_dims(as_float(qmask, DType::kFloat32), -1);
  if (vmask.defined()) m = m * expand_dims(as_float(vmask, DType::kFloat32), 1);
  if (kmask.defined()) m = m * expand_dims(as_float(kmask, DType::kFloat32), 1);
  return m;
}

}  // namespace

bool makes_mask(const L::Layer& layer) {
  const auto* e = dynamic_cast<const L::Embedding*>(&layer);
  return e && e->options().mask_zero;
}

MaskedOutput call_with_masks(L::Layer& layer, const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks,
                             bool key_is_value, const L::CallFlags& flags, bool training, const Tensor& mask_arg,
                             const Tensor& attention_mask_arg) {
  const Tensor& x = inputs[0];
  const Tensor& mask = masks[0];
  if (auto* e = dynamic_cast<L::Embedding*>(&layer)) {
    Tensor y = layer(x, training);
    return {{y}, e->compute_mask(x)};
  }
  // A recurrent layer's outputs: {output} or, with return_state, {output, states...}.
  auto recurrent = [&](auto& l, const L::RNNOptions& o) {
    const std::vector<Tensor> states(inputs.begin() + 1, inputs.end());
    const Tensor& run_mask = mask_arg.defined() ? mask_arg : mask;
    std::vector<Tensor> ys =
        l.call_with_state(x, states, run_mask.defined() ? std::optional<Tensor>(run_mask) : std::nullopt, training);
    if (!o.return_state) ys.resize(1);
    return MaskedOutput{ys, o.return_sequences ? mask : Tensor()};
  };
  if (auto* rnn = dynamic_cast<L::RNN*>(&layer)) return recurrent(*rnn, rnn->rnn_options());
  if (auto* bi = dynamic_cast<L::Bidirectional*>(&layer)) return recurrent(*bi, bi->forward_layer()->rnn_options());
  if (auto* gap = dynamic_cast<L::GlobalAveragePooling1D*>(&layer)) return {{gap->call(x, mask, training)}, Tensor()};
  if (auto* mha = dynamic_cast<L::MultiHeadAttention*>(&layer)) {
    const Tensor& value = inputs.size() > 1 ? inputs[1] : x;
    const Tensor vmask = inputs.size() > 1 ? masks[1] : mask;
    const Tensor kmask = inputs.size() > 2 && !key_is_value ? masks[2] : Tensor();
    L::AttentionCall call{.key = inputs.size() > 2 ? inputs[2] : Tensor(), .use_causal_mask = flags.use_causal_mask};
    if (mask.defined() || vmask.defined() || kmask.defined()) call.attention_mask = attention_mask(x, value, mask, vmask, kmask);
    if (attention_mask_arg.defined()) {
      const Tensor given = attention_mask_arg.dtype() == DType::kBool
                               ? attention_mask_arg
                               : greater(attention_mask_arg, scalar_like(attention_mask_arg, 0.5));
      call.attention_mask = call.attention_mask.defined()
                                ? logical_and(given, greater(call.attention_mask, scalar_like(call.attention_mask, 0.5)))
                                : given;
    }
    auto [y, scores] = mha->attend(x, value, call, training);
    if (flags.return_attention_scores) return {{y, scores}, mask};
    return {{y}, mask};
  }
  if (mask_arg.defined()) throw std::invalid_argument(layer.class_name() + " '" + layer.name() + "': does not take the call argument mask");
  if (attention_mask_arg.defined())
    throw std::invalid_argument(layer.class_name() + " '" + layer.name() + "': does not take the call argument attention_mask");
  std::vector<Tensor> ys = layer.call_outputs(inputs, flags, training);
  if (is_any<L::Dense, L::Dropout, L::LayerNormalization, L::BatchNormalization, L::Activation, L::LeakyReLU>(layer))
    return {ys, mask};
  if (is_any<L::Add, L::Multiply, L::Average>(layer)) {
    Tensor all;
    for (const Tensor& m : masks)
      if (m.defined()) all = all.defined() ? logical_and(all, cast(m, DType::kBool)) : cast(m, DType::kBool);
    return {ys, all};
  }
  return {ys, Tensor()};
}

}  // namespace tapeflow::models::internal
