/*
 * clear_loop.c -- calls `clear` (non-forced) on a server every PERIOD_MS for
 * SECONDS, for the soak test (clear races with stores, prefetches, reads).
 *
 * usage: clear_loop HOST PORT SECONDS [PERIOD_MS]
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "lmcache/client.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: clear_loop HOST PORT SECONDS [PERIOD_MS]\n");
        return 2;
    }
    lmc_client_config cfg;
    lmc_client_config_init(&cfg);
    cfg.host = argv[1];
    cfg.port = atoi(argv[2]);
    cfg.model_name = "soak-clear";
    cfg.num_blocks = 16;
    cfg.timeout_ms = 10000;
    lmc_client *c;
    lmc_error err;
    if (lmc_client_create(&cfg, &c, &err) != LMC_OK) {
        fprintf(stderr, "clear_loop: %s\n", err.msg);
        return 1;
    }
    uint64_t end = lmc_mono_ms() + (uint64_t)atoi(argv[3]) * 1000;
    uint64_t period = argc > 4 ? (uint64_t)atoi(argv[4]) : 200;
    int calls = 0, failures = 0;
    while (lmc_mono_ms() < end) {
        if (lmc_client_clear(c, false, &err) != LMC_OK)
            failures++;
        calls++;
        lmc_sleep_ns(period * 1000000ull);
    }
    lmc_client_destroy(c);
    printf("clear_loop: %d clears, %d failed\n", calls, failures);
    return failures == 0 ? 0 : 1;
}
