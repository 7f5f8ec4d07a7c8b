/*
 * loadgen.c -- the `lmcache bench server` load generator (see loadgen.h).
 *
 * Owns, inside lmc_loadgen_run: the workers (one client, a block-id
 * scratch array, counters and latency samples each) and the state they
 * share read-only (options, workload, start time, chunk size, run tag)
 * plus the atomic stop flag. Threads and the request cycle: loadgen.h.
 */
#include "client/loadgen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/samples.h"
#include "lmcache/client.h"

static const char *const g_op_names[LMC_LOADGEN_N_OPS] = {"lookup", "retrieve", "store",
                                                          "end_session"};

const char *lmc_loadgen_op_name(lmc_loadgen_op op)
{
    return op < LMC_LOADGEN_N_OPS ? g_op_names[op] : "?";
}

void lmc_loadgen_options_init(lmc_loadgen_options *o)
{
    *o = (lmc_loadgen_options){.host = "127.0.0.1",
                               .port = 5555,
                               .time_scale = 1.0,
                               .concurrency = 1,
                               .blocks = 16384,
                               .bytes_per_token = 64,
                               .tokens_per_block = 16,
                               .model_name = "bench-model",
                               .timeout_ms = 30000,
                               .cancel = NULL};
}

typedef struct run_shared {
    const lmc_loadgen_options *opt;
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
    lmc_loadgen_counts c;
    lmc_samples lat[LMC_LOADGEN_N_OPS]; /* ms */
    lmc_samples lateness;               /* ms */
    bool samples_oom;
    char first_error[LMC_ERROR_MSG_MAX + 64];
} worker;

/* A lost sample only narrows the percentiles; the run goes on. */
static void sample(worker *w, lmc_samples *s, double ms)
{
    if (lmc_samples_push(s, ms) != LMC_OK)
        w->samples_oom = true;
}

static bool should_stop(run_shared *sh)
{
    return atomic_load(&sh->stop) || (sh->opt->cancel != NULL && atomic_load(sh->opt->cancel));
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
    size_t bpc = cs / (size_t)sh->opt->tokens_per_block;
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
    sample(w, &w->lat[LMC_LOADGEN_LOOKUP], ms_since(t0));
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
        sample(w, &w->lat[LMC_LOADGEN_RETRIEVE], ms_since(t0));
        if (!ok) {
            w->c.retrieve_failed++;
            lmc_error_set(&err, LMC_ERR_INVALID,
                          "retrieve of chunks [%zu, %zu) returned ok=false after a lookup hit", c0,
                          c1);
            note_error(w, req, &err);
            goto end;
        }
        w->c.bytes_retrieved += (uint64_t)(c1 - c0) * cs * (uint64_t)sh->opt->bytes_per_token;
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
        sample(w, &w->lat[LMC_LOADGEN_STORE], ms_since(t0));
        if (!ok) {
            w->c.store_failed++;
            lmc_error_set(&err, LMC_ERR_INVALID, "store of chunks [%zu, %zu) returned ok=false", c0,
                          c1);
            note_error(w, req, &err);
            goto end;
        }
        w->c.bytes_stored += (uint64_t)(c1 - c0) * cs * (uint64_t)sh->opt->bytes_per_token;
    }

