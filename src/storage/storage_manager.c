/*
 * storage_manager.c -- the StorageManager facade (see storage_manager.h).
 *
 * Owns: the components it builds in create (L1 manager, L1 eviction policy
 * and controller, L2 adapters, L2 eviction controller, store and prefetch
 * controllers) and the L1 -> eviction-policy bridge. It has no lock of its
 * own; each call delegates to thread-safe components.
 *
 * The bridge maps L1 events onto the policy: reserved_write creates,
 * deleted removes, accessed (touch) touches; everything else is ignored.
 * Tracking at reservation (as LMCache's newer bridge does) makes an
 * abandoned reservation evictable. Every object, written or prefetched,
 * enters L1 through a reservation, so write_finished and
 * finish_write_and_reserve_read would only report the same keys a second
 * time: for LRU that re-appends them in the same order, but ARC would read
 * the repeat as a second access and promote every new key to its frequent
 * list. Read events are ignored so that recency comes only from touch.
 *
 * The executor (DESIGN.md 4.11). Every component is built with one runtime
 * (core/runtime.h): threads on the monotonic clock, or manual on the
 * StorageManager's virtual clock. In manual mode nothing runs by itself:
 * lmc_sm_advance_to is the executor. It runs the store and prefetch
 * controllers' steps to quiescence (store, then prefetch, until neither
 * moves), then takes the earliest due event of the components in a fixed
 * order (the L2 adapters by index, then the L1 and L2 eviction passes),
 * sets the clock to its time, delivers it, and starts again, until the
 * next event lies beyond the target time. Equal times are broken by that
 * order and, within an adapter, by submission sequence, so a given
 * sequence of calls at given virtual times always produces the same
 * events in the same order: there is no thread whose timing could change
 * it.
 */
#include "lmcache/storage_manager.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "core/runtime.h"
#include "storage/config.h"
#include "storage/eviction.h"
#include "storage/eviction_controller.h"
#include "storage/l1_manager.h"
#include "storage/prefetch_controller.h"
#include "storage/store_controller.h"
#include "trace/capture.h"

struct lmc_storage_manager {
    lmc_sm_config cfg;
    char *config_json;
    char digest_hex[65];
    lmc_l1_manager *l1;
    lmc_eviction_policy *policy;
    lmc_l1_eviction_controller *l1_evict;
    lmc_l2_adapter **adapters;
    size_t n_adapters;
    lmc_l2_eviction_controller *l2_evict;
    lmc_store_controller *store;
    lmc_prefetch_controller *prefetch;
    /* The clock and executor every component was built with; vclock is the manual mode's clock. */
    lmc_runtime rt;
    lmc_virtual_clock vclock;
};

/* The eviction controllers' period when the runtime options do not give one. */
#define DEFAULT_EVICTION_PERIOD_NS 1000000000ull

void lmc_sm_runtime_options_init(lmc_sm_runtime_options *opt)
{
    memset(opt, 0, sizeof(*opt));
    opt->executor = LMC_SM_EXEC_THREADS;
    opt->eviction_period_ns = DEFAULT_EVICTION_PERIOD_NS;
}

/* Small calls use the stack; larger ones the heap. */
#define STACK_KEYS 64

static void bridge_on_event(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    lmc_eviction_policy *p = ud;
    switch (ev) {
    case LMC_L1_EV_RESERVED_WRITE:
        lmc_eviction_on_created(p, keys, n);
        break;
    case LMC_L1_EV_DELETED:
        lmc_eviction_on_removed(p, keys, n);
        break;
    case LMC_L1_EV_ACCESSED:
        lmc_eviction_on_touched(p, keys, n);
        break;
    case LMC_L1_EV_WRITE_FINISHED:
    case LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED:
    case LMC_L1_EV_RESERVED_READ:
    case LMC_L1_EV_READ_FINISHED:
        break;
    }
}

lmc_status lmc_sm_create(const lmc_sm_config *cfg, lmc_storage_manager **out, lmc_error *err)
{
    return lmc_sm_create_ex(cfg, NULL, out, err);
}

