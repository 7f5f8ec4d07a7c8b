/*
 * cmd_bench.c -- `lmcache bench server|micro`.
 */
#include <stdio.h>

#include "bench.h"
#include "cli.h"

static int not_yet(const char *name, int argc, char **argv)
{
    if (argc >= 2 && lmc_cli_is_help(argv[1])) {
        printf("usage: lmcache bench %s [--help] [options]\n", name);
        return 0;
    }
    fprintf(stderr, "lmcache bench %s: not implemented yet in this build\n", name);
    return 2;
}

static int cmd_bench_server(int argc, char **argv)
{
    return not_yet("server", argc, argv);
}

static int cmd_bench_micro(int argc, char **argv)
{
    return lmc_bench_micro_main(argc, argv);
}

static const lmc_cli_command subs[] = {
    {"server", "drive a running server with a Mooncake trace or a synthetic workload",
     cmd_bench_server},
    {"micro", "micro-benchmarks of the library (groups sm, trace, replay, server)",
     cmd_bench_micro},
};

int lmc_cmd_bench(int argc, char **argv)
{
    return lmc_cli_dispatch("bench", "Benchmarks.", subs, sizeof(subs) / sizeof(subs[0]), argc,
                            argv);
}
