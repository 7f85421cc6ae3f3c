/*
 * bitnet-info - lists the tensors of .bnt, .npy, safetensors and GGUF files (name,
 * dtype, shape, elements, stored and raw bytes, compression ratio, scales),
 * their metadata, or the compute devices.
 */
#include "common.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char purpose[] =
    "Lists the tensors of .bnt, .npy, safetensors and GGUF files (format told by magic bytes),\n"
    "their metadata (--meta), or the compute devices (--devices).";

static const char *scale_text(const bitnet_tensor_info *in, char *buf, size_t size)
{
    switch (in->scale_kind) {
    case BITNET_SCALE_NONE: return "none";
    case BITNET_SCALE_TENSOR: return "tensor";
    case BITNET_SCALE_ROW: return "row";
    case BITNET_SCALE_GROUP: snprintf(buf, size, "group:%" PRIu32, in->group); return buf;
    }
    return "?";
}

static uint64_t raw_bytes(const bitnet_tensor_info *in)
{
    uint64_t d = 0, s = 0;
    bitnet_tensor_data_bytes(in, &d);
    bitnet_tensor_n_scales(in, &s);
    return d + 4 * s;
}

static double ratio(uint64_t raw, uint64_t stored) { return stored ? (double)raw / (double)stored : 1.0; }

/* Long metadata values (a tokenizer's vocabulary) are cut in the text listing. */
static void print_meta_value(const char *v)
{
    size_t n = strlen(v);
    if (n <= 100) {
        printf("%s\n", v);
        return;
    }
    printf("%.80s... (%zu bytes)\n", v, n);
}

/* One GGUF tensor as the header describes it: also the ggml types that are
 * not converted here, and codes not known at all (sized by the reader from
 * the layout).  Fills info for the mapped dtype; returns its name, the ggml
 * type's, or "?". */
static const char *gguf_entry(const bitnet_gguf_tensor_desc *d, bitnet_tensor_info *info, uint64_t *raw)
{
    static const struct { uint32_t type; bitnet_dtype dt; bitnet_scale_kind sk; uint32_t group; } map[] = {
        {0, BITNET_F32, BITNET_SCALE_NONE, 0},   {1, BITNET_F16, BITNET_SCALE_NONE, 0},
        {30, BITNET_BF16, BITNET_SCALE_NONE, 0}, {28, BITNET_F64, BITNET_SCALE_NONE, 0},
        {24, BITNET_I8, BITNET_SCALE_NONE, 0},   {25, BITNET_I16, BITNET_SCALE_NONE, 0},
        {26, BITNET_I32, BITNET_SCALE_NONE, 0},  {27, BITNET_I64, BITNET_SCALE_NONE, 0},
        {34, BITNET_T3, BITNET_SCALE_GROUP, 256}, {35, BITNET_T2, BITNET_SCALE_GROUP, 256},
        {36, BITNET_T2, BITNET_SCALE_TENSOR, 0},
    };
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", d->name);
    info->rank = d->n_dims;
    for (uint32_t k = 0; k < d->n_dims; k++) info->dims[k] = d->ne[d->n_dims - 1 - k];
    info->dtype = BITNET_F32;
    *raw = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].type == d->type) {
            info->dtype = map[i].dt;
            info->scale_kind = map[i].sk;
            info->group = map[i].group;
            *raw = raw_bytes(info);
        }
    if (d->size_from_layout || !bitnet_gguf_type_name(d->type)) return "?";
    return bitnet_gguf_type_name(d->type);
}

/* Lists one file: text on stdout as tensors arrive, or one JSON object
 * appended to `files`.  Returns an exit status. */
