/*
 * test_trace_reader.c -- the streaming .lct reader (spec/trace-format.md
 * section 1.5): strict header checks with LMCache's messages, records in
 * order, truncated tails and malformed records (with their warnings), the
 * peek pass and record counting, and a small seeded mutation run that the
 * reader must survive.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/trace_test_util.h"
#include "trace/codec.h"
#include "trace/format.h"
#include "trace/reader.h"
#include "trace/recorder.h"

#define QUAL(m) LMC_TRACE_QUALNAME_PREFIX m

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    tt_tmpdir(f->dir);
    snprintf(f->path, sizeof(f->path), "%s/t.lct", f->dir);
    tt_log_capture_start();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tt_log_capture_stop();
    tt_rmtree(f->dir);
    free(f);
    return 0;
}

static const char *path_of(void **state)
{
    return ((fixture *)*state)->path;
}

static void assert_msg_contains(const char *msg, const char *want)
{
    if (strstr(msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", msg, want);
}

/* A header frame into a fresh sbuffer. */
static void put_header(msgpack_sbuffer *sb, const char *magic, int64_t format_version,
                       int64_t schema)
{
    msgpack_sbuffer_init(sb);
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    h.magic_len = strlen(magic);
    memcpy(h.magic, magic, h.magic_len);
    h.format_version = format_version;
    h.level = "storage";
    h.trace_schema_version = schema;
    h.t_mono_start = 100.5;
    h.t_wall_start = 1700000000.25;
    h.sm_config_json = "{}";
    h.sm_config_digest = "d1g35t";
    assert_int_equal(lmc_trace_encode_header(sb, &h, NULL), LMC_OK);
}

/* A record {"i": i, "key": ObjectKey(m, hash i)} at t_mono i/10. */
static void put_record(msgpack_sbuffer *sb, const char *qualname, int64_t i)
{
    lmc_object_key k = tt_key("m", (uint32_t)i, 0, 0, NULL);
    lmc_trace_arg args[2] = {{"i", 1, lmc_tv_int(i)},
                             {"key", 3, {.kind = LMC_TV_OBJECT_KEY, .u.key = &k}}};
    assert_int_equal(lmc_trace_encode_record(sb, (double)i / 10, 1700000000.0 + (double)i, qualname,
                                             strlen(qualname), args, 2, NULL),
                     LMC_OK);
}

/* A raw frame around arbitrary body bytes. */
static void put_raw_frame(msgpack_sbuffer *sb, const void *body, uint32_t len)
{
    uint8_t prefix[4];
    lmc_put_be32(prefix, len);
    msgpack_sbuffer_write(sb, (const char *)prefix, 4);
    msgpack_sbuffer_write(sb, body, len);
}

/* A valid file: header + n records ("reserve_write" / "finish_write" alternating). */
static void build_file(msgpack_sbuffer *sb, int n)
{
    put_header(sb, "LMCT", 1, 2);
    for (int i = 0; i < n; i++)
        put_record(sb, i % 2 ? QUAL("finish_write") : QUAL("reserve_write"), i);
}

/* The first len bytes of sb as the fixture's file; sb is freed (the tests are done with it). */
static void write_sb(void **state, msgpack_sbuffer *sb, size_t len)
{
    tt_write_file(path_of(state), sb->data, len);
    msgpack_sbuffer_destroy(sb);
}

/* The fixture's file, opened: it must open. */
static lmc_trace_reader *open_ok(void **state)
{
    lmc_trace_reader *r;
    assert_int_equal(lmc_trace_reader_open(path_of(state), &r, NULL), LMC_OK);
    return r;
}

static lmc_status open_error(void **state, lmc_error *err)
{
    lmc_trace_reader *r = NULL;
    lmc_status st = lmc_trace_reader_open(path_of(state), &r, err);
    assert_null(r);
    return st;
}

/* A file of one header frame (put_header's arguments). */
static void write_header_file(void **state, const char *magic, int64_t format_version,
                              int64_t schema)
{
    msgpack_sbuffer sb;
    put_header(&sb, magic, format_version, schema);
    write_sb(state, &sb, sb.size);
}

/* The file name as the messages quote it. */
static void quoted_path(void **state, char *buf, size_t len)
{
    snprintf(buf, len, "trace file '%s': ", path_of(state));
}

/* ---------------------------------------------------------------------- */
/* Header                                                                  */
/* ---------------------------------------------------------------------- */

static void test_header_round_trips(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 0);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r;
    lmc_error err;
    assert_int_equal(lmc_trace_reader_open(path_of(state), &r, &err), LMC_OK);
    const lmc_trace_header *h = lmc_trace_reader_header(r);
    assert_memory_equal(h->magic, "LMCT", 4);
    assert_int_equal(h->format_version, 1);
    assert_int_equal(h->trace_schema_version, 2);
    assert_string_equal(h->level, "storage");
    assert_true(h->t_mono_start == 100.5);
    assert_true(h->t_wall_start == 1700000000.25);
    assert_string_equal(h->sm_config_json, "{}");
    assert_string_equal(h->sm_config_digest, "d1g35t");
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    assert_false(lmc_trace_reader_truncated(r));
    lmc_trace_reader_close(r);
    assert_int_equal(tt_log_count(), 0);
}

static void test_bad_magic_is_rejected_naming_the_file(void **state)
{
    write_header_file(state, "WRNG", 1, 2);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_FORMAT);
    char want[200];
    quoted_path(state, want, sizeof(want));
    strcat(want, "bad magic (got b'WRNG', expected b'LMCT')");
    assert_string_equal(err.msg, want);
}

