/*
 * test_types.c -- ObjectKey (validation, equality, hashing, kv_rank,
 * formatting), TrimPolicy and L1Error names, PrefetchHandle copies.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmcache/types.h"

static const uint8_t HASH4[4] = {0xde, 0xad, 0xbe, 0xef};

/* Assert that err holds LMC_ERR_INVALID and a message containing want. */
static void assert_invalid(lmc_status st, const lmc_error *err, const char *want)
{
    assert_int_equal(st, LMC_ERR_INVALID);
    assert_int_equal(err->code, LMC_ERR_INVALID);
    if (strstr(err->msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", err->msg, want);
}

static void assert_key_zero(const lmc_object_key *key)
{
    lmc_object_key zero;
    memset(&zero, 0, sizeof(zero));
    assert_memory_equal(key, &zero, sizeof(zero));
}

static lmc_object_key make_key(const void *hash, size_t hash_len, const char *model, int64_t rank,
                               int64_t group, const char *salt)
{
    lmc_object_key key;
    lmc_error err;
    assert_int_equal(lmc_object_key_make(&key, hash, hash_len, model, rank, group, salt, &err),
                     LMC_OK);
    return key;
}

/* Fill a buffer with n copies of the UTF-8 character ch; returns it NUL-terminated. */
static char *repeat_utf8(const char *ch, size_t n)
{
    size_t w = strlen(ch);
    char *s = malloc(w * n + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * w, ch, w);
    s[w * n] = '\0';
    return s;
}

/* ---------------------------------------------------------------------- */
/* ObjectKey construction and validation                                   */
/* ---------------------------------------------------------------------- */

static void test_key_make_fills_every_field(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    assert_int_equal(lmc_object_key_make(&key, HASH4, 4, "org/model", 7, 2, "salt", &err), LMC_OK);
    assert_int_equal(key.chunk_hash_len, 4);
    assert_memory_equal(key.chunk_hash, HASH4, 4);
    assert_int_equal(key.kv_rank, 7);
    assert_int_equal(key.object_group_id, 2);
    assert_string_equal(key.model_name, "org/model");
    assert_string_equal(key.cache_salt, "salt");
    assert_ptr_equal(key.model_name, lmc_intern("org/model", 9));
    assert_ptr_equal(key.cache_salt, lmc_intern("salt", 4));
}

static void test_key_null_salt_is_empty_salt(void **state)
{
    (void)state;
    lmc_object_key a = make_key(HASH4, 4, "m", 0, 0, NULL);
    lmc_object_key b = make_key(HASH4, 4, "m", 0, 0, "");
    assert_string_equal(a.cache_salt, "");
    assert_ptr_equal(a.cache_salt, b.cache_salt);
    assert_true(lmc_object_key_equal(&a, &b));
}

static void test_key_hash_bytes_past_len_are_zero(void **state)
{
    (void)state;
    lmc_object_key key;
    memset(&key, 0xFF, sizeof(key));
    assert_int_equal(lmc_object_key_make(&key, HASH4, 4, "m", 0, 0, NULL, NULL), LMC_OK);
    for (size_t i = 4; i < LMC_CHUNK_HASH_MAX; i++)
        assert_int_equal(key.chunk_hash[i], 0);
}

static void test_key_make_cached_gives_the_keys_make_n_gives(void **state)
{
    (void)state;
    static const char *const models[] = {"m-a", "m-a", "m-b", "", "m-a"};
    static const char *const salts[] = {"", "s1", "s1", "s2", ""};
    lmc_object_key_cache cache = {0};
    for (size_t i = 0; i < 5; i++) {
        lmc_object_key a, b;
        memset(&a, 0xAA, sizeof(a));
        memset(&b, 0x55, sizeof(b));
        assert_int_equal(lmc_object_key_make_cached(&cache, &a, HASH4, 4 - i % 2, models[i],
                                                    strlen(models[i]), (int64_t)i, 1, salts[i],
                                                    strlen(salts[i]), NULL),
                         LMC_OK);
        assert_int_equal(lmc_object_key_make_n(&b, HASH4, 4 - i % 2, models[i], strlen(models[i]),
                                               (int64_t)i, 1, salts[i], strlen(salts[i]), NULL),
                         LMC_OK);
        /* Bit for bit: padding and unused hash bytes are zero in both. */
        assert_memory_equal(&a, &b, sizeof(a));
    }
}

static void test_key_make_cached_still_rejects_a_bad_string_after_a_good_one(void **state)
{
    (void)state;
    lmc_object_key_cache cache = {0};
    lmc_object_key key;
    lmc_error err;
    assert_int_equal(
        lmc_object_key_make_cached(&cache, &key, HASH4, 4, "mm", 2, 0, 0, "ab", 2, &err), LMC_OK);
    lmc_status st =
        lmc_object_key_make_cached(&cache, &key, HASH4, 4, "mm", 2, 0, 0, "a@", 2, &err);
    assert_invalid(st, &err, "ObjectKey.cache_salt must not contain '@' (got 'a@')");
    st = lmc_object_key_make_cached(&cache, &key, HASH4, 4, "m@", 2, 0, 0, "ab", 2, &err);
    assert_invalid(st, &err, "ObjectKey.model_name must not contain '@' (got 'm@')");
    /* The failures did not poison the cache. */
    assert_int_equal(
        lmc_object_key_make_cached(&cache, &key, HASH4, 4, "mm", 2, 0, 0, "ab", 2, &err), LMC_OK);
    assert_ptr_equal(key.model_name, lmc_intern("mm", 2));
    assert_ptr_equal(key.cache_salt, lmc_intern("ab", 2));
}

static void test_key_accepts_empty_and_max_length_hash(void **state)
{
    (void)state;
    uint8_t big[LMC_CHUNK_HASH_MAX];
    memset(big, 0xAB, sizeof(big));
    lmc_object_key key = make_key(big, sizeof(big), "m", 0, 0, NULL);
    assert_int_equal(key.chunk_hash_len, LMC_CHUNK_HASH_MAX);
    assert_memory_equal(key.chunk_hash, big, sizeof(big));
    key = make_key(NULL, 0, "m", 0, 0, NULL);
    assert_int_equal(key.chunk_hash_len, 0);
}

static void test_key_rejects_hash_longer_than_64_bytes(void **state)
{
    (void)state;
    uint8_t big[LMC_CHUNK_HASH_MAX + 1] = {0};
    lmc_object_key key;
    lmc_error err;
    memset(&key, 0xFF, sizeof(key));
    lmc_status st = lmc_object_key_make(&key, big, sizeof(big), "m", 0, 0, NULL, &err);
    assert_invalid(st, &err, "ObjectKey.chunk_hash is 65 bytes; at most 64 allowed");
    assert_key_zero(&key);
}

static void test_key_rejects_null_hash_with_length(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&key, NULL, 4, "m", 0, 0, NULL, &err);
    assert_invalid(st, &err, "ObjectKey.chunk_hash must not be NULL");
}

static void test_key_rejects_model_name_with_at(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    memset(&key, 0xFF, sizeof(key));
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, "a@b", 0, 0, NULL, &err);
    assert_invalid(st, &err, "ObjectKey.model_name must not contain '@' (got 'a@b')");
    assert_key_zero(&key);
}

