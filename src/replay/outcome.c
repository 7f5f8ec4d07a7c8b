/*
 * outcome.c -- outcome counters, per-key reasons, totals, figures and the
 * outcome digest (see outcome.h).
 *
 * Owns: the counter table (from outcome.def) and, per digest, an OpenSSL
 * SHA-256 stream. Nothing here allocates per record: lines are encoded
 * into a stack buffer and fed to the stream.
 *
 * Threads: none.
 */
#include "replay/outcome.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/strbuf.h"

static const lmc_outcome_counter_info g_counters[] = {
#define LMC_OUTCOME_COUNT(OP, name, doc) {LMC_TRACE_OP_##OP, #name, doc},
#include "replay/outcome.def"
#undef LMC_OUTCOME_COUNT
};
_Static_assert(sizeof(g_counters) / sizeof(g_counters[0]) == LMC_OC_COUNT_,
               "one table row per counter");

const lmc_outcome_counter_info *lmc_outcome_counter_get(size_t c)
{
    return c < LMC_OC_COUNT_ ? &g_counters[c] : NULL;
}

const char *lmc_outcome_op_name(lmc_trace_op op)
{
    const lmc_trace_op_info *info = lmc_trace_op_get(op);
    return info != NULL ? info->name : "none";
}

void lmc_replay_outcome_begin(lmc_replay_outcome *o, lmc_trace_op op, const lmc_object_key *keys,
                              size_t n_keys)
{
    memset(o, 0, sizeof(*o));
    o->op = op;
    o->n_keys = n_keys > UINT32_MAX ? UINT32_MAX : (uint32_t)n_keys;
    o->keys_hash = keys != NULL ? lmc_outcome_keys_hash(keys, n_keys) : 0;
}

