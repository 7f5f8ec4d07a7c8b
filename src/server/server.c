/*
 * server.c -- `lmcache server` (see server.h).
 *
 * Request path: the loop thread reads [identity, uid, op, payload...] from
 * the ROUTER, checks the frame count and sizes, and queues a job; a worker
 * decodes it (protocol.c), runs it against the StorageManager, and sends
 * [identity, uid, op, response] back through its inproc PUSH socket; the
 * loop forwards that to the ROUTER. The uid and op frames are echoed as
 * received, so a client can match even an error reply to its request.
 *
 * Keys: a chunk's key is (chunk hash, model, kv_rank, group 0, cache salt)
 * with kv_rank = world_size<<24 | rank<<16 | world_size<<8 | rank. A lookup
 * covers every rank, chunk-major, so a leading run of set bits maps to
 * whole chunks; retrieve and store cover one worker's rank.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"
#include "lmcache/storage_manager.h"
#include "obs/event_bus.h"
#include "server/protocol.h"
#include "server/token_hash.h"
#include "trace/capture.h"
#include "trace/lifecycle.h"
#include "trace/recorder.h"

#define LOG_COMP "server"
#define SESSION_TTL_MS (600 * 1000)
#define MAX_REGIONS 256
#define MAX_LAYOUTS 64

/* ---------------------------------------------------------------------- */
/* State                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct region {
    int64_t instance_id;
    char *model_name;
    int64_t world_size, worker_id;
    int64_t num_blocks, tokens_per_block, bytes_per_token;
    uint8_t *base;
    size_t bytes;
    bool used;
} region;

typedef struct layout_entry {
    char *model_name;
    int64_t world_size;
    int64_t bytes_per_token;
    lmc_layout_desc layout; /* one chunk: [chunk_size, bytes_per_token] uint8 */
    bool used;
} layout_entry;

typedef struct session {
    struct session *next;
    char *request_id;
    int64_t world_size;
    uint8_t (*hashes)[32];
    size_t n_chunks;
    lmc_object_key *keys; /* chunk-major x rank, n_chunks * world_size */
    uint32_t extra_count;
    lmc_prefetch_handle handle;
    bool has_handle;    /* a prefetch result still to collect */
    bool hits_known;
    size_t hit_chunks;
    bool locks_released;
    uint64_t last_used_ms;
} session;

#define SESSION_BUCKETS 1024

typedef struct job {
    struct job *next;
    zmq_msg_t *frames; /* identity first */
    size_t n;
} job;

struct lmc_server {
    lmc_server_config cfg;
    lmc_storage_manager *sm;
    lmc_event_bus *bus;
    lmc_trace_recorder *recorder;
    void *zctx;
    void *router;
    void *pull;
    int stop_fd; /* eventfd written by lmc_server_stop */
    pthread_t *workers;
    int n_workers;

    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    job *q_head, *q_tail;
    size_t q_len;
    size_t in_flight;
    bool q_closed;

    pthread_mutex_t regions_mu;
    region regions[MAX_REGIONS];
    layout_entry layouts[MAX_LAYOUTS];

    pthread_mutex_t sessions_mu;
    session *sessions[SESSION_BUCKETS];
    size_t n_sessions;

    pthread_mutex_t counters_mu;
    lmc_server_counters counters;
};

static void count(lmc_server *s, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&s->counters_mu);
    *field += n;
    pthread_mutex_unlock(&s->counters_mu);
}

lmc_server_counters lmc_server_get_counters(lmc_server *s)
{
    pthread_mutex_lock(&s->counters_mu);
    lmc_server_counters c = s->counters;
    pthread_mutex_unlock(&s->counters_mu);
    return c;
}

/* ---------------------------------------------------------------------- */
/* Configuration                                                           */
/* ---------------------------------------------------------------------- */

void lmc_server_config_init(lmc_server_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->host = "127.0.0.1";
    cfg->port = 5555;
    cfg->chunk_size = 256;
    cfg->max_workers = 1;
    cfg->event_bus_queue_size = LMC_EVENT_BUS_DEFAULT_QUEUE;
    lmc_sm_config_init(&cfg->sm);
}

void lmc_server_config_free(lmc_server_config *cfg)
{
    lmc_sm_config_free(&cfg->sm);
}

void lmc_server_print_help(FILE *out)
{
    fprintf(out,
            "server options:\n"
            "  --host HOST                         address to bind (default 127.0.0.1)\n"
            "  --port PORT                         TCP port (default 5555)\n"
            "  --chunk-size N                      tokens per chunk (default 256)\n"
            "  --max-workers N                     request worker threads (default 1)\n"
            "  --trace-level storage               record every StorageManager call\n"
            "  --trace-output FILE                 the trace file (default "
            "$TMPDIR/lmcache-trace-<pid>-<UTC time>.lct)\n"
            "  --event-bus-queue-size N            events queued for the recorder (default "
            "10000)\n"
            "  --counters-output FILE              write the StorageManager call counters "
            "(JSON) at shutdown\n\n"
            "storage-manager flags:\n");
    lmc_sm_config_print_help(out);
}

static lmc_status parse_int(const char *flag, const char *v, long lo, long hi, long *out,
                            lmc_error *err)
{
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (v == NULL || *v == '\0' || *end != '\0' || errno == ERANGE)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not an integer", flag,
                             v ? v : "");
    if (x < lo || x > hi)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %ld is not in [%ld, %ld]", flag, x, lo,
                             hi);
    *out = x;
    return LMC_OK;
}

