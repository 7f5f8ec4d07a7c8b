/*
 * diverge.h -- the first record whose outcome two replays disagree on.
 *
 * Owns: the search over two per-record outcome files (the JSONL of
 * `trace replay --jsonl-out`, one object per record in record order,
 * docs/cli.md) and what it found: the record's index, t_mono, qualname and
 * key count, both outcomes, and -- read back from the trace, which the
 * JSONL does not copy -- its first key.
 *
 * Two lines agree when their "outcome" values are equal (null for a
 * skipped or failed record) and their index and qualname are. Lines are
 * compared as text first: the replay writes "outcome" last, in a fixed
 * form, so equal text after `"outcome": ` is an equal outcome, and only
 * lines whose text differs are parsed (so a file written by another tool,
 * spaced differently, still compares by value). When one file ends first,
 * the search says so; the records both hold agreed.
 *
 * Threads: none; reentrant.
 */
#ifndef LMC_REPLAY_DIVERGE_H
#define LMC_REPLAY_DIVERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/json.h"
#include "lmcache/status.h"

typedef struct lmc_divergence {
    bool found;        /* a record whose outcomes differ */
    uint64_t compared; /* record pairs compared (the divergent one included) */
    /* One file ended first: the other's record count is larger (found stays false). */
    bool base_ended, new_ended;
    uint64_t index;
    double t_mono;
    char *qualname;
    uint64_t n_keys;
    lmc_json *base_outcome, *new_outcome; /* each line's "outcome" (a null value when none) */
    /* From the trace (lmc_divergence_read_key): {"chunk_hash": hex, "model_name", "kv_rank",
     * "object_group_id", "cache_salt"}, or NULL. */
    lmc_json *first_key;
} lmc_divergence;

/*
 * Search the two JSONL files. Errors name the file and line: LMC_ERR_NOT_FOUND
 * / LMC_ERR_IO when one cannot be read, LMC_ERR_FORMAT for a line that is
 * not a JSON object with an index, or a file with no "outcome" in it (a
 * latency-only JSONL: there is nothing to compare); LMC_ERR_NOMEM.
 */
lmc_status lmc_divergence_find(const char *base_jsonl, const char *new_jsonl, lmc_divergence *out,
                               lmc_error *err);

/*
 * Read d's record (by its index: the index-th record the replay reported,
 * markers (trace/marker.h) not counted, as trace dump numbers them) from
 * the trace at path, and set d->first_key from
 * its "keys" argument (left NULL when it has none). LMC_ERR_FORMAT when the
 * trace holds fewer records; the reader's errors otherwise.
 */
lmc_status lmc_divergence_read_key(lmc_divergence *d, const char *trace_path, lmc_error *err);

void lmc_divergence_free(lmc_divergence *d);

#endif
