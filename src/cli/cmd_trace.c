/*
 * cmd_trace.c -- `lmcache trace info|replay|record`.
 *
 * info reads a whole trace (t_mono and qualname of each record only) and
 * prints its header, per-qualname counts and duration in LMCache's layout
 * (spec/trace-format.md section 8.2), or with --config the recorded
 * StorageManager config. replay runs the replay driver (N times with
 * --repeat) and writes the outputs of replay/output.h; it checks every
 * output path and warns about a reused fs L2 base_path before the first
 * record, stops at the next record on Ctrl-C (writing the partial result,
 * exit 130), and on a terminal draws a progress bar that follows the
 * trace's clock. record only points at the server flag, as the seed's stub
 * does.
 *
 * Threads: the replay runs on the calling thread; the progress bar has its
 * own ("replay-bar"), which shares the terminal line with log lines under
 * one mutex.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/output.h"
#include "cli.h"
#include "core/clock.h"
#include "core/escape.h"
#include "core/flags.h"
#include "core/json.h"
#include "core/log.h"
#include "core/names.h"
#include "core/strmap.h"
#include "core/text.h"
#include "l2/adapter.h"
#include "replay/driver.h"
#include "replay/output.h"
#include "replay/repeat.h"
#include "replay/series.h"
#include "storage/config.h"
#include "trace/marker.h"
#include "trace/reader.h"
#include "trace/recorder.h"

/* ---------------------------------------------------------------------- */
/* Reading a whole trace (info, and replay's progress)                     */
/* ---------------------------------------------------------------------- */

/*
 * The ops of a trace, counted per qualname in a hash map (a trace may hold
 * any number of distinct names, NUL bytes and all) and printed sorted by
 * their bytes, which for UTF-8 is Python's order of str.
 */
typedef struct op_row {
    const char *q;
    size_t len;
    uint64_t count;
} op_row;

