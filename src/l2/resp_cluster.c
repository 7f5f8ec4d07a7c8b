/*
 * resp_cluster.c -- Redis Cluster routing for the "resp" adapter (see
 * resp_cluster.h).
 *
 * Owns: the node table, the slot map, node health, the per-slot bytes, the
 * counters, the monitor thread and its connset. The file has four parts:
 * nodes and health, connsets, the batch run (routing, windows, redirects)
 * and the map (CLUSTER SLOTS, the monitor).
 *
 * Threads: the monitor ("l2-resp-<n>-map") refreshes the map and probes
 * down nodes; workers and the delete path run batches on their own
 * connsets. `lock` guards the table's growth and each node's id,
 * last_error and retry schedule, and the monitor's wake-up state; slot_node,
 * slot_bytes, a node's up/gen and the counters are atomics. Node indexes
 * are published with release stores (n_nodes, slot_node) so that a reader
 * that loads one with acquire sees the node it names.
 */
#include "l2/resp_cluster.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/crc16.h"
#include "core/log.h"

#define COMPONENT "l2-resp"
#define NO_NODE 0xffffu
#define BACKOFF_MIN_MS 50u
#define BACKOFF_MAX_MS 5000u
#define REFRESH_HEALTHY_MS 5000u
#define REFRESH_DEGRADED_MS 250u
#define REFRESH_GAP_MS 50u
#define MS 1000000u

_Static_assert(LMC_RESP_MAX_NODES < NO_NODE, "node indexes fit in the slot map");

typedef struct node {
    /* Immutable once published. */
    char host[256];
    int port;
    char addr[272];
    /* Atomics. */
    atomic_bool up;
    atomic_uint gen; /* bumped when it goes down: connections of an older gen are stale */
    /* Under cl->lock. */
    char id[41];
    char last_error[256];
    uint64_t next_try_ns; /* down: the monitor's next probe */
    uint64_t backoff_ms;
} node;

struct lmc_resp_cluster {
    lmc_resp_cluster_config cfg; /* seeds not kept */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    node *nodes[LMC_RESP_MAX_NODES];
    atomic_size_t n_nodes;
    bool stop;
    bool refresh_wanted;
    uint64_t last_refresh_ns;
    size_t rr; /* where the next refresh starts asking */

    _Atomic uint16_t slot_node[LMC_RESP_SLOTS];
    _Atomic int64_t slot_bytes[LMC_RESP_SLOTS];
    atomic_bool usable;

    pthread_t monitor;
    bool started;
    lmc_resp_connset *mon; /* the monitor's (and create's) connections */

    atomic_uint_fast64_t refreshes, refresh_failures, moved, ask, failed_cmds;
    atomic_uint_fast64_t open_conns, connects;
};

typedef struct cs_conn {
    redisContext *c;
    unsigned gen;
    uint64_t used_ns;
} cs_conn;

struct lmc_resp_connset {
    cs_conn *v;
    size_t cap;
};

/* ------------------------------------------------------------------ */
/* Keys and addresses                                                   */
/* ------------------------------------------------------------------ */

unsigned lmc_resp_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t start = (size_t)(open - key) + 1;
        const char *close = memchr(key + start, '}', len - start);
        if (close != NULL && close > key + start)
            return lmc_crc16_xmodem(key + start, (size_t)(close - key) - start) &
                   (LMC_RESP_SLOTS - 1);
    }
    return lmc_crc16_xmodem(key, len) & (LMC_RESP_SLOTS - 1);
}

bool lmc_resp_parse_addr(const char *s, size_t len, bool allow_empty_host, char *host,
                         size_t host_len, int *port)
{
    const char *colon = NULL;
    for (size_t i = len; i-- > 0;) {
        if (s[i] == ':') {
            colon = s + i;
            break;
        }
    }
    if (colon == NULL)
        return false;
    size_t hlen = (size_t)(colon - s), plen = len - hlen - 1;
    if ((hlen == 0 && !allow_empty_host) || hlen >= host_len || plen == 0 || plen > 5)
        return false;
    int p = 0;
    for (size_t i = 0; i < plen; i++) {
        char ch = colon[1 + i];
        if (ch < '0' || ch > '9')
            return false;
        p = p * 10 + (ch - '0');
    }
    if (p < 1 || p > 65535)
        return false;
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    *port = p;
    return true;
}

int lmc_resp_cluster_enabled(redisContext *c)
{
    redisReply *rep = redisCommand(c, "INFO cluster");
    if (rep == NULL)
        return -1;
    /* A server without the section (or refusing INFO) is not a cluster node. */
    int on = rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_enabled:1") != NULL;
    freeReplyObject(rep);
    return on;
}

/* ------------------------------------------------------------------ */
/* Nodes and health                                                     */
/* ------------------------------------------------------------------ */

