/*
 * test_token_hash.c -- prefix-chained chunk hashes: known answers computed
 * with python3 hashlib, the chaining property, tail and cap handling.
 *
 * Expected values (python3 on the build machine):
 *   nh = sha256(b"lmcache:none_hash").digest()
 *   h0 = sha256(nh + struct.pack(">256I", *range(0, 256))).digest()
 *   h1 = sha256(h0 + struct.pack(">256I", *range(256, 512))).digest()
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

#include "core/digest.h"
#include "server/token_hash.h"

#define NONE_HEX "0641917102997d7e5de38fe215907e6f1d3ea45244c181222c4082557fd3ea25"
#define H0_HEX "5dabd2483e0b1e531da3e195af9880fad1561e8d643503376e06ca8cbd479062"
#define H1_HEX "099695231f8a20228c76b87b56995fbebc970303ccb8533f4f0eadb69c85fce0"

static void hex(const uint8_t h[LMC_TOKEN_HASH_LEN], char out[65])
{
    lmc_hex_encode(h, LMC_TOKEN_HASH_LEN, out);
}

static uint32_t *iota(size_t n)
{
    uint32_t *t = malloc(n * sizeof(*t));
    assert_non_null(t);
    for (size_t i = 0; i < n; i++)
        t[i] = (uint32_t)i;
    return t;
}

static void test_none_hash_is_sha256_of_lmcache_none_hash(void **state)
{
    (void)state;
    uint8_t want[LMC_SHA256_LEN];
    lmc_sha256("lmcache:none_hash", strlen("lmcache:none_hash"), want);
    assert_memory_equal(LMC_TOKEN_NONE_HASH, want, LMC_TOKEN_HASH_LEN);
    char h[65];
    hex(LMC_TOKEN_NONE_HASH, h);
    assert_string_equal(h, NONE_HEX);
}

static void test_known_answer_tokens_0_to_511_chunk_256(void **state)
{
    (void)state;
    uint32_t *t = iota(512);
    uint8_t out[4][LMC_TOKEN_HASH_LEN];
    assert_int_equal(lmc_token_chunk_hashes(t, 512, 256, out, 4), 2);
    char h[65];
    hex(out[0], h);
    assert_string_equal(h, H0_HEX);
    hex(out[1], h);
    assert_string_equal(h, H1_HEX);
    free(t);
}

static void test_large_chunk_spanning_several_batches_matches_one_shot_sha256(void **state)
{
    (void)state;
    /* 3000 tokens: more than the 1024-token conversion buffer. */
    size_t cs = 3000;
    uint32_t *t = iota(cs);
    uint8_t *buf = malloc(32 + 4 * cs);
    assert_non_null(buf);
    memcpy(buf, LMC_TOKEN_NONE_HASH, 32);
    for (size_t i = 0; i < cs; i++) {
        buf[32 + 4 * i] = (uint8_t)(t[i] >> 24);
        buf[32 + 4 * i + 1] = (uint8_t)(t[i] >> 16);
        buf[32 + 4 * i + 2] = (uint8_t)(t[i] >> 8);
        buf[32 + 4 * i + 3] = (uint8_t)t[i];
    }
    uint8_t want[32], got[1][32];
    lmc_sha256(buf, 32 + 4 * cs, want);
    assert_int_equal(lmc_token_chunk_hashes(t, cs, cs, got, 1), 1);
    assert_memory_equal(got[0], want, 32);
    free(buf);
    free(t);
}

static void test_changing_chunk_0_changes_every_later_hash(void **state)
{
    (void)state;
    size_t cs = 16, n = 8;
    uint32_t *t = iota(cs * n);
    uint8_t a[8][32], b[8][32];
    assert_int_equal(lmc_token_chunk_hashes(t, cs * n, cs, a, n), n);
    t[5] ^= 1;
    assert_int_equal(lmc_token_chunk_hashes(t, cs * n, cs, b, n), n);
    for (size_t i = 0; i < n; i++)
        assert_memory_not_equal(a[i], b[i], 32);
    free(t);
}

