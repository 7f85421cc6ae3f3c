#!/bin/sh
# test_quantize.sh - bitnet-quantize on real weights: selection and dry run,
# determinism across threads and devices, base-3 output, pipes, activations,
# reports, refusals (NaN, int, unknown -t, bad flags) with their messages and
# exit statuses, atomic output, and share/convert.mk under make -j2.
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
M=$TESTDATA/real/hep-bitnet-mnist-b158.safetensors
# Under LeakSanitizer: the OpenCL driver's compiler (PoCL, LLVM) keeps memory
# it never frees; that is not ours to report.
printf 'leak:libpocl\nleak:libLLVM\nleak:libOpenCL\n' > "$T/lsan.supp"
export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# le64 N: N as 8 bytes little-endian
le64() {
    n=$1; i=0
    while [ $i -lt 8 ]; do printf "\\$(printf %03o $((n % 256)))"; n=$((n / 256)); i=$((i + 1)); done
}
# mkst FILE HEADER-JSON DATA-as-printf-escapes: a minimal safetensors file
mkst() {
    { le64 ${#2}; printf '%s' "$2"; printf "$3"; } > "$1"
}

# ---- a real model ---------------------------------------------------------------
expect_rc 0 "dry run lists the plan" bitnet-quantize -n "$M"
expect_out '^quantize  layers.0.weight \[512, 784\] f32 -> t2, scale tensor' "dry run: weight quantized"
expect_out '^copy      layers.0.bias \[512\] f32' "dry run: bias copied"
expect_out '^copy      layers.0.norm.weight' "dry run: norm weight copied (default exclude)"
check "dry run quantizes four tensors" [ "$(grep -c '^quantize' "$T/out")" -eq 4 ]
check "dry run writes nothing" [ -z "$(ls "$T" | grep -v '^out$\|^err$\|^cache$\|^lsan.supp$')" ]

expect_rc 0 "quantize the b158 model" bitnet-quantize -v --threads 1 "$M" -o "$T/a.bnt" --report "$T/rep.json"
expect_err 'layers.2.weight \[512, 512\]: t2, scale tensor.*zeros 30.8' "-v reports zeros per tensor"
expect_rc 0 "bitnet-verify accepts the output" bitnet-verify "$T/a.bnt"
check "report has the reconstruction error" grep -q '"rel_rms_error"' "$T/rep.json"
check "report lists all 16 tensors" [ "$(grep -c '"name"' "$T/rep.json")" -eq 16 ]
expect_rc 0 "bitnet-info reads it" bitnet-info "$T/a.bnt"
expect_out 'layers.0.weight *t2' "weights are t2"
expect_out 'layers.0.bias *f32' "bias stays f32"

# determinism: the same bytes whatever --threads or --device
mv "$T/a.bnt" "$T/a1.bnt"
expect_rc 0 "quantize with 2 threads" bitnet-quantize --threads 2 "$M" -o "$T/a.bnt"
check "--threads 1 and 2 give identical bytes" cmp -s "$T/a1.bnt" "$T/a.bnt"
mv "$T/a.bnt" "$T/a2.bnt"
run bitnet-quantize --device opencl "$M" -o "$T/a.bnt"
if [ "$rc" -eq 4 ]; then ok "cpu and opencl identical # SKIP no OpenCL device"; else
    check "cpu and opencl give identical bytes" cmp -s "$T/a1.bnt" "$T/a.bnt"
    rm -f "$T/a.bnt"
    expect_rc 0 "group scales on opencl" bitnet-quantize --device opencl --scale group:64 "$M" -o "$T/g.bnt"
    mv "$T/g.bnt" "$T/g1.bnt"
    expect_rc 0 "group scales on cpu" bitnet-quantize --device cpu --scale group:64 "$M" -o "$T/g.bnt"
    check "group scales: cpu and opencl identical" cmp -s "$T/g1.bnt" "$T/g.bnt"
    rm -f "$T/g.bnt"
fi

# base 3: the same codes once converted back to floats
expect_rc 0 "base-3 packing" bitnet-quantize --pack base3 "$M" -o "$T/b3.bnt"
expect_rc 0 "bitnet-verify accepts t3" bitnet-verify "$T/b3.bnt"
run bitnet-info "$T/b3.bnt"
check "weights are t3" grep -q 'layers.0.weight *t3' "$T/out"
check "t3 file is smaller" [ "$(wc -c < "$T/b3.bnt")" -lt "$(wc -c < "$T/a1.bnt")" ]
if command -v bitnet-convert >/dev/null 2>&1; then
    for tn in layers.0.weight layers.2.weight layers.6.weight; do
        expect_rc 0 "convert t2 $tn to f32" bitnet-convert -t "$tn" --dtype f32 "$T/a1.bnt" -o "$T/x2.npy"
        expect_rc 0 "convert t3 $tn to f32" bitnet-convert -t "$tn" --dtype f32 "$T/b3.bnt" -o "$T/x3.npy"
        check "t2 and t3 dequantize to the same $tn" cmp -s "$T/x2.npy" "$T/x3.npy"
    done
else
    ok "base-3 round trip # SKIP no bitnet-convert"
fi

# pipes: - in, - out
run sh -c "cat '$M' | bitnet-quantize - -o - > '$T/p.bnt'"
check "pipe in, pipe out" [ "$rc" -eq 0 ]
expect_rc 0 "piped output verifies" bitnet-verify "$T/p.bnt"
if command -v bitnet-convert >/dev/null 2>&1; then
    bitnet-convert -t layers.0.weight --dtype f32 "$T/p.bnt" -o "$T/xp.npy" 2>/dev/null
    bitnet-convert -t layers.0.weight --dtype f32 "$T/a1.bnt" -o "$T/x1.npy" 2>/dev/null
    check "piped output holds the same codes" cmp -s "$T/xp.npy" "$T/x1.npy"
fi

# scale kinds, selection flags, activations, kept dtype
expect_rc 0 "row scales" bitnet-quantize --scale row "$M" -o "$T/r.bnt"
run bitnet-info "$T/r.bnt"
check "row scales recorded" grep -q 'layers.0.weight.*row' "$T/out"
expect_rc 0 "explicit -t selects a norm" bitnet-quantize -t 'layers.0.norm.weight' -t 'layers.6.weight' "$M" -o "$T/t.bnt"
run bitnet-info "$T/t.bnt"
check "-t: rank-1 norm quantized" grep -q 'layers.0.norm.weight *t2' "$T/out"
check "-t: others copied" grep -q 'layers.0.weight *f32' "$T/out"
expect_rc 0 "--exclude extends the excludes" bitnet-quantize -n --exclude 'layers.6.*' "$M"
check "--exclude: three quantized" [ "$(grep -c '^quantize' "$T/out")" -eq 3 ]
expect_rc 0 "--keep-dtype f16" bitnet-quantize --keep-dtype f16 "$M" -o "$T/h.bnt"
run bitnet-info "$T/h.bnt"
check "--keep-dtype: bias cast to f16" grep -q 'layers.0.bias *f16' "$T/out"
expect_rc 0 "--activations" bitnet-quantize --activations -t 'layers.0.weight' "$M" -o "$T/act.bnt"
run bitnet-info "$T/act.bnt"
check "--activations: int8 with row scales" grep -q 'layers.0.weight *i8.*row' "$T/out"
expect_rc 0 "activations file verifies" bitnet-verify "$T/act.bnt"
expect_rc 0 "--level 0" bitnet-quantize --level 0 "$M" -o "$T/l0.bnt"
check "--level 0 stores more bytes" [ "$(wc -c < "$T/l0.bnt")" -gt "$(wc -c < "$T/a1.bnt")" ]

# ---- refusals ----------------------------------------------------------------------
# 1.0 0.5 NaN 1.0 -> the NaN is element 2 (row 1, column 0)
mkst "$T/nan.safetensors" '{"a.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}' \
    '\000\000\200\077\000\000\000\077\000\000\300\177\000\000\200\077'
echo keep > "$T/keep.bnt"
expect_rc 1 "NaN refused" bitnet-quantize "$T/nan.safetensors" -o "$T/keep.bnt"
expect_err "a.weight.*NaN" "NaN: message names tensor and value"
expect_err "row 1, column 0" "NaN: message gives the position"
check "failed run leaves the old output untouched" [ "$(cat "$T/keep.bnt")" = keep ]
check "failed run leaves no temporary" [ -z "$(ls "$T" | grep 'keep.bnt.tmp')" ]
mkst "$T/int.safetensors" '{"b.weight":{"dtype":"I32","shape":[1,2],"data_offsets":[0,8]}}' \
    '\001\000\000\000\002\000\000\000'
expect_rc 1 "int tensor refused" bitnet-quantize "$T/int.safetensors" -o "$T/int.bnt"
expect_err "b.weight.*i32 is not a float type" "int: message names tensor and dtype"
check "no output after refusal" [ ! -e "$T/int.bnt" ]
expect_rc 1 "unknown -t refused" bitnet-quantize -t 'nope*' "$M" -o "$T/u.bnt"
expect_err "-t 'nope\*' matches no tensor" "unknown -t: message"
check "no output for unknown -t" [ ! -e "$T/u.bnt" ]
expect_rc 2 "bad --scale" bitnet-quantize --scale group:48 "$M" -o "$T/u.bnt"
expect_err "power of two" "bad --scale: message"
expect_rc 2 "npy output refused" bitnet-quantize "$M" -o "$T/u.npy"
expect_err "must be .bnt" "npy output: message"
expect_rc 2 "no output refused" bitnet-quantize "$M"
expect_rc 2 "--activations with --pack" bitnet-quantize --activations --pack base3 "$M" -o "$T/u.bnt"
expect_rc 3 "missing input" bitnet-quantize "$T/missing.safetensors" -o "$T/u.bnt"
expect_rc 1 "truncated input" sh -c "head -c 5000 '$M' | bitnet-quantize - -o '$T/u.bnt'"
check "no output from truncated input" [ ! -e "$T/u.bnt" ]
expect_rc 0 "--help" bitnet-quantize --help
expect_out "Usage: bitnet-quantize" "--help prints usage"

# ---- share/convert.mk with make -j2 ------------------------------------------------------
if command -v make >/dev/null 2>&1; then
    mkdir -p "$T/mk/src"
    cp "$TESTDATA"/real/hep-bitnet-mnist-b158.safetensors "$TESTDATA"/real/fastml-jet-b158.safetensors \
        "$TESTDATA"/real/dfdx-mnist-mlp.safetensors "$T/mk/src/"
    expect_rc 0 "convert.mk -j2" make -j2 -f "$top/share/convert.mk" SRC="$T/mk/src" DST="$T/mk/out"
    check "convert.mk made three files" [ "$(ls "$T/mk/out"/*.bnt | wc -l)" -eq 3 ]
    check "convert.mk left no temporaries" [ -z "$(ls "$T/mk/out" | grep tmp)" ]
    expect_rc 0 "convert.mk results verify" bitnet-verify "$T/mk/out"/*.bnt
    expect_rc 0 "convert.mk is up to date afterwards" make -q -f "$top/share/convert.mk" SRC="$T/mk/src" DST="$T/mk/out"
    cp "$T/nan.safetensors" "$T/mk/src/bad.safetensors"
    expect_rc 2 "convert.mk fails on a bad model" make -j2 -f "$top/share/convert.mk" SRC="$T/mk/src" DST="$T/mk/out"
    check "convert.mk leaves no partial output" [ ! -e "$T/mk/out/bad.bnt" ] && [ -z "$(ls "$T/mk/out" | grep tmp)" ]
fi
