#!/usr/bin/env python3
"""make.py - writes the GGUF fixtures of testdata/gguf (run from anywhere).

Made with the gguf Python package (the GGUF implementation that llama.cpp
maintains) version 0.19.0 and numpy 2.4.6:
    pip install gguf==0.19.0 numpy
The expected values under expected/ are written by numpy from the data the
files were made from, never by the code under test:

  types.gguf     GGUFWriter: one tensor of every plain type (f32 f16 bf16 f64
                 i8 i16 i32 i64, ranks 1 to 3), TQ2_0 and TQ1_0 tensors
                 quantized by gguf.quants, metadata of every value type
                 (arrays of strings and numbers, a nested array, NaN, a
                 non-ASCII string), general.alignment 64.
                 expected/NAME.npy holds each plain tensor's values (bf16 as
                 the f32 values it holds); expected/tq2_q.npy / tq1_q.npy the
                 ternary codes q in {-1,0,1} and tq2_d.npy / tq1_d.npy the
                 per-256 block scales.
  i2s.gguf       bitnet.cpp's I2_S type, which the gguf package does not
                 know: packed here by numpy after quantize_i2_s() in
                 microsoft/BitNet src/ggml-bitnet-mad.cpp (x86 layout), the
                 file built by hand from the GGUF specification.
                 expected/i2s_q.npy, expected/i2s_d.npy.
  empty.gguf     GGUFWriter: metadata and no tensor.
  v1.gguf v2.gguf  the older versions (u32 counts and lengths in v1), which
                 the package no longer writes: built by hand from the GGUF
                 specification; expected/v_f32.npy.
  tiny.gguf order.gguf  small hand-built files (order.gguf lists its tensors
                 in another order than their data offsets).
  bad/*.gguf     broken files, and files of types not converted here
                 (bitnet.cpp's TL1/TL2: bad/tl1_tl2.gguf, bad/tl2_last.gguf);
                 bad/EXPECTED gives each one's message.
"""
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)
os.makedirs("expected", exist_ok=True)
os.makedirs("bad", exist_ok=True)
rng = np.random.default_rng(14)


