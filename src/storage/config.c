/*
 * config.c -- the StorageManager flags, their validation, and the config's
 * JSON tree and digest (see config.h).
 *
 * Owns: the strings and adapter JSON objects inside an lmc_sm_config. The
 * flags live in one table (FLAGS) that drives both the parser and --help,
 * so a new flag is one table row and one case in apply_flag.
 *
 * Parsing follows argparse where it matters to users: "--flag value" and
 * "--flag=value", the last occurrence wins (except --l2-adapter, which
 * accumulates), and a following word that looks like an option is not taken
 * as a value (so "--shm-name --l1-size-gb 4" is an error, not a shm name).
 * Numbers are stricter than Python's float()/int(): no surrounding spaces,
 * no underscores, no hex, no NaN or infinity.
 *
 * Threads: none and no locks; a config is built once at start-up and then
 * only read.
 */
#include "storage/config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/names.h"
#include "l2/adapter.h"
#include "storage/eviction.h"
#include "storage/prefetch_controller.h"
#include "storage/store_controller.h"

#define MIB (1024u * 1024u)

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef enum flag_id {
    F_L1_SIZE_GB,
    F_L1_USE_LAZY,
    F_NO_L1_USE_LAZY,
    F_L1_INIT_SIZE_GB,
    F_L1_ALIGN_BYTES,
    F_SHM_NAME,
    F_WRITE_TTL,
    F_READ_TTL,
    F_EVICTION_POLICY,
    F_TRIGGER_WATERMARK,
    F_EVICTION_RATIO,
    F_EXTRA_LOGGING,
    F_EXTRA_LOGGING_INTERVAL,
    F_STORE_POLICY,
    F_PREFETCH_POLICY,
    F_PREFETCH_MAX_IN_FLIGHT,
    F_NOTIFIER_INTERVAL,
    F_L2_ADAPTER,
} flag_id;

typedef struct flag_def {
    flag_id id;
    const char *name;
    const char *metavar; /* NULL: a boolean switch that takes no value */
    const char *help;    /* NULL: listed with the flag before it (the --no- form) */
    const char *deflt;   /* NULL: required */
} flag_def;

