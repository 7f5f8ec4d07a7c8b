/*
 * test_server_regions.c -- the clients' KV regions (server/regions.h) as the
 * server's handlers use them (server/ops.h), against a StorageManager and
 * real POSIX shm objects, without a transport: which objects a client may
 * register, whose regions a request reaches, the layout and slot rules, and
 * copies that survive a truncated region, a world-size mismatch and an
 * unregister racing them.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/workload.h"
#include "core/clock.h"
#include "core/log.h"
#include "helpers/sm_test_util.h"
#include "server/engine.h"
#include "server/ops.h"
#include "server/protocol.h"
#include "server/regions.h"

#define CHUNK 16
#define TPB 4
#define BPC (CHUNK / TPB)
#define REFUSED "register_kv_cache: region refused"
#define NOBODY 65534

typedef struct fixture {
    lmc_storage_manager *sm;
    lmc_engine *e;
    lmc_regions *rs;
    lmc_op_ctx ctx;
} fixture;

/* The last request's error on this thread (the race tests run requests on several). */
static __thread lmc_error t_err;

/* A POSIX shm object of the test's, mapped. */
typedef struct shm {
    char name[96];
    int fd;
    uint8_t *base;
    size_t bytes;
    int64_t num_blocks, bpt;
} shm;

static unsigned g_seq;

static void shm_make(shm *s, int64_t num_blocks, int64_t bpt)
{
    snprintf(s->name, sizeof(s->name), LMC_REGION_NAME_PREFIX "unit-%ld-%u", (long)getpid(),
             g_seq++);
    s->num_blocks = num_blocks;
    s->bpt = bpt;
    s->bytes = (size_t)(num_blocks * TPB * bpt);
    s->fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(s->fd >= 0);
    assert_int_equal(ftruncate(s->fd, (off_t)s->bytes), 0);
    s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    assert_true(s->base != MAP_FAILED);
}

static void shm_drop(shm *s)
{
    munmap(s->base, s->bytes);
    close(s->fd);
    shm_unlink(s->name);
}

static uint8_t *block(const shm *s, int64_t b)
{
    return s->base + (size_t)(b * TPB * s->bpt);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->sm = sm_test_create("--l1-size-gb 0.02 --eviction-policy LRU");
    assert_int_equal(lmc_engine_create(f->sm, CHUNK, &f->e, &t_err), LMC_OK);
    assert_int_equal(lmc_regions_create(CHUNK, &f->rs, &t_err), LMC_OK);
    f->ctx = (lmc_op_ctx){.engine = f->e, .regions = f->rs};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_engine_destroy(f->e);
    lmc_sm_destroy(f->sm);
    lmc_regions_destroy(f->rs);
    free(f);
    return 0;
}

/* A connection's requests: conn, and the uid of the process behind it. */
typedef struct who {
    uint64_t conn;
    int64_t uid;
} who;

static who peer_of(uint64_t conn)
{
    return (who){.conn = conn, .uid = (int64_t)geteuid()};
}

static lmc_status run(fixture *f, lmc_request *q)
{
    msgpack_sbuffer out;
    msgpack_sbuffer_init(&out);
    lmc_error_clear(&t_err);
    lmc_status st = lmc_op_execute(&f->ctx, q, &out, &t_err);
    msgpack_sbuffer_destroy(&out);
    return st;
}

static lmc_status reg_name(fixture *f, who w, int64_t instance, const char *name,
                           int64_t num_blocks, int64_t bpt, const char *model, int64_t ws,
                           int64_t worker)
{
    lmc_request q = {.op = LMC_OP_REGISTER_KV_CACHE,
                     .conn_id = w.conn,
                     .peer_uid = w.uid,
                     .instance_id = instance,
                     .region = {.shm_name = (char *)name,
                                .num_blocks = num_blocks,
                                .tokens_per_block = TPB,
                                .bytes_per_token = bpt,
                                .dtype = LMC_DTYPE_UINT8},
                     .model_name = (char *)model,
                     .world_size = ws,
                     .worker_id = worker};
    return run(f, &q);
}

