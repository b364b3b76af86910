"""Shared by the make_*_vectors.py scripts: a seeded case maker for Keras 3 layers in float64.

Each case: the layer's config (the keys in config_keys), its weights in Keras order, the inputs, the
output, and the gradients of sum(output * w_out) (w_out a fixed random tensor) with respect to the
float inputs and to every weight (Keras order). Arrays are {"shape": [...], "data": [...]} (row-major).
"""
import contextlib
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402


@contextlib.contextmanager
def float64_tanh():
    """Within it, Keras's tanh keeps float64 inputs in float64.

    Keras 3.15's JAX ops.tanh casts a float64 tensor to dtypes.result_type(float64, float), which is
    float32, so every tanh of a float64 RNN rounds to float32 (~6e-8 relative). Through a few
    recurrent steps that rounding reaches ~6e-7 in the gradients (functional_masked_gru_bidirectional_
    states: jax.grad of the float32 tanh is 6.2e-7 from jax.grad of the float64 one, which equals
    float64 central differences of Keras's model to 3e-10), above the 1e-7 the tests can then ask.
    Cases made in here are Keras's function in exact float64 and can be checked to ~1e-12.
    """
    import keras.src.backend.jax.numpy as knp  # noqa: PLC0415

    keras_tanh = knp.tanh

    def tanh(x):
        x = knp.convert_to_tensor(x)
        return jnp.tanh(x) if keras.backend.standardize_dtype(x.dtype) == "float64" else keras_tanh(x)

    knp.tanh = tanh
    try:
        yield
    finally:
        knp.tanh = keras_tanh


def arr(a):
    a = np.asarray(a)
    return {"shape": list(a.shape), "data": a.astype(np.float64).ravel().tolist()}


class Cases:
    def __init__(self, seed, config_keys):
        self.rng = np.random.default_rng(seed)
        self.config_keys = config_keys

    def rand(self, *shape, lo=-1.0, hi=1.0):
        return self.rng.uniform(lo, hi, size=shape)

    def case(self, name, layer, inputs, float_inputs, call=None, extra=None):
        """inputs: list of numpy arrays passed positionally (or through `call`)."""
        call = call or (lambda l, xs: l(*xs))
        built = call(layer, [jnp.asarray(x) for x in inputs])  # builds
        # Scales (gamma, RMSNormalization's scale) near 1, other weights in [-1, 1].
        weights = [1 + 0.3 * self.rand(*w.shape) if w.path.split("/")[-1] in ("gamma", "scale") else self.rand(*w.shape)
                   for w in layer.weights]
        layer.set_weights(weights)
        out = np.asarray(call(layer, [jnp.asarray(x) for x in inputs]))
        w_out = self.rand(*out.shape)

        def loss(ws, xs):
            full = [jnp.asarray(x) for x in inputs]
            for i, x in zip(float_inputs, xs):
                full[i] = x
            with keras.StatelessScope(state_mapping=list(zip(layer.weights, ws))):
                y = call(layer, full)
            return jnp.sum(y * w_out)

        ws0 = [jnp.asarray(w) for w in weights]
        xs0 = [jnp.asarray(inputs[i]) for i in float_inputs]
        gw, gx = jax.grad(loss, argnums=(0, 1))(ws0, xs0)
        entry = {
            "name": name,
            "class_name": layer.__class__.__name__,
            "config": {k: v for k, v in layer.get_config().items() if k in self.config_keys},
            "weights": [arr(w) for w in weights],
            "weight_names": [w.path for w in layer.weights],
            "inputs": [arr(x) for x in inputs],
            "float_inputs": float_inputs,
            "output": arr(out),
            "w_out": arr(w_out),
            "grad_inputs": [arr(g) for g in gx],
            "grad_weights": [arr(g) for g in gw],
        }
        if extra:
            entry.update(extra(layer, inputs))
        return entry

    @staticmethod
    def write(cases, path):
        out = {"keras_version": keras.__version__, "backend": keras.backend.backend(), "cases": cases}
        with open(path, "w") as f:
            json.dump(out, f, indent=0)
        print(f"wrote {path}: {len(cases)} cases (Keras {keras.__version__}, {keras.backend.backend()})")
