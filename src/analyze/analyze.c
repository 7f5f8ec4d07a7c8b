/*
 * analyze.c -- the one-pass workload analysis (see analyze.h).
 *
 * Owns the key set (a key's fingerprint -> a dense id, the ids the curve's
 * stack distances run over), the (model, cache_salt) groups with a small
 * open-addressing index on their interned pointers, the rate buckets and
 * the curve. Only lookups and (full analysis) reads have their args
 * decoded; every other record costs the reader's peek of its head.
 *
 * The key set holds 16-byte slots, not keys: a key is told apart by 96
 * bits of two independent hashes -- the 64-bit hash the decoder computed
 * (lmc_object_key_hash) and 32 bits of the content hash that also decides
 * sampling -- so that a lookup is one cache miss, not the three of a full
 * key table, and a key costs 32 bytes instead of ~150. Two distinct keys
 * share a fingerprint with odds of about n^2 / 2^97 among n keys (below
 * 10^-11 for a billion keys), which is far below any figure printed.
 *
 * The decoding thread (the caller's) finds each looked-up key's group,
 * counts it, hashes it and decides whether it is sampled; the sampled
 * accesses go to the worker (analyze/worker.h), whose apply does the key
 * set, the distinct-key tallies and the curve -- on its own thread in a
 * full analysis, inline in a summary. The two halves cost about the same,
 * so a full analysis uses both cores.
 *
 * Threads: none.
 */
#include "analyze/analyze.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "analyze/worker.h"
#include "core/tbuckets.h"
#include "trace/marker.h"
#include "trace/ops.h"
#include "trace/recorder.h"

#define SAMPLE_BITS 24
#define WINDOW 16 /* accesses whose cache misses the worker overlaps */

/* A key's fingerprint and id: h1 (64 bits), then 32 bits of h2 and the id + 1 (0: empty). */
typedef struct key_slot {
    uint64_t h1;
    uint32_t h2;
    uint32_t id1;
} key_slot;

typedef struct key_set {
    key_slot *slots;
    size_t cap; /* a power of two; at most half full */
    size_t n;
} key_set;

typedef struct group {
    lmc_analyze_group g; /* unique_keys and footprint_bytes stay 0: the tally has them */
    uint64_t seed;       /* a hash of the model name and salt contents, for sampling */
} group;

/*
 * What the key accesses build: the key set, the distinct keys and their
 * bytes (in all and per group number), object sizes, and the curve. The
 * worker's apply writes it (on its thread in a full analysis); the
 * results read it after a sync.
 */
typedef struct tally {
    key_set keys;
    uint64_t unique, footprint;
    uint64_t min_size, max_size;
    uint64_t *g_unique, *g_footprint;
    size_t g_cap;
    lmc_mrc *mrc; /* NULL: no curve (a summary) */
} tally;

struct lmc_analyze {
    bool full;
    bool sampled;
    double rate;        /* as used: threshold / 2^SAMPLE_BITS */
    uint64_t threshold; /* a key is sampled when its hash's top bits are below it */
    tally t;
    group *groups;
    size_t n_groups, groups_cap;
    uint32_t *index; /* group number + 1 per slot; 0 empty */
    size_t index_cap;
    size_t last;                /* the group of the previous key */
    lmc_analyze_worker *worker; /* applies the key accesses to t, on its thread when full */
    const char *q_lookup, *q_read;
    size_t q_lookup_len, q_read_len;
    lmc_analyze_result tot; /* the scalar totals (no arrays) */
    lmc_tbuckets buckets;   /* of lmc_analyze_bucket */
};

static bool apply(void *ctx, const lmc_analyze_access *v, size_t n);
static void merge_bucket(void *into, const void *from);

double lmc_analyze_auto_rate(uint64_t file_bytes)
{
    if (file_bytes <= LMC_ANALYZE_EXACT_MAX_BYTES)
        return 1.0;
    double r = (double)LMC_ANALYZE_EXACT_MAX_BYTES / (double)file_bytes;
    return r < LMC_ANALYZE_MIN_RATE ? LMC_ANALYZE_MIN_RATE : r;
}

