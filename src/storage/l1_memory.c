/*
 * l1_memory.c -- the L1 pool and its first-fit allocator (see l1_memory.h).
 *
 * Owns: the pool mapping (anonymous or POSIX shm), the free extents and the
 * used-byte counter. Any thread may call in; one mutex guards everything but
 * the immutable base, capacity and alignment.
 *
 * The free extents live in a treap keyed by start address, each node also
 * holding the largest extent size in its subtree. That gives the same
 * answers as a free list sorted by address (first fit is "the leftmost
 * extent that is large enough") but every operation is O(log n): an L1 pool
 * fragmented by eviction holds thousands of holes, and a sorted array would
 * memmove all of them on each allocation from the front. Nodes come from one
 * array (indices, not pointers; node 0 is a sentinel with size 0), so the
 * common path never calls malloc.
 */
#include "storage/l1_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

#define NIL 0u
#define SHM_PREFIX "lmcache_l1_pool_"
#define DEFAULT_ALIGN 4096u
#define MIN_ALIGN 64u
#define MAX_NODES (UINT32_MAX - 1u)

typedef struct fnode {
    uint64_t start;
    uint64_t size;
    uint64_t max; /* largest size in this subtree; 0 for NIL */
    uint32_t left, right, parent;
    uint32_t prio; /* heap order: a parent's prio >= its children's */
} fnode;

struct lmc_l1_memory {
    pthread_mutex_t lock;
    uint8_t *base;
    uint64_t capacity;
    uint64_t align;
    char *shm_path; /* "/lmcache_l1_pool_<name>", or NULL when anonymous */
    int shm_fd;     /* kept open with an exclusive flock: the segment is live while we are */

    /* Under lock. */
    fnode *nodes;       /* nodes[0] is the NIL sentinel */
    uint32_t node_cap;  /* slots in nodes */
    uint32_t node_high; /* slots ever handed out (1 + ...) */
    uint32_t node_free; /* recycled nodes, chained through .left */
    uint32_t root;
    size_t nfree; /* free extents */
    uint64_t used;
    uint64_t rng;
    uint64_t *scratch; /* batched_free's sort buffer */
    size_t scratch_cap;
};

/* ---------------------------------------------------------------------- */
/* Treap of free extents                                                   */
/* ---------------------------------------------------------------------- */

static inline uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

static inline void pull(fnode *n, uint32_t x)
{
    n[x].max = max3(n[x].size, n[n[x].left].max, n[n[x].right].max);
}

/*
 * Recompute subtree maxima from x up; stops once a node's max is unchanged.
 * Valid only when every node off the path from x up is already correct.
 */
static void pull_up(fnode *n, uint32_t x)
{
    while (x != NIL) {
        uint64_t old = n[x].max;
        pull(n, x);
        if (n[x].max == old)
            return;
        x = n[x].parent;
    }
}

static uint32_t next_prio(lmc_l1_memory *m)
{
    /* xorshift64*: cheap, and per pool so runs are reproducible. */
    m->rng ^= m->rng >> 12;
    m->rng ^= m->rng << 25;
    m->rng ^= m->rng >> 27;
    return (uint32_t)((m->rng * 0x2545F4914F6CDD1DULL) >> 32);
}

static uint32_t node_new(lmc_l1_memory *m, uint64_t start, uint64_t size)
{
    uint32_t x;
    if (m->node_free != NIL) {
        x = m->node_free;
        m->node_free = m->nodes[x].left;
    } else {
        if (m->node_high == m->node_cap) {
            if (m->node_cap >= MAX_NODES)
                return NIL;
            uint64_t ncap = (uint64_t)m->node_cap * 2;
            if (ncap > MAX_NODES)
                ncap = MAX_NODES;
            fnode *nn = realloc(m->nodes, (size_t)ncap * sizeof(*nn));
            if (nn == NULL)
                return NIL;
            m->nodes = nn;
            m->node_cap = (uint32_t)ncap;
        }
        x = m->node_high++;
    }
    fnode *n = &m->nodes[x];
    n->start = start;
    n->size = size;
    n->max = size;
    n->left = n->right = n->parent = NIL;
    n->prio = next_prio(m);
    return x;
}

