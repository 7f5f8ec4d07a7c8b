/*
 * cmd_bench.c -- `lmcache bench server|micro`.
 *
 * micro runs the library micro-benchmarks (bench/micro.c).
 *
 * server parses its flags, loads the workload (a Mooncake trace or a
 * synthetic multi-round chat, src/client/workload.h), runs the load
 * generator (src/client/loadgen.h: the request cycle, threads and byte
 * checks live there) and prints its result as a table or one JSON object.
 * SIGINT or SIGTERM during the run sets the generator's cancel flag: the
 * workers stop, their clients unregister and unmap their regions (which
 * lmc_client unlinked once registered), and the report covers the requests
 * started before it.
 *
 * Threads: the main thread only (the load generator's workers are its own).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "client/loadgen.h"
#include "client/workload.h"
#include "core/flags.h"
#include "core/json.h"

/* ---------------------------------------------------------------------- */
/* Arguments                                                               */
/* ---------------------------------------------------------------------- */

typedef struct server_args {
    lmc_loadgen_options run;
    const char *trace;
    lmc_chat_config chat;
    bool chat_flag_given; /* a synthetic-only flag was given */
    const char *chat_flag;
    size_t max_requests;
    bool json;
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

/* What a flag's value is and where it goes. */
typedef enum {
    NUM_U32,
    NUM_U64,
    NUM_INT,
    NUM_I64,
    NUM_SIZE,
    NUM_NONNEG_DOUBLE,
    TEXT,          /* a string, kept as given */
    TEXT_NONEMPTY, /* a string that must not be "" */
} flag_kind;

typedef struct value_flag {
    const char *name;
    uint64_t lo, hi; /* integers only */
    flag_kind kind;
    size_t offset;  /* of the field in server_args */
    bool synthetic; /* only for the synthetic workload */
} value_flag;

#define AT(field) offsetof(server_args, field)
static const value_flag value_flags[] = {
    {"--users", 1, UINT32_MAX, NUM_U32, AT(chat.users), true},
    {"--rounds", 1, UINT32_MAX, NUM_U32, AT(chat.rounds), true},
    {"--groups", 1, UINT32_MAX, NUM_U32, AT(chat.groups), true},
    {"--system-len", 0, UINT32_MAX, NUM_U32, AT(chat.system_len), true},
    {"--prompt-len", 0, UINT32_MAX, NUM_U32, AT(chat.prompt_len), true},
    {"--answer-len", 0, UINT32_MAX, NUM_U32, AT(chat.answer_len), true},
    {"--seed", 0, UINT64_MAX, NUM_U64, AT(chat.seed), true},
    {"--interval-ms", 0, 0, NUM_NONNEG_DOUBLE, AT(chat.interval_ms), true},
    {"--time-scale", 0, 0, NUM_NONNEG_DOUBLE, AT(run.time_scale), false},
    {"--port", 1, 65535, NUM_INT, AT(run.port), false},
    {"--max-requests", 1, SIZE_MAX, NUM_SIZE, AT(max_requests), false},
    {"--concurrency", 1, 1024, NUM_INT, AT(run.concurrency), false},
    {"--blocks", 1, (uint64_t)1 << 32, NUM_I64, AT(run.blocks), false},
    {"--bytes-per-token", 1, (uint64_t)1 << 30, NUM_I64, AT(run.bytes_per_token), false},
    {"--tokens-per-block", 1, (uint64_t)1 << 20, NUM_I64, AT(run.tokens_per_block), false},
    {"--timeout-ms", 1, INT32_MAX, NUM_INT, AT(run.timeout_ms), false},
    {"--host", 0, 0, TEXT_NONEMPTY, AT(run.host), false},
    {"--model-name", 0, 0, TEXT_NONEMPTY, AT(run.model_name), false},
    {"--trace", 0, 0, TEXT, AT(trace), false},
};
#undef AT

/* Parse v into the flag's field. Every hi above fits its field's type, so no cast truncates. */
static lmc_status flag_parse(server_args *a, const value_flag *f, const char *v, lmc_error *err)
{
    void *dst = (char *)a + f->offset;
    if (f->kind == TEXT || f->kind == TEXT_NONEMPTY) {
        if (f->kind == TEXT_NONEMPTY && *v == '\0')
            return lmc_error_set(err, LMC_ERR_INVALID, "%s: empty", f->name);
        *(const char **)dst = v; /* argv outlives the run */
        return LMC_OK;
    }
    if (f->kind == NUM_NONNEG_DOUBLE)
        return lmc_flag_parse_nonneg_double(f->name, v, dst, err);
    uint64_t u;
    lmc_status st = lmc_flag_parse_u64(f->name, v, f->lo, f->hi, &u, err);
    if (st != LMC_OK)
        return st;
    switch (f->kind) {
    case NUM_U32:
        *(uint32_t *)dst = (uint32_t)u;
        break;
    case NUM_U64:
        *(uint64_t *)dst = u;
        break;
    case NUM_INT:
        *(int *)dst = (int)u;
        break;
    case NUM_I64:
        *(int64_t *)dst = (int64_t)u;
        break;
    case NUM_SIZE:
        *(size_t *)dst = (size_t)u;
        break;
    case NUM_NONNEG_DOUBLE:
    case TEXT:
    case TEXT_NONEMPTY:
        break; /* handled above */
    }
    return LMC_OK;
}

/* 0 ok, 2 usage error (printed), -1 help printed. */
static int parse_server(int argc, char **argv, server_args *a)
{
    memset(a, 0, sizeof(*a));
    lmc_loadgen_options_init(&a->run);
    lmc_chat_config_init(&a->chat);
    lmc_error err;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        bool m;
        if (lmc_cli_is_help(arg)) {
            server_usage(stdout);
            return -1;
        }
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
            continue;
        }
        const value_flag *f = NULL;
        for (size_t k = 0; k < sizeof(value_flags) / sizeof(value_flags[0]) && f == NULL; k++) {
            v = lmc_flag_value(value_flags[k].name, argc, argv, &i, &m);
            if (v != NULL || m)
                f = &value_flags[k];
        }
        if (f != NULL) {
            if (v == NULL)
                goto missing;
            if (flag_parse(a, f, v, &err) != LMC_OK)
                goto bad;
            if (f->synthetic) {
                a->chat_flag_given = true;
                a->chat_flag = f->name;
            }
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
    bad:
        fprintf(stderr, "lmcache bench server: %s\n", err.msg);
        return 2;
    }
    if (a->trace != NULL && a->chat_flag_given) {
        fprintf(stderr,
                "lmcache bench server: %s is for the synthetic workload; it cannot be combined "
                "with --trace\n",
                a->chat_flag);
        return 2;
    }
    if (a->trace == NULL && lmc_chat_config_check(&a->chat, &err) != LMC_OK) {
        fprintf(stderr, "lmcache bench server: synthetic workload: %s\n", err.msg);
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Report                                                                  */
/* ---------------------------------------------------------------------- */

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

/* The timed calls, then lateness, as the report lists them. */
#define N_ROWS (LMC_LOADGEN_N_OPS + 1)

static const lmc_loadgen_latency *row_latency(const lmc_loadgen_result *r, size_t k)
{
    return k == LMC_LOADGEN_N_OPS ? &r->lateness : &r->op[k];
}

static lmc_json *ms_or_null(const lmc_loadgen_latency *p, double v)
{
    return p->n ? lmc_json_float(v) : lmc_json_null();
}

/* 0, or 1 when out of memory (message printed). */
static int print_json(const server_args *a, const lmc_loadgen_result *r, const char *desc,
                      double hit_rate, uint64_t moved, double rps)
{
    const lmc_loadgen_counts *t = &r->total;
    lmc_json *o = lmc_json_object();
    lmc_status st = LMC_OK;
#define SET(k, v)                                                                                  \
    do {                                                                                           \
        if (st == LMC_OK)                                                                          \
            st = lmc_json_object_set(o, k, v);                                                     \
    } while (0)
    SET("workload", lmc_json_string(a->trace ? "mooncake" : "chat"));
    SET("trace", a->trace ? lmc_json_string(a->trace) : lmc_json_null());
    SET("description", lmc_json_string(desc));
    SET("host", lmc_json_string(a->run.host));
    SET("port", lmc_json_int(a->run.port));
    SET("concurrency", lmc_json_int(a->run.concurrency));
    SET("chunk_size", lmc_json_int(r->chunk_size));
    SET("time_scale", lmc_json_float(a->run.time_scale));
    SET("requests", lmc_json_int((int64_t)t->requests));
    SET("requests_skipped", lmc_json_int((int64_t)t->skipped));
    SET("chunks_looked_up", lmc_json_int((int64_t)t->chunks));
    SET("hit_chunks", lmc_json_int((int64_t)t->hit_chunks));
    SET("hit_rate", lmc_json_float(hit_rate));
    SET("bytes_retrieved", lmc_json_int((int64_t)t->bytes_retrieved));
    SET("bytes_stored", lmc_json_int((int64_t)t->bytes_stored));
    SET("bytes_moved", lmc_json_int((int64_t)moved));
    SET("corrupt_chunks", lmc_json_int((int64_t)t->corrupt));
    SET("errors", lmc_json_int((int64_t)t->errors));
    SET("retrieve_failed", lmc_json_int((int64_t)t->retrieve_failed));
    SET("store_failed", lmc_json_int((int64_t)t->store_failed));
    SET("duration_s", lmc_json_float(r->duration_s));
    SET("requests_per_s", lmc_json_float(rps));
    for (size_t k = 0; k < N_ROWS; k++) {
        const char *name = k == LMC_LOADGEN_N_OPS ? "lateness" : lmc_loadgen_op_name(k);
        const lmc_loadgen_latency *p = row_latency(r, k);
        char key[64];
        snprintf(key, sizeof(key), "%s_count", name);
        SET(key, lmc_json_int((int64_t)p->n));
        snprintf(key, sizeof(key), "%s_p50_ms", name);
        SET(key, ms_or_null(p, p->p50_ms));
        snprintf(key, sizeof(key), "%s_p99_ms", name);
        SET(key, ms_or_null(p, p->p99_ms));
        snprintf(key, sizeof(key), "%s_max_ms", name);
        SET(key, ms_or_null(p, p->max_ms));
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
    return 0;
}

static void print_table(const lmc_loadgen_result *r, const char *desc, double hit_rate,
                        uint64_t moved, double rps)
{
    const lmc_loadgen_counts *t = &r->total;
    char b1[32], b2[32], b3[32];
    printf("lmcache bench server: %s\n", desc);
    printf("  %-22s%llu (skipped %llu without a full chunk)\n",
           "requests:", (unsigned long long)t->requests, (unsigned long long)t->skipped);
    printf("  %-22s%llu\n", "chunks looked up:", (unsigned long long)t->chunks);
    printf("  %-22s%llu\n", "hit chunks:", (unsigned long long)t->hit_chunks);
    printf("  %-22s%.4f\n", "hit rate:", hit_rate);
    fmt_bytes(moved, b1, sizeof(b1));
    fmt_bytes(t->bytes_retrieved, b2, sizeof(b2));
    fmt_bytes(t->bytes_stored, b3, sizeof(b3));
    printf("  %-22s%s (retrieved %s, stored %s)\n", "bytes moved:", b1, b2, b3);
    printf("  %-22s%llu\n", "corrupt chunks:", (unsigned long long)t->corrupt);
    printf("  %-22s%llu\n", "errors:", (unsigned long long)t->errors);
    printf("  %-22s%.3f s\n", "duration:", r->duration_s);
    printf("  %-22s%.1f req/s, %.1f MB/s\n", "throughput:", rps,
           r->duration_s > 0 ? (double)moved / r->duration_s / 1e6 : 0.0);
    printf("\n  %-14s%10s%12s%12s%12s\n", "op", "count", "p50 ms", "p99 ms", "max ms");
    for (size_t k = 0; k < N_ROWS; k++) {
        const char *name = k == LMC_LOADGEN_N_OPS ? "(lateness)" : lmc_loadgen_op_name(k);
        const lmc_loadgen_latency *p = row_latency(r, k);
        if (p->n == 0)
            printf("  %-14s%10zu%12s%12s%12s\n", name, p->n, "-", "-", "-");
        else
            printf("  %-14s%10zu%12.3f%12.3f%12.3f\n", name, p->n, p->p50_ms, p->p99_ms, p->max_ms);
    }
}

/* Print the result; the exit code (1 if a chunk was corrupt or a call failed). */
static int report(const server_args *a, const lmc_loadgen_result *r, const char *desc)
{
    const lmc_loadgen_counts *t = &r->total;
    double hit_rate = t->chunks ? (double)t->hit_chunks / (double)t->chunks : 0.0;
    uint64_t moved = t->bytes_retrieved + t->bytes_stored;
    double rps = r->duration_s > 0 ? (double)t->requests / r->duration_s : 0.0;
    if (a->json) {
        if (print_json(a, r, desc, hit_rate, moved, rps) != 0)
            return 1;
    } else {
        print_table(r, desc, hit_rate, moved, rps);
    }
    fflush(stdout); /* the table before the messages below, when both go to one file */
    if (r->first_error[0] != '\0')
        fprintf(stderr, "lmcache bench server: %llu errors; first: %s\n",
                (unsigned long long)t->errors, r->first_error);
    if (t->corrupt > 0)
        fprintf(stderr,
                "lmcache bench server: %llu retrieved chunks did not hold the bytes "
                "stored for them\n",
                (unsigned long long)t->corrupt);
    if (r->cancelled)
        fprintf(stderr, "lmcache bench server: interrupted; the report covers the requests "
                        "started before that\n");
    return (t->corrupt > 0 || t->errors > 0) ? 1 : 0;
}

/* ---------------------------------------------------------------------- */
/* bench server                                                            */
/* ---------------------------------------------------------------------- */

static atomic_bool g_cancel; /* set by SIGINT or SIGTERM during a run */

static void on_stop_signal(int sig)
{
    (void)sig;
    atomic_store(&g_cancel, true);
}

static lmc_workload *load_workload(const server_args *a)
{
    lmc_error err;
    lmc_workload *wl = NULL;
    if (a->trace != NULL) {
        if (lmc_workload_load_mooncake(a->trace, a->max_requests, &wl, &err) != LMC_OK) {
            fprintf(stderr, "lmcache bench server: %s\n", err.msg);
            return NULL;
        }
        if (lmc_workload_skipped_lines(wl) > 0)
            fprintf(stderr,
                    "lmcache bench server: warning: skipped %llu malformed lines; first: "
                    "%s\n",
                    (unsigned long long)lmc_workload_skipped_lines(wl),
                    lmc_workload_first_error(wl));
    } else if (lmc_workload_chat(&a->chat, a->max_requests, &wl, &err) != LMC_OK) {
        fprintf(stderr, "lmcache bench server: %s\n", err.msg);
        return NULL;
    }
    return wl;
}

static int cmd_bench_server(int argc, char **argv)
{
    server_args a;
    int prc = parse_server(argc, argv, &a);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    lmc_workload *wl = load_workload(&a);
    if (wl == NULL)
        return 1;

    /* Both stop the run the same way, so that it cleans up after itself. */
    static const int stop_signals[] = {SIGINT, SIGTERM};
#define N_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))
    struct sigaction sa = {0}, old_sa[N_STOP_SIGNALS];
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    atomic_store(&g_cancel, false);
    a.run.cancel = &g_cancel;
    for (size_t i = 0; i < N_STOP_SIGNALS; i++)
        sigaction(stop_signals[i], &sa, &old_sa[i]);
    lmc_loadgen_result res;
    lmc_error err;
    lmc_status st = lmc_loadgen_run(&a.run, wl, &res, &err);
    for (size_t i = 0; i < N_STOP_SIGNALS; i++)
        sigaction(stop_signals[i], &old_sa[i], NULL);
#undef N_STOP_SIGNALS
    int rc = 1;
    if (st != LMC_OK) {
        fprintf(stderr, "lmcache bench server: %s\n", err.msg);
        goto out;
    }
    if (res.samples_truncated)
        fprintf(stderr, "lmcache bench server: warning: out of memory for latency samples; "
                        "the percentiles cover part of the run\n");
    char desc[512];
    if (a.trace != NULL)
        snprintf(desc, sizeof(desc),
                 "%s:%d, Mooncake trace '%s' (%zu requests), chunk %lld "
                 "tokens, concurrency %d",
                 a.run.host, a.run.port, a.trace, lmc_workload_count(wl), (long long)res.chunk_size,
                 a.run.concurrency);
    else
        snprintf(desc, sizeof(desc),
                 "%s:%d, synthetic chat (%u users x %u rounds, %zu requests), "
                 "chunk %lld tokens, concurrency %d",
                 a.run.host, a.run.port, a.chat.users, a.chat.rounds, lmc_workload_count(wl),
                 (long long)res.chunk_size, a.run.concurrency);
    rc = report(&a, &res, desc);
out:
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
