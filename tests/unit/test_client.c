/*
 * test_client.c -- the client (src/client/client.c) reading what a
 * server sends back: a fake server (a ZMQ ROUTER on a thread) answers each
 * operation with bytes the test chooses, well-formed or hostile. The reply
 * decoder is the bounds-checked reader: a declared count larger than the
 * reply is refused without allocating (under ASan a 64 GiB request would
 * abort), error replies give their message, and mistyped responses name
 * what was found.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

#include "core/net.h"
#include "lmcache/client.h"
#include "server/protocol.h"

#define MAX_OP 35

typedef struct reply_bytes {
    const char *p;
    size_t n;
} reply_bytes;

typedef struct fake_server {
    void *ctx, *router;
    int port;
    pthread_t thread;
    atomic_bool stop;
    /* The response frame per operation id; a later poll may switch it (next[]). */
    reply_bytes resp[MAX_OP];
    reply_bytes next[MAX_OP];
    atomic_int calls[MAX_OP];
} fake_server;

#define BYTES(lit) ((reply_bytes){(lit), sizeof(lit) - 1})

static void *serve(void *arg)
{
    fake_server *f = arg;
    while (!atomic_load(&f->stop)) {
        zmq_pollitem_t it = {.socket = f->router, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 20) <= 0)
            continue;
        zmq_msg_t parts[16];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_init(&parts[n < 15 ? n : 15]);
            zmq_msg_recv(&parts[n < 15 ? n : 15], f->router, 0);
            more = zmq_msg_more(&parts[n < 15 ? n : 15]);
            if (n < 15)
                n++;
            else
                zmq_msg_close(&parts[15]);
        }
        if (n >= 3) {
            lmc_op op = lmc_op_from_frame(zmq_msg_data(&parts[2]), zmq_msg_size(&parts[2]));
            reply_bytes r = op > 0 && op < MAX_OP ? f->resp[op] : BYTES("\xc0");
            if (op > 0 && op < MAX_OP && atomic_fetch_add(&f->calls[op], 1) >= 0 &&
                f->next[op].p != NULL)
                f->resp[op] = f->next[op];
            for (int i = 0; i < 3; i++)
                zmq_send(f->router, zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i]), ZMQ_SNDMORE);
            zmq_send(f->router, r.p, r.n, 0);
        }
        for (int i = 0; i < n; i++)
            zmq_msg_close(&parts[i]);
    }
    return NULL;
}

