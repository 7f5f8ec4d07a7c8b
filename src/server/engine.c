/*
 * engine.c -- the request logic of `lmcache server` (see engine.h).
 *
 * Owns: keys from tokens (token_hash.c, then one key per chunk and rank),
 * the StorageManager calls of lookup, retrieve and store, their counts,
 * and the budget of model names and cache salts. Session state and its
 * locks are sessions.c's.
 */
#include "server/engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "server/token_hash.h"

/*
 * The distinct strings the engine let into keys (model names and cache
 * salts): interned strings are never freed, so a client could otherwise
 * grow the table by one entry per request.
 */
typedef struct name_budget {
    pthread_mutex_t mu;
    uint64_t models, salts;
} name_budget;

struct lmc_engine {
    lmc_storage_manager *sm;
    int chunk_size;
    lmc_server_limits limits;
    lmc_counters counters;
    lmc_session_table *sessions;
    name_budget names;
};

lmc_status lmc_engine_create(lmc_storage_manager *sm, int chunk_size,
                             const lmc_server_limits *limits, uint64_t read_ttl_ms,
                             lmc_engine **out, lmc_error *err)
{
    lmc_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    e->sm = sm;
    e->chunk_size = chunk_size;
    if (limits != NULL)
        e->limits = *limits;
    else
        lmc_server_limits_init(&e->limits);
    lmc_counters_init(&e->counters);
    pthread_mutex_init(&e->names.mu, NULL);
    lmc_session_limits sl = {.max_sessions = (size_t)e->limits.max_sessions,
                             .max_keys = (size_t)e->limits.max_session_keys,
                             .read_ttl_ms = read_ttl_ms};
    lmc_status st = lmc_session_table_create(sm, &e->counters, &sl, &e->sessions, err);
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
    pthread_mutex_destroy(&e->names.mu);
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

/* Let one string into keys if it is known already or its budget has room. */
static lmc_status admit(name_budget *b, uint64_t *used, uint64_t max, const char *op,
                        const char *what, const char *flag, const char *s, lmc_error *err)
{
    size_t len = strlen(s);
    if (lmc_intern_find(s, len) != NULL)
        return LMC_OK; /* costs nothing more */
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&b->mu);
    if (*used >= max)
        st = lmc_error_set(err, LMC_ERR_BUSY,
                           "%s: this %s is new and the server already took %llu distinct ones, "
                           "its limit (%s)",
                           op, what, (unsigned long long)max, flag);
    else
        (*used)++;
    pthread_mutex_unlock(&b->mu);
    return st;
}

static lmc_status admit_names(lmc_engine *e, const char *op, const lmc_ipc_key *key, lmc_error *err)
{
    lmc_status st = admit(&e->names, &e->names.models, e->limits.max_model_names, op, "model name",
                          "--max-model-names", key->model_name, err);
    if (st == LMC_OK && key->cache_salt != NULL && key->cache_salt[0] != '\0')
        st = admit(&e->names, &e->names.salts, e->limits.max_cache_salts, op, "cache_salt",
                   "--max-cache-salts", key->cache_salt, err);
    return st;
}

/* Keys of chunks [c0, c1) for one rank (rank >= 0) or every rank (rank < 0), into keys. */
static lmc_status make_keys(const uint8_t (*hashes)[32], size_t c0, size_t c1, const char *model,
                            int64_t world_size, int64_t rank, const char *salt,
                            lmc_object_key *keys, lmc_error *err)
{
    size_t per = rank < 0 ? (size_t)world_size : 1;
    size_t ml = strlen(model), sl = salt != NULL ? strlen(salt) : 0;
    /* Every key shares the model and salt: validated and interned once. */
    lmc_object_key_cache cache = {0};
    size_t k = 0;
    for (size_t c = c0; c < c1; c++) {
        for (size_t r = 0; r < per; r++) {
            int64_t rr = rank < 0 ? (int64_t)r : rank;
            lmc_status st =
                lmc_object_key_make_cached(&cache, &keys[k++], hashes[c], 32, model, ml,
                                           rank_of(world_size, rr), 0, salt ? salt : "", sl, err);
            if (st != LMC_OK)
                return st;
        }
    }
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

lmc_status lmc_engine_check_key(const lmc_engine *e, const char *op, const lmc_ipc_key *key,
                                lmc_error *err)
{
    int64_t cs = e->chunk_size;
    if (key->n_tokens > e->limits.max_lookup_tokens)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: key.token_ids has %zu tokens, more than the %llu this server "
                             "takes (--max-lookup-tokens)",
                             op, key->n_tokens, (unsigned long long)e->limits.max_lookup_tokens);
    if (key->start % cs != 0 || key->end % cs != 0 || key->end > (int64_t)key->n_tokens)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: [start, end) = [%lld, %lld) is not chunk-aligned (chunk size "
                             "%lld) inside the %zu tokens",
                             op, (long long)key->start, (long long)key->end, (long long)cs,
                             key->n_tokens);
    return LMC_OK;
}

