/*
 * dispatch.c -- the replay dispatcher, context and default handlers
 * (see dispatch.h).
 *
 * Handlers read their arguments by name, as LMCache's handlers pass the
 * decoded args as keyword arguments: the names are the traced function's
 * parameters. Each handler first checks the record's argument names
 * against its op's row of trace/ops.def (check_args), as Python binds
 * sm.<method>(**args): an argument the method does not take, or one
 * without a default that is missing (keys, layout_desc, mode), fails the
 * record, naming it. Arguments with a default that a hand-made trace may
 * lack get LMCache's defaults (extra_count 0, external_request_id "",
 * policy PREFIX).
 */
#include "replay/dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/escape.h"
#include "core/log.h"
#include "trace/codec.h"
#include "trace/ops.h"

#define LOG_COMP "replay"

/* ---------------------------------------------------------------------- */
/* Dispatcher                                                              */
/* ---------------------------------------------------------------------- */

typedef struct entry {
    char *qualname;
    lmc_replay_handler handler;
} entry;

struct lmc_dispatcher {
    entry *entries;
    size_t n, cap;
};

lmc_dispatcher *lmc_dispatcher_create(void)
{
    return calloc(1, sizeof(lmc_dispatcher));
}

void lmc_dispatcher_destroy(lmc_dispatcher *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->entries[i].qualname);
    free(d->entries);
    free(d);
}

static const entry *find(const lmc_dispatcher *d, const char *q)
{
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->entries[i].qualname, q) == 0)
            return &d->entries[i];
    }
    return NULL;
}

lmc_status lmc_dispatcher_register(lmc_dispatcher *d, const char *qualname, lmc_replay_handler h,
                                   lmc_error *err)
{
    if (find(d, qualname) != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "handler already registered for '%s'",
                             qualname);
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 8;
        entry *ne = realloc(d->entries, ncap * sizeof(*ne));
        if (ne == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "dispatcher: out of memory");
        d->entries = ne;
        d->cap = ncap;
    }
    char *q = strdup(qualname);
    if (q == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "dispatcher: out of memory");
    d->entries[d->n++] = (entry){q, h};
    return LMC_OK;
}

bool lmc_dispatcher_has(const lmc_dispatcher *d, const char *qualname)
{
    return find(d, qualname) != NULL;
}

size_t lmc_dispatcher_qualnames(const lmc_dispatcher *d, const char **out, size_t cap)
{
    for (size_t i = 0; i < d->n && i < cap; i++)
        out[i] = d->entries[i].qualname;
    return d->n;
}

lmc_status lmc_dispatcher_dispatch(const lmc_dispatcher *d, const char *qualname,
                                   lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                   lmc_error *err)
{
    const entry *e = find(d, qualname);
    if (e == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "no handler for qualname '%s'", qualname);
    return e->handler(ctx, rec, err);
}

lmc_dispatcher *lmc_dispatcher_for_ops(const lmc_replay_handler by_op[LMC_TRACE_OP_COUNT_])
{
    lmc_dispatcher *d = lmc_dispatcher_create();
    if (d == NULL)
        return NULL;
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++) {
        if (by_op[op] != NULL && lmc_dispatcher_register(d, lmc_trace_op_qualname((lmc_trace_op)op),
                                                         by_op[op], NULL) != LMC_OK) {
            lmc_dispatcher_destroy(d);
            return NULL;
        }
    }
    return d;
}

lmc_dispatcher *lmc_dispatcher_default(void)
{
    static const lmc_replay_handler by_op[LMC_TRACE_OP_COUNT_] = {
#define LMC_TRACE_OP(ID, name, method, ...) [LMC_TRACE_OP_##ID] = lmc_replay_##name,
#include "trace/ops.def"
#undef LMC_TRACE_OP
    };
    return lmc_dispatcher_for_ops(by_op);
}

/* ---------------------------------------------------------------------- */
/* Context                                                                 */
/* ---------------------------------------------------------------------- */