static void test_key_rejects_model_name_with_nul(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make_n(&key, HASH4, 4, "a\0b", 3, 0, 0, NULL, 0, &err);
    assert_invalid(st, &err, "ObjectKey.model_name must not contain NUL");
}

static void test_key_rejects_null_model_name(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, NULL, 0, 0, NULL, &err);
    assert_invalid(st, &err, "ObjectKey.model_name must not be NULL");
    st = lmc_object_key_make_n(&key, HASH4, 4, NULL, 3, 0, 0, NULL, 0, &err);
    assert_invalid(st, &err, "ObjectKey.model_name must not be NULL");
}

static void test_key_model_name_length_limit(void **state)
{
    (void)state;
    char *name = repeat_utf8("x", LMC_MODEL_NAME_MAX + 1);
    lmc_object_key key;
    lmc_error err;
    assert_int_equal(
        lmc_object_key_make_n(&key, HASH4, 4, name, LMC_MODEL_NAME_MAX, 0, 0, NULL, 0, &err),
        LMC_OK);
    assert_int_equal(strlen(key.model_name), LMC_MODEL_NAME_MAX);
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, name, 0, 0, NULL, &err);
    assert_invalid(st, &err, "ObjectKey.model_name is 1025 bytes; at most 1024 allowed");
    free(name);
}

