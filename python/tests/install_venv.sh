#!/bin/sh
# install_venv.sh PYTHON VENV SOURCE: a fresh virtual environment VENV that
# sees the system's site-packages (Debian's python3-grpcio, -protobuf,
# -numpy, -pytest), and the ldpgraph package installed into it from SOURCE
# by pip, offline: no index, no dependencies fetched, no build isolation.
# $LDPGRAPH_NATIVE_MODULE, when set, is the already built native module
# setup.py packages instead of building one (CTest passes its own).
set -eu
python=$1 venv=$2 source=$3
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
# pip builds in SOURCE itself (setup.py reads ../proto and ../CMakeLists.txt);
# setuptools leaves SOURCE/build and SOURCE/ldpgraph.egg-info, ignored by git.
"$venv/bin/python" -m pip install --no-index --no-deps --no-build-isolation \
  --disable-pip-version-check --quiet "$source"
"$venv/bin/python" -c 'import ldpgraph, sys; print("installed ldpgraph", ldpgraph.__version__, "from", ldpgraph.__file__)'
