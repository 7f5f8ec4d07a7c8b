/*
 * test_loadgen.c -- the `lmcache bench server` load generator
 * (src/client/loadgen.h) driven as a library, against an in-process
 * server on a free loopback port: a verified run, the hits of a multi-round
 * chat, cancellation, and the set-up errors.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "client/loadgen.h"
#include "core/log.h"
#include "core/net.h"
#include "server/server.h"

typedef struct fixture {
    lmc_server_config cfg;
    lmc_server *s;
    pthread_t thread;
} fixture;

static void *serve(void *arg)
{
    lmc_server_run(arg);
    return NULL;
}

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof(f));
    lmc_log_set_level(LMC_LOG_WARNING);
    lmc_server_config_init(&f.cfg);
    char *argv[] = {"server", "--l1-size-gb", "0.05", "--eviction-policy", "LRU", NULL};
    lmc_error err;
    if (lmc_sm_config_parse_all(&f.cfg.sm, 5, argv, &err) != LMC_OK) {
        fprintf(stderr, "test_loadgen: %s\n", err.msg);
        return -1;
    }
    f.cfg.max_workers = 2;
    /* The port can be taken between choosing and binding it: try a few. */
    lmc_status st = LMC_ERR_IO;
    for (int attempt = 0; attempt < 5 && st != LMC_OK; attempt++)
        if (lmc_net_free_loopback_port(&f.cfg.port, &err) == LMC_OK)
            st = lmc_server_create(&f.cfg, &f.s, &err);
    if (st != LMC_OK || pthread_create(&f.thread, NULL, serve, f.s) != 0) {
        fprintf(stderr, "test_loadgen: cannot start a server: %s\n", err.msg);
        return -1;
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_server_stop(f->s);
    pthread_join(f->thread, NULL);
    lmc_server_destroy(f->s);
    lmc_server_config_free(&f->cfg);
    return 0;
}

static lmc_loadgen_options options(const fixture *f)
{
    lmc_loadgen_options o;
    lmc_loadgen_options_init(&o);
    o.port = f->cfg.port;
    o.time_scale = 0; /* as fast as it goes */
    o.blocks = 1024;
    o.bytes_per_token = 16;
    o.timeout_ms = 10000;
    return o;
}

/* A chat of users x rounds with short turns, so a request is a few chunks. */
static lmc_workload *chat(uint32_t users, uint32_t rounds, uint64_t seed)
{
    lmc_chat_config c;
    lmc_chat_config_init(&c);
    c.users = users;
    c.rounds = rounds;
    c.groups = 1;
    c.system_len = 512;
    c.seed = seed;
    lmc_workload *wl = NULL;
    assert_int_equal(lmc_workload_chat(&c, 0, &wl, NULL), LMC_OK);
    return wl;
}

static void test_run_stores_then_retrieves_and_verifies_every_chunk(void **state)
{
    fixture *f = *state;
    lmc_loadgen_options o = options(f);
    o.concurrency = 2;
    lmc_workload *wl = chat(2, 3, 11);
    lmc_loadgen_result r;
    lmc_error err;
    assert_int_equal(lmc_loadgen_run(&o, wl, &r, &err), LMC_OK);
    assert_int_equal(r.chunk_size, f->cfg.chunk_size);
    assert_int_equal(r.total.requests, lmc_workload_count(wl));
    assert_int_equal(r.total.errors, 0);
    assert_int_equal(r.total.corrupt, 0);
    assert_string_equal(r.first_error, "");
    assert_false(r.cancelled);
    /* Later rounds repeat the conversation so far: their prefix hits. */
    assert_true(r.total.hit_chunks > 0);
    assert_true(r.total.hit_chunks < r.total.chunks);
    uint64_t chunk_bytes = (uint64_t)r.chunk_size * (uint64_t)o.bytes_per_token;
    assert_int_equal(r.total.bytes_retrieved, r.total.hit_chunks * chunk_bytes);
    assert_int_equal(r.total.bytes_stored, (r.total.chunks - r.total.hit_chunks) * chunk_bytes);
    assert_int_equal(r.op[LMC_LOADGEN_LOOKUP].n, r.total.requests);
    assert_int_equal(r.op[LMC_LOADGEN_END_SESSION].n, r.total.requests);
    assert_true(r.op[LMC_LOADGEN_LOOKUP].p50_ms <= r.op[LMC_LOADGEN_LOOKUP].p99_ms);
    assert_true(r.op[LMC_LOADGEN_LOOKUP].p99_ms <= r.op[LMC_LOADGEN_LOOKUP].max_ms);
    assert_int_equal(r.lateness.n, 0); /* not paced */

    /* The same workload again: every chunk is in L1 now. */
    assert_int_equal(lmc_loadgen_run(&o, wl, &r, &err), LMC_OK);
    assert_int_equal(r.total.errors, 0);
    assert_int_equal(r.total.corrupt, 0);
    assert_int_equal(r.total.hit_chunks, r.total.chunks);
    assert_int_equal(r.op[LMC_LOADGEN_STORE].n, 0);
    lmc_workload_destroy(wl);
}

