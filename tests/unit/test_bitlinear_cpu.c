/*
 * test_bitlinear_cpu.c - the CPU BitLinear fast paths at their edges, at
 * every SIMD level (BITNET_SIMD caps) and 1 or 2 threads:
 *   - group scales of 32, 64, 128 and 256 columns (the 8-row batches and
 *     their remainders, group counts that are not a multiple of 8, odd
 *     block counts), outputs bit-identical to bitnet_bitlinear_ref;
 *   - the one-token VNNI kernels (one row, and two at once) that use the
 *     codes in place (code * 4^k) up to 4095 blocks per row and shift
 *     beyond: worst-case magnitudes on both sides of the limit, checked
 *     against integers computed here (3 rows: a pair and an odd last row);
 *   - weights and inputs at odd addresses;
 *   - many calls in a row (the thread pool's spinning hand-off), and calls
 *     of changing scratch needs, past what the backend keeps between calls;
 *   - the tiled path for 8 tokens and more (AMX, bitlinear_tiles.h): its
 *     tile function alone against sums computed here, emulated in plain C
 *     and, where the CPU has AMX, natively; and every public call with
 *     BITNET_AMX_EMULATE=1 against bitnet_bitlinear_ref.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bitnet.h"
#include "cpu/bitlinear.h"
#include "testutil.h"

/* ---- helpers written from the layout in bnt(5), independent of the library */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) { return tu_rand32(&rng_state); }
static float rndf(void) { return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0); }


typedef struct { const char *simd; int threads; } config;
static const config configs[] = {{"scalar", 1}, {"avx2", 2}, {"avx-vnni", 1}, {"avx-vnni", 2}, {"avx512", 1}, {"avx512", 2},
                                 {"avx512-vnni", 1}, {"avx512-vnni", 2}};
#define NCFG (sizeof configs / sizeof configs[0])

static size_t open_all(bitnet_backend **be)
{
    for (size_t i = 0; i < NCFG; i++) {
        setenv("BITNET_SIMD", configs[i].simd, 1);
        assert_int_equal(bitnet_backend_create(&be[i], "cpu", configs[i].threads), BITNET_OK);
        unsetenv("BITNET_SIMD");
    }
    return NCFG;
}
static void close_all(bitnet_backend **be)
{
    for (size_t i = 0; i < NCFG; i++) bitnet_backend_free(be[i]);
}

/* One random case: weights at t2 + woff, float input at x + xoff; every
 * config's output must equal the reference bit for bit. */
static int check_case(bitnet_backend **be, uint64_t in, uint64_t out, uint64_t tokens, bitnet_scale_kind kind,
                      uint32_t group, size_t woff, size_t xoff, int prequant)
{
    const uint64_t nd = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? out : out * ((in + group - 1) / group);
    int8_t *q = malloc(in * out), *xq = malloc(tokens * in);
    uint8_t *t2buf = malloc(tu_t2_row_bytes(in) * out + woff);
    float *d = malloc(nd * sizeof(float)), *xbuf = malloc((tokens * in + xoff) * sizeof(float));
    float *xs = malloc(tokens * sizeof(float)), *yref = malloc(tokens * out * sizeof(float));
    float *y = malloc(tokens * out * sizeof(float)), *bias = malloc(out * sizeof(float));
    assert_true(q && xq && t2buf && d && xbuf && xs && yref && y && bias);
    uint8_t *t2 = t2buf + woff;
    float *x = xbuf + xoff;
    for (uint64_t i = 0; i < in * out; i++) q[i] = (int8_t)((int)(rnd() % 3) - 1);
    tu_t2_pack(q, out, in, t2);
    for (uint64_t i = 0; i < nd; i++) d[i] = 0.01f + (rndf() + 1.0f);
    for (uint64_t i = 0; i < tokens * in; i++) x[i] = rndf() * 5.0f;
    for (uint64_t i = 0; i < tokens * in; i++) xq[i] = (int8_t)((int)(rnd() % 256) - 128);
    for (uint64_t t = 0; t < tokens; t++) xs[t] = 0.5f + (rndf() + 1.0f) * 20.0f;
    for (uint64_t o = 0; o < out; o++) bias[o] = rndf();
    bitnet_ternary_matrix w = {t2, out, in, kind, group, d};
    bitnet_bitlinear_io io = {.tokens = tokens, .y = yref, .bias = bias};
    if (prequant) {
        io.xq = xq;
        io.xs = xs;
    } else {
        io.x = x;
    }
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    io.y = y;
    int bad = 0;
    for (size_t c = 0; c < NCFG; c++) {
        memset(y, 0xa5, tokens * out * sizeof(float));
        assert_int_equal(bitnet_bitlinear(be[c], &w, &io), BITNET_OK);
        if (memcmp(y, yref, tokens * out * sizeof(float)) != 0) {
            uint64_t first = 0;
            while (memcmp(&y[first], &yref[first], sizeof(float)) == 0) first++;
            print_message("# %s x%d: in %llu out %llu tokens %llu kind %d group %u woff %zu xoff %zu: y[%llu] = %.9g, ref %.9g\n",
                          configs[c].simd, configs[c].threads, (unsigned long long)in, (unsigned long long)out,
                          (unsigned long long)tokens, (int)kind, group, woff, xoff, (unsigned long long)first,
                          (double)y[first], (double)yref[first]);
            bad++;
        }
    }
    free(q); free(xq); free(t2buf); free(d); free(xbuf); free(xs); free(yref); free(y); free(bias);
    return bad;
}

