/*
 * sweep_output.c -- a sweep's figures, table, CSV, progress line and
 * result JSON (see sweep_output.h).
 *
 * The columns live in one list (COLUMNS); the terminal table, the CSV and
 * the HTML report's table are all built from it by lmc_sweep_table_build,
 * so a new column is one row there and one case in cell().
 *
 * Owns nothing past a call. Threads: none.
 */
#include "replay/sweep_output.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/output.h"
#include "core/escape.h"
#include "core/json_diff.h"
#include "core/strbuf.h"
#include "replay/report.h"

#define OP_PREFIX "lmcache.v1.distributed.storage_manager.StorageManager."
#define CELL 96

static double num_at(const lmc_json *r, const char *path)
{
    const lmc_json *v = lmc_json_at_path(r, path);
    lmc_json_type t = lmc_json_type_of(v);
    return v != NULL && (t == LMC_JSON_INT || t == LMC_JSON_FLOAT) ? lmc_json_get_number(v) : NAN;
}

static uint64_t count_at(const lmc_json *r, const char *path)
{
    double v = num_at(r, path);
    return isfinite(v) && v > 0 ? (uint64_t)v : 0;
}

/* The p50 of an op, by its qualname (ops keys hold dots, so no path lookup). */
static double p50_of(const lmc_json *r, const char *qualname)
{
    const lmc_json *op = lmc_json_object_get(lmc_json_object_get(r, "ops"), qualname);
    const lmc_json *v = lmc_json_object_get(op, "p50_ms");
    return v != NULL ? lmc_json_get_number(v) : NAN;
}

void lmc_sweep_figures_of(const lmc_json *r, lmc_sweep_figures *f)
{
    const char *mode = lmc_json_get_string(lmc_json_object_get(r, "mode"), NULL);
    bool engine = mode != NULL && strcmp(mode, "engine") == 0;
    f->hit_rate =
        num_at(r, engine ? "outcomes.figures.engine_hit_rate" : "outcomes.figures.chunk_hit_rate");
    f->l1_hit_rate = num_at(r, "outcomes.figures.l1_hit_rate");
    f->l2_hit_rate = num_at(r, "outcomes.figures.l2_hit_rate");
    f->evicted_keys = count_at(r, "outcomes.l1.evicted_keys");
    f->l2_stored_bytes = count_at(r, "outcomes.l2.stored_bytes");
    f->l2_loaded_bytes = count_at(r, "outcomes.l2.loaded_bytes");
    f->refused_keys = count_at(r, engine ? "outcomes.figures.engine_refused_keys"
                                         : "outcomes.figures.refused_keys");
    /* The main ops of each mode: a request's lookup, its store and its read. */
    f->lookup_p50_ms = p50_of(r, OP_PREFIX "submit_prefetch_task");
    f->store_p50_ms = p50_of(r, engine ? "engine.store" : OP_PREFIX "reserve_write");
    f->read_p50_ms =
        p50_of(r, engine ? "engine.retrieve" : OP_PREFIX "read_prefetched_results.__enter__");
    const char *d = lmc_json_get_string(lmc_json_object_get(r, "outcome_digest"), NULL);
    f->digest = d != NULL ? d : "";
}

/* ---- the columns --------------------------------------------------------- */

typedef enum col_id {
    C_HIT,
    C_L1,
    C_L2,
    C_EVICTED,
    C_L2_STORED,
    C_L2_LOADED,
    C_REFUSED,
    C_LOOKUP,
    C_STORE,
    C_READ,
    C_WALL,
    C_DIGEST,
} col_id;

