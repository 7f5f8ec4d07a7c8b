/*
 * bench.h -- the micro-benchmark harness behind `lmcache bench micro`.
 *
 * A group (sm, trace, replay, server) is one function that measures its
 * metrics and reports each with lmc_bench_report_trials: a metric is
 * measured in several trials after an untimed warm-up, and its median is
 * reported with the trials' min, max and count, because the machines this
 * runs on are shared and noisy. A ratio of two figures is measured
 * pairwise (both figures in each trial, interleaved) and reported as a
 * metric of its own with lmc_bench_report_ratio, so that its spread is
 * the ratio's and not the product of two spreads.
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

/* The median of n trials (n >= 1), with their min, max and n. v is not changed. */
void lmc_bench_report_trials(const lmc_bench_ctx *ctx, const char *metric, const double *v,
                             size_t n, const char *unit);
/* num[i] / den[i] per trial, reported like lmc_bench_report_trials (pairs
 * with den[i] <= 0 are left out; none left: a note). */
void lmc_bench_report_ratio(const lmc_bench_ctx *ctx, const char *metric, const double *num,
                            const double *den, size_t n, const char *unit);
/* One measured value: a metric of one trial. */
void lmc_bench_report(const lmc_bench_ctx *ctx, const char *metric, double value, const char *unit);
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
