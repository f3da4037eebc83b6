#!/bin/bash
# tests/rgpu_device/run.sh SUITE   (SUITE: device | plans | choices | opserver | sandbox | nanogpt | bench | replay)
#
# Runs one of the rgpu device test suites with the Python that
# tests/rgpu_device/install-torch.sh installs (RGPU_TORCH_PYTHON names
# another).  Without PyTorch and msgpack it says so and exits 77, which
# meson counts as skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=${RGPU_TORCH_PYTHON:-${RGPU_TORCH_VENV:-/opt/rgpu-torch}/bin/python}
if ! "$py" -c "import torch, msgpack" 2>/dev/null; then
    echo "SKIP: no Python with PyTorch and msgpack at $py (./setup.sh installs one with" \
         "tests/rgpu_device/install-torch.sh; RGPU_TORCH_PYTHON names another)"
    exit 77
fi
export PYTHONDONTWRITEBYTECODE=1
# The op servers run sandboxed: meson names the module; by hand, build/'s.
sandbox=${RGPU_OPSERVER_SANDBOX:-$here/../../build/daemon/librgpu-opsandbox.so}
if [ ! -f "$sandbox" ]; then
    echo "FAIL: no op server sandbox module at $sandbox (build it with ninja -C build," \
         "or name it with RGPU_OPSERVER_SANDBOX)"
    exit 1
fi
export RGPU_OPSERVER_SANDBOX=$sandbox
case ${1:-} in
    # meson's rgpu-device-device: the device, then its plans and training runs
    device)   cd "$here" && exec "$py" -m unittest -v test_device test_plans test_cuda_choices ;;
    choices)  cd "$here" && exec "$py" -m unittest -v test_cuda_choices ;;
    plans)    cd "$here" && exec "$py" -m unittest -v test_plans ;;
    opserver) cd "$here" && exec "$py" -m unittest -v test_opserver ;;
    sandbox)  cd "$here" && exec "$py" -m unittest -v test_sandbox ;;
    nanogpt)  exec "$py" "$here/nanogpt_check.py" ;;
    bench)    shift; exec "$py" "$here/bench_client.py" "$@" ;;
    replay)   shift; exec "$py" "$here/bench_replay.py" "$@" ;;
    *) echo "usage: $0 device|plans|choices|opserver|sandbox|nanogpt|bench|replay" >&2; exit 2 ;;
esac
