/*
 * synth.c -- synthetic storage-level traces (see synth.h).
 *
 * Frames go through trace/format.h into one growing buffer, written out in
 * pieces of about 1 MiB, with the header of a storage-level trace of
 * schema 2 and no recorded config. Keys name the model
 * "meta-llama/Llama-3.1-8B" at kv_rank 0x01000100 (TP 1, one group).
 */
#include "replay/synth.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/keymap.h"
#include "trace/format.h"
#include "trace/value.h"

#define P LMC_TRACE_QUALNAME_PREFIX
#define MODEL "meta-llama/Llama-3.1-8B"
#define KV_RANK 0x01000100
#define T_WALL0 1767225600.0
#define FLUSH_BYTES (1u << 20)
#define CHUNK_TOKENS 256
/*
 * A request's reads and writes come this long after its prefetch (s): a
 * server reads once the lookup has answered and the engine has scheduled
 * the request, which is milliseconds; reading 1 us later would race the
 * prefetch's L2 load in any replay. Its other calls are 1 us apart.
 */
#define READ_DELAY_S 10e-3
#define CALL_GAP_S 1e-6

typedef struct synth_file {
    const char *path;
    FILE *f;
    msgpack_sbuffer buf;
    lmc_status st;
    lmc_error *err;
} synth_file;

/* A failed fwrite or fclose, in the outputs' words (core/file.h); the first one counts. */
static lmc_status io_error(synth_file *s)
{
    if (s->st == LMC_OK)
        s->st = lmc_file_write_error("synthetic trace", s->path, errno, s->err);
    return s->st;
}

static lmc_status synth_open(synth_file *s, const char *path, lmc_error *err)
{
    memset(s, 0, sizeof(*s));
    s->path = path;
    s->err = err;
    msgpack_sbuffer_init(&s->buf);
    lmc_status st = lmc_file_fopen("synthetic trace", path, &s->f, err);
    if (st != LMC_OK)
        return s->st = st; /* the buffer holds nothing yet */
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, "LMCT", 4);
    h.magic_len = 4;
    h.format_version = 1;
    h.level = "storage";
    h.trace_schema_version = 2;
    h.t_mono_start = 1.0;
    h.t_wall_start = T_WALL0;
    h.sm_config_json = "";
    h.sm_config_digest = "";
    s->st = lmc_trace_encode_header(&s->buf, &h, err);
    if (s->st != LMC_OK) {
        /* Nothing to write: undo the open, so a failed open needs no close. */
        fclose(s->f);
        msgpack_sbuffer_destroy(&s->buf);
    }
    return s->st;
}

static void synth_flush(synth_file *s)
{
    if (s->st == LMC_OK && s->buf.size > 0 &&
        fwrite(s->buf.data, 1, s->buf.size, s->f) != s->buf.size)
        io_error(s);
    s->buf.size = 0;
}

/* One record of keys (and the optional arguments after them). */
static void synth_record(synth_file *s, double t, const char *qualname, lmc_tv *items,
                         const lmc_object_key *keys, size_t n, const lmc_trace_arg *extra,
                         size_t n_extra)
{
    if (s->st != LMC_OK)
        return;
    for (size_t i = 0; i < n; i++)
        items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[i]};
    lmc_trace_arg args[6];
    args[0] = (lmc_trace_arg){"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, n}}};
    for (size_t i = 0; i < n_extra && i < 5; i++)
        args[1 + i] = extra[i];
    s->st = lmc_trace_encode_record(&s->buf, t, T_WALL0 + t, qualname, strlen(qualname), args,
                                    1 + n_extra, s->err);
    if (s->buf.size >= FLUSH_BYTES)
        synth_flush(s);
}

static lmc_status synth_close(synth_file *s)
{
    synth_flush(s);
    msgpack_sbuffer_destroy(&s->buf);
    if (s->f != NULL && fclose(s->f) != 0)
        io_error(s);
    return s->st;
}

/* A key whose chunk hash is a then b (little-endian words), zero-padded to hash_len (16 or 32). */
static lmc_status make_key(lmc_object_key *k, uint64_t a, uint64_t b, size_t hash_len,
                           lmc_error *err)
{
    uint8_t hash[32] = {0};
    memcpy(hash, &a, 8);
    memcpy(hash + 8, &b, 8);
    return lmc_object_key_make(k, hash, hash_len, MODEL, KV_RANK, 0, "", err);
}

