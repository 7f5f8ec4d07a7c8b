/*
 * attack.c -- hostile clients of `lmcache server` for tests/e2e/test_attack.sh
 * and the load loops of tests/e2e/test_soak.sh.
 *
 * usage: attack ATTACK HOST PORT [ARG [ARG2]]
 *
 * Each attack plays one misbehaving client (docs/security.md lists what the
 * server must withstand) and exits 0 when the server resisted it -- the
 * attack got error replies, no other client's bytes moved, the server
 * still answers a ping -- and 1 with a "VULNERABLE:" or "FAIL:" line when
 * it did not (2: usage). Attacks on client memory (KV regions):
 *
 *   ping             the server answers a ping (the liveness check)
 *   shm-steal POOL   as another user (uid 65534; skipped when not root), try
 *                    to register another user's region, the server's pool
 *                    POOL, a semaphore, a symlink, a FIFO, a group-writable
 *                    object, a name without the client prefix and a missing
 *                    one: every reply is the same error; one's own region
 *                    registers
 *   truncate         register, store, truncate the object to 0 bytes, store
 *                    and retrieve again: error replies, no SIGBUS
 *   unregister-race  stores and retrieves pipelined with unregister_kv_cache
 *                    and re-registrations of the same instance id
 *   world-size       a world-size-2 region used with world-size-1 keys next
 *                    to another tenant's chunks: error replies, and the
 *                    neighbours' bytes are intact
 *   slots            70 connections register a model each and vanish; a
 *                    model's bytes-per-token is not pinned by a client that
 *                    left; a client cannot use or unregister another's
 *                    instance
 *
 * on sessions, locks, limits, connections and logs:
 *
 *   lock-steal       a retrieve, free_lookup_locks, a reused request id and
 *                    retrieves without a session never release another
 *                    request's lock (a non-forced clear would then drop its
 *                    chunks)
 *   ws2              world size 2 following the old documented lifecycle
 *                    (num_kv_readers = world size) leaves no lock after
 *                    end_session
 *   big-lookup       a 4 M-token lookup is refused with its flag named, and a
 *                    ping from another connection is answered meanwhile; a
 *                    lookup at the largest size allowed (world size 255)
 *                    works
 *   sessions N       open sessions until --max-sessions refuses one (N: how
 *                    many the server allows), end half, open again
 *   keys             lookups until --max-session-keys refuses one
 *   salts            new cache_salt values until --max-cache-salts refuses one
 *   unfinished MIB PID  two connections send frames that never end a message
 *                    (MIB each); the server's RSS (PID) grows by at most
 *                    64 MiB and a normal client is answered
 *   flood PID        one connection pipelines 2 M tiny requests without
 *                    reading a reply; the server's RSS (PID) grows by at most
 *                    64 MiB and a normal client is answered
 *   conns N          more connections than --max-connections (N): the extra
 *                    ones are closed at once; a normal client works after
 *   slowloris S      a request begun and never finished is closed after
 *                    --message-timeout-s (S)
 *   log-forge        client strings with newlines reach the log (the caller
 *                    greps it for the forged line)
 *   slow-l2          (a server with a slow L2 and one worker) free_lookup_locks
 *                    answers at once and another client's store is not held up
 *
 * and the soak test's load loops (S: seconds):
 *
 *   soak-ws2 S       two workers of world size 2 (one process, one client each)
 *                    run requests with shared prefixes: lookup (num_kv_readers
 *                    1 or 2), retrieve of every hit by each rank (every byte
 *                    checked), store of the rest, then end_session or
 *                    free_lookup_locks; exit 1 on a corrupt chunk or a failed
 *                    call
 *   soak-vanish S    connections that send part of a request (or a whole one)
 *                    and vanish before the answer
 *   soak-truncate S  the truncate attack again and again, as other clients
 *                    evict and clear L1: the server lives, and what is read
 *                    back after the region grew back is right
 *   soak-unregister S  the unregister race again and again
 *
 * The region attacks speak the wire protocol through their own DEALER
 * socket (so they can pipeline requests and send what lmc_client never
 * would), with the protocol's encoders; the session attacks use lmc_client
 * (its region and lmc_client_call_raw) or raw ZMTP over TCP. Regions are
 * POSIX shm objects named "/lmcache-client-attack-<pid>-<n>", removed
 * before exit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "client/workload.h"
#include "core/clock.h"
#include "core/file.h"
#include "lmcache/client.h"
#include "server/protocol.h"
#include "server/zmtp.h"

#define TIMEOUT_MS 10000
#define NOBODY 65534
#define MAX_FRAMES 8

static const char *g_host;
static int g_port;
static int g_chunk; /* the server's chunk size (get_chunk_size) */
static unsigned g_region_seq;

/*
 * "<pid>-<random hex>" for the names this process makes: pids repeat, and
 * /dev/shm may hold an object a killed run left under this pid. Made again
 * in a forked child (another pid); not called from the helper threads.
 */
static const char *tag(void)
{
    static char buf[32];
    static pid_t made_for;
    if (made_for != getpid()) {
        made_for = getpid();
        snprintf(buf, sizeof(buf), "%ld-%08x", (long)made_for, lmc_file_nonce());
    }
    return buf;
}

/* Every /dev/shm name this process made, removed at exit even when an attack fails. */
#define MAX_NAMES 64
static char g_names[MAX_NAMES][96];

static void forget_at_exit(const char *shm_name)
{
    for (size_t i = 0; i < MAX_NAMES; i++)
        if (g_names[i][0] == '\0') {
            snprintf(g_names[i], sizeof(g_names[i]), "%s", shm_name);
            return;
        }
}

static void remove_names(void)
{
    for (size_t i = 0; i < MAX_NAMES; i++)
        if (g_names[i][0] != '\0')
            shm_unlink(g_names[i]);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---------------------------------------------------------------------- */
/* A raw connection                                                        */
/* ---------------------------------------------------------------------- */

typedef struct conn {
    void *ctx, *sock;
    int64_t next_uid;
} conn;

typedef struct reply {
    int64_t uid;
    bool is_error;
    char error[512];
    msgpack_unpacked value; /* the response frame */
    bool has_value;
} reply;

static void conn_open(conn *c)
{
    char ep[128];
    snprintf(ep, sizeof(ep), "tcp://%s:%d", g_host, g_port);
    c->ctx = zmq_ctx_new();
    c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    if (zmq_connect(c->sock, ep) != 0)
        fail("FAIL: connect %s: %s", ep, zmq_strerror(zmq_errno()));
    c->next_uid = 1;
}

static void conn_close(conn *c)
{
    zmq_close(c->sock);
    zmq_ctx_term(c->ctx);
    memset(c, 0, sizeof(*c));
}

static void reply_free(reply *r)
{
    if (r->has_value)
        msgpack_unpacked_destroy(&r->value);
    r->has_value = false;
}

/* Send [uid, op, payload...]; the uid is returned (replies are matched by it). */
static int64_t send_req(conn *c, lmc_op op, msgpack_sbuffer *payload, size_t n)
{
    msgpack_sbuffer uid, opf;
    msgpack_sbuffer_init(&uid);
    msgpack_sbuffer_init(&opf);
    int64_t id = c->next_uid++;
    lmc_request_encode_uid_op(&uid, &opf, id, op);
    zmq_send(c->sock, uid.data, uid.size, ZMQ_SNDMORE);
    zmq_send(c->sock, opf.data, opf.size, n ? ZMQ_SNDMORE : 0);
    for (size_t i = 0; i < n; i++)
        zmq_send(c->sock, payload[i].data, payload[i].size, i + 1 < n ? ZMQ_SNDMORE : 0);
    msgpack_sbuffer_destroy(&uid);
    msgpack_sbuffer_destroy(&opf);
    return id;
}

/* The next reply (any uid); false on timeout. */
static bool recv_reply(conn *c, int timeout_ms, reply *r)
{
    memset(r, 0, sizeof(*r));
    zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return false;
    int part = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, c->sock, 0);
        more = zmq_msg_more(&m);
        if (part == 0) {
            msgpack_unpacked u;
            msgpack_unpacked_init(&u);
            if (msgpack_unpack_next(&u, zmq_msg_data(&m), zmq_msg_size(&m), NULL) ==
                MSGPACK_UNPACK_SUCCESS)
                r->uid =
                    u.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)u.data.via.u64 : -1;
            msgpack_unpacked_destroy(&u);
        } else if (part == 2) {
            msgpack_unpacked_init(&r->value);
            r->has_value = msgpack_unpack_next(&r->value, zmq_msg_data(&m), zmq_msg_size(&m),
                                               NULL) == MSGPACK_UNPACK_SUCCESS;
            const msgpack_object *o = &r->value.data;
            if (r->has_value && o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 1 &&
                o->via.map.ptr[0].key.type == MSGPACK_OBJECT_STR &&
                o->via.map.ptr[0].val.type == MSGPACK_OBJECT_STR) {
                r->is_error = true;
                const msgpack_object_str *s = &o->via.map.ptr[0].val.via.str;
                snprintf(r->error, sizeof(r->error), "%.*s", (int)s->size, s->ptr);
            }
        }
        zmq_msg_close(&m);
        part++;
    }
    return true;
}

/* Send and wait for this request's reply (earlier ones are dropped). */
static bool call(conn *c, lmc_op op, msgpack_sbuffer *payload, size_t n, reply *r)
{
    int64_t id = send_req(c, op, payload, n);
    uint64_t deadline = lmc_mono_ms() + TIMEOUT_MS;
    for (;;) {
        uint64_t now = lmc_mono_ms();
        if (now >= deadline || !recv_reply(c, (int)(deadline - now), r))
            return false;
        if (r->uid == id)
            return true;
        reply_free(r);
    }
}

/* Payload frames, reused: P(i) is frame i, cleared. */
static msgpack_sbuffer g_payload[MAX_FRAMES];
static msgpack_packer P(size_t i)
{
    msgpack_sbuffer_clear(&g_payload[i]);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &g_payload[i], msgpack_sbuffer_write);
    return pk;
}

