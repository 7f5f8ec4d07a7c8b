/*
 * prefetch_controller.c -- L2 -> L1 prefetch (see prefetch_controller.h and
 * spec/storage-manager.md §10).
 *
 * Owns: the submission queue, one record per submitted request (its lookup
 * count and, once done, its retained-key bitmap, until take_result pops it),
 * the pending FIFO, the in-flight requests, the submission eventfd and the
 * "prefetch-ctl" thread.
 *
 * Threads: submit/query/take/report_status/busy run on caller threads and
 * touch only what `mu` guards: the submission queue, the record table and
 * the status counters. The pending FIFO, the in-flight array and every
 * request's bitmaps and buffers belong to the controller thread alone (and
 * to destroy, after the thread has been joined). A request points at its
 * record; the record is written only under `mu` and cannot be freed while
 * the request runs, because take frees only completed records.
 *
 * Every buffer a request needs is allocated at submit, so the controller
 * thread never allocates on a request's behalf: a failure surfaces to the
 * caller as LMC_ERR_NOMEM before any L2 lock or L1 reservation exists, and
 * no half-done request has to be unwound for lack of memory. An adapter's
 * submit_* error counts as that adapter finding (or loading) nothing.
 *
 * Every L2 lock a lookup takes is released exactly once: in unlock phase 1
 * (found but not planned), in phase 2 (planned, after the load), when
 * nothing was loadable, or at shutdown.
 *
 * The work is one step (iterate: take the submissions, advance every
 * request in flight, start pending ones). The thread runs it after each
 * poll; in manual mode there is no thread, the owner calls
 * lmc_prefetch_controller_step, submit does not signal the eventfd, and
 * destroy does not wait for answers (no time passes while it would wait).
 */
#include "storage/prefetch_controller.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/names.h"

#define LOG_COMP "prefetch"
#define POLL_TIMEOUT_MS 500
/* How long destroy waits, by default, for outstanding lookups and loads to answer. */
#define SHUTDOWN_WAIT_MS 5000

typedef enum pf_policy { PF_POLICY_DEFAULT, PF_POLICY_RETAIN } pf_policy;

/* What callers see of a request; guarded by the controller's mu. */
typedef struct pf_record {
    struct pf_record *next; /* hash chain */
    int64_t id;
    bool lookup_known;
    size_t lookup_count;
    bool done;
    lmc_bitmap result; /* valid once done; moved out by take */
} pf_record;

typedef enum pf_phase { PF_LOOKUP, PF_LOAD } pf_phase;

/* One adapter's part of a request. Bitmaps are over the request's n keys. */
typedef struct pf_slot {
    uint64_t task_id;
    bool waiting;     /* a lookup (or load) task is outstanding */
    lmc_bitmap found; /* keys this adapter found and locked */
    lmc_bitmap plan;  /* keys loaded from this adapter (a subset of found) */
} pf_slot;

typedef struct pf_request {
    struct pf_request *next; /* submission queue / pending FIFO link */
    pf_record *rec;
    lmc_object_key *keys;
    size_t n;
    lmc_layout_desc layout;
    uint32_t extra_count;
    lmc_trim_policy trim;
    pf_phase phase;
    size_t n_waiting;     /* slots with an outstanding task */
    pf_slot *slots;       /* one per adapter */
    lmc_bitmap retained;  /* the planned set, then the result */
    lmc_bitmap reserved;  /* keys whose L1 write reservation this request holds */
    lmc_bitmap loaded;    /* keys some adapter's load filled */
    lmc_memory_obj *objs; /* L1 buffer of each reserved key, by position */
    /* Scratch, n entries each: the arguments of one L1 or L2 batch call. */
    lmc_object_key *kbuf;
    lmc_memory_obj *obuf;
    lmc_l1_error *ebuf;
    size_t *ibuf;
    bool *tbuf;
} pf_request;

struct lmc_prefetch_controller {
    lmc_l1_manager *l1;
    lmc_l2_adapter **adapters;
    size_t n_adapters;
    pf_policy policy;
    bool manual; /* no thread: the owner calls lmc_prefetch_controller_step */
    uint32_t max_in_flight;
    uint32_t shutdown_wait_ms;
    int submit_fd;
    struct pollfd *pfds; /* [submit_fd, lookup fd and load fd of each adapter] */
    size_t n_pfds;
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    atomic_bool thread_alive;
    /* Keys (and their bytes) that a load from some adapter filled. */
    atomic_uint_fast64_t loaded_keys_total, loaded_bytes_total;

    pthread_mutex_t mu;
    /* --- guarded by mu --- */
    pf_request *sub_head, *sub_tail;
    size_t sub_len;
    int64_t next_id;
    /*
     * id -> record. A completed record stays until take_result pops it; the
     * StorageManager always takes, so the table stays as small as the
     * number of requests in progress. A caller that never takes keeps its
     * results (a few bytes per key) until destroy.
     */
    pf_record **buckets;
    size_t n_buckets; /* a power of two */
    size_t n_records;
    size_t n_busy;      /* records not yet done */
    size_t n_completed; /* records done and not yet taken */
    /* Published by the thread after each iteration. */
    size_t st_pending, st_in_flight, st_lookup, st_load;
    /* --- end of mu --- */

