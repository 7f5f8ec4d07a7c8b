/*
 * test_replay_sweep.c -- the grid of `trace sweep` (replay/sweep.h): flags
 * split into axes, the configurations' order and words, the L2 choice, and
 * the errors that name the flag and the value.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "replay/sweep.h"
#include "replay/sweep_output.h"

/* Parse argv (argv[0] is skipped) into g; the status of the first error, else LMC_OK. */
static lmc_status parse(lmc_sweep_grid *g, int argc, char **argv, lmc_error *err)
{
    lmc_sweep_grid_init(g);
    for (int i = 1; i < argc;) {
        bool consumed = false;
        lmc_status st = lmc_sweep_grid_parse_arg(g, argc, argv, &i, &consumed, err);
        if (st != LMC_OK)
            return st;
        assert_true(consumed);
    }
    return LMC_OK;
}

#define ARGV(...)                                                                                  \
    (char *[])                                                                                     \
    {                                                                                              \
        "sweep", __VA_ARGS__                                                                       \
    }
#define ARGC(...) ((int)(sizeof((char *[]){"sweep", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(g, err, ...) parse(g, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), err)

static char *joined(const lmc_sweep_grid *g, size_t idx)
{
    lmc_sweep_words w;
    assert_int_equal(lmc_sweep_grid_words(g, idx, &w), LMC_OK);
    size_t len = 1;
    for (size_t k = 0; k < w.n; k++)
        len += strlen(w.v[k]) + 1;
    char *s = calloc(1, len);
    for (size_t k = 0; k < w.n; k++) {
        if (k)
            strcat(s, " ");
        strcat(s, w.v[k]);
    }
    lmc_sweep_words_free(&w);
    return s;
}

static void test_lists_form_a_grid_with_the_last_flag_fastest(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "1,2", "--eviction-policy=LRU,ARC,S3FIFO"),
                     LMC_OK);
    size_t n = 0;
    assert_int_equal(lmc_sweep_grid_count(&g, 1000, &n, &err), LMC_OK);
    assert_int_equal(n, 6);
    const char *want[] = {
        "--l1-size-gb 1 --eviction-policy LRU",    "--l1-size-gb 1 --eviction-policy ARC",
        "--l1-size-gb 1 --eviction-policy S3FIFO", "--l1-size-gb 2 --eviction-policy LRU",
        "--l1-size-gb 2 --eviction-policy ARC",    "--l1-size-gb 2 --eviction-policy S3FIFO"};
    for (size_t i = 0; i < n; i++) {
        char *s = joined(&g, i);
        assert_string_equal(s, want[i]);
        free(s);
        char *label = lmc_sweep_grid_label(&g, i, NULL, LMC_SWEEP_ONLY_CONFIG);
        assert_string_equal(label, want[i]);
        free(label);
    }
    lmc_sweep_grid_free(&g);
}

static void test_one_value_and_switches_are_in_every_configuration(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    assert_int_equal(PARSE(&g, &err, "--no-l1-use-lazy", "--l1-size-gb", "1,2", "--eviction-policy",
                           "LRU", "--l2-adapter", "{\"type\": \"mock\", \"a\": 1}"),
                     LMC_OK);
    const lmc_sweep_axis *v[4];
    assert_int_equal(lmc_sweep_grid_varying(&g, v, 4), 1);
    assert_string_equal(v[0]->flag, "--l1-size-gb");
    char *s = joined(&g, 1);
    /* The JSON is not split on its comma; fixed words first, then the axes. */
    assert_string_equal(s, "--no-l1-use-lazy --l2-adapter {\"type\": \"mock\", \"a\": 1} "
                           "--l1-size-gb 2 --eviction-policy LRU");
    free(s);
    char *label = lmc_sweep_grid_label(&g, 1, NULL, LMC_SWEEP_ONLY_CONFIG);
    assert_string_equal(label, "--l1-size-gb 2");
    free(label);
    lmc_sweep_grid_free(&g);
}

static void test_l2_choices_are_one_axis_of_adapter_sets(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    char *argv[] = {"sweep",
                    "--l2-adapter-choice",
                    "none",
                    "--l1-size-gb",
                    "1",
                    "--l2-adapter-choice",
                    "[{\"type\": \"mock\"}, {\"type\": \"fs\", \"base_path\": \"/x\"}]"};
    assert_int_equal(parse(&g, 7, argv, &err), LMC_OK);
    size_t n = 0;
    assert_int_equal(lmc_sweep_grid_count(&g, 10, &n, &err), LMC_OK);
    assert_int_equal(n, 2);
    char *s0 = joined(&g, 0), *s1 = joined(&g, 1);
    assert_string_equal(s0, "--l1-size-gb 1");
    assert_string_equal(s1, "--l2-adapter {\"type\": \"mock\"} --l2-adapter {\"type\": \"fs\", "
                            "\"base_path\": \"/x\"} --l1-size-gb 1");
    free(s0);
    free(s1);
    char *label = lmc_sweep_grid_label(&g, 1, NULL, LMC_SWEEP_ONLY_CONFIG);
    assert_string_equal(label, "--l2-adapter-choice mock+fs");
    free(label);
    lmc_sweep_grid_free(&g);
}

