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
    openssh-server openssh-client python3 python3-pip >/dev/null
if [ ! -e /usr/local/cuda/include/cuda.h ]; then
    echo "setup.sh: no CUDA toolkit at /usr/local/cuda: install it, or pass" >&2
    echo "          -Dtoolkit=PREFIX to meson setup" >&2
    exit 1
fi
