/*
 * spectrum.c - bitnet-verify --fidelity --spectrum: for a quantized weight
 * matrix W (the source) and its dequantized ternary form Wq = q * d, the
 * singular values of W and of the quantization error E = W - Wq, and the
 * share of E's energy (||E||_F^2 = sum of its squared singular values) that
 * the best rank-r correction removes, sum_{i<r} s_i(E)^2 / ||E||_F^2
 * (Eckart-Young), for r = 8, 32 and 128: how much a small low-rank float
 * correction next to the ternary weights could win back.  A tensor of rank
 * above 2 is read as [product of the leading axes x last axis].
 */
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const int RANKS[] = {8, 32, 128};
#define NRANKS (sizeof RANKS / sizeof RANKS[0])

static json_t *values(const double *s, uint64_t k)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < k; i++) json_array_append_new(a, json_real(s[i]));
    return a;
}

int verify_spectrum(bitnet_backend *be, const bitnet_tensor *src, const bitnet_tensor *q, FILE *txt, json_t *layers)
{
    const bitnet_tensor_info *in = &q->info;
    uint64_t cols = in->rank ? in->dims[in->rank - 1] : 1, rows = 1, n = 0, nq = 0;
    for (uint32_t i = 0; i + 1 < in->rank; i++) rows *= in->dims[i];
    if (in->rank < 2 || !rows || !cols) return EXIT_OK; /* a vector has no spectrum worth showing */
    const uint64_t k = rows < cols ? rows : cols;
    double *w = NULL, *wq = NULL, *sw = malloc((size_t)k * sizeof *sw), *se = malloc((size_t)k * sizeof *se);
    bitnet_status st = sw && se ? BITNET_OK : BITNET_E_NOMEM;
    if (!st) st = vt_to_f64(src, &w, &n);
    if (!st) st = vt_to_f64(q, &wq, &nq);
    if (!st && (n != rows * cols || nq != n)) st = BITNET_E_SHAPE;
    if (!st) st = bitnet_svd(be, BITNET_F64, w, 1, rows, cols, sw, NULL, NULL);
    double ew = 0.0, ee = 0.0;
    if (!st) {
        for (uint64_t i = 0; i < n; i++) {
            ew += w[i] * w[i];
            wq[i] = w[i] - wq[i]; /* the error */
            ee += wq[i] * wq[i];
        }
        st = bitnet_svd(be, BITNET_F64, wq, 1, rows, cols, se, NULL, NULL);
    }
    int rc = EXIT_OK;
    if (st) {
        rc = tool_fail(st, "%s: spectrum", in->name);
    } else {
        double frac[NRANKS], ss = 0.0;
        for (uint64_t i = 0; i < k; i++) ss += se[i] * se[i]; /* = ee up to rounding */
        for (size_t r = 0; r < NRANKS; r++) {
            double part = 0.0;
            for (uint64_t i = 0; i < k && i < (uint64_t)RANKS[r]; i++) part += se[i] * se[i];
            frac[r] = ss > 0.0 ? part / ss : 0.0;
        }
        const double rel = ew > 0.0 ? sqrt(ee / ew) : 0.0;
        fprintf(txt, "SPECTRUM %s [%llu x %llu]: ||W-Wq||/||W|| = %.4f; s1(W) = %.4g, s1(E) = %.4g, s%llu(E) = %.4g\n",
                in->name, (unsigned long long)rows, (unsigned long long)cols, rel, sw[0], se[0], (unsigned long long)k,
                se[k - 1]);
        fprintf(txt, "  rank-r correction removes of the error energy:");
        for (size_t r = 0; r < NRANKS; r++)
            fprintf(txt, " r=%d %.2f%% (error then %.4f of ||W||)%s", RANKS[r], 100.0 * frac[r], rel * sqrt(1.0 - frac[r]),
                    r + 1 < NRANKS ? "," : "\n");
        if (layers) {
            json_t *o = json_object(), *fr = json_object();
            json_object_set_new(o, "name", json_string(in->name));
            json_object_set_new(o, "rows", json_integer((json_int_t)rows));
            json_object_set_new(o, "cols", json_integer((json_int_t)cols));
            json_object_set_new(o, "rel_error", json_real(rel));
            for (size_t r = 0; r < NRANKS; r++) {
                char key[16];
                snprintf(key, sizeof key, "%d", RANKS[r]);
                json_object_set_new(fr, key, json_real(frac[r]));
            }
            json_object_set_new(o, "energy_removed", fr);
            json_object_set_new(o, "singular_values_w", values(sw, k));
            json_object_set_new(o, "singular_values_error", values(se, k));
            json_array_append_new(layers, o);
        }
    }
    free(w);
    free(wq);
    free(sw);
    free(se);
    return rc;
}
