/*
 * make_trace.c -- writes small, deterministic .lct traces for the
 * end-to-end tests (frames through src/trace/format.c, fixed timestamps).
 *
 * usage: make_trace KIND OUT.lct
 *   store      reserve_write(new) + finish_write of 4 keys, 50 ms apart
 *   cycle      store, submit_prefetch_task, read enter/exit, finish_read
 *   schema1    the store trace with trace_schema_version 1 in the header
 *   unknown    the store trace plus a record of an unknown qualname
 *   long       the store trace every 50 ms for 60 s (2400 records), for Ctrl-C
 *   config     the store trace with a recorded config (l1_size_gb 0.01) and its digest
 *   badmagic   a header whose magic is WRNG
 *   empty      an empty file
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/format.h"
#include "trace/value.h"

#define P LMC_TRACE_QUALNAME_PREFIX
#define NKEYS 4

static msgpack_sbuffer buf;
static lmc_object_key keys[NKEYS];
static lmc_layout_desc layout;

static void die(const char *what)
{
    fprintf(stderr, "make_trace: %s\n", what);
    exit(1);
}

static char *g_config_json = "";
static char *g_config_digest = "";

static void header(int64_t schema, const char *magic)
{
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, magic, 4);
    h.magic_len = 4;
    h.format_version = 1;
    h.level = "storage";
    h.trace_schema_version = schema;
    h.t_mono_start = 1000.0;
    h.t_wall_start = 1767225600.0;
    h.sm_config_json = g_config_json;
    h.sm_config_digest = g_config_digest;
    if (lmc_trace_encode_header(&buf, &h, NULL) != LMC_OK)
        die("cannot encode the header");
}

static void record(double t, const char *q, const lmc_trace_arg *extra, size_t n_extra)
{
    lmc_tv items[NKEYS];
    for (size_t i = 0; i < NKEYS; i++)
        items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[i]};
    lmc_trace_arg args[6];
    args[0] = (lmc_trace_arg){"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, NKEYS}}};
    for (size_t i = 0; i < n_extra; i++)
        args[1 + i] = extra[i];
    if (lmc_trace_encode_record(&buf, t, 1767225600.0 + t, q, strlen(q), args, 1 + n_extra,
                                NULL) != LMC_OK)
        die("cannot encode a record");
}

static void store(double t)
{
    lmc_trace_arg rw[2] = {
        {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &layout}},
        {"mode", 4, lmc_tv_str("new", 3)},
    };
    record(t, P "reserve_write", rw, 2);
    record(t + 0.05, P "finish_write", NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr,
                "usage: make_trace store|cycle|schema1|unknown|long|config|badmagic|empty OUT\n");
        return 2;
    }
    const char *kind = argv[1];
    for (size_t i = 0; i < NKEYS; i++) {
        uint8_t h[32] = {0};
        h[0] = (uint8_t)(i + 1);
        if (lmc_object_key_make(&keys[i], h, sizeof(h), "meta-llama/Llama-3.1-8B", 0x01000100, 0,
                                "", NULL) != LMC_OK)
            die("cannot make a key");
    }
    int64_t dims[4] = {2, 4, 256, 64};
    if (lmc_layout_desc_make1(&layout, dims, 4, LMC_DTYPE_BFLOAT16, NULL) != LMC_OK)
        die("cannot make the layout");

    msgpack_sbuffer_init(&buf);
    if (strcmp(kind, "empty") == 0) {
        /* nothing */
    } else if (strcmp(kind, "badmagic") == 0) {
        header(2, "WRNG");
    } else if (strcmp(kind, "store") == 0 || strcmp(kind, "schema1") == 0 ||
               strcmp(kind, "unknown") == 0) {
        header(strcmp(kind, "schema1") == 0 ? 1 : 2, "LMCT");
        store(0.0);
        if (strcmp(kind, "unknown") == 0)
            record(0.06, "lmcache.v1.some.future.Op.call", NULL, 0);
    } else if (strcmp(kind, "long") == 0) {
        header(2, "LMCT");
        for (int i = 0; i < 1200; i++)
            store(0.05 * i);
    } else if (strcmp(kind, "config") == 0) {
        /* Not a real config's text: what trace info --config and the diff do with one. */
        g_config_json = "{\"l1_size_gb\": 0.01, \"l2_adapter_config\": {\"adapters\": [{\"type\": "
                        "\"fs\", \"base_path\": \"/recorded\"}]}}";
        g_config_digest = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        header(2, "LMCT");
        store(0.0);
    } else if (strcmp(kind, "cycle") == 0) {
        header(2, "LMCT");
        store(0.0);
        lmc_trace_arg sp[4] = {
            {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &layout}},
            {"extra_count", 11, lmc_tv_int(0)},
            {"external_request_id", 19, lmc_tv_str("req-1", 5)},
            {"policy", 6, {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_PREFIX}},
        };
        record(0.10, P "submit_prefetch_task", sp, 4);
        record(0.11, P "read_prefetched_results.__enter__", NULL, 0);
        record(0.12, P "read_prefetched_results.__exit__", NULL, 0);
        lmc_trace_arg fr[1] = {{"extra_count", 11, lmc_tv_int(0)}};
        record(0.13, P "finish_read_prefetched", fr, 1);
    } else {
        die("unknown kind");
    }
    FILE *f = fopen(argv[2], "wb");
    if (f == NULL || (buf.size > 0 && fwrite(buf.data, 1, buf.size, f) != buf.size) ||
        fclose(f) != 0)
        die("cannot write the output");
    msgpack_sbuffer_destroy(&buf);
    return 0;
}
