/*
 * wgmma.c - whether OpenCL C on an NVIDIA Hopper GPU can reach the
 * warpgroup tensor-core instructions (wgmma.mma_async, PTX target sm_90a),
 * and at what INT8 rate, beside mma.sync (tests/device/mma_peak.c).
 *
 * NVIDIA's OpenCL compiler emits PTX for .target sm_90, where ptxas refuses
 * wgmma.  So the kernels here carry their wgmma instructions as PTX
 * comments inside inline asm ("//@WG ..."), with the operands the compiler
 * substitutes; the program is built once (valid PTX, never run), its binary
 * (PTX text) is fetched, the target raised to sm_90a and each comment
 * replaced by its instruction, and the result is built again with
 * clCreateProgramWithBinary.
 *
 * Then:
 *   1. check: one warpgroup computes a 64 x N x 32 tile (u8 A from
 *      registers in mma.m16n8k32's A layout per warp, s8 B from local
 *      memory through a matrix descriptor, no swizzle) and the host
 *      compares all 64 x N sums, for two placements of B's 8 x 16-byte core
 *      matrices and both readings of the descriptor's two offsets;
 *   2. rate: every warpgroup issues MMAS wgmma per commit group, iters
 *      groups, many work-groups per compute unit: TOPS from profiling
 *      events (median of REPS launches).
 * A probe for the GPU machine, not part of the library or its tests.
 *
 *   cc -O2 -o wgmma tests/device/wgmma.c -lOpenCL
 *
 * H200, driver 580.159.04, 2026-12-03: wgmma in OpenCL C's inline asm is
 * refused ("Instruction 'wgmma.fence' not supported on .target 'sm_90'");
 * the first build's PTX says .version 9.0, .target sm_90; the patched PTX
 * builds from clCreateProgramWithBinary (ptxas notes that it injects
 * warpgroup.arrive where registers feed the GMMA).  Check: all 64 x N sums
 * exact at N = 64, 128 and 256 for both placements, with LBO the distance
 * of core matrices along K and SBO along N (the two swapped, WGMMA_SWAP=1:
 * wrong sums, or a kernel fault).  Rate, 2048 commit groups a launch:
 * 1.88-1.96 POPS from 2 warpgroups per compute unit on (N = 64 to 256, 4
 * or 8 wgmma a group; 1.44-1.87 with one), against 1.21-1.29 POPS for
 * mma.sync m16n8k32 in the same call (mma_peak 2048): the warpgroup
 * instruction is 1.5x the rate of bl_gemm_mma's and at the H200's dense
 * INT8 peak (about 1.98 POPS).
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 15

static const char *body =
    "#define WG_FENCE() asm volatile(\"//@WG fence\" ::: \"memory\")\n"
    "#define WG_COMMIT() asm volatile(\"//@WG commit\" ::: \"memory\")\n"
    "#define WG_WAIT0() asm volatile(\"//@WG wait0\" ::: \"memory\")\n"
    "#define NACC (WGN / 2)\n"
    "#ifndef MMAS\n#define MMAS 4\n#endif\n"
    "inline ulong wg_desc(__local const void *p, int lbo, int sbo) {\n"
    "  return (ulong)((((uint)(ulong)p) >> 4) & 0x3fff) | ((ulong)((lbo >> 4) & 0x3fff) << 16)\n"
    "       | ((ulong)((sbo >> 4) & 0x3fff) << 32); }\n"
    /* element (tok, kk) of B at (tok/8)*S + (kk/16)*L + (tok%8)*16 + kk%16 */
    "#define BPOS(r, kk, L, S) (((r) >> 3) * (S) + ((kk) >> 4) * (L) + ((r) & 7) * 16 + ((kk) & 15))\n"
    "__kernel __attribute__((reqd_work_group_size(128, 1, 1)))\n"
    "void check(__global const uchar *A, __global const char *B, __global int *out, const int L, const int S,\n"
    "           const int lbo, const int sbo) {\n"
    "  __local uint4 sbv[WGN * 2];\n"
    "  __local char *sb = (__local char *)sbv;\n"
    "  const int lid = get_local_id(0), w = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;\n"
    "  for (int i = lid; i < WGN * 32; i += 128) sb[BPOS(i / 32, i % 32, L, S)] = B[i];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  const int r0 = 16 * w + g, r1 = r0 + 8;\n"
    "  int4 a = (int4)(*(__global const int *)(A + r0 * 32 + 4 * t), *(__global const int *)(A + r1 * 32 + 4 * t),\n"
    "                  *(__global const int *)(A + r0 * 32 + 16 + 4 * t), *(__global const int *)(A + r1 * 32 + 16 + 4 * t));\n"
    "  int acc[NACC];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NACC; i++) acc[i] = 0;\n"
    "  const ulong desc = wg_desc(sbv, lbo, sbo);\n"
    "  WG_FENCE();\n"
    "  WG_MMA(acc, a, desc, 1);\n"
    "  WG_COMMIT();\n"
    "  WG_WAIT0();\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NACC; i++) out[lid * NACC + i] = acc[i];\n"
    "}\n"
    "__kernel void rate(__global const char *B, __global int *out, const int iters) {\n"
    "  __local uint4 sbv[WGN * 2];\n"
    "  __local char *sb = (__local char *)sbv;\n"
    "  const int lid = get_local_id(0), ls = get_local_size(0);\n"
    "  for (int i = lid; i < WGN * 32; i += ls) sb[BPOS(i / 32, i % 32, 128, 256)] = B[i];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  int4 a = (int4)(lid, lid * 3, lid * 5, lid * 7);\n"
    "  int acc[NACC];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NACC; i++) acc[i] = i;\n"
    "  const ulong desc = wg_desc(sbv, 128, 256);\n"
    "  WG_FENCE();\n"
    "  for (int it = 0; it < iters; it++) {\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < MMAS; j++) WG_MMA(acc, a, desc, 1);\n"
    "    WG_COMMIT();\n"
    "    WG_WAIT0();\n"
    "  }\n"
    "  int s = 0;\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NACC; i++) s += acc[i];\n"
    "  out[get_global_id(0)] = s;\n"
    "}\n";

