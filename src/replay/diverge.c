/*
 * diverge.c -- the first record two replays disagree on (see diverge.h).
 *
 * Owns: the two open JSONL files and one line buffer each while it
 * searches, and the divergence found (its strings and JSON values).
 *
 * Threads: none; reentrant.
 */
#include "replay/diverge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/digest.h"
#include "core/json_diff.h"
#include "trace/marker.h"
#include "trace/reader.h"

#define OUTCOME_KEY "\"outcome\": "
#define QUALNAME_KEY "\"qualname\": "
#define LATENCY_KEY ", \"latency_ms\""

typedef struct jsonl {
    const char *path;
    FILE *f;
    char *line;
    size_t cap;
    ssize_t len;
    uint64_t lineno;
} jsonl;

static lmc_status jsonl_open(jsonl *j, const char *path, lmc_error *err)
{
    memset(j, 0, sizeof(*j));
    j->path = path;
    j->f = fopen(path, "r");
    if (j->f == NULL) {
        int e = errno;
        return lmc_error_set(err, e == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                             "per-record outcomes '%s': cannot open: %s", path, strerror(e));
    }
    return LMC_OK;
}

/* The next non-empty line, its newline cut; false at the end (or on a read error: errno). */
static bool jsonl_next(jsonl *j)
{
    for (;;) {
        errno = 0;
        j->len = getline(&j->line, &j->cap, j->f);
        if (j->len < 0)
            return false;
        j->lineno++;
        while (j->len > 0 && (j->line[j->len - 1] == '\n' || j->line[j->len - 1] == '\r'))
            j->line[--j->len] = '\0';
        if (j->len > 0)
            return true;
    }
}

static void jsonl_close(jsonl *j)
{
    if (j->f != NULL)
        fclose(j->f);
    free(j->line);
}

/* The text of [from, to) of a line as a span; an empty span when a key is missing. */
typedef struct span {
    const char *p;
    size_t n;
} span;

static bool span_eq(span a, span b)
{
    return a.p != NULL && b.p != NULL && a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

/* The parts of a line the replay writes in a fixed form: index, qualname to n_keys, outcome. */
static void parts(const char *line, span *index, span *qual, span *outcome)
{
    const char *comma = strchr(line, ',');
    *index = comma ? (span){line, (size_t)(comma - line)} : (span){NULL, 0};
    const char *q = strstr(line, QUALNAME_KEY);
    const char *qe = q ? strstr(q, LATENCY_KEY) : NULL;
    *qual = qe ? (span){q, (size_t)(qe - q)} : (span){NULL, 0};
    const char *o = strstr(line, OUTCOME_KEY);
    *outcome = o ? (span){o, strlen(o)} : (span){NULL, 0};
}

static lmc_status parse_line(const jsonl *j, lmc_json **out, lmc_error *err)
{
    lmc_error perr;
    if (lmc_json_parse(j->line, (size_t)j->len, out, &perr) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_FORMAT, "per-record outcomes '%s' line %llu: %s", j->path,
                             (unsigned long long)j->lineno, perr.msg);
    if (lmc_json_type_of(*out) != LMC_JSON_OBJECT ||
        lmc_json_type_of(lmc_json_object_get(*out, "index")) != LMC_JSON_INT) {
        lmc_json_free(*out);
        *out = NULL;
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "per-record outcomes '%s' line %llu: not a record (an object with "
                             "an integer \"index\")",
                             j->path, (unsigned long long)j->lineno);
    }
    return LMC_OK;
}

static bool values_equal(const lmc_json *a, const lmc_json *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return lmc_json_diff(a, b, NULL, NULL) == 0;
}

/* Fill d from the divergent pair (ownership of the outcomes moves to d). */
static lmc_status take(lmc_divergence *d, lmc_json *ra, lmc_json *rb)
{
    d->found = true;
    d->index = (uint64_t)lmc_json_get_int(lmc_json_object_get(ra, "index"));
    d->t_mono = lmc_json_get_number(lmc_json_object_get(ra, "t_mono"));
    const char *q = lmc_json_get_string(lmc_json_object_get(ra, "qualname"), NULL);
    d->qualname = strdup(q != NULL ? q : "?");
    int64_t nk = lmc_json_get_int(lmc_json_object_get(ra, "n_keys"));
    d->n_keys = nk > 0 ? (uint64_t)nk : 0;
    const lmc_json *oa = lmc_json_object_get(ra, "outcome");
    const lmc_json *ob = lmc_json_object_get(rb, "outcome");
    d->base_outcome = oa != NULL ? lmc_json_copy(oa) : lmc_json_null();
    d->new_outcome = ob != NULL ? lmc_json_copy(ob) : lmc_json_null();
    if (d->qualname == NULL || d->base_outcome == NULL || d->new_outcome == NULL)
        return LMC_ERR_NOMEM;
    return LMC_OK;
}

