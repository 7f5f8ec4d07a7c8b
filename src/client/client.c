/*
 * client.c -- a synchronous client of `lmcache server` (include/lmcache/client.h).
 *
 * Owns: one ZMQ context and DEALER socket, the request-uid counter, the
 * msgpack buffers reused for request frames, and the client's KV region (a
 * POSIX shm object mapped shared, unlinked as soon as the server has mapped
 * it, or at destroy if it never did).
 *
 * Threads: none of its own; a client belongs to one thread at a time (a
 * ZMQ socket is not thread-safe). The only shared state is the counter that
 * makes shm names unique within the process (atomic).
 *
 * Why it looks the way it does:
 *  - A reply is matched to its request by the echoed uid frame, compared
 *    byte for byte with what was sent: a reply to an earlier call that timed
 *    out arrives later with an older uid and is discarded, so it can never
 *    be mistaken for the current call's answer.
 *  - ZMQ_IMMEDIATE is set so that a send waits for a live connection
 *    instead of queueing into the void: create can then report an
 *    unreachable server after connect_timeout_ms rather than a silent hang,
 *    and a server that goes away makes calls time out at the send.
 *  - ZMQ_LINGER 0: destroy never blocks on undelivered messages.
 *  - Replies are read with the bounds-checked reader (core/mp_reader.h),
 *    never msgpack_unpack_next: a reply is bytes from the network, and
 *    msgpack-c would size its allocations by counts a peer declares.
 */
#include "lmcache/client.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/file.h"
#include "core/mp_reader.h"
#include "core/msgpack_util.h"
#include "server/protocol.h"

/* The most payload frames a typed call sends (register_kv_cache: 5). */
#define MAX_PAYLOAD 5
/* Frames of a reply kept; any beyond are read and dropped. */
#define MAX_REPLY_FRAMES 8
/* Pause between query_prefetch_status polls. */
#define PREFETCH_POLL_NS 200000ull

typedef struct reply {
    zmq_msg_t parts[MAX_REPLY_FRAMES];
    size_t n;      /* parts kept (initialised) */
    size_t n_seen; /* parts received, including dropped ones */
} reply;

struct lmc_client {
    void *ctx;
    void *sock;
    char addr[300]; /* "host:port", for messages */
    int timeout_ms;
    int64_t next_uid;

    char *model_name;
    int world_size;
    int worker_id;
    int64_t instance_id;
    int64_t num_blocks, tokens_per_block, bytes_per_token;
    lmc_dtype dtype;
    int64_t chunk_size;

    char shm_name[96];
    int shm_fd;
    uint8_t *base;
    size_t region_bytes;
    bool registered;

    msgpack_sbuffer uid_buf, op_buf;
    msgpack_sbuffer payload[MAX_PAYLOAD];
    /*
     * The last typed call's reply: the response is read in place (strs and
     * bins point into the frame), so the frame lives until the next call.
     */
    reply held;
};

static atomic_uint_fast64_t shm_counter;

/*
 * Create the KV region's shm object, exclusively, as
 * "/lmcache-client-<pid>-<n>-<random>". The pid and counter say whose it is
 * (tests clean up a killed client's objects by pid); the random part is
 * there because pids repeat: an object left by an earlier process with this
 * pid (one killed before it registered, or from another container sharing
 * /dev/shm) would otherwise stop every client that gets that pid. A name
 * that is taken anyway is tried again with another random part.
 */
