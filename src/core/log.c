/*
 * log.c -- leveled logging to stderr (see log.h).
 *
 * The level and the sink are process-wide. The level is an atomic so that
 * the hot-path check in lmc_log_enabled is one relaxed load. Every message
 * goes through core/escape.h before it is written or handed to a sink:
 * messages carry client strings, and a newline in one must not start a
 * forged line.
 */
#include "core/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/escape.h"
#include "core/names.h"

static atomic_int g_level = -1; /* -1: not read from the environment yet */
static pthread_mutex_t g_sink_lock = PTHREAD_MUTEX_INITIALIZER;
static lmc_log_sink g_sink;
static void *g_sink_ud;

/* The one table of level names: each level's own name (what is printed), and accepted aliases. */
static const struct {
    const char *name;
    lmc_log_level level;
    bool alias;
} g_levels[] = {
    {"DEBUG", LMC_LOG_DEBUG, false},     {"INFO", LMC_LOG_INFO, false},
    {"WARNING", LMC_LOG_WARNING, false}, {"WARN", LMC_LOG_WARNING, true},
    {"ERROR", LMC_LOG_ERROR, false},     {"CRITICAL", LMC_LOG_ERROR, true},
    {"OFF", LMC_LOG_OFF, false},
};
#define N_LEVELS (sizeof(g_levels) / sizeof(g_levels[0]))

bool lmc_log_level_parse(const char *s, lmc_log_level *out)
{
    for (size_t i = 0; i < N_LEVELS; i++) {
        if (strcasecmp(s, g_levels[i].name) == 0) {
            *out = g_levels[i].level;
            return true;
        }
    }
    return false;
}

const char *lmc_log_level_name(lmc_log_level level)
{
    for (size_t i = 0; i < N_LEVELS; i++) {
        if (g_levels[i].level == level && !g_levels[i].alias)
            return g_levels[i].name;
    }
    return "?";
}

void lmc_log_init_from_env(void)
{
    lmc_log_level level = LMC_LOG_INFO;
    const char *env = getenv("LMCACHE_LOG_LEVEL");
    if (env != NULL && *env != '\0' && !lmc_log_level_parse(env, &level)) {
        const char *names[N_LEVELS];
        for (size_t i = 0; i < N_LEVELS; i++)
            names[i] = g_levels[i].alias ? NULL : g_levels[i].name;
        char expected[128];
        lmc_names_join(names, N_LEVELS, ", ", NULL, expected, sizeof(expected));
        fprintf(stderr, "lmcache: LMCACHE_LOG_LEVEL='%s' is not one of %s; using INFO\n", env,
                expected);
        level = LMC_LOG_INFO;
    }
    atomic_store(&g_level, (int)level);
}

void lmc_log_set_level(lmc_log_level level)
{
    atomic_store(&g_level, (int)level);
}

lmc_log_level lmc_log_get_level(void)
{
    int level = atomic_load_explicit(&g_level, memory_order_relaxed);
    if (level < 0) {
        lmc_log_init_from_env();
        level = atomic_load(&g_level);
    }
    return (lmc_log_level)level;
}

bool lmc_log_enabled(lmc_log_level level)
{
    return (int)level >= (int)lmc_log_get_level();
}

void lmc_log_set_sink(lmc_log_sink sink, void *ud)
{
    pthread_mutex_lock(&g_sink_lock);
    g_sink = sink;
    g_sink_ud = ud;
    pthread_mutex_unlock(&g_sink_lock);
}

void lmc_logv(lmc_log_level level, const char *component, const char *fmt, va_list ap)
{
    if (!lmc_log_enabled(level) || level >= LMC_LOG_OFF)
        return;
    char raw[2048], msg[2048];
    vsnprintf(raw, sizeof(raw), fmt, ap);
    /* Messages carry client strings (model names, ids): one line each, whatever they hold. */
    lmc_escape(raw, strlen(raw), LMC_ESCAPE_KEEP_BACKSLASH, msg, sizeof(msg));

    pthread_mutex_lock(&g_sink_lock);
    lmc_log_sink sink = g_sink;
    void *ud = g_sink_ud;
    pthread_mutex_unlock(&g_sink_lock);
    if (sink != NULL) {
        sink(level, component ? component : "", msg, ud);
        return;
    }

    char line[2300];
    size_t n = lmc_log_format_line(line, sizeof(line), level, component, msg);
    /* One write per line keeps lines from different threads whole. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

size_t lmc_log_format_line(char *line, size_t len, lmc_log_level level, const char *component,
                           const char *msg)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, len, "%04d-%02d-%02d %02d:%02d:%02d.%03d %s [%s] %s\n",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), lmc_log_level_name(level),
                     component && component[0] ? component : "lmcache", msg);
    if (n < 0 || len < 2)
        return 0;
    if ((size_t)n >= len) {
        n = (int)len - 1;
        line[n - 1] = '\n';
    }
    return (size_t)n;
}

void lmc_log(lmc_log_level level, const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lmc_logv(level, component, fmt, ap);
    va_end(ap);
}
