/*
 * eviction_controller.c -- the periodic L1 and L2 eviction loops (see
 * eviction_controller.h; spec/storage-manager.md sections 7.3 and 7.4).
 *
 * Owns: one thread per controller ("l1-evict", "l2-evict") that sleeps on a
 * condition variable for the period (so destroy wakes it at once) and then
 * runs one pass. In manual mode (core/runtime.h) there is no thread: the
 * next pass is due at a time on the controller's clock (start + k periods)
 * and the owner runs it (lmc_*_eviction_controller_tick); the pass is the
 * same function. The L2 controller also owns one eviction policy per
 * adapter, fed by an adapter listener; the L1 controller owns the set of
 * cache_salts it has seen when the policy isolates salts.
 *
 * Threads and locks:
 *  - `loop.mu` guards only the stop flag the sleeping thread waits on.
 *  - The L1 pass asks the policy for victims with the L1 mutex held
 *    (lmc_l1_with_lock), in the lock order L1 -> policy that the L1
 *    listeners already use, so the filter can read object state directly;
 *    the delete runs after the mutex is released.
 *  - A salt set has its own mutex, taken under the L1 mutex (L1 listener)
 *    or on an adapter's thread (L2 listener); nothing is called while
 *    holding it.
 *  - Counters are atomics; run_once may be called from any thread.
 *
 * Why track salts at L1: an isolating policy (IsolatedLRU) evicts per
 * cache_salt, and neither L1 nor the policy can list the salts it holds,
 * so the controller remembers every salt it has seen (a few bytes each,
 * never pruned: salts are tenants, not keys). At L2 the adapter lists
 * the salts holding bytes (lmc_l2_adapter_salt_usages).
 *
 * Listener lifetime: neither L1 nor an adapter can unregister a listener,
 * and an adapter's worker may be inside one of our callbacks while it
 * shuts down. So the L2 controller is stopped (thread joined) before the
 * adapters are destroyed, and freed only after them.
 */
#include "storage/eviction_controller.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/keyvec.h"
#include "core/log.h"
#include "core/strmap.h"

#define LOG_COMP "evict"

/* ---------------------------------------------------------------------- */
/* A set of cache_salt strings                                             */
/* ---------------------------------------------------------------------- */

/*
 * Open addressing over salt strings. Salts in keys are interned, so the
 * pointer is kept (valid until exit) and compared first; content decides,
 * so a salt built outside the intern table is still found.
 */
typedef struct salt_set {
    pthread_mutex_t mu;
    const char **slots;
    size_t cap; /* power of two, or 0 */
    size_t len;
    const char *last; /* fast path: batches usually share one salt */
    uint64_t dropped; /* inserts that failed for lack of memory */
} salt_set;

/* cache_salt strings hash as core/strmap's keys do. */
static uint64_t salt_hash(const char *s)
{
    return lmc_str_hash(s, strlen(s));
}

static void salt_set_init(salt_set *ss)
{
    memset(ss, 0, sizeof(*ss));
    pthread_mutex_init(&ss->mu, NULL);
}

static void salt_set_destroy(salt_set *ss)
{
    free(ss->slots);
    pthread_mutex_destroy(&ss->mu);
}

static bool salt_set_grow(salt_set *ss)
{
    size_t cap = ss->cap ? ss->cap * 2 : 16;
    const char **slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < ss->cap; i++) {
        if (ss->slots[i] == NULL)
            continue;
        size_t j = salt_hash(ss->slots[i]) & (cap - 1);
        while (slots[j] != NULL)
            j = (j + 1) & (cap - 1);
        slots[j] = ss->slots[i];
    }
    free(ss->slots);
    ss->slots = slots;
    ss->cap = cap;
    return true;
}