static int cmp_op(const void *a, const void *b)
{
    const op_row *x = a, *y = b;
    int c = memcmp(x->q, y->q, x->len < y->len ? x->len : y->len);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* One pass over a trace's records (t_mono and qualname only). */
typedef struct trace_scan {
    uint64_t total;   /* records, markers (trace/marker.h) excluded */
    uint64_t dropped; /* the marker's dropped_count */
    bool has_dropped; /* the trace has a marker */
    double duration;  /* the largest record t_mono */
    bool truncated;
} trace_scan;

/*
 * Scan an open reader to its end, counting records per qualname into ops
 * (NULL: not counted) and feeding every record to keys (NULL: none; the
 * analysis decodes the lookups' args itself). -1 when memory runs out.
 */
static int scan_records(lmc_trace_reader *rd, lmc_strmap *ops, trace_scan *out, lmc_analyze *keys)
{
    memset(out, 0, sizeof(*out));
    double t_mono;
    const char *q;
    size_t qlen;
    lmc_trace_record rec;
    while (lmc_trace_reader_next_record(rd, &rec) == LMC_OK) {
        t_mono = rec.t_mono;
        q = rec.qualname;
        qlen = rec.qualname_len;
        if (qlen == strlen(LMC_TRACE_DROPPED_QUALNAME) &&
            memcmp(q, LMC_TRACE_DROPPED_QUALNAME, qlen) == 0) {
            out->has_dropped = true;
            lmc_trace_reader_add_dropped_count(rd, &out->dropped);
            continue;
        }
        if (lmc_trace_marker_find(q, qlen) != NULL)
            continue; /* a tool's note about the trace (trace/marker.h), not an operation */
        if (t_mono > out->duration && isfinite(t_mono))
            out->duration = t_mono;
        out->total++;
        uint64_t *n = ops != NULL ? lmc_strmap_slot(ops, q, qlen, NULL) : NULL;
        if (ops != NULL && n == NULL)
            return -1;
        if (n != NULL)
            (*n)++;
        /* Last: decoding the record's args replaces q's copy of the qualname. */
        if (keys != NULL && lmc_analyze_record(keys, rd, &rec, NULL) != LMC_OK)
            return -1;
    }
    out->truncated = lmc_trace_reader_truncated(rd);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* info                                                                    */
/* ---------------------------------------------------------------------- */

/* A row of LMCache's layout; both parts may come from the trace, so both are escaped. */
static void row(const char *label, const char *value)
{
    char *l = lmc_escape_dup(label, strlen(label), 0);
    char *v = lmc_escape_dup(value, strlen(value), 0);
    size_t n = l != NULL ? strlen(l) + 1 : 0;
    printf("  %s:%*s%s\n", l != NULL ? l : "?", n < 28 ? (int)(28 - n) : 0, "",
           v != NULL ? v : "?");
    free(l);
    free(v);
}

static void info_usage(FILE *out)
{
    fprintf(out, "usage: lmcache trace info [--help] [--config] [--format terminal|json] FILE\n\n"
                 "Print a trace's header fields, per-operation record counts, total records,\n"
                 "duration (the largest record t_mono), and the unique keys looked up and their\n"
                 "footprint (the cheap summary of `lmcache trace analyze`). FILE may be a pipe\n"
                 "(/dev/stdin): it is read once. A record is counted exactly when LMCache's\n"
                 "reader would yield it; frames it would reject are counted as malformed.\n\n"
                 "options:\n"
                 "  --config    print only the recorded StorageManager config (JSON, indent 2)\n"
                 "  --format F  terminal (default) or json\n");
}

/* The header's config JSON, indented; 1 when the trace has none. */
static int print_config(const char *path, const lmc_trace_header *h)
{
    const char *text = h->sm_config_json;
    if (text == NULL || text[0] == '\0') {
        fprintf(stderr, "lmcache trace info: '%s' has no recorded StorageManager config\n", path);
        return 1;
    }
    lmc_json *v = NULL;
    char *pretty = NULL;
    if (lmc_json_parse(text, strlen(text), &v, NULL) == LMC_OK)
        pretty = lmc_json_dumps(v, 0, 2, NULL);
    printf("%s\n", pretty != NULL ? pretty : text); /* as recorded when it is not JSON */
    free(pretty);
    lmc_json_free(v);
    return 0;
}

/* The unique keys and footprint rows, after LMCache's block. */
static void info_keys_rows(const lmc_analyze_result *k)
{
    char buf[160], a[32], b[32];
    const char *est = k->estimated ? "~" : "";
    snprintf(buf, sizeof(buf), "%llu (%llu keys)", (unsigned long long)k->requests,
             (unsigned long long)k->keys);
    row("lookups", buf);
    snprintf(buf, sizeof(buf), "%s%llu", est, (unsigned long long)k->unique_keys);
    row("unique_keys", buf);
    lmc_analyze_fmt_bytes(k->footprint_bytes, a, sizeof(a));
    lmc_analyze_fmt_bytes(k->min_object_bytes, b, sizeof(b));
    snprintf(buf, sizeof(buf), "%s%llu bytes (%s; objects of %s%s)", est,
             (unsigned long long)k->footprint_bytes, a, b,
             k->max_object_bytes != k->min_object_bytes ? " and more" : "");
    row("footprint", buf);
    if (k->estimated) {
        snprintf(buf, sizeof(buf), "keys sampled at rate %.4g (the file is over 2 GiB)",
                 k->sample_rate);
        row("estimates", buf);
    }
}

/*
 * `trace info --format json`: {"schema": "lmcache.trace_info", ...} (docs/cli.md).
 * NULL when memory runs out.
 */
static char *info_json(const char *path, const lmc_trace_header *h, double duration, uint64_t total,
                       bool has_dropped, uint64_t dropped, uint64_t malformed,
                       const op_row *ops, size_t n_ops, bool truncated,
                       const lmc_analyze_result *k)
{
    lmc_json *o = lmc_json_object();
    lmc_status st = lmc_json_object_set(o, "schema", lmc_json_string("lmcache.trace_info"));
    st |= lmc_json_object_set(o, "schema_version", lmc_json_int(1));
    lmc_json *tool = lmc_json_object();
    st |= lmc_json_object_set(tool, "name", lmc_json_string("lmcache"));
    st |= lmc_json_object_set(tool, "version", lmc_json_string(LMC_VERSION));
    st |= lmc_json_object_set(o, "tool", tool);
    st |= lmc_json_object_set(o, "path", lmc_json_string(path));
    lmc_json *hd = lmc_json_object();
    st |= lmc_json_object_set(hd, "level", lmc_json_string(h->level));
    st |= lmc_json_object_set(hd, "format_version", lmc_json_int(h->format_version));
    st |= lmc_json_object_set(hd, "trace_schema_version", lmc_json_int(h->trace_schema_version));
    st |= lmc_json_object_set(hd, "t_mono_start", lmc_json_float(h->t_mono_start));
    st |= lmc_json_object_set(hd, "t_wall_start", lmc_json_float(h->t_wall_start));
    st |= lmc_json_object_set(hd, "sm_config_digest",
                              h->sm_config_digest[0] ? lmc_json_string(h->sm_config_digest)
                                                     : lmc_json_null());
    lmc_json *meta = lmc_json_object();
    for (size_t i = 0; i < h->n_meta; i++)
        st |= lmc_json_object_set(meta, h->meta_keys[i], lmc_json_string(h->meta_values[i]));
    st |= lmc_json_object_set(hd, "level_meta", meta);
    st |= lmc_json_object_set(o, "header", hd);
    st |= lmc_json_object_set(o, "duration_s", lmc_json_float(duration));
    st |= lmc_json_object_set(o, "total_records", lmc_json_int((int64_t)total));
    st |= lmc_json_object_set(o, "dropped_records",
                              has_dropped ? lmc_json_int((int64_t)dropped) : lmc_json_null());
    st |= lmc_json_object_set(o, "malformed_records", lmc_json_int((int64_t)malformed));
    st |= lmc_json_object_set(o, "truncated", lmc_json_bool(truncated));
    lmc_json *counts = lmc_json_object();
    for (size_t i = 0; i < n_ops; i++)
        st |= lmc_json_object_set(counts, ops[i].q, lmc_json_int((int64_t)ops[i].count));
    st |= lmc_json_object_set(o, "ops", counts);
    lmc_json *keys = lmc_json_object();
    st |= lmc_json_object_set(keys, "requests", lmc_json_int((int64_t)k->requests));
    st |= lmc_json_object_set(keys, "keys_looked_up", lmc_json_int((int64_t)k->keys));
    st |= lmc_json_object_set(keys, "unique_keys", lmc_json_int((int64_t)k->unique_keys));
    st |= lmc_json_object_set(keys, "footprint_bytes", lmc_json_int((int64_t)k->footprint_bytes));
    st |= lmc_json_object_set(keys, "object_bytes_min", lmc_json_int((int64_t)k->min_object_bytes));
    st |= lmc_json_object_set(keys, "object_bytes_max", lmc_json_int((int64_t)k->max_object_bytes));
    st |= lmc_json_object_set(keys, "estimated", lmc_json_bool(k->estimated));
    st |= lmc_json_object_set(keys, "sample_rate", lmc_json_float(k->sample_rate));
    st |= lmc_json_object_set(o, "keys", keys);
    char *text = NULL;
    size_t len;
    if (st == LMC_OK && (text = lmc_json_dumps(o, 0, 2, &len)) != NULL) {
        char *t = realloc(text, len + 2);
        if (t == NULL) {
            free(text);
            text = NULL;
        } else {
            text = t;
            memcpy(text + len, "\n", 2);
        }
    }
    lmc_json_free(o);
    return text;
}

static int cmd_trace_info(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    bool config_only = false;
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            info_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--config") == 0) {
            config_only = true;
            continue;
        }
        bool m;
        const char *v = lmc_flag_value("--format", argc, argv, &i, &m);
        if (m) {
            if (lmc_cli_parse_format("info", v, &json) != 0)
                return 2;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "lmcache trace info: unknown option '%s'\n\n", argv[i]);
            info_usage(stderr);
            return 2;
        }
        if (path != NULL) {
            fprintf(stderr, "lmcache trace info: unexpected argument '%s'\n\n", argv[i]);
            info_usage(stderr);
            return 2;
        }
        path = argv[i];
    }
    if (path == NULL) {
        fprintf(stderr, "lmcache trace info: a trace FILE is required\n\n");
        info_usage(stderr);
        return 2;
    }

    lmc_trace_reader *rd;
    lmc_error err;
    if (lmc_trace_reader_open(path, &rd, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace info: %s\n", err.msg);
        return 1;
    }
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    if (config_only) {
        int rc = print_config(path, h);
        lmc_trace_reader_close(rd);
        return rc;
    }
    lmc_strmap *ops = lmc_strmap_create();
    op_row *rows = NULL;
    trace_scan sc;
    int rc = 0;
    /* The unique keys and footprint come from the same pass (the analysis's summary). */
    struct stat st;
    lmc_analyze_options ko = {.file_bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0};
    lmc_analyze *keys = NULL;
    lmc_analyze_result kr;
    memset(&kr, 0, sizeof(kr));
    if (ops == NULL || lmc_analyze_create(&ko, &keys, &err) != LMC_OK ||
        scan_records(rd, ops, &sc, keys) != 0 || lmc_analyze_result_get(keys, &kr, &err) != LMC_OK)
        rc = 1;
    size_t n_ops = ops != NULL ? lmc_strmap_size(ops) : 0;
    if (rc == 0 && n_ops > 0 && (rows = calloc(n_ops, sizeof(*rows))) == NULL)
        rc = 1;
    if (rc != 0) {
        fprintf(stderr, "lmcache trace info: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < n_ops; i++) {
        rows[i].q = lmc_strmap_key_at(ops, i, &rows[i].len);
        rows[i].count = lmc_strmap_value_at(ops, i);
    }
    if (n_ops > 0) /* rows stays NULL when there are none */
        qsort(rows, n_ops, sizeof(*rows), cmp_op);
    if (json) {
        char *text = info_json(path, h, sc.duration, sc.total, sc.has_dropped, sc.dropped,
                               lmc_trace_reader_malformed(rd), rows, n_ops, sc.truncated, &kr);
        if (text == NULL) {
            fprintf(stderr, "lmcache trace info: out of memory\n");
            rc = 1;
        } else {
            fputs(text, stdout);
            free(text);
        }
        goto done;
    }
    char buf[128];
    char *shown = lmc_escape_dup(path, strlen(path), 0);
    printf("Trace file: %s\n", shown != NULL ? shown : path);
    free(shown);
    row("level", h->level);
    snprintf(buf, sizeof(buf), "%lld", (long long)h->format_version);
    row("format_version", buf);
    snprintf(buf, sizeof(buf), "%lld", (long long)h->trace_schema_version);
    row("trace_schema_version", buf);
    lmc_text_seconds(sc.duration, buf, sizeof(buf) - 1);
    strcat(buf, "s");
    row("duration", buf);
    row("sm_config_digest", h->sm_config_digest[0] ? h->sm_config_digest : "(none)");
    for (size_t i = 0; i < h->n_meta; i++)
        row(h->meta_keys[i], h->meta_values[i]);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)sc.total);
    row("total_records", buf);
    if (sc.has_dropped) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)sc.dropped);
        row("dropped_records", buf);
    }
    if (lmc_trace_reader_malformed(rd) > 0) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lmc_trace_reader_malformed(rd));
        row("malformed_records", buf);
    }
    if (n_ops == 0) {
        printf("  ops: (none)\n");
    } else {
        printf("  ops:\n");
        for (size_t i = 0; i < n_ops; i++) {
            char *e = lmc_escape_dup(rows[i].q, rows[i].len, 0);
            printf("    %s: %llu\n", e != NULL ? e : "?", (unsigned long long)rows[i].count);
            free(e);
        }
    }
    info_keys_rows(&kr);
