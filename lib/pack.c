/*
 * pack.c - ternary code layouts (bnt(5)): T2, 2 bits per weight in blocks of
 * 128 weights (32 bytes; column 128b + 32k + j sits in byte j of block b at
 * bits 2k..2k+1), and T3, base 3 with 5 trits per byte.  Codes are stored as
 * q + 1; padding holds code 1 (q = 0).  Unpacking refuses invalid codes and
 * padding that is not code 1, naming the position.
 */
#include "internal.h"

#include <stdlib.h>

/* Sizes: rows * row_bytes must fit, and so must rows * cols codes. */
static bitnet_status pack_check(const char *op, const void *in, const void *out, uint64_t rows, uint64_t cols,
                                size_t row_bytes)
{
    uint64_t n, bytes;
    if (bn_mul_u64(rows, cols, &n) || n > BITNET_MAX_ELEMENTS)
        return bn_fail(BITNET_E_LIMIT, "%s: %llu x %llu exceeds 2^48 elements", op, (unsigned long long)rows,
                       (unsigned long long)cols);
    if (bn_mul_u64(rows, (uint64_t)row_bytes, &bytes) || bytes > SIZE_MAX)
        return bn_fail(BITNET_E_OVERFLOW, "%s: size overflows", op);
    if (n && (!in || !out)) return bn_fail(BITNET_E_INVALID, "%s: NULL buffer", op);
    return BITNET_OK;
}

static bitnet_status bad_code(const char *op, int code, uint64_t r, uint64_t c)
{
    return bn_fail(BITNET_E_FORMAT, "%s: invalid code %d at row %llu, column %llu", op, code, (unsigned long long)r,
                   (unsigned long long)c);
}

/* ---- T2 ------------------------------------------------------------------- */