static const flag_def FLAGS[] = {
    {F_L1_SIZE_GB, "--l1-size-gb", "GB", "L1 size in GiB (x 2^30 bytes, at least 1 MiB)", NULL},
    {F_L1_USE_LAZY, "--l1-use-lazy", NULL,
     "kept in the config; the pool is always mapped lazily (pages fault in on first use)", "true"},
    {F_NO_L1_USE_LAZY, "--no-l1-use-lazy", NULL, NULL, NULL},
    {F_L1_INIT_SIZE_GB, "--l1-init-size-gb", "GB",
     "kept in the config (clamped to the L1 size); no effect on the lazily mapped pool", "20"},
    {F_L1_ALIGN_BYTES, "--l1-align-bytes", "N",
     "allocation alignment, a power of two in [64, 2^30]", "4096"},
    {F_SHM_NAME, "--shm-name", "NAME", "POSIX shared-memory name for L1; \"\" for anonymous memory",
     "anonymous memory"},
    {F_WRITE_TTL, "--l1-write-ttl-seconds", "S", "write-lock TTL in seconds", "600"},
    {F_READ_TTL, "--l1-read-ttl-seconds", "S", "read-lock TTL in seconds", "300"},
    {F_EVICTION_POLICY, "--eviction-policy", "POLICY", "L1 eviction policy", NULL},
    {F_TRIGGER_WATERMARK, "--eviction-trigger-watermark", "F",
     "usage fraction in (0, 1] that triggers eviction", "0.8"},
    {F_EVICTION_RATIO, "--eviction-ratio", "F", "fraction in (0, 1] to evict per trigger", "0.2"},
    {F_EXTRA_LOGGING, "--enable-extra-logging", NULL,
     "kept in the config (EvictionConfig.extra_logging_enabled); nothing extra is logged", "off"},
    {F_EXTRA_LOGGING_INTERVAL, "--extra-logging-interval", "S",
     "kept in the config (EvictionConfig.extra_logging_interval), seconds > 0", "10.0"},
    {F_STORE_POLICY, "--l2-store-policy", "POLICY", "L2 store policy", "default"},
    {F_PREFETCH_POLICY, "--l2-prefetch-policy", "POLICY", "L2 prefetch policy", "default"},
    {F_PREFETCH_MAX_IN_FLIGHT, "--l2-prefetch-max-in-flight", "N", "concurrent prefetch requests",
     "8"},
    {F_NOTIFIER_INTERVAL, "--periodic-notifier-interval-ms", "MS",
     "kept in the config; the controllers here wake on eventfds, not a heartbeat", "5"},
    {F_L2_ADAPTER, "--l2-adapter", "JSON",
     "one L2 adapter per occurrence, in order, e.g. '{\"type\": \"fs\", \"base_path\": "
     "\"/tmp/l2\"}'",
     "none"},
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

static lmc_status set_string(char **slot, const char *value)
{
    char *copy = NULL;
    if (value != NULL) {
        copy = strdup(value);
        if (copy == NULL)
            return LMC_ERR_NOMEM;
    }
    free(*slot);
    *slot = copy;
    return LMC_OK;
}

/*
 * The names a choice flag accepts, from the registry that owns them (so a
 * new policy there is a new choice here, in the parser and in --help); 0
 * for any other flag.
 */
static size_t flag_choices(flag_id id, const char *const **names)
{
    switch (id) {
    case F_EVICTION_POLICY:
        *names = lmc_eviction_policy_names();
        return lmc_eviction_policy_count;
    case F_STORE_POLICY:
        *names = lmc_store_policy_names;
        return lmc_store_policy_count;
    case F_PREFETCH_POLICY:
        *names = lmc_prefetch_policy_names;
        return lmc_prefetch_policy_count;
    default:
        return 0;
    }
}

/*
 * argparse's test for "this word is an option, not a value": it starts with
 * '-', is longer than "-", is not a negative number (-?\d+ or -\d*\.\d+),
 * and has no space in it.
 */
bool lmc_sm_config_looks_like_option(const char *s)
{
    if (s[0] != '-' || s[1] == '\0')
        return false;
    if (strchr(s, ' ') != NULL)
        return false;
    const char *p = s + 1;
    size_t digits = strspn(p, "0123456789");
    if (digits > 0 && p[digits] == '\0')
        return false; /* -12 */
    if (p[digits] == '.') {
        size_t frac = strspn(p + digits + 1, "0123456789");
        if (frac > 0 && p[digits + 1 + frac] == '\0')
            return false; /* -1.5, -.5 */
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Value parsers: each names the flag and the offending text                */
/* ------------------------------------------------------------------------ */

static lmc_status parse_int(const char *flag, const char *text, int64_t *out, lmc_error *err)
{
    /* strtoll would skip leading spaces and accept "+"; only the sign is kept. */
    const char *digits = (text[0] == '-' || text[0] == '+') ? text + 1 : text;
    if (digits[0] < '0' || digits[0] > '9')
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not an integer", flag, text);
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not an integer", flag, text);
    if (errno == ERANGE)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is out of range", flag, text);
    *out = (int64_t)v;
    return LMC_OK;
}

static lmc_status parse_int_min(const char *flag, const char *text, int64_t min, int64_t max,
                                int64_t *out, lmc_error *err)
{
    lmc_status st = parse_int(flag, text, out, err);
    if (st != LMC_OK)
        return st;
    if (*out < min)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is not >= %lld", flag, text,
                             (long long)min);
    if (*out > max)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is too large (max %lld)", flag, text,
                             (long long)max);
    return LMC_OK;
}

static lmc_status parse_float(const char *flag, const char *text, double *out, lmc_error *err)
{
    /* strtod accepts leading spaces and hex floats; Python's float() takes neither form. */
    const char *p = (text[0] == '-' || text[0] == '+') ? text + 1 : text;
    bool starts_ok = (p[0] >= '0' && p[0] <= '9') || p[0] == '.' || p[0] == 'i' || p[0] == 'I' ||
                     p[0] == 'n' || p[0] == 'N';
    if (!starts_ok || strpbrk(text, "xX") != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a number", flag, text);
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a number", flag, text);
    if (!isfinite(v))
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a finite number", flag, text);
    *out = v;
    return LMC_OK;
}

/* A fraction in (0, 1], as the eviction watermark and ratio must be. */
static lmc_status parse_fraction(const char *flag, const char *text, double *out, lmc_error *err)
{
    double v;
    lmc_status st = parse_float(flag, text, &v, err);
    if (st != LMC_OK)
        return st;
    if (!(v > 0.0 && v <= 1.0))
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is not in (0, 1]", flag, text);
    *out = v;
    return LMC_OK;
}

static lmc_status parse_choice(const flag_def *f, const char *text, char **slot, lmc_error *err)
{
    const char *const *choices = NULL;
    size_t n = flag_choices(f->id, &choices);
    size_t i;
    if (lmc_names_find(choices, n, text, strlen(text), &i)) {
        if (set_string(slot, choices[i]) != LMC_OK)
            return lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", f->name);
        return LMC_OK;
    }
    char names[256];
    lmc_names_join(choices, n, ", ", NULL, names, sizeof(names));
    return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not one of %s", f->name, text, names);
}

static lmc_status parse_l1_size(const char *flag, const char *text, lmc_sm_config *cfg,
                                lmc_error *err)
{
    double gb;
    lmc_status st = parse_float(flag, text, &gb, err);
    if (st != LMC_OK)
        return st;
    if (!(gb > 0.0))
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is not > 0", flag, text);
    double bytes = gb * LMC_GIB;
    /* Sizes go into the JSON tree as int64, so 2^63 is the ceiling. */
    if (bytes >= 9223372036854775808.0)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is out of range", flag, text);
    uint64_t b = (uint64_t)bytes; /* int(gb * 2**30): truncation, as in Python */
    if (b < MIB)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: %s GiB is %llu bytes, below the minimum of 1 MiB (%u bytes)",
                             flag, text, (unsigned long long)b, MIB);
    cfg->l1_size_bytes = b;
    cfg->l1_size_set = true;
    return LMC_OK;
}

static lmc_status parse_l2_adapter(const char *flag, const char *text, lmc_sm_config *cfg,
                                   lmc_error *err)
{
    lmc_json *v = NULL;
    lmc_status st = lmc_json_parse(text, strlen(text), &v, err);
    if (st != LMC_OK) {
        if (err != NULL) {
            /* The parser's message usually says "JSON" already; say it once. */
            if (strstr(err->msg, "JSON") != NULL)
                lmc_error_prefix(err, "%s", flag);
            else
                lmc_error_prefix(err, "%s: invalid JSON", flag);
            err->code = LMC_ERR_INVALID;
        }
        return LMC_ERR_INVALID;
    }
    if (lmc_json_type_of(v) != LMC_JSON_OBJECT) {
        lmc_json_type t = lmc_json_type_of(v);
        lmc_json_free(v);
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: expected a JSON object like {\"type\": \"fs\", ...}, got %s",
                             flag, lmc_json_type_name(t));
    }
    st = lmc_l2_check_config(v, err);
    if (st != LMC_OK) {
        lmc_json_free(v);
        /* The validator may already name the flag; say it once. */
        if (err != NULL) {
            if (strncmp(err->msg, flag, strlen(flag)) != 0)
                lmc_error_prefix(err, "%s", flag);
            err->code = LMC_ERR_INVALID;
        }
        return LMC_ERR_INVALID;
    }
    lmc_json **grown = realloc(cfg->l2_adapters, (cfg->n_l2_adapters + 1) * sizeof(*grown));
    if (grown == NULL) {
        lmc_json_free(v);
        return lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", flag);
    }
    cfg->l2_adapters = grown;
    cfg->l2_adapters[cfg->n_l2_adapters++] = v;
    return LMC_OK;
}

static lmc_status apply_flag(lmc_sm_config *cfg, const flag_def *f, const char *value,
                             lmc_error *err)
{
    const char *flag = f->name;
    int64_t n = 0;
    lmc_status st = LMC_OK;

    switch (f->id) {
    case F_L1_SIZE_GB:
        return parse_l1_size(flag, value, cfg, err);
    case F_L1_USE_LAZY:
        cfg->l1_use_lazy = true;
        return LMC_OK;
    case F_NO_L1_USE_LAZY:
        cfg->l1_use_lazy = false;
        return LMC_OK;
    case F_L1_INIT_SIZE_GB:
        st = parse_int_min(flag, value, 0, INT64_MAX, &n, err);
        if (st == LMC_OK) {
            /* It is clamped to the L1 size later, so saturating loses nothing. */
            uint64_t gib = (uint64_t)1 << 30;
            cfg->l1_init_size_bytes =
                (uint64_t)n > UINT64_MAX / gib ? UINT64_MAX : (uint64_t)n * gib;
        }
        return st;
    case F_L1_ALIGN_BYTES:
        st = parse_int(flag, value, &n, err);
        if (st != LMC_OK)
            return st;
        if (n <= 0 || (n & (n - 1)) != 0)
            return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is not a power of two", flag, value);
        if (n < 64 || n > ((int64_t)1 << 30))
            return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is not in [64, 1073741824]", flag,
                                 value);
        cfg->l1_align_bytes = (uint64_t)n;
        return LMC_OK;
    case F_SHM_NAME:
        /* "" disables shared memory, exactly like leaving the flag out. */
        if (set_string(&cfg->shm_name, value[0] == '\0' ? NULL : value) != LMC_OK)
            return lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", flag);
        return LMC_OK;
    case F_WRITE_TTL:
        st = parse_int_min(flag, value, 1, INT64_MAX, &n, err);
        if (st == LMC_OK)
            cfg->write_ttl_seconds = (uint64_t)n;
        return st;
    case F_READ_TTL:
        st = parse_int_min(flag, value, 1, INT64_MAX, &n, err);
        if (st == LMC_OK)
            cfg->read_ttl_seconds = (uint64_t)n;
        return st;
    case F_EVICTION_POLICY:
        st = parse_choice(f, value, &cfg->eviction_policy, err);
        if (st == LMC_OK)
            cfg->eviction_policy_set = true;
        return st;
    case F_TRIGGER_WATERMARK:
        return parse_fraction(flag, value, &cfg->trigger_watermark, err);
    case F_EVICTION_RATIO:
        return parse_fraction(flag, value, &cfg->eviction_ratio, err);
    case F_EXTRA_LOGGING:
        cfg->extra_logging_enabled = true;
        return LMC_OK;
    case F_EXTRA_LOGGING_INTERVAL: {
        double v;
        if ((st = parse_float(flag, value, &v, err)) != LMC_OK)
            return st;
        if (!(v > 0.0) || !isfinite(v))
            return lmc_error_set(err, LMC_ERR_INVALID, "%s: %s is not a finite number > 0", flag,
                                 value);
        cfg->extra_logging_interval = v;
        return LMC_OK;
    }
    case F_STORE_POLICY:
        return parse_choice(f, value, &cfg->store_policy, err);
    case F_PREFETCH_POLICY:
        return parse_choice(f, value, &cfg->prefetch_policy, err);
    case F_PREFETCH_MAX_IN_FLIGHT:
        st = parse_int_min(flag, value, 1, UINT32_MAX, &n, err);
        if (st == LMC_OK)
            cfg->prefetch_max_in_flight = (uint32_t)n;
        return st;
    case F_NOTIFIER_INTERVAL:
        st = parse_int_min(flag, value, 1, UINT32_MAX, &n, err);
        if (st == LMC_OK)
            cfg->periodic_notifier_interval_ms = (uint32_t)n;
        return st;
    case F_L2_ADAPTER:
        return parse_l2_adapter(flag, value, cfg, err);
    }
    return lmc_error_set(err, LMC_ERR_INTERNAL, "%s: no handler", flag);
}

