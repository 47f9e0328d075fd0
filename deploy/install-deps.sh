#!/usr/bin/env bash
# Installs everything ldpgraph needs to build and test, from Debian 12
# (bookworm) packages only. Safe to run again. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libssl-dev openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev libcpp-httplib-dev nlohmann-json3-dev
  libpq-dev postgresql-15 haproxy
  libopenblas-pthread-dev
  python3 python3-numpy
  python3-dev pybind11-dev python3-grpcio python3-protobuf python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
