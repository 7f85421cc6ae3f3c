/*
 * test_bitlinear.c - BitLinear: the _ref against hand-computed cases and an
 * independent integer model, then every fast path (each SIMD level, 1 and 2
 * threads, OpenCL when present) against the _ref on random inputs of awkward
 * shapes, for every scale kind, with and without bias, each activation,
 * re-quantized output and pre-quantized input, a residual (also in place).  Integer results and outputs
 * without a transcendental activation must match bit for bit; gelu, sigmoid
 * and silu within 4 ulp across devices.  BITNET_TEST_FULL=1 runs the full
 * shape grid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"
#include "testutil.h"

/* ---- helpers written from the layout in bnt(5), independent of the library */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { return tu_rand32(&rng_state); }
static float rndf(void) { return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0); }


static uint32_t ulp_diff(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = (int32_t)(0x80000000u - (uint32_t)ia);
    if (ib < 0) ib = (int32_t)(0x80000000u - (uint32_t)ib);
    int64_t d = (int64_t)ia - ib;
    return (uint32_t)(d < 0 ? -d : d);
}

/* Within max ulp.  Results below 2^-118 (gelu and silu far in the negative
 * tail) come from subnormal intermediates (erfc, exp) that carry fewer
 * significant bits than the libm's relative error, so there the difference
 * is taken absolutely: at most 2^-140. */
static int close_ulp(float a, float b, uint32_t max_ulp)
{
    if (ulp_diff(a, b) <= max_ulp) return 1;
    const float tiny = 0x1p-118f;
    return fabsf(a) < tiny && fabsf(b) < tiny && fabsf(a - b) <= 0x1p-140f;
}

static int transcendental(bitnet_act a)
{
    return a == BITNET_ACT_GELU || a == BITNET_ACT_GELU_TANH || a == BITNET_ACT_SIGMOID || a == BITNET_ACT_SILU;
}

/* ---- hand-computed cases for the definition ------------------------------ */

static void test_ref_hand(void **state)
{
    (void)state;
    /* W = [[1,0,-1],[-1,1,1]], d = 0.5; xq = [10,-20,30], s = 2:
     * acc = [-20, 0]; y = acc * (0.5 / 2) = [-5, 0]; + bias [1, 2] = [-4, 2]; relu -> [0, 2] */
    const int8_t q[6] = {1, 0, -1, -1, 1, 1};
    uint8_t t2[64];
    tu_t2_pack(q, 2, 3, t2);
    const float d = 0.5f, bias[2] = {1.0f, 2.0f};
    const int8_t xq[3] = {10, -20, 30};
    const float xs = 2.0f;
    float y[2];
    bitnet_ternary_matrix w = {t2, 2, 3, BITNET_SCALE_TENSOR, 0, &d};
    bitnet_bitlinear_io io = {.tokens = 1, .xq = xq, .xs = &xs, .y = y};
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    assert_true(y[0] == -5.0f && y[1] == 0.0f);
    io.bias = bias;
    io.act = BITNET_ACT_RELU;
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    assert_true(y[0] == 0.0f && y[1] == 2.0f);

    /* float input [1, -2, 3]: m = 3, s = 127/3, q = [42, -85, 127];
     * acc0 = 42 - 127 = -85, acc1 = -42 - 85 + 127 = 0 */
    const float x[3] = {1.0f, -2.0f, 3.0f};
    io = (bitnet_bitlinear_io){.tokens = 1, .x = x, .y = y};
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    const float s = 127.0f / 3.0f;
    assert_true(y[0] == (float)-85 * (0.5f / s));
    assert_true(y[1] == 0.0f);

    /* requantized output: y = [-5, 0] -> s = 127/5, q = [-127, 0] */
    int8_t yq[2];
    float ys;
    io = (bitnet_bitlinear_io){.tokens = 1, .xq = xq, .xs = &xs, .yq = yq, .ys = &ys};
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    assert_int_equal(yq[0], -127);
    assert_int_equal(yq[1], 0);
    assert_true(ys == 127.0f / 5.0f);

    /* groups of 32 over 64 columns: q = +1 then -1, x = 1, d = [2, 3]:
     * (32 * 2 + (-32) * 3) / 1 = -32 */
    int8_t q2[64];
    int8_t x2[64];
    for (int i = 0; i < 64; i++) {
        q2[i] = i < 32 ? 1 : -1;
        x2[i] = 1;
    }
    uint8_t t22[32];
    tu_t2_pack(q2, 1, 64, t22);
    const float dg[2] = {2.0f, 3.0f}, one = 1.0f;
    bitnet_ternary_matrix wg = {t22, 1, 64, BITNET_SCALE_GROUP, 32, dg};
    io = (bitnet_bitlinear_io){.tokens = 1, .xq = x2, .xs = &one, .y = y};
    assert_int_equal(bitnet_bitlinear_ref(&wg, &io), BITNET_OK);
    assert_true(y[0] == -32.0f);
    /* one group of 64 with d = 3: 0 */
    wg.group = 64;
    assert_int_equal(bitnet_bitlinear_ref(&wg, &io), BITNET_OK);
    assert_true(y[0] == 0.0f);
}

/* ---- random cases ----------------------------------------------------------- */

typedef struct {
    uint64_t in, out, tokens;
    bitnet_scale_kind kind;
    uint32_t group;
    int8_t *q;        /* codes */
    uint8_t *t2;
    float *d, *x, *xs, *bias, *res; /* res: a residual, tokens x out */
    int8_t *xq;
} rcase;

static void case_make(rcase *c, uint64_t in, uint64_t out, uint64_t tokens, bitnet_scale_kind kind, uint32_t group)
{
    memset(c, 0, sizeof *c);
    c->in = in;
    c->out = out;
    c->tokens = tokens;
    c->kind = kind;
    c->group = group;
    uint64_t nd = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? out : out * ((in + group - 1) / group);
    c->q = malloc(in * out);
    c->t2 = malloc(tu_t2_row_bytes(in) * out);
    c->d = malloc(nd * sizeof(float));
    c->x = malloc(tokens * in * sizeof(float));
    c->xq = malloc(tokens * in);
    c->xs = malloc(tokens * sizeof(float));
    c->bias = malloc(out * sizeof(float));
    c->res = malloc(tokens * out * sizeof(float));
    assert_non_null(c->q && c->t2 && c->d && c->x && c->xq && c->xs && c->bias && c->res);
    for (uint64_t i = 0; i < in * out; i++) c->q[i] = (int8_t)((int)(rnd() % 3) - 1);
    tu_t2_pack(c->q, out, in, c->t2);
    for (uint64_t i = 0; i < nd; i++) c->d[i] = 0.01f + fabsf(rndf());
    for (uint64_t i = 0; i < tokens * in; i++) c->x[i] = rndf() * 3.0f;
    for (uint64_t i = 0; i < tokens * in; i++) c->xq[i] = (int8_t)((int)(rnd() % 256) - 128);
    for (uint64_t t = 0; t < tokens; t++) c->xs[t] = 0.5f + fabsf(rndf()) * 40.0f;
    for (uint64_t o = 0; o < out; o++) c->bias[o] = rndf();
    for (uint64_t i = 0; i < tokens * out; i++) c->res[i] = rndf() * 4.0f;
}

static void case_free(rcase *c)
{
    free(c->q); free(c->t2); free(c->d); free(c->x); free(c->xq); free(c->xs); free(c->bias); free(c->res);
}

