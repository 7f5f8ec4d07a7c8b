/*
 * compare_side.c -- the result files trace compare reads (see compare.h):
 * a replay result, or one configuration of a sweep result chosen by a
 * selector, checked against the result schema this build reads.
 *
 * Owns: a loaded file's path, its JSON tree (the chosen result points into
 * it) and, while loading, the file's text. The file is read whole and
 * parsed through core/json (jansson underneath).
 *
 * Threads: none.
 */
#include "replay/compare.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json_diff.h"
#include "core/strbuf.h"
#include "replay/outcome.h"

/* Result files are a few MiB at most; this only stops a wrong file from filling memory. */
#define MAX_FILE_BYTES (1u << 30)

static lmc_status read_file(const char *path, char **text, size_t *len, lmc_error *err)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        int e = errno;
        return lmc_error_set(err, e == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                             "'%s': cannot open: %s", path, strerror(e));
    }
    lmc_strbuf b = LMC_STRBUF_INIT;
    char chunk[65536];
    size_t n;
    lmc_status st = LMC_OK;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b.len + n > MAX_FILE_BYTES) {
            st = lmc_error_set(err, LMC_ERR_FORMAT, "'%s': larger than %u MiB: not a result", path,
                               MAX_FILE_BYTES >> 20);
            break;
        }
        lmc_strbuf_append(&b, chunk, n);
    }
    if (st == LMC_OK && ferror(f))
        st = lmc_error_set(err, LMC_ERR_IO, "'%s': cannot read: %s", path, strerror(errno));
    fclose(f);
    *len = b.len;
    char *s = lmc_strbuf_finish(&b);
    if (st == LMC_OK && s == NULL)
        st = lmc_error_set(err, LMC_ERR_NOMEM, "'%s': out of memory", path);
    if (st != LMC_OK) {
        free(s);
        return st;
    }
    *text = s;
    return LMC_OK;
}

/* Is v a replay result this build reads? LMC_OK, or an error naming where (label). */
static lmc_status check_result(const lmc_json *v, const char *label, lmc_error *err)
{
    const char *schema = lmc_json_get_string(lmc_json_object_get(v, "schema"), NULL);
    if (lmc_json_type_of(v) != LMC_JSON_OBJECT || schema == NULL ||
        strcmp(schema, LMC_REPLAY_RESULT_SCHEMA) != 0)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "%s: not a replay result (no \"schema\": \"" LMC_REPLAY_RESULT_SCHEMA
                             "\"; write one with trace replay --format json or --json)",
                             label);
    const lmc_json *ver = lmc_json_object_get(v, "schema_version");
    if (lmc_json_type_of(ver) != LMC_JSON_INT)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: schema_version is not an integer", label);
    if (lmc_json_get_int(ver) > LMC_REPLAY_RESULT_SCHEMA_VERSION)
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "%s: schema_version %lld is newer than this build reads (%d)", label,
                             (long long)lmc_json_get_int(ver), LMC_REPLAY_RESULT_SCHEMA_VERSION);
    return LMC_OK;
}

/* Does the leaf v equal the selector's text value? */
static bool leaf_equals(const lmc_json *v, const char *text)
{
    switch (lmc_json_type_of(v)) {
    case LMC_JSON_STRING:
        return strcmp(lmc_json_get_string(v, NULL), text) == 0;
    case LMC_JSON_INT:
    case LMC_JSON_FLOAT: {
        char *end;
        double d = strtod(text, &end);
        return end != text && *end == '\0' && d == lmc_json_get_number(v);
    }
    case LMC_JSON_BOOL:
        return strcmp(text, lmc_json_get_bool(v) ? "true" : "false") == 0;
    case LMC_JSON_NULL:
        return strcmp(text, "null") == 0;
    case LMC_JSON_ARRAY:
    case LMC_JSON_OBJECT:
        break;
    }
    return false;
}

/*
 * The leaves under v whose path (prefix + keys joined by '.') ends in
 * ".field". Leaves that hold the same value count once: the config holds
 * some fields twice (eviction_config.eviction_policy and its copy in
 * l1_manager_config.eviction), and a selector naming one names both.
 */