static void report_error(lmc_resp_cluster *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void report_error(lmc_resp_cluster *cl, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (cl->cfg.on_error != NULL)
        cl->cfg.on_error(cl->cfg.ud, msg);
}

static size_t node_count(const lmc_resp_cluster *cl)
{
    return atomic_load_explicit(&cl->n_nodes, memory_order_acquire);
}

static unsigned slot_owner(const lmc_resp_cluster *cl, unsigned slot)
{
    return atomic_load_explicit(&cl->slot_node[slot], memory_order_acquire);
}

/* The index of host:port, added (up) when new; NO_NODE when the table is full or memory is out. */
static unsigned node_find_or_add(lmc_resp_cluster *cl, const char *host, int port)
{
    pthread_mutex_lock(&cl->lock);
    size_t n = node_count(cl);
    unsigned idx = NO_NODE;
    for (size_t i = 0; i < n; i++) {
        if (cl->nodes[i]->port == port && strcmp(cl->nodes[i]->host, host) == 0) {
            idx = (unsigned)i;
            break;
        }
    }
    node *nd = NULL;
    const char *why = n >= LMC_RESP_MAX_NODES            ? "too many nodes"
                      : strlen(host) >= sizeof(nd->host) ? "host name too long"
                                                         : "out of memory";
    if (idx == NO_NODE && n < LMC_RESP_MAX_NODES && strlen(host) < sizeof(nd->host) &&
        (nd = calloc(1, sizeof(*nd))) != NULL) {
        snprintf(nd->host, sizeof(nd->host), "%s", host);
        nd->port = port;
        snprintf(nd->addr, sizeof(nd->addr), strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host,
                 port);
        atomic_init(&nd->up, true); /* optimistic: a map or a redirect just named it */
        atomic_init(&nd->gen, 0);
        nd->backoff_ms = BACKOFF_MIN_MS;
        cl->nodes[n] = nd;
        idx = (unsigned)n;
        atomic_store_explicit(&cl->n_nodes, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&cl->lock);
    if (idx == NO_NODE)
        report_error(cl, "%s:%d: not added to the cluster's nodes (%s)", host, port, why);
    return idx;
}

static void wake_monitor(lmc_resp_cluster *cl, bool refresh)
{
    pthread_mutex_lock(&cl->lock);
    if (refresh)
        cl->refresh_wanted = true;
    pthread_cond_signal(&cl->cond);
    pthread_mutex_unlock(&cl->lock);
}

/* Count the slots served by a node that is up; *all: every slot is. */
static size_t slots_served(const lmc_resp_cluster *cl, bool *all)
{
    size_t served = 0;
    for (unsigned s = 0; s < LMC_RESP_SLOTS; s++) {
        unsigned idx = slot_owner(cl, s);
        served += idx != NO_NODE && atomic_load(&cl->nodes[idx]->up);
    }
    if (all != NULL)
        *all = served == LMC_RESP_SLOTS;
    return served;
}

static void update_usable(lmc_resp_cluster *cl)
{
    bool usable = slots_served(cl, NULL) > 0;
    if (atomic_exchange(&cl->usable, usable) != usable && cl->cfg.on_usable != NULL)
        cl->cfg.on_usable(cl->cfg.ud, usable);
}

/*
 * A connection of generation gen to node idx failed with msg: mark the
 * node down (once: a failure on a connection older than the node's last
 * outage says nothing new), so that its commands fail at once, and wake the
 * monitor to refresh the map and probe it.
 */
static void node_down(lmc_resp_cluster *cl, unsigned idx, unsigned gen, const char *msg)
{
    node *nd = cl->nodes[idx];
    bool now_down = false;
    pthread_mutex_lock(&cl->lock);
    snprintf(nd->last_error, sizeof(nd->last_error), "%s", msg);
    if (atomic_load(&nd->up) && atomic_load(&nd->gen) == gen) {
        atomic_store(&nd->up, false);
        atomic_fetch_add(&nd->gen, 1);
        nd->next_try_ns = lmc_mono_ns() + nd->backoff_ms * MS;
        now_down = true;
    }
    cl->refresh_wanted = true;
    pthread_cond_signal(&cl->cond);
    pthread_mutex_unlock(&cl->lock);
    report_error(cl, "%s: %s", nd->addr, msg);
    if (now_down) {
        LMC_WARN(COMPONENT,
                 "cluster node %s: %s; the tasks of its slots fail until it answers again "
                 "(retrying with backoff up to %u ms)",
                 nd->addr, msg, BACKOFF_MAX_MS);
        update_usable(cl);
    }
}

static void node_up(lmc_resp_cluster *cl, unsigned idx)
{
    node *nd = cl->nodes[idx];
    pthread_mutex_lock(&cl->lock);
    nd->backoff_ms = BACKOFF_MIN_MS;
    bool was_down = !atomic_exchange(&nd->up, true);
    pthread_mutex_unlock(&cl->lock);
    if (was_down) {
        LMC_INFO(COMPONENT, "cluster node %s answers again", nd->addr);
        update_usable(cl);
    }
}

/* ------------------------------------------------------------------ */
/* Connsets                                                             */
/* ------------------------------------------------------------------ */

lmc_resp_connset *lmc_resp_connset_create(void)
{
    return calloc(1, sizeof(lmc_resp_connset));
}

static void cs_close(lmc_resp_cluster *cl, cs_conn *cc)
{
    if (cc->c == NULL)
        return;
    redisFree(cc->c);
    cc->c = NULL;
    atomic_fetch_sub(&cl->open_conns, 1);
}

void lmc_resp_connset_destroy(lmc_resp_cluster *cl, lmc_resp_connset *cs)
{
    if (cs == NULL)
        return;
    for (size_t i = 0; i < cs->cap; i++)
        cs_close(cl, &cs->v[i]);
    free(cs->v);
    free(cs);
}

/* Open a connection to node idx into cc (a probe of a down node too). False: msg says why. */
static bool cs_open(lmc_resp_cluster *cl, cs_conn *cc, unsigned idx, char *msg, size_t len)
{
    node *nd = cl->nodes[idx];
    unsigned gen = atomic_load(&nd->gen);
    redisContext *c = cl->cfg.connect(cl->cfg.ud, nd->host, nd->port, msg, len);
    if (c == NULL)
        return false;
    cc->c = c;
    cc->gen = gen;
    cc->used_ns = lmc_mono_ns();
    atomic_fetch_add(&cl->open_conns, 1);
    atomic_fetch_add(&cl->connects, 1);
    return true;
}

/* cs's slot for node idx, grown on demand; NULL when memory is out. */
static cs_conn *cs_slot(lmc_resp_connset *cs, unsigned idx)
{
    if (idx >= cs->cap) {
        size_t cap = cs->cap == 0 ? 8 : cs->cap;
        while (cap <= idx)
            cap *= 2;
        cs_conn *v = realloc(cs->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        memset(v + cs->cap, 0, (cap - cs->cap) * sizeof(*v));
        cs->v = v;
        cs->cap = cap;
    }
    return &cs->v[idx];
}

/*
 * cs's live connection to node idx, opened when needed; NULL when the node
 * is down (at once, no I/O) or cannot be reached now (it is then marked
 * down). A connection opened before the node's last outage is replaced.
 */
static cs_conn *cs_get(lmc_resp_cluster *cl, lmc_resp_connset *cs, unsigned idx)
{
    node *nd = cl->nodes[idx];
    if (!atomic_load(&nd->up))
        return NULL;
    cs_conn *cc = cs_slot(cs, idx);
    if (cc == NULL)
        return NULL;
    if (cc->c != NULL && cc->gen != atomic_load(&nd->gen))
        cs_close(cl, cc);
    if (cc->c != NULL)
        return cc;
    char msg[256];
    unsigned gen = atomic_load(&nd->gen);
    if (cs_open(cl, cc, idx, msg, sizeof(msg)))
        return cc;
    node_down(cl, idx, gen, msg);
    return NULL;
}

/* cc's connection broke during what: close it and mark its node down. */
static void cs_lost(lmc_resp_cluster *cl, cs_conn *cc, unsigned idx, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", what,
             cc->c != NULL && cc->c->errstr[0] != '\0' ? cc->c->errstr : "connection lost");
    unsigned gen = cc->gen;
    cs_close(cl, cc);
    node_down(cl, idx, gen, msg);
}

bool lmc_resp_cluster_check(lmc_resp_cluster *cl, lmc_resp_connset *cs, uint64_t idle_ns)
{
    uint64_t now = lmc_mono_ns();
    for (size_t i = 0; i < cs->cap; i++) {
        cs_conn *cc = &cs->v[i];
        if (cc->c == NULL || now - cc->used_ns < idle_ns)
            continue;
        if (cc->gen != atomic_load(&cl->nodes[i]->gen)) {
            cs_close(cl, cc);
            continue;
        }
        redisReply *rep = redisCommand(cc->c, "PING");
        bool ok = rep != NULL && rep->type == REDIS_REPLY_STATUS;
        if (rep != NULL)
            freeReplyObject(rep);
        if (ok)
            cc->used_ns = lmc_mono_ns();
        else
            cs_lost(cl, cc, (unsigned)i, "PING");
    }
    return atomic_load(&cl->usable);
}

/* ------------------------------------------------------------------ */
/* The batch run                                                        */
/* ------------------------------------------------------------------ */

typedef struct item {
    uint32_t cmd;
    uint16_t node;
    uint8_t redirects;
    uint8_t asking; /* send ASKING first (an ASK redirect) */
} item;

/*
 * The items of one node in this round: [begin, end) of the sorted items.
 * Its connection is cs->v[node], looked up each time: opening another
 * node's connection may grow (move) cs->v.
 */
typedef struct group {
    unsigned node;
    size_t begin, sent, end; /* sent: the end of the window in flight */
    bool live;               /* false once the group has failed */
    bool drop;               /* close the connection after this window (a stray ASKING) */
} group;

typedef struct run_state {
    lmc_resp_cluster *cl;
    lmc_resp_connset *cs;
    const lmc_resp_batch *b;
    item *next; /* the next round's items */
    size_t n_next;
    size_t failed;
    bool warned; /* one routing message per run */
} run_state;

static int item_cmp(const void *pa, const void *pb)
{
    const item *a = pa, *b = pb;
    if (a->node != b->node)
        return a->node < b->node ? -1 : 1;
    return a->cmd < b->cmd ? -1 : a->cmd > b->cmd;
}

static void fail_items(run_state *rs, size_t count)
{
    rs->failed += count;
    atomic_fetch_add(&rs->cl->failed_cmds, count);
}

static void routing_error(run_state *rs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void routing_error(run_state *rs, const char *fmt, ...)
{
    if (rs->warned)
        return;
    rs->warned = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    report_error(rs->cl, "%s", msg);
}

/* Queue it for the next round on node idx, or fail it past the redirect budget. */
static void redirect(run_state *rs, item it, unsigned idx, bool asking, const char *why)
{
    if (idx == NO_NODE) {
        fail_items(rs, 1);
        return;
    }
    if (it.redirects >= LMC_RESP_MAX_REDIRECTS) {
        routing_error(rs, "%s: %d redirects (last: %s); the command fails", rs->b->what,
                      LMC_RESP_MAX_REDIRECTS, why);
        fail_items(rs, 1);
        return;
    }
    it.redirects++;
    it.node = (uint16_t)idx;
    it.asking = asking;
    rs->next[rs->n_next++] = it;
}

/*
 * A redirect reply: "MOVED <slot> <host>:<port>", "ASK <slot> <host>:<port>"
 * (an empty host means the node that answered), or TRYAGAIN. True when rep
 * was one (it is then handled: queued again or failed).
 */
static bool handle_redirect(run_state *rs, const group *g, item it, const redisReply *rep)
{
    lmc_resp_cluster *cl = rs->cl;
    if (rep->type != REDIS_REPLY_ERROR)
        return false;
    bool moved = rep->len > 6 && strncmp(rep->str, "MOVED ", 6) == 0;
    bool ask = rep->len > 4 && strncmp(rep->str, "ASK ", 4) == 0;
    if (rep->len >= 8 && strncmp(rep->str, "TRYAGAIN", 8) == 0) {
        redirect(rs, it, g->node, false, "TRYAGAIN");
        return true;
    }
    if (rep->len >= 11 && strncmp(rep->str, "CLUSTERDOWN", 11) == 0)
        wake_monitor(cl, true); /* an error for the caller, and a hint that the map moved */
    if (!moved && !ask)
        return false;
    const char *p = rep->str + (moved ? 6 : 4);
    char *end;
    unsigned long slot = strtoul(p, &end, 10);
    char host[256];
    int port;
    unsigned idx = NO_NODE;
    if (end != p && *end == ' ' && slot < LMC_RESP_SLOTS &&
        lmc_resp_parse_addr(end + 1, strlen(end + 1), true, host, sizeof(host), &port)) {
        idx = node_find_or_add(cl, host[0] != '\0' ? host : cl->nodes[g->node]->host, port);
    } else {
        routing_error(rs, "%s: %s: unreadable redirect '%.*s'", cl->nodes[g->node]->addr,
                      rs->b->what, (int)(rep->len > 80 ? 80 : rep->len), rep->str);
    }
    if (moved) {
        atomic_fetch_add(&cl->moved, 1);
        if (idx != NO_NODE) {
            atomic_store_explicit(&cl->slot_node[slot], (uint16_t)idx, memory_order_release);
            wake_monitor(cl, true);
        }
    } else {
        atomic_fetch_add(&cl->ask, 1);
    }
    redirect(rs, it, idx, ask, moved ? "MOVED" : "ASK");
    return true;
}

static cs_conn *group_conn(const run_state *rs, const group *g)
{
    return &rs->cs->v[g->node];
}

/* The group failed: close its connection (lost: its node is marked down), fail what is left. */
static void group_fail(run_state *rs, group *g, size_t from, bool lost)
{
    if (lost)
        cs_lost(rs->cl, group_conn(rs, g), g->node, rs->b->what);
    else if (g->drop)
        cs_close(rs->cl, group_conn(rs, g));
    fail_items(rs, g->end - from);
    g->begin = g->end;
    g->live = false;
}

/* Append g's next window and send it. */
static void send_window(run_state *rs, group *g, const item *items)
{
    const lmc_resp_batch *b = rs->b;
    redisContext *c = group_conn(rs, g)->c;
    size_t end = g->begin;
    uint64_t bytes = 0;
    while (end < g->end && end - g->begin < rs->cl->cfg.window_cmds &&
           bytes < rs->cl->cfg.window_bytes) {
        const item *it = &items[end];
        if (it->asking && redisAppendCommand(c, "ASKING") != REDIS_OK)
            break;
        if (!b->append(b->ud, c, it->cmd)) {
            g->drop = it->asking; /* its ASKING went out alone: the connection is out of step */
            break;
        }
        bytes += b->bytes(b->ud, it->cmd);
        end++;
    }
    if (end == g->begin) { /* not even one command: out of memory */
        routing_error(rs, "%s: %s: out of memory building a command", rs->cl->nodes[g->node]->addr,
                      b->what);
        group_fail(rs, g, g->begin, false);
        return;
    }
    if (end < g->end && end - g->begin < rs->cl->cfg.window_cmds &&
        bytes < rs->cl->cfg.window_bytes) {
        /* Stopped early by memory: the rest of the group fails after this window. */
        routing_error(rs, "%s: %s: out of memory building a command", rs->cl->nodes[g->node]->addr,
                      b->what);
        fail_items(rs, g->end - end);
        g->end = end;
    }
    g->sent = end;
    int done = 0;
    while (!done) {
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            group_fail(rs, g, g->begin, true);
            return;
        }
    }
}

/* Read the replies of g's window in flight. */
static void read_window(run_state *rs, group *g, const item *items)
{
    const lmc_resp_batch *b = rs->b;
    redisContext *c = group_conn(rs, g)->c;
    for (size_t k = g->begin; k < g->sent; k++) {
        const item *it = &items[k];
        void *rep = NULL;
        bool ok = true;
        if (it->asking) {
            ok = redisGetReply(c, &rep) == REDIS_OK && rep != NULL;
            if (rep != NULL)
                freeReplyObject(rep); /* +OK; an error here shows again on the command */
            rep = NULL;
        }
        if (!ok || redisGetReply(c, &rep) != REDIS_OK || rep == NULL) {
            group_fail(rs, g, k, true);
            return;
        }
        if (!handle_redirect(rs, g, *it, rep))
            b->reply(b->ud, it->cmd, rep);
        freeReplyObject(rep);
    }
    group_conn(rs, g)->used_ns = lmc_mono_ns();
    g->begin = g->sent;
    if (g->drop && g->begin == g->end) {
        cs_close(rs->cl, group_conn(rs, g));
        g->live = false;
    }
}

/* One round: every item on the node it is routed to; redirected ones go to rs->next. */
static void run_round(run_state *rs, item *items, size_t n, group *groups)
{
    qsort(items, n, sizeof(*items), item_cmp);
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && items[j].node == items[i].node)
            j++;
        group *g = &groups[ng++];
        *g = (group){.node = items[i].node, .begin = i, .sent = i, .end = j};
        g->live = cs_get(rs->cl, rs->cs, g->node) != NULL;
        if (!g->live) { /* down: these fail at once */
            routing_error(rs, "%s: %s: node down", rs->cl->nodes[g->node]->addr, rs->b->what);
            fail_items(rs, j - i);
            g->begin = g->end;
        }
        i = j;
    }
    for (bool busy = true; busy;) {
        busy = false;
        for (size_t k = 0; k < ng; k++) {
            if (groups[k].live && groups[k].begin < groups[k].end)
                send_window(rs, &groups[k], items);
        }
        for (size_t k = 0; k < ng; k++) {
            if (groups[k].live && groups[k].begin < groups[k].sent)
                read_window(rs, &groups[k], items);
            busy = busy || (groups[k].live && groups[k].begin < groups[k].end);
        }
    }
}

