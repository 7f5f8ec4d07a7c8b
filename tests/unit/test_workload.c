/*
 * test_workload.c -- the Mooncake trace reader, token synthesis, the
 * synthetic chat workload and the KV byte pattern (src/client/workload.h).
 *
 * The formulas are checked against reference implementations written out
 * again here, so a change to the token or byte scheme (which the server's
 * tests and recorded results depend on) fails loudly.
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/workload.h"

/* ---- references and helpers -------------------------------------------- */

static uint64_t ref_splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint32_t ref_token(int64_t h, size_t t)
{
    return (uint32_t)ref_splitmix(ref_splitmix((uint64_t)h) ^ (t % 512));
}

/* The n-th (1-based) xorshift64* output from seed. */
static uint64_t ref_xorshift_word(uint64_t seed, int n)
{
    uint64_t x = seed, out = 0;
    for (int i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out = x * 0x2545F4914F6CDD1DULL;
    }
    return out;
}

/* The trace in ../shared relative to the project root, found from this file's path. */
static bool shared_trace_path(char *buf, size_t len)
{
    const char *f = __FILE__;
    const char *tail = strstr(f, "tests/unit/test_workload.c");
    if (tail == NULL)
        return false;
    snprintf(buf, len, "%.*s../shared/traces/mooncake/mooncake_synthetic_trace.jsonl",
             (int)(tail - f), f);
    return access(buf, R_OK) == 0;
}

/* Write text to a fresh temporary file; returns its path (static buffer). */
static const char *temp_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/test_workload_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void assert_parse_fails(const char *line, const char *needle)
{
    lmc_mooncake_record rec;
    lmc_error err;
    assert_int_equal(lmc_mooncake_parse_line(line, strlen(line), 7, &rec, &err), LMC_ERR_FORMAT);
    if (strstr(err.msg, "line 7: ") != err.msg || strstr(err.msg, needle) == NULL)
        fail_msg("message '%s' does not start with 'line 7: ' and name '%s'", err.msg, needle);
    assert_null(rec.hash_ids);
}

/* ---- Mooncake parsing -------------------------------------------------- */

static void test_first_record_of_the_synthetic_trace(void **state)
{
    (void)state;
    char path[4096];
    if (!shared_trace_path(path, sizeof(path)))
        skip();
    lmc_mooncake_reader *r;
    lmc_error err;
    assert_int_equal(lmc_mooncake_reader_open(path, &r, &err), LMC_OK);
    lmc_mooncake_record rec;
    assert_int_equal(lmc_mooncake_reader_next(r, &rec, &err), LMC_OK);
    assert_int_equal(rec.timestamp_ms, 0);
    assert_int_equal(rec.input_length, 40160);
    assert_int_equal(rec.output_length, 6);
    assert_int_equal(rec.n_hash_ids, 79);
    for (size_t i = 0; i < rec.n_hash_ids; i++)
        assert_int_equal(rec.hash_ids[i], (int64_t)i);
    assert_int_equal(lmc_mooncake_reader_skipped(r), 0);
    lmc_mooncake_record_free(&rec);
    lmc_mooncake_reader_close(r);
}

static void test_whole_synthetic_trace_loads_without_skips(void **state)
{
    (void)state;
    char path[4096];
    if (!shared_trace_path(path, sizeof(path)))
        skip();
    lmc_workload *w;
    lmc_error err;
    assert_int_equal(lmc_workload_load_mooncake(path, 0, &w, &err), LMC_OK);
    assert_int_equal(lmc_workload_count(w), 3993);
    assert_int_equal(lmc_workload_skipped_lines(w), 0);
    /* Full 256-token chunks over the trace: 237,347 (spec section 5.2). */
    uint64_t chunks = 0;
    for (size_t i = 0; i < lmc_workload_count(w); i++)
        chunks += lmc_workload_prompt_len(w, i) / 256;
    assert_int_equal(chunks, 237347);
    assert_true(lmc_workload_arrival_ms(w, 3992) == 1022025.0);
    lmc_workload_destroy(w);
}

