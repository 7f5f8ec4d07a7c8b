/*
 * l1_manager.c -- the L1 object table (see l1_manager.h).
 *
 * One mutex guards the table and every object's locks and flags; each
 * public call takes it once for the whole batch. Objects own a slot of the
 * L1 pool, freed when the object leaves the table. Listener notifications
 * are collected into a per-call key list and delivered before the mutex is
 * released, so listeners see events in table order.
 */
#include "storage/l1_manager.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/keymap.h"
#include "core/log.h"
#include "core/names.h"
#include "core/pool.h"
#include "core/ttl_lock.h"

#define MAX_LISTENERS 8

typedef struct l1_object {
    uint64_t offset;
    uint64_t size;      /* logical bytes */
    uint64_t phys_size; /* slot bytes */
    lmc_ttl_lock write_lock;
    lmc_ttl_lock read_lock;
    bool is_temporary;
    bool write_pending;
} l1_object;

struct lmc_l1_manager {
    pthread_mutex_t mu;
    lmc_l1_memory *mem;
    uint8_t *base;
    lmc_keymap *table; /* key -> l1_object* */
    lmc_pool objects;  /* where the l1_objects live */
    lmc_clock clock;
    uint64_t write_ttl_s;
    uint64_t read_ttl_s;
    lmc_l1_listener listeners[MAX_LISTENERS];
    size_t n_listeners;
};

/* The one list of write modes, indexed by lmc_write_mode. */
static const char *const g_write_modes[] = {
    [LMC_WRITE_NEW] = "new",
    [LMC_WRITE_UPDATE] = "update",
    [LMC_WRITE_ALL] = "all",
};
#define N_WRITE_MODES (sizeof(g_write_modes) / sizeof(g_write_modes[0]))

const char *lmc_write_mode_name(lmc_write_mode m)
{
    return (size_t)m < N_WRITE_MODES ? g_write_modes[m] : "?";
}

lmc_status lmc_write_mode_from_name(const char *s, size_t len, lmc_write_mode *out,
                                    lmc_error *err)
{
    size_t i;
    lmc_status st = lmc_names_parse(g_write_modes, N_WRITE_MODES, "write mode", s, len, &i, err);
    if (st == LMC_OK)
        *out = (lmc_write_mode)i;
    return st;
}

static uint64_t now_ms(lmc_l1_manager *l1)
{
    return lmc_clock_now_ms(&l1->clock);
}

static void notify(lmc_l1_manager *l1, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    if (n == 0)
        return;
    for (size_t i = 0; i < l1->n_listeners; i++)
        l1->listeners[i].on_event(l1->listeners[i].ud, ev, keys, n);
}

static uint32_t lock_count(uint32_t extra_count)
{
    if (extra_count > LMC_MAX_READ_LOCK_COUNT - 1)
        extra_count = LMC_MAX_READ_LOCK_COUNT - 1;
    return 1 + extra_count;
}

static l1_object *lookup(lmc_l1_manager *l1, const lmc_object_key *key)
{
    void **slot = lmc_keymap_get(l1->table, key);
    return slot ? (l1_object *)*slot : NULL;
}

static lmc_memory_obj obj_view(const lmc_l1_manager *l1, const l1_object *o)
{
    lmc_memory_obj m = {.data = l1->base + o->offset, .size = o->size,
                        .phys_size = o->phys_size, .offset = o->offset};
    return m;
}

/* Readable: no write lock and no write in progress. */
static bool is_readable(const l1_object *o, uint64_t now)
{
    return !lmc_ttl_lock_is_locked(&o->write_lock, now) && !o->write_pending;
}

static bool is_writable(const l1_object *o, uint64_t now)
{
    return !lmc_ttl_lock_is_locked(&o->write_lock, now) &&
           !lmc_ttl_lock_is_locked(&o->read_lock, now) && !o->is_temporary;
}

static bool is_locked(const l1_object *o, uint64_t now)
{
    return lmc_ttl_lock_is_locked(&o->write_lock, now) ||
           lmc_ttl_lock_is_locked(&o->read_lock, now);
}

/* Remove from the table and free its slot. Caller holds the mutex. */
static void drop_object(lmc_l1_manager *l1, const lmc_object_key *key, l1_object *o)
{
    lmc_keymap_remove(l1->table, key, NULL);
    lmc_l1_memory_free(l1->mem, o->offset, o->phys_size);
    lmc_pool_free(&l1->objects, o);
}