size_t lmc_resp_cluster_run(lmc_resp_cluster *cl, lmc_resp_connset *cs, const lmc_resp_batch *b)
{
    if (b->n == 0)
        return 0;
    item *cur = malloc(b->n * sizeof(*cur));
    item *next = malloc(b->n * sizeof(*next));
    group *groups = malloc(b->n * sizeof(*groups));
    run_state rs = {.cl = cl, .cs = cs, .b = b, .next = next};
    if (cur == NULL || next == NULL || groups == NULL || b->n > UINT32_MAX) {
        routing_error(&rs, "%s: out of memory routing %zu commands", b->what, b->n);
        fail_items(&rs, b->n);
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) {
        unsigned slot = b->slot(b->ud, i);
        unsigned idx = slot_owner(cl, slot);
        if (idx == NO_NODE) {
            routing_error(&rs, "%s: slot %u is served by no known node", b->what, slot);
            fail_items(&rs, 1);
            continue;
        }
        cur[n++] = (item){.cmd = (uint32_t)i, .node = (uint16_t)idx};
    }
    while (n > 0) {
        rs.next = next;
        rs.n_next = 0;
        run_round(&rs, cur, n, groups);
        item *t = cur;
        cur = next;
        next = t;
        n = rs.n_next;
    }
out:
    free(cur);
    free(next);
    free(groups);
    return rs.failed;
}