static void node_release(lmc_l1_memory *m, uint32_t x)
{
    m->nodes[x].left = m->node_free;
    m->node_free = x;
}

/* Replace child `old` of p (or the root when p is NIL) with `x`. */
static void relink(lmc_l1_memory *m, uint32_t p, uint32_t old, uint32_t x)
{
    fnode *n = m->nodes;
    if (p == NIL)
        m->root = x;
    else if (n[p].left == old)
        n[p].left = x;
    else
        n[p].right = x;
    if (x != NIL)
        n[x].parent = p;
}

/* Rotate x above its parent; maxima of the two nodes are recomputed. */
static void rotate_up(lmc_l1_memory *m, uint32_t x)
{
    fnode *n = m->nodes;
    uint32_t p = n[x].parent;
    uint32_t g = n[p].parent;
    if (n[p].left == x) {
        uint32_t b = n[x].right;
        n[p].left = b;
        if (b != NIL)
            n[b].parent = p;
        n[x].right = p;
    } else {
        uint32_t b = n[x].left;
        n[p].right = b;
        if (b != NIL)
            n[b].parent = p;
        n[x].left = p;
    }
    n[p].parent = x;
    relink(m, g, p, x);
    pull(n, p);
    pull(n, x);
}

/* Insert [start, start+size); false when no node could be allocated. */
static bool tree_insert(lmc_l1_memory *m, uint64_t start, uint64_t size)
{
    uint32_t x = node_new(m, start, size);
    if (x == NIL)
        return false;
    fnode *n = m->nodes; /* after node_new, which may move the array */
    uint32_t par = NIL;
    uint32_t cur = m->root;
    while (cur != NIL) {
        if (n[cur].max < size)
            n[cur].max = size;
        par = cur;
        cur = start < n[cur].start ? n[cur].left : n[cur].right;
    }
    n[x].parent = par;
    if (par == NIL)
        m->root = x;
    else if (start < n[par].start)
        n[par].left = x;
    else
        n[par].right = x;
    while (n[x].parent != NIL && n[x].prio > n[n[x].parent].prio)
        rotate_up(m, x);
    m->nfree++;
    return true;
}

static void tree_delete(lmc_l1_memory *m, uint32_t x)
{
    fnode *n = m->nodes;
    while (n[x].left != NIL && n[x].right != NIL) {
        uint32_t l = n[x].left, r = n[x].right;
        rotate_up(m, n[l].prio > n[r].prio ? l : r);
    }
    uint32_t child = n[x].left != NIL ? n[x].left : n[x].right;
    uint32_t p = n[x].parent;
    relink(m, p, x, child);
    /*
     * No early stop here: x may have shrunk before it was deleted (an
     * extent carved to nothing), and the rotations above already refreshed
     * the nodes just above its final spot, so an unchanged max there does
     * not mean the ancestors are up to date.
     */
    for (uint32_t q = p; q != NIL; q = n[q].parent)
        pull(n, q);
    node_release(m, x);
    m->nfree--;
}

/* Leftmost extent of the subtree at x with size >= want, or NIL. */
static uint32_t first_fit_in(const fnode *n, uint32_t x, uint64_t want)
{
    if (n[x].max < want)
        return NIL;
    for (;;) {
        uint32_t l = n[x].left;
        if (n[l].max >= want)
            x = l;
        else if (n[x].size >= want)
            return x;
        else
            x = n[x].right; /* its max must be >= want */
    }
}

/* The next extent after x (in address order) with size >= want, or NIL. */
static uint32_t next_fit(const fnode *n, uint32_t x, uint64_t want)
{
    if (n[n[x].right].max >= want)
        return first_fit_in(n, n[x].right, want);
    for (;;) {
        uint32_t p = n[x].parent;
        if (p == NIL)
            return NIL;
        if (n[p].left == x) {
            if (n[p].size >= want)
                return p;
            if (n[n[p].right].max >= want)
                return first_fit_in(n, n[p].right, want);
        }
        x = p;
    }
}

static uint32_t leftmost(const fnode *n, uint32_t x)
{
    if (x == NIL)
        return NIL;
    while (n[x].left != NIL)
        x = n[x].left;
    return x;
}

