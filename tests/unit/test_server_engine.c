/*
 * test_server_engine.c -- the server's request logic (server/engine.h) run
 * against a StorageManager alone, with no transport and no shared memory,
 * the way a replay would; and the operation table (server/ops.def) the
 * decoder and the handlers are derived from.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "helpers/sm_test_util.h"
#include "server/engine.h"
#include "server/ops.h"
#include "server/protocol.h"

#define CHUNK 16
#define N_TOKENS (4 * CHUNK)
#define BYTES_PER_TOKEN 8

typedef struct fixture {
    lmc_storage_manager *sm;
    lmc_engine *e;
    lmc_layout_desc layout;
    uint32_t tokens[N_TOKENS];
    lmc_ipc_key key;
} fixture;

static fixture *fixture_make(const char *flags, const lmc_server_limits *limits)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->sm = sm_test_create(flags);
    lmc_error err;
    assert_int_equal(lmc_engine_create(f->sm, CHUNK, limits, 300 * 1000, &f->e, &err), LMC_OK);
    int64_t dims[2] = {CHUNK, BYTES_PER_TOKEN};
    assert_int_equal(lmc_layout_desc_make1(&f->layout, dims, 2, LMC_DTYPE_UINT8, &err), LMC_OK);
    for (size_t i = 0; i < N_TOKENS; i++)
        f->tokens[i] = (uint32_t)(1000 + i);
    f->key = (lmc_ipc_key){.model_name = "m",
                           .world_size = 1,
                           .worker_id = 0,
                           .token_ids = f->tokens,
                           .n_tokens = N_TOKENS,
                           .start = 0,
                           .end = N_TOKENS,
                           .request_id = "req-1",
                           .cache_salt = "",
                           .num_kv_readers = 1};
    return f;
}

static int setup(void **state)
{
    *state = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", NULL);
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_engine_destroy(f->e);
    lmc_sm_destroy(f->sm);
    free(f);
    return 0;
}

/* Poll the request's prefetch until it answers (the StorageManager's controller runs it). */
static size_t wait_hits(lmc_engine *e, const char *request_id)
{
    uint64_t deadline = lmc_mono_ms() + 5000;
    size_t hits = 0;
    lmc_session_state st;
    while ((st = lmc_engine_query(e, request_id, false, &hits)) == LMC_SESSION_PENDING) {
        if (lmc_mono_ms() > deadline)
            fail_msg("prefetch of '%s' still running after 5 s", request_id);
        lmc_sleep_ns(200 * 1000);
    }
    assert_int_equal(st, LMC_SESSION_READY);
    return hits;
}

/* A copy seam that records what it was asked to move. */
typedef struct recorder {
    size_t to, from;
    uint64_t bytes;
} recorder;

static lmc_status rec_to(void *ctx, size_t chunk, const lmc_memory_obj *obj, lmc_error *err)
{
    recorder *r = ctx;
    (void)chunk, (void)err;
    memset(obj->data, 0x5a, obj->size);
    r->to++;
    r->bytes += obj->size;
    return LMC_OK;
}

static lmc_status rec_from(void *ctx, size_t chunk, const lmc_memory_obj *obj, lmc_error *err)
{
    recorder *r = ctx;
    (void)chunk, (void)err;
    for (uint64_t i = 0; i < obj->size; i++)
        assert_int_equal(obj->data[i], 0x5a);
    r->from++;
    return LMC_OK;
}

static void test_lookup_of_an_empty_cache_finds_nothing(void **state)
{
    fixture *f = *state;
    lmc_error err;
    f->key.worker_id = -1;
    assert_int_equal(lmc_engine_lookup(f->e, &f->key, &f->layout, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "req-1"), 0);
    size_t hits = 9;
    assert_int_equal(lmc_engine_query(f->e, "nobody", false, &hits), LMC_SESSION_UNKNOWN);
    assert_int_equal(hits, 9);
    lmc_engine_end_session(f->e, "req-1");
    assert_int_equal(lmc_engine_query(f->e, "req-1", false, &hits), LMC_SESSION_UNKNOWN);
}

static void test_store_then_lookup_then_retrieve_without_a_payload(void **state)
{
    fixture *f = *state;
    lmc_error err;
    lmc_object_key *keys = NULL;
    size_t nk = 0;
    assert_int_equal(lmc_engine_worker_keys(f->e, "store", &f->key, &keys, &nk, &err), LMC_OK);
    assert_int_equal(nk, N_TOKENS / CHUNK);
    /* No copy seam: the objects are reserved and finished, nothing is copied. */
    assert_int_equal(lmc_engine_store(f->e, keys, nk, &f->layout, NULL, &err), LMC_OK);

    f->key.worker_id = -1;
    assert_int_equal(lmc_engine_lookup(f->e, &f->key, &f->layout, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "req-1"), N_TOKENS / CHUNK);

    bool ok = false;
    assert_int_equal(lmc_engine_retrieve(f->e, "req-1", keys, nk, 0, 0, NULL, &ok, &err), LMC_OK);
    assert_true(ok);
    lmc_engine_free_lookup_locks(f->e, "req-1");
    free(keys);

    lmc_server_counters c = lmc_counters_get(lmc_engine_counters(f->e));
    assert_int_equal(c.reserve_write, 1);
    assert_int_equal(c.finish_write, 1);
    assert_int_equal(c.submit_prefetch_task, 1);
    assert_int_equal(c.read_enter, 1);
    assert_int_equal(c.read_exit, 1);
    /* The retrieve released the one lock each key had; free_lookup_locks had nothing left to
     * release (it used to release the prefix a second time). */
    assert_int_equal(c.finish_read_prefetched, 1);
}

