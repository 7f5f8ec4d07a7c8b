/*
 * cmd_trace_compare.c -- `lmcache trace compare BASE.json NEW.json`.
 *
 * Reads two replay (or sweep) results, refuses to compare replays of
 * different traces unless told to, compares every figure under the
 * --max-regression thresholds (replay/compare.h), and when the outcome
 * digests differ and both results carry per-record outcomes, names the
 * first record they disagree on (replay/diverge.h). Exit 0 when no
 * threshold is exceeded, 1 when one is, 2 for a usage error (a bad flag or
 * threshold, a file that is missing or not a result, different traces).
 *
 * Threads: the calling thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/flags.h"
#include "replay/compare.h"
#include "replay/compare_report.h"
#include "replay/diverge.h"
#include "trace/file_digest.h"

#define CMD "lmcache trace compare"

typedef struct compare_args {
    const char *base, *new_;
    const char *config, *base_config, *new_config;
    const char *jsonl_base, *jsonl_new;
    bool allow_different_trace, require_same_outcomes, all, format_json;
    lmc_threshold *th;
    size_t n_th;
} compare_args;

static void compare_usage(FILE *out)
{
    fprintf(out,
            "usage: " CMD " [--help] BASE.json NEW.json [options]\n\n"
            "Compare two replay results (trace replay --format json, or its\n"
            "trace_replay_summary.json), or a configuration of a sweep result: check they\n"
            "replayed the same trace, show what differs in config, and the delta of every\n"
            "figure (hit rates, outcome counts, per-op latency, lateness); name the first\n"
            "record whose outcome differs when both carry per-record outcomes.\n"
            "Exit 0: no threshold exceeded; 1: one was; 2: usage error.\n\n"
            "options:\n"
            "  --max-regression FIGURE=LIMIT  fail (exit 1) when FIGURE moves past LIMIT in\n"
            "                      its bad direction; repeatable. FIGURE is a figure's name or\n"
            "                      a pattern with '*' (p99_ms, chunk_hit_rate, ops.*.p99_ms);\n"
            "                      LIMIT is +N or -N, absolute or with %%, + when an increase\n"
            "                      is worse (p99_ms=+10%%), - when a decrease is\n"
            "                      (chunk_hit_rate=-0.01)\n"
            "  --require-same-outcomes  fail (exit 1) when the outcome digests differ\n"
            "  --allow-different-trace  compare results of different (or unknown) traces\n"
            "  --config SEL        in a sweep result, the configuration to compare: its index\n"
            "                      N or FIELD=VALUE[,FIELD=VALUE] (l1_size_gb=4)\n"
            "  --base-config SEL, --new-config SEL  the same, for one side\n"
            "  --jsonl BASE NEW    the per-record outcome files (default: each result's\n"
            "                      outputs.jsonl, from trace replay --jsonl-out)\n"
            "  --all               list every figure, equal ones too\n"
            "  --format F          terminal (default) or json\n");
}

static int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, CMD ": ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n\n");
    compare_usage(stderr);
    return 2;
}

static void args_free(compare_args *a)
{
    for (size_t i = 0; i < a->n_th; i++)
        lmc_threshold_free(&a->th[i]);
    free(a->th);
}

/* 0, or 2 after a message. */
static int parse_compare(int argc, char **argv, compare_args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        bool m;
        if (strcmp(arg, "--allow-different-trace") == 0) {
            a->allow_different_trace = true;
        } else if (strcmp(arg, "--require-same-outcomes") == 0) {
            a->require_same_outcomes = true;
        } else if (strcmp(arg, "--all") == 0) {
            a->all = true;
        } else if (strcmp(arg, "--jsonl") == 0) {
            if (i + 2 >= argc || argv[i + 1][0] == '\0' || argv[i + 2][0] == '\0')
                return usage_error("%s needs two files: BASE.jsonl NEW.jsonl", arg);
            a->jsonl_base = argv[++i];
            a->jsonl_new = argv[++i];
        } else if ((v = lmc_flag_value("--max-regression", argc, argv, &i, &m)) || m) {
            if (v == NULL)
                return usage_error("%s needs a value", "--max-regression");
            lmc_threshold *nt = realloc(a->th, (a->n_th + 1) * sizeof(*nt));
            if (nt == NULL) {
                fprintf(stderr, CMD ": out of memory\n");
                return 2;
            }
            a->th = nt;
            lmc_error err;
            if (lmc_threshold_parse(v, &a->th[a->n_th], &err) != LMC_OK) {
                fprintf(stderr, CMD ": %s\n", err.msg);
                return 2;
            }
            a->n_th++;
        } else if ((v = lmc_flag_value("--config", argc, argv, &i, &m)) || m) {
            if (v == NULL || v[0] == '\0')
                return usage_error("%s needs a value", "--config");
            a->config = v;
        } else if ((v = lmc_flag_value("--base-config", argc, argv, &i, &m)) || m) {
            if (v == NULL || v[0] == '\0')
                return usage_error("%s needs a value", "--base-config");
            a->base_config = v;
        } else if ((v = lmc_flag_value("--new-config", argc, argv, &i, &m)) || m) {
            if (v == NULL || v[0] == '\0')
                return usage_error("%s needs a value", "--new-config");
            a->new_config = v;
        } else if ((v = lmc_flag_value("--format", argc, argv, &i, &m)) || m) {
            if (v == NULL)
                return usage_error("%s needs a value", "--format");
            if (strcmp(v, "json") == 0)
                a->format_json = true;
            else if (strcmp(v, "terminal") != 0)
                return usage_error("--format: '%s' is not one of terminal, json", v);
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return usage_error("unknown option '%s'", arg);
        } else if (a->base == NULL) {
            a->base = arg;
        } else if (a->new_ == NULL) {
            a->new_ = arg;
        } else {
            return usage_error("unexpected argument '%s'", arg);
        }
    }
    if (a->new_ == NULL)
        return usage_error("%s", "two result files are required: BASE.json NEW.json");
    return 0;
}