    /* Controller thread only. */
    pf_request *pend_head, *pend_tail;
    size_t pend_len;
    pf_request **in_flight; /* max_in_flight entries */
    size_t n_in_flight;
};

/* ---------------------------------------------------------------------- */
/* Policy                                                                  */
/* ---------------------------------------------------------------------- */

/* The one list of prefetch policies, indexed by pf_policy. */
const char *const lmc_prefetch_policy_names[] = {
    [PF_POLICY_DEFAULT] = "default",
    [PF_POLICY_RETAIN] = "retain",
};
const size_t lmc_prefetch_policy_count =
    sizeof(lmc_prefetch_policy_names) / sizeof(lmc_prefetch_policy_names[0]);

static lmc_status parse_policy(const char *name, pf_policy *out, lmc_error *err)
{
    size_t i = PF_POLICY_DEFAULT;
    lmc_status st =
        lmc_names_parse(lmc_prefetch_policy_names, lmc_prefetch_policy_count, "prefetch policy",
                        name, name != NULL ? strlen(name) : 0, &i, err);
    *out = (pf_policy)i;
    return st;
}

lmc_status lmc_prefetch_policy_check(const char *name, lmc_error *err)
{
    pf_policy p;
    return parse_policy(name, &p, err);
}

/* ---------------------------------------------------------------------- */
/* In-place bitmap helpers (same-size bitmaps; no allocation)              */
/* ---------------------------------------------------------------------- */

static size_t bm_words(const lmc_bitmap *b)
{
    return (b->size + 63) / 64;
}

static void bm_zero(lmc_bitmap *b)
{
    if (b->words)
        memset(b->words, 0, bm_words(b) * sizeof(uint64_t));
}

static void bm_and_into(lmc_bitmap *a, const lmc_bitmap *b)
{
    for (size_t w = 0; w < bm_words(a); w++)
        a->words[w] &= b->words[w];
}

static bool bm_any(const lmc_bitmap *b)
{
    for (size_t w = 0; w < bm_words(b); w++) {
        if (b->words[w] != 0)
            return true;
    }
    return false;
}

/* PREFIX keeps the leading run of ones; every other policy keeps every bit. */
static void bm_trim(lmc_bitmap *b, lmc_trim_policy trim)
{
    if (trim != LMC_TRIM_PREFIX)
        return;
    size_t k = lmc_bitmap_count_leading_ones(b);
    for (size_t i = k; i < b->size; i++)
        lmc_bitmap_clear(b, i);
}

/* ---------------------------------------------------------------------- */
/* Records (caller-visible state); all under mu                            */
/* ---------------------------------------------------------------------- */

static pf_record **record_slot(lmc_prefetch_controller *c, int64_t id)
{
    pf_record **p = &c->buckets[(uint64_t)id & (c->n_buckets - 1)];
    while (*p != NULL && (*p)->id != id)
        p = &(*p)->next;
    return p;
}

static pf_record *record_find(lmc_prefetch_controller *c, int64_t id)
{
    return *record_slot(c, id);
}

static void record_unlink(lmc_prefetch_controller *c, pf_record *rec)
{
    pf_record **p = record_slot(c, rec->id);
    *p = rec->next;
    c->n_records--;
}

/* Ids are sequential, so `id & mask` spreads them evenly. */
static lmc_status record_insert(lmc_prefetch_controller *c, pf_record *rec)
{
    if (c->n_records >= c->n_buckets) {
        size_t nb = c->n_buckets * 2;
        pf_record **b = calloc(nb, sizeof(*b));
        if (b == NULL)
            return LMC_ERR_NOMEM;
        for (size_t i = 0; i < c->n_buckets; i++) {
            pf_record *r = c->buckets[i];
            while (r != NULL) {
                pf_record *next = r->next;
                size_t h = (uint64_t)r->id & (nb - 1);
                r->next = b[h];
                b[h] = r;
                r = next;
            }
        }
        free(c->buckets);
        c->buckets = b;
        c->n_buckets = nb;
    }
    size_t h = (uint64_t)rec->id & (c->n_buckets - 1);
    rec->next = c->buckets[h];
    c->buckets[h] = rec;
    c->n_records++;
    return LMC_OK;
}

static void record_free(pf_record *rec)
{
    lmc_bitmap_free(&rec->result);
    free(rec);
}

/* ---------------------------------------------------------------------- */
/* Requests                                                                */
/* ---------------------------------------------------------------------- */

static void request_free(pf_request *r, size_t n_adapters)
{
    if (r == NULL)
        return;
    if (r->slots) {
        for (size_t a = 0; a < n_adapters; a++) {
            lmc_bitmap_free(&r->slots[a].found);
            lmc_bitmap_free(&r->slots[a].plan);
        }
        free(r->slots);
    }
    lmc_bitmap_free(&r->retained);
    lmc_bitmap_free(&r->reserved);
    lmc_bitmap_free(&r->loaded);
    free(r->keys);
    free(r->objs);
    free(r->kbuf);
    free(r->obuf);
    free(r->ebuf);
    free(r->ibuf);
    free(r->tbuf);
    free(r);
}