static void test_store_and_retrieve_move_bytes_through_the_copy_seam(void **state)
{
    fixture *f = *state;
    lmc_error err;
    lmc_object_key *keys = NULL;
    size_t nk = 0;
    assert_int_equal(lmc_engine_worker_keys(f->e, "store", &f->key, &keys, &nk, &err), LMC_OK);
    recorder r = {0};
    lmc_kv_copy copy = {.to_object = rec_to, .from_object = rec_from, .ctx = &r};
    assert_int_equal(lmc_engine_store(f->e, keys, nk, &f->layout, &copy, &err), LMC_OK);
    assert_int_equal(r.to, nk);
    assert_int_equal(r.bytes, nk * CHUNK * BYTES_PER_TOKEN);
    /* Stored again: every key is present, nothing is copied. */
    assert_int_equal(lmc_engine_store(f->e, keys, nk, &f->layout, &copy, &err), LMC_OK);
    assert_int_equal(r.to, nk);

    lmc_ipc_key lk = f->key;
    lk.worker_id = -1;
    assert_int_equal(lmc_engine_lookup(f->e, &lk, &f->layout, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "req-1"), nk);
    bool ok = false;
    assert_int_equal(lmc_engine_retrieve(f->e, "req-1", keys, nk, 0, 0, &copy, &ok, &err), LMC_OK);
    assert_true(ok);
    assert_int_equal(r.from, nk); /* rec_from checked every byte */
    lmc_engine_free_lookup_locks(f->e, "req-1");

    /* A worker's keys from a later start cover only the chunks from there. */
    f->key.start = 2 * CHUNK;
    lmc_object_key *tail = NULL;
    size_t nt = 0;
    assert_int_equal(lmc_engine_worker_keys(f->e, "store", &f->key, &tail, &nt, &err), LMC_OK);
    assert_int_equal(nt, nk - 2);
    assert_true(lmc_object_key_equal(&tail[0], &keys[2]));
    free(tail);
    free(keys);
}

static void test_a_repeated_lookup_replaces_the_session(void **state)
{
    fixture *f = *state;
    lmc_error err;
    lmc_object_key *keys = NULL;
    size_t nk = 0;
    assert_int_equal(lmc_engine_worker_keys(f->e, "store", &f->key, &keys, &nk, &err), LMC_OK);
    assert_int_equal(lmc_engine_store(f->e, keys, nk, &f->layout, NULL, &err), LMC_OK);
    free(keys);
    f->key.worker_id = -1;
    assert_int_equal(lmc_engine_lookup(f->e, &f->key, &f->layout, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "req-1"), N_TOKENS / CHUNK);
    /* The second lookup of the same id releases the first one's locks. */
    assert_int_equal(lmc_engine_lookup(f->e, &f->key, &f->layout, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "req-1"), N_TOKENS / CHUNK);
    lmc_engine_free_lookup_locks(f->e, "req-1");
    lmc_server_counters c = lmc_counters_get(lmc_engine_counters(f->e));
    assert_int_equal(c.submit_prefetch_task, 2);
    assert_int_equal(c.finish_read_prefetched, 2);
    /* No lock is left: a forced-free clear leaves L1 empty of locked bytes. */
    lmc_engine_clear(f->e, false);
    uint64_t locked, total;
    lmc_sm_l1_usage(f->sm, &locked, &total);
    assert_int_equal(locked, 0);
}

static void test_check_key_names_the_request(void **state)
{
    fixture *f = *state;
    lmc_error err;
    assert_int_equal(lmc_engine_check_key(f->e, "store", &f->key, &err), LMC_OK);
    f->key.end = CHUNK + 1;
    assert_int_equal(lmc_engine_check_key(f->e, "store", &f->key, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "store: [start, end) = [0, 17) is not chunk-aligned"));
}

static void test_counters_print_in_the_log_and_json_forms(void **state)
{
    (void)state;
    lmc_server_counters c = {.reserve_write = 1,
                             .finish_write = 2,
                             .submit_prefetch_task = 3,
                             .finish_read_prefetched = 4,
                             .read_enter = 5,
                             .read_exit = 6,
                             .requests = 7,
                             .errors = 8};
    char *line = lmc_counters_log_line(&c);
    assert_string_equal(line, "StorageManager calls: reserve_write=1 finish_write=2 "
                              "submit_prefetch_task=3 finish_read_prefetched=4 read_enter=5 "
                              "read_exit=6; requests=7 errors=8");
    free(line);
    char *json = lmc_counters_json_members(&c);
    assert_string_equal(json, "\"reserve_write\": 1, \"finish_write\": 2, "
                              "\"submit_prefetch_task\": 3, \"finish_read_prefetched\": 4, "
                              "\"read_prefetched_results.__enter__\": 5, "
                              "\"read_prefetched_results.__exit__\": 6, \"requests\": 7, "
                              "\"errors\": 8");
    free(json);
}

