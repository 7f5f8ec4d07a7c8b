/*
 * test_server_protocol.c -- the `lmcache server` wire protocol: every
 * operation through the client encoders and back through the decoder, every
 * validation rule (each error names its field), the response builders, and
 * hostile input (empty, truncated, mistyped, huge declared lengths, deep
 * nesting, too many frames, random bytes). Under the ASan build a decoder
 * that trusted a declared length would try to allocate gigabytes and abort.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/protocol.h"

/* ---------------------------------------------------------------------- */
/* Frame building                                                          */
/* ---------------------------------------------------------------------- */

#define MAX_TEST_FRAMES 128

typedef struct frames {
    msgpack_sbuffer sb[MAX_TEST_FRAMES];
    size_t n;
} frames;

static void fr_init(frames *f)
{
    memset(f, 0, sizeof(*f));
}

static msgpack_packer fr_add(frames *f)
{
    assert_true(f->n < MAX_TEST_FRAMES);
    msgpack_sbuffer_init(&f->sb[f->n]);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &f->sb[f->n], msgpack_sbuffer_write);
    f->n++;
    return pk;
}

static void fr_head(frames *f, int64_t uid, lmc_op op)
{
    fr_init(f);
    msgpack_sbuffer_init(&f->sb[0]);
    msgpack_sbuffer_init(&f->sb[1]);
    lmc_request_encode_uid_op(&f->sb[0], &f->sb[1], uid, op);
    f->n = 2;
}

static void fr_free(frames *f)
{
    for (size_t k = 0; k < f->n; k++)
        msgpack_sbuffer_destroy(&f->sb[k]);
    f->n = 0;
}

static lmc_status fr_decode(const frames *f, lmc_request *req, lmc_error *err)
{
    const void *ptr[MAX_TEST_FRAMES];
    size_t len[MAX_TEST_FRAMES];
    for (size_t k = 0; k < f->n; k++) {
        ptr[k] = f->sb[k].data;
        len[k] = f->sb[k].size;
    }
    return lmc_request_decode(ptr, len, f->n, req, err);
}

/* Decode, expect failure with code and a message containing each needle. */
static void expect_error(frames *f, lmc_status code, const char *n1, const char *n2)
{
    lmc_request req;
    lmc_error err;
    lmc_status st = fr_decode(f, &req, &err);
    bool ok = st == code && strstr(err.msg, n1) != NULL && (n2 == NULL || strstr(err.msg, n2));
    if (!ok)
        print_message("status %d (want %d), message '%s', want '%s' and '%s'\n", st, code, err.msg,
                      n1, n2 != NULL ? n2 : "");
    assert_true(ok);
    assert_int_equal(err.code, code);
    lmc_request_free(&req);
    fr_free(f);
}

static void pstr(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* ---------------------------------------------------------------------- */
/* Standard payload values                                                 */
/* ---------------------------------------------------------------------- */

#define N_TOKENS 512
#define N_BLOCKS 32 /* 512 tokens / 16 tokens per block */

static uint32_t g_tokens[N_TOKENS];
static int64_t g_blocks[N_BLOCKS];

static int setup_globals(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_TOKENS; k++)
        g_tokens[k] = (uint32_t)(k * 2654435761u);
    for (size_t k = 0; k < N_BLOCKS; k++)
        g_blocks[k] = (int64_t)(N_BLOCKS - k);
    return 0;
}

static lmc_ipc_key std_key(bool worker)
{
    lmc_ipc_key k = {
        .model_name = "meta-llama/Llama-3.1-8B",
        .world_size = 2,
        .worker_id = worker ? 1 : -1,
        .token_ids = g_tokens,
        .n_tokens = N_TOKENS,
        .start = 0,
        .end = N_TOKENS,
        .request_id = "req-1",
        .cache_salt = "salt-1",
        .num_kv_readers = 2,
    };
    return k;
}

static lmc_kv_region_desc std_region(void)
{
    lmc_kv_region_desc r = {
        .shm_name = "/lmc-test-region",
        .num_blocks = 64,
        .tokens_per_block = 16,
        .bytes_per_token = 4096,
        .dtype = LMC_DTYPE_BFLOAT16,
    };
    return r;
}

typedef void (*val_fn)(msgpack_packer *pk);

static void v_nil(msgpack_packer *pk)
{
    msgpack_pack_nil(pk);
}
static void v_true(msgpack_packer *pk)
{
    msgpack_pack_true(pk);
}
static void v_int7(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 7);
}
static void v_int1234(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 1234);
}
static void v_zero(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 0);
}
static void v_one(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 1);
}
static void v_two(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 2);
}
static void v_three(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 3);
}
static void v_neg1(msgpack_packer *pk)
{
    msgpack_pack_int(pk, -1);
}
static void v_129(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 129);
}
static void v_256(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 256);
}
static void v_513(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 513);
}
static void v_600(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 600);
}
static void v_u64max(msgpack_packer *pk)
{
    msgpack_pack_uint64(pk, UINT64_MAX);
}
static void v_float(msgpack_packer *pk)
{
    msgpack_pack_double(pk, 1.5);
}
static void v_str(msgpack_packer *pk)
{
    pstr(pk, "x");
}
static void v_empty_str(msgpack_packer *pk)
{
    pstr(pk, "");
}
static void v_bin(msgpack_packer *pk)
{
    msgpack_pack_bin(pk, 3);
    msgpack_pack_bin_body(pk, "abc", 3);
}
static void v_empty_bin(msgpack_packer *pk)
{
    msgpack_pack_bin(pk, 0);
    msgpack_pack_bin_body(pk, "", 0);
}
static void v_list(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 0);
}
static void v_map(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 0);
}
static void v_reqid(msgpack_packer *pk)
{
    pstr(pk, "req-1");
}
static void v_model(msgpack_packer *pk)
{
    pstr(pk, "meta-llama/Llama-3.1-8B");
}
static void v_at(msgpack_packer *pk)
{
    pstr(pk, "a@b");
}
static void v_nul(msgpack_packer *pk)
{
    msgpack_pack_str(pk, 3);
    msgpack_pack_str_body(pk, "a\0b", 3);
}
static void v_bad_utf8(msgpack_packer *pk)
{
    msgpack_pack_str(pk, 3);
    msgpack_pack_str_body(pk,
                          "a\xff"
                          "b",
                          3);
}
static void v_257_bytes(msgpack_packer *pk)
{
    char s[258];
    memset(s, 'r', 257);
    s[257] = '\0';
    pstr(pk, s);
}
static void v_key_nil(msgpack_packer *pk)
{
    lmc_ipc_key k = std_key(false);
    lmc_ipc_key_encode(pk, &k);
}
static void v_key_worker(msgpack_packer *pk)
{
    lmc_ipc_key k = std_key(true);
    lmc_ipc_key_encode(pk, &k);
}
static void v_region(msgpack_packer *pk)
{
    lmc_kv_region_desc r = std_region();
    lmc_kv_region_encode(pk, &r);
}
static void v_blocks(msgpack_packer *pk)
{
    lmc_block_ids_encode(pk, g_blocks, N_BLOCKS);
}
static void v_two_groups(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 2);
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 0);
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 1);
}
static void v_flat_blocks(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 0);
}
static void v_blocks_neg(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_int(pk, 0);
    msgpack_pack_int(pk, 1);
    msgpack_pack_int(pk, -1);
}
static void v_blocks_str(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 2);
    msgpack_pack_int(pk, 0);
    pstr(pk, "1");
}
static void v_blocks_big(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, UINT64_MAX);
}

/* The standard payload frames of each operation and the types each accepts. */
enum {
    B_NIL = 1,
    B_BOOL = 2,
    B_INT = 4,
    B_STR = 8,
    B_BIN = 16,
    B_LIST = 32,
    B_MAP = 64,
    B_FLOAT = 128,
    B_ANY = 255
};

typedef struct op_case {
    lmc_op op;
    size_t n;
    val_fn v[5];
    unsigned ok[5];
} op_case;

static const op_case OP_CASES[] = {
    {LMC_OP_REGISTER_KV_CACHE,
     5,
     {v_int1234, v_region, v_model, v_two, v_one},
     {B_INT, B_MAP, B_STR, B_INT, B_INT}},
    {LMC_OP_UNREGISTER_KV_CACHE, 1, {v_int1234}, {B_INT}},
    {LMC_OP_STORE,
     4,
     {v_key_worker, v_int1234, v_blocks, v_empty_bin},
     {B_MAP, B_INT, B_LIST, B_BIN}},
    {LMC_OP_RETRIEVE,
     5,
     {v_key_worker, v_int1234, v_blocks, v_empty_bin, v_zero},
     {B_MAP, B_INT, B_LIST, B_BIN, B_INT}},
    {LMC_OP_LOOKUP, 2, {v_key_nil, v_one}, {B_MAP, B_INT}},
    {LMC_OP_QUERY_PREFETCH_STATUS, 1, {v_reqid}, {B_STR}},
    {LMC_OP_QUERY_PREFETCH_LOOKUP_HITS, 1, {v_reqid}, {B_STR}},
    {LMC_OP_FREE_LOOKUP_LOCKS, 2, {v_key_nil, v_one}, {B_MAP, B_INT}},
    {LMC_OP_END_SESSION, 2, {v_reqid, v_nil}, {B_STR, B_ANY}},
    {LMC_OP_CLEAR, 1, {v_true}, {B_BOOL}},
    {LMC_OP_GET_CHUNK_SIZE, 0, {0}, {0}},
    {LMC_OP_PING, 1, {v_int1234}, {B_INT | B_NIL}},
    {LMC_OP_NOOP, 0, {0}, {0}},
};
#define N_OP_CASES (sizeof(OP_CASES) / sizeof(OP_CASES[0]))