static lmc_status create_region(lmc_client *c, lmc_error *err)
{
    unsigned long long n = (unsigned long long)atomic_fetch_add(&shm_counter, 1);
    for (int tries = 0; tries < 8; tries++) {
        snprintf(c->shm_name, sizeof(c->shm_name), LMC_REGION_NAME_PREFIX "%ld-%llu-%08x",
                 (long)getpid(), n, lmc_file_nonce());
        c->shm_fd = shm_open(c->shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (c->shm_fd >= 0)
            return LMC_OK;
        if (errno != EEXIST)
            break;
    }
    lmc_status st = lmc_error_set(err, LMC_ERR_IO, "client: shm_open('%s'): %s", c->shm_name,
                                  strerror(errno));
    c->shm_name[0] = '\0';
    return st;
}

void lmc_client_config_init(lmc_client_config *cfg)
{
    *cfg = (lmc_client_config){.host = "127.0.0.1",
                               .port = 5555,
                               .timeout_ms = 30000,
                               .model_name = "test-model",
                               .world_size = 1,
                               .worker_id = 0,
                               .instance_id = (int64_t)getpid(),
                               .num_blocks = 4096,
                               .tokens_per_block = 16,
                               .bytes_per_token = 64,
                               .dtype = LMC_DTYPE_BFLOAT16,
                               .connect_timeout_ms = 5000};
}

/* ---------------------------------------------------------------------- */
/* Sending and receiving                                                   */
/* ---------------------------------------------------------------------- */

static int remaining_ms(uint64_t deadline_ns)
{
    uint64_t now = lmc_mono_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999) / 1000000;
    return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Wait until the socket can take a message (a connection is up). */
static bool wait_writable(lmc_client *c, uint64_t deadline_ns)
{
    for (;;) {
        zmq_pollitem_t it = {.socket = c->sock, .events = ZMQ_POLLOUT};
        int rc = zmq_poll(&it, 1, remaining_ms(deadline_ns));
        if (rc > 0 && (it.revents & ZMQ_POLLOUT))
            return true;
        if (rc < 0 && zmq_errno() == EINTR)
            continue;
        if (rc <= 0 && lmc_mono_ns() >= deadline_ns)
            return false;
    }
}

static lmc_status send_frames(lmc_client *c, const char *what, const void *const *frames,
                              const size_t *lens, size_t n, uint64_t deadline_ns, lmc_error *err)
{
    if (!wait_writable(c, deadline_ns))
        return lmc_error_set(err, LMC_ERR_TIMEOUT,
                             "%s: no connection to lmcache server at %s within %d ms", what,
                             c->addr, c->timeout_ms);
    for (size_t i = 0; i < n; i++) {
        int flags = ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0);
        while (zmq_send(c->sock, frames[i], lens[i], flags) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            /* Only the first part can fail with EAGAIN: a message is atomic. */
            if (zmq_errno() == EAGAIN)
                return lmc_error_set(err, LMC_ERR_TIMEOUT,
                                     "%s: lmcache server at %s is not accepting messages", what,
                                     c->addr);
            return lmc_error_set(err, LMC_ERR_IO, "%s: send to %s failed: %s", what, c->addr,
                                 zmq_strerror(zmq_errno()));
        }
    }
    return LMC_OK;
}

static void reply_close(reply *r)
{
    for (size_t i = 0; i < r->n; i++)
        zmq_msg_close(&r->parts[i]);
    r->n = r->n_seen = 0;
}

/* Receive one whole multipart message (the first part is ready). */
static lmc_status recv_message(lmc_client *c, const char *what, reply *r, lmc_error *err)
{
    r->n = r->n_seen = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        int rc;
        while ((rc = zmq_msg_recv(&m, c->sock, 0)) < 0 && zmq_errno() == EINTR)
            ;
        if (rc < 0) {
            zmq_msg_close(&m);
            reply_close(r);
            return lmc_error_set(err, LMC_ERR_IO, "%s: receive from %s failed: %s", what, c->addr,
                                 zmq_strerror(zmq_errno()));
        }
        bool more = zmq_msg_more(&m);
        if (r->n < MAX_REPLY_FRAMES)
            r->parts[r->n++] = m;
        else
            zmq_msg_close(&m);
        r->n_seen++;
        if (!more)
            return LMC_OK;
    }
}

/*
 * Send frames (frames[0] is the uid) and receive the reply whose first
 * frame equals frames[0]; replies to earlier calls are discarded.
 */
