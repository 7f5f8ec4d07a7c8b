/*
 * test_server_config.c -- `lmcache server` flags (server/config.h): every
 * limit of limits.h has its flag, its default and its range; an L1 pool
 * larger than physical memory needs --allow-l1-over-ram.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"

/* Parse "lmcache server" + the words of flags (split on spaces); the status, err set. */
static lmc_status parse(lmc_server_config *cfg, const char *flags, lmc_error *err)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "server --l1-size-gb 0.01 --eviction-policy LRU %s", flags);
    char *argv[32];
    int argc = 0;
    for (char *t = strtok(buf, " "); t != NULL && argc < 32; t = strtok(NULL, " "))
        argv[argc++] = t;
    lmc_server_config_init(cfg);
    lmc_status st = lmc_server_config_parse(cfg, argc, argv, err);
    return st;
}

typedef struct limit_row {
    const char *flag;
    uint64_t def, lo, hi;
    size_t offset;
} limit_row;

static const limit_row ROWS[] = {
#define LMC_LIMIT_ROW(field, flag, def, lo, hi, help)                                              \
    {flag, (def), (lo), (hi), offsetof(lmc_server_limits, field)},
    LMC_SERVER_LIMITS(LMC_LIMIT_ROW)
#undef LMC_LIMIT_ROW
};
#define N_ROWS (sizeof(ROWS) / sizeof(ROWS[0]))

static uint64_t field_of(const lmc_server_config *cfg, const limit_row *r)
{
    return *(const uint64_t *)((const char *)&cfg->limits + r->offset);
}

static void test_every_limit_has_a_default_and_a_flag_with_its_range(void **state)
{
    (void)state;
    lmc_server_config cfg;
    lmc_error err;
    assert_int_equal(parse(&cfg, "", &err), LMC_OK);
    for (size_t i = 0; i < N_ROWS; i++)
        assert_int_equal(field_of(&cfg, &ROWS[i]), ROWS[i].def);
    lmc_server_config_free(&cfg);
    for (size_t i = 0; i < N_ROWS; i++) {
        char flags[128];
        snprintf(flags, sizeof(flags), "%s %llu", ROWS[i].flag, (unsigned long long)ROWS[i].hi);
        assert_int_equal(parse(&cfg, flags, &err), LMC_OK);
        assert_int_equal(field_of(&cfg, &ROWS[i]), ROWS[i].hi);
        lmc_server_config_free(&cfg);
        snprintf(flags, sizeof(flags), "%s=%llu", ROWS[i].flag, (unsigned long long)ROWS[i].hi + 1);
        assert_int_equal(parse(&cfg, flags, &err), LMC_ERR_INVALID);
        char want[160];
        snprintf(want, sizeof(want), "%s: %llu is not in [%llu, %llu]", ROWS[i].flag,
                 (unsigned long long)ROWS[i].hi + 1, (unsigned long long)ROWS[i].lo,
                 (unsigned long long)ROWS[i].hi);
        assert_string_equal(err.msg, want);
        lmc_server_config_free(&cfg);
        snprintf(flags, sizeof(flags), "%s", ROWS[i].flag); /* no value */
        assert_int_equal(parse(&cfg, flags, &err), LMC_ERR_INVALID);
        assert_non_null(strstr(err.msg, "is not an integer"));
        lmc_server_config_free(&cfg);
    }
}

static void test_help_lists_every_limit_with_its_default(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    lmc_server_print_help(f);
    fclose(f);
    for (size_t i = 0; i < N_ROWS; i++) {
        char want[96];
        snprintf(want, sizeof(want), "(default %llu)", (unsigned long long)ROWS[i].def);
        const char *at = strstr(text, ROWS[i].flag);
        assert_non_null(at);
        assert_non_null(strstr(at, want));
    }
    assert_non_null(strstr(text, "--allow-l1-over-ram"));
    free(text);
}

static void test_an_l1_pool_larger_than_physical_memory_needs_allow_l1_over_ram(void **state)
{
    (void)state;
    lmc_server_config cfg;
    lmc_error err;
    /* 1 PiB: more than any machine these tests run on. */
    assert_int_equal(parse(&cfg, "--l1-size-gb 1048576", &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb: 1048576.000 GiB is more than this machine's"));
    assert_non_null(strstr(err.msg, "pass --allow-l1-over-ram to use it anyway"));
    lmc_server_config_free(&cfg);
    assert_int_equal(parse(&cfg, "--l1-size-gb 1048576 --allow-l1-over-ram", &err), LMC_OK);
    assert_true(cfg.allow_l1_over_ram);
    lmc_server_config_free(&cfg);
}

static void test_the_l1_prefault_is_on_unless_no_l1_prefault(void **state)
{
    (void)state;
    lmc_server_config cfg;
    lmc_error err;
    assert_int_equal(parse(&cfg, "--l1-size-gb 0.01", &err), LMC_OK);
    assert_false(cfg.no_l1_prefault);
    lmc_server_config_free(&cfg);
    assert_int_equal(parse(&cfg, "--l1-size-gb 0.01 --no-l1-prefault", &err), LMC_OK);
    assert_true(cfg.no_l1_prefault);
    lmc_server_config_free(&cfg);
    assert_int_equal(parse(&cfg, "--l1-size-gb 0.01 --no-l1-prefault=1", &err), LMC_ERR_INVALID);
    lmc_server_config_free(&cfg);
}

static void test_copy_threads_default_to_the_usable_cpus_at_most_four(void **state)
{
    (void)state;
    lmc_server_config cfg;
    lmc_error err;
    assert_int_equal(parse(&cfg, "--l1-size-gb 0.01", &err), LMC_OK);
    assert_int_equal(cfg.copy_threads, 0);
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
    int cpus = CPU_COUNT(&set);
    assert_int_equal(lmc_server_copy_threads(&cfg), cpus < 4 ? cpus : 4);
    lmc_server_config_free(&cfg);
    assert_int_equal(parse(&cfg, "--l1-size-gb 0.01 --copy-threads 7", &err), LMC_OK);
    assert_int_equal(lmc_server_copy_threads(&cfg), 7);
    lmc_server_config_free(&cfg);
    assert_int_equal(parse(&cfg, "--l1-size-gb 0.01 --copy-threads=1", &err), LMC_OK);
    assert_int_equal(lmc_server_copy_threads(&cfg), 1);
    lmc_server_config_free(&cfg);
    const char *bad[] = {"--copy-threads 0", "--copy-threads 65", "--copy-threads x",
                         "--copy-threads"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(&cfg, bad[i], &err), LMC_ERR_INVALID);
        assert_non_null(strstr(err.msg, "--copy-threads"));
        lmc_server_config_free(&cfg);
    }
    FILE *f = tmpfile();
    assert_non_null(f);
    lmc_server_print_help(f);
    char help[16384];
    rewind(f);
    size_t n = fread(help, 1, sizeof(help) - 1, f);
    help[n] = '\0';
    fclose(f);
    assert_non_null(strstr(help, "--copy-threads N"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_limit_has_a_default_and_a_flag_with_its_range),
        cmocka_unit_test(test_help_lists_every_limit_with_its_default),
        cmocka_unit_test(test_an_l1_pool_larger_than_physical_memory_needs_allow_l1_over_ram),
        cmocka_unit_test(test_the_l1_prefault_is_on_unless_no_l1_prefault),
        cmocka_unit_test(test_copy_threads_default_to_the_usable_cpus_at_most_four),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
