"""Keras 3 files both ways, checked by Keras 3 itself (run by CTest: tests/interop/CMakeLists.txt).

keras_files.py HELPER KIND   (HELPER: the keras_models program; KIND: mlp, cnn, functional, rnn,
   lstm_text (Embedding(mask_zero) -> LSTM -> Dense, padded token ids), bigru_text (Embedding(mask_zero)
   -> Bidirectional(GRU) -> Dense), transformer (a ViT-like encoder block: LayerNormalization,
   MultiHeadAttention, Add, Dense with GELU, GlobalAveragePooling1D), conv1d (Conv1D, MaxPooling1D,
   AveragePooling1D, GlobalMaxPooling1D) or simple_rnn (SimpleRNN(return_sequences) -> SimpleRNN))
1. tapeflow -> Keras: HELPER builds, fits and saves KIND (not rnn) as .keras and as .h5; Keras 3's
   load_model opens each and its predict matches tapeflow's (max abs diff <= 1e-5, float32).
2. Keras -> tapeflow: the same model built and fitted here by Keras 3, saved as .keras and as
   Keras 3's legacy .h5 (model.save("m.h5"); tf_keras cannot be installed without TensorFlow, so
   Keras 3's legacy writer stands in for it); HELPER loads each, predicts the same (<= 1e-5), and
   fits 4 more epochs from the loaded optimizer state with a loss that falls every epoch; the model
   tapeflow loaded, saved again by tapeflow as .keras and .h5, loads in Keras 3 with the same
   predictions (for the sequence kinds this is the tapeflow -> Keras check: tapeflow builds the
   layers from the file's config, holds the weights, trains them 4 epochs and writes them again).
   The node kinds: attention (MultiHeadAttention(query, value, key, attention_mask=m,
   use_causal_mask=True, return_attention_scores=True), two inputs), lstm_state (an LSTM's
   initial_state from another LSTM's return_state), masked_rnn (a Functional Embedding(mask_zero)
   whose mask flows through Bidirectional(GRU) -> LSTM and GRU; Keras 3 writes it as NotEqual op
   nodes feeding mask=) and explicit_mask (LSTM(x, mask=m), Dropout(training=False), two inputs):
   every call argument of a Functional node in Keras 3's form.
3. For the sequence kinds, Keras 3's .keras file with an unknown key added to a layer's config, and
   with an unknown layer class, is refused by tapeflow with an error naming the key or class and the
   file.
Exit status 1 with the reason on any failure.
"""
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import keras
from keras import layers as L

helper, kind = sys.argv[1], sys.argv[2]
work = os.environ.get("TAPEFLOW_WORK_DIR", ".")
os.makedirs(work, exist_ok=True)
TOL = 1e-5
failures = []