/* Everything a request will need, so the controller thread never allocates for it. */
static pf_request *request_new(const lmc_prefetch_controller *c, const lmc_object_key *keys,
                               size_t n, const lmc_layout_desc *layout, uint32_t extra_count,
                               lmc_trim_policy trim)
{
    pf_request *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->n = n;
    r->layout = *layout;
    r->extra_count = extra_count;
    r->trim = trim;
    r->phase = PF_LOOKUP;
    r->keys = malloc(n * sizeof(*r->keys));
    r->objs = calloc(n, sizeof(*r->objs));
    r->kbuf = malloc(n * sizeof(*r->kbuf));
    r->obuf = malloc(n * sizeof(*r->obuf));
    r->ebuf = malloc(n * sizeof(*r->ebuf));
    r->ibuf = malloc(n * sizeof(*r->ibuf));
    r->tbuf = malloc(n * sizeof(*r->tbuf));
    r->slots = calloc(c->n_adapters, sizeof(*r->slots));
    if (r->keys == NULL || r->objs == NULL || r->kbuf == NULL || r->obuf == NULL ||
        r->ebuf == NULL || r->ibuf == NULL || r->tbuf == NULL || r->slots == NULL)
        goto fail;
    if (lmc_bitmap_init(&r->retained, n, 0) != LMC_OK ||
        lmc_bitmap_init(&r->reserved, n, 0) != LMC_OK ||
        lmc_bitmap_init(&r->loaded, n, 0) != LMC_OK)
        goto fail;
    for (size_t a = 0; a < c->n_adapters; a++) {
        if (lmc_bitmap_init(&r->slots[a].found, n, 0) != LMC_OK ||
            lmc_bitmap_init(&r->slots[a].plan, n, 0) != LMC_OK)
            goto fail;
    }
    memcpy(r->keys, keys, n * sizeof(*keys));
    return r;

fail:
    request_free(r, c->n_adapters);
    return NULL;
}

/* Record the lookup-phase prefix count (visible to query_lookup). */
static void set_lookup(lmc_prefetch_controller *c, pf_request *r, size_t count)
{
    pthread_mutex_lock(&c->mu);
    r->rec->lookup_known = true;
    r->rec->lookup_count = count;
    pthread_mutex_unlock(&c->mu);
}

/*
 * Publish r->retained as the result and free the request. The caller has
 * released every L2 lock and L1 reservation the request held.
 */
static void complete(lmc_prefetch_controller *c, pf_request *r)
{
    pthread_mutex_lock(&c->mu);
    pf_record *rec = r->rec;
    if (!rec->lookup_known) {
        rec->lookup_known = true;
        rec->lookup_count = 0;
    }
    rec->result = r->retained; /* ownership moves to the record */
    memset(&r->retained, 0, sizeof(r->retained));
    rec->done = true;
    c->n_busy--;
    c->n_completed++;
    pthread_mutex_unlock(&c->mu);
    request_free(r, c->n_adapters);
}

/* Gather the positions set in `in` and clear in `not_in` (NULL: none) into ibuf/kbuf. */
static size_t gather(pf_request *r, const lmc_bitmap *in, const lmc_bitmap *not_in)
{
    size_t cnt = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (lmc_bitmap_test(in, i) && (not_in == NULL || !lmc_bitmap_test(not_in, i))) {
            r->ibuf[cnt] = i;
            r->kbuf[cnt] = r->keys[i];
            cnt++;
        }
    }
    return cnt;
}

/* Release adapter a's L2 lookup locks on keys in `in` but not in `not_in`. */
static void unlock_l2(lmc_prefetch_controller *c, pf_request *r, size_t a, const lmc_bitmap *in,
                      const lmc_bitmap *not_in)
{
    size_t cnt = gather(r, in, not_in);
    if (cnt > 0)
        lmc_l2_adapter_submit_unlock(c->adapters[a], r->kbuf, cnt);
}

/*
 * Give up the L1 reservations this request holds on keys in `in` and not in
 * `not_in` (NULL: none). Returns how many.
 *
 * The spec does finish_write then delete. Between those two calls the
 * half-filled buffer would be readable (a concurrent reserve_read could
 * lock it, so the delete fails and garbage is served) and finish_write
 * would queue it for an L2 store. A forced delete of the still-write-locked
 * object drops it atomically instead; nobody else can hold a lock on it,
 * since a reservation in mode "new" is exclusive.
 */
static size_t drop_reserved(lmc_prefetch_controller *c, pf_request *r, const lmc_bitmap *in,
                            const lmc_bitmap *not_in)
{
    size_t cnt = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (lmc_bitmap_test(&r->reserved, i) && lmc_bitmap_test(in, i) &&
            (not_in == NULL || !lmc_bitmap_test(not_in, i))) {
            r->kbuf[cnt++] = r->keys[i];
            lmc_bitmap_clear(&r->reserved, i);
        }
    }
    if (cnt > 0)
        lmc_l1_delete(c->l1, r->kbuf, cnt, true, r->ebuf);
    return cnt;
}

