/*
 * config.h -- the library's private half of the StorageManager config.
 *
 * The type, its parser and its public functions are in the public
 * lmcache/config.h (included here). This half holds what needs private
 * types: the config as an lmc_json tree (LMCache's dataclasses, for the
 * trace header) and its digest.
 *
 * Threads: none; a config is built once at start-up and then read-only.
 */
#ifndef LMC_STORAGE_CONFIG_H
#define LMC_STORAGE_CONFIG_H

#include "core/json.h"
#include "lmcache/config.h"
#include "lmcache/status.h"

#define LMC_GIB (1024.0 * 1024.0 * 1024.0)

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

/*
 * What the flag table says about one flag, for front ends that handle the
 * flags' text before the parser sees it (`trace sweep` splits comma lists
 * and passes each value on to a replay).
 */
typedef struct lmc_sm_flag_info {
    const char *name;   /* "--l1-size-gb": valid until exit */
    bool takes_value;   /* false: a switch ("--no-l1-use-lazy") */
    bool accumulates;   /* each occurrence adds one (--l2-adapter); else the last one wins */
    bool value_is_json; /* the value is JSON text, commas and all (--l2-adapter) */
} lmc_sm_flag_info;

/* The flag called name[0, len) ("--flag", without "=value"): true and *out, or false. */
bool lmc_sm_config_flag_find(const char *name, size_t len, lmc_sm_flag_info *out);

/*
 * argparse's test for "this word is an option, not a value", which the
 * parser applies to the word after a flag: "--x" is one, "-1.5" and "a b"
 * are not.
 */
bool lmc_sm_config_looks_like_option(const char *s);

#endif
