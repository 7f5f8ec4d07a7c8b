/*
 * regions.h -- the clients' KV regions: what register_kv_cache maps and
 * store and retrieve copy through.
 *
 * Owns: the registered regions by instance id (each a POSIX shared-memory
 * object the client created, mapped shared), the L1 layout of each (model,
 * world size) -- one chunk, [chunk_size, bytes_per_token] uint8 -- and the
 * block copies between a region and L1 objects (the lmc_kv_copy of
 * engine.h a store or retrieve uses).
 *
 * A region's lifetime is here and only here: register maps it (a
 * re-registration of the instance replaces the mapping), unregister and
 * destroy unmap it, and a request uses it between lmc_regions_acquire and
 * lmc_regions_release. Today acquire hands out a copy of the entry and
 * release does nothing, so an unregister does not wait for copies in
 * flight; the pair is where a reference count belongs.
 *
 * Threads: any; one mutex guards the registry (regions and layouts). The
 * copies run without it.
 */
#ifndef LMC_SERVER_REGIONS_H
#define LMC_SERVER_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/types.h"
#include "server/engine.h"
#include "server/protocol.h"

typedef struct lmc_regions lmc_regions;

/* A registered region, as one request sees it (lmc_regions_acquire). */
typedef struct lmc_region {
    int64_t instance_id;
    char *model_name;
    int64_t world_size, worker_id;
    int64_t num_blocks, tokens_per_block, bytes_per_token;
    uint8_t *base;
    size_t bytes;
    bool used;
} lmc_region;

/* chunk_size: tokens per chunk, which every region's tokens_per_block must divide. */
lmc_status lmc_regions_create(int chunk_size, lmc_regions **out, lmc_error *err);
/* Unmaps every region. */
void lmc_regions_destroy(lmc_regions *rs);

/*
 * register_kv_cache: check the region's geometry, map d->shm_name, and
 * record the layout of (model, world size) at its first registration.
 */
lmc_status lmc_regions_register(lmc_regions *rs, int64_t instance_id, const lmc_kv_region_desc *d,
                                const char *model_name, int64_t world_size, int64_t worker_id,
                                lmc_error *err);
/* unregister_kv_cache: LMC_ERR_NOT_FOUND for an unknown instance. */
lmc_status lmc_regions_unregister(lmc_regions *rs, int64_t instance_id, lmc_error *err);

/* The L1 layout of (model, world size); LMC_ERR_NOT_FOUND until a region registered it. */
lmc_status lmc_regions_layout(lmc_regions *rs, const char *op, const char *model,
                              int64_t world_size, lmc_layout_desc *out, lmc_error *err);

/*
 * The region of instance_id for one store or retrieve of the tokens
 * [start, end) of model: registered for that model, block ids covering
 * the range's blocks, each inside the region. op names the request in
 * messages. Release it when the copies are done.
 */
lmc_status lmc_regions_acquire(lmc_regions *rs, const char *op, int64_t instance_id,
                               const char *model, int64_t start, int64_t end,
                               const int64_t *block_ids, size_t n_block_ids, lmc_region *out,
                               lmc_error *err);
void lmc_regions_release(lmc_regions *rs, lmc_region *r);

/*
 * The copies of one request through an acquired region: chunk i of the
 * request is block_ids[i * bpc, (i + 1) * bpc) with bpc = chunk_size /
 * tokens_per_block; a retrieve leaves the first skip_tokens tokens of the
 * request's range in place (whole blocks). The lmc_kv_copy points at *rc.
 */
typedef struct lmc_region_copy {
    const lmc_region *r;
    const int64_t *block_ids;
    size_t blocks_per_chunk;
    size_t chunk_size;
    size_t skip_tokens;
} lmc_region_copy;

lmc_kv_copy lmc_region_copy_init(lmc_region_copy *rc, const lmc_region *r, const int64_t *block_ids,
                                 int chunk_size, size_t skip_tokens);

#endif
