/*
 * sessions.c -- the server's session table (see sessions.h).
 *
 * A fixed array of buckets of singly linked sessions, hashed by request id
 * (FNV-1a), and a singly linked list of draining sessions; one mutex for
 * all of it and for the counts the limits are checked against. The lock
 * rules of sessions.h are collect(), lmc_sessions_claim() and
 * release_held(), below; nothing else in the server releases a session's
 * locks.
 */
#include "server/sessions.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "lmcache/bitmap.h"

#define SESSION_BUCKETS 1024

struct lmc_session_table {
    lmc_storage_manager *sm;
    lmc_counters *counts;
    lmc_session_limits limits;
    pthread_mutex_t mu;
    lmc_session *buckets[SESSION_BUCKETS];
    lmc_session *draining;
    /* What the limits count: sessions and keys in the table, draining, or reserved. */
    size_t n_sessions;
    size_t n_keys;
    lmc_lookup_observer observer; /* NULL: none */
    void *observer_ud;
};

static size_t bucket_of(const char *id)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = id; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return (size_t)(h % SESSION_BUCKETS);
}

lmc_status lmc_session_table_create(lmc_storage_manager *sm, lmc_counters *counts,
                                    const lmc_session_limits *limits, lmc_session_table **out,
                                    lmc_error *err)
{
    lmc_session_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    t->sm = sm;
    t->counts = counts;
    t->limits = *limits;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return LMC_OK;
}

void lmc_session_table_set_observer(lmc_session_table *t, lmc_lookup_observer fn, void *ud)
{
    t->observer = fn;
    t->observer_ud = ud;
}

lmc_session *lmc_session_new(const char *request_id, int64_t world_size, uint32_t extra_count,
                             size_t n_keys)
{
    lmc_session *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return NULL;
    x->request_id = strdup(request_id);
    x->keys = malloc((n_keys ? n_keys : 1) * sizeof(*x->keys));
    x->held = calloc(n_keys ? n_keys : 1, 1);
    if (x->request_id == NULL || x->keys == NULL || x->held == NULL) {
        lmc_session_free(x);
        return NULL;
    }
    x->world_size = world_size;
    x->extra_count = extra_count;
    return x;
}

void lmc_session_free(lmc_session *x)
{
    if (x == NULL)
        return;
    if (x->has_handle)
        lmc_prefetch_handle_clear(&x->handle);
    free(x->request_id);
    free(x->keys);
    free(x->held);
    free(x);
}

static size_t n_keys_of(const lmc_session *x)
{
    return x->n_chunks * (size_t)x->world_size;
}

/* Caller holds mu. */
static lmc_session *find(lmc_session_table *t, const char *id)
{
    for (lmc_session *x = t->buckets[bucket_of(id)]; x; x = x->next) {
        if (strcmp(x->request_id, id) == 0)
            return x;
    }
    return NULL;
}

/* Caller holds mu. */
static lmc_session *unlink_session(lmc_session_table *t, const char *id)
{
    lmc_session **link = &t->buckets[bucket_of(id)];
    for (lmc_session *x = *link; x; link = &x->next, x = x->next) {
        if (strcmp(x->request_id, id) == 0) {
            *link = x->next;
            x->next = NULL;
            return x;
        }
    }
    return NULL;
}

uint64_t lmc_sessions_now_ms(const lmc_session_table *t)
{
    return lmc_sm_now_ns(t->sm) / 1000000u;
}

/* The lookup's locks may have expired (and been taken afresh by someone else) from this time on. */
static uint64_t locks_expire_ms(const lmc_session_table *t, const lmc_session *x)
{
    return x->locked_ms + t->limits.read_ttl_ms;
}

/*
 * Collect a finished prefetch: fold the bitmap into a whole-chunk prefix
 * (a chunk counts only if every rank is present), release the locks on
 * keys found past that prefix, and record the prefix's locks as held.
 * False while it is still running. Caller holds mu, or owns x.
 */
