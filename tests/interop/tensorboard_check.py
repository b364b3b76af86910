"""tapeflow's TensorBoard event files read by TensorBoard's own reader (EventAccumulator).

tensorboard_check.py fit TENSORBOARD_LOGS
    runs `tensorboard_logs` (tests/interop/tensorboard_logs.cc: fit with validation data and the
    TensorBoard callback at update_freq 1, histogram_freq 1, write_images) and checks that the train
    and validation runs hold exactly the expected scalar tags, with every value (float32) at every
    step, a histogram per weight and epoch whose count, min, max and sum are the weight's, and an
    image per 1-D / 2-D weight and epoch of the size Keras gives it (a valid PNG).
tensorboard_check.py app NAME BINARY
    runs the training app NAME (train_classifier, gan, adversarial_regularization) on 256 examples
    for 2 epochs with --tensorboard-dir and --tensorboard-update-freq 1, and checks the runs, tags
    and steps it must write and their values against the app's --metrics-out.
"""
import json
import math
import os
import struct
import subprocess
import sys

from tensorboard.backend.event_processing import event_accumulator

WORK = os.environ["TAPEFLOW_WORK_DIR"]
DATA = os.environ.get("TAPEFLOW_DATA_DIR", "/usr/share/datasets/fashion-mnist")
ALL = {"scalars": 0, "histograms": 0, "images": 0, "tensors": 0}


def load(run_dir):
    assert os.path.isdir(run_dir), f"no run directory {run_dir}"
    files = [f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")]
    assert len(files) == 1, f"{run_dir}: event files {files}"
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance=ALL)
    acc.Reload()
    assert acc.file_version == 2.0, f"{run_dir}: file_version {acc.file_version}"
    return acc


def close(a, b, rel):
    return math.isclose(a, b, rel_tol=rel, abs_tol=rel * 1e-3)


def check_scalars(acc, run, expected, rel):
    tags = set(acc.Tags()["scalars"])
    assert tags == set(expected), f"{run}: scalar tags {sorted(tags)}, expected {sorted(expected)}"
    n = 0
    for tag, points in expected.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert [s for s, _ in got] == [s for s, _ in points], f"{run}/{tag}: steps {[s for s, _ in got]}, expected {[s for s, _ in points]}"
        for (step, value), (_, want) in zip(got, points):
            want32 = struct.unpack("f", struct.pack("f", want))[0]
            assert close(value, want32, rel), f"{run}/{tag} at step {step}: {value}, expected {want32}"
            n += 1
    return n


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return height, width


def check_fit(binary):
    logs = os.path.join(WORK, "logs")
    expected_path = os.path.join(WORK, "expected.json")
    subprocess.run([binary, logs, expected_path], check=True)
    with open(expected_path) as f:
        expected = json.load(f)
    runs = sorted(os.listdir(logs))
    assert runs == ["train", "validation"], f"runs {runs}"
    train, validation = load(os.path.join(logs, "train")), load(os.path.join(logs, "validation"))
    n = check_scalars(train, "train", expected["scalars"]["train"], 1e-6)
    n += check_scalars(validation, "validation", expected["scalars"]["validation"], 1e-6)
    hist = expected["histograms"]
    assert set(train.Tags()["histograms"]) == set(hist), f"histogram tags {train.Tags()['histograms']}"
    images = 0
    for tag, points in hist.items():
        got = train.Histograms(tag)
        assert [h.step for h in got] == [p["step"] for p in points], f"{tag}: steps {[h.step for h in got]}"
        for h, p in zip(got, points):
            v = h.histogram_value
            assert v.num == p["num"] and sum(v.bucket) == p["num"], f"{tag}: num {v.num}, buckets {sum(v.bucket)}"
            assert close(v.min, p["min"], 1e-6) and close(v.max, p["max"], 1e-6), f"{tag}: [{v.min}, {v.max}]"
            assert close(v.sum, p["sum"], 1e-6), f"{tag}: sum {v.sum}, expected {p['sum']}"
            assert len(v.bucket_limit) == len(v.bucket) == (30 if v.max > v.min else 1), f"{tag}: {len(v.bucket)} buckets"
        shape = [d for d in points[0]["shape"] if d != 1]
        image_tag = tag[: -len("/histogram")] + "/image"
        if len(shape) not in (1, 2):
            continue
        want = (shape[0], 1) if len(shape) == 1 else (min(shape), max(shape)) if shape[0] > shape[1] else tuple(shape)
        got_images = train.Images(image_tag)
        assert [i.step for i in got_images] == [p["step"] for p in points], f"{image_tag}: steps"
        for im in got_images:
            assert (im.height, im.width) == want, f"{image_tag}: {im.height} x {im.width}, expected {want}"
            assert png_size(im.encoded_image_string) == want, f"{image_tag}: PNG size differs"
            images += 1
    assert set(train.Tags()["images"]) == {t[: -len("/histogram")] + "/image" for t in hist}, train.Tags()["images"]
    assert not validation.Tags()["histograms"] and not validation.Tags()["images"]
    print(f"fit: {n} scalar values, {sum(len(p) for p in hist.values())} histograms, {images} images as expected")


