/*
 * engine.h -- the request logic of `lmcache server`: what an inference
 * engine's requests do to the StorageManager, with no transport.
 *
 * Owns: the session table (sessions.h), the call counters (counters.h)
 * and the rules that turn a request into StorageManager calls: a chunk's
 * key is (chunk hash, model, kv_rank, group 0, cache salt) with kv_rank =
 * world_size<<24 | rank<<16 | world_size<<8 | rank; a lookup covers every
 * rank, chunk-major, so a leading run of found keys maps to whole chunks;
 * retrieve and store cover one worker's rank.
 *
 * It knows nothing of ZMQ, shared memory or the wire format: callers give
 * it the request's fields (an lmc_ipc_key: tokens, range, model, ...) or
 * keys directly, and a layout; the KV bytes move through a small seam
 * (lmc_kv_copy) that the server backs with a client's region (regions.h)
 * and that may be NULL (no payload: the copy is skipped), so a replay can
 * run the same logic against a StorageManager alone.
 *
 * Limits (limits.h): the tokens of one key, the sessions and the keys they
 * hold (sessions.h), the session TTL, and how many distinct model names
 * and cache salts it lets into keys -- interned strings live until exit,
 * so these are bounded rather than reclaimed. A request past a limit fails
 * with a message naming the flag; nothing is locked or kept for it.
 *
 * Threads: any; the session table, the counters and the name budget have
 * their own mutexes, and the StorageManager is thread-safe.
 */
#ifndef LMC_SERVER_ENGINE_H
#define LMC_SERVER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/memory_obj.h"
#include "lmcache/status.h"
#include "lmcache/storage_manager.h"
#include "server/copy_pool.h"
#include "server/counters.h"
#include "server/limits.h"
#include "server/protocol.h"
#include "server/sessions.h"

/*
 * How one request's KV bytes move between the client and L1 objects. chunk
 * counts the request's chunks from its first (key i of retrieve/store). A
 * copy may fail (the client's memory is not what it registered, the object
 * has another layout): it then sets err, and the request fails.
 */
typedef struct lmc_kv_copy {
    /* store: the client's bytes of the chunk into obj */
    lmc_status (*to_object)(void *ctx, size_t chunk, const lmc_memory_obj *obj, lmc_error *err);
    /* retrieve: obj into the client's place for the chunk */
    lmc_status (*from_object)(void *ctx, size_t chunk, const lmc_memory_obj *obj, lmc_error *err);
    void *ctx;
    /* Helpers that take a share of a request's chunks (NULL: copy on the calling thread). */
    lmc_copy_pool *pool;
} lmc_kv_copy;

typedef struct lmc_engine lmc_engine;

/*
 * sm is borrowed and must outlive the engine; chunk_size is in tokens;
 * limits NULL means the defaults; read_ttl_ms is the StorageManager's L1
 * read-lock TTL (--l1-read-ttl-seconds), which the session accounting
 * needs (sessions.h).
 */
lmc_status lmc_engine_create(lmc_storage_manager *sm, int chunk_size,
                             const lmc_server_limits *limits, uint64_t read_ttl_ms,
                             lmc_engine **out, lmc_error *err);
/* Releases what the sessions left hold, then frees them. */
void lmc_engine_destroy(lmc_engine *e);

lmc_counters *lmc_engine_counters(lmc_engine *e);

int lmc_engine_chunk_size(const lmc_engine *e);

/* Observe every lookup's prefetch (sessions.h: lmc_lookup_observer); before the first lookup. */
void lmc_engine_set_lookup_observer(lmc_engine *e, lmc_lookup_observer fn, void *ud);

/*
 * A key the request logic takes: [start, end) chunk-aligned inside the
 * tokens, at most --max-lookup-tokens tokens. op names the request in
 * messages.
 */
lmc_status lmc_engine_check_key(const lmc_engine *e, const char *op, const lmc_ipc_key *key,
                                lmc_error *err);

/*
 * The keys of one worker's chunks [start, end) (retrieve and store);
 * caller frees *keys. op names the request in messages (a model name or
 * cache salt past its budget is refused).
 */
lmc_status lmc_engine_worker_keys(lmc_engine *e, const char *op, const lmc_ipc_key *key,
                                  lmc_object_key **keys, size_t *n, lmc_error *err);

/*
 * lookup: chain-hash the full chunks of tokens[0:end), the keys of every
 * rank, and submit their prefetch under the request id; the session
 * replaces one of the same request id. LMC_ERR_BUSY when the sessions are
 * at a limit.
 */
