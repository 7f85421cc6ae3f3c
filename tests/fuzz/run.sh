#!/bin/sh
# run.sh - runs each libFuzzer harness given as argument for $FUZZ_TIME
# seconds (default 30) on a fresh corpus seeded from the matching testdata
# folder; one TAP-ish line per harness; exits nonzero if any failed.
# usage: FUZZ_TIME=30 sh tests/fuzz/run.sh build-fuzz/fuzz_bnt ...
set -u
FUZZ_TIME=${FUZZ_TIME:-30}
top=$(cd "$(dirname "$0")/../.." && pwd)
n=0
failed=0
for bin in "$@"; do
    n=$((n + 1))
    name=$(basename "$bin")
    case $name in
    fuzz_bnt) seeds="$top/testdata/bnt" ;;
    fuzz_npy) seeds="$top/testdata/npy" ;;
    fuzz_safetensors) seeds="$top/testdata/safetensors $top/testdata/real" ;;
    fuzz_gguf) seeds="$top/testdata/gguf $top/testdata/gguf/bad" ;;
    *) seeds="" ;;
    esac
    work=$(mktemp -d)
    mkdir "$work/corpus" "$work/artifacts"
    for d in $seeds; do
        [ -d "$d" ] || continue
        for f in "$d"/*; do
            [ -f "$f" ] || continue
            case $f in */EXPECTED | */README* | */SHA256SUMS) continue ;; esac
            cp "$f" "$work/corpus/$(basename "$d")_$(basename "$f")"
        done
    done
    if [ ! -x "$bin" ]; then
        echo "not ok $n - $name: no such fuzz binary"
        failed=$((failed + 1))
    elif "$bin" -max_total_time="$FUZZ_TIME" -rss_limit_mb=2048 -timeout=25 \
        -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1; then
        echo "ok $n - $name ($(grep -c . "$work/log") log lines, $(ls "$work/corpus" | wc -l) corpus files)"
    else
        echo "not ok $n - $name"
        tail -n 30 "$work/log" | sed 's/^/#   /'
        for a in "$work"/artifacts/*; do
            [ -f "$a" ] && cp "$a" "./$name-$(basename "$a")" && echo "#   reproducer saved as ./$name-$(basename "$a")"
        done
        failed=$((failed + 1))
    fi
    rm -rf "$work"
done
echo "1..$n"
[ "$failed" -eq 0 ]
