/*
 * bench_server.c -- `lmcache bench micro server`: an in-process `lmcache
 * server` driven by clients over loopback TCP.
 *
 * Metrics (DESIGN.md section 5 targets in brackets):
 *   lookup_rtt_p50_us, _p99_us  one lookup request and its reply, 8-chunk
 *                               prompt, all L1 hits, 1 worker [p50 <= 50 us];
 *                               the reply (nil) leaves before the server hashes
 *                               the tokens and submits the prefetch (ops.h)
 *   lookup_hits_rtt_p50_us      a lookup and the queries until its hit count:
 *                               what learning the hits costs, hashing included
 *   ping_rtt_p50_us             a ping's round trip: the transport alone
 *   lookup_to_ping_ratio        lookup p50 / ping p50, pairwise per trial
 *   store_gbps, retrieve_gbps   KV bytes copied per second of client-observed
 *                               store / retrieve call time, 16 chunks of 256
 *                               tokens x 2048 B (8 MiB per call), 1 worker
 *                               and the server's default copy threads
 *                               [>= 5 GB/s]
 *   memcpy_gbps                 one thread's memcpy of what a store and a
 *                               retrieve copy, between the same memory (the
 *                               ceiling)
 *   memcpy_hot_gbps             the same 8 MiB between two buffers that stay
 *                               in the L3: a core's best
 *   store_to_memcpy_ratio,      store_gbps / memcpy_gbps and retrieve_gbps /
 *   retrieve_to_memcpy_ratio    memcpy_gbps, pairwise per trial
 *   ops_per_s_2clients          full request cycles per second from 2 client
 *                               threads against 2 workers, tracing off
 *   ops_per_s_2clients_traced   the same with --trace-level storage
 *   zmq_tcp_rtt_p50_us          a bare libzmq DEALER -> ROUTER round trip of a
 *                               lookup request's size (16-byte reply), each end
 *                               in its own context: the transport's floor
 *   zmq_ipc_rtt_p50_us          the same over ipc:// (a Unix socket)
 *   lookup_to_zmq_tcp_ratio     lookup_rtt_p50_us / zmq_tcp_rtt_p50_us, per trial
 *   tracing_on_off_ratio        traced / untraced cycles per second, both
 *                               measured interleaved in the same repeat
 *                               [>= 0.97]
 *   cpu_us_per_cycle,           the process's CPU time (user + system, all
 *   cpu_us_per_cycle_traced     threads: clients, server, ZMQ, tracing) per
 *                               cycle in the same slices
 *   tracing_cpu_ratio           untraced / traced CPU per cycle: what tracing
 *                               costs in CPU, which the throughput ratio
 *                               shows only through the scheduler's noise
 * One cycle = lookup + polling query_prefetch_status, retrieve of the hit
 * chunks (6 of 8, a prefix both clients share), store of the 2 missing
 * chunks (new tokens every cycle), end_session; 256 tokens x 128 B chunks.
 *
 * Threads: the group's thread creates the servers and clients; each server
 * runs lmc_server_run on a thread "bench-srv" until lmc_server_stop; the
 * 2-client figure runs one thread "bench-cli-<i>" per client. Servers live
 * one at a time (the trace capture hooks are process-wide), each on a free
 * 127.0.0.1 port; trace files go to /dev/shm (or /tmp) and are removed.
 * Every client call has a 10 s timeout, so no wait is unbounded.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "client/workload.h"
#include "core/clock.h"
#include "core/msgpack_util.h"
#include "core/net.h"
#include "core/samples.h"
#include "lmcache/client.h"
#include "server/server.h"

#define CHUNK 256         /* tokens per chunk (the server's default) */
#define TPB 16            /* tokens per block */
#define BPC (CHUNK / TPB) /* blocks per chunk */
#define CALL_TIMEOUT_MS 10000

/* Lookup round trip: 8 chunks. */
#define LOOKUP_CHUNKS 8
/* Store / retrieve: 16 chunks of 256 x 2048 B = 8 MiB per call. */
#define XFER_CHUNKS 16
#define XFER_BPT 2048
/* The 2-client cycle: 8 chunks, the first 6 shared and hit, 2 stored. */
#define CYCLE_CHUNKS 8
#define CYCLE_HIT_CHUNKS 6
#define CYCLE_BPT 128

/* ---------------------------------------------------------------------- */
/* An in-process server                                                    */
/* ---------------------------------------------------------------------- */

typedef struct bench_server {
    lmc_server_config cfg;
    lmc_server *s;
    pthread_t thread;
    char trace_path[128]; /* "" when tracing is off */
} bench_server;

static void *server_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "bench-srv");
    lmc_server_run(arg);
    return NULL;
}

/*
 * Start a server with `workers` workers and an L1 of l1_gb GiB (LRU); with
 * traced, --trace-level storage to a fresh file. false after printing why.
 */