static void test_choices_of_the_same_types_show_their_text(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    char *argv[] = {"sweep", "--l2-adapter-choice", "{\"type\": \"mock\", \"a\": 1}",
                    "--l2-adapter-choice", "{\"type\": \"mock\", \"a\": 2}"};
    assert_int_equal(parse(&g, 5, argv, &err), LMC_OK);
    char buf[128];
    lmc_sweep_axis_shown(&g.axes[0], 1, buf, sizeof(buf));
    assert_string_equal(buf, "{\"type\": \"mock\", \"a\": 2}");
    lmc_sweep_grid_free(&g);
}

static void test_errors_name_the_flag_and_the_value(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "0.5,,1"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb: '0.5,,1' has an empty item"));
    lmc_sweep_grid_free(&g);
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "1,"), LMC_ERR_INVALID);
    lmc_sweep_grid_free(&g);
    assert_int_equal(PARSE(&g, &err, "--eviction-policy", "LRU,LRU"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'LRU' is listed twice"));
    lmc_sweep_grid_free(&g);
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "1", "--l1-size-gb", "2"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb is given twice"));
    lmc_sweep_grid_free(&g);
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb: a value is required"));
    lmc_sweep_grid_free(&g);
    assert_int_equal(PARSE(&g, &err, "--l2-adapter-choice", "[]"), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l2-adapter-choice: '[]' is not"));
    lmc_sweep_grid_free(&g);
    assert_int_equal(PARSE(&g, &err, "--no-l1-use-lazy=1"), LMC_ERR_INVALID);
    lmc_sweep_grid_free(&g);
}

static void test_a_bad_value_fails_in_the_replay_parser(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "0.5,abc", "--eviction-policy", "LRU"),
                     LMC_OK);
    lmc_sm_config cfg;
    assert_int_equal(lmc_sweep_grid_config(&g, 0, &cfg, &err), LMC_OK);
    assert_int_equal(cfg.l1_size_bytes, (uint64_t)(0.5 * (1u << 30)));
    lmc_sm_config_free(&cfg);
    assert_int_equal(lmc_sweep_grid_config(&g, 1, &cfg, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--l1-size-gb: 'abc' is not a number"));
    lmc_sweep_grid_free(&g);
}

static void test_a_grid_over_the_limit_is_refused(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_error err;
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "1,2,3", "--eviction-policy", "LRU,ARC"),
                     LMC_OK);
    size_t n = 0;
    assert_int_equal(lmc_sweep_grid_count(&g, 5, &n, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "3 (--l1-size-gb) x 2 (--eviction-policy)"));
    assert_int_equal(lmc_sweep_grid_count(&g, 6, &n, &err), LMC_OK);
    assert_int_equal(n, 6);
    lmc_sweep_grid_free(&g);
}

static void test_words_that_are_not_ours_are_left(void **state)
{
    (void)state;
    lmc_sweep_grid g;
    lmc_sweep_grid_init(&g);
    char *argv[] = {"sweep", "--jobs", "2", "trace.lct"};
    lmc_error err;
    for (int i = 1; i < 4; i++) {
        bool consumed = true;
        int j = i;
        assert_int_equal(lmc_sweep_grid_parse_arg(&g, 4, argv, &j, &consumed, &err), LMC_OK);
        assert_false(consumed);
        assert_int_equal(j, i);
    }
    lmc_sweep_grid_free(&g);
}

/*
 * A done job whose result has mode, outcome_digest and the L1 keys evicted
 * only (the table shows NaN for the rest).
 */
