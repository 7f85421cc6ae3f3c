/*
 * backends.c - bitnet-verify --backends: every op of the library on every
 * selected device, against the scalar references, over classes of shapes.
 * One line per op x device x shape class, then "N passed, N failed".
 */
#include "bk.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct bk_state {
    uint64_t rng;
    int json;
    uint64_t passed, failed;
    int device_error;
    json_t *results;
};

/* ---- shape classes ------------------------------------------------------
 * Sizes around the SIMD widths and the T2 block (128): 1, 3, 17, 255, 4097.
 * --quick takes the first entry of each list. */
static const uint64_t vec_tiny[] = {1}, vec_odd[] = {3, 17}, vec_mid[] = {255, 129}, vec_big[] = {4097, 65537},
                      vec_large[] = {(1u << 22) + 1};
static const bk_mat mat_tiny[] = {{1, 1, 1}, {1, 3, 2}};
static const bk_mat mat_odd[] = {{3, 17, 5}, {17, 3, 3}};
static const bk_mat mat_mid[] = {{5, 255, 17}, {2, 129, 255}};
static const bk_mat mat_big[] = {{3, 4097, 9}, {1, 33, 4097}};
static const bk_mat mat_large[] = {{64, 4096, 1024}, {1, 16385, 257}};
#define N(a) (sizeof(a) / sizeof((a)[0]))
static const bk_class classes[] = {
    {"tiny", vec_tiny, N(vec_tiny), mat_tiny, N(mat_tiny)},
    {"odd", vec_odd, N(vec_odd), mat_odd, N(mat_odd)},
    {"mid", vec_mid, N(vec_mid), mat_mid, N(mat_mid)},
    {"big", vec_big, N(vec_big), mat_big, N(mat_big)},
    {"large", vec_large, N(vec_large), mat_large, N(mat_large)},
};

/* A fresh context for size class k (level 0: one vector and one matrix
 * shape of it) on one device (be NULL: the host); cls is filled. */
static void ctx_for(bk_ctx *c, bk_class *cls, size_t k, int level, bk_state *st, const char *device,
                    bitnet_backend *be)
{
    *cls = classes[k];
    if (level == 0) cls->nvec = cls->nmat = 1;
    memset(c, 0, sizeof *c);
    c->st = st;
    c->device = device;
    c->be = be;
    c->cls = cls;
}

/* ---- random inputs ------------------------------------------------------ */

uint64_t bk_rand(bk_ctx *c)
{
    /* splitmix64: small, and the same stream on every machine for a seed */
    uint64_t z = (c->st->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void bk_fill(bk_ctx *c, float *x, uint64_t n, float lo, float hi)
{
    for (uint64_t i = 0; i < n; i++) {
        float u = (float)((bk_rand(c) >> 40) * 0x1p-24); /* [0, 1) */
        float v = lo + (hi - lo) * u;
        x[i] = v != 0 ? v : hi * 0.5f;
    }
}

void bk_codes(bk_ctx *c, int8_t *q, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) q[i] = (int8_t)((int)(bk_rand(c) % 3) - 1);
    if (n && q[0] == 0) q[0] = 1;
}

void *bk_alloc(uint64_t n, uint64_t size)
{
    uint64_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes) || bytes > SIZE_MAX - 64) {
        msg_err("test buffer too large");
        exit(EXIT_FAIL);
    }
    void *p = malloc((size_t)bytes + 64); /* + 64: never zero-sized */
    if (!p) {
        msg_err("out of memory (%llu bytes)", (unsigned long long)bytes);
        exit(EXIT_FAIL);
    }
    return p;
}

void bk_poison(void *p, uint64_t bytes) { memset(p, 0xA5, (size_t)bytes); }

/* ---- metrics ------------------------------------------------------------ */

double bk_ulps(const float *got, const float *ref, uint64_t n)
{
    float big = 0;
    double worst = 0;
    for (uint64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabsf(ref[i]) > big) big = fabsf(ref[i]);
    float floor_ = big * 0x1p-16f;
    for (uint64_t i = 0; i < n; i++) {
        float g = got[i], r = ref[i];
        if (g == r || (isnan(g) && isnan(r))) continue;
        if (!isfinite(g) || !isfinite(r)) return INFINITY;
        float m = fabsf(r) > floor_ ? fabsf(r) : floor_;
        double ulp = m > 0 ? (double)nextafterf(m, INFINITY) - m : (double)FLT_TRUE_MIN;
        double e = fabs((double)g - r) / ulp;
        if (e > worst) worst = e;
    }
    return worst;
}

