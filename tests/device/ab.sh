#!/bin/bash
# ab.sh - this build (.device/bin) against an earlier one (.device/bin-base)
# on the GPU machine, in one device call (after `. .device/env.sh`): the
# OpenCL unit tests staged in .device/tests on the native driver
# (with AB_TESTS=1: on an H100 test_bitlinear alone builds for minutes), then
# alternating rounds of the caller's-view BitLinear cases (host pointers with
# kept weights, and device resident), the feed-forward block, and the CPU
# backend's BitLinear at 1 and 64 tokens.  Extra environment settings to try
# on this build go in AB_ENV (e.g. AB_ENV="BITNET_CACHE=0"): each round
# then runs this build with and without them; AB_NO_CPU=1 leaves out the
# CPU cases (the CPU BitLinear alternates the two builds too), AB_NO_GPU=1
# the GPU ones, AB_NOCHECK=1 the reference checks.  AB_FFN_ONLY=1 keeps only
# the feed-forward block, on the GPU for each build and on the host CPU, in
# every round (the ratio run by run); AB_TRACE=path of a cltrace.so
# (tests/device/cltrace.c) adds, after the rounds, one traced run of the
# block per build with each kernel's device time (trace-base.txt,
# trace-new.txt).  Markdown under $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=.device
ROUNDS=${ROUNDS:-2}
common="--scale row --format md --min-time 0.2${AB_NOCHECK:+ --no-check}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
lscpu | grep -E 'Model name|^CPU\(s\)' > "$OUT/cpu.txt"
for t in "$D"/tests/test_*; do
    [ -n "${AB_TESTS:-}" ] && [ -x "$t" ] || continue
    # the mma grid natively only (the emulated one is CI's; on NVIDIA it took minutes)
    BITNET_TEST_MMA=native CMOCKA_MESSAGE_OUTPUT=TAP timeout 300 "$t" > "$OUT/$(basename "$t").log" 2>&1
    echo "$(basename "$t"): exit $?, $(grep -c '^ok ' "$OUT/$(basename "$t").log") ok, $(grep -c '^not ok ' "$OUT/$(basename "$t").log") not ok"
done | tee "$OUT/unit-summary.txt"
run() { # label, env, binary dir, bench arguments...
    local label=$1 envs=$2 bin=$3
    shift 3
    echo "== $label" >> "$OUT/ab.md"
    env $envs "$bin/bitnet-bench" "$@" >> "$OUT/ab.md" 2>> "$OUT/ab-stderr.txt"
}
for r in $(seq 1 "$ROUNDS"); do
    [ -n "${AB_NO_GPU:-}" ] && break
    for v in base new extra; do
        case $v in
        base) bin=$D/bin-base envs="" ;;
        new) bin=$D/bin envs="" ;;
        extra) [ -n "${AB_ENV:-}" ] || continue; bin=$D/bin envs=$AB_ENV ;;
        esac
        if [ -z "${AB_FFN_ONLY:-}" ]; then
            run "round $r $v: BitLinear, host pointers, weights kept" "$envs" "$bin" --device opencl --op bitlinear \
                --shape 16384x16384 --shape 4096x14336 --tokens 1,64 --keep-weights $common
            run "round $r $v: BitLinear, device resident" "$envs" "$bin" --device opencl --op bitlinear \
                --shape 16384x16384 --shape 4096x14336 --tokens 1,64 --resident $common
        fi
        run "round $r $v: ffn 4096x14336 on the GPU" "$envs" "$bin" --device opencl --op ffn --shape 4096x14336 \
            --tokens 1,8,64 $common
    done
    [ -n "${AB_FFN_ONLY:-}" ] && [ -z "${AB_NO_CPU:-}" ] &&
        run "round $r: ffn 4096x14336 on the host CPU" "" $D/bin --device cpu --op ffn --shape 4096x14336 \
            --tokens 1,8,64 $common
done
if [ -n "${AB_TRACE:-}" ] && [ -z "${AB_NO_GPU:-}" ]; then
    for v in base new; do
        bin=$D/bin
        [ $v = base ] && bin=$D/bin-base
        CLTRACE=$OUT/trace-$v.txt CLTRACE_KTIME=1 LD_PRELOAD=$AB_TRACE "$bin/bitnet-bench" --device opencl --op ffn \
            --shape 4096x14336 --tokens 1 --scale row --no-check --min-time 0.3 > /dev/null 2>> "$OUT/ab-stderr.txt"
        echo "== traced ffn, one token, $v: kernels (device time, us): name, count, mean, min, total" >> "$OUT/ab.md"
        sed -n '2,/^# totals/p' "$OUT/trace-$v.txt" | grep -v '^#' >> "$OUT/ab.md"
    done
fi
[ -n "${AB_NO_CPU:-}${AB_FFN_ONLY:-}" ] && { cat "$OUT/ab.md"; exit 0; }
run "ffn 4096x14336 on the host CPU" "" $D/bin --device cpu --op ffn --shape 4096x14336 --tokens 1,8,64 $common
for r in $(seq 1 "$ROUNDS"); do
    for v in base new; do
        bin=$D/bin
        [ $v = base ] && bin=$D/bin-base
        run "round $r $v: CPU BitLinear, rotated through 1.3 GB" "" $bin --device cpu --op copy,bitlinear \
            --shape 4096x14336 --tokens 1,8,64 --scale tensor --llc 300 --format md --min-time 0.2
    done
done
cat "$OUT/ab.md"
