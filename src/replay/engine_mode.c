/*
 * engine_mode.c -- `trace replay --mode engine` (see engine_mode.h).
 *
 * Owns: the engine, the waiting requests (an array in record order whose
 * slots keep their key buffers when a request is done, so a steady replay
 * reuses them), and per-rank scratch for retrieve and store.
 *
 * The lookup's counters come from the engine's lookup observer: it runs
 * inside lmc_engine_lookup_keys (the handle at submit) and inside the
 * query that collects the prefetch (the found-key bitmap), and fills the
 * outcome of the request being looked up or queried (m->current) with the
 * same function mode calls uses (lmc_outcome_prefetch_finish).
 */
#include "replay/engine_mode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/keyvec.h"
#include "server/config.h"
#include "server/engine.h"
#include "trace/ops.h"

/* The requests' own calls, in the replay's per-op latency. */
#define Q_RETRIEVE "engine.retrieve"
#define Q_STORE "engine.store"
#define Q_END_SESSION "engine.end_session"

typedef struct request {
    uint64_t index;  /* its submit_prefetch_task record's */
    char id[32];     /* the session's request id: "r<index>" */
    lmc_keyvec keys; /* chunk-major x rank; the array stays with the slot */
    size_t n_chunks, ws;
    uint32_t extra_count;
    lmc_layout_desc layout;
    lmc_replay_outcome outcome;
} request;

struct lmc_replay_engine {
    lmc_replay_ctx *ctx; /* borrowed */
    lmc_storage_manager *sm;
    lmc_replay_stats *stats; /* borrowed */
    lmc_engine *engine;
    request *reqs; /* [0, n) wait; [n, cap) are free slots with their buffers */
    size_t n, cap;
    request *current; /* the request the observer fills (lookup or query in progress) */
    lmc_kv_copy zero; /* stores write zeros (NULL copy when nothing can read them) */
    bool zero_fill;
    /* Scratch: one rank's keys and their store results (cap_errs entries). */
    lmc_keyvec rank;
    lmc_l1_error *errs;
    size_t cap_errs;
};

static size_t poll_requests(void *ud);
static size_t abandon_requests(void *ud);
static const lmc_replay_pending_ops g_ops = {poll_requests, abandon_requests};

/* ---------------------------------------------------------------------- */
/* Lifecycle                                                               */
/* ---------------------------------------------------------------------- */

static lmc_status zero_object(void *ctx, size_t chunk, const lmc_memory_obj *obj, lmc_error *err)
{
    (void)ctx, (void)chunk, (void)err;
    memset(obj->data, 0, obj->size);
    return LMC_OK;
}

/* The lookup observer: the session's view of the prefetch, into the current request. */
static void observe(void *ud, const char *request_id, const lmc_prefetch_handle *h,
                    const lmc_bitmap *found)
{
    lmc_replay_engine *m = ud;
    request *r = m->current;
    if (r == NULL || strcmp(r->id, request_id) != 0)
        return;
    lmc_replay_outcome *o = &r->outcome;
    if (found != NULL) {
        lmc_outcome_prefetch_finish(o, h, found, false);
        return;
    }
    /*
     * At submit, as mode calls counts it; the rest as it would stand if the
     * L2 part never finished, so that giving up needs only the flag.
     */
    o->v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = (uint32_t)h->l1_found_count;
    o->v[LMC_OC_SUBMIT_PREFETCH_l2_sent] =
        h->prefetch_request_id >= 0 ? (uint32_t)h->l2_orig_count : 0;
    lmc_outcome_prefetch_finish(o, h, NULL, false);
    o->pending = true;
}

lmc_status lmc_replay_engine_create(lmc_replay_ctx *ctx, lmc_replay_stats *stats, bool zero_fill,
                                    uint64_t read_ttl_ms, lmc_replay_engine **out, lmc_error *err)
{
    lmc_replay_engine *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "engine mode: out of memory");
    m->ctx = ctx;
    m->sm = lmc_replay_ctx_sm(ctx);
    m->stats = stats;
    m->zero_fill = zero_fill;
    m->zero = (lmc_kv_copy){.to_object = zero_object};
    /*
     * Lookups come as keys, so the chunk size (for token hashing) is the
     * server's default. The recording's server had no limits on sessions
     * (LMCache has none): the requests overlap as they did, unrefused.
     */
    lmc_server_config sc;
    lmc_server_config_init(&sc);
    lmc_server_limits limits = sc.limits;
    limits.max_sessions = SIZE_MAX;
    limits.max_session_keys = SIZE_MAX;
    lmc_status st = lmc_engine_create(m->sm, sc.chunk_size, &limits, read_ttl_ms, &m->engine, err);
    lmc_server_config_free(&sc);
    if (st != LMC_OK) {
        free(m);
        return st;
    }
    lmc_engine_set_lookup_observer(m->engine, observe, m);
    lmc_replay_ctx_set_pending(ctx, &g_ops, m);
    *out = m;
    return LMC_OK;
}

