#!/bin/sh
# test_matmul.sh - bitnet-matmul on hand-made weights whose answers are worked
# out below (testdata/bitlinear/make_tiny.c writes them): W rows
# [1 0 -1 1] [-1 -1 0 1] [0 1 1 -1], row scales 0.5 2 1, bias 1 -1 0.5,
# x rows [127 0 -127 64] [10 -20 30 127] (absmax 127, so s = 1 and q = x).
#   acc = [318 -63 -191; 107 137 -117]; y = acc * d = [159 -126 -191; 53.5 274 -117]
#   + bias = [160 -127 -190.5; 54.5 273 -116.5]; relu -> [160 0 0; 54.5 273 0]
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/bitlinear
W=$D/tiny.bnt

# the last N f32 values of a .npy file as text
vals() { tail -c $(($2 * 4)) "$1" | od -An -v -tf4 | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
same() { [ "$(vals "$1" "$2")" = "$3" ] || { echo "# got: $(vals "$1" "$2")  wanted: $3"; return 1; }; }

expect_rc 0 "t2 weights, float input" bitnet-matmul -w "$W:w" -x "$D/x.npy" -o "$T/y.npy"
check "y = acc * d" same "$T/y.npy" 6 "159 -126 -191 53.5 274 -117"
cp "$T/y.npy" "$T/y0.npy"
expect_rc 0 "bias and relu" bitnet-matmul -w "$W:w" -x "$D/x.npy" --bias "$W:b" --act relu -o "$T/y.npy"
check "relu(y + bias)" same "$T/y.npy" 6 "160 0 0 54.5 273 0"
expect_rc 0 "t3 weights, pre-quantized int8 input" bitnet-matmul -w "$W:w3" -x "$W:xq" --bias "$W:b" -o "$T/y.npy"
check "t3 + int8 input = hand result" same "$T/y.npy" 6 "160 -127 -190.5 54.5 273 -116.5"
expect_rc 0 "float weights: float product" bitnet-matmul -w "$W:wf" -x "$D/x.npy" --bias "$W:b" -o "$T/yf.npy"
check "float product = hand result" same "$T/yf.npy" 6 "160 -127 -190.5 54.5 273 -116.5"
expect_rc 0 "--threads 1 --device cpu" bitnet-matmul --threads 1 --device cpu -w "$W:w" -x "$D/x.npy" -o "$T/y1.npy"
check "one thread: same bytes" cmp -s "$T/y1.npy" "$T/y0.npy"

# pipes: '-' in and out, bnt on the pipe; the same as going through files
bitnet-matmul -w "$W:w" -x "$D/x.npy" --bias "$W:b" --act relu -o - | bitnet-matmul -w "$W:w2" -x - -o "$T/p.npy"
check "a two-layer pipe succeeds" test -s "$T/p.npy"
bitnet-matmul -w "$W:w" -x "$D/x.npy" --bias "$W:b" --act relu -o "$T/h.bnt"
bitnet-matmul -w "$W:w2" -x "$T/h.bnt" -o "$T/f.npy"
check "pipe = files" cmp -s "$T/p.npy" "$T/f.npy"
# layer 2 on h = [160 0 0]: q = [127 0 0], y = 127 / (127/160) -> 160 and 0
check "second layer, first token" sh -c "[ \"\$(tail -c 16 '$T/p.npy' | od -An -tf4 | awk '{print \$1, \$2}')\" = '160 0' ]"
# re-quantized output then int8 input = float output then quantization inside
bitnet-matmul -w "$W:w" -x "$D/x.npy" --bias "$W:b" --act relu --quantize-output -o - | bitnet-matmul -w "$W:w2" -x - -o "$T/q.npy"
check "--quantize-output | next layer = float | next layer" cmp -s "$T/q.npy" "$T/p.npy"
cat "$D/x.npy" | bitnet-matmul -w "$W:w" -x - -o - --to npy > "$T/s.npy"
check "stdin in, --to npy on stdout" same "$T/s.npy" 6 "159 -126 -191 53.5 274 -117"
if bitnet-matmul --device opencl -w "$W:w" -x "$D/x.npy" --bias "$W:b" -o "$T/o.npy" 2>/dev/null; then
    bitnet-matmul --device cpu -w "$W:w" -x "$D/x.npy" --bias "$W:b" -o "$T/c.npy"
    check "opencl = cpu, bit for bit" cmp -s "$T/o.npy" "$T/c.npy"
else
    ok "# SKIP no OpenCL device"
fi

# errors
expect_rc 1 "shape mismatch" bitnet-matmul -w "$W:wbad" -x "$D/x.npy" -o "$T/e.npy"
expect_err "shape \[2, 4\] does not fit weights .* of shape \[3, 5\]" "names both shapes"
check "no output left behind" test ! -e "$T/e.npy"
expect_rc 1 "missing tensor" bitnet-matmul -w "$W:nope" -x "$D/x.npy" -o "$T/e.npy"
expect_err "nope" "names the missing tensor"
expect_rc 3 "missing file" bitnet-matmul -w "$T/none.bnt" -x "$D/x.npy" -o "$T/e.npy"
expect_rc 1 "bias of the wrong shape" bitnet-matmul -w "$W:w" -x "$D/x.npy" --bias "$W:wf" -o "$T/e.npy"
expect_err "need \[3\]" "says the bias shape it needs"
expect_rc 1 "weights that are not a matrix" bitnet-matmul -w "$W:b" -x "$D/x.npy" -o "$T/e.npy"
expect_rc 1 "int8 weights refused" bitnet-matmul -w "$W:xq" -x "$D/x.npy" -o "$T/e.npy"
expect_err "dtype i8" "names the dtype"
expect_rc 2 "unknown activation" bitnet-matmul -w "$W:w" -x "$D/x.npy" --act tanhh -o "$T/e.npy"
expect_rc 2 "--quantize-output to .npy" bitnet-matmul -w "$W:w" -x "$D/x.npy" --quantize-output -o "$T/e.npy"
expect_rc 2 "both inputs from stdin" bitnet-matmul -w - -x - -o "$T/e.npy"
expect_rc 2 "no -o" bitnet-matmul -w "$W:w" -x "$D/x.npy"
expect_rc 0 "--help" bitnet-matmul --help
expect_out "quantize-output" "--help lists the flags"
echo "1..$_n"
