/*
 * regions.c -- the clients' KV regions and layouts (see regions.h).
 *
 * Fixed tables (MAX_REGIONS regions, MAX_LAYOUTS layouts) under one
 * mutex; a region is found by (connection, instance id), a layout by
 * (model, world size), both by a scan (few entries). A region is a heap
 * object with a reference count: the table holds one while it is
 * registered and each request holding it one more, so taking it out of
 * the table never unmaps it under a copy.
 *
 * The SIGBUS guard is the one piece of process-wide state here: a handler
 * (put back by every lmc_regions_create if something replaced it) and a
 * per-thread pointer to the jump buffer of the copy running on that thread,
 * if any.
 */
#include "server/regions.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

#define LOG_COMP "server"
#define MAX_REGIONS 256
#define MAX_LAYOUTS 64
/* Where glibc's shm_open keeps POSIX shared-memory objects on Linux. */
#define SHM_DIR "/dev/shm"
/* The one answer to a region the server will not map, whatever the reason. */
#define REFUSED "register_kv_cache: region refused"

typedef struct layout_entry {
    char *model_name;
    int64_t world_size;
    int64_t bytes_per_token;
    size_t regions; /* registered regions of this layout; 0: the slot is free */
} layout_entry;

struct lmc_region {
    uint64_t conn;
    int64_t instance_id;
    char *model_name;
    int64_t world_size, worker_id;
    int64_t num_blocks, tokens_per_block, bytes_per_token;
    int chunk_size;
    uint8_t *base;
    size_t bytes;
    layout_entry *layout; /* counted in layout->regions; NULL once unregistered */
    size_t refs;          /* 1 for the table while registered, plus 1 per holder */
};

struct lmc_regions {
    int chunk_size;
    pthread_mutex_t mu;
    lmc_region *regions[MAX_REGIONS]; /* the registered ones; NULL: free */
    layout_entry layouts[MAX_LAYOUTS];
};

/* ---------------------------------------------------------------------- */
/* The SIGBUS guard                                                        */
/* ---------------------------------------------------------------------- */

/* Armed on a thread only around one copy, for addresses in [lo, hi). */
typedef struct copy_guard {
    sigjmp_buf jb;
    const uint8_t *lo, *hi;
} copy_guard;

/* initial-exec: reading it in the signal handler must not allocate. */
static __thread copy_guard *tls_guard __attribute__((tls_model("initial-exec")));
static struct sigaction g_prev_sigbus;
static pthread_mutex_t g_sigbus_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    copy_guard *g = tls_guard;
    const uint8_t *a = si != NULL ? si->si_addr : NULL;
    if (g != NULL && si != NULL && si->si_code > 0 && a >= g->lo && a < g->hi)
        siglongjmp(g->jb, 1); /* a client's region shrank under this copy */
    /* Not ours: what was there before decides (a fault repeats when we return). */
    if (g_prev_sigbus.sa_flags & SA_SIGINFO) {
        g_prev_sigbus.sa_sigaction(sig, si, uc);
    } else if (g_prev_sigbus.sa_handler != SIG_DFL && g_prev_sigbus.sa_handler != SIG_IGN) {
        g_prev_sigbus.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);
        if (si == NULL || si->si_code <= 0)
            raise(sig); /* sent, not a fault: nothing repeats it */
    }
}

/*
 * Install on_sigbus unless it is in place; what it replaces gets the faults
 * that are not a region copy's. Called at lmc_regions_create, before any
 * copy can run.
 */
