/*
 * log.h -- leveled logging to stderr.
 *
 * Owns: the process log level (from LMCACHE_LOG_LEVEL: DEBUG, INFO,
 * WARNING, ERROR; default INFO) and the optional sink tests install to
 * capture messages. Lines look like
 *   2026-11-29 22:28:19.123 WARNING [trace] message
 *
 * Threads: lmc_log is thread-safe; each line is written with one call.
 * lmc_log_set_sink and lmc_log_set_level are meant for start-up and tests.
 */
#ifndef LMC_CORE_LOG_H
#define LMC_CORE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum lmc_log_level {
    LMC_LOG_DEBUG = 10,
    LMC_LOG_INFO = 20,
    LMC_LOG_WARNING = 30,
    LMC_LOG_ERROR = 40,
    LMC_LOG_OFF = 100,
} lmc_log_level;

/* Read LMCACHE_LOG_LEVEL (called lazily by the first lmc_log). */
void lmc_log_init_from_env(void);
void lmc_log_set_level(lmc_log_level level);
lmc_log_level lmc_log_get_level(void);
bool lmc_log_enabled(lmc_log_level level);

/* Parse "DEBUG"/"INFO"/"WARNING"/"WARN"/"ERROR"/"OFF" (any case). */
bool lmc_log_level_parse(const char *s, lmc_log_level *out);
const char *lmc_log_level_name(lmc_log_level level);

/*
 * A sink receives every message at or above the level instead of stderr
 * (the message has no timestamp and no newline). NULL restores stderr.
 */
typedef void (*lmc_log_sink)(lmc_log_level level, const char *component, const char *msg, void *ud);
void lmc_log_set_sink(lmc_log_sink sink, void *ud);

/*
 * The line lmc_log writes to stderr (timestamp, level, component, msg,
 * "\n") into line; returns its length (cut to len - 1 bytes, still ending
 * in "\n"). For a sink that prints lines as stderr would, e.g. around a
 * progress bar.
 */
size_t lmc_log_format_line(char *line, size_t len, lmc_log_level level, const char *component,
                           const char *msg);

void lmc_log(lmc_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lmc_logv(lmc_log_level level, const char *component, const char *fmt, va_list ap);

#define LMC_DEBUG(comp, ...)                                                                       \
    do {                                                                                           \
        if (lmc_log_enabled(LMC_LOG_DEBUG))                                                        \
            lmc_log(LMC_LOG_DEBUG, comp, __VA_ARGS__);                                             \
    } while (0)
#define LMC_INFO(comp, ...) lmc_log(LMC_LOG_INFO, comp, __VA_ARGS__)
#define LMC_WARN(comp, ...) lmc_log(LMC_LOG_WARNING, comp, __VA_ARGS__)
#define LMC_ERROR(comp, ...) lmc_log(LMC_LOG_ERROR, comp, __VA_ARGS__)

#endif