static lmc_trace_arg layout_arg(const lmc_layout_desc *layout)
{
    return (lmc_trace_arg){"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = layout}};
}

/* submit_prefetch_task of n keys for request number i, as a server issues it (PREFIX trim). */
static void synth_lookup(synth_file *s, double t, size_t i, lmc_tv *items,
                         const lmc_object_key *keys, size_t n, const lmc_layout_desc *layout)
{
    char rid[32];
    int rid_len = snprintf(rid, sizeof(rid), "req-%zu", i);
    lmc_trace_arg args[4] = {
        layout_arg(layout),
        {"extra_count", 11, lmc_tv_int(0)},
        {"external_request_id", 19, lmc_tv_str(rid, (size_t)rid_len)},
        {"policy", 6, {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_PREFIX}},
    };
    synth_record(s, t, P "submit_prefetch_task", items, keys, n, args, 4);
}

bool lmc_replay_synth_mooncake_path(char *buf, size_t len)
{
    const char *f = __FILE__;
    const char *tail = strstr(f, "src/replay/synth.c");
    if (tail == NULL)
        return false;
    snprintf(buf, len, "%.*s../shared/traces/mooncake/mooncake_synthetic_trace.jsonl",
             (int)(tail - f), f);
    return access(buf, R_OK) == 0;
}

/* ---------------------------------------------------------------------- */
/* Store pairs                                                             */
/* ---------------------------------------------------------------------- */

/*
 * The scratch of a writer: key and item arrays of max_keys, and the layout
 * of one object_bytes object; then the file. The caller frees the arrays
 * whatever the result.
 */
static lmc_status synth_begin(synth_file *s, const char *path, size_t max_keys,
                              uint64_t object_bytes, lmc_object_key **keys, lmc_tv **items,
                              lmc_layout_desc *layout, lmc_error *err)
{
    *keys = calloc(max_keys, sizeof(**keys));
    *items = calloc(max_keys, sizeof(**items));
    if (*keys == NULL || *items == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "synthetic trace: out of memory");
    int64_t dims[1] = {(int64_t)object_bytes};
    lmc_status st = lmc_layout_desc_make1(layout, dims, 1, LMC_DTYPE_UINT8, err);
    return st == LMC_OK ? synth_open(s, path, err) : st;
}

/* Record i of a writer of n keyed records (keys and items have room for k keys). */
typedef void (*keyed_record_fn)(synth_file *s, size_t i, lmc_object_key *keys, lmc_tv *items,
                                const lmc_layout_desc *layout, void *ctx, lmc_error *err);

/* n records of at most k keys of 4 KiB, each written by fn. */
static lmc_status synth_keyed(const char *path, size_t n, size_t k, keyed_record_fn fn, void *ctx,
                              lmc_error *err)
{
    synth_file s;
    lmc_object_key *keys = NULL;
    lmc_tv *items = NULL;
    lmc_layout_desc layout;
    lmc_status st = synth_begin(&s, path, k, 4096, &keys, &items, &layout, err);
    if (st != LMC_OK)
        goto out;
    for (size_t i = 0; i < n && s.st == LMC_OK; i++)
        fn(&s, i, keys, items, &layout, ctx, err);
    st = synth_close(&s);
out:
    free(keys);
    free(items);
    return st;
}

typedef struct pairs_ctx {
    size_t k, distinct;
    double gap_s;
} pairs_ctx;

static void pair_record(synth_file *s, size_t i, lmc_object_key *keys, lmc_tv *items,
                        const lmc_layout_desc *layout, void *ctx, lmc_error *err)
{
    const pairs_ctx *c = ctx;
    lmc_trace_arg extra[2] = {layout_arg(layout), {"mode", 4, lmc_tv_str("new", 3)}};
    size_t pair = (i / 2) % (c->distinct > 0 ? c->distinct : 1);
    for (size_t k = 0; k < c->k && s->st == LMC_OK; k++)
        s->st = make_key(&keys[k], pair * c->k + k, 0, 32, err);
    bool reserve = i % 2 == 0;
    synth_record(s, (double)i * c->gap_s, reserve ? P "reserve_write" : P "finish_write", items,
                 keys, c->k, extra, reserve ? 2 : 0);
}

lmc_status lmc_replay_synth_store_pairs(const char *path, size_t n, size_t keys_per_record,
                                        double gap_s, size_t distinct, lmc_error *err)
{
    pairs_ctx c = {keys_per_record, distinct, gap_s};
    return synth_keyed(path, n, keys_per_record, pair_record, &c, err);
}

/* ---------------------------------------------------------------------- */
/* Lookups                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct lookups_ctx {
    size_t k, documents;
    double gap_s;
    uint64_t rng;
} lookups_ctx;

static void lookup_record(synth_file *s, size_t i, lmc_object_key *keys, lmc_tv *items,
                          const lmc_layout_desc *layout, void *ctx, lmc_error *err)
{
    lookups_ctx *c = ctx;
    c->rng = lmc_splitmix64(c->rng);
    double u = (double)(c->rng >> 11) / 9007199254740992.0; /* [0, 1) */
    size_t doc = (size_t)(u * u * (double)c->documents);
    for (size_t k = 0; k < c->k && s->st == LMC_OK; k++)
        s->st = make_key(&keys[k], doc, k, 32, err);
    synth_lookup(s, (double)i * c->gap_s, i, items, keys, c->k, layout);
}

