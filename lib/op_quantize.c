/*
 * op_quantize.c - public entry points of quantization and dequantization:
 * argument checks with checked sizes (the same checks as the _ref
 * definitions in lib/cpu/quantize.c), then BN_DISPATCH to the backend.
 * Also the reconstruction statistics the tools report.
 */
#include "cpu/quantize.h"

#include <stdlib.h>

/* Checks shared by the four calls; bytes gets what the op reads + writes. */
static bitnet_status common_check(const char *op, bitnet_backend *be, const void *in, const void *out,
                                  const void *sc, uint64_t rows, uint64_t cols, bitnet_scale_kind kind,
                                  uint32_t group, size_t in_elem, size_t out_elem, int out_t2, uint64_t *nsc,
                                  uint64_t *bytes)
{
    if (!be) return bn_fail(BITNET_E_INVALID, "%s: NULL backend", op);
    bitnet_status st = bn_quant_check(op, rows, cols, kind, group, nsc);
    if (st) return st;
    uint64_t n = rows * cols, t2 = rows * (uint64_t)bitnet_t2_row_bytes(cols);
    if ((n && (!in || !out)) || (*nsc && !sc)) return bn_fail(BITNET_E_INVALID, "%s: NULL buffer", op);
    /* n <= 2^48 and t2 bytes <= SIZE_MAX / 4 (bn_quant_check): no overflow below */
    *bytes = n * (in_elem + out_elem) + (out_t2 ? t2 : 0) + *nsc * sizeof(float);
    if (n * (in_elem > out_elem ? in_elem : out_elem) > SIZE_MAX)
        return bn_fail(BITNET_E_OVERFLOW, "%s: size overflows", op);
    return BITNET_OK;
}

bitnet_status bitnet_quantize_weights(bitnet_backend *be, const float *w, uint64_t rows, uint64_t cols,
                                      bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d)
{
    uint64_t nsc, bytes;
    bitnet_status st = common_check("quantize_weights", be, w, out_t2, d, rows, cols, kind, group, 4, 0, 1, &nsc, &bytes);
    if (st) return st;
    bn_operand opd[] = {BN_IN(w, rows * cols * 4), BN_OUT(out_t2, rows * bitnet_t2_row_bytes(cols)), BN_OUT(d, nsc * 4)};
    BN_DISPATCH(st, be, quantize_weights, "quantize_weights", bytes, opd, w, rows, cols, kind, group, out_t2, d);
    return st;
}

bitnet_status bitnet_quantize_acts(bitnet_backend *be, const float *x, uint64_t rows, uint64_t cols, int8_t *q,
                                   float *s)
{
    uint64_t nsc, bytes;
    bitnet_status st =
        common_check("quantize_acts", be, x, q, s, rows, cols, BITNET_SCALE_ROW, 0, 4, 1, 0, &nsc, &bytes);
    if (st) return st;
    bn_operand opd[] = {BN_IN(x, rows * cols * 4), BN_OUT(q, rows * cols), BN_OUT(s, rows * 4)};
    BN_DISPATCH(st, be, quantize_acts, "quantize_acts", bytes, opd, x, rows, cols, q, s);
    return st;
}

bitnet_status bitnet_dequantize_weights(bitnet_backend *be, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w)
{
    uint64_t nsc, bytes;
    bitnet_status st = common_check("dequantize_weights", be, t2, w, d, rows, cols, kind, group, 0, 4, 1, &nsc, &bytes);
    if (st) return st;
    if (!bn_is_device_ptr(d) && (st = bn_dequant_check_scales("dequantize_weights", d, nsc, 0))) return st;
    bn_operand opd[] = {BN_IN(t2, rows * bitnet_t2_row_bytes(cols)), BN_IN(d, nsc * 4), BN_OUT(w, rows * cols * 4)};
    BN_DISPATCH(st, be, dequantize_weights, "dequantize_weights", bytes, opd, t2, rows, cols, kind, group, d, w);
    return st;
}

bitnet_status bitnet_dequantize_acts(bitnet_backend *be, const int8_t *q, uint64_t rows, uint64_t cols, const float *s,
                                     float *x)
{
    uint64_t nsc, bytes;
    bitnet_status st =
        common_check("dequantize_acts", be, q, x, s, rows, cols, BITNET_SCALE_ROW, 0, 1, 4, 0, &nsc, &bytes);
    if (st) return st;
    if (!bn_is_device_ptr(s) && (st = bn_dequant_check_scales("dequantize_acts", s, rows, 1))) return st;
    bn_operand opd[] = {BN_IN(q, rows * cols), BN_IN(s, rows * 4), BN_OUT(x, rows * cols * 4)};
    BN_DISPATCH(st, be, dequantize_acts, "dequantize_acts", bytes, opd, q, rows, cols, s, x);
    return st;
}