static uint32_t successor(const fnode *n, uint32_t x)
{
    if (n[x].right != NIL)
        return leftmost(n, n[x].right);
    uint32_t p = n[x].parent;
    while (p != NIL && n[p].right == x) {
        x = p;
        p = n[p].parent;
    }
    return p;
}

/* The extent with the largest start <= off, or NIL. */
static uint32_t floor_node(const fnode *n, uint32_t root, uint64_t off)
{
    uint32_t best = NIL;
    uint32_t cur = root;
    while (cur != NIL) {
        if (n[cur].start <= off) {
            best = cur;
            cur = n[cur].right;
        } else {
            cur = n[cur].left;
        }
    }
    return best;
}

/* Take `bytes` from the front of extent x (bytes <= its size). */
static void carve_front(lmc_l1_memory *m, uint32_t x, uint64_t bytes)
{
    fnode *n = m->nodes;
    n[x].start += bytes;
    n[x].size -= bytes;
    if (n[x].size == 0)
        tree_delete(m, x);
    else
        pull_up(n, x);
}

/* ---------------------------------------------------------------------- */
/* Freeing ranges                                                          */
/* ---------------------------------------------------------------------- */

typedef enum free_result {
    FREED,
    OVERLAPS_FREE, /* some byte of the range is already free */
    NO_NODE,       /* a new extent was needed and none could be allocated */
} free_result;

/* Return [start, start+len) (aligned, inside the pool) to the free list. */
static free_result free_range(lmc_l1_memory *m, uint64_t start, uint64_t len)
{
    fnode *n = m->nodes;
    uint64_t end = start + len;
    uint32_t p = floor_node(n, m->root, start);
    if (p != NIL && n[p].start + n[p].size > start)
        return OVERLAPS_FREE;
    uint32_t s = p != NIL ? successor(n, p) : leftmost(n, m->root);
    if (s != NIL && n[s].start < end)
        return OVERLAPS_FREE;

    bool join_prev = p != NIL && n[p].start + n[p].size == start;
    bool join_next = s != NIL && n[s].start == end;
    if (join_prev && join_next) {
        /* Delete s first: growing p before would leave stale maxima above it. */
        uint64_t next_size = n[s].size;
        tree_delete(m, s);
        n[p].size += len + next_size;
        pull_up(n, p);
    } else if (join_prev) {
        n[p].size += len;
        pull_up(n, p);
    } else if (join_next) {
        /* Moving s's start down keeps the order: p ends before start. */
        n[s].start = start;
        n[s].size += len;
        pull_up(n, s);
    } else if (!tree_insert(m, start, len)) {
        return NO_NODE;
    }
    m->used -= len;
    return FREED;
}

/* "L1 memory: free of offset O size L <why>; ignored": the one wording of a refused free. */
static void __attribute__((format(printf, 3, 4)))
warn_refused_free(uint64_t off, uint64_t len, const char *why_fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, why_fmt);
    vsnprintf(why, sizeof(why), why_fmt, ap);
    va_end(ap);
    LMC_WARN("l1", "L1 memory: free of offset %llu size %llu %s; ignored", (unsigned long long)off,
             (unsigned long long)len, why);
}

