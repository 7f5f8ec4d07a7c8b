/*
 * test_trace_dump.c -- `trace dump`'s pieces: the abbreviated arguments of
 * a text line, the full JSON decode of a value, the record filters
 * (trace/filter.h) and whole listings of small traces (markers, malformed
 * records, --limit, escaping).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/trace_test_util.h"
#include "trace/dump.h"
#include "trace/filter.h"
#include "trace/format.h"
#include "trace/recorder.h"

#define QUAL(m) LMC_TRACE_QUALNAME_PREFIX m
#define MODEL "m"

static lmc_tv key_tv(const lmc_object_key *k)
{
    return (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = k};
}

static lmc_tv list_tv(lmc_tv *items, size_t n)
{
    return (lmc_tv){.kind = LMC_TV_LIST, .u.list = {items, n}};
}

/* The ARGS column for args, as a string the caller frees. */
static char *args_text(const lmc_trace_arg *args, size_t n)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_trace_dump_args_text(&b, args, n);
    char *s = lmc_strbuf_finish(&b);
    assert_non_null(s);
    return s;
}

static void assert_args_text(const lmc_trace_arg *args, size_t n, const char *want)
{
    char *got = args_text(args, n);
    assert_string_equal(got, want);
    free(got);
}

static lmc_object_key key32(uint8_t first)
{
    uint8_t h[32];
    for (size_t i = 0; i < sizeof(h); i++)
        h[i] = (uint8_t)(first + i);
    lmc_object_key k;
    assert_int_equal(lmc_object_key_make(&k, h, sizeof(h), MODEL, 0, 0, "", NULL), LMC_OK);
    return k;
}

/* ---------------------------------------------------------------------- */
/* Abbreviated arguments                                                   */
/* ---------------------------------------------------------------------- */

static void test_keys_show_their_count_and_the_first_hash_prefix(void **state)
{
    (void)state;
    lmc_object_key keys[16];
    lmc_tv items[16];
    keys[0] = key32(0x3f);
    items[0] = key_tv(&keys[0]);
    for (size_t i = 1; i < 16; i++) {
        keys[i] = key32((uint8_t)i);
        items[i] = key_tv(&keys[i]);
    }
    lmc_trace_arg a = {"keys", 4, list_tv(items, 16)};
    assert_args_text(&a, 1, " keys=16[3f404142..]");
}

static void test_a_short_chunk_hash_is_shown_whole(void **state)
{
    (void)state;
    lmc_object_key k[2] = {tt_key(MODEL, 0x01020304, 0, 0, ""), tt_key(MODEL, 5, 0, 0, "")};
    lmc_tv items[2] = {key_tv(&k[0]), key_tv(&k[1])};
    lmc_trace_arg a = {"keys", 4, list_tv(items, 2)};
    assert_args_text(&a, 1, " keys=2[01020304]");
}

static void test_an_empty_key_list_is_an_empty_list(void **state)
{
    (void)state;
    lmc_trace_arg a = {"keys", 4, list_tv(NULL, 0)};
    assert_args_text(&a, 1, " keys=[]");
}

static void test_a_layout_shows_shapes_and_dtypes(void **state)
{
    (void)state;
    lmc_shape shapes[2] = {{2, {2, 16}}, {1, {4}}};
    lmc_dtype dtypes[2] = {LMC_DTYPE_FLOAT16, LMC_DTYPE_BFLOAT16};
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make(&d, shapes, 2, dtypes, 2, NULL), LMC_OK);
    lmc_trace_arg a = {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &d}};
    assert_args_text(&a, 1, " layout_desc=[2,16]:float16+[4]:bfloat16");
}

static void test_scalars_print_as_python_shows_them(void **state)
{
    (void)state;
    lmc_trace_arg a[6] = {
        {"mode", 4, lmc_tv_str("new", 3)},
        {"extra_count", 11, lmc_tv_int(3)},
        {"policy", 6, {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_SEGMENTED_PREFIX}},
        {"x", 1, lmc_tv_float(0.5)},
        {"y", 1, lmc_tv_nil()},
        {"z", 1, lmc_tv_bool(true)},
    };
    assert_args_text(a, 6, " mode=new extra_count=3 policy=SEGMENTED_PREFIX x=0.5 y=None z=True");
}