static lmc_status reg(fixture *f, who w, int64_t instance, const shm *s, const char *model,
                      int64_t ws, int64_t worker)
{
    return reg_name(f, w, instance, s->name, s->num_blocks, s->bpt, model, ws, worker);
}

static lmc_status unreg(fixture *f, who w, int64_t instance)
{
    lmc_request q = {.op = LMC_OP_UNREGISTER_KV_CACHE, .conn_id = w.conn, .instance_id = instance};
    return run(f, &q);
}

/* n_chunks chunks of tokens from seed: distinct seeds, distinct keys. */
typedef struct prompt {
    uint32_t tokens[64 * CHUNK];
    size_t n;
} prompt;

static void prompt_make(prompt *p, size_t n_chunks, uint32_t seed)
{
    assert_true(n_chunks <= 64);
    p->n = n_chunks * CHUNK;
    for (size_t i = 0; i < p->n; i++)
        p->tokens[i] = seed * 100003u + (uint32_t)i;
}

static lmc_ipc_key key_of(const prompt *p, const char *model, int64_t ws, int64_t worker,
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

/* store or retrieve of the whole prompt through blocks first, first + 1, ... */
static lmc_status transfer(fixture *f, lmc_op op, who w, int64_t instance, const prompt *p,
                           const char *model, int64_t ws, int64_t worker, int64_t first)
{
    int64_t ids[64 * BPC];
    size_t nb = p->n / TPB;
    for (size_t i = 0; i < nb; i++)
        ids[i] = first + (int64_t)i;
    lmc_request q = {.op = op,
                     .conn_id = w.conn,
                     .peer_uid = w.uid,
                     .instance_id = instance,
                     .key = key_of(p, model, ws, worker, "rid"),
                     .block_ids = ids,
                     .n_block_ids = nb};
    return run(f, &q);
}

/* lookup (every rank of ws) under rid and wait: the hit chunks, read-locked for one reader. */
static size_t lookup(fixture *f, const prompt *p, const char *model, int64_t ws, const char *rid)
{
    lmc_ipc_key k = key_of(p, model, ws, -1, rid);
    lmc_layout_desc layout;
    lmc_error err;
    assert_int_equal(lmc_regions_layout(f->rs, "lookup", model, ws, &layout, &err), LMC_OK);
    assert_int_equal(lmc_engine_lookup(f->e, &k, &layout, &err), LMC_OK);
    uint64_t deadline = lmc_mono_ms() + 5000;
    size_t hits = 0;
    while (lmc_engine_query(f->e, rid, false, &hits) == LMC_SESSION_PENDING) {
        assert_true(lmc_mono_ms() < deadline);
        lmc_sleep_ns(100 * 1000);
    }
    return hits;
}

/* The load generator's KV byte pattern, from seed (client/workload.h). */
static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, seed);
    lmc_kv_pattern_fill(&pat, p, n);
}

static bool holds(const uint8_t *p, size_t n, uint8_t seed)
{
    lmc_kv_pattern pat;
    lmc_kv_pattern_init(&pat, seed);
    return lmc_kv_pattern_check(&pat, p, n);
}

static uint64_t l1_used(fixture *f)
{
    uint64_t used, total;
    lmc_sm_l1_usage(f->sm, &used, &total);
    return used;
}

/* ---------------------------------------------------------------------- */
/* Item 1: which objects a client may register                             */
/* ---------------------------------------------------------------------- */

static void expect_refused(fixture *f, who w, const char *name, const char *why)
{
    lmc_status st = reg_name(f, w, 1, name, 4, 64, "m", 1, 0);
    if (st != LMC_ERR_INVALID || strcmp(t_err.msg, REFUSED) != 0)
        fail_msg("%s ('%s'): got status %d, '%s'", why, name, st, t_err.msg);
}

