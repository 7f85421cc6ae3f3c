#!/bin/sh
# run.sh - runs each libFuzzer harness given as argument for $FUZZ_TIME
# seconds (default 30) on a fresh corpus seeded from the committed corpus
# tests/fuzz/corpus/<harness>/ and the matching testdata folder; one TAP-ish
# line per harness (executions, coverage); exits nonzero if any failed.
# FUZZ_GROW=1 merges the inputs that reached new coverage back into the
# committed corpus (libFuzzer -merge=1), so each long campaign starts where
# the last one ended.
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
    seeds="$seeds $top/tests/fuzz/corpus/$name"
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
        stats=$(grep -E '^#[0-9]+' "$work/log" | tail -1 | sed -n 's/^#\([0-9]*\).*cov: \([0-9]*\) ft: \([0-9]*\).*/\1 executions, coverage \2 edges, \3 features/p')
        echo "ok $n - $name (${FUZZ_TIME} s: ${stats:-no stats}; $(ls "$work/corpus" | wc -l) corpus files)"
        if [ "${FUZZ_GROW:-0}" = 1 ]; then
            mkdir -p "$top/tests/fuzz/corpus/$name"
            before=$(ls "$top/tests/fuzz/corpus/$name" | wc -l)
            "$bin" -merge=1 -rss_limit_mb=2048 -timeout=25 "$top/tests/fuzz/corpus/$name" "$work/corpus" >"$work/merge" 2>&1
            # small inputs only: the big real models are already in testdata/
            find "$top/tests/fuzz/corpus/$name" -type f -size +64k -delete
            echo "# $name: committed corpus $before -> $(ls "$top/tests/fuzz/corpus/$name" | wc -l) files"
        fi
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
