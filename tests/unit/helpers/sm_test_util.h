/*
 * sm_test_util.h -- building StorageManagers and keys in tests.
 */
#ifndef LMC_TEST_SM_TEST_UTIL_H
#define LMC_TEST_SM_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/storage_manager.h"

/*
 * A StorageManager from flags given as one string, e.g.
 * "--l1-size-gb 0.01 --eviction-policy LRU". Arguments are split on spaces,
 * except that a JSON value after --l2-adapter may contain spaces if it is the
 * last token group (use sm_test_create_argv for full control).
 * Fails the test on error.
 */
lmc_storage_manager *sm_test_create(const char *flags);
lmc_storage_manager *sm_test_create_argv(int argc, char **argv);
/* The same with runtime options (NULL: the defaults). */
lmc_storage_manager *sm_test_create_argv_ex(int argc, char **argv,
                                            const lmc_sm_runtime_options *opt);

/*
 * A finished config from flags given as one string (split on spaces) and,
 * when l2_json is not NULL, --l2-adapter l2_json. Caller frees it with
 * lmc_sm_config_free. Fails the test on error.
 */
lmc_sm_config sm_test_config(const char *flags, const char *l2_json);

/* One with a 0.01 GiB L1 (LRU) and the L2 adapter given as JSON. */
lmc_storage_manager *sm_test_create_l2(char *json);

/* Keys with 32-byte hashes derived from base+i, model "test/model", rank 0x01000100. */
void sm_test_keys(lmc_object_key *keys, size_t n, uint64_t base);

/* A one-tensor uint8 layout of `bytes` bytes. */
lmc_layout_desc sm_test_layout(uint64_t bytes);

/* reserve_write(new) + fill each object with a byte pattern from its key + finish_write. */
size_t sm_test_store(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                     const lmc_layout_desc *layout);

/* The byte the pattern puts at offset off of key's object. */
uint8_t sm_test_pattern(const lmc_object_key *key, uint64_t off);

/* Poll query_prefetch_status until LMC_OK (max 5 s); fails the test on timeout. */
void sm_test_wait_prefetch(lmc_storage_manager *sm, const lmc_prefetch_handle *h, lmc_bitmap *out);

/*
 * Prefetch keys (request "rd", trim prefix), assert that all n are found,
 * read them and assert that each holds sm_test_store's pattern (sampled
 * every 331 bytes), then finish the read.
 */
void sm_test_prefetch_and_check(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                                const lmc_layout_desc *layout);

/* A fresh directory under /tmp (caller removes it with sm_test_rmdir). */
char *sm_test_mkdtemp(void);
void sm_test_rmdir(char *dir);

#endif