def report(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(*args):
    p = subprocess.run([helper, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL {' '.join(args)}: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# 1. tapeflow -> Keras 3
SEQUENCE_KINDS = ("rnn", "lstm_text", "bigru_text", "transformer", "conv1d", "simple_rnn")
for ext in ((".keras", ".h5") if kind != "rnn" else ()):
    path = os.path.join(work, f"tapeflow_{kind}{ext}")
    info = run("save", kind, path)
    xs = [np.fromfile(f"{path}.x{i}", dtype=np.float32).reshape(sh) for i, sh in enumerate(info["x_shapes"])]
    want = np.fromfile(path + ".pred", dtype=np.float32).reshape(info["pred_shape"])
    try:
        model = keras.saving.load_model(path)
    except Exception as e:  # the refusal is the result: the reason, not a traceback
        report(False, f"Keras 3 loads tapeflow's {kind}{ext}: {type(e).__name__}: {str(e)[:600]}")
        continue
    got = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    diff = float(np.max(np.abs(got - want)))
    report(diff <= TOL, f"Keras 3 loads tapeflow's {kind}{ext}: max |keras - tapeflow| = {diff:.2e}")
    if ext == ".keras":
        it = int(model.optimizer.iterations.numpy())
        report(it == info["iterations"], f"Keras 3 restores the optimizer of {kind}{ext}: iterations {it} "
               f"(tapeflow saved {info['iterations']})")


# 2. Keras 3 -> tapeflow
def keras_model():
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
    if kind == "rnn":
        m = keras.Sequential([keras.Input((6, 3)), L.Bidirectional(L.LSTM(4, return_sequences=True)),
                              L.GRU(5, return_sequences=True), L.SimpleRNN(4), L.Dense(3)])
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, (64, 6, 3), 3
    if kind == "lstm_text":
        m = keras.Sequential([keras.Input((9,), dtype="int32"), L.Embedding(20, 6, mask_zero=True), L.LSTM(8),
                              L.Dense(3)])
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce, metrics=["accuracy"])
        return m, (64, 9), 3
    if kind == "bigru_text":
        m = keras.Sequential([keras.Input((9,), dtype="int32"), L.Embedding(20, 6, mask_zero=True),
                              L.Bidirectional(L.GRU(5)), L.Dense(3)])
        m.compile(optimizer=keras.optimizers.RMSprop(0.005), loss=sce)
        return m, (64, 9), 3
    if kind == "transformer":
        i = keras.Input((8, 6))
        h = L.LayerNormalization(epsilon=1e-6)(i)
        x = L.Add()([i, L.MultiHeadAttention(num_heads=2, key_dim=4)(h, h)])
        h = L.Dense(6)(L.Dense(12, activation="gelu")(L.LayerNormalization(epsilon=1e-6)(x)))
        out = L.Dense(3)(L.GlobalAveragePooling1D()(L.Add()([x, h])))
        m = keras.Model(i, out)
        m.compile(optimizer=keras.optimizers.AdamW(0.003, weight_decay=1e-4), loss=sce)
        return m, (64, 8, 6), 3
    if kind == "conv1d":
        m = keras.Sequential([keras.Input((16, 3)), L.Conv1D(6, 3, activation="relu"), L.MaxPooling1D(2),
                              L.Conv1D(4, 3, padding="same"), L.AveragePooling1D(2), L.GlobalMaxPooling1D(),
                              L.Dense(3)])
        m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=sce)
        return m, (64, 16, 3), 3
    if kind == "simple_rnn":
        m = keras.Sequential([keras.Input((6, 3)), L.SimpleRNN(5, return_sequences=True), L.SimpleRNN(4),
                              L.Dense(3)])
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, (64, 6, 3), 3
    if kind == "attention":  # every MultiHeadAttention call argument (as keras_models.cc builds it)
        x, m = keras.Input((8, 6)), keras.Input((8, 8))
        q = L.LayerNormalization(epsilon=1e-6)(x)
        o, s = L.MultiHeadAttention(num_heads=2, key_dim=4)(q, L.Dense(6)(x), L.Dense(5)(x), attention_mask=m,
                                                           use_causal_mask=True, return_attention_scores=True)
        out = L.Dense(3)(L.Concatenate()([L.GlobalAveragePooling1D()(o), L.Flatten()(s)]))
        m = keras.Model([x, m], out)
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, [(64, 8, 6), (64, 8, 8)], 3
    if kind == "lstm_state":  # LSTM initial_state from another LSTM's return_state
        x = keras.Input((6, 3))
        o, h, c = L.LSTM(5, return_sequences=True, return_state=True)(x)
        y = L.LSTM(5)(o, initial_state=[h, c])
        m = keras.Model(x, L.Dense(3)(L.Concatenate()([y, h])))
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, [(64, 6, 3)], 3
    if kind == "masked_rnn":  # Embedding(mask_zero)'s mask through Bidirectional(GRU) -> LSTM and GRU
        ids = keras.Input((9,), dtype="int32")
        e = L.Embedding(20, 6, mask_zero=True)(ids)
        b = L.LSTM(5)(L.Bidirectional(L.GRU(4, return_sequences=True))(e))
        m = keras.Model(ids, L.Dense(3)(L.Concatenate()([b, L.GRU(3)(e)])))
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, [(64, 9)], 3
    if kind == "explicit_mask":  # LSTM(x, mask=m), Dropout(training=False)
        x, mk = keras.Input((5, 3)), keras.Input((5,))
        y = L.Dropout(0.1)(L.LSTM(4)(x, mask=mk), training=False)
        m = keras.Model([x, mk], L.Dense(3)(y))
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss=sce)
        return m, [(64, 5, 3), (64, 5)], 3
    i = keras.Input((16,))
    a = L.Dense(8, activation="tanh")(i)
    b = L.Dense(8)(i)
    out = L.Dense(3)(L.Concatenate()([L.Add()([a, b]), a]))
    m = keras.Model(i, out)
    m.compile(optimizer=keras.optimizers.RMSprop(0.003), loss=sce)
    return m, (64, 16), 3


model, shapes, classes = keras_model()
shapes = shapes if isinstance(shapes, list) else [shapes]  # one shape per model input
shape = shapes[0]
rng = np.random.default_rng(5)
text = kind.endswith("_text") or kind == "masked_rnn"
if text:  # token ids 1..19 padded with trailing zeros (the mask) to lengths 2..9
    x = rng.integers(1, 20, shape).astype(np.int32)
    for row, n in zip(x, rng.integers(2, shape[1] + 1, len(x))):
        row[n:] = 0
    y = (np.sum(x % 3, axis=1) % 3).astype(np.int32)
else:
    x = rng.standard_normal(shape).astype(np.float32)
    y = np.argmax(x.reshape(len(x), -1) @ rng.standard_normal((int(np.prod(shape[1:])), classes)), axis=1).astype(np.int32)
xs = [x]
for sh in shapes[1:]:  # 0/1 masks: the diagonal of [B, T, S] / step 0 of [B, T] kept (no empty row)
    keep = np.zeros(sh, dtype=bool)
    if len(sh) == 3:
        keep[:, np.arange(sh[1]), np.arange(sh[2])] = True
    else:
        keep[:, 0] = True
    xs.append((keep | (rng.uniform(size=sh) > 0.35)).astype(np.float32))