lmc_status lmc_sm_create_ex(const lmc_sm_config *cfg, const lmc_sm_runtime_options *opt,
                            lmc_storage_manager **out, lmc_error *err)
{
    lmc_sm_runtime_options defaults;
    lmc_sm_runtime_options_init(&defaults);
    if (opt == NULL)
        opt = &defaults;
    if (opt->executor != LMC_SM_EXEC_THREADS && opt->executor != LMC_SM_EXEC_MANUAL)
        return lmc_error_set(err, LMC_ERR_INVALID, "StorageManager: unknown executor %d",
                             (int)opt->executor);
    uint64_t period_ns =
        opt->eviction_period_ns > 0 ? opt->eviction_period_ns : DEFAULT_EVICTION_PERIOD_NS;
    lmc_storage_manager *sm = calloc(1, sizeof(*sm));
    if (sm == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "StorageManager: out of memory");
    /* sm is on the heap and never moves, so the components may keep a pointer to its clock. */
    lmc_virtual_clock_init(&sm->vclock, opt->start_ns);
    sm->rt.manual = opt->executor == LMC_SM_EXEC_MANUAL;
    sm->rt.clock = sm->rt.manual ? lmc_clock_virtual(&sm->vclock) : lmc_clock_monotonic();
    lmc_status st = lmc_sm_config_copy(&sm->cfg, cfg);
    if (st != LMC_OK) {
        free(sm);
        return lmc_error_set(err, st, "StorageManager: cannot copy the config");
    }
    st = lmc_sm_config_digest(&sm->cfg, &sm->config_json, sm->digest_hex);
    if (st != LMC_OK) {
        lmc_error_set(err, st, "StorageManager: cannot serialise the config");
        goto fail;
    }

    /* 1. L1. */
    lmc_l1_manager_config l1cfg = {
        .memory = {.size_bytes = sm->cfg.l1_size_bytes,
                   .align_bytes = sm->cfg.l1_align_bytes,
                   .shm_name = sm->cfg.shm_name},
        .write_ttl_seconds = sm->cfg.write_ttl_seconds,
        .read_ttl_seconds = sm->cfg.read_ttl_seconds,
        .clock = sm->rt.clock,
    };
    st = lmc_l1_manager_create(&l1cfg, &sm->l1, err);
    if (st != LMC_OK)
        goto fail;

    /* 2. Eviction policy, its bridge, and the L1 eviction controller. */
    st = lmc_eviction_policy_create(sm->cfg.eviction_policy, &sm->policy, err);
    if (st != LMC_OK)
        goto fail;
    lmc_l1_listener bridge = {.on_event = bridge_on_event, .ud = sm->policy};
    st = lmc_l1_manager_add_listener(sm->l1, &bridge);
    if (st != LMC_OK) {
        lmc_error_set(err, st, "StorageManager: cannot register the eviction bridge");
        goto fail;
    }
    st = lmc_l1_eviction_controller_create_ex(sm->l1, sm->policy, sm->cfg.trigger_watermark,
                                              sm->cfg.eviction_ratio, period_ns, &sm->rt,
                                              &sm->l1_evict, err);
    if (st != LMC_OK)
        goto fail;

    /* 3-4. L2 adapters, in flag order. */
    if (sm->cfg.n_l2_adapters > 0) {
        sm->adapters = calloc(sm->cfg.n_l2_adapters, sizeof(*sm->adapters));
        if (sm->adapters == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "StorageManager: out of memory");
            goto fail;
        }
    }
    for (size_t i = 0; i < sm->cfg.n_l2_adapters; i++) {
        st = lmc_l2_adapter_create_ex(sm->cfg.l2_adapters[i], &sm->rt, &sm->adapters[i], err);
        if (st != LMC_OK) {
            lmc_error_prefix(err, "L2 adapter %zu", i);
            goto fail;
        }
        sm->n_adapters++;
    }

    /* 7. L2 eviction, then 9-10. the store and prefetch controllers. */
    st = lmc_l2_eviction_controller_create_ex(sm->adapters, sm->n_adapters, period_ns, &sm->rt,
                                              &sm->l2_evict, err);
    if (st != LMC_OK)
        goto fail;
    st = lmc_store_controller_create_ex(sm->l1, sm->adapters, sm->n_adapters, sm->cfg.store_policy,
                                        &sm->rt, &sm->store, err);
    if (st != LMC_OK)
        goto fail;
    st = lmc_prefetch_controller_create_ex(sm->l1, sm->adapters, sm->n_adapters,
                                           sm->cfg.prefetch_policy, sm->cfg.prefetch_max_in_flight,
                                           &sm->rt, &sm->prefetch, err);
    if (st != LMC_OK)
        goto fail;

    LMC_INFO("sm",
             "StorageManager ready: L1 %.3f GiB, eviction %s, %zu L2 adapter(s), config "
             "digest %.8s%s",
             (double)sm->cfg.l1_size_bytes / LMC_GIB, sm->cfg.eviction_policy, sm->n_adapters,
             sm->digest_hex, sm->rt.manual ? " (virtual time)" : "");
    *out = sm;
    return LMC_OK;

