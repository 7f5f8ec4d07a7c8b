/*
 * cmd_trace_dump.c -- `lmcache trace dump` and `lmcache trace slice`.
 *
 * The flag parsing of the two listing tools; the work is in trace/dump.c
 * and trace/slice.c. Both read the same record filter (--from, --to,
 * --qualname; dump also --key) through one parser. Exit codes: 0 done, 1
 * the file could not be read or written, 2 a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/flags.h"
#include "trace/dump.h"
#include "trace/ops.h"
#include "trace/slice.h"

static const char filter_help[] =
    "  --from T            only records with t_mono >= T (seconds since the trace start)\n"
    "  --to T              only records with t_mono < T\n"
    "  --qualname Q        only records of qualname Q, in full or short form\n"
    "                      (reserve_write, read_prefetched_results.__enter__); repeatable\n";

/* What the two commands parse in common. */
typedef struct tool_args {
    const char *cmd; /* "dump" or "slice", for messages */
    const char *path;
    lmc_trace_filter filter;
    const char **qualnames; /* argc slots; filter.qualnames points here */
    const char *key;        /* dump only */
} tool_args;

/*
 * The filter flags at argv[*i]: 1 when it was one (consumed), 0 when not,
 * 2 on a usage error (message printed).
 */
static int parse_filter_flag(tool_args *a, int argc, char **argv, int *i, bool with_key)
{
    const char *arg = argv[*i];
    bool m;
    const char *v;
    lmc_error err;
    double *t = NULL;
    bool *has = NULL;
    if ((v = lmc_flag_value("--from", argc, argv, i, &m)) || m) {
        t = &a->filter.from;
        has = &a->filter.has_from;
    } else if ((v = lmc_flag_value("--to", argc, argv, i, &m)) || m) {
        t = &a->filter.to;
        has = &a->filter.has_to;
    } else if ((v = lmc_flag_value("--qualname", argc, argv, i, &m)) || m) {
        if (v == NULL || v[0] == '\0')
            return lmc_cli_missing_value(a->cmd, arg);
        if (strchr(v, '.') == NULL && !lmc_trace_op_is_method(v, strlen(v)))
            fprintf(stderr,
                    "lmcache trace %s: warning: --qualname '%s' is not a StorageManager "
                    "operation's short name; it matches only a record of that exact qualname\n",
                    a->cmd, v);
        a->qualnames[a->filter.n_qualnames++] = v;
        return 1;
    } else if (with_key && ((v = lmc_flag_value("--key", argc, argv, i, &m)) || m)) {
        if (v == NULL)
            return lmc_cli_missing_value(a->cmd, arg);
        if (lmc_trace_filter_set_key(&a->filter, v, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace %s: --key: %s\n", a->cmd, err.msg);
            return 2;
        }
        return 1;
    } else {
        return 0;
    }
    if (v == NULL)
        return lmc_cli_missing_value(a->cmd, arg);
    const char *flag = t == &a->filter.from ? "--from" : "--to";
    if (lmc_flag_parse_nonneg_double(flag, v, t, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace %s: %s\n", a->cmd, err.msg);
        return 2;
    }
    *has = true;
    return 1;
}

/* The filter flags, then the command's own. */
typedef struct tool_flags {
    tool_args *a;
    bool with_key;
    lmc_cli_flag_fn own;
    void *ctx;
} tool_flags;

static int tool_flag(const char *arg, int argc, char **argv, int *i, void *ctx)
{
    tool_flags *t = ctx;
    int f = parse_filter_flag(t->a, argc, argv, i, t->with_key);
    return f != 0 ? f : t->own(arg, argc, argv, i, t->ctx);
}

/*
 * Everything both commands parse (cli.h's lmc_cli_parse_trace_args with
 * the filter flags and the command's own, own), then the window check.
 * Returns true when the command should run; otherwise *rc is the exit
 * code (messages printed). Free a->qualnames either way.
 */
static bool parse_tool(tool_args *a, const char *cmd, int argc, char **argv, bool with_key,
                       lmc_cli_flag_fn own, void *ctx, void (*usage)(FILE *), int *rc)
{
    memset(a, 0, sizeof(*a));
    a->cmd = cmd;
    a->qualnames = calloc((size_t)argc + 1, sizeof(*a->qualnames));
    if (a->qualnames == NULL) {
        fprintf(stderr, "lmcache trace %s: out of memory\n", cmd);
        *rc = 1;
        return false;
    }
    a->filter.qualnames = a->qualnames;
    tool_flags t = {a, with_key, own, ctx};
    if (!lmc_cli_parse_trace_args(cmd, argc, argv, tool_flag, &t, usage, &a->path, rc))
        return false;
    /* An empty window selects nothing: surely a mistake. */
    double from = a->filter.has_from ? a->filter.from : 0.0;
    if (a->filter.has_to && !(from < a->filter.to)) {
        fprintf(stderr, "lmcache trace %s: --to %g must be greater than --from %g\n", cmd,
                a->filter.to, from);
        *rc = 2;
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* dump                                                                    */
/* ---------------------------------------------------------------------- */

static void dump_usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache trace dump [--help] FILE [--format text|jsonl] [--from T] [--to T]\n"
            "                          [--qualname Q]... [--key HEX] [--limit N] [--no-header]\n\n"
            "List a trace's records, one line each: index, t_mono, operation, key count and\n"
            "the arguments abbreviated (text), or every record fully decoded (jsonl).\n"
            "Control characters in the trace's strings are escaped.\n\n"
            "options:\n"
            "  --format F          text (default) or jsonl\n"
            "%s"
            "  --key HEX           only records with a key whose chunk hash starts with HEX\n"
            "                      (at least %d hex digits)\n"
            "  --limit N           stop after N records (markers count as records here)\n"
            "  --no-header         leave out the header lines ('#' lines in text)\n",
            filter_help, LMC_TRACE_KEY_PREFIX_MIN_DIGITS);
}

static int dump_flag(const char *arg, int argc, char **argv, int *i, void *ctx)
{
    lmc_trace_dump_options *opt = ctx;
    bool m;
    const char *v;
    lmc_error err;
    if (strcmp(arg, "--no-header") == 0) {
        opt->header = false;
    } else if ((v = lmc_flag_value("--format", argc, argv, i, &m)) || m) {
        if (v == NULL)
            return lmc_cli_missing_value("dump", arg);
        if (strcmp(v, "jsonl") == 0) {
            opt->format = LMC_TRACE_DUMP_JSONL;
        } else if (strcmp(v, "text") != 0) {
            fprintf(stderr, "lmcache trace dump: --format: '%s' is not one of text, jsonl\n", v);
            return 2;
        }
    } else if ((v = lmc_flag_value("--limit", argc, argv, i, &m)) || m) {
        if (v == NULL)
            return lmc_cli_missing_value("dump", arg);
        if (lmc_flag_parse_u64("--limit", v, 1, UINT64_MAX, &opt->limit, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace dump: %s\n", err.msg);
            return 2;
        }
    } else {
        return 0;
    }
    return 1;
}

int lmc_cmd_trace_dump(int argc, char **argv)
{
    tool_args a;
    lmc_trace_dump_options opt = {.format = LMC_TRACE_DUMP_TEXT, .header = true};
    int rc;
    if (parse_tool(&a, "dump", argc, argv, true, dump_flag, &opt, dump_usage, &rc)) {
        opt.filter = a.filter;
        lmc_error err;
        if (lmc_trace_dump_file(a.path, &opt, stdout, NULL, &err) != LMC_OK) {
            fflush(stdout);
            fprintf(stderr, "lmcache trace dump: %s\n", err.msg);
            rc = 1;
        } else if (fflush(stdout) != 0) {
            fprintf(stderr, "lmcache trace dump: cannot write the listing\n");
            rc = 1;
        }
    }
    free(a.qualnames);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* slice                                                                   */
/* ---------------------------------------------------------------------- */

static void slice_usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache trace slice [--help] FILE -o OUT.lct [--from T] [--to T]\n"
            "                           [--qualname Q]... [--max-records N]\n\n"
            "Write the records of a time window (and of the given operations) as a trace of\n"
            "their own: the same header (config and digest), t_mono rebased to the window\n"
            "start, and a final 'lmcache.trace.slice' record that names the source and the\n"
            "window. The file replays like any trace.\n\n"
            "options:\n"
            "  -o, --output OUT    the trace to write (replaced if it exists; never FILE)\n"
            "%s"
            "  --max-records N     write at most N records\n",
            filter_help);
}

/* The slice's own flags; ctx is a slice_args. */
typedef struct slice_args {
    lmc_trace_slice_options opt;
    const char *out;
} slice_args;

static int slice_flag(const char *arg, int argc, char **argv, int *i, void *ctx)
{
    slice_args *s = ctx;
    bool m;
    const char *v;
    lmc_error err;
    if ((v = lmc_flag_value("-o", argc, argv, i, &m)) || m ||
        (v = lmc_flag_value("--output", argc, argv, i, &m)) || m) {
        if (v == NULL || v[0] == '\0')
            return lmc_cli_missing_value("slice", arg);
        s->out = v;
    } else if ((v = lmc_flag_value("--max-records", argc, argv, i, &m)) || m) {
        if (v == NULL)
            return lmc_cli_missing_value("slice", arg);
        if (lmc_flag_parse_u64("--max-records", v, 1, UINT64_MAX, &s->opt.max_records, &err) !=
            LMC_OK) {
            fprintf(stderr, "lmcache trace slice: %s\n", err.msg);
            return 2;
        }
    } else {
        return 0;
    }
    return 1;
}

int lmc_cmd_trace_slice(int argc, char **argv)
{
    tool_args a;
    slice_args s = {.out = NULL};
    int rc;
    if (!parse_tool(&a, "slice", argc, argv, false, slice_flag, &s, slice_usage, &rc))
        goto out;
    if (s.out == NULL) {
        fprintf(stderr, "lmcache trace slice: -o OUT is required\n\n");
        slice_usage(stderr);
        rc = 2;
        goto out;
    }
    s.opt.filter = a.filter;
    lmc_trace_slice_result res;
    lmc_error err;
    if (lmc_trace_slice(a.path, s.out, &s.opt, &res, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace slice: %s\n", err.msg);
        rc = 1;
        goto out;
    }
    if (res.source_malformed > 0 || res.source_truncated)
        fprintf(stderr,
                "lmcache trace slice: warning: '%s' has %llu malformed record(s)%s; they are not "
                "in the slice\n",
                a.path, (unsigned long long)res.source_malformed,
                res.source_truncated ? " and a truncated tail" : "");
    printf("wrote %llu of %llu records to %s\n", (unsigned long long)res.records,
           (unsigned long long)res.source_records, s.out);
out:
    free(a.qualnames);
    return rc;
}
