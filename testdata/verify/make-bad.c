/*
 * make-bad.c - writes the deliberately broken .bnt files of this folder:
 * well-formed containers (every CRC right) whose ternary payload or scales
 * are invalid, which only a check of the codes finds.  Not built by the
 * Makefile; to remake the files, from the top of the tree:
 *   cc -std=c11 -Ilib testdata/verify/make-bad.c build/lib/libbitnet.a \
 *      -lz -ljansson -lOpenCL -lopenblas -lpthread -lm -o /tmp/make-bad
 *   (cd testdata/verify && /tmp/make-bad)
 */
#include "bitnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One tensor [3 x 130] (130 columns: two T2 blocks, the second padded),
 * codes q = (r + c) % 3 - 1, per-row scales 0.5, 0.25, 0.125; `damage`
 * edits the packed bytes or the scales before writing. */
static int write_one(const char *path, bitnet_dtype dt, void (*damage)(bitnet_tensor *))
{
    enum { R = 3, C = 130 };
    int8_t q[R * C];
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.info.name, sizeof t.info.name, "w");
    t.info.dtype = dt;
    t.info.rank = 2;
    t.info.dims[0] = R;
    t.info.dims[1] = C;
    t.info.scale_kind = BITNET_SCALE_ROW;
    if (bitnet_tensor_alloc(&t)) return 1;
    for (int i = 0; i < R * C; i++) q[i] = (int8_t)((i / C + i % C) % 3 - 1);
    if (dt == BITNET_T2) bitnet_t2_pack(q, R, C, t.data);
    else bitnet_t3_pack(q, R, C, t.data);
    t.scales[0] = 0.5f, t.scales[1] = 0.25f, t.scales[2] = 0.125f;
    if (damage) damage(&t);
    FILE *f = fopen(path, "wb");
    bitnet_bnt_writer *w = NULL;
    bitnet_bnt_writer_opts o = {0, 0, 1, 0};
    int bad = !f || bitnet_bnt_writer_create(&w, f, &o) || bitnet_bnt_writer_put(w, &t) || bitnet_bnt_writer_finish(w);
    if (bad) fprintf(stderr, "%s: %s\n", path, bitnet_error_detail());
    bitnet_bnt_writer_free(w);
    if (f) fclose(f);
    bitnet_tensor_release(&t);
    return bad;
}

/* row 1, column 5: block 0, k = 0, byte j = 5 of the row's 64 bytes */
static void t2_code3(bitnet_tensor *t) { ((uint8_t *)t->data)[64 + 5] |= 3; }
/* row 2, column 131 (padding): block 1, k = 0, byte 32 + 3 */
static void t2_padding(bitnet_tensor *t) { ((uint8_t *)t->data)[2 * 64 + 32 + 3] = (uint8_t)((((uint8_t *)t->data)[2 * 64 + 32 + 3] & ~3) | 2); }
/* row 0, byte 7 (columns 35..39): 250 > 242 */
static void t3_byte(bitnet_tensor *t) { ((uint8_t *)t->data)[7] = 250; }
static void scale_nan(bitnet_tensor *t) { t->scales[1] = NAN; }

int main(void)
{
    return write_one("good-t2.bnt", BITNET_T2, NULL) | write_one("good-t3.bnt", BITNET_T3, NULL) |
           write_one("bad-t2-code3.bnt", BITNET_T2, t2_code3) | write_one("bad-t2-padding.bnt", BITNET_T2, t2_padding) |
           write_one("bad-t3-byte.bnt", BITNET_T3, t3_byte) | write_one("bad-scale-nan.bnt", BITNET_T2, scale_nan);
}
