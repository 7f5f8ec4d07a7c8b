/*
 * main.c -- the `lmcache` command: dispatches to one subcommand.
 *
 * Each subcommand lives in its own file (cmd_<name>.c) and exposes
 * `int lmc_cmd_<name>(int argc, char **argv)` where argv[0] is the
 * subcommand's own name. Exit codes: 0 success, 1 failure, 2 usage error.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const lmc_cli_command commands[] = {
    {"server", "run a KV-cache server (StorageManager over ZMQ), optionally recording a trace",
     lmc_cmd_server},
    {"trace", "inspect and replay LMCache trace files (.lct)", lmc_cmd_trace},
    {"bench", "benchmarks: drive a server with a workload, or run micro-benchmarks",
     lmc_cmd_bench},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: lmcache [--help] [--version] <command> [<args>]\n\n"
                 "A C implementation of LMCache's KV-cache storage layer with trace\n"
                 "recording and replay.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'lmcache <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("lmcache %s\n", LMC_VERSION);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    if (name[0] == '-')
        fprintf(stderr, "lmcache: unknown option '%s'\n\n", name);
    else
        fprintf(stderr, "lmcache: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
