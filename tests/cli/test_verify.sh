#!/bin/sh
# test_verify.sh - bitnet-verify in its four modes, on good and deliberately
# broken inputs: a .bnt with a flipped bit and truncated ones (integrity),
# files differing in one element (compare), a quantized file whose code was
# changed (fidelity), a planted kernel bug (backends); and --fidelity on
# every real model after bitnet-quantize.
. "$(dirname "$0")/lib.sh"

REAL=$TESTDATA/real
JET=$REAL/fastml-jet-b158.safetensors
HEP=$REAL/hep-bitnet-mnist-b158.safetensors

# flip_bit FILE OFFSET MASK: xor one byte of FILE in place
flip_bit() {
    b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf %03o $((b ^ $3)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
# npy_f32 FILE ROWS COLS DATA: a little-endian f32 .npy v1 file; DATA are
# printf escapes of the raw bytes
npy_f32() {
    dict="{'descr': '<f4', 'fortran_order': False, 'shape': ($2, $3), }"
    pad=$((117 - ${#dict}))
    { printf '\223NUMPY\001\000\166\000%s' "$dict"; printf "%${pad}s\n" ""; printf "$4"; } > "$1"
}
ONE='\000\000\200\077' MONE='\000\000\200\277' Q='\000\000\200\076' MQ='\000\000\200\276'
H='\000\000\000\077' MH='\000\000\000\277' TWO='\000\000\000\100' MTWO='\000\000\000\300' ONEH='\000\000\300\077'

# ---- usage ----
expect_rc 0 "--help" bitnet-verify --help
expect_out "fidelity" "--help lists the modes"
expect_rc 2 "no input is a usage error" bitnet-verify
expect_rc 2 "--compare needs two inputs" bitnet-verify --compare "$JET"
expect_rc 2 "--fidelity needs two files" bitnet-verify --fidelity "$JET"
expect_rc 2 "two modes at once" bitnet-verify --compare --fidelity "$JET" "$JET"
expect_rc 2 "--exact excludes --nmse" bitnet-verify --compare --exact --nmse 1e-3 "$JET" "$JET"
expect_rc 2 "--quick outside --backends" bitnet-verify --quick "$JET"
expect_rc 2 "--backends takes no files" bitnet-verify --backends "$JET"

# ---- integrity ----
expect_rc 0 "every real safetensors file is intact" bitnet-verify "$REAL"/*.safetensors
expect_out "^OK layers.0.weight f32 \[128, 16\]$" "one line per tensor: OK name dtype shape"
expect_out "^4 files checked, 0 failed$" "a final line"
expect_rc 0 "convert to .bnt" bitnet-convert -q "$HEP" -o "$T/hep.bnt"
expect_rc 0 "the .bnt is intact" bitnet-verify "$T/hep.bnt"
expect_out "^$T/hep.bnt: OK (bnt, 16 tensors)$" "all 16 tensors were read"
run sh -c "bitnet-convert '$JET' -o - | bitnet-verify -"
check "a piped .bnt is verified from stdin" [ "$rc" -eq 0 ]
expect_out "^(stdin): OK (bnt, 6 tensors)$" "stdin: 6 tensors"
run sh -c "bitnet-convert '$JET' -o - --to safetensors | bitnet-verify -"
check "a piped safetensors file is verified from stdin" [ "$rc" -eq 0 ]
expect_rc 0 "one large tensor in a .bnt" bitnet-convert -q "$HEP" -t layers.2.weight -o "$T/one.bnt"
size=$(wc -c < "$T/one.bnt")
cp "$T/one.bnt" "$T/flip.bnt"
flip_bit "$T/flip.bnt" $((size / 2)) 4
expect_rc 1 "a flipped bit in the middle fails" bitnet-verify "$T/flip.bnt"
expect_out "^FAIL layers.2.weight: .*checksum" "the CRC failure names the tensor"
expect_out "at byte [0-9]" "and a byte offset"
expect_out "FAILED" "and the file fails"
cp "$T/hep.bnt" "$T/flip2.bnt"
flip_bit "$T/flip2.bnt" 20 1
expect_rc 1 "a flipped bit in the header fails" bitnet-verify -q "$T/flip2.bnt"
head -c $((size / 2)) "$T/one.bnt" > "$T/trunc.bnt"
expect_rc 1 "a truncated .bnt fails" bitnet-verify "$T/trunc.bnt"
expect_out "^FAIL layers.2.weight: .*truncated" "naming the tensor cut short"
head -c $((size - 3)) "$T/one.bnt" > "$T/trunc2.bnt"
expect_rc 1 "a .bnt without its last 3 bytes (trailer) fails" bitnet-verify "$T/trunc2.bnt"
expect_out "^OK layers.2.weight" "the tensor itself was intact"
expect_out "^FAIL .*trailer" "the trailer is named"
run sh -c "head -c $((size / 3)) '$T/one.bnt' | bitnet-verify -"
check "a truncated stream on stdin fails with 1" [ "$rc" -eq 1 ]
head -c 3000 "$JET" > "$T/trunc.safetensors"
expect_rc 1 "a truncated safetensors file fails" bitnet-verify "$T/trunc.safetensors"
printf 'not a tensor file at all\n' > "$T/junk"
expect_rc 1 "an unknown format fails" bitnet-verify "$T/junk"
expect_out "not a .bnt, .npy or safetensors" "and says so"
expect_rc 3 "a missing file is an I/O error" bitnet-verify "$T/nosuch.bnt"
expect_rc 3 "I/O wins over a data failure" bitnet-verify "$T/junk" "$T/nosuch.bnt"
expect_rc 1 "one bad file of two fails" bitnet-verify -q "$T/hep.bnt" "$T/trunc.bnt"
expect_out "^2 files checked, 1 failed$" "counting the files"
check "-q prints no OK line" sh -c "! grep -q '^OK' '$T/out'"

# the format corpora (testdata/*/EXPECTED): every broken file fails with
# status 1, and for .bnt the library's detail is shown; every good file passes.
tab=$(printf '\t')
for dir in bnt npy safetensors; do
    while IFS="$tab" read -r f st sub; do
        case $f in '#'*|'') continue ;; esac
        if [ "$st" = BITNET_OK ]; then
            expect_rc 0 "corpus $dir/$f passes" bitnet-verify "$TESTDATA/$dir/$f"
        else
            expect_rc 1 "corpus $dir/$f fails ($st)" bitnet-verify "$TESTDATA/$dir/$f"
            if [ "$dir" = bnt ] && [ -n "$sub" ]; then
                expect_out "^FAIL .*$(printf '%s' "$sub" | sed 's/[][\.*^$]/\\&/g')" "corpus $dir/$f: the library's detail is shown"
            fi
        fi
    done < "$TESTDATA/$dir/EXPECTED"
done

# containers with every CRC right but invalid codes or scales (made by
# testdata/verify/make-bad.c): [3 x 130] t2/t3, per-row scales
V=$TESTDATA/verify
expect_rc 0 "good t2 and t3 files" bitnet-verify "$V/good-t2.bnt" "$V/good-t3.bnt"
expect_rc 1 "t2 code 3 fails" bitnet-verify "$V/bad-t2-code3.bnt"
expect_out "^FAIL w: invalid t2 code 3 at row 1 column 5 (data byte 69)$" "names row, column and byte"
expect_rc 1 "t2 padding other than 1 fails" bitnet-verify "$V/bad-t2-padding.bnt"
expect_out "^FAIL w: t2 padding code 2 (not 1) at row 2 column 131 (data byte 163)$" "names the padding column"
expect_rc 1 "t3 byte above 242 fails" bitnet-verify "$V/bad-t3-byte.bnt"
expect_out "^FAIL w: invalid t3 byte 250 at row 0 (data byte 7)$" "names the byte"
expect_rc 1 "a NaN scale fails" bitnet-verify "$V/bad-scale-nan.bnt"
expect_out "^FAIL w: scale 1 is not finite" "names the scale"
expect_rc 0 "t2 and t3 files of the same codes compare equal" bitnet-verify --compare "$V/good-t2.bnt" "$V/good-t3.bnt"

# ---- compare ----
npy_f32 "$T/a.npy" 2 8 "$ONE$MONE$Q$MQ$H$ONE$TWO$MH$Q$ONE$MONE$TWO$MTWO$H$MQ$ONE"
npy_f32 "$T/b.npy" 2 8 "$ONE$MONE$Q$MQ$H$ONEH$TWO$MH$Q$ONE$MONE$TWO$MTWO$H$MQ$ONE"
expect_rc 0 "a tensor equals itself" bitnet-verify --compare "$T/a.npy" "$T/a.npy"
expect_out "^PASS array f32 \[2, 8\] nmse=0 " "PASS line with the metrics"
expect_rc 1 "one element differs: exact fails" bitnet-verify --compare "$T/a.npy" "$T/b.npy"
expect_out "1 of 16 elements differ (first at index 5: 1 vs 1.5); bound: exact" "names the element and the bound"
# independent numbers: |diff| = 0.5, sum a^2 = 7.625 + 11.375 = 19, NMSE = 0.25/19 = 0.0132
expect_out "max_abs=0.5 " "max abs error 0.5"
expect_out "nmse=0.0132 " "NMSE 0.25/19"
expect_out "mismatches=1/16" "mismatch count"
expect_rc 1 "--max-abs 0.4 fails" bitnet-verify --compare --max-abs 0.4 "$T/a.npy" "$T/b.npy"
expect_out "max_abs 0.5 exceeds bound --max-abs 0.4" "names --max-abs"
expect_rc 1 "--nmse 1e-3 fails" bitnet-verify --compare --nmse 1e-3 "$T/a.npy" "$T/b.npy"
expect_out "nmse 0.0132 exceeds bound --nmse 0.001" "names --nmse"
expect_rc 0 "--max-abs 0.5 passes" bitnet-verify --compare --max-abs 0.5 "$T/a.npy" "$T/b.npy"
expect_rc 0 "--nmse 0.02 passes" bitnet-verify --compare --nmse 0.02 --max-abs 1 "$T/a.npy" "$T/b.npy"
expect_rc 0 "f32 source as f64: same values" bitnet-convert -q "$T/a.npy" --dtype f64 -o "$T/a64.npy"
expect_rc 0 "floats of different dtypes compare by value" bitnet-verify --compare "$T/a.npy" "$T/a64.npy"
expect_rc 0 "a .bnt equals its safetensors source" bitnet-verify --compare "$HEP" "$T/hep.bnt"
expect_out "^16 tensors compared: 16 passed, 0 failed" "tensor by tensor"
expect_rc 0 "f16 copy" bitnet-convert -q "$JET" --dtype f16 -o "$T/jet16.bnt"
expect_rc 1 "f16 is not exactly f32" bitnet-verify -q --compare "$JET" "$T/jet16.bnt"
expect_rc 0 "f16 is within NMSE 1e-6 of f32" bitnet-verify --compare --nmse 1e-6 "$JET" "$T/jet16.bnt"
expect_rc 0 "one tensor by name on both sides" bitnet-verify --compare "$JET:layers.1.weight" "$T/jet16.bnt:layers.1.weight" --nmse 1e-6
expect_rc 0 "subset" bitnet-convert -q "$JET" -t 'layers.0.*' -t layers.2.bias -o "$T/sub.bnt"
expect_rc 1 "a missing tensor fails" bitnet-verify --compare "$JET" "$T/sub.bnt"
expect_out "^MISSING layers.1.weight: in " "missing tensors are named"
expect_rc 1 "an extra tensor fails" bitnet-verify --compare "$T/sub.bnt" "$JET"
expect_out "^EXTRA layers.2.weight: in " "extra tensors are named"
expect_rc 0 "quantize, t2" bitnet-quantize -q --scale row "$JET" -o "$T/q2.bnt"
expect_rc 0 "quantize, t3" bitnet-quantize -q --scale row --pack base3 "$JET" -o "$T/q3.bnt"
expect_rc 0 "quantize, per tensor" bitnet-quantize -q "$JET" -o "$T/qt.bnt"
expect_rc 0 "t2 and t3 of the same codes are equal" bitnet-verify --compare "$T/q2.bnt" "$T/q3.bnt"
expect_rc 1 "row and tensor scales differ" bitnet-verify --compare "$T/q2.bnt:layers.0.weight" "$T/qt.bnt:layers.0.weight"
expect_rc 0 "ternary against float, loosely" bitnet-verify --compare --nmse 1 "$JET:layers.0.weight" "$T/q2.bnt:layers.0.weight"

# ---- fidelity ----
for f in "$REAL"/*.safetensors; do
    n=$(basename "$f" .safetensors)
    expect_rc 0 "quantize $n" bitnet-quantize -q "$f" -o "$T/q-$n.bnt"
    expect_rc 0 "fidelity of $n" bitnet-verify --fidelity "$f" "$T/q-$n.bnt"
    expect_out "^OK: .* 0 failed, 0 missing$" "$n: summary line"
done
expect_out "^PASS layers.9.weight t2 \[10, 512\] scales=tensor d=" "per tensor: scale, zeros, error"
expect_out "^PASS layers.0.bias f32 \[512\] kept" "unquantized tensors are kept"
expect_rc 0 "quantize: group scales, base 3, f16 for the rest" \
    bitnet-quantize -q --scale group:32 --pack base3 --keep-dtype f16 "$HEP" -o "$T/qg.bnt"
expect_rc 0 "fidelity with group scales and a documented cast" bitnet-verify --fidelity "$HEP" "$T/qg.bnt"
expect_out "kept (cast f32 -> f16)" "the cast is named"
expect_rc 0 "an f64 source" bitnet-convert -q "$JET" --dtype f64 -o "$T/jet64.safetensors"
expect_rc 0 "quantize it" bitnet-quantize -q --scale row "$T/jet64.safetensors" -o "$T/q64.bnt"
expect_rc 0 "fidelity recomputes from the source cast to f32" bitnet-verify --fidelity "$T/jet64.safetensors" "$T/q64.bnt"
expect_rc 0 "quantize activations" bitnet-quantize -q --activations "$JET" -o "$T/qa.bnt"
expect_rc 0 "fidelity of int8 activations" bitnet-verify --fidelity "$JET" "$T/qa.bnt"
expect_out "^PASS layers.1.weight i8 \[32, 128\] scales=row s=" "activations are recomputed"
# a changed code: d = sum|w|/16 = 14.5/16 = 0.90625; |w| = 0.25 gives code 0
# (0.25/d < 0.5), 0.5 and more give +-1.  The source with element 5 (1.0)
# negated keeps every |w|, so the same d, and only code 5 changes (+1 -> -1).
npy_f32 "$T/w.npy" 2 8 "$ONE$MONE$Q$MQ$H$ONE$TWO$MH$Q$ONE$MONE$TWO$MTWO$H$MQ$ONE"
npy_f32 "$T/w5.npy" 2 8 "$ONE$MONE$Q$MQ$H$MONE$TWO$MH$Q$ONE$MONE$TWO$MTWO$H$MQ$ONE"
expect_rc 0 "quantize the small matrix" bitnet-quantize -q -t array "$T/w.npy" -o "$T/qw.bnt"
expect_rc 0 "quantize the altered matrix" bitnet-quantize -q -t array "$T/w5.npy" -o "$T/qw5.bnt"
expect_rc 0 "the small matrix passes" bitnet-verify --fidelity "$T/w.npy" "$T/qw.bnt"
expect_out "d=0.90625 zeros=0.2500" "its scale and zeros (the four +-0.25)"
expect_rc 1 "a changed code fails" bitnet-verify --fidelity "$T/w.npy" "$T/qw5.bnt"
expect_out "^FAIL array t2 \[2, 8\]" "naming the tensor"
expect_out "1 of 16 codes differ .* first at flat index 5 (row 0, column 5): stored -1, expected 1" "and the index"
expect_rc 1 "quantized file against the wrong source" bitnet-verify -q --fidelity "$REAL/hep-bitnet-mnist-float.safetensors" "$T/q-hep-bitnet-mnist-b158.bnt"
expect_rc 0 "a quantized file without some tensors" bitnet-convert -q "$T/q2.bnt" -t 'layers.0.*' -o "$T/q2sub.bnt"
expect_rc 1 "tensors missing from QUANTIZED fail" bitnet-verify --fidelity "$JET" "$T/q2sub.bnt"
expect_out "^MISSING layers.1.weight" "and are named"

# ---- backends ----
expect_rc 0 "--backends --quick on cpu and OpenCL" bitnet-verify --backends --quick --device cpu,opencl
expect_out "^PASS bitlinear/row cpu big err=0 bound=0 ulp$" "one line per op x device x class"
expect_out "^PASS matmul_f32 opencl mid " "OpenCL lines"
expect_out "^PASS t2_pack host tiny " "packing checked against the format"
expect_out "^[0-9]* passed, 0 failed$" "summary line"
run env BITNET_TEST_PERTURB=bitlinear "$TEST_BIN/bitnet-verify" --backends --quick --device cpu,opencl
check "a planted bug in bitlinear fails (exit 1)" [ "$rc" -eq 1 ]
expect_out "^FAIL bitlinear/tensor cpu " "the failing op and device are named"
expect_out "^[0-9]* passed, [1-9][0-9]* failed$" "and counted"
check "no other op fails" sh -c "! grep '^FAIL' '$T/out' | grep -v '^FAIL bitlinear/' | grep -q ."
run env BITNET_TEST_PERTURB=softmax "$TEST_BIN/bitnet-verify" -q --backends --quick --device cpu
check "a planted bug in softmax fails" [ "$rc" -eq 1 ]
expect_out "^FAIL softmax cpu " "softmax is named"
expect_rc 0 "--json" bitnet-verify --backends --quick --device cpu --json --seed 7
expect_out '"failed": 0' "JSON counts"
expect_out '"op": "bitlinear/group+requant"' "JSON lines"
expect_rc 4 "a missing device is a device error" bitnet-verify --backends --quick --device opencl:99
expect_rc 2 "a malformed device is a usage error" bitnet-verify --backends --quick --device gpu
expect_rc 2 "--seed must be a number" bitnet-verify --backends --seed x
run env BITNET_TEST_FAIL=run "$TEST_BIN/bitnet-verify" -q --backends --quick --device opencl
check "kernel launches failing on the device: exit 4" [ "$rc" -eq 4 ]
expect_out "^FAIL bitlinear/tensor opencl tiny err=inf .*simulated" "the device error is shown on the op's line"
# the shipped tools have no test hooks: the same variables change nothing
expect_rc 0 "shipped bitnet-verify ignores BITNET_TEST_PERTURB" \
    env BITNET_TEST_PERTURB=bitlinear,softmax,scale,matmul_f32 bitnet-verify -q --backends --quick --device cpu,opencl
expect_rc 0 "shipped bitnet-verify ignores BITNET_TEST_FAIL" \
    env BITNET_TEST_FAIL=create,build,alloc,run bitnet-verify -q --backends --quick --device opencl
expect_rc 0 "shipped bitnet-bench ignores BITNET_TEST_PERTURB" env BITNET_TEST_PERTURB=bitlinear bitnet-bench \
    --min-reps 2 --min-time 0 --warmup 1 --roofline-size 1 --max-mem 256 --op bitlinear --shape 64x512 --device cpu
# nor do they name them anywhere (messages, embedded kernel sources): grep -a,
# not strings(1), which binutils may not provide; the test copies must hold
# the names, or the search itself is broken
for b in "$BIN"/bitnet-*; do
    name=$(basename "$b")
    check "shipped $name holds no BITNET_TEST string" test "$(grep -ac BITNET_TEST "$b")" -eq 0
done
[ -x "$TEST_BIN/bitnet-verify" ] &&
    check "the test copy of bitnet-verify does hold BITNET_TEST (the search works)" \
        test "$(grep -ac BITNET_TEST "$TEST_BIN/bitnet-verify")" -gt 0
