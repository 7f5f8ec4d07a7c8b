/*
 * sessions.h -- the server's sessions: request id -> what a lookup left
 * for the requests that follow it (query_prefetch_status, retrieve,
 * free_lookup_locks, end_session).
 *
 * Owns: the session table and each session in it: the lookup's keys
 * (chunk-major x rank), its prefetch handle until the result is collected,
 * the hit count, the read locks the session still holds on each key of
 * the hit prefix, and when it was last used (sessions nobody ends expire);
 * and the sessions that ended before their prefetch did ("draining").
 *
 * Lock accounting lives here and only here; every lock a session takes is
 * released exactly once:
 *   - A lookup's prefetch leaves 1 + extra_count read locks on every key
 *     it found. Collecting the result folds the found keys into a
 *     whole-chunk prefix (a chunk counts only if every rank is present),
 *     releases the locks on keys found past it at once, and records
 *     1 + extra_count locks held on each prefix key.
 *   - A retrieve claims one held lock per key it reads (lmc_sessions_claim)
 *     and releases it itself after its copy (engine.c); a key the session
 *     no longer holds cannot be claimed, so a second retrieve, or one with
 *     no session, never releases a lock another request took.
 *   - Ending the session (end_session, free_lookup_locks, a lookup reusing
 *     the request id, the TTL sweep) releases what is still held. A session
 *     ended while its prefetch still runs is moved to the draining list:
 *     nobody waits for it, and lmc_sessions_poll_draining (the server's
 *     timer) collects and releases it once the prefetch is done.
 *   - L1 read locks expire by themselves after the read TTL, and a key
 *     locked afresh afterwards counts from zero: a session whose locks may
 *     have expired (read TTL since its lookup) releases nothing, so it can
 *     never release a newer holder's lock. A claim is refused then. That
 *     time is the StorageManager's clock (lmc_sessions_now_ms: the
 *     monotonic one in a server, virtual time in a replay), the L1's own.
 *
 * Limits: the table holds at most max_sessions sessions and max_keys keys
 * (draining sessions included); lmc_sessions_reserve is asked before a
 * lookup takes any lock.
 *
 * Threads: any. One mutex guards the table, the draining list and every
 * session in them; the StorageManager is called with it held only to poll
 * or collect a prefetch, never to wait. A session taken out of the table
 * belongs to the caller.
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
    struct lmc_session *next; /* the table's or the draining list's */
    char *request_id;
    int64_t world_size;
    size_t n_chunks;
    lmc_object_key *keys; /* chunk-major x rank, n_chunks * world_size */
    uint8_t *held;        /* per key: read locks the session still holds (prefix keys only) */
    uint32_t extra_count;
    lmc_prefetch_handle handle;
    bool has_handle; /* a prefetch result still to collect */
    bool hits_known;
    size_t hit_chunks;
    bool touch_at_end;  /* end_session: touch the keys once released */
    uint64_t locked_ms; /* lmc_sessions_now_ms when the lookup took its locks (read_ttl_ms) */
    uint64_t last_used_ms;
} lmc_session;

typedef struct lmc_session_limits {
    size_t max_sessions;  /* sessions held at once, draining ones included */
    size_t max_keys;      /* keys held by all sessions together */
    uint64_t read_ttl_ms; /* the L1 read-lock TTL */
} lmc_session_limits;

typedef struct lmc_session_table lmc_session_table;

/*
 * Sees each lookup's prefetch twice: when its session is put (found NULL:
 * only the handle's L1 hits are known) and when its result is collected
 * (found: the found-key bitmap, before it is folded into hit chunks). The
 * replay's engine mode reads its outcomes from it. Called with the table's
 * mutex held (or by the thread that owns a session taken out of the
 * table): it may only record what it is given.
 */
typedef void (*lmc_lookup_observer)(void *ud, const char *request_id,
                                    const lmc_prefetch_handle *handle, const lmc_bitmap *found);

/* sm and counts are borrowed and must outlive the table. */
lmc_status lmc_session_table_create(lmc_storage_manager *sm, lmc_counters *counts,
                                    const lmc_session_limits *limits, lmc_session_table **out,
                                    lmc_error *err);
/* Releases what every session left still holds, then frees them. */
void lmc_session_table_destroy(lmc_session_table *t);

/* Set (or with NULL clear) the table's lookup observer; before any session is put. */
void lmc_session_table_set_observer(lmc_session_table *t, lmc_lookup_observer fn, void *ud);

/*
 * Room for one more session of n_keys keys, before its lookup takes any
 * lock: LMC_ERR_BUSY (with a message naming the limit and its flag) when
 * the table is full even after dropping expired sessions. A reservation is
 * used by lmc_sessions_put or given back by lmc_sessions_unreserve.
 */
lmc_status lmc_sessions_reserve(lmc_session_table *t, size_t n_keys, uint64_t ttl_ms,
                                lmc_error *err);
void lmc_sessions_unreserve(lmc_session_table *t, size_t n_keys);

/*
 * A new session (request_id copied) with room for n_keys keys (x->keys,
 * x->held), to be filled and put; NULL when memory runs out.
 */
lmc_session *lmc_session_new(const char *request_id, int64_t world_size, uint32_t extra_count,
                             size_t n_keys);
/* Frees a session that is not in a table, clearing an uncollected handle (no lock is released). */
void lmc_session_free(lmc_session *x);

/*
 * Put a filled session (with its prefetch handle) in the table, using a
 * reservation; it belongs to the table from now on. A session under the
 * same request id is ended (as by free_lookup_locks).
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
 * retrieve: take over one lock the session request_id holds on each of
 * keys[0..n), which are chunks c0, c0 + 1, ... of rank `rank` (collecting
 * its prefetch first if it finished). True when the session held one on
 * every key and they cannot have expired yet: the caller now owns those
 * locks and releases them (finish_read_prefetched, extra_count 0) once
 * read, unless lmc_sessions_now_ms() has reached *expires_ms by then (the locks
 * may have expired and been taken afresh by someone else). False when it
 * did not (nothing is taken).
 */
bool lmc_sessions_claim(lmc_session_table *t, const char *request_id, const lmc_object_key *keys,
                        size_t n, size_t c0, int64_t rank, uint64_t *expires_ms);

/* free_lookup_locks: end the session and release what it holds (now, or once its prefetch ends). */
void lmc_sessions_free_lookup_locks(lmc_session_table *t, const char *request_id);

/* end_session: the same, then touch the session's keys in L1. */
void lmc_sessions_end(lmc_session_table *t, const char *request_id);

/* End sessions unused for more than ttl_ms (as free_lookup_locks would). */
void lmc_sessions_expire(lmc_session_table *t, uint64_t now_ms, uint64_t ttl_ms);

/*
 * Collect the draining sessions whose prefetch finished, release their
 * locks and free them. Sessions whose locks have expired are freed without
 * waiting further. Returns how many are still draining.
 */
size_t lmc_sessions_poll_draining(lmc_session_table *t);

/* The clock the L1 read locks expire by (the StorageManager's), in ms. */
uint64_t lmc_sessions_now_ms(const lmc_session_table *t);

/* Sessions (table and draining) and keys they hold now, for tests and limits. */
void lmc_sessions_usage(lmc_session_table *t, size_t *sessions, size_t *keys);

#endif
