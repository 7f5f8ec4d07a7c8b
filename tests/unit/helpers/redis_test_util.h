/*
 * redis_test_util.h -- a private redis-server for the tests of the "resp"
 * L2 adapter.
 *
 * One server per test process, a child started with
 *   redis-server --port P --bind 127.0.0.1 --save '' --appendonly no --daemonize no
 * on a free loopback port. It is killed and reaped by redis_test_stop, by
 * an atexit handler, and (PR_SET_PDEATHSIG) by the kernel if the test
 * process dies, so no server outlives its test.
 */
#ifndef LMC_TEST_REDIS_TEST_UTIL_H
#define LMC_TEST_REDIS_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Start the server on port (0: pick a free one) and wait up to 5 s until it
 * answers PING. False with a message in err (e.g. redis-server missing).
 */
bool redis_test_start(int port, char *err, size_t len);
/* SIGKILL the server and reap it (no-op when none runs). */
void redis_test_stop(void);
/* The port of the running (or last) server. */
int redis_test_port(void);
/* SIGSTOP / SIGCONT the server: it keeps its sockets but answers nothing. */
void redis_test_pause(bool paused);
/* FLUSHALL through a fresh connection; false when the server does not answer. */
bool redis_test_flushall(void);
/* The length of key's value (-1 when absent or the server does not answer). */
long long redis_test_strlen(const char *key);

#endif