typedef struct {
    int prequant, requant, bias;
    bitnet_act act;
    int res; /* a residual: 1 its own array, 2 y itself (y += ...) */
} variant;

static const variant variants[] = {
    {0, 0, 0, BITNET_ACT_NONE, 0}, {1, 0, 1, BITNET_ACT_RELU, 0}, {0, 1, 1, BITNET_ACT_NONE, 0}, {1, 1, 0, BITNET_ACT_RELU, 0},
    {0, 0, 1, BITNET_ACT_GELU, 0}, {1, 0, 0, BITNET_ACT_GELU_TANH, 0}, {0, 0, 1, BITNET_ACT_SIGMOID, 0},
    {1, 0, 1, BITNET_ACT_SILU, 0}, {0, 1, 0, BITNET_ACT_SILU, 0}, {0, 0, 1, BITNET_ACT_RELU, 1}, {1, 1, 0, BITNET_ACT_NONE, 1},
    {0, 0, 0, BITNET_ACT_NONE, 2}, {1, 0, 1, BITNET_ACT_SILU, 2},
};
#define NVAR (sizeof variants / sizeof variants[0])

typedef struct {
    float *y;
    int8_t *yq;
    float *ys;
} outbuf;

static bitnet_status run_case(bitnet_backend *be, const rcase *c, const variant *v, outbuf *ob)
{
    bitnet_ternary_matrix w = {c->t2, c->out, c->in, c->kind, c->group, c->d};
    bitnet_bitlinear_io io = {.tokens = c->tokens, .act = v->act, .bias = v->bias ? c->bias : NULL};
    if (v->prequant) { io.xq = c->xq; io.xs = c->xs; } else io.x = c->x;
    if (v->requant) { io.yq = ob->yq; io.ys = ob->ys; } else io.y = ob->y;
    if (v->res == 1) io.residual = c->res;
    if (v->res == 2 && !v->requant) { /* in place: y holds the residual before the call */
        memcpy(ob->y, c->res, c->tokens * c->out * sizeof(float));
        io.residual = ob->y;
    }
    return be ? bitnet_bitlinear(be, &w, &io) : bitnet_bitlinear_ref(&w, &io);
}

static void ob_alloc(outbuf *ob, const rcase *c)
{
    ob->y = malloc(c->tokens * c->out * sizeof(float));
    ob->yq = malloc(c->tokens * c->out);
    ob->ys = malloc(c->tokens * sizeof(float));
    assert_non_null(ob->y && ob->yq && ob->ys);
    memset(ob->y, 0xa5, c->tokens * c->out * sizeof(float));
}
static void ob_free(outbuf *ob) { free(ob->y); free(ob->yq); free(ob->ys); }

/* Returns the number of mismatches (printed, first few). */
static int compare(const char *what, const rcase *c, const variant *v, const outbuf *ref, const outbuf *got, uint32_t max_ulp)
{
    int bad = 0;
    const uint64_t n = c->tokens * c->out;
    if (v->requant) {
        for (uint64_t t = 0; t < c->tokens; t++)
            if (!close_ulp(ref->ys[t], got->ys[t], max_ulp)) bad++;
        for (uint64_t i = 0; i < n; i++)
            if (max_ulp ? abs(ref->yq[i] - got->yq[i]) > 1 : ref->yq[i] != got->yq[i]) bad++;
    } else if (max_ulp == 0) {
        if (memcmp(ref->y, got->y, n * sizeof(float)) != 0)
            for (uint64_t i = 0; i < n; i++) bad += memcmp(&ref->y[i], &got->y[i], 4) != 0;
    } else {
        for (uint64_t i = 0; i < n; i++)
            if (!close_ulp(ref->y[i], got->y[i], max_ulp)) {
                if (!bad) print_message("#   first: [%llu] %.9g vs %.9g (%u ulp)\n", (unsigned long long)i, (double)ref->y[i],
                                        (double)got->y[i], ulp_diff(ref->y[i], got->y[i]));
                bad++;
            }
    }
    if (bad)
        print_message("# %s: in %llu out %llu tokens %llu kind %d group %u prequant %d requant %d bias %d act %s res %d: %d mismatches\n",
                      what, (unsigned long long)c->in, (unsigned long long)c->out, (unsigned long long)c->tokens,
                      (int)c->kind, c->group, v->prequant, v->requant, v->bias, bitnet_act_name(v->act), v->res, bad);
    return bad;
}

/* The independent model: with d = 1, s = 1 and pre-quantized input, y is
 * exactly (float)acc (|acc| < 2^24), and acc is a plain integer dot. */