/* ------------------------------------------------------------------------ */
/* Public API                                                               */
/* ------------------------------------------------------------------------ */

lmc_status lmc_sm_config_init(lmc_sm_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->l1_use_lazy = true;
    cfg->l1_init_size_bytes = (uint64_t)20 << 30;
    cfg->l1_align_bytes = 4096;
    cfg->write_ttl_seconds = 600;
    cfg->read_ttl_seconds = 300;
    cfg->trigger_watermark = 0.8;
    cfg->eviction_ratio = 0.2;
    cfg->extra_logging_interval = 10.0;
    cfg->prefetch_max_in_flight = 8;
    cfg->periodic_notifier_interval_ms = 5;
    if (set_string(&cfg->store_policy, "default") != LMC_OK ||
        set_string(&cfg->prefetch_policy, "default") != LMC_OK) {
        lmc_sm_config_free(cfg);
        return LMC_ERR_NOMEM;
    }
    return LMC_OK;
}

void lmc_sm_config_free(lmc_sm_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->shm_name);
    free(cfg->eviction_policy);
    free(cfg->store_policy);
    free(cfg->prefetch_policy);
    for (size_t i = 0; i < cfg->n_l2_adapters; i++)
        lmc_json_free(cfg->l2_adapters[i]);
    free(cfg->l2_adapters);
    memset(cfg, 0, sizeof(*cfg));
}

