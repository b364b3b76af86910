#!/usr/bin/env bash
# End to end: train_classifier --save-model (HDF5 and TensorFlow.js), then the predict app loads each
# file without the training code, and TensorFlow.js computes the test accuracy over all 10,000
# Fashion-MNIST test images: all three accuracies must agree to 0.001 (they are computed from the
# same float32 weights; TensorFlow.js sums in another order).
# Usage: end_to_end.sh BUILD_DIR WORK_DIR [EPOCHS LIMIT]   (small defaults: a smoke test)
set -euo pipefail
build=$1 work=$2 epochs=${3:-1} limit=${4:-3000}
data=/usr/share/datasets/fashion-mnist
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
for out in "$work/classifier.h5" "$work/classifier_tfjs"; do
  "$build/apps/train_classifier" --epochs "$epochs" --limit "$limit" --seed 7 --log-level warn --save-model "$out"
done
"$build/apps/predict" --model "$work/classifier.h5" --images "$data/t10k-images-idx3-ubyte.gz" \
  --labels "$data/t10k-labels-idx1-ubyte.gz" --show 3 --metrics-out "$work/h5.json"
"$build/apps/predict" --model "$work/classifier_tfjs" --images "$data/t10k-images-idx3-ubyte.gz" \
  --labels "$data/t10k-labels-idx1-ubyte.gz" --show 0 --metrics-out "$work/tfjs.json"
acc_h5=$(sed -n 's/.*"accuracy": \([0-9.e-]*\).*/\1/p' "$work/h5.json")
acc_tfjs=$(sed -n 's/.*"accuracy": \([0-9.e-]*\).*/\1/p' "$work/tfjs.json")
echo "tapeflow predict accuracy: .h5 $acc_h5, TensorFlow.js directory $acc_tfjs"
[ "$acc_h5" = "$acc_tfjs" ] || { echo "FAIL: the two files predict differently"; exit 1; }
cd "$here" && node check.mjs accuracy "$work/classifier_tfjs" "$data/t10k-images-idx3-ubyte.gz" \
  "$data/t10k-labels-idx1-ubyte.gz" "$acc_h5"
