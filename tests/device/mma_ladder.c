/*
 * mma_ladder.c - where bl_gemm_mma's loop loses the tensor cores' rate: its
 * loop rebuilt one piece at a time, each level timed alone on an NVIDIA GPU
 * (inline PTX, as in kernels/bitlinear.cl).  Every level has the product's
 * shape at 32 tokens a pass: work-groups of 4 warps, each warp 2 row tiles x
 * 4 token tiles, a chunk of one super-block = 4 k-steps x 16 mma.m16n8k32
 * (u8 x s8), CHUNKS chunks a launch (64: a row of 16384 columns), 2 or 3
 * work-groups a compute unit.
 *   level 1  the mma alone, A and B from registers (mma_peak's "pattern")
 *   level 2  + B from local memory: 4 LDS.128 a k-step at the product's
 *            swizzled positions, the stage turning every chunk
 *   level 3  + A decoded from code words every k-step (shift, AND), the
 *            next chunk's words taking the place of this one's
 *   level 4  + a barrier of the work-group every chunk
 *   level 5  + the code words loaded from global memory one chunk ahead
 *            (rows of CHUNKS x 64 bytes, 16 bytes a lane, as the product)
 *   level 6  + the activations copied by cp.async into three stages, the
 *            copies of chunk c + 2 issued after the wait for chunk c
 *   levels 7, 8  levels 5 and 6 with the code words two chunks ahead: three
 *            chunks a loop, so that three sets of words change roles
 *            without register copies (a copy waits for its load, and the
 *            levels before copy the next chunk's words into place, as the
 *            product does)
 *   level 9  level 6 with the code words copied by cp.async too, into
 *            three stages of their own beside the activations', and read
 *            from local memory (48 KiB of local memory in all)
 *   levels 10, 11  levels 5 and 6 with the code words in a tiled layout:
 *            the 16 rows of a tile one after the other for each chunk
 *            (1 KiB), so that a warp's load of rows g (or g + 8) is 512
 *            contiguous bytes instead of 8 rows' 64 bytes each
 * Nothing but the level's pieces is in a loop; the sums go to a buffer so
 * that nothing is dropped.  Prints the kernel median, the rate and the
 * cycles a chunk a scheduler at the clock given (default 1.98 GHz).
 * A probe for the GPU machine (tests/device/), not part of the library or
 * its tests.
 *
 *   cc -O2 -o mma_ladder tests/device/mma_ladder.c -lOpenCL
 *   ./mma_ladder [CHUNKS [GHZ [FIRST]]]     (FIRST: the first level run)
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 21

/* each printed level: the kernel's LEVEL, AHEAD, CSTAGE and TILED (the header's list) */
static const int lv[][4] = {{1, 1, 0, 0}, {2, 1, 0, 0}, {3, 1, 0, 0}, {4, 1, 0, 0}, {5, 1, 0, 0}, {6, 1, 0, 0},
                            {5, 2, 0, 0}, {6, 2, 0, 0}, {6, 1, 1, 0}, {5, 1, 0, 1}, {6, 1, 0, 1}};
#define LEVELS ((int)(sizeof lv / sizeof lv[0]))