/* ---------------------------------------------------------------------- */
/* The operation table                                                     */
/* ---------------------------------------------------------------------- */

static void test_every_implemented_operation_has_its_legacy_name(void **state)
{
    (void)state;
    size_t implemented = 0;
    for (int64_t id = 1; id <= 34; id++) {
        const char *legacy = lmc_op_legacy_name(id);
        assert_non_null(legacy); /* every frozen id keeps its name */
        const char *name = lmc_op_name((lmc_op)id);
        if (name == NULL)
            continue;
        implemented++;
        assert_string_equal(name, legacy);
        /* The wire name decodes back to the id. */
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_str_with_body(&pk, name, strlen(name));
        assert_int_equal(lmc_op_from_frame(sb.data, sb.size), id);
        msgpack_sbuffer_destroy(&sb);
    }
    assert_int_equal(implemented, 13);
    assert_null(lmc_op_legacy_name(0));
    assert_null(lmc_op_legacy_name(35));
}

static void test_copies_and_waits_run_on_workers_and_the_rest_on_the_loop(void **state)
{
    (void)state;
    assert_false(lmc_op_on_loop_thread(LMC_OP_STORE));
    assert_false(lmc_op_on_loop_thread(LMC_OP_RETRIEVE));
    assert_false(lmc_op_on_loop_thread(LMC_OP_FREE_LOOKUP_LOCKS));
    assert_false(lmc_op_on_loop_thread(LMC_OP_INVALID));
    assert_false(lmc_op_on_loop_thread((lmc_op)3));   /* a frozen id not implemented */
    assert_false(lmc_op_on_loop_thread((lmc_op)999)); /* not an id at all */
    static const lmc_op loop[] = {
        LMC_OP_REGISTER_KV_CACHE,
        LMC_OP_UNREGISTER_KV_CACHE,
        LMC_OP_LOOKUP,
        LMC_OP_QUERY_PREFETCH_STATUS,
        LMC_OP_QUERY_PREFETCH_LOOKUP_HITS,
        LMC_OP_END_SESSION,
        LMC_OP_CLEAR,
        LMC_OP_GET_CHUNK_SIZE,
        LMC_OP_PING,
        LMC_OP_NOOP,
    };
    for (size_t k = 0; k < sizeof(loop) / sizeof(loop[0]); k++)
        assert_true(lmc_op_on_loop_thread(loop[k]));
}

static void test_handlers_answer_without_a_transport(void **state)
{
    fixture *f = *state;
    lmc_op_ctx ctx = {.engine = f->e, .regions = NULL};
    lmc_error err;
    msgpack_sbuffer out;
    msgpack_sbuffer_init(&out);
    lmc_request q = {.op = LMC_OP_GET_CHUNK_SIZE};
    assert_int_equal(lmc_op_execute(&ctx, &q, &out, &err), LMC_OK);
    assert_int_equal(out.size, 1);
    assert_int_equal((uint8_t)out.data[0], CHUNK); /* positive fixint */
    msgpack_sbuffer_clear(&out);
    q.op = LMC_OP_QUERY_PREFETCH_STATUS;
    q.request_id = "nobody";
    assert_int_equal(lmc_op_execute(&ctx, &q, &out, &err), LMC_OK);
    assert_int_equal((uint8_t)out.data[0], 0); /* 0: unknown request */
    msgpack_sbuffer_clear(&out);
    q.op = (lmc_op)3; /* register_q_cache: frozen, not implemented */
    assert_int_equal(lmc_op_execute(&ctx, &q, &out, &err), LMC_ERR_UNSUPPORTED);
    msgpack_sbuffer_destroy(&out);
}

/* ---------------------------------------------------------------------- */
/* Lock accounting: every lock a session takes is released exactly once    */
/* ---------------------------------------------------------------------- */

#define N_CHUNKS (N_TOKENS / CHUNK)

/* The key of one worker (rank) of world size ws, from chunk c0 on. */
static lmc_object_key *rank_keys(fixture *f, int64_t ws, int64_t rank, size_t c0, size_t *n)
{
    lmc_ipc_key k = f->key;
    k.world_size = ws;
    k.worker_id = rank;
    k.start = (int64_t)(c0 * CHUNK);
    lmc_object_key *keys = NULL;
    lmc_error err;
    assert_int_equal(lmc_engine_worker_keys(f->e, "store", &k, &keys, n, &err), LMC_OK);
    return keys;
}

/* Store every chunk of every rank of world size ws. */
static void store_all(fixture *f, int64_t ws)
{
    lmc_error err;
    for (int64_t r = 0; r < ws; r++) {
        size_t n;
        lmc_object_key *keys = rank_keys(f, ws, r, 0, &n);
        assert_int_equal(lmc_engine_store(f->e, keys, n, &f->layout, NULL, &err), LMC_OK);
        free(keys);
    }
}