static void test_register_maps_only_objects_the_client_could_have_made_for_it(void **state)
{
    fixture *f = *state;
    who me = peer_of(1);
    shm own, other, open_mode, small;
    shm_make(&own, 4, 64);
    shm_make(&other, 4, 64);
    shm_make(&open_mode, 4, 64);
    shm_make(&small, 2, 64);
    fchmod(open_mode.fd, 0622);
    bool root = geteuid() == 0;
    if (root)
        assert_int_equal(fchown(other.fd, NOBODY, NOBODY), 0);

    char link[128], fifo[128], noprefix[64], badchar[128], missing[128];
    snprintf(link, sizeof(link), "%s-link", own.name);
    snprintf(fifo, sizeof(fifo), "%s-fifo", own.name);
    snprintf(noprefix, sizeof(noprefix), "/unit-%ld-noprefix", (long)getpid());
    snprintf(badchar, sizeof(badchar), "%s~", own.name);
    snprintf(missing, sizeof(missing), "%s-missing", own.name);
    char path[160], target[160];
    snprintf(target, sizeof(target), "/dev/shm%s", own.name);
    snprintf(path, sizeof(path), "/dev/shm%s", link);
    assert_int_equal(symlink(target, path), 0);
    snprintf(path, sizeof(path), "/dev/shm%s", fifo);
    assert_int_equal(mkfifo(path, 0600), 0);
    int np = shm_open(noprefix, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(np >= 0);
    assert_int_equal(ftruncate(np, 4 * TPB * 64), 0);
    char sem_name[64], sem_obj[80];
    snprintf(sem_name, sizeof(sem_name), "/unit-%ld", (long)getpid());
    snprintf(sem_obj, sizeof(sem_obj), "sem.unit-%ld", (long)getpid());
    sem_t *sem = sem_open(sem_name, O_CREAT | O_EXCL, 0600, 1);
    assert_true(sem != SEM_FAILED);

    expect_refused(f, me, link, "a symlink");
    expect_refused(f, me, fifo, "a FIFO");
    expect_refused(f, me, noprefix, "a name without the prefix");
    expect_refused(f, me, badchar, "a name with a character outside the rule");
    expect_refused(f, me, missing, "a missing object");
    expect_refused(f, me, sem_obj, "a semaphore");
    expect_refused(f, me, "/lmcache_l1_pool_x", "a server's L1 pool");
    expect_refused(f, me, open_mode.name, "an object others may write");
    expect_refused(f, me, small.name, "an object smaller than its geometry");
    if (root)
        expect_refused(f, me, other.name, "another user's object");
    assert_int_equal(reg(f, peer_of(0), 1, &own, "m", 1, 0), LMC_ERR_INVALID);
    assert_string_equal(t_err.msg, "register_kv_cache: unknown connection");
    who stranger = {.conn = 1, .uid = (int64_t)geteuid() + 1};
    expect_refused(f, stranger, own.name, "a client of another uid naming this uid's object");
    who unknown = {.conn = 1, .uid = -1};
    expect_refused(f, unknown, own.name, "a client whose uid is unknown");
    assert_int_equal(reg(f, me, 1, &own, "m", 1, 0), LMC_OK);
    if (root) {
        who nobody = {.conn = 2, .uid = NOBODY};
        assert_int_equal(reg(f, nobody, 1, &other, "m", 1, 0), LMC_OK);
    }

    snprintf(path, sizeof(path), "/dev/shm%s", link);
    unlink(path);
    snprintf(path, sizeof(path), "/dev/shm%s", fifo);
    unlink(path);
    close(np);
    shm_unlink(noprefix);
    sem_close(sem);
    sem_unlink(sem_name);
    shm_drop(&own);
    shm_drop(&other);
    shm_drop(&open_mode);
    shm_drop(&small);
}

/* ---------------------------------------------------------------------- */
/* Item 7: connections, layouts and slots                                  */
/* ---------------------------------------------------------------------- */

static void test_a_region_is_reached_only_through_its_connection(void **state)
{
    fixture *f = *state;
    shm a, b;
    shm_make(&a, 2 * BPC, 16);
    shm_make(&b, 2 * BPC, 16);
    /* The same instance id on two connections: two regions. */
    assert_int_equal(reg(f, peer_of(1), 7, &a, "m", 1, 0), LMC_OK);
    assert_int_equal(reg(f, peer_of(2), 7, &b, "m", 1, 0), LMC_OK);
    prompt p;
    prompt_make(&p, 1, 1);
    fill(a.base, a.bytes, 1);
    memset(b.base, 0, b.bytes);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 7, &p, "m", 1, 0, 0), LMC_OK);
    /* Connection 3 has no instance 7: no store, retrieve or unregister through it. */
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(3), 7, &p, "m", 1, 0, 0), LMC_ERR_NOT_FOUND);
    assert_int_equal(unreg(f, peer_of(3), 7), LMC_ERR_NOT_FOUND);
    assert_int_equal(unreg(f, peer_of(0), 7), LMC_ERR_NOT_FOUND);
    /* Connection 2's retrieve lands in its own region, not connection 1's. */
    assert_int_equal(lookup(f, &p, "m", 1, "r"), 1);
    assert_int_equal(transfer(f, LMC_OP_RETRIEVE, peer_of(2), 7, &p, "m", 1, 0, BPC), LMC_OK);
    lmc_engine_end_session(f->e, "r");
    assert_true(holds(block(&b, BPC), (size_t)(BPC * TPB * 16), 1));
    assert_true(holds(a.base, a.bytes, 1));
    assert_int_equal(unreg(f, peer_of(1), 7), LMC_OK);
    assert_int_equal(unreg(f, peer_of(1), 7), LMC_ERR_NOT_FOUND);
    assert_int_equal(unreg(f, peer_of(2), 7), LMC_OK);
    shm_drop(&a);
    shm_drop(&b);
}

