#!/bin/bash
# Installs the Python that the rgpu device tests use: a virtual environment
# with pinned PyTorch (the CPU device is all the tests need), msgpack and
# numpy, at RGPU_TORCH_VENV (default /opt/rgpu-torch).  Called by setup.sh;
# does nothing when the environment is already there.
#
# PyPI's Linux wheel of torch is its CUDA build: the CUDA libraries come as
# wheels too (about 3 GB to download, 4.6 GB installed, under a minute on
# CI's network) because libtorch loads them at import even on the CPU.
# Nothing else in the project uses this environment.
set -eu
VENV=${RGPU_TORCH_VENV:-/opt/rgpu-torch}
TORCH=2.11.0
MSGPACK=1.1.2
NUMPY=2.2.6

if "$VENV/bin/python" -c "import torch, msgpack; assert torch.__version__.startswith('$TORCH')" \
        2>/dev/null; then
    exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check \
    "torch==$TORCH" "msgpack==$MSGPACK" "numpy==$NUMPY"
"$VENV/bin/python" -c "import torch, msgpack; print('rgpu device tests: PyTorch', torch.__version__, 'in $VENV')"
