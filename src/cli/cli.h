/*
 * cli.h -- the subcommands of `lmcache` and small helpers they share.
 */
#ifndef LMC_CLI_CLI_H
#define LMC_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "replay/driver.h"

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
/* `lmcache trace compare` (cmd_trace_compare.c). */
int lmc_cmd_trace_compare(int argc, char **argv);
/* `lmcache trace sweep` (cmd_trace_sweep.c). */
int lmc_cmd_trace_sweep(int argc, char **argv);

/* True when arg is "-h" or "--help". */
bool lmc_cli_is_help(const char *arg);

/* A flag given without its value: "lmcache trace CMD: FLAG: a value is required"; returns 2. */
int lmc_cli_missing_value(const char *cmd, const char *flag);

/*
 * The value of --format for a command with a table and a JSON rendering:
 * "terminal" or "json" (*json set); 2 with the message printed for
 * anything else, a missing value included.
 */
int lmc_cli_parse_format(const char *cmd, const char *value, bool *json);

/*
 * One flag at argv[*i]: 1 when it was one (consumed, *i past its value), 0
 * when it is not, 2 on a usage error (message printed). ctx is the
 * command's options.
 */
typedef int (*lmc_cli_flag_fn)(const char *arg, int argc, char **argv, int *i, void *ctx);

/*
 * The arguments of `lmcache trace CMD FILE [flags]`: --help anywhere
 * prints usage to stdout (exit 0); each argument is offered to flag; any
 * other that starts with '-' is an unknown option; one FILE, required.
 * Stops at the first error. True when the command should run (*path
 * set); otherwise *rc is the exit code (messages printed).
 */
bool lmc_cli_parse_trace_args(const char *cmd, int argc, char **argv, lmc_cli_flag_fn flag,
                              void *ctx, void (*usage)(FILE *), const char **path, int *rc);

/*
 * The replay flags that trace replay and trace sweep both take (sweep
 * passes them on to each replay): --mode and --pace, whose choices are
 * replay's tables, and --time-scale. The caller sets its defaults first.
 */
typedef struct lmc_cli_replay_flags {
    lmc_replay_mode mode;
    lmc_replay_pace pace;
    double time_scale;
    const char *time_scale_text; /* as given (borrowed from argv) */
} lmc_cli_replay_flags;

/*
 * argv[*i] as one of those flags, into *f, as an lmc_cli_flag_fn answers:
 * 1 when it was one, 0 when it is none of them, 2 with the message printed
 * ("lmcache trace CMD: --mode: unknown mode ...", a missing value).
 */
int lmc_cli_parse_replay_flag(const char *cmd, const char *arg, int argc, char **argv, int *i,
                              lmc_cli_replay_flags *f);

/* The --mode and --pace choices as a usage text lists them: "calls|engine", "realtime|virtual". */
typedef struct lmc_cli_replay_choices {
    char modes[64], paces[64];
} lmc_cli_replay_choices;
lmc_cli_replay_choices lmc_cli_replay_choices_get(void);

/*
 * `lmcache trace` and argv (argv[0] the subcommand) as one shell-quoted
 * string, for reports and results that name their command; the caller
 * frees it (NULL when memory runs out).
 */
char *lmc_cli_command_line(int argc, char **argv);

/*
 * Write text to path (lmc_file_write_all: a file beside it, then a rename):
 * 0, or 1 with "lmcache trace CMD: FLAG 'PATH' <why>" printed.
 */
int lmc_cli_save(const char *cmd, const char *path, const char *flag, const char *text);

/*
 * Dispatch argv[1] among subs (argv[0] is the parent command's name, e.g.
 * "trace"). Prints the parent's usage for --help (exit 0) and for a missing
 * or unknown subcommand (exit 2).
 */
int lmc_cli_dispatch(const char *parent, const char *summary, const lmc_cli_command *subs,
                     size_t nsubs, int argc, char **argv);

#endif
