#!/bin/bash
# mma-clocks.sh - where bl_gemm_mma's time goes, seen from inside: applies
# tests/device/mma-clocks.patch to a copy of kernels/ (under -DMMA_CLOCKS
# lane 0 of every warp writes the clock64 cycles of its phases into the
# output instead of the product: waiting for the chunk's copies and the
# barrier, issuing the next chunk's copies, the chunk's decode, local loads
# and mma, the epilogue; with its compute unit and globaltimer stamps), runs
# one product with bitnet-matmul on the GPU (one launch:
# BITNET_OCL_BLOCK_TOKENS=0) and sums the counts up with numpy.  Then it
# times the same settings with and without the counters by bitnet-bench, to
# show what the counting costs.  A probe for the GPU machine, not a test.
#
# usage: bash tests/device/mma-clocks.sh [OUTxIN [TOKENS [SETTING]...]]
#        (default 4096x14336 64 ""; a SETTING is extra BITNET_MMA_OPTS)
# needs: bitnet-matmul, bitnet-quantize and bitnet-bench on PATH or in
# .device/bin; python3 with numpy; patch.
set -eu
[ -d .device/bin ] && export PATH="$PWD/.device/bin:$PATH"
shape=${1:-4096x14336}
tokens=${2:-64}
shift $(($# > 2 ? 2 : $#))
[ $# -gt 0 ] || set -- ""
out=${shape%x*}
in=${shape#*x}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r kernels "$tmp/k"
patch -s -d "$tmp/k" -p1 < tests/device/mma-clocks.patch
python3 - "$tmp" "$out" "$in" "$tokens" << 'EOF'
import sys, numpy as np
d, out, n, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = np.random.default_rng(7)
np.save(d + "/w.npy", r.uniform(-1, 1, (out, n)).astype(np.float32))
np.save(d + "/x.npy", r.standard_normal((t, n)).astype(np.float32))
EOF
bitnet-quantize -q "$tmp/w.npy" -t '*' --scale row -o "$tmp/w.bnt"
for s in "$@"; do
    echo "== BITNET_MMA_OPTS=\"-DMMA_CLOCKS $s\", $shape, $tokens tokens"
    BITNET_KERNEL_DIR=$tmp/k BITNET_OCL_BLOCK_TOKENS=0 BITNET_MMA_OPTS="-DMMA_CLOCKS $s" \
        bitnet-matmul -q --device opencl -w "$tmp/w.bnt" -x "$tmp/x.npy" -o "$tmp/y.npy"
    python3 - "$tmp/y.npy" << 'EOF'
import sys, numpy as np
y = np.load(sys.argv[1]).view(np.uint32).ravel()
n = y.size // 16
r = y[: n * 16].reshape(n, 16).astype(np.int64)
# warps' records: the output beyond them holds whatever the buffer held
ok = (r[:, 5] > 0) & (r[:, 5] < 100000) & (r[:, 6] < 1024) & (r[:, 0] > 0)
first = np.argmin(ok) if not ok.all() else n
r = r[:first]
tot, wait, copy, mma, epi, nch, sm, g0, g1, pre, _, eb1, eb2 = (r[:, i] for i in range(13))
print("warps %d on %d compute units (%.1f a unit), chunks a warp %d-%d" % (
    len(r), len(np.unique(sm)), len(r) / len(np.unique(sm)), nch.min(), nch.max()))
def q(a):
    return "%8.0f %8.0f %8.0f" % tuple(np.percentile(a, [10, 50, 90]))
print("%-34s %8s %8s %8s" % ("cycles (warps' p10 p50 p90)", "p10", "p50", "p90"))
for name, a in (("whole kernel", tot), ("before the loop", pre), ("wait + barrier", wait),
                ("next chunk's copies", copy), ("decode, local loads, mma", mma), ("epilogue", epi),
                ("  its first barriers", eb1), ("  sums to local memory", eb2), ("  stores", epi - eb1 - eb2)):
    print("%-34s %s" % (name, q(a)))
for name, a in (("wait + barrier a chunk", wait / nch), ("copies a chunk", copy / nch),
                ("decode, loads, mma a chunk", mma / nch)):
    print("%-34s %s" % (name, q(a)))
print("shares of the whole (medians): wait %.0f%%, copies %.0f%%, compute %.0f%%, epilogue %.0f%%, before %.0f%%" % tuple(
    100 * np.median(a / tot) for a in (wait, copy, mma, epi, pre)))
t0 = g0.min()
st = (g0 - t0) / 1e3
en = (g1 - t0) / 1e3
print("start us (p0 p50 p100): %.2f %.2f %.2f; end us: %.2f %.2f %.2f; one warp runs %.2f-%.2f us" % (
    st.min(), np.median(st), st.max(), en.min(), np.median(en), en.max(), (en - st).min(), (en - st).max()))
EOF
done
for s in "$@"; do
    for c in "" "-DMMA_CLOCKS"; do
        printf '%-40s ' "${c:-plain} $s"
        BITNET_KERNEL_DIR=$tmp/k BITNET_OCL_BLOCK_TOKENS=0 BITNET_MMA_OPTS="$c $s" bitnet-bench --device opencl \
            --op bitlinear --scale row --keep-weights --shape "$shape" --tokens "$tokens" --min-time 0.1 --no-check \
            --roofline-size 64 2>&1 | awk '$1 == "bitlinear" { print $6, $7 }'
    done
done
