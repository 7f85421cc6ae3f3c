/*
 * hf_bitnet.c - the Hugging Face BitNet checkpoint layout.
 *
 * The rule, from transformers src/transformers/integrations/bitnet.py:
 * unpack_weights() makes the unpacked tensor [4P, in] from a packed u8
 * [P, in] by, for i = 0..3, unpacked[i*P : (i+1)*P] = (packed >> 2i) & 3,
 * then subtracts 1 (codes 0, 1, 2 are -1, 0, +1).  The scale: class
 * AutoBitLinear (offline quantization, the published checkpoints) computes
 * F.linear(x, q) * weight_scale, so w = q * s; class BitLinear computes
 * y / (input_scale * weight_scale) in post_quant_process(), so w = q / s.
 * The checkpoint's config (quantization_config.linear_class) says which; the
 * caller chooses.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

static bitnet_status check_pair(const bitnet_tensor *packed, const bitnet_tensor *scale, uint64_t *rows,
                                uint64_t *cols, uint64_t *ns, float **s)
{
    bitnet_status st;
    const char *name = packed->info.name;
    if (packed->info.dtype != BITNET_U8 || packed->info.rank != 2 || packed->info.scale_kind != BITNET_SCALE_NONE)
        return bn_fail(BITNET_E_DTYPE, "tensor '%s': the packed BitNet layout is a 2-D u8 tensor", name);
    if (!bitnet_dtype_is_float(scale->info.dtype))
        return bn_fail(BITNET_E_DTYPE, "tensor '%s': its scale '%s' is %s, not a float", name, scale->info.name,
                       bitnet_dtype_name(scale->info.dtype));
    if (bn_mul_u64(packed->info.dims[0], 4, rows)) return bn_fail(BITNET_E_OVERFLOW, "tensor '%s': rows", name);
    *cols = packed->info.dims[1];
    if ((st = bitnet_tensor_elements(&scale->info, ns))) return st;
    if (*ns != 1 && *ns != *rows)
        return bn_fail(BITNET_E_SHAPE, "tensor '%s': %llu scales in '%s' (1 or %llu, one per output row)", name,
                       (unsigned long long)*ns, scale->info.name, (unsigned long long)*rows);
    if (!(*s = malloc((size_t)*ns * sizeof **s))) return bn_fail(BITNET_E_NOMEM, "tensor '%s'", name);
    if ((st = bitnet_cast(scale->info.dtype, scale->data, BITNET_F32, *s, (size_t)*ns))) {
        free(*s);
        return st;
    }
    for (uint64_t i = 0; i < *ns; i++)
        if (!isfinite((*s)[i]) || (*s)[i] == 0) {
            free(*s);
            return bn_fail(BITNET_E_NUMERIC, "tensor '%s': scale %llu is not finite and nonzero", name, (unsigned long long)i);
        }
    return BITNET_OK;
}

/* Codes of row r (of 4P) into q; returns 0, or 1 on a code 3 (column in *bad). */
static int unpack_row(const uint8_t *packed, uint64_t p_rows, uint64_t cols, uint64_t r, int8_t *q, uint64_t *bad)
{
    const uint8_t *src = packed + (r % p_rows) * cols;
    unsigned shift = (unsigned)(2 * (r / p_rows));
    for (uint64_t c = 0; c < cols; c++) {
        unsigned code = (src[c] >> shift) & 3u;
        if (code == 3) {
            *bad = c;
            return 1;
        }
        q[c] = (int8_t)((int)code - 1);
    }
    return 0;
}

static bitnet_status convert(const bitnet_tensor *packed, const bitnet_tensor *scale, bitnet_hf_scale_op op,
                             bitnet_tensor *out, int to_float)
{
    bitnet_status st;
    uint64_t rows = 0, cols = 0, ns = 0, bad = 0;
    float *s = NULL;
    int8_t *q = NULL;
    if (!packed || !scale || !out || (op != BITNET_HF_SCALE_MUL && op != BITNET_HF_SCALE_DIV))
        return bn_fail(BITNET_E_INVALID, "hf bitnet: bad argument");
    memset(out, 0, sizeof *out);
    if ((st = check_pair(packed, scale, &rows, &cols, &ns, &s))) return st;
    out->info = packed->info;
    out->info.dims[0] = rows;
    out->info.dtype = to_float ? BITNET_F32 : BITNET_T2;
    out->info.scale_kind = to_float ? BITNET_SCALE_NONE : ns == 1 ? BITNET_SCALE_TENSOR : BITNET_SCALE_ROW;
    if ((st = bitnet_tensor_alloc(out))) goto out;
    if (rows && cols && !(q = malloc((size_t)cols))) { /* no rows: no row buffer */
        st = bn_fail(BITNET_E_NOMEM, "tensor '%s'", packed->info.name);
        goto out;
    }
    for (uint64_t r = 0; r < rows && q; r++) {
        if (unpack_row(packed->data, packed->info.dims[0], cols, r, q, &bad)) {
            st = bn_fail(BITNET_E_FORMAT, "tensor '%s': code 3 (invalid) for row %llu column %llu (packed row %llu, bits %u-%u)",
                         packed->info.name, (unsigned long long)r, (unsigned long long)bad,
                         (unsigned long long)(r % packed->info.dims[0]), (unsigned)(2 * (r / packed->info.dims[0])),
                         (unsigned)(2 * (r / packed->info.dims[0]) + 1));
            goto out;
        }
        float sr = s[ns == 1 ? 0 : r];
        if (to_float) {
            float *w = (float *)out->data + r * cols;
            for (uint64_t c = 0; c < cols; c++) w[c] = op == BITNET_HF_SCALE_MUL ? (float)q[c] * sr : (float)q[c] / sr;
        } else if ((st = bitnet_t2_pack(q, 1, cols, (uint8_t *)out->data + r * bitnet_t2_row_bytes(cols)))) {
            goto out;
        }
    }
    if (!to_float)
        for (uint64_t i = 0; i < ns; i++) out->scales[i] = op == BITNET_HF_SCALE_MUL ? s[i] : 1.0f / s[i];
out:
    free(s);
    free(q);
    if (st) bitnet_tensor_release(out);
    return st;
}

bitnet_status bitnet_hf_unpack(const bitnet_tensor *packed, const bitnet_tensor *scale, bitnet_hf_scale_op op,
                               bitnet_tensor *out)
{
    return convert(packed, scale, op, out, 0);
}

bitnet_status bitnet_hf_dequantize(const bitnet_tensor *packed, const bitnet_tensor *scale, bitnet_hf_scale_op op,
                                   bitnet_tensor *out)
{
    return convert(packed, scale, op, out, 1);
}
