/*
 * test_server_zmtp.c -- the server's ZMTP 3 parser (server/zmtp.h): the
 * handshake, messages fed whole and a byte at a time, PING/PONG, protocol
 * errors, and the limits (frames, bytes, the budget) that keep a peer that
 * never finishes a message from growing the server.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>
#include <string.h>

#include "server/zmtp.h"

/* What the callbacks saw. */
typedef struct sink {
    size_t budget, reserved;
    lmc_zmtp_message msgs[8];
    size_t n_msgs;
    uint8_t sent[256];
    size_t sent_len;
} sink;

static bool on_reserve(void *ud, size_t bytes)
{
    sink *k = ud;
    if (bytes > k->budget - k->reserved)
        return false;
    k->reserved += bytes;
    return true;
}

static void on_release(void *ud, size_t bytes)
{
    sink *k = ud;
    assert_true(bytes <= k->reserved);
    k->reserved -= bytes;
}

static void on_message(void *ud, lmc_zmtp_message *m)
{
    sink *k = ud;
    assert_true(k->n_msgs < 8);
    k->msgs[k->n_msgs++] = *m;
}

static void on_send(void *ud, const void *data, size_t len)
{
    sink *k = ud;
    assert_true(k->sent_len + len <= sizeof(k->sent));
    memcpy(k->sent + k->sent_len, data, len);
    k->sent_len += len;
}

typedef struct fixture {
    sink k;
    lmc_zmtp_handler h;
    lmc_zmtp_conn c;
    uint8_t hello[LMC_ZMTP_HELLO_MAX];
    size_t hello_len;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->k.budget = 1 << 20;
    f->h = (lmc_zmtp_handler){on_reserve, on_release, on_message, on_send, &f->k};
    lmc_zmtp_conn_init(&f->c, 4096);
    /* A client's greeting and READY look like the server's (but DEALER). */
    f->hello_len = lmc_zmtp_hello(f->hello);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_zmtp_conn_free(&f->c, &f->h);
    for (size_t i = 0; i < f->k.n_msgs; i++) {
        f->k.reserved -= f->k.msgs[i].reserved;
        free(f->k.msgs[i].data);
    }
    assert_int_equal(f->k.reserved, 0); /* every reserved byte was given back or handed over */
    free(f);
    return 0;
}

static lmc_status feed(fixture *f, const void *data, size_t len, lmc_error *err)
{
    return lmc_zmtp_feed(&f->c, data, len, 1000, &f->h, err);
}

static void handshake(fixture *f)
{
    lmc_error err;
    assert_int_equal(feed(f, f->hello, f->hello_len, &err), LMC_OK);
    assert_int_equal(f->c.state, LMC_ZMTP_READY);
}

/* A message of n frames as a peer sends it. */
static size_t encode(uint8_t *out, const char *const *frames, size_t n)
{
    const void *f[16];
    size_t l[16];
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++) {
        f[i] = frames[i];
        l[i] = strlen(frames[i]);
    }
    return lmc_zmtp_encode(out, f, l, n);
}

static void assert_frame(const lmc_zmtp_message *m, size_t i, const char *want)
{
    assert_true(i < m->n_frames);
    assert_int_equal(m->len[i], strlen(want));
    assert_memory_equal(m->data + m->off[i], want, m->len[i]);
}

static void test_the_hello_is_a_zmtp_3_1_null_greeting_and_a_router_ready(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->hello[0], 0xff);
    assert_int_equal(f->hello[9], 0x7f);
    assert_int_equal(f->hello[10], 3);
    assert_int_equal(f->hello[11], 1);
    assert_memory_equal(f->hello + 12, "NULL\0", 5);
    assert_int_equal(f->hello[64], 0x04); /* a short command */
    assert_memory_equal(f->hello + 67, "READY", 5);
    assert_non_null(memmem(f->hello, f->hello_len, "Socket-Type\0\0\0\6ROUTER", 21));
}