lmc_status lmc_analyze_create(const lmc_analyze_options *o, lmc_analyze **out, lmc_error *err)
{
    *out = NULL;
    double rate = o->sample_rate;
    if (!(rate >= 0 && rate <= 1))
        return lmc_error_set(err, LMC_ERR_INVALID, "sample rate %g is not in (0, 1]", rate);
    if (rate == 0)
        rate = lmc_analyze_auto_rate(o->file_bytes);
    lmc_analyze *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "analyze: out of memory");
    a->full = o->full;
    a->threshold = (uint64_t)(rate * (double)(1u << SAMPLE_BITS));
    if (a->threshold == 0)
        a->threshold = 1;
    a->sampled = a->threshold < (1u << SAMPLE_BITS);
    a->rate = a->sampled ? (double)a->threshold / (double)(1u << SAMPLE_BITS) : 1.0;
    lmc_tbuckets_init(&a->buckets, sizeof(lmc_analyze_bucket), merge_bucket);
    a->t.min_size = UINT64_MAX;
    a->q_lookup = lmc_trace_op_qualname(LMC_TRACE_OP_SUBMIT_PREFETCH);
    a->q_read = lmc_trace_op_qualname(LMC_TRACE_OP_READ_ENTER);
    a->q_lookup_len = strlen(a->q_lookup);
    a->q_read_len = strlen(a->q_read);
    if (a->full) {
        lmc_mrc_options mo = {.sample_rate = a->rate, .sizes = o->sizes, .n_sizes = o->n_sizes};
        if ((a->t.mrc = lmc_mrc_create(&mo)) == NULL)
            goto nomem;
    }
    if ((a->worker = lmc_analyze_worker_create(apply, &a->t, a->full)) == NULL)
        goto nomem;
    *out = a;
    return LMC_OK;
nomem:
    lmc_analyze_destroy(a);
    return lmc_error_set(err, LMC_ERR_NOMEM, "analyze: out of memory");
}

void lmc_analyze_destroy(lmc_analyze *a)
{
    if (a == NULL)
        return;
    lmc_analyze_worker_destroy(a->worker);
    free(a->t.keys.slots);
    free(a->t.g_unique);
    free(a->t.g_footprint);
    lmc_mrc_destroy(a->t.mrc);
    free(a->groups);
    free(a->index);
    lmc_tbuckets_free(&a->buckets);
    free(a);
}

/* ---------------------------------------------------------------------- */
/* Key set                                                                 */
/* ---------------------------------------------------------------------- */

static inline size_t key_home(const key_set *ks, uint64_t h1)
{
    return (size_t)(h1 ^ (h1 >> 32)) & (ks->cap - 1);
}

