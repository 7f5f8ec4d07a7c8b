/*
 * config.h -- the StorageManager configuration and its one flag parser.
 *
 * Owns: lmc_sm_config (what LMCache's StorageManagerConfig holds, section
 * 11 of spec/storage-manager.md), the parser of LMCache's
 * add_storage_manager_args flag set (shared by `lmcache server` and
 * `lmcache trace replay`), and the serialisation of the config to the JSON
 * tree of LMCache's dataclasses, for the trace header and its digest.
 *
 * Threads: none; a config is built once at start-up and then read-only.
 */
#ifndef LMC_STORAGE_CONFIG_H
#define LMC_STORAGE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/json.h"
#include "lmcache/status.h"

#define LMC_GIB (1024.0 * 1024.0 * 1024.0)

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
    /* L2 */
    lmc_json **l2_adapters; /* --l2-adapter, repeatable, each a validated object */
    size_t n_l2_adapters;
    char *store_policy;                /* --l2-store-policy: default | skip_l1 */
    char *prefetch_policy;             /* --l2-prefetch-policy: default | retain */
    uint32_t prefetch_max_in_flight;   /* --l2-prefetch-max-in-flight, default 8 */
    uint32_t periodic_notifier_interval_ms; /* --periodic-notifier-interval-ms, default 5 */

    /* Which required flags were given. */
    bool l1_size_set;
    bool eviction_policy_set;
} lmc_sm_config;

/* Fill every field with LMCache's defaults (required fields unset). */
lmc_status lmc_sm_config_init(lmc_sm_config *cfg);
/* Free what the config owns. */
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

/* After parsing: required flags present ("--l1-size-gb is required"), cross-checks. */
lmc_status lmc_sm_config_finish(lmc_sm_config *cfg, lmc_error *err);

/*
 * Convenience: parse a whole argv (argv[0] skipped) that holds only
 * StorageManager flags, then finish. Unknown flag: LMC_ERR_INVALID.
 */
lmc_status lmc_sm_config_parse_all(lmc_sm_config *cfg, int argc, char **argv, lmc_error *err);

/* The flag help, one flag per line with its default. */
void lmc_sm_config_print_help(FILE *out);

/*
 * The JSON tree of LMCache's StorageManagerConfig dataclasses (field names
 * of section 11.1): l1_manager_config{memory_config{...}, gds_l1_config,
 * write_ttl_seconds, read_ttl_seconds}, eviction_config{...},
 * l2_adapter_config{...}, store_policy, prefetch_policy,
 * prefetch_max_in_flight, periodic_notifier_interval_ms. NULL on OOM.
 */
lmc_json *lmc_sm_config_to_json(const lmc_sm_config *cfg);

/*
 * json.dumps(tree, sort_keys=True) and its SHA-256 hex: the trace header's
 * sm_config_json and sm_config_digest. *json_out is malloc'd (caller frees).
 */
lmc_status lmc_sm_config_digest(const lmc_sm_config *cfg, char **json_out, char digest_hex[65]);

/* Deep copy (for objects that keep the config past the caller's). */
lmc_status lmc_sm_config_copy(lmc_sm_config *dst, const lmc_sm_config *src);

#endif