/* ---------------------------------------------------------------------- */
/* The state machine (controller thread)                                   */
/* ---------------------------------------------------------------------- */

/* LOOKUP: lookup_and_lock on every adapter. */
static void start_lookup(lmc_prefetch_controller *c, pf_request *r)
{
    for (size_t a = 0; a < c->n_adapters; a++) {
        pf_slot *s = &r->slots[a];
        lmc_status st = lmc_l2_adapter_submit_lookup(c->adapters[a], r->keys, r->n, &s->task_id);
        if (st != LMC_OK) {
            LMC_WARN(LOG_COMP, "request %lld: lookup on L2 adapter %zu (%s) failed to submit: %s",
                     (long long)r->rec->id, a, lmc_l2_adapter_type(c->adapters[a]),
                     lmc_status_str(st));
            continue; /* found stays empty */
        }
        s->waiting = true;
        r->n_waiting++;
    }
}

/*
 * Collect answered lookups (or loads) of r. A load bitmap is local to the
 * keys sent to that adapter: bit j is the j-th key of its plan.
 */
static void collect(lmc_prefetch_controller *c, pf_request *r)
{
    for (size_t a = 0; a < c->n_adapters && r->n_waiting > 0; a++) {
        pf_slot *s = &r->slots[a];
        if (!s->waiting)
            continue;
        lmc_bitmap b = {0, NULL};
        bool got = r->phase == PF_LOOKUP
                       ? lmc_l2_adapter_take_lookup_result(c->adapters[a], s->task_id, &b)
                       : lmc_l2_adapter_take_load_result(c->adapters[a], s->task_id, &b);
        if (!got)
            continue;
        s->waiting = false;
        r->n_waiting--;
        if (r->phase == PF_LOOKUP) {
            lmc_bitmap_or_into(&s->found, &b);
        } else {
            size_t cnt = lmc_bitmap_indices(&s->plan, r->ibuf, r->n);
            uint64_t keys = 0, bytes = 0;
            for (size_t j = 0; j < cnt && j < b.size; j++) {
                if (lmc_bitmap_test(&b, j)) {
                    lmc_bitmap_set(&r->loaded, r->ibuf[j]);
                    keys++;
                    bytes += r->objs[r->ibuf[j]].size;
                }
            }
            atomic_fetch_add(&c->loaded_keys_total, keys);
            atomic_fetch_add(&c->loaded_bytes_total, bytes);
        }
        lmc_bitmap_free(&b);
    }
}

/* FINALIZE, once every load has answered. Frees r. */
static void finalize(lmc_prefetch_controller *c, pf_request *r)
{
    /* Unlock phase 2: every planned key, loaded or not. */
    for (size_t a = 0; a < c->n_adapters; a++)
        unlock_l2(c, r, a, &r->slots[a].plan, NULL);

    /* Loaded keys become readable, read-locked 1+extra_count times. */
    bm_and_into(&r->loaded, &r->reserved);
    size_t cnt = gather(r, &r->loaded, NULL);
    if (cnt > 0) {
        lmc_l1_finish_write_and_reserve_read(c->l1, r->kbuf, cnt, r->extra_count, r->ebuf, NULL);
        size_t lost = 0;
        for (size_t j = 0; j < cnt; j++) {
            size_t i = r->ibuf[j];
            /* Either way the reservation is no longer ours to release. */
            lmc_bitmap_clear(&r->reserved, i);
            if (r->ebuf[j] != LMC_L1_SUCCESS) {
                lmc_bitmap_clear(&r->loaded, i);
                lost++;
            }
        }
        if (lost > 0)
            LMC_WARN(LOG_COMP,
                     "request %lld: %zu loaded keys could not be made readable (write "
                     "reservation expired or removed)",
                     (long long)r->rec->id, lost);
    }

    /* Reserved but not loaded: the key vanished from L2 between lookup and load. */
    size_t missing = drop_reserved(c, r, &r->reserved, NULL);
    if (missing > 0)
        LMC_WARN(LOG_COMP, "request %lld: not_found: %zu keys found by the lookup did not load",
                 (long long)r->rec->id, missing);

    /* A gap in the load cuts a PREFIX result; release what lies beyond it. */
    memcpy(r->retained.words, r->loaded.words, bm_words(&r->loaded) * sizeof(uint64_t));
    bm_trim(&r->retained, r->trim);
    cnt = gather(r, &r->loaded, &r->retained);
    if (cnt > 0)
        lmc_l1_finish_read(c->l1, r->kbuf, cnt, r->extra_count, r->ebuf);
    complete(c, r);
}

