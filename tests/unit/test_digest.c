/*
 * test_digest.c -- SHA-256 and hex encoding against published vectors
 * (FIPS 180-2 examples) and the trace header's config-digest example.
 */
/* cmocka.h needs these first, in this order. */
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

static void test_sha256_hex_of_empty_input(void **state)
{
    (void)state;
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_sha256_hex_of_null_pointer_with_zero_length_is_empty_digest(void **state)
{
    (void)state;
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex(NULL, 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_sha256_hex_of_abc(void **state)
{
    (void)state;
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_sha256_hex_of_two_block_message(void **state)
{
    (void)state;
    const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex(msg, strlen(msg), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_sha256_hex_of_million_a(void **state)
{
    (void)state;
    size_t n = 1000000;
    char *msg = malloc(n);
    assert_non_null(msg);
    memset(msg, 'a', n);
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex(msg, n, hex);
    free(msg);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_sha256_hashes_embedded_nul_bytes(void **state)
{
    (void)state;
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex("a\0b", 3, hex);
    assert_string_equal(hex, "59b271ae1bbcb1d31d41929817f4b16fb439eb4f31520b5ad1d5ce98920a7138");
}

/* The trace spec's example: sorted json.dumps of the config, then SHA-256. */
static void test_sha256_hex_of_trace_spec_config_example(void **state)
{
    (void)state;
    const char *cfg = "{\"a\": {\"x\": true, \"y\": 0.8, \"z\": null}, \"b\": [1, 2]}";
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex(cfg, strlen(cfg), hex);
    assert_string_equal(hex, "6a30740c790aa15ca3d7e6c8e600db680a50eacf6c74007374bc9dacb87a8474");
}

static void test_sha256_raw_matches_hex(void **state)
{
    (void)state;
    static const uint8_t expected[LMC_SHA256_LEN] = {
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
        0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
        0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    uint8_t raw[LMC_SHA256_LEN];
    lmc_sha256("abc", 3, raw);
    assert_memory_equal(raw, expected, LMC_SHA256_LEN);
}

static void test_sha256_stream_in_pieces_equals_the_one_shot_digest(void **state)
{
    (void)state;
    const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    lmc_sha256_stream *s = lmc_sha256_stream_create();
    assert_non_null(s);
    for (const char *p = msg; *p; p += 7) /* pieces that straddle nothing in particular */
        lmc_sha256_stream_update(s, p, strnlen(p, 7));
    lmc_sha256_stream_update(s, NULL, 0);
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_stream_final_hex(s, hex);
    lmc_sha256_stream_destroy(s);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_sha256_stream_of_nothing_is_the_empty_digest(void **state)
{
    (void)state;
    lmc_sha256_stream *s = lmc_sha256_stream_create();
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_stream_final_hex(s, hex);
    lmc_sha256_stream_destroy(s);
    lmc_sha256_stream_destroy(NULL);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_hex_encode_uses_lowercase_two_digits_per_byte(void **state)
{
    (void)state;
    static const uint8_t bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[2 * sizeof(bytes) + 1];
    memset(out, 'X', sizeof(out));
    lmc_hex_encode(bytes, sizeof(bytes), out);
    assert_string_equal(out, "00017f80abff");
}

static void test_hex_encode_of_nothing_is_empty_string(void **state)
{
    (void)state;
    char out[1] = {'X'};
    lmc_hex_encode(NULL, 0, out);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_hex_of_empty_input),
        cmocka_unit_test(test_sha256_hex_of_null_pointer_with_zero_length_is_empty_digest),
        cmocka_unit_test(test_sha256_hex_of_abc),
        cmocka_unit_test(test_sha256_hex_of_two_block_message),
        cmocka_unit_test(test_sha256_hex_of_million_a),
        cmocka_unit_test(test_sha256_hashes_embedded_nul_bytes),
        cmocka_unit_test(test_sha256_hex_of_trace_spec_config_example),
        cmocka_unit_test(test_sha256_raw_matches_hex),
        cmocka_unit_test(test_sha256_stream_in_pieces_equals_the_one_shot_digest),
        cmocka_unit_test(test_sha256_stream_of_nothing_is_the_empty_digest),
        cmocka_unit_test(test_hex_encode_uses_lowercase_two_digits_per_byte),
        cmocka_unit_test(test_hex_encode_of_nothing_is_empty_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
