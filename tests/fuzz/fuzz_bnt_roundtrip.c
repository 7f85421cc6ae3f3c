/*
 * fuzz_bnt_roundtrip.c - structure-aware libFuzzer harness for the .bnt
 * writer and reader: the input is not a file but a recipe.  It draws writer
 * options (zlib level, chunk size, index or not), metadata, and up to eight
 * tensors of every dtype (ternary and scaled ones included: any codes,
 * any scales) with random names, shapes and bytes, writes them into memory,
 * reads the container back through an unseekable stream and through
 * bitnet_reader_find, and aborts unless read(write(x)) == x exactly: names,
 * dtypes, shapes, scale kinds, every payload and scale byte, the metadata.
 */
#include "bitnet.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} recipe;

static uint32_t draw(recipe *r, uint32_t below)
{
    uint32_t v = 0;
    for (int i = 0; i < 4 && r->n; i++, r->p++, r->n--) v = v << 8 | *r->p;
    return below ? v % below : v;
}

static void fill(recipe *r, uint8_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r->n) {
            dst[i] = *r->p++;
            r->n--;
        } else {
            dst[i] = (uint8_t)(i * 131u + 7u); /* recipe used up: any bytes do */
        }
    }
}

#define MAXT 8
static const bitnet_dtype dtypes[] = {BITNET_F32, BITNET_F16, BITNET_BF16, BITNET_F64, BITNET_I8,  BITNET_I16,
                                      BITNET_I32, BITNET_U8,  BITNET_I64,  BITNET_T2,  BITNET_T3};

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "round trip broken: %s\n", what);
        abort();
    }
}

/* A random, valid tensor (0 when the draw is not a valid tensor). */
static int make_tensor(recipe *r, bitnet_tensor *t, int k)
{
    memset(t, 0, sizeof *t);
    bitnet_tensor_info *in = &t->info;
    snprintf(in->name, sizeof in->name, "t%d.%u", k, draw(r, 1000));
    in->dtype = dtypes[draw(r, sizeof dtypes / sizeof dtypes[0])];
    in->rank = draw(r, 4);
    if (bitnet_dtype_is_ternary(in->dtype) && in->rank == 0) in->rank = 1;
    for (uint32_t i = 0; i < in->rank; i++) in->dims[i] = draw(r, i + 1 == in->rank ? 300 : 6);
    uint32_t sk = draw(r, 4);
    if (bitnet_dtype_is_ternary(in->dtype) || in->dtype == BITNET_I8) {
        in->scale_kind = (bitnet_scale_kind)sk;
        if (sk == BITNET_SCALE_GROUP) in->group = 32u << draw(r, 3);
    }
    if (bitnet_tensor_info_check(in) != BITNET_OK) return 0;
    uint64_t bytes, ns;
    if (bitnet_tensor_data_bytes(in, &bytes) || bitnet_tensor_n_scales(in, &ns) || bytes > (1u << 20)) return 0;
    if (bitnet_tensor_alloc(t) != BITNET_OK) return 0;
    fill(r, t->data, (size_t)bytes);
    for (uint64_t i = 0; i < ns; i++) t->scales[i] = (float)(draw(r, 2000) + 1) / 64.0f;
    return 1;
}