static void test_parse_line_accepts_a_valid_record(void **state)
{
    (void)state;
    const char *line =
        "{\"timestamp\": 12, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [5, 9]}";
    lmc_mooncake_record rec;
    lmc_error err;
    assert_int_equal(lmc_mooncake_parse_line(line, strlen(line), 1, &rec, &err), LMC_OK);
    assert_int_equal(rec.timestamp_ms, 12);
    assert_int_equal(rec.input_length, 600);
    assert_int_equal(rec.output_length, 3);
    assert_int_equal(rec.n_hash_ids, 2);
    assert_int_equal(rec.hash_ids[1], 9);
    lmc_mooncake_record_free(&rec);
}

static void test_parse_line_accepts_an_empty_prompt(void **state)
{
    (void)state;
    const char *line =
        "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 0, \"hash_ids\": []}";
    lmc_mooncake_record rec;
    assert_int_equal(lmc_mooncake_parse_line(line, strlen(line), 1, &rec, NULL), LMC_OK);
    assert_int_equal(rec.n_hash_ids, 0);
    lmc_mooncake_record_free(&rec);
}

static void test_parse_line_rejects_text_that_is_not_json(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 0, \"input_length\"", "not JSON");
}

static void test_parse_line_rejects_a_non_object(void **state)
{
    (void)state;
    assert_parse_fails("[1, 2, 3]", "expected an object, got array");
}

static void test_parse_line_rejects_a_missing_field(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 0, \"input_length\": 10, \"hash_ids\": [1]}",
                       "missing 'output_length'");
    assert_parse_fails("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}",
                       "missing 'hash_ids'");
}

static void test_parse_line_rejects_a_non_integer_timestamp(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 1.5, \"input_length\": 10, \"output_length\": 1, "
                       "\"hash_ids\": [1]}",
                       "'timestamp' must be an integer (got real)");
    assert_parse_fails("{\"timestamp\": \"0\", \"input_length\": 10, \"output_length\": 1, "
                       "\"hash_ids\": [1]}",
                       "'timestamp' must be an integer (got string)");
}

static void test_parse_line_rejects_a_negative_length(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 0, \"input_length\": -4, \"output_length\": 1, "
                       "\"hash_ids\": []}",
                       "'input_length' is negative (-4)");
}

static void test_parse_line_rejects_a_hash_id_count_mismatch(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 1, "
                       "\"hash_ids\": [1, 2]}",
                       "'hash_ids' has 2 ids, but input_length 1025 needs 3");
}

static void test_parse_line_rejects_a_non_integer_hash_id(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, "
                       "\"hash_ids\": [1, \"x\"]}",
                       "hash_ids[1] must be an integer (got string)");
    assert_parse_fails("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, "
                       "\"hash_ids\": 5}",
                       "'hash_ids' must be an array (got integer)");
}

static void test_parse_line_rejects_duplicate_keys(void **state)
{
    (void)state;
    assert_parse_fails("{\"timestamp\": 0, \"timestamp\": 1, \"input_length\": 0, "
                       "\"output_length\": 1, \"hash_ids\": []}",
                       "not JSON");
}

/* ---- Mooncake reader ---------------------------------------------------- */

static void test_reader_skips_and_counts_malformed_lines(void **state)
{
    (void)state;
    const char *path = temp_file("{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 1, "
                                 "\"hash_ids\": [1]}\n"
                                 "garbage\n"
                                 "\n"
                                 "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, "
                                 "\"hash_ids\": []}\r\n"
                                 "{\"timestamp\": 9, \"input_length\": 513, \"output_length\": 1, "
                                 "\"hash_ids\": [1, 2]}\r\n");
    lmc_mooncake_reader *r;
    lmc_error err;
    assert_int_equal(lmc_mooncake_reader_open(path, &r, &err), LMC_OK);
    lmc_mooncake_record rec;
    assert_int_equal(lmc_mooncake_reader_next(r, &rec, &err), LMC_OK);
    assert_int_equal(rec.timestamp_ms, 0);
    lmc_mooncake_record_free(&rec);
    assert_int_equal(lmc_mooncake_reader_next(r, &rec, &err), LMC_OK);
    assert_int_equal(rec.timestamp_ms, 9); /* line 4 (ids missing) and line 2 skipped */
    assert_int_equal(rec.n_hash_ids, 2);
    lmc_mooncake_record_free(&rec);
    assert_int_equal(lmc_mooncake_reader_next(r, &rec, &err), LMC_ERR_EOF);
    assert_int_equal(lmc_mooncake_reader_skipped(r), 2);
    const char *first = lmc_mooncake_reader_first_error(r);
    assert_non_null(strstr(first, path));
    assert_non_null(strstr(first, "line 2: not JSON"));
    lmc_mooncake_reader_close(r);
    unlink(path);
}

