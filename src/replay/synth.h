/*
 * synth.h -- synthetic storage-level traces, for benchmarks and tests.
 *
 * Owns nothing between calls; each call writes one .lct file (the trace
 * format of spec/trace-format.md, through trace/format.h) with fixed
 * timestamps, so the same arguments always give the same bytes.
 *
 *   store pairs   n records alternating reserve_write(new) and
 *                 finish_write of k keys, gap seconds apart; keys repeat
 *                 every `distinct` pairs (the replay benchmark's loop).
 *   lookups       n submit_prefetch_task records of k keys, gap seconds
 *                 apart: record i looks up the k chunks (4 KiB objects) of
 *                 document d = floor(D u^2), u uniform in [0, 1) from a
 *                 fixed seed, out of D documents: a few documents come back
 *                 often, most rarely (the analysis benchmark's trace).
 *   workload      the calls a server makes for each request of a workload
 *                 (client/workload.h: a Mooncake trace or the synthetic
 *                 chat), at the request's arrival time: one chunk key per
 *                 256 tokens (the chunk hash names the whole prefix, as the
 *                 server's does), submit_prefetch_task of every chunk, and
 *                 10 ms later (the lookup has answered, the engine has
 *                 scheduled the request) read_prefetched_results
 *                 enter/exit and finish_read_prefetched of the leading
 *                 chunks seen before (the recording's hits, with unlimited
 *                 capacity), then reserve_write(new) and finish_write of
 *                 the rest, each call 1 us after the previous one. Records
 *                 are in time order, overlapping requests interleaved.
 *
 * Threads: none; reentrant.
 */
#ifndef LMC_REPLAY_SYNTH_H
#define LMC_REPLAY_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/workload.h"
#include "lmcache/status.h"

/* n records of keys_per_record keys of 4 KiB; LMC_ERR_IO naming path, or LMC_ERR_NOMEM. */
lmc_status lmc_replay_synth_store_pairs(const char *path, size_t n, size_t keys_per_record,
                                        double gap_s, size_t distinct, lmc_error *err);

/* n lookups of keys_per_record keys over `documents` documents (see above); errors as above. */
lmc_status lmc_replay_synth_lookups(const char *path, size_t n, size_t keys_per_record,
                                    double gap_s, size_t documents, lmc_error *err);

typedef struct lmc_replay_synth_options {
    size_t max_requests;   /* 0: every request of the workload */
    double time_scale;     /* arrival times are multiplied by it (0: 1.0) */
    uint64_t object_bytes; /* per chunk (0: 16 KiB) */
} lmc_replay_synth_options;

typedef struct lmc_replay_synth_info {
    uint64_t records;    /* records written */
    uint64_t requests;   /* requests they came from */
    uint64_t chunks;     /* chunk keys looked up, over all requests */
    uint64_t hit_chunks; /* of which the recording found (read) */
    double span_s;       /* the last record's t_mono */
} lmc_replay_synth_info;

/*
 * The Mooncake trace of the project's shared data (../shared/traces/mooncake/
 * beside the source tree this was built from) into buf; false when it is not
 * readable. For benchmarks and tests, which fall back to the chat workload.
 */
bool lmc_replay_synth_mooncake_path(char *buf, size_t len);

/* The workload's requests as server calls (see the top of this file). info may be NULL. */
lmc_status lmc_replay_synth_workload(const lmc_workload *w, const char *path,
                                     const lmc_replay_synth_options *opt,
                                     lmc_replay_synth_info *info, lmc_error *err);

#endif