double bk_nmse(const float *got, const double *ref, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = got[i] - ref[i];
        if (isnan(d)) return INFINITY;
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num > 0 ? INFINITY : 0;
}

uint64_t bk_diff_bytes(const void *a, const void *b, uint64_t n)
{
    const uint8_t *x = a, *y = b;
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) k += x[i] != y[i];
    return k;
}

uint64_t bk_diff_f32(const float *a, const float *b, uint64_t n)
{
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return k;
}

/* ---- result lines ------------------------------------------------------- */

static const char *metric_name(bk_metric m)
{
    return m == BK_ULP ? "ulp" : m == BK_NMSE ? "nmse" : "mismatches";
}

void bk_begin(bk_ctx *c, const char *op, bk_metric metric, double bound)
{
    c->op = op;
    c->metric = metric;
    c->bound = bound;
    c->err = 0;
    c->failed = 0;
    c->device_error = 0;
    c->note[0] = 0;
}

void bk_add(bk_ctx *c, double err, const char *what)
{
    if (!(err <= c->bound)) { /* NaN fails too */
        if (!c->failed) snprintf(c->note, sizeof c->note, "%s: err=%.3g", what, err);
        c->failed = 1;
    }
    if (!(err <= c->err)) c->err = err;
}

int bk_status(bk_ctx *c, bitnet_status ref, bitnet_status fast, const char *what)
{
    if (!ref && !fast) return 0;
    if (!c->failed) {
        if (ref) snprintf(c->note, sizeof c->note, "%s: the reference failed: %s (%s)", what, bitnet_strerror(ref),
                          bitnet_error_detail());
        else snprintf(c->note, sizeof c->note, "%s: %s (%s)", what, bitnet_strerror(fast), bitnet_error_detail());
    }
    if (fast && (fast == BITNET_E_DEVICE || fast == BITNET_E_BUILD || fast == BITNET_E_DEVICE_MEMORY ||
                 fast == BITNET_E_NO_DEVICE))
        c->device_error = 1;
    c->failed = 1;
    c->err = INFINITY;
    return 1;
}

void bk_same_error(bk_ctx *c, bitnet_status want, bitnet_status ref, bitnet_status fast, const char *what)
{
    if (ref == want && fast == want) return;
    if (!c->failed)
        snprintf(c->note, sizeof c->note, "%s: expected %s from both, the reference gave %s, the fast path %s", what,
                 bitnet_strerror(want), ref ? bitnet_strerror(ref) : "success", fast ? bitnet_strerror(fast) : "success");
    c->failed = 1;
    c->err = INFINITY;
}

static void fmt_num(char *buf, size_t size, double v, bk_metric m)
{
    if (m == BK_MISMATCH || (m == BK_ULP && v == floor(v) && v < 1e15)) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, "%.3g", v);
}

void bk_end(bk_ctx *c)
{
    char err[64], bound[64];
    fmt_num(err, sizeof err, c->err, c->metric);
    fmt_num(bound, sizeof bound, c->bound, c->metric);
    if (c->failed) c->st->failed++;
    else c->st->passed++;
    if (c->device_error) c->st->device_error = 1;
    if (c->st->json) {
        json_t *o = json_object();
        json_object_set_new(o, "op", json_string(c->op));
        json_object_set_new(o, "device", json_string(c->device));
        json_object_set_new(o, "class", json_string(c->cls->name));
        json_object_set_new(o, "pass", json_boolean(!c->failed));
        json_object_set_new(o, "err", isfinite(c->err) ? json_real(c->err) : json_null());
        json_object_set_new(o, "bound", json_real(c->bound));
        json_object_set_new(o, "metric", json_string(metric_name(c->metric)));
        if (c->failed) json_object_set_new(o, "detail", json_string(c->note));
        json_array_append_new(c->st->results, o);
        return;
    }
    if (!c->failed && tool_verbosity < 1) return;
    printf("%s %s %s %s err=%s bound=%s %s", c->failed ? "FAIL" : "PASS", c->op, c->device, c->cls->name, err, bound,
           metric_name(c->metric));
    if (c->failed) printf(" (%s)", c->note);
    putchar('\n');
    fflush(stdout);
}

/* ---- devices ------------------------------------------------------------ */

typedef struct {
    char **spec;
    size_t n;
} dev_list;

static int dev_add(dev_list *d, const char *s, size_t len)
{
    char **ns = realloc(d->spec, (d->n + 1) * sizeof *ns);
    if (!ns) return -1;
    d->spec = ns;
    if (!(d->spec[d->n] = strndup(s, len))) return -1;
    d->n++;
    return 0;
}