static size_t put_i64_le(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (size_t i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
    return 8;
}

static size_t put_cstr(uint8_t *p, const char *s)
{
    size_t n = strlen(s != NULL ? s : "") + 1;
    memcpy(p, s != NULL ? s : "", n);
    return n;
}

uint64_t lmc_outcome_keys_hash(const lmc_object_key *keys, size_t n)
{
    /* One key's canonical bytes, at most: the length byte, the hash, the strings, two ints. */
    uint8_t buf[1 + LMC_CHUNK_HASH_MAX + LMC_MODEL_NAME_MAX + 1 + 16 + 4 * LMC_CACHE_SALT_MAX + 1];
    uint64_t h = n;
    for (size_t i = 0; i < n; i++) {
        const lmc_object_key *k = &keys[i];
        size_t len = 0;
        buf[len++] = k->chunk_hash_len;
        memcpy(buf + len, k->chunk_hash, k->chunk_hash_len);
        len += k->chunk_hash_len;
        size_t model = strlen(k->model_name != NULL ? k->model_name : "");
        size_t salt = strlen(k->cache_salt != NULL ? k->cache_salt : "");
        if (model > LMC_MODEL_NAME_MAX || salt > 4 * LMC_CACHE_SALT_MAX)
            continue; /* a key the constructor would have refused */
        len += put_cstr(buf + len, k->model_name);
        len += put_i64_le(buf + len, k->kv_rank);
        len += put_i64_le(buf + len, k->object_group_id);
        len += put_cstr(buf + len, k->cache_salt);
        h = XXH3_64bits_withSeed(buf, len, h);
    }
    return h;
}

/* ---- reasons ----------------------------------------------------------- */

bool lmc_outcome_reserve_needs_state(lmc_l1_error e)
{
    return e == LMC_L1_KEY_NOT_WRITABLE;
}

bool lmc_outcome_read_needs_state(lmc_l1_error e)
{
    return e == LMC_L1_KEY_NOT_READABLE;
}

lmc_outcome_counter lmc_outcome_reserve_reason(lmc_l1_error e, lmc_write_mode mode,
                                               lmc_l1_key_state state)
{
    switch (e) {
    case LMC_L1_SUCCESS:
        return LMC_OC_RESERVE_WRITE_reserved;
    case LMC_L1_OUT_OF_MEMORY:
        return LMC_OC_RESERVE_WRITE_out_of_memory;
    case LMC_L1_KEY_NOT_WRITABLE:
        /* Ordered: a state that rules the key out in every mode comes first. */
        if (state == LMC_L1_STATE_ABSENT)
            return LMC_OC_RESERVE_WRITE_absent;
        if (state == LMC_L1_STATE_WRITING)
            return LMC_OC_RESERVE_WRITE_write_locked;
        if (mode == LMC_WRITE_NEW)
            return LMC_OC_RESERVE_WRITE_already_present;
        if (state == LMC_L1_STATE_READ_LOCKED)
            return LMC_OC_RESERVE_WRITE_read_locked;
        return LMC_OC_RESERVE_WRITE_not_writable;
    default:
        return LMC_OC_RESERVE_WRITE_other;
    }
}

/*
 * finish_write and finish_read_prefetched end a hold the same way in L1: a
 * key is gone (KEY_NOT_EXIST) or not held as the call expects
 * (KEY_IN_WRONG_STATE). One mapping serves both, with the op's counters.
 */
static lmc_outcome_counter finish_reason(lmc_l1_error e, lmc_outcome_counter done,
                                         lmc_outcome_counter not_in_l1,
                                         lmc_outcome_counter wrong_state, lmc_outcome_counter other)
{
    switch (e) {
    case LMC_L1_SUCCESS:
        return done;
    case LMC_L1_KEY_NOT_EXIST:
        return not_in_l1;
    case LMC_L1_KEY_IN_WRONG_STATE:
        return wrong_state;
    default:
        return other;
    }
}

lmc_outcome_counter lmc_outcome_finish_write_reason(lmc_l1_error e)
{
    return finish_reason(e, LMC_OC_FINISH_WRITE_finished, LMC_OC_FINISH_WRITE_not_in_l1,
                         LMC_OC_FINISH_WRITE_not_reserved, LMC_OC_FINISH_WRITE_other);
}

lmc_outcome_counter lmc_outcome_finish_read_reason(lmc_l1_error e)
{
    return finish_reason(e, LMC_OC_FINISH_READ_released, LMC_OC_FINISH_READ_not_in_l1,
                         LMC_OC_FINISH_READ_not_read_locked, LMC_OC_FINISH_READ_other);
}

lmc_outcome_counter lmc_outcome_read_reason(lmc_l1_error e, lmc_l1_key_state state)
{
    switch (e) {
    case LMC_L1_SUCCESS:
        return LMC_OC_READ_ENTER_found;
    case LMC_L1_KEY_NOT_EXIST:
        return LMC_OC_READ_ENTER_not_in_l1;
    case LMC_L1_KEY_NOT_READABLE:
        return state == LMC_L1_STATE_WRITING ? LMC_OC_READ_ENTER_write_locked
                                             : LMC_OC_READ_ENTER_not_read_locked;
    default:
        return LMC_OC_READ_ENTER_other;
    }
}

lmc_outcome_counter lmc_outcome_store_reason(lmc_l1_error e, lmc_l1_key_state state)
{
    switch (e) {
    case LMC_L1_SUCCESS:
        return LMC_OC_SUBMIT_PREFETCH_stored;
    case LMC_L1_OUT_OF_MEMORY:
        return LMC_OC_SUBMIT_PREFETCH_store_out_of_memory;
    case LMC_L1_KEY_NOT_WRITABLE:
        if (state == LMC_L1_STATE_WRITING)
            return LMC_OC_SUBMIT_PREFETCH_store_write_locked;
        return state == LMC_L1_STATE_ABSENT ? LMC_OC_SUBMIT_PREFETCH_store_other
                                            : LMC_OC_SUBMIT_PREFETCH_store_present;
    default:
        return LMC_OC_SUBMIT_PREFETCH_store_other;
    }
}

void lmc_outcome_prefetch_finish(lmc_replay_outcome *o, const lmc_prefetch_handle *h,
                                 const lmc_bitmap *found, bool unfinished)
{
    size_t n_found = h->l1_found_count, prefix = 0;
    if (found != NULL) {
        n_found = lmc_bitmap_popcount(found);
        prefix = lmc_bitmap_count_leading_ones(found);
    } else {
        /* The L1 hits ascend; the prefix is the run that starts at key 0. */
        while (prefix < h->l1_found_count && h->l1_found_indices[prefix] == prefix)
            prefix++;
    }
    o->v[LMC_OC_SUBMIT_PREFETCH_l2_hits] = (uint32_t)(n_found - h->l1_found_count);
    o->v[LMC_OC_SUBMIT_PREFETCH_missed] = (uint32_t)(h->total_requested_keys - n_found);
    o->v[LMC_OC_SUBMIT_PREFETCH_found_prefix] = (uint32_t)prefix;
    o->v[LMC_OC_SUBMIT_PREFETCH_unfinished] = unfinished;
    o->pending = false;
}

/* ---- totals and figures ----------------------------------------------- */

void lmc_replay_totals_add(lmc_replay_totals *t, const lmc_replay_outcome *o)
{
    if (o == NULL || o->op <= LMC_TRACE_OP_NONE || o->op >= LMC_TRACE_OP_COUNT_)
        return;
    if (o->not_reissued) {
        t->not_reissued[o->op]++;
        t->not_reissued_keys[o->op] += o->n_keys;
        return;
    }
    t->records[o->op]++;
    t->keys[o->op] += o->n_keys;
    for (size_t c = 0; c < LMC_OC_COUNT_; c++) {
        if (g_counters[c].op == o->op)
            t->v[c] += o->v[c];
    }
}

static double ratio(uint64_t num, uint64_t den, double if_none)
{
    return den > 0 ? (double)num / (double)den : if_none;
}

lmc_replay_figures lmc_replay_figures_of(const lmc_replay_totals *t)
{
    lmc_replay_figures f = {0};
    f.lookups = t->records[LMC_TRACE_OP_SUBMIT_PREFETCH];
    f.looked_up_keys = t->keys[LMC_TRACE_OP_SUBMIT_PREFETCH];
    f.l1_hit_keys = t->v[LMC_OC_SUBMIT_PREFETCH_l1_hits];
    f.l2_hit_keys = t->v[LMC_OC_SUBMIT_PREFETCH_l2_hits];
    f.found_keys = f.l1_hit_keys + f.l2_hit_keys;
    f.chunk_hit_rate = ratio(f.found_keys, f.looked_up_keys, 0.0);
    f.l1_hit_rate = ratio(f.l1_hit_keys, f.looked_up_keys, 0.0);
    f.l2_hit_rate = ratio(f.l2_hit_keys, f.looked_up_keys, 0.0);
    f.reservations = t->records[LMC_TRACE_OP_RESERVE_WRITE];
    f.reserved_keys = t->v[LMC_OC_RESERVE_WRITE_reserved];
    f.refused_keys = t->keys[LMC_TRACE_OP_RESERVE_WRITE] - f.reserved_keys;
    /* Every recorded __enter__ read what its prefetch had found: a hit at record time. */
    f.recorded_reads = t->records[LMC_TRACE_OP_READ_ENTER];
    f.reads_still_hit = t->v[LMC_OC_READ_ENTER_context_ok];
    f.failed_reads = f.recorded_reads - f.reads_still_hit;
    f.read_agreement = ratio(f.reads_still_hit, f.recorded_reads, 1.0);
    f.recorded_read_keys = t->keys[LMC_TRACE_OP_READ_ENTER];
    f.read_keys_found = t->v[LMC_OC_READ_ENTER_found];
    f.read_keys_missed = f.recorded_read_keys - f.read_keys_found;
    f.key_agreement = ratio(f.read_keys_found, f.recorded_read_keys, 1.0);
    /* The trace's own reads and lookups, whether this mode reissued them or not. */
    f.recorded_hit_rate = ratio(
        t->keys[LMC_TRACE_OP_READ_ENTER] + t->not_reissued_keys[LMC_TRACE_OP_READ_ENTER],
        t->keys[LMC_TRACE_OP_SUBMIT_PREFETCH] + t->not_reissued_keys[LMC_TRACE_OP_SUBMIT_PREFETCH],
        0.0);
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++)
        f.not_reissued_records += t->not_reissued[op];
    f.engine_hit_keys = t->v[LMC_OC_SUBMIT_PREFETCH_hit_keys];
    f.engine_hit_rate = ratio(f.engine_hit_keys, f.looked_up_keys, 0.0);
    f.engine_read_keys = t->v[LMC_OC_SUBMIT_PREFETCH_read];
    f.engine_stored_keys = t->v[LMC_OC_SUBMIT_PREFETCH_stored];
    f.engine_refused_keys = t->v[LMC_OC_SUBMIT_PREFETCH_store_present] +
                            t->v[LMC_OC_SUBMIT_PREFETCH_store_write_locked] +
                            t->v[LMC_OC_SUBMIT_PREFETCH_store_out_of_memory] +
                            t->v[LMC_OC_SUBMIT_PREFETCH_store_other];
    return f;
}