static int setup(void **state)
{
    fake_server *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->resp[LMC_OP_GET_CHUNK_SIZE] = BYTES("\x10");
    f->resp[LMC_OP_REGISTER_KV_CACHE] = BYTES("\xc0");
    f->resp[LMC_OP_UNREGISTER_KV_CACHE] = BYTES("\xc0");
    f->resp[LMC_OP_PING] = BYTES("\xc3");
    f->resp[LMC_OP_LOOKUP] = BYTES("\xc0");
    f->ctx = zmq_ctx_new();
    f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(f->router, ZMQ_LINGER, &zero, sizeof(zero));
    char ep[64];
    for (int tries = 0;; tries++) {
        assert_int_equal(lmc_net_free_loopback_port(&f->port, NULL), LMC_OK);
        snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", f->port);
        if (zmq_bind(f->router, ep) == 0)
            break;
        assert_true(tries < 20);
    }
    assert_int_equal(pthread_create(&f->thread, NULL, serve, f), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fake_server *f = *state;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    zmq_close(f->router);
    zmq_ctx_term(f->ctx);
    free(f);
    return 0;
}

static lmc_client *connect_client(fake_server *f)
{
    lmc_client_config cfg;
    lmc_client_config_init(&cfg);
    cfg.port = f->port;
    cfg.timeout_ms = 3000;
    cfg.num_blocks = 4;
    lmc_client *c = NULL;
    lmc_error err;
    if (lmc_client_create(&cfg, &c, &err) != LMC_OK)
        fail_msg("client: %s", err.msg);
    assert_int_equal(lmc_client_chunk_size(c), 16);
    return c;
}

static void expect_error(lmc_status got, lmc_status want, const lmc_error *err, const char *msg)
{
    assert_int_equal(got, want);
    if (strstr(err->msg, msg) == NULL)
        fail_msg("message '%s' does not contain '%s'", err->msg, msg);
}

static void test_well_formed_replies_are_read(void **state)
{
    fake_server *f = *state;
    lmc_client *c = connect_client(f);
    lmc_error err;
    assert_int_equal(lmc_client_ping(c, &err), LMC_OK);
    /* lookup: submitted, then nil (still running) once, then 3 chunks. */
    f->resp[LMC_OP_LOOKUP] = BYTES("\xc0");
    f->resp[LMC_OP_QUERY_PREFETCH_STATUS] = BYTES("\xc0");
    f->next[LMC_OP_QUERY_PREFETCH_STATUS] = BYTES("\x03");
    uint32_t tokens[32] = {0};
    size_t hits = 0;
    assert_int_equal(lmc_client_lookup(c, "r", tokens, 32, 32, NULL, &hits, &err), LMC_OK);
    assert_int_equal(hits, 3);
    assert_int_equal(atomic_load(&f->calls[LMC_OP_QUERY_PREFETCH_STATUS]), 2);
    /* store: [bytes, bool]. */
    f->resp[LMC_OP_STORE] = BYTES("\x92\xc4\x00\xc3");
    int64_t blocks[2] = {0, 1};
    bool ok = false;
    assert_int_equal(lmc_client_store(c, "r", tokens, 32, 0, 32, NULL, blocks, 2, &ok, &err),
                     LMC_OK);
    assert_true(ok);
    f->resp[LMC_OP_RETRIEVE] = BYTES("\x92\xc4\x00\xc2");
    assert_int_equal(lmc_client_retrieve(c, "r", tokens, 32, 0, 32, NULL, blocks, 2, &ok, &err),
                     LMC_OK);
    assert_false(ok);
    lmc_client_destroy(c);
}

static void test_an_error_reply_gives_its_message(void **state)
{
    fake_server *f = *state;
    lmc_client *c = connect_client(f);
    lmc_error err;
    f->resp[LMC_OP_PING] = BYTES("\x81\xa5"
                                 "error\xa4"
                                 "boom");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_INVALID, &err, "ping: server error: boom");
    /* Not a str: still an error reply. */
    f->resp[LMC_OP_PING] = BYTES("\x81\xa5"
                                 "error\x07");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_INVALID, &err,
                 "ping: server error: (error reply without a message)");
    /* Other pairs first, one with a container as its key: skipped whole. */
    f->resp[LMC_OP_PING] = BYTES("\x82\x91\x01\x02\xa5"
                                 "error\xa1x");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_INVALID, &err, "ping: server error: x");
    /* A map without "error" is not an error reply (and not what ping expects). */
    f->resp[LMC_OP_PING] = BYTES("\x81\xa1k\xc3");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_FORMAT, &err, "ping: expected true, got map");
    f->resp[LMC_OP_PING] = BYTES("\xc3");
    lmc_client_destroy(c);
}

static void test_hostile_or_broken_replies_are_refused_without_allocating(void **state)
{
    fake_server *f = *state;
    lmc_client *c = connect_client(f);
    lmc_error err;
    /* An array of 2^32-1 items in 5 bytes: msgpack-c would ask for 64 GiB. */
    f->resp[LMC_OP_PING] = BYTES("\xdd\xff\xff\xff\xff");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_FORMAT, &err,
                 "ping: the reply's response is not msgpack");
    f->resp[LMC_OP_PING] = BYTES("\xdb\xff\xff\xff\xff"
                                 "abc"); /* str longer than the reply */
    expect_error(lmc_client_ping(c, &err), LMC_ERR_FORMAT, &err, "not msgpack");
    f->resp[LMC_OP_PING] = BYTES("\xc1");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_FORMAT, &err, "not msgpack");
    f->resp[LMC_OP_PING] = BYTES("");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_FORMAT, &err, "not msgpack");
    f->resp[LMC_OP_PING] = BYTES("\xc2");
    expect_error(lmc_client_ping(c, &err), LMC_ERR_FORMAT, &err, "ping: expected true, got bool");
    /* A transfer reply of the wrong shape names what came. */
    uint32_t tokens[16] = {0};
    int64_t blocks[1] = {0};
    bool ok;
    f->resp[LMC_OP_STORE] = BYTES("\x91\xc3");
    expect_error(lmc_client_store(c, "r", tokens, 16, 0, 16, NULL, blocks, 1, &ok, &err),
                 LMC_ERR_FORMAT, &err, "store: expected [bytes, bool], got array");
    f->resp[LMC_OP_STORE] = BYTES("\x92\xc4\x00\x01");
    expect_error(lmc_client_store(c, "r", tokens, 16, 0, 16, NULL, blocks, 1, &ok, &err),
                 LMC_ERR_FORMAT, &err, "store: expected [bytes, bool], got array");
    f->resp[LMC_OP_QUERY_PREFETCH_STATUS] = BYTES("\xa1x");
    size_t hits;
    expect_error(lmc_client_lookup(c, "r", tokens, 16, 16, NULL, &hits, &err), LMC_ERR_FORMAT, &err,
                 "query_prefetch_status: expected an int or nil, got str");
    f->resp[LMC_OP_PING] = BYTES("\xc3");
    lmc_client_destroy(c);
}

