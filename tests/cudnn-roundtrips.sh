#!/bin/bash
# cuDNN's backend graphs wait for rgpud only where the program reads what
# the client cannot know:
#
#   cudnn-roundtrips.sh <build-dir> <cudnn_frontend program> [max waits per graph]
#
# Runs tests/progs/cudnn_frontend.cu through rgpu (run-prog.sh) with 2 and
# with 6 convolution graphs, each built as cudnn-frontend builds PyTorch's
# convolutions, under RGPU_STATS=1.  The 4 extra graphs' cuDNN calls that
# waited, divided by 4, are the waits per graph: printed per procedure, and
# at most the limit (default 10: a graph's eight finalizes, and room).
# Before descriptors were the client's, a graph waited 188 times.  (The
# program's own allocations and copies for each graph are not counted:
# PyTorch's caching allocator makes none.)  Making, setting and destroying
# descriptors must never wait, nor must setting the handle's stream and
# asking it back before each execution (as PyTorch does).  Then the deferred errors: a set cuDNN
# refuses, sent without waiting, is reported by the descriptor's finalize
# or next get (cudnn_frontend deferred-errors), and by the set itself under
# RGPU_SYNC=blocking.
set -u
build=$1
prog=$2
limit=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-dnnrt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# run TAG ARGS...: the program's output, and its stats table as "NAME
# WAITED UNWAITED" lines in $tmp/stats.TAG.
run() {
    local tag=$1
    shift
    if ! RGPU_STATS=1 "$here/run-prog.sh" "$build" "$prog" "$@" >"$tmp/out.$tag" 2>"$tmp/err.$tag"; then
        cat "$tmp/out.$tag" "$tmp/err.$tag" >&2
        echo "cudnn-roundtrips: $prog $* failed" >&2
        exit 1
    fi
    awk '$1 == "rgpu:" && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && NF == 4 && $4 ~ /^(cudnn|rgpu_cudnn)/ { print $4, $2, $3 }' \
        "$tmp/err.$tag" | sort >"$tmp/stats.$tag"
    awk '{ w += $2 } END { print w + 0 }' "$tmp/stats.$tag" >"$tmp/total.$tag"
}
run 2 graphs 2
run 6 graphs 6

fail=0
w2=$(cat "$tmp/total.2")
w6=$(cat "$tmp/total.6")
echo "cuDNN calls that waited: $w2 with 2 graphs, $w6 with 6"
echo "per graph (the 4 extra graphs' difference / 4), by procedure (waited, unwaited):"
join -a 1 -a 2 -e 0 -o 0,1.2,1.3,2.2,2.3 "$tmp/stats.2" "$tmp/stats.6" >"$tmp/joined"
while read -r name a2 u2 a6 u6; do
    dw=$(( (a6 - a2) ))
    du=$(( (u6 - u2) ))
    [ $dw -eq 0 ] && [ $du -eq 0 ] && continue
    printf '  %-36s %6s %6s\n' "$name" "$(awk "BEGIN { print $dw / 4 }")" "$(awk "BEGIN { print $du / 4 }")"
    case $name in
        rgpu_cudnn_backend_create | rgpu_cudnn_backend_set | rgpu_cudnn_backend_destroy | \
        cudnnSetStream | cudnnGetStream)
            if [ $dw -ne 0 ]; then
                echo "FAIL: $name waited $dw times more with 4 more graphs"
                fail=1
            fi ;;
    esac
done <"$tmp/joined"
per_graph=$(awk "BEGIN { print ($w6 - $w2) / 4 }")
echo "waits per graph: $per_graph (at most $limit)"
if awk "BEGIN { exit !(($w6 - $w2) / 4 > $limit) }"; then
    echo "FAIL: $per_graph waits per graph, more than $limit"
    fail=1
fi
grep -q '^ok graph 5: convolution result$' "$tmp/out.6" ||
    { echo "FAIL: the sixth graph's result"; cat "$tmp/out.6"; fail=1; }

# Deferred errors, lazily and with every call waiting.
run lazy deferred-errors
cat "$tmp/out.lazy"
export RGPU_SYNC=blocking
run blocking deferred-errors blocking
unset RGPU_SYNC
cat "$tmp/out.blocking"
[ $fail -eq 0 ] && echo "ok: backend descriptors wait only where the program reads the server"
exit $fail
