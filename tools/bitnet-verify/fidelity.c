/*
 * fidelity.c - bitnet-verify --fidelity SOURCE QUANTIZED: every tensor of a
 * quantized file recomputed from the source with the reference quantizers
 * (bitnet_quantize_weights_ref for t2/t3, bitnet_quantize_acts_ref for i8
 * with row scales); codes and scales must be bit-identical.  Tensors kept
 * unquantized must equal the source, or its bitnet_cast to the stored dtype.
 */
#include "verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t quantized, kept, failed, missing;
} tally;

/* Source elements as f32 (the quantizers' input); NULL with a message on error. */
static float *source_f32(const bitnet_tensor *s, uint64_t n, char *why, size_t wsize)
{
    if (bitnet_dtype_is_ternary(s->info.dtype)) {
        snprintf(why, wsize, "the source tensor is already ternary (%s)", bitnet_dtype_name(s->info.dtype));
        return NULL;
    }
    float *w = malloc(n ? n * sizeof *w : 1);
    if (!w) {
        snprintf(why, wsize, "out of memory");
        return NULL;
    }
    bitnet_status st = bitnet_cast(s->info.dtype, s->data, BITNET_F32, w, (size_t)n);
    if (st) {
        snprintf(why, wsize, "cannot cast the source to f32: %s", bitnet_strerror(st));
        free(w);
        return NULL;
    }
    return w;
}

/* First differing code and how many differ. */
static uint64_t code_mismatches(const int8_t *stored, const int8_t *expect, uint64_t n, uint64_t *first)
{
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (stored[i] != expect[i] && k++ == 0) *first = i;
    return k;
}

/* Codes stored against those of the reference function ref on a tensor of
 * `cols` columns: 0 when all agree, else 1 with the count and the first
 * difference in why. */
static int codes_differ(const int8_t *got, const int8_t *want, uint64_t n, uint64_t cols, const char *ref, char *why,
                        size_t wsize)
{
    uint64_t first = 0, bad = code_mismatches(got, want, n, &first);
    if (!bad) return 0;
    snprintf(why, wsize, "%llu of %llu codes differ from %s; first at flat index %llu (row %llu, column %llu): stored %d, expected %d",
             (unsigned long long)bad, (unsigned long long)n, ref, (unsigned long long)first,
             (unsigned long long)(first / cols), (unsigned long long)(first % cols), got[first], want[first]);
    return 1;
}

static uint64_t scale_mismatches(const float *stored, const float *expect, uint64_t n, uint64_t *first)
{
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(&stored[i], &expect[i], sizeof(float)) != 0 && k++ == 0) *first = i;
    return k;
}

static void scale_range(const float *s, uint64_t n, char *buf, size_t size)
{
    float lo = INFINITY, hi = -INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        if (s[i] < lo) lo = s[i];
        if (s[i] > hi) hi = s[i];
    }
    if (n == 1) snprintf(buf, size, "%.6g", (double)s[0]);
    else if (n == 0) snprintf(buf, size, "-");
    else snprintf(buf, size, "[%.6g, %.6g]", (double)lo, (double)hi);
}

/* Ternary weights: returns 1 on a mismatch (message in why), stats in stats. */
static int check_weights(const bitnet_tensor *s, const bitnet_tensor *q, char *why, size_t wsize, char *stats, size_t ssize)
{
    uint64_t n, rows, cols, ns, first = 0;
    int fail = 1;
    uint8_t *t2 = NULL;
    float *w = NULL, *d = NULL;
    int8_t *want = NULL, *got = NULL;
    bitnet_status st;
    if (q->info.scale_kind == BITNET_SCALE_NONE) {
        snprintf(why, wsize, "ternary tensor without scales");
        return 1;
    }
    if (bitnet_tensor_elements(&q->info, &n) || bitnet_tensor_n_scales(&q->info, &ns)) {
        snprintf(why, wsize, "bad tensor description");
        return 1;
    }
    bitnet_tensor_rows_cols(&q->info, &rows, &cols);
    if (!(w = source_f32(s, n, why, wsize))) return 1;
    t2 = malloc(rows * bitnet_t2_row_bytes(cols) + 1);
    d = malloc(ns * sizeof *d + 1);
    want = malloc(n + 1);
    if (!t2 || !d || !want) {
        snprintf(why, wsize, "out of memory");
        goto out;
    }
    if ((st = bitnet_quantize_weights_ref(w, rows, cols, q->info.scale_kind, q->info.group, t2, d)) ||
        (st = bitnet_t2_unpack(t2, rows, cols, want)) || (st = vt_codes(q, &got))) {
        snprintf(why, wsize, "%s (%s)", bitnet_strerror(st), bitnet_error_detail());
        goto out;
    }
    if (codes_differ(got, want, n, cols, "bitnet_quantize_weights_ref", why, wsize)) goto out;
    uint64_t bad = scale_mismatches(q->scales, d, ns, &first);
    if (bad) {
        snprintf(why, wsize, "%llu of %llu scales differ from bitnet_quantize_weights_ref; first: scale %llu, stored %.9g, expected %.9g",
                 (unsigned long long)bad, (unsigned long long)ns, (unsigned long long)first, (double)q->scales[first],
                 (double)d[first]);
        goto out;
    }
    fail = 0;
out:
    if (got) {
        /* statistics of what is stored, useful on failure too */
        uint64_t zeros = 0;
        double err = 0, norm = 0;
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                uint64_t i = r * cols + c;
                double wq = got[i] * (double)q->scales[vt_scale_index(q->info.scale_kind, q->info.group, cols, r, c)];
                zeros += got[i] == 0;
                err += (w[i] - wq) * (w[i] - wq);
                norm += (double)w[i] * w[i];
            }
        char range[96];
        scale_range(q->scales, ns, range, sizeof range);
        snprintf(stats, ssize, "d=%s zeros=%.4f rel_rms=%.4g", range, n ? (double)zeros / (double)n : 0.0,
                 norm > 0 ? sqrt(err / norm) : 0.0);
    }
    free(w);
    free(t2);
    free(d);
    free(want);
    free(got);
    return fail;
}

