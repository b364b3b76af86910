"""Makes attention_vectors.json: Keras 3 outputs and gradients for fixed weights and inputs of the
attention-wing layers (LayerNormalization, MultiHeadAttention, Embedding, GlobalAveragePooling1D,
Permute, the gelu activation), in float64, read by tests/layers/keras_vectors_test.cc.

  KERAS_BACKEND=jax build/venv/bin/python tests/layers/keras_vectors/make_attention_vectors.py

Each case: the layer's config, its weights in Keras order, the inputs, the output, and the
gradients of sum(output * w_out) (w_out a fixed random tensor) with respect to the float inputs and
to every weight (Keras order). Arrays are {"shape": [...], "data": [...]} (row-major).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_case import Cases, arr, jnp, keras, np  # noqa: E402

# MultiHeadAttention cases ask for the scores: Keras then takes its explicit path (query scaled,
# einsum, masked softmax), exact in float64. Otherwise it calls jax.nn.dot_product_attention, which
# rejects value_dim != key_dim and is off by ~2e-8 relative in float64.
CONFIG_KEYS = {"axis", "epsilon", "center", "scale", "num_heads", "key_dim", "value_dim", "dropout", "use_bias",
               "output_shape", "input_dim", "output_dim", "mask_zero", "dims", "keepdims"}
F = "float64"
C = Cases(20261202, CONFIG_KEYS)
rng, rand, case = C.rng, C.rand, C.case
cases = []

cases.append(case("layer_norm_last_axis", keras.layers.LayerNormalization(epsilon=1e-3, dtype=F),
                  [rand(2, 3, 4, lo=-2, hi=3)], [0]))
cases.append(case("layer_norm_axes_1_2", keras.layers.LayerNormalization(axis=[1, 2], epsilon=1e-6, dtype=F),
                  [rand(2, 3, 4)], [0]))
cases.append(case("layer_norm_axis_1_no_center", keras.layers.LayerNormalization(axis=1, center=False, dtype=F),
                  [rand(2, 3, 4)], [0]))

q, v, k = rand(2, 4, 6), rand(2, 5, 7), rand(2, 5, 3)
mask = rng.uniform(size=(2, 4, 5)) > 0.3
mask[1, 2, :] = False  # one query attends to nothing: Keras gives zeros
cases.append(case(
    "mha_cross_key_mask_scores",
    keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4, output_shape=5, dtype=F),
    [q, v, k, mask.astype(np.float64)], [0, 1, 2],
    call=lambda l, xs: l(xs[0], xs[1], key=xs[2], attention_mask=xs[3] > 0.5, return_attention_scores=True)[0],
    extra=lambda l, xs: {"scores": arr(l(jnp.asarray(xs[0]), jnp.asarray(xs[1]), key=jnp.asarray(xs[2]),
                                          attention_mask=jnp.asarray(xs[3]) > 0.5,
                                          return_attention_scores=True)[1])}))
x = rand(2, 4, 6)
cases.append(case("mha_self_causal", keras.layers.MultiHeadAttention(num_heads=3, key_dim=2, dtype=F),
                  [x], [0], call=lambda l, xs: l(xs[0], xs[0], use_causal_mask=True, return_attention_scores=True)[0]))
cases.append(case("mha_self_no_bias", keras.layers.MultiHeadAttention(num_heads=2, key_dim=5, use_bias=False,
                                                                    dtype=F),
                  [x], [0], call=lambda l, xs: l(xs[0], xs[0], return_attention_scores=True)[0]))

ids = np.array([[1, 0, 3], [9, 2, 0]], dtype=np.int64)
emb = keras.layers.Embedding(10, 4, mask_zero=True, dtype=F)
cases.append(case("embedding_mask_zero", emb, [ids.astype(np.float64)], [],
                  call=lambda l, xs: l(jnp.asarray(xs[0]).astype("int32")),
                  extra=lambda l, xs: {"mask": arr(np.asarray(l.compute_mask(jnp.asarray(xs[0]).astype("int32"))))}))

seq, smask = rand(2, 4, 3), np.array([[1, 1, 0, 1], [1, 0, 0, 0]], dtype=np.float64)
cases.append(case("global_average_pooling_1d_mask", keras.layers.GlobalAveragePooling1D(dtype=F), [seq, smask], [0],
                  call=lambda l, xs: l(xs[0], mask=xs[1] > 0.5)))
cases.append(case("global_max_pooling_1d", keras.layers.GlobalMaxPooling1D(dtype=F), [seq], [0]))
cases.append(case("permute_3_1_2", keras.layers.Permute((3, 1, 2), dtype=F), [rand(2, 3, 4, 5)], [0]))
cases.append(case("gelu_exact", keras.layers.Activation("gelu", dtype=F), [rand(3, 4, lo=-3, hi=3)], [0]))
def gelu_tanh(t):
    return keras.activations.gelu(t, approximate=True)


cases.append(case("gelu_tanh", keras.layers.Activation(gelu_tanh, dtype=F),
                  [rand(3, 4, lo=-3, hi=3)], [0]))

Cases.write(cases, os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_vectors.json"))
