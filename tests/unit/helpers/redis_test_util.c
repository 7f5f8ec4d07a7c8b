/*
 * redis_test_util.c -- a private redis-server child for tests (see
 * redis_test_util.h). Single-threaded: only the test's main thread calls it.
 */
#include "helpers/redis_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/net.h"

static pid_t g_pid = -1;
static int g_port;
static bool g_atexit;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path; *p != '\0';) {
        size_t n = strcspn(p, ":");
        snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, prog);
        if (access(buf, X_OK) == 0)
            return true;
        p += n;
        if (*p == ':')
            p++;
    }
    return false;
}

static redisContext *connect_port(int port)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c != NULL && c->err != 0) {
        redisFree(c);
        return NULL;
    }
    if (c != NULL)
        redisSetTimeout(c, tv);
    return c;
}

static bool ping(int port)
{
    redisContext *c = connect_port(port);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "PING");
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

static void at_exit(void)
{
    redis_test_stop();
}

static pid_t spawn(int port)
{
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* Child: die with the parent; keep the test's output clean. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    execlp("redis-server", "redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", (char *)NULL);
    _exit(127);
}

bool redis_test_start(int port, char *err, size_t len)
{
    if (!in_path("redis-server")) {
        snprintf(err, len,
                 "redis-server not found in PATH: the resp adapter tests need it "
                 "(scripts/install-deps installs redis-server)");
        return false;
    }
    if (!g_atexit) {
        atexit(at_exit);
        g_atexit = true;
    }
    redis_test_stop();
    for (int attempt = 0; attempt < 5; attempt++) {
        int p = port;
        lmc_error e;
        if (p <= 0 && lmc_net_free_loopback_port(&p, &e) != LMC_OK) {
            snprintf(err, len, "%s", e.msg);
            return false;
        }
        g_pid = spawn(p);
        if (g_pid < 0) {
            snprintf(err, len, "fork: %s", strerror(errno));
            return false;
        }
        g_port = p;
        for (int waited = 0; waited < 5000; waited += 20) {
            int status;
            if (waitpid(g_pid, &status, WNOHANG) == g_pid) {
                g_pid = -1;
                break; /* exited: port taken, or exec failed */
            }
            if (ping(p))
                return true;
            sleep_ms(20);
        }
        if (g_pid > 0) {
            redis_test_stop();
            snprintf(err, len, "redis-server on 127.0.0.1:%d did not answer PING within 5 s", p);
            return false;
        }
        if (port > 0)
            sleep_ms(100); /* the same port: give the old socket time to go */
    }
    snprintf(err, len, "redis-server exited at start (5 attempts; port %d)", g_port);
    return false;
}

void redis_test_stop(void)
{
    if (g_pid <= 0)
        return;
    kill(g_pid, SIGCONT);
    kill(g_pid, SIGKILL);
    while (waitpid(g_pid, NULL, 0) < 0 && errno == EINTR) {
    }
    g_pid = -1;
}

int redis_test_port(void)
{
    return g_port;
}

void redis_test_pause(bool paused)
{
    if (g_pid > 0)
        kill(g_pid, paused ? SIGSTOP : SIGCONT);
}

bool redis_test_flushall(void)
{
    redisContext *c = connect_port(g_port);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "FLUSHALL");
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

long long redis_test_strlen(const char *key)
{
    redisContext *c = connect_port(g_port);
    if (c == NULL)
        return -1;
    redisReply *r = redisCommand(c, "EXISTS %s", key);
    long long n = -1;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        freeReplyObject(r);
        r = redisCommand(c, "STRLEN %s", key);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER)
            n = r->integer;
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return n;
}