/* The table row of the flag named by name[0, len), or NULL. */
static const flag_def *find_flag(const char *name, size_t len)
{
    for (size_t k = 0; k < N_OF(FLAGS); k++) {
        if (strlen(FLAGS[k].name) == len && strncmp(FLAGS[k].name, name, len) == 0)
            return &FLAGS[k];
    }
    return NULL;
}

bool lmc_sm_config_flag_find(const char *name, size_t len, lmc_sm_flag_info *out)
{
    const flag_def *f = find_flag(name, len);
    if (f == NULL)
        return false;
    out->name = f->name;
    out->takes_value = f->metavar != NULL;
    out->accumulates = f->id == F_L2_ADAPTER;
    out->value_is_json = f->id == F_L2_ADAPTER;
    return true;
}

lmc_status lmc_sm_config_parse_arg(lmc_sm_config *cfg, int argc, char **argv, int *i,
                                   bool *consumed, lmc_error *err)
{
    *consumed = false;
    if (*i < 0 || *i >= argc)
        return LMC_OK;
    const char *arg = argv[*i];
    if (strncmp(arg, "--", 2) != 0)
        return LMC_OK;

    const char *eq = strchr(arg, '=');
    const flag_def *f = find_flag(arg, eq != NULL ? (size_t)(eq - arg) : strlen(arg));
    if (f == NULL)
        return LMC_OK;
    *consumed = true;

    const char *value = NULL;
    int used = 1;
    if (f->metavar == NULL) {
        if (eq != NULL)
            return lmc_error_set(err, LMC_ERR_INVALID, "%s takes no value (got '%s')", f->name,
                                 eq + 1);
    } else if (eq != NULL) {
        value = eq + 1;
    } else if (*i + 1 < argc && !lmc_sm_config_looks_like_option(argv[*i + 1])) {
        value = argv[*i + 1];
        used = 2;
    } else {
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: a value is required (%s %s)", f->name,
                             f->name, f->metavar);
    }

    lmc_status st = apply_flag(cfg, f, value, err);
    if (st == LMC_OK)
        *i += used;
    return st;
}

