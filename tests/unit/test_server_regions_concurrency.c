/*
 * test_server_regions_concurrency.c -- unregister_kv_cache and
 * re-registrations racing the stores and retrieves that copy through the
 * region (server/regions.h: the reference count), with one copier, with
 * four, and with four whose chunks copy helpers share (copy_pool.h), against the server's handlers
 * without a transport. No copy may touch unmapped memory; every request either copies or fails
 * cleanly.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/region_test_util.h"

#define RACE_CHUNKS 8

typedef struct race {
    rt_fixture *f;
    rt_shm *big, *small;
    atomic_bool stop;
    atomic_size_t copies_ok;
} race;

typedef struct race_worker {
    race *r;
    int index;
} race_worker;

static void *race_copier(void *arg)
{
    race_worker *w = arg;
    race *r = w->r;
    rt_prompt fixed, fresh;
    rt_prompt_make(&fixed, RACE_CHUNKS, 1000);
    /* Blocks of its own: the copiers' copies never share client memory (a client's race). */
    int64_t first = (int64_t)w->index * RACE_CHUNKS * RT_BPC;
    for (uint32_t i = 0; !atomic_load(&r->stop); i++) {
        rt_prompt_make(&fresh, RACE_CHUNKS, 2000 + (uint32_t)w->index * 1000000 + i);
        if (rt_transfer(r->f, LMC_OP_STORE, rt_peer(1), 1, &fresh, "m", 1, 0, first) == LMC_OK)
            atomic_fetch_add(&r->copies_ok, 1);
        char rid[32];
        snprintf(rid, sizeof(rid), "race-%d-%u", w->index, i);
        lmc_ipc_key k = rt_key(&fixed, "m", 1, -1, rid);
        lmc_layout_desc layout;
        lmc_error err;
        int64_t dims[2] = {RT_CHUNK, r->big->bpt};
        lmc_layout_desc_make1(&layout, dims, 2, LMC_DTYPE_UINT8, NULL);
        if (lmc_engine_lookup(r->f->e, &k, &layout, &err) != LMC_OK)
            continue;
        size_t hits = 0;
        while (lmc_engine_query(r->f->e, rid, false, &hits) == LMC_SESSION_PENDING)
            lmc_sleep_ns(50 * 1000);
        rt_prompt hit = fixed;
        hit.n = hits * RT_CHUNK;
        lmc_status st =
            hits ? rt_transfer_as(r->f, LMC_OP_RETRIEVE, rid, rt_peer(1), 1, &hit, "m", 1, 0, first)
                 : LMC_ERR_NOT_FOUND;
        if (st == LMC_OK)
            atomic_fetch_add(&r->copies_ok, 1);
        else
            lmc_engine_free_lookup_locks(r->f->e, rid);
        lmc_engine_end_session(r->f->e, rid);
    }
    return NULL;
}

static void race_with(rt_fixture *f, int copiers)
{
    rt_shm big, small;
    rt_shm_make(&big, copiers * RACE_CHUNKS * RT_BPC, 16 * 1024); /* 256 KiB chunks */
    rt_shm_make(&small, RT_BPC, 16 * 1024);
    rt_fill(big.base, big.bytes, 7);
    assert_int_equal(rt_reg(f, rt_peer(1), 1, &big, "m", 1, 0), LMC_OK);
    rt_prompt fixed;
    rt_prompt_make(&fixed, RACE_CHUNKS, 1000);
    assert_int_equal(rt_transfer(f, LMC_OP_STORE, rt_peer(1), 1, &fixed, "m", 1, 0, 0), LMC_OK);

    race r = {.f = f, .big = &big, .small = &small};
    pthread_t t[8];
    race_worker w[8];
    for (int i = 0; i < copiers; i++) {
        w[i] = (race_worker){.r = &r, .index = i};
        assert_int_equal(pthread_create(&t[i], NULL, race_copier, &w[i]), 0);
    }
    /* Pull the region away, put it back elsewhere, replace it with another object. */
    uint64_t end = lmc_mono_ms() + 1500;
    for (int i = 0; lmc_mono_ms() < end || atomic_load(&r.copies_ok) < 10; i++) {
        lmc_error err;
        rt_who me = rt_peer(1);
        lmc_regions_unregister(f->rs, me.conn, 1, &err);
        lmc_sleep_ns(20 * 1000);
        const rt_shm *s = i % 3 == 0 ? &small : &big;
        lmc_kv_region_desc d = {.shm_name = (char *)s->name,
                                .num_blocks = s->num_blocks,
                                .tokens_per_block = RT_TPB,
                                .bytes_per_token = s->bpt,
                                .dtype = LMC_DTYPE_UINT8};
        assert_int_equal(lmc_regions_register(f->rs, me.conn, me.uid, 1, &d, "m", 1, 0, &err),
                         LMC_OK);
        lmc_sleep_ns(200 * 1000);
        if (i % 5 == 0)
            assert_int_equal(lmc_regions_register(f->rs, me.conn, me.uid, 1, &d, "m", 1, 0, &err),
                             LMC_OK);
        assert_true(lmc_mono_ms() < end + 30000);
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < copiers; i++)
        pthread_join(t[i], NULL);
    assert_true(atomic_load(&r.copies_ok) >= 10);
    lmc_error err;
    rt_who me = rt_peer(1);
    assert_int_equal(lmc_regions_unregister(f->rs, me.conn, 1, &err), LMC_OK);
    rt_shm_drop(&big);
    rt_shm_drop(&small);
}

static void test_unregister_racing_one_copier_never_touches_unmapped_memory(void **state)
{
    race_with(*state, 1);
}

static void test_unregister_racing_four_copiers_never_touches_unmapped_memory(void **state)
{
    race_with(*state, 4);
}

static void
test_unregister_racing_copiers_with_copy_helpers_never_touches_unmapped_memory(void **state)
{
    race_with(*state, 4); /* each request's chunks shared with the fixture's 2 helpers */
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_unregister_racing_one_copier_never_touches_unmapped_memory, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(
            test_unregister_racing_four_copiers_never_touches_unmapped_memory, rt_setup,
            rt_teardown),
        cmocka_unit_test_setup_teardown(
            test_unregister_racing_copiers_with_copy_helpers_never_touches_unmapped_memory,
            rt_setup_with_copy_helpers, rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