def ternary(rows, cols):
    """Codes q and per-256 block scales d (f16 values), data = q * d."""
    q = rng.integers(-1, 2, size=(rows, cols)).astype(np.int8)
    q[:, ::256] = 1  # every block holds a +1, so max|x| of a block is its d
    d = rng.uniform(0.01, 2.0, size=(rows, cols // 256)).astype(np.float16).astype(np.float32)
    x = q.astype(np.float32) * np.repeat(d, 256, axis=1)
    return q, d, x


# ---- types.gguf --------------------------------------------------------------
w = GGUFWriter("types.gguf", arch="test")
w.add_custom_alignment(64)
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -5)
w.add_uint16("t.u16", 65535)
w.add_int16("t.i16", -32768)
w.add_uint32("t.u32", 4000000000)
w.add_int32("t.i32", -2000000000)
w.add_uint64("t.u64", 2**64 - 1)
w.add_int64("t.i64", -(2**63))
w.add_float32("t.f32", 0.1)
w.add_float64("t.f64", -1e-300)
w.add_float32("t.nan", float("nan"))
w.add_bool("t.true", True)
w.add_bool("t.false", False)
w.add_string("t.str", "h\u00e9llo \u2713 \"quoted\" back\\slash")
w.add_string("t.empty", "")
w.add_array("t.arr_i32", [1, -2, 3])
w.add_array("t.arr_f32", [0.5, -1.25, 3.0e-8])
w.add_array("t.arr_str", ["<unk>", "", "\u2581the", "a,b", "[\"x\"]"])
w.add_array("t.arr_bool", [True, False, True])
w.add_array("t.arr_empty", [])
w.add_key_value("t.nested", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)

plain = {
    "f32": rng.standard_normal((3, 5)).astype(np.float32),
    "f16": rng.standard_normal((4, 7)).astype(np.float16),
    "f64": rng.standard_normal(5).astype(np.float64),
    "i8": rng.integers(-128, 128, size=(2, 9)).astype(np.int8),
    "i16": rng.integers(-32768, 32768, size=(3, 3)).astype(np.int16),
    "i32": rng.integers(-2**31, 2**31, size=4).astype(np.int32),
    "i64": rng.integers(-2**62, 2**62, size=(2, 2)).astype(np.int64),
    "f32_3d": rng.standard_normal((2, 3, 4)).astype(np.float32),
}
for name, a in plain.items():
    w.add_tensor(name, a)
    np.save("expected/%s.npy" % name, a)
# bf16: the top 16 bits of f32 values (the package takes the raw uint16)
bf = (rng.standard_normal((2, 3)).astype(np.float32).view(np.uint32) & 0xFFFF0000).astype(np.uint32)
w.add_tensor("bf16", (bf >> 16).astype(np.uint16), raw_shape=(2, 3), raw_dtype=Q.BF16)
np.save("expected/bf16.npy", bf.view(np.float32))

for name, qt, (rows, cols) in (("tq2", Q.TQ2_0, (3, 512)), ("tq1", Q.TQ1_0, (2, 768))):
    q, d, x = ternary(rows, cols)
    packed = gguf.quants.quantize(x, qt)
    assert np.array_equal(gguf.quants.dequantize(packed, qt), x), name  # the package agrees with q * d
    w.add_tensor(name, packed, raw_dtype=qt)
    np.save("expected/%s_q.npy" % name, q)
    np.save("expected/%s_d.npy" % name, d)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

# ---- hand-built files: v1, v2 and the broken corpus --------------------------------
def s_(v, b, ver=3):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<I" if ver == 1 else "<Q", len(b)) + b


def kv(key, vtype, payload, ver=3):
    return s_(None, key, ver) + struct.pack("<I", vtype) + payload


def tinfo(name, dims, ttype, offset, ver=3):
    f = "<I" if ver == 1 else "<Q"
    return s_(None, name, ver) + struct.pack("<I", len(dims)) + b"".join(struct.pack(f, d) for d in dims) + \
        struct.pack("<IQ", ttype, offset)


def build(kvs, infos, data, ver=3, n_t=None, n_kv=None, align=32, magic=b"GGUF"):
    f = "<I" if ver == 1 else "<Q"
    h = magic + struct.pack("<I", ver) + struct.pack(f, len(infos) if n_t is None else n_t) + \
        struct.pack(f, len(kvs) if n_kv is None else n_kv) + b"".join(kvs) + b"".join(infos)
    h += b"\0" * ((-len(h)) % align)
    return h + data


vals = rng.standard_normal((2, 8)).astype(np.float32)
np.save("expected/v_f32.npy", vals)
for ver in (1, 2):
    kvs = [kv("general.name", 8, s_(None, "old", ver), ver),
           kv("t.arr", 9, struct.pack("<I", 8) + struct.pack("<I" if ver == 1 else "<Q", 2) +
              s_(None, "x", ver) + s_(None, "yz", ver), ver)]
    open("v%d.gguf" % ver, "wb").write(build(kvs, [tinfo("w", (8, 2), 0, 0, ver)], vals.tobytes(), ver))

good_kvs = [kv("general.name", 8, s_(None, "tiny"))]
f32a = np.arange(8, dtype=np.float32).tobytes()
good_infos = [tinfo("a", (8,), 0, 0), tinfo("b", (8,), 0, 32)]
good_data = f32a + f32a
good = build(good_kvs, good_infos, good_data)
open("tiny.gguf", "wb").write(good)
# order.gguf: the infos list "second" (data at 32) before "first" (data at 0)
first, second = np.arange(8, dtype=np.float32), np.arange(8, dtype=np.float32) + 100
open("order.gguf", "wb").write(build(good_kvs, [tinfo("second", (8,), 0, 32), tinfo("first", (8,), 0, 0)],
                                     first.tobytes() + second.tobytes()))
data_at = len(good) - len(good_data)

bad = {}
bad["bad_magic"] = build(good_kvs, good_infos, good_data, magic=b"GGUX"), "unknown format"
bad["bad_version"] = build(good_kvs, good_infos, good_data, ver=4), "version 4"
bad["trunc_header"] = good[:20], "input ends at byte"
bad["absurd_tensor_count"] = build(good_kvs, good_infos, good_data, n_t=2**40), "tensors and"
bad["absurd_kv_count"] = build(good_kvs, good_infos, good_data, n_kv=2**33), "tensors and"
bad["kv_count_past_end"] = build(good_kvs, good_infos, good_data, n_kv=9000), "cannot fit"
bad["absurd_key_len"] = build([struct.pack("<Q", 2**62) + b"general.name"], good_infos, good_data), "length"
bad["absurd_string_len"] = build([kv("k", 8, struct.pack("<Q", 2**60) + b"x")], good_infos, good_data), "claims"
bad["absurd_array_count"] = build([kv("k", 9, struct.pack("<IQ", 4, 2**63))], good_infos, good_data), "overflows"
bad["array_count_past_end"] = build([kv("k", 9, struct.pack("<IQ", 8, 2**40))], good_infos, good_data), "does not fit"
bad["unknown_value_type"] = build([kv("k", 13, b"\0" * 8)], good_infos, good_data), "unknown value type 13"
bad["unknown_array_type"] = build([kv("k", 9, struct.pack("<IQ", 77, 1))], good_infos, good_data), \
    "unknown array element type 77"
nest = struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 0)
bad["nested_too_deep"] = build([kv("k", 9, nest)], good_infos, good_data), "nested deeper"
bad["dup_key"] = build(good_kvs + good_kvs, good_infos, good_data), "appears twice"
bad["alignment_not_pow2"] = build([kv("general.alignment", 4, struct.pack("<I", 48))], good_infos, good_data), \
    "power of two"
bad["alignment_u64"] = build([kv("general.alignment", 10, struct.pack("<Q", 32))], good_infos, good_data), \
    "power of two"
