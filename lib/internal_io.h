/*
 * internal_io.h - constructors for the generic reader (lib/reader.c), which
 * sniffs the first bytes of a stream before it knows the format.
 */
#ifndef BITNET_INTERNAL_IO_H
#define BITNET_INTERNAL_IO_H

#include "bitnet.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* As bitnet_bnt_reader_create, where prefix[0..prefix_len) are the first bytes
 * of the file, already consumed from f (prefix may be NULL when prefix_len is
 * 0; it is copied).  On a seekable f, ftello(f) - prefix_len must be the
 * offset of the file's first byte. */
bitnet_status bn_bnt_reader_create_prefixed(bitnet_bnt_reader **r, FILE *f, const uint8_t *prefix, size_t prefix_len);

#endif
