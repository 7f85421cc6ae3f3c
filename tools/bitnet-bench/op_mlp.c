/* op_mlp.c - a whole ternary MLP end to end, as make demo's model runs:
 * per layer LayerNorm (weight, bias), BitLinear (+ bias, ReLU but on the
 * last layer), for `tokens` random inputs, with every tensor in device
 * buffers and the logits read back once at the end.  The network is the
 * --net file: tensors layers.N.weight (ternary, tensor or row scales),
 * layers.N.bias, layers.N.norm.weight and layers.N.norm.bias, in order of N.
 * Moves: every weight, scale, bias and norm vector, the input and the
 * logits.  Check: bit-exact against the same network through host memory on
 * the CPU (LayerNorm and BitLinear give the CPU's bits on every backend). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MLP_MAX 64

typedef struct {
    int n;
    bitnet_tensor w[MLP_MAX], b[MLP_MAX], nw[MLP_MAX], nb[MLP_MAX];
    uint64_t width; /* widest layer */
    void **x, **out;
    bitnet_buffer **dev; /* per set: 4 per layer, then x, two activations */
} mlp_state;

/* Index N of "layers.N.<suffix>", or -1. */
static int layer_of(const char *name, const char *suffix)
{
    char *end;
    if (strncmp(name, "layers.", 7) != 0) return -1;
    long i = strtol(name + 7, &end, 10);
    if (end == name + 7 || *end != '.' || strcmp(end + 1, suffix) != 0 || i < 0 || i > 100000) return -1;
    return (int)i;
}

uint64_t bench_mlp_bytes(const bench_case *c);

/* Reads the network; a file that is not one gets a message naming what is
 * wrong (the status alone says only "malformed input"). */
static bitnet_status load(mlp_state *s, const char *path)
{
    FILE *f = NULL;
    if (strcmp(path, "-") == 0) { /* read again for every configuration */
        msg_err("--net -: the network must be a file, not standard input");
        return BITNET_E_INVALID;
    }
    int rc = tool_in_open(path, &f); /* refuses a leftover temporary */
    if (rc) return rc == EXIT_IO ? BITNET_E_IO : BITNET_E_INVALID;
    bitnet_reader *r = NULL;
    bitnet_tensor t = {0};
    int idx[MLP_MAX];
    bitnet_status st = bitnet_reader_create(&r, f, BITNET_FMT_AUTO);
    while (st == BITNET_OK && (st = bitnet_reader_next(r, &t)) == BITNET_OK) {
        static const char *const suf[4] = {"weight", "bias", "norm.weight", "norm.bias"};
        int kind = -1, li = -1;
        for (int k = 0; k < 4 && li < 0; k++)
            if ((li = layer_of(t.info.name, suf[k])) >= 0) kind = k;
        if (li < 0) {
            bitnet_tensor_release(&t);
            continue;
        }
        int j = 0;
        while (j < s->n && idx[j] != li) j++;
        if (j == s->n) {
            if (s->n == MLP_MAX) { st = BITNET_E_LIMIT; break; }
            int at = s->n++; /* keep the layers sorted by N */
            while (at > 0 && idx[at - 1] > li) {
                idx[at] = idx[at - 1];
                s->w[at] = s->w[at - 1], s->b[at] = s->b[at - 1], s->nw[at] = s->nw[at - 1], s->nb[at] = s->nb[at - 1];
                at--;
            }
            idx[at] = li;
            memset(&s->w[at], 0, sizeof s->w[at]), memset(&s->b[at], 0, sizeof s->b[at]);
            memset(&s->nw[at], 0, sizeof s->nw[at]), memset(&s->nb[at], 0, sizeof s->nb[at]);
            j = at;
        }
        bitnet_tensor *slot = kind == 0 ? &s->w[j] : kind == 1 ? &s->b[j] : kind == 2 ? &s->nw[j] : &s->nb[j];
        bitnet_tensor_release(slot);
        *slot = t;
        memset(&t, 0, sizeof t);
    }
    if (st == BITNET_END) st = BITNET_OK;
    bitnet_reader_free(r);
    tool_in_close(f);
    for (int i = 0; st == BITNET_OK && i < s->n; i++) {
        const bitnet_tensor *w = &s->w[i];
        if (w->info.dtype != BITNET_T2 || w->info.rank != 2 || !s->b[i].data || !s->nw[i].data || !s->nb[i].data ||
            (w->info.scale_kind != BITNET_SCALE_TENSOR && w->info.scale_kind != BITNET_SCALE_ROW) ||
            (i > 0 && s->w[i - 1].info.dims[0] != w->info.dims[1])) {
            msg_err("%s: layer %d: not a ternary MLP layer (2-D ternary weight with tensor or row scales, bias, "
                    "norm.weight, norm.bias; input width the previous layer's output width)", path, idx[i]);
            st = BITNET_E_FORMAT;
        }
        if (w->info.dims[0] > s->width) s->width = w->info.dims[0];
        if (w->info.dims[1] > s->width) s->width = w->info.dims[1];
    }
    if (st == BITNET_OK && s->n == 0) {
        msg_err("%s: no tensor layers.N.weight: not a ternary MLP", path);
        st = BITNET_E_FORMAT;
    }
    return st;
}