static const char *src =
    "#define NT 32\n"
    "#define XU 16\n"
    "#define SU (NT * XU)\n"
    "#define ST 3\n"
    "#define XPOS(n, u) ((n) * XU + ((u) ^ ((((u) >> 3) & 1) << 1) ^ (((n) & 1) << 2)))\n"
    "inline int4 mma(int4 a, int2 b, int4 c) {\n"
    "  int d0, d1, d2, d3;\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 \"\n"
    "    \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "    : \"=r\"(d0), \"=r\"(d1), \"=r\"(d2), \"=r\"(d3)\n"
    "    : \"r\"(a.x), \"r\"(a.y), \"r\"(a.z), \"r\"(a.w), \"r\"(b.x), \"r\"(b.y), \"r\"(c.x), \"r\"(c.y), \"r\"(c.z), \"r\"(c.w));\n"
    "  return (int4)(d0, d1, d2, d3); }\n"
    "inline void cp16(__local uint4 *dst, __global const uchar *src) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"((uint)(ulong)dst), \"l\"((ulong)src) : \"memory\"); }\n"
    "inline int dec(uint w, int s) { return (int)((w >> (2 * s)) & 0x03030303u); }\n"
    "#if LEVEL >= 6\n"
    "#define WAIT() asm volatile(\"cp.async.wait_group 1;\" ::: \"memory\")\n"
    "#else\n"
    "#define WAIT()\n"
    "#endif\n"
    "#if LEVEL >= 4\n"
    "#define BAR() barrier(CLK_LOCAL_MEM_FENCE)\n"
    "#else\n"
    "#define BAR()\n"
    "#endif\n"
    "#if LEVEL >= 6 && CSTAGE\n"
    "#define CCOPY(sn, cc) for (int i = 0; i < 4; i++) cp16(cst + (sn) * 512 + lid + 128 * i, (__global const uchar *)(wc[i] + (cc) * 4))\n"
    "#else\n"
    "#define CCOPY(sn, cc)\n"
    "#endif\n"
    "#if LEVEL >= 6\n"
    "#define COPIES(cc) { const int sn = st == 0 ? 2 : st - 1; \\\n"
    "    if ((cc) + 2 < chunks) { \\\n"
    "      _Pragma(\"unroll\") for (int i = 0; i < 4; i++) { const int j = lid + 128 * i; cp16(stg + sn * SU + XPOS(j / XU, j % XU), xo[i] + ((cc) + 2) * 256); } \\\n"
    "      CCOPY(sn, (cc) + 2); } \\\n"
    "    asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "#else\n"
    "#define COPIES(cc)\n"
    "#endif\n"
    "#if CSTAGE\n"
    "#define FETCH(USE, cc) _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int h = 0; h < 2; h++) \\\n"
    "    USE[m][h] = cst[st * 512 + (wm * 32 + 16 * m + 8 * h + g) * 4 + t]\n"
    "#define LOAD(USE, LD, cc) _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int h = 0; h < 2; h++) \\\n"
    "    LD[m][h] = USE[m][h]\n"
    "#elif LEVEL >= 5\n"
    "#define FETCH(USE, cc)\n"
    "#define LOAD(USE, LD, cc) _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int h = 0; h < 2; h++) \\\n"
    "    LD[m][h] = wr[m][h][((cc) + AHEAD < chunks ? (cc) + AHEAD : (cc)) * (TILED ? 64 : 4)]\n"
    "#else\n"
    "#define FETCH(USE, cc)\n"
    "#define LOAD(USE, LD, cc) _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int h = 0; h < 2; h++) \\\n"
    "    LD[m][h] = USE[m][h] ^ (uint4)(cc)\n"
    "#endif\n"
    "#if LEVEL >= 3\n"
    "#define AFRAG(USE, m, s) a[m][0] = (int4)(dec(USE[m][0].x, s), dec(USE[m][1].x, s), dec(USE[m][0].y, s), dec(USE[m][1].y, s)); \\\n"
    "    a[m][1] = (int4)(dec(USE[m][0].z, s), dec(USE[m][1].z, s), dec(USE[m][0].w, s), dec(USE[m][1].w, s))\n"
    "#else\n"
    "#define AFRAG(USE, m, s) a[m][0] = as_int4(USE[m][0]); a[m][1] = as_int4(USE[m][1])\n"
    "#endif\n"
    "#if LEVEL >= 2\n"
    "#define BFRAG(j, u, s) as_int4(sb[XPOS(8 * (j) + g, u)])\n"
    "#else\n"
    "#define BFRAG(j, u, s) (bb[j] + (int4)(s))\n"
    "#endif\n"
    "/* one chunk: the words of USE computed, the next ones loaded into LD */\n"
    "#define CHUNK(cc, USE, LD) { WAIT(); BAR(); COPIES(cc) FETCH(USE, cc); LOAD(USE, LD, cc); \\\n"
    "    __local const uint4 *sb = stg + st * SU; \\\n"
    "    _Pragma(\"unroll\") for (int s = 0; s < 4; s++) { \\\n"
    "      int4 a[2][2]; \\\n"
    "      _Pragma(\"unroll\") for (int m = 0; m < 2; m++) { AFRAG(USE, m, s); } \\\n"
    "      const int u = 8 * (t >> 1) + 2 * s + (t & 1); \\\n"
    "      _Pragma(\"unroll\") for (int j = 0; j < 4; j++) { \\\n"
    "        const int4 xv = BFRAG(j, u, s); \\\n"
    "        _Pragma(\"unroll\") for (int m = 0; m < 2; m++) { \\\n"
    "          acc[m][j] = mma(a[m][0], xv.xy, acc[m][j]); \\\n"
    "          acc[m][j] = mma(a[m][1], xv.zw, acc[m][j]); } } } \\\n"
    "    st = st == 2 ? 0 : st + 1; }\n"
    "__kernel __attribute__((reqd_work_group_size(32, 4, 1)))\n"
    "void ladder(__global const uint4 *w, __global const uchar *x, __global int *out, const int chunks,\n"
    "            const uint wrow, const uint xstride) {\n"
    "  __local uint4 stg[ST * SU];\n"
    "#if CSTAGE\n"
    "  __local uint4 cst[ST * 512];\n"
    "#endif\n"
    "  const int lane = get_local_id(0), wm = get_local_id(1), lid = wm * 32 + lane, g = lane >> 2, t = lane & 3;\n"
    "  for (int i = lid; i < ST * SU; i += 128) stg[i] = (uint4)(i, 3 * i, 5 * i, 7 * i);\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  int4 acc[2][4];\n"
    "  _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int j = 0; j < 4; j++) acc[m][j] = (int4)(m + j);\n"
    "  const ulong row0 = ((ulong)get_group_id(0) * 4 + (ulong)wm) * 32;\n"
    "  __global const uint4 *wr[2][2];\n"
    "  _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int h = 0; h < 2; h++)\n"
    "    wr[m][h] = TILED ? w + ((row0 / 16 + (ulong)m) * chunks) * 64 + 32 * h + lane\n"
    "                     : w + (row0 + (ulong)(16 * m + 8 * h + g)) * wrow + t;\n"
    "  uint4 cv[2][2], c1[2][2], cn[2][2];\n"
    "  _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int h = 0; h < 2; h++) {\n"
    "#if LEVEL >= 5\n"
    "    cv[m][h] = wr[m][h][0];\n"
    "    c1[m][h] = wr[m][h][chunks > 1 ? (TILED ? 64 : 4) : 0];\n"
    "#else\n"
    "    cv[m][h] = (uint4)(lane + m, 3 * lane + h, 5 * lane, 7 * lane);\n"
    "    c1[m][h] = cv[m][h] + (uint4)(1);\n"
    "#endif\n"
    "  }\n"
    "  const int4 bb[4] = {(int4)(lane, 1, 2, 3), (int4)(4, lane, 5, 6), (int4)(7, 8, lane, 9), (int4)(10, 11, 12, lane)};\n"
    "#if LEVEL >= 6\n"
    "  __global const uchar *xo[4];\n"
    "  _Pragma(\"unroll\") for (int i = 0; i < 4; i++) { const int j = lid + 128 * i; xo[i] = x + (j / XU) * xstride + (j % XU) * 16; }\n"
    "#if CSTAGE\n"
    "  __global const uint4 *wc[4];\n"
    "  _Pragma(\"unroll\") for (int i = 0; i < 4; i++) { const int j = lid + 128 * i; wc[i] = w + ((ulong)get_group_id(0) * 128 + (ulong)(j >> 2)) * wrow + (j & 3); }\n"
    "#endif\n"
    "  _Pragma(\"unroll\") for (int c0 = 0; c0 < 2; c0++) {\n"
    "    _Pragma(\"unroll\") for (int i = 0; i < 4; i++) { const int j = lid + 128 * i; cp16(stg + c0 * SU + XPOS(j / XU, j % XU), xo[i] + c0 * 256); }\n"
    "    CCOPY(c0, c0);\n"
    "    asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "#endif\n"
    "  int st = 0;\n"
    "#if AHEAD == 2\n"
    "  /* words two chunks ahead, three sets that change roles without copies\n"
    "   * (a register copy would wait for its load) */\n"
    "  for (int c = 0; c < chunks; c += 3) {\n"
    "    CHUNK(c, cv, cn)\n"
    "    if (c + 1 < chunks) CHUNK(c + 1, c1, cv)\n"
    "    if (c + 2 < chunks) CHUNK(c + 2, cn, c1)\n"
    "  }\n"
    "#else\n"
    "  /* as the product: the next chunk's words loaded into cn, copied into cv */\n"
    "  for (int c = 0; c < chunks; c++) {\n"
    "    CHUNK(c, cv, cn)\n"
    "    _Pragma(\"unroll\") for (int m = 0; m < 2; m++) { cv[m][0] = cn[m][0]; cv[m][1] = cn[m][1]; }\n"
    "  }\n"
    "#endif\n"
    "  int4 sum = (int4)(0);\n"
    "  _Pragma(\"unroll\") for (int m = 0; m < 2; m++) _Pragma(\"unroll\") for (int j = 0; j < 4; j++) sum += acc[m][j];\n"
    "  out[get_global_id(1) * get_global_size(0) + get_global_id(0)] = sum.x + sum.y + sum.z + sum.w; }\n";