typedef struct suffix_search {
    const char *field;
    size_t hits;
    const lmc_json *leaf;
} suffix_search;

static void find_suffix(const lmc_json *v, lmc_strbuf *path, suffix_search *s)
{
    if (lmc_json_type_of(v) != LMC_JSON_OBJECT) {
        size_t fl = strlen(s->field);
        if (path->p != NULL && path->len > fl && path->p[path->len - fl - 1] == '.' &&
            strcmp(path->p + path->len - fl, s->field) == 0 &&
            (s->leaf == NULL || lmc_json_diff(s->leaf, v, NULL, NULL) != 0)) {
            s->hits++;
            s->leaf = v;
        }
        return;
    }
    for (size_t i = 0; i < lmc_json_size(v); i++) {
        size_t old = path->len;
        lmc_strbuf_append(path, ".", 1);
        lmc_strbuf_puts(path, lmc_json_object_key_at(v, i));
        find_suffix(lmc_json_object_value_at(v, i), path, s);
        path->len = old;
        if (path->p != NULL)
            path->p[old] = '\0';
    }
}

/*
 * The leaf a selector's FIELD names in result r: its path in r, else in
 * r's config.json, else the one leaf of config.json whose path ends in
 * ".FIELD" ("eviction_policy" for eviction_config.eviction_policy).
 */
static const lmc_json *selector_leaf(const lmc_json *r, const char *field)
{
    const lmc_json *leaf = lmc_json_at_path(r, field);
    const lmc_json *config = lmc_json_at_path(r, "config.json");
    if (leaf == NULL && config != NULL)
        leaf = lmc_json_at_path(config, field);
    if (leaf != NULL || config == NULL)
        return leaf;
    suffix_search s = {.field = field};
    lmc_strbuf path = LMC_STRBUF_INIT;
    find_suffix(config, &path, &s);
    free(lmc_strbuf_finish(&path));
    return s.hits == 1 ? s.leaf : NULL;
}

/* The conditions "P=V,P=V" all hold for result r. -1 when memory runs out. */
static int conditions_hold(const lmc_json *r, const char *conditions)
{
    char *scratch = strdup(conditions);
    if (scratch == NULL)
        return -1;
    bool ok = true;
    for (char *save = NULL, *c = strtok_r(scratch, ",", &save); c != NULL && ok;
         c = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(c, '=');
        *eq = '\0';
        const lmc_json *leaf = selector_leaf(r, c);
        ok = leaf != NULL && leaf_equals(leaf, eq + 1);
    }
    free(scratch);
    return ok;
}

/* Every ','-separated part is PATH=VALUE with a non-empty PATH. */
static bool conditions_valid(const char *sel)
{
    const char *p = sel;
    for (;;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (eq == NULL || eq == p)
            return false;
        if (p[n] == '\0')
            return true;
        p += n + 1;
    }
}

static lmc_status select_result(lmc_cmp_side *s, const lmc_json *results, const char *select,
                                lmc_error *err)
{
    size_t n = lmc_json_size(results);
    s->n_results = n;
    if (n == 0)
        return lmc_error_set(err, LMC_ERR_FORMAT, "'%s': a sweep result with no results", s->path);
    if (select == NULL) {
        if (n > 1)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "'%s' is a sweep result of %zu configurations: choose one with "
                                 "--config N (0..%zu) or --config FIELD=VALUE",
                                 s->path, n, n - 1);
        s->index = 0;
        return LMC_OK;
    }
    char *end;
    errno = 0;
    unsigned long long idx = strtoull(select, &end, 10);
    if (select[0] >= '0' && select[0] <= '9' && *end == '\0') {
        if (errno != 0 || idx >= n)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "'%s' holds %zu results (0..%zu); '%s' is none of them", s->path,
                                 n, n - 1, select);
        s->index = (long long)idx;
        return LMC_OK;
    }
    if (!conditions_valid(select))
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "selector '%s': expected an index N or FIELD=VALUE[,FIELD=VALUE...]",
                             select);
    size_t matches = 0;
    char which[128] = "";
    size_t wl = 0;
    for (size_t i = 0; i < n; i++) {
        int holds = conditions_hold(lmc_json_array_at(results, i), select);
        if (holds < 0)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        if (!holds)
            continue;
        if (matches++ == 0)
            s->index = (long long)i;
        if (wl < sizeof(which) - 16)
            wl += (size_t)snprintf(which + wl, sizeof(which) - wl, "%s%zu", wl ? ", " : "", i);
    }
    if (matches == 1)
        return LMC_OK;
    if (matches == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "'%s': '%s' matches none of its %zu results",
                             s->path, select, n);
    return lmc_error_set(err, LMC_ERR_INVALID,
                         "'%s': '%s' matches %zu of its results (%s): add a condition, "
                         "FIELD=VALUE,FIELD=VALUE",
                         s->path, select, matches, which);
}

