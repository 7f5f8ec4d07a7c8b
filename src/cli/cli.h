/*
 * cli.h -- the subcommands of `lmcache` and small helpers they share.
 */
#ifndef LMC_CLI_CLI_H
#define LMC_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

typedef struct lmc_cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} lmc_cli_command;

int lmc_cmd_server(int argc, char **argv);
int lmc_cmd_trace(int argc, char **argv);
int lmc_cmd_bench(int argc, char **argv);
/* `lmcache trace analyze` (cmd_analyze.c). */
int lmc_cmd_trace_analyze(int argc, char **argv);

/* `lmcache trace dump` and `lmcache trace slice` (cmd_trace_dump.c). */
int lmc_cmd_trace_dump(int argc, char **argv);
int lmc_cmd_trace_slice(int argc, char **argv);

/* True when arg is "-h" or "--help". */
bool lmc_cli_is_help(const char *arg);

/*
 * Dispatch argv[1] among subs (argv[0] is the parent command's name, e.g.
 * "trace"). Prints the parent's usage for --help (exit 0) and for a missing
 * or unknown subcommand (exit 2).
 */
int lmc_cli_dispatch(const char *parent, const char *summary, const lmc_cli_command *subs,
                     size_t nsubs, int argc, char **argv);

#endif
