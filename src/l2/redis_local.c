/*
 * redis_local.c -- redis-server children and a local Redis Cluster (see
 * redis_local.h).
 *
 * Owns: the children it forks and a cluster's temporary directory.
 * Threads: none of its own; an object belongs to the thread that started
 * it (PR_SET_PDEATHSIG ties the children to that thread).
 */
#include "l2/redis_local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/net.h"

#define START_ATTEMPTS 5
#define PING_WAIT_MS 5000
#define CREATE_WAIT_MS 30000
#define STATE_OK_WAIT_MS 20000
#define MAX_ARGS 64

static void sleep_ms(int ms)
{
    lmc_sleep_ns((uint64_t)ms * 1000000u);
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

pid_t lmc_redis_spawn(const char *const *argv, const char *log)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid < 0 ? -1 : pid;
    /* Child: die with the thread that started us; output to the log, never to the test's. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none; /* a mask survives exec: do not pass on the caller's blocked signals */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int in = open("/dev/null", O_RDONLY);
    int out = log != NULL ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
    if (out < 0)
        out = open("/dev/null", O_WRONLY);
    if (in >= 0)
        dup2(in, 0);
    if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

int lmc_redis_wait(pid_t pid, int timeout_ms)
{
    uint64_t deadline = lmc_mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (lmc_mono_ms() >= deadline)
            break;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return -1;
}

redisContext *lmc_redis_connect(int port)
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

redisReply *lmc_redis_command(int port, const char *fmt, ...)
{
    redisContext *c = lmc_redis_connect(port);
    if (c == NULL)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

bool lmc_redis_command_ok(int port, const char *cmd)
{
    /* Split on spaces into arguments (a format would make the whole line one argument). */
    char buf[512];
    const char *argv[32];
    int argc = 0;
    snprintf(buf, sizeof(buf), "%s", cmd);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w != NULL && argc < 32;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    redisContext *c = argc > 0 ? lmc_redis_connect(port) : NULL;
    if (c == NULL)
        return false;
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    redisFree(c);
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* ------------------------------------------------------------------ */
/* One server                                                           */
/* ------------------------------------------------------------------ */

/* Fork redis-server on port with extra and wait for PING: LMC_OK, or LMC_ERR_IO when it exited
 * (a port clash, most likely) or stayed silent. */
static lmc_status spawn_server(int port, const char *const *extra, const char *log,
                               lmc_redis_server *out, lmc_error *err)
{
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *argv[MAX_ARGS] = {
        "redis-server", "--port", port_s,        "--bind", "127.0.0.1",  "--save", "",
        "--appendonly", "no",     "--daemonize", "no",     "--loglevel", "warning"};
    size_t n = 13;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (n + 1 >= MAX_ARGS)
            return lmc_error_set(err, LMC_ERR_INVALID, "redis-server: too many arguments");
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    pid_t pid = lmc_redis_spawn(argv, log);
    if (pid < 0)
        return lmc_error_set(err, LMC_ERR_IO, "fork: %s", strerror(errno));
    for (int waited = 0; waited < PING_WAIT_MS; waited += 20) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return lmc_error_set(err, LMC_ERR_IO,
                                 "redis-server on 127.0.0.1:%d exited at start%s%s", port,
                                 log != NULL ? "; see " : "", log != NULL ? log : "");
        if (lmc_redis_command_ok(port, "PING")) {
            out->pid = pid;
            out->port = port;
            return LMC_OK;
        }
        sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return lmc_error_set(err, LMC_ERR_IO,
                         "redis-server on 127.0.0.1:%d did not answer PING within %d s", port,
                         PING_WAIT_MS / 1000);
}

static lmc_status need(const char *prog, lmc_error *err)
{
    if (in_path(prog))
        return LMC_OK;
    return lmc_error_set(err, LMC_ERR_NOT_FOUND,
                         "%s not found in PATH (scripts/install-deps installs redis-server and "
                         "redis-tools)",
                         prog);
}

lmc_status lmc_redis_server_start(int port, const char *const *extra, const char *log,
                                  lmc_redis_server *out, lmc_error *err)
{
    out->pid = -1;
    lmc_status st = need("redis-server", err);
    for (int attempt = 0; st == LMC_OK && attempt < START_ATTEMPTS; attempt++) {
        int p = port;
        if (p <= 0 && (st = lmc_net_free_loopback_port(&p, err)) != LMC_OK)
            break;
        st = spawn_server(p, extra, log, out, err);
        if (st != LMC_ERR_IO)
            break;
        if (port > 0)
            sleep_ms(100); /* the same port: give the old socket time to go */
        if (attempt + 1 < START_ATTEMPTS)
            st = LMC_OK;
    }
    return st;
}

void lmc_redis_server_stop(lmc_redis_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = -1;
}

/* ------------------------------------------------------------------ */
/* A cluster                                                            */
/* ------------------------------------------------------------------ */

typedef struct cluster_node {
    lmc_redis_server srv;
    int port;
    int bus_port;
} cluster_node;

struct lmc_redis_cluster {
    char dir[64];
    size_t n;
    cluster_node *nodes;
    char **extra; /* the caller's extra arguments, kept for restarts; NULL-terminated */
};

/* Start node i on its ports (bus_port 0: pick both afresh, retrying a clash). */
static lmc_status start_node(lmc_redis_cluster *c, size_t i, lmc_error *err)
{
    const char *const *extra = (const char *const *)c->extra;
    cluster_node *nd = &c->nodes[i];
    bool fixed = nd->bus_port > 0;
    lmc_status st = LMC_OK;
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        if (!fixed) {
            /* The bus port is chosen too: port + 10000, Redis's default, may be out of range. */
            if ((st = lmc_net_free_loopback_port(&nd->port, err)) != LMC_OK ||
                (st = lmc_net_free_loopback_port(&nd->bus_port, err)) != LMC_OK)
                return st;
            if (nd->port == nd->bus_port)
                continue;
        }
        char conf[96], bus[16], log[96];
        snprintf(conf, sizeof(conf), "nodes-%d.conf", nd->port);
        snprintf(bus, sizeof(bus), "%d", nd->bus_port);
        snprintf(log, sizeof(log), "%s/%d.log", c->dir, nd->port);
        const char *argv[MAX_ARGS] = {"--cluster-enabled", "yes", "--cluster-config-file", conf,
                                      "--cluster-port", bus, "--dir", c->dir,
                                      "--cluster-node-timeout", "2000",
                                      /* A replica syncs at once, not after the default 5 s wait
                                         for more replicas to share the transfer. */
                                      "--repl-diskless-sync-delay", "0"};
        size_t n = 12;
        for (size_t k = 0; extra != NULL && extra[k] != NULL && n + 1 < MAX_ARGS; k++)
            argv[n++] = extra[k];
        argv[n] = NULL;
        st = spawn_server(nd->port, argv, log, &nd->srv, err);
        if (st != LMC_ERR_IO)
            return st;
        sleep_ms(fixed ? 100 : 0);
    }
    return st;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* Whether node i is a replica whose link to its master is up (INFO replication). */
static bool replica_synced(const lmc_redis_cluster *c, size_t i, bool *is_replica)
{
    redisReply *r = lmc_redis_command(c->nodes[i].port, "INFO replication");
    bool ok = r != NULL && r->type == REDIS_REPLY_STRING;
    *is_replica = ok && strstr(r->str, "role:slave") != NULL;
    bool up = ok && strstr(r->str, "master_link_status:up") != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return up;
}

/* Until every replica's link is up (true) or timeout_ms passes (false). */
static bool wait_replicas_synced(const lmc_redis_cluster *c, int timeout_ms)
{
    uint64_t deadline = lmc_mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < c->n && all; i++) {
            bool is_replica;
            bool up = replica_synced(c, i, &is_replica);
            all = !is_replica || up;
        }
        if (all)
            return true;
        if (lmc_mono_ms() >= deadline)
            return false;
        sleep_ms(50);
    }
}

lmc_status lmc_redis_cluster_start(size_t masters, size_t replicas, const char *const *extra,
                                   lmc_redis_cluster **out, lmc_error *err)
{
    *out = NULL;
    lmc_status st;
    if ((st = need("redis-server", err)) != LMC_OK || (st = need("redis-cli", err)) != LMC_OK)
        return st;
    size_t n = masters * (1 + replicas);
    if (masters < 3 || n + 8 > MAX_ARGS)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "a Redis Cluster needs 3 or more masters and at most %d nodes here",
                             MAX_ARGS - 8);
    lmc_redis_cluster *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->nodes = calloc(n, sizeof(*c->nodes))) == NULL) {
        free(c);
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    }
    c->n = n;
    for (size_t i = 0; i < n; i++)
        c->nodes[i].srv.pid = -1;
    size_t n_extra = 0;
    while (extra != NULL && extra[n_extra] != NULL)
        n_extra++;
    if (n_extra + 13 > MAX_ARGS || (c->extra = calloc(n_extra + 1, sizeof(char *))) == NULL) {
        st = lmc_error_set(err, n_extra + 13 > MAX_ARGS ? LMC_ERR_INVALID : LMC_ERR_NOMEM,
                           "redis-server: %s",
                           n_extra + 13 > MAX_ARGS ? "too many arguments" : "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_extra; i++) {
        if ((c->extra[i] = strdup(extra[i])) == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    char dir[sizeof(c->dir)] = "/tmp/lmc-redis-cluster-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        st = lmc_error_set(err, LMC_ERR_IO, "mkdtemp: %s", strerror(errno));
        goto fail;
    }
    memcpy(c->dir, dir, sizeof(dir));
    for (size_t i = 0; i < n; i++) {
        if ((st = start_node(c, i, err)) != LMC_OK)
            goto fail;
    }

    char addrs[MAX_ARGS][32], replicas_s[16], log[96];
    const char *argv[MAX_ARGS] = {"redis-cli", "--cluster", "create"};
    size_t a = 3;
    for (size_t i = 0; i < n; i++) {
        lmc_redis_cluster_addr(c, i, addrs[i], sizeof(addrs[i]));
        argv[a++] = addrs[i];
    }
    snprintf(replicas_s, sizeof(replicas_s), "%zu", replicas);
    argv[a++] = "--cluster-replicas";
    argv[a++] = replicas_s;
    argv[a++] = "--cluster-yes";
    argv[a] = NULL;
    snprintf(log, sizeof(log), "%s/create.log", c->dir);
    pid_t pid = lmc_redis_spawn(argv, log);
    int rc = pid > 0 ? lmc_redis_wait(pid, CREATE_WAIT_MS) : -1;
    if (rc != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "redis-cli --cluster create failed (exit %d); see %s",
                           rc, log);
        goto fail;
    }
    if (!lmc_redis_cluster_wait_ok(c, STATE_OK_WAIT_MS)) {
        st = lmc_error_set(err, LMC_ERR_IO,
                           "the cluster in %s did not reach cluster_state:ok in %d s", c->dir,
                           STATE_OK_WAIT_MS / 1000);
        goto fail;
    }
    /* A replica that has not synced yet would refuse to take over (its data counts as too old). */
    if (replicas > 0 && !wait_replicas_synced(c, STATE_OK_WAIT_MS)) {
        st = lmc_error_set(err, LMC_ERR_IO, "the replicas in %s did not sync in %d s", c->dir,
                           STATE_OK_WAIT_MS / 1000);
        goto fail;
    }
    *out = c;
    return LMC_OK;

fail:
    /* The directory stays: the message points at its logs. */
    c->dir[0] = '\0';
    lmc_redis_cluster_stop(c);
    return st;
}