static void test_format_version_2_is_unsupported(void **state)
{
    write_header_file(state, "LMCT", 2, 2);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_UNSUPPORTED);
    assert_msg_contains(err.msg, "unsupported format_version 2 (this build expects 1)");
}

static void test_schema_3_is_unsupported(void **state)
{
    write_header_file(state, "LMCT", 1, 3);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_UNSUPPORTED);
    assert_msg_contains(err.msg, "unsupported trace_schema_version 3 (this build supports 1, 2)");
}

static void test_magic_is_checked_before_versions(void **state)
{
    write_header_file(state, "WRNG", 7, 9);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_FORMAT);
    assert_msg_contains(err.msg, "bad magic");
}

static void test_schema_1_is_accepted(void **state)
{
    msgpack_sbuffer sb;
    put_header(&sb, "LMCT", 1, 1);
    put_record(&sb, QUAL("reserve_write"), 1);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    assert_int_equal(lmc_trace_reader_header(r)->trace_schema_version, 1);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    lmc_trace_reader_close(r);
}

static void test_empty_file_is_unexpected_eof(void **state)
{
    tt_write_file(path_of(state), "", 0);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_FORMAT);
    char want[200];
    quoted_path(state, want, sizeof(want));
    strcat(want, "unexpected EOF reading frame length");
    assert_string_equal(err.msg, want);
}

static void test_short_header_prefix_is_truncated(void **state)
{
    tt_write_file(path_of(state), "\0\0", 2);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_FORMAT);
    assert_msg_contains(err.msg, "truncated frame length prefix at offset 0");
}

static void test_short_header_body_is_truncated(void **state)
{
    msgpack_sbuffer sb;
    put_header(&sb, "LMCT", 1, 2);
    size_t body = sb.size - 4;
    write_sb(state, &sb, sb.size - 10);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_FORMAT);
    char want[120];
    snprintf(want, sizeof(want), "truncated frame body at offset 4 (got %zu of %zu)", body - 10,
             body);
    assert_msg_contains(err.msg, want);
}

static void test_header_that_is_not_a_header_is_rejected(void **state)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    put_record(&sb, QUAL("reserve_write"), 0);
    write_sb(state, &sb, sb.size);
    lmc_error err;
    assert_int_equal(open_error(state, &err), LMC_ERR_FORMAT);
    assert_msg_contains(err.msg, "trace file '");
    assert_msg_contains(err.msg, "invalid type tag 'record'");
}

static void test_missing_file_names_the_file_and_the_os_error(void **state)
{
    char path[200];
    snprintf(path, sizeof(path), "%s/nope.lct", ((fixture *)*state)->dir);
    lmc_trace_reader *r = NULL;
    lmc_error err;
    assert_int_equal(lmc_trace_reader_open(path, &r, &err), LMC_ERR_NOT_FOUND);
    assert_null(r);
    assert_msg_contains(err.msg, "nope.lct'");
    assert_msg_contains(err.msg, "cannot open: No such file or directory");
}

static void test_a_directory_cannot_be_read(void **state)
{
    lmc_trace_reader *r = NULL;
    lmc_error err;
    assert_int_equal(lmc_trace_reader_open(((fixture *)*state)->dir, &r, &err), LMC_ERR_IO);
    assert_null(r);
    assert_msg_contains(err.msg, "cannot read: Is a directory");
}

static void test_path_is_quoted_like_python_repr(void **state)
{
    char path[200];
    snprintf(path, sizeof(path), "%s/it's.lct", ((fixture *)*state)->dir);
    lmc_error err;
    assert_int_equal(lmc_trace_reader_open(path, &(lmc_trace_reader *){NULL}, &err),
                     LMC_ERR_NOT_FOUND);
    assert_msg_contains(err.msg, "it's.lct\": cannot open");
    assert_msg_contains(err.msg, "trace file \"/tmp/");
}

/* ---------------------------------------------------------------------- */
/* Records                                                                 */
/* ---------------------------------------------------------------------- */

static void test_records_come_back_in_order_with_decoded_args(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 5);
    size_t header_len = lmc_get_be32((uint8_t *)sb.data) + 4;
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
        assert_string_equal(rec.qualname, i % 2 ? QUAL("finish_write") : QUAL("reserve_write"));
        assert_true(rec.t_mono == (double)i / 10);
        assert_true(rec.t_wall == 1700000000.0 + i);
        assert_int_equal(rec.nargs, 2);
        assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i, i);
        const lmc_trace_arg *k = lmc_trace_args_find(rec.args, rec.nargs, "key");
        assert_int_equal(k->value.kind, LMC_TV_OBJECT_KEY);
        lmc_object_key want = tt_key("m", (uint32_t)i, 0, 0, NULL);
        assert_true(lmc_object_key_equal(k->value.u.key, &want));
        if (i == 0)
            assert_int_equal(rec.offset, header_len);
    }
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_records(r), 5);
    assert_int_equal(lmc_trace_reader_malformed(r), 0);
    assert_false(lmc_trace_reader_truncated(r));
    lmc_trace_reader_close(r);
    assert_int_equal(tt_log_count(), 0);
}

static void test_peek_pass_gives_qualnames_and_times(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 4);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    double t;
    const char *q;
    size_t qn;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
        const char *want = i % 2 ? QUAL("finish_write") : QUAL("reserve_write");
        assert_int_equal(qn, strlen(want));
        assert_memory_equal(q, want, qn);
        assert_true(t == (double)i / 10);
    }
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_ERR_EOF);
    lmc_trace_reader_close(r);
}