/* ------------------------------------------------------------------ */
/* The map                                                              */
/* ------------------------------------------------------------------ */

/* A string element of a reply, or NULL (nil, or not a string). */
static const char *reply_str(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ? r->str : NULL;
}

/*
 * Read a CLUSTER SLOTS reply asked of node `asked` into map (NO_NODE where
 * no master serves a slot). Each range: [start, end, [host, port, id, ...],
 * replicas...]; a nil or empty host means the node asked, "?" an unknown
 * endpoint (the range is left unserved). False when the reply is malformed.
 */
static bool parse_slots(lmc_resp_cluster *cl, unsigned asked, const redisReply *rep, uint16_t *map)
{
    if (rep->type != REDIS_REPLY_ARRAY)
        return false;
    for (unsigned s = 0; s < LMC_RESP_SLOTS; s++)
        map[s] = NO_NODE;
    for (size_t k = 0; k < rep->elements; k++) {
        const redisReply *range = rep->element[k];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2 ||
            range->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
            return false;
        long long lo = range->element[0]->integer, hi = range->element[1]->integer;
        const redisReply *master = range->element[2];
        long long port = master->element[1]->integer;
        if (lo < 0 || hi < lo || hi >= (long long)LMC_RESP_SLOTS || port < 1 || port > 65535)
            return false;
        const char *host = reply_str(master->element[0]);
        if (host != NULL && strcmp(host, "?") == 0)
            continue;
        if (host == NULL || host[0] == '\0')
            host = cl->nodes[asked]->host;
        unsigned idx = node_find_or_add(cl, host, (int)port);
        if (idx == NO_NODE)
            continue;
        const char *id = master->elements >= 3 ? reply_str(master->element[2]) : NULL;
        if (id != NULL) {
            pthread_mutex_lock(&cl->lock);
            snprintf(cl->nodes[idx]->id, sizeof(cl->nodes[idx]->id), "%s", id);
            pthread_mutex_unlock(&cl->lock);
        }
        for (long long s = lo; s <= hi; s++)
            map[s] = (uint16_t)idx;
    }
    return true;
}

