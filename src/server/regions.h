/*
 * regions.h -- the clients' KV regions: what register_kv_cache maps and
 * store and retrieve copy through.
 *
 * Owns: the registered regions (each a POSIX shared-memory object the
 * client created, mapped shared), keyed by (connection, instance id); the
 * L1 layout of each (model, world size) -- one chunk, [chunk_size,
 * bytes_per_token] uint8 -- while a region of it is registered; the block
 * copies between a region and L1 objects (the lmc_kv_copy of engine.h a
 * store or retrieve uses) and their guard against a region that shrinks.
 *
 * The rules (docs/security.md, "Client memory (KV regions)"):
 *  - What is mapped: an object named "/lmcache-client-<suffix>" (suffix of
 *    [A-Za-z0-9._-]) in /dev/shm, opened without following a symlink: a
 *    regular file owned by the connecting process's user (peer_uid),
 *    not writable by group or others, at least as large as the geometry
 *    says. Anything else -- the server's own pool, sem.* objects, another
 *    user's region, a missing object -- gets the one reply
 *    "register_kv_cache: region refused"; the reason is logged at DEBUG.
 *  - A region belongs to the connection that registered it: only that
 *    connection's requests see its instance id, so connections never
 *    constrain or reach each other's regions. lmc_regions_drop_conn
 *    unregisters a connection's regions when it closes.
 *  - A (model, world size) layout exists while a region of it is
 *    registered; a region with another bytes_per_token for the same
 *    (model, world size) is refused, naming the conflict, until the last
 *    region of the old layout is gone. The slots (MAX_REGIONS regions,
 *    MAX_LAYOUTS layouts) are freed with them.
 *  - A request uses a region between lmc_regions_acquire and
 *    lmc_regions_release, which hold a reference: unregister,
 *    re-registration and drop_conn take the region out of the table at
 *    once, and the last reference unmaps it, so no copy touches unmapped
 *    memory.
 *  - Every copy is bounded twice: by the L1 object's size (which must be
 *    the region's chunk: blocks_per_chunk blocks of tokens_per_block x
 *    bytes_per_token) and by the region's blocks; the key's world size and
 *    worker id must be the region's.
 *  - A client may truncate its object while it is mapped. The copies run
 *    under a SIGBUS guard (a process-wide handler, installed once, and a
 *    per-thread jump buffer armed only around a copy and only for the
 *    faulting address inside that region): a fault fails that copy with
 *    an error, and any other SIGBUS goes to the disposition that was there
 *    before.
 *
 * Threads: any; one mutex guards the tables (regions, layouts, reference
 * counts). The copies run without it, on the caller's reference.
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
/* A registered region, held by one request (lmc_regions_acquire); opaque. */
typedef struct lmc_region lmc_region;

/* chunk_size: tokens per chunk, which every region's tokens_per_block must divide. */
lmc_status lmc_regions_create(int chunk_size, lmc_regions **out, lmc_error *err);
/* Unmaps every region; none may be held. */
void lmc_regions_destroy(lmc_regions *rs);

/*
 * register_kv_cache on connection conn_id (lmc_request.conn_id) from a
 * process of user peer_uid (-1: unknown, refused): check the geometry and
 * the object (the rules above), map it, and record it under (conn_id,
 * instance_id), replacing that connection's earlier registration of it.
 */
lmc_status lmc_regions_register(lmc_regions *rs, uint64_t conn_id, int64_t peer_uid,
                                int64_t instance_id, const lmc_kv_region_desc *d,
                                const char *model_name, int64_t world_size, int64_t worker_id,
                                lmc_error *err);
/* unregister_kv_cache: LMC_ERR_NOT_FOUND for an instance conn_id has not registered. */
lmc_status lmc_regions_unregister(lmc_regions *rs, uint64_t conn_id, int64_t instance_id,
                                  lmc_error *err);
/* Connection conn_id closed: unregister its regions. Returns how many. */
size_t lmc_regions_drop_conn(lmc_regions *rs, uint64_t conn_id);

/* The L1 layout of (model, world size); LMC_ERR_NOT_FOUND while no region of it is registered. */
lmc_status lmc_regions_layout(lmc_regions *rs, const char *op, const char *model,
                              int64_t world_size, lmc_layout_desc *out, lmc_error *err);

/*
 * The region of conn_id's instance_id for one store or retrieve of key
 * (model, world size, worker id and the range [start, end)): registered for
 * that model, world size and worker, block ids covering the range's blocks,
 * each inside the region. op names the request in messages. *out holds a
 * reference: give it back with lmc_regions_release.
 */
lmc_status lmc_regions_acquire(lmc_regions *rs, const char *op, uint64_t conn_id,
                               int64_t instance_id, const lmc_ipc_key *key,
                               const int64_t *block_ids, size_t n_block_ids, lmc_region **out,
                               lmc_error *err);
/* NULL is a no-op. */
void lmc_regions_release(lmc_regions *rs, lmc_region *r);

/* The L1 layout of a held region's chunks (what a store reserves). */
void lmc_region_layout(const lmc_region *r, lmc_layout_desc *out);

/*
 * The copies of one request through a held region: chunk i of the
 * request is block_ids[i * bpc, (i + 1) * bpc) with bpc = chunk_size /
 * tokens_per_block; a retrieve leaves the first skip_tokens tokens of the
 * request's range in place (whole blocks). The lmc_kv_copy points at *rc.
 * op names the request in messages.
 */
typedef struct lmc_region_copy {
    const lmc_region *r;
    const char *op;
    const int64_t *block_ids;
    size_t n_block_ids;
    size_t blocks_per_chunk;
    size_t chunk_size;
    size_t skip_tokens;
} lmc_region_copy;

lmc_kv_copy lmc_region_copy_init(lmc_region_copy *rc, const lmc_region *r, const char *op,
                                 const int64_t *block_ids, size_t n_block_ids, int chunk_size,
                                 size_t skip_tokens);

#endif
