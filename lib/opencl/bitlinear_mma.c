/*
 * bitlinear_mma.c (OpenCL) - host side of bl_gemm_mma (kernels/bitlinear.cl):
 * BitLinear for 8 tokens and more on NVIDIA INT8 tensor cores (inline PTX
 * mma.sync m16n8k32), called by bn_ocl_bitlinear once it has uploaded the
 * weights, the quantized activations and their per-token sums.  The mma is
 * emulated in plain OpenCL C on other devices (tests).
 *
 * Launch geometry comes from the kernel's tunables, chosen here from the
 * shape unless BITNET_MMA_OPTS names them (see bitlinear.c for the env vars):
 *   MMA_NT  tokens per pass: the token count rounded up to 8, at most 64
 *           (more tokens: equal passes)
 *   MMA_MT  16-row tiles per warp (2)     MMA_KB  blocks per chunk (4)
 *   MMA_WM  warps along rows (4), MMA_WK warps splitting k (2).  While the
 *           work-groups (16 * MMA_MT * MMA_WM rows each) would not cover the
 *           compute units: WM halved and WK doubled (KB >= 2 WK) where local
 *           memory allows, else MT halved.
 */
#include "../cpu/bitlinear.h"
#include "ocl.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MMA_MIN_TOKENS 8
#define MMA_MAX_NT 64

int bn_ocl_mma_wanted(const bn_ocl_caps *caps, const bitnet_ternary_matrix *w, uint64_t tokens)
{
    if (w->kind != BITNET_SCALE_TENSOR && w->kind != BITNET_SCALE_ROW) return 0;
    if (!caps->is_nvidia && !bn_ocl_env_on("BITNET_MMA_EMULATE")) return 0;
    if (bn_ocl_env_on("BITNET_OCL_PORTABLE")) return 0;
    const char *e = getenv("BITNET_MMA_MIN_TOKENS");
    uint64_t min = MMA_MIN_TOKENS;
    if (e && *e) {
        char *end;
        const unsigned long long v = strtoull(e, &end, 10);
        if (*end == '\0' && e[0] != '-') min = v;
    }
    return tokens >= min;
}

typedef struct {
    long wm, wk, mt, nt, kb;
} mma_geom;

/* Local memory of the kernel (bytes), as it declares it. */
static uint64_t mma_local_bytes(const mma_geom *gm, int emulate)
{
    const uint64_t xwords = (uint64_t)gm->nt * (uint64_t)(gm->kb / 2 * 64 + 8);
    const uint64_t rwords = gm->wk > 1 ? (uint64_t)(16 * gm->mt * gm->wm) * (uint64_t)gm->nt : 0;
    const uint64_t words = (xwords > rwords ? xwords : rwords) + 3;
    return words / 4 * 16 + (emulate ? (uint64_t)(32 * 6 * 4) * (uint64_t)(gm->wm * gm->wk) : 0);
}

/* The shape's defaults (see the file header). */
static void mma_defaults(mma_geom *gm, const bn_ocl_caps *caps, uint64_t out, uint64_t tokens, int emulate)
{
    const uint64_t passes = (tokens + MMA_MAX_NT - 1) / MMA_MAX_NT;
    const uint64_t per = (tokens + passes - 1) / passes;
    *gm = (mma_geom){.wm = 4, .wk = 2, .mt = 2, .nt = (long)((per + 7) / 8 * 8), .kb = 4};
    /* too few work-groups for the compute units: fewer rows each */
    while ((out + (uint64_t)(16 * gm->mt * gm->wm) - 1) / (uint64_t)(16 * gm->mt * gm->wm) < (uint64_t)caps->compute_units) {
        mma_geom next = *gm;
        if (gm->wm > 1) {
            next.wm /= 2;
            next.wk *= 2;
            if (next.kb < 2 * next.wk) next.kb = 2 * next.wk;
        }
        if (gm->wm == 1 || (caps->local_mem && mma_local_bytes(&next, emulate) > caps->local_mem)) {
            if (gm->mt == 1) break;
            next = *gm;
            next.mt /= 2;
        }
        *gm = next;
    }
}

static const struct {
    const char *name;
    size_t off;
} mma_opts[] = {
    {"MMA_WM", offsetof(mma_geom, wm)}, {"MMA_WK", offsetof(mma_geom, wk)}, {"MMA_MT", offsetof(mma_geom, mt)},
    {"MMA_NT", offsetof(mma_geom, nt)}, {"MMA_KB", offsetof(mma_geom, kb)},
};
#define N_MMA_OPTS (sizeof mma_opts / sizeof mma_opts[0])