static void pack_cstr(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* ---------------------------------------------------------------------- */
/* Regions and requests                                                    */
/* ---------------------------------------------------------------------- */

typedef struct region {
    char name[96];
    int fd;
    uint8_t *base;
    size_t bytes;
    int64_t num_blocks, tpb, bpt;
} region;

static void region_create(region *r, int64_t num_blocks, int64_t tpb, int64_t bpt)
{
    snprintf(r->name, sizeof(r->name), "/lmcache-client-attack-%s-%u", tag(), g_region_seq++);
    r->num_blocks = num_blocks;
    r->tpb = tpb;
    r->bpt = bpt;
    r->bytes = (size_t)(num_blocks * tpb * bpt);
    r->fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    forget_at_exit(r->name);
    if (r->fd < 0 || ftruncate(r->fd, (off_t)r->bytes) != 0)
        fail("FAIL: create %s: %s", r->name, strerror(errno));
    r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->base == MAP_FAILED)
        fail("FAIL: map %s: %s", r->name, strerror(errno));
}

static void region_destroy(region *r)
{
    munmap(r->base, r->bytes);
    close(r->fd);
    shm_unlink(r->name);
}

static uint8_t *block_at(const region *r, int64_t b)
{
    return r->base + (size_t)(b * r->tpb * r->bpt);
}

static void pack_register(const char *shm_name, const region *geom, int64_t instance,
                          const char *model, int ws, int worker)
{
    msgpack_packer pk = P(0);
    msgpack_pack_int64(&pk, instance);
    pk = P(1);
    lmc_kv_region_desc d = {.shm_name = (char *)shm_name,
                            .num_blocks = geom->num_blocks,
                            .tokens_per_block = geom->tpb,
                            .bytes_per_token = geom->bpt,
                            .dtype = LMC_DTYPE_UINT8};
    lmc_kv_region_encode(&pk, &d);
    pk = P(2);
    pack_cstr(&pk, model);
    pk = P(3);
    msgpack_pack_int(&pk, ws);
    pk = P(4);
    msgpack_pack_int(&pk, worker);
}

/* register_kv_cache; NULL on success, else the error (static buffer). */
static const char *do_register(conn *c, const char *shm_name, const region *geom, int64_t instance,
                               const char *model, int ws, int worker)
{
    static char msg[512];
    pack_register(shm_name, geom, instance, model, ws, worker);
    reply r;
    if (!call(c, LMC_OP_REGISTER_KV_CACHE, g_payload, 5, &r))
        fail("FAIL: no reply to register_kv_cache('%s')", shm_name);
    bool err = r.is_error;
    snprintf(msg, sizeof(msg), "%s", r.error);
    reply_free(&r);
    return err ? msg : NULL;
}

static void pack_instance(int64_t instance)
{
    msgpack_packer pk = P(0);
    msgpack_pack_int64(&pk, instance);
}

/* A key over tokens (worker < 0: nil, a lookup's). */
static void pack_key(size_t frame, const char *model, int ws, int worker, const uint32_t *tokens,
                     size_t n, size_t start, size_t end, const char *rid)
{
    msgpack_packer pk = P(frame);
    lmc_ipc_key k = {.model_name = (char *)model,
                     .world_size = ws,
                     .worker_id = worker,
                     .token_ids = (uint32_t *)tokens,
                     .n_tokens = n,
                     .start = (int64_t)start,
                     .end = (int64_t)end,
                     .request_id = (char *)rid,
                     .cache_salt = "",
                     .num_kv_readers = 1};
    lmc_ipc_key_encode(&pk, &k);
}

/*
 * store or retrieve of tokens [start, end) through blocks first_block...
 * (consecutive); rid is the key's request id (a retrieve reads through the
 * locks of that lookup's session; a store ignores it).
 */
static int64_t send_transfer(conn *c, lmc_op op, const char *rid, int64_t instance,
                             const char *model, int ws, int worker, const uint32_t *tokens,
                             size_t n, size_t start, size_t end, int64_t tpb, int64_t first_block)
{
    pack_key(0, model, ws, worker, tokens, n, start, end, rid);
    msgpack_packer pk = P(1);
    msgpack_pack_int64(&pk, instance);
    size_t nb = (end - start) / (size_t)tpb;
    int64_t *ids = malloc((nb ? nb : 1) * sizeof(*ids));
    for (size_t i = 0; i < nb; i++)
        ids[i] = first_block + (int64_t)i;
    pk = P(2);
    lmc_block_ids_encode(&pk, ids, nb);
    free(ids);
    pk = P(3);
    msgpack_pack_bin(&pk, 0);
    size_t frames = 4;
    if (op == LMC_OP_RETRIEVE) {
        pk = P(4);
        msgpack_pack_int(&pk, 0);
        frames = 5;
    }
    return send_req(c, op, g_payload, frames);
}

/* A synchronous store or retrieve; NULL when it answered (bytes, true), else why not. */
static const char *transfer(conn *c, lmc_op op, const char *rid, int64_t instance,
                            const char *model, int ws, int worker, const uint32_t *tokens, size_t n,
                            size_t start, size_t end, int64_t tpb, int64_t first_block)
{
    static char msg[512];
    int64_t id = send_transfer(c, op, rid, instance, model, ws, worker, tokens, n, start, end, tpb,
                               first_block);
    reply r;
    for (;;) {
        if (!recv_reply(c, TIMEOUT_MS, &r))
            fail("FAIL: no reply to %s", lmc_op_name(op));
        if (r.uid == id)
            break;
        reply_free(&r);
    }
    const char *out = NULL;
    if (r.is_error) {
        snprintf(msg, sizeof(msg), "%s", r.error);
        out = msg;
    } else if (!r.has_value || r.value.data.type != MSGPACK_OBJECT_ARRAY ||
               r.value.data.via.array.size != 2 ||
               r.value.data.via.array.ptr[1].type != MSGPACK_OBJECT_BOOLEAN ||
               !r.value.data.via.array.ptr[1].via.boolean) {
        out = "ok=false";
    }
    reply_free(&r);
    return out;
}

/* lookup + poll query_prefetch_status: the hit chunks (the session stays open). */
static int64_t lookup(conn *c, const char *model, int ws, const uint32_t *tokens, size_t n,
                      const char *rid)
{
    pack_key(0, model, ws, -1, tokens, n, 0, n, rid);
    reply r;
    if (!call(c, LMC_OP_LOOKUP, g_payload, 1, &r) || r.is_error)
        fail("FAIL: lookup: %s", r.error);
    reply_free(&r);
    uint64_t deadline = lmc_mono_ms() + TIMEOUT_MS;
    for (;;) {
        msgpack_packer pk = P(0);
        pack_cstr(&pk, rid);
        if (!call(c, LMC_OP_QUERY_PREFETCH_STATUS, g_payload, 1, &r))
            fail("FAIL: no reply to query_prefetch_status");
        if (r.has_value && r.value.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            int64_t hits = (int64_t)r.value.data.via.u64;
            reply_free(&r);
            return hits;
        }
        reply_free(&r);
        if (lmc_mono_ms() > deadline)
            fail("FAIL: prefetch of %s never finished", rid);
        usleep(1000);
    }
}

/* What a client does with a lookup whose retrieve failed: give its read locks back. */
static void free_lookup_locks(conn *c, const char *model, int ws, const uint32_t *tokens, size_t n,
                              const char *rid)
{
    pack_key(0, model, ws, -1, tokens, n, 0, n, rid);
    reply r;
    if (call(c, LMC_OP_FREE_LOOKUP_LOCKS, g_payload, 1, &r))
        reply_free(&r);
}

static void end_session(conn *c, const char *rid)
{
    msgpack_packer pk = P(0);
    pack_cstr(&pk, rid);
    reply r;
    if (call(c, LMC_OP_END_SESSION, g_payload, 1, &r))
        reply_free(&r);
}

static void clear_l1(conn *c)
{
    msgpack_packer pk = P(0);
    msgpack_pack_false(&pk);
    reply r;
    if (call(c, LMC_OP_CLEAR, g_payload, 1, &r))
        reply_free(&r);
}

static bool ping(conn *c)
{
    reply r;
    if (!call(c, LMC_OP_PING, g_payload, 0, &r))
        return false;
    bool ok =
        r.has_value && r.value.data.type == MSGPACK_OBJECT_BOOLEAN && r.value.data.via.boolean;
    reply_free(&r);
    return ok;
}

static int get_chunk_size(void)
{
    conn c;
    conn_open(&c);
    reply r;
    if (!call(&c, LMC_OP_GET_CHUNK_SIZE, g_payload, 0, &r) || !r.has_value ||
        r.value.data.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        fail("FAIL: get_chunk_size: no answer (is the server up?)");
    int cs = (int)r.value.data.via.u64;
    reply_free(&r);
    conn_close(&c);
    return cs;
}

/* Tokens of a request: n tokens from seed (distinct seeds, distinct chunks). */
static uint32_t *make_tokens(size_t n, uint32_t seed)
{
    uint32_t *t = malloc(n * sizeof(*t));
    for (size_t i = 0; i < n; i++)
        t[i] = seed * 1000003u + (uint32_t)i;
    return t;
}

/* The load generator's KV byte pattern, from seed (client/workload.h). */
static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, seed);
    lmc_kv_pattern_fill(&pat, p, n);
}

static bool check(const uint8_t *p, size_t n, uint8_t seed)
{
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, seed);
    return lmc_kv_pattern_check(&pat, p, n);
}

/* ---------------------------------------------------------------------- */
/* Clients through lmc_client                                              */
/* ---------------------------------------------------------------------- */

#define TPB 16

/* Request uids of raw_call, far from lmc_client's own. */
static int64_t g_uid = (int64_t)1 << 40;

