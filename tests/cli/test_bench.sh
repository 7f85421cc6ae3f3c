#!/bin/sh
# test_bench.sh - bitnet-bench: every op on cpu and opencl (PoCL here), every
# output format parses, the plot is drawn, planted bugs become FAIL rows and
# exit status 1, usage and device errors get their exit statuses.
. "$(dirname "$0")/lib.sh"

# PoCL's LLVM compiler leaks when it builds a kernel on a cold cache: not
# ours, so LeakSanitizer (CI's SAN=1 run) is told to ignore those two modules.
printf 'leak:libpocl\nleak:libLLVM\n' >"$T/lsan.supp"
export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# tiny and fast: two timed calls, no minimum time, a 1 MiB roofline
FAST="--min-reps 2 --min-time 0 --warmup 1 --roofline-size 1 --max-mem 256"
bench() { bitnet-bench $FAST "$@"; }

have_opencl=0
if bitnet-bench --list-devices 2>/dev/null | grep -q 'opencl:0'; then have_opencl=1; fi
DEVS=cpu
[ $have_opencl = 1 ] && DEVS=cpu,opencl

# ---- help, version, usage errors, device errors ----
expect_rc 0 "--help exits 0" bitnet-bench --help
expect_out "--min-reps" "--help lists the flags"
expect_rc 0 "--version exits 0" bitnet-bench --version
expect_out "bitnet-bench " "--version names the tool"
expect_rc 2 "unknown op is a usage error" bench --op nosuch
expect_err "unknown op 'nosuch'" "unknown op is named, with the ops of this build"
expect_rc 2 "bad shape is a usage error" bench --op add --shape 0x5
expect_rc 2 "bad sweep is a usage error" bench --op add --sweep 64:16:x2
expect_rc 2 "bad format is a usage error" bench --op add --shape 8 --format xml
expect_rc 2 "bad scale kind is a usage error" bench --op bitlinear --shape 8x8 --scale group:0
expect_rc 2 "bad token count is a usage error" bench --op bitlinear --shape 8x8 --tokens 0
expect_rc 4 "a missing device exits 4" bench --op add --shape 8 --device opencl:99
expect_rc 2 "a malformed device spec exits 2" bench --op add --shape 8 --device gpu

# ---- every op on every device, checked against the reference ----
for op in copy transfer quantize_weights quantize_acts dequantize_weights t3_unpack bitlinear matmul_f32 \
          add gelu softmax sum layernorm permute file; do
    expect_rc 0 "$op runs on $DEVS" bench --op $op --shape 17x300 --tokens 1,3 --device $DEVS --format csv
    # every row's check is ok or - (not applicable), never FAIL/error
    check "$op: every check passes" sh -c "tail -n +2 '$T/out' | awk -F, '\$20 != \"ok\" && \$20 != \"-\" {bad=1} END {exit bad}'"
    rows=$(tail -n +2 "$T/out" | wc -l)
    if [ $op = transfer ] && [ $have_opencl = 0 ]; then
        check "transfer: no rows without an OpenCL device" test "$rows" -eq 0
    else
        check "$op: produced rows ($rows)" test "$rows" -ge 1
    fi
    case $op in
    t3_unpack|file) check "$op runs on the host" sh -c "tail -n +2 '$T/out' | cut -d, -f3 | grep -qx host" ;;
    transfer) [ $have_opencl = 1 ] && check "transfer rows are on opencl only" \
                  sh -c "! tail -n +2 '$T/out' | cut -d, -f3 | grep -qx cpu" ;;
    *) check "$op has a cpu row" sh -c "tail -n +2 '$T/out' | cut -d, -f3 | grep -qx cpu"
       if [ $have_opencl = 1 ]; then
           check "$op has an opencl row" sh -c "tail -n +2 '$T/out' | cut -d, -f3 | grep -qx opencl"
       fi ;;
    esac