void lmc_replay_engine_destroy(lmc_replay_engine *m)
{
    if (m == NULL)
        return;
    /* The context is gone by now (it gave up on what waited): m->ctx is not touched. */
    /* Sessions still open are the engine's: it releases what they hold and frees them. */
    lmc_engine_destroy(m->engine);
    for (size_t i = 0; i < m->cap; i++)
        lmc_keyvec_free(&m->reqs[i].keys);
    free(m->reqs);
    lmc_keyvec_free(&m->rank);
    free(m->errs);
    free(m);
}

size_t lmc_replay_engine_waiting(const lmc_replay_engine *m)
{
    return m->n;
}

/* ---------------------------------------------------------------------- */
/* A request's continuation                                                */
/* ---------------------------------------------------------------------- */

static lmc_status ensure_scratch(lmc_replay_engine *m, size_t n, lmc_error *err)
{
    if (lmc_keyvec_reserve(&m->rank, n) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_NOMEM, "engine mode: out of memory for %zu keys", n);
    if (n > m->cap_errs) {
        lmc_l1_error *e = realloc(m->errs, m->rank.cap * sizeof(*e));
        if (e == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "engine mode: out of memory for %zu keys", n);
        m->errs = e;
        m->cap_errs = m->rank.cap;
    }
    return LMC_OK;
}

/* One rank's keys of chunks [c0, c1) into the scratch; returns how many. */
static size_t rank_keys(lmc_replay_engine *m, const request *r, size_t rank, size_t c0, size_t c1)
{
    size_t k = 0;
    for (size_t c = c0; c < c1; c++)
        m->rank.keys[k++] = r->keys.keys[c * r->ws + rank];
    return k;
}

static double seconds_since(uint64_t t0)
{
    return (double)(lmc_mono_ns() - t0) / 1e9;
}

/* Retrieve [0, hit) per rank and reader. */
static void retrieve(lmc_replay_engine *m, request *r, size_t hit)
{
    lmc_replay_outcome *o = &r->outcome;
    for (size_t rank = 0; rank < r->ws && hit > 0; rank++) {
        size_t n = rank_keys(m, r, rank, 0, hit);
        for (uint32_t reader = 0; reader <= r->extra_count; reader++) {
            bool ok = false;
            lmc_error err;
            uint64_t t0 = lmc_mono_ns();
            lmc_status st = lmc_engine_retrieve(m->engine, r->id, m->rank.keys, n, 0, (int64_t)rank,
                                                NULL, &ok, &err);
            lmc_replay_stats_record(m->stats, Q_RETRIEVE, seconds_since(t0), st != LMC_OK);
            o->v[ok ? LMC_OC_SUBMIT_PREFETCH_read : LMC_OC_SUBMIT_PREFETCH_read_failed] +=
                (uint32_t)n;
        }
    }
}

/* Store [hit, n_chunks) per rank, each key's result counted by reason. */
static void store(lmc_replay_engine *m, request *r, size_t hit)
{
    lmc_replay_outcome *o = &r->outcome;
    for (size_t rank = 0; rank < r->ws && hit < r->n_chunks; rank++) {
        size_t n = rank_keys(m, r, rank, hit, r->n_chunks);
        lmc_error err;
        uint64_t t0 = lmc_mono_ns();
        lmc_status st = lmc_engine_store_results(m->engine, m->rank.keys, n, &r->layout,
                                                 m->zero_fill ? &m->zero : NULL, m->errs, &err);
        lmc_replay_stats_record(m->stats, Q_STORE, seconds_since(t0), st != LMC_OK);
        if (st == LMC_OK)
            st = lmc_replay_ctx_states_for(m->ctx, m->rank.keys, n, m->errs,
                                           lmc_outcome_reserve_needs_state, &err);
        if (st != LMC_OK) {
            o->v[LMC_OC_SUBMIT_PREFETCH_store_other] += (uint32_t)n;
            continue;
        }
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            lmc_l1_key_state ks =
                lmc_replay_ctx_next_state(m->ctx, m->errs[i], lmc_outcome_reserve_needs_state, &j);
            o->v[lmc_outcome_store_reason(m->errs[i], ks)]++;
        }
    }
}