static void test_peek_int_arg_reads_an_int_of_the_peeked_record(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 1);
    lmc_trace_arg args[2] = {{"dropped_count", 13, lmc_tv_int(5)}, {"why", 3, lmc_tv_str("x", 1)}};
    assert_int_equal(lmc_trace_encode_record(&sb, 9.0, 9.0, "marker", 6, args, 2, NULL), LMC_OK);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    double t;
    const char *q;
    size_t qn;
    int64_t v = -1;
    /* nothing peeked yet */
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "i", &v), LMC_ERR_INVALID);
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
    /* found, and its value is 0: no longer the same answer as "absent" */
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "i", &v), LMC_OK);
    assert_int_equal(v, 0);
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
    assert_memory_equal(q, "marker", 6);
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "dropped_count", &v), LMC_OK);
    assert_int_equal(v, 5);
    v = -1;
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "why", &v), LMC_ERR_NOT_FOUND);   /* a str */
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "other", &v), LMC_ERR_NOT_FOUND); /* absent */
    assert_int_equal(v, -1); /* untouched when not found */
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "dropped_count", &v), LMC_ERR_INVALID);
    lmc_trace_reader_close(r);
}

static void test_peek_int_arg_reads_its_argument_even_when_others_do_not_decode(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 0);
    size_t start = sb.size;
    put_record(&sb, QUAL("finish_write"), 3);
    /* The key's kv_rank (the int after "kv_rank") becomes nil: the record still peeks. */
    static const char rank[] = "\xa7kv_rank";
    char *at = memmem(sb.data + start, sb.size - start, rank, sizeof(rank) - 1);
    assert_non_null(at);
    at[sizeof(rank) - 1] = (char)0xc0;
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    double t;
    const char *q;
    size_t qn;
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
    /* Only the named argument is read (from the bytes): the bad key does not matter. */
    int64_t v = -1;
    assert_int_equal(lmc_trace_reader_peek_int_arg(r, "i", &v), LMC_OK);
    assert_int_equal(v, 3);
    lmc_trace_reader_close(r);
}

static void test_truncated_length_prefix_ends_the_stream_with_a_warning(void **state)
{
    for (size_t cut = 1; cut <= 3; cut++) {
        msgpack_sbuffer sb;
        build_file(&sb, 2);
        size_t full = sb.size;
        put_record(&sb, QUAL("reserve_write"), 2);
        write_sb(state, &sb, full + cut); /* 1-3 bytes of the third prefix */
        tt_log_capture_start();
        lmc_trace_reader *r = open_ok(state);
        lmc_trace_record rec;
        assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
        assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
        assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
        assert_true(lmc_trace_reader_truncated(r));
        assert_int_equal(tt_log_count(), 1);
        char want[100];
        snprintf(want, sizeof(want), "TraceReader: truncated frame length prefix at offset %zu",
                 full);
        assert_string_equal(tt_log_message(0), want);
        lmc_trace_reader_close(r);
    }
}

static void test_short_record_body_ends_the_stream_with_a_warning(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 1);
    size_t full = sb.size;
    put_record(&sb, QUAL("reserve_write"), 1);
    size_t body = sb.size - full - 4;
    write_sb(state, &sb, sb.size - 3);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    assert_true(lmc_trace_reader_truncated(r));
    char want[120];
    snprintf(want, sizeof(want), "TraceReader: truncated frame body at offset %zu (got %zu of %zu)",
             full + 4, body - 3, body);
    assert_int_equal(tt_log_count(), 1);
    assert_string_equal(tt_log_message(0), want);
    lmc_trace_reader_close(r);
}

static void test_file_cut_by_three_bytes_reads_without_error(void **state)
{
    /* LMCache's test_recorder: truncate by 3 bytes, read, no exception. */
    msgpack_sbuffer sb;
    build_file(&sb, 3);
    write_sb(state, &sb, sb.size - 3);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    int n = 0;
    while (lmc_trace_reader_next(r, &rec) == LMC_OK)
        n++;
    assert_int_equal(n, 2);
    assert_true(lmc_trace_reader_truncated(r));
    lmc_trace_reader_close(r);
}

static void test_end_of_stream_is_sticky_and_warns_once(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 1);
    write_sb(state, &sb, sb.size - 1);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    for (int i = 0; i < 3; i++)
        assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    assert_int_equal(tt_log_count(), 1);
    lmc_trace_reader_close(r);
}

static void test_malformed_record_is_skipped_and_the_next_one_read(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 1);
    size_t bad_at = sb.size;
    static const uint8_t not_a_record[] = {0x93, 0x01, 0x02, 0x03};
    put_raw_frame(&sb, not_a_record, sizeof(not_a_record));
    put_record(&sb, QUAL("finish_write"), 7);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_string_equal(rec.qualname, QUAL("finish_write"));
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i, 7);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_records(r), 2);
    assert_int_equal(lmc_trace_reader_malformed(r), 1);
    assert_false(lmc_trace_reader_truncated(r));
    assert_int_equal(tt_log_count(), 1);
    char want[100];
    snprintf(want, sizeof(want), "TraceReader: skipping malformed record at offset %zu: ",
             bad_at + 4 + sizeof(not_a_record));
    assert_msg_contains(tt_log_message(0), want);
    lmc_trace_reader_close(r);
}

