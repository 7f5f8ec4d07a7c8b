/*
 * cmd_server.c -- `lmcache server`.
 */
#include <stdio.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache server [--help] [options]\n\n"
            "Run a KV-cache server hosting one StorageManager, speaking LMCache's\n"
            "multiprocess protocol over ZMQ; with --trace-level storage it records\n"
            "every StorageManager call to a .lct trace file.\n");
}

int lmc_cmd_server(int argc, char **argv)
{
    if (argc >= 2 && lmc_cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "lmcache server: not implemented yet in this build\n");
    return 2;
}
