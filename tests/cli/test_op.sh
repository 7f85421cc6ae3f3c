#!/bin/sh
# test_op.sh - bitnet-op through the real binary: each op once on small
# hand-made .npy inputs with the results checked against values worked out
# here, shape errors, usage errors, --list, f16 inputs, pipes.
. "$(dirname "$0")/lib.sh"

# f32 words: -2 -1 0 0.5 1 2 3 4 5 6 10 20 30 100 200
M2=c0000000 M1=bf800000 Z=00000000 H=3f000000 O=3f800000 TW=40000000 TH=40400000 FO=40800000
FI=40a00000 SI=40c00000 TE=41200000 TWE=41a00000 THI=41f00000 HU=42c80000 THU=43480000

mknpy "$T/a.npy" '<f4' '(2, 3)' $O $TW $TH $FO $FI $SI          # [[1,2,3],[4,5,6]]
mknpy "$T/row.npy" '<f4' '(3,)' $TE $TWE $THI                    # [10,20,30]
mknpy "$T/col.npy" '<f4' '(2, 1)' $HU $THU                       # [[100],[200]]
mknpy "$T/two.npy" '<f4' '()' $TW                                # 2
mknpy "$T/c4.npy" '<f4' '(4,)' $O $O $O $O
mknpy "$T/x.npy" '<f4' '(4,)' $M1 $Z $O $TW                      # [-1,0,1,2]
mknpy "$T/h.npy" '<f2' '(2, 3)' 3c00 4000 4200 4400 4500 4600    # f16 [[1..6]]
mknpy "$T/w.npy" '<f4' '(3,)' $O $TW $H
mknpy "$T/b.npy" '<f4' '(3,)' $Z $O $M2

# ---- --list and usage ----
expect_rc 0 "--list exits 0" bitnet-op --list
for op in add sub mul div max min relu gelu gelu-tanh sigmoid silu tanh exp neg abs sqrt scale \
    softmax log-softmax sum mean argmax layernorm rmsnorm transpose permute; do
    grep -q "^$op " "$T/out" || notok "--list lacks $op"
done
ok "--list names every op"
expect_rc 0 "--help exits 0" bitnet-op --help
expect_out "Usage: bitnet-op" "--help prints usage"
expect_rc 2 "unknown op is a usage error" bitnet-op frobnicate "$T/a.npy" -o "$T/y.npy"
expect_err "unknown op 'frobnicate'" "unknown op is named"
expect_rc 2 "add with one input" bitnet-op add "$T/a.npy" -o "$T/y.npy"
expect_err "add takes 2 inputs" "arity is explained"
expect_rc 2 "no -o" bitnet-op relu "$T/a.npy"
expect_rc 2 "--axis does not apply to relu" bitnet-op relu --axis 0 "$T/a.npy" -o "$T/y.npy"
expect_err "does not apply to relu" "misplaced flag is named"
expect_rc 2 "scale needs --alpha" bitnet-op scale "$T/a.npy" -o "$T/y.npy"
expect_rc 2 "bad --axis" bitnet-op sum --axis 0,x "$T/a.npy" -o "$T/y.npy"
expect_rc 2 "--axis out of range" bitnet-op sum --axis 2 "$T/a.npy" -o "$T/y.npy"
expect_rc 3 "missing input file" bitnet-op relu "$T/nope.npy" -o "$T/y.npy"
check "no output left behind on failure" test ! -e "$T/y.npy"

