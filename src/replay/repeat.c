/*
 * repeat.c -- the spread of figures over --repeat runs (see repeat.h).
 *
 * Owns: one row per figure path (the path's keys joined by US, 0x1f, a
 * byte no JSON key of ours holds, so qualnames with dots stay one key),
 * with one value per run (NaN where a run lacked it), and the digests.
 * Runs are few, so rows are found by a linear scan.
 *
 * Threads: none.
 */
#include "replay/repeat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/samples.h"
#include "core/strbuf.h"
#include "replay/result_json.h"

#define SEP '\x1f'

typedef struct row {
    char *path; /* keys joined by SEP */
    double *v;  /* one per run slot */
} row;

struct lmc_replay_repeat {
    row *rows;
    size_t n_rows, cap_rows;
    char **digests;
    size_t runs, cap_runs;
};

lmc_replay_repeat *lmc_replay_repeat_create(void)
{
    return calloc(1, sizeof(lmc_replay_repeat));
}

void lmc_replay_repeat_destroy(lmc_replay_repeat *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_rows; i++) {
        free(r->rows[i].path);
        free(r->rows[i].v);
    }
    free(r->rows);
    for (size_t i = 0; i < r->runs; i++)
        free(r->digests[i]);
    free(r->digests);
    free(r);
}

size_t lmc_replay_repeat_runs(const lmc_replay_repeat *r)
{
    return r->runs;
}

const char *lmc_replay_repeat_digest(const lmc_replay_repeat *r, size_t i)
{
    return i < r->runs && r->digests[i] ? r->digests[i] : "";
}

bool lmc_replay_repeat_digests_equal(const lmc_replay_repeat *r)
{
    for (size_t i = 1; i < r->runs; i++) {
        if (strcmp(lmc_replay_repeat_digest(r, i), lmc_replay_repeat_digest(r, 0)) != 0)
            return false;
    }
    return true;
}

static row *find_row(const lmc_replay_repeat *r, const char *path)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        if (strcmp(r->rows[i].path, path) == 0)
            return &r->rows[i];
    }
    return NULL;
}

/* Grow every row's values to cap run slots (new slots NaN). */
static bool grow_runs(lmc_replay_repeat *r, size_t cap)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        double *v = realloc(r->rows[i].v, cap * sizeof(*v));
        if (v == NULL)
            return false;
        for (size_t k = r->cap_runs; k < cap; k++)
            v[k] = NAN;
        r->rows[i].v = v;
    }
    char **d = realloc(r->digests, cap * sizeof(*d));
    if (d == NULL)
        return false;
    r->digests = d;
    r->cap_runs = cap;
    return true;
}

static row *add_row(lmc_replay_repeat *r, const char *path)
{
    if (r->n_rows == r->cap_rows) {
        size_t cap = r->cap_rows ? r->cap_rows * 2 : 64;
        row *nr = realloc(r->rows, cap * sizeof(*nr));
        if (nr == NULL)
            return NULL;
        r->rows = nr;
        r->cap_rows = cap;
    }
    row *w = &r->rows[r->n_rows];
    w->path = strdup(path);
    w->v = malloc(r->cap_runs * sizeof(*w->v));
    if (w->path == NULL || w->v == NULL) {
        free(w->path);
        free(w->v);
        return NULL;
    }
    for (size_t k = 0; k < r->cap_runs; k++)
        w->v[k] = NAN;
    r->n_rows++;
    return w;
}

/* One figure of one run: its row (keys joined by SEP), created as needed, gets the value. */
typedef struct add_ctx {
    lmc_replay_repeat *r;
    size_t run;
} add_ctx;

static bool add_figure(const char *const *keys, size_t depth, const lmc_json *v, void *ud)
{
    add_ctx *c = ud;
    char buf[1024];
    size_t len = 0;
    for (size_t i = 0; i < depth; i++) {
        size_t kl = strlen(keys[i]);
        if (len + 1 + kl + 1 > sizeof(buf))
            return true; /* a path this long is no figure of ours */
        if (i > 0)
            buf[len++] = SEP;
        memcpy(buf + len, keys[i], kl + 1);
        len += kl;
    }
    row *w = find_row(c->r, buf);
    if (w == NULL && (w = add_row(c->r, buf)) == NULL)
        return false;
    w->v[c->run] = lmc_json_get_number(v);
    return true;
}

