/*
 * utf8.h -- strict UTF-8 decoding, one code point at a time.
 *
 * Owns nothing. The JSON emitter (core/json.c), the escaping helper
 * (core/escape.c), the HTML report (report/html.c) and the strict trace
 * reader (trace/validate.c) all read trace and config strings through it,
 * so they agree on what is valid: Python's strict decoder, the rule msgspec
 * applies to every msgpack str (a trace string that fails it makes
 * LMCache's reader reject the frame).
 *
 * Threads: pure function.
 */
#ifndef LMC_CORE_UTF8_H
#define LMC_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Decode one strictly valid UTF-8 sequence at s (n >= 1 bytes available):
 * no overlong forms, no UTF-16 surrogates, nothing above U+10FFFF, no cut
 * sequence. Returns its length (1-4) and the code point in *cp, or 0 when
 * s[0] does not start a valid sequence.
 */
size_t lmc_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Whether all n bytes at s (NUL bytes allowed) are strictly valid UTF-8, as above. */
bool lmc_utf8_valid(const void *s, size_t n);

#endif