static const op_case *case_of(lmc_op op)
{
    for (size_t k = 0; k < N_OP_CASES; k++)
        if (OP_CASES[k].op == op)
            return &OP_CASES[k];
    fail();
    return NULL;
}

/* Build op's standard request with payload frame `pos` (0-based) replaced by bad. */
static void build(frames *f, lmc_op op, int pos, val_fn bad)
{
    const op_case *c = case_of(op);
    fr_head(f, 42, op);
    for (size_t k = 0; k < c->n; k++) {
        msgpack_packer pk = fr_add(f);
        ((int)k == pos ? bad : c->v[k])(&pk);
    }
}

/* A key map with field `field` replaced by v, or omitted when v is NULL. */
static const char *const KEY_FIELDS[] = {"model_name", "world_size", "worker_id",
                                         "token_ids",  "start",      "end",
                                         "request_id", "cache_salt", "num_kv_readers"};

static void key_default(msgpack_packer *pk, const char *name, bool worker)
{
    if (!strcmp(name, "model_name"))
        pstr(pk, "m");
    else if (!strcmp(name, "world_size"))
        msgpack_pack_int(pk, 2);
    else if (!strcmp(name, "worker_id"))
        worker ? (void)msgpack_pack_int(pk, 1) : (void)msgpack_pack_nil(pk);
    else if (!strcmp(name, "token_ids")) {
        msgpack_pack_array(pk, N_TOKENS);
        for (size_t k = 0; k < N_TOKENS; k++)
            msgpack_pack_uint32(pk, g_tokens[k]);
    } else if (!strcmp(name, "start"))
        msgpack_pack_int(pk, 0);
    else if (!strcmp(name, "end"))
        msgpack_pack_int(pk, N_TOKENS);
    else if (!strcmp(name, "request_id"))
        pstr(pk, "req-1");
    else if (!strcmp(name, "cache_salt"))
        pstr(pk, "");
    else
        msgpack_pack_int(pk, 1);
}

static void pack_key_with(msgpack_packer *pk, bool worker, const char *field, val_fn v)
{
    size_t n = 9;
    bool known = false;
    for (size_t k = 0; k < 9; k++)
        known |= field != NULL && !strcmp(field, KEY_FIELDS[k]);
    if (field != NULL && v == NULL)
        n--;
    if (field != NULL && !known)
        n++;
    msgpack_pack_map(pk, n);
    for (size_t k = 0; k < 9; k++) {
        if (field != NULL && !strcmp(field, KEY_FIELDS[k])) {
            if (v != NULL) {
                pstr(pk, KEY_FIELDS[k]);
                v(pk);
            }
            continue;
        }
        pstr(pk, KEY_FIELDS[k]);
        key_default(pk, KEY_FIELDS[k], worker);
    }
    if (field != NULL && !known) {
        pstr(pk, field);
        v(pk);
    }
}

/* The request of op (lookup, store, ...) whose key has field replaced. */
static void build_key(frames *f, lmc_op op, const char *field, val_fn v)
{
    const op_case *c = case_of(op);
    bool worker = op == LMC_OP_STORE || op == LMC_OP_RETRIEVE;
    fr_head(f, 42, op);
    msgpack_packer pk = fr_add(f);
    pack_key_with(&pk, worker, field, v);
    for (size_t k = 1; k < c->n; k++) {
        pk = fr_add(f);
        c->v[k](&pk);
    }
}

static const char *const REGION_FIELDS[] = {"shm_name", "num_blocks", "tokens_per_block",
                                            "bytes_per_token", "dtype"};

static void build_region(frames *f, const char *field, val_fn v)
{
    const op_case *c = case_of(LMC_OP_REGISTER_KV_CACHE);
    fr_head(f, 42, LMC_OP_REGISTER_KV_CACHE);
    for (size_t k = 0; k < c->n; k++) {
        msgpack_packer pk = fr_add(f);
        if (k != 1) {
            c->v[k](&pk);
            continue;
        }
        msgpack_pack_map(&pk, v == NULL ? 4 : 5);
        for (size_t j = 0; j < 5; j++) {
            bool sub = !strcmp(field, REGION_FIELDS[j]);
            if (sub && v == NULL)
                continue;
            pstr(&pk, REGION_FIELDS[j]);
            if (sub)
                v(&pk);
            else if (j == 0)
                pstr(&pk, "/lmc-x");
            else if (j == 4)
                pstr(&pk, "torch.float16");
            else
                msgpack_pack_int(&pk, 16);
        }
    }
}

static lmc_request decode_ok(frames *f)
{
    lmc_request req;
    lmc_error err;
    lmc_status st = fr_decode(f, &req, &err);
    if (st != LMC_OK)
        print_message("decode failed: %s\n", err.msg);
    assert_int_equal(st, LMC_OK);
    fr_free(f);
    return req;
}

/* ---------------------------------------------------------------------- */
/* Round trips                                                             */
/* ---------------------------------------------------------------------- */

static void assert_std_key(const lmc_ipc_key *k, bool worker)
{
    assert_string_equal(k->model_name, "meta-llama/Llama-3.1-8B");
    assert_int_equal(k->world_size, 2);
    assert_int_equal(k->worker_id, worker ? 1 : -1);
    assert_int_equal(k->n_tokens, N_TOKENS);
    assert_memory_equal(k->token_ids, g_tokens, sizeof(g_tokens));
    assert_int_equal(k->start, 0);
    assert_int_equal(k->end, N_TOKENS);
    assert_string_equal(k->request_id, "req-1");
    assert_string_equal(k->cache_salt, "salt-1");
    assert_int_equal(k->num_kv_readers, 2);
}

static void test_register_kv_cache_round_trips(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_REGISTER_KV_CACHE, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.uid, 42);
    assert_int_equal(r.op, LMC_OP_REGISTER_KV_CACHE);
    assert_int_equal(r.instance_id, 1234);
    assert_true(r.has_instance_id);
    assert_string_equal(r.region.shm_name, "/lmc-test-region");
    assert_int_equal(r.region.num_blocks, 64);
    assert_int_equal(r.region.tokens_per_block, 16);
    assert_int_equal(r.region.bytes_per_token, 4096);
    assert_int_equal(r.region.dtype, LMC_DTYPE_BFLOAT16);
    assert_string_equal(r.model_name, "meta-llama/Llama-3.1-8B");
    assert_int_equal(r.world_size, 2);
    assert_int_equal(r.worker_id, 1);
    lmc_request_free(&r);
    assert_null(r.model_name); /* free leaves a zeroed request */
}

static void test_unregister_kv_cache_round_trips(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_UNREGISTER_KV_CACHE, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.op, LMC_OP_UNREGISTER_KV_CACHE);
    assert_int_equal(r.instance_id, 1234);
    lmc_request_free(&r);
}

static void test_store_round_trips(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_STORE, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.op, LMC_OP_STORE);
    assert_std_key(&r.key, true);
    assert_int_equal(r.instance_id, 1234);
    assert_int_equal(r.n_block_ids, N_BLOCKS);
    assert_memory_equal(r.block_ids, g_blocks, sizeof(g_blocks));
    lmc_request_free(&r);
}

static void test_retrieve_round_trips_with_skip_first_n_tokens(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_RETRIEVE, 4, v_256);
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.op, LMC_OP_RETRIEVE);
    assert_std_key(&r.key, true);
    assert_int_equal(r.n_block_ids, N_BLOCKS);
    assert_memory_equal(r.block_ids, g_blocks, sizeof(g_blocks));
    assert_int_equal(r.skip_first_n_tokens, 256);
    lmc_request_free(&r);
}

static void test_retrieve_without_skip_first_n_tokens_defaults_to_zero(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 7, LMC_OP_RETRIEVE);
    val_fn v[4] = {v_key_worker, v_int1234, v_blocks, v_empty_bin};
    for (size_t k = 0; k < 4; k++) {
        msgpack_packer pk = fr_add(&f);
        v[k](&pk);
    }
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.skip_first_n_tokens, 0);
    lmc_request_free(&r);
}

static void test_lookup_round_trips(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_LOOKUP, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.op, LMC_OP_LOOKUP);
    assert_std_key(&r.key, false);
    lmc_request_free(&r);
}

static void test_lookup_without_tp_size_is_accepted(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    msgpack_packer pk = fr_add(&f);
    v_key_nil(&pk);
    lmc_request r = decode_ok(&f);
    assert_std_key(&r.key, false);
    lmc_request_free(&r);
}

