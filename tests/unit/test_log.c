/*
 * test_log.c -- core/log: what a log line may hold. A message that carries
 * a client string (a model name with a newline, a terminal escape) stays
 * one line and cannot forge another.
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

static void test_escape_cuts_between_escapes_and_keeps_utf8(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(lmc_log_escape("abcde\n", out, sizeof(out)), 7);
    assert_string_equal(out, "abcde\\n");
    assert_int_equal(lmc_log_escape("abcdef\n", out, sizeof(out)), 6); /* "\n" does not fit */
    assert_string_equal(out, "abcdef");
    char u[32];
    lmc_log_escape("modèle", u, sizeof(u));
    assert_string_equal(u, "modèle");
    assert_int_equal(lmc_log_escape("x", u, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_bytes_in_a_message_are_escaped),
        cmocka_unit_test(test_escape_cuts_between_escapes_and_keeps_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
