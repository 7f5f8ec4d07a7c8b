/*
 * dispatch.h -- the replay dispatcher and the replay context.
 *
 * Owns: the qualname -> handler table (spec/trace-format.md section 6.1,
 * 6.2) and the replay context: the live StorageManager, the open
 * read_prefetched_results contexts (a FIFO per key tuple, so overlapping
 * enter/exit pairs pair up as they were recorded), the prefetch handles
 * whose results are still to be collected, and a mode's hook for the work
 * it keeps waiting itself (mode engine's requests), which the context's
 * polls and abandon take in. Handlers of other files reach the record's
 * arguments, the current outcome and the per-key state classifier through
 * the functions below.
 *
 * The default table has one handler per traced op (trace/ops.def), six
 * today, registered under the op's qualname. A
 * handler fails (and the record is counted as failed) only when the
 * record's arguments are unusable: a missing or mistyped argument, an
 * unknown mode. Per-key outcomes of the StorageManager are not failures,
 * exactly as in LMCache, where they are partial results, not exceptions.
 *
 * Outcomes: each default handler fills the context's current outcome
 * (replay/outcome.h) with what the StorageManager answered, key by key.
 * A submit_prefetch_task's outcome is pending until its L2 part is
 * collected (by a poll or the final drain); the context then passes the
 * final outcome, with the record index given to lmc_replay_ctx_begin, to
 * the on_complete callback.
 *
 * Threads: one replay thread.
 */
#ifndef LMC_REPLAY_DISPATCH_H
#define LMC_REPLAY_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "lmcache/status.h"
#include "lmcache/storage_manager.h"
#include "replay/outcome.h"
#include "trace/format.h"

typedef struct lmc_replay_ctx lmc_replay_ctx;
typedef struct lmc_dispatcher lmc_dispatcher;

typedef lmc_status (*lmc_replay_handler)(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                         lmc_error *err);

lmc_dispatcher *lmc_dispatcher_create(void);
void lmc_dispatcher_destroy(lmc_dispatcher *d);
/* LMC_ERR_INVALID "handler already registered for '<q>'" on a duplicate. */
lmc_status lmc_dispatcher_register(lmc_dispatcher *d, const char *qualname, lmc_replay_handler h,
                                   lmc_error *err);
bool lmc_dispatcher_has(const lmc_dispatcher *d, const char *qualname);
/*
 * How many qualnames are registered (0: none), in registration order;
 * the first min(that, cap) of them go to out[] (borrowed, valid until the
 * dispatcher is destroyed). Nothing is allocated, so this cannot fail:
 * call with cap 0 for the count, then with an array that size.
 */
size_t lmc_dispatcher_qualnames(const lmc_dispatcher *d, const char **out, size_t cap);
/* LMC_ERR_NOT_FOUND "no handler for qualname '<q>'" when none is registered. */
lmc_status lmc_dispatcher_dispatch(const lmc_dispatcher *d, const char *qualname,
                                   lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                   lmc_error *err);

/* Every traced op's qualname with its handler lmc_replay_<name>. NULL on OOM. */
lmc_dispatcher *lmc_dispatcher_default(void);
/* Each traced op's qualname with by_op[op] (ops whose entry is NULL are left out). NULL on OOM. */
lmc_dispatcher *lmc_dispatcher_for_ops(const lmc_replay_handler by_op[LMC_TRACE_OP_COUNT_]);

lmc_replay_ctx *lmc_replay_ctx_create(lmc_storage_manager *sm);
/* Closes dangling contexts and collects pending prefetches first. */
void lmc_replay_ctx_destroy(lmc_replay_ctx *ctx);
lmc_storage_manager *lmc_replay_ctx_sm(lmc_replay_ctx *ctx);

/* A prefetch's final outcome, for the record index it was submitted under. */
typedef void (*lmc_replay_on_complete)(void *ud, uint64_t index, const lmc_replay_outcome *o);
void lmc_replay_ctx_set_on_complete(lmc_replay_ctx *ctx, lmc_replay_on_complete fn, void *ud);

/* Report a pending record's final outcome (through the on_complete callback). */
void lmc_replay_ctx_complete(lmc_replay_ctx *ctx, uint64_t index, const lmc_replay_outcome *o);

/*
 * Work a replay mode keeps waiting outside the context (mode engine: the
 * requests whose lookup has not answered yet). The context's poll and
 * abandon (and so the pacers, the drain and destroy) take it in: poll runs
 * what is ready and returns how many still wait; abandon completes every
 * one left as unfinished and returns how many. ops and ud must outlive the
 * context, or be cleared (NULL) first.
 */
typedef struct lmc_replay_pending_ops {
    size_t (*poll)(void *ud);
    size_t (*abandon)(void *ud);
} lmc_replay_pending_ops;
void lmc_replay_ctx_set_pending(lmc_replay_ctx *ctx, const lmc_replay_pending_ops *ops, void *ud);
/* The ud set with ops (how a mode's handlers reach their state); NULL when ops are not ctx's. */
void *lmc_replay_ctx_pending_ud(const lmc_replay_ctx *ctx, const lmc_replay_pending_ops *ops);