lmc_status lmc_server_config_parse(lmc_server_config *cfg, int argc, char **argv, lmc_error *err)
{
    for (int i = 1; i < argc;) {
        bool consumed;
        lmc_status st = lmc_sm_config_parse_arg(&cfg->sm, argc, argv, &i, &consumed, err);
        if (st != LMC_OK)
            return st;
        if (consumed)
            continue;
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(name_len < 63 ? name_len : 63), arg);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        int used = eq ? 1 : 2;
        long x;
        if (strcmp(name, "--host") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID, "--host: a value is required");
            cfg->host = v;
        } else if (strcmp(name, "--port") == 0) {
            if ((st = parse_int("--port", v, 1, 65535, &x, err)) != LMC_OK)
                return st;
            cfg->port = (int)x;
        } else if (strcmp(name, "--chunk-size") == 0) {
            if ((st = parse_int("--chunk-size", v, 1, 1 << 20, &x, err)) != LMC_OK)
                return st;
            cfg->chunk_size = (int)x;
        } else if (strcmp(name, "--max-workers") == 0) {
            if ((st = parse_int("--max-workers", v, 1, 256, &x, err)) != LMC_OK)
                return st;
            cfg->max_workers = (int)x;
        } else if (strcmp(name, "--event-bus-queue-size") == 0) {
            if ((st = parse_int("--event-bus-queue-size", v, 1, 100000000, &x, err)) != LMC_OK)
                return st;
            cfg->event_bus_queue_size = (size_t)x;
        } else if (strcmp(name, "--trace-level") == 0) {
            if (v == NULL)
                return lmc_error_set(err, LMC_ERR_INVALID, "--trace-level: a value is required");
            if (strcmp(v, "storage") != 0)
                return lmc_error_set(err, LMC_ERR_INVALID,
                                     "--trace-level: unsupported trace level '%s'; expected "
                                     "'storage'",
                                     v);
            cfg->trace_level = v;
        } else if (strcmp(name, "--trace-output") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID, "--trace-output: a value is required");
            cfg->trace_output = v;
        } else if (strcmp(name, "--counters-output") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID,
                                     "--counters-output: a value is required");
            cfg->counters_output = v;
        } else if (arg[0] == '-') {
            return lmc_error_set(err, LMC_ERR_INVALID, "unknown option '%s'", arg);
        } else {
            return lmc_error_set(err, LMC_ERR_INVALID, "unexpected argument '%s'", arg);
        }
        i += used;
    }
    return lmc_sm_config_finish(&cfg->sm, err);
}

/* ---------------------------------------------------------------------- */
/* Sessions                                                                */
/* ---------------------------------------------------------------------- */

static size_t bucket_of(const char *id)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = id; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return (size_t)(h % SESSION_BUCKETS);
}

/* Caller holds sessions_mu. */
static session *session_find(lmc_server *s, const char *id)
{
    for (session *x = s->sessions[bucket_of(id)]; x; x = x->next) {
        if (strcmp(x->request_id, id) == 0)
            return x;
    }
    return NULL;
}

static void session_free(session *x)
{
    if (x == NULL)
        return;
    if (x->has_handle)
        lmc_prefetch_handle_clear(&x->handle);
    free(x->request_id);
    free(x->hashes);
    free(x->keys);
    free(x);
}

