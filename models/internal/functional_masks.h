// Keras masks through a Functional graph and a Sequential model (Keras 3's _keras_mask): which layers make, consume, pass
// on or drop the mask of their input, in one table.
//
// Facts:    Embedding(mask_zero) makes ids != 0. SimpleRNN / LSTM / GRU / Bidirectional consume it
//           (masked steps as their direct call with a mask) and pass it on when return_sequences.
//           GlobalAveragePooling1D consumes it (a masked mean) and makes none. MultiHeadAttention
//           combines its query mask [B, T, 1] with its value mask [B, 1, S] (and key mask, when
//           the key is another tensor than the value) into the attention mask, as
//           _compute_attention_mask, and passes the query's mask on. Dense, Dropout,
//           LayerNormalization, BatchNormalization, Activation and LeakyReLU pass it on
//           (supports_masking); Add, Multiply and Average pass on the AND of their inputs' masks
//           (Keras's Merge.compute_mask). Every other layer drops it (GlobalMaxPooling1D,
//           Conv1D, Flatten, Concatenate, ... as in Keras 3 but Concatenate, which tapeflow does
//           not merge masks for). The model's output mask is not applied to losses (Keras applies it).
//           Layers with several outputs: the mask goes with the first output only (Keras's
//           RNN.compute_mask; MultiHeadAttention's single mask zipped with its first output).
//           The table lives here, not as Layer::compute_mask, to keep layers/layer.h unchanged
//           this session; a layer family that gains masks adds a case.
// Errors:   the layers' own (a mask that does not fit names the layer and both shapes).
// Ref:      keras/src/layers/layer.py (compute_mask, supports_masking), keras/src/ops/function.py,
//           keras/src/layers/attention/multi_head_attention.py (_compute_attention_mask)
#pragma once

#include <vector>

#include "layers/layer.h"

namespace tapeflow::models::internal {

// A node's outputs and the Keras mask of the first (Keras gives later outputs, a recurrent layer's
// states or MultiHeadAttention's scores, none).
struct MaskedOutput {
  std::vector<Tensor> outputs;
  Tensor mask;  // undefined: none
};

// True when `layer` makes a mask from unmasked inputs (an Embedding with mask_zero).
bool makes_mask(const layers::Layer& layer);

// Calls `layer` on `inputs` whose Keras masks are `masks` (same length; undefined: none), as
// Keras's Functional call does; returns the outputs (as Layer::call_outputs) and the first's
// mask. `key_is_value`: a MultiHeadAttention node whose key is the value tensor (its key mask is
// then ignored, as Keras). `flags`: the node's call flags (its mask / attention_mask flags unset:
// those tensors come as `mask_arg` / `attention_mask_arg`). `mask_arg`: an explicit mask (Keras's
// mask=...) that a recurrent layer runs with instead of its input's; the output's mask still
// comes from the input's (Keras's compute_mask(inputs, previous_mask)). `attention_mask_arg`:
// MultiHeadAttention's attention_mask, ANDed with the one the masks make (_compute_attention_mask).
MaskedOutput call_with_masks(layers::Layer& layer, const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks,
                             bool key_is_value, const layers::CallFlags& flags, bool training,
                             const Tensor& mask_arg = Tensor(), const Tensor& attention_mask_arg = Tensor());

}  // namespace tapeflow::models::internal
