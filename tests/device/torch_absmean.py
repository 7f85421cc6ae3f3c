# torch_absmean.py - the unfused torch expression of BitNet b1.58 weight
# quantization (per tensor) on the GPU, timed with CUDA events over rotated
# weights: the comparison of bitnet-bench --op quantize_weights on the GPU.
# usage: torch_absmean.py [ROWSxCOLS] (default 4096x4096)
import torch

def main(rows=4096, cols=4096, sets=8, reps=200):
    ws = [torch.randn(rows, cols, device="cuda") for _ in range(sets)]
    def q(w):
        scale = 1 / w.abs().mean().clamp(min=1e-5)
        return (w * scale).round().clamp(-1, 1)
    for w in ws:
        q(w)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        q(ws[i % sets])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    times.sort()
    print(f"torch absmean quantize {rows}x{cols}: median {times[len(times) // 2]:.1f} us, min {times[0]:.1f} us")

if __name__ == "__main__":
    import sys
    r, c = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "4096x4096").split("x"))
    main(r, c)