static void test_ref_integer_model(void **state)
{
    (void)state;
    const uint64_t shapes[][3] = {{1, 1, 1}, {3, 5, 2}, {17, 7, 3}, {255, 9, 2}, {4097, 5, 2}, {300, 3, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        rcase c;
        case_make(&c, shapes[s][0], shapes[s][1], shapes[s][2], BITNET_SCALE_TENSOR, 0);
        c.d[0] = 1.0f;
        for (uint64_t t = 0; t < c.tokens; t++) c.xs[t] = 1.0f;
        outbuf ob;
        ob_alloc(&ob, &c);
        const variant v = {1, 0, 0, BITNET_ACT_NONE, 0};
        assert_int_equal(run_case(NULL, &c, &v, &ob), BITNET_OK);
        for (uint64_t t = 0; t < c.tokens; t++)
            for (uint64_t o = 0; o < c.out; o++) {
                int64_t acc = 0;
                for (uint64_t i = 0; i < c.in; i++) acc += (int64_t)c.q[o * c.in + i] * c.xq[t * c.in + i];
                assert_true(ob.y[t * c.out + o] == (float)acc);
            }
        ob_free(&ob);
        case_free(&c);
    }
}

static int full_grid(void) { const char *e = getenv("BITNET_TEST_FULL"); return e && *e && strcmp(e, "0") != 0; }

typedef struct { uint64_t in, out, tokens; } shape3;
static const shape3 quick_shapes[] = {
    {1, 1, 1}, {3, 5, 2}, {17, 64, 7}, {255, 5, 1}, {4097, 5, 2}, {4097, 64, 1}, {128, 1000, 7}, {255, 64, 64}, {384, 33, 9},
    {4097, 33, 9}, {8193, 3, 16}, {2049, 17, 64}, /* activations beyond 32 KiB: the column-chunked path */
    {255, 5, 513}, {17, 64, 513},                 /* tokens past 512: several token blocks and one left over */
    {16384, 3, 2}, {16388, 3, 2}, /* float activations: the most q_acts_rows holds in registers, and one float4 more */
};

typedef struct { bitnet_scale_kind kind; uint32_t group; } skind;
static const skind kinds[] = {{BITNET_SCALE_TENSOR, 0}, {BITNET_SCALE_ROW, 0}, {BITNET_SCALE_GROUP, 32}, {BITNET_SCALE_GROUP, 128},
                             {BITNET_SCALE_GROUP, 64},    {BITNET_SCALE_GROUP, 256}};

typedef struct { const char *simd; int threads; const char *device; } config;

/* Runs every shape x kind x variant through the ref and the given configs. */
static int sweep(const config *cfg, size_t ncfg, int opencl)
{
    static const uint64_t ins[] = {1, 3, 17, 255, 4096, 4097}, outs[] = {1, 5, 64, 1000}, toks[] = {1, 2, 7, 64};
    shape3 full[5 * 4 * 4];
    const shape3 *shapes = quick_shapes;
    size_t nshapes = sizeof quick_shapes / sizeof quick_shapes[0];
    if (full_grid()) {
        nshapes = 0;
        for (int a = 0; a < 5; a++) for (int b = 0; b < 4; b++) for (int e = 0; e < 4; e++)
            full[nshapes++] = (shape3){ins[a], outs[b], toks[e]};
        shapes = full;
    }
    bitnet_backend *be[8];
    for (size_t i = 0; i < ncfg; i++) {
        if (cfg[i].simd) setenv("BITNET_SIMD", cfg[i].simd, 1);
        bitnet_status st = bitnet_backend_create(&be[i], cfg[i].device, cfg[i].threads);
        unsetenv("BITNET_SIMD");
        if (st) {
            for (size_t k = 0; k < i; k++) bitnet_backend_free(be[k]);
            return -1;
        }
    }
    int bad = 0;
    for (size_t s = 0; s < nshapes; s++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t vi = 0; vi < NVAR; vi++) {
                /* keep the quick run short: every variant on small shapes, a few on big ones */
                if (!full_grid() && shapes[s].in * shapes[s].out * shapes[s].tokens > 100000 && vi % 3 != k % 3) continue;
                rcase c;
                case_make(&c, shapes[s].in, shapes[s].out, shapes[s].tokens, kinds[k].kind, kinds[k].group);
                outbuf ref, got;
                ob_alloc(&ref, &c);
                ob_alloc(&got, &c);
                assert_int_equal(run_case(NULL, &c, &variants[vi], &ref), BITNET_OK);
                for (size_t i = 0; i < ncfg; i++) {
                    memset(got.y, 0xa5, c.tokens * c.out * sizeof(float));
                    bitnet_status st = run_case(be[i], &c, &variants[vi], &got);
                    if (st) {
                        print_message("# %s: %s (%s)\n", bitnet_backend_describe(be[i]), bitnet_strerror(st), bitnet_error_detail());
                        bad++;
                        continue;
                    }
                    const uint32_t tol = opencl && transcendental(variants[vi].act) ? 4 : 0;
                    bad += compare(bitnet_backend_describe(be[i]), &c, &variants[vi], &ref, &got, tol);
                }
                ob_free(&ref);
                ob_free(&got);
                case_free(&c);
            }
    for (size_t i = 0; i < ncfg; i++) bitnet_backend_free(be[i]);
    return bad;
}

static void test_cpu_paths(void **state)
{
    (void)state;
    const config cfg[] = {{"scalar", 1, "cpu"}, {"avx2", 2, "cpu"}, {"avx512", 1, "cpu"}, {"avx512-vnni", 2, "cpu"},
                          {"avx512-vnni", 1, "cpu"}};
    assert_int_equal(sweep(cfg, sizeof cfg / sizeof cfg[0], 0), 0);
}

static void test_opencl(void **state)
{
    (void)state;
    bitnet_backend *probe = NULL;
    if (bitnet_backend_create(&probe, "opencl", 1) != BITNET_OK) {
        print_message("# no OpenCL device: %s\n", bitnet_error_detail());
        skip();
    }
    bitnet_backend_free(probe);
    const config cfg[] = {{NULL, 1, "opencl"}};
    int bad = sweep(cfg, 1, 1);
    assert_int_equal(bad, 0);
    /* the portable kernel on NVIDIA hardware: the same results */
    setenv("BITNET_OCL_PORTABLE", "1", 1);
    bad = sweep(cfg, 1, 1);
    unsetenv("BITNET_OCL_PORTABLE");
    assert_int_equal(bad, 0);
}

/* ---- NVIDIA variants, emulated on any OpenCL device ------------------------------
 * BITNET_GEMV_NV_EMULATE=1 builds the NV kernels with portable dp4a and warp
 * sums (-DNV_EMULATE) and takes them on any device; BITNET_GEMV_NV picks the
 * variant (1, 3 or 4) and BITNET_GEMV_OPTS its tunables.  Every variant, the
 * host's defaults (BITNET_GEMV_NV unset) and a spread of
 * tunables (rows per warp not dividing out nor a multiple of the rows computed
 * together, unroll past the blocks of a row,
 * tokens per pass not dividing tokens, local memory too small for the wanted
 * tokens per pass or for one token: the fallback) against the _ref, exactly. */
typedef struct { const char *v, *opts; } nvconf; /* v NULL: BITNET_GEMV_NV unset */
static const nvconf nvconfs[] = {
    {NULL, NULL}, /* the host's choice by token count */
    {"1", ""},
    {"1", "-DNV_WARPS=2 -DNV_ROWS=3 -DNV_UNROLL=1 -DNV_TT=3"},
    {"1", "-DNV_WARPS=3 -DNV_ROWS=1 -DNV_UNROLL=3 -DNV_TT=8 -DNV_LMEM=4300"},
    {"3", ""},
    {"3", "-DNV_WARPS=2 -DNV_ROWS=3 -DNV_UNROLL=1 -DNV_TT=3"},
    {"3", "-DNV_WARPS=3 -DNV_ROWS=1 -DNV_UNROLL=3 -DNV_TT=8 -DNV_LMEM=4300"},
    {"3", "-DNV_WARPS=1 -DNV_ROWS=4 -DNV_UNROLL=2 -DNV_TT=5 -DNV_LMEM=1024"},
    {"4", ""},
    {"4", "-DNV_WARPS=8 -DNV_U=2 -DNV_R=2"}, /* the one-token default */
    {"4", "-DNV_WARPS=3 -DNV_RW=3 -DNV_U=1 -DNV_TT=8 -DNV_LMEM=4300"},
    {"4", "-DNV_WARPS=1 -DNV_RW=2 -DNV_U=3 -DNV_TT=5 -DNV_LMEM=1024"},
    {"4", "-DNV_WARPS=3 -DNV_RW=5 -DNV_R=2 -DNV_U=3 -DNV_TT=3"}, /* rows per warp not a multiple of NV_R */
    {"4", "-DNV_WARPS=2 -DNV_R=4 -DNV_U=1 -DNV_TT=2"},             /* rows per warp from the shape, rounded up */
};
#define NNVCONF (sizeof nvconfs / sizeof nvconfs[0])

static int nv_emulate = 1;
static void nv_env(const nvconf *c)
{
    setenv("BITNET_GEMV_NV_EMULATE", nv_emulate ? "1" : "0", 1);
    if (c->v) setenv("BITNET_GEMV_NV", c->v, 1);
    if (c->opts) setenv("BITNET_GEMV_OPTS", c->opts, 1);
}
static const char *nv_name(const nvconf *c) { return c->v ? c->v : "(default)"; }
static const char *nv_opts(const nvconf *c) { return c->opts ? c->opts : "(default)"; }
static void nv_env_clear(void)
{
    unsetenv("BITNET_GEMV_NV_EMULATE");
    unsetenv("BITNET_GEMV_NV");
    unsetenv("BITNET_GEMV_OPTS");
}

/* Every shape of the grid through the NV configurations; returns mismatches. */
static int nv_sweep(bitnet_backend *be)
{
    static const uint64_t ins[] = {1, 3, 17, 255, 384, 4097, 8193}, outs[] = {1, 5, 64, 1000}, toks[] = {1, 2, 7, 8, 64};
    static const skind nvkinds[] = {{BITNET_SCALE_TENSOR, 0}, {BITNET_SCALE_ROW, 0}};
    int bad = 0, runs = 0;
    size_t turn = 0;
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t b = 0; b < sizeof outs / sizeof outs[0]; b++)
            for (size_t e = 0; e < sizeof toks / sizeof toks[0]; e++) {
                const uint64_t in = ins[a], out = outs[b], tokens = toks[e];
                const int big = in * out * tokens > 2000000;
                for (size_t k = 0; k < 2; k++) {
                    rcase c;
                    case_make(&c, in, out, tokens, nvkinds[k].kind, nvkinds[k].group);
                    const variant *v = &variants[turn % NVAR];
                    outbuf ref, got;
                    ob_alloc(&ref, &c);
                    ob_alloc(&got, &c);
                    assert_int_equal(run_case(NULL, &c, v, &ref), BITNET_OK);
                    /* small cases through every configuration, big ones through two in turn */
                    for (size_t n = 0; n < NNVCONF; n++) {
                        if (big && n != turn % NNVCONF && n != (turn + 3) % NNVCONF) continue;
                        nv_env(&nvconfs[n]);
                        memset(got.y, 0xa5, tokens * out * sizeof(float));
                        const bitnet_status st = run_case(be, &c, v, &got);
                        nv_env_clear();
                        runs++;
                        if (st) {
                            print_message("# variant %s \"%s\": %s (%s)\n", nv_name(&nvconfs[n]), nv_opts(&nvconfs[n]),
                                          bitnet_strerror(st), bitnet_error_detail());
                            bad++;
                            continue;
                        }
                        const int m = compare("nv emulated", &c, v, &ref, &got, transcendental(v->act) ? 4 : 0);
                        if (m) print_message("#   variant %s \"%s\"\n", nv_name(&nvconfs[n]), nv_opts(&nvconfs[n]));
                        bad += m;
                    }
                    turn++;
                    ob_free(&ref);
                    ob_free(&got);
                    case_free(&c);
                }
            }
    print_message("# %d %s NV runs\n", runs, nv_emulate ? "emulated" : "native");
    return bad;
}

