/*
 * filter.h -- which records of a trace a tool looks at: a time window, a
 * set of qualnames, a chunk-hash prefix.
 *
 * Owns nothing: a filter borrows its qualname strings. `trace dump` uses
 * all three criteria, `trace slice` the window and the qualnames; a record
 * passes when it passes every criterion that is set.
 *
 *   window    from <= t_mono < to (seconds since the header's t_mono_start),
 *             either end optional; half-open, so adjacent windows split a
 *             trace without overlap. A record whose t_mono is not a number
 *             passes only when neither end is set.
 *   qualname  the record's qualname equals one of the names in full, or
 *             its short form (the part after the StorageManager prefix,
 *             "finish_write") equals one.
 *   key       one of the ObjectKeys anywhere in the args (a keys list, a
 *             nested spec) has a chunk_hash that starts with the prefix, a
 *             whole number of hex digits (8 to 128; an odd count compares
 *             the last nibble).
 *
 * Threads: none; pure functions over borrowed data.
 */
#ifndef LMC_TRACE_FILTER_H
#define LMC_TRACE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/types.h"
#include "trace/format.h"

/* The fewest hex digits --key accepts: shorter prefixes match too much to mean anything. */
#define LMC_TRACE_KEY_PREFIX_MIN_DIGITS 8

typedef struct lmc_trace_filter {
    bool has_from, has_to;
    double from, to;
    const char *const *qualnames; /* borrowed; none: every qualname */
    size_t n_qualnames;
    uint8_t key_prefix[LMC_CHUNK_HASH_MAX];
    size_t key_digits; /* 0: no key criterion */
} lmc_trace_filter;

/*
 * Set the key criterion from hex text. LMC_ERR_INVALID, naming the text:
 * "'x' is not hexadecimal", "'abc' is too short (at least 8 hex digits)",
 * "... is too long (a chunk hash has at most 64 bytes)".
 */
lmc_status lmc_trace_filter_set_key(lmc_trace_filter *f, const char *hex, lmc_error *err);

bool lmc_trace_filter_time(const lmc_trace_filter *f, double t_mono);
bool lmc_trace_filter_qualname(const lmc_trace_filter *f, const char *q, size_t len);
bool lmc_trace_filter_key(const lmc_trace_filter *f, const lmc_trace_arg *args, size_t nargs);

/* All three. */
bool lmc_trace_filter_match(const lmc_trace_filter *f, const lmc_trace_record *rec);

/*
 * The ObjectKeys anywhere in args (lists, tuples, sets, maps and registered
 * kinds are searched), and the first of them in *first (NULL when none;
 * first may be NULL).
 */
size_t lmc_trace_args_count_keys(const lmc_trace_arg *args, size_t nargs,
                                 const lmc_object_key **first);

#endif