/* PLAN_AND_LOAD, once every lookup has answered. Returns true when r completed (freed). */
static bool plan_and_load(lmc_prefetch_controller *c, pf_request *r)
{
    /* Each key goes to the lowest-index adapter that has it. */
    bm_zero(&r->retained);
    for (size_t i = 0; i < r->n; i++) {
        for (size_t a = 0; a < c->n_adapters; a++) {
            if (lmc_bitmap_test(&r->slots[a].found, i)) {
                lmc_bitmap_set(&r->slots[a].plan, i);
                lmc_bitmap_set(&r->retained, i);
                break;
            }
        }
    }
    bm_trim(&r->retained, r->trim);

    if (!bm_any(&r->retained)) {
        for (size_t a = 0; a < c->n_adapters; a++)
            unlock_l2(c, r, a, &r->slots[a].found, NULL);
        complete(c, r);
        return true;
    }

    /* Reserve L1 buffers; temporary unless the policy retains them. */
    size_t cnt = gather(r, &r->retained, NULL);
    for (size_t j = 0; j < cnt; j++)
        r->tbuf[j] = c->policy != PF_POLICY_RETAIN;
    lmc_l1_reserve_write(c->l1, r->kbuf, cnt, r->tbuf, &r->layout, LMC_WRITE_NEW, r->ebuf, r->obuf);
    size_t n_oom = 0;
    for (size_t j = 0; j < cnt; j++) {
        size_t i = r->ibuf[j];
        if (r->ebuf[j] == LMC_L1_SUCCESS) {
            lmc_bitmap_set(&r->reserved, i);
            r->objs[i] = r->obuf[j];
        } else if (r->ebuf[j] == LMC_L1_OUT_OF_MEMORY) {
            n_oom++;
        }
        /* KEY_NOT_WRITABLE: already in L1 (or being written); not ours to load. */
    }
    if (n_oom > 0)
        LMC_WARN(LOG_COMP, "request %lld: l1_oom: %zu of %zu keys could not be reserved in L1",
                 (long long)r->rec->id, n_oom, cnt);

    /* Re-trim to what was reserved; PREFIX cuts at the first unreserved key. */
    bm_and_into(&r->retained, &r->reserved);
    bm_trim(&r->retained, r->trim);
    /* Reserved keys past the cut are released without ever becoming readable. */
    drop_reserved(c, r, &r->reserved, &r->retained);
    for (size_t a = 0; a < c->n_adapters; a++)
        bm_and_into(&r->slots[a].plan, &r->retained);

    /* Unlock phase 1: found but not loaded from this adapter. */
    for (size_t a = 0; a < c->n_adapters; a++)
        unlock_l2(c, r, a, &r->slots[a].found, &r->slots[a].plan);

    if (!bm_any(&r->retained)) {
        complete(c, r);
        return true;
    }

    r->phase = PF_LOAD;
    set_lookup(c, r, lmc_bitmap_count_leading_ones(&r->retained));
    for (size_t a = 0; a < c->n_adapters; a++) {
        pf_slot *s = &r->slots[a];
        size_t k = gather(r, &s->plan, NULL);
        if (k == 0)
            continue;
        for (size_t j = 0; j < k; j++)
            r->obuf[j] = r->objs[r->ibuf[j]];
        lmc_status st =
            lmc_l2_adapter_submit_load(c->adapters[a], r->kbuf, r->obuf, k, &s->task_id);
        if (st != LMC_OK) {
            LMC_WARN(LOG_COMP,
                     "request %lld: load of %zu keys from L2 adapter %zu (%s) failed "
                     "to submit: %s",
                     (long long)r->rec->id, k, a, lmc_l2_adapter_type(c->adapters[a]),
                     lmc_status_str(st));
            continue; /* nothing loads from it; finalize releases its keys */
        }
        s->waiting = true;
        r->n_waiting++;
    }
    if (r->n_waiting == 0) {
        finalize(c, r);
        return true;
    }
    return false;
}

/* Move r forward as far as its answers allow. Returns true when r completed (freed). */
static bool advance(lmc_prefetch_controller *c, pf_request *r)
{
    collect(c, r);
    if (r->n_waiting > 0)
        return false;
    if (r->phase == PF_LOOKUP)
        return plan_and_load(c, r);
    finalize(c, r);
    return true;
}

/* ---------------------------------------------------------------------- */
/* The thread                                                              */
/* ---------------------------------------------------------------------- */

static void drain_eventfd(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
}

static void publish_counts(lmc_prefetch_controller *c)
{
    size_t lookup = 0, load = 0;
    for (size_t i = 0; i < c->n_in_flight; i++) {
        if (c->in_flight[i]->phase == PF_LOOKUP)
            lookup++;
        else
            load++;
    }
    pthread_mutex_lock(&c->mu);
    c->st_pending = c->pend_len;
    c->st_in_flight = c->n_in_flight;
    c->st_lookup = lookup;
    c->st_load = load;
    pthread_mutex_unlock(&c->mu);
}