/* An OpenCL backend (one thread), or the test is skipped. */
static bitnet_backend *ocl_or_skip(void)
{
    bitnet_backend *be = NULL;
    if (bitnet_backend_create(&be, "opencl", 1) != BITNET_OK) {
        print_message("# no OpenCL device: %s\n", bitnet_error_detail());
        skip();
    }
    return be;
}

static void test_opencl_nv_emulated(void **state)
{
    (void)state;
    bitnet_backend *be = ocl_or_skip();
    nv_emulate = 1;
    assert_int_equal(nv_sweep(be), 0);
    /* bl_group's NVIDIA arithmetic (c - 1 as signed bytes, dp4a), emulated:
     * group sizes from a sub-block to several blocks, a partial last group,
     * more groups than a work-group has work-items, token passes with a tail */
    {
        static const shape3 gs[] = {{255, 5, 1}, {4097, 33, 5}, {300, 3, 9}};
        static const uint32_t groups[] = {32, 64, 128, 256, 512};
        setenv("BITNET_GEMV_NV_EMULATE", "1", 1);
        int bad = 0;
        for (size_t a = 0; a < sizeof gs / sizeof gs[0]; a++)
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
                const variant *v = &variants[(a + g) % NVAR];
                rcase c;
                case_make(&c, gs[a].in, gs[a].out, gs[a].tokens, BITNET_SCALE_GROUP, groups[g]);
                outbuf ref, got;
                ob_alloc(&ref, &c);
                ob_alloc(&got, &c);
                assert_int_equal(run_case(NULL, &c, v, &ref), BITNET_OK);
                assert_int_equal(run_case(be, &c, v, &got), BITNET_OK);
                bad += compare("bl_group (NV_EMULATE)", &c, v, &ref, &got, transcendental(v->act) ? 4 : 0);
                ob_free(&ref);
                ob_free(&got);
                case_free(&c);
            }
        unsetenv("BITNET_GEMV_NV_EMULATE");
        assert_int_equal(bad, 0);
    }
    /* on NVIDIA hardware the same grid through the real dp4a and shuffles */
    if (strstr(bitnet_backend_describe(be), "NVIDIA")) {
        nv_emulate = 0;
        const int bad = nv_sweep(be);
        nv_emulate = 1;
        assert_int_equal(bad, 0);
    }

    /* The test can fail, and the variant asked for is the one that runs:
     * -DNV_TEST_V<n>=m starts each lane's sums of variant n at m, so with
     * d = s = 1 every output is off by exactly 32 m.  Without BITNET_GEMV_NV
     * one token takes variant 4, more take 3; variants 3 and 4 without room
     * for one token's activations (in 4097 > NV_LMEM) must run variant 1. */
    static const struct { const char *v; uint64_t tokens; int ran; } hook[] = {
        {"1", 3, 1}, {"3", 3, 3}, {"4", 3, 4}, {NULL, 1, 4}, {NULL, 3, 3}, {NULL, 8, 3},
    };
    static const char *const hook_opts = "-DNV_LMEM=4096 -DNV_TEST_V1=2 -DNV_TEST_V3=4 -DNV_TEST_V4=5";
    /* on NVIDIA 8 tokens would take the tensor cores: this part is about the NV family */
    setenv("BITNET_MMA_MIN_TOKENS", "1000000", 1);
    static const uint64_t hook_in[] = {255, 4097};
    for (size_t a = 0; a < 2; a++)
        for (size_t vv = 0; vv < sizeof hook / sizeof hook[0]; vv++) {
            rcase c;
            case_make(&c, hook_in[a], 9, hook[vv].tokens, BITNET_SCALE_TENSOR, 0);
            c.d[0] = 1.0f;
            for (uint64_t t = 0; t < c.tokens; t++) c.xs[t] = 1.0f;
            outbuf ref, got;
            ob_alloc(&ref, &c);
            ob_alloc(&got, &c);
            const variant v = {1, 0, 0, BITNET_ACT_NONE, 0};
            assert_int_equal(run_case(NULL, &c, &v, &ref), BITNET_OK);
            const nvconf nc = {hook[vv].v, hook_opts};
            nv_env(&nc);
            assert_int_equal(run_case(be, &c, &v, &got), BITNET_OK);
            nv_env_clear();
            const int ran = hook_in[a] == 4097 ? 1 : hook[vv].ran;
            for (uint64_t i = 0; i < c.tokens * c.out; i++) assert_true(got.y[i] - ref.y[i] == 32.0f * (float)(ran + 1));
            ob_free(&ref);
            ob_free(&got);
            case_free(&c);
        }

    unsetenv("BITNET_MMA_MIN_TOKENS");

    /* any other BITNET_GEMV_NV (0 and 2 were variants once) is refused */
    static const char *const bad_nv[] = {"0", "2", "5", "34", "x"};
    rcase c;
    case_make(&c, 255, 9, 2, BITNET_SCALE_TENSOR, 0);
    outbuf got;
    ob_alloc(&got, &c);
    const variant v = {1, 0, 0, BITNET_ACT_NONE, 0};
    for (size_t i = 0; i < sizeof bad_nv / sizeof bad_nv[0]; i++) {
        const nvconf nc = {bad_nv[i], ""};
        nv_env(&nc);
        assert_int_equal(run_case(be, &c, &v, &got), BITNET_E_INVALID);
        nv_env_clear();
        assert_non_null(strstr(bitnet_error_detail(), "BITNET_GEMV_NV"));
    }
    ob_free(&got);
    case_free(&c);
    bitnet_backend_free(be);
}

