"""Makes the tf_keras (Keras 2, TensorFlow 2.21) HDF5 fixtures in tests/interop/fixtures/tf_keras/.

TensorFlow is NOT a CI dependency: CI only reads the committed fixtures (tests/models_io/
tf_keras_files_test.cc loads them in tapeflow, predicts the same as tf_keras to 1e-5 and trains on from
the loaded optimizer state). Run this script by hand, only to remake them, in a venv of its own:
    python3 -m venv /work/tfkeras-venv
    /work/tfkeras-venv/bin/pip install "tensorflow-cpu==2.21.0" "tf_keras==2.21.0" h5py
    /work/tfkeras-venv/bin/python tests/interop/make_tf_keras_files.py tests/interop/fixtures/tf_keras

For each KIND (mlp: Dense + BatchNormalization + Dropout, Adam; cnn: Conv2D + MaxPooling2D + Flatten +
Dense, SGD with momentum; functional: Dense branches joined by Add and Concatenate, RMSprop; the
sequence layers (issue 36): lstm_text, rnn_states, transformer, described in build()) it builds
and trains the model 2 epochs with tf_keras (TF_USE_LEGACY_KERAS=1), saves model.save("KIND.h5") (with
the optimizer) and writes KIND.x (the inputs, float32 or int32 token ids: x_dtype), KIND.y (int32 labels), KIND.pred (tf_keras's float32
predictions of KIND.x) and KIND.json (shapes, optimizer iterations, the tf_keras / TensorFlow versions).
"""
import json
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

L = keras.layers


def build(kind):
    keras.utils.set_random_seed(3)
    sce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if kind == "mlp":
        m = keras.Sequential([keras.Input((20,)), L.Dense(32, activation="relu"), L.BatchNormalization(momentum=0.5),
                              L.Dropout(0.2), L.Dense(10)])
        m.compile(optimizer=keras.optimizers.Adam(0.003), loss=sce, metrics=["accuracy"])
        return m, (64, 20), 10
    if kind == "cnn":
        m = keras.Sequential([keras.Input((12, 12, 1)), L.Conv2D(8, 3, activation="relu"), L.MaxPooling2D(),
                              L.Flatten(), L.Dense(10)])
        m.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.9), loss=sce)
        return m, (64, 12, 12, 1), 10
    if kind == "lstm_text":
        # Embedding(mask_zero) -> Bidirectional(LSTM, sequences) -> GRU (reset_after): the mask flows.
        i = keras.Input((12,), dtype="int32")
        e = L.Embedding(50, 8, mask_zero=True)(i)
        s = L.Bidirectional(L.LSTM(8, return_sequences=True), merge_mode="sum")(e)
        out = L.Dense(3)(L.GRU(6)(s))
        m = keras.Model(i, out)
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, (64, 12), 3
    if kind == "rnn_states":
        # Conv1D(causal) -> MaxPooling1D -> LSTM(return_state) whose h, c start a second LSTM through
        # initial_state (a Keras 2 node kwarg), plus a SimpleRNN on the pooled sequence.
        i = keras.Input((10, 5))
        c = L.MaxPooling1D()(L.Conv1D(8, 3, padding="causal", activation="relu")(i))
        seq, h, cs = L.LSTM(8, return_sequences=True, return_state=True)(c)
        y = L.LSTM(8)(seq, initial_state=[h, cs])
        out = L.Dense(3)(L.Concatenate()([y, L.SimpleRNN(4)(c)]))
        m = keras.Model(i, out)
        m.compile(optimizer=keras.optimizers.RMSprop(0.003), loss=sce)
        return m, (64, 10, 5), 3
    if kind == "transformer":
        # A pre-norm Transformer block: MultiHeadAttention(x, x) (value as a Keras 2 node kwarg),
        # residual Adds, LayerNormalization, a gelu MLP, GlobalAveragePooling1D.
        i = keras.Input((10, 6))
        x = L.Dense(16)(i)
        n = L.LayerNormalization(epsilon=1e-6)(x)
        x = L.Add()([x, L.MultiHeadAttention(2, 8)(n, n)])
        n = L.LayerNormalization(epsilon=1e-6)(x)
        x = L.Add()([x, L.Dense(16)(L.Dense(32, activation="gelu")(n))])
        out = L.Dense(3)(L.GlobalAveragePooling1D()(x))
        m = keras.Model(i, out)
        m.compile(optimizer=keras.optimizers.Adam(0.003), loss=sce)
        return m, (64, 10, 6), 3
    i = keras.Input((16,))
    a = L.Dense(8, activation="tanh")(i)
    b = L.Dense(8)(i)
    out = L.Dense(3)(L.Concatenate()([L.Add()([a, b]), a]))
    m = keras.Model(i, out)
    m.compile(optimizer=keras.optimizers.RMSprop(0.003), loss=sce)
    return m, (64, 16), 3


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for kind in ("mlp", "cnn", "functional", "lstm_text", "rnn_states", "transformer"):
        model, shape, classes = build(kind)
        rng = np.random.default_rng(5)
        if kind == "lstm_text":
            # Token ids with trailing padding (0) of varying length; the label from the ids' sum.
            x = rng.integers(1, 50, size=shape).astype(np.int32)
            for r, n in enumerate(rng.integers(4, 13, size=shape[0])):
                x[r, n:] = 0
            y = (x.sum(axis=1) % classes).astype(np.int32)
        else:
            x = rng.standard_normal(shape).astype(np.float32)
            w = rng.standard_normal((int(np.prod(shape[1:])), classes))
            y = np.argmax(x.reshape(len(x), -1) @ w, axis=1).astype(np.int32)
        model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
        base = os.path.join(out_dir, kind)
        model.save(base + ".h5")
        pred = model.predict(x, verbose=0).astype(np.float32)
        x.tofile(base + ".x")
        y.tofile(base + ".y")
        pred.tofile(base + ".pred")
        with open(base + ".json", "w") as f:
            json.dump({"x_shape": list(shape), "x_dtype": str(x.dtype), "pred_shape": list(pred.shape),
                       "iterations": int(model.optimizer.iterations.numpy()),
                       "tf_keras": keras.__version__, "tensorflow": tf.__version__}, f)
            f.write("\n")
        print(kind, "iterations", int(model.optimizer.iterations.numpy()), "saved", base + ".h5")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures", "tf_keras"))
