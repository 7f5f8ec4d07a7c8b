/*
 * peer_uid.c -- which user runs the process at the other end of a local TCP
 * connection (see peer_uid.h): one NETLINK_SOCK_DIAG request for the
 * socket with the connection's two addresses swapped.
 */
#include "server/peer_uid.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* How long a sock_diag answer may take before the uid counts as unknown. */
#define DIAG_TIMEOUT_MS 500

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

/* The peer's socket is the one whose local address is our peer address and whose remote is ours. */
int64_t lmc_socket_peer_uid(int fd, const char **why)
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
    /* NLMSG_OK compares the header's u32 length with len: an unsigned len keeps both compilers quiet. */
    unsigned int len = n > 0 ? (unsigned int)n : 0;
    for (struct nlmsghdr *h = &buf.h; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
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
