/*
 * test_log.c -- core/log: what a log line may hold. A message that carries
 * a client string (a model name with a newline, a terminal escape) stays
 * one line and cannot forge another (core/escape.h does the escaping).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <string.h>

#include "core/log.h"

static char g_seen[4096];

static void sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    (void)level, (void)component, (void)ud;
    snprintf(g_seen, sizeof(g_seen), "%s", msg);
}

static void test_control_bytes_in_a_message_are_escaped(void **state)
{
    (void)state;
    lmc_log_set_sink(sink, NULL);
    const char *model = "m\n2026-01-01 00:00:00.000 INFO [server] forged\r\x1b[31mred\x7f\ttab";
    LMC_WARN("server", "register_kv_cache: model '%s' refused", model);
    lmc_log_set_sink(NULL, NULL);
    assert_string_equal(g_seen, "register_kv_cache: model 'm\\n2026-01-01 00:00:00.000 INFO "
                                "[server] forged\\r\\x1b[31mred\\x7f\\ttab' refused");
    assert_null(strchr(g_seen, '\n'));
}

static void test_printable_text_and_utf8_stay_as_they_are(void **state)
{
    (void)state;
    lmc_log_set_sink(sink, NULL);
    LMC_INFO("server", "model '%s', %d chunks", "modèle/7B", 3);
    lmc_log_set_sink(NULL, NULL);
    assert_string_equal(g_seen, "model 'modèle/7B', 3 chunks");
}

static void test_text_escaped_already_is_not_escaped_twice(void **state)
{
    (void)state;
    lmc_log_set_sink(sink, NULL);
    /* A trace's qualname, escaped by its reader before it reaches the log. */
    LMC_WARN("replay", "no handler for qualname '%s'", "finish_write\\x00evil");
    lmc_log_set_sink(NULL, NULL);
    assert_string_equal(g_seen, "no handler for qualname 'finish_write\\x00evil'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_bytes_in_a_message_are_escaped),
        cmocka_unit_test(test_printable_text_and_utf8_stay_as_they_are),
        cmocka_unit_test(test_text_escaped_already_is_not_escaped_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
