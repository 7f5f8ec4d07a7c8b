/*
 * test_trace_format.c -- .lct frames: the Header and Record byte layout
 * (spec/trace-format.md section 1 and Appendix A), msgspec's decoding rules,
 * the peek fast path and the hostile-input checks of the decoder.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>
#include <string.h>

#include "helpers/trace_test_util.h"
#include "trace/codec.h"
#include "trace/format.h"

/* Appendix A, verbatim. */
static const char HEADER_HEX[] =
    "0000009b89a474797065a6686561646572a56d61676963c4044c4d4354ae666f726d61745f76657273696f6e01a5"
    "6c6576656ca773746f72616765b474726163655f736368656d615f76657273696f6e02ac745f6d6f6e6f5f737461"
    "7274cb4059200000000000ac745f77616c6c5f7374617274cb41d954fc40100000ae736d5f636f6e6669675f6a73"
    "6f6ea0b0736d5f636f6e6669675f646967657374a0";
static const char RECORD_HEX[] =
    "0000004385a474797065a67265636f7264a6745f6d6f6e6fcb3fe0000000000000a6745f77616c6ccb41d954fc40"
    "300000a87175616c6e616d65a3612e62a46172677381a17801";

static void assert_msg_contains(const lmc_error *err, const char *want)
{
    if (strstr(err->msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", err->msg, want);
}

static lmc_trace_header appendix_header(void)
{
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, "LMCT", 4);
    h.magic_len = 4;
    h.format_version = 1;
    h.level = "storage";
    h.trace_schema_version = 2;
    h.t_mono_start = 100.5;
    h.t_wall_start = 1700000000.25;
    h.sm_config_json = "";
    h.sm_config_digest = "";
    return h;
}

/* Encode the Appendix A record {"x": 1} into sb (initialised here). */
static void appendix_record(msgpack_sbuffer *sb)
{
    msgpack_sbuffer_init(sb);
    lmc_trace_arg args[1] = {{"x", 1, lmc_tv_int(1)}};
    assert_int_equal(lmc_trace_encode_record(sb, 0.5, 1700000000.75, "a.b", 3, args, 1, NULL),
                     LMC_OK);
}

/* The body of the single frame in sb, checking its length prefix. */
static const uint8_t *frame_body(const msgpack_sbuffer *sb, size_t *len)
{
    assert_true(sb->size >= 4);
    *len = lmc_get_be32((const uint8_t *)sb->data);
    assert_int_equal(*len + 4, sb->size);
    return (const uint8_t *)sb->data + 4;
}

/* ---------------------------------------------------------------------- */
/* Encoding                                                                */
/* ---------------------------------------------------------------------- */

static void test_header_frame_matches_appendix_a_byte_for_byte(void **state)
{
    (void)state;
    lmc_trace_header h = appendix_header();
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_header(&sb, &h, NULL), LMC_OK);
    assert_int_equal(sb.size, 159);
    tt_assert_hex(sb.data, sb.size, HEADER_HEX);
    msgpack_sbuffer_destroy(&sb);
}

static void test_record_frame_matches_appendix_a_byte_for_byte(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    appendix_record(&sb);
    assert_int_equal(sb.size, 71);
    tt_assert_hex(sb.data, sb.size, RECORD_HEX);
    msgpack_sbuffer_destroy(&sb);
}

static void test_frames_append_to_what_the_buffer_holds(void **state)
{
    (void)state;
    lmc_trace_header h = appendix_header();
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_header(&sb, &h, NULL), LMC_OK);
    lmc_trace_arg args[1] = {{"x", 1, lmc_tv_int(1)}};
    assert_int_equal(lmc_trace_encode_record(&sb, 0.5, 1700000000.75, "a.b", 3, args, 1, NULL),
                     LMC_OK);
    assert_int_equal(sb.size, 159 + 71);
    tt_assert_hex(sb.data + 159, 71, RECORD_HEX);
    msgpack_sbuffer_destroy(&sb);
}

