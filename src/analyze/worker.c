/*
 * worker.c -- an analysis's key accesses applied in batches (see
 * worker.h).
 *
 * Owns the batches: the pusher fills `cur`; a full batch goes to the
 * back of `full` (a FIFO), and the pusher takes an empty one from `spare`,
 * waiting when there is none. The worker takes batches from the front of
 * `full` in order and applies them. One mutex guards both lists and the
 * flags; a batch itself belongs to whoever took it off a list, so the
 * accesses are copied without a lock.
 *
 * Threads: the owner's (push, sync) and "analyze-keys".
 */
#include "analyze/worker.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define BATCH_ACCESSES 8192
#define BATCHES 4

typedef struct batch {
    lmc_analyze_access v[BATCH_ACCESSES];
    size_t n;
} batch;

struct lmc_analyze_worker {
    lmc_analyze_apply_fn apply;
    void *ctx;
    pthread_t thread;
    bool threaded;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any change of the lists or flags */
    batch *full[BATCHES];
    size_t full_head, n_full;
    batch *spare[BATCHES];
    size_t n_spare;
    batch *cur;
    bool busy; /* the worker holds a batch */
    bool stop;
    bool failed;
};

static void *run(void *arg)
{
    lmc_analyze_worker *w = arg;
    pthread_setname_np(pthread_self(), "analyze-keys");
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->n_full == 0 && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->n_full == 0)
            break; /* stop, and nothing left */
        batch *b = w->full[w->full_head];
        w->full_head = (w->full_head + 1) % BATCHES;
        w->n_full--;
        w->busy = true;
        bool skip = w->failed || w->stop; /* a failed curve stays incomplete; a stop drops */
        pthread_mutex_unlock(&w->mu);
        bool ok = skip || w->apply(w->ctx, b->v, b->n);
        pthread_mutex_lock(&w->mu);
        if (!ok)
            w->failed = true;
        b->n = 0;
        w->spare[w->n_spare++] = b;
        w->busy = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

lmc_analyze_worker *lmc_analyze_worker_create(lmc_analyze_apply_fn apply, void *ctx, bool threaded)
{
    lmc_analyze_worker *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->apply = apply;
    w->ctx = ctx;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    for (size_t i = 0; i < BATCHES; i++) {
        batch *b = malloc(sizeof(*b));
        if (b == NULL) {
            lmc_analyze_worker_destroy(w);
            return NULL;
        }
        b->n = 0;
        w->spare[w->n_spare++] = b;
    }
    w->cur = w->spare[--w->n_spare];
    w->threaded = threaded && pthread_create(&w->thread, NULL, run, w) == 0;
    return w;
}

void lmc_analyze_worker_destroy(lmc_analyze_worker *w)
{
    if (w == NULL)
        return;
    if (w->threaded) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    for (size_t i = 0; i < w->n_full; i++)
        free(w->full[(w->full_head + i) % BATCHES]);
    for (size_t i = 0; i < w->n_spare; i++)
        free(w->spare[i]);
    free(w->cur);
    free(w);
}

/* Hand the current batch to the worker (or apply it inline) and take an empty one. */
static lmc_status submit(lmc_analyze_worker *w)
{
    if (!w->threaded) {
        bool ok = !w->failed && w->apply(w->ctx, w->cur->v, w->cur->n);
        w->cur->n = 0;
        w->failed = !ok;
        return ok ? LMC_OK : LMC_ERR_NOMEM;
    }
    pthread_mutex_lock(&w->mu);
    w->full[(w->full_head + w->n_full) % BATCHES] = w->cur;
    w->n_full++;
    pthread_cond_broadcast(&w->cv);
    while (w->n_spare == 0)
        pthread_cond_wait(&w->cv, &w->mu);
    w->cur = w->spare[--w->n_spare];
    bool failed = w->failed;
    pthread_mutex_unlock(&w->mu);
    return failed ? LMC_ERR_NOMEM : LMC_OK;
}

lmc_status lmc_analyze_worker_push(lmc_analyze_worker *w, const lmc_analyze_access *a)
{
    batch *b = w->cur;
    b->v[b->n++] = *a;
    return b->n == BATCH_ACCESSES ? submit(w) : LMC_OK;
}

lmc_status lmc_analyze_worker_sync(lmc_analyze_worker *w)
{
    if (w->cur->n > 0) {
        lmc_status st = submit(w);
        if (st != LMC_OK)
            return st;
    }
    if (!w->threaded)
        return w->failed ? LMC_ERR_NOMEM : LMC_OK;
    pthread_mutex_lock(&w->mu);
    while (w->n_full > 0 || w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    bool failed = w->failed;
    pthread_mutex_unlock(&w->mu);
    return failed ? LMC_ERR_NOMEM : LMC_OK;
}
