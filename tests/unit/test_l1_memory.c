/*
 * test_l1_memory.c -- unit tests for the L1 pool and its first-fit allocator.
 *
 * Most tests use a small pool of 4 KiB units so offsets read as unit
 * numbers. The random test checks every answer against a reference model
 * (one byte per unit), including exact first-fit offsets and the number of
 * free blocks, which catches any missed merge.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "storage/l1_memory.h"

#define U 4096u /* the default alignment: one unit */

static lmc_l1_memory *make_pool(uint64_t size, uint64_t align)
{
    lmc_l1_memory_config cfg = {.size_bytes = size, .align_bytes = align, .shm_name = NULL};
    lmc_l1_memory *m = NULL;
    lmc_error err;
    lmc_status st = lmc_l1_memory_create(&cfg, &m, &err);
    if (st != LMC_OK)
        fail_msg("create failed: %s", err.msg);
    return m;
}

static void assert_consistent(const lmc_l1_memory *m)
{
    char why[256];
    if (!lmc_l1_memory_check(m, why, sizeof(why)))
        fail_msg("check failed: %s", why);
}

static uint64_t used_of(const lmc_l1_memory *m)
{
    uint64_t used, total;
    lmc_l1_memory_usage(m, &used, &total);
    return used;
}

static uint64_t alloc_or_fail(lmc_l1_memory *m, uint64_t size)
{
    uint64_t off = UINT64_MAX;
    assert_true(lmc_l1_memory_alloc(m, size, &off));
    return off;
}

/* Capture warnings so the bogus-free tests can assert on them quietly. */
static int g_warnings;
static void count_sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    (void)msg;
    (void)ud;
    if (level == LMC_LOG_WARNING && strcmp(component, "l1") == 0)
        g_warnings++;
}

static void capture_warnings(void)
{
    g_warnings = 0;
    lmc_log_set_sink(count_sink, NULL);
}

static void release_warnings(void)
{
    lmc_log_set_sink(NULL, NULL);
}

/* ---------------------------------------------------------------------- */
/* Creation and configuration                                              */
/* ---------------------------------------------------------------------- */

static void test_create_rounds_size_up_to_alignment(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(10 * U + 1, U);
    assert_int_equal(lmc_l1_memory_capacity(m), 11 * U);
    assert_int_equal(lmc_l1_memory_align(m), U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 11 * U);
    assert_null(lmc_l1_memory_shm_path(m));
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_create_zero_align_means_4096(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(100, 0);
    assert_int_equal(lmc_l1_memory_align(m), 4096);
    assert_int_equal(lmc_l1_memory_capacity(m), 4096);
    lmc_l1_memory_destroy(m);
}

static void test_pool_memory_is_writable_and_base_aligned(void **state)
{
    (void)state;
    const uint64_t aligns[] = {64, 4096, 2u << 20};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
        lmc_l1_memory *m = make_pool(4u << 20, aligns[i]);
        uint8_t *base = lmc_l1_memory_base(m);
        assert_non_null(base);
        assert_int_equal((uintptr_t)base % aligns[i], 0);
        uint64_t cap = lmc_l1_memory_capacity(m);
        base[0] = 1;
        base[cap - 1] = 2;
        assert_int_equal(base[0] + base[cap - 1], 3);
        lmc_l1_memory_destroy(m);
    }
}

static void test_large_pool_is_reserved_lazily(void **state)
{
    (void)state;
    /* 64 GiB: only possible because the pages are never touched. */
    lmc_l1_memory *m = make_pool(64ull << 30, U);
    uint64_t off = alloc_or_fail(m, 1u << 20);
    lmc_l1_memory_base(m)[off] = 7;
    assert_int_equal(used_of(m), 1u << 20);
    lmc_l1_memory_destroy(m);
}

/* Pages of [p, p + n) resident now (mincore). */
static size_t resident_pages(const uint8_t *p, size_t n)
{
    size_t pages = n / 4096, k = 0;
    unsigned char *v = malloc(pages);
    assert_int_equal(mincore((void *)p, n, v), 0);
    for (size_t i = 0; i < pages; i++)
        k += v[i] & 1;
    free(v);
    return k;
}

