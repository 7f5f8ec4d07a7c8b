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
 *   timeline   12 records of three keys at known times (trace dump and slice
 *              tests; the layout is in timeline() below) and a dropped marker
 *   ctrl       records whose qualname, request id and model name hold ESC,
 *              BEL and newlines
 *   badmagic   a header whose magic is WRNG
 *   empty      an empty file
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/format.h"
#include "trace/recorder.h"
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

/* One record of the given keys (no other args but extra). */
static void record_keys(double t, const char *q, const lmc_object_key *k, size_t n,
                        const lmc_trace_arg *extra, size_t n_extra)
{
    lmc_tv items[NKEYS];
    for (size_t i = 0; i < n; i++)
        items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &k[i]};
    lmc_trace_arg args[6];
    args[0] = (lmc_trace_arg){"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, n}}};
    for (size_t i = 0; i < n_extra; i++)
        args[1 + i] = extra[i];
    if (lmc_trace_encode_record(&buf, t, 1767225600.0 + t, q, strlen(q), args, 1 + n_extra,
                                NULL) != LMC_OK)
        die("cannot encode a record");
}

static void record(double t, const char *q, const lmc_trace_arg *extra, size_t n_extra)
{
    record_keys(t, q, keys, NKEYS, extra, n_extra);
}

/*
 * Of keys at t: a store (reserve_write, finish_write 0.25 s later) when
 * is_store, else a read (submit_prefetch_task with request id req, then read
 * enter, read exit and finish_read 0.1 s apart).
 */
static void store_and_read(double t, const lmc_object_key *k, size_t n, const char *req,
                           bool is_store)
{
    lmc_trace_arg rw[2] = {
        {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &layout}},
        {"mode", 4, lmc_tv_str("new", 3)},
    };
    lmc_trace_arg sp[4] = {
        {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &layout}},
        {"extra_count", 11, lmc_tv_int(0)},
        {"external_request_id", 19, lmc_tv_str(req, strlen(req))},
        {"policy", 6, {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_PREFIX}},
    };
    lmc_trace_arg fr[1] = {{"extra_count", 11, lmc_tv_int(0)}};
    if (is_store) {
        record_keys(t, P "reserve_write", k, n, rw, 2);
        record_keys(t + 0.25, P "finish_write", k, n, NULL, 0);
        return;
    }
    record_keys(t, P "submit_prefetch_task", k, n, sp, 4);
    record_keys(t + 0.1, P "read_prefetched_results.__enter__", k, n, NULL, 0);
    record_keys(t + 0.2, P "read_prefetched_results.__exit__", k, n, NULL, 0);
    record_keys(t + 0.3, P "finish_read_prefetched", k, n, fr, 1);
}

/*
 * Keys A, B, C (chunk hashes aa1122.., bb1122.., cc1122..; 32 bytes):
 *    1 0.00 reserve_write A B        7 2.00 reserve_write C
 *    2 0.25 finish_write A B         8 2.25 finish_write C
 *    3 1.00 submit_prefetch A        9 3.00 submit_prefetch A B C
 *    4 1.10 read enter A            10 3.10 read enter A B C
 *    5 1.20 read exit A             11 3.20 read exit A B C
 *    6 1.30 finish_read A           12 3.30 finish_read A B C
 * then the recorder's dropped-records marker (dropped_count 2) at 3.5.
 */
static void timeline(void)
{
    lmc_object_key abc[3];
    for (size_t i = 0; i < 3; i++) {
        uint8_t h[32];
        for (size_t j = 0; j < sizeof(h); j++)
            h[j] = (uint8_t)(0x11 * j);
        h[0] = (uint8_t)(0xaa + 0x11 * i);
        if (lmc_object_key_make(&abc[i], h, sizeof(h), "meta-llama/Llama-3.1-8B", 0x01000100, 0,
                                "", NULL) != LMC_OK)
            die("cannot make a key");
    }
    store_and_read(0.0, abc, 2, "", true);
    store_and_read(1.0, abc, 1, "req-1", false);
    store_and_read(2.0, abc + 2, 1, "", true);
    store_and_read(3.0, abc, 3, "req-2", false);
    lmc_trace_arg d = {"dropped_count", 13, lmc_tv_int(2)};
    if (lmc_trace_encode_record(&buf, 3.5, 1767225603.5, LMC_TRACE_DROPPED_QUALNAME,
                                strlen(LMC_TRACE_DROPPED_QUALNAME), &d, 1, NULL) != LMC_OK)
        die("cannot encode the marker");
}

/* Control characters where a trace can carry strings: qualname, request id, model name. */
static void ctrl(void)
{
    lmc_object_key k;
    uint8_t h[32] = {0xee};
    if (lmc_object_key_make(&k, h, sizeof(h), "model\x1b[2J", 0, 0, "", NULL) != LMC_OK)
        die("cannot make a key");
    record_keys(0.0, "lmcache.evil\x1b[31m\nforged 1 line\x07", &keys[0], 1, NULL, 0);
    lmc_trace_arg sp[4] = {
        {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &layout}},
        {"extra_count", 11, lmc_tv_int(0)},
        {"external_request_id", 19, lmc_tv_str("req\x1b]0;title\x07\n", 14)},
        {"policy", 6, {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_PREFIX}},
    };
    record_keys(0.1, P "submit_prefetch_task", &k, 1, sp, 4);
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
        fprintf(stderr, "usage: make_trace store|cycle|schema1|unknown|long|config|timeline|ctrl|"
                        "badmagic|empty OUT\n");
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
    } else if (strcmp(kind, "timeline") == 0) {
        header(2, "LMCT");
        timeline();
    } else if (strcmp(kind, "ctrl") == 0) {
        header(2, "LMCT");
        ctrl();
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
