/*
 * mma_peak.c - the INT8 tensor-core rate that OpenCL C reaches on an NVIDIA
 * GPU through inline PTX (mma.sync.aligned.m16n8k32, the instruction of
 * bl_gemm_mma), with nothing else in the loop: each warp keeps MMA_ACC
 * independent accumulator tiles and issues MMA_ACC mma per iteration, so
 * that the rate is the instruction's and not its latency.  s8 x s8 and
 * u8 x s8 (bl_gemm_mma's default), several warps per work-group, a grid of
 * many work-groups per compute unit; the kernel time from profiling events
 * (median of REPS launches) gives TOPS (one mma m16n8k32 = 16*8*32*2 ops).
 * It bounds what bl_gemm_mma can do at 64 tokens: 4096 x 14336 x 64 is
 * 7.5 GOP.  "pattern" is bl_gemm_mma's operand pattern instead (2 row tiles x
 * 4 token tiles, two k-steps a tile: each mma takes an A and a B other
 * than the last one's, as in the product's loop), with nothing else in
 * the loop either.  A probe for the GPU machine (tests/device/), not part of the
 * library or its tests.
 *
 *   cc -O2 -o mma_peak tests/device/mma_peak.c -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 21

static const char *src =
    "#ifndef MMA_ACC\n#define MMA_ACC 8\n#endif\n"
    "inline int4 mma(int4 a, int2 b, int4 c) {\n"
    "  int d0, d1, d2, d3;\n"
    "#if SIGNED\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 \"\n"
    "#else\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 \"\n"
    "#endif\n"
    "    \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "    : \"=r\"(d0), \"=r\"(d1), \"=r\"(d2), \"=r\"(d3)\n"
    "    : \"r\"(a.x), \"r\"(a.y), \"r\"(a.z), \"r\"(a.w), \"r\"(b.x), \"r\"(b.y), \"r\"(c.x), \"r\"(c.y), \"r\"(c.z), \"r\"(c.w));\n"
    "  return (int4)(d0, d1, d2, d3); }\n"
    "__kernel void peak(__global int *out, const int iters) {\n"
    "  const int l = (int)get_global_id(0);\n"
    "#if PATTERN\n"
    /* bl_gemm_mma's pattern: 2 row tiles x 4 token tiles, two k-steps a tile,
     * every mma with an A and a B other than the last one's; MMA_ACC = 8 */
    "  int4 a[2][2]; int2 b[4][2]; int4 c[2][4];\n"
    "  for (int m = 0; m < 2; m++) { a[m][0] = (int4)(l + m, l * 3, l * 5, l * 7); a[m][1] = a[m][0] + 9;\n"
    "    for (int j = 0; j < 4; j++) c[m][j] = (int4)(m + j); }\n"
    "  for (int j = 0; j < 4; j++) { b[j][0] = (int2)(l * 11 + j, l * 13); b[j][1] = b[j][0] + 5; }\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; j++)\n"
    "#pragma unroll\n"
    "      for (int m = 0; m < 2; m++) { c[m][j] = mma(a[m][0], b[j][0], c[m][j]); c[m][j] = mma(a[m][1], b[j][1], c[m][j]); }\n"
    "    a[0][0].x += 1; a[1][1].y += 1; b[0][0].x ^= i; b[3][1].y ^= i; }\n"
    "  int4 s = c[0][0] + c[1][0] + c[0][1] + c[1][1] + c[0][2] + c[1][2] + c[0][3] + c[1][3];\n"
    "#else\n"
    "  int4 a = (int4)(l, l * 3, l * 5, l * 7); int2 b = (int2)(l * 11, l * 13);\n"
    "  int4 c[MMA_ACC];\n"
    "  for (int j = 0; j < MMA_ACC; j++) c[j] = (int4)(j);\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < MMA_ACC; j++) c[j] = mma(a, b, c[j]);\n"
    "    a.x += 1; }\n"
    "  int4 s = c[0];\n"
    "  for (int j = 1; j < MMA_ACC; j++) s += c[j];\n"
    "#endif\n"
    "  out[l] = s.x + s.y + s.z + s.w; }\n";

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 4096;
    cl_uint cus = 0;
    cl_device_id dev = probe_gpu("mma_peak", &cus);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CK(err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    CK(err);
    printf("%d iterations a launch\n", iters);
    /* acc 0: bl_gemm_mma's operand pattern (PATTERN, 16 mma an iteration on 8 accumulators) */
    static const int accs[] = {0, 4, 8, 16};
    static const int warps[] = {4, 8};
    for (int sg = 1; sg >= 0; sg--)
        for (size_t ai = 0; ai < sizeof accs / sizeof accs[0]; ai++) {
            char opts[64], label[16];
            snprintf(opts, sizeof opts, "-DSIGNED=%d -DMMA_ACC=%d -DPATTERN=%d", sg, accs[ai] ? accs[ai] : 8, !accs[ai]);
            snprintf(label, sizeof label, accs[ai] ? "acc %2d" : "pattern", accs[ai]);
            cl_program p = probe_build(ctx, dev, 1, &src, opts);
            if (!p) return 1;
            cl_kernel k = clCreateKernel(p, "peak", &err);
            CK(err);
            for (size_t wi = 0; wi < sizeof warps / sizeof warps[0]; wi++)
                for (int per_cu = 2; per_cu <= 8; per_cu *= 2) {
                    const size_t local = 32 * (size_t)warps[wi], global = local * cus * (size_t)per_cu;
                    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, global * sizeof(cl_int), NULL, &err);
                    CK(err);
                    CK(clSetKernelArg(k, 0, sizeof out, &out));
                    CK(clSetKernelArg(k, 1, sizeof iters, &iters));
                    double t[REPS];
                    for (int r = -2; r < REPS; r++) {
                        const double s = probe_kernel_s(q, k, global, local);
                        if (s < 0) {
                            fprintf(stderr, "mma_peak: launch refused (%s, %d warps)\n", opts, warps[wi]);
                            return 1;
                        }
                        if (r >= 0) t[r] = s;
                    }
                    const double med = median(t, REPS);
                    const double mmas = (double)(global / 32) * iters * (accs[ai] ? accs[ai] : 16);
                    printf("%s %s, %d warps x %d groups/CU: %8.1f us, %6.1f TOPS\n", sg ? "s8.s8" : "u8.s8",
                           label, warps[wi], per_cu, med * 1e6, mmas * 8192.0 / med * 1e-12);
                    clReleaseMemObject(out);
                }
            clReleaseKernel(k);
            clReleaseProgram(p);
        }
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