void lmc_redis_cluster_stop(lmc_redis_cluster *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        lmc_redis_server_stop(&c->nodes[i].srv);
    if (c->dir[0] != '\0')
        remove_dir(c->dir);
    for (size_t i = 0; c->extra != NULL && c->extra[i] != NULL; i++)
        free(c->extra[i]);
    free(c->extra);
    free(c->nodes);
    free(c);
}

size_t lmc_redis_cluster_size(const lmc_redis_cluster *c)
{
    return c->n;
}

int lmc_redis_cluster_port(const lmc_redis_cluster *c, size_t i)
{
    return c->nodes[i].port;
}

bool lmc_redis_cluster_running(const lmc_redis_cluster *c, size_t i)
{
    return c->nodes[i].srv.pid > 0;
}

const char *lmc_redis_cluster_dir(const lmc_redis_cluster *c)
{
    return c->dir;
}

void lmc_redis_cluster_addr(const lmc_redis_cluster *c, size_t i, char *buf, size_t len)
{
    snprintf(buf, len, "127.0.0.1:%d", c->nodes[i].port);
}

void lmc_redis_cluster_kill(lmc_redis_cluster *c, size_t i)
{
    lmc_redis_server_stop(&c->nodes[i].srv);
}

void lmc_redis_cluster_pause(lmc_redis_cluster *c, size_t i, bool paused)
{
    if (c->nodes[i].srv.pid > 0)
        kill(c->nodes[i].srv.pid, paused ? SIGSTOP : SIGCONT);
}