static void test_request_id_operations_round_trip(void **state)
{
    (void)state;
    lmc_op ops[] = {LMC_OP_QUERY_PREFETCH_STATUS, LMC_OP_QUERY_PREFETCH_LOOKUP_HITS,
                    LMC_OP_END_SESSION};
    for (size_t k = 0; k < 3; k++) {
        frames f;
        build(&f, ops[k], -1, NULL);
        lmc_request r = decode_ok(&f);
        assert_int_equal(r.op, ops[k]);
        assert_string_equal(r.request_id, "req-1");
        lmc_request_free(&r);
    }
}

static void test_free_lookup_locks_round_trips(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_FREE_LOOKUP_LOCKS, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_std_key(&r.key, false);
    lmc_request_free(&r);
    /* A worker key is fine too. */
    fr_head(&f, 1, LMC_OP_FREE_LOOKUP_LOCKS);
    msgpack_packer pk = fr_add(&f);
    v_key_worker(&pk);
    r = decode_ok(&f);
    assert_int_equal(r.key.worker_id, 1);
    lmc_request_free(&r);
}

static void test_clear_round_trips_with_and_without_force(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_CLEAR, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_true(r.force);
    lmc_request_free(&r);
    fr_head(&f, 1, LMC_OP_CLEAR);
    r = decode_ok(&f);
    assert_false(r.force);
    lmc_request_free(&r);
}

static void test_no_payload_operations_round_trip(void **state)
{
    (void)state;
    lmc_op ops[] = {LMC_OP_GET_CHUNK_SIZE, LMC_OP_NOOP};
    for (size_t k = 0; k < 2; k++) {
        frames f;
        fr_head(&f, -5, ops[k]);
        lmc_request r = decode_ok(&f);
        assert_int_equal(r.uid, -5);
        assert_int_equal(r.op, ops[k]);
        lmc_request_free(&r);
    }
}

static void test_ping_accepts_int_nil_or_nothing(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_PING, -1, NULL);
    lmc_request r = decode_ok(&f);
    assert_true(r.has_instance_id);
    assert_int_equal(r.instance_id, 1234);
    lmc_request_free(&r);
    build(&f, LMC_OP_PING, 0, v_nil);
    r = decode_ok(&f);
    assert_false(r.has_instance_id);
    lmc_request_free(&r);
    fr_head(&f, 1, LMC_OP_PING);
    r = decode_ok(&f);
    assert_false(r.has_instance_id);
    lmc_request_free(&r);
}

static void test_operation_may_be_sent_by_name(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_OP_CASES; k++) {
        frames f;
        build(&f, OP_CASES[k].op, -1, NULL);
        msgpack_sbuffer_clear(&f.sb[1]);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &f.sb[1], msgpack_sbuffer_write);
        pstr(&pk, lmc_op_name(OP_CASES[k].op));
        lmc_request r = decode_ok(&f);
        assert_int_equal(r.op, OP_CASES[k].op);
        lmc_request_free(&r);
    }
}

static void test_key_defaults_when_optional_fields_are_absent(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    msgpack_packer pk = fr_add(&f);
    msgpack_pack_map(&pk, 6);
    const char *names[] = {"model_name", "world_size", "token_ids", "start", "end", "request_id"};
    for (size_t k = 0; k < 6; k++) {
        pstr(&pk, names[k]);
        key_default(&pk, names[k], false);
    }
    lmc_request r = decode_ok(&f);
    assert_int_equal(r.key.worker_id, -1);
    assert_string_equal(r.key.cache_salt, "");
    assert_int_equal(r.key.num_kv_readers, 1);
    lmc_request_free(&r);
}

static void v_nested_unknown(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 2);
    pstr(pk, "a");
    msgpack_pack_array(pk, 3);
    msgpack_pack_nil(pk);
    v_bin(pk);
    msgpack_pack_map(pk, 1);
    msgpack_pack_int(pk, 5);
    msgpack_pack_double(pk, 2.0);
    msgpack_pack_int(pk, -3);
    msgpack_pack_ext(pk, 4, 7);
    msgpack_pack_ext_body(pk, "abcd", 4);
}

static void test_unknown_key_fields_are_ignored(void **state)
{
    (void)state;
    frames f;
    build_key(&f, LMC_OP_LOOKUP, "request_configs", v_nested_unknown);
    lmc_request r = decode_ok(&f);
    assert_string_equal(r.key.model_name, "m");
    lmc_request_free(&r);
    /* Unknown kv_cache fields are ignored too. */
    fr_head(&f, 1, LMC_OP_REGISTER_KV_CACHE);
    msgpack_packer pk = fr_add(&f);
    v_int1234(&pk);
    pk = fr_add(&f);
    msgpack_pack_map(&pk, 6);
    pstr(&pk, "layout_hints");
    v_nested_unknown(&pk);
    pstr(&pk, "shm_name");
    pstr(&pk, "plain-name");
    pstr(&pk, "num_blocks");
    msgpack_pack_int(&pk, 1);
    pstr(&pk, "tokens_per_block");
    msgpack_pack_int(&pk, 1);
    pstr(&pk, "bytes_per_token");
    msgpack_pack_int(&pk, 4);
    pstr(&pk, "dtype");
    pstr(&pk, "torch.float");
    pk = fr_add(&f);
    v_model(&pk);
    pk = fr_add(&f);
    v_one(&pk);
    pk = fr_add(&f);
    v_zero(&pk);
    r = decode_ok(&f);
    assert_string_equal(r.region.shm_name, "plain-name");
    assert_int_equal(r.region.dtype, LMC_DTYPE_FLOAT32);
    lmc_request_free(&r);
}

static void test_op_names_and_frames(void **state)
{
    (void)state;
    assert_string_equal(lmc_op_name(LMC_OP_LOOKUP), "lookup");
    assert_string_equal(lmc_op_name(LMC_OP_QUERY_PREFETCH_LOOKUP_HITS),
                        "query_prefetch_lookup_hits");
    assert_null(lmc_op_name((lmc_op)3));
    assert_null(lmc_op_name(LMC_OP_INVALID));
    assert_string_equal(lmc_op_legacy_name(3), "register_q_cache");
    assert_string_equal(lmc_op_legacy_name(34), "poll_kv_events");
    assert_null(lmc_op_legacy_name(35));
    assert_null(lmc_op_legacy_name(0));

    unsigned char id8[] = {0x08}, id3[] = {0x03}, name[] = {0xa4, 'p', 'i', 'n', 'g'},
                  junk[] = {0xa4, 'p', 'i', 'n'}, nil[] = {0xc0}, two[] = {0x08, 0x08};
    assert_int_equal(lmc_op_from_frame(id8, 1), LMC_OP_LOOKUP);
    assert_int_equal(lmc_op_from_frame(name, sizeof(name)), LMC_OP_PING);
    assert_int_equal(lmc_op_from_frame(id3, 1), LMC_OP_INVALID);
    assert_int_equal(lmc_op_from_frame(junk, sizeof(junk)), LMC_OP_INVALID);
    assert_int_equal(lmc_op_from_frame(nil, 1), LMC_OP_INVALID);
    assert_int_equal(lmc_op_from_frame(two, 2), LMC_OP_INVALID);
    assert_int_equal(lmc_op_from_frame(NULL, 0), LMC_OP_INVALID);
}

/* ---------------------------------------------------------------------- */
/* Responses                                                               */
/* ---------------------------------------------------------------------- */

static msgpack_object unpack(msgpack_sbuffer *sb, msgpack_zone *z)
{
    msgpack_object o;
    size_t off = 0;
    assert_int_equal(msgpack_unpack(sb->data, sb->size, &off, z, &o), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, sb->size);
    return o;
}

