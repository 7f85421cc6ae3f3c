/*
 * compare.c - bitnet-verify --compare A[:TENSOR] B[:TENSOR]: two tensors, or
 * two files tensor by tensor (matched by name), with NMSE, max absolute and
 * relative error, cosine similarity and the count of differing elements.
 * Without a bound the tensors must be equal; --nmse/--max-abs set bounds.
 */
#include "verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t n, mismatches, first;
    double first_a, first_b;
    double nmse, max_abs, max_rel, cos;
} diff_stats;

/* A is the reference: NMSE = sum (a-b)^2 / sum a^2, relative error |a-b|/|a|.
 * Equal means a == b or both NaN. */
static void diff_f64(const double *a, const double *b, uint64_t n, diff_stats *d)
{
    double saa = 0, sbb = 0, sab = 0, sdd = 0;
    memset(d, 0, sizeof *d);
    d->n = n;
    for (uint64_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        int equal = x == y || (isnan(x) && isnan(y));
        if (equal) {
            if (isfinite(x)) {
                saa += x * x;
                sbb += x * x;
                sab += x * x;
            }
            continue;
        }
        if (d->mismatches++ == 0) {
            d->first = i;
            d->first_a = x;
            d->first_b = y;
        }
        double diff = fabs(x - y);
        if (isnan(diff)) diff = INFINITY; /* NaN against a number, or Inf - Inf */
        if (diff > d->max_abs) d->max_abs = diff;
        double rel = x != 0 && isfinite(x) ? diff / fabs(x) : INFINITY;
        if (rel > d->max_rel) d->max_rel = rel;
        if (isfinite(x)) saa += x * x;
        if (isfinite(y)) sbb += y * y;
        if (isfinite(x) && isfinite(y)) sab += x * y;
        sdd += diff * diff;
    }
    d->nmse = saa > 0 ? sdd / saa : sdd > 0 ? INFINITY : 0;
    if (saa > 0 && sbb > 0) d->cos = sab / sqrt(saa * sbb);
    else d->cos = saa == 0 && sbb == 0 ? 1 : 0;
}

/* Integer elements compared as int64 (exact at any magnitude). */
static bitnet_status int_mismatches(const bitnet_tensor *a, const bitnet_tensor *b, uint64_t n, diff_stats *d)
{
    int64_t *x = malloc(n ? n * sizeof *x : 1), *y = malloc(n ? n * sizeof *y : 1);
    bitnet_status st = BITNET_E_NOMEM;
    if (x && y && !(st = bitnet_cast(a->info.dtype, a->data, BITNET_I64, x, (size_t)n)) &&
        !(st = bitnet_cast(b->info.dtype, b->data, BITNET_I64, y, (size_t)n))) {
        d->mismatches = 0;
        for (uint64_t i = 0; i < n; i++)
            if (x[i] != y[i] && d->mismatches++ == 0) {
                d->first = i;
                d->first_a = (double)x[i];
                d->first_b = (double)y[i];
            }
    }
    free(x);
    free(y);
    return st;
}

typedef struct {
    uint64_t n, mismatches, first;
} scale_diff;

static int compare_scales(const bitnet_tensor *a, const bitnet_tensor *b, scale_diff *sd, char *why, size_t wsize)
{
    uint64_t na = 0, nb = 0;
    memset(sd, 0, sizeof *sd);
    if (a->info.scale_kind != b->info.scale_kind || a->info.group != b->info.group) {
        snprintf(why, wsize, "scale kinds differ (%s vs %s)", vt_scale_kind_name(a->info.scale_kind),
                 vt_scale_kind_name(b->info.scale_kind));
        return 1;
    }
    if (bitnet_tensor_n_scales(&a->info, &na) || bitnet_tensor_n_scales(&b->info, &nb) || na != nb) {
        snprintf(why, wsize, "scale counts differ");
        return 1;
    }
    sd->n = na;
    for (uint64_t i = 0; i < na; i++)
        if (!(a->scales[i] == b->scales[i] || (isnan(a->scales[i]) && isnan(b->scales[i]))) && sd->mismatches++ == 0)
            sd->first = i;
    if (sd->mismatches)
        snprintf(why, wsize, "%llu of %llu scales differ (first: scale %llu, %.9g vs %.9g)", (unsigned long long)sd->mismatches,
                 (unsigned long long)na, (unsigned long long)sd->first, (double)a->scales[sd->first],
                 (double)b->scales[sd->first]);
    return sd->mismatches != 0;
}