/* serves[i]: node i serves some slot in the map now (n entries; NULL when memory is out). */
static bool *serving_nodes(const lmc_resp_cluster *cl, size_t n)
{
    bool *serves = calloc(n > 0 ? n : 1, sizeof(bool));
    for (unsigned s = 0; serves != NULL && s < LMC_RESP_SLOTS; s++) {
        unsigned idx = slot_owner(cl, s);
        if (idx != NO_NODE && idx < n)
            serves[idx] = true;
    }
    return serves;
}

static size_t map_coverage(const uint16_t *map)
{
    size_t covered = 0;
    for (unsigned s = 0; s < LMC_RESP_SLOTS; s++)
        covered += map[s] != NO_NODE;
    return covered;
}

/*
 * Ask one node after another for the map and apply the first answer: the
 * nodes that are up, those serving slots first, each pass from cl->rr on
 * (so a node with a stale view is not asked first every time). A map
 * without any slot, while ours has some, comes from a node outside the
 * cluster (a seed that was reset, say) and is passed over.
 */
static void refresh(lmc_resp_cluster *cl)
{
    uint16_t *map = malloc(LMC_RESP_SLOTS * sizeof(*map));
    size_t n = node_count(cl);
    bool *serves = serving_nodes(cl, n);
    bool done = false, have_slots = slots_served(cl, NULL) > 0;
    char last[512] = "no node is up";
    pthread_mutex_lock(&cl->lock);
    size_t start = cl->rr++;
    pthread_mutex_unlock(&cl->lock);
    for (size_t k = 0; map != NULL && k < 2 * n && !done; k++) {
        unsigned idx = (unsigned)((start + k) % n);
        if (serves != NULL && serves[idx] != (k < n))
            continue; /* the first pass asks the nodes serving slots, the second the others */
        cs_conn *cc = cs_get(cl, cl->mon, idx);
        if (cc == NULL)
            continue;
        redisReply *rep = redisCommand(cc->c, "CLUSTER SLOTS");
        if (rep == NULL) {
            cs_lost(cl, cc, idx, "CLUSTER SLOTS");
            snprintf(last, sizeof(last), "%s: CLUSTER SLOTS: connection lost",
                     cl->nodes[idx]->addr);
            continue;
        }
        cc->used_ns = lmc_mono_ns();
        if (rep->type == REDIS_REPLY_ERROR)
            snprintf(last, sizeof(last), "%s: CLUSTER SLOTS: %.*s", cl->nodes[idx]->addr,
                     (int)(rep->len > 160 ? 160 : rep->len), rep->str);
        else if (!parse_slots(cl, idx, rep, map))
            snprintf(last, sizeof(last), "%s: CLUSTER SLOTS: unexpected reply",
                     cl->nodes[idx]->addr);
        else if (have_slots && map_coverage(map) == 0)
            snprintf(last, sizeof(last), "%s: CLUSTER SLOTS: no slots (not in the cluster?)",
                     cl->nodes[idx]->addr);
        else
            done = true;
        freeReplyObject(rep);
    }
    free(serves);
    if (done) {
        for (unsigned s = 0; s < LMC_RESP_SLOTS; s++)
            atomic_store_explicit(&cl->slot_node[s], map[s], memory_order_release);
        atomic_fetch_add(&cl->refreshes, 1);
    } else {
        atomic_fetch_add(&cl->refresh_failures, 1);
        report_error(cl, "slot map not refreshed: %s", map == NULL ? "out of memory" : last);
    }
    free(map);
    pthread_mutex_lock(&cl->lock);
    cl->last_refresh_ns = lmc_mono_ns();
    cl->refresh_wanted = false;
    pthread_mutex_unlock(&cl->lock);
    update_usable(cl);
}