static void test_group_paths(void **state)
{
    (void)state;
    bitnet_backend *be[NCFG];
    open_all(be);
    /* in: 1, 3, 17 (one block), 255 (2 blocks), 4097 (33 blocks, odd: the
     * pair layout's masked last block), 1000 (8 blocks; 32 groups of 32 =
     * whole chains of 8), 1100 (35 groups of 32: a tail of 3 after 4 x 8) */
    static const uint64_t ins[] = {1, 3, 17, 255, 1000, 1100, 4097};
    /* out: 1, 5 (fewer than 8 rows), 64 (8 x 8), 1000 (many pieces), 13 (8 + 5) */
    static const uint64_t outs[] = {1, 5, 13, 64, 1000};
    static const uint64_t toks[] = {1, 2, 7};
    static const uint32_t groups[] = {32, 64, 128, 256};
    int bad = 0, n = 0;
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t b = 0; b < sizeof outs / sizeof outs[0]; b++)
            for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++)
                for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
                    if (outs[b] == 1000 && (ins[a] > 1100 || toks[t] > 2)) continue; /* keep it short */
                    bad += check_case(be, ins[a], outs[b], toks[t], BITNET_SCALE_GROUP, groups[g], 0, 0, (int)(n % 2));
                    n++;
                }
    print_message("# %d group cases x %zu configs\n", n, NCFG);
    close_all(be);
    assert_int_equal(bad, 0);
}

/* The group kernels of whole blocks (grp1, grpn: groups of 128 columns and
 * up) and of groups of 32 and 64 columns (grp1s: 16 groups from 2 or 4
 * pairs of blocks; grpns: two groups a code plane or plane pair; an odd
 * last block at 129, 2049 and 4097 columns):
 * one token's batches of 16 groups (AVX-512) or 8 (AVX2) with tails
 * of every length (a row of 4097 columns has 33 groups of 128 and 17 of
 * 256; 896 and 1919 columns leave 7 and 15 groups of 128), two rows a call
 * with an odd last row, 8-row chains with a tail, token passes of 8 with a
 * tail (9, 17), and groups of several pairs of blocks (512, 2048) with a
 * partial last group; every config against the reference, bit for bit. */
static void test_group_kernels(void **state)
{
    (void)state;
    bitnet_backend *be[NCFG];
    open_all(be);
    static const uint64_t ins[] = {128, 129, 256, 300, 896, 1919, 2049, 4097};
    static const uint64_t outs[] = {1, 2, 3, 9, 17};
    static const uint64_t toks[] = {1, 2, 8, 9, 17};
    static const uint32_t groups[] = {32, 64, 128, 256, 512, 2048};
    int bad = 0, n = 0;
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t b = 0; b < sizeof outs / sizeof outs[0]; b++)
            for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++)
                for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
                    if (groups[g] > 2 * ins[a] && groups[g] != 2048) continue; /* one group: 2048 covers it */
                    bad += check_case(be, ins[a], outs[b], toks[t], BITNET_SCALE_GROUP, groups[g], 0, 0, (int)(n % 2));
                    n++;
                }
    print_message("# %d group-kernel cases x %zu configs\n", n, NCFG);
    close_all(be);
    assert_int_equal(bad, 0);
}

/* The largest magnitudes the group kernels sum: every code 2 (or 0) against
 * activations of -128 (or 127), 16384 columns in groups of 128 (the 16-bit
 * tree levels of the AVX-512 kernels at their limits: -32768 and 32512),
 * 256, 512, 2048 and one group of all (the shifted-code accumulators at
 * their widest); one token, four (the half-width chains), nine and 17 (the
 * VNNI tiles); against integers computed here. */
