/*
 * escape.c -- Python-style escapes of untrusted text (see escape.h).
 *
 * Which code points count as invisible is a short fixed list rather than
 * Unicode's printable property (that needs the Unicode database): the ones
 * that can hide or reorder text on a terminal, or pass for a plain space.
 */
#include "core/escape.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/utf8.h"

static bool invisible(uint32_t cp)
{
    static const struct {
        uint32_t lo, hi;
    } ranges[] = {
        {0x00a0, 0x00a0}, /* no-break space */
        {0x00ad, 0x00ad}, /* soft hyphen */
        {0x061c, 0x061c}, /* Arabic letter mark */
        {0x1680, 0x1680}, /* Ogham space mark */
        {0x180e, 0x180e}, /* Mongolian vowel separator */
        {0x2000, 0x200f}, /* spaces, zero-width characters, LRM/RLM */
        {0x2028, 0x202f}, /* line/paragraph separators, bidi embeddings, narrow space */
        {0x205f, 0x206f}, /* math space, word joiner, invisible operators, bidi isolates */
        {0x3000, 0x3000}, /* ideographic space */
        {0xfeff, 0xfeff}, /* BOM / zero-width no-break space */
        {0xfff9, 0xfffb}, /* interlinear annotation */
    };
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        if (cp >= ranges[i].lo && cp <= ranges[i].hi)
            return true;
    }
    return false;
}

/* Printable ASCII that these flags leave as it is. */
static bool plain(unsigned char c, unsigned flags)
{
    return c >= 0x20 && c < 0x7f && (c != '\\' || (flags & LMC_ESCAPE_KEEP_BACKSLASH)) &&
           !(c == '\'' && (flags & LMC_ESCAPE_SQUOTE)) &&
           !(c == '"' && (flags & LMC_ESCAPE_DQUOTE)) && !(c == ' ' && (flags & LMC_ESCAPE_SPACE));
}

static size_t put_hex(char *out, char kind, uint32_t v, int digits)
{
    static const char hex[] = "0123456789abcdef";
    out[0] = '\\';
    out[1] = kind;
    for (int i = 0; i < digits; i++)
        out[2 + i] = hex[(v >> (4 * (digits - 1 - i))) & 0xf];
    return 2 + (size_t)digits;
}

size_t lmc_escape_unit(const char *s, size_t n, unsigned flags, char out[LMC_ESCAPE_UNIT_MAX],
                       size_t *used)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    *used = 1;
    if (plain(c, flags)) {
        out[0] = (char)c;
        return 1;
    }
    if (c == ' ')
        return put_hex(out, 'x', c, 2);
    if (c >= 0x20 && c < 0x7f) { /* a backslash or a quote the flags name */
        out[0] = '\\';
        out[1] = (char)c;
        return 2;
    }
    const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
    if (named != NULL) {
        memcpy(out, named, 2);
        return 2;
    }
    if (c < 0x80 || (flags & LMC_ESCAPE_BYTES))
        return put_hex(out, 'x', c, 2);
    uint32_t cp;
    size_t len = lmc_utf8_decode(u, n, &cp);
    if (len == 0)
        return put_hex(out, 'x', c, 2);
    *used = len;
    if (cp < 0xa0)
        return put_hex(out, 'x', cp, 2); /* C1 controls */
    if (invisible(cp)) /* all in the BMP; Python writes \xHH below U+0100 */
        return cp < 0x100 ? put_hex(out, 'x', cp, 2) : put_hex(out, 'u', cp, 4);
    memcpy(out, s, len);
    return len;
}

/*
 * The one escaping loop: the longest run that needs no escape goes to put in
 * one piece, each other unit as its escape.
 */
static void escape_to(const char *s, size_t n, unsigned flags,
                      void (*put)(void *sink, const char *p, size_t len), void *sink)
{
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && plain((unsigned char)s[run], flags))
            run++;
        if (run > i) {
            put(sink, s + i, run - i);
            i = run;
            continue;
        }
        char unit[LMC_ESCAPE_UNIT_MAX];
        size_t used;
        size_t w = lmc_escape_unit(s + i, n - i, flags, unit, &used);
        put(sink, unit, w);
        i += used;
    }
}

static void put_fixbuf(void *sink, const char *p, size_t len)
{
    lmc_fixbuf_append(sink, p, len);
}

static void put_strbuf(void *sink, const char *p, size_t len)
{
    lmc_strbuf_append(sink, p, len);
}

size_t lmc_escape(const char *s, size_t n, unsigned flags, char *buf, size_t len)
{
    lmc_fixbuf b = LMC_FIXBUF(buf, len);
    escape_to(s, n, flags, put_fixbuf, &b);
    return lmc_fixbuf_finish(&b);
}

void lmc_escape_append(lmc_strbuf *b, const char *s, size_t n, unsigned flags)
{
    escape_to(s, n, flags, put_strbuf, b);
}

char *lmc_escape_dup(const char *s, size_t n, unsigned flags)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    escape_to(s, n, flags, put_strbuf, &b);
    return lmc_strbuf_finish(&b);
}
