/*
 * copy_pool.c -- helper threads that share one request's chunk copies (see
 * copy_pool.h).
 *
 * A batch lives on its caller's stack. It is in the pool's list while
 * helpers may still join it: the caller puts it there, and whoever finds
 * its items all taken (a helper, or the caller once its own share is done)
 * takes it out, so an idle helper never spins on a finished batch. The
 * caller returns only when no helper is inside the batch (helpers == 0,
 * under mu), so the stack frame outlives every reader.
 */
#include "server/copy_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct batch {
    struct batch *next; /* in the pool's list (under mu) */
    bool listed;        /* under mu */
    int helpers;        /* helpers inside the batch (under mu) */
    lmc_copy_item_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next_item; /* the next item to take */
    atomic_bool failed;      /* an item failed: take no more */
    size_t fail_at;          /* the lowest item that failed, n if none (under mu) */
    lmc_status st;           /* its status and error (under mu) */
    lmc_error err;
} batch;

struct lmc_copy_pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a batch was posted, or stop */
    pthread_cond_t done_cv; /* a helper left a batch */
    batch *head, *tail;     /* batches helpers may join */
    bool stop;
    size_t min_bytes;
    int n_threads;
    pthread_t *threads;
};

/* Caller holds mu. */
static void unlist(lmc_copy_pool *p, batch *b)
{
    if (!b->listed)
        return;
    batch **at = &p->head, *prev = NULL;
    while (*at != b) {
        prev = *at;
        at = &(*at)->next;
    }
    *at = b->next;
    if (p->tail == b)
        p->tail = prev;
    b->listed = false;
}

/* Take and run items of b until none is left or one has failed. */
static void work(lmc_copy_pool *p, batch *b)
{
    while (!atomic_load_explicit(&b->failed, memory_order_relaxed)) {
        size_t i = atomic_fetch_add_explicit(&b->next_item, 1, memory_order_relaxed);
        if (i >= b->n)
            return;
        lmc_error e;
        lmc_error_clear(&e);
        lmc_status st = b->fn(b->ctx, i, &e);
        if (st != LMC_OK) {
            pthread_mutex_lock(&p->mu);
            if (i < b->fail_at) {
                b->fail_at = i;
                b->st = st;
                b->err = e;
            }
            pthread_mutex_unlock(&p->mu);
            atomic_store_explicit(&b->failed, true, memory_order_relaxed);
        }
    }
}

static void *helper_main(void *arg)
{
    lmc_copy_pool *p = arg;
    pthread_setname_np(pthread_self(), "copy-helper");
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->head == NULL && !p->stop)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        batch *b = p->head;
        b->helpers++;
        pthread_mutex_unlock(&p->mu);
        work(p, b);
        pthread_mutex_lock(&p->mu);
        unlist(p, b); /* its items are all taken (or one failed) */
        if (--b->helpers == 0)
            pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

lmc_status lmc_copy_pool_create(int helpers, size_t min_bytes, lmc_copy_pool **out, lmc_error *err)
{
    *out = NULL;
    if (helpers < 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "copy pool: %d helpers", helpers);
    lmc_copy_pool *p = calloc(1, sizeof(*p));
    if (p == NULL ||
        (helpers > 0 && (p->threads = calloc((size_t)helpers, sizeof(*p->threads))) == NULL)) {
        free(p);
        return lmc_error_set(err, LMC_ERR_NOMEM, "copy pool: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->min_bytes = min_bytes;
    for (int i = 0; i < helpers; i++) {
        if (pthread_create(&p->threads[i], NULL, helper_main, p) != 0) {
            lmc_copy_pool_destroy(p);
            return lmc_error_set(err, LMC_ERR_IO, "copy pool: cannot start copy helper %d", i);
        }
        p->n_threads++;
    }
    *out = p;
    return LMC_OK;
}

void lmc_copy_pool_destroy(lmc_copy_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

int lmc_copy_pool_helpers(const lmc_copy_pool *p)
{
    return p == NULL ? 0 : p->n_threads;
}

lmc_status lmc_copy_pool_run(lmc_copy_pool *p, size_t n, size_t bytes, lmc_copy_item_fn fn,
                             void *ctx, lmc_error *err)
{
    if (p == NULL || p->n_threads == 0 || n < 2 || bytes < p->min_bytes) {
        for (size_t i = 0; i < n; i++) {
            lmc_status st = fn(ctx, i, err);
            if (st != LMC_OK)
                return st;
        }
        return LMC_OK;
    }
    batch b = {.fn = fn, .ctx = ctx, .n = n, .fail_at = n, .st = LMC_OK};
    atomic_init(&b.next_item, 0);
    atomic_init(&b.failed, false);
    pthread_mutex_lock(&p->mu);
    if (p->tail != NULL)
        p->tail->next = &b;
    else
        p->head = &b;
    p->tail = &b;
    b.listed = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);

    work(p, &b);

    pthread_mutex_lock(&p->mu);
    unlist(p, &b);
    while (b.helpers > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    if (b.st != LMC_OK && err != NULL)
        *err = b.err;
    return b.st;
}