static void lookup(fixture *f, const char *id, int64_t ws, int64_t readers)
{
    lmc_ipc_key k = f->key;
    k.world_size = ws;
    k.worker_id = -1;
    k.request_id = (char *)id;
    k.num_kv_readers = readers;
    lmc_error err;
    assert_int_equal(lmc_engine_lookup(f->e, &k, &f->layout, &err), LMC_OK);
}

/* retrieve chunks [c0, N_CHUNKS) of rank under request id; the server's verdict. */
static bool retrieve(fixture *f, const char *id, int64_t ws, int64_t rank, size_t c0)
{
    size_t n;
    lmc_object_key *keys = rank_keys(f, ws, rank, c0, &n);
    bool ok = true;
    lmc_error err;
    assert_int_equal(lmc_engine_retrieve(f->e, id, keys, n, c0, rank, NULL, &ok, &err), LMC_OK);
    free(keys);
    return ok;
}

/* The read locks on chunk c of rank (world size ws). */
static uint64_t locks_on(fixture *f, int64_t ws, int64_t rank, size_t c)
{
    size_t n;
    lmc_object_key *keys = rank_keys(f, ws, rank, c, &n);
    uint64_t count = lmc_sm_l1_read_lock_count(f->sm, &keys[0]);
    free(keys);
    return count;
}

/* Every chunk of every rank holds exactly `want` read locks. */
static void assert_locks(fixture *f, int64_t ws, uint64_t want, const char *when)
{
    for (int64_t r = 0; r < ws; r++) {
        for (size_t c = 0; c < N_CHUNKS; c++) {
            uint64_t got = locks_on(f, ws, r, c);
            if (got != want)
                fail_msg("%s: chunk %zu of rank %lld holds %llu read locks, expected %llu", when, c,
                         (long long)r, (unsigned long long)got, (unsigned long long)want);
        }
    }
}

static void test_retrieve_then_free_lookup_locks_keeps_another_request_s_lock(void **state)
{
    fixture *f = *state;
    store_all(f, 1);
    lookup(f, "a", 1, 1);
    lookup(f, "b", 1, 1); /* another request waiting on the same prefix */
    assert_int_equal(wait_hits(f->e, "a"), N_CHUNKS);
    assert_int_equal(wait_hits(f->e, "b"), N_CHUNKS);
    assert_locks(f, 1, 2, "after both lookups");
    assert_true(retrieve(f, "a", 1, 0, 0));
    assert_locks(f, 1, 1, "after a's retrieve");
    lmc_engine_free_lookup_locks(f->e, "a"); /* a holds nothing more: b's lock stays */
    assert_locks(f, 1, 1, "after a's free_lookup_locks");
    assert_true(retrieve(f, "b", 1, 0, 0));
    lmc_engine_end_session(f->e, "b");
    assert_locks(f, 1, 0, "after b ended");
}

static void test_a_lookup_reusing_the_request_id_releases_only_what_is_left(void **state)
{
    fixture *f = *state;
    store_all(f, 1);
    lookup(f, "bystander", 1, 1);
    lookup(f, "a", 1, 1);
    assert_int_equal(wait_hits(f->e, "a"), N_CHUNKS);
    assert_true(retrieve(f, "a", 1, 0, 0)); /* a's lock is released here, once */
    lookup(f, "a", 1, 1);                   /* replaces a: its first session holds nothing */
    assert_int_equal(wait_hits(f->e, "a"), N_CHUNKS);
    assert_locks(f, 1, 2, "after the second lookup of a");
    lmc_engine_end_session(f->e, "a");
    assert_locks(f, 1, 1, "after a ended");
    lmc_engine_end_session(f->e, "bystander");
    assert_locks(f, 1, 0, "after the bystander ended");
}

static void test_world_size_2_lifecycle_leaves_no_lock(void **state)
{
    fixture *f = *state;
    store_all(f, 2);
    /* docs/protocol.md's lifecycle as it read before: num_kv_readers = world size. */
    for (int64_t readers = 1; readers <= 2; readers++) {
        lookup(f, "ws2", 2, readers);
        assert_int_equal(wait_hits(f->e, "ws2"), N_CHUNKS);
        assert_locks(f, 2, (uint64_t)readers, "after the lookup");
        assert_true(retrieve(f, "ws2", 2, 0, 0));
        assert_true(retrieve(f, "ws2", 2, 1, 0));
        lmc_engine_end_session(f->e, "ws2");
        assert_locks(f, 2, 0, "after end_session");
    }
}