static void test_reader_open_names_a_missing_file(void **state)
{
    (void)state;
    lmc_mooncake_reader *r;
    lmc_error err;
    assert_int_equal(lmc_mooncake_reader_open("/nonexistent/t.jsonl", &r, &err), LMC_ERR_IO);
    assert_non_null(strstr(err.msg, "'/nonexistent/t.jsonl'"));
}

static void test_workload_with_only_malformed_lines_is_an_error(void **state)
{
    (void)state;
    const char *path = temp_file("nope\n{}\n");
    lmc_workload *w;
    lmc_error err;
    assert_int_equal(lmc_workload_load_mooncake(path, 0, &w, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "2 malformed lines"));
    assert_non_null(strstr(err.msg, "line 1: not JSON"));
    unlink(path);
}

static void test_workload_stops_at_max_requests(void **state)
{
    (void)state;
    const char *path = temp_file(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n"
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [2]}\n"
        "{\"timestamp\": 2, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [3]}\n");
    lmc_workload *w;
    lmc_error err;
    assert_int_equal(lmc_workload_load_mooncake(path, 2, &w, &err), LMC_OK);
    assert_int_equal(lmc_workload_count(w), 2);
    assert_true(lmc_workload_arrival_ms(w, 1) == 1.0);
    lmc_workload_destroy(w);
    unlink(path);
}

/* ---- token synthesis ----------------------------------------------------- */

static void test_tokens_follow_the_documented_formula(void **state)
{
    (void)state;
    int64_t ids[] = {7, 123456789, -3};
    lmc_mooncake_record rec = {.input_length = 1500, .hash_ids = ids, .n_hash_ids = 3};
    uint32_t *t = malloc(1500 * sizeof(*t));
    assert_int_equal(lmc_mooncake_tokens(&rec, t, 1500, NULL), LMC_OK);
    for (size_t i = 0; i < 1500; i++) {
        assert_int_equal(t[i], ref_token(ids[i / 512], i));
        assert_int_equal(t[i], lmc_mooncake_token(ids[i / 512], i));
    }
    free(t);
}

static void test_tokens_beyond_the_prompt_are_refused(void **state)
{
    (void)state;
    int64_t ids[] = {1};
    lmc_mooncake_record rec = {.input_length = 100, .hash_ids = ids, .n_hash_ids = 1};
    uint32_t t[101];
    lmc_error err;
    assert_int_equal(lmc_mooncake_tokens(&rec, t, 101, &err), LMC_ERR_INVALID);
}

static void test_shared_hash_ids_give_identical_prefix_tokens(void **state)
{
    (void)state;
    int64_t a_ids[] = {10, 11, 12}, b_ids[] = {10, 11, 99};
    lmc_mooncake_record a = {.input_length = 1536, .hash_ids = a_ids, .n_hash_ids = 3};
    lmc_mooncake_record b = {.input_length = 1536, .hash_ids = b_ids, .n_hash_ids = 3};
    uint32_t ta[1536], tb[1536];
    assert_int_equal(lmc_mooncake_tokens(&a, ta, 1536, NULL), LMC_OK);
    assert_int_equal(lmc_mooncake_tokens(&b, tb, 1536, NULL), LMC_OK);
    assert_memory_equal(ta, tb, 1024 * sizeof(uint32_t));
    size_t equal_after = 0;
    for (size_t i = 1024; i < 1536; i++)
        equal_after += ta[i] == tb[i];
    assert_true(equal_after <= 1); /* a 32-bit collision, at most */
    /* And so do the pattern seeds of the shared chunks, but not the rest. */
    uint64_t sa = LMC_KV_PATTERN_SEED0, sb = LMC_KV_PATTERN_SEED0;
    for (size_t c = 0; c < 6; c++) {
        sa = lmc_kv_chunk_seed(sa, ta + c * 256, 256);
        sb = lmc_kv_chunk_seed(sb, tb + c * 256, 256);
        if (c < 4)
            assert_true(sa == sb);
        else
            assert_true(sa != sb);
    }
}

