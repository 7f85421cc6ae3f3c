/*
 * test_keep.c - device-resident weights (bitnet_backend_keep/forget/
 * kept_bytes).  On OpenCL: BitLinear and matmul_f32 with kept weights against
 * the _ref on awkward shapes; proof that the device copy is what the ops read
 * (the host weights are changed behind the library's back: the result follows
 * the OLD weights until they are kept again, and the host ones after forget);
 * fewer bytes uploaded per call; an operand longer than the kept range is not
 * served from it; a failed keep keeps nothing; --device auto keeps lazily and
 * shrugs off failures.  On the CPU: keep is accepted and changes nothing.
 * The OpenCL tests skip when there is no device.
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

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* ---- a ternary matrix built from the T2 layout of bnt(5) -------------------- */

typedef struct {
    uint64_t out, in;
    bitnet_scale_kind kind;
    uint32_t group;
    int8_t *q;       /* codes [out x in] */
    uint8_t *t2;     /* packed, out * row_bytes */
    float *d;        /* scales */
    size_t t2_bytes, d_bytes;
} tmat;


static size_t n_scales(const tmat *m)
{
    if (m->kind == BITNET_SCALE_TENSOR) return 1;
    if (m->kind == BITNET_SCALE_ROW) return (size_t)m->out;
    return (size_t)(m->out * ((m->in + m->group - 1) / m->group));
}

static void pack(tmat *m) { tu_t2_pack(m->q, m->out, m->in, m->t2); }

static tmat tmat_new(uint64_t out, uint64_t in, bitnet_scale_kind kind, uint32_t group)
{
    tmat m = {.out = out, .in = in, .kind = kind, .group = group};
    m.q = malloc((size_t)(out * in));
    m.t2_bytes = (size_t)out * tu_t2_row_bytes(in);
    m.t2 = malloc(m.t2_bytes);
    m.d_bytes = n_scales(&m) * sizeof(float);
    m.d = malloc(m.d_bytes);
    assert_non_null(m.q);
    assert_non_null(m.t2);
    assert_non_null(m.d);
    for (uint64_t i = 0; i < out * in; i++) m.q[i] = (int8_t)(tu_rand32(&rng) % 3) - 1;
    for (size_t i = 0; i < m.d_bytes / sizeof(float); i++) m.d[i] = 0.01f + 0.1f * (tu_randf32(&rng) + 1.0f);
    pack(&m);
    return m;
}

static void tmat_free(tmat *m)
{
    free(m->q);
    free(m->t2);
    free(m->d);
}

/* Changes the host weights behind the library: every code negated (zeros
 * become +1 so that no row stays the same) and every scale doubled. */
static void tmat_change(tmat *m)
{
    for (uint64_t i = 0; i < m->out * m->in; i++) m->q[i] = m->q[i] ? (int8_t)-m->q[i] : 1;
    for (size_t i = 0; i < m->d_bytes / sizeof(float); i++) m->d[i] *= 2.0f;
    pack(m);
}

static bitnet_ternary_matrix tmat_view(const tmat *m)
{
    bitnet_ternary_matrix w = {m->t2, m->out, m->in, m->kind, m->group, m->d};
    return w;
}

static float *randx(uint64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (uint64_t i = 0; i < n; i++) x[i] = 2.0f * tu_randf32(&rng);
    return x;
}