static lmc_status exchange(lmc_client *c, const char *what, const void *const *frames,
                           const size_t *lens, size_t n, reply *r, lmc_error *err)
{
    r->n = r->n_seen = 0;
    uint64_t deadline = lmc_mono_ns() + (uint64_t)c->timeout_ms * 1000000ull;
    lmc_status st = send_frames(c, what, frames, lens, n, deadline, err);
    if (st != LMC_OK)
        return st;
    for (;;) {
        zmq_pollitem_t it = {.socket = c->sock, .events = ZMQ_POLLIN};
        int rc = zmq_poll(&it, 1, remaining_ms(deadline));
        if (rc < 0 && zmq_errno() == EINTR)
            continue;
        if (rc < 0)
            return lmc_error_set(err, LMC_ERR_IO, "%s: poll failed: %s", what,
                                 zmq_strerror(zmq_errno()));
        if (rc == 0 || !(it.revents & ZMQ_POLLIN)) {
            if (lmc_mono_ns() >= deadline)
                return lmc_error_set(err, LMC_ERR_TIMEOUT,
                                     "%s: no reply from lmcache server at %s within %d ms", what,
                                     c->addr, c->timeout_ms);
            continue;
        }
        st = recv_message(c, what, r, err);
        if (st != LMC_OK)
            return st;
        if (r->n >= 1 && zmq_msg_size(&r->parts[0]) == lens[0] &&
            memcmp(zmq_msg_data(&r->parts[0]), frames[0], lens[0]) == 0) {
            if (r->n_seen < 3) {
                size_t seen = r->n_seen;
                reply_close(r);
                return lmc_error_set(err, LMC_ERR_FORMAT,
                                     "%s: reply has %zu frames, expected 3 [uid, op, response]",
                                     what, seen);
            }
            return LMC_OK;
        }
        reply_close(r); /* a late reply to an earlier call */
    }
}

/*
 * The response frame as a reader: it must hold one whole msgpack value
 * (nesting at most LMC_MP_MAX_DEPTH, as msgpack-c allows; bytes after it
 * are ignored). False if it does not.
 */
static bool response_reader(const void *data, size_t len, lmc_mp_reader *out)
{
    lmc_mp_reader_init(out, data, len);
    lmc_mp_reader check = *out;
    return lmc_mp_skip(&check, LMC_MP_MAX_DEPTH) == LMC_MP_OK;
}

/*
 * If the response (a checked reader, not moved) is {"error": msg}, copy msg
 * (at most cap-1 bytes) and return true.
 */
static bool error_reply(const lmc_mp_reader *resp, char *msg, size_t cap)
{
    lmc_mp_reader r = *resp;
    lmc_mp_item m;
    if (lmc_mp_next(&r, &m) != LMC_MP_OK || m.type != LMC_MP_MAP)
        return false;
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_reader at = r;
        lmc_mp_item k;
        if (lmc_mp_next(&r, &k) != LMC_MP_OK)
            return false;
        if (!lmc_mp_str_is(&k, "error")) {
            r = at; /* the key may itself be a container */
            if (lmc_mp_skip(&r, LMC_MP_MAX_DEPTH) != LMC_MP_OK ||
                lmc_mp_skip(&r, LMC_MP_MAX_DEPTH) != LMC_MP_OK)
                return false;
            continue;
        }
        lmc_mp_item v;
        if (lmc_mp_next(&r, &v) == LMC_MP_OK && v.type == LMC_MP_STR) {
            size_t n = v.v.s.len < cap - 1 ? v.v.s.len : cap - 1;
            memcpy(msg, v.v.s.ptr, n);
            msg[n] = '\0';
        } else {
            snprintf(msg, cap, "(error reply without a message)");
        }
        return true;
    }
    return false;
}

/*
 * One typed call: frames [uid, op, payload[0..n_payload)]; unless it is an
 * error reply, *resp reads the response (valid until the next call).
 */
static lmc_status call(lmc_client *c, lmc_op op, size_t n_payload, lmc_mp_reader *resp,
                       lmc_error *err)
{
    const char *what = lmc_op_name(op);
    if (what == NULL)
        what = "request";
    msgpack_sbuffer_clear(&c->uid_buf);
    msgpack_sbuffer_clear(&c->op_buf);
    lmc_request_encode_uid_op(&c->uid_buf, &c->op_buf, c->next_uid++, op);
    const void *frames[2 + MAX_PAYLOAD];
    size_t lens[2 + MAX_PAYLOAD];
    frames[0] = c->uid_buf.data;
    lens[0] = c->uid_buf.size;
    frames[1] = c->op_buf.data;
    lens[1] = c->op_buf.size;
    for (size_t i = 0; i < n_payload; i++) {
        frames[2 + i] = c->payload[i].data;
        lens[2 + i] = c->payload[i].size;
    }
    reply_close(&c->held);
    lmc_status st = exchange(c, what, frames, lens, 2 + n_payload, &c->held, err);
    if (st != LMC_OK)
        return st;
    if (!response_reader(zmq_msg_data(&c->held.parts[2]), zmq_msg_size(&c->held.parts[2]), resp))
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: the reply's response is not msgpack", what);
    char msg[LMC_ERROR_MSG_MAX];
    if (error_reply(resp, msg, sizeof(msg)))
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: server error: %s", what, msg);
    return LMC_OK;
}