/* Caller holds ss->mu. */
static void salt_set_add_locked(salt_set *ss, const char *salt)
{
    if (salt == NULL)
        salt = "";
    if (salt == ss->last)
        return;
    if (ss->cap > 0) {
        size_t j = salt_hash(salt) & (ss->cap - 1);
        for (; ss->slots[j] != NULL; j = (j + 1) & (ss->cap - 1)) {
            if (ss->slots[j] == salt || strcmp(ss->slots[j], salt) == 0) {
                ss->last = ss->slots[j];
                return;
            }
        }
    }
    if ((ss->len + 1) * 10 > ss->cap * 7 && !salt_set_grow(ss)) {
        ss->dropped++;
        return;
    }
    size_t j = salt_hash(salt) & (ss->cap - 1);
    while (ss->slots[j] != NULL)
        j = (j + 1) & (ss->cap - 1);
    ss->slots[j] = salt;
    ss->len++;
    ss->last = salt;
}

static void salt_set_add_keys(salt_set *ss, const lmc_object_key *keys, size_t n)
{
    pthread_mutex_lock(&ss->mu);
    for (size_t i = 0; i < n; i++)
        salt_set_add_locked(ss, keys[i].cache_salt);
    pthread_mutex_unlock(&ss->mu);
}

/* A malloc'd copy of the salts (strings valid until exit); NULL when empty. */
static const char **salt_set_snapshot(salt_set *ss, size_t *n_out)
{
    pthread_mutex_lock(&ss->mu);
    const char **out = ss->len ? malloc(ss->len * sizeof(*out)) : NULL;
    size_t n = 0;
    if (out != NULL) {
        for (size_t i = 0; i < ss->cap; i++) {
            if (ss->slots[i] != NULL)
                out[n++] = ss->slots[i];
        }
    }
    uint64_t dropped = ss->dropped;
    ss->dropped = 0;
    pthread_mutex_unlock(&ss->mu);
    if (dropped > 0)
        LMC_WARN(LOG_COMP,
                 "out of memory remembering %llu cache_salt(s); their keys may not "
                 "be evicted",
                 (unsigned long long)dropped);
    *n_out = n;
    return out;
}

/* ---------------------------------------------------------------------- */
/* The periodic thread shared by both controllers                          */
/* ---------------------------------------------------------------------- */

typedef struct periodic {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled by stop; uses CLOCK_MONOTONIC */
    bool stop;         /* guarded by mu */
    uint64_t period_ns;
    const char *name;
    void (*pass)(void *arg);
    void *arg;
    pthread_t thread;
    bool started;
    atomic_bool alive;
    /* Manual mode: no thread; the owner runs the pass due at next_ns (owner's thread only). */
    bool manual;
    lmc_clock clock;
    uint64_t next_ns;
} periodic;

static void *periodic_main(void *p_)
{
    periodic *p = p_;
    pthread_setname_np(pthread_self(), p->name);
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        uint64_t ns = (uint64_t)deadline.tv_nsec + p->period_ns;
        deadline.tv_sec += (time_t)(ns / 1000000000u);
        deadline.tv_nsec = (long)(ns % 1000000000u);
        /* Sleep the whole period unless stopped; spurious wake-ups keep waiting. */
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &deadline) != ETIMEDOUT)
            ;
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        p->pass(p->arg);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    atomic_store(&p->alive, false);
    return NULL;
}

/*
 * The shortest period a thread keeps: waking more often than every
 * millisecond only burns a core (a replay at a tiny --time-scale asks for
 * it). Manual mode keeps any period, since a pass costs no wake-up there.
 */
#define MIN_THREAD_PERIOD_NS 1000000u

static void periodic_init(periodic *p, const char *name, uint64_t period_ns, const lmc_runtime *rt,
                          void (*pass)(void *arg), void *arg)
{
    lmc_runtime r = lmc_runtime_resolve(rt);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &attr);
    pthread_condattr_destroy(&attr);
    p->stop = false;
    p->manual = r.manual;
    p->clock = r.clock;
    if (period_ns == 0 || (!p->manual && period_ns < MIN_THREAD_PERIOD_NS))
        period_ns = p->manual ? 1 : MIN_THREAD_PERIOD_NS;
    p->period_ns = period_ns;
    p->name = name;
    p->pass = pass;
    p->arg = arg;
    p->started = false;
    p->next_ns = UINT64_MAX;
    atomic_init(&p->alive, false);
}