static void test_header_with_level_meta_writes_it_last(void **state)
{
    (void)state;
    lmc_trace_header h = appendix_header();
    h.level = "events";
    char *keys[2] = {"instance_id", "lmcache_version"};
    char *vals[2] = {"node-a", "0.3"};
    h.meta_keys = keys;
    h.meta_values = vals;
    h.n_meta = 2;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_header(&sb, &h, NULL), LMC_OK);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    assert_int_equal(body[0], 0x8a);
    /* ... sm_config_digest "" then level_meta {"instance_id": "node-a", ...} at the end. */
    const char *tail_hex = "b0736d5f636f6e6669675f646967657374a0 aa6c6576656c5f6d657461 82"
                           " ab696e7374616e63655f6964 a66e6f64652d61"
                           " af6c6d63616368655f76657273696f6e a3302e33";
    size_t tn;
    uint8_t *tail = tt_unhex(tail_hex, &tn);
    assert_true(len >= tn);
    tt_assert_hex(body + len - tn, tn, tail_hex);
    free(tail);
    msgpack_sbuffer_destroy(&sb);
}

static void test_encode_record_failure_leaves_the_buffer_unchanged(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    appendix_record(&sb);
    size_t before = sb.size;
    uint8_t *copy = malloc(before);
    memcpy(copy, sb.data, before);

    lmc_tv payload = lmc_tv_int(1);
    lmc_trace_arg args[2] = {{"ok", 2, lmc_tv_str("fine", 4)},
                             {"bad", 3, {.kind = LMC_TV_KIND_MAX - 1, .u.ext = &payload}}};
    lmc_error err;
    assert_int_equal(lmc_trace_encode_record(&sb, 1.0, 2.0, "a.c", 3, args, 2, &err),
                     LMC_ERR_UNSUPPORTED);
    assert_msg_contains(&err, "no codec");
    assert_int_equal(sb.size, before);
    assert_memory_equal(sb.data, copy, before);

    /* The buffer is still usable: the next record lands right behind. */
    assert_int_equal(lmc_trace_encode_record(&sb, 1.0, 2.0, "a.c", 3, args, 1, NULL), LMC_OK);
    assert_int_equal(lmc_get_be32((uint8_t *)sb.data + before) + 4, sb.size - before);
    free(copy);
    msgpack_sbuffer_destroy(&sb);
}

/* ---------------------------------------------------------------------- */
/* Decoding                                                                */
/* ---------------------------------------------------------------------- */

static void test_header_decode_round_trips(void **state)
{
    (void)state;
    lmc_trace_header h = appendix_header();
    h.sm_config_json = "{\"l1\": 1}";
    h.sm_config_digest = "abc";
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_header(&sb, &h, NULL), LMC_OK);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    lmc_trace_header d;
    assert_int_equal(lmc_trace_decode_header(body, len, &d, NULL), LMC_OK);
    assert_int_equal(d.magic_len, 4);
    assert_memory_equal(d.magic, "LMCT", 4);
    assert_int_equal(d.format_version, 1);
    assert_string_equal(d.level, "storage");
    assert_int_equal(d.trace_schema_version, 2);
    assert_true(d.t_mono_start == 100.5);
    assert_true(d.t_wall_start == 1700000000.25);
    assert_string_equal(d.sm_config_json, "{\"l1\": 1}");
    assert_string_equal(d.sm_config_digest, "abc");
    assert_int_equal(d.n_meta, 0);
    lmc_trace_header_free(&d);
    msgpack_sbuffer_destroy(&sb);
}

static void test_header_level_meta_decodes_sorted_as_text(void **state)
{
    (void)state;
    /* level_meta {"lmcache_version": "0.3", "cache_event_schema_version": 1} */
    const char *hex =
        "8a a474797065 a6686561646572 a56d61676963 c4044c4d4354 ae666f726d61745f76657273696f6e 01"
        " a56c6576656c a66576656e7473 b474726163655f736368656d615f76657273696f6e 02"
        " ac745f6d6f6e6f5f7374617274 cb4059200000000000 ac745f77616c6c5f7374617274 01"
        " ae736d5f636f6e6669675f6a736f6e a0 b0736d5f636f6e6669675f646967657374 a0"
        " aa6c6576656c5f6d657461 82 af6c6d63616368655f76657273696f6e a3302e33"
        " ba63616368655f6576656e745f736368656d615f76657273696f6e 01";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_trace_header d;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_header(body, n, &d, &err), LMC_OK);
    free(body);
    assert_int_equal(d.n_meta, 2);
    assert_string_equal(d.meta_keys[0], "cache_event_schema_version");
    assert_string_equal(d.meta_values[0], "1");
    assert_string_equal(d.meta_keys[1], "lmcache_version");
    assert_string_equal(d.meta_values[1], "0.3");
    assert_true(d.t_wall_start == 1.0); /* an int in a float field */
    lmc_trace_header_free(&d);
}