static void test_key_long_bad_model_name_is_quoted_truncated(void **state)
{
    (void)state;
    char *name = repeat_utf8("y", 2000);
    name[1000] = '@';
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make_n(&key, HASH4, 4, name, 1001, 0, 0, NULL, 0, &err);
    assert_invalid(st, &err, "must not contain '@' (got 'yyy");
    assert_non_null(strstr(err.msg, "...')"));
    assert_true(strlen(err.msg) < 200);
    free(name);
}

static void test_key_rejects_negative_group(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, "m", 0, -1, NULL, &err);
    assert_invalid(st, &err, "ObjectKey.object_group_id must be >= 0 (got -1)");
}

static void test_key_rejects_salt_with_at(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, "m", 0, 0, "u@x", &err);
    assert_invalid(st, &err, "ObjectKey.cache_salt must not contain '@'");
}

static void test_key_rejects_salt_with_slash(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, "m", 0, 0, "u/x", &err);
    assert_invalid(st, &err, "ObjectKey.cache_salt must not contain '/'");
}

static void test_key_rejects_salt_with_backslash(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&key, HASH4, 4, "m", 0, 0, "u\\x", &err);
    assert_invalid(st, &err, "ObjectKey.cache_salt must not contain '\\'");
}

static void test_key_rejects_salt_with_nul(void **state)
{
    (void)state;
    lmc_object_key key;
    lmc_error err;
    lmc_status st = lmc_object_key_make_n(&key, HASH4, 4, "m", 1, 0, 0, "u\0x", 3, &err);
    assert_invalid(st, &err, "ObjectKey.cache_salt must not contain NUL");
}

