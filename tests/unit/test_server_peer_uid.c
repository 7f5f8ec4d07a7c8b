/*
 * test_server_peer_uid.c -- the uid of the process at the other end of a
 * client connection (server/peer_uid.h), looked up on the fd a ZMQ_STREAM
 * socket reports for it (ZMQ_SRCFD), as the server does at a connection's
 * first register_kv_cache: this test's own uid, another user's, and none
 * for what is not a TCP connection.
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

#include "server/peer_uid.h"

#define NOBODY 65534

typedef struct fixture {
    void *ctx, *stream;
    char endpoint[128];
    void *dealer; /* closed by teardown if a failed assertion left it open */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->ctx = zmq_ctx_new();
    f->stream = zmq_socket(f->ctx, ZMQ_STREAM);
    int zero = 0;
    zmq_setsockopt(f->stream, ZMQ_LINGER, &zero, sizeof(zero));
    assert_int_equal(zmq_bind(f->stream, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof(f->endpoint);
    assert_int_equal(zmq_getsockopt(f->stream, ZMQ_LAST_ENDPOINT, f->endpoint, &len), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->dealer != NULL)
        zmq_close(f->dealer);
    zmq_close(f->stream);
    zmq_ctx_term(f->ctx);
    free(f);
    return 0;
}

/* The fd of the next connection the STREAM socket announces (its empty connect message). */
static int next_connection_fd(fixture *f)
{
    zmq_pollitem_t it = {f->stream, 0, ZMQ_POLLIN, 0};
    assert_true(zmq_poll(&it, 1, 5000) == 1);
    zmq_msg_t id, data;
    zmq_msg_init(&id);
    zmq_msg_init(&data);
    assert_true(zmq_msg_recv(&id, f->stream, 0) >= 0);
    assert_true(zmq_msg_more(&id));
    assert_true(zmq_msg_recv(&data, f->stream, 0) >= 0);
    assert_int_equal(zmq_msg_size(&data), 0); /* a connect notification */
    int fd = zmq_msg_get(&data, ZMQ_SRCFD);
    zmq_msg_close(&id);
    zmq_msg_close(&data);
    assert_true(fd >= 0);
    return fd;
}

static void test_a_local_client_is_known_by_its_uid(void **state)
{
    fixture *f = *state;
    f->dealer = zmq_socket(f->ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(f->dealer, ZMQ_LINGER, &zero, sizeof(zero));
    assert_int_equal(zmq_connect(f->dealer, f->endpoint), 0);
    int fd = next_connection_fd(f);
    const char *why = NULL;
    assert_int_equal(lmc_socket_peer_uid(fd, &why), (int64_t)geteuid());
}

static void test_what_is_not_a_tcp_connection_has_no_uid(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    const char *why = NULL;
    assert_int_equal(lmc_socket_peer_uid(p[0], &why), -1);
    assert_non_null(why);
    assert_int_equal(lmc_socket_peer_uid(-1, &why), -1);
    close(p[0]);
    close(p[1]);
}

/*
 * The other user's client: this test binary again (exec'd, so that a fresh
 * process makes the ZMQ context, not a fork of a threaded one), as uid
 * 65534; it connects, then waits for stdin to close (or 30 s).
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
        char *args[] = {"test_server_peer_uid", "--dealer-as-nobody", f->endpoint, NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    close(go[0]);
    int fd = next_connection_fd(f);
    const char *why = NULL;
    int64_t uid = lmc_socket_peer_uid(fd, &why);
    close(go[1]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(uid, NOBODY);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--dealer-as-nobody") == 0)
        return dealer_as_nobody(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_local_client_is_known_by_its_uid, setup, teardown),
        cmocka_unit_test(test_what_is_not_a_tcp_connection_has_no_uid),
        cmocka_unit_test_setup_teardown(test_a_client_of_another_user_is_known_by_its_uid, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