/*
 * Probe the down nodes whose retry time has come: those serving slots, or
 * every one when no slot is served (a seed may be the way back in).
 */
static void probe(lmc_resp_cluster *cl)
{
    size_t n = node_count(cl);
    bool any_served = slots_served(cl, NULL) > 0;
    bool *serves = serving_nodes(cl, n);
    for (size_t i = 0; i < n; i++) {
        node *nd = cl->nodes[i];
        uint64_t now = lmc_mono_ns();
        pthread_mutex_lock(&cl->lock);
        bool due = !atomic_load(&nd->up) && now >= nd->next_try_ns;
        if (due && any_served && serves != NULL && !serves[i]) {
            /* Serves nothing (a master replaced by its replica): look again later only. */
            nd->next_try_ns = now + (uint64_t)BACKOFF_MAX_MS * MS;
            due = false;
        }
        pthread_mutex_unlock(&cl->lock);
        cs_conn *cc = due ? cs_slot(cl->mon, (unsigned)i) : NULL;
        if (cc == NULL)
            continue;
        cs_close(cl, cc);
        char msg[256];
        if (cs_open(cl, cc, (unsigned)i, msg, sizeof(msg))) {
            node_up(cl, (unsigned)i);
            continue;
        }
        pthread_mutex_lock(&cl->lock);
        snprintf(nd->last_error, sizeof(nd->last_error), "%s", msg);
        nd->backoff_ms = nd->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : nd->backoff_ms * 2;
        nd->next_try_ns = lmc_mono_ns() + nd->backoff_ms * MS;
        pthread_mutex_unlock(&cl->lock);
    }
    free(serves);
}

