/*
 * linalg.c (bitnet-op) - the linear-algebra ops: cholesky, qr, svd, solve
 * (Cholesky solve) and lstsq (least squares through QR) on the last two axes
 * of a tensor, the leading axes being a batch.  f64 inputs stay f64, every
 * other dtype becomes f32.  Outputs are named tensors: l; q, r; s (u, vt);
 * x.
 */
#include "linalg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loads FILE[:TENSOR] as f64 (when it is f64) or f32. */
int la_load(const char *spec, bitnet_tensor *t)
{
    int rc = tool_load_tensor(spec, t);
    if (rc) return rc;
    if (t->info.dtype == BITNET_F64 || t->info.dtype == BITNET_F32) return EXIT_OK;
    if (bitnet_dtype_is_ternary(t->info.dtype)) {
        msg_err("%s: dtype %s is ternary; dequantize it first", spec, bitnet_dtype_name(t->info.dtype));
        bitnet_tensor_release(t);
        return EXIT_FAIL;
    }
    if ((rc = tool_cast_f32(spec, t))) bitnet_tensor_release(t);
    return rc;
}

/* batch (product of the leading axes), rows and columns of t (rank >= 2). */
static int matrix_dims(const char *op, const char *what, const bitnet_tensor *t, uint64_t *batch, uint64_t *m,
                       uint64_t *n)
{
    char b[256];
    if (t->info.rank < 2) {
        msg_err("%s: %s has shape %s; a matrix (rank 2 or more, the last two axes) is needed", op, what,
                bitnet_shape_str(&t->info, b, sizeof b));
        return EXIT_FAIL;
    }
    *batch = 1;
    for (uint32_t i = 0; i + 2 < t->info.rank; i++) *batch *= t->info.dims[i];
    *m = t->info.dims[t->info.rank - 2];
    *n = t->info.dims[t->info.rank - 1];
    return EXIT_OK;
}

/* An output like `like` with its last two axes (or one, when rows is 0) replaced. */
static int make_out(bitnet_tensor *y, const char *name, const bitnet_tensor *like, uint64_t rows, uint64_t cols,
                    int vector)
{
    memset(y, 0, sizeof *y);
    snprintf(y->info.name, sizeof y->info.name, "%s", name);
    y->info.dtype = like->info.dtype;
    y->info.rank = like->info.rank - (vector ? 1 : 0);
    for (uint32_t i = 0; i + 2 < like->info.rank; i++) y->info.dims[i] = like->info.dims[i];
    if (vector) y->info.dims[y->info.rank - 1] = cols;
    else {
        y->info.dims[y->info.rank - 2] = rows;
        y->info.dims[y->info.rank - 1] = cols;
    }
    bitnet_status st = bitnet_tensor_alloc(y);
    return st ? tool_fail(st, "output %s", name) : EXIT_OK;
}

int la_run(bitnet_backend *be, int code, int vectors, const bitnet_tensor *a, const bitnet_tensor *b,
           bitnet_tensor *out, int *nout)
{
    static const char *names[] = {"cholesky", "qr", "svd", "solve", "lstsq"};
    const char *op = names[code];
    uint64_t batch, m, n, bm = 0, nrhs = 1;
    int rc = matrix_dims(op, "the matrix", a, &batch, &m, &n), vec_rhs = 0;
    if (rc) return rc;
    const bitnet_dtype dt = a->info.dtype;
    const uint64_t k = m < n ? m : n;
    bitnet_status st = BITNET_OK;
    *nout = 0;
    if (code >= 3) { /* B: [..., m, nrhs] with A's batch, or [..., m] */
        char s1[256], s2[256];
        vec_rhs = b->info.rank + 1 == a->info.rank;
        int fits = b->info.dtype == dt && (vec_rhs || b->info.rank == a->info.rank);
        for (uint32_t i = 0; fits && i + 2 < a->info.rank; i++) fits = b->info.dims[i] == a->info.dims[i];
        if (fits) {
            bm = b->info.dims[a->info.rank - 2];
            nrhs = vec_rhs ? 1 : b->info.dims[b->info.rank - 1];
            fits = bm == m;
        }
        if (!fits) {
            msg_err("%s: B of shape %s (%s) does not fit A of shape %s (%s): B is [..., %llu, K] or [..., %llu] with "
                    "A's leading axes and dtype",
                    op, bitnet_shape_str(&b->info, s2, sizeof s2), bitnet_dtype_name(b->info.dtype),
                    bitnet_shape_str(&a->info, s1, sizeof s1), bitnet_dtype_name(dt), (unsigned long long)m,
                    (unsigned long long)m);
            return EXIT_FAIL;
        }
    }
    switch (code) {
    case 0:
        if ((rc = make_out(&out[0], "l", a, n, n, 0))) return rc;
        *nout = 1;
        st = bitnet_cholesky(be, dt, a->data, batch, n, out[0].data);
        break;
    case 1:
        if ((rc = make_out(&out[0], "q", a, m, k, 0)) || (rc = make_out(&out[1], "r", a, k, n, 0))) {
            *nout = 2;
            return rc;
        }
        *nout = 2;
        st = bitnet_qr(be, dt, a->data, batch, m, n, out[0].data, out[1].data);
        break;
    case 2:
        if ((rc = make_out(&out[0], "s", a, 0, k, 1))) return rc;
        *nout = 1;
        if (vectors) {
            if ((rc = make_out(&out[1], "u", a, m, k, 0)) || (rc = make_out(&out[2], "vt", a, k, n, 0))) {
                *nout = 3;
                return rc;
            }
            *nout = 3;
        }
        st = bitnet_svd(be, dt, a->data, batch, m, n, out[0].data, vectors ? out[1].data : NULL,
                        vectors ? out[2].data : NULL);
        break;
    default: {
        bitnet_tensor like = *b;
        if (vec_rhs) { /* shape of x: B's with the m axis replaced by n */
            if ((rc = make_out(&out[0], "x", a, 0, n, 1))) return rc;
        } else {
            like.info.dims[like.info.rank - 2] = n;
            if ((rc = make_out(&out[0], "x", &like, n, nrhs, 0))) return rc;
        }
        *nout = 1;
        st = code == 3 ? bitnet_cholesky_solve(be, dt, a->data, batch, n, b->data, nrhs, out[0].data)
                       : bitnet_lstsq(be, dt, a->data, batch, m, n, b->data, nrhs, out[0].data);
        break;
    }
    }
    if (st) return tool_fail(st, "%s", op);
    return EXIT_OK;
}

int la_square(const char *op, const bitnet_tensor *a)
{
    char b[256];
    if (a->info.rank >= 2 && a->info.dims[a->info.rank - 1] != a->info.dims[a->info.rank - 2]) {
        msg_err("%s: the matrix has shape %s; it must be square", op, bitnet_shape_str(&a->info, b, sizeof b));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}
