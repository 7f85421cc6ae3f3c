/* fuzz_npy.c - libFuzzer harness for the .npy reader: the input is a whole
 * file, read through a memory FILE; also through the generic reader. */
#include <stdint.h>
#include <stdio.h>

#include "bitnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bitnet_tensor t;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    if (bitnet_npy_read(f, NULL, 0, &t) == BITNET_OK) bitnet_tensor_release(&t);
    fclose(f);
    /* the same bytes with the first 8 handed over as a prefix */
    if (size >= 8 && (f = fmemopen((void *)(data + 8), size - 8, "rb"))) {
        if (bitnet_npy_read(f, data, 8, &t) == BITNET_OK) bitnet_tensor_release(&t);
        fclose(f);
    }
    return 0;
}
