/*
 * test_trace_validate.c -- lmc_trace_scan_record: a frame is a record
 * exactly when msgspec would decode it as LMCache's Record (tag anywhere or
 * absent, each occurrence checked; repeated fields validated each time, the
 * last kept; unknown keys skipped undecoded; strs UTF-8; args a map of str
 * keys to Any; map keys hashable; timestamps valid; nothing trailing).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/trace_test_util.h"
#include "trace/validate.h"

/*
 * The body as hex; the record's fixed parts are spelled out per test. The
 * body lives until the next call (the scan points into it).
 */
static lmc_status scan_hex(const char *hex, lmc_trace_record_scan *sc, lmc_error *err)
{
    static uint8_t *body;
    free(body);
    size_t n;
    body = tt_unhex(hex, &n);
    lmc_trace_record_scan local;
    return lmc_trace_scan_record(body, n, sc != NULL ? sc : &local, err);
}

/* {"type":"record","t_mono":1,"t_wall":2,"qualname":"q","args":{"x": <value hex>}} */
static lmc_status scan_arg(const char *value_hex, lmc_error *err)
{
    char hex[4096];
    snprintf(hex, sizeof(hex),
             "85 a474797065 a67265636f7264 a6745f6d6f6e6f 01 a6745f77616c6c 02"
             " a87175616c6e616d65 a171 a461726773 81 a178 %s",
             value_hex);
    return scan_hex(hex, NULL, err);
}

#define T_MONO "a6745f6d6f6e6f"
#define T_WALL "a6745f77616c6c"
#define QUAL "a87175616c6e616d65"
#define ARGS "a461726773"
#define TYPE "a474797065"
#define RECORD "a67265636f7264"

static void test_a_plain_record_scans_with_its_fields(void **state)
{
    (void)state;
    lmc_trace_record_scan sc;
    assert_int_equal(scan_hex("85 " TYPE " " RECORD " " T_MONO " cb3fe0000000000000 " T_WALL
                              " 02 " QUAL " a3612e62 " ARGS " 81 a178 01",
                              &sc, NULL),
                     LMC_OK);
    assert_true(sc.t_mono == 0.5);
    assert_true(sc.t_wall == 2.0);
    assert_int_equal(sc.qualname_len, 3);
    assert_memory_equal(sc.qualname, "a.b", 3);
    assert_int_equal(sc.nargs, 1);
    assert_int_equal(sc.args_len, 4);
    assert_int_equal(sc.args[0], 0x81);
}