/* When the next map refresh is due (caller holds cl->lock). */
static uint64_t refresh_at_ns(const lmc_resp_cluster *cl, bool healthy)
{
    unsigned ms = cl->refresh_wanted ? REFRESH_GAP_MS
                  : healthy          ? REFRESH_HEALTHY_MS
                                     : REFRESH_DEGRADED_MS;
    return cl->last_refresh_ns + (uint64_t)ms * MS;
}

/* When the monitor must next act: a refresh or a probe (caller holds cl->lock). */
static uint64_t next_wake_ns(const lmc_resp_cluster *cl, bool healthy)
{
    uint64_t at = refresh_at_ns(cl, healthy);
    size_t n = node_count(cl);
    for (size_t i = 0; i < n; i++) {
        if (!atomic_load(&cl->nodes[i]->up) && cl->nodes[i]->next_try_ns < at)
            at = cl->nodes[i]->next_try_ns;
    }
    return at;
}

static void *monitor_main(void *arg)
{
    lmc_resp_cluster *cl = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* a write to a dead node must fail, not kill */
    pthread_mutex_lock(&cl->lock);
    while (!cl->stop) {
        pthread_mutex_unlock(&cl->lock);
        bool healthy;
        slots_served(cl, &healthy);
        pthread_mutex_lock(&cl->lock);
        uint64_t wake = next_wake_ns(cl, healthy);
        uint64_t now = lmc_mono_ns();
        if (now < wake) {
            struct timespec ts = {(time_t)(wake / 1000000000u), (long)(wake % 1000000000u)};
            pthread_cond_timedwait(&cl->cond, &cl->lock, &ts);
            continue;
        }
        bool refresh_due = now >= refresh_at_ns(cl, healthy);
        pthread_mutex_unlock(&cl->lock);
        probe(cl);
        if (refresh_due)
            refresh(cl);
        pthread_mutex_lock(&cl->lock);
    }
    pthread_mutex_unlock(&cl->lock);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                             */
/* ------------------------------------------------------------------ */

lmc_status lmc_resp_cluster_create(const lmc_resp_cluster_config *cfg, lmc_resp_cluster **out,
                                   lmc_error *err)
{
    *out = NULL;
    lmc_resp_cluster *cl = calloc(1, sizeof(*cl));
    if (cl == NULL || (cl->mon = lmc_resp_connset_create()) == NULL) {
        free(cl);
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    }
    cl->cfg = *cfg;
    cl->cfg.seeds = NULL;
    cl->cfg.n_seeds = 0;
    pthread_mutex_init(&cl->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines are lmc_mono_ns */
    pthread_cond_init(&cl->cond, &ca);
    pthread_condattr_destroy(&ca);
    for (unsigned s = 0; s < LMC_RESP_SLOTS; s++) {
        atomic_init(&cl->slot_node[s], NO_NODE);
        atomic_init(&cl->slot_bytes[s], 0);
    }
    for (size_t i = 0; i < cfg->n_seeds; i++) {
        char host[256];
        int port;
        if (!lmc_resp_parse_addr(cfg->seeds[i], strlen(cfg->seeds[i]), false, host, sizeof(host),
                                 &port) ||
            node_find_or_add(cl, host, port) == NO_NODE) {
            lmc_status st =
                lmc_error_set(err, LMC_ERR_INVALID, "cannot use seed node '%s'", cfg->seeds[i]);
            lmc_resp_cluster_destroy(cl);
            return st;
        }
    }
    /* The seeds in order, each bounded by its timeouts; the first answer wins. */
    refresh(cl);
    *out = cl;
    return LMC_OK;
}

lmc_status lmc_resp_cluster_start(lmc_resp_cluster *cl, lmc_error *err)
{
    int e = pthread_create(&cl->monitor, NULL, monitor_main, cl);
    if (e != 0)
        return lmc_error_set(err, LMC_ERR_IO, "cannot start the cluster monitor: %s", strerror(e));
    cl->started = true;
    char name[16];
    snprintf(name, sizeof(name), "l2-resp-%u-map", cl->cfg.instance % 100u);
    pthread_setname_np(cl->monitor, name);
    return LMC_OK;
}

void lmc_resp_cluster_stop(lmc_resp_cluster *cl)
{
    if (cl == NULL || !cl->started)
        return;
    pthread_mutex_lock(&cl->lock);
    cl->stop = true;
    pthread_cond_signal(&cl->cond);
    pthread_mutex_unlock(&cl->lock);
    pthread_join(cl->monitor, NULL);
    cl->started = false;
}

void lmc_resp_cluster_destroy(lmc_resp_cluster *cl)
{
    if (cl == NULL)
        return;
    lmc_resp_cluster_stop(cl);
    lmc_resp_connset_destroy(cl, cl->mon);
    size_t n = node_count(cl);
    for (size_t i = 0; i < n; i++)
        free(cl->nodes[i]);
    pthread_mutex_destroy(&cl->lock);
    pthread_cond_destroy(&cl->cond);
    free(cl);
}

/* ------------------------------------------------------------------ */
/* Usage and status                                                     */
/* ------------------------------------------------------------------ */

bool lmc_resp_cluster_usable(const lmc_resp_cluster *cl)
{
    return atomic_load(&cl->usable);
}

bool lmc_resp_cluster_healthy(const lmc_resp_cluster *cl)
{
    bool all;
    slots_served(cl, &all);
    return all;
}

void lmc_resp_cluster_count_bytes(lmc_resp_cluster *cl, unsigned slot, int64_t delta)
{
    atomic_fetch_add_explicit(&cl->slot_bytes[slot % LMC_RESP_SLOTS], delta, memory_order_relaxed);
}

lmc_resp_cluster_stats lmc_resp_cluster_get_stats(const lmc_resp_cluster *cl)
{
    return (lmc_resp_cluster_stats){.open_connections = atomic_load(&cl->open_conns),
                                    .connects = atomic_load(&cl->connects)};
}

static lmc_json *error_or_null(const char *s)
{
    return s[0] != '\0' ? lmc_json_string(s) : lmc_json_null();
}

void lmc_resp_cluster_report_status(lmc_resp_cluster *cl, lmc_json *status)
{
    size_t n = node_count(cl);
    uint64_t *slots = calloc(n > 0 ? n : 1, sizeof(*slots));
    int64_t *bytes = calloc(n > 0 ? n : 1, sizeof(*bytes));
    size_t served = 0;
    for (unsigned s = 0; slots != NULL && bytes != NULL && s < LMC_RESP_SLOTS; s++) {
        unsigned idx = slot_owner(cl, s);
        if (idx == NO_NODE || idx >= n)
            continue;
        slots[idx]++;
        bytes[idx] += atomic_load_explicit(&cl->slot_bytes[s], memory_order_relaxed);
        served += atomic_load(&cl->nodes[idx]->up);
    }
    lmc_json *nodes = lmc_json_array(), *unhealthy = lmc_json_array();
    for (size_t i = 0; nodes != NULL && unhealthy != NULL && i < n; i++) {
        node *nd = cl->nodes[i];
        bool up = atomic_load(&nd->up);
        char id[sizeof(nd->id)], last_error[sizeof(nd->last_error)];
        pthread_mutex_lock(&cl->lock);
        memcpy(id, nd->id, sizeof(id));
        memcpy(last_error, nd->last_error, sizeof(last_error));
        pthread_mutex_unlock(&cl->lock);
        lmc_json *o = lmc_json_object();
        if (o == NULL)
            continue;
        lmc_json_object_set(o, "address", lmc_json_string(nd->addr));
        lmc_json_object_set(o, "id", id[0] != '\0' ? lmc_json_string(id) : lmc_json_null());
        lmc_json_object_set(o, "slots", lmc_json_int(slots != NULL ? (int64_t)slots[i] : 0));
        lmc_json_object_set(o, "healthy", lmc_json_bool(up));
        lmc_json_object_set(o, "last_error", error_or_null(last_error));
        /* Deletes of keys another process wrote can take a slot below 0; a node never is. */
        int64_t b = bytes != NULL && bytes[i] > 0 ? bytes[i] : 0;
        lmc_json_object_set(o, "bytes_used", lmc_json_int(b));
        lmc_json_array_append(nodes, o);
        if (!up) {
            lmc_json *u = lmc_json_object();
            if (u == NULL)
                continue;
            lmc_json_object_set(u, "address", lmc_json_string(nd->addr));
            lmc_json_object_set(u, "last_error", error_or_null(last_error));
            lmc_json_array_append(unhealthy, u);
        }
    }
    free(slots);
    free(bytes);
    lmc_json_object_set(status, "slots_served", lmc_json_int((int64_t)served));
    lmc_json_object_set(status, "map_refreshes",
                        lmc_json_int((int64_t)atomic_load(&cl->refreshes)));
    lmc_json_object_set(status, "map_refresh_failures",
                        lmc_json_int((int64_t)atomic_load(&cl->refresh_failures)));
    lmc_json_object_set(status, "redirects_moved", lmc_json_int((int64_t)atomic_load(&cl->moved)));
    lmc_json_object_set(status, "redirects_ask", lmc_json_int((int64_t)atomic_load(&cl->ask)));
    lmc_json_object_set(status, "failed_commands",
                        lmc_json_int((int64_t)atomic_load(&cl->failed_cmds)));
    lmc_json_object_set(status, "nodes", nodes);
    lmc_json_object_set(status, "unhealthy_nodes", unhealthy);
}
