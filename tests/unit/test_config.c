/*
 * test_config.c -- unit tests for the StorageManager flags, the config's
 * JSON tree and its digest.
 *
 * Most tests build an argv from string literals and run parse_all; each
 * flag is checked in both "--flag value" and "--flag=value" forms. The
 * expected JSON dumps were written by hand from the rules of
 * spec/trace-format.md section 5.4 (sorted keys, ", " and ": ") and
 * cross-checked against Python's json.dumps(sort_keys=True) and hashlib.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/config.h"

#define GIB ((uint64_t)1 << 30)

#define MOCK_ADAPTER "{\"type\": \"mock\", \"max_size_gb\": 4, \"mock_bandwidth_gb\": 10.0}"

/* Run parse_all over "prog" + the NULL-terminated words, on a fresh config. */
static lmc_status parse_words(lmc_sm_config *cfg, lmc_error *err, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "prog";
    va_list ap;
    va_start(ap, err);
    const char *w;
    while ((w = va_arg(ap, const char *)) != NULL) {
        assert_true(argc < 64);
        argv[argc++] = (char *)w;
    }
    va_end(ap);
    assert_int_equal(lmc_sm_config_init(cfg), LMC_OK);
    lmc_error_clear(err);
    return lmc_sm_config_parse_all(cfg, argc, argv, err);
}

#define PARSE(cfg, err, ...) parse_words((cfg), (err), __VA_ARGS__, (const char *)NULL)
/* The two required flags plus the words under test. */
#define PARSE_REQ(cfg, err, ...)                                                                   \
    parse_words((cfg), (err), "--l1-size-gb", "1", "--eviction-policy", "LRU", __VA_ARGS__,        \
                (const char *)NULL)

/* A parse that must fail with LMC_ERR_INVALID and a message containing want. */
#define ASSERT_FAILS(want, ...)                                                                    \
    do {                                                                                           \
        lmc_sm_config c_;                                                                          \
        lmc_error e_;                                                                              \
        lmc_status s_ = PARSE_REQ(&c_, &e_, __VA_ARGS__);                                          \
        if (s_ != LMC_ERR_INVALID || strstr(e_.msg, (want)) == NULL)                               \
            fail_msg("status %d, message '%s', wanted '%s'", (int)s_, e_.msg, (want));             \
        assert_int_equal(e_.code, LMC_ERR_INVALID);                                                \
        lmc_sm_config_free(&c_);                                                                   \
    } while (0)

static char *dump(const lmc_sm_config *cfg)
{
    char *json = NULL;
    char hex[65];
    assert_int_equal(lmc_sm_config_digest(cfg, &json, hex), LMC_OK);
    assert_non_null(json);
    return json;
}

/* ------------------------------------------------------------------------ */
/* Defaults and required flags                                              */
/* ------------------------------------------------------------------------ */

static void test_init_sets_lmcache_defaults(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    assert_int_equal(lmc_sm_config_init(&cfg), LMC_OK);
    assert_false(cfg.l1_size_set);
    assert_false(cfg.eviction_policy_set);
    assert_null(cfg.eviction_policy);
    assert_true(cfg.l1_use_lazy);
    assert_int_equal(cfg.l1_init_size_bytes, 20 * GIB);
    assert_int_equal(cfg.l1_align_bytes, 4096);
    assert_null(cfg.shm_name);
    assert_int_equal(cfg.write_ttl_seconds, 600);
    assert_int_equal(cfg.read_ttl_seconds, 300);
    assert_true(cfg.trigger_watermark == 0.8);
    assert_true(cfg.eviction_ratio == 0.2);
    assert_int_equal(cfg.n_l2_adapters, 0);
    assert_string_equal(cfg.store_policy, "default");
    assert_string_equal(cfg.prefetch_policy, "default");
    assert_int_equal(cfg.prefetch_max_in_flight, 8);
    assert_int_equal(cfg.periodic_notifier_interval_ms, 5);
    lmc_sm_config_free(&cfg);
}

static void test_required_flags_alone_parse_with_defaults(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--l1-size-gb", "2", "--eviction-policy", "noop"), LMC_OK);
    assert_true(cfg.l1_size_set);
    assert_true(cfg.eviction_policy_set);
    assert_int_equal(cfg.l1_size_bytes, 2 * GIB);
    assert_string_equal(cfg.eviction_policy, "noop");
    assert_true(cfg.l1_use_lazy);
    assert_int_equal(cfg.l1_init_size_bytes, 20 * GIB);
    lmc_sm_config_free(&cfg);
}

static void test_missing_l1_size_is_an_error(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--eviction-policy", "LRU"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb is required"));
    lmc_sm_config_free(&cfg);
}

static void test_missing_eviction_policy_is_an_error_listing_choices(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--l1-size-gb", "1"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--eviction-policy is required"));
    assert_non_null(strstr(err.msg, "LRU, ARC, S3FIFO, IsolatedLRU, noop"));
    lmc_sm_config_free(&cfg);
}

static void test_missing_both_required_flags_names_both(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--l1-read-ttl-seconds", "5"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb is required"));
    assert_non_null(strstr(err.msg, "--eviction-policy is required"));
    lmc_sm_config_free(&cfg);
}

static void test_empty_argv_reports_required_flags(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    char *argv[] = {"prog"};
    assert_int_equal(lmc_sm_config_init(&cfg), LMC_OK);
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 1, argv, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb is required"));
    lmc_sm_config_free(&cfg);
}

/* ------------------------------------------------------------------------ */
/* Every flag, in both forms                                                */
/* ------------------------------------------------------------------------ */

static void test_l1_size_gb_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE(&a, &err, "--l1-size-gb", "0.5", "--eviction-policy", "LRU"), LMC_OK);
    assert_int_equal(PARSE(&b, &err, "--l1-size-gb=0.5", "--eviction-policy=LRU"), LMC_OK);
    assert_int_equal(a.l1_size_bytes, GIB / 2);
    assert_int_equal(b.l1_size_bytes, GIB / 2);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_l1_size_gb_truncates_like_python_int(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    /* int(0.1 * 2**30) == 107374182 (the exact product is 107374182.4). */
    assert_int_equal(PARSE(&cfg, &err, "--l1-size-gb", "0.1", "--eviction-policy", "LRU"), LMC_OK);
    assert_int_equal(cfg.l1_size_bytes, 107374182);
    lmc_sm_config_free(&cfg);
}

