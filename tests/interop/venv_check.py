"""The test venv holds exactly the pinned tools, and each of them imports and works without TensorFlow.

Usage: venv_check.py REQUIREMENTS_TXT
"""
import importlib.metadata as md
import os
import re
import sys


def main(req_path):
    pins = {}
    for line in open(req_path):
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s\\]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    wrong = []
    for name, want in sorted(pins.items()):
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != want:
            wrong.append(f"{name}: pinned {want}, venv has {have}")
    if wrong:
        print("venv does not match tests/interop/requirements.txt (run scripts/setup.sh):\n  " + "\n  ".join(wrong))
        return 1
    if os.environ.get("KERAS_BACKEND") != "jax":
        print(f"KERAS_BACKEND must be jax, got {os.environ.get('KERAS_BACKEND')!r}")
        return 1
    import numpy as np
    import keras
    import onnx
    import onnxruntime
    from tensorboard.backend.event_processing import event_accumulator  # noqa: F401

    if keras.backend.backend() != "jax":
        print(f"keras runs on {keras.backend.backend()}, expected jax")
        return 1
    # Each tool does real work: a Keras model's forward pass, an ONNX graph run by ONNX Runtime.
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, kernel_initializer="ones")])
    y = np.asarray(model.predict(np.ones((1, 3), np.float32), verbose=0))
    if not np.allclose(y, [[3.0, 3.0]]):
        print(f"keras Dense(ones) of ones gave {y}")
        return 1
    from onnx import helper, TensorProto
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    sess = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"x": np.array([-1.0, 2.0], np.float32)})[0]
    if not np.array_equal(out, [0.0, 2.0]):
        print(f"onnxruntime Relu gave {out}")
        return 1
    print(f"venv ok: keras {keras.__version__} (jax), onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
