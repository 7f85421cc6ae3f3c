/*
 * fuzz_bnt.c - libFuzzer harness for the .bnt reader: the input is a file;
 * every tensor is read with small streaming reads (never loaded whole, so a
 * header may claim any size), then the index is tried through a seek.  Must
 * not crash, leak or hang; the reader's hard limits bound its allocations.
 */
#include "bitnet.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void read_all(FILE *f, int seek)
{
    static uint8_t sink[4099];
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    char first[BITNET_MAX_NAME + 1] = "";
    size_t got, k = 0;
    if (bitnet_bnt_reader_create(&r, f)) return;
    for (size_t i = 0; i < bitnet_bnt_reader_meta_count(r); i++)
        (void)bitnet_bnt_reader_meta_get(r, bitnet_bnt_reader_meta_key(r, i));
    while (bitnet_bnt_reader_next(r, &info) == BITNET_OK) {
        if (!first[0]) memcpy(first, info.name, sizeof first);
        if (k++ % 3 == 2) continue; /* next() skips and verifies */
        while (bitnet_bnt_reader_read(r, sink, 1 + k % sizeof sink, &got) == BITNET_OK && got)
            ;
    }
    (void)bitnet_bnt_reader_stored_bytes(r);
    if (seek && bitnet_bnt_reader_seek(r, first, &info) == BITNET_OK)
        while (bitnet_bnt_reader_read(r, sink, sizeof sink, &got) == BITNET_OK && got)
            ;
    bitnet_bnt_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    for (int seek = 0; seek < 2; seek++) {
        FILE *f = fmemopen((void *)(uintptr_t)data, size, "rb");
        if (!f) return 0;
        read_all(f, seek);
        fclose(f);
    }
    return 0;
}