static void test_l1_use_lazy_switches_both_ways(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&cfg, &err, "--no-l1-use-lazy"), LMC_OK);
    assert_false(cfg.l1_use_lazy);
    lmc_sm_config_free(&cfg);
    assert_int_equal(PARSE_REQ(&cfg, &err, "--no-l1-use-lazy", "--l1-use-lazy"), LMC_OK);
    assert_true(cfg.l1_use_lazy);
    lmc_sm_config_free(&cfg);
}

static void test_l1_init_size_gb_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--l1-init-size-gb", "3"), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--l1-init-size-gb=3"), LMC_OK);
    assert_int_equal(a.l1_init_size_bytes, 3 * GIB);
    assert_int_equal(b.l1_init_size_bytes, 3 * GIB);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_l1_init_size_gb_zero_is_allowed(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&cfg, &err, "--l1-init-size-gb", "0"), LMC_OK);
    assert_int_equal(cfg.l1_init_size_bytes, 0);
    lmc_sm_config_free(&cfg);
}

static void test_l1_align_bytes_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--l1-align-bytes", "64"), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--l1-align-bytes=1073741824"), LMC_OK);
    assert_int_equal(a.l1_align_bytes, 64);
    assert_int_equal(b.l1_align_bytes, GIB);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_shm_name_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--shm-name", "pool"), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--shm-name=pool"), LMC_OK);
    assert_string_equal(a.shm_name, "pool");
    assert_string_equal(b.shm_name, "pool");
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_shm_name_empty_means_anonymous_memory(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--shm-name", "pool", "--shm-name", ""), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--shm-name="), LMC_OK);
    assert_null(a.shm_name);
    assert_null(b.shm_name);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_ttls_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(
        PARSE_REQ(&a, &err, "--l1-write-ttl-seconds", "7", "--l1-read-ttl-seconds", "3"), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--l1-write-ttl-seconds=7", "--l1-read-ttl-seconds=3"),
                     LMC_OK);
    assert_int_equal(a.write_ttl_seconds, 7);
    assert_int_equal(a.read_ttl_seconds, 3);
    assert_int_equal(b.write_ttl_seconds, 7);
    assert_int_equal(b.read_ttl_seconds, 3);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_eviction_policy_accepts_every_name(void **state)
{
    (void)state;
    const char *names[] = {"LRU", "ARC", "S3FIFO", "IsolatedLRU", "noop"};
    for (size_t k = 0; k < 5; k++) {
        lmc_sm_config a, b;
        lmc_error err;
        char eq[64];
        snprintf(eq, sizeof(eq), "--eviction-policy=%s", names[k]);
        assert_int_equal(PARSE(&a, &err, "--l1-size-gb", "1", "--eviction-policy", names[k]),
                         LMC_OK);
        assert_int_equal(PARSE(&b, &err, "--l1-size-gb", "1", eq), LMC_OK);
        assert_string_equal(a.eviction_policy, names[k]);
        assert_string_equal(b.eviction_policy, names[k]);
        lmc_sm_config_free(&a);
        lmc_sm_config_free(&b);
    }
}

static void test_eviction_fractions_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(
        PARSE_REQ(&a, &err, "--eviction-trigger-watermark", "0.9", "--eviction-ratio", "1"),
        LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--eviction-trigger-watermark=0.9", "--eviction-ratio=1"),
                     LMC_OK);
    assert_true(a.trigger_watermark == 0.9 && a.eviction_ratio == 1.0);
    assert_true(b.trigger_watermark == 0.9 && b.eviction_ratio == 1.0);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_l2_policies_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(
        PARSE_REQ(&a, &err, "--l2-store-policy", "skip_l1", "--l2-prefetch-policy", "retain"),
        LMC_OK);
    assert_int_equal(
        PARSE_REQ(&b, &err, "--l2-store-policy=skip_l1", "--l2-prefetch-policy=retain"), LMC_OK);
    assert_string_equal(a.store_policy, "skip_l1");
    assert_string_equal(a.prefetch_policy, "retain");
    assert_string_equal(b.store_policy, "skip_l1");
    assert_string_equal(b.prefetch_policy, "retain");
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_l2_counts_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--l2-prefetch-max-in-flight", "16",
                               "--periodic-notifier-interval-ms", "50"),
                     LMC_OK);
    assert_int_equal(
        PARSE_REQ(&b, &err, "--l2-prefetch-max-in-flight=16", "--periodic-notifier-interval-ms=50"),
        LMC_OK);
    assert_int_equal(a.prefetch_max_in_flight, 16);
    assert_int_equal(a.periodic_notifier_interval_ms, 50);
    assert_int_equal(b.prefetch_max_in_flight, 16);
    assert_int_equal(b.periodic_notifier_interval_ms, 50);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_l2_adapter_both_forms(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--l2-adapter", MOCK_ADAPTER), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--l2-adapter=" MOCK_ADAPTER), LMC_OK);
    assert_int_equal(a.n_l2_adapters, 1);
    assert_int_equal(b.n_l2_adapters, 1);
    const lmc_json *t = lmc_json_object_get(b.l2_adapters[0], "type");
    assert_string_equal(lmc_json_get_string(t, NULL), "mock");
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_negative_number_is_taken_as_a_value(void **state)
{
    (void)state;
    /* argparse treats "-1" as a value, not an option; the range check then rejects it. */
    ASSERT_FAILS("--l1-init-size-gb: -1 is not >= 0", "--l1-init-size-gb", "-1");
}

/* ------------------------------------------------------------------------ */
/* Repetition                                                               */
/* ------------------------------------------------------------------------ */

static void test_flag_given_twice_last_wins(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--l1-size-gb", "1", "--eviction-policy", "LRU",
                           "--eviction-policy=ARC", "--l1-size-gb", "2", "--eviction-ratio", "0.5",
                           "--eviction-ratio=0.3", "--shm-name", "a", "--shm-name", "b"),
                     LMC_OK);
    assert_string_equal(cfg.eviction_policy, "ARC");
    assert_int_equal(cfg.l1_size_bytes, 2 * GIB);
    assert_true(cfg.eviction_ratio == 0.3);
    assert_string_equal(cfg.shm_name, "b");
    lmc_sm_config_free(&cfg);
}