static const struct column {
    col_id id;
    const char *head; /* the table's */
    const char *csv;  /* the CSV's */
} COLUMNS[] = {
    {C_HIT, "hit rate", "hit_rate"},
    {C_L1, "L1", "l1_hit_rate"},
    {C_L2, "L2", "l2_hit_rate"},
    {C_EVICTED, "L1 evicted", "l1_evicted_keys"},
    {C_L2_STORED, "L2 stored", "l2_stored_bytes"},
    {C_L2_LOADED, "L2 loaded", "l2_loaded_bytes"},
    {C_REFUSED, "refused", "refused_stores"},
    {C_LOOKUP, "lookup p50", "lookup_p50_ms"},
    {C_STORE, "store p50", "store_p50_ms"},
    {C_READ, "read p50", "read_p50_ms"},
    {C_WALL, "wall", "wall_s"},
    {C_DIGEST, "outcome digest", "outcome_digest"},
};
#define N_COLUMNS (sizeof(COLUMNS) / sizeof(COLUMNS[0]))

static void fmt_rate(double v, bool csv, char *buf)
{
    if (!isfinite(v))
        snprintf(buf, CELL, "%s", csv ? "" : "-");
    else
        snprintf(buf, CELL, csv ? "%.6f" : "%.2f%%", csv ? v : 100 * v);
}

static void fmt_ms(double v, bool csv, char *buf)
{
    if (!isfinite(v))
        snprintf(buf, CELL, "%s", csv ? "" : "-");
    else
        snprintf(buf, CELL, csv ? "%.6f" : "%.3f ms", v);
}

static void fmt_u64(uint64_t v, bool csv, bool bytes, char *buf)
{
    if (csv)
        snprintf(buf, CELL, "%" PRIu64, v);
    else if (bytes)
        lmc_analyze_fmt_bytes(v, buf, CELL);
    else
        lmc_analyze_fmt_count(v, buf, CELL);
}

static void cell(col_id id, const lmc_sweep_figures *f, const lmc_sweep_job *j, bool csv, char *buf)
{
    switch (id) {
    case C_HIT:
        return fmt_rate(f->hit_rate, csv, buf);
    case C_L1:
        return fmt_rate(f->l1_hit_rate, csv, buf);
    case C_L2:
        return fmt_rate(f->l2_hit_rate, csv, buf);
    case C_EVICTED:
        return fmt_u64(f->evicted_keys, csv, false, buf);
    case C_L2_STORED:
        return fmt_u64(f->l2_stored_bytes, csv, true, buf);
    case C_L2_LOADED:
        return fmt_u64(f->l2_loaded_bytes, csv, true, buf);
    case C_REFUSED:
        return fmt_u64(f->refused_keys, csv, false, buf);
    case C_LOOKUP:
        return fmt_ms(f->lookup_p50_ms, csv, buf);
    case C_STORE:
        return fmt_ms(f->store_p50_ms, csv, buf);
    case C_READ:
        return fmt_ms(f->read_p50_ms, csv, buf);
    case C_WALL:
        snprintf(buf, CELL, csv ? "%.3f" : "%.2f s", j->wall_s);
        return;
    case C_DIGEST:
        snprintf(buf, CELL, "%.*s", csv ? 64 : 16, f->digest);
        return;
    }
}

/* ---- the order ----------------------------------------------------------- */

typedef struct sort_key {
    size_t index;
    bool ok;
    double hit;
} sort_key;