/*
 * The first divergent record, into *d; *note says why there is none, or
 * what is missing from it (malloc'd, or NULL). 2 when --jsonl files given
 * by the user cannot be compared (message printed), else 0.
 */
static int find_divergence(const compare_args *a, const lmc_compare *c, lmc_divergence *d,
                           bool *searched, char **note)
{
    *searched = false;
    *note = NULL;
    char buf[1200];
    const char *jb = a->jsonl_base, *jn = a->jsonl_new;
    char *rb = NULL, *rn = NULL;
    if (jb == NULL) {
        jb = lmc_cmp_side_string(c->base, "outputs.jsonl");
        jn = lmc_cmp_side_string(c->new_, "outputs.jsonl");
        if (jb == NULL || jn == NULL) {
            snprintf(buf, sizeof(buf),
                     "%s per-record outcomes: replay with --jsonl-out PATH (or give --jsonl "
                     "BASE NEW) to find it",
                     jb == NULL && jn == NULL ? "neither result carries"
                     : jb == NULL             ? "the base result carries no"
                                              : "the new result carries no");
            *note = strdup(buf);
            return 0;
        }
        jb = rb = lmc_cmp_side_resolve(c->base, jb);
        jn = rn = lmc_cmp_side_resolve(c->new_, jn);
    }
    int rc = 0;
    lmc_error err;
    if (jb == NULL || jn == NULL) {
        *note = strdup("out of memory");
    } else if (lmc_divergence_find(jb, jn, d, &err) != LMC_OK) {
        if (a->jsonl_base != NULL) {
            fprintf(stderr, CMD ": --jsonl: %s\n", err.msg);
            rc = 2;
        } else {
            *note = strdup(err.msg);
        }
    } else {
        *searched = true;
    }
    free(rb);
    free(rn);
    if (rc != 0 || !*searched || !d->found)
        return rc;

    /* The JSONL holds no keys: the trace does, if it is still the one replayed. */
    const char *tp = lmc_cmp_side_string(c->base, "trace.path");
    const char *want = lmc_cmp_side_string(c->base, "trace.digest");
    char *path = tp != NULL ? lmc_cmp_side_resolve(c->base, tp) : NULL;
    char got[LMC_TRACE_DIGEST_HEX_LEN + 1];
    if (path == NULL) {
        *note = strdup("the base result names no trace file: its keys are not shown");
    } else if (lmc_trace_file_digest(path, got, &err) != LMC_OK) {
        snprintf(buf, sizeof(buf), "keys not shown: %s", err.msg);
        *note = strdup(buf);
    } else if (want == NULL || strcmp(got, want) != 0) {
        snprintf(buf, sizeof(buf),
                 "keys not shown: trace file '%s' is not the one replayed (its digest differs)",
                 path);
        *note = strdup(buf);
    } else if (lmc_divergence_read_key(d, path, &err) != LMC_OK) {
        snprintf(buf, sizeof(buf), "keys not shown: %s", err.msg);
        *note = strdup(buf);
    }
    free(path);
    return 0;
}