lmc_status lmc_replay_synth_lookups(const char *path, size_t n, size_t keys_per_record,
                                    double gap_s, size_t documents, lmc_error *err)
{
    lookups_ctx c = {keys_per_record, documents > 0 ? documents : 1, gap_s, 1};
    return synth_keyed(path, n, keys_per_record, lookup_record, &c, err);
}

/* ---------------------------------------------------------------------- */
/* A workload's requests as server calls                                   */
/* ---------------------------------------------------------------------- */

/* The chunk keys of a prompt: the chunk seed chain of client/workload.h names each prefix. */
static lmc_status chunk_keys(const uint32_t *tokens, size_t n_chunks, lmc_object_key *keys,
                             lmc_error *err)
{
    uint64_t seed = LMC_KV_PATTERN_SEED0;
    for (size_t c = 0; c < n_chunks; c++) {
        seed = lmc_kv_chunk_seed(seed, tokens + c * CHUNK_TOKENS, CHUNK_TOKENS);
        lmc_status st = make_key(&keys[c], seed, lmc_splitmix64(seed), 16, err);
        if (st != LMC_OK)
            return st;
    }
    return LMC_OK;
}

/*
 * A request whose reads and writes are still to be written: they come
 * READ_DELAY_S after its prefetch, and interleave with those of the other
 * requests in flight, so the file stays in time order.
 */
typedef struct pending {
    double t;             /* when its reads start */
    lmc_object_key *keys; /* owned */
    size_t n, hits;
    int stage; /* the next call: 0 enter, 1 exit, 2 finish_read, 3 reserve_write, 4 finish_write */
} pending;

typedef struct pending_list {
    pending *v; /* in arrival order */
    size_t len, cap;
} pending_list;

/* Skip the stages a request has no keys for; 5 = done. */
static void skip_empty_stages(pending *p)
{
    if (p->stage < 3 && p->hits == 0)
        p->stage = 3;
    if (p->stage >= 3 && p->hits == p->n)
        p->stage = 5;
}

static double stage_time(const pending *p)
{
    return p->t + p->stage * CALL_GAP_S;
}

/* Write the next call of p. */
static void write_stage(synth_file *s, pending *p, lmc_tv *items, const lmc_layout_desc *layout,
                        lmc_replay_synth_info *in)
{
    static const char *const qualnames[5] = {
        P "read_prefetched_results.__enter__", P "read_prefetched_results.__exit__",
        P "finish_read_prefetched", P "reserve_write", P "finish_write"};
    lmc_trace_arg write_args[2] = {layout_arg(layout), {"mode", 4, lmc_tv_str("new", 3)}};
    lmc_trace_arg read_args[1] = {{"extra_count", 11, lmc_tv_int(0)}};
    double t = stage_time(p);
    bool reading = p->stage < 3;
    const lmc_trace_arg *extra = p->stage == 2 ? read_args : p->stage == 3 ? write_args : NULL;
    size_t n_extra = p->stage == 2 ? 1 : p->stage == 3 ? 2 : 0;
    synth_record(s, t, qualnames[p->stage], items, reading ? p->keys : p->keys + p->hits,
                 reading ? p->hits : p->n - p->hits, extra, n_extra);
    in->records++;
    if (t > in->span_s)
        in->span_s = t;
    p->stage++;
    skip_empty_stages(p);
}

