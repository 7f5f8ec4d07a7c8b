/*
 * status.c -- status names and the error detail record (see status.h).
 */
#include "lmcache/status.h"

#include <stdio.h>
#include <string.h>

const char *lmc_status_str(lmc_status s)
{
    switch (s) {
    case LMC_OK: return "ok";
    case LMC_ERR_INVALID: return "invalid argument";
    case LMC_ERR_NOMEM: return "out of memory";
    case LMC_ERR_IO: return "I/O error";
    case LMC_ERR_FORMAT: return "malformed input";
    case LMC_ERR_UNSUPPORTED: return "unsupported";
    case LMC_ERR_NOT_FOUND: return "not found";
    case LMC_ERR_CLOSED: return "closed";
    case LMC_ERR_BUSY: return "busy";
    case LMC_ERR_TIMEOUT: return "timed out";
    case LMC_ERR_EOF: return "end of input";
    case LMC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

void lmc_error_clear(lmc_error *err)
{
    if (err == NULL)
        return;
    err->code = LMC_OK;
    err->msg[0] = '\0';
}

lmc_error *lmc_error_vformat(lmc_error *err, const char *fmt, va_list ap)
{
    if (err != NULL)
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    return err;
}

lmc_error *lmc_error_format(lmc_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lmc_error_vformat(err, fmt, ap);
    va_end(ap);
    return err;
}

lmc_status lmc_error_prefix(lmc_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return LMC_OK;
    char prefix[LMC_ERROR_MSG_MAX];
    char old[LMC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    /* Truncation is fine here: messages are for people, cut at the limit. */
    size_t n = strnlen(prefix, sizeof(prefix) - 1);
    memcpy(err->msg, prefix, n);
    size_t room = sizeof(err->msg) - n;
    if (room > 2) {
        err->msg[n] = ':';
        err->msg[n + 1] = ' ';
        size_t m = strnlen(old, sizeof(old) - 1);
        if (m > room - 3)
            m = room - 3;
        memcpy(err->msg + n + 2, old, m);
        err->msg[n + 2 + m] = '\0';
    } else {
        err->msg[sizeof(err->msg) - 1] = '\0';
    }
    return err->code;
}
