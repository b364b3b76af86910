#!/usr/bin/env bash
# The TensorFlow.js cross-checks (tests/tfjs), outside the default test run: they need Node.js, npm and
# the npm registry (for @tensorflow/tfjs, pinned in tests/tfjs/package-lock.json; pure JavaScript, no
# native downloads), which the project's CI machines do not reach. On a machine that does:
#   bash scripts/tfjs_crosscheck.sh
# installs Node.js and npm from Debian where missing, the package into tests/tfjs/node_modules, builds
# into ./build with the cross-checks on (-DTAPEFLOW_TFJS_CROSSCHECK=ON), and runs the tests labelled tfjs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm
fi
if [ ! -d tests/tfjs/node_modules/@tensorflow/tfjs ] || [ tests/tfjs/package-lock.json -nt tests/tfjs/node_modules/.package-lock.json ]; then
  (cd tests/tfjs && npm ci --no-audit --no-fund --loglevel=error)
fi
TARGETS="tfjs_models train_classifier predict" bash scripts/build.sh -DTAPEFLOW_TFJS_CROSSCHECK=ON
cd build
ctest --output-on-failure -L tfjs