/* The network is read at setup; until then the size of its file stands in. */
static void mlp_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    struct stat sb;
    *moved = *set_bytes = c->st ? bench_mlp_bytes(c)
                        : c->opts->net && stat(c->opts->net, &sb) == 0 ? (uint64_t)sb.st_size
                                                                        : 4 * c->tokens * (c->m + c->k);
}

static void mlp_teardown(bench_case *c)
{
    mlp_state *s = c->st;
    if (!s) return;
    for (int i = 0; i < MLP_MAX; i++) {
        bitnet_tensor_release(&s->w[i]);
        bitnet_tensor_release(&s->b[i]);
        bitnet_tensor_release(&s->nw[i]);
        bitnet_tensor_release(&s->nb[i]);
    }
    bench_state_free(c, 2, s->x, s->out);
}

static uint64_t in_of(const mlp_state *s) { return s->w[0].info.dims[1]; }
static uint64_t out_of(const mlp_state *s) { return s->w[s->n - 1].info.dims[0]; }

static bitnet_status mlp_setup(bench_case *c)
{
    mlp_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    bitnet_status st = c->opts->net ? load(s, c->opts->net) : BITNET_E_INVALID;
    if (st) return st;
    s->x = bench_bufs_f32(c->nsets, c->tokens * in_of(s), c->opts->seed, 0.0f, 1.0f);
    s->out = bench_bufs_new(c->nsets, c->tokens * out_of(s) * 4);
    return s->x && s->out ? BITNET_OK : BITNET_E_NOMEM;
}

/* The network on be; p: per layer w, d, b, nw, nb, then x, h, y0, y1 and
 * the logits (host or device addresses). */
enum { EXTRA = 5 };
static bitnet_status net(const bench_case *c, const mlp_state *s, bitnet_backend *be, void *const *p)
{
    const uint64_t T = c->tokens;
    void *const *e = p + 5 * s->n; /* x, h, y0, y1, out */
    for (int i = 0; i < s->n; i++) {
        void *const *l = p + 5 * i;
        const bitnet_tensor_info *wi = &s->w[i].info;
        const uint64_t o = wi->dims[0], k = wi->dims[1];
        const void *x = i == 0 ? e[0] : e[2 + (i - 1) % 2];
        const int last = i + 1 == s->n;
        bitnet_status st = bitnet_layernorm(be, x, T, k, l[3], l[4], 1e-5f, e[1]);
        if (st) return st;
        bitnet_ternary_matrix w = {l[0], o, k, wi->scale_kind, 0, l[1]};
        bitnet_bitlinear_io io = {.tokens = T, .x = e[1], .bias = l[2], .act = last ? BITNET_ACT_NONE : BITNET_ACT_RELU,
                                  .y = last ? e[4] : e[2 + i % 2]};
        if ((st = bitnet_bitlinear(be, &w, &io))) return st;
    }
    return BITNET_OK;
}

/* The host addresses of the network's operands, with scratch h, y0, y1. */
static void host_args(const bench_case *c, const mlp_state *s, size_t set, void **p, void *h, void *y0, void *y1)
{
    for (int i = 0; i < s->n; i++) {
        p[5 * i] = s->w[i].data, p[5 * i + 1] = s->w[i].scales, p[5 * i + 2] = s->b[i].data;
        p[5 * i + 3] = s->nw[i].data, p[5 * i + 4] = s->nb[i].data;
    }
    void **e = p + 5 * s->n;
    e[0] = s->x[set], e[1] = h, e[2] = y0, e[3] = y1, e[4] = s->out[set];
    (void)c;
}

static uint64_t bytes_of(const bitnet_tensor *t)
{
    uint64_t b = 0, n = 0;
    bitnet_tensor_data_bytes(&t->info, &b);
    bitnet_tensor_n_scales(&t->info, &n);
    return b + 4 * n;
}

