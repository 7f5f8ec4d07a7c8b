/*
 * ops.c -- the handlers of the server's operations (see ops.h), and the
 * dispatch table derived from ops.def.
 */
#include "server/ops.h"

#include <stddef.h>
#include <stdlib.h>

typedef lmc_status (*op_handler)(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                                 lmc_error *err);

/* ---------------------------------------------------------------------- */
/* Handlers                                                                */
/* ---------------------------------------------------------------------- */

static lmc_status op_register(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                              lmc_error *err)
{
    lmc_status st =
        lmc_regions_register(ctx->regions, q->conn_id, q->peer_uid, q->instance_id, &q->region,
                             q->model_name, q->world_size, q->worker_id, err);
    if (st == LMC_OK)
        lmc_response_nil(out);
    return st;
}

static lmc_status op_unregister(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                                lmc_error *err)
{
    lmc_status st = lmc_regions_unregister(ctx->regions, q->conn_id, q->instance_id, err);
    if (st == LMC_OK)
        lmc_response_nil(out);
    return st;
}

/* A lookup's checks, and its job begun: *job is the rest of its work. */
static lmc_status lookup_begin(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                               lmc_lookup_job **job, lmc_error *err)
{
    const lmc_ipc_key *key = &q->key;
    lmc_layout_desc layout;
    lmc_status st = lmc_engine_check_key(ctx->engine, "lookup", key, err);
    if (st == LMC_OK)
        st = lmc_regions_layout(ctx->regions, "lookup", key->model_name, key->world_size, &layout,
                                err);
    if (st == LMC_OK)
        st = lmc_engine_lookup_begin(ctx->engine, key, &layout, job, err);
    if (st == LMC_OK)
        lmc_response_nil(out);
    return st;
}

static lmc_status op_lookup(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                            lmc_error *err)
{
    lmc_lookup_job *job;
    lmc_status st = lookup_begin(ctx, q, out, &job, err);
    return st != LMC_OK ? st : lmc_engine_lookup_finish(ctx->engine, job, err);
}

/* An int for a known request (0 for an unknown one), nil while its prefetch runs. */
static lmc_status query(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                        bool lookup_hits_only)
{
    size_t hits = 0;
    switch (lmc_engine_query(ctx->engine, q->request_id, lookup_hits_only, &hits)) {
    case LMC_SESSION_UNKNOWN:
        lmc_response_int(out, 0); /* 0 = unknown request */
        break;
    case LMC_SESSION_PENDING:
        lmc_response_nil(out);
        break;
    case LMC_SESSION_READY:
        lmc_response_int(out, (int64_t)hits);
        break;
    }
    return LMC_OK;
}

static lmc_status op_query_prefetch_status(const lmc_op_ctx *ctx, const lmc_request *q,
                                           msgpack_sbuffer *out, lmc_error *err)
{
    (void)err;
    return query(ctx, q, out, false);
}

static lmc_status op_query_prefetch_lookup_hits(const lmc_op_ctx *ctx, const lmc_request *q,
                                                msgpack_sbuffer *out, lmc_error *err)
{
    (void)err;
    return query(ctx, q, out, true);
}

/*
 * What retrieve and store share: the region, held and checked against the
 * key, its copies (rc, copy), and the worker's keys. transfer_begin takes
 * them all or none; transfer_end gives back what it took.
 */
typedef struct transfer {
    lmc_region *r;
    lmc_region_copy rc;
    lmc_kv_copy copy; /* may point into rc */
    lmc_object_key *keys;
    size_t nk;
} transfer;

static lmc_status transfer_begin(const lmc_op_ctx *ctx, const char *op, const lmc_request *q,
                                 size_t skip_tokens, transfer *t, lmc_error *err)
{
    const lmc_ipc_key *key = &q->key;
    t->r = NULL;
    t->keys = NULL;
    t->nk = 0;
    lmc_status st = lmc_engine_check_key(ctx->engine, op, key, err);
    if (st != LMC_OK)
        return st;
    st = lmc_regions_acquire(ctx->regions, op, q->conn_id, q->instance_id, key, q->block_ids,
                             q->n_block_ids, &t->r, err);
    if (st == LMC_OK)
        st = lmc_engine_worker_keys(ctx->engine, op, key, &t->keys, &t->nk, err);
    if (st != LMC_OK) {
        lmc_regions_release(ctx->regions, t->r);
        t->r = NULL;
        return st;
    }
    t->copy = lmc_region_copy_init(&t->rc, t->r, op, q->block_ids, q->n_block_ids,
                                   lmc_engine_chunk_size(ctx->engine), skip_tokens);
    t->copy.pool = ctx->copies;
    return LMC_OK;
}

static void transfer_end(const lmc_op_ctx *ctx, transfer *t)
{
    lmc_regions_release(ctx->regions, t->r);
    free(t->keys);
}

