/*
 * plan.c - what one run measures: the ops (with their variants), the shapes
 * from --shape, --sweep and --model, and the token counts.
 */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (!*s || *s == '-') return 1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x == 0) return 1;
    *v = x;
    return 0;
}

int bench_plan_ops(bench_plan *p, const char *list, const bench_opts *o)
{
    char names[BENCH_MAX_OPS][BENCH_NAME];
    if (!list) {
        p->nops = bench_op_all(p->ops, BENCH_MAX_OPS);
    } else {
        size_t got = bench_split(list, names, BENCH_MAX_OPS - p->nops);
        for (size_t j = 0; j < got; j++) {
            const bench_op *op = bench_op_find(names[j]);
            if (!op) {
                const bench_op *all[BENCH_MAX_OPS];
                size_t na = bench_op_all(all, BENCH_MAX_OPS);
                msg_err("--op: unknown op '%s'; this build has:", names[j]);
                for (size_t k = 0; k < na; k++) fprintf(stderr, " %s", all[k]->name);
                fputc('\n', stderr);
                return EXIT_USAGE;
            }
            p->ops[p->nops + j] = op;
        }
        p->nops += got;
    }
    for (size_t i = 0; i < p->nops; i++) {
        const bench_op *op = p->ops[i];
        p->nvar[i] = op->variants ? op->variants(o, p->variants[i], BENCH_MAX_VARIANTS) : 1;
        if (!op->variants) p->variants[i][0][0] = 0;
        if (p->nvar[i] == 0) return EXIT_USAGE;
    }
    return EXIT_OK;
}

static int add_shape(bench_plan *p, const char *s)
{
    char buf[64];
    const char *x = strchr(s, 'x');
    bench_shape t = {0, 0, !x};
    if (p->nshapes >= BENCH_MAX_SHAPES || strlen(s) >= sizeof buf) return 1;
    if (x) {
        memcpy(buf, s, (size_t)(x - s));
        buf[x - s] = 0;
        if (parse_u64(buf, &t.m) || parse_u64(x + 1, &t.k)) return 1;
    } else if (parse_u64(s, &t.m)) {
        return 1;
    } else {
        t.k = t.m;
    }
    if (t.single ? t.m > BENCH_MAX_ELEMS
                 : (t.m > (1ull << 24) || t.k > (1ull << 24) || t.m * t.k > BENCH_MAX_ELEMS))
        return 1;
    p->shapes[p->nshapes++] = t;
    return 0;
}

int bench_plan_shapes(bench_plan *p, const char *list)
{
    char items[BENCH_MAX_SHAPES][BENCH_NAME];
    size_t got = bench_split(list, items, BENCH_MAX_SHAPES);
    for (size_t j = 0; j < got; j++)
        if (add_shape(p, items[j])) {
            msg_err("--shape: '%s' is not MxK or N (positive; M, K at most 2^24; at most 2^34 elements)", items[j]);
            return EXIT_USAGE;
        }
    return EXIT_OK;
}

int bench_plan_sweep(bench_plan *p, const char *spec)
{
    unsigned long long a, b, step;
    char op;
    if (sscanf(spec, "%llu:%llu:%c%llu", &a, &b, &op, &step) == 4 && a > 0 && b >= a &&
        ((op == 'x' && step >= 2) || (op == '+' && step > 0))) {
        int bad = 0;
        for (unsigned long long v = a; v <= b && !bad; v = op == 'x' ? v * step : v + step) {
            char buf[32];
            snprintf(buf, sizeof buf, "%llu", v);
            bad = add_shape(p, buf);
        }
        if (!bad) return EXIT_OK;
    }
    msg_err("--sweep: '%s' is not A:B:xF or A:B:+S with 0 < A <= B (or too many sizes)", spec);
    return EXIT_USAGE;
}

/* Every distinct 2-D shape of a model file, read one tensor at a time. */
int bench_plan_model(bench_plan *p, const char *path)
{
    FILE *f = NULL;
    bitnet_reader *r = NULL;
    bitnet_tensor t = {0};
    bitnet_status st;
    int found = 0, rc = tool_in_open(path, &f);
    if (rc) return rc;
    if ((st = bitnet_reader_create(&r, f, BITNET_FMT_AUTO))) {
        rc = tool_fail(st, "%s", path);
        goto out;
    }
    bitnet_gguf_reader *g = bitnet_reader_gguf(r);
    size_t gi = 0;
    for (;;) {
        if (g) { /* GGUF: the shapes from the header, whatever the ggml type */
            const bitnet_gguf_tensor_desc *d = bitnet_gguf_reader_tensor(g, gi++);
            if (!d) {
                st = BITNET_END;
                break;
            }
            memset(&t, 0, sizeof t);
            t.info.rank = d->n_dims;
            for (uint32_t k = 0; k < d->n_dims; k++) t.info.dims[k] = d->ne[d->n_dims - 1 - k];
        } else if ((st = bitnet_reader_next(r, &t)) != BITNET_OK) {
            break;
        }
        if (t.info.rank == 2) {
            size_t i = 0;
            found = 1;
            while (i < p->nshapes && !(p->shapes[i].m == t.info.dims[0] && p->shapes[i].k == t.info.dims[1] &&
                                       !p->shapes[i].single))
                i++;
            if (i == p->nshapes && p->nshapes < BENCH_MAX_SHAPES)
                p->shapes[p->nshapes++] = (bench_shape){t.info.dims[0], t.info.dims[1], 0};
        }
        bitnet_tensor_release(&t);
    }
    if (st != BITNET_END) rc = tool_fail(st, "%s", path);
    else if (!found) {
        msg_err("%s: no 2-D tensor", path);
        rc = EXIT_FAIL;
    }
out:
    bitnet_reader_free(r);
    tool_in_close(f);
    return rc;
}

int bench_plan_tokens(bench_plan *p, const char *list)
{
    char items[BENCH_MAX_TOKENS][BENCH_NAME];
    p->ntok = bench_split(list, items, BENCH_MAX_TOKENS);
    for (size_t i = 0; i < p->ntok; i++)
        if (parse_u64(items[i], &p->tokens[i]) || p->tokens[i] > (1u << 20)) {
            msg_err("--tokens: '%s' is not a count from 1 to 2^20", items[i]);
            return EXIT_USAGE;
        }
    if (p->ntok == 0) {
        msg_err("--tokens: empty list");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}