static lmc_client *client(const char *model, int ws, int worker, int64_t blocks)
{
    lmc_client_config cfg;
    lmc_client_config_init(&cfg);
    cfg.host = g_host;
    cfg.port = g_port;
    cfg.model_name = model;
    cfg.world_size = ws;
    cfg.worker_id = worker;
    cfg.num_blocks = blocks;
    cfg.tokens_per_block = TPB;
    cfg.bytes_per_token = 64;
    cfg.timeout_ms = 20000;
    cfg.instance_id = (int64_t)getpid() * 1000 + ws * 10 + worker;
    lmc_client *c;
    lmc_error err;
    if (lmc_client_create(&cfg, &c, &err) != LMC_OK) {
        fprintf(stderr, "attack: client: %s\n", err.msg);
        exit(2);
    }
    return c;
}

/* Block ids 0..n-1. */
static int64_t *blocks(size_t n)
{
    int64_t *b = malloc(n * sizeof(*b));
    for (size_t i = 0; i < n; i++)
        b[i] = (int64_t)i;
    return b;
}

/*
 * Send one request of payload frames built by the caller; the response
 * frame into *resp (caller frees). LMC_ERR_INVALID is an error reply.
 */
static lmc_status raw_call(lmc_client *c, lmc_op op, msgpack_sbuffer *payload, size_t n,
                           char **resp, size_t *resp_len, lmc_error *err)
{
    msgpack_sbuffer uid, opf;
    msgpack_sbuffer_init(&uid);
    msgpack_sbuffer_init(&opf);
    lmc_request_encode_uid_op(&uid, &opf, g_uid++, op);
    const void *frames[8] = {uid.data, opf.data};
    size_t lens[8] = {uid.size, opf.size};
    for (size_t i = 0; i < n; i++) {
        frames[2 + i] = payload[i].data;
        lens[2 + i] = payload[i].size;
    }
    void *r = NULL;
    size_t rl = 0;
    lmc_status st = lmc_client_call_raw(c, frames, lens, 2 + n, &r, &rl, err);
    msgpack_sbuffer_destroy(&uid);
    msgpack_sbuffer_destroy(&opf);
    if (resp != NULL) {
        *resp = r;
        *resp_len = rl;
    } else {
        free(r);
    }
    return st;
}

/* A lookup with every key field chosen: model, world size, readers, salt. */
static lmc_status raw_lookup(lmc_client *c, const char *model, int64_t ws, const char *rid,
                             const uint32_t *tok, size_t n, int64_t readers, const char *salt,
                             lmc_error *err)
{
    msgpack_sbuffer p[2];
    msgpack_sbuffer_init(&p[0]);
    msgpack_sbuffer_init(&p[1]);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &p[0], msgpack_sbuffer_write);
    lmc_ipc_key key = {.model_name = (char *)model,
                       .world_size = ws,
                       .worker_id = -1,
                       .token_ids = (uint32_t *)tok,
                       .n_tokens = n,
                       .start = 0,
                       .end = (int64_t)n,
                       .request_id = (char *)rid,
                       .cache_salt = (char *)(salt ? salt : ""),
                       .num_kv_readers = readers};
    lmc_ipc_key_encode(&pk, &key);
    msgpack_packer_init(&pk, &p[1], msgpack_sbuffer_write);
    msgpack_pack_int(&pk, 1);
    lmc_status st = raw_call(c, LMC_OP_LOOKUP, p, 2, NULL, NULL, err);
    msgpack_sbuffer_destroy(&p[0]);
    msgpack_sbuffer_destroy(&p[1]);
    return st;
}

/* Poll query_prefetch_status; the hit chunks, or -1. */
static long wait_hits(lmc_client *c, const char *rid)
{
    for (int i = 0; i < 20000; i++) {
        msgpack_sbuffer p;
        msgpack_sbuffer_init(&p);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &p, msgpack_sbuffer_write);
        msgpack_pack_str_with_body(&pk, rid, strlen(rid));
        char *r = NULL;
        size_t rl = 0;
        lmc_error err;
        lmc_status st = raw_call(c, LMC_OP_QUERY_PREFETCH_STATUS, &p, 1, &r, &rl, &err);
        msgpack_sbuffer_destroy(&p);
        long v = -1;
        bool pending = st == LMC_OK && rl == 1 && (uint8_t)r[0] == 0xc0;
        if (st == LMC_OK && rl >= 1 && (uint8_t)r[0] <= 0x7f)
            v = (uint8_t)r[0];
        else if (st == LMC_OK && rl == 2 && (uint8_t)r[0] == 0xcc)
            v = (uint8_t)r[1];
        else if (st == LMC_OK && rl == 3 && (uint8_t)r[0] == 0xcd)
            v = (uint8_t)r[1] << 8 | (uint8_t)r[2];
        free(r);
        if (!pending)
            return v;
        lmc_sleep_ns(1000 * 1000);
    }
    return -1;
}

static void client_end(lmc_client *c, const char *rid)
{
    lmc_error err;
    lmc_client_end_session(c, rid, &err);
}

/* ---------------------------------------------------------------------- */
/* Raw ZMTP connections                                                    */
/* ---------------------------------------------------------------------- */

static int tcp_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    inet_pton(AF_INET, g_host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Greeting and READY of a DEALER, as libzmq sends them. */
static bool zmtp_hello(int fd)
{
    uint8_t g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1, 'N', 'U', 'L', 'L'};
    static const uint8_t ready[] = {0x04, 28,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S',
                                    'o',  'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e',
                                    0,    0,   0,   6,   'D', 'E', 'A', 'L', 'E', 'R'};
    return write(fd, g, sizeof(g)) == (ssize_t)sizeof(g) &&
           write(fd, ready, sizeof(ready)) == (ssize_t)sizeof(ready);
}

/* Whether the server closed fd within ms (reads and drops what it sent before). */
static bool closed_within(int fd, int ms)
{
    uint64_t end = lmc_mono_ms() + (uint64_t)ms;
    char buf[4096];
    for (;;) {
        int left = (int)(end - lmc_mono_ms());
        if (left <= 0)
            return false;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            return false;
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r <= 0)
            return true;
    }
}

/*
 * RSS bounds mean nothing under a sanitizer (ASan keeps freed memory in
 * quarantine, and malloc_trim does not reach its allocator): with
 * ATTACK_NO_RSS set they are reported, not checked.
 */
static bool rss_checked(void)
{
    const char *v = getenv("ATTACK_NO_RSS");
    return v == NULL || v[0] == '\0';
}

static long rss_kb(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb;
}

/* ---------------------------------------------------------------------- */
/* Attacks                                                                 */
/* ---------------------------------------------------------------------- */

static int attack_ping(void)
{
    conn c;
    conn_open(&c);
    bool ok = ping(&c);
    conn_close(&c);
    if (!ok)
        fail("FAIL: the server does not answer a ping");
    return 0;
}

/*
 * Run as uid 65534 in a child (the parent made the objects as root): every
 * name in names is refused with the same message; the child's own region
 * registers.
 */