static void test_l2_adapter_accumulates_in_order(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&cfg, &err, "--l2-adapter",
                               "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}",
                               "--l2-adapter=" MOCK_ADAPTER),
                     LMC_OK);
    assert_int_equal(cfg.n_l2_adapters, 2);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(cfg.l2_adapters[0], "max_size_gb")), 1);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(cfg.l2_adapters[1], "max_size_gb")), 4);
    lmc_sm_config_free(&cfg);
}

/* ------------------------------------------------------------------------ */
/* Error messages                                                           */
/* ------------------------------------------------------------------------ */

static void test_eviction_ratio_out_of_range(void **state)
{
    (void)state;
    ASSERT_FAILS("--eviction-ratio: 1.5 is not in (0, 1]", "--eviction-ratio", "1.5");
    ASSERT_FAILS("--eviction-ratio: 0 is not in (0, 1]", "--eviction-ratio=0");
}

static void test_trigger_watermark_out_of_range(void **state)
{
    (void)state;
    ASSERT_FAILS("--eviction-trigger-watermark: -0.5 is not in (0, 1]",
                 "--eviction-trigger-watermark", "-0.5");
}

static void test_float_rejects_junk(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-size-gb: 'abc' is not a number", "--l1-size-gb", "abc");
    ASSERT_FAILS("--l1-size-gb: '1.5x' is not a number", "--l1-size-gb", "1.5x");
    ASSERT_FAILS("--l1-size-gb: '' is not a number", "--l1-size-gb=");
    ASSERT_FAILS("--eviction-ratio: ' 0.5' is not a number", "--eviction-ratio", " 0.5");
}

static void test_float_rejects_hex(void **state)
{
    (void)state;
    ASSERT_FAILS("--eviction-ratio: '0x0.8p0' is not a number", "--eviction-ratio", "0x0.8p0");
}

static void test_float_rejects_nan_and_infinity(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-size-gb: 'nan' is not a finite number", "--l1-size-gb", "nan");
    ASSERT_FAILS("--l1-size-gb: 'inf' is not a finite number", "--l1-size-gb", "inf");
    ASSERT_FAILS("--eviction-ratio: 'Infinity' is not a finite number",
                 "--eviction-ratio=Infinity");
    ASSERT_FAILS("--l1-size-gb: '1e999' is not a finite number", "--l1-size-gb", "1e999");
}

static void test_l1_size_gb_must_be_positive(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-size-gb: 0 is not > 0", "--l1-size-gb", "0");
    ASSERT_FAILS("--l1-size-gb: -2 is not > 0", "--l1-size-gb", "-2");
}

static void test_l1_size_gb_below_one_mib_says_so(void **state)
{
    (void)state;
    ASSERT_FAILS("below the minimum of 1 MiB", "--l1-size-gb", "0.0001");
}

static void test_l1_size_gb_too_large_is_out_of_range(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-size-gb: 1e10 is out of range", "--l1-size-gb", "1e10");
}

static void test_int_rejects_non_integers(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-read-ttl-seconds: '1.5' is not an integer", "--l1-read-ttl-seconds", "1.5");
    ASSERT_FAILS("--l1-read-ttl-seconds: '12abc' is not an integer", "--l1-read-ttl-seconds=12abc");
    ASSERT_FAILS("--l1-align-bytes: '0x1000' is not an integer", "--l1-align-bytes", "0x1000");
    ASSERT_FAILS("--l1-write-ttl-seconds: ' 5' is not an integer", "--l1-write-ttl-seconds", " 5");
    ASSERT_FAILS("--l1-write-ttl-seconds: '' is not an integer", "--l1-write-ttl-seconds=");
}

static void test_int_rejects_overflow(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-write-ttl-seconds: '99999999999999999999' is out of range",
                 "--l1-write-ttl-seconds", "99999999999999999999");
}

static void test_uint32_flags_reject_values_above_uint32(void **state)
{
    (void)state;
    ASSERT_FAILS("--l2-prefetch-max-in-flight: 4294967296 is too large (max 4294967295)",
                 "--l2-prefetch-max-in-flight", "4294967296");
}

static void test_ttls_and_counts_must_be_at_least_one(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-write-ttl-seconds: 0 is not >= 1", "--l1-write-ttl-seconds", "0");
    ASSERT_FAILS("--l1-read-ttl-seconds: 0 is not >= 1", "--l1-read-ttl-seconds", "0");
    ASSERT_FAILS("--l2-prefetch-max-in-flight: 0 is not >= 1", "--l2-prefetch-max-in-flight", "0");
    ASSERT_FAILS("--periodic-notifier-interval-ms: 0 is not >= 1",
                 "--periodic-notifier-interval-ms", "0");
}

static void test_align_bytes_must_be_a_power_of_two(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-align-bytes: 100 is not a power of two", "--l1-align-bytes", "100");
    ASSERT_FAILS("--l1-align-bytes: 0 is not a power of two", "--l1-align-bytes", "0");
}

static void test_align_bytes_must_be_in_range(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-align-bytes: 32 is not in [64, 1073741824]", "--l1-align-bytes", "32");
    ASSERT_FAILS("--l1-align-bytes: 2147483648 is not in [64, 1073741824]",
                 "--l1-align-bytes=2147483648");
}

static void test_align_larger_than_l1_is_rejected_at_finish(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--l1-size-gb", "0.5", "--eviction-policy", "LRU",
                           "--l1-align-bytes", "1073741824"),
                     LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-align-bytes: 1073741824 is larger than the L1 size"));
    lmc_sm_config_free(&cfg);
}

static void test_eviction_policy_rejects_unknown_name(void **state)
{
    (void)state;
    ASSERT_FAILS("--eviction-policy: 'FIFO' is not one of LRU, ARC, S3FIFO, IsolatedLRU, noop",
                 "--eviction-policy", "FIFO");
    /* Names are exact: no case folding. */
    ASSERT_FAILS("--eviction-policy: 'lru' is not one of", "--eviction-policy=lru");
}

