#!/bin/sh
# test_linalg.sh - bitnet-op cholesky|qr|svd|solve|lstsq through the real
# binary on small hand-made matrices whose factors are worked out here
# (exact in binary floating point), the errors (exit 1 with the message, no
# output left behind), usage errors (exit 2), pipes and OpenCL against the CPU.
. "$(dirname "$0")/lib.sh"

# f32 words: -4 0 1 2 3 4 5 6 7 NaN
M4=c0800000 Z=00000000 O=3f800000 TW=40000000 TH=40400000 FO=40800000 FI=40a00000 SI=40c00000 SE=40e00000
NAN=7fc00000

mknpy "$T/spd.npy" '<f4' '(2, 2)' $FO $TW $TW $FI        # [[4,2],[2,5]] = L L^T, L = [[2,0],[1,2]]
mknpy "$T/b.npy" '<f4' '(2,)' $SI $SE                    # A [1,1] = [6,7]
mknpy "$T/tall.npy" '<f4' '(3, 2)' $O $Z $Z $O $O $O      # [[1,0],[0,1],[1,1]]
mknpy "$T/b3.npy" '<f4' '(3, 1)' $O $O $TW                # = tall [1,1]
mknpy "$T/col.npy" '<f4' '(2, 1)' $TH $FO                 # [[3],[4]]: R = +-5
mknpy "$T/diag.npy" '<f4' '(2, 2)' $TH $Z $Z $M4          # singular values 4, 3
mknpy "$T/indef.npy" '<f4' '(2, 2, 2)' $FO $TW $TW $FI $O $TW $TW $O  # the second: pivot 2 is 1-4 < 0
mknpy "$T/nan.npy" '<f4' '(2, 2)' $O $Z $Z $NAN
mknpy "$T/empty.npy" '<f4' '(0, 0)'
mknpy "$T/vec.npy" '<f4' '(3,)' $O $TW $TH
mknpy "$T/wide.npy" '<f4' '(2, 3)' $O $Z $Z $Z $O $Z

expect_rc 0 "cholesky" bitnet-op cholesky "$T/spd.npy" -o "$T/l.npy"
check "cholesky: L = [[2,0],[1,2]]" near "$T/l.npy" "2 0 1 2"
expect_rc 0 "solve with a vector right-hand side" bitnet-op solve "$T/spd.npy" "$T/b.npy" -o "$T/x.npy"
check "solve: x = [1,1]" near "$T/x.npy" "1 1" 1e-6
expect_rc 0 "lstsq" bitnet-op lstsq "$T/tall.npy" "$T/b3.npy" -o "$T/x3.npy"
check "lstsq: x = [[1],[1]]" near "$T/x3.npy" "1 1" 1e-6
expect_rc 0 "svd (values)" bitnet-op svd "$T/diag.npy" -o "$T/s.npy"
check "svd: s = [4,3], descending" near "$T/s.npy" "4 3"
expect_rc 0 "qr" bitnet-op qr "$T/col.npy" -o "$T/qr.bnt"
run bitnet-info "$T/qr.bnt"
expect_out '^q  *f32  *\[2, 1\]' "qr writes q [2, 1]"
expect_out '^r  *f32  *\[1, 1\]' "qr writes r [1, 1]"
bitnet-convert "$T/qr.bnt" -t r -o "$T/r.npy" && bitnet-op abs "$T/r.npy" -o "$T/ra.npy"
check "qr: |r| = 5" near "$T/ra.npy" "5"
bitnet-convert "$T/qr.bnt" -t q -o "$T/q.npy" && bitnet-op abs "$T/q.npy" -o "$T/qa.npy"
check "qr: |q| = [0.6, 0.8]" near "$T/qa.npy" "0.6 0.8" 1e-6
run sh -c "cat '$T/diag.npy' | bitnet-op svd --vectors - -o - | bitnet-info -"
expect_out '^vt  *f32  *\[2, 2\]' "svd --vectors in a pipe writes s, u and vt"