static int steal_as_nobody(char **names, size_t n, bool drop)
{
    if (drop && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
        fail("FAIL: setuid(%d): %s", NOBODY, strerror(errno));
    conn c;
    conn_open(&c);
    region own;
    region_create(&own, 16, 16, 64);
    region gw; /* group-writable: refused even though it is the client's own */
    region_create(&gw, 16, 16, 64);
    fchmod(gw.fd, 0620);
    int bad = 0;
    char first[512] = "";
    for (size_t i = 0; i <= n; i++) {
        const char *name = i < n ? names[i] : gw.name;
        const char *e = do_register(&c, name, &own, 100 + (int64_t)i, "attack-steal", 1, 0);
        if (e == NULL) {
            printf("VULNERABLE: registered '%s' as uid %d\n", name, (int)geteuid());
            bad = 1;
            continue;
        }
        if (first[0] == '\0')
            snprintf(first, sizeof(first), "%s", e);
        else if (strcmp(first, e) != 0) {
            printf("VULNERABLE: refusals differ: '%s' for '%s', '%s' before\n", e, name, first);
            bad = 1;
        }
    }
    printf("refusal: %s\n", first);
    const char *e = do_register(&c, own.name, &own, 99, "attack-steal", 1, 0);
    if (e != NULL) {
        printf("FAIL: the client's own region was refused: %s\n", e);
        bad = 1;
    }
    region_destroy(&own);
    region_destroy(&gw);
    conn_close(&c);
    return bad;
}

static int attack_shm_steal(const char *pool)
{
    bool root = geteuid() == 0;
    region victim;
    region_create(&victim, 16, 16, 64);
    memset(victim.base, 0xab, victim.bytes);
    char link[96], fifo[96], noprefix[96], missing[96], sem_name[64], sem_path[96], pool_name[128];
    snprintf(link, sizeof(link), "/lmcache-client-attack-%s-link", tag());
    snprintf(fifo, sizeof(fifo), "/lmcache-client-attack-%s-fifo", tag());
    snprintf(noprefix, sizeof(noprefix), "/attack-%s-noprefix", tag());
    snprintf(missing, sizeof(missing), "/lmcache-client-attack-%s-missing", tag());
    snprintf(sem_name, sizeof(sem_name), "/attack-%s", tag());
    snprintf(sem_path, sizeof(sem_path), "sem.attack-%s", tag());
    snprintf(pool_name, sizeof(pool_name), "/%s", pool);
    char sem_shm[100]; /* a named semaphore is the shm object "/sem.NAME" */
    snprintf(sem_shm, sizeof(sem_shm), "/%s", sem_path);
    const char *made[] = {link, fifo, noprefix, sem_shm};
    for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
        forget_at_exit(made[i]);
    char dev[160];
    snprintf(dev, sizeof(dev), "/dev/shm%s", victim.name);
    char devl[160];
    snprintf(devl, sizeof(devl), "/dev/shm%s", link);
    if (symlink(dev, devl) != 0)
        fail("FAIL: symlink %s: %s", devl, strerror(errno));
    char devf[160];
    snprintf(devf, sizeof(devf), "/dev/shm%s", fifo);
    if (mkfifo(devf, 0666) != 0)
        fail("FAIL: mkfifo %s: %s", devf, strerror(errno));
    chmod(devf, 0666);
    sem_t *sem = sem_open(sem_name, O_CREAT | O_EXCL, 0600, 1);
    if (sem == SEM_FAILED)
        fail("FAIL: sem_open: %s", strerror(errno));
    /* A region without the prefix, owned by whoever registers it. */
    int np = shm_open(noprefix, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (np < 0 || ftruncate(np, 16 * 16 * 64) != 0)
        fail("FAIL: create %s", noprefix);
    if (root && fchown(np, NOBODY, NOBODY) != 0)
        fail("FAIL: chown %s", noprefix);
    close(np);

    /* The victim's region and the semaphore only count as theft across users. */
    char *names[] = {pool_name, link, fifo, noprefix, missing, sem_path, victim.name};
    size_t n = sizeof(names) / sizeof(names[0]) - (root ? 0 : 1);
    int bad;
    if (root) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(steal_as_nobody(names, n, true));
        int status = 0;
        waitpid(pid, &status, 0);
        bad = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    } else {
        printf("SKIP: not root: the cross-user part needs a second uid\n");
        bad = steal_as_nobody(names, n, false);
    }
    for (size_t i = 0; i < victim.bytes; i++)
        if (victim.base[i] != 0xab) {
            printf("VULNERABLE: the victim's region was written\n");
            bad = 1;
            break;
        }
    unlink(devl);
    unlink(devf);
    sem_close(sem);
    sem_unlink(sem_name);
    shm_unlink(noprefix);
    region_destroy(&victim);
    return bad;
}

/*
 * One truncation of region r (registered as instance for model): store 2
 * chunks t1 through it, look them up, cut the object to 0 bytes, store t2
 * and retrieve t1 through it (both must fail, and not kill the server),
 * grow it back, store t2, retrieve it and check every byte. strict (the
 * attack) checks every step's outcome; otherwise (the soak, where other
 * clients evict and clear L1 meanwhile) only that the server lives, that
 * no store from a whole region fails, and that what reads back is right.
 * Returns 1 when the server did not hold.
 */
static int truncate_round(conn *c, region *r, int64_t instance, const char *model, uint32_t seed,
                          bool strict)
{
    int64_t tpb = r->tpb, bpc = g_chunk / tpb;
    size_t n = 2 * (size_t)g_chunk;
    uint32_t *t1 = make_tokens(n, seed), *t2 = make_tokens(n, seed + 1);
    char rid1[64], rid2[64];
    snprintf(rid1, sizeof(rid1), "%s-%u-1", model, seed);
    snprintf(rid2, sizeof(rid2), "%s-%u-2", model, seed);
    fill(r->base, r->bytes, 3);
    const char *e = transfer(c, LMC_OP_STORE, "attack", instance, model, 1, 0, t1, n, 0, n, tpb, 0);
    if (e != NULL)
        fail("FAIL: the first store: %s", e);
    int64_t hits = lookup(c, model, 1, t1, n, rid1);
    if (ftruncate(r->fd, 0) != 0)
        fail("FAIL: ftruncate: %s", strerror(errno));
    int bad = 0;
    e = transfer(c, LMC_OP_STORE, "attack", instance, model, 1, 0, t2, n, 0, n, tpb, 0);
    if (strict) {
        printf("store from a truncated region: %s\n", e ? e : "ok (!)");
        if (e == NULL)
            bad = 1;
    }
    e = transfer(c, LMC_OP_RETRIEVE, rid1, instance, model, 1, 0, t1, n, 0,
                 (size_t)hits * (size_t)g_chunk, tpb, 2 * bpc);
    if (strict) {
        printf("retrieve into a truncated region: %s\n", e ? e : "ok (!)");
        if (e == NULL && hits > 0)
            bad = 1;
    }
    if (e != NULL)
        free_lookup_locks(c, model, 1, t1, n, rid1);
    end_session(c, rid1);
    if (!ping(c))
        fail("VULNERABLE: the server died (SIGBUS?) after a region was truncated");
    /* Grown again, the region works: the failed copies hurt nobody. */
    if (ftruncate(r->fd, (off_t)r->bytes) != 0)
        fail("FAIL: ftruncate: %s", strerror(errno));
    fill(r->base, r->bytes, 4);
    e = transfer(c, LMC_OP_STORE, "attack", instance, model, 1, 0, t2, n, 0, n, tpb, 0);
    if (e != NULL) {
        printf("FAIL: a store after the region grew back: %s\n", e);
        bad = 1;
    }
    hits = lookup(c, model, 1, t2, n, rid2);
    memset(r->base, 0, r->bytes);
    e = hits > 0 || strict ? transfer(c, LMC_OP_RETRIEVE, rid2, instance, model, 1, 0, t2, n, 0,
                                      (size_t)hits * (size_t)g_chunk, tpb, 0)
                           : NULL;
    end_session(c, rid2);
    /* Outside the attack a clear may drop the chunks before the retrieve (ok=false). */
    bool read = e == NULL || (!strict && strcmp(e, "ok=false") == 0);
    size_t got = e == NULL ? (size_t)hits : 0;
    if ((strict && hits != 2) || !read ||
        !check(r->base, got * (size_t)g_chunk * (size_t)r->bpt, 4)) {
        printf("FAIL: the chunks stored after the region grew back do not read back (%lld hits, "
               "%s)\n",
               (long long)hits, e ? e : "ok");
        bad = 1;
    }
    free(t1);
    free(t2);
    return bad;
}

static void unregister(conn *c, int64_t instance)
{
    pack_instance(instance);
    reply rp;
    if (call(c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1, &rp))
        reply_free(&rp);
}

/* A connection and a region of 4 chunks registered as instance 7001 of model attack-trunc. */
static void truncate_setup(conn *c, region *r)
{
    conn_open(c);
    int64_t tpb = 16, bpc = g_chunk / tpb;
    region_create(r, 4 * bpc, tpb, 256);
    const char *e = do_register(c, r->name, r, 7001, "attack-trunc", 1, 0);
    if (e != NULL)
        fail("FAIL: register: %s", e);
}

static void truncate_teardown(conn *c, region *r)
{
    unregister(c, 7001);
    region_destroy(r);
    conn_close(c);
}

static int attack_truncate(void)
{
    conn c;
    region r;
    truncate_setup(&c, &r);
    clear_l1(&c); /* room for every chunk (a full L1 skips a store's keys), so all must read back */
    int bad = truncate_round(&c, &r, 7001, "attack-trunc", 1, true);
    truncate_teardown(&c, &r);
    return bad;
}

/* The unregister race: a connection, a big and a small region, and a stored prefix. */
typedef struct race {
    conn c;
    region big, small;
    uint32_t *prefix;
    size_t n;
    int64_t tpb;
} race;

static void race_setup(race *x)
{
    conn_open(&x->c);
    int64_t bpc = g_chunk / 16, chunks = 8;
    x->tpb = 16;
    region_create(&x->big, chunks * bpc, x->tpb, 4096);
    region_create(&x->small, bpc, x->tpb, 4096);
    fill(x->big.base, x->big.bytes, 5);
    const char *e = do_register(&x->c, x->big.name, &x->big, 7100, "attack-race", 1, 0);
    if (e != NULL)
        fail("FAIL: register: %s", e);
    x->n = (size_t)(chunks * g_chunk);
    x->prefix = make_tokens(x->n, 100);
    e = transfer(&x->c, LMC_OP_STORE, "attack", 7100, "attack-race", 1, 0, x->prefix, x->n, 0, x->n,
                 x->tpb, 0);
    if (e != NULL)
        fail("FAIL: the first store: %s", e);
}

/*
 * Round i: a lookup of the prefix, then a store and a retrieve in flight on
 * workers, the region pulled away under them (and, every other round,
 * replaced by the smaller object: a new mapping, maybe elsewhere), then
 * registered again; every request must be answered.
 */
static void race_round(race *x, int i)
{
    conn *c = &x->c;
    size_t n = x->n, sent = 0;
    int64_t tpb = x->tpb;
    uint32_t *t = make_tokens(n, 200 + (uint32_t)i);
    char rid[32];
    snprintf(rid, sizeof(rid), "attack-race-%d", i);
    int64_t hits = lookup(c, "attack-race", 1, x->prefix, n, rid);
    send_transfer(c, LMC_OP_STORE, "attack", 7100, "attack-race", 1, 0, t, n, 0, n, tpb, 0);
    int64_t retrieve = send_transfer(c, LMC_OP_RETRIEVE, rid, 7100, "attack-race", 1, 0, x->prefix,
                                     n, 0, (size_t)hits * (size_t)g_chunk, tpb, 0);
    bool retrieved = false;
    pack_instance(7100);
    send_req(c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1);
    sent += 3;
    if (i % 2 == 1) {
        pack_register(x->small.name, &x->small, 7100, "attack-race", 1, 0);
        send_req(c, LMC_OP_REGISTER_KV_CACHE, g_payload, 5);
        send_transfer(c, LMC_OP_STORE, "attack", 7100, "attack-race", 1, 0, t, n, 0, n, tpb, 0);
        sent += 2;
    }
    pack_register(x->big.name, &x->big, 7100, "attack-race", 1, 0);
    send_req(c, LMC_OP_REGISTER_KV_CACHE, g_payload, 5);
    sent++;
    for (; sent > 0; sent--) {
        reply r;
        if (!recv_reply(c, TIMEOUT_MS, &r))
            fail("VULNERABLE: the server stopped answering during the unregister race");
        if (r.uid == retrieve)
            retrieved = !r.is_error;
        reply_free(&r);
    }
    if (!retrieved)
        free_lookup_locks(c, "attack-race", 1, x->prefix, n, rid);
    end_session(c, rid);
    free(t);
}

static void race_teardown(race *x)
{
    if (!ping(&x->c))
        fail("VULNERABLE: the server died during the unregister race");
    unregister(&x->c, 7100);
    free(x->prefix);
    region_destroy(&x->big);
    region_destroy(&x->small);
    conn_close(&x->c);
}

static int attack_unregister_race(void)
{
    race x;
    race_setup(&x);
    for (int i = 0; i < 60; i++)
        race_round(&x, i);
    race_teardown(&x);
    return 0;
}

static int attack_world_size(void)
{
    conn c;
    conn_open(&c);
    const char *model = "attack-ws";
    int64_t tpb = 16, bpc = g_chunk / tpb, neighbours = 8;
    region a, b;
    region_create(&a, (neighbours + 1) * bpc, tpb, 64); /* world size 1: 16 KiB chunks */
    region_create(&b, 2 * bpc, tpb, 8192);              /* world size 2: 2 MiB chunks */
    const char *e = do_register(&c, a.name, &a, 7201, model, 1, 0);
    if (e == NULL)
        e = do_register(&c, b.name, &b, 7202, model, 2, 0);
    if (e != NULL)
        fail("FAIL: register: %s", e);
    clear_l1(&c);
    /* A hole in L1 just before the neighbours: x is dropped by the clear, they are read-locked. */
    size_t one = (size_t)g_chunk;
    uint32_t *x = make_tokens(one, 300);
    fill(a.base, a.bytes, 9);
    if ((e = transfer(&c, LMC_OP_STORE, "attack", 7201, model, 1, 0, x, one, 0, one, tpb, 0)) !=
        NULL)
        fail("FAIL: store x: %s", e);
    size_t nn = (size_t)neighbours * one;
    uint32_t *nt = make_tokens(nn, 301);
    for (int64_t k = 0; k < neighbours; k++)
        fill(block_at(&a, k * bpc), (size_t)(bpc * tpb * a.bpt), (uint8_t)(20 + k));
    if ((e = transfer(&c, LMC_OP_STORE, "attack", 7201, model, 1, 0, nt, nn, 0, nn, tpb, 0)) !=
        NULL)
        fail("FAIL: store the neighbours: %s", e);
    int64_t hits = lookup(&c, model, 1, nt, nn, "attack-ws-n");
    if (hits != neighbours)
        fail("FAIL: %lld of %lld neighbour chunks found", (long long)hits, (long long)neighbours);
    clear_l1(&c);

    int bad = 0;
    /* Write: 2 MiB of b into a 16 KiB object (in x's hole, before the neighbours). */
    memset(b.base, 0xee, b.bytes);
    uint32_t *y = make_tokens(one, 302);
    e = transfer(&c, LMC_OP_STORE, "attack", 7202, model, 1, 0, y, one, 0, one, tpb, 0);
    printf("store through a world-size-2 region with a world-size-1 key: %s\n", e ? e : "ok (!)");
    if (e == NULL)
        bad = 1;
    /* Read: a neighbour's 16 KiB object read out as a 2 MiB chunk. */
    memset(b.base, 0, b.bytes);
    int64_t h1 = lookup(&c, model, 1, nt, one, "attack-ws-r");
    e = transfer(&c, LMC_OP_RETRIEVE, "attack-ws-r", 7202, model, 1, 0, nt, one, 0,
                 (size_t)h1 * one, tpb, 0);
    printf("retrieve into a world-size-2 region with a world-size-1 key: %s\n", e ? e : "ok (!)");
    if (e != NULL)
        free_lookup_locks(&c, model, 1, nt, one, "attack-ws-r");
    end_session(&c, "attack-ws-r");
    if (e == NULL && h1 > 0) {
        size_t leaked = 0;
        for (size_t i = (size_t)(bpc * tpb * a.bpt); i < b.bytes / 2; i++)
            leaked += b.base[i] != 0;
        printf("VULNERABLE: the retrieve copied %zu bytes from beyond the object\n", leaked);
        bad = 1;
    }
    /* A rank the region was not registered for. */
    e = transfer(&c, LMC_OP_STORE, "attack", 7202, model, 2, 1, y, one, 0, one, tpb, 0);
    printf("store with worker id 1 through worker 0's region: %s\n", e ? e : "ok (!)");
    if (e == NULL)
        bad = 1;

    /* The neighbours read back intact. */
    memset(a.base, 0, a.bytes);
    e = transfer(&c, LMC_OP_RETRIEVE, "attack-ws-n", 7201, model, 1, 0, nt, nn, 0, nn, tpb, 0);
    end_session(&c, "attack-ws-n");
    if (e != NULL)
        fail("FAIL: retrieve the neighbours: %s", e);
    for (int64_t k = 0; k < neighbours; k++)
        if (!check(block_at(&a, k * bpc), (size_t)(bpc * tpb * a.bpt), (uint8_t)(20 + k))) {
            printf("VULNERABLE: neighbour chunk %lld was overwritten\n", (long long)k);
            bad = 1;
        }
    if (!ping(&c))
        fail("VULNERABLE: the server died");
    for (int64_t id = 7201; id <= 7202; id++)
        unregister(&c, id);
    free(x);
    free(y);
    free(nt);
    region_destroy(&a);
    region_destroy(&b);
    conn_close(&c);
    return bad;
}

/* register until it works or 5 s pass (the server learns of closed connections asynchronously). */
static const char *register_eventually(conn *c, const region *r, int64_t instance,
                                       const char *model)
{
    uint64_t deadline = lmc_mono_ms() + 5000;
    const char *e;
    while ((e = do_register(c, r->name, r, instance, model, 1, 0)) != NULL &&
           lmc_mono_ms() < deadline)
        usleep(50 * 1000);
    return e;
}

static int attack_slots(void)
{
    int bad = 0;
    region r;
    region_create(&r, 16, 16, 64);
    for (int i = 0; i < 70; i++) {
        conn c;
        conn_open(&c);
        char model[64];
        snprintf(model, sizeof(model), "attack-slot-%d", i);
        const char *e = do_register(&c, r.name, &r, 7300 + i, model, 1, 0);
        if (e != NULL && i < 64)
            fail("FAIL: register model %d: %s", i, e);
        conn_close(&c); /* vanish without unregistering */
    }
    conn c;
    conn_open(&c);
    const char *e = register_eventually(&c, &r, 7399, "attack-slot-new");
    if (e != NULL) {
        printf("VULNERABLE: a new model is refused after 70 clients left: %s\n", e);
        bad = 1;
    }

    /* A squatter pins a model's bytes per token only while it is registered. */
    region wide;
    region_create(&wide, 16, 16, 128);
    conn s;
    conn_open(&s);
    if ((e = do_register(&s, r.name, &r, 7400, "attack-squat", 1, 0)) != NULL)
        fail("FAIL: register the squatter: %s", e);
    e = do_register(&c, wide.name, &wide, 7401, "attack-squat", 1, 0);
    printf("a second layout while the first is registered: %s\n", e ? e : "ok");
    /* Nor can another connection use or remove the squatter's instance. */
    pack_instance(7400);
    reply rp;
    if (!call(&c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1, &rp))
        fail("FAIL: no reply to unregister_kv_cache");
    if (!rp.is_error) {
        printf("VULNERABLE: another connection unregistered the squatter's instance\n");
        bad = 1;
    }
    reply_free(&rp);
    uint32_t *t = make_tokens((size_t)g_chunk, 400);
    e = transfer(&c, LMC_OP_STORE, "attack", 7400, "attack-squat", 1, 0, t, (size_t)g_chunk, 0,
                 (size_t)g_chunk, 16, 0);
    if (e == NULL) {
        printf("VULNERABLE: another connection stored from the squatter's region\n");
        bad = 1;
    }
    free(t);
    conn_close(&s);
    if ((e = register_eventually(&c, &wide, 7401, "attack-squat")) != NULL) {
        printf("VULNERABLE: the squatter's layout outlived it: %s\n", e);
        bad = 1;
    }
    for (int64_t id = 7399; id <= 7401; id++)
        unregister(&c, id);
    conn_close(&c);
    region_destroy(&r);
    region_destroy(&wide);
    return bad;
}

/* ---------------------------------------------------------------------- */
/* Attacks on sessions, locks, limits, connections and logs                */
/* ---------------------------------------------------------------------- */

static int attack_lock_steal(void)
{
    const char *A = "lock-steal";
    lmc_client *c = client("attack-steal", 1, 0, 256);
    size_t cs = (size_t)lmc_client_chunk_size(c), n = 4 * cs;
    uint32_t *tok = make_tokens(n, 1);
    int64_t *ids = blocks(n / TPB);
    lmc_error err;
    bool ok;
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, 42);
    lmc_kv_pattern_fill(&pat, lmc_client_block(c, 0), n * 64);
    if (lmc_client_store(c, "st-store", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) != LMC_OK)
        fail("FAIL: attack %s: store: %s", A, err.msg);
    /* The bystander: a request that looked up the prefix and will read it later. */
    if (raw_lookup(c, "attack-steal", 1, "st-bystander", tok, n, 1, NULL, &err) != LMC_OK ||
        wait_hits(c, "st-bystander") != 4)
        fail("FAIL: attack %s: bystander lookup: %s", A, err.msg);
    /* Everything that used to release a lock twice or release someone else's. */
    size_t h;
    lmc_client_lookup(c, "st-a", tok, n, n, NULL, &h, &err);
    lmc_client_retrieve(c, "st-a", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err);
    lmc_client_free_lookup_locks(c, "st-a", tok, n, n, NULL, &err);
    lmc_client_free_lookup_locks(c, "st-a", tok, n, n, NULL, &err);
    lmc_client_lookup(c, "st-a", tok, n, n, NULL, &h, &err);
    lmc_client_retrieve(c, "st-a", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err);
    lmc_client_lookup(c, "st-a", tok, n, n, NULL, &h, &err); /* reuses the id */
    lmc_client_retrieve(c, "st-a", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err);
    lmc_client_retrieve(c, "st-a", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err);
    if (ok)
        fail("FAIL: attack %s: %s", A, "a second retrieve of one lookup read again");
    lmc_client_retrieve(c, "st-none", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err);
    if (ok)
        fail("FAIL: attack %s: %s", A, "a retrieve without a session read the bystander's chunks");
    lmc_client_end_session(c, "st-a", &err);
    lmc_client_end_session(c, "st-a", &err);
    /* A non-forced clear drops every chunk nobody holds a lock on. */
    if (lmc_client_clear(c, false, &err) != LMC_OK)
        fail("FAIL: attack %s: clear: %s", A, err.msg);
    memset(lmc_client_block(c, 0), 0, n * 64);
    if (lmc_client_retrieve(c, "st-bystander", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) !=
            LMC_OK ||
        !ok)
        fail("FAIL: attack %s: %s", A,
             "the bystander's chunks lost their lock (clear dropped them)");
    lmc_kv_pattern_init(&pat, 42);
    if (!lmc_kv_pattern_check(&pat, lmc_client_block(c, 0), n * 64))
        fail("FAIL: attack %s: %s", A, "the bystander read wrong bytes");
    client_end(c, "st-bystander");
    lmc_client_clear(c, true, &err);
    free(tok);
    free(ids);
    lmc_client_destroy(c);
    printf("attack lock-steal: ok (no request's lock was released by another)\n");
    return 0;
}

