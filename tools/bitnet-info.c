/*
 * bitnet-info - lists the tensors of .bnt, .npy and safetensors files (name,
 * dtype, shape, elements, stored and raw bytes, compression ratio, scales),
 * their metadata, or the compute devices.
 */
#include "common.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char purpose[] =
    "Lists the tensors of .bnt, .npy and safetensors files (format told by magic bytes),\n"
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
        printf("%s: %s\n", path, fmt);
        if (show_meta) {
            printf("metadata: %zu key%s\n", n_meta, n_meta == 1 ? "" : "s");
            for (size_t i = 0; i < n_meta; i++)
                printf("  %s = %s\n", bitnet_reader_meta_key(r, i), bitnet_reader_meta_value(r, i));
        }
        printf("%-32s %-5s %-16s %12s %12s %12s %7s %s\n", "name", "dtype", "shape", "elements", "stored", "raw",
               "ratio", "scales");
    }
    while ((st = bitnet_reader_next(r, &t)) == BITNET_OK) {
        uint64_t el = 0, raw = raw_bytes(&t.info), stored = bitnet_reader_stored_bytes(r);
        bitnet_tensor_elements(&t.info, &el);
        bitnet_shape_str(&t.info, shape, sizeof shape);
        const char *scales = scale_text(&t.info, sk, sizeof sk);
        if (jt) {
            json_t *o = json_object(), *dims = json_array();
            for (uint32_t d = 0; d < t.info.rank; d++) json_array_append_new(dims, json_integer((json_int_t)t.info.dims[d]));
            json_object_set_new(o, "name", json_string(t.info.name));
            json_object_set_new(o, "dtype", json_string(bitnet_dtype_name(t.info.dtype)));
            json_object_set_new(o, "shape", dims);
            json_object_set_new(o, "elements", json_integer((json_int_t)el));
            json_object_set_new(o, "stored_bytes", json_integer((json_int_t)stored));
            json_object_set_new(o, "raw_bytes", json_integer((json_int_t)raw));
            json_object_set_new(o, "ratio", json_real(ratio(raw, stored)));
            json_object_set_new(o, "scales", json_string(t.info.scale_kind == BITNET_SCALE_GROUP ? "group" : scales));
            if (t.info.scale_kind == BITNET_SCALE_GROUP) json_object_set_new(o, "group", json_integer(t.info.group));
            json_array_append_new(jt, o);
        } else {
            printf("%-32s %-5s %-16s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %7.2f %s\n", t.info.name,
                   bitnet_dtype_name(t.info.dtype), shape, el, stored, raw, ratio(raw, stored), scales);
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