lmc_status lmc_replay_repeat_add(lmc_replay_repeat *r, const lmc_replay_summary *run)
{
    lmc_replay_summary one = *run;
    one.repeat = NULL;
    lmc_json *j = lmc_replay_result_json(&one);
    if (j == NULL)
        return LMC_ERR_NOMEM;
    lmc_status st = LMC_OK;
    if (r->runs == r->cap_runs && !grow_runs(r, r->cap_runs ? r->cap_runs * 2 : 4))
        st = LMC_ERR_NOMEM;
    add_ctx c = {r, r->runs};
    if (st == LMC_OK && !lmc_replay_result_each_figure(j, add_figure, &c))
        st = LMC_ERR_NOMEM;
    if (st == LMC_OK) {
        r->digests[r->runs] = strdup(run->outcome_digest ? run->outcome_digest : "");
        if (r->digests[r->runs] == NULL)
            st = LMC_ERR_NOMEM;
        else
            r->runs++;
    }
    if (st != LMC_OK && r->runs < r->cap_runs) {
        /* Drop the partial run's values: its slot is reused by the next run. */
        for (size_t i = 0; i < r->n_rows; i++)
            r->rows[i].v[r->runs] = NAN;
    }
    lmc_json_free(j);
    return st;
}

static bool spread_of(const lmc_replay_repeat *r, const row *w, lmc_spread *out)
{
    double vals[64];
    double *v = r->runs <= 64 ? vals : malloc(r->runs * sizeof(*v));
    if (v == NULL)
        return false;
    size_t n = 0;
    for (size_t k = 0; k < r->runs; k++) {
        if (!isnan(w->v[k]))
            v[n++] = w->v[k];
    }
    if (n > 0) {
        lmc_sort_doubles(v, n);
        out->min = v[0];
        out->max = v[n - 1];
        out->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
        out->n = n;
    }
    if (v != vals)
        free(v);
    return n > 0;
}

bool lmc_replay_repeat_spread(const lmc_replay_repeat *r, const char *const *path, size_t depth,
                              lmc_spread *out)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    for (size_t i = 0; i < depth; i++) {
        if (i > 0)
            lmc_strbuf_append(&b, (const char[]){SEP}, 1);
        lmc_strbuf_puts(&b, path[i]);
    }
    char *key = lmc_strbuf_finish(&b);
    const row *w = key != NULL ? find_row(r, key) : NULL;
    free(key);
    return w != NULL && spread_of(r, w, out);
}

/* The object at the path's parent keys under root, created as needed; *leaf gets the last key. */
static lmc_json *parent_of(lmc_json *root, char *path, const char **leaf)
{
    lmc_json *at = root;
    char *p = path;
    for (char *sep; (sep = strchr(p, SEP)) != NULL; p = sep + 1) {
        *sep = '\0';
        lmc_json *next = lmc_json_object_get(at, p);
        if (next == NULL) {
            next = lmc_json_object();
            if (lmc_json_object_set(at, p, next) != LMC_OK)
                return NULL;
        }
        at = next;
    }
    *leaf = p;
    return at;
}

lmc_json *lmc_replay_repeat_json(const lmc_replay_repeat *r)
{
    lmc_json *o = lmc_json_object();
    lmc_json *digests = lmc_json_array();
    lmc_json *figures = lmc_json_object();
    bool ok = o != NULL && digests != NULL && figures != NULL;
    for (size_t i = 0; ok && i < r->runs; i++)
        ok = lmc_json_array_append(digests, lmc_json_string(lmc_replay_repeat_digest(r, i))) ==
             LMC_OK;
    for (size_t i = 0; ok && i < r->n_rows; i++) {
        lmc_spread sp;
        if (!spread_of(r, &r->rows[i], &sp))
            continue;
        char *path = strdup(r->rows[i].path);
        const char *leaf = NULL;
        lmc_json *parent = path ? parent_of(figures, path, &leaf) : NULL;
        lmc_json *v = lmc_json_object();
        ok = parent != NULL && v != NULL;
        ok = ok && lmc_json_object_set(v, "median", lmc_json_float(sp.median)) == LMC_OK;
        ok = ok && lmc_json_object_set(v, "min", lmc_json_float(sp.min)) == LMC_OK;
        ok = ok && lmc_json_object_set(v, "max", lmc_json_float(sp.max)) == LMC_OK;
        if (ok)
            ok = lmc_json_object_set(parent, leaf, v) == LMC_OK;
        else
            lmc_json_free(v);
        free(path);
    }
    if (ok) {
        ok = lmc_json_object_set(o, "runs", lmc_json_int((int64_t)r->runs)) == LMC_OK &&
             lmc_json_object_set(o, "outcome_digests", digests) == LMC_OK;
        digests = NULL;
        ok = ok && lmc_json_object_set(o, "digests_equal",
                                       lmc_json_bool(lmc_replay_repeat_digests_equal(r))) == LMC_OK;
        ok = ok && lmc_json_object_set(o, "figures", figures) == LMC_OK;
        figures = NULL;
    }
    lmc_json_free(digests);
    lmc_json_free(figures);
    if (!ok) {
        lmc_json_free(o);
        return NULL;
    }
    return o;
}
