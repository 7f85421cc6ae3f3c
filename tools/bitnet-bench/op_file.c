/* op_file.c - .bnt throughput: one T2 [M x K] tensor with per-row scales
 * written through bitnet_bnt_writer at zlib levels 0, 1, 6 with 1 and 2
 * compression threads, and read back through bitnet_bnt_reader (CRCs
 * verified), on a temporary file (through the page cache).  GB/s counts the
 * raw tensor bytes.  Check: the bytes read back equal the bytes written. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint8_t *raw, *back;   /* payload then scales, as stored */
    uint64_t raw_bytes, payload;
    FILE *f;
    char path[4096];
    int level, threads, write;
} file_state;

static size_t file_variants(const bench_opts *o, char out[][BENCH_NAME], size_t max)
{
    static const int levels[3] = {0, 1, 6};
    size_t n = 0;
    (void)o;
    for (int l = 0; l < 3; l++) {
        for (int t = 1; t <= 2 && n < max; t++) snprintf(out[n++], BENCH_NAME, "write z%d t%d", levels[l], t);
        if (n < max) snprintf(out[n++], BENCH_NAME, "read z%d", levels[l]);
    }
    return n;
}

static void file_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = c->m * bitnet_t2_row_bytes(c->k) + 4 * c->m;
    *set_bytes = 2 * *moved; /* source and read-back buffers, not rotated */
}

static void file_teardown(bench_case *c)
{
    file_state *s = c->st;
    if (!s) return;
    if (s->f) fclose(s->f);
    if (*s->path) unlink(s->path);
    free(s->raw);
    free(s->back);
    bench_state_free(c, 0);
}

static void tensor_of(const bench_case *c, file_state *s, bitnet_tensor *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->info.name, sizeof t->info.name, "bench.weight");
    t->info.dtype = BITNET_T2;
    t->info.rank = 2;
    t->info.dims[0] = c->m, t->info.dims[1] = c->k;
    t->info.scale_kind = BITNET_SCALE_ROW;
    t->data = s->raw;
    t->scales = (float *)(void *)(s->raw + s->payload);
}

static bitnet_status file_write(bench_case *c, file_state *s)
{
    bitnet_bnt_writer_opts wo = {.level = s->level, .threads = s->threads};
    bitnet_bnt_writer *w = NULL;
    bitnet_tensor t;
    bitnet_status st;
    tensor_of(c, s, &t);
    rewind(s->f);
    if (ftruncate(fileno(s->f), 0) != 0) return BITNET_E_IO;
    if (!(st = bitnet_bnt_writer_create(&w, s->f, &wo)) && !(st = bitnet_bnt_writer_put(w, &t)))
        st = bitnet_bnt_writer_finish(w);
    bitnet_bnt_writer_free(w);
    if (!st && fflush(s->f) != 0) st = BITNET_E_IO;
    return st;
}

static bitnet_status file_read(file_state *s)
{
    bitnet_bnt_reader *r = NULL;
    bitnet_tensor_info info;
    bitnet_status st;
    size_t got = 0, total = 0;
    rewind(s->f);
    if (!(st = bitnet_bnt_reader_create(&r, s->f)) && !(st = bitnet_bnt_reader_next(r, &info))) {
        uint8_t extra;
        for (;;) {
            size_t room = (size_t)(s->raw_bytes - total);
            if ((st = bitnet_bnt_reader_read(r, room ? s->back + total : &extra, room < (1u << 20) ? (room ? room : 1) : (1u << 20), &got)) || got == 0)
                break;
            if (!room) { st = BITNET_E_FORMAT; break; } /* more bytes than written */
            total += got;
        }
        if (!st && total != s->raw_bytes) st = BITNET_E_TRUNCATED;
        if (!st) st = bitnet_bnt_reader_next(r, &info) == BITNET_END ? BITNET_OK : BITNET_E_FORMAT;
    }
    bitnet_bnt_reader_free(r);
    return st;
}

static bitnet_status file_setup(bench_case *c)
{
    file_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    s->write = strncmp(c->variant, "write", 5) == 0;
    if (sscanf(c->variant + (s->write ? 5 : 4), " z%d t%d", &s->level, &s->threads) < 1) return BITNET_E_INVALID;
    if (s->threads < 1) s->threads = 1;
    s->payload = c->m * bitnet_t2_row_bytes(c->k);
    s->raw_bytes = s->payload + 4 * c->m;
    s->raw = malloc(s->raw_bytes + 1);
    s->back = malloc(s->raw_bytes + 1);
    if (!s->raw || !s->back) return BITNET_E_NOMEM;
    bench_fill_t2(s->raw, c->m, c->k, c->opts->seed);
    bench_fill_f32((float *)(void *)(s->raw + s->payload), c->m, c->opts->seed + 1, 0.01f, 0.1f);
    snprintf(s->path, sizeof s->path, "%s/bitnet-bench.XXXXXX", c->opts->tmpdir);
    int fd = mkstemp(s->path);
    if (fd < 0) {
        *s->path = 0;
        return BITNET_E_IO;
    }
    if (!(s->f = fdopen(fd, "w+b"))) {
        close(fd);
        return BITNET_E_IO;
    }
    if (!s->write) {
        int keep = s->threads;
        s->threads = 2;
        bitnet_status st = file_write(c, s);
        s->threads = keep;
        return st;
    }
    return BITNET_OK;
}

static bitnet_status file_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    file_state *s = c->st;
    (void)be, (void)set;
    double t0 = bench_now_ms();
    bitnet_status st = s->write ? file_write(c, s) : file_read(s);
    *ms = bench_now_ms() - t0;
    return st;
}

static int file_check(bench_case *c, char *why, size_t wn)
{
    file_state *s = c->st;
    bitnet_status st;
    if (s->write && (st = file_read(s))) {
        snprintf(why, wn, "reading back failed: %s (%s)", bitnet_strerror(st), bitnet_error_detail());
        return 1;
    }
    return bench_check_bytes(s->back, s->raw, s->raw_bytes, "bytes read back", why, wn);
}

const bench_op bench_op_file = {
    .name = "file", .shape = BENCH_SHAPE_MATRIX, .host_only = 1,
    .variants = file_variants, .sizes = file_sizes, .setup = file_setup, .run = file_run,
    .check = file_check, .teardown = file_teardown,
};
