/*
 * zmtp.h -- the server side of ZMTP 3 (the ZeroMQ wire protocol, RFC 23 and
 * 37) with the NULL mechanism: what a ROUTER socket does with one
 * connection, done here so that the server decides what it buffers.
 *
 * Why not libzmq's ROUTER: libzmq queues the frames of a message until its
 * last frame arrives, and no option bounds that (ZMQ_MAXMSGSIZE bounds one
 * frame, ZMQ_RCVHWM counts whole messages), so a peer that never sends a
 * final frame grows the server without limit; and a ROUTER can neither
 * count nor close its peers' connections. The server reads raw bytes
 * through a ZMQ_STREAM socket instead (server.c) and this module turns them
 * into messages: at most max_frames frames and max_bytes bytes each, every
 * byte it keeps reserved from the caller's budget first; a message past a
 * limit is read to its end without being kept and handed over marked as
 * refused (with its first frames, so the reply can still echo them).
 *
 * Owns: one connection's parser state and the message being received.
 * Threads: none (one connection is fed by one thread).
 */
#ifndef LMC_SERVER_ZMTP_H
#define LMC_SERVER_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

#define LMC_ZMTP_GREETING_LEN 64
/* Frames a message may keep (the protocol's 8, plus one so "too many" is the protocol's call). */
#define LMC_ZMTP_MAX_FRAMES 9
/* A command (READY, PING, ...) larger than this is a protocol error. */
#define LMC_ZMTP_MAX_COMMAND 4096

typedef enum lmc_zmtp_refusal {
    LMC_ZMTP_KEPT = 0,    /* the whole message is here */
    LMC_ZMTP_TOO_MANY,    /* more frames than max_frames */
    LMC_ZMTP_TOO_LARGE,   /* more bytes than max_bytes */
    LMC_ZMTP_OVER_BUDGET, /* the caller's budget refused its bytes */
} lmc_zmtp_refusal;

/* One received message; data is malloc'd and belongs to whoever got it. */
typedef struct lmc_zmtp_message {
    uint8_t *data;   /* the kept frames, back to back */
    size_t n_frames; /* frames kept */
    size_t off[LMC_ZMTP_MAX_FRAMES], len[LMC_ZMTP_MAX_FRAMES];
    size_t reserved; /* bytes reserved from the budget for it (release them when done) */
    lmc_zmtp_refusal refused;
} lmc_zmtp_message;

typedef struct lmc_zmtp_handler {
    /* May `bytes` more be kept? They are given back with release(). */
    bool (*reserve)(void *ud, size_t bytes);
    void (*release)(void *ud, size_t bytes);
    /* A message ended; *m (and m->data) now belongs to the callee. */
    void (*message)(void *ud, lmc_zmtp_message *m);
    /* Bytes for the peer (a PONG). */
    void (*send)(void *ud, const void *data, size_t len);
    void *ud;
} lmc_zmtp_handler;

typedef enum lmc_zmtp_state {
    LMC_ZMTP_GREETING,  /* reading the peer's 64-byte greeting */
    LMC_ZMTP_HANDSHAKE, /* greeting read, waiting for its READY */
    LMC_ZMTP_READY,     /* messages flow */
} lmc_zmtp_state;

typedef struct lmc_zmtp_conn {
    lmc_zmtp_state state;
    size_t max_bytes;
    uint8_t greeting[LMC_ZMTP_GREETING_LEN];
    size_t greeting_len;
    /* The frame being read. */
    uint8_t head[9]; /* flags, then 1 or 8 size bytes */
    size_t head_len, head_need;
    uint64_t left; /* body bytes still to come */
    bool command, more;
    uint8_t cmd[LMC_ZMTP_MAX_COMMAND];
    size_t cmd_len;
    /* The message being received. */
    lmc_zmtp_message msg;
    size_t msg_cap;
    size_t frames_seen;
    bool in_message;
    bool keep_frame; /* the current frame's bytes are kept */
    uint64_t msg_started_ms;
} lmc_zmtp_conn;

/* A fresh connection; max_bytes bounds one message (all its frames). */
void lmc_zmtp_conn_init(lmc_zmtp_conn *c, size_t max_bytes);
/* Drop a message half received (its reservation is released). The conn can be reused after init. */
void lmc_zmtp_conn_free(lmc_zmtp_conn *c, const lmc_zmtp_handler *h);

/*
 * What the server sends first: its greeting (version 3.1, NULL, as
 * server) and its READY (Socket-Type ROUTER). Returns the length; out must
 * hold LMC_ZMTP_HELLO_MAX bytes.
 */
#define LMC_ZMTP_HELLO_MAX 128
size_t lmc_zmtp_hello(uint8_t *out);

/*
 * Feed bytes received from the peer (now_ms stamps when a message starts).
 * LMC_ERR_FORMAT when the peer broke the protocol: close the connection
 * (err says how). Messages are handed to h->message as they end.
 */
lmc_status lmc_zmtp_feed(lmc_zmtp_conn *c, const uint8_t *data, size_t len, uint64_t now_ms,
                         const lmc_zmtp_handler *h, lmc_error *err);

/* A message has started and not ended (since msg_started_ms). */
static inline bool lmc_zmtp_receiving(const lmc_zmtp_conn *c)
{
    return c->in_message;
}

/* The bytes of a message of n frames as ZMTP puts them on the wire. */
size_t lmc_zmtp_encoded_size(const size_t *lens, size_t n);
/* Encode the frames into out (lmc_zmtp_encoded_size bytes); returns that size. */
size_t lmc_zmtp_encode(uint8_t *out, const void *const *frames, const size_t *lens, size_t n);

#endif