/* One open read_prefetched_results context, in a FIFO list. */
typedef struct open_read {
    struct open_read *next;
    uint64_t tuple_hash;
    lmc_sm_read_ctx read;
} open_read;

/*
 * A prefetch whose L2 part is still running, with its record's outcome so
 * far and the keys it sent to L2 (a read of one of them before the result
 * is collected counts as l2_pending).
 */
typedef struct pending_prefetch {
    lmc_prefetch_handle handle;
    uint64_t index;
    lmc_replay_outcome outcome;
    lmc_object_key *l2_keys; /* owned; NULL when they could not be copied */
    size_t n_l2_keys;
} pending_prefetch;

struct lmc_replay_ctx {
    lmc_storage_manager *sm;
    open_read *reads_head; /* oldest first */
    open_read *reads_tail;
    size_t n_reads;
    pending_prefetch *prefetches;
    size_t n_prefetches, cap_prefetches;
    uint64_t index;             /* the current record's (lmc_replay_ctx_begin) */
    lmc_replay_outcome outcome; /* the current record's */
    lmc_replay_on_complete on_complete;
    void *on_complete_ud;
    const lmc_replay_pending_ops *pending_ops; /* a mode's own waiting work; NULL: none */
    void *pending_ud;
    /* Scratch, scratch_cap entries each: the current record's keys and per-key results. */
    lmc_object_key *keys;
    lmc_l1_error *errs;
    lmc_memory_obj *objs;
    lmc_object_key *sub; /* the keys whose result needs their L1 state */
    lmc_l1_key_state *states;
    size_t scratch_cap;
    bool zero_fill; /* reserve_write zero-fills what it reserved */
};

lmc_replay_ctx *lmc_replay_ctx_create(lmc_storage_manager *sm)
{
    lmc_replay_ctx *ctx = calloc(1, sizeof(*ctx));
    if (ctx != NULL) {
        ctx->sm = sm;
        ctx->zero_fill = true;
    }
    return ctx;
}

void lmc_replay_ctx_set_zero_fill(lmc_replay_ctx *ctx, bool on)
{
    ctx->zero_fill = on;
}

lmc_storage_manager *lmc_replay_ctx_sm(lmc_replay_ctx *ctx)
{
    return ctx->sm;
}

void lmc_replay_ctx_set_on_complete(lmc_replay_ctx *ctx, lmc_replay_on_complete fn, void *ud)
{
    ctx->on_complete = fn;
    ctx->on_complete_ud = ud;
}

void lmc_replay_ctx_set_pending(lmc_replay_ctx *ctx, const lmc_replay_pending_ops *ops, void *ud)
{
    ctx->pending_ops = ops;
    ctx->pending_ud = ud;
}

void *lmc_replay_ctx_pending_ud(const lmc_replay_ctx *ctx, const lmc_replay_pending_ops *ops)
{
    return ctx->pending_ops == ops ? ctx->pending_ud : NULL;
}

void lmc_replay_ctx_complete(lmc_replay_ctx *ctx, uint64_t index, const lmc_replay_outcome *o)
{
    if (ctx->on_complete != NULL)
        ctx->on_complete(ctx->on_complete_ud, index, o);
}

uint64_t lmc_replay_ctx_index(const lmc_replay_ctx *ctx)
{
    return ctx->index;
}

lmc_replay_outcome *lmc_replay_ctx_current(lmc_replay_ctx *ctx)
{
    return &ctx->outcome;
}

void lmc_replay_ctx_begin(lmc_replay_ctx *ctx, uint64_t index)
{
    ctx->index = index;
    lmc_replay_outcome_begin(&ctx->outcome, LMC_TRACE_OP_NONE, NULL, 0);
}

const lmc_replay_outcome *lmc_replay_ctx_outcome(const lmc_replay_ctx *ctx)
{
    return &ctx->outcome;
}