static void test_l2_policies_reject_unknown_names(void **state)
{
    (void)state;
    ASSERT_FAILS("--l2-store-policy: 'all' is not one of default, skip_l1", "--l2-store-policy",
                 "all");
    ASSERT_FAILS("--l2-prefetch-policy: 'x' is not one of default, retain",
                 "--l2-prefetch-policy=x");
}

static void test_missing_value_at_end_is_an_error(void **state)
{
    (void)state;
    ASSERT_FAILS("--l1-size-gb: a value is required", "--l1-size-gb");
}

static void test_option_after_flag_is_not_taken_as_its_value(void **state)
{
    (void)state;
    ASSERT_FAILS("--shm-name: a value is required", "--shm-name", "--no-l1-use-lazy");
}

static void test_boolean_flag_with_value_is_an_error(void **state)
{
    (void)state;
    ASSERT_FAILS("--no-l1-use-lazy takes no value", "--no-l1-use-lazy=1");
    ASSERT_FAILS("--l1-use-lazy takes no value", "--l1-use-lazy=true");
}

static void test_l2_adapter_bad_json_names_the_flag(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&cfg, &err, "--l2-adapter", "{\"type\": "), LMC_ERR_INVALID);
    assert_int_equal(err.code, LMC_ERR_INVALID);
    assert_true(strncmp(err.msg, "--l2-adapter: ", 14) == 0);
    assert_non_null(strstr(err.msg, "JSON"));
    lmc_sm_config_free(&cfg);
}

static void test_l2_adapter_non_object_names_the_flag(void **state)
{
    (void)state;
    ASSERT_FAILS("--l2-adapter: expected a JSON object", "--l2-adapter", "[1, 2]");
}

static void test_l2_adapter_unknown_type_names_the_flag(void **state)
{
    (void)state;
    ASSERT_FAILS("--l2-adapter", "--l2-adapter", "{\"type\": \"no_such_type\"}");
}

static void test_l2_adapter_bad_field_names_the_flag_and_field(void **state)
{
    (void)state;
    const char *bad = "{\"type\": \"mock\", \"max_size_gb\": -1, \"mock_bandwidth_gb\": 10}";
    ASSERT_FAILS("--l2-adapter", "--l2-adapter", bad);
    ASSERT_FAILS("max_size_gb", "--l2-adapter", bad);
}

static void test_l2_adapter_flag_named_once(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&cfg, &err, "--l2-adapter", "{\"type\": \"no_such_type\"}"),
                     LMC_ERR_INVALID);
    const char *first = strstr(err.msg, "--l2-adapter");
    assert_non_null(first);
    assert_null(strstr(first + 1, "--l2-adapter"));
    lmc_sm_config_free(&cfg);
}

static void test_unknown_option_is_reported(void **state)
{
    (void)state;
    ASSERT_FAILS("unknown option '--foo'", "--foo");
    ASSERT_FAILS("unknown option '--foo'", "--foo=1");
}

static void test_positional_argument_is_reported(void **state)
{
    (void)state;
    ASSERT_FAILS("unexpected argument 'x'", "x");
    ASSERT_FAILS("unexpected argument 'y'", "--", "y");
}

/* ------------------------------------------------------------------------ */
/* parse_arg contract                                                       */
/* ------------------------------------------------------------------------ */

static void test_parse_arg_leaves_foreign_flags_alone(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    char *argv[] = {"prog", "--verbose", "--jsonl-out", "x", "file.lct"};
    assert_int_equal(lmc_sm_config_init(&cfg), LMC_OK);
    for (int k = 1; k < 5; k++) {
        int i = k;
        bool consumed = true;
        assert_int_equal(lmc_sm_config_parse_arg(&cfg, 5, argv, &i, &consumed, &err), LMC_OK);
        assert_false(consumed);
        assert_int_equal(i, k);
    }
    lmc_sm_config_free(&cfg);
}

static void test_parse_arg_advances_past_what_it_consumed(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    char *argv[] = {
        "prog", "--eviction-ratio", "0.5", "--eviction-ratio=0.4", "--no-l1-use-lazy", "--verbose"};
    assert_int_equal(lmc_sm_config_init(&cfg), LMC_OK);
    int i = 1;
    bool consumed = false;
    assert_int_equal(lmc_sm_config_parse_arg(&cfg, 6, argv, &i, &consumed, &err), LMC_OK);
    assert_true(consumed);
    assert_int_equal(i, 3);
    assert_int_equal(lmc_sm_config_parse_arg(&cfg, 6, argv, &i, &consumed, &err), LMC_OK);
    assert_true(consumed);
    assert_int_equal(i, 4);
    assert_int_equal(lmc_sm_config_parse_arg(&cfg, 6, argv, &i, &consumed, &err), LMC_OK);
    assert_true(consumed);
    assert_int_equal(i, 5);
    assert_int_equal(lmc_sm_config_parse_arg(&cfg, 6, argv, &i, &consumed, &err), LMC_OK);
    assert_false(consumed);
    assert_int_equal(i, 5);
    assert_true(cfg.eviction_ratio == 0.4);
    assert_false(cfg.l1_use_lazy);
    lmc_sm_config_free(&cfg);
}

/* ------------------------------------------------------------------------ */
/* Help                                                                     */
/* ------------------------------------------------------------------------ */

static void test_help_lists_each_flag_once_with_defaults_aligned(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lmc_sm_config_print_help(f);
    fclose(f);

    const char *flags[] = {"--l1-size-gb GB",
                           "--l1-use-lazy, --no-l1-use-lazy",
                           "--l1-init-size-gb",
                           "--l1-align-bytes",
                           "--shm-name",
                           "--l1-write-ttl-seconds",
                           "--l1-read-ttl-seconds",
                           "--eviction-policy",
                           "--eviction-trigger-watermark",
                           "--eviction-ratio",
                           "--enable-extra-logging",
                           "--extra-logging-interval",
                           "--l2-store-policy",
                           "--l2-prefetch-policy",
                           "--l2-prefetch-max-in-flight",
                           "--periodic-notifier-interval-ms",
                           "--l2-adapter"};
    size_t n_flags = sizeof(flags) / sizeof(flags[0]);
    size_t lines = 0;
    int help_col = -1;
    for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        assert_true(strncmp(line, "  ", 2) == 0);
        assert_true(strncmp(line + 2, flags[lines < n_flags ? lines : 0],
                            strlen(flags[lines < n_flags ? lines : 0])) == 0);
        assert_true(strstr(line, "(default: ") != NULL || strstr(line, "(required)") != NULL);
        /* The help text starts at the same column on every line. */
        char *gap = strstr(line + 2, "  ");
        assert_non_null(gap);
        int col = (int)(gap - line);
        while (line[col] == ' ')
            col++;
        if (help_col < 0)
            help_col = col;
        assert_int_equal(col, help_col);
        lines++;
    }
    assert_int_equal(lines, n_flags);
    free(buf);
}

