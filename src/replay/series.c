/*
 * series.c -- a replay's figures over time (see series.h).
 *
 * Owns the time buckets and the largest time seen (the span the reported
 * width is chosen for). A bucket folds into another by adding its counts
 * and sums and keeping the larger maximum and capacity.
 *
 * Threads: none.
 */
#include "replay/series.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tbuckets.h"

struct lmc_replay_series {
    lmc_tbuckets b; /* of lmc_replay_series_bucket */
    double span_s;  /* the largest finite t_mono seen */
};

static void merge(void *into, const void *from)
{
    lmc_replay_series_bucket *o = into;
    const lmc_replay_series_bucket *b = from;
    o->records += b->records;
    o->lookups += b->lookups;
    o->looked_up_keys += b->looked_up_keys;
    o->l1_hit_keys += b->l1_hit_keys;
    o->l2_hit_keys += b->l2_hit_keys;
    o->engine_hit_keys += b->engine_hit_keys;
    o->recorded_read_keys += b->recorded_read_keys;
    o->timed += b->timed;
    o->lateness_sum_s += b->lateness_sum_s;
    o->lateness_max_s = fmax(o->lateness_max_s, b->lateness_max_s);
    o->l1_samples += b->l1_samples;
    o->l1_used_sum_bytes += b->l1_used_sum_bytes;
    if (b->l1_used_max_bytes > o->l1_used_max_bytes)
        o->l1_used_max_bytes = b->l1_used_max_bytes;
    if (b->l1_capacity_bytes > o->l1_capacity_bytes)
        o->l1_capacity_bytes = b->l1_capacity_bytes;
}

lmc_replay_series *lmc_replay_series_create(void)
{
    lmc_replay_series *s = calloc(1, sizeof(*s));
    if (s != NULL)
        lmc_tbuckets_init(&s->b, sizeof(lmc_replay_series_bucket), merge);
    return s;
}

void lmc_replay_series_destroy(lmc_replay_series *s)
{
    if (s == NULL)
        return;
    lmc_tbuckets_free(&s->b);
    free(s);
}

static lmc_replay_series_bucket *at(lmc_replay_series *s, double t)
{
    if (isfinite(t) && t > s->span_s)
        s->span_s = t;
    return lmc_tbuckets_at(&s->b, t);
}

lmc_status lmc_replay_series_record(lmc_replay_series *s, const lmc_replay_record_view *rec)
{
    lmc_replay_series_bucket *b = at(s, rec->t_mono);
    if (b == NULL)
        return LMC_ERR_NOMEM;
    b->records++;
    if (rec->lateness_s >= 0) {
        b->timed++;
        b->lateness_sum_s += rec->lateness_s;
        b->lateness_max_s = fmax(b->lateness_max_s, rec->lateness_s);
    }
    const lmc_replay_outcome *o = rec->outcome;
    if (o == NULL)
        return LMC_OK;
    /* As the totals count them (lmc_replay_figures_of), one bucket at a time. */
    if (o->op == LMC_TRACE_OP_READ_ENTER)
        b->recorded_read_keys += o->n_keys;
    if (o->op != LMC_TRACE_OP_SUBMIT_PREFETCH || o->not_reissued)
        return LMC_OK;
    b->lookups++;
    b->looked_up_keys += o->n_keys;
    b->l1_hit_keys += o->v[LMC_OC_SUBMIT_PREFETCH_l1_hits];
    b->l2_hit_keys += o->v[LMC_OC_SUBMIT_PREFETCH_l2_hits];
    b->engine_hit_keys += o->v[LMC_OC_SUBMIT_PREFETCH_hit_keys];
    return LMC_OK;
}

lmc_status lmc_replay_series_l1_usage(lmc_replay_series *s, double t_mono, uint64_t used,
                                      uint64_t capacity)
{
    lmc_replay_series_bucket *b = at(s, t_mono);
    if (b == NULL)
        return LMC_ERR_NOMEM;
    b->l1_samples++;
    b->l1_used_sum_bytes += (double)used;
    if (used > b->l1_used_max_bytes)
        b->l1_used_max_bytes = used;
    if (capacity > b->l1_capacity_bytes)
        b->l1_capacity_bytes = capacity;
    return LMC_OK;
}

lmc_status lmc_replay_series_get(const lmc_replay_series *s, lmc_replay_series_result *out)
{
    memset(out, 0, sizeof(*out));
    void *v;
    lmc_status st = lmc_tbuckets_result(&s->b, s->span_s, &out->bucket_s, &v, &out->n_buckets);
    out->buckets = v;
    return st;
}

void lmc_replay_series_result_free(lmc_replay_series_result *r)
{
    free(r->buckets);
    memset(r, 0, sizeof(*r));
}
