/*
 * make_tiny.c - writes the hand-made files of tests/cli/test_matmul.sh:
 *   tiny.bnt: w (t2 [3,4], row scales 0.5 2 1), w3 (the same codes in t3),
 *             wf (f32 [3,4] = q * d), b (f32 [3]), w2 (t2 [2,3], d = 1),
 *             xq (i8 [2,4] with row scales 1 1), wbad (t2 [3,5]);
 *   x.npy:    f32 [2,4], rows of absmax 127 so that s = 1 and q = x.
 * Build and run from the repository root after `make lib`:
 *   cc -std=c11 -Ilib testdata/bitlinear/make_tiny.c build/lib/libbitnet.a \
 *      $(pkg-config --libs zlib jansson OpenCL openblas) -lpthread -lm -o /tmp/mk && /tmp/mk
 */
#include <stdio.h>
#include <string.h>

#include "bitnet.h"

static const int8_t W[3][4] = {{1, 0, -1, 1}, {-1, -1, 0, 1}, {0, 1, 1, -1}};
static const float D[3] = {0.5f, 2.0f, 1.0f};
static const int8_t W2[2][3] = {{1, 1, 0}, {0, -1, 1}};
static const float X[2][4] = {{127, 0, -127, 64}, {10, -20, 30, 127}};

static void info(bitnet_tensor_info *i, const char *name, bitnet_dtype t, uint64_t r, uint64_t c, bitnet_scale_kind k)
{
    memset(i, 0, sizeof *i);
    snprintf(i->name, sizeof i->name, "%s", name);
    i->dtype = t;
    i->rank = 2;
    i->dims[0] = r;
    i->dims[1] = c;
    i->scale_kind = k;
}

static int put(bitnet_bnt_writer *w, const bitnet_tensor_info *i, const void *data, const float *scales)
{
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    t.info = *i;
    t.data = (void *)data;
    t.scales = (float *)scales;
    return bitnet_bnt_writer_put(w, &t) != BITNET_OK;
}

int main(void)
{
    uint8_t t2[3 * 32], t3[3 * 1], t2b[2 * 32], t2bad[3 * 32];
    int8_t xq[8];
    float wf[12], b[3] = {1.0f, -1.0f, 0.5f}, one = 1.0f, xs[2] = {1.0f, 1.0f}, d5[3] = {1, 1, 1};
    int8_t q5[15] = {0};
    bitnet_tensor_info i;
    if (bitnet_t2_pack(&W[0][0], 3, 4, t2) || bitnet_t3_pack(&W[0][0], 3, 4, t3) || bitnet_t2_pack(&W2[0][0], 2, 3, t2b) ||
        bitnet_t2_pack(q5, 3, 5, t2bad))
        return 1;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) wf[r * 4 + c] = (float)W[r][c] * D[r];
    for (int k = 0; k < 8; k++) xq[k] = (int8_t)X[k / 4][k % 4];
    FILE *f = fopen("testdata/bitlinear/tiny.bnt", "wb");
    bitnet_bnt_writer *w;
    if (!f || bitnet_bnt_writer_create(&w, f, NULL)) return 1;
    int bad = 0;
    info(&i, "w", BITNET_T2, 3, 4, BITNET_SCALE_ROW); bad |= put(w, &i, t2, D);
    info(&i, "w3", BITNET_T3, 3, 4, BITNET_SCALE_ROW); bad |= put(w, &i, t3, D);
    info(&i, "wf", BITNET_F32, 3, 4, BITNET_SCALE_NONE); bad |= put(w, &i, wf, NULL);
    info(&i, "b", BITNET_F32, 3, 0, BITNET_SCALE_NONE); i.rank = 1; bad |= put(w, &i, b, NULL);
    info(&i, "w2", BITNET_T2, 2, 3, BITNET_SCALE_TENSOR); bad |= put(w, &i, t2b, &one);
    info(&i, "xq", BITNET_I8, 2, 4, BITNET_SCALE_ROW); bad |= put(w, &i, xq, xs);
    info(&i, "wbad", BITNET_T2, 3, 5, BITNET_SCALE_ROW); bad |= put(w, &i, t2bad, d5);
    if (bad || bitnet_bnt_writer_finish(w)) return 1;
    bitnet_bnt_writer_free(w);
    fclose(f);
    bitnet_tensor x;
    memset(&x, 0, sizeof x);
    info(&x.info, "x", BITNET_F32, 2, 4, BITNET_SCALE_NONE);
    x.data = (void *)X;
    f = fopen("testdata/bitlinear/x.npy", "wb");
    if (!f || bitnet_npy_write(f, &x)) return 1;
    return fclose(f) != 0;
}