static int attack_ws2(void)
{
    const char *A = "ws2";
    lmc_client *c[2] = {client("attack-ws2", 2, 0, 256), client("attack-ws2", 2, 1, 256)};
    size_t cs = (size_t)lmc_client_chunk_size(c[0]), n = 4 * cs;
    uint32_t *tok = make_tokens(n, 2);
    int64_t *ids = blocks(n / TPB);
    lmc_error err;
    bool ok;
    for (int r = 0; r < 2; r++)
        if (lmc_client_store(c[r], "w2-store", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) !=
            LMC_OK)
            fail("FAIL: attack %s: store: %s", A, err.msg);
    /* docs/protocol.md's lifecycle as it read: num_kv_readers = world size. */
    if (raw_lookup(c[0], "attack-ws2", 2, "w2-req", tok, n, 2, NULL, &err) != LMC_OK ||
        wait_hits(c[0], "w2-req") != 4)
        fail("FAIL: attack %s: lookup: %s", A, err.msg);
    for (int r = 0; r < 2; r++)
        if (lmc_client_retrieve(c[r], "w2-req", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) !=
                LMC_OK ||
            !ok)
            fail("FAIL: attack %s: retrieve: %s", A, err.msg);
    lmc_client_end_session(c[0], "w2-req", &err);
    lmc_client_clear(c[0], false, &err);
    if (raw_lookup(c[0], "attack-ws2", 2, "w2-after", tok, n, 1, NULL, &err) != LMC_OK)
        fail("FAIL: attack %s: lookup: %s", A, err.msg);
    long h = wait_hits(c[0], "w2-after");
    client_end(c[0], "w2-after");
    if (h != 0)
        fail("FAIL: attack %s: %s", A,
             "chunks stayed read-locked after end_session (clear kept them)");
    free(tok);
    free(ids);
    lmc_client_destroy(c[0]);
    lmc_client_destroy(c[1]);
    printf("attack ws2: ok (no lock left after end_session)\n");
    return 0;
}

