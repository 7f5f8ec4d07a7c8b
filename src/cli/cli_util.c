/*
 * cli_util.c -- helpers shared by the subcommands (see cli.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/file.h"
#include "core/flags.h"
#include "core/names.h"
#include "core/strbuf.h"

bool lmc_cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int lmc_cli_missing_value(const char *cmd, const char *flag)
{
    fprintf(stderr, "lmcache trace %s: %s: a value is required\n", cmd, flag);
    return 2;
}

int lmc_cli_parse_format(const char *cmd, const char *value, bool *json)
{
    if (value == NULL)
        return lmc_cli_missing_value(cmd, "--format");
    if (strcmp(value, "json") != 0 && strcmp(value, "terminal") != 0) {
        fprintf(stderr, "lmcache trace %s: --format: '%s' is not one of terminal, json\n", cmd,
                value);
        return 2;
    }
    *json = strcmp(value, "json") == 0;
    return 0;
}

int lmc_cli_parse_replay_flag(const char *cmd, const char *arg, int argc, char **argv, int *i,
                              lmc_cli_replay_flags *f)
{
    bool m;
    const char *v, *prefix;
    lmc_error err;
    lmc_status st = LMC_OK;
    if ((v = lmc_flag_value("--mode", argc, argv, i, &m)) || m) {
        prefix = "--mode: ";
        if (v != NULL)
            st = lmc_replay_mode_parse(v, &f->mode, &err);
    } else if ((v = lmc_flag_value("--pace", argc, argv, i, &m)) || m) {
        prefix = "--pace: ";
        if (v != NULL)
            st = lmc_replay_pace_parse(v, &f->pace, &err);
    } else if ((v = lmc_flag_value("--time-scale", argc, argv, i, &m)) || m) {
        prefix = ""; /* the time scale's message names the flag itself */
        double scale = 0.0;
        if (v != NULL && (st = lmc_replay_parse_time_scale(v, &scale, &err)) == LMC_OK) {
            f->time_scale = scale;
            f->time_scale_text = v;
        }
    } else {
        return 0;
    }
    if (v == NULL)
        return lmc_cli_missing_value(cmd, arg);
    if (st != LMC_OK) {
        fprintf(stderr, "lmcache trace %s: %s%s\n", cmd, prefix, err.msg);
        return 2;
    }
    return 1;
}

lmc_cli_replay_choices lmc_cli_replay_choices_get(void)
{
    lmc_cli_replay_choices c;
    lmc_names_join(lmc_replay_mode_names, lmc_replay_mode_count, "|", NULL, c.modes,
                   sizeof(c.modes));
    lmc_names_join(lmc_replay_pace_names, lmc_replay_pace_count, "|", NULL, c.paces,
                   sizeof(c.paces));
    return c;
}

bool lmc_cli_parse_trace_args(const char *cmd, int argc, char **argv, lmc_cli_flag_fn flag,
                              void *ctx, void (*usage)(FILE *), const char **path, int *rc)
{
    *path = NULL;
    *rc = 0;
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            usage(stdout);
            return false;
        }
    }
    for (int i = 1; i < argc && *rc == 0; i++) {
        const char *arg = argv[i];
        int f = flag(arg, argc, argv, &i, ctx);
        if (f == 2) {
            *rc = 2;
        } else if (f == 1) {
            continue;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "lmcache trace %s: unknown option '%s'\n\n", cmd, arg);
            usage(stderr);
            *rc = 2;
        } else if (*path != NULL) {
            fprintf(stderr, "lmcache trace %s: unexpected argument '%s'\n", cmd, arg);
            *rc = 2;
        } else {
            *path = arg;
        }
    }
    if (*rc != 0)
        return false;
    if (*path == NULL) {
        fprintf(stderr, "lmcache trace %s: a trace FILE is required\n\n", cmd);
        usage(stderr);
        *rc = 2;
        return false;
    }
    return true;
}

int lmc_cli_save(const char *cmd, const char *path, const char *flag, const char *text)
{
    lmc_error err;
    if (lmc_file_write_all(flag, path, text, &err) != LMC_OK) {
        fprintf(stderr, "lmcache trace %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

static void sub_usage(FILE *out, const char *parent, const char *summary,
                      const lmc_cli_command *subs, size_t nsubs)
{
    fprintf(out, "usage: lmcache %s [--help] <command> [<args>]\n\n%s\n\ncommands:\n", parent,
            summary);
    for (size_t i = 0; i < nsubs; i++)
        fprintf(out, "  %-8s %s\n", subs[i].name, subs[i].summary);
    fprintf(out, "\nRun 'lmcache %s <command> --help' for a command's options.\n", parent);
}

int lmc_cli_dispatch(const char *parent, const char *summary, const lmc_cli_command *subs,
                     size_t nsubs, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "lmcache %s: a command is required\n\n", parent);
        sub_usage(stderr, parent, summary, subs, nsubs);
        return 2;
    }
    if (lmc_cli_is_help(argv[1])) {
        sub_usage(stdout, parent, summary, subs, nsubs);
        return 0;
    }
    for (size_t i = 0; i < nsubs; i++) {
        if (strcmp(argv[1], subs[i].name) == 0)
            return subs[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "lmcache %s: unknown %s '%s'\n\n", parent,
            argv[1][0] == '-' ? "option" : "command", argv[1]);
    sub_usage(stderr, parent, summary, subs, nsubs);
    return 2;
}

char *lmc_cli_command_line(int argc, char **argv)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&b, "lmcache trace");
    for (int i = 0; i < argc; i++) {
        lmc_strbuf_puts(&b, " ");
        bool plain = argv[i][0] != '\0' && strpbrk(argv[i], " \t\n'\"\\$`*?[]{}()<>|;&~#") == NULL;
        if (plain) {
            lmc_strbuf_puts(&b, argv[i]);
            continue;
        }
        lmc_strbuf_puts(&b, "'");
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'')
                lmc_strbuf_puts(&b, "'\\''");
            else
                lmc_strbuf_append(&b, p, 1);
        }
        lmc_strbuf_puts(&b, "'");
    }
    return lmc_strbuf_finish(&b);
}