static bool server_start(bench_server *b, int workers, const char *l1_gb, bool traced, int tag)
{
    memset(b, 0, sizeof(*b));
    lmc_server_config_init(&b->cfg);
    char *argv[] = {"server", "--l1-size-gb", (char *)l1_gb, "--eviction-policy", "LRU", NULL};
    lmc_error err;
    if (lmc_sm_config_parse_all(&b->cfg.sm, 5, argv, &err) != LMC_OK) {
        fprintf(stderr, "bench server: %s\n", err.msg);
        lmc_server_config_free(&b->cfg);
        return false;
    }
    b->cfg.max_workers = workers;
    b->cfg.chunk_size = CHUNK;
    /* Steady-state figures: the transfers reuse pages they faulted in during their
     * warm-up, and a prefault thread would compete with the timed slices. */
    b->cfg.no_l1_prefault = true;
    if (traced) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(b->trace_path, sizeof(b->trace_path), "%s/lmcache-bench-server-%ld-%d.lct", dir,
                 (long)getpid(), tag);
        b->cfg.trace_level = "storage";
        b->cfg.trace_output = b->trace_path;
    }
    /* The port can be taken between free_port and the bind: try a few. */
    lmc_status st = LMC_ERR_IO;
    for (int attempt = 0; attempt < 5 && st != LMC_OK; attempt++) {
        if (lmc_net_free_loopback_port(&b->cfg.port, &err) != LMC_OK)
            continue;
        st = lmc_server_create(&b->cfg, &b->s, &err);
    }
    if (st != LMC_OK) {
        fprintf(stderr, "bench server: cannot start a server: %s\n", err.msg);
        goto fail;
    }
    if (pthread_create(&b->thread, NULL, server_thread, b->s) != 0) {
        fprintf(stderr, "bench server: cannot start the server thread\n");
        lmc_server_destroy(b->s);
        goto fail;
    }
    return true;
fail:
    if (b->trace_path[0] != '\0')
        unlink(b->trace_path);
    lmc_server_config_free(&b->cfg);
    return false;
}

/* Stop (the server finishes what is in flight), join, destroy, remove the trace. */
static void server_finish(bench_server *b)
{
    lmc_server_stop(b->s);
    pthread_join(b->thread, NULL);
    lmc_server_destroy(b->s);
    if (b->trace_path[0] != '\0')
        unlink(b->trace_path);
    lmc_server_config_free(&b->cfg);
}

static lmc_client *client_open(const bench_server *b, int64_t num_blocks, int64_t bpt, int index)
{
    lmc_client_config cc;
    lmc_client_config_init(&cc);
    cc.port = b->cfg.port;
    cc.timeout_ms = CALL_TIMEOUT_MS;
    cc.model_name = "bench-model";
    cc.instance_id = (int64_t)getpid() * 16 + index; /* unique per client in this process */
    cc.num_blocks = num_blocks;
    cc.tokens_per_block = TPB;
    cc.bytes_per_token = bpt;
    lmc_client *c = NULL;
    lmc_error err;
    if (lmc_client_create(&cc, &c, &err) != LMC_OK) {
        fprintf(stderr, "bench server: %s\n", err.msg);
        return NULL;
    }
    /* Fault the region in now, not inside a timed call. */
    memset(lmc_client_block(c, 0), 0x5a, (size_t)(num_blocks * lmc_client_block_bytes(c)));
    return c;
}

/* n tokens, a deterministic function of seed (distinct seeds: distinct prompts). */
static void make_tokens(uint32_t *out, size_t n, uint64_t seed)
{
    for (size_t t = 0; t < n; t++)
        out[t] = (uint32_t)lmc_splitmix64(lmc_splitmix64(seed) ^ t);
}

static void block_ids(int64_t *ids, size_t n, int64_t first)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = first + (int64_t)i;
}

static bool report_err(const char *what, const lmc_error *err)
{
    fprintf(stderr, "bench server: %s: %s\n", what, err->msg);
    return false;
}

/* ---------------------------------------------------------------------- */
/* Lookup round trip                                                       */
/* ---------------------------------------------------------------------- */

/*
 * One repeat: iters lookups (after warm-up ones), p50 and p99 in us; with
 * hits, each timed until its hit count is known (lmc_client_lookup), else
 * until its reply. Each then releases its locks and ends its session.
 */
