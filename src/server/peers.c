/*
 * peers.c -- the server's client connections from the ROUTER's socket
 * monitor, and the uid of a local TCP peer (see peers.h).
 */
#include "server/peers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/log.h"

#define LOG_COMP "server"
/* A routing id is 1..255 bytes (ZMQ_ROUTING_ID). */
#define MAX_ROUTING_ID 255
#define MONITOR_ENDPOINT "inproc://lmcache-peers"
#define MONITOR_EVENTS (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED)
/* How long a sock_diag answer may take before the uid counts as unknown. */
#define DIAG_TIMEOUT_MS 500

typedef struct conn_entry {
    uint64_t conn; /* 0: no live connection on this fd */
    int64_t uid;   /* -1 unknown */
    bool uid_looked_up;
    uint8_t id_len; /* 0: no message seen yet */
    uint8_t id[MAX_ROUTING_ID];
} conn_entry;

struct lmc_peers {
    void *router;
    void *mon;
    lmc_peer_gone_fn gone;
    void *ud;
    conn_entry *by_fd;
    size_t cap;
    uint64_t next_conn;
    size_t live;
    bool warned_uid;
};

lmc_status lmc_peers_create(void *zctx, void *router, lmc_peer_gone_fn gone, void *ud,
                            lmc_peers **out, lmc_error *err)
{
    lmc_peers *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    p->router = router;
    p->gone = gone;
    p->ud = ud;
    p->next_conn = 1;
    int unlimited = 0;
    if (zmq_socket_monitor(router, MONITOR_ENDPOINT, MONITOR_EVENTS) != 0 ||
        (p->mon = zmq_socket(zctx, ZMQ_PAIR)) == NULL ||
        zmq_setsockopt(p->mon, ZMQ_RCVHWM, &unlimited, sizeof(unlimited)) != 0 ||
        zmq_connect(p->mon, MONITOR_ENDPOINT) != 0) {
        lmc_status st = lmc_error_set(err, LMC_ERR_IO, "server: cannot monitor connections: %s",
                                      zmq_strerror(zmq_errno()));
        lmc_peers_destroy(p);
        return st;
    }
    *out = p;
    return LMC_OK;
}

void lmc_peers_destroy(lmc_peers *p)
{
    if (p == NULL)
        return;
    zmq_socket_monitor(p->router, NULL, 0);
    if (p->mon != NULL)
        zmq_close(p->mon);
    free(p->by_fd);
    free(p);
}

void *lmc_peers_socket(lmc_peers *p)
{
    return p->mon;
}

size_t lmc_peers_count(const lmc_peers *p)
{
    return p->live;
}

static conn_entry *entry_of(lmc_peers *p, int fd, bool grow)
{
    if (fd < 0)
        return NULL;
    if ((size_t)fd >= p->cap) {
        if (!grow)
            return NULL;
        size_t cap = p->cap ? p->cap : 64;
        while (cap <= (size_t)fd)
            cap *= 2;
        conn_entry *t = realloc(p->by_fd, cap * sizeof(*t));
        if (t == NULL)
            return NULL;
        memset(t + p->cap, 0, (cap - p->cap) * sizeof(*t));
        p->by_fd = t;
        p->cap = cap;
    }
    return &p->by_fd[fd];
}

static void entry_close(lmc_peers *p, conn_entry *e)
{
    if (e->conn == 0)
        return;
    uint64_t conn = e->conn;
    memset(e, 0, sizeof(*e));
    p->live--;
    if (p->gone != NULL)
        p->gone(p->ud, conn);
}

void lmc_peers_poll(lmc_peers *p)
{
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, p->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        /* Frame 1: uint16 event, uint32 value (the fd); frame 2: the endpoint. */
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&value, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
        }
        bool more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        while (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, p->mon, 0);
            more = zmq_msg_more(&addr);
            zmq_msg_close(&addr);
        }
        int fd = (int)value;
        if (event == ZMQ_EVENT_ACCEPTED) {
            conn_entry *e = entry_of(p, fd, true);
            if (e == NULL) {
                LMC_WARN(LOG_COMP, "out of memory tracking connection fd %d", fd);
                continue;
            }
            entry_close(p, e); /* a connection on this fd we were not told closed */
            e->conn = p->next_conn++;
            e->uid = -1;
            p->live++;
        } else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED) {
            conn_entry *e = entry_of(p, fd, false);
            if (e != NULL)
                entry_close(p, e);
        }
    }
}

