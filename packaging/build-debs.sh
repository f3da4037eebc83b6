#!/bin/bash
# Builds the Debian packages rgpu-client and rgpu-server from this source
# tree:
#
#   packaging/build-debs.sh [-o OUTDIR] [dpkg-buildpackage options...]
#
# dpkg-buildpackage wants debian/ at the root of the source tree, and ours
# lives in packaging/debian: so this copies the tree (what git tracks, plus
# files git does not ignore) to a temporary folder, puts packaging/debian
# at its root, writes debian/changelog for the version in meson.build, and
# builds the binary packages there.  The .deb files, with the .changes and
# .buildinfo, land in OUTDIR (default: debs/ at the top of the tree), which
# is emptied of older rgpu packages first.  Then lintian checks them when
# it is installed.
#
# Needs: dpkg-dev, debhelper, fakeroot and the Build-Depends of
# packaging/debian/control (./setup.sh installs most), and the CUDA toolkit
# at /usr/local/cuda (RGPU_TOOLKIT=PREFIX for another).  See
# docs/packaging.md.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
out=$src/debs
if [ "${1:-}" = -o ]; then
    [ $# -ge 2 ] || { echo "usage: $0 [-o OUTDIR] [dpkg-buildpackage options...]" >&2; exit 2; }
    out=$2
    shift 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

missing=
for tool in dpkg-buildpackage:dpkg-dev dh:debhelper fakeroot:fakeroot meson:meson; do
    command -v "${tool%%:*}" >/dev/null || missing="$missing ${tool#*:}"
done
if [ -n "$missing" ]; then
    echo "build-debs: missing tools: apt-get install$missing (and ./setup.sh)" >&2
    exit 1
fi

toolkit=${RGPU_TOOLKIT:-/usr/local/cuda}
if [ ! -e "$toolkit/include/cuda.h" ]; then
    echo "build-debs: no CUDA toolkit at $toolkit (set RGPU_TOOLKIT=PREFIX)" >&2
    exit 1
fi
export RGPU_TOOLKIT=$toolkit

version=$(meson introspect --projectinfo "$src/meson.build" |
          python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
maintainer=$(sed -n 's/^Maintainer: *//p' "$src/packaging/debian/control")
# The date of the last commit, so that two builds of one commit match.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

work=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-debs.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/rgpu-$version
mkdir "$tree"

# The source files: git's view of the tree when there is one (build
# folders and other ignored files stay out), else everything but those.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
            case $f in debs/*) continue ;; esac   # earlier packages
            [ -e "$f" ] && printf '%s\0' "$f"
        done |
        tar --null -T - -cf -) | tar -xf - -C "$tree"
else
    tar -C "$src" --exclude=./build --exclude=./debs --exclude=./.git -cf - . |
        tar -xf - -C "$tree"
fi
# NVML's header, which setup.sh unpacks into .deps (ignored by git).
if [ -d "$src/.deps/nvml" ]; then
    mkdir -p "$tree/.deps"
    cp -a "$src/.deps/nvml" "$tree/.deps/"
fi
rm -rf "$tree/debian"
cp -a "$src/packaging/debian" "$tree/debian"
cat >"$tree/debian/changelog" <<CHANGELOG
rgpu ($version) bookworm; urgency=medium

  * Packages of rgpu $version, built from the source tree
    (debian/changelog is written by packaging/build-debs.sh).

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
CHANGELOG

(cd "$tree" && dpkg-buildpackage --build=binary --no-sign "$@")

rm -f "$out"/rgpu-client_* "$out"/rgpu-server_* "$out"/rgpu-*-dbgsym_* "$out"/rgpu_*
for f in "$work"/*.deb "$work"/*.ddeb "$work"/*.changes "$work"/*.buildinfo; do
    [ -e "$f" ] && mv "$f" "$out/"
done
echo "build-debs: packages in $out:"
ls -1 "$out"
if command -v lintian >/dev/null; then
    echo "build-debs: lintian:"
    lintian --display-info --pedantic "$out"/rgpu_"${version}"_*.changes || true
fi