/* The source for N tokens: WG_MMA(acc, a, desc, sc) as an asm comment with
 * N/2 accumulators, the 4 A registers, the descriptor and the scale. */
static char *source(int n)
{
    const int nacc = n / 2;
    size_t cap = 65536 + strlen(body);
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "#define WGN %d\n#define WG_MMA(acc, a, desc, sc) asm volatile(\"//@WG mma m64n%dk32.s32.u8.s8 {", n, n);
    for (int i = 0; i < nacc; i++) p += sprintf(p, "%s%%%d", i ? ", " : "", i);
    p += sprintf(p, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, %%%d;\" : ", nacc, nacc + 1, nacc + 2, nacc + 3, nacc + 4,
                 nacc + 5);
    for (int i = 0; i < nacc; i++) p += sprintf(p, "%s\"+r\"(acc[%d])", i ? ", " : "", i);
    p += sprintf(p, " : \"r\"((a).x), \"r\"((a).y), \"r\"((a).z), \"r\"((a).w), \"l\"(desc), \"r\"(sc) : \"memory\")\n");
    strcpy(p, body);
    return s;
}

/* PTX of the first build with its target raised to sm_90a and each "//@WG"
 * comment replaced by its instruction (NULL if there was none). */
static char *patch(const char *ptx, int *nwg)
{
    const size_t len = strlen(ptx);
    char *o = malloc(2 * len + 4096), *q = o;
    *nwg = 0;
    for (const char *l = ptx; *l;) {
        const char *e = strchr(l, '\n');
        const size_t ll = e ? (size_t)(e - l) : strlen(l);
        char line[1 << 14];
        if (ll >= sizeof line) return NULL;
        memcpy(line, l, ll);
        line[ll] = '\0';
        char *c = strstr(line, "//@WG ");
        if (strncmp(line, ".target sm_90", 13) == 0 && line[13] != 'a') {
            q += sprintf(q, ".target sm_90a%s\n", line + 13);
        } else if (c) {
            const char *what = c + 6;
            (*nwg)++;
            if (strncmp(what, "fence", 5) == 0) q += sprintf(q, "\twgmma.fence.sync.aligned;\n");
            else if (strncmp(what, "commit", 6) == 0) q += sprintf(q, "\twgmma.commit_group.sync.aligned;\n");
            else if (strncmp(what, "wait0", 5) == 0) q += sprintf(q, "\twgmma.wait_group.sync.aligned 0;\n");
            else if (strncmp(what, "mma ", 4) == 0) {
                /* "mma SHAPE {d}, {a}, desc, scale;" */
                char *semi = strrchr(line, ';'), *comma = NULL;
                if (!semi) return NULL;
                *semi = '\0';
                comma = strrchr(line, ',');
                if (!comma) return NULL;
                *comma = '\0';
                const char *sc = comma + 1;
                while (*sc == ' ') sc++;
                q += sprintf(q, "\t{ .reg .pred wgp; setp.ne.b32 wgp, %s, 0;\n\twgmma.mma_async.sync.aligned.%s, wgp; }\n",
                             sc, what + 4);
            } else
                return NULL;
        } else {
            memcpy(q, line, ll);
            q += ll;
            *q++ = '\n';
        }
        l += ll + (e ? 1 : 0);
    }
    *q = '\0';
    return o;
}