static void test_a_retrieve_without_the_session_s_lock_reads_and_releases_nothing(void **state)
{
    fixture *f = *state;
    store_all(f, 1);
    lookup(f, "a", 1, 1);
    assert_int_equal(wait_hits(f->e, "a"), N_CHUNKS);
    assert_false(retrieve(f, "nobody", 1, 0, 0)); /* no such session */
    assert_false(retrieve(f, "a", 2, 1, 0));      /* keys the session never looked up */
    assert_locks(f, 1, 1, "after refused retrieves");
    assert_true(retrieve(f, "a", 1, 0, 2));  /* chunks 2.. only */
    assert_false(retrieve(f, "a", 1, 0, 0)); /* 2 and 3 were read once already */
    assert_int_equal(locks_on(f, 1, 0, 0), 1);
    assert_int_equal(locks_on(f, 1, 0, 2), 0);
    lmc_engine_end_session(f->e, "a");
    assert_locks(f, 1, 0, "after end_session");
    assert_false(retrieve(f, "a", 1, 0, 0)); /* ended */
    lmc_server_counters c = lmc_counters_get(lmc_engine_counters(f->e));
    assert_int_equal(c.read_enter, 1); /* the refused ones never touched L1 */
}

/* A copy seam whose retrieve fails at chunk 1 (a region truncated under the copy). */
static lmc_status fail_from(void *ctx, size_t chunk, const lmc_memory_obj *obj, lmc_error *err)
{
    (void)ctx, (void)obj;
    return chunk == 1 ? lmc_error_set(err, LMC_ERR_IO, "the region shrank") : LMC_OK;
}

static void test_a_retrieve_whose_copy_fails_releases_what_it_claimed_once(void **state)
{
    fixture *f = *state;
    store_all(f, 1);
    lookup(f, "bystander", 1, 1);
    lookup(f, "a", 1, 2); /* two readers: two locks per key */
    assert_int_equal(wait_hits(f->e, "bystander"), N_CHUNKS);
    assert_int_equal(wait_hits(f->e, "a"), N_CHUNKS);
    assert_locks(f, 1, 3, "after the lookups");
    size_t n;
    lmc_object_key *keys = rank_keys(f, 1, 0, 0, &n);
    lmc_kv_copy failing = {.from_object = fail_from};
    bool ok = true;
    lmc_error err;
    assert_int_equal(lmc_engine_retrieve(f->e, "a", keys, n, 0, 0, &failing, &ok, &err),
                     LMC_ERR_IO);
    assert_false(ok);
    /* The claimed lock of each key went with the failed copy; the session keeps its other. */
    assert_locks(f, 1, 2, "after the failed retrieve");
    assert_true(retrieve(f, "a", 1, 0, 0));
    assert_false(retrieve(f, "a", 1, 0, 0)); /* both readers' locks are used */
    lmc_engine_free_lookup_locks(f->e, "a");
    assert_locks(f, 1, 1, "after free_lookup_locks: the bystander's lock stays");
    lmc_engine_end_session(f->e, "bystander");
    assert_locks(f, 1, 0, "after the bystander ended");
    free(keys);
}

/* One step of a session's end game. */
typedef enum step { RETRIEVE_0, RETRIEVE_1, FREE_LOCKS, END_SESSION } step;

static void run_order(fixture *f, int64_t ws, int64_t readers, const step *order, size_t n)
{
    char when[128];
    lookup(f, "bystander", ws, 1);
    lookup(f, "req", ws, readers);
    assert_int_equal(wait_hits(f->e, "bystander"), N_CHUNKS);
    assert_int_equal(wait_hits(f->e, "req"), N_CHUNKS);
    bool ended = false;
    for (size_t i = 0; i < n; i++) {
        snprintf(when, sizeof(when), "world size %lld, %lld readers, step %zu (%d)", (long long)ws,
                 (long long)readers, i, (int)order[i]);
        switch (order[i]) {
        case RETRIEVE_0:
        case RETRIEVE_1:
            /* A retrieve reads only while its session holds the locks. */
            if (retrieve(f, "req", ws, order[i] == RETRIEVE_0 ? 0 : 1, 0) == ended)
                fail_msg("%s: retrieve answered %s", when, ended ? "ok" : "not ok");
            break;
        case FREE_LOCKS:
            lmc_engine_free_lookup_locks(f->e, "req");
            ended = true;
            break;
        case END_SESSION:
            lmc_engine_end_session(f->e, "req");
            ended = true;
            break;
        }
        /* The bystander's lock is never taken by another request's release. */
        for (int64_t r = 0; r < ws; r++)
            for (size_t c = 0; c < N_CHUNKS; c++)
                if (locks_on(f, ws, r, c) < 1)
                    fail_msg("%s: chunk %zu of rank %lld lost the bystander's lock", when, c,
                             (long long)r);
    }
    snprintf(when, sizeof(when), "world size %lld, %lld readers, all steps", (long long)ws,
             (long long)readers);
    assert_locks(f, ws, 1, when);
    lmc_engine_end_session(f->e, "bystander");
    assert_locks(f, ws, 0, "after the bystander ended");
}

/* Every permutation of steps[k..n) after steps[0..k). */
static size_t permute(fixture *f, int64_t ws, int64_t readers, step *steps, size_t k, size_t n)
{
    if (k == n) {
        run_order(f, ws, readers, steps, n);
        return 1;
    }
    size_t runs = 0;
    for (size_t i = k; i < n; i++) {
        step t = steps[k];
        steps[k] = steps[i];
        steps[i] = t;
        runs += permute(f, ws, readers, steps, k + 1, n);
        steps[i] = steps[k];
        steps[k] = t;
    }
    return runs;
}

