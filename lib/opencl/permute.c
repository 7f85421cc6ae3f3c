/*
 * permute.c - OpenCL host code of permute (kernels/permute.cl): tiles in
 * local memory when the last axis moves, an in-order gather otherwise.
 * bn_ocl_permute_buf also serves reduce.c (reduced axes moved last).
 */
#include "tensor_ops.h"

#define TILE 16

bitnet_status bn_ocl_permute_buf(bn_ocl *o, cl_mem x, const bitnet_shape *s, const uint32_t *perm, cl_mem y,
                                 int64_t perturb)
{
    bn_pplan p;
    uint64_t sin[BITNET_MAX_RANK], sout[BITNET_MAX_RANK], st = 1, n;
    bn_permute_plan(s, perm, &p);
    for (uint32_t k = p.rank; k-- > 0;) { sin[k] = st; st *= p.dims[k]; }
    n = st;
    st = 1;
    for (uint32_t k = p.rank; k-- > 0;) { sout[p.perm[k]] = st; st *= p.dims[p.perm[k]]; }
    const uint32_t last = p.rank - 1;
    cl_long pt = perturb;
    cl_kernel k;
    bitnet_status r;
    char opts[256];
    snprintf(opts, sizeof opts, "%s -DTILE=%d", bn_tops_options(o), TILE);
    if (p.perm[last] == last) {
        uint64_t od[BITNET_MAX_RANK], is[BITNET_MAX_RANK];
        for (uint32_t i = 0; i < p.rank; i++) { od[i] = p.dims[p.perm[i]]; is[i] = sin[p.perm[i]]; }
        if ((r = bn_ocl_kernel(o, "permute", "permute_gather", opts, &k))) return r;
        cl_ulong cn = n;
        cl_uint rank = p.rank;
        cl_ulong8 d8 = bn_tops_u8(od, p.rank), s8 = bn_tops_u8(is, p.rank);
        size_t block = bn_ocl_get_caps(o)->is_gpu ? 4 : 64, wg = bn_tops_wg(o, k, 256);
        size_t global = bn_tops_round((n + block - 1) / block, wg);
        r = bn_ocl_args(o, k, 7, sizeof x, &x, sizeof y, &y, sizeof cn, &cn, sizeof rank, &rank, sizeof d8, &d8,
                        sizeof s8, &s8, sizeof pt, &pt);
        if (!r) r = bn_ocl_run(o, k, 1, &global, &wg, "permute");
        return r;
    }
    const uint32_t a = p.perm[last];
    uint64_t bd[BITNET_MAX_RANK], bi[BITNET_MAX_RANK], bo[BITNET_MAX_RANK], nbatch = 1;
    uint32_t nb = 0;
    for (uint32_t i = 0; i < last; i++)
        if (i != a) { bd[nb] = p.dims[i]; bi[nb] = sin[i]; bo[nb] = sout[i]; nbatch *= p.dims[i]; nb++; }
    if ((r = bn_ocl_kernel(o, "permute", "permute_tile", opts, &k))) return r;
    if (bn_ocl_kernel_wg(o, k) < TILE * TILE)
        return bn_fail(BITNET_E_DEVICE, "permute: the device takes work-groups of %zu < %d", bn_ocl_kernel_wg(o, k), TILE * TILE);
    cl_ulong na = p.dims[a], nl = p.dims[last], sa = sin[a], sl = sout[last];
    cl_ulong ta = (na + TILE - 1) / TILE, tl = (nl + TILE - 1) / TILE;
    cl_uint cnb = nb;
    cl_ulong8 d8 = bn_tops_u8(bd, nb), i8 = bn_tops_u8(bi, nb), o8 = bn_tops_u8(bo, nb);
    size_t local[2] = {TILE, TILE}, global[2] = {(size_t)tl * TILE, (size_t)(nbatch * ta) * TILE};
    r = bn_ocl_args(o, k, 12, sizeof x, &x, sizeof y, &y, sizeof na, &na, sizeof nl, &nl, sizeof sa, &sa, sizeof sl,
                    &sl, sizeof ta, &ta, sizeof cnb, &cnb, sizeof d8, &d8, sizeof i8, &i8, sizeof o8, &o8, sizeof pt, &pt);
    if (!r) r = bn_ocl_run(o, k, 2, global, local, "permute");
    return r;
}

bitnet_status bn_ocl_permute(void *ctx, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y)
{
    bn_ocl *o = ctx;
    uint64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++) n *= s->dims[i];
    if (n == 0) return BITNET_OK;
    bn_ocl_arg ax = {0}, ay = {0};
    bitnet_status st = bn_ocl_in(o, x, n * sizeof(float), &ax);
    if (!st) st = bn_ocl_out(o, y, n * sizeof(float), &ay);
    if (!st) st = bn_ocl_permute_buf(o, ax.m, s, perm, ay.m, bn_test_perturb("permute") ? (int64_t)(n / 2) : -1);
    st = bn_ocl_done(o, &ay, st);
    return bn_ocl_done(o, &ax, st);
}