done:
    if (sc.truncated)
        fprintf(stderr, "lmcache trace info: warning: '%s' ends in a truncated record; the counts "
                        "above cover the complete records\n", path);

out:
    free(rows);
    lmc_strmap_destroy(ops);
    lmc_analyze_result_free(&kr);
    lmc_analyze_destroy(keys);
    lmc_trace_reader_close(rd);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* replay                                                                  */
/* ---------------------------------------------------------------------- */

#define LOG_COMP "replay"
#define MAX_REPEAT 1000

typedef struct replay_args {
    const char *path;
    bool verbose;
    const char *jsonl_out;
    const char *output_dir;
    bool no_csv;
    bool json;
    bool quiet;
    bool format_json;
    const char *output;
    const char *html;
    lmc_cli_replay_flags replay; /* --mode, --pace, --time-scale */
    uint64_t repeat;
    bool clear_l2;
} replay_args;

static void replay_usage(FILE *out)
{
    lmc_cli_replay_choices c = lmc_cli_replay_choices_get();
    fprintf(out,
            "usage: lmcache trace replay [--help] FILE --l1-size-gb GB --eviction-policy P\n"
            "                            [storage-manager flags] [options]\n\n"
            "Replay a trace against a fresh StorageManager built from the flags below,\n"
            "honouring the recorded timing (scaled by --time-scale), and report what every\n"
            "call did (hits, misses and why, L1 and L2 traffic), latency per operation, and\n"
            "an outcome digest.\n\n"
            "options:\n"
            "  --mode M            %s: calls (default) reissues every recorded call;\n"
            "                      engine serves each recorded lookup as a request with the\n"
            "                      server's own logic (read what is found, store the rest) and\n"
            "                      reports the hit rate this configuration gives beside the\n"
            "                      recording's\n"
            "  --time-scale F      multiply the recorded gaps by F (finite, > 0; default 1.0;\n"
            "                      0.5 replays twice as fast); the eviction period follows it\n"
            "  --pace P            %s: realtime (default) keeps the schedule on the wall\n"
            "                      clock; virtual runs the StorageManager in virtual time, as\n"
            "                      fast as the host allows, with the same result every run\n"
            "  --repeat N          replay N times (1..%d) and report the median and spread\n"
            "                      of each figure and every run's outcome digest\n"
            "  --clear-l2          first remove the objects an fs L2 adapter's base_path\n"
            "                      holds (only files the adapter writes)\n"
            "  --verbose           print one line per record to stdout\n"
            "  --jsonl-out PATH    write one JSON object per record (with its outcome) to PATH\n"
            "  --output-dir DIR    where trace_replay_ops.csv, trace_replay_outcomes.csv and\n"
            "                      trace_replay_summary.json go (default .)\n"
            "  --no-csv            do not write the two CSV files\n"
            "  --json              also write trace_replay_summary.json\n"
            "  --format F          terminal (default) or json, for the result on stdout\n"
            "  --output PATH       also save the result (in --format) to PATH\n"
            "  --html PATH         write a self-contained HTML report (latency CDFs, lateness,\n"
            "                      hit rates and L1 usage over time, the result table) to PATH\n"
            "  -q, --quiet         do not print the banner or the result\n\n"
            "storage-manager flags:\n",
            c.modes, c.paces, MAX_REPEAT);
    lmc_sm_config_print_help(out);
}