lmc_status lmc_engine_worker_keys(lmc_engine *e, const char *op, const lmc_ipc_key *key,
                                  lmc_object_key **keys, size_t *n, lmc_error *err)
{
    size_t cs = (size_t)e->chunk_size;
    uint8_t(*hashes)[32] = NULL;
    size_t n_chunks = 0;
    *keys = NULL;
    lmc_status st = admit_names(e, op, key, err);
    if (st == LMC_OK)
        st = hash_tokens(e, key, &hashes, &n_chunks, err);
    size_t c0 = (size_t)key->start / cs;
    if (c0 > n_chunks)
        c0 = n_chunks;
    if (st == LMC_OK &&
        (*keys = malloc((n_chunks - c0 ? n_chunks - c0 : 1) * sizeof(**keys))) == NULL)
        st = lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory for %zu keys", op, n_chunks - c0);
    if (st == LMC_OK)
        st = make_keys((const uint8_t(*)[32])hashes, c0, n_chunks, key->model_name, key->world_size,
                       key->worker_id, key->cache_salt, *keys, err);
    free(hashes);
    if (st != LMC_OK) {
        free(*keys);
        *keys = NULL;
        return st;
    }
    *n = n_chunks - c0;
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Lookup and sessions                                                     */
/* ---------------------------------------------------------------------- */

/* Submit x's prefetch and put it in the table (its reservation is made); x is taken. */
static lmc_status start_session(lmc_engine *e, lmc_session *x, const lmc_layout_desc *layout,
                                lmc_error *err)
{
    /* Before the prefetch takes its locks: their TTL counts from no earlier than this. */
    x->locked_ms = lmc_sessions_now_ms(e->sessions);
    lmc_status st = lmc_sm_submit_prefetch_task(e->sm, x->keys, x->n_chunks * (size_t)x->world_size,
                                                layout, x->extra_count, x->request_id,
                                                LMC_TRIM_PREFIX, &x->handle, err);
    LMC_COUNT(&e->counters, submit_prefetch_task, 1);
    if (st != LMC_OK) {
        lmc_sessions_unreserve(e->sessions, x->n_chunks * (size_t)x->world_size);
        lmc_session_free(x);
        return st;
    }
    x->has_handle = true;
    lmc_sessions_put(e->sessions, x);
    return LMC_OK;
}

/* Room for a lookup of n_keys keys, or an error naming the limit. */
static lmc_status reserve(lmc_engine *e, size_t n_keys, lmc_error *err)
{
    lmc_status st = lmc_sessions_reserve(e->sessions, n_keys, e->limits.session_ttl_s * 1000, err);
    if (st != LMC_OK) {
        char msg[LMC_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        lmc_error_set(err, st, "lookup: %s", msg);
    }
    return st;
}

/* A lookup admitted by lmc_engine_lookup_begin: its session, and room for its hashes. */
struct lmc_lookup_job {
    const lmc_ipc_key *key; /* borrowed from the request */
    lmc_layout_desc layout;
    lmc_session *x;
    size_t n_chunks, n_keys;
    uint8_t (*hashes)[32]; /* n_chunks of them, after the job */
};

lmc_status lmc_engine_lookup_begin(lmc_engine *e, const lmc_ipc_key *key,
                                   const lmc_layout_desc *layout, lmc_lookup_job **out,
                                   lmc_error *err)
{
    *out = NULL;
    size_t n_chunks = (size_t)key->end / (size_t)e->chunk_size;
    size_t ws = (size_t)key->world_size;
    size_t n_keys = n_chunks * ws;
    if (n_keys > e->limits.max_session_keys)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "lookup: %zu chunks x world size %zu = %zu keys, more than the %llu "
                             "all sessions may hold (--max-session-keys)",
                             n_chunks, ws, n_keys, (unsigned long long)e->limits.max_session_keys);
    /* lmc_engine_check_key's rule, kept for callers that did not check. */
    if (key->end > (int64_t)key->n_tokens)
        return lmc_error_set(err, LMC_ERR_INVALID, "lookup: end %lld is past the %zu tokens",
                             (long long)key->end, key->n_tokens);
    lmc_status st = admit_names(e, "lookup", key, err);
    if (st != LMC_OK || (st = reserve(e, n_keys, err)) != LMC_OK)
        return st;
    lmc_lookup_job *job = malloc(sizeof(*job) + (n_chunks ? n_chunks : 1) * 32);
    lmc_session *x = job == NULL ? NULL
                                 : lmc_session_new(key->request_id, key->world_size,
                                                   (uint32_t)(key->num_kv_readers - 1), n_keys);
    if (x == NULL) {
        free(job);
        lmc_sessions_unreserve(e->sessions, n_keys);
        return lmc_error_set(err, LMC_ERR_NOMEM, "lookup: out of memory");
    }
    *job = (lmc_lookup_job){.key = key,
                            .layout = *layout,
                            .x = x,
                            .n_chunks = n_chunks,
                            .n_keys = n_keys,
                            .hashes = (uint8_t(*)[32])(job + 1)};
    *out = job;
    return LMC_OK;
}

lmc_status lmc_engine_lookup_finish(lmc_engine *e, lmc_lookup_job *job, lmc_error *err)
{
    const lmc_ipc_key *key = job->key;
    lmc_session *x = job->x;
    size_t n_chunks = job->n_chunks;
    lmc_token_chunk_hashes(key->token_ids, key->n_tokens, (size_t)e->chunk_size, job->hashes,
                           n_chunks);
    x->n_chunks = n_chunks;
    lmc_status st = make_keys((const uint8_t(*)[32])job->hashes, 0, n_chunks, key->model_name,
                              key->world_size, -1, key->cache_salt, x->keys, err);
    if (st != LMC_OK) {
        lmc_engine_lookup_cancel(e, job);
        return st;
    }
    st = start_session(e, x, &job->layout, err); /* takes x, reservation and all */
    free(job);
    return st;
}

void lmc_engine_lookup_cancel(lmc_engine *e, lmc_lookup_job *job)
{
    if (job == NULL)
        return;
    lmc_session_free(job->x);
    lmc_sessions_unreserve(e->sessions, job->n_keys);
    free(job);
}

lmc_status lmc_engine_lookup(lmc_engine *e, const lmc_ipc_key *key, const lmc_layout_desc *layout,
                             lmc_error *err)
{
    lmc_lookup_job *job;
    lmc_status st = lmc_engine_lookup_begin(e, key, layout, &job, err);
    return st != LMC_OK ? st : lmc_engine_lookup_finish(e, job, err);
}

lmc_status lmc_engine_lookup_keys(lmc_engine *e, const char *request_id, int64_t world_size,
                                  size_t n_chunks, const lmc_object_key *keys,
                                  const lmc_layout_desc *layout, uint32_t extra_count,
                                  lmc_error *err)
{
    size_t n_keys = n_chunks * (size_t)world_size;
    lmc_status st = reserve(e, n_keys, err);
    if (st != LMC_OK)
        return st;
    lmc_session *x = lmc_session_new(request_id, world_size, extra_count, n_keys);
    if (x == NULL) {
        lmc_sessions_unreserve(e->sessions, n_keys);
        return lmc_error_set(err, LMC_ERR_NOMEM, "lookup: out of memory");
    }
    if (n_keys > 0)
        memcpy(x->keys, keys, n_keys * sizeof(*keys));
    x->n_chunks = n_chunks;
    return start_session(e, x, layout, err);
}

lmc_session_state lmc_engine_query(lmc_engine *e, const char *request_id, bool lookup_hits_only,
                                   size_t *hit_chunks)
{
    return lmc_sessions_query(e->sessions, request_id, lookup_hits_only, hit_chunks);
}

void lmc_engine_free_lookup_locks(lmc_engine *e, const char *request_id)
{
    lmc_sessions_free_lookup_locks(e->sessions, request_id);
}

void lmc_engine_end_session(lmc_engine *e, const char *request_id)
{
    lmc_sessions_end(e->sessions, request_id);
}

void lmc_engine_expire_sessions(lmc_engine *e)
{
    lmc_sessions_expire(e->sessions, lmc_mono_ms(), e->limits.session_ttl_s * 1000);
}

size_t lmc_engine_poll_draining(lmc_engine *e)
{
    return lmc_sessions_poll_draining(e->sessions);
}

void lmc_engine_session_usage(lmc_engine *e, size_t *sessions, size_t *keys)
{
    lmc_sessions_usage(e->sessions, sessions, keys);
}

void lmc_engine_clear(lmc_engine *e, bool force)
{
    lmc_sm_clear(e->sm, force);
}

/* ---------------------------------------------------------------------- */
/* Retrieve and store                                                      */
/* ---------------------------------------------------------------------- */

/* A request's chunk copies as items of a copy pool batch (copy_pool.h). */
typedef struct copy_items {
    const lmc_kv_copy *copy;
    const lmc_memory_obj *objs; /* by chunk */
    const size_t *chunks;       /* store: item -> chunk (the keys it reserved) */
} copy_items;

static lmc_status copy_out_item(void *ctx, size_t i, lmc_error *err)
{
    const copy_items *x = ctx;
    return x->copy->from_object(x->copy->ctx, i, &x->objs[i], err);
}

static lmc_status copy_in_item(void *ctx, size_t i, lmc_error *err)
{
    const copy_items *x = ctx;
    size_t chunk = x->chunks[i];
    return x->copy->to_object(x->copy->ctx, chunk, &x->objs[chunk], err);
}

static size_t objs_bytes(const lmc_memory_obj *objs, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += (size_t)objs[i].size;
    return bytes;
}

lmc_status lmc_engine_retrieve(lmc_engine *e, const char *request_id, const lmc_object_key *keys,
                               size_t n, size_t c0, int64_t rank, const lmc_kv_copy *copy, bool *ok,
                               lmc_error *err)
{
    /* Only locks the session holds are read and released (sessions.h). */
    uint64_t expires_ms;
    *ok = false;
    if (!lmc_sessions_claim(e->sessions, request_id, keys, n, c0, rank, &expires_ms))
        return LMC_OK;
    lmc_sm_read_ctx ctx;
    lmc_status st = lmc_sm_read_prefetched_enter(e->sm, keys, n, &ctx);
    LMC_COUNT(&e->counters, read_enter, 1);
    if (st != LMC_OK)
        return lmc_error_set(err, st, "retrieve: out of memory");
    lmc_status copied = LMC_OK;
    if (ctx.ok && copy != NULL) {
        copy_items items = {.copy = copy, .objs = ctx.objs};
        copied =
            lmc_copy_pool_run(copy->pool, n, objs_bytes(ctx.objs, n), copy_out_item, &items, err);
    }
    bool read = ctx.ok; /* exit clears ctx */
    *ok = read && copied == LMC_OK;
    lmc_sm_read_prefetched_exit(e->sm, &ctx, false);
    LMC_COUNT(&e->counters, read_exit, 1);
    /*
     * Release the claimed locks (the engine's stream callback) once the copy
     * is over, whether or not it succeeded: they are this retrieve's now, and
     * the session no longer counts them. Not when they may have expired
     * meanwhile and been taken afresh by another request.
     */
    if (read && lmc_sessions_now_ms(e->sessions) < expires_ms) {
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
    size_t *chunks = malloc((n ? n : 1) * sizeof(*chunks));
    lmc_status st = LMC_OK;
    if (errs == NULL || objs == NULL || done == NULL || chunks == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "store: out of memory");
        goto out;
    }
    lmc_sm_reserve_write(e->sm, keys, n, layout, LMC_WRITE_NEW, errs, objs);
    LMC_COUNT(&e->counters, reserve_write, 1);
    size_t n_done = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            continue; /* already present, locked, or no room: skipped */
        chunks[n_done] = i;
        done[n_done++] = keys[i];
        bytes += (size_t)objs[i].size;
    }
    if (copy != NULL && n_done > 0) {
        copy_items items = {.copy = copy, .objs = objs, .chunks = chunks};
        st = lmc_copy_pool_run(copy->pool, n_done, bytes, copy_in_item, &items, err);
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
    free(chunks);
    return st;
}