static void test_every_order_of_retrieve_free_and_end_releases_each_lock_once(void **state)
{
    fixture *f = *state;
    size_t runs = 0;
    for (int64_t ws = 1; ws <= 2; ws++) {
        store_all(f, ws);
        for (int64_t readers = 1; readers <= 2; readers++) {
            step ws1[] = {RETRIEVE_0, FREE_LOCKS, END_SESSION};
            step ws2[] = {RETRIEVE_0, RETRIEVE_1, FREE_LOCKS, END_SESSION};
            runs +=
                ws == 1 ? permute(f, ws, readers, ws1, 0, 3) : permute(f, ws, readers, ws2, 0, 4);
        }
    }
    assert_int_equal(runs, 2 * 6 + 2 * 24);
}

static void test_sessions_past_the_read_ttl_release_nothing(void **state)
{
    (void)state;
    fixture *f =
        fixture_make("--l1-size-gb 0.01 --eviction-policy LRU --l1-read-ttl-seconds 1", NULL);
    lmc_engine_destroy(f->e);
    lmc_error err;
    assert_int_equal(lmc_engine_create(f->sm, CHUNK, NULL, 1000, &f->e, &err), LMC_OK);
    store_all(f, 1);
    lookup(f, "old", 1, 1);
    assert_int_equal(wait_hits(f->e, "old"), N_CHUNKS);
    lmc_sleep_ns(1100ull * 1000 * 1000); /* old's locks expire */
    assert_locks(f, 1, 0, "after the read TTL");
    lookup(f, "new", 1, 1); /* locks afresh: a count of 1 that is new's alone */
    assert_int_equal(wait_hits(f->e, "new"), N_CHUNKS);
    assert_false(retrieve(f, "old", 1, 0, 0)); /* old may not claim expired locks */
    lmc_engine_end_session(f->e, "old");
    assert_locks(f, 1, 1, "after old ended");
    lmc_engine_end_session(f->e, "new");
    assert_locks(f, 1, 0, "after new ended");
    teardown((void **)&f);
}

/* ---------------------------------------------------------------------- */
/* A slow L2 never parks a caller                                          */
/* ---------------------------------------------------------------------- */

static void test_free_lookup_locks_of_a_slow_prefetch_returns_at_once(void **state)
{
    (void)state;
    fixture *f =
        fixture_make("--l1-size-gb 0.01 --eviction-policy LRU --l2-adapter "
                     "{\"type\":\"fault_inject\",\"delay_rate\":1,\"delay_ms\":1500,"
                     "\"inner\":{\"type\":\"mock\",\"max_size_gb\":0.01,\"mock_bandwidth_gb\":10}}",
                     NULL);
    /* Chunks 0 and 1 in L1; 2 and 3 go to the slow L2. */
    size_t n;
    lmc_object_key *keys = rank_keys(f, 1, 0, 0, &n);
    lmc_error err;
    assert_int_equal(lmc_engine_store(f->e, keys, 2, &f->layout, NULL, &err), LMC_OK);
    free(keys);
    assert_true(lmc_sm_wait_idle(f->sm, 10000)); /* their L2 copies (read-locked) are done */
    lookup(f, "slow", 1, 1);
    size_t hits;
    assert_int_equal(lmc_engine_query(f->e, "slow", false, &hits), LMC_SESSION_PENDING);
    assert_int_equal(locks_on(f, 1, 0, 0), 1);
    uint64_t t0 = lmc_mono_ms();
    lmc_engine_free_lookup_locks(f->e, "slow");
    uint64_t took = lmc_mono_ms() - t0;
    if (took > 200)
        fail_msg("free_lookup_locks took %llu ms behind a slow prefetch", (unsigned long long)took);
    assert_int_equal(lmc_engine_query(f->e, "slow", false, &hits), LMC_SESSION_UNKNOWN);
    /* The prefetch's locks go once it ends, collected by the poll (the server's timer). */
    uint64_t deadline = lmc_mono_ms() + 10000;
    while (lmc_engine_poll_draining(f->e) > 0 && lmc_mono_ms() < deadline)
        lmc_sleep_ns(20 * 1000 * 1000);
    assert_int_equal(lmc_engine_poll_draining(f->e), 0);
    assert_int_equal(locks_on(f, 1, 0, 0), 0);
    assert_int_equal(locks_on(f, 1, 0, 1), 0);
    size_t sessions, held;
    lmc_engine_session_usage(f->e, &sessions, &held);
    assert_int_equal(sessions, 0);
    assert_int_equal(held, 0);
    teardown((void **)&f);
}

/* ---------------------------------------------------------------------- */
/* Limits                                                                  */
/* ---------------------------------------------------------------------- */

static lmc_status try_lookup(fixture *f, const char *id, int64_t ws, const char *model,
                             const char *salt, lmc_error *err)
{
    lmc_ipc_key k = f->key;
    k.world_size = ws;
    k.worker_id = -1;
    k.request_id = (char *)id;
    k.model_name = (char *)model;
    k.cache_salt = (char *)salt;
    return lmc_engine_lookup(f->e, &k, &f->layout, err);
}

