/*
 * server.c -- `lmcache server`: the loop thread and the worker pool (see
 * server.h).
 *
 * Owns: the ROUTER socket and the loop (the calling thread of
 * lmc_server_run), the job queue and the worker threads, reply
 * forwarding, the session sweep, shutdown, and the server's parts: the
 * StorageManager, the request logic (engine.c), the regions (regions.c),
 * and -- when tracing is on -- the event bus and the recorder.
 *
 * Request path: the loop thread reads [identity, uid, op, payload...] from
 * the ROUTER, checks the frame count and sizes, and either answers it
 * right there (an operation ops.def marks as a loop-thread one) or queues
 * a job; a worker decodes it (protocol.c), runs its handler (ops.c), and
 * sends [identity, uid, op, response] back through its inproc PUSH socket;
 * the loop forwards that to the ROUTER. The uid and op frames are echoed as
 * received, so a client can match even an error reply to its request.
 *
 * Threads and locks: ZMQ sockets stay on their thread (the ROUTER and PULL
 * on the loop, a PUSH per worker); q_mu guards the queue and the in-flight
 * count. lmc_server_stop may be called from a signal handler.
 */
#include "server/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"
#include "lmcache/storage_manager.h"
#include "obs/event_bus.h"
#include "server/engine.h"
#include "server/ops.h"
#include "server/peers.h"
#include "server/protocol.h"
#include "server/regions.h"
#include "storage/config.h" /* the config digest for the trace header */
#include "trace/capture.h"
#include "trace/lifecycle.h"
#include "trace/recorder.h"

#define LOG_COMP "server"

typedef struct job {
    struct job *next;
    zmq_msg_t *frames; /* identity first */
    size_t n;
    lmc_peer peer; /* the connection it came from (peers.h) */
} job;

struct lmc_server {
    lmc_server_config cfg;
    lmc_storage_manager *sm;
    lmc_engine *engine;
    lmc_regions *regions;
    lmc_op_ctx ops;
    lmc_peers *peers; /* the ROUTER's connections (loop thread) */
    lmc_event_bus *bus;
    lmc_trace_recorder *recorder;
    void *zctx;
    void *router;
    void *pull;
    int stop_fd; /* eventfd written by lmc_server_stop */
    pthread_t *workers;
    int n_workers;

    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    job *q_head, *q_tail;
    size_t q_len;
    size_t in_flight;
    bool q_closed;
};

lmc_server_counters lmc_server_get_counters(lmc_server *s)
{
    return lmc_counters_get(lmc_engine_counters(s->engine));
}

/*
 * Send [identity, uid, op, response] on sock (a worker's PUSH socket, or the
 * ROUTER itself for requests answered on the loop thread).
 */
static void reply(void *sock, job *j, msgpack_sbuffer *resp)
{
    zmq_msg_t *f = j->frames;
    /* identity, then uid and op echoed as received (nil frames if absent). */
    zmq_send(sock, zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), ZMQ_SNDMORE);
    for (size_t i = 1; i <= 2; i++) {
        if (i < j->n)
            zmq_send(sock, zmq_msg_data(&f[i]), zmq_msg_size(&f[i]), ZMQ_SNDMORE);
        else
            zmq_send(sock, "\xc0", 1, ZMQ_SNDMORE); /* msgpack nil */
    }
    zmq_send(sock, resp->data, resp->size, 0);
}

static void job_free(job *j)
{
    for (size_t i = 0; i < j->n; i++)
        zmq_msg_close(&j->frames[i]);
    free(j->frames);
    free(j);
}