static void test_messages_arrive_whole_also_fed_a_byte_at_a_time(void **state)
{
    fixture *f = *state;
    uint8_t wire[512];
    size_t n = 0;
    memcpy(wire, f->hello, f->hello_len);
    n += f->hello_len;
    const char *a[] = {"uid", "op", "payload"};
    n += encode(wire + n, a, 3);
    char big[300];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    const char *b[] = {"u2", big}; /* a long (8-byte size) frame */
    n += encode(wire + n, b, 2);
    lmc_error err;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(feed(f, wire + i, 1, &err), LMC_OK);
    assert_int_equal(f->k.n_msgs, 2);
    assert_int_equal(f->k.msgs[0].refused, LMC_ZMTP_KEPT);
    assert_int_equal(f->k.msgs[0].n_frames, 3);
    assert_frame(&f->k.msgs[0], 0, "uid");
    assert_frame(&f->k.msgs[0], 2, "payload");
    assert_int_equal(f->k.msgs[0].reserved, 3 + 2 + 7);
    assert_frame(&f->k.msgs[1], 1, big);
    assert_false(lmc_zmtp_receiving(&f->c));
}

static void test_a_ping_gets_a_pong_with_its_context(void **state)
{
    fixture *f = *state;
    handshake(f);
    uint8_t ping[] = {0x04, 1 + 4 + 2 + 3, 4, 'P', 'I', 'N', 'G', 0, 10, 'c', 't', 'x'};
    lmc_error err;
    assert_int_equal(feed(f, ping, sizeof(ping), &err), LMC_OK);
    uint8_t pong[] = {0x04, 1 + 4 + 3, 4, 'P', 'O', 'N', 'G', 'c', 't', 'x'};
    assert_int_equal(f->k.sent_len, sizeof(pong));
    assert_memory_equal(f->k.sent, pong, sizeof(pong));
}