/* The controller's work, whoever runs it. Returns whether any request moved. */
static bool iterate(lmc_prefetch_controller *c)
{
    bool progress = false;
    /* 1. Submissions -> pending FIFO. */
    pthread_mutex_lock(&c->mu);
    pf_request *head = c->sub_head;
    pf_request *tail = c->sub_tail;
    size_t len = c->sub_len;
    c->sub_head = c->sub_tail = NULL;
    c->sub_len = 0;
    pthread_mutex_unlock(&c->mu);
    if (head != NULL) {
        if (c->pend_tail)
            c->pend_tail->next = head;
        else
            c->pend_head = head;
        c->pend_tail = tail;
        c->pend_len += len;
        progress = true;
    }

    /* 2. Advance every in-flight request (cheap: a few lookups per adapter). */
    for (size_t i = 0; i < c->n_in_flight;) {
        pf_phase before = c->in_flight[i]->phase;
        if (advance(c, c->in_flight[i])) {
            c->in_flight[i] = c->in_flight[--c->n_in_flight];
            progress = true;
        } else {
            progress |= c->in_flight[i]->phase != before;
            i++;
        }
    }

    /* 3. Start pending requests while there is room. */
    while (c->pend_head != NULL && c->n_in_flight < c->max_in_flight) {
        pf_request *r = c->pend_head;
        c->pend_head = r->next;
        if (c->pend_head == NULL)
            c->pend_tail = NULL;
        c->pend_len--;
        r->next = NULL;
        start_lookup(c, r);
        /* Lookups that failed to submit (or answered already) move on now. */
        if (!advance(c, r))
            c->in_flight[c->n_in_flight++] = r;
        progress = true;
    }
    if (progress)
        publish_counts(c);
    return progress;
}

static void *thread_main(void *arg)
{
    lmc_prefetch_controller *c = arg;
    pthread_setname_np(pthread_self(), "prefetch-ctl");
    while (!atomic_load(&c->stop)) {
        int rc = poll(c->pfds, c->n_pfds, POLL_TIMEOUT_MS);
        if (rc < 0 && errno != EINTR) {
            LMC_ERROR(LOG_COMP, "poll failed: %s", strerror(errno));
            lmc_sleep_ns(10 * 1000 * 1000); /* do not spin; the timeout path still works */
        }
        /* Drain before collecting, so a completion after this point signals again. */
        for (size_t i = 0; rc > 0 && i < c->n_pfds; i++) {
            if (c->pfds[i].revents & (POLLNVAL | POLLERR)) {
                /* An adapter closed under us (it must outlive the controller): stop polling
                 * its fd rather than spin; the 500 ms timeout still advances requests. */
                LMC_ERROR(LOG_COMP, "poll: fd %d is no longer valid; ignoring it", c->pfds[i].fd);
                c->pfds[i].fd = -1;
                continue;
            }
            if (c->pfds[i].revents & POLLIN) {
                if (i == 0)
                    drain_eventfd(c->pfds[i].fd);
                else
                    lmc_l2_drain_fd(c->pfds[i].fd);
            }
        }
        if (atomic_load(&c->stop))
            break;
        iterate(c);
    }
    atomic_store(&c->thread_alive, false);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Lifetime                                                                */
/* ---------------------------------------------------------------------- */

lmc_status lmc_prefetch_controller_create(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                          size_t n_adapters, const char *policy,
                                          uint32_t max_in_flight, lmc_prefetch_controller **out,
                                          lmc_error *err)
{
    return lmc_prefetch_controller_create_ex(l1, adapters, n_adapters, policy, max_in_flight, NULL,
                                             out, err);
}

lmc_status lmc_prefetch_controller_create_ex(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                             size_t n_adapters, const char *policy,
                                             uint32_t max_in_flight, const lmc_runtime *rt,
                                             lmc_prefetch_controller **out, lmc_error *err)
{
    *out = NULL;
    pf_policy pol;
    lmc_status st = parse_policy(policy, &pol, err);
    if (st != LMC_OK)
        return st;
    if (max_in_flight == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "prefetch max_in_flight must be >= 1 (got 0)");

    lmc_prefetch_controller *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "prefetch controller: out of memory");
    c->l1 = l1;
    c->policy = pol;
    c->manual = lmc_runtime_resolve(rt).manual;
    c->max_in_flight = max_in_flight;
    c->shutdown_wait_ms = c->manual ? 0 : SHUTDOWN_WAIT_MS;
    c->n_adapters = n_adapters;
    c->submit_fd = -1;
    atomic_init(&c->stop, false);
    atomic_init(&c->thread_alive, false);
    atomic_init(&c->loaded_keys_total, 0);
    atomic_init(&c->loaded_bytes_total, 0);
    pthread_mutex_init(&c->mu, NULL);

    c->n_buckets = 64;
    c->buckets = calloc(c->n_buckets, sizeof(*c->buckets));
    c->in_flight = calloc(max_in_flight, sizeof(*c->in_flight));
    c->n_pfds = 1 + 2 * n_adapters;
    c->pfds = calloc(c->n_pfds, sizeof(*c->pfds));
    if (n_adapters > 0)
        c->adapters = malloc(n_adapters * sizeof(*c->adapters));
    if (c->buckets == NULL || c->in_flight == NULL || c->pfds == NULL ||
        (n_adapters > 0 && c->adapters == NULL)) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "prefetch controller: out of memory");
        goto fail;
    }
    for (size_t a = 0; a < n_adapters; a++)
        c->adapters[a] = adapters[a];

    c->submit_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->submit_fd < 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "prefetch controller: eventfd: %s", strerror(errno));
        goto fail;
    }
    c->pfds[0].fd = c->submit_fd;
    c->pfds[0].events = POLLIN;
    for (size_t a = 0; a < n_adapters; a++) {
        c->pfds[1 + 2 * a].fd = lmc_l2_adapter_lookup_fd(adapters[a]);
        c->pfds[1 + 2 * a].events = POLLIN;
        c->pfds[2 + 2 * a].fd = lmc_l2_adapter_load_fd(adapters[a]);
        c->pfds[2 + 2 * a].events = POLLIN;
    }

    if (c->manual) {
        *out = c;
        return LMC_OK;
    }
    atomic_store(&c->thread_alive, true);
    int rc = pthread_create(&c->thread, NULL, thread_main, c);
    if (rc != 0) {
        atomic_store(&c->thread_alive, false);
        st = lmc_error_set(err, LMC_ERR_IO, "prefetch controller: cannot start thread: %s",
                           strerror(rc));
        goto fail;
    }
    c->thread_started = true;
    *out = c;
    return LMC_OK;