static bool collect(lmc_session_table *t, lmc_session *x)
{
    if (!x->has_handle)
        return x->hits_known;
    lmc_bitmap bm;
    /* BUSY: not yet. NOMEM: the result stays with the StorageManager, so the
     * next poll collects it. */
    if (lmc_sm_query_prefetch_status(t->sm, &x->handle, &bm) != LMC_OK)
        return false;
    if (t->observer != NULL)
        t->observer(t->observer_ud, x->request_id, &x->handle, &bm);
    size_t ws = (size_t)x->world_size;
    size_t hit = lmc_bitmap_count_leading_ones(&bm) / ws;
    size_t total = n_keys_of(x);
    /* Keys found beyond the whole-chunk prefix hold locks nobody will read:
     * gathered at the front of a scratch array (the prefix keeps its own). */
    lmc_object_key *extra = malloc((total ? total : 1) * sizeof(*extra));
    size_t n_extra = 0;
    for (size_t i = hit * ws; i < total && extra; i++) {
        if (lmc_bitmap_test(&bm, i))
            extra[n_extra++] = x->keys[i];
    }
    if (n_extra > 0 && lmc_sessions_now_ms(t) < locks_expire_ms(t, x)) {
        lmc_sm_finish_read_prefetched(t->sm, extra, n_extra, x->extra_count, NULL);
        LMC_COUNT(t->counts, finish_read_prefetched, 1);
    }
    free(extra);
    lmc_bitmap_free(&bm);
    lmc_prefetch_handle_clear(&x->handle);
    x->has_handle = false;
    x->hits_known = true;
    x->hit_chunks = hit;
    memset(x->held, 1 + x->extra_count, hit * ws);
    return true;
}

/*
 * Release every lock x still holds: one StorageManager call per distinct
 * count (normally one), nothing once the locks may have expired. Caller
 * owns x (not in the table or the draining list).
 */
static void release_held(lmc_session_table *t, lmc_session *x)
{
    size_t n = x->hit_chunks * (size_t)x->world_size;
    if (!x->hits_known || n == 0)
        return;
    if (lmc_sessions_now_ms(t) >= locks_expire_ms(t, x)) {
        memset(x->held, 0, n);
        return;
    }
    lmc_object_key *batch = malloc(n * sizeof(*batch));
    for (unsigned count = 1; count <= 1 + x->extra_count; count++) {
        size_t nb = 0;
        for (size_t i = 0; i < n; i++) {
            if (x->held[i] != count)
                continue;
            if (batch != NULL)
                batch[nb++] = x->keys[i];
            else /* no memory for a batch: one call per key */
                lmc_sm_finish_read_prefetched(t->sm, &x->keys[i], 1, count - 1, NULL);
            x->held[i] = 0;
        }
        if (nb > 0) {
            lmc_sm_finish_read_prefetched(t->sm, batch, nb, count - 1, NULL);
            LMC_COUNT(t->counts, finish_read_prefetched, 1);
        }
    }
    free(batch);
}

/* Give back what a session (or a reservation) counted against the limits. */
static void unaccount(lmc_session_table *t, size_t n_keys)
{
    pthread_mutex_lock(&t->mu);
    t->n_sessions--;
    t->n_keys -= n_keys;
    pthread_mutex_unlock(&t->mu);
}

/* Release, touch if asked, free. Caller owns x, whose prefetch is collected. */
static void finish(lmc_session_table *t, lmc_session *x)
{
    release_held(t, x);
    if (x->touch_at_end && x->n_chunks > 0)
        lmc_sm_touch_l1_keys(t->sm, x->keys, n_keys_of(x));
    unaccount(t, n_keys_of(x));
    lmc_session_free(x);
}