static void test_record_with_an_unknown_tag_is_a_record_whose_args_do_not_decode(void **state)
{
    /* a record whose arg is {"__t__": "Nope", "v": 1} */
    static const char hex[] = "85 a474797065 a67265636f7264 a6745f6d6f6e6f 00 a6745f77616c6c 00"
                              " a87175616c6e616d65 a171 a461726773 81 a178"
                              " 82 a55f5f745f5f a44e6f7065 a176 01";
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    msgpack_sbuffer sb;
    build_file(&sb, 0);
    put_raw_frame(&sb, body, (uint32_t)n);
    free(body);
    put_record(&sb, QUAL("reserve_write"), 1);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    /* LMCache's reader yields it (msgspec does not look at codec tags); its replay skips it. */
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_string_equal(rec.qualname, "q");
    assert_int_equal(rec.nargs, 0);
    assert_non_null(rec.args_error);
    assert_non_null(strstr(rec.args_error, "argument 'x': trace.codecs: unknown tag 'Nope'"));
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_null(rec.args_error);
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i, 1);
    assert_int_equal(lmc_trace_reader_records(r), 2);
    assert_int_equal(lmc_trace_reader_malformed(r), 0);
    lmc_trace_reader_close(r);
}

static void test_huge_frame_length_is_treated_as_a_truncated_tail(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 1);
    size_t at = sb.size;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xf0, 0x85, 0xa4};
    msgpack_sbuffer_write(&sb, (const char *)junk, sizeof(junk));
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    assert_true(lmc_trace_reader_truncated(r));
    char want[80];
    snprintf(want, sizeof(want), "TraceReader: truncated frame body at offset %zu", at + 4);
    assert_int_equal(tt_log_count(), 1);
    assert_msg_contains(tt_log_message(0), want);
    assert_msg_contains(tt_log_message(0), "4294967280");
    lmc_trace_reader_close(r);
}

static void test_records_larger_than_the_read_buffer_are_read(void **state)
{
    /* a 3 MiB string argument, between two small records */
    size_t big_len = 3u << 20;
    char *big = malloc(big_len);
    memset(big, 'z', big_len);
    msgpack_sbuffer sb;
    build_file(&sb, 1);
    lmc_trace_arg args[1] = {{"blob", 4, lmc_tv_str(big, big_len)}};
    assert_int_equal(lmc_trace_encode_record(&sb, 1.0, 2.0, "big", 3, args, 1, NULL), LMC_OK);
    put_record(&sb, QUAL("finish_write"), 9);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_string_equal(rec.qualname, "big");
    assert_int_equal(rec.args[0].value.u.s.len, big_len);
    assert_memory_equal(rec.args[0].value.u.s.ptr, big, big_len);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i, 9);
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    lmc_trace_reader_close(r);
    free(big);
}

static void test_many_records_across_buffer_refills_stay_in_order(void **state)
{
    enum { N = 20000 }; /* about 3 MiB: several refills of the 1 MiB buffer */
    msgpack_sbuffer sb;
    build_file(&sb, N);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    for (int i = 0; i < N; i++) {
        assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
        if (lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i != i)
            fail_msg("record %d out of order", i);
    }
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_ERR_EOF);
    lmc_trace_reader_close(r);
}

static void test_count_records_counts_complete_records(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 7);
    write_sb(state, &sb, sb.size - 2);
    uint64_t n = 99;
    assert_int_equal(lmc_trace_count_records(path_of(state), &n, NULL), LMC_OK);
    assert_int_equal(n, 6);
}

static void test_count_records_reports_open_errors(void **state)
{
    tt_write_file(path_of(state), "", 0);
    uint64_t n = 99;
    lmc_error err;
    assert_int_equal(lmc_trace_count_records(path_of(state), &n, &err), LMC_ERR_FORMAT);
    assert_int_equal(n, 0);
    assert_msg_contains(err.msg, "unexpected EOF");
}

/* ---------------------------------------------------------------------- */
/* Hostile files                                                           */
/* ---------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_mutated_files_never_crash_the_reader(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 30);
    uint8_t *mut = malloc(sb.size + 16);
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (int iter = 0; iter < 400; iter++) {
        size_t len = sb.size;
        memcpy(mut, sb.data, len);
        int flips = 1 + (int)(rng_next(&seed) % 8);
        for (int k = 0; k < flips; k++)
            mut[rng_next(&seed) % len] = (uint8_t)rng_next(&seed);
        if (rng_next(&seed) % 3 == 0)
            len = (size_t)(rng_next(&seed) % len);
        tt_write_file(path_of(state), mut, len);
        tt_log_capture_start();
        lmc_trace_reader *r = NULL;
        if (lmc_trace_reader_open(path_of(state), &r, NULL) != LMC_OK)
            continue;
        lmc_trace_record rec;
        int guard = 0;
        while (lmc_trace_reader_next(r, &rec) == LMC_OK && guard++ < 1000) {
        }
        lmc_trace_reader_close(r);
        uint64_t count;
        lmc_trace_count_records(path_of(state), &count, NULL);
        assert_true(count <= 30);
    }
    free(mut);
    msgpack_sbuffer_destroy(&sb);
}

/* ---------------------------------------------------------------------- */
/* Record decoding: the fast path for key lists                            */
/* ---------------------------------------------------------------------- */