end:
    if (!atomic_load(&sh->stop)) {
        t0 = lmc_mono_ns();
        if (lmc_client_end_session(w->client, rid, &err) != LMC_OK)
            note_error(w, req, &err);
        else
            sample(w, &w->lat[LMC_LOADGEN_END_SESSION], ms_since(t0));
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
    for (size_t req = (size_t)w->index; req < n; req += (size_t)sh->opt->concurrency) {
        /* With time_scale 0 nothing is due: lateness would only be queueing. */
        bool paced = sh->opt->time_scale > 0;
        uint64_t due = sh->origin_ns;
        if (paced)
            due += (uint64_t)(lmc_workload_arrival_ms(sh->wl, req) * sh->opt->time_scale * 1e6);
        if (!wait_until(sh, due))
            break;
        if (paced)
            sample(w, &w->lateness, (double)(lmc_mono_ns() - due) / 1e6);
        run_request(w, req);
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Set-up and results                                                      */
/* ---------------------------------------------------------------------- */

/* Worker i's client and block scratch, checked against the server's chunk size. */
static lmc_status worker_open(worker *w, run_shared *sh, lmc_error *err)
{
    const lmc_loadgen_options *o = sh->opt;
    lmc_client_config cfg;
    lmc_client_config_init(&cfg);
    cfg.host = o->host;
    cfg.port = o->port;
    cfg.timeout_ms = o->timeout_ms;
    cfg.connect_timeout_ms = o->timeout_ms < 5000 ? o->timeout_ms : 5000;
    cfg.model_name = o->model_name;
    /* Threads share the pid: the low bits tell their regions apart. */
    cfg.instance_id = ((int64_t)getpid() << 16) | w->index;
    cfg.num_blocks = o->blocks;
    cfg.tokens_per_block = o->tokens_per_block;
    cfg.bytes_per_token = o->bytes_per_token;
    lmc_status st = lmc_client_create(&cfg, &w->client, err);
    if (st != LMC_OK)
        return st;
    int64_t cs = lmc_client_chunk_size(w->client);
    if (w->index == 0)
        sh->chunk_size = cs;
    if (cs % o->tokens_per_block != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--tokens-per-block %lld does not divide the server's chunk size %lld",
                             (long long)o->tokens_per_block, (long long)cs);
    int64_t bpc = cs / o->tokens_per_block;
    if (o->blocks < bpc)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--blocks %lld is less than one chunk (%lld blocks of %lld tokens)",
                             (long long)o->blocks, (long long)bpc, (long long)o->tokens_per_block);
    w->block_cap = (size_t)(o->blocks / bpc * bpc);
    w->block_ids = malloc(w->block_cap * sizeof(int64_t));
    if (w->block_ids == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    return LMC_OK;
}

static void worker_close(worker *w)
{
    lmc_client_destroy(w->client);
    free(w->block_ids);
    for (size_t k = 0; k < LMC_LOADGEN_N_OPS; k++)
        lmc_samples_free(&w->lat[k]);
    lmc_samples_free(&w->lateness);
}

/* The workers' samples of one op (LMC_LOADGEN_N_OPS: lateness), merged. */
static const lmc_samples *samples_of(const worker *w, size_t which)
{
    return which == LMC_LOADGEN_N_OPS ? &w->lateness : &w->lat[which];
}

/* Merge the workers' samples and take nearest-rank percentiles. */
static lmc_loadgen_latency latency(const worker *ws, int nw, size_t which)
{
    lmc_loadgen_latency r = {0};
    size_t total = 0;
    for (int i = 0; i < nw; i++)
        total += samples_of(&ws[i], which)->n;
    if (total == 0)
        return r;
    double *all = malloc(total * sizeof(*all));
    if (all == NULL)
        return r;
    size_t at = 0;
    for (int i = 0; i < nw; i++) {
        const lmc_samples *s = samples_of(&ws[i], which);
        if (s->n == 0)
            continue; /* s->v may be NULL: no memcpy from it, even of 0 bytes (UBSan) */
        memcpy(all + at, s->v, s->n * sizeof(*all));
        at += s->n;
    }
    lmc_sort_doubles(all, total);
    r.n = total;
    r.p50_ms = lmc_percentile(all, total, 50);
    r.p99_ms = lmc_percentile(all, total, 99);
    r.max_ms = all[total - 1];
    free(all);
    return r;
}

static void add_counts(lmc_loadgen_counts *t, const lmc_loadgen_counts *c)
{
    t->requests += c->requests;
    t->skipped += c->skipped;
    t->chunks += c->chunks;
    t->hit_chunks += c->hit_chunks;
    t->bytes_retrieved += c->bytes_retrieved;
    t->bytes_stored += c->bytes_stored;
    t->corrupt += c->corrupt;
    t->errors += c->errors;
    t->retrieve_failed += c->retrieve_failed;
    t->store_failed += c->store_failed;
}

static void collect(const run_shared *sh, const worker *ws, int nw, double dur_s,
                    lmc_loadgen_result *out)
{
    out->chunk_size = sh->chunk_size;
    out->duration_s = dur_s;
    for (int i = 0; i < nw; i++) {
        add_counts(&out->total, &ws[i].c);
        out->samples_truncated |= ws[i].samples_oom;
        if (out->first_error[0] == '\0' && ws[i].first_error[0] != '\0')
            snprintf(out->first_error, sizeof(out->first_error), "%s", ws[i].first_error);
    }
    for (size_t k = 0; k < LMC_LOADGEN_N_OPS; k++)
        out->op[k] = latency(ws, nw, k);
    out->lateness = latency(ws, nw, LMC_LOADGEN_N_OPS);
    out->cancelled = sh->opt->cancel != NULL && atomic_load(sh->opt->cancel);
}

lmc_status lmc_loadgen_run(const lmc_loadgen_options *o, const lmc_workload *wl,
                           lmc_loadgen_result *out, lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    lmc_status st = LMC_OK;
    int nw = o->concurrency;
    run_shared sh = {.opt = o, .wl = wl};
    atomic_init(&sh.stop, false);
    snprintf(sh.run_tag, sizeof(sh.run_tag), "bench-%ld", (long)getpid());
    worker *ws = calloc((size_t)nw, sizeof(*ws));
    if (ws == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < nw; i++) {
        ws[i].index = i;
        ws[i].sh = &sh;
        if ((st = worker_open(&ws[i], &sh, err)) != LMC_OK)
            goto out;
    }

    sh.origin_ns = lmc_mono_ns();
    int started = 0;
    for (; started < nw; started++) {
        if (pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]) != 0) {
            st = lmc_error_set(err, LMC_ERR_INTERNAL, "cannot start worker %d", started);
            atomic_store(&sh.stop, true);
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    if (st == LMC_OK)
        collect(&sh, ws, nw, (double)(lmc_mono_ns() - sh.origin_ns) / 1e9, out);
out:
    if (ws != NULL) {
        for (int i = 0; i < nw; i++)
            worker_close(&ws[i]);
        free(ws);
    }
    return st;
}