static void test_help_shows_defaults(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lmc_sm_config_print_help(f);
    fclose(f);
    assert_non_null(strstr(buf, "(default: 0.8)"));
    assert_non_null(strstr(buf, "(default: 4096)"));
    assert_non_null(strstr(buf, "(default: 600)"));
    assert_non_null(strstr(buf, "(default: 20)"));
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* JSON tree, digest, copy                                                  */
/* ------------------------------------------------------------------------ */

/*
 * LMCache's newest StorageManagerConfig (spec/storage-manager.md section
 * 11.1): l1_manager_config with tag "_default" and a copy of
 * eviction_config, l1_manager_configs holding a copy of l1_manager_config,
 * prefetch_load_timeout null. The texts were derived independently: the
 * dataclasses written out in Python from that section, built from the same
 * flags, through dataclasses.asdict and json.dumps(sort_keys=True)
 * (docs/trace-format.md, "Config JSON and digest").
 */
static const char MINIMAL_JSON[] =
    "{\"eviction_config\": {\"eviction_policy\": \"LRU\", \"eviction_ratio\": 0.2, "
    "\"extra_logging_enabled\": false, \"extra_logging_interval\": 10.0, "
    "\"trigger_watermark\": 0.8}, "
    "\"l1_manager_config\": {\"eviction\": {\"eviction_policy\": \"LRU\", "
    "\"eviction_ratio\": 0.2, \"extra_logging_enabled\": false, "
    "\"extra_logging_interval\": 10.0, \"trigger_watermark\": 0.8}, \"gds_l1_config\": null, "
    "\"memory_config\": {\"align_bytes\": 4096, \"devdax_path\": null, "
    "\"devdax_size_in_bytes\": 0, \"init_size_in_bytes\": 1073741824, \"shm_name\": \"\", "
    "\"size_in_bytes\": 1073741824, \"use_hugepages\": false, \"use_lazy\": true}, "
    "\"read_ttl_seconds\": 300, \"tag\": \"_default\", \"write_ttl_seconds\": 600}, "
    "\"l1_manager_configs\": [{\"eviction\": {\"eviction_policy\": \"LRU\", "
    "\"eviction_ratio\": 0.2, \"extra_logging_enabled\": false, "
    "\"extra_logging_interval\": 10.0, \"trigger_watermark\": 0.8}, \"gds_l1_config\": null, "
    "\"memory_config\": {\"align_bytes\": 4096, \"devdax_path\": null, "
    "\"devdax_size_in_bytes\": 0, \"init_size_in_bytes\": 1073741824, \"shm_name\": \"\", "
    "\"size_in_bytes\": 1073741824, \"use_hugepages\": false, \"use_lazy\": true}, "
    "\"read_ttl_seconds\": 300, \"tag\": \"_default\", \"write_ttl_seconds\": 600}], "
    "\"l2_adapter_config\": {\"adapters\": []}, \"periodic_notifier_interval_ms\": 5, "
    "\"prefetch_load_timeout\": null, \"prefetch_max_in_flight\": 8, "
    "\"prefetch_policy\": \"default\", \"store_policy\": \"default\"}";
static const char MINIMAL_DIGEST[] =
    "0e4c123a0549193e04b99af53317c7bd2a8ec20d582574a4b9ca89d41b0631af";

static const char FULL_JSON[] =
    "{\"eviction_config\": {\"eviction_policy\": \"ARC\", \"eviction_ratio\": 0.25, "
    "\"extra_logging_enabled\": false, \"extra_logging_interval\": 10.0, "
    "\"trigger_watermark\": 0.8}, "
    "\"l1_manager_config\": {\"eviction\": {\"eviction_policy\": \"ARC\", "
    "\"eviction_ratio\": 0.25, \"extra_logging_enabled\": false, "
    "\"extra_logging_interval\": 10.0, \"trigger_watermark\": 0.8}, \"gds_l1_config\": null, "
    "\"memory_config\": {\"align_bytes\": 4096, \"devdax_path\": null, "
    "\"devdax_size_in_bytes\": 0, \"init_size_in_bytes\": 1073741824, \"shm_name\": \"pool\", "
    "\"size_in_bytes\": 1610612736, \"use_hugepages\": false, \"use_lazy\": false}, "
    "\"read_ttl_seconds\": 300, \"tag\": \"_default\", \"write_ttl_seconds\": 600}, "
    "\"l1_manager_configs\": [{\"eviction\": {\"eviction_policy\": \"ARC\", "
    "\"eviction_ratio\": 0.25, \"extra_logging_enabled\": false, "
    "\"extra_logging_interval\": 10.0, \"trigger_watermark\": 0.8}, \"gds_l1_config\": null, "
    "\"memory_config\": {\"align_bytes\": 4096, \"devdax_path\": null, "
    "\"devdax_size_in_bytes\": 0, \"init_size_in_bytes\": 1073741824, \"shm_name\": \"pool\", "
    "\"size_in_bytes\": 1610612736, \"use_hugepages\": false, \"use_lazy\": false}, "
    "\"read_ttl_seconds\": 300, \"tag\": \"_default\", \"write_ttl_seconds\": 600}], "
    "\"l2_adapter_config\": {\"adapters\": [{\"max_size_gb\": 4, \"mock_bandwidth_gb\": 10.0, "
    "\"type\": \"mock\"}]}, \"periodic_notifier_interval_ms\": 5, "
    "\"prefetch_load_timeout\": null, \"prefetch_max_in_flight\": 8, "
    "\"prefetch_policy\": \"default\", \"store_policy\": \"default\"}";
static const char FULL_DIGEST[] =
    "6b86c422afea429bd2e7c038b3ed490743c15b72703d4a92461c358b82afa232";

/* `--l1-size-gb 0.0625 --eviction-policy LRU --shm-name ""`: byte for byte what LMCache writes. */
static const char LMCACHE_JSON[] =
    "{\"eviction_config\": {\"eviction_policy\": \"LRU\", \"eviction_ratio\": 0.2, "
    "\"extra_logging_enabled\": false, \"extra_logging_interval\": 10.0, "
    "\"trigger_watermark\": 0.8}, "
    "\"l1_manager_config\": {\"eviction\": {\"eviction_policy\": \"LRU\", "
    "\"eviction_ratio\": 0.2, \"extra_logging_enabled\": false, "
    "\"extra_logging_interval\": 10.0, \"trigger_watermark\": 0.8}, \"gds_l1_config\": null, "
    "\"memory_config\": {\"align_bytes\": 4096, \"devdax_path\": null, "
    "\"devdax_size_in_bytes\": 0, \"init_size_in_bytes\": 67108864, \"shm_name\": \"\", "
    "\"size_in_bytes\": 67108864, \"use_hugepages\": false, \"use_lazy\": true}, "
    "\"read_ttl_seconds\": 300, \"tag\": \"_default\", \"write_ttl_seconds\": 600}, "
    "\"l1_manager_configs\": [{\"eviction\": {\"eviction_policy\": \"LRU\", "
    "\"eviction_ratio\": 0.2, \"extra_logging_enabled\": false, "
    "\"extra_logging_interval\": 10.0, \"trigger_watermark\": 0.8}, \"gds_l1_config\": null, "
    "\"memory_config\": {\"align_bytes\": 4096, \"devdax_path\": null, "
    "\"devdax_size_in_bytes\": 0, \"init_size_in_bytes\": 67108864, \"shm_name\": \"\", "
    "\"size_in_bytes\": 67108864, \"use_hugepages\": false, \"use_lazy\": true}, "
    "\"read_ttl_seconds\": 300, \"tag\": \"_default\", \"write_ttl_seconds\": 600}], "
    "\"l2_adapter_config\": {\"adapters\": []}, \"periodic_notifier_interval_ms\": 5, "
    "\"prefetch_load_timeout\": null, \"prefetch_max_in_flight\": 8, "
    "\"prefetch_policy\": \"default\", \"store_policy\": \"default\"}";
static const char LMCACHE_DIGEST[] =
    "661c3ec0547641894937c6c884da42e51529925cda0d3faaa29ed1f7dcc9aae0";

static lmc_status parse_full(lmc_sm_config *cfg, lmc_error *err)
{
    return PARSE(cfg, err, "--l1-size-gb", "1.5", "--eviction-policy", "ARC", "--no-l1-use-lazy",
                 "--l1-init-size-gb", "1", "--shm-name", "pool", "--eviction-ratio", "0.25",
                 "--l2-adapter",
                 "{\"type\": \"mock\", \"mock_bandwidth_gb\": 10.0, \"max_size_gb\": 4}");
}

static void test_to_json_of_minimal_config_matches_exactly(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE(&cfg, &err, "--l1-size-gb", "1", "--eviction-policy", "LRU"), LMC_OK);
    lmc_json *tree = lmc_sm_config_to_json(&cfg);
    assert_non_null(tree);
    char *text = lmc_json_dumps(tree, LMC_JSON_SORT_KEYS, -1, NULL);
    assert_non_null(text);
    assert_string_equal(text, MINIMAL_JSON);
    free(text);
    lmc_json_free(tree);
    lmc_sm_config_free(&cfg);
}