static lmc_status periodic_start(periodic *p, lmc_error *err)
{
    if (p->manual) {
        uint64_t now = lmc_clock_now_ns(&p->clock);
        p->next_ns = now > UINT64_MAX - p->period_ns ? UINT64_MAX : now + p->period_ns;
        return LMC_OK;
    }
    atomic_store(&p->alive, true);
    int rc = pthread_create(&p->thread, NULL, periodic_main, p);
    if (rc != 0) {
        atomic_store(&p->alive, false);
        return lmc_error_set(err, LMC_ERR_INTERNAL, "%s: cannot start thread: %s", p->name,
                             strerror(rc));
    }
    p->started = true;
    return LMC_OK;
}

/* Wake and join the thread (if running). Idempotent; owner thread only. */
static void periodic_stop(periodic *p)
{
    p->next_ns = UINT64_MAX; /* manual mode: no pass after a stop either */
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    p->started = false;
}

/* Stop, then free the sync objects. */
static void periodic_fini(periodic *p)
{
    periodic_stop(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

/* Manual mode: run the pass if it is due at now_ns and schedule the next one period later. */
static bool periodic_tick(periodic *p, uint64_t now_ns)
{
    if (!p->manual || p->next_ns > now_ns)
        return false;
    p->next_ns = p->next_ns > UINT64_MAX - p->period_ns ? UINT64_MAX : p->next_ns + p->period_ns;
    p->pass(p->arg);
    return true;
}

/* Healthy: the thread runs, or there is none to run (manual mode). */
static bool periodic_healthy(periodic *p)
{
    return p->manual || atomic_load(&p->alive);
}

static lmc_status check_fraction(const char *what, const char *name, double v, lmc_error *err)
{
    if (!(v > 0.0 && v <= 1.0)) /* also rejects NaN */
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s %g is not in (0, 1]", what, name, v);
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* L1                                                                      */
/* ---------------------------------------------------------------------- */

struct lmc_l1_eviction_controller {
    lmc_l1_manager *l1;
    lmc_eviction_policy *policy; /* borrowed; fed by the owner's L1 bridge */
    double watermark;
    double ratio;
    bool isolated; /* the policy evicts per cache_salt */
    salt_set salts;
    periodic loop;
    atomic_uint_fast64_t evicted_total;
};

/* Salts learned from the same events that create keys in the policy. */
static void l1_salt_listener(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    if (ev != LMC_L1_EV_RESERVED_WRITE && ev != LMC_L1_EV_WRITE_FINISHED &&
        ev != LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED)
        return;
    lmc_l1_eviction_controller *c = ud;
    salt_set_add_keys(&c->salts, keys, n);
}

static bool l1_filter(const lmc_object_key *key, void *ud)
{
    /* Runs under the L1 mutex (see collect_victims) and the policy mutex. */
    return lmc_l1_is_evictable_locked(ud, key);
}

typedef struct l1_scan {
    lmc_eviction_policy *policy;
    double ratio;
    const char *salt;
    lmc_keyvec *out;
    lmc_status st;
} l1_scan;

static void collect_victims(lmc_l1_manager *l1, void *ud)
{
    l1_scan *s = ud;
    s->st = lmc_eviction_get_actions(s->policy, s->ratio, l1_filter, l1, s->salt, s->out);
}

size_t lmc_l1_eviction_controller_run_once(lmc_l1_eviction_controller *c)
{
    uint64_t used = 0, total = 0;
    lmc_l1_get_memory_usage(c->l1, &used, &total);
    double usage = total ? (double)used / (double)total : 0.0;
    if (usage < c->watermark)
        return 0;
    if (lmc_eviction_tracked(c->policy) == 0) {
        /* noop (buffer-only L1), or nothing evictable yet: not worth a line a second. */
        LMC_DEBUG(LOG_COMP, "L1 usage %.3f >= watermark %.3f but the policy tracks no keys", usage,
                  c->watermark);
        return 0;
    }
    LMC_INFO(LOG_COMP,
             "L1 usage %.3f >= watermark %.3f: evicting %.0f%% of %zu tracked keys "
             "(policy %s)",
             usage, c->watermark, c->ratio * 100.0, lmc_eviction_tracked(c->policy),
             lmc_eviction_policy_name(c->policy));

    lmc_keyvec victims = LMC_KEYVEC_INIT;
    const char *global[1] = {NULL};
    const char **salts = global;
    size_t n_salts = 1;
    if (c->isolated) {
        salts = salt_set_snapshot(&c->salts, &n_salts);
        if (salts == NULL)
            n_salts = 0;
    }
    for (size_t i = 0; i < n_salts; i++) {
        l1_scan s = {.policy = c->policy, .ratio = c->ratio, .salt = salts[i], .out = &victims};
        lmc_l1_with_lock(c->l1, collect_victims, &s);
        if (s.st != LMC_OK)
            LMC_WARN(LOG_COMP, "L1 eviction: policy %s failed to choose victims: %s",
                     lmc_eviction_policy_name(c->policy), lmc_status_str(s.st));
    }
    if (salts != global)
        free(salts);

    size_t deleted = 0;
    if (victims.len > 0) {
        lmc_l1_error *errs = malloc(victims.len * sizeof(*errs));
        /* Not forced: a key locked since the scan is skipped, not torn from its user. */
        lmc_l1_delete(c->l1, victims.keys, victims.len, false, errs);
        if (errs != NULL) {
            for (size_t i = 0; i < victims.len; i++)
                deleted += errs[i] == LMC_L1_SUCCESS;
            free(errs);
        } else {
            deleted = victims.len; /* best effort: cannot tell which were skipped */
        }
    }
    LMC_DEBUG(LOG_COMP, "L1 eviction: %zu victims chosen, %zu deleted", victims.len, deleted);
    lmc_keyvec_free(&victims);
    atomic_fetch_add(&c->evicted_total, deleted);
    return deleted;
}

static void l1_pass(void *arg)
{
    lmc_l1_eviction_controller_run_once(arg);
}

lmc_status lmc_l1_eviction_controller_create(lmc_l1_manager *l1, lmc_eviction_policy *policy,
                                             double trigger_watermark, double eviction_ratio,
                                             uint32_t period_ms, lmc_l1_eviction_controller **out,
                                             lmc_error *err)
{
    return lmc_l1_eviction_controller_create_ex(l1, policy, trigger_watermark, eviction_ratio,
                                                (uint64_t)period_ms * 1000000u, NULL, out, err);
}

lmc_status lmc_l1_eviction_controller_create_ex(lmc_l1_manager *l1, lmc_eviction_policy *policy,
                                                double trigger_watermark, double eviction_ratio,
                                                uint64_t period_ns, const lmc_runtime *rt,
                                                lmc_l1_eviction_controller **out, lmc_error *err)
{
    *out = NULL;
    lmc_status st = check_fraction("L1 eviction", "trigger_watermark", trigger_watermark, err);
    if (st == LMC_OK)
        st = check_fraction("L1 eviction", "eviction_ratio", eviction_ratio, err);
    if (st != LMC_OK)
        return st;
    lmc_l1_eviction_controller *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "L1 eviction controller: out of memory");
    c->l1 = l1;
    c->policy = policy;
    c->watermark = trigger_watermark;
    c->ratio = eviction_ratio;
    c->isolated = lmc_eviction_policy_supports_isolation(policy);
    atomic_init(&c->evicted_total, 0);
    salt_set_init(&c->salts);
    periodic_init(&c->loop, "l1-evict", period_ns, rt, l1_pass, c);

    bool listening = false;
    if (c->isolated) {
        lmc_l1_listener l = {.on_event = l1_salt_listener, .ud = c};
        st = lmc_l1_manager_add_listener(l1, &l);
        if (st != LMC_OK) {
            lmc_error_set(err, st, "L1 eviction controller: cannot register the L1 listener");
            goto fail;
        }
        listening = true;
    }
    st = periodic_start(&c->loop, err);
    if (st != LMC_OK) {
        if (listening)
            return st; /* L1 keeps the listener and has no removal: leak, never dangle */
        goto fail;
    }
    LMC_INFO(LOG_COMP,
             "L1 eviction controller started: policy %s, watermark %.3f, ratio %.3f, "
             "period %g ms%s",
             lmc_eviction_policy_name(policy), trigger_watermark, eviction_ratio,
             (double)c->loop.period_ns / 1e6, c->loop.manual ? " (virtual time)" : "");
    *out = c;
    return LMC_OK;

fail:
    periodic_fini(&c->loop);
    salt_set_destroy(&c->salts);
    free(c);
    return st;
}

void lmc_l1_eviction_controller_destroy(lmc_l1_eviction_controller *c)
{
    if (c == NULL)
        return;
    periodic_fini(&c->loop);
    salt_set_destroy(&c->salts);
    free(c);
}

uint64_t lmc_l1_eviction_controller_evicted(lmc_l1_eviction_controller *c)
{
    return atomic_load(&c->evicted_total);
}

uint64_t lmc_l1_eviction_controller_next_event_ns(const lmc_l1_eviction_controller *c)
{
    return c->loop.manual ? c->loop.next_ns : UINT64_MAX;
}

bool lmc_l1_eviction_controller_tick(lmc_l1_eviction_controller *c, uint64_t now_ns)
{
    return periodic_tick(&c->loop, now_ns);
}

lmc_json *lmc_l1_eviction_controller_report_status(lmc_l1_eviction_controller *c)
{
    bool alive = atomic_load(&c->loop.alive);
    lmc_json *j = lmc_json_object();
    if (j == NULL)
        return NULL;
    lmc_status st = LMC_OK;
    st |= lmc_json_object_set(j, "is_healthy", lmc_json_bool(periodic_healthy(&c->loop)));
    st |= lmc_json_object_set(j, "thread_alive", lmc_json_bool(alive));
    st |= lmc_json_object_set(j, "eviction_policy",
                              lmc_json_string(lmc_eviction_policy_name(c->policy)));
    st |= lmc_json_object_set(j, "trigger_watermark", lmc_json_float(c->watermark));
    st |= lmc_json_object_set(j, "eviction_ratio", lmc_json_float(c->ratio));
    st |= lmc_json_object_set(j, "evicted_keys_total",
                              lmc_json_int((int64_t)atomic_load(&c->evicted_total)));
    if (st != LMC_OK) {
        lmc_json_free(j);
        return NULL;
    }
    return j;
}

/* ---------------------------------------------------------------------- */
/* L2                                                                      */
/* ---------------------------------------------------------------------- */

/* One adapter with eviction on; the adapter's listener points here. */
typedef struct l2_state {
    size_t index;
    lmc_l2_adapter *adapter;
    lmc_eviction_policy *policy; /* owned */
    double watermark;
    double ratio;
    bool isolated;
    atomic_uint_fast64_t deleted_seen; /* keys reported deleted by the adapter */
    atomic_uint_fast64_t evicted_total;
} l2_state;

struct lmc_l2_eviction_controller {
    l2_state **states; /* heap-allocated each: listeners hold their address */
    size_t n_states;
    size_t n_adapters;
    periodic loop;
    atomic_uint_fast64_t evicted_total;
};

static void l2_on_stored(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    l2_state *s = ud;
    lmc_eviction_on_created(s->policy, keys, n);
}

static void l2_on_accessed(void *ud, const lmc_object_key *keys, size_t n)
{
    l2_state *s = ud;
    lmc_eviction_on_touched(s->policy, keys, n);
}

static void l2_on_deleted(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    l2_state *s = ud;
    atomic_fetch_add(&s->deleted_seen, n);
    lmc_eviction_on_removed(s->policy, keys, n);
}

/* Ask for victims and delete them; returns how many the adapter reported deleted. */
static size_t l2_evict(l2_state *s, double ratio, const char *salt)
{
    lmc_keyvec victims = LMC_KEYVEC_INIT;
    lmc_status st = lmc_eviction_get_actions(s->policy, ratio, NULL, NULL, salt, &victims);
    if (st != LMC_OK)
        LMC_WARN(LOG_COMP, "L2 adapter %zu (%s): policy %s failed to choose victims: %s", s->index,
                 lmc_l2_adapter_type(s->adapter), lmc_eviction_policy_name(s->policy),
                 lmc_status_str(st));
    size_t deleted = 0;
    if (victims.len > 0) {
        /*
         * The delete is synchronous and reports through our listener on
         * this thread, so the counter's growth is what it removed (keys
         * locked by lookups are skipped by the adapter and not counted).
         */
        uint64_t before = atomic_load(&s->deleted_seen);
        lmc_l2_adapter_delete(s->adapter, victims.keys, victims.len);
        uint64_t after = atomic_load(&s->deleted_seen);
        deleted = (size_t)(after - before);
    }
    lmc_keyvec_free(&victims);
    return deleted;
}

static size_t l2_run_state(l2_state *s)
{
    if (s->isolated) {
        /*
         * Quotas: this build has none, so every salt's limit is 0 and any
         * salt holding bytes is evicted whole (ratio 1.0), as LMCache does
         * for a salt missing from its QuotaManager.
         */
        lmc_l2_salt_usage *salts = NULL;
        size_t n_salts = lmc_l2_adapter_salt_usages(s->adapter, &salts);
        size_t deleted = 0;
        for (size_t i = 0; i < n_salts; i++) {
            if (salts[i].bytes == 0)
                continue;
            LMC_INFO(LOG_COMP,
                     "L2 adapter %zu (%s): cache_salt '%s' holds %llu bytes over its "
                     "limit 0: evicting all its keys",
                     s->index, lmc_l2_adapter_type(s->adapter), salts[i].salt,
                     (unsigned long long)salts[i].bytes);
            deleted += l2_evict(s, 1.0, salts[i].salt);
        }
        free(salts);
        return deleted;
    }
    lmc_l2_usage u = lmc_l2_adapter_get_usage(s->adapter);
    double f = lmc_l2_usage_fraction(&u);
    if (f < 0.0 || f < s->watermark)
        return 0;
    LMC_INFO(LOG_COMP,
             "L2 adapter %zu (%s): usage %.3f >= watermark %.3f: evicting %.0f%% of "
             "%zu tracked keys (policy %s)",
             s->index, lmc_l2_adapter_type(s->adapter), f, s->watermark, s->ratio * 100.0,
             lmc_eviction_tracked(s->policy), lmc_eviction_policy_name(s->policy));
    return l2_evict(s, s->ratio, NULL);
}

size_t lmc_l2_eviction_controller_run_once(lmc_l2_eviction_controller *c)
{
    size_t total = 0;
    for (size_t i = 0; i < c->n_states; i++) {
        size_t d = l2_run_state(c->states[i]);
        atomic_fetch_add(&c->states[i]->evicted_total, d);
        total += d;
    }
    atomic_fetch_add(&c->evicted_total, total);
    return total;
}

static void l2_pass(void *arg)
{
    lmc_l2_eviction_controller_run_once(arg);
}

static void l2_state_free(l2_state *s)
{
    if (s == NULL)
        return;
    lmc_eviction_policy_destroy(s->policy);
    free(s);
}

/*
 * Build the state of adapter i from its "eviction" config. *out stays NULL
 * (and LMC_OK is returned) when the adapter has no eviction, or has it but
 * nothing to evict against (no capacity, no isolation).
 */
static lmc_status l2_state_create(lmc_l2_adapter *a, size_t i, l2_state **out, lmc_error *err)
{
    *out = NULL;
    lmc_l2_eviction_settings ev;
    if (!lmc_l2_adapter_eviction_settings(a, &ev))
        return LMC_OK;
    const char *type = lmc_l2_adapter_type(a);
    const char *name = ev.policy != NULL ? ev.policy : "LRU";
    lmc_status st =
        check_fraction("L2 eviction", "eviction.trigger_watermark", ev.trigger_watermark, err);
    if (st == LMC_OK)
        st = check_fraction("L2 eviction", "eviction.eviction_ratio", ev.eviction_ratio, err);
    if (st != LMC_OK)
        return lmc_error_prefix(err, "L2 adapter %zu (%s)", i, type);
    const lmc_eviction_ops *ops = lmc_eviction_find(name);
    bool isolated = ops != NULL && lmc_eviction_ops_isolating(ops);
    if (ops != NULL && !isolated && !lmc_l2_adapter_supports_global_eviction(a)) {
        LMC_WARN(LOG_COMP, "L2 adapter %zu (%s): eviction configured but no capacity; skipped", i,
                 type);
        return LMC_OK;
    }

    l2_state *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "L2 eviction controller: out of memory");
    st = lmc_eviction_policy_create(name, &s->policy, err);
    if (st != LMC_OK) {
        lmc_error_prefix(err, "L2 adapter %zu (%s)", i, type);
        free(s);
        return st;
    }
    s->index = i;
    s->adapter = a;
    s->watermark = ev.trigger_watermark;
    s->ratio = ev.eviction_ratio;
    s->isolated = isolated;
    atomic_init(&s->deleted_seen, 0);
    atomic_init(&s->evicted_total, 0);
    lmc_l2_listener l = {.on_stored = l2_on_stored,
                         .on_accessed = l2_on_accessed,
                         .on_deleted = l2_on_deleted,
                         .ud = s};
    st = lmc_l2_adapter_add_listener(a, &l);
    if (st != LMC_OK) {
        lmc_error_set(err, st, "L2 adapter %zu (%s): cannot register the eviction listener", i,
                      type);
        l2_state_free(s);
        return st;
    }
    /*
     * After registering, so no key falls between the two: data recovered
     * from a previous run (fs recover_on_start) becomes evictable. A key
     * stored in the window is reported twice, which the policy treats as a
     * touch.
     */
    lmc_l2_adapter_replay_recovered(a, &l);
    if (isolated)
        LMC_WARN(LOG_COMP,
                 "L2 adapter %zu (%s): %s without quotas: this build has no quota "
                 "API, so every cache_salt has limit 0 and all of its keys are evicted on the "
                 "next pass",
                 i, type, name);
    LMC_INFO(LOG_COMP,
             "L2 adapter %zu (%s): eviction %s, %s, watermark %.3f, ratio %.3f, %zu "
             "keys tracked",
             i, type, name, isolated ? "per cache_salt" : "global", s->watermark, s->ratio,
             lmc_eviction_tracked(s->policy));
    *out = s;
    return LMC_OK;
}

lmc_status lmc_l2_eviction_controller_create(lmc_l2_adapter *const *adapters, size_t n_adapters,
                                             uint32_t period_ms, lmc_l2_eviction_controller **out,
                                             lmc_error *err)
{
    return lmc_l2_eviction_controller_create_ex(adapters, n_adapters,
                                                (uint64_t)period_ms * 1000000u, NULL, out, err);
}

lmc_status lmc_l2_eviction_controller_create_ex(lmc_l2_adapter *const *adapters, size_t n_adapters,
                                                uint64_t period_ns, const lmc_runtime *rt,
                                                lmc_l2_eviction_controller **out, lmc_error *err)
{
    *out = NULL;
    lmc_l2_eviction_controller *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "L2 eviction controller: out of memory");
    lmc_status st = LMC_OK;
    c->n_adapters = n_adapters;
    atomic_init(&c->evicted_total, 0);
    periodic_init(&c->loop, "l2-evict", period_ns, rt, l2_pass, c);
    if (n_adapters > 0 && (c->states = calloc(n_adapters, sizeof(*c->states))) == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "L2 eviction controller: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_adapters; i++) {
        l2_state *s = NULL;
        st = l2_state_create(adapters[i], i, &s, err);
        if (st != LMC_OK)
            goto fail;
        if (s != NULL)
            c->states[c->n_states++] = s;
    }
    st = periodic_start(&c->loop, err);
    if (st != LMC_OK)
        goto fail;
    *out = c;
    return LMC_OK;

fail:
    periodic_fini(&c->loop);
    /*
     * States already registered as adapter listeners must outlive the
     * adapters: only free what no adapter points to.
     */
    free(c->states);
    free(c);
    return st;
}

