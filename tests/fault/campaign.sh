#!/bin/sh
# campaign.sh - the fault campaign: runs real jobs (a conversion, a
# quantization, BitLinear on the CPU, on OpenCL and under auto) with the
# LD_PRELOAD shim tests/fault/shim.c failing the Nth write (ENOSPC, then
# EIO), cutting the Nth write short (a short count, no error), failing the
# Nth fsync, rename, malloc, clCreateBuffer, clEnqueueNDRangeKernel or
# clBuildProgram, and checks every run: the exit status is documented for that fault (3 for I/O,
# 4 for a device under --device opencl, 0 with a correct result and one
# warning under auto, 1 or 3 for memory), a message names the tool, a
# failed run leaves the old target byte for byte, a successful one leaves the
# right result, no temporary is left anywhere, no crash, no sanitizer report.
#
# usage: BUILD=build sh tests/fault/campaign.sh [quick|full]
#   quick  N = 1, the middle one and the last, for each call; no quantization
#          (make check)
#   full   every N from 1 to the number of calls (make torture); each
#          scenario gets CAMPAIGN_TIME / scenarios seconds (CAMPAIGN_TIME
#          default 600), the allocation faults last; what is left untried
#          is counted in the summary
# Output: TAP lines, then a summary "# campaign: ..." with the figures.
set -u
mode=${1:-quick}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$top/$BUILD/bin
SHIM=$top/$BUILD/tests/fault/shim.so
TD=$top/testdata
CAMPAIGN_TIME=${CAMPAIGN_TIME:-600}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export XDG_CACHE_HOME="$W/cache"
# PoCL keeps its compiled kernels apart and warm: our cache is emptied often
export POCL_CACHE_DIR="$W/pocl-cache"
export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$top/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
n=0 failed=0 skipped=0 cases=0 fired=0 crashes=0 leaks=0 partial=0 temps=0 wrong=0
start=$(date +%s)

ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }

[ -f "$SHIM" ] || { echo "not ok 1 - no $SHIM (make tests)"; echo "1..1"; exit 1; }

HEP=$TD/real/hep-bitnet-mnist-b158.safetensors
"$BIN/bitnet-quantize" "$HEP" -o "$W/q.bnt" 2>/dev/null || { echo "not ok 1 - cannot quantize the model"; exit 1; }
"$BIN/bitnet-convert" "$TD/demo/digits.npy" -o "$W/x.npy" 2>/dev/null || cp "$TD/demo/digits.npy" "$W/x.npy"
have_opencl=0
"$BIN/bitnet-info" --devices 2>/dev/null | grep -q 'opencl:0' && have_opencl=1

# scenario NAME: sets tool, output name and the command (in "$@" form via cmd_NAME)
cmd() { # scenario outdir
    case $1 in
    convert) echo "$BIN/bitnet-convert $HEP -o $2/out.bnt" ;;
    quantize) echo "$BIN/bitnet-quantize $HEP -o $2/out.bnt" ;;
    bitlinear-cpu) echo "$BIN/bitnet-matmul --device cpu -w $W/q.bnt:layers.0.weight --bias $W/q.bnt:layers.0.bias -x $W/x.npy -o $2/out.npy" ;;
    bitlinear-opencl) echo "$BIN/bitnet-matmul --device opencl -w $W/q.bnt:layers.0.weight --bias $W/q.bnt:layers.0.bias -x $W/x.npy -o $2/out.npy" ;;
    bitlinear-auto) echo "$BIN/bitnet-matmul --device auto -w $W/q.bnt:layers.0.weight --bias $W/q.bnt:layers.0.bias -x $W/x.npy -o $2/out.npy" ;;
    esac
}
outname() { case $1 in convert | quantize) echo out.bnt ;; *) echo out.npy ;; esac; }
scenarios="convert quantize bitlinear-cpu"
[ "$mode" = quick ] && scenarios="convert bitlinear-cpu"
[ $have_opencl = 1 ] && scenarios="$scenarios bitlinear-opencl bitlinear-auto"
[ $have_opencl = 1 ] || echo "# skipped: OpenCL scenarios (no OpenCL device)"
[ -n "${CAMPAIGN_SCENARIOS:-}" ] && scenarios=$CAMPAIGN_SCENARIOS # e.g. "convert quantize"

# what the message of a failed OpenCL step must name
step_word() { case $1 in clBuildProgram) echo 'build' ;; *) echo "$1" ;; esac; }

# N values to try out of COUNT calls
pick() { # count
    c=$1
    if [ "$mode" = full ]; then seq 1 "$c"; return; fi
    { echo 1; echo $(((c + 1) / 2)); echo "$c"; } |
        awk -v c="$c" '$1 >= 1 && $1 <= c' | sort -n | uniq
}

