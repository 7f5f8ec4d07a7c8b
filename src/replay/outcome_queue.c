/*
 * outcome_queue.c -- the in-order reorder buffer (see outcome_queue.h).
 *
 * Owns: a power-of-two ring of (view, outcome) entries. Entry i of the ring
 * holds record head_index + i, since records arrive with consecutive
 * indices; complete() finds its record by subtraction. The ring doubles
 * when full and is never shrunk: its size is the longest run of records
 * that ever waited behind one prefetch.
 *
 * Threads: one.
 */
#include "replay/outcome_queue.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    lmc_replay_record_view view;
    lmc_replay_outcome outcome;
    bool has_outcome;
} entry;

struct lmc_outcome_queue {
    entry *ring;
    size_t cap; /* 0 or a power of two */
    size_t head;
    size_t len;
    size_t open;
    uint64_t head_index; /* the index of the record at head (valid when len > 0) */
    lmc_outcome_emit emit;
    void *ud;
};

lmc_outcome_queue *lmc_outcome_queue_create(lmc_outcome_emit emit, void *ud)
{
    lmc_outcome_queue *q = calloc(1, sizeof(*q));
    if (q != NULL) {
        q->emit = emit;
        q->ud = ud;
    }
    return q;
}

void lmc_outcome_queue_destroy(lmc_outcome_queue *q)
{
    if (q == NULL)
        return;
    free(q->ring);
    free(q);
}

size_t lmc_outcome_queue_len(const lmc_outcome_queue *q)
{
    return q->len;
}

size_t lmc_outcome_queue_open(const lmc_outcome_queue *q)
{
    return q->open;
}

static entry *at(lmc_outcome_queue *q, size_t i)
{
    return &q->ring[(q->head + i) & (q->cap - 1)];
}

static bool is_open(const entry *e)
{
    return e->has_outcome && e->outcome.pending;
}

static void emit_entry(lmc_outcome_queue *q, entry *e)
{
    e->view.outcome = e->has_outcome ? &e->outcome : NULL;
    if (q->emit != NULL)
        q->emit(&e->view, q->ud);
}

/* Emit from the head while the head is final. */
static void drain(lmc_outcome_queue *q)
{
    while (q->len > 0) {
        entry *e = at(q, 0);
        if (is_open(e))
            return;
        emit_entry(q, e);
        q->head = (q->head + 1) & (q->cap - 1);
        q->len--;
        q->head_index++;
    }
}

static bool grow(lmc_outcome_queue *q)
{
    size_t cap = q->cap ? q->cap * 2 : 64;
    entry *ring = malloc(cap * sizeof(*ring));
    if (ring == NULL)
        return false;
    for (size_t i = 0; i < q->len; i++)
        ring[i] = *at(q, i);
    free(q->ring);
    q->ring = ring;
    q->cap = cap;
    q->head = 0;
    return true;
}

lmc_status lmc_outcome_queue_push(lmc_outcome_queue *q, const lmc_replay_record_view *rec,
                                  const lmc_replay_outcome *o)
{
    entry e = {.view = *rec, .has_outcome = o != NULL};
    if (o != NULL)
        e.outcome = *o;
    if (q->len == q->cap && !grow(q)) {
        emit_entry(q, &e);
        return LMC_ERR_NOMEM;
    }
    if (q->len == 0)
        q->head_index = rec->index;
    *at(q, q->len) = e;
    q->len++;
    q->open += is_open(&e);
    drain(q);
    return LMC_OK;
}

void lmc_outcome_queue_complete(lmc_outcome_queue *q, uint64_t index, const lmc_replay_outcome *o)
{
    if (q->len == 0 || index < q->head_index || index - q->head_index >= q->len)
        return;
    entry *e = at(q, (size_t)(index - q->head_index));
    if (!is_open(e))
        return;
    e->outcome = *o;
    e->outcome.pending = false;
    q->open--;
    drain(q);
}

void lmc_outcome_queue_close(lmc_outcome_queue *q)
{
    while (q->len > 0) {
        entry *e = at(q, 0);
        q->open -= is_open(e);
        emit_entry(q, e);
        q->head = (q->head + 1) & (q->cap - 1);
        q->len--;
        q->head_index++;
    }
}
