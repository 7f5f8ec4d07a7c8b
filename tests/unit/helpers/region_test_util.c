/*
 * region_test_util.c -- the server's regions and handlers in tests (see
 * region_test_util.h).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "helpers/region_test_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/workload.h"
#include "core/clock.h"
#include "core/file.h"
#include "helpers/sm_test_util.h"

/* The last request's error on this thread (the race tests run requests on several). */
static __thread lmc_error t_err;

lmc_error *rt_err(void)
{
    return &t_err;
}

static unsigned g_seq;
static char g_tag[32];
static pthread_once_t g_tag_once = PTHREAD_ONCE_INIT;

static void make_tag(void)
{
    snprintf(g_tag, sizeof(g_tag), "%ld-%08x", (long)getpid(), lmc_file_nonce());
}

const char *rt_tag(void)
{
    pthread_once(&g_tag_once, make_tag);
    return g_tag;
}

static void shm_name(char *out, size_t cap, unsigned seq)
{
    snprintf(out, cap, LMC_REGION_NAME_PREFIX "unit-%s-%u", rt_tag(), seq);
}

/* A test that fails an assertion skips its rt_shm_drop: what it made goes at exit. */
static void unlink_all_at_exit(void)
{
    char name[96];
    for (unsigned i = 0; i < g_seq; i++) {
        shm_name(name, sizeof(name), i);
        shm_unlink(name);
    }
}

void rt_shm_make(rt_shm *s, int64_t num_blocks, int64_t bpt)
{
    if (g_seq == 0)
        atexit(unlink_all_at_exit);
    shm_name(s->name, sizeof(s->name), g_seq++);
    s->num_blocks = num_blocks;
    s->bpt = bpt;
    s->bytes = (size_t)(num_blocks * RT_TPB * bpt);
    s->fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(s->fd >= 0);
    assert_int_equal(ftruncate(s->fd, (off_t)s->bytes), 0);
    s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    assert_true(s->base != MAP_FAILED);
}

void rt_shm_drop(rt_shm *s)
{
    munmap(s->base, s->bytes);
    close(s->fd);
    shm_unlink(s->name);
}

uint8_t *rt_block(const rt_shm *s, int64_t b)
{
    return s->base + (size_t)(b * RT_TPB * s->bpt);
}

int rt_setup(void **state)
{
    rt_fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->sm = sm_test_create("--l1-size-gb 0.02 --eviction-policy LRU");
    assert_int_equal(lmc_engine_create(f->sm, RT_CHUNK, NULL, 300 * 1000, &f->e, &t_err), LMC_OK);
    assert_int_equal(lmc_regions_create(RT_CHUNK, &f->rs, &t_err), LMC_OK);
    f->ctx = (lmc_op_ctx){.engine = f->e, .regions = f->rs};
    *state = f;
    return 0;
}

int rt_setup_with_copy_helpers(void **state)
{
    rt_setup(state);
    rt_fixture *f = *state;
    assert_int_equal(lmc_copy_pool_create(2, 0, &f->pool, &t_err), LMC_OK);
    f->ctx.copies = f->pool;
    return 0;
}

int rt_teardown(void **state)
{
    rt_fixture *f = *state;
    lmc_copy_pool_destroy(f->pool);
    lmc_engine_destroy(f->e);
    lmc_sm_destroy(f->sm);
    lmc_regions_destroy(f->rs);
    free(f);
    return 0;
}

rt_who rt_peer(uint64_t conn)
{
    return (rt_who){.conn = conn, .uid = (int64_t)geteuid()};
}

lmc_status rt_run(rt_fixture *f, lmc_request *q)
{
    msgpack_sbuffer out;
    msgpack_sbuffer_init(&out);
    lmc_error_clear(&t_err);
    lmc_status st = lmc_op_execute(&f->ctx, q, &out, &t_err);
    msgpack_sbuffer_destroy(&out);
    return st;
}

