/*
 * sweep.c -- the grid of `trace sweep` (see sweep.h): its flags split
 * into axes, the configurations enumerated, each one's flags and config.
 *
 * Which words are StorageManager flags, and whether one takes a value, is
 * asked of storage/config's flag table, so a new flag there is a new axis
 * here with no change. Values are kept as text and handed to the same
 * parser `trace replay` uses, so a sweep validates exactly what its
 * replays will.
 *
 * Owns: the grid's strings. Threads: none.
 */
#include "replay/sweep.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/strbuf.h"
#include "storage/config.h"

void lmc_sweep_grid_init(lmc_sweep_grid *g)
{
    memset(g, 0, sizeof(*g));
}

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void lmc_sweep_grid_free(lmc_sweep_grid *g)
{
    for (size_t a = 0; a < g->n_axes; a++) {
        free(g->axes[a].flag);
        free_strings(g->axes[a].values, g->axes[a].n);
    }
    free(g->axes);
    free_strings(g->fixed, g->n_fixed);
    memset(g, 0, sizeof(*g));
}

/* Append a copy of s to *v (n entries). */
static lmc_status push(char ***v, size_t *n, const char *s, size_t len)
{
    char **grown = realloc(*v, (*n + 1) * sizeof(*grown));
    if (grown == NULL)
        return LMC_ERR_NOMEM;
    *v = grown;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return LMC_ERR_NOMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    grown[(*n)++] = copy;
    return LMC_OK;
}

static lmc_sweep_axis *find_axis(lmc_sweep_grid *g, const char *flag)
{
    for (size_t a = 0; a < g->n_axes; a++)
        if (strcmp(g->axes[a].flag, flag) == 0)
            return &g->axes[a];
    return NULL;
}

static lmc_sweep_axis *add_axis(lmc_sweep_grid *g, const char *flag)
{
    lmc_sweep_axis *grown = realloc(g->axes, (g->n_axes + 1) * sizeof(*grown));
    if (grown == NULL)
        return NULL;
    g->axes = grown;
    lmc_sweep_axis *ax = &g->axes[g->n_axes];
    memset(ax, 0, sizeof(*ax));
    if ((ax->flag = strdup(flag)) == NULL)
        return NULL;
    g->n_axes++;
    return ax;
}

/* "a,b,c" into ax's values; an empty item is an error naming the flag and the list. */
static lmc_status split_list(lmc_sweep_axis *ax, const char *text, lmc_error *err)
{
    const char *p = text;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "%s: '%s' has an empty item (a list is VALUE,VALUE,...)", ax->flag,
                                 text);
        for (size_t k = 0; k < ax->n; k++)
            if (strlen(ax->values[k]) == n && strncmp(ax->values[k], p, n) == 0)
                return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%.*s' is listed twice in '%s'",
                                     ax->flag, (int)n, p, text);
        if (push(&ax->values, &ax->n, p, n) != LMC_OK)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        if (p[n] == '\0')
            return LMC_OK;
        p += n + 1;
    }
}

/* An L2 choice: "none", an object, or an array of objects (each checked later, by the parser). */
static lmc_status check_choice(const char *text, lmc_error *err)
{
    if (strcmp(text, "none") == 0)
        return LMC_OK;
    lmc_json *v = NULL;
    lmc_error perr;
    if (lmc_json_parse(text, strlen(text), &v, &perr) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not \"none\" or JSON: %s",
                             LMC_SWEEP_L2_CHOICE_FLAG, text, perr.msg);
    bool ok = lmc_json_type_of(v) == LMC_JSON_OBJECT;
    if (lmc_json_type_of(v) == LMC_JSON_ARRAY) {
        ok = lmc_json_size(v) > 0;
        for (size_t i = 0; i < lmc_json_size(v); i++)
            ok = ok && lmc_json_type_of(lmc_json_array_at(v, i)) == LMC_JSON_OBJECT;
    }
    lmc_json_free(v);
    if (!ok)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: '%s' is not \"none\", an adapter object {\"type\": ...} or a "
                             "non-empty array of them",
                             LMC_SWEEP_L2_CHOICE_FLAG, text);
    return LMC_OK;
}