/* Fill a sock_diag address field (network order, as the kernel keeps it). */
static bool diag_addr(const struct sockaddr_storage *sa, __be16 *port, __be32 addr[4])
{
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *port = in->sin_port;
        memcpy(addr, &in->sin_addr, 4);
        return true;
    }
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        *port = in6->sin6_port;
        memcpy(addr, &in6->sin6_addr, 16);
        return true;
    }
    return false;
}

/*
 * The uid owning the other end of TCP connection fd, if that end is a
 * socket of this host (network namespace); -1 otherwise. The peer's socket
 * is the one whose local address is our peer address and whose remote
 * address is ours.
 */
static int64_t socket_peer_uid(int fd, const char **why)
{
    struct sockaddr_storage self, peer;
    socklen_t sl = sizeof(self), pl = sizeof(peer);
    memset(&self, 0, sizeof(self));
    memset(&peer, 0, sizeof(peer));
    *why = "not a TCP connection";
    if (getsockname(fd, (struct sockaddr *)&self, &sl) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || self.ss_family != peer.ss_family)
        return -1;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nlh.nlmsg_len = sizeof(req);
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = (__u8)peer.ss_family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (!diag_addr(&peer, &req.r.id.idiag_sport, req.r.id.idiag_src) ||
        !diag_addr(&self, &req.r.id.idiag_dport, req.r.id.idiag_dst))
        return -1;

    int64_t uid = -1;
    *why = "sock_diag is not available";
    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0)
        return -1;
    struct timeval tv = {.tv_sec = 0, .tv_usec = DIAG_TIMEOUT_MS * 1000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    union {
        struct nlmsghdr h;
        char bytes[8192];
    } buf;
    int n = -1;
    if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) ==
        (ssize_t)sizeof(req))
        n = (int)recv(s, &buf, sizeof(buf), 0);
    *why = "the peer is not a socket of this host";
    for (struct nlmsghdr *h = &buf.h; n > 0 && NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
            h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
            break; /* NLMSG_ERROR: no such socket */
        const struct inet_diag_msg *m = NLMSG_DATA(h);
        if (m->id.idiag_sport == req.r.id.idiag_sport &&
            m->id.idiag_dport == req.r.id.idiag_dport) {
            uid = (int64_t)m->idiag_uid;
            break;
        }
    }
    close(s);
    return uid;
}

lmc_peer lmc_peers_identify(lmc_peers *p, int fd, const void *id, size_t id_len, bool with_uid)
{
    lmc_peer none = {.conn = 0, .uid = -1};
    conn_entry *e = entry_of(p, fd, false);
    if (e == NULL || e->conn == 0) {
        lmc_peers_poll(p); /* its ACCEPTED may have just arrived */
        e = entry_of(p, fd, false);
    }
    if (e == NULL || e->conn == 0 || id_len == 0 || id_len > MAX_ROUTING_ID)
        return none;
    if (e->id_len == 0) {
        e->id_len = (uint8_t)id_len;
        memcpy(e->id, id, id_len);
    } else if (e->id_len != id_len || memcmp(e->id, id, id_len) != 0) {
        return none; /* left over from an earlier connection on this fd */
    }
    if (with_uid && !e->uid_looked_up) {
        uint64_t conn = e->conn;
        const char *why = "";
        int64_t uid = socket_peer_uid(fd, &why);
        lmc_peers_poll(p); /* the fd may have closed, and been reused, during the lookup */
        e = entry_of(p, fd, false);
        if (e == NULL || e->conn != conn)
            return none;
        e->uid = uid;
        e->uid_looked_up = true;
        if (uid < 0 && !p->warned_uid) {
            p->warned_uid = true;
            LMC_WARN(LOG_COMP,
                     "connection %llu: cannot tell which user the client runs as (%s); "
                     "register_kv_cache refuses its regions (warned once)",
                     (unsigned long long)conn, why);
        }
    }
    return (lmc_peer){.conn = e->conn, .uid = e->uid};
}