static void run_job(lmc_server *s, void *push, job *j)
{
    msgpack_sbuffer resp;
    msgpack_sbuffer_init(&resp);
    lmc_error err;
    lmc_error_clear(&err);
    lmc_request q;
    const void *frames[LMC_PROTO_MAX_FRAMES + 2];
    size_t lens[LMC_PROTO_MAX_FRAMES + 2];
    size_t n = j->n - 1; /* without the identity */
    for (size_t i = 0; i < n; i++) {
        frames[i] = zmq_msg_data(&j->frames[i + 1]);
        lens[i] = zmq_msg_size(&j->frames[i + 1]);
    }
    lmc_status st = lmc_request_decode(frames, lens, n, &q, &err);
    q.conn_id = j->peer.conn;
    q.peer_uid = j->peer.uid;
    if (st == LMC_OK)
        st = lmc_op_execute(&s->ops, &q, &resp, &err);
    lmc_counters *counts = lmc_engine_counters(s->engine);
    LMC_COUNT(counts, requests, 1);
    if (st != LMC_OK) {
        resp.size = 0;
        lmc_response_error(&resp, err.msg[0] ? err.msg : lmc_status_str(st));
        LMC_COUNT(counts, errors, 1);
        LMC_WARN(LOG_COMP, "request %lld (%s) failed: %s", (long long)q.uid,
                 lmc_op_name(q.op) ? lmc_op_name(q.op) : "?", err.msg);
    }
    lmc_request_free(&q);
    reply(push, j, &resp);
    msgpack_sbuffer_destroy(&resp);
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
        job_free(j);
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

/* A client connection closed (peers.h, loop thread). */
static void on_peer_gone(void *ud, uint64_t conn)
{
    lmc_server *s = ud;
    lmc_op_connection_closed(&s->ops, conn);
}

lmc_status lmc_server_create(const lmc_server_config *cfg, lmc_server **out, lmc_error *err)
{
    lmc_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    s->cfg = *cfg;
    s->stop_fd = -1;
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_cond_init(&s->q_cv, NULL);
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
        (st = lmc_engine_create(s->sm, cfg->chunk_size, &s->engine, err)) != LMC_OK ||
        (st = lmc_regions_create(cfg->chunk_size, &s->regions, err)) != LMC_OK)
        goto fail;
    s->ops = (lmc_op_ctx){.engine = s->engine, .regions = s->regions};

    s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->zctx = zmq_ctx_new();
    if (s->stop_fd < 0 || s->zctx == NULL) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot create the ZMQ context");
        goto fail;
    }
    s->router = zmq_socket(s->zctx, ZMQ_ROUTER);
    s->pull = zmq_socket(s->zctx, ZMQ_PULL);
    int linger = 0;
    zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof(linger));
    int64_t maxmsg = LMC_PROTO_MAX_FRAME;
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    /* Before the bind, so that no connection goes unseen. */
    if ((st = lmc_peers_create(s->zctx, s->router, on_peer_gone, s, &s->peers, err)) != LMC_OK)
        goto fail;
    char endpoint[300];
    snprintf(endpoint, sizeof(endpoint), "tcp://%s:%d", cfg->host, cfg->port);
    if (zmq_bind(s->router, endpoint) != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot bind %s: %s", endpoint,
                           zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zmq_bind(s->pull, "inproc://lmcache-replies") != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot bind the reply socket");
        goto fail;
    }
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
    LMC_INFO(LOG_COMP, "lmcache server listening on %s (chunk size %d, %d worker(s)%s%s)", endpoint,
             cfg->chunk_size, cfg->max_workers, s->recorder ? ", tracing to " : "",
             s->recorder ? lmc_trace_recorder_path(s->recorder) : "");
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

static void forward_replies(lmc_server *s)
{
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        int more;
        do {
            more = zmq_msg_more(&m);
            zmq_msg_send(&m, s->router, more ? ZMQ_SNDMORE : 0);
            if (!more)
                break;
            zmq_msg_init(&m);
            zmq_msg_recv(&m, s->pull, 0);
        } while (1);
    }
}

