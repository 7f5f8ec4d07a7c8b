/*
 * outcome.h -- what each replayed call did, and what the whole replay did.
 *
 * Owns: the counter table (derived from replay/outcome.def), the per-record
 * outcome (one counter array, filled by the op's handler), the mapping of
 * the StorageManager's per-key results to counters (one documented reason
 * per counter), the replay's totals, the figures derived from them (hit
 * rates, agreement with the recording), the record view every per-record
 * output sees, and the outcome digest.
 *
 * The outcome digest is a SHA-256 over a canonical text stream with no
 * timing in it: one line per reported record in record order,
 *
 *   "<index> <qualname>" then " skipped" | " failed" | " not_reissued
 *   keys=<n> kh=<16 hex digits>" | " keys=<n> kh=<16 hex digits of
 *   lmc_outcome_keys_hash>" and, for each counter of the record's op in
 *   table order, " <name>=<value>"; then "\n"
 *
 * then one line of the final counters,
 *
 *   "totals" then " <scope>.<name>=<value>" for each of
 *   lmc_replay_totals_fields() in order, then "\n"
 *
 * (decimal integers, names as in outcome.def; lmc_outcome_encode_record and
 * lmc_outcome_encode_totals write exactly these lines). The same trace,
 * config and binary give the same stream whenever the StorageManager's
 * answers are the same, so a deterministic replay gives one digest.
 *
 * Threads: none; a digest or a totals object belongs to one thread.
 */
#ifndef LMC_REPLAY_OUTCOME_H
#define LMC_REPLAY_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "lmcache/storage_manager.h"
#include "trace/ops.h"

/* Bumped when the result schema or the digest stream changes meaning. */
#define LMC_REPLAY_RESULT_SCHEMA "lmcache.trace_replay_result"
#define LMC_REPLAY_RESULT_SCHEMA_VERSION 2

typedef enum lmc_outcome_counter {
#define LMC_OUTCOME_COUNT(OP, name, doc) LMC_OC_##OP##_##name,
#include "replay/outcome.def"
#undef LMC_OUTCOME_COUNT
    LMC_OC_COUNT_
} lmc_outcome_counter;

typedef struct lmc_outcome_counter_info {
    lmc_trace_op op;
    const char *name;
    const char *doc;
} lmc_outcome_counter_info;

/* The table row of c (NULL past the end). */
const lmc_outcome_counter_info *lmc_outcome_counter_get(size_t c);

/* The op's short name in outputs ("reserve_write", "read_enter", ...): its ops.def name. */
const char *lmc_outcome_op_name(lmc_trace_op op);

/*
 * One record's outcome. op is LMC_TRACE_OP_NONE when there is none (a
 * skipped record, a failed handler). Only the counters of op are used.
 */
typedef struct lmc_replay_outcome {
    lmc_trace_op op;
    bool pending; /* a prefetch whose L2 part has not been collected yet */
    /*
     * A record the replay's mode does not reissue (mode engine: the recorded
     * reads and writes, kept for the recording's own hit rate): only n_keys
     * and keys_hash are set, and the totals count it apart.
     */
    bool not_reissued;
    uint32_t n_keys;
    uint64_t keys_hash; /* lmc_outcome_keys_hash of the record's keys */
    uint32_t v[LMC_OC_COUNT_];
} lmc_replay_outcome;

/* Start an outcome of op for the n keys of a record (keys may be NULL: hash 0); counters 0. */
void lmc_replay_outcome_begin(lmc_replay_outcome *o, lmc_trace_op op, const lmc_object_key *keys,
                              size_t n_keys);

/*
 * A 64-bit digest of what keys are, in order (XXH3-64 chained over each
 * key's canonical bytes: chunk_hash_len, chunk_hash, model_name and its
 * NUL, kv_rank and object_group_id as 8 little-endian bytes, cache_salt
 * and its NUL), the same in every process: it puts the keys into the
 * outcome digest, so a trace with one key changed digests differently.
 */
uint64_t lmc_outcome_keys_hash(const lmc_object_key *keys, size_t n);

/*
 * The counter of one key's result. One L1 error code covers several
 * reasons, so those that need it also take the key's state right after
 * the call (lmc_sm_l1_key_states).
 *
 *   reserve_write: SUCCESS reserved; OUT_OF_MEMORY out_of_memory;
 *     KEY_NOT_WRITABLE: absent (state ABSENT), write_locked (WRITING),
 *     already_present (mode new), read_locked (READ_LOCKED), not_writable
 *     (READY); anything else other.
 *   finish_write: SUCCESS finished; KEY_NOT_EXIST not_in_l1;
 *     KEY_IN_WRONG_STATE not_reserved; else other.
 *   read enter: SUCCESS found; KEY_NOT_EXIST not_in_l1; KEY_NOT_READABLE
 *     write_locked (WRITING) or not_read_locked (any other state); else other.
 *   finish_read_prefetched: SUCCESS released; KEY_NOT_EXIST not_in_l1;
 *     KEY_IN_WRONG_STATE not_read_locked; else other.
 */