fail:
    if (c->submit_fd >= 0)
        close(c->submit_fd);
    free(c->buckets);
    free(c->in_flight);
    free(c->pfds);
    free(c->adapters);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return st;
}

/*
 * Shutdown of one in-flight request, after the bounded wait. Lookup phase:
 * unlock what answered lookups found. Load phase: unlock every planned key
 * and drop the reservations whose load answered. A load that never answered
 * may still write into its L1 buffers, so those reservations are left
 * write-locked: they become evictable when the write TTL expires.
 */
static void shutdown_request(lmc_prefetch_controller *c, pf_request *r)
{
    size_t abandoned = 0;
    for (size_t a = 0; a < c->n_adapters; a++) {
        pf_slot *s = &r->slots[a];
        if (r->phase == PF_LOOKUP) {
            if (s->waiting)
                abandoned++;
            else
                unlock_l2(c, r, a, &s->found, NULL);
            continue;
        }
        unlock_l2(c, r, a, &s->plan, NULL);
        if (s->waiting)
            abandoned++;
        else
            drop_reserved(c, r, &s->plan, NULL);
    }
    if (abandoned > 0)
        LMC_WARN(LOG_COMP, "shutdown: request %lld: %zu L2 %s tasks never answered; %s",
                 (long long)r->rec->id, abandoned, r->phase == PF_LOOKUP ? "lookup" : "load",
                 r->phase == PF_LOOKUP
                     ? "their locks are released when the adapter closes"
                     : "their L1 reservations stay write-locked until the write TTL expires");
}

static void free_queue(lmc_prefetch_controller *c, pf_request *r)
{
    while (r != NULL) {
        pf_request *next = r->next;
        request_free(r, c->n_adapters);
        r = next;
    }
}