static cl_program build_wgmma(cl_context ctx, cl_device_id dev, int n, const char *opts, int verbose)
{
    char *src = source(n);
    const char *srcs[] = {src};
    cl_program p0 = probe_build(ctx, dev, 1, srcs, opts);
    free(src);
    if (!p0) return NULL;
    size_t bl = 0;
    CK(clGetProgramInfo(p0, CL_PROGRAM_BINARY_SIZES, sizeof bl, &bl, NULL));
    char *bin = calloc(1, bl + 1);
    unsigned char *bp = (unsigned char *)bin;
    CK(clGetProgramInfo(p0, CL_PROGRAM_BINARIES, sizeof bp, &bp, NULL));
    clReleaseProgram(p0);
    for (const char *l = bin; verbose && *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0'))
        if (!strncmp(l, ".version", 8) || !strncmp(l, ".target", 7))
            printf("first build's PTX: %.*s\n", (int)strcspn(l, "\n"), l);
    int nwg = 0;
    char *ptx = patch(bin, &nwg);
    free(bin);
    if (!ptx || nwg == 0) {
        fprintf(stderr, "wgmma: the PTX could not be patched (%d comments found)\n", nwg);
        free(ptx);
        return NULL;
    }
    if (getenv("WGMMA_DUMP")) {
        FILE *f = fopen(getenv("WGMMA_DUMP"), "w");
        if (f) fputs(ptx, f), fclose(f);
    }
    size_t pl = strlen(ptx);
    const unsigned char *pp = (const unsigned char *)ptx;
    cl_int err, bst;
    cl_program p = clCreateProgramWithBinary(ctx, 1, &dev, &pl, &pp, &bst, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateProgramWithBinary: %d (binary status %d)\n", (int)err, (int)bst);
        free(ptx);
        return NULL;
    }
    err = clBuildProgram(p, 1, &dev, "", NULL, NULL);
    char log[1 << 15] = "";
    clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    if (err != CL_SUCCESS || (verbose && log[0])) fprintf(stderr, "patched build (N=%d): %d\n%s\n", n, (int)err, log);
    free(ptx);
    if (err != CL_SUCCESS) {
        clReleaseProgram(p);
        return NULL;
    }
    return p;
}

static uint32_t rng = 2463534242u;
static uint32_t xs32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* Test 1 for N tokens; returns how many of the four layouts were exact. */
static int check(cl_context ctx, cl_command_queue q, cl_program p, int n)
{
    const int nacc = n / 2;
    unsigned char A[64 * 32];
    signed char *B = malloc((size_t)n * 32);
    for (int i = 0; i < 64 * 32; i++) A[i] = (unsigned char)xs32();
    for (int i = 0; i < n * 32; i++) B[i] = (signed char)xs32();
    int *want = malloc(sizeof(int) * 64 * (size_t)n), *got = malloc(sizeof(int) * 128 * (size_t)nacc);
    for (int r = 0; r < 64; r++)
        for (int tok = 0; tok < n; tok++) {
            int s = 0;
            for (int k = 0; k < 32; k++) s += (int)A[r * 32 + k] * (int)B[tok * 32 + k];
            want[r * n + tok] = s;
        }
    cl_int err;
    cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof A, A, &err);
    CK(err);
    cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)n * 32, B, &err);
    CK(err);
    cl_mem dout = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof(int) * 128 * (size_t)nacc, NULL, &err);
    CK(err);
    cl_kernel k = clCreateKernel(p, "check", &err);
    CK(err);
    /* placements (L, S) of B's core matrices and descriptor offsets (lbo, sbo) */
    const int place[2][2] = {{128, 256}, {16 * n, 128}};
    int exact = 0;
    for (int pl = 0; pl < 2; pl++)
        for (int sw = 0; sw < (getenv("WGMMA_SWAP") ? 2 : 1); sw++) {
            const int L = place[pl][0], S = place[pl][1], lbo = sw ? S : L, sbo = sw ? L : S;
            args(k, 0, 7, A(da), A(db), A(dout), A(L), A(S), A(lbo), A(sbo));
            const size_t lws = 128;
            CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &lws, &lws, 0, NULL, NULL));
            CK(clEnqueueReadBuffer(q, dout, CL_TRUE, 0, sizeof(int) * 128 * (size_t)nacc, got, 0, NULL, NULL));
            int bad = 0, first = -1;
            for (int lid = 0; lid < 128; lid++) {
                const int w = lid >> 5, g = (lid & 31) >> 2, t = lid & 3;
                for (int i = 0; i < nacc; i++) {
                    const int row = 16 * w + g + 8 * ((i >> 1) & 1), tok = 8 * (i >> 2) + 2 * t + (i & 1);
                    if (got[lid * nacc + i] != want[row * n + tok]) {
                        if (first < 0) first = lid * nacc + i;
                        bad++;
                    }
                }
            }
            printf("check N=%d: B core matrices at K +%d, N +%d; descriptor LBO %d SBO %d: %s", n, L, S, lbo, sbo,
                   bad ? "WRONG" : "exact");
            if (bad) printf(" (%d of %d sums differ, first at %d: %d)", bad, 64 * n, first, got[first]);
            printf("\n");
            exact += !bad;
        }
    clReleaseKernel(k);
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dout);
    free(B);
    free(want);
    free(got);
    return exact;
}

