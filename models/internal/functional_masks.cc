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
                             bool key_is_value, bool training) {
  const Tensor& x = inputs[0];
  const Tensor& mask = masks[0];
  if (auto* e = dynamic_cast<L::Embedding*>(&layer)) {
    Tensor y = layer(x, training);
    return {y, e->compute_mask(x)};
  }
  if (auto* rnn = dynamic_cast<L::RNN*>(&layer)) {
    const std::vector<Tensor> states(inputs.begin() + 1, inputs.end());
    Tensor y = rnn->call_with_state(x, states, mask.defined() ? std::optional<Tensor>(mask) : std::nullopt, training)[0];
    return {y, rnn->rnn_options().return_sequences ? mask : Tensor()};
  }
  if (auto* bi = dynamic_cast<L::Bidirectional*>(&layer)) {
    const std::vector<Tensor> states(inputs.begin() + 1, inputs.end());
    Tensor y = bi->call_with_state(x, states, mask.defined() ? std::optional<Tensor>(mask) : std::nullopt, training)[0];
    return {y, bi->forward_layer()->rnn_options().return_sequences ? mask : Tensor()};
  }
  if (auto* gap = dynamic_cast<L::GlobalAveragePooling1D*>(&layer)) return {gap->call(x, mask, training), Tensor()};
  if (auto* mha = dynamic_cast<L::MultiHeadAttention*>(&layer)) {
    const Tensor& value = inputs.size() > 1 ? inputs[1] : x;
    const Tensor vmask = inputs.size() > 1 ? masks[1] : mask;
    const Tensor kmask = inputs.size() > 2 && !key_is_value ? masks[2] : Tensor();
    L::AttentionCall call{.key = inputs.size() > 2 ? inputs[2] : Tensor()};
    if (mask.defined() || vmask.defined() || kmask.defined()) call.attention_mask = attention_mask(x, value, mask, vmask, kmask);
    return {mha->attend(x, value, call, training).first, mask};
  }
  Tensor y = inputs.size() == 1 ? layer(x, training) : layer(inputs, training);
  if (is_any<L::Dense, L::Dropout, L::LayerNormalization, L::BatchNormalization, L::Activation, L::LeakyReLU>(layer))
    return {y, mask};
  if (is_any<L::Add, L::Multiply, L::Average>(layer)) {
    Tensor all;
    for (const Tensor& m : masks)
      if (m.defined()) all = all.defined() ? logical_and(all, cast(m, DType::kBool)) : cast(m, DType::kBool);
    return {y, all};
  }
  return {y, Tensor()};
}

}  // namespace tapeflow::models::internal