/* ---- tensor cores (bl_mma_skinny, bl_gemm_mma), emulated on any OpenCL device ----
 * BITNET_MMA_EMULATE=1 builds them with the mma in portable OpenCL C
 * (-DMMA_EMULATE) and takes it from BITNET_MMA_MIN_TOKENS (2) tokens on,
 * bl_mma_skinny up to 8 tokens and bl_gemm_mma beyond;
 * BITNET_MMA_OPTS sets their tunables.  Shapes with every awkward in (3: one
 * half super-block; 255: one odd block; 4097: 33 blocks, several chunks),
 * out (1, 5, 17, 100: rows past out in a tile; 64; 1000: many work-groups) and
 * tokens (2, 3, 7, 8, and 9, 16 with in up to 8192: bl_mma_skinny; 12 with in
 * 8193, 17, 23, 64, 513: bl_gemm_mma; passes and tokens past the count), tensor
 * and row scales, through the tunables the host picks (k parts over
 * work-groups where one tile of rows and tokens is all there is, as for
 * 4097 x 100 x 23: the parts' sums stored from the registers, rows past out
 * and the last token's pair cut) and through fixed ones (2, 3 and 4
 * stages, chunks of 1 to 4 super-blocks, several row tiles per warp,
 * s8 decoding, more rows per work-group than out, k parts over work-groups:
 * 3, 17 and the host's; for bl_mma_skinny 1 to 8 warps, 1 to 4 row tiles,
 * 1 to 3 segments in flight and 1 to 3 token tiles a pass, k split over
 * more warps than a row has segments, s8), exactly against the _ref. */
typedef struct { uint64_t in, out, tokens; int row, host; } mshape; /* host: also through the host's choice */
static const mshape mma_shapes[] = {
    {3, 5, 8, 0, 1},   {255, 17, 9, 1, 0},   {4097, 5, 17, 0, 1},    {255, 64, 64, 1, 1}, {3, 1000, 9, 1, 1},
    {4097, 64, 8, 1, 0}, {255, 1, 17, 0, 0}, {128, 1000, 64, 0, 1}, {4097, 17, 9, 1, 0}, {255, 17, 513, 1, 1},
    {255, 17, 2, 1, 1},  {4097, 100, 3, 0, 1}, {17, 65, 7, 1, 0},    {1000, 33, 5, 0, 0}, {3, 70, 6, 1, 0},
    {8193, 5, 12, 0, 1}, {1000, 20, 16, 1, 0}, {4097, 100, 23, 1, 1},
};
/* the kernel bitlinear_mma.c picks: bl_mma_skinny up to 8 tokens, and up to
 * 16 where a row has at most 8192 columns */
static int takes_skinny(const mshape *sh) { return sh->tokens <= 8 || (sh->tokens <= 16 && sh->in <= 8192); }
static const char *const mma_opts[] = {
    "", /* the host's choice from the shape */
    "-DMMA_WM=2 -DMMA_MT=2 -DMMA_NT=8 -DMMA_KB=2 -DMMA_ST=3",                  /* 3 stages */
    "-DMMA_WM=1 -DMMA_MT=1 -DMMA_NT=16 -DMMA_KB=6 -DMMA_ST=2 -DMMA_SIGNED=1", /* 3 super-blocks a chunk, s8 */
    "-DMMA_WM=3 -DMMA_MT=3 -DMMA_NT=24 -DMMA_KB=4 -DMMA_ST=4",   /* 144 rows, 3 tiles a warp, rows swizzled */
    "-DMMA_WM=2 -DMMA_MT=2 -DMMA_NT=16 -DMMA_KB=2 -DMMA_KP=1000", /* a part per chunk: 17 for in 4097 */
    "-DMMA_WM=1 -DMMA_MT=1 -DMMA_NT=8 -DMMA_KB=8 -DMMA_ST=3 -DMMA_KP=3", /* 3 k parts, 16 units a row */
    "-DSK_W=3 -DSK_T=3 -DSK_A=1",                                        /* skinny: 3 warps, 3 tiles, loads a step ahead */
    "-DSK_W=1 -DSK_T=1 -DSK_A=0 -DMMA_SIGNED=1",                         /* skinny: one warp, no look-ahead, s8 */
    "-DSK_W=2 -DSK_T=2 -DSK_A=1 -DSK_N=3",                               /* skinny: 2 warps, 2 tiles, 24 tokens a pass */
};
#define NMMAOPTS (sizeof mma_opts / sizeof mma_opts[0])
#define NMMA_GEMM 5   /* bl_gemm_mma's option sets: 1 to 5 */
#define NMMA_SKINNY 3 /* bl_mma_skinny's: 6 to 8 */
_Static_assert(NMMAOPTS == 1 + NMMA_GEMM + NMMA_SKINNY, "mma_opts: the host's choice, then each kernel's sets");

static void mma_env(const char *opts, int emulate)
{
    if (emulate) setenv("BITNET_MMA_EMULATE", "1", 1);
    setenv("BITNET_MMA_OPTS", opts, 1);
}
static void mma_env_clear(void)
{
    unsetenv("BITNET_MMA_EMULATE");
    unsetenv("BITNET_MMA_OPTS");
    unsetenv("BITNET_MMA_MIN_TOKENS");
}

/* Every shape through one fixed option set in turn, some also through the
 * host's choice (each option set is one program build, seconds on a CPU
 * driver); returns mismatches. */
static int mma_sweep(bitnet_backend *be, int emulate)
{
    int bad = 0, runs = 0;
    size_t ngemm = 0, nskinny = 0;
    for (size_t s = 0; s < sizeof mma_shapes / sizeof mma_shapes[0]; s++) {
        const mshape *sh = &mma_shapes[s];
        rcase c;
        case_make(&c, sh->in, sh->out, sh->tokens, sh->row ? BITNET_SCALE_ROW : BITNET_SCALE_TENSOR, 0);
        /* bias + relu, bias, requant, prequant + gelu in turn */
        static const variant mv[] = {{1, 0, 1, BITNET_ACT_RELU, 0}, {0, 0, 1, BITNET_ACT_NONE, 0}, {0, 1, 1, BITNET_ACT_NONE, 0},
                                     {1, 0, 0, BITNET_ACT_GELU, 0}, {0, 0, 1, BITNET_ACT_RELU, 0}, {0, 0, 1, BITNET_ACT_NONE, 1},
                                     {1, 0, 0, BITNET_ACT_RELU, 2}};
        const variant *v = &mv[s % (sizeof mv / sizeof mv[0])];
        outbuf ref, got;
        ob_alloc(&ref, &c);
        ob_alloc(&got, &c);
        assert_int_equal(run_case(NULL, &c, v, &ref), BITNET_OK);
        /* the option sets of the kernel the token count takes, in turn */
        const size_t fixed = takes_skinny(sh) ? NMMA_GEMM + 1 + (nskinny++) % NMMA_SKINNY : 1 + (ngemm++) % NMMA_GEMM;
        for (size_t n = 0; n < NMMAOPTS; n++) {
            if (n == 0 ? !sh->host : n != fixed) continue;
            mma_env(mma_opts[n], emulate);
            memset(got.y, 0xa5, c.tokens * c.out * sizeof(float));
            const bitnet_status st = run_case(be, &c, v, &got);
            mma_env_clear();
            /* a device with a small local memory (NVIDIA's 48 KiB) cannot
             * hold the widest option sets, nor the emulation's scratch on top
             * of the default tiles: refused with a clear message, as it
             * should be, and not run.  The default itself must run natively. */
            if ((emulate || mma_opts[n][0]) && st == BITNET_E_INVALID &&
                strstr(bitnet_error_detail(), "bytes of local memory")) {
                print_message("# mma \"%s\" not run here: %s\n", mma_opts[n], bitnet_error_detail());
                continue;
            }
            runs++;
            if (st) {
                print_message("# mma \"%s\": %s (%s)\n", mma_opts[n], bitnet_strerror(st), bitnet_error_detail());
                bad++;
                continue;
            }
            const int m = compare(emulate ? "mma emulated" : "mma", &c, v, &ref, &got, transcendental(v->act) ? 4 : 0);
            if (m) print_message("#   opts \"%s\"\n", mma_opts[n]);
            bad += m;
        }
        ob_free(&ref);
        ob_free(&got);
        case_free(&c);
    }
    print_message("# %d %s mma runs\n", runs, emulate ? "emulated" : "native");
    return bad;
}

