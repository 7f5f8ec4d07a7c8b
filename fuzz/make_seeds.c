/*
 * make_seeds.c -- writes the generated seed inputs of the fuzz targets
 * (scripts/fuzz runs it; the committed seeds under fuzz/corpus/ are
 * replayed alongside).
 *
 * usage: make_seeds SERVER_DIR CODEC_DIR [TRACE.lct ...]
 *   SERVER_DIR  one valid request per operation, in fuzz_server_message's
 *               framing (count byte, then 2-byte big-endian length + bytes)
 *   CODEC_DIR   the args map of every record of the given traces, as
 *               fuzz_codec takes it (one msgpack value)
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/protocol.h"
#include "trace/codec.h"
#include "trace/reader.h"

#define N_TOKENS 512
#define N_BLOCKS 32
#define MAX_PAYLOAD 5

static uint32_t g_tokens[N_TOKENS];
static int64_t g_blocks[N_BLOCKS];

static void die(const char *what)
{
    fprintf(stderr, "make_seeds: %s\n", what);
    exit(1);
}

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        die(path);
}

typedef enum {
    P_INT1234,
    P_ONE,
    P_TWO,
    P_ZERO,
    P_TRUE,
    P_NIL,
    P_REGION,
    P_MODEL,
    P_KEY_NIL,
    P_KEY_WORKER,
    P_BLOCKS,
    P_EMPTY_BIN,
    P_REQID
} payload;

static void pack_payload(msgpack_packer *pk, payload p)
{
    lmc_ipc_key k = {.model_name = "meta-llama/Llama-3.1-8B",
                     .world_size = 2,
                     .worker_id = -1,
                     .token_ids = g_tokens,
                     .n_tokens = N_TOKENS,
                     .start = 0,
                     .end = N_TOKENS,
                     .request_id = "req-1",
                     .cache_salt = "salt-1",
                     .num_kv_readers = 2};
    lmc_kv_region_desc r = {.shm_name = "/lmc-fuzz-region",
                            .num_blocks = 64,
                            .tokens_per_block = 16,
                            .bytes_per_token = 4096,
                            .dtype = LMC_DTYPE_BFLOAT16};
    switch (p) {
    case P_INT1234:
        msgpack_pack_int(pk, 1234);
        break;
    case P_ONE:
        msgpack_pack_int(pk, 1);
        break;
    case P_TWO:
        msgpack_pack_int(pk, 2);
        break;
    case P_ZERO:
        msgpack_pack_int(pk, 0);
        break;
    case P_TRUE:
        msgpack_pack_true(pk);
        break;
    case P_NIL:
        msgpack_pack_nil(pk);
        break;
    case P_REGION:
        lmc_kv_region_encode(pk, &r);
        break;
    case P_MODEL:
        msgpack_pack_str_with_body(pk, "meta-llama/Llama-3.1-8B", 23);
        break;
    case P_KEY_NIL:
        lmc_ipc_key_encode(pk, &k);
        break;
    case P_KEY_WORKER:
        k.worker_id = 1;
        lmc_ipc_key_encode(pk, &k);
        break;
    case P_BLOCKS:
        lmc_block_ids_encode(pk, g_blocks, N_BLOCKS);
        break;
    case P_EMPTY_BIN:
        msgpack_pack_bin(pk, 0);
        break;
    case P_REQID:
        msgpack_pack_str_with_body(pk, "req-1", 5);
        break;
    }
}

static const struct {
    lmc_op op;
    size_t n;
    payload p[MAX_PAYLOAD];
} OPS[] = {
    {LMC_OP_REGISTER_KV_CACHE, 5, {P_INT1234, P_REGION, P_MODEL, P_TWO, P_ONE}},
    {LMC_OP_UNREGISTER_KV_CACHE, 1, {P_INT1234}},
    {LMC_OP_STORE, 4, {P_KEY_WORKER, P_INT1234, P_BLOCKS, P_EMPTY_BIN}},
    {LMC_OP_RETRIEVE, 5, {P_KEY_WORKER, P_INT1234, P_BLOCKS, P_EMPTY_BIN, P_ZERO}},
    {LMC_OP_LOOKUP, 2, {P_KEY_NIL, P_ONE}},
    {LMC_OP_QUERY_PREFETCH_STATUS, 1, {P_REQID}},
    {LMC_OP_QUERY_PREFETCH_LOOKUP_HITS, 1, {P_REQID}},
    {LMC_OP_FREE_LOOKUP_LOCKS, 2, {P_KEY_NIL, P_ONE}},
    {LMC_OP_END_SESSION, 2, {P_REQID, P_NIL}},
    {LMC_OP_CLEAR, 1, {P_TRUE}},
    {LMC_OP_GET_CHUNK_SIZE, 0, {0}},
    {LMC_OP_PING, 1, {P_INT1234}},
    {LMC_OP_NOOP, 0, {0}},
};

static void append_frame(msgpack_sbuffer *out, const msgpack_sbuffer *frame)
{
    if (frame->size > 0xffff)
        die("a seed frame does not fit the 2-byte length");
    char len[2] = {(char)(frame->size >> 8), (char)frame->size};
    msgpack_sbuffer_write(out, len, 2);
    msgpack_sbuffer_write(out, frame->data, frame->size);
}

static void server_seeds(const char *dir)
{
    for (size_t i = 0; i < sizeof(OPS) / sizeof(OPS[0]); i++) {
        msgpack_sbuffer out, uid, op;
        msgpack_sbuffer_init(&out);
        msgpack_sbuffer_init(&uid);
        msgpack_sbuffer_init(&op);
        lmc_request_encode_uid_op(&uid, &op, (int64_t)i + 1, OPS[i].op);
        char count = (char)(2 + OPS[i].n);
        msgpack_sbuffer_write(&out, &count, 1);
        append_frame(&out, &uid);
        append_frame(&out, &op);
        for (size_t k = 0; k < OPS[i].n; k++) {
            msgpack_sbuffer f;
            msgpack_sbuffer_init(&f);
            msgpack_packer pk;
            msgpack_packer_init(&pk, &f, msgpack_sbuffer_write);
            pack_payload(&pk, OPS[i].p[k]);
            append_frame(&out, &f);
            msgpack_sbuffer_destroy(&f);
        }
        char name[64];
        snprintf(name, sizeof(name), "gen-%s", lmc_op_name(OPS[i].op));
        write_file(dir, name, out.data, out.size);
        msgpack_sbuffer_destroy(&out);
        msgpack_sbuffer_destroy(&uid);
        msgpack_sbuffer_destroy(&op);
    }
}

static void codec_seeds(const char *dir, const char *trace, size_t t)
{
    lmc_trace_reader *r = NULL;
    if (lmc_trace_reader_open(trace, &r, NULL) != LMC_OK)
        return; /* the bad traces have no records to offer */
    lmc_trace_record rec;
    for (size_t i = 0; lmc_trace_reader_next(r, &rec) == LMC_OK; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (lmc_codec_encode_args(&pk, rec.args, rec.nargs, NULL) == LMC_OK) {
            char name[64];
            snprintf(name, sizeof(name), "gen-%zu-%zu", t, i);
            write_file(dir, name, sb.data, sb.size);
        }
        msgpack_sbuffer_destroy(&sb);
    }
    lmc_trace_reader_close(r);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: make_seeds SERVER_DIR CODEC_DIR [TRACE.lct ...]");
    for (size_t k = 0; k < N_TOKENS; k++)
        g_tokens[k] = (uint32_t)(k * 2654435761u);
    for (size_t k = 0; k < N_BLOCKS; k++)
        g_blocks[k] = (int64_t)(N_BLOCKS - k);
    server_seeds(argv[1]);
    for (int i = 3; i < argc; i++)
        codec_seeds(argv[2], argv[i], (size_t)(i - 3));
    return 0;
}