size_t lmc_replay_ctx_open_reads(const lmc_replay_ctx *ctx)
{
    return ctx->n_reads;
}

void lmc_replay_ctx_destroy(lmc_replay_ctx *ctx)
{
    if (ctx == NULL)
        return;
    lmc_replay_ctx_close_dangling(ctx);
    lmc_replay_ctx_drain_prefetches(ctx, 0);
    lmc_replay_ctx_abandon_prefetches(ctx);
    free(ctx->prefetches);
    free(ctx->keys);
    free(ctx->errs);
    free(ctx->objs);
    free(ctx->sub);
    free(ctx->states);
    free(ctx);
}

size_t lmc_replay_ctx_close_dangling(lmc_replay_ctx *ctx)
{
    size_t closed = 0;
    while (ctx->reads_head != NULL) {
        open_read *o = ctx->reads_head;
        ctx->reads_head = o->next;
        lmc_sm_read_prefetched_exit(ctx->sm, &o->read, false);
        free(o);
        closed++;
    }
    ctx->reads_tail = NULL;
    ctx->n_reads = 0;
    if (closed > 0)
        LMC_INFO(LOG_COMP, "trace replay: closed %zu dangling read_prefetched_results "
                 "context(s)", closed);
    return closed;
}

static void prefetch_done(lmc_replay_ctx *ctx, pending_prefetch *p, const lmc_bitmap *found,
                          bool unfinished)
{
    lmc_outcome_prefetch_finish(&p->outcome, &p->handle, found, unfinished);
    lmc_replay_ctx_complete(ctx, p->index, &p->outcome);
    lmc_prefetch_handle_clear(&p->handle);
    free(p->l2_keys);
    p->l2_keys = NULL;
}

size_t lmc_replay_ctx_poll_prefetches(lmc_replay_ctx *ctx)
{
    size_t kept = 0;
    for (size_t i = 0; i < ctx->n_prefetches; i++) {
        pending_prefetch *p = &ctx->prefetches[i];
        lmc_bitmap bm;
        lmc_status st = lmc_sm_query_prefetch_status(ctx->sm, &p->handle, &bm);
        /* BUSY, or NOMEM with the result kept for the next poll: keep the handle.
         * NOT_FOUND (collected already) cannot change any more: drop it. */
        if (st == LMC_ERR_BUSY || st == LMC_ERR_NOMEM) {
            ctx->prefetches[kept++] = *p;
        } else if (st == LMC_OK) {
            prefetch_done(ctx, p, &bm, false);
            lmc_bitmap_free(&bm);
        } else {
            prefetch_done(ctx, p, NULL, true);
        }
    }
    ctx->n_prefetches = kept;
    if (ctx->pending_ops != NULL)
        kept += ctx->pending_ops->poll(ctx->pending_ud);
    return kept;
}

size_t lmc_replay_ctx_abandon_prefetches(lmc_replay_ctx *ctx)
{
    size_t n = ctx->n_prefetches;
    for (size_t i = 0; i < n; i++)
        prefetch_done(ctx, &ctx->prefetches[i], NULL, true);
    ctx->n_prefetches = 0;
    if (ctx->pending_ops != NULL)
        n += ctx->pending_ops->abandon(ctx->pending_ud);
    return n;
}

size_t lmc_replay_ctx_drain_prefetches(lmc_replay_ctx *ctx, uint32_t timeout_ms)
{
    uint64_t deadline = lmc_mono_ms() + timeout_ms;
    size_t left;
    while ((left = lmc_replay_ctx_poll_prefetches(ctx)) > 0 && lmc_mono_ms() < deadline)
        lmc_sleep_ns(500 * 1000);
    return left;
}

/* ---------------------------------------------------------------------- */
/* Argument access                                                         */
/* ---------------------------------------------------------------------- */

