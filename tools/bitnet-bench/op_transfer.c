/* op_transfer.c - host->device and device->host copies of n = M*K floats
 * from pageable (malloc) and pinned host memory, through
 * bitnet_backend_transfer_rate.  Not run on the CPU backend; no check. */
#include "bench.h"

#include <string.h>

static const char *const kinds[4] = {"h2d", "d2h", "h2d pinned", "d2h pinned"};

static size_t tr_variants(const bench_opts *o, char out[][BENCH_NAME], size_t max)
{
    (void)o;
    size_t n = 0;
    for (; n < 4 && n < max; n++) strcpy(out[n], kinds[n]);
    return n;
}

static void tr_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = 4 * c->m * c->k;
    *set_bytes = 0; /* the library allocates its own buffers */
}

static bitnet_status tr_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    double h2d = 0, d2h = 0;
    (void)set;
    bitnet_status st = bitnet_backend_transfer_rate(be, 4 * c->m * c->k, strstr(c->variant, "pinned") != NULL, &h2d, &d2h);
    if (st) return st;
    double gbs = strncmp(c->variant, "h2d", 3) == 0 ? h2d : d2h;
    *ms = gbs > 0 ? (double)(4 * c->m * c->k) / (gbs * 1e6) : 0.0;
    return BITNET_OK;
}

const bench_op bench_op_transfer = {
    .name = "transfer", .shape = BENCH_SHAPE_VECTOR, .device_only = 1,
    .variants = tr_variants, .sizes = tr_sizes, .setup = bench_setup_none, .run = tr_run,
};
