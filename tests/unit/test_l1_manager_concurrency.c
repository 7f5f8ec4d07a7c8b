/*
 * test_l1_manager_concurrency.c -- the L1 manager under concurrent use
 * (runs under ThreadSanitizer in CI because of the _concurrency suffix).
 *
 * Four threads run write, read, delete, touch and status cycles on one
 * shared set of 64 keys over a 32-slot pool (so reservations also run out
 * of memory), with the real clock. Each thread releases every lock it
 * takes. The threads check what the locks promise while they hold them:
 * a read-locked object is never being written (its bytes are uniform, as
 * every writer fills the whole object with one byte), unsafe_read works
 * while the lock is held, and each release succeeds because no one else
 * can take a lock away (nothing here deletes with force). Afterwards the
 * allocator is consistent, no lock is left and the listener's event counts
 * agree with what the threads did.
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
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "storage/l1_manager.h"

#define NTHREADS 4
#define NKEYS 64
#define ITERATIONS 20000
#define SLOT 4096u
#define NSLOTS 32u
#define OBJ_BYTES 1024u
#define MAX_BATCH 4

/* Keys per event type, counted by a thread-safe listener. */
typedef struct event_counts {
    atomic_ullong keys[LMC_L1_EV_ACCESSED + 1];
} event_counts;

static void count_event(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    (void)keys;
    event_counts *c = ud;
    atomic_fetch_add(&c->keys[ev], (unsigned long long)n);
}

typedef struct shared {
    lmc_l1_manager *l1;
    lmc_layout_desc layout;
    lmc_object_key keys[NKEYS];
} shared;

typedef struct worker {
    shared *sh;
    unsigned id;
    pthread_t thread;
    uint64_t rng;
    /* What this thread did successfully, to compare with the listener. */
    uint64_t finished_writes, fwrr, reserved_reads, touched;
    uint64_t ops[6];
    uint64_t failures;
    char first_failure[512];
} worker;

