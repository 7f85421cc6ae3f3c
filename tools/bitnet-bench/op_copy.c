/* op_copy.c - the roofline itself: bitnet_backend_bandwidth over n = M*K
 * floats (4n bytes).  Variant copy moves 8n bytes (read + write), variant
 * read moves 4n.  The library times its own kernels; no check. */
#include "bench.h"

#include <string.h>

static size_t copy_variants(const bench_opts *o, char out[][BENCH_NAME], size_t max)
{
    (void)o;
    if (max < 2) return 0;
    strcpy(out[0], "copy");
    strcpy(out[1], "read");
    return 2;
}

static int is_copy(const bench_case *c) { return strcmp(c->variant, "read") != 0; }

static void copy_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = 4 * c->m * c->k * (is_copy(c) ? 2 : 1);
    *set_bytes = 0; /* the library allocates its own buffers */
}

static bitnet_status copy_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    double copy_gbs = 0, read_gbs = 0;
    uint64_t moved, unused;
    (void)set;
    bitnet_status st = bitnet_backend_bandwidth(be, 4 * c->m * c->k, &copy_gbs, &read_gbs);
    if (st) return st;
    copy_sizes(c, &moved, &unused);
    double gbs = is_copy(c) ? copy_gbs : read_gbs;
    *ms = gbs > 0 ? (double)moved / (gbs * 1e6) : 0.0;
    return BITNET_OK;
}

const bench_op bench_op_copy = {
    .name = "copy", .shape = BENCH_SHAPE_VECTOR,
    .variants = copy_variants, .sizes = copy_sizes, .setup = bench_setup_none, .run = copy_run,
};