/* The kinds of argument whose parameter has no default in LMCache's signature. */
static bool required_kind(lmc_trace_arg_kind k)
{
    return k == LMC_TRACE_ARG_KEYS || k == LMC_TRACE_ARG_LAYOUT || k == LMC_TRACE_ARG_MODE;
}

lmc_status lmc_replay_check_args(const lmc_trace_record *rec, lmc_trace_op op, lmc_error *err)
{
    const lmc_trace_op_info *info = lmc_trace_op_get(op);
    for (size_t i = 0; i < rec->nargs; i++) {
        size_t j = 0;
        while (j < info->nargs &&
               !(rec->args[i].name_len == info->args[j].name_len &&
                 memcmp(rec->args[i].name, info->args[j].name, info->args[j].name_len) == 0))
            j++;
        if (j == info->nargs) {
            char *name = lmc_escape_dup(rec->args[i].name, rec->args[i].name_len, 0);
            lmc_error_set(err, LMC_ERR_FORMAT, "%s: unexpected argument '%s'", info->name,
                          name != NULL ? name : "?");
            free(name);
            return LMC_ERR_FORMAT;
        }
    }
    for (size_t j = 0; j < info->nargs; j++) {
        if (required_kind(info->args[j].kind) &&
            lmc_trace_args_find(rec->args, rec->nargs, info->args[j].name) == NULL)
            return lmc_error_set(err, LMC_ERR_FORMAT, "%s: missing required argument '%s'",
                                 info->name, info->args[j].name);
    }
    return LMC_OK;
}

static lmc_status ensure_scratch(lmc_replay_ctx *ctx, size_t n, lmc_error *err)
{
    if (n <= ctx->scratch_cap)
        return LMC_OK;
    size_t cap = ctx->scratch_cap ? ctx->scratch_cap : 64;
    while (cap < n)
        cap *= 2;
    lmc_object_key *k = realloc(ctx->keys, cap * sizeof(*k));
    if (k)
        ctx->keys = k;
    lmc_l1_error *e = realloc(ctx->errs, cap * sizeof(*e));
    if (e)
        ctx->errs = e;
    lmc_memory_obj *o = realloc(ctx->objs, cap * sizeof(*o));
    if (o)
        ctx->objs = o;
    lmc_object_key *sub = realloc(ctx->sub, cap * sizeof(*sub));
    if (sub)
        ctx->sub = sub;
    lmc_l1_key_state *states = realloc(ctx->states, cap * sizeof(*states));
    if (states)
        ctx->states = states;
    if (k == NULL || e == NULL || o == NULL || sub == NULL || states == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory for %zu keys", n);
    ctx->scratch_cap = cap;
    return LMC_OK;
}

/*
 * The "keys" argument (a list, tuple or set of ObjectKeys) as one array:
 * the decoder's own array when the items point into one in order (what
 * the reader's fast path produces), else a copy in ctx->keys. Valid until
 * the next record is read.
 */
lmc_status lmc_replay_arg_keys(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                               const lmc_object_key **keys, size_t *n, lmc_error *err)
{
    const lmc_trace_arg *a = lmc_trace_args_find(rec->args, rec->nargs, "keys");
    if (a == NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: missing argument 'keys'", rec->qualname);
    const lmc_tv *v = &a->value;
    if (v->kind != LMC_TV_LIST && v->kind != LMC_TV_TUPLE && v->kind != LMC_TV_SET)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: argument 'keys' is not a list",
                             rec->qualname);
    /* The per-key result arrays are needed either way. */
    lmc_status st = ensure_scratch(ctx, v->u.list.n, err);
    if (st != LMC_OK)
        return st;
    const lmc_tv *items = v->u.list.items;
    bool contiguous = true;
    for (size_t i = 0; i < v->u.list.n; i++) {
        if (items[i].kind != LMC_TV_OBJECT_KEY)
            return lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys[%zu] is not an ObjectKey",
                                 rec->qualname, i);
        contiguous = contiguous && items[i].u.key == items[0].u.key + i;
    }
    if (v->u.list.n > 0 && contiguous) {
        *keys = items[0].u.key;
    } else {
        for (size_t i = 0; i < v->u.list.n; i++)
            ctx->keys[i] = *items[i].u.key;
        *keys = ctx->keys;
    }
    *n = v->u.list.n;
    return LMC_OK;
}