/* Caller holds sessions_mu. */
static session *session_unlink(lmc_server *s, const char *id)
{
    session **link = &s->sessions[bucket_of(id)];
    for (session *x = *link; x; link = &x->next, x = x->next) {
        if (strcmp(x->request_id, id) == 0) {
            *link = x->next;
            s->n_sessions--;
            return x;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Regions and layouts                                                     */
/* ---------------------------------------------------------------------- */

/* Caller holds regions_mu. */
static region *region_find(lmc_server *s, int64_t instance_id)
{
    for (int i = 0; i < MAX_REGIONS; i++) {
        if (s->regions[i].used && s->regions[i].instance_id == instance_id)
            return &s->regions[i];
    }
    return NULL;
}

/* Caller holds regions_mu. */
static layout_entry *layout_find(lmc_server *s, const char *model, int64_t world_size)
{
    for (int i = 0; i < MAX_LAYOUTS; i++) {
        if (s->layouts[i].used && s->layouts[i].world_size == world_size &&
            strcmp(s->layouts[i].model_name, model) == 0)
            return &s->layouts[i];
    }
    return NULL;
}

static void region_release(region *r)
{
    if (r->base)
        munmap(r->base, r->bytes);
    free(r->model_name);
    memset(r, 0, sizeof(*r));
}

static lmc_status handle_register(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                                  lmc_error *err)
{
    const lmc_kv_region_desc *d = &q->region;
    if (d->bytes_per_token > (int64_t)1 << 30 || d->tokens_per_block > (int64_t)1 << 20)
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: block too large");
    if (s->cfg.chunk_size % d->tokens_per_block != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "register_kv_cache: tokens_per_block %lld does not divide the chunk "
                             "size %d",
                             (long long)d->tokens_per_block, s->cfg.chunk_size);
    __int128 need = (__int128)d->num_blocks * d->tokens_per_block * d->bytes_per_token;
    if (need > ((__int128)1 << 40))
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: region too large");
    int fd = shm_open(d->shm_name, O_RDWR, 0);
    if (fd < 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: cannot open shm '%s': %s",
                             d->shm_name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (__int128)st.st_size < need) {
        close(fd);
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "register_kv_cache: shm '%s' holds %lld bytes but %lld blocks of "
                             "%lld x %lld need %lld",
                             d->shm_name, (long long)st.st_size, (long long)d->num_blocks,
                             (long long)d->tokens_per_block, (long long)d->bytes_per_token,
                             (long long)need);
    }
    void *base = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return lmc_error_set(err, LMC_ERR_IO, "register_kv_cache: mmap: %s", strerror(errno));

    lmc_layout_desc layout;
    int64_t dims[2] = {s->cfg.chunk_size, d->bytes_per_token};
    lmc_layout_desc_make1(&layout, dims, 2, LMC_DTYPE_UINT8, NULL);

    lmc_status rc = LMC_OK;
    pthread_mutex_lock(&s->regions_mu);
    layout_entry *le = layout_find(s, q->model_name, q->world_size);
    if (le != NULL && le->bytes_per_token != d->bytes_per_token) {
        rc = lmc_error_set(err, LMC_ERR_INVALID,
                           "register_kv_cache: model '%s' (world size %lld) is registered with %lld "
                           "bytes per token, not %lld",
                           q->model_name, (long long)q->world_size,
                           (long long)le->bytes_per_token, (long long)d->bytes_per_token);
        goto unlock;
    }
    region *r = region_find(s, q->instance_id);
    if (r != NULL) {
        region_release(r); /* re-registration replaces the mapping */
    } else {
        for (int i = 0; i < MAX_REGIONS && r == NULL; i++)
            if (!s->regions[i].used)
                r = &s->regions[i];
    }
    if (le == NULL) {
        for (int i = 0; i < MAX_LAYOUTS && le == NULL; i++)
            if (!s->layouts[i].used)
                le = &s->layouts[i];
        if (le != NULL) {
            le->model_name = strdup(q->model_name);
            le->world_size = q->world_size;
            le->bytes_per_token = d->bytes_per_token;
            le->layout = layout;
            le->used = le->model_name != NULL;
        }
    }
    if (r == NULL || le == NULL || !le->used) {
        rc = lmc_error_set(err, LMC_ERR_BUSY, "register_kv_cache: too many registrations");
        goto unlock;
    }
    *r = (region){.instance_id = q->instance_id,
                  .model_name = strdup(q->model_name),
                  .world_size = q->world_size,
                  .worker_id = q->worker_id,
                  .num_blocks = d->num_blocks,
                  .tokens_per_block = d->tokens_per_block,
                  .bytes_per_token = d->bytes_per_token,
                  .base = base,
                  .bytes = (size_t)need,
                  .used = true};
    base = NULL;
unlock:
    pthread_mutex_unlock(&s->regions_mu);
    if (base != NULL)
        munmap(base, (size_t)need);
    if (rc == LMC_OK) {
        LMC_INFO(LOG_COMP, "registered KV cache of instance %lld: %s, %lld blocks x %lld tokens "
                 "x %lld bytes (model %s, world size %lld, worker %lld)",
                 (long long)q->instance_id, d->shm_name, (long long)d->num_blocks,
                 (long long)d->tokens_per_block, (long long)d->bytes_per_token, q->model_name,
                 (long long)q->world_size, (long long)q->worker_id);
        lmc_response_nil(out);
    }
    return rc;
}

static lmc_status handle_unregister(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                                    lmc_error *err)
{
    pthread_mutex_lock(&s->regions_mu);
    region *r = region_find(s, q->instance_id);
    if (r)
        region_release(r);
    pthread_mutex_unlock(&s->regions_mu);
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "unregister_kv_cache: unknown instance %lld",
                             (long long)q->instance_id);
    lmc_response_nil(out);
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Keys                                                                    */
/* ---------------------------------------------------------------------- */

static int64_t rank_of(int64_t world_size, int64_t rank)
{
    return lmc_compute_kv_rank((unsigned)world_size, (unsigned)rank, (unsigned)world_size,
                               (unsigned)rank);
}

/* Keys of chunks [c0, c1) for one rank (rank >= 0) or every rank (rank < 0). */
static lmc_status make_keys(const uint8_t (*hashes)[32], size_t c0, size_t c1,
                            const char *model, int64_t world_size, int64_t rank,
                            const char *salt, lmc_object_key **out, size_t *n, lmc_error *err)
{
    size_t per = rank < 0 ? (size_t)world_size : 1;
    size_t total = (c1 - c0) * per;
    lmc_object_key *keys = malloc((total ? total : 1) * sizeof(*keys));
    if (keys == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory for %zu keys", total);
    size_t k = 0;
    for (size_t c = c0; c < c1; c++) {
        for (size_t r = 0; r < per; r++) {
            int64_t rr = rank < 0 ? (int64_t)r : rank;
            lmc_status st = lmc_object_key_make(&keys[k++], hashes[c], 32, model,
                                                rank_of(world_size, rr), 0, salt, err);
            if (st != LMC_OK) {
                free(keys);
                return st;
            }
        }
    }
    *out = keys;
    *n = total;
    return LMC_OK;
}

/* Chain-hash the full chunks of tokens[0:end) (nothing past end is needed). */
static lmc_status hash_tokens(lmc_server *s, const lmc_ipc_key *key, uint8_t (**hashes)[32],
                              size_t *n_chunks, lmc_error *err)
{
    size_t cs = (size_t)s->cfg.chunk_size;
    size_t n = (size_t)key->end / cs;
    *hashes = malloc((n ? n : 1) * 32);
    if (*hashes == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory hashing %zu chunks", n);
    *n_chunks = lmc_token_chunk_hashes(key->token_ids, key->n_tokens, cs, *hashes, n);
    return LMC_OK;
}

static lmc_status check_aligned(lmc_server *s, const char *op, const lmc_ipc_key *key,
                                lmc_error *err)
{
    int64_t cs = s->cfg.chunk_size;
    if (key->start % cs != 0 || key->end % cs != 0 || key->end > (int64_t)key->n_tokens)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: [start, end) = [%lld, %lld) is not chunk-aligned (chunk size "
                             "%lld) inside the %zu tokens",
                             op, (long long)key->start, (long long)key->end, (long long)cs,
                             key->n_tokens);
    return LMC_OK;
}

/* The keys of one worker's chunks [start, end) (retrieve and store). */
static lmc_status worker_keys(lmc_server *s, const lmc_ipc_key *key, lmc_object_key **keys,
                              size_t *n, lmc_error *err)
{
    size_t cs = (size_t)s->cfg.chunk_size;
    uint8_t (*hashes)[32] = NULL;
    size_t n_chunks;
    lmc_status st = hash_tokens(s, key, &hashes, &n_chunks, err);
    if (st != LMC_OK)
        return st;
    size_t c0 = (size_t)key->start / cs;
    st = make_keys((const uint8_t(*)[32])hashes, c0 < n_chunks ? c0 : n_chunks, n_chunks,
                   key->model_name, key->world_size, key->worker_id, key->cache_salt, keys, n,
                   err);
    free(hashes);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Lookup and prefetch status                                              */
/* ---------------------------------------------------------------------- */

static lmc_status get_layout(lmc_server *s, const char *op, const char *model, int64_t ws,
                             lmc_layout_desc *out, lmc_error *err)
{
    pthread_mutex_lock(&s->regions_mu);
    layout_entry *le = layout_find(s, model, ws);
    if (le)
        *out = le->layout;
    pthread_mutex_unlock(&s->regions_mu);
    if (le == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND,
                             "%s: no KV cache registered for model '%s' with world size %lld", op,
                             model, (long long)ws);
    return LMC_OK;
}

/* Release the lookup's locks that no retrieve will release. Caller holds no lock. */
static void release_locks(lmc_server *s, session *x)
{
    if (x->locks_released || !x->hits_known || x->hit_chunks == 0)
        return;
    size_t n = x->hit_chunks * (size_t)x->world_size;
    lmc_sm_finish_read_prefetched(s->sm, x->keys, n, x->extra_count, NULL);
    count(s, &s->counters.finish_read_prefetched, 1);
    x->locks_released = true;
}

/*
 * Collect a finished prefetch: fold the bitmap into a whole-chunk prefix
 * (a chunk counts only if every rank is present) and release the locks on
 * keys found past that prefix. Caller holds sessions_mu.
 */
static bool collect_prefetch(lmc_server *s, session *x)
{
    if (!x->has_handle)
        return x->hits_known;
    lmc_bitmap bm;
    /* BUSY: not yet. NOMEM: the result stays with the StorageManager, so the
     * client's next poll collects it. */
    if (lmc_sm_query_prefetch_status(s->sm, &x->handle, &bm) != LMC_OK)
        return false;
    size_t ws = (size_t)x->world_size;
    size_t lead = lmc_bitmap_count_leading_ones(&bm);
    size_t hit = lead / ws;
    size_t total = x->n_chunks * ws;
    /* Keys found beyond the whole-chunk prefix hold locks nobody will read. */
    lmc_object_key *extra = malloc((total ? total : 1) * sizeof(*extra));
    size_t n_extra = 0;
    for (size_t i = hit * ws; i < total && extra; i++) {
        if (lmc_bitmap_test(&bm, i))
            extra[n_extra++] = x->keys[i];
    }
    if (n_extra > 0) {
        lmc_sm_finish_read_prefetched(s->sm, extra, n_extra, x->extra_count, NULL);
        count(s, &s->counters.finish_read_prefetched, 1);
    }
    free(extra);
    lmc_bitmap_free(&bm);
    lmc_prefetch_handle_clear(&x->handle);
    x->has_handle = false;
    x->hits_known = true;
    x->hit_chunks = hit;
    return true;
}

static lmc_status handle_lookup(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                                lmc_error *err)
{
    const lmc_ipc_key *key = &q->key;
    lmc_status st = check_aligned(s, "lookup", key, err);
    lmc_layout_desc layout;
    if (st == LMC_OK)
        st = get_layout(s, "lookup", key->model_name, key->world_size, &layout, err);
    if (st != LMC_OK)
        return st;
    session *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "lookup: out of memory");
    x->request_id = strdup(key->request_id);
    x->world_size = key->world_size;
    x->extra_count = (uint32_t)(key->num_kv_readers - 1);
    st = hash_tokens(s, key, &x->hashes, &x->n_chunks, err);
    if (st == LMC_OK) {
        size_t nk;
        st = make_keys((const uint8_t(*)[32])x->hashes, 0, x->n_chunks, key->model_name,
                       key->world_size, -1, key->cache_salt, &x->keys, &nk, err);
        if (st == LMC_OK) {
            st = lmc_sm_submit_prefetch_task(s->sm, x->keys, nk, &layout, x->extra_count,
                                             key->request_id, LMC_TRIM_PREFIX, &x->handle, err);
            count(s, &s->counters.submit_prefetch_task, 1);
        }
    }
    if (st != LMC_OK || x->request_id == NULL) {
        session_free(x);
        return st != LMC_OK ? st : lmc_error_set(err, LMC_ERR_NOMEM, "lookup: out of memory");
    }
    x->has_handle = true;
    x->last_used_ms = lmc_mono_ms();
    pthread_mutex_lock(&s->sessions_mu);
    /* A repeated lookup under the same request id replaces the session. */
    session *old = session_unlink(s, x->request_id);
    size_t b = bucket_of(x->request_id);
    x->next = s->sessions[b];
    s->sessions[b] = x;
    s->n_sessions++;
    pthread_mutex_unlock(&s->sessions_mu);
    if (old) {
        pthread_mutex_lock(&s->sessions_mu);
        collect_prefetch(s, old);
        pthread_mutex_unlock(&s->sessions_mu);
        release_locks(s, old);
        session_free(old);
    }
    lmc_response_nil(out);
    return LMC_OK;
}

static lmc_status handle_query(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                               bool lookup_hits_only)
{
    pthread_mutex_lock(&s->sessions_mu);
    session *x = session_find(s, q->request_id);
    if (x == NULL) {
        pthread_mutex_unlock(&s->sessions_mu);
        lmc_response_int(out, 0); /* 0 = unknown request */
        return LMC_OK;
    }
    x->last_used_ms = lmc_mono_ms();
    if (lookup_hits_only && x->has_handle) {
        size_t hits;
        if (lmc_sm_query_prefetch_lookup_hits(s->sm, &x->handle, &hits))
            lmc_response_int(out, (int64_t)(hits / (size_t)x->world_size));
        else
            lmc_response_nil(out);
    } else if (collect_prefetch(s, x)) {
        lmc_response_int(out, (int64_t)x->hit_chunks);
    } else {
        lmc_response_nil(out);
    }
    pthread_mutex_unlock(&s->sessions_mu);
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Retrieve and store                                                      */
/* ---------------------------------------------------------------------- */

/* The region of an instance, and block-id checks for [start, end). */
static lmc_status check_blocks(lmc_server *s, const char *op, const lmc_request *q, region *out,
                               lmc_error *err)
{
    pthread_mutex_lock(&s->regions_mu);
    region *r = region_find(s, q->instance_id);
    if (r)
        *out = *r;
    pthread_mutex_unlock(&s->regions_mu);
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "%s: unknown instance %lld", op,
                             (long long)q->instance_id);
    if (out->bytes_per_token != 0 && strcmp(out->model_name, q->key.model_name) != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: instance %lld is registered for model '%s', not '%s'", op,
                             (long long)q->instance_id, out->model_name, q->key.model_name);
    size_t need = (size_t)((q->key.end - q->key.start) / out->tokens_per_block);
    if (q->n_block_ids < need)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: %zu block ids cover fewer than the %zu blocks of [%lld, %lld)",
                             op, q->n_block_ids, need, (long long)q->key.start,
                             (long long)q->key.end);
    for (size_t i = 0; i < need; i++) {
        if (q->block_ids[i] < 0 || q->block_ids[i] >= out->num_blocks)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "%s: block id %lld (item %zu) is outside the %lld registered "
                                 "blocks",
                                 op, (long long)q->block_ids[i], i, (long long)out->num_blocks);
    }
    return LMC_OK;
}

/* Copy between one chunk's object and its blocks (to_blocks: retrieve). */
static void copy_chunk(const region *r, const int64_t *block_ids, size_t bpc, uint8_t *obj,
                       bool to_blocks, size_t skip_blocks)
{
    size_t block_bytes = (size_t)(r->tokens_per_block * r->bytes_per_token);
    for (size_t b = skip_blocks; b < bpc; b++) {
        uint8_t *blk = r->base + (size_t)block_ids[b] * block_bytes;
        if (to_blocks)
            memcpy(blk, obj + b * block_bytes, block_bytes);
        else
            memcpy(obj + b * block_bytes, blk, block_bytes);
    }
}

static lmc_status handle_retrieve(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                                  lmc_error *err)
{
    region r;
    lmc_status st = check_aligned(s, "retrieve", &q->key, err);
    if (st == LMC_OK)
        st = check_blocks(s, "retrieve", q, &r, err);
    if (st != LMC_OK)
        return st;
    size_t cs = (size_t)s->cfg.chunk_size;
    lmc_object_key *keys = NULL;
    size_t nk = 0;
    if ((st = worker_keys(s, &q->key, &keys, &nk, err)) != LMC_OK)
        return st;
    lmc_sm_read_ctx ctx;
    st = lmc_sm_read_prefetched_enter(s->sm, keys, nk, &ctx);
    count(s, &s->counters.read_enter, 1);
    if (st != LMC_OK) {
        free(keys);
        return lmc_error_set(err, st, "retrieve: out of memory");
    }
    size_t bpc = cs / (size_t)r.tokens_per_block;
    size_t skip_tokens = (size_t)q->skip_first_n_tokens;
    if (ctx.ok) {
        for (size_t i = 0; i < nk; i++) {
            size_t chunk_tok0 = i * cs;
            size_t skip = skip_tokens > chunk_tok0 ? (skip_tokens - chunk_tok0) : 0;
            size_t skip_blocks = skip / (size_t)r.tokens_per_block;
            if (skip_blocks > bpc)
                skip_blocks = bpc;
            copy_chunk(&r, q->block_ids + i * bpc, bpc, ctx.objs[i].data, true, skip_blocks);
        }
    }
    bool ok = ctx.ok;
    lmc_sm_read_prefetched_exit(s->sm, &ctx, false);
    count(s, &s->counters.read_exit, 1);
    if (ok) {
        /* The copy is done: release this reader's lock (the engine's stream callback). */
        lmc_sm_finish_read_prefetched(s->sm, keys, nk, 0, NULL);
        count(s, &s->counters.finish_read_prefetched, 1);
    }
    free(keys);
    lmc_response_transfer(out, ok);
    return LMC_OK;
}

static lmc_status handle_store(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                               lmc_error *err)
{
    region r;
    lmc_status st = check_aligned(s, "store", &q->key, err);
    if (st == LMC_OK)
        st = check_blocks(s, "store", q, &r, err);
    lmc_layout_desc layout;
    if (st == LMC_OK)
        st = get_layout(s, "store", q->key.model_name, q->key.world_size, &layout, err);
    if (st != LMC_OK)
        return st;
    size_t cs = (size_t)s->cfg.chunk_size;
    lmc_object_key *keys = NULL;
    size_t nk = 0;
    if ((st = worker_keys(s, &q->key, &keys, &nk, err)) != LMC_OK)
        return st;
    lmc_l1_error *errs = malloc((nk ? nk : 1) * sizeof(*errs));
    lmc_memory_obj *objs = malloc((nk ? nk : 1) * sizeof(*objs));
    lmc_object_key *done = malloc((nk ? nk : 1) * sizeof(*done));
    if (errs == NULL || objs == NULL || done == NULL) {
        free(errs);
        free(objs);
        free(done);
        free(keys);
        return lmc_error_set(err, LMC_ERR_NOMEM, "store: out of memory");
    }
    lmc_sm_reserve_write(s->sm, keys, nk, &layout, LMC_WRITE_NEW, errs, objs);
    count(s, &s->counters.reserve_write, 1);
    size_t bpc = cs / (size_t)r.tokens_per_block;
    size_t n_done = 0;
    for (size_t i = 0; i < nk; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            continue; /* already present, locked, or no room: skipped */
        copy_chunk(&r, q->block_ids + i * bpc, bpc, objs[i].data, false, 0);
        done[n_done++] = keys[i];
    }
    if (n_done > 0) {
        lmc_sm_finish_write(s->sm, done, n_done, NULL);
        count(s, &s->counters.finish_write, 1);
    }
    free(errs);
    free(objs);
    free(done);
    free(keys);
    lmc_response_transfer(out, true);
    return LMC_OK;
}

static lmc_status handle_free_locks(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out)
{
    pthread_mutex_lock(&s->sessions_mu);
    session *x = session_find(s, q->key.request_id);
    if (x != NULL) {
        /* An abandoned lookup: wait for its prefetch so its locks can go. */
        uint64_t deadline = lmc_mono_ms() + 5000;
        while (!collect_prefetch(s, x) && lmc_mono_ms() < deadline) {
            pthread_mutex_unlock(&s->sessions_mu);
            lmc_sleep_ns(500 * 1000);
            pthread_mutex_lock(&s->sessions_mu);
            x = session_find(s, q->key.request_id);
            if (x == NULL)
                break;
        }
    }
    session *y = x ? session_unlink(s, q->key.request_id) : NULL;
    pthread_mutex_unlock(&s->sessions_mu);
    if (y) {
        release_locks(s, y);
        session_free(y);
    }
    lmc_response_nil(out);
    return LMC_OK;
}

static lmc_status handle_end_session(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out)
{
    pthread_mutex_lock(&s->sessions_mu);
    session *x = session_unlink(s, q->request_id);
    if (x)
        collect_prefetch(s, x);
    pthread_mutex_unlock(&s->sessions_mu);
    if (x) {
        if (x->n_chunks > 0)
            lmc_sm_touch_l1_keys(s->sm, x->keys, x->n_chunks * (size_t)x->world_size);
        session_free(x);
    }
    lmc_response_nil(out);
    return LMC_OK;
}

/* Sessions nobody ended: drop them after the TTL (their L1 locks expire too). */
static void expire_sessions(lmc_server *s)
{
    uint64_t now = lmc_mono_ms();
    pthread_mutex_lock(&s->sessions_mu);
    for (size_t b = 0; b < SESSION_BUCKETS; b++) {
        session **link = &s->sessions[b];
        while (*link) {
            session *x = *link;
            if (now - x->last_used_ms > SESSION_TTL_MS) {
                *link = x->next;
                s->n_sessions--;
                collect_prefetch(s, x);
                session_free(x);
            } else {
                link = &x->next;
            }
        }
    }
    pthread_mutex_unlock(&s->sessions_mu);
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */
/* ---------------------------------------------------------------------- */

static lmc_status execute(lmc_server *s, const lmc_request *q, msgpack_sbuffer *out,
                          lmc_error *err)
{
    switch (q->op) {
    case LMC_OP_REGISTER_KV_CACHE: return handle_register(s, q, out, err);
    case LMC_OP_UNREGISTER_KV_CACHE: return handle_unregister(s, q, out, err);
    case LMC_OP_GET_CHUNK_SIZE: lmc_response_int(out, s->cfg.chunk_size); return LMC_OK;
    case LMC_OP_PING: lmc_response_bool(out, true); return LMC_OK;
    case LMC_OP_NOOP: lmc_response_str(out, "noop"); return LMC_OK;
    case LMC_OP_LOOKUP: return handle_lookup(s, q, out, err);
    case LMC_OP_QUERY_PREFETCH_STATUS: return handle_query(s, q, out, false);
    case LMC_OP_QUERY_PREFETCH_LOOKUP_HITS: return handle_query(s, q, out, true);
    case LMC_OP_RETRIEVE: return handle_retrieve(s, q, out, err);
    case LMC_OP_STORE: return handle_store(s, q, out, err);
    case LMC_OP_FREE_LOOKUP_LOCKS: return handle_free_locks(s, q, out);
    case LMC_OP_END_SESSION: return handle_end_session(s, q, out);
    case LMC_OP_CLEAR:
        lmc_sm_clear(s->sm, q->force);
        lmc_response_nil(out);
        return LMC_OK;
    case LMC_OP_INVALID: break;
    }
    return lmc_error_set(err, LMC_ERR_UNSUPPORTED, "unsupported operation");
}

/*
 * Send [identity, uid, op, response] on sock (a worker's PUSH socket, or the
 * ROUTER itself for requests answered on the loop thread).
 */
static void reply(void *sock, job *j, msgpack_sbuffer *resp)
{
    zmq_msg_t *f = j->frames;
    /* identity, then uid and op echoed as received (nil frames if absent). */
    zmq_send(sock, zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), ZMQ_SNDMORE);
    for (size_t i = 1; i <= 2; i++) {
        if (i < j->n)
            zmq_send(sock, zmq_msg_data(&f[i]), zmq_msg_size(&f[i]), ZMQ_SNDMORE);
        else
            zmq_send(sock, "\xc0", 1, ZMQ_SNDMORE); /* msgpack nil */
    }
    zmq_send(sock, resp->data, resp->size, 0);
}

static void job_free(job *j)
{
    for (size_t i = 0; i < j->n; i++)
        zmq_msg_close(&j->frames[i]);
    free(j->frames);
    free(j);
}

static void run_job(lmc_server *s, void *push, job *j)
{
    msgpack_sbuffer resp;
    msgpack_sbuffer_init(&resp);
    lmc_error err;
    lmc_error_clear(&err);
    lmc_request q;
    const void *frames[LMC_PROTO_MAX_FRAMES + 2];
    size_t lens[LMC_PROTO_MAX_FRAMES + 2];
    size_t n = j->n - 1; /* without the identity */
    for (size_t i = 0; i < n; i++) {
        frames[i] = zmq_msg_data(&j->frames[i + 1]);
        lens[i] = zmq_msg_size(&j->frames[i + 1]);
    }
    lmc_status st = lmc_request_decode(frames, lens, n, &q, &err);
    if (st == LMC_OK)
        st = execute(s, &q, &resp, &err);
    count(s, &s->counters.requests, 1);
    if (st != LMC_OK) {
        resp.size = 0;
        lmc_response_error(&resp, err.msg[0] ? err.msg : lmc_status_str(st));
        count(s, &s->counters.errors, 1);
        LMC_WARN(LOG_COMP, "request %lld (%s) failed: %s", (long long)q.uid,
                 lmc_op_name(q.op) ? lmc_op_name(q.op) : "?", err.msg);
    }
    lmc_request_free(&q);
    reply(push, j, &resp);
    msgpack_sbuffer_destroy(&resp);
}

static void *worker_main(void *arg)
{
    lmc_server *s = arg;
    pthread_setname_np(pthread_self(), "lmc-worker");
    void *push = zmq_socket(s->zctx, ZMQ_PUSH);
    int linger = 1000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_connect(push, "inproc://lmcache-replies");
    for (;;) {
        pthread_mutex_lock(&s->q_mu);
        while (s->q_head == NULL && !s->q_closed)
            pthread_cond_wait(&s->q_cv, &s->q_mu);
        job *j = s->q_head;
        if (j == NULL) { /* closed and drained */
            pthread_mutex_unlock(&s->q_mu);
            break;
        }
        s->q_head = j->next;
        if (s->q_head == NULL)
            s->q_tail = NULL;
        s->q_len--;
        s->in_flight++;
        pthread_mutex_unlock(&s->q_mu);
        run_job(s, push, j);
        job_free(j);
        pthread_mutex_lock(&s->q_mu);
        s->in_flight--;
        pthread_mutex_unlock(&s->q_mu);
    }
    zmq_close(push);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Lifecycle                                                               */
/* ---------------------------------------------------------------------- */

lmc_status lmc_server_create(const lmc_server_config *cfg, lmc_server **out, lmc_error *err)
{
    lmc_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    s->cfg = *cfg;
    s->stop_fd = -1;
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_cond_init(&s->q_cv, NULL);
    pthread_mutex_init(&s->regions_mu, NULL);
    pthread_mutex_init(&s->sessions_mu, NULL);
    pthread_mutex_init(&s->counters_mu, NULL);
    lmc_status st = LMC_OK;

    /* Tracing first, so the StorageManager's first call is recorded. */
    if (cfg->trace_level != NULL) {
        lmc_event_bus_config bc = {.enabled = true, .max_queue_size = cfg->event_bus_queue_size};
        if ((st = lmc_event_bus_create(&bc, &s->bus, err)) != LMC_OK)
            goto fail;
        char *json = NULL;
        char digest[65] = "";
        if ((st = lmc_sm_config_digest(&cfg->sm, &json, digest)) != LMC_OK) {
            lmc_error_set(err, st, "server: cannot serialise the StorageManager config");
            goto fail;
        }
        st = lmc_trace_maybe_init(s->bus, cfg->trace_level, cfg->trace_output, json, digest,
                                  &s->recorder, err);
        free(json);
        if (st != LMC_OK)
            goto fail;
        if ((st = lmc_event_bus_start(s->bus)) != LMC_OK) {
            lmc_error_set(err, st, "server: cannot start the event bus");
            goto fail;
        }
    }
    if ((st = lmc_sm_create(&cfg->sm, &s->sm, err)) != LMC_OK)
        goto fail;

    s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->zctx = zmq_ctx_new();
    if (s->stop_fd < 0 || s->zctx == NULL) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot create the ZMQ context");
        goto fail;
    }
    s->router = zmq_socket(s->zctx, ZMQ_ROUTER);
    s->pull = zmq_socket(s->zctx, ZMQ_PULL);
    int linger = 0;
    zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof(linger));
    int64_t maxmsg = LMC_PROTO_MAX_FRAME;
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    char endpoint[300];
    snprintf(endpoint, sizeof(endpoint), "tcp://%s:%d", cfg->host, cfg->port);
    if (zmq_bind(s->router, endpoint) != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot bind %s: %s", endpoint,
                           zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zmq_bind(s->pull, "inproc://lmcache-replies") != 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "server: cannot bind the reply socket");
        goto fail;
    }
    s->workers = calloc((size_t)cfg->max_workers, sizeof(*s->workers));
    if (s->workers == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
        goto fail;
    }
    for (int i = 0; i < cfg->max_workers; i++) {
        if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0) {
            st = lmc_error_set(err, LMC_ERR_IO, "server: cannot start worker %d", i);
            goto fail;
        }
        s->n_workers++;
    }
    LMC_INFO(LOG_COMP, "lmcache server listening on %s (chunk size %d, %d worker(s)%s%s)",
             endpoint, cfg->chunk_size, cfg->max_workers, s->recorder ? ", tracing to " : "",
             s->recorder ? lmc_trace_recorder_path(s->recorder) : "");
    *out = s;
    return LMC_OK;

