/*
 * strbuf.c -- a growable NUL-terminated string builder, and a bounded one
 * (see strbuf.h).
 */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lmc_strbuf_append(lmc_strbuf *b, const char *text, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, text, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void lmc_strbuf_puts(lmc_strbuf *b, const char *text)
{
    lmc_strbuf_append(b, text, strlen(text));
}

void lmc_strbuf_repeat(lmc_strbuf *b, char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lmc_strbuf_append(b, &c, 1);
}

void lmc_strbuf_wrap(lmc_strbuf *b, const char *prefix, const char *indent, size_t width,
                     const char *text)
{
    lmc_strbuf_puts(b, prefix);
    size_t col = strlen(prefix);
    bool first = true;
    for (const char *p = text; *p != '\0';) {
        while (*p == ' ')
            p++;
        size_t word = strcspn(p, " ");
        if (word == 0)
            break;
        if (!first && col + 1 + word > width) {
            lmc_strbuf_puts(b, "\n");
            lmc_strbuf_puts(b, indent);
            col = strlen(indent);
        } else if (!first) {
            lmc_strbuf_puts(b, " ");
            col++;
        }
        lmc_strbuf_append(b, p, word);
        col += word;
        p += word;
        first = false;
    }
    lmc_strbuf_puts(b, "\n");
}

void lmc_strbuf_printf(lmc_strbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)n < sizeof(tmp)) {
        lmc_strbuf_append(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    lmc_strbuf_append(b, big, (size_t)n);
    free(big);
}

char *lmc_strbuf_finish(lmc_strbuf *b)
{
    if (b->oom) {
        free(b->p);
        b->p = NULL;
        return NULL;
    }
    if (b->p == NULL)
        return strdup("");
    return b->p;
}

void lmc_fixbuf_append(lmc_fixbuf *b, const char *text, size_t n)
{
    if (b->len < b->cap) {
        size_t room = b->cap - 1 - b->len;
        memcpy(b->buf + b->len, text, n < room ? n : room);
    }
    b->len += n;
}

void lmc_fixbuf_puts(lmc_fixbuf *b, const char *text)
{
    lmc_fixbuf_append(b, text, strlen(text));
}

void lmc_fixbuf_u64(lmc_fixbuf *b, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    lmc_fixbuf_append(b, tmp + sizeof(tmp) - n, n);
}

void lmc_fixbuf_hex64(lmc_fixbuf *b, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[16];
    for (size_t i = 0; i < 16; i++)
        tmp[i] = hex[(v >> (60 - 4 * i)) & 0xF];
    lmc_fixbuf_append(b, tmp, 16);
}

size_t lmc_fixbuf_finish(lmc_fixbuf *b)
{
    if (b->cap > 0)
        b->buf[b->len < b->cap ? b->len : b->cap - 1] = '\0';
    return b->len;
}