static void test_response_builders_encode_the_documented_values(void **state)
{
    (void)state;
    msgpack_zone z;
    msgpack_zone_init(&z, 1024);
    msgpack_sbuffer sb;

    msgpack_sbuffer_init(&sb);
    lmc_response_nil(&sb);
    assert_int_equal(unpack(&sb, &z).type, MSGPACK_OBJECT_NIL);
    msgpack_sbuffer_destroy(&sb);

    msgpack_sbuffer_init(&sb);
    lmc_response_bool(&sb, true);
    msgpack_object o = unpack(&sb, &z);
    assert_int_equal(o.type, MSGPACK_OBJECT_BOOLEAN);
    assert_true(o.via.boolean);
    msgpack_sbuffer_destroy(&sb);

    msgpack_sbuffer_init(&sb);
    lmc_response_int(&sb, -7);
    o = unpack(&sb, &z);
    assert_int_equal(o.type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
    assert_int_equal(o.via.i64, -7);
    msgpack_sbuffer_destroy(&sb);

    msgpack_sbuffer_init(&sb);
    lmc_response_int(&sb, 256);
    o = unpack(&sb, &z);
    assert_int_equal(o.type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    assert_int_equal(o.via.u64, 256);
    msgpack_sbuffer_destroy(&sb);

    msgpack_sbuffer_init(&sb);
    lmc_response_str(&sb, "hello");
    o = unpack(&sb, &z);
    assert_int_equal(o.type, MSGPACK_OBJECT_STR);
    assert_int_equal(o.via.str.size, 5);
    assert_memory_equal(o.via.str.ptr, "hello", 5);
    msgpack_sbuffer_destroy(&sb);

    msgpack_sbuffer_init(&sb);
    lmc_response_transfer(&sb, false);
    o = unpack(&sb, &z);
    assert_int_equal(o.type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(o.via.array.size, 2);
    assert_int_equal(o.via.array.ptr[0].type, MSGPACK_OBJECT_BIN);
    assert_int_equal(o.via.array.ptr[0].via.bin.size, 0);
    assert_int_equal(o.via.array.ptr[1].type, MSGPACK_OBJECT_BOOLEAN);
    assert_false(o.via.array.ptr[1].via.boolean);
    msgpack_sbuffer_destroy(&sb);

    msgpack_sbuffer_init(&sb);
    lmc_response_error(&sb, "lookup: key.start must be an int (got str)");
    o = unpack(&sb, &z);
    assert_int_equal(o.type, MSGPACK_OBJECT_MAP);
    assert_int_equal(o.via.map.size, 1);
    assert_memory_equal(o.via.map.ptr[0].key.via.str.ptr, "error", 5);
    assert_int_equal(o.via.map.ptr[0].val.type, MSGPACK_OBJECT_STR);
    assert_int_equal(o.via.map.ptr[0].val.via.str.size,
                     strlen("lookup: key.start must be an int (got str)"));
    msgpack_sbuffer_destroy(&sb);

    msgpack_zone_destroy(&z);
}

/* ---------------------------------------------------------------------- */
/* Header and frame-count errors                                           */
/* ---------------------------------------------------------------------- */

static void test_uid_must_be_an_int(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[0]);
    msgpack_sbuffer_write(&f.sb[0], "\xa1x", 2);
    expect_error(&f, LMC_ERR_FORMAT, "request_uid must be an int", "got str");
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[0]);
    msgpack_sbuffer_write(&f.sb[0], "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9);
    expect_error(&f, LMC_ERR_INVALID, "request_uid", "18446744073709551615");
}

static void test_unknown_operation_name_is_rejected(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[1]);
    msgpack_sbuffer_write(&f.sb[1], "\xa1x", 2);
    lmc_request req;
    lmc_error err;
    assert_int_equal(fr_decode(&f, &req, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "request: unknown operation 'x'");
    assert_int_equal(req.uid, 42); /* still addressable */
    assert_int_equal(req.op, LMC_OP_INVALID);
    fr_free(&f);
}

static void test_unknown_operation_id_is_rejected(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[1]);
    msgpack_sbuffer_write(&f.sb[1], "\x63", 1); /* 99 */
    expect_error(&f, LMC_ERR_INVALID, "unknown operation id 99", NULL);
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[1]);
    msgpack_sbuffer_write(&f.sb[1], "\xff", 1); /* -1 */
    expect_error(&f, LMC_ERR_INVALID, "unknown operation id -1", NULL);
}

static void test_unimplemented_legacy_operation_is_named(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[1]);
    msgpack_sbuffer_write(&f.sb[1], "\x10", 1); /* 16 = prepare_store */
    expect_error(&f, LMC_ERR_INVALID, "operation id 16 (prepare_store) is not implemented", NULL);
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[1]);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &f.sb[1], msgpack_sbuffer_write);
    pstr(&pk, "wait_prefetch_status");
    expect_error(&f, LMC_ERR_INVALID, "operation 'wait_prefetch_status' is not implemented", NULL);
}

static void test_operation_of_wrong_type_is_rejected(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[1]);
    msgpack_sbuffer_write(&f.sb[1], "\x80", 1);
    expect_error(&f, LMC_ERR_FORMAT, "operation must be an int id or a str name", "got map");
}

static void test_wrong_payload_frame_count_names_the_operation(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    expect_error(&f, LMC_ERR_FORMAT, "lookup: expected 1 to 2 payload frames", "got 0");
    build(&f, LMC_OP_STORE, -1, NULL);
    msgpack_packer pk = fr_add(&f);
    v_zero(&pk);
    expect_error(&f, LMC_ERR_FORMAT, "store: expected 4 payload frames", "got 5");
    build(&f, LMC_OP_NOOP, -1, NULL);
    pk = fr_add(&f);
    v_zero(&pk);
    expect_error(&f, LMC_ERR_FORMAT, "noop: expected 0 payload frames", "got 1");
    fr_head(&f, 1, LMC_OP_REGISTER_KV_CACHE);
    for (int k = 0; k < 4; k++) {
        pk = fr_add(&f);
        v_zero(&pk);
    }
    expect_error(&f, LMC_ERR_FORMAT, "register_kv_cache: expected 5 payload frames", "got 4");
    fr_head(&f, 1, LMC_OP_QUERY_PREFETCH_STATUS);
    expect_error(&f, LMC_ERR_FORMAT, "query_prefetch_status: expected 1 payload frames", NULL);
}

static void test_missing_operation_frame_is_rejected(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 9, LMC_OP_NOOP);
    msgpack_sbuffer_destroy(&f.sb[1]);
    f.n = 1;
    lmc_request req;
    lmc_error err;
    assert_int_equal(fr_decode(&f, &req, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "expected [request_uid, operation"));
    assert_int_equal(req.uid, 9);
    fr_free(&f);
    assert_int_equal(lmc_request_decode(NULL, NULL, 0, &req, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "no frames"));
}

static void test_too_many_frames_are_rejected(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 1, LMC_OP_PING);
    for (int k = 0; k < 7; k++) {
        msgpack_packer pk = fr_add(&f);
        v_zero(&pk);
    }
    expect_error(&f, LMC_ERR_FORMAT, "9 frames; at most 8 allowed", NULL);
    fr_head(&f, 1, LMC_OP_PING);
    for (int k = 0; k < 100; k++) {
        msgpack_packer pk = fr_add(&f);
        v_zero(&pk);
    }
    expect_error(&f, LMC_ERR_FORMAT, "102 frames", NULL);
}

static void test_trailing_bytes_in_a_frame_are_rejected(void **state)
{
    (void)state;
    frames f;
    build(&f, LMC_OP_QUERY_PREFETCH_STATUS, -1, NULL);
    msgpack_sbuffer_write(&f.sb[2], "\xc0", 1);
    expect_error(&f, LMC_ERR_FORMAT, "query_prefetch_status: payload frame 1 has 1 trailing", NULL);
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_write(&f.sb[0], "\x01", 1);
    expect_error(&f, LMC_ERR_FORMAT, "request_uid: 1 trailing", NULL);
    build(&f, LMC_OP_NOOP, -1, NULL);
    msgpack_sbuffer_write(&f.sb[1], "\x01", 1);
    expect_error(&f, LMC_ERR_FORMAT, "operation: 1 trailing", NULL);
}

static void test_oversized_frame_is_rejected_before_reading(void **state)
{
    (void)state;
    size_t big = LMC_PROTO_MAX_FRAME + 1;
    uint8_t *buf = calloc(1, big);
    assert_non_null(buf);
    unsigned char uid[] = {0x01}, op[] = {0x09};
    const void *ptr[3] = {uid, op, buf};
    size_t len[3] = {1, 1, big};
    lmc_request req;
    lmc_error err;
    assert_int_equal(lmc_request_decode(ptr, len, 3, &req, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "payload frame 1 is 67108865 bytes"));
    ptr[0] = buf;
    len[0] = big;
    assert_int_equal(lmc_request_decode(ptr, len, 3, &req, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "frame 0 is 67108865 bytes"));
    free(buf);
}

static void test_failed_decode_keeps_uid_and_op(void **state)
{
    (void)state;
    frames f;
    build_key(&f, LMC_OP_LOOKUP, "start", v_str);
    lmc_request req;
    lmc_error err;
    assert_int_not_equal(fr_decode(&f, &req, &err), LMC_OK);
    assert_int_equal(req.uid, 42);
    assert_int_equal(req.op, LMC_OP_LOOKUP);
    assert_null(req.key.model_name); /* partial allocations released */
    assert_null(req.key.token_ids);
    lmc_request_free(&req);
    fr_free(&f);
}

/* ---------------------------------------------------------------------- */
/* Field validation                                                        */
/* ---------------------------------------------------------------------- */

typedef struct field_case {
    lmc_op op;
    const char *field; /* key field, or NULL for a payload position */
    int pos;
    val_fn v; /* NULL: omit the field */
    lmc_status code;
    const char *n1, *n2;
} field_case;

static void v_tokens_neg(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 5);
    for (int k = 0; k < 5; k++)
        msgpack_pack_int(pk, k == 3 ? -1 : k);
}
static void v_tokens_big(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_int64(pk, 1LL << 32);
}
static void v_tokens_u64(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, UINT64_MAX);
}
static void v_tokens_str(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 2);
    msgpack_pack_int(pk, 1);
    pstr(pk, "2");
}
static void v_salt_long(msgpack_packer *pk)
{
    char s[130];
    memset(s, 's', 129);
    s[129] = '\0';
    pstr(pk, s);
}
static void v_salt_128_multibyte(msgpack_packer *pk)
{
    /* 128 two-byte characters: 256 bytes but 128 characters, allowed. */
    char s[257];
    for (int k = 0; k < 128; k++) {
        s[2 * k] = (char)0xc3;
        s[2 * k + 1] = (char)0xa9;
    }
    s[256] = '\0';
    pstr(pk, s);
}
static void v_slash(msgpack_packer *pk)
{
    pstr(pk, "a/b");
}
static void v_backslash(msgpack_packer *pk)
{
    pstr(pk, "a\\b");
}
static void v_dup_start(msgpack_packer *pk)
{
    /* Used as the value of an extra field named "start": a repeat. */
    msgpack_pack_int(pk, 0);
}

