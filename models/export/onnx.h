// ONNX export: export_onnx writes a model as an ONNX ModelProto that ONNX Runtime runs, with the
// outputs of predict() (inference mode).
//
// Layout:   ir_version 8; one opset import ("" domain) at options.opset (13..17); producer
//           "tapeflow" 0.1.0; graph named after the model. Graph inputs are the model's Inputs
//           (Sequential: its InputLayer, named after it) as float32 tensors [batch, ...] whose first
//           dimension is the symbolic "batch" (any batch size runs); outputs are named after the
//           layers that produce them, [batch, ...] in Keras's layout. Weights are initializers
//           named "<layer>/<weight>" (ONNX layouts, see below), stored as raw little-endian float32.
// Layout of images: tapeflow's images are NHWC (channels_last); ONNX's Conv, ConvTranspose,
//           MaxPool, AveragePool, GlobalAveragePool/GlobalMaxPool, BatchNormalization, Resize and
//           Pad run on NCHW here. The export transposes *tensors at the edges* of each run of such
//           layers: a Transpose(perm 0,3,1,2) before the first one, and a Transpose(perm 0,2,3,1)
//           back where a layer needs Keras's layout (Flatten — Keras flattens in NHWC order, so the
//           Dense after it keeps its kernel rows as trained —, Reshape, Dense, a model output).
//           Layers between them that do not care (activations, Dropout, Add/Multiply/Average,
//           Concatenate with its axis renumbered, BatchNormalization on the channels) stay in NCHW,
//           so a convnet has one Transpose at each end. Kernels are transposed once, at export:
//           Conv2D [kh, kw, C, F] -> W [F, C, kh, kw]; Conv2DTranspose [kh, kw, F, C] -> W [C, F,
//           kh, kw]; Dense keeps [in, units] (MatMul).
// Mapping:  InputLayer -> graph input; Dense -> MatMul (+ Add bias) (+ activation);
//           BatchNormalization -> BatchNormalization (feature axis = channels), else Mul + Add by
//           the folded scale gamma / sqrt(moving_variance + epsilon) and shift; Dropout -> Identity;
//           Activation / activation arguments: relu Relu, sigmoid Sigmoid, tanh Tanh, softmax
//           Softmax (axis -1 of Keras's layout), elu Elu (alpha 1), leaky_relu LeakyRelu (0.2),
//           softplus Softplus, linear nothing; LeakyReLU -> LeakyRelu(alpha);
//           Conv2D -> Conv, Conv2DTranspose -> ConvTranspose (explicit pads and output_padding
//           reproducing TF's "same"/"valid" sizes, dilations); MaxPooling2D -> MaxPool,
//           AveragePooling2D -> AveragePool (count_include_pad 0: TF divides "same" windows by
//           their unpadded size), GlobalAveragePooling2D / GlobalMaxPooling2D ->
//           GlobalAveragePool / GlobalMaxPool (+ Flatten without keepdims); UpSampling2D -> Resize
//           (nearest, asymmetric, floor); ZeroPadding2D -> Pad; Add -> Sum, Multiply -> Mul (a chain),
//           Average -> Mean, Concatenate -> Concat; Flatten -> Flatten(axis 1); Reshape -> Reshape
//           [0, target...] (the batch copied, -1 resolved at export); nested Sequential /
//           Functional models are inlined (node names "<model>/<layer>..."); activation
//           hard_sigmoid (Keras 3's relu6(x + 3) / 6) -> HardSigmoid(alpha 1/6, beta 0.5).
// Recurrent: SimpleRNN -> RNN, LSTM -> LSTM, GRU -> GRU, run time-major (a Transpose of the
//           [batch, T, D] input to [T, batch, D]), direction "reverse" for go_backwards (whose
//           return_sequences output is then reversed in time: Keras keeps the processing order),
//           activations sigmoid / tanh / relu. Weights: Keras's kernel [D, G·u] and
//           recurrent_kernel [u, G·u] (G gate blocks of u columns) -> ONNX's W [1, G·u, D] and
//           R [1, G·u, u] (gate blocks of u rows), bias -> B [1, 2·G·u] = (input bias, recurrent
//           bias). Gate order: Keras's LSTM blocks are i, f, c, o and ONNX's i, o, f, c, so ONNX
//           block k is Keras block {0, 3, 1, 2}[k] (the recurrent bias is zero); GRU is z, r, h in
//           both, reset_after = linear_before_reset 1 with bias rows 0 / 1 as the input / recurrent
//           biases (without reset_after the one bias is the input bias, linear_before_reset 0).
//           Bidirectional -> one such op of direction "bidirectional" (W, R, B stacked forward,
//           backward), its two outputs taken apart with Gather and merged as merge_mode says
//           (concat Concat, sum Add, mul Mul, ave Add and Mul 0.5).
// Sequences: Embedding -> Gather(table, ids) (float32 ids Cast to int64 first, truncating as
//           tapeflow's cast; an int32 / int64 Input is a graph input of that type); PositionEmbedding
//           -> Expand of its first `steps` rows to Shape(x); LayerNormalization -> LayerNormalization
//           (opset 17, axes trailing; else, or at opset 13..16, composed: ReduceMean, Sub, Mul,
//           Sqrt, Reciprocal, biased variance; gamma / beta shaped to broadcast); RMSNormalization
//           composed (x · Reciprocal(Sqrt(ReduceMean(x², axes) + epsilon)) · scale); activation gelu
//           (exact, Keras's approximate=False, the only form tapeflow's activations have) composed
//           through Erf: 0.5 x (1 + erf(x / √2)) (ONNX's Gelu is opset 20); MultiHeadAttention ->
//           per projection MatMul by the kernel [d, h, size] read as [d, h·size] (+ bias), Reshape
//           [0, 0, h, size], Transpose to [B, h, T, size] (the key to [B, h, size, S]); the query
//           Mul 1/√key_dim; MatMul scores [B, h, T, S]; Softmax(axis -1); MatMul by the values;
//           Transpose and Reshape to [B, T, h·value_dim]; MatMul by the output kernel [h·vd, out]
//           (+ bias). Functional nodes carry no attention_mask / use_causal_mask (tapeflow's
//           Functional refuses them), so no mask is emitted. Conv1D -> Conv on NCW (the same
//           channels-first edges as images: a Transpose(perm 0,2,1) before the first of a run of
//           Conv1D / MaxPooling1D / AveragePooling1D, BatchNormalization, activations, Add,
//           Concatenate, Global*Pooling1D staying NCW, and one back where a layer needs Keras's
//           layout); its kernel [k, C, F] -> W [F, C, k]; "same" pads as TF, "causal" (k - 1)·d
//           on the left. MaxPooling1D / AveragePooling1D -> MaxPool / AveragePool 1-D (TF pads,
//           count_include_pad 0); GlobalAveragePooling1D / GlobalMaxPooling1D -> ReduceMean /
//           ReduceMax over the steps (keepdims as configured); Permute -> Transpose [0, dims...].
// Masks:    a Keras mask (Embedding mask_zero) that reaches a layer which uses it (SimpleRNN,
//           LSTM, GRU, Bidirectional, GlobalAveragePooling1D, MultiHeadAttention; through the
//           layers that pass masks on, models/internal/functional_masks.h) is refused naming that
//           layer and the Embedding; a mask dropped before any such layer changes nothing and is
//           exported. Not mapped (yet): masks, return_state (several outputs), hard_sigmoid
//           inside a recurrent layer, and custom layer classes.
// Errors:   std::invalid_argument "export_onnx: <file>: layer '<name>' (<class>) cannot be exported
//           to ONNX: ..." for a layer class without a mapping (or options it lacks, such as a
//           BatchNormalization or LayerNormalization over the batch axis, or a Keras mask it
//           reads), for a model that is not built (no input shape), for a non-float32 weight,
//           and for an opset outside 13..17; std::logic_error (from model_to_config) for a subclassed model without a config; std::runtime_error
//           naming the file if onnx::checker rejects the graph (a bug: please report it) or if
//           the file cannot be written. The graph is checked by onnx::checker::check_model before
//           anything is written, and the file is written to a temporary name and renamed, so
//           `path` is never left half-written and an error leaves no file behind.
// Ref:      onnx/docs/Operators.md (opset 17), onnx/docs/IR.md (IR version 8), Keras's
//           model.export(format="onnx") (keras/src/export/onnx.py)
#pragma once

#include <string>

#include "models/model.h"

namespace tapeflow::models {

// Options of export_onnx.
struct OnnxExportOptions {
  int opset = 17;  // the default ("") domain's opset version: 13..17 (ONNX 1.12 knows up to 17)
};

// The ir_version field of every file export_onnx writes (ONNX IR version 8).
inline constexpr int kOnnxIrVersion = 8;

// Writes `model` (built, so its input shapes are known) as an ONNX model file at `path`, mapped and
// laid out as above; ONNX Runtime's outputs match predict()'s.
// Errors: as listed above (std::invalid_argument naming the file and the layer for what cannot be
// exported, std::logic_error for a model without a config, std::runtime_error for I/O).
void export_onnx(const Model& model, const std::string& path, const OnnxExportOptions& options = {});

}  // namespace tapeflow::models