/* A reserve_write-like record body of n keys (keys[i]) into a fresh sbuffer. */
static void put_keys_record(msgpack_sbuffer *sb, const lmc_object_key *keys, size_t n)
{
    lmc_tv items[32];
    assert_true(n <= 32);
    for (size_t i = 0; i < n; i++)
        items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[i]};
    lmc_trace_arg args[2] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, n}}},
                             {"mode", 4, lmc_tv_str("new", 3)}};
    msgpack_sbuffer_init(sb);
    assert_int_equal(lmc_trace_encode_record(sb, 1.5, 2.5, QUAL("reserve_write"),
                                             strlen(QUAL("reserve_write")), args, 2, NULL),
                     LMC_OK);
}

/* Decode the one frame in sb (skipping its length prefix) with a fresh arena a (caller frees). */
static lmc_status decode_frame(const msgpack_sbuffer *sb, lmc_arena *a, lmc_trace_record *rec,
                               lmc_error *err)
{
    lmc_arena_init(a, 0);
    lmc_error_clear(err);
    return lmc_trace_decode_record(sb->data + 4, sb->size - 4, a, rec, err);
}

/* Replace the first occurrence of from (same length as to) in the buffer. */
static void patch(msgpack_sbuffer *sb, const char *from, const char *to)
{
    size_t n = strlen(from);
    assert_int_equal(strlen(to), n);
    for (size_t i = 0; i + n <= sb->size; i++) {
        if (memcmp(sb->data + i, from, n) == 0) {
            memcpy(sb->data + i, to, n);
            return;
        }
    }
    fail_msg("'%s' not found in the record", from);
}

static void assert_keys_arg(const lmc_trace_record *rec, const lmc_object_key *want, size_t n)
{
    const lmc_trace_arg *k = lmc_trace_args_find(rec->args, rec->nargs, "keys");
    assert_non_null(k);
    assert_int_equal(k->value.kind, LMC_TV_LIST);
    assert_int_equal(k->value.u.list.n, n);
    for (size_t i = 0; i < n; i++) {
        const lmc_tv *it = &k->value.u.list.items[i];
        assert_int_equal(it->kind, LMC_TV_OBJECT_KEY);
        const lmc_object_key *got = it->u.key;
        assert_true(lmc_object_key_equal(got, &want[i]));
        assert_int_equal(lmc_object_key_hash(got), lmc_object_key_hash(&want[i]));
        assert_ptr_equal(got->model_name, want[i].model_name);
        assert_ptr_equal(got->cache_salt, want[i].cache_salt);
        /* The unused bytes are zero, as lmc_object_key_make leaves them. */
        assert_memory_equal(got->chunk_hash, want[i].chunk_hash, LMC_CHUNK_HASH_MAX);
        const uint8_t *pad = (const uint8_t *)&got->chunk_hash_len + 1;
        for (size_t j = 0;
             j < offsetof(lmc_object_key, kv_rank) - offsetof(lmc_object_key, chunk_hash_len) - 1;
             j++)
            assert_int_equal(pad[j], 0);
    }
}