static void done_job(lmc_sweep_job *j, const char *mode, const char *digest, int64_t evicted)
{
    memset(j, 0, sizeof(*j));
    j->state = LMC_SWEEP_JOB_DONE;
    j->result = lmc_json_object();
    assert_non_null(j->result);
    assert_int_equal(lmc_json_object_set(j->result, "mode", lmc_json_string(mode)), LMC_OK);
    assert_int_equal(lmc_json_object_set(j->result, "outcome_digest", lmc_json_string(digest)),
                     LMC_OK);
    lmc_json *l1 = lmc_json_object(), *outcomes = lmc_json_object();
    assert_int_equal(lmc_json_object_set(l1, "evicted_keys", lmc_json_int(evicted)), LMC_OK);
    assert_int_equal(lmc_json_object_set(outcomes, "l1", l1), LMC_OK);
    assert_int_equal(lmc_json_object_set(j->result, "outcomes", outcomes), LMC_OK);
}

/* The table of 2 sizes x 2 policies whose jobs have these digests (grid order). */
static char *table_of(const char *mode, const char *const digest[4], bool last_failed,
                      int64_t evicted)
{
    lmc_sweep_grid g;
    lmc_error err;
    assert_int_equal(PARSE(&g, &err, "--l1-size-gb", "0.1,0.2", "--eviction-policy", "LRU,S3FIFO"),
                     LMC_OK);
    lmc_sweep_job jobs[4];
    for (size_t i = 0; i < 4; i++)
        done_job(&jobs[i], mode, digest[i], evicted);
    if (last_failed) {
        lmc_json_free(jobs[3].result);
        jobs[3].result = NULL;
        jobs[3].state = LMC_SWEEP_JOB_FAILED;
        jobs[3].error = "exit status 1";
        jobs[3].stderr_tail = "";
    }
    lmc_sweep s = {.trace_path = "t.lct",
                   .grid = &g,
                   .jobs = jobs,
                   .n = 4,
                   .mode = mode,
                   .pace = "virtual",
                   .time_scale = 1,
                   .parallel = 2};
    char *text = lmc_sweep_format_table(&s);
    assert_non_null(text);
    for (size_t i = 0; i < 4; i++)
        lmc_json_free(jobs[i].result);
    lmc_sweep_grid_free(&g);
    return text;
}

/*
 * Policies that read alike at every size get a note saying why (in mode
 * engine: every key is touched at end_session); one difference, or a
 * configuration that failed, and there is no note.
 */
static void test_policies_that_tie_at_every_size_are_explained(void **state)
{
    (void)state;
    const char *tie[4] = {"aa", "aa", "bb", "bb"}; /* 0.1 x (LRU, S3FIFO), 0.2 x (...) */
    char *t = table_of("engine", tie, false, 100);
    assert_non_null(
        strstr(t, "note: every eviction policy swept (LRU, S3FIFO) gave the same outcome"));
    assert_non_null(strstr(t, "end_session's touch_l1_keys"));
    /* Wrapped to the terminal like the replay's notes, whatever the list's length. */
    for (const char *p = strstr(t, "\nnote: ") + 1; *p != '\0' && *p != '\n';) {
        size_t len = strcspn(p, "\n");
        assert_true(len <= 78);
        p += len + (p[len] == '\n');
    }
    free(t);
    t = table_of("calls", tie, false, 100);
    assert_non_null(strstr(t, "In mode calls the policies see only"));
    free(t);

    const char *apart[4] = {"aa", "aa", "bb", "cc"};
    t = table_of("engine", apart, false, 100);
    assert_null(strstr(t, "note:"));
    free(t);
    t = table_of("engine", tie, true, 100);
    assert_null(strstr(t, "note:"));
    assert_non_null(strstr(t, "Failed:"));
    free(t);
    /* Nothing evicted anywhere: the policy never chose, and the note says that instead. */
    t = table_of("engine", tie, false, 0);
    assert_non_null(strstr(t, "No configuration evicted a key (no eviction pass ran with\n      "
                              "L1 past its watermark), so the policy never had to choose.\n"));
    assert_null(strstr(t, "touch_l1_keys"));
    free(t);
    /* Sizes that tie are no policy's business. */
    const char *sizes[4] = {"aa", "bb", "aa", "bb"};
    t = table_of("engine", sizes, false, 100);
    assert_null(strstr(t, "note:"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_form_a_grid_with_the_last_flag_fastest),
        cmocka_unit_test(test_one_value_and_switches_are_in_every_configuration),
        cmocka_unit_test(test_l2_choices_are_one_axis_of_adapter_sets),
        cmocka_unit_test(test_choices_of_the_same_types_show_their_text),
        cmocka_unit_test(test_errors_name_the_flag_and_the_value),
        cmocka_unit_test(test_a_bad_value_fails_in_the_replay_parser),
        cmocka_unit_test(test_a_grid_over_the_limit_is_refused),
        cmocka_unit_test(test_words_that_are_not_ours_are_left),
        cmocka_unit_test(test_policies_that_tie_at_every_size_are_explained),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
