/*
 * op_bitlinear.c - the public BitLinear and float-product calls: argument
 * checks (shared with the _ref definitions), then dispatch to a backend.
 */
#include "cpu/bitlinear.h"

#include <math.h>

uint64_t bn_bitlinear_n_scales(const bitnet_ternary_matrix *w)
{
    switch (w->kind) {
    case BITNET_SCALE_TENSOR: return 1;
    case BITNET_SCALE_ROW: return w->out;
    case BITNET_SCALE_GROUP: return w->out * ((w->in + w->group - 1) / w->group);
    default: return 0;
    }
}

static bitnet_status check_act(bitnet_act act, const char *op)
{
    if ((unsigned)act >= BITNET_ACT_COUNT) return bn_fail(BITNET_E_INVALID, "%s: unknown activation %d", op, (int)act);
    return BITNET_OK;
}

bitnet_status bn_bitlinear_check(const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io)
{
    if (!w || !io || !w->t2 || !w->d) return bn_fail(BITNET_E_INVALID, "bitlinear: NULL weights, scales or io");
    if (w->out == 0 || w->in == 0 || io->tokens == 0)
        return bn_fail(BITNET_E_SHAPE, "bitlinear: empty shape (out %llu, in %llu, tokens %llu)",
                       (unsigned long long)w->out, (unsigned long long)w->in, (unsigned long long)io->tokens);
    if (w->in > BN_BITLINEAR_MAX_IN)
        return bn_fail(BITNET_E_LIMIT, "bitlinear: in = %llu exceeds %llu (int32 accumulators)",
                       (unsigned long long)w->in, (unsigned long long)BN_BITLINEAR_MAX_IN);
    switch (w->kind) {
    case BITNET_SCALE_TENSOR: case BITNET_SCALE_ROW: break;
    case BITNET_SCALE_GROUP:
        if (w->group < 32 || (w->group & (w->group - 1)))
            return bn_fail(BITNET_E_INVALID, "bitlinear: group size %u is not a power of two >= 32", w->group);
        break;
    default:
        return bn_fail(BITNET_E_INVALID, "bitlinear: weights need a tensor, row or group scale (kind %d)", (int)w->kind);
    }
    const int in_float = io->x != NULL, in_q = io->xq != NULL || io->xs != NULL;
    if (in_float == in_q || (in_q && (!io->xq || !io->xs)))
        return bn_fail(BITNET_E_INVALID, "bitlinear: give either x or both xq and xs");
    const int out_float = io->y != NULL, out_q = io->yq != NULL || io->ys != NULL;
    if (out_float == out_q || (out_q && (!io->yq || !io->ys)))
        return bn_fail(BITNET_E_INVALID, "bitlinear: give either y or both yq and ys");
    if (io->norm && !in_float) return bn_fail(BITNET_E_INVALID, "bitlinear: norm needs float input x");
    if (io->norm && (!(io->norm_eps >= 0) || isinf(io->norm_eps)))
        return bn_fail(BITNET_E_INVALID, "bitlinear: norm_eps %g must be finite and >= 0", (double)io->norm_eps);
    bitnet_status st = check_act(io->act, "bitlinear");
    if (st) return st;
    uint64_t n, rb = bitnet_t2_row_bytes(w->in);
    if (bn_mul_u64(w->out, rb, &n) || n > SIZE_MAX || bn_mul_u64(io->tokens, w->in, &n) || n > SIZE_MAX / sizeof(float) ||
        bn_mul_u64(io->tokens, w->out, &n) || n > SIZE_MAX / sizeof(float) ||
        bn_mul_u64(io->tokens, bitnet_t2_row_bytes(w->in), &n) || n > SIZE_MAX / 2)
        return bn_fail(BITNET_E_OVERFLOW, "bitlinear: sizes overflow (out %llu, in %llu, tokens %llu)",
                       (unsigned long long)w->out, (unsigned long long)w->in, (unsigned long long)io->tokens);
    if (io->xs && !bn_is_device_ptr(io->xs))
        for (uint64_t t = 0; t < io->tokens; t++)
            if (!(io->xs[t] > 0.0f) || !isfinite(io->xs[t]))
                return bn_fail(BITNET_E_NUMERIC, "bitlinear: activation scale s[%llu] = %g is not finite and positive",
                               (unsigned long long)t, (double)io->xs[t]);
    return BITNET_OK;
}

