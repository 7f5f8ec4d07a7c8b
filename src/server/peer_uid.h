/*
 * peer_uid.h -- which user runs the process at the other end of a TCP
 * connection, when that end is on this host.
 *
 * TCP carries no credentials (SO_PEERCRED is for Unix sockets), but for a
 * peer on this host (same network namespace) the kernel's socket table
 * knows the other end's socket and its owner: the uid that created it.
 * A peer on another host has no socket here, so its uid is unknown. This
 * is what lets register_kv_cache refuse a shared-memory object that the
 * connecting user does not own (regions.h).
 *
 * Owns nothing. Threads: reentrant (one netlink socket per call, closed
 * before it returns; it waits at most half a second for the kernel).
 */
#ifndef LMC_SERVER_PEER_UID_H
#define LMC_SERVER_PEER_UID_H

#include <stdint.h>

/*
 * The uid owning the other end of connected TCP socket fd, or -1 when it
 * cannot be known; *why then says why (a static string).
 */
int64_t lmc_socket_peer_uid(int fd, const char **why);

#endif
