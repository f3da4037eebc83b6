#!/bin/bash
# The Debian packages, end to end (as root, on a machine without a GPU):
#
#   tests/packaging/run.sh [BUILD-DIR]
#
# 1. builds rgpu-client and rgpu-server with packaging/build-debs.sh and
#    checks them with lintian (no error or warning may be left, overrides
#    aside) and for what they must and must not hold;
# 2. installs both with dpkg, and runs the example program with
#    LD_LIBRARY_PATH=/opt/rgpu/lib against the INSTALLED /usr/sbin/rgpud,
#    started as the packaged system user with the packaged configuration,
#    on the fake GPU backend;
# 3. removes, then purges both, and checks that nothing is left behind.
#
# The example program and the fake backend come from a normal build in
# BUILD-DIR (default: build/ at the top of the tree; made when missing),
# since the packages are built without them.  Any rgpu-client or
# rgpu-server installed before is purged first.  Prints "ok - ..." or
# "FAIL - ..." per check and exits non-zero if any failed.
# Checks run through `bash -c '...' _ ARGS` and helper functions called
# through `check`: shellcheck sees neither.
# shellcheck disable=SC2016,SC2317
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/packaging/common.sh
. "$src/tests/packaging/common.sh"

build=${1:-$src/build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-pkgtest.XXXXXX")
chmod 755 "$tmp"
# A run that stops half way purges what it installed.
must_purge=
cleanup() {
    [ -n "$must_purge" ] && purge_all
    cleanup_common
}
trap cleanup EXIT
trap 'exit 143' TERM INT

[ "$(id -u)" -eq 0 ] || die "run.sh installs packages: run it as root"
for tool in dpkg-buildpackage dh lintian fakeroot; do
    command -v "$tool" >/dev/null || die "$tool is not installed (see docs/packaging.md)"
done

purge_all() {
    dpkg --purge rgpu-client rgpu-server >"$tmp/purge.log" 2>&1
}
installed() {
    [ "$(dpkg-query -W -f '${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}
if installed rgpu-client || installed rgpu-server; then
    echo "# purging the rgpu packages installed before this test"
    purge_all
fi

# ---- 1. build and inspect -------------------------------------------------
debs=$tmp/debs
if "$src/packaging/build-debs.sh" -o "$debs" >"$tmp/build-debs.log" 2>&1; then
    ok "packaging/build-debs.sh builds the packages"
else
    show "$tmp/build-debs.log" | tail -60
    die "packaging/build-debs.sh builds the packages"
fi
client_deb=$(ls "$debs"/rgpu-client_*_amd64.deb 2>/dev/null)
server_deb=$(ls "$debs"/rgpu-server_*_amd64.deb 2>/dev/null)
if [ ! -f "$client_deb" ] || [ ! -f "$server_deb" ]; then
    die "rgpu-client and rgpu-server .deb files are there"
fi

version=$(meson introspect --projectinfo "$src/meson.build" |
          python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
check "package version is meson's $version" \
    test "$(dpkg-deb -f "$client_deb" Version)" = "$version" -a \
         "$(dpkg-deb -f "$server_deb" Version)" = "$version"

if lintian --fail-on error,warning "$debs"/rgpu_*.changes >"$tmp/lintian.log" 2>&1; then
    ok "lintian: no errors or warnings"
else
    cat "$tmp/lintian.log"
    fail "lintian: no errors or warnings"
fi

dpkg-deb -c "$client_deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/client.files"
dpkg-deb -c "$server_deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/server.files"
has_all() {    # has_all LIST FILE...
    local list=$1 f
    shift
    for f in "$@"; do
        grep -qx "$f" "$list" || { echo "  missing: $f"; return 1; }
    done
}
major=$(cuda_major)
# Beside CUDA 13's, the CUDA 12 stubs (docs/cuda12.md).
cuda12=()
[ "$major" = 13 ] && cuda12=(/opt/rgpu/lib/libcudart.so.12 /opt/rgpu/lib/libcublas.so.12
                             /opt/rgpu/lib/libcublasLt.so.12)
check "rgpu-client holds the stubs in /opt/rgpu/lib and rgpu(7)" \
    has_all "$tmp/client.files" /opt/rgpu/lib/libcuda.so.1 "/opt/rgpu/lib/libcudart.so.$major" \
        "${cuda12[@]}" \
        /opt/rgpu/lib/librgpu-client.so.0 /usr/share/man/man7/rgpu.7.gz \
        /usr/share/doc/rgpu-client/examples/rgpu-tls-client.conf
check "rgpu-server holds rgpud, its unit, its conffile, rgpud(8), the stunnel examples" \
    has_all "$tmp/server.files" /usr/sbin/rgpud /lib/systemd/system/rgpud.service \
        /etc/rgpu/rgpud.conf /usr/share/man/man8/rgpud.8.gz \
        /usr/share/doc/rgpu-server/examples/rgpud-tls-server.conf \
        /usr/share/doc/rgpu-server/examples/rgpu-tls-client.conf \
        /usr/share/doc/rgpu-server/examples/rgpu-tls-certs.sh
check "rgpu-server holds rgpu-opserver, its modules, its sandbox and rgpu-opserver(8)" \
    has_all "$tmp/server.files" /usr/sbin/rgpu-opserver /usr/lib/rgpu/opserver/rgpu_opserver.py \
        /usr/lib/rgpu/opserver/rgpu_wire.py /usr/lib/rgpu/opserver/librgpu-opsandbox.so \
        /usr/share/man/man8/rgpu-opserver.8.gz
check "no test or build-only file in either package (fake GPU, test programs, bench, generator)" \
    bash -c '! grep -Ei "fakegpu|/example$|progs|bench|rgpu-gen|selftest|\.a$|\.h$" "$1" "$2"' _ \
        "$tmp/client.files" "$tmp/server.files"
check "no library of rgpu-client on the system library path (only /opt/rgpu/lib)" \
    bash -c '! grep -E "\.so" "$1" | grep -v "^/opt/rgpu/lib/"' _ "$tmp/client.files"
dpkg-deb -e "$server_deb" "$tmp/server-control"
check "/etc/rgpu/rgpud.conf is a conffile" grep -qx /etc/rgpu/rgpud.conf "$tmp/server-control/conffiles"

# ---- 2. install and run ---------------------------------------------------
must_purge=1
if dpkg -i "$client_deb" "$server_deb" >"$tmp/install.log" 2>&1; then
    ok "dpkg -i installs both packages"
else
    cat "$tmp/install.log"
    die "dpkg -i installs both packages"
fi
check "system user rgpu exists, with its own group" \
    bash -c 'getent passwd rgpu >/dev/null && [ "$(id -gn rgpu)" = rgpu ]'
if getent group video >/dev/null; then
    check "rgpu is in group video (the GPU device nodes)" bash -c 'id -nG rgpu | grep -qw video'
fi
if getent group render >/dev/null; then
    check "rgpu is in group render" bash -c 'id -nG rgpu | grep -qw render'
fi
check "/opt/rgpu/lib is not in the dynamic loader's cache" \
    bash -c '! ldconfig -p | grep -q /opt/rgpu/'
if command -v systemd-analyze >/dev/null; then
    if systemd-analyze verify /lib/systemd/system/rgpud.service >"$tmp/verify.log" 2>&1; then
        ok "systemd-analyze verify rgpud.service"
    else
        cat "$tmp/verify.log"
        fail "systemd-analyze verify rgpud.service"
    fi
fi
check "rgpud.service runs rgpud as rgpu, restarts on failure, reads /etc/rgpu/rgpud.conf" \
    bash -c 'u=/lib/systemd/system/rgpud.service; grep -qx "User=rgpu" $u &&
             grep -qx "Restart=on-failure" $u &&
             grep -qx "EnvironmentFile=-/etc/rgpu/rgpud.conf" $u &&
             grep -qx "ExecStart=/usr/sbin/rgpud \$RGPUD_ARGS" $u'
if command -v man >/dev/null; then
    check "rgpud(8) and rgpu(7) are readable with man" \
        bash -c 'man -P cat 8 rgpud >/dev/null 2>&1 && man -P cat 7 rgpu >/dev/null 2>&1'
fi
# Where systemd runs, dpkg has started the service: say how it fares (not
# counted: a container may lack what the sandboxing needs).
if [ -d /run/systemd/system ]; then
    sleep 2
    echo "# systemd runs here: rgpud.service is $(systemctl is-active rgpud 2>&1)"
    systemctl is-active -q rgpud || journalctl -u rgpud -n 20 --no-pager 2>&1 | sed 's/^/#   /'
fi
check "dpkg -i again (reinstall) works and keeps the user" \
    bash -c 'dpkg -i "$1" "$2" >/dev/null 2>&1 && getent passwd rgpu >/dev/null' _ "$client_deb" "$server_deb"

if ensure_build "$build"; then
    ok "a normal build in $build has the example program and the fake GPU backend"
else
    die "a normal build in $build has the example program and the fake GPU backend"
fi
example=$build/tests/progs/example

# The fake backend, where the rgpu user can read it whatever the build
# folder's permissions.
fake=$tmp/fakegpu
mkdir -m 755 "$fake"
cp "$build/tests/fakegpu/libcuda.so.1" "$build/tests/fakegpu/libcudart.so.$major" "$fake/"
chmod 755 "$fake"/*

check "ldd: the example program loads libcudart from /opt/rgpu/lib" \
    bash -c 'LD_LIBRARY_PATH=/opt/rgpu/lib ldd "$1" | grep -q "libcudart.so.$2 => /opt/rgpu/lib/"' _ \
        "$example" "$major"

# rgpud as the service would run it: the installed binary, as user rgpu,
# with RGPUD_ARGS from the installed configuration; then a free port and
# the fake backend on top (the last --listen wins).
RGPUD_ARGS=
# shellcheck disable=SC1091
. /etc/rgpu/rgpud.conf
check "the installed configuration listens on rgpud's default Unix socket" \
    bash -c 'case " $1 " in *--listen*) exit 1 ;; esac' _ "$RGPUD_ARGS"
check "rgpud.service makes /run/rgpu" \
    grep -qx "RuntimeDirectory=rgpu" /lib/systemd/system/rgpud.service
check "/etc/rgpu/clients: 0700, owned by rgpu" \
    test "$(stat -c '%a %U' /etc/rgpu/clients)" = "700 rgpu"
# /run/rgpu as systemd would make it, here in a folder of the test's.
run=$tmp/run
mkdir -m 755 "$run"
chown rgpu:rgpu "$run"
# shellcheck disable=SC2086  # RGPUD_ARGS is a list of words, as systemd splits it
start_bg "$tmp/rgpud.log" runuser -u rgpu -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    /usr/sbin/rgpud $RGPUD_ARGS --listen "unix:$run/rgpud.sock" --lib-dir "$fake" -v
rgpud_pid=$bg_pid
for _ in $(seq 100); do [ -S "$run/rgpud.sock" ] && break; sleep 0.1; done
if [ -S "$run/rgpud.sock" ]; then
    ok "installed /usr/sbin/rgpud listens"
else
    show "$tmp/rgpud.log"
    die "installed /usr/sbin/rgpud listens"
fi
check "its socket: mode 0660, group rgpu" test "$(stat -c '%a %G' "$run/rgpud.sock")" = "660 rgpu"
listener=$(pgrep -s "$rgpud_pid" -x rgpud | head -1)
check "rgpud runs as user rgpu" test "$(ps -o user= -p "${listener:-0}")" = rgpu
if run_example "$tmp/example" /opt/rgpu/lib "unix:$run/rgpud.sock" && connected "$tmp/example"; then
    ok "example program with LD_LIBRARY_PATH=/opt/rgpu/lib runs through the installed rgpud"
else
    show "$tmp/example.out" "$tmp/example.err" "$tmp/rgpud.log"
    fail "example program with LD_LIBRARY_PATH=/opt/rgpu/lib runs through the installed rgpud"
fi
stop_bg "$rgpud_pid"

# ---- 3. remove, purge, nothing left ---------------------------------------
if dpkg --remove rgpu-client rgpu-server >"$tmp/remove.log" 2>&1; then
    ok "dpkg --remove removes both"
else
    cat "$tmp/remove.log"
    fail "dpkg --remove removes both"
fi
check "after remove: /etc/rgpu/rgpud.conf and the user stay until purge" \
    bash -c '[ -f /etc/rgpu/rgpud.conf ] && getent passwd rgpu >/dev/null && [ ! -e /usr/sbin/rgpud ]'
must_purge=
if purge_all; then
    ok "dpkg --purge purges both"
else
    cat "$tmp/purge.log"
    fail "dpkg --purge purges both"
fi
left=()
for p in /opt/rgpu /etc/rgpu /var/cache/rgpu /usr/sbin/rgpud /lib/systemd/system/rgpud.service \
         /etc/systemd/system/multi-user.target.wants/rgpud.service \
         /usr/share/doc/rgpu-client /usr/share/doc/rgpu-server \
         /usr/share/man/man8/rgpud.8.gz /usr/share/man/man7/rgpu.7.gz; do
    [ -e "$p" ] || [ -L "$p" ] && left+=("$p")
done
for f in /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked; do
    [ -d "$f" ] && while IFS= read -r g; do left+=("$g"); done < <(find "$f" -name 'rgpud.service*')
done
check "after purge: no file of rgpu's left (${left[*]:-none})" test ${#left[@]} -eq 0
check "after purge: no user or group rgpu, no group membership" \
    bash -c '! getent passwd rgpu && ! getent group rgpu && ! grep -Eq "[:,]rgpu(,|$)" /etc/group' 
gone() {
    local status
    status=$(dpkg-query -W -f '${db:Status-Status}' "$1" 2>/dev/null)
    [ -z "$status" ] || [ "$status" = not-installed ]
}
check "after purge: dpkg knows neither package" bash -c "$(declare -f gone); gone rgpu-client && gone rgpu-server"

finish