lmc_status lmc_cmp_side_parse(const char *path, const char *text, size_t len, const char *select,
                              bool strict, lmc_cmp_side *out, lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    out->index = -1;
    lmc_status st;
    lmc_error perr;
    out->path = strdup(path);
    if (out->path == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (lmc_json_parse(text, len, &out->doc, &perr) != LMC_OK) {
        st = lmc_error_set(err, LMC_ERR_FORMAT, "'%s': not valid JSON: %s", path, perr.msg);
        goto fail;
    }
    const lmc_json *results = lmc_json_object_get(out->doc, "results");
    if (lmc_json_type_of(results) == LMC_JSON_ARRAY) {
        if ((st = select_result(out, results, select, err)) != LMC_OK)
            goto fail;
        out->result = lmc_json_array_at(results, (size_t)out->index);
    } else {
        if (select != NULL && strict) {
            st = lmc_error_set(err, LMC_ERR_INVALID,
                               "'%s' is a replay result, not a sweep: '%s' chooses nothing in it",
                               path, select);
            goto fail;
        }
        out->result = out->doc;
    }
    char label[300];
    lmc_cmp_side_label(out, label, sizeof(label));
    if ((st = check_result(out->result, label, err)) != LMC_OK)
        goto fail;
    return LMC_OK;

fail:
    lmc_cmp_side_free(out);
    return st;
}

lmc_status lmc_cmp_side_load(const char *path, const char *select, bool strict, lmc_cmp_side *out,
                             lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    out->index = -1;
    char *text = NULL;
    size_t len = 0;
    lmc_status st = read_file(path, &text, &len, err);
    if (st == LMC_OK)
        st = lmc_cmp_side_parse(path, text, len, select, strict, out, err);
    free(text);
    return st;
}

void lmc_cmp_side_free(lmc_cmp_side *s)
{
    free(s->path);
    lmc_json_free(s->doc);
    memset(s, 0, sizeof(*s));
    s->index = -1;
}

void lmc_cmp_side_label(const lmc_cmp_side *s, char *buf, size_t len)
{
    if (s->index >= 0)
        snprintf(buf, len, "'%s'[%lld]", s->path, s->index);
    else
        snprintf(buf, len, "'%s'", s->path);
}

char *lmc_cmp_side_resolve(const lmc_cmp_side *s, const char *p)
{
    if (p[0] == '/' || access(p, F_OK) == 0)
        return strdup(p);
    const char *slash = strrchr(s->path, '/');
    if (slash == NULL)
        return strdup(p);
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_append(&b, s->path, (size_t)(slash - s->path) + 1);
    lmc_strbuf_puts(&b, p);
    char *beside = lmc_strbuf_finish(&b);
    if (beside != NULL && access(beside, F_OK) != 0) {
        free(beside);
        return strdup(p);
    }
    return beside;
}

const char *lmc_cmp_side_string(const lmc_cmp_side *s, const char *path)
{
    return lmc_json_get_string(lmc_json_at_path(s->result, path), NULL);
}
