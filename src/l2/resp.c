/*
 * resp.c -- the "resp" L2 adapter: Redis or Valkey (anything that speaks
 * RESP) as a shared, scale-out tier, through hiredis.
 *
 * Owns: `connections` worker connections, one control connection for
 * deletes, its workers (l2/worker.h), the lookup lock counts (key -> refcount, in
 * process only: another process's eviction does not see them) and, when
 * max_capacity_gb > 0, the sizes of the keys this process wrote (the only
 * keys its eviction may delete). Values are the object's raw bytes under
 * key_prefix + the fs file name without ".data".
 *
 * The file has two halves: connections (open, check, lose, and the
 * pipelined exchange over one) and the tasks run over them (store, lookup,
 * load, delete). The workers (l2/worker.h) tie them together through two
 * hooks: resp_link brings a worker's connection up or checks it, resp_run
 * runs one task over it.
 *
 * Threads: one worker per connection, "l2-resp-<n>-<i>", each owning its
 * redisContext (hiredis contexts are not thread-safe). A task runs on one
 * worker, pipelined (commands appended in windows, then the replies read).
 * Unlock runs on the caller's thread; delete runs on the caller's thread
 * over the control connection, under ctl_lock. `lock` guards `locks`,
 * `sizes`, `last_error` and the counters; Redis I/O and listener callbacks
 * happen outside it.
 *
 * Faults: every socket has a timeout (timeout_ms) for connect, send and
 * receive, so a dead or stopped Redis costs a task at most that long. A
 * connection that fails is dropped and reopened with exponential backoff
 * (50 ms doubling to 5 s); its loss makes the other connected workers
 * check theirs with a PING before their next task, so the whole adapter
 * notices an outage at once (the control connection's too). Tasks are queued
 * only while some connection is live; with none, a submitted task fails at
 * once, and losing the last connection fails what is queued. So a task
 * never waits for a Redis that is down. hiredis 0.14 writes with write(2),
 * so SIGPIPE is blocked on every thread that does Redis I/O (the workers
 * for their life; other threads around each exchange).
 *
 * Cluster mode ("cluster": true, or found by `INFO cluster` on the one
 * seed): the routing is l2/resp_cluster.h's. Each worker, and the delete
 * path, then owns a connset (one connection per node) instead of one
 * connection; the commands of a task are grouped by the node serving their
 * slot and pipelined per node. Node health lives in the cluster module: a
 * node that is down fails its keys at once, the others go on. A worker's
 * link is "the cluster is usable" (some slot served by a node that is up),
 * so tasks fail at submit only when no node can serve anything. A lookup or
 * load then reports each key's own answer (the keys of a node that failed
 * are misses), a store with a key left unanswered reports -1, and the bytes
 * written and deleted are also counted per slot, for the per-node usage.
 * Keys are the single-node names (one key per object: nothing to
 * co-locate).
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core/clock.h"
#include "core/keymap.h"
#include "core/log.h"
#include "l2/adapter_impl.h"
#include "l2/resp_cluster.h"
#include "l2/worker.h"

#define COMPONENT "l2-resp"
#define TYPE "resp"
#define GIB (1024.0 * 1024.0 * 1024.0)
#define BACKOFF_MIN_MS 50u
#define BACKOFF_MAX_MS 5000u
#define PING_IDLE_MS 1000u      /* an idle connection is checked this often */
#define WINDOW_CMDS 256u        /* commands per pipeline window ... */
#define WINDOW_BYTES (8u << 20) /* ... or this many value bytes, whichever comes first */
#define NAME_STACK 512
#define CTL SIZE_MAX         /* the connection index of the delete path */
#define CLUSTER_POLL_MS 100u /* cluster mode: a down worker looks at the cluster this often */

typedef struct resp_conn {
    redisContext *c;
    uint64_t backoff_ms;  /* the next retry delay */
    uint64_t next_try_ns; /* no connect attempt before this */
    uint64_t used_ns;     /* last successful exchange */
    unsigned failures;    /* consecutive failed connects */
} resp_conn;

typedef struct resp_adapter {
    lmc_l2_adapter *base;
    char *host;
    int port;
    char *unix_socket;
    int64_t db;
    char *password; /* from the environment; never logged */
    char *username;
    char *prefix;
    size_t prefix_len;
    uint64_t capacity; /* bytes; 0 = unbounded, nothing tracked */
    int nconn;
    int timeout_ms;
    char endpoint[300]; /* "host:port" or "unix:path", for messages */

    pthread_mutex_t lock;
    lmc_keymap *locks; /* key -> lookup lock count (> 0) */
    lmc_keymap *sizes; /* capacity > 0: key -> bytes this process wrote */
    char last_error[256];
    uint64_t reconnects;
    uint64_t failed_tasks; /* tasks whose connection broke under them */

    atomic_bool degraded;      /* the last exchange or connect failed */
    atomic_bool outage_logged; /* one warning per outage, not one per connection and retry */

    resp_conn *conns; /* nconn entries; conns[i] belongs to worker i */
    lmc_l2_workers *workers;

    pthread_mutex_t ctl_lock; /* the delete path's connection */
    resp_conn ctl;

    /* Cluster mode only (cl != NULL). */
    lmc_resp_cluster *cl;
    char **seeds; /* "host:port" */
    size_t n_seeds;
    lmc_resp_connset **csets; /* nconn entries; csets[i] belongs to worker i */
    lmc_resp_connset *ctl_cs; /* the delete path's, under ctl_lock */
} resp_adapter;