static void test_group_extremes(void **state)
{
    (void)state;
    bitnet_backend *be[NCFG];
    open_all(be);
    const uint64_t in = 16384, out = 3;
    static const uint32_t groups[] = {128, 256, 512, 2048, 16384};
    static const int xvals[] = {-128, 127};
    static const uint64_t toks[] = {1, 4, 9, 17};
    int bad = 0;
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
        for (size_t xi = 0; xi < 2; xi++)
            for (int qv = -1; qv <= 1; qv += 2)
                for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                    const uint64_t tokens = toks[ti], ng = in / groups[gi];
                    int8_t *q = malloc(in * out), *xq = malloc(tokens * in);
                    uint8_t *t2 = malloc(tu_t2_row_bytes(in) * out);
                    float *d = malloc(out * ng * sizeof(float)), *xs = malloc(tokens * sizeof(float)),
                          *y = malloc(tokens * out * sizeof(float));
                    assert_true(q && xq && t2 && d && xs && y);
                    static const float drow[3] = {1.0f, 0.5f, 2.0f};
                    for (uint64_t o = 0; o < out; o++)
                        for (uint64_t g = 0; g < ng; g++) d[o * ng + g] = drow[o];
                    memset(q, qv, in * out);
                    memset(xq, xvals[xi], tokens * in);
                    for (uint64_t t = 0; t < tokens; t++) xs[t] = 1.0f;
                    tu_t2_pack(q, out, in, t2);
                    bitnet_ternary_matrix w = {t2, out, in, BITNET_SCALE_GROUP, groups[gi], d};
                    bitnet_bitlinear_io io = {.tokens = tokens, .xq = xq, .xs = xs, .y = y};
                    for (size_t c = 0; c < NCFG; c++) {
                        assert_int_equal(bitnet_bitlinear(be[c], &w, &io), BITNET_OK);
                        for (uint64_t t = 0; t < tokens; t++)
                            for (uint64_t o = 0; o < out; o++) {
                                /* every term and partial sum an integer times d below 2^22: exact */
                                const float want = (float)(qv * xvals[xi] * (int64_t)in) * drow[o];
                                if (y[t * out + o] != want) {
                                    print_message("# %s x%d: group %u x %d q %d tokens %llu y[%llu][%llu] = %.9g, want %.9g\n",
                                                  configs[c].simd, configs[c].threads, groups[gi], xvals[xi], qv,
                                                  (unsigned long long)tokens, (unsigned long long)t,
                                                  (unsigned long long)o, (double)y[t * out + o], (double)want);
                                    bad++;
                                }
                            }
                    }
                    free(q); free(xq); free(t2); free(d); free(xs); free(y);
                }
    close_all(be);
    assert_int_equal(bad, 0);
}

/* ---- tiles -------------------------------------------------------------- */

/* One call of a tile function on nr random rows of `in` columns and ntt
 * token tiles (tokens past `tokens` zero), packed here from the layout in
 * bitlinear.h, against sums of code * x (code = q + 1) computed here. */
static int tiles_case(bn_t2_tiles_fn fn, const char *name, uint64_t in, uint64_t nr, uint64_t tokens, size_t ldpad)
{
    const size_t rb = tu_t2_row_bytes(in), nsteps = rb / 32 * 2;
    const uint64_t ntt = (tokens + 15) / 16, ld = ntt * 16 + ldpad;
    int8_t *q = malloc(in * nr), *x = calloc(tokens * in, 1), *pack = calloc(ntt * nsteps * 1024, 1);
    uint8_t *t2 = malloc(rb * nr);
    int32_t *acc = malloc(nr * ld * sizeof(int32_t));
    assert_true(q && x && pack && t2 && acc);
    for (uint64_t i = 0; i < in * nr; i++) q[i] = (int8_t)((int)(rnd() % 3) - 1);
    tu_t2_pack(q, nr, in, t2);
    for (uint64_t i = 0; i < tokens * in; i++) x[i] = (int8_t)((int)(rnd() % 256) - 128);
    for (uint64_t t = 0; t < tokens; t++)
        for (uint64_t c = 0; c < in; c++) {
            const uint64_t s = c / 64, r = (c % 64) / 4, i = c % 4;
            pack[((t / 16) * nsteps + s) * 1024 + 64 * r + 4 * (t % 16) + i] = x[t * in + c];
        }
    memset(acc, 0x5a, nr * ld * sizeof(int32_t));
    fn(t2, rb, nr, pack, ntt, nsteps, acc, ld, NULL);
    int bad = 0;
    for (uint64_t o = 0; o < nr && !bad; o++)
        for (uint64_t t = 0; t < ntt * 16 && !bad; t++) {
            int64_t want = 0;
            if (t < tokens) /* padding columns of a T2 row hold code 1: x is zero there */
                for (uint64_t c = 0; c < in; c++) want += (int64_t)(q[o * in + c] + 1) * x[t * in + c];
            if (acc[o * ld + t] != (int32_t)want) {
                print_message("# %s: in %llu rows %llu tokens %llu: acc[%llu][%llu] = %d, want %lld\n", name,
                              (unsigned long long)in, (unsigned long long)nr, (unsigned long long)tokens,
                              (unsigned long long)o, (unsigned long long)t, acc[o * ld + t], (long long)want);
                bad = 1;
            }
        }
    for (uint64_t o = 0; o < nr && !bad; o++) /* columns past the token tiles untouched */
        for (uint64_t t = ntt * 16; t < ld; t++)
            if (acc[o * ld + t] != 0x5a5a5a5a) bad = 1;
    free(q); free(x); free(pack); free(t2); free(acc);
    return bad;
}