static void rate(cl_context ctx, cl_device_id dev, cl_command_queue q, int n, cl_uint cus, int iters)
{
    static const int mmas[] = {4, 8};
    for (size_t mi = 0; mi < sizeof mmas / sizeof mmas[0]; mi++) {
        char opts[64];
        snprintf(opts, sizeof opts, "-DMMAS=%d", mmas[mi]);
        cl_program p = build_wgmma(ctx, dev, n, opts, 0);
        if (!p) return;
        cl_int err;
        cl_kernel k = clCreateKernel(p, "rate", &err);
        CK(err);
        signed char *B = malloc((size_t)n * 32);
        for (int i = 0; i < n * 32; i++) B[i] = (signed char)xs32();
        cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)n * 32, B, &err);
        CK(err);
        free(B);
        for (int wgs = 1; wgs <= 2; wgs++)
            for (int per_cu = 1; per_cu <= 4; per_cu *= 2) {
                const size_t local = 128 * (size_t)wgs, global = local * cus * (size_t)per_cu;
                cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, global * sizeof(cl_int), NULL, &err);
                CK(err);
                args(k, 0, 3, A(db), A(out), A(iters));
                double t[REPS];
                int ok = 1;
                for (int r = -2; r < REPS && ok; r++) {
                    const double s = probe_kernel_s(q, k, global, local);
                    ok = s >= 0;
                    if (r >= 0) t[r] = s;
                }
                if (ok) {
                    const double med = median(t, REPS);
                    const double ops = (double)(global / 128) * iters * mmas[mi] * 64.0 * n * 32 * 2;
                    printf("rate m64n%dk32 u8.s8, %d a commit group, %d warpgroups x %d groups/CU: %8.1f us, %7.1f TOPS\n",
                           n, mmas[mi], wgs, per_cu, med * 1e6, ops / med * 1e-12);
                } else
                    printf("rate m64n%dk32, %d warpgroups x %d groups/CU: launch failed\n", n, wgs, per_cu);
                clReleaseMemObject(out);
            }
        clReleaseMemObject(db);
        clReleaseKernel(k);
        clReleaseProgram(p);
    }
}

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 2048;
    cl_uint cus = 0;
    cl_device_id dev = probe_gpu("wgmma", &cus);
    cl_command_queue q;
    cl_context ctx = probe_context(dev, &q, NULL);
    /* the direct way first: wgmma in OpenCL C's inline asm */
    const char *direct = "__kernel void k(__global int *o) { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); o[0] = 1; }\n";
    cl_program pd = probe_build(ctx, dev, 1, &direct, "");
    printf("wgmma.fence in OpenCL C inline asm: %s\n", pd ? "built" : "refused (build log above)");
    if (pd) clReleaseProgram(pd);
    static const int ns[] = {64, 128, 256};
    int good = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cl_program p = build_wgmma(ctx, dev, ns[i], "", i == 0);
        if (!p) {
            printf("N=%d: no wgmma program\n", ns[i]);
            continue;
        }
        good += check(ctx, q, p, ns[i]) > 0;
        clReleaseProgram(p);
    }
    if (good)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) rate(ctx, dev, q, ns[i], cus, iters);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return good ? 0 : 1;
}
