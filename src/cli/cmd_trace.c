/*
 * cmd_trace.c -- `lmcache trace info|replay|record`.
 *
 * info reads a whole trace (t_mono and qualname of each record only) and
 * prints its header, per-qualname counts and duration in LMCache's layout
 * (spec/trace-format.md section 8.2). replay runs the replay driver and
 * writes the outputs of sections 7 and 8.3-8.4. record only points at the
 * server flag, as the seed's stub does.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/output.h"
#include "cli.h"
#include "core/clock.h"
#include "core/flags.h"
#include "core/json.h"
#include "core/log.h"
#include "core/names.h"
#include "replay/driver.h"
#include "replay/output.h"
#include "storage/config.h"
#include "trace/reader.h"
#include "trace/recorder.h"

/* ---------------------------------------------------------------------- */
/* info                                                                    */
/* ---------------------------------------------------------------------- */

typedef struct op_count {
    char *qualname;
    uint64_t count;
} op_count;

typedef struct op_counts {
    op_count *v;
    size_t n, cap;
    /* Traces usually interleave few qualnames: remember the last one hit. */
    size_t last;
} op_counts;

static int count_op(op_counts *c, const char *q, size_t len)
{
    if (c->n > 0 && strlen(c->v[c->last].qualname) == len &&
        memcmp(c->v[c->last].qualname, q, len) == 0) {
        c->v[c->last].count++;
        return 0;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (strlen(c->v[i].qualname) == len && memcmp(c->v[i].qualname, q, len) == 0) {
            c->v[i].count++;
            c->last = i;
            return 0;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        op_count *nv = realloc(c->v, cap * sizeof(*nv));
        if (nv == NULL)
            return -1;
        c->v = nv;
        c->cap = cap;
    }
    char *copy = strndup(q, len);
    if (copy == NULL)
        return -1;
    c->v[c->n] = (op_count){copy, 1};
    c->last = c->n++;
    return 0;
}

static int cmp_op(const void *a, const void *b)
{
    return strcmp(((const op_count *)a)->qualname, ((const op_count *)b)->qualname);
}

static void row(const char *label, const char *value)
{
    char l[128];
    snprintf(l, sizeof(l), "%s:", label);
    printf("  %-28s%s\n", l, value);
}

static void info_usage(FILE *out)
{
    fprintf(out, "usage: lmcache trace info [--help] [--format terminal|json] FILE\n\n"
                 "Print a trace's header fields, per-operation record counts, total records,\n"
                 "duration (the largest record t_mono), and the unique keys looked up and their\n"
                 "footprint (the cheap summary of `lmcache trace analyze`).\n");
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
static char *info_json(const char *path, const lmc_trace_header *h, double duration,
                       uint64_t total, bool has_dropped, uint64_t dropped, const op_counts *ops,
                       bool truncated, const lmc_analyze_result *k)
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
    st |= lmc_json_object_set(hd, "sm_config_digest", h->sm_config_digest[0]
                                                          ? lmc_json_string(h->sm_config_digest)
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
    st |= lmc_json_object_set(o, "truncated", lmc_json_bool(truncated));
    lmc_json *counts = lmc_json_object();
    for (size_t i = 0; i < ops->n; i++)
        st |= lmc_json_object_set(counts, ops->v[i].qualname,
                                  lmc_json_int((int64_t)ops->v[i].count));
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
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            info_usage(stdout);
            return 0;
        }
        bool m;
        const char *v = lmc_flag_value("--format", argc, argv, &i, &m);
        if (m) {
            if (v == NULL) {
                fprintf(stderr, "lmcache trace info: --format: a value is required\n");
                return 2;
            }
            if (strcmp(v, "json") != 0 && strcmp(v, "terminal") != 0) {
                fprintf(stderr,
                        "lmcache trace info: --format: '%s' is not one of terminal, json\n", v);
                return 2;
            }
            json = strcmp(v, "json") == 0;
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
    op_counts ops = {0};
    uint64_t total = 0, dropped = 0;
    bool has_dropped = false;
    double duration = 0.0;
    double t_mono;
    const char *q;
    size_t qlen;
    int rc = 0;
    /* The unique keys and footprint come from the same pass (the analysis's summary). */
    struct stat st;
    lmc_analyze_options ko = {.file_bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0};
    lmc_analyze *keys = NULL;
    lmc_analyze_result kr;
    memset(&kr, 0, sizeof(kr));
    if (lmc_analyze_create(&ko, &keys, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace info: %s\n", err.msg);
        lmc_trace_reader_close(rd);
        return 1;
    }
    lmc_trace_record rec;
    while (lmc_trace_reader_next_record(rd, &rec) == LMC_OK) {
        t_mono = rec.t_mono;
        q = rec.qualname;
        qlen = rec.qualname_len;
        if (qlen == strlen(LMC_TRACE_DROPPED_QUALNAME) &&
            memcmp(q, LMC_TRACE_DROPPED_QUALNAME, qlen) == 0) {
            has_dropped = true;
            int64_t n;
            if (lmc_trace_reader_peek_int_arg(rd, "dropped_count", &n) == LMC_OK)
                dropped += (uint64_t)n;
            continue;
        }
        if (t_mono > duration && isfinite(t_mono))
            duration = t_mono;
        total++;
        if (count_op(&ops, q, qlen) != 0) {
            fprintf(stderr, "lmcache trace info: out of memory\n");
            rc = 1;
            break;
        }
        /* Last: decoding the record's args replaces q's copy of the qualname. */
        if (lmc_analyze_record(keys, rd, &rec, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace info: %s\n", err.msg);
            rc = 1;
            break;
        }
    }
    if (rc == 0 && lmc_analyze_result_get(keys, &kr, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace info: %s\n", err.msg);
        rc = 1;
    }
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    qsort(ops.v, ops.n, sizeof(*ops.v), cmp_op);
    if (json) {
        char *text = info_json(path, h, duration, total, has_dropped, dropped, &ops,
                               lmc_trace_reader_truncated(rd), &kr);
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
    printf("Trace file: %s\n", path);
    row("level", h->level);
    snprintf(buf, sizeof(buf), "%lld", (long long)h->format_version);
    row("format_version", buf);
    snprintf(buf, sizeof(buf), "%lld", (long long)h->trace_schema_version);
    row("trace_schema_version", buf);
    snprintf(buf, sizeof(buf), "%.3fs", duration);
    row("duration", buf);
    row("sm_config_digest", h->sm_config_digest[0] ? h->sm_config_digest : "(none)");
    for (size_t i = 0; i < h->n_meta; i++)
        row(h->meta_keys[i], h->meta_values[i]);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)total);
    row("total_records", buf);
    if (has_dropped) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)dropped);
        row("dropped_records", buf);
    }
    if (ops.n == 0) {
        printf("  ops: (none)\n");
    } else {
        printf("  ops:\n");
        for (size_t i = 0; i < ops.n; i++)
            printf("    %s: %llu\n", ops.v[i].qualname, (unsigned long long)ops.v[i].count);
    }
    info_keys_rows(&kr);
done:
    if (lmc_trace_reader_truncated(rd))
        fprintf(stderr, "lmcache trace info: warning: '%s' ends in a truncated record; the counts "
                        "above cover the complete records\n", path);
    for (size_t i = 0; i < ops.n; i++)
        free(ops.v[i].qualname);
    free(ops.v);
    lmc_analyze_result_free(&kr);
    lmc_analyze_destroy(keys);
    lmc_trace_reader_close(rd);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* replay                                                                  */
/* ---------------------------------------------------------------------- */

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
    double time_scale;
    lmc_replay_pace pace;
} replay_args;

static void replay_usage(FILE *out)
{
    char paces[64];
    lmc_names_join(lmc_replay_pace_names, lmc_replay_pace_count, "|", NULL, paces, sizeof(paces));
    fprintf(out,
            "usage: lmcache trace replay [--help] FILE --l1-size-gb GB --eviction-policy P\n"
            "                            [storage-manager flags] [options]\n\n"
            "Replay a trace against a fresh StorageManager built from the flags below,\n"
            "honouring the recorded timing (scaled by --time-scale), and report latency\n"
            "per operation.\n\n"
            "options:\n"
            "  --time-scale F      multiply the recorded gaps by F (finite, > 0; default 1.0;\n"
            "                      0.5 replays twice as fast); the eviction period follows it\n"
            "  --pace P            %s: realtime (default) keeps the schedule on the wall\n"
            "                      clock; virtual runs the StorageManager in virtual time, as\n"
            "                      fast as the host allows, with the same result every run\n"
            "  --verbose           print one line per record to stdout\n"
            "  --jsonl-out PATH    write one JSON object per record to PATH\n"
            "  --output-dir DIR    where trace_replay_ops.csv / trace_replay_summary.json go "
            "(default .)\n"
            "  --no-csv            do not write trace_replay_ops.csv\n"
            "  --json              also write trace_replay_summary.json\n"
            "  --format F          terminal (default) or json, for the result on stdout\n"
            "  --output PATH       also save the result (in --format) to PATH\n"
            "  -q, --quiet         do not print the result\n\n"
            "storage-manager flags:\n",
            paces);
    lmc_sm_config_print_help(out);
}

/* 0 ok, 2 usage error (message printed). */
static int parse_replay(int argc, char **argv, replay_args *a, lmc_sm_config *cfg)
{
    memset(a, 0, sizeof(*a));
    a->output_dir = ".";
    a->time_scale = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool m;
        const char *v;
        lmc_error err;
        bool consumed;
        if (lmc_sm_config_parse_arg(cfg, argc, argv, &i, &consumed, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
            return 2;
        }
        if (consumed) {
            i--; /* parse_arg advanced past what it used; the loop adds one */
            continue;
        }
        if (strcmp(arg, "--verbose") == 0) {
            a->verbose = true;
        } else if (strcmp(arg, "--no-csv") == 0) {
            a->no_csv = true;
        } else if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
            a->quiet = true;
        } else if ((v = lmc_flag_value("--jsonl-out", argc, argv, &i, &m)) || m) {
            if (!v || !*v)
                goto missing;
            a->jsonl_out = v;
        } else if ((v = lmc_flag_value("--output-dir", argc, argv, &i, &m)) || m) {
            if (!v || !*v)
                goto missing;
            a->output_dir = v;
        } else if ((v = lmc_flag_value("--output", argc, argv, &i, &m)) || m) {
            if (!v || !*v)
                goto missing;
            a->output = v;
        } else if ((v = lmc_flag_value("--format", argc, argv, &i, &m)) || m) {
            if (!v)
                goto missing;
            if (strcmp(v, "json") == 0) {
                a->format_json = true;
            } else if (strcmp(v, "terminal") != 0) {
                fprintf(stderr, "lmcache trace replay: --format: '%s' is not one of terminal, "
                                "json\n", v);
                return 2;
            }
        } else if ((v = lmc_flag_value("--time-scale", argc, argv, &i, &m)) || m) {
            if (!v)
                goto missing;
            double s;
            if (lmc_flag_parse_double("--time-scale", v, &s, &err) != LMC_OK ||
                lmc_replay_check_time_scale(s, &err) != LMC_OK) {
                fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
                return 2;
            }
            a->time_scale = s;
        } else if ((v = lmc_flag_value("--pace", argc, argv, &i, &m)) || m) {
            if (!v)
                goto missing;
            if (lmc_replay_pace_parse(v, &a->pace, &err) != LMC_OK) {
                fprintf(stderr, "lmcache trace replay: --pace: %s\n", err.msg);
                return 2;
            }
        } else if ((v = lmc_flag_value("--trace-level", argc, argv, &i, &m)) || m ||
                   (v = lmc_flag_value("--trace-output", argc, argv, &i, &m)) || m) {
            if (!v)
                goto missing;
            LMC_WARN("replay", "%s is ignored: a replay never records", arg);
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "lmcache trace replay: unknown option '%s'\n\n", arg);
            replay_usage(stderr);
            return 2;
        } else if (a->path == NULL) {
            a->path = arg;
        } else {
            fprintf(stderr, "lmcache trace replay: unexpected argument '%s'\n", arg);
            return 2;
        }
        continue;
    missing:
        fprintf(stderr, "lmcache trace replay: %s: a value is required\n", arg);
        return 2;
    }
    if (a->path == NULL) {
        fprintf(stderr, "lmcache trace replay: a trace FILE is required\n\n");
        replay_usage(stderr);
        return 2;
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
    return 0;
}

