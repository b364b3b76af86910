"""Makes sequence_vectors.json: Keras 3 outputs and gradients for fixed weights and inputs of the
1-D convolution, pooling and RMS normalization layers (Conv1D valid / same / causal with strides
and dilation, MaxPooling1D, AveragePooling1D, RMSNormalization) and of masks through Functional models (Embedding(mask_zero) into LSTM / GRU /
Bidirectional, MultiHeadAttention, GlobalAveragePooling1D), in float64, read by
tests/layers/keras_vectors_test.cc. Cases as keras_case.py describes. Keras 3's float32 detours show
in float64 models: its tanh (result_type(float64, float) is float32) and ops.rms_normalization
(result_type(float64, "float32") is float32 in Keras's promotion) round to float32, so the RMS cases
carry ~1e-7 relative error and the convolutions use linear and relu activations (exact). The masked
GRU / Bidirectional(SimpleRNN) multi-output case runs under keras_case.float64_tanh (Keras's function
with an exact float64 tanh), so its weight gradients can be checked to 1e-12 (with the float32 tanh
they are 6.2e-7 off the exact ones).

  KERAS_BACKEND=jax build/venv/bin/python tests/layers/keras_vectors/make_sequence_vectors.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_case import Cases, arr, float64_tanh, jax, jnp, keras, np  # noqa: E402

CONFIG_KEYS = {"filters", "kernel_size", "strides", "padding", "dilation_rate", "activation", "use_bias",
               "pool_size", "axis", "epsilon"}
F = "float64"
C = Cases(20261203, CONFIG_KEYS)
rand, case = C.rand, C.case
cases = []

x = rand(2, 9, 3)
cases.append(case("conv1d_valid", keras.layers.Conv1D(4, 3, dtype=F), [x], [0]))
cases.append(case("conv1d_same_strides_2", keras.layers.Conv1D(4, 4, strides=2, padding="same", dtype=F), [x], [0]))
cases.append(case("conv1d_causal_dilation_2", keras.layers.Conv1D(2, 3, padding="causal", dilation_rate=2, dtype=F),
                  [x], [0]))
cases.append(case("conv1d_valid_dilation_3_no_bias",
                  keras.layers.Conv1D(5, 2, dilation_rate=3, use_bias=False, activation="relu", dtype=F), [x], [0]))
cases.append(case("conv1d_causal_strides_3", keras.layers.Conv1D(3, 2, strides=3, padding="causal", dtype=F),
                  [x], [0]))
y = rand(2, 7, 3)
cases.append(case("max_pooling_1d_valid", keras.layers.MaxPooling1D(3, strides=2, dtype=F), [y], [0]))
cases.append(case("max_pooling_1d_same", keras.layers.MaxPooling1D(2, padding="same", dtype=F), [y], [0]))
cases.append(case("average_pooling_1d_valid", keras.layers.AveragePooling1D(2, dtype=F), [y], [0]))
cases.append(case("average_pooling_1d_same", keras.layers.AveragePooling1D(3, strides=2, padding="same", dtype=F),
                  [y], [0]))
cases.append(case("rms_norm_last_axis", keras.layers.RMSNormalization(dtype=F), [rand(2, 3, 4, lo=-2, hi=3)], [0]))
cases.append(case("rms_norm_axes_1_2", keras.layers.RMSNormalization(axis=[1, 2], epsilon=1e-3, dtype=F),
                  [rand(2, 3, 4)], [0]))



# Masks through the Functional API: whole models' outputs for fixed weights (Keras order) and ids
# with padding zeros (one mid-sequence zero too), as the "functional" cases.
def functional_case(name, build):
    ids_in = keras.Input((6,), dtype="int32")
    model = keras.Model(ids_in, build(ids_in))
    weights = [C.rand(*w.shape) for w in model.weights]
    model.set_weights(weights)
    ids = np.array([[1, 4, 0, 10, 3, 0], [7, 7, 2, 0, 0, 0], [5, 9, 8, 6, 1, 2]], dtype=np.int32)
    out = np.asarray(model(ids))
    return {"name": name, "class_name": "Functional", "weights": [arr(w) for w in weights],
            "weight_names": [w.path for w in model.weights], "inputs": [arr(ids)], "output": arr(out)}


L = keras.layers
cases.append(functional_case("functional_embedding_lstm_mha_gap", lambda x: L.Dense(3, dtype=F)(
    L.GlobalAveragePooling1D(dtype=F)(L.MultiHeadAttention(2, 3, dtype=F)(*[L.LSTM(
        4, return_sequences=True, dtype=F)(L.Embedding(11, 5, mask_zero=True, dtype=F)(x))] * 2)))))
cases.append(functional_case("functional_embedding_bidirectional_gap", lambda x: L.Dense(2, dtype=F)(
    L.GlobalAveragePooling1D(dtype=F)(L.Bidirectional(L.GRU(3, return_sequences=True, dtype=F), dtype=F)(
        L.Embedding(11, 4, mask_zero=True, dtype=F)(x))))))
cases.append(functional_case("functional_embedding_lstm_last", lambda x: L.Dense(2, dtype=F)(
    L.LSTM(3, dtype=F)(L.Dropout(0.5, dtype=F)(L.Embedding(11, 4, mask_zero=True, dtype=F)(x))))))



# Layers with several outputs as Functional nodes (Keras returns a list): the outputs of whole models
# with several outputs, for fixed weights (Keras order), and d sum(output_k * w_k) / d (inputs, weights).
def multi_output_case(name, inputs, build, xs, exact_tanh=False):
    """exact_tanh: the whole case under keras_case.float64_tanh (Keras's tanh without its float32 detour)."""
    if exact_tanh:
        with float64_tanh():
            return multi_output_case(name, inputs, build, xs)
    model = keras.Model(inputs, build(*inputs))
    weights = [C.rand(*w.shape) for w in model.weights]
    model.set_weights(weights)
    outs = [np.asarray(o) for o in model([jnp.asarray(x) for x in xs])]
    w_outs = [C.rand(*o.shape) for o in outs]
    float_inputs = [i for i, x in enumerate(xs) if np.issubdtype(x.dtype, np.floating)]

    def loss(ws, fx):
        full = [jnp.asarray(x) for x in xs]
        for i, x in zip(float_inputs, fx):
            full[i] = x
        with keras.StatelessScope(state_mapping=list(zip(model.weights, ws))):
            ys = model(full)
        return sum(jnp.sum(y * w) for y, w in zip(ys, w_outs))

    gw, gx = jax.grad(loss, argnums=(0, 1))([jnp.asarray(w) for w in weights], [jnp.asarray(xs[i]) for i in float_inputs])
    return {"name": name, "class_name": "Functional", "weights": [arr(w) for w in weights],
            "weight_names": [w.path for w in model.weights], "inputs": [arr(x) for x in xs],
            "outputs": [arr(o) for o in outs], "w_outs": [arr(w) for w in w_outs],
            "grad_inputs": [arr(g) for g in gx], "grad_weights": [arr(g) for g in gw]}


def lstm_states(seq):
    # out, h, c = LSTM(return_state); h, c start a second LSTM; h also feeds a Dense; c is an output.
    out, h, c = L.LSTM(4, return_sequences=True, return_state=True, dtype=F)(seq)
    y = L.LSTM(4, dtype=F)(out, initial_state=[h, c])
    return [y, L.Dense(2, dtype=F)(h), c]


cases.append(multi_output_case("functional_lstm_return_state", [keras.Input((5, 3), dtype=F)], lstm_states,
                               [C.rand(2, 5, 3)]))


def masked_gru_bidirectional_states(ids):
    # Embedding(mask_zero) -> GRU(return_state): the mask goes with the output, not the state.
    e = L.Embedding(11, 4, mask_zero=True, dtype=F)(ids)
    seq, h = L.GRU(3, return_sequences=True, return_state=True, dtype=F)(e)
    b = L.Bidirectional(L.SimpleRNN(2, return_state=True, dtype=F), dtype=F)(seq)
    return [b[0], L.Dense(2, dtype=F)(h), b[1], b[2]]


cases.append(multi_output_case("functional_masked_gru_bidirectional_states", [keras.Input((6,), dtype="int32")],
                               masked_gru_bidirectional_states,
                               [np.array([[1, 4, 0, 10, 3, 0], [7, 7, 2, 0, 0, 0], [5, 9, 8, 6, 1, 2]], dtype=np.int32)],
                               exact_tanh=True))


def attention_scores(q, v):
    a, s = L.MultiHeadAttention(2, 3, dtype=F)(q, v, return_attention_scores=True)
    c, cs = L.MultiHeadAttention(1, 2, dtype=F)(a, a, use_causal_mask=True, return_attention_scores=True)
    return [L.Dense(2, dtype=F)(c), s, cs]


cases.append(multi_output_case("functional_attention_scores", [keras.Input((4, 3), dtype=F), keras.Input((5, 2), dtype=F)],
                               attention_scores, [C.rand(2, 4, 3), C.rand(2, 5, 2)]))

# RMSNormalization with an axis list not in order: Keras 3.15 sorts it (build: self.axis =
# sorted(self.axis)) and the scale's shape follows the sorted list.
cases.append(case("rms_norm_axes_2_1", keras.layers.RMSNormalization(axis=[2, 1], dtype=F), [rand(2, 3, 4)], [0]))
cases.append(case("rms_norm_axes_minus1_1", keras.layers.RMSNormalization(axis=[-1, 1], dtype=F), [rand(2, 3, 3)], [0]))

Cases.write(cases, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sequence_vectors.json"))