static uint64_t rnd(worker *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static void failure(worker *w, const char *what, lmc_l1_error e)
{
    if (w->failures++ == 0)
        snprintf(w->first_failure, sizeof(w->first_failure), "thread %u: %s (%s)", w->id, what,
                 lmc_l1_error_name(e));
}

/* A random batch of distinct keys. */
static size_t pick(worker *w, lmc_object_key *out)
{
    size_t n = 1 + rnd(w) % MAX_BATCH;
    uint32_t first = (uint32_t)(rnd(w) % NKEYS);
    uint32_t stride = 1 + (uint32_t)(rnd(w) % 7);
    for (size_t i = 0; i < n; i++)
        out[i] = w->sh->keys[(first + i * stride) % NKEYS];
    return n;
}

static bool uniform(const lmc_memory_obj *obj)
{
    for (uint64_t i = 1; i < obj->size; i++) {
        if (obj->data[i] != obj->data[0])
            return false;
    }
    return true;
}

static void write_cycle(worker *w)
{
    lmc_object_key keys[MAX_BATCH];
    size_t n = pick(w, keys);
    bool temp[MAX_BATCH];
    for (size_t i = 0; i < n; i++)
        temp[i] = rnd(w) % 8 == 0;
    lmc_write_mode mode = (lmc_write_mode)(rnd(w) % 3);
    lmc_l1_error errs[MAX_BATCH];
    lmc_memory_obj objs[MAX_BATCH];
    lmc_l1_reserve_write(w->sh->l1, keys, n, temp, &w->sh->layout, mode, errs, objs);
    for (size_t i = 0; i < n; i++) {
        if (errs[i] == LMC_L1_KEY_NOT_WRITABLE || errs[i] == LMC_L1_OUT_OF_MEMORY)
            continue;
        if (errs[i] != LMC_L1_SUCCESS) {
            failure(w, "reserve_write", errs[i]);
            continue;
        }
        if (objs[i].size != OBJ_BYTES || objs[i].phys_size != SLOT)
            failure(w, "reserve_write: object size", errs[i]);
        memset(objs[i].data, (int)(rnd(w) & 0xff), OBJ_BYTES);
        lmc_l1_error e;
        if (temp[i]) {
            /* The prefetch path: publish and read-lock in one step. (temp[i]
             * only marks fresh objects; an in-place one keeps its flag.) */
            lmc_memory_obj r;
            lmc_l1_finish_write_and_reserve_read(w->sh->l1, &keys[i], 1, 0, &e, &r);
            if (e != LMC_L1_SUCCESS) {
                failure(w, "finish_write_and_reserve_read", e);
                continue;
            }
            w->fwrr++;
            if (r.offset != objs[i].offset || !uniform(&r))
                failure(w, "finish_write_and_reserve_read: object changed", e);
            lmc_l1_finish_read(w->sh->l1, &keys[i], 1, 0, &e);
            if (e != LMC_L1_SUCCESS)
                failure(w, "finish_read after finish_write_and_reserve_read", e);
        } else {
            lmc_l1_finish_write(w->sh->l1, &keys[i], 1, &e);
            if (e != LMC_L1_SUCCESS)
                failure(w, "finish_write", e);
            else
                w->finished_writes++;
        }
    }
}

static void read_cycle(worker *w)
{
    lmc_object_key keys[MAX_BATCH];
    size_t n = pick(w, keys);
    uint32_t extra = (uint32_t)(rnd(w) % 3);
    lmc_l1_error errs[MAX_BATCH];
    lmc_memory_obj objs[MAX_BATCH];
    lmc_l1_reserve_read(w->sh->l1, keys, n, extra, errs, objs);
    for (size_t i = 0; i < n; i++) {
        if (errs[i] == LMC_L1_KEY_NOT_EXIST || errs[i] == LMC_L1_KEY_NOT_READABLE)
            continue;
        if (errs[i] != LMC_L1_SUCCESS) {
            failure(w, "reserve_read", errs[i]);
            continue;
        }
        w->reserved_reads++;
        if (objs[i].size != OBJ_BYTES || !uniform(&objs[i]))
            failure(w, "reserve_read: object is being written", errs[i]);
        lmc_l1_error e;
        lmc_memory_obj again;
        lmc_l1_unsafe_read(w->sh->l1, &keys[i], 1, &e, &again);
        if (e != LMC_L1_SUCCESS || again.offset != objs[i].offset)
            failure(w, "unsafe_read while holding a read lock", e);
        if (lmc_l1_read_lock_count(w->sh->l1, &keys[i]) < 1 + extra)
            failure(w, "read_lock_count below the locks held", LMC_L1_SUCCESS);
        lmc_l1_finish_read(w->sh->l1, &keys[i], 1, extra, &e);
        if (e != LMC_L1_SUCCESS)
            failure(w, "finish_read", e);
    }
}

static void delete_cycle(worker *w)
{
    lmc_object_key keys[MAX_BATCH];
    size_t n = pick(w, keys);
    lmc_l1_error errs[MAX_BATCH];
    lmc_l1_delete(w->sh->l1, keys, n, false, errs);
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != LMC_L1_SUCCESS && errs[i] != LMC_L1_KEY_NOT_EXIST &&
            errs[i] != LMC_L1_KEY_IS_LOCKED)
            failure(w, "delete", errs[i]);
    }
}

static void status_cycle(worker *w)
{
    char why[256];
    if (!lmc_l1_memcheck(w->sh->l1, why, sizeof(why)))
        failure(w, why, LMC_L1_SUCCESS);
    if (rnd(w) % 4 == 0) {
        lmc_json *j = lmc_l1_report_status(w->sh->l1);
        if (j == NULL || !lmc_json_get_bool(lmc_json_object_get(j, "is_healthy")))
            failure(w, "report_status", LMC_L1_SUCCESS);
        lmc_json_free(j);
    }
    if (rnd(w) % 50 == 0)
        (void)lmc_l1_clear(w->sh->l1, false); /* only unlocked objects: safe */
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    for (int it = 0; it < ITERATIONS; it++) {
        unsigned op = (unsigned)(rnd(w) % 100);
        if (op < 35) {
            write_cycle(w);
            w->ops[0]++;
        } else if (op < 75) {
            read_cycle(w);
            w->ops[1]++;
        } else if (op < 92) {
            delete_cycle(w);
            w->ops[2]++;
        } else if (op < 97) {
            lmc_object_key keys[MAX_BATCH];
            size_t n = pick(w, keys);
            lmc_l1_touch(w->sh->l1, keys, n);
            w->touched += n;
            w->ops[3]++;
        } else {
            status_cycle(w);
            w->ops[4]++;
        }
    }
    return NULL;
}

static int64_t status_int(const lmc_json *j, const char *field)
{
    const lmc_json *v = lmc_json_object_get(j, field);
    assert_non_null(v);
    return lmc_json_get_int(v);
}