static void test_a_lookup_past_max_sessions_is_refused_until_one_ends(void **state)
{
    (void)state;
    lmc_server_limits l;
    lmc_server_limits_init(&l);
    l.max_sessions = 2;
    fixture *f = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", &l);
    lmc_error err;
    assert_int_equal(try_lookup(f, "s1", 1, "m", "", &err), LMC_OK);
    assert_int_equal(try_lookup(f, "s2", 1, "m", "", &err), LMC_OK);
    assert_int_equal(try_lookup(f, "s3", 1, "m", "", &err), LMC_ERR_BUSY);
    assert_non_null(strstr(err.msg, "lookup: 2 sessions are open, the limit (--max-sessions 2)"));
    lmc_engine_end_session(f->e, "s1");
    assert_int_equal(try_lookup(f, "s3", 1, "m", "", &err), LMC_OK);
    size_t sessions, keys;
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 2);
    assert_int_equal(keys, 2 * N_CHUNKS);
    teardown((void **)&f);
}

/*
 * The server answers a lookup between begin and finish (ops.h): begin
 * holds the session's room, so a lookup begun but not finished counts
 * against the limits; finish starts the session; cancel gives the room
 * back without starting one.
 */
static void test_a_begun_lookup_holds_its_room_until_finished_or_cancelled(void **state)
{
    (void)state;
    lmc_server_limits l;
    lmc_server_limits_init(&l);
    l.max_sessions = 1;
    fixture *f = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", &l);
    lmc_error err;
    lmc_ipc_key a = f->key, b = f->key;
    a.worker_id = b.worker_id = -1;
    a.request_id = "a";
    b.request_id = "b";
    lmc_lookup_job *ja = NULL, *jb = NULL;
    assert_int_equal(lmc_engine_lookup_begin(f->e, &a, &f->layout, &ja, &err), LMC_OK);
    assert_non_null(ja);
    size_t sessions, keys, hits = 7;
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 1);
    assert_int_equal(keys, N_CHUNKS);
    /* Not started yet: nothing to query, and no room for another. */
    assert_int_equal(lmc_engine_query(f->e, "a", false, &hits), LMC_SESSION_UNKNOWN);
    assert_int_equal(lmc_engine_lookup_begin(f->e, &b, &f->layout, &jb, &err), LMC_ERR_BUSY);
    assert_null(jb);
    assert_non_null(strstr(err.msg, "--max-sessions 1"));

    lmc_engine_lookup_cancel(f->e, ja);
    lmc_engine_lookup_cancel(f->e, NULL);
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 0);
    assert_int_equal(keys, 0);
    assert_int_equal(lmc_engine_query(f->e, "a", false, &hits), LMC_SESSION_UNKNOWN);

    assert_int_equal(lmc_engine_lookup_begin(f->e, &b, &f->layout, &jb, &err), LMC_OK);
    assert_int_equal(lmc_engine_lookup_finish(f->e, jb, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "b"), 0);
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 1);
    assert_int_equal(keys, N_CHUNKS);
    lmc_engine_end_session(f->e, "b");
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 0);
    assert_int_equal(keys, 0);

    /* begin's own checks: an end past the tokens is refused before any room is taken. */
    lmc_ipc_key c = a;
    c.end = (int64_t)c.n_tokens + CHUNK;
    assert_int_equal(lmc_engine_lookup_begin(f->e, &c, &f->layout, &ja, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "is past the"));
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 0);
    teardown((void **)&f);
}

static void test_lookups_past_max_session_keys_are_refused(void **state)
{
    (void)state;
    lmc_server_limits l;
    lmc_server_limits_init(&l);
    l.max_session_keys = 2 * N_CHUNKS;
    fixture *f = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", &l);
    lmc_error err;
    assert_int_equal(try_lookup(f, "w2", 2, "m", "", &err), LMC_OK); /* 4 chunks x 2 ranks */
    assert_int_equal(try_lookup(f, "w1", 1, "m", "", &err), LMC_ERR_BUSY);
    assert_non_null(strstr(err.msg, "--max-session-keys"));
    assert_int_equal(try_lookup(f, "w3", 3, "m", "", &err), LMC_ERR_INVALID); /* never fits */
    assert_non_null(strstr(err.msg, "lookup: 4 chunks x world size 3 = 12 keys, more than the 8"));
    lmc_engine_free_lookup_locks(f->e, "w2");
    assert_int_equal(try_lookup(f, "w1", 1, "m", "", &err), LMC_OK);
    teardown((void **)&f);
}