lmc_status lmc_engine_lookup(lmc_engine *e, const lmc_ipc_key *key, const lmc_layout_desc *layout,
                             lmc_error *err);

/*
 * The same in two steps, so that the server can send a lookup's reply
 * (nil) between them. begin does every check a request can fail (limits,
 * names, the session reservation) and takes what the lookup needs;
 * finish hashes, makes the keys and submits the prefetch, and can fail
 * only for want of memory. key is borrowed until finish or cancel; each
 * job is finished or cancelled exactly once, which frees it.
 */
typedef struct lmc_lookup_job lmc_lookup_job;
lmc_status lmc_engine_lookup_begin(lmc_engine *e, const lmc_ipc_key *key,
                                   const lmc_layout_desc *layout, lmc_lookup_job **job,
                                   lmc_error *err);
lmc_status lmc_engine_lookup_finish(lmc_engine *e, lmc_lookup_job *job, lmc_error *err);
/* Give a begun job's reservation back (NULL: nothing). */
void lmc_engine_lookup_cancel(lmc_engine *e, lmc_lookup_job *job);
/*
 * The same from keys already made (n_chunks * world_size of them,
 * chunk-major x rank; copied).
 */
lmc_status lmc_engine_lookup_keys(lmc_engine *e, const char *request_id, int64_t world_size,
                                  size_t n_chunks, const lmc_object_key *keys,
                                  const lmc_layout_desc *layout, uint32_t extra_count,
                                  lmc_error *err);

/* query_prefetch_status / query_prefetch_lookup_hits (sessions.h). */
lmc_session_state lmc_engine_query(lmc_engine *e, const char *request_id, bool lookup_hits_only,
                                   size_t *hit_chunks);

/*
 * retrieve: keys[0..n) are chunks c0, c0 + 1, ... of rank `rank` of the
 * session request_id. Take over one of the session's locks on each
 * (sessions.h), read the objects, copy each out (copy may be NULL), then
 * release those locks. *ok is false when the session does not hold a lock
 * on every key (no session, not a hit, already retrieved as often as the
 * lookup's num_kv_readers allow) or a key was not readable; nothing is
 * copied then, and no lock another request holds is ever released.
 * The chunks are copied on copy->pool's helpers too (copy_pool.h). A
 * failed copy (the lowest-numbered chunk's) is the error returned; the
 * locks it claimed are released
 * all the same (they are this retrieve's now, sessions.h), so none waits
 * for its TTL and the session's accounting never depends on where a
 * retrieve failed.
 */
lmc_status lmc_engine_retrieve(lmc_engine *e, const char *request_id, const lmc_object_key *keys,
                               size_t n, size_t c0, int64_t rank, const lmc_kv_copy *copy, bool *ok,
                               lmc_error *err);

/*
 * store: reserve the keys that are new, copy each in (copy may be NULL;
 * on copy->pool's helpers too), finish them. Keys present, locked or
 * without room are skipped. A failed copy (the lowest-numbered chunk's) is
 * the error returned, and nothing is committed: every reservation
 * is dropped (lmc_sm_abort_write).
 */
lmc_status lmc_engine_store(lmc_engine *e, const lmc_object_key *keys, size_t n,
                            const lmc_layout_desc *layout, const lmc_kv_copy *copy, lmc_error *err);
/*
 * The same, with each key's reservation result in results (n entries:
 * SUCCESS = stored); on failure (out of memory) they are not set.
 */
lmc_status lmc_engine_store_results(lmc_engine *e, const lmc_object_key *keys, size_t n,
                                    const lmc_layout_desc *layout, const lmc_kv_copy *copy,
                                    lmc_l1_error *results, lmc_error *err);

/*
 * free_lookup_locks, end_session (sessions.h: neither waits for a
 * prefetch), clear, the session TTL sweep, and the collection of sessions
 * that ended before their prefetch (returns how many still drain).
 */
void lmc_engine_free_lookup_locks(lmc_engine *e, const char *request_id);
void lmc_engine_end_session(lmc_engine *e, const char *request_id);
void lmc_engine_clear(lmc_engine *e, bool force);
void lmc_engine_expire_sessions(lmc_engine *e);
size_t lmc_engine_poll_draining(lmc_engine *e);

/* Sessions open (draining ones included) and the keys they hold. */
void lmc_engine_session_usage(lmc_engine *e, size_t *sessions, size_t *keys);

#endif