static void test_tokens_differ_within_a_block(void **state)
{
    (void)state;
    /* Chunks 0 and 1 of one 512-token block must not look alike to the server. */
    int64_t ids[] = {42};
    lmc_mooncake_record rec = {.input_length = 512, .hash_ids = ids, .n_hash_ids = 1};
    uint32_t t[512];
    assert_int_equal(lmc_mooncake_tokens(&rec, t, 512, NULL), LMC_OK);
    assert_memory_not_equal(t, t + 256, 256 * sizeof(uint32_t));
}

static void test_workload_tokens_keep_full_chunks_only(void **state)
{
    (void)state;
    const char *path = temp_file(
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
        "{\"timestamp\": 1, \"input_length\": 255, \"output_length\": 1, \"hash_ids\": [3]}\n");
    lmc_workload *w;
    lmc_error err;
    assert_int_equal(lmc_workload_load_mooncake(path, 0, &w, &err), LMC_OK);
    uint32_t *t;
    size_t n;
    assert_int_equal(lmc_workload_tokens(w, 0, 256, &t, &n, &err), LMC_OK);
    assert_int_equal(n, 512);
    assert_int_equal(t[511], ref_token(1, 511));
    free(t);
    assert_int_equal(lmc_workload_tokens(w, 0, 0, &t, &n, &err), LMC_OK);
    assert_int_equal(n, 600);
    assert_int_equal(t[599], ref_token(2, 599));
    free(t);
    assert_int_equal(lmc_workload_tokens(w, 1, 256, &t, &n, &err), LMC_OK);
    assert_int_equal(n, 0);
    assert_null(t);
    assert_int_equal(lmc_workload_tokens(w, 2, 256, &t, &n, &err), LMC_ERR_INVALID);
    lmc_workload_destroy(w);
    unlink(path);
}

/* ---- synthetic chat --------------------------------------------------------- */

static lmc_chat_config small_chat(void)
{
    lmc_chat_config c;
    lmc_chat_config_init(&c);
    c.users = 4;
    c.rounds = 3;
    c.groups = 2;
    c.system_len = 300;
    c.prompt_len = 50;
    c.answer_len = 70;
    c.seed = 11;
    c.interval_ms = 2.5;
    return c;
}

static uint32_t *chat_prompt(const lmc_chat_config *c, uint32_t user, uint32_t round, size_t *n)
{
    *n = lmc_chat_prompt_len(c, round);
    uint32_t *t = malloc(*n * sizeof(*t));
    lmc_chat_tokens(c, user, round, t, *n);
    return t;
}

static void test_chat_defaults_are_valid(void **state)
{
    (void)state;
    lmc_chat_config c;
    lmc_chat_config_init(&c);
    assert_int_equal(lmc_chat_config_check(&c, NULL), LMC_OK);
    assert_int_equal(c.users, 8);
    assert_int_equal(c.rounds, 4);
}

static void test_chat_is_deterministic_from_the_seed(void **state)
{
    (void)state;
    lmc_chat_config c = small_chat();
    size_t n1, n2, n3;
    uint32_t *a = chat_prompt(&c, 3, 2, &n1);
    uint32_t *b = chat_prompt(&c, 3, 2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1 * sizeof(uint32_t));
    c.seed = 12;
    uint32_t *d = chat_prompt(&c, 3, 2, &n3);
    assert_memory_not_equal(a, d, n1 * sizeof(uint32_t));
    free(a);
    free(b);
    free(d);
}

static void test_chat_round_extends_the_previous_prompt(void **state)
{
    (void)state;
    lmc_chat_config c = small_chat();
    size_t n0, n1;
    uint32_t *r0 = chat_prompt(&c, 1, 0, &n0);
    uint32_t *r1 = chat_prompt(&c, 1, 1, &n1);
    assert_int_equal(n0, 300 + 50);
    assert_int_equal(n1, 300 + 50 + 70 + 50);
    assert_memory_equal(r0, r1, n0 * sizeof(uint32_t));
    free(r0);
    free(r1);
}