/* y = BitLinear of m on x (tokens rows), on be or (be == NULL) by the _ref. */
static float *bl(bitnet_backend *be, const tmat *m, const float *x, uint64_t tokens)
{
    float *y = malloc((size_t)(tokens * m->out) * sizeof *y);
    assert_non_null(y);
    const bitnet_ternary_matrix w = tmat_view(m);
    const bitnet_bitlinear_io io = {.tokens = tokens, .x = x, .y = y};
    bitnet_status st = be ? bitnet_bitlinear(be, &w, &io) : bitnet_bitlinear_ref(&w, &io);
    if (st != BITNET_OK) print_message("# bitlinear: %s\n", bitnet_error_detail());
    assert_int_equal(st, BITNET_OK);
    return y;
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* ---- backends ------------------------------------------------------------------ */

static bitnet_backend *ocl; /* one OpenCL backend for the group (NULL: none here) */

static int group_setup(void **state)
{
    (void)state;
    if (bitnet_backend_create(&ocl, "opencl", 1) != BITNET_OK) {
        print_message("# no OpenCL device: %s\n", bitnet_error_detail());
        ocl = NULL;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    bitnet_backend_free(ocl);
    return 0;
}

#define NEED_OCL()          \
    do {                    \
        if (!ocl) skip();   \
    } while (0)

static uint64_t h2d_of(const bitnet_backend *be, const char *op)
{
    bitnet_op_stats s[64];
    size_t n = bitnet_backend_op_stats(be, s, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        if (strcmp(s[i].op, op) == 0 && strcmp(s[i].device, "opencl") == 0) return s[i].h2d_bytes;
    return 0;
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_invalid(void **state)
{
    (void)state;
    bitnet_backend *cpu = NULL;
    float f = 1.0f;
    assert_int_equal(bitnet_backend_create(&cpu, "cpu", 1), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(cpu, NULL, 4), BITNET_E_INVALID);
    assert_int_equal(bitnet_backend_keep(cpu, &f, 0), BITNET_E_INVALID);
    assert_int_equal(bitnet_backend_keep(NULL, NULL, 4), BITNET_E_INVALID);
    if (ocl) {
        assert_int_equal(bitnet_backend_keep(ocl, NULL, 4), BITNET_E_INVALID);
        assert_int_equal(bitnet_backend_keep(ocl, &f, 0), BITNET_E_INVALID);
        assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    }
    bitnet_backend_forget(NULL, &f); /* no-ops */
    bitnet_backend_forget(cpu, NULL);
    assert_int_equal(bitnet_backend_kept_bytes(NULL), 0);
    bitnet_backend_free(cpu);
}

/* The CPU backend accepts keep, keeps nothing, and computes from host memory. */
static void test_cpu_backend(void **state)
{
    (void)state;
    bitnet_backend *cpu = NULL;
    assert_int_equal(bitnet_backend_create(&cpu, "cpu", 1), BITNET_OK);
    tmat m = tmat_new(17, 255, BITNET_SCALE_ROW, 0);
    float *x = randx(3 * 255);
    assert_int_equal(bitnet_backend_keep(cpu, m.t2, m.t2_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(cpu, m.d, m.d_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(cpu), 0);
    tmat_change(&m);
    float *y = bl(cpu, &m, x, 3), *ref = bl(NULL, &m, x, 3);
    assert_true(same(y, ref, 3 * 17));
    bitnet_backend_forget(cpu, m.t2);
    bitnet_backend_forget(cpu, m.d);
    free(y);
    free(ref);
    free(x);
    tmat_free(&m);
    bitnet_backend_free(cpu);
}

/* Kept weights and scales give the _ref's result, bit for bit. */
static void test_bitlinear_shapes(void **state)
{
    (void)state;
    NEED_OCL();
    const uint64_t outs[] = {5, 64, 1000}, ins[] = {3, 255, 4097}, toks[] = {1, 7};
    const bitnet_scale_kind kinds[] = {BITNET_SCALE_TENSOR, BITNET_SCALE_ROW, BITNET_SCALE_GROUP};
    int bad = 0, n = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++) {
            const bitnet_scale_kind kind = kinds[(a + b) % 3];
            tmat m = tmat_new(outs[a], ins[b], kind, kind == BITNET_SCALE_GROUP ? 64 : 0);
            assert_int_equal(bitnet_backend_keep(ocl, m.t2, m.t2_bytes), BITNET_OK);
            assert_int_equal(bitnet_backend_keep(ocl, m.d, m.d_bytes), BITNET_OK);
            assert_int_equal(bitnet_backend_kept_bytes(ocl), m.t2_bytes + m.d_bytes);
            for (size_t t = 0; t < 2; t++) {
                float *x = randx(toks[t] * m.in);
                float *y = bl(ocl, &m, x, toks[t]), *ref = bl(NULL, &m, x, toks[t]);
                if (!same(y, ref, (size_t)(toks[t] * m.out))) {
                    print_message("# %llux%llu kind %d tokens %llu: differs from the ref\n",
                                  (unsigned long long)m.out, (unsigned long long)m.in, (int)kind,
                                  (unsigned long long)toks[t]);
                    bad++;
                }
                n++;
                free(x);
                free(y);
                free(ref);
            }
            bitnet_backend_forget(ocl, m.t2);
            bitnet_backend_forget(ocl, m.d);
            assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
            tmat_free(&m);
        }
    assert_int_equal(n, 18);
    assert_int_equal(bad, 0);
}

/* The ops read the device copy: host changes are not seen until kept again. */
static void test_bitlinear_reads_copy(void **state)
{
    (void)state;
    NEED_OCL();
    const bitnet_scale_kind kinds[] = {BITNET_SCALE_TENSOR, BITNET_SCALE_ROW, BITNET_SCALE_GROUP};
    for (size_t kd = 0; kd < 3; kd++) {
        tmat m = tmat_new(64, 255, kinds[kd], 32);
        float *x = randx(7 * 255);
        float *ref_old = bl(NULL, &m, x, 7);
        assert_int_equal(bitnet_backend_keep(ocl, m.t2, m.t2_bytes), BITNET_OK);
        assert_int_equal(bitnet_backend_keep(ocl, m.d, m.d_bytes), BITNET_OK);
        tmat_change(&m);
        float *ref_new = bl(NULL, &m, x, 7);
        assert_false(same(ref_old, ref_new, 7 * 64)); /* the change shows */

        float *y = bl(ocl, &m, x, 7);
        assert_true(same(y, ref_old, 7 * 64)); /* the device copy: the OLD weights */
        free(y);

        assert_int_equal(bitnet_backend_keep(ocl, m.t2, m.t2_bytes), BITNET_OK); /* again: re-uploaded */
        assert_int_equal(bitnet_backend_keep(ocl, m.d, m.d_bytes), BITNET_OK);
        assert_int_equal(bitnet_backend_kept_bytes(ocl), m.t2_bytes + m.d_bytes); /* replaced, not added */
        y = bl(ocl, &m, x, 7);
        assert_true(same(y, ref_new, 7 * 64));
        free(y);

        bitnet_backend_forget(ocl, m.t2);
        bitnet_backend_forget(ocl, m.d);
        assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
        tmat_change(&m); /* host memory again */
        float *ref_now = bl(NULL, &m, x, 7);
        assert_false(same(ref_now, ref_new, 7 * 64));
        y = bl(ocl, &m, x, 7);
        assert_true(same(y, ref_now, 7 * 64));
        free(y);
        free(ref_now);
        free(ref_new);
        free(ref_old);
        free(x);
        tmat_free(&m);
    }
}

/* A kept bias is read from the device too (BitLinear and the float product). */
static void test_bias_reads_copy(void **state)
{
    (void)state;
    NEED_OCL();
    const uint64_t T = 3, in = 255, out = 65;
    tmat m = tmat_new(out, in, BITNET_SCALE_ROW, 0);
    float *x = randx(T * in), *bias = randx(out), *old = malloc(out * sizeof *old), *wf = randx(out * in);
    float *y = malloc(T * out * sizeof *y), *ref = malloc(T * out * sizeof *ref);
    assert_non_null(old);
    assert_non_null(y);
    assert_non_null(ref);
    memcpy(old, bias, out * sizeof *old);
    const bitnet_ternary_matrix w = tmat_view(&m);
    bitnet_bitlinear_io io = {.tokens = T, .x = x, .bias = bias, .act = BITNET_ACT_RELU, .y = y};
    assert_int_equal(bitnet_backend_keep(ocl, bias, out * sizeof *bias), BITNET_OK);
    for (uint64_t o = 0; o < out; o++) bias[o] = bias[o] * -2.0f + 1.0f; /* behind the library */
    assert_int_equal(bitnet_bitlinear(ocl, &w, &io), BITNET_OK);
    io.bias = old, io.y = ref;
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    assert_true(same(y, ref, T * out)); /* the kept (old) bias */
    io.bias = bias;
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    assert_false(same(y, ref, T * out)); /* and the change would show */
    assert_int_equal(bitnet_matmul_f32(ocl, x, T, in, wf, out, bias, BITNET_ACT_NONE, y), BITNET_OK);
    assert_int_equal(bitnet_matmul_f32_ref(x, T, in, wf, out, old, BITNET_ACT_NONE, ref), BITNET_OK);
    for (uint64_t i = 0; i < T * out; i++) assert_true(fabsf(y[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i])));
    bitnet_backend_forget(ocl, bias);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    io.y = y;
    assert_int_equal(bitnet_bitlinear(ocl, &w, &io), BITNET_OK); /* host memory again */
    io.y = ref;
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    assert_true(same(y, ref, T * out));
    free(x);
    free(bias);
    free(old);
    free(wf);
    free(y);
    free(ref);
    tmat_free(&m);
}

/* Normalized mean squared error of y against ref. */
static double nmse(const float *y, const float *ref, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)y[i] - ref[i]) * ((double)y[i] - ref[i]);
        s += (double)ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

static float *mm(bitnet_backend *be, const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out)
{
    float *y = malloc((size_t)(tokens * out) * sizeof *y);
    assert_non_null(y);
    bitnet_status st = be ? bitnet_matmul_f32(be, x, tokens, in, w, out, NULL, BITNET_ACT_NONE, y)
                          : bitnet_matmul_f32_ref(x, tokens, in, w, out, NULL, BITNET_ACT_NONE, y);
    if (st != BITNET_OK) print_message("# matmul_f32: %s\n", bitnet_error_detail());
    assert_int_equal(st, BITNET_OK);
    return y;
}

static void test_matmul_reads_copy(void **state)
{
    (void)state;
    NEED_OCL();
    const uint64_t T = 7, in = 255, out = 65;
    float *w = randx(out * in), *x = randx(T * in);
    const size_t wb = (size_t)(out * in) * sizeof *w, ny = (size_t)(T * out);
    float *ref_old = mm(NULL, x, T, in, w, out);
    assert_int_equal(bitnet_backend_keep(ocl, w, wb), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), wb);
    float *y = mm(ocl, x, T, in, w, out);
    assert_true(nmse(y, ref_old, ny) <= 1e-10);
    free(y);
    for (uint64_t i = 0; i < out * in; i++) w[i] = -w[i] + 0.25f;
    float *ref_new = mm(NULL, x, T, in, w, out);
    assert_true(nmse(ref_new, ref_old, ny) > 0.1);
    y = mm(ocl, x, T, in, w, out);
    assert_true(nmse(y, ref_old, ny) <= 1e-10); /* the kept copy */
    free(y);
    assert_int_equal(bitnet_backend_keep(ocl, w, wb), BITNET_OK);
    y = mm(ocl, x, T, in, w, out);
    assert_true(nmse(y, ref_new, ny) <= 1e-10);
    free(y);
    bitnet_backend_forget(ocl, w);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    for (uint64_t i = 0; i < out * in; i++) w[i] *= 3.0f;
    float *ref_now = mm(NULL, x, T, in, w, out);
    y = mm(ocl, x, T, in, w, out);
    assert_true(nmse(y, ref_now, ny) <= 1e-10);
    assert_true(nmse(y, ref_new, ny) > 0.1);
    free(y);
    free(ref_now);
    free(ref_new);
    free(ref_old);
    free(w);
    free(x);
}

/* A call with kept weights uploads exactly the weights and scales less. */
static void test_stats(void **state)
{
    (void)state;
    NEED_OCL();
    tmat m = tmat_new(1000, 4097, BITNET_SCALE_ROW, 0);
    float *x = randx(4097);
    bitnet_backend_stats_reset(ocl);
    free(bl(ocl, &m, x, 1));
    const uint64_t plain = h2d_of(ocl, "bitlinear");
    assert_true(plain >= m.t2_bytes + m.d_bytes);
    bitnet_backend_stats_reset(ocl);
    assert_int_equal(bitnet_backend_keep(ocl, m.t2, m.t2_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(ocl, m.d, m.d_bytes), BITNET_OK);
    assert_int_equal(h2d_of(ocl, "keep"), m.t2_bytes + m.d_bytes); /* the keep's own upload, booked apart */
    assert_int_equal(h2d_of(ocl, "bitlinear"), 0);
    free(bl(ocl, &m, x, 1));
    const uint64_t kept = h2d_of(ocl, "bitlinear");
    assert_true(kept > 0 && kept < plain);
    assert_int_equal(plain - kept, m.t2_bytes + m.d_bytes);

    /* matmul_f32: the weights less */
    float *w = randx(64 * 4097);
    const size_t wb = 64 * 4097 * sizeof *w;
    bitnet_backend_stats_reset(ocl);
    free(mm(ocl, x, 1, 4097, w, 64));
    const uint64_t mplain = h2d_of(ocl, "matmul_f32");
    assert_int_equal(bitnet_backend_keep(ocl, w, wb), BITNET_OK);
    bitnet_backend_stats_reset(ocl);
    free(mm(ocl, x, 1, 4097, w, 64));
    assert_int_equal(mplain - h2d_of(ocl, "matmul_f32"), wb);
    bitnet_backend_forget(ocl, w);
    bitnet_backend_forget(ocl, m.t2);
    bitnet_backend_forget(ocl, m.d);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    free(w);
    free(x);
    tmat_free(&m);
}

static void test_kept_bytes(void **state)
{
    (void)state;
    NEED_OCL();
    static uint8_t a[1000], b[333];
    memset(a, 1, sizeof a);
    memset(b, 2, sizeof b);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    assert_int_equal(bitnet_backend_keep(ocl, a, sizeof a), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 1000);
    assert_int_equal(bitnet_backend_keep(ocl, b, sizeof b), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 1333);
    assert_int_equal(bitnet_backend_keep(ocl, a + 100, 10), BITNET_OK); /* another start: its own entry */
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 1343);
    assert_int_equal(bitnet_backend_keep(ocl, a, 500), BITNET_OK); /* a again: replaced */
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 843);
    bitnet_backend_forget(ocl, a + 1); /* unknown: nothing */
    bitnet_backend_forget(ocl, &state);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 843);
    bitnet_backend_forget(ocl, a);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 343);
    bitnet_backend_forget(ocl, a); /* twice: nothing */
    bitnet_backend_forget(ocl, b);
    bitnet_backend_forget(ocl, a + 100);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    /* kept at free: bitnet_backend_free drops them (ASan/LSan would see a leak) */
    bitnet_backend *be = NULL;
    assert_int_equal(bitnet_backend_create(&be, "opencl", 1), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(be, a, sizeof a), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(be, b, sizeof b), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(be), 1333);
    bitnet_backend_free(be);
}

