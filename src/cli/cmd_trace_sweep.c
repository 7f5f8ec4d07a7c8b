/*
 * cmd_trace_sweep.c -- `lmcache trace sweep FILE [flags]`: replay a trace
 * under every configuration of a grid of StorageManager flags, in
 * parallel, one `trace replay` process each, and report them side by side.
 *
 * The grid is replay/sweep.h's, the runs replay/sweep_run.h's, the table,
 * CSV, JSON and HTML replay/sweep_output.h's. This file parses the flags,
 * checks every configuration with the replay's own parser before anything
 * runs (a bad value exits 2 naming the flag and the value), checks the
 * output paths, prints a progress line per configuration as it finishes,
 * and writes the outputs. With --html it analyses the trace once for the
 * LRU curve at the swept sizes (analyze/analyze.h), after the replays.
 *
 * Threads: the caller's; the analysis runs its own worker thread after the
 * children are done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli.h"
#include "core/clock.h"
#include "core/flags.h"
#include "core/json.h"
#include "core/names.h"
#include "replay/driver.h"
#include "replay/output.h"
#include "replay/sweep.h"
#include "replay/sweep_output.h"
#include "replay/sweep_run.h"
#include "storage/config.h"
#include "trace/reader.h"

#define CMD "sweep"
#define DEFAULT_MAX_CONFIGS 1000
#define MAX_JOBS 256

typedef struct sweep_args {
    const char *path;
    lmc_sweep_grid grid;
    lmc_cli_replay_flags replay; /* passed on to each replay */
    bool clear_l2;
    uint64_t jobs;
    uint64_t max_configs;
    bool format_json, quiet;
    const char *output, *csv, *html;
} sweep_args;

static void sweep_usage(FILE *out)
{
    lmc_cli_replay_choices c = lmc_cli_replay_choices_get();
    fprintf(out,
            "usage: lmcache trace sweep [--help] FILE --l1-size-gb GB[,GB...]\n"
            "                           --eviction-policy P[,P...] [storage-manager flags] "
            "[options]\n\n"
            "Replay a trace under every configuration of a grid and compare them: any\n"
            "storage-manager flag below takes a comma-separated list, and the grid is the\n"
            "product of the lists, in command-line order, the last flag varying fastest\n"
            "(--l1-size-gb 0.5,1 --eviction-policy LRU,ARC: 0.5 LRU, 0.5 ARC, 1 LRU, 1 ARC).\n"
            "Each configuration is one `trace replay` process, so one that crashes is\n"
            "reported and the others complete. --l2-adapter is never split (its JSON has\n"
            "commas): every configuration gets each one given. To sweep L2 adapters, give\n"
            "--l2-adapter-choice once per alternative.\n\n"
            "options:\n"
            "  --mode M              %s (default engine): as trace replay --mode\n"
            "  --pace P              %s (default virtual): as trace replay --pace\n"
            "  --time-scale F        as trace replay --time-scale (default 1.0)\n"
            "  --clear-l2            each replay first empties its fs L2 adapters' base_path\n"
            "                        (needed when several configurations use an fs adapter)\n"
            "  --l2-adapter-choice X one alternative of the L2 axis: none, an adapter JSON\n"
            "                        object, or a JSON array of them (repeat the flag)\n"
            "  --jobs N              configurations run at once (default: the online cores)\n"
            "  --max-configs N       refuse a grid larger than N (default %d)\n"
            "  --format F            terminal (default) or json, for the result on stdout\n"
            "  --output PATH         also save the result (in --format) to PATH\n"
            "  --csv PATH            write the table as CSV to PATH\n"
            "  --html PATH           write the HTML report to PATH\n"
            "  -q, --quiet           print neither the progress lines nor the result\n\n"
            "storage-manager flags (each may be a comma-separated list):\n",
            c.modes, c.paces, DEFAULT_MAX_CONFIGS);
    lmc_sm_config_print_help(out);
}