static void test_to_json_matches_lmcache_byte_for_byte(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(
        PARSE(&cfg, &err, "--l1-size-gb", "0.0625", "--eviction-policy", "LRU", "--shm-name", ""),
        LMC_OK);
    char *json = NULL;
    char hex[65];
    assert_int_equal(lmc_sm_config_digest(&cfg, &json, hex), LMC_OK);
    assert_string_equal(json, LMCACHE_JSON);
    assert_string_equal(hex, LMCACHE_DIGEST);
    free(json);
    lmc_sm_config_free(&cfg);
}

static void test_extra_logging_flags_go_into_both_eviction_configs(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(
        PARSE_REQ(&cfg, &err, "--enable-extra-logging", "--extra-logging-interval", "2.5"), LMC_OK);
    lmc_json *tree = lmc_sm_config_to_json(&cfg);
    assert_non_null(tree);
    const lmc_json *evs[2] = {
        lmc_json_object_get(tree, "eviction_config"),
        lmc_json_object_get(lmc_json_object_get(tree, "l1_manager_config"), "eviction")};
    for (int i = 0; i < 2; i++) {
        assert_true(lmc_json_get_bool(lmc_json_object_get(evs[i], "extra_logging_enabled")));
        assert_true(lmc_json_get_number(lmc_json_object_get(evs[i], "extra_logging_interval")) ==
                    2.5);
    }
    lmc_json_free(tree);
    lmc_sm_config_free(&cfg);
    assert_int_equal(PARSE_REQ(&cfg, &err, "--extra-logging-interval", "0"), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--extra-logging-interval: 0 is not a finite number > 0");
    lmc_sm_config_free(&cfg);
}

static void test_to_json_of_full_config_matches_exactly(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(parse_full(&cfg, &err), LMC_OK);
    char *text = dump(&cfg);
    assert_string_equal(text, FULL_JSON);
    free(text);
    lmc_sm_config_free(&cfg);
}

static void test_to_json_clamps_init_size_to_l1_size(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&cfg, &err, "--l1-init-size-gb", "100"), LMC_OK);
    assert_int_equal(cfg.l1_init_size_bytes, 100 * GIB); /* the field keeps what was given */
    lmc_json *tree = lmc_sm_config_to_json(&cfg);
    assert_non_null(tree);
    lmc_json *mem =
        lmc_json_object_get(lmc_json_object_get(tree, "l1_manager_config"), "memory_config");
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(mem, "init_size_in_bytes")), GIB);
    lmc_json_free(tree);
    lmc_sm_config_free(&cfg);
}