static const field_case FIELD_CASES[] = {
    /* key: types */
    {LMC_OP_LOOKUP, "start", 0, v_str, LMC_ERR_FORMAT, "lookup: key.start must be an int",
     "got str"},
    {LMC_OP_LOOKUP, "end", 0, v_float, LMC_ERR_FORMAT, "lookup: key.end must be an int",
     "got float"},
    {LMC_OP_LOOKUP, "model_name", 0, v_int7, LMC_ERR_FORMAT, "lookup: key.model_name must be a str",
     NULL},
    {LMC_OP_LOOKUP, "world_size", 0, v_nil, LMC_ERR_FORMAT, "lookup: key.world_size must be an int",
     "got nil"},
    {LMC_OP_LOOKUP, "token_ids", 0, v_map, LMC_ERR_FORMAT, "lookup: key.token_ids must be a list",
     "got map"},
    {LMC_OP_LOOKUP, "token_ids", 0, v_tokens_neg, LMC_ERR_INVALID,
     "lookup: key.token_ids must be a list of unsigned 32-bit ints (item 3 is -1)", NULL},
    {LMC_OP_LOOKUP, "token_ids", 0, v_tokens_big, LMC_ERR_INVALID, "key.token_ids",
     "item 0 is 4294967296"},
    {LMC_OP_LOOKUP, "token_ids", 0, v_tokens_u64, LMC_ERR_INVALID, "key.token_ids",
     "18446744073709551615"},
    {LMC_OP_LOOKUP, "token_ids", 0, v_tokens_str, LMC_ERR_FORMAT, "key.token_ids",
     "item 1 is a str"},
    {LMC_OP_LOOKUP, "request_id", 0, v_bin, LMC_ERR_FORMAT, "lookup: key.request_id must be a str",
     "got bin"},
    {LMC_OP_LOOKUP, "cache_salt", 0, v_int7, LMC_ERR_FORMAT, "lookup: key.cache_salt must be a str",
     NULL},
    {LMC_OP_LOOKUP, "num_kv_readers", 0, v_str, LMC_ERR_FORMAT, "key.num_kv_readers must be an int",
     NULL},
    {LMC_OP_LOOKUP, "worker_id", 0, v_str, LMC_ERR_FORMAT, "key.worker_id must be an int", NULL},
    /* key: ranges */
    {LMC_OP_LOOKUP, "world_size", 0, v_zero, LMC_ERR_INVALID, "key.world_size must be in [1, 255]",
     "got 0"},
    {LMC_OP_LOOKUP, "world_size", 0, v_256, LMC_ERR_INVALID, "key.world_size must be in [1, 255]",
     "got 256"},
    {LMC_OP_LOOKUP, "world_size", 0, v_u64max, LMC_ERR_INVALID, "key.world_size",
     "18446744073709551615"},
    {LMC_OP_LOOKUP, "worker_id", 0, v_zero, LMC_ERR_INVALID, "lookup: key.worker_id must be nil",
     NULL},
    {LMC_OP_RETRIEVE, "worker_id", 0, v_nil, LMC_ERR_INVALID, "retrieve: key.worker_id must be set",
     NULL},
    {LMC_OP_STORE, "worker_id", 0, NULL, LMC_ERR_INVALID, "store: key.worker_id must be set", NULL},
    {LMC_OP_STORE, "worker_id", 0, v_two, LMC_ERR_INVALID,
     "store: key.worker_id must be in [0, world_size-1]", "got 2"},
    {LMC_OP_STORE, "worker_id", 0, v_neg1, LMC_ERR_INVALID, "store: key.worker_id", "got -1"},
    {LMC_OP_LOOKUP, "start", 0, v_neg1, LMC_ERR_INVALID, "key.start must be in [0,", "got -1"},
    {LMC_OP_LOOKUP, "start", 0, v_513, LMC_ERR_INVALID,
     "key.start (513) must not be greater than key.end (512)", NULL},
    {LMC_OP_LOOKUP, "end", 0, v_600, LMC_ERR_INVALID,
     "key.end (600) is past the end of key.token_ids (512 tokens)", NULL},
    {LMC_OP_LOOKUP, "num_kv_readers", 0, v_zero, LMC_ERR_INVALID,
     "key.num_kv_readers must be in [1, 128]", NULL},
    {LMC_OP_LOOKUP, "num_kv_readers", 0, v_129, LMC_ERR_INVALID,
     "key.num_kv_readers must be in [1, 128]", "got 129"},
    {LMC_OP_LOOKUP, "request_id", 0, v_empty_str, LMC_ERR_INVALID,
     "key.request_id must not be empty", NULL},
    {LMC_OP_LOOKUP, "request_id", 0, v_257_bytes, LMC_ERR_INVALID,
     "key.request_id is 257 bytes; at most 256", NULL},
    {LMC_OP_LOOKUP, "request_id", 0, v_nul, LMC_ERR_INVALID, "key.request_id must not contain NUL",
     NULL},
    {LMC_OP_LOOKUP, "model_name", 0, v_empty_str, LMC_ERR_INVALID,
     "key.model_name must not be empty", NULL},
    {LMC_OP_LOOKUP, "model_name", 0, v_at, LMC_ERR_INVALID, "key.model_name must not contain '@'",
     NULL},
    {LMC_OP_LOOKUP, "model_name", 0, v_bad_utf8, LMC_ERR_INVALID,
     "key.model_name is not valid UTF-8", NULL},
    {LMC_OP_LOOKUP, "cache_salt", 0, v_at, LMC_ERR_INVALID, "key.cache_salt must not contain '@'",
     NULL},
    {LMC_OP_LOOKUP, "cache_salt", 0, v_slash, LMC_ERR_INVALID,
     "key.cache_salt must not contain '/'", NULL},
    {LMC_OP_LOOKUP, "cache_salt", 0, v_backslash, LMC_ERR_INVALID,
     "key.cache_salt must not contain '\\'", NULL},
    {LMC_OP_LOOKUP, "cache_salt", 0, v_nul, LMC_ERR_INVALID, "key.cache_salt must not contain NUL",
     NULL},
    {LMC_OP_LOOKUP, "cache_salt", 0, v_salt_long, LMC_ERR_INVALID,
     "key.cache_salt is 129 characters; at most 128", NULL},
    /* key: structure */
    {LMC_OP_LOOKUP, "model_name", 0, NULL, LMC_ERR_FORMAT,
     "lookup: key is missing field 'model_name'", NULL},
    {LMC_OP_LOOKUP, "world_size", 0, NULL, LMC_ERR_FORMAT, "key is missing field 'world_size'",
     NULL},
    {LMC_OP_LOOKUP, "token_ids", 0, NULL, LMC_ERR_FORMAT, "key is missing field 'token_ids'", NULL},
    {LMC_OP_LOOKUP, "start", 0, NULL, LMC_ERR_FORMAT, "key is missing field 'start'", NULL},
    {LMC_OP_LOOKUP, "end", 0, NULL, LMC_ERR_FORMAT, "key is missing field 'end'", NULL},
    {LMC_OP_LOOKUP, "request_id", 0, NULL, LMC_ERR_FORMAT, "key is missing field 'request_id'",
     NULL},
    {LMC_OP_FREE_LOOKUP_LOCKS, "request_id", 0, NULL, LMC_ERR_FORMAT,
     "free_lookup_locks: key is missing field 'request_id'", NULL},
    /* positional payloads */
    {LMC_OP_LOOKUP, NULL, 0, v_list, LMC_ERR_FORMAT, "lookup: key must be a map", "got list"},
    {LMC_OP_LOOKUP, NULL, 1, v_str, LMC_ERR_FORMAT, "lookup: tp_size must be an int", NULL},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 0, v_str, LMC_ERR_FORMAT,
     "register_kv_cache: instance_id must be an int", NULL},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 1, v_list, LMC_ERR_FORMAT,
     "register_kv_cache: kv_cache must be a map", NULL},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 2, v_at, LMC_ERR_INVALID,
     "register_kv_cache: model_name must not contain '@'", NULL},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 2, v_empty_str, LMC_ERR_INVALID,
     "register_kv_cache: model_name must not be empty", NULL},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 3, v_zero, LMC_ERR_INVALID,
     "register_kv_cache: world_size must be in [1, 255]", NULL},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 3, v_256, LMC_ERR_INVALID, "register_kv_cache: world_size",
     "got 256"},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 4, v_two, LMC_ERR_INVALID,
     "register_kv_cache: worker_id must be in [0, 1]", "got 2"},
    {LMC_OP_REGISTER_KV_CACHE, NULL, 4, v_nil, LMC_ERR_FORMAT,
     "register_kv_cache: worker_id must be an int", NULL},
    {LMC_OP_UNREGISTER_KV_CACHE, NULL, 0, v_nil, LMC_ERR_FORMAT,
     "unregister_kv_cache: instance_id must be an int", NULL},
    {LMC_OP_RETRIEVE, NULL, 1, v_str, LMC_ERR_FORMAT, "retrieve: instance_id must be an int", NULL},
    {LMC_OP_RETRIEVE, NULL, 2, v_two_groups, LMC_ERR_INVALID,
     "retrieve: block_ids has 2 KV groups; this server supports exactly one (a list of one list)",
     NULL},
    {LMC_OP_STORE, NULL, 2, v_list, LMC_ERR_INVALID, "store: block_ids has 0 KV groups", NULL},
    {LMC_OP_STORE, NULL, 2, v_map, LMC_ERR_FORMAT, "store: block_ids must be a list of one list",
     NULL},
    {LMC_OP_STORE, NULL, 2, v_flat_blocks, LMC_ERR_FORMAT, "store: block_ids[0] must be a list",
     "got int"},
    {LMC_OP_STORE, NULL, 2, v_blocks_neg, LMC_ERR_INVALID,
     "store: block_ids[0] must be a list of non-negative ints (item 2 is -1)", NULL},
    {LMC_OP_STORE, NULL, 2, v_blocks_str, LMC_ERR_FORMAT, "block_ids[0]", "item 1 is a str"},
    {LMC_OP_STORE, NULL, 2, v_blocks_big, LMC_ERR_INVALID, "block_ids[0]", "18446744073709551615"},
    {LMC_OP_STORE, NULL, 3, v_str, LMC_ERR_FORMAT, "store: event_ipc_handle must be bytes",
     "got str"},
    {LMC_OP_RETRIEVE, NULL, 4, v_neg1, LMC_ERR_INVALID,
     "retrieve: skip_first_n_tokens must be in [0, 512]", NULL},
    {LMC_OP_RETRIEVE, NULL, 4, v_600, LMC_ERR_INVALID, "retrieve: skip_first_n_tokens", "got 600"},
    {LMC_OP_RETRIEVE, NULL, 4, v_str, LMC_ERR_FORMAT,
     "retrieve: skip_first_n_tokens must be an int", NULL},
    {LMC_OP_QUERY_PREFETCH_STATUS, NULL, 0, v_int7, LMC_ERR_FORMAT,
     "query_prefetch_status: request_id must be a str", NULL},
    {LMC_OP_QUERY_PREFETCH_LOOKUP_HITS, NULL, 0, v_empty_str, LMC_ERR_INVALID,
     "query_prefetch_lookup_hits: request_id must not be empty", NULL},
    {LMC_OP_END_SESSION, NULL, 0, v_257_bytes, LMC_ERR_INVALID,
     "end_session: request_id is 257 bytes", NULL},
    {LMC_OP_END_SESSION, NULL, 0, v_nul, LMC_ERR_INVALID,
     "end_session: request_id must not contain NUL", NULL},
    {LMC_OP_CLEAR, NULL, 0, v_one, LMC_ERR_FORMAT, "clear: force must be a bool", "got int"},
    {LMC_OP_PING, NULL, 0, v_str, LMC_ERR_FORMAT, "ping: instance_id must be an int or nil",
     "got str"},
    {LMC_OP_FREE_LOOKUP_LOCKS, NULL, 1, v_nil, LMC_ERR_FORMAT,
     "free_lookup_locks: tp_size must be an int", NULL},
};