int lmc_cmd_trace_compare(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            compare_usage(stdout);
            return 0;
        }
    }
    compare_args a;
    lmc_cmp_side base = {.index = -1}, new_ = {.index = -1};
    lmc_compare c = {0};
    lmc_divergence d = {0};
    char *note = NULL;
    lmc_error err;
    int rc = parse_compare(argc, argv, &a);
    if (rc != 0)
        goto out;
    rc = 2;
    /* --config applies to whichever input is a sweep; --base-config and --new-config must. */
    if (lmc_cmp_side_load(a.base, a.base_config ? a.base_config : a.config, a.base_config != NULL,
                          &base, &err) != LMC_OK ||
        lmc_cmp_side_load(a.new_, a.new_config ? a.new_config : a.config, a.new_config != NULL,
                          &new_, &err) != LMC_OK) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        goto out;
    }
    if (lmc_compare_run(&base, &new_, a.th, a.n_th, &c, &err) != LMC_OK) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        goto out;
    }
    c.require_same_outcomes = a.require_same_outcomes;
    if (c.trace != LMC_CMP_TRACE_SAME && !a.allow_different_trace) {
        const char *da = lmc_cmp_side_string(&base, "trace.digest");
        const char *dn = lmc_cmp_side_string(&new_, "trace.digest");
        if (c.trace == LMC_CMP_TRACE_DIFFERENT)
            fprintf(stderr,
                    CMD ": the results replayed different traces (trace.digest %s and %s); "
                        "--allow-different-trace compares them anyway\n",
                    da, dn);
        else
            fprintf(stderr,
                    CMD ": cannot tell whether the results replayed the same trace: %s has "
                        "no trace.digest (a result of an older lmcache, or of a trace read "
                        "from a pipe); --allow-different-trace compares them anyway\n",
                    da == NULL ? a.base : a.new_);
        goto out;
    }
    bool searched = false;
    if (!c.digests_equal && find_divergence(&a, &c, &d, &searched, &note) != 0)
        goto out;
    lmc_compare_report_opts o = {.all = a.all, .div = searched ? &d : NULL, .div_note = note};
    char *text = a.format_json ? lmc_compare_report_json(&c, &o) : lmc_compare_report_table(&c, &o);
    if (text == NULL) {
        fprintf(stderr, CMD ": out of memory\n");
        goto out;
    }
    fputs(text, stdout);
    free(text);
    rc = lmc_compare_exit_status(&c);

out:
    free(note);
    lmc_divergence_free(&d);
    lmc_compare_free(&c);
    lmc_cmp_side_free(&base);
    lmc_cmp_side_free(&new_);
    args_free(&a);
    return rc;
}