static void test_key_salt_of_128_multibyte_chars_is_accepted(void **state)
{
    (void)state;
    static const char *chars[] = {"a", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80"};
    for (size_t i = 0; i < sizeof(chars) / sizeof(chars[0]); i++) {
        char *salt = repeat_utf8(chars[i], LMC_CACHE_SALT_MAX);
        lmc_object_key key = make_key(HASH4, 4, "m", 0, 0, salt);
        assert_string_equal(key.cache_salt, salt);
        free(salt);
    }
}

static void test_key_salt_of_129_chars_is_rejected(void **state)
{
    (void)state;
    static const char *chars[] = {"a", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80"};
    for (size_t i = 0; i < sizeof(chars) / sizeof(chars[0]); i++) {
        char *salt = repeat_utf8(chars[i], LMC_CACHE_SALT_MAX + 1);
        lmc_object_key key;
        lmc_error err;
        lmc_status st = lmc_object_key_make(&key, HASH4, 4, "m", 0, 0, salt, &err);
        assert_invalid(st, &err, "ObjectKey.cache_salt is 129 characters; at most 128 allowed");
        free(salt);
    }
}

static void test_key_errors_without_error_record(void **state)
{
    (void)state;
    lmc_object_key key;
    assert_int_equal(lmc_object_key_make(&key, HASH4, 4, "a@b", 0, 0, NULL, NULL), LMC_ERR_INVALID);
    assert_int_equal(lmc_object_key_make(&key, HASH4, 4, "m", 0, -5, NULL, NULL), LMC_ERR_INVALID);
}

/* ---------------------------------------------------------------------- */
/* Equality and hashing                                                    */
/* ---------------------------------------------------------------------- */

static void test_key_equal_for_separately_built_keys(void **state)
{
    (void)state;
    char model[] = "org/model";
    char salt[] = "tenant";
    uint8_t hash[4];
    memcpy(hash, HASH4, 4);
    lmc_object_key a = make_key(HASH4, 4, "org/model", 3, 1, "tenant");
    lmc_object_key b = make_key(hash, 4, model, 3, 1, salt);
    assert_true(lmc_object_key_equal(&a, &b));
    assert_true(lmc_object_key_equal(&b, &a));
    assert_int_equal(lmc_object_key_hash(&a), lmc_object_key_hash(&b));
}

static void test_key_copy_is_equal(void **state)
{
    (void)state;
    lmc_object_key a = make_key(HASH4, 4, "m", 3, 1, "s");
    lmc_object_key b = a;
    assert_true(lmc_object_key_equal(&a, &b));
    assert_int_equal(lmc_object_key_hash(&a), lmc_object_key_hash(&b));
}

static void test_key_unequal_when_any_field_differs(void **state)
{
    (void)state;
    const uint8_t other_hash[4] = {0xde, 0xad, 0xbe, 0xee};
    lmc_object_key base = make_key(HASH4, 4, "m", 3, 1, "s");
    lmc_object_key variants[] = {
        make_key(other_hash, 4, "m", 3, 1, "s"), /* chunk_hash bytes */
        make_key(HASH4, 3, "m", 3, 1, "s"),      /* chunk_hash length (a prefix) */
        make_key(HASH4, 4, "n", 3, 1, "s"),      /* model_name */
        make_key(HASH4, 4, "m", 4, 1, "s"),      /* kv_rank */
        make_key(HASH4, 4, "m", 3, 2, "s"),      /* object_group_id */
        make_key(HASH4, 4, "m", 3, 1, "t"),      /* cache_salt */
        make_key(HASH4, 4, "m", 3, 1, NULL),     /* no cache_salt */
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        assert_false(lmc_object_key_equal(&base, &variants[i]));
        assert_false(lmc_object_key_equal(&variants[i], &base));
        assert_int_not_equal(lmc_object_key_hash(&base), lmc_object_key_hash(&variants[i]));
    }
}

static void test_key_hash_ignores_garbage_past_len(void **state)
{
    (void)state;
    /* A key copied field by field may carry junk past the hash; equality ignores it. */
    lmc_object_key a = make_key(HASH4, 4, "m", 3, 1, "s");
    lmc_object_key b = a;
    b.chunk_hash[10] = 0x55;
    assert_true(lmc_object_key_equal(&a, &b));
    assert_int_equal(lmc_object_key_hash(&a), lmc_object_key_hash(&b));
}

/* ---------------------------------------------------------------------- */
/* kv_rank and formatting                                                  */
/* ---------------------------------------------------------------------- */

static void test_kv_rank_packs_four_bytes(void **state)
{
    (void)state;
    assert_int_equal(lmc_compute_kv_rank(1, 0, 1, 0), 0x01000100);
    assert_int_equal(lmc_compute_kv_rank(8, 3, 4, 3), 0x08030403);
    assert_int_equal(lmc_compute_kv_rank(255, 255, 255, 255), 0xFFFFFFFF);
    assert_int_equal(lmc_compute_kv_rank(0, 0, 0, 0), 0);
}

static void test_kv_rank_masks_to_eight_bits(void **state)
{
    (void)state;
    assert_int_equal(lmc_compute_kv_rank(0x101, 0x102, 0x103, 0x104), 0x01020304);
}

static void test_format_without_salt(void **state)
{
    (void)state;
    lmc_object_key key = make_key(HASH4, 4, "org/model", lmc_compute_kv_rank(1, 0, 1, 0), 26, NULL);
    char buf[128];
    size_t n = lmc_object_key_format(&key, buf, sizeof(buf));
    assert_string_equal(buf, "org/model@0x01000100@1a@deadbeef");
    assert_int_equal(n, strlen(buf));
}

static void test_format_with_salt(void **state)
{
    (void)state;
    const uint8_t hash[2] = {0x00, 0x0f};
    lmc_object_key key = make_key(hash, 2, "m", 5, 0, "user1");
    char buf[128];
    lmc_object_key_format(&key, buf, sizeof(buf));
    assert_string_equal(buf, "m@0x00000005@0@000f@user1");
}

static void test_format_rank_wider_or_negative(void **state)
{
    (void)state;
    char buf[128];
    lmc_object_key key = make_key(HASH4, 1, "m", INT64_C(0x100000000), 0, NULL);
    lmc_object_key_format(&key, buf, sizeof(buf));
    assert_string_equal(buf, "m@0x100000000@0@de");
    key = make_key(HASH4, 1, "m", -1, 0, NULL);
    lmc_object_key_format(&key, buf, sizeof(buf));
    assert_string_equal(buf, "m@0x-0000001@0@de");
}

static void test_format_truncates_like_snprintf(void **state)
{
    (void)state;
    lmc_object_key key = make_key(HASH4, 4, "org/model", 0x01000100, 26, "salt");
    const char *full = "org/model@0x01000100@1a@deadbeef@salt";
    char buf[10];
    memset(buf, 'Z', sizeof(buf));
    assert_int_equal(lmc_object_key_format(&key, buf, sizeof(buf)), strlen(full));
    assert_string_equal(buf, "org/model");
    assert_int_equal(lmc_object_key_format(&key, NULL, 0), strlen(full));
    char one[1] = {'Z'};
    assert_int_equal(lmc_object_key_format(&key, one, 1), strlen(full));
    assert_int_equal(one[0], '\0');
    char exact[64];
    assert_int_equal(lmc_object_key_format(&key, exact, strlen(full) + 1), strlen(full));
    assert_string_equal(exact, full);
}

/* ---------------------------------------------------------------------- */
/* TrimPolicy and L1Error                                                  */
/* ---------------------------------------------------------------------- */

static void test_trim_policy_names_round_trip(void **state)
{
    (void)state;
    const lmc_trim_policy all[] = {LMC_TRIM_PREFIX, LMC_TRIM_SEGMENTED_PREFIX, LMC_TRIM_SPARSE};
    const char *names[] = {"PREFIX", "SEGMENTED_PREFIX", "SPARSE"};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(lmc_trim_policy_name(all[i]), names[i]);
        lmc_trim_policy p = 0;
        assert_int_equal(lmc_trim_policy_from_name(names[i], strlen(names[i]), &p, NULL), LMC_OK);
        assert_int_equal(p, all[i]);
    }
    assert_int_equal(LMC_TRIM_PREFIX, 1);
    assert_int_equal(LMC_TRIM_SPARSE, 3);
    assert_null(lmc_trim_policy_name((lmc_trim_policy)0));
    assert_null(lmc_trim_policy_name((lmc_trim_policy)4));
}

static void test_trim_policy_from_name_uses_len(void **state)
{
    (void)state;
    lmc_trim_policy p = 0;
    assert_int_equal(lmc_trim_policy_from_name("SPARSEXYZ", 6, &p, NULL), LMC_OK);
    assert_int_equal(p, LMC_TRIM_SPARSE);
}

static void test_trim_policy_unknown_name(void **state)
{
    (void)state;
    lmc_trim_policy p = 0;
    lmc_error err;
    assert_invalid(lmc_trim_policy_from_name("prefix", 6, &p, &err), &err,
                   "unknown TrimPolicy 'prefix'");
    assert_invalid(lmc_trim_policy_from_name("SPARSE", 5, &p, &err), &err,
                   "unknown TrimPolicy 'SPARS'");
    assert_invalid(lmc_trim_policy_from_name("", 0, &p, &err), &err, "unknown TrimPolicy ''");
}

static void test_l1_error_names_and_messages(void **state)
{
    (void)state;
    static const struct {
        lmc_l1_error e;
        int value;
        const char *name;
        const char *msg;
    } cases[] = {
        {LMC_L1_SUCCESS, 0, "SUCCESS", "Success."},
        {LMC_L1_KEY_NOT_EXIST, 1, "KEY_NOT_EXIST", "The key does not exist."},
        {LMC_L1_KEY_NOT_READABLE, 2, "KEY_NOT_READABLE",
         "The key is not readable (write in progress)."},
        {LMC_L1_KEY_NOT_WRITABLE, 3, "KEY_NOT_WRITABLE",
         "The key is not writable (exists, locked or temporary)."},
        {LMC_L1_KEY_IN_WRONG_STATE, 4, "KEY_IN_WRONG_STATE",
         "The key is in the wrong state for this operation."},
        {LMC_L1_KEY_IS_LOCKED, 5, "KEY_IS_LOCKED", "The key is locked."},
        {LMC_L1_OUT_OF_MEMORY, 6, "OUT_OF_MEMORY", "Out of memory."},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(cases[i].e, cases[i].value);
        assert_string_equal(lmc_l1_error_name(cases[i].e), cases[i].name);
        assert_string_equal(lmc_l1_strerror(cases[i].e), cases[i].msg);
    }
}

static void test_l1_error_unknown_value(void **state)
{
    (void)state;
    assert_string_equal(lmc_l1_error_name((lmc_l1_error)7), "UNKNOWN");
    assert_string_equal(lmc_l1_strerror((lmc_l1_error)7), "Unknown error.");
    assert_string_equal(lmc_l1_strerror((lmc_l1_error)-1), "Unknown error.");
}

/* ---------------------------------------------------------------------- */
/* PrefetchHandle                                                          */
/* ---------------------------------------------------------------------- */

static void test_prefetch_handle_copies_arrays_and_id(void **state)
{
    (void)state;
    uint32_t l1[] = {0, 1, 5};
    uint32_t l2[] = {2, 3};
    char id[] = "req-1";
    lmc_prefetch_handle h;
    assert_int_equal(lmc_prefetch_handle_make(&h, 42, id, l1, 3, 8, 12.5, l2, 2), LMC_OK);
    /* Mutating the sources must not change the handle. */
    l1[0] = 99;
    l2[1] = 99;
    id[0] = 'X';
    assert_int_equal(h.prefetch_request_id, 42);
    assert_string_equal(h.external_request_id, "req-1");
    assert_int_equal(h.l1_found_count, 3);
    assert_int_equal(h.l1_found_indices[0], 0);
    assert_int_equal(h.l1_found_indices[2], 5);
    assert_int_equal(h.total_requested_keys, 8);
    assert_true(h.submit_time == 12.5);
    assert_int_equal(h.l2_orig_count, 2);
    assert_int_equal(h.l2_orig_indices[0], 2);
    assert_int_equal(h.l2_orig_indices[1], 3);
    lmc_prefetch_handle_clear(&h);
    assert_null(h.external_request_id);
    assert_null(h.l1_found_indices);
    assert_null(h.l2_orig_indices);
    assert_int_equal(h.l1_found_count, 0);
    assert_int_equal(h.prefetch_request_id, 0);
}

static void test_prefetch_handle_empty_arrays_are_null(void **state)
{
    (void)state;
    lmc_prefetch_handle h;
    assert_int_equal(lmc_prefetch_handle_make(&h, -1, NULL, NULL, 0, 0, 0.0, NULL, 0), LMC_OK);
    assert_int_equal(h.prefetch_request_id, -1);
    assert_non_null(h.external_request_id);
    assert_string_equal(h.external_request_id, "");
    assert_null(h.l1_found_indices);
    assert_null(h.l2_orig_indices);
    lmc_prefetch_handle_clear(&h);
    lmc_prefetch_handle_clear(&h); /* a second clear is harmless */
}

static void test_prefetch_handle_clear_on_zeroed_handle(void **state)
{
    (void)state;
    lmc_prefetch_handle h, zero;
    memset(&h, 0, sizeof(h));
    memset(&zero, 0, sizeof(zero));
    lmc_prefetch_handle_clear(&h);
    assert_memory_equal(&h, &zero, sizeof(h)); /* still empty, nothing freed twice */
    lmc_prefetch_handle_clear(&h);
    assert_memory_equal(&h, &zero, sizeof(h));
    lmc_prefetch_handle_clear(NULL);
}

static void test_prefetch_handle_nomem_leaves_it_empty(void **state)
{
    (void)state;
    uint32_t l1[] = {1, 2};
    uint32_t l2[] = {3};
    lmc_prefetch_handle h;
    memset(&h, 0xFF, sizeof(h));
    /* The l2 count overflows a byte size, after the id and l1 array were allocated. */
    assert_int_equal(lmc_prefetch_handle_make(&h, 1, "x", l1, 2, 3, 0.0, l2, SIZE_MAX / 2 + 1),
                     LMC_ERR_NOMEM);
    lmc_prefetch_handle zero;
    memset(&zero, 0, sizeof(zero));
    assert_memory_equal(&h, &zero, sizeof(h));
    lmc_prefetch_handle_clear(&h);
}

static void test_prefetch_handle_rejects_null_array_with_count(void **state)
{
    (void)state;
    lmc_prefetch_handle h;
    assert_int_equal(lmc_prefetch_handle_make(&h, 1, "x", NULL, 2, 3, 0.0, NULL, 0),
                     LMC_ERR_INVALID);
    assert_null(h.external_request_id);
    assert_int_equal(lmc_prefetch_handle_make(&h, 1, "x", NULL, 0, 3, 0.0, NULL, 1),
                     LMC_ERR_INVALID);
    assert_null(h.external_request_id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_make_fills_every_field),
        cmocka_unit_test(test_key_null_salt_is_empty_salt),
        cmocka_unit_test(test_key_hash_bytes_past_len_are_zero),
        cmocka_unit_test(test_key_make_cached_gives_the_keys_make_n_gives),
        cmocka_unit_test(test_key_make_cached_still_rejects_a_bad_string_after_a_good_one),
        cmocka_unit_test(test_key_accepts_empty_and_max_length_hash),
        cmocka_unit_test(test_key_rejects_hash_longer_than_64_bytes),
        cmocka_unit_test(test_key_rejects_null_hash_with_length),
        cmocka_unit_test(test_key_rejects_model_name_with_at),
        cmocka_unit_test(test_key_rejects_model_name_with_nul),
        cmocka_unit_test(test_key_rejects_null_model_name),
        cmocka_unit_test(test_key_model_name_length_limit),
        cmocka_unit_test(test_key_long_bad_model_name_is_quoted_truncated),
        cmocka_unit_test(test_key_rejects_negative_group),
        cmocka_unit_test(test_key_rejects_salt_with_at),
        cmocka_unit_test(test_key_rejects_salt_with_slash),
        cmocka_unit_test(test_key_rejects_salt_with_backslash),
        cmocka_unit_test(test_key_rejects_salt_with_nul),
        cmocka_unit_test(test_key_salt_of_128_multibyte_chars_is_accepted),
        cmocka_unit_test(test_key_salt_of_129_chars_is_rejected),
        cmocka_unit_test(test_key_errors_without_error_record),
        cmocka_unit_test(test_key_equal_for_separately_built_keys),
        cmocka_unit_test(test_key_copy_is_equal),
        cmocka_unit_test(test_key_unequal_when_any_field_differs),
        cmocka_unit_test(test_key_hash_ignores_garbage_past_len),
        cmocka_unit_test(test_kv_rank_packs_four_bytes),
        cmocka_unit_test(test_kv_rank_masks_to_eight_bits),
        cmocka_unit_test(test_format_without_salt),
        cmocka_unit_test(test_format_with_salt),
        cmocka_unit_test(test_format_rank_wider_or_negative),
        cmocka_unit_test(test_format_truncates_like_snprintf),
        cmocka_unit_test(test_trim_policy_names_round_trip),
        cmocka_unit_test(test_trim_policy_from_name_uses_len),
        cmocka_unit_test(test_trim_policy_unknown_name),
        cmocka_unit_test(test_l1_error_names_and_messages),
        cmocka_unit_test(test_l1_error_unknown_value),
        cmocka_unit_test(test_prefetch_handle_copies_arrays_and_id),
        cmocka_unit_test(test_prefetch_handle_empty_arrays_are_null),
        cmocka_unit_test(test_prefetch_handle_clear_on_zeroed_handle),
        cmocka_unit_test(test_prefetch_handle_nomem_leaves_it_empty),
        cmocka_unit_test(test_prefetch_handle_rejects_null_array_with_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
