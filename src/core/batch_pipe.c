/*
 * batch_pipe.c -- a bounded, ordered hand-off of batches to a worker
 * thread (see batch_pipe.h).
 *
 * Batch number s (counting submissions from 0) lives in slot s % depth.
 * `submitted` and `consumed` count batches; the producer owns slot
 * submitted % depth, the worker the slots of [consumed, submitted). The
 * producer may fill slot submitted % depth only once the batch that used
 * it depth submissions ago is consumed, i.e. while submitted - consumed <
 * depth; submit waits for that. Both counters change under `mu` only: the
 * worker consumes without the lock (its slots are its own), then takes the
 * lock to count the batch, which is what makes its writes visible to a
 * producer that waits on `idle`.
 */
#include "core/batch_pipe.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

struct lmc_batch_pipe {
    lmc_batch_fn fn;
    void *ud;
    size_t depth;
    lmc_batch *slots;
    pthread_mutex_t mu;
    pthread_cond_t work; /* the worker waits here for a submission or stop */
    pthread_cond_t idle; /* the producer waits here for a consumed batch */
    uint64_t submitted;
    uint64_t consumed;
    bool stop;
    bool threaded; /* a worker thread runs fn; else submit does */
    pthread_t thread;
};

static void reset(lmc_batch *b)
{
    b->buf.size = 0; /* the capacity is kept for the next batch */
    b->count = 0;
    b->flags = 0;
}

static void *worker_main(void *arg)
{
    lmc_batch_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->consumed == p->submitted && !p->stop)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->consumed == p->submitted)
            break; /* stopping, and nothing is left */
        lmc_batch *b = &p->slots[p->consumed % p->depth];
        pthread_mutex_unlock(&p->mu);
        p->fn(b, p->ud);
        reset(b);
        pthread_mutex_lock(&p->mu);
        p->consumed++;
        pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

lmc_status lmc_batch_pipe_create(size_t depth, const char *thread_name, lmc_batch_fn fn, void *ud,
                                 lmc_batch_pipe **out, lmc_error *err)
{
    *out = NULL;
    if (depth < 2 || fn == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "batch pipe: depth %zu < 2 or no function",
                             depth);
    lmc_batch_pipe *p = calloc(1, sizeof(*p));
    lmc_batch *slots = calloc(depth, sizeof(*slots));
    if (p == NULL || slots == NULL) {
        free(p);
        free(slots);
        return lmc_error_set(err, LMC_ERR_NOMEM, "batch pipe: out of memory");
    }
    p->fn = fn;
    p->ud = ud;
    p->depth = depth;
    p->slots = slots;
    for (size_t i = 0; i < depth; i++)
        msgpack_sbuffer_init(&slots[i].buf);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    int rc = pthread_create(&p->thread, NULL, worker_main, p);
    if (rc == 0) {
        p->threaded = true;
        pthread_setname_np(p->thread, thread_name);
    } else {
        /* Still correct, only without the overlap. */
        LMC_WARN("batch-pipe", "cannot start thread %s (%s); its work runs inline", thread_name,
                 strerror(rc));
    }
    *out = p;
    return LMC_OK;
}

lmc_batch *lmc_batch_pipe_current(lmc_batch_pipe *p)
{
    /* Only the producer changes `submitted`: no lock needed to read it. */
    return &p->slots[p->submitted % p->depth];
}

void lmc_batch_pipe_submit(lmc_batch_pipe *p)
{
    lmc_batch *b = lmc_batch_pipe_current(p);
    if (b->buf.size == 0 && b->count == 0)
        return;
    if (!p->threaded) {
        p->fn(b, p->ud);
        reset(b);
        pthread_mutex_lock(&p->mu);
        p->submitted++;
        p->consumed++;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->submitted++;
    pthread_cond_signal(&p->work);
    while (p->submitted - p->consumed >= p->depth)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void lmc_batch_pipe_wait(lmc_batch_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->consumed != p->submitted)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

uint64_t lmc_batch_pipe_consumed(lmc_batch_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->consumed;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void lmc_batch_pipe_destroy(lmc_batch_pipe *p)
{
    if (p == NULL)
        return;
    if (p->threaded) {
        pthread_mutex_lock(&p->mu);
        p->stop = true; /* the worker consumes what is left first */
        pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    for (size_t i = 0; i < p->depth; i++)
        msgpack_sbuffer_destroy(&p->slots[i].buf);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p->slots);
    free(p);
}