lmc_status lmc_sm_config_set(lmc_sm_config *cfg, const char *flag, const char *value,
                             lmc_error *err)
{
    const flag_def *f = find_flag(flag, strlen(flag));
    if (f == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "unknown option '%s'", flag);
    if (f->metavar == NULL && value != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s takes no value (got '%s')", f->name, value);
    if (f->metavar != NULL && value == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: a value is required (%s %s)", f->name,
                             f->name, f->metavar);
    return apply_flag(cfg, f, value, err);
}

lmc_status lmc_sm_config_finish(lmc_sm_config *cfg, lmc_error *err)
{
    const char *names = lmc_eviction_policy_list();
    if (!cfg->l1_size_set && !cfg->eviction_policy_set)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l1-size-gb is required (the L1 size in GiB, e.g. --l1-size-gb 8); "
                             "--eviction-policy is required (one of %s)",
                             names);
    if (!cfg->l1_size_set)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l1-size-gb is required (the L1 size in GiB, e.g. --l1-size-gb 8)");
    if (!cfg->eviction_policy_set || cfg->eviction_policy == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "--eviction-policy is required (one of %s)",
                             names);
    /* The pool is carved in align-sized slots; a pool smaller than one slot holds nothing. */
    if (cfg->l1_align_bytes > cfg->l1_size_bytes)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l1-align-bytes: %llu is larger than the L1 size (%llu bytes from "
                             "--l1-size-gb)",
                             (unsigned long long)cfg->l1_align_bytes,
                             (unsigned long long)cfg->l1_size_bytes);
    return LMC_OK;
}