/* The lookup answered hit whole chunks: read them, store the rest, end the session. */
static void serve(lmc_replay_engine *m, request *r, size_t hit)
{
    if (hit > r->n_chunks)
        hit = r->n_chunks;
    r->outcome.v[LMC_OC_SUBMIT_PREFETCH_hit_keys] = (uint32_t)(hit * r->ws);
    retrieve(m, r, hit);
    store(m, r, hit);
    uint64_t t0 = lmc_mono_ns();
    lmc_engine_end_session(m->engine, r->id);
    lmc_replay_stats_record(m->stats, Q_END_SESSION, seconds_since(t0), false);
    r->outcome.pending = false;
    lmc_replay_ctx_complete(m->ctx, r->index, &r->outcome);
}

/* Move the waiting requests [0, n) down over the done ones, keeping every slot's buffer. */
static void swap_requests(request *a, request *b)
{
    request t = *a;
    *a = *b;
    *b = t;
}

static size_t poll_requests(void *ud)
{
    lmc_replay_engine *m = ud;
    size_t kept = 0;
    /* In record order: requests that answer in the same poll are served in that order. */
    for (size_t i = 0; i < m->n; i++) {
        request *r = &m->reqs[i];
        size_t hit = 0;
        m->current = r;
        lmc_session_state s = lmc_engine_query(m->engine, r->id, false, &hit);
        m->current = NULL;
        if (s == LMC_SESSION_PENDING) {
            swap_requests(&m->reqs[kept++], r);
            continue;
        }
        if (s == LMC_SESSION_READY) {
            serve(m, r, hit);
        } else {
            /* Cannot happen (each request has an id of its own); report it as unanswered. */
            r->outcome.v[LMC_OC_SUBMIT_PREFETCH_unfinished] = 1;
            r->outcome.pending = false;
            lmc_replay_ctx_complete(m->ctx, r->index, &r->outcome);
        }
    }
    m->n = kept;
    return kept;
}

static size_t abandon_requests(void *ud)
{
    lmc_replay_engine *m = ud;
    size_t n = m->n;
    for (size_t i = 0; i < n; i++) {
        request *r = &m->reqs[i];
        /* What the observer left at submit is the outcome of a lookup that never answered. */
        r->outcome.v[LMC_OC_SUBMIT_PREFETCH_unfinished] = 1;
        r->outcome.pending = false;
        lmc_replay_ctx_complete(m->ctx, r->index, &r->outcome);
        lmc_engine_end_session(m->engine, r->id);
    }
    m->n = 0;
    return n;
}

/* ---------------------------------------------------------------------- */
/* Handlers                                                                */
/* ---------------------------------------------------------------------- */

/*
 * The world size of a lookup's keys, checked: chunk-major x rank, key i of
 * rank i % ws with kv_rank ws<<24 | rank<<16 | ws<<8 | rank, and the ranks
 * of one chunk naming the same chunk.
 */
static lmc_status world_size_of(const lmc_trace_record *rec, const lmc_object_key *keys, size_t n,
                                size_t *ws_out, lmc_error *err)
{
    *ws_out = 1;
    if (n == 0)
        return LMC_OK;
    size_t ws = (size_t)((uint64_t)keys[0].kv_rank >> 24) & 0xFF;
    if (ws == 0 || n % ws != 0)
        return lmc_error_set(
            err, LMC_ERR_FORMAT,
            "%s: %zu keys do not fit world size %zu (from keys[0].kv_rank 0x%" PRIx64
            "): engine mode needs the server's keys, chunk-major x rank",
            rec->qualname, n, ws, (uint64_t)keys[0].kv_rank);
    for (size_t i = 0; i < n; i++) {
        size_t rank = i % ws;
        int64_t want =
            lmc_compute_kv_rank((unsigned)ws, (unsigned)rank, (unsigned)ws, (unsigned)rank);
        if (keys[i].kv_rank != want)
            return lmc_error_set(err, LMC_ERR_FORMAT,
                                 "%s: keys[%zu] has kv_rank 0x%" PRIx64 ", not 0x%" PRIx64
                                 " (rank %zu of world size %zu, keys chunk-major x rank)",
                                 rec->qualname, i, (uint64_t)keys[i].kv_rank, (uint64_t)want, rank,
                                 ws);
        const lmc_object_key *first = &keys[i - rank];
        if (rank > 0 &&
            (keys[i].chunk_hash_len != first->chunk_hash_len ||
             memcmp(keys[i].chunk_hash, first->chunk_hash, first->chunk_hash_len) != 0 ||
             keys[i].model_name != first->model_name || keys[i].cache_salt != first->cache_salt))
            return lmc_error_set(err, LMC_ERR_FORMAT,
                                 "%s: keys[%zu] (rank %zu) is not the chunk of keys[%zu] (rank 0): "
                                 "engine mode needs the server's keys, chunk-major x rank",
                                 rec->qualname, i, rank, i - rank);
    }
    *ws_out = ws;
    return LMC_OK;
}