static lmc_status op_retrieve(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                              lmc_error *err)
{
    transfer t;
    lmc_status st = transfer_begin(ctx, "retrieve", q, (size_t)q->skip_first_n_tokens, &t, err);
    if (st != LMC_OK)
        return st;
    bool ok = false;
    const lmc_ipc_key *key = &q->key;
    st = lmc_engine_retrieve(ctx->engine, key->request_id, t.keys, t.nk,
                             (size_t)key->start / (size_t)lmc_engine_chunk_size(ctx->engine),
                             key->worker_id, &t.copy, &ok, err);
    transfer_end(ctx, &t);
    if (st == LMC_OK)
        lmc_response_transfer(out, ok);
    return st;
}

static lmc_status op_store(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                           lmc_error *err)
{
    transfer t;
    lmc_status st = transfer_begin(ctx, "store", q, 0, &t, err);
    if (st != LMC_OK)
        return st;
    /* The region's own layout: its chunks are what the copy fills. */
    lmc_layout_desc layout;
    lmc_region_layout(t.r, &layout);
    st = lmc_engine_store(ctx->engine, t.keys, t.nk, &layout, &t.copy, err);
    transfer_end(ctx, &t);
    if (st == LMC_OK)
        lmc_response_transfer(out, true);
    return st;
}

static lmc_status op_free_lookup_locks(const lmc_op_ctx *ctx, const lmc_request *q,
                                       msgpack_sbuffer *out, lmc_error *err)
{
    (void)err;
    lmc_engine_free_lookup_locks(ctx->engine, q->key.request_id);
    lmc_response_nil(out);
    return LMC_OK;
}

static lmc_status op_end_session(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                                 lmc_error *err)
{
    (void)err;
    lmc_engine_end_session(ctx->engine, q->request_id);
    lmc_response_nil(out);
    return LMC_OK;
}

static lmc_status op_clear(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                           lmc_error *err)
{
    (void)err;
    lmc_engine_clear(ctx->engine, q->force);
    lmc_response_nil(out);
    return LMC_OK;
}

static lmc_status op_get_chunk_size(const lmc_op_ctx *ctx, const lmc_request *q,
                                    msgpack_sbuffer *out, lmc_error *err)
{
    (void)q, (void)err;
    lmc_response_int(out, lmc_engine_chunk_size(ctx->engine));
    return LMC_OK;
}

static lmc_status op_ping(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                          lmc_error *err)
{
    (void)ctx, (void)q, (void)err;
    lmc_response_bool(out, true);
    return LMC_OK;
}

static lmc_status op_noop(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                          lmc_error *err)
{
    (void)ctx, (void)q, (void)err;
    lmc_response_str(out, "noop");
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */
/* ---------------------------------------------------------------------- */

typedef struct op_row {
    op_handler handle; /* NULL: not implemented */
    bool on_loop;
} op_row;

/* Indexed by legacy id: one entry per row of ops.def; a worker unless the row says loop. */
static const op_row ROWS[] = {
#define LMC_SERVER_OP(name, id, wire, min, max, usage, decode, handle) [id] = {handle, false},
#define LMC_SERVER_LOOP_OP(name, id, wire, min, max, usage, decode, handle) [id] = {handle, true},
#include "server/ops.def"
};
#define N_ROWS (sizeof(ROWS) / sizeof(ROWS[0]))

static const op_row *row_of(lmc_op op)
{
    return op > 0 && (size_t)op < N_ROWS && ROWS[op].handle != NULL ? &ROWS[op] : NULL;
}

lmc_status lmc_op_execute(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                          lmc_error *err)
{
    const op_row *row = row_of(q->op);
    if (row == NULL)
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED, "unsupported operation");
    return row->handle(ctx, q, out, err);
}

lmc_status lmc_op_execute_early(const lmc_op_ctx *ctx, const lmc_request *q, msgpack_sbuffer *out,
                                lmc_op_later **later, lmc_error *err)
{
    *later = NULL;
    if (q->op != LMC_OP_LOOKUP)
        return lmc_op_execute(ctx, q, out, err);
    return lookup_begin(ctx, q, out, later, err);
}

lmc_status lmc_op_finish(const lmc_op_ctx *ctx, lmc_op_later *later, lmc_error *err)
{
    return later == NULL ? LMC_OK : lmc_engine_lookup_finish(ctx->engine, later, err);
}

void lmc_op_connection_closed(const lmc_op_ctx *ctx, uint64_t conn_id)
{
    if (ctx->regions != NULL)
        lmc_regions_drop_conn(ctx->regions, conn_id);
}

bool lmc_op_on_loop_thread(lmc_op op)
{
    const op_row *row = row_of(op);
    return row != NULL && row->on_loop;
}