lmc_status lmc_sm_config_parse_all(lmc_sm_config *cfg, int argc, char **argv, lmc_error *err)
{
    int i = 1;
    while (i < argc) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            /* argparse: everything after "--" is positional, and we take none. */
            if (i + 1 < argc)
                return lmc_error_set(err, LMC_ERR_INVALID, "unexpected argument '%s'", argv[i + 1]);
            break;
        }
        bool consumed = false;
        lmc_status st = lmc_sm_config_parse_arg(cfg, argc, argv, &i, &consumed, err);
        if (st != LMC_OK)
            return st;
        if (consumed)
            continue;
        if (lmc_sm_config_looks_like_option(arg)) {
            const char *eq = strchr(arg, '=');
            int len = eq != NULL ? (int)(eq - arg) : (int)strlen(arg);
            return lmc_error_set(err, LMC_ERR_INVALID, "unknown option '%.*s'", len, arg);
        }
        return lmc_error_set(err, LMC_ERR_INVALID, "unexpected argument '%s'", arg);
    }
    return lmc_sm_config_finish(cfg, err);
}

void lmc_sm_config_print_help(FILE *out)
{
    char inv[N_OF(FLAGS)][96];
    int width = 0;
    for (size_t k = 0; k < N_OF(FLAGS); k++) {
        const flag_def *f = &FLAGS[k];
        inv[k][0] = '\0';
        if (f->help == NULL)
            continue;
        if (f->metavar != NULL)
            snprintf(inv[k], sizeof(inv[k]), "%s %s", f->name, f->metavar);
        else if (k + 1 < N_OF(FLAGS) && FLAGS[k + 1].help == NULL)
            snprintf(inv[k], sizeof(inv[k]), "%s, %s", f->name, FLAGS[k + 1].name);
        else
            snprintf(inv[k], sizeof(inv[k]), "%s", f->name);
        int w = (int)strlen(inv[k]);
        if (w > width)
            width = w;
    }
    for (size_t k = 0; k < N_OF(FLAGS); k++) {
        const flag_def *f = &FLAGS[k];
        if (f->help == NULL)
            continue;
        fprintf(out, "  %-*s  %s", width, inv[k], f->help);
        const char *const *choices = NULL;
        size_t n = flag_choices(f->id, &choices);
        if (n > 0) {
            char names[256];
            lmc_names_join(choices, n, ", ", " or ", names, sizeof(names));
            fprintf(out, ": %s", names);
        }
        if (f->id == F_L2_ADAPTER)
            fprintf(out, "; types: %s", lmc_l2_type_names());
        if (f->deflt != NULL)
            fprintf(out, " (default: %s)\n", f->deflt);
        else
            fprintf(out, " (required)\n");
    }
}

/* Build helpers: each takes ownership of the child, so one check at the end suffices. */
static lmc_status put(lmc_json *obj, const char *key, lmc_json *v, lmc_status st)
{
    lmc_status s = lmc_json_object_set(obj, key, v);
    return st != LMC_OK ? st : s;
}

static lmc_json *str_or_null(const char *s)
{
    return s != NULL ? lmc_json_string(s) : lmc_json_null();
}

