/*
 * cli_util.c -- helpers shared by the subcommands (see cli.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

bool lmc_cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
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