/* ---- group scales on the tensor cores (bl_group_mma), emulated on any device ----
 * Groups of one block and more (128 to 4096 columns), a last group cut
 * short or of one partial block, one group, many; rows past out in a tile,
 * many work-groups; tokens past the count in a tile, several token tiles a
 * warp, hundreds of tokens; through the host's tunables and fixed ones
 * (one warp of one tile, several row and token tiles, more warps than
 * rows), each with an epilogue, exactly against the _ref. */
typedef struct { uint64_t in, out, tokens; uint32_t group; } gshape;
static const gshape gmma_shapes[] = {
    {3, 5, 8, 128},     {255, 17, 9, 128},  {4097, 5, 17, 256}, {1000, 33, 16, 512}, {300, 64, 64, 128},
    {8193, 20, 12, 1024}, {255, 1000, 10, 128}, {129, 7, 513, 128}, {4096, 3, 8, 4096}, {640, 40, 24, 256},
};
static const char *const gmma_opts[] = {
    "", "-DGM_WM=1 -DGM_MT=1 -DGM_NT=1", "-DGM_WM=3 -DGM_MT=2 -DGM_NT=3", "-DGM_WM=2 -DGM_MT=3 -DGM_NT=1",
};
static int gmma_sweep(bitnet_backend *be, int emulate)
{
    int bad = 0, runs = 0;
    static const variant mv[] = {{1, 0, 1, BITNET_ACT_RELU, 0}, {0, 1, 1, BITNET_ACT_NONE, 0}, {0, 0, 1, BITNET_ACT_NONE, 1},
                                 {1, 0, 0, BITNET_ACT_GELU, 0}, {0, 0, 1, BITNET_ACT_NONE, 2}};
    for (size_t s = 0; s < sizeof gmma_shapes / sizeof gmma_shapes[0]; s++) {
        const gshape *sh = &gmma_shapes[s];
        rcase c;
        case_make(&c, sh->in, sh->out, sh->tokens, BITNET_SCALE_GROUP, sh->group);
        const variant *v = &mv[s % (sizeof mv / sizeof mv[0])];
        outbuf ref, got;
        ob_alloc(&ref, &c);
        ob_alloc(&got, &c);
        assert_int_equal(run_case(NULL, &c, v, &ref), BITNET_OK);
        for (size_t n = 0; n < sizeof gmma_opts / sizeof gmma_opts[0]; n++) {
            if (n != 0 && n != 1 + s % 3) continue; /* the host's, and one fixed set a shape */
            mma_env(gmma_opts[n], emulate);
            memset(got.y, 0xa5, c.tokens * c.out * sizeof(float));
            const bitnet_status st = run_case(be, &c, v, &got);
            mma_env_clear();
            runs++;
            if (st) {
                print_message("# group mma \"%s\": %s (%s)\n", gmma_opts[n], bitnet_strerror(st), bitnet_error_detail());
                bad++;
                continue;
            }
            const int m = compare(emulate ? "group mma emulated" : "group mma", &c, v, &ref, &got,
                                  transcendental(v->act) ? 4 : 0);
            if (m) print_message("#   group %u, opts \"%s\"\n", sh->group, gmma_opts[n]);
            bad += m;
        }
        ob_free(&ref);
        ob_free(&got);
        case_free(&c);
    }
    print_message("# %d %s group mma runs\n", runs, emulate ? "emulated" : "native");
    return bad;
}

/* y - ref with d = s = 1, no bias: MMA_TEST_BIAS (times the groups of a row
 * with group scales) when a tensor-core kernel ran, else 0. */
static float mma_hook_diff_g(bitnet_backend *be, uint64_t tokens, bitnet_scale_kind kind, uint32_t group,
                             const char *min_tokens, const char *portable)
{
    rcase c;
    case_make(&c, 300, 21, tokens, kind, group);
    const uint64_t nd = kind == BITNET_SCALE_GROUP ? 21 * ((300 + group - 1) / group) : kind == BITNET_SCALE_ROW ? 21 : 1;
    for (uint64_t i = 0; i < nd; i++) c.d[i] = 1.0f;
    for (uint64_t t = 0; t < c.tokens; t++) c.xs[t] = 1.0f;
    outbuf ref, got;
    ob_alloc(&ref, &c);
    ob_alloc(&got, &c);
    const variant v = {1, 0, 0, BITNET_ACT_NONE, 0};
    assert_int_equal(run_case(NULL, &c, &v, &ref), BITNET_OK);
    mma_env("-DMMA_TEST_BIAS=7 -DMMA_NT=8", 1); /* one build for all */
    if (min_tokens) setenv("BITNET_MMA_MIN_TOKENS", min_tokens, 1);
    if (portable) setenv("BITNET_OCL_PORTABLE", portable, 1);
    assert_int_equal(run_case(be, &c, &v, &got), BITNET_OK);
    mma_env_clear();
    unsetenv("BITNET_OCL_PORTABLE");
    const float diff = got.y[0] - ref.y[0];
    for (uint64_t i = 0; i < c.tokens * c.out; i++) assert_true(got.y[i] - ref.y[i] == diff);
    ob_free(&ref);
    ob_free(&got);
    case_free(&c);
    return diff;
}

static float mma_hook_diff(bitnet_backend *be, uint64_t tokens, bitnet_scale_kind kind, const char *min_tokens,
                           const char *portable)
{
    return mma_hook_diff_g(be, tokens, kind, 64, min_tokens, portable);
}