/*
 * LMCache's observability flags (add_observability_args), which its `trace
 * replay` takes too: accepted, so that a recorded command line can be
 * reused, and ignored. --enable-extra-logging and --extra-logging-interval
 * are storage-manager flags here (they are EvictionConfig fields of the
 * config JSON).
 */
static const struct ignored_def {
    const char *name;
    bool value; /* takes a value */
} IGNORED_FLAGS[] = {
    {"--disable-observability", false},
    {"--disable-metrics", false},
    {"--disable-grpc-metrics", false},
    {"--disable-logging", false},
    {"--enable-tracing", false},
    {"--otlp-endpoint", true},
    {"--event-bus-queue-size", true},
    {"--prometheus-port", true},
    {"--metrics-sample-rate", true},
    {"--lookup-hash-log-dir", true},
    {"--trace-level", true},
    {"--trace-output", true},
};

/*
 * The ignored flag argv[*i] is (NULL: none), its value past it consumed
 * (*missing when a value flag has none).
 */
static const char *ignored_flag(int argc, char **argv, int *i, const char **v, bool *missing)
{
    *missing = false;
    for (size_t k = 0; k < sizeof(IGNORED_FLAGS) / sizeof(IGNORED_FLAGS[0]); k++) {
        const struct ignored_def *f = &IGNORED_FLAGS[k];
        if (!f->value) {
            if (strcmp(argv[*i], f->name) == 0)
                return f->name;
            continue;
        }
        bool matched;
        *v = lmc_flag_value(f->name, argc, argv, i, &matched);
        if (matched) {
            *missing = *v == NULL;
            return f->name;
        }
    }
    return NULL;
}

/* 0 ok, 2 usage error (message printed). */
typedef struct replay_parse {
    replay_args *a;
    lmc_sm_config *cfg;
    const char *ignored[sizeof(IGNORED_FLAGS) / sizeof(IGNORED_FLAGS[0])];
    size_t n_ignored;
} replay_parse;