static void test_tiles(void **state)
{
    (void)state;
    if (strcmp(bitnet_cpu_simd_name(), "scalar") == 0) skip(); /* the decode needs AVX2 */
    /* rows: under one tile, one, one and one more, several, more than one
     * block of TILES_RB (16) row tiles with a short last tile; tokens: half a
     * tile, 1 + one, 3 tiles, 4 tiles (one pass), 5 tiles (a second pass of
     * one); in: one block (one step of 64 columns), two steps, an odd block
     * count, a short last block (an odd step count) */
    static const uint64_t ins[] = {17, 128, 255, 4097};
    static const uint64_t nrs[] = {1, 15, 16, 17, 50, 300};
    static const uint64_t toks[] = {8, 17, 40, 64, 65};
    int bad = 0, n = 0;
    const int native = strcmp(bitnet_cpu_simd_name(), "amx") == 0;
    const int vnni = native || strcmp(bitnet_cpu_simd_name(), "avx512-vnni") == 0;
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t b = 0; b < sizeof nrs / sizeof nrs[0]; b++)
            for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++) {
                if (ins[a] > 255 && nrs[b] > 17 && toks[t] > 17) continue; /* keep it short */
                bad += tiles_case(bn_t2_tiles_emu, "emulated", ins[a], nrs[b], toks[t], (size_t)(n % 3));
                if (native) bad += tiles_case(bn_t2_tiles_amx, "amx", ins[a], nrs[b], toks[t], (size_t)(n % 3));
                if (vnni) bad += tiles_case(bn_t2_tiles_vnni, "vnni", ins[a], nrs[b], toks[t], (size_t)(n % 3));
                n++;
            }
    print_message("# %d tile cases, %s%s\n", n, native ? "emulated and native AMX" : "emulated (no AMX here)",
                  vnni ? ", VNNI" : "");
    assert_int_equal(bad, 0);
}

/* Every public call through the tiled path (emulated) against the definition. */
static void test_tiles_public(void **state)
{
    (void)state;
    if (strcmp(bitnet_cpu_simd_name(), "scalar") == 0) skip();
    setenv("BITNET_AMX_EMULATE", "1", 1);
    bitnet_backend *be[NCFG];
    open_all(be);
    int bad = 0;
    static const uint64_t toks[] = {8, 9, 33};
    for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++) {
        bad += check_case(be, 255, 17, toks[t], BITNET_SCALE_TENSOR, 0, 0, 0, 0);
        bad += check_case(be, 1100, 300, toks[t], BITNET_SCALE_ROW, 0, 1, 3, (int)(t % 2));
        bad += check_case(be, 4097, 33, toks[t], BITNET_SCALE_GROUP, 128, 0, 0, 0); /* one-block groups */
        bad += check_case(be, 1100, 19, toks[t], BITNET_SCALE_GROUP, 256, 0, 2, (int)(t % 2)); /* a partial last group */
        bad += check_case(be, 4097, 17, toks[t], BITNET_SCALE_GROUP, 1024, 3, 0, 0);
        bad += check_case(be, 300, 5, toks[t], BITNET_SCALE_GROUP, 64, 0, 0, 0); /* under a block: not tiled */
    }
    bad += check_case(be, 2049, 40, 70, BITNET_SCALE_GROUP, 256, 0, 0, 1); /* five token tiles: two passes */
    close_all(be);
    unsetenv("BITNET_AMX_EMULATE");
    assert_int_equal(bad, 0);
}

static void test_odd_addresses(void **state)
{
    (void)state;
    bitnet_backend *be[NCFG];
    open_all(be);
    int bad = 0;
    static const size_t woffs[] = {1, 16, 33};
    for (size_t i = 0; i < sizeof woffs / sizeof woffs[0]; i++) {
        bad += check_case(be, 4097, 64, 1, BITNET_SCALE_TENSOR, 0, woffs[i], i + 1, 0);
        bad += check_case(be, 255, 17, 3, BITNET_SCALE_ROW, 0, woffs[i], i, 0);
        bad += check_case(be, 1100, 13, 2, BITNET_SCALE_GROUP, 32, woffs[i], i + 1, 0);
    }
    close_all(be);
    assert_int_equal(bad, 0);
}

/* All codes +1 (or -1) and all activations -128: the largest |sum| per
 * shift plane.  With d = 1 and s = 1, y = (float)acc; acc = q * -128 * in,
 * computed here in 64 bits, is a float exactly (in = 128 * blocks, a small
 * odd factor times a power of two).  4095 blocks: in place (code * 4^k)
 * at its bound; 4096 and 4097: the shifting loop.  One token (the GEMV
 * kernels) and passes of several (the narrow sums of the pass kernels). */