static void test_record_decode_round_trips_with_args(void **state)
{
    (void)state;
    lmc_object_key k = tt_key("m", 7, 1, 0, "s");
    lmc_tv keyv = {.kind = LMC_TV_OBJECT_KEY, .u.key = &k};
    lmc_trace_arg args[2] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {&keyv, 1}}},
                             {"mode", 4, lmc_tv_str("new", 3)}};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_record(&sb, 1.25, 1700000001.5,
                                             LMC_TRACE_QUALNAME_PREFIX "reserve_write", 0, args, 2,
                                             NULL),
                     LMC_OK);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_decode_record(body, len, &a, &rec, NULL), LMC_OK);
    assert_true(rec.t_mono == 1.25);
    assert_true(rec.t_wall == 1700000001.5);
    assert_string_equal(rec.qualname, LMC_TRACE_QUALNAME_PREFIX "reserve_write");
    assert_int_equal(rec.qualname_len, strlen(LMC_TRACE_QUALNAME_PREFIX "reserve_write"));
    assert_int_equal(rec.nargs, 2);
    assert_string_equal(rec.args[0].name, "keys");
    assert_true(lmc_object_key_equal(rec.args[0].value.u.list.items[0].u.key, &k));
    assert_memory_equal(rec.args[1].value.u.s.ptr, "new", 3);
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_record_type_mismatch_is_an_error(void **state)
{
    (void)state;
    lmc_trace_header h = appendix_header();
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_header(&sb, &h, NULL), LMC_OK);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_record(body, len, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "invalid type tag 'header' (expected 'record')");
    assert_int_equal(
        lmc_trace_peek_record(body, len, &rec.t_mono, &rec.qualname, &rec.qualname_len, &err),
        LMC_ERR_FORMAT);
    assert_msg_contains(&err, "invalid type tag 'header'");
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_header_type_mismatch_is_an_error(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    appendix_record(&sb);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    lmc_trace_header d;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_header(body, len, &d, &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "invalid type tag 'record' (expected 'header')");
    msgpack_sbuffer_destroy(&sb);
}

