/*
 * strbuf.h -- a growable NUL-terminated string builder, and a bounded one.
 *
 * Owns: its buffer (lmc_strbuf). Appends never fail loudly: when memory
 * runs out the builder remembers it (oom) and ignores further appends, and
 * lmc_strbuf_finish returns NULL, so a formatter can append freely and
 * check once at the end.
 *
 * lmc_fixbuf writes into a caller's buffer and never allocates (hot paths:
 * a file name per key, a digest line per record): what does not fit is
 * cut, and len counts what was wanted, as snprintf does.
 *
 * Threads: none.
 */
#ifndef LMC_CORE_STRBUF_H
#define LMC_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lmc_strbuf {
    char *p;
    size_t len, cap;
    bool oom;
} lmc_strbuf;

#define LMC_STRBUF_INIT {NULL, 0, 0, false}

void lmc_strbuf_append(lmc_strbuf *b, const char *text, size_t n);
void lmc_strbuf_puts(lmc_strbuf *b, const char *text);
void lmc_strbuf_repeat(lmc_strbuf *b, char c, size_t n);
void lmc_strbuf_printf(lmc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * prefix, then text's words (runs of spaces between them become one) wrapped
 * so that no line is wider than width columns unless one word is, each
 * continuation line starting with indent; then "\n". For notes under a
 * table ("note: ...", indented under the text).
 */
void lmc_strbuf_wrap(lmc_strbuf *b, const char *prefix, const char *indent, size_t width,
                     const char *text);

/*
 * The string (the caller frees it; "" when nothing was appended), or NULL
 * when memory ran out (the buffer is freed either way).
 */
char *lmc_strbuf_finish(lmc_strbuf *b);

typedef struct lmc_fixbuf {
    char *buf; /* cap bytes; may be NULL when cap is 0 (measuring only) */
    size_t cap, len;
} lmc_fixbuf;

#define LMC_FIXBUF(buf, cap) ((lmc_fixbuf){(buf), (cap), 0})

void lmc_fixbuf_append(lmc_fixbuf *b, const char *text, size_t n);
void lmc_fixbuf_puts(lmc_fixbuf *b, const char *text);
void lmc_fixbuf_u64(lmc_fixbuf *b, uint64_t v);   /* decimal */
void lmc_fixbuf_hex64(lmc_fixbuf *b, uint64_t v); /* 16 lowercase hex digits */
/* NUL-terminate what fits (when cap > 0); returns len, the length wanted. */
size_t lmc_fixbuf_finish(lmc_fixbuf *b);

#endif