bitnet_status bn_ocl_bitlinear_mma(bn_ocl *o, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io, cl_mem bw,
                                   cl_mem bx, cl_mem bs, cl_mem bd, cl_mem bb, cl_mem by, cl_mem bsum, size_t nblocks,
                                   size_t xstride)
{
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    const int emulate = !caps->is_nvidia || bn_ocl_env_on("BITNET_MMA_EMULATE");
    const char *eopts = getenv("BITNET_MMA_OPTS");
    if (!eopts) eopts = "";
    mma_geom gm;
    mma_defaults(&gm, caps, w->out, io->tokens, emulate);

    /* the tunables: BITNET_MMA_OPTS where it names them, else ours on the command line */
    char opts[768];
    int len = snprintf(opts, sizeof opts, "-cl-fp32-correctly-rounded-divide-sqrt%s", emulate ? " -DMMA_EMULATE" : "");
    for (size_t i = 0; i < N_MMA_OPTS && len >= 0 && (size_t)len < sizeof opts; i++) {
        long *v = (long *)((char *)&gm + mma_opts[i].off);
        int found = 0;
        *v = bn_ocl_opt_value(eopts, mma_opts[i].name, *v, &found);
        if (!found) len += snprintf(opts + len, sizeof opts - (size_t)len, " -D%s=%ld", mma_opts[i].name, *v);
    }
    if (len >= 0 && (size_t)len < sizeof opts) len += snprintf(opts + len, sizeof opts - (size_t)len, " %s", eopts);
    if (len < 0 || (size_t)len >= sizeof opts) return bn_fail(BITNET_E_INVALID, "bitlinear: BITNET_MMA_OPTS too long");

    const long nw = gm.wm * gm.wk;
    if (gm.nt < 8 || gm.nt % 8 || gm.nt > 1024 || gm.kb < 2 || gm.kb % 2 || gm.kb > 256 || gm.wm < 1 || gm.wk < 1 ||
        gm.mt < 1 || gm.mt > 16 || nw > 32 || (caps->max_wg && (size_t)(32 * nw) > caps->max_wg))
        return bn_fail(BITNET_E_INVALID,
                       "bitlinear: mma tunables out of range (MMA_NT %ld: a multiple of 8; MMA_KB %ld: even; "
                       "MMA_WM %ld x MMA_WK %ld warps: 32 work-items each, at most %zu; MMA_MT %ld: 1..16)",
                       gm.nt, gm.kb, gm.wm, gm.wk, caps->max_wg, gm.mt);
    const uint64_t lbytes = mma_local_bytes(&gm, emulate);
    if (caps->local_mem && lbytes > caps->local_mem)
        return bn_fail(BITNET_E_INVALID, "bitlinear: mma tunables need %llu bytes of local memory, the device has %llu",
                       (unsigned long long)lbytes, (unsigned long long)caps->local_mem);

    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "bitlinear", "bl_gemm_mma", opts, &k);
    if (st) return st;
    const cl_int per_row = w->kind == BITNET_SCALE_ROW, has_bias = io->bias != NULL, act = (cl_int)io->act;
    const cl_ulong c_out = w->out, c_tok = io->tokens, c_nblocks = nblocks, c_xstride = xstride;
    const cl_long perturb = bn_test_perturb("bitlinear") && !io->yq ? 0 : -1;
    st = bn_ocl_args(o, k, 15, sizeof bw, &bw, sizeof bx, &bx, sizeof bs, &bs, sizeof bd, &bd, sizeof per_row, &per_row,
                     sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act, sizeof by, &by, sizeof c_out, &c_out,
                     sizeof c_tok, &c_tok, sizeof c_nblocks, &c_nblocks, sizeof c_xstride, &c_xstride, sizeof perturb,
                     &perturb, sizeof bsum, &bsum);
    if (st) return st;
    const uint64_t mr = (uint64_t)(16 * gm.mt * gm.wm), nwg = (w->out + mr - 1) / mr;
    if (nwg > SIZE_MAX / (size_t)nw) return bn_fail(BITNET_E_LIMIT, "bitlinear: too many rows for one launch");
    const size_t local[2] = {32, (size_t)nw}, global[2] = {32, (size_t)nwg * (size_t)nw};
    return bn_ocl_run(o, k, 2, global, local, "bitlinear");
}
