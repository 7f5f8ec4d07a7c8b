/*
 * server.c -- `lmcache server`: the loop thread and the worker pool (see
 * server.h).
 *
 * Owns: the client connections and the loop (the calling thread of
 * lmc_server_run), the job queue and the worker threads, reply
 * forwarding, the session timers, shutdown, and the server's parts: the
 * StorageManager, the request logic (engine.c), the regions (regions.c),
 * and -- when tracing is on -- the event bus and the recorder.
 *
 * Transport: a ZMQ_STREAM socket gives the loop every connection's raw
 * bytes and its connects and disconnects; zmtp.c speaks ZMTP 3 over them,
 * so clients see an ordinary ROUTER. The server, not libzmq, decides what
 * it buffers: at most --max-connections connections (more are closed at
 * once), --max-message-bytes per request, --max-buffered-mb of requests
 * received and not yet answered across all connections (a request past it
 * is read to its end, not kept, and answered "busy"), and
 * --message-timeout-s to send one request once begun; a connection that
 * has not finished its handshake after HANDSHAKE_TIMEOUT_MS is closed.
 * libzmq itself keeps at most ZMQ_RCVHWM raw chunks per connection.
 *
 * Connections: the table numbers each one (lmc_request.conn_id, never
 * reused) and keeps its socket's fd and SO_COOKIE, so that the uid of the
 * client's process (peer_uid.h, the region rule of regions.h) is asked of
 * the kernel on its own socket at its first register_kv_cache; when the
 * table drops a connection, lmc_op_connection_closed releases what it left
 * (its regions).
 *
 * Request path: the loop thread feeds a connection's bytes to its parser;
 * a whole message [uid, op, payload...] is either answered right there (an
 * operation ops.def marks as a loop-thread one, when the message is small)
 * or queued as a job; a worker decodes it (protocol.c), runs its handler
 * (ops.c), and sends [routing id, uid, op, response] back through its
 * inproc PUSH socket; the loop frames it as ZMTP and writes it to the
 * connection. The uid and op frames are echoed as received, so a client can
 * match even an error reply to its request.
 *
 * Threads and locks: ZMQ sockets stay on their thread (the STREAM and PULL
 * on the loop, a PUSH per worker); the connections are the loop's alone;
 * q_mu guards the queue, the in-flight count and the buffered-bytes count.
 * "l1-prefault" faults the L1 pool in after the start (prefault_main); it
 * touches nothing but the pool's page tables and its stop flag. The
 * "copy-helper" threads (copy_pool.c) take chunks of a worker's store or
 * retrieve copy while the worker waits for none of them.
 * lmc_server_stop may be called from a signal handler.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/file.h"
#include "core/log.h"
#include "lmcache/storage_manager.h"
#include "obs/event_bus.h"
#include "server/copy_pool.h"
#include "server/engine.h"
#include "server/ops.h"
#include "server/peer_uid.h"
#include "server/protocol.h"
#include "server/regions.h"
#include "server/zmtp.h"
#include "storage/config.h" /* the config digest for the trace header */
#include "trace/capture.h"
#include "trace/lifecycle.h"
#include "trace/recorder.h"

#define LOG_COMP "server"

/* libzmq's STREAM routing ids are 5 bytes; anything up to this is kept. */
#define ROUTING_ID_MAX 32
/* A connection that has not finished its ZMTP handshake by then is closed. */
#define HANDSHAKE_TIMEOUT_MS 10000
/* libzmq stores a message of up to 33 bytes in the zmq_msg_t itself (its VSM). */
#define HELLO_PIECE 32
/* Raw chunks (of up to 8 KiB) libzmq may queue per connection before TCP pushes back. */
#define STREAM_RCVHWM 16
/* File descriptors kept for everything but client connections (L2 files, regions, ...). */
#define RESERVED_FDS 256
/* Messages the loop reads from the STREAM socket before it looks at replies again. */
#define READ_BATCH 256
/* The loop thread answers its operations itself only for messages up to this size. */
#define LOOP_MAX_MESSAGE 65536
/* At most one warning per this long about refused connections or requests. */
#define WARN_EVERY_MS 10000
/* Failed requests logged one by one per WARN_EVERY_MS; the rest are counted. */
#define LOG_BURST 20
/*
 * A store or retrieve of fewer bytes is copied by its worker alone: waking
 * a helper costs tens of microseconds on a guest whose idle vCPUs halt,
 * about what copying 1 MiB takes.
 */
#define COPY_SHARE_MIN_BYTES ((size_t)1 << 20)
/* Blocks from this size on are mapped on their own (see lmc_server_create). */
#define MMAP_THRESHOLD (256u << 10)
/* After clients made the server hold this much, freed memory goes back to the system. */
#define TRIM_AFTER_BYTES (8u << 20)

typedef struct conn {
    struct conn *next;
    struct lmc_server *s;
    /* Under the server's q_mu: its requests not yet answered; freed at 0 once dropped. */
    size_t pending;
    bool dropped;
    uint8_t id[ROUTING_ID_MAX];
    size_t id_len;
    uint64_t conn_id; /* the server's own number for it: never reused */
    uint64_t opened_ms;
    /*
     * Its socket: ZMQ_SRCFD of the connect notification (-1 unknown), the
     * SO_COOKIE of the socket on that fd then, and the next connection
     * that was told the same fd number (a closed one whose fd was given to
     * a newer one before its messages were all read); for the peer's uid
     * (peer_uid.h), looked up at the first register_kv_cache and kept.
     */
    int fd;
    uint64_t cookie;
    struct conn *fd_next;
    int64_t uid;
    bool uid_looked_up;
    lmc_zmtp_conn z;
    lmc_zmtp_handler h; /* zmtp.c's callbacks, ud = this conn */
} conn;

#define CONN_BUCKETS 4096

typedef struct job {
    struct job *next;
    conn *c;                    /* stays allocated until this job is freed */
    uint8_t id[ROUTING_ID_MAX]; /* the connection's routing id, for the reply */
    size_t id_len;
    uint64_t conn_id;
    lmc_zmtp_message msg; /* [uid, op, payload...] */
    size_t budget;        /* bytes counted against --max-buffered-mb until it is answered */
    int64_t peer_uid;     /* its connection's peer (register_kv_cache only), -1 unknown */
} job;

