/*
 * test_l1_manager.c -- unit tests for the L1 object table (l1_manager.c).
 *
 * Every test gets a fresh manager over a 64 KiB pool with 4 KiB alignment
 * (16 slots), a fake clock the test advances by hand (so TTL expiry is
 * tested without sleeping) and a recording listener. Objects are 1 KiB
 * (dims {1024} of uint8), so each takes exactly one slot. Keys are
 * f->keys[i], built from a 4-byte big-endian chunk hash i.
 *
 * The random test at the end replays ~2000 mixed operations against a
 * small reference model of spec/storage-manager.md sections 4-5 and checks
 * every per-key result, every read-lock count and the allocator after each
 * operation.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "core/ttl_lock.h"
#include "storage/l1_manager.h"

#define POOL_BYTES (64u * 1024u)
#define SLOT 4096u
#define NSLOTS (POOL_BYTES / SLOT)
#define OBJ_BYTES 1024u
#define NKEYS 300
#define WRITE_TTL_MS (600u * 1000u)
#define READ_TTL_MS (300u * 1000u)
#define START_MS 1000000u

/* ---------------------------------------------------------------------- */
/* Fixture: manager, fake clock, recording listener                        */
/* ---------------------------------------------------------------------- */

#define REC_MAX_EVENTS 64
#define REC_MAX_KEYS 256

typedef struct rec_event {
    lmc_l1_event ev;
    size_t n;
    lmc_object_key keys[REC_MAX_KEYS];
} rec_event;

typedef struct recorder {
    size_t n; /* events seen (may exceed REC_MAX_EVENTS; only the first are kept) */
    rec_event ev[REC_MAX_EVENTS];
} recorder;

typedef struct fixture {
    uint64_t now_ms;
    lmc_l1_manager *l1;
    lmc_layout_desc layout; /* 1 KiB -> one 4 KiB slot */
    lmc_object_key keys[NKEYS];
    recorder rec;
} fixture;

/* The fixture counts milliseconds; the clock reads nanoseconds. */
static uint64_t fake_now(void *ud)
{
    return *(const uint64_t *)ud * 1000000u;
}

static void record_event(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    recorder *r = ud;
    if (r->n < REC_MAX_EVENTS) {
        rec_event *e = &r->ev[r->n];
        e->ev = ev;
        e->n = n;
        memcpy(e->keys, keys, (n < REC_MAX_KEYS ? n : REC_MAX_KEYS) * sizeof(keys[0]));
    }
    r->n++;
}

static lmc_object_key key_of(uint32_t i)
{
    uint8_t hash[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
    lmc_object_key k;
    lmc_error err;
    if (lmc_object_key_make(&k, hash, sizeof(hash), "test-model", 0, 0, NULL, &err) != LMC_OK)
        fail_msg("lmc_object_key_make: %s", err.msg);
    return k;
}

static lmc_l1_manager *make_manager(fixture *f, uint64_t pool_bytes)
{
    lmc_l1_manager_config cfg = {
        .memory = {.size_bytes = pool_bytes, .align_bytes = SLOT, .shm_name = NULL},
        .write_ttl_seconds = 600,
        .read_ttl_seconds = 300,
        .clock = {.now_ns = fake_now, .ud = &f->now_ms},
    };
    lmc_l1_manager *l1 = NULL;
    lmc_error err;
    if (lmc_l1_manager_create(&cfg, &l1, &err) != LMC_OK)
        fail_msg("lmc_l1_manager_create: %s", err.msg);
    lmc_l1_listener listener = {.on_event = record_event, .ud = &f->rec};
    assert_int_equal(lmc_l1_manager_add_listener(l1, &listener), LMC_OK);
    return l1;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -1;
    f->now_ms = START_MS;
    for (uint32_t i = 0; i < NKEYS; i++)
        f->keys[i] = key_of(i);
    int64_t dims[1] = {OBJ_BYTES};
    if (lmc_layout_desc_make1(&f->layout, dims, 1, LMC_DTYPE_UINT8, NULL) != LMC_OK)
        return -1;
    f->l1 = make_manager(f, POOL_BYTES);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_l1_manager_destroy(f->l1);
    free(f);
    return 0;
}

static void advance_s(fixture *f, uint64_t seconds)
{
    f->now_ms += seconds * 1000u;
}

/* ---------------------------------------------------------------------- */
/* One-key helpers                                                         */
/* ---------------------------------------------------------------------- */

static lmc_l1_error reserve_temp1(fixture *f, uint32_t id, lmc_write_mode mode, bool temporary,
                                  lmc_memory_obj *obj)
{
    lmc_l1_error e = LMC_L1_SUCCESS;
    lmc_memory_obj scratch;
    lmc_l1_reserve_write(f->l1, &f->keys[id], 1, &temporary, &f->layout, mode, &e,
                         obj ? obj : &scratch);
    return e;
}

static lmc_l1_error reserve1(fixture *f, uint32_t id, lmc_write_mode mode, lmc_memory_obj *obj)
{
    return reserve_temp1(f, id, mode, false, obj);
}

static lmc_l1_error finish_write1(fixture *f, uint32_t id)
{
    lmc_l1_error e;
    lmc_l1_finish_write(f->l1, &f->keys[id], 1, &e);
    return e;
}

static lmc_l1_error reserve_read1(fixture *f, uint32_t id, uint32_t extra, lmc_memory_obj *obj)
{
    lmc_l1_error e;
    lmc_memory_obj scratch;
    lmc_l1_reserve_read(f->l1, &f->keys[id], 1, extra, &e, obj ? obj : &scratch);
    return e;
}

static lmc_l1_error unsafe_read1(fixture *f, uint32_t id, lmc_memory_obj *obj)
{
    lmc_l1_error e;
    lmc_memory_obj scratch;
    lmc_l1_unsafe_read(f->l1, &f->keys[id], 1, &e, obj ? obj : &scratch);
    return e;
}

static lmc_l1_error finish_read1(fixture *f, uint32_t id, uint32_t extra)
{
    lmc_l1_error e;
    lmc_l1_finish_read(f->l1, &f->keys[id], 1, extra, &e);
    return e;
}

static lmc_l1_error fwrr1(fixture *f, uint32_t id, uint32_t extra, lmc_memory_obj *obj)
{
    lmc_l1_error e;
    lmc_memory_obj scratch;
    lmc_l1_finish_write_and_reserve_read(f->l1, &f->keys[id], 1, extra, &e, obj ? obj : &scratch);
    return e;
}

static lmc_l1_error delete1(fixture *f, uint32_t id, bool force)
{
    lmc_l1_error e;
    lmc_l1_delete(f->l1, &f->keys[id], 1, force, &e);
    return e;
}

/* Reserve (mode new) and finish: the key is then ready (readable, unlocked). */
static lmc_memory_obj put_ready(fixture *f, uint32_t id)
{
    lmc_memory_obj obj;
    assert_int_equal(reserve1(f, id, LMC_WRITE_NEW, &obj), LMC_L1_SUCCESS);
    assert_int_equal(finish_write1(f, id), LMC_L1_SUCCESS);
    return obj;
}

static uint64_t used_bytes(fixture *f)
{
    uint64_t used, total;
    lmc_l1_get_memory_usage(f->l1, &used, &total);
    assert_int_equal(total, lmc_l1_memory_capacity(lmc_l1_manager_memory(f->l1)));
    return used;
}

static uint64_t read_locks(fixture *f, uint32_t id)
{
    return lmc_l1_read_lock_count(f->l1, &f->keys[id]);
}

static void assert_memcheck(fixture *f)
{
    char why[256] = "";
    if (!lmc_l1_memcheck(f->l1, why, sizeof(why)))
        fail_msg("memcheck failed: %s", why);
}

typedef struct evict_probe {
    const lmc_object_key *key;
    bool evictable;
} evict_probe;

static void probe_evictable(lmc_l1_manager *l1, void *ud)
{
    evict_probe *p = ud;
    p->evictable = lmc_l1_is_evictable_locked(l1, p->key);
}

static bool evictable(fixture *f, uint32_t id)
{
    evict_probe p = {.key = &f->keys[id], .evictable = false};
    lmc_l1_with_lock(f->l1, probe_evictable, &p);
    return p.evictable;
}

/* Gather keys by id into out (caller's array of at least n). */
static void gather(const fixture *f, const uint32_t *ids, size_t n, lmc_object_key *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f->keys[ids[i]];
}

/* ---------------------------------------------------------------------- */
/* Event assertions                                                        */
/* ---------------------------------------------------------------------- */

static void assert_event(const fixture *f, size_t at, lmc_l1_event ev, const uint32_t *ids,
                         size_t n)
{
    if (at >= f->rec.n)
        fail_msg("expected event #%zu, only %zu recorded", at, f->rec.n);
    const rec_event *e = &f->rec.ev[at];
    assert_int_equal(e->ev, ev);
    assert_int_equal(e->n, n);
    for (size_t i = 0; i < n; i++) {
        if (!lmc_object_key_equal(&e->keys[i], &f->keys[ids[i]]))
            fail_msg("event #%zu key %zu is not key %u", at, i, ids[i]);
    }
}

#define IDS(...) ((const uint32_t[]){__VA_ARGS__})
#define NIDS(...) (sizeof(IDS(__VA_ARGS__)) / sizeof(uint32_t))
#define ASSERT_EVENT(f, at, ev, ...) assert_event(f, at, ev, IDS(__VA_ARGS__), NIDS(__VA_ARGS__))

static void clear_events(fixture *f)
{
    f->rec.n = 0;
}

/* ---------------------------------------------------------------------- */
/* create / listeners                                                      */
/* ---------------------------------------------------------------------- */

static void test_create_rejects_zero_ttl(void **state)
{
    fixture *f = *state;
    lmc_l1_manager_config cfg = {
        .memory = {.size_bytes = POOL_BYTES, .align_bytes = SLOT},
        .write_ttl_seconds = 600,
        .read_ttl_seconds = 0,
        .clock = {.now_ns = fake_now, .ud = &f->now_ms},
    };
    lmc_l1_manager *l1 = NULL;
    lmc_error err;
    assert_int_equal(lmc_l1_manager_create(&cfg, &l1, &err), LMC_ERR_INVALID);
    assert_null(l1);
    assert_non_null(strstr(err.msg, "TTL"));
}

static void test_create_reports_allocator_error(void **state)
{
    fixture *f = *state;
    lmc_l1_manager_config cfg = {
        .memory = {.size_bytes = POOL_BYTES, .align_bytes = 3000}, /* not a power of two */
        .write_ttl_seconds = 600,
        .read_ttl_seconds = 300,
        .clock = {.now_ns = fake_now, .ud = &f->now_ms},
    };
    lmc_l1_manager *l1 = NULL;
    lmc_error err;
    assert_int_not_equal(lmc_l1_manager_create(&cfg, &l1, &err), LMC_OK);
    assert_null(l1);
}

static void test_add_listener_beyond_capacity_is_busy(void **state)
{
    fixture *f = *state;
    recorder *extra = calloc(1, sizeof(*extra));
    assert_non_null(extra);
    lmc_l1_listener listener = {.on_event = record_event, .ud = extra};
    /* The fixture registered one; seven more fit. */
    for (int i = 0; i < 7; i++)
        assert_int_equal(lmc_l1_manager_add_listener(f->l1, &listener), LMC_OK);
    assert_int_equal(lmc_l1_manager_add_listener(f->l1, &listener), LMC_ERR_BUSY);
    /* Every registered listener hears each event. */
    lmc_l1_touch(f->l1, &f->keys[0], 1);
    assert_int_equal(extra->n, 7);
    assert_int_equal(f->rec.n, 1);
    free(extra);
}

/* ---------------------------------------------------------------------- */
/* reserve_write: modes                                                    */
/* ---------------------------------------------------------------------- */

static void test_reserve_write_new_mode_allocates_missing_keys(void **state)
{
    fixture *f = *state;
    lmc_l1_error errs[3];
    lmc_memory_obj objs[3];
    lmc_l1_reserve_write(f->l1, f->keys, 3, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
        assert_int_equal(objs[i].size, OBJ_BYTES);
        assert_int_equal(objs[i].phys_size, SLOT);
        assert_int_equal(objs[i].offset % SLOT, 0);
        assert_ptr_equal(objs[i].data,
                         lmc_l1_memory_base(lmc_l1_manager_memory(f->l1)) + objs[i].offset);
        assert_true(lmc_l1_contains(f->l1, &f->keys[i]));
    }
    assert_int_not_equal(objs[0].offset, objs[1].offset);
    assert_int_not_equal(objs[1].offset, objs[2].offset);
    assert_int_not_equal(objs[0].offset, objs[2].offset);
    assert_int_equal(lmc_l1_object_count(f->l1), 3);
    assert_int_equal(used_bytes(f), 3 * SLOT);
}

static void test_reserve_write_new_mode_rejects_existing_key(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, f->keys, 2, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    assert_int_equal(errs[0], LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    /* The existing key was left alone: still ready, not write-locked. */
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(used_bytes(f), 2 * SLOT);
}

static void test_reserve_write_update_mode_reserves_existing_key_in_place(void **state)
{
    fixture *f = *state;
    lmc_memory_obj first = put_ready(f, 0);
    lmc_memory_obj again;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_UPDATE, &again), LMC_L1_SUCCESS);
    assert_int_equal(again.offset, first.offset);
    assert_ptr_equal(again.data, first.data);
    assert_int_equal(used_bytes(f), SLOT);
    /* Write-locked again until finished. */
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_READABLE);
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
}