/* Start record index: the current outcome is reset to none. */
void lmc_replay_ctx_begin(lmc_replay_ctx *ctx, uint64_t index);
/* The current record's index, and its outcome as the handler left it (op NONE: none). */
uint64_t lmc_replay_ctx_index(const lmc_replay_ctx *ctx);
const lmc_replay_outcome *lmc_replay_ctx_outcome(const lmc_replay_ctx *ctx);
/* The same outcome, for a handler to fill. */
lmc_replay_outcome *lmc_replay_ctx_current(lmc_replay_ctx *ctx);

/*
 * Whether reserve_write's handler zero-fills the buffers it reserved (on by
 * default). The trace carries no KV bytes; zeros are written only so that
 * what an L2 adapter stores is defined, so a replay without L2 turns it off.
 */
void lmc_replay_ctx_set_zero_fill(lmc_replay_ctx *ctx, bool on);

/* Open read contexts (for tests). */
size_t lmc_replay_ctx_open_reads(const lmc_replay_ctx *ctx);

/*
 * Exit every still-open read context, oldest first per key tuple (the end
 * of a replay, or a truncated trace). Returns how many were closed.
 */
size_t lmc_replay_ctx_close_dangling(lmc_replay_ctx *ctx);

/* Collect finished prefetch results (non-blocking); returns how many are still pending. */
size_t lmc_replay_ctx_poll_prefetches(lmc_replay_ctx *ctx);
/* Wait up to timeout_ms for every pending prefetch; returns how many were left. */
size_t lmc_replay_ctx_drain_prefetches(lmc_replay_ctx *ctx, uint32_t timeout_ms);
/*
 * Give up on the prefetches still pending: each outcome is completed as
 * unfinished (its L2 part counted as missed) and its handle dropped.
 * Returns how many. Destroy does this too.
 */
size_t lmc_replay_ctx_abandon_prefetches(lmc_replay_ctx *ctx);

/*
 * rec's argument names against op's row of trace/ops.def, as Python binds
 * keyword arguments: an unknown name or a missing required one (keys,
 * layout_desc, mode) is LMC_ERR_FORMAT naming it. Every handler calls it
 * first.
 */
lmc_status lmc_replay_check_args(const lmc_trace_record *rec, lmc_trace_op op, lmc_error *err);

/*
 * A record's arguments, for handlers (the names are LMCache's parameter
 * names). keys: the "keys" list as one array, valid until the next record
 * is read; it also makes room in the context's per-key scratch for that
 * many keys. layout_desc and extra_count (LMCache's default 0 when absent).
 * LMC_ERR_FORMAT naming the record's qualname and the argument.
 */
lmc_status lmc_replay_arg_keys(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                               const lmc_object_key **keys, size_t *n, lmc_error *err);
lmc_status lmc_replay_arg_layout(const lmc_trace_record *rec, const lmc_layout_desc **out,
                                 lmc_error *err);
lmc_status lmc_replay_arg_extra_count(const lmc_trace_record *rec, uint32_t *out, lmc_error *err);

/*
 * A submit_prefetch_task record's arguments both modes read: checked
 * (lmc_replay_check_args), then keys, layout_desc and extra_count as above.
 */
lmc_status lmc_replay_lookup_args(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                  const lmc_object_key **keys, size_t *n,
                                  const lmc_layout_desc **layout, uint32_t *extra, lmc_error *err);

/*
 * To classify per-key results where one L1 error code covers several
 * reasons: the L1 state of every key i with needs(errs[i]), asked for in
 * one call right after the StorageManager answered; then, walking the keys
 * in order with j from 0, lmc_replay_ctx_next_state gives key i's state
 * (ABSENT for a key that needed none). The states stay until the next
 * call. LMC_ERR_NOMEM when the scratch cannot grow to n keys (never after
 * lmc_replay_arg_keys of at least n keys).
 */
lmc_status lmc_replay_ctx_states_for(lmc_replay_ctx *ctx, const lmc_object_key *keys, size_t n,
                                     const lmc_l1_error *errs, bool (*needs)(lmc_l1_error),
                                     lmc_error *err);
lmc_l1_key_state lmc_replay_ctx_next_state(const lmc_replay_ctx *ctx, lmc_l1_error e,
                                           bool (*needs)(lmc_l1_error), size_t *j);

/*
 * The default handlers, one per traced op (for tests and custom
 * dispatchers): lmc_replay_<name> for each row of trace/ops.def, i.e.
 * lmc_replay_reserve_write, _finish_write, _submit_prefetch, _finish_read,
 * _read_enter and _read_exit.
 */
#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    lmc_status lmc_replay_##name(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_error *err);
#include "trace/ops.def"
#undef LMC_TRACE_OP

#endif