static void test_the_type_tag_may_be_anywhere_or_absent_but_each_one_must_match(void **state)
{
    (void)state;
    lmc_error err;
    /* absent */
    assert_int_equal(
        scan_hex("84 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 80", NULL, &err), LMC_OK);
    /* last, and twice */
    assert_int_equal(scan_hex("86 " T_MONO " 01 " TYPE " " RECORD " " T_WALL " 02 " QUAL
                              " a171 " ARGS " 80 " TYPE " " RECORD,
                              NULL, &err),
                     LMC_OK);
    /* one of two is wrong */
    assert_int_equal(scan_hex("86 " TYPE " " RECORD " " T_MONO " 01 " T_WALL " 02 " QUAL
                              " a171 " ARGS " 80 " TYPE " a6686561646572",
                              NULL, &err),
                     LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record: invalid type tag 'header' (expected 'record')");
    /* not a str */
    assert_int_equal(scan_hex("85 " TYPE " 01 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS
                              " 80",
                              NULL, &err),
                     LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record.type: expected str, got int");
}

static void test_a_repeated_field_keeps_the_last_value_but_each_must_be_valid(void **state)
{
    (void)state;
    lmc_trace_record_scan sc;
    lmc_error err;
    assert_int_equal(scan_hex("85 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 80 " T_MONO
                              " 07",
                              &sc, &err),
                     LMC_OK);
    assert_true(sc.t_mono == 7.0);
    /* args twice: the last one counts, the first must still be a map */
    assert_int_equal(scan_hex("85 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 80 " ARGS
                              " 81 a161 01",
                              &sc, &err),
                     LMC_OK);
    assert_int_equal(sc.nargs, 1);
    assert_int_equal(scan_hex("85 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 90 " ARGS
                              " 80",
                              NULL, &err),
                     LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record.args: expected map, got array");
}

static void test_unknown_keys_are_skipped_without_being_decoded(void **state)
{
    (void)state;
    lmc_error err;
    /* "zz": a str that is not UTF-8, and a map with a map as key: msgspec never decodes them */
    assert_int_equal(scan_hex("85 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 80"
                              " a27a7a 92 a2fffe 81 81 01 02 03",
                              NULL, &err),
                     LMC_OK);
}

static void test_missing_fields_are_named_in_declaration_order(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(scan_hex("81 " ARGS " 80", NULL, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record: missing required field 't_mono'");
    assert_int_equal(scan_hex("83 " T_MONO " 01 " T_WALL " 01 " QUAL " a0", NULL, &err),
                     LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record: missing required field 'args'");
}

static void test_trailing_bytes_and_non_map_roots_are_malformed(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(
        scan_hex("84 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 80 c0", NULL, &err),
        LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record: 1 trailing bytes after the msgpack value");
    assert_int_equal(scan_hex("93 01 02 03", NULL, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record: expected a msgpack map, got array");
    assert_int_equal(scan_hex("", NULL, &err), LMC_ERR_FORMAT);
}

static void test_times_take_any_int_or_float_but_not_a_bool(void **state)
{
    (void)state;
    lmc_trace_record_scan sc;
    lmc_error err;
    /* uint64 max, float32 */
    assert_int_equal(scan_hex("84 " T_MONO " cfffffffffffffffff " T_WALL " ca3f800000 " QUAL
                              " a171 " ARGS " 80",
                              &sc, &err),
                     LMC_OK);
    assert_true(sc.t_mono == 18446744073709551615.0);
    assert_true(sc.t_wall == 1.0);
    assert_int_equal(
        scan_hex("84 " T_MONO " c3 " T_WALL " 02 " QUAL " a171 " ARGS " 80", NULL, &err),
        LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Record.t_mono: expected float, got bool");
}

static void test_strs_must_be_utf8_everywhere_msgspec_decodes_them(void **state)
{
    (void)state;
    lmc_error err;
    /* qualname: a lone continuation byte, an overlong slash, a surrogate */
    static const char *const bad[] = {"a180", "a2c0af", "a3eda080", "a4f4908080", "a2e282"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char hex[256];
        snprintf(hex, sizeof(hex), "84 " T_MONO " 01 " T_WALL " 02 " QUAL " %s " ARGS " 80",
                 bad[i]);
        assert_int_equal(scan_hex(hex, NULL, &err), LMC_ERR_FORMAT);
        assert_string_equal(err.msg, "Record.qualname: the str is not valid UTF-8");
    }
    /* a qualname holding NUL and non-ASCII is fine */
    assert_int_equal(
        scan_hex("84 " T_MONO " 01 " T_WALL " 02 " QUAL " a4 61 00 c3a9 " ARGS " 80", NULL, &err),
        LMC_OK);
    /* an args value deep inside a list, and an args key */
    assert_int_equal(scan_arg("92 01 91 a2c328", &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "a str is not valid UTF-8"));
    assert_int_equal(
        scan_hex("84 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 81 a1ff 01", NULL, &err),
        LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "an args key is not valid UTF-8"));
    /* bytes are not checked */
    assert_int_equal(scan_arg("c402fffe", &err), LMC_OK);
}

static void test_args_keys_must_be_strs(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(
        scan_hex("84 " T_MONO " 01 " T_WALL " 02 " QUAL " a171 " ARGS " 81 01 01", NULL, &err),
        LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "Record.args: keys must be str, got int"));
}

static void test_dict_keys_inside_args_must_be_hashable(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(scan_arg("81 01 02", &err), LMC_OK);           /* an int key */
    assert_int_equal(scan_arg("81 920102 02", &err), LMC_OK);       /* a tuple key */
    assert_int_equal(scan_arg("81 c0 02", &err), LMC_OK);           /* None */
    assert_int_equal(scan_arg("81 d6ff00000001 02", &err), LMC_OK); /* a datetime */
    assert_int_equal(scan_arg("81 80 02", &err), LMC_ERR_FORMAT);   /* {} as a key */
    assert_non_null(strstr(err.msg, "a map cannot be a dict key (unhashable)"));
    assert_int_equal(scan_arg("81 9201 81 01 02 03", &err), LMC_ERR_FORMAT); /* (1, {1: 2}) */
    assert_int_equal(scan_arg("81 d40501 02", &err), LMC_ERR_FORMAT);        /* an Ext */
    assert_non_null(strstr(err.msg, "an ext cannot be a dict key"));
    /* a map as a value, and inside a list, is fine */
    assert_int_equal(scan_arg("92 81 01 02 81 a161 80", &err), LMC_OK);
}

static void test_msgpack_timestamps_must_be_valid_datetimes(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(scan_arg("d6ff00000001", &err), LMC_OK);                     /* 4 bytes */
    assert_int_equal(scan_arg("d7ff0000000000000001", &err), LMC_OK);             /* 8 bytes */
    assert_int_equal(scan_arg("c70cff 00000000 0000000000000001", &err), LMC_OK); /* 12 */
    assert_int_equal(scan_arg("d5ff0001", &err), LMC_ERR_FORMAT);                 /* 2 bytes */
    assert_non_null(strstr(err.msg, "invalid msgpack timestamp"));
    /* nanoseconds 10^9 (0x3b9aca00 << 2 in the top 30 bits) */
    assert_int_equal(scan_arg("d7ff ee6b2800 00000000", &err), LMC_ERR_FORMAT);
    /* year 10000 */
    assert_int_equal(scan_arg("c70cff 00000000 0000003afff44180", &err), LMC_ERR_FORMAT);
    /* other ext types are Ext objects: fine as values */
    assert_int_equal(scan_arg("d5050102", &err), LMC_OK);
}

static void test_nesting_stops_at_32_levels(void **state)
{
    (void)state;
    lmc_error err;
    /* The record map and args are 2 levels; 30 more non-empty lists fit, 31 do not. */
    char hex[512] = "";
    for (int i = 0; i < 30; i++)
        strcat(hex, "91 ");
    strcat(hex, "01");
    assert_int_equal(scan_arg(hex, &err), LMC_OK);
    char deeper[512] = "91 ";
    strcat(deeper, hex);
    assert_int_equal(scan_arg(deeper, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "nested deeper than 32 levels"));
}

static void test_canonical_key_lists_take_the_fast_path_with_the_same_rules(void **state)
{
    (void)state;
    lmc_error err;
    /* one key the codec's way, then a key with a bad model (not UTF-8): caught either way */
    const char *key_ok = "82a55f5f745f5fa94f626a6563744b6579a176"
                         "85aa6368756e6b5f68617368c40101aa6d6f64656c5f6e616d65a16d"
                         "a76b765f72616e6b01af6f626a6563745f67726f75705f696400"
                         "aa63616368655f73616c74a0";
    const char *key_bad = "82a55f5f745f5fa94f626a6563744b6579a176"
                          "85aa6368756e6b5f68617368c40101aa6d6f64656c5f6e616d65a1ff"
                          "a76b765f72616e6b01af6f626a6563745f67726f75705f696400"
                          "aa63616368655f73616c74a0";
    char hex[1024];
    snprintf(hex, sizeof(hex), "92 %s %s", key_ok, key_ok);
    assert_int_equal(scan_arg(hex, &err), LMC_OK);
    snprintf(hex, sizeof(hex), "92 %s %s", key_ok, key_bad);
    assert_int_equal(scan_arg(hex, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "a str is not valid UTF-8"));
    /* a list cut short inside a key */
    snprintf(hex, sizeof(hex), "92 %s", key_ok);
    assert_int_equal(scan_arg(hex, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "truncated"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_plain_record_scans_with_its_fields),
        cmocka_unit_test(test_the_type_tag_may_be_anywhere_or_absent_but_each_one_must_match),
        cmocka_unit_test(test_a_repeated_field_keeps_the_last_value_but_each_must_be_valid),
        cmocka_unit_test(test_unknown_keys_are_skipped_without_being_decoded),
        cmocka_unit_test(test_missing_fields_are_named_in_declaration_order),
        cmocka_unit_test(test_trailing_bytes_and_non_map_roots_are_malformed),
        cmocka_unit_test(test_times_take_any_int_or_float_but_not_a_bool),
        cmocka_unit_test(test_strs_must_be_utf8_everywhere_msgspec_decodes_them),
        cmocka_unit_test(test_args_keys_must_be_strs),
        cmocka_unit_test(test_dict_keys_inside_args_must_be_hashable),
        cmocka_unit_test(test_msgpack_timestamps_must_be_valid_datetimes),
        cmocka_unit_test(test_nesting_stops_at_32_levels),
        cmocka_unit_test(test_canonical_key_lists_take_the_fast_path_with_the_same_rules),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    scan_hex("c0", NULL, NULL); /* frees the last body, then holds one byte */
    return failed;
}