fail:
    lmc_sm_destroy(sm);
    return st;
}

void lmc_sm_destroy(lmc_storage_manager *sm)
{
    if (sm == NULL)
        return;
    /* Controllers first (they hold L1 locks and L2 tasks), then adapters, then L1. */
    lmc_prefetch_controller_destroy(sm->prefetch);
    lmc_store_controller_destroy(sm->store);
    lmc_l1_eviction_controller_destroy(sm->l1_evict);
    /* The L2 eviction controller is an adapter listener, and adapters report
     * their last completions while closing: stop its thread now, free it
     * only after the adapters are gone. */
    lmc_l2_eviction_controller_stop(sm->l2_evict);
    for (size_t i = 0; i < sm->n_adapters; i++)
        lmc_l2_adapter_destroy(sm->adapters[i]);
    free(sm->adapters);
    lmc_l2_eviction_controller_destroy(sm->l2_evict);
    lmc_l1_manager_destroy(sm->l1);
    lmc_eviction_policy_destroy(sm->policy);
    free(sm->config_json);
    lmc_sm_config_free(&sm->cfg);
    free(sm);
}

/* ---------------------------------------------------------------------- */
/* Write path                                                              */
/* ---------------------------------------------------------------------- */

size_t lmc_sm_reserve_write(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                            const lmc_layout_desc *layout, lmc_write_mode mode, lmc_l1_error *errs,
                            lmc_memory_obj *objs)
{
    LMC_TRACE(RESERVE_WRITE, .keys = keys, .n_keys = n, .layout = layout, .mode = mode);
    lmc_l1_reserve_write(sm->l1, keys, n, NULL, layout, mode, errs, objs);
    size_t ok = 0, oom = 0;
    for (size_t i = 0; i < n; i++) {
        ok += errs[i] == LMC_L1_SUCCESS;
        oom += errs[i] == LMC_L1_OUT_OF_MEMORY;
    }
    if (oom > 0)
        LMC_DEBUG("sm", "reserve_write: %zu of %zu keys out of L1 memory", oom, n);
    return ok;
}

void lmc_sm_finish_write(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                         lmc_l1_error *errs)
{
    LMC_TRACE(FINISH_WRITE, .keys = keys, .n_keys = n);
    lmc_l1_finish_write(sm->l1, keys, n, errs); /* errs may be NULL there too */
}

void lmc_sm_abort_write(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n)
{
    lmc_l1_abort_write(sm->l1, keys, n, NULL);
}

/* ---------------------------------------------------------------------- */
/* Prefetch / read path                                                    */
/* ---------------------------------------------------------------------- */

