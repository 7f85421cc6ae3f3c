/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader: the
 * input is a whole file, read through a memory FILE (size unknown, like a
 * pipe), every tensor loaded; the metadata walked. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bitnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bitnet_st_reader *r;
    bitnet_tensor t;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    if (bitnet_st_reader_create(&r, f, NULL, 0) == BITNET_OK) {
        size_t total = 0;
        for (size_t i = 0; i < bitnet_st_reader_meta_count(r); i++)
            total += strlen(bitnet_st_reader_meta_key(r, i)) + strlen(bitnet_st_reader_meta_value(r, i));
        (void)total;
        while (bitnet_st_reader_next(r, &t) == BITNET_OK) bitnet_tensor_release(&t);
        bitnet_st_reader_free(r);
    }
    fclose(f);
    return 0;
}