static void dev_free(dev_list *d)
{
    for (size_t i = 0; i < d->n; i++) free(d->spec[i]);
    free(d->spec);
}

/* The default list: cpu, then opencl:0, opencl:1, ... until no such device. */
static int dev_default(dev_list *d)
{
    if (dev_add(d, "cpu", 3)) return -1;
    for (int i = 0; i < 64; i++) {
        char spec[32];
        bitnet_backend *be = NULL;
        snprintf(spec, sizeof spec, "opencl:%d", i);
        bitnet_status st = bitnet_backend_create(&be, spec, 0);
        bitnet_backend_free(be);
        if (st == BITNET_E_NO_DEVICE) break;
        if (st) {
            if (i == 0) msg_info("no OpenCL device: %s (%s)", bitnet_strerror(st), bitnet_error_detail());
            else msg_warn("%s: %s (%s); not tested", spec, bitnet_strerror(st), bitnet_error_detail());
            break;
        }
        if (dev_add(d, spec, strlen(spec))) return -1;
    }
    return 0;
}

int verify_backends(const verify_backends_opts *o)
{
    bk_state st;
    dev_list devs = {NULL, 0};
    int rc = EXIT_OK;
    memset(&st, 0, sizeof st);
    st.rng = o->seed;
    st.json = o->json;
    if (o->json && !(st.results = json_array())) {
        msg_err("out of memory");
        return EXIT_FAIL;
    }
    if (o->devices) {
        const char *p = o->devices;
        while (*p) {
            size_t len = strcspn(p, ",");
            if (len == 0) {
                msg_err("--device: empty name in '%s'", o->devices);
                rc = EXIT_USAGE;
                goto out;
            }
            if (dev_add(&devs, p, len)) goto nomem;
            p += len;
            if (*p == ',') p++;
        }
        if (devs.n == 0) {
            msg_err("--device: empty list");
            rc = EXIT_USAGE;
            goto out;
        }
    } else if (dev_default(&devs)) {
        goto nomem;
    }
    size_t ncls = o->level >= 2 ? N(classes) : N(classes) - 1;
    msg_info("seed %llu", (unsigned long long)o->seed);
    /* packing does not run on a backend: once, on the host */
    for (size_t k = 0; k < ncls; k++) {
        bk_class cls;
        bk_ctx c;
        ctx_for(&c, &cls, k, o->level, &st, "host", NULL);
        bk_run_pack(&c);
    }
    for (size_t i = 0; i < devs.n; i++) {
        bitnet_backend *be = NULL;
        bitnet_status s = bitnet_backend_create(&be, devs.spec[i], o->threads);
        if (s) {
            int code = tool_fail(s, "cannot use device '%s'", devs.spec[i]);
            rc = code == EXIT_USAGE ? EXIT_USAGE : EXIT_DEVICE;
            goto out;
        }
        msg_info("%s: %s", devs.spec[i], bitnet_backend_describe(be));
        for (size_t k = 0; k < ncls; k++) {
            bk_class cls;
            bk_ctx c;
            ctx_for(&c, &cls, k, o->level, &st, devs.spec[i], be);
            bk_run_quant(&c, o->level);
            bk_run_ops(&c, o->level);
        }
        if (o->stats) {
            char buf[16384];
            bitnet_backend_stats_format(be, buf, sizeof buf);
            fprintf(stderr, "%s: %s\n%s", tool_name, devs.spec[i], buf);
        }
        bitnet_backend_free(be);
    }
    if (o->json) {
        json_t *doc = json_object(), *dl = json_array();
        for (size_t i = 0; i < devs.n; i++) json_array_append_new(dl, json_string(devs.spec[i]));
        json_object_set_new(doc, "seed", json_integer((json_int_t)o->seed));
        json_object_set_new(doc, "devices", dl);
        json_object_set_new(doc, "results", st.results);
        st.results = NULL;
        json_object_set_new(doc, "passed", json_integer((json_int_t)st.passed));
        json_object_set_new(doc, "failed", json_integer((json_int_t)st.failed));
        char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        json_decref(doc);
        if (!text) goto nomem;
        printf("%s\n", text);
        free(text);
    } else if (st.failed || tool_verbosity >= 1) {
        printf("%llu passed, %llu failed\n", (unsigned long long)st.passed, (unsigned long long)st.failed);
    }
    rc = st.failed ? (st.device_error ? EXIT_DEVICE : EXIT_FAIL) : EXIT_OK;
    goto out;
nomem:
    msg_err("out of memory");
    rc = EXIT_FAIL;
out:
    json_decref(st.results);
    dev_free(&devs);
    return rc;
}
