#!/usr/bin/env python3
"""cublas_bf16.py - the baseline a GPU user without this toolkit runs: a bf16
matrix product through torch/cuBLAS.  Times y = x @ W^T for each shape and
token count with CUDA events, rotating among enough distinct weight matrices
that the working set exceeds the L2 cache (so HBM, not L2, is measured), and
prints one line per case: shape, tokens, median kernel time in us, GB/s.
With more than 16 tokens it also times torch._int_mm (int8 x int8 -> int32,
cuBLASLt) on the same shape.  TOKENS=1,8,64 (default) sets the token counts.
tests/perf/readme-tables.sh reads the "NAME SHAPE tokens=N median_us=T" lines.
Runs on the GPU machine only (needs torch with CUDA)."""
import os
import sys
import torch

def timed(fn, nmat, reps):
    for i in range(10):
        fn(i % nmat)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i % nmat)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[len(times) // 2]

def bench_int8(out_f, in_f, tokens, reps=200):
    wbytes = out_f * in_f
    nmat = max(2, (256 << 20) // wbytes + 1)
    ws = [torch.randint(-1, 2, (out_f, in_f), device="cuda", dtype=torch.int8) for _ in range(nmat)]
    x = torch.randint(-127, 128, (tokens, in_f), device="cuda", dtype=torch.int8)
    med = timed(lambda i: torch._int_mm(x, ws[i].t()), nmat, reps)
    print(f"int_mm {out_f}x{in_f} tokens={tokens} median_us={med:.2f}")
    del ws

def bench(out_f, in_f, tokens, reps=200):
    wbytes = out_f * in_f * 2
    nmat = max(2, (256 << 20) // wbytes + 1)  # >= 256 MiB rotated: L2 is 50-60 MB
    ws = [torch.randn(out_f, in_f, device="cuda", dtype=torch.bfloat16) for _ in range(nmat)]
    x = torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16)
    med = timed(lambda i: x @ ws[i].t(), nmat, reps)
    moved = wbytes + tokens * in_f * 2 + tokens * out_f * 2
    print(f"cublas-bf16 {out_f}x{in_f} tokens={tokens} median_us={med:.2f} GB/s={moved / med / 1e3:.1f}")
    del ws

if __name__ == "__main__":
    print(torch.cuda.get_device_name(0), "torch", torch.__version__)
    for shape in sys.argv[1:] or ["16384x16384", "4096x4096", "4096x14336"]:
        o, i = (int(v) for v in shape.split("x"))
        for t in (int(v) for v in os.environ.get("TOKENS", "1,8,64").split(",")):
            bench(o, i, t)
            if t > 16:
                bench_int8(o, i, t)