static int cmp_key(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    if (x->ok != y->ok)
        return x->ok ? -1 : 1;
    if (x->ok && x->hit != y->hit)
        return x->hit > y->hit ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Successful configurations by hit rate (highest first), then the failed; not-run ones left out. */
static size_t table_order(const lmc_sweep *s, size_t *order)
{
    sort_key *k = calloc(s->n + 1, sizeof(*k));
    if (k == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const lmc_sweep_job *j = &s->jobs[i];
        if (j->state == LMC_SWEEP_JOB_NOT_RUN)
            continue;
        lmc_sweep_figures f;
        bool ok = j->state == LMC_SWEEP_JOB_DONE;
        if (ok)
            lmc_sweep_figures_of(j->result, &f);
        k[n++] =
            (sort_key){.index = i, .ok = ok, .hit = ok && isfinite(f.hit_rate) ? f.hit_rate : -1};
    }
    qsort(k, n, sizeof(*k), cmp_key);
    for (size_t r = 0; r < n; r++)
        order[r] = k[r].index;
    free(k);
    return n;
}

/* ---- the table ----------------------------------------------------------- */

void lmc_sweep_table_free(lmc_sweep_table *t)
{
    for (size_t c = 0; c < t->n_cols; c++)
        free(t->columns[c]);
    for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
        free(t->cells[i]);
    free(t->columns);
    free(t->cells);
    free(t->numeric);
    free(t->order);
    memset(t, 0, sizeof(*t));
}

lmc_status lmc_sweep_table_build(const lmc_sweep *s, bool csv, lmc_sweep_table *t)
{
    memset(t, 0, sizeof(*t));
    const lmc_sweep_grid *g = s->grid;
    /* The axes shown: the varying ones in the table, every one in the CSV. */
    size_t *axes = calloc(g->n_axes + 1, sizeof(*axes));
    size_t n_axes = 0;
    for (size_t a = 0; axes != NULL && a < g->n_axes; a++)
        if (csv || g->axes[a].n > 1)
            axes[n_axes++] = a;
    size_t lead = csv ? 2 : 0; /* index, status */
    t->n_cols = lead + n_axes + N_COLUMNS;
    t->order = calloc(s->n + 1, sizeof(*t->order));
    t->columns = calloc(t->n_cols, sizeof(*t->columns));
    t->numeric = calloc(t->n_cols, sizeof(*t->numeric));
    if (axes == NULL || t->order == NULL || t->columns == NULL || t->numeric == NULL)
        goto nomem;
    t->n_rows = table_order(s, t->order);
    t->cells = calloc(t->n_rows * t->n_cols + 1, sizeof(*t->cells));
    if (t->cells == NULL)
        goto nomem;
    size_t c = 0;
    if (csv) {
        t->columns[c++] = strdup("index");
        t->columns[c++] = strdup("status");
    }
    for (size_t a = 0; a < n_axes; a++)
        t->columns[c++] = strdup(g->axes[axes[a]].flag + 2);
    for (size_t k = 0; k < N_COLUMNS; k++) {
        t->numeric[c] = COLUMNS[k].id != C_DIGEST;
        t->columns[c++] = strdup(csv ? COLUMNS[k].csv : COLUMNS[k].head);
    }
    for (size_t r = 0; r < t->n_rows; r++) {
        size_t i = t->order[r];
        const lmc_sweep_job *j = &s->jobs[i];
        bool ok = j->state == LMC_SWEEP_JOB_DONE;
        lmc_sweep_figures f;
        if (ok)
            lmc_sweep_figures_of(j->result, &f);
        char **row = &t->cells[r * t->n_cols];
        char buf[CELL];
        c = 0;
        if (csv) {
            snprintf(buf, sizeof(buf), "%zu", i);
            row[c++] = strdup(buf);
            row[c++] = strdup(ok ? "ok" : "failed");
        }
        for (size_t a = 0; a < n_axes; a++) {
            /* The CSV keeps the value as given (an L2 choice's JSON); the table shows it short. */
            const lmc_sweep_axis *ax = &g->axes[axes[a]];
            size_t v = lmc_sweep_grid_value_index(g, i, axes[a]);
            char shown[512];
            lmc_sweep_axis_shown(ax, v, shown, sizeof(shown));
            row[c++] = strdup(csv ? ax->values[v] : shown);
        }
        for (size_t k = 0; k < N_COLUMNS; k++) {
            if (ok)
                cell(COLUMNS[k].id, &f, j, csv, buf);
            else
                snprintf(buf, sizeof(buf), "%s", k == 0 ? "FAILED" : (csv ? "" : "-"));
            row[c++] = strdup(buf);
        }
    }
    for (size_t k = 0; k < t->n_cols; k++)
        if (t->columns[k] == NULL)
            goto nomem;
    for (size_t k = 0; k < t->n_rows * t->n_cols; k++)
        if (t->cells[k] == NULL)
            goto nomem;
    free(axes);
    return LMC_OK;

nomem:
    free(axes);
    lmc_sweep_table_free(t);
    return LMC_ERR_NOMEM;
}

/* A CSV field: quoted when it holds a comma, a quote or a line end (an L2 choice's JSON). */
static void csv_field(lmc_strbuf *b, const char *v)
{
    if (strpbrk(v, ",\"\r\n") == NULL) {
        lmc_strbuf_puts(b, v);
        return;
    }
    lmc_strbuf_puts(b, "\"");
    for (const char *p = v; *p; p++) {
        if (*p == '"')
            lmc_strbuf_puts(b, "\"");
        lmc_strbuf_append(b, p, 1);
    }
    lmc_strbuf_puts(b, "\"");
}

char *lmc_sweep_format_csv(const lmc_sweep *s)
{
    lmc_sweep_table t;
    if (lmc_sweep_table_build(s, true, &t) != LMC_OK)
        return NULL;
    lmc_strbuf b = LMC_STRBUF_INIT;
    for (size_t c = 0; c < t.n_cols; c++) {
        lmc_strbuf_puts(&b, c ? "," : "");
        csv_field(&b, t.columns[c]);
    }
    lmc_strbuf_puts(&b, "\n");
    for (size_t r = 0; r < t.n_rows; r++) {
        for (size_t c = 0; c < t.n_cols; c++) {
            lmc_strbuf_puts(&b, c ? "," : "");
            csv_field(&b, t.cells[r * t.n_cols + c]);
        }
        lmc_strbuf_puts(&b, "\n");
    }
    lmc_sweep_table_free(&t);
    return lmc_strbuf_finish(&b);
}

/* Text from the command line or a trace, made safe for a terminal. */
static void put_escaped(lmc_strbuf *b, const char *s)
{
    lmc_escape_append(b, s, strlen(s), 0);
}

/*
 * The eviction policies swept, when they gave the same outcome digest at
 * every other setting (at least one pair compared, every configuration
 * done): a table whose policy rows all read alike looks like a flag that
 * does nothing, so say why. NULL otherwise; the axis's values joined by
 * ", " (malloc'd). *evicted: whether any of them evicted a key (if none
 * did, the policy never had to choose).
 */
static char *policies_that_tie(const lmc_sweep *s, bool *evicted)
{
    *evicted = false;
    const lmc_sweep_grid *g = s->grid;
    size_t pa = g->n_axes;
    for (size_t a = 0; a < g->n_axes; a++)
        if (strcmp(g->axes[a].flag, "--eviction-policy") == 0 && g->axes[a].n > 1)
            pa = a;
    if (pa == g->n_axes)
        return NULL;
    size_t pairs = 0;
    for (size_t i = 0; i < s->n; i++) {
        for (size_t j = i + 1; j < s->n; j++) {
            bool same_rest = true;
            for (size_t a = 0; a < g->n_axes && same_rest; a++)
                same_rest = a == pa || lmc_sweep_grid_value_index(g, i, a) ==
                                           lmc_sweep_grid_value_index(g, j, a);
            if (!same_rest)
                continue;
            if (s->jobs[i].state != LMC_SWEEP_JOB_DONE || s->jobs[j].state != LMC_SWEEP_JOB_DONE)
                return NULL;
            lmc_sweep_figures fi, fj;
            lmc_sweep_figures_of(s->jobs[i].result, &fi);
            lmc_sweep_figures_of(s->jobs[j].result, &fj);
            if (fi.digest[0] == '\0' || strcmp(fi.digest, fj.digest) != 0)
                return NULL;
            *evicted = *evicted || fi.evicted_keys > 0 || fj.evicted_keys > 0;
            pairs++;
        }
    }
    if (pairs == 0)
        return NULL;
    lmc_strbuf b = LMC_STRBUF_INIT;
    for (size_t v = 0; v < g->axes[pa].n; v++)
        lmc_strbuf_printf(&b, "%s%s", v > 0 ? ", " : "", g->axes[pa].values[v]);
    return lmc_strbuf_finish(&b);
}

char *lmc_sweep_format_table(const lmc_sweep *s)
{
    lmc_sweep_table t;
    if (lmc_sweep_table_build(s, false, &t) != LMC_OK)
        return NULL;
    lmc_strbuf b = LMC_STRBUF_INIT;
    size_t ok = 0, failed = 0, not_run = 0;
    for (size_t i = 0; i < s->n; i++) {
        ok += s->jobs[i].state == LMC_SWEEP_JOB_DONE;
        failed += s->jobs[i].state == LMC_SWEEP_JOB_FAILED;
        not_run += s->jobs[i].state == LMC_SWEEP_JOB_NOT_RUN;
    }
    lmc_strbuf_puts(&b, "Trace sweep: ");
    put_escaped(&b, s->trace_path);
    lmc_strbuf_printf(&b, "\n  %zu configuration%s: %zu done, %zu failed", s->n,
                      s->n == 1 ? "" : "s", ok, failed);
    if (not_run > 0)
        lmc_strbuf_printf(&b, ", %zu not run (interrupted)", not_run);
    lmc_strbuf_printf(&b, "; mode %s, pace %s, time scale %g; %.2f s with --jobs %zu\n", s->mode,
                      s->pace, s->time_scale, s->wall_s, s->parallel);
    /* What every configuration shares. */
    lmc_strbuf fixed = LMC_STRBUF_INIT;
    for (size_t a = 0; a < s->grid->n_axes; a++)
        if (s->grid->axes[a].n == 1)
            lmc_strbuf_printf(&fixed, " %s %s", s->grid->axes[a].flag, s->grid->axes[a].values[0]);
    for (size_t k = 0; k < s->grid->n_fixed; k++)
        lmc_strbuf_printf(&fixed, " %s", s->grid->fixed[k]);
    char *fx = lmc_strbuf_finish(&fixed);
    if (fx != NULL && fx[0] != '\0') {
        lmc_strbuf_puts(&b, "  every configuration:");
        put_escaped(&b, fx);
        lmc_strbuf_puts(&b, "\n");
    }
    free(fx);
    lmc_strbuf_puts(&b, "\n");

    size_t *w = calloc(t.n_cols + 1, sizeof(*w));
    if (w == NULL) {
        lmc_sweep_table_free(&t);
        free(lmc_strbuf_finish(&b));
        return NULL;
    }
    for (size_t c = 0; c < t.n_cols; c++) {
        w[c] = strlen(t.columns[c]);
        for (size_t r = 0; r < t.n_rows; r++) {
            size_t l = strlen(t.cells[r * t.n_cols + c]);
            w[c] = l > w[c] ? l : w[c];
        }
    }
    for (size_t r = 0; r <= t.n_rows; r++) {
        char **row = r == 0 ? t.columns : &t.cells[(r - 1) * t.n_cols];
        lmc_strbuf_puts(&b, " ");
        for (size_t c = 0; c < t.n_cols; c++) {
            char *e = lmc_escape_dup(row[c], strlen(row[c]), 0);
            const char *v = e != NULL ? e : "?";
            int pad = (int)w[c] - (int)strlen(v);
            lmc_strbuf_printf(&b, " %*s%s%*s", t.numeric[c] ? (pad > 0 ? pad : 0) : 0, "", v,
                              t.numeric[c] ? 0 : (pad > 0 ? pad : 0), "");
            free(e);
        }
        while (b.len > 0 && b.p != NULL && b.p[b.len - 1] == ' ')
            b.p[--b.len] = '\0';
        lmc_strbuf_puts(&b, "\n");
    }
    free(w);
    lmc_sweep_table_free(&t);

    if (failed > 0) {
        lmc_strbuf_puts(&b, "\nFailed:\n");
        for (size_t i = 0; i < s->n; i++) {
            const lmc_sweep_job *j = &s->jobs[i];
            if (j->state != LMC_SWEEP_JOB_FAILED)
                continue;
            char *label = lmc_sweep_grid_label(s->grid, i, NULL, LMC_SWEEP_ONLY_CONFIG);
            lmc_strbuf_printf(&b, "  [%zu] ", i);
            put_escaped(&b, label != NULL ? label : "?");
            lmc_strbuf_printf(&b, ": %s\n", j->error != NULL ? j->error : "failed");
            free(label);
            if (j->stderr_tail != NULL && j->stderr_tail[0] != '\0') {
                /* Each line of the tail indented; the replay's own messages. */
                const char *p = j->stderr_tail;
                while (*p) {
                    size_t n = strcspn(p, "\n");
                    lmc_strbuf_puts(&b, "      | ");
                    lmc_escape_append(&b, p, n, 0);
                    lmc_strbuf_puts(&b, "\n");
                    p += n + (p[n] == '\n');
                }
            }
        }
    }
    bool evicted = false;
    char *tie = policies_that_tie(s, &evicted);
    if (tie != NULL) {
        /* Built whole, then wrapped: the policies' list has no fixed length. */
        lmc_strbuf nb = LMC_STRBUF_INIT;
        lmc_strbuf_puts(&nb, "every eviction policy swept (");
        put_escaped(&nb, tie);
        lmc_strbuf_puts(&nb, ") gave the same outcome at every other setting. ");
        lmc_strbuf_puts(
            &nb, !evicted ? "No configuration evicted a key (no eviction pass ran with L1 past its "
                            "watermark), so the policy never had to choose."
                 : strcmp(s->mode, "engine") == 0
                     ? "In mode engine that is LMCache's request logic: each session ends by "
                       "touching every key it looked up, the ones it stored included "
                       "(end_session's touch_l1_keys), so every policy evicts in the order LRU "
                       "does. The L1 size and the eviction watermark and ratio are what change "
                       "the outcome here."
                     : "In mode calls the policies see only the recorded StorageManager calls, "
                       "and they part only where keys are read or written again after an "
                       "eviction; this trace has too little of that to tell them apart.");
        char *text = lmc_strbuf_finish(&nb);
        if (text == NULL)
            b.oom = true;
        else {
            lmc_strbuf_puts(&b, "\n");
            lmc_replay_note_append(&b, text);
        }
        free(text);
        free(tie);
    }
    lmc_strbuf_puts(&b, "\nhit rate: ");
    lmc_strbuf_puts(&b, strcmp(s->mode, "engine") == 0
                            ? "engine_hit_rate (found prefixes read / keys looked up)"
                            : "chunk_hit_rate (keys found / keys looked up)");
    lmc_strbuf_puts(&b, "; L1, L2: keys found in L1 at the lookup, loaded from L2; refused: "
                        "stores refused; digests: the outcome digest's first 16 hex digits\n");
    return lmc_strbuf_finish(&b);
}

char *lmc_sweep_progress_line(const lmc_sweep *s, size_t index, size_t done)
{
    const lmc_sweep_job *j = &s->jobs[index];
    char *label = lmc_sweep_grid_label(s->grid, index, NULL, LMC_SWEEP_ONLY_CONFIG);
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_printf(&b, "[%zu/%zu] ", done, s->n);
    put_escaped(&b, label != NULL ? label : "?");
    free(label);
    if (j->state == LMC_SWEEP_JOB_DONE) {
        lmc_sweep_figures f;
        lmc_sweep_figures_of(j->result, &f);
        lmc_strbuf_printf(&b, ": hit %.1f%% (L1 %.1f%%, L2 %.1f%%), %.2f s, digest %.16s",
                          100 * f.hit_rate, 100 * f.l1_hit_rate, 100 * f.l2_hit_rate, j->wall_s,
                          f.digest);
    } else {
        lmc_strbuf_printf(&b, ": FAILED: %s, %.2f s", j->error != NULL ? j->error : "?", j->wall_s);
        const char *tail = j->stderr_tail != NULL ? j->stderr_tail : "";
        const char *last = strrchr(tail, '\n');
        if (tail[0] != '\0') {
            lmc_strbuf_puts(&b, "; stderr: ");
            put_escaped(&b, last != NULL ? last + 1 : tail);
        }
    }
    return lmc_strbuf_finish(&b);
}

/* ---- the JSON ------------------------------------------------------------ */

static lmc_json *words_json(const lmc_sweep_words *w)
{
    lmc_json *a = lmc_json_array();
    for (size_t k = 0; a != NULL && k < w->n; k++)
        if (lmc_json_array_append(a, lmc_json_string(w->v[k])) != LMC_OK) {
            lmc_json_free(a);
            return NULL;
        }
    return a;
}

static lmc_json *str_or_null(const char *s)
{
    return s != NULL ? lmc_json_string(s) : lmc_json_null();
}

static const char *state_name(lmc_sweep_job_state st)
{
    switch (st) {
    case LMC_SWEEP_JOB_DONE:
        return "done";
    case LMC_SWEEP_JOB_FAILED:
        return "failed";
    case LMC_SWEEP_JOB_RUNNING:
        return "running";
    case LMC_SWEEP_JOB_NOT_RUN:
        break;
    }
    return "not_run";
}

/* The trace as the results name it (the first one that does). */
static const lmc_json *first_result(const lmc_sweep *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->jobs[i].state == LMC_SWEEP_JOB_DONE)
            return s->jobs[i].result;
    return NULL;
}