fail:
    lmc_server_destroy(s);
    return st;
}

void lmc_server_stop(lmc_server *s)
{
    uint64_t one = 1;
    ssize_t r = write(s->stop_fd, &one, sizeof(one));
    (void)r;
}

static void forward_replies(lmc_server *s)
{
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        int more;
        do {
            more = zmq_msg_more(&m);
            zmq_msg_send(&m, s->router, more ? ZMQ_SNDMORE : 0);
            if (!more)
                break;
            zmq_msg_init(&m);
            zmq_msg_recv(&m, s->pull, 0);
        } while (1);
    }
}

/* Read one multipart request from the ROUTER and queue it (or reject it). */
static void accept_request(lmc_server *s)
{
    job *j = calloc(1, sizeof(*j));
    size_t cap = LMC_PROTO_MAX_FRAMES + 2;
    j->frames = calloc(cap, sizeof(zmq_msg_t));
    bool too_many = false;
    size_t total = 0;
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->router, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        total += zmq_msg_size(&m);
        if (j->n < cap) {
            j->frames[j->n++] = m;
        } else {
            too_many = true; /* keep reading to consume the message */
            zmq_msg_close(&m);
        }
    }
    if (j->n < 1) {
        job_free(j);
        return;
    }
    if (too_many || total > LMC_PROTO_MAX_FRAME) {
        /* Answer here: the request never reaches a worker. */
        msgpack_sbuffer resp;
        msgpack_sbuffer_init(&resp);
        lmc_response_error(&resp, too_many ? "message has too many frames"
                                           : "message is too large");
        reply(s->router, j, &resp);
        msgpack_sbuffer_destroy(&resp);
        count(s, &s->counters.errors, 1);
        LMC_WARN(LOG_COMP, "rejected a message: %s", too_many ? "too many frames" : "too large");
        job_free(j);
        return;
    }
    /*
     * Short requests run right here on the loop thread: a hand-off to a
     * worker and back costs two thread wake-ups, more than the work itself.
     * Only the ones that copy KV data or may wait go to the workers.
     */
    lmc_op op = j->n > 2 ? lmc_op_from_frame(zmq_msg_data(&j->frames[2]),
                                              zmq_msg_size(&j->frames[2]))
                         : LMC_OP_INVALID;
    if (op != LMC_OP_STORE && op != LMC_OP_RETRIEVE && op != LMC_OP_FREE_LOOKUP_LOCKS &&
        op != LMC_OP_INVALID) {
        run_job(s, s->router, j);
        job_free(j);
        return;
    }
    pthread_mutex_lock(&s->q_mu);
    if (s->q_tail)
        s->q_tail->next = j;
    else
        s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    pthread_cond_signal(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
}