static int info_file(const char *path, int show_meta, json_t *files)
{
    FILE *f = NULL;
    bitnet_reader *r = NULL;
    bitnet_tensor t;
    bitnet_status st;
    char shape[512], sk[32];
    uint64_t n_t = 0, tot_el = 0, tot_stored = 0, tot_raw = 0;
    json_t *jf = NULL, *jt = NULL;
    int rc = tool_in_open(path, &f);
    if (rc) return rc;
    if ((st = bitnet_reader_create(&r, f, BITNET_FMT_AUTO))) {
        rc = tool_fail(st, "%s", path);
        goto out;
    }
    const char *fmt = bitnet_format_name(bitnet_reader_format(r));
    size_t n_meta = bitnet_reader_meta_count(r);
    if (files) {
        json_t *jm = json_object();
        jf = json_object();
        jt = json_array();
        json_object_set_new(jf, "file", json_string(path));
        json_object_set_new(jf, "format", json_string(fmt));
        for (size_t i = 0; i < n_meta; i++)
            json_object_set_new(jm, bitnet_reader_meta_key(r, i), json_string(bitnet_reader_meta_value(r, i)));
        json_object_set_new(jf, "metadata", jm);
        json_object_set_new(jf, "tensors", jt);
    } else {
        printf("%s: %s", path, fmt);
        if (bitnet_reader_gguf(r))
            printf(" (version %" PRIu32 ", alignment %" PRIu32 ", data at byte %" PRIu64 ")",
                   bitnet_gguf_reader_version(bitnet_reader_gguf(r)), bitnet_gguf_reader_alignment(bitnet_reader_gguf(r)),
                   bitnet_gguf_reader_data_offset(bitnet_reader_gguf(r)));
        putchar('\n');
        if (show_meta) {
            printf("metadata: %zu key%s\n", n_meta, n_meta == 1 ? "" : "s");
            for (size_t i = 0; i < n_meta; i++)
            {
                printf("  %s = ", bitnet_reader_meta_key(r, i));
                print_meta_value(bitnet_reader_meta_value(r, i));
            }
        }
        printf("%-32s %-5s %-16s %12s %12s %12s %7s %s\n", "name", "dtype", "shape", "elements", "stored", "raw",
               "ratio", "scales");
    }
    bitnet_gguf_reader *g = bitnet_reader_gguf(r);
    size_t gi = 0;
    for (;;) {
        const char *type_name = NULL;
        const bitnet_gguf_tensor_desc *d = NULL;
        char note[80];
        uint64_t el = 0, raw, stored;
        if (g) { /* from the header: lists every ggml type, loads nothing */
            d = bitnet_gguf_reader_tensor(g, gi++);
            if (!d) {
                st = BITNET_END;
                break;
            }
            memset(&t, 0, sizeof t);
            type_name = gguf_entry(d, &t.info, &raw);
            stored = d->bytes;
        } else {
            if ((st = bitnet_reader_next(r, &t)) != BITNET_OK) break;
            raw = raw_bytes(&t.info);
            stored = bitnet_reader_stored_bytes(r);
            type_name = bitnet_dtype_name(t.info.dtype);
        }
        bitnet_tensor_elements(&t.info, &el);
        bitnet_shape_str(&t.info, shape, sizeof shape);
        const char *scales = scale_text(&t.info, sk, sizeof sk);
        if (jt) {
            json_t *o = json_object(), *dims = json_array();
            for (uint32_t k = 0; k < t.info.rank; k++) json_array_append_new(dims, json_integer((json_int_t)t.info.dims[k]));
            json_object_set_new(o, "name", json_string(t.info.name));
            json_object_set_new(o, "dtype", json_string(type_name));
            if (d) {
                json_object_set_new(o, "ggml_type", json_integer((json_int_t)d->type));
                json_object_set_new(o, "converts_to", raw ? json_string(bitnet_dtype_name(t.info.dtype)) : json_null());
                if (d->size_from_layout) json_object_set_new(o, "size_from_layout", json_true());
            }
            json_object_set_new(o, "shape", dims);
            json_object_set_new(o, "elements", json_integer((json_int_t)el));
            json_object_set_new(o, "stored_bytes", json_integer((json_int_t)stored));
            json_object_set_new(o, "raw_bytes", json_integer((json_int_t)raw));
            json_object_set_new(o, "ratio", json_real(ratio(raw, stored)));
            json_object_set_new(o, "scales", json_string(t.info.scale_kind == BITNET_SCALE_GROUP ? "group" : scales));
            if (t.info.scale_kind == BITNET_SCALE_GROUP) json_object_set_new(o, "group", json_integer(t.info.group));
            json_array_append_new(jt, o);
        } else {
            if (d && d->size_from_layout)
                snprintf(note, sizeof note, "(unknown ggml type %" PRIu32 ", size from the layout)", d->type);
            else
                snprintf(note, sizeof note, "%s", g && !raw && el ? "(not converted here)" : scales);
            printf("%-32s %-5s %-16s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %7.2f %s\n", t.info.name, type_name, shape,
                   el, stored, raw, ratio(raw, stored), note);
        }
        n_t++;
        tot_el += el;
        tot_stored += stored;
        tot_raw += raw;
        bitnet_tensor_release(&t);
    }
    if (st != BITNET_END) {
        rc = tool_fail(st, "%s", path);
        goto out;
    }
    if (jf) {
        json_t *tot = json_object();
        json_object_set_new(tot, "tensors", json_integer((json_int_t)n_t));
        json_object_set_new(tot, "elements", json_integer((json_int_t)tot_el));
        json_object_set_new(tot, "stored_bytes", json_integer((json_int_t)tot_stored));
        json_object_set_new(tot, "raw_bytes", json_integer((json_int_t)tot_raw));
        json_object_set_new(tot, "ratio", json_real(ratio(tot_raw, tot_stored)));
        json_object_set_new(jf, "total", tot);
        json_array_append(files, jf);
    } else {
        printf("%" PRIu64 " tensor%s, %" PRIu64 " elements, %" PRIu64 " bytes stored, %" PRIu64 " raw, ratio %.2f\n",
               n_t, n_t == 1 ? "" : "s", tot_el, tot_stored, tot_raw, ratio(tot_raw, tot_stored));
    }
    rc = EXIT_OK;
out:
    json_decref(jf);
    bitnet_reader_free(r);
    tool_in_close(f);
    return rc;
}