static void test_reserve_write_update_mode_rejects_missing_key_without_allocating(void **state)
{
    fixture *f = *state;
    lmc_memory_obj first = put_ready(f, 0);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, f->keys, 2, NULL, &f->layout, LMC_WRITE_UPDATE, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(objs[0].offset, first.offset);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_WRITABLE);
    assert_false(lmc_l1_contains(f->l1, &f->keys[1]));
    assert_int_equal(lmc_l1_object_count(f->l1), 1);
    assert_int_equal(used_bytes(f), SLOT);
}

static void test_reserve_write_all_mode_reserves_existing_and_missing(void **state)
{
    fixture *f = *state;
    lmc_memory_obj first = put_ready(f, 0);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, f->keys, 2, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(objs[0].offset, first.offset);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    assert_int_not_equal(objs[1].offset, first.offset);
    assert_int_equal(used_bytes(f), 2 * SLOT);
}

static void test_reserve_write_is_temporary_null_means_not_temporary(void **state)
{
    fixture *f = *state;
    lmc_l1_error e;
    lmc_memory_obj obj;
    lmc_l1_reserve_write(f->l1, &f->keys[0], 1, NULL, &f->layout, LMC_WRITE_NEW, &e, &obj);
    assert_int_equal(e, LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_true(lmc_l1_contains(f->l1, &f->keys[0])); /* a temporary one would be gone */
}

static void test_reserve_write_update_of_read_locked_key_is_not_writable(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_UPDATE, NULL), LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_ALL, NULL), LMC_L1_KEY_NOT_WRITABLE);
    /* Still only read-locked: the failed reserve took no write lock. */
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_UPDATE, NULL), LMC_L1_SUCCESS);
}

static void test_reserve_write_update_of_write_locked_key_is_not_writable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_UPDATE, NULL), LMC_L1_KEY_NOT_WRITABLE);
}

static void test_reserve_write_update_of_temporary_key_is_not_writable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve_temp1(f, 0, LMC_WRITE_NEW, true, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS); /* ready, unlocked, temporary */
    assert_true(evictable(f, 0));
    assert_int_equal(reserve1(f, 0, LMC_WRITE_UPDATE, NULL), LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_ALL, NULL), LMC_L1_KEY_NOT_WRITABLE);
}

static void test_reserve_write_double_reserve_is_not_writable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_ALL, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_ALL, NULL), LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(used_bytes(f), SLOT);
    /* The first reservation is intact. */
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
}

