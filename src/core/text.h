/*
 * text.h -- numbers for messages and tables at a sane width.
 *
 * Owns nothing. (Untrusted strings reach a terminal through core/escape.h;
 * UTF-8 validity is core/utf8.h's.)
 *
 * Threads: none; pure functions.
 */
#ifndef LMC_CORE_TEXT_H
#define LMC_CORE_TEXT_H

#include <stddef.h>

/*
 * Seconds for a message or a table, at a sane width: "%.3f" below 1e9 in
 * magnitude, else "%.3e" ("1.000e+300"), and "nan", "inf", "-inf" -- a
 * corrupt time never prints as hundreds of digits. snprintf-style.
 */
size_t lmc_text_seconds(double s, char *buf, size_t cap);

#endif
