/*
 * engine.c -- the request logic of `lmcache server` (see engine.h).
 *
 * Owns: keys from tokens (token_hash.c, then one key per chunk and rank),
 * the StorageManager calls of lookup, retrieve and store, and their counts.
 * Session state and its locks are sessions.c's.
 */
#include "server/engine.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "server/token_hash.h"

/* Sessions nobody ended are dropped after this long. */
#define SESSION_TTL_MS (600 * 1000)
/* free_lookup_locks waits this long for an abandoned lookup's prefetch. */
#define FREE_LOCKS_WAIT_MS 5000

struct lmc_engine {
    lmc_storage_manager *sm;
    int chunk_size;
    lmc_counters counters;
    lmc_session_table *sessions;
};

lmc_status lmc_engine_create(lmc_storage_manager *sm, int chunk_size, lmc_engine **out,
                             lmc_error *err)
{
    lmc_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    e->sm = sm;
    e->chunk_size = chunk_size;
    lmc_counters_init(&e->counters);
    lmc_status st = lmc_session_table_create(sm, &e->counters, &e->sessions, err);
    if (st != LMC_OK) {
        lmc_engine_destroy(e);
        return st;
    }
    *out = e;
    return LMC_OK;
}

void lmc_engine_destroy(lmc_engine *e)
{
    if (e == NULL)
        return;
    lmc_session_table_destroy(e->sessions);
    lmc_counters_destroy(&e->counters);
    free(e);
}

lmc_counters *lmc_engine_counters(lmc_engine *e)
{
    return &e->counters;
}

void lmc_engine_set_lookup_observer(lmc_engine *e, lmc_lookup_observer fn, void *ud)
{
    lmc_session_table_set_observer(e->sessions, fn, ud);
}

int lmc_engine_chunk_size(const lmc_engine *e)
{
    return e->chunk_size;
}

/* ---------------------------------------------------------------------- */
/* Keys                                                                    */
/* ---------------------------------------------------------------------- */

static int64_t rank_of(int64_t world_size, int64_t rank)
{
    return lmc_compute_kv_rank((unsigned)world_size, (unsigned)rank, (unsigned)world_size,
                               (unsigned)rank);
}