static void test_reserve_write_repeated_key_is_reserved_once(void **state)
{
    fixture *f = *state;
    lmc_object_key keys[3];
    gather(f, IDS(0, 1, 0), 3, keys);
    lmc_l1_error errs[3];
    lmc_memory_obj objs[3];
    lmc_l1_reserve_write(f->l1, keys, 3, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    assert_int_equal(errs[2], LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(lmc_l1_object_count(f->l1), 2);
    assert_int_equal(used_bytes(f), 2 * SLOT);
    assert_memcheck(f);
    /* The surviving reservation is the first copy's. */
    lmc_memory_obj obj;
    assert_int_equal(fwrr1(f, 0, 0, &obj), LMC_L1_SUCCESS);
    assert_int_equal(obj.offset, objs[0].offset);
}

static void test_reserve_write_repeated_existing_key_is_reserved_once(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    lmc_object_key keys[2];
    gather(f, IDS(0, 0), 2, keys);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, keys, 2, NULL, &f->layout, LMC_WRITE_UPDATE, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_WRITABLE);
    assert_memcheck(f);
}

/* A repeated key must not take a slot of its own from the batch. */
static void test_reserve_write_repeated_key_does_not_cost_a_slot(void **state)
{
    fixture *f = *state;
    /* 16 distinct keys (exactly the pool) with key 0 repeated second. */
    uint32_t ids[NSLOTS + 1];
    ids[0] = 0;
    ids[1] = 0;
    for (uint32_t i = 1; i < NSLOTS; i++)
        ids[i + 1] = i;
    lmc_object_key keys[NSLOTS + 1];
    gather(f, ids, NSLOTS + 1, keys);
    lmc_l1_error errs[NSLOTS + 1];
    lmc_memory_obj objs[NSLOTS + 1];
    lmc_l1_reserve_write(f->l1, keys, NSLOTS + 1, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_WRITABLE);
    for (size_t i = 2; i < NSLOTS + 1; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            fail_msg("key %u: %s, expected SUCCESS", ids[i], lmc_l1_error_name(errs[i]));
    }
    assert_int_equal(lmc_l1_object_count(f->l1), NSLOTS);
    assert_int_equal(used_bytes(f), POOL_BYTES);
    assert_memcheck(f);
}

/* Same beyond the 64-key stack scratch, where repeats are tracked in a map. */
static void test_reserve_write_repeated_keys_in_large_batch_do_not_cost_slots(void **state)
{
    fixture *f = *state;
    enum { DISTINCT = 100, TOTAL = DISTINCT + DISTINCT / 3 + 1 };
    lmc_l1_manager_destroy(f->l1);
    f->l1 = make_manager(f, DISTINCT * SLOT); /* exactly one slot per distinct key */
    uint32_t ids[TOTAL];
    bool repeat[TOTAL];
    size_t n = 0;
    for (uint32_t i = 0; i < DISTINCT; i++) {
        repeat[n] = false;
        ids[n++] = i;
        if (i % 3 == 0) { /* every third key again, right away or from far back */
            repeat[n] = true;
            ids[n++] = i % 2 ? i : i / 2;
        }
    }
    assert_int_equal(n, TOTAL);
    lmc_object_key keys[TOTAL];
    gather(f, ids, n, keys);
    lmc_l1_error errs[TOTAL];
    lmc_memory_obj objs[TOTAL];
    lmc_l1_reserve_write(f->l1, keys, n, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    for (size_t i = 0; i < n; i++) {
        lmc_l1_error want = repeat[i] ? LMC_L1_KEY_NOT_WRITABLE : LMC_L1_SUCCESS;
        if (errs[i] != want)
            fail_msg("#%zu key %u: %s, expected %s", i, ids[i], lmc_l1_error_name(errs[i]),
                     lmc_l1_error_name(want));
    }
    assert_int_equal(lmc_l1_object_count(f->l1), DISTINCT);
    assert_int_equal(used_bytes(f), DISTINCT * SLOT);
    assert_memcheck(f);
}

static void test_reserve_write_update_with_other_layout_is_not_writable(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    lmc_layout_desc bigger;
    int64_t dims[1] = {2048};
    assert_int_equal(lmc_layout_desc_make1(&bigger, dims, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    lmc_l1_error e;
    lmc_memory_obj obj;
    lmc_l1_reserve_write(f->l1, &f->keys[0], 1, NULL, &bigger, LMC_WRITE_UPDATE, &e, &obj);
    assert_int_equal(e, LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS); /* untouched */
}

static void test_reserve_write_zero_byte_object_takes_one_slot(void **state)
{
    fixture *f = *state;
    lmc_layout_desc empty;
    int64_t dims[1] = {0};
    assert_int_equal(lmc_layout_desc_make1(&empty, dims, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    lmc_l1_error e;
    lmc_memory_obj obj;
    lmc_l1_reserve_write(f->l1, &f->keys[0], 1, NULL, &empty, LMC_WRITE_NEW, &e, &obj);
    assert_int_equal(e, LMC_L1_SUCCESS);
    assert_int_equal(obj.size, 0);
    assert_int_equal(obj.phys_size, SLOT);
    assert_int_equal(used_bytes(f), SLOT);
    assert_memcheck(f);
}

/* ---------------------------------------------------------------------- */
/* reserve_write: out of memory                                            */
/* ---------------------------------------------------------------------- */

static void test_reserve_write_oom_batch_falls_back_to_largest_prefix(void **state)
{
    fixture *f = *state;
    lmc_l1_error errs[20];
    lmc_memory_obj objs[20];
    lmc_l1_reserve_write(f->l1, f->keys, 20, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    for (uint32_t i = 0; i < 20; i++) {
        lmc_l1_error want = i < NSLOTS ? LMC_L1_SUCCESS : LMC_L1_OUT_OF_MEMORY;
        if (errs[i] != want)
            fail_msg("key %u: %s, expected %s", i, lmc_l1_error_name(errs[i]),
                     lmc_l1_error_name(want));
        assert_int_equal(lmc_l1_contains(f->l1, &f->keys[i]), i < NSLOTS);
    }
    assert_int_equal(used_bytes(f), POOL_BYTES);
    assert_memcheck(f);
}

static void test_reserve_write_oom_prefix_uses_fragmented_free_slots(void **state)
{
    fixture *f = *state;
    for (uint32_t i = 0; i < NSLOTS; i++)
        put_ready(f, i);
    /* Free every other slot: 8 one-slot holes, none adjacent. */
    for (uint32_t i = 0; i < NSLOTS; i += 2)
        assert_int_equal(delete1(f, i, false), LMC_L1_SUCCESS);
    lmc_l1_error errs[10];
    lmc_memory_obj objs[10];
    lmc_l1_reserve_write(f->l1, &f->keys[100], 10, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    for (int i = 0; i < 10; i++)
        assert_int_equal(errs[i], i < 8 ? LMC_L1_SUCCESS : LMC_L1_OUT_OF_MEMORY);
    assert_int_equal(used_bytes(f), POOL_BYTES);
    assert_memcheck(f);
}

static void test_reserve_write_single_key_without_room_is_oom(void **state)
{
    fixture *f = *state;
    lmc_l1_error errs[NSLOTS];
    lmc_memory_obj objs[NSLOTS];
    lmc_l1_reserve_write(f->l1, f->keys, NSLOTS, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    assert_int_equal(reserve1(f, NSLOTS, LMC_WRITE_NEW, NULL), LMC_L1_OUT_OF_MEMORY);
    assert_false(lmc_l1_contains(f->l1, &f->keys[NSLOTS]));
    assert_memcheck(f);
}

static void test_reserve_write_oom_never_evicts(void **state)
{
    fixture *f = *state;
    for (uint32_t i = 0; i < NSLOTS; i++)
        put_ready(f, i); /* all ready and evictable */
    assert_true(evictable(f, 0));
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, &f->keys[NSLOTS], 2, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    assert_int_equal(errs[0], LMC_L1_OUT_OF_MEMORY);
    assert_int_equal(errs[1], LMC_L1_OUT_OF_MEMORY);
    for (uint32_t i = 0; i < NSLOTS; i++)
        assert_true(lmc_l1_contains(f->l1, &f->keys[i]));
    assert_int_equal(lmc_l1_object_count(f->l1), NSLOTS);
}

static void test_reserve_write_oom_does_not_affect_existing_keys_in_batch(void **state)
{
    fixture *f = *state;
    for (uint32_t i = 0; i < NSLOTS; i++)
        put_ready(f, i);
    lmc_object_key keys[2];
    gather(f, IDS(NSLOTS, 3), 2, keys);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, keys, 2, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    assert_int_equal(errs[0], LMC_L1_OUT_OF_MEMORY);
    assert_int_equal(errs[1], LMC_L1_SUCCESS); /* in place, needs no memory */
    assert_int_equal(finish_write1(f, 3), LMC_L1_SUCCESS);
}

/* ---------------------------------------------------------------------- */
/* finish_write and the write TTL                                          */
/* ---------------------------------------------------------------------- */

static void test_finish_write_makes_object_readable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_READABLE);
    assert_false(evictable(f, 0));
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    assert_true(evictable(f, 0));
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
}

static void test_finish_write_missing_key_is_not_exist(void **state)
{
    fixture *f = *state;
    assert_int_equal(finish_write1(f, 0), LMC_L1_KEY_NOT_EXIST);
}

static void test_finish_write_twice_is_in_wrong_state(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(finish_write1(f, 0), LMC_L1_KEY_IN_WRONG_STATE);
    /* And it stays readable. */
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
}

static void test_finish_write_of_read_locked_key_is_in_wrong_state(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_write1(f, 0), LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(read_locks(f, 0), 1);
}

static void test_finish_write_just_before_write_ttl_succeeds(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    f->now_ms += WRITE_TTL_MS - 1;
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
}

static void test_finish_write_after_write_ttl_is_in_wrong_state(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    f->now_ms += WRITE_TTL_MS; /* expiry is exclusive: now == expiry is expired */
    assert_int_equal(finish_write1(f, 0), LMC_L1_KEY_IN_WRONG_STATE);
}

static void test_expired_write_is_not_readable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    advance_s(f, 601);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_READABLE);
    assert_int_equal(finish_write1(f, 0), LMC_L1_KEY_IN_WRONG_STATE);
    /* The failed finish does not make it readable either. */
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_READABLE);
    assert_int_equal(fwrr1(f, 0, 0, NULL), LMC_L1_KEY_IN_WRONG_STATE);
}

static void test_expired_write_is_evictable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_false(evictable(f, 0));
    advance_s(f, 601);
    assert_true(evictable(f, 0));
    assert_int_equal(delete1(f, 0, false), LMC_L1_SUCCESS);
    assert_int_equal(used_bytes(f), 0);
}

static void test_expired_write_can_be_rereserved_with_update(void **state)
{
    fixture *f = *state;
    lmc_memory_obj first, again;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, &first), LMC_L1_SUCCESS);
    advance_s(f, 601);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_UPDATE, &again), LMC_L1_SUCCESS);
    assert_int_equal(again.offset, first.offset);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_READABLE);
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(used_bytes(f), SLOT);
}

static void test_expired_write_can_be_rereserved_with_all(void **state)
{
    fixture *f = *state;
    lmc_memory_obj first, again;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, &first), LMC_L1_SUCCESS);
    advance_s(f, 601);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_ALL, &again), LMC_L1_SUCCESS);
    assert_int_equal(again.offset, first.offset);
    /* The new reservation has its own full TTL. */
    advance_s(f, 599);
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
}

/* ---------------------------------------------------------------------- */
/* reserve_read / unsafe_read                                              */
/* ---------------------------------------------------------------------- */

static void test_reserve_read_missing_key_is_not_exist(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_EXIST);
}

static void test_reserve_read_write_locked_key_is_not_readable(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_KEY_NOT_READABLE);
    assert_int_equal(read_locks(f, 0), 0);
}

