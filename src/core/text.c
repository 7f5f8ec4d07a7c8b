/*
 * text.c -- UTF-8 validation and terminal-safe escaping (see text.h).
 *
 * Owns nothing. The validator checks eight bytes at a time while they are
 * ASCII (trace strings nearly always are) and decodes one sequence at a
 * time otherwise, with the byte ranges of RFC 3629 table 3-7, which are
 * exactly what Python's strict decoder accepts.
 *
 * Threads: none; pure functions.
 */
#include "core/text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The length of the UTF-8 sequence at p (at most left bytes) and its code
 * point in *cp, or 0 when the bytes there are not a valid sequence.
 */
static size_t utf8_next(const uint8_t *p, size_t left, uint32_t *cp)
{
    uint8_t b = p[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t n;
    uint8_t lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (b >= 0xc2 && b <= 0xdf) {
        n = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        if (b == 0xe0)
            lo = 0xa0; /* overlong below */
        else if (b == 0xed)
            hi = 0x9f; /* surrogates above */
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        if (b == 0xf0)
            lo = 0x90; /* overlong below */
        else if (b == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (left < n || p[1] < lo || p[1] > hi)
        return 0;
    uint32_t c = b & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    *cp = c;
    return n;
}

bool lmc_utf8_valid(const void *s, size_t n)
{
    const uint8_t *p = s;
    size_t i = 0;
    while (i < n) {
        /* Skip ASCII: a word at a time, then byte by byte. */
        for (; n - i >= 8; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, sizeof(w));
            if ((w & 0x8080808080808080ull) != 0)
                break;
        }
        while (i < n && p[i] < 0x80)
            i++;
        if (i == n)
            break;
        uint32_t cp;
        size_t len = utf8_next(p + i, n - i, &cp);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

/* A code point that would change how the terminal lays out the line. */
static bool is_layout_control(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x200e ||
           cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void lmc_bounded_put(lmc_bounded *o, const char *s, size_t n)
{
    if (o->cap > 0 && o->pos < o->cap - 1) {
        size_t room = o->cap - 1 - o->pos;
        memcpy(o->buf + o->pos, s, n < room ? n : room);
    }
    o->pos += n;
}

size_t lmc_bounded_finish(lmc_bounded *o)
{
    if (o->cap > 0)
        o->buf[o->pos < o->cap ? o->pos : o->cap - 1] = '\0';
    return o->pos;
}

size_t lmc_text_escape(const char *s, size_t n, char *buf, size_t cap)
{
    lmc_bounded o = {buf, cap, 0};
    const uint8_t *p = (const uint8_t *)(s != NULL ? s : "");
    if (s == NULL)
        n = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        char esc[16];
        if (b >= 0x20 && b < 0x7f && b != '\\') {
            /* A run of plain ASCII in one copy. */
            size_t j = i + 1;
            while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '\\')
                j++;
            lmc_bounded_put(&o, (const char *)p + i, j - i);
            i = j;
            continue;
        }
        if (b == '\\') {
            lmc_bounded_put(&o, "\\\\", 2);
        } else if (b == '\n') {
            lmc_bounded_put(&o, "\\n", 2);
        } else if (b == '\r') {
            lmc_bounded_put(&o, "\\r", 2);
        } else if (b == '\t') {
            lmc_bounded_put(&o, "\\t", 2);
        } else if (b < 0x80) {
            snprintf(esc, sizeof(esc), "\\x%02x", b);
            lmc_bounded_put(&o, esc, 4);
        } else {
            uint32_t cp;
            size_t len = utf8_next(p + i, n - i, &cp);
            if (len == 0) {
                snprintf(esc, sizeof(esc), "\\x%02x", b);
                lmc_bounded_put(&o, esc, 4);
            } else {
                if (is_layout_control(cp)) {
                    snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
                    lmc_bounded_put(&o, esc, 6);
                } else {
                    lmc_bounded_put(&o, (const char *)p + i, len);
                }
                i += len;
                continue;
            }
        }
        i++;
    }
    return lmc_bounded_finish(&o);
}

char *lmc_text_escape_dup(const char *s, size_t n)
{
    size_t want = lmc_text_escape(s, n, NULL, 0);
    char *p = malloc(want + 1);
    if (p != NULL)
        lmc_text_escape(s, n, p, want + 1);
    return p;
}

size_t lmc_text_seconds(double s, char *buf, size_t cap)
{
    int n;
    if (isnan(s))
        n = snprintf(buf, cap, "nan");
    else if (isinf(s))
        n = snprintf(buf, cap, s < 0 ? "-inf" : "inf");
    else if (fabs(s) < 1e9)
        n = snprintf(buf, cap, "%.3f", s);
    else
        n = snprintf(buf, cap, "%.3e", s);
    return n > 0 ? (size_t)n : 0;
}
