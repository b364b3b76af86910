"""Makes rnn_vectors.json: SimpleRNN / LSTM / GRU / Bidirectional outputs and gradients computed by Keras 3
itself (JAX backend, float64) for fixed weights and inputs, the reference of tests/layers/rnn/rnn_keras_test.cc.

Run from the repository root with the project's test venv (scripts/setup.sh makes it):
    KERAS_BACKEND=jax build/venv/bin/python tests/layers/rnn/make_rnn_vectors.py
Each case: a layer config (the Keras config fields tapeflow reads), inputs, an optional mask and initial
states, weights (Keras's order and layout), coefficient tensors R (one per output: loss = Σ sum(out_k · R_k)),
the outputs (output, then the final states with return_state) and d loss / d (inputs, weights, initial states).
"""
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402

keras.config.set_floatx("float64")
# Keras 3's JAX tanh casts to dtypes.result_type(x.dtype, float), which is float32 even for float64 x
# (so float64 RNNs compute their tanh in float32): the references use jnp.tanh on the float64 values.
import keras.src.backend.jax.numpy as _knp  # noqa: E402

_knp.tanh = lambda x: jnp.tanh(_knp.convert_to_tensor(x))
import numpy as np  # noqa: E402

rng = np.random.default_rng(36)


def flat(a):
    a = np.asarray(a, dtype=np.float64)
    return {"shape": list(a.shape), "values": a.reshape(-1).tolist()}


def make_layer(cls, cfg):
    kw = dict(cfg)
    if cls == "Bidirectional":
        inner = kw.pop("layer")
        layer = getattr(keras.layers, inner["class_name"])(**inner["config"], dtype="float64")
        return keras.layers.Bidirectional(layer, **kw, dtype="float64")
    return getattr(keras.layers, cls)(**kw, dtype="float64")


def case(name, cls, cfg, batch=2, steps=4, features=3, mask=None, initial_state=False, num_states=1):
    layer = make_layer(cls, cfg)
    x = rng.uniform(-1, 1, (batch, steps, features))
    layer.build((batch, steps, features))
    weights = [rng.uniform(-0.8, 0.8, tuple(w.shape)) for w in layer.trainable_variables]
    units = (cfg["layer"]["config"] if cls == "Bidirectional" else cfg)["units"]
    states0 = [rng.uniform(-0.5, 0.5, (batch, units)) for _ in range(num_states)] if initial_state else []
    m = None if mask is None else np.asarray(mask, dtype=bool)

    def run(xv, wv, sv):
        kwargs = {}
        if m is not None:
            kwargs["mask"] = jnp.asarray(m)
        if sv:
            kwargs["initial_state"] = list(sv)
        out, _ = layer.stateless_call(list(wv), [v.value for v in layer.non_trainable_variables], xv, **kwargs)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    outs = run(jnp.asarray(x), [jnp.asarray(w) for w in weights], [jnp.asarray(s) for s in states0])
    assert all(o.dtype == jnp.float64 for o in outs), [o.dtype for o in outs]
    coeffs = [rng.uniform(-1, 1, o.shape) for o in outs]

    def loss(xv, wv, sv):
        return sum(jnp.sum(o * c) for o, c in zip(run(xv, wv, sv), coeffs))

    gx, gw, gs = jax.grad(loss, argnums=(0, 1, 2))(
        jnp.asarray(x), [jnp.asarray(w) for w in weights], [jnp.asarray(s) for s in states0])
    return {
        "name": name,
        "class_name": cls,
        "config": cfg,
        "input": flat(x),
        "mask": None if m is None else {"shape": list(m.shape), "values": m.reshape(-1).astype(int).tolist()},
        "initial_state": [flat(s) for s in states0],
        "weights": [flat(w) for w in weights],
        "coefficients": [flat(c) for c in coeffs],
        "outputs": [flat(o) for o in outs],
        "grad_input": flat(gx),
        "grad_weights": [flat(g) for g in gw],
        "grad_initial_state": [flat(g) for g in gs],
    }


MASK = [[1, 1, 0, 1], [1, 0, 0, 0]]
cases = [
    case("lstm_sequences", "LSTM", {"units": 3, "return_sequences": True}),
    case("lstm_last", "LSTM", {"units": 3}),
    case("lstm_state_backwards_mask", "LSTM", {"units": 3, "return_state": True, "go_backwards": True}, mask=MASK),
    case("lstm_hard_sigmoid_initial_state_no_bias", "LSTM",
         {"units": 2, "recurrent_activation": "hard_sigmoid", "use_bias": False, "return_sequences": True,
          "return_state": True}, initial_state=True, num_states=2),
    case("lstm_sequences_mask", "LSTM", {"units": 3, "return_sequences": True}, mask=MASK),
    case("lstm_sequences_mask_zero_output", "LSTM", {"units": 3, "return_sequences": True,
                                                     "zero_output_for_mask": True}, mask=MASK),
    case("gru_reset_after", "GRU", {"units": 3, "return_sequences": True}),
    case("gru_reset_before", "GRU", {"units": 3, "reset_after": False, "return_sequences": True}),
    case("gru_state_backwards_mask", "GRU", {"units": 3, "return_state": True, "go_backwards": True},
         mask=MASK, initial_state=True),
    case("gru_reset_before_state_mask", "GRU", {"units": 2, "reset_after": False, "return_state": True}, mask=MASK),
    case("simple_rnn_sequences", "SimpleRNN", {"units": 3, "return_sequences": True}),
    case("simple_rnn_relu_backwards_state_mask", "SimpleRNN",
         {"units": 3, "activation": "relu", "go_backwards": True, "return_state": True}, mask=MASK, initial_state=True),
]
for mode in ["concat", "sum", "ave", "mul"]:
    cases.append(case(f"bidirectional_lstm_{mode}", "Bidirectional",
                      {"layer": {"class_name": "LSTM", "config": {"units": 3, "return_sequences": True}},
                       "merge_mode": mode}, mask=MASK if mode == "concat" else None))
cases.append(case("bidirectional_gru_last_state", "Bidirectional",
                  {"layer": {"class_name": "GRU", "config": {"units": 2, "return_state": True}},
                   "merge_mode": "concat"}, mask=MASK))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn_vectors.json")
with open(out, "w") as f:
    json.dump({"keras_version": keras.__version__, "backend": keras.backend.backend(), "cases": cases}, f)
print(f"wrote {len(cases)} cases to {out} (Keras {keras.__version__})")