static void test_strings_with_blanks_or_controls_are_quoted_and_escaped(void **state)
{
    (void)state;
    lmc_trace_arg a[3] = {
        {"external_request_id", 19, lmc_tv_str("req 1\x1b[2J\n\"", 11)},
        {"e", 1, lmc_tv_str("", 0)},
        {"id", 2, lmc_tv_str("req-42/a.b:c@d", 14)},
    };
    assert_args_text(a, 3,
                     " external_request_id=\"req\\x201\\x1b[2J\\n\\\"\" e=\"\" id=req-42/a.b:c@d");
}

static void test_an_argument_name_is_escaped_too(void **state)
{
    (void)state;
    lmc_trace_arg a = {"a b\n", 4, lmc_tv_int(1)};
    assert_args_text(&a, 1, " a\\x20b\\n=1");
}

static void test_a_long_value_is_cut_on_a_character_boundary(void **state)
{
    (void)state;
    char s[300];
    memset(s, 'a', sizeof(s));
    memcpy(s + 92, "\xc3\xa9\xc3\xa9", 4); /* two-byte characters around the cut */
    lmc_trace_arg a = {"s", 1, lmc_tv_str(s, sizeof(s))};
    char *got = args_text(&a, 1);
    size_t n = strlen(got);
    assert_true(n <= strlen(" s=") + 96);
    assert_string_equal(got + n - 2, "..");
    /* No half character before the "..". */
    assert_true(((unsigned char)got[n - 3] & 0xc0) != 0xc0);
    free(got);
}

static void test_nested_values_and_bytes_are_compact(void **state)
{
    (void)state;
    lmc_tv inner[2] = {lmc_tv_int(1), lmc_tv_str("x", 1)};
    lmc_tv mk[1] = {lmc_tv_str("k", 1)};
    lmc_tv mv[1] = {{.kind = LMC_TV_TUPLE, .u.list = {inner, 2}}};
    lmc_trace_arg a[2] = {
        {"m", 1, {.kind = LMC_TV_MAP, .u.map = {mk, mv, 1}}},
        {"b", 1, {.kind = LMC_TV_BIN, .u.s = {"\x01\x02\x03", 3}}},
    };
    assert_args_text(a, 2, " m={k:(1,x)} b=0x010203");
}

/* ---------------------------------------------------------------------- */
/* JSON                                                                    */
/* ---------------------------------------------------------------------- */

static char *json_text(const lmc_tv *v)
{
    lmc_json *j = lmc_trace_dump_value_json(v);
    assert_non_null(j);
    char *s = lmc_json_dumps(j, 0, -1, NULL);
    lmc_json_free(j);
    assert_non_null(s);
    return s;
}

static void test_json_of_a_key_has_every_field(void **state)
{
    (void)state;
    lmc_object_key k = tt_key("llama\x1b", 0xa0b1c2d3, 0x01000100, 7, "salt");
    lmc_tv v = key_tv(&k);
    char *s = json_text(&v);
    assert_string_equal(s, "{\"chunk_hash\": \"a0b1c2d3\", \"model_name\": \"llama\\u001b\", "
                           "\"kv_rank\": 16777472, \"object_group_id\": 7, \"cache_salt\": "
                           "\"salt\"}");
    free(s);
}

static void test_json_of_a_layout_and_other_tagged_values(void **state)
{
    (void)state;
    int64_t dims[2] = {2, 8};
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 2, LMC_DTYPE_BFLOAT16, NULL), LMC_OK);
    lmc_tv items[4] = {
        {.kind = LMC_TV_LAYOUT, .u.layout = &d},
        {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_PREFIX},
        {.kind = LMC_TV_DTYPE, .u.dtype = LMC_DTYPE_FLOAT32},
        {.kind = LMC_TV_BIN, .u.s = {"\xff\x00", 2}},
    };
    lmc_tv t = {.kind = LMC_TV_TUPLE, .u.list = {items, 4}};
    char *s = json_text(&t);
    assert_string_equal(s, "[{\"shapes\": [[2, 8]], \"dtypes\": [\"torch.bfloat16\"]}, \"PREFIX\", "
                           "\"torch.float32\", \"ff00\"]");
    free(s);
}

static void test_json_of_a_prefetch_handle_lists_its_fields(void **state)
{
    (void)state;
    uint32_t found[2] = {0, 1}, orig[1] = {2};
    lmc_prefetch_handle h;
    assert_int_equal(lmc_prefetch_handle_make(&h, 9, "r", found, 2, 3, 1.5, orig, 1), LMC_OK);
    lmc_tv v = {.kind = LMC_TV_PREFETCH_HANDLE, .u.handle = &h};
    char *s = json_text(&v);
    assert_string_equal(s, "{\"prefetch_request_id\": 9, \"external_request_id\": \"r\", "
                           "\"l1_found_indices\": [0, 1], \"total_requested_keys\": 3, "
                           "\"submit_time\": 1.5, \"l2_orig_indices\": [2]}");
    free(s);
    lmc_prefetch_handle_clear(&h);
}

