/*
 * integrity.c - bitnet-verify FILE...: reads every byte of each file through
 * the library's readers so that every structure and CRC check runs.  .bnt
 * tensors are streamed (bitnet_bnt_reader_read), their ternary codes and
 * scales checked on the way; .npy, safetensors and GGUF are parsed whole
 * (GGUF: header, offsets, sizes, alignment; tensors of the converted types
 * decoded, codes and scales checked).
 */
#include "verify.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (1u << 20)

/* A FILE that first gives back the bytes already read for format detection,
 * then the rest of the underlying stream (pipes cannot be rewound). */
typedef struct {
    FILE *f;
    uint8_t head[16];
    size_t n, pos;
} replay;

static ssize_t replay_read(void *cookie, char *buf, size_t size)
{
    replay *r = cookie;
    size_t got = 0;
    if (r->pos < r->n) {
        got = r->n - r->pos < size ? r->n - r->pos : size;
        memcpy(buf, r->head + r->pos, got);
        r->pos += got;
    }
    if (got < size) {
        size_t k = fread(buf + got, 1, size - got, r->f);
        got += k;
        if (k == 0 && got == 0 && ferror(r->f)) return -1;
    }
    return (ssize_t)got;
}

/* Checks the payload-then-scales stream of one .bnt tensor as it goes by:
 * ternary codes valid (T2: no code 3; T3: bytes <= 242), padding codes 1
 * (q = 0), scales finite.  Keeps the first problem found. */
typedef struct {
    const bitnet_tensor_info *info;
    uint64_t cols, row_bytes, data_bytes, total, pos;
    uint8_t sbuf[4];
    unsigned sfill;
    char problem[256];
} stream_check;

static void check_init(stream_check *c, const bitnet_tensor_info *info)
{
    uint64_t rows, ns;
    memset(c, 0, sizeof *c);
    c->info = info;
    bitnet_tensor_rows_cols(info, &rows, &c->cols);
    if (info->dtype == BITNET_T2) c->row_bytes = bitnet_t2_row_bytes(c->cols);
    if (info->dtype == BITNET_T3) c->row_bytes = bitnet_t3_row_bytes(c->cols);
    if (bitnet_tensor_data_bytes(info, &c->data_bytes) || bitnet_tensor_n_scales(info, &ns)) return;
    c->total = c->data_bytes + 4 * ns;
}

static void check_byte(stream_check *c, uint8_t b)
{
    uint64_t p = c->pos++;
    if (c->problem[0]) return;
    if (p < c->data_bytes) {
        if (!c->row_bytes) return;
        uint64_t row = p / c->row_bytes, o = p % c->row_bytes;
        if (c->info->dtype == BITNET_T2) {
            for (unsigned k = 0; k < 4; k++) {
                uint64_t col = 128 * (o / 32) + 32 * k + o % 32;
                unsigned code = (b >> (2 * k)) & 3;
                if (code == 3)
                    snprintf(c->problem, sizeof c->problem, "invalid t2 code 3 at row %llu column %llu (data byte %llu)",
                             (unsigned long long)row, (unsigned long long)col, (unsigned long long)p);
                else if (col >= c->cols && code != 1)
                    snprintf(c->problem, sizeof c->problem, "t2 padding code %u (not 1) at row %llu column %llu (data byte %llu)",
                             code, (unsigned long long)row, (unsigned long long)col, (unsigned long long)p);
                if (c->problem[0]) return;
            }
        } else {
            if (b > 242) {
                snprintf(c->problem, sizeof c->problem, "invalid t3 byte %u at row %llu (data byte %llu)", b,
                         (unsigned long long)row, (unsigned long long)p);
                return;
            }
            unsigned v = b;
            for (unsigned m = 0; m < 5; m++, v /= 3)
                if (5 * o + m >= c->cols && v % 3 != 1) {
                    snprintf(c->problem, sizeof c->problem, "t3 padding trit %u (not 1) at row %llu column %llu (data byte %llu)",
                             v % 3, (unsigned long long)row, (unsigned long long)(5 * o + m), (unsigned long long)p);
                    return;
                }
        }
        return;
    }
    c->sbuf[c->sfill++] = b;
    if (c->sfill < 4) return;
    c->sfill = 0;
    uint32_t u = (uint32_t)c->sbuf[0] | (uint32_t)c->sbuf[1] << 8 | (uint32_t)c->sbuf[2] << 16 | (uint32_t)c->sbuf[3] << 24;
    float s;
    memcpy(&s, &u, sizeof s);
    if (!isfinite(s))
        snprintf(c->problem, sizeof c->problem, "scale %llu is not finite (%g)",
                 (unsigned long long)((p - c->data_bytes) / 4), (double)s);
}

