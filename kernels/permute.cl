/*
 * permute.cl - axis permutation.  permute_tile moves TILE x TILE tiles
 * through local memory between the input's last axis and the output's last
 * axis, so that both the reads and the writes are contiguous;
 * permute_gather serves the case where the last axis stays last (rows are
 * copied in order).  The host merges axes that stay together first.
 */
#ifndef TILE
#define TILE 16
#endif
#ifndef EW_BLOCK
#define EW_BLOCK 16
#endif

/* y in output order; istr[k] is the input stride of output axis k. */
__kernel void permute_gather(__global const float *x, __global float *y, const bn_size n, const uint rank,
                             const ulong8 odims8, const ulong8 istr8, const long perturb)
{
    ulong dims[8], st[8], idx[8];
    vstore8(odims8, 0, dims);
    vstore8(istr8, 0, st);
    bn_size i0 = (bn_size)get_global_id(0) * EW_BLOCK;
    if (i0 >= n) return;
    bn_size rest = i0, off = 0;
    for (int k = (int)rank - 1; k >= 0; k--) {
        idx[k] = rest % dims[k];
        rest /= dims[k];
        off += idx[k] * st[k];
    }
    for (bn_size i = i0; i < n && i < i0 + EW_BLOCK; i++) {
        float v = x[off];
        if ((long)i == perturb) v = bn_perturb(v);
        y[i] = v;
        for (int k = (int)rank - 1; k >= 0; k--) {
            off += st[k];
            if (++idx[k] < dims[k]) break;
            off -= st[k] * dims[k];
            idx[k] = 0;
        }
    }
}

/* Axis A of the input (stride sa) becomes the output's last; the input's
 * last axis L lands at output stride sl.  Batch axes (nb of them: dims,
 * input strides, output strides) are folded into dimension 1 of the grid:
 * group_id(1) = batch * tiles_a + tile along A. */
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void permute_tile(__global const float *x, __global float *y, const bn_size na, const bn_size nl, const bn_size sa,
                  const bn_size sl, const bn_size tiles_a, const uint nb, const ulong8 bdims8, const ulong8 bin8,
                  const ulong8 bout8, const long perturb)
{
    __local float tile[TILE][TILE + 1];
    ulong bd[8], bi[8], bo[8];
    vstore8(bdims8, 0, bd);
    vstore8(bin8, 0, bi);
    vstore8(bout8, 0, bo);
    const uint lx = get_local_id(0), ly = get_local_id(1);
    const bn_size l0 = (bn_size)get_group_id(0) * TILE;
    const bn_size g1 = get_group_id(1);
    const bn_size a0 = (g1 % tiles_a) * TILE;
    bn_size b = g1 / tiles_a, oin = 0, oout = 0;
    for (int k = (int)nb - 1; k >= 0; k--) {
        bn_size c = b % bd[k];
        b /= bd[k];
        oin += c * bi[k];
        oout += c * bo[k];
    }
    if (a0 + ly < na && l0 + lx < nl) tile[ly][lx] = x[oin + (a0 + ly) * sa + l0 + lx];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (a0 + lx < na && l0 + ly < nl) {
        bn_size o = oout + (l0 + ly) * sl + a0 + lx;
        float v = tile[lx][ly];
        if ((long)o == perturb) v = bn_perturb(v);
        y[o] = v;
    }
}