lmc_status lmc_sm_submit_prefetch_task(lmc_storage_manager *sm, const lmc_object_key *keys,
                                       size_t n, const lmc_layout_desc *layout,
                                       uint32_t extra_count, const char *external_request_id,
                                       lmc_trim_policy policy, lmc_prefetch_handle *handle,
                                       lmc_error *err)
{
    LMC_TRACE(SUBMIT_PREFETCH, .keys = keys, .n_keys = n, .layout = layout,
              .extra_count = extra_count, .external_request_id = external_request_id,
              .policy = policy);
    memset(handle, 0, sizeof(*handle));
    lmc_l1_error stack_errs[STACK_KEYS];
    uint32_t stack_idx[2 * STACK_KEYS];
    lmc_l1_error *errs = stack_errs;
    uint32_t *found = stack_idx, *missing = stack_idx + STACK_KEYS;
    void *heap = NULL;
    if (n > STACK_KEYS) {
        heap = malloc(n * (sizeof(*errs) + 2 * sizeof(uint32_t)));
        if (heap == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "submit_prefetch_task: out of memory");
        errs = heap;
        found = (uint32_t *)(errs + n);
        missing = found + n;
    }

    lmc_l1_reserve_read(sm->l1, keys, n, extra_count, errs, NULL);

    size_t n_found = 0, n_missing = 0;
    lmc_trim_policy l2_policy;
    if (policy == LMC_TRIM_SPARSE) {
        /* Keep every hit wherever it sits; every miss goes to L2. */
        for (size_t i = 0; i < n; i++) {
            if (errs[i] == LMC_L1_SUCCESS)
                found[n_found++] = (uint32_t)i;
            else
                missing[n_missing++] = (uint32_t)i;
        }
        l2_policy = LMC_TRIM_SPARSE;
    } else {
        /* PREFIX (and SEGMENTED_PREFIX): keep the leading run of hits. */
        size_t hit = 0;
        while (hit < n && errs[hit] == LMC_L1_SUCCESS)
            hit++;
        for (size_t i = 0; i < hit; i++)
            found[n_found++] = (uint32_t)i;
        for (size_t i = hit; i < n; i++) {
            missing[n_missing++] = (uint32_t)i;
            /* Release hits past the first miss at once: they are re-fetched. */
            if (errs[i] == LMC_L1_SUCCESS) {
                lmc_l1_error e;
                lmc_l1_finish_read(sm->l1, &keys[i], 1, extra_count, &e);
            }
        }
        l2_policy = LMC_TRIM_PREFIX;
    }

    int64_t request_id = -1;
    lmc_status st = LMC_OK;
    if (n_missing > 0 && sm->n_adapters > 0) {
        lmc_object_key stack_keys[STACK_KEYS];
        lmc_object_key *l2_keys =
            n_missing <= STACK_KEYS ? stack_keys : malloc(n_missing * sizeof(*l2_keys));
        if (l2_keys == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "submit_prefetch_task: out of memory");
        } else {
            for (size_t j = 0; j < n_missing; j++)
                l2_keys[j] = keys[missing[j]];
            st = lmc_prefetch_controller_submit(sm->prefetch, l2_keys, n_missing, layout,
                                                extra_count, l2_policy, &request_id);
            if (st != LMC_OK)
                lmc_error_set(err, st, "submit_prefetch_task: cannot queue the L2 prefetch");
            if (l2_keys != stack_keys)
                free(l2_keys);
        }
    }
    if (st == LMC_OK) {
        double now_s = (double)lmc_runtime_now_ns(&sm->rt) / 1e9;
        st = lmc_prefetch_handle_make(handle, request_id, external_request_id, found, n_found, n,
                                      now_s, request_id >= 0 ? missing : NULL,
                                      request_id >= 0 ? n_missing : 0);
        if (st != LMC_OK)
            lmc_error_set(err, st, "submit_prefetch_task: out of memory");
    }
    if (st != LMC_OK) {
        /* Undo the L1 read locks we keep; an L2 request (if any) still runs
         * and its result is simply never collected. */
        for (size_t j = 0; j < n_found; j++) {
            lmc_l1_error e;
            lmc_l1_finish_read(sm->l1, &keys[found[j]], 1, extra_count, &e);
        }
    }
    free(heap);
    return st;
}

lmc_status lmc_sm_query_prefetch_status(lmc_storage_manager *sm, const lmc_prefetch_handle *handle,
                                        lmc_bitmap *out)
{
    /*
     * The answer's bitmap comes first: taking the controller's result
     * consumes it, so nothing after the take may fail, or the L2 hits
     * (and the read locks they hold) would be lost.
     */
    lmc_bitmap found_bm;
    if (lmc_bitmap_init(&found_bm, handle->total_requested_keys, 0) != LMC_OK)
        return LMC_ERR_NOMEM;
    lmc_bitmap l2 = {0};
    if (handle->prefetch_request_id >= 0) {
        lmc_status st =
            lmc_prefetch_controller_take_result(sm->prefetch, handle->prefetch_request_id, &l2);
        if (st != LMC_OK) {
            lmc_bitmap_free(&found_bm);
            return st;
        }
    }
    *out = found_bm;
    for (size_t i = 0; i < handle->l1_found_count; i++)
        lmc_bitmap_set(out, handle->l1_found_indices[i]);
    for (size_t j = 0; j < handle->l2_orig_count; j++) {
        if (lmc_bitmap_test(&l2, j))
            lmc_bitmap_set(out, handle->l2_orig_indices[j]);
    }
    lmc_bitmap_free(&l2);
    size_t found = lmc_bitmap_popcount(out);
    if (found > 0)
        LMC_DEBUG("sm", "prefetch %s: %zu of %zu keys found", handle->external_request_id, found,
                  handle->total_requested_keys);
    return LMC_OK;
}