static void test_chat_groups_share_the_system_prompt(void **state)
{
    (void)state;
    lmc_chat_config c = small_chat();
    size_t n;
    uint32_t *u0 = chat_prompt(&c, 0, 0, &n);
    uint32_t *u2 = chat_prompt(&c, 2, 0, &n); /* same group as user 0 */
    uint32_t *u1 = chat_prompt(&c, 1, 0, &n); /* the other group */
    assert_memory_equal(u0, u2, 300 * sizeof(uint32_t));
    assert_memory_not_equal(u0 + 300, u2 + 300, 50 * sizeof(uint32_t)); /* own questions */
    assert_memory_not_equal(u0, u1, 300 * sizeof(uint32_t));
    free(u0);
    free(u1);
    free(u2);
}

static void test_chat_workload_orders_requests_round_by_round(void **state)
{
    (void)state;
    lmc_chat_config c = small_chat();
    lmc_workload *w;
    assert_int_equal(lmc_workload_chat(&c, 0, &w, NULL), LMC_OK);
    assert_int_equal(lmc_workload_count(w), 12);
    /* Request 6 is user 2's round 1, arriving at 6 * 2.5 ms. */
    assert_int_equal(lmc_workload_prompt_len(w, 6), lmc_chat_prompt_len(&c, 1));
    assert_true(lmc_workload_arrival_ms(w, 6) == 15.0);
    uint32_t *t;
    size_t n, m;
    assert_int_equal(lmc_workload_tokens(w, 6, 0, &t, &n, NULL), LMC_OK);
    uint32_t *ref = chat_prompt(&c, 2, 1, &m);
    assert_int_equal(n, m);
    assert_memory_equal(t, ref, n * sizeof(uint32_t));
    free(t);
    free(ref);
    lmc_workload_destroy(w);
    assert_int_equal(lmc_workload_chat(&c, 5, &w, NULL), LMC_OK);
    assert_int_equal(lmc_workload_count(w), 5);
    lmc_workload_destroy(w);
}

static void test_chat_config_check_names_the_bad_field(void **state)
{
    (void)state;
    lmc_error err;
    lmc_chat_config c = small_chat();
    c.groups = 5;
    assert_int_equal(lmc_chat_config_check(&c, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "groups"));
    c = small_chat();
    c.users = 0;
    assert_int_equal(lmc_chat_config_check(&c, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "users"));
    c = small_chat();
    c.interval_ms = -1;
    assert_int_equal(lmc_chat_config_check(&c, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "interval_ms"));
    c = small_chat();
    c.system_len = c.prompt_len = c.answer_len = 0;
    assert_int_equal(lmc_chat_config_check(&c, &err), LMC_ERR_INVALID);
    c = small_chat();
    c.rounds = 100000;
    assert_int_equal(lmc_chat_config_check(&c, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "tokens"));
}

/* ---- KV byte pattern ---------------------------------------------------------- */

static void test_pattern_bytes_follow_the_documented_formula(void **state)
{
    (void)state;
    uint8_t buf[24];
    lmc_kv_pattern p;
    lmc_kv_pattern_init(&p, 1234);
    lmc_kv_pattern_fill(&p, buf, sizeof(buf));
    for (size_t k = 0; k < sizeof(buf); k++) {
        uint64_t w = ref_xorshift_word(1234, (int)(k / 8) + 1);
        assert_int_equal(buf[k], (uint8_t)(w >> (8 * (k % 8))));
    }
}

static void test_pattern_zero_seed_uses_seed0(void **state)
{
    (void)state;
    uint8_t a[16], b[16];
    lmc_kv_pattern p;
    lmc_kv_pattern_init(&p, 0);
    lmc_kv_pattern_fill(&p, a, sizeof(a));
    lmc_kv_pattern_init(&p, LMC_KV_PATTERN_SEED0);
    lmc_kv_pattern_fill(&p, b, sizeof(b));
    assert_memory_equal(a, b, sizeof(a));
}

static void test_pattern_in_pieces_equals_pattern_in_one_go(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint8_t whole[N], parts[N];
    lmc_kv_pattern p;
    lmc_kv_pattern_init(&p, 99);
    lmc_kv_pattern_fill(&p, whole, N);
    lmc_kv_pattern_init(&p, 99);
    size_t sizes[] = {3, 5, 13, 64, 1, 7, 8, 100}, at = 0, i = 0;
    while (at < N) {
        size_t s = sizes[i++ % 8];
        if (s > N - at)
            s = N - at;
        lmc_kv_pattern_fill(&p, parts + at, s);
        at += s;
    }
    assert_memory_equal(whole, parts, N);
    /* Checking in other pieces agrees as well. */
    lmc_kv_pattern_init(&p, 99);
    assert_true(lmc_kv_pattern_check(&p, whole, 9));
    assert_true(lmc_kv_pattern_check(&p, whole + 9, 500));
    assert_true(lmc_kv_pattern_check(&p, whole + 509, N - 509));
}