void lmc_l2_eviction_controller_stop(lmc_l2_eviction_controller *c)
{
    if (c == NULL)
        return;
    periodic_stop(&c->loop);
}

void lmc_l2_eviction_controller_destroy(lmc_l2_eviction_controller *c)
{
    if (c == NULL)
        return;
    periodic_fini(&c->loop);
    for (size_t i = 0; i < c->n_states; i++)
        l2_state_free(c->states[i]);
    free(c->states);
    free(c);
}

uint64_t lmc_l2_eviction_controller_evicted(lmc_l2_eviction_controller *c)
{
    return atomic_load(&c->evicted_total);
}

uint64_t lmc_l2_eviction_controller_next_event_ns(const lmc_l2_eviction_controller *c)
{
    /* With no adapter to evict from, a pass does nothing: no event. */
    return c->loop.manual && c->n_states > 0 ? c->loop.next_ns : UINT64_MAX;
}

bool lmc_l2_eviction_controller_tick(lmc_l2_eviction_controller *c, uint64_t now_ns)
{
    return c->n_states > 0 && periodic_tick(&c->loop, now_ns);
}

lmc_json *lmc_l2_eviction_controller_report_status(lmc_l2_eviction_controller *c)
{
    bool alive = atomic_load(&c->loop.alive);
    lmc_json *j = lmc_json_object();
    lmc_json *arr = lmc_json_array();
    lmc_status st = j && arr ? LMC_OK : LMC_ERR_NOMEM;
    for (size_t i = 0; st == LMC_OK && i < c->n_states; i++) {
        l2_state *s = c->states[i];
        lmc_json *o = lmc_json_object();
        if (o == NULL) {
            st = LMC_ERR_NOMEM;
            break;
        }
        st |= lmc_json_object_set(o, "adapter_index", lmc_json_int((int64_t)s->index));
        st |= lmc_json_object_set(o, "type", lmc_json_string(lmc_l2_adapter_type(s->adapter)));
        st |= lmc_json_object_set(o, "eviction_policy",
                                  lmc_json_string(lmc_eviction_policy_name(s->policy)));
        st |= lmc_json_object_set(o, "mode", lmc_json_string(s->isolated ? "isolated" : "global"));
        st |= lmc_json_object_set(o, "trigger_watermark", lmc_json_float(s->watermark));
        st |= lmc_json_object_set(o, "eviction_ratio", lmc_json_float(s->ratio));
        st |= lmc_json_object_set(o, "tracked_keys",
                                  lmc_json_int((int64_t)lmc_eviction_tracked(s->policy)));
        st |= lmc_json_object_set(o, "evicted_keys_total",
                                  lmc_json_int((int64_t)atomic_load(&s->evicted_total)));
        st |= lmc_json_array_append(arr, o);
    }
    if (j != NULL) {
        st |= lmc_json_object_set(j, "is_healthy", lmc_json_bool(periodic_healthy(&c->loop)));
        st |= lmc_json_object_set(j, "thread_alive", lmc_json_bool(alive));
        st |= lmc_json_object_set(j, "num_l2_adapters", lmc_json_int((int64_t)c->n_adapters));
        st |= lmc_json_object_set(j, "evicted_keys_total",
                                  lmc_json_int((int64_t)atomic_load(&c->evicted_total)));
        st |= lmc_json_object_set(j, "adapters", arr);
        arr = NULL;
    }
    lmc_json_free(arr);
    if (st != LMC_OK) {
        lmc_json_free(j);
        return NULL;
    }
    return j;
}
