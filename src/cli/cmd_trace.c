/*
 * cmd_trace.c -- `lmcache trace info|replay|record`.
 */
#include <stdio.h>

#include "cli.h"

static int cmd_trace_info(int argc, char **argv)
{
    if (argc >= 2 && lmc_cli_is_help(argv[1])) {
        printf("usage: lmcache trace info [--help] FILE\n");
        return 0;
    }
    fprintf(stderr, "lmcache trace info: not implemented yet in this build\n");
    return 2;
}

static int cmd_trace_replay(int argc, char **argv)
{
    if (argc >= 2 && lmc_cli_is_help(argv[1])) {
        printf("usage: lmcache trace replay [--help] FILE <storage-manager flags>\n");
        return 0;
    }
    fprintf(stderr, "lmcache trace replay: not implemented yet in this build\n");
    return 2;
}

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
    {"record", "how to record a trace (capture is a server flag)", cmd_trace_record},
};

int lmc_cmd_trace(int argc, char **argv)
{
    return lmc_cli_dispatch("trace", "Inspect and replay LMCache trace files.", subs,
                            sizeof(subs) / sizeof(subs[0]), argc, argv);
}
