/*
 * protocol.h -- the wire protocol of `lmcache server` (pinned version).
 *
 * Owns: LMCache's frozen legacy operation ids and snake-case names, the
 * decoding and validation of request payload frames into C structs (the
 * operations and their payload decoders come from ops.def), and the
 * encoding of responses (spec/server-protocol.md section
 * 2, with CPU shared memory in place of CUDA IPC; docs/protocol.md is the
 * user-facing description).
 *
 * A request is one ZMQ multipart message [request_uid, operation,
 * payload_1, ..., payload_N] (after the ROUTER's identity frame), each part
 * one msgpack value. request_uid is an integer; operation is the legacy
 * integer id or the operation's name. A reply is [request_uid, operation,
 * response]; a failed request gets the response {"error": "<message>"}
 * (no successful response is a map, so the two cannot be confused).
 *
 * Every field is checked: types, ranges, counts, sizes. A bad message gives
 * LMC_ERR_FORMAT (or LMC_ERR_INVALID) with a message naming the field; the
 * decoder never trusts a length it has not checked against the frame.
 *
 * Threads: pure functions; decoded requests own their memory.
 */
#ifndef LMC_SERVER_PROTOCOL_H
#define LMC_SERVER_PROTOCOL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/types.h"

/*
 * The implemented operations by LMCache's frozen legacy ids
 * (server-protocol.md section 2), from the operation table ops.def.
 */
typedef enum lmc_op {
    LMC_OP_INVALID = 0,
#define LMC_SERVER_OP(name, id, wire, min, max, usage, decode, handle) LMC_OP_##name = id,
#include "server/ops.def"
} lmc_op;

/* "register_kv_cache", ...; NULL for an id this server does not implement. */
const char *lmc_op_name(lmc_op op);
/* From a decoded operation frame (int id or name); LMC_OP_INVALID if unknown. */
lmc_op lmc_op_from_frame(const void *data, size_t len);

/* Limits on what a client may send (a hostile message cannot exhaust memory). */
#define LMC_PROTO_MAX_FRAME (64u * 1024 * 1024)
#define LMC_PROTO_MAX_FRAMES 8
#define LMC_PROTO_MAX_TOKENS (4u * 1024 * 1024)
#define LMC_PROTO_MAX_BLOCKS (16u * 1024 * 1024)
#define LMC_PROTO_MAX_REQUEST_ID 256
#define LMC_PROTO_MAX_SHM_NAME 200
/* The prefix a KV region's shm name must have (what lmc_client creates; regions.h). */
#define LMC_REGION_NAME_PREFIX "/lmcache-client-"

/* The key of lookup/retrieve/store/free_lookup_locks (IPCCacheServerKey). */
typedef struct lmc_ipc_key {
    char *model_name;    /* owned */
    int64_t world_size;  /* 1..255 */
    int64_t worker_id;   /* -1 for a lookup (None), else 0..world_size-1 */
    uint32_t *token_ids; /* owned; the full token sequence */
    size_t n_tokens;
    int64_t start, end;     /* chunk-aligned token range [start, end) */
    char *request_id;       /* owned */
    char *cache_salt;       /* owned; "" when none */
    int64_t num_kv_readers; /* >= 1 */
} lmc_ipc_key;

/* The CPU form of register_kv_cache's kv_cache argument. */
typedef struct lmc_kv_region_desc {
    char *shm_name; /* owned; a POSIX shm object the client created */
    int64_t num_blocks;
    int64_t tokens_per_block;
    int64_t bytes_per_token;
    lmc_dtype dtype;
} lmc_kv_region_desc;

typedef struct lmc_request {
    int64_t uid;
    lmc_op op;
    /* Per operation (unused fields zero). */
    int64_t instance_id;
    bool has_instance_id;      /* set with instance_id; false for a ping with nil/none */
    lmc_kv_region_desc region; /* register_kv_cache */
    char *model_name;          /* register_kv_cache; owned */
    int64_t world_size;        /* register_kv_cache */
    int64_t worker_id;         /* register_kv_cache */
    lmc_ipc_key key;           /* lookup, retrieve, store, free_lookup_locks */
    int64_t *block_ids;        /* retrieve, store; owned; one KV group */
    size_t n_block_ids;
    int64_t skip_first_n_tokens; /* retrieve */
    char *request_id;            /* query_*, end_session; owned */
    bool force;                  /* clear */
    uint64_t conn_id; /* not on the wire: the connection it came on (server.c), 0 if none */
    int64_t peer_uid; /* not on the wire: the uid of the process on the other end, -1 unknown */
} lmc_request;

/*
 * Decode frames [uid, op, payload...] (data/len per frame) into req. On
 * failure req->uid and req->op are still set when they could be read (so an
 * error reply can be addressed) and err names the problem.
 */
lmc_status lmc_request_decode(const void *const *frames, const size_t *lens, size_t n_frames,
                              lmc_request *req, lmc_error *err);
void lmc_request_free(lmc_request *req);

/* Response builders: each appends one msgpack value to out. */
void lmc_response_nil(msgpack_sbuffer *out);
void lmc_response_bool(msgpack_sbuffer *out, bool b);
void lmc_response_int(msgpack_sbuffer *out, int64_t v);
void lmc_response_str(msgpack_sbuffer *out, const char *s);
/* (event_handle bytes, ok) for store and retrieve; the CPU form sends empty bytes. */
void lmc_response_transfer(msgpack_sbuffer *out, bool ok);
void lmc_response_error(msgpack_sbuffer *out, const char *message);

/* Request builders for the client (same frames the decoder reads). */
void lmc_request_encode_uid_op(msgpack_sbuffer *uid, msgpack_sbuffer *op, int64_t request_uid,
                               lmc_op operation);
void lmc_ipc_key_encode(msgpack_packer *pk, const lmc_ipc_key *key);
void lmc_kv_region_encode(msgpack_packer *pk, const lmc_kv_region_desc *r);
/* block_ids of retrieve/store: one KV group, i.e. [[ids[0], ..., ids[n-1]]]. */
void lmc_block_ids_encode(msgpack_packer *pk, const int64_t *ids, size_t n);
/* The legacy name of any frozen id 1..34 (implemented or not); NULL otherwise. */
const char *lmc_op_legacy_name(int64_t id);

#endif
