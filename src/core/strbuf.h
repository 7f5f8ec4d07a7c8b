/*
 * strbuf.h -- a growable NUL-terminated string builder.
 *
 * Owns: its buffer. Appends never fail loudly: when memory runs out the
 * builder remembers it (oom) and ignores further appends, and
 * lmc_strbuf_finish returns NULL, so a formatter can append freely and
 * check once at the end.
 *
 * Threads: none.
 */
#ifndef LMC_CORE_STRBUF_H
#define LMC_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

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
 * The string (the caller frees it; "" when nothing was appended), or NULL
 * when memory ran out (the buffer is freed either way).
 */
char *lmc_strbuf_finish(lmc_strbuf *b);

#endif
