/*
 * cmd_analyze.c -- `lmcache trace analyze FILE`: what a trace's workload
 * is and how much L1 it needs under LRU, from the trace alone, in one pass
 * (analyze/analyze.h), printed as a table or JSON and written as CSV files
 * and an HTML report (analyze/output.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/analyze.h"
#include "analyze/output.h"
#include "cli.h"
#include "trace/file_digest.h"
#include "core/flags.h"
#include "core/strbuf.h"
#include "report/html.h"

#define MAX_SIZES 64
#define GIB 1073741824.0

typedef struct analyze_args {
    const char *path;
    bool format_json;
    bool quiet;
    const char *output;
    const char *csv_dir;
    const char *html;
    double sample_rate; /* 0: automatic */
    uint64_t sizes[MAX_SIZES];
    size_t n_sizes;
} analyze_args;

static void analyze_usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache trace analyze [--help] FILE [options]\n\n"
            "What the trace's workload is, from the trace alone, in one pass: requests\n"
            "(lookups), keys looked up, unique keys, footprint, per model and cache_salt; the\n"
            "recording's own hit rate; request and key rates over time; reuse distances;\n"
            "and the exact LRU miss-ratio curve (chunk hit rate against L1 capacity).\n\n"
            "options:\n"
            "  --sizes GIB,...     also evaluate the curve at these L1 sizes (GiB, > 0)\n"
            "  --sample R          auto (default: exact up to 2 GiB of trace, then sampled),\n"
            "                      exact, or a key sampling rate in (0, 1] (SHARDS: the curve\n"
            "                      gets error bounds, unique keys and footprint are estimates)\n"
            "  --format F          terminal (default) or json, for the result on stdout\n"
            "  --output PATH       also save the result (in --format) to PATH\n"
            "  --csv DIR           write mrc.csv, reuse.csv and rates.csv into DIR (made if\n"
            "                      missing; its parent must exist)\n"
            "  --html PATH         write a self-contained HTML report to PATH\n"
            "  -q, --quiet         do not print the result\n");
}

/* "0.25,0.5,1" in GiB into bytes. 0, or 2 with the message printed. */
static int parse_sizes(const char *text, analyze_args *a)
{
    const char *p = text;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof(item)) {
            fprintf(stderr, "lmcache trace analyze: --sizes: '%s' is not a list of sizes in GiB\n",
                    text);
            return 2;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        double gib;
        lmc_error err;
        if (lmc_flag_parse_double("--sizes", item, &gib, &err) != LMC_OK || !isfinite(gib) ||
            gib <= 0 || gib * GIB >= 1.8e19) {
            fprintf(stderr, "lmcache trace analyze: --sizes: '%s' is not a size in GiB (> 0)\n",
                    item);
            return 2;
        }
        if (a->n_sizes == MAX_SIZES) {
            fprintf(stderr, "lmcache trace analyze: --sizes: at most %d sizes\n", MAX_SIZES);
            return 2;
        }
        a->sizes[a->n_sizes++] = (uint64_t)llround(gib * GIB);
        p += len + (comma ? 1 : 0);
        if (comma && *p == '\0') {
            fprintf(stderr, "lmcache trace analyze: --sizes: '%s' ends in a comma\n", text);
            return 2;
        }
    }
    return 0;
}

static int parse_sample(const char *v, analyze_args *a)
{
    if (strcmp(v, "auto") == 0) {
        a->sample_rate = 0;
        return 0;
    }
    if (strcmp(v, "exact") == 0) {
        a->sample_rate = 1;
        return 0;
    }
    double r;
    if (lmc_flag_parse_double("--sample", v, &r, NULL) != LMC_OK || !(r > 0 && r <= 1)) {
        fprintf(stderr,
                "lmcache trace analyze: --sample: '%s' is not auto, exact or a rate in (0, 1]\n",
                v);
        return 2;
    }
    a->sample_rate = r;
    return 0;
}