/*
 * The tree dataclasses.asdict gives for LMCache's newest StorageManagerConfig
 * (spec/storage-manager.md section 11.1, the fields marked there included):
 * after its __post_init__, l1_manager_config carries tag "_default" and a
 * copy of eviction_config as its eviction, and l1_manager_configs is a list
 * holding a copy of l1_manager_config. docs/trace-format.md shows the text
 * for the default flags and its digest.
 */
static lmc_json *eviction_json(const lmc_sm_config *cfg)
{
    lmc_status st = LMC_OK;
    lmc_json *ev = lmc_json_object();
    if (ev == NULL)
        return NULL;
    st = put(ev, "eviction_policy", str_or_null(cfg->eviction_policy), st);
    st = put(ev, "trigger_watermark", lmc_json_float(cfg->trigger_watermark), st);
    st = put(ev, "eviction_ratio", lmc_json_float(cfg->eviction_ratio), st);
    st = put(ev, "extra_logging_enabled", lmc_json_bool(cfg->extra_logging_enabled), st);
    st = put(ev, "extra_logging_interval", lmc_json_float(cfg->extra_logging_interval), st);
    if (st != LMC_OK) {
        lmc_json_free(ev);
        return NULL;
    }
    return ev;
}

/* L1ManagerConfig with its L1MemoryManagerConfig. */
static lmc_json *l1_manager_json(const lmc_sm_config *cfg)
{
    lmc_status st = LMC_OK;
    lmc_json *l1m = lmc_json_object();
    lmc_json *mem = lmc_json_object();
    if (l1m == NULL || mem == NULL) {
        lmc_json_free(l1m);
        lmc_json_free(mem);
        return NULL;
    }
    /* The init size is clamped to the size, as its __post_init__ does. */
    uint64_t init =
        cfg->l1_init_size_bytes < cfg->l1_size_bytes ? cfg->l1_init_size_bytes : cfg->l1_size_bytes;
    st = put(mem, "size_in_bytes", lmc_json_int((int64_t)cfg->l1_size_bytes), st);
    st = put(mem, "use_lazy", lmc_json_bool(cfg->l1_use_lazy), st);
    st = put(mem, "init_size_in_bytes", lmc_json_int((int64_t)init), st);
    st = put(mem, "align_bytes", lmc_json_int((int64_t)cfg->l1_align_bytes), st);
    st = put(mem, "shm_name", lmc_json_string(cfg->shm_name != NULL ? cfg->shm_name : ""), st);
    st = put(mem, "use_hugepages", lmc_json_bool(false), st);
    st = put(mem, "devdax_path", lmc_json_null(), st);
    st = put(mem, "devdax_size_in_bytes", lmc_json_int(0), st);

    st = put(l1m, "memory_config", mem, st);
    st = put(l1m, "gds_l1_config", lmc_json_null(), st);
    st = put(l1m, "write_ttl_seconds", lmc_json_int((int64_t)cfg->write_ttl_seconds), st);
    st = put(l1m, "read_ttl_seconds", lmc_json_int((int64_t)cfg->read_ttl_seconds), st);
    st = put(l1m, "tag", lmc_json_string("_default"), st);
    lmc_json *ev = eviction_json(cfg);
    st = put(l1m, "eviction", ev, ev != NULL ? st : LMC_ERR_NOMEM);
    if (st != LMC_OK) {
        lmc_json_free(l1m);
        return NULL;
    }
    return l1m;
}