static int sweep_flag(const char *arg, int argc, char **argv, int *i, void *ctx)
{
    sweep_args *a = ctx;
    lmc_error err;
    bool consumed, m;
    const char *v;
    int r;
    if (lmc_sweep_grid_parse_arg(&a->grid, argc, argv, i, &consumed, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
        return 2;
    }
    if (consumed) {
        (*i)--; /* parse_arg moved past what it used; the caller's loop adds one */
        return 1;
    }
    if (strcmp(arg, "--clear-l2") == 0) {
        a->clear_l2 = true;
    } else if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
        a->quiet = true;
    } else if ((r = lmc_cli_parse_replay_flag(CMD, arg, argc, argv, i, &a->replay)) != 0) {
        return r;
    } else if ((v = lmc_flag_value("--jobs", argc, argv, i, &m)) || m) {
        if (!v)
            return lmc_cli_missing_value(CMD, arg);
        if (lmc_flag_parse_u64("--jobs", v, 1, MAX_JOBS, &a->jobs, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
            return 2;
        }
    } else if ((v = lmc_flag_value("--max-configs", argc, argv, i, &m)) || m) {
        if (!v)
            return lmc_cli_missing_value(CMD, arg);
        if (lmc_flag_parse_u64("--max-configs", v, 1, 1000000, &a->max_configs, &err) != LMC_OK) {
            fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
            return 2;
        }
    } else if ((v = lmc_flag_value("--format", argc, argv, i, &m)) || m) {
        if (lmc_cli_parse_format(CMD, v, &a->format_json) != 0)
            return 2;
    } else if ((v = lmc_flag_value("--output", argc, argv, i, &m)) || m ||
               (v = lmc_flag_value("--csv", argc, argv, i, &m)) || m ||
               (v = lmc_flag_value("--html", argc, argv, i, &m)) || m) {
        if (!v || !*v)
            return lmc_cli_missing_value(CMD, arg);
        const char **slot = strncmp(arg, "--output", 8) == 0 ? &a->output
                            : strncmp(arg, "--csv", 5) == 0  ? &a->csv
                                                             : &a->html;
        *slot = v;
    } else {
        return 0;
    }
    return 1;
}

/* The L2 adapter types whose objects live inside the replay's process. */
static bool adapter_in_process(const lmc_json *ad)
{
    const char *t = lmc_json_get_string(lmc_json_object_get(ad, "type"), NULL);
    if (t != NULL && strcmp(t, "fault_inject") == 0)
        return adapter_in_process(lmc_json_object_get(ad, "inner"));
    return t != NULL && strcmp(t, "mock") == 0;
}

static bool has_type(const lmc_json *ad, const char *type)
{
    const char *t = lmc_json_get_string(lmc_json_object_get(ad, "type"), NULL);
    if (t != NULL && strcmp(t, "fault_inject") == 0)
        return has_type(lmc_json_object_get(ad, "inner"), type);
    return t != NULL && strcmp(t, type) == 0;
}

/*
 * Check every configuration as its replay will (exit 2 with the message),
 * and mark the ones whose L2 lives outside the process exclusive.
 */
static int check_configs(const sweep_args *a, size_t n, lmc_sweep_job *jobs, uint64_t **sizes,
                         size_t *n_sizes)
{
    size_t with_fs = 0;
    *sizes = calloc(n + 1, sizeof(**sizes));
    *n_sizes = 0;
    if (*sizes == NULL) {
        fprintf(stderr, "lmcache trace " CMD ": out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        lmc_sm_config cfg;
        lmc_error err;
        if (lmc_sweep_grid_config(&a->grid, i, &cfg, &err) != LMC_OK) {
            char *label =
                n > 1 ? lmc_sweep_grid_label(&a->grid, i, NULL, LMC_SWEEP_ONLY_CONFIG) : NULL;
            fprintf(stderr, "lmcache trace " CMD ": %s%s%s%s\n", err.msg,
                    label != NULL ? " (in configuration " : "", label != NULL ? label : "",
                    label != NULL ? ")" : "");
            free(label);
            return 2;
        }
        bool fs = false;
        for (size_t k = 0; k < cfg.n_l2_adapters; k++) {
            jobs[i].exclusive |= !adapter_in_process(cfg.l2_adapters[k]);
            fs |= has_type(cfg.l2_adapters[k], "fs");
        }
        with_fs += fs;
        bool seen = false;
        for (size_t k = 0; k < *n_sizes; k++)
            seen |= (*sizes)[k] == cfg.l1_size_bytes;
        if (!seen)
            (*sizes)[(*n_sizes)++] = cfg.l1_size_bytes;
        lmc_sm_config_free(&cfg);
    }
    if (with_fs > 1 && !a->clear_l2) {
        fprintf(stderr,
                "lmcache trace " CMD ": %zu configurations use an fs L2 adapter: add --clear-l2, "
                "so that each one starts from an empty base_path rather than from what the "
                "one before it stored\n",
                with_fs);
        return 2;
    }
    return 0;
}

/* Can path be written? Checked before anything runs (the replay's own check). */
static int check_output(const char *path, const char *flag)
{
    if (path == NULL)
        return 0;
    lmc_replay_output *o = NULL;
    lmc_error err;
    if (lmc_replay_output_open(lmc_replay_output_find("json"), path, flag, &o, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
        return 1;
    }
    lmc_replay_output_destroy(o);
    return 0;
}

/* The child's arguments: trace replay FILE <config words> <replay flags>, NULL-terminated. */
static char **job_args(const sweep_args *a, const lmc_sweep_words *w)
{
    size_t n = 0;
    char **v = calloc(w->n + 20, sizeof(*v));
    if (v == NULL)
        return NULL;
    v[n++] = "trace";
    v[n++] = "replay";
    v[n++] = (char *)a->path;
    for (size_t k = 0; k < w->n; k++)
        v[n++] = w->v[k];
    v[n++] = "--mode";
    v[n++] = (char *)lmc_replay_mode_names[a->replay.mode];
    v[n++] = "--pace";
    v[n++] = (char *)lmc_replay_pace_names[a->replay.pace];
    v[n++] = "--time-scale";
    v[n++] = (char *)a->replay.time_scale_text;
    if (a->clear_l2)
        v[n++] = "--clear-l2";
    v[n++] = "--no-csv";
    v[n++] = "--format";
    v[n++] = "json";
    v[n++] = "-q";
    return v;
}

typedef struct progress_ctx {
    const lmc_sweep *s;
    bool quiet;
} progress_ctx;

static void on_done(size_t index, const lmc_sweep_job *job, size_t done, void *ud)
{
    (void)job;
    progress_ctx *p = ud;
    if (p->quiet)
        return;
    char *line = lmc_sweep_progress_line(p->s, index, done);
    fprintf(stderr, "%s\n", line != NULL ? line : "(out of memory)");
    fflush(stderr);
    free(line);
}

/* The LRU curve at the swept sizes, for the report; false (with a warning) when it fails. */
static bool analyze_for_report(const char *path, const uint64_t *sizes, size_t n,
                               lmc_analyze_result *out)
{
    lmc_analyze_options o = {.full = true, .sizes = sizes, .n_sizes = n};
    lmc_error err;
    if (lmc_analyze_file(path, &o, out, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace " CMD ": warning: the report has no LRU curve: %s\n",
                err.msg);
        return false;
    }
    return true;
}

int lmc_cmd_trace_sweep(int argc, char **argv)
{
    sweep_args a;
    memset(&a, 0, sizeof(a));
    lmc_sweep_grid_init(&a.grid);
    a.replay = (lmc_cli_replay_flags){.mode = LMC_REPLAY_MODE_ENGINE,
                                      .pace = LMC_REPLAY_PACE_VIRTUAL,
                                      .time_scale = 1.0,
                                      .time_scale_text = "1.0"};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    a.jobs = cores > 0 ? (uint64_t)(cores < MAX_JOBS ? cores : MAX_JOBS) : 1;
    a.max_configs = DEFAULT_MAX_CONFIGS;

    int rc;
    lmc_sweep_job *jobs = NULL;
    lmc_sweep_words *words = NULL;
    uint64_t *sizes = NULL;
    size_t n = 0, n_sizes = 0;
    char *command = NULL;
    lmc_error err;
    if (!lmc_cli_parse_trace_args(CMD, argc, argv, sweep_flag, &a, sweep_usage, &a.path, &rc))
        goto out;
    rc = 2;
    if (lmc_sweep_grid_count(&a.grid, a.max_configs, &n, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
        goto out;
    }
    rc = 1;
    jobs = calloc(n, sizeof(*jobs));
    words = calloc(n, sizeof(*words));
    command = lmc_cli_command_line(argc, argv);
    if (jobs == NULL || words == NULL || command == NULL) {
        fprintf(stderr, "lmcache trace " CMD ": out of memory\n");
        goto out;
    }
    if ((rc = check_configs(&a, n, jobs, &sizes, &n_sizes)) != 0)
        goto out;
    rc = 1;
    /* A file that is not a trace fails here once, not in every replay. */
    lmc_trace_reader *rd;
    if (lmc_trace_reader_open(a.path, &rd, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
        goto out;
    }
    lmc_trace_reader_close(rd);
    if (check_output(a.output, "--output") != 0 || check_output(a.csv, "--csv") != 0 ||
        check_output(a.html, "--html") != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (lmc_sweep_grid_words(&a.grid, i, &words[i]) != LMC_OK ||
            (jobs[i].args = job_args(&a, &words[i])) == NULL) {
            fprintf(stderr, "lmcache trace " CMD ": out of memory\n");
            goto out;
        }
    }

    lmc_sweep s = {.trace_path = a.path,
                   .command = command,
                   .grid = &a.grid,
                   .jobs = jobs,
                   .n = n,
                   .mode = lmc_replay_mode_names[a.replay.mode],
                   .pace = lmc_replay_pace_names[a.replay.pace],
                   .time_scale = a.replay.time_scale,
                   .parallel = a.jobs};
    progress_ctx pc = {.s = &s, .quiet = a.quiet};
    lmc_sweep_run_options ro = {.jobs = a.jobs, .on_done = on_done, .ud = &pc};
    uint64_t t0 = lmc_mono_ns();
    if (!a.quiet)
        fprintf(stderr, "lmcache trace " CMD ": %zu configuration%s, %llu at a time\n", n,
                n == 1 ? "" : "s", (unsigned long long)(a.jobs < n ? a.jobs : n));
    if (lmc_sweep_run(jobs, n, &ro, &s.interrupted, &err) != LMC_OK)
        fprintf(stderr, "lmcache trace " CMD ": %s\n", err.msg);
    s.wall_s = (double)(lmc_mono_ns() - t0) / 1e9;

    rc = 0;
    char *text = a.format_json ? lmc_sweep_format_json(&s) : lmc_sweep_format_table(&s);
    if (text == NULL) {
        fprintf(stderr, "lmcache trace " CMD ": out of memory\n");
        rc = 1;
    } else {
        if (!a.quiet)
            fputs(text, stdout);
        if (a.output != NULL)
            rc |= lmc_cli_save(CMD, a.output, "--output", text);
        free(text);
    }
    if (a.csv != NULL) {
        char *csv = lmc_sweep_format_csv(&s);
        rc |= csv != NULL ? lmc_cli_save(CMD, a.csv, "--csv", csv) : 1;
        free(csv);
    }
    if (a.html != NULL) {
        lmc_analyze_result lru;
        bool have = analyze_for_report(a.path, sizes, n_sizes, &lru);
        char *html = lmc_sweep_format_html(&s, have ? &lru : NULL);
        rc |= html != NULL ? lmc_cli_save(CMD, a.html, "--html", html) : 1;
        if (!a.quiet && html != NULL)
            fprintf(stderr, "lmcache trace " CMD ": report written to %s\n", a.html);
        free(html);
        if (have)
            lmc_analyze_result_free(&lru);
    }
    for (size_t i = 0; i < n; i++)
        if (jobs[i].state != LMC_SWEEP_JOB_DONE)
            rc |= 1;
    if (s.interrupted) {
        size_t finished = 0;
        for (size_t i = 0; i < n; i++)
            finished += jobs[i].state == LMC_SWEEP_JOB_DONE;
        fprintf(stderr,
                "lmcache trace " CMD ": interrupted: %zu of %zu configurations finished; the "
                "results cover those only\n",
                finished, n);
        rc = 130;
    }

out:
    for (size_t i = 0; jobs != NULL && i < n; i++) {
        free(jobs[i].args);
        lmc_sweep_job_free(&jobs[i]);
    }
    for (size_t i = 0; words != NULL && i < n; i++)
        lmc_sweep_words_free(&words[i]);
    free(jobs);
    free(words);
    free(sizes);
    free(command);
    lmc_sweep_grid_free(&a.grid);
    return rc;
}