lmc_status lmc_l1_manager_create(const lmc_l1_manager_config *cfg, lmc_l1_manager **out,
                                 lmc_error *err)
{
    if (cfg->write_ttl_seconds == 0 || cfg->read_ttl_seconds == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 manager: TTLs must be >= 1 second");
    lmc_l1_manager *l1 = calloc(1, sizeof(*l1));
    if (l1 == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "L1 manager: out of memory");
    lmc_status st = lmc_l1_memory_create(&cfg->memory, &l1->mem, err);
    if (st != LMC_OK) {
        free(l1);
        return st;
    }
    l1->table = lmc_keymap_create(1024);
    if (l1->table == NULL) {
        lmc_l1_memory_destroy(l1->mem);
        free(l1);
        return lmc_error_set(err, LMC_ERR_NOMEM, "L1 manager: out of memory");
    }
    pthread_mutex_init(&l1->mu, NULL);
    lmc_pool_init(&l1->objects, sizeof(l1_object), 1024);
    l1->base = lmc_l1_memory_base(l1->mem);
    l1->clock = cfg->clock.now_ns ? cfg->clock : lmc_clock_monotonic();
    l1->write_ttl_s = cfg->write_ttl_seconds;
    l1->read_ttl_s = cfg->read_ttl_seconds;
    *out = l1;
    return LMC_OK;
}

void lmc_l1_manager_destroy(lmc_l1_manager *l1)
{
    if (l1 == NULL)
        return;
    lmc_pool_destroy(&l1->objects);
    lmc_keymap_destroy(l1->table);
    lmc_l1_memory_destroy(l1->mem);
    pthread_mutex_destroy(&l1->mu);
    free(l1);
}

lmc_status lmc_l1_manager_add_listener(lmc_l1_manager *l1, const lmc_l1_listener *listener)
{
    pthread_mutex_lock(&l1->mu);
    lmc_status st = LMC_ERR_BUSY;
    if (l1->n_listeners < MAX_LISTENERS) {
        l1->listeners[l1->n_listeners++] = *listener;
        st = LMC_OK;
    }
    pthread_mutex_unlock(&l1->mu);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Scratch key lists for notifications                                     */
/* ---------------------------------------------------------------------- */

/*
 * Calls are usually small (16 keys); a stack buffer covers them and the heap
 * is used only beyond that. If the heap allocation fails, notifications
 * degrade to one key at a time rather than being lost.
 */
#define SCRATCH_KEYS 64

typedef struct scratch {
    lmc_object_key stack[SCRATCH_KEYS];
    lmc_object_key *keys;
    size_t len;
    size_t cap;
} scratch;

static void scratch_init(scratch *s, size_t need)
{
    s->len = 0;
    if (need <= SCRATCH_KEYS) {
        s->keys = s->stack;
        s->cap = SCRATCH_KEYS;
        return;
    }
    s->keys = malloc(need * sizeof(lmc_object_key));
    if (s->keys == NULL) {
        s->keys = s->stack;
        s->cap = SCRATCH_KEYS;
    } else {
        s->cap = need;
    }
}

static void scratch_push(lmc_l1_manager *l1, scratch *s, lmc_l1_event ev,
                         const lmc_object_key *key)
{
    if (s->len == s->cap) { /* only after a failed heap allocation */
        notify(l1, ev, s->keys, s->len);
        s->len = 0;
    }
    s->keys[s->len++] = *key;
}

static void scratch_flush(lmc_l1_manager *l1, scratch *s, lmc_l1_event ev)
{
    notify(l1, ev, s->keys, s->len);
    if (s->keys != s->stack)
        free(s->keys);
    s->keys = NULL;
}

/* ---------------------------------------------------------------------- */
/* Operations                                                              */
/* ---------------------------------------------------------------------- */

/*
 * True when keys[i] is a repeat of a missing key already queued for
 * allocation (alloc_idx[0..n_alloc)). A repeat must not be counted in the
 * batch: it would take a slot of its own and could push a distinct key at
 * the end of the batch into OUT_OF_MEMORY. Large calls track queued keys in
 * *seen (linear time); small calls, or a large one whose map ran out of
 * memory, scan the queue.
 */
static bool is_queued_repeat(lmc_keymap **seen, const lmc_object_key *keys, const size_t *alloc_idx,
                             size_t n_alloc, size_t i)
{
    if (*seen != NULL) {
        if (lmc_keymap_get(*seen, &keys[i]) != NULL)
            return true;
        if (lmc_keymap_put(*seen, &keys[i], (void *)&keys[i], NULL) == LMC_OK)
            return false;
        lmc_keymap_destroy(*seen); /* incomplete from here on: fall back to scanning */
        *seen = NULL;
    }
    for (size_t j = 0; j < n_alloc; j++) {
        if (lmc_object_key_equal(&keys[alloc_idx[j]], &keys[i]))
            return true;
    }
    return false;
}

void lmc_l1_reserve_write(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                          const bool *is_temporary, const lmc_layout_desc *layout,
                          lmc_write_mode mode, lmc_l1_error *errs, lmc_memory_obj *objs)
{
    uint64_t size = lmc_layout_desc_nbytes(layout);
    /* A zero-byte object still takes one slot, so it has an address. */
    uint64_t slot = lmc_l1_memory_slot_size(l1->mem, size ? size : 1);

    size_t *alloc_idx = NULL;
    size_t stack_idx[SCRATCH_KEYS];
    uint64_t *offsets = NULL;
    uint64_t stack_off[SCRATCH_KEYS];
    if (n <= SCRATCH_KEYS) {
        alloc_idx = stack_idx;
        offsets = stack_off;
    } else {
        alloc_idx = malloc(n * sizeof(*alloc_idx));
        offsets = malloc(n * sizeof(*offsets));
        if (alloc_idx == NULL || offsets == NULL) {
            free(alloc_idx);
            free(offsets);
            for (size_t i = 0; i < n; i++)
                errs[i] = LMC_L1_OUT_OF_MEMORY;
            return;
        }
    }

    /* Built outside the mutex; NULL (scan instead) for small calls or no memory. */
    lmc_keymap *seen = n > SCRATCH_KEYS ? lmc_keymap_create(n) : NULL;

    pthread_mutex_lock(&l1->mu);
    uint64_t now = now_ms(l1);
    size_t n_alloc = 0;

    /*
     * 1. Existing keys: only an "update"/"all" on a writable key succeeds.
     * A key repeated within the call is reserved once: later copies of an
     * existing key find it write-locked, later copies of a missing key are
     * not queued for allocation.
     */
    for (size_t i = 0; i < n; i++) {
        l1_object *o = lookup(l1, &keys[i]);
        if (o == NULL) {
            if (is_queued_repeat(&seen, keys, alloc_idx, n_alloc, i))
                errs[i] = LMC_L1_KEY_NOT_WRITABLE;
            else
                alloc_idx[n_alloc++] = i;
            continue;
        }
        if (mode == LMC_WRITE_NEW || !is_writable(o, now) || o->size != size) {
            errs[i] = LMC_L1_KEY_NOT_WRITABLE;
            continue;
        }
        lmc_ttl_lock_lock(&o->write_lock, 1, now);
        o->write_pending = true;
        errs[i] = LMC_L1_SUCCESS;
        objs[i] = obj_view(l1, o);
    }

    /* 2-3. Nothing new to allocate, or not allowed to: done (no event). */
    if (n_alloc == 0 || mode == LMC_WRITE_UPDATE) {
        for (size_t j = 0; j < n_alloc; j++)
            errs[alloc_idx[j]] = LMC_L1_KEY_NOT_WRITABLE;
        pthread_mutex_unlock(&l1->mu);
        goto out;
    }

    /* 4. One batch; if it does not fit, the largest prefix that does. */
    size_t n_fit = n_alloc;
    if (!lmc_l1_memory_batched_alloc(l1->mem, slot, n_alloc, offsets)) {
        n_fit = n_alloc > 1 ? lmc_l1_memory_max_batch(l1->mem, slot, n_alloc) : 0;
        if (n_fit > 0 && !lmc_l1_memory_batched_alloc(l1->mem, slot, n_fit, offsets))
            n_fit = 0;
    }

    /* 5. New entries start write-locked. */
    scratch reserved;
    scratch_init(&reserved, n_fit);
    for (size_t j = 0; j < n_alloc; j++) {
        size_t i = alloc_idx[j];
        if (j >= n_fit) {
            errs[i] = LMC_L1_OUT_OF_MEMORY;
            continue;
        }
        l1_object *o = lmc_pool_alloc(&l1->objects);
        if (o != NULL)
            memset(o, 0, sizeof(*o));
        if (o == NULL) {
            lmc_l1_memory_free(l1->mem, offsets[j], slot);
            errs[i] = LMC_L1_OUT_OF_MEMORY;
            continue;
        }
        o->offset = offsets[j];
        o->size = size;
        o->phys_size = slot;
        lmc_ttl_lock_init(&o->write_lock, l1->write_ttl_s);
        lmc_ttl_lock_init(&o->read_lock, l1->read_ttl_s);
        lmc_ttl_lock_lock(&o->write_lock, 1, now);
        o->write_pending = true;
        o->is_temporary = is_temporary ? is_temporary[i] : false;
        void **existing; /* absent: step 1 checked under this same mutex */
        if (lmc_keymap_insert(l1->table, &keys[i], o, &existing) != LMC_OK ||
            existing != NULL) {
            lmc_l1_memory_free(l1->mem, offsets[j], slot);
            lmc_pool_free(&l1->objects, o);
            errs[i] = LMC_L1_OUT_OF_MEMORY;
            continue;
        }
        errs[i] = LMC_L1_SUCCESS;
        objs[i] = obj_view(l1, o);
        scratch_push(l1, &reserved, LMC_L1_EV_RESERVED_WRITE, &keys[i]);
    }
    scratch_flush(l1, &reserved, LMC_L1_EV_RESERVED_WRITE);
    pthread_mutex_unlock(&l1->mu);

out:
    lmc_keymap_destroy(seen);
    if (alloc_idx != stack_idx) {
        free(alloc_idx);
        free(offsets);
    }
}

/*
 * The per-key batch operations below (finish write, reserve, unsafe and
 * finish read, finish write and reserve read, abort and delete) share one
 * loop: take the mutex once for the batch, look each key up, let the op's
 * step judge and change the object, and announce the accepted keys as one
 * event. Only the step differs between them, so only the step is written
 * per op; the locking, the lookup and the event order live in run_keys.
 */
typedef struct key_call {
    uint64_t now;
    uint32_t count; /* read locks to take or release (lock_count) */
} key_call;

typedef struct key_op {
    /*
     * LMC_L1_SUCCESS after changing o, or why o is refused (left as it
     * was). Sets *drop when the accepted object leaves the table now.
     */
    lmc_l1_error (*step)(l1_object *o, const key_call *c, bool *drop);
    bool announce; /* announce ev for each accepted key */
    lmc_l1_event ev;
    bool drops; /* the step may set *drop; DELETED follows ev for those keys */
} key_op;

/* Inlined into each op, so the constant op's step is a direct call there. */
static inline __attribute__((always_inline)) void run_keys(lmc_l1_manager *l1, const key_op *op,
                                                           const lmc_object_key *keys, size_t n,
                                                           uint32_t count, lmc_l1_error *errs,
                                                           lmc_memory_obj *objs)
{
    scratch done, freed;
    scratch_init(&done, op->announce ? n : 0);
    scratch_init(&freed, op->drops ? n : 0);
    pthread_mutex_lock(&l1->mu);
    key_call c = {.now = now_ms(l1), .count = count};
    for (size_t i = 0; i < n; i++) {
        l1_object *o = lookup(l1, &keys[i]);
        bool drop = false;
        lmc_l1_error e = o == NULL ? LMC_L1_KEY_NOT_EXIST : op->step(o, &c, &drop);
        if (errs)
            errs[i] = e;
        if (e != LMC_L1_SUCCESS)
            continue;
        if (objs)
            objs[i] = obj_view(l1, o);
        if (op->announce)
            scratch_push(l1, &done, op->ev, &keys[i]);
        if (drop) {
            drop_object(l1, &keys[i], o);
            scratch_push(l1, &freed, LMC_L1_EV_DELETED, &keys[i]);
        }
    }
    scratch_flush(l1, &done, op->ev);
    scratch_flush(l1, &freed, LMC_L1_EV_DELETED);
    pthread_mutex_unlock(&l1->mu);
}

/* Finishing a write needs the write lock held and no reader yet. */
static bool is_finishable(const l1_object *o, uint64_t now)
{
    return lmc_ttl_lock_is_locked(&o->write_lock, now) &&
           !lmc_ttl_lock_is_locked(&o->read_lock, now);
}

static lmc_l1_error finish_write_step(l1_object *o, const key_call *c, bool *drop)
{
    (void)drop;
    if (!is_finishable(o, c->now))
        return LMC_L1_KEY_IN_WRONG_STATE;
    lmc_ttl_lock_unlock(&o->write_lock, 1);
    if (!lmc_ttl_lock_is_locked(&o->write_lock, c->now))
        o->write_pending = false;
    return LMC_L1_SUCCESS;
}

static lmc_l1_error reserve_read_step(l1_object *o, const key_call *c, bool *drop)
{
    (void)drop;
    if (!is_readable(o, c->now))
        return LMC_L1_KEY_NOT_READABLE;
    lmc_ttl_lock_lock(&o->read_lock, c->count, c->now);
    return LMC_L1_SUCCESS;
}

static lmc_l1_error unsafe_read_step(l1_object *o, const key_call *c, bool *drop)
{
    (void)drop;
    return lmc_ttl_lock_is_locked(&o->read_lock, c->now) ? LMC_L1_SUCCESS : LMC_L1_KEY_NOT_READABLE;
}

static lmc_l1_error finish_read_step(l1_object *o, const key_call *c, bool *drop)
{
    if (lmc_ttl_lock_is_locked(&o->write_lock, c->now) ||
        !lmc_ttl_lock_is_locked(&o->read_lock, c->now))
        return LMC_L1_KEY_IN_WRONG_STATE;
    lmc_ttl_lock_unlock(&o->read_lock, c->count);
    /* Prefetched (temporary) objects live only as long as their readers. */
    *drop = o->is_temporary && !lmc_ttl_lock_is_locked(&o->read_lock, c->now);
    return LMC_L1_SUCCESS;
}

static lmc_l1_error finish_write_reserve_read_step(l1_object *o, const key_call *c, bool *drop)
{
    (void)drop;
    if (!is_finishable(o, c->now))
        return LMC_L1_KEY_IN_WRONG_STATE;
    lmc_ttl_lock_reset(&o->write_lock);
    o->write_pending = false;
    lmc_ttl_lock_lock(&o->read_lock, c->count, c->now);
    return LMC_L1_SUCCESS;
}

/* Which objects lmc_l1_delete (force or not) and lmc_l1_abort_write drop. */
static lmc_l1_error drop_unlocked_step(l1_object *o, const key_call *c, bool *drop)
{
    *drop = !is_locked(o, c->now);
    return *drop ? LMC_L1_SUCCESS : LMC_L1_KEY_IS_LOCKED;
}

static lmc_l1_error drop_any_step(l1_object *o, const key_call *c, bool *drop)
{
    (void)o;
    (void)c;
    *drop = true;
    return LMC_L1_SUCCESS;
}

static lmc_l1_error drop_unfinished_step(l1_object *o, const key_call *c, bool *drop)
{
    *drop = o->write_pending && !lmc_ttl_lock_is_locked(&o->read_lock, c->now);
    return *drop ? LMC_L1_SUCCESS : LMC_L1_KEY_IN_WRONG_STATE;
}

static const key_op g_finish_write = {
    .step = finish_write_step, .announce = true, .ev = LMC_L1_EV_WRITE_FINISHED};
static const key_op g_reserve_read = {
    .step = reserve_read_step, .announce = true, .ev = LMC_L1_EV_RESERVED_READ};
static const key_op g_unsafe_read = {.step = unsafe_read_step}; /* announces nothing */
static const key_op g_finish_read = {
    .step = finish_read_step, .announce = true, .ev = LMC_L1_EV_READ_FINISHED, .drops = true};
static const key_op g_finish_write_reserve_read = {
    .step = finish_write_reserve_read_step,
    .announce = true,
    .ev = LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED,
};
/* The drops announce DELETED only. */
static const key_op g_drop_unlocked = {.step = drop_unlocked_step, .drops = true};
static const key_op g_drop_any = {.step = drop_any_step, .drops = true};
static const key_op g_drop_unfinished = {.step = drop_unfinished_step, .drops = true};

void lmc_l1_finish_write(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                         lmc_l1_error *errs)
{
    run_keys(l1, &g_finish_write, keys, n, 0, errs, NULL);
}

void lmc_l1_reserve_read(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                         uint32_t extra_count, lmc_l1_error *errs, lmc_memory_obj *objs)
{
    run_keys(l1, &g_reserve_read, keys, n, lock_count(extra_count), errs, objs);
}

void lmc_l1_unsafe_read(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                        lmc_l1_error *errs, lmc_memory_obj *objs)
{
    run_keys(l1, &g_unsafe_read, keys, n, 0, errs, objs);
}

void lmc_l1_finish_read(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                        uint32_t extra_count, lmc_l1_error *errs)
{
    run_keys(l1, &g_finish_read, keys, n, lock_count(extra_count), errs, NULL);
}

void lmc_l1_finish_write_and_reserve_read(lmc_l1_manager *l1, const lmc_object_key *keys,
                                          size_t n, uint32_t extra_count, lmc_l1_error *errs,
                                          lmc_memory_obj *objs)
{
    run_keys(l1, &g_finish_write_reserve_read, keys, n, lock_count(extra_count), errs, objs);
}

void lmc_l1_abort_write(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                        lmc_l1_error *errs)
{
    run_keys(l1, &g_drop_unfinished, keys, n, 0, errs, NULL);
}

void lmc_l1_delete(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n, bool force,
                   lmc_l1_error *errs)
{
    run_keys(l1, force ? &g_drop_any : &g_drop_unlocked, keys, n, 0, errs, NULL);
}

size_t lmc_l1_clear(lmc_l1_manager *l1, bool force)
{
    pthread_mutex_lock(&l1->mu);
    uint64_t now = now_ms(l1);
    size_t total = lmc_keymap_size(l1->table);
    size_t cleared = 0;
    /*
     * Collect first: removing while iterating would shift slots under us.
     * If the heap scratch could not be allocated, the stack one fills up
     * before the scan ends: drop what was collected and scan again.
     */
    bool more = true;
    while (more) {
        more = false;
        scratch freed;
        scratch_init(&freed, lmc_keymap_size(l1->table));
        for (size_t i = 0; i < lmc_keymap_capacity(l1->table); i++) {
            const lmc_object_key *k = lmc_keymap_key_at(l1->table, i);
            if (k == NULL)
                continue;
            l1_object *o = lmc_keymap_value_at(l1->table, i);
            if (force || !is_locked(o, now)) {
                if (freed.len == freed.cap) {
                    more = true;
                    break;
                }
                freed.keys[freed.len++] = *k;
            }
        }
        for (size_t i = 0; i < freed.len; i++) {
            l1_object *o = lookup(l1, &freed.keys[i]);
            drop_object(l1, &freed.keys[i], o);
        }
        cleared += freed.len;
        scratch_flush(l1, &freed, LMC_L1_EV_DELETED);
    }
    pthread_mutex_unlock(&l1->mu);
    LMC_INFO("l1", "clear(force=%s): removed %zu of %zu objects, %zu kept (locked)",
             force ? "true" : "false", cleared, total, total - cleared);
    return cleared;
}

void lmc_l1_touch(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    /* Listeners are fixed after start-up, so reading them unlocked is safe. */
    notify(l1, LMC_L1_EV_ACCESSED, keys, n);
}

void lmc_l1_get_memory_usage(lmc_l1_manager *l1, uint64_t *used, uint64_t *total)
{
    lmc_l1_memory_usage(l1->mem, used, total);
}

size_t lmc_l1_object_count(lmc_l1_manager *l1)
{
    pthread_mutex_lock(&l1->mu);
    size_t n = lmc_keymap_size(l1->table);
    pthread_mutex_unlock(&l1->mu);
    return n;
}

void lmc_l1_with_lock(lmc_l1_manager *l1, void (*fn)(lmc_l1_manager *l1, void *ud), void *ud)
{
    pthread_mutex_lock(&l1->mu);
    fn(l1, ud);
    pthread_mutex_unlock(&l1->mu);
}

bool lmc_l1_is_evictable_locked(lmc_l1_manager *l1, const lmc_object_key *key)
{
    l1_object *o = lookup(l1, key);
    return o != NULL && !is_locked(o, now_ms(l1));
}

uint64_t lmc_l1_read_lock_count(lmc_l1_manager *l1, const lmc_object_key *key)
{
    pthread_mutex_lock(&l1->mu);
    l1_object *o = lookup(l1, key);
    uint64_t c = o ? lmc_ttl_lock_count(&o->read_lock, now_ms(l1)) : 0;
    pthread_mutex_unlock(&l1->mu);
    return c;
}

void lmc_l1_key_states(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                       lmc_l1_key_state *out)
{
    pthread_mutex_lock(&l1->mu);
    uint64_t now = now_ms(l1);
    for (size_t i = 0; i < n; i++) {
        const l1_object *o = lookup(l1, &keys[i]);
        if (o == NULL)
            out[i] = LMC_L1_STATE_ABSENT;
        else if (!is_readable(o, now))
            out[i] = LMC_L1_STATE_WRITING;
        else if (lmc_ttl_lock_is_locked(&o->read_lock, now))
            out[i] = LMC_L1_STATE_READ_LOCKED;
        else
            out[i] = LMC_L1_STATE_READY;
    }
    pthread_mutex_unlock(&l1->mu);
}

bool lmc_l1_contains(lmc_l1_manager *l1, const lmc_object_key *key)
{
    pthread_mutex_lock(&l1->mu);
    bool found = lookup(l1, key) != NULL;
    pthread_mutex_unlock(&l1->mu);
    return found;
}

typedef struct counts {
    size_t total, write_locked, read_locked, temporary;
    uint64_t slot_bytes;
} counts;

static counts count_objects(lmc_l1_manager *l1)
{
    counts c = {0};
    uint64_t now = now_ms(l1);
    for (size_t i = 0; i < lmc_keymap_capacity(l1->table); i++) {
        if (lmc_keymap_key_at(l1->table, i) == NULL)
            continue;
        const l1_object *o = lmc_keymap_value_at(l1->table, i);
        c.total++;
        c.write_locked += lmc_ttl_lock_is_locked(&o->write_lock, now);
        c.read_locked += lmc_ttl_lock_is_locked(&o->read_lock, now);
        c.temporary += o->is_temporary;
        c.slot_bytes += o->phys_size;
    }
    return c;
}

lmc_json *lmc_l1_report_status(lmc_l1_manager *l1)
{
    pthread_mutex_lock(&l1->mu);
    counts c = count_objects(l1);
    bool healthy = lmc_l1_memory_check(l1->mem, NULL, 0);
    pthread_mutex_unlock(&l1->mu);
    uint64_t used, total;
    lmc_l1_memory_usage(l1->mem, &used, &total);

    lmc_json *j = lmc_json_object();
    if (j == NULL)
        return NULL;
    lmc_status st = LMC_OK;
    st |= lmc_json_object_set(j, "is_healthy", lmc_json_bool(healthy));
    st |= lmc_json_object_set(j, "total_object_count", lmc_json_int((int64_t)c.total));
    st |= lmc_json_object_set(j, "write_locked_count", lmc_json_int((int64_t)c.write_locked));
    st |= lmc_json_object_set(j, "read_locked_count", lmc_json_int((int64_t)c.read_locked));
    st |= lmc_json_object_set(j, "temporary_count", lmc_json_int((int64_t)c.temporary));
    st |= lmc_json_object_set(j, "memory_used_bytes", lmc_json_int((int64_t)used));
    st |= lmc_json_object_set(j, "memory_total_bytes", lmc_json_int((int64_t)total));
    st |= lmc_json_object_set(j, "memory_usage_ratio",
                              lmc_json_float(total ? (double)used / (double)total : 0.0));
    st |= lmc_json_object_set(j, "write_ttl_seconds", lmc_json_int((int64_t)l1->write_ttl_s));
    st |= lmc_json_object_set(j, "read_ttl_seconds", lmc_json_int((int64_t)l1->read_ttl_s));
    if (st != LMC_OK) {
        lmc_json_free(j);
        return NULL;
    }
    return j;
}

bool lmc_l1_memcheck(lmc_l1_manager *l1, char *why, size_t why_len)
{
    pthread_mutex_lock(&l1->mu);
    bool ok = lmc_l1_memory_check(l1->mem, why, why_len);
    counts c = count_objects(l1);
    uint64_t used, total;
    lmc_l1_memory_usage(l1->mem, &used, &total);
    pthread_mutex_unlock(&l1->mu);
    if (ok && c.slot_bytes != used) {
        ok = false;
        if (why)
            snprintf(why, why_len, "objects hold %llu bytes but the allocator has %llu in use",
                     (unsigned long long)c.slot_bytes, (unsigned long long)used);
    }
    LMC_INFO("l1", "memcheck: %s; %zu objects (%zu write-locked, %zu read-locked, %zu "
             "temporary), %llu of %llu bytes used",
             ok ? "ok" : "FAILED", c.total, c.write_locked, c.read_locked, c.temporary,
             (unsigned long long)used, (unsigned long long)total);
    return ok;
}

lmc_l1_memory *lmc_l1_manager_memory(lmc_l1_manager *l1)
{
    return l1->mem;
}