struct lmc_server {
    lmc_server_config cfg;
    lmc_storage_manager *sm;
    lmc_engine *engine;
    lmc_regions *regions;
    lmc_copy_pool *copies;
    lmc_op_ctx ops;
    lmc_event_bus *bus;
    lmc_trace_recorder *recorder;
    void *zctx;
    void *stream;
    void *pull;
    int stop_fd;        /* eventfd written by lmc_server_stop */
    int counters_fd;    /* --counters-output, opened at create and written at shutdown; or -1 */
    pthread_t prefault; /* "l1-prefault" (see prefault_main), if prefault_started */
    bool prefault_started;
    atomic_bool prefault_stop;
    pthread_t *workers;
    int n_workers;

    /* The loop's: connections by routing id, and the live ones told each fd number. */
    conn *conns[CONN_BUCKETS];
    size_t n_conns;
    conn **by_fd;
    size_t by_fd_cap;
    bool warned_uid;
    uint64_t next_conn_id;
    uint64_t refused_conns, refused_msgs; /* since the last warning */
    uint64_t next_warn_ms;

    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    job *q_head, *q_tail;
    size_t q_len;
    size_t in_flight;
    bool q_closed;
    size_t buffered; /* bytes of requests received and not yet answered */
    size_t max_buffered;
    size_t held_peak; /* bytes clients made it hold, highest since the last malloc_trim */
    uint64_t requests_seen, requests_trimmed; /* request counts at the last check and trim */

    /* Warnings about failed requests: at most LOG_BURST per WARN_EVERY_MS (a client can
     * fail requests as fast as it sends them). */
    pthread_mutex_t log_mu;
    uint64_t log_window_ms;
    unsigned log_used;
    uint64_t log_suppressed;
};

lmc_server_counters lmc_server_get_counters(lmc_server *s)
{
    return lmc_counters_get(lmc_engine_counters(s->engine));
}

/* ---------------------------------------------------------------------- */
/* The buffered-bytes budget (zmtp.h's reserve/release)                    */
/* ---------------------------------------------------------------------- */

static bool budget_reserve(void *ud, size_t bytes)
{
    lmc_server *s = ud;
    pthread_mutex_lock(&s->q_mu);
    bool ok = bytes <= s->max_buffered - s->buffered;
    if (ok)
        s->buffered += bytes;
    if (s->buffered > s->held_peak)
        s->held_peak = s->buffered;
    pthread_mutex_unlock(&s->q_mu);
    return ok;
}

static void budget_release(void *ud, size_t bytes)
{
    lmc_server *s = ud;
    pthread_mutex_lock(&s->q_mu);
    s->buffered -= bytes;
    pthread_mutex_unlock(&s->q_mu);
}

/* ---------------------------------------------------------------------- */
/* Replies                                                                 */
/* ---------------------------------------------------------------------- */

/* Frame i of a job's message (uid 0, op 1), or a msgpack nil when it is missing. */
static void job_frame(const job *j, size_t i, const void **data, size_t *len)
{
    if (i < j->msg.n_frames) {
        *data = j->msg.data + j->msg.off[i];
        *len = j->msg.len[i];
    } else {
        *data = "\xc0";
        *len = 1;
    }
}

