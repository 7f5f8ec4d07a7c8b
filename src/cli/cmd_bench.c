/*
 * cmd_bench.c -- `lmcache bench server|micro`.
 *
 * micro runs the library micro-benchmarks (bench/micro.c).
 *
 * server is a load generator that drives a running `lmcache server` the way
 * an inference engine does, from a Mooncake trace or a synthetic multi-round
 * chat workload (src/client/workload.h), and checks every retrieved byte.
 *
 * Threads: the main thread loads the workload, creates one client (socket
 * and KV region) per worker, starts --concurrency workers named
 * "bench-<i>", joins them and reports. Worker i takes requests i, i+C,
 * i+2C, ... and waits for each one's arrival time (timestamp x
 * --time-scale after the start). Each worker owns its client and its
 * counters; nothing is shared while running except the stop flag (atomic),
 * set when a call times out (the server is gone: waiting out every other
 * request's timeout helps nobody) or on SIGINT.
 *
 * Per request with n full chunks: lookup (polling query_prefetch_status)
 * gives h hit chunks; retrieve [0, h) into blocks and verify every byte
 * against the KV pattern; fill [h, n) with the pattern and store it;
 * end_session. Blocks come round-robin from the client's region, one
 * window (at most --blocks blocks) per retrieve or store call, so a prompt
 * longer than the region is moved in several calls and no call uses a
 * block twice. Retrieve targets are zeroed first, so a retrieve that copies
 * nothing cannot pass on stale bytes of an earlier request.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "client/workload.h"
#include "core/clock.h"
#include "core/flags.h"
#include "core/json.h"
#include "core/samples.h"
#include "lmcache/client.h"

/* ---------------------------------------------------------------------- */
/* Arguments                                                               */
/* ---------------------------------------------------------------------- */

typedef struct server_args {
    const char *host;
    int port;
    const char *trace;
    lmc_chat_config chat;
    bool chat_flag_given; /* a synthetic-only flag was given */
    const char *chat_flag;
    double time_scale;
    size_t max_requests;
    int concurrency;
    int64_t blocks;
    int64_t bytes_per_token;
    int64_t tokens_per_block;
    const char *model_name;
    bool json;
    int timeout_ms;
} server_args;

static void server_usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache bench server [--help] [--trace PATH | synthetic options] [options]\n\n"
            "Drive a running `lmcache server` like an inference engine: per request, lookup\n"
            "(polling the prefetch status), retrieve the hit chunks and verify every byte,\n"
            "store the missing chunks, end the session. The chunk size is the server's.\n\n"
            "workload:\n"
            "  --trace PATH          a Mooncake trace (JSON lines: timestamp, input_length,\n"
            "                        output_length, hash_ids); without it, a synthetic chat:\n"
            "  --users N             users (default 8)\n"
            "  --rounds N            rounds per user (default 4)\n"
            "  --groups N            users share one system prompt per group (default 2)\n"
            "  --system-len N        system prompt tokens (default 1024)\n"
            "  --prompt-len N        tokens per user turn (default 256)\n"
            "  --answer-len N        tokens per assistant turn (default 256)\n"
            "  --seed N              token seed (default 1)\n"
            "  --interval-ms F       gap between synthetic requests (default 0)\n\n"
            "options:\n"
            "  --host HOST           server host (default 127.0.0.1)\n"
            "  --port PORT           server port (default 5555)\n"
            "  --time-scale F        multiply arrival times by F (default 1.0; 0.01 runs a\n"
            "                        trace 100x faster; 0 ignores them)\n"
            "  --max-requests N      stop after the first N requests (default: all)\n"
            "  --concurrency N       worker threads, each with its own client (default 1)\n"
            "  --blocks N            KV region size per client in blocks (default 16384)\n"
            "  --tokens-per-block N  tokens per block (default 16; must divide the chunk size)\n"
            "  --bytes-per-token B   KV bytes per token (default 64)\n"
            "  --model-name NAME     model name in keys (default bench-model)\n"
            "  --timeout-ms N        per-call timeout (default 30000)\n"
            "  --json                print one JSON object instead of a table\n\n"
            "The report gives hit rate (hit chunks / looked-up chunks), bytes moved, per-op\n"
            "latency (lookup includes polling) and lateness: how late each request started\n"
            "against its scaled arrival time (not measured with --time-scale 0).\n"
            "Exits 1 if any retrieved chunk is corrupt or any call failed.\n");
}