static const lmc_replay_figure_info g_figures[] = {
#define IS_RATIO_U64 false
#define IS_RATIO_F64 true
#define LMC_FIGURE_ROW(name, T, doc) {#name, IS_RATIO_##T, doc},
    LMC_REPLAY_FIGURES(LMC_FIGURE_ROW)
#undef LMC_FIGURE_ROW
};
#define N_FIGURES (sizeof(g_figures) / sizeof(g_figures[0]))

const lmc_replay_figure_info *lmc_replay_figure_get(size_t i)
{
    return i < N_FIGURES ? &g_figures[i] : NULL;
}

double lmc_replay_figure_value(const lmc_replay_figures *f, size_t i)
{
    size_t k = 0;
#define LMC_FIGURE_VALUE(name, T, doc)                                                             \
    if (k++ == i)                                                                                  \
        return (double)f->name;
    LMC_REPLAY_FIGURES(LMC_FIGURE_VALUE)
#undef LMC_FIGURE_VALUE
    return 0.0;
}

size_t lmc_replay_totals_fields(const lmc_replay_totals *t, const lmc_replay_record_counts *rc,
                                lmc_totals_field *out, size_t cap)
{
    size_t n = 0;
#define FIELD(s, nm, v)                                                                            \
    do {                                                                                           \
        if (n < cap)                                                                               \
            out[n] = (lmc_totals_field){(s), (nm), (v)};                                           \
        n++;                                                                                       \
    } while (0)
    FIELD("records", "replayed", rc->replayed);
    FIELD("records", "skipped", rc->skipped);
    FIELD("records", "failed", rc->failed);
    FIELD("records", "malformed", rc->malformed);
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++) {
        const char *scope = lmc_outcome_op_name((lmc_trace_op)op);
        FIELD(scope, "records", t->records[op]);
        FIELD(scope, "keys", t->keys[op]);
        for (size_t c = 0; c < LMC_OC_COUNT_; c++) {
            if (g_counters[c].op == (lmc_trace_op)op)
                FIELD(scope, g_counters[c].name, t->v[c]);
        }
    }
    FIELD("l1", "peak_used_bytes", t->l1_peak_used_bytes);
    FIELD("l1", "capacity_bytes", t->l1_capacity_bytes);
    FIELD("l1", "evicted_keys", t->sm.l1_evicted_keys);
    FIELD("l2", "stored_keys", t->sm.l2_stored_keys);
    FIELD("l2", "stored_bytes", t->sm.l2_stored_bytes);
    FIELD("l2", "store_failed_tasks", t->sm.l2_store_failed_tasks);
    FIELD("l2", "loaded_keys", t->sm.l2_loaded_keys);
    FIELD("l2", "loaded_bytes", t->sm.l2_loaded_bytes);
    FIELD("l2", "evicted_keys", t->sm.l2_evicted_keys);