lmc_status lmc_redis_cluster_restart(lmc_redis_cluster *c, size_t i, lmc_error *err)
{
    lmc_redis_server_stop(&c->nodes[i].srv);
    return start_node(c, i, err);
}

bool lmc_redis_cluster_is_master(const lmc_redis_cluster *c, size_t i)
{
    if (c->nodes[i].srv.pid <= 0)
        return false;
    redisReply *r = lmc_redis_command(c->nodes[i].port, "ROLE");
    bool master = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[0]->str, "master") == 0;
    if (r != NULL)
        freeReplyObject(r);
    return master;
}

static bool state_ok(int port)
{
    redisReply *r = lmc_redis_command(port, "CLUSTER INFO");
    bool ok =
        r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

bool lmc_redis_cluster_wait_ok(const lmc_redis_cluster *c, int timeout_ms)
{
    uint64_t deadline = lmc_mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < c->n && all; i++)
            all = c->nodes[i].srv.pid <= 0 || state_ok(c->nodes[i].port);
        if (all)
            return true;
        if (lmc_mono_ms() >= deadline)
            return false;
        sleep_ms(50);
    }
}

bool lmc_redis_cluster_flushall(const lmc_redis_cluster *c)
{
    bool ok = true;
    for (size_t i = 0; i < c->n; i++) {
        if (lmc_redis_cluster_is_master(c, i))
            ok = lmc_redis_command_ok(c->nodes[i].port, "FLUSHALL") && ok;
    }
    return ok;
}
