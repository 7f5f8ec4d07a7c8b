/*
 * peers.h -- the server's client connections as the ROUTER's socket
 * monitor reports them: a serial number per connection (lmc_peer.conn),
 * which connection a message came from, which user runs the process at
 * the other end (lmc_peer.uid), and the news that a connection closed.
 *
 * Owns: the monitor's PAIR socket (ZMQ_EVENT_ACCEPTED and _DISCONNECTED of
 * the ROUTER) and a table, by socket fd, of the live connections: serial
 * number, the routing id first seen on it, the peer's uid once looked up.
 *
 * Why this way:
 *  - A ROUTER never says that a peer left, and ZMQ_ROUTER_NOTIFY, which
 *    would, is a draft option Debian 12's libzmq 4.3.4 is built without.
 *    The monitor says it, by fd; each message carries the fd it came in on
 *    (ZMQ_SRCFD).
 *  - A message belongs to a connection only if its fd is live and its
 *    routing id is the one first seen on that fd. A message still queued
 *    from a closed connection whose fd number the kernel has already given
 *    to a new one belongs to none (conn 0): it cannot act for the newcomer.
 *    The monitor pipe has no high-water mark, so no event is dropped, and
 *    events are read before each message, so a message never overtakes the
 *    event of its own connection.
 *  - The uid comes from peer_uid.h, looked up on the connection's fd and
 *    checked against the monitor afterwards, so an fd closed and reused
 *    meanwhile gives -1, not a stranger's uid.
 *
 * Threads: the loop thread only (it owns the ROUTER, and so the monitor).
 */
#ifndef LMC_SERVER_PEERS_H
#define LMC_SERVER_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "server/protocol.h"

typedef struct lmc_peers lmc_peers;

/* A message's connection: conn 0 when none (lmc_request.conn_id), uid -1 when unknown. */
typedef struct lmc_peer {
    uint64_t conn;
    int64_t uid;
} lmc_peer;

/* Called with the serial number of each connection that closed. */
typedef void (*lmc_peer_gone_fn)(void *ud, uint64_t conn);

/* Monitor router (before it binds, so no connection is missed); gone may be NULL. */
lmc_status lmc_peers_create(void *zctx, void *router, lmc_peer_gone_fn gone, void *ud,
                            lmc_peers **out, lmc_error *err);
/* Stops the monitor; call before closing the router. */
void lmc_peers_destroy(lmc_peers *p);

/* The monitor's socket, for zmq_poll (ZMQ_POLLIN: call lmc_peers_poll). */
void *lmc_peers_socket(lmc_peers *p);
/* Read the monitor's events without waiting. */
void lmc_peers_poll(lmc_peers *p);

/*
 * The connection a message came from: fd is its ZMQ_SRCFD, id its routing
 * id (the ROUTER's identity frame). with_uid also looks up the peer's uid
 * (a netlink round trip, cached per connection).
 */
lmc_peer lmc_peers_identify(lmc_peers *p, int fd, const void *id, size_t id_len, bool with_uid);

/* Live connections now. */
size_t lmc_peers_count(const lmc_peers *p);

#endif