static void test_reserve_read_takes_one_plus_extra_locks(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(read_locks(f, 0), 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 1);
    assert_int_equal(reserve_read1(f, 0, 4, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 6);
}

static void test_reserve_read_clamps_extra_count_to_127(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 127, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), LMC_MAX_READ_LOCK_COUNT);
    assert_int_equal(reserve_read1(f, 0, 1000, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 2 * LMC_MAX_READ_LOCK_COUNT);
    assert_int_equal(reserve_read1(f, 0, UINT32_MAX, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 3 * LMC_MAX_READ_LOCK_COUNT);
}

static void test_reserve_read_returns_the_written_bytes(void **state)
{
    fixture *f = *state;
    lmc_memory_obj w;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, &w), LMC_L1_SUCCESS);
    for (uint32_t i = 0; i < OBJ_BYTES; i++)
        w.data[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    lmc_memory_obj r;
    assert_int_equal(reserve_read1(f, 0, 0, &r), LMC_L1_SUCCESS);
    assert_int_equal(r.offset, w.offset);
    assert_int_equal(r.size, OBJ_BYTES);
    for (uint32_t i = 0; i < OBJ_BYTES; i++)
        assert_int_equal(r.data[i], (uint8_t)(i * 7 + 1));
}

static void test_reserve_read_accepts_null_objs(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    lmc_l1_error e;
    lmc_l1_reserve_read(f->l1, &f->keys[0], 1, 0, &e, NULL);
    assert_int_equal(e, LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 1);
}

static void test_reserve_read_refreshes_read_ttl(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    advance_s(f, 200);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    advance_s(f, 200); /* 400 s after the first lock, 200 s after the second */
    assert_int_equal(read_locks(f, 0), 2);
    advance_s(f, 100); /* 300 s after the most recent lock: all gone at once */
    assert_int_equal(read_locks(f, 0), 0);
}

static void test_unsafe_read_without_read_lock_is_not_readable(void **state)
{
    fixture *f = *state;
    assert_int_equal(unsafe_read1(f, 0, NULL), LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(unsafe_read1(f, 0, NULL), LMC_L1_KEY_NOT_READABLE); /* write-locked */
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
    assert_int_equal(unsafe_read1(f, 0, NULL), LMC_L1_KEY_NOT_READABLE); /* ready, unlocked */
}

static void test_unsafe_read_with_read_lock_takes_no_lock(void **state)
{
    fixture *f = *state;
    lmc_memory_obj w = put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    lmc_memory_obj r;
    assert_int_equal(unsafe_read1(f, 0, &r), LMC_L1_SUCCESS);
    assert_int_equal(r.offset, w.offset);
    assert_ptr_equal(r.data, w.data);
    assert_int_equal(unsafe_read1(f, 0, &r), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 1);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_int_equal(unsafe_read1(f, 0, &r), LMC_L1_KEY_NOT_READABLE);
}

static void test_unsafe_read_after_read_ttl_is_not_readable(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    advance_s(f, 300);
    assert_int_equal(unsafe_read1(f, 0, NULL), LMC_L1_KEY_NOT_READABLE);
}

/* ---------------------------------------------------------------------- */
/* finish_read and the read TTL                                            */
/* ---------------------------------------------------------------------- */

static void test_finish_read_releases_one_plus_extra_locks(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 9, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 10);
    assert_int_equal(finish_read1(f, 0, 3), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 6);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 5);
    assert_int_equal(finish_read1(f, 0, 4), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 0);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_IN_WRONG_STATE);
}

static void test_finish_read_clamps_extra_count_to_127(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 127, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 129);
    assert_int_equal(finish_read1(f, 0, 5000), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 1);
}

static void test_finish_read_releasing_more_than_held_stops_at_zero(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 1, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_read1(f, 0, 10), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 0);
    assert_true(evictable(f, 0));
    /* A fresh lock starts from zero, not from a negative balance. */
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 1);
}

static void test_finish_read_missing_key_is_not_exist(void **state)
{
    fixture *f = *state;
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_NOT_EXIST);
}

static void test_finish_read_without_read_lock_is_in_wrong_state(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_IN_WRONG_STATE);
}

static void test_finish_read_of_write_locked_key_is_in_wrong_state(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_IN_WRONG_STATE);
    /* Still write-locked: finish_write works. */
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
}

static void test_read_ttl_expiry_drops_every_read_lock(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 4, NULL), LMC_L1_SUCCESS);
    assert_false(evictable(f, 0));
    f->now_ms += READ_TTL_MS - 1;
    assert_int_equal(read_locks(f, 0), 5);
    f->now_ms += 1;
    assert_int_equal(read_locks(f, 0), 0);
    assert_true(evictable(f, 0));
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_IN_WRONG_STATE);
    /* The object itself stays, ready and unlocked. */
    assert_true(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_int_equal(delete1(f, 0, false), LMC_L1_SUCCESS);
}

static void test_read_lock_after_expiry_starts_a_fresh_count(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 9, NULL), LMC_L1_SUCCESS);
    advance_s(f, 300);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 1);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_true(evictable(f, 0));
}

static void test_finish_read_keeps_non_temporary_object(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_true(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_int_equal(used_bytes(f), SLOT);
}

static void test_finish_read_frees_temporary_object_on_last_release(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve_temp1(f, 0, LMC_WRITE_NEW, true, NULL), LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 0, 1, NULL), LMC_L1_SUCCESS); /* two readers */
    assert_int_equal(used_bytes(f), SLOT);
    clear_events(f);

    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_true(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_READ_FINISHED, 0);

    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_SUCCESS);
    assert_false(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_int_equal(used_bytes(f), 0);
    assert_int_equal(f->rec.n, 3);
    ASSERT_EVENT(f, 1, LMC_L1_EV_READ_FINISHED, 0);
    ASSERT_EVENT(f, 2, LMC_L1_EV_DELETED, 0);
    assert_memcheck(f);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_NOT_EXIST);
}

static void test_temporary_object_with_expired_read_lock_stays_until_deleted(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve_temp1(f, 0, LMC_WRITE_NEW, true, NULL), LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    advance_s(f, 300);
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_IN_WRONG_STATE);
    assert_true(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_true(evictable(f, 0));
    assert_int_equal(delete1(f, 0, false), LMC_L1_SUCCESS);
    assert_int_equal(used_bytes(f), 0);
}

/* ---------------------------------------------------------------------- */
/* finish_write_and_reserve_read                                           */
/* ---------------------------------------------------------------------- */

static void test_finish_write_and_reserve_read_transitions_atomically(void **state)
{
    fixture *f = *state;
    lmc_memory_obj w, r;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, &w), LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 0, 2, &r), LMC_L1_SUCCESS);
    assert_int_equal(r.offset, w.offset);
    assert_int_equal(read_locks(f, 0), 3);
    assert_false(evictable(f, 0));
    /* No longer write-locked, and readable by others. */
    assert_int_equal(finish_write1(f, 0), LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(read_locks(f, 0), 4);
    assert_int_equal(finish_read1(f, 0, 3), LMC_L1_SUCCESS);
    assert_true(evictable(f, 0));
}