int main(int argc, char **argv)
{
    const int chunks = argc > 1 ? atoi(argv[1]) : 64;
    const double ghz = argc > 2 ? atof(argv[2]) : 1.98;
    const int first = argc > 3 ? atoi(argv[3]) : 1;
    if (chunks < 2 || chunks > 4096 || ghz <= 0 || first < 1 || first > LEVELS) {
        fprintf(stderr, "usage: mma_ladder [CHUNKS (2..4096) [GHZ [FIRST LEVEL (1..%d)]]]\n", LEVELS);
        return 2;
    }
    cl_uint cus = 0;
    cl_device_id dev = probe_gpu("mma_ladder", &cus);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CK(err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    CK(err);
    const cl_uint wrow = (cl_uint)chunks * 4, xstride = (cl_uint)chunks * 256;
    const size_t max_groups = 3 * (size_t)cus, rows = max_groups * 128;
    const size_t wbytes = rows * wrow * 16, xbytes = 32 * (size_t)xstride, hbytes = wbytes > xbytes ? wbytes : xbytes;
    unsigned char *host = malloc(hbytes);
    if (!host) {
        fprintf(stderr, "mma_ladder: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < hbytes; i++) host[i] = (unsigned char)(i * 2654435761u >> 13);
    cl_mem bw = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, wbytes, host, &err);
    CK(err);
    cl_mem bx = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, xbytes, host, &err);
    CK(err);
    cl_mem bo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, max_groups * 128 * sizeof(cl_int), NULL, &err);
    CK(err);
    free(host);
    printf("%d chunks of 64 mma a warp, 4 warps a work-group; cycles at %.2f GHz\n", chunks, ghz);
    for (int level = first; level <= LEVELS; level++) {
        char opts[80];
        snprintf(opts, sizeof opts, "-DLEVEL=%d -DAHEAD=%d -DCSTAGE=%d -DTILED=%d", lv[level - 1][0],
                 lv[level - 1][1], lv[level - 1][2], lv[level - 1][3]);
        cl_program p = probe_build(ctx, dev, 1, &src, opts);
        if (!p) return 1;
        cl_kernel k = clCreateKernel(p, "ladder", &err);
        CK(err);
        const cl_int c_chunks = chunks;
        args(k, 0, 6, A(bw), A(bx), A(bo), A(c_chunks), A(wrow), A(xstride));
        for (int per_cu = 2; per_cu <= 3; per_cu++) {
            const size_t local[2] = {32, 4}, global[2] = {32 * (size_t)cus * (size_t)per_cu, 4};
            double tt[REPS];
            for (int r = -2; r < REPS; r++) {
                cl_event ev;
                CK(clEnqueueNDRangeKernel(q, k, 2, NULL, global, local, 0, NULL, &ev));
                CK(clWaitForEvents(1, &ev));
                const double us = probe_ev_us(ev);
                clReleaseEvent(ev);
                if (r >= 0) tt[r] = us;
            }
            const double med = median(tt, REPS);
            const double mmas = (double)cus * per_cu * 4 * chunks * 64;
            /* a scheduler runs per_cu warps (one of each work-group) */
            const double cyc = med * 1e-6 * ghz * 1e9 / chunks;
            printf("level %d, %d work-groups a compute unit: %8.1f us, %6.1f TOPS, %6.0f cycles a chunk (as many warps a scheduler)\n",
                   level, per_cu, med, mmas * 8192.0 / (med * 1e-6) * 1e-12, cyc);
        }
        clReleaseKernel(k);
        clReleaseProgram(p);
    }
    clReleaseMemObject(bw);
    clReleaseMemObject(bx);
    clReleaseMemObject(bo);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