static atomic_uint g_instances; /* numbers the worker threads: l2-resp-0-0, ... */
static atomic_uint g_monitors;  /* numbers the cluster monitors: l2-resp-map-0, ... */

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static struct timeval ms_tv(int ms)
{
    return (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
}

/*
 * SIGPIPE from writing to a closed socket would kill a process that does
 * not ignore it (tests, the bench): block it around Redis I/O. A SIGPIPE
 * raised meanwhile stays pending on this thread and is consumed at the end.
 */
typedef struct sigpipe_guard {
    sigset_t old;
    bool was_pending;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

static void sigpipe_restore(sigpipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/*
 * Record a failure for report_status. A connection-level one (conn) also
 * marks the adapter degraded until the next successful exchange; an error
 * reply does not: Redis answered.
 */
static void set_error(resp_adapter *r, bool conn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(resp_adapter *r, bool conn, const char *fmt, ...)
{
    char msg[sizeof(r->last_error)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&r->lock);
    memcpy(r->last_error, msg, sizeof(msg));
    pthread_mutex_unlock(&r->lock);
    if (conn)
        atomic_store(&r->degraded, true);
}

/*
 * The Redis key of key: prefix + fs name without ".data". Points at buf
 * when it fits, else at a malloc'd copy (free when != buf); NULL on OOM.
 */
static char *key_name(const resp_adapter *r, const lmc_object_key *key, char *buf, size_t cap,
                      size_t *len)
{
    size_t want = r->prefix_len + lmc_l2_fs_key_name(key, NULL, 0) + 1;
    char *out = want <= cap ? buf : malloc(want);
    if (out == NULL)
        return NULL;
    memcpy(out, r->prefix, r->prefix_len);
    size_t n = lmc_l2_fs_key_name(key, out + r->prefix_len, want - r->prefix_len);
    *len = r->prefix_len + n - 5; /* without ".data" */
    out[*len] = '\0';
    return out;
}

/* ------------------------------------------------------------------ */
/* Connections                                                          */
/* ------------------------------------------------------------------ */

/* A command on a fresh connection, expecting a status reply (OK/PONG); false with why in err. */
static bool handshake_cmd(redisContext *c, const char *what, int argc, const char **argv, char *err,
                          size_t len)
{
    redisReply *rep = redisCommandArgv(c, argc, argv, NULL);
    if (rep == NULL) {
        snprintf(err, len, "%s: %s", what, c->errstr[0] ? c->errstr : "no reply");
        return false;
    }
    bool ok = rep->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, len, "%s: %.*s", what, rep->type == REDIS_REPLY_ERROR ? (int)rep->len : 15,
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    freeReplyObject(rep);
    return ok;
}

/*
 * Open a connection to host:port (or the Unix socket sock), authenticate,
 * select db and PING, all bounded by timeout_ms. A stopped server still
 * accepts TCP connections (the kernel does), so only the PING proves it
 * answers. NULL with why in err ("connect: Connection refused").
 */
static redisContext *resp_connect(const resp_adapter *r, const char *host, int port,
                                  const char *sock, int64_t db, char *err, size_t len)
{
    struct timeval tv = ms_tv(r->timeout_ms);
    redisContext *c = sock != NULL ? redisConnectUnixWithTimeout(sock, tv)
                                   : redisConnectWithTimeout(host, port, tv);
    bool ok = c != NULL && c->err == 0;
    if (!ok)
        snprintf(err, len, "connect: %s", c != NULL ? c->errstr : "out of memory");
    if (ok && redisSetTimeout(c, tv) != REDIS_OK) {
        snprintf(err, len, "setting the socket timeout failed");
        ok = false;
    }
    if (ok && sock == NULL)
        redisEnableKeepAlive(c);
    if (ok && r->password != NULL) {
        const char *argv[3] = {"AUTH", r->username != NULL ? r->username : r->password,
                               r->password};
        ok = handshake_cmd(c, "AUTH", r->username != NULL ? 3 : 2, argv, err, len);
    }
    if (ok && db != 0) {
        char dbs[24];
        snprintf(dbs, sizeof(dbs), "%" PRId64, db);
        const char *argv[2] = {"SELECT", dbs};
        ok = handshake_cmd(c, "SELECT", 2, argv, err, len);
    }
    if (ok) {
        const char *argv[1] = {"PING"};
        ok = handshake_cmd(c, "PING", 1, argv, err, len);
    }
    if (!ok && c != NULL) {
        redisFree(c);
        c = NULL;
    }
    return c;
}

/*
 * Open cn (resp_connect to the one server). On failure, records the error
 * and schedules the next try.
 */
static bool conn_open(resp_adapter *r, resp_conn *cn)
{
    char why[256];
    redisContext *c = resp_connect(r, r->host, r->port, r->unix_socket, r->db, why, sizeof(why));
    bool ok = c != NULL;
    if (!ok)
        set_error(r, true, "%s: %s", r->endpoint, why);
    uint64_t now = lmc_mono_ns();
    if (!ok) {
        cn->failures++;
        if (!atomic_exchange(&r->outage_logged, true)) {
            pthread_mutex_lock(&r->lock);
            LMC_WARN(COMPONENT,
                     "%s; tasks fail until Redis answers (retrying with backoff up to %u ms)",
                     r->last_error, BACKOFF_MAX_MS);
            pthread_mutex_unlock(&r->lock);
        }
        cn->next_try_ns = now + cn->backoff_ms * 1000000u;
        cn->backoff_ms = cn->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : cn->backoff_ms * 2;
        return false;
    }
    if (atomic_exchange(&r->outage_logged, false))
        LMC_INFO(COMPONENT, "%s: connected again", r->endpoint);
    cn->c = c;
    cn->failures = 0;
    cn->backoff_ms = BACKOFF_MIN_MS;
    cn->used_ns = now;
    atomic_store(&r->degraded, false);
    return true;
}

/*
 * The connection broke: free it, make every worker check its own before its
 * next task (so the whole adapter notices an outage before this task's
 * failure is even reported), and retry at once.
 */
static void conn_lost(resp_adapter *r, resp_conn *cn, const char *what)
{
    set_error(r, true, "%s: %s: %s", r->endpoint, what,
              cn->c != NULL && cn->c->errstr[0] != '\0' ? cn->c->errstr : "connection lost");
    if (!atomic_exchange(&r->outage_logged, true)) {
        pthread_mutex_lock(&r->lock);
        LMC_WARN(COMPONENT, "%s; reconnecting", r->last_error);
        pthread_mutex_unlock(&r->lock);
    }
    if (cn->c != NULL)
        redisFree(cn->c);
    cn->c = NULL;
    cn->next_try_ns = lmc_mono_ns();
    cn->backoff_ms = BACKOFF_MIN_MS;
    lmc_l2_workers_check_links(r->workers);
}

static bool conn_ping(resp_adapter *r, resp_conn *cn)
{
    redisReply *rep = redisCommand(cn->c, "PING");
    bool ok = rep != NULL && rep->type == REDIS_REPLY_STATUS;
    if (rep != NULL)
        freeReplyObject(rep);
    if (!ok) {
        conn_lost(r, cn, "PING");
        return false;
    }
    cn->used_ns = lmc_mono_ns();
    atomic_store(&r->degraded, false);
    return true;
}

/* ------------------------------------------------------------------ */
/* Pipelines                                                            */
/* ------------------------------------------------------------------ */

/* Append the command for key i of t (false: out of memory). */
typedef bool (*append_fn)(resp_adapter *r, redisContext *c, lmc_l2_task *t, size_t i);
/* Handle the reply to key i's command (reply may be an error reply). */
typedef void (*reply_fn)(resp_adapter *r, lmc_l2_task *t, size_t i, redisReply *rep, void *acc);

/*
 * Send one command per key of t, in windows of WINDOW_CMDS commands or
 * WINDOW_BYTES value bytes, reading each window's replies before the next
 * (so a task's memory on both ends stays bounded). False when the
 * connection broke (it is then dropped); replies already handled stay.
 */
static bool pipeline(resp_adapter *r, resp_conn *cn, lmc_l2_task *t, append_fn append,
                     reply_fn on_reply, void *acc, const char *what)
{
    size_t i = 0;
    while (i < t->n) {
        size_t end = i;
        uint64_t bytes = 0;
        bool oom = false;
        while (end < t->n && end - i < WINDOW_CMDS && bytes < WINDOW_BYTES) {
            if (!append(r, cn->c, t, end)) {
                oom = true; /* hiredis appends nothing on failure: the buffer stays whole */
                break;
            }
            bytes += t->objs != NULL ? t->objs[end].size : 0;
            end++;
        }
        for (size_t k = i; k < end; k++) {
            void *rep = NULL;
            if (redisGetReply(cn->c, &rep) != REDIS_OK || rep == NULL) {
                conn_lost(r, cn, what);
                return false;
            }
            on_reply(r, t, k, rep, acc);
            freeReplyObject(rep);
        }
        cn->used_ns = lmc_mono_ns();
        atomic_store(&r->degraded, false);
        if (oom) {
            set_error(r, false, "%s: %s: out of memory building a command", r->endpoint, what);
            return false;
        }
        i = end;
    }
    return true;
}

static bool append_key_cmd(resp_adapter *r, redisContext *c, const lmc_object_key *key,
                           const char *cmd, const lmc_memory_obj *value)
{
    char buf[NAME_STACK];
    size_t len;
    char *name = key_name(r, key, buf, sizeof(buf), &len);
    if (name == NULL)
        return false;
    int rc;
    if (value != NULL)
        rc = redisAppendCommand(c, "SET %b %b NX", name, len, value->data, (size_t)value->size);
    else
        rc = redisAppendCommand(c, "%s %b", cmd, name, len);
    if (name != buf)
        free(name);
    return rc == REDIS_OK;
}

/* An error reply to a data command: log it once per task kind and remember it. */
static void reply_error(resp_adapter *r, const char *what, const redisReply *rep)
{
    const char *hint = "";
    if (rep->len >= 5 && (strncmp(rep->str, "MOVED", 5) == 0 || strncmp(rep->str, "ASK ", 4) == 0))
        hint = " (a Redis Cluster node: set \"cluster\": true; see docs/l2-adapters.md)";
    set_error(r, false, "%s: %s: %.*s%s", r->endpoint, what, (int)(rep->len > 160 ? 160 : rep->len),
              rep->str, hint);
}

/*
 * The first bad reply of a task only (*seen: the task had one already), so a
 * task against a broken server logs one line, not one per key.
 */
static void reply_error_once(resp_adapter *r, const char *what, const redisReply *rep, bool *seen)
{
    if (!*seen)
        reply_error(r, what, rep);
    *seen = true;
}

/* ------------------------------------------------------------------ */
/* One exchange: the one server's pipeline, or the cluster's per node    */
/* ------------------------------------------------------------------ */

/* The hash slot of key's Redis key (cluster mode). */
static unsigned key_slot(const resp_adapter *r, const lmc_object_key *key)
{
    char buf[NAME_STACK];
    size_t len;
    char *name = key_name(r, key, buf, sizeof(buf), &len);
    if (name == NULL)
        return 0; /* out of memory: building its command fails the same way */
    unsigned slot = lmc_resp_key_slot(name, len);
    if (name != buf)
        free(name);
    return slot;
}

/* A task's pipeline callbacks, as the cluster's batch callbacks. */
typedef struct batch_ctx {
    resp_adapter *r;
    lmc_l2_task *t;
    append_fn append;
    reply_fn on_reply;
    void *acc;
} batch_ctx;

static unsigned batch_slot(void *ud, size_t i)
{
    batch_ctx *b = ud;
    return key_slot(b->r, &b->t->keys[i]);
}

static bool batch_append(void *ud, redisContext *c, size_t i)
{
    batch_ctx *b = ud;
    return b->append(b->r, c, b->t, i);
}

static void batch_reply(void *ud, size_t i, redisReply *rep)
{
    batch_ctx *b = ud;
    b->on_reply(b->r, b->t, i, rep, b->acc);
}

static uint64_t batch_bytes(void *ud, size_t i)
{
    batch_ctx *b = ud;
    return b->t->objs != NULL ? b->t->objs[i].size : 0;
}

/*
 * One command per key of t over connection index (a worker's, or CTL: the
 * delete path's). Single server: pipeline on its connection. Cluster: the
 * keys grouped by node and pipelined per node, redirects followed. False
 * when some key got no reply.
 */
static bool exchange(resp_adapter *r, size_t index, lmc_l2_task *t, append_fn append,
                     reply_fn on_reply, void *acc, const char *what)
{
    if (r->cl == NULL)
        return pipeline(r, index == CTL ? &r->ctl : &r->conns[index], t, append, on_reply, acc,
                        what);
    batch_ctx ctx = {r, t, append, on_reply, acc};
    lmc_resp_batch b = {.n = t->n,
                        .slot = batch_slot,
                        .append = batch_append,
                        .reply = batch_reply,
                        .bytes = batch_bytes,
                        .ud = &ctx,
                        .what = what};
    size_t failed = lmc_resp_cluster_run(r->cl, index == CTL ? r->ctl_cs : r->csets[index], &b);
    if (failed > 0 && index != CTL) {
        pthread_mutex_lock(&r->lock);
        r->failed_tasks++;
        pthread_mutex_unlock(&r->lock);
    }
    return failed == 0;
}

/* ------------------------------------------------------------------ */
/* The worker's tasks                                                   */
/* ------------------------------------------------------------------ */

/*
 * The end of every task: false when its connection broke under it (the
 * workers then count the link down), which also counts the task as failed.
 * In cluster mode the link is the cluster's health, not one connection:
 * always true (exchange counted a failed task).
 */
static bool conn_kept(resp_adapter *r, size_t index)
{
    const resp_conn *cn = &r->conns[index];
    if (r->cl != NULL || cn->c != NULL)
        return true;
    pthread_mutex_lock(&r->lock);
    r->failed_tasks++;
    pthread_mutex_unlock(&r->lock);
    return false;
}

typedef struct store_acc {
    uint64_t written;
    bool failed;
    uint8_t *done; /* per key: 1 = written now */
} store_acc;

static bool append_store(resp_adapter *r, redisContext *c, lmc_l2_task *t, size_t i)
{
    return append_key_cmd(r, c, &t->keys[i], NULL, &t->objs[i]);
}

static void on_store_reply(resp_adapter *r, lmc_l2_task *t, size_t i, redisReply *rep, void *p)
{
    store_acc *acc = p;
    if (rep->type == REDIS_REPLY_STATUS) { /* OK: written now */
        acc->written += t->objs[i].size;
        acc->done[i] = 1;
    } else if (rep->type != REDIS_REPLY_NIL) { /* NIL: present already, skipped */
        reply_error_once(r, "SET", rep, &acc->failed);
    }
}

static bool run_store(void *ud, size_t index, lmc_l2_task *t)
{
    resp_adapter *r = ud;
    store_acc acc = {0, false, calloc(t->n > 0 ? t->n : 1, 1)};
    if (acc.done == NULL) {
        LMC_ERROR(COMPONENT, "store task %" PRIu64 ": out of memory", t->id);
        lmc_l2_task_fail(r->base, t);
        return true;
    }
    if (!exchange(r, index, t, append_store, on_store_reply, &acc, "SET"))
        acc.failed = true;
    /* Keys are compacted to the written ones; nn <= i, so only used slots are overwritten. */
    size_t nn = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!acc.done[i])
            continue;
        t->keys[nn] = t->keys[i];
        t->sizes[nn] = t->objs[i].size;
        if (r->cl != NULL)
            lmc_resp_cluster_count_bytes(r->cl, key_slot(r, &t->keys[nn]), (int64_t)t->sizes[nn]);
        nn++;
    }
    free(acc.done);
    if (r->capacity > 0 && nn > 0) {
        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < nn; i++) {
            if (lmc_l2_count_put(r->sizes, &t->keys[i], t->sizes[i]) != LMC_OK)
                LMC_ERROR(COMPONENT, "store: a key is not tracked for eviction (out of memory)");
        }
        pthread_mutex_unlock(&r->lock);
    }
    t->result = acc.failed ? -1 : (int64_t)acc.written;
    lmc_l2_notify_stored(r->base, t->keys, t->sizes, nn);
    lmc_l2_task_complete(r->base, t);
    return conn_kept(r, index);
}

static bool append_exists(resp_adapter *r, redisContext *c, lmc_l2_task *t, size_t i)
{
    return append_key_cmd(r, c, &t->keys[i], "EXISTS", NULL);
}

static void on_exists_reply(resp_adapter *r, lmc_l2_task *t, size_t i, redisReply *rep, void *p)
{
    if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0)
        lmc_bitmap_set(&t->bitmap, i);
    else if (rep->type == REDIS_REPLY_ERROR)
        reply_error_once(r, "EXISTS", rep, p);
}