lmc_status rt_reg_name(rt_fixture *f, rt_who w, int64_t instance, const char *name,
                       int64_t num_blocks, int64_t bpt, const char *model, int64_t ws,
                       int64_t worker)
{
    lmc_request q = {.op = LMC_OP_REGISTER_KV_CACHE,
                     .conn_id = w.conn,
                     .peer_uid = w.uid,
                     .instance_id = instance,
                     .region = {.shm_name = (char *)name,
                                .num_blocks = num_blocks,
                                .tokens_per_block = RT_TPB,
                                .bytes_per_token = bpt,
                                .dtype = LMC_DTYPE_UINT8},
                     .model_name = (char *)model,
                     .world_size = ws,
                     .worker_id = worker};
    return rt_run(f, &q);
}

lmc_status rt_reg(rt_fixture *f, rt_who w, int64_t instance, const rt_shm *s, const char *model,
                  int64_t ws, int64_t worker)
{
    return rt_reg_name(f, w, instance, s->name, s->num_blocks, s->bpt, model, ws, worker);
}

lmc_status rt_unreg(rt_fixture *f, rt_who w, int64_t instance)
{
    lmc_request q = {.op = LMC_OP_UNREGISTER_KV_CACHE, .conn_id = w.conn, .instance_id = instance};
    return rt_run(f, &q);
}

void rt_prompt_make(rt_prompt *p, size_t n_chunks, uint32_t seed)
{
    assert_true(n_chunks <= 64);
    p->n = n_chunks * RT_CHUNK;
    for (size_t i = 0; i < p->n; i++)
        p->tokens[i] = seed * 100003u + (uint32_t)i;
}

lmc_ipc_key rt_key(const rt_prompt *p, const char *model, int64_t ws, int64_t worker,
                   const char *rid)
{
    return (lmc_ipc_key){.model_name = (char *)model,
                         .world_size = ws,
                         .worker_id = worker,
                         .token_ids = (uint32_t *)p->tokens,
                         .n_tokens = p->n,
                         .start = 0,
                         .end = (int64_t)p->n,
                         .request_id = (char *)rid,
                         .cache_salt = "",
                         .num_kv_readers = 1};
}

lmc_status rt_transfer(rt_fixture *f, lmc_op op, rt_who w, int64_t instance, const rt_prompt *p,
                       const char *model, int64_t ws, int64_t worker, int64_t first)
{
    return rt_transfer_as(f, op, "rid", w, instance, p, model, ws, worker, first);
}

lmc_status rt_transfer_as(rt_fixture *f, lmc_op op, const char *rid, rt_who w, int64_t instance,
                          const rt_prompt *p, const char *model, int64_t ws, int64_t worker,
                          int64_t first)
{
    int64_t ids[64 * RT_BPC];
    size_t nb = p->n / RT_TPB;
    for (size_t i = 0; i < nb; i++)
        ids[i] = first + (int64_t)i;
    lmc_request q = {.op = op,
                     .conn_id = w.conn,
                     .peer_uid = w.uid,
                     .instance_id = instance,
                     .key = rt_key(p, model, ws, worker, rid),
                     .block_ids = ids,
                     .n_block_ids = nb};
    return rt_run(f, &q);
}

/* rt_lookup (every rank of ws) under rid and wait: the hit chunks, read-locked for one reader. */
size_t rt_lookup(rt_fixture *f, const rt_prompt *p, const char *model, int64_t ws, const char *rid)
{
    lmc_ipc_key k = rt_key(p, model, ws, -1, rid);
    lmc_layout_desc layout;
    lmc_error err;
    assert_int_equal(lmc_regions_layout(f->rs, "rt_lookup", model, ws, &layout, &err), LMC_OK);
    assert_int_equal(lmc_engine_lookup(f->e, &k, &layout, &err), LMC_OK);
    uint64_t deadline = lmc_mono_ms() + 5000;
    size_t hits = 0;
    while (lmc_engine_query(f->e, rid, false, &hits) == LMC_SESSION_PENDING) {
        assert_true(lmc_mono_ms() < deadline);
        lmc_sleep_ns(100 * 1000);
    }
    return hits;
}

void rt_fill(uint8_t *p, size_t n, uint8_t seed)
{
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, seed);
    lmc_kv_pattern_fill(&pat, p, n);
}

bool rt_holds(const uint8_t *p, size_t n, uint8_t seed)
{
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, seed);
    return lmc_kv_pattern_check(&pat, p, n);
}

uint64_t rt_l1_used(rt_fixture *f)
{
    uint64_t used, total;
    lmc_sm_l1_usage(f->sm, &used, &total);
    return used;
}