/* An operand longer than the kept range (same start) is read from the host;
 * one that fits in it is served from the kept copy. */
static void test_range(void **state)
{
    (void)state;
    NEED_OCL();
    tmat m = tmat_new(64, 300, BITNET_SCALE_TENSOR, 0);
    const size_t half = m.t2_bytes / 2; /* the first 32 rows */
    float *x = randx(3 * 300);
    assert_int_equal(bitnet_backend_keep(ocl, m.t2, half), BITNET_OK);
    tmat_change(&m);
    float *ref_new = bl(NULL, &m, x, 3);
    float *y = bl(ocl, &m, x, 3); /* 64 rows: more than kept -> host weights */
    assert_true(same(y, ref_new, 3 * 64));
    free(y);
    bitnet_backend_forget(ocl, m.t2);

    /* the full matrix and its scale kept, an operand of its first 32 rows
     * (same start, fewer bytes): the kept copy */
    assert_int_equal(bitnet_backend_keep(ocl, m.t2, m.t2_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(ocl, m.d, m.d_bytes), BITNET_OK);
    tmat top = m;
    top.out = 32;
    top.t2_bytes = half;
    float *ref_top_old = bl(NULL, &top, x, 3);
    tmat_change(&m); /* changes top too: the same buffers */
    float *ref_top_new = bl(NULL, &top, x, 3);
    assert_false(same(ref_top_old, ref_top_new, 3 * 32));
    y = bl(ocl, &top, x, 3);
    assert_true(same(y, ref_top_old, 3 * 32));
    free(y);
    bitnet_backend_forget(ocl, m.t2);
    bitnet_backend_forget(ocl, m.d);

    /* matmul_f32: w kept for 10 of 20 rows, the call uses 20 -> host */
    float *w = randx(20 * 100), *xf = randx(2 * 100);
    assert_int_equal(bitnet_backend_keep(ocl, w, 10 * 100 * sizeof *w), BITNET_OK);
    for (int i = 0; i < 20 * 100; i++) w[i] = -w[i];
    float *mref = mm(NULL, xf, 2, 100, w, 20);
    y = mm(ocl, xf, 2, 100, w, 20);
    assert_true(nmse(y, mref, 40) <= 1e-10);
    bitnet_backend_forget(ocl, w);
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0);
    free(y);
    free(mref);
    free(w);
    free(xf);
    free(ref_top_old);
    free(ref_top_new);
    free(ref_new);
    free(x);
    tmat_free(&m);
}