/* End a session the caller owns: at once if its prefetch is done, else it drains. */
static void end_owned(lmc_session_table *t, lmc_session *x)
{
    if (collect(t, x)) {
        finish(t, x);
        return;
    }
    pthread_mutex_lock(&t->mu);
    x->next = t->draining;
    t->draining = x;
    pthread_mutex_unlock(&t->mu);
}

void lmc_session_table_destroy(lmc_session_table *t)
{
    if (t == NULL)
        return;
    lmc_session *all = t->draining;
    for (size_t b = 0; b < SESSION_BUCKETS; b++) {
        while (t->buckets[b]) {
            lmc_session *x = t->buckets[b];
            t->buckets[b] = x->next;
            x->next = all;
            all = x;
        }
    }
    /* No waiting: a prefetch still running keeps its locks until their TTL. */
    while (all) {
        lmc_session *x = all;
        all = x->next;
        collect(t, x);
        release_held(t, x);
        lmc_session_free(x);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Caller holds mu. */
static bool full(const lmc_session_table *t, size_t n_keys)
{
    return t->n_sessions + 1 > t->limits.max_sessions || n_keys > t->limits.max_keys ||
           t->n_keys > t->limits.max_keys - n_keys;
}

lmc_status lmc_sessions_reserve(lmc_session_table *t, size_t n_keys, uint64_t ttl_ms,
                                lmc_error *err)
{
    pthread_mutex_lock(&t->mu);
    bool is_full = full(t, n_keys);
    pthread_mutex_unlock(&t->mu);
    if (is_full) {
        /* Make what room the rules allow before refusing. */
        lmc_sessions_expire(t, lmc_mono_ms(), ttl_ms);
        lmc_sessions_poll_draining(t);
    }
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&t->mu);
    if (t->n_sessions + 1 > t->limits.max_sessions) {
        st = lmc_error_set(err, LMC_ERR_BUSY,
                           "%zu sessions are open, the limit (--max-sessions %zu): end sessions "
                           "(end_session) or wait for them to expire",
                           t->n_sessions, t->limits.max_sessions);
    } else if (full(t, n_keys)) {
        st = lmc_error_set(err, LMC_ERR_BUSY,
                           "%zu more keys would exceed the %zu all sessions may hold "
                           "(--max-session-keys; %zu held now)",
                           n_keys, t->limits.max_keys, t->n_keys);
    } else {
        t->n_sessions++;
        t->n_keys += n_keys;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

void lmc_sessions_unreserve(lmc_session_table *t, size_t n_keys)
{
    unaccount(t, n_keys);
}

void lmc_sessions_put(lmc_session_table *t, lmc_session *x)
{
    x->last_used_ms = lmc_mono_ms();
    pthread_mutex_lock(&t->mu);
    if (t->observer != NULL && x->has_handle)
        t->observer(t->observer_ud, x->request_id, &x->handle, NULL);
    lmc_session *old = unlink_session(t, x->request_id);
    size_t b = bucket_of(x->request_id);
    x->next = t->buckets[b];
    t->buckets[b] = x;
    pthread_mutex_unlock(&t->mu);
    if (old)
        end_owned(t, old);
}

lmc_session_state lmc_sessions_query(lmc_session_table *t, const char *request_id,
                                     bool lookup_hits_only, size_t *hit_chunks)
{
    lmc_session_state state = LMC_SESSION_PENDING;
    pthread_mutex_lock(&t->mu);
    lmc_session *x = find(t, request_id);
    if (x == NULL) {
        state = LMC_SESSION_UNKNOWN;
    } else {
        x->last_used_ms = lmc_mono_ms();
        size_t hits;
        if (lookup_hits_only && x->has_handle) {
            if (lmc_sm_query_prefetch_lookup_hits(t->sm, &x->handle, &hits)) {
                *hit_chunks = hits / (size_t)x->world_size;
                state = LMC_SESSION_READY;
            }
        } else if (collect(t, x)) {
            *hit_chunks = x->hit_chunks;
            state = LMC_SESSION_READY;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return state;
}

bool lmc_sessions_claim(lmc_session_table *t, const char *request_id, const lmc_object_key *keys,
                        size_t n, size_t c0, int64_t rank, uint64_t *expires_ms)
{
    uint64_t now = lmc_sessions_now_ms(t);
    *expires_ms = UINT64_MAX;
    if (n == 0)
        return true;
    bool ok = false;
    pthread_mutex_lock(&t->mu);
    lmc_session *x = find(t, request_id);
    if (x == NULL || !collect(t, x) || now >= locks_expire_ms(t, x) || rank < 0 ||
        rank >= x->world_size || c0 > x->hit_chunks || n > x->hit_chunks - c0)
        goto out;
    size_t ws = (size_t)x->world_size;
    for (size_t i = 0; i < n; i++) {
        size_t k = (c0 + i) * ws + (size_t)rank;
        if (x->held[k] == 0 || !lmc_object_key_equal(&keys[i], &x->keys[k]))
            goto out;
    }
    for (size_t i = 0; i < n; i++)
        x->held[(c0 + i) * ws + (size_t)rank]--;
    x->last_used_ms = lmc_mono_ms();
    *expires_ms = locks_expire_ms(t, x);
    ok = true;
out:
    pthread_mutex_unlock(&t->mu);
    return ok;
}

/* Take a session out of the table and end it; touch its keys at the end if asked. */
static void end_by_id(lmc_session_table *t, const char *request_id, bool touch)
{
    pthread_mutex_lock(&t->mu);
    lmc_session *x = unlink_session(t, request_id);
    pthread_mutex_unlock(&t->mu);
    if (x) {
        x->touch_at_end = touch;
        end_owned(t, x);
    }
}

void lmc_sessions_free_lookup_locks(lmc_session_table *t, const char *request_id)
{
    end_by_id(t, request_id, false);
}

void lmc_sessions_end(lmc_session_table *t, const char *request_id)
{
    end_by_id(t, request_id, true);
}

void lmc_sessions_expire(lmc_session_table *t, uint64_t now_ms, uint64_t ttl_ms)
{
    lmc_session *gone = NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t b = 0; b < SESSION_BUCKETS; b++) {
        lmc_session **link = &t->buckets[b];
        while (*link) {
            lmc_session *x = *link;
            if (now_ms - x->last_used_ms > ttl_ms) {
                *link = x->next;
                x->next = gone;
                gone = x;
            } else {
                link = &x->next;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
    while (gone) {
        lmc_session *x = gone;
        gone = x->next;
        end_owned(t, x);
    }
}

size_t lmc_sessions_poll_draining(lmc_session_table *t)
{
    pthread_mutex_lock(&t->mu);
    lmc_session *list = t->draining;
    t->draining = NULL;
    pthread_mutex_unlock(&t->mu);
    lmc_session *still = NULL, *still_tail = NULL;
    uint64_t now = lmc_sessions_now_ms(t);
    while (list) {
        lmc_session *x = list;
        list = x->next;
        x->next = NULL;
        if (collect(t, x) || now >= locks_expire_ms(t, x)) {
            /* Done, or so late that its locks are gone: an L2 load that ends
             * after this keeps its locks until their TTL. */
            finish(t, x);
            continue;
        }
        if (still_tail)
            still_tail->next = x;
        else
            still = x;
        still_tail = x;
    }
    size_t n_still = 0;
    pthread_mutex_lock(&t->mu);
    if (still) {
        still_tail->next = t->draining;
        t->draining = still;
    }
    for (lmc_session *x = t->draining; x; x = x->next)
        n_still++;
    pthread_mutex_unlock(&t->mu);
    return n_still;
}

void lmc_sessions_usage(lmc_session_table *t, size_t *sessions, size_t *keys)
{
    pthread_mutex_lock(&t->mu);
    *sessions = t->n_sessions;
    *keys = t->n_keys;
    pthread_mutex_unlock(&t->mu);
}