#define MAXTOK 9
static void test_noshift_bounds(void **state)
{
    (void)state;
    bitnet_backend *be[NCFG];
    open_all(be);
    static const uint64_t blocks[] = {4095, 4096, 4097};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        const uint64_t in = 128 * blocks[i], out = 3;
        uint8_t *t2 = malloc(tu_t2_row_bytes(in) * out);
        int8_t *xq = malloc(in * MAXTOK);
        float y[3 * MAXTOK], d = 1.0f, xs[MAXTOK];
        for (int t = 0; t < MAXTOK; t++) xs[t] = 1.0f;
        assert_non_null(t2);
        assert_non_null(xq);
        memset(t2, 0xaa, tu_t2_row_bytes(in));                     /* row 0: code 2 (q = +1) everywhere */
        memset(t2 + tu_t2_row_bytes(in), 0x00, tu_t2_row_bytes(in));     /* row 1: code 0 (q = -1) */
        memset(t2 + 2 * tu_t2_row_bytes(in), 0x55, tu_t2_row_bytes(in)); /* row 2: q = 0 */
        memset(xq, 0x80, in * MAXTOK);                       /* -128 */
        const float want[3] = {(float)(-128 * (int64_t)in), (float)(128 * (int64_t)in), 0.0f};
        assert_true((double)want[0] == (double)(-128 * (int64_t)in));
        bitnet_ternary_matrix w = {t2, out, in, BITNET_SCALE_TENSOR, 0, &d};
        /* one token (the GEMV kernels) and several (the kernels of a pass of tokens) */
        static const uint64_t toks[] = {1, 3, MAXTOK};
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
            bitnet_bitlinear_io io = {.tokens = toks[k], .xq = xq, .xs = xs, .y = y};
            assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
            for (uint64_t t = 0; t < toks[k]; t++)
                for (int o = 0; o < 3; o++) assert_true(y[t * 3 + o] == want[o]);
            for (size_t c = 0; c < NCFG; c++) {
                memset(y, 0, sizeof y);
                assert_int_equal(bitnet_bitlinear(be[c], &w, &io), BITNET_OK);
                for (uint64_t t = 0; t < toks[k]; t++)
                    for (int o = 0; o < 3; o++) {
                        if (y[t * 3 + o] != want[o])
                            print_message("# %s x%d, %llu blocks, %llu tokens, row %d: %.9g, want %.9g\n",
                                          configs[c].simd, configs[c].threads, (unsigned long long)blocks[i],
                                          (unsigned long long)toks[k], o, (double)y[t * 3 + o], (double)want[o]);
                        assert_true(y[t * 3 + o] == want[o]);
                    }
            }
        }
        free(t2);
        free(xq);
    }
    /* random codes and activations around the bound, against the reference */
    int bad = 0;
    bad += check_case(be, 128 * 4095, 3, 1, BITNET_SCALE_ROW, 0, 0, 0, 1);
    bad += check_case(be, 128 * 4095 + 1, 2, 1, BITNET_SCALE_TENSOR, 0, 0, 0, 1);
    close_all(be);
    assert_int_equal(bad, 0);
}

/* Calls back to back (the pool's workers are then caught spinning) and
 * with pauses (they have gone to sleep): the same result every time. */
static void test_repeated_calls(void **state)
{
    (void)state;
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    const uint64_t in = 2049, out = 300;
    int8_t *q = malloc(in * out);
    uint8_t *t2 = malloc(tu_t2_row_bytes(in) * out);
    float *x = malloc(in * sizeof(float)), yref[300], y[300], d = 0.25f;
    assert_true(q && t2 && x);
    for (uint64_t i = 0; i < in * out; i++) q[i] = (int8_t)((int)(rnd() % 3) - 1);
    tu_t2_pack(q, out, in, t2);
    for (uint64_t i = 0; i < in; i++) x[i] = rndf();
    bitnet_ternary_matrix w = {t2, out, in, BITNET_SCALE_TENSOR, 0, &d};
    bitnet_bitlinear_io io = {.tokens = 1, .x = x, .y = yref};
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    io.y = y;
    for (int r = 0; r < 300; r++) {
        memset(y, 0, sizeof y);
        assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
        assert_memory_equal(y, yref, sizeof y);
        if (r % 100 == 99) {
            const struct timespec ts = {0, 2000000}; /* 2 ms: longer than the spin */
            nanosleep(&ts, NULL);
        }
    }
    free(q);
    free(t2);
    free(x);
    bitnet_backend_free(be);
}

/* The backend's scratch, reused from call to call and given back after a
 * call that needed more than the library keeps (64 MiB; here the float
 * output behind a re-quantized one, 2048 x 8400 floats): calls of changing
 * needs in turn, small, big, small, big, each against the reference. */