/* Keys of chunks [c0, c1) for one rank (rank >= 0) or every rank (rank < 0). */
static lmc_status make_keys(const uint8_t (*hashes)[32], size_t c0, size_t c1, const char *model,
                            int64_t world_size, int64_t rank, const char *salt,
                            lmc_object_key **out, size_t *n, lmc_error *err)
{
    size_t per = rank < 0 ? (size_t)world_size : 1;
    size_t total = (c1 - c0) * per;
    lmc_object_key *keys = malloc((total ? total : 1) * sizeof(*keys));
    if (keys == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory for %zu keys", total);
    size_t k = 0;
    for (size_t c = c0; c < c1; c++) {
        for (size_t r = 0; r < per; r++) {
            int64_t rr = rank < 0 ? (int64_t)r : rank;
            lmc_status st = lmc_object_key_make(&keys[k++], hashes[c], 32, model,
                                                rank_of(world_size, rr), 0, salt, err);
            if (st != LMC_OK) {
                free(keys);
                return st;
            }
        }
    }
    *out = keys;
    *n = total;
    return LMC_OK;
}

/* Chain-hash the full chunks of tokens[0:end) (nothing past end is needed). */
static lmc_status hash_tokens(const lmc_engine *e, const lmc_ipc_key *key, uint8_t (**hashes)[32],
                              size_t *n_chunks, lmc_error *err)
{
    size_t cs = (size_t)e->chunk_size;
    size_t n = (size_t)key->end / cs;
    *hashes = malloc((n ? n : 1) * 32);
    if (*hashes == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory hashing %zu chunks", n);
    *n_chunks = lmc_token_chunk_hashes(key->token_ids, key->n_tokens, cs, *hashes, n);
    return LMC_OK;
}

lmc_status lmc_engine_check_aligned(const lmc_engine *e, const char *op, const lmc_ipc_key *key,
                                    lmc_error *err)
{
    int64_t cs = e->chunk_size;
    if (key->start % cs != 0 || key->end % cs != 0 || key->end > (int64_t)key->n_tokens)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: [start, end) = [%lld, %lld) is not chunk-aligned (chunk size "
                             "%lld) inside the %zu tokens",
                             op, (long long)key->start, (long long)key->end, (long long)cs,
                             key->n_tokens);
    return LMC_OK;
}

lmc_status lmc_engine_worker_keys(const lmc_engine *e, const lmc_ipc_key *key,
                                  lmc_object_key **keys, size_t *n, lmc_error *err)
{
    size_t cs = (size_t)e->chunk_size;
    uint8_t(*hashes)[32] = NULL;
    size_t n_chunks;
    lmc_status st = hash_tokens(e, key, &hashes, &n_chunks, err);
    if (st != LMC_OK)
        return st;
    size_t c0 = (size_t)key->start / cs;
    st = make_keys((const uint8_t(*)[32])hashes, c0 < n_chunks ? c0 : n_chunks, n_chunks,
                   key->model_name, key->world_size, key->worker_id, key->cache_salt, keys, n, err);
    free(hashes);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Lookup and sessions                                                     */
/* ---------------------------------------------------------------------- */

lmc_status lmc_engine_lookup(lmc_engine *e, const lmc_ipc_key *key, const lmc_layout_desc *layout,
                             lmc_error *err)
{
    uint8_t(*hashes)[32] = NULL;
    size_t n_chunks = 0, nk;
    lmc_object_key *keys = NULL;
    lmc_status st = hash_tokens(e, key, &hashes, &n_chunks, err);
    if (st == LMC_OK)
        st = make_keys((const uint8_t(*)[32])hashes, 0, n_chunks, key->model_name, key->world_size,
                       -1, key->cache_salt, &keys, &nk, err);
    if (st != LMC_OK) {
        free(hashes);
        return st;
    }
    return lmc_engine_lookup_keys(e, key->request_id, key->world_size, hashes, n_chunks, keys,
                                  layout, (uint32_t)(key->num_kv_readers - 1), err);
}

lmc_status lmc_engine_lookup_keys(lmc_engine *e, const char *request_id, int64_t world_size,
                                  uint8_t (*hashes)[32], size_t n_chunks, lmc_object_key *keys,
                                  const lmc_layout_desc *layout, uint32_t extra_count,
                                  lmc_error *err)
{
    lmc_session *x = lmc_session_new(request_id, world_size, extra_count);
    if (x == NULL) {
        free(hashes);
        free(keys);
        return lmc_error_set(err, LMC_ERR_NOMEM, "lookup: out of memory");
    }
    x->hashes = hashes;
    x->n_chunks = n_chunks;
    x->keys = keys;
    lmc_status st =
        lmc_sm_submit_prefetch_task(e->sm, keys, n_chunks * (size_t)world_size, layout, extra_count,
                                    request_id, LMC_TRIM_PREFIX, &x->handle, err);
    LMC_COUNT(&e->counters, submit_prefetch_task, 1);
    if (st != LMC_OK) {
        lmc_session_free(x);
        return st;
    }
    x->has_handle = true;
    lmc_sessions_put(e->sessions, x);
    return LMC_OK;
}

lmc_session_state lmc_engine_query(lmc_engine *e, const char *request_id, bool lookup_hits_only,
                                   size_t *hit_chunks)
{
    return lmc_sessions_query(e->sessions, request_id, lookup_hits_only, hit_chunks);
}

void lmc_engine_free_lookup_locks(lmc_engine *e, const char *request_id)
{
    lmc_sessions_free_lookup_locks(e->sessions, request_id, FREE_LOCKS_WAIT_MS);
}

void lmc_engine_end_session(lmc_engine *e, const char *request_id)
{
    lmc_sessions_end(e->sessions, request_id);
}

void lmc_engine_expire_sessions(lmc_engine *e)
{
    lmc_sessions_expire(e->sessions, lmc_mono_ms(), SESSION_TTL_MS);
}

void lmc_engine_clear(lmc_engine *e, bool force)
{
    lmc_sm_clear(e->sm, force);
}

/* ---------------------------------------------------------------------- */
/* Retrieve and store                                                      */
/* ---------------------------------------------------------------------- */

lmc_status lmc_engine_retrieve(lmc_engine *e, const lmc_object_key *keys, size_t n,
                               const lmc_kv_copy *copy, bool *ok, lmc_error *err)
{
    lmc_sm_read_ctx ctx;
    lmc_status st = lmc_sm_read_prefetched_enter(e->sm, keys, n, &ctx);
    LMC_COUNT(&e->counters, read_enter, 1);
    if (st != LMC_OK)
        return lmc_error_set(err, st, "retrieve: out of memory");
    lmc_status copied = LMC_OK;
    if (ctx.ok && copy != NULL) {
        for (size_t i = 0; i < n && copied == LMC_OK; i++)
            copied = copy->from_object(copy->ctx, i, &ctx.objs[i], err);
    }
    /*
     * A failed copy releases nothing, like a retrieve refused before the read:
     * whatever fails, the lookup's locks stay for free_lookup_locks (or their
     * TTL), so a session's accounting never depends on where a retrieve failed.
     */
    *ok = ctx.ok && copied == LMC_OK;
    lmc_sm_read_prefetched_exit(e->sm, &ctx, false);
    LMC_COUNT(&e->counters, read_exit, 1);
    if (*ok) {
        /* The copy is done: release this reader's lock (the engine's stream callback). */
        lmc_sm_finish_read_prefetched(e->sm, keys, n, 0, NULL);
        LMC_COUNT(&e->counters, finish_read_prefetched, 1);
    }
    return copied;
}

lmc_status lmc_engine_store(lmc_engine *e, const lmc_object_key *keys, size_t n,
                            const lmc_layout_desc *layout, const lmc_kv_copy *copy, lmc_error *err)
{
    return lmc_engine_store_results(e, keys, n, layout, copy, NULL, err);
}

lmc_status lmc_engine_store_results(lmc_engine *e, const lmc_object_key *keys, size_t n,
                                    const lmc_layout_desc *layout, const lmc_kv_copy *copy,
                                    lmc_l1_error *results, lmc_error *err)
{
    lmc_l1_error *own = results == NULL ? malloc((n ? n : 1) * sizeof(*own)) : NULL;
    lmc_l1_error *errs = results != NULL ? results : own;
    lmc_memory_obj *objs = malloc((n ? n : 1) * sizeof(*objs));
    lmc_object_key *done = malloc((n ? n : 1) * sizeof(*done));
    lmc_status st = LMC_OK;
    if (errs == NULL || objs == NULL || done == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "store: out of memory");
        goto out;
    }
    lmc_sm_reserve_write(e->sm, keys, n, layout, LMC_WRITE_NEW, errs, objs);
    LMC_COUNT(&e->counters, reserve_write, 1);
    size_t n_done = 0;
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            continue; /* already present, locked, or no room: skipped */
        done[n_done++] = keys[i];
        if (copy != NULL && st == LMC_OK)
            st = copy->to_object(copy->ctx, i, &objs[i], err);
    }
    if (st != LMC_OK) {
        /* Fail closed: no object is committed with half the client's bytes. */
        lmc_sm_abort_write(e->sm, done, n_done);
    } else if (n_done > 0) {
        lmc_sm_finish_write(e->sm, done, n_done, NULL);
        LMC_COUNT(&e->counters, finish_write, 1);
    }
out:
    free(own);
    free(objs);
    free(done);
    return st;
}
