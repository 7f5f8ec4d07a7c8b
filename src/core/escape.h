/*
 * escape.h -- making untrusted text safe to print.
 *
 * Owns nothing. Trace files, configs and client messages carry strings
 * that nobody checked: a qualname or a request id may hold ESC sequences
 * that repaint a terminal, a newline that forges an output line, bytes
 * that are not UTF-8. Everything that prints such a string goes through
 * this one helper, with Python's escapes (what repr() would show):
 *
 *   \\  \n  \r  \t          backslash and the common controls
 *   \xHH                    other C0 controls, DEL, C1 controls (U+0080..
 *                           U+009F), a byte that does not start valid
 *                           UTF-8, and with LMC_ESCAPE_BYTES every byte
 *                           >= 0x80
 *   \uXXXX                  invisible or look-alike code points: the
 *                           non-ASCII spaces, zero-width and bidi
 *                           formatting characters, line and paragraph
 *                           separators, the BOM
 *   \'  \"                  a quote, when the flags ask for it
 *
 * Everything else (printable ASCII, printable UTF-8) passes as it is.
 *
 * Threads: pure functions.
 */
#ifndef LMC_CORE_ESCAPE_H
#define LMC_CORE_ESCAPE_H

#include <stddef.h>

#include "core/strbuf.h"

#define LMC_ESCAPE_SQUOTE 0x1u /* escape ' as \' */
#define LMC_ESCAPE_DQUOTE 0x2u /* escape " as \" */
#define LMC_ESCAPE_BYTES 0x4u  /* every byte >= 0x80 as \xHH (Python's bytes repr) */
#define LMC_ESCAPE_SPACE 0x8u  /* ' ' as \x20, so the text stays one whitespace-free token */
/*
 * A backslash stays as it is: for a log line, whose messages may hold text
 * escaped already (a trace's qualname), which must not be escaped twice;
 * what could forge a line or repaint a terminal is escaped all the same.
 */
#define LMC_ESCAPE_KEEP_BACKSLASH 0x10u

/* The most bytes lmc_escape_unit writes for one unit. */
#define LMC_ESCAPE_UNIT_MAX 8

/*
 * Escape the unit (one byte, or one UTF-8 sequence) at the start of s
 * (n >= 1 bytes): write its escape or its literal bytes to out (no NUL),
 * set *used to the input bytes it covers, return the bytes written.
 */
size_t lmc_escape_unit(const char *s, size_t n, unsigned flags, char out[LMC_ESCAPE_UNIT_MAX],
                       size_t *used);

/*
 * The escaped form of n bytes at s, snprintf-style: at most len bytes
 * including the NUL; returns the length it wanted. s may be NULL when n is 0.
 */
size_t lmc_escape(const char *s, size_t n, unsigned flags, char *buf, size_t len);

/* Append the escaped form of n bytes at s to b. */
void lmc_escape_append(lmc_strbuf *b, const char *s, size_t n, unsigned flags);

/* The escaped form in a malloc'd string (the caller frees it); NULL when memory runs out. */
char *lmc_escape_dup(const char *s, size_t n, unsigned flags);

#endif