typedef struct pinger {
    volatile bool stop;
    double max_ms;
    int n;
} pinger;

static void *ping_loop(void *arg)
{
    pinger *p = arg;
    lmc_client *c = client("attack-ping", 1, 0, 16);
    while (!p->stop) {
        uint64_t t0 = lmc_mono_ns();
        lmc_error err;
        lmc_client_ping(c, &err);
        double ms = (double)(lmc_mono_ns() - t0) / 1e6;
        if (ms > p->max_ms)
            p->max_ms = ms;
        p->n++;
        lmc_sleep_ns(5 * 1000 * 1000);
    }
    lmc_client_destroy(c);
    return NULL;
}

static int attack_big_lookup(void)
{
    const char *A = "big-lookup";
    lmc_client *c = client("attack-big", 255, 0, 16);
    pinger p = {0};
    pthread_t th;
    pthread_create(&th, NULL, ping_loop, &p);
    lmc_sleep_ns(50 * 1000 * 1000);
    size_t n = LMC_PROTO_MAX_TOKENS;
    uint32_t *tok = calloc(n, sizeof(*tok)); /* token 0: one byte each, a 4 MB message */
    lmc_error err;
    uint64_t t0 = lmc_mono_ns();
    lmc_status st = raw_lookup(c, "attack-big", 255, "big", tok, n, 1, NULL, &err);
    double took = (double)(lmc_mono_ns() - t0) / 1e6;
    if (st != LMC_ERR_INVALID || strstr(err.msg, "--max-lookup-tokens") == NULL)
        fail("FAIL: attack %s: a 4 M-token lookup was not refused: %s", A, err.msg);
    /* The largest allowed: 1 M tokens x world size 255, about 1 M keys. */
    n = 1 << 20;
    st = raw_lookup(c, "attack-big", 255, "big-ok", tok, n, 1, NULL, &err);
    long h = st == LMC_OK ? wait_hits(c, "big-ok") : -1;
    client_end(c, "big-ok");
    p.stop = true;
    pthread_join(th, NULL);
    if (st != LMC_OK || h != 0)
        fail("FAIL: attack %s: the largest allowed lookup failed: %s", A, err.msg);
    char detail[128];
    snprintf(detail, sizeof(detail), "%.0f ms", p.max_ms);
    if (p.max_ms > 500)
        fail("FAIL: attack %s: a ping waited %s behind the big lookups", A, detail);
    free(tok);
    lmc_client_destroy(c);
    printf("attack big-lookup: ok (refused in %.0f ms; pings answered within %.0f ms)\n", took,
           p.max_ms);
    return 0;
}

/* Lookups of distinct request ids (never ended) until one is refused; how many got in. */
static long flood(lmc_client *c, const char *model, int64_t ws, const char *prefix, size_t chunks,
                  long max, const char *flag, bool new_salts, char *why, size_t why_len)
{
    size_t cs = (size_t)lmc_client_chunk_size(c), n = chunks * cs;
    uint32_t *tok = make_tokens(n, 3);
    long i;
    for (i = 0; i < max; i++) {
        char rid[64], salt[64];
        snprintf(rid, sizeof(rid), "%s-%ld", prefix, i);
        snprintf(salt, sizeof(salt), "salt-%d-%ld", (int)getpid(), i);
        lmc_error err;
        if (raw_lookup(c, model, ws, rid, tok, n, 1, new_salts ? salt : NULL, &err) != LMC_OK) {
            snprintf(why, why_len, "%s", err.msg);
            if (strstr(err.msg, flag) == NULL)
                i = -1 - i;
            break;
        }
        if (new_salts)
            client_end(c, rid);
    }
    free(tok);
    return i;
}

static int attack_sessions(long allowed)
{
    const char *A = "sessions";
    lmc_client *c = client("attack-sess", 1, 0, 16);
    char why[600] = "";
    long got = flood(c, "attack-sess", 1, "sess", 1, allowed + 100, "--max-sessions", false, why,
                     sizeof(why));
    if (got != allowed)
        fail("FAIL: attack %s: the flood was not refused at the limit: %s", A, why);
    for (long i = 0; i < allowed / 2; i++) {
        char rid[64];
        snprintf(rid, sizeof(rid), "sess-%ld", i);
        client_end(c, rid);
    }
    long again =
        flood(c, "attack-sess", 1, "sess2", 1, allowed, "--max-sessions", false, why, sizeof(why));
    /* (Sessions of the first flood may expire meanwhile and make more room.) */
    if (again < allowed / 2)
        fail("FAIL: attack %s: ending sessions did not make room again: %s", A, why);
    lmc_client_destroy(c);
    printf("attack sessions: ok (refused past %ld: %s; the rest expire by --session-ttl-s)\n",
           allowed, why);
    return 0;
}

static int attack_keys(void)
{
    const char *A = "keys";
    lmc_client *c = client("attack-keys", 8, 0, 16);
    char why[600] = "";
    long got = flood(c, "attack-keys", 8, "keys", 64, 100000, "--max-session-keys", false, why,
                     sizeof(why));
    if (got < 0)
        fail("FAIL: attack %s: refused, but not by --max-session-keys: %s", A, why);
    for (long i = 0; i < got; i++) {
        char rid[64];
        snprintf(rid, sizeof(rid), "keys-%ld", i);
        client_end(c, rid);
    }
    lmc_client_destroy(c);
    printf("attack keys: ok (%ld lookups of 512 keys, then: %s)\n", got, why);
    return 0;
}

static int attack_salts(void)
{
    const char *A = "salts";
    lmc_client *c = client("attack-salts", 1, 0, 16);
    char why[600] = "";
    long got = flood(c, "attack-salts", 1, "salt", 1, 1000000, "--max-cache-salts", true, why,
                     sizeof(why));
    if (got < 0 || got >= 1000000)
        fail("FAIL: attack %s: new salts were not bounded: %s", A, why);
    lmc_client_destroy(c);
    printf("attack salts: ok (%ld new salts, then: %s)\n", got, why);
    return 0;
}

