/*
 * names.h -- small helpers for tables of names (registries, enum names).
 *
 * Owns nothing. A registry keeps its names in one table; these helpers
 * derive what other places need from it (a lookup, the "one of a, b, c"
 * list of a message or a help text), so no list is ever written twice.
 *
 * Threads: none; pure functions over borrowed arrays.
 */
#ifndef LMC_CORE_NAMES_H
#define LMC_CORE_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h> /* strlen, for LMC_NAMES_DEFINE_PARSE */

#include "lmcache/status.h"

/*
 * Join n names into buf: sep between two names, and last_sep (when not
 * NULL) before the last one, so {"a", "b", "c"} gives "a, b, c" with
 * (", ", NULL) and "a, b or c" with (", ", " or "). NULL entries are
 * skipped. Truncated to fit cap bytes (always NUL-terminated when cap > 0);
 * returns the length the whole list needs.
 */
size_t lmc_names_join(const char *const *names, size_t n, const char *sep, const char *last_sep,
                      char *buf, size_t cap);

/*
 * The index of the name equal to s[0..len) (exact, case-sensitive) in
 * *index; false when none matches. NULL entries never match.
 */
bool lmc_names_find(const char *const *names, size_t n, const char *s, size_t len, size_t *index);

/*
 * lmc_names_find, or LMC_ERR_INVALID naming what was looked for and what is
 * accepted: "unknown store policy 'x' (expected default or skip_l1)". At
 * most 64 bytes of s are quoted (then "..."); a NULL s reads "(null)".
 */
lmc_status lmc_names_parse(const char *const *names, size_t n, const char *what, const char *s,
                           size_t len, size_t *index, lmc_error *err);

/*
 * Defines the parser of an enum whose names table is indexed by its values,
 * so that each such enum's parser is this one body rather than a copy:
 *
 *   LMC_NAMES_DEFINE_PARSE(lmc_replay_pace_parse, lmc_replay_pace, lmc_replay_pace_names,
 *                          lmc_replay_pace_count, "pace")
 *
 * defines lmc_status lmc_replay_pace_parse(const char *name, lmc_replay_pace
 * *out, lmc_error *err): lmc_names_parse of the NUL-terminated name (NULL
 * reads "(null)" and matches nothing), *out set only on LMC_OK.
 */
#define LMC_NAMES_DEFINE_PARSE(fn, type, names, count, what)                                       \
    lmc_status fn(const char *name, type *out, lmc_error *err)                                     \
    {                                                                                              \
        size_t index_ = 0;                                                                         \
        lmc_status st_ = lmc_names_parse((names), (count), (what), name,                           \
                                         name != NULL ? strlen(name) : 0, &index_, err);           \
        if (st_ == LMC_OK)                                                                         \
            *out = (type)index_;                                                                   \
        return st_;                                                                                \
    }

#endif