static void requant_case(bitnet_backend *be, uint64_t in, uint64_t out, uint64_t tokens, bitnet_scale_kind kind)
{
    const uint64_t nd = kind == BITNET_SCALE_TENSOR ? 1 : out;
    int8_t *q = malloc(in * out), *yq = malloc(tokens * out), *yqref = malloc(tokens * out);
    uint8_t *t2 = malloc(tu_t2_row_bytes(in) * out);
    float *d = malloc(nd * sizeof(float)), *x = malloc(tokens * in * sizeof(float));
    float *ys = malloc(tokens * sizeof(float)), *ysref = malloc(tokens * sizeof(float));
    assert_true(q && yq && yqref && t2 && d && x && ys && ysref);
    for (uint64_t i = 0; i < in * out; i++) q[i] = (int8_t)((int)(rnd() % 3) - 1);
    tu_t2_pack(q, out, in, t2);
    for (uint64_t i = 0; i < nd; i++) d[i] = 0.01f + (rndf() + 1.0f);
    for (uint64_t i = 0; i < tokens * in; i++) x[i] = rndf() * 5.0f;
    bitnet_ternary_matrix w = {t2, out, in, kind, 0, d};
    bitnet_bitlinear_io io = {.tokens = tokens, .x = x, .yq = yqref, .ys = ysref};
    assert_int_equal(bitnet_bitlinear_ref(&w, &io), BITNET_OK);
    io.yq = yq;
    io.ys = ys;
    memset(yq, 0x5a, tokens * out);
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
    assert_memory_equal(yq, yqref, tokens * out);
    assert_memory_equal(ys, ysref, tokens * sizeof(float));
    free(q); free(yq); free(yqref); free(t2); free(d); free(x); free(ys); free(ysref);
}

static void test_scratch_reuse(void **state)
{
    (void)state;
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    for (int r = 0; r < 2; r++) {
        requant_case(be, 300, 70, 3, BITNET_SCALE_ROW);
        requant_case(be, 32, 8400, 2048, r ? BITNET_SCALE_ROW : BITNET_SCALE_TENSOR);
        requant_case(be, 257, 33, 64, BITNET_SCALE_TENSOR);
    }
    bitnet_backend_free(be);
}

/* ---- the AVX-VNNI kernels, kernel by kernel -------------------------------------- */

#if defined(__x86_64__)
/* The EVEX-encoded twins of lib/cpu/bitlinear_avxvnni.c (the same source
 * built with AVX-512 VL + VNNI; Makefile), for CPUs without AVX-VNNI. */
void bn_t2_dot_avxvnni_evex(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc);
void bn_t2_gemv_avxvnni_evex(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last);
void bn_t2_grp1_avxvnni_evex(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                             const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grpn_avxvnni_evex(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks,
                             size_t bpg, size_t ng, const float *d0, const float *d1, const int32_t *xgp, float *sums);

/* sum over the row of code * x (code = q + 1, natural layout of bnt(5):
 * byte j of block b holds columns 128 b + 32 k + j at bits 2k) */
static int64_t plain_sum(const uint8_t *w, const int8_t *x, size_t nblocks)
{
    int64_t a = 0;
    for (size_t b = 0; b < nblocks; b++)
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 32; j++) a += (int64_t)((w[32 * b + j] >> (2 * k)) & 3) * x[128 * b + 32 * k + j];
    return a;
}

typedef struct {
    const char *name;
    void (*dot)(const uint8_t *, const int8_t *, size_t, int, size_t, int32_t *);
    void (*gemv)(const uint8_t *, const int8_t *, size_t, int32_t *, const uint8_t *);
    bn_t2_grp1_fn grp1;
    bn_t2_grpn_fn grpn;
} vnni256_set;

/* The group kernels (groups of bpg blocks): grp1's sums of (code - 1) * x
 * per group of two rows (and of one row given twice, rb 0) against
 * plain_sum less the activations' sums; grpn's float chains of up to 4
 * tokens against the same chain computed here, step by step in the
 * definition's order. */
/* n bytes of random T2 code words (each code 0..2). */
static void rnd_codes(uint8_t *w, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        uint8_t v = 0;
        for (int c = 0; c < 4; c++) v |= (uint8_t)((rnd() % 3) << (2 * c));
        w[j] = v;
    }
}