/* The response's first item (call checked that the whole value is there). */
static lmc_mp_item response_item(lmc_mp_reader *resp)
{
    lmc_mp_item it = {.type = LMC_MP_NIL};
    if (lmc_mp_next(resp, &it) != LMC_MP_OK)
        it.type = LMC_MP_NIL;
    return it;
}

static msgpack_packer payload_packer(lmc_client *c, size_t i)
{
    msgpack_sbuffer_clear(&c->payload[i]);
    msgpack_packer pk;
    lmc_msgpack_sbuffer_packer_init(&pk, &c->payload[i]);
    return pk;
}

/* A call whose response is not looked at beyond "not an error". */
static lmc_status call_ignore(lmc_client *c, lmc_op op, size_t n_payload, lmc_error *err)
{
    lmc_mp_reader resp;
    return call(c, op, n_payload, &resp, err);
}

/* ---------------------------------------------------------------------- */
/* Typed operations                                                        */
/* ---------------------------------------------------------------------- */

static lmc_status get_chunk_size(lmc_client *c, lmc_error *err)
{
    lmc_mp_reader resp;
    lmc_status st = call(c, LMC_OP_GET_CHUNK_SIZE, 0, &resp, err);
    if (st != LMC_OK)
        return st;
    lmc_mp_item it = response_item(&resp);
    int64_t v;
    if (!lmc_mp_get_int64(&it, &v) || v <= 0)
        return lmc_error_set(err, LMC_ERR_FORMAT, "get_chunk_size: expected a positive int, got %s",
                             lmc_mp_type_name(it.type));
    c->chunk_size = v;
    return LMC_OK;
}

static lmc_status register_region(lmc_client *c, lmc_error *err)
{
    msgpack_packer pk = payload_packer(c, 0);
    msgpack_pack_int64(&pk, c->instance_id);
    pk = payload_packer(c, 1);
    lmc_kv_region_desc d = {.shm_name = c->shm_name,
                            .num_blocks = c->num_blocks,
                            .tokens_per_block = c->tokens_per_block,
                            .bytes_per_token = c->bytes_per_token,
                            .dtype = c->dtype};
    lmc_kv_region_encode(&pk, &d);
    pk = payload_packer(c, 2);
    size_t ml = strlen(c->model_name);
    msgpack_pack_str(&pk, ml);
    msgpack_pack_str_body(&pk, c->model_name, ml);
    pk = payload_packer(c, 3);
    msgpack_pack_int(&pk, c->world_size);
    pk = payload_packer(c, 4);
    msgpack_pack_int(&pk, c->worker_id);
    return call_ignore(c, LMC_OP_REGISTER_KV_CACHE, 5, err);
}

