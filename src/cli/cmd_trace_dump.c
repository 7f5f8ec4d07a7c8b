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

/* A flag given without its value: 2 (message printed). */
static int missing_value(const char *cmd, const char *flag)
{
    fprintf(stderr, "lmcache trace %s: %s: a value is required\n", cmd, flag);
    return 2;
}

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
            return missing_value(a->cmd, arg);
        if (strchr(v, '.') == NULL && !lmc_trace_op_is_method(v, strlen(v)))
            fprintf(stderr,
                    "lmcache trace %s: warning: --qualname '%s' is not a StorageManager "
                    "operation's short name; it matches only a record of that exact qualname\n",
                    a->cmd, v);
        a->qualnames[a->filter.n_qualnames++] = v;
        return 1;
    } else if (with_key && ((v = lmc_flag_value("--key", argc, argv, i, &m)) || m)) {
        if (v == NULL)
            return missing_value(a->cmd, arg);
        if (lmc_trace_filter_set_key(&a->filter, v, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace %s: --key: %s\n", a->cmd, err.msg);
            return 2;
        }
        return 1;
    } else {
        return 0;
    }
    if (v == NULL)
        return missing_value(a->cmd, arg);
    const char *flag = t == &a->filter.from ? "--from" : "--to";
    if (lmc_flag_parse_nonneg_double(flag, v, t, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace %s: %s\n", a->cmd, err.msg);
        return 2;
    }
    *has = true;
    return 1;
}

/* After the loop: FILE given, the window not empty. 0 or 2 (message printed). */
static int check_tool_args(const tool_args *a, void (*usage)(FILE *))
{
    if (a->path == NULL) {
        fprintf(stderr, "lmcache trace %s: a trace FILE is required\n\n", a->cmd);
        usage(stderr);
        return 2;
    }
    /* An empty window selects nothing: surely a mistake. */
    double from = a->filter.has_from ? a->filter.from : 0.0;
    if (a->filter.has_to && !(from < a->filter.to)) {
        fprintf(stderr, "lmcache trace %s: --to %g must be greater than --from %g\n", a->cmd,
                a->filter.to, from);
        return 2;
    }
    return 0;
}

/* A positional FILE, or an unknown option / extra argument (2, printed). */
static int take_path(tool_args *a, const char *arg, void (*usage)(FILE *))
{
    if (arg[0] == '-' && arg[1] != '\0') {
        fprintf(stderr, "lmcache trace %s: unknown option '%s'\n\n", a->cmd, arg);
        usage(stderr);
        return 2;
    }
    if (a->path != NULL) {
        fprintf(stderr, "lmcache trace %s: unexpected argument '%s'\n", a->cmd, arg);
        return 2;
    }
    a->path = arg;
    return 0;
}

static int tool_args_init(tool_args *a, const char *cmd, int argc)
{
    memset(a, 0, sizeof(*a));
    a->cmd = cmd;
    a->qualnames = calloc((size_t)argc + 1, sizeof(*a->qualnames));
    if (a->qualnames == NULL) {
        fprintf(stderr, "lmcache trace %s: out of memory\n", cmd);
        return 1;
    }
    a->filter.qualnames = a->qualnames;
    return 0;
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
            "  --limit N           stop after N records\n"
            "  --no-header         leave out the header lines ('#' lines in text)\n",
            filter_help, LMC_TRACE_KEY_PREFIX_MIN_DIGITS);
}

int lmc_cmd_trace_dump(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            dump_usage(stdout);
            return 0;
        }
    }
    tool_args a;
    if (tool_args_init(&a, "dump", argc) != 0)
        return 1;
    lmc_trace_dump_options opt = {.format = LMC_TRACE_DUMP_TEXT, .header = true};
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *arg = argv[i];
        bool m;
        const char *v;
        lmc_error err;
        int f = parse_filter_flag(&a, argc, argv, &i, true);
        if (f == 1)
            continue;
        if (f == 2) {
            rc = 2;
        } else if (strcmp(arg, "--no-header") == 0) {
            opt.header = false;
        } else if ((v = lmc_flag_value("--format", argc, argv, &i, &m)) || m) {
            if (v == NULL) {
                rc = missing_value("dump", arg);
            } else if (strcmp(v, "jsonl") == 0) {
                opt.format = LMC_TRACE_DUMP_JSONL;
            } else if (strcmp(v, "text") != 0) {
                fprintf(stderr, "lmcache trace dump: --format: '%s' is not one of text, jsonl\n",
                        v);
                rc = 2;
            }
        } else if ((v = lmc_flag_value("--limit", argc, argv, &i, &m)) || m) {
            if (v == NULL) {
                rc = missing_value("dump", arg);
            } else if (lmc_flag_parse_u64("--limit", v, 1, UINT64_MAX, &opt.limit, &err) !=
                       LMC_OK) {
                fprintf(stderr, "lmcache trace dump: %s\n", err.msg);
                rc = 2;
            }
        } else {
            rc = take_path(&a, arg, dump_usage);
        }
    }
    if (rc == 0)
        rc = check_tool_args(&a, dump_usage);
    if (rc == 0) {
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

int lmc_cmd_trace_slice(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            slice_usage(stdout);
            return 0;
        }
    }
    tool_args a;
    if (tool_args_init(&a, "slice", argc) != 0)
        return 1;
    lmc_trace_slice_options opt = {.max_records = 0};
    const char *out = NULL;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *arg = argv[i];
        bool m;
        const char *v;
        lmc_error err;
        int f = parse_filter_flag(&a, argc, argv, &i, false);
        if (f == 1)
            continue;
        if (f == 2) {
            rc = 2;
        } else if ((v = lmc_flag_value("-o", argc, argv, &i, &m)) || m ||
                   (v = lmc_flag_value("--output", argc, argv, &i, &m)) || m) {
            if (v == NULL || v[0] == '\0')
                rc = missing_value("slice", arg);
            out = v;
        } else if ((v = lmc_flag_value("--max-records", argc, argv, &i, &m)) || m) {
            if (v == NULL) {
                rc = missing_value("slice", arg);
            } else if (lmc_flag_parse_u64("--max-records", v, 1, UINT64_MAX, &opt.max_records,
                                          &err) != LMC_OK) {
                fprintf(stderr, "lmcache trace slice: %s\n", err.msg);
                rc = 2;
            }
        } else {
            rc = take_path(&a, arg, slice_usage);
        }
    }
    if (rc == 0)
        rc = check_tool_args(&a, slice_usage);
    if (rc == 0 && out == NULL) {
        fprintf(stderr, "lmcache trace slice: -o OUT is required\n\n");
        slice_usage(stderr);
        rc = 2;
    }
    if (rc == 0) {
        opt.filter = a.filter;
        lmc_trace_slice_result res;
        lmc_error err;
        if (lmc_trace_slice(a.path, out, &opt, &res, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace slice: %s\n", err.msg);
            rc = 1;
        } else {
            if (res.source_malformed > 0 || res.source_truncated)
                fprintf(stderr,
                        "lmcache trace slice: warning: '%s' has %llu malformed record(s)%s; "
                        "they are not in the slice\n",
                        a.path, (unsigned long long)res.source_malformed,
                        res.source_truncated ? " and a truncated tail" : "");
            printf("wrote %llu of %llu records to %s\n", (unsigned long long)res.records,
                   (unsigned long long)res.source_records, out);
        }
    }
    free(a.qualnames);
    return rc;
}