static void test_opencl_mma_emulated(void **state)
{
    (void)state;
    bitnet_backend *be = ocl_or_skip();
    /* BITNET_TEST_MMA=native: on NVIDIA hardware the real mma.sync only
     * (a device call's minutes are few; the emulated grid runs in CI) */
    const char *only = getenv("BITNET_TEST_MMA");
    const int nvidia = strstr(bitnet_backend_describe(be), "NVIDIA") != NULL;
    if (!(nvidia && only && strcmp(only, "native") == 0)) {
        assert_int_equal(mma_sweep(be, 1), 0);
        assert_int_equal(gmma_sweep(be, 1), 0);
    }
    /* on NVIDIA hardware the same grid through the real mma.sync */
    if (nvidia) {
        assert_int_equal(mma_sweep(be, 0), 0);
        assert_int_equal(gmma_sweep(be, 0), 0);
    }

    /* The test can fail, and the tensor-core kernels are what runs when
     * (and only when) they should: -DMMA_TEST_BIAS=7 starts every integer
     * sum at 7, so with d = s = 1 every output is off by exactly 7. */
    assert_true(mma_hook_diff(be, 8, BITNET_SCALE_TENSOR, NULL, NULL) == 7.0f);  /* bl_mma_skinny */
    assert_true(mma_hook_diff(be, 2, BITNET_SCALE_ROW, NULL, NULL) == 7.0f);
    assert_true(mma_hook_diff(be, 9, BITNET_SCALE_ROW, NULL, NULL) == 7.0f);     /* two token tiles */
    assert_true(mma_hook_diff(be, 17, BITNET_SCALE_ROW, NULL, NULL) == 7.0f);    /* bl_gemm_mma */
    assert_true(mma_hook_diff(be, 1, BITNET_SCALE_TENSOR, NULL, NULL) == 0.0f);  /* one token: the GEMV */
    assert_true(mma_hook_diff(be, 7, BITNET_SCALE_TENSOR, "8", NULL) == 0.0f);   /* BITNET_MMA_MIN_TOKENS */
    assert_true(mma_hook_diff(be, 7, BITNET_SCALE_TENSOR, "3", NULL) == 7.0f);
    assert_true(mma_hook_diff(be, 9, BITNET_SCALE_TENSOR, "10", NULL) == 0.0f);
    assert_true(mma_hook_diff(be, 9, BITNET_SCALE_ROW, NULL, "1") == 0.0f);      /* BITNET_OCL_PORTABLE */
    assert_true(mma_hook_diff(be, 9, BITNET_SCALE_GROUP, NULL, NULL) == 0.0f);   /* groups of 64: bl_group */
    /* groups of whole blocks: bl_group_mma from 4 tokens, 7 in each of a row's 3 groups */
    assert_true(mma_hook_diff_g(be, 9, BITNET_SCALE_GROUP, 128, NULL, NULL) == 21.0f);
    assert_true(mma_hook_diff_g(be, 4, BITNET_SCALE_GROUP, 256, NULL, NULL) == 14.0f);
    assert_true(mma_hook_diff_g(be, 3, BITNET_SCALE_GROUP, 128, NULL, NULL) == 0.0f);
    assert_true(mma_hook_diff_g(be, 2, BITNET_SCALE_GROUP, 128, "2", NULL) == 21.0f);
    assert_true(mma_hook_diff_g(be, 9, BITNET_SCALE_GROUP, 128, NULL, "1") == 0.0f);

    /* tunables out of range: refused with a detail, nothing run */
    static const struct { const char *opts; uint64_t tokens; } badopts[] = {
        {"-DMMA_NT=12", 17}, {"-DMMA_KB=3", 17}, {"-DMMA_WM=0", 17}, {"-DMMA_ST=5", 17}, {"-DMMA_NT=1024 -DMMA_KB=256", 17},
        {"-DMMA_NT=12", 9}, {"-DMMA_ST=5", 2}, /* bl_gemm_mma's, where bl_mma_skinny runs: one program holds both */
        {"-DSK_W=0", 8}, {"-DSK_T=17", 2}, {"-DSK_A=2", 5}, {"-DSK_W=33", 8}, {"-DSK_N=5", 12}, {"-DSK_N=0", 3}, /* bl_mma_skinny */
        {"-DGM_WM=0", 0}, {"-DGM_WM=33", 0}, {"-DGM_MT=9", 0}, {"-DGM_NT=0", 0}, /* bl_group_mma (0: group:128, 9 tokens) */
    };
    for (size_t i = 0; i < sizeof badopts / sizeof badopts[0]; i++) {
        rcase c;
        if (badopts[i].tokens) case_make(&c, 40, 3, badopts[i].tokens, BITNET_SCALE_TENSOR, 0);
        else case_make(&c, 300, 3, 9, BITNET_SCALE_GROUP, 128);
        outbuf got;
        ob_alloc(&got, &c);
        const variant v = {0, 0, 0, BITNET_ACT_NONE, 0};
        mma_env(badopts[i].opts, 1);
        assert_int_equal(run_case(be, &c, &v, &got), BITNET_E_INVALID);
        mma_env_clear();
        assert_non_null(strstr(bitnet_error_detail(), "mma tunables"));
        ob_free(&got);
        case_free(&c);
    }
    bitnet_backend_free(be);
}

/* The planted bug must be caught: the test can fail. */
static void test_perturb_caught(void **state)
{
    (void)state;
    const char *devs[] = {"cpu", "opencl"};
    for (int d = 0; d < 2; d++) {
        bitnet_backend *be;
        if (bitnet_backend_create(&be, devs[d], 1) != BITNET_OK) continue;
        rcase c;
        case_make(&c, 200, 10, 3, BITNET_SCALE_ROW, 0);
        outbuf ref, got;
        ob_alloc(&ref, &c);
        ob_alloc(&got, &c);
        const variant v = {0, 0, 1, BITNET_ACT_NONE, 0};
        assert_int_equal(run_case(NULL, &c, &v, &ref), BITNET_OK);
        setenv("BITNET_TEST_PERTURB", "bitlinear", 1);
        assert_int_equal(run_case(be, &c, &v, &got), BITNET_OK);
        unsetenv("BITNET_TEST_PERTURB");
        assert_true(memcmp(ref.y, got.y, c.tokens * c.out * sizeof(float)) != 0);
        assert_int_equal(run_case(be, &c, &v, &got), BITNET_OK);
        assert_memory_equal(ref.y, got.y, c.tokens * c.out * sizeof(float));
        ob_free(&ref);
        ob_free(&got);
        case_free(&c);
        bitnet_backend_free(be);
    }
}