/* Validate a slot and free it, logging (and ignoring) anything bogus. */
static void free_slot_checked(lmc_l1_memory *m, uint64_t off, uint64_t len)
{
    if (off % m->align != 0 || off >= m->capacity || len > m->capacity - off) {
        warn_refused_free(off, len,
                          "is outside the pool (capacity %llu) or misaligned (align %llu)",
                          (unsigned long long)m->capacity, (unsigned long long)m->align);
        return;
    }
    if (len > m->used) {
        warn_refused_free(off, len, "exceeds the %llu bytes in use", (unsigned long long)m->used);
        return;
    }
    switch (free_range(m, off, len)) {
    case FREED:
        break;
    case OVERLAPS_FREE:
        warn_refused_free(off, len, "overlaps free space (double free?)");
        break;
    case NO_NODE:
        LMC_ERROR("l1",
                  "L1 memory: out of memory for the free list; %llu bytes at offset %llu "
                  "are lost until the pool is destroyed",
                  (unsigned long long)len, (unsigned long long)off);
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Creation                                                                */
/* ---------------------------------------------------------------------- */

static bool is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

static inline uint64_t slot_of(uint64_t align, uint64_t size)
{
    if (size == 0)
        return align; /* even an empty object takes a slot of its own */
    if (size > UINT64_MAX - (align - 1))
        return UINT64_MAX; /* larger than any pool */
    return (size + align - 1) & ~(align - 1);
}

static lmc_status make_shm_path(const char *name, char **out, lmc_error *err)
{
    const char *n = name[0] == '/' ? name + 1 : name;
    if (*n == '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: shm_name '%s' is empty", name);
    if (strchr(n, '/') != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: shm_name '%s' contains '/'", name);
    bool has_prefix = strncmp(n, SHM_PREFIX, strlen(SHM_PREFIX)) == 0;
    size_t len = 1 + (has_prefix ? 0 : strlen(SHM_PREFIX)) + strlen(n);
    if (len - 1 > NAME_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "L1 memory: shm_name '%s' is too long (at most %d bytes with the "
                             "'" SHM_PREFIX "' prefix)",
                             name, NAME_MAX);
    char *path = malloc(len + 1);
    if (path == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "L1 memory: out of memory");
    const char *prefix = has_prefix ? "" : SHM_PREFIX;
    path[0] = '/';
    memcpy(path + 1, prefix, strlen(prefix));
    memcpy(path + 1 + strlen(prefix), n, strlen(n) + 1);
    *out = path;
    return LMC_OK;
}

/*
 * Map the pool at an address aligned to m->align: fd < 0 for anonymous
 * memory. Alignments above the page size reserve a larger range first and
 * trim it.
 */
/*
 * Ask for transparent huge pages on an anonymous pool (best effort): objects
 * are filled in large sequential copies, and 2 MiB faults cost a fraction of
 * 512 small ones. Pages are still faulted in only when first touched.
 */
static void advise_pool(const lmc_l1_memory *m, int fd)
{
#ifdef MADV_HUGEPAGE
    if (fd < 0)
        (void)madvise(m->base, m->capacity, MADV_HUGEPAGE);
#else
    (void)m;
    (void)fd;
#endif
}

static lmc_status map_pool(lmc_l1_memory *m, int fd, lmc_error *err)
{
    const char *what = fd < 0 ? "anonymous" : m->shm_path;
    int share = fd < 0 ? (MAP_PRIVATE | MAP_ANONYMOUS) : MAP_SHARED;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    if (m->align <= (uint64_t)page) {
        void *p = mmap(NULL, m->capacity, PROT_READ | PROT_WRITE, share | MAP_NORESERVE, fd, 0);
        if (p == MAP_FAILED)
            goto fail;
        m->base = p;
        advise_pool(m, fd);
        return LMC_OK;
    }
    if (m->capacity > UINT64_MAX - m->align)
        goto fail_size;
    size_t span = m->capacity + m->align;
    void *res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED)
        goto fail;
    uintptr_t lo = (uintptr_t)res;
    uintptr_t at = (lo + m->align - 1) & ~(uintptr_t)(m->align - 1);
    void *p = mmap((void *)at, m->capacity, PROT_READ | PROT_WRITE,
                   share | MAP_NORESERVE | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        munmap(res, span);
        errno = e;
        goto fail;
    }
    /* capacity is a multiple of align, hence of the page size. */
    if (at > lo)
        munmap(res, at - lo);
    uintptr_t end = at + m->capacity;
    if (lo + span > end)
        munmap((void *)end, lo + span - end);
    m->base = p;
    advise_pool(m, fd);
    return LMC_OK;

fail:
    return lmc_error_set(err, LMC_ERR_IO, "L1 memory: mmap of %llu bytes (%s) failed: %s",
                         (unsigned long long)m->capacity, what, strerror(errno));
fail_size:
    return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: size_bytes %llu is too large",
                         (unsigned long long)m->capacity);
}

/*
 * A segment of that name already there: stale (its server is gone, so its
 * flock is free) and ours to remove, or live (another server holds the
 * lock) or another user's, and then left alone.
 */
static lmc_status remove_stale_shm(const lmc_l1_memory *m, lmc_error *err)
{
    int old = shm_open(m->shm_path, O_RDONLY, 0);
    if (old < 0)
        return LMC_OK; /* none (or not ours to open: shm_open O_EXCL says so below) */
    struct stat st;
    lmc_status rc = LMC_OK;
    if (flock(old, LOCK_EX | LOCK_NB) != 0)
        rc = lmc_error_set(err, LMC_ERR_BUSY,
                           "L1 memory: shared-memory segment '%s' is in use by a running server; "
                           "give each server its own --shm-name",
                           m->shm_path);
    else if (fstat(old, &st) == 0 && st.st_uid != geteuid())
        rc = lmc_error_set(err, LMC_ERR_INVALID,
                           "L1 memory: shared-memory segment '%s' belongs to uid %u; not removing "
                           "another user's segment",
                           m->shm_path, (unsigned)st.st_uid);
    else if (shm_unlink(m->shm_path) == 0)
        LMC_WARN("l1", "L1 memory: removed a stale shared-memory segment '%s'", m->shm_path);
    close(old); /* and the lock with it */
    return rc;
}

static lmc_status open_shm(lmc_l1_memory *m, lmc_error *err)
{
    lmc_status st = remove_stale_shm(m, err);
    if (st != LMC_OK)
        return st;
    int fd = shm_open(m->shm_path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return lmc_error_set(err, LMC_ERR_IO, "L1 memory: shm_open '%s' failed: %s", m->shm_path,
                             strerror(errno));
    /* Held until destroy: a later server with the same name sees a live segment. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        st = lmc_error_set(err, LMC_ERR_BUSY,
                           "L1 memory: shared-memory segment '%s' was taken by another server "
                           "starting at the same time",
                           m->shm_path);
        close(fd);
        return st; /* not unlinked: it is the other server's */
    }
    if (ftruncate(fd, (off_t)m->capacity) != 0) {
        st = lmc_error_set(err, LMC_ERR_IO,
                           "L1 memory: ftruncate of shared-memory segment '%s' to %llu bytes "
                           "failed: %s",
                           m->shm_path, (unsigned long long)m->capacity, strerror(errno));
        goto fail;
    }
    st = map_pool(m, fd, err);
    if (st != LMC_OK)
        goto fail;
    m->shm_fd = fd;
    return LMC_OK;

fail:
    close(fd);
    shm_unlink(m->shm_path);
    return st;
}

/* Unlink the segment's name only while it is still ours (not a later server's). */
static void unlink_own_shm(const lmc_l1_memory *m)
{
    struct stat mine, now;
    int cur = shm_open(m->shm_path, O_RDONLY, 0);
    bool same = cur >= 0 && fstat(m->shm_fd, &mine) == 0 && fstat(cur, &now) == 0 &&
                mine.st_dev == now.st_dev && mine.st_ino == now.st_ino;
    if (cur >= 0)
        close(cur);
    if (same && shm_unlink(m->shm_path) != 0)
        LMC_WARN("l1", "L1 memory: shm_unlink '%s' failed: %s", m->shm_path, strerror(errno));
}

lmc_status lmc_l1_memory_create(const lmc_l1_memory_config *cfg, lmc_l1_memory **out,
                                lmc_error *err)
{
    if (out != NULL)
        *out = NULL;
    if (cfg == NULL || out == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: config and out must not be NULL");
    uint64_t align = cfg->align_bytes ? cfg->align_bytes : DEFAULT_ALIGN;
    if (cfg->size_bytes == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: size_bytes must be > 0");
    if (!is_pow2(align))
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "L1 memory: align_bytes %llu is not a power of two",
                             (unsigned long long)align);
    if (align < MIN_ALIGN)
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: align_bytes %llu is less than %u",
                             (unsigned long long)align, MIN_ALIGN);
    if (cfg->size_bytes > (uint64_t)SIZE_MAX - (align - 1) ||
        cfg->size_bytes > (uint64_t)INT64_MAX - (align - 1))
        return lmc_error_set(err, LMC_ERR_INVALID, "L1 memory: size_bytes %llu is too large",
                             (unsigned long long)cfg->size_bytes);

    lmc_status st;
    lmc_l1_memory *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "L1 memory: out of memory");
    m->align = align;
    m->capacity = slot_of(align, cfg->size_bytes);
    m->rng = 0x9E3779B97F4A7C15ULL;
    m->shm_fd = -1;
    pthread_mutex_init(&m->lock, NULL);

    m->node_cap = 64;
    m->nodes = calloc(m->node_cap, sizeof(*m->nodes));
    if (m->nodes == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "L1 memory: out of memory");
        goto fail;
    }
    m->node_high = 1; /* nodes[0] is NIL: size 0, max 0, never written */
    if (!tree_insert(m, 0, m->capacity)) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "L1 memory: out of memory");
        goto fail;
    }

    if (cfg->shm_name != NULL && cfg->shm_name[0] != '\0') {
        st = make_shm_path(cfg->shm_name, &m->shm_path, err);
        if (st != LMC_OK)
            goto fail;
        st = open_shm(m, err);
    } else {
        st = map_pool(m, -1, err);
    }
    if (st != LMC_OK)
        goto fail;
    *out = m;
    return LMC_OK;