static void test_a_key_past_max_lookup_tokens_is_refused(void **state)
{
    (void)state;
    lmc_server_limits l;
    lmc_server_limits_init(&l);
    l.max_lookup_tokens = N_TOKENS - 1;
    fixture *f = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", &l);
    lmc_error err;
    assert_int_equal(lmc_engine_check_key(f->e, "lookup", &f->key, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "lookup: key.token_ids has 64 tokens, more than the 63 this "
                                 "server takes (--max-lookup-tokens)");
    f->key.n_tokens = N_TOKENS - CHUNK;
    f->key.end = N_TOKENS - CHUNK;
    assert_int_equal(lmc_engine_check_key(f->e, "lookup", &f->key, &err), LMC_OK);
    teardown((void **)&f);
}

static void test_new_salts_and_model_names_past_their_budget_are_refused(void **state)
{
    (void)state;
    lmc_server_limits l;
    lmc_server_limits_init(&l);
    l.max_cache_salts = 2;
    l.max_model_names = 1;
    fixture *f = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", &l);
    lmc_error err;
    /* Strings no other test interned: each costs the budget once. */
    assert_int_equal(try_lookup(f, "a", 1, "budget-model-1", "budget-salt-1", &err), LMC_OK);
    assert_int_equal(try_lookup(f, "b", 1, "budget-model-1", "budget-salt-2", &err), LMC_OK);
    assert_int_equal(try_lookup(f, "c", 1, "budget-model-1", "budget-salt-3", &err), LMC_ERR_BUSY);
    assert_string_equal(err.msg, "lookup: this cache_salt is new and the server already took 2 "
                                 "distinct ones, its limit (--max-cache-salts)");
    assert_null(lmc_intern_find("budget-salt-3", 13)); /* nothing was kept for it */
    /* Known ones (and no salt at all) cost nothing. */
    assert_int_equal(try_lookup(f, "c", 1, "budget-model-1", "budget-salt-1", &err), LMC_OK);
    assert_int_equal(try_lookup(f, "d", 1, "budget-model-1", "", &err), LMC_OK);
    assert_int_equal(try_lookup(f, "e", 1, "budget-model-2", "", &err), LMC_ERR_BUSY);
    assert_non_null(strstr(err.msg, "--max-model-names"));
    /* store and retrieve keys come through the same budget. */
    lmc_ipc_key k = f->key;
    k.model_name = "budget-model-3";
    lmc_object_key *keys = NULL;
    size_t n;
    assert_int_equal(lmc_engine_worker_keys(f->e, "store", &k, &keys, &n, &err), LMC_ERR_BUSY);
    assert_non_null(strstr(err.msg, "store: this model name is new"));
    assert_null(keys);
    teardown((void **)&f);
}

static void test_unused_sessions_end_after_the_session_ttl(void **state)
{
    (void)state;
    lmc_server_limits l;
    lmc_server_limits_init(&l);
    l.session_ttl_s = 1;
    fixture *f = fixture_make("--l1-size-gb 0.01 --eviction-policy LRU", &l);
    store_all(f, 1);
    lookup(f, "forgotten", 1, 1);
    assert_int_equal(wait_hits(f->e, "forgotten"), N_CHUNKS);
    assert_locks(f, 1, 1, "after the lookup");
    lmc_engine_expire_sessions(f->e); /* used just now: stays */
    size_t sessions, keys;
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 1);
    lmc_sleep_ns(1100ull * 1000 * 1000);
    lmc_engine_expire_sessions(f->e);
    lmc_engine_session_usage(f->e, &sessions, &keys);
    assert_int_equal(sessions, 0);
    assert_int_equal(keys, 0);
    assert_locks(f, 1, 0, "after the TTL sweep");
    teardown((void **)&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookup_of_an_empty_cache_finds_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_then_lookup_then_retrieve_without_a_payload,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_and_retrieve_move_bytes_through_the_copy_seam,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_repeated_lookup_replaces_the_session, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_check_key_names_the_request, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_retrieve_then_free_lookup_locks_keeps_another_request_s_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_lookup_reusing_the_request_id_releases_only_what_is_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_world_size_2_lifecycle_leaves_no_lock, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_retrieve_without_the_session_s_lock_reads_and_releases_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_every_order_of_retrieve_free_and_end_releases_each_lock_once, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_retrieve_whose_copy_fails_releases_what_it_claimed_once, setup, teardown),
        cmocka_unit_test(test_sessions_past_the_read_ttl_release_nothing),
        cmocka_unit_test(test_free_lookup_locks_of_a_slow_prefetch_returns_at_once),
        cmocka_unit_test(test_a_lookup_past_max_sessions_is_refused_until_one_ends),
        cmocka_unit_test(test_a_begun_lookup_holds_its_room_until_finished_or_cancelled),
        cmocka_unit_test(test_lookups_past_max_session_keys_are_refused),
        cmocka_unit_test(test_a_key_past_max_lookup_tokens_is_refused),
        cmocka_unit_test(test_new_salts_and_model_names_past_their_budget_are_refused),
        cmocka_unit_test(test_unused_sessions_end_after_the_session_ttl),
        cmocka_unit_test(test_counters_print_in_the_log_and_json_forms),
        cmocka_unit_test(test_every_implemented_operation_has_its_legacy_name),
        cmocka_unit_test(test_copies_and_waits_run_on_workers_and_the_rest_on_the_loop),
        cmocka_unit_test_setup_teardown(test_handlers_answer_without_a_transport, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
