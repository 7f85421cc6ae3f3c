/*
 * norm.cl - LayerNorm and RMSNorm over the last axis: one work-group per
 * row; the mean, then the centred variance, through local-memory trees in
 * double where the device has it; y rounded once.
 */
#ifndef NM_WG
#define NM_WG 256 /* work-group size (a power of two) */
#endif
#ifndef NM_J
#define NM_J 16 /* rows of up to NM_J * NM_WG are read once, into registers */
#endif

typedef bn_real nm_real;

#define NM_FOR(i, lid, len) BN_ROW_FOR(i, lid, 0, len, NM_WG)

/* Sum of v over the work-group (every item gets it; BitLinear's fused
 * input norm in quantize.cl takes the same tree). */
inline nm_real nm_sum(__local nm_real *l, nm_real v, uint lid) { return bn_group_rsum(l, v, lid, NM_WG); }

/* y[at] = (x - mean) rstd (times g with a weight, plus a bias), rounded once. */
inline void nm_out(__global float *y, bn_size at, float x, nm_real mean, nm_real rstd, int has_w, float g, int has_b,
                   float bias, long perturb)
{
    nm_real v = ((nm_real)x - mean) * rstd;
    if (has_w) v *= (nm_real)g;
    if (has_b) v += (nm_real)bias;
    float f = (float)v;
    if ((long)at == perturb) f = bn_perturb(f);
    y[at] = f;
}

__kernel __attribute__((reqd_work_group_size(NM_WG, 1, 1)))
void norm_rows(__global const float *x, __global const float *w, __global const float *b, __global float *y,
               const bn_size cols, const float eps, const int rms, const int has_w, const int has_b,
               const long perturb)
{
    __local nm_real l[NM_WG];
    const bn_size row = get_group_id(0);
    const uint lid = get_local_id(0);
    __global const float *xr = x + row * cols;
    nm_real mean = 0, acc = 0;
    if (cols <= (bn_size)(NM_J * NM_WG)) {
        /* item lid holds lid, lid + NM_WG, ... (the order of the loops
         * below, so the same sums), every load in flight at once: one load
         * at a time, a row of 4096 took 14.6 us on an H200 */
        float v[NM_J], g[NM_J];
#pragma unroll
        for (int j = 0; j < NM_J; j++) {
            const bn_size i = lid + (bn_size)j * NM_WG;
            v[j] = i < cols ? xr[i] : 0.0f;
            g[j] = has_w && i < cols ? w[i] : 1.0f;
        }
        if (!rms) {
#pragma unroll
            for (int j = 0; j < NM_J; j++) acc += (nm_real)v[j];
            mean = nm_sum(l, acc, lid) / (nm_real)cols;
        }
        acc = 0;
#pragma unroll
        for (int j = 0; j < NM_J; j++) {
            const nm_real d = lid + (bn_size)j * NM_WG < cols ? (nm_real)v[j] - mean : (nm_real)0;
            acc += d * d;
        }
        const nm_real var = nm_sum(l, acc, lid) / (nm_real)cols;
        const nm_real rstd = (nm_real)1 / sqrt(var + (nm_real)eps);
#pragma unroll
        for (int j = 0; j < NM_J; j++) { /* no break: PoCL 3.1 got whole rows wrong with one */
            const bn_size i = lid + (bn_size)j * NM_WG;
            if (i < cols) nm_out(y, row * cols + i, v[j], mean, rstd, has_w, g[j], has_b, has_b ? b[i] : 0.0f, perturb);
        }
        return;
    }
    if (!rms) {
        NM_FOR(i, lid, cols) acc += (nm_real)xr[i];
        mean = nm_sum(l, acc, lid) / (nm_real)cols;
    }
    acc = 0;
    NM_FOR(i, lid, cols) {
        nm_real d = (nm_real)xr[i] - mean;
        acc += d * d;
    }
    const nm_real var = nm_sum(l, acc, lid) / (nm_real)cols;
    const nm_real rstd = (nm_real)1 / sqrt(var + (nm_real)eps);
    NM_FOR(i, lid, cols)
        nm_out(y, row * cols + i, xr[i], mean, rstd, has_w, has_w ? w[i] : 1.0f, has_b, has_b ? b[i] : 0.0f, perturb);
}
