/*
 * json_diff.c -- the paths where two JSON values differ (see json_diff.h).
 *
 * Owns nothing past a call: the path is built in a fixed buffer on the
 * stack, extended on the way down and cut back on the way up. A path longer
 * than the buffer is reported cut short (configs are shallow; a name that
 * long is still recognisable).
 *
 * Threads: none; reentrant.
 */
#include "core/json_diff.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 512

typedef struct walk {
    char path[PATH_MAX_LEN];
    size_t len;
    lmc_json_diff_values_cb cb;
    void *ud;
    size_t count;
} walk;

static void report(walk *w, const lmc_json *a, const lmc_json *b)
{
    w->count++;
    if (w->cb != NULL)
        w->cb(w->path, a, b, w->ud);
}

/* Record how much snprintf wrote (clamped to the buffer, as it truncates). */
static size_t advance(walk *w, size_t old, size_t room, int n)
{
    w->len = n < 0 ? old : ((size_t)n < room ? old + (size_t)n : sizeof(w->path) - 1);
    return old;
}

/* Append ".key" (or "key" at the top); returns the old length, to cut back to. */
static size_t push_key(walk *w, const char *key)
{
    size_t room = sizeof(w->path) - w->len;
    return advance(w, w->len, room,
                   snprintf(w->path + w->len, room, "%s%s", w->len > 0 ? "." : "", key));
}

/* Append "[index]"; returns the old length. */
static size_t push_index(walk *w, size_t index)
{
    size_t room = sizeof(w->path) - w->len;
    return advance(w, w->len, room, snprintf(w->path + w->len, room, "[%zu]", index));
}

static void pop(walk *w, size_t old)
{
    w->len = old;
    w->path[old] = '\0';
}

static bool scalar_equal(const lmc_json *a, const lmc_json *b)
{
    switch (lmc_json_type_of(a)) {
    case LMC_JSON_NULL:
        return true;
    case LMC_JSON_BOOL:
        return lmc_json_get_bool(a) == lmc_json_get_bool(b);
    case LMC_JSON_INT:
        return lmc_json_get_int(a) == lmc_json_get_int(b);
    case LMC_JSON_FLOAT:
        return lmc_json_get_number(a) == lmc_json_get_number(b);
    case LMC_JSON_STRING: {
        size_t la = 0, lb = 0;
        const char *sa = lmc_json_get_string(a, &la);
        const char *sb = lmc_json_get_string(b, &lb);
        return la == lb && memcmp(sa, sb, la) == 0;
    }
    case LMC_JSON_ARRAY:
    case LMC_JSON_OBJECT:
        break;
    }
    return false;
}

static void diff(walk *w, const lmc_json *a, const lmc_json *b)
{
    lmc_json_type t = lmc_json_type_of(a);
    if (t != lmc_json_type_of(b)) {
        report(w, a, b);
        return;
    }
    if (t == LMC_JSON_OBJECT) {
        for (size_t i = 0; i < lmc_json_size(a); i++) {
            const char *k = lmc_json_object_key_at(a, i);
            const lmc_json *vb = lmc_json_object_get(b, k);
            size_t old = push_key(w, k);
            if (vb == NULL)
                report(w, lmc_json_object_value_at(a, i), NULL);
            else
                diff(w, lmc_json_object_value_at(a, i), vb);
            pop(w, old);
        }
        for (size_t i = 0; i < lmc_json_size(b); i++) {
            const char *k = lmc_json_object_key_at(b, i);
            if (lmc_json_object_get(a, k) != NULL)
                continue;
            size_t old = push_key(w, k);
            report(w, NULL, lmc_json_object_value_at(b, i));
            pop(w, old);
        }
        return;
    }
    if (t == LMC_JSON_ARRAY) {
        size_t na = lmc_json_size(a), nb = lmc_json_size(b);
        for (size_t i = 0; i < na || i < nb; i++) {
            size_t old = push_index(w, i);
            if (i < na && i < nb)
                diff(w, lmc_json_array_at(a, i), lmc_json_array_at(b, i));
            else
                report(w, i < na ? lmc_json_array_at(a, i) : NULL,
                       i < nb ? lmc_json_array_at(b, i) : NULL);
            pop(w, old);
        }
        return;
    }
    if (!scalar_equal(a, b))
        report(w, a, b);
}

size_t lmc_json_diff_values(const lmc_json *a, const lmc_json *b, lmc_json_diff_values_cb cb,
                            void *ud)
{
    walk w = {.cb = cb, .ud = ud};
    diff(&w, a, b);
    return w.count;
}

/* lmc_json_diff's path-only callback, behind the values walk. */
typedef struct path_only {
    lmc_json_diff_cb cb;
    void *ud;
} path_only;

static void drop_values(const char *path, const lmc_json *a, const lmc_json *b, void *ud)
{
    (void)a;
    (void)b;
    const path_only *p = ud;
    p->cb(path, p->ud);
}

size_t lmc_json_diff(const lmc_json *a, const lmc_json *b, lmc_json_diff_cb cb, void *ud)
{
    path_only p = {cb, ud};
    return lmc_json_diff_values(a, b, cb != NULL ? drop_values : NULL, &p);
}

const lmc_json *lmc_json_at_path(const lmc_json *v, const char *path)
{
    const char *p = path;
    while (v != NULL && *p != '\0') {
        if (*p == '[') {
            char *end;
            errno = 0;
            unsigned long long i = strtoull(p + 1, &end, 10);
            if (end == p + 1 || *end != ']' || errno != 0 || p[1] == '-' || p[1] == '+' ||
                lmc_json_type_of(v) != LMC_JSON_ARRAY || i >= lmc_json_size(v))
                return NULL;
            v = lmc_json_array_at(v, (size_t)i);
            p = end + 1;
            continue;
        }
        if (p != path) {
            if (*p != '.')
                return NULL;
            p++;
        }
        size_t n = strcspn(p, ".[");
        if (n == 0 || lmc_json_type_of(v) != LMC_JSON_OBJECT)
            return NULL;
        const lmc_json *next = NULL;
        for (size_t i = 0; i < lmc_json_size(v) && next == NULL; i++) {
            const char *k = lmc_json_object_key_at(v, i);
            if (strlen(k) == n && memcmp(k, p, n) == 0)
                next = lmc_json_object_value_at(v, i);
        }
        v = next;
        p += n;
    }
    return v;
}
