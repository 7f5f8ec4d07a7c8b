/*
 * sweep.h -- the grid of `lmcache trace sweep`: which StorageManager
 * configurations a sweep replays, in which order, and the flags of each.
 *
 * Owns: the axes (a StorageManager flag and its list of values, or the L2
 * choice: alternative sets of L2 adapters), the words every configuration
 * gets unchanged (switches, --l2-adapter, a flag given one value), and the
 * configurations' flags, built on demand.
 *
 * Order: the axes in the order their flags first appear on the command
 * line, the last one varying fastest (as nested loops written in that
 * order): --l1-size-gb 1,2 --eviction-policy LRU,ARC gives (1 LRU), (1
 * ARC), (2 LRU), (2 ARC). A flag given one value is an axis of one value:
 * the same in every configuration, and not shown as a column.
 *
 * Which flags: any StorageManager flag that takes a value (the one table in
 * storage/config.c says which) takes a comma-separated list; an empty item
 * ("0.5,,1") is an error. --l2-adapter's value is JSON, commas and all, so
 * it is never split: every --l2-adapter is fixed (each configuration gets
 * all of them). The L2 adapters are swept with --l2-adapter-choice, one
 * alternative per occurrence: "none" (no adapter of its own), one adapter
 * object, or a JSON array of them; the choices form one axis, at the place
 * of the first occurrence, and come after the fixed --l2-adapter ones.
 *
 * Threads: none.
 */
#ifndef LMC_REPLAY_SWEEP_H
#define LMC_REPLAY_SWEEP_H

#include <stdbool.h>
#include <stddef.h>

#include "lmcache/config.h"
#include "lmcache/status.h"

/* The sweep flag whose occurrences are the alternatives of the L2 axis. */
#define LMC_SWEEP_L2_CHOICE_FLAG "--l2-adapter-choice"

typedef struct lmc_sweep_axis {
    char *flag;    /* "--l1-size-gb", or LMC_SWEEP_L2_CHOICE_FLAG */
    char **values; /* the values as given (an L2 choice: its text) */
    size_t n;
} lmc_sweep_axis;

typedef struct lmc_sweep_grid {
    lmc_sweep_axis *axes; /* every flag given, one value or many, in command-line order */
    size_t n_axes;
    char **fixed; /* words every configuration gets (switches, --l2-adapter JSON) */
    size_t n_fixed;
} lmc_sweep_grid;

/* The words of one configuration: "--flag" "value" ... (each owned by it). */
typedef struct lmc_sweep_words {
    char **v;
    size_t n;
} lmc_sweep_words;

void lmc_sweep_grid_init(lmc_sweep_grid *g);
void lmc_sweep_grid_free(lmc_sweep_grid *g);

/*
 * Try argv[*i] as a StorageManager flag or --l2-adapter-choice. *consumed
 * says whether it was one; *i is advanced past its value. Errors
 * (LMC_ERR_INVALID) name the flag and the value: a missing value, an empty
 * list item, a flag given twice, an L2 choice that is not "none", a JSON
 * object or an array of objects.
 */
lmc_status lmc_sweep_grid_parse_arg(lmc_sweep_grid *g, int argc, char **argv, int *i,
                                    bool *consumed, lmc_error *err);

/*
 * How many configurations: the product of the axes' lengths, or
 * LMC_ERR_INVALID when it exceeds max ("N configurations ... more than
 * --max-configs M").
 */
lmc_status lmc_sweep_grid_count(const lmc_sweep_grid *g, size_t max, size_t *n, lmc_error *err);

/* The axes with more than one value (the ones a table shows), in order. */
size_t lmc_sweep_grid_varying(const lmc_sweep_grid *g, const lmc_sweep_axis **out, size_t cap);

/*
 * Value v of axis ax as tables, labels and legends show it: the value
 * itself, except that an L2 choice shows its adapters' types ("none",
 * "mock", "fs+mock") unless two choices would show alike (then its text).
 * Written to buf (NUL-terminated, cut to len).
 */
void lmc_sweep_axis_shown(const lmc_sweep_axis *ax, size_t v, char *buf, size_t len);

/* The value index of configuration idx on axis a (last axis fastest). */
size_t lmc_sweep_grid_value_index(const lmc_sweep_grid *g, size_t idx, size_t a);

/*
 * The StorageManager words of configuration idx: the fixed words, then per
 * axis "--flag value" (an L2 choice as --l2-adapter words, one per
 * adapter). LMC_ERR_NOMEM.
 */
lmc_status lmc_sweep_grid_words(const lmc_sweep_grid *g, size_t idx, lmc_sweep_words *out);

/*
 * The same as one line for people, only the varying axes but except (NULL:
 * none), values as lmc_sweep_axis_shown gives them ("--l1-size-gb 0.5
 * --eviction-policy ARC"), or none_text when nothing is left. Malloc'd;
 * NULL when memory runs out.
 */
char *lmc_sweep_grid_label(const lmc_sweep_grid *g, size_t idx, const char *except,
                           const char *none_text);

/* What lmc_sweep_grid_label calls a configuration when no flag varies. */
#define LMC_SWEEP_ONLY_CONFIG "(the only configuration)"

void lmc_sweep_words_free(lmc_sweep_words *w);

/*
 * Build and check configuration idx as `trace replay` would (the same
 * parser, lmc_sm_config_set, then lmc_sm_config_finish): LMC_ERR_INVALID
 * with the parser's message, which names the flag and the value. On
 * success *cfg is the config (free it with lmc_sm_config_free).
 */
lmc_status lmc_sweep_grid_config(const lmc_sweep_grid *g, size_t idx, lmc_sm_config *cfg,
                                 lmc_error *err);

#endif
