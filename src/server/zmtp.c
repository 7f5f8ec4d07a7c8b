/*
 * zmtp.c -- the server side of ZMTP 3 with the NULL mechanism (see zmtp.h).
 *
 * A byte-at-a-time state machine over whatever chunks arrive: the 64-byte
 * greeting, then frames (a flags byte, a 1- or 8-byte size, the body).
 * Command frames (READY, PING, ERROR, ...) are gathered in a small fixed
 * buffer; message frames go straight into the message's buffer when they
 * are kept, or are skipped when the message was refused.
 */
#include "server/zmtp.h"

#include <stdlib.h>
#include <string.h>

#include "core/byteorder.h"

#define FLAG_MORE 0x01
#define FLAG_LONG 0x02
#define FLAG_COMMAND 0x04

void lmc_zmtp_conn_init(lmc_zmtp_conn *c, size_t max_bytes)
{
    memset(c, 0, sizeof(*c));
    c->max_bytes = max_bytes;
    c->head_need = 1;
}

static void drop_message(lmc_zmtp_conn *c, const lmc_zmtp_handler *h)
{
    if (c->msg.reserved > 0)
        h->release(h->ud, c->msg.reserved);
    free(c->msg.data);
    memset(&c->msg, 0, sizeof(c->msg));
    c->msg_cap = 0;
    c->in_message = false;
}

void lmc_zmtp_conn_free(lmc_zmtp_conn *c, const lmc_zmtp_handler *h)
{
    drop_message(c, h);
}

/* Our greeting: signature (with libzmq's ZMTP 1.0 compatible padding), 3.1, NULL, not as-server. */
static size_t greeting(uint8_t *out)
{
    memset(out, 0, LMC_ZMTP_GREETING_LEN);
    out[0] = 0xff;
    out[8] = 0x01;
    out[9] = 0x7f;
    out[10] = 3;
    out[11] = 1;
    memcpy(out + 12, "NULL", 4);
    return LMC_ZMTP_GREETING_LEN;
}

/* A short command frame: flags, size, name-size, name, then the data. */
static size_t command(uint8_t *out, const char *name, const void *data, size_t len)
{
    size_t nl = strlen(name);
    out[0] = FLAG_COMMAND;
    out[1] = (uint8_t)(1 + nl + len);
    out[2] = (uint8_t)nl;
    memcpy(out + 3, name, nl);
    memcpy(out + 3 + nl, data, len);
    return 3 + nl + len;
}

size_t lmc_zmtp_hello(uint8_t *out)
{
    size_t n = greeting(out);
    static const uint8_t props[] = {11,  'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p',
                                    'e', 0,   0,   0,   6,   'R', 'O', 'U', 'T', 'E', 'R'};
    return n + command(out + n, "READY", props, sizeof(props));
}

/* name-size name value-size value, to the end; false when a length does not fit. */
static bool properties_ok(const uint8_t *p, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t nl = p[i];
        if (nl == 0 || len - i - 1 < nl + 4)
            return false;
        i += 1 + nl;
        uint32_t vl = lmc_get_be32(p + i);
        i += 4;
        if (vl > len - i)
            return false;
        i += vl;
    }
    return true;
}

static lmc_status on_command(lmc_zmtp_conn *c, const lmc_zmtp_handler *h, lmc_error *err)
{
    size_t nl = c->cmd_len > 0 ? c->cmd[0] : 0;
    if (c->cmd_len < 1 + nl || nl == 0)
        return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: a command without a name");
    const char *name = (const char *)c->cmd + 1;
    const uint8_t *data = c->cmd + 1 + nl;
    size_t dl = c->cmd_len - 1 - nl;
#define IS(s) (nl == sizeof(s) - 1 && memcmp(name, s, nl) == 0)
    if (IS("ERROR"))
        return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: the peer sent ERROR");
    if (c->state == LMC_ZMTP_HANDSHAKE) {
        if (!IS("READY"))
            return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: expected READY, got '%.*s'",
                                 (int)(nl > 16 ? 16 : nl), name);
        if (!properties_ok(data, dl))
            return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: malformed READY properties");
        c->state = LMC_ZMTP_READY;
        return LMC_OK;
    }
    if (IS("READY"))
        return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: a second READY");
    if (IS("PING")) {
        /* PONG carries the PING's context (at most 16 bytes after its 2-byte TTL). */
        if (dl < 2 || dl > 2 + 16)
            return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: malformed PING");
        uint8_t pong[32];
        size_t n = command(pong, "PONG", data + 2, dl - 2);
        h->send(h->ud, pong, n);
    }
    /* PONG, SUBSCRIBE, CANCEL and commands of later versions need nothing. */
    return LMC_OK;
#undef IS
}

static lmc_status check_greeting(const uint8_t *g, lmc_error *err)
{
    static const uint8_t null_mech[20] = "NULL";
    if (g[0] != 0xff || g[9] != 0x7f)
        return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: not a ZMTP greeting");
    if (g[10] < 3)
        return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: version %u.%u is not supported (3.x is)",
                             g[10], g[11]);
    if (memcmp(g + 12, null_mech, sizeof(null_mech)) != 0)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "zmtp: mechanism '%.20s' is not supported (NULL is)", g + 12);
    return LMC_OK;
}