# ---- binary with broadcasting ----
expect_rc 0 "add row" bitnet-op add "$T/a.npy" "$T/row.npy" -o "$T/y.npy"
check "add row values" exact "$T/y.npy" "11 22 33 14 25 36"
expect_rc 0 "sub column" bitnet-op sub "$T/a.npy" "$T/col.npy" -o "$T/y.npy"
check "sub column values" exact "$T/y.npy" "-99 -98 -97 -196 -195 -194"
expect_rc 0 "mul by a rank-0 scalar" bitnet-op mul "$T/two.npy" "$T/a.npy" -o "$T/y.npy"
check "mul scalar values" exact "$T/y.npy" "2 4 6 8 10 12"
expect_rc 0 "div" bitnet-op div "$T/a.npy" "$T/two.npy" -o "$T/y.npy"
check "div values" exact "$T/y.npy" "0.5 1 1.5 2 2.5 3"
expect_rc 0 "max (two inputs: element-wise)" bitnet-op max "$T/a.npy" "$T/two.npy" -o "$T/y.npy"
check "max values" exact "$T/y.npy" "2 2 3 4 5 6"
expect_rc 0 "min column x row" bitnet-op min "$T/col.npy" "$T/row.npy" -o "$T/y.npy"
check "min outer values" exact "$T/y.npy" "10 20 30 10 20 30"
expect_rc 1 "shape mismatch fails with status 1" bitnet-op add "$T/a.npy" "$T/c4.npy" -o "$T/y.npy"
expect_err "cannot broadcast \[2, 3\] with \[4\]" "shape error names both shapes"
expect_rc 0 "f16 input is converted" bitnet-op add "$T/h.npy" "$T/row.npy" -o "$T/y.npy"
check "f16 add values" exact "$T/y.npy" "11 22 33 14 25 36"

# ---- unary ----
u() { # op expected [flags]
    op=$1; uwant=$2; shift 2
    expect_rc 0 "$op" bitnet-op "$op" "$@" "$T/x.npy" -o "$T/y.npy"
    check "$op values" near "$T/y.npy" "$uwant"
}
u relu "0 0 1 2"
u neg "1 0 -1 -2"
u abs "1 0 1 2"
u exp "$(awk 'BEGIN { printf "%.9g %.9g %.9g %.9g", exp(-1), 1, exp(1), exp(2) }')"
u tanh "$(awk 'BEGIN { for (i = -1; i <= 2; i++) printf "%.9g ", (exp(2*i) - 1) / (exp(2*i) + 1) }')"
u sigmoid "$(awk 'BEGIN { for (i = -1; i <= 2; i++) printf "%.9g ", 1 / (1 + exp(-i)) }')"
u silu "$(awk 'BEGIN { for (i = -1; i <= 2; i++) printf "%.9g ", i / (1 + exp(-i)) }')"
u gelu "-0.158655254 0 0.841344746 1.95449974"
u gelu-tanh "$(awk 'BEGIN { for (i = -1; i <= 2; i++) { t = sqrt(2 / 3.141592653589793) * (i + 0.044715 * i * i * i);
    printf "%.9g ", 0.5 * i * (1 + (exp(2*t) - 1) / (exp(2*t) + 1)) } }')"
u scale "0.5 0 -0.5 -1" --alpha -0.5
expect_rc 0 "sqrt" bitnet-op sqrt "$T/a.npy" -o "$T/y.npy"
check "sqrt values" near "$T/y.npy" "$(awk 'BEGIN { for (i = 1; i <= 6; i++) printf "%.9g ", sqrt(i) }')"

# ---- softmax ----
expect_rc 0 "softmax --axis -1" bitnet-op softmax --axis -1 "$T/a.npy" -o "$T/y.npy"
sm=$(awk 'BEGIN { s = exp(-2) + exp(-1) + 1; for (r = 0; r < 2; r++) printf "%.9g %.9g %.9g ", exp(-2)/s, exp(-1)/s, 1/s }')
check "softmax values" near "$T/y.npy" "$sm"
expect_rc 0 "softmax --axis 0" bitnet-op softmax --axis 0 "$T/a.npy" -o "$T/y.npy"
c=$(awk 'BEGIN { printf "%.9g", 1 / (1 + exp(3)) }'); d=$(awk 'BEGIN { printf "%.9g", 1 / (1 + exp(-3)) }')
check "softmax axis 0 values" near "$T/y.npy" "$c $c $c $d $d $d"
expect_rc 0 "log-softmax" bitnet-op log-softmax "$T/a.npy" -o "$T/y.npy"
check "log-softmax values" near "$T/y.npy" "$(awk 'BEGIN { l = log(exp(-2) + exp(-1) + 1); for (r = 0; r < 2; r++) printf "%.9g %.9g %.9g ", -2-l, -1-l, -l }')"