static void test_pattern_check_finds_one_flipped_byte(void **state)
{
    (void)state;
    enum { N = 4096 };
    uint8_t *buf = malloc(N);
    lmc_kv_pattern p;
    size_t spots[] = {0, 7, 8, 2047, N - 1};
    for (size_t i = 0; i < 5; i++) {
        lmc_kv_pattern_init(&p, 5);
        lmc_kv_pattern_fill(&p, buf, N);
        buf[spots[i]] ^= 0x10;
        lmc_kv_pattern_init(&p, 5);
        assert_false(lmc_kv_pattern_check(&p, buf, N));
    }
    free(buf);
}

static void test_chunk_seed_chains_over_the_prefix(void **state)
{
    (void)state;
    uint32_t chunk[4] = {1, 2, 3, 4};
    uint64_t s0 = lmc_kv_chunk_seed(LMC_KV_PATTERN_SEED0, chunk, 4);
    /* The formula: h = splitmix64(h ^ token) over the chunk. */
    uint64_t h = LMC_KV_PATTERN_SEED0;
    for (int i = 0; i < 4; i++)
        h = ref_splitmix(h ^ chunk[i]);
    assert_true(s0 == h);
    /* The same chunk after a different prefix gets a different seed. */
    assert_true(lmc_kv_chunk_seed(s0, chunk, 4) != s0);
    assert_true(lmc_kv_chunk_seed(1, chunk, 4) != s0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_record_of_the_synthetic_trace),
        cmocka_unit_test(test_whole_synthetic_trace_loads_without_skips),
        cmocka_unit_test(test_parse_line_accepts_a_valid_record),
        cmocka_unit_test(test_parse_line_accepts_an_empty_prompt),
        cmocka_unit_test(test_parse_line_rejects_text_that_is_not_json),
        cmocka_unit_test(test_parse_line_rejects_a_non_object),
        cmocka_unit_test(test_parse_line_rejects_a_missing_field),
        cmocka_unit_test(test_parse_line_rejects_a_non_integer_timestamp),
        cmocka_unit_test(test_parse_line_rejects_a_negative_length),
        cmocka_unit_test(test_parse_line_rejects_a_hash_id_count_mismatch),
        cmocka_unit_test(test_parse_line_rejects_a_non_integer_hash_id),
        cmocka_unit_test(test_parse_line_rejects_duplicate_keys),
        cmocka_unit_test(test_reader_skips_and_counts_malformed_lines),
        cmocka_unit_test(test_reader_open_names_a_missing_file),
        cmocka_unit_test(test_workload_with_only_malformed_lines_is_an_error),
        cmocka_unit_test(test_workload_stops_at_max_requests),
        cmocka_unit_test(test_tokens_follow_the_documented_formula),
        cmocka_unit_test(test_tokens_beyond_the_prompt_are_refused),
        cmocka_unit_test(test_shared_hash_ids_give_identical_prefix_tokens),
        cmocka_unit_test(test_tokens_differ_within_a_block),
        cmocka_unit_test(test_workload_tokens_keep_full_chunks_only),
        cmocka_unit_test(test_chat_defaults_are_valid),
        cmocka_unit_test(test_chat_is_deterministic_from_the_seed),
        cmocka_unit_test(test_chat_round_extends_the_previous_prompt),
        cmocka_unit_test(test_chat_groups_share_the_system_prompt),
        cmocka_unit_test(test_chat_workload_orders_requests_round_by_round),
        cmocka_unit_test(test_chat_config_check_names_the_bad_field),
        cmocka_unit_test(test_pattern_bytes_follow_the_documented_formula),
        cmocka_unit_test(test_pattern_zero_seed_uses_seed0),
        cmocka_unit_test(test_pattern_in_pieces_equals_pattern_in_one_go),
        cmocka_unit_test(test_pattern_check_finds_one_flipped_byte),
        cmocka_unit_test(test_chunk_seed_chains_over_the_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