lmc_status lmc_sweep_grid_parse_arg(lmc_sweep_grid *g, int argc, char **argv, int *i,
                                    bool *consumed, lmc_error *err)
{
    *consumed = false;
    const char *arg = argv[*i];
    if (strncmp(arg, "--", 2) != 0)
        return LMC_OK;
    const char *eq = strchr(arg, '=');
    size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
    lmc_sm_flag_info f;
    bool choice =
        len == strlen(LMC_SWEEP_L2_CHOICE_FLAG) && strncmp(arg, LMC_SWEEP_L2_CHOICE_FLAG, len) == 0;
    if (choice) {
        f = (lmc_sm_flag_info){.name = LMC_SWEEP_L2_CHOICE_FLAG,
                               .takes_value = true,
                               .accumulates = true,
                               .value_is_json = true};
    } else if (!lmc_sm_config_flag_find(arg, len, &f)) {
        return LMC_OK;
    }
    *consumed = true;

    if (!f.takes_value) {
        if (eq != NULL)
            return lmc_error_set(err, LMC_ERR_INVALID, "%s takes no value (got '%s')", f.name,
                                 eq + 1);
        (*i)++;
        if (push(&g->fixed, &g->n_fixed, arg, strlen(arg)) != LMC_OK)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        return LMC_OK;
    }
    const char *value;
    int used = 1;
    if (eq != NULL) {
        value = eq + 1;
    } else if (*i + 1 < argc && !lmc_sm_config_looks_like_option(argv[*i + 1])) {
        value = argv[*i + 1];
        used = 2;
    } else {
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: a value is required", f.name);
    }
    *i += used;

    if (choice) {
        lmc_status st = check_choice(value, err);
        if (st != LMC_OK)
            return st;
        lmc_sweep_axis *ax = find_axis(g, f.name);
        if (ax == NULL && (ax = add_axis(g, f.name)) == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < ax->n; k++)
            if (strcmp(ax->values[k], value) == 0)
                return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is given twice", f.name,
                                     value);
        if (push(&ax->values, &ax->n, value, strlen(value)) != LMC_OK)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        return LMC_OK;
    }
    if (f.accumulates) {
        /* --l2-adapter: JSON with commas in it, never a list; every configuration gets it. */
        if (push(&g->fixed, &g->n_fixed, f.name, strlen(f.name)) != LMC_OK ||
            push(&g->fixed, &g->n_fixed, value, strlen(value)) != LMC_OK)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        return LMC_OK;
    }
    if (find_axis(g, f.name) != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s is given twice: give its values once, as a list (%s A,B,C)",
                             f.name, f.name);
    lmc_sweep_axis *ax = add_axis(g, f.name);
    if (ax == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    return split_list(ax, value, err);
}

lmc_status lmc_sweep_grid_count(const lmc_sweep_grid *g, size_t max, size_t *n, lmc_error *err)
{
    size_t total = 1;
    bool over = false;
    for (size_t a = 0; a < g->n_axes; a++) {
        size_t k = g->axes[a].n;
        if (total > SIZE_MAX / k || total * k > max)
            over = true;
        else
            total *= k;
    }
    if (over) {
        lmc_strbuf b = LMC_STRBUF_INIT;
        for (size_t a = 0; a < g->n_axes; a++)
            if (g->axes[a].n > 1)
                lmc_strbuf_printf(&b, "%s%zu (%s)", b.len ? " x " : "", g->axes[a].n,
                                  g->axes[a].flag);
        char *what = lmc_strbuf_finish(&b);
        lmc_error_set(err, LMC_ERR_INVALID,
                      "the grid %s has more than %zu configurations: raise --max-configs to "
                      "run it",
                      what != NULL ? what : "", max);
        free(what);
        return LMC_ERR_INVALID;
    }
    *n = total;
    return LMC_OK;
}

size_t lmc_sweep_grid_varying(const lmc_sweep_grid *g, const lmc_sweep_axis **out, size_t cap)
{
    size_t n = 0;
    for (size_t a = 0; a < g->n_axes; a++)
        if (g->axes[a].n > 1) {
            if (n < cap)
                out[n] = &g->axes[a];
            n++;
        }
    return n;
}

/* An L2 choice's adapter types joined by '+' ("none" for none). */
static void choice_types(const char *text, char *buf, size_t len)
{
    snprintf(buf, len, "%s", text); /* "none", or the text should it not parse */
    lmc_json *v = NULL;
    if (strcmp(text, "none") == 0 || lmc_json_parse(text, strlen(text), &v, NULL) != LMC_OK)
        return;
    bool array = lmc_json_type_of(v) == LMC_JSON_ARRAY;
    size_t n = array ? lmc_json_size(v) : 1, used = 0;
    for (size_t i = 0; i < n && used < len; i++) {
        const char *t = lmc_json_get_string(
            lmc_json_object_get(array ? lmc_json_array_at(v, i) : v, "type"), NULL);
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "+" : "", t ? t : "?");
    }
    lmc_json_free(v);
}

void lmc_sweep_axis_shown(const lmc_sweep_axis *ax, size_t v, char *buf, size_t len)
{
    if (strcmp(ax->flag, LMC_SWEEP_L2_CHOICE_FLAG) != 0) {
        snprintf(buf, len, "%s", ax->values[v]);
        return;
    }
    char other[256];
    choice_types(ax->values[v], buf, len);
    for (size_t k = 0; k < ax->n; k++) {
        if (k == v)
            continue;
        choice_types(ax->values[k], other, sizeof(other));
        if (strcmp(other, buf) == 0) {
            snprintf(buf, len, "%s", ax->values[v]); /* alike by type: the text tells them apart */
            return;
        }
    }
}