lmc_outcome_counter lmc_outcome_reserve_reason(lmc_l1_error e, lmc_write_mode mode,
                                               lmc_l1_key_state state);
lmc_outcome_counter lmc_outcome_finish_write_reason(lmc_l1_error e);
lmc_outcome_counter lmc_outcome_read_reason(lmc_l1_error e, lmc_l1_key_state state);
lmc_outcome_counter lmc_outcome_finish_read_reason(lmc_l1_error e);
/*
 * Engine mode's store (reserve_write mode new of the keys after the found
 * prefix): SUCCESS stored; OUT_OF_MEMORY store_out_of_memory;
 * KEY_NOT_WRITABLE store_write_locked (WRITING) or store_present (any
 * other state in L1); else store_other.
 */
lmc_outcome_counter lmc_outcome_store_reason(lmc_l1_error e, lmc_l1_key_state state);

/*
 * The found part of a submit_prefetch_task outcome (l2_hits, missed,
 * found_prefix, unfinished), made final, from its handle and found-key
 * bitmap (NULL: only the L1 hits at submit are known, as when the L2 part
 * never finished). l1_hits and l2_sent are set at submit from the handle.
 */
void lmc_outcome_prefetch_finish(lmc_replay_outcome *o, const lmc_prefetch_handle *h,
                                 const lmc_bitmap *found, bool unfinished);

/* True when a reserve_write (or read enter) result needs the key's state to be classified. */
bool lmc_outcome_reserve_needs_state(lmc_l1_error e);
bool lmc_outcome_read_needs_state(lmc_l1_error e);

/*
 * One record as the driver reports it, in record order, once its outcome
 * is final (a prefetch's after its L2 part was collected): what per-record
 * outputs (replay/output.h) and progress displays see. The dropped-records
 * marker is not reported.
 */
typedef struct lmc_replay_record_view {
    uint64_t index;       /* 1-based, in trace order, over the records reported */
    const char *qualname; /* valid during the callback only */
    double latency_s;     /* the handler's run time; 0.0 for a skipped record */
    bool failed;          /* the handler failed; also true for a skipped record */
    bool skipped;         /* no handler for the qualname */
    double t_mono;        /* the record's recorded time, seconds from the trace start */
    double lateness_s;    /* how late its dispatch started against the schedule; < 0: not
                             timed (--pace virtual) */
    const lmc_replay_outcome *outcome; /* NULL: none (skipped, failed) */
} lmc_replay_record_view;

/* ---- totals ------------------------------------------------------------ */

typedef struct lmc_replay_totals {
    uint64_t records[LMC_TRACE_OP_COUNT_]; /* records with an outcome, per op */
    uint64_t keys[LMC_TRACE_OP_COUNT_];    /* their keys */
    uint64_t v[LMC_OC_COUNT_];             /* each counter, summed */
    /* Records not reissued (outcome not_reissued), per op, and their keys. */
    uint64_t not_reissued[LMC_TRACE_OP_COUNT_];
    uint64_t not_reissued_keys[LMC_TRACE_OP_COUNT_];
    uint64_t l1_peak_used_bytes; /* sampled after every record */
    uint64_t l1_capacity_bytes;
    lmc_sm_counters sm; /* the StorageManager's own counters at the end */
} lmc_replay_totals;

void lmc_replay_totals_add(lmc_replay_totals *t, const lmc_replay_outcome *o);

/*
 * The figures derived from the totals, one row each: the one list the
 * result JSON ("outcomes.figures"), the outcomes CSV and --repeat walk.
 *   X(name, TYPE, doc): TYPE U64 (a count) or F64 (a ratio in [0, 1];
 *   0 when its denominator is 0, except the agreements, which are 1 when
 *   nothing was recorded).
 */
