/*
 * fuzz_zmtp.c -- libFuzzer target: the server's ZMTP parser (server/zmtp.h)
 * fed hostile bytes.
 *
 * Input layout: byte 0 picks the chunk size the bytes are fed in (1..256),
 * byte 1 the budget (in 64-byte units, 0..255), the rest is what a peer
 * sends after the server's hello. Checks: every byte reserved is handed
 * over with a message or given back when the connection is dropped; no
 * message keeps more frames or bytes than the limits; a message marked kept
 * reserved exactly its frames' bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/zmtp.h"

#define MAX_BYTES 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
    size_t budget, reserved;
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
    if (bytes > k->reserved)
        abort();
    k->reserved -= bytes;
}

static void on_message(void *ud, lmc_zmtp_message *m)
{
    sink *k = ud;
    size_t total = 0;
    if (m->n_frames > LMC_ZMTP_MAX_FRAMES)
        abort();
    for (size_t i = 0; i < m->n_frames; i++) {
        if (m->off[i] != total)
            abort();
        total += m->len[i];
    }
    if (total != m->reserved || total > MAX_BYTES)
        abort();
    on_release(k, m->reserved);
    free(m->data);
}

static void on_send(void *ud, const void *d, size_t len)
{
    (void)ud, (void)d;
    if (len > 64)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t chunk = (size_t)data[0] + 1;
    sink k = {.budget = (size_t)data[1] * 64};
    lmc_zmtp_handler h = {on_reserve, on_release, on_message, on_send, &k};
    lmc_zmtp_conn c;
    lmc_zmtp_conn_init(&c, MAX_BYTES);
    /* Most inputs should get past the greeting: start from a valid one. */
    uint8_t hello[LMC_ZMTP_HELLO_MAX];
    size_t hl = lmc_zmtp_hello(hello);
    lmc_error err;
    bool ok = lmc_zmtp_feed(&c, hello, hl, 0, &h, &err) == LMC_OK;
    for (size_t i = 2; ok && i < size; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        ok = lmc_zmtp_feed(&c, data + i, n, i, &h, &err) == LMC_OK;
    }
    lmc_zmtp_conn_free(&c, &h);
    if (k.reserved != 0)
        abort();
    return 0;
}
