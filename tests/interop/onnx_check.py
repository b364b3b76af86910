"""tapeflow's ONNX exports checked by ONNX itself and run by ONNX Runtime.

onnx_check.py exported ONNX_MODELS      runs `onnx_models export` (tests/interop/onnx_models.cc)
                                        and checks mlp, cnn, functional, conv_zoo, two_inputs, the DCGAN pair, recurrent,
                                        lstm, vit, conv1d and tokens.
onnx_check.py app TRAIN_CLASSIFIER ONNX_MODELS MODEL
                                        trains `train_classifier --model MODEL` twice with one
                                        seed, saving m.onnx and m.h5 (same seed and threads: the
                                        same weights, bit for bit), writes tapeflow's predictions
                                        of m.h5 with `onnx_models predict`, and checks m.onnx.
Each model: onnx.checker.check_model(full_check=True); IR version 8, opset <= 17, a symbolic batch
dimension on every input and output; ONNX Runtime's outputs on 100 Fashion-MNIST test images (tokens: ids made from them) within
1e-5 (max abs) of tapeflow's predict, and the same at batch sizes 1 and 7 (dynamic batch).
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-5
WORK = os.environ["TAPEFLOW_WORK_DIR"]


def check(name):
    path = os.path.join(WORK, name + ".onnx")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8, f"{name}: ir_version {model.ir_version}"
    opsets = {o.domain: o.version for o in model.opset_import}
    assert opsets.get("", 0) <= 17 and set(opsets) == {""}, f"{name}: opsets {opsets}"
    for v in list(model.graph.input) + list(model.graph.output):
        d0 = v.type.tensor_type.shape.dim[0]
        assert d0.dim_param and not d0.HasField("dim_value"), f"{name}: {v.name} has a fixed batch dimension"
    files = [name + ".input.bin"] + [f"{name}.input{i}.bin" for i in range(1, len(model.graph.input))]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    xs = [np.fromfile(os.path.join(WORK, f), dtype=np.float32).reshape([100] + list(i.shape[1:]))
          for f, i in zip(files, session.get_inputs())]
    expected = np.fromfile(os.path.join(WORK, name + ".expected.bin"), dtype=np.float32).reshape(100, -1)
    (y,) = session.run(None, dict(zip(names, xs)))
    y = y.reshape(y.shape[0], -1)
    assert y.shape == expected.shape, f"{name}: ONNX Runtime gives {y.shape}, tapeflow {expected.shape}"
    diff = float(np.max(np.abs(y - expected)))
    print(f"{name}: {len(model.graph.node)} nodes; max |ONNX Runtime - tapeflow| over 100 images = {diff:.3g} "
          f"(outputs up to {float(np.max(np.abs(expected))):.3g} in magnitude)")
    assert diff <= TOLERANCE, f"{name}: max abs diff {diff} > {TOLERANCE}"
    for batch in (1, 7):
        (yb,) = session.run(None, {n: x[:batch] for n, x in zip(names, xs)})
        db = float(np.max(np.abs(yb.reshape(batch, -1) - expected[:batch])))
        assert yb.shape[0] == batch and db <= TOLERANCE, f"{name}: batch {batch}: shape {yb.shape}, diff {db}"
    print(f"{name}: batch sizes 1 and 7 run too")


def run(*cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(argv):
    if argv[1] == "exported":
        run(argv[2], "export", WORK)
        for name in ("mlp", "cnn", "functional", "conv_zoo", "two_inputs", "dcgan_discriminator", "dcgan_generator",
                     "recurrent", "lstm", "vit", "conv1d", "tokens"):
            check(name)
    elif argv[1] == "app":
        train, helper, kind = argv[2], argv[3], argv[4]
        name = "app_" + kind
        flags = ["--model", kind, "--limit", "300", "--epochs", "1", "--seed", "7", "--threads", "2", "--verbose", "0"]
        run(train, *flags, "--save-model", os.path.join(WORK, name + ".onnx"))
        run(train, *flags, "--save-model", os.path.join(WORK, name + ".h5"))
        run(helper, "predict", os.path.join(WORK, name + ".h5"), os.path.join(WORK, name))
        check(name)
    else:
        raise SystemExit(f"unknown mode {argv[1]}")


if __name__ == "__main__":
    main(sys.argv)
