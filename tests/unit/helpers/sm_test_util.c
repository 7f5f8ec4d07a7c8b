/*
 * sm_test_util.c -- building StorageManagers and keys in tests.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "sm_test_util.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "lmcache/config.h"

lmc_storage_manager *sm_test_create_argv(int argc, char **argv)
{
    return sm_test_create_argv_ex(argc, argv, NULL);
}

lmc_storage_manager *sm_test_create_argv_ex(int argc, char **argv,
                                            const lmc_sm_runtime_options *opt)
{
    lmc_sm_config cfg;
    lmc_error err;
    lmc_sm_config_init(&cfg);
    if (lmc_sm_config_parse_all(&cfg, argc, argv, &err) != LMC_OK) {
        print_error("config: %s\n", err.msg);
        fail();
    }
    lmc_storage_manager *sm = NULL;
    if (lmc_sm_create_ex(&cfg, opt, &sm, &err) != LMC_OK) {
        print_error("create: %s\n", err.msg);
        fail();
    }
    lmc_sm_config_free(&cfg);
    return sm;
}

lmc_storage_manager *sm_test_create(const char *flags)
{
    char *copy = strdup(flags);
    char *argv[64];
    int argc = 0;
    argv[argc++] = "test";
    for (char *tok = strtok(copy, " "); tok && argc < 63; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    lmc_storage_manager *sm = sm_test_create_argv(argc, argv);
    free(copy);
    return sm;
}

lmc_sm_config sm_test_config(const char *flags, const char *l2_json)
{
    char *copy = strdup(flags);
    char *argv[64];
    int argc = 0;
    argv[argc++] = "test";
    for (char *tok = strtok(copy, " "); tok && argc < 61; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    if (l2_json != NULL) {
        argv[argc++] = "--l2-adapter";
        argv[argc++] = (char *)l2_json;
    }
    argv[argc] = NULL;
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    lmc_error err;
    if (lmc_sm_config_parse_all(&cfg, argc, argv, &err) != LMC_OK)
        fail_msg("config: %s", err.msg);
    free(copy);
    return cfg;
}

lmc_storage_manager *sm_test_create_l2(char *json)
{
    char *argv[] = {"t",   "--l1-size-gb", "0.01", "--eviction-policy",
                    "LRU", "--l2-adapter", json,   NULL};
    return sm_test_create_argv(7, argv);
}

void sm_test_keys(lmc_object_key *keys, size_t n, uint64_t base)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t h[32] = {0};
        uint64_t v = base + i;
        memcpy(h, &v, sizeof(v));
        assert_int_equal(
            lmc_object_key_make(&keys[i], h, sizeof(h), "test/model", 0x01000100, 0, "", NULL),
            LMC_OK);
    }
}

lmc_layout_desc sm_test_layout(uint64_t bytes)
{
    lmc_layout_desc d;
    int64_t dims[1] = {(int64_t)bytes};
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    return d;
}

uint8_t sm_test_pattern(const lmc_object_key *key, uint64_t off)
{
    return (uint8_t)(key->chunk_hash[0] * 31u + key->chunk_hash[1] * 7u + off * 13u + 1u);
}

size_t sm_test_store(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                     const lmc_layout_desc *layout)
{
    lmc_l1_error *errs = calloc(n, sizeof(*errs));
    lmc_memory_obj *objs = calloc(n, sizeof(*objs));
    size_t ok = lmc_sm_reserve_write(sm, keys, n, layout, LMC_WRITE_NEW, errs, objs);
    lmc_object_key *good = calloc(n, sizeof(*good));
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            continue;
        for (uint64_t b = 0; b < objs[i].size; b++)
            objs[i].data[b] = sm_test_pattern(&keys[i], b);
        good[ng++] = keys[i];
    }
    lmc_sm_finish_write(sm, good, ng, NULL);
    free(good);
    free(errs);
    free(objs);
    return ok;
}

void sm_test_wait_prefetch(lmc_storage_manager *sm, const lmc_prefetch_handle *h, lmc_bitmap *out)
{
    uint64_t deadline = lmc_mono_ms() + 5000;
    while (lmc_sm_query_prefetch_status(sm, h, out) != LMC_OK) {
        if (lmc_mono_ms() > deadline) {
            print_error("prefetch did not complete within 5 s\n");
            fail();
        }
        lmc_sleep_ns(1000 * 1000);
    }
}

void sm_test_prefetch_and_check(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                                const lmc_layout_desc *layout)
{
    lmc_prefetch_handle h;
    assert_int_equal(
        lmc_sm_submit_prefetch_task(sm, keys, n, layout, 0, "rd", LMC_TRIM_PREFIX, &h, NULL),
        LMC_OK);
    assert_true(h.prefetch_request_id >= 0);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), n);
    lmc_bitmap_free(&bm);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, keys, n, &ctx);
    assert_true(ctx.ok);
    for (size_t i = 0; i < n; i++) {
        for (uint64_t b = 0; b < ctx.objs[i].size; b += 331)
            assert_int_equal(ctx.objs[i].data[b], sm_test_pattern(&keys[i], b));
    }
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_finish_read_prefetched(sm, keys, n, 0, NULL);
    lmc_prefetch_handle_clear(&h);
}

char *sm_test_mkdtemp(void)
{
    char *dir = strdup("/tmp/lmc-sm-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void sm_test_rmdir(char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}
