/*
 * flags.h -- the small command-line helpers every front end shares: the
 * value of "--flag value" or "--flag=value", and number parsers whose
 * messages name the flag and the offending text.
 *
 * The StorageManager's own flags have their table-driven parser in
 * src/storage/config.c; these are for the flags around it (`lmcache bench
 * server`, `lmcache trace replay`, `lmcache server`). Messages carry no
 * command prefix: the caller adds "lmcache <command>: ".
 *
 * Owns nothing. Threads: all functions are reentrant.
 */
#ifndef LMC_CORE_FLAGS_H
#define LMC_CORE_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "lmcache/status.h"

/*
 * Whether argv[*i] is `flag`, and its value. *matched is true when argv[*i]
 * is "flag" or "flag=..."; the value is the text after '=', or argv[*i + 1]
 * (then *i is advanced past it), or NULL when "flag" is the last argument.
 * A longer name that starts with flag ("--output-dir" for "--output") does
 * not match.
 */
const char *lmc_flag_value(const char *flag, int argc, char **argv, int *i, bool *matched);

/*
 * A decimal integer in [lo, hi] with no sign. Errors:
 * "FLAG: 'TEXT' is not a non-negative integer", "FLAG: X is not in [LO, HI]".
 */
lmc_status lmc_flag_parse_u64(const char *flag, const char *text, uint64_t lo, uint64_t hi,
                              uint64_t *out, lmc_error *err);

/*
 * A decimal integer in [lo, hi], as strtoll reads it (leading blanks and a
 * sign allowed). text may be NULL (a missing value). Errors:
 * "FLAG: 'TEXT' is not an integer", "FLAG: X is not in [LO, HI]".
 */
lmc_status lmc_flag_parse_int(const char *flag, const char *text, int64_t lo, int64_t hi,
                              int64_t *out, lmc_error *err);

/* Any number strtod reads whole. Error: "FLAG: 'TEXT' is not a number". */
lmc_status lmc_flag_parse_double(const char *flag, const char *text, double *out, lmc_error *err);

/* A finite number >= 0. Error: "FLAG: 'TEXT' is not a finite number >= 0". */
lmc_status lmc_flag_parse_nonneg_double(const char *flag, const char *text, double *out,
                                        lmc_error *err);

#endif
