/*
 * config.c -- `lmcache server` flags (see config.h).
 */
#include "server/config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "obs/event_bus.h"

void lmc_server_config_init(lmc_server_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->host = "127.0.0.1";
    cfg->port = 5555;
    cfg->chunk_size = 256;
    cfg->max_workers = 1;
    cfg->event_bus_queue_size = LMC_EVENT_BUS_DEFAULT_QUEUE;
    lmc_sm_config_init(&cfg->sm);
}

void lmc_server_config_free(lmc_server_config *cfg)
{
    lmc_sm_config_free(&cfg->sm);
}

void lmc_server_print_help(FILE *out)
{
    fprintf(out, "server options:\n"
                 "  --host HOST                         address to bind (default 127.0.0.1)\n"
                 "  --port PORT                         TCP port (default 5555)\n"
                 "  --chunk-size N                      tokens per chunk (default 256)\n"
                 "  --max-workers N                     request worker threads (default 1)\n"
                 "  --trace-level storage               record every StorageManager call\n"
                 "  --trace-output FILE                 the trace file (default "
                 "$TMPDIR/lmcache-trace-<pid>-<UTC time>.lct)\n"
                 "  --event-bus-queue-size N            events queued for the recorder (default "
                 "10000)\n"
                 "  --counters-output FILE              write the StorageManager call counters "
                 "(JSON) at shutdown\n\n"
                 "storage-manager flags:\n");
    lmc_sm_config_print_help(out);
}

static lmc_status parse_int(const char *flag, const char *v, long lo, long hi, long *out,
                            lmc_error *err)
{
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (v == NULL || *v == '\0' || *end != '\0' || errno == ERANGE)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not an integer", flag, v ? v : "");
    if (x < lo || x > hi)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %ld is not in [%ld, %ld]", flag, x, lo, hi);
    *out = x;
    return LMC_OK;
}

lmc_status lmc_server_config_parse(lmc_server_config *cfg, int argc, char **argv, lmc_error *err)
{
    for (int i = 1; i < argc;) {
        bool consumed;
        lmc_status st = lmc_sm_config_parse_arg(&cfg->sm, argc, argv, &i, &consumed, err);
        if (st != LMC_OK)
            return st;
        if (consumed)
            continue;
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(name_len < 63 ? name_len : 63), arg);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        int used = eq ? 1 : 2;
        long x;
        if (strcmp(name, "--host") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID, "--host: a value is required");
            cfg->host = v;
        } else if (strcmp(name, "--port") == 0) {
            if ((st = parse_int("--port", v, 1, 65535, &x, err)) != LMC_OK)
                return st;
            cfg->port = (int)x;
        } else if (strcmp(name, "--chunk-size") == 0) {
            if ((st = parse_int("--chunk-size", v, 1, 1 << 20, &x, err)) != LMC_OK)
                return st;
            cfg->chunk_size = (int)x;
        } else if (strcmp(name, "--max-workers") == 0) {
            if ((st = parse_int("--max-workers", v, 1, 256, &x, err)) != LMC_OK)
                return st;
            cfg->max_workers = (int)x;
        } else if (strcmp(name, "--event-bus-queue-size") == 0) {
            if ((st = parse_int("--event-bus-queue-size", v, 1, 100000000, &x, err)) != LMC_OK)
                return st;
            cfg->event_bus_queue_size = (size_t)x;
        } else if (strcmp(name, "--trace-level") == 0) {
            if (v == NULL)
                return lmc_error_set(err, LMC_ERR_INVALID, "--trace-level: a value is required");
            if (strcmp(v, "storage") != 0)
                return lmc_error_set(err, LMC_ERR_INVALID,
                                     "--trace-level: unsupported trace level '%s'; expected "
                                     "'storage'",
                                     v);
            cfg->trace_level = v;
        } else if (strcmp(name, "--trace-output") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID, "--trace-output: a value is required");
            cfg->trace_output = v;
        } else if (strcmp(name, "--counters-output") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID,
                                     "--counters-output: a value is required");
            cfg->counters_output = v;
        } else if (arg[0] == '-') {
            return lmc_error_set(err, LMC_ERR_INVALID, "unknown option '%s'", arg);
        } else {
            return lmc_error_set(err, LMC_ERR_INVALID, "unexpected argument '%s'", arg);
        }
        i += used;
    }
    return lmc_sm_config_finish(&cfg->sm, err);
}
