#!/bin/sh
# run.sh - runs the unit tests (cmocka, TAP output) and the CLI tests (shell,
# TAP output), counts every "ok"/"not ok" line, and ends with the summary
# line "N passed, N failed".  usage: BUILD=build sh tests/run.sh [unit|cli]
set -u
BUILD=${BUILD:-build}
what=${1:-all}
top=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Under -fsanitize=address, ignore what the OpenCL drivers keep for the life
# of the process (tests/lsan.supp); our own leaks are still reported.
export LSAN_OPTIONS="suppressions=$top/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
pass=0
fail=0
crashed=""

# A program whose tests all passed but whose LeakSanitizer tracer then died
# (SIGSEGV while it stops the OpenCL driver's threads: "LeakSanitizer has
# encountered a fatal error", no leak report) is run again, up to three
# times, as tests/cli/lib.sh does for each command (seen on test_linalg).
lsan_tracer_died() {
    [ "$rc" -ne 0 ] && ! grep -q '^not ok ' "$log" &&
        grep -q 'LeakSanitizer has encountered a fatal error' "$log" &&
        ! grep -q 'ERROR: LeakSanitizer: detected memory leaks' "$log"
}

run_one() { # name, command...
    name=$1
    shift
    echo "# $name"
    t0=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    again=0
    while [ "$again" -lt 3 ] && lsan_tracer_died; do
        again=$((again + 1))
        echo "# LeakSanitizer's tracer failed (not a leak report): running $name again ($again)"
        "$@" >"$log" 2>&1
        rc=$?
    done
    cat "$log"
    echo "# $name took $(($(date +%s) - t0)) s" # where CI's time goes
    p=$(grep -c '^ok ' "$log")
    f=$(grep -c '^not ok ' "$log")
    pass=$((pass + p))
    fail=$((fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash or an early exit with no failed assertion still fails
        echo "not ok - $name exited with status $rc"
        fail=$((fail + 1))
        crashed="$crashed $name"
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$rc" -eq 0 ]; then
        echo "not ok - $name ran no test"
        fail=$((fail + 1))
    fi
}

if [ "$what" = all ] || [ "$what" = unit ]; then
    for t in "$BUILD"/tests/test_*; do
        [ -x "$t" ] || continue
        CMOCKA_MESSAGE_OUTPUT=TAP BITNET_TESTDATA="$top/testdata" run_one "$(basename "$t")" "$t"
    done
fi
if [ "$what" = all ] || [ "$what" = cli ]; then
    # Each CLI test starts with empty caches (tests/cli/lib.sh), our kernel
    # cache and PoCL's alike, so every script had PoCL compile the same
    # kernels again: test_bench spent 25 of its 100 s compiling for one
    # matmul_f32 row.  PoCL's compiled kernels (keyed by source and options)
    # are shared by the scripts of a run and by later runs; ours stay fresh.
    export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$top/build-pocl-cache}"
    mkdir -p "$POCL_CACHE_DIR"
    for t in "$top"/tests/cli/test_*.sh; do
        [ -f "$t" ] || continue
        BIN="$top/$BUILD/bin" TESTDATA="$top/testdata" BUILD="$BUILD" run_one "$(basename "$t" .sh)" sh "$t"
    done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