static void test_a_layout_conflict_lasts_only_while_the_first_layout_is_registered(void **state)
{
    fixture *f = *state;
    shm narrow, wide;
    shm_make(&narrow, 4, 64);
    shm_make(&wide, 4, 128);
    assert_int_equal(reg(f, peer_of(1), 1, &narrow, "m", 1, 0), LMC_OK);
    assert_int_equal(reg(f, peer_of(1), 2, &narrow, "m", 1, 0), LMC_OK);
    assert_int_equal(reg(f, peer_of(2), 1, &wide, "m", 1, 0), LMC_ERR_INVALID);
    assert_non_null(strstr(t_err.msg, "registered with 64 bytes per token, not 128"));
    /* Another world size is another layout. */
    assert_int_equal(reg(f, peer_of(2), 2, &wide, "m", 2, 0), LMC_OK);
    assert_int_equal(unreg(f, peer_of(1), 1), LMC_OK);
    assert_int_equal(reg(f, peer_of(2), 1, &wide, "m", 1, 0), LMC_ERR_INVALID);
    /* The last region of the layout goes with its connection. */
    assert_int_equal(lmc_regions_drop_conn(f->rs, 1), 1);
    assert_int_equal(reg(f, peer_of(2), 1, &wide, "m", 1, 0), LMC_OK);
    lmc_layout_desc layout;
    assert_int_equal(lmc_regions_layout(f->rs, "lookup", "m", 1, &layout, &t_err), LMC_OK);
    assert_int_equal(lmc_layout_desc_nbytes(&layout), CHUNK * 128);
    /* A connection may re-register its only region of a layout with another one. */
    assert_int_equal(reg(f, peer_of(2), 1, &narrow, "m", 1, 0), LMC_OK);
    assert_int_equal(lmc_regions_layout(f->rs, "lookup", "m", 1, &layout, &t_err), LMC_OK);
    assert_int_equal(lmc_layout_desc_nbytes(&layout), CHUNK * 64);
    assert_int_equal(lmc_regions_drop_conn(f->rs, 2), 2);
    assert_int_equal(lmc_regions_layout(f->rs, "lookup", "m", 1, &layout, &t_err),
                     LMC_ERR_NOT_FOUND);
    shm_drop(&narrow);
    shm_drop(&wide);
}