#undef FIELD
    return n;
}

/* ---- canonical lines and the digest ------------------------------------ */

/* snprintf that keeps a running length and never writes past cap. */
static size_t put(char *buf, size_t cap, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t put(char *buf, size_t cap, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, fmt, ap);
    va_end(ap);
    return n < 0 ? len : len + (size_t)n;
}

size_t lmc_outcome_encode_record(char *buf, size_t cap, const lmc_replay_record_view *rec)
{
    /* Built once per record: no printf format parsing on this path. */
    const lmc_replay_outcome *o = rec->outcome;
    lmc_fixbuf l = LMC_FIXBUF(buf, cap);
    lmc_fixbuf_u64(&l, rec->index);
    lmc_fixbuf_puts(&l, " ");
    lmc_fixbuf_puts(&l, rec->qualname);
    if (rec->skipped) {
        lmc_fixbuf_puts(&l, " skipped");
    } else if (rec->failed || o == NULL) {
        lmc_fixbuf_puts(&l, " failed");
    } else if (o->not_reissued) {
        lmc_fixbuf_puts(&l, " not_reissued keys=");
        lmc_fixbuf_u64(&l, o->n_keys);
        lmc_fixbuf_puts(&l, " kh=");
        lmc_fixbuf_hex64(&l, o->keys_hash);
    } else {
        lmc_fixbuf_puts(&l, " keys=");
        lmc_fixbuf_u64(&l, o->n_keys);
        lmc_fixbuf_puts(&l, " kh=");
        lmc_fixbuf_hex64(&l, o->keys_hash);
        for (size_t c = 0; c < LMC_OC_COUNT_; c++) {
            if (g_counters[c].op != o->op)
                continue;
            lmc_fixbuf_puts(&l, " ");
            lmc_fixbuf_puts(&l, g_counters[c].name);
            lmc_fixbuf_puts(&l, "=");
            lmc_fixbuf_u64(&l, o->v[c]);
        }
    }
    lmc_fixbuf_puts(&l, "\n");
    return lmc_fixbuf_finish(&l);
}