fail:
    free(m->shm_path);
    free(m->nodes);
    pthread_mutex_destroy(&m->lock);
    free(m);
    return st;
}

void lmc_l1_memory_destroy(lmc_l1_memory *m)
{
    if (m == NULL)
        return;
    if (m->base != NULL)
        munmap(m->base, m->capacity);
    if (m->shm_fd >= 0) {
        unlink_own_shm(m);
        close(m->shm_fd);
    }
    free(m->shm_path);
    free(m->nodes);
    free(m->scratch);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* ---------------------------------------------------------------------- */
/* Accessors                                                               */
/* ---------------------------------------------------------------------- */

uint8_t *lmc_l1_memory_base(const lmc_l1_memory *m)
{
    return m->base;
}

uint64_t lmc_l1_memory_capacity(const lmc_l1_memory *m)
{
    return m->capacity;
}

uint64_t lmc_l1_memory_align(const lmc_l1_memory *m)
{
    return m->align;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack the name */
#endif

lmc_status lmc_l1_memory_populate(lmc_l1_memory *m, uint64_t offset, uint64_t len,
                                  lmc_error *err)
{
    if (offset > m->capacity)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "L1 memory: populate at %llu is past the pool's %llu bytes",
                             (unsigned long long)offset, (unsigned long long)m->capacity);
    if (len > m->capacity - offset)
        len = m->capacity - offset;
    if (len == 0)
        return LMC_OK;
    /* madvise wants a page-aligned start; the pool's base is one. */
    long page = sysconf(_SC_PAGESIZE);
    uint64_t pg = page > 0 ? (uint64_t)page : 4096;
    uint64_t start = offset & ~(pg - 1);
    if (madvise(m->base + start, (size_t)(len + (offset - start)), MADV_POPULATE_WRITE) == 0)
        return LMC_OK;
    int e = errno;
    lmc_status code = e == EINVAL ? LMC_ERR_UNSUPPORTED : e == ENOMEM ? LMC_ERR_NOMEM : LMC_ERR_IO;
    return lmc_error_set(err, code, "L1 memory: cannot fault in %llu bytes at %llu: %s",
                         (unsigned long long)len, (unsigned long long)offset, strerror(e));
}

const char *lmc_l1_memory_shm_path(const lmc_l1_memory *m)
{
    return m->shm_path;
}

uint64_t lmc_l1_memory_slot_size(const lmc_l1_memory *m, uint64_t size)
{
    return slot_of(m->align, size);
}

/* The mutex is the only thing a const accessor changes. */
static pthread_mutex_t *lock_of(const lmc_l1_memory *m)
{
    return (pthread_mutex_t *)&m->lock;
}

/* ---------------------------------------------------------------------- */
/* Allocation                                                              */
/* ---------------------------------------------------------------------- */

bool lmc_l1_memory_alloc(lmc_l1_memory *m, uint64_t size, uint64_t *offset)
{
    uint64_t slot = slot_of(m->align, size);
    pthread_mutex_lock(&m->lock);
    uint32_t x = first_fit_in(m->nodes, m->root, slot);
    if (x == NIL) {
        pthread_mutex_unlock(&m->lock);
        return false;
    }
    *offset = m->nodes[x].start;
    carve_front(m, x, slot);
    m->used += slot;
    pthread_mutex_unlock(&m->lock);
    return true;
}

/* What the greedy walk would find, capped at n. Under lock. */
static size_t count_fit(const lmc_l1_memory *m, uint64_t slot, size_t n)
{
    const fnode *nodes = m->nodes;
    size_t found = 0;
    for (uint32_t x = first_fit_in(nodes, m->root, slot); x != NIL && found < n;
         x = next_fit(nodes, x, slot)) {
        uint64_t k = nodes[x].size / slot;
        found += k >= n - found ? n - found : (size_t)k;
    }
    return found;
}

size_t lmc_l1_memory_max_batch(lmc_l1_memory *m, uint64_t size, size_t n)
{
    uint64_t slot = slot_of(m->align, size);
    pthread_mutex_lock(&m->lock);
    size_t k = count_fit(m, slot, n);
    pthread_mutex_unlock(&m->lock);
    return k;
}

bool lmc_l1_memory_batched_alloc(lmc_l1_memory *m, uint64_t size, size_t n, uint64_t *offsets)
{
    if (n == 0)
        return true;
    uint64_t slot = slot_of(m->align, size);
    pthread_mutex_lock(&m->lock);
    if (count_fit(m, slot, n) < n) {
        pthread_mutex_unlock(&m->lock);
        return false;
    }
    /*
     * The greedy walk leaves less than a slot in every block it passes, so
     * the first fit after each carve is the next block of the walk.
     */
    size_t got = 0;
    while (got < n) {
        uint32_t x = first_fit_in(m->nodes, m->root, slot);
        uint64_t k = m->nodes[x].size / slot;
        size_t take = k >= n - got ? n - got : (size_t)k;
        uint64_t start = m->nodes[x].start;
        for (size_t i = 0; i < take; i++)
            offsets[got + i] = start + i * slot;
        got += take;
        carve_front(m, x, take * slot);
    }
    m->used += (uint64_t)n * slot;
    pthread_mutex_unlock(&m->lock);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Freeing                                                                 */
/* ---------------------------------------------------------------------- */

void lmc_l1_memory_free(lmc_l1_memory *m, uint64_t offset, uint64_t size)
{
    uint64_t slot = slot_of(m->align, size);
    pthread_mutex_lock(&m->lock);
    free_slot_checked(m, offset, slot);
    pthread_mutex_unlock(&m->lock);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void sort_u64(uint64_t *v, size_t n)
{
    if (n > 32) {
        qsort(v, n, sizeof(*v), cmp_u64);
        return;
    }
    /* Batches are short and usually already in order. */
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Free a run of adjacent slots; if any part is already free, go slot by slot. */
static void free_run(lmc_l1_memory *m, uint64_t start, size_t count, uint64_t slot)
{
    uint64_t len = (uint64_t)count * slot;
    if (count > 1 && len <= m->used && free_range(m, start, len) == FREED)
        return;
    for (size_t i = 0; i < count; i++)
        free_slot_checked(m, start + i * slot, slot);
}

void lmc_l1_memory_batched_free(lmc_l1_memory *m, const uint64_t *offsets, size_t n, uint64_t size)
{
    if (n == 0)
        return;
    uint64_t slot = slot_of(m->align, size);
    pthread_mutex_lock(&m->lock);
    if (n > m->scratch_cap) {
        uint64_t *s = realloc(m->scratch, n * sizeof(*s));
        if (s == NULL) {
            /* Unsorted still works: every free merges with its neighbours. */
            for (size_t i = 0; i < n; i++)
                free_slot_checked(m, offsets[i], slot);
            pthread_mutex_unlock(&m->lock);
            return;
        }
        m->scratch = s;
        m->scratch_cap = n;
    }
    uint64_t *v = m->scratch;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t off = offsets[i];
        if (off % m->align != 0 || off >= m->capacity || slot > m->capacity - off)
            free_slot_checked(m, off, slot); /* warns and ignores */
        else
            v[k++] = off;
    }
    sort_u64(v, k);

    size_t i = 0;
    while (i < k) {
        size_t j = i + 1;
        while (j < k && v[j] == v[j - 1] + slot)
            j++;
        free_run(m, v[i], j - i, slot);
        /* The same offset twice: the second is a double free. */
        while (j < k && v[j] == v[j - 1]) {
            free_slot_checked(m, v[j], slot);
            j++;
        }
        i = j;
    }
    pthread_mutex_unlock(&m->lock);
}

/* ---------------------------------------------------------------------- */
/* Status                                                                  */
/* ---------------------------------------------------------------------- */

void lmc_l1_memory_usage(const lmc_l1_memory *m, uint64_t *used, uint64_t *total)
{
    pthread_mutex_lock(lock_of(m));
    if (used != NULL)
        *used = m->used;
    if (total != NULL)
        *total = m->capacity;
    pthread_mutex_unlock(lock_of(m));
}

size_t lmc_l1_memory_free_blocks(const lmc_l1_memory *m)
{
    pthread_mutex_lock(lock_of(m));
    size_t n = m->nfree;
    pthread_mutex_unlock(lock_of(m));
    return n;
}

uint64_t lmc_l1_memory_largest_free(const lmc_l1_memory *m)
{
    pthread_mutex_lock(lock_of(m));
    uint64_t x = m->nodes[m->root].max;
    pthread_mutex_unlock(lock_of(m));
    return x;
}

#define CHECK_FAIL(...)                                                                            \
    do {                                                                                           \
        if (why != NULL && why_len > 0)                                                            \
            snprintf(why, why_len, __VA_ARGS__);                                                   \
        ok = false;                                                                                \
        goto out;                                                                                  \
    } while (0)

bool lmc_l1_memory_check(const lmc_l1_memory *m, char *why, size_t why_len)
{
    bool ok = true;
    pthread_mutex_lock(lock_of(m));
    const fnode *n = m->nodes;
    if (n[NIL].size != 0 || n[NIL].max != 0)
        CHECK_FAIL("sentinel node was written");
    if (m->root != NIL && n[m->root].parent != NIL)
        CHECK_FAIL("root has a parent");

    uint64_t free_sum = 0;
    size_t count = 0;
    uint64_t prev_end = 0;
    bool have_prev = false;
    for (uint32_t x = leftmost(n, m->root); x != NIL; x = successor(n, x)) {
        const fnode *e = &n[x];
        unsigned long long s = e->start, z = e->size;
        if (++count > m->nfree)
            CHECK_FAIL("more free blocks in the tree than the count %zu", m->nfree);
        if (e->size == 0)
            CHECK_FAIL("free block at %llu is empty", s);
        if (e->start % m->align != 0 || e->size % m->align != 0)
            CHECK_FAIL("free block [%llu, +%llu) is not aligned to %llu", s, z,
                       (unsigned long long)m->align);
        if (e->start >= m->capacity || e->size > m->capacity - e->start)
            CHECK_FAIL("free block [%llu, +%llu) is outside the pool of %llu bytes", s, z,
                       (unsigned long long)m->capacity);
        if (have_prev && e->start < prev_end)
            CHECK_FAIL("free block at %llu overlaps or precedes the one ending at %llu", s,
                       (unsigned long long)prev_end);
        if (have_prev && e->start == prev_end)
            CHECK_FAIL("free blocks ending and starting at %llu were not merged", s);
        uint32_t l = e->left, r = e->right;
        if ((l != NIL && n[l].parent != x) || (r != NIL && n[r].parent != x))
            CHECK_FAIL("bad parent link below the block at %llu", s);
        if ((l != NIL && n[l].prio > e->prio) || (r != NIL && n[r].prio > e->prio))
            CHECK_FAIL("heap order broken below the block at %llu", s);
        if (e->max != max3(e->size, n[l].max, n[r].max))
            CHECK_FAIL("stale subtree maximum at the block at %llu", s);
        free_sum += e->size;
        prev_end = e->start + e->size;
        have_prev = true;
    }
    if (count != m->nfree)
        CHECK_FAIL("%zu free blocks in the tree but the count says %zu", count, m->nfree);
    if (free_sum + m->used != m->capacity)
        CHECK_FAIL("free %llu + used %llu != capacity %llu", (unsigned long long)free_sum,
                   (unsigned long long)m->used, (unsigned long long)m->capacity);
out:
    pthread_mutex_unlock(lock_of(m));
    if (ok && why != NULL && why_len > 0)
        why[0] = '\0';
    return ok;
}