static lmc_status check_config(const lmc_client_config *cfg, lmc_error *err)
{
    if (cfg->host == NULL || cfg->host[0] == '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "client: host is empty");
    if (cfg->port < 1 || cfg->port > 65535)
        return lmc_error_set(err, LMC_ERR_INVALID, "client: port %d is not in [1, 65535]",
                             cfg->port);
    if (cfg->timeout_ms <= 0 || cfg->connect_timeout_ms <= 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "client: timeouts must be positive");
    if (cfg->model_name == NULL || cfg->model_name[0] == '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "client: model_name is empty");
    if (cfg->world_size < 1 || cfg->world_size > 255)
        return lmc_error_set(err, LMC_ERR_INVALID, "client: world_size %d is not in [1, 255]",
                             cfg->world_size);
    if (cfg->worker_id < 0 || cfg->worker_id >= cfg->world_size)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "client: worker_id %d is not in [0, world_size=%d)", cfg->worker_id,
                             cfg->world_size);
    if (cfg->num_blocks <= 0 || cfg->tokens_per_block <= 0 || cfg->bytes_per_token <= 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "client: num_blocks, tokens_per_block and bytes_per_token must be "
                             "positive (got %lld, %lld, %lld)",
                             (long long)cfg->num_blocks, (long long)cfg->tokens_per_block,
                             (long long)cfg->bytes_per_token);
    if (lmc_dtype_itemsize(cfg->dtype) == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "client: dtype is invalid");
    return LMC_OK;
}

lmc_status lmc_client_create(const lmc_client_config *cfg, lmc_client **out, lmc_error *err)
{
    *out = NULL;
    lmc_status st = check_config(cfg, err);
    if (st != LMC_OK)
        return st;
    uint64_t bytes = (uint64_t)cfg->num_blocks;
    if (__builtin_mul_overflow(bytes, (uint64_t)cfg->tokens_per_block, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)cfg->bytes_per_token, &bytes) ||
        bytes > (uint64_t)SIZE_MAX / 2)
        return lmc_error_set(err, LMC_ERR_INVALID, "client: KV region size overflows");

    lmc_client *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->model_name = strdup(cfg->model_name)) == NULL) {
        free(c);
        return lmc_error_set(err, LMC_ERR_NOMEM, "client: out of memory");
    }
    c->shm_fd = -1;
    c->timeout_ms = cfg->timeout_ms;
    c->next_uid = 1;
    c->world_size = cfg->world_size;
    c->worker_id = cfg->worker_id;
    c->instance_id = cfg->instance_id;
    c->num_blocks = cfg->num_blocks;
    c->tokens_per_block = cfg->tokens_per_block;
    c->bytes_per_token = cfg->bytes_per_token;
    c->dtype = cfg->dtype;
    c->region_bytes = (size_t)bytes;
    msgpack_sbuffer_init(&c->uid_buf);
    msgpack_sbuffer_init(&c->op_buf);
    for (size_t i = 0; i < MAX_PAYLOAD; i++)
        msgpack_sbuffer_init(&c->payload[i]);
    snprintf(c->addr, sizeof(c->addr), "%s:%d", cfg->host, cfg->port);

    /* Socket. */
    char endpoint[320];
    snprintf(endpoint, sizeof(endpoint), "tcp://%s", c->addr);
    int zero = 0, one = 1;
    if ((c->ctx = zmq_ctx_new()) == NULL || (c->sock = zmq_socket(c->ctx, ZMQ_DEALER)) == NULL ||
        zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero)) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_IMMEDIATE, &one, sizeof(one)) != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "client: cannot create a ZMQ socket: %s",
                           zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zmq_connect(c->sock, endpoint) != 0) {
        st = lmc_error_set(err, LMC_ERR_INVALID, "client: cannot connect to '%s': %s", endpoint,
                           zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (!wait_writable(c, lmc_mono_ns() + (uint64_t)cfg->connect_timeout_ms * 1000000ull)) {
        st = lmc_error_set(err, LMC_ERR_IO,
                           "cannot reach lmcache server at %s: no connection within %d ms (is "
                           "`lmcache server` running there?)",
                           c->addr, cfg->connect_timeout_ms);
        goto fail;
    }

    /* KV region. */
    if ((st = create_region(c, err)) != LMC_OK)
        goto fail;
    if (ftruncate(c->shm_fd, (off_t)c->region_bytes) != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "client: cannot size shm '%s' to %zu bytes: %s",
                           c->shm_name, c->region_bytes, strerror(errno));
        goto fail;
    }
    void *p = mmap(NULL, c->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->shm_fd, 0);
    if (p == MAP_FAILED) {
        st = lmc_error_set(err, LMC_ERR_IO, "client: cannot map shm '%s' (%zu bytes): %s",
                           c->shm_name, c->region_bytes, strerror(errno));
        goto fail;
    }
    c->base = p;

    if ((st = get_chunk_size(c, err)) != LMC_OK)
        goto fail;
    if ((st = register_region(c, err)) != LMC_OK)
        goto fail;
    c->registered = true;
    /*
     * The server holds its own mapping now, and the name has done its job:
     * without it no crash of this process (SIGKILL included) leaves the
     * object behind, and nobody else can open it.
     */
    shm_unlink(c->shm_name);
    c->shm_name[0] = '\0';
    *out = c;
    return LMC_OK;
fail:
    lmc_client_destroy(c);
    return st;
}