lmc_status lmc_replay_arg_layout(const lmc_trace_record *rec, const lmc_layout_desc **out,
                                 lmc_error *err)
{
    const lmc_trace_arg *a = lmc_trace_args_find(rec->args, rec->nargs, "layout_desc");
    if (a == NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: missing argument 'layout_desc'",
                             rec->qualname);
    if (a->value.kind != LMC_TV_LAYOUT)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "%s: argument 'layout_desc' is not a MemoryLayoutDesc",
                             rec->qualname);
    *out = a->value.u.layout;
    return LMC_OK;
}

lmc_status lmc_replay_arg_extra_count(const lmc_trace_record *rec, uint32_t *out, lmc_error *err)
{
    *out = 0;
    const lmc_trace_arg *a = lmc_trace_args_find(rec->args, rec->nargs, "extra_count");
    if (a == NULL || a->value.kind == LMC_TV_NIL)
        return LMC_OK;
    if (a->value.kind != LMC_TV_INT || a->value.u.i < 0 || a->value.u.i > UINT32_MAX)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "%s: argument 'extra_count' is not a non-negative integer",
                             rec->qualname);
    *out = (uint32_t)a->value.u.i;
    return LMC_OK;
}

lmc_status lmc_replay_lookup_args(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                  const lmc_object_key **keys, size_t *n,
                                  const lmc_layout_desc **layout, uint32_t *extra, lmc_error *err)
{
    lmc_status st = lmc_replay_check_args(rec, LMC_TRACE_OP_SUBMIT_PREFETCH, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, keys, n, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_layout(rec, layout, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_extra_count(rec, extra, err);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Outcomes                                                                */
/* ---------------------------------------------------------------------- */

lmc_status lmc_replay_ctx_states_for(lmc_replay_ctx *ctx, const lmc_object_key *keys, size_t n,
                                     const lmc_l1_error *errs, bool (*needs)(lmc_l1_error),
                                     lmc_error *err)
{
    lmc_status st = ensure_scratch(ctx, n, err);
    if (st != LMC_OK)
        return st;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (needs(errs[i]))
            ctx->sub[m++] = keys[i];
    }
    if (m > 0)
        lmc_sm_l1_key_states(ctx->sm, ctx->sub, m, ctx->states);
    return LMC_OK;
}

lmc_l1_key_state lmc_replay_ctx_next_state(const lmc_replay_ctx *ctx, lmc_l1_error e,
                                           bool (*needs)(lmc_l1_error), size_t *j)
{
    return needs(e) ? ctx->states[(*j)++] : LMC_L1_STATE_ABSENT;
}

/* ---------------------------------------------------------------------- */
/* Handlers                                                                */
/* ---------------------------------------------------------------------- */

lmc_status lmc_replay_reserve_write(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                    lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    const lmc_layout_desc *layout;
    lmc_status st = lmc_replay_check_args(rec, LMC_TRACE_OP_RESERVE_WRITE, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, &keys, &n, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_layout(rec, &layout, err);
    if (st != LMC_OK)
        return st;
    lmc_write_mode mode;
    const lmc_trace_arg *m = lmc_trace_args_find(rec->args, rec->nargs, "mode");
    if (m->value.kind != LMC_TV_STR)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: argument 'mode' is not a string",
                             rec->qualname);
    st = lmc_write_mode_from_name(m->value.u.s.ptr, m->value.u.s.len, &mode, err);
    if (st != LMC_OK)
        return lmc_error_prefix(err, "%s", rec->qualname);
    lmc_sm_reserve_write(ctx->sm, keys, n, layout, mode, ctx->errs, ctx->objs);
    /* The trace carries no KV bytes: what replay writes is zeros (when anything can read them). */
    for (size_t i = 0; ctx->zero_fill && i < n; i++) {
        if (ctx->errs[i] == LMC_L1_SUCCESS)
            memset(ctx->objs[i].data, 0, ctx->objs[i].size);
    }
    lmc_replay_outcome_begin(&ctx->outcome, LMC_TRACE_OP_RESERVE_WRITE, keys, n);
    /* lmc_replay_arg_keys made room for n keys: this cannot fail. */
    lmc_replay_ctx_states_for(ctx, keys, n, ctx->errs, lmc_outcome_reserve_needs_state, NULL);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        lmc_l1_key_state ks =
            lmc_replay_ctx_next_state(ctx, ctx->errs[i], lmc_outcome_reserve_needs_state, &j);
        ctx->outcome.v[lmc_outcome_reserve_reason(ctx->errs[i], mode, ks)]++;
    }
    return LMC_OK;
}

lmc_status lmc_replay_finish_write(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                   lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    lmc_status st = lmc_replay_check_args(rec, LMC_TRACE_OP_FINISH_WRITE, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, &keys, &n, err);
    if (st != LMC_OK)
        return st;
    lmc_sm_finish_write(ctx->sm, keys, n, ctx->errs);
    lmc_replay_outcome_begin(&ctx->outcome, LMC_TRACE_OP_FINISH_WRITE, keys, n);
    for (size_t i = 0; i < n; i++)
        ctx->outcome.v[lmc_outcome_finish_write_reason(ctx->errs[i])]++;
    return LMC_OK;
}

static lmc_status get_policy(const lmc_trace_record *rec, lmc_trim_policy *out, lmc_error *err)
{
    *out = LMC_TRIM_PREFIX;
    const lmc_trace_arg *a = lmc_trace_args_find(rec->args, rec->nargs, "policy");
    if (a == NULL || a->value.kind == LMC_TV_NIL)
        return LMC_OK;
    if (a->value.kind == LMC_TV_TRIM_POLICY) {
        *out = a->value.u.trim;
        return LMC_OK;
    }
    if (a->value.kind == LMC_TV_STR) {
        lmc_status st = lmc_trim_policy_from_name(a->value.u.s.ptr, a->value.u.s.len, out, err);
        return st == LMC_OK ? st : lmc_error_prefix(err, "%s", rec->qualname);
    }
    return lmc_error_set(err, LMC_ERR_FORMAT, "%s: argument 'policy' is not a TrimPolicy",
                         rec->qualname);
}

/*
 * external_request_id as the StorageManager keeps it (a malloc'd copy, NULL
 * for absent or None): a str of any length, but not one holding NUL, which
 * a C string cannot keep whole.
 */
static lmc_status get_request_id(const lmc_trace_record *rec, char **out, lmc_error *err)
{
    *out = NULL;
    const lmc_trace_arg *a = lmc_trace_args_find(rec->args, rec->nargs, "external_request_id");
    if (a == NULL || a->value.kind == LMC_TV_NIL)
        return LMC_OK;
    if (a->value.kind != LMC_TV_STR)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: argument 'external_request_id' is not a str",
                             rec->qualname);
    if (memchr(a->value.u.s.ptr, '\0', a->value.u.s.len) != NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "%s: argument 'external_request_id' holds a NUL byte, which the "
                             "StorageManager cannot keep",
                             rec->qualname);
    if ((*out = strndup(a->value.u.s.ptr, a->value.u.s.len)) == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
    return LMC_OK;
}

lmc_status lmc_replay_submit_prefetch(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                      lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    const lmc_layout_desc *layout;
    uint32_t extra;
    lmc_trim_policy policy;
    char *ext = NULL;
    lmc_status st = lmc_replay_lookup_args(ctx, rec, &keys, &n, &layout, &extra, err);
    if (st == LMC_OK)
        st = get_policy(rec, &policy, err);
    if (st == LMC_OK)
        st = get_request_id(rec, &ext, err);
    if (st != LMC_OK)
        return st;
    if (ctx->n_prefetches == ctx->cap_prefetches) {
        size_t cap = ctx->cap_prefetches ? ctx->cap_prefetches * 2 : 64;
        pending_prefetch *p = realloc(ctx->prefetches, cap * sizeof(*p));
        if (p == NULL) {
            free(ext);
            return lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
        }
        ctx->prefetches = p;
        ctx->cap_prefetches = cap;
    }
    lmc_prefetch_handle h;
    st = lmc_sm_submit_prefetch_task(ctx->sm, keys, n, layout, extra, ext, policy, &h, err);
    free(ext);
    if (st != LMC_OK)
        return st;
    lmc_replay_outcome *o = &ctx->outcome;
    lmc_replay_outcome_begin(o, LMC_TRACE_OP_SUBMIT_PREFETCH, keys, n);
    o->v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = (uint32_t)h.l1_found_count;
    /*
     * The server would poll query_prefetch_status (not traced) until the
     * result is in; here the handle is kept and its result collected in
     * the background (lmc_replay_ctx_poll_prefetches), so finished results
     * do not pile up, and the record's outcome is final only then.
     */
    if (h.prefetch_request_id >= 0) {
        o->v[LMC_OC_SUBMIT_PREFETCH_l2_sent] = (uint32_t)h.l2_orig_count;
        o->pending = true;
        pending_prefetch *p = &ctx->prefetches[ctx->n_prefetches++];
        *p = (pending_prefetch){.handle = h, .index = ctx->index, .outcome = *o};
        /* Without the copy a read of these keys is classified by state alone. */
        p->l2_keys = malloc(h.l2_orig_count * sizeof(*p->l2_keys));
        if (p->l2_keys != NULL) {
            for (size_t i = 0; i < h.l2_orig_count; i++)
                p->l2_keys[i] = keys[h.l2_orig_indices[i]];
            p->n_l2_keys = h.l2_orig_count;
        }
    } else {
        lmc_outcome_prefetch_finish(o, &h, NULL, false);
        lmc_prefetch_handle_clear(&h);
    }
    if (ctx->n_prefetches >= 32)
        lmc_replay_ctx_poll_prefetches(ctx);
    return LMC_OK;
}

lmc_status lmc_replay_finish_read(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                  lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    uint32_t extra;
    lmc_status st = lmc_replay_check_args(rec, LMC_TRACE_OP_FINISH_READ, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, &keys, &n, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_extra_count(rec, &extra, err);
    if (st != LMC_OK)
        return st;
    lmc_sm_finish_read_prefetched(ctx->sm, keys, n, extra, ctx->errs);
    lmc_replay_outcome_begin(&ctx->outcome, LMC_TRACE_OP_FINISH_READ, keys, n);
    for (size_t i = 0; i < n; i++)
        ctx->outcome.v[lmc_outcome_finish_read_reason(ctx->errs[i])]++;
    return LMC_OK;
}

/* The identity of a key tuple: order-sensitive, over every key's fields. */
static uint64_t tuple_hash(const lmc_object_key *keys, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ lmc_object_key_hash(&keys[i])) * 0x100000001B3ull;
    return h;
}

static bool same_tuple(const lmc_sm_read_ctx *r, const lmc_object_key *keys, size_t n)
{
    if (r->n != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!lmc_object_key_equal(&r->keys[i], &keys[i]))
            return false;
    }
    return true;
}