lmc_json *lmc_sm_config_to_json(const lmc_sm_config *cfg)
{
    lmc_status st = LMC_OK;
    lmc_json *root = lmc_json_object();
    lmc_json *l2 = lmc_json_object();
    lmc_json *adapters = lmc_json_array();
    lmc_json *l1_list = lmc_json_array();
    lmc_json *l1m = l1_manager_json(cfg);
    lmc_json *l1m_copy = l1_manager_json(cfg);
    lmc_json *ev = eviction_json(cfg);
    if (root == NULL || l2 == NULL || adapters == NULL || l1_list == NULL || l1m == NULL ||
        l1m_copy == NULL || ev == NULL) {
        lmc_json_free(root);
        lmc_json_free(l2);
        lmc_json_free(adapters);
        lmc_json_free(l1_list);
        lmc_json_free(l1m);
        lmc_json_free(l1m_copy);
        lmc_json_free(ev);
        return NULL;
    }

    /* L2AdaptersConfig */
    for (size_t i = 0; i < cfg->n_l2_adapters; i++) {
        lmc_status s = lmc_json_array_append(adapters, lmc_json_copy(cfg->l2_adapters[i]));
        if (st == LMC_OK)
            st = s;
    }
    st = put(l2, "adapters", adapters, st);
    lmc_status s = lmc_json_array_append(l1_list, l1m_copy);
    st = st != LMC_OK ? st : s;

    /* StorageManagerConfig */
    st = put(root, "l1_manager_config", l1m, st);
    st = put(root, "eviction_config", ev, st);
    st = put(root, "l2_adapter_config", l2, st);
    st = put(root, "store_policy", str_or_null(cfg->store_policy), st);
    st = put(root, "prefetch_policy", str_or_null(cfg->prefetch_policy), st);
    st = put(root, "prefetch_max_in_flight", lmc_json_int(cfg->prefetch_max_in_flight), st);
    st = put(root, "prefetch_load_timeout", lmc_json_null(), st);
    st = put(root, "periodic_notifier_interval_ms",
             lmc_json_int(cfg->periodic_notifier_interval_ms), st);
    st = put(root, "l1_manager_configs", l1_list, st);

    if (st != LMC_OK) {
        lmc_json_free(root);
        return NULL;
    }
    return root;
}

/* The sorted JSON text and its length (the digest hashes exactly these bytes). */
static char *config_json_text(const lmc_sm_config *cfg, size_t *len)
{
    lmc_json *tree = lmc_sm_config_to_json(cfg);
    if (tree == NULL)
        return NULL;
    char *text = lmc_json_dumps(tree, LMC_JSON_SORT_KEYS, -1, len);
    lmc_json_free(tree);
    return text;
}

lmc_status lmc_sm_config_to_json_text(const lmc_sm_config *cfg, char **json_out)
{
    size_t len = 0;
    *json_out = config_json_text(cfg, &len);
    return *json_out != NULL ? LMC_OK : LMC_ERR_NOMEM;
}

lmc_status lmc_sm_config_digest(const lmc_sm_config *cfg, char **json_out, char digest_hex[65])
{
    if (json_out != NULL)
        *json_out = NULL;
    size_t len = 0;
    char *text = config_json_text(cfg, &len);
    if (text == NULL)
        return LMC_ERR_NOMEM;
    lmc_sha256_hex(text, len, digest_hex);
    if (json_out != NULL)
        *json_out = text;
    else
        free(text);
    return LMC_OK;
}

lmc_status lmc_sm_config_copy(lmc_sm_config *dst, const lmc_sm_config *src)
{
    *dst = *src;
    dst->shm_name = NULL;
    dst->eviction_policy = NULL;
    dst->store_policy = NULL;
    dst->prefetch_policy = NULL;
    dst->l2_adapters = NULL;
    dst->n_l2_adapters = 0;

    if (set_string(&dst->shm_name, src->shm_name) != LMC_OK ||
        set_string(&dst->eviction_policy, src->eviction_policy) != LMC_OK ||
        set_string(&dst->store_policy, src->store_policy) != LMC_OK ||
        set_string(&dst->prefetch_policy, src->prefetch_policy) != LMC_OK)
        goto fail;
    if (src->n_l2_adapters > 0) {
        dst->l2_adapters = calloc(src->n_l2_adapters, sizeof(*dst->l2_adapters));
        if (dst->l2_adapters == NULL)
            goto fail;
        for (size_t i = 0; i < src->n_l2_adapters; i++) {
            dst->l2_adapters[i] = lmc_json_copy(src->l2_adapters[i]);
            if (dst->l2_adapters[i] == NULL)
                goto fail;
            dst->n_l2_adapters++;
        }
    }
    return LMC_OK;

fail:
    lmc_sm_config_free(dst);
    return LMC_ERR_NOMEM;
}