done
bench --op bitlinear --shape 17x300 --tokens 1,3 --format csv >"$T/bl.csv" 2>/dev/null
check "bitlinear: one row per scale kind and token count" test "$(tail -n +2 "$T/bl.csv" | wc -l)" -eq 6
check "bitlinear counts GOP/s" sh -c "tail -n +2 '$T/bl.csv' | awk -F, '\$17 == \"\" {bad=1} END {exit bad}'"
check "file covers zlib 0, 1, 6 and 1, 2 threads" \
    sh -c "bitnet-bench $FAST --op file --shape 8x256 --format csv | cut -d, -f2 | sort | tr '\n' ' ' | grep -q 'read z0 read z1 read z6 variant write z0 t1 write z0 t2 write z1 t1 write z1 t2 write z6 t1 write z6 t2'"

# ---- planted bugs are caught ----
for p in bitlinear:bitlinear binary:add quantize_weights:quantize_weights unary:gelu; do
    hook=${p%%:*}; op=${p#*:}
    BITNET_TEST_PERTURB=$hook expect_rc 1 "planted bug in $hook: exit 1" "$TEST_BIN/bitnet-bench" $FAST --op $op --shape 64x512 --device $DEVS
    expect_out "FAIL" "planted bug in $hook: FAIL row"
    expect_err "check FAILED" "planted bug in $hook: named on stderr"
done
expect_rc 0 "--no-check skips the checks" env BITNET_TEST_PERTURB=bitlinear "$TEST_BIN/bitnet-bench" $FAST --op bitlinear \
    --shape 64x512 --no-check
# above 2^28 multiply-adds BitLinear is checked on 64 rows spread over the output, every token
BITNET_TEST_PERTURB=bitlinear expect_rc 1 "planted bug, sampled check: exit 1" "$TEST_BIN/bitnet-bench" $FAST \
    --op bitlinear --shape 4096x4096 --tokens 17 --scale row --device cpu
expect_out "FAIL" "planted bug, sampled check: FAIL row"
expect_err "check FAILED: row 0, element = token: element 0 is" "planted bug, sampled check: the row named"
expect_rc 0 "sampled check: every scale kind ok" "$TEST_BIN/bitnet-bench" $FAST --op bitlinear --shape 4096x4096 --tokens 17 \
    --scale tensor,row,group:128 --device cpu --format csv
check "sampled check: three rows ok" test "$(grep -c ',ok,' "$T/out")" -eq 3
# and the float product likewise, on 64 rows of W
BITNET_TEST_PERTURB=matmul_f32 expect_rc 1 "planted bug in matmul_f32, sampled check: exit 1" "$TEST_BIN/bitnet-bench" $FAST \
    --op matmul_f32 --shape 4096x4096 --tokens 17 --device cpu
expect_err "check FAILED: 64 rows spread over the output: " "planted bug in matmul_f32, sampled check: named"
expect_rc 0 "matmul_f32 sampled check: ok" "$TEST_BIN/bitnet-bench" $FAST --op matmul_f32 --shape 4096x4096 --tokens 17 \
    --device cpu --format csv
check "matmul_f32 sampled check: the row ok" test "$(grep -c ',ok,' "$T/out")" -eq 1

# ---- formats ----
expect_rc 0 "csv" bench --op add,bitlinear,file --shape 17x300 --tokens 1,8 --device $DEVS --format csv
check "csv: same column count on every row" sh -c "awk -F, '{print NF}' '$T/out' | sort -u | wc -l | grep -qx 1"
check "csv: header names the columns" sh -c "head -1 '$T/out' | grep -q '^op,variant,device,shape,m,k,tokens,time_ms'"
expect_rc 0 "md" bench --op add,bitlinear --shape 17x300 --format md
check "md: every table line has the same number of cells" \
    sh -c "grep '^|' '$T/out' | awk -F'|' '{print NF}' | sort -u | wc -l | grep -qx 1"
check "md: alignment row" sh -c "sed -n 2p '$T/out' | grep -q '^|:--'"
expect_rc 0 "table" bench --op add,bitlinear --shape 17x300
check "table: header and one row per configuration" test "$(wc -l <"$T/out")" -eq 5
expect_rc 0 "json" bench --op add,bitlinear --shape 17x300 --device $DEVS --format json
cp "$T/out" "$T/doc.json"
expect_rc 0 "jsonl" bench --op add,bitlinear --shape 17x300 --device $DEVS --format jsonl
cp "$T/out" "$T/doc.jsonl"
if command -v python3 >/dev/null 2>&1; then
    check "json parses: devices with rooflines, results with checks" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "bitnet-bench" and d["devices"] and d["results"]
assert all(r["check"] == "ok" and r["time_ms"] > 0 for r in d["results"])
assert all(x["copy_gbs"] > 0 for x in d["devices"])' "$T/doc.json"
    check "jsonl parses: one object per line" python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 4 and all("gbs" in r for r in rows)' "$T/doc.jsonl"
else
    ok "# skip json parse: python3 not installed"
    ok "# skip jsonl parse: python3 not installed"
fi
check "jsonl: every line is one object" sh -c "grep -cv '^{.*}\$' '$T/doc.jsonl' | grep -qx 0"
expect_rc 0 "-o writes a file" bench --op add --shape 64 --format csv -o "$T/res.csv"
check "-o file holds the header" grep -q '^op,variant' "$T/res.csv"

# ---- rotation: working sets that fit in the cache are rotated ----
expect_rc 0 "rotation" bench --op add --shape 65536 --llc 64 --format csv
check "a 768 KiB set rotates over 341 sets (256 MiB of --max-mem)" sh -c "tail -1 '$T/out' | awk -F, '{exit !(\$22 == 341)}'"
ROT="--min-reps 1 --min-time 0 --warmup 0 --roofline-size 1 --op add --llc 64 --format csv"
expect_rc 0 "rotation bounded" bitnet-bench $ROT --shape 4194304 --max-mem 1024
check "a 48 MiB set rotates over 6 sets (4 x 64 MiB)" sh -c "tail -1 '$T/out' | awk -F, '{exit !(\$22 == 6)}'"
expect_rc 0 "rotation bounded by --max-mem" bitnet-bench $ROT --shape 4194304 --max-mem 100
check "... 2 sets fit in 100 MiB" sh -c "tail -1 '$T/out' | awk -F, '{exit !(\$22 == 2)}'"
expect_rc 2 "a set larger than --max-mem is refused" bitnet-bench $ROT --shape 4194304 --max-mem 16
expect_err "more than --max-mem" "... and says why"

# ---- the cache the rotation assumes, and the roofline past it ----
ONE="--min-reps 1 --min-time 0 --warmup 0 --op add --shape 64 --device cpu --format json"
expect_rc 0 "--llc in the json" bitnet-bench $ONE --llc 80 --max-mem 1024
check "llc_mib is --llc" grep -q '"llc_mib": 80.0' "$T/out"
check "the roofline starts at 4 x --llc (320 MiB) where memory allows" grep -q '"roofline_mib": 320.0' "$T/out"
expect_rc 0 "--llc past half of --max-mem" bitnet-bench $ONE --llc 300 --max-mem 512
check "... the roofline stays at 256 MiB" grep -q '"roofline_mib": 256.0' "$T/out"
expect_rc 0 "--roofline-size wins" bitnet-bench $ONE --llc 300 --roofline-size 1
check "... 1 MiB" grep -q '"roofline_mib": 1.0' "$T/out"
# without --llc: the highest level of sysfs's data or unified caches, each
# shared_cpu_list once, added; at least 64 MiB
llc_want=$(for d in /sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*; do
    [ -r "$d/level" ] && [ -r "$d/size" ] && [ -r "$d/shared_cpu_list" ] || continue
    [ "$(cat "$d/type" 2>/dev/null)" = Instruction ] && continue
    echo "$(cat "$d/level") $(cat "$d/shared_cpu_list") $(cat "$d/size")"
done | awk '{ n = $3 + 0; u = substr($3, length($3)); if (u == "K") n *= 1024; else if (u == "M") n *= 1048576; else if (u == "G") n *= 1073741824
             if ($1 > best) { best = $1; delete seen; total = 0 }
             if ($1 == best && !(($2) in seen)) { seen[$2] = 1; total += n } }
           END { m = int(total / 1048576); if (m < 64) m = 64; print m }')
expect_rc 0 "the host's cache by default" bitnet-bench $ONE --roofline-size 1
check "llc_mib is the host's ($llc_want MiB)" grep -q "\"llc_mib\": $llc_want.0" "$T/out"

# ---- shapes ----
expect_rc 0 "--sweep" bench --op add,permute --sweep 16:64:x2 --format csv
check "--sweep: element counts for add, squares for permute" \
    sh -c "cut -d, -f1,4 '$T/out' | tr '\n' ' ' | grep -q 'add,16 add,32 add,64 permute,16x16 permute,32x32 permute,64x64'"
expect_rc 0 "a one-number size too large as a square is skipped for matrix ops" bench --op sum,permute \
    --shape 262144 --format csv
check "... but runs for element-wise ops" sh -c "tail -n +2 '$T/out' | cut -d, -f1,4 | grep -qx 'sum,262144'"
expect_err "permute: 262144x262144 is too large, skipped" "... with a warning"
expect_rc 0 "--model takes every 2-D weight shape" bench --op bitlinear --scale row \
    --model "$TESTDATA/real/fastml-jet-b158.safetensors" --format csv
check "--model: three layers, three shapes" test "$(tail -n +2 "$T/out" | wc -l)" -eq 3

# ---- baseline ----
expect_rc 0 "--baseline openblas" bench --op bitlinear,matmul_f32 --shape 64x512 --scale row --baseline openblas --format csv
check "openblas baseline: matmul_f32 is 1.00x of itself" sh -c "grep '^matmul_f32' '$T/out' | cut -d, -f19 | grep -qx 1"
check "openblas baseline: bitlinear has a speedup" sh -c "grep '^bitlinear' '$T/out' | cut -d, -f19 | grep -q '[0-9]'"
check "openblas baseline rows are not printed" test "$(grep -c '^matmul_f32' "$T/out")" -eq 1

# ---- plot ----
if command -v gnuplot >/dev/null 2>&1; then
    expect_rc 0 "--plot png" bench --op add,copy --sweep 1024:8192:x4 --plot "$T/p.png"
    check "png written" sh -c "head -c 8 '$T/p.png' | od -c | grep -q 'P   N   G'"
    expect_rc 0 "--plot svg" bench --op add --sweep 1024:8192:x4 --plot "$T/p.svg"
    check "svg written" grep -q '<svg' "$T/p.svg"
else
    ok "# skip --plot png: gnuplot not installed"
    ok "# skip png written: gnuplot not installed"
    ok "# skip --plot svg: gnuplot not installed"
    ok "# skip svg written: gnuplot not installed"
fi
# results measured elsewhere are reported (and plotted) with --from
bench --op add,bitlinear --shape 64x512 --device $DEVS --format json -o "$T/r.json" 2>/dev/null
expect_rc 0 "--from reports saved results" bitnet-bench --from "$T/r.json" --format csv
cp "$T/out" "$T/r1.csv"
check "--from: every saved row" test "$(tail -n +2 "$T/r1.csv" | wc -l)" -eq "$(grep -o '"op":' "$T/r.json" | wc -l)"
bitnet-bench --from "$T/r.json" --format json 2>/dev/null | bitnet-bench --from - --format csv >"$T/r2.csv" 2>/dev/null
check "--from: json survives a round trip unchanged" cmp -s "$T/r1.csv" "$T/r2.csv"
# --energy: the columns are there in every format; with no counter exposed
# (no readable RAPL, no NVML) they are empty and a note says why
EN="--op bitlinear --shape 17x300 --tokens 3 --scale row --max-reps 2 --energy"
expect_rc 0 "--energy csv" bench $EN --format csv
check "--energy csv: energy columns" sh -c "head -1 '$T/out' | grep -q ',watts,idle_watts,j_op,j_op_above_idle,j_token,j_token_above_idle\$'"
if [ -r /sys/class/powercap/intel-rapl:0/energy_uj ]; then
    check "--energy csv: watts with RAPL" sh -c "tail -1 '$T/out' | awk -F, '\$23 > 0 {ok=1} END {exit !ok}'"
else
    check "--energy csv: empty cells and a note without RAPL" sh -c "tail -1 '$T/out' | grep -q 'no energy counter for cpu.*,,,,,,\$'"
fi
# --rapl-dir: RAPL read from another tree.  Empty: the warning names it.  A
# fake package whose energy_uj is a FIFO fed 1.0, 0.5, 0.0, 1.0 ... J (a step
# of 1 J in a range of 1.5 J): the reads are the check of rapl_open, the idle
# window's two and the configuration's two, so both windows see the counter
# wrap (0.5 -> 0.0 and 1.0 -> 0.5) and must come out at 1 J, not -0.5.
# Each value goes to one read exactly: once a reader has opened the FIFO
# (the feeder's open returns), a fresh FIFO is renamed over the path before
# the value is written, so the next read waits for the next value.  With one
# FIFO throughout, a read that opened it while the feeder had written and
# not yet closed got end of file and no number (the idle cell came out empty
# in 4 runs of 8 on a loaded 2-core machine, and CI failed on it), and a
# read that held it open past the feeder's pause lost the next value.
mkdir -p "$T/rapl-none" "$T/rapl/intel-rapl:0" "$T/rapl/intel-rapl:0:0"
expect_rc 2 "--rapl-dir without --energy: usage error" bench --op add --shape 8 --rapl-dir "$T/rapl-none"
expect_rc 0 "--rapl-dir, no domain there" bench $EN --device cpu --format csv --rapl-dir "$T/rapl-none"
expect_err "no readable RAPL under $T/rapl-none" "--rapl-dir, no domain there: named"
pkg="$T/rapl/intel-rapl:0"
echo 1500000 >"$pkg/max_energy_range_uj"
mkfifo "$pkg/energy_uj"
(v=0; while :; do
    v=$(((v + 1000000) % 1500000))
    exec 3>"$pkg/energy_uj" || break
    mkfifo "$pkg/next" && mv "$pkg/next" "$pkg/energy_uj" || break
    echo $v >&3
    exec 3>&-
done) 2>/dev/null &
feeder=$!
expect_rc 0 "--rapl-dir, a wrapping counter" timeout 60 bitnet-bench $FAST $EN --device cpu --format csv --rapl-dir "$T/rapl"
kill $feeder 2>/dev/null
wait $feeder 2>/dev/null
echo "# --rapl-dir: idle W, reps, J per call: $(tail -1 "$T/out" | awk -F, '{print $24, $12, $25}')"
check "--rapl-dir: idle 1 J over the 2 s window (the wrap undone)" \
    sh -c "tail -1 '$T/out' | awk -F, '{exit !(\$24 > 0.4 && \$24 <= 0.5)}'"
check "--rapl-dir: 1 J over the configuration's calls (the wrap undone)" \
    sh -c "tail -1 '$T/out' | awk -F, '{exit !(\$12 * \$25 > 0.999 && \$12 * \$25 < 1.001 && \$23 > 0)}'"
expect_rc 0 "--energy table" bench $EN
expect_out "mJ/token>idle" "--energy table: energy columns"
bench $EN --format json -o "$T/e.json" 2>/dev/null
check "--energy json: fields" grep -q '"j_token_above_idle"' "$T/e.json"
expect_rc 0 "--energy md from json" bitnet-bench --from "$T/e.json" --format md
expect_out "mJ/op>idle" "--energy md: energy columns"
expect_rc 0 "no --energy: table" bench --op bitlinear --shape 17x300 --tokens 3 --scale row
check "no --energy: no energy columns" sh -c "! grep -q 'mJ/op' '$T/out'"
if command -v gnuplot >/dev/null 2>&1; then
    expect_rc 0 "--from with --plot" bitnet-bench --from "$T/r.json" --plot "$T/r.svg"
    check "--from: plot written" grep -q '<svg' "$T/r.svg"
else
    ok "# skip --from with --plot: gnuplot not installed"
    ok "# skip --from: plot written: gnuplot not installed"
fi
printf '{"tool": "other"}' >"$T/other.json"
expect_rc 1 "--from refuses other JSON" bitnet-bench --from "$T/other.json"
expect_err "not the --format json output" "--from says why"
BITNET_TEST_PERTURB=bitlinear "$TEST_BIN/bitnet-bench" $FAST --op bitlinear --shape 64x512 --format json >"$T/fail.json" 2>/dev/null
expect_rc 1 "--from: saved FAIL rows keep exit status 1" bitnet-bench --from "$T/fail.json"

mkdir -p "$T/nognuplot"
expect_rc 3 "--plot without gnuplot fails" env PATH="$T/nognuplot" "$BIN/bitnet-bench" $FAST --op add --shape 64 \
    --plot "$T/q.png"
expect_err "gnuplot" "--plot without gnuplot says so"
check "no picture is left behind" test ! -e "$T/q.png"
expect_rc 0 "no --plot: gnuplot is not needed" env PATH="$T/nognuplot" "$BIN/bitnet-bench" $FAST --op add --shape 64

# ---- devices, calibration ----
expect_rc 0 "--list-devices" bitnet-bench --list-devices
expect_out "cpu" "--list-devices lists the cpu"
if [ -x "$BIN/bitnet-info" ]; then
    bitnet-info --devices >"$T/info.txt" 2>/dev/null
    check "--list-devices prints what bitnet-info --devices prints" cmp -s "$T/out" "$T/info.txt"
    bitnet-bench --list-devices --format json >"$T/dev.json" 2>/dev/null
    bitnet-info --devices --json >"$T/info.json" 2>/dev/null
    check "--list-devices --format json prints what bitnet-info --devices --json prints" cmp -s "$T/dev.json" "$T/info.json"
fi
expect_rc 0 "--calibrate on the cpu says there is nothing to calibrate" bitnet-bench --calibrate --device cpu
expect_out "not calibrated" "--calibrate cpu report"
if [ $have_opencl = 1 ]; then
    expect_rc 0 "--calibrate opencl" bitnet-bench --calibrate --device opencl
    expect_out "opencl" "--calibrate prints the device report"
fi
expect_rc 0 "--stats prints op statistics" bench --op add --shape 64 --stats
expect_err "stats for add" "--stats output on stderr"
check "no progress output when stderr is not a terminal" sh -c "! grep -q '\[1\]' '$T/err'"

# ---- --op mlp: the network file ----
if bitnet-quantize "$TESTDATA/real/hep-bitnet-mnist-b158.safetensors" -o "$T/mlp.bnt" 2>/dev/null; then
    expect_rc 0 "mlp runs the quantized network" bench --op mlp --net "$T/mlp.bnt" --device cpu --format csv
    check "mlp: its row checks ok" sh -c "tail -n +2 '$T/out' | awk -F, '\$20 != \"ok\" {bad=1} END {exit bad || NR != 1}'"
    # a leftover temporary of an interrupted write is never read as the network
    cp "$T/mlp.bnt" "$T/.mlp.bnt.bnpart.Ab12Cd"
    expect_rc 2 "--net refuses a leftover temporary" bench --op mlp --net "$T/.mlp.bnt.bnpart.Ab12Cd" --device cpu
    expect_err "bnpart.Ab12Cd: not read: the unfinished temporary" "--net: the refusal names the temporary"
    expect_rc 2 "--net - is refused" bench --op mlp --net - --device cpu
    expect_err "must be a file" "--net -: says why"
else
    notok "bitnet-quantize makes the network for --op mlp"
fi
expect_rc 1 "--net that is no MLP: setup error, exit 1" bench --op mlp --net "$TESTDATA/demo/digits.npy" --device cpu --format csv
expect_err "digits.npy: no tensor layers.N.weight" "--net that is no MLP: says what is missing"
check "--net that is no MLP: the row says error" sh -c "tail -n +2 '$T/out' | cut -d, -f20 | grep -qx error"
expect_rc 3 "--net that does not exist: exit 3" bench --op mlp --net "$T/none.bnt" --device cpu
expect_err "none.bnt: cannot open" "--net that does not exist: named"
# every op, the mlp one failing at setup: the run still exits 1
expect_rc 1 "all ops, mlp failing at setup: exit 1" bench --net "$TESTDATA/demo/digits.npy" --device cpu --shape 32x32 --format csv
check "all ops: only the mlp row is an error" test "$(tail -n +2 "$T/out" | awk -F, '$20 == "error" {print $1}')" = mlp
# at 64 elements the copy rows fail first (below the bandwidth minimum): the
# mlp row's note must not carry their detail
expect_rc 2 "all ops at 64: the copy rows' usage error is the worst status" bench --net "$TESTDATA/demo/digits.npy" --device cpu --shape 64 --format csv
check "all ops at 64: the mlp row's note is its own" sh -c "grep '^mlp,' '$T/out' | cut -d, -f21 | grep -qx 'setup: malformed input'"
