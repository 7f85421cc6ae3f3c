/*
 * gguf_quant.c - the ternary block layouts of GGUF files, as codes.
 *
 * TQ1_0 (llama.cpp/ggml, 54 bytes per 256 weights, 1.6875 bits per weight):
 * 48 bytes qs, 4 bytes qh, an f16 scale d; w = (code - 1) * d.  A byte holds
 * 5 trits (4 in qh) as a fixed-point fraction: the trit value v = sum of
 * code_i * 3^(4-i) is stored as ceil(v * 256 / 243), and trit i is read back
 * as ((uint8_t)(byte * 3^i) * 3) >> 8.  Weight order in a block: qs[m] trit n
 * is weight 32n + m (m < 32); qs[32 + m] trit n is weight 160 + 16n + m
 * (m < 16); qh[j] trit n is weight 240 + 4n + j (n < 4; trit 4 is 0).
 * TQ2_0 (66 bytes): 64 bytes of 2-bit codes, byte m of the 32-byte half h
 * holds weight 128h + 32k + m in bits 2k, 2k+1 -- exactly two T2 blocks --
 * then the f16 d.  (Layouts as described by ggml's ggml-common.h block_tq1_0
 * and block_tq2_0 and quantize_row_tq1_0_ref / dequantize_row_tq1_0 in
 * ggml-quants.c; checked against the gguf Python package's quants module by
 * the fixtures in testdata/gguf.)
 */
#include "gguf_internal.h"
#include "internal.h"

static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};

static int8_t trit(uint8_t byte, int n) { return (int8_t)((((unsigned)(uint8_t)(byte * pow3[n])) * 3u >> 8) - 1); }

void bn_tq1_decode(const uint8_t *blk, int8_t *q)
{
    const uint8_t *qs = blk, *qh = blk + 48;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) q[32 * n + m] = trit(qs[m], n);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) q[160 + 16 * n + m] = trit(qs[32 + m], n);
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++) q[240 + 4 * n + j] = trit(qh[j], n);
}

static uint8_t pack5(const int8_t *q, int stride, int count)
{
    unsigned v = 0;
    for (int n = 0; n < count; n++) v = v * 3 + (unsigned)(q[n * stride] + 1);
    for (int n = count; n < 5; n++) v *= 3;
    return (uint8_t)((v * 256 + 242) / 243);
}

void bn_tq1_encode(const int8_t *q, uint8_t *blk)
{
    for (int m = 0; m < 32; m++) blk[m] = pack5(q + m, 32, 5);
    for (int m = 0; m < 16; m++) blk[32 + m] = pack5(q + 160 + m, 16, 5);
    for (int j = 0; j < 4; j++) blk[48 + j] = pack5(q + 240 + j, 4, 4);
}

/*
 * bitnet.cpp I2_S, as written by quantize_i2_s() in src/ggml-bitnet-mad.cpp
 * of microsoft/BitNet (x86 build, QK_I2_S = 128): the tensor's weights, in
 * row-major order, are cut into blocks of 128; weight 32k + j of a block is
 * in byte j of the block's 32 bytes at bits 6-2k and 7-2k; codes 0, 1, 2 are
 * -1, 0, +1.  After the n/4 code bytes comes one f32 scale (the tensor's
 * max |w|, so w = (code - 1) * scale) and padding to n/4 + 32 bytes
 * (ggml_nbytes in that project's ggml.c).  An ARM build of bitnet.cpp uses
 * blocks of 64 (16 bytes) and the file does not say which was used; this
 * reader takes the x86 layout, the one of the published GGUF files.
 */
uint64_t bn_i2s_decode(const uint8_t *src, uint64_t n, int8_t *q)
{
    uint64_t bad = n;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t blk = i / GGUF_I2S_BLOCK, j = i % GGUF_I2S_BLOCK;
        unsigned code = (src[blk * 32 + j % 32] >> (6 - 2 * (j / 32))) & 3u;
        if (code == 3 && bad == n) bad = i;
        q[i] = (int8_t)((int)code - 1);
    }
    return bad;
}
