#!/usr/bin/env bash
# The main job: installs what is needed, builds the library and train_classifier (not the tests or
# benchmarks: run_tests.sh builds those), and trains the Fashion-MNIST classifier.
# Arguments go to the app (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TARGETS=train_classifier bash scripts/build.sh -DTAPEFLOW_BUILD_BENCH=OFF
exec ./build/apps/train_classifier "$@"