static bool key_set_grow(key_set *ks)
{
    size_t cap = ks->cap ? ks->cap * 2 : 1024;
    key_slot *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return false;
    key_set grown = {slots, cap, ks->n};
    for (size_t i = 0; i < ks->cap; i++) {
        if (ks->slots[i].id1 == 0)
            continue;
        size_t j = key_home(&grown, ks->slots[i].h1);
        while (slots[j].id1 != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = ks->slots[i];
    }
    free(ks->slots);
    *ks = grown;
    return true;
}

/*
 * The id of the key with fingerprint (h1, h2), inserting it as id n when
 * new (*fresh then true). false when memory runs out.
 */
static inline bool key_set_find(key_set *ks, uint64_t h1, uint32_t h2, uint32_t *id, bool *fresh)
{
    if ((ks->n + 1) * 2 > ks->cap && !key_set_grow(ks))
        return false;
    size_t mask = ks->cap - 1;
    size_t i = key_home(ks, h1);
    for (; ks->slots[i].id1 != 0; i = (i + 1) & mask) {
        if (ks->slots[i].h1 == h1 && ks->slots[i].h2 == h2) {
            *id = ks->slots[i].id1 - 1;
            *fresh = false;
            return true;
        }
    }
    if (ks->n >= UINT32_MAX - 1)
        return false; /* ids are 32-bit */
    *id = (uint32_t)ks->n++;
    ks->slots[i] = (key_slot){h1, h2, *id + 1};
    *fresh = true;
    return true;
}

static inline void key_set_prefetch(const key_set *ks, uint64_t h1)
{
    if (ks->cap > 0)
        __builtin_prefetch(&ks->slots[key_home(ks, h1)]);
}

/* Room for group number g in the tally's per-group arrays. */
static bool tally_group(tally *t, uint32_t g)
{
    if (g < t->g_cap)
        return true;
    size_t cap = t->g_cap ? t->g_cap : 8;
    while (cap <= g)
        cap *= 2;
    uint64_t *u = realloc(t->g_unique, cap * sizeof(*u));
    if (u == NULL)
        return false;
    t->g_unique = u;
    uint64_t *f = realloc(t->g_footprint, cap * sizeof(*f));
    if (f == NULL)
        return false;
    t->g_footprint = f;
    memset(u + t->g_cap, 0, (cap - t->g_cap) * sizeof(*u));
    memset(f + t->g_cap, 0, (cap - t->g_cap) * sizeof(*f));
    t->g_cap = cap;
    return true;
}

/*
 * The worker's apply (worker.h): accesses in windows of WINDOW, each
 * window's key-set slots prefetched, then its ids found (new keys
 * tallied) and their stack-distance state prefetched, then the tree
 * words that state points at, then the curve's accesses in order. Every
 * step is a cache miss that depends on the one before; a window overlaps
 * them.
 */
static bool apply(void *ctx, const lmc_analyze_access *v, size_t n)
{
    tally *t = ctx;
    uint32_t ids[WINDOW];
    for (size_t at = 0; at < n; at += WINDOW) {
        size_t m = n - at < WINDOW ? n - at : WINDOW;
        const lmc_analyze_access *w = v + at;
        for (size_t j = 0; j < m; j++)
            key_set_prefetch(&t->keys, w[j].h1);
        for (size_t j = 0; j < m; j++) {
            bool fresh;
            if (!key_set_find(&t->keys, w[j].h1, w[j].h2, &ids[j], &fresh))
                return false;
            if (t->mrc != NULL)
                lmc_mrc_prefetch_id(t->mrc, ids[j]);
            if (!fresh)
                continue;
            if (!tally_group(t, w[j].group))
                return false;
            uint64_t size = w[j].size;
            t->unique++;
            t->footprint += size;
            t->g_unique[w[j].group]++;
            t->g_footprint[w[j].group] += size;
            t->min_size = size < t->min_size ? size : t->min_size;
            t->max_size = size > t->max_size ? size : t->max_size;
        }
        if (t->mrc == NULL)
            continue;
        for (size_t j = 0; j < m; j++)
            lmc_mrc_prefetch_last(t->mrc, ids[j]);
        for (size_t j = 0; j < m; j++) {
            if (lmc_mrc_access(t->mrc, ids[j], w[j].size, w[j].replica) != LMC_OK)
                return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* Groups                                                                  */
/* ---------------------------------------------------------------------- */

static size_t slot_of(const char *model, const char *salt, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)model * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(uintptr_t)salt * 0xc2b2ae3d27d4eb4full;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static bool regrow_index(lmc_analyze *a)
{
    size_t cap = a->index_cap ? a->index_cap * 2 : 64;
    uint32_t *index = calloc(cap, sizeof(*index));
    if (index == NULL)
        return false;
    for (size_t i = 0; i < a->n_groups; i++) {
        size_t s = slot_of(a->groups[i].g.model_name, a->groups[i].g.cache_salt, cap);
        while (index[s] != 0)
            s = (s + 1) & (cap - 1);
        index[s] = (uint32_t)i + 1;
    }
    free(a->index);
    a->index = index;
    a->index_cap = cap;
    return true;
}

/* The group of key (made when new); NULL when memory runs out. */
static group *group_of(lmc_analyze *a, const lmc_object_key *k)
{
    if (a->n_groups > 0) {
        group *g = &a->groups[a->last];
        if (g->g.model_name == k->model_name && g->g.cache_salt == k->cache_salt)
            return g;
    }
    if (a->index_cap == 0 && !regrow_index(a))
        return NULL;
    size_t s = slot_of(k->model_name, k->cache_salt, a->index_cap);
    for (; a->index[s] != 0; s = (s + 1) & (a->index_cap - 1)) {
        group *g = &a->groups[a->index[s] - 1];
        if (g->g.model_name == k->model_name && g->g.cache_salt == k->cache_salt) {
            a->last = a->index[s] - 1;
            return g;
        }
    }
    if (a->n_groups == a->groups_cap) {
        size_t cap = a->groups_cap ? a->groups_cap * 2 : 8;
        group *groups = realloc(a->groups, cap * sizeof(*groups));
        if (groups == NULL)
            return NULL;
        a->groups = groups;
        a->groups_cap = cap;
    }
    group *g = &a->groups[a->n_groups];
    memset(g, 0, sizeof(*g));
    g->g.model_name = k->model_name;
    g->g.cache_salt = k->cache_salt;
    g->seed = XXH3_64bits_withSeed(k->cache_salt, strlen(k->cache_salt),
                                   XXH3_64bits(k->model_name, strlen(k->model_name)));
    a->index[s] = (uint32_t)a->n_groups + 1;
    a->last = a->n_groups++;
    if (a->n_groups * 2 > a->index_cap && !regrow_index(a)) {
        a->n_groups--; /* not indexed: forget it */
        return NULL;
    }
    return &a->groups[a->last];
}

/* ---------------------------------------------------------------------- */
/* Rate buckets                                                            */
/* ---------------------------------------------------------------------- */

/* One bucket folded into another (core/tbuckets.h): the counts add up. */
static void merge_bucket(void *into, const void *from)
{
    lmc_analyze_bucket *o = into;
    const lmc_analyze_bucket *b = from;
    o->requests += b->requests;
    o->keys += b->keys;
    o->keys_read += b->keys_read;
}

/* ---------------------------------------------------------------------- */
/* Records                                                                 */
/* ---------------------------------------------------------------------- */

static inline bool is(const lmc_trace_record *rec, const char *q, size_t len)
{
    return rec->qualname_len == len && memcmp(rec->qualname, q, len) == 0;
}

/* The key items of a record's "keys" argument (items of other kinds are skipped by callers). */
static const lmc_tv *key_items(const lmc_trace_record *rec, size_t *n)
{
    const lmc_trace_arg *arg = lmc_trace_args_find(rec->args, rec->nargs, "keys");
    *n = 0;
    if (arg == NULL || (arg->value.kind != LMC_TV_LIST && arg->value.kind != LMC_TV_TUPLE))
        return NULL;
    *n = arg->value.u.list.n;
    return arg->value.u.list.items;
}

/* The sampling hash of a key: its contents, so the sample is the same in every run. */
static inline uint64_t sample_hash(const group *g, const lmc_object_key *k)
{
    uint64_t seed = g->seed ^ (uint64_t)k->kv_rank * 0x9e3779b97f4a7c15ull ^
                    (uint64_t)k->object_group_id * 0xc2b2ae3d27d4eb4full;
    return XXH3_64bits_withSeed(k->chunk_hash, k->chunk_hash_len, seed);
}

static lmc_status nomem(lmc_error *err)
{
    return lmc_error_set(err, LMC_ERR_NOMEM, "analyze: out of memory");
}

static lmc_status lookup(lmc_analyze *a, const lmc_trace_record *rec, lmc_analyze_bucket *b,
                         lmc_error *err)
{
    const lmc_trace_arg *layout = lmc_trace_args_find(rec->args, rec->nargs, "layout_desc");
    uint64_t size = 0;
    if (layout != NULL && layout->value.kind == LMC_TV_LAYOUT)
        size = lmc_layout_desc_nbytes(layout->value.u.layout);
    else
        a->tot.unsized_requests++;
    size_t n;
    const lmc_tv *items = key_items(rec, &n);
    a->tot.requests++;
    if (b != NULL)
        b->requests++;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != LMC_TV_OBJECT_KEY)
            continue;
        const lmc_object_key *k = items[i].u.key;
        group *g = group_of(a, k);
        if (g == NULL)
            return nomem(err);
        if (first) {
            g->g.requests++;
            first = false;
        }
        g->g.keys++;
        a->tot.keys++;
        if (b != NULL)
            b->keys++;
        uint64_t h = sample_hash(g, k);
        if (a->sampled && (h >> (64 - SAMPLE_BITS)) >= a->threshold)
            continue;
        lmc_analyze_access acc = {.h1 = lmc_object_key_hash(k),
                                  .size = size,
                                  .h2 = (uint32_t)(h >> 8),
                                  .group = (uint32_t)(g - a->groups),
                                  .replica = (uint32_t)(h & (LMC_MRC_GROUPS - 1))};
        if (lmc_analyze_worker_push(a->worker, &acc) != LMC_OK)
            return nomem(err);
    }
    return LMC_OK;
}

static lmc_status read_enter(lmc_analyze *a, const lmc_trace_record *rec, lmc_analyze_bucket *b,
                             lmc_error *err)
{
    size_t n;
    const lmc_tv *items = key_items(rec, &n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != LMC_TV_OBJECT_KEY)
            continue;
        group *g = group_of(a, items[i].u.key);
        if (g == NULL)
            return nomem(err);
        g->g.keys_read++;
        a->tot.keys_read++;
        b->keys_read++;
    }
    return LMC_OK;
}

lmc_status lmc_analyze_record(lmc_analyze *a, lmc_trace_reader *rd, lmc_trace_record *rec,
                              lmc_error *err)
{
    static const char dropped[] = LMC_TRACE_DROPPED_QUALNAME;
    if (is(rec, dropped, sizeof(dropped) - 1)) {
        int64_t n;
        if (lmc_trace_reader_peek_int_arg(rd, "dropped_count", &n) == LMC_OK && n > 0)
            a->tot.dropped += (uint64_t)n;
        return LMC_OK;
    }
    if (lmc_trace_marker_find(rec->qualname, rec->qualname_len) != NULL)
        return LMC_OK; /* a tool's note about the trace, not an operation */
    a->tot.records++;
    if (isfinite(rec->t_mono) && rec->t_mono > a->tot.span_s)
        a->tot.span_s = rec->t_mono;
    bool lookup_rec = is(rec, a->q_lookup, a->q_lookup_len);
    bool read_rec = a->full && !lookup_rec && is(rec, a->q_read, a->q_read_len);
    if (!lookup_rec && !read_rec)
        return LMC_OK;
    if (lmc_trace_reader_decode_args(rd, rec, NULL) != LMC_OK) {
        a->tot.undecodable++;
        return LMC_OK;
    }
    lmc_analyze_bucket *b = NULL;
    if (a->full && (b = lmc_tbuckets_at(&a->buckets, rec->t_mono)) == NULL)
        return nomem(err);
    return lookup_rec ? lookup(a, rec, b, err) : read_enter(a, rec, b, err);
}

/* ---------------------------------------------------------------------- */
/* Results                                                                 */
/* ---------------------------------------------------------------------- */

static int cmp_group(const void *x, const void *y)
{
    const lmc_analyze_group *a = x, *b = y;
    int c = strcmp(a->model_name, b->model_name);
    return c != 0 ? c : strcmp(a->cache_salt, b->cache_salt);
}

static uint64_t estimate(const lmc_analyze *a, uint64_t sampled)
{
    return a->sampled ? (uint64_t)llround((double)sampled / a->rate) : sampled;
}

lmc_status lmc_analyze_result_get(lmc_analyze *a, lmc_analyze_result *out, lmc_error *err)
{
    if (lmc_analyze_worker_sync(a->worker) != LMC_OK) {
        memset(out, 0, sizeof(*out));
        return nomem(err);
    }
    *out = a->tot;
    out->groups = NULL;
    out->buckets = NULL;
    out->n_groups = out->n_buckets = 0;
    memset(&out->mrc, 0, sizeof(out->mrc));
    out->sample_rate = a->rate;
    out->estimated = a->sampled;
    const tally *t = &a->t;
    out->unique_keys = estimate(a, t->unique);
    out->footprint_bytes = estimate(a, t->footprint);
    out->min_object_bytes = t->unique > 0 ? t->min_size : 0;
    out->max_object_bytes = t->max_size;
    out->recorded_hit_rate = out->keys > 0 ? (double)out->keys_read / (double)out->keys : 0.0;
    if (a->n_groups > 0) {
        out->groups = malloc(a->n_groups * sizeof(*out->groups));
        if (out->groups == NULL)
            goto nomem;
        for (size_t i = 0; i < a->n_groups; i++) {
            out->groups[i] = a->groups[i].g;
            out->groups[i].unique_keys = i < t->g_cap ? estimate(a, t->g_unique[i]) : 0;
            out->groups[i].footprint_bytes = i < t->g_cap ? estimate(a, t->g_footprint[i]) : 0;
        }
        out->n_groups = a->n_groups;
        qsort(out->groups, out->n_groups, sizeof(*out->groups), cmp_group);
    }
    if (a->full) {
        void *buckets;
        if (lmc_tbuckets_result(&a->buckets, a->tot.span_s, &out->bucket_s, &buckets,
                                &out->n_buckets) != LMC_OK)
            goto nomem;
        out->buckets = buckets;
        if (lmc_mrc_result_get(a->t.mrc, &out->mrc) != LMC_OK)
            goto nomem;
    }
    return LMC_OK;
nomem:
    lmc_analyze_result_free(out);
    return nomem(err);
}

void lmc_analyze_result_free(lmc_analyze_result *r)
{
    if (r == NULL)
        return;
    free(r->groups);
    free(r->buckets);
    lmc_mrc_result_free(&r->mrc);
    r->groups = NULL;
    r->buckets = NULL;
    r->n_groups = r->n_buckets = 0;
}

lmc_status lmc_analyze_file(const char *path, const lmc_analyze_options *o, lmc_analyze_result *out,
                            lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    lmc_analyze_options opt = *o;
    struct stat st;
    if (opt.file_bytes == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
        opt.file_bytes = (uint64_t)st.st_size;
    lmc_trace_reader *rd = NULL;
    lmc_analyze *a = NULL;
    lmc_status s = lmc_trace_reader_open(path, &rd, err);
    if (s != LMC_OK)
        goto out;
    if ((s = lmc_analyze_create(&opt, &a, err)) != LMC_OK)
        goto out;
    lmc_trace_record rec;
    while ((s = lmc_trace_reader_next_record(rd, &rec)) == LMC_OK) {
        if ((s = lmc_analyze_record(a, rd, &rec, err)) != LMC_OK)
            goto out;
    }
    if (s == LMC_ERR_IO) {
        char q[256];
        lmc_repr_str(path, strlen(path), q, sizeof(q));
        s = lmc_error_set(err, LMC_ERR_IO, "trace file %s: read error (see the log)", q);
        goto out;
    }
    if ((s = lmc_analyze_result_get(a, out, err)) != LMC_OK)
        goto out;
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    snprintf(out->level, sizeof(out->level), "%s", h->level != NULL ? h->level : "");
    out->trace_schema_version = h->trace_schema_version;
    snprintf(out->sm_config_digest, sizeof(out->sm_config_digest), "%s",
             h->sm_config_digest != NULL ? h->sm_config_digest : "");
    out->malformed = lmc_trace_reader_malformed(rd);
    out->truncated = lmc_trace_reader_truncated(rd);
out:
    lmc_analyze_destroy(a);
    lmc_trace_reader_close(rd);
    return s;
}