/* The shared parsers (core/flags.h), with their message printed under this command. */
static bool parse_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    lmc_error err;
    if (lmc_flag_parse_u64(flag, v, lo, hi, out, &err) == LMC_OK)
        return true;
    fprintf(stderr, "lmcache bench server: %s\n", err.msg);
    return false;
}

static bool parse_nonneg_double(const char *flag, const char *v, double *out)
{
    lmc_error err;
    if (lmc_flag_parse_nonneg_double(flag, v, out, &err) == LMC_OK)
        return true;
    fprintf(stderr, "lmcache bench server: %s\n", err.msg);
    return false;
}

/* 0 ok, 2 usage error (printed), -1 help printed. */
static int parse_server(int argc, char **argv, server_args *a)
{
    memset(a, 0, sizeof(*a));
    a->host = "127.0.0.1";
    a->port = 5555;
    lmc_chat_config_init(&a->chat);
    a->time_scale = 1.0;
    a->concurrency = 1;
    a->blocks = 16384;
    a->bytes_per_token = 64;
    a->tokens_per_block = 16;
    a->model_name = "bench-model";
    a->timeout_ms = 30000;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        bool m;
        uint64_t u;
        if (lmc_cli_is_help(arg)) {
            server_usage(stdout);
            return -1;
        }
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
            continue;
        }
#define VALUE(name) ((v = lmc_flag_value(name, argc, argv, &i, &m)) != NULL || m)
#define NEED()                                                                                     \
    do {                                                                                           \
        if (v == NULL)                                                                             \
            goto missing;                                                                          \
    } while (0)
#define CHAT_U32(name, field, lo)                                                                  \
    if (VALUE(name)) {                                                                             \
        NEED();                                                                                    \
        if (!parse_u64(name, v, lo, UINT32_MAX, &u))                                               \
            return 2;                                                                              \
        a->chat.field = (uint32_t)u;                                                               \
        a->chat_flag_given = true;                                                                 \
        a->chat_flag = name;                                                                       \
        continue;                                                                                  \
    }
        CHAT_U32("--users", users, 1)
        CHAT_U32("--rounds", rounds, 1)
        CHAT_U32("--groups", groups, 1)
        CHAT_U32("--system-len", system_len, 0)
        CHAT_U32("--prompt-len", prompt_len, 0)
        CHAT_U32("--answer-len", answer_len, 0)
#undef CHAT_U32
        if (VALUE("--seed")) {
            NEED();
            if (!parse_u64("--seed", v, 0, UINT64_MAX, &u))
                return 2;
            a->chat.seed = u;
            a->chat_flag_given = true;
            a->chat_flag = "--seed";
        } else if (VALUE("--interval-ms")) {
            NEED();
            if (!parse_nonneg_double("--interval-ms", v, &a->chat.interval_ms))
                return 2;
            a->chat_flag_given = true;
            a->chat_flag = "--interval-ms";
        } else if (VALUE("--host")) {
            NEED();
            if (*v == '\0') {
                fprintf(stderr, "lmcache bench server: --host: empty\n");
                return 2;
            }
            a->host = v;
        } else if (VALUE("--port")) {
            NEED();
            if (!parse_u64("--port", v, 1, 65535, &u))
                return 2;
            a->port = (int)u;
        } else if (VALUE("--trace")) {
            NEED();
            a->trace = v;
        } else if (VALUE("--time-scale")) {
            NEED();
            if (!parse_nonneg_double("--time-scale", v, &a->time_scale))
                return 2;
        } else if (VALUE("--max-requests")) {
            NEED();
            if (!parse_u64("--max-requests", v, 1, SIZE_MAX, &u))
                return 2;
            a->max_requests = (size_t)u;
        } else if (VALUE("--concurrency")) {
            NEED();
            if (!parse_u64("--concurrency", v, 1, 1024, &u))
                return 2;
            a->concurrency = (int)u;
        } else if (VALUE("--blocks")) {
            NEED();
            if (!parse_u64("--blocks", v, 1, (uint64_t)1 << 32, &u))
                return 2;
            a->blocks = (int64_t)u;
        } else if (VALUE("--bytes-per-token")) {
            NEED();
            if (!parse_u64("--bytes-per-token", v, 1, (uint64_t)1 << 30, &u))
                return 2;
            a->bytes_per_token = (int64_t)u;
        } else if (VALUE("--tokens-per-block")) {
            NEED();
            if (!parse_u64("--tokens-per-block", v, 1, (uint64_t)1 << 20, &u))
                return 2;
            a->tokens_per_block = (int64_t)u;
        } else if (VALUE("--model-name")) {
            NEED();
            if (*v == '\0') {
                fprintf(stderr, "lmcache bench server: --model-name: empty\n");
                return 2;
            }
            a->model_name = v;
        } else if (VALUE("--timeout-ms")) {
            NEED();
            if (!parse_u64("--timeout-ms", v, 1, INT32_MAX, &u))
                return 2;
            a->timeout_ms = (int)u;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "lmcache bench server: unknown option '%s'\n\n", arg);
            server_usage(stderr);
            return 2;
        } else {
            fprintf(stderr, "lmcache bench server: unexpected argument '%s'\n\n", arg);
            server_usage(stderr);
            return 2;
        }
        continue;
    missing:
        fprintf(stderr, "lmcache bench server: %s: a value is required\n", arg);
        return 2;