static void test_finish_write_and_reserve_read_not_write_locked_is_in_wrong_state(void **state)
{
    fixture *f = *state;
    assert_int_equal(fwrr1(f, 0, 0, NULL), LMC_L1_KEY_NOT_EXIST);
    put_ready(f, 0);
    assert_int_equal(fwrr1(f, 0, 0, NULL), LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(read_locks(f, 0), 0);
    /* Twice: the second finds it read-locked, not write-locked. */
    assert_int_equal(reserve1(f, 1, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 1, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 1, 0, NULL), LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(read_locks(f, 1), 1);
}

/* ---------------------------------------------------------------------- */
/* delete / clear                                                          */
/* ---------------------------------------------------------------------- */

static void test_delete_missing_key_is_not_exist(void **state)
{
    fixture *f = *state;
    assert_int_equal(delete1(f, 0, false), LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(delete1(f, 0, true), LMC_L1_KEY_NOT_EXIST);
}

static void test_delete_read_locked_key_without_force_is_locked(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(delete1(f, 0, false), LMC_L1_KEY_IS_LOCKED);
    assert_true(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_int_equal(read_locks(f, 0), 1);
}

static void test_delete_write_locked_key_without_force_is_locked(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(delete1(f, 0, false), LMC_L1_KEY_IS_LOCKED);
    assert_int_equal(finish_write1(f, 0), LMC_L1_SUCCESS);
}

static void test_delete_with_force_removes_locked_keys(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve_read1(f, 0, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve1(f, 1, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    lmc_l1_error errs[2];
    lmc_l1_delete(f->l1, f->keys, 2, true, errs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    assert_false(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_false(lmc_l1_contains(f->l1, &f->keys[1]));
    /* The old holders' releases now find nothing. */
    assert_int_equal(finish_read1(f, 0, 0), LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(finish_write1(f, 1), LMC_L1_KEY_NOT_EXIST);
}

static void test_delete_frees_memory(void **state)
{
    fixture *f = *state;
    for (uint32_t i = 0; i < NSLOTS; i++)
        put_ready(f, i);
    assert_int_equal(used_bytes(f), POOL_BYTES);
    lmc_l1_error errs[NSLOTS];
    lmc_l1_delete(f->l1, f->keys, NSLOTS, false, errs);
    for (uint32_t i = 0; i < NSLOTS; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
    assert_int_equal(used_bytes(f), 0);
    assert_int_equal(lmc_l1_object_count(f->l1), 0);
    assert_memcheck(f);
    /* The whole pool is one free block again. */
    assert_int_equal(lmc_l1_memory_largest_free(lmc_l1_manager_memory(f->l1)), POOL_BYTES);
}

static void test_delete_accepts_null_errs(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    lmc_l1_delete(f->l1, f->keys, 2, false, NULL);
    assert_false(lmc_l1_contains(f->l1, &f->keys[0]));
}

static void test_delete_repeated_key_deletes_once(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    lmc_object_key keys[2];
    gather(f, IDS(0, 0), 2, keys);
    lmc_l1_error errs[2];
    lmc_l1_delete(f->l1, keys, 2, false, errs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_EXIST);
    assert_memcheck(f);
}

static void test_abort_write_drops_only_unfinished_reservations(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);                                                       /* finished */
    assert_int_equal(reserve1(f, 1, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS); /* pending */
    put_ready(f, 2);
    assert_int_equal(reserve_read1(f, 2, 0, NULL), LMC_L1_SUCCESS); /* read-locked */
    uint64_t before = used_bytes(f);
    lmc_l1_error errs[4];
    lmc_l1_abort_write(f->l1, f->keys, 4, errs);
    assert_int_equal(errs[0], LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    assert_int_equal(errs[2], LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(errs[3], LMC_L1_KEY_NOT_EXIST);
    assert_true(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_false(lmc_l1_contains(f->l1, &f->keys[1]));
    assert_int_equal(read_locks(f, 2), 1);
    assert_int_equal(used_bytes(f), before - SLOT); /* the slot, not the object, is freed */
    /* Its finish_write then finds nothing to commit. */
    assert_int_equal(finish_write1(f, 1), LMC_L1_KEY_NOT_EXIST);
    lmc_l1_abort_write(f->l1, f->keys, 2, NULL);
    assert_memcheck(f);
}

/* Four objects: 0 ready, 1 read-locked, 2 write-locked, 3 ready. */
static void make_mixed_states(fixture *f)
{
    put_ready(f, 0);
    put_ready(f, 1);
    assert_int_equal(reserve_read1(f, 1, 0, NULL), LMC_L1_SUCCESS);
    assert_int_equal(reserve1(f, 2, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    put_ready(f, 3);
}

static void test_clear_without_force_keeps_locked_objects(void **state)
{
    fixture *f = *state;
    make_mixed_states(f);
    assert_int_equal(lmc_l1_clear(f->l1, false), 2);
    assert_false(lmc_l1_contains(f->l1, &f->keys[0]));
    assert_true(lmc_l1_contains(f->l1, &f->keys[1]));
    assert_true(lmc_l1_contains(f->l1, &f->keys[2]));
    assert_false(lmc_l1_contains(f->l1, &f->keys[3]));
    assert_int_equal(used_bytes(f), 2 * SLOT);
    assert_memcheck(f);
    /* The survivors are intact. */
    assert_int_equal(finish_read1(f, 1, 0), LMC_L1_SUCCESS);
    assert_int_equal(finish_write1(f, 2), LMC_L1_SUCCESS);
}

static void test_clear_with_force_removes_everything(void **state)
{
    fixture *f = *state;
    make_mixed_states(f);
    assert_int_equal(lmc_l1_clear(f->l1, true), 4);
    assert_int_equal(lmc_l1_object_count(f->l1), 0);
    assert_int_equal(used_bytes(f), 0);
    assert_memcheck(f);
    assert_int_equal(lmc_l1_clear(f->l1, true), 0);
}

static void test_clear_treats_expired_locks_as_unlocked(void **state)
{
    fixture *f = *state;
    make_mixed_states(f);
    advance_s(f, 601);
    assert_int_equal(lmc_l1_clear(f->l1, false), 4);
    assert_int_equal(used_bytes(f), 0);
}

static void test_clear_more_objects_than_the_stack_scratch(void **state)
{
    fixture *f = *state;
    lmc_l1_manager_destroy(f->l1);
    f->l1 = make_manager(f, 256u * SLOT);
    lmc_l1_error errs[200];
    lmc_memory_obj objs[200];
    lmc_l1_reserve_write(f->l1, f->keys, 200, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    for (int i = 0; i < 200; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
    lmc_l1_finish_write(f->l1, f->keys, 200, errs);
    clear_events(f);
    assert_int_equal(lmc_l1_clear(f->l1, false), 200);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.ev[0].ev, LMC_L1_EV_DELETED);
    assert_int_equal(f->rec.ev[0].n, 200);
    assert_int_equal(used_bytes(f), 0);
}

/* ---------------------------------------------------------------------- */
/* Listener events                                                         */
/* ---------------------------------------------------------------------- */

static void test_listener_reserve_write_reports_only_new_keys(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    clear_events(f);
    lmc_l1_error errs[3];
    lmc_memory_obj objs[3];
    lmc_l1_reserve_write(f->l1, f->keys, 3, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_RESERVED_WRITE, 1, 2);
}

static void test_listener_reserve_write_update_emits_nothing(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    clear_events(f);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, f->keys, 2, NULL, &f->layout, LMC_WRITE_UPDATE, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(f->rec.n, 0);
}

static void test_listener_reserve_write_nothing_to_allocate_emits_nothing(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    put_ready(f, 1);
    clear_events(f);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    lmc_l1_reserve_write(f->l1, f->keys, 2, NULL, &f->layout, LMC_WRITE_ALL, errs, objs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    assert_int_equal(f->rec.n, 0);
}

static void test_listener_reserve_write_oom_reports_only_allocated_keys(void **state)
{
    fixture *f = *state;
    for (uint32_t i = 0; i < NSLOTS - 1; i++)
        put_ready(f, i);
    clear_events(f);
    lmc_l1_error errs[3];
    lmc_memory_obj objs[3];
    lmc_l1_reserve_write(f->l1, &f->keys[20], 3, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_RESERVED_WRITE, 20);
    /* And a call where nothing fits emits nothing. */
    clear_events(f);
    assert_int_equal(reserve1(f, 30, LMC_WRITE_NEW, NULL), LMC_L1_OUT_OF_MEMORY);
    assert_int_equal(f->rec.n, 0);
}

static void test_listener_finish_write_reports_successful_keys(void **state)
{
    fixture *f = *state;
    put_ready(f, 2);                                                       /* already finished */
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS); /* pending */
    assert_int_equal(reserve1(f, 3, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS); /* pending */
    clear_events(f);
    lmc_object_key keys[4];
    gather(f, IDS(0, 1, 2, 3), 4, keys); /* 1 is missing */
    lmc_l1_error errs[4];
    lmc_l1_finish_write(f->l1, keys, 4, errs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(errs[2], LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(errs[3], LMC_L1_SUCCESS);
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_WRITE_FINISHED, 0, 3);
}

static void test_listener_reserve_read_and_finish_read(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    put_ready(f, 2);
    assert_int_equal(reserve1(f, 3, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    clear_events(f);
    lmc_object_key keys[4];
    gather(f, IDS(0, 1, 2, 3), 4, keys);
    lmc_l1_error errs[4];
    lmc_memory_obj objs[4];
    lmc_l1_reserve_read(f->l1, keys, 4, 1, errs, objs);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(errs[3], LMC_L1_KEY_NOT_READABLE);
    lmc_l1_finish_read(f->l1, keys, 4, 0, errs);
    assert_int_equal(errs[3], LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(f->rec.n, 2);
    ASSERT_EVENT(f, 0, LMC_L1_EV_RESERVED_READ, 0, 2);
    ASSERT_EVENT(f, 1, LMC_L1_EV_READ_FINISHED, 0, 2);
}

static void test_listener_finish_write_and_reserve_read(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 0, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    put_ready(f, 1);
    assert_int_equal(reserve1(f, 2, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    clear_events(f);
    lmc_l1_error errs[3];
    lmc_memory_obj objs[3];
    lmc_l1_finish_write_and_reserve_read(f->l1, f->keys, 3, 0, errs, objs);
    assert_int_equal(errs[1], LMC_L1_KEY_IN_WRONG_STATE);
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED, 0, 2);
}

static void test_listener_delete_reports_deleted_keys(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    assert_int_equal(reserve1(f, 1, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    put_ready(f, 3);
    clear_events(f);
    lmc_object_key keys[4];
    gather(f, IDS(0, 1, 2, 3), 4, keys);
    lmc_l1_error errs[4];
    lmc_l1_delete(f->l1, keys, 4, false, errs);
    assert_int_equal(errs[1], LMC_L1_KEY_IS_LOCKED);
    assert_int_equal(errs[2], LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_DELETED, 0, 3);
    /* Nothing deleted: no event. */
    clear_events(f);
    lmc_l1_delete(f->l1, keys, 3, false, errs);
    assert_int_equal(f->rec.n, 0);
}

static void test_listener_clear_reports_deleted_keys(void **state)
{
    fixture *f = *state;
    make_mixed_states(f);
    clear_events(f);
    assert_int_equal(lmc_l1_clear(f->l1, false), 2);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.ev[0].ev, LMC_L1_EV_DELETED);
    assert_int_equal(f->rec.ev[0].n, 2);
    /* In table order, so either order; both keys present. */
    const lmc_object_key *k = f->rec.ev[0].keys;
    bool first_is_0 = lmc_object_key_equal(&k[0], &f->keys[0]);
    assert_true(lmc_object_key_equal(&k[first_is_0 ? 1 : 0], &f->keys[3]));
    assert_true(lmc_object_key_equal(&k[first_is_0 ? 0 : 1], &f->keys[0]));
}

static void test_listener_touch_reports_accessed(void **state)
{
    fixture *f = *state;
    put_ready(f, 0);
    clear_events(f);
    lmc_object_key keys[2];
    gather(f, IDS(0, 7), 2, keys); /* touch does not look keys up */
    lmc_l1_touch(f->l1, keys, 2);
    assert_int_equal(f->rec.n, 1);
    ASSERT_EVENT(f, 0, LMC_L1_EV_ACCESSED, 0, 7);
    lmc_l1_touch(f->l1, keys, 0);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(read_locks(f, 0), 0);
}

static void test_listener_full_lifecycle_sequence(void **state)
{
    fixture *f = *state;
    assert_int_equal(reserve1(f, 5, LMC_WRITE_NEW, NULL), LMC_L1_SUCCESS);
    assert_int_equal(finish_write1(f, 5), LMC_L1_SUCCESS);
    assert_int_equal(reserve_read1(f, 5, 0, NULL), LMC_L1_SUCCESS);
    lmc_l1_touch(f->l1, &f->keys[5], 1);
    assert_int_equal(finish_read1(f, 5, 0), LMC_L1_SUCCESS);
    assert_int_equal(delete1(f, 5, false), LMC_L1_SUCCESS);
    assert_int_equal(f->rec.n, 6);
    ASSERT_EVENT(f, 0, LMC_L1_EV_RESERVED_WRITE, 5);
    ASSERT_EVENT(f, 1, LMC_L1_EV_WRITE_FINISHED, 5);
    ASSERT_EVENT(f, 2, LMC_L1_EV_RESERVED_READ, 5);
    ASSERT_EVENT(f, 3, LMC_L1_EV_ACCESSED, 5);
    ASSERT_EVENT(f, 4, LMC_L1_EV_READ_FINISHED, 5);
    ASSERT_EVENT(f, 5, LMC_L1_EV_DELETED, 5);
}

static void test_listener_large_batches_arrive_as_one_event(void **state)
{
    fixture *f = *state;
    lmc_l1_manager_destroy(f->l1);
    f->l1 = make_manager(f, 256u * SLOT);
    enum { N = 200 }; /* beyond the 64-key stack scratch */
    lmc_l1_error errs[N];
    lmc_memory_obj objs[N];
    clear_events(f);
    lmc_l1_reserve_write(f->l1, f->keys, N, NULL, &f->layout, LMC_WRITE_NEW, errs, objs);
    lmc_l1_finish_write(f->l1, f->keys, N, errs);
    lmc_l1_reserve_read(f->l1, f->keys, N, 0, errs, objs);
    lmc_l1_finish_read(f->l1, f->keys, N, 0, errs);
    lmc_l1_delete(f->l1, f->keys, N, false, errs);
    static const lmc_l1_event want[] = {LMC_L1_EV_RESERVED_WRITE, LMC_L1_EV_WRITE_FINISHED,
                                        LMC_L1_EV_RESERVED_READ, LMC_L1_EV_READ_FINISHED,
                                        LMC_L1_EV_DELETED};
    assert_int_equal(f->rec.n, 5);
    for (size_t e = 0; e < 5; e++) {
        assert_int_equal(f->rec.ev[e].ev, want[e]);
        assert_int_equal(f->rec.ev[e].n, N);
        for (uint32_t i = 0; i < N; i++)
            assert_true(lmc_object_key_equal(&f->rec.ev[e].keys[i], &f->keys[i]));
    }
    assert_int_equal(used_bytes(f), 0);
}

/* ---------------------------------------------------------------------- */
/* report_status                                                           */
/* ---------------------------------------------------------------------- */

static int64_t status_int(const lmc_json *j, const char *field)
{
    const lmc_json *v = lmc_json_object_get(j, field);
    if (v == NULL)
        fail_msg("report_status has no '%s'", field);
    assert_int_equal(lmc_json_type_of(v), LMC_JSON_INT);
    return lmc_json_get_int(v);
}

static void test_report_status_fields(void **state)
{
    fixture *f = *state;
    make_mixed_states(f); /* 0 ready, 1 read-locked, 2 write-locked, 3 ready */
    assert_int_equal(reserve_temp1(f, 4, LMC_WRITE_NEW, true, NULL), LMC_L1_SUCCESS);
    assert_int_equal(fwrr1(f, 4, 0, NULL), LMC_L1_SUCCESS); /* temporary, read-locked */

    lmc_json *j = lmc_l1_report_status(f->l1);
    assert_non_null(j);
    assert_int_equal(lmc_json_type_of(j), LMC_JSON_OBJECT);
    assert_int_equal(lmc_json_size(j), 10);
    const lmc_json *healthy = lmc_json_object_get(j, "is_healthy");
    assert_non_null(healthy);
    assert_int_equal(lmc_json_type_of(healthy), LMC_JSON_BOOL);
    assert_true(lmc_json_get_bool(healthy));
    assert_int_equal(status_int(j, "total_object_count"), 5);
    assert_int_equal(status_int(j, "write_locked_count"), 1);
    assert_int_equal(status_int(j, "read_locked_count"), 2);
    assert_int_equal(status_int(j, "temporary_count"), 1);
    assert_int_equal(status_int(j, "memory_used_bytes"), 5 * SLOT);
    assert_int_equal(status_int(j, "memory_total_bytes"), POOL_BYTES);
    const lmc_json *ratio = lmc_json_object_get(j, "memory_usage_ratio");
    assert_non_null(ratio);
    assert_int_equal(lmc_json_type_of(ratio), LMC_JSON_FLOAT);
    assert_float_equal(lmc_json_get_number(ratio), 5.0 / 16.0, 1e-12);
    assert_int_equal(status_int(j, "write_ttl_seconds"), 600);
    assert_int_equal(status_int(j, "read_ttl_seconds"), 300);
    lmc_json_free(j);
}

static void test_report_status_counts_expired_locks_as_unlocked(void **state)
{
    fixture *f = *state;
    make_mixed_states(f);
    advance_s(f, 601);
    lmc_json *j = lmc_l1_report_status(f->l1);
    assert_non_null(j);
    assert_int_equal(status_int(j, "total_object_count"), 4);
    assert_int_equal(status_int(j, "write_locked_count"), 0);
    assert_int_equal(status_int(j, "read_locked_count"), 0);
    lmc_json_free(j);
}

static void test_report_status_of_empty_manager(void **state)
{
    fixture *f = *state;
    lmc_json *j = lmc_l1_report_status(f->l1);
    assert_non_null(j);
    assert_true(lmc_json_get_bool(lmc_json_object_get(j, "is_healthy")));
    assert_int_equal(status_int(j, "total_object_count"), 0);
    assert_int_equal(status_int(j, "memory_used_bytes"), 0);
    assert_float_equal(lmc_json_get_number(lmc_json_object_get(j, "memory_usage_ratio")), 0.0, 0.0);
    lmc_json_free(j);
}

/* ---------------------------------------------------------------------- */
/* Random operations against a reference model                             */
/* ---------------------------------------------------------------------- */

#define RK 24    /* keys in play (more than the 16 slots) */
#define RBATCH 6 /* at most this many keys per call */
#define ROPS 2000

typedef struct model_obj {
    bool present;
    bool temporary;
    bool pending;
    lmc_ttl_lock w, r;
    uint64_t offset;
    uint8_t stamp; /* every byte of the object */
} model_obj;

typedef struct model {
    model_obj o[RK];
    uint64_t rng;
} model;

static uint64_t rnd(model *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return m->rng;
}

static uint32_t model_extra(model *m)
{
    return rnd(m) % 10 == 0 ? 500 : (uint32_t)(rnd(m) % 4);
}

static uint32_t model_locks(uint32_t extra)
{
    return 1 + (extra > 127 ? 127 : extra);
}

static bool m_wl(const model_obj *o, uint64_t now)
{
    return lmc_ttl_lock_is_locked(&o->w, now);
}

static bool m_rl(const model_obj *o, uint64_t now)
{
    return lmc_ttl_lock_is_locked(&o->r, now);
}

static size_t model_count(const model *m)
{
    size_t n = 0;
    for (int i = 0; i < RK; i++)
        n += m->o[i].present;
    return n;
}

static void check_errs(const char *op, size_t step, const uint32_t *ids, size_t n,
                       const lmc_l1_error *got, const lmc_l1_error *want)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i])
            fail_msg("step %zu %s: key %u (#%zu): %s, expected %s", step, op, ids[i], i,
                     lmc_l1_error_name(got[i]), lmc_l1_error_name(want[i]));
    }
}

static void check_obj(const model_obj *o, const lmc_memory_obj *obj, bool check_bytes)
{
    assert_int_equal(obj->offset, o->offset);
    assert_int_equal(obj->size, OBJ_BYTES);
    assert_int_equal(obj->phys_size, SLOT);
    if (check_bytes) {
        assert_int_equal(obj->data[0], o->stamp);
        assert_int_equal(obj->data[OBJ_BYTES - 1], o->stamp);
    }
}

static void random_reserve_write(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    lmc_write_mode mode = (lmc_write_mode)(rnd(m) % 3);
    bool temp[RBATCH];
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    lmc_memory_obj objs[RBATCH];
    for (size_t i = 0; i < n; i++)
        temp[i] = rnd(m) % 5 == 0;
    gather(f, ids, n, keys);
    lmc_l1_reserve_write(f->l1, keys, n, temp, &f->layout, mode, got, objs);

    uint64_t now = f->now_ms;
    size_t free_slots = NSLOTS - model_count(m);
    size_t missing[RBATCH], n_missing = 0;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (o->present) {
            bool writable = !m_wl(o, now) && !m_rl(o, now) && !o->temporary;
            if (mode == LMC_WRITE_NEW || !writable) {
                want[i] = LMC_L1_KEY_NOT_WRITABLE;
            } else {
                lmc_ttl_lock_lock(&o->w, 1, now);
                o->pending = true;
                want[i] = LMC_L1_SUCCESS;
            }
            continue;
        }
        bool repeat = false;
        for (size_t j = 0; j < n_missing; j++)
            repeat |= ids[missing[j]] == ids[i];
        if (repeat)
            want[i] = LMC_L1_KEY_NOT_WRITABLE;
        else
            missing[n_missing++] = i;
    }
    for (size_t j = 0; j < n_missing; j++) {
        size_t i = missing[j];
        if (mode == LMC_WRITE_UPDATE) {
            want[i] = LMC_L1_KEY_NOT_WRITABLE;
        } else if (j >= free_slots) {
            want[i] = LMC_L1_OUT_OF_MEMORY;
        } else {
            model_obj *o = &m->o[ids[i]];
            memset(o, 0, sizeof(*o));
            o->present = true;
            o->temporary = temp[i];
            o->pending = true;
            lmc_ttl_lock_init(&o->w, 600);
            lmc_ttl_lock_init(&o->r, 300);
            lmc_ttl_lock_lock(&o->w, 1, now);
            o->offset = objs[i].offset;
            want[i] = LMC_L1_SUCCESS;
        }
    }
    check_errs("reserve_write", step, ids, n, got, want);
    for (size_t i = 0; i < n; i++) {
        if (got[i] != LMC_L1_SUCCESS)
            continue;
        model_obj *o = &m->o[ids[i]];
        check_obj(o, &objs[i], false);
        o->stamp = (uint8_t)(step + i);
        memset(objs[i].data, o->stamp, OBJ_BYTES);
    }
}

static void random_finish_write(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    gather(f, ids, n, keys);
    lmc_l1_finish_write(f->l1, keys, n, got);
    uint64_t now = f->now_ms;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (!o->present) {
            want[i] = LMC_L1_KEY_NOT_EXIST;
        } else if (!m_wl(o, now) || m_rl(o, now)) {
            want[i] = LMC_L1_KEY_IN_WRONG_STATE;
        } else {
            lmc_ttl_lock_unlock(&o->w, 1);
            o->pending = m_wl(o, now);
            want[i] = LMC_L1_SUCCESS;
        }
    }
    check_errs("finish_write", step, ids, n, got, want);
}

static void random_reserve_read(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    uint32_t extra = model_extra(m);
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    lmc_memory_obj objs[RBATCH];
    gather(f, ids, n, keys);
    lmc_l1_reserve_read(f->l1, keys, n, extra, got, objs);
    uint64_t now = f->now_ms;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (!o->present) {
            want[i] = LMC_L1_KEY_NOT_EXIST;
        } else if (m_wl(o, now) || o->pending) {
            want[i] = LMC_L1_KEY_NOT_READABLE;
        } else {
            lmc_ttl_lock_lock(&o->r, model_locks(extra), now);
            want[i] = LMC_L1_SUCCESS;
            check_obj(o, &objs[i], true);
        }
    }
    check_errs("reserve_read", step, ids, n, got, want);
}

static void random_unsafe_read(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    lmc_memory_obj objs[RBATCH];
    gather(f, ids, n, keys);
    lmc_l1_unsafe_read(f->l1, keys, n, got, objs);
    uint64_t now = f->now_ms;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (!o->present) {
            want[i] = LMC_L1_KEY_NOT_EXIST;
        } else if (!m_rl(o, now)) {
            want[i] = LMC_L1_KEY_NOT_READABLE;
        } else {
            want[i] = LMC_L1_SUCCESS;
            check_obj(o, &objs[i], true);
        }
    }
    check_errs("unsafe_read", step, ids, n, got, want);
}

static void random_finish_read(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    uint32_t extra = model_extra(m);
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    gather(f, ids, n, keys);
    lmc_l1_finish_read(f->l1, keys, n, extra, got);
    uint64_t now = f->now_ms;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (!o->present) {
            want[i] = LMC_L1_KEY_NOT_EXIST;
        } else if (m_wl(o, now) || !m_rl(o, now)) {
            want[i] = LMC_L1_KEY_IN_WRONG_STATE;
        } else {
            lmc_ttl_lock_unlock(&o->r, model_locks(extra));
            want[i] = LMC_L1_SUCCESS;
            if (o->temporary && !m_rl(o, now))
                o->present = false;
        }
    }
    check_errs("finish_read", step, ids, n, got, want);
}

static void random_fwrr(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    uint32_t extra = model_extra(m);
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    lmc_memory_obj objs[RBATCH];
    gather(f, ids, n, keys);
    lmc_l1_finish_write_and_reserve_read(f->l1, keys, n, extra, got, objs);
    uint64_t now = f->now_ms;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (!o->present) {
            want[i] = LMC_L1_KEY_NOT_EXIST;
        } else if (!m_wl(o, now) || m_rl(o, now)) {
            want[i] = LMC_L1_KEY_IN_WRONG_STATE;
        } else {
            lmc_ttl_lock_reset(&o->w);
            o->pending = false;
            lmc_ttl_lock_lock(&o->r, model_locks(extra), now);
            want[i] = LMC_L1_SUCCESS;
            check_obj(o, &objs[i], true);
        }
    }
    check_errs("finish_write_and_reserve_read", step, ids, n, got, want);
}

static void random_delete(fixture *f, model *m, size_t step, const uint32_t *ids, size_t n)
{
    bool force = rnd(m) % 6 == 0;
    lmc_object_key keys[RBATCH];
    lmc_l1_error got[RBATCH], want[RBATCH];
    gather(f, ids, n, keys);
    lmc_l1_delete(f->l1, keys, n, force, got);
    uint64_t now = f->now_ms;
    for (size_t i = 0; i < n; i++) {
        model_obj *o = &m->o[ids[i]];
        if (!o->present) {
            want[i] = LMC_L1_KEY_NOT_EXIST;
        } else if (!force && (m_wl(o, now) || m_rl(o, now))) {
            want[i] = LMC_L1_KEY_IS_LOCKED;
        } else {
            o->present = false;
            want[i] = LMC_L1_SUCCESS;
        }
    }
    check_errs(force ? "delete(force)" : "delete", step, ids, n, got, want);
}

static void random_clear(fixture *f, model *m)
{
    bool force = rnd(m) % 2 == 0;
    size_t want = 0;
    for (int i = 0; i < RK; i++) {
        model_obj *o = &m->o[i];
        if (o->present && (force || !(m_wl(o, f->now_ms) || m_rl(o, f->now_ms)))) {
            o->present = false;
            want++;
        }
    }
    assert_int_equal(lmc_l1_clear(f->l1, force), want);
}

static void random_check_invariants(fixture *f, const model *m, size_t step)
{
    size_t count = model_count(m);
    assert_int_equal(lmc_l1_object_count(f->l1), count);
    if (used_bytes(f) != count * SLOT)
        fail_msg("step %zu: %llu bytes used for %zu objects", step,
                 (unsigned long long)used_bytes(f), count);
    assert_memcheck(f);
    for (uint32_t i = 0; i < RK; i++) {
        const model_obj *o = &m->o[i];
        assert_int_equal(lmc_l1_contains(f->l1, &f->keys[i]), o->present);
        uint64_t want = o->present ? lmc_ttl_lock_count(&o->r, f->now_ms) : 0;
        if (read_locks(f, i) != want)
            fail_msg("step %zu: key %u has %llu read locks, expected %llu", step, i,
                     (unsigned long long)read_locks(f, i), (unsigned long long)want);
        if (o->present)
            assert_int_equal(evictable(f, i), !m_wl(o, f->now_ms) && !m_rl(o, f->now_ms));
        for (uint32_t j = i + 1; j < RK; j++) {
            if (o->present && m->o[j].present && o->offset == m->o[j].offset)
                fail_msg("step %zu: keys %u and %u share offset %llu", step, i, j,
                         (unsigned long long)o->offset);
        }
    }
}

static void test_random_operations_match_model_and_keep_memcheck_clean(void **state)
{
    fixture *f = *state;
    model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    m->rng = 0x9e3779b97f4a7c15ull;
    size_t counts[12] = {0};
    for (size_t step = 0; step < ROPS; step++) {
        uint32_t ids[RBATCH];
        size_t n = 1 + rnd(m) % RBATCH;
        for (size_t i = 0; i < n; i++)
            ids[i] = (uint32_t)(rnd(m) % RK);
        unsigned op = (unsigned)(rnd(m) % 100);
        if (op < 25) {
            random_reserve_write(f, m, step, ids, n);
            counts[0]++;
        } else if (op < 40) {
            random_finish_write(f, m, step, ids, n);
            counts[1]++;
        } else if (op < 55) {
            random_reserve_read(f, m, step, ids, n);
            counts[2]++;
        } else if (op < 60) {
            random_unsafe_read(f, m, step, ids, n);
            counts[3]++;
        } else if (op < 75) {
            random_finish_read(f, m, step, ids, n);
            counts[4]++;
        } else if (op < 82) {
            random_fwrr(f, m, step, ids, n);
            counts[5]++;
        } else if (op < 90) {
            random_delete(f, m, step, ids, n);
            counts[6]++;
        } else if (op < 92) {
            lmc_object_key keys[RBATCH];
            gather(f, ids, n, keys);
            lmc_l1_touch(f->l1, keys, n);
            counts[7]++;
        } else if (op < 99) {
            /* Mostly short steps; sometimes past a read or write TTL. */
            f->now_ms += rnd(m) % 4 == 0 ? 250000 + rnd(m) % 400000 : rnd(m) % 60000;
            counts[8]++;
        } else {
            random_clear(f, m);
            counts[9]++;
        }
        random_check_invariants(f, m, step);
    }
    /* Every operation ran a fair number of times. */
    for (int i = 0; i < 10; i++)
        assert_true(counts[i] >= 5);
    free(m);
}

/* ---------------------------------------------------------------------- */
/* write_mode names                                                        */
/* ---------------------------------------------------------------------- */

static void test_write_mode_names(void **state)
{
    (void)state;
    assert_string_equal(lmc_write_mode_name(LMC_WRITE_NEW), "new");
    assert_string_equal(lmc_write_mode_name(LMC_WRITE_UPDATE), "update");
    assert_string_equal(lmc_write_mode_name(LMC_WRITE_ALL), "all");
}

static void test_write_mode_from_name_parses_each_name(void **state)
{
    (void)state;
    static const lmc_write_mode modes[] = {LMC_WRITE_NEW, LMC_WRITE_UPDATE, LMC_WRITE_ALL};
    for (size_t i = 0; i < 3; i++) {
        const char *name = lmc_write_mode_name(modes[i]);
        lmc_write_mode got = (lmc_write_mode)99;
        assert_int_equal(lmc_write_mode_from_name(name, strlen(name), &got, NULL), LMC_OK);
        assert_int_equal(got, modes[i]);
    }
    /* The length bounds the name: "newer" cut to 3 bytes is "new". */
    lmc_write_mode got = LMC_WRITE_ALL;
    assert_int_equal(lmc_write_mode_from_name("newer", 3, &got, NULL), LMC_OK);
    assert_int_equal(got, LMC_WRITE_NEW);
}

static void test_write_mode_from_name_unknown_is_error_naming_value(void **state)
{
    (void)state;
    lmc_write_mode got = LMC_WRITE_UPDATE;
    lmc_error err;
    assert_int_equal(lmc_write_mode_from_name("bogus", 5, &got, &err), LMC_ERR_INVALID);
    assert_int_equal(err.code, LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'bogus'"));
    assert_int_equal(got, LMC_WRITE_UPDATE); /* untouched */
    assert_int_equal(lmc_write_mode_from_name("NEW", 3, &got, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'NEW'"));
    assert_int_equal(lmc_write_mode_from_name("", 0, &got, &err), LMC_ERR_INVALID);
    assert_int_equal(lmc_write_mode_from_name("al", 2, &got, NULL), LMC_ERR_INVALID);
}

/* ---------------------------------------------------------------------- */

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    lmc_log_set_level(LMC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        T(test_create_rejects_zero_ttl),
        T(test_create_reports_allocator_error),
        T(test_add_listener_beyond_capacity_is_busy),
        T(test_reserve_write_new_mode_allocates_missing_keys),
        T(test_reserve_write_new_mode_rejects_existing_key),
        T(test_reserve_write_update_mode_reserves_existing_key_in_place),
        T(test_reserve_write_update_mode_rejects_missing_key_without_allocating),
        T(test_reserve_write_all_mode_reserves_existing_and_missing),
        T(test_reserve_write_is_temporary_null_means_not_temporary),
        T(test_reserve_write_update_of_read_locked_key_is_not_writable),
        T(test_reserve_write_update_of_write_locked_key_is_not_writable),
        T(test_reserve_write_update_of_temporary_key_is_not_writable),
        T(test_reserve_write_double_reserve_is_not_writable),
        T(test_reserve_write_repeated_key_is_reserved_once),
        T(test_reserve_write_repeated_existing_key_is_reserved_once),
        T(test_reserve_write_repeated_key_does_not_cost_a_slot),
        T(test_reserve_write_repeated_keys_in_large_batch_do_not_cost_slots),
        T(test_reserve_write_update_with_other_layout_is_not_writable),
        T(test_reserve_write_zero_byte_object_takes_one_slot),
        T(test_reserve_write_oom_batch_falls_back_to_largest_prefix),
        T(test_reserve_write_oom_prefix_uses_fragmented_free_slots),
        T(test_reserve_write_single_key_without_room_is_oom),
        T(test_reserve_write_oom_never_evicts),
        T(test_reserve_write_oom_does_not_affect_existing_keys_in_batch),
        T(test_finish_write_makes_object_readable),
        T(test_finish_write_missing_key_is_not_exist),
        T(test_finish_write_twice_is_in_wrong_state),
        T(test_finish_write_of_read_locked_key_is_in_wrong_state),
        T(test_finish_write_just_before_write_ttl_succeeds),
        T(test_finish_write_after_write_ttl_is_in_wrong_state),
        T(test_expired_write_is_not_readable),
        T(test_expired_write_is_evictable),
        T(test_expired_write_can_be_rereserved_with_update),
        T(test_expired_write_can_be_rereserved_with_all),
        T(test_reserve_read_missing_key_is_not_exist),
        T(test_reserve_read_write_locked_key_is_not_readable),
        T(test_reserve_read_takes_one_plus_extra_locks),
        T(test_reserve_read_clamps_extra_count_to_127),
        T(test_reserve_read_returns_the_written_bytes),
        T(test_reserve_read_accepts_null_objs),
        T(test_reserve_read_refreshes_read_ttl),
        T(test_unsafe_read_without_read_lock_is_not_readable),
        T(test_unsafe_read_with_read_lock_takes_no_lock),
        T(test_unsafe_read_after_read_ttl_is_not_readable),
        T(test_finish_read_releases_one_plus_extra_locks),
        T(test_finish_read_clamps_extra_count_to_127),
        T(test_finish_read_releasing_more_than_held_stops_at_zero),
        T(test_finish_read_missing_key_is_not_exist),
        T(test_finish_read_without_read_lock_is_in_wrong_state),
        T(test_finish_read_of_write_locked_key_is_in_wrong_state),
        T(test_read_ttl_expiry_drops_every_read_lock),
        T(test_read_lock_after_expiry_starts_a_fresh_count),
        T(test_finish_read_keeps_non_temporary_object),
        T(test_finish_read_frees_temporary_object_on_last_release),
        T(test_temporary_object_with_expired_read_lock_stays_until_deleted),
        T(test_finish_write_and_reserve_read_transitions_atomically),
        T(test_finish_write_and_reserve_read_not_write_locked_is_in_wrong_state),
        T(test_abort_write_drops_only_unfinished_reservations),
        T(test_delete_missing_key_is_not_exist),
        T(test_delete_read_locked_key_without_force_is_locked),
        T(test_delete_write_locked_key_without_force_is_locked),
        T(test_delete_with_force_removes_locked_keys),
        T(test_delete_frees_memory),
        T(test_delete_accepts_null_errs),
        T(test_delete_repeated_key_deletes_once),
        T(test_clear_without_force_keeps_locked_objects),
        T(test_clear_with_force_removes_everything),
        T(test_clear_treats_expired_locks_as_unlocked),
        T(test_clear_more_objects_than_the_stack_scratch),
        T(test_listener_reserve_write_reports_only_new_keys),
        T(test_listener_reserve_write_update_emits_nothing),
        T(test_listener_reserve_write_nothing_to_allocate_emits_nothing),
        T(test_listener_reserve_write_oom_reports_only_allocated_keys),
        T(test_listener_finish_write_reports_successful_keys),
        T(test_listener_reserve_read_and_finish_read),
        T(test_listener_finish_write_and_reserve_read),
        T(test_listener_delete_reports_deleted_keys),
        T(test_listener_clear_reports_deleted_keys),
        T(test_listener_touch_reports_accessed),
        T(test_listener_full_lifecycle_sequence),
        T(test_listener_large_batches_arrive_as_one_event),
        T(test_report_status_fields),
        T(test_report_status_counts_expired_locks_as_unlocked),
        T(test_report_status_of_empty_manager),
        T(test_random_operations_match_model_and_keep_memcheck_clean),
        T(test_write_mode_names),
        T(test_write_mode_from_name_parses_each_name),
        T(test_write_mode_from_name_unknown_is_error_naming_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