bool lmc_sm_query_prefetch_lookup_hits(lmc_storage_manager *sm, const lmc_prefetch_handle *handle,
                                       size_t *hits)
{
    if (handle->prefetch_request_id < 0) {
        *hits = handle->l1_found_count;
        return true;
    }
    size_t l2_hits;
    if (!lmc_prefetch_controller_query_lookup(sm->prefetch, handle->prefetch_request_id, &l2_hits))
        return false;
    *hits = handle->l1_found_count + l2_hits;
    return true;
}

lmc_status lmc_sm_read_prefetched_enter(lmc_storage_manager *sm, const lmc_object_key *keys,
                                        size_t n, lmc_sm_read_ctx *ctx)
{
    LMC_TRACE(READ_ENTER, .keys = keys, .n_keys = n);
    memset(ctx, 0, sizeof(*ctx));
    if (n > 0) {
        ctx->keys = malloc(n * sizeof(*ctx->keys));
        ctx->objs = malloc(n * sizeof(*ctx->objs));
        ctx->errs = malloc(n * sizeof(*ctx->errs));
        if (ctx->keys == NULL || ctx->objs == NULL || ctx->errs == NULL) {
            free(ctx->keys);
            free(ctx->objs);
            free(ctx->errs);
            memset(ctx, 0, sizeof(*ctx));
            return LMC_ERR_NOMEM;
        }
        memcpy(ctx->keys, keys, n * sizeof(*keys));
    }
    ctx->n = n;
    lmc_l1_unsafe_read(sm->l1, keys, n, ctx->errs, ctx->objs);
    size_t absent = 0, unlocked = 0;
    for (size_t i = 0; i < n; i++) {
        absent += ctx->errs[i] == LMC_L1_KEY_NOT_EXIST;
        unlocked += ctx->errs[i] != LMC_L1_SUCCESS && ctx->errs[i] != LMC_L1_KEY_NOT_EXIST;
    }
    ctx->ok = absent + unlocked == 0;
    /*
     * The caller gets the reason per key in errs. One WARNING per missing
     * key flooded the log (129 k lines in a 20 s replay) and slowed this
     * call; and KEY_NOT_READABLE means "holds no read lock", which is not
     * necessarily "write-locked".
     */
    if (!ctx->ok)
        LMC_DEBUG("sm",
                  "read_prefetched_results: %zu of %zu keys failed (%zu not in L1, %zu not "
                  "read-locked)",
                  absent + unlocked, n, absent, unlocked);
    return LMC_OK;
}

void lmc_sm_read_prefetched_exit(lmc_storage_manager *sm, lmc_sm_read_ctx *ctx, bool caller_failed)
{
    if (!ctx->ok || caller_failed) {
        /* Release the one lock the caller would have released per good key. */
        for (size_t i = 0; i < ctx->n; i++) {
            if (ctx->errs[i] == LMC_L1_SUCCESS) {
                lmc_l1_error e;
                lmc_l1_finish_read(sm->l1, &ctx->keys[i], 1, 0, &e);
            }
        }
    }
    LMC_TRACE(READ_EXIT, .keys = ctx->keys, .n_keys = ctx->n);
    free(ctx->keys);
    free(ctx->objs);
    free(ctx->errs);
    memset(ctx, 0, sizeof(*ctx));
}

void lmc_sm_finish_read_prefetched(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                                   uint32_t extra_count, lmc_l1_error *errs)
{
    LMC_TRACE(FINISH_READ, .keys = keys, .n_keys = n, .extra_count = extra_count);
    lmc_l1_finish_read(sm->l1, keys, n, extra_count, errs); /* errs may be NULL there too */
}

void lmc_sm_unsafe_read(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                        lmc_l1_error *errs, lmc_memory_obj *objs)
{
    lmc_l1_unsafe_read(sm->l1, keys, n, errs, objs);
}

void lmc_sm_touch_l1_keys(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n)
{
    lmc_l1_touch(sm->l1, keys, n);
}

/* ---------------------------------------------------------------------- */
/* Management                                                              */
/* ---------------------------------------------------------------------- */

size_t lmc_sm_clear(lmc_storage_manager *sm, bool force)
{
    return lmc_l1_clear(sm->l1, force);
}

static bool child_healthy(const lmc_json *child)
{
    const lmc_json *h = child ? lmc_json_object_get(child, "is_healthy") : NULL;
    return h != NULL && lmc_json_get_bool(h);
}