/* ---------------------------------------------------------------------- */
/* Filters                                                                 */
/* ---------------------------------------------------------------------- */

static void test_the_window_is_half_open(void **state)
{
    (void)state;
    lmc_trace_filter f = {.has_from = true, .from = 1.0, .has_to = true, .to = 2.0};
    assert_false(lmc_trace_filter_time(&f, 0.999));
    assert_true(lmc_trace_filter_time(&f, 1.0));
    assert_true(lmc_trace_filter_time(&f, 1.999));
    assert_false(lmc_trace_filter_time(&f, 2.0));
    f.has_to = false;
    assert_true(lmc_trace_filter_time(&f, 1e9));
}

static void test_a_nan_time_passes_only_without_a_window(void **state)
{
    (void)state;
    lmc_trace_filter f = {0};
    assert_true(lmc_trace_filter_time(&f, nan("")));
    f.has_from = true;
    assert_false(lmc_trace_filter_time(&f, nan("")));
}

static void test_qualnames_match_in_full_or_short_form(void **state)
{
    (void)state;
    const char *names[2] = {"finish_write", "lmcache.other.Op"};
    lmc_trace_filter f = {.qualnames = names, .n_qualnames = 2};
    const char *fw = QUAL("finish_write"), *rw = QUAL("reserve_write");
    assert_true(lmc_trace_filter_qualname(&f, fw, strlen(fw)));
    assert_false(lmc_trace_filter_qualname(&f, rw, strlen(rw)));
    assert_true(lmc_trace_filter_qualname(&f, "lmcache.other.Op", 16));
    /* A foreign qualname has no short form: its last component does not match. */
    assert_false(lmc_trace_filter_qualname(&f, "x.finish_write", 14));
    names[0] = fw;
    assert_true(lmc_trace_filter_qualname(&f, fw, strlen(fw)));
}

