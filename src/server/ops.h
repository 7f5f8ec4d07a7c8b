/*
 * ops.h -- the handlers of the server's operations, one per row of ops.def:
 * a decoded request (protocol.h) in, a response (or an error) out.
 *
 * Owns: the mapping of each operation to its handler and its thread (from
 * ops.def), and each handler's checks and response. The work itself is
 * the request logic's (engine.h) and the regions' (regions.h).
 *
 * Threads: a handler runs on the loop thread or a worker, as its row says;
 * handlers share nothing but the engine and the regions, which lock for
 * themselves.
 */
#ifndef LMC_SERVER_OPS_H
#define LMC_SERVER_OPS_H

#include <msgpack.h>
#include <stdbool.h>

#include "lmcache/status.h"
#include "server/engine.h"
#include "server/protocol.h"
#include "server/regions.h"

/* What a handler works against (borrowed for the server's lifetime). */
typedef struct lmc_op_ctx {
    lmc_engine *engine;
    lmc_regions *regions;
    lmc_copy_pool *copies; /* helpers for store and retrieve copies; NULL: none */
} lmc_op_ctx;

/* Run the request's handler; on success out holds the response. */
lmc_status lmc_op_execute(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                          lmc_error *err);

/*
 * The same, but an operation whose response carries no result may leave
 * the rest of its work for after the response is sent: a lookup answers
 * nil once every check it can fail has passed, and its hashing and
 * prefetch submission follow (a client is not kept waiting for work
 * whose outcome it learns from query_prefetch_status anyway). On success
 * *later is that work, or NULL. The caller sends out, then calls
 * lmc_op_finish, and reads no other request in between, so every later
 * request sees the lookup's session. q must live until then.
 */
typedef lmc_lookup_job lmc_op_later; /* a lookup's is the only work left for later */
lmc_status lmc_op_execute_early(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                                lmc_op_later **later, lmc_error *err);
/*
 * Do what lmc_op_execute_early left (NULL: nothing), which frees it. It
 * fails only for want of memory; the lookup then never started and its
 * request reads as unknown.
 */
lmc_status lmc_op_finish(const lmc_op_ctx *ctx, lmc_op_later *later, lmc_error *err);

/*
 * A client connection closed (conn_id as in lmc_request): what its
 * requests left that belongs to that connection goes here: its KV
 * regions and their registration slots (regions.h). Sessions are not
 * tied to a connection (an engine's scheduler and its workers use
 * different ones; they end by their TTL). The loop thread calls it, once
 * per connection, when the connection table closes it (server.c).
 */
void lmc_op_connection_closed(const lmc_op_ctx *ctx, uint64_t conn_id);

/* Whether op is answered on the loop thread (ops.def); false for anything else. */
bool lmc_op_on_loop_thread(lmc_op op);

#endif