void lmc_client_destroy(lmc_client *c)
{
    if (c == NULL)
        return;
    if (c->registered) {
        /* Best effort, and quick: the server also drops a closed connection's regions. */
        int saved = c->timeout_ms;
        c->timeout_ms = saved < 1000 ? saved : 1000;
        msgpack_packer pk = payload_packer(c, 0);
        msgpack_pack_int64(&pk, c->instance_id);
        (void)call_ignore(c, LMC_OP_UNREGISTER_KV_CACHE, 1, NULL);
        c->timeout_ms = saved;
    }
    reply_close(&c->held);
    if (c->sock != NULL)
        zmq_close(c->sock);
    if (c->ctx != NULL)
        zmq_ctx_term(c->ctx);
    if (c->base != NULL)
        munmap(c->base, c->region_bytes);
    if (c->shm_fd >= 0)
        close(c->shm_fd);
    if (c->shm_name[0] != '\0')
        shm_unlink(c->shm_name);
    msgpack_sbuffer_destroy(&c->uid_buf);
    msgpack_sbuffer_destroy(&c->op_buf);
    for (size_t i = 0; i < MAX_PAYLOAD; i++)
        msgpack_sbuffer_destroy(&c->payload[i]);
    free(c->model_name);
    free(c);
}

int64_t lmc_client_chunk_size(const lmc_client *c)
{
    return c->chunk_size;
}

uint8_t *lmc_client_block(lmc_client *c, int64_t block)
{
    return c->base + (size_t)block * (size_t)(c->tokens_per_block * c->bytes_per_token);
}

int64_t lmc_client_num_blocks(const lmc_client *c)
{
    return c->num_blocks;
}

int64_t lmc_client_block_bytes(const lmc_client *c)
{
    return c->tokens_per_block * c->bytes_per_token;
}

int64_t lmc_client_instance_id(const lmc_client *c)
{
    return c->instance_id;
}

lmc_status lmc_client_ping(lmc_client *c, lmc_error *err)
{
    msgpack_packer pk = payload_packer(c, 0);
    msgpack_pack_int64(&pk, c->instance_id);
    lmc_mp_reader resp;
    lmc_status st = call(c, LMC_OP_PING, 1, &resp, err);
    if (st != LMC_OK)
        return st;
    lmc_mp_item it = response_item(&resp);
    if (it.type != LMC_MP_BOOL || !it.v.b)
        return lmc_error_set(err, LMC_ERR_FORMAT, "ping: expected true, got %s",
                             lmc_mp_type_name(it.type));
    return LMC_OK;
}

/* Pack an IPC key into payload frame i. worker_id < 0 packs nil (a lookup). */
static void pack_key(lmc_client *c, size_t i, const char *request_id, const uint32_t *tokens,
                     size_t n_tokens, size_t start, size_t end, const char *cache_salt,
                     int64_t worker_id)
{
    msgpack_packer pk = payload_packer(c, i);
    /* The key's fields are only read; the struct is not const-qualified. */
    lmc_ipc_key key = {.model_name = c->model_name,
                       .world_size = c->world_size,
                       .worker_id = worker_id,
                       .token_ids = (uint32_t *)tokens,
                       .n_tokens = n_tokens,
                       .start = (int64_t)start,
                       .end = (int64_t)end,
                       .request_id = (char *)request_id,
                       .cache_salt = (char *)(cache_salt ? cache_salt : ""),
                       .num_kv_readers = 1};
    lmc_ipc_key_encode(&pk, &key);
}

static lmc_status check_range(const char *what, size_t n_tokens, size_t start, size_t end,
                              lmc_error *err)
{
    if (start > end || end > n_tokens)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: range [%zu, %zu) is not within the request's %zu tokens", what,
                             start, end, n_tokens);
    return LMC_OK;
}

lmc_status lmc_client_lookup_submit(lmc_client *c, const char *request_id, const uint32_t *tokens,
                                    size_t n_tokens, size_t end, const char *cache_salt,
                                    lmc_error *err)
{
    lmc_status st = check_range("lookup", n_tokens, 0, end, err);
    if (st != LMC_OK)
        return st;
    pack_key(c, 0, request_id, tokens, n_tokens, 0, end, cache_salt, -1);
    msgpack_packer pk = payload_packer(c, 1);
    msgpack_pack_int(&pk, 1); /* tp_size (ignored by the server) */
    return call_ignore(c, LMC_OP_LOOKUP, 2, err);
}