static void test_raw_calls_report_error_replies(void **state)
{
    fake_server *f = *state;
    lmc_client *c = connect_client(f);
    lmc_error err;
    msgpack_sbuffer uid, op;
    msgpack_sbuffer_init(&uid);
    msgpack_sbuffer_init(&op);
    lmc_request_encode_uid_op(&uid, &op, 99, LMC_OP_PING);
    const void *frames[2] = {uid.data, op.data};
    size_t lens[2] = {uid.size, op.size};
    f->resp[LMC_OP_PING] = BYTES("\x81\xa5"
                                 "error\xa2no");
    void *resp = NULL;
    size_t n = 0;
    expect_error(lmc_client_call_raw(c, frames, lens, 2, &resp, &n, &err), LMC_ERR_INVALID, &err,
                 "server error: no");
    assert_int_equal(n, 10);
    free(resp);
    /* Undecodable bytes come back as they are, with no error. */
    f->resp[LMC_OP_PING] = BYTES("\xdd\xff\xff\xff\xff");
    assert_int_equal(lmc_client_call_raw(c, frames, lens, 2, &resp, &n, &err), LMC_OK);
    assert_int_equal(n, 5);
    free(resp);
    msgpack_sbuffer_destroy(&uid);
    msgpack_sbuffer_destroy(&op);
    f->resp[LMC_OP_PING] = BYTES("\xc3");
    lmc_client_destroy(c);
}

/*
 * Pids repeat, and /dev/shm may be shared with other containers: objects
 * left under this pid's names by an earlier process (one killed before it
 * registered) do not stop a client, and the client leaves no name behind.
 * The names planted are the ones this pid used before they had a random part.
 */
static int count_own_objects(void)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "lmcache-client-%ld-", (long)getpid());
    DIR *d = opendir("/dev/shm");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void test_a_region_name_left_behind_does_not_block_a_client(void **state)
{
    fake_server *f = *state;
    enum { PLANTED = 16 };
    char names[PLANTED][64];
    int before = count_own_objects();
    for (int i = 0; i < PLANTED; i++) {
        snprintf(names[i], sizeof(names[i]), "/lmcache-client-%ld-%d", (long)getpid(), i);
        int fd = shm_open(names[i], O_CREAT | O_RDWR, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    assert_int_equal(count_own_objects(), before + PLANTED);
    for (int i = 0; i < 4; i++) {
        lmc_client *c = connect_client(f);
        lmc_error err;
        assert_int_equal(lmc_client_ping(c, &err), LMC_OK);
        /* Registered: its own name is gone already. */
        assert_int_equal(count_own_objects(), before + PLANTED);
        lmc_client_destroy(c);
    }
    for (int i = 0; i < PLANTED; i++)
        assert_int_equal(shm_unlink(names[i]), 0);
    assert_int_equal(count_own_objects(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_well_formed_replies_are_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_error_reply_gives_its_message, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_hostile_or_broken_replies_are_refused_without_allocating, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_calls_report_error_replies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_region_name_left_behind_does_not_block_a_client,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
