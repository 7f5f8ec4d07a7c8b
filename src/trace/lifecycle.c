/*
 * lifecycle.c -- turning tracing on in a server (see lifecycle.h).
 */
#include "trace/lifecycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/file.h"
#include "core/log.h"
#include "trace/capture.h"

char *lmc_trace_default_path(char *buf, size_t len)
{
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || *dir == '\0')
        dir = "/tmp";
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, len, "%s/lmcache-trace-%d-%s.lct", dir, (int)getpid(), stamp);
    return buf;
}

/*
 * The default path is predictable, so it is created exclusively: a file or
 * link planted there is never written through. If the name is taken, a
 * random suffix before ".lct" makes another one, a few times.
 */
static lmc_status open_default(const char *level, lmc_trace_recorder **r, char *path, size_t len,
                               lmc_error *err)
{
    lmc_trace_default_path(path, len);
    lmc_status st = lmc_trace_recorder_create(path, level, true, true, r, err);
    size_t stem = strlen(path) - 4; /* before ".lct" */
    for (int tries = 0; st == LMC_ERR_BUSY && tries < 8 && stem + 12 < len; tries++) {
        snprintf(path + stem, len - stem, "-%08x.lct", lmc_file_nonce());
        st = lmc_trace_recorder_create(path, level, true, true, r, err);
    }
    return st;
}

/* Hand the recorder's batch to its writer when the bus runs dry. */
static void idle_flush(void *ud)
{
    lmc_trace_recorder_flush_idle(ud);
}

lmc_status lmc_trace_maybe_init(lmc_event_bus *bus, const char *level, const char *output,
                                const char *config_json, const char *digest_hex,
                                lmc_trace_recorder **out, lmc_error *err)
{
    *out = NULL;
    if (level == NULL || *level == '\0')
        return LMC_OK;
    if (strcmp(level, "storage") != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "unsupported trace level '%.64s'; expected 'storage'", level);
    char path[4096];
    /* The hooks need somewhere to go before the recorder opens the gate. */
    lmc_trace_capture_set_bus(bus);
    lmc_trace_recorder *r;
    lmc_status st;
    if (output == NULL || *output == '\0') {
        st = open_default(level, &r, path, sizeof(path), err);
        if (st == LMC_OK)
            LMC_INFO("trace",
                     "trace recording enabled (level=%s); no --trace-output given, "
                     "writing to %s",
                     level, path);
    } else {
        st = lmc_trace_recorder_open(output, level, true, &r, err);
    }
    if (st != LMC_OK) {
        lmc_trace_capture_set_bus(NULL);
        return st;
    }
    lmc_trace_recorder_attach_config(r, config_json, digest_hex);
    lmc_trace_recorder_set_bus(r, bus);
    lmc_event_subscriber sub = lmc_trace_recorder_subscriber(r);
    st = lmc_event_bus_register_subscriber(bus, &sub);
    if (st != LMC_OK) {
        lmc_trace_recorder_destroy(r); /* turns the gate off again */
        lmc_trace_capture_set_bus(NULL);
        return lmc_error_set(err, st, "trace: cannot register the recorder on the event bus");
    }
    lmc_event_bus_set_idle_hook(bus, idle_flush, r);
    *out = r;
    return LMC_OK;
}
