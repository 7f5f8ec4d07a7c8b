/*
 * utf8.h -- strict UTF-8 decoding, one code point at a time.
 *
 * Owns nothing. The JSON emitter (core/json.c) and the escaping helper
 * (core/escape.c) both read trace and config strings through it, so they
 * agree on what is valid.
 *
 * Threads: pure function.
 */
#ifndef LMC_CORE_UTF8_H
#define LMC_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Decode one strictly valid UTF-8 sequence at s (n >= 1 bytes available):
 * no overlong forms, no UTF-16 surrogates, nothing above U+10FFFF, no cut
 * sequence. Returns its length (1-4) and the code point in *cp, or 0 when
 * s[0] does not start a valid sequence.
 */
size_t lmc_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif
