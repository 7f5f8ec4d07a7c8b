/*
 * config.h -- the StorageManager configuration: what a program fills in
 * before lmc_sm_create.
 *
 * Owns: lmc_sm_config (what LMCache's StorageManagerConfig holds, section
 * 11 of spec/storage-manager.md) and its one flag parser, the flag set of
 * LMCache's add_storage_manager_args (shared by `lmcache server` and
 * `lmcache trace replay`). A program builds a config in one of three ways,
 * always starting with lmc_sm_config_init and ending with
 * lmc_sm_config_finish:
 *
 *   - from its own argv: lmc_sm_config_parse_arg in its option loop, or
 *     lmc_sm_config_parse_all when the argv holds nothing else;
 *   - flag by flag: lmc_sm_config_set(cfg, "--l1-size-gb", "8", err), with
 *     the same validation and messages as the command line;
 *   - by assigning the plain fields below (sizes, TTLs, fractions, limits).
 *     The strings are owned by the config (use lmc_sm_config_set for them)
 *     and so are the L2 adapters (only the parsers add them).
 *
 * Memory: every string and adapter inside a config is owned by it and freed
 * by lmc_sm_config_free; lmc_sm_create copies the config, so the caller may
 * free its own as soon as create returns.
 *
 * Threads: none; a config is built once at start-up and then read-only.
 */
#ifndef LMCACHE_CONFIG_H
#define LMCACHE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lmcache/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parsed JSON value; private to the library (see lmc_sm_config_to_json_text). */
struct lmc_json;

typedef struct lmc_sm_config {
    /* L1 memory */
    uint64_t l1_size_bytes;      /* --l1-size-gb (required), int(gb * 2^30) */
    bool l1_use_lazy;            /* --l1-use-lazy / --no-l1-use-lazy, default true */
    uint64_t l1_init_size_bytes; /* --l1-init-size-gb, default 20 GiB */
    uint64_t l1_align_bytes;     /* --l1-align-bytes, default 4096 */
    char *shm_name;              /* --shm-name, default NULL (anonymous memory) */
    /* L1 manager */
    uint64_t write_ttl_seconds; /* --l1-write-ttl-seconds, default 600 */
    uint64_t read_ttl_seconds;  /* --l1-read-ttl-seconds, default 300 */
    /* eviction */
    char *eviction_policy;    /* --eviction-policy (required) */
    double trigger_watermark; /* --eviction-trigger-watermark, default 0.8 */
    double eviction_ratio;    /* --eviction-ratio, default 0.2 */
    /*
     * --enable-extra-logging and --extra-logging-interval (default false,
     * 10.0 s): kept in the config (LMCache's EvictionConfig has them); the
     * eviction here logs nothing extra.
     */
    bool extra_logging_enabled;
    double extra_logging_interval;
    /* L2 */
    struct lmc_json **l2_adapters; /* --l2-adapter, repeatable, each a validated object */
    size_t n_l2_adapters;
    char *store_policy;                     /* --l2-store-policy: default | skip_l1 */
    char *prefetch_policy;                  /* --l2-prefetch-policy: default | retain */
    uint32_t prefetch_max_in_flight;        /* --l2-prefetch-max-in-flight, default 8 */
    uint32_t periodic_notifier_interval_ms; /* --periodic-notifier-interval-ms, default 5 */

    /*
     * Which required flags were given (the parsers set them; a program that
     * assigns l1_size_bytes itself sets l1_size_set too).
     */
    bool l1_size_set;
    bool eviction_policy_set;
} lmc_sm_config;

/* Fill every field with LMCache's defaults (required fields unset). */
lmc_status lmc_sm_config_init(lmc_sm_config *cfg);
/* Free what the config owns and zero it. cfg may be NULL. */
void lmc_sm_config_free(lmc_sm_config *cfg);

/*
 * Try to consume argv[*i] (and its value) as a StorageManager flag. Accepts
 * "--flag value" and "--flag=value". On return *consumed says whether it was
 * one of ours; *i is advanced past what was consumed. A malformed or
 * out-of-range value: LMC_ERR_INVALID with a message naming the flag, e.g.
 * "--eviction-ratio: 1.5 is not in (0, 1]".
 */
lmc_status lmc_sm_config_parse_arg(lmc_sm_config *cfg, int argc, char **argv, int *i,
                                   bool *consumed, lmc_error *err);

/*
 * Apply one flag by name, as if "flag value" had been on the command line:
 * lmc_sm_config_set(cfg, "--eviction-policy", "LRU", err). value is NULL
 * for a switch ("--no-l1-use-lazy") and required otherwise. An unknown flag
 * or a bad value: LMC_ERR_INVALID. Both strings are borrowed for the call.
 */
lmc_status lmc_sm_config_set(lmc_sm_config *cfg, const char *flag, const char *value,
                             lmc_error *err);

/* After parsing: required flags present ("--l1-size-gb is required"), cross-checks. */
lmc_status lmc_sm_config_finish(lmc_sm_config *cfg, lmc_error *err);

/*
 * Convenience: parse a whole argv (argv[0] skipped) that holds only
 * StorageManager flags, then finish. Unknown flag: LMC_ERR_INVALID.
 */
lmc_status lmc_sm_config_parse_all(lmc_sm_config *cfg, int argc, char **argv, lmc_error *err);

/* The flag help, one flag per line with its default. */
void lmc_sm_config_print_help(FILE *out);

/* Deep copy into an uninitialised dst (free it with lmc_sm_config_free). */
lmc_status lmc_sm_config_copy(lmc_sm_config *dst, const lmc_sm_config *src);

/*
 * The config as the JSON of LMCache's StorageManagerConfig dataclasses,
 * json.dumps(tree, sort_keys=True): the text a trace header stores as
 * sm_config_json. *json_out is malloc'd (caller frees); LMC_ERR_NOMEM when
 * memory runs out (then *json_out is NULL).
 */
lmc_status lmc_sm_config_to_json_text(const lmc_sm_config *cfg, char **json_out);

#ifdef __cplusplus
}
#endif
#endif
