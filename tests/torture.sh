#!/bin/sh
# torture.sh - the long campaigns behind `make torture` (see the Makefile):
#   1. the full fault campaign (tests/fault/campaign.sh full) on the
#      sanitizer build (build-san: AddressSanitizer, LeakSanitizer, UBSan),
#      bounded by CAMPAIGN_TIME seconds;
#   2. every libFuzzer harness given as argument (tests/fuzz/fuzz_*.c, new
#      ones included) for FUZZ_TIME seconds each, growing the committed corpus
#      (FUZZ_GROW=1 unless set);
#   3. valgrind memcheck over the CLI tests that run on the CPU only: runs that
#      touch OpenCL (--device opencl or auto, --devices, --list-devices,
#      --calibrate, --backends) are not wrapped, as the OpenCL loader and
#      driver (PoCL's JIT) are outside what memcheck can judge in reasonable
#      time and report their own loader errors; zero errors wanted.
# Ends with "N passed, N failed" like tests/run.sh.
# CAMPAIGN_TIME=0 skips the campaign, no harness skips the fuzzing, VALGRIND=0
# skips memcheck, VALGRIND_TESTS="convert op" picks the CLI tests it wraps,
# VALGRIND_TIME=S starts no test after S seconds of memcheck.
# usage: BUILD=build CAMPAIGN_TIME=600 FUZZ_TIME=600 VALGRIND=1 sh tests/torture.sh build-fuzz/fuzz_*
set -u
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
pass=0
fail=0
tally() { # log
    p=$(grep -c '^ok ' "$1")
    f=$(grep -c '^not ok ' "$1")
    pass=$((pass + p))
    fail=$((fail + f))
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if [ "${CAMPAIGN_TIME:-600}" -gt 0 ]; then
    echo "# fault campaign (full, build-san, at most ${CAMPAIGN_TIME:-600} s)"
    BUILD=build-san CAMPAIGN_TIME=${CAMPAIGN_TIME:-600} sh "$top/tests/fault/campaign.sh" full >"$log" 2>&1
    rc=$?
    grep -v '^ok ' "$log"
    tally "$log"
    [ $rc -ne 0 ] && [ "$(grep -c '^not ok ' "$log")" -eq 0 ] && { echo "not ok - the campaign exited $rc"; fail=$((fail + 1)); }
fi

if [ $# -gt 0 ]; then
    echo "# fuzzing, ${FUZZ_TIME:-600} s per harness"
    FUZZ_GROW=${FUZZ_GROW:-1} FUZZ_TIME=${FUZZ_TIME:-600} sh "$top/tests/fuzz/run.sh" "$@" >"$log" 2>&1
    cat "$log"
    tally "$log"
fi

if [ "${VALGRIND:-1}" != 0 ]; then
    # valgrind by its full path: some cases run the tools with a PATH of
    # their own (no gnuplot on it, say), where a bare name is not found
    vgexe=$(command -v valgrind 2>/dev/null)
    if [ -z "$vgexe" ]; then
        echo "not ok - valgrind is not installed (tools/install-deps.sh)"
        fail=$((fail + 1))
    else
        echo "# valgrind memcheck over the CPU-only CLI tests"
        vg=$(mktemp -d)
        mkdir "$vg/bin" "$vg/logs"
        chmod 755 "$vg" "$vg/bin" # the read-only-directory case runs them as nobody
        chmod 1777 "$vg/logs"
        for t in "$top/$BUILD"/bin/bitnet-*; do
            name=$(basename "$t")
            cat >"$vg/bin/$name" <<EOF
#!/bin/sh
for a in "\$@"; do case \$a in *opencl* | auto | --device=auto | --devices | --list-devices | --calibrate | --backends) exec "$t" "\$@" ;; esac; done
[ -n "\${BITNET_DEVICE:-}" ] && [ "\$BITNET_DEVICE" != cpu ] && exec "$t" "\$@"
exec "$vgexe" -q --tool=memcheck --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \\
    --log-file="$vg/logs/$name.%p" "$t" "\$@"
EOF
            chmod +x "$vg/bin/$name"
        done
        # gguf, linalg and verify take more than 3 minutes each under memcheck on
        # a 2-core machine (about 200, 240 and 250 s): by hand, VALGRIND_TESTS
        # VALGRIND_TIME (seconds, 0: no bound) stops starting tests once spent;
        # the ones left are named, not failed
        vg_start=$(date +%s)
        for t in ${VALGRIND_TESTS:-convert info quantize op matmul bnt_corpus outputs common hf_bitnet keep bench}; do
            f=$top/tests/cli/test_$t.sh
            [ -f "$f" ] || continue
            if [ "${VALGRIND_TIME:-0}" -gt 0 ] && [ $(($(date +%s) - vg_start)) -ge "$VALGRIND_TIME" ]; then
                echo "# valgrind: time is up (${VALGRIND_TIME} s): test_$t left untried"
                continue
            fi
            BIN="$vg/bin" TEST_BIN="$top/$BUILD/test-bin" TESTDATA="$top/testdata" BUILD="$BUILD" sh "$f" >"$log" 2>&1
            runs=$(ls "$vg/logs" | wc -l)
            # with -q a log holds something only when memcheck found an error
            bad=$(find "$vg/logs" -type f -size +0 | wc -l)
            if [ "$bad" -eq 0 ]; then
                echo "ok - valgrind: test_$t, $runs runs, 0 with errors"
                pass=$((pass + 1))
            else
                echo "not ok - valgrind: test_$t, $bad of $runs runs with errors"
                find "$vg/logs" -type f -size +0 -exec cat {} + | head -40 | sed 's/^/#   /'
                fail=$((fail + 1))
            fi
            # the CLI test's own assertions under valgrind are informative only
            # (timing-sensitive cases such as signals may differ)
            grep '^not ok' "$log" | sed 's/^/#   (under valgrind) /' | head -5
            rm -f "$vg/logs"/*
        done
        rm -rf "$vg"
    fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