lmc_status lmc_client_lookup(lmc_client *c, const char *request_id, const uint32_t *tokens,
                             size_t n_tokens, size_t end, const char *cache_salt,
                             size_t *hit_chunks, lmc_error *err)
{
    uint64_t deadline = lmc_mono_ns() + (uint64_t)c->timeout_ms * 1000000ull;
    lmc_status st = lmc_client_lookup_submit(c, request_id, tokens, n_tokens, end, cache_salt, err);
    if (st != LMC_OK)
        return st;
    for (;;) {
        msgpack_packer pk = payload_packer(c, 0);
        size_t rl = strlen(request_id);
        msgpack_pack_str(&pk, rl);
        msgpack_pack_str_body(&pk, request_id, rl);
        lmc_mp_reader resp;
        if ((st = call(c, LMC_OP_QUERY_PREFETCH_STATUS, 1, &resp, err)) != LMC_OK)
            return st;
        lmc_mp_item it = response_item(&resp);
        int64_t v;
        bool is_int = lmc_mp_get_int64(&it, &v);
        bool is_nil = it.type == LMC_MP_NIL;
        const char *kind = lmc_mp_type_name(it.type);
        if (is_int) {
            if (v < 0)
                return lmc_error_set(err, LMC_ERR_FORMAT,
                                     "query_prefetch_status: negative hit count %lld",
                                     (long long)v);
            *hit_chunks = (size_t)v;
            return LMC_OK;
        }
        if (!is_nil)
            return lmc_error_set(err, LMC_ERR_FORMAT,
                                 "query_prefetch_status: expected an int or nil, got %s", kind);
        if (lmc_mono_ns() >= deadline)
            return lmc_error_set(err, LMC_ERR_TIMEOUT,
                                 "lookup of '%s': prefetch still running after %d ms", request_id,
                                 c->timeout_ms);
        lmc_sleep_ns(PREFETCH_POLL_NS);
    }
}

/* retrieve or store: shared framing and the (bytes, ok) response. */
static lmc_status transfer(lmc_client *c, lmc_op op, const char *request_id, const uint32_t *tokens,
                           size_t n_tokens, size_t start, size_t end, const char *cache_salt,
                           const int64_t *block_ids, size_t n_block_ids, bool *ok, lmc_error *err)
{
    const char *what = lmc_op_name(op);
    lmc_status st = check_range(what, n_tokens, start, end, err);
    if (st != LMC_OK)
        return st;
    size_t tpb = (size_t)c->tokens_per_block;
    if ((end - start) % tpb != 0 || n_block_ids != (end - start) / tpb)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: [%zu, %zu) needs %zu block ids of %zu tokens, got %zu", what,
                             start, end, (end - start + tpb - 1) / tpb, tpb, n_block_ids);
    for (size_t i = 0; i < n_block_ids; i++)
        if (block_ids[i] < 0 || block_ids[i] >= c->num_blocks)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "%s: block id %lld is not in the region's [0, %lld)", what,
                                 (long long)block_ids[i], (long long)c->num_blocks);

    pack_key(c, 0, request_id, tokens, n_tokens, start, end, cache_salt, c->worker_id);
    msgpack_packer pk = payload_packer(c, 1);
    msgpack_pack_int64(&pk, c->instance_id);
    pk = payload_packer(c, 2);
    msgpack_pack_array(&pk, 1); /* one KV group */
    msgpack_pack_array(&pk, (uint32_t)n_block_ids);
    for (size_t i = 0; i < n_block_ids; i++)
        msgpack_pack_int64(&pk, block_ids[i]);
    pk = payload_packer(c, 3);
    msgpack_pack_bin(&pk, 0); /* event handle: none on CPU */
    msgpack_pack_bin_body(&pk, "", 0);
    size_t n_payload = 4;
    if (op == LMC_OP_RETRIEVE) {
        pk = payload_packer(c, 4);
        msgpack_pack_int(&pk, 0); /* skip_first_n_tokens */
        n_payload = 5;
    }
    lmc_mp_reader resp;
    if ((st = call(c, op, n_payload, &resp, err)) != LMC_OK)
        return st;
    lmc_mp_item o = response_item(&resp), flag = {.type = LMC_MP_NIL};
    if (o.type != LMC_MP_ARRAY || o.v.n != 2 || lmc_mp_skip(&resp, LMC_MP_MAX_DEPTH) != LMC_MP_OK ||
        lmc_mp_next(&resp, &flag) != LMC_MP_OK || flag.type != LMC_MP_BOOL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: expected [bytes, bool], got %s", what,
                             lmc_mp_type_name(o.type));
    *ok = flag.v.b;
    return LMC_OK;
}

