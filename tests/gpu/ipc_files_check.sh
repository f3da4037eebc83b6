#!/bin/bash
# tests/gpu/ipc_files_check.sh [BUILD_DIR]   -- on the GPU machine, from the repo root
#
# The real driver's CUDA IPC files (/dev/shm/cuda.shm.*) do not outlive the
# sessions that made them (daemon/listener.c; docs/security.md "CUDA IPC").
# BUILD/tests/progs/ipc (a parent exports memory and an interprocess event,
# two children open them):
#   - natively, for the record: how many cuda.shm.* files the driver itself
#     leaves behind (not judged);
#   - through rgpu, a sandboxed rgpud on a Unix socket (rgpud -v -v logs
#     each file a session made): the program passes, and once its sessions
#     have ended none of the cuda.shm.* files that were not there before is
#     left;
#   - `ipc export 4 64` (4 x 64 MiB exported, never freed) through rgpu, its
#     session killed with SIGKILL: none left either.
# Prints one line per check and "ipc_files_check: PASS" or "... FAIL";
# exits 0 on pass, 1 on failure, 2 when something to run is missing.
set -u
build=$(cd "${1:-build}" && pwd) || exit 2
cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
prog=$build/tests/progs/ipc
for f in "$prog" "$build/daemon/rgpud" "$build/stubs/libcudart.so.13"; do
    [ -e "$f" ] || { echo "ipc_files_check: $f is missing"; exit 2; }
done

tag=ipc_files_check
# shellcheck source=tests/gpu/check_lib.sh
. "$(dirname "$0")/check_lib.sh"

shm_files() { ls /dev/shm 2>/dev/null | grep '^cuda\.shm\.' | sort; }
# new_files BEFORE-LIST: the cuda.shm.* files not in it
new_files() { shm_files | comm -13 "$1" -; }

shm_files > "$tmp/before-native"
env -u RGPU_SERVER LD_LIBRARY_PATH="$cuda_lib" timeout 60 "$prog" \
    > "$tmp/native.out" 2> "$tmp/native.err"
check "native run" $? "$tmp/native.err"
echo "$tag: the driver itself left $(new_files "$tmp/before-native" | wc -l) cuda.shm.* files natively (not judged)"

start_rgpud rgpud -v
shm_files > "$tmp/before-rgpu"
through_rgpu rgpud rgpu
check "rgpu run" $? "$tmp/rgpu.err"
diff -u "$tmp/native.out" "$tmp/rgpu.out" > "$tmp/diff"
check "output identical to native" $? "$tmp/diff"
sleep 2             # the sessions end and are reaped
echo "$tag: the sessions made $(grep -c 'made /dev/shm/cuda\.shm\.' "$tmp/rgpud.log") cuda.shm.* files," \
     "$(grep -o 'removed [0-9]* CUDA IPC file' "$tmp/rgpud.log" | awk '{ n += $2 } END { print n + 0 }') removed by the listener"
new_files "$tmp/before-rgpu" > "$tmp/left"
[ ! -s "$tmp/left" ]
check "no cuda.shm.* file left by the sessions" $? "$tmp/left"

shm_files > "$tmp/before-kill"
mkfifo "$tmp/in"
LD_LIBRARY_PATH="$build/stubs" RGPU_SERVER="unix:$tmp/rgpud.sock" RGPU_LOG=info \
    timeout 60 "$prog" export 4 64 < "$tmp/in" > "$tmp/export.out" 2> "$tmp/export.err" &
client=$!
exec 3> "$tmp/in"
for _ in $(seq 100); do grep -q '^handles ' "$tmp/export.out" && break; sleep 0.1; done
grep -q '^exported 4' "$tmp/export.out"
check "4 x 64 MiB exported through rgpu" $? "$tmp/export.err"
session=$(ps -o pid= --ppid "$daemon" | tr -d ' ' | head -n 1)
[ -n "$session" ] && kill -KILL "$session"
exec 3>&-
wait "$client" 2>/dev/null
sleep 2
new_files "$tmp/before-kill" > "$tmp/left-kill"
[ ! -s "$tmp/left-kill" ]
check "no cuda.shm.* file left by a killed session" $? "$tmp/left-kill"

finish "$tmp/native.out"
