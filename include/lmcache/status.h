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
 * Fill err (if not NULL) with code and a printf-style message, and return
 * code, so that a failing path can read `return lmc_error_set(err, ...);`.
 */
lmc_status lmc_error_set(lmc_error *err, lmc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
lmc_status lmc_error_setv(lmc_error *err, lmc_status code, const char *fmt, va_list ap);

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