def run_app(binary, *args):
    out = os.path.join(WORK, "out")
    os.makedirs(out, exist_ok=True)
    cmd = [binary, "--data-dir", DATA, "--limit", "256", "--epochs", "2", "--verbose", "0", "--threads", "2",
           "--tensorboard-dir", os.path.join(WORK, "logs"), "--tensorboard-update-freq", "1",
           "--metrics-out", os.path.join(WORK, "metrics.json"), *args]
    subprocess.run(cmd, check=True, cwd=out)
    with open(os.path.join(WORK, "metrics.json")) as f:
        return json.load(f)


def steps(acc, tag):
    return [e.step for e in acc.Scalars(tag)]


def value(acc, tag, step):
    return next(e.value for e in acc.Scalars(tag) if e.step == step)


def check_weights(acc, run):
    hist = acc.Tags()["histograms"]
    assert hist and all(t.endswith("/histogram") for t in hist), f"{run}: histograms {hist}"
    for t in hist:
        assert [h.step for h in acc.Histograms(t)] == [0, 1], f"{run}/{t}: steps"


def check_app(name, binary):
    logs = os.path.join(WORK, "logs")
    if name == "train_classifier":
        m = run_app(binary)
        train = load(os.path.join(logs, "train"))
        assert set(train.Tags()["scalars"]) == {"epoch_loss", "epoch_accuracy", "epoch_learning_rate", "batch_loss",
                                                "batch_accuracy"}, train.Tags()["scalars"]
        for tag in ("epoch_loss", "epoch_accuracy", "epoch_learning_rate"):
            assert steps(train, tag) == [0, 1], f"{tag}: {steps(train, tag)}"
        assert steps(train, "batch_loss") == [1, 2, 3, 4], steps(train, "batch_loss")
        assert close(value(train, "epoch_loss", 1), m["train_loss"], 1e-5), (value(train, "epoch_loss", 1), m["train_loss"])
        assert close(value(train, "epoch_accuracy", 1), m["train_accuracy"], 1e-5)
        assert close(value(train, "batch_loss", 4), m["train_loss"], 1e-5)  # the last batch's running mean
        check_weights(train, "train")
        assert "dense/kernel/image" in train.Tags()["images"], train.Tags()["images"]
        print(f"train_classifier: {len(train.Tags()['scalars'])} scalar tags, "
              f"{len(train.Tags()['histograms'])} histograms, {len(train.Tags()['images'])} images per epoch")
    elif name == "gan":
        m = run_app(binary, "--score-samples", "20", "--grid", "4")
        train = load(os.path.join(logs, "train"))
        keys = ["d_loss", "g_loss", "r1_penalty", "d_real", "d_fake"]
        assert set(train.Tags()["scalars"]) == {f"epoch_{k}" for k in keys} | {"epoch_learning_rate", "batch_d_loss",
                                                                               "batch_g_loss"}, train.Tags()["scalars"]
        for e, epoch in enumerate(m["epochs"]):
            for k in keys:
                assert close(value(train, f"epoch_{k}", e), epoch[k], 1e-5), (k, e, value(train, f"epoch_{k}", e), epoch[k])
        assert steps(train, "batch_d_loss") == [1, 2, 3, 4], steps(train, "batch_d_loss")
        images = train.Images("samples")
        assert [i.step for i in images] == [0, 1], [i.step for i in images]
        side = (4 * 30 + 2) * 2  # 4 x 4 grid of 28 px cells with a 2 px border, zoom 2
        assert all((i.height, i.width) == (side, side) == png_size(i.encoded_image_string) for i in images)
        print(f"gan: {len(train.Tags()['scalars'])} scalar tags over 2 epochs, the sample grid at steps 0 and 1")
    elif name == "adversarial_regularization":
        m = run_app(binary, "--epsilons", "0.1")
        for model in ("baseline", "regularized"):
            train = load(os.path.join(logs, model, "train"))
            keys = {"epoch_loss", "epoch_cross_entropy", "epoch_input_gradient_norm", "epoch_learning_rate", "batch_loss"}
            assert set(train.Tags()["scalars"]) == keys, train.Tags()["scalars"]
            r = m["models"][model]
            assert close(value(train, "epoch_loss", 1), r["final_loss"], 1e-5), (model, value(train, "epoch_loss", 1))
            assert close(value(train, "epoch_cross_entropy", 1), r["final_cross_entropy"], 1e-5)
            assert close(value(train, "epoch_input_gradient_norm", 1), r["final_input_gradient_norm"], 1e-5)
            assert steps(train, "batch_loss") == [1, 2, 3, 4]
            check_weights(train, model)
        print("adversarial_regularization: baseline and regularized runs as expected")
    else:
        raise SystemExit(f"unknown app {name}")


if __name__ == "__main__":
    if sys.argv[1] == "fit":
        check_fit(sys.argv[2])
    elif sys.argv[1] == "app":
        check_app(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
