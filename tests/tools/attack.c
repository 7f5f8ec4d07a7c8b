/*
 * attack.c -- hostile clients of `lmcache server` for tests/e2e/test_attack.sh.
 *
 * usage: attack ATTACK HOST PORT [ARG]
 *
 * Each attack plays one misbehaving client (docs/security.md lists what the
 * server must withstand) and exits 0 when the server resisted it -- the
 * attack got error replies, no other client's bytes moved, the server
 * still answers a ping -- and 1 with a "VULNERABLE:" or "FAIL:" line when
 * it did not. Attacks:
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
 * The attacks speak the wire protocol through their own DEALER socket (so
 * they can pipeline requests and send what lmc_client never would), with
 * the protocol's encoders. Regions are POSIX shm objects named
 * "/lmcache-client-attack-<pid>-<n>", removed before exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "client/workload.h"
#include "core/clock.h"
#include "server/protocol.h"

#define TIMEOUT_MS 10000
#define NOBODY 65534
#define MAX_FRAMES 8

static const char *g_host;
static int g_port;
static int g_chunk; /* the server's chunk size (get_chunk_size) */
static unsigned g_region_seq;

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
    snprintf(r->name, sizeof(r->name), "/lmcache-client-attack-%ld-%u", (long)getpid(),
             g_region_seq++);
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

