/*
 * redis_cluster.c -- a local Redis Cluster for the end-to-end tests
 * (l2/redis_local.h): started, described in a file, kept until stopped.
 *
 * usage: redis_cluster MASTERS OUT
 *   Starts MASTERS (>= 3) masters on free loopback ports, then writes OUT
 *   (whole, by a rename) with two lines: the seed list as a JSON array,
 *   ["127.0.0.1:P1", ...], and the ports separated by spaces. It then waits
 *   for SIGTERM or SIGINT (sent to it, or, through PR_SET_PDEATHSIG, when
 *   its parent dies), stops every node, removes the cluster's directory and
 *   exits 0. Exit 1 when the cluster cannot start (the message says why).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "l2/redis_local.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 3) {
        fprintf(stderr, "usage: redis_cluster MASTERS OUT (MASTERS >= 3)\n");
        return 2;
    }
    /* Blocked until the wait below, so that a signal cannot slip in before it. */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, &old);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the test script died: clean up all the same */
    lmc_redis_cluster *c = NULL;
    lmc_error err;
    if (lmc_redis_cluster_start((size_t)atoi(argv[1]), 0, NULL, &c, &err) != LMC_OK) {
        fprintf(stderr, "redis_cluster: %s\n", err.msg);
        return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
    FILE *f = fopen(tmp, "w");
    int rc = f == NULL ? 1 : 0;
    for (size_t i = 0; f != NULL && i < lmc_redis_cluster_size(c); i++)
        fprintf(f, "%s\"127.0.0.1:%d\"", i ? ", " : "[", lmc_redis_cluster_port(c, i));
    for (size_t i = 0; f != NULL && i < lmc_redis_cluster_size(c); i++)
        fprintf(f, "%s%d", i ? " " : "]\n", lmc_redis_cluster_port(c, i));
    if (f != NULL && (fprintf(f, "\n") < 0 || fclose(f) != 0 || rename(tmp, argv[2]) != 0))
        rc = 1;
    if (rc != 0)
        fprintf(stderr, "redis_cluster: cannot write %s: %s\n", argv[2], strerror(errno));
    while (rc == 0 && !g_stop)
        sigsuspend(&old);
    lmc_redis_cluster_stop(c);
    return rc;
}