static void test_a_key_list_decodes_into_one_contiguous_array(void **state)
{
    (void)state;
    lmc_object_key keys[16];
    for (uint32_t i = 0; i < 16; i++)
        keys[i] = tt_key("meta-llama/Llama-3.1-8B", 1000 + i, 0x01000100, 0, NULL);
    msgpack_sbuffer sb;
    put_keys_record(&sb, keys, 16);
    lmc_arena a;
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(decode_frame(&sb, &a, &rec, &err), LMC_OK);
    assert_keys_arg(&rec, keys, 16);
    const lmc_tv *items = lmc_trace_args_find(rec.args, rec.nargs, "keys")->value.u.list.items;
    for (size_t i = 0; i < 16; i++)
        assert_ptr_equal(items[i].u.key, items[0].u.key + i);
    const lmc_trace_arg *mode = lmc_trace_args_find(rec.args, rec.nargs, "mode");
    assert_int_equal(mode->value.kind, LMC_TV_STR);
    assert_memory_equal(mode->value.u.s.ptr, "new", 3);
    assert_string_equal(rec.qualname, QUAL("reserve_write"));
    assert_true(rec.t_mono == 1.5 && rec.t_wall == 2.5);
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_keys_whose_model_names_and_salts_differ_in_one_list_decode(void **state)
{
    (void)state;
    static const char *const models[] = {"model-a", "model-b", "model-a",
                                         "a-model-name-longer-than-31-bytes"};
    static const char *const salts[] = {NULL, "tenant-1", "tenant-2", "tenant-1", "s\xc3\xa9"};
    lmc_object_key keys[20];
    for (uint32_t i = 0; i < 20; i++)
        keys[i] = tt_key(models[i % 4], i, (int64_t)i - 3, i % 3, salts[i % 5]);
    msgpack_sbuffer sb;
    put_keys_record(&sb, keys, 20);
    lmc_arena a;
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(decode_frame(&sb, &a, &rec, &err), LMC_OK);
    assert_keys_arg(&rec, keys, 20);
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_an_invalid_salt_in_the_middle_of_a_key_list_is_rejected(void **state)
{
    (void)state;
    lmc_object_key keys[16];
    for (uint32_t i = 0; i < 16; i++)
        keys[i] = tt_key("m", i, 0, 0, i == 7 ? "tenantX" : "tenant1");
    msgpack_sbuffer sb;
    put_keys_record(&sb, keys, 16);
    patch(&sb, "tenantX", "tenant@");
    lmc_arena a;
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(decode_frame(&sb, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "argument 'keys': trace.codecs: invalid ObjectKey payload: "
                                 "ObjectKey.cache_salt must not contain '@' (got 'tenant@')");
    assert_null(rec.args);
    assert_null(rec.qualname);
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_an_invalid_model_name_after_valid_ones_is_rejected(void **state)
{
    (void)state;
    lmc_object_key keys[8];
    for (uint32_t i = 0; i < 8; i++)
        keys[i] = tt_key(i == 5 ? "mX" : "mm", i, 0, 0, NULL);
    msgpack_sbuffer sb;
    put_keys_record(&sb, keys, 8);
    patch(&sb, "mX", "m@");
    lmc_arena a;
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(decode_frame(&sb, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "argument 'keys': trace.codecs: invalid ObjectKey payload: "
                                 "ObjectKey.model_name must not contain '@' (got 'm@')");
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_a_key_list_with_a_non_key_item_decodes_item_by_item(void **state)
{
    (void)state;
    lmc_object_key k = tt_key("m", 1, 0, 0, NULL);
    lmc_tv items[3] = {{.kind = LMC_TV_OBJECT_KEY, .u.key = &k},
                       lmc_tv_int(7),
                       {.kind = LMC_TV_OBJECT_KEY, .u.key = &k}};
    lmc_trace_arg args[1] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, 3}}}};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_encode_record(&sb, 0, 0, "q", 1, args, 1, NULL), LMC_OK);
    lmc_arena a;
    lmc_trace_record rec;
    lmc_error err;
    assert_int_equal(decode_frame(&sb, &a, &rec, &err), LMC_OK);
    const lmc_tv *v = &rec.args[0].value;
    assert_int_equal(v->kind, LMC_TV_LIST);
    assert_int_equal(v->u.list.n, 3);
    assert_int_equal(v->u.list.items[1].kind, LMC_TV_INT);
    assert_int_equal(v->u.list.items[1].u.i, 7);
    assert_true(lmc_object_key_equal(v->u.list.items[2].u.key, &k));
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

/* msgpack-c packing helpers for hand-made records. */
static void pk_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* {"__t__": "ObjectKey", "v": {...}} with the fields in another order and no salt. */
static void pk_reordered_key(msgpack_packer *pk, uint8_t h)
{
    msgpack_pack_map(pk, 2);
    pk_str(pk, "v");
    msgpack_pack_map(pk, 4);
    pk_str(pk, "kv_rank");
    msgpack_pack_int64(pk, -2);
    pk_str(pk, "model_name");
    pk_str(pk, "m");
    pk_str(pk, "object_group_id");
    msgpack_pack_int64(pk, 300);
    pk_str(pk, "chunk_hash");
    msgpack_pack_bin(pk, 1);
    msgpack_pack_bin_body(pk, &h, 1);
    pk_str(pk, "__t__");
    pk_str(pk, "ObjectKey");
}

static void test_keys_with_fields_in_another_order_decode_like_canonical_ones(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    /* "qualname" twice (the last wins) and the fields in no particular order. */
    msgpack_pack_map(&pk, 6);
    pk_str(&pk, "qualname");
    pk_str(&pk, "first");
    pk_str(&pk, "args");
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "keys");
    msgpack_pack_array(&pk, 3);
    for (uint8_t i = 0; i < 3; i++)
        pk_reordered_key(&pk, i);
    pk_str(&pk, "t_wall");
    msgpack_pack_int64(&pk, 7);
    pk_str(&pk, "t_mono");
    msgpack_pack_float(&pk, 0.5f);
    pk_str(&pk, "type");
    pk_str(&pk, "record");
    pk_str(&pk, "qualname");
    pk_str(&pk, "second");
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_decode_record(sb.data, sb.size, &a, &rec, NULL), LMC_OK);
    assert_string_equal(rec.qualname, "second");
    assert_true(rec.t_mono == 0.5 && rec.t_wall == 7.0);
    lmc_object_key want[3];
    for (uint8_t i = 0; i < 3; i++)
        assert_int_equal(lmc_object_key_make_n(&want[i], &i, 1, "m", 1, -2, 300, "", 0, NULL),
                         LMC_OK);
    assert_keys_arg(&rec, want, 3);
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_a_truncated_key_list_is_reported_as_truncated(void **state)
{
    (void)state;
    lmc_object_key keys[4];
    for (uint32_t i = 0; i < 4; i++)
        keys[i] = tt_key("m", i, 0, 0, NULL);
    msgpack_sbuffer sb;
    put_keys_record(&sb, keys, 4);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    lmc_error err;
    /* Cut inside a key: the whole-body parse reports it, as for any other value. */
    size_t cut = (sb.size - 4) / 2;
    lmc_error_clear(&err);
    assert_int_equal(lmc_trace_decode_record(sb.data + 4, cut, &a, &rec, &err), LMC_ERR_FORMAT);
    assert_msg_contains(err.msg, "Record: msgpack data is truncated (at byte ");
    assert_null(rec.args);
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_a_record_with_a_bad_key_comes_back_naming_the_problem(void **state)
{
    msgpack_sbuffer sb;
    put_header(&sb, "LMCT", 1, 2);
    msgpack_sbuffer rec_sb;
    lmc_object_key keys[4];
    for (uint32_t i = 0; i < 4; i++)
        keys[i] = tt_key("m", i, 0, 0, i == 2 ? "aXb" : NULL);
    put_keys_record(&rec_sb, keys, 4);
    patch(&rec_sb, "aXb", "a/b");
    msgpack_sbuffer_write(&sb, rec_sb.data, rec_sb.size);
    msgpack_sbuffer_destroy(&rec_sb);
    put_record(&sb, QUAL("finish_write"), 1);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    /* The salt is only wrong for the codec: the record is one, its args do not decode. */
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_non_null(rec.args_error);
    assert_non_null(
        strstr(rec.args_error, "ObjectKey.cache_salt must not contain '/' (got 'a/b')"));
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_string_equal(rec.qualname, QUAL("finish_write"));
    assert_int_equal(lmc_trace_reader_malformed(r), 0);
    lmc_trace_reader_close(r);
}

/* ---------------------------------------------------------------------- */
/* Issue 13: one reader, LMCache's limits, pipes                           */
/* ---------------------------------------------------------------------- */

static void test_a_pipe_streams_in_one_pass(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 50);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        /* Dribble it in small writes, so frames arrive split across reads. */
        for (size_t off = 0; off < sb.size; off += 7) {
            size_t n = sb.size - off < 7 ? sb.size - off : 7;
            if (write(fds[1], sb.data + off, n) != (ssize_t)n)
                _exit(1);
        }
        _exit(0);
    }
    close(fds[1]);
    msgpack_sbuffer_destroy(&sb);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
    /* Not a regular file: it cannot be counted ahead, and nothing is read trying. */
    uint64_t n = 7;
    lmc_error err;
    assert_int_equal(lmc_trace_count_records(path, &n, &err), LMC_ERR_UNSUPPORTED);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err.msg, "not a regular file"));
    lmc_trace_reader *r;
    assert_int_equal(lmc_trace_reader_open(path, &r, NULL), LMC_OK);
    lmc_trace_record rec;
    int got = 0;
    while (lmc_trace_reader_next(r, &rec) == LMC_OK) {
        assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i, got);
        got++;
    }
    assert_int_equal(got, 50);
    assert_false(lmc_trace_reader_truncated(r));
    lmc_trace_reader_close(r);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    assert_int_equal(WEXITSTATUS(status), 0);
    (void)state;
}