static void test_slots_come_back_when_regions_go(void **state)
{
    fixture *f = *state;
    shm s;
    shm_make(&s, 4, 64);
    char model[32];
    /* 64 models, again and again: unregister and a closed connection free them. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 64; i++) {
            snprintf(model, sizeof(model), "m-%d-%d", round, i);
            if (reg(f, peer_of(10 + (uint64_t)round), i, &s, model, 1, 0) != LMC_OK)
                fail_msg("round %d, model %d: %s", round, i, t_err.msg);
        }
        assert_int_equal(reg(f, peer_of(99), 0, &s, "one-too-many", 1, 0), LMC_ERR_BUSY);
        if (round == 1) {
            assert_int_equal(lmc_regions_drop_conn(f->rs, 11), 64);
        } else {
            for (int i = 0; i < 64; i++)
                assert_int_equal(unreg(f, peer_of(10 + (uint64_t)round), i), LMC_OK);
        }
    }
    assert_int_equal(reg(f, peer_of(99), 0, &s, "one-too-many", 1, 0), LMC_OK);
    /* Regions are their own slots: 256 of one model, then no more. */
    for (int i = 1; i < 256; i++)
        assert_int_equal(reg(f, peer_of(99), i, &s, "one-too-many", 1, 0), LMC_OK);
    assert_int_equal(reg(f, peer_of(99), 256, &s, "one-too-many", 1, 0), LMC_ERR_BUSY);
    assert_int_equal(lmc_regions_drop_conn(f->rs, 99), 256);
    assert_int_equal(reg(f, peer_of(99), 256, &s, "one-too-many", 1, 0), LMC_OK);
    shm_drop(&s);
}

/* ---------------------------------------------------------------------- */
/* Item 2: a region truncated under the server                             */
/* ---------------------------------------------------------------------- */

/*
 * cmocka installs its own SIGBUS handler around each test body, after the
 * setup made the regions: creating another table puts the guard back in
 * front (a server has no such neighbour).
 */
static void rearm_sigbus_guard(void)
{
    lmc_regions *rs = NULL;
    lmc_error err;
    assert_int_equal(lmc_regions_create(CHUNK, &rs, &err), LMC_OK);
    lmc_regions_destroy(rs);
}

static void test_a_truncated_region_fails_the_request_and_commits_nothing(void **state)
{
    fixture *f = *state;
    rearm_sigbus_guard();
    shm s;
    shm_make(&s, 4 * BPC, 256);
    assert_int_equal(reg(f, peer_of(1), 1, &s, "m", 1, 0), LMC_OK);
    prompt stored, fresh;
    prompt_make(&stored, 2, 1);
    prompt_make(&fresh, 2, 2);
    fill(s.base, s.bytes, 3);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &stored, "m", 1, 0, 0), LMC_OK);
    assert_int_equal(lookup(f, &stored, "m", 1, "r1"), 2);
    uint64_t used = l1_used(f);

    /* Cut the object in half: the copies of its second half fault. */
    assert_int_equal(ftruncate(s.fd, (off_t)(s.bytes / 2)), 0);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &fresh, "m", 1, 0, 2 * BPC),
                     LMC_ERR_IO);
    assert_non_null(strstr(t_err.msg, "truncated"));
    assert_int_equal(l1_used(f), used); /* the reservations went back */
    assert_int_equal(transfer(f, LMC_OP_RETRIEVE, peer_of(1), 1, &stored, "m", 1, 0, 2 * BPC),
                     LMC_ERR_IO);
    /* The failed retrieve released nothing: free_lookup_locks gives the lookup's locks back. */
    lmc_engine_free_lookup_locks(f->e, "r1");
    assert_int_equal(lookup(f, &fresh, "m", 1, "r2"), 0);
    lmc_engine_end_session(f->e, "r2");

    /* Grown back, the region serves again. */
    assert_int_equal(ftruncate(s.fd, (off_t)s.bytes), 0);
    fill(s.base, s.bytes, 4);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &fresh, "m", 1, 0, 2 * BPC), LMC_OK);
    assert_int_equal(lookup(f, &fresh, "m", 1, "r3"), 2);
    memset(s.base, 0, s.bytes);
    assert_int_equal(transfer(f, LMC_OP_RETRIEVE, peer_of(1), 1, &fresh, "m", 1, 0, 0), LMC_OK);
    lmc_engine_end_session(f->e, "r3");
    uint8_t *want = malloc(s.bytes);
    fill(want, s.bytes, 4);
    assert_memory_equal(s.base, want + s.bytes / 2, 2 * BPC * TPB * 256);
    free(want);
    shm_drop(&s);
}

