/*
 * bench.h -- the micro-benchmark harness behind `lmcache bench micro`.
 *
 * A group (sm, trace, replay, server) is one function that measures its
 * metrics and reports each with lmc_bench_report. Each metric is measured
 * several times and the median is reported, because the machines this
 * runs on are shared and noisy; compare ratios measured in one run.
 *
 * Threads: a group may start threads of its own; reporting happens on the
 * group's calling thread.
 */
#ifndef LMC_BENCH_BENCH_H
#define LMC_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct lmc_bench_ctx {
    bool json;     /* one JSON object per line instead of a table */
    int repeats;   /* measurements per metric (median reported) */
    double scale;  /* work multiplier (1.0 default; smaller for quick runs) */
    const char *group;
} lmc_bench_ctx;

void lmc_bench_report(const lmc_bench_ctx *ctx, const char *metric, double value,
                      const char *unit);
/* A note about a metric that could not be measured (printed, or a JSON "note"). */
void lmc_bench_note(const lmc_bench_ctx *ctx, const char *metric, const char *why);

/* Median of n values (sorts in place). */
double lmc_bench_median(double *v, size_t n);

typedef int (*lmc_bench_group_fn)(const lmc_bench_ctx *ctx);

int lmc_bench_group_sm(const lmc_bench_ctx *ctx);
int lmc_bench_group_trace(const lmc_bench_ctx *ctx);
int lmc_bench_group_replay(const lmc_bench_ctx *ctx);
int lmc_bench_group_server(const lmc_bench_ctx *ctx);

int lmc_bench_micro_main(int argc, char **argv);

#endif