# ---- reductions ----
expect_rc 0 "sum all" bitnet-op sum "$T/a.npy" -o "$T/y.npy"
check "sum all value" exact "$T/y.npy" "21"
expect_rc 0 "sum --axis 0" bitnet-op sum --axis 0 "$T/a.npy" -o "$T/y.npy"
check "sum axis 0 values" exact "$T/y.npy" "5 7 9"
expect_rc 0 "sum --axis 0,1" bitnet-op sum --axis 0,1 "$T/a.npy" -o "$T/y.npy"
check "sum axes 0,1 value" exact "$T/y.npy" "21"
expect_rc 0 "mean --axis -1" bitnet-op mean --axis -1 "$T/a.npy" -o "$T/y.npy"
check "mean values" exact "$T/y.npy" "2 5"
expect_rc 0 "max (one input: reduction)" bitnet-op max --axis 1 "$T/a.npy" -o "$T/y.npy"
check "max reduction values" exact "$T/y.npy" "3 6"
expect_rc 0 "min reduction" bitnet-op min --axis 0 "$T/a.npy" -o "$T/y.npy"
check "min reduction values" exact "$T/y.npy" "1 2 3"
mknpy "$T/am.npy" '<f4' '(2, 3)' $O $TH $TH $FI $M1 $FI           # [[1,3,3],[5,-1,5]]: ties
expect_rc 0 "argmax" bitnet-op argmax --axis -1 "$T/am.npy" -o "$T/y.npy"
check "argmax is i64, first of ties" exact "$T/y.npy" "1 0" d8
expect_rc 0 "argmax --index-type i32 --axis 0" bitnet-op argmax --axis 0 --index-type i32 "$T/am.npy" -o "$T/y.npy"
check "argmax i32 values" exact "$T/y.npy" "1 0 1" d4
expect_rc 2 "argmax over two axes" bitnet-op argmax --axis 0,1 "$T/am.npy" -o "$T/y.npy"

# ---- norms ----
expect_rc 0 "layernorm" bitnet-op layernorm --eps 0 "$T/a.npy" -o "$T/y.npy"
r=$(awk 'BEGIN { printf "%.9g", sqrt(1.5) }')
check "layernorm values" near "$T/y.npy" "-$r 0 $r -$r 0 $r"
expect_rc 0 "layernorm --weight --bias" bitnet-op layernorm --weight "$T/w.npy" --bias "$T/b.npy" --eps 1e-5 "$T/a.npy" -o "$T/y.npy"
r=$(awk 'BEGIN { printf "%.9g", 1 / sqrt(2/3 + 1e-5) }')
check "layernorm affine values" near "$T/y.npy" "$(awk -v r="$r" 'BEGIN { for (k = 0; k < 2; k++) printf "%.9g %.9g %.9g ", -r, 1, 0.5 * r - 2 }')"
expect_rc 0 "rmsnorm" bitnet-op rmsnorm --weight "$T/w.npy" --eps 0 "$T/a.npy" -o "$T/y.npy"
check "rmsnorm values" near "$T/y.npy" "$(awk 'BEGIN { a = sqrt(14/3); b = sqrt(77/3); printf "%.9g %.9g %.9g %.9g %.9g %.9g", 1/a, 4/a, 1.5/a, 4/b, 10/b, 3/b }')"
expect_rc 1 "layernorm weight of the wrong size" bitnet-op layernorm --weight "$T/c4.npy" "$T/a.npy" -o "$T/y.npy"
expect_err "does not fit the last axis of \[2, 3\]" "norm shape error names the shapes"
expect_rc 2 "--bias does not apply to rmsnorm" bitnet-op rmsnorm --bias "$T/b.npy" "$T/a.npy" -o "$T/y.npy"