static bitnet_status mlp_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    mlp_state *s = c->st;
    (void)ms;
    void *p[5 * MLP_MAX + EXTRA];
    bitnet_buffer **b = s->dev + (size_t)(5 * s->n + EXTRA) * set;
    for (int i = 0; i < 5 * s->n + EXTRA; i++) p[i] = bitnet_buffer_data(b[i]);
    bitnet_status st = net(c, s, be, p);
    return st ? st : bitnet_buffer_read(b[5 * s->n + 4], 0, s->out[set], c->tokens * out_of(s) * 4);
}

static bitnet_status mlp_keep(bench_case *c, bitnet_backend *be, int keep)
{
    mlp_state *s = c->st;
    const size_t per = (size_t)(5 * s->n + EXTRA);
    if (!keep) {
        for (size_t i = 0; s->dev && i < per * c->nsets; i++) bitnet_buffer_free(s->dev[i]);
        free(s->dev);
        s->dev = NULL;
        return BITNET_OK;
    }
    if (!(s->dev = calloc(per * c->nsets, sizeof *s->dev))) return BITNET_E_NOMEM;
    const uint64_t T = c->tokens, wmax = T * s->width * 4;
    for (size_t set = 0; set < c->nsets; set++) {
        bitnet_buffer **b = s->dev + per * set;
        void *p[5 * MLP_MAX + EXTRA];
        host_args(c, s, set, p, NULL, NULL, NULL);
        bitnet_status st = BITNET_OK;
        for (int i = 0; i < s->n && !st; i++) {
            uint64_t wb = 0;
            bitnet_tensor_data_bytes(&s->w[i].info, &wb);
            const size_t sizes[5] = {(size_t)wb, (size_t)(bytes_of(&s->w[i]) - wb), (size_t)bytes_of(&s->b[i]),
                                     (size_t)bytes_of(&s->nw[i]), (size_t)bytes_of(&s->nb[i])};
            for (int k = 0; k < 5 && !st; k++) st = bitnet_buffer_upload(be, p[5 * i + k], sizes[k], &b[5 * i + k]);
        }
        bitnet_buffer **e = b + 5 * s->n;
        if (st || (st = bitnet_buffer_upload(be, s->x[set], T * in_of(s) * 4, &e[0])) ||
            (st = bitnet_buffer_create(be, wmax, &e[1])) || (st = bitnet_buffer_create(be, wmax, &e[2])) ||
            (st = bitnet_buffer_create(be, wmax, &e[3])) || (st = bitnet_buffer_create(be, T * out_of(s) * 4, &e[4])))
            return st;
    }
    return bitnet_backend_sync(be);
}

static int mlp_check(bench_case *c, char *why, size_t wn)
{
    mlp_state *s = c->st;
    const uint64_t T = c->tokens, wmax = T * s->width * 4;
    bitnet_backend *cpu = NULL;
    float *h = malloc(wmax), *y0 = malloc(wmax), *y1 = malloc(wmax), *out = malloc(T * out_of(s) * 4);
    bitnet_status st = h && y0 && y1 && out ? bitnet_backend_create(&cpu, "cpu", 0) : BITNET_E_NOMEM;
    if (st == BITNET_OK) {
        void *p[5 * MLP_MAX + EXTRA];
        host_args(c, s, 0, p, h, y0, y1);
        p[5 * s->n + 4] = out;
        st = net(c, s, cpu, p);
    }
    bitnet_backend_free(cpu);
    free(h);
    free(y0);
    free(y1);
    return bench_check_f32_ref(out, st, s->out[0], T * out_of(s), 0, 0, why, wn);
}

/* Bytes one call moves: every tensor of the network, the input, the logits. */
uint64_t bench_mlp_bytes(const bench_case *c)
{
    const mlp_state *s = c->st;
    uint64_t b = c->tokens * (in_of(s) + out_of(s)) * 4;
    for (int i = 0; i < s->n; i++) b += bytes_of(&s->w[i]) + bytes_of(&s->b[i]) + bytes_of(&s->nw[i]) + bytes_of(&s->nb[i]);
    return b;
}

const bench_op bench_op_mlp = {
    .name = "mlp", .shape = BENCH_SHAPE_MATRIX, .uses_tokens = 1, .resident = 1, .net = 1,
    .sizes = mlp_sizes, .setup = mlp_setup, .run = mlp_run, .check = mlp_check, .teardown = mlp_teardown,
    .keep = mlp_keep,
};