/* int8 activations with per-row s: returns 1 on a mismatch. */
static int check_acts(const bitnet_tensor *s, const bitnet_tensor *q, char *why, size_t wsize, char *stats, size_t ssize)
{
    uint64_t n, rows, cols, first = 0;
    int fail = 1;
    float *x = NULL, *sc = NULL;
    int8_t *want = NULL;
    bitnet_status st;
    if (bitnet_tensor_elements(&q->info, &n)) {
        snprintf(why, wsize, "bad tensor description");
        return 1;
    }
    bitnet_tensor_rows_cols(&q->info, &rows, &cols);
    if (!(x = source_f32(s, n, why, wsize))) return 1;
    sc = malloc(rows * sizeof *sc + 1);
    want = malloc(n + 1);
    if (!sc || !want) {
        snprintf(why, wsize, "out of memory");
        goto out;
    }
    if ((st = bitnet_quantize_acts_ref(x, rows, cols, want, sc))) {
        snprintf(why, wsize, "%s (%s)", bitnet_strerror(st), bitnet_error_detail());
        goto out;
    }
    const int8_t *got = q->data;
    if (codes_differ(got, want, n, cols, "bitnet_quantize_acts_ref", why, wsize)) goto out;
    uint64_t bad = scale_mismatches(q->scales, sc, rows, &first);
    if (bad) {
        snprintf(why, wsize, "%llu of %llu scales differ from bitnet_quantize_acts_ref; first: row %llu, stored %.9g, expected %.9g",
                 (unsigned long long)bad, (unsigned long long)rows, (unsigned long long)first, (double)q->scales[first],
                 (double)sc[first]);
        goto out;
    }
    fail = 0;
    uint64_t zeros = 0;
    double err = 0, norm = 0;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t i = r * cols + c;
            double xq = got[i] / (double)q->scales[r];
            zeros += got[i] == 0;
            err += (x[i] - xq) * (x[i] - xq);
            norm += (double)x[i] * x[i];
        }
    char range[96];
    scale_range(q->scales, rows, range, sizeof range);
    snprintf(stats, ssize, "s=%s zeros=%.4f rel_rms=%.4g", range, n ? (double)zeros / (double)n : 0.0,
             norm > 0 ? sqrt(err / norm) : 0.0);
out:
    free(x);
    free(sc);
    free(want);
    return fail;
}

/* A tensor left unquantized: equal to the source, or to bitnet_cast of it. */
static int check_kept(const bitnet_tensor *s, const bitnet_tensor *q, char *why, size_t wsize, char *stats, size_t ssize)
{
    uint64_t n, bytes;
    if (bitnet_dtype_is_ternary(s->info.dtype) || q->info.scale_kind != s->info.scale_kind) {
        snprintf(why, wsize, "stored as %s with %s scales, source is %s with %s scales", bitnet_dtype_name(q->info.dtype),
                 vt_scale_kind_name(q->info.scale_kind), bitnet_dtype_name(s->info.dtype),
                 vt_scale_kind_name(s->info.scale_kind));
        return 1;
    }
    if (bitnet_tensor_elements(&q->info, &n) || bitnet_tensor_data_bytes(&q->info, &bytes)) {
        snprintf(why, wsize, "bad tensor description");
        return 1;
    }
    const void *expect = s->data;
    void *cast = NULL;
    if (s->info.dtype != q->info.dtype) {
        cast = malloc(bytes + 1);
        bitnet_status st = cast ? bitnet_cast(s->info.dtype, s->data, q->info.dtype, cast, (size_t)n) : BITNET_E_NOMEM;
        if (st) {
            snprintf(why, wsize, "cannot cast the source to %s: %s", bitnet_dtype_name(q->info.dtype), bitnet_strerror(st));
            free(cast);
            return 1;
        }
        expect = cast;
        snprintf(stats, ssize, "kept (cast %s -> %s)", bitnet_dtype_name(s->info.dtype), bitnet_dtype_name(q->info.dtype));
    } else {
        snprintf(stats, ssize, "kept (%s)", bitnet_dtype_name(q->info.dtype));
    }
    size_t es = bitnet_dtype_size(q->info.dtype);
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < n; i++)
        if (memcmp((const uint8_t *)q->data + i * es, (const uint8_t *)expect + i * es, es) != 0 && bad++ == 0) first = i;
    if (!bad && s->info.scale_kind != BITNET_SCALE_NONE) {
        uint64_t ns = 0;
        if (!bitnet_tensor_n_scales(&s->info, &ns) && memcmp(s->scales, q->scales, ns * sizeof(float)) != 0) {
            snprintf(why, wsize, "scales differ from the source");
            free(cast);
            return 1;
        }
    }
    free(cast);
    if (bad) {
        snprintf(why, wsize, "%llu of %llu elements differ from the source%s; first at flat index %llu",
                 (unsigned long long)bad, (unsigned long long)n, s->info.dtype != q->info.dtype ? " after the cast" : "",
                 (unsigned long long)first);
        return 1;
    }
    return 0;
}