/*
 * The shutdown audit: after the controllers go idle, the L1 allocator must
 * be consistent, and a non-forced clear must leave nothing behind -- an
 * object it cannot drop still holds a read or write lock.
 */
static void audit(lmc_server *s, bool *memcheck_ok, uint64_t *locked_bytes)
{
    lmc_sm_wait_idle(s->sm, 10000);
    char why[256] = "";
    *memcheck_ok = lmc_sm_memcheck(s->sm, why, sizeof(why));
    if (!*memcheck_ok)
        LMC_ERROR(LOG_COMP, "shutdown audit: L1 memcheck failed: %s", why);
    lmc_sm_clear(s->sm, false);
    uint64_t total;
    lmc_sm_l1_usage(s->sm, locked_bytes, &total);
    LMC_INFO(LOG_COMP, "shutdown audit: memcheck %s, %llu bytes of L1 still locked",
             *memcheck_ok ? "ok" : "FAILED", (unsigned long long)*locked_bytes);
}

static void write_counters(lmc_server *s)
{
    lmc_server_counters c = lmc_server_get_counters(s);
    bool memcheck_ok;
    uint64_t locked_bytes;
    audit(s, &memcheck_ok, &locked_bytes);
    LMC_INFO(LOG_COMP, "StorageManager calls: reserve_write=%llu finish_write=%llu "
             "submit_prefetch_task=%llu finish_read_prefetched=%llu read_enter=%llu "
             "read_exit=%llu; requests=%llu errors=%llu",
             (unsigned long long)c.reserve_write, (unsigned long long)c.finish_write,
             (unsigned long long)c.submit_prefetch_task,
             (unsigned long long)c.finish_read_prefetched, (unsigned long long)c.read_enter,
             (unsigned long long)c.read_exit, (unsigned long long)c.requests,
             (unsigned long long)c.errors);
    if (s->cfg.counters_output == NULL)
        return;
    FILE *f = fopen(s->cfg.counters_output, "w");
    if (f == NULL) {
        LMC_ERROR(LOG_COMP, "cannot write --counters-output '%s': %s", s->cfg.counters_output,
                  strerror(errno));
        return;
    }
    fprintf(f,
            "{\"reserve_write\": %llu, \"finish_write\": %llu, \"submit_prefetch_task\": %llu, "
            "\"finish_read_prefetched\": %llu, \"read_prefetched_results.__enter__\": %llu, "
            "\"read_prefetched_results.__exit__\": %llu, \"requests\": %llu, \"errors\": %llu, "
            "\"memcheck_ok\": %s, \"l1_locked_bytes_at_exit\": %llu}\n",
            (unsigned long long)c.reserve_write, (unsigned long long)c.finish_write,
            (unsigned long long)c.submit_prefetch_task,
            (unsigned long long)c.finish_read_prefetched, (unsigned long long)c.read_enter,
            (unsigned long long)c.read_exit, (unsigned long long)c.requests,
            (unsigned long long)c.errors, memcheck_ok ? "true" : "false",
            (unsigned long long)locked_bytes);
    fclose(f);
}