/*
 * The exchange of a lookup or a load, whose replies set the hits' bits.
 * One server: a broken task reports nothing found, not half an answer.
 * Cluster: each key's answer stands; the keys of a node that failed are
 * misses.
 */
static void exchange_hits(resp_adapter *r, size_t index, lmc_l2_task *t, append_fn append,
                          reply_fn on_reply, const char *what)
{
    bool warned = false;
    if (!exchange(r, index, t, append, on_reply, &warned, what) && r->cl == NULL) {
        for (size_t i = 0; i < t->n; i++)
            lmc_bitmap_clear(&t->bitmap, i);
    }
}

static bool run_lookup(void *ud, size_t index, lmc_l2_task *t)
{
    resp_adapter *r = ud;
    exchange_hits(r, index, t, append_exists, on_exists_reply, "EXISTS");
    /* Lock before publishing, so eviction cannot delete a hit the caller is about to load. */
    pthread_mutex_lock(&r->lock);
    lmc_l2_lock_hits(r->locks, t);
    pthread_mutex_unlock(&r->lock);
    lmc_l2_task_complete(r->base, t);
    return conn_kept(r, index);
}

static bool append_get(resp_adapter *r, redisContext *c, lmc_l2_task *t, size_t i)
{
    return append_key_cmd(r, c, &t->keys[i], "GET", NULL);
}