typedef struct {
    const char *path;
    uint64_t ok, bad;
} file_tally;

static void line_ok(const bitnet_tensor_info *info)
{
    char d[512];
    if (tool_verbosity >= 1) printf("OK %s %s\n", info->name, vt_describe(info, d, sizeof d));
}

static void line_bad(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_bad(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* The library's error as "status (detail)". */
static const char *lib_error(bitnet_status st, char *buf, size_t size)
{
    const char *d = bitnet_error_detail();
    if (d && *d) snprintf(buf, size, "%s (%s)", bitnet_strerror(st), d);
    else snprintf(buf, size, "%s", bitnet_strerror(st));
    return buf;
}

static int check_bnt(FILE *f, file_tally *ft)
{
    bitnet_bnt_reader *r = NULL;
    uint8_t *buf = malloc(CHUNK);
    char err[2048];
    int rc = EXIT_OK;
    if (!buf) {
        msg_err("out of memory");
        return EXIT_FAIL;
    }
    bitnet_status st = bitnet_bnt_reader_create(&r, f);
    if (st) {
        line_bad(ft->path, "header: %s", lib_error(st, err, sizeof err));
        ft->bad++;
        rc = tool_exit_code(st) == EXIT_IO ? EXIT_IO : EXIT_FAIL;
        goto out;
    }
    for (;;) {
        bitnet_tensor_info info;
        memset(&info, 0, sizeof info);
        bitnet_error_clear();
        st = bitnet_bnt_reader_next(r, &info);
        if (st == BITNET_END) break;
        if (st) {
            /* a damaged header, the end of the previous tensor, or the index/trailer */
            line_bad(ft->path, "%s", lib_error(st, err, sizeof err));
            ft->bad++;
            rc = tool_exit_code(st) == EXIT_IO ? EXIT_IO : EXIT_FAIL;
            goto out;
        }
        stream_check c;
        check_init(&c, &info);
        size_t got;
        for (;;) {
            st = bitnet_bnt_reader_read(r, buf, CHUNK, &got);
            if (st || got == 0) break;
            for (size_t i = 0; i < got; i++) check_byte(&c, buf[i]);
        }
        if (st) {
            line_bad(info.name, "%s", lib_error(st, err, sizeof err));
            ft->bad++;
            rc = tool_exit_code(st) == EXIT_IO ? EXIT_IO : EXIT_FAIL;
            goto out; /* the stream cannot be trusted past a broken tensor */
        }
        if (c.pos != c.total) {
            line_bad(info.name, "data stream holds %llu bytes, the header implies %llu", (unsigned long long)c.pos,
                     (unsigned long long)c.total);
            ft->bad++;
            rc = EXIT_FAIL;
        } else if (c.problem[0]) {
            line_bad(info.name, "%s", c.problem);
            ft->bad++;
            rc = EXIT_FAIL;
        } else {
            line_ok(&info);
            ft->ok++;
        }
    }
out:
    bitnet_bnt_reader_free(r);
    free(buf);
    return rc;
}

static int check_other(FILE *f, bitnet_format fmt, file_tally *ft)
{
    bitnet_reader *r = NULL;
    char err[2048];
    int rc = EXIT_OK;
    bitnet_status st = bitnet_reader_create(&r, f, fmt);
    if (st) {
        line_bad(ft->path, "header: %s", lib_error(st, err, sizeof err));
        ft->bad++;
        return tool_exit_code(st) == EXIT_IO ? EXIT_IO : EXIT_FAIL;
    }
    for (;;) {
        bitnet_tensor t;
        memset(&t, 0, sizeof t);
        bitnet_error_clear();
        st = bitnet_reader_next(r, &t);
        if (st == BITNET_END) break;
        if (st == BITNET_E_UNSUPPORTED && bitnet_reader_gguf(r)) {
            /* a ggml type not converted here: its offset, size and alignment
             * were checked with the header; the reader goes on after it */
            if (tool_verbosity >= 1) printf("SKIP %s\n", bitnet_error_detail());
            continue;
        }
        if (st) {
            line_bad(ft->path, "%s", lib_error(st, err, sizeof err));
            ft->bad++;
            rc = tool_exit_code(st) == EXIT_IO ? EXIT_IO : EXIT_FAIL;
            break;
        }
        uint64_t ns = 0, bad_scale = UINT64_MAX;
        bitnet_tensor_n_scales(&t.info, &ns);
        for (uint64_t i = 0; i < ns && bad_scale == UINT64_MAX; i++)
            if (!isfinite(t.scales[i])) bad_scale = i;
        if (bad_scale != UINT64_MAX) {
            line_bad(t.info.name, "scale %llu is not finite (%g)", (unsigned long long)bad_scale, (double)t.scales[bad_scale]);
            ft->bad++;
            rc = EXIT_FAIL;
        } else {
            line_ok(&t.info);
            ft->ok++;
        }
        bitnet_tensor_release(&t);
    }
    bitnet_reader_free(r);
    return rc;
}

/* The format a file name claims, for files whose first bytes are no known
 * magic (empty, damaged): its reader then says what is wrong. */
static bitnet_format by_extension(const char *path)
{
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".bnt") == 0) return BITNET_FMT_BNT;
    if (n > 4 && strcmp(path + n - 4, ".npy") == 0) return BITNET_FMT_NPY;
    if (n > 12 && strcmp(path + n - 12, ".safetensors") == 0) return BITNET_FMT_SAFETENSORS;
    if (n > 5 && strcmp(path + n - 5, ".gguf") == 0) return BITNET_FMT_GGUF;
    return BITNET_FMT_AUTO;
}

