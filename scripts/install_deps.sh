#!/usr/bin/env bash
# Installs the Debian 12 packages pagedkv needs, only those that are missing (run as root).
# The CUDA toolkit (/usr/local/cuda) is optional: without it the CUDA backend is not built.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache clang-format clang
  libabsl-dev libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsimdjson-dev nlohmann-json3-dev libcli11-dev zlib1g-dev gnuplot-nox
  libmsgpack-cxx-dev libboost-dev libzmq3-dev cppzmq-dev python3-zmq python3-msgpack python3-pytest
  pybind11-dev python3-dev python3-numpy python3-venv python3-pip python3-prometheus-client
  libhwy-dev libopenblas-dev
  libhiredis-dev redis-server redis-tools
  libcpp-httplib-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends \
  "${missing[@]}"
