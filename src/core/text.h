/*
 * text.h -- UTF-8 validation and terminal-safe escaping of untrusted text.
 *
 * Owns nothing. lmc_utf8_valid applies Python's strict UTF-8 decoder, the
 * rule msgspec applies to every msgpack str it decodes (so a trace string
 * that fails it makes LMCache's reader reject the frame): no overlong forms,
 * no surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no cut sequence.
 *
 * lmc_text_escape is the one way a string that came from outside (a trace's
 * qualnames, header strings, config, level_meta) reaches a terminal: what it
 * prints cannot move the cursor, clear the screen, reorder the line or
 * start a new one, and distinct strings print distinctly:
 *   \\ for a backslash (so the escapes below are unambiguous);
 *   \n, \r, \t, and \xNN for the other C0 controls, DEL and bytes that are
 *   not UTF-8;
 *   \uNNNN for the C1 controls (U+0080..U+009F), the line and paragraph
 *   separators (U+2028, U+2029) and the bidirectional controls (U+200E,
 *   U+200F, U+202A..U+202E, U+2066..U+2069);
 *   everything else as it is.
 *
 * Threads: none; pure functions.
 */
#ifndef LMC_CORE_TEXT_H
#define LMC_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A bounded writer that keeps counting past the end, like snprintf: put
 * copies what fits (always leaving room for the NUL), finish terminates the
 * text and returns the length it wanted. buf may be NULL when cap is 0.
 */
typedef struct lmc_bounded {
    char *buf;
    size_t cap, pos;
} lmc_bounded;

void lmc_bounded_put(lmc_bounded *o, const char *s, size_t n);
size_t lmc_bounded_finish(lmc_bounded *o);

/* Whether the n bytes at s are UTF-8 as Python's strict decoder accepts it. */
bool lmc_utf8_valid(const void *s, size_t n);

/*
 * Escape the n bytes at s (which may hold NUL) as above, snprintf-style:
 * writes at most cap bytes including the NUL and returns the length it
 * wanted (call with cap 0 to size a buffer).
 */
size_t lmc_text_escape(const char *s, size_t n, char *buf, size_t cap);

/* lmc_text_escape into a malloc'd string (the caller frees it); NULL when memory runs out. */
char *lmc_text_escape_dup(const char *s, size_t n);

/*
 * Seconds for a message or a table, at a sane width: "%.3f" below 1e9 in
 * magnitude, else "%.3e" ("1.000e+300"), and "nan", "inf", "-inf" -- a
 * corrupt time never prints as hundreds of digits. snprintf-style.
 */
size_t lmc_text_seconds(double s, char *buf, size_t cap);

#endif