static void test_paced_run_measures_lateness_per_request(void **state)
{
    fixture *f = *state;
    lmc_loadgen_options o = options(f);
    o.time_scale = 1.0;
    lmc_workload *wl = chat(1, 2, 12);
    lmc_loadgen_result r;
    assert_int_equal(lmc_loadgen_run(&o, wl, &r, NULL), LMC_OK);
    assert_int_equal(r.total.errors, 0);
    assert_int_equal(r.lateness.n, lmc_workload_count(wl));
    lmc_workload_destroy(wl);
}

static void test_cancel_set_before_the_run_starts_no_request(void **state)
{
    fixture *f = *state;
    lmc_loadgen_options o = options(f);
    atomic_bool cancel;
    atomic_init(&cancel, true);
    o.cancel = &cancel;
    lmc_workload *wl = chat(2, 2, 13);
    lmc_loadgen_result r;
    assert_int_equal(lmc_loadgen_run(&o, wl, &r, NULL), LMC_OK);
    assert_true(r.cancelled);
    assert_int_equal(r.total.requests, 0);
    assert_int_equal(r.op[LMC_LOADGEN_LOOKUP].n, 0);
    lmc_workload_destroy(wl);
}

static void test_a_region_smaller_than_one_chunk_is_refused(void **state)
{
    fixture *f = *state;
    lmc_loadgen_options o = options(f);
    o.blocks = 3;
    lmc_workload *wl = chat(1, 1, 14);
    lmc_loadgen_result r;
    lmc_error err;
    assert_int_equal(lmc_loadgen_run(&o, wl, &r, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--blocks 3 is less than one chunk (16 blocks of 16 tokens)");
    lmc_workload_destroy(wl);
}

static void test_no_server_fails_to_start_with_a_message(void **state)
{
    (void)state;
    lmc_loadgen_options o;
    lmc_loadgen_options_init(&o);
    assert_int_equal(lmc_net_free_loopback_port(&o.port, NULL), LMC_OK); /* nobody listens */
    o.timeout_ms = 200;
    lmc_workload *wl = chat(1, 1, 15);
    lmc_loadgen_result r;
    lmc_error err;
    memset(&err, 0, sizeof(err));
    assert_int_not_equal(lmc_loadgen_run(&o, wl, &r, &err), LMC_OK);
    assert_non_null(strstr(err.msg, "cannot reach lmcache server"));
    lmc_workload_destroy(wl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_stores_then_retrieves_and_verifies_every_chunk),
        cmocka_unit_test(test_paced_run_measures_lateness_per_request),
        cmocka_unit_test(test_cancel_set_before_the_run_starts_no_request),
        cmocka_unit_test(test_a_region_smaller_than_one_chunk_is_refused),
        cmocka_unit_test(test_no_server_fails_to_start_with_a_message),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