char *lmc_sm_report_status(lmc_storage_manager *sm)
{
    lmc_json *root = lmc_json_object();
    if (root == NULL)
        return NULL;
    lmc_json *parts[5] = {
        lmc_l1_report_status(sm->l1),
        lmc_store_controller_report_status(sm->store),
        lmc_prefetch_controller_report_status(sm->prefetch),
        lmc_l1_eviction_controller_report_status(sm->l1_evict),
        lmc_l2_eviction_controller_report_status(sm->l2_evict),
    };
    static const char *const names[5] = {"l1_manager", "store_controller", "prefetch_controller",
                                         "l1_eviction_controller", "l2_eviction_controller"};
    bool healthy = true;
    lmc_status st = lmc_json_object_set(root, "is_healthy", lmc_json_bool(true));
    for (size_t i = 0; i < 5; i++) {
        healthy = healthy && child_healthy(parts[i]);
        st |= lmc_json_object_set(root, names[i], parts[i]);
    }
    lmc_json *adapters = lmc_json_array();
    for (size_t i = 0; i < sm->n_adapters; i++) {
        lmc_json *a = lmc_l2_adapter_report_status(sm->adapters[i]);
        healthy = healthy && child_healthy(a);
        st |= adapters ? lmc_json_array_append(adapters, a) : LMC_ERR_NOMEM;
    }
    st |= lmc_json_object_set(root, "l2_adapters", adapters);
    st |= lmc_json_object_set(root, "num_l2_adapters", lmc_json_int((int64_t)sm->n_adapters));
    st |= lmc_json_object_set(root, "is_healthy", lmc_json_bool(healthy));
    char *text = st == LMC_OK ? lmc_json_dumps(root, LMC_JSON_SORT_KEYS, -1, NULL) : NULL;
    lmc_json_free(root);
    return text;
}

bool lmc_sm_memcheck(lmc_storage_manager *sm, char *why, size_t why_len)
{
    return lmc_l1_memcheck(sm->l1, why, why_len);
}

void lmc_sm_l1_usage(lmc_storage_manager *sm, uint64_t *used, uint64_t *total)
{
    lmc_l1_get_memory_usage(sm->l1, used, total);
}

lmc_status lmc_sm_l1_populate(lmc_storage_manager *sm, uint64_t offset, uint64_t len,
                              lmc_error *err)
{
    return lmc_l1_memory_populate(lmc_l1_manager_memory(sm->l1), offset, len, err);
}

uint64_t lmc_sm_l1_read_lock_count(lmc_storage_manager *sm, const lmc_object_key *key)
{
    return lmc_l1_read_lock_count(sm->l1, key);
}

/* ---------------------------------------------------------------------- */
/* The executor (manual mode)                                              */
/* ---------------------------------------------------------------------- */

/* Run the controllers' steps until neither moves (store first, then prefetch). */
static void quiesce(lmc_storage_manager *sm)
{
    bool moved;
    do {
        moved = lmc_store_controller_step(sm->store);
        moved |= lmc_prefetch_controller_step(sm->prefetch);
    } while (moved);
}

/*
 * The earliest due event and whose it is: adapter i (i < n_adapters), then
 * the L1 eviction pass (n_adapters), then the L2 one (n_adapters + 1). The
 * first component in that order wins a tie.
 */
static uint64_t earliest_event(lmc_storage_manager *sm, size_t *which)
{
    uint64_t best = UINT64_MAX;
    *which = SIZE_MAX;
    for (size_t i = 0; i < sm->n_adapters; i++) {
        uint64_t e = lmc_l2_adapter_next_event_ns(sm->adapters[i]);
        if (e < best) {
            best = e;
            *which = i;
        }
    }
    uint64_t e = lmc_l1_eviction_controller_next_event_ns(sm->l1_evict);
    if (e < best) {
        best = e;
        *which = sm->n_adapters;
    }
    e = lmc_l2_eviction_controller_next_event_ns(sm->l2_evict);
    if (e < best) {
        best = e;
        *which = sm->n_adapters + 1;
    }
    return best;
}

static bool deliver(lmc_storage_manager *sm, size_t which, uint64_t now)
{
    if (which < sm->n_adapters)
        return lmc_l2_adapter_run_next(sm->adapters[which], now);
    if (which == sm->n_adapters)
        return lmc_l1_eviction_controller_tick(sm->l1_evict, now);
    return lmc_l2_eviction_controller_tick(sm->l2_evict, now);
}

