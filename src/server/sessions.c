/*
 * sessions.c -- the server's session table (see sessions.h).
 *
 * A fixed array of buckets of singly linked sessions, hashed by request id
 * (FNV-1a); one mutex for all of it. The lock rules of sessions.h are
 * collect() and release_locks(), below; nothing else in the server
 * releases a session's locks.
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
    pthread_mutex_t mu;
    lmc_session *buckets[SESSION_BUCKETS];
    size_t n;
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
                                    lmc_session_table **out, lmc_error *err)
{
    lmc_session_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    t->sm = sm;
    t->counts = counts;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return LMC_OK;
}

void lmc_session_table_set_observer(lmc_session_table *t, lmc_lookup_observer fn, void *ud)
{
    t->observer = fn;
    t->observer_ud = ud;
}

void lmc_session_table_destroy(lmc_session_table *t)
{
    if (t == NULL)
        return;
    for (size_t b = 0; b < SESSION_BUCKETS; b++) {
        while (t->buckets[b]) {
            lmc_session *x = t->buckets[b];
            t->buckets[b] = x->next;
            lmc_session_free(x);
        }
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

lmc_session *lmc_session_new(const char *request_id, int64_t world_size, uint32_t extra_count)
{
    lmc_session *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return NULL;
    if ((x->request_id = strdup(request_id)) == NULL) {
        free(x);
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
    free(x->hashes);
    free(x->keys);
    free(x);
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
            t->n--;
            return x;
        }
    }
    return NULL;
}

/*
 * Collect a finished prefetch: fold the bitmap into a whole-chunk prefix
 * (a chunk counts only if every rank is present) and release the locks on
 * keys found past that prefix. False while it is still running. Caller
 * holds mu (or owns x).
 */
static bool collect(lmc_session_table *t, lmc_session *x)
{
    if (!x->has_handle)
        return x->hits_known;
    lmc_bitmap bm;
    /* BUSY: not yet. NOMEM: the result stays with the StorageManager, so the
     * client's next poll collects it. */
    if (lmc_sm_query_prefetch_status(t->sm, &x->handle, &bm) != LMC_OK)
        return false;
    if (t->observer != NULL)
        t->observer(t->observer_ud, x->request_id, &x->handle, &bm);
    size_t ws = (size_t)x->world_size;
    size_t lead = lmc_bitmap_count_leading_ones(&bm);
    size_t hit = lead / ws;
    size_t total = x->n_chunks * ws;
    /* Keys found beyond the whole-chunk prefix hold locks nobody will read. */
    lmc_object_key *extra = malloc((total ? total : 1) * sizeof(*extra));
    size_t n_extra = 0;
    for (size_t i = hit * ws; i < total && extra; i++) {
        if (lmc_bitmap_test(&bm, i))
            extra[n_extra++] = x->keys[i];
    }
    if (n_extra > 0) {
        lmc_sm_finish_read_prefetched(t->sm, extra, n_extra, x->extra_count, NULL);
        LMC_COUNT(t->counts, finish_read_prefetched, 1);
    }
    free(extra);
    lmc_bitmap_free(&bm);
    lmc_prefetch_handle_clear(&x->handle);
    x->has_handle = false;
    x->hits_known = true;
    x->hit_chunks = hit;
    return true;
}

/* Release the prefix's locks that no retrieve will release. Caller owns x (not in the table). */
static void release_locks(lmc_session_table *t, lmc_session *x)
{
    if (x->locks_released || !x->hits_known || x->hit_chunks == 0)
        return;
    size_t n = x->hit_chunks * (size_t)x->world_size;
    lmc_sm_finish_read_prefetched(t->sm, x->keys, n, x->extra_count, NULL);
    LMC_COUNT(t->counts, finish_read_prefetched, 1);
    x->locks_released = true;
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
    t->n++;
    pthread_mutex_unlock(&t->mu);
    if (old) {
        pthread_mutex_lock(&t->mu);
        collect(t, old);
        pthread_mutex_unlock(&t->mu);
        release_locks(t, old);
        lmc_session_free(old);
    }
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

void lmc_sessions_free_lookup_locks(lmc_session_table *t, const char *request_id, uint64_t wait_ms)
{
    pthread_mutex_lock(&t->mu);
    lmc_session *x = find(t, request_id);
    if (x != NULL) {
        /* An abandoned lookup: wait for its prefetch so its locks can go. */
        uint64_t deadline = lmc_mono_ms() + wait_ms;
        while (!collect(t, x) && lmc_mono_ms() < deadline) {
            pthread_mutex_unlock(&t->mu);
            lmc_sleep_ns(500 * 1000);
            pthread_mutex_lock(&t->mu);
            x = find(t, request_id);
            if (x == NULL)
                break;
        }
    }
    lmc_session *y = x ? unlink_session(t, request_id) : NULL;
    pthread_mutex_unlock(&t->mu);
    if (y) {
        release_locks(t, y);
        lmc_session_free(y);
    }
}

void lmc_sessions_end(lmc_session_table *t, const char *request_id)
{
    pthread_mutex_lock(&t->mu);
    lmc_session *x = unlink_session(t, request_id);
    if (x)
        collect(t, x);
    pthread_mutex_unlock(&t->mu);
    if (x) {
        if (x->n_chunks > 0)
            lmc_sm_touch_l1_keys(t->sm, x->keys, x->n_chunks * (size_t)x->world_size);
        lmc_session_free(x);
    }
}

void lmc_sessions_expire(lmc_session_table *t, uint64_t now_ms, uint64_t ttl_ms)
{
    pthread_mutex_lock(&t->mu);
    for (size_t b = 0; b < SESSION_BUCKETS; b++) {
        lmc_session **link = &t->buckets[b];
        while (*link) {
            lmc_session *x = *link;
            if (now_ms - x->last_used_ms > ttl_ms) {
                *link = x->next;
                t->n--;
                collect(t, x);
                lmc_session_free(x);
            } else {
                link = &x->next;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
}
