/* fuzz_gguf.c - libFuzzer harness for the GGUF reader and writer: the input
 * is a whole file, read through a memory FILE (size unknown, like a pipe)
 * and, when small, through a temporary file (seekable: the size checks and
 * seeks run); every tensor is loaded.  What reads back is written to GGUF
 * again and read once more: the metadata must come back as it was (the
 * text codec is exact) and so must the tensor count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"

static void rewrite_and_compare(bitnet_reader *r, FILE *in_again)
{
    bitnet_writer *w = NULL;
    bitnet_reader *r2 = NULL;
    bitnet_tensor t;
    size_t n_put = 0, n_back = 0;
    FILE *out = tmpfile();
    if (!out) return;
    if (bitnet_writer_create(&w, out, BITNET_FMT_GGUF, NULL)) goto done;
    for (size_t i = 0; i < bitnet_reader_meta_count(r); i++)
        if (bitnet_writer_meta(w, bitnet_reader_meta_key(r, i), bitnet_reader_meta_value(r, i))) goto done;
    while (bitnet_reader_next(r, &t) == BITNET_OK) {
        n_put += bitnet_writer_put(w, &t) == BITNET_OK;
        bitnet_tensor_release(&t);
    }
    if (bitnet_writer_finish(w)) goto done;
    rewind(out);
    if (bitnet_reader_create(&r2, out, BITNET_FMT_AUTO)) abort(); /* we wrote it: it must read */
    if (bitnet_reader_meta_count(r2) != bitnet_reader_meta_count(r)) abort();
    for (size_t i = 0; i < bitnet_reader_meta_count(r); i++)
        if (strcmp(bitnet_reader_meta_key(r, i), bitnet_reader_meta_key(r2, i)) ||
            strcmp(bitnet_reader_meta_value(r, i), bitnet_reader_meta_value(r2, i)))
            abort();
    while (bitnet_reader_next(r2, &t) == BITNET_OK) {
        n_back++;
        bitnet_tensor_release(&t);
    }
    if (n_back != n_put) abort();
done:
    (void)in_again;
    bitnet_reader_free(r2);
    bitnet_writer_free(w);
    fclose(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bitnet_reader *r = NULL;
    bitnet_tensor t;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    if (bitnet_reader_create(&r, f, BITNET_FMT_GGUF) == BITNET_OK) {
        bitnet_gguf_reader *g = bitnet_reader_gguf(r);
        for (size_t i = 0; i < bitnet_gguf_reader_tensor_count(g); i++) (void)bitnet_gguf_reader_tensor(g, i);
        for (;;) {
            bitnet_status st = bitnet_reader_next(r, &t);
            if (st == BITNET_E_UNSUPPORTED) continue;
            if (st) break;
            bitnet_tensor_release(&t);
        }
        bitnet_reader_free(r);
        r = NULL;
    }
    fclose(f);
    if (size > (1u << 16)) return 0;
    FILE *tf = tmpfile();
    if (!tf) return 0;
    if (fwrite(data, 1, size, tf) == size && fflush(tf) == 0) {
        rewind(tf);
        if (bitnet_reader_create(&r, tf, BITNET_FMT_GGUF) == BITNET_OK) {
            rewrite_and_compare(r, tf);
            bitnet_reader_free(r);
        }
    }
    fclose(tf);
    return 0;
}
