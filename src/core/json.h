/*
 * json.h -- a small JSON value tree with a Python-compatible emitter.
 *
 * Owns: lmc_json values (null, bool, int, float, string, array, object with
 * insertion order kept). The emitter reproduces Python's json.dumps byte for
 * byte: separators ", " and ": " (or "," and ": " with an indent), optional
 * recursive key sorting, ensure_ascii escapes, NaN/Infinity/-Infinity, and
 * float.__repr__ (shortest round-trip). That is what makes the trace
 * header's config digest match LMCache's, and the summary JSON identical.
 *
 * Parsing (for --l2-adapter and workload files) goes through jansson and
 * converts to this tree.
 *
 * Ownership: constructors return a new value the caller owns (NULL when
 * memory runs out). Container setters take ownership of the child even when
 * they fail, and accept a NULL child (reported as LMC_ERR_NOMEM), so a
 * builder can nest constructors and check once.
 *
 * Threads: none; a value belongs to one thread at a time.
 */
#ifndef LMC_CORE_JSON_H
#define LMC_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

typedef enum lmc_json_type {
    LMC_JSON_NULL,
    LMC_JSON_BOOL,
    LMC_JSON_INT,
    LMC_JSON_FLOAT,
    LMC_JSON_STRING,
    LMC_JSON_ARRAY,
    LMC_JSON_OBJECT,
} lmc_json_type;

typedef struct lmc_json lmc_json;

lmc_json *lmc_json_null(void);
lmc_json *lmc_json_bool(bool b);
lmc_json *lmc_json_int(int64_t i);
lmc_json *lmc_json_float(double d);
lmc_json *lmc_json_string(const char *s);            /* UTF-8, NUL-terminated */
lmc_json *lmc_json_stringn(const char *s, size_t n); /* may hold NUL */
lmc_json *lmc_json_array(void);
lmc_json *lmc_json_object(void);

void lmc_json_free(lmc_json *v);

/* Append v (ownership taken). */
lmc_status lmc_json_array_append(lmc_json *arr, lmc_json *v);

/* Set key to v (ownership taken); an existing key keeps its position. */
lmc_status lmc_json_object_set(lmc_json *obj, const char *key, lmc_json *v);

lmc_json_type lmc_json_type_of(const lmc_json *v);
bool lmc_json_get_bool(const lmc_json *v);       /* false if not a bool */
int64_t lmc_json_get_int(const lmc_json *v);     /* 0 if not an int */
double lmc_json_get_number(const lmc_json *v);   /* int or float as double; 0 otherwise */
const char *lmc_json_get_string(const lmc_json *v, size_t *len); /* NULL if not a string */
size_t lmc_json_size(const lmc_json *v);          /* array or object entries; 0 otherwise */
lmc_json *lmc_json_array_at(const lmc_json *arr, size_t i);
const char *lmc_json_object_key_at(const lmc_json *obj, size_t i);
lmc_json *lmc_json_object_value_at(const lmc_json *obj, size_t i);
lmc_json *lmc_json_object_get(const lmc_json *obj, const char *key); /* NULL if absent */

/* A deep copy the caller owns (a NULL v copies as null); NULL when memory runs out. */
lmc_json *lmc_json_copy(const lmc_json *v);

/* A name for messages: "null", "bool", "int", "float", "string", "array", "object". */
const char *lmc_json_type_name(lmc_json_type t);

#define LMC_JSON_SORT_KEYS 0x1

/*
 * Python json.dumps(v, sort_keys=<flag>, indent=<indent or None>) with the
 * default ensure_ascii=True and allow_nan=True. indent < 0 means None.
 * Returns a NUL-terminated string the caller frees with free(), its length
 * in *len_out when not NULL; NULL when memory runs out.
 */
char *lmc_json_dumps(const lmc_json *v, unsigned flags, int indent, size_t *len_out);

/* The same plus a final "\n", as json.dump(...) followed by a newline writes a file. */
char *lmc_json_dumps_line(const lmc_json *v, unsigned flags, int indent);

/*
 * Python's repr of a float: shortest digits that round-trip, fixed notation
 * for decimal exponents -4 <= e < 16 (with ".0" when integral), else
 * scientific with at least two exponent digits ("1e-05", "1e+16");
 * "nan" -> "NaN", "inf" -> "Infinity", "-inf" -> "-Infinity" (JSON forms).
 * Writes NUL-terminated into buf (32 bytes is always enough); returns length.
 */
size_t lmc_json_format_float(double d, char *buf, size_t len);

/*
 * Parse JSON text (jansson; duplicate keys rejected). On error returns
 * LMC_ERR_FORMAT with jansson's message and position.
 */
lmc_status lmc_json_parse(const char *text, size_t len, lmc_json **out, lmc_error *err);

#endif