static bool lookup_rtt(lmc_client *c, const uint32_t *tokens, size_t iters, int rep, bool hits,
                       double *p50, double *p99)
{
    const size_t n_tok = LOOKUP_CHUNKS * CHUNK;
    const size_t warm = 50;
    double *us = malloc(iters * sizeof(*us));
    if (us == NULL)
        return false;
    lmc_error err;
    for (size_t i = 0; i < warm + iters; i++) {
        char rid[64];
        snprintf(rid, sizeof(rid), "lk-%d-%d-%zu", rep, hits, i);
        size_t found = 0;
        uint64_t t0 = lmc_mono_ns();
        lmc_status st = hits ? lmc_client_lookup(c, rid, tokens, n_tok, n_tok, NULL, &found, &err)
                             : lmc_client_lookup_submit(c, rid, tokens, n_tok, n_tok, NULL, &err);
        uint64_t t1 = lmc_mono_ns();
        if (st != LMC_OK) {
            free(us);
            return report_err("lookup", &err);
        }
        if (hits && found != LOOKUP_CHUNKS) {
            fprintf(stderr, "bench server: lookup found %zu of %d stored chunks\n", found,
                    LOOKUP_CHUNKS);
            free(us);
            return false;
        }
        if (i >= warm)
            us[i - warm] = (double)(t1 - t0) / 1e3;
        /* Waits for the prefetch, releases its locks and ends the session. */
        if (lmc_client_free_lookup_locks(c, rid, tokens, n_tok, n_tok, NULL, &err) != LMC_OK) {
            free(us);
            return report_err("free_lookup_locks", &err);
        }
    }
    lmc_sort_doubles(us, iters);
    *p50 = lmc_percentile(us, iters, 50);
    if (p99 != NULL)
        *p99 = lmc_percentile(us, iters, 99);
    free(us);
    return true;
}

/* One repeat of iters pings (after warm-up ones): the transport's share of a lookup. */
static bool ping_rtt(lmc_client *c, size_t iters, double *p50)
{
    const size_t warm = 50;
    double *us = malloc(iters * sizeof(*us));
    if (us == NULL)
        return false;
    lmc_error err;
    for (size_t i = 0; i < warm + iters; i++) {
        uint64_t t0 = lmc_mono_ns();
        if (lmc_client_ping(c, &err) != LMC_OK) {
            free(us);
            return report_err("ping", &err);
        }
        if (i >= warm)
            us[i - warm] = (double)(lmc_mono_ns() - t0) / 1e3;
    }
    lmc_sort_doubles(us, iters);
    *p50 = lmc_percentile(us, iters, 50);
    free(us);
    return true;
}

/* ---------------------------------------------------------------------- */
/* The transport's floor: bare libzmq                                      */
/* ---------------------------------------------------------------------- */

#define ECHO_REPLY_BYTES 16

/* The echo end: a ROUTER answering each request with 16 bytes until an
 * empty one arrives (or the context ends). */
static void *echo_main(void *arg)
{
    void *sock = arg;
    uint8_t id[256], reply[ECHO_REPLY_BYTES] = {0};
    for (;;) {
        int n = zmq_recv(sock, id, sizeof(id), 0);
        zmq_msg_t body;
        zmq_msg_init(&body);
        int m = n < 0 ? -1 : zmq_msg_recv(&body, sock, 0);
        zmq_msg_close(&body);
        if (n < 0 || n > (int)sizeof(id) || m <= 0)
            break;
        if (zmq_send(sock, id, (size_t)n, ZMQ_SNDMORE) < 0 ||
            zmq_send(sock, reply, sizeof(reply), 0) < 0)
            break;
    }
    return NULL;
}

/*
 * p50 of a bare libzmq round trip: a DEALER sends `bytes` (a lookup
 * request's size), a ROUTER on its own thread answers with 16 bytes. Each
 * end has its own context, as the client and the server have, so a round
 * trip crosses the same four threads as a ping: what ZeroMQ costs with no
 * server in it. ipc: over a Unix socket in a private directory instead of
 * TCP loopback. False after printing why.
 */
/* A lookup request's size: its token ids as msgpack, plus 64 bytes for the
 * rest (op, request id, the key's other fields, the ZMTP framing). */
static size_t lookup_request_bytes(const uint32_t *tokens, size_t n)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    lmc_msgpack_sbuffer_packer_init(&pk, &sb);
    size_t bytes = lmc_msgpack_pack_uint32_array(&pk, tokens, n) == 0 ? sb.size : 5 * n;
    msgpack_sbuffer_destroy(&sb);
    return bytes + 64;
}