#define LMC_REPLAY_FIGURES(X)                                                                      \
    X(lookups, U64, "submit_prefetch_task records: one per request's lookup")                      \
    X(looked_up_keys, U64, "keys those lookups asked for")                                         \
    X(found_keys, U64, "of those, found in L1 at submit or loaded from L2")                        \
    X(l1_hit_keys, U64, "found in L1 at submit")                                                   \
    X(l2_hit_keys, U64, "loaded from L2")                                                          \
    X(chunk_hit_rate, F64, "found_keys / looked_up_keys")                                          \
    X(l1_hit_rate, F64, "l1_hit_keys / looked_up_keys")                                            \
    X(l2_hit_rate, F64, "l2_hit_keys / looked_up_keys")                                            \
    X(reservations, U64, "reserve_write records")                                                  \
    X(reserved_keys, U64, "keys they reserved")                                                    \
    X(refused_keys, U64, "keys they were refused (reserve_write counters but reserved)")           \
    X(recorded_reads, U64,                                                                         \
      "read_prefetched_results.__enter__ records: each was a hit when "                            \
      "recorded")                                                                                  \
    X(reads_still_hit, U64, "of those, reads that found every key here")                           \
    X(failed_reads, U64, "recorded_reads - reads_still_hit")                                       \
    X(read_agreement, F64, "reads_still_hit / recorded_reads")                                     \
    X(recorded_read_keys, U64, "keys of the recorded reads")                                       \
    X(read_keys_found, U64, "of those, found here")                                                \
    X(read_keys_missed, U64, "recorded_read_keys - read_keys_found")                               \
    X(key_agreement, F64, "read_keys_found / recorded_read_keys")                                  \
    X(recorded_hit_rate, F64,                                                                      \
      "keys the trace's reads read / keys its lookups asked for: the recording's own hit "         \
      "rate (either mode)")                                                                        \
    X(not_reissued_records, U64,                                                                   \
      "records the mode did not reissue (engine: the recorded reads and writes)")                  \
    X(engine_hit_keys, U64, "engine mode: the whole-chunk found prefixes the requests read")       \
    X(engine_hit_rate, F64,                                                                        \
      "engine_hit_keys / looked_up_keys: the hit rate of `lmcache bench server` (hit chunks / "    \
      "chunks)")                                                                                   \
    X(engine_read_keys, U64, "engine mode: keys the requests' retrieves read")                     \
    X(engine_stored_keys, U64, "engine mode: keys the requests stored")                            \
    X(engine_refused_keys, U64,                                                                    \
      "engine mode: keys after a found prefix that were not stored (present, being written, "      \
      "no room, other)")

#define LMC_FIGURE_TYPE_U64 uint64_t
#define LMC_FIGURE_TYPE_F64 double

typedef struct lmc_replay_figures {
#define LMC_FIGURE_FIELD(name, T, doc) LMC_FIGURE_TYPE_##T name;
    LMC_REPLAY_FIGURES(LMC_FIGURE_FIELD)
#undef LMC_FIGURE_FIELD
} lmc_replay_figures;

typedef struct lmc_replay_figure_info {
    const char *name;
    bool is_ratio; /* F64 */
    const char *doc;
} lmc_replay_figure_info;

/* The i-th figure's row (NULL past the end) and its value in f. */
const lmc_replay_figure_info *lmc_replay_figure_get(size_t i);
double lmc_replay_figure_value(const lmc_replay_figures *f, size_t i);

lmc_replay_figures lmc_replay_figures_of(const lmc_replay_totals *t);

/*
 * The final counters of the digest's "totals" line (and of outputs that
 * list them): a name and its value per entry, in a fixed order. Returns how
 * many were written to out (at most cap); with cap 0, how many there are.
 */
typedef struct lmc_totals_field {
    const char *scope; /* "records", an op's short name, "l1" or "l2" */
    const char *name;  /* written "<scope>.<name>" */
    uint64_t value;
} lmc_totals_field;

typedef struct lmc_replay_record_counts {
    uint64_t replayed, skipped, failed, malformed;
} lmc_replay_record_counts;

size_t lmc_replay_totals_fields(const lmc_replay_totals *t, const lmc_replay_record_counts *rc,
                                lmc_totals_field *out, size_t cap);

/* ---- the digest ------------------------------------------------------- */

/* The canonical line of one record into buf (NUL-terminated); returns its length. */
size_t lmc_outcome_encode_record(char *buf, size_t cap, const lmc_replay_record_view *rec);
/* The canonical totals line into buf; returns its length. */
size_t lmc_outcome_encode_totals(char *buf, size_t cap, const lmc_replay_totals *t,
                                 const lmc_replay_record_counts *rc);

typedef struct lmc_outcome_digest lmc_outcome_digest;

lmc_outcome_digest *lmc_outcome_digest_create(void); /* NULL when memory runs out */
void lmc_outcome_digest_destroy(lmc_outcome_digest *d);
void lmc_outcome_digest_record(lmc_outcome_digest *d, const lmc_replay_record_view *rec);
/* Add the totals line and write the hex digest (the stream is finished). */
void lmc_outcome_digest_finish(lmc_outcome_digest *d, const lmc_replay_totals *t,
                               const lmc_replay_record_counts *rc,
                               char hex[LMC_SHA256_HEX_LEN + 1]);

#endif