/* A free slot at reqs[n] with room for n_keys keys. */
static lmc_status take_slot(lmc_replay_engine *m, size_t n_keys, request **out, lmc_error *err)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        request *nr = realloc(m->reqs, cap * sizeof(*nr));
        if (nr == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "engine mode: out of memory");
        memset(nr + m->cap, 0, (cap - m->cap) * sizeof(*nr));
        m->reqs = nr;
        m->cap = cap;
    }
    request *r = &m->reqs[m->n];
    if (lmc_keyvec_reserve(&r->keys, n_keys) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_NOMEM, "engine mode: out of memory for %zu keys", n_keys);
    *out = r;
    return LMC_OK;
}

static lmc_status serve_lookup(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_error *err)
{
    lmc_replay_engine *m = lmc_replay_ctx_pending_ud(ctx, &g_ops);
    if (m == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: engine mode is not set up for this replay",
                             rec->qualname);
    size_t n, ws;
    const lmc_object_key *keys;
    const lmc_layout_desc *layout;
    uint32_t extra;
    request *r = NULL;
    lmc_status st = lmc_replay_lookup_args(ctx, rec, &keys, &n, &layout, &extra, err);
    if (st == LMC_OK)
        st = world_size_of(rec, keys, n, &ws, err);
    if (st == LMC_OK)
        st = ensure_scratch(m, n / ws, err);
    if (st == LMC_OK)
        st = take_slot(m, n, &r, err);
    if (st != LMC_OK)
        return st;
    r->index = lmc_replay_ctx_index(ctx);
    snprintf(r->id, sizeof(r->id), "r%" PRIu64, r->index);
    if (n > 0)
        memcpy(r->keys.keys, keys, n * sizeof(*keys));
    r->n_chunks = n / ws;
    r->ws = ws;
    r->extra_count = extra;
    r->layout = *layout;
    lmc_replay_outcome_begin(&r->outcome, LMC_TRACE_OP_SUBMIT_PREFETCH, keys, n);
    /* The session copies the keys: the request keeps r->keys for its reads. */
    m->current = r;
    st = lmc_engine_lookup_keys(m->engine, r->id, (int64_t)ws, r->n_chunks, keys, layout, extra,
                                err);
    m->current = NULL;
    if (st != LMC_OK)
        return lmc_error_prefix(err, "%s", rec->qualname);
    m->n++;
    /* The record's outcome is final when the request is served (poll_requests). */
    lmc_replay_outcome *o = lmc_replay_ctx_current(ctx);
    *o = r->outcome;
    o->pending = true;
    r->outcome.pending = true;
    return LMC_OK;
}

/* A recorded read or write: not reissued; its keys are kept for the recording's hit rate. */
static lmc_status not_reissued(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_trace_op op,
                               lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    lmc_status st = lmc_replay_check_args(rec, op, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, &keys, &n, err);
    if (st != LMC_OK)
        return st;
    lmc_replay_outcome *o = lmc_replay_ctx_current(ctx);
    lmc_replay_outcome_begin(o, op, keys, n);
    o->not_reissued = true;
    return LMC_OK;
}

#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    static lmc_status not_reissued_##name(lmc_replay_ctx *ctx, const lmc_trace_record *rec,        \
                                          lmc_error *err)                                          \
    {                                                                                              \
        return not_reissued(ctx, rec, LMC_TRACE_OP_##ID, err);                                     \
    }
#include "trace/ops.def"
#undef LMC_TRACE_OP

lmc_dispatcher *lmc_replay_engine_dispatcher(void)
{
    static const lmc_replay_handler recorded[LMC_TRACE_OP_COUNT_] = {
#define LMC_TRACE_OP(ID, name, method, ...) [LMC_TRACE_OP_##ID] = not_reissued_##name,
#include "trace/ops.def"
#undef LMC_TRACE_OP
    };
    lmc_replay_handler by_op[LMC_TRACE_OP_COUNT_];
    memcpy(by_op, recorded, sizeof(by_op));
    by_op[LMC_TRACE_OP_SUBMIT_PREFETCH] = serve_lookup;
    return lmc_dispatcher_for_ops(by_op);
}