/* store or retrieve of tokens [start, end) through blocks first_block... (consecutive). */
static int64_t send_transfer(conn *c, lmc_op op, int64_t instance, const char *model, int ws,
                             int worker, const uint32_t *tokens, size_t n, size_t start, size_t end,
                             int64_t tpb, int64_t first_block)
{
    pack_key(0, model, ws, worker, tokens, n, start, end, "attack");
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
static const char *transfer(conn *c, lmc_op op, int64_t instance, const char *model, int ws,
                            int worker, const uint32_t *tokens, size_t n, size_t start, size_t end,
                            int64_t tpb, int64_t first_block)
{
    static char msg[512];
    int64_t id =
        send_transfer(c, op, instance, model, ws, worker, tokens, n, start, end, tpb, first_block);
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
    snprintf(link, sizeof(link), "/lmcache-client-attack-%ld-link", (long)getpid());
    snprintf(fifo, sizeof(fifo), "/lmcache-client-attack-%ld-fifo", (long)getpid());
    snprintf(noprefix, sizeof(noprefix), "/attack-%ld-noprefix", (long)getpid());
    snprintf(missing, sizeof(missing), "/lmcache-client-attack-%ld-missing", (long)getpid());
    snprintf(sem_name, sizeof(sem_name), "/attack-%ld", (long)getpid());
    snprintf(sem_path, sizeof(sem_path), "sem.attack-%ld", (long)getpid());
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

static int attack_truncate(void)
{
    conn c;
    conn_open(&c);
    region r;
    int64_t tpb = 16, bpc = g_chunk / tpb;
    region_create(&r, 4 * bpc, tpb, 256);
    const char *e = do_register(&c, r.name, &r, 7001, "attack-trunc", 1, 0);
    if (e != NULL)
        fail("FAIL: register: %s", e);
    size_t n = 2 * (size_t)g_chunk;
    uint32_t *t1 = make_tokens(n, 1), *t2 = make_tokens(n, 2);
    fill(r.base, r.bytes, 3);
    e = transfer(&c, LMC_OP_STORE, 7001, "attack-trunc", 1, 0, t1, n, 0, n, tpb, 0);
    if (e != NULL)
        fail("FAIL: the first store: %s", e);
    int64_t hits = lookup(&c, "attack-trunc", 1, t1, n, "attack-trunc-1");
    if (ftruncate(r.fd, 0) != 0)
        fail("FAIL: ftruncate: %s", strerror(errno));
    int bad = 0;
    e = transfer(&c, LMC_OP_STORE, 7001, "attack-trunc", 1, 0, t2, n, 0, n, tpb, 0);
    printf("store from a truncated region: %s\n", e ? e : "ok (!)");
    if (e == NULL)
        bad = 1;
    e = transfer(&c, LMC_OP_RETRIEVE, 7001, "attack-trunc", 1, 0, t1, n, 0,
                 (size_t)hits * (size_t)g_chunk, tpb, 2 * bpc);
    printf("retrieve into a truncated region: %s\n", e ? e : "ok (!)");
    if (e == NULL && hits > 0)
        bad = 1;
    if (e != NULL)
        free_lookup_locks(&c, "attack-trunc", 1, t1, n, "attack-trunc-1");
    end_session(&c, "attack-trunc-1");
    if (!ping(&c))
        fail("VULNERABLE: the server died (SIGBUS?) after a region was truncated");
    /* Grown again, the region works: the failed copies hurt nobody. */
    if (ftruncate(r.fd, (off_t)r.bytes) != 0)
        fail("FAIL: ftruncate: %s", strerror(errno));
    fill(r.base, r.bytes, 4);
    e = transfer(&c, LMC_OP_STORE, 7001, "attack-trunc", 1, 0, t2, n, 0, n, tpb, 0);
    if (e != NULL) {
        printf("FAIL: a store after the region grew back: %s\n", e);
        bad = 1;
    }
    hits = lookup(&c, "attack-trunc", 1, t2, n, "attack-trunc-2");
    memset(r.base, 0, r.bytes);
    e = transfer(&c, LMC_OP_RETRIEVE, 7001, "attack-trunc", 1, 0, t2, n, 0,
                 (size_t)hits * (size_t)g_chunk, tpb, 0);
    end_session(&c, "attack-trunc-2");
    if (hits != 2 || e != NULL || !check(r.base, n * (size_t)r.bpt, 4)) {
        printf("FAIL: the chunks stored after the region grew back do not read back (%lld hits, "
               "%s)\n",
               (long long)hits, e ? e : "ok");
        bad = 1;
    }
    pack_instance(7001);
    reply rp;
    if (call(&c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1, &rp))
        reply_free(&rp);
    free(t1);
    free(t2);
    region_destroy(&r);
    conn_close(&c);
    return bad;
}

static int attack_unregister_race(void)
{
    conn c;
    conn_open(&c);
    int64_t tpb = 16, bpc = g_chunk / tpb, chunks = 8;
    region big, small;
    region_create(&big, chunks * bpc, tpb, 4096);
    region_create(&small, bpc, tpb, 4096);
    fill(big.base, big.bytes, 5);
    const char *e = do_register(&c, big.name, &big, 7100, "attack-race", 1, 0);
    if (e != NULL)
        fail("FAIL: register: %s", e);
    size_t n = (size_t)(chunks * g_chunk);
    uint32_t *prefix = make_tokens(n, 100);
    e = transfer(&c, LMC_OP_STORE, 7100, "attack-race", 1, 0, prefix, n, 0, n, tpb, 0);
    if (e != NULL)
        fail("FAIL: the first store: %s", e);
    size_t sent = 0;
    for (int i = 0; i < 60; i++) {
        uint32_t *t = make_tokens(n, 200 + (uint32_t)i);
        char rid[32];
        snprintf(rid, sizeof(rid), "attack-race-%d", i);
        int64_t hits = lookup(&c, "attack-race", 1, prefix, n, rid);
        /* A store and a retrieve in flight on workers, the region pulled away under them. */
        send_transfer(&c, LMC_OP_STORE, 7100, "attack-race", 1, 0, t, n, 0, n, tpb, 0);
        int64_t retrieve = send_transfer(&c, LMC_OP_RETRIEVE, 7100, "attack-race", 1, 0, prefix, n,
                                         0, (size_t)hits * (size_t)g_chunk, tpb, 0);
        bool retrieved = false;
        pack_instance(7100);
        send_req(&c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1);
        sent += 3;
        if (i % 2 == 1) {
            /* Replace the instance by a smaller object: a new mapping, maybe elsewhere. */
            pack_register(small.name, &small, 7100, "attack-race", 1, 0);
            send_req(&c, LMC_OP_REGISTER_KV_CACHE, g_payload, 5);
            send_transfer(&c, LMC_OP_STORE, 7100, "attack-race", 1, 0, t, n, 0, n, tpb, 0);
            sent += 2;
        }
        pack_register(big.name, &big, 7100, "attack-race", 1, 0);
        send_req(&c, LMC_OP_REGISTER_KV_CACHE, g_payload, 5);
        sent++;
        for (; sent > 0; sent--) {
            reply r;
            if (!recv_reply(&c, TIMEOUT_MS, &r))
                fail("VULNERABLE: the server stopped answering during the unregister race");
            if (r.uid == retrieve)
                retrieved = !r.is_error;
            reply_free(&r);
        }
        if (!retrieved)
            free_lookup_locks(&c, "attack-race", 1, prefix, n, rid);
        end_session(&c, rid);
        free(t);
    }
    if (!ping(&c))
        fail("VULNERABLE: the server died during the unregister race");
    pack_instance(7100);
    reply r;
    if (call(&c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1, &r))
        reply_free(&r);
    free(prefix);
    region_destroy(&big);
    region_destroy(&small);
    conn_close(&c);
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
    if ((e = transfer(&c, LMC_OP_STORE, 7201, model, 1, 0, x, one, 0, one, tpb, 0)) != NULL)
        fail("FAIL: store x: %s", e);
    size_t nn = (size_t)neighbours * one;
    uint32_t *nt = make_tokens(nn, 301);
    for (int64_t k = 0; k < neighbours; k++)
        fill(block_at(&a, k * bpc), (size_t)(bpc * tpb * a.bpt), (uint8_t)(20 + k));
    if ((e = transfer(&c, LMC_OP_STORE, 7201, model, 1, 0, nt, nn, 0, nn, tpb, 0)) != NULL)
        fail("FAIL: store the neighbours: %s", e);
    int64_t hits = lookup(&c, model, 1, nt, nn, "attack-ws-n");
    if (hits != neighbours)
        fail("FAIL: %lld of %lld neighbour chunks found", (long long)hits, (long long)neighbours);
    clear_l1(&c);

    int bad = 0;
    /* Write: 2 MiB of b into a 16 KiB object (in x's hole, before the neighbours). */
    memset(b.base, 0xee, b.bytes);
    uint32_t *y = make_tokens(one, 302);
    e = transfer(&c, LMC_OP_STORE, 7202, model, 1, 0, y, one, 0, one, tpb, 0);
    printf("store through a world-size-2 region with a world-size-1 key: %s\n", e ? e : "ok (!)");
    if (e == NULL)
        bad = 1;
    /* Read: a neighbour's 16 KiB object read out as a 2 MiB chunk. */
    memset(b.base, 0, b.bytes);
    int64_t h1 = lookup(&c, model, 1, nt, one, "attack-ws-r");
    e = transfer(&c, LMC_OP_RETRIEVE, 7202, model, 1, 0, nt, one, 0, (size_t)h1 * one, tpb, 0);
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
    e = transfer(&c, LMC_OP_STORE, 7202, model, 2, 1, y, one, 0, one, tpb, 0);
    printf("store with worker id 1 through worker 0's region: %s\n", e ? e : "ok (!)");
    if (e == NULL)
        bad = 1;

    /* The neighbours read back intact. */
    memset(a.base, 0, a.bytes);
    e = transfer(&c, LMC_OP_RETRIEVE, 7201, model, 1, 0, nt, nn, 0, nn, tpb, 0);
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
    for (int64_t id = 7201; id <= 7202; id++) {
        pack_instance(id);
        reply r;
        if (call(&c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1, &r))
            reply_free(&r);
    }
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
    e = transfer(&c, LMC_OP_STORE, 7400, "attack-squat", 1, 0, t, (size_t)g_chunk, 0,
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
    for (int64_t id = 7399; id <= 7401; id++) {
        pack_instance(id);
        if (call(&c, LMC_OP_UNREGISTER_KV_CACHE, g_payload, 1, &rp))
            reply_free(&rp);
    }
    conn_close(&c);
    region_destroy(&r);
    region_destroy(&wide);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: attack ATTACK HOST PORT [ARG] (see the file's header)\n");
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
    if (strcmp(a, "ping") == 0)
        return attack_ping();
    g_chunk = get_chunk_size();
    if (g_chunk % 16 != 0)
        fail("FAIL: the attacks need a chunk size that is a multiple of 16 (got %d)", g_chunk);
    if (strcmp(a, "shm-steal") == 0)
        return attack_shm_steal(argc > 4 ? argv[4] : "lmcache_l1_pool_none");
    if (strcmp(a, "truncate") == 0)
        return attack_truncate();
    if (strcmp(a, "unregister-race") == 0)
        return attack_unregister_race();
    if (strcmp(a, "world-size") == 0)
        return attack_world_size();
    if (strcmp(a, "slots") == 0)
        return attack_slots();
    fprintf(stderr, "attack: unknown attack '%s'\n", a);
    return 2;
}
