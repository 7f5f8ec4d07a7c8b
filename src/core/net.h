/*
 * net.h -- small socket helpers for the programs that start a server of
 * their own (the micro-benchmarks, the tests): a free loopback TCP port.
 *
 * Owns nothing. Threads: reentrant.
 */
#ifndef LMC_CORE_NET_H
#define LMC_CORE_NET_H

#include "lmcache/status.h"

/*
 * A TCP port on 127.0.0.1 that the kernel just handed out (bound to port 0,
 * read back, closed). Another process can take it before the caller binds
 * it: callers that bind retry with a fresh port. LMC_ERR_IO naming the
 * failed call otherwise.
 */
lmc_status lmc_net_free_loopback_port(int *port, lmc_error *err);

#endif
