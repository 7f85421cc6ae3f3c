#!/usr/bin/env python3
"""gguf_readback.py - GGUF files written by bitnet-convert, read back by the
gguf Python package (the reference GGUF implementation that llama.cpp
maintains).  A development check, not part of `make check` (which needs no
Python); its last output is kept in tests/gguf_readback.out.  It also
refreshes testdata/gguf/readback/, which lets `make check` repeat part 2
without Python (tests/cli/test_gguf.sh): the GGUF files our tools wrote for
layers.6.weight and the values the package dequantized from them.

    pip install gguf==0.19.0 numpy==2.4.6
    python3 tests/gguf_readback.py [BUILD_BIN_DIR]

1. testdata/gguf/types.gguf -> .bnt -> GGUF by our tools: the package reads
   every tensor; the plain ones equal numpy's expected values, TQ2_0/TQ1_0
   dequantize (gguf.quants) to exactly q * d from expected/*_q.npy, *_d.npy;
   every metadata field comes back with the same type and value.
2. Real layers quantized by bitnet-quantize (row scales), written as TQ2_0
   and as TQ1_0: the package's dequantized values equal q * f16(d) computed
   here from our .bnt exported codes (bitnet-convert --dtype i8 of nothing:
   codes are recovered as sign of our f32 dequantization, scales per row).
   For layers.6.weight the GGUF files go to testdata/gguf/readback/l6_tq2.gguf
   and l6_tq1.gguf, the package's values to l6_tq2_pkg.npy and l6_tq1_pkg.npy.
"""
import shutil
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "build", "bin")
G = os.path.join(TOP, "testdata", "gguf")
tmp = tempfile.mkdtemp()


def tool(*args):
    subprocess.run([os.path.join(BIN, args[0])] + list(args[1:]), check=True)


def field_value(f):
    return [bytes(f.parts[i]) for i in f.data]


failures = 0


def check(what, cond):
    global failures
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    failures += 0 if cond else 1


# 1. our copy of types.gguf
tool("bitnet-convert", os.path.join(G, "types.gguf"), "-o", tmp + "/t.bnt")
tool("bitnet-convert", tmp + "/t.bnt", "-o", tmp + "/t.gguf")
orig, ours = gguf.GGUFReader(os.path.join(G, "types.gguf")), gguf.GGUFReader(tmp + "/t.gguf")
check("types: same fields in the same order", list(orig.fields) == list(ours.fields))
for k in orig.fields:
    a, b = orig.fields[k], ours.fields[k]
    if k.startswith("GGUF."):
        continue
    check("types: field %s same type and bytes" % k, a.types == b.types and field_value(a) == field_value(b))
check("types: alignment 64", ours.alignment == 64)
for t in ours.tensors:
    if t.tensor_type in (gguf.GGMLQuantizationType.TQ1_0, gguf.GGMLQuantizationType.TQ2_0):
        base = "tq2" if t.tensor_type == gguf.GGMLQuantizationType.TQ2_0 else "tq1"
        q = np.load(os.path.join(G, "expected", base + "_q.npy"))
        d = np.load(os.path.join(G, "expected", base + "_d.npy"))
        want = q.astype(np.float32) * np.repeat(d, 256, axis=1)
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(want.shape)
        check("types: %s (%s) dequantizes to q * d exactly" % (t.name, t.tensor_type.name), np.array_equal(got, want))
    elif t.name == "bf16":
        want = np.load(os.path.join(G, "expected", "bf16.npy"))
        raw = np.asarray(t.data).view(np.uint8).view(np.uint16)  # the package gives bf16 as bytes
        got = (raw.astype(np.uint32) << 16).view(np.float32).reshape(want.shape)
        check("types: bf16 values", np.array_equal(got, want))
    else:
        want = np.load(os.path.join(G, "expected", t.name + ".npy"))
        check("types: %s values" % t.name, np.array_equal(np.asarray(t.data).reshape(want.shape), want))

# 2. real layers, quantized by us, read by the package
M = os.path.join(TOP, "testdata", "real", "hep-bitnet-mnist-b158.safetensors")
RB = os.path.join(G, "readback")
os.makedirs(RB, exist_ok=True)
for layer, keep in (("layers.2.weight", None), ("layers.6.weight", "l6")):
    tool("bitnet-quantize", "--scale", "row", "-t", layer, M, "-o", tmp + "/h.bnt", "-f")
    tool("bitnet-convert", "-t", layer, "--dtype", "f32", tmp + "/h.bnt", "-o", tmp + "/h.npy", "-f")
    w = np.load(tmp + "/h.npy")  # q * d with our f32 row scales
    q = np.sign(w).astype(np.int8)
    d = np.abs(w).max(axis=1)  # every row holds a nonzero code here
    check("%s: every row has a nonzero weight" % layer, bool((d > 0).all()))
    d16 = d.astype(np.float16).astype(np.float32)
    want = q.astype(np.float32) * d16[:, None]
    for dt, name, short in (("t2", "TQ2_0", "tq2"), ("t3", "TQ1_0", "tq1")):
        out = "%s/h_%s.gguf" % (tmp, dt)
        tool("bitnet-convert", "-t", layer, "--dtype", dt, tmp + "/h.bnt", "-o", out, "-f")
        r = gguf.GGUFReader(out)
        t = r.tensors[0]
        check("%s: %s written as %s" % (layer, dt, name), t.tensor_type.name == name)
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(w.shape)
        check("%s: %s dequantizes to q * f16(d) exactly" % (layer, name), np.array_equal(got, want))
        rel = np.max(np.abs(d16 - d) / d)
        print("     %s %s: largest relative change of a scale by f16 rounding: %.3g" % (layer, name, rel))
        if keep:
            shutil.copyfile(out, os.path.join(RB, "%s_%s.gguf" % (keep, short)))
            np.save(os.path.join(RB, "%s_%s_pkg.npy" % (keep, short)), got.astype(np.float32))

print("%d failed (gguf %s, numpy %s)" % (failures, "0.19.0", np.__version__))
sys.exit(1 if failures else 0)