static int list_devices(int json)
{
    char *text = NULL;
    bitnet_status st = json ? bitnet_devices_json(&text) : bitnet_devices_text(&text);
    if (st) return tool_fail(st, "listing devices");
    fputs(text, stdout);
    if (*text && text[strlen(text) - 1] != '\n') putchar('\n');
    free(text);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    tool_init("bitnet-info");
    tool_std_args std = tool_std_args_new();
    struct arg_lit *json = arg_lit0(NULL, "json", "print JSON for machines");
    struct arg_lit *meta = arg_lit0(NULL, "meta", "also print the files' metadata (always in --json)");
    struct arg_lit *devices = arg_lit0(NULL, "devices", "list the compute devices (CPU, OpenCL) and exit");
    struct arg_file *files = arg_filen(NULL, NULL, "FILE", 0, 1000, "input files ('-' is standard input)");
    struct arg_end *end = arg_end(20);
    void *table[] = {json, meta, devices, files, std.help, std.version, std.quiet, std.verbose, end};
    int done, rc = tool_parse(argc, argv, table, &std, purpose, &done);
    if (rc || done) goto out;
    if (devices->count) {
        if (files->count || meta->count) {
            msg_err("--devices takes no files and no --meta");
            rc = EXIT_USAGE;
            goto out;
        }
        rc = list_devices(json->count > 0);
        goto out;
    }
    if (files->count < 1) {
        msg_err("no input: give FILE... ('-' for standard input)");
        rc = EXIT_USAGE;
        goto out;
    }
    int nstdin = 0;
    for (int i = 0; i < files->count; i++) nstdin += strcmp(files->filename[i], "-") == 0;
    if (nstdin > 1) {
        msg_err("standard input can be read only once");
        rc = EXIT_USAGE;
        goto out;
    }
    json_t *jfiles = json->count ? json_array() : NULL;
    for (int i = 0; i < files->count; i++) {
        if (i && !jfiles) putchar('\n');
        int frc = info_file(files->filename[i], meta->count > 0, jfiles);
        if (frc && !rc) rc = frc; /* the first failure decides the status; go on with the rest */
    }
    if (jfiles) {
        json_t *root = json_object();
        json_object_set_new(root, "files", jfiles);
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s) puts(s);
        free(s);
        json_decref(root);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        msg_err("write to standard output failed");
        if (!rc) rc = EXIT_IO;
    }
out:
    free(std.force); /* not in the table: nothing to force */
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