static void test_record_missing_field_is_named(void **state)
{
    (void)state;
    /* {"type":"record","t_mono":0.5,"t_wall":1.0,"args":{}} */
    const char *hex = "84 a474797065 a67265636f7264 a6745f6d6f6e6f cb3fe0000000000000"
                      " a6745f77616c6c cb3ff0000000000000 a461726773 80";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_record(body, n, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record: missing required field 'qualname'");
    free(body);
    lmc_arena_free(&a);
}

static void test_g1_header_without_schema_version_is_rejected(void **state)
{
    (void)state;
    /* magic, format_version, level, lmcache_version, t_mono_start, t_wall_start, json, digest */
    const char *hex =
        "89 a474797065 a6686561646572 a56d61676963 c4044c4d4354 ae666f726d61745f76657273696f6e 01"
        " a56c6576656c a773746f72616765 af6c6d63616368655f76657273696f6e a3302e31"
        " ac745f6d6f6e6f5f7374617274 01 ac745f77616c6c5f7374617274 01"
        " ae736d5f636f6e6669675f6a736f6e a0 b0736d5f636f6e6669675f646967657374 a0";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_trace_header d;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_header(body, n, &d, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Header: missing required field 'trace_schema_version'");
    free(body);
}

static void test_float_fields_accept_ints(void **state)
{
    (void)state;
    /* {"type":"record","t_mono":3,"t_wall":-2,"qualname":"q","args":{}} */
    const char *hex = "85 a474797065 a67265636f7264 a6745f6d6f6e6f 03 a6745f77616c6c fe"
                      " a87175616c6e616d65 a171 a461726773 80";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_decode_record(body, n, &a, &rec, NULL), LMC_OK);
    assert_true(rec.t_mono == 3.0);
    assert_true(rec.t_wall == -2.0);
    double t = 0;
    const char *q;
    size_t qn;
    assert_int_equal(lmc_trace_peek_record(body, n, &t, &q, &qn, NULL), LMC_OK);
    assert_true(t == 3.0);
    free(body);
    lmc_arena_free(&a);
}

static void test_float_field_rejects_a_string(void **state)
{
    (void)state;
    const char *hex = "84 a6745f6d6f6e6f a178 a6745f77616c6c 01 a87175616c6e616d65 a171"
                      " a461726773 80";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_record(body, n, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record.t_mono: expected float, got str");
    free(body);
    lmc_arena_free(&a);
}

static void test_unknown_keys_are_skipped_and_type_may_be_absent(void **state)
{
    (void)state;
    /* no "type"; an unknown "extra": [1, {"a": nil}] before args */
    const char *hex = "85 a6745f6d6f6e6f cb3fe0000000000000 a6745f77616c6c 01"
                      " a87175616c6e616d65 a3612e62 a56578747261 92 01 81 a161 c0"
                      " a461726773 81 a178 01";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_record(body, n, &a, &rec, &err), LMC_OK);
    assert_string_equal(rec.qualname, "a.b");
    assert_int_equal(rec.nargs, 1);
    assert_int_equal(rec.args[0].value.u.i, 1);
    free(body);
    lmc_arena_free(&a);
}

static void test_peek_returns_t_mono_and_qualname(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    appendix_record(&sb);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    double t = 0;
    const char *q = NULL;
    size_t qn = 0;
    assert_int_equal(lmc_trace_peek_record(body, len, &t, &q, &qn, NULL), LMC_OK);
    assert_true(t == 0.5);
    assert_int_equal(qn, 3);
    assert_memory_equal(q, "a.b", 3);
    assert_true((const uint8_t *)q > body && (const uint8_t *)q < body + len); /* in place */
    msgpack_sbuffer_destroy(&sb);
}

static void test_peek_does_not_look_at_args(void **state)
{
    (void)state;
    /* args holds an unknown tag, which a full decode rejects. */
    const char *hex = "85 a474797065 a67265636f7264 a6745f6d6f6e6f cb3fe0000000000000"
                      " a6745f77616c6c 01 a87175616c6e616d65 a3612e62"
                      " a461726773 81 a178 82 a55f5f745f5f a44e6f7065 a176 01";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    double t;
    const char *q;
    size_t qn;
    assert_int_equal(lmc_trace_peek_record(body, n, &t, &q, &qn, NULL), LMC_OK);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(lmc_trace_decode_record(body, n, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "argument 'x': trace.codecs: unknown tag 'Nope'");
    free(body);
    lmc_arena_free(&a);
}

static void test_peek_of_truncated_body_is_an_error(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    appendix_record(&sb);
    size_t len;
    const uint8_t *body = frame_body(&sb, &len);
    /* Every cut that ends before the qualname is complete must fail, never read past. */
    for (size_t cut = 0; cut < 58; cut++) {
        uint8_t *copy = malloc(cut > 0 ? cut : 1);
        memcpy(copy, body, cut);
        double t;
        const char *q;
        size_t qn;
        lmc_error err;
        if (lmc_trace_peek_record(copy, cut, &t, &q, &qn, &err) == LMC_OK)
            fail_msg("peek of %zu bytes succeeded", cut);
        free(copy);
    }
    msgpack_sbuffer_destroy(&sb);
}

/* ---------------------------------------------------------------------- */
/* Hostile bodies                                                          */
/* ---------------------------------------------------------------------- */

static lmc_status decode_hex(const char *hex, lmc_error *err)
{
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_status st = lmc_trace_decode_record(body, n, &a, &rec, err);
    free(body);
    lmc_arena_free(&a);
    return st;
}

static void test_huge_declared_counts_are_rejected_before_allocation(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(decode_hex("dfffffffff", &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "truncated");
    assert_int_equal(decode_hex("81 a461726773 ddffffffff 00", &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "truncated");
    assert_int_equal(decode_hex("81 a461726773 dbffffffff 00", &err), LMC_ERR_FORMAT);
}

static void test_invalid_byte_and_trailing_bytes_are_rejected(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(decode_hex("81 a178 c1", &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "invalid msgpack byte 0xc1");
    assert_int_equal(decode_hex("80 00", &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "trailing");
    assert_int_equal(decode_hex("", &err), LMC_ERR_FORMAT);
    assert_int_equal(decode_hex("92 01", &err), LMC_ERR_FORMAT);
    assert_int_equal(decode_hex("93 01 02 03", &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "expected a msgpack map");
}

static void test_nesting_deeper_than_msgpack_c_allows_is_rejected(void **state)
{
    (void)state;
    /* a map whose "x" holds 40 nested one-element arrays */
    char hex[256] = "81 a178 ";
    for (int i = 0; i < 40; i++)
        strcat(hex, "91");
    strcat(hex, "c0");
    lmc_error err;
    assert_int_equal(decode_hex(hex, &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "nested deeper than 32");
}

static void test_ext_values_are_skipped_under_unknown_keys_but_rejected_in_args(void **state)
{
    (void)state;
    /* an unknown key holding a fixext 4 and an ext8; the record still decodes */
    lmc_error err;
    assert_int_equal(decode_hex("86 a6745f6d6f6e6f 00 a6745f77616c6c 00 a87175616c6e616d65 a171"
                                " a161 d6 01 01020304 a162 c7 02 05 aabb a461726773 80",
                                &err),
                     LMC_OK);
    assert_int_equal(decode_hex("84 a6745f6d6f6e6f 00 a6745f77616c6c 00 a87175616c6e616d65 a171"
                                " a461726773 81 a178 d4 01 00",
                                &err),
                     LMC_ERR_FORMAT);
    assert_msg_contains(&err, "unsupported msgpack type ext");
}

/* ---------------------------------------------------------------------- */
/* The parser against msgpack-c                                            */
/* ---------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random msgpack value in every wire form msgpack-c can produce. */
static void random_value(msgpack_packer *pk, uint64_t *rng, int depth)
{
    static const int64_t ints[] = {
        0,         1,  127, 128, 255,  256,  65535,  65536,  4294967295LL, 4294967296LL,
        INT64_MAX, -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN,    INT64_MIN};
    static char text[400];
    if (text[0] == '\0')
        memset(text, 'q', sizeof(text));
    int kind = (int)(rng_next(rng) % (depth < 4 ? 12 : 9));
    size_t n;
    switch (kind) {
    case 0:
        msgpack_pack_nil(pk);
        break;
    case 1:
        rng_next(rng) % 2 ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        break;
    case 2:
        msgpack_pack_int64(pk, ints[rng_next(rng) % (sizeof(ints) / sizeof(ints[0]))]);
        break;
    case 3:
        msgpack_pack_uint64(pk, (uint64_t)INT64_MAX >> (rng_next(rng) % 64));
        break;
    case 4:
        msgpack_pack_double(pk, (double)(int64_t)rng_next(rng) / 7.0);
        break;
    case 5:
        msgpack_pack_float(pk, 1.5f);
        break;
    case 6:
        n = (size_t[]){0, 5, 31, 32, 255, 256, 300}[rng_next(rng) % 7];
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, text, n);
        break;
    case 7:
        n = (size_t[]){0, 3, 255, 256, 399}[rng_next(rng) % 5];
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, text, n);
        break;
    case 8: {
        /* a tuple, so tagged values go through the same path */
        static const char wrap[] = "\x82\xa5__t__\xa5tuple\xa1v";
        pk->callback(pk->data, wrap, sizeof(wrap) - 1);
        msgpack_pack_array(pk, 1);
        msgpack_pack_int64(pk, 5);
        break;
    }
    case 9:
    case 10:
        n = (size_t[]){0, 1, 15, 16, 20}[rng_next(rng) % 5];
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++)
            random_value(pk, rng, depth + 1);
        break;
    default:
        n = (size_t[]){0, 1, 15, 16}[rng_next(rng) % 4];
        msgpack_pack_map(pk, n);
        for (size_t i = 0; i < n; i++) {
            char key[2] = {(char)('a' + i % 26), 0};
            msgpack_pack_str(pk, 1);
            msgpack_pack_str_body(pk, key, 1);
            random_value(pk, rng, depth + 1);
        }
        break;
    }
}

static void test_parser_agrees_with_msgpack_c_on_random_values(void **state)
{
    (void)state;
    uint64_t rng = 0x2545f4914f6cdd1dULL;
    lmc_arena a;
    lmc_arena_init(&a, 0);
    for (int iter = 0; iter < 300; iter++) {
        /* a record body whose args are {"x": <random value>} */
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        static const char head[] = "\x84\xa6t_mono\x00\xa6t_wall\x00\xa8qualname\xa1q"
                                   "\xa4"
                                   "args\x81\xa1x";
        msgpack_sbuffer_write(&sb, head, sizeof(head) - 1);
        size_t value_at = sb.size;
        random_value(&pk, &rng, 0);

        lmc_arena_reset(&a);
        lmc_trace_record rec;
        lmc_error err;
        if (lmc_trace_decode_record(sb.data, sb.size, &a, &rec, &err) != LMC_OK)
            fail_msg("iteration %d: %s", iter, err.msg);
        size_t n1 = lmc_tv_format(&rec.args[0].value, NULL, 0);
        char *ours = malloc(n1 + 1);
        lmc_tv_format(&rec.args[0].value, ours, n1 + 1);

        lmc_tv ref;
        assert_int_equal(tt_decode(sb.data + value_at, sb.size - value_at, &a, &ref, NULL), LMC_OK);
        size_t n2 = lmc_tv_format(&ref, NULL, 0);
        char *theirs = malloc(n2 + 1);
        lmc_tv_format(&ref, theirs, n2 + 1);
        if (strcmp(ours, theirs) != 0)
            fail_msg("iteration %d differs:\n ours:   %.300s\n theirs: %.300s", iter, ours, theirs);
        free(ours);
        free(theirs);
        msgpack_sbuffer_destroy(&sb);
    }
    lmc_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_frame_matches_appendix_a_byte_for_byte),
        cmocka_unit_test(test_record_frame_matches_appendix_a_byte_for_byte),
        cmocka_unit_test(test_frames_append_to_what_the_buffer_holds),
        cmocka_unit_test(test_header_with_level_meta_writes_it_last),
        cmocka_unit_test(test_encode_record_failure_leaves_the_buffer_unchanged),
        cmocka_unit_test(test_header_decode_round_trips),
        cmocka_unit_test(test_header_level_meta_decodes_sorted_as_text),
        cmocka_unit_test(test_record_decode_round_trips_with_args),
        cmocka_unit_test(test_record_type_mismatch_is_an_error),
        cmocka_unit_test(test_header_type_mismatch_is_an_error),
        cmocka_unit_test(test_record_missing_field_is_named),
        cmocka_unit_test(test_g1_header_without_schema_version_is_rejected),
        cmocka_unit_test(test_float_fields_accept_ints),
        cmocka_unit_test(test_float_field_rejects_a_string),
        cmocka_unit_test(test_unknown_keys_are_skipped_and_type_may_be_absent),
        cmocka_unit_test(test_peek_returns_t_mono_and_qualname),
        cmocka_unit_test(test_peek_does_not_look_at_args),
        cmocka_unit_test(test_peek_of_truncated_body_is_an_error),
        cmocka_unit_test(test_huge_declared_counts_are_rejected_before_allocation),
        cmocka_unit_test(test_invalid_byte_and_trailing_bytes_are_rejected),
        cmocka_unit_test(test_nesting_deeper_than_msgpack_c_allows_is_rejected),
        cmocka_unit_test(test_ext_values_are_skipped_under_unknown_keys_but_rejected_in_args),
        cmocka_unit_test(test_parser_agrees_with_msgpack_c_on_random_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