void lmc_prefetch_controller_destroy(lmc_prefetch_controller *c)
{
    if (c == NULL)
        return;
    atomic_store(&c->stop, true);
    uint64_t one = 1;
    ssize_t wr = write(c->submit_fd, &one, sizeof(one));
    (void)wr; /* a full counter already wakes the thread */
    if (c->thread_started)
        pthread_join(c->thread, NULL);

    /* Let outstanding lookups and loads answer (the adapters outlive us). */
    uint64_t deadline = lmc_mono_ms() + c->shutdown_wait_ms;
    for (;;) {
        size_t waiting = 0;
        for (size_t i = 0; i < c->n_in_flight; i++) {
            collect(c, c->in_flight[i]);
            waiting += c->in_flight[i]->n_waiting;
        }
        if (waiting == 0 || lmc_mono_ms() >= deadline)
            break;
        lmc_sleep_ns(1000 * 1000);
    }
    for (size_t i = 0; i < c->n_in_flight; i++) {
        shutdown_request(c, c->in_flight[i]);
        request_free(c->in_flight[i], c->n_adapters);
    }
    /* Requests that never started hold nothing. */
    free_queue(c, c->pend_head);
    free_queue(c, c->sub_head);

    for (size_t b = 0; b < c->n_buckets; b++) {
        pf_record *rec = c->buckets[b];
        while (rec != NULL) {
            pf_record *next = rec->next;
            record_free(rec);
            rec = next;
        }
    }
    free(c->buckets);
    free(c->in_flight);
    free(c->pfds);
    free(c->adapters);
    close(c->submit_fd);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---------------------------------------------------------------------- */
/* Caller API                                                              */
/* ---------------------------------------------------------------------- */

lmc_status lmc_prefetch_controller_submit(lmc_prefetch_controller *c, const lmc_object_key *keys,
                                          size_t n, const lmc_layout_desc *layout,
                                          uint32_t extra_count, lmc_trim_policy policy,
                                          int64_t *request_id)
{
    if (n > SIZE_MAX / sizeof(lmc_object_key))
        return LMC_ERR_NOMEM;
    pf_record *rec = calloc(1, sizeof(*rec));
    if (rec == NULL)
        return LMC_ERR_NOMEM;
    /* Nothing to look up, or nowhere to look: the answer is known now. */
    bool immediate = n == 0 || c->n_adapters == 0;
    pf_request *r = NULL;
    if (immediate) {
        if (lmc_bitmap_init(&rec->result, n, 0) != LMC_OK) {
            free(rec);
            return LMC_ERR_NOMEM;
        }
        rec->done = true;
        rec->lookup_known = true;
    } else {
        r = request_new(c, keys, n, layout, extra_count, policy);
        if (r == NULL) {
            free(rec);
            return LMC_ERR_NOMEM;
        }
        r->rec = rec;
    }

    pthread_mutex_lock(&c->mu);
    rec->id = c->next_id;
    if (record_insert(c, rec) != LMC_OK) {
        pthread_mutex_unlock(&c->mu);
        record_free(rec);
        request_free(r, c->n_adapters);
        return LMC_ERR_NOMEM;
    }
    c->next_id++;
    if (immediate) {
        c->n_completed++;
    } else {
        c->n_busy++;
        if (c->sub_tail)
            c->sub_tail->next = r;
        else
            c->sub_head = r;
        c->sub_tail = r;
        c->sub_len++;
    }
    *request_id = rec->id;
    pthread_mutex_unlock(&c->mu);

    if (!immediate && !c->manual) {
        uint64_t one = 1;
        ssize_t wr = write(c->submit_fd, &one, sizeof(one));
        (void)wr; /* EAGAIN: the counter is saturated, so the thread wakes anyway */
    }
    return LMC_OK;
}

bool lmc_prefetch_controller_query_lookup(lmc_prefetch_controller *c, int64_t request_id,
                                          size_t *prefix_hits)
{
    bool ok = false;
    pthread_mutex_lock(&c->mu);
    pf_record *rec = record_find(c, request_id);
    if (rec != NULL && rec->lookup_known) {
        *prefix_hits = rec->lookup_count;
        ok = true;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

lmc_status lmc_prefetch_controller_take_result(lmc_prefetch_controller *c, int64_t request_id,
                                               lmc_bitmap *out)
{
    pthread_mutex_lock(&c->mu);
    pf_record *rec = record_find(c, request_id);
    if (rec == NULL || !rec->done) {
        pthread_mutex_unlock(&c->mu);
        return rec == NULL ? LMC_ERR_NOT_FOUND : LMC_ERR_BUSY;
    }
    record_unlink(c, rec);
    c->n_completed--;
    pthread_mutex_unlock(&c->mu);
    *out = rec->result;
    memset(&rec->result, 0, sizeof(rec->result));
    record_free(rec);
    return LMC_OK;
}

lmc_json *lmc_prefetch_controller_report_status(lmc_prefetch_controller *c)
{
    bool alive = atomic_load(&c->thread_alive);
    pthread_mutex_lock(&c->mu);
    size_t sub = c->sub_len, pend = c->st_pending, inflight = c->st_in_flight;
    size_t lookup = c->st_lookup, load = c->st_load, completed = c->n_completed;
    pthread_mutex_unlock(&c->mu);

    lmc_json *o = lmc_json_object();
    if (o == NULL)
        return NULL;
    /* Setters take ownership even on failure, so one check at the end suffices. */
    bool bad = false;
    /* Manual mode has no thread to lose. */
    bad |= lmc_json_object_set(o, "is_healthy", lmc_json_bool(alive || c->manual)) != LMC_OK;
    bad |= lmc_json_object_set(o, "thread_alive", lmc_json_bool(alive)) != LMC_OK;
    bad |= lmc_json_object_set(o, "max_in_flight", lmc_json_int(c->max_in_flight)) != LMC_OK;
    bad |= lmc_json_object_set(o, "submission_queue_size", lmc_json_int((int64_t)sub)) != LMC_OK;
    bad |= lmc_json_object_set(o, "pending_queue_size", lmc_json_int((int64_t)pend)) != LMC_OK;
    bad |= lmc_json_object_set(o, "in_flight_request_count", lmc_json_int((int64_t)inflight)) !=
           LMC_OK;
    bad |= lmc_json_object_set(o, "lookup_phase_count", lmc_json_int((int64_t)lookup)) != LMC_OK;
    bad |= lmc_json_object_set(o, "load_phase_count", lmc_json_int((int64_t)load)) != LMC_OK;
    bad |= lmc_json_object_set(o, "completed_results_count", lmc_json_int((int64_t)completed)) !=
           LMC_OK;
    bad |=
        lmc_json_object_set(o, "num_l2_adapters", lmc_json_int((int64_t)c->n_adapters)) != LMC_OK;
    if (bad) {
        lmc_json_free(o);
        return NULL;
    }
    return o;
}

size_t lmc_prefetch_controller_busy(lmc_prefetch_controller *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->n_busy;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void lmc_prefetch_controller_set_shutdown_wait_ms(lmc_prefetch_controller *c, uint32_t ms)
{
    c->shutdown_wait_ms = ms;
}

void lmc_prefetch_controller_loaded(lmc_prefetch_controller *c, uint64_t *keys, uint64_t *bytes)
{
    *keys = atomic_load(&c->loaded_keys_total);
    *bytes = atomic_load(&c->loaded_bytes_total);
}

bool lmc_prefetch_controller_step(lmc_prefetch_controller *c)
{
    return c->manual && iterate(c);
}

bool lmc_prefetch_controller_has_work(lmc_prefetch_controller *c)
{
    pthread_mutex_lock(&c->mu);
    bool work = c->sub_len > 0;
    pthread_mutex_unlock(&c->mu);
    return work;
}