static void test_key_prefixes_need_eight_hex_digits(void **state)
{
    (void)state;
    lmc_trace_filter f = {0};
    lmc_error err;
    assert_int_equal(lmc_trace_filter_set_key(&f, "0102030", &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "too short (at least 8 hex digits)"));
    assert_int_equal(lmc_trace_filter_set_key(&f, "0102030g", &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'0102030g' is not hexadecimal"));
    char big[2 * LMC_CHUNK_HASH_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(lmc_trace_filter_set_key(&f, big, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "too long"));
    assert_int_equal(f.key_digits, 0);
}

static void test_a_key_prefix_matches_any_key_of_a_record(void **state)
{
    (void)state;
    lmc_object_key k[2] = {tt_key(MODEL, 0x11111111, 0, 0, ""),
                           tt_key(MODEL, 0xA0B1C2D3, 0, 0, "")};
    lmc_tv items[2] = {key_tv(&k[0]), key_tv(&k[1])};
    lmc_trace_arg a = {"keys", 4, list_tv(items, 2)};
    lmc_trace_filter f = {0};
    assert_true(lmc_trace_filter_key(&f, &a, 1)); /* no criterion */
    assert_int_equal(lmc_trace_filter_set_key(&f, "A0b1C2d3", NULL), LMC_OK);
    assert_true(lmc_trace_filter_key(&f, &a, 1));
    assert_int_equal(lmc_trace_filter_set_key(&f, "a0b1c2d4", NULL), LMC_OK);
    assert_false(lmc_trace_filter_key(&f, &a, 1));
    assert_false(lmc_trace_filter_key(&f, NULL, 0));
}

static void test_an_odd_digit_count_compares_the_last_nibble(void **state)
{
    (void)state;
    lmc_object_key k = tt_key(MODEL, 0xa0b1c2d3, 0, 0, "");
    lmc_trace_arg a = {"keys", 4, key_tv(&k)};
    lmc_trace_filter f = {0};
    uint8_t h[5] = {0xa0, 0xb1, 0xc2, 0xd3, 0x4f};
    lmc_object_key k5;
    assert_int_equal(lmc_object_key_make(&k5, h, 5, MODEL, 0, 0, "", NULL), LMC_OK);
    lmc_trace_arg a5 = {"keys", 4, key_tv(&k5)};
    assert_int_equal(lmc_trace_filter_set_key(&f, "a0b1c2d34", NULL), LMC_OK);
    assert_true(lmc_trace_filter_key(&f, &a5, 1));
    assert_false(lmc_trace_filter_key(&f, &a, 1)); /* the hash is shorter than the prefix */
    assert_int_equal(lmc_trace_filter_set_key(&f, "a0b1c2d35", NULL), LMC_OK);
    assert_false(lmc_trace_filter_key(&f, &a5, 1));
}

static void test_keys_are_found_inside_nested_values(void **state)
{
    (void)state;
    lmc_object_key k[3] = {tt_key(MODEL, 1, 0, 0, ""), tt_key(MODEL, 0xdeadbeef, 0, 0, ""),
                           tt_key(MODEL, 3, 0, 0, "")};
    lmc_tv inner[2] = {key_tv(&k[1]), key_tv(&k[2])};
    lmc_tv mk[1] = {lmc_tv_str("keys", 4)};
    lmc_tv mv[1] = {list_tv(inner, 2)};
    lmc_trace_arg a[2] = {
        {"first", 5, key_tv(&k[0])},
        {"spec", 4, {.kind = LMC_TV_MAP, .u.map = {mk, mv, 1}}},
    };
    const lmc_object_key *first = NULL;
    assert_int_equal(lmc_trace_args_count_keys(a, 2, &first), 3);
    assert_ptr_equal(first, &k[0]);
    lmc_trace_filter f = {0};
    assert_int_equal(lmc_trace_filter_set_key(&f, "deadbeef", NULL), LMC_OK);
    assert_true(lmc_trace_filter_key(&f, a, 2));
    assert_int_equal(lmc_trace_args_count_keys(a, 0, &first), 0);
    assert_null(first);
}

/* ---------------------------------------------------------------------- */
/* Whole listings                                                          */
/* ---------------------------------------------------------------------- */

typedef struct fixture {
    char dir[64];
    char path[128];
    msgpack_sbuffer sb;
    lmc_object_key keys[3];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    tt_tmpdir(f->dir);
    snprintf(f->path, sizeof(f->path), "%s/t.lct", f->dir);
    msgpack_sbuffer_init(&f->sb);
    lmc_trace_header h = {.magic = "LMCT",
                          .magic_len = 4,
                          .format_version = 1,
                          .level = "storage",
                          .trace_schema_version = 2,
                          .t_mono_start = 100.0,
                          .t_wall_start = 1767225600.25,
                          .sm_config_json = "{}",
                          .sm_config_digest =
                              "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"};
    assert_int_equal(lmc_trace_encode_header(&f->sb, &h, NULL), LMC_OK);
    f->keys[0] = tt_key(MODEL, 0xaa000001, 0, 0, "");
    f->keys[1] = tt_key(MODEL, 0xbb000002, 0, 0, "");
    f->keys[2] = tt_key(MODEL, 0xcc000003, 0, 0, "");
    tt_log_capture_start();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tt_log_capture_stop();
    msgpack_sbuffer_destroy(&f->sb);
    tt_rmtree(f->dir);
    free(f);
    return 0;
}

/* A record of keys[first..first+n) at t. */
static void add(fixture *f, double t, const char *q, size_t first, size_t n)
{
    lmc_tv items[3];
    for (size_t i = 0; i < n; i++)
        items[i] = key_tv(&f->keys[first + i]);
    lmc_trace_arg a = {"keys", 4, list_tv(items, n)};
    assert_int_equal(
        lmc_trace_encode_record(&f->sb, t, 1767225600.25 + t, q, strlen(q), &a, 1, NULL), LMC_OK);
}

/* The listing of the fixture's trace with opt, as a string the caller frees. */
static char *listing(fixture *f, const lmc_trace_dump_options *opt, lmc_trace_dump_counts *c)
{
    tt_write_file(f->path, f->sb.data, f->sb.size);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    lmc_error err;
    lmc_status st = lmc_trace_dump_file(f->path, opt, out, c, &err);
    fclose(out);
    if (st != LMC_OK)
        fail_msg("dump: %s", err.msg);
    return text;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_the_text_listing_has_a_header_and_one_line_per_record(void **state)
{
    fixture *f = *state;
    add(f, 0.0, QUAL("reserve_write"), 0, 2);
    add(f, 0.5, QUAL("finish_write"), 0, 2);
    lmc_trace_dump_options opt = {.header = true};
    lmc_trace_dump_counts c;
    char *s = listing(f, &opt, &c);
    assert_non_null(strstr(s, "# format_version 1  level storage  trace_schema_version 2\n"));
    assert_non_null(strstr(s, "# t_mono_start 100.000000  t_wall_start 1767225600.250000 "
                              "(2026-01-01T00:00:00.250000Z)\n"));
    assert_non_null(strstr(s, "# sm_config_digest 44136fa355b3678a"));
    assert_non_null(strstr(s, "\n       1      0.000000 reserve_write                         2 "
                              "keys=2[aa000001]\n"));
    assert_non_null(strstr(s, "\n       2      0.500000 finish_write"));
    assert_int_equal(c.shown, 2);
    assert_int_equal(c.records, 2);
    free(s);
}

static void test_filters_select_the_records_and_keep_their_indices(void **state)
{
    fixture *f = *state;
    add(f, 0.0, QUAL("reserve_write"), 0, 2); /* 1: aa, bb */
    add(f, 1.0, QUAL("finish_write"), 0, 2);  /* 2 */
    add(f, 2.0, QUAL("reserve_write"), 2, 1); /* 3: cc */
    add(f, 3.0, QUAL("finish_write"), 2, 1);  /* 4 */
    const char *names[1] = {"finish_write"};
    lmc_trace_dump_options opt = {
        .filter = {.has_from = true, .from = 1.0, .qualnames = names, .n_qualnames = 1}};
    char *s = listing(f, &opt, NULL);
    assert_int_equal(count_lines(s), 2);
    assert_true(strncmp(s, "       2      1.000000 finish_write", 34) == 0);
    assert_non_null(strstr(s, "\n       4      3.000000 finish_write"));
    free(s);

    lmc_trace_dump_options by_key = {0};
    assert_int_equal(lmc_trace_filter_set_key(&by_key.filter, "cc000003", NULL), LMC_OK);
    s = listing(f, &by_key, NULL);
    assert_int_equal(count_lines(s), 2);
    assert_true(strncmp(s, "       3 ", 9) == 0);
    free(s);
}

static void test_the_limit_stops_the_listing(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < 10; i++)
        add(f, 0.1 * i, QUAL("finish_write"), 0, 1);
    lmc_trace_dump_options opt = {.limit = 3};
    lmc_trace_dump_counts c;
    char *s = listing(f, &opt, &c);
    assert_int_equal(count_lines(s), 3);
    assert_int_equal(c.shown, 3);
    free(s);
}

static void test_markers_are_shown_by_label_without_an_index(void **state)
{
    fixture *f = *state;
    add(f, 0.0, QUAL("finish_write"), 0, 1);
    lmc_trace_arg d = {"dropped_count", 13, lmc_tv_int(5)};
    assert_int_equal(lmc_trace_encode_record(&f->sb, 0.25, 0.0, LMC_TRACE_DROPPED_QUALNAME,
                                             strlen(LMC_TRACE_DROPPED_QUALNAME), &d, 1, NULL),
                     LMC_OK);
    add(f, 0.5, QUAL("finish_write"), 0, 1);
    lmc_trace_dump_options opt = {0};
    lmc_trace_dump_counts c;
    char *s = listing(f, &opt, &c);
    assert_non_null(strstr(s, "\n       -      0.250000 [dropped_records]                     0 "
                              "dropped_count=5\n"));
    assert_non_null(strstr(s, "\n       2      0.500000 finish_write"));
    assert_int_equal(c.records, 2);
    free(s);

    lmc_trace_dump_options json = {.format = LMC_TRACE_DUMP_JSONL};
    s = listing(f, &json, NULL);
    assert_non_null(strstr(s, "{\"type\": \"marker\", \"marker\": \"dropped_records\", "));
    free(s);
}

static void test_malformed_records_and_a_cut_tail_are_noted(void **state)
{
    fixture *f = *state;
    add(f, 0.0, QUAL("finish_write"), 0, 1);
    /* A frame whose body is not a Record: an int. */
    const uint8_t bad[5] = {0, 0, 0, 1, 0x07};
    msgpack_sbuffer_write(&f->sb, (const char *)bad, sizeof(bad));
    size_t next = f->sb.size;
    add(f, 0.5, QUAL("finish_write"), 0, 1);
    msgpack_sbuffer_write(&f->sb, "\0\0", 2); /* a cut length prefix */
    lmc_trace_dump_options opt = {0};
    lmc_trace_dump_counts c;
    char *s = listing(f, &opt, &c);
    char want[128];
    snprintf(want, sizeof(want),
             "[malformed]                           - 1 record(s) skipped "
             "before offset %zu\n",
             next);
    assert_non_null(strstr(s, want));
    assert_non_null(strstr(s, "[truncated]                           - the file ends in a cut "
                              "record\n"));
    assert_non_null(strstr(s, "\n       2      0.500000 finish_write"));
    assert_int_equal(c.malformed, 1);
    assert_true(c.truncated);
    free(s);

    lmc_trace_dump_options json = {.format = LMC_TRACE_DUMP_JSONL};
    s = listing(f, &json, NULL);
    snprintf(want, sizeof(want),
             "{\"type\": \"malformed\", \"count\": 1, \"before_offset\": %zu}\n", next);
    assert_non_null(strstr(s, want));
    assert_non_null(strstr(s, "{\"type\": \"truncated\"}\n"));
    free(s);
}

static void test_a_foreign_qualname_is_printed_in_full_and_escaped(void **state)
{
    fixture *f = *state;
    add(f, 0.0, "evil\x1b]0;owned\x07\nname x", 0, 1);
    lmc_trace_dump_options opt = {0};
    char *s = listing(f, &opt, NULL);
    assert_non_null(strstr(s, " evil\\x1b]0;owned\\x07\\nname\\x20x "));
    for (const char *p = s; *p; p++)
        assert_true(*p == '\n' || ((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f));
    assert_int_equal(count_lines(s), 1);
    free(s);
}

static void test_jsonl_has_the_header_then_every_record_in_full(void **state)
{
    fixture *f = *state;
    add(f, 0.0, QUAL("reserve_write"), 0, 1);
    lmc_trace_dump_options opt = {.format = LMC_TRACE_DUMP_JSONL, .header = true};
    char *s = listing(f, &opt, NULL);
    assert_int_equal(count_lines(s), 2);
    assert_true(strncmp(s, "{\"type\": \"header\", \"file\": ", 27) == 0);
    assert_non_null(strstr(s, "\"sm_config_json\": \"{}\", \"sm_config_digest\": \"44136fa3"));
    assert_non_null(strstr(s, "\n{\"type\": \"record\", \"index\": 1, \"offset\": "));
    assert_non_null(strstr(s, "\"op\": \"reserve_write\", \"n_keys\": 1, \"args\": {\"keys\": "
                              "[{\"chunk_hash\": \"aa000001\", \"model_name\": \"m\", "));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_show_their_count_and_the_first_hash_prefix),
        cmocka_unit_test(test_a_short_chunk_hash_is_shown_whole),
        cmocka_unit_test(test_an_empty_key_list_is_an_empty_list),
        cmocka_unit_test(test_a_layout_shows_shapes_and_dtypes),
        cmocka_unit_test(test_scalars_print_as_python_shows_them),
        cmocka_unit_test(test_strings_with_blanks_or_controls_are_quoted_and_escaped),
        cmocka_unit_test(test_an_argument_name_is_escaped_too),
        cmocka_unit_test(test_a_long_value_is_cut_on_a_character_boundary),
        cmocka_unit_test(test_nested_values_and_bytes_are_compact),
        cmocka_unit_test(test_json_of_a_key_has_every_field),
        cmocka_unit_test(test_json_of_a_layout_and_other_tagged_values),
        cmocka_unit_test(test_json_of_a_prefetch_handle_lists_its_fields),
        cmocka_unit_test(test_the_window_is_half_open),
        cmocka_unit_test(test_a_nan_time_passes_only_without_a_window),
        cmocka_unit_test(test_qualnames_match_in_full_or_short_form),
        cmocka_unit_test(test_key_prefixes_need_eight_hex_digits),
        cmocka_unit_test(test_a_key_prefix_matches_any_key_of_a_record),
        cmocka_unit_test(test_an_odd_digit_count_compares_the_last_nibble),
        cmocka_unit_test(test_keys_are_found_inside_nested_values),
        cmocka_unit_test_setup_teardown(test_the_text_listing_has_a_header_and_one_line_per_record,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_filters_select_the_records_and_keep_their_indices,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_limit_stops_the_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_markers_are_shown_by_label_without_an_index, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_malformed_records_and_a_cut_tail_are_noted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_foreign_qualname_is_printed_in_full_and_escaped,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_jsonl_has_the_header_then_every_record_in_full, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