static void on_get_reply(resp_adapter *r, lmc_l2_task *t, size_t i, redisReply *rep, void *p)
{
    /* A value of another length belongs to another layout: a miss, not a partial copy. */
    if (rep->type == REDIS_REPLY_STRING && (uint64_t)rep->len == t->objs[i].size) {
        if (rep->len > 0)
            memcpy(t->objs[i].data, rep->str, rep->len);
        lmc_bitmap_set(&t->bitmap, i);
    } else if (rep->type == REDIS_REPLY_ERROR) {
        reply_error_once(r, "GET", rep, p);
    }
}

static bool run_load(void *ud, size_t index, lmc_l2_task *t)
{
    resp_adapter *r = ud;
    exchange_hits(r, index, t, append_get, on_get_reply, "GET");
    size_t nn = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (lmc_bitmap_test(&t->bitmap, i))
            t->keys[nn++] = t->keys[i];
    }
    lmc_l2_notify_accessed(r->base, t->keys, nn);
    lmc_l2_task_complete(r->base, t);
    return conn_kept(r, index);
}

/* ------------------------------------------------------------------ */
/* The worker hooks: connection and task execution meet here            */
/* ------------------------------------------------------------------ */

/* Bring worker i's connection up (when its backoff allows) or check it with a PING. */
static bool resp_link(void *ud, size_t i, bool up, uint64_t *retry_ns)
{
    resp_adapter *r = ud;
    if (r->cl != NULL) {
        /* Up: PING this worker's idle connections. Down: only look (the monitor probes). */
        *retry_ns = lmc_mono_ns() + (uint64_t)CLUSTER_POLL_MS * 1000000u;
        return lmc_resp_cluster_check(r->cl, r->csets[i],
                                      up ? (uint64_t)PING_IDLE_MS * 1000000u : UINT64_MAX);
    }
    resp_conn *cn = &r->conns[i];
    bool ok;
    if (up) {
        ok = conn_ping(r, cn);
    } else if (lmc_mono_ns() < cn->next_try_ns) {
        ok = false;
    } else if ((ok = conn_open(r, cn))) {
        pthread_mutex_lock(&r->lock);
        r->reconnects++;
        pthread_mutex_unlock(&r->lock);
    }
    *retry_ns = cn->next_try_ns;
    return ok;
}

static lmc_status resp_submit(void *impl, lmc_l2_task_kind kind, uint64_t id,
                              const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n)
{
    return lmc_l2_workers_enqueue(((resp_adapter *)impl)->workers, kind, id, keys, objs, n);
}

