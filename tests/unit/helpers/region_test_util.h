/*
 * region_test_util.h -- the server's regions and handlers in tests, without a
 * transport: a StorageManager, an engine and a regions table behind
 * lmc_op_execute (rt_fixture, a cmocka setup/teardown pair), real POSIX shm
 * objects to register (rt_shm), and the requests of one connection (rt_who)
 * built from prompts of whole chunks (rt_prompt).
 *
 * Threads: a fixture is shared by the threads of a race test; each thread's
 * last request error is its own (rt_err).
 */
#ifndef LMC_TEST_REGION_TEST_UTIL_H
#define LMC_TEST_REGION_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/storage_manager.h"
#include "server/copy_pool.h"
#include "server/engine.h"
#include "server/ops.h"
#include "server/regions.h"

#define RT_CHUNK 16 /* the server's chunk size, in tokens */
#define RT_TPB 4    /* tokens per block of every region */
#define RT_BPC (RT_CHUNK / RT_TPB)

typedef struct rt_fixture {
    lmc_storage_manager *sm;
    lmc_engine *e;
    lmc_regions *rs;
    lmc_copy_pool *pool; /* NULL, or the copy helpers ctx.copies names */
    lmc_op_ctx ctx;
} rt_fixture;

/* A POSIX shm object of the test's, mapped. */
typedef struct rt_shm {
    char name[96];
    int fd;
    uint8_t *base;
    size_t bytes;
    int64_t num_blocks, bpt;
} rt_shm;

/* A connection's requests: conn, and the uid of the process behind it. */
typedef struct rt_who {
    uint64_t conn;
    int64_t uid;
} rt_who;

/* n_chunks chunks of tokens from seed: distinct seeds, distinct keys. */
typedef struct rt_prompt {
    uint32_t tokens[64 * RT_CHUNK];
    size_t n;
} rt_prompt;

/* This thread's last request error (rt_run). */
lmc_error *rt_err(void);

/* cmocka setup/teardown: *state is an rt_fixture (chunk RT_CHUNK, L1 20 MB, LRU). */
int rt_setup(void **state);
/* The same, with 2 copy helpers that share every transfer of 2 chunks or more. */
int rt_setup_with_copy_helpers(void **state);
int rt_teardown(void **state);

/*
 * This process's tag for the names it makes: "<pid>-<random hex>". Pids
 * repeat and /dev/shm may hold an object a killed run left under this pid.
 */
const char *rt_tag(void);

/* A fresh object "/lmcache-client-unit-<tag>-<n>" of num_blocks blocks of RT_TPB x bpt bytes. */
void rt_shm_make(rt_shm *s, int64_t num_blocks, int64_t bpt);
void rt_shm_drop(rt_shm *s);
uint8_t *rt_block(const rt_shm *s, int64_t b);

/* Connection conn of a process of this test's uid. */
rt_who rt_peer(uint64_t conn);

/* Run q through lmc_op_execute (the error goes to rt_err()). */
lmc_status rt_run(rt_fixture *f, lmc_request *q);
/* register_kv_cache of an object by name with a geometry, or of an rt_shm; unregister_kv_cache. */
lmc_status rt_reg_name(rt_fixture *f, rt_who w, int64_t instance, const char *name,
                       int64_t num_blocks, int64_t bpt, const char *model, int64_t ws,
                       int64_t worker);
lmc_status rt_reg(rt_fixture *f, rt_who w, int64_t instance, const rt_shm *s, const char *model,
                  int64_t ws, int64_t worker);
lmc_status rt_unreg(rt_fixture *f, rt_who w, int64_t instance);

void rt_prompt_make(rt_prompt *p, size_t n_chunks, uint32_t seed);
/* The key of the whole prompt (worker < 0: a lookup's). */
lmc_ipc_key rt_key(const rt_prompt *p, const char *model, int64_t ws, int64_t worker,
                   const char *rid);
/*
 * store or retrieve (op) of the whole prompt through blocks first, first +
 * 1, ..., under request id "rid"; rt_transfer_as names it (a retrieve reads
 * through the locks of its lookup's session, sessions.h).
 */
lmc_status rt_transfer(rt_fixture *f, lmc_op op, rt_who w, int64_t instance, const rt_prompt *p,
                       const char *model, int64_t ws, int64_t worker, int64_t first);
lmc_status rt_transfer_as(rt_fixture *f, lmc_op op, const char *rid, rt_who w, int64_t instance,
                          const rt_prompt *p, const char *model, int64_t ws, int64_t worker,
                          int64_t first);
/* lookup (every rank of ws) under rid and wait: the hit chunks, read-locked for one reader. */
size_t rt_lookup(rt_fixture *f, const rt_prompt *p, const char *model, int64_t ws, const char *rid);

/* The load generator's KV byte pattern from seed (client/workload.h), written or checked. */
void rt_fill(uint8_t *p, size_t n, uint8_t seed);
bool rt_holds(const uint8_t *p, size_t n, uint8_t seed);
/* L1 bytes in use. */
uint64_t rt_l1_used(rt_fixture *f);

#endif