static void test_changing_chunk_1_leaves_hash_0(void **state)
{
    (void)state;
    size_t cs = 16, n = 4;
    uint32_t *t = iota(cs * n);
    uint8_t a[4][32], b[4][32];
    lmc_token_chunk_hashes(t, cs * n, cs, a, n);
    t[cs + 3] = 0xffffffffu;
    lmc_token_chunk_hashes(t, cs * n, cs, b, n);
    assert_memory_equal(a[0], b[0], 32);
    for (size_t i = 1; i < n; i++)
        assert_memory_not_equal(a[i], b[i], 32);
    free(t);
}

static void test_partial_tail_is_ignored(void **state)
{
    (void)state;
    uint32_t *t = iota(700);
    uint8_t a[4][32], b[4][32];
    assert_int_equal(lmc_token_chunk_hashes(t, 512, 256, a, 4), 2);
    assert_int_equal(lmc_token_chunk_hashes(t, 700, 256, b, 4), 2);
    assert_memory_equal(a, b, 2 * 32);
    t[600] = 7; /* inside the tail: no effect */
    assert_int_equal(lmc_token_chunk_hashes(t, 700, 256, b, 4), 2);
    assert_memory_equal(a, b, 2 * 32);
    assert_int_equal(lmc_token_chunk_hashes(t, 255, 256, b, 4), 0);
    free(t);
}

static void test_max_out_caps_the_number_of_hashes(void **state)
{
    (void)state;
    uint32_t *t = iota(1024);
    uint8_t all[4][32], some[4][32];
    memset(some, 0xab, sizeof(some));
    assert_int_equal(lmc_token_chunk_hashes(t, 1024, 256, all, 4), 4);
    assert_int_equal(lmc_token_chunk_hashes(t, 1024, 256, some, 2), 2);
    assert_memory_equal(all, some, 2 * 32);
    for (size_t i = 2 * 32; i < sizeof(some); i++)
        assert_int_equal(((uint8_t *)some)[i], 0xab); /* never written past max_out */
    assert_int_equal(lmc_token_chunk_hashes(t, 1024, 256, NULL, 0), 0);
    free(t);
}

static void test_zero_chunk_size_gives_no_hashes(void **state)
{
    (void)state;
    uint32_t t[4] = {1, 2, 3, 4};
    uint8_t out[1][32];
    assert_int_equal(lmc_token_chunk_hashes(t, 4, 0, out, 1), 0);
}

static void test_continuing_a_chain_matches_hashing_from_the_start(void **state)
{
    (void)state;
    uint32_t *t = iota(1024);
    uint8_t all[4][32], tail[2][32];
    lmc_token_chunk_hashes(t, 1024, 256, all, 4);
    assert_int_equal(lmc_token_chunk_hashes_from(all[1], t + 512, 512, 256, tail, 2), 2);
    assert_memory_equal(all[2], tail, 2 * 32);
    assert_int_equal(lmc_token_chunk_hashes_from(NULL, t, 256, 256, tail, 1), 1);
    assert_memory_equal(all[0], tail[0], 32);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_hash_is_sha256_of_lmcache_none_hash),
        cmocka_unit_test(test_known_answer_tokens_0_to_511_chunk_256),
        cmocka_unit_test(test_large_chunk_spanning_several_batches_matches_one_shot_sha256),
        cmocka_unit_test(test_changing_chunk_0_changes_every_later_hash),
        cmocka_unit_test(test_changing_chunk_1_leaves_hash_0),
        cmocka_unit_test(test_partial_tail_is_ignored),
        cmocka_unit_test(test_max_out_caps_the_number_of_hashes),
        cmocka_unit_test(test_zero_chunk_size_gives_no_hashes),
        cmocka_unit_test(test_continuing_a_chain_matches_hashing_from_the_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