static void test_every_field_error_names_the_operation_and_field(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(FIELD_CASES) / sizeof(FIELD_CASES[0]); k++) {
        const field_case *c = &FIELD_CASES[k];
        frames f;
        if (c->field != NULL)
            build_key(&f, c->op, c->field, c->v);
        else
            build(&f, c->op, c->pos, c->v);
        expect_error(&f, c->code, c->n1, c->n2);
    }
}

static void test_cache_salt_limit_counts_characters_not_bytes(void **state)
{
    (void)state;
    frames f;
    build_key(&f, LMC_OP_LOOKUP, "cache_salt", v_salt_128_multibyte);
    lmc_request r = decode_ok(&f);
    assert_int_equal(strlen(r.key.cache_salt), 256);
    lmc_request_free(&r);
    build_key(&f, LMC_OP_LOOKUP, "cache_salt", v_nil); /* None: no salt */
    r = decode_ok(&f);
    assert_string_equal(r.key.cache_salt, "");
    lmc_request_free(&r);
}

static void test_repeated_key_field_is_rejected(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    msgpack_packer pk = fr_add(&f);
    msgpack_pack_map(&pk, 10);
    for (size_t k = 0; k < 9; k++) {
        pstr(&pk, KEY_FIELDS[k]);
        key_default(&pk, KEY_FIELDS[k], false);
    }
    pstr(&pk, "start");
    v_dup_start(&pk);
    expect_error(&f, LMC_ERR_FORMAT, "lookup: key has field 'start' twice", NULL);
}

static void test_non_string_key_field_name_is_rejected(void **state)
{
    (void)state;
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    msgpack_packer pk = fr_add(&f);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_int(&pk, 2);
    expect_error(&f, LMC_ERR_FORMAT, "lookup: key field names must be strs", "got int");
}

static void v_region_name_at(msgpack_packer *pk)
{
    pstr(pk, "a/b");
}
static void v_region_name_abs_nested(msgpack_packer *pk)
{
    pstr(pk, "/a/b");
}
static void v_slash_only(msgpack_packer *pk)
{
    pstr(pk, "/");
}
static void v_dotdot(msgpack_packer *pk)
{
    pstr(pk, "/..");
}
static void v_201_bytes(msgpack_packer *pk)
{
    char s[202];
    memset(s, 'n', 201);
    s[0] = '/';
    s[201] = '\0';
    pstr(pk, s);
}
static void v_max_blocks_plus_1(msgpack_packer *pk)
{
    msgpack_pack_int64(pk, (int64_t)LMC_PROTO_MAX_BLOCKS + 1);
}
static void v_2_pow_60(msgpack_packer *pk)
{
    msgpack_pack_int64(pk, 1LL << 60);
}
static void v_torch_foo(msgpack_packer *pk)
{
    pstr(pk, "torch.foo");
}

typedef struct region_case {
    const char *field;
    val_fn v;
    lmc_status code;
    const char *n1, *n2;
} region_case;

static const region_case REGION_CASES[] = {
    {"shm_name", v_int7, LMC_ERR_FORMAT, "register_kv_cache: kv_cache.shm_name must be a str",
     NULL},
    {"shm_name", v_region_name_at, LMC_ERR_INVALID, "kv_cache.shm_name must be '/name' or 'name'",
     "a/b"},
    {"shm_name", v_region_name_abs_nested, LMC_ERR_INVALID, "kv_cache.shm_name must be '/name'",
     NULL},
    {"shm_name", v_empty_str, LMC_ERR_INVALID, "kv_cache.shm_name '' is not a POSIX", NULL},
    {"shm_name", v_slash_only, LMC_ERR_INVALID, "kv_cache.shm_name '/' is not a POSIX", NULL},
    {"shm_name", v_dotdot, LMC_ERR_INVALID, "kv_cache.shm_name '/..' is not a POSIX", NULL},
    {"shm_name", v_201_bytes, LMC_ERR_INVALID, "kv_cache.shm_name is 201 bytes; at most 200", NULL},
    {"shm_name", v_nul, LMC_ERR_INVALID, "kv_cache.shm_name must not contain NUL", NULL},
    {"num_blocks", v_zero, LMC_ERR_INVALID, "kv_cache.num_blocks must be in [1, 16777216]",
     "got 0"},
    {"num_blocks", v_max_blocks_plus_1, LMC_ERR_INVALID, "kv_cache.num_blocks", "got 16777217"},
    {"num_blocks", v_str, LMC_ERR_FORMAT, "kv_cache.num_blocks must be an int", NULL},
    {"tokens_per_block", v_zero, LMC_ERR_INVALID, "kv_cache.tokens_per_block must be in [1,", NULL},
    {"bytes_per_token", v_zero, LMC_ERR_INVALID, "kv_cache.bytes_per_token must be in [1,", NULL},
    {"bytes_per_token", v_three, LMC_ERR_INVALID,
     "kv_cache.bytes_per_token (3) is not a multiple of the size of torch.float16 (2)", NULL},
    {"tokens_per_block", v_2_pow_60, LMC_ERR_INVALID,
     "kv_cache: num_blocks * tokens_per_block * bytes_per_token", "overflows"},
    {"dtype", v_torch_foo, LMC_ERR_INVALID, "kv_cache.dtype: unknown torch dtype 'torch.foo'",
     NULL},
    {"dtype", v_int7, LMC_ERR_FORMAT, "kv_cache.dtype must be a str", NULL},
    {"shm_name", NULL, LMC_ERR_FORMAT, "kv_cache is missing field 'shm_name'", NULL},
    {"num_blocks", NULL, LMC_ERR_FORMAT, "kv_cache is missing field 'num_blocks'", NULL},
    {"tokens_per_block", NULL, LMC_ERR_FORMAT, "kv_cache is missing field 'tokens_per_block'",
     NULL},
    {"bytes_per_token", NULL, LMC_ERR_FORMAT, "kv_cache is missing field 'bytes_per_token'", NULL},
    {"dtype", NULL, LMC_ERR_FORMAT, "kv_cache is missing field 'dtype'", NULL},
};