/* Compares one pair; prints its line; returns 0 pass, 1 fail. */
static int compare_pair(const bitnet_tensor *a, const bitnet_tensor *b, const char *label, const verify_bounds *bd)
{
    char why[1024] = "", sa[256], sb[256];
    double *x = NULL, *y = NULL;
    uint64_t n = 0, nb = 0;
    diff_stats d;
    scale_diff sd = {0, 0, 0};
    int fail = 0;
    bitnet_status st;
    memset(&d, 0, sizeof d);
    bitnet_shape_str(&a->info, sa, sizeof sa);
    bitnet_shape_str(&b->info, sb, sizeof sb);
    const char *da = bitnet_dtype_name(a->info.dtype), *db = bitnet_dtype_name(b->info.dtype);
    if (!vt_same_shape(&a->info, &b->info)) {
        printf("FAIL %s: shapes differ (%s %s vs %s %s)\n", label, da, sa, db, sb);
        return 1;
    }
    if ((st = vt_to_f64(a, &x, &n)) || (st = vt_to_f64(b, &y, &nb))) {
        printf("FAIL %s: cannot read as numbers: %s\n", label, bitnet_strerror(st));
        free(x);
        return 1;
    }
    diff_f64(x, y, n, &d);
    int tern = bitnet_dtype_is_ternary(a->info.dtype) && bitnet_dtype_is_ternary(b->info.dtype);
    int any_tern = bitnet_dtype_is_ternary(a->info.dtype) || bitnet_dtype_is_ternary(b->info.dtype);
    int ints = bitnet_dtype_is_int(a->info.dtype) && bitnet_dtype_is_int(b->info.dtype);
    if (tern) {
        /* codes first: the values q*d could agree where codes and scales do not (d = 0) */
        int8_t *qa = NULL, *qb = NULL;
        if (!(st = vt_codes(a, &qa)) && !(st = vt_codes(b, &qb))) {
            d.mismatches = 0;
            for (uint64_t i = 0; i < n; i++)
                if (qa[i] != qb[i] && d.mismatches++ == 0) {
                    d.first = i;
                    d.first_a = qa[i];
                    d.first_b = qb[i];
                }
        }
        free(qa);
        free(qb);
    } else if (ints) {
        st = int_mismatches(a, b, n, &d);
    }
    if (st) {
        printf("FAIL %s: %s\n", label, bitnet_strerror(st));
        free(x);
        free(y);
        return 1;
    }
    int has_scales = a->info.scale_kind != BITNET_SCALE_NONE || b->info.scale_kind != BITNET_SCALE_NONE;
    char swhy[512] = "";
    int scales_differ = has_scales && compare_scales(a, b, &sd, swhy, sizeof swhy);
    const char *what = tern ? "codes" : "elements";
    if (bd->exact) {
        if (d.mismatches) {
            fail = 1;
            snprintf(why, sizeof why, "%llu of %llu %s differ (first at index %llu: %.9g vs %.9g); bound: exact",
                     (unsigned long long)d.mismatches, (unsigned long long)n, what, (unsigned long long)d.first, d.first_a,
                     d.first_b);
        } else if (scales_differ) {
            fail = 1;
            snprintf(why, sizeof why, "%s; bound: exact", swhy);
        }
    } else {
        if (bd->have_nmse && !(d.nmse <= bd->nmse)) {
            fail = 1;
            snprintf(why, sizeof why, "nmse %.3g exceeds bound --nmse %.3g", d.nmse, bd->nmse);
        } else if (bd->have_max_abs && !(d.max_abs <= bd->max_abs)) {
            fail = 1;
            snprintf(why, sizeof why, "max_abs %.3g exceeds bound --max-abs %.3g", d.max_abs, bd->max_abs);
        } else if (scales_differ && !any_tern) {
            /* ternary scales are inside q*d; other scales are compared as they are */
            fail = 1;
            snprintf(why, sizeof why, "%s", swhy);
        }
    }
    if (fail || tool_verbosity >= 1) {
        printf("%s %s %s%s%s %s nmse=%.3g max_abs=%.3g max_rel=%.3g cos=%.9f mismatches=%llu/%llu", fail ? "FAIL" : "PASS",
               label, da, strcmp(da, db) ? "/" : "", strcmp(da, db) ? db : "", sa, d.nmse, d.max_abs, d.max_rel, d.cos,
               (unsigned long long)d.mismatches, (unsigned long long)n);
        if (has_scales)
            printf(" scale_mismatches=%llu/%llu", (unsigned long long)sd.mismatches, (unsigned long long)sd.n);
        if (fail) printf(": %s", why);
        putchar('\n');
    }
    free(x);
    free(y);
    return fail;
}