lmc_json *lmc_sweep_result_json(const lmc_sweep *s)
{
    lmc_json *o = lmc_json_object();
    lmc_status st = lmc_json_object_set(o, "schema", lmc_json_string(LMC_SWEEP_RESULT_SCHEMA));
    st |= lmc_json_object_set(o, "schema_version", lmc_json_int(LMC_SWEEP_RESULT_SCHEMA_VERSION));
    lmc_json *tool = lmc_json_object();
    st |= lmc_json_object_set(tool, "name", lmc_json_string("lmcache"));
    st |= lmc_json_object_set(tool, "version", lmc_json_string(LMC_VERSION));
    st |= lmc_json_object_set(o, "tool", tool);
    st |= lmc_json_object_set(o, "status",
                              lmc_json_string(s->interrupted ? "interrupted" : "complete"));
    st |= lmc_json_object_set(o, "command", str_or_null(s->command));
    st |= lmc_json_object_set(o, "duration_s", lmc_json_float(s->wall_s));

    const lmc_json *first = first_result(s);
    lmc_json *trace = lmc_json_object();
    st |= lmc_json_object_set(trace, "path", lmc_json_string(s->trace_path));
    const lmc_json *d = lmc_json_at_path(first, "trace.digest");
    st |= lmc_json_object_set(trace, "digest", d != NULL ? lmc_json_copy(d) : lmc_json_null());
    const lmc_json *rec = lmc_json_at_path(first, "trace.records.reported");
    st |= lmc_json_object_set(trace, "records", rec != NULL ? lmc_json_copy(rec) : lmc_json_null());
    const lmc_json *span = lmc_json_at_path(first, "trace.span_s");
    st |=
        lmc_json_object_set(trace, "span_s", span != NULL ? lmc_json_copy(span) : lmc_json_null());
    st |= lmc_json_object_set(o, "trace", trace);

    const lmc_sweep_grid *g = s->grid;
    lmc_json *grid = lmc_json_object();
    st |= lmc_json_object_set(grid, "order",
                              lmc_json_string("axes in command-line order, the last varying "
                                              "fastest"));
    lmc_json *axes = lmc_json_array();
    for (size_t a = 0; a < g->n_axes; a++) {
        lmc_json *ax = lmc_json_object();
        st |= lmc_json_object_set(ax, "flag", lmc_json_string(g->axes[a].flag));
        lmc_sweep_words vw = {.v = g->axes[a].values, .n = g->axes[a].n};
        st |= lmc_json_object_set(ax, "values", words_json(&vw));
        st |= lmc_json_array_append(axes, ax);
    }
    st |= lmc_json_object_set(grid, "axes", axes);
    lmc_sweep_words fw = {.v = g->fixed, .n = g->n_fixed};
    st |= lmc_json_object_set(grid, "fixed", words_json(&fw));
    st |= lmc_json_object_set(grid, "mode", lmc_json_string(s->mode));
    st |= lmc_json_object_set(grid, "pace", lmc_json_string(s->pace));
    st |= lmc_json_object_set(grid, "time_scale", lmc_json_float(s->time_scale));
    st |= lmc_json_object_set(grid, "jobs", lmc_json_int((int64_t)s->parallel));

    lmc_json *configs = lmc_json_array();
    lmc_json *results = lmc_json_array();
    lmc_json *failed = lmc_json_array();
    int64_t n_results = 0, not_run = 0;
    for (size_t i = 0; i < s->n; i++) {
        const lmc_sweep_job *j = &s->jobs[i];
        lmc_sweep_words w;
        if (lmc_sweep_grid_words(g, i, &w) != LMC_OK) {
            st |= LMC_ERR_NOMEM;
            break;
        }
        char *label = lmc_sweep_grid_label(g, i, NULL, LMC_SWEEP_ONLY_CONFIG);
        lmc_json *c = lmc_json_object();
        st |= lmc_json_object_set(c, "index", lmc_json_int((int64_t)i));
        st |= lmc_json_object_set(c, "label", label != NULL ? lmc_json_string(label) : NULL);
        st |= lmc_json_object_set(c, "flags", words_json(&w));
        st |= lmc_json_object_set(c, "state", lmc_json_string(state_name(j->state)));
        st |= lmc_json_object_set(c, "result",
                                  j->state == LMC_SWEEP_JOB_DONE ? lmc_json_int(n_results)
                                                                 : lmc_json_null());
        st |= lmc_json_array_append(configs, c);
        if (j->state == LMC_SWEEP_JOB_DONE) {
            st |= lmc_json_array_append(results, lmc_json_copy(j->result));
            n_results++;
        } else if (j->state == LMC_SWEEP_JOB_FAILED) {
            lmc_json *f = lmc_json_object();
            st |= lmc_json_object_set(f, "index", lmc_json_int((int64_t)i));
            st |= lmc_json_object_set(f, "label", label != NULL ? lmc_json_string(label) : NULL);
            st |= lmc_json_object_set(f, "flags", words_json(&w));
            st |= lmc_json_object_set(f, "error", str_or_null(j->error));
            st |= lmc_json_object_set(f, "exit_status",
                                      j->exit_status >= 0 ? lmc_json_int(j->exit_status)
                                                          : lmc_json_null());
            st |= lmc_json_object_set(f, "signal",
                                      j->signal != 0 ? lmc_json_int(j->signal) : lmc_json_null());
            st |= lmc_json_object_set(f, "interrupted", lmc_json_bool(j->interrupted));
            st |= lmc_json_object_set(f, "wall_s", lmc_json_float(j->wall_s));
            st |= lmc_json_object_set(f, "stderr_tail", str_or_null(j->stderr_tail));
            st |= lmc_json_array_append(failed, f);
        } else {
            not_run++;
        }
        free(label);
        lmc_sweep_words_free(&w);
    }
    st |= lmc_json_object_set(grid, "configurations", configs);
    st |= lmc_json_object_set(o, "grid", grid);
    st |= lmc_json_object_set(o, "results", results);
    st |= lmc_json_object_set(o, "failed", failed);
    st |= lmc_json_object_set(o, "not_run", lmc_json_int(not_run));
    if (st != LMC_OK) {
        lmc_json_free(o);
        return NULL;
    }
    return o;
}

char *lmc_sweep_format_json(const lmc_sweep *s)
{
    lmc_json *o = lmc_sweep_result_json(s);
    if (o == NULL)
        return NULL;
    char *text = lmc_json_dumps_line(o, 0, 2);
    lmc_json_free(o);
    return text;
}