static int vnni256_check_groups(const vnni256_set *k)
{
    static const size_t blocks[] = {1, 3, 17, 64};
    static const size_t bpgs[] = {1, 2, 4};
    int bad = 0;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        for (size_t e = 0; e < sizeof bpgs / sizeof bpgs[0]; e++) {
            const size_t nb = blocks[i], bpg = bpgs[e], ng = (nb + bpg - 1) / bpg, xstride = 128 * nb + 32;
            uint8_t *wbuf = malloc(64 * nb + 1);
            int8_t *xbuf = malloc(4 * xstride + 1);
            int32_t *xg = malloc(4 * ng * sizeof(int32_t)), *xgp = malloc(4 * ng * sizeof(int32_t));
            int32_t *o0 = malloc(ng * sizeof(int32_t)), *o1 = malloc(ng * sizeof(int32_t));
            float *d = malloc(2 * ng * sizeof(float));
            assert_true(wbuf && xbuf && xg && xgp && o0 && o1 && d);
            uint8_t *w = wbuf + 1;
            int8_t *x = xbuf + 1;
            rnd_codes(w, 64 * nb);
            for (size_t j = 0; j < 4 * xstride; j++) x[j] = (int8_t)(rnd() & 0xff);
            for (size_t j = 0; j < 2 * ng; j++) d[j] = 0.01f + (rndf() + 1.0f);
            for (int t = 0; t < 4; t++)
                for (size_t g = 0; g < ng; g++) {
                    int32_t sx = 0;
                    for (size_t c = 128 * bpg * g; c < 128 * bpg * (g + 1) && c < 128 * nb; c++) sx += x[(size_t)t * xstride + c];
                    xg[(size_t)t * ng + g] = sx;
                    xgp[4 * g + (size_t)t] = sx;
                }
            /* want[r][t][g] */
            int32_t *want = malloc(2 * 4 * ng * sizeof(int32_t));
            assert_true(want != NULL);
            for (int r = 0; r < 2; r++)
                for (int t = 0; t < 4; t++)
                    for (size_t g = 0; g < ng; g++) {
                        const size_t b0 = g * bpg, b1 = b0 + bpg < nb ? b0 + bpg : nb;
                        want[((size_t)r * 4 + (size_t)t) * ng + g] =
                            (int32_t)(plain_sum(w + (size_t)r * 32 * nb + 32 * b0, x + (size_t)t * xstride + 128 * b0, b1 - b0) -
                                      xg[(size_t)t * ng + g]);
                    }
            for (int same = 0; same < 2; same++) {
                k->grp1(w, same ? 0 : 32 * nb, x, nb, bpg, ng, xg, o0, o1, w + 64 * nb - 1);
                for (size_t g = 0; g < ng; g++)
                    for (int r = 0; r < 2; r++) {
                        const int32_t got = r ? o1[g] : o0[g], exp = want[(size_t)(same ? 0 : r) * 4 * ng + g];
                        if (got != exp) {
                            print_message("# %s grp1: %zu blocks, %zu a group, row %d%s, group %zu: %d, want %d\n", k->name,
                                          nb, bpg, r, same ? " (rb 0)" : "", g, got, exp);
                            bad++;
                        }
                    }
            }
            for (int nt = 1; nt <= 4; nt++) {
                float sums[16];
                k->grpn(w, 32 * nb, x, xstride, nt, nb, bpg, ng, d, d + ng, xgp, sums);
                for (int r = 0; r < 2; r++)
                    for (int t = 0; t < nt; t++) {
                        float sum = 0.0f;
                        for (size_t g = 0; g < ng; g++) {
                            const float p = (float)want[((size_t)r * 4 + (size_t)t) * ng + g] * d[(size_t)r * ng + g];
                            sum = sum + p;
                        }
                        if (memcmp(&sums[8 * r + t], &sum, sizeof sum) != 0) {
                            print_message("# %s grpn: %zu blocks, %zu a group, %d tokens, row %d token %d: %.9g, want %.9g\n",
                                          k->name, nb, bpg, nt, r, t, (double)sums[8 * r + t], (double)sum);
                            bad++;
                        }
                    }
            }
            free(wbuf); free(xbuf); free(xg); free(xgp); free(o0); free(o1); free(d); free(want);
        }
    return bad;
}

/* Random codes (never all zero) and activations over the whole int8 range,
 * at odd addresses, 1 to 4 tokens: the pass kernel and the one-token kernel
 * (with and without prefetch) against plain_sum; then the worst case
 * (every code 2, every activation -128) on both sides of the one-token
 * kernel's in-place limit of 4095 blocks. */
static int vnni256_check(const vnni256_set *k)
{
    static const size_t blocks[] = {1, 2, 3, 17, 64, 255, 4095, 4096};
    int bad = 0;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        const size_t nb = blocks[i], xstride = 128 * nb + 32;
        uint8_t *wbuf = malloc(32 * nb + 1);
        int8_t *xbuf = malloc(4 * xstride + 1);
        assert_true(wbuf && xbuf);
        uint8_t *w = wbuf + 1;
        int8_t *x = xbuf + 1;
        for (size_t j = 0; j < 32 * nb; j++) {
            uint8_t v = 0;
            for (int c = 0; c < 4; c++) v |= (uint8_t)((rnd() % 3) << (2 * c));
            w[j] = v;
        }
        for (size_t j = 0; j < 4 * xstride; j++) x[j] = (int8_t)(rnd() & 0xff);
        for (int nt = 1; nt <= 4; nt++) {
            int32_t acc[4];
            k->dot(w, x, xstride, nt, nb, acc);
            for (int t = 0; t < nt; t++) {
                const int64_t want = plain_sum(w, x + (size_t)t * xstride, nb);
                if (acc[t] != want) {
                    print_message("# %s dot: %zu blocks, %d tokens, token %d: %d, want %lld\n", k->name, nb, nt, t,
                                  acc[t], (long long)want);
                    bad++;
                }
            }
        }
        for (int pf = 0; pf < 2; pf++) {
            int32_t a = 0;
            k->gemv(w, x, nb, &a, pf ? w + 32 * nb - 1 : NULL);
            const int64_t want = plain_sum(w, x, nb);
            if (a != want) {
                print_message("# %s gemv: %zu blocks, prefetch %d: %d, want %lld\n", k->name, nb, pf, a, (long long)want);
                bad++;
            }
        }
        memset(w, 0xaa, 32 * nb);
        memset(x, 0x80, 128 * nb);
        int32_t a = 0;
        k->gemv(w, x, nb, &a, NULL);
        if (a != -256 * 128 * (int64_t)nb) {
            print_message("# %s gemv, worst case: %zu blocks: %d, want %lld\n", k->name, nb, a,
                          (long long)(-256 * 128 * (int64_t)nb));
            bad++;
        }
        free(wbuf);
        free(xbuf);
    }
    return bad;
}

