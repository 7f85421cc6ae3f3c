/* op_ffn.c - a transformer feed-forward block with every operand in device
 * buffers, as a caller runs it: rmsnorm -> BitLinear up (D -> H, SiLU fused)
 * -> BitLinear down (H -> D) -> residual add, for `tokens` rows, the result
 * read back once at the end.  The rmsnorm is BitLinear up's fused input norm
 * (bitnet_bitlinear_io.norm) and the residual add BitLinear down's
 * (bitnet_bitlinear_io.residual): two ops, where separate bitnet_rmsnorm and
 * bitnet_binary calls made four (two OpenCL kernels less).  Shape DxH (e.g. 4096x14336); row scales.
 * Moves: both T2 matrices and their scales, the norm weight, x in, y out
 * (the intermediates stay on the device: they are not counted, so the
 * roofline percentage is against the bandwidth floor of the block).
 * The time is end to end; the kernel column is the sum of the block's
 * kernels.  Check: against the same chain through host memory on the CPU
 * (bit-exact up to the add; NMSE <= 1e-10 for the SiLU's libm). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

enum { B_WU, B_DU, B_WD, B_DD, B_NW, B_X, B_A, B_OUT, NB };

typedef struct {
    void **wu, **du, **wd, **dd, **nw, **x, **out;
    uint64_t wu_bytes, wd_bytes;
    bitnet_buffer **dev; /* NB per set */
} ffn_state;

static void ffn_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    const uint64_t D = c->m, H = c->k, T = c->tokens;
    const uint64_t w = H * bitnet_t2_row_bytes(D) + D * bitnet_t2_row_bytes(H) + 4 * (H + D);
    *moved = w + 4 * D + 2 * 4 * T * D;
    *set_bytes = *moved + 4 * T * H;
}

static void ffn_teardown(bench_case *c)
{
    ffn_state *s = c->st;
    if (s) bench_state_free(c, 7, s->wu, s->du, s->wd, s->dd, s->nw, s->x, s->out);
}

static bitnet_status ffn_setup(bench_case *c)
{
    ffn_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    const uint64_t D = c->m, H = c->k, T = c->tokens, seed = c->opts->seed;
    s->wu_bytes = H * bitnet_t2_row_bytes(D);
    s->wd_bytes = D * bitnet_t2_row_bytes(H);
    s->wu = bench_bufs_t2(c->nsets, H, D, seed);
    s->wd = bench_bufs_t2(c->nsets, D, H, seed + 1);
    s->du = bench_bufs_f32(c->nsets, H, seed + 2, 0.01f, 0.05f);
    s->dd = bench_bufs_f32(c->nsets, D, seed + 3, 0.01f, 0.05f);
    s->nw = bench_bufs_f32(c->nsets, D, seed + 4, 0.5f, 1.5f);
    s->x = bench_bufs_f32(c->nsets, T * D, seed + 5, -2.0f, 2.0f);
    s->out = bench_bufs_new(c->nsets, T * D * 4);
    return s->wu && s->wd && s->du && s->dd && s->nw && s->x && s->out ? BITNET_OK : BITNET_E_NOMEM;
}

/* The block on be with operands p[B_*] (host or device addresses). */
static bitnet_status block(const bench_case *c, bitnet_backend *be, void *const *p)
{
    const uint64_t D = c->m, H = c->k, T = c->tokens;
    bitnet_ternary_matrix up = {p[B_WU], H, D, BITNET_SCALE_ROW, 0, p[B_DU]};
    bitnet_ternary_matrix dn = {p[B_WD], D, H, BITNET_SCALE_ROW, 0, p[B_DD]};
    bitnet_bitlinear_io io1 = {
        .tokens = T, .x = p[B_X], .act = BITNET_ACT_SILU, .y = p[B_A], .norm = p[B_NW], .norm_eps = 1e-6f};
    bitnet_bitlinear_io io2 = {.tokens = T, .x = p[B_A], .y = p[B_OUT], .residual = p[B_X]};
    bitnet_status st = bitnet_bitlinear(be, &up, &io1);
    return st ? st : bitnet_bitlinear(be, &dn, &io2);
}

static bitnet_status ffn_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    ffn_state *s = c->st;
    (void)ms;
    void *p[NB];
    for (int i = 0; i < NB; i++) p[i] = bitnet_buffer_data(s->dev[NB * set + (size_t)i]);
    bitnet_status st = block(c, be, p);
    return st ? st : bitnet_buffer_read(s->dev[NB * set + B_OUT], 0, s->out[set], c->tokens * c->m * 4);
}

static bitnet_status ffn_keep(bench_case *c, bitnet_backend *be, int keep)
{
    ffn_state *s = c->st;
    const uint64_t D = c->m, H = c->k, T = c->tokens;
    if (!keep) {
        for (size_t i = 0; s->dev && i < NB * c->nsets; i++) bitnet_buffer_free(s->dev[i]);
        free(s->dev);
        s->dev = NULL;
        return BITNET_OK;
    }
    if (!(s->dev = calloc(NB * c->nsets, sizeof *s->dev))) return BITNET_E_NOMEM;
    for (size_t i = 0; i < c->nsets; i++) {
        bitnet_buffer **b = s->dev + NB * i;
        bitnet_status st;
        if ((st = bitnet_buffer_upload(be, s->wu[i], s->wu_bytes, &b[B_WU])) ||
            (st = bitnet_buffer_upload(be, s->du[i], H * 4, &b[B_DU])) ||
            (st = bitnet_buffer_upload(be, s->wd[i], s->wd_bytes, &b[B_WD])) ||
            (st = bitnet_buffer_upload(be, s->dd[i], D * 4, &b[B_DD])) ||
            (st = bitnet_buffer_upload(be, s->nw[i], D * 4, &b[B_NW])) ||
            (st = bitnet_buffer_upload(be, s->x[i], T * D * 4, &b[B_X])) ||
            (st = bitnet_buffer_create(be, T * H * 4, &b[B_A])) || (st = bitnet_buffer_create(be, T * D * 4, &b[B_OUT])))
            return st;
    }
    return bitnet_backend_sync(be);
}

static int ffn_check(bench_case *c, char *why, size_t wn)
{
    ffn_state *s = c->st;
    const uint64_t D = c->m, H = c->k, T = c->tokens;
    bitnet_backend *cpu = NULL;
    float *a = malloc(T * H * 4), *out = malloc(T * D * 4);
    bitnet_status st = a && out ? bitnet_backend_create(&cpu, "cpu", 0) : BITNET_E_NOMEM;
    if (st == BITNET_OK) {
        void *p[NB] = {s->wu[0], s->du[0], s->wd[0], s->dd[0], s->nw[0], s->x[0], a, out};
        st = block(c, cpu, p);
    }
    bitnet_backend_free(cpu);
    free(a);
    return bench_check_f32_ref(out, st, s->out[0], T * D, 0, 1e-10, why, wn);
}

const bench_op bench_op_ffn = {
    .name = "ffn", .shape = BENCH_SHAPE_MATRIX, .uses_tokens = 1, .resident = 1,
    .sizes = ffn_sizes, .setup = ffn_setup, .run = ffn_run, .check = ffn_check, .teardown = ffn_teardown,
    .keep = ffn_keep,
};