nsc=$(echo $scenarios | wc -w)
for sc in $scenarios; do
    sc_start=$(date +%s)
    d=$W/run
    rm -rf "$d" "$W/cache"
    mkdir -p "$d"
    unset BITNET_AUTO_MIN_BYTES
    case $sc in bitlinear-auto) export BITNET_AUTO_MIN_BYTES=0 ;; esac
    # the clean run: golden output and the number of calls of each class;
    # then the cache is warm, and a second count covers runs with a warm cache
    # shellcheck disable=SC2046
    rm -f "$W/count"
    BN_FAULT_LOG="$W/count" LD_PRELOAD="$SHIM" $(cmd $sc "$d") \
        >/dev/null 2>"$W/clean.err"
    rc=$?
    out=$(outname $sc)
    if [ $rc -ne 0 ] || [ ! -f "$d/$out" ]; then
        notok "$sc: the clean run under the shim works (exit $rc)"; sed 's/^/#   /' "$W/clean.err" | head -5
        continue
    fi
    cp "$d/$out" "$W/golden"
    ok "$sc: the clean run under the shim works"
    printf 'old target\n' > "$W/old"
    for class in write write-eio short fsync rename clCreateBuffer clEnqueueNDRangeKernel clBuildProgram malloc; do
        # quick: the OpenCL runs try only the OpenCL faults (the others are
        # the same code as on the CPU, and every OpenCL run costs a second)
        case $mode:$sc:$class in quick:bitlinear-opencl:[!c]* | quick:bitlinear-auto:[!c]*) continue ;; esac
        # write-eio: the write faults again, as an I/O error instead of a full disk
        counted=${class%-eio}
        fault_errno=ENOSPC
        [ "$class" = write-eio ] && fault_errno=EIO
        count=$(awk -v c=$counted '$1 == c {print $2; exit}' "$W/count")
        [ "${count:-0}" -gt 0 ] || continue
        bad_before=$failed
        tried=0
        for N in $(pick "$count"); do
            if [ "$mode" = full ] && [ $(($(date +%s) - sc_start)) -ge $((CAMPAIGN_TIME / nsc)) ]; then
                echo "# time is up ($((CAMPAIGN_TIME / nsc)) s per scenario): $sc $class stopped at N=$N of $count"
                skipped=$((skipped + count - N + 1))
                break
            fi
            tried=$((tried + 1))
            cases=$((cases + 1))
            rm -rf "$d" "$W/log"
            mkdir -p "$d"
            cp "$W/old" "$d/$out"
            # every other case starts without a kernel cache: builds are tried too
            [ $((N % 2)) -eq 0 ] && rm -rf "$W/cache"
            # shellcheck disable=SC2046
            BN_FAULT="$counted:$N" BN_FAULT_ERRNO=$fault_errno BN_FAULT_LOG="$W/log" LD_PRELOAD="$SHIM" \
                $(cmd $sc "$d") >/dev/null 2>"$W/err"
            rc=$?
            what="$sc, $class #$N"
            grep -q '^fired' "$W/log" 2>/dev/null && fired=$((fired + 1))
            problem=""
            if [ $rc -ge 128 ]; then
                crashes=$((crashes + 1)); problem="crashed (status $rc)"
            elif grep -q 'ERROR: AddressSanitizer\|runtime error:' "$W/err"; then
                crashes=$((crashes + 1)); problem="sanitizer report"
            elif grep -q 'ERROR: LeakSanitizer' "$W/err"; then
                leaks=$((leaks + 1)); problem="leak"
            fi
            if [ -n "$(find "$d" "$W/cache" -name '.*.bnpart.*' 2>/dev/null)" ]; then
                temps=$((temps + 1)); problem="$problem; a temporary was left"
            fi
            if [ $rc -eq 0 ]; then
                if ! cmp -s "$d/$out" "$W/golden" &&
                    ! "$BIN/bitnet-verify" -q --compare "$W/golden" "$d/$out" >/dev/null 2>&1; then
                    wrong=$((wrong + 1)); problem="$problem; exit 0 with a wrong output"
                fi
                if [ $sc = bitlinear-auto ] && [ "$(grep -c 'warning:' "$W/err")" -gt 1 ]; then
                    problem="$problem; more than one warning"
                fi
                # a device fault under auto: a warning names it, then the CPU
                # (none when the library recovered on the device: a cached
                # binary that fails to build is rebuilt from source)
                case $sc:$class in bitlinear-auto:cl*)
                    if grep -q 'warning:' "$W/err" && ! grep -q "warning: OpenCL failed.*$(step_word $class)" "$W/err"; then
                        problem="$problem; the warning does not name the failed step"
                    fi ;;
                esac
            elif [ $rc -lt 128 ]; then
                if ! cmp -s "$d/$out" "$W/old"; then
                    partial=$((partial + 1)); problem="$problem; the old target was changed"
                fi
                head -1 "$W/err" | grep -q "^bitnet-[a-z]*: " || problem="$problem; no message naming the tool"
                case $class:$sc in
                write:* | write-eio:* | short:* | fsync:* | rename:*) allowed="3" ;;
                malloc:*) allowed="1 3 4" ;;
                cl*:bitlinear-opencl) allowed="4" ;;
                cl*:bitlinear-auto) allowed="" ;; # auto must fall back
                *) allowed="" ;;
                esac
                case " $allowed " in *" $rc "*) ;; *) problem="$problem; exit $rc (documented: ${allowed:-0})" ;; esac
                case $class:$sc in cl*:bitlinear-opencl)
                    grep -q "$(step_word $class)" "$W/err" || problem="$problem; the message does not name the failed step" ;;
                esac
            fi
            if [ -n "$problem" ]; then
                notok "$what: ${problem#; }"
                sed 's/^/#   /' "$W/err" | head -4
            fi
        done
        [ $failed -eq $bad_before ] && ok "$sc: $tried faults of $class (of $count calls) handled as documented"
    done
done
echo "# campaign ($mode): $cases cases, $fired faults injected, $crashes crashes, $leaks leaks, $partial partial or changed targets, $temps leftover temporaries, $wrong wrong outputs; $skipped cases left untried for time, $(($(date +%s) - start)) s"
echo "1..$n"
[ $failed -eq 0 ]