uint64_t bn_bitlinear_bytes(const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io)
{
    const uint64_t wb = w->out * bitnet_t2_row_bytes(w->in) + 4 * bn_bitlinear_n_scales(w);
    const uint64_t xb = io->tokens * w->in * (io->x ? 4 : 1);
    const uint64_t yb = io->tokens * w->out * (io->y ? 4 : 1);
    return wb + xb + yb + (io->norm ? 4 * w->in : 0) + (io->residual ? 4 * io->tokens * w->out : 0);
}

bitnet_status bitnet_bitlinear(bitnet_backend *be, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io)
{
    if (!be) return bn_fail(BITNET_E_INVALID, "bitlinear: NULL backend");
    bitnet_status st = bn_bitlinear_check(w, io);
    if (st) return st;
    bitnet_ternary_matrix wc = *w;
    bitnet_bitlinear_io ioc = *io;
    const uint64_t T = io->tokens;
    bn_operand opd[] = {BN_IN(wc.t2, w->out * bitnet_t2_row_bytes(w->in)), BN_IN(wc.d, bn_bitlinear_n_scales(w) * 4),
                        BN_IN(ioc.x, T * w->in * 4),  BN_IN(ioc.xq, T * w->in), BN_IN(ioc.xs, T * 4),
                        BN_IN(ioc.bias, w->out * 4), BN_OUT(ioc.y, T * w->out * 4), BN_OUT(ioc.yq, T * w->out),
                        BN_OUT(ioc.ys, T * 4),        BN_IN(ioc.norm, w->in * 4),
                        BN_IN(ioc.residual, T * w->out * 4)};
    BN_DISPATCH(st, be, bitlinear, "bitlinear", bn_bitlinear_bytes(w, io), opd, &wc, &ioc);
    return st;
}

bitnet_status bn_matmul_check(const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                              const float *y, bitnet_act act)
{
    if (!x || !w || !y) return bn_fail(BITNET_E_INVALID, "matmul: NULL x, w or y");
    if (!tokens || !in || !out)
        return bn_fail(BITNET_E_SHAPE, "matmul: empty shape (tokens %llu, in %llu, out %llu)", (unsigned long long)tokens,
                       (unsigned long long)in, (unsigned long long)out);
    uint64_t n;
    if (bn_mul_u64(tokens, in, &n) || n > SIZE_MAX / sizeof(float) || n > INT32_MAX || bn_mul_u64(out, in, &n) ||
        n > SIZE_MAX / sizeof(float) || n > INT32_MAX || bn_mul_u64(tokens, out, &n) || n > SIZE_MAX / sizeof(float) ||
        n > INT32_MAX)
        return bn_fail(BITNET_E_OVERFLOW, "matmul: sizes overflow or exceed the BLAS int range (tokens %llu, in %llu, out %llu)",
                       (unsigned long long)tokens, (unsigned long long)in, (unsigned long long)out);
    return check_act(act, "matmul");
}

bitnet_status bitnet_matmul_f32(bitnet_backend *be, const float *x, uint64_t tokens, uint64_t in, const float *w,
                                uint64_t out, const float *bias, bitnet_act act, float *y)
{
    if (!be) return bn_fail(BITNET_E_INVALID, "matmul: NULL backend");
    bitnet_status st = bn_matmul_check(x, tokens, in, w, out, y, act);
    if (st) return st;
    const uint64_t bytes = 4 * (tokens * in + out * in + tokens * out + (bias ? out : 0));
    bn_operand opd[] = {BN_IN(x, tokens * in * 4), BN_IN(w, out * in * 4), BN_IN(bias, out * 4), BN_OUT(y, tokens * out * 4)};
    BN_DISPATCH(st, be, matmul_f32, "matmul_f32", bytes, opd, x, tokens, in, w, out, bias, act, y);
    return st;
}