/* Synchronous: the locks are in process, so a decrement cannot fail. */
static void resp_submit_unlock(void *impl, const lmc_object_key *keys, size_t n)
{
    resp_adapter *r = impl;
    pthread_mutex_lock(&r->lock);
    lmc_l2_unlock_keys(r->locks, keys, n);
    pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------------ */
/* Delete (the eviction thread; the control connection)                 */
/* ------------------------------------------------------------------ */

typedef struct delete_acc {
    uint64_t *sizes;
    uint8_t *done;
    bool untracked; /* capacity == 0: STRLEN precedes each DEL */
} delete_acc;

static bool append_delete(resp_adapter *r, redisContext *c, lmc_l2_task *t, size_t i)
{
    /* Untracked (flags = 1): even slots ask STRLEN (the size to report), odd ones DEL. */
    return append_key_cmd(r, c, &t->keys[i], t->flags != 0 && i % 2 == 0 ? "STRLEN" : "DEL", NULL);
}

static void on_delete_reply(resp_adapter *r, lmc_l2_task *t, size_t i, redisReply *rep, void *p)
{
    delete_acc *acc = p;
    size_t k = acc->untracked ? i / 2 : i;
    if (rep->type == REDIS_REPLY_ERROR) {
        reply_error(r, "DEL", rep);
        return;
    }
    if (acc->untracked && i % 2 == 0) {
        acc->sizes[k] =
            rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 ? (uint64_t)rep->integer : 0;
        return;
    }
    /* DEL of a key already gone (0) counts as deleted, like the fs adapter's ENOENT. */
    if (rep->type == REDIS_REPLY_INTEGER)
        acc->done[k] = 1;
}

static void resp_delete_keys(void *impl, const lmc_object_key *keys, size_t n)
{
    resp_adapter *r = impl;
    bool untracked = r->capacity == 0;
    size_t ncmd = untracked ? 2 * n : n;
    lmc_object_key *victims = malloc(ncmd * sizeof(*victims));
    uint64_t *sizes = calloc(n, sizeof(*sizes));
    uint8_t *done = calloc(n, 1);
    if (victims == NULL || sizes == NULL || done == NULL) {
        LMC_ERROR(COMPONENT, "delete of %zu keys skipped (out of memory)", n);
        goto out;
    }
    /* Take the victims out of tracking first, so a second delete cannot pick them too. */
    size_t m = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < n; i++) {
        bool present;
        if (lmc_l2_count_get(r->locks, &keys[i], &present) > 0)
            continue; /* a lookup holds it for a coming load */
        if (!untracked) {
            sizes[m] = lmc_l2_count_get(r->sizes, &keys[i], &present);
            if (!present)
                continue; /* not written by this process: not ours to evict */
            lmc_keymap_remove(r->sizes, &keys[i], NULL);
        }
        victims[m++] = keys[i];
    }
    pthread_mutex_unlock(&r->lock);
    if (m == 0)
        goto out;

    /* A pseudo task drives the pipeline: keys are doubled for STRLEN + DEL when untracked. */
    lmc_l2_task t;
    memset(&t, 0, sizeof(t));
    if (untracked) {
        for (size_t i = m; i-- > 0;)
            victims[2 * i] = victims[2 * i + 1] = victims[i];
    }
    t.keys = victims;
    t.n = untracked ? 2 * m : m;
    t.flags = untracked; /* read by append_delete */
    delete_acc acc = {sizes, done, untracked};

    sigpipe_guard guard;
    sigpipe_block(&guard);
    pthread_mutex_lock(&r->ctl_lock);
    bool ok = r->cl != NULL || r->ctl.c != NULL;
    if (!ok && lmc_mono_ns() >= r->ctl.next_try_ns)
        ok = conn_open(r, &r->ctl);
    if (ok)
        ok = exchange(r, CTL, &t, append_delete, on_delete_reply, &acc, "DEL");
    pthread_mutex_unlock(&r->ctl_lock);
    sigpipe_restore(&guard);

    /* Compact to the deleted keys; the others go back into tracking. */
    size_t d = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < m; i++) {
        lmc_object_key key = victims[untracked ? 2 * i : i];
        if (done[i]) {
            victims[d] = key;
            sizes[d] = sizes[i];
            if (r->cl != NULL)
                lmc_resp_cluster_count_bytes(r->cl, key_slot(r, &key), -(int64_t)sizes[d]);
            d++;
        } else if (!untracked && lmc_l2_count_put(r->sizes, &key, sizes[i]) != LMC_OK) {
            LMC_ERROR(COMPONENT, "delete: a key is no longer tracked (out of memory)");
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (d < m)
        LMC_WARN(COMPONENT, "delete: %zu of %zu keys not deleted (%s)", m - d, m,
                 ok ? "error replies" : "Redis unreachable");
    lmc_l2_notify_deleted(r->base, victims, sizes, d);
out:
    free(victims);
    free(sizes);
    free(done);
}

/* ------------------------------------------------------------------ */
/* Status                                                               */
/* ------------------------------------------------------------------ */

static bool resp_is_healthy(void *impl)
{
    resp_adapter *r = impl;
    bool up =
        !lmc_l2_workers_stopping(r->workers) && lmc_l2_workers_get_stats(r->workers).live_links > 0;
    /* Cluster: healthy while every slot is served by a node that answers. */
    if (r->cl != NULL)
        return up && lmc_resp_cluster_healthy(r->cl);
    return up && !atomic_load(&r->degraded);
}

static void resp_report_status(void *impl, lmc_json *status)
{
    resp_adapter *r = impl;
    lmc_l2_workers_stats ws = lmc_l2_workers_get_stats(r->workers);
    pthread_mutex_lock(&r->lock);
    int live = (int)ws.live_links;
    size_t locked = lmc_keymap_size(r->locks);
    size_t tracked = r->sizes != NULL ? lmc_keymap_size(r->sizes) : 0;
    size_t pending = ws.queued;
    uint64_t reconnects = r->reconnects, failed = r->failed_tasks + ws.failed_no_link;
    char last_error[sizeof(r->last_error)];
    memcpy(last_error, r->last_error, sizeof(last_error));
    pthread_mutex_unlock(&r->lock);
    bool connected = live > 0;
    if (r->cl != NULL) {
        /* Connections are per node and opened on demand: count those open. */
        lmc_resp_cluster_stats cs = lmc_resp_cluster_get_stats(r->cl);
        connected = lmc_resp_cluster_usable(r->cl);
        live = (int)cs.open_connections;
        reconnects = cs.connects;
    }
    lmc_json_object_set(status, "endpoint", lmc_json_string(r->endpoint));
    lmc_json_object_set(status, "cluster", lmc_json_bool(r->cl != NULL));
    lmc_json_object_set(status, "db", lmc_json_int(r->db));
    lmc_json_object_set(status, "key_prefix", lmc_json_string(r->prefix));
    lmc_json_object_set(status, "connected", lmc_json_bool(connected));
    lmc_json_object_set(status, "live_connections", lmc_json_int(live));
    lmc_json_object_set(status, "connections", lmc_json_int(r->nconn));
    lmc_json_object_set(status, "last_error",
                        last_error[0] != '\0' ? lmc_json_string(last_error) : lmc_json_null());
    lmc_json_object_set(status, "connects", lmc_json_int((int64_t)reconnects));
    lmc_json_object_set(status, "failed_tasks", lmc_json_int((int64_t)failed));
    lmc_json_object_set(status, "locked_keys", lmc_json_int((int64_t)locked));
    lmc_json_object_set(status, "tracked_keys", lmc_json_int((int64_t)tracked));
    lmc_json_object_set(status, "pending_tasks", lmc_json_int((int64_t)pending));
    if (r->cl != NULL)
        lmc_resp_cluster_report_status(r->cl, status);
}

/* ------------------------------------------------------------------ */
/* Config, create, destroy                                              */
/* ------------------------------------------------------------------ */

static const char *const g_fields[] = {"host",
                                       "port",
                                       "unix_socket",
                                       "db",
                                       "password_env",
                                       "username_env",
                                       "key_prefix",
                                       "max_capacity_gb",
                                       "connections",
                                       "timeout_ms",
                                       "cluster",
                                       "nodes",
                                       NULL};

#define MAX_SEEDS 64

/* "nodes": a non-empty array of "host:port" strings; *n their number (0 when absent). */
static lmc_status nodes_field(const lmc_json *cfg, size_t *n, lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(cfg, "nodes");
    *n = 0;
    if (v == NULL)
        return LMC_OK;
    if (lmc_json_type_of(v) != LMC_JSON_ARRAY || lmc_json_size(v) == 0 ||
        lmc_json_size(v) > MAX_SEEDS)
        return lmc_l2_config_bad_value(err, TYPE, "nodes", v,
                                       "a non-empty array of at most 64 \"host:port\" strings");
    for (size_t i = 0; i < lmc_json_size(v); i++) {
        const lmc_json *e = lmc_json_array_at(v, i);
        size_t len = 0;
        const char *str = lmc_json_get_string(e, &len);
        char host[256], field[32];
        int port;
        if (str == NULL || strlen(str) != len ||
            !lmc_resp_parse_addr(str, len, false, host, sizeof(host), &port)) {
            snprintf(field, sizeof(field), "nodes[%zu]", i);
            return lmc_l2_config_bad_value(err, TYPE, field, e,
                                           "a \"host:port\" string with a port in [1, 65535]");
        }
    }
    *n = lmc_json_size(v);
    return LMC_OK;
}

/* How "cluster" combines with the other fields (each checked on its own before). */
static lmc_status cluster_fields(const lmc_json *cfg, size_t n_nodes, lmc_error *err)
{
    const lmc_json *cv = lmc_json_object_get(cfg, "cluster");
    bool cluster = cv != NULL && lmc_json_get_bool(cv);
    const lmc_json *db = lmc_json_object_get(cfg, "db");
    if (n_nodes > 0 &&
        (lmc_json_object_get(cfg, "host") != NULL || lmc_json_object_get(cfg, "port") != NULL ||
         lmc_json_object_get(cfg, "unix_socket") != NULL))
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: field 'nodes' of type '" TYPE
                             "' cannot be combined with 'host', 'port' or 'unix_socket'");
    if (cluster && lmc_json_object_get(cfg, "unix_socket") != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: field 'cluster' of type '" TYPE
                             "' cannot be combined with 'unix_socket' (cluster nodes are "
                             "reached over TCP)");
    if (cluster && db != NULL && lmc_json_get_int(db) != 0)
        return lmc_l2_config_bad_value(err, TYPE, "db", db,
                                       "0 with \"cluster\": true (a Redis Cluster has database "
                                       "0 only)");
    if (cv != NULL && !cluster && n_nodes > 1)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: field 'nodes' of type '" TYPE
                             "' lists %zu nodes; several nodes need \"cluster\": true",
                             n_nodes);
    return LMC_OK;
}