static bool install_sigbus(void)
{
    pthread_mutex_lock(&g_sigbus_mu);
    struct sigaction cur, sa;
    bool ok = sigaction(SIGBUS, NULL, &cur) == 0;
    if (ok && !((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_sigbus;
        /* NODEFER: the jump out leaves SIGBUS unblocked without saving the mask per copy. */
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        g_prev_sigbus = cur;
        ok = sigaction(SIGBUS, &sa, NULL) == 0;
    }
    pthread_mutex_unlock(&g_sigbus_mu);
    return ok;
}

/* One copy between a chunk's object and its blocks (to_blocks: retrieve). */
typedef struct block_copy {
    const lmc_region *r;
    const int64_t *ids; /* the chunk's block ids */
    size_t from, to;    /* the blocks of the chunk to copy */
    size_t block_bytes;
    uint8_t *obj;
    bool to_blocks;
} block_copy;

static __attribute__((noinline)) void block_copy_run(const block_copy *c)
{
    for (size_t b = c->from; b < c->to; b++) {
        uint8_t *blk = c->r->base + (size_t)c->ids[b] * c->block_bytes;
        if (c->to_blocks)
            memcpy(blk, c->obj + b * c->block_bytes, c->block_bytes);
        else
            memcpy(c->obj + b * c->block_bytes, blk, c->block_bytes);
    }
}

/* false when a page of the region was gone (SIGBUS): the copy stopped part way. */
static bool block_copy_guarded(const block_copy *c)
{
    copy_guard g;
    g.lo = c->r->base;
    g.hi = c->r->base + c->r->bytes;
    if (sigsetjmp(g.jb, 0) != 0) {
        tls_guard = NULL;
        return false;
    }
    tls_guard = &g;
    atomic_signal_fence(memory_order_seq_cst); /* armed before the first access */
    block_copy_run(c);
    atomic_signal_fence(memory_order_seq_cst);
    tls_guard = NULL;
    return true;
}

/* ---------------------------------------------------------------------- */
/* Tables                                                                  */
/* ---------------------------------------------------------------------- */

lmc_status lmc_regions_create(int chunk_size, lmc_regions **out, lmc_error *err)
{
    if (!install_sigbus())
        return lmc_error_set(err, LMC_ERR_INTERNAL, "server: cannot install the SIGBUS handler");
    lmc_regions *rs = calloc(1, sizeof(*rs));
    if (rs == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    rs->chunk_size = chunk_size;
    pthread_mutex_init(&rs->mu, NULL);
    *out = rs;
    return LMC_OK;
}

static void region_free(lmc_region *r)
{
    if (r == NULL)
        return;
    if (r->base != NULL)
        munmap(r->base, r->bytes);
    free(r->model_name);
    free(r);
}

/* Caller holds mu. */
static void layout_put(layout_entry *le)
{
    if (--le->regions == 0) {
        free(le->model_name);
        memset(le, 0, sizeof(*le));
    }
}

/*
 * Take slot i's region out of the table (caller holds mu). Returns it when
 * that was the last reference (the caller frees it outside the lock).
 */
static lmc_region *region_detach(lmc_regions *rs, size_t i)
{
    lmc_region *r = rs->regions[i];
    rs->regions[i] = NULL;
    layout_put(r->layout);
    r->layout = NULL;
    return --r->refs == 0 ? r : NULL;
}

void lmc_regions_destroy(lmc_regions *rs)
{
    if (rs == NULL)
        return;
    for (size_t i = 0; i < MAX_REGIONS; i++)
        if (rs->regions[i] != NULL)
            region_free(region_detach(rs, i));
    pthread_mutex_destroy(&rs->mu);
    free(rs);
}

/* Caller holds mu. The slot of (conn, instance_id), or -1. */
static int region_find(const lmc_regions *rs, uint64_t conn, int64_t instance_id)
{
    for (int i = 0; i < MAX_REGIONS; i++) {
        const lmc_region *r = rs->regions[i];
        if (r != NULL && r->conn == conn && r->instance_id == instance_id)
            return i;
    }
    return -1;
}

/* Caller holds mu. */
static layout_entry *layout_find(lmc_regions *rs, const char *model, int64_t world_size)
{
    for (int i = 0; i < MAX_LAYOUTS; i++) {
        layout_entry *le = &rs->layouts[i];
        if (le->regions > 0 && le->world_size == world_size && strcmp(le->model_name, model) == 0)
            return le;
    }
    return NULL;
}

static void make_layout(int chunk_size, int64_t bytes_per_token, lmc_layout_desc *out)
{
    int64_t dims[2] = {chunk_size, bytes_per_token};
    lmc_layout_desc_make1(out, dims, 2, LMC_DTYPE_UINT8, NULL); /* two positive dims: cannot fail */
}

/* ---------------------------------------------------------------------- */
/* Register and unregister                                                 */
/* ---------------------------------------------------------------------- */

/* LMC_REGION_NAME_PREFIX, then at least one of [A-Za-z0-9._-] (so it is safe to log). */
static bool name_allowed(const char *name)
{
    size_t pl = strlen(LMC_REGION_NAME_PREFIX);
    if (strncmp(name, LMC_REGION_NAME_PREFIX, pl) != 0 || name[pl] == '\0')
        return false;
    for (const char *p = name + pl; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/*
 * Open and map the object d names for user peer_uid if the rules allow it (see
 * regions.h); every refusal is the same REFUSED error, the reason goes to
 * the DEBUG log only.
 */
static lmc_status map_object(const lmc_kv_region_desc *d, uint64_t conn_id, int64_t peer_uid,
                             size_t need, uint8_t **base, lmc_error *err)
{
    const char *why = NULL;
    int fd = -1, e = 0;
    struct stat st;
    if (!name_allowed(d->shm_name)) {
        why = "the name is not " LMC_REGION_NAME_PREFIX "[A-Za-z0-9._-]+";
    } else if (peer_uid < 0) {
        why = "the connecting process's user is unknown";
    } else {
        char path[sizeof(SHM_DIR) + LMC_PROTO_MAX_SHM_NAME + 1];
        snprintf(path, sizeof(path), SHM_DIR "%s", d->shm_name);
        /* O_NOFOLLOW: a symlink in /dev/shm must not lead the server elsewhere. */
        fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        e = errno;
        if (fd < 0)
            why = "cannot open it";
        else if (fstat(fd, &st) != 0)
            why = "cannot stat it", e = errno;
        else if (!S_ISREG(st.st_mode))
            why = "not a regular file";
        else if ((int64_t)st.st_uid != peer_uid)
            why = "owned by another user";
        else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
            why = "writable by group or others";
        else if ((uint64_t)st.st_size < (uint64_t)need)
            why = "smaller than its geometry";
    }
    if (why == NULL) {
        void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            why = "mmap failed", e = errno;
        else
            *base = p;
    }
    if (fd >= 0)
        close(fd);
    if (why == NULL)
        return LMC_OK;
    LMC_DEBUG(
        LOG_COMP, "register_kv_cache: refused region '%s' of uid %lld on connection %llu: %s%s%s",
        name_allowed(d->shm_name) ? d->shm_name : "(a name outside the rule)", (long long)peer_uid,
        (unsigned long long)conn_id, why, e ? ": " : "", e ? strerror(e) : "");
    return lmc_error_set(err, LMC_ERR_INVALID, REFUSED);
}

/*
 * Put nr into the table (caller holds mu), replacing its connection's
 * registration of the same instance, with the layout of its (model, world
 * size) -- a new entry takes *layout_name. *dead is the replaced region
 * when that dropped its last reference (the caller frees it).
 */
static lmc_status insert_locked(lmc_regions *rs, lmc_region *nr, char **layout_name,
                                lmc_region **dead, lmc_error *err)
{
    int old = region_find(rs, nr->conn, nr->instance_id);
    const lmc_region *o = old >= 0 ? rs->regions[old] : NULL;
    layout_entry *le = layout_find(rs, nr->model_name, nr->world_size);
    /* The registration this one replaces does not count against it. */
    size_t others = le == NULL ? 0 : le->regions - (o != NULL && o->layout == le);
    if (le != NULL && le->bytes_per_token != nr->bytes_per_token && others > 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "register_kv_cache: model '%s' (world size %lld) is registered with "
                             "%lld bytes per token, not %lld; another layout can register once "
                             "those regions are gone",
                             nr->model_name, (long long)nr->world_size,
                             (long long)le->bytes_per_token, (long long)nr->bytes_per_token);
    int slot = old;
    for (int i = 0; i < MAX_REGIONS && slot < 0; i++)
        if (rs->regions[i] == NULL)
            slot = i;
    bool new_layout = le == NULL || le->bytes_per_token != nr->bytes_per_token;
    bool layout_room = o != NULL && o->layout->regions == 1; /* the replaced one's entry frees */
    for (int i = 0; i < MAX_LAYOUTS && !layout_room; i++)
        layout_room = rs->layouts[i].regions == 0;
    if (slot < 0 || (new_layout && !layout_room))
        return lmc_error_set(err, LMC_ERR_BUSY,
                             "register_kv_cache: too many registrations (at most %d regions of "
                             "%d models and world sizes)",
                             MAX_REGIONS, MAX_LAYOUTS);
    if (old >= 0)
        *dead = region_detach(rs, (size_t)old);
    le = layout_find(rs, nr->model_name, nr->world_size); /* the replaced one may have freed it */
    for (int i = 0; i < MAX_LAYOUTS && le == NULL; i++) {
        if (rs->layouts[i].regions == 0) {
            le = &rs->layouts[i];
            *le = (layout_entry){.model_name = *layout_name,
                                 .world_size = nr->world_size,
                                 .bytes_per_token = nr->bytes_per_token};
            *layout_name = NULL;
        }
    }
    le->regions++;
    nr->layout = le;
    rs->regions[slot] = nr;
    return LMC_OK;
}

lmc_status lmc_regions_register(lmc_regions *rs, uint64_t conn_id, int64_t peer_uid,
                                int64_t instance_id, const lmc_kv_region_desc *d,
                                const char *model_name, int64_t world_size, int64_t worker_id,
                                lmc_error *err)
{
    if (conn_id == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: unknown connection");
    if (d->bytes_per_token > (int64_t)1 << 30 || d->tokens_per_block > (int64_t)1 << 20)
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: block too large");
    if (rs->chunk_size % d->tokens_per_block != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "register_kv_cache: tokens_per_block %lld does not divide the chunk "
                             "size %d",
                             (long long)d->tokens_per_block, rs->chunk_size);
    __int128 need = (__int128)d->num_blocks * d->tokens_per_block * d->bytes_per_token;
    if (need > ((__int128)1 << 40))
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: region too large");

    lmc_region *nr = calloc(1, sizeof(*nr)), *dead = NULL;
    char *layout_name = strdup(model_name);
    lmc_status rc;
    if (nr == NULL || layout_name == NULL || (nr->model_name = strdup(model_name)) == NULL) {
        rc = lmc_error_set(err, LMC_ERR_NOMEM, "register_kv_cache: out of memory");
        goto out;
    }
    if ((rc = map_object(d, conn_id, peer_uid, (size_t)need, &nr->base, err)) != LMC_OK)
        goto out;
    nr->conn = conn_id;
    nr->instance_id = instance_id;
    nr->world_size = world_size;
    nr->worker_id = worker_id;
    nr->num_blocks = d->num_blocks;
    nr->tokens_per_block = d->tokens_per_block;
    nr->bytes_per_token = d->bytes_per_token;
    nr->chunk_size = rs->chunk_size;
    nr->bytes = (size_t)need;
    nr->refs = 1;
    pthread_mutex_lock(&rs->mu);
    rc = insert_locked(rs, nr, &layout_name, &dead, err);
    pthread_mutex_unlock(&rs->mu);
    if (rc != LMC_OK)
        goto out;
    nr = NULL; /* the table's now */
    LMC_INFO(LOG_COMP,
             "registered KV cache of instance %lld on connection %llu: %s, %lld blocks x %lld "
             "tokens x %lld bytes (model %s, world size %lld, worker %lld)",
             (long long)instance_id, (unsigned long long)conn_id, d->shm_name,
             (long long)d->num_blocks, (long long)d->tokens_per_block,
             (long long)d->bytes_per_token, model_name, (long long)world_size,
             (long long)worker_id);
out:
    region_free(nr);
    region_free(dead); /* the registration this one replaced, if nothing holds it */
    free(layout_name);
    return rc;
}

lmc_status lmc_regions_unregister(lmc_regions *rs, uint64_t conn_id, int64_t instance_id,
                                  lmc_error *err)
{
    lmc_region *dead = NULL;
    pthread_mutex_lock(&rs->mu);
    int i = conn_id != 0 ? region_find(rs, conn_id, instance_id) : -1;
    if (i >= 0)
        dead = region_detach(rs, (size_t)i);
    pthread_mutex_unlock(&rs->mu);
    region_free(dead); /* or the last holder's release does */
    if (i < 0)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "unregister_kv_cache: unknown instance %lld",
                             (long long)instance_id);
    return LMC_OK;
}

size_t lmc_regions_drop_conn(lmc_regions *rs, uint64_t conn)
{
    lmc_region *dead[MAX_REGIONS];
    size_t n_dead = 0, dropped = 0;
    pthread_mutex_lock(&rs->mu);
    for (size_t i = 0; i < MAX_REGIONS && conn != 0; i++) {
        if (rs->regions[i] == NULL || rs->regions[i]->conn != conn)
            continue;
        dropped++;
        lmc_region *r = region_detach(rs, i);
        if (r != NULL)
            dead[n_dead++] = r;
    }
    pthread_mutex_unlock(&rs->mu);
    for (size_t i = 0; i < n_dead; i++)
        region_free(dead[i]);
    if (dropped > 0)
        LMC_INFO(LOG_COMP, "connection %llu closed: unregistered its %zu KV cache region(s)",
                 (unsigned long long)conn, dropped);
    return dropped;
}

lmc_status lmc_regions_layout(lmc_regions *rs, const char *op, const char *model,
                              int64_t world_size, lmc_layout_desc *out, lmc_error *err)
{
    pthread_mutex_lock(&rs->mu);
    const layout_entry *le = layout_find(rs, model, world_size);
    int64_t bpt = le != NULL ? le->bytes_per_token : 0;
    pthread_mutex_unlock(&rs->mu);
    if (le == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND,
                             "%s: no KV cache registered for model '%s' with world size %lld", op,
                             model, (long long)world_size);
    make_layout(rs->chunk_size, bpt, out);
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Requests                                                                */
/* ---------------------------------------------------------------------- */

static bool block_ok(const lmc_region *r, int64_t id)
{
    return id >= 0 && id < r->num_blocks;
}

/* The region's fields never change once registered: they are read without the lock. */
static lmc_status check_use(const lmc_region *r, const char *op, const lmc_ipc_key *key,
                            const int64_t *block_ids, size_t n_block_ids, lmc_error *err)
{
    long long id = (long long)r->instance_id;
    if (strcmp(r->model_name, key->model_name) != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: instance %lld is registered for model '%s', not '%s'", op, id,
                             r->model_name, key->model_name);
    if (r->world_size != key->world_size || r->worker_id != key->worker_id)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: instance %lld is registered for worker %lld of world size %lld, "
                             "the key names worker %lld of world size %lld",
                             op, id, (long long)r->worker_id, (long long)r->world_size,
                             (long long)key->worker_id, (long long)key->world_size);
    size_t need = (size_t)((key->end - key->start) / r->tokens_per_block);
    if (n_block_ids < need)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: %zu block ids cover fewer than the %zu blocks of [%lld, %lld)",
                             op, n_block_ids, need, (long long)key->start, (long long)key->end);
    for (size_t i = 0; i < need; i++) {
        if (!block_ok(r, block_ids[i]))
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "%s: block id %lld (item %zu) is outside the %lld registered "
                                 "blocks",
                                 op, (long long)block_ids[i], i, (long long)r->num_blocks);
    }
    return LMC_OK;
}

lmc_status lmc_regions_acquire(lmc_regions *rs, const char *op, uint64_t conn_id,
                               int64_t instance_id, const lmc_ipc_key *key,
                               const int64_t *block_ids, size_t n_block_ids, lmc_region **out,
                               lmc_error *err)
{
    *out = NULL;
    lmc_region *r = NULL;
    pthread_mutex_lock(&rs->mu);
    int i = conn_id != 0 ? region_find(rs, conn_id, instance_id) : -1;
    if (i >= 0) {
        r = rs->regions[i];
        r->refs++;
    }
    pthread_mutex_unlock(&rs->mu);
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "%s: unknown instance %lld", op,
                             (long long)instance_id);
    lmc_status st = check_use(r, op, key, block_ids, n_block_ids, err);
    if (st != LMC_OK) {
        lmc_regions_release(rs, r);
        return st;
    }
    *out = r;
    return LMC_OK;
}

void lmc_regions_release(lmc_regions *rs, lmc_region *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&rs->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&rs->mu);
    if (last)
        region_free(r); /* unregistered while this request held it */
}

void lmc_region_layout(const lmc_region *r, lmc_layout_desc *out)
{
    make_layout(r->chunk_size, r->bytes_per_token, out);
}

/* Copy between one chunk's object and its blocks (to_blocks: retrieve), both bounds checked. */
static lmc_status copy_chunk(const lmc_region_copy *rc, size_t chunk, const lmc_memory_obj *obj,
                             bool to_blocks, size_t skip_blocks, lmc_error *err)
{
    const lmc_region *r = rc->r;
    size_t bpc = rc->blocks_per_chunk;
    size_t block_bytes = (size_t)(r->tokens_per_block * r->bytes_per_token);
    if (obj->size != (uint64_t)bpc * block_bytes)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: the L1 object of chunk %zu holds %llu bytes, not the %zu of "
                             "instance %lld's chunks (another layout)",
                             rc->op, chunk, (unsigned long long)obj->size, bpc * block_bytes,
                             (long long)r->instance_id);
    if (chunk >= rc->n_block_ids / bpc)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: no block ids for chunk %zu", rc->op, chunk);
    block_copy c = {.r = r,
                    .ids = rc->block_ids + chunk * bpc,
                    .from = skip_blocks < bpc ? skip_blocks : bpc,
                    .to = bpc,
                    .block_bytes = block_bytes,
                    .obj = obj->data,
                    .to_blocks = to_blocks};
    for (size_t b = c.from; b < c.to; b++)
        if (!block_ok(r, c.ids[b]))
            return lmc_error_set(err, LMC_ERR_INVALID, "%s: block id %lld is outside the region",
                                 rc->op, (long long)c.ids[b]);
    if (!block_copy_guarded(&c))
        return lmc_error_set(err, LMC_ERR_IO,
                             "%s: instance %lld's region is smaller than it was registered "
                             "(truncated?): the copy failed",
                             rc->op, (long long)r->instance_id);
    return LMC_OK;
}

