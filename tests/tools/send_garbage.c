/*
 * send_garbage.c -- hostile client for the end-to-end tests.
 *
 * usage: send_garbage HOST PORT [N]
 *
 * Sends N (default 2000) bad messages to a running `lmcache server` --
 * random frames, truncated msgpack, wrong types, out-of-range block ids,
 * huge declared lengths, too many frames, unknown operations -- and checks
 * that each one that can be answered gets an error reply. Exits 0 when the
 * server answered everything it should have and is still alive (a ping
 * answers), 1 otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include <msgpack.h>

static unsigned g_seed = 12345;

static unsigned rnd(void)
{
    g_seed = g_seed * 1103515245u + 12345u;
    return g_seed >> 8;
}

/* Send frames; wait for one reply (timeout ms); 1 if it was an error map, 0 if a value, -1 none. */
static int call(void *sock, msgpack_sbuffer *frames, int n, int timeout_ms)
{
    for (int i = 0; i < n; i++)
        zmq_send(sock, frames[i].data, frames[i].size, i + 1 < n ? ZMQ_SNDMORE : 0);
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return -1;
    int parts = 0, is_error = 0;
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, sock, 0);
        more = zmq_msg_more(&m);
        parts++;
        if (!more && zmq_msg_size(&m) > 0) {
            const uint8_t *d = zmq_msg_data(&m);
            /* fixmap with "error" key */
            is_error = (d[0] & 0xf0) == 0x80 && zmq_msg_size(&m) > 7 &&
                       memcmp(d + 2, "error", 5) == 0;
        }
        zmq_msg_close(&m);
    }
    return parts >= 3 ? is_error : -1;
}

static void reset(msgpack_sbuffer *f, int n)
{
    for (int i = 0; i < n; i++)
        f[i].size = 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: send_garbage HOST PORT [N]\n");
        return 2;
    }
    int n = argc > 3 ? atoi(argv[3]) : 2000;
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
    char ep[256];
    snprintf(ep, sizeof(ep), "tcp://%s:%s", argv[1], argv[2]);
    if (zmq_connect(sock, ep) != 0) {
        fprintf(stderr, "send_garbage: cannot connect %s\n", ep);
        return 1;
    }
    msgpack_sbuffer f[12];
    for (int i = 0; i < 12; i++)
        msgpack_sbuffer_init(&f[i]);
    int unanswered = 0, not_errors = 0;
    for (int k = 0; k < n; k++) {
        reset(f, 12);
        msgpack_packer pk[12];
        for (int i = 0; i < 12; i++)
            msgpack_packer_init(&pk[i], &f[i], msgpack_sbuffer_write);
        int frames = 3;
        msgpack_pack_int64(&pk[0], k);
        switch (k % 8) {
        case 0: /* random bytes in every frame */
            frames = 1 + (int)(rnd() % 6);
            for (int i = 1; i < frames; i++) {
                size_t len = rnd() % 64;
                for (size_t b = 0; b < len; b++) {
                    char c = (char)rnd();
                    msgpack_sbuffer_write(&f[i], &c, 1);
                }
            }
            break;
        case 1: /* unknown operation */
            msgpack_pack_int64(&pk[1], 200 + (int)(rnd() % 50));
            msgpack_pack_nil(&pk[2]);
            break;
        case 2: /* lookup with a huge declared array */
            msgpack_pack_int64(&pk[1], 8);
            msgpack_sbuffer_write(&f[2], "\xdd\xff\xff\xff\xff", 5);
            break;
        case 3: /* wrong type for the key */
            msgpack_pack_str_with_body(&pk[1], "lookup", 6);
            msgpack_pack_int64(&pk[2], 42);
            break;
        case 4: { /* retrieve with out-of-range block ids and an unknown instance */
            msgpack_pack_int64(&pk[1], 7);
            msgpack_pack_map(&pk[2], 6);
            msgpack_pack_str_with_body(&pk[2], "model_name", 10);
            msgpack_pack_str_with_body(&pk[2], "m", 1);
            msgpack_pack_str_with_body(&pk[2], "world_size", 10);
            msgpack_pack_int64(&pk[2], 1);
            msgpack_pack_str_with_body(&pk[2], "worker_id", 9);
            msgpack_pack_int64(&pk[2], 0);
            msgpack_pack_str_with_body(&pk[2], "token_ids", 9);
            msgpack_pack_array(&pk[2], 0);
            msgpack_pack_str_with_body(&pk[2], "start", 5);
            msgpack_pack_int64(&pk[2], 0);
            msgpack_pack_str_with_body(&pk[2], "end", 3);
            msgpack_pack_int64(&pk[2], 0);
            msgpack_pack_int64(&pk[3], 999999);
            msgpack_pack_array(&pk[4], 1);
            msgpack_pack_array(&pk[4], 1);
            msgpack_pack_int64(&pk[4], -5);
            msgpack_pack_bin(&pk[5], 0);
            frames = 6;
            break;
        }
        case 5: /* truncated msgpack */
            msgpack_pack_int64(&pk[1], 21);
            msgpack_sbuffer_write(&f[2], "\xda\x00", 2);
            break;
        case 6: /* too many frames */
            frames = 12;
            msgpack_pack_int64(&pk[1], 24);
            for (int i = 2; i < 12; i++)
                msgpack_pack_nil(&pk[i]);
            break;
        case 7: /* register a region that does not exist */
            msgpack_pack_int64(&pk[1], 1);
            msgpack_pack_int64(&pk[2], 7);
            msgpack_pack_map(&pk[3], 5);
            msgpack_pack_str_with_body(&pk[3], "shm_name", 8);
            msgpack_pack_str_with_body(&pk[3], "/no-such-region", 15);
            msgpack_pack_str_with_body(&pk[3], "num_blocks", 10);
            msgpack_pack_int64(&pk[3], 4);
            msgpack_pack_str_with_body(&pk[3], "tokens_per_block", 16);
            msgpack_pack_int64(&pk[3], 16);
            msgpack_pack_str_with_body(&pk[3], "bytes_per_token", 15);
            msgpack_pack_int64(&pk[3], 8);
            msgpack_pack_str_with_body(&pk[3], "dtype", 5);
            msgpack_pack_str_with_body(&pk[3], "torch.uint8", 11);
            msgpack_pack_str_with_body(&pk[4], "m", 1);
            msgpack_pack_int64(&pk[5], 1);
            msgpack_pack_int64(&pk[6], 0);
            frames = 7;
            break;
        }
        int r = call(sock, f, frames, 5000);
        if (r < 0)
            unanswered++;
        else if (r == 0)
            not_errors++;
    }
    /* Still alive? */
    reset(f, 12);
    msgpack_packer p0, p1, p2;
    msgpack_packer_init(&p0, &f[0], msgpack_sbuffer_write);
    msgpack_packer_init(&p1, &f[1], msgpack_sbuffer_write);
    msgpack_packer_init(&p2, &f[2], msgpack_sbuffer_write);
    msgpack_pack_int64(&p0, 1 << 30);
    msgpack_pack_str_with_body(&p1, "ping", 4);
    msgpack_pack_nil(&p2);
    int alive = call(sock, f, 3, 5000) == 0;
    printf("send_garbage: %d messages, %d unanswered, %d not answered with an error, server %s\n",
           n, unanswered, not_errors, alive ? "alive" : "NOT ANSWERING");
    for (int i = 0; i < 12; i++)
        msgpack_sbuffer_destroy(&f[i]);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return alive && unanswered == 0 && not_errors == 0 ? 0 : 1;
}