/* An integer in [min, max]; dflt when absent. */
static lmc_status int_field(const lmc_json *cfg, const char *field, int64_t min, int64_t max,
                            int64_t dflt, int64_t *out, lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(cfg, field);
    if (v == NULL) {
        *out = dflt;
        return LMC_OK;
    }
    if (lmc_json_type_of(v) != LMC_JSON_INT || lmc_json_get_int(v) < min ||
        lmc_json_get_int(v) > max) {
        char expectation[64];
        if (max == INT64_MAX)
            snprintf(expectation, sizeof(expectation), "an integer >= %" PRId64, min);
        else
            snprintf(expectation, sizeof(expectation), "an integer in [%" PRId64 ", %" PRId64 "]",
                     min, max);
        return lmc_l2_config_bad_value(err, TYPE, field, v, expectation);
    }
    *out = lmc_json_get_int(v);
    return LMC_OK;
}

/* The name of an environment variable that must be set; *value is its value (or NULL). */
static lmc_status env_field(const lmc_json *cfg, const char *field, const char **value,
                            lmc_error *err)
{
    const char *name;
    *value = NULL;
    lmc_status st = lmc_l2_config_string(cfg, TYPE, field, false, &name, err);
    if (st != LMC_OK || name == NULL)
        return st;
    *value = getenv(name);
    if (*value == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: field '%s' of type '" TYPE
                             "': environment variable '%s' is not set",
                             field, name);
    return LMC_OK;
}

static lmc_status resp_check_config(const lmc_json *cfg, lmc_error *err)
{
    const char *s;
    int64_t i;
    double d;
    lmc_status st = lmc_l2_config_check_fields(cfg, TYPE, g_fields, err);
    if (st == LMC_OK)
        st = lmc_l2_config_string(cfg, TYPE, "host", false, &s, err);
    if (st == LMC_OK)
        st = int_field(cfg, "port", 1, 65535, 6379, &i, err);
    if (st == LMC_OK)
        st = lmc_l2_config_string(cfg, TYPE, "unix_socket", false, &s, err);
    if (st == LMC_OK && s != NULL &&
        (lmc_json_object_get(cfg, "host") != NULL || lmc_json_object_get(cfg, "port") != NULL))
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "--l2-adapter: field 'unix_socket' of type '" TYPE
                           "' cannot be combined with 'host' or 'port'");
    if (st == LMC_OK)
        st = int_field(cfg, "db", 0, INT64_MAX, 0, &i, err);
    if (st == LMC_OK)
        st = env_field(cfg, "password_env", &s, err);
    if (st == LMC_OK)
        st = env_field(cfg, "username_env", &s, err);
    if (st == LMC_OK && s != NULL && lmc_json_object_get(cfg, "password_env") == NULL)
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "--l2-adapter: field 'username_env' of type '" TYPE
                           "' needs 'password_env' too (AUTH takes a username and a password)");
    if (st == LMC_OK) {
        const lmc_json *v = lmc_json_object_get(cfg, "key_prefix");
        size_t len = 0;
        s = v != NULL ? lmc_json_get_string(v, &len) : NULL;
        if (v != NULL && (s == NULL || strlen(s) != len))
            st = lmc_l2_config_bad_value(err, TYPE, "key_prefix", v,
                                         "a string without NUL characters");
    }
    if (st == LMC_OK)
        st = lmc_l2_config_number(cfg, TYPE, "max_capacity_gb", false, 0.0, false, 0.0, &d, err);
    if (st == LMC_OK)
        st = int_field(cfg, "connections", 1, 64, 4, &i, err);
    if (st == LMC_OK)
        st = int_field(cfg, "timeout_ms", 1, 600000, 2000, &i, err);
    bool b;
    size_t n_nodes = 0;
    if (st == LMC_OK)
        st = lmc_l2_config_bool(cfg, TYPE, "cluster", false, &b, err);
    if (st == LMC_OK)
        st = nodes_field(cfg, &n_nodes, err);
    if (st == LMC_OK)
        st = cluster_fields(cfg, n_nodes, err);
    return st;
}

