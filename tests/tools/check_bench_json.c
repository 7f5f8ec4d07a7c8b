/*
 * check_bench_json.c -- checks the output of `lmcache bench micro --json
 * GROUP` (read on stdin) against the metrics a group must report.
 *
 * usage: check_bench_json GROUP METRIC... [-- OPTIONAL_PREFIX...]
 *
 * Every line must be one JSON object, either
 *   {"bench": GROUP, "metric": NAME, "value": MEDIAN, "unit": UNIT,
 *    "min": MIN, "max": MAX, "trials": N}
 * (finite numbers, min <= value <= max, N a whole number >= 1: the median
 * of N trials and their spread) or {"bench": GROUP, "metric": NAME, "note": TEXT} (a metric that could
 * not be measured). Each METRIC must appear exactly once with a value; a
 * metric whose name starts with an OPTIONAL_PREFIX may instead be absent or
 * a note (e.g. "lttng_": LTTng-UST is optional at build time). Any other
 * metric, a repeated one, or a note for a required one fails. Prints what
 * is wrong and exits 1; exits 0 when everything holds.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

#define MAX_NAMES 128

static int g_failures;

static void fail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "check_bench_json: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    g_failures++;
}

static const char *str_member(const lmc_json *o, const char *key)
{
    const lmc_json *v = lmc_json_object_get(o, key);
    return v != NULL ? lmc_json_get_string(v, NULL) : NULL;
}

static bool finite_number(const lmc_json *v)
{
    return (lmc_json_type_of(v) == LMC_JSON_INT || lmc_json_type_of(v) == LMC_JSON_FLOAT) &&
           isfinite(lmc_json_get_number(v));
}

static bool has_prefix(const char *name, char **prefixes, int n)
{
    for (int i = 0; i < n; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: check_bench_json GROUP METRIC... [-- OPTIONAL_PREFIX...]\n");
        return 2;
    }
    const char *group = argv[1];
    char **want = argv + 2;
    int n_want = 0;
    while (2 + n_want < argc && strcmp(want[n_want], "--") != 0)
        n_want++;
    char **optional = want + n_want + (2 + n_want < argc ? 1 : 0);
    int n_optional = (int)(argv + argc - optional);
    if (n_want > MAX_NAMES) {
        fprintf(stderr, "check_bench_json: more than %d metrics\n", MAX_NAMES);
        return 2;
    }
    int seen[MAX_NAMES] = {0};

    char line[8192];
    int lines = 0;
    while (fgets(line, sizeof(line), stdin) != NULL) {
        lines++;
        size_t len = strcspn(line, "\n");
        line[len] = '\0';
        lmc_json *o = NULL;
        lmc_error err;
        if (lmc_json_parse(line, len, &o, &err) != LMC_OK ||
            lmc_json_type_of(o) != LMC_JSON_OBJECT) {
            fail("not a JSON object: %s%s", line, "");
            lmc_json_free(o);
            continue;
        }
        const char *bench = str_member(o, "bench"), *metric = str_member(o, "metric");
        const lmc_json *value = lmc_json_object_get(o, "value");
        const char *unit = str_member(o, "unit"), *note = str_member(o, "note");
        const lmc_json *lo = lmc_json_object_get(o, "min"), *hi = lmc_json_object_get(o, "max");
        const lmc_json *trials = lmc_json_object_get(o, "trials");
        bool is_value = value != NULL && unit != NULL && unit[0] != '\0' && note == NULL &&
                        lo != NULL && hi != NULL && trials != NULL && lmc_json_size(o) == 7;
        bool is_note = note != NULL && value == NULL && unit == NULL && lmc_json_size(o) == 3;
        if (bench == NULL || strcmp(bench, group) != 0 || metric == NULL || metric[0] == '\0' ||
            !(is_value || is_note)) {
            fail("not a metric line of group %s: %s", group, line);
        } else if (is_value && !(finite_number(value) && finite_number(lo) && finite_number(hi))) {
            fail("%s: value, min or max is not a finite number: %s", metric, line);
        } else if (is_value && !(lmc_json_get_number(lo) <= lmc_json_get_number(value) &&
                                 lmc_json_get_number(value) <= lmc_json_get_number(hi))) {
            fail("%s: the value is not within [min, max]: %s", metric, line);
        } else if (is_value && !(lmc_json_type_of(trials) == LMC_JSON_INT &&
                                 lmc_json_get_number(trials) >= 1)) {
            fail("%s: trials is not a whole number >= 1: %s", metric, line);
        } else {
            int k = 0;
            while (k < n_want && strcmp(want[k], metric) != 0)
                k++;
            bool opt = has_prefix(metric, optional, n_optional);
            if (k == n_want && !opt)
                fail("%s: not a metric of this group (%s)", metric, line);
            else if (is_note && !opt)
                fail("%s: not measured: %s", metric, note);
            else if (k < n_want && ++seen[k] > 1)
                fail("%s: reported more than once%s", metric, "");
        }
        lmc_json_free(o);
    }
    for (int k = 0; k < n_want; k++)
        if (seen[k] == 0 && !has_prefix(want[k], optional, n_optional))
            fail("%s: missing from the output of group %s", want[k], group);
    if (lines == 0)
        fail("no output for group %s%s", group, "");
    return g_failures == 0 ? 0 : 1;
}