/* Read one multipart request from the ROUTER and queue it (or reject it). */
static void accept_request(lmc_server *s)
{
    job *j = calloc(1, sizeof(*j));
    size_t cap = LMC_PROTO_MAX_FRAMES + 2;
    j->frames = calloc(cap, sizeof(zmq_msg_t));
    bool too_many = false;
    size_t total = 0;
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->router, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        total += zmq_msg_size(&m);
        if (j->n < cap) {
            j->frames[j->n++] = m;
        } else {
            too_many = true; /* keep reading to consume the message */
            zmq_msg_close(&m);
        }
    }
    if (j->n < 1) {
        job_free(j);
        return;
    }
    lmc_op op = j->n > 2
                    ? lmc_op_from_frame(zmq_msg_data(&j->frames[2]), zmq_msg_size(&j->frames[2]))
                    : LMC_OP_INVALID;
    /*
     * The ROUTER makes the identity frame itself, without a ZMQ_SRCFD; the
     * frames after it carry the connection's fd. Only register_kv_cache
     * needs the client's uid (the rule of regions.h).
     */
    int fd = j->n > 1 ? zmq_msg_get(&j->frames[1], ZMQ_SRCFD) : -1;
    j->peer = lmc_peers_identify(s->peers, fd, zmq_msg_data(&j->frames[0]),
                                 zmq_msg_size(&j->frames[0]), op == LMC_OP_REGISTER_KV_CACHE);
    if (too_many || total > LMC_PROTO_MAX_FRAME) {
        /* Answer here: the request never reaches a worker. */
        msgpack_sbuffer resp;
        msgpack_sbuffer_init(&resp);
        lmc_response_error(&resp,
                           too_many ? "message has too many frames" : "message is too large");
        reply(s->router, j, &resp);
        msgpack_sbuffer_destroy(&resp);
        LMC_COUNT(lmc_engine_counters(s->engine), errors, 1);
        LMC_WARN(LOG_COMP, "rejected a message: %s", too_many ? "too many frames" : "too large");
        job_free(j);
        return;
    }
    /*
     * The operations ops.def marks as loop-thread ones run right here (a
     * hand-off to a worker and back costs more than they take); everything
     * else, an undecodable operation included, goes to a worker.
     */
    if (lmc_op_on_loop_thread(op)) {
        run_job(s, s->router, j);
        job_free(j);
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

static void write_counters(lmc_server *s)
{
    lmc_server_counters c = lmc_server_get_counters(s);
    bool memcheck_ok;
    uint64_t locked_bytes;
    audit(s, &memcheck_ok, &locked_bytes);
    char *line = lmc_counters_log_line(&c);
    LMC_INFO(LOG_COMP, "%s", line != NULL ? line : "StorageManager calls: (out of memory)");
    free(line);
    if (s->cfg.counters_output == NULL)
        return;
    FILE *f = fopen(s->cfg.counters_output, "w");
    if (f == NULL) {
        LMC_ERROR(LOG_COMP, "cannot write --counters-output '%s': %s", s->cfg.counters_output,
                  strerror(errno));
        return;
    }
    char *members = lmc_counters_json_members(&c);
    fprintf(f, "{%s, \"memcheck_ok\": %s, \"l1_locked_bytes_at_exit\": %llu}\n",
            members != NULL ? members : "", memcheck_ok ? "true" : "false",
            (unsigned long long)locked_bytes);
    free(members);
    fclose(f);
}

lmc_status lmc_server_run(lmc_server *s)
{
    uint64_t next_sweep = lmc_mono_ms() + 60000;
    for (;;) {
        zmq_pollitem_t items[4] = {
            {s->router, 0, ZMQ_POLLIN, 0},
            {s->pull, 0, ZMQ_POLLIN, 0},
            {NULL, s->stop_fd, ZMQ_POLLIN, 0},
            {lmc_peers_socket(s->peers), 0, ZMQ_POLLIN, 0},
        };
        int rc = zmq_poll(items, 4, 1000);
        if (rc < 0 && zmq_errno() != EINTR)
            break;
        if (items[2].revents & ZMQ_POLLIN)
            break;
        if (items[1].revents & ZMQ_POLLIN)
            forward_replies(s);
        /* Connection events first: a message never overtakes its connection's. */
        if (items[3].revents & ZMQ_POLLIN)
            lmc_peers_poll(s->peers);
        if (items[0].revents & ZMQ_POLLIN)
            accept_request(s);
        if (lmc_mono_ms() >= next_sweep) {
            lmc_engine_expire_sessions(s->engine);
            next_sweep = lmc_mono_ms() + 60000;
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
    write_counters(s);
    return LMC_OK;
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
        job_free(j);
    }
    free(s->workers);
    lmc_peers_destroy(s->peers);
    if (s->router)
        zmq_close(s->router);
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
    lmc_engine_destroy(s->engine); /* its sessions hold prefetch handles of the StorageManager */
    lmc_sm_destroy(s->sm);
    lmc_regions_destroy(s->regions);
    lmc_trace_recorder_destroy(s->recorder);
    lmc_trace_capture_set_bus(NULL);
    lmc_event_bus_destroy(s->bus);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    pthread_mutex_destroy(&s->q_mu);
    pthread_cond_destroy(&s->q_cv);
    free(s);
}
