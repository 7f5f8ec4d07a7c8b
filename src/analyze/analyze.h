/*
 * analyze.h -- what a trace's workload is, in one pass over its records:
 * `lmcache trace analyze`, and the unique keys and footprint of `trace
 * info`.
 *
 * Owns: the set of distinct keys looked up, the per (model, cache_salt)
 * counts, the request/key rate buckets, and (full analysis) the LRU
 * miss-ratio curve and reuse histograms (analyze/mrc.h) of the lookups'
 * keys. The key set, the distinct-key tallies and the curve are fed
 * through analyze/worker.h, on a thread of their own in a full analysis,
 * so that decoding and that work use two cores.
 *
 * Definitions (docs/cli.md says the same to users):
 *   request        one submit_prefetch_task record (a lookup);
 *   keys looked up the keys of those records, in order: the accesses;
 *   unique keys    distinct ObjectKeys (all five fields) among them;
 *   object size    of a lookup's keys: its layout_desc, sum over tensors
 *                  of shape product x dtype item size (0 without one);
 *   footprint      the sum over unique keys of the size at their first
 *                  lookup;
 *   keys read      keys of read_prefetched_results.__enter__ records;
 *   recorded hit rate  keys read / keys looked up: the share of the
 *                  looked-up keys the recording's server then read, i.e.
 *                  found (it reads only what its lookup found);
 *   MRC            an L1 of C bytes under exact LRU, fed the keys looked
 *                  up in order, each key's first access a cold miss: the
 *                  share of accesses that hit (analyze/stackdist.h).
 * Per group: a request counts for the group of its first key.
 *
 * Sampling: with a rate R < 1, a key is in the sample when a hash of its
 * contents (chunk_hash, kv_rank, object_group_id, model_name, cache_salt;
 * the same in every run) falls in a fraction R of the hash space (24-bit
 * resolution: the rate used is floor(R 2^24) / 2^24). Only sampled keys
 * enter the key set and the curve, so memory falls by R; requests, keys
 * looked up and read stay exact, unique keys and footprint become
 * estimates (sampled / R), and the curve gets error bounds (mrc.h). Rate 0
 * means automatic: exact for files up to LMC_ANALYZE_EXACT_MAX_BYTES, else
 * R = that / file size, at least LMC_ANALYZE_MIN_RATE.
 *
 * Rate buckets (core/tbuckets.h): t_mono into buckets of 1 s; a trace
 * shorter than 32 s gets the largest power-of-two fraction of a second that
 * still gives 32 buckets (at least 1/64 s), one longer than 512 s the
 * smallest power-of-two multiple of a second that gives at most 512. A
 * non-finite or negative t_mono counts in the first bucket.
 *
 * Use: lmc_analyze_file for a whole file; or create, feed every record a
 * reader returns with lmc_trace_reader_next_record (lmc_analyze_record
 * decodes the args of the records it needs through the same reader), then
 * finish -- `trace info` does this inside its own pass.
 *
 * Threads: an analysis belongs to one thread; a full one runs a worker
 * thread ("analyze-keys") between create and destroy.
 */
#ifndef LMC_ANALYZE_ANALYZE_H
#define LMC_ANALYZE_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/mrc.h"
#include "lmcache/status.h"
#include "trace/reader.h"

#define LMC_ANALYZE_EXACT_MAX_BYTES (2ull << 30) /* 2 GiB of trace file */
#define LMC_ANALYZE_MIN_RATE 0.001

typedef struct lmc_analyze lmc_analyze;

typedef struct lmc_analyze_options {
    bool full;             /* false: requests, keys, unique keys and footprint only */
    double sample_rate;    /* (0, 1]; 0: automatic from file_bytes */
    uint64_t file_bytes;   /* the trace file's size, for the automatic rate (0: exact) */
    const uint64_t *sizes; /* full: L1 capacities (bytes) to evaluate the curve at */
    size_t n_sizes;
} lmc_analyze_options;

typedef struct lmc_analyze_group {
    const char *model_name; /* interned: valid until exit */
    const char *cache_salt; /* "" when none */
    uint64_t requests, keys, keys_read;
    uint64_t unique_keys, footprint_bytes; /* estimates when sampled */
} lmc_analyze_group;

typedef struct lmc_analyze_bucket {
    uint64_t requests, keys, keys_read;
} lmc_analyze_bucket;

typedef struct lmc_analyze_result {
    /* The file (lmc_analyze_file only; zero otherwise). */
    char level[32];
    int64_t trace_schema_version;
    char sm_config_digest[72]; /* "" when the header has none */
    uint64_t malformed;        /* frames the reader skipped */
    bool truncated;            /* the file ends in a cut record */

    /* The records seen, markers (trace/marker.h: notes of tools, not operations) aside. */
    uint64_t records;
    uint64_t dropped;     /* records the recorder said it dropped */
    uint64_t undecodable; /* lookups and reads whose args did not decode (left out) */
    double span_s;        /* the largest finite t_mono */

    double sample_rate; /* the rate used; 1 when exact */
    bool estimated;     /* unique keys and footprint are estimates (sampled) */
    uint64_t requests, keys, keys_read;
    uint64_t unique_keys, footprint_bytes;
    uint64_t unsized_requests; /* lookups without a usable layout_desc (size 0) */
    uint64_t min_object_bytes, max_object_bytes;
    double recorded_hit_rate;  /* keys_read / keys (0 when no key was looked up) */
    lmc_analyze_group *groups; /* sorted by model, then salt; malloc'd */
    size_t n_groups;

    /* Full analysis only. */
    double bucket_s;
    lmc_analyze_bucket *buckets; /* bucket i covers [i, i+1) x bucket_s; malloc'd */
    size_t n_buckets;
    lmc_mrc_result mrc;
} lmc_analyze_result;

/* The automatic sampling rate for a trace file of file_bytes (see above). */
double lmc_analyze_auto_rate(uint64_t file_bytes);

/* LMC_ERR_INVALID for a rate outside [0, 1]; LMC_ERR_NOMEM. */
lmc_status lmc_analyze_create(const lmc_analyze_options *o, lmc_analyze **out, lmc_error *err);
void lmc_analyze_destroy(lmc_analyze *a); /* NULL is fine */

/*
 * Account for rec, the record rd's lmc_trace_reader_next_record just
 * returned; decodes its args through rd when the analysis needs them.
 * Records whose args do not decode are counted (undecodable) and left
 * out. LMC_ERR_NOMEM (message in err) is the only failure.
 */
lmc_status lmc_analyze_record(lmc_analyze *a, lmc_trace_reader *rd, lmc_trace_record *rec,
                              lmc_error *err);

/* The result so far (the analysis may go on); free it with lmc_analyze_result_free. */
lmc_status lmc_analyze_result_get(lmc_analyze *a, lmc_analyze_result *out, lmc_error *err);
void lmc_analyze_result_free(lmc_analyze_result *r);

/*
 * The whole pass over the trace at path (its size sets the automatic
 * rate), with the file's fields of the result. Errors are the reader's
 * (they name the file) or LMC_ERR_NOMEM.
 */
lmc_status lmc_analyze_file(const char *path, const lmc_analyze_options *o, lmc_analyze_result *out,
                            lmc_error *err);

#endif
