#!/bin/bash
# Installs what building and testing rgpu needs on Debian 12 (as root, or
# with sudo).  The CUDA toolkit itself is expected at /usr/local/cuda.
set -eu
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    meson ninja-build pkg-config gcc libc6-dev \
    libmsgpack-dev libseccomp-dev libclang-14-dev libssl-dev liblz4-dev libzstd-dev \
    binutils iproute2 clang-14 libclang-rt-14-dev \
    debhelper dpkg-dev fakeroot lintian stunnel4 openssl \
    openssh-server openssh-client python3 python3-pip python3-venv python3-msgpack >/dev/null
if [ ! -e /usr/local/cuda/include/cuda.h ]; then
    echo "setup.sh: no CUDA toolkit at /usr/local/cuda: install it, or pass" >&2
    echo "          -Dtoolkit=PREFIX to meson setup" >&2
    exit 1
fi

# The rgpu PyTorch device's tests: pinned PyTorch in its own environment.
# Only those tests need it, and they skip, saying why, without it.
if ! $SUDO "$(dirname "$0")/tests/rgpu_device/install-torch.sh"; then
    echo "setup.sh: WARNING: PyTorch for the rgpu device tests could not be installed" \
         "(tests/rgpu_device/install-torch.sh); those tests will be skipped" >&2
fi

# NVML's header, for libnvidia-ml.so.1 (codegen/nvml.ann): NVIDIA publishes
# it in the nvidia-nvml-dev wheel on PyPI (the CUDA toolkit's NVML component
# is often not installed: our /usr/local/cuda has no nvml.h).  The wheel
# holds the header only; the project's build reads it from .deps/nvml.
# Pinned: the NVML of the CUDA 13.0 toolkit, or of the last CUDA 12 one.
cuda_major=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' /usr/local/cuda/include/cuda.h)
cuda_major=$((cuda_major / 1000))
case $cuda_major in
    12) nvml_wheel=nvidia-nvml-dev-cu12==12.9.79 ;;
    *) nvml_wheel=nvidia-nvml-dev==13.0.87 ;;
esac
deps=$(cd "$(dirname "$0")" && pwd)/.deps
if [ "$(cat "$deps/nvml/VERSION" 2>/dev/null)" != "$nvml_wheel" ]; then
    command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 ||
        $SUDO apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
    rm -rf "$deps/nvml" "$deps/wheels"
    mkdir -p "$deps/nvml/include" "$deps/wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$deps/wheels" "$nvml_wheel"
    python3 - "$deps/wheels" "$deps/nvml/include/nvml.h" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/include/nvml.h"))
    open(sys.argv[2], "wb").write(z.read(name))
PY
    echo "$nvml_wheel" > "$deps/nvml/VERSION"
fi