bad["ndims5"] = build(good_kvs, [tinfo("a", (1, 1, 1, 1, 8), 0, 0)], f32a), "5 dims"
bad["dims_overflow"] = build(good_kvs, [tinfo("a", (2**40, 2**40), 0, 0)], f32a), "2^48"
bad["dim_negative"] = build(good_kvs, [tinfo("a", (2**64 - 8,), 0, 0)], f32a), "2^48"
bad["unknown_ggml_type"] = build(good_kvs, [tinfo("a", (8,), 99, 0)], f32a), "unknown ggml type 99"
bad["removed_ggml_type"] = build(good_kvs, [tinfo("a", (8,), 4, 0)], f32a), "unknown ggml type 4"
bad["misaligned_offset"] = build(good_kvs, [tinfo("a", (8,), 0, 4)], f32a + f32a), "not a multiple of the alignment"
bad["overlap"] = build(good_kvs, [tinfo("a", (8,), 0, 0), tinfo("b", (16,), 0, 0)], f32a + f32a), "overlaps"
bad["past_end"] = build(good_kvs, [tinfo("a", (8,), 0, 0), tinfo("b", (8,), 0, 2**20)], good_data), \
    "runs past the end"
bad["trunc_data"] = good[:-10], "runs past the end"
bad["trailing_garbage"] = good + b"x" * 100, "follow the last tensor"
bad["row_not_block"] = build(good_kvs, [tinfo("t", (100, 2), 35, 0)], b"\0" * 132), "not a multiple of the tq2_0 block"
bad["i2s_not_multiple"] = build(good_kvs, [tinfo("t", (100,), 36, 0)], b"\0" * 64), "multiple of 128"
bad["dup_tensor"] = build(good_kvs, [tinfo("a", (8,), 0, 0), tinfo("a", (8,), 0, 32)], good_data), \
    "'a' appears twice"
bad["name_too_long"] = build(good_kvs, [tinfo("n" * 2000, (8,), 0, 0)], f32a), "name length 2000"
bad["empty_key"] = build([kv("", 4, struct.pack("<I", 1))], good_infos, good_data), "length 0"
tq2 = bytearray(66)
tq2[0] = 0xFF  # four codes 3
bad["tq2_code3"] = build(good_kvs, [tinfo("t", (256,), 35, 0)], bytes(tq2)), "tq2_0 code 3"
i2 = bytearray(64)
i2[5] = 0xC0
bad["i2s_code3"] = build(good_kvs, [tinfo("t", (128,), 36, 0)], bytes(i2)), "i2_s code 3"
bad["unsupported_q4_k"] = build(good_kvs, [tinfo("q", (256,), 12, 0)], b"\0" * 144), "ggml type q4_K is not supported"
# bitnet.cpp's TL1 (38) and TL2 (39; MXFP4 in ggml): the reader cannot size them and
# takes the gap to the next tensor (or the end of the file); a 39 that fits MXFP4's
# 17 bytes per 32 weights is taken as MXFP4.  Listed by bitnet-info, refused by
# bitnet-convert.  The data bytes are arbitrary (no TL layout is decoded).
tl_infos = [tinfo("tl1", (256, 4), 38, 0), tinfo("tl2", (256, 4), 39, 160), tinfo("norm", (8,), 0, 256),
            tinfo("mx", (256, 4), 39, 288)]
tl_data = bytes(range(160)) + bytes(range(96)) + f32a + bytes(544)
bad["tl1_tl2"] = build(good_kvs, tl_infos, tl_data), "unknown ggml type 38 (bitnet.cpp's tl1)"
bad["tl2_last"] = build(good_kvs, [tinfo("tl2", (256, 4), 39, 0)], bytes(range(96))), \
    "unknown ggml type 39 (bitnet.cpp's tl2"

# ---- empty.gguf: metadata only ---------------------------------------------------------
w = GGUFWriter("empty.gguf", arch="none")
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

# ---- i2s.gguf: bitnet.cpp's I2_S (the package has no such type) -------------------
rows, cols = 4, 256
q = rng.integers(-1, 2, size=(rows, cols)).astype(np.int8)
scale = np.float32(0.7431)
codes = (q.reshape(-1) + 1).astype(np.uint8).reshape(-1, 4, 32)  # blocks of 128: [block, k, j]
packed = np.zeros((codes.shape[0], 32), np.uint8)
for k in range(4):
    packed |= (codes[:, k, :] << (6 - 2 * k)).astype(np.uint8)
blob = packed.tobytes() + struct.pack("<f", scale) + bytes(28)  # n/4 code bytes, f32 scale, to n/4 + 32
open("i2s.gguf", "wb").write(build([kv("general.architecture", 8, s_(None, "bitnet"))],
                                   [tinfo("i2s", (cols, rows), 36, 0)], blob))
np.save("expected/i2s_q.npy", q)
np.save("expected/i2s_d.npy", np.array([scale], np.float32))

with open("bad/EXPECTED", "w") as f:
    f.write("# file<TAB>substring of the message bitnet-convert must print (written by hand in make.py)\n")
    for name, (blob, msg) in sorted(bad.items()):
        open("bad/%s.gguf" % name, "wb").write(blob)
        f.write("%s.gguf\t%s\n" % (name, msg))
print("gguf", gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0", "numpy", np.__version__)
