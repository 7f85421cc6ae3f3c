#!/usr/bin/env python3
"""make_hf_bitnet.py - writes testdata/hf/: a tiny checkpoint in the Hugging
Face BitNet layout and the values it must give, both computed here by numpy.

    pip install numpy==2.4.6 safetensors==0.8.0
    python3 tests/make_hf_bitnet.py

The packing follows transformers src/transformers/integrations/bitnet.py
(pack_weights / unpack_weights): a ternary weight [out, in] becomes a u8
[out/4, in]; rows i*(out/4) .. (i+1)*(out/4)-1 go to bits 2i, 2i+1 of the
packed rows, as code q + 1.  Next to it "NAME_scale" (here f32 for one layer,
f16 for the other).  Expected: NAME_q.npy (the codes), NAME_mul.npy (q * s,
AutoBitLinear) and NAME_div.npy (q / s, BitLinear), in f32.
"""
import os

import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "testdata", "hf")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(4)


def pack(q):
    out = q.shape[0]
    p = out // 4
    packed = np.zeros((p, q.shape[1]), np.uint8)
    for i in range(4):
        packed |= ((q[i * p:(i + 1) * p] + 1).astype(np.uint8) << (2 * i)).astype(np.uint8)
    return packed


tensors = {}
for name, (out, inp), sdt in (("layers.0.proj.weight", (16, 40), np.float32),
                              ("layers.1.proj.weight", (12, 9), np.float16)):
    q = rng.integers(-1, 2, size=(out, inp)).astype(np.int8)
    s = np.array([rng.uniform(0.5, 3.0)], sdt)
    tensors[name] = pack(q)
    tensors[name + "_scale"] = s
    s32 = s.astype(np.float32)
    base = os.path.join(OUT, name.replace(".", "_"))
    np.save(base + "_q.npy", q)
    np.save(base + "_mul.npy", q.astype(np.float32) * s32[0])
    np.save(base + "_div.npy", q.astype(np.float32) / s32[0])
tensors["layers.0.proj.bias"] = rng.standard_normal(16).astype(np.float32)
tensors["token_ids"] = np.arange(5, dtype=np.uint8)  # a lone u8 (rank 1): not a pair
save_file(tensors, os.path.join(OUT, "bitnet-tiny.safetensors"))
# the same layer with a code 3: refused
bad = dict(tensors)
bad["layers.0.proj.weight"] = tensors["layers.0.proj.weight"].copy()
bad["layers.0.proj.weight"][1, 2] |= 0xC0  # row 3*4+1 = 13, column 2
save_file(bad, os.path.join(OUT, "bitnet-code3.safetensors"))
