/*
 * test_json_diff.c -- the paths where two JSON values differ
 * (core/json_diff.h): nested members, array items, missing keys on either
 * side, type changes, and equal values.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/json_diff.h"

typedef struct paths {
    char text[1024]; /* "p1|p2|..." */
    size_t calls;
} paths;

static void collect(const char *path, void *ud)
{
    paths *p = ud;
    p->calls++;
    size_t len = strlen(p->text);
    snprintf(p->text + len, sizeof(p->text) - len, "%s%s", len ? "|" : "", path);
}

static const char *diff_of(const char *a, const char *b, paths *p)
{
    lmc_json *ja = NULL, *jb = NULL;
    assert_int_equal(lmc_json_parse(a, strlen(a), &ja, NULL), LMC_OK);
    assert_int_equal(lmc_json_parse(b, strlen(b), &jb, NULL), LMC_OK);
    p->text[0] = '\0';
    p->calls = 0;
    size_t n = lmc_json_diff(ja, jb, collect, p);
    assert_int_equal(n, p->calls); /* one call per path */
    lmc_json_free(ja);
    lmc_json_free(jb);
    return p->text;
}

static void test_equal_values_have_no_differences(void **state)
{
    (void)state;
    paths p;
    assert_string_equal(diff_of("{\"a\": [1, {\"b\": \"x\"}], \"c\": null}",
                                "{\"c\": null, \"a\": [1, {\"b\": \"x\"}]}", &p),
                        "");
}

static void test_a_nested_array_member_is_named_by_its_path(void **state)
{
    (void)state;
    paths p;
    assert_string_equal(
        diff_of("{\"l1_size_gb\": 1.0, \"l2_adapter_config\": {\"adapters\": [{\"type\": \"fs\", "
                "\"base_path\": \"/a\"}]}}",
                "{\"l1_size_gb\": 1.0, \"l2_adapter_config\": {\"adapters\": [{\"type\": \"fs\", "
                "\"base_path\": \"/b\"}]}}",
                &p),
        "l2_adapter_config.adapters[0].base_path");
}

static void test_keys_missing_on_either_side_differ(void **state)
{
    (void)state;
    paths p;
    assert_string_equal(diff_of("{\"a\": 1, \"b\": 2}", "{\"b\": 3, \"c\": 4}", &p), "a|b|c");
}

static void test_extra_array_items_differ_at_their_index(void **state)
{
    (void)state;
    paths p;
    assert_string_equal(diff_of("{\"x\": [1, 2]}", "{\"x\": [1, 2, 3, 4]}", &p), "x[2]|x[3]");
}

static void test_a_type_change_differs_even_for_equal_numbers(void **state)
{
    (void)state;
    paths p;
    assert_string_equal(diff_of("{\"gb\": 1}", "{\"gb\": 1.0}", &p), "gb");
    assert_string_equal(diff_of("{\"o\": {\"k\": 1}}", "{\"o\": [1]}", &p), "o");
}

static void test_different_roots_differ_at_the_empty_path(void **state)
{
    (void)state;
    paths p;
    lmc_json *a = NULL, *b = NULL;
    assert_int_equal(lmc_json_parse("1", 1, &a, NULL), LMC_OK);
    assert_int_equal(lmc_json_parse("2", 1, &b, NULL), LMC_OK);
    p.text[0] = '\0';
    p.calls = 0;
    assert_int_equal(lmc_json_diff(a, b, collect, &p), 1);
    assert_string_equal(p.text, "");
    assert_int_equal(lmc_json_diff(a, a, NULL, NULL), 0);
    lmc_json_free(a);
    lmc_json_free(b);
}

/* "path=a->b" per difference, values as JSON text ("-" for a missing side). */
static void collect_values(const char *path, const lmc_json *a, const lmc_json *b, void *ud)
{
    paths *p = ud;
    p->calls++;
    char *ta = a != NULL ? lmc_json_dumps(a, 0, -1, NULL) : NULL;
    char *tb = b != NULL ? lmc_json_dumps(b, 0, -1, NULL) : NULL;
    size_t len = strlen(p->text);
    snprintf(p->text + len, sizeof(p->text) - len, "%s%s=%s->%s", len ? "|" : "", path,
             ta ? ta : "-", tb ? tb : "-");
    free(ta);
    free(tb);
}

static lmc_json *parse(const char *text)
{
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    return v;
}

static void test_the_values_walk_gives_both_sides_of_each_difference(void **state)
{
    (void)state;
    lmc_json *a = parse("{\"gb\": 0.1, \"only_a\": true, \"x\": [1, 2], \"o\": {\"k\": \"s\"}}");
    lmc_json *b =
        parse("{\"gb\": 0.01, \"x\": [1, 2, 3], \"o\": {\"k\": \"t\"}, \"only_b\": null}");
    paths p = {.text = "", .calls = 0};
    assert_int_equal(lmc_json_diff_values(a, b, collect_values, &p), 5);
    assert_string_equal(p.text,
                        "gb=0.1->0.01|only_a=true->-|x[2]=-->3|o.k=\"s\"->\"t\"|only_b=-->null");
    assert_int_equal(p.calls, 5);
    lmc_json_free(a);
    lmc_json_free(b);
}

static void test_a_diff_path_leads_back_to_its_value(void **state)
{
    (void)state;
    lmc_json *v = parse("{\"l2\": {\"adapters\": [{\"type\": \"fs\"}, {\"type\": \"mock\"}]}, "
                        "\"gb\": 4}");
    assert_ptr_equal(lmc_json_at_path(v, ""), v);
    assert_int_equal(lmc_json_get_int(lmc_json_at_path(v, "gb")), 4);
    assert_string_equal(lmc_json_get_string(lmc_json_at_path(v, "l2.adapters[1].type"), NULL),
                        "mock");
    assert_int_equal(lmc_json_size(lmc_json_at_path(v, "l2.adapters")), 2);
    static const char *const none[] = {
        "nope",  "gb.x", "l2.adapters[2]",  "l2[0]", "l2.adapters[]",  "l2.adapters[-1]",
        "l2..x", ".gb",  "l2.adapters[0]x", "gb[0]", "l2.adapters[1x]"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        assert_null(lmc_json_at_path(v, none[i]));
    lmc_json_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_values_have_no_differences),
        cmocka_unit_test(test_a_nested_array_member_is_named_by_its_path),
        cmocka_unit_test(test_keys_missing_on_either_side_differ),
        cmocka_unit_test(test_extra_array_items_differ_at_their_index),
        cmocka_unit_test(test_a_type_change_differs_even_for_equal_numbers),
        cmocka_unit_test(test_different_roots_differ_at_the_empty_path),
        cmocka_unit_test(test_the_values_walk_gives_both_sides_of_each_difference),
        cmocka_unit_test(test_a_diff_path_leads_back_to_its_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