static lmc_status region_to_object(void *ctx, size_t chunk, const lmc_memory_obj *obj,
                                   lmc_error *err)
{
    return copy_chunk(ctx, chunk, obj, false, 0, err);
}

static lmc_status region_from_object(void *ctx, size_t chunk, const lmc_memory_obj *obj,
                                     lmc_error *err)
{
    const lmc_region_copy *rc = ctx;
    size_t chunk_tok0 = chunk * rc->chunk_size;
    size_t skip = rc->skip_tokens > chunk_tok0 ? rc->skip_tokens - chunk_tok0 : 0;
    return copy_chunk(rc, chunk, obj, true, skip / (size_t)rc->r->tokens_per_block, err);
}

lmc_kv_copy lmc_region_copy_init(lmc_region_copy *rc, const lmc_region *r, const char *op,
                                 const int64_t *block_ids, size_t n_block_ids, int chunk_size,
                                 size_t skip_tokens)
{
    *rc = (lmc_region_copy){.r = r,
                            .op = op,
                            .block_ids = block_ids,
                            .n_block_ids = n_block_ids,
                            .blocks_per_chunk = (size_t)chunk_size / (size_t)r->tokens_per_block,
                            .chunk_size = (size_t)chunk_size,
                            .skip_tokens = skip_tokens};
    return (lmc_kv_copy){
        .to_object = region_to_object, .from_object = region_from_object, .ctx = rc};
}
