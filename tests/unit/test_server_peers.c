/*
 * test_server_peers.c -- the server's connections (server/peers.h) on a real
 * ROUTER over loopback TCP: a serial number per connection, the uid of the
 * process at the other end, a message that does not match its fd's
 * connection, and the news that a connection closed.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "server/peers.h"

#define NOBODY 65534

typedef struct fixture {
    void *ctx, *router;
    lmc_peers *peers;
    char endpoint[128];
    uint64_t gone[16];
    size_t n_gone;
    void *a, *b; /* the test's dealers, closed by teardown if a failed assertion left them */
} fixture;

static void on_gone(void *ud, uint64_t conn)
{
    fixture *f = ud;
    if (f->n_gone < 16)
        f->gone[f->n_gone++] = conn;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->ctx = zmq_ctx_new();
    f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
    lmc_error err;
    assert_int_equal(lmc_peers_create(f->ctx, f->router, on_gone, f, &f->peers, &err), LMC_OK);
    assert_int_equal(zmq_bind(f->router, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof(f->endpoint);
    assert_int_equal(zmq_getsockopt(f->router, ZMQ_LAST_ENDPOINT, f->endpoint, &len), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->a != NULL)
        zmq_close(f->a);
    if (f->b != NULL)
        zmq_close(f->b);
    lmc_peers_destroy(f->peers);
    zmq_close(f->router);
    zmq_ctx_term(f->ctx);
    free(f);
    return 0;
}

static void *dealer(fixture *f, void *ctx)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof(zero));
    assert_int_equal(zmq_connect(d, f->endpoint), 0);
    return d;
}

/* A message as the server reads one: [identity, uid, op]. */
typedef struct message {
    zmq_msg_t id, body;
    int fd;
} message;

static void receive(fixture *f, message *m)
{
    zmq_pollitem_t it = {f->router, 0, ZMQ_POLLIN, 0};
    assert_true(zmq_poll(&it, 1, 5000) == 1);
    zmq_msg_init(&m->id);
    zmq_msg_init(&m->body);
    assert_true(zmq_msg_recv(&m->id, f->router, 0) >= 0);
    assert_true(zmq_msg_more(&m->id));
    assert_true(zmq_msg_recv(&m->body, f->router, 0) >= 0);
    /* The ROUTER's identity frame has no fd; the frames after it do. */
    m->fd = zmq_msg_get(&m->body, ZMQ_SRCFD);
    int more = zmq_msg_more(&m->body);
    while (more) {
        zmq_msg_t rest;
        zmq_msg_init(&rest);
        zmq_msg_recv(&rest, f->router, 0);
        more = zmq_msg_more(&rest);
        zmq_msg_close(&rest);
    }
    lmc_peers_poll(f->peers);
}

static void message_close(message *m)
{
    zmq_msg_close(&m->id);
    zmq_msg_close(&m->body);
}

static lmc_peer identify(fixture *f, message *m, bool with_uid)
{
    return lmc_peers_identify(f->peers, m->fd, zmq_msg_data(&m->id), zmq_msg_size(&m->id),
                              with_uid);
}

static void wait_gone(fixture *f, size_t n)
{
    uint64_t deadline = lmc_mono_ms() + 5000;
    while (f->n_gone < n) {
        assert_true(lmc_mono_ms() < deadline);
        zmq_pollitem_t it = {lmc_peers_socket(f->peers), 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 100);
        lmc_peers_poll(f->peers);
    }
}

static void test_each_connection_has_its_serial_and_its_users_uid(void **state)
{
    fixture *f = *state;
    void *a = f->a = dealer(f, f->ctx), *b = f->b = dealer(f, f->ctx);
    /* One at a time: the ROUTER fair-queues, so m1 is a's only if b has not sent yet. */
    message m1, m2;
    zmq_send(a, "u", 1, ZMQ_SNDMORE);
    zmq_send(a, "op", 2, 0);
    receive(f, &m1);
    zmq_send(b, "u", 1, ZMQ_SNDMORE);
    zmq_send(b, "op", 2, 0);
    receive(f, &m2);
    lmc_peer p1 = identify(f, &m1, true), p2 = identify(f, &m2, false);
    assert_true(p1.conn != 0 && p2.conn != 0 && p1.conn != p2.conn);
    assert_int_equal(p1.uid, (int64_t)geteuid());
    assert_int_equal(p2.uid, -1); /* not asked for */
    assert_int_equal(lmc_peers_count(f->peers), 2);
    /* The same connection, asked again: the same serial, the uid cached. */
    lmc_peer again = identify(f, &m1, false);
    assert_int_equal(again.conn, p1.conn);
    assert_int_equal(again.uid, (int64_t)geteuid());

    /* A message whose routing id is not its fd's connection's belongs to none. */
    lmc_peer stale =
        lmc_peers_identify(f->peers, m1.fd, zmq_msg_data(&m2.id), zmq_msg_size(&m2.id), true);
    assert_int_equal(stale.conn, 0);
    assert_int_equal(lmc_peers_identify(f->peers, -1, "x", 1, true).conn, 0);
    assert_int_equal(lmc_peers_identify(f->peers, 100000, "x", 1, true).conn, 0);

    zmq_close(a);
    f->a = NULL;
    wait_gone(f, 1);
    assert_int_equal(f->gone[0], p1.conn);
    assert_int_equal(lmc_peers_count(f->peers), 1);
    /* Its fd no longer names it. */
    assert_int_equal(identify(f, &m1, false).conn, 0);
    zmq_close(b);
    f->b = NULL;
    wait_gone(f, 2);
    assert_int_equal(f->gone[1], p2.conn);
    message_close(&m1);
    message_close(&m2);
}

/*
 * The other user's client: this test binary again (exec'd, so that a fresh
 * process makes the ZMQ context, not a fork of a threaded one), as uid
 * 65534; it sends one message, then waits for stdin to close (or 30 s).
 */
static int dealer_as_nobody(const char *endpoint)
{
    alarm(30);
    if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
        return 2;
    void *ctx = zmq_ctx_new();
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof(zero));
    if (zmq_connect(d, endpoint) != 0)
        return 3;
    zmq_send(d, "u", 1, ZMQ_SNDMORE);
    zmq_send(d, "op", 2, 0);
    char c;
    while (read(0, &c, 1) > 0)
        ;
    zmq_close(d);
    zmq_ctx_term(ctx);
    return 0;
}

static void test_a_client_of_another_user_is_known_by_its_uid(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0) {
        skip(); /* needs a second uid */
        return;
    }
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(go[0], 0);
        close(go[0]);
        close(go[1]);
        char *args[] = {"test_server_peers", "--dealer-as-nobody", f->endpoint, NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    close(go[0]);
    message m;
    receive(f, &m);
    lmc_peer p = identify(f, &m, true);
    close(go[1]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(p.conn != 0);
    assert_int_equal(p.uid, NOBODY);
    wait_gone(f, 1);
    assert_int_equal(f->gone[0], p.conn);
    message_close(&m);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--dealer-as-nobody") == 0)
        return dealer_as_nobody(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_connection_has_its_serial_and_its_users_uid,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_client_of_another_user_is_known_by_its_uid, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
