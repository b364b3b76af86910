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
  libzip-dev libonnx-dev libprotobuf-dev protobuf-compiler libboost-dev
  doxygen iproute2
  clang-16
  dataset-fashion-mnist python3 python3-venv
)
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

# The test environment of the real tools (Keras 3 on JAX, ONNX Runtime, TensorBoard) for the
# interoperability tests (tests/interop): a venv inside the build tree, every package pinned with its
# hash (tests/interop/requirements.txt). Made again only when the requirements change. TAPEFLOW_VENV
# puts it elsewhere (CMake is told the same through -DTAPEFLOW_VENV).
venv="${TAPEFLOW_VENV:-build/venv}"
req=tests/interop/requirements.txt
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.requirements" ] || ! cmp -s "$req" "$venv/.requirements"; then
  echo "setup: making the test venv $venv from $req"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --require-hashes --no-deps -r "$req"
  cp "$req" "$venv/.requirements"
fi