/* One of analyze's flags (cli.h's lmc_cli_flag_fn). */
static int analyze_flag(const char *arg, int argc, char **argv, int *i, void *ctx)
{
    analyze_args *a = ctx;
    bool m;
    const char *v;
    if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
        a->quiet = true;
    } else if ((v = lmc_flag_value("--sizes", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("analyze", arg);
        if (parse_sizes(v, a) != 0)
            return 2;
    } else if ((v = lmc_flag_value("--sample", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("analyze", arg);
        if (parse_sample(v, a) != 0)
            return 2;
    } else if ((v = lmc_flag_value("--format", argc, argv, i, &m)) || m) {
        if (lmc_cli_parse_format("analyze", v, &a->format_json) != 0)
            return 2;
    } else if ((v = lmc_flag_value("--output", argc, argv, i, &m)) || m ||
               (v = lmc_flag_value("--csv", argc, argv, i, &m)) || m ||
               (v = lmc_flag_value("--html", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("analyze", arg);
        const char **slot = strncmp(arg, "--output", 8) == 0 ? &a->output
                            : strncmp(arg, "--csv", 5) == 0  ? &a->csv_dir
                                                             : &a->html;
        *slot = v;
    } else {
        return 0;
    }
    return 1;
}

/* The --csv directory: made when missing (one level). 0, or 1 with the message printed. */
static int csv_dir_ready(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    if (mkdir(dir, 0755) == 0)
        return 0;
    fprintf(stderr, "lmcache trace analyze: --csv: cannot create '%s': %s\n", dir, strerror(errno));
    return 1;
}

int lmc_cmd_trace_analyze(int argc, char **argv)
{
    analyze_args a;
    memset(&a, 0, sizeof(a));
    int rc;
    if (!lmc_cli_parse_trace_args("analyze", argc, argv, analyze_flag, &a, analyze_usage, &a.path,
                                  &rc))
        return rc;
    if (a.csv_dir != NULL && csv_dir_ready(a.csv_dir) != 0)
        return 1;

    lmc_analyze_options o = {
        .full = true, .sample_rate = a.sample_rate, .sizes = a.sizes, .n_sizes = a.n_sizes};
    lmc_analyze_result res;
    lmc_error err;
    if (lmc_analyze_file(a.path, &o, &res, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace analyze: %s\n", err.msg);
        return 1;
    }
    rc = 0;
    /* The digest replay results carry (trace.digest), so the two name a trace alike. */
    char digest[LMC_TRACE_DIGEST_HEX_LEN + 1] = "";
    if (lmc_trace_file_digest(a.path, digest, &err) != LMC_OK)
        fprintf(stderr, "lmcache trace analyze: warning: no digest: %s\n", err.msg);
    struct stat st;
    char *command = lmc_cli_command_line(argc, argv);
    lmc_analyze_source src = {.path = a.path,
                              .digest = digest,
                              .file_bytes = stat(a.path, &st) == 0 ? (uint64_t)st.st_size : 0,
                              .command = command};
    char *text = a.format_json ? lmc_analyze_format_json(&src, &res)
                               : lmc_analyze_format_terminal(&src, &res);
    if (text == NULL) {
        fprintf(stderr, "lmcache trace analyze: out of memory\n");
        rc = 1;
        goto out;
    }
    if (!a.quiet)
        fputs(text, stdout);
    if (a.output != NULL)
        rc |= lmc_cli_save("analyze", a.output, "--output", text);
    free(text);
    if (a.csv_dir != NULL && lmc_analyze_write_csv(a.csv_dir, &res, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace analyze: --csv: %s\n", err.msg);
        rc = 1;
    }
    if (a.html != NULL) {
        char *html = lmc_analyze_format_html(&src, &res);
        if (html == NULL) {
            fprintf(stderr, "lmcache trace analyze: out of memory\n");
            rc = 1;
        } else {
            rc |= lmc_cli_save("analyze", a.html, "--html", html);
            free(html);
        }
    }
    if (res.truncated)
        fprintf(stderr,
                "lmcache trace analyze: warning: '%s' ends in a truncated record; the figures "
                "cover the complete records\n",
                a.path);
out:
    free(command);
    lmc_analyze_result_free(&res);
    return rc;
}