static void resp_free(resp_adapter *r)
{
    if (r->ctl.c != NULL)
        redisFree(r->ctl.c);
    for (int i = 0; r->conns != NULL && i < r->nconn; i++) {
        if (r->conns[i].c != NULL)
            redisFree(r->conns[i].c);
    }
    for (int i = 0; r->csets != NULL && i < r->nconn; i++)
        lmc_resp_connset_destroy(r->cl, r->csets[i]);
    lmc_resp_connset_destroy(r->cl, r->ctl_cs);
    lmc_resp_cluster_destroy(r->cl);
    for (size_t i = 0; r->seeds != NULL && i < r->n_seeds; i++)
        free(r->seeds[i]);
    free(r->seeds);
    free(r->csets);
    lmc_keymap_destroy(r->locks);
    lmc_keymap_destroy(r->sizes);
    free(r->conns);
    free(r->host);
    free(r->unix_socket);
    free(r->prefix);
    if (r->password != NULL) {
        memset(r->password, 0, strlen(r->password)); /* do not leave the secret in freed memory */
        free(r->password);
    }
    free(r->username);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->ctl_lock);
    free(r);
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *oom = true;
    return d;
}

/* ------------------------------------------------------------------ */
/* Cluster mode                                                         */
/* ------------------------------------------------------------------ */

/* The cluster's callbacks (resp_cluster.h), on the thread that makes them. */
static redisContext *cluster_connect(void *ud, const char *host, int port, char *err, size_t len)
{
    return resp_connect(ud, host, port, NULL, 0, err, len);
}

static void cluster_error(void *ud, const char *msg)
{
    set_error(ud, false, "%s", msg);
}

static void cluster_usable(void *ud, bool usable)
{
    resp_adapter *r = ud;
    if (r->workers == NULL)
        return; /* create's first map: the workers start in the state it leaves */
    if (usable)
        LMC_INFO(COMPONENT, "cluster %s: nodes serve slots again", r->endpoint);
    else
        LMC_WARN(COMPONENT, "cluster %s: no node serving slots answers; tasks fail until one does",
                 r->endpoint);
    /* Up workers look now, so queued tasks fail at once; down ones look at their retry time. */
    lmc_l2_workers_check_links(r->workers);
}

/*
 * With "cluster" absent and one seed: does it say cluster_enabled:1? A
 * seed that does not answer cannot say; a single server is assumed (and
 * logged), as before cluster mode existed.
 */
static bool detect_cluster(resp_adapter *r)
{
    char why[256];
    sigpipe_guard guard;
    sigpipe_block(&guard);
    redisContext *c = resp_connect(r, r->host, r->port, NULL, 0, why, sizeof(why));
    int on = c != NULL ? lmc_resp_cluster_enabled(c) : -1;
    if (c != NULL)
        redisFree(c);
    sigpipe_restore(&guard);
    if (on < 0)
        LMC_WARN(COMPONENT,
                 "%s: %s; cannot tell whether it is a Redis Cluster node, so a single server is "
                 "assumed (set \"cluster\" to choose)",
                 r->endpoint, c != NULL ? "INFO cluster: no reply" : why);
    return on == 1;
}

/* The seeds, copied: "nodes", or host:port as the one seed. LMC_ERR_NOMEM. */
static lmc_status read_seeds(resp_adapter *r, const lmc_json *nodes)
{
    r->n_seeds = nodes != NULL ? lmc_json_size(nodes) : 1;
    r->seeds = calloc(r->n_seeds, sizeof(*r->seeds));
    if (r->seeds == NULL)
        return LMC_ERR_NOMEM;
    for (size_t i = 0; i < r->n_seeds; i++) {
        char one[300];
        if (nodes == NULL)
            snprintf(one, sizeof(one), "%s:%d", r->host, r->port);
        if ((r->seeds[i] =
                 strdup(nodes != NULL ? lmc_json_get_string(lmc_json_array_at(nodes, i), NULL)
                                      : one)) == NULL)
            return LMC_ERR_NOMEM;
    }
    return LMC_OK;
}