static void same(const bitnet_tensor *a, const bitnet_tensor *b)
{
    check(strcmp(a->info.name, b->info.name) == 0, "name");
    check(a->info.dtype == b->info.dtype, "dtype");
    check(a->info.rank == b->info.rank, "rank");
    check(memcmp(a->info.dims, b->info.dims, a->info.rank * sizeof a->info.dims[0]) == 0, "dims");
    check(a->info.scale_kind == b->info.scale_kind && a->info.group == b->info.group, "scale kind");
    uint64_t bytes, ns;
    check(bitnet_tensor_data_bytes(&a->info, &bytes) == BITNET_OK, "size");
    check(bitnet_tensor_n_scales(&a->info, &ns) == BITNET_OK, "scales");
    check(bytes == 0 || memcmp(a->data, b->data, (size_t)bytes) == 0, "payload bytes");
    check(ns == 0 || memcmp(a->scales, b->scales, (size_t)ns * sizeof(float)) == 0, "scale bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    recipe r = {data, size};
    bitnet_tensor ts[MAXT];
    int n = 0;
    bitnet_bnt_writer_opts opts = {(int)draw(&r, 11) - 1, 4096u << draw(&r, 6), 1 + (int)draw(&r, 2), (int)draw(&r, 2)};
    int nmeta = (int)draw(&r, 3);
    char mk[3][16], mv[3][64];
    for (int i = 0; i < nmeta; i++) {
        snprintf(mk[i], sizeof mk[i], "key%d", i);
        snprintf(mv[i], sizeof mv[i], "value %u", draw(&r, 0));
    }
    int want = 1 + (int)draw(&r, MAXT);
    for (int k = 0; k < want && r.n; k++)
        if (make_tensor(&r, &ts[n], k)) n++;

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) goto out;
    bitnet_writer *w = NULL;
    check(bitnet_writer_create(&w, f, BITNET_FMT_BNT, &opts) == BITNET_OK, "writer_create");
    for (int i = 0; i < nmeta; i++) check(bitnet_writer_meta(w, mk[i], mv[i]) == BITNET_OK, "meta");
    for (int i = 0; i < n; i++) {
        /* two tensors of one name are refused; the later one is then left out */
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= strcmp(ts[i].info.name, ts[j].info.name) == 0;
        if (dup) {
            bitnet_tensor_release(&ts[i]);
            memmove(&ts[i], &ts[i + 1], (size_t)(n - i - 1) * sizeof ts[0]);
            n--;
            i--;
            continue;
        }
        check(bitnet_writer_put(w, &ts[i]) == BITNET_OK, "put");
    }
    check(bitnet_writer_finish(w) == BITNET_OK, "finish");
    bitnet_writer_free(w);
    check(fclose(f) == 0, "memstream");

    /* read back, streaming: fmemopen is not a pipe, but nothing here seeks */
    FILE *in = fmemopen(buf, len, "rb");
    check(in != NULL, "fmemopen");
    bitnet_reader *rd = NULL;
    check(bitnet_reader_create(&rd, in, BITNET_FMT_AUTO) == BITNET_OK, "reader_create");
    check(bitnet_reader_format(rd) == BITNET_FMT_BNT, "format");
    check(bitnet_reader_meta_count(rd) >= (size_t)nmeta, "meta count");
    for (int i = 0; i < nmeta; i++) {
        int found = 0;
        for (size_t j = 0; j < bitnet_reader_meta_count(rd); j++)
            if (strcmp(bitnet_reader_meta_key(rd, j), mk[i]) == 0)
                found = strcmp(bitnet_reader_meta_value(rd, j), mv[i]) == 0;
        check(found, "metadata value");
    }
    for (int i = 0; i < n; i++) {
        bitnet_tensor back = {0};
        check(bitnet_reader_next(rd, &back) == BITNET_OK, "next");
        same(&ts[i], &back);
        bitnet_tensor_release(&back);
    }
    bitnet_tensor back = {0};
    check(bitnet_reader_next(rd, &back) == BITNET_END, "end after the last tensor");
    bitnet_reader_free(rd);
    fclose(in);

    /* and by name, in reverse order (through the index when there is one) */
    in = fmemopen(buf, len, "rb");
    check(in != NULL, "fmemopen");
    check(bitnet_reader_create(&rd, in, BITNET_FMT_BNT) == BITNET_OK, "reader_create 2");
    for (int i = n - 1; i >= 0 && !opts.no_index; i--) {
        bitnet_tensor byname = {0};
        check(bitnet_reader_find(rd, ts[i].info.name, &byname) == BITNET_OK, "find");
        same(&ts[i], &byname);
        bitnet_tensor_release(&byname);
    }
    bitnet_reader_free(rd);
    fclose(in);
out:
    free(buf);
    for (int i = 0; i < n; i++) bitnet_tensor_release(&ts[i]);
    return 0;
}