# ---- permute ----
expect_rc 0 "transpose" bitnet-op transpose "$T/a.npy" -o "$T/y.npy"
check "transpose values" exact "$T/y.npy" "1 4 2 5 3 6"
expect_rc 0 "permute --perm 1,0" bitnet-op permute --perm 1,0 "$T/a.npy" -o "$T/y.npy"
check "permute values" exact "$T/y.npy" "1 4 2 5 3 6"
check "transposed shape is (3, 2)" grep -q "'shape': (3, 2)" "$T/y.npy"
expect_rc 2 "bad --perm" bitnet-op permute --perm 0,0 "$T/a.npy" -o "$T/y.npy"

# ---- pipes and formats ----
run sh -c "bitnet-op neg '$T/a.npy' -o - | bitnet-op relu - -o - | bitnet-op add - '$T/row.npy' -o '$T/y.npy'"
check "pipe neg | relu | add" exact "$T/y.npy" "10 20 30 10 20 30"
run sh -c "bitnet-op layernorm --eps 0 '$T/a.npy' -o - | bitnet-op scale --alpha 2 - -o - --to npy > '$T/y.npy'"
r=$(awk 'BEGIN { printf "%.9g", 2 * sqrt(1.5) }')
check "pipe layernorm | scale, --to npy" near "$T/y.npy" "-$r 0 $r -$r 0 $r"
expect_rc 0 "bnt output by extension" bitnet-op relu "$T/a.npy" -o "$T/y.bnt"
check "bnt magic" sh -c "head -c 3 '$T/y.bnt' | od -c | grep -q 'B'"
expect_rc 0 "bnt input" bitnet-op sum "$T/y.bnt" -o "$T/y.npy"
check "sum of the bnt" exact "$T/y.npy" "21"
if [ -x "$BIN/bitnet-matmul" ]; then
    # layernorm rows are [-r, 0, r]; W picks columns 0 and 2 -> [-r, r]; relu -> [0, r]
    mknpy "$T/w02.npy" '<f4' '(2, 3)' $O $Z $Z $Z $Z $O
    run sh -c "bitnet-op layernorm --eps 0 '$T/a.npy' -o - | bitnet-matmul -w '$T/w02.npy' -x - -o - |
        bitnet-op relu - -o - | bitnet-op scale --alpha 2 - -o '$T/y.npy'"
    r=$(awk 'BEGIN { printf "%.9g", 2 * sqrt(1.5) }')
    check "pipe layernorm | bitnet-matmul | relu | scale" near "$T/y.npy" "0 $r 0 $r"
fi

# ---- devices ----
if bitnet-op relu --device opencl "$T/x.npy" -o "$T/ocl.npy" 2>/dev/null; then
    for op in add:row gelu softmax sum layernorm transpose; do
        name=${op%%:*}
        second=""
        [ "$name" != "$op" ] && second="$T/${op#*:}.npy"
        bitnet-op "$name" --device cpu "$T/a.npy" $second -o "$T/c.npy" &&
            bitnet-op "$name" --device opencl "$T/a.npy" $second -o "$T/g.npy"
        check "$name on opencl matches the cpu" near "$T/g.npy" "$(npyvals "$T/c.npy" | tr '\n' ' ')" 1e-5
    done
    # --stats turns profiling on (off by default): the op's kernel time is there
    run bitnet-op gelu --device opencl --stats "$T/a.npy" -o "$T/g.npy"
    check "--stats on opencl reports the kernel time" awk '$1 == "unary" && $2 == "opencl" { seen = 1; if ($5 + 0 > 0) timed = 1 }
        END { exit !(seen && timed) }' "$T/err"
else
    ok "# SKIP no OpenCL device"
fi
echo "1..$_n"