/* populate faults pages in and changes no byte; its range is clamped to the pool. */
static void test_populate_faults_pages_in_and_keeps_their_bytes(void **state)
{
    (void)state;
    enum { SIZE = 8u << 20 };
    lmc_l1_memory *m = make_pool(SIZE, U);
    uint8_t *base = lmc_l1_memory_base(m);
    base[100] = 0x5a;
    base[SIZE - 1] = 0xa5;
    lmc_error err;
    lmc_status st = lmc_l1_memory_populate(m, 4096 + 10, 3 * 4096, &err);
    if (st == LMC_ERR_UNSUPPORTED) {
        lmc_l1_memory_destroy(m);
        skip(); /* a kernel before 5.14 */
    }
    assert_int_equal(st, LMC_OK);
    assert_true(resident_pages(base + 4096, 4 * 4096) >= 3);
    assert_int_equal(lmc_l1_memory_populate(m, 0, UINT64_MAX, &err), LMC_OK); /* clamped */
    assert_int_equal(resident_pages(base, SIZE), SIZE / 4096);
    assert_int_equal(base[100], 0x5a);
    assert_int_equal(base[SIZE - 1], 0xa5);
    assert_int_equal(base[200], 0);
    assert_int_equal(lmc_l1_memory_populate(m, SIZE, 1, &err), LMC_OK); /* nothing left */
    assert_int_equal(lmc_l1_memory_populate(m, SIZE + 1, 1, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "past the pool"));
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void expect_invalid(uint64_t size, uint64_t align, const char *shm, const char *needle)
{
    lmc_l1_memory_config cfg = {.size_bytes = size, .align_bytes = align, .shm_name = shm};
    lmc_l1_memory *m = (lmc_l1_memory *)0x1;
    lmc_error err;
    lmc_error_clear(&err);
    assert_int_equal(lmc_l1_memory_create(&cfg, &m, &err), LMC_ERR_INVALID);
    assert_null(m);
    if (strstr(err.msg, needle) == NULL)
        fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_create_rejects_invalid_configs(void **state)
{
    (void)state;
    expect_invalid(0, U, NULL, "size_bytes must be > 0");
    expect_invalid(U, 100, NULL, "align_bytes 100 is not a power of two");
    expect_invalid(U, 32, NULL, "align_bytes 32 is less than 64");
    expect_invalid(U, 1, NULL, "align_bytes 1 is less than 64");
    expect_invalid(UINT64_MAX, U, NULL, "size_bytes 18446744073709551615 is too large");
    expect_invalid(U, U, "a/b", "shm_name 'a/b' contains '/'");
    expect_invalid(U, U, "/", "shm_name '/' is empty");
    char longname[300];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    expect_invalid(U, U, longname, "is too long");

    lmc_l1_memory *m = NULL;
    lmc_error err;
    assert_int_equal(lmc_l1_memory_create(NULL, &m, &err), LMC_ERR_INVALID);
}

static void test_create_mmap_failure_is_io_error(void **state)
{
    (void)state;
    /* 2^62 bytes: passes validation, but no address space is that large. */
    lmc_l1_memory_config cfg = {.size_bytes = 1ull << 62, .align_bytes = U, .shm_name = NULL};
    lmc_l1_memory *m = NULL;
    lmc_error err;
    assert_int_equal(lmc_l1_memory_create(&cfg, &m, &err), LMC_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(err.msg, "mmap"));
}

/* ---------------------------------------------------------------------- */
/* Shared memory                                                           */
/* ---------------------------------------------------------------------- */

static bool shm_exists(const char *bare)
{
    char path[256];
    snprintf(path, sizeof(path), "/dev/shm/lmcache_l1_pool_%s", bare);
    return access(path, F_OK) == 0;
}

static void check_shm_pool(const char *given, const char *bare)
{
    lmc_l1_memory_config cfg = {.size_bytes = 16 * U, .align_bytes = U, .shm_name = given};
    lmc_l1_memory *m = NULL;
    lmc_error err;
    assert_int_equal(lmc_l1_memory_create(&cfg, &m, &err), LMC_OK);
    assert_true(shm_exists(bare));
    char want[256];
    snprintf(want, sizeof(want), "/lmcache_l1_pool_%s", bare);
    assert_string_equal(lmc_l1_memory_shm_path(m), want);

    uint64_t off = alloc_or_fail(m, 100);
    memset(lmc_l1_memory_base(m) + off, 0xab, 100);
    assert_int_equal(lmc_l1_memory_base(m)[off + 99], 0xab);
    assert_consistent(m);

    lmc_l1_memory_destroy(m);
    assert_false(shm_exists(bare));
}

static void test_shm_pool_without_prefix(void **state)
{
    (void)state;
    char bare[64];
    snprintf(bare, sizeof(bare), "utest_%d_a", (int)getpid());
    check_shm_pool(bare, bare);
}

static void test_shm_pool_with_prefix(void **state)
{
    (void)state;
    char bare[64], given[96];
    snprintf(bare, sizeof(bare), "utest_%d_b", (int)getpid());
    snprintf(given, sizeof(given), "lmcache_l1_pool_%s", bare);
    check_shm_pool(given, bare);
}

static void test_shm_pool_replaces_stale_segment(void **state)
{
    (void)state;
    char bare[64];
    snprintf(bare, sizeof(bare), "utest_%d_c", (int)getpid());
    char path[256];
    snprintf(path, sizeof(path), "/dev/shm/lmcache_l1_pool_%s", bare);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("stale", f);
    fclose(f);
    capture_warnings();
    check_shm_pool(bare, bare);
    release_warnings();
    assert_int_equal(g_warnings, 1);
}

/* ---------------------------------------------------------------------- */
/* Single allocations                                                      */
/* ---------------------------------------------------------------------- */

static void test_alloc_rounds_to_alignment(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(1u << 20, 64);
    assert_int_equal(lmc_l1_memory_slot_size(m, 1), 64);
    assert_int_equal(lmc_l1_memory_slot_size(m, 64), 64);
    assert_int_equal(lmc_l1_memory_slot_size(m, 65), 128);
    assert_int_equal(lmc_l1_memory_slot_size(m, 0), 64);
    assert_int_equal(lmc_l1_memory_slot_size(m, UINT64_MAX), UINT64_MAX);

    uint64_t a = alloc_or_fail(m, 1);
    uint64_t b = alloc_or_fail(m, 65);
    uint64_t c = alloc_or_fail(m, 64);
    assert_int_equal(a, 0);
    assert_int_equal(b, 64);
    assert_int_equal(c, 192);
    assert_int_equal(a % 64 + b % 64 + c % 64, 0);
    assert_int_equal(used_of(m), 64 + 128 + 64);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_alloc_splits_the_front_of_a_block(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(16 * U, U);
    assert_int_equal(alloc_or_fail(m, 3 * U), 0);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 13 * U);
    assert_int_equal(alloc_or_fail(m, U), 3 * U);
    assert_int_equal(lmc_l1_memory_largest_free(m), 12 * U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_alloc_exact_fit_removes_block(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(4 * U, U);
    assert_int_equal(alloc_or_fail(m, 4 * U), 0);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 0);
    assert_int_equal(lmc_l1_memory_largest_free(m), 0);
    uint64_t off;
    assert_false(lmc_l1_memory_alloc(m, 1, &off));
    assert_consistent(m);
    lmc_l1_memory_free(m, 0, 4 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(used_of(m), 0);
    lmc_l1_memory_destroy(m);
}

static void test_alloc_fails_when_no_block_is_large_enough(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(8 * U, U);
    uint64_t off[8];
    for (int i = 0; i < 8; i++)
        off[i] = alloc_or_fail(m, U);
    /* Free every other unit: 4 units free, none adjacent. */
    for (int i = 0; i < 8; i += 2)
        lmc_l1_memory_free(m, off[i], U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 4);
    uint64_t x = 123;
    assert_false(lmc_l1_memory_alloc(m, 2 * U, &x));
    assert_int_equal(x, 123);
    assert_false(lmc_l1_memory_alloc(m, 9 * U, &x));
    assert_int_equal(used_of(m), 4 * U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

/* Fill the pool with one-unit slots: unit i at offset i * U. */
static lmc_l1_memory *full_pool(unsigned units)
{
    lmc_l1_memory *m = make_pool((uint64_t)units * U, U);
    for (unsigned i = 0; i < units; i++)
        assert_int_equal(alloc_or_fail(m, U), (uint64_t)i * U);
    return m;
}

static void test_free_merges_with_previous(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(8);
    lmc_l1_memory_free(m, 2 * U, U);
    lmc_l1_memory_free(m, 3 * U, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 2 * U);
    assert_int_equal(alloc_or_fail(m, 2 * U), 2 * U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_free_merges_with_next(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(8);
    lmc_l1_memory_free(m, 3 * U, U);
    lmc_l1_memory_free(m, 2 * U, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 2 * U);
    assert_int_equal(alloc_or_fail(m, 2 * U), 2 * U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_free_merges_with_both_neighbours(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(8);
    lmc_l1_memory_free(m, 2 * U, U);
    lmc_l1_memory_free(m, 4 * U, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 2);
    lmc_l1_memory_free(m, 3 * U, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 3 * U);
    assert_consistent(m);
    assert_int_equal(alloc_or_fail(m, 3 * U), 2 * U);
    lmc_l1_memory_destroy(m);
}

static void test_free_merges_with_pool_tail(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(8 * U, U);
    uint64_t a = alloc_or_fail(m, U);
    uint64_t b = alloc_or_fail(m, U);
    lmc_l1_memory_free(m, b, U); /* joins the free tail [2U, 8U) */
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    lmc_l1_memory_free(m, a, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 8 * U);
    assert_int_equal(used_of(m), 0);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_alloc_is_first_fit_by_address(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(16);
    /* Holes: [1,2) one unit, [4,7) three units, [10,12) two units. */
    lmc_l1_memory_free(m, 1 * U, U);
    for (int i = 4; i < 7; i++)
        lmc_l1_memory_free(m, (uint64_t)i * U, U);
    for (int i = 10; i < 12; i++)
        lmc_l1_memory_free(m, (uint64_t)i * U, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 3);

    /* Two units: the first hole that fits is [4,7), not the best fit [10,12). */
    assert_int_equal(alloc_or_fail(m, 2 * U), 4 * U);
    /* One unit: the lowest hole, [1,2). */
    assert_int_equal(alloc_or_fail(m, U), 1 * U);
    /* One unit again: the remainder of [4,7). */
    assert_int_equal(alloc_or_fail(m, U), 6 * U);
    assert_int_equal(alloc_or_fail(m, 2 * U), 10 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 0);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

/* ---------------------------------------------------------------------- */
/* Batches                                                                 */
/* ---------------------------------------------------------------------- */

/* A pool of 32 units with free blocks of 1, 3, 5 and 2 units (11 units free). */
static lmc_l1_memory *fragmented_pool(void)
{
    lmc_l1_memory *m = full_pool(32);
    const int holes[][2] = {{2, 1}, {6, 3}, {12, 5}, {20, 2}};
    for (size_t h = 0; h < 4; h++)
        for (int i = 0; i < holes[h][1]; i++)
            lmc_l1_memory_free(m, (uint64_t)(holes[h][0] + i) * U, U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 4);
    assert_int_equal(used_of(m), 21 * U);
    return m;
}

static void test_max_batch_on_fragmented_pool(void **state)
{
    (void)state;
    lmc_l1_memory *m = fragmented_pool();
    assert_int_equal(lmc_l1_memory_max_batch(m, U, 100), 11);
    assert_int_equal(lmc_l1_memory_max_batch(m, U, 11), 11);
    assert_int_equal(lmc_l1_memory_max_batch(m, U, 4), 4);
    assert_int_equal(lmc_l1_memory_max_batch(m, U, 0), 0);
    /* Two-unit slots: 0 + 1 + 2 + 1. */
    assert_int_equal(lmc_l1_memory_max_batch(m, 2 * U, 100), 4);
    assert_int_equal(lmc_l1_memory_max_batch(m, 2 * U - 1, 100), 4);
    /* Three-unit slots: 0 + 1 + 1 + 0. */
    assert_int_equal(lmc_l1_memory_max_batch(m, 3 * U, 100), 2);
    assert_int_equal(lmc_l1_memory_max_batch(m, 5 * U, 100), 1);
    assert_int_equal(lmc_l1_memory_max_batch(m, 6 * U, 100), 0);
    /* Nothing allocated by asking. */
    assert_int_equal(used_of(m), 21 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 4);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_batched_alloc_spans_several_blocks(void **state)
{
    (void)state;
    lmc_l1_memory *m = fragmented_pool();
    uint64_t off[4];
    assert_true(lmc_l1_memory_batched_alloc(m, 2 * U, 4, off));
    /* Greedy by address: [6,9) gives 6; [12,17) gives 12, 14; [20,22) gives 20. */
    assert_int_equal(off[0], 6 * U);
    assert_int_equal(off[1], 12 * U);
    assert_int_equal(off[2], 14 * U);
    assert_int_equal(off[3], 20 * U);
    assert_int_equal(used_of(m), 29 * U);
    /* Left over: units 2, 8 and 16. */
    assert_int_equal(lmc_l1_memory_free_blocks(m), 3);
    assert_int_equal(lmc_l1_memory_max_batch(m, U, 100), 3);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_batched_alloc_takes_partial_block_last(void **state)
{
    (void)state;
    lmc_l1_memory *m = fragmented_pool();
    uint64_t off[6];
    assert_true(lmc_l1_memory_batched_alloc(m, U, 6, off));
    const uint64_t want[6] = {2, 6, 7, 8, 12, 13};
    for (int i = 0; i < 6; i++)
        assert_int_equal(off[i], want[i] * U);
    /* [14,17) and [20,22) stay free. */
    assert_int_equal(lmc_l1_memory_free_blocks(m), 2);
    assert_int_equal(lmc_l1_memory_largest_free(m), 3 * U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_batched_alloc_is_all_or_nothing(void **state)
{
    (void)state;
    lmc_l1_memory *m = fragmented_pool();
    uint64_t off[12];
    for (int i = 0; i < 12; i++)
        off[i] = UINT64_MAX;
    assert_false(lmc_l1_memory_batched_alloc(m, U, 12, off)); /* 11 fit */
    assert_false(lmc_l1_memory_batched_alloc(m, 2 * U, 5, off));
    for (int i = 0; i < 12; i++)
        assert_int_equal(off[i], UINT64_MAX);
    /* The list is unchanged: same usage, same blocks, same first fits. */
    assert_int_equal(used_of(m), 21 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 4);
    assert_int_equal(lmc_l1_memory_max_batch(m, U, 100), 11);
    assert_consistent(m);
    assert_true(lmc_l1_memory_batched_alloc(m, U, 11, off));
    assert_int_equal(lmc_l1_memory_free_blocks(m), 0);
    assert_int_equal(used_of(m), 32 * U);
    lmc_l1_memory_destroy(m);
}

static void test_batched_alloc_of_zero_slots_succeeds(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(2);
    assert_true(lmc_l1_memory_batched_alloc(m, U, 0, NULL));
    assert_int_equal(used_of(m), 2 * U);
    lmc_l1_memory_destroy(m);
}

static void test_batched_free_merges_runs(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(16 * U, U);
    uint64_t off[10];
    assert_true(lmc_l1_memory_batched_alloc(m, 100, 10, off));
    for (int i = 0; i < 10; i++)
        assert_int_equal(off[i], (uint64_t)i * U);
    /* Free 7, 1, 2, 8, 0 (unsorted): runs [0,3) and [7,9). */
    const uint64_t some[] = {7 * U, 1 * U, 2 * U, 8 * U, 0};
    lmc_l1_memory_batched_free(m, some, 5, 100);
    assert_int_equal(used_of(m), 5 * U);
    /* Blocks: [0,3), [7,9) and the tail [10,16). */
    assert_int_equal(lmc_l1_memory_free_blocks(m), 3);
    assert_consistent(m);
    assert_int_equal(alloc_or_fail(m, 3 * U), 0);
    assert_int_equal(alloc_or_fail(m, 2 * U), 7 * U);
    /* Free the rest in reverse: all merges into one block again. */
    const uint64_t rest[] = {8 * U, 7 * U, 9 * U, 6 * U, 5 * U, 4 * U, 3 * U, 2 * U, 1 * U, 0};
    lmc_l1_memory_batched_free(m, rest, 10, 100);
    assert_int_equal(used_of(m), 0);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_batched_free_of_many_slots(void **state)
{
    (void)state;
    /* More than the insertion-sort cutoff, shuffled. */
    enum { N = 500 };
    lmc_l1_memory *m = make_pool(N * U, U);
    static uint64_t off[N];
    assert_true(lmc_l1_memory_batched_alloc(m, U, N, off));
    srand(7);
    for (int i = N - 1; i > 0; i--) {
        int j = rand() % (i + 1);
        uint64_t t = off[i];
        off[i] = off[j];
        off[j] = t;
    }
    lmc_l1_memory_batched_free(m, off, N, U);
    assert_int_equal(used_of(m), 0);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

/* ---------------------------------------------------------------------- */
/* Bogus frees                                                             */
/* ---------------------------------------------------------------------- */

static void test_double_free_is_ignored(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(8);
    lmc_l1_memory_free(m, 3 * U, U);
    capture_warnings();
    lmc_l1_memory_free(m, 3 * U, U);
    release_warnings();
    assert_int_equal(g_warnings, 1);
    assert_int_equal(used_of(m), 7 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_bogus_frees_are_ignored(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(8);
    lmc_l1_memory_free(m, 3 * U, U);
    lmc_l1_memory_free(m, 4 * U, U);
    capture_warnings();
    lmc_l1_memory_free(m, 2 * U, 2 * U); /* half allocated, half free */
    lmc_l1_memory_free(m, 4 * U, 3 * U); /* starts inside the free block */
    lmc_l1_memory_free(m, 8 * U, U);     /* past the end */
    lmc_l1_memory_free(m, 7 * U, 2 * U); /* runs past the end */
    lmc_l1_memory_free(m, U + 1, U);     /* misaligned */
    lmc_l1_memory_free(m, UINT64_MAX - U + 1, U);
    lmc_l1_memory_free(m, 0, UINT64_MAX); /* larger than the pool */
    release_warnings();
    assert_int_equal(g_warnings, 7);
    assert_int_equal(used_of(m), 6 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_free_more_than_used_is_ignored(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(8 * U, U);
    uint64_t a = alloc_or_fail(m, U);
    capture_warnings();
    lmc_l1_memory_free(m, a, 2 * U); /* [0,2U) but only U is in use */
    release_warnings();
    assert_int_equal(g_warnings, 1);
    assert_int_equal(used_of(m), U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

static void test_batched_free_skips_bogus_slots_and_frees_the_rest(void **state)
{
    (void)state;
    lmc_l1_memory *m = full_pool(8);
    lmc_l1_memory_free(m, 3 * U, U);
    /* 2 and 4 are valid; 3 is already free; 4 twice; 9 and 1+1 are outside/misaligned. */
    const uint64_t batch[] = {4 * U, 3 * U, 2 * U, 4 * U, 9 * U, U + 1};
    capture_warnings();
    lmc_l1_memory_batched_free(m, batch, 6, U);
    release_warnings();
    assert_int_equal(g_warnings, 4);
    assert_int_equal(used_of(m), 5 * U);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    assert_int_equal(lmc_l1_memory_largest_free(m), 3 * U);
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

/* ---------------------------------------------------------------------- */
/* Random operations against a model                                       */
/* ---------------------------------------------------------------------- */

#define MODEL_UNITS 512

typedef struct model {
    uint8_t used[MODEL_UNITS]; /* 1 when the unit is allocated */
    uint64_t used_bytes;
} model;

typedef struct live {
    uint64_t off;
    uint64_t units;
} live;

static uint64_t rng_state = 0x1234567890abcdefULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* First unit of the lowest free run of at least k units, or -1. */
static long model_first_fit(const model *md, uint64_t k)
{
    uint64_t run = 0;
    for (long i = 0; i < MODEL_UNITS; i++) {
        run = md->used[i] ? 0 : run + 1;
        if (run == k)
            return i - (long)k + 1;
    }
    return -1;
}

static size_t model_runs(const model *md)
{
    size_t runs = 0;
    for (int i = 0; i < MODEL_UNITS; i++)
        if (!md->used[i] && (i == 0 || md->used[i - 1]))
            runs++;
    return runs;
}

/* Greedy carve over free runs: fills out[] (unit numbers); returns how many. */
static size_t model_batch(const model *md, uint64_t k, size_t n, uint64_t *out)
{
    size_t got = 0;
    int i = 0;
    while (i < MODEL_UNITS && got < n) {
        if (md->used[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j < MODEL_UNITS && !md->used[j])
            j++;
        for (uint64_t s = (uint64_t)i; s + k <= (uint64_t)j && got < n; s += k)
            out[got++] = s;
        i = j;
    }
    return got;
}

static void model_mark(model *md, uint64_t unit, uint64_t k, uint8_t v)
{
    for (uint64_t u = unit; u < unit + k; u++) {
        assert_int_not_equal(md->used[u], v);
        md->used[u] = v;
    }
    if (v)
        md->used_bytes += k * U;
    else
        md->used_bytes -= k * U;
}

static void test_random_ops_match_model(void **state)
{
    (void)state;
    lmc_l1_memory *m = make_pool(MODEL_UNITS * U, U);
    static model md;
    static live lv[MODEL_UNITS];
    memset(&md, 0, sizeof(md));
    size_t nlive = 0;

    for (int op = 0; op < 10000; op++) {
        uint64_t r = rnd() % 100;
        /* Sizes mostly one to four units, bytes not a multiple of the unit. */
        uint64_t k = 1 + rnd() % (r < 5 ? 40 : 4);
        uint64_t bytes = k * U - rnd() % U;
        if (r < 45) {
            uint64_t off = UINT64_MAX;
            long want = model_first_fit(&md, k);
            bool ok = lmc_l1_memory_alloc(m, bytes, &off);
            assert_int_equal(ok, want >= 0);
            if (ok) {
                assert_int_equal(off, (uint64_t)want * U);
                model_mark(&md, off / U, k, 1);
                lv[nlive++] = (live){off, k};
            }
        } else if (r < 55) {
            size_t n = 1 + rnd() % 16;
            uint64_t want[64], got[64];
            size_t fit = model_batch(&md, k, n, want);
            assert_int_equal(lmc_l1_memory_max_batch(m, bytes, n), fit);
            bool ok = lmc_l1_memory_batched_alloc(m, bytes, n, got);
            assert_int_equal(ok, fit == n);
            if (ok) {
                for (size_t i = 0; i < n; i++) {
                    assert_int_equal(got[i], want[i] * U);
                    model_mark(&md, want[i], k, 1);
                    lv[nlive++] = (live){got[i], k};
                }
            }
        } else if (r < 90 && nlive > 0) {
            size_t i = (size_t)(rnd() % nlive);
            lmc_l1_memory_free(m, lv[i].off, lv[i].units * U - rnd() % U);
            model_mark(&md, lv[i].off / U, lv[i].units, 0);
            lv[i] = lv[--nlive];
        } else if (nlive > 0) {
            /* Batched free of every live slot of one size. */
            uint64_t units = lv[rnd() % nlive].units;
            uint64_t offs[MODEL_UNITS];
            size_t n = 0;
            for (size_t i = 0; i < nlive;) {
                if (lv[i].units == units) {
                    offs[n++] = lv[i].off;
                    model_mark(&md, lv[i].off / U, units, 0);
                    lv[i] = lv[--nlive];
                } else {
                    i++;
                }
            }
            lmc_l1_memory_batched_free(m, offs, n, units * U);
        }
        assert_int_equal(used_of(m), md.used_bytes);
        assert_int_equal(lmc_l1_memory_free_blocks(m), model_runs(&md));
        assert_consistent(m);
    }
    assert_consistent(m);
    lmc_l1_memory_destroy(m);
}

/* Many holes: the tree must stay consistent with thousands of free blocks. */
static void test_many_free_blocks(void **state)
{
    (void)state;
    enum { N = 20000 };
    lmc_l1_memory *m = make_pool((uint64_t)N * 64, 64);
    static uint64_t off[N];
    assert_true(lmc_l1_memory_batched_alloc(m, 64, N, off));
    for (int i = 0; i < N; i += 2)
        lmc_l1_memory_free(m, off[i], 64);
    assert_int_equal(lmc_l1_memory_free_blocks(m), N / 2);
    assert_consistent(m);
    assert_int_equal(lmc_l1_memory_max_batch(m, 64, N), N / 2);
    assert_int_equal(lmc_l1_memory_max_batch(m, 128, N), 0);
    for (int i = 1; i < N; i += 4)
        lmc_l1_memory_free(m, off[i], 64);
    assert_int_equal(lmc_l1_memory_free_blocks(m), N / 4);
    assert_int_equal(lmc_l1_memory_max_batch(m, 192, N), N / 4);
    assert_consistent(m);
    /* First fit for three slots is the first merged block, at slot 0. */
    assert_int_equal(alloc_or_fail(m, 192), 0);
    lmc_l1_memory_destroy(m);
}

/* ---------------------------------------------------------------------- */
/* Threads                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct worker {
    lmc_l1_memory *m;
    unsigned id;
    int errors;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    uint8_t *base = lmc_l1_memory_base(w->m);
    uint64_t held[32];
    size_t n = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ULL * (w->id + 1);
    for (int it = 0; it < 20000; it++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if (n < 32 && (seed & 1)) {
            uint64_t off;
            if (lmc_l1_memory_alloc(w->m, U, &off)) {
                /* Tag the slot; another thread holding it would overwrite this. */
                memset(base + off, (int)w->id + 1, 64);
                held[n++] = off;
            }
        } else if (n > 0) {
            size_t i = (size_t)(seed >> 8) % n;
            for (int b = 0; b < 64; b++)
                if (base[held[i] + (uint64_t)b] != w->id + 1)
                    w->errors++;
            if ((seed & 2) && n >= 4) {
                lmc_l1_memory_batched_free(w->m, held + n - 4, 4, U);
                n -= 4;
            } else {
                lmc_l1_memory_free(w->m, held[i], U);
                held[i] = held[--n];
            }
        }
    }
    if (n > 0)
        lmc_l1_memory_batched_free(w->m, held, n, U);
    return NULL;
}

static void test_concurrent_alloc_free_keeps_pool_consistent(void **state)
{
    (void)state;
    enum { T = 4 };
    lmc_l1_memory *m = make_pool(100 * U, U); /* less than T * 32: contention */
    pthread_t th[T];
    worker w[T];
    for (unsigned i = 0; i < T; i++) {
        w[i] = (worker){m, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (unsigned i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].errors, 0);
    }
    assert_consistent(m);
    assert_int_equal(used_of(m), 0);
    assert_int_equal(lmc_l1_memory_free_blocks(m), 1);
    lmc_l1_memory_destroy(m);
}

static void test_a_live_segment_of_the_same_name_is_left_alone(void **state)
{
    (void)state;
    char bare[64];
    snprintf(bare, sizeof(bare), "utest_%d_live", (int)getpid());
    lmc_l1_memory_config cfg = {.size_bytes = 16 * U, .align_bytes = U, .shm_name = bare};
    lmc_l1_memory *a = NULL, *b = NULL;
    lmc_error err;
    assert_int_equal(lmc_l1_memory_create(&cfg, &a, &err), LMC_OK);
    memset(lmc_l1_memory_base(a), 0x5c, 64);
    char path[256];
    snprintf(path, sizeof(path), "/dev/shm/lmcache_l1_pool_%s", bare);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    /* A second server with the same --shm-name: refused, and the first one's pool stays. */
    assert_int_equal(lmc_l1_memory_create(&cfg, &b, &err), LMC_ERR_BUSY);
    assert_null(b);
    assert_non_null(strstr(err.msg, "is in use by a running server"));
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    assert_int_equal(lmc_l1_memory_base(a)[63], 0x5c);
    lmc_l1_memory_destroy(a);
    assert_false(shm_exists(bare));
    /* Once it is gone, the name is free again. */
    assert_int_equal(lmc_l1_memory_create(&cfg, &b, &err), LMC_OK);
    lmc_l1_memory_destroy(b);
    assert_false(shm_exists(bare));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rounds_size_up_to_alignment),
        cmocka_unit_test(test_create_zero_align_means_4096),
        cmocka_unit_test(test_pool_memory_is_writable_and_base_aligned),
        cmocka_unit_test(test_large_pool_is_reserved_lazily),
        cmocka_unit_test(test_populate_faults_pages_in_and_keeps_their_bytes),
        cmocka_unit_test(test_create_rejects_invalid_configs),
        cmocka_unit_test(test_create_mmap_failure_is_io_error),
        cmocka_unit_test(test_shm_pool_without_prefix),
        cmocka_unit_test(test_shm_pool_with_prefix),
        cmocka_unit_test(test_shm_pool_replaces_stale_segment),
        cmocka_unit_test(test_a_live_segment_of_the_same_name_is_left_alone),
        cmocka_unit_test(test_alloc_rounds_to_alignment),
        cmocka_unit_test(test_alloc_splits_the_front_of_a_block),
        cmocka_unit_test(test_alloc_exact_fit_removes_block),
        cmocka_unit_test(test_alloc_fails_when_no_block_is_large_enough),
        cmocka_unit_test(test_free_merges_with_previous),
        cmocka_unit_test(test_free_merges_with_next),
        cmocka_unit_test(test_free_merges_with_both_neighbours),
        cmocka_unit_test(test_free_merges_with_pool_tail),
        cmocka_unit_test(test_alloc_is_first_fit_by_address),
        cmocka_unit_test(test_max_batch_on_fragmented_pool),
        cmocka_unit_test(test_batched_alloc_spans_several_blocks),
        cmocka_unit_test(test_batched_alloc_takes_partial_block_last),
        cmocka_unit_test(test_batched_alloc_is_all_or_nothing),
        cmocka_unit_test(test_batched_alloc_of_zero_slots_succeeds),
        cmocka_unit_test(test_batched_free_merges_runs),
        cmocka_unit_test(test_batched_free_of_many_slots),
        cmocka_unit_test(test_double_free_is_ignored),
        cmocka_unit_test(test_bogus_frees_are_ignored),
        cmocka_unit_test(test_free_more_than_used_is_ignored),
        cmocka_unit_test(test_batched_free_skips_bogus_slots_and_frees_the_rest),
        cmocka_unit_test(test_random_ops_match_model),
        cmocka_unit_test(test_many_free_blocks),
        cmocka_unit_test(test_concurrent_alloc_free_keeps_pool_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