int verify_fidelity(const char *source, const char *quantized, int spectrum, int json)
{
    vt_list ls, lq;
    tally t = {0, 0, 0, 0};
    int rc;
    FILE *txt = json ? stderr : stdout;
    bitnet_backend *be = NULL;
    json_t *layers = json ? json_array() : NULL;
    memset(&ls, 0, sizeof ls);
    memset(&lq, 0, sizeof lq);
    if (strcmp(source, "-") == 0 && strcmp(quantized, "-") == 0) {
        msg_err("only one input can be standard input");
        return EXIT_USAGE;
    }
    if ((rc = vt_load_all(source, &ls)) || (rc = vt_load_all(quantized, &lq))) goto out;
    if (spectrum && (rc = bitnet_backend_create(&be, "cpu", 0))) {
        rc = tool_fail((bitnet_status)rc, "cpu backend");
        goto out;
    }
    for (size_t i = 0; i < lq.n; i++) {
        const bitnet_tensor *q = &lq.t[i];
        char why[1024] = "", stats[256] = "", desc[512], ss[256], qs[256];
        size_t j;
        int fail, quantized_kind = 0;
        bitnet_tensor *s = vt_find(&ls, q->info.name, &j);
        vt_describe(&q->info, desc, sizeof desc);
        if (!s) {
            fail = 1;
            snprintf(why, sizeof why, "not in %s", source);
        } else {
            ls.used[j] = 1;
            if (!vt_same_shape(&s->info, &q->info)) {
                fail = 1;
                snprintf(why, sizeof why, "shape %s differs from the source's %s", bitnet_shape_str(&q->info, qs, sizeof qs),
                         bitnet_shape_str(&s->info, ss, sizeof ss));
            } else if (bitnet_dtype_is_ternary(q->info.dtype)) {
                quantized_kind = 1;
                fail = check_weights(s, q, why, sizeof why, stats, sizeof stats);
            } else if (q->info.dtype == BITNET_I8 && q->info.scale_kind == BITNET_SCALE_ROW &&
                       bitnet_dtype_is_float(s->info.dtype)) {
                quantized_kind = 1;
                fail = check_acts(s, q, why, sizeof why, stats, sizeof stats);
            } else {
                fail = check_kept(s, q, why, sizeof why, stats, sizeof stats);
            }
        }
        if (fail) t.failed++;
        else if (quantized_kind) t.quantized++;
        else t.kept++;
        if (fail) fprintf(txt, "FAIL %s %s%s%s: %s\n", q->info.name, desc, stats[0] ? " " : "", stats, why);
        else if (tool_verbosity >= 1) fprintf(txt, "PASS %s %s %s\n", q->info.name, desc, stats);
        if (!fail && spectrum && bitnet_dtype_is_ternary(q->info.dtype) && verify_spectrum(be, s, q, txt, layers))
            t.failed++;
    }
    for (size_t j = 0; j < ls.n; j++)
        if (!ls.used[j]) {
            fprintf(txt, "MISSING %s: in %s, not in %s\n", ls.t[j].info.name, source, quantized);
            t.missing++;
        }
    int bad = t.failed || t.missing;
    if (bad || tool_verbosity >= 1)
        fprintf(txt, "%s: %zu tensors: %zu quantized as the reference does, %zu kept, %zu failed, %zu missing\n",
               bad ? "FAILED" : "OK", lq.n, t.quantized, t.kept, t.failed, t.missing);
    rc = bad ? EXIT_FAIL : EXIT_OK;
    if (layers) {
        json_t *doc = json_object();
        json_object_set_new(doc, "source", json_string(source));
        json_object_set_new(doc, "quantized", json_string(quantized));
        json_object_set_new(doc, "ok", json_boolean(!bad));
        json_object_set_new(doc, "layers", layers);
        layers = NULL;
        json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
        printf("\n");
        json_decref(doc);
    }
out:
    json_decref(layers);
    bitnet_backend_free(be);
    vt_list_free(&ls);
    vt_list_free(&lq);
    return rc;
}