/* Build the cluster (the first map from the seeds) and the connsets; up[i]: usable. */
static lmc_status cluster_setup(resp_adapter *r, bool *up, lmc_error *err)
{
    size_t at = 0;
    for (size_t i = 0; i < r->n_seeds && at < sizeof(r->endpoint); i++)
        at += (size_t)snprintf(r->endpoint + at, sizeof(r->endpoint) - at, "%s%s", i ? "," : "",
                               r->seeds[i]);
    lmc_resp_cluster_config cc = {
        .seeds = (const char *const *)r->seeds,
        .n_seeds = r->n_seeds,
        .connect = cluster_connect,
        .on_error = cluster_error,
        .on_usable = cluster_usable,
        .ud = r,
        .window_cmds = WINDOW_CMDS,
        .window_bytes = WINDOW_BYTES,
        .instance = atomic_fetch_add(&g_monitors, 1),
    };
    sigpipe_guard guard;
    sigpipe_block(&guard);
    lmc_status st = lmc_resp_cluster_create(&cc, &r->cl, err);
    sigpipe_restore(&guard);
    if (st != LMC_OK)
        return st;
    r->csets = calloc((size_t)r->nconn, sizeof(*r->csets));
    r->ctl_cs = lmc_resp_connset_create();
    if (r->csets == NULL || r->ctl_cs == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r->nconn; i++) {
        if ((r->csets[i] = lmc_resp_connset_create()) == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        up[i] = lmc_resp_cluster_usable(r->cl);
    }
    r->reconnects = lmc_resp_cluster_get_stats(r->cl).connects;
    return LMC_OK;
}

/*
 * One server: connect here, so a task submitted right after create finds
 * Redis ready; stop at the first failure (a Redis that is down is not an
 * error: the workers keep retrying, and create must not wait out a
 * timeout per connection).
 */
static void single_setup(resp_adapter *r, bool *up)
{
    sigpipe_guard guard;
    sigpipe_block(&guard);
    bool reachable = true;
    int live = 0;
    for (int i = 0; i < r->nconn; i++) {
        r->conns[i].backoff_ms = BACKOFF_MIN_MS;
        up[i] = reachable && conn_open(r, &r->conns[i]);
        reachable = up[i];
        live += up[i];
    }
    sigpipe_restore(&guard);
    r->reconnects = (uint64_t)live;
}

static lmc_status resp_create(lmc_l2_adapter *base, const lmc_json *cfg, void **impl,
                              lmc_error *err)
{
    const char *host, *sock, *password, *username;
    int64_t port, db, nconn, timeout_ms;
    double gb;
    bool oom = false;
    lmc_status st = LMC_OK;
    resp_adapter *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type '" TYPE "': out of memory");
    r->base = base;
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->ctl_lock, NULL);

    /* Validated by the base, except the environment, which is read again here. */
    lmc_l2_config_string(cfg, TYPE, "host", false, &host, NULL);
    int_field(cfg, "port", 1, 65535, 6379, &port, NULL);
    lmc_l2_config_string(cfg, TYPE, "unix_socket", false, &sock, NULL);
    int_field(cfg, "db", 0, INT64_MAX, 0, &db, NULL);
    if ((st = env_field(cfg, "password_env", &password, err)) != LMC_OK ||
        (st = env_field(cfg, "username_env", &username, err)) != LMC_OK)
        goto fail;
    const lmc_json *pv = lmc_json_object_get(cfg, "key_prefix");
    const char *prefix = pv != NULL ? lmc_json_get_string(pv, NULL) : "lmcache:";
    lmc_l2_config_number(cfg, TYPE, "max_capacity_gb", false, 0.0, false, 0.0, &gb, NULL);
    int_field(cfg, "connections", 1, 64, 4, &nconn, NULL);
    int_field(cfg, "timeout_ms", 1, 600000, 2000, &timeout_ms, NULL);
    const lmc_json *nodes = lmc_json_object_get(cfg, "nodes");
    const lmc_json *cv = lmc_json_object_get(cfg, "cluster");

    /* With "nodes", the first is the one server when there is no cluster. */
    char seed_host[256];
    int seed_port = 0;
    if (nodes != NULL) {
        const char *first = lmc_json_get_string(lmc_json_array_at(nodes, 0), NULL);
        lmc_resp_parse_addr(first, strlen(first), false, seed_host, sizeof(seed_host), &seed_port);
        host = seed_host;
        port = seed_port;
    }
    r->host = dup_or_null(host != NULL ? host : "127.0.0.1", &oom);
    r->port = (int)port;
    r->unix_socket = dup_or_null(sock, &oom);
    r->db = db;
    r->password = dup_or_null(password, &oom);
    r->username = dup_or_null(username, &oom);
    r->prefix = dup_or_null(prefix, &oom);
    r->prefix_len = r->prefix != NULL ? strlen(r->prefix) : 0;
    /* Clamped: converting a double beyond the range of uint64_t is undefined. */
    r->capacity = gb * GIB >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)(gb * GIB);
    r->nconn = (int)nconn;
    r->timeout_ms = (int)timeout_ms;
    if (sock != NULL)
        snprintf(r->endpoint, sizeof(r->endpoint), "unix:%s", sock);
    else
        snprintf(r->endpoint, sizeof(r->endpoint), "%s:%d", r->host ? r->host : "?", r->port);
    r->locks = lmc_keymap_create(0);
    r->sizes = r->capacity > 0 ? lmc_keymap_create(0) : NULL;
    r->conns = calloc((size_t)r->nconn, sizeof(*r->conns));
    if (oom || r->locks == NULL || (r->capacity > 0 && r->sizes == NULL) || r->conns == NULL ||
        (sock == NULL && read_seeds(r, nodes) != LMC_OK)) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type '" TYPE "': out of memory");
        goto fail;
    }
    r->ctl.backoff_ms = BACKOFF_MIN_MS;
    lmc_l2_adapter_set_capacity(base, r->capacity);

    /* Cluster mode: as configured; else several seeds mean a cluster; else ask the one seed. */
    bool cluster = cv != NULL       ? lmc_json_get_bool(cv)
                   : sock != NULL   ? false
                   : r->n_seeds > 1 ? true
                                    : detect_cluster(r);
    if (cluster && r->db != 0) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "--l2-adapter: field 'db' of type '" TYPE "' must be 0: %s is a Redis "
                           "Cluster node (a cluster has database 0 only)",
                           r->endpoint);
        goto fail;
    }
    bool up[64]; /* connections <= 64 (resp_check_config) */
    if (cluster && (st = cluster_setup(r, up, err)) != LMC_OK) {
        lmc_error_prefix(err, "--l2-adapter: type '" TYPE "'");
        goto fail;
    }
    if (!cluster)
        single_setup(r, up);

    lmc_l2_workers_config wc = {
        .name = "l2-resp",
        .instances = &g_instances,
        .threads = (size_t)r->nconn,
        .base = base,
        .hooks = {.run = {[LMC_L2_TASK_LOOKUP] = run_lookup,
                          [LMC_L2_TASK_LOAD] = run_load,
                          [LMC_L2_TASK_STORE] = run_store},
                  .link = resp_link},
        .ud = r,
        .idle_check_ns = (uint64_t)PING_IDLE_MS * 1000000u,
        .up_at_start = up,
    };
    if ((st = lmc_l2_workers_start(&wc, &r->workers, err)) != LMC_OK) {
        lmc_error_prefix(err, "--l2-adapter: type '" TYPE "'");
        goto fail;
    }
    /* The monitor calls back into the workers, so it starts once they exist. */
    if (r->cl != NULL && (st = lmc_resp_cluster_start(r->cl, err)) != LMC_OK) {
        lmc_error_prefix(err, "--l2-adapter: type '" TYPE "'");
        lmc_l2_workers_destroy(r->workers);
        goto fail;
    }
    *impl = r;
    return LMC_OK;

fail:
    resp_free(r);
    return st;
}

static void resp_destroy(void *impl)
{
    resp_adapter *r = impl;
    if (r == NULL)
        return;
    /* The monitor first: it calls into the workers. */
    lmc_resp_cluster_stop(r->cl);
    /* Running tasks finish (bounded by timeout_ms per exchange); queued ones fail. */
    lmc_l2_workers_destroy(r->workers);
    resp_free(r);
}

const lmc_l2_adapter_ops lmc_l2_resp_ops = {
    .type = TYPE,
    .help = "Redis/Valkey over RESP: {\"type\": \"resp\", \"host\": H, \"port\": P, "
            "\"unix_socket\": PATH, \"db\": N, \"password_env\": VAR, \"username_env\": VAR, "
            "\"key_prefix\": S, \"max_capacity_gb\": N, \"connections\": 1-64, \"timeout_ms\": N, "
            "\"cluster\": BOOL, \"nodes\": [\"HOST:PORT\", ...]}",
    .check_config = resp_check_config,
    .create = resp_create,
    .submit = resp_submit,
    .submit_unlock = resp_submit_unlock,
    .delete_keys = resp_delete_keys,
    .report_status = resp_report_status,
    .is_healthy = resp_is_healthy,
    .destroy = resp_destroy,
    .replay_recovered = NULL,
    .virtual_latency_us = 100.0,
    .virtual_bandwidth_gbps = 1.0,
};