/*
 * The outputs the flags ask for, in the order their results are written:
 * at most --jsonl-out, the CSV, the summary JSON, stdout and --output.
 */
#define MAX_OUTPUTS 5
typedef struct outputs {
    lmc_replay_output *v[MAX_OUTPUTS];
    size_t n;
} outputs;

/*
 * Open one output of the format called name: to path (NULL: stdout), or
 * to its default file under dir when path is NULL and dir is not. flag
 * names the option that gave path. -1 when it cannot (message printed).
 */
static int add_output(outputs *o, const char *name, const char *dir, const char *path,
                      const char *flag)
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
    o->n++;
    return 0;
}

static void outputs_destroy(outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        lmc_replay_output_destroy(o->v[i]);
    o->n = 0;
}

typedef struct progress {
    const replay_args *args;
    outputs *outputs;
    uint64_t n, total;
    bool bar; /* a one-line progress bar on a terminal instead of log lines */
    uint64_t start_ns, last_draw_ns;
} progress;

static void draw_bar(progress *p, bool final)
{
    uint64_t now = lmc_mono_ns();
    if (!final && now - p->last_draw_ns < 100000000ull)
        return;
    p->last_draw_ns = now;
    double elapsed = (double)(now - p->start_ns) / 1e9;
    double rate = elapsed > 0 ? (double)p->n / elapsed : 0.0;
    double frac = p->total ? (double)p->n / (double)p->total : 1.0;
    int width = 30, fill = (int)(frac * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = '\0';
    double eta = rate > 0 ? (double)(p->total - p->n) / rate : 0.0;
    fprintf(stderr, "\r[%s] %llu/%llu (%5.1f%%) %.0f rec/s ETA %.0fs ", bar,
            (unsigned long long)p->n, (unsigned long long)p->total, frac * 100.0, rate, eta);
    if (final)
        fputc('\n', stderr);
    fflush(stderr);
}

static void on_record(const lmc_replay_record_view *rec, void *ud)
{
    progress *p = ud;
    p->n = rec->index;
    const char *q = rec->qualname;
    double ms = rec->latency_s * 1000.0;
    const char *status = rec->failed ? "FAIL" : "OK";
    if (p->args->verbose)
        printf("  [%llu/%llu]  %-4s  %8.3fms  %s\n", (unsigned long long)p->n,
               (unsigned long long)p->total, status, ms, q);
    else if (p->bar)
        draw_bar(p, false);
    else
        LMC_INFO("replay", "[%llu/%llu] %s %s (%.3fms)", (unsigned long long)p->n,
                 (unsigned long long)p->total, status, q, ms);
    for (size_t i = 0; i < p->outputs->n; i++)
        lmc_replay_output_record(p->outputs->v[i], rec);
}

static void print_banner(lmc_replay_pace pace)
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
            "%s"
            "  * L2 loads are asynchronous: a read that misses in replay is a signal about\n"
            "    this environment, not necessarily a bug.\n"
            "%s%s%s\n",
            bold, bar, bar, reset,
            pace == LMC_REPLAY_PACE_VIRTUAL
                ? "  * Virtual time (--pace virtual): the recorded schedule is kept exactly and\n"
                  "    L2 completions are modelled (virtual_latency_us, virtual_bandwidth_gbps).\n"
                : "  * This host's speed differs from the recording host's; the replay keeps the\n"
                  "    recorded schedule (scaled by --time-scale) but cannot run faster than it.\n",
            bold, bar, reset);
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

    outputs outs = {0};
    progress p = {.args = &a, .outputs = &outs};
    lmc_replay_result res;
    memset(&res, 0, sizeof(res));
    rc = 1;
    /* Output locations are created before replaying, so a bad one fails fast. */
    if (make_dirs(a.output_dir) != 0) {
        fprintf(stderr, "lmcache trace replay: cannot create --output-dir '%s': %s\n",
                a.output_dir, strerror(errno));
        goto out;
    }
    if (a.jsonl_out) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", a.jsonl_out);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            if (make_dirs(dir) != 0) {
                fprintf(stderr, "lmcache trace replay: cannot create '%s': %s\n", dir,
                        strerror(errno));
                goto out;
            }
        }
        if (add_output(&outs, "jsonl", NULL, a.jsonl_out, "--jsonl-out") != 0)
            goto out;
    }
    /* The rest write their files at the end, and only when the replay ran. */
    const char *result = a.format_json ? "json" : "table";
    if ((!a.no_csv && add_output(&outs, "csv", a.output_dir, NULL, NULL) != 0) ||
        (a.json && add_output(&outs, "summary-json", a.output_dir, NULL, NULL) != 0) ||
        (!a.quiet && add_output(&outs, result, NULL, NULL, NULL) != 0) ||
        (a.output && add_output(&outs, result, NULL, a.output, "--output") != 0))
        goto out;
    lmc_error err;
    if (lmc_trace_count_records(a.path, &p.total, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
        goto out;
    }
    print_banner(a.pace);
    LMC_INFO("replay", "trace replay: file=%s records=%llu", a.path,
             (unsigned long long)p.total);
    p.bar = !a.verbose && isatty(STDERR_FILENO);
    p.start_ns = lmc_mono_ns();

    lmc_replay_options opt = {
        .time_scale = a.time_scale, .on_record = on_record, .ud = &p, .pace = a.pace};
    if (lmc_replay_run(&cfg, a.path, &opt, &res, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
        goto out;
    }
    if (p.bar)
        draw_bar(&p, true);

    rc = 0;
    lmc_replay_summary sum;
    if (lmc_replay_summary_init(&sum, &res, a.time_scale) != LMC_OK) {
        fprintf(stderr, "lmcache trace replay: out of memory\n");
        rc = 1;
    } else {
        for (size_t i = 0; i < outs.n; i++) {
            if (lmc_replay_output_finish(outs.v[i], &sum, &err) != LMC_OK) {
                fprintf(stderr, "lmcache trace replay: %s\n", err.msg);
                rc = 1;
            }
        }
        lmc_replay_summary_free(&sum);
    }
    if (res.recorder_dropped > 0)
        fprintf(stderr, "lmcache trace replay: note: the recorder dropped %llu record(s) while "
                        "writing this trace\n", (unsigned long long)res.recorder_dropped);
    if (res.failed > 0)
        rc = 1;

out:
    outputs_destroy(&outs);
    lmc_replay_result_free(&res);
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
};

int lmc_cmd_trace(int argc, char **argv)
{
    return lmc_cli_dispatch("trace", "Inspect and replay LMCache trace files.", subs,
                            sizeof(subs) / sizeof(subs[0]), argc, argv);
}