/* The tensor of a spec: the named one, or the file's only tensor, or (when
 * the other side names one) the tensor of that name. */
static bitnet_tensor *pick(vt_list *l, const char *file, const char *name, const char *other_name)
{
    if (name) {
        bitnet_tensor *t = vt_find(l, name, NULL);
        if (!t) msg_err("%s: no tensor '%s'", file, name);
        return t;
    }
    if (l->n == 1) return &l->t[0];
    bitnet_tensor *t = other_name ? vt_find(l, other_name, NULL) : NULL;
    if (!t) msg_err("%s holds %zu tensors: name one as %s:TENSOR", file, l->n, file);
    return t;
}

int verify_compare(const char *spec_a, const char *spec_b, const verify_bounds *bd)
{
    const char *ta = NULL, *tb = NULL;
    char *fa = tool_split_spec(spec_a, &ta), *fb = tool_split_spec(spec_b, &tb);
    vt_list la, lb;
    int rc;
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    if (!fa || !fb) {
        msg_err("out of memory");
        rc = EXIT_FAIL;
        goto out;
    }
    if (strcmp(fa, "-") == 0 && strcmp(fb, "-") == 0) {
        msg_err("only one input can be standard input");
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = vt_load_all(fa, &la)) || (rc = vt_load_all(fb, &lb))) goto out;
    if (ta || tb) {
        bitnet_tensor *a = pick(&la, fa, ta, tb), *b = pick(&lb, fb, tb, ta);
        if (!a || !b) {
            rc = EXIT_USAGE;
            goto out;
        }
        char label[2 * BITNET_MAX_NAME + 8];
        if (strcmp(a->info.name, b->info.name) == 0) snprintf(label, sizeof label, "%s", a->info.name);
        else snprintf(label, sizeof label, "%s~%s", a->info.name, b->info.name);
        int fail = compare_pair(a, b, label, bd);
        if (!fail && tool_verbosity >= 1) printf("1 tensor compared: equal within bounds\n");
        else if (fail) printf("1 tensor compared: FAILED\n");
        rc = fail ? EXIT_FAIL : EXIT_OK;
        goto out;
    }
    size_t passed = 0, failed = 0, only_a = 0, only_b = 0;
    for (size_t i = 0; i < la.n; i++) {
        size_t j;
        bitnet_tensor *b = vt_find(&lb, la.t[i].info.name, &j);
        if (!b) {
            printf("MISSING %s: in %s, not in %s\n", la.t[i].info.name, fa, fb);
            only_a++;
            continue;
        }
        lb.used[j] = 1;
        if (compare_pair(&la.t[i], b, la.t[i].info.name, bd)) failed++;
        else passed++;
    }
    for (size_t j = 0; j < lb.n; j++)
        if (!lb.used[j]) {
            printf("EXTRA %s: in %s, not in %s\n", lb.t[j].info.name, fb, fa);
            only_b++;
        }
    int bad = failed || only_a || only_b;
    if (bad || tool_verbosity >= 1)
        printf("%zu tensor%s compared: %zu passed, %zu failed, %zu only in %s, %zu only in %s\n", passed + failed,
               passed + failed == 1 ? "" : "s", passed, failed, only_a, fa, only_b, fb);
    rc = bad ? EXIT_FAIL : EXIT_OK;
out:
    vt_list_free(&la);
    vt_list_free(&lb);
    free(fa);
    free(fb);
    return rc;
}