#undef VALUE
#undef NEED
    }
    if (a->trace != NULL && a->chat_flag_given) {
        fprintf(stderr,
                "lmcache bench server: %s is for the synthetic workload; it cannot be combined "
                "with --trace\n",
                a->chat_flag);
        return 2;
    }
    if (a->trace == NULL) {
        lmc_error err;
        if (lmc_chat_config_check(&a->chat, &err) != LMC_OK) {
            fprintf(stderr, "lmcache bench server: synthetic workload: %s\n", err.msg);
            return 2;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Workers                                                                 */
/* ---------------------------------------------------------------------- */

enum { OP_LOOKUP, OP_RETRIEVE, OP_STORE, OP_END_SESSION, N_OPS };
static const char *const op_names[N_OPS] = {"lookup", "retrieve", "store", "end_session"};

typedef struct samples {
    double *v; /* ms */
    size_t n, cap;
    bool oom;
} samples;

static void samples_add(samples *s, double ms)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *nv = realloc(s->v, cap * sizeof(*nv));
        if (nv == NULL) {
            s->oom = true;
            return;
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = ms;
}

typedef struct counters {
    uint64_t requests, skipped;
    uint64_t chunks, hit_chunks;
    uint64_t bytes_retrieved, bytes_stored;
    uint64_t corrupt, errors;
    uint64_t retrieve_failed, store_failed;
} counters;

typedef struct run_shared {
    const server_args *args;
    const lmc_workload *wl;
    uint64_t origin_ns;
    atomic_bool stop;
    int64_t chunk_size;
    char run_tag[32]; /* "bench-<pid>" */
} run_shared;

typedef struct worker {
    int index;
    pthread_t thread;
    run_shared *sh;
    lmc_client *client;
    int64_t cursor; /* next block, round-robin over the region */
    int64_t *block_ids;
    size_t block_cap;
    counters c;
    samples lat[N_OPS];
    samples lateness;
    char first_error[LMC_ERROR_MSG_MAX + 64];
} worker;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static bool should_stop(run_shared *sh)
{
    return interrupted || atomic_load(&sh->stop);
}

static void note_error(worker *w, size_t req, const lmc_error *err)
{
    w->c.errors++;
    if (w->first_error[0] == '\0')
        snprintf(w->first_error, sizeof(w->first_error), "request %zu: %s", req, err->msg);
    if (err->code == LMC_ERR_TIMEOUT)
        atomic_store(&w->sh->stop, true);
}

/* Block ids for n blocks from the round-robin cursor. */
static const int64_t *take_blocks(worker *w, size_t n)
{
    int64_t nb = lmc_client_num_blocks(w->client);
    for (size_t k = 0; k < n; k++)
        w->block_ids[k] = (w->cursor + (int64_t)k) % nb;
    w->cursor = (w->cursor + (int64_t)n) % nb;
    return w->block_ids;
}

/* Fill (or check) chunk c's bytes in the blocks of its window position. */
static bool chunk_pattern(worker *w, const int64_t *ids, size_t bpc, uint64_t seed, bool fill)
{
    lmc_kv_pattern p;
    lmc_kv_pattern_init(&p, seed);
    size_t bb = (size_t)lmc_client_block_bytes(w->client);
    bool ok = true;
    for (size_t b = 0; b < bpc; b++) {
        uint8_t *blk = lmc_client_block(w->client, ids[b]);
        if (fill)
            lmc_kv_pattern_fill(&p, blk, bb);
        else
            ok &= lmc_kv_pattern_check(&p, blk, bb);
    }
    return ok;
}

static double ms_since(uint64_t t0)
{
    return (double)(lmc_mono_ns() - t0) / 1e6;
}

static void run_request(worker *w, size_t req)
{
    run_shared *sh = w->sh;
    size_t cs = (size_t)sh->chunk_size;
    size_t bpc = cs / (size_t)sh->args->tokens_per_block;
    size_t window = (size_t)lmc_client_num_blocks(w->client) / bpc; /* chunks per call */
    lmc_error err;
    uint32_t *tokens = NULL;
    uint64_t *seeds = NULL;
    size_t n_tok;
    if (lmc_workload_tokens(sh->wl, req, cs, &tokens, &n_tok, &err) != LMC_OK) {
        note_error(w, req, &err);
        return;
    }
    if (n_tok == 0) {
        w->c.skipped++;
        return;
    }
    size_t n = n_tok / cs;
    seeds = malloc(n * sizeof(*seeds));
    if (seeds == NULL) {
        lmc_error_set(&err, LMC_ERR_NOMEM, "out of memory");
        note_error(w, req, &err);
        free(tokens);
        return;
    }
    uint64_t s = LMC_KV_PATTERN_SEED0;
    for (size_t c = 0; c < n; c++)
        seeds[c] = s = lmc_kv_chunk_seed(s, tokens + c * cs, cs);

    char rid[64];
    snprintf(rid, sizeof(rid), "%s-%zu", sh->run_tag, req);
    w->c.requests++;
    w->c.chunks += n;

    size_t h = 0;
    uint64_t t0 = lmc_mono_ns();
    if (lmc_client_lookup(w->client, rid, tokens, n_tok, n_tok, NULL, &h, &err) != LMC_OK) {
        note_error(w, req, &err);
        goto end;
    }
    samples_add(&w->lat[OP_LOOKUP], ms_since(t0));
    if (h > n) {
        lmc_error_set(&err, LMC_ERR_FORMAT, "lookup: %zu hit chunks reported for %zu chunks", h, n);
        note_error(w, req, &err);
        goto end;
    }
    w->c.hit_chunks += h;

    for (size_t c0 = 0; c0 < h && !atomic_load(&sh->stop); c0 += window) {
        size_t c1 = c0 + window < h ? c0 + window : h;
        size_t nblk = (c1 - c0) * bpc;
        const int64_t *ids = take_blocks(w, nblk);
        for (size_t k = 0; k < nblk; k++)
            memset(lmc_client_block(w->client, ids[k]), 0,
                   (size_t)lmc_client_block_bytes(w->client));
        bool ok = false;
        t0 = lmc_mono_ns();
        if (lmc_client_retrieve(w->client, rid, tokens, n_tok, c0 * cs, c1 * cs, NULL, ids, nblk,
                                &ok, &err) != LMC_OK) {
            note_error(w, req, &err);
            goto end;
        }
        samples_add(&w->lat[OP_RETRIEVE], ms_since(t0));
        if (!ok) {
            w->c.retrieve_failed++;
            lmc_error_set(&err, LMC_ERR_INVALID,
                          "retrieve of chunks [%zu, %zu) returned ok=false after a lookup hit", c0,
                          c1);
            note_error(w, req, &err);
            goto end;
        }
        w->c.bytes_retrieved += (uint64_t)(c1 - c0) * cs * (uint64_t)sh->args->bytes_per_token;
        for (size_t c = c0; c < c1; c++)
            if (!chunk_pattern(w, ids + (c - c0) * bpc, bpc, seeds[c], false))
                w->c.corrupt++;
    }

    for (size_t c0 = h; c0 < n && !atomic_load(&sh->stop); c0 += window) {
        size_t c1 = c0 + window < n ? c0 + window : n;
        size_t nblk = (c1 - c0) * bpc;
        const int64_t *ids = take_blocks(w, nblk);
        for (size_t c = c0; c < c1; c++)
            chunk_pattern(w, ids + (c - c0) * bpc, bpc, seeds[c], true);
        bool ok = false;
        t0 = lmc_mono_ns();
        if (lmc_client_store(w->client, rid, tokens, n_tok, c0 * cs, c1 * cs, NULL, ids, nblk, &ok,
                             &err) != LMC_OK) {
            note_error(w, req, &err);
            goto end;
        }
        samples_add(&w->lat[OP_STORE], ms_since(t0));
        if (!ok) {
            w->c.store_failed++;
            lmc_error_set(&err, LMC_ERR_INVALID, "store of chunks [%zu, %zu) returned ok=false", c0,
                          c1);
            note_error(w, req, &err);
            goto end;
        }
        w->c.bytes_stored += (uint64_t)(c1 - c0) * cs * (uint64_t)sh->args->bytes_per_token;
    }

end:
    if (!atomic_load(&sh->stop)) {
        t0 = lmc_mono_ns();
        if (lmc_client_end_session(w->client, rid, &err) != LMC_OK)
            note_error(w, req, &err);
        else
            samples_add(&w->lat[OP_END_SESSION], ms_since(t0));
    }
    free(seeds);
    free(tokens);
}

/* Sleep until due_ns in slices, so that a stop is noticed. */
static bool wait_until(run_shared *sh, uint64_t due_ns)
{
    for (;;) {
        if (should_stop(sh))
            return false;
        uint64_t now = lmc_mono_ns();
        if (now >= due_ns)
            return true;
        uint64_t left = due_ns - now;
        lmc_sleep_ns(left < 100000000ull ? left : 100000000ull);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    run_shared *sh = w->sh;
    char name[16];
    snprintf(name, sizeof(name), "bench-%d", w->index);
    pthread_setname_np(pthread_self(), name);
    size_t n = lmc_workload_count(sh->wl);
    for (size_t req = (size_t)w->index; req < n; req += (size_t)sh->args->concurrency) {
        /* With --time-scale 0 nothing is due: lateness would only be queueing. */
        bool paced = sh->args->time_scale > 0;
        uint64_t due = sh->origin_ns;
        if (paced)
            due += (uint64_t)(lmc_workload_arrival_ms(sh->wl, req) * sh->args->time_scale * 1e6);
        if (!wait_until(sh, due))
            break;
        if (paced)
            samples_add(&w->lateness, (double)(lmc_mono_ns() - due) / 1e6);
        run_request(w, req);
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Report                                                                  */
/* ---------------------------------------------------------------------- */

typedef struct pct {
    size_t n;
    double p50, p99, max;
} pct;

/* Merge the workers' samples and take nearest-rank percentiles. */
static pct percentiles(worker *ws, int nw, size_t which /* N_OPS = lateness */)
{
    pct r = {0};
    size_t total = 0;
    for (int i = 0; i < nw; i++)
        total += which == N_OPS ? ws[i].lateness.n : ws[i].lat[which].n;
    if (total == 0)
        return r;
    double *all = malloc(total * sizeof(*all));
    if (all == NULL)
        return r;
    size_t at = 0;
    for (int i = 0; i < nw; i++) {
        const samples *s = which == N_OPS ? &ws[i].lateness : &ws[i].lat[which];
        memcpy(all + at, s->v, s->n * sizeof(*all));
        at += s->n;
    }
    lmc_sort_doubles(all, total);
    r.n = total;
    r.p50 = lmc_percentile(all, total, 50);
    r.p99 = lmc_percentile(all, total, 99);
    r.max = all[total - 1];
    free(all);
    return r;
}

static void fmt_bytes(uint64_t b, char *buf, size_t len)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", v, units[u]);
}

static lmc_json *ms_or_null(const pct *p, double v)
{
    return p->n ? lmc_json_float(v) : lmc_json_null();
}

static int report(const server_args *a, const run_shared *sh, worker *ws, int nw, double dur_s,
                  const char *workload_desc)
{
    counters t = {0};
    for (int i = 0; i < nw; i++) {
        const counters *c = &ws[i].c;
        t.requests += c->requests;
        t.skipped += c->skipped;
        t.chunks += c->chunks;
        t.hit_chunks += c->hit_chunks;
        t.bytes_retrieved += c->bytes_retrieved;
        t.bytes_stored += c->bytes_stored;
        t.corrupt += c->corrupt;
        t.errors += c->errors;
        t.retrieve_failed += c->retrieve_failed;
        t.store_failed += c->store_failed;
    }
    pct p[N_OPS + 1];
    for (size_t o = 0; o <= N_OPS; o++)
        p[o] = percentiles(ws, nw, o);
    double hit_rate = t.chunks ? (double)t.hit_chunks / (double)t.chunks : 0.0;
    uint64_t moved = t.bytes_retrieved + t.bytes_stored;
    double rps = dur_s > 0 ? (double)t.requests / dur_s : 0.0;

    if (a->json) {
        lmc_json *o = lmc_json_object();
        lmc_status st = LMC_OK;
#define SET(k, v)                                                                                  \
    do {                                                                                           \
        if (st == LMC_OK)                                                                          \
            st = lmc_json_object_set(o, k, v);                                                     \
    } while (0)
        SET("workload", lmc_json_string(a->trace ? "mooncake" : "chat"));
        SET("trace", a->trace ? lmc_json_string(a->trace) : lmc_json_null());
        SET("description", lmc_json_string(workload_desc));
        SET("host", lmc_json_string(a->host));
        SET("port", lmc_json_int(a->port));
        SET("concurrency", lmc_json_int(a->concurrency));
        SET("chunk_size", lmc_json_int(sh->chunk_size));
        SET("time_scale", lmc_json_float(a->time_scale));
        SET("requests", lmc_json_int((int64_t)t.requests));
        SET("requests_skipped", lmc_json_int((int64_t)t.skipped));
        SET("chunks_looked_up", lmc_json_int((int64_t)t.chunks));
        SET("hit_chunks", lmc_json_int((int64_t)t.hit_chunks));
        SET("hit_rate", lmc_json_float(hit_rate));
        SET("bytes_retrieved", lmc_json_int((int64_t)t.bytes_retrieved));
        SET("bytes_stored", lmc_json_int((int64_t)t.bytes_stored));
        SET("bytes_moved", lmc_json_int((int64_t)moved));
        SET("corrupt_chunks", lmc_json_int((int64_t)t.corrupt));
        SET("errors", lmc_json_int((int64_t)t.errors));
        SET("retrieve_failed", lmc_json_int((int64_t)t.retrieve_failed));
        SET("store_failed", lmc_json_int((int64_t)t.store_failed));
        SET("duration_s", lmc_json_float(dur_s));
        SET("requests_per_s", lmc_json_float(rps));
        for (size_t k = 0; k <= N_OPS; k++) {
            const char *name = k == N_OPS ? "lateness" : op_names[k];
            char key[64];
            snprintf(key, sizeof(key), "%s_count", name);
            SET(key, lmc_json_int((int64_t)p[k].n));
            snprintf(key, sizeof(key), "%s_p50_ms", name);
            SET(key, ms_or_null(&p[k], p[k].p50));
            snprintf(key, sizeof(key), "%s_p99_ms", name);
            SET(key, ms_or_null(&p[k], p[k].p99));
            snprintf(key, sizeof(key), "%s_max_ms", name);
            SET(key, ms_or_null(&p[k], p[k].max));
        }
#undef SET
        char *s = st == LMC_OK ? lmc_json_dumps(o, 0, -1, NULL) : NULL;
        lmc_json_free(o);
        if (s == NULL) {
            fprintf(stderr, "lmcache bench server: out of memory\n");
            return 1;
        }
        printf("%s\n", s);
        free(s);
    } else {
        char b1[32], b2[32], b3[32];
        printf("lmcache bench server: %s\n", workload_desc);
        printf("  %-22s%llu (skipped %llu without a full chunk)\n",
               "requests:", (unsigned long long)t.requests, (unsigned long long)t.skipped);
        printf("  %-22s%llu\n", "chunks looked up:", (unsigned long long)t.chunks);
        printf("  %-22s%llu\n", "hit chunks:", (unsigned long long)t.hit_chunks);
        printf("  %-22s%.4f\n", "hit rate:", hit_rate);
        fmt_bytes(moved, b1, sizeof(b1));
        fmt_bytes(t.bytes_retrieved, b2, sizeof(b2));
        fmt_bytes(t.bytes_stored, b3, sizeof(b3));
        printf("  %-22s%s (retrieved %s, stored %s)\n", "bytes moved:", b1, b2, b3);
        printf("  %-22s%llu\n", "corrupt chunks:", (unsigned long long)t.corrupt);
        printf("  %-22s%llu\n", "errors:", (unsigned long long)t.errors);
        printf("  %-22s%.3f s\n", "duration:", dur_s);
        printf("  %-22s%.1f req/s, %.1f MB/s\n", "throughput:", rps,
               dur_s > 0 ? (double)moved / dur_s / 1e6 : 0.0);
        printf("\n  %-14s%10s%12s%12s%12s\n", "op", "count", "p50 ms", "p99 ms", "max ms");
        for (size_t k = 0; k <= N_OPS; k++) {
            const char *name = k == N_OPS ? "(lateness)" : op_names[k];
            if (p[k].n == 0)
                printf("  %-14s%10zu%12s%12s%12s\n", name, p[k].n, "-", "-", "-");
            else
                printf("  %-14s%10zu%12.3f%12.3f%12.3f\n", name, p[k].n, p[k].p50, p[k].p99,
                       p[k].max);
        }
    }
    fflush(stdout); /* the table before the messages below, when both go to one file */
    for (int i = 0; i < nw; i++)
        if (ws[i].first_error[0] != '\0') {
            fprintf(stderr, "lmcache bench server: %llu errors; first: %s\n",
                    (unsigned long long)t.errors, ws[i].first_error);
            break;
        }
    if (t.corrupt > 0)
        fprintf(stderr,
                "lmcache bench server: %llu retrieved chunks did not hold the bytes "
                "stored for them\n",
                (unsigned long long)t.corrupt);
    if (interrupted)
        fprintf(stderr, "lmcache bench server: interrupted; the report covers the requests "
                        "started before that\n");
    return (t.corrupt > 0 || t.errors > 0) ? 1 : 0;
}

/* ---------------------------------------------------------------------- */
/* bench server                                                            */
/* ---------------------------------------------------------------------- */

static int cmd_bench_server(int argc, char **argv)
{
    server_args a;
    int prc = parse_server(argc, argv, &a);
    if (prc != 0)
        return prc < 0 ? 0 : prc;

    lmc_error err;
    lmc_workload *wl = NULL;
    if (a.trace != NULL) {
        if (lmc_workload_load_mooncake(a.trace, a.max_requests, &wl, &err) != LMC_OK) {
            fprintf(stderr, "lmcache bench server: %s\n", err.msg);
            return 1;
        }
        if (lmc_workload_skipped_lines(wl) > 0)
            fprintf(stderr,
                    "lmcache bench server: warning: skipped %llu malformed lines; first: "
                    "%s\n",
                    (unsigned long long)lmc_workload_skipped_lines(wl),
                    lmc_workload_first_error(wl));
    } else if (lmc_workload_chat(&a.chat, a.max_requests, &wl, &err) != LMC_OK) {
        fprintf(stderr, "lmcache bench server: %s\n", err.msg);
        return 1;
    }

    int rc = 1;
    int nw = a.concurrency;
    run_shared sh = {.args = &a, .wl = wl};
    atomic_init(&sh.stop, false);
    snprintf(sh.run_tag, sizeof(sh.run_tag), "bench-%ld", (long)getpid());
    worker *ws = calloc((size_t)nw, sizeof(*ws));
    if (ws == NULL) {
        fprintf(stderr, "lmcache bench server: out of memory\n");
        goto out;
    }
    for (int i = 0; i < nw; i++) {
        lmc_client_config cfg;
        lmc_client_config_init(&cfg);
        cfg.host = a.host;
        cfg.port = a.port;
        cfg.timeout_ms = a.timeout_ms;
        cfg.connect_timeout_ms = a.timeout_ms < 5000 ? a.timeout_ms : 5000;
        cfg.model_name = a.model_name;
        /* Threads share the pid: the low bits tell their regions apart. */
        cfg.instance_id = ((int64_t)getpid() << 16) | i;
        cfg.num_blocks = a.blocks;
        cfg.tokens_per_block = a.tokens_per_block;
        cfg.bytes_per_token = a.bytes_per_token;
        ws[i].index = i;
        ws[i].sh = &sh;
        if (lmc_client_create(&cfg, &ws[i].client, &err) != LMC_OK) {
            fprintf(stderr, "lmcache bench server: %s\n", err.msg);
            goto out;
        }
        int64_t cs = lmc_client_chunk_size(ws[i].client);
        if (i == 0)
            sh.chunk_size = cs;
        if (cs % a.tokens_per_block != 0) {
            fprintf(stderr,
                    "lmcache bench server: --tokens-per-block %lld does not divide the "
                    "server's chunk size %lld\n",
                    (long long)a.tokens_per_block, (long long)cs);
            goto out;
        }
        int64_t bpc = cs / a.tokens_per_block;
        if (a.blocks < bpc) {
            fprintf(stderr,
                    "lmcache bench server: --blocks %lld is less than one chunk (%lld "
                    "blocks of %lld tokens)\n",
                    (long long)a.blocks, (long long)bpc, (long long)a.tokens_per_block);
            goto out;
        }
        ws[i].block_cap = (size_t)(a.blocks / bpc * bpc);
        ws[i].block_ids = malloc(ws[i].block_cap * sizeof(int64_t));
        if (ws[i].block_ids == NULL) {
            fprintf(stderr, "lmcache bench server: out of memory\n");
            goto out;
        }
    }

    char desc[512];
    if (a.trace != NULL)
        snprintf(desc, sizeof(desc),
                 "%s:%d, Mooncake trace '%s' (%zu requests), chunk %lld "
                 "tokens, concurrency %d",
                 a.host, a.port, a.trace, lmc_workload_count(wl), (long long)sh.chunk_size, nw);
    else
        snprintf(desc, sizeof(desc),
                 "%s:%d, synthetic chat (%u users x %u rounds, %zu requests), "
                 "chunk %lld tokens, concurrency %d",
                 a.host, a.port, a.chat.users, a.chat.rounds, lmc_workload_count(wl),
                 (long long)sh.chunk_size, nw);

    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    interrupted = 0;

    sh.origin_ns = lmc_mono_ns();
    int started = 0;
    for (; started < nw; started++) {
        if (pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]) != 0) {
            fprintf(stderr, "lmcache bench server: cannot start worker %d\n", started);
            atomic_store(&sh.stop, true);
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    double dur = (double)(lmc_mono_ns() - sh.origin_ns) / 1e9;
    sigaction(SIGINT, &old_sa, NULL);
    if (started < nw)
        goto out;
    bool oom = false;
    for (int i = 0; i < nw; i++) {
        oom |= ws[i].lateness.oom;
        for (size_t k = 0; k < N_OPS; k++)
            oom |= ws[i].lat[k].oom;
    }
    if (oom)
        fprintf(stderr, "lmcache bench server: warning: out of memory for latency samples; "
                        "the percentiles cover part of the run\n");
    rc = report(&a, &sh, ws, nw, dur, desc);
out:
    if (ws != NULL) {
        for (int i = 0; i < nw; i++) {
            lmc_client_destroy(ws[i].client);
            free(ws[i].block_ids);
            for (size_t k = 0; k < N_OPS; k++)
                free(ws[i].lat[k].v);
            free(ws[i].lateness.v);
        }
        free(ws);
    }
    lmc_workload_destroy(wl);
    return rc;
}

static int cmd_bench_micro(int argc, char **argv)
{
    return lmc_bench_micro_main(argc, argv);
}

static const lmc_cli_command subs[] = {
    {"server", "drive a running server with a Mooncake trace or a synthetic workload",
     cmd_bench_server},
    {"micro", "micro-benchmarks of the library (groups sm, trace, replay, server)",
     cmd_bench_micro},
};

int lmc_cmd_bench(int argc, char **argv)
{
    return lmc_cli_dispatch("bench", "Benchmarks.", subs, sizeof(subs) / sizeof(subs[0]), argc,
                            argv);
}
