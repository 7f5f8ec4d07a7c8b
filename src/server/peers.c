/*
 * peers.c -- the server's client connections from the ROUTER's socket
 * monitor (see peers.h).
 */
#include "server/peers.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/log.h"
#include "server/peer_uid.h"

#define LOG_COMP "server"
/* A routing id is 1..255 bytes (ZMQ_ROUTING_ID). */
#define MAX_ROUTING_ID 255
#define MONITOR_ENDPOINT "inproc://lmcache-peers"
#define MONITOR_EVENTS (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED)

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
        int64_t uid = lmc_socket_peer_uid(fd, &why);
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
