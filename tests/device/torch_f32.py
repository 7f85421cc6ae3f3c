#!/usr/bin/env python3
"""torch_f32.py - fp32 baselines on the GPU machine through torch: the float
product y = x @ W^T (cuBLAS, TF32 off) with weights rotated through more
memory than L2 holds, and Cholesky, QR (reduced), SVD (reduced, and values
only) of an n x n matrix (cuSOLVER), timed with CUDA events; median of the
timed repetitions after one warm-up call.  Prints one line per case:
"cublas-fp32 SHAPE tokens=N median_us=T GB/s=B" or "torch-OP NxN f32
median_ms=T" (tests/perf/readme-tables.sh reads these).  TOKENS=1,8,16,64
(default) sets the token counts of matmul.
usage: torch_f32.py matmul SHAPE... | linalg N [OP...]"""
import os
import sys
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def matmul(out_f, in_f, tokens, reps=200):
    wbytes = out_f * in_f * 4
    nmat = max(2, (256 << 20) // wbytes + 1)
    ws = [torch.randn(out_f, in_f, device="cuda") for _ in range(nmat)]
    x = torch.randn(tokens, in_f, device="cuda")
    ms = timed(lambda i=0: x @ ws[i % nmat].t(), reps)
    moved = wbytes + 4 * tokens * (in_f + out_f)
    print(f"cublas-fp32 {out_f}x{in_f} tokens={tokens} median_us={ms * 1e3:.1f} GB/s={moved / ms / 1e6:.1f}")


def linalg(n, only=()):
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    spd = (a + a.t()) / 2 + n * torch.eye(n, device="cuda")  # as bitnet-bench's cholesky input
    for name, fn, reps in (("cholesky", lambda i=0: torch.linalg.cholesky(spd), 10),
                           ("qr", lambda i=0: torch.linalg.qr(a, mode="reduced"), 5),
                           ("svd-values", lambda i=0: torch.linalg.svdvals(a), 3),
                           ("svd-vectors", lambda i=0: torch.linalg.svd(a, full_matrices=False), 3)):
        if only and name not in only:
            continue
        print(f"torch-{name} {n}x{n} f32 median_ms={timed(fn, reps):.2f}", flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
    if sys.argv[1] == "matmul":
        for shape in sys.argv[2:]:
            o, i = (int(v) for v in shape.split("x"))
            for t in (int(v) for v in os.environ.get("TOKENS", "1,8,16,64").split(",")):
                matmul(o, i, t)
    else:
        linalg(int(sys.argv[2]), sys.argv[3:])
