/*
 * test_crc16.c -- CRC-16/XMODEM against the published check value and the
 * bitwise definition, and the Redis Cluster hash slots it gives.
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <string.h>

#include "core/crc16.h"

/* The definition, one bit at a time: what the table must reproduce. */
static uint16_t crc16_bitwise(const uint8_t *p, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000u ? (unsigned)(crc << 1) ^ 0x1021u : (unsigned)(crc << 1));
    }
    return crc;
}

static void test_crc16_check_value(void **state)
{
    (void)state;
    /* The catalogue's check value of CRC-16/XMODEM, also the Redis Cluster spec's example. */
    assert_int_equal(lmc_crc16_xmodem("123456789", 9), 0x31c3);
    assert_int_equal(lmc_crc16_xmodem(NULL, 0), 0);
}

static void test_crc16_matches_the_bitwise_definition_for_every_byte(void **state)
{
    (void)state;
    for (unsigned v = 0; v < 256; v++) {
        uint8_t b[3] = {(uint8_t)v, (uint8_t)(v * 7u), (uint8_t)~v};
        assert_int_equal(lmc_crc16_xmodem(b, 1), crc16_bitwise(b, 1));
        assert_int_equal(lmc_crc16_xmodem(b, 3), crc16_bitwise(b, 3));
    }
}

static void test_crc16_gives_the_redis_cluster_slots(void **state)
{
    (void)state;
    /* Slots redis-server itself reports (CLUSTER KEYSLOT). */
    assert_int_equal(lmc_crc16_xmodem("foo", 3) & 16383, 12182);
    assert_int_equal(lmc_crc16_xmodem("bar", 3) & 16383, 5061);
    assert_int_equal(lmc_crc16_xmodem("123456789", 9) & 16383, 12739);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_check_value),
        cmocka_unit_test(test_crc16_matches_the_bitwise_definition_for_every_byte),
        cmocka_unit_test(test_crc16_gives_the_redis_cluster_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
