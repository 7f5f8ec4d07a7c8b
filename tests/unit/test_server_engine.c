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

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_error err;
    assert_int_equal(lmc_engine_create(f->sm, CHUNK, &f->e, &err), LMC_OK);
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
    *state = f;
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
    assert_int_equal(lmc_engine_worker_keys(f->e, &f->key, &keys, &nk, &err), LMC_OK);
    assert_int_equal(nk, N_TOKENS / CHUNK);
    /* No copy seam: the objects are reserved and finished, nothing is copied. */
    assert_int_equal(lmc_engine_store(f->e, keys, nk, &f->layout, NULL, &err), LMC_OK);

    f->key.worker_id = -1;
    assert_int_equal(lmc_engine_lookup(f->e, &f->key, &f->layout, &err), LMC_OK);
    assert_int_equal(wait_hits(f->e, "req-1"), N_TOKENS / CHUNK);

    bool ok = false;
    assert_int_equal(lmc_engine_retrieve(f->e, keys, nk, NULL, &ok, &err), LMC_OK);
    assert_true(ok);
    lmc_engine_free_lookup_locks(f->e, "req-1");
    free(keys);

    lmc_server_counters c = lmc_counters_get(lmc_engine_counters(f->e));
    assert_int_equal(c.reserve_write, 1);
    assert_int_equal(c.finish_write, 1);
    assert_int_equal(c.submit_prefetch_task, 1);
    assert_int_equal(c.read_enter, 1);
    assert_int_equal(c.read_exit, 1);
    /* The retrieve's own release, and free_lookup_locks' release of the lookup's prefix. */
    assert_int_equal(c.finish_read_prefetched, 2);
}

static void test_store_and_retrieve_move_bytes_through_the_copy_seam(void **state)
{
    fixture *f = *state;
    lmc_error err;
    lmc_object_key *keys = NULL;
    size_t nk = 0;
    assert_int_equal(lmc_engine_worker_keys(f->e, &f->key, &keys, &nk, &err), LMC_OK);
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
    assert_int_equal(lmc_engine_retrieve(f->e, keys, nk, &copy, &ok, &err), LMC_OK);
    assert_true(ok);
    assert_int_equal(r.from, nk); /* rec_from checked every byte */
    lmc_engine_free_lookup_locks(f->e, "req-1");

    /* A worker's keys from a later start cover only the chunks from there. */
    f->key.start = 2 * CHUNK;
    lmc_object_key *tail = NULL;
    size_t nt = 0;
    assert_int_equal(lmc_engine_worker_keys(f->e, &f->key, &tail, &nt, &err), LMC_OK);
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
    assert_int_equal(lmc_engine_worker_keys(f->e, &f->key, &keys, &nk, &err), LMC_OK);
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

static void test_check_aligned_names_the_request(void **state)
{
    fixture *f = *state;
    lmc_error err;
    assert_int_equal(lmc_engine_check_aligned(f->e, "store", &f->key, &err), LMC_OK);
    f->key.end = CHUNK + 1;
    assert_int_equal(lmc_engine_check_aligned(f->e, "store", &f->key, &err), LMC_ERR_INVALID);
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
        cmocka_unit_test_setup_teardown(test_check_aligned_names_the_request, setup, teardown),
        cmocka_unit_test(test_counters_print_in_the_log_and_json_forms),
        cmocka_unit_test(test_every_implemented_operation_has_its_legacy_name),
        cmocka_unit_test(test_copies_and_waits_run_on_workers_and_the_rest_on_the_loop),
        cmocka_unit_test_setup_teardown(test_handlers_answer_without_a_transport, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
