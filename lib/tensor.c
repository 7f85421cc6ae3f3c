/* tensor.c - tensor descriptors: element counts, payload sizes, scales. */
#include "internal.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

bitnet_status bitnet_tensor_elements(const bitnet_tensor_info *info, uint64_t *out)
{
    uint64_t n = 1;
    if (info->rank > BITNET_MAX_RANK)
        return bn_fail(BITNET_E_LIMIT, "tensor '%s': rank %u exceeds %d", info->name, info->rank, BITNET_MAX_RANK);
    for (uint32_t i = 0; i < info->rank; i++)
        if (bn_mul_u64(n, info->dims[i], &n) || n > BITNET_MAX_ELEMENTS)
            return bn_fail(BITNET_E_LIMIT, "tensor '%s': more than 2^48 elements", info->name);
    *out = n;
    return BITNET_OK;
}

void bitnet_tensor_rows_cols(const bitnet_tensor_info *info, uint64_t *rows, uint64_t *cols)
{
    uint64_t r = 1;
    uint32_t rank = info->rank > BITNET_MAX_RANK ? BITNET_MAX_RANK : info->rank;
    for (uint32_t i = 0; i + 1 < rank; i++) r *= info->dims[i];
    *rows = r;
    *cols = rank ? info->dims[rank - 1] : 1;
}

size_t bitnet_t2_row_bytes(uint64_t cols)
{
    return (size_t)((cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK) * BITNET_T2_BLOCK_BYTES;
}

size_t bitnet_t3_row_bytes(uint64_t cols) { return (size_t)((cols + BITNET_T3_PER_BYTE - 1) / BITNET_T3_PER_BYTE); }

bitnet_status bitnet_tensor_data_bytes(const bitnet_tensor_info *info, uint64_t *out)
{
    uint64_t n, rows, cols, per_row;
    bitnet_status st = bitnet_tensor_elements(info, &n);
    if (st) return st;
    if (bitnet_dtype_is_ternary(info->dtype)) {
        bitnet_tensor_rows_cols(info, &rows, &cols);
        per_row = info->dtype == BITNET_T2 ? bitnet_t2_row_bytes(cols) : bitnet_t3_row_bytes(cols);
        if (n == 0) per_row = 0;
        if (bn_mul_u64(rows, per_row, out)) return bn_fail(BITNET_E_OVERFLOW, "tensor '%s': size overflows", info->name);
        return BITNET_OK;
    }
    if (!bitnet_dtype_valid(info->dtype))
        return bn_fail(BITNET_E_FORMAT, "tensor '%s': unknown dtype code %d", info->name, (int)info->dtype);
    if (bn_mul_u64(n, bitnet_dtype_size(info->dtype), out))
        return bn_fail(BITNET_E_OVERFLOW, "tensor '%s': size overflows", info->name);
    return BITNET_OK;
}

bitnet_status bitnet_tensor_n_scales(const bitnet_tensor_info *info, uint64_t *out)
{
    uint64_t rows, cols;
    bitnet_tensor_rows_cols(info, &rows, &cols);
    switch (info->scale_kind) {
    case BITNET_SCALE_NONE: *out = 0; return BITNET_OK;
    case BITNET_SCALE_TENSOR: *out = 1; return BITNET_OK;
    case BITNET_SCALE_ROW: *out = rows; return BITNET_OK;
    case BITNET_SCALE_GROUP:
        if (info->group == 0) return bn_fail(BITNET_E_FORMAT, "tensor '%s': group size 0", info->name);
        if (bn_mul_u64(rows, (cols + info->group - 1) / info->group, out))
            return bn_fail(BITNET_E_OVERFLOW, "tensor '%s': scale count overflows", info->name);
        return BITNET_OK;
    }
    return bn_fail(BITNET_E_FORMAT, "tensor '%s': unknown scale kind %d", info->name, (int)info->scale_kind);
}

bitnet_status bitnet_tensor_info_check(const bitnet_tensor_info *info)
{
    uint64_t n;
    bitnet_status st;
    if (memchr(info->name, 0, sizeof info->name) == NULL)
        return bn_fail(BITNET_E_LIMIT, "tensor name longer than %d bytes", BITNET_MAX_NAME);
    if (!bitnet_dtype_valid(info->dtype))
        return bn_fail(BITNET_E_FORMAT, "tensor '%s': unknown dtype code %d", info->name, (int)info->dtype);
    if ((st = bitnet_tensor_elements(info, &n))) return st;
    if ((st = bitnet_tensor_data_bytes(info, &n))) return st;
    if (info->scale_kind == BITNET_SCALE_GROUP) {
        if (info->group < 1 || (info->group & (info->group - 1)))
            return bn_fail(BITNET_E_FORMAT, "tensor '%s': group size %u is not a power of two", info->name, info->group);
    } else if (info->group != 0) {
        return bn_fail(BITNET_E_FORMAT, "tensor '%s': group size %u without group scales", info->name, info->group);
    }
    if ((st = bitnet_tensor_n_scales(info, &n))) return st;
    if (bitnet_dtype_is_ternary(info->dtype) && info->scale_kind == BITNET_SCALE_NONE)
        return bn_fail(BITNET_E_FORMAT, "tensor '%s': ternary tensor without scales", info->name);
    return BITNET_OK;
}

bitnet_status bitnet_tensor_alloc(bitnet_tensor *t)
{
    uint64_t nb, ns;
    size_t bytes, sbytes;
    bitnet_status st;
    t->data = NULL;
    t->scales = NULL;
    if ((st = bitnet_tensor_data_bytes(&t->info, &nb)) || (st = bitnet_tensor_n_scales(&t->info, &ns))) return st;
    if (bn_u64_to_size(nb, &bytes) || bn_u64_to_size(ns, &sbytes) || bn_mul_size(sbytes, sizeof(float), &sbytes))
        return bn_fail(BITNET_E_OVERFLOW, "tensor '%s' does not fit in memory", t->info.name);
    t->data = calloc(bytes ? bytes : 1, 1);
    if (sbytes) t->scales = calloc(sbytes, 1);
    if (!t->data || (sbytes && !t->scales)) {
        bitnet_tensor_release(t);
        return bn_fail(BITNET_E_NOMEM, "tensor '%s': cannot allocate %zu bytes", t->info.name, bytes + sbytes);
    }
    return BITNET_OK;
}

void bitnet_tensor_release(bitnet_tensor *t)
{
    if (!t) return;
    free(t->data);
    free(t->scales);
    t->data = NULL;
    t->scales = NULL;
}

const char *bitnet_shape_str(const bitnet_tensor_info *info, char *buf, size_t size)
{
    size_t used = 0;
    if (!size) return buf;
    buf[0] = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < info->rank && i < BITNET_MAX_RANK && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRIu64, i ? ", " : "", info->dims[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

int bitnet_name_match(const char *glob, const char *name) { return fnmatch(glob, name, 0) == 0; }