model.fit(xs if len(xs) > 1 else x, y, epochs=3, batch_size=16, verbose=0)
want = model.predict(xs if len(xs) > 1 else x, verbose=0)
x_files = [os.path.join(work, f"x{i}.bin") for i in range(len(xs))]
for f, v in zip(x_files, xs):
    v.astype(np.float32).tofile(f)  # the helper reads float32 (Embedding casts integral floats to int32)
x_file, shape_arg = ";".join(x_files), ";".join(",".join(map(str, sh)) for sh in shapes)
y_file = os.path.join(work, "y.bin")
y.tofile(y_file)
for ext in (".keras", ".h5"):
    path = os.path.join(work, f"keras_{kind}{ext}")
    model.save(path)
    try:
        out = run("check", path, x_file, shape_arg, y_file, "4")
    except SystemExit as e:  # tapeflow refused Keras 3's file: report it and go on with the next
        report(False, f"tapeflow loads Keras 3's {kind}{ext}: {e}")
        continue
    got = np.fromfile(path + ".tapeflow_pred", dtype=np.float32).reshape(want.shape)
    diff = float(np.max(np.abs(got - want)))
    report(diff <= TOL, f"tapeflow loads Keras 3's {kind}{ext}: max |tapeflow - keras| = {diff:.2e}")
    steps = int(model.optimizer.iterations.numpy())
    report(out["iterations_loaded"] == steps,
           f"tapeflow restores the optimizer of {kind}{ext}: iterations {out['iterations_loaded']} (Keras: {steps})")
    for again in (".tapeflow.keras", ".tapeflow.h5"):
        if again == ".tapeflow.h5" and kind == "masked_rnn":
            # Keras 3's Functional writes the mask as a NotEqual op node, which its own legacy .h5
            # loader cannot make ("Unknown layer: 'NotEqual'"): checked on Keras 3's own .h5 instead.
            own = os.path.join(work, f"keras_{kind}.h5")
            model.save(own)  # (again, for the .keras round: the .h5 round saves it anyway)
            try:
                keras.saving.load_model(own)
                report(False, f"Keras 3 now loads its own {kind}.h5: check tapeflow's {kind}{ext}{again} too")
            except ValueError as e:
                report("NotEqual" in str(e), f"Keras 3 refuses its own {kind}.h5 too: {str(e)[:80]}")
            continue
        if not os.path.exists(path + again):
            report(False, f"tapeflow wrote {kind}{ext} again as {again[10:]}")
            continue
        try:
            back = keras.saving.load_model(path + again).predict(xs if len(xs) > 1 else x, verbose=0)
        except Exception as e:
            report(False, f"Keras 3 loads {kind}{ext} as tapeflow saved it again ({again[10:]}): "
                   f"{type(e).__name__}: {str(e)[:600]}")
            continue
        d = float(np.max(np.abs(back - want)))
        report(d <= TOL, f"Keras 3 loads {kind}{ext} as tapeflow saved it again ({again[10:]}): max |keras - keras| = {d:.2e}")
    losses = out["losses"]
    falling = all(b < a for a, b in zip(losses, losses[1:]))
    report(falling, f"tapeflow trains Keras 3's {kind}{ext} on: losses {[round(v, 5) for v in losses]}")



# 3. Unknown config keys and layer classes in a Keras 3 file: refused naming the key or class and the file.
def refused(tamper, what, needles):
    src = os.path.join(work, f"keras_{kind}.keras")
    bad = os.path.join(work, f"keras_{kind}.{what.replace(' ', '_')}.keras")
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(bad, "w") as out:
        for item in z.infolist():
            data = z.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                tamper(config["config"]["layers"][-2])  # the layer before the last Dense
                data = json.dumps(config).encode()
            out.writestr(item, data)
    p = subprocess.run([helper, "check", bad, x_file, shape_arg, y_file, "1"],
                       capture_output=True, text=True)
    missing = [n for n in [bad, *needles] if n not in p.stderr]
    report(p.returncode != 0 and not missing,
           f"tapeflow refuses {kind}.keras with {what}: {p.stderr.strip()[:300]!r}" + (f" (missing {missing})" if missing else ""))


def inner(entry):  # a Bidirectional's wrapped layers (forward and backward), else the layer itself
    c = entry["config"]
    return [c["layer"], c["backward_layer"]] if "layer" in c else [entry]


def each(f):
    return lambda entry: [f(e) for e in inner(entry)]


if kind in SEQUENCE_KINDS and kind != "rnn":
    refused(each(lambda e: e["config"].update(frobnication=3)), "an unknown config key",
            ["unknown config key 'frobnication'"])
    refused(each(lambda e: e.update(class_name="FrobLayer")), "an unknown layer class",
            ["unknown layer class 'FrobLayer'"])

print("all ok" if not failures else f"{len(failures)} failed: {failures}")
sys.exit(1 if failures else 0)