/* One of replay's flags, the StorageManager's first (cli.h's lmc_cli_flag_fn). */
static int replay_flag(const char *arg, int argc, char **argv, int *i, void *ctx)
{
    replay_parse *p = ctx;
    replay_args *a = p->a;
    lmc_sm_config *cfg = p->cfg;
    bool m;
    const char *v;
    const char *k;
    lmc_error err;
    bool consumed;
    int r;
    if (lmc_sm_config_parse_arg(cfg, argc, argv, i, &consumed, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
        return 2;
    }
    if (consumed) {
        (*i)--; /* parse_arg advanced past what it used; the caller's loop adds one */
        return 1;
    }
    if (strcmp(arg, "--verbose") == 0) {
        a->verbose = true;
    } else if (strcmp(arg, "--no-csv") == 0) {
        a->no_csv = true;
    } else if (strcmp(arg, "--json") == 0) {
        a->json = true;
    } else if (strcmp(arg, "--clear-l2") == 0) {
        a->clear_l2 = true;
    } else if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
        a->quiet = true;
    } else if ((v = lmc_flag_value("--jsonl-out", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("replay", arg);
        a->jsonl_out = v;
    } else if ((v = lmc_flag_value("--output-dir", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("replay", arg);
        a->output_dir = v;
    } else if ((v = lmc_flag_value("--output", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("replay", arg);
        a->output = v;
    } else if ((v = lmc_flag_value("--html", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value("replay", arg);
        a->html = v;
    } else if ((v = lmc_flag_value("--format", argc, argv, i, &m)) || m) {
        if (lmc_cli_parse_format("replay", v, &a->format_json) != 0)
            return 2;
    } else if ((v = lmc_flag_value("--repeat", argc, argv, i, &m)) || m) {
        if (!v)
            return lmc_cli_missing_value("replay", arg);
        if (lmc_flag_parse_u64("--repeat", v, 1, MAX_REPEAT, &a->repeat, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
            return 2;
        }
    } else if ((r = lmc_cli_parse_replay_flag("replay", arg, argc, argv, i, &a->replay)) != 0) {
        return r;
    } else if ((k = ignored_flag(argc, argv, i, &v, &m)) != NULL) {
        if (m)
            return lmc_cli_missing_value("replay", arg);
        bool listed = false;
        for (size_t j = 0; j < p->n_ignored; j++)
            listed = listed || p->ignored[j] == k;
        if (!listed)
            p->ignored[p->n_ignored++] = k;
    } else {
        return 0;
    }
    return 1;
}

static int parse_replay(int argc, char **argv, replay_args *a, lmc_sm_config *cfg)
{
    memset(a, 0, sizeof(*a));
    a->output_dir = ".";
    a->replay.time_scale = 1.0;
    a->repeat = 1;
    replay_parse p = {.a = a, .cfg = cfg};
    int rc; /* --help never gets here: cmd_trace_replay answers it before building a config */
    if (!lmc_cli_parse_trace_args("replay", argc, argv, replay_flag, &p, replay_usage, &a->path,
                                  &rc))
        return rc;
    if (p.n_ignored > 0) {
        char names[512];
        lmc_names_join(p.ignored, p.n_ignored, ", ", NULL, names, sizeof(names));
        LMC_WARN(LOG_COMP,
                 "ignoring %s: LMCache's observability flags change nothing here (a replay never "
                 "records and has no metrics, tracing or logging subscribers)",
                 names);
    }
    lmc_error err;
    if (lmc_sm_config_finish(cfg, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
        return 2;
    }
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/*
 * The outputs the flags ask for, in the order their results are written:
 * at most --jsonl-out, the two CSVs, the summary JSON, stdout, --output and
 * --html. Every one is opened (and its path checked) before the replay starts.
 */
#define MAX_OUTPUTS 7
typedef struct outputs {
    lmc_replay_output *v[MAX_OUTPUTS];
    size_t n;
    /* The paths written, for the result's "outputs" (empty: not written). */
    char jsonl[PATH_MAX], csv[PATH_MAX], outcomes_csv[PATH_MAX], summary_json[PATH_MAX];
} outputs;

/*
 * Open one output of the format called name: to path (NULL: stdout), or
 * to its default file under dir when path is NULL and dir is not (its path
 * goes to where, when not NULL). flag names the option that gave path. -1
 * when it cannot (message printed).
 */
static int add_output(outputs *o, const char *name, const char *dir, const char *path,
                      const char *flag, char *where)
{
    const lmc_replay_output_format *f = lmc_replay_output_find(name);
    char buf[PATH_MAX];
    if (path == NULL && dir != NULL) {
        snprintf(buf, sizeof(buf), "%s/%s", dir, f->default_file);
        path = buf;
    }
    lmc_error err;
    if (o->n == MAX_OUTPUTS || lmc_replay_output_open(f, path, flag, &o->v[o->n], &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: %s\n",
                o->n == MAX_OUTPUTS ? "too many outputs" : err.msg);
        return -1;
    }
    if (where != NULL && path != NULL)
        snprintf(where, PATH_MAX, "%s", path);
    o->n++;
    return 0;
}

static void outputs_destroy(outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        lmc_replay_output_destroy(o->v[i]);
    o->n = 0;
}

/* Create --output-dir and --jsonl-out's directory, then open every output. -1 on error. */
static int open_outputs(const replay_args *a, outputs *outs)
{
    if (make_dirs(a->output_dir) != 0) {
        fprintf(stderr, "lmcache trace replay: cannot create --output-dir '%s': %s\n",
                a->output_dir, strerror(errno));
        return -1;
    }
    if (a->jsonl_out) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", a->jsonl_out);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            if (make_dirs(dir) != 0) {
                fprintf(stderr, "lmcache trace replay: cannot create '%s': %s\n", dir,
                        strerror(errno));
                return -1;
            }
        }
        if (add_output(outs, "jsonl", NULL, a->jsonl_out, "--jsonl-out", outs->jsonl) != 0)
            return -1;
    }
    const char *result = a->format_json ? "json" : "table";
    if ((!a->no_csv && add_output(outs, "csv", a->output_dir, NULL, NULL, outs->csv) != 0) ||
        (!a->no_csv &&
         add_output(outs, "outcomes-csv", a->output_dir, NULL, NULL, outs->outcomes_csv) != 0) ||
        (a->json &&
         add_output(outs, "summary-json", a->output_dir, NULL, NULL, outs->summary_json) != 0) ||
        (!a->quiet && add_output(outs, result, NULL, NULL, NULL, NULL) != 0) ||
        (a->output && add_output(outs, result, NULL, a->output, "--output", NULL) != 0) ||
        (a->html && add_output(outs, "html", NULL, a->html, "--html", NULL) != 0))
        return -1;
    return 0;
}

/*
 * What the replay thread reports and the progress bar shows. The bar is
 * drawn by its own thread, so that it moves during the trace's idle
 * stretches too; log lines go through a sink that clears the bar first and
 * redraws it after. mu guards the terminal line.
 */
typedef struct progress {
    const replay_args *args;
    outputs *outputs;
    bool record_outputs; /* per-record outputs get this run (the last of a --repeat) */
    lmc_replay_series *series; /* --html: the figures over time of that run; NULL otherwise */
    uint64_t total;
    double schedule_s; /* the trace's last record time, scaled: the realtime replay's length */
    uint64_t run, runs;
    bool bar; /* a one-line progress bar on a terminal */
    pthread_mutex_t mu;
    bool drawn; /* the bar is on the terminal line now (mu) */
    atomic_uint_fast64_t n;
    atomic_uint_fast64_t start_ns;
    atomic_uint_fast64_t last_ns; /* when the last record was reported (0: not yet) */
    atomic_bool stop;
    pthread_t thread;
    bool thread_started;
} progress;

/* One frame of the bar; mu held. The trace's clock sets the fraction and the ETA. */
static void draw_bar_locked(progress *p)
{
    double elapsed = (double)(lmc_mono_ns() - atomic_load(&p->start_ns)) / 1e9;
    uint64_t n = atomic_load(&p->n);
    double frac, eta;
    if (p->schedule_s > 0) {
        frac = elapsed / p->schedule_s;
        eta = p->schedule_s - elapsed;
    } else {
        frac = p->total ? (double)n / (double)p->total : 1.0;
        eta = n > 0 && elapsed > 0 ? (double)(p->total - n) * elapsed / (double)n : 0.0;
    }
    if (frac > 1.0)
        frac = 1.0;
    if (eta < 0)
        eta = 0;
    int width = 30, fill = (int)(frac * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = '\0';
    char run[32] = "";
    if (p->runs > 1)
        snprintf(run, sizeof(run), " run %llu/%llu", (unsigned long long)p->run,
                 (unsigned long long)p->runs);
    uint64_t last = atomic_load(&p->last_ns);
    if (last != 0) {
        /* Every record is out: what runs now is the drain (L2 stores, prefetches). */
        memset(bar, '=', (size_t)width);
        fprintf(stderr, "\r[%s] %llu/%llu rec, finishing L2 work %.1fs%s\033[K", bar,
                (unsigned long long)n, (unsigned long long)p->total,
                (double)(lmc_mono_ns() - last) / 1e9, run);
    } else {
        char when[48];
        if (p->schedule_s > 0)
            snprintf(when, sizeof(when), "%.1f/%.1fs", elapsed, p->schedule_s);
        else
            snprintf(when, sizeof(when), "%.1fs", elapsed);
        fprintf(stderr, "\r[%s] %5.1f%% %s %llu/%llu rec ETA %.0fs%s\033[K", bar, frac * 100.0,
                when, (unsigned long long)n, (unsigned long long)p->total, eta, run);
    }
    fflush(stderr);
    p->drawn = true;
}

static void *bar_thread(void *arg)
{
    progress *p = arg;
    pthread_setname_np(pthread_self(), "replay-bar");
    while (!atomic_load(&p->stop)) {
        pthread_mutex_lock(&p->mu);
        draw_bar_locked(p);
        pthread_mutex_unlock(&p->mu);
        lmc_sleep_ns(200 * 1000 * 1000);
    }
    return NULL;
}

/* A log line above the bar: clear the bar's line, write the line, draw the bar again. */
static void bar_log_sink(lmc_log_level level, const char *comp, const char *msg, void *ud)
{
    progress *p = ud;
    char line[2300];
    size_t n = lmc_log_format_line(line, sizeof(line), level, comp, msg);
    pthread_mutex_lock(&p->mu);
    if (p->drawn)
        fputs("\r\033[K", stderr);
    fwrite(line, 1, n, stderr);
    p->drawn = false;
    draw_bar_locked(p);
    pthread_mutex_unlock(&p->mu);
}

static void progress_start(progress *p)
{
    atomic_store(&p->n, 0);
    atomic_store(&p->start_ns, lmc_mono_ns());
    atomic_store(&p->last_ns, 0);
    if (!p->bar)
        return;
    atomic_store(&p->stop, false);
    lmc_log_set_sink(bar_log_sink, p);
    p->thread_started = pthread_create(&p->thread, NULL, bar_thread, p) == 0;
}

static void progress_stop(progress *p)
{
    if (!p->bar)
        return;
    atomic_store(&p->stop, true);
    if (p->thread_started)
        pthread_join(p->thread, NULL);
    p->thread_started = false;
    lmc_log_set_sink(NULL, NULL);
    pthread_mutex_lock(&p->mu);
    if (p->drawn) {
        draw_bar_locked(p);
        fputc('\n', stderr);
        p->drawn = false;
    }
    pthread_mutex_unlock(&p->mu);
}

static void on_record(const lmc_replay_record_view *rec, void *ud)
{
    progress *p = ud;
    atomic_store(&p->n, rec->index);
    if (rec->index == p->total)
        atomic_store(&p->last_ns, lmc_mono_ns());
    if (p->args->verbose) {
        /* The qualname comes from the trace: escaped before it reaches a terminal. */
        char *q = lmc_escape_dup(rec->qualname, strlen(rec->qualname), 0);
        printf("  [%llu/%llu]  %-4s  %8.3fms  %s\n", (unsigned long long)rec->index,
               (unsigned long long)p->total, rec->failed ? "FAIL" : "OK", rec->latency_s * 1000.0,
               q != NULL ? q : "?");
        free(q);
    }
    if (p->record_outputs)
        for (size_t i = 0; i < p->outputs->n; i++)
            lmc_replay_output_record(p->outputs->v[i], rec);
    if (p->series != NULL && p->record_outputs)
        (void)lmc_replay_series_record(p->series, rec); /* out of memory: a gap in the charts */
}

static void on_l1_usage(double t_mono, uint64_t used, uint64_t capacity, void *ud)
{
    progress *p = ud;
    if (p->record_outputs)
        (void)lmc_replay_series_l1_usage(p->series, t_mono, used, capacity);
}

static void print_banner(lmc_replay_pace pace, lmc_replay_mode mode)
{
    const char *bold = isatty(STDERR_FILENO) ? "\033[1;33m" : "";
    const char *reset = isatty(STDERR_FILENO) ? "\033[0m" : "";
    char bar[79];
    memset(bar, '=', 78);
    bar[78] = '\0';
    fprintf(stderr,
            "\n%s%s\n  !! REPLAY ENVIRONMENT MISMATCH MAY CAUSE RETRIEVE MISSES !!\n%s%s\n"
            "  * The replay's StorageManager is built from the flags given here, not from\n"
            "    the trace; the config digest row says whether they match the recording.\n"
            "%s%s"
            "%s%s%s\n",
            bold, bar, bar, reset,
            pace == LMC_REPLAY_PACE_VIRTUAL
                ? "  * Virtual time (--pace virtual): the recorded schedule is kept exactly and\n"
                  "    L2 completions are modelled (virtual_latency_us, virtual_bandwidth_gbps).\n"
                : "  * This host's speed differs from the recording host's; the replay keeps the\n"
                  "    recorded schedule (scaled by --time-scale) but cannot run faster than it.\n",
            mode == LMC_REPLAY_MODE_ENGINE
                ? "  * Mode engine: each recorded lookup is served as a request by the server's\n"
                  "    own logic (read what is found, store the rest); the recorded reads and\n"
                  "    writes are not reissued and give the recording's own hit rate.\n"
                : "  * L2 loads are asynchronous: a read that misses in replay is a signal about\n"
                  "    this environment, not necessarily a bug.\n",
            bold, bar, reset);
}

/*
 * fs L2 adapters whose base_path already holds objects: a replay would
 * find them (hits the recording never had), so say so, or with --clear-l2
 * remove them. quiet: no log line for a removal (the runs after the first
 * of a --repeat). -1 on an I/O error (message printed).
 */
static int check_l2_base_paths(const lmc_sm_config *cfg, bool clear, bool quiet)
{
    for (size_t i = 0; i < cfg->n_l2_adapters; i++) {
        lmc_l2_fs_objects o;
        lmc_error err;
        if (lmc_l2_fs_scan(cfg->l2_adapters[i], clear, &o, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace replay: --clear-l2: %s\n", err.msg);
            return -1;
        }
        if (o.files == 0)
            continue;
        const char *base =
            lmc_json_get_string(lmc_json_object_get(cfg->l2_adapters[i], "base_path"), NULL);
        if (clear && !quiet)
            LMC_INFO(LOG_COMP,
                     "--clear-l2: removed %llu object(s) (%.1f MiB) from L2 adapter %zu's "
                     "base_path '%s'",
                     (unsigned long long)o.removed, (double)o.bytes / (1024.0 * 1024.0), i, base);
        else if (!clear)
            LMC_WARN(LOG_COMP,
                     "L2 adapter %zu (fs): base_path '%s' already holds %llu object(s) "
                     "(%.1f MiB) written before this replay; the replay will find them in L2, "
                     "so its outcomes are not those of an empty L2 (--clear-l2 removes them "
                     "first)",
                     i, base, (unsigned long long)o.files, (double)o.bytes / (1024.0 * 1024.0));
    }
    return 0;
}

static bool has_fs_adapter(const lmc_sm_config *cfg)
{
    for (size_t i = 0; i < cfg->n_l2_adapters; i++) {
        const char *t = lmc_json_get_string(lmc_json_object_get(cfg->l2_adapters[i], "type"), NULL);
        if (t != NULL && strcmp(t, "fs") == 0)
            return true;
    }
    return false;
}

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

static int cmd_trace_replay(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            replay_usage(stdout);
            return 0;
        }
    }
    lmc_sm_config cfg;
    if (lmc_sm_config_init(&cfg) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: out of memory\n");
        return 1;
    }
    replay_args a;
    int rc = parse_replay(argc, argv, &a, &cfg);
    if (rc != 0) {
        lmc_sm_config_free(&cfg);
        return rc;
    }
    if (a.repeat > 1 && has_fs_adapter(&cfg) && !a.clear_l2) {
        fprintf(stderr,
                "lmcache trace replay: --repeat %llu with an fs L2 adapter needs "
                "--clear-l2: every run must start from an empty base_path, or the runs "
                "after the first would find what the first one stored\n",
                (unsigned long long)a.repeat);
        lmc_sm_config_free(&cfg);
        return 2;
    }

    outputs outs = {0};
    progress p = {.args = &a, .outputs = &outs, .runs = a.repeat};
    char *command = a.html != NULL ? lmc_cli_command_line(argc, argv) : NULL;
    pthread_mutex_init(&p.mu, NULL);
    lmc_replay_result res;
    memset(&res, 0, sizeof(res));
    lmc_replay_repeat *rep = NULL;
    struct sigaction old_int;
    bool handler = false;
    rc = 1;
    /* Every output location is created and checked before replaying, so a bad one fails fast. */
    if (open_outputs(&a, &outs) != 0)
        goto out;
    lmc_trace_reader *rd;
    lmc_error err;
    trace_scan sc = {0};
    struct stat sb;
    if (stat(a.path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        /* A first pass for the progress bar's total and schedule. */
        if (lmc_trace_reader_open(a.path, &rd, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
            goto out;
        }
        scan_records(rd, NULL, &sc, NULL);
        lmc_trace_reader_close(rd);
    } else {
        /* A pipe is read once, by the replay itself: its total is unknown (0) then. */
        LMC_INFO(LOG_COMP, "trace replay: '%s' is not a regular file: read once, with no "
                 "record total for the progress bar", a.path);
    }
    p.total = sc.total;
    /* Virtual time runs as fast as the host allows: progress is then by records. */
    p.schedule_s =
        a.replay.pace == LMC_REPLAY_PACE_VIRTUAL ? 0.0 : sc.duration * a.replay.time_scale;
    /* The report's figures over time are collected only when it is asked for. */
    if ((a.repeat > 1 && (rep = lmc_replay_repeat_create()) == NULL) ||
        (a.html != NULL && (p.series = lmc_replay_series_create()) == NULL)) {
        fprintf(stderr, "lmcache trace replay: out of memory\n");
        goto out;
    }
    if (check_l2_base_paths(&cfg, a.clear_l2, false) != 0)
        goto out;
    if (!a.quiet)
        print_banner(a.replay.pace, a.replay.mode);
    LMC_INFO(LOG_COMP, "trace replay: file=%s records=%llu", a.path, (unsigned long long)p.total);
    p.bar = !a.verbose && isatty(STDERR_FILENO);

    /* Ctrl-C stops at the next record; a second one ends the process as usual. */
    g_interrupted = 0;
    struct sigaction sa = {.sa_handler = on_sigint, .sa_flags = SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    handler = sigaction(SIGINT, &sa, &old_int) == 0;
    lmc_replay_options opt = {.time_scale = a.replay.time_scale,
                              .on_record = on_record,
                              .ud = &p,
                              .pace = a.replay.pace,
                              .mode = a.replay.mode,
                              .stop = &g_interrupted,
                              .on_l1_usage = p.series != NULL ? on_l1_usage : NULL};
    for (p.run = 1; p.run <= a.repeat; p.run++) {
        if (p.run > 1) {
            lmc_replay_result_free(&res);
            if (check_l2_base_paths(&cfg, a.clear_l2, true) != 0)
                goto out;
        }
        p.record_outputs = p.run == a.repeat;
        progress_start(&p);
        lmc_status st = lmc_replay_run(&cfg, a.path, &opt, &res, &err);
        progress_stop(&p);
        if (st != LMC_OK) {
            fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
            goto out;
        }
        if (res.interrupted)
            break;
        if (rep != NULL) {
            lmc_replay_summary one;
            if (lmc_replay_summary_init(&one, &res, a.replay.time_scale) != LMC_OK ||
                lmc_replay_repeat_add(rep, &one) != LMC_OK) {
                lmc_replay_summary_free(&one);
                fprintf(stderr, "lmcache trace replay: out of memory\n");
                goto out;
            }
            lmc_replay_summary_free(&one);
            if (!a.quiet && a.repeat > 1)
                LMC_INFO(LOG_COMP, "run %llu of %llu: outcome digest %.16s",
                         (unsigned long long)p.run, (unsigned long long)a.repeat,
                         res.outcome_digest);
        }
    }

    rc = 0;
    lmc_replay_summary sum;
    if (lmc_replay_summary_init(&sum, &res, a.replay.time_scale) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: out of memory\n");
        rc = 1;
    } else {
        sum.trace_path = a.path;
        sum.jsonl_path = outs.jsonl[0] ? outs.jsonl : NULL;
        sum.csv_path = outs.csv[0] ? outs.csv : NULL;
        sum.outcomes_csv_path = outs.outcomes_csv[0] ? outs.outcomes_csv : NULL;
        sum.summary_json_path = outs.summary_json[0] ? outs.summary_json : NULL;
        sum.output_path = a.output;
        sum.series = p.series;
        sum.command = command;
        /* An interrupted --repeat reports the runs that finished, not the partial one. */
        sum.repeat =
            rep != NULL && lmc_replay_repeat_runs(rep) > 0 && !res.interrupted ? rep : NULL;
        if (sum.figures.failed_reads > 0) {
            char missed[256];
            lmc_replay_missed_summary(&sum, missed, sizeof(missed));
            LMC_WARN(LOG_COMP, "trace replay: %s (per record: --jsonl-out)", missed);
        }
        for (size_t i = 0; i < outs.n; i++) {
            if (lmc_replay_output_finish(outs.v[i], &sum, &err) != LMC_OK) {
                fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
                rc = 1;
            }
        }
        lmc_replay_summary_free(&sum);
    }
    if (res.recorder_dropped > 0)
        fprintf(stderr,
                "lmcache trace replay: note: the recorder dropped %llu record(s) while "
                "writing this trace\n",
                (unsigned long long)res.recorder_dropped);
    if (res.failed > 0)
        rc = 1;
    if (res.interrupted) {
        fprintf(stderr,
                "lmcache trace replay: interrupted: replayed %llu of %llu records%s; the "
                "results cover those only\n",
                (unsigned long long)res.reported, (unsigned long long)p.total,
                a.repeat > 1 ? " of the last run" : "");
        rc = 130;
    }

out:
    if (handler)
        sigaction(SIGINT, &old_int, NULL);
    outputs_destroy(&outs);
    lmc_replay_result_free(&res);
    lmc_replay_repeat_destroy(rep);
    lmc_replay_series_destroy(p.series);
    free(command);
    pthread_mutex_destroy(&p.mu);
    lmc_sm_config_free(&cfg);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* record                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * Capture is bound to a live process, so it is a server flag, not a trace
 * subcommand; this stub only points the user there (the seed's design).
 */
static int cmd_trace_record(int argc, char **argv)
{
    if (argc >= 2 && lmc_cli_is_help(argv[1])) {
        printf("usage: lmcache trace record\n\n"
               "Capture is not a trace subcommand: start the server with\n"
               "  lmcache server --trace-level storage [--trace-output FILE]\n");
        return 0;
    }
    printf("'lmcache trace record' is a v1 stub.  To capture a trace, restart the server with:\n"
           "  lmcache server --trace-level storage [--trace-output /path/to/trace.lct] ...\n"
           "Runtime start/stop of tracing from the CLI is planned for a follow-up release.\n");
    return 2;
}

static const lmc_cli_command subs[] = {
    {"info", "print a trace's header, per-operation counts and duration", cmd_trace_info},
    {"replay", "replay a trace against a fresh StorageManager and report latencies",
     cmd_trace_replay},
    {"analyze", "the workload, its reuse and the exact LRU miss-ratio curve, in one pass",
     lmc_cmd_trace_analyze},
    {"record", "how to record a trace (capture is a server flag)", cmd_trace_record},
    {"dump", "list a trace's records, one line each (or JSONL), with filters", lmc_cmd_trace_dump},
    {"slice", "write a time window of a trace as a trace of its own", lmc_cmd_trace_slice},
    {"compare", "compare two replay results: deltas, thresholds, first divergent record",
     lmc_cmd_trace_compare},
    {"sweep", "replay a trace under every configuration of a grid of flags, side by side",
     lmc_cmd_trace_sweep},
};

int lmc_cmd_trace(int argc, char **argv)
{
    return lmc_cli_dispatch("trace", "Inspect and replay LMCache trace files.", subs,
                            sizeof(subs) / sizeof(subs[0]), argc, argv);
}
