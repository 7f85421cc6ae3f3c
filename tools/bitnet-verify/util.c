/* util.c - bitnet-verify helpers: whole-file loading, tensors read as numbers. */
#include "verify.h"

#include <stdlib.h>
#include <string.h>

int vt_load_all(const char *path, vt_list *l)
{
    FILE *f = NULL;
    bitnet_reader *r = NULL;
    int rc;
    memset(l, 0, sizeof *l);
    if ((rc = tool_in_open(path, &f))) return rc;
    bitnet_status st = bitnet_reader_create(&r, f, BITNET_FMT_AUTO);
    if (st) {
        rc = tool_fail(st, "%s", path);
        goto out;
    }
    for (;;) {
        bitnet_tensor t;
        memset(&t, 0, sizeof t);
        st = bitnet_reader_next(r, &t);
        if (st == BITNET_END) break;
        if (st) {
            rc = tool_fail(st, "%s", path);
            goto out;
        }
        bitnet_tensor *nt = realloc(l->t, (l->n + 1) * sizeof *nt);
        int *nu = realloc(l->used, (l->n + 1) * sizeof *nu);
        if (nt) l->t = nt;
        if (nu) l->used = nu;
        if (!nt || !nu) {
            bitnet_tensor_release(&t);
            msg_err("out of memory");
            rc = EXIT_FAIL;
            goto out;
        }
        l->t[l->n] = t;
        l->used[l->n] = 0;
        l->n++;
    }
    rc = EXIT_OK;
out:
    bitnet_reader_free(r);
    tool_in_close(f);
    if (rc) vt_list_free(l);
    return rc;
}

void vt_list_free(vt_list *l)
{
    for (size_t i = 0; i < l->n; i++) bitnet_tensor_release(&l->t[i]);
    free(l->t);
    free(l->used);
    memset(l, 0, sizeof *l);
}

bitnet_tensor *vt_find(vt_list *l, const char *name, size_t *index)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->t[i].info.name, name) == 0) {
            if (index) *index = i;
            return &l->t[i];
        }
    return NULL;
}

uint64_t vt_scale_index(bitnet_scale_kind kind, uint32_t group, uint64_t cols, uint64_t r, uint64_t c)
{
    switch (kind) {
    case BITNET_SCALE_ROW: return r;
    case BITNET_SCALE_GROUP: return r * ((cols + group - 1) / group) + c / group;
    default: return 0;
    }
}

static bitnet_status elements(const bitnet_tensor_info *info, uint64_t *n, size_t *bytes_f64)
{
    bitnet_status st = bitnet_tensor_elements(info, n);
    if (st) return st;
    if (*n > SIZE_MAX / sizeof(double)) return BITNET_E_OVERFLOW;
    *bytes_f64 = (size_t)*n * sizeof(double);
    return BITNET_OK;
}

bitnet_status vt_codes(const bitnet_tensor *t, int8_t **out)
{
    uint64_t n, rows, cols;
    size_t bytes;
    bitnet_status st = elements(&t->info, &n, &bytes);
    if (st) return st;
    *out = malloc(n ? (size_t)n : 1);
    if (!*out) return BITNET_E_NOMEM;
    bitnet_tensor_rows_cols(&t->info, &rows, &cols);
    if (n == 0) return BITNET_OK;
    if (t->info.dtype == BITNET_T2) st = bitnet_t2_unpack(t->data, rows, cols, *out);
    else if (t->info.dtype == BITNET_T3) st = bitnet_t3_unpack(t->data, rows, cols, *out);
    else st = BITNET_E_DTYPE;
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

bitnet_status vt_to_f64(const bitnet_tensor *t, double **out, uint64_t *np)
{
    uint64_t n, rows, cols;
    size_t bytes;
    bitnet_status st = elements(&t->info, &n, &bytes);
    if (st) return st;
    double *v = malloc(bytes ? bytes : 1);
    if (!v) return BITNET_E_NOMEM;
    if (bitnet_dtype_is_ternary(t->info.dtype)) {
        int8_t *q;
        if ((st = vt_codes(t, &q))) {
            free(v);
            return st;
        }
        bitnet_tensor_rows_cols(&t->info, &rows, &cols);
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                uint64_t i = r * cols + c;
                /* q is -1, 0 or 1: q * d is exact in float and in double alike */
                v[i] = q[i] * (double)t->scales[vt_scale_index(t->info.scale_kind, t->info.group, cols, r, c)];
            }
        free(q);
    } else if ((st = bitnet_cast(t->info.dtype, t->data, BITNET_F64, v, (size_t)n))) {
        free(v);
        return st;
    }
    *out = v;
    *np = n;
    return BITNET_OK;
}

const char *vt_scale_kind_name(bitnet_scale_kind k)
{
    switch (k) {
    case BITNET_SCALE_NONE: return "none";
    case BITNET_SCALE_TENSOR: return "tensor";
    case BITNET_SCALE_ROW: return "row";
    case BITNET_SCALE_GROUP: return "group";
    }
    return "?";
}

const char *vt_describe(const bitnet_tensor_info *info, char *buf, size_t size)
{
    char shape[256];
    const char *dt = bitnet_dtype_name(info->dtype);
    bitnet_shape_str(info, shape, sizeof shape);
    if (info->scale_kind == BITNET_SCALE_GROUP)
        snprintf(buf, size, "%s %s scales=group:%u", dt ? dt : "?", shape, info->group);
    else if (info->scale_kind != BITNET_SCALE_NONE)
        snprintf(buf, size, "%s %s scales=%s", dt ? dt : "?", shape, vt_scale_kind_name(info->scale_kind));
    else
        snprintf(buf, size, "%s %s", dt ? dt : "?", shape);
    return buf;
}

int vt_same_shape(const bitnet_tensor_info *a, const bitnet_tensor_info *b)
{
    if (a->rank != b->rank) return 0;
    for (uint32_t i = 0; i < a->rank && i < BITNET_MAX_RANK; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}