static void test_errors(void **state)
{
    (void)state;
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 1), BITNET_OK);
    rcase c;
    case_make(&c, 40, 3, 2, BITNET_SCALE_TENSOR, 0);
    float y[6];
    int8_t yq[6];
    float ys[2];
    bitnet_ternary_matrix w = {c.t2, 3, 40, BITNET_SCALE_TENSOR, 0, c.d};
    bitnet_bitlinear_io io = {.tokens = 2, .x = c.x, .y = y};
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
    io.xq = c.xq; /* two input forms */
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io.x = NULL; /* xq without xs */
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io = (bitnet_bitlinear_io){.tokens = 2, .x = c.x, .y = y, .yq = yq, .ys = ys}; /* two output forms */
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io = (bitnet_bitlinear_io){.tokens = 2, .x = c.x}; /* none */
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io = (bitnet_bitlinear_io){.tokens = 2, .x = c.x, .y = y, .act = BITNET_ACT_COUNT};
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io = (bitnet_bitlinear_io){.tokens = 0, .x = c.x, .y = y};
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_SHAPE);
    io = (bitnet_bitlinear_io){.tokens = 2, .x = c.x, .y = y};
    w.kind = BITNET_SCALE_GROUP;
    w.group = 48;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    w.group = 16;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    w.kind = BITNET_SCALE_NONE;
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_E_INVALID);
    w = (bitnet_ternary_matrix){c.t2, 3, 40, BITNET_SCALE_TENSOR, 0, c.d};
    w.in = BITNET_MAX_ELEMENTS;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_LIMIT);
    w.in = 40;
    w.out = UINT64_MAX / 8;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_OVERFLOW);
    w.out = 3;
    c.x[5] = NAN;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_NUMERIC);
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_E_NUMERIC);
    c.x[5] = 1.0f;
    float nw[40];
    for (int i = 0; i < 40; i++) nw[i] = 1.0f;
    io = (bitnet_bitlinear_io){.tokens = 2, .xq = c.xq, .xs = c.xs, .y = y, .norm = nw}; /* norm of int8 input */
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io = (bitnet_bitlinear_io){.tokens = 2, .x = c.x, .y = y, .norm = nw, .norm_eps = -1.0f};
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io.norm_eps = INFINITY;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_INVALID);
    io.norm_eps = 1e-6f;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
    nw[7] = INFINITY; /* a weight that makes the normalized input infinite */
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_NUMERIC);
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_E_NUMERIC);
    nw[7] = 1.0f;
    c.x[5] = NAN;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_NUMERIC);
    c.xs[1] = 0.0f;
    io = (bitnet_bitlinear_io){.tokens = 2, .xq = c.xq, .xs = c.xs, .y = y};
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_E_NUMERIC);
    assert_int_equal(bitnet_bitlinear(NULL, &w, &io), BITNET_E_INVALID);
    case_free(&c);
    bitnet_backend_free(be);
}

/* The fused input norm (io.norm): on each backend, bit for bit the same as
 * bitnet_rmsnorm then bitnet_bitlinear on that backend (and, on the CPU,
 * as the _ref); on OpenCL the same from host and from device memory.  Rows
 * under and over the 4096 columns where the norm's sums change order (its
 * register path and its loop). */
static int fused_case(bitnet_backend *be, const char *name, uint64_t in, uint64_t out, uint64_t T, int dev)
{
    rcase c;
    case_make(&c, in, out, T, BITNET_SCALE_ROW, 0);
    float *nw = malloc(in * 4), *h = malloc(T * in * 4), *y1 = malloc(T * out * 4), *y2 = malloc(T * out * 4),
          *y3 = malloc(T * out * 4);
    assert_true(nw && h && y1 && y2 && y3);
    for (uint64_t i = 0; i < in; i++) nw[i] = 0.25f + 2.0f * rndf();
    for (uint64_t i = 0; i < T * in; i++) c.x[i] *= (float)(1 + i % 7) * 3.0f;
    const bitnet_ternary_matrix w = {c.t2, out, in, BITNET_SCALE_ROW, 0, c.d};
    const float eps = 1e-5f;
    bitnet_bitlinear_io io = {.tokens = T, .x = c.x, .act = BITNET_ACT_SILU, .y = y1, .norm = nw, .norm_eps = eps};
    int bad = 0;
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
    assert_int_equal(bitnet_rmsnorm(be, c.x, T, in, nw, eps, h), BITNET_OK);
    bitnet_bitlinear_io io2 = {.tokens = T, .x = h, .act = BITNET_ACT_SILU, .y = y2};
    assert_int_equal(bitnet_bitlinear(be, &w, &io2), BITNET_OK);
    if (memcmp(y1, y2, T * out * 4)) bad++, print_message("# %s fused norm: in %llu out %llu tokens %llu differs from rmsnorm + bitlinear\n", name, (unsigned long long)in, (unsigned long long)out, (unsigned long long)T);
    if (!dev) { /* the CPU: the _ref too */
        io.y = y3;
        assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
        if (memcmp(y1, y3, T * out * 4)) bad++, print_message("# %s fused norm: in %llu differs from the _ref\n", name, (unsigned long long)in);
    } else { /* x, weight and output in device memory */
        bitnet_buffer *bx = NULL, *bn = NULL, *by = NULL;
        assert_int_equal(bitnet_buffer_upload(be, c.x, T * in * 4, &bx), BITNET_OK);
        assert_int_equal(bitnet_buffer_upload(be, nw, in * 4, &bn), BITNET_OK);
        assert_int_equal(bitnet_buffer_create(be, T * out * 4, &by), BITNET_OK);
        bitnet_bitlinear_io io3 = {.tokens = T, .x = bitnet_buffer_data(bx), .act = BITNET_ACT_SILU,
                                   .y = bitnet_buffer_data(by), .norm = bitnet_buffer_data(bn), .norm_eps = eps};
        assert_int_equal(bitnet_bitlinear(be, &w, &io3), BITNET_OK);
        assert_int_equal(bitnet_buffer_read(by, 0, y3, T * out * 4), BITNET_OK);
        if (memcmp(y1, y3, T * out * 4)) bad++, print_message("# %s fused norm: in %llu device memory differs\n", name, (unsigned long long)in);
        bitnet_buffer_free(bx);
        bitnet_buffer_free(bn);
        bitnet_buffer_free(by);
    }
    free(nw);
    free(h);
    free(y1);
    free(y2);
    free(y3);
    case_free(&c);
    return bad;
}

static void test_fused_norm(void **state)
{
    (void)state;
    static const uint64_t ins[] = {1, 3, 17, 255, 4096, 4097, 5000}, outs[] = {1, 5, 64}, toks[] = {1, 3, 17};
    const char *specs[] = {"cpu", "opencl"};
    int bad = 0, ran = 0;
    for (int b = 0; b < 2; b++) {
        bitnet_backend *be = NULL;
        if (bitnet_backend_create(&be, specs[b], 2) != BITNET_OK) continue;
        for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
            for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++)
                for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++) {
                    if (ins[i] > 255 && outs[o] > 5 && toks[t] > 3) continue; /* keep it short */
                    bad += fused_case(be, specs[b], ins[i], outs[o], toks[t], b);
                }
        bitnet_backend_free(be);
        ran++;
    }
    print_message("# fused norm on %d backend(s)\n", ran);
    assert_int_equal(bad, 0);
}

static void test_act_names(void **state)
{
    (void)state;
    for (int a = 0; a < BITNET_ACT_COUNT; a++) {
        bitnet_act back;
        assert_non_null(bitnet_act_name((bitnet_act)a));
        assert_int_equal(bitnet_act_parse(bitnet_act_name((bitnet_act)a), &back), BITNET_OK);
        assert_int_equal(back, a);
    }
    bitnet_act a;
    assert_int_equal(bitnet_act_parse("tanhh", &a), BITNET_E_INVALID);
    assert_null(bitnet_act_name(BITNET_ACT_COUNT));
    assert_string_equal(bitnet_act_name(BITNET_ACT_GELU_TANH), "gelu-tanh");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_names),
        cmocka_unit_test(test_ref_hand),
        cmocka_unit_test(test_fused_norm),
        cmocka_unit_test(test_ref_integer_model),
        cmocka_unit_test(test_cpu_paths),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_perturb_caught),
        cmocka_unit_test(test_opencl),
        cmocka_unit_test(test_opencl_nv_emulated),
        cmocka_unit_test(test_opencl_mma_emulated),
    };
    /* BITNET_TEST_FILTER=test_opencl_mma*: only the tests whose names match */
    const char *filter = getenv("BITNET_TEST_FILTER");
    if (filter && *filter) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
