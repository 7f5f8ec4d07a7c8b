/*
 * test_server_lookup_reply.c -- a lookup's reply leaves before its hashing
 * (ops.h: lmc_op_execute_early), and the next request sees its session all
 * the same: against an in-process server on a free loopback port, a
 * client's query right after each lookup finds every stored chunk, for a
 * lookup the loop thread answers and for one large enough to go to a
 * worker; a refused lookup is still answered with its error.
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/net.h"
#include "lmcache/client.h"
#include "server/server.h"

#define CHUNK 256
#define TPB 16
#define BPC (CHUNK / TPB)
/* 32 chunks: a 41 KB request, which the loop thread answers itself. */
#define LOOP_CHUNKS 32
/* 64 chunks: an 82 KB request, past the loop's 64 KiB: a worker's. */
#define WORKER_CHUNKS 64
#define MAX_SESSIONS 4

typedef struct fixture {
    lmc_server_config cfg;
    lmc_server *s;
    pthread_t thread;
    lmc_client *c;
    uint32_t tokens[WORKER_CHUNKS * CHUNK];
} fixture;

static void *serve(void *arg)
{
    lmc_server_run(arg);
    return NULL;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -1;
    lmc_log_set_level(LMC_LOG_ERROR);
    lmc_server_config_init(&f->cfg);
    char *argv[] = {"server", "--l1-size-gb", "0.05", "--eviction-policy", "LRU", NULL};
    lmc_error err;
    if (lmc_sm_config_parse_all(&f->cfg.sm, 5, argv, &err) != LMC_OK) {
        fprintf(stderr, "test_server_lookup_reply: %s\n", err.msg);
        return -1;
    }
    f->cfg.max_workers = 1;
    f->cfg.chunk_size = CHUNK;
    f->cfg.limits.max_sessions = MAX_SESSIONS;
    lmc_status st = LMC_ERR_IO;
    for (int attempt = 0; attempt < 5 && st != LMC_OK; attempt++)
        if (lmc_net_free_loopback_port(&f->cfg.port, &err) == LMC_OK)
            st = lmc_server_create(&f->cfg, &f->s, &err);
    if (st != LMC_OK || pthread_create(&f->thread, NULL, serve, f->s) != 0) {
        fprintf(stderr, "test_server_lookup_reply: cannot start a server: %s\n", err.msg);
        return -1;
    }
    lmc_client_config cc;
    lmc_client_config_init(&cc);
    cc.port = f->cfg.port;
    cc.timeout_ms = 10000;
    cc.model_name = "test-model";
    cc.instance_id = (int64_t)getpid();
    cc.num_blocks = WORKER_CHUNKS * BPC;
    cc.tokens_per_block = TPB;
    cc.bytes_per_token = 8;
    if (lmc_client_create(&cc, &f->c, &err) != LMC_OK) {
        fprintf(stderr, "test_server_lookup_reply: %s\n", err.msg);
        return -1;
    }
    for (size_t t = 0; t < WORKER_CHUNKS * CHUNK; t++)
        f->tokens[t] =
            (uint32_t)(t * 2654435761u); /* mostly 32-bit ids, as a large vocabulary has */
    /* Every chunk of the longest prompt is stored: a lookup of its first n chunks hits all n. */
    int64_t *ids = malloc(WORKER_CHUNKS * BPC * sizeof(*ids));
    if (ids == NULL)
        return -1;
    for (int64_t i = 0; i < WORKER_CHUNKS * BPC; i++)
        ids[i] = i;
    bool ok = false;
    st = lmc_client_store(f->c, "store", f->tokens, WORKER_CHUNKS * CHUNK, 0, WORKER_CHUNKS * CHUNK,
                          NULL, ids, WORKER_CHUNKS * BPC, &ok, &err);
    free(ids);
    if (st != LMC_OK || !ok) {
        fprintf(stderr, "test_server_lookup_reply: store: %s\n", st != LMC_OK ? err.msg : "not ok");
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_client_destroy(f->c);
    lmc_server_stop(f->s);
    pthread_join(f->thread, NULL);
    lmc_server_destroy(f->s);
    lmc_server_config_free(&f->cfg);
    free(f);
    return 0;
}

/*
 * Lookups of n chunks, each followed at once by its first query: an
 * unknown request would read 0, a hashing not yet done nil (polled).
 */
static void lookups_then_queries_find_every_chunk(fixture *f, size_t chunks)
{
    lmc_error err;
    for (int i = 0; i < 20; i++) {
        char rid[32];
        snprintf(rid, sizeof(rid), "lk-%zu-%d", chunks, i);
        size_t hits = 0;
        assert_int_equal(lmc_client_lookup(f->c, rid, f->tokens, chunks * CHUNK, chunks * CHUNK,
                                           NULL, &hits, &err),
                         LMC_OK);
        assert_int_equal(hits, chunks);
        assert_int_equal(lmc_client_free_lookup_locks(f->c, rid, f->tokens, chunks * CHUNK,
                                                      chunks * CHUNK, NULL, &err),
                         LMC_OK);
    }
    lmc_server_counters n = lmc_server_get_counters(f->s);
    assert_int_equal(n.errors, 0);
}

static void test_the_query_after_a_loop_thread_lookup_sees_its_session(void **state)
{
    lookups_then_queries_find_every_chunk(*state, LOOP_CHUNKS);
}

static void test_the_query_after_a_worker_lookup_sees_its_session(void **state)
{
    lookups_then_queries_find_every_chunk(*state, WORKER_CHUNKS);
}

/* The checks run before the reply: a lookup past --max-sessions gets its error, not nil. */
static void test_a_lookup_past_the_session_limit_is_answered_with_its_error(void **state)
{
    fixture *f = *state;
    lmc_error err;
    char rid[32];
    for (int i = 0; i < MAX_SESSIONS; i++) {
        snprintf(rid, sizeof(rid), "open-%d", i);
        assert_int_equal(lmc_client_lookup_submit(f->c, rid, f->tokens, CHUNK, CHUNK, NULL, &err),
                         LMC_OK);
    }
    assert_int_not_equal(
        lmc_client_lookup_submit(f->c, "one-too-many", f->tokens, CHUNK, CHUNK, NULL, &err),
        LMC_OK);
    assert_non_null(strstr(err.msg, "--max-sessions 4"));
    for (int i = 0; i < MAX_SESSIONS; i++) {
        snprintf(rid, sizeof(rid), "open-%d", i);
        assert_int_equal(
            lmc_client_free_lookup_locks(f->c, rid, f->tokens, CHUNK, CHUNK, NULL, &err), LMC_OK);
    }
    lmc_server_counters n = lmc_server_get_counters(f->s);
    assert_int_equal(n.errors, 1);
    assert_int_equal(n.submit_prefetch_task, MAX_SESSIONS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_the_query_after_a_loop_thread_lookup_sees_its_session,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_query_after_a_worker_lookup_sees_its_session,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_lookup_past_the_session_limit_is_answered_with_its_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