# ---- errors: exit 1, the message, nothing written ----
expect_rc 1 "cholesky of an indefinite matrix fails" bitnet-op cholesky "$T/indef.npy" -o "$T/bad.npy"
expect_err "matrix 1 (0-based) of a batch of 2 is not positive definite (pivot 2 of 2" "it names the matrix and the pivot"
check "no output after the failure" test ! -e "$T/bad.npy"
expect_rc 1 "solve with an indefinite matrix fails" bitnet-op solve "$T/indef.npy" "$T/indef.npy" -o "$T/bad.npy"
expect_err "not positive definite" "solve says why"
expect_rc 1 "svd of a NaN fails" bitnet-op svd "$T/nan.npy" -o "$T/bad.npy"
expect_err "NaN or Inf at element 3" "it names the element"
expect_rc 1 "qr of an empty matrix fails" bitnet-op qr "$T/empty.npy" -o "$T/bad.bnt"
expect_err "empty matrix" "it says the matrix is empty"
expect_rc 1 "qr of a vector fails" bitnet-op qr "$T/vec.npy" -o "$T/bad.bnt"
expect_err "a matrix (rank 2 or more" "it asks for a matrix"
expect_rc 1 "cholesky of a non-square matrix fails" bitnet-op cholesky "$T/tall.npy" -o "$T/bad.npy"
expect_err "must be square" "it says square"
expect_rc 1 "lstsq of a wide matrix fails" bitnet-op lstsq "$T/wide.npy" "$T/b.npy" -o "$T/bad.npy"
expect_err "fewer rows than columns" "it says m >= n"
expect_rc 1 "lstsq with B of the wrong rows fails" bitnet-op lstsq "$T/tall.npy" "$T/b.npy" -o "$T/bad.npy"
expect_err "does not fit A" "it names both shapes"
check "no output after any failure" test ! -e "$T/bad.npy" -a ! -e "$T/bad.bnt"
expect_rc 2 "qr to .npy is a usage error" bitnet-op qr "$T/col.npy" -o "$T/q.npy"
expect_err "holds one tensor" "it says why"
expect_rc 2 "--vectors only applies to svd" bitnet-op qr --vectors "$T/col.npy" -o "$T/q.bnt"
expect_rc 2 "solve needs two inputs" bitnet-op solve "$T/spd.npy" -o "$T/x.npy"

# ---- bitnet-verify --fidelity --spectrum on a real model ----
src="$TESTDATA/real/hep-bitnet-mnist-b158.safetensors"
bitnet-quantize -q "$src" -o "$T/m.bnt"
expect_rc 0 "verify --fidelity --spectrum" bitnet-verify --fidelity --spectrum "$src" "$T/m.bnt"
check "a SPECTRUM line for each of the 4 quantized weights" test "$(grep -c '^SPECTRUM' "$T/out")" -eq 4
expect_out '^SPECTRUM layers.0.weight \[512 x 784\]' "with the matrix shape"
# rank r >= min(rows, cols) removes all of the error: the [10 x 512] layer at r = 32
expect_out 'r=32 100.00%' "a rank-32 correction removes all the error of a rank-10 matrix"
# singular values descend, so the top r of k hold at least r/k of the energy, and more r removes more
check "rank-r shares are at least r/k and grow with r" sh -c "grep -A1 '^SPECTRUM layers.0.weight' '$T/out' | tail -1 |
    tr -d '%,' | awk '{ if (\$9 < 100 * 8 / 512 || \$16 < 100 * 32 / 512 || \$23 < 100 * 128 / 512 ||
                              \$16 < \$9 || \$23 < \$16) exit 1 }'"
run bitnet-verify --fidelity --spectrum --json "$src" "$T/m.bnt"
expect_out '"energy_removed"' "--json: the shares per layer"
expect_out '"singular_values_error"' "--json: the error's singular values"
expect_out '"ok": true' "--json: the verdict"
check "--json: the text goes to stderr" grep -q '^SPECTRUM' "$T/err"
expect_rc 2 "--spectrum needs --fidelity" bitnet-verify --spectrum "$src"

# ---- OpenCL against the CPU ----
if bitnet-op cholesky --device opencl "$T/spd.npy" -o "$T/lg.npy" 2>/dev/null; then
    check "cholesky on opencl" near "$T/lg.npy" "2 0 1 2" 1e-6
    run bitnet-op solve --device opencl --stats "$T/spd.npy" "$T/b.npy" -o "$T/xg.npy"
    expect_err "cholesky_solve  *opencl" "--stats shows the solve on opencl"
    check "solve on opencl" near "$T/xg.npy" "1 1" 1e-6
    expect_rc 1 "an indefinite matrix fails on opencl too" bitnet-op cholesky --device opencl "$T/indef.npy" -o "$T/bad.npy"
    expect_err "pivot 2 of 2" "with the pivot"
    run bitnet-op svd --device opencl --stats "$T/diag.npy" -o "$T/sg.npy"
    expect_err "svd  *opencl" "--stats shows the svd on opencl"
    check "svd on opencl" near "$T/sg.npy" "4 3"
    run bitnet-op lstsq --device opencl --stats "$T/tall.npy" "$T/b3.npy" -o "$T/x3g.npy"
    expect_err "lstsq  *opencl" "--stats shows lstsq on opencl"
    check "lstsq on opencl: x = [[1],[1]]" near "$T/x3g.npy" "1 1" 1e-6
else
    ok "# SKIP no OpenCL device"
fi
echo "1..$_n"