size_t lmc_sweep_grid_value_index(const lmc_sweep_grid *g, size_t idx, size_t a)
{
    size_t stride = 1;
    for (size_t j = a + 1; j < g->n_axes; j++)
        stride *= g->axes[j].n;
    return (idx / stride) % g->axes[a].n;
}

void lmc_sweep_words_free(lmc_sweep_words *w)
{
    free_strings(w->v, w->n);
    memset(w, 0, sizeof(*w));
}

/* An L2 choice as --l2-adapter words: none for "none", one per adapter otherwise. */
static lmc_status choice_words(const char *text, lmc_sweep_words *w)
{
    if (strcmp(text, "none") == 0)
        return LMC_OK;
    lmc_json *v = NULL;
    if (lmc_json_parse(text, strlen(text), &v, NULL) != LMC_OK)
        return LMC_ERR_INVALID; /* checked when it was parsed */
    lmc_status st = LMC_OK;
    bool array = lmc_json_type_of(v) == LMC_JSON_ARRAY;
    size_t n = array ? lmc_json_size(v) : 1;
    for (size_t i = 0; i < n && st == LMC_OK; i++) {
        char *one = lmc_json_dumps(array ? lmc_json_array_at(v, i) : v, 0, -1, NULL);
        if (one == NULL)
            st = LMC_ERR_NOMEM;
        else if (push(&w->v, &w->n, "--l2-adapter", strlen("--l2-adapter")) != LMC_OK ||
                 push(&w->v, &w->n, one, strlen(one)) != LMC_OK)
            st = LMC_ERR_NOMEM;
        free(one);
    }
    lmc_json_free(v);
    return st;
}

lmc_status lmc_sweep_grid_words(const lmc_sweep_grid *g, size_t idx, lmc_sweep_words *out)
{
    memset(out, 0, sizeof(*out));
    lmc_status st = LMC_OK;
    for (size_t k = 0; k < g->n_fixed && st == LMC_OK; k++)
        st = push(&out->v, &out->n, g->fixed[k], strlen(g->fixed[k]));
    for (size_t a = 0; a < g->n_axes && st == LMC_OK; a++) {
        const lmc_sweep_axis *ax = &g->axes[a];
        const char *value = ax->values[lmc_sweep_grid_value_index(g, idx, a)];
        if (strcmp(ax->flag, LMC_SWEEP_L2_CHOICE_FLAG) == 0) {
            st = choice_words(value, out);
            continue;
        }
        st = push(&out->v, &out->n, ax->flag, strlen(ax->flag));
        if (st == LMC_OK)
            st = push(&out->v, &out->n, value, strlen(value));
    }
    if (st != LMC_OK)
        lmc_sweep_words_free(out);
    return st;
}

char *lmc_sweep_grid_label(const lmc_sweep_grid *g, size_t idx, const char *except,
                           const char *none_text)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    for (size_t a = 0; a < g->n_axes; a++) {
        const lmc_sweep_axis *ax = &g->axes[a];
        if (ax->n > 1 && (except == NULL || strcmp(ax->flag, except) != 0)) {
            char shown[512];
            lmc_sweep_axis_shown(ax, lmc_sweep_grid_value_index(g, idx, a), shown, sizeof(shown));
            lmc_strbuf_printf(&b, "%s%s %s", b.len ? " " : "", ax->flag, shown);
        }
    }
    if (b.len == 0)
        lmc_strbuf_puts(&b, none_text);
    return lmc_strbuf_finish(&b);
}

lmc_status lmc_sweep_grid_config(const lmc_sweep_grid *g, size_t idx, lmc_sm_config *cfg,
                                 lmc_error *err)
{
    lmc_sweep_words w;
    if (lmc_sm_config_init(cfg) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    lmc_status st = lmc_sweep_grid_words(g, idx, &w);
    if (st != LMC_OK) {
        lmc_sm_config_free(cfg);
        return lmc_error_set(err, st, "out of memory");
    }
    for (size_t k = 0; k < w.n && st == LMC_OK; k++) {
        const char *flag = w.v[k];
        lmc_sm_flag_info f = {0};
        lmc_sm_config_flag_find(flag, strlen(flag), &f);
        const char *value = f.takes_value && k + 1 < w.n ? w.v[++k] : NULL;
        st = lmc_sm_config_set(cfg, flag, value, err);
    }
    if (st == LMC_OK)
        st = lmc_sm_config_finish(cfg, err);
    lmc_sweep_words_free(&w);
    if (st != LMC_OK)
        lmc_sm_config_free(cfg);
    return st;
}
