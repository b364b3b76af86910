#!/usr/bin/env bash
# Installs every Debian 12 package tapeflow needs to build, test, benchmark and run its apps.
# Idempotent: skips apt entirely when everything is already installed.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libeigen3-dev libtbb-dev libhdf5-dev hdf5-tools libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev zlib1g-dev libstb-dev
  openmpi-bin libopenmpi-dev
  dataset-fashion-mnist
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