static void test_digest_matches_python_for_known_configs(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    char hex[65];
    assert_int_equal(PARSE(&a, &err, "--l1-size-gb", "1", "--eviction-policy", "LRU"), LMC_OK);
    assert_int_equal(parse_full(&b, &err), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&a, NULL, hex), LMC_OK);
    assert_string_equal(hex, MINIMAL_DIGEST);
    assert_int_equal(lmc_sm_config_digest(&b, NULL, hex), LMC_OK);
    assert_string_equal(hex, FULL_DIGEST);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_digest_is_64_lowercase_hex_and_stable(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    char h1[65], h2[65];
    char *j1 = NULL, *j2 = NULL;
    assert_int_equal(parse_full(&cfg, &err), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&cfg, &j1, h1), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&cfg, &j2, h2), LMC_OK);
    assert_int_equal(strlen(h1), 64);
    for (int k = 0; k < 64; k++)
        assert_true(isxdigit((unsigned char)h1[k]) && !isupper((unsigned char)h1[k]));
    assert_string_equal(h1, h2);
    assert_string_equal(j1, j2);
    free(j1);
    free(j2);
    lmc_sm_config_free(&cfg);
}

static void test_digest_changes_when_a_field_changes(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    char ha[65], hb[65];
    assert_int_equal(PARSE_REQ(&a, &err, "--eviction-ratio", "0.2"), LMC_OK);
    assert_int_equal(PARSE_REQ(&b, &err, "--eviction-ratio", "0.21"), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&a, NULL, ha), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&b, NULL, hb), LMC_OK);
    assert_string_not_equal(ha, hb);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_copy_has_the_same_digest(void **state)
{
    (void)state;
    lmc_sm_config src, dst;
    lmc_error err;
    char hs[65], hd[65];
    assert_int_equal(parse_full(&src, &err), LMC_OK);
    assert_int_equal(lmc_sm_config_copy(&dst, &src), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&src, NULL, hs), LMC_OK);
    assert_int_equal(lmc_sm_config_digest(&dst, NULL, hd), LMC_OK);
    assert_string_equal(hs, hd);
    lmc_sm_config_free(&src);
    lmc_sm_config_free(&dst);
}

static void test_copy_outlives_the_original(void **state)
{
    (void)state;
    lmc_sm_config src, dst;
    lmc_error err;
    assert_int_equal(parse_full(&src, &err), LMC_OK);
    assert_int_equal(lmc_sm_config_copy(&dst, &src), LMC_OK);
    assert_ptr_not_equal(dst.shm_name, src.shm_name);
    assert_ptr_not_equal(dst.l2_adapters[0], src.l2_adapters[0]);
    lmc_sm_config_free(&src);
    assert_string_equal(dst.shm_name, "pool");
    assert_string_equal(dst.eviction_policy, "ARC");
    char *text = dump(&dst);
    assert_string_equal(text, FULL_JSON);
    free(text);
    lmc_sm_config_free(&dst);
}