static void test_every_kv_cache_field_error_names_the_field(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(REGION_CASES) / sizeof(REGION_CASES[0]); k++) {
        frames f;
        build_region(&f, REGION_CASES[k].field, REGION_CASES[k].v);
        expect_error(&f, REGION_CASES[k].code, REGION_CASES[k].n1, REGION_CASES[k].n2);
    }
}

static void test_region_overflow_with_huge_bytes_per_token(void **state)
{
    (void)state;
    /* 16 blocks * 16 tokens * 2^62 bytes overflows int64 even though each is in range. */
    frames f;
    fr_head(&f, 1, LMC_OP_REGISTER_KV_CACHE);
    msgpack_packer pk = fr_add(&f);
    v_int1234(&pk);
    pk = fr_add(&f);
    lmc_kv_region_desc r = std_region();
    r.bytes_per_token = 1LL << 62;
    lmc_kv_region_encode(&pk, &r);
    val_fn rest[3] = {v_model, v_two, v_one};
    for (int k = 0; k < 3; k++) {
        pk = fr_add(&f);
        rest[k](&pk);
    }
    expect_error(&f, LMC_ERR_INVALID, "kv_cache", "overflows");
}

/* ---------------------------------------------------------------------- */
/* Hostile input                                                           */
/* ---------------------------------------------------------------------- */

/* Decode, expect some error with a non-empty message; never crash. */
static void expect_any_error(const void *const *ptr, const size_t *len, size_t n)
{
    lmc_request req;
    lmc_error err;
    lmc_status st = lmc_request_decode(ptr, len, n, &req, &err);
    assert_int_not_equal(st, LMC_OK);
    assert_int_equal(err.code, st);
    assert_true(strlen(err.msg) > 0);
    lmc_request_free(&req);
}

static void test_empty_frames_are_rejected(void **state)
{
    (void)state;
    unsigned char uid[] = {0x01}, op8[] = {0x08};
    const void *ptr[3] = {"", op8, uid};
    size_t len[3] = {0, 1, 1};
    expect_any_error(ptr, len, 2);
    ptr[0] = uid;
    len[1] = 0;
    expect_any_error(ptr, len, 2);
    len[1] = 1;
    len[2] = 0;
    expect_any_error(ptr, len, 3);
    ptr[2] = NULL;
    expect_any_error(ptr, len, 3);

    frames f;
    build(&f, LMC_OP_LOOKUP, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[2]);
    expect_error(&f, LMC_ERR_FORMAT, "lookup: key: malformed msgpack", NULL);
}

static void test_every_truncation_of_every_operation_is_rejected(void **state)
{
    (void)state;
    for (size_t c = 0; c < N_OP_CASES; c++) {
        frames f;
        build(&f, OP_CASES[c].op, -1, NULL);
        for (size_t fr = 0; fr < f.n; fr++) {
            const void *ptr[8];
            size_t len[8];
            for (size_t k = 0; k < f.n; k++) {
                ptr[k] = f.sb[k].data;
                len[k] = f.sb[k].size;
            }
            size_t full = len[fr];
            for (size_t cut = 0; cut < full; cut++) {
                len[fr] = cut;
                expect_any_error(ptr, len, f.n);
            }
        }
        fr_free(&f);
    }
}

static void test_wrong_type_at_every_position_is_rejected(void **state)
{
    (void)state;
    val_fn vals[] = {v_nil, v_true, v_int7, v_str, v_bin, v_list, v_map, v_float};
    unsigned bits[] = {B_NIL, B_BOOL, B_INT, B_STR, B_BIN, B_LIST, B_MAP, B_FLOAT};
    size_t checked = 0;
    for (size_t c = 0; c < N_OP_CASES; c++) {
        for (size_t pos = 0; pos < OP_CASES[c].n; pos++) {
            for (size_t v = 0; v < 8; v++) {
                if (OP_CASES[c].ok[pos] & bits[v])
                    continue;
                frames f;
                build(&f, OP_CASES[c].op, (int)pos, vals[v]);
                lmc_request req;
                lmc_error err;
                lmc_status st = fr_decode(&f, &req, &err);
                if (st == LMC_OK)
                    print_message("%s payload %zu accepted value %zu\n",
                                  lmc_op_name(OP_CASES[c].op), pos, v);
                assert_int_not_equal(st, LMC_OK);
                assert_int_equal(strncmp(err.msg, lmc_op_name(OP_CASES[c].op),
                                         strlen(lmc_op_name(OP_CASES[c].op))),
                                 0);
                lmc_request_free(&req);
                fr_free(&f);
                checked++;
            }
        }
    }
    assert_true(checked > 100);
}

/* Raw items with a declared length far beyond the frame. */
static const struct {
    const char *bytes;
    size_t len;
} HUGE_ITEMS[] = {
    {"\xdd\xff\xff\xff\xff", 5}, /* array32 of 4 G items */
    {"\xdf\xff\xff\xff\xff", 5}, /* map32 of 4 G pairs */
    {"\xdb\xff\xff\xff\xff"
     "a",
     6}, /* str32 of 4 GiB */
    {"\xc6\xff\xff\xff\xff"
     "a",
     6},                             /* bin32 of 4 GiB */
    {"\xc9\xff\xff\xff\xff\x01", 6}, /* ext32 of 4 GiB */
    {"\xdc\xff\xff\x01\x02", 5},     /* array16 of 65535 items, 2 given */
    {"\xde\x00\x02\x01\x02\x03", 6}, /* map16 of 2 pairs, 3 bytes given */
    {"\xda\x01\x00"
     "ab",
     5},         /* str16 of 256 bytes */
    {"\xc1", 1}, /* the never-used byte */
};
#define N_HUGE (sizeof(HUGE_ITEMS) / sizeof(HUGE_ITEMS[0]))

static void test_huge_declared_lengths_fail_fast_at_every_position(void **state)
{
    (void)state;
    for (size_t h = 0; h < N_HUGE; h++) {
        /* As uid and as operation. */
        for (size_t pos = 0; pos < 2; pos++) {
            frames f;
            build(&f, LMC_OP_NOOP, -1, NULL);
            msgpack_sbuffer_clear(&f.sb[pos]);
            msgpack_sbuffer_write(&f.sb[pos], HUGE_ITEMS[h].bytes, HUGE_ITEMS[h].len);
            lmc_request req;
            lmc_error err;
            assert_int_equal(fr_decode(&f, &req, &err), LMC_ERR_FORMAT);
            fr_free(&f);
        }
        /* As every payload frame of every operation. */
        for (size_t c = 0; c < N_OP_CASES; c++)
            for (size_t pos = 0; pos < OP_CASES[c].n; pos++) {
                frames f;
                build(&f, OP_CASES[c].op, -1, NULL);
                msgpack_sbuffer_clear(&f.sb[2 + pos]);
                msgpack_sbuffer_write(&f.sb[2 + pos], HUGE_ITEMS[h].bytes, HUGE_ITEMS[h].len);
                lmc_request req;
                lmc_error err;
                lmc_status st = fr_decode(&f, &req, &err);
                assert_int_not_equal(st, LMC_OK);
                lmc_request_free(&req);
                fr_free(&f);
            }
    }
}

static void test_huge_declared_lengths_inside_the_key_fail_fast(void **state)
{
    (void)state;
    const char *fields[] = {"token_ids", "model_name", "request_id", "cache_salt", "extra"};
    for (size_t h = 0; h < N_HUGE; h++)
        for (size_t k = 0; k < 5; k++) {
            /* A key map whose last value is the hostile item (no bytes follow). */
            frames f;
            fr_head(&f, 1, LMC_OP_LOOKUP);
            msgpack_packer pk = fr_add(&f);
            msgpack_pack_map(&pk, k == 4 ? 10 : 9);
            for (size_t j = 0; j < 9; j++) {
                if (!strcmp(KEY_FIELDS[j], fields[k]))
                    continue;
                pstr(&pk, KEY_FIELDS[j]);
                key_default(&pk, KEY_FIELDS[j], false);
            }
            pstr(&pk, fields[k]);
            msgpack_sbuffer_write(&f.sb[2], HUGE_ITEMS[h].bytes, HUGE_ITEMS[h].len);
            lmc_request req;
            lmc_error err;
            assert_int_equal(fr_decode(&f, &req, &err), LMC_ERR_FORMAT);
            assert_non_null(strstr(err.msg, "malformed msgpack"));
            fr_free(&f);
        }
}

static void test_huge_token_and_block_counts_fail_fast(void **state)
{
    (void)state;
    frames f;
    build_key(&f, LMC_OP_LOOKUP, "token_ids", NULL);
    /* Replace the frame: a key whose token_ids declares 2^32-1 items. */
    msgpack_sbuffer_clear(&f.sb[2]);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &f.sb[2], msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    pstr(&pk, "token_ids");
    msgpack_sbuffer_write(&f.sb[2], "\xdd\xff\xff\xff\xff\x01\x02", 7);
    expect_error(&f, LMC_ERR_FORMAT, "lookup: key.token_ids: malformed msgpack", NULL);

    build(&f, LMC_OP_STORE, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[4]);
    msgpack_sbuffer_write(&f.sb[4], "\x91\xdd\xff\xff\xff\xff\x00", 7);
    expect_error(&f, LMC_ERR_FORMAT, "store: block_ids[0]: malformed msgpack", NULL);
}