static void put_dropped_marker(msgpack_sbuffer *sb, const char *count_hex)
{
    /* {"t_mono": 1, "t_wall": 1, "qualname": <marker>, "args": {"dropped_count": <count>}} */
    char hex[512] = "84 a6745f6d6f6e6f 01 a6745f77616c6c 01 a87175616c6e616d65 d9";
    char *q = tt_hex(LMC_TRACE_DROPPED_QUALNAME, strlen(LMC_TRACE_DROPPED_QUALNAME));
    char len[8];
    snprintf(len, sizeof(len), "%02zx", strlen(LMC_TRACE_DROPPED_QUALNAME));
    strcat(hex, len);
    strcat(hex, q);
    strcat(hex, " a461726773 81 ad64726f707065645f636f756e74 ");
    strcat(hex, count_hex);
    free(q);
    size_t n;
    uint8_t *body = tt_unhex(hex, &n);
    put_raw_frame(sb, body, (uint32_t)n);
    free(body);
}

static void test_dropped_counts_are_unsigned_64_bit_and_checked(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 0);
    put_dropped_marker(&sb, "cf fffffffffffffffe"); /* 2^64 - 2 */
    put_dropped_marker(&sb, "05");
    put_dropped_marker(&sb, "fb"); /* -5: not a count */
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    double t;
    const char *q;
    size_t qn;
    uint64_t total = 0, v = 0;
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
    assert_int_equal(lmc_trace_reader_peek_u64_arg(r, "dropped_count", &v), LMC_OK);
    assert_true(v == UINT64_MAX - 1);
    lmc_trace_reader_add_dropped_count(r, &total);
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
    lmc_trace_reader_add_dropped_count(r, &total);
    assert_true(total == UINT64_MAX); /* saturates */
    assert_int_equal(lmc_trace_reader_next_peek(r, &t, &q, &qn), LMC_OK);
    assert_int_equal(lmc_trace_reader_peek_u64_arg(r, "dropped_count", &v), LMC_ERR_FORMAT);
    lmc_trace_reader_add_dropped_count(r, &total);
    assert_true(total == UINT64_MAX);
    assert_int_equal(tt_log_count_containing("a negative dropped_count"), 1);
    lmc_trace_reader_close(r);
}

static void test_next_record_leaves_the_args_to_decode_on_demand(void **state)
{
    msgpack_sbuffer sb;
    build_file(&sb, 2);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
    assert_false(rec.args_decoded);
    assert_null(rec.args);
    assert_non_null(rec.args_raw);
    assert_int_equal(lmc_trace_reader_decode_args(r, &rec, NULL), LMC_OK);
    assert_true(rec.args_decoded);
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "i")->value.u.i, 0);
    lmc_trace_record old = rec;
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
    /* A record that is no longer current cannot be decoded. */
    old.args_decoded = false;
    lmc_error err;
    assert_int_equal(lmc_trace_reader_decode_args(r, &old, &err), LMC_ERR_INVALID);
    lmc_trace_reader_close(r);
}

