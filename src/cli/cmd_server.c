/*
 * cmd_server.c -- `lmcache server`: run a KV-cache server until SIGINT or
 * SIGTERM, then shut down cleanly (a recording server leaves a complete
 * trace file).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "server/server.h"

static lmc_server *g_server; /* for the signal handler only */

static void on_signal(int sig)
{
    (void)sig;
    if (g_server != NULL)
        lmc_server_stop(g_server); /* async-signal-safe: one write(2) */
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lmcache server [--help] --l1-size-gb GB --eviction-policy P [options]\n\n"
            "Run a KV-cache server hosting one StorageManager, speaking LMCache's\n"
            "multiprocess protocol over ZMQ (docs/protocol.md), with CPU shared memory\n"
            "standing in for GPU buffers. With --trace-level storage it records every\n"
            "StorageManager call to a .lct trace. SIGINT or SIGTERM shut it down cleanly.\n\n");
    lmc_server_print_help(out);
}

int lmc_cmd_server(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (lmc_cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
    }
    lmc_server_config cfg;
    lmc_server_config_init(&cfg);
    lmc_error err;
    if (lmc_server_config_parse(&cfg, argc, argv, &err) != LMC_OK) {
        fprintf(stderr, "lmcache server: %s\n", err.msg);
        lmc_server_config_free(&cfg);
        return 2;
    }
    lmc_server *s;
    if (lmc_server_create(&cfg, &s, &err) != LMC_OK) {
        fprintf(stderr, "lmcache server: %s\n", err.msg);
        lmc_server_config_free(&cfg);
        return 1;
    }
    g_server = s;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    lmc_status st = lmc_server_run(s);
    g_server = NULL;
    lmc_server_destroy(s);
    lmc_server_config_free(&cfg);
    return st == LMC_OK ? 0 : 1;
}