static void test_more_tokens_than_the_limit_are_rejected(void **state)
{
    (void)state;
    /* LMC_PROTO_MAX_TOKENS + 1 zeros: a real (5 MiB) frame over the limit. */
    size_t n = LMC_PROTO_MAX_TOKENS + 1;
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    msgpack_packer pk = fr_add(&f);
    msgpack_pack_map(&pk, 1);
    pstr(&pk, "token_ids");
    msgpack_pack_array(&pk, n);
    char *zeros = calloc(1, n);
    assert_non_null(zeros);
    msgpack_sbuffer_write(&f.sb[2], zeros, n);
    free(zeros);
    expect_error(&f, LMC_ERR_INVALID, "key.token_ids has 4194305 tokens; at most 4194304", NULL);
}

static uint8_t *nested(size_t depth, uint8_t open, size_t *len)
{
    uint8_t *b = malloc(depth + 1);
    assert_non_null(b);
    memset(b, open, depth);
    b[depth] = 0xc0;
    *len = depth + 1;
    return b;
}

static void test_deep_nesting_is_skipped_or_rejected_without_recursion(void **state)
{
    (void)state;
    size_t depth = 1000000, len;
    /* An unknown key field holding a million nested lists: skipped. */
    uint8_t *deep = nested(depth, 0x91, &len);
    frames f;
    fr_head(&f, 1, LMC_OP_LOOKUP);
    msgpack_packer pk = fr_add(&f);
    msgpack_pack_map(&pk, 10);
    for (size_t j = 0; j < 9; j++) {
        pstr(&pk, KEY_FIELDS[j]);
        key_default(&pk, KEY_FIELDS[j], false);
    }
    pstr(&pk, "deep");
    msgpack_sbuffer_write(&f.sb[2], (const char *)deep, len);
    lmc_request r = decode_ok(&f);
    lmc_request_free(&r);

    /* end_session's ignored end_info, nested maps: skipped. */
    free(deep);
    deep = malloc(2 * depth + 1);
    assert_non_null(deep);
    for (size_t k = 0; k < depth; k++) {
        deep[2 * k] = 0x81;     /* map of one pair */
        deep[2 * k + 1] = 0x01; /* key 1 */
    }
    deep[2 * depth] = 0xc0;
    build(&f, LMC_OP_END_SESSION, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[3]);
    msgpack_sbuffer_write(&f.sb[3], (const char *)deep, 2 * depth + 1);
    r = decode_ok(&f);
    lmc_request_free(&r);

    /* Where a flat value is expected: rejected. */
    free(deep);
    deep = nested(depth, 0x91, &len);
    build(&f, LMC_OP_STORE, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[4]);
    msgpack_sbuffer_write(&f.sb[4], (const char *)deep, len);
    expect_error(&f, LMC_ERR_FORMAT, "store: block_ids[0] must be a list of non-negative ints",
                 NULL);
    /* A truncated deep nest (no innermost value): rejected. */
    build(&f, LMC_OP_END_SESSION, -1, NULL);
    msgpack_sbuffer_clear(&f.sb[3]);
    msgpack_sbuffer_write(&f.sb[3], (const char *)deep, len - 1);
    expect_error(&f, LMC_ERR_FORMAT, "end_session: end_info: malformed msgpack", NULL);
    free(deep);
}

/* xorshift64*: a fixed-seed generator, so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static void test_random_frames_never_crash(void **state)
{
    (void)state;
    static const uint8_t interesting[] = {0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8,
                                          0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd3,
                                          0xd4, 0xd8, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf,
                                          0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xff, 0x00, 0x7f};
    size_t ok = 0, failed = 0;
    for (int iter = 0; iter < 10000; iter++) {
        uint8_t buf[10][96];
        const void *ptr[10];
        size_t len[10];
        size_t n = (size_t)(rng() % 10);
        int mode = (int)(rng() % 3);
        frames f;
        fr_init(&f);
        if (mode == 2) {
            /* Mutate a valid message: flip a few bytes of one frame. */
            const op_case *c = &OP_CASES[rng() % N_OP_CASES];
            build(&f, c->op, -1, NULL);
            n = f.n;
            for (size_t k = 0; k < n; k++) {
                ptr[k] = f.sb[k].data;
                len[k] = f.sb[k].size;
            }
            size_t k = (size_t)(rng() % n);
            if (len[k] > 0) {
                uint8_t *p = (uint8_t *)f.sb[k].data;
                int flips = 1 + (int)(rng() % 4);
                for (int j = 0; j < flips; j++)
                    p[rng() % len[k]] =
                        (rng() & 1) ? interesting[rng() % sizeof(interesting)] : (uint8_t)rng();
                if (rng() % 4 == 0)
                    len[k] = (size_t)(rng() % len[k]);
            }
        } else {
            for (size_t k = 0; k < n; k++) {
                len[k] = (size_t)(rng() % sizeof(buf[k]));
                for (size_t j = 0; j < len[k]; j++)
                    buf[k][j] = (rng() % 3 == 0) ? interesting[rng() % sizeof(interesting)]
                                                 : (uint8_t)rng();
                ptr[k] = buf[k];
            }
            if (mode == 1 && n >= 2) { /* a valid head, random payloads */
                buf[0][0] = 0x01;
                len[0] = 1;
                buf[1][0] = (uint8_t)OP_CASES[rng() % N_OP_CASES].op;
                len[1] = 1;
            }
        }
        lmc_request req;
        lmc_error err;
        lmc_status st = lmc_request_decode(ptr, len, n, &req, &err);
        if (st == LMC_OK) {
            ok++;
        } else {
            assert_int_equal(err.code, st);
            assert_true(strlen(err.msg) > 0);
            failed++;
        }
        lmc_request_free(&req);
        fr_free(&f);
    }
    assert_int_equal(ok + failed, 10000);
    assert_true(failed > 0);
    assert_true(ok > 0); /* mutations that stay valid exercise the success path */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_kv_cache_round_trips),
        cmocka_unit_test(test_unregister_kv_cache_round_trips),
        cmocka_unit_test(test_store_round_trips),
        cmocka_unit_test(test_retrieve_round_trips_with_skip_first_n_tokens),
        cmocka_unit_test(test_retrieve_without_skip_first_n_tokens_defaults_to_zero),
        cmocka_unit_test(test_lookup_round_trips),
        cmocka_unit_test(test_lookup_without_tp_size_is_accepted),
        cmocka_unit_test(test_request_id_operations_round_trip),
        cmocka_unit_test(test_free_lookup_locks_round_trips),
        cmocka_unit_test(test_clear_round_trips_with_and_without_force),
        cmocka_unit_test(test_no_payload_operations_round_trip),
        cmocka_unit_test(test_ping_accepts_int_nil_or_nothing),
        cmocka_unit_test(test_operation_may_be_sent_by_name),
        cmocka_unit_test(test_key_defaults_when_optional_fields_are_absent),
        cmocka_unit_test(test_unknown_key_fields_are_ignored),
        cmocka_unit_test(test_op_names_and_frames),
        cmocka_unit_test(test_response_builders_encode_the_documented_values),
        cmocka_unit_test(test_uid_must_be_an_int),
        cmocka_unit_test(test_unknown_operation_name_is_rejected),
        cmocka_unit_test(test_unknown_operation_id_is_rejected),
        cmocka_unit_test(test_unimplemented_legacy_operation_is_named),
        cmocka_unit_test(test_operation_of_wrong_type_is_rejected),
        cmocka_unit_test(test_wrong_payload_frame_count_names_the_operation),
        cmocka_unit_test(test_missing_operation_frame_is_rejected),
        cmocka_unit_test(test_too_many_frames_are_rejected),
        cmocka_unit_test(test_trailing_bytes_in_a_frame_are_rejected),
        cmocka_unit_test(test_oversized_frame_is_rejected_before_reading),
        cmocka_unit_test(test_failed_decode_keeps_uid_and_op),
        cmocka_unit_test(test_every_field_error_names_the_operation_and_field),
        cmocka_unit_test(test_cache_salt_limit_counts_characters_not_bytes),
        cmocka_unit_test(test_repeated_key_field_is_rejected),
        cmocka_unit_test(test_non_string_key_field_name_is_rejected),
        cmocka_unit_test(test_every_kv_cache_field_error_names_the_field),
        cmocka_unit_test(test_region_overflow_with_huge_bytes_per_token),
        cmocka_unit_test(test_empty_frames_are_rejected),
        cmocka_unit_test(test_every_truncation_of_every_operation_is_rejected),
        cmocka_unit_test(test_wrong_type_at_every_position_is_rejected),
        cmocka_unit_test(test_huge_declared_lengths_fail_fast_at_every_position),
        cmocka_unit_test(test_huge_declared_lengths_inside_the_key_fail_fast),
        cmocka_unit_test(test_huge_token_and_block_counts_fail_fast),
        cmocka_unit_test(test_more_tokens_than_the_limit_are_rejected),
        cmocka_unit_test(test_deep_nesting_is_skipped_or_rejected_without_recursion),
        cmocka_unit_test(test_random_frames_never_crash),
    };
    return cmocka_run_group_tests(tests, setup_globals, NULL);
}