void bn_t2_grp1s_avxvnni_evex(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t spg, size_t ng,
                              const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
/* A grp1s kernel (groups of 32 or 64 columns, one token, two rows) on
 * random rows of 1 to 33 blocks at odd addresses against sums taken here
 * column by column: column 32k + j of block b is byte j of the block at
 * shift k. */
static int check_grp1s(const char *name, bn_t2_grp1_fn fn)
{
    static const size_t blocks[] = {1, 2, 3, 5, 17, 33};
    int bad = 0;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        for (size_t spg = 1; spg <= 2; spg++) {
            const size_t nb = blocks[i], cols = 128 * nb, ng = cols / (32 * spg);
            uint8_t *wbuf = malloc(64 * nb + 1);
            int8_t *xbuf = malloc(cols + 1);
            int32_t *xg = malloc(ng * sizeof(int32_t)), *o0 = malloc(ng * sizeof(int32_t)), *o1 = malloc(ng * sizeof(int32_t));
            assert_true(wbuf && xbuf && xg && o0 && o1);
            uint8_t *w = wbuf + 1;
            int8_t *x = xbuf + 1;
            rnd_codes(w, 64 * nb);
            for (size_t j = 0; j < cols; j++) x[j] = (int8_t)(rnd() & 0xff);
            for (size_t g = 0; g < ng; g++) {
                int32_t sx = 0;
                for (size_t c = 32 * spg * g; c < 32 * spg * (g + 1); c++) sx += x[c];
                xg[g] = sx;
            }
            fn(w, 32 * nb, x, nb, spg, ng, xg, o0, o1, w + 64 * nb - 1);
            for (int r = 0; r < 2; r++)
                for (size_t g = 0; g < ng; g++) {
                    int32_t want = 0;
                    for (size_t c = 32 * spg * g; c < 32 * spg * (g + 1); c++) {
                        const int code = (w[(size_t)r * 32 * nb + 32 * (c / 128) + c % 32] >> (2 * ((c % 128) / 32))) & 3;
                        want += (code - 1) * x[c];
                    }
                    const int32_t got = r ? o1[g] : o0[g];
                    if (got != want) {
                        print_message("# %s grp1s: %zu blocks, %zu planes a group, row %d, group %zu: %d, want %d\n", name,
                                      nb, spg, r, g, got, want);
                        bad++;
                    }
                }
            free(wbuf); free(xbuf); free(xg); free(o0); free(o1);
        }
    return bad;
}
#endif

static void test_avxvnni_kernels(void **state)
{
    (void)state;
#if defined(__x86_64__)
    int ran = 0, bad = 0;
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")) {
        const vnni256_set evex = {"avx-vnni (EVEX twin)", bn_t2_dot_avxvnni_evex, bn_t2_gemv_avxvnni_evex,
                                  bn_t2_grp1_avxvnni_evex, bn_t2_grpn_avxvnni_evex};
        bad += vnni256_check(&evex);
        bad += vnni256_check_groups(&evex);
        bad += check_grp1s("avx-vnni (EVEX twin)", bn_t2_grp1s_avxvnni_evex);
        ran++;
    }
    if (tu_has_avxvnni() && __builtin_cpu_supports("avx2")) {
        const vnni256_set vex = {"avx-vnni", bn_t2_dot_avxvnni, bn_t2_gemv_avxvnni, bn_t2_grp1_avxvnni,
                                 bn_t2_grpn_avxvnni};
        bad += vnni256_check(&vex);
        bad += vnni256_check_groups(&vex);
        bad += check_grp1s("avx-vnni", bn_t2_grp1s_avxvnni);
        ran++;
    }
    if (__builtin_cpu_supports("avx2")) { /* the AVX2 set's group kernels, the same checks */
        const vnni256_set avx2 = {"avx2", bn_t2_dot_avx2, bn_t2_gemv_avx2, bn_t2_grp1_avx2, bn_t2_grpn_avx2};
        bad += vnni256_check_groups(&avx2);
        bad += check_grp1s("avx2", bn_t2_grp1s_avx2);
    }
    assert_int_equal(bad, 0);
    if (!ran) skip();
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_paths),
        cmocka_unit_test(test_group_kernels),
        cmocka_unit_test(test_group_extremes),
        cmocka_unit_test(test_odd_addresses),
        cmocka_unit_test(test_noshift_bounds),
        cmocka_unit_test(test_repeated_calls),
        cmocka_unit_test(test_scratch_reuse),
        cmocka_unit_test(test_tiles),
        cmocka_unit_test(test_tiles_public),
        cmocka_unit_test(test_avxvnni_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