lmc_status lmc_server_run(lmc_server *s)
{
    uint64_t next_sweep = lmc_mono_ms() + 60000;
    for (;;) {
        zmq_pollitem_t items[3] = {
            {s->router, 0, ZMQ_POLLIN, 0},
            {s->pull, 0, ZMQ_POLLIN, 0},
            {NULL, s->stop_fd, ZMQ_POLLIN, 0},
        };
        int rc = zmq_poll(items, 3, 1000);
        if (rc < 0 && zmq_errno() != EINTR)
            break;
        if (items[2].revents & ZMQ_POLLIN)
            break;
        if (items[1].revents & ZMQ_POLLIN)
            forward_replies(s);
        if (items[0].revents & ZMQ_POLLIN)
            accept_request(s);
        if (lmc_mono_ms() >= next_sweep) {
            expire_sessions(s);
            next_sweep = lmc_mono_ms() + 60000;
        }
    }

    /* Shutdown: no new requests; finish what is queued and in flight. */
    LMC_INFO(LOG_COMP, "shutting down: finishing requests in flight");
    pthread_mutex_lock(&s->q_mu);
    s->q_closed = true;
    pthread_cond_broadcast(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
    uint64_t deadline = lmc_mono_ms() + 30000;
    for (;;) {
        pthread_mutex_lock(&s->q_mu);
        bool idle = s->q_len == 0 && s->in_flight == 0;
        pthread_mutex_unlock(&s->q_mu);
        forward_replies(s);
        if (idle || lmc_mono_ms() > deadline)
            break;
        lmc_sleep_ns(1000 * 1000);
    }
    for (int i = 0; i < s->n_workers; i++)
        pthread_join(s->workers[i], NULL);
    s->n_workers = 0;
    forward_replies(s);
    write_counters(s);
    return LMC_OK;
}

void lmc_server_destroy(lmc_server *s)
{
    if (s == NULL)
        return;
    if (s->n_workers > 0) {
        pthread_mutex_lock(&s->q_mu);
        s->q_closed = true;
        pthread_cond_broadcast(&s->q_cv);
        pthread_mutex_unlock(&s->q_mu);
        for (int i = 0; i < s->n_workers; i++)
            pthread_join(s->workers[i], NULL);
    }
    while (s->q_head) {
        job *j = s->q_head;
        s->q_head = j->next;
        job_free(j);
    }
    free(s->workers);
    if (s->router)
        zmq_close(s->router);
    if (s->pull)
        zmq_close(s->pull);
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    /* The event bus stops first: final drain, then the recorder closes the file. */
    if (s->bus) {
        lmc_event_bus_stop(s->bus);
        if (s->recorder)
            LMC_INFO(LOG_COMP, "trace file %s: %llu record(s), %llu dropped",
                     lmc_trace_recorder_path(s->recorder),
                     (unsigned long long)lmc_trace_recorder_records(s->recorder),
                     (unsigned long long)lmc_trace_recorder_dropped(s->recorder));
    }
    for (size_t b = 0; b < SESSION_BUCKETS; b++) {
        while (s->sessions[b]) {
            session *x = s->sessions[b];
            s->sessions[b] = x->next;
            session_free(x);
        }
    }
    lmc_sm_destroy(s->sm);
    for (int i = 0; i < MAX_REGIONS; i++)
        if (s->regions[i].used)
            region_release(&s->regions[i]);
    for (int i = 0; i < MAX_LAYOUTS; i++)
        free(s->layouts[i].model_name);
    lmc_trace_recorder_destroy(s->recorder);
    lmc_trace_capture_set_bus(NULL);
    lmc_event_bus_destroy(s->bus);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    pthread_mutex_destroy(&s->q_mu);
    pthread_cond_destroy(&s->q_cv);
    pthread_mutex_destroy(&s->regions_mu);
    pthread_mutex_destroy(&s->sessions_mu);
    pthread_mutex_destroy(&s->counters_mu);
    free(s);
}