lmc_status lmc_client_retrieve(lmc_client *c, const char *request_id, const uint32_t *tokens,
                               size_t n_tokens, size_t start, size_t end, const char *cache_salt,
                               const int64_t *block_ids, size_t n_block_ids, bool *ok,
                               lmc_error *err)
{
    return transfer(c, LMC_OP_RETRIEVE, request_id, tokens, n_tokens, start, end, cache_salt,
                    block_ids, n_block_ids, ok, err);
}

lmc_status lmc_client_store(lmc_client *c, const char *request_id, const uint32_t *tokens,
                            size_t n_tokens, size_t start, size_t end, const char *cache_salt,
                            const int64_t *block_ids, size_t n_block_ids, bool *ok, lmc_error *err)
{
    return transfer(c, LMC_OP_STORE, request_id, tokens, n_tokens, start, end, cache_salt,
                    block_ids, n_block_ids, ok, err);
}

lmc_status lmc_client_free_lookup_locks(lmc_client *c, const char *request_id,
                                        const uint32_t *tokens, size_t n_tokens, size_t end,
                                        const char *cache_salt, lmc_error *err)
{
    lmc_status st = check_range("free_lookup_locks", n_tokens, 0, end, err);
    if (st != LMC_OK)
        return st;
    pack_key(c, 0, request_id, tokens, n_tokens, 0, end, cache_salt, -1);
    msgpack_packer pk = payload_packer(c, 1);
    msgpack_pack_int(&pk, 1); /* tp_size */
    return call_ignore(c, LMC_OP_FREE_LOOKUP_LOCKS, 2, err);
}

lmc_status lmc_client_end_session(lmc_client *c, const char *request_id, lmc_error *err)
{
    msgpack_packer pk = payload_packer(c, 0);
    size_t rl = strlen(request_id);
    msgpack_pack_str(&pk, rl);
    msgpack_pack_str_body(&pk, request_id, rl);
    return call_ignore(c, LMC_OP_END_SESSION, 1, err);
}

lmc_status lmc_client_clear(lmc_client *c, bool force, lmc_error *err)
{
    msgpack_packer pk = payload_packer(c, 0);
    if (force)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
    return call_ignore(c, LMC_OP_CLEAR, 1, err);
}

lmc_status lmc_client_call_raw(lmc_client *c, const void *const *frames, const size_t *lens,
                               size_t n, void **resp, size_t *resp_len, lmc_error *err)
{
    if (resp != NULL)
        *resp = NULL;
    if (resp_len != NULL)
        *resp_len = 0;
    if (n < 1)
        return lmc_error_set(err, LMC_ERR_INVALID, "raw call: at least the uid frame is needed");
    reply r;
    lmc_status st = exchange(c, "raw call", frames, lens, n, &r, err);
    if (st != LMC_OK)
        return st;
    const void *data = zmq_msg_data(&r.parts[2]);
    size_t len = zmq_msg_size(&r.parts[2]);
    if (resp != NULL) {
        *resp = malloc(len ? len : 1);
        if (*resp == NULL) {
            reply_close(&r);
            return lmc_error_set(err, LMC_ERR_NOMEM, "raw call: out of memory");
        }
        memcpy(*resp, data, len);
        if (resp_len != NULL)
            *resp_len = len;
    }
    lmc_mp_reader rd;
    char msg[LMC_ERROR_MSG_MAX];
    if (response_reader(data, len, &rd) && error_reply(&rd, msg, sizeof(msg)))
        st = lmc_error_set(err, LMC_ERR_INVALID, "server error: %s", msg);
    reply_close(&r);
    return st;
}
