/*
 * engine_mode.h -- `trace replay --mode engine`: each recorded lookup
 * becomes a request that the server's own request logic serves against the
 * replay's StorageManager.
 *
 * Owns: the engine (server/engine.h: the sessions and the StorageManager
 * calls of lookup, retrieve, store and end_session; DESIGN.md 4.10: one
 * module shared by `lmcache server` and the replay, never a second copy),
 * the requests whose lookup has not answered yet, and the dispatcher of the
 * mode.
 *
 * A submit_prefetch_task record is one request's lookup: its keys must be
 * chunk-major x rank, every key's kv_rank world_size<<24 | rank<<16 |
 * world_size<<8 | rank, the world size read from the first key and the
 * ranks of one chunk sharing its hash (a record whose keys do not fit fails,
 * with a message naming the key). The request is then what `lmcache
 * server` does for an inference engine (and `lmcache bench server` asks
 * for): the lookup (lmc_engine_lookup_keys, under a request id of its own,
 * "r<record index>"), and once its prefetch is known (queried between
 * records and, in realtime, while waiting for the next record; in virtual
 * time after each event the pacer delivers), retrieve of the whole-chunk
 * found prefix per rank (once per reader when the record's extra_count is
 * above 0), store of the chunks after it per rank (reserve_write mode new,
 * finish_write, with the recorded layout), and end_session (which touches
 * the keys). Requests overlap as they did in the recording: a request's
 * continuation runs when its prefetch is known, while later records keep
 * being dispatched. The recorded reads and writes (every other traced op)
 * are not reissued: their outcome says so, with their keys, and gives the
 * recording's own hit rate.
 *
 * Outcomes: the request's, on its submit_prefetch_task record (pending
 * until the continuation ran): the lookup's counters as in mode calls
 * (L1 hits, sent to L2, L2 hits, missed, found prefix; read from the
 * session's collect through the engine's lookup observer) and the engine
 * rows of replay/outcome.def (hit keys, read, stored, refused by reason).
 * The requests' retrieve, store and end_session latencies go to the
 * replay's statistics as engine.retrieve, engine.store and
 * engine.end_session.
 *
 * Threads: the replay thread; the engine's own locking lets the
 * StorageManager's threads run beside it (realtime).
 */
#ifndef LMC_REPLAY_ENGINE_MODE_H
#define LMC_REPLAY_ENGINE_MODE_H

#include <stdbool.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "replay/dispatch.h"
#include "replay/stats.h"

typedef struct lmc_replay_engine lmc_replay_engine;

/*
 * The engine mode over ctx's StorageManager, hooked into ctx (its polls and
 * abandon serve and give up the waiting requests; the mode's handlers reach
 * it through the context). stats is borrowed. zero_fill: stored objects
 * are zero-filled (the trace carries no KV bytes; only an L2 adapter can
 * see them). read_ttl_ms is the StorageManager's L1 read-lock TTL (the
 * sessions' lock accounting needs it, sessions.h). Destroy it after the
 * context (which abandons what still waits, through the hook); destroy does
 * not touch the context.
 */
lmc_status lmc_replay_engine_create(lmc_replay_ctx *ctx, lmc_replay_stats *stats, bool zero_fill,
                                    uint64_t read_ttl_ms, lmc_replay_engine **out, lmc_error *err);
void lmc_replay_engine_destroy(lmc_replay_engine *m);

/* The mode's dispatcher: a request per submit_prefetch_task, the other ops not reissued. */
lmc_dispatcher *lmc_replay_engine_dispatcher(void);

/* Requests waiting for their lookup's answer. */
size_t lmc_replay_engine_waiting(const lmc_replay_engine *m);

#endif
