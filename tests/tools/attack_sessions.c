/*
 * attack_sessions.c -- hostile clients for the end-to-end attack test:
 * sessions, locks, limits, connections and files (issue 12 items 5, 6, 8,
 * 9, 10). One subcommand per attack; each prints one line and exits 0 when
 * the server held, 1 when it did not (2: usage or setup).
 *
 * usage: attack_sessions HOST PORT ATTACK [ARG]
 *   steal        a retrieve, free_lookup_locks, a reused request id and
 *                retrieves without a session never release another
 *                request's lock (a non-forced clear would then drop its
 *                chunks)
 *   ws2          world size 2 following the old documented lifecycle
 *                (num_kv_readers = world size) leaves no lock after
 *                end_session
 *   big-lookup   a 4 M-token lookup is refused with its flag named, and a
 *                ping from another connection is answered meanwhile; a
 *                lookup at the largest size allowed (world size 255) works
 *   sessions     open sessions until --max-sessions refuses one (ARG: how
 *                many the server allows), end half, open again
 *   keys         lookups until --max-session-keys refuses one
 *   salts        new cache_salt values until --max-cache-salts refuses one
 *   unfinished   two connections send frames that never end a message
 *                (ARG: MiB each); the server's RSS (ARG2: its pid) grows by
 *                at most 64 MiB and a normal client is answered
 *   flood        one connection pipelines 2 M tiny requests without reading
 *                a reply; the server's RSS (ARG: its pid) grows by at most
 *                64 MiB and a normal client is answered
 *   conns        more connections than --max-connections (ARG): the extra
 *                ones are closed at once; a normal client works after
 *   slowloris    a request begun and never finished is closed after
 *                --message-timeout-s (ARG)
 *   log-forge    client strings with newlines reach the log (the caller
 *                greps it for the forged line)
 *   slow-l2      (a server with a slow L2 and one worker) free_lookup_locks
 *                answers at once and another client's store is not held up
 *
 * and two load loops for the soak test (ARG: seconds):
 *   soak-ws2     two workers of world size 2 (one process, one client each)
 *                run requests with shared prefixes: lookup (num_kv_readers 1
 *                or 2), retrieve of every hit by each rank (every byte
 *                checked), store of the rest, then end_session or
 *                free_lookup_locks; exit 1 on a corrupt chunk or a failed
 *                call
 *   soak-vanish  connections that send part of a request (or a whole one)
 *                and vanish before the answer
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msgpack.h>

#include "client/workload.h"
#include "core/clock.h"
#include "lmcache/client.h"
#include "server/protocol.h"
#include "server/zmtp.h"

static const char *g_host;
static int g_port;
static int64_t g_uid = (int64_t)1 << 40;

#define TPB 16

static int fail(const char *attack, const char *fmt, const char *detail)
{
    printf("attack %s: FAIL: ", attack);
    printf(fmt, detail);
    printf("\n");
    return 1;
}

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

static uint32_t *tokens(size_t n, uint32_t seed)
{
    uint32_t *t = malloc(n * sizeof(*t));
    for (size_t i = 0; i < n; i++)
        t[i] = seed * 7919u + (uint32_t)i;
    return t;
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

static void end_session(lmc_client *c, const char *rid)
{
    lmc_error err;
    lmc_client_end_session(c, rid, &err);
}

/* ---------------------------------------------------------------------- */

static int attack_steal(void)
{
    const char *A = "steal";
    lmc_client *c = client("attack-steal", 1, 0, 256);
    size_t cs = (size_t)lmc_client_chunk_size(c), n = 4 * cs;
    uint32_t *tok = tokens(n, 1);
    int64_t *ids = blocks(n / TPB);
    lmc_error err;
    bool ok;
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, 42);
    lmc_kv_pattern_fill(&pat, lmc_client_block(c, 0), n * 64);
    if (lmc_client_store(c, "st-store", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) != LMC_OK)
        return fail(A, "store: %s", err.msg);
    /* The bystander: a request that looked up the prefix and will read it later. */
    if (raw_lookup(c, "attack-steal", 1, "st-bystander", tok, n, 1, NULL, &err) != LMC_OK ||
        wait_hits(c, "st-bystander") != 4)
        return fail(A, "bystander lookup: %s", err.msg);
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
        return fail(A, "%s", "a second retrieve of one lookup read again");
    lmc_client_retrieve(c, "st-none", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err);
    if (ok)
        return fail(A, "%s", "a retrieve without a session read the bystander's chunks");
    lmc_client_end_session(c, "st-a", &err);
    lmc_client_end_session(c, "st-a", &err);
    /* A non-forced clear drops every chunk nobody holds a lock on. */
    if (lmc_client_clear(c, false, &err) != LMC_OK)
        return fail(A, "clear: %s", err.msg);
    memset(lmc_client_block(c, 0), 0, n * 64);
    if (lmc_client_retrieve(c, "st-bystander", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) !=
            LMC_OK ||
        !ok)
        return fail(A, "%s", "the bystander's chunks lost their lock (clear dropped them)");
    lmc_kv_pattern_init(&pat, 42);
    if (!lmc_kv_pattern_check(&pat, lmc_client_block(c, 0), n * 64))
        return fail(A, "%s", "the bystander read wrong bytes");
    end_session(c, "st-bystander");
    lmc_client_clear(c, true, &err);
    free(tok);
    free(ids);
    lmc_client_destroy(c);
    printf("attack steal: ok (no request's lock was released by another)\n");
    return 0;
}