static bool zmq_rtt(bool ipc, size_t bytes, size_t iters, double *p50)
{
    const size_t warm = 50;
    bool good = false;
    char dir[] = "/tmp/lmcache-bench-ipc-XXXXXX", endpoint[PATH_MAX + 16] = "tcp://127.0.0.1:*";
    bool have_dir = false, started = false;
    void *sctx = zmq_ctx_new(), *cctx = zmq_ctx_new(), *srv = NULL, *cli = NULL;
    double *us = malloc(iters * sizeof(*us));
    uint8_t *req = calloc(1, bytes), reply[ECHO_REPLY_BYTES];
    pthread_t t;
    if (sctx == NULL || cctx == NULL || us == NULL || req == NULL)
        goto out;
    if (ipc) {
        if (mkdtemp(dir) == NULL) {
            fprintf(stderr, "bench server: mkdtemp %s: %s\n", dir, strerror(errno));
            goto out;
        }
        have_dir = true;
        snprintf(endpoint, sizeof(endpoint), "ipc://%s/echo", dir);
    }
    int linger = 0;
    if ((srv = zmq_socket(sctx, ZMQ_ROUTER)) == NULL ||
        (cli = zmq_socket(cctx, ZMQ_DEALER)) == NULL ||
        zmq_setsockopt(srv, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_setsockopt(cli, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_bind(srv, endpoint) != 0) {
        fprintf(stderr, "bench server: zmq echo on %s: %s\n", endpoint, zmq_strerror(zmq_errno()));
        goto out;
    }
    size_t len = sizeof(endpoint);
    if (zmq_getsockopt(srv, ZMQ_LAST_ENDPOINT, endpoint, &len) != 0 ||
        zmq_connect(cli, endpoint) != 0) {
        fprintf(stderr, "bench server: zmq echo connect: %s\n", zmq_strerror(zmq_errno()));
        goto out;
    }
    if (pthread_create(&t, NULL, echo_main, srv) != 0) {
        fprintf(stderr, "bench server: cannot start the zmq echo thread\n");
        goto out;
    }
    started = true;
    for (size_t i = 0; i < warm + iters; i++) {
        uint64_t t0 = lmc_mono_ns();
        if (zmq_send(cli, req, bytes, 0) < 0 || zmq_recv(cli, reply, sizeof(reply), 0) < 0) {
            fprintf(stderr, "bench server: zmq echo: %s\n", zmq_strerror(zmq_errno()));
            goto out;
        }
        if (i >= warm)
            us[i - warm] = (double)(lmc_mono_ns() - t0) / 1e3;
    }
    lmc_sort_doubles(us, iters);
    *p50 = lmc_percentile(us, iters, 50);
    good = true;
out:
    if (started) {
        (void)zmq_send(cli, "", 0, 0); /* the echo's stop; it also ends with its context */
        zmq_close(cli);
        cli = NULL;
        zmq_ctx_shutdown(sctx);
        pthread_join(t, NULL);
    }
    if (cli != NULL)
        zmq_close(cli);
    if (srv != NULL)
        zmq_close(srv);
    if (cctx != NULL)
        zmq_ctx_term(cctx);
    if (sctx != NULL)
        zmq_ctx_term(sctx);
    if (have_dir) {
        char sock[PATH_MAX + 8];
        snprintf(sock, sizeof(sock), "%s/echo", dir);
        unlink(sock);
        rmdir(dir);
    }
    free(us);
    free(req);
    return good;
}

/* ---------------------------------------------------------------------- */
/* Store and retrieve bandwidth                                            */
/* ---------------------------------------------------------------------- */

/*
 * Store 16 new chunks from blocks [0, 256), look them up (all hit), retrieve
 * them into blocks [256, 512), end the session, clear L1 -- so the next
 * iteration reuses the same, already faulted, L1 pages. Adds the timed
 * nanoseconds of the store and retrieve calls. verify: compare the bytes.
 */
static bool xfer_once(lmc_client *c, uint32_t *tokens, uint64_t seed, bool verify,
                      uint64_t *store_ns, uint64_t *retrieve_ns)
{
    const size_t n_tok = XFER_CHUNKS * CHUNK, nblk = XFER_CHUNKS * BPC;
    int64_t src[XFER_CHUNKS * BPC], dst[XFER_CHUNKS * BPC];
    block_ids(src, nblk, 0);
    block_ids(dst, nblk, (int64_t)nblk);
    make_tokens(tokens, n_tok, seed);
    size_t bytes = nblk * (size_t)lmc_client_block_bytes(c);
    if (verify) {
        /* Distinct bytes per block in the source, zeros in the target. */
        lmc_kv_pattern p;
        lmc_kv_pattern_init(&p, seed);
        lmc_kv_pattern_fill(&p, lmc_client_block(c, 0), bytes);
        memset(lmc_client_block(c, (int64_t)nblk), 0, bytes);
    }
    char rid[64];
    snprintf(rid, sizeof(rid), "xf-%llu", (unsigned long long)seed);
    lmc_error err;
    bool ok = false;
    uint64_t t0 = lmc_mono_ns();
    if (lmc_client_store(c, rid, tokens, n_tok, 0, n_tok, NULL, src, nblk, &ok, &err) != LMC_OK)
        return report_err("store", &err);
    *store_ns += lmc_mono_ns() - t0;
    if (!ok) {
        fprintf(stderr, "bench server: store returned ok=false\n");
        return false;
    }
    size_t hits = 0;
    if (lmc_client_lookup(c, rid, tokens, n_tok, n_tok, NULL, &hits, &err) != LMC_OK)
        return report_err("lookup", &err);
    if (hits != XFER_CHUNKS) {
        fprintf(stderr, "bench server: lookup after store: %zu of %d chunks hit\n", hits,
                XFER_CHUNKS);
        return false;
    }
    t0 = lmc_mono_ns();
    if (lmc_client_retrieve(c, rid, tokens, n_tok, 0, n_tok, NULL, dst, nblk, &ok, &err) != LMC_OK)
        return report_err("retrieve", &err);
    *retrieve_ns += lmc_mono_ns() - t0;
    if (!ok) {
        fprintf(stderr, "bench server: retrieve after a full hit returned ok=false\n");
        return false;
    }
    if (verify) {
        if (memcmp(lmc_client_block(c, 0), lmc_client_block(c, (int64_t)nblk), bytes) != 0) {
            fprintf(stderr, "bench server: retrieved bytes differ from the stored ones\n");
            return false;
        }
    }
    if (lmc_client_end_session(c, rid, &err) != LMC_OK)
        return report_err("end_session", &err);
    if (lmc_client_clear(c, true, &err) != LMC_OK)
        return report_err("clear", &err);
    return true;
}

/* A buffer backed by huge pages where the kernel gives them, as the L1 pool is. */
static uint8_t *huge_buffer(size_t bytes, int fill)
{
    uint8_t *p = aligned_alloc((size_t)2 << 20, bytes);
    if (p != NULL) {
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint, as for the L1 pool */
        memset(p, fill, bytes);
    }
    return p;
}

/*
 * One thread's copy speed, in GB/s, of iters rounds of from -> via, then
 * via -> to, 8 MiB each, in the server's pieces: one block (16 tokens x
 * 2048 B = 32 KiB) at a time. One 8 MiB memcpy streams through the 2 MiB
 * L2 and read 0.5x the server's own block copies on one guest: no ceiling.
 */
static double copy_gbps(uint8_t *from, uint8_t *via, uint8_t *to, size_t iters)
{
    size_t bytes = (size_t)XFER_CHUNKS * CHUNK * XFER_BPT, block = (size_t)TPB * XFER_BPT;
    uint64_t t0 = lmc_mono_ns();
    for (size_t i = 0; i < iters; i++) {
        for (size_t off = 0; off < bytes; off += block)
            memcpy(via + off, from + off, block);
        for (size_t off = 0; off < bytes; off += block)
            memcpy(to + off, via + off, block);
        __asm__ __volatile__("" ::: "memory"); /* keep every copy */
    }
    return 2.0 * (double)bytes * (double)iters / (double)(lmc_mono_ns() - t0);
}

/*
 * The ceilings to read store_gbps and retrieve_gbps against (same run,
 * same load). *transfer: what one store and one retrieve of xfer_once
 * copy, between the same memory -- the client's source blocks (shared
 * memory, 4 KiB pages) into a huge-page buffer as the L1 pool is, and from
 * there into its target blocks -- so the 24 MiB the transfers cycle
 * through are the ceiling's too. *hot: the same block copies back and
 * forth between two 8 MiB buffers alone, which stay in the L3: the most
 * one core copies, and no transfer's footprint.
 */
static void memcpy_ceilings(lmc_client *c, size_t iters, double *transfer, double *hot)
{
    size_t bytes = (size_t)XFER_CHUNKS * CHUNK * XFER_BPT;
    uint8_t *a = huge_buffer(bytes, 1), *b = huge_buffer(bytes, 2);
    *transfer = *hot = 0;
    if (a != NULL && b != NULL) {
        *transfer = copy_gbps(lmc_client_block(c, 0), a,
                              lmc_client_block(c, (int64_t)XFER_CHUNKS * BPC), iters);
        *hot = copy_gbps(a, b, a, iters);
    }
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------- */
/* Request cycles from 2 clients                                           */
/* ---------------------------------------------------------------------- */

typedef struct cycler {
    lmc_client *c;
    int index;
    const uint32_t *prefix; /* CYCLE_HIT_CHUNKS chunks, shared by the clients */
    uint64_t deadline_ns;
    atomic_bool *failed;
    uint64_t cycles;
    uint64_t next_seed;
    char error[LMC_ERROR_MSG_MAX + 32];
} cycler;

/* One full request cycle; false on any failure (message in w->error). */
static bool cycle_once(cycler *w, uint32_t *tokens)
{
    const size_t n_tok = CYCLE_CHUNKS * CHUNK, hit_tok = CYCLE_HIT_CHUNKS * CHUNK;
    uint64_t seed = w->next_seed++;
    memcpy(tokens, w->prefix, hit_tok * sizeof(*tokens));
    make_tokens(tokens + hit_tok, n_tok - hit_tok, seed);
    char rid[64];
    snprintf(rid, sizeof(rid), "cy-%d-%llu", w->index, (unsigned long long)seed);
    int64_t ids[CYCLE_CHUNKS * BPC];
    lmc_error err;
    size_t h = 0;
    bool ok = false;
    const char *what = "lookup";
    if (lmc_client_lookup(w->c, rid, tokens, n_tok, n_tok, NULL, &h, &err) != LMC_OK)
        goto fail;
    if (h > CYCLE_CHUNKS) {
        snprintf(w->error, sizeof(w->error), "lookup: %zu hit chunks of %d", h, CYCLE_CHUNKS);
        return false;
    }
    what = "retrieve";
    block_ids(ids, h * BPC, 0);
    if (h > 0 && lmc_client_retrieve(w->c, rid, tokens, n_tok, 0, h * CHUNK, NULL, ids, h * BPC,
                                     &ok, &err) != LMC_OK)
        goto fail;
    what = "store";
    block_ids(ids, (CYCLE_CHUNKS - h) * BPC, (int64_t)(h * BPC));
    if (h < CYCLE_CHUNKS && lmc_client_store(w->c, rid, tokens, n_tok, h * CHUNK, n_tok, NULL, ids,
                                             (CYCLE_CHUNKS - h) * BPC, &ok, &err) != LMC_OK)
        goto fail;
    what = "end_session";
    if (lmc_client_end_session(w->c, rid, &err) != LMC_OK)
        goto fail;
    return true;
fail:
    snprintf(w->error, sizeof(w->error), "%s: %s", what, err.msg);
    return false;
}

static void *cycler_main(void *arg)
{
    cycler *w = arg;
    char name[16];
    snprintf(name, sizeof(name), "bench-cli-%d", w->index);
    pthread_setname_np(pthread_self(), name);
    uint32_t tokens[CYCLE_CHUNKS * CHUNK];
    uint64_t n = 0;
    while (lmc_mono_ns() < w->deadline_ns && !atomic_load(w->failed)) {
        if (!cycle_once(w, tokens)) {
            atomic_store(w->failed, true);
            break;
        }
        n++;
    }
    w->cycles = n;
    return NULL;
}

/*
 * One slice: a fresh server (2 workers, traced or not), 2 clients, the
 * shared prefix stored and a few untimed cycles, then `seconds` of cycles
 * from 2 threads. Adds the cycles, the seconds taken and the process's CPU
 * seconds meanwhile to *cycles, *elapsed_s and *cpu_s; false after
 * printing why.
 */
static double process_cpu_s(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0)
        return 0;
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static bool cycles_slice(bool traced, double seconds, int tag, double *cycles, double *elapsed_s,
                         double *cpu_s)
{
    bench_server b;
    if (!server_start(&b, 2, "1", traced, tag))
        return false;
    bool good = false;
    lmc_client *cl[2] = {NULL, NULL};
    uint32_t *prefix = malloc(CYCLE_HIT_CHUNKS * CHUNK * sizeof(*prefix));
    uint32_t *tokens = malloc(CYCLE_CHUNKS * CHUNK * sizeof(*tokens));
    atomic_bool failed = false;
    cycler w[2];
    if (prefix == NULL || tokens == NULL)
        goto out;
    for (int i = 0; i < 2; i++)
        if ((cl[i] = client_open(&b, CYCLE_CHUNKS * BPC, CYCLE_BPT, i)) == NULL)
            goto out;
    make_tokens(prefix, CYCLE_HIT_CHUNKS * CHUNK, 0x5e55106ULL);
    for (int i = 0; i < 2; i++)
        w[i] = (cycler){.c = cl[i],
                        .index = i,
                        .prefix = prefix,
                        .failed = &failed,
                        .next_seed = ((uint64_t)(tag + 1) << 40) | ((uint64_t)i << 32)};
    /* Untimed: the first cycle stores the prefix; the rest warm both sides up. */
    for (int k = 0; k < 10; k++)
        for (int i = 0; i < 2; i++)
            if (!cycle_once(&w[i], tokens)) {
                fprintf(stderr, "bench server: cycle: %s\n", w[i].error);
                goto out;
            }
    pthread_t t[2];
    double cpu0 = process_cpu_s();
    uint64_t start = lmc_mono_ns();
    int started = 0;
    for (int i = 0; i < 2; i++) {
        w[i].deadline_ns = start + (uint64_t)(seconds * 1e9);
        if (pthread_create(&t[i], NULL, cycler_main, &w[i]) != 0) {
            atomic_store(&failed, true);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    double elapsed = (double)(lmc_mono_ns() - start) / 1e9;
    double cpu = process_cpu_s() - cpu0;
    if (atomic_load(&failed)) {
        for (int i = 0; i < 2; i++)
            if (w[i].error[0] != '\0')
                fprintf(stderr, "bench server: client %d: %s\n", i, w[i].error);
        if (started < 2)
            fprintf(stderr, "bench server: cannot start a client thread\n");
        goto out;
    }
    *cycles += (double)(w[0].cycles + w[1].cycles);
    *elapsed_s += elapsed;
    *cpu_s += cpu;
    good = true;
out:
    for (int i = 0; i < 2; i++)
        lmc_client_destroy(cl[i]);
    free(prefix);
    free(tokens);
    server_finish(&b);
    return good;
}

/* ---------------------------------------------------------------------- */
/* The group                                                               */
/* ---------------------------------------------------------------------- */

/* Lookup round trip and store / retrieve bandwidth against one 1-worker server. */
static bool single_client_metrics(const lmc_bench_ctx *ctx)
{
    int reps = ctx->repeats;
    double *p50 = calloc((size_t)reps, sizeof(double));
    double *p99 = calloc((size_t)reps, sizeof(double));
    double *sg = calloc((size_t)reps, sizeof(double));
    double *rg = calloc((size_t)reps, sizeof(double));
    double *ping = calloc((size_t)reps, sizeof(double));
    double *mg = calloc((size_t)reps, sizeof(double));
    double *mh = calloc((size_t)reps, sizeof(double));
    double *ztcp = calloc((size_t)reps, sizeof(double));
    double *hits50 = calloc((size_t)reps, sizeof(double));
    double *zipc = calloc((size_t)reps, sizeof(double));
    uint32_t *tokens = malloc(XFER_CHUNKS * CHUNK * sizeof(*tokens));
    bench_server b;
    bool server_up = false, good = false;
    lmc_client *c = NULL;
    if (p50 == NULL || p99 == NULL || sg == NULL || rg == NULL || ping == NULL || mg == NULL ||
        mh == NULL || ztcp == NULL || zipc == NULL || hits50 == NULL || tokens == NULL)
        goto out;
    /* 2 GiB of L1; the region holds the source and the target of one 8 MiB call. */
    if (!(server_up = server_start(&b, 1, "2", false, 0)))
        goto out;
    if ((c = client_open(&b, 2 * XFER_CHUNKS * BPC, XFER_BPT, 0)) == NULL)
        goto out;

    /* Lookups of a stored 8-chunk prompt: every chunk hits in L1. */
    {
        const size_t n_tok = LOOKUP_CHUNKS * CHUNK;
        int64_t ids[LOOKUP_CHUNKS * BPC];
        block_ids(ids, LOOKUP_CHUNKS * BPC, 0);
        make_tokens(tokens, n_tok, 0x100c0bULL);
        lmc_error err;
        bool ok = false;
        if (lmc_client_store(c, "lk-store", tokens, n_tok, 0, n_tok, NULL, ids, LOOKUP_CHUNKS * BPC,
                             &ok, &err) != LMC_OK) {
            report_err("store", &err);
            goto out;
        }
        size_t iters = (size_t)(2000 * ctx->scale) + 200;
        size_t req_bytes = lookup_request_bytes(tokens, n_tok);
        /* Pairwise: each trial times lookups and pings back to back (pings
         * first in odd trials), so their ratio is measured on one machine
         * state; then the bare libzmq round trips of the same request size. */
        for (int r = 0; r < reps; r++) {
            bool ping_first = r % 2 == 1;
            if ((ping_first && !ping_rtt(c, iters, &ping[r])) ||
                !lookup_rtt(c, tokens, iters, r, false, &p50[r], &p99[r]) ||
                (!ping_first && !ping_rtt(c, iters, &ping[r])) ||
                !lookup_rtt(c, tokens, iters, r, true, &hits50[r], NULL) ||
                !zmq_rtt(false, req_bytes, iters, &ztcp[r]) ||
                !zmq_rtt(true, req_bytes, iters, &zipc[r]))
                goto out;
        }
        lmc_bench_report_trials(ctx, "lookup_rtt_p50_us", p50, (size_t)reps, "us");
        lmc_bench_report_trials(ctx, "lookup_rtt_p99_us", p99, (size_t)reps, "us");
        lmc_bench_report_trials(ctx, "lookup_hits_rtt_p50_us", hits50, (size_t)reps, "us");
        lmc_bench_report_trials(ctx, "ping_rtt_p50_us", ping, (size_t)reps, "us");
        lmc_bench_report_ratio(ctx, "lookup_to_ping_ratio", p50, ping, (size_t)reps, "x");
        lmc_bench_report_trials(ctx, "zmq_tcp_rtt_p50_us", ztcp, (size_t)reps, "us");
        lmc_bench_report_trials(ctx, "zmq_ipc_rtt_p50_us", zipc, (size_t)reps, "us");
        lmc_bench_report_ratio(ctx, "lookup_to_zmq_tcp_ratio", p50, ztcp, (size_t)reps, "x");
        if (lmc_client_clear(c, true, &err) != LMC_OK) {
            report_err("clear", &err);
            goto out;
        }
    }

    /* Store and retrieve of 8 MiB; two untimed iterations fault L1 in. */
    {
        uint64_t seed = 1, sns = 0, rns = 0;
        for (int k = 0; k < 2; k++)
            if (!xfer_once(c, tokens, seed++, k == 0, &sns, &rns))
                goto out;
        size_t iters = (size_t)(40 * ctx->scale) + 6;
        double bytes = (double)iters * XFER_CHUNKS * CHUNK * XFER_BPT;
        /* Pairwise: the memcpy ceiling is measured in each trial, right after its calls. */
        for (int r = 0; r < reps; r++) {
            sns = rns = 0;
            for (size_t i = 0; i < iters; i++)
                if (!xfer_once(c, tokens, seed++, false, &sns, &rns))
                    goto out;
            sg[r] = bytes / (double)sns; /* bytes per ns = GB/s */
            rg[r] = bytes / (double)rns;
            memcpy_ceilings(c, iters, &mg[r], &mh[r]);
        }
        lmc_bench_report_trials(ctx, "store_gbps", sg, (size_t)reps, "GB/s");
        lmc_bench_report_trials(ctx, "retrieve_gbps", rg, (size_t)reps, "GB/s");
        lmc_bench_report_trials(ctx, "memcpy_gbps", mg, (size_t)reps, "GB/s");
        lmc_bench_report_trials(ctx, "memcpy_hot_gbps", mh, (size_t)reps, "GB/s");
        lmc_bench_report_ratio(ctx, "store_to_memcpy_ratio", sg, mg, (size_t)reps, "x");
        lmc_bench_report_ratio(ctx, "retrieve_to_memcpy_ratio", rg, mg, (size_t)reps, "x");
    }
    good = true;
out:
    lmc_client_destroy(c);
    if (server_up)
        server_finish(&b);
    free(p50);
    free(p99);
    free(sg);
    free(rg);
    free(ping);
    free(mg);
    free(mh);
    free(ztcp);
    free(hits50);
    free(zipc);
    free(tokens);
    return good;
}

/*
 * 2-client cycles, tracing off and on. The machine's speed drifts, so each
 * repeat interleaves the two in 4 slices, ABBA (BAAB in odd repeats), and
 * compares their totals: a linear drift within the repeat then cancels.
 */
static bool two_client_metrics(const lmc_bench_ctx *ctx)
{
    int reps = ctx->repeats;
    double slice_s = (1.0 * ctx->scale + 0.15) / 2; /* two slices per setting */
    double *off = calloc((size_t)reps, sizeof(double));
    double *on = calloc((size_t)reps, sizeof(double));
    double *ratio = calloc((size_t)reps, sizeof(double));
    double *cpu_off = calloc((size_t)reps, sizeof(double));
    double *cpu_on = calloc((size_t)reps, sizeof(double));
    bool good = false;
    if (off == NULL || on == NULL || ratio == NULL || cpu_off == NULL || cpu_on == NULL)
        goto out;
    for (int r = 0; r < reps; r++) {
        static const bool abba[4] = {false, true, true, false};
        double cyc[2] = {0, 0}, sec[2] = {0, 0}, cpu[2] = {0, 0}; /* [traced] */
        for (int k = 0; k < 4; k++) {
            bool traced = abba[k] != (r % 2 == 1);
            if (!cycles_slice(traced, slice_s, 4 * r + k, &cyc[traced], &sec[traced], &cpu[traced]))
                goto out;
        }
        off[r] = cyc[0] / sec[0];
        on[r] = cyc[1] / sec[1];
        ratio[r] = on[r] / off[r];
        cpu_off[r] = cpu[0] / cyc[0] * 1e6;
        cpu_on[r] = cpu[1] / cyc[1] * 1e6;
    }
    lmc_bench_report_trials(ctx, "ops_per_s_2clients", off, (size_t)reps, "cycles/s");
    lmc_bench_report_trials(ctx, "ops_per_s_2clients_traced", on, (size_t)reps, "cycles/s");
    lmc_bench_report_trials(ctx, "tracing_on_off_ratio", ratio, (size_t)reps, "ratio");
    lmc_bench_report_trials(ctx, "cpu_us_per_cycle", cpu_off, (size_t)reps, "us");
    lmc_bench_report_trials(ctx, "cpu_us_per_cycle_traced", cpu_on, (size_t)reps, "us");
    lmc_bench_report_ratio(ctx, "tracing_cpu_ratio", cpu_off, cpu_on, (size_t)reps, "ratio");
    good = true;
out:
    free(cpu_off);
    free(cpu_on);
    free(off);
    free(on);
    free(ratio);
    return good;
}

int lmc_bench_group_server(const lmc_bench_ctx *ctx)
{
    bool a = single_client_metrics(ctx);
    bool b = two_client_metrics(ctx);
    return a && b ? 0 : 1;
}