static void test_decoding_one_record_is_bounded_by_a_multiple_of_its_size(void **state)
{
    /* 2 MiB of fixints: 32 bytes each decoded, 32 times the frame, over the bound. */
    size_t n = 2u << 20;
    lmc_tv *ints = calloc(n, sizeof(*ints));
    for (size_t i = 0; i < n; i++)
        ints[i] = lmc_tv_int(1);
    lmc_trace_arg args[1] = {{"token_ids", 9, {.kind = LMC_TV_LIST, .u.list = {ints, n}}}};
    msgpack_sbuffer sb;
    put_header(&sb, "LMCT", 1, 2);
    assert_int_equal(lmc_trace_encode_record(&sb, 0.0, 0.0, "big", 3, args, 1, NULL), LMC_OK);
    put_record(&sb, QUAL("finish_write"), 1);
    free(ints);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_string_equal(rec.qualname, "big");
    assert_non_null(rec.args_error);
    assert_non_null(strstr(rec.args_error, "would take more than"));
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK); /* and the next one is fine */
    assert_null(rec.args_error);
    assert_int_equal(lmc_trace_reader_records(r), 2);
    lmc_trace_reader_close(r);
}

static void test_long_chunk_hashes_and_big_ints_read_as_lmcache_reads_them(void **state)
{
    /* A 100-byte chunk hash (kept out of line) and an int of 2^64 - 1. */
    uint8_t hash[100];
    for (size_t i = 0; i < sizeof(hash); i++)
        hash[i] = (uint8_t)i;
    lmc_object_key k, again;
    lmc_object_key_cache kc = {.long_hashes = true};
    assert_int_equal(
        lmc_object_key_make_cached(&kc, &k, hash, sizeof(hash), "m", 1, 0, 0, "", 0, NULL), LMC_OK);
    assert_int_equal(k.chunk_hash_len, 100);
    assert_memory_equal(lmc_object_key_hash_bytes(&k), hash, sizeof(hash));
    /* Without the opt-in (the server's keys) the 64-byte limit stays. */
    assert_int_equal(lmc_object_key_make(&again, hash, sizeof(hash), "m", 0, 0, "", NULL),
                     LMC_ERR_INVALID);
    lmc_tv keyv = {.kind = LMC_TV_OBJECT_KEY, .u.key = &k};
    lmc_trace_arg args[2] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {&keyv, 1}}},
                             {"n", 1, lmc_tv_uint(UINT64_MAX)}};
    msgpack_sbuffer sb;
    put_header(&sb, "LMCT", 1, 2);
    assert_int_equal(lmc_trace_encode_record(&sb, 0.0, 0.0, "q", 1, args, 2, NULL), LMC_OK);
    write_sb(state, &sb, sb.size);
    lmc_trace_reader *r = open_ok(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(r, &rec), LMC_OK);
    assert_null(rec.args_error);
    const lmc_tv *keys = &lmc_trace_args_find(rec.args, rec.nargs, "keys")->value;
    assert_int_equal(keys->u.list.n, 1);
    assert_true(lmc_object_key_equal(keys->u.list.items[0].u.key, &k));
    assert_memory_equal(lmc_object_key_hash_bytes(keys->u.list.items[0].u.key), hash, 100);
    const lmc_tv *n = &lmc_trace_args_find(rec.args, rec.nargs, "n")->value;
    assert_int_equal(n->kind, LMC_TV_UINT);
    assert_true(n->u.u == UINT64_MAX);
    lmc_trace_reader_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_header_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_magic_is_rejected_naming_the_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_format_version_2_is_unsupported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_3_is_unsupported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_magic_is_checked_before_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_1_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_file_is_unexpected_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_header_prefix_is_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_header_body_is_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_that_is_not_a_header_is_rejected, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_missing_file_names_the_file_and_the_os_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_directory_cannot_be_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_path_is_quoted_like_python_repr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_come_back_in_order_with_decoded_args, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_peek_pass_gives_qualnames_and_times, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_peek_int_arg_reads_its_argument_even_when_others_do_not_decode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peek_int_arg_reads_an_int_of_the_peeked_record, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_truncated_length_prefix_ends_the_stream_with_a_warning,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_record_body_ends_the_stream_with_a_warning,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_cut_by_three_bytes_reads_without_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_end_of_stream_is_sticky_and_warns_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_malformed_record_is_skipped_and_the_next_one_read,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_record_with_an_unknown_tag_is_a_record_whose_args_do_not_decode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_frame_length_is_treated_as_a_truncated_tail,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_larger_than_the_read_buffer_are_read, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_many_records_across_buffer_refills_stay_in_order,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_records_counts_complete_records, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_count_records_reports_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mutated_files_never_crash_the_reader, setup, teardown),
        cmocka_unit_test(test_a_key_list_decodes_into_one_contiguous_array),
        cmocka_unit_test(test_keys_whose_model_names_and_salts_differ_in_one_list_decode),
        cmocka_unit_test(test_an_invalid_salt_in_the_middle_of_a_key_list_is_rejected),
        cmocka_unit_test(test_an_invalid_model_name_after_valid_ones_is_rejected),
        cmocka_unit_test(test_a_key_list_with_a_non_key_item_decodes_item_by_item),
        cmocka_unit_test(test_keys_with_fields_in_another_order_decode_like_canonical_ones),
        cmocka_unit_test(test_a_truncated_key_list_is_reported_as_truncated),
        cmocka_unit_test_setup_teardown(test_a_record_with_a_bad_key_comes_back_naming_the_problem,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_pipe_streams_in_one_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_counts_are_unsigned_64_bit_and_checked, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_next_record_leaves_the_args_to_decode_on_demand, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_decoding_one_record_is_bounded_by_a_multiple_of_its_size, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_long_chunk_hashes_and_big_ints_read_as_lmcache_reads_them, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
