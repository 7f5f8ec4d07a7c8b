/*
 * status.h -- status codes and the error detail record.
 *
 * Every function that can fail returns an lmc_status (0 = LMC_OK) and, when
 * the caller passes an lmc_error, fills it with a one-line message naming the
 * thing and the problem. An lmc_error is a plain value owned by the caller;
 * passing NULL is always allowed and simply drops the detail.
 *
 * Threads: none; all functions are reentrant.
 */
#ifndef LMCACHE_STATUS_H
#define LMCACHE_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lmc_status {
    LMC_OK = 0,
    LMC_ERR_INVALID,     /* a bad argument or value (validation failed)      */
    LMC_ERR_NOMEM,       /* out of memory                                     */
    LMC_ERR_IO,          /* an operating-system call failed                   */
    LMC_ERR_FORMAT,      /* malformed input (trace file, message, JSON)       */
    LMC_ERR_UNSUPPORTED, /* a version, type or feature this build lacks       */
    LMC_ERR_NOT_FOUND,   /* a named thing does not exist                      */
    LMC_ERR_CLOSED,      /* the object was already closed                     */
    LMC_ERR_BUSY,        /* try again later (queue full, in flight)           */
    LMC_ERR_TIMEOUT,     /* a deadline passed                                 */
    LMC_ERR_EOF,         /* end of input                                      */
    LMC_ERR_INTERNAL,    /* a broken invariant; a bug                         */
} lmc_status;

#define LMC_ERROR_MSG_MAX 512

typedef struct lmc_error {
    lmc_status code;
    char msg[LMC_ERROR_MSG_MAX];
} lmc_error;

/* Short name of a status code ("invalid argument", ...). Never NULL. */
const char *lmc_status_str(lmc_status s);

/* Clear an error record (code LMC_OK, empty message). err may be NULL. */
void lmc_error_clear(lmc_error *err);

/*
 * Fill only err's message (printf-style) and return err; the code is left as
 * it was. err may be NULL (then nothing is written and NULL is returned).
 * The building block of lmc_error_set and of wrappers that add context.
 */
lmc_error *lmc_error_format(lmc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
lmc_error *lmc_error_vformat(lmc_error *err, const char *fmt, va_list ap);

/*
 * Set err->code (if err is not NULL) and return code. It is inline on
 * purpose: the optimiser then sees that a failing path returns exactly
 * `code` (a non-zero constant, usually), so `st = f(&out); if (st != LMC_OK)
 * return st; use(out);` is not mistaken for a read of an unset `out`
 * (gcc's -Wmaybe-uninitialized at -O2/-O3 otherwise fires).
 */
static inline lmc_status lmc_error_code(lmc_error *err, lmc_status code)
{
    if (err != NULL)
        err->code = code;
    return code;
}

/*
 * lmc_error_set(err, code, fmt, ...): fill err (if not NULL) with code and a
 * printf-style message, and evaluate to code, so that a failing path can
 * read `return lmc_error_set(err, ...);`. A macro over lmc_error_format and
 * lmc_error_code so that the returned value is visible at every call site;
 * each argument is evaluated once. lmc_error_setv is the va_list form.
 */
#define lmc_error_set(err, code, ...) lmc_error_code(lmc_error_format((err), __VA_ARGS__), (code))
#define lmc_error_setv(err, code, fmt, ap)                                                         \
    lmc_error_code(lmc_error_vformat((err), (fmt), (ap)), (code))

/*
 * Prefix an existing message: "<prefix>: <old message>". Keeps the code.
 * Returns err->code (LMC_OK if err is NULL).
 */
lmc_status lmc_error_prefix(lmc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