static void test_free_twice_is_harmless(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(parse_full(&cfg, &err), LMC_OK);
    lmc_sm_config_free(&cfg);
    lmc_sm_config_free(&cfg);
    lmc_sm_config_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* lmc_sm_config_set and lmc_sm_config_to_json_text                         */
/* ------------------------------------------------------------------------ */

/* A set() that must fail with LMC_ERR_INVALID and a message containing want. */
static void assert_set_fails(const char *flag, const char *value, const char *want)
{
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(lmc_sm_config_init(&cfg), LMC_OK);
    lmc_error_clear(&err);
    lmc_status st = lmc_sm_config_set(&cfg, flag, value, &err);
    if (st != LMC_ERR_INVALID || strstr(err.msg, want) == NULL)
        fail_msg("status %d, message '%s', wanted '%s'", (int)st, err.msg, want);
    assert_int_equal(err.code, LMC_ERR_INVALID);
    lmc_sm_config_free(&cfg);
}

static void test_set_builds_the_same_config_as_the_command_line(void **state)
{
    (void)state;
    lmc_sm_config a, b;
    lmc_error err;
    assert_int_equal(PARSE_REQ(&a, &err, "--no-l1-use-lazy", "--eviction-ratio", "0.5",
                               "--shm-name", "pool", "--l2-adapter", MOCK_ADAPTER),
                     LMC_OK);
    assert_int_equal(lmc_sm_config_init(&b), LMC_OK);
    assert_int_equal(lmc_sm_config_set(&b, "--l1-size-gb", "1", &err), LMC_OK);
    assert_int_equal(lmc_sm_config_set(&b, "--eviction-policy", "LRU", &err), LMC_OK);
    assert_int_equal(lmc_sm_config_set(&b, "--no-l1-use-lazy", NULL, &err), LMC_OK);
    assert_int_equal(lmc_sm_config_set(&b, "--eviction-ratio", "0.5", &err), LMC_OK);
    assert_int_equal(lmc_sm_config_set(&b, "--shm-name", "pool", &err), LMC_OK);
    assert_int_equal(lmc_sm_config_set(&b, "--l2-adapter", MOCK_ADAPTER, &err), LMC_OK);
    assert_int_equal(lmc_sm_config_finish(&b, &err), LMC_OK);
    assert_true(b.l1_size_set);
    assert_true(b.eviction_policy_set);
    char *ja = dump(&a);
    char *jb = dump(&b);
    assert_string_equal(ja, jb);
    free(ja);
    free(jb);
    lmc_sm_config_free(&a);
    lmc_sm_config_free(&b);
}

static void test_set_value_that_looks_like_an_option_is_taken(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(lmc_sm_config_init(&cfg), LMC_OK);
    /* No argv to misread: the value is the value, even when it starts with "--". */
    assert_int_equal(lmc_sm_config_set(&cfg, "--shm-name", "--pool", &err), LMC_OK);
    assert_string_equal(cfg.shm_name, "--pool");
    lmc_sm_config_free(&cfg);
}

static void test_set_unknown_flag_is_reported(void **state)
{
    (void)state;
    assert_set_fails("--l1-size", "1", "unknown option '--l1-size'");
    assert_set_fails("l1-size-gb", "1", "unknown option 'l1-size-gb'");
}

static void test_set_switch_with_value_is_an_error(void **state)
{
    (void)state;
    assert_set_fails("--l1-use-lazy", "yes", "--l1-use-lazy takes no value (got 'yes')");
}

static void test_set_flag_without_value_is_an_error(void **state)
{
    (void)state;
    assert_set_fails("--eviction-policy", NULL, "--eviction-policy: a value is required");
}

static void test_set_bad_value_names_the_flag(void **state)
{
    (void)state;
    assert_set_fails("--eviction-ratio", "1.5", "--eviction-ratio: 1.5 is not in (0, 1]");
    assert_set_fails("--eviction-policy", "MRU", "--eviction-policy: 'MRU' is not one of");
}

static void test_to_json_text_is_the_digested_text(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_error err;
    assert_int_equal(parse_full(&cfg, &err), LMC_OK);
    char *text = NULL;
    assert_int_equal(lmc_sm_config_to_json_text(&cfg, &text), LMC_OK);
    assert_string_equal(text, FULL_JSON);
    char *digested = dump(&cfg);
    assert_string_equal(text, digested);
    free(digested);
    free(text);
    lmc_sm_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_sets_lmcache_defaults),
        cmocka_unit_test(test_required_flags_alone_parse_with_defaults),
        cmocka_unit_test(test_missing_l1_size_is_an_error),
        cmocka_unit_test(test_missing_eviction_policy_is_an_error_listing_choices),
        cmocka_unit_test(test_missing_both_required_flags_names_both),
        cmocka_unit_test(test_empty_argv_reports_required_flags),
        cmocka_unit_test(test_l1_size_gb_both_forms),
        cmocka_unit_test(test_l1_size_gb_truncates_like_python_int),
        cmocka_unit_test(test_l1_use_lazy_switches_both_ways),
        cmocka_unit_test(test_l1_init_size_gb_both_forms),
        cmocka_unit_test(test_l1_init_size_gb_zero_is_allowed),
        cmocka_unit_test(test_l1_align_bytes_both_forms),
        cmocka_unit_test(test_shm_name_both_forms),
        cmocka_unit_test(test_shm_name_empty_means_anonymous_memory),
        cmocka_unit_test(test_ttls_both_forms),
        cmocka_unit_test(test_eviction_policy_accepts_every_name),
        cmocka_unit_test(test_eviction_fractions_both_forms),
        cmocka_unit_test(test_l2_policies_both_forms),
        cmocka_unit_test(test_l2_counts_both_forms),
        cmocka_unit_test(test_l2_adapter_both_forms),
        cmocka_unit_test(test_negative_number_is_taken_as_a_value),
        cmocka_unit_test(test_flag_given_twice_last_wins),
        cmocka_unit_test(test_l2_adapter_accumulates_in_order),
        cmocka_unit_test(test_eviction_ratio_out_of_range),
        cmocka_unit_test(test_trigger_watermark_out_of_range),
        cmocka_unit_test(test_float_rejects_junk),
        cmocka_unit_test(test_float_rejects_hex),
        cmocka_unit_test(test_float_rejects_nan_and_infinity),
        cmocka_unit_test(test_l1_size_gb_must_be_positive),
        cmocka_unit_test(test_l1_size_gb_below_one_mib_says_so),
        cmocka_unit_test(test_l1_size_gb_too_large_is_out_of_range),
        cmocka_unit_test(test_int_rejects_non_integers),
        cmocka_unit_test(test_int_rejects_overflow),
        cmocka_unit_test(test_uint32_flags_reject_values_above_uint32),
        cmocka_unit_test(test_ttls_and_counts_must_be_at_least_one),
        cmocka_unit_test(test_align_bytes_must_be_a_power_of_two),
        cmocka_unit_test(test_align_bytes_must_be_in_range),
        cmocka_unit_test(test_align_larger_than_l1_is_rejected_at_finish),
        cmocka_unit_test(test_eviction_policy_rejects_unknown_name),
        cmocka_unit_test(test_l2_policies_reject_unknown_names),
        cmocka_unit_test(test_missing_value_at_end_is_an_error),
        cmocka_unit_test(test_option_after_flag_is_not_taken_as_its_value),
        cmocka_unit_test(test_boolean_flag_with_value_is_an_error),
        cmocka_unit_test(test_l2_adapter_bad_json_names_the_flag),
        cmocka_unit_test(test_l2_adapter_non_object_names_the_flag),
        cmocka_unit_test(test_l2_adapter_unknown_type_names_the_flag),
        cmocka_unit_test(test_l2_adapter_bad_field_names_the_flag_and_field),
        cmocka_unit_test(test_l2_adapter_flag_named_once),
        cmocka_unit_test(test_unknown_option_is_reported),
        cmocka_unit_test(test_positional_argument_is_reported),
        cmocka_unit_test(test_parse_arg_leaves_foreign_flags_alone),
        cmocka_unit_test(test_parse_arg_advances_past_what_it_consumed),
        cmocka_unit_test(test_help_lists_each_flag_once_with_defaults_aligned),
        cmocka_unit_test(test_help_shows_defaults),
        cmocka_unit_test(test_to_json_of_minimal_config_matches_exactly),
        cmocka_unit_test(test_to_json_of_full_config_matches_exactly),
        cmocka_unit_test(test_to_json_matches_lmcache_byte_for_byte),
        cmocka_unit_test(test_extra_logging_flags_go_into_both_eviction_configs),
        cmocka_unit_test(test_to_json_clamps_init_size_to_l1_size),
        cmocka_unit_test(test_digest_matches_python_for_known_configs),
        cmocka_unit_test(test_digest_is_64_lowercase_hex_and_stable),
        cmocka_unit_test(test_digest_changes_when_a_field_changes),
        cmocka_unit_test(test_copy_has_the_same_digest),
        cmocka_unit_test(test_copy_outlives_the_original),
        cmocka_unit_test(test_free_twice_is_harmless),
        cmocka_unit_test(test_set_builds_the_same_config_as_the_command_line),
        cmocka_unit_test(test_set_value_that_looks_like_an_option_is_taken),
        cmocka_unit_test(test_set_unknown_flag_is_reported),
        cmocka_unit_test(test_set_switch_with_value_is_an_error),
        cmocka_unit_test(test_set_flag_without_value_is_an_error),
        cmocka_unit_test(test_set_bad_value_names_the_flag),
        cmocka_unit_test(test_to_json_text_is_the_digested_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