/* A keep that cannot allocate fails, keeps nothing, and the ops still run
 * right from host memory. */
static void test_alloc_failure(void **state)
{
    (void)state;
    NEED_OCL();
    tmat m = tmat_new(17, 129, BITNET_SCALE_GROUP, 32);
    float *x = randx(7 * 129);
    assert_int_equal(bitnet_backend_keep(ocl, m.t2, m.t2_bytes), BITNET_OK); /* an earlier copy */
    assert_int_equal(bitnet_backend_kept_bytes(ocl), m.t2_bytes);
    setenv("BITNET_TEST_FAIL", "alloc", 1);
    const bitnet_status st = bitnet_backend_keep(ocl, m.t2, m.t2_bytes);
    const bitnet_status st2 = bitnet_backend_keep(ocl, m.d, m.d_bytes);
    unsetenv("BITNET_TEST_FAIL");
    assert_int_equal(st, BITNET_E_DEVICE_MEMORY);
    assert_int_equal(st2, BITNET_E_DEVICE_MEMORY);
    assert_non_null(strstr(bitnet_error_detail(), "simulated failure"));
    assert_int_equal(bitnet_backend_kept_bytes(ocl), 0); /* the stale copy went too */
    tmat_change(&m);
    float *ref = bl(NULL, &m, x, 7), *y = bl(ocl, &m, x, 7);
    assert_true(same(y, ref, 7 * 17));
    free(y);
    free(ref);
    free(x);
    tmat_free(&m);
}