/* A SIGBUS that is not a region copy's still ends the process (in a child). */
static void test_other_sigbus_faults_keep_their_disposition(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* not cmocka's handler: the default is what a server has */
        lmc_regions *rs = NULL;
        lmc_error err;
        if (lmc_regions_create(CHUNK, &rs, &err) != LMC_OK)
            _exit(2);
        char name[64];
        snprintf(name, sizeof(name), "/unit-bus-%ld", (long)getpid());
        int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
        shm_unlink(name);
        if (fd < 0 || ftruncate(fd, 4096) != 0)
            _exit(3);
        volatile uint8_t *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
        if (ftruncate(fd, 0) != 0)
            _exit(4);
        (void)p[0]; /* no guard is armed: this must kill the child */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGBUS);
}

/* ---------------------------------------------------------------------- */
/* Item 4: a region used with a key of another layout                      */
/* ---------------------------------------------------------------------- */

static void test_a_world_size_mismatch_is_refused_and_no_neighbour_changes(void **state)
{
    fixture *f = *state;
    const int64_t n_neighbours = 8;
    shm a, b;
    shm_make(&a, (n_neighbours + 1) * BPC, 64); /* world size 1: 1 KiB chunks */
    shm_make(&b, 2 * BPC, 64 * 1024);           /* world size 2: 1 MiB chunks */
    assert_int_equal(reg(f, peer_of(1), 1, &a, "m", 1, 0), LMC_OK);
    assert_int_equal(reg(f, peer_of(1), 2, &b, "m", 2, 0), LMC_OK);

    /*
     * A free 1 KiB hole just before the neighbours, where the attacker's
     * object would land: x is stored first and dropped by a clear that
     * keeps the read-locked neighbours.
     */
    lmc_engine_clear(f->e, false);
    prompt x, nb, y;
    prompt_make(&x, 1, 10);
    prompt_make(&nb, (size_t)n_neighbours, 11);
    prompt_make(&y, 1, 12);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &x, "m", 1, 0, 0), LMC_OK);
    for (int64_t k = 0; k < n_neighbours; k++)
        fill(block(&a, k * BPC), (size_t)(BPC * TPB * 64), (uint8_t)(20 + k));
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &nb, "m", 1, 0, 0), LMC_OK);
    assert_int_equal(lookup(f, &nb, "m", 1, "n"), (size_t)n_neighbours);
    lmc_engine_clear(f->e, false);

    memset(b.base, 0xee, b.bytes);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 2, &y, "m", 1, 0, 0), LMC_ERR_INVALID);
    assert_non_null(strstr(t_err.msg, "world size 2"));
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 2, &y, "m", 2, 1, 0), LMC_ERR_INVALID);
    assert_non_null(strstr(t_err.msg, "names worker 1"));
    memset(b.base, 0, b.bytes);
    prompt first;
    prompt_make(&first, 1, 11);
    assert_int_equal(lookup(f, &first, "m", 1, "r"), 1);
    assert_int_equal(transfer(f, LMC_OP_RETRIEVE, peer_of(1), 2, &first, "m", 1, 0, 0),
                     LMC_ERR_INVALID);
    lmc_engine_free_lookup_locks(f->e, "r");
    for (size_t i = 0; i < b.bytes; i++)
        if (b.base[i] != 0)
            fail_msg("byte %zu of the world-size-2 region was written", i);

    memset(a.base, 0, a.bytes);
    assert_int_equal(transfer(f, LMC_OP_RETRIEVE, peer_of(1), 1, &nb, "m", 1, 0, 0), LMC_OK);
    lmc_engine_end_session(f->e, "n");
    for (int64_t k = 0; k < n_neighbours; k++)
        if (!holds(block(&a, k * BPC), (size_t)(BPC * TPB * 64), (uint8_t)(20 + k)))
            fail_msg("neighbour chunk %lld changed", (long long)k);
    char why[256];
    assert_true(lmc_sm_memcheck(f->sm, why, sizeof(why)));
    shm_drop(&a);
    shm_drop(&b);
}