/* A message frame's header is read: decide whether its body is kept. */
static void begin_frame(lmc_zmtp_conn *c, uint64_t size, uint64_t now_ms, const lmc_zmtp_handler *h)
{
    if (!c->in_message) {
        memset(&c->msg, 0, sizeof(c->msg));
        c->msg_cap = 0;
        c->frames_seen = 0;
        c->in_message = true;
        c->msg_started_ms = now_ms;
    }
    c->frames_seen++;
    c->keep_frame = false;
    lmc_zmtp_message *m = &c->msg;
    if (m->refused != LMC_ZMTP_KEPT)
        return;
    if (m->n_frames == LMC_ZMTP_MAX_FRAMES) {
        m->refused = LMC_ZMTP_TOO_MANY;
        return;
    }
    if (size > c->max_bytes - c->msg_cap) {
        m->refused = LMC_ZMTP_TOO_LARGE;
        return;
    }
    if (size > 0) {
        if (!h->reserve(h->ud, (size_t)size)) {
            m->refused = LMC_ZMTP_OVER_BUDGET;
            return;
        }
        uint8_t *grown = realloc(m->data, c->msg_cap + (size_t)size);
        if (grown == NULL) {
            h->release(h->ud, (size_t)size);
            m->refused = LMC_ZMTP_OVER_BUDGET;
            return;
        }
        m->data = grown;
        m->reserved += (size_t)size;
    }
    m->off[m->n_frames] = c->msg_cap;
    m->len[m->n_frames] = (size_t)size;
    m->n_frames++;
    c->msg_cap += (size_t)size;
    c->keep_frame = true;
}

/* A message frame's body is read. */
static void end_frame(lmc_zmtp_conn *c, const lmc_zmtp_handler *h)
{
    if (c->more)
        return;
    lmc_zmtp_message m = c->msg;
    memset(&c->msg, 0, sizeof(c->msg));
    c->msg_cap = 0;
    c->in_message = false;
    h->message(h->ud, &m);
}

/* A frame's flags and size are read. */
static lmc_status on_header(lmc_zmtp_conn *c, uint64_t now_ms, const lmc_zmtp_handler *h,
                            lmc_error *err)
{
    uint8_t flags = c->head[0];
    c->command = (flags & FLAG_COMMAND) != 0;
    c->more = (flags & FLAG_MORE) != 0;
    c->left = (flags & FLAG_LONG) ? lmc_get_be64(c->head + 1) : c->head[1];
    if (c->command) {
        if (c->more)
            return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: a command frame with MORE set");
        if (c->left > LMC_ZMTP_MAX_COMMAND)
            return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: a %llu-byte command",
                                 (unsigned long long)c->left);
        c->cmd_len = 0;
        return LMC_OK;
    }
    if (c->state != LMC_ZMTP_READY)
        return lmc_error_set(err, LMC_ERR_FORMAT, "zmtp: a message before the handshake");
    begin_frame(c, c->left, now_ms, h);
    return LMC_OK;
}

/* The current frame's body is complete. */
static lmc_status on_body(lmc_zmtp_conn *c, const lmc_zmtp_handler *h, lmc_error *err)
{
    c->head_len = 0;
    c->head_need = 1;
    if (c->command)
        return on_command(c, h, err);
    end_frame(c, h);
    return LMC_OK;
}

lmc_status lmc_zmtp_feed(lmc_zmtp_conn *c, const uint8_t *data, size_t len, uint64_t now_ms,
                         const lmc_zmtp_handler *h, lmc_error *err)
{
    size_t i = 0;
    lmc_status st = LMC_OK;
    while (i < len && st == LMC_OK) {
        if (c->state == LMC_ZMTP_GREETING) {
            size_t take = LMC_ZMTP_GREETING_LEN - c->greeting_len;
            if (take > len - i)
                take = len - i;
            memcpy(c->greeting + c->greeting_len, data + i, take);
            c->greeting_len += take;
            i += take;
            /* Refuse a stranger as soon as its signature and version are in. */
            if (c->greeting_len >= 11 &&
                (c->greeting[0] != 0xff || c->greeting[9] != 0x7f || c->greeting[10] < 3))
                return check_greeting(c->greeting, err);
            if (c->greeting_len == LMC_ZMTP_GREETING_LEN) {
                if ((st = check_greeting(c->greeting, err)) != LMC_OK)
                    return st;
                c->state = LMC_ZMTP_HANDSHAKE;
            }
            continue;
        }
        if (c->head_len < c->head_need) {
            c->head[c->head_len++] = data[i++];
            if (c->head_len == 1)
                c->head_need = (c->head[0] & FLAG_LONG) ? 9 : 2;
            if (c->head_len == c->head_need) {
                st = on_header(c, now_ms, h, err);
                if (st == LMC_OK && c->left == 0)
                    st = on_body(c, h, err);
            }
            continue;
        }
        size_t take = c->left < len - i ? (size_t)c->left : len - i;
        if (c->command) {
            memcpy(c->cmd + c->cmd_len, data + i, take);
            c->cmd_len += take;
        } else if (c->keep_frame) {
            lmc_zmtp_message *m = &c->msg;
            size_t at = m->off[m->n_frames - 1] + m->len[m->n_frames - 1] - (size_t)c->left;
            memcpy(m->data + at, data + i, take);
        }
        i += take;
        c->left -= take;
        if (c->left == 0)
            st = on_body(c, h, err);
    }
    return st;
}

size_t lmc_zmtp_encoded_size(const size_t *lens, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (lens[i] > 255 ? 9 : 2) + lens[i];
    return total;
}

size_t lmc_zmtp_encode(uint8_t *out, const void *const *frames, const size_t *lens, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t flags = i + 1 < n ? FLAG_MORE : 0;
        if (lens[i] > 255) {
            out[at++] = flags | FLAG_LONG;
            lmc_put_be64(out + at, lens[i]);
            at += 8;
        } else {
            out[at++] = flags;
            out[at++] = (uint8_t)lens[i];
        }
        if (lens[i] > 0)
            memcpy(out + at, frames[i], lens[i]);
        at += lens[i];
    }
    return at;
}
