/*
 * micro.c -- `lmcache bench micro [--json] [--repeats N] [--quick] [GROUP...]`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/log.h"
#include "core/samples.h"

typedef struct group {
    const char *name;
    const char *summary;
    lmc_bench_group_fn fn;
} group;

static const group groups[] = {
    {"sm", "StorageManager calls (reserve/finish, prefetch with L1 hits, read cycle)",
     lmc_bench_group_sm},
    {"trace", "trace capture: gate off, caller cost on, recorder drain, vs an LTTng-UST event",
     lmc_bench_group_trace},
    {"replay", "trace info pass, replay loop overhead and pacing lateness", lmc_bench_group_replay},
    {"server",
     "in-process server over loopback: lookup round trip, store/retrieve GB/s, "
     "2-client cycles, tracing cost",
     lmc_bench_group_server},
};
#define NGROUPS (sizeof(groups) / sizeof(groups[0]))

/* --quick: each group's work multiplier and repeats (the e2e tests run every group so). */
#define QUICK_SCALE 0.01
#define QUICK_REPEATS 2

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache bench micro [--help] [--json] [--repeats N] [--quick] "
            "[GROUP...]\n\n"
            "Micro-benchmarks; each metric is measured in N trials (default 5) after a "
            "warm-up,\nand the median is reported with the trials' min and max; a ratio is "
            "measured\npairwise in each trial and reported as a metric of its own. With "
            "--json, one\nobject per line:\n"
            "  {\"bench\": GROUP, \"metric\": NAME, \"value\": MEDIAN, \"unit\": UNIT,\n"
            "   \"min\": NUMBER, \"max\": NUMBER, \"trials\": N}\n\n"
            "--quick runs tiny iteration counts (%d repeats; a few seconds for all groups)\n"
            "with the same metrics and output: a smoke test, not figures to quote.\n\n"
            "groups (all when none is named):\n",
            QUICK_REPEATS);
    for (size_t i = 0; i < NGROUPS; i++)
        fprintf(out, "  %-8s %s\n", groups[i].name, groups[i].summary);
}

void lmc_bench_report_trials(const lmc_bench_ctx *ctx, const char *metric, const double *v,
                             size_t n, const char *unit)
{
    double *s = n > 0 ? malloc(n * sizeof(*s)) : NULL;
    if (s == NULL) {
        lmc_bench_note(ctx, metric, n > 0 ? "out of memory" : "no trial was measured");
        return;
    }
    memcpy(s, v, n * sizeof(*s));
    double med = lmc_bench_median(s, n); /* sorts s */
    if (ctx->json)
        printf("{\"bench\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", "
               "\"min\": %.6g, \"max\": %.6g, \"trials\": %zu}\n",
               ctx->group, metric, med, unit, s[0], s[n - 1], n);
    else
        printf("%-8s %-32s %14.3f %-10s [%.3f .. %.3f, %zu trials]\n", ctx->group, metric, med,
               unit, s[0], s[n - 1], n);
    fflush(stdout);
    free(s);
}

void lmc_bench_report_ratio(const lmc_bench_ctx *ctx, const char *metric, const double *num,
                            const double *den, size_t n, const char *unit)
{
    double *r = n > 0 ? malloc(n * sizeof(*r)) : NULL;
    size_t k = 0;
    for (size_t i = 0; r != NULL && i < n; i++)
        if (den[i] > 0)
            r[k++] = num[i] / den[i];
    if (k > 0)
        lmc_bench_report_trials(ctx, metric, r, k, unit);
    else
        lmc_bench_note(ctx, metric, r == NULL && n > 0 ? "out of memory" : "no pair was measured");
    free(r);
}

void lmc_bench_report(const lmc_bench_ctx *ctx, const char *metric, double value, const char *unit)
{
    lmc_bench_report_trials(ctx, metric, &value, 1, unit);
}

void lmc_bench_note(const lmc_bench_ctx *ctx, const char *metric, const char *why)
{
    if (ctx->json)
        printf("{\"bench\": \"%s\", \"metric\": \"%s\", \"note\": \"%s\"}\n", ctx->group, metric,
               why);
    else
        printf("%-8s %-32s %s\n", ctx->group, metric, why);
    fflush(stdout);
}

double lmc_bench_median(double *v, size_t n)
{
    lmc_sort_doubles(v, n);
    return lmc_median(v, n);
}

int lmc_bench_micro_main(int argc, char **argv)
{
    lmc_bench_ctx ctx = {.json = false, .repeats = 5, .scale = 1.0, .group = NULL};
    bool selected[NGROUPS] = {false};
    bool any = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            ctx.json = true;
        } else if (strcmp(a, "--quick") == 0) {
            ctx.scale = QUICK_SCALE;
            ctx.repeats = QUICK_REPEATS;
        } else if (strcmp(a, "--repeats") == 0) {
            char *end;
            long r = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end != '\0' || r < 1 || r > 1000) {
                fprintf(stderr, "lmcache bench micro: --repeats needs an integer in 1..1000\n");
                return 2;
            }
            ctx.repeats = (int)r;
            i++;
        } else if (a[0] == '-') {
            fprintf(stderr, "lmcache bench micro: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else {
            size_t g = 0;
            while (g < NGROUPS && strcmp(groups[g].name, a) != 0)
                g++;
            if (g == NGROUPS) {
                fprintf(stderr, "lmcache bench micro: unknown group '%s'\n\n", a);
                usage(stderr);
                return 2;
            }
            selected[g] = any = true;
        }
    }
    /* Benchmarks should not be slowed by INFO logging of the components. */
    if (getenv("LMCACHE_LOG_LEVEL") == NULL)
        lmc_log_set_level(LMC_LOG_WARNING);
    int rc = 0;
    for (size_t g = 0; g < NGROUPS; g++) {
        if (any && !selected[g])
            continue;
        ctx.group = groups[g].name;
        if (groups[g].fn(&ctx) != 0)
            rc = 1;
    }
    return rc;
}