static void test_an_object_of_another_layout_is_never_copied_past_its_end(void **state)
{
    fixture *f = *state;
    shm narrow, wide;
    shm_make(&narrow, BPC, 64);
    shm_make(&wide, 2 * BPC, 128);
    prompt p;
    prompt_make(&p, 1, 30);
    fill(narrow.base, narrow.bytes, 5);
    assert_int_equal(reg(f, peer_of(1), 1, &narrow, "m", 1, 0), LMC_OK);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &p, "m", 1, 0, 0), LMC_OK);
    assert_int_equal(unreg(f, peer_of(1), 1), LMC_OK);
    /* The 64-byte layout is gone; its object is still in L1 under the same key. */
    assert_int_equal(reg(f, peer_of(2), 1, &wide, "m", 1, 0), LMC_OK);
    assert_int_equal(lookup(f, &p, "m", 1, "r"), 1);
    memset(wide.base, 0, wide.bytes);
    assert_int_equal(transfer(f, LMC_OP_RETRIEVE, peer_of(2), 1, &p, "m", 1, 0, 0),
                     LMC_ERR_INVALID);
    assert_non_null(strstr(t_err.msg, "another layout"));
    lmc_engine_free_lookup_locks(f->e, "r");
    for (size_t i = 0; i < wide.bytes; i++)
        if (wide.base[i] != 0)
            fail_msg("byte %zu of the region was written from an object of another layout", i);
    shm_drop(&narrow);
    shm_drop(&wide);
}

/* ---------------------------------------------------------------------- */
/* Item 3: unregister while copies run                                     */
/* ---------------------------------------------------------------------- */

#define RACE_CHUNKS 8

typedef struct race {
    fixture *f;
    shm *big, *small;
    atomic_bool stop;
    atomic_size_t copies_ok;
} race;

typedef struct race_worker {
    race *r;
    int index;
} race_worker;

static void *race_copier(void *arg)
{
    race_worker *w = arg;
    race *r = w->r;
    prompt fixed, fresh;
    prompt_make(&fixed, RACE_CHUNKS, 1000);
    for (uint32_t i = 0; !atomic_load(&r->stop); i++) {
        prompt_make(&fresh, RACE_CHUNKS, 2000 + (uint32_t)w->index * 1000000 + i);
        if (transfer(r->f, LMC_OP_STORE, peer_of(1), 1, &fresh, "m", 1, 0, 0) == LMC_OK)
            atomic_fetch_add(&r->copies_ok, 1);
        char rid[32];
        snprintf(rid, sizeof(rid), "race-%d-%u", w->index, i);
        lmc_ipc_key k = key_of(&fixed, "m", 1, -1, rid);
        lmc_layout_desc layout;
        lmc_error err;
        int64_t dims[2] = {CHUNK, r->big->bpt};
        lmc_layout_desc_make1(&layout, dims, 2, LMC_DTYPE_UINT8, NULL);
        if (lmc_engine_lookup(r->f->e, &k, &layout, &err) != LMC_OK)
            continue;
        size_t hits = 0;
        while (lmc_engine_query(r->f->e, rid, false, &hits) == LMC_SESSION_PENDING)
            lmc_sleep_ns(50 * 1000);
        prompt hit = fixed;
        hit.n = hits * CHUNK;
        lmc_status st = hits ? transfer(r->f, LMC_OP_RETRIEVE, peer_of(1), 1, &hit, "m", 1, 0, 0)
                             : LMC_ERR_NOT_FOUND;
        if (st == LMC_OK)
            atomic_fetch_add(&r->copies_ok, 1);
        else
            lmc_engine_free_lookup_locks(r->f->e, rid);
        lmc_engine_end_session(r->f->e, rid);
    }
    return NULL;
}