lmc_status lmc_divergence_find(const char *base_jsonl, const char *new_jsonl, lmc_divergence *out,
                               lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    jsonl a, b;
    lmc_json *ra = NULL, *rb = NULL;
    bool saw_outcome = false;
    lmc_status st = jsonl_open(&a, base_jsonl, err);
    if (st != LMC_OK)
        return st;
    if ((st = jsonl_open(&b, new_jsonl, err)) != LMC_OK) {
        jsonl_close(&a);
        return st;
    }
    for (;;) {
        bool ha = jsonl_next(&a), hb = jsonl_next(&b);
        if ((!ha && ferror(a.f)) || (!hb && ferror(b.f))) {
            st = lmc_error_set(err, LMC_ERR_IO, "per-record outcomes '%s': cannot read: %s",
                               !ha && ferror(a.f) ? a.path : b.path, strerror(errno));
            goto out;
        }
        if (!ha || !hb) {
            out->base_ended = !ha && hb;
            out->new_ended = ha && !hb;
            break;
        }
        out->compared++;
        span ia, qa, oa, ib, qb, ob;
        parts(a.line, &ia, &qa, &oa);
        parts(b.line, &ib, &qb, &ob);
        if (span_eq(ia, ib) && span_eq(qa, qb) && span_eq(oa, ob)) {
            saw_outcome = true;
            continue; /* the replay's own form, byte for byte: the same record and outcome */
        }
        if ((st = parse_line(&a, &ra, err)) != LMC_OK || (st = parse_line(&b, &rb, err)) != LMC_OK)
            goto out;
        const lmc_json *oja = lmc_json_object_get(ra, "outcome");
        const lmc_json *ojb = lmc_json_object_get(rb, "outcome");
        saw_outcome = saw_outcome || oja != NULL || ojb != NULL;
        const char *qna = lmc_json_get_string(lmc_json_object_get(ra, "qualname"), NULL);
        const char *qnb = lmc_json_get_string(lmc_json_object_get(rb, "qualname"), NULL);
        bool same = lmc_json_get_int(lmc_json_object_get(ra, "index")) ==
                        lmc_json_get_int(lmc_json_object_get(rb, "index")) &&
                    (qna == NULL ? qnb == NULL : qnb != NULL && strcmp(qna, qnb) == 0) &&
                    values_equal(oja, ojb);
        if (!same) {
            if (take(out, ra, rb) != LMC_OK)
                st = lmc_error_set(err, LMC_ERR_NOMEM, "trace compare: out of memory");
            goto out;
        }
        lmc_json_free(ra);
        lmc_json_free(rb);
        ra = rb = NULL;
    }
    if (out->compared > 0 && !saw_outcome)
        st = lmc_error_set(err, LMC_ERR_FORMAT,
                           "per-record outcomes '%s' and '%s': no record has an \"outcome\" "
                           "(written by a replay without outcomes?): nothing to compare",
                           base_jsonl, new_jsonl);

out:
    lmc_json_free(ra);
    lmc_json_free(rb);
    jsonl_close(&a);
    jsonl_close(&b);
    if (st != LMC_OK)
        lmc_divergence_free(out);
    return st;
}

static lmc_json *key_json(const lmc_object_key *k)
{
    char hex[2 * sizeof(k->chunk_hash) + 1];
    lmc_hex_encode(k->chunk_hash, k->chunk_hash_len, hex);
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    ok = ok && lmc_json_object_set(o, "chunk_hash", lmc_json_string(hex)) == LMC_OK;
    ok = ok && lmc_json_object_set(o, "model_name", lmc_json_string(k->model_name)) == LMC_OK;
    ok = ok && lmc_json_object_set(o, "kv_rank", lmc_json_int(k->kv_rank)) == LMC_OK;
    ok =
        ok && lmc_json_object_set(o, "object_group_id", lmc_json_int(k->object_group_id)) == LMC_OK;
    ok = ok && lmc_json_object_set(o, "cache_salt",
                                   lmc_json_string(k->cache_salt ? k->cache_salt : "")) == LMC_OK;
    if (!ok) {
        lmc_json_free(o);
        return NULL;
    }
    return o;
}

lmc_status lmc_divergence_read_key(lmc_divergence *d, const char *trace_path, lmc_error *err)
{
    lmc_trace_reader *rd;
    lmc_status st = lmc_trace_reader_open(trace_path, &rd, err);
    if (st != LMC_OK)
        return st;
    lmc_trace_record rec;
    uint64_t n = 0;
    bool reached = false;
    while (!reached && lmc_trace_reader_next(rd, &rec) == LMC_OK) {
        /* Counted as the driver (and trace dump) count records: markers are none. */
        if (lmc_trace_marker_find(rec.qualname, rec.qualname_len) != NULL || ++n < d->index)
            continue;
        reached = true;
        if (strcmp(rec.qualname, d->qualname) != 0) {
            st = lmc_error_set(err, LMC_ERR_FORMAT,
                               "trace file '%s': record %llu is %s, not the replay's %s",
                               trace_path, (unsigned long long)n, rec.qualname, d->qualname);
            break;
        }
        const lmc_trace_arg *keys = lmc_trace_args_find(rec.args, rec.nargs, "keys");
        if (keys != NULL && keys->value.kind == LMC_TV_LIST && keys->value.u.list.n > 0 &&
            keys->value.u.list.items[0].kind == LMC_TV_OBJECT_KEY) {
            d->first_key = key_json(keys->value.u.list.items[0].u.key);
            if (d->first_key == NULL)
                st = lmc_error_set(err, LMC_ERR_NOMEM, "trace compare: out of memory");
        }
    }
    if (!reached)
        st = lmc_error_set(err, LMC_ERR_FORMAT, "trace file '%s' holds %llu records, not %llu",
                           trace_path, (unsigned long long)n, (unsigned long long)d->index);
    lmc_trace_reader_close(rd);
    return st;
}

void lmc_divergence_free(lmc_divergence *d)
{
    free(d->qualname);
    lmc_json_free(d->base_outcome);
    lmc_json_free(d->new_outcome);
    lmc_json_free(d->first_key);
    memset(d, 0, sizeof(*d));
}