/* Is key among the keys a still-pending prefetch sent to L2? */
static bool in_pending_l2(const lmc_replay_ctx *ctx, const lmc_object_key *key)
{
    for (size_t p = 0; p < ctx->n_prefetches; p++) {
        const pending_prefetch *pp = &ctx->prefetches[p];
        for (size_t i = 0; i < pp->n_l2_keys; i++) {
            if (lmc_object_key_equal(&pp->l2_keys[i], key))
                return true;
        }
    }
    return false;
}

lmc_status lmc_replay_read_enter(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                 lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    lmc_status st = lmc_replay_check_args(rec, LMC_TRACE_OP_READ_ENTER, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, &keys, &n, err);
    if (st != LMC_OK)
        return st;
    /*
     * Collect the prefetches done by now, before the read: a key of one
     * still pending after that was not loaded when the read came.
     */
    if (ctx->n_prefetches > 0)
        lmc_replay_ctx_poll_prefetches(ctx);
    open_read *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
    st = lmc_sm_read_prefetched_enter(ctx->sm, keys, n, &o->read);
    if (st != LMC_OK) {
        free(o);
        return lmc_error_set(err, st, "%s: out of memory", rec->qualname);
    }
    lmc_replay_outcome *out = &ctx->outcome;
    lmc_replay_outcome_begin(out, LMC_TRACE_OP_READ_ENTER, keys, n);
    const lmc_l1_error *errs = o->read.errs;
    lmc_replay_ctx_states_for(ctx, keys, n, errs, lmc_outcome_read_needs_state, NULL);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        lmc_l1_key_state ks =
            lmc_replay_ctx_next_state(ctx, errs[i], lmc_outcome_read_needs_state, &j);
        lmc_outcome_counter c = lmc_outcome_read_reason(errs[i], ks);
        if (c != LMC_OC_READ_ENTER_found && in_pending_l2(ctx, &keys[i]))
            c = LMC_OC_READ_ENTER_l2_pending;
        out->v[c]++;
    }
    out->v[LMC_OC_READ_ENTER_context_ok] = o->read.ok;
    o->tuple_hash = tuple_hash(keys, n);
    if (ctx->reads_tail)
        ctx->reads_tail->next = o;
    else
        ctx->reads_head = o;
    ctx->reads_tail = o;
    ctx->n_reads++;
    return LMC_OK;
}