static int attack_unfinished(long mib, int pid)
{
    const char *A = "unfinished";
    long before = rss_kb(pid), peak = before;
    int fds[2];
    static uint8_t frame[9 + (1 << 20)];
    frame[0] = 0x03; /* MORE | LONG */
    frame[6] = 0x10; /* 1 MiB = 0x100000, big-endian */
    for (int k = 0; k < 2; k++) {
        fds[k] = tcp_connect();
        if (fds[k] < 0 || !zmtp_hello(fds[k]))
            fail("FAIL: attack %s: %s", A, "cannot connect");
    }
    for (long i = 0; i < mib; i++) {
        for (int k = 0; k < 2; k++) {
            /* The server may refuse the message and close: stop writing then. */
            if (fds[k] >= 0 && write(fds[k], frame, sizeof(frame)) != (ssize_t)sizeof(frame)) {
                close(fds[k]);
                fds[k] = -1;
            }
        }
        long now = rss_kb(pid);
        if (now > peak)
            peak = now;
    }
    /* A normal client is answered meanwhile. */
    lmc_client *c = client("attack-unf", 1, 0, 16);
    lmc_error err;
    bool pinged = lmc_client_ping(c, &err) == LMC_OK;
    lmc_client_destroy(c);
    for (int k = 0; k < 2; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    char detail[128];
    snprintf(detail, sizeof(detail), "%ld -> %ld kB", before, peak);
    if (peak - before > 64 * 1024 && rss_checked())
        fail("FAIL: attack %s: the server buffered the unfinished messages: RSS %s", A, detail);
    if (!pinged)
        fail("FAIL: attack %s: %s", A, "a normal client was not answered");
    printf("attack unfinished: ok (2 x %ld MiB never finished; RSS %s)\n", mib, detail);
    return 0;
}

static int attack_flood(int pid)
{
    const char *A = "flood";
    long before = rss_kb(pid), peak = before;
    int fd = tcp_connect();
    if (fd < 0 || !zmtp_hello(fd))
        fail("FAIL: attack %s: %s", A, "cannot connect");
    /* Messages of one empty frame: each one a request the server must answer. */
    static uint8_t burst[1 << 16];
    for (long i = 0; i < 2 * 1000 * 1000 / (long)(sizeof(burst) / 2); i++) {
        if (write(fd, burst, sizeof(burst)) != (ssize_t)sizeof(burst))
            break; /* closed */
        long now = rss_kb(pid);
        if (now > peak)
            peak = now;
    }
    lmc_client *c = client("attack-flood", 1, 0, 16);
    lmc_error err;
    bool pinged = lmc_client_ping(c, &err) == LMC_OK;
    lmc_client_destroy(c);
    close(fd);
    char detail[128];
    snprintf(detail, sizeof(detail), "%ld -> %ld kB", before, peak);
    if (peak - before > 64 * 1024 && rss_checked())
        fail("FAIL: attack %s: the server queued the flood: RSS %s", A, detail);
    if (!pinged)
        fail("FAIL: attack %s: %s", A, "a normal client was not answered");
    printf("attack flood: ok (2 M pipelined requests; RSS %s)\n", detail);
    return 0;
}

static int attack_conns(long max)
{
    const char *A = "conns";
    long n = max + 32, closed = 0;
    int *fds = malloc((size_t)n * sizeof(*fds));
    for (long i = 0; i < n; i++) {
        fds[i] = tcp_connect();
        if (fds[i] >= 0)
            zmtp_hello(fds[i]);
    }
    for (long i = 0; i < n; i++)
        if (fds[i] < 0 || closed_within(fds[i], i < max ? 1 : 2000))
            closed++;
    for (long i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    lmc_sleep_ns(200 * 1000 * 1000); /* the server sees the closes */
    lmc_client *c = client("attack-conns", 1, 0, 16);
    lmc_error err;
    bool pinged = lmc_client_ping(c, &err) == LMC_OK;
    lmc_client_destroy(c);
    char detail[64];
    snprintf(detail, sizeof(detail), "%ld of %ld", closed, n);
    if (closed < 32)
        fail("FAIL: attack %s: connections past the limit were kept (%s closed)", A, detail);
    if (!pinged)
        fail("FAIL: attack %s: %s", A, "a client after the flood was not answered");
    printf("attack conns: ok (%s connections closed at once)\n", detail);
    return 0;
}

static int attack_slowloris(long timeout_s)
{
    const char *A = "slowloris";
    int fd = tcp_connect();
    if (fd < 0 || !zmtp_hello(fd))
        fail("FAIL: attack %s: %s", A, "cannot connect");
    uint8_t start[] = {0x01, 3, 'u', 'i', 'd'}; /* a first frame with MORE: begun, never ended */
    if (write(fd, start, sizeof(start)) != (ssize_t)sizeof(start))
        fail("FAIL: attack %s: %s", A, "cannot write");
    bool closed = closed_within(fd, (int)(timeout_s * 1000 + 2500));
    close(fd);
    if (!closed)
        fail("FAIL: attack %s: %s", A, "a request begun and never finished kept its connection");
    printf("attack slowloris: ok (closed after --message-timeout-s %ld)\n", timeout_s);
    return 0;
}

static int attack_log_forge(void)
{
    lmc_client *c = client("attack-log", 1, 0, 16);
    msgpack_sbuffer p[5];
    msgpack_packer pk;
    for (int i = 0; i < 5; i++) {
        msgpack_sbuffer_init(&p[i]);
    }
    msgpack_packer_init(&pk, &p[0], msgpack_sbuffer_write);
    msgpack_pack_int64(&pk, 77);
    msgpack_packer_init(&pk, &p[1], msgpack_sbuffer_write);
    lmc_kv_region_desc d = {.shm_name = "nope\nFORGED-LINE WARNING [server] all is well",
                            .num_blocks = 1,
                            .tokens_per_block = TPB,
                            .bytes_per_token = 64,
                            .dtype = LMC_DTYPE_BFLOAT16};
    lmc_kv_region_encode(&pk, &d);
    msgpack_packer_init(&pk, &p[2], msgpack_sbuffer_write);
    msgpack_pack_str_with_body(&pk, "m\nFORGED-LINE", 13);
    msgpack_packer_init(&pk, &p[3], msgpack_sbuffer_write);
    msgpack_pack_int(&pk, 1);
    msgpack_packer_init(&pk, &p[4], msgpack_sbuffer_write);
    msgpack_pack_int(&pk, 0);
    lmc_error err;
    lmc_status st = raw_call(c, LMC_OP_REGISTER_KV_CACHE, p, 5, NULL, NULL, &err);
    for (int i = 0; i < 5; i++)
        msgpack_sbuffer_destroy(&p[i]);
    if (st != LMC_ERR_INVALID)
        fail("FAIL: attack %s: %s", "log-forge", "the register was not refused");
    printf("attack log-forge: register refused: %s\n", err.msg);
    /* A lookup of a model nobody registered: the error (logged) names it. */
    uint32_t *tok = make_tokens((size_t)g_chunk, 5);
    st = raw_lookup(c, "attack-log\nFORGED-LINE WARNING [server] all is well", 1, "log", tok,
                    (size_t)g_chunk, 1, NULL, &err);
    free(tok);
    lmc_client_destroy(c);
    if (st != LMC_ERR_INVALID)
        fail("FAIL: attack %s: %s", "log-forge", "the lookup was not refused");
    printf("attack log-forge: ok (lookup refused: %s)\n", err.msg);
    return 0;
}

typedef struct other_store {
    lmc_client *c;
    uint32_t *tok;
    size_t n;
    int64_t *ids;
    double ms;
    bool ok;
} other_store;

/* Another client's store, sent while free_lookup_locks is being answered. */
static void *store_meanwhile(void *arg)
{
    other_store *o = arg;
    lmc_sleep_ns(50 * 1000 * 1000);
    lmc_error err;
    uint64_t t0 = lmc_mono_ns();
    bool ok = false;
    o->ok = lmc_client_store(o->c, "sl-other", o->tok, o->n, 0, o->n, NULL, o->ids, o->n / TPB, &ok,
                             &err) == LMC_OK;
    o->ms = (double)(lmc_mono_ns() - t0) / 1e6;
    return NULL;
}

static int attack_slow_l2(void)
{
    const char *A = "slow-l2";
    lmc_client *a = client("attack-slow", 1, 0, 256), *b = client("attack-slow", 1, 0, 256);
    size_t cs = (size_t)lmc_client_chunk_size(a), n = 4 * cs;
    uint32_t *tok = make_tokens(n, 9);
    int64_t *ids = blocks(n / TPB);
    lmc_error err;
    bool ok;
    /* Chunks 0 and 1 in L1; 2 and 3 go to the slow L2. */
    if (lmc_client_store(a, "sl-store", tok, n, 0, 2 * cs, NULL, ids, 2 * cs / TPB, &ok, &err) !=
        LMC_OK)
        fail("FAIL: attack %s: store: %s", A, err.msg);
    lmc_sleep_ns(4000ull * 1000 * 1000); /* their slow L2 copies end */
    if (lmc_client_lookup_submit(a, "sl-req", tok, n, n, NULL, &err) != LMC_OK)
        fail("FAIL: attack %s: lookup: %s", A, err.msg);
    other_store o = {.c = b, .tok = make_tokens(n, 10), .n = n, .ids = ids};
    pthread_t th;
    pthread_create(&th, NULL, store_meanwhile, &o);
    uint64_t t0 = lmc_mono_ns();
    if (lmc_client_free_lookup_locks(a, "sl-req", tok, n, n, NULL, &err) != LMC_OK)
        fail("FAIL: attack %s: free_lookup_locks: %s", A, err.msg);
    double free_ms = (double)(lmc_mono_ns() - t0) / 1e6;
    pthread_join(th, NULL);
    char detail[128];
    snprintf(detail, sizeof(detail), "free_lookup_locks %.0f ms, another client's store %.0f ms",
             free_ms, o.ms);
    if (!o.ok)
        fail("FAIL: attack %s: the other client's store failed (%s)", A, detail);
    if (free_ms > 500 || o.ms > 500)
        fail("FAIL: attack %s: a slow L2 held up the worker: %s", A, detail);
    lmc_client_destroy(a);
    lmc_client_destroy(b);
    free(tok);
    free(o.tok);
    free(ids);
    printf("attack slow-l2: ok (%s)\n", detail);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Load loops for the soak test                                            */
/* ---------------------------------------------------------------------- */

/* The bytes of chunk c of rank r of a token sequence: a pattern from its tokens and rank. */
static uint64_t chunk_seed(const uint32_t *tok, size_t cs, size_t c, int r)
{
    uint64_t s = LMC_KV_PATTERN_SEED0 + (uint64_t)r * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i <= c; i++)
        s = lmc_kv_chunk_seed(s, tok + i * cs, cs);
    return s;
}

static int soak_ws2(long seconds)
{
    const char *A = "soak-ws2";
    lmc_client *c[2] = {client("soak-ws2", 2, 0, 1024), client("soak-ws2", 2, 1, 1024)};
    size_t cs = (size_t)lmc_client_chunk_size(c[0]), bpc = cs / TPB, max_chunks = 8;
    int64_t *ids = blocks(max_chunks * bpc);
    size_t block_bytes = (size_t)lmc_client_block_bytes(c[0]);
    uint64_t end = lmc_mono_ms() + (uint64_t)seconds * 1000;
    unsigned seed = (unsigned)getpid();
    long requests = 0, hits = 0, corrupt = 0, errors = 0;
    while (lmc_mono_ms() < end) {
        seed = seed * 1103515245u + 12345u;
        /* 8 prefixes x up to 8 chunks: requests share and extend each other. */
        size_t n = 2 + (seed >> 8) % (max_chunks - 1), nt = n * cs;
        uint32_t *tok = make_tokens(nt, (seed >> 16) % 8);
        for (size_t i = (n - 1) * cs; i < nt; i++)
            tok[i] += (uint32_t)(seed >> 4) % 3; /* the last chunk differs now and then */
        char rid[64];
        snprintf(rid, sizeof(rid), "ws2-%d-%ld", (int)getpid(), requests++);
        lmc_error err;
        int64_t readers = 1 + (seed >> 20) % 2;
        long h = raw_lookup(c[0], "soak-ws2", 2, rid, tok, nt, readers, NULL, &err) == LMC_OK
                     ? wait_hits(c[0], rid)
                     : -1;
        if (h < 0 || (size_t)h > n) {
            errors++;
            free(tok);
            continue;
        }
        hits += h;
        for (int r = 0; r < 2; r++) {
            bool ok = false;
            memset(lmc_client_block(c[r], 0), 0, (size_t)h * bpc * block_bytes);
            if (h > 0 && (lmc_client_retrieve(c[r], rid, tok, nt, 0, (size_t)h * cs, NULL, ids,
                                              (size_t)h * bpc, &ok, &err) != LMC_OK ||
                          !ok)) {
                errors++;
                continue;
            }
            for (size_t k = 0; k < (size_t)h; k++) {
                lmc_kv_pattern p;
                lmc_kv_pattern_init(&p, chunk_seed(tok, cs, k, r));
                if (!lmc_kv_pattern_check(&p, lmc_client_block(c[r], (int64_t)(k * bpc)),
                                          bpc * block_bytes))
                    corrupt++;
            }
            for (size_t k = (size_t)h; k < n; k++) {
                lmc_kv_pattern p;
                lmc_kv_pattern_init(&p, chunk_seed(tok, cs, k, r));
                lmc_kv_pattern_fill(&p, lmc_client_block(c[r], (int64_t)(k * bpc)),
                                    bpc * block_bytes);
            }
            if ((size_t)h < n &&
                lmc_client_store(c[r], rid, tok, nt, (size_t)h * cs, nt, NULL,
                                 ids + (size_t)h * bpc, (n - (size_t)h) * bpc, &ok, &err) != LMC_OK)
                errors++;
        }
        if ((seed >> 24) % 4 == 0)
            lmc_client_free_lookup_locks(c[0], rid, tok, nt, nt, NULL, &err);
        else
            lmc_client_end_session(c[0], rid, &err);
        free(tok);
    }
    lmc_client_destroy(c[0]);
    lmc_client_destroy(c[1]);
    free(ids);
    printf("soak-ws2: %ld requests, %ld hit chunks, %ld corrupt, %ld errors\n", requests, hits,
           corrupt, errors);
    (void)A;
    return corrupt == 0 && errors == 0 ? 0 : 1;
}

static int soak_vanish(long seconds)
{
    uint64_t end = lmc_mono_ms() + (uint64_t)seconds * 1000;
    unsigned seed = (unsigned)getpid();
    long n = 0;
    /* A real lookup request, cut anywhere (or sent whole), then the connection is gone. */
    uint8_t msg[4096];
    size_t len = 0;
    {
        uint32_t tok[512];
        for (int i = 0; i < 512; i++)
            tok[i] = (uint32_t)i;
        lmc_ipc_key key = {.model_name = "soak-vanish",
                           .world_size = 1,
                           .worker_id = -1,
                           .token_ids = tok,
                           .n_tokens = 512,
                           .start = 0,
                           .end = 512,
                           .request_id = "vanish",
                           .cache_salt = "",
                           .num_kv_readers = 1};
        msgpack_sbuffer f[3];
        for (int i = 0; i < 3; i++)
            msgpack_sbuffer_init(&f[i]);
        lmc_request_encode_uid_op(&f[0], &f[1], 1, LMC_OP_LOOKUP);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &f[2], msgpack_sbuffer_write);
        lmc_ipc_key_encode(&pk, &key);
        const void *fr[3] = {f[0].data, f[1].data, f[2].data};
        size_t fl[3] = {f[0].size, f[1].size, f[2].size};
        if (lmc_zmtp_encoded_size(fl, 3) > sizeof(msg))
            return 2;
        len = lmc_zmtp_encode(msg, fr, fl, 3);
        for (int i = 0; i < 3; i++)
            msgpack_sbuffer_destroy(&f[i]);
    }
    while (lmc_mono_ms() < end) {
        int fd = tcp_connect();
        if (fd < 0) {
            lmc_sleep_ns(10 * 1000 * 1000);
            continue;
        }
        seed = seed * 1103515245u + 12345u;
        if (zmtp_hello(fd)) {
            size_t cut = (seed >> 8) % (len + 1);
            if (write(fd, msg, cut) < 0)
                (void)0;
        }
        close(fd);
        n++;
        lmc_sleep_ns((seed >> 16) % 5 * 1000 * 1000);
    }
    printf("soak-vanish: %ld connections vanished mid-message\n", n);
    return 0;
}

/*
 * Between two rounds of a soak loop: a misbehaving client among others, not
 * a flood (flat out, these two alone would make more trace events than the
 * recorder's queue holds while the other clients keep both cores busy).
 */
#define SOAK_PAUSE_NS (5 * 1000 * 1000)

/* The truncate attack for seconds, lenient about what other clients do to L1 meanwhile. */
static int soak_truncate(long seconds)
{
    conn c;
    region r;
    truncate_setup(&c, &r);
    uint64_t end = lmc_mono_ms() + (uint64_t)seconds * 1000;
    long rounds = 0, bad = 0;
    /* Distinct tokens each round (and process): no round reads another's chunks. */
    uint32_t seed = (uint32_t)getpid() * 1000u;
    while (lmc_mono_ms() < end) {
        bad += truncate_round(&c, &r, 7001, "attack-trunc", seed + 2u * (uint32_t)rounds, false);
        rounds++;
        lmc_sleep_ns(SOAK_PAUSE_NS);
    }
    truncate_teardown(&c, &r);
    printf("soak-truncate: %ld regions truncated and grown back, %ld failed\n", rounds, bad);
    return bad == 0 ? 0 : 1;
}

/* The unregister race for seconds. */
static int soak_unregister(long seconds)
{
    race x;
    race_setup(&x);
    uint64_t end = lmc_mono_ms() + (uint64_t)seconds * 1000;
    int rounds = 0;
    while (lmc_mono_ms() < end) {
        race_round(&x, rounds++);
        lmc_sleep_ns(SOAK_PAUSE_NS);
    }
    race_teardown(&x);
    printf("soak-unregister: %d rounds of requests racing unregister_kv_cache\n", rounds);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: attack ATTACK HOST PORT [ARG [ARG2]] (see the file's header)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a forked child's lines are not lost at _exit */
    atexit(remove_names);
    for (size_t i = 0; i < MAX_FRAMES; i++)
        msgpack_sbuffer_init(&g_payload[i]);
    const char *a = argv[1];
    g_host = argv[2];
    g_port = atoi(argv[3]);
    const char *arg_s = argc > 4 ? argv[4] : NULL;
    long arg = arg_s != NULL ? atol(arg_s) : 0;
    int arg2 = argc > 5 ? atoi(argv[5]) : 0;
    if (strcmp(a, "ping") == 0)
        return attack_ping();
    g_chunk = get_chunk_size();
    if (g_chunk % 16 != 0)
        fail("FAIL: the attacks need a chunk size that is a multiple of 16 (got %d)", g_chunk);
    /* Client memory (KV regions). */
    if (strcmp(a, "shm-steal") == 0)
        return attack_shm_steal(arg_s != NULL ? arg_s : "lmcache_l1_pool_none");
    if (strcmp(a, "truncate") == 0)
        return attack_truncate();
    if (strcmp(a, "unregister-race") == 0)
        return attack_unregister_race();
    if (strcmp(a, "world-size") == 0)
        return attack_world_size();
    if (strcmp(a, "slots") == 0)
        return attack_slots();
    /* Sessions, locks, limits, connections, logs. */
    if (strcmp(a, "lock-steal") == 0)
        return attack_lock_steal();
    if (strcmp(a, "ws2") == 0)
        return attack_ws2();
    if (strcmp(a, "big-lookup") == 0)
        return attack_big_lookup();
    if (strcmp(a, "sessions") == 0)
        return attack_sessions(arg);
    if (strcmp(a, "keys") == 0)
        return attack_keys();
    if (strcmp(a, "salts") == 0)
        return attack_salts();
    if (strcmp(a, "unfinished") == 0)
        return attack_unfinished(arg, arg2);
    if (strcmp(a, "flood") == 0)
        return attack_flood((int)arg);
    if (strcmp(a, "conns") == 0)
        return attack_conns(arg);
    if (strcmp(a, "slowloris") == 0)
        return attack_slowloris(arg);
    if (strcmp(a, "log-forge") == 0)
        return attack_log_forge();
    if (strcmp(a, "slow-l2") == 0)
        return attack_slow_l2();
    /* The soak test's load loops. */
    if (strcmp(a, "soak-ws2") == 0)
        return soak_ws2(arg);
    if (strcmp(a, "soak-vanish") == 0)
        return soak_vanish(arg);
    if (strcmp(a, "soak-truncate") == 0)
        return soak_truncate(arg);
    if (strcmp(a, "soak-unregister") == 0)
        return soak_unregister(arg);
    fprintf(stderr, "attack: unknown attack '%s'\n", a);
    return 2;
}
