/*
 * sessions.h -- the server's sessions: request id -> what a lookup left
 * for the requests that follow it (query_prefetch_status, retrieve,
 * free_lookup_locks, end_session).
 *
 * Owns: the session table and each session in it: the lookup's chunk
 * hashes and keys (chunk-major x rank), its prefetch handle until the
 * result is collected, the hit count, whether its locks were released, and
 * when it was last used (sessions nobody ends expire).
 *
 * Lock bookkeeping lives here and only here. A lookup's prefetch leaves
 * 1 + extra_count read locks on every key it found. Collecting the result
 * folds the found keys into a whole-chunk prefix (a chunk counts only if
 * every rank is present) and releases the locks on keys found past it;
 * releasing a session's locks releases the prefix's, once. (Retrieve
 * releases its own reader's lock in the request logic, engine.c.)
 *
 * Threads: any. One mutex guards the table and every session in it; the
 * StorageManager is called with it held only to poll or collect a
 * prefetch, never to wait. A session taken out of the table belongs to the
 * caller.
 */
#ifndef LMC_SERVER_SESSIONS_H
#define LMC_SERVER_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/storage_manager.h"
#include "server/counters.h"

typedef struct lmc_session {
    struct lmc_session *next; /* the table's */
    char *request_id;
    int64_t world_size;
    uint8_t (*hashes)[32];
    size_t n_chunks;
    lmc_object_key *keys; /* chunk-major x rank, n_chunks * world_size */
    uint32_t extra_count;
    lmc_prefetch_handle handle;
    bool has_handle; /* a prefetch result still to collect */
    bool hits_known;
    size_t hit_chunks;
    bool locks_released;
    uint64_t last_used_ms;
} lmc_session;

typedef struct lmc_session_table lmc_session_table;

/*
 * Sees each lookup's prefetch twice: when its session is put (found NULL:
 * only the handle's L1 hits are known) and when its result is collected
 * (found: the found-key bitmap, before it is folded into hit chunks). The
 * replay's engine mode reads its outcomes from it. Called with the table's
 * mutex held: it may only record what it is given.
 */
typedef void (*lmc_lookup_observer)(void *ud, const char *request_id,
                                    const lmc_prefetch_handle *handle, const lmc_bitmap *found);

/* sm and counts are borrowed and must outlive the table. */
lmc_status lmc_session_table_create(lmc_storage_manager *sm, lmc_counters *counts,
                                    lmc_session_table **out, lmc_error *err);
/* Frees every session left (their locks expire by their TTL). */
void lmc_session_table_destroy(lmc_session_table *t);

/* Set (or with NULL clear) the table's lookup observer; before any session is put. */
void lmc_session_table_set_observer(lmc_session_table *t, lmc_lookup_observer fn, void *ud);

/* A new session (request_id copied), to be filled and put; NULL when memory runs out. */
lmc_session *lmc_session_new(const char *request_id, int64_t world_size, uint32_t extra_count);
/* Frees a session that is not in a table, clearing an uncollected handle. */
void lmc_session_free(lmc_session *x);

/*
 * Put a filled session (with its prefetch handle) in the table; it belongs
 * to the table from now on. A session under the same request id is
 * replaced: its prefetch collected, its locks released, freed.
 */
void lmc_sessions_put(lmc_session_table *t, lmc_session *x);

typedef enum lmc_session_state {
    LMC_SESSION_UNKNOWN, /* no session under this request id */
    LMC_SESSION_PENDING, /* the prefetch is still running */
    LMC_SESSION_READY,   /* *hit_chunks is the answer */
} lmc_session_state;

/*
 * query_prefetch_status (lookup_hits_only false): collect the prefetch if
 * it finished; the hit count is whole chunks. query_prefetch_lookup_hits
 * (true): the lookup's hits so far without collecting, in chunks.
 */
lmc_session_state lmc_sessions_query(lmc_session_table *t, const char *request_id,
                                     bool lookup_hits_only, size_t *hit_chunks);

/*
 * free_lookup_locks: end the session and release its locks. An abandoned
 * lookup's prefetch is waited for, up to wait_ms, so its locks can go.
 */
void lmc_sessions_free_lookup_locks(lmc_session_table *t, const char *request_id, uint64_t wait_ms);

/* end_session: collect what is left, touch the session's keys in L1, free it. */
void lmc_sessions_end(lmc_session_table *t, const char *request_id);

/* Drop sessions unused for more than ttl_ms (their L1 locks expire by their own TTL). */
void lmc_sessions_expire(lmc_session_table *t, uint64_t now_ms, uint64_t ttl_ms);

#endif