static void test_concurrent_cycles_leave_no_locks_and_a_clean_pool(void **state)
{
    (void)state;
    shared *sh = calloc(1, sizeof(*sh));
    event_counts *counts = calloc(1, sizeof(*counts));
    worker *workers = calloc(NTHREADS, sizeof(*workers));
    assert_non_null(sh);
    assert_non_null(counts);
    assert_non_null(workers);
    for (size_t i = 0; i <= LMC_L1_EV_ACCESSED; i++)
        atomic_init(&counts->keys[i], 0);

    for (uint32_t i = 0; i < NKEYS; i++) {
        uint8_t hash[4] = {0, 0, (uint8_t)(i >> 8), (uint8_t)i};
        lmc_error err;
        if (lmc_object_key_make(&sh->keys[i], hash, 4, "conc-model", 0, 0, NULL, &err) != LMC_OK)
            fail_msg("lmc_object_key_make: %s", err.msg);
    }
    int64_t dims[1] = {OBJ_BYTES};
    assert_int_equal(lmc_layout_desc_make1(&sh->layout, dims, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    lmc_l1_manager_config cfg = {
        .memory = {.size_bytes = NSLOTS * SLOT, .align_bytes = SLOT, .shm_name = NULL},
        .write_ttl_seconds = 600,
        .read_ttl_seconds = 300,
        .clock = {.now_ns = NULL, .ud = NULL}, /* the real monotonic clock */
    };
    lmc_error err;
    if (lmc_l1_manager_create(&cfg, &sh->l1, &err) != LMC_OK)
        fail_msg("lmc_l1_manager_create: %s", err.msg);
    lmc_l1_listener listener = {.on_event = count_event, .ud = counts};
    assert_int_equal(lmc_l1_manager_add_listener(sh->l1, &listener), LMC_OK);

    for (unsigned t = 0; t < NTHREADS; t++) {
        workers[t].sh = sh;
        workers[t].id = t;
        workers[t].rng = 0x9e3779b97f4a7c15ull * (t + 1);
        assert_int_equal(pthread_create(&workers[t].thread, NULL, run_worker, &workers[t]), 0);
    }
    uint64_t finished_writes = 0, fwrr = 0, reserved_reads = 0, touched = 0;
    for (unsigned t = 0; t < NTHREADS; t++) {
        assert_int_equal(pthread_join(workers[t].thread, NULL), 0);
        if (workers[t].failures != 0)
            fail_msg("%llu unexpected results; first: %s", (unsigned long long)workers[t].failures,
                     workers[t].first_failure);
        for (int op = 0; op < 5; op++)
            assert_true(workers[t].ops[op] > 0);
        finished_writes += workers[t].finished_writes;
        fwrr += workers[t].fwrr;
        reserved_reads += workers[t].reserved_reads;
        touched += workers[t].touched;
    }
    /* The workload did real work on every path. */
    assert_true(finished_writes > 1000);
    assert_true(fwrr > 100);
    assert_true(reserved_reads > 1000);

    char why[256];
    if (!lmc_l1_memcheck(sh->l1, why, sizeof(why)))
        fail_msg("memcheck: %s", why);
    for (uint32_t i = 0; i < NKEYS; i++)
        assert_int_equal(lmc_l1_read_lock_count(sh->l1, &sh->keys[i]), 0);
    lmc_json *j = lmc_l1_report_status(sh->l1);
    assert_non_null(j);
    assert_int_equal(status_int(j, "write_locked_count"), 0);
    assert_int_equal(status_int(j, "read_locked_count"), 0);
    /* Temporary objects are freed by their last reader, and every one had one. */
    assert_int_equal(status_int(j, "temporary_count"), 0);
    size_t objects = lmc_l1_object_count(sh->l1);
    assert_int_equal(status_int(j, "total_object_count"), objects);
    assert_int_equal(status_int(j, "memory_used_bytes"), objects * SLOT);
    lmc_json_free(j);

    /* Every success produced exactly its event; allocations minus removals = live. */
    assert_int_equal(atomic_load(&counts->keys[LMC_L1_EV_WRITE_FINISHED]), finished_writes);
    assert_int_equal(atomic_load(&counts->keys[LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED]), fwrr);
    assert_int_equal(atomic_load(&counts->keys[LMC_L1_EV_RESERVED_READ]), reserved_reads);
    assert_int_equal(atomic_load(&counts->keys[LMC_L1_EV_READ_FINISHED]), reserved_reads + fwrr);
    assert_int_equal(atomic_load(&counts->keys[LMC_L1_EV_ACCESSED]), touched);
    assert_int_equal(atomic_load(&counts->keys[LMC_L1_EV_RESERVED_WRITE]) -
                         atomic_load(&counts->keys[LMC_L1_EV_DELETED]),
                     objects);

    lmc_l1_manager_destroy(sh->l1);
    free(workers);
    free(counts);
    free(sh);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_cycles_leave_no_locks_and_a_clean_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
