#!/usr/bin/env bash
# Installs every Debian 12 package tapeflow needs to build, test, benchmark and run its apps.
# Idempotent: skips apt entirely when everything is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libeigen3-dev libtbb-dev libhdf5-dev hdf5-tools libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev zlib1g-dev libstb-dev nlohmann-json3-dev
  openmpi-bin libopenmpi-dev
  dataset-fashion-mnist nodejs
)
# Debian's npm; skipped when nodejs already ships npm (NodeSource packages do, and conflict with it).
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# TensorFlow.js for the cross-checks in tests/tfjs (pure JavaScript: no native downloads), at the
# versions pinned by tests/tfjs/package-lock.json. Tests run offline afterwards.
if [ ! -d tests/tfjs/node_modules/@tensorflow/tfjs ] || [ tests/tfjs/package-lock.json -nt tests/tfjs/node_modules/.package-lock.json ]; then
  echo "setup: installing @tensorflow/tfjs into tests/tfjs/node_modules"
  (cd tests/tfjs && npm ci --no-audit --no-fund --loglevel=error)
fi