uint64_t lmc_sm_now_ns(const lmc_storage_manager *sm)
{
    return lmc_runtime_now_ns(&sm->rt);
}

uint64_t lmc_sm_next_event_ns(lmc_storage_manager *sm)
{
    if (!sm->rt.manual)
        return UINT64_MAX;
    if (lmc_store_controller_has_work(sm->store) || lmc_prefetch_controller_has_work(sm->prefetch))
        return lmc_virtual_clock_get(&sm->vclock);
    size_t which;
    return earliest_event(sm, &which);
}

lmc_status lmc_sm_advance_to(lmc_storage_manager *sm, uint64_t t_ns)
{
    if (!sm->rt.manual)
        return LMC_ERR_INVALID;
    for (;;) {
        quiesce(sm);
        size_t which;
        uint64_t e = earliest_event(sm, &which);
        if (e > t_ns)
            break;
        lmc_virtual_clock_set(&sm->vclock, e);
        if (!deliver(sm, which, lmc_virtual_clock_get(&sm->vclock))) {
            /* A component said it was due and then did nothing: never spin on it. */
            LMC_ERROR("sm",
                      "virtual time: component %zu had an event due at %llu ns but "
                      "delivered none",
                      which, (unsigned long long)e);
            break;
        }
    }
    lmc_virtual_clock_set(&sm->vclock, t_ns);
    return LMC_OK;
}

/* Manual mode: nothing queued or in flight in a controller, nothing pending in an adapter. */
static bool manual_idle(lmc_storage_manager *sm, uint64_t *next_task)
{
    *next_task = UINT64_MAX;
    for (size_t i = 0; i < sm->n_adapters; i++) {
        uint64_t e = lmc_l2_adapter_next_event_ns(sm->adapters[i]);
        if (e < *next_task)
            *next_task = e;
    }
    return *next_task == UINT64_MAX && lmc_store_controller_busy(sm->store) == 0 &&
           lmc_prefetch_controller_busy(sm->prefetch) == 0;
}

static bool wait_idle_manual(lmc_storage_manager *sm, uint32_t timeout_ms)
{
    uint64_t deadline = lmc_mono_ms() + timeout_ms; /* a bound on the host's work, not time */
    for (;;) {
        lmc_sm_advance_to(sm, lmc_virtual_clock_get(&sm->vclock));
        uint64_t next;
        if (manual_idle(sm, &next))
            return true;
        /* Busy with no task left to complete: the work can never finish. */
        if (next == UINT64_MAX || lmc_mono_ms() >= deadline)
            return false;
        lmc_sm_advance_to(sm, next);
    }
}

bool lmc_sm_wait_idle(lmc_storage_manager *sm, uint32_t timeout_ms)
{
    if (sm->rt.manual)
        return wait_idle_manual(sm, timeout_ms);
    /* Threads do the work; this only watches them, on the real clock. */
    uint64_t deadline = lmc_mono_ms() + timeout_ms;
    for (;;) {
        if (lmc_store_controller_busy(sm->store) == 0 &&
            lmc_prefetch_controller_busy(sm->prefetch) == 0)
            return true;
        if (lmc_mono_ms() >= deadline)
            return false;
        lmc_sleep_ns(200 * 1000);
    }
}

void lmc_sm_get_counters(lmc_storage_manager *sm, lmc_sm_counters *out)
{
    lmc_store_counters st = lmc_store_controller_counters(sm->store);
    *out = (lmc_sm_counters){
        .l1_evicted_keys = lmc_l1_eviction_controller_evicted(sm->l1_evict),
        .l2_stored_keys = st.stored_keys,
        .l2_stored_bytes = st.stored_bytes,
        .l2_store_failed_tasks = st.failed_tasks,
        .l2_evicted_keys = lmc_l2_eviction_controller_evicted(sm->l2_evict),
    };
    lmc_prefetch_controller_loaded(sm->prefetch, &out->l2_loaded_keys, &out->l2_loaded_bytes);
}

void lmc_sm_l1_key_states(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                          lmc_l1_key_state *out)
{
    lmc_l1_key_states(sm->l1, keys, n, out);
}

const char *lmc_sm_config_digest_hex(const lmc_storage_manager *sm)
{
    return sm->digest_hex;
}