#define MAX_TOTALS_FIELDS (4 + 2 * LMC_TRACE_OP_COUNT_ + LMC_OC_COUNT_ + 9)

size_t lmc_outcome_encode_totals(char *buf, size_t cap, const lmc_replay_totals *t,
                                 const lmc_replay_record_counts *rc)
{
    lmc_totals_field f[MAX_TOTALS_FIELDS];
    size_t n = lmc_replay_totals_fields(t, rc, f, MAX_TOTALS_FIELDS);
    size_t len = put(buf, cap, 0, "totals");
    for (size_t i = 0; i < n && i < MAX_TOTALS_FIELDS; i++)
        len = put(buf, cap, len, " %s.%s=%" PRIu64, f[i].scope, f[i].name, f[i].value);
    return put(buf, cap, len, "\n");
}

struct lmc_outcome_digest {
    lmc_sha256_stream *sha;
};

lmc_outcome_digest *lmc_outcome_digest_create(void)
{
    lmc_outcome_digest *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    d->sha = lmc_sha256_stream_create();
    if (d->sha == NULL) {
        free(d);
        return NULL;
    }
    return d;
}

void lmc_outcome_digest_destroy(lmc_outcome_digest *d)
{
    if (d == NULL)
        return;
    lmc_sha256_stream_destroy(d->sha);
    free(d);
}

/* Feed one encoded line, on the heap only when it does not fit the stack buffer. */
static void feed(lmc_outcome_digest *d, size_t (*measure)(char *, size_t, const void *),
                 const void *arg)
{
    char stack[1024];
    size_t len = measure(stack, sizeof(stack), arg);
    if (len < sizeof(stack)) {
        lmc_sha256_stream_update(d->sha, stack, len);
        return;
    }
    char *heap = malloc(len + 1);
    if (heap == NULL) {
        /* Cannot happen for sane qualnames; the digest then covers the cut line. */
        lmc_sha256_stream_update(d->sha, stack, sizeof(stack) - 1);
        return;
    }
    measure(heap, len + 1, arg);
    lmc_sha256_stream_update(d->sha, heap, len);
    free(heap);
}

static size_t encode_record_arg(char *buf, size_t cap, const void *arg)
{
    return lmc_outcome_encode_record(buf, cap, arg);
}

void lmc_outcome_digest_record(lmc_outcome_digest *d, const lmc_replay_record_view *rec)
{
    feed(d, encode_record_arg, rec);
}

typedef struct totals_arg {
    const lmc_replay_totals *t;
    const lmc_replay_record_counts *rc;
} totals_arg;

static size_t encode_totals_arg(char *buf, size_t cap, const void *arg)
{
    const totals_arg *a = arg;
    return lmc_outcome_encode_totals(buf, cap, a->t, a->rc);
}

void lmc_outcome_digest_finish(lmc_outcome_digest *d, const lmc_replay_totals *t,
                               const lmc_replay_record_counts *rc, char hex[LMC_SHA256_HEX_LEN + 1])
{
    totals_arg a = {t, rc};
    feed(d, encode_totals_arg, &a);
    lmc_sha256_stream_final_hex(d->sha, hex);
}
