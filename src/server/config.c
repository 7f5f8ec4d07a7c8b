/*
 * config.c -- `lmcache server` flags (see config.h).
 */
#include "server/config.h"

#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/flags.h"
#include "obs/event_bus.h"

void lmc_server_limits_init(lmc_server_limits *l)
{
#define LMC_LIMIT_DEFAULT(field, flag, def, lo, hi, help) l->field = (def);
    LMC_SERVER_LIMITS(LMC_LIMIT_DEFAULT)
#undef LMC_LIMIT_DEFAULT
}

void lmc_server_config_init(lmc_server_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->host = "127.0.0.1";
    cfg->port = 5555;
    cfg->chunk_size = 256;
    cfg->max_workers = 1;
    cfg->event_bus_queue_size = LMC_EVENT_BUS_DEFAULT_QUEUE;
    lmc_server_limits_init(&cfg->limits);
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
                 "  --copy-threads N                    threads that copy one large store or "
                 "retrieve, its worker\n"
                 "                                      included (default: the CPUs the server "
                 "may use, at most 4)\n"
                 "  --trace-level storage               record every StorageManager call\n"
                 "  --trace-output FILE                 the trace file (default "
                 "$TMPDIR/lmcache-trace-<pid>-<UTC time>.lct)\n"
                 "  --event-bus-queue-size N            events queued for the recorder (default "
                 "10000)\n"
                 "  --counters-output FILE              write the StorageManager call counters "
                 "(JSON) at shutdown\n"
                 "  --allow-l1-over-ram                 accept an --l1-size-gb larger than the "
                 "machine's physical memory\n"
                 "  --no-l1-prefault                    do not fault the L1 pool in after the "
                 "start (the first\n"
                 "                                      store into each page pays for it "
                 "instead)\n\n"
                 "limits (what clients may make the server hold; docs/security.md):\n");
#define LMC_LIMIT_HELP(field, flag, def, lo, hi, help)                                             \
    fprintf(out, "  %-35s %s (default %llu)\n", flag " N", help, (unsigned long long)(def));
    LMC_SERVER_LIMITS(LMC_LIMIT_HELP)
#undef LMC_LIMIT_HELP
    fprintf(out, "\nstorage-manager flags:\n");
    lmc_sm_config_print_help(out);
}

static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

int lmc_server_copy_threads(const lmc_server_config *cfg)
{
    if (cfg->copy_threads > 0)
        return cfg->copy_threads;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    return cpus < 1                                 ? 1
           : cpus > LMC_SERVER_DEFAULT_COPY_THREADS ? LMC_SERVER_DEFAULT_COPY_THREADS
                                                    : cpus;
}

bool lmc_server_l1_fits_in_ram(uint64_t l1_bytes)
{
    uint64_t ram = physical_memory();
    return ram == 0 || l1_bytes <= ram; /* unknown: assume it fits */
}

static lmc_status check_l1_fits(uint64_t l1_bytes, lmc_error *err)
{
    /* A pool the machine cannot hold ends in swapping or the OOM killer, not an error. */
    if (lmc_server_l1_fits_in_ram(l1_bytes))
        return LMC_OK;
    uint64_t ram = physical_memory();
    return lmc_error_set(err, LMC_ERR_INVALID,
                         "--l1-size-gb: %.3f GiB is more than this machine's %.3f GiB of "
                         "physical memory; pass --allow-l1-over-ram to use it anyway",
                         (double)l1_bytes / (1u << 30), (double)ram / (1u << 30));
}

/* A limit flag (limits.h) by name: *matched false when name is none of them. */
static lmc_status parse_limit(lmc_server_limits *l, const char *name, const char *v, bool *matched,
                              lmc_error *err)
{
    int64_t x;
    lmc_status st;
#define LMC_LIMIT_PARSE(field, flag, def, lo, hi, help)                                            \
    if (strcmp(name, flag) == 0) {                                                                 \
        *matched = true;                                                                           \
        if ((st = lmc_flag_parse_int(flag, v, (lo), (hi), &x, err)) != LMC_OK)                     \
            return st;                                                                             \
        l->field = (uint64_t)x;                                                                    \
        return LMC_OK;                                                                             \
    }
    LMC_SERVER_LIMITS(LMC_LIMIT_PARSE)
#undef LMC_LIMIT_PARSE
    *matched = false;
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
        int64_t x;
        bool limit;
        if ((st = parse_limit(&cfg->limits, name, v, &limit, err)) != LMC_OK)
            return st;
        if (limit) {
            i += used;
            continue;
        }
        if (strcmp(name, "--allow-l1-over-ram") == 0 && eq == NULL) {
            cfg->allow_l1_over_ram = true;
            used = 1;
        } else if (strcmp(name, "--no-l1-prefault") == 0 && eq == NULL) {
            cfg->no_l1_prefault = true;
            used = 1;
        } else if (strcmp(name, "--host") == 0) {
            if (v == NULL || *v == '\0')
                return lmc_error_set(err, LMC_ERR_INVALID, "--host: a value is required");
            cfg->host = v;
        } else if (strcmp(name, "--port") == 0) {
            if ((st = lmc_flag_parse_int("--port", v, 1, 65535, &x, err)) != LMC_OK)
                return st;
            cfg->port = (int)x;
        } else if (strcmp(name, "--chunk-size") == 0) {
            if ((st = lmc_flag_parse_int("--chunk-size", v, 1, 1 << 20, &x, err)) != LMC_OK)
                return st;
            cfg->chunk_size = (int)x;
        } else if (strcmp(name, "--max-workers") == 0) {
            if ((st = lmc_flag_parse_int("--max-workers", v, 1, 256, &x, err)) != LMC_OK)
                return st;
            cfg->max_workers = (int)x;
        } else if (strcmp(name, "--copy-threads") == 0) {
            if ((st = lmc_flag_parse_int("--copy-threads", v, 1, LMC_SERVER_MAX_COPY_THREADS, &x,
                                         err)) != LMC_OK)
                return st;
            cfg->copy_threads = (int)x;
        } else if (strcmp(name, "--event-bus-queue-size") == 0) {
            if ((st = lmc_flag_parse_int("--event-bus-queue-size", v, 1, 100000000, &x, err)) !=
                LMC_OK)
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
    lmc_status st = lmc_sm_config_finish(&cfg->sm, err);
    if (st == LMC_OK && !cfg->allow_l1_over_ram)
        st = check_l1_fits(cfg->sm.l1_size_bytes, err);
    return st;
}