static void race_with(fixture *f, int copiers)
{
    shm big, small;
    shm_make(&big, RACE_CHUNKS * BPC, 16 * 1024); /* 256 KiB chunks */
    shm_make(&small, BPC, 16 * 1024);
    fill(big.base, big.bytes, 7);
    assert_int_equal(reg(f, peer_of(1), 1, &big, "m", 1, 0), LMC_OK);
    prompt fixed;
    prompt_make(&fixed, RACE_CHUNKS, 1000);
    assert_int_equal(transfer(f, LMC_OP_STORE, peer_of(1), 1, &fixed, "m", 1, 0, 0), LMC_OK);

    race r = {.f = f, .big = &big, .small = &small};
    pthread_t t[8];
    race_worker w[8];
    for (int i = 0; i < copiers; i++) {
        w[i] = (race_worker){.r = &r, .index = i};
        assert_int_equal(pthread_create(&t[i], NULL, race_copier, &w[i]), 0);
    }
    /* Pull the region away, put it back elsewhere, replace it with another object. */
    uint64_t end = lmc_mono_ms() + 1500;
    for (int i = 0; lmc_mono_ms() < end || atomic_load(&r.copies_ok) < 10; i++) {
        lmc_error err;
        who me = peer_of(1);
        lmc_regions_unregister(f->rs, me.conn, 1, &err);
        lmc_sleep_ns(20 * 1000);
        const shm *s = i % 3 == 0 ? &small : &big;
        lmc_kv_region_desc d = {.shm_name = (char *)s->name,
                                .num_blocks = s->num_blocks,
                                .tokens_per_block = TPB,
                                .bytes_per_token = s->bpt,
                                .dtype = LMC_DTYPE_UINT8};
        assert_int_equal(lmc_regions_register(f->rs, me.conn, me.uid, 1, &d, "m", 1, 0, &err),
                         LMC_OK);
        lmc_sleep_ns(200 * 1000);
        if (i % 5 == 0)
            assert_int_equal(lmc_regions_register(f->rs, me.conn, me.uid, 1, &d, "m", 1, 0, &err),
                             LMC_OK);
        assert_true(lmc_mono_ms() < end + 30000);
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < copiers; i++)
        pthread_join(t[i], NULL);
    assert_true(atomic_load(&r.copies_ok) >= 10);
    lmc_error err;
    who me = peer_of(1);
    assert_int_equal(lmc_regions_unregister(f->rs, me.conn, 1, &err), LMC_OK);
    shm_drop(&big);
    shm_drop(&small);
}

static void test_unregister_racing_one_copier_never_touches_unmapped_memory(void **state)
{
    race_with(*state, 1);
}

static void test_unregister_racing_four_copiers_never_touches_unmapped_memory(void **state)
{
    race_with(*state, 4);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_register_maps_only_objects_the_client_could_have_made_for_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_region_is_reached_only_through_its_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_layout_conflict_lasts_only_while_the_first_layout_is_registered, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_slots_come_back_when_regions_go, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_truncated_region_fails_the_request_and_commits_nothing, setup, teardown),
        cmocka_unit_test(test_other_sigbus_faults_keep_their_disposition),
        cmocka_unit_test_setup_teardown(
            test_a_world_size_mismatch_is_refused_and_no_neighbour_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_an_object_of_another_layout_is_never_copied_past_its_end, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_unregister_racing_one_copier_never_touches_unmapped_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_unregister_racing_four_copiers_never_touches_unmapped_memory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