/* Write [uid, op, response] to the connection id as one ZMTP message (the loop thread only). */
static void send_to_client(lmc_server *s, const void *id, size_t id_len, const void *const *frames,
                           const size_t *lens)
{
    size_t n = lmc_zmtp_encoded_size(lens, 3);
    uint8_t stack[1024];
    uint8_t *buf = n <= sizeof(stack) ? stack : malloc(n);
    if (buf == NULL)
        return; /* the client's call times out */
    lmc_zmtp_encode(buf, frames, lens, 3);
    /* An unknown id (the connection is gone) fails on the id frame: nothing else is sent. */
    if (zmq_send(s->stream, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(s->stream, buf, n, ZMQ_DONTWAIT);
    if (buf != stack)
        free(buf);
}

/*
 * Answer a job: through push (a worker's PUSH socket) as [routing id, uid,
 * op, response], or -- push NULL, on the loop thread -- straight to the
 * client.
 */
static void reply(lmc_server *s, void *push, const job *j, const void *resp, size_t resp_len)
{
    const void *f[3];
    size_t l[3];
    job_frame(j, 0, &f[0], &l[0]);
    job_frame(j, 1, &f[1], &l[1]);
    f[2] = resp;
    l[2] = resp_len;
    if (push == NULL) {
        send_to_client(s, j->id, j->id_len, f, l);
        return;
    }
    zmq_send(push, j->id, j->id_len, ZMQ_SNDMORE);
    zmq_send(push, f[0], l[0], ZMQ_SNDMORE);
    zmq_send(push, f[1], l[1], ZMQ_SNDMORE);
    zmq_send(push, f[2], l[2], 0);
}

/* An error answer for a request that never reaches a handler. */
static void reply_error(lmc_server *s, const job *j, const char *message)
{
    msgpack_sbuffer resp;
    msgpack_sbuffer_init(&resp);
    lmc_response_error(&resp, message);
    reply(s, NULL, j, resp.data, resp.size);
    msgpack_sbuffer_destroy(&resp);
    LMC_COUNT(lmc_engine_counters(s->engine), errors, 1);
}

/* Forget one answered request of c; c itself goes with its last one once dropped. */
static void conn_unref(lmc_server *s, conn *c)
{
    pthread_mutex_lock(&s->q_mu);
    c->pending--;
    bool last = c->dropped && c->pending == 0;
    pthread_mutex_unlock(&s->q_mu);
    if (last)
        free(c);
}

static void job_free(lmc_server *s, job *j)
{
    budget_release(s, j->budget);
    if (j->c != NULL)
        conn_unref(s, j->c);
    free(j->msg.data);
    free(j);
}

/* Whether a failed request may be logged now (rate-limited; the rest are counted). */
static bool may_log_failure(lmc_server *s)
{
    uint64_t now = lmc_mono_ms();
    pthread_mutex_lock(&s->log_mu);
    if (now - s->log_window_ms >= WARN_EVERY_MS) {
        if (s->log_suppressed > 0)
            LMC_WARN(LOG_COMP, "%llu more failed requests were not logged one by one",
                     (unsigned long long)s->log_suppressed);
        s->log_window_ms = now;
        s->log_used = 0;
        s->log_suppressed = 0;
    }
    bool ok = s->log_used < LOG_BURST;
    if (ok)
        s->log_used++;
    else
        s->log_suppressed++;
    pthread_mutex_unlock(&s->log_mu);
    return ok;
}

/* Whether the connection table has dropped c (any thread; c is kept by a job). */
static bool conn_is_dropped(lmc_server *s, conn *c)
{
    pthread_mutex_lock(&s->q_mu);
    bool dropped = c == NULL || c->dropped;
    pthread_mutex_unlock(&s->q_mu);
    return dropped;
}

/* Count a failed request, and log it unless too many have been logged lately. */
static void note_failure(lmc_server *s, const lmc_request *q, const lmc_error *err,
                         const char *when)
{
    LMC_COUNT(lmc_engine_counters(s->engine), errors, 1);
    if (may_log_failure(s))
        LMC_WARN(LOG_COMP, "request %lld (%s) failed%s: %s", (long long)q->uid,
                 lmc_op_name(q->op) ? lmc_op_name(q->op) : "?", when, err->msg);
}

/*
 * Decode, execute and answer one request. On the loop thread (push NULL)
 * a lookup is answered before its hashing (ops.h: lmc_op_execute_early);
 * that work is done here before the loop reads anything else. A worker's
 * reply goes through the loop, which may read the client's next request
 * before the worker is done, so a worker finishes first.
 */
static void run_job(lmc_server *s, void *push, job *j)
{
    msgpack_sbuffer resp;
    msgpack_sbuffer_init(&resp);
    lmc_error err;
    lmc_error_clear(&err);
    lmc_request q;
    const void *frames[LMC_ZMTP_MAX_FRAMES];
    size_t lens[LMC_ZMTP_MAX_FRAMES];
    size_t n = j->msg.n_frames;
    for (size_t i = 0; i < n; i++) {
        frames[i] = j->msg.data + j->msg.off[i];
        lens[i] = j->msg.len[i];
    }
    lmc_op_later *later = NULL;
    lmc_status st = lmc_request_decode(frames, lens, n, &q, &err);
    q.conn_id = j->conn_id;
    q.peer_uid = j->peer_uid;
    if (st == LMC_OK)
        st = push == NULL ? lmc_op_execute_early(&s->ops, &q, &resp, &later, &err)
                          : lmc_op_execute(&s->ops, &q, &resp, &err);
    if (st == LMC_OK && q.op == LMC_OP_REGISTER_KV_CACHE && conn_is_dropped(s, j->c))
        /* Its connection closed while a worker registered (a large message): its regions
         * were released before this one existed, so release this one too. */
        lmc_op_connection_closed(&s->ops, j->conn_id);
    LMC_COUNT(lmc_engine_counters(s->engine), requests, 1);
    if (st != LMC_OK) {
        resp.size = 0;
        lmc_response_error(&resp, err.msg[0] ? err.msg : lmc_status_str(st));
        note_failure(s, &q, &err, "");
    }
    reply(s, push, j, resp.data, resp.size);
    msgpack_sbuffer_destroy(&resp);
    if (lmc_op_finish(&s->ops, later, &err) != LMC_OK)
        note_failure(s, &q, &err, " after its reply (its request reads as unknown)");
    lmc_request_free(&q);
}

static void *worker_main(void *arg)
{
    lmc_server *s = arg;
    pthread_setname_np(pthread_self(), "lmc-worker");
    void *push = zmq_socket(s->zctx, ZMQ_PUSH);
    int linger = 1000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_connect(push, "inproc://lmcache-replies");
    for (;;) {
        pthread_mutex_lock(&s->q_mu);
        while (s->q_head == NULL && !s->q_closed)
            pthread_cond_wait(&s->q_cv, &s->q_mu);
        job *j = s->q_head;
        if (j == NULL) { /* closed and drained */
            pthread_mutex_unlock(&s->q_mu);
            break;
        }
        s->q_head = j->next;
        if (s->q_head == NULL)
            s->q_tail = NULL;
        s->q_len--;
        s->in_flight++;
        pthread_mutex_unlock(&s->q_mu);
        run_job(s, push, j);
        job_free(s, j);
        pthread_mutex_lock(&s->q_mu);
        s->in_flight--;
        pthread_mutex_unlock(&s->q_mu);
    }
    zmq_close(push);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Lifecycle                                                               */
/* ---------------------------------------------------------------------- */

/* Whether host names this machine's loopback only (127.0.0.0/8, ::1, localhost). */
static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    const char *h = host;
    char buf[INET6_ADDRSTRLEN + 2];
    size_t n = strlen(host);
    if (n > 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(buf)) {
        memcpy(buf, host + 1, n - 2);
        buf[n - 2] = '\0';
        h = buf;
    }
    return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/*
 * Room for max_connections client sockets beside the server's own files:
 * raise the soft RLIMIT_NOFILE toward the hard one if needed, or say that
 * connections will run out of descriptors first.
 */
static void reserve_fds(uint64_t max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t need = (rlim_t)max_connections + RESERVED_FDS;
    if (rl.rlim_cur >= need)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need)
        LMC_WARN(LOG_COMP,
                 "--max-connections %llu needs %llu file descriptors but the limit is %llu: "
                 "lower --max-connections or raise ulimit -n",
                 (unsigned long long)max_connections, (unsigned long long)need,
                 (unsigned long long)rl.rlim_cur);
}

/*
 * The pool is faulted in this much at a time (one huge page). Each step holds
 * the process's mmap lock for reading, and while it does, any mmap or munmap
 * of the server's (a region's mapping, a large request buffer) waits, and
 * behind that waiting writer every other thread's page faults: in 64 MiB
 * steps requests that came during the prefault stalled for up to 1.3 s on a
 * guest whose host takes memory back, in 2 MiB steps for 40-80 ms
 * (docs/benchmarks.md, "The first store into a page"). A stop also waits
 * for one step at most.
 */
#define PREFAULT_STEP ((uint64_t)2 << 20)

/*
 * Thread "l1-prefault": fault the whole L1 pool in, PREFAULT_STEP at a time,
 * at the lowest priority, so that stores find their pages mapped. The pool
 * is mapped lazily, and a page's first touch is a fault that zeroes it: 0.66
 * GB/s on a guest whose host takes freed memory back (docs/benchmarks.md,
 * "The first store into a page"), where a store of warm pages copies at
 * 8 GB/s. Requests go first: the thread only takes what the workers leave.
 */
static void *prefault_main(void *arg)
{
    lmc_server *s = arg;
    pthread_setname_np(pthread_self(), "l1-prefault");
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    uint64_t used, total, done = 0, t0 = lmc_mono_ns();
    lmc_sm_l1_usage(s->sm, &used, &total);
    lmc_error err;
    while (done < total && !atomic_load_explicit(&s->prefault_stop, memory_order_relaxed)) {
        uint64_t n = total - done < PREFAULT_STEP ? total - done : PREFAULT_STEP;
        if (lmc_sm_l1_populate(s->sm, done, n, &err) != LMC_OK) {
            LMC_WARN(LOG_COMP, "%s: the first store into each page faults it in instead", err.msg);
            return NULL;
        }
        done += n;
    }
    if (done == total)
        LMC_INFO(LOG_COMP, "L1 pool faulted in: %.2f GiB in %.2f s", (double)total / (1u << 30),
                 (double)(lmc_mono_ns() - t0) / 1e9);
    return NULL;
}

/* Start prefault_main unless --no-l1-prefault or the pool is larger than the machine's memory. */
static void prefault_start(lmc_server *s)
{
    if (s->cfg.no_l1_prefault)
        return;
    if (!lmc_server_l1_fits_in_ram(s->cfg.sm.l1_size_bytes)) {
        LMC_INFO(LOG_COMP, "the L1 pool is larger than physical memory (--allow-l1-over-ram): "
                           "not faulting it in ahead");
        return;
    }
    s->prefault_started = pthread_create(&s->prefault, NULL, prefault_main, s) == 0;
    if (!s->prefault_started)
        LMC_WARN(LOG_COMP, "cannot start the L1 prefault thread: stores fault the pool in");
}

lmc_status lmc_server_create(const lmc_server_config *cfg, lmc_server **out, lmc_error *err)
{
    lmc_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    s->cfg = *cfg;
    s->stop_fd = -1;
    s->counters_fd = -1;
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_cond_init(&s->q_cv, NULL);
    pthread_mutex_init(&s->log_mu, NULL);
    lmc_status st = LMC_OK;

    /* Tracing first, so the StorageManager's first call is recorded. */
    if (cfg->trace_level != NULL) {
        lmc_event_bus_config bc = {.enabled = true, .max_queue_size = cfg->event_bus_queue_size};
        if ((st = lmc_event_bus_create(&bc, &s->bus, err)) != LMC_OK)
            goto fail;
        char *json = NULL;
        char digest[65] = "";
        if ((st = lmc_sm_config_digest(&cfg->sm, &json, digest)) != LMC_OK) {
            lmc_error_set(err, st, "server: cannot serialise the StorageManager config");
            goto fail;
        }
        st = lmc_trace_maybe_init(s->bus, cfg->trace_level, cfg->trace_output, json, digest,
                                  &s->recorder, err);
        free(json);
        if (st != LMC_OK)
            goto fail;
        if ((st = lmc_event_bus_start(s->bus)) != LMC_OK) {
            lmc_error_set(err, st, "server: cannot start the event bus");
            goto fail;
        }
    }
    if ((st = lmc_sm_create(&cfg->sm, &s->sm, err)) != LMC_OK ||
        (st = lmc_engine_create(s->sm, cfg->chunk_size, &cfg->limits,
                                cfg->sm.read_ttl_seconds * 1000, &s->engine, err)) != LMC_OK ||
        (st = lmc_regions_create(cfg->chunk_size, &s->regions, err)) != LMC_OK ||
        (st = lmc_copy_pool_create(lmc_server_copy_threads(cfg) - 1, COPY_SHARE_MIN_BYTES,
                                   &s->copies, err)) != LMC_OK)
        goto fail;
    s->ops = (lmc_op_ctx){.engine = s->engine, .regions = s->regions, .copies = s->copies};

    s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->zctx = zmq_ctx_new();
    if (s->stop_fd < 0 || s->zctx == NULL) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot create the ZMQ context");
        goto fail;
    }
    s->max_buffered = (size_t)cfg->limits.max_buffered_mb << 20;
    /*
     * Large blocks (a lookup's keys, a request's frames) straight from mmap,
     * so they go back to the system when freed: glibc otherwise raises its
     * mmap threshold after the first large free and keeps later ones in its
     * heap, and the RSS stays at what a client once made the server hold.
     */
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    s->next_conn_id = 1;
    reserve_fds(cfg->limits.max_connections);
    s->stream = zmq_socket(s->zctx, ZMQ_STREAM);
    s->pull = zmq_socket(s->zctx, ZMQ_PULL);
    int linger = 0, hwm = STREAM_RCVHWM;
    zmq_setsockopt(s->stream, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_setsockopt(s->stream, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    char endpoint[300];
    snprintf(endpoint, sizeof(endpoint), "tcp://%s:%d", cfg->host, cfg->port);
    if (zmq_bind(s->stream, endpoint) != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot bind %s: %s", endpoint,
                           zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zmq_bind(s->pull, "inproc://lmcache-replies") != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot bind the reply socket");
        goto fail;
    }
    /* Now, not at shutdown, so that a path that cannot be written stops the start
     * rather than a long run's last line (never through a planted link, mode 0600:
     * core/file.h). */
    if (cfg->counters_output != NULL &&
        (st = lmc_file_create("--counters-output", cfg->counters_output, false, &s->counters_fd,
                              err)) != LMC_OK)
        goto fail;
    s->workers = calloc((size_t)cfg->max_workers, sizeof(*s->workers));
    if (s->workers == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
        goto fail;
    }
    for (int i = 0; i < cfg->max_workers; i++) {
        if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0) {
            st = lmc_error_set(err, LMC_ERR_IO, "server: cannot start worker %d", i);
            goto fail;
        }
        s->n_workers++;
    }
    if (!is_loopback(cfg->host))
        LMC_WARN(LOG_COMP,
                 "--host %s is not a loopback address and the server has no authentication: "
                 "anyone who can reach %s can read and overwrite the cache, fill it, and make "
                 "the server map shared memory; bind to 127.0.0.1 unless every host on that "
                 "network is trusted (docs/security.md)",
                 cfg->host, endpoint);
    LMC_INFO(LOG_COMP,
             "lmcache server listening on %s (chunk size %d, %d worker(s), %d copy thread(s) "
             "per transfer%s%s)",
             endpoint, cfg->chunk_size, cfg->max_workers, lmc_copy_pool_helpers(s->copies) + 1,
             s->recorder ? ", tracing to " : "",
             s->recorder ? lmc_trace_recorder_path(s->recorder) : "");
    prefault_start(s);
    *out = s;
    return LMC_OK;

fail:
    lmc_server_destroy(s);
    return st;
}

void lmc_server_stop(lmc_server *s)
{
    uint64_t one = 1;
    ssize_t r = write(s->stop_fd, &one, sizeof(one));
    (void)r;
}

/* Forward the workers' replies ([routing id, uid, op, response]) to their clients. */
static void forward_replies(lmc_server *s)
{
    for (;;) {
        zmq_msg_t m[4];
        size_t n = 0;
        int more = 1;
        while (more) {
            zmq_msg_t x;
            zmq_msg_init(&x);
            if (zmq_msg_recv(&x, s->pull, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
                zmq_msg_close(&x);
                if (n == 0)
                    return;
                break;
            }
            more = zmq_msg_more(&x);
            if (n < 4)
                m[n++] = x;
            else
                zmq_msg_close(&x);
        }
        if (n == 4) {
            const void *f[3] = {zmq_msg_data(&m[1]), zmq_msg_data(&m[2]), zmq_msg_data(&m[3])};
            size_t l[3] = {zmq_msg_size(&m[1]), zmq_msg_size(&m[2]), zmq_msg_size(&m[3])};
            send_to_client(s, zmq_msg_data(&m[0]), zmq_msg_size(&m[0]), f, l);
        }
        for (size_t i = 0; i < n; i++)
            zmq_msg_close(&m[i]);
    }
}

/* ---------------------------------------------------------------------- */
/* Connections (the loop thread's alone)                                   */
/* ---------------------------------------------------------------------- */

static size_t conn_bucket(const uint8_t *id, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ id[i]) * 1099511628211ull;
    return (size_t)(h % CONN_BUCKETS);
}

static conn *conn_find(lmc_server *s, const uint8_t *id, size_t len)
{
    for (conn *c = s->conns[conn_bucket(id, len)]; c; c = c->next)
        if (c->id_len == len && memcmp(c->id, id, len) == 0)
            return c;
    return NULL;
}

/* Forget a connection (its half-received message is dropped); close it unless the peer did. */
static void conn_drop(lmc_server *s, conn *c, bool close_it)
{
    conn **link = &s->conns[conn_bucket(c->id, c->id_len)];
    while (*link != c)
        link = &(*link)->next;
    *link = c->next;
    s->n_conns--;
    lmc_zmtp_conn_free(&c->z, &c->h);
    if (close_it && zmq_send(s->stream, c->id, c->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(s->stream, "", 0, ZMQ_DONTWAIT); /* an empty message closes it */
    if (c->fd >= 0) {
        conn **fl = &s->by_fd[c->fd];
        while (*fl != c)
            fl = &(*fl)->fd_next;
        *fl = c->fd_next;
    }
    uint64_t conn_id = c->conn_id;
    pthread_mutex_lock(&s->q_mu);
    c->dropped = true;
    bool unused = c->pending == 0;
    pthread_mutex_unlock(&s->q_mu);
    if (unused)
        free(c); /* else its last job frees it */
    /* What the connection left (its regions) goes now; after dropped is set (see run_job). */
    lmc_op_connection_closed(&s->ops, conn_id);
}

/* The SO_COOKIE of socket fd (the kernel's number for the socket, never reused), 0 if unknown. */
static uint64_t socket_cookie(int fd)
{
    uint64_t cookie = 0;
    socklen_t len = sizeof(cookie);
    if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0)
        cookie = 0;
    return cookie;
}

/* Note that connection c came in on socket fd (the connect notification's ZMQ_SRCFD). */
static void conn_set_fd(lmc_server *s, conn *c, int fd)
{
    c->fd = -1;
    c->uid = -1;
    if (fd < 0)
        return;
    if ((size_t)fd >= s->by_fd_cap) {
        size_t cap = s->by_fd_cap ? s->by_fd_cap : 64;
        while (cap <= (size_t)fd)
            cap *= 2;
        conn **t = realloc(s->by_fd, cap * sizeof(*t));
        if (t == NULL)
            return; /* its uid stays unknown: its regions are refused */
        memset(t + s->by_fd_cap, 0, (cap - s->by_fd_cap) * sizeof(*t));
        s->by_fd = t;
        s->by_fd_cap = cap;
    }
    c->fd = fd;
    c->cookie = socket_cookie(fd);
    c->fd_next = s->by_fd[fd];
    s->by_fd[fd] = c;
}

/*
 * The uid of the process at c's other end (peer_uid.h), asked of the
 * kernel at the connection's first register_kv_cache and kept. -1 when it
 * cannot be known, and in particular whenever the socket on c's fd may be
 * another connection's: libzmq queues each connection's messages apart, so
 * a closed connection's last messages (and even its connect notification)
 * may be read after its fd number went to a newer connection. The socket's
 * SO_COOKIE (never reused) then differs from the one c recorded, or
 * another live connection recorded the same one (whose is it? not known
 * for sure: refused this time, asked again at the next registration).
 */
static int64_t conn_peer_uid(lmc_server *s, conn *c)
{
    if (c->uid_looked_up)
        return c->uid;
    const char *why = "its socket is not known";
    int64_t uid = -1;
    bool final = true;
    uint64_t now = c->fd >= 0 ? socket_cookie(c->fd) : 0;
    if (c->fd >= 0 && now != c->cookie) {
        why = "its socket was closed";
    } else if (c->fd >= 0) {
        for (conn *o = s->by_fd[c->fd]; o != NULL && final; o = o->fd_next)
            final = o == c || o->cookie != now;
        if (!final) {
            why = "a connection that closed had the same socket number";
        } else {
            uid = lmc_socket_peer_uid(c->fd, &why);
            if (socket_cookie(c->fd) != now) {
                uid = -1; /* closed (and reused) during the lookup */
                why = "its socket was closed";
            }
        }
    }
    c->uid = uid;
    c->uid_looked_up = final;
    if (uid < 0 && !s->warned_uid) {
        s->warned_uid = true;
        LMC_WARN(LOG_COMP,
                 "connection %llu: cannot tell which user the client runs as (%s); "
                 "register_kv_cache refuses its regions (warned once)",
                 (unsigned long long)c->conn_id, why);
    }
    return uid;
}

/* Count a refusal and warn about refusals at most once per WARN_EVERY_MS. */
static void note_refusal(lmc_server *s, uint64_t *count, const char *what, const char *why)
{
    (*count)++;
    uint64_t now = lmc_mono_ms();
    if (now < s->next_warn_ms)
        return;
    LMC_WARN(LOG_COMP, "refused %llu %s since the last warning: %s", (unsigned long long)*count,
             what, why);
    *count = 0;
    s->next_warn_ms = now + WARN_EVERY_MS;
}

/* zmtp.c's callbacks for one connection (ud is the conn; the loop thread only). */
static bool conn_reserve(void *ud, size_t bytes)
{
    return budget_reserve(((conn *)ud)->s, bytes);
}

static void conn_release(void *ud, size_t bytes)
{
    budget_release(((conn *)ud)->s, bytes);
}

static void conn_send(void *ud, const void *data, size_t len)
{
    conn *c = ud;
    if (zmq_send(c->s->stream, c->id, c->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(c->s->stream, data, len, ZMQ_DONTWAIT);
}

static void dispatch(lmc_server *s, job *j);

static void conn_message(void *ud, lmc_zmtp_message *m)
{
    conn *c = ud;
    lmc_server *s = c->s;
    job *j = calloc(1, sizeof(*j));
    if (j == NULL || !budget_reserve(s, sizeof(*j))) {
        /* Not even room to answer: drop it (the client's call times out). */
        budget_release(s, m->reserved);
        free(m->data);
        free(j);
        note_refusal(s, &s->refused_msgs, "requests", "no memory left for them");
        return;
    }
    memcpy(j->id, c->id, c->id_len);
    j->id_len = c->id_len;
    j->conn_id = c->conn_id;
    j->msg = *m;
    j->budget = m->reserved + sizeof(*j);
    pthread_mutex_lock(&s->q_mu);
    bool too_many = c->pending >= s->cfg.limits.max_requests_per_connection;
    if (!too_many) {
        c->pending++;
        j->c = c;
    }
    pthread_mutex_unlock(&s->q_mu);
    if (too_many) {
        /* A client that never waits for its answers is answered "busy" at once. */
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "server is busy: %llu requests of this connection wait to be answered "
                 "(--max-requests-per-connection)",
                 (unsigned long long)s->cfg.limits.max_requests_per_connection);
        reply_error(s, j, msg);
        note_refusal(s, &s->refused_msgs, "requests", "--max-requests-per-connection reached");
        job_free(s, j);
        return;
    }
    dispatch(s, j);
}

/* A new connection on socket fd: refused past --max-connections, else greeted. */
static void conn_open(lmc_server *s, const uint8_t *id, size_t len, int fd)
{
    bool refuse = s->n_conns >= s->cfg.limits.max_connections;
    conn *c = refuse || len > ROUTING_ID_MAX ? NULL : calloc(1, sizeof(*c));
    if (c == NULL) {
        if (zmq_send(s->stream, id, len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
            zmq_send(s->stream, "", 0, ZMQ_DONTWAIT);
        note_refusal(s, &s->refused_conns, "connections",
                     refuse ? "--max-connections reached" : "no memory");
        return;
    }
    c->s = s;
    memcpy(c->id, id, len);
    c->id_len = len;
    c->conn_id = s->next_conn_id++;
    conn_set_fd(s, c, fd);
    c->h = (lmc_zmtp_handler){.reserve = conn_reserve,
                              .release = conn_release,
                              .message = conn_message,
                              .send = conn_send,
                              .ud = c};
    c->opened_ms = lmc_mono_ms();
    lmc_zmtp_conn_init(&c->z, (size_t)s->cfg.limits.max_message_bytes);
    size_t b = conn_bucket(id, len);
    c->next = s->conns[b];
    s->conns[b] = c;
    s->n_conns++;
    uint8_t hello[LMC_ZMTP_HELLO_MAX];
    size_t n = lmc_zmtp_hello(hello);
    /*
     * The greeting goes out in pieces of at most HELLO_PIECE bytes, which
     * libzmq keeps inside the zmq_msg_t (no heap block). libzmq 4.3.4 leaks
     * the heap block of a message queued to a connection that closes as it
     * arrives: under ASan one 134-byte block per soak run, allocated by
     * this zmq_send (seen with fast_unwind_on_malloc=0). A piece without a
     * block has nothing to leak. The peer reads one byte stream either way.
     * A connection that is gone already (an unknown id) fails here: forget it.
     */
    for (size_t off = 0, k; off < n; off += k) {
        k = n - off < HELLO_PIECE ? n - off : HELLO_PIECE;
        if (zmq_send(s->stream, id, len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
            zmq_send(s->stream, hello + off, k, ZMQ_DONTWAIT) < 0) {
            conn_drop(s, c, false);
            return;
        }
    }
}

/* Read what the STREAM socket has: connects, disconnects and bytes. */
static void read_stream(lmc_server *s)
{
    for (int k = 0; k < READ_BATCH; k++) {
        zmq_msg_t id, data;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, s->stream, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&id);
            return;
        }
        zmq_msg_init(&data);
        if (zmq_msg_more(&id))
            zmq_msg_recv(&data, s->stream, 0);
        const uint8_t *ip = zmq_msg_data(&id);
        size_t il = zmq_msg_size(&id);
        conn *c = conn_find(s, ip, il);
        size_t n = zmq_msg_size(&data);
        if (c == NULL) {
            if (n == 0)
                conn_open(s, ip, il, zmq_msg_get(&data, ZMQ_SRCFD));
            /* else: bytes of a connection dropped a moment ago */
        } else if (n == 0) {
            conn_drop(s, c, false); /* the peer went away */
        } else {
            lmc_error err;
            lmc_error_clear(&err);
            if (lmc_zmtp_feed(&c->z, zmq_msg_data(&data), n, lmc_mono_ms(), &c->h, &err) !=
                LMC_OK) {
                LMC_DEBUG(LOG_COMP, "closing connection %llu: %s", (unsigned long long)c->conn_id,
                          err.msg);
                conn_drop(s, c, true);
            }
        }
        zmq_msg_close(&data);
        zmq_msg_close(&id);
    }
}

/* Close connections that never finished their handshake or stalled inside a request. */
static void close_stalled(lmc_server *s, uint64_t now)
{
    uint64_t msg_ms = s->cfg.limits.message_timeout_s * 1000;
    for (size_t b = 0; b < CONN_BUCKETS; b++) {
        for (conn *c = s->conns[b], *next; c; c = next) {
            next = c->next;
            bool stalled =
                (c->z.state != LMC_ZMTP_READY && now - c->opened_ms > HANDSHAKE_TIMEOUT_MS) ||
                (lmc_zmtp_receiving(&c->z) && now - c->z.msg_started_ms > msg_ms);
            if (stalled) {
                note_refusal(s, &s->refused_conns, "connections",
                             "no handshake in time, or a request not finished within "
                             "--message-timeout-s");
                conn_drop(s, c, true);
            }
        }
    }
}

/*
 * Once what clients made the server hold (requests buffered, keys of open
 * sessions) has shrunk well below a large peak, or the server has gone
 * idle after some work, give the memory back: glibc keeps freed small
 * blocks in its arenas, so the RSS would otherwise stay at the peak after
 * the clients left.
 */
static void trim_after_burst(lmc_server *s)
{
    size_t sessions, keys;
    lmc_engine_session_usage(s->engine, &sessions, &keys);
    uint64_t requests = lmc_counters_get(lmc_engine_counters(s->engine)).requests;
    pthread_mutex_lock(&s->q_mu);
    size_t held = s->buffered + keys * (sizeof(lmc_object_key) + 1);
    if (held > s->held_peak)
        s->held_peak = held;
    bool shrunk = s->held_peak >= TRIM_AFTER_BYTES && held < s->held_peak / 8;
    /* Idle for a whole check interval after some work: what it freed can go too. */
    bool idle = requests == s->requests_seen && s->requests_seen != s->requests_trimmed;
    if (shrunk)
        s->held_peak = held;
    if (idle)
        s->requests_trimmed = requests;
    s->requests_seen = requests;
    pthread_mutex_unlock(&s->q_mu);
    if (shrunk || idle)
        malloc_trim(0);
}

/* Answer on the loop thread, or queue for a worker. */
static void dispatch(lmc_server *s, job *j)
{
    lmc_zmtp_message *m = &j->msg;
    if (m->refused != LMC_ZMTP_KEPT) {
        /* Answered here: the request never reaches a worker. */
        const char *why = m->refused == LMC_ZMTP_TOO_MANY    ? "message has too many frames"
                          : m->refused == LMC_ZMTP_TOO_LARGE ? "message is too large"
                                                             : "server is busy";
        char msg[200];
        if (m->refused == LMC_ZMTP_TOO_LARGE)
            snprintf(msg, sizeof(msg), "%s (more than %llu bytes, --max-message-bytes)", why,
                     (unsigned long long)s->cfg.limits.max_message_bytes);
        else if (m->refused == LMC_ZMTP_OVER_BUDGET)
            snprintf(msg, sizeof(msg),
                     "%s: %llu MiB of requests wait to be answered (--max-buffered-mb); try again",
                     why, (unsigned long long)s->cfg.limits.max_buffered_mb);
        else
            snprintf(msg, sizeof(msg), "%s", why);
        reply_error(s, j, msg);
        note_refusal(s, &s->refused_msgs, "requests", why);
        job_free(s, j);
        return;
    }
    if (m->n_frames < 1) {
        job_free(s, j);
        return;
    }
    /*
     * The operations ops.def marks as loop-thread ones run right here (a
     * hand-off to a worker and back costs more than they take) when the
     * message is small; a large one (a lookup of many tokens) goes to a
     * worker, so that hashing it never stalls every other client.
     * Everything else, an undecodable operation included, goes to a worker.
     */
    lmc_op op =
        m->n_frames > 1 ? lmc_op_from_frame(m->data + m->off[1], m->len[1]) : LMC_OP_INVALID;
    /* Only register_kv_cache needs the client's uid (the rule of regions.h). */
    j->peer_uid = op == LMC_OP_REGISTER_KV_CACHE ? conn_peer_uid(s, j->c) : -1;
    if (lmc_op_on_loop_thread(op) && m->reserved <= LOOP_MAX_MESSAGE) {
        run_job(s, NULL, j);
        job_free(s, j);
        return;
    }
    pthread_mutex_lock(&s->q_mu);
    if (s->q_tail)
        s->q_tail->next = j;
    else
        s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    pthread_cond_signal(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
}

/*
 * The shutdown audit: after the controllers go idle, the L1 allocator must
 * be consistent, and a non-forced clear must leave nothing behind -- an
 * object it cannot drop still holds a read or write lock.
 */
static void audit(lmc_server *s, bool *memcheck_ok, uint64_t *locked_bytes)
{
    lmc_sm_wait_idle(s->sm, 10000);
    char why[256] = "";
    *memcheck_ok = lmc_sm_memcheck(s->sm, why, sizeof(why));
    if (!*memcheck_ok)
        LMC_ERROR(LOG_COMP, "shutdown audit: L1 memcheck failed: %s", why);
    lmc_sm_clear(s->sm, false);
    uint64_t total;
    lmc_sm_l1_usage(s->sm, locked_bytes, &total);
    LMC_INFO(LOG_COMP, "shutdown audit: memcheck %s, %llu bytes of L1 still locked",
             *memcheck_ok ? "ok" : "FAILED", (unsigned long long)*locked_bytes);
}

/* The counters' JSON into --counters-output's file; LMC_ERR_IO (logged) when it cannot be
 * written. */
static lmc_status write_counters(lmc_server *s)
{
    lmc_server_counters c = lmc_server_get_counters(s);
    bool memcheck_ok;
    uint64_t locked_bytes;
    audit(s, &memcheck_ok, &locked_bytes);
    char *line = lmc_counters_log_line(&c);
    LMC_INFO(LOG_COMP, "%s", line != NULL ? line : "StorageManager calls: (out of memory)");
    free(line);
    if (s->counters_fd < 0)
        return LMC_OK;
    FILE *f = fdopen(s->counters_fd, "w");
    if (f == NULL) {
        LMC_ERROR(LOG_COMP, "cannot write --counters-output '%s': %s", s->cfg.counters_output,
                  strerror(errno));
        close(s->counters_fd);
        s->counters_fd = -1;
        return LMC_ERR_IO;
    }
    s->counters_fd = -1; /* f's now */
    char *members = lmc_counters_json_members(&c);
    errno = 0;
    fprintf(f, "{%s, \"memcheck_ok\": %s, \"l1_locked_bytes_at_exit\": %llu}\n",
            members != NULL ? members : "", memcheck_ok ? "true" : "false",
            (unsigned long long)locked_bytes);
    free(members);
    int e = fflush(f) != 0 || ferror(f) ? (errno ? errno : EIO) : 0; /* a full disk, say */
    if (fclose(f) != 0 && e == 0)
        e = errno;
    if (e == 0)
        return LMC_OK;
    LMC_ERROR(LOG_COMP, "cannot write --counters-output '%s': %s", s->cfg.counters_output,
              strerror(e));
    return LMC_ERR_IO;
}

/* How often the loop collects sessions that ended before their prefetch (while there are any). */
#define DRAIN_POLL_MS 20
/* How often it ends the sessions nobody used for --session-ttl-s. */
#define SWEEP_MS 10000

lmc_status lmc_server_run(lmc_server *s)
{
    /* Often enough that a session ends within 1.5 TTLs of its last use. */
    uint64_t sweep_ms = s->cfg.limits.session_ttl_s * 500;
    if (sweep_ms > SWEEP_MS)
        sweep_ms = SWEEP_MS;
    uint64_t next_sweep = lmc_mono_ms() + sweep_ms;
    uint64_t next_stall_check = lmc_mono_ms() + 1000;
    size_t draining = 0;
    uint64_t next_drain = 0;
    for (;;) {
        zmq_pollitem_t items[3] = {
            {s->stream, 0, ZMQ_POLLIN, 0},
            {s->pull, 0, ZMQ_POLLIN, 0},
            {NULL, s->stop_fd, ZMQ_POLLIN, 0},
        };
        int rc = zmq_poll(items, 3, draining > 0 ? DRAIN_POLL_MS : 1000);
        if (rc < 0 && zmq_errno() != EINTR)
            break;
        if (items[2].revents & ZMQ_POLLIN)
            break;
        if (items[1].revents & ZMQ_POLLIN)
            forward_replies(s);
        if (items[0].revents & ZMQ_POLLIN)
            read_stream(s);
        uint64_t now = lmc_mono_ms();
        if (now >= next_stall_check) {
            close_stalled(s, now);
            trim_after_burst(s);
            next_stall_check = now + 1000;
        }
        /* Nobody waits for an abandoned lookup's prefetch: its locks go when it ends. */
        if (now >= next_drain) {
            draining = lmc_engine_poll_draining(s->engine);
            next_drain = now + DRAIN_POLL_MS;
        }
        if (lmc_mono_ms() >= next_sweep) {
            lmc_engine_expire_sessions(s->engine);
            next_sweep = lmc_mono_ms() + sweep_ms;
        }
    }

    /* Shutdown: no new requests; finish what is queued and in flight. */
    LMC_INFO(LOG_COMP, "shutting down: finishing requests in flight");
    pthread_mutex_lock(&s->q_mu);
    s->q_closed = true;
    pthread_cond_broadcast(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
    uint64_t deadline = lmc_mono_ms() + 30000;
    for (;;) {
        pthread_mutex_lock(&s->q_mu);
        bool idle = s->q_len == 0 && s->in_flight == 0;
        pthread_mutex_unlock(&s->q_mu);
        forward_replies(s);
        if (idle || lmc_mono_ms() > deadline)
            break;
        lmc_sleep_ns(1000 * 1000);
    }
    for (int i = 0; i < s->n_workers; i++)
        pthread_join(s->workers[i], NULL);
    s->n_workers = 0;
    forward_replies(s);
    return write_counters(s);
}

void lmc_server_destroy(lmc_server *s)
{
    if (s == NULL)
        return;
    if (s->n_workers > 0) {
        pthread_mutex_lock(&s->q_mu);
        s->q_closed = true;
        pthread_cond_broadcast(&s->q_cv);
        pthread_mutex_unlock(&s->q_mu);
        for (int i = 0; i < s->n_workers; i++)
            pthread_join(s->workers[i], NULL);
    }
    while (s->q_head) {
        job *j = s->q_head;
        s->q_head = j->next;
        job_free(s, j);
    }
    for (size_t b = 0; b < CONN_BUCKETS; b++)
        while (s->conns[b])
            conn_drop(s, s->conns[b], false);
    free(s->workers);
    free(s->by_fd);
    if (s->stream)
        zmq_close(s->stream);
    if (s->pull)
        zmq_close(s->pull);
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    /* The event bus stops first: final drain, then the recorder closes the file. */
    if (s->bus) {
        lmc_event_bus_stop(s->bus);
        if (s->recorder)
            LMC_INFO(LOG_COMP, "trace file %s: %llu record(s), %llu dropped",
                     lmc_trace_recorder_path(s->recorder),
                     (unsigned long long)lmc_trace_recorder_records(s->recorder),
                     (unsigned long long)lmc_trace_recorder_dropped(s->recorder));
    }
    if (s->prefault_started) { /* before the pool goes: it waits for one step at most */
        atomic_store(&s->prefault_stop, true);
        pthread_join(s->prefault, NULL);
    }
    lmc_copy_pool_destroy(s->copies); /* no worker is left to post a batch */
    lmc_engine_destroy(s->engine);    /* its sessions hold prefetch handles of the StorageManager */
    lmc_sm_destroy(s->sm);
    lmc_regions_destroy(s->regions);
    lmc_trace_recorder_destroy(s->recorder);
    lmc_trace_capture_set_bus(NULL);
    lmc_event_bus_destroy(s->bus);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    if (s->counters_fd >= 0)
        close(s->counters_fd); /* never run, or run ended early: left empty */
    pthread_mutex_destroy(&s->q_mu);
    pthread_cond_destroy(&s->q_cv);
    pthread_mutex_destroy(&s->log_mu);
    free(s);
}