static void t2_pack_row(const int8_t *q, uint64_t cols, uint8_t *out)
{
    const uint64_t nb = (cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK;
    for (uint64_t b = 0; b < nb; b++) {
        uint8_t *blk = out + b * BITNET_T2_BLOCK_BYTES;
        const int8_t *qb = q + b * BITNET_T2_BLOCK;
        if ((b + 1) * BITNET_T2_BLOCK <= cols) {
            for (unsigned j = 0; j < 32; j++)
                blk[j] = (uint8_t)((qb[j] + 1) | (qb[32 + j] + 1) << 2 | (qb[64 + j] + 1) << 4 | (qb[96 + j] + 1) << 6);
            continue;
        }
        for (unsigned j = 0; j < 32; j++) {
            unsigned v = 0;
            for (unsigned k = 0; k < 4; k++) {
                uint64_t c = b * BITNET_T2_BLOCK + 32 * k + j;
                v |= (unsigned)(c < cols ? qb[32 * k + j] + 1 : 1) << (2 * k);
            }
            blk[j] = (uint8_t)v;
        }
    }
}

bitnet_status bitnet_t2_pack(const int8_t *q, uint64_t rows, uint64_t cols, uint8_t *t2)
{
    const size_t rb = bitnet_t2_row_bytes(cols);
    bitnet_status st = pack_check("t2_pack", q, t2, rows, cols, rb);
    if (st) return st;
    for (uint64_t i = 0; i < rows * cols; i++)
        if (q[i] < -1 || q[i] > 1)
            return bn_fail(BITNET_E_INVALID, "t2_pack: value %d at row %llu, column %llu is not in {-1, 0, 1}", q[i],
                           (unsigned long long)(i / cols), (unsigned long long)(i % cols));
    for (uint64_t r = 0; r < rows; r++) t2_pack_row(q + r * cols, cols, t2 + r * rb);
    return BITNET_OK;
}

/* Checks one T2 row (invalid codes, padding) and unpacks it when q != NULL. */
static bitnet_status t2_row(const char *op, const uint8_t *row, uint64_t r, uint64_t cols, int8_t *q)
{
    const uint64_t nb = (cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK;
    for (uint64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * BITNET_T2_BLOCK_BYTES;
        unsigned bad = 0;
        for (unsigned j = 0; j < 32; j++) bad |= blk[j] & (blk[j] >> 1) & 0x55; /* a code 3 */
        const int full = (b + 1) * BITNET_T2_BLOCK <= cols;
        if (full && !bad) {
            if (q) {
                int8_t *qb = q + b * BITNET_T2_BLOCK;
                for (unsigned k = 0; k < 4; k++)
                    for (unsigned j = 0; j < 32; j++) qb[32 * k + j] = (int8_t)(((blk[j] >> (2 * k)) & 3) - 1);
            }
            continue;
        }
        for (unsigned k = 0; k < 4; k++)
            for (unsigned j = 0; j < 32; j++) {
                uint64_t c = b * BITNET_T2_BLOCK + 32 * k + j;
                int code = (blk[j] >> (2 * k)) & 3;
                if (code == 3) return bad_code(op, 3, r, c);
                if (c >= cols) {
                    if (code != 1)
                        return bn_fail(BITNET_E_FORMAT, "%s: padding code %d (not 1) at row %llu, column %llu", op,
                                       code, (unsigned long long)r, (unsigned long long)c);
                } else if (q) {
                    q[c] = (int8_t)(code - 1);
                }
            }
    }
    return BITNET_OK;
}

bitnet_status bitnet_t2_unpack(const uint8_t *t2, uint64_t rows, uint64_t cols, int8_t *q)
{
    const size_t rb = bitnet_t2_row_bytes(cols);
    bitnet_status st = pack_check("t2_unpack", t2, q, rows, cols, rb);
    for (uint64_t r = 0; r < rows && !st; r++) st = t2_row("t2_unpack", t2 + r * rb, r, cols, q + r * cols);
    return st;
}

/* ---- T3 ------------------------------------------------------------------- */

static const uint8_t pow3[5] = {1, 3, 9, 27, 81};

/* Packs row r (cols values of q) into T3; refuses a value not in {-1, 0, 1}. */
static bitnet_status t3_pack_row(const char *op, const int8_t *qr, uint64_t r, uint64_t cols, uint8_t *out)
{
    const size_t rb = bitnet_t3_row_bytes(cols);
    for (uint64_t i = 0; i < rb; i++) {
        unsigned v = 0;
        for (unsigned m = 0; m < 5; m++) {
            uint64_t c = 5 * i + m;
            int t = c < cols ? qr[c] : 0;
            if (t < -1 || t > 1)
                return bn_fail(BITNET_E_INVALID, "%s: value %d at row %llu, column %llu is not in {-1, 0, 1}", op, t,
                               (unsigned long long)r, (unsigned long long)c);
            v += (unsigned)(t + 1) * pow3[m];
        }
        out[i] = (uint8_t)v;
    }
    return BITNET_OK;
}

bitnet_status bitnet_t3_pack(const int8_t *q, uint64_t rows, uint64_t cols, uint8_t *t3)
{
    const size_t rb = bitnet_t3_row_bytes(cols);
    bitnet_status st = pack_check("t3_pack", q, t3, rows, cols, rb);
    for (uint64_t r = 0; r < rows && !st; r++) st = t3_pack_row("t3_pack", q + r * cols, r, cols, t3 + r * rb);
    return st;
}

/* Decodes one T3 byte into 5 codes (0..2); nonzero if the byte exceeds 242. */
static int t3_digits(uint8_t byte, uint8_t code[5])
{
    if (byte > 242) return 1;
    unsigned v = byte;
    for (unsigned m = 0; m < 5; m++) {
        code[m] = (uint8_t)(v % 3);
        v /= 3;
    }
    return 0;
}

/* Checks one T3 row and hands out its codes (0..2) for columns [0, cols). */
static bitnet_status t3_row(const char *op, const uint8_t *row, uint64_t r, uint64_t cols, uint8_t *codes)
{
    const size_t rb = bitnet_t3_row_bytes(cols);
    for (uint64_t i = 0; i < rb; i++) {
        uint8_t d[5];
        if (t3_digits(row[i], d))
            return bn_fail(BITNET_E_FORMAT, "%s: invalid byte %u (> 242) at row %llu, columns %llu..%llu", op, row[i],
                           (unsigned long long)r, (unsigned long long)(5 * i), (unsigned long long)(5 * i + 4));
        for (unsigned m = 0; m < 5; m++) {
            uint64_t c = 5 * i + m;
            if (c < cols) codes[c] = d[m];
            else if (d[m] != 1)
                return bn_fail(BITNET_E_FORMAT, "%s: padding trit %u (not 1) at row %llu, column %llu", op, d[m],
                               (unsigned long long)r, (unsigned long long)c);
        }
    }
    return BITNET_OK;
}

/* t3_row with the values q (-1..1) handed out: codes 0..2 are written in
 * place, then shifted. */
static bitnet_status t3_row_q(const char *op, const uint8_t *row, uint64_t r, uint64_t cols, int8_t *q)
{
    uint8_t *codes = (uint8_t *)q;
    bitnet_status st = t3_row(op, row, r, cols, codes);
    if (st) return st;
    for (uint64_t c = 0; c < cols; c++) q[c] = (int8_t)(codes[c] - 1);
    return BITNET_OK;
}

bitnet_status bitnet_t3_unpack(const uint8_t *t3, uint64_t rows, uint64_t cols, int8_t *q)
{
    const size_t rb = bitnet_t3_row_bytes(cols);
    bitnet_status st = pack_check("t3_unpack", t3, q, rows, cols, rb);
    for (uint64_t r = 0; r < rows && !st; r++) st = t3_row_q("t3_unpack", t3 + r * rb, r, cols, q + r * cols);
    return st;
}

/* ---- conversions ---------------------------------------------------------- */

/* Converts rows between layouts through int8 values: unpack checks and
 * reads one row of the input (row bytes rb_in), pack writes one row of the
 * output (row bytes rb_out).  pack_check is given the larger T2 row size;
 * the T3 size, never larger, then fits too. */
typedef bitnet_status (*row_unpack_fn)(const char *op, const uint8_t *row, uint64_t r, uint64_t cols, int8_t *q);
typedef bitnet_status (*row_pack_fn)(const char *op, const int8_t *q, uint64_t r, uint64_t cols, uint8_t *out);
static bitnet_status convert_rows(const char *op, const uint8_t *in, size_t rb_in, row_unpack_fn unpack, uint64_t rows,
                                  uint64_t cols, uint8_t *out, size_t rb_out, row_pack_fn pack)
{
    bitnet_status st = pack_check(op, in, out, rows, cols, bitnet_t2_row_bytes(cols));
    if (st || !rows || !cols) return st; /* no rows: no row buffer (a [0, huge] shape would ask for a huge one) */
    int8_t *q = malloc((size_t)cols);
    if (!q) return bn_fail(BITNET_E_NOMEM, "%s: out of memory", op);
    for (uint64_t r = 0; r < rows && !st; r++)
        if (!(st = unpack(op, in + r * rb_in, r, cols, q))) st = pack(op, q, r, cols, out + r * rb_out);
    free(q);
    return st;
}

static bitnet_status t2_pack_row_op(const char *op, const int8_t *q, uint64_t r, uint64_t cols, uint8_t *out)
{
    (void)op, (void)r; /* the values come from a checked row */
    t2_pack_row(q, cols, out);
    return BITNET_OK;
}

bitnet_status bitnet_t3_to_t2(const uint8_t *t3, uint64_t rows, uint64_t cols, uint8_t *t2)
{
    return convert_rows("t3_to_t2", t3, bitnet_t3_row_bytes(cols), t3_row_q, rows, cols, t2, bitnet_t2_row_bytes(cols),
                        t2_pack_row_op);
}

bitnet_status bitnet_t2_to_t3(const uint8_t *t2, uint64_t rows, uint64_t cols, uint8_t *t3)
{
    return convert_rows("t2_to_t3", t2, bitnet_t2_row_bytes(cols), t2_row, rows, cols, t3, bitnet_t3_row_bytes(cols),
                        t3_pack_row);
}