/* Write the pending calls due at or before t, earliest first (the oldest request on a tie). */
static void flush_pending(synth_file *s, pending_list *q, double t, lmc_tv *items,
                          const lmc_layout_desc *layout, lmc_replay_synth_info *in)
{
    while (q->len > 0 && s->st == LMC_OK) {
        size_t best = 0;
        for (size_t i = 1; i < q->len; i++) {
            if (stage_time(&q->v[i]) < stage_time(&q->v[best]))
                best = i;
        }
        pending *p = &q->v[best];
        if (stage_time(p) > t)
            return;
        write_stage(s, p, items, layout, in);
        if (p->stage == 5) {
            free(p->keys);
            memmove(p, p + 1, (q->len - best - 1) * sizeof(*p));
            q->len--;
        }
    }
}

static lmc_status pending_push(pending_list *q, const pending *p)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        pending *v = realloc(q->v, cap * sizeof(*v));
        if (v == NULL)
            return LMC_ERR_NOMEM;
        q->v = v;
        q->cap = cap;
    }
    q->v[q->len++] = *p;
    return LMC_OK;
}

lmc_status lmc_replay_synth_workload(const lmc_workload *w, const char *path,
                                     const lmc_replay_synth_options *opt,
                                     lmc_replay_synth_info *info, lmc_error *err)
{
    lmc_replay_synth_options o = opt != NULL ? *opt : (lmc_replay_synth_options){0};
    double scale = o.time_scale > 0 ? o.time_scale : 1.0;
    uint64_t bytes = o.object_bytes > 0 ? o.object_bytes : 16 * 1024;
    size_t n_req = lmc_workload_count(w);
    if (o.max_requests > 0 && o.max_requests < n_req)
        n_req = o.max_requests;
    lmc_replay_synth_info local = {0};
    lmc_replay_synth_info *in = info != NULL ? info : &local;
    memset(in, 0, sizeof(*in));

    size_t max_chunks = 0;
    for (size_t i = 0; i < n_req; i++) {
        size_t c = lmc_workload_prompt_len(w, i) / CHUNK_TOKENS;
        max_chunks = c > max_chunks ? c : max_chunks;
    }
    synth_file s;
    pending_list q = {0};
    lmc_object_key *keys = NULL;
    lmc_tv *items = NULL;
    lmc_layout_desc layout;
    lmc_keymap *seen = lmc_keymap_create(0);
    lmc_status st = seen != NULL
                        ? synth_begin(&s, path, max_chunks + 1, bytes, &keys, &items, &layout, err)
                        : lmc_error_set(err, LMC_ERR_NOMEM, "synthetic trace: out of memory");
    if (st != LMC_OK)
        goto out;

    for (size_t i = 0; i < n_req && s.st == LMC_OK; i++) {
        uint32_t *tokens = NULL;
        size_t n_tokens = 0;
        s.st = lmc_workload_tokens(w, i, CHUNK_TOKENS, &tokens, &n_tokens, err);
        size_t n = n_tokens / CHUNK_TOKENS;
        if (s.st == LMC_OK)
            s.st = chunk_keys(tokens, n, keys, err);
        free(tokens);
        if (s.st != LMC_OK || n == 0)
            continue;
        double t = lmc_workload_arrival_ms(w, i) / 1000.0 * scale;
        flush_pending(&s, &q, t, items, &layout, in);
        size_t hits = 0;
        while (hits < n && lmc_keymap_get(seen, &keys[hits]) != NULL)
            hits++;
        synth_lookup(&s, t, i, items, keys, n, &layout);
        in->records++;
        in->span_s = t;
        pending p = {
            .t = t + READ_DELAY_S, .keys = malloc(n * sizeof(*keys)), .n = n, .hits = hits};
        if (p.keys == NULL || pending_push(&q, &p) != LMC_OK) {
            free(p.keys);
            s.st = lmc_error_set(err, LMC_ERR_NOMEM, "synthetic trace: out of memory");
            break;
        }
        memcpy(p.keys, keys, n * sizeof(*keys));
        for (size_t c = hits; c < n && s.st == LMC_OK; c++) {
            if (lmc_keymap_put(seen, &keys[c], seen, NULL) != LMC_OK)
                s.st = lmc_error_set(err, LMC_ERR_NOMEM, "synthetic trace: out of memory");
        }
        in->requests++;
        in->chunks += n;
        in->hit_chunks += hits;
    }
    flush_pending(&s, &q, 1e300, items, &layout, in);
    st = synth_close(&s);
out:
    for (size_t i = 0; i < q.len; i++)
        free(q.v[i].keys);
    free(q.v);
    lmc_keymap_destroy(seen);
    free(keys);
    free(items);
    return st;
}