lmc_status lmc_replay_read_exit(lmc_replay_ctx *ctx, const lmc_trace_record *rec,
                                lmc_error *err)
{
    size_t n;
    const lmc_object_key *keys;
    lmc_status st = lmc_replay_check_args(rec, LMC_TRACE_OP_READ_EXIT, err);
    if (st == LMC_OK)
        st = lmc_replay_arg_keys(ctx, rec, &keys, &n, err);
    if (st != LMC_OK)
        return st;
    uint64_t h = tuple_hash(keys, n);
    /* The oldest open context with the same key tuple (FIFO per tuple). */
    open_read *prev = NULL, *o = ctx->reads_head;
    while (o != NULL && !(o->tuple_hash == h && same_tuple(&o->read, keys, n))) {
        prev = o;
        o = o->next;
    }
    lmc_replay_outcome_begin(&ctx->outcome, LMC_TRACE_OP_READ_EXIT, keys, n);
    if (o == NULL) {
        LMC_WARN(LOG_COMP, "trace replay: read_prefetched_results.__exit__ with no matching "
                 "__enter__ (keys=%zu); ignoring", n);
        return LMC_OK;
    }
    ctx->outcome.v[LMC_OC_READ_EXIT_matched] = 1;
    /* A failed enter's exit gives back the lock of each key that was found. */
    for (size_t i = 0; i < o->read.n && !o->read.ok; i++)
        ctx->outcome.v[LMC_OC_READ_EXIT_released] += o->read.errs[i] == LMC_L1_SUCCESS;
    if (prev)
        prev->next = o->next;
    else
        ctx->reads_head = o->next;
    if (ctx->reads_tail == o)
        ctx->reads_tail = prev;
    ctx->n_reads--;
    lmc_sm_read_prefetched_exit(ctx->sm, &o->read, false);
    free(o);
    return LMC_OK;
}