static void test_protocol_errors_close_the_connection(void **state)
{
    fixture *f = *state;
    lmc_error err;
    /* Not a greeting (an HTTP request, say): refused from its first bytes. */
    assert_int_equal(feed(f, "GET / HTTP/1.1\r\n", 16, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "zmtp: not a ZMTP greeting");
    /* ZMTP 2 */
    lmc_zmtp_conn_init(&f->c, 4096);
    uint8_t g[64];
    memcpy(g, f->hello, 64);
    g[10] = 2;
    assert_int_equal(feed(f, g, 64, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "version 2.1 is not supported"));
    /* CURVE */
    lmc_zmtp_conn_init(&f->c, 4096);
    memcpy(g, f->hello, 64);
    memcpy(g + 12, "CURVE", 5);
    assert_int_equal(feed(f, g, 64, &err), LMC_ERR_FORMAT);
    /* A message before READY */
    lmc_zmtp_conn_init(&f->c, 4096);
    assert_int_equal(feed(f, f->hello, 64, &err), LMC_OK);
    const char *a[] = {"x"};
    uint8_t wire[64];
    size_t n = encode(wire, a, 1);
    assert_int_equal(feed(f, wire, n, &err), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "zmtp: a message before the handshake");
    /* A command larger than any real one */
    lmc_zmtp_conn_init(&f->c, 4096);
    handshake(f);
    uint8_t huge[9] = {0x06, 0, 0, 0, 0, 0, 0, 0x10, 1}; /* 4097 bytes */
    assert_int_equal(feed(f, huge, sizeof(huge), &err), LMC_ERR_FORMAT);
    /* A second READY */
    lmc_zmtp_conn_init(&f->c, 4096);
    handshake(f);
    assert_int_equal(feed(f, f->hello + 64, f->hello_len - 64, &err), LMC_ERR_FORMAT);
    assert_int_equal(f->k.n_msgs, 0);
}

static void test_a_message_past_max_bytes_is_skipped_and_handed_over_refused(void **state)
{
    fixture *f = *state;
    handshake(f);
    char big[5000];
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    const char *a[] = {"uid", "op", big, "tail"};
    uint8_t *wire = malloc(6000);
    size_t n = encode(wire, a, 4);
    lmc_error err;
    assert_int_equal(feed(f, wire, n, &err), LMC_OK);
    assert_int_equal(f->k.n_msgs, 1);
    lmc_zmtp_message *m = &f->k.msgs[0];
    assert_int_equal(m->refused, LMC_ZMTP_TOO_LARGE);
    /* The frames before the limit stay, so the reply can echo uid and op. */
    assert_int_equal(m->n_frames, 2);
    assert_frame(m, 1, "op");
    assert_int_equal(m->reserved, 5);
    free(wire);
}

static void test_a_message_of_too_many_frames_keeps_only_the_first(void **state)
{
    fixture *f = *state;
    handshake(f);
    const char *a[] = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"};
    uint8_t wire[256];
    size_t n = encode(wire, a, 12);
    lmc_error err;
    assert_int_equal(feed(f, wire, n, &err), LMC_OK);
    assert_int_equal(f->k.n_msgs, 1);
    assert_int_equal(f->k.msgs[0].refused, LMC_ZMTP_TOO_MANY);
    assert_int_equal(f->k.msgs[0].n_frames, LMC_ZMTP_MAX_FRAMES);
}

static void test_a_message_that_never_ends_holds_at_most_its_limit(void **state)
{
    fixture *f = *state;
    handshake(f);
    /* Frames with MORE set, forever: what libzmq's ROUTER buffers without limit. */
    uint8_t frame[2 + 200];
    frame[0] = 0x01;
    frame[1] = 200;
    memset(frame + 2, 'z', 200);
    lmc_error err;
    for (int i = 0; i < 10000; i++)
        assert_int_equal(feed(f, frame, sizeof(frame), &err), LMC_OK);
    assert_true(lmc_zmtp_receiving(&f->c));
    assert_int_equal(f->c.msg_started_ms, 1000);
    assert_true(f->k.reserved <= LMC_ZMTP_MAX_FRAMES * 200);
    assert_int_equal(f->k.n_msgs, 0);
    /* Closing the connection gives the reservation back (teardown checks). */
}

static void test_a_message_over_the_budget_is_refused(void **state)
{
    fixture *f = *state;
    f->k.budget = 10;
    handshake(f);
    const char *a[] = {"uid", "op", "a payload past the budget"};
    uint8_t wire[128];
    size_t n = encode(wire, a, 3);
    lmc_error err;
    assert_int_equal(feed(f, wire, n, &err), LMC_OK);
    assert_int_equal(f->k.n_msgs, 1);
    assert_int_equal(f->k.msgs[0].refused, LMC_ZMTP_OVER_BUDGET);
    assert_int_equal(f->k.msgs[0].n_frames, 2);
    /* Once that one is answered (its bytes given back), the next fits again. */
    f->k.reserved -= f->k.msgs[0].reserved;
    free(f->k.msgs[0].data);
    f->k.n_msgs = 0;
    const char *b[] = {"uid", "op"};
    n = encode(wire, b, 2);
    assert_int_equal(feed(f, wire, n, &err), LMC_OK);
    assert_int_equal(f->k.msgs[0].refused, LMC_ZMTP_KEPT);
}

static void test_encode_uses_short_and_long_sizes(void **state)
{
    (void)state;
    const void *frames[2] = {"ab", NULL};
    size_t lens[2] = {2, 256};
    uint8_t body[256] = {0};
    frames[1] = body;
    assert_int_equal(lmc_zmtp_encoded_size(lens, 2), 2 + 2 + 9 + 256);
    uint8_t out[300];
    assert_int_equal(lmc_zmtp_encode(out, frames, lens, 2), 2 + 2 + 9 + 256);
    assert_int_equal(out[0], 0x01); /* MORE, short */
    assert_int_equal(out[1], 2);
    assert_int_equal(out[4], 0x02); /* last, LONG */
    assert_int_equal(out[11], 1);   /* 256 = 0x0100, big-endian */
    assert_int_equal(out[12], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_the_hello_is_a_zmtp_3_1_null_greeting_and_a_router_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_messages_arrive_whole_also_fed_a_byte_at_a_time, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_ping_gets_a_pong_with_its_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_errors_close_the_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_message_past_max_bytes_is_skipped_and_handed_over_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_message_of_too_many_frames_keeps_only_the_first,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_message_that_never_ends_holds_at_most_its_limit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_message_over_the_budget_is_refused, setup, teardown),
        cmocka_unit_test(test_encode_uses_short_and_long_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