static int attack_ws2(void)
{
    const char *A = "ws2";
    lmc_client *c[2] = {client("attack-ws2", 2, 0, 256), client("attack-ws2", 2, 1, 256)};
    size_t cs = (size_t)lmc_client_chunk_size(c[0]), n = 4 * cs;
    uint32_t *tok = tokens(n, 2);
    int64_t *ids = blocks(n / TPB);
    lmc_error err;
    bool ok;
    for (int r = 0; r < 2; r++)
        if (lmc_client_store(c[r], "w2-store", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) !=
            LMC_OK)
            return fail(A, "store: %s", err.msg);
    /* docs/protocol.md's lifecycle as it read: num_kv_readers = world size. */
    if (raw_lookup(c[0], "attack-ws2", 2, "w2-req", tok, n, 2, NULL, &err) != LMC_OK ||
        wait_hits(c[0], "w2-req") != 4)
        return fail(A, "lookup: %s", err.msg);
    for (int r = 0; r < 2; r++)
        if (lmc_client_retrieve(c[r], "w2-req", tok, n, 0, n, NULL, ids, n / TPB, &ok, &err) !=
                LMC_OK ||
            !ok)
            return fail(A, "retrieve: %s", err.msg);
    lmc_client_end_session(c[0], "w2-req", &err);
    lmc_client_clear(c[0], false, &err);
    if (raw_lookup(c[0], "attack-ws2", 2, "w2-after", tok, n, 1, NULL, &err) != LMC_OK)
        return fail(A, "lookup: %s", err.msg);
    long h = wait_hits(c[0], "w2-after");
    end_session(c[0], "w2-after");
    if (h != 0)
        return fail(A, "%s", "chunks stayed read-locked after end_session (clear kept them)");
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
        return fail(A, "a 4 M-token lookup was not refused: %s", err.msg);
    /* The largest allowed: 1 M tokens x world size 255, about 1 M keys. */
    n = 1 << 20;
    st = raw_lookup(c, "attack-big", 255, "big-ok", tok, n, 1, NULL, &err);
    long h = st == LMC_OK ? wait_hits(c, "big-ok") : -1;
    end_session(c, "big-ok");
    p.stop = true;
    pthread_join(th, NULL);
    if (st != LMC_OK || h != 0)
        return fail(A, "the largest allowed lookup failed: %s", err.msg);
    char detail[128];
    snprintf(detail, sizeof(detail), "%.0f ms", p.max_ms);
    if (p.max_ms > 500)
        return fail(A, "a ping waited %s behind the big lookups", detail);
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
    uint32_t *tok = tokens(n, 3);
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
            end_session(c, rid);
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
        return fail(A, "the flood was not refused at the limit: %s", why);
    for (long i = 0; i < allowed / 2; i++) {
        char rid[64];
        snprintf(rid, sizeof(rid), "sess-%ld", i);
        end_session(c, rid);
    }
    long again =
        flood(c, "attack-sess", 1, "sess2", 1, allowed, "--max-sessions", false, why, sizeof(why));
    /* (Sessions of the first flood may expire meanwhile and make more room.) */
    if (again < allowed / 2)
        return fail(A, "ending sessions did not make room again: %s", why);
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
        return fail(A, "refused, but not by --max-session-keys: %s", why);
    for (long i = 0; i < got; i++) {
        char rid[64];
        snprintf(rid, sizeof(rid), "keys-%ld", i);
        end_session(c, rid);
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
        return fail(A, "new salts were not bounded: %s", why);
    lmc_client_destroy(c);
    printf("attack salts: ok (%ld new salts, then: %s)\n", got, why);
    return 0;
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
            return fail(A, "%s", "cannot connect");
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
        return fail(A, "the server buffered the unfinished messages: RSS %s", detail);
    if (!pinged)
        return fail(A, "%s", "a normal client was not answered");
    printf("attack unfinished: ok (2 x %ld MiB never finished; RSS %s)\n", mib, detail);
    return 0;
}

static int attack_flood(int pid)
{
    const char *A = "flood";
    long before = rss_kb(pid), peak = before;
    int fd = tcp_connect();
    if (fd < 0 || !zmtp_hello(fd))
        return fail(A, "%s", "cannot connect");
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
        return fail(A, "the server queued the flood: RSS %s", detail);
    if (!pinged)
        return fail(A, "%s", "a normal client was not answered");
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
        return fail(A, "connections past the limit were kept (%s closed)", detail);
    if (!pinged)
        return fail(A, "%s", "a client after the flood was not answered");
    printf("attack conns: ok (%s connections closed at once)\n", detail);
    return 0;
}

static int attack_slowloris(long timeout_s)
{
    const char *A = "slowloris";
    int fd = tcp_connect();
    if (fd < 0 || !zmtp_hello(fd))
        return fail(A, "%s", "cannot connect");
    uint8_t start[] = {0x01, 3, 'u', 'i', 'd'}; /* a first frame with MORE: begun, never ended */
    if (write(fd, start, sizeof(start)) != (ssize_t)sizeof(start))
        return fail(A, "%s", "cannot write");
    bool closed = closed_within(fd, (int)(timeout_s * 1000 + 2500));
    close(fd);
    if (!closed)
        return fail(A, "%s", "a request begun and never finished kept its connection");
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
        return fail("log-forge", "%s", "the register was not refused");
    /* A lookup of a model nobody registered: the error (logged) names it. */
    size_t cs = (size_t)lmc_client_chunk_size(c);
    uint32_t *tok = tokens(cs, 5);
    st = raw_lookup(c, "attack-log\nFORGED-LINE WARNING [server] all is well", 1, "log", tok, cs, 1,
                    NULL, &err);
    free(tok);
    lmc_client_destroy(c);
    if (st != LMC_ERR_INVALID)
        return fail("log-forge", "%s", "the lookup was not refused");
    printf("attack log-forge: ok (refused)\n");
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
    uint32_t *tok = tokens(n, 9);
    int64_t *ids = blocks(n / TPB);
    lmc_error err;
    bool ok;
    /* Chunks 0 and 1 in L1; 2 and 3 go to the slow L2. */
    if (lmc_client_store(a, "sl-store", tok, n, 0, 2 * cs, NULL, ids, 2 * cs / TPB, &ok, &err) !=
        LMC_OK)
        return fail(A, "store: %s", err.msg);
    lmc_sleep_ns(4000ull * 1000 * 1000); /* their slow L2 copies end */
    if (lmc_client_lookup_submit(a, "sl-req", tok, n, n, NULL, &err) != LMC_OK)
        return fail(A, "lookup: %s", err.msg);
    other_store o = {.c = b, .tok = tokens(n, 10), .n = n, .ids = ids};
    pthread_t th;
    pthread_create(&th, NULL, store_meanwhile, &o);
    uint64_t t0 = lmc_mono_ns();
    if (lmc_client_free_lookup_locks(a, "sl-req", tok, n, n, NULL, &err) != LMC_OK)
        return fail(A, "free_lookup_locks: %s", err.msg);
    double free_ms = (double)(lmc_mono_ns() - t0) / 1e6;
    pthread_join(th, NULL);
    char detail[128];
    snprintf(detail, sizeof(detail), "free_lookup_locks %.0f ms, another client's store %.0f ms",
             free_ms, o.ms);
    if (!o.ok)
        return fail(A, "the other client's store failed (%s)", detail);
    if (free_ms > 500 || o.ms > 500)
        return fail(A, "a slow L2 held up the worker: %s", detail);
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
        uint32_t *tok = tokens(nt, (seed >> 16) % 8);
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

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: attack_sessions HOST PORT ATTACK [ARG [ARG2]]\n");
        return 2;
    }
    g_host = argv[1];
    g_port = atoi(argv[2]);
    const char *a = argv[3];
    long arg = argc > 4 ? atol(argv[4]) : 0;
    int arg2 = argc > 5 ? atoi(argv[5]) : 0;
    if (strcmp(a, "steal") == 0)
        return attack_steal();
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
    if (strcmp(a, "soak-ws2") == 0)
        return soak_ws2(arg);
    if (strcmp(a, "soak-vanish") == 0)
        return soak_vanish(arg);
    fprintf(stderr, "attack_sessions: unknown attack '%s'\n", a);
    return 2;
}