static int check_file(const char *path)
{
    FILE *in = NULL, *f = NULL;
    file_tally ft = {path, 0, 0};
    replay rp;
    int rc;
    const char *shown = strcmp(path, "-") == 0 ? "(stdin)" : path;
    ft.path = shown;
    if ((rc = tool_in_open(path, &in))) {
        printf("%s: FAILED (cannot open)\n", shown);
        return rc;
    }
    memset(&rp, 0, sizeof rp);
    rp.f = in;
    rp.n = fread(rp.head, 1, 8, in);
    if (rp.n < 8 && ferror(in)) {
        msg_err("%s: read error: %s", shown, strerror(errno));
        printf("%s: FAILED (read error)\n", shown);
        tool_in_close(in);
        return EXIT_IO;
    }
    bitnet_format fmt = bitnet_format_detect(rp.head, rp.n);
    if (fmt == BITNET_FMT_AUTO) fmt = by_extension(path); /* so that the reader says what is wrong */
    if (fmt == BITNET_FMT_AUTO) {
        line_bad(shown, "not a .bnt, .npy or safetensors file (%zu bytes read)", rp.n);
        printf("%s: FAILED (unknown format)\n", shown);
        tool_in_close(in);
        return EXIT_FAIL;
    }
    cookie_io_functions_t io = {replay_read, NULL, NULL, NULL};
    f = fopencookie(&rp, "rb", io);
    if (!f) {
        msg_err("out of memory");
        tool_in_close(in);
        return EXIT_FAIL;
    }
    rc = fmt == BITNET_FMT_BNT ? check_bnt(f, &ft) : check_other(f, fmt, &ft);
    fclose(f);
    tool_in_close(in);
    if (rc || ft.bad)
        printf("%s: FAILED (%s, %llu tensor%s ok, %llu bad)\n", shown, bitnet_format_name(fmt), (unsigned long long)ft.ok,
               ft.ok == 1 ? "" : "s", (unsigned long long)ft.bad);
    else if (tool_verbosity >= 1)
        printf("%s: OK (%s, %llu tensor%s)\n", shown, bitnet_format_name(fmt), (unsigned long long)ft.ok,
               ft.ok == 1 ? "" : "s");
    if (!rc && ft.bad) rc = EXIT_FAIL;
    return rc;
}

int verify_integrity(char **files, int n)
{
    int worst = EXIT_OK, bad = 0;
    for (int i = 0; i < n; i++) {
        int rc = check_file(files[i]);
        fflush(stdout);
        if (rc) bad++;
        /* report the gravest: I/O (3) over a data failure (1) */
        if (rc > worst) worst = rc;
    }
    if (n > 1 && (bad || tool_verbosity >= 1)) printf("%d file%s checked, %d failed\n", n, n == 1 ? "" : "s", bad);
    return worst;
}