static void quiet_log(void *user, bitnet_log_level level, const char *msg)
{
    (void)msg;
    if (level == BITNET_LOG_WARN) ++*(int *)user;
}

/* --device auto: keeps on the OpenCL device (created for it); a failure to
 * keep or to create the device returns OK and keeps nothing. */
static void test_auto(void **state)
{
    (void)state;
    NEED_OCL();
    setenv("BITNET_AUTO_MIN_BYTES", "0", 1); /* every op to the device */
    tmat m = tmat_new(64, 255, BITNET_SCALE_ROW, 0);
    float *x = randx(255);
    float *ref_old = bl(NULL, &m, x, 1);
    bitnet_backend *be = NULL;
    int warns = 0;
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    bitnet_backend_set_log(be, quiet_log, &warns);
    assert_int_equal(bitnet_backend_keep(be, m.t2, m.t2_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_keep(be, m.d, m.d_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(be), m.t2_bytes + m.d_bytes);
    tmat_change(&m);
    float *y = bl(be, &m, x, 1);
    assert_true(same(y, ref_old, 64)); /* the kept copy, on the device */
    free(y);
    bitnet_backend_forget(be, m.t2);
    bitnet_backend_forget(be, m.d);
    /* a failed keep: OK, nothing kept, one warning, results from host memory */
    setenv("BITNET_TEST_FAIL", "alloc", 1);
    assert_int_equal(bitnet_backend_keep(be, m.t2, m.t2_bytes), BITNET_OK);
    unsetenv("BITNET_TEST_FAIL");
    assert_int_equal(bitnet_backend_kept_bytes(be), 0);
    assert_int_equal(warns, 1);
    float *ref_new = bl(NULL, &m, x, 1);
    y = bl(be, &m, x, 1);
    assert_true(same(y, ref_new, 64));
    free(y);
    bitnet_backend_free(be);

    /* the device cannot be created: OK, nothing kept, the CPU computes */
    setenv("BITNET_TEST_FAIL", "create", 1);
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    warns = 0;
    bitnet_backend_set_log(be, quiet_log, &warns);
    assert_int_equal(bitnet_backend_keep(be, m.t2, m.t2_bytes), BITNET_OK);
    assert_int_equal(bitnet_backend_kept_bytes(be), 0);
    y = bl(be, &m, x, 1);
    unsetenv("BITNET_TEST_FAIL");
    assert_true(same(y, ref_new, 64));
    assert_int_equal(warns, 1); /* the one fallback warning */
    free(y);
    bitnet_backend_free(be);
    unsetenv("BITNET_AUTO_MIN_BYTES");
    free(ref_new);
    free(ref_old);
    free(x);
    tmat_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_cpu_backend),
        cmocka_unit_test(test_bitlinear_shapes),
        cmocka_unit_test(test_bitlinear_reads_copy),
        cmocka_unit_test(test_matmul_reads_copy),
        cmocka_unit_test(test_bias_reads_copy),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_kept_bytes),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_auto),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
