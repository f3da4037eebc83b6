#!/bin/bash
# `rgpu run` and the rgpu PyTorch device, on one machine (fake GPU backend
# for rgpud, the op server on PyTorch's CPU device):
#
#   tests/rgpu_device/launcher.sh <build-dir>
#
# A private run starts rgpu-opserver beside its rgpud, gives the command
# RGPU_OP_SERVER, the command's tensors of device "rgpu" work, and nothing
# is left running afterwards.  Skips (77) without the test's PyTorch.
set -u
build=$(cd "${1:?usage: launcher.sh BUILD_DIR}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/launcher/lib.sh
. "$src/tests/launcher/lib.sh"

py=${RGPU_TORCH_PYTHON:-${RGPU_TORCH_VENV:-/opt/rgpu-torch}/bin/python}
if ! "$py" -c "import torch, msgpack" 2>/dev/null; then
    echo "SKIP: no Python with PyTorch and msgpack at $py (./setup.sh installs one)"
    exit 77
fi

# The op server the launcher starts, on the CPU device (no GPU here); the
# last --device given wins.
cat >"$tmp/opserver" <<SHIM
#!/bin/sh
RGPU_OPSERVER_PYTHON=$py exec $build/python/rgpu-opserver "\$@" --device cpu
SHIM
chmod +x "$tmp/opserver"
export RGPU_OPSERVER=$tmp/opserver PYTHONPATH=$src/python

prog='import os, torch, rgpu
print("op_server=" + os.environ["RGPU_OP_SERVER"])
x = torch.arange(4.0, device="rgpu")
print("sum=%s" % (x * 2).sum().item())'
timeout -k 5 120 "$rgpu" run -v --daemon-lib-dir "$fake" -- "$py" -c "$prog" >"$tmp/out" 2>&1
status=$?
if expect "device rgpu in a private run" 0 $status "$tmp/out" \
        'started rgpu-opserver \(pid [0-9]+\)' '^op_server=unix:/.*/opserver\.sock$' '^sum=12\.0$'; then
    pid=$(sed -n 's/.*started rgpu-opserver (pid \([0-9]*\)).*/\1/p' "$tmp/out")
    if gone "$pid"; then
        ok "private rgpu-opserver stopped"
    else
        fail "private rgpu-opserver stopped" "pid $pid is still running"
    fi
fi

# Without an op server to start, CUDA programs still run; device rgpu says why not.
RGPU_OPSERVER=/nonexistent timeout -k 5 60 "$rgpu" run --daemon-lib-dir "$fake" -- \
    "$py" -c 'import torch, rgpu; torch.ones(1, device="rgpu")' >"$tmp/out" 2>&1
expect "no op server: device rgpu refuses with a reason" 1 $? "$tmp/out" \
    'no op server: set RGPU_OP_SERVER'

finish
