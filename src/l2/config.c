/*
 * config.c -- validation of one `--l2-adapter` JSON object.
 *
 * Owns: the checks of the keys every adapter type shares (type, shared,
 * eviction, persist_enabled, serde, virtual_latency_us,
 * virtual_bandwidth_gbps) and the field helpers the types use for
 * their own keys, so that every message has the same shape:
 *   --l2-adapter: field 'base_path' of type 'fs' is required
 * Pure functions over a borrowed lmc_json; any thread. Eviction policy
 * names are the eviction registry's (storage/eviction.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2/adapter_impl.h"
#include "storage/eviction.h"

#define PREFIX "--l2-adapter"

static const char *const g_common_keys[] = {"type",
                                            "shared",
                                            "eviction",
                                            "persist_enabled",
                                            "serde",
                                            "virtual_latency_us",
                                            "virtual_bandwidth_gbps",
                                            NULL};

/* The virtual-time model's bounds: a latency of at most an hour, and at least a byte a second. */
#define MAX_VIRTUAL_LATENCY_US 3600e6

static const char *const g_eviction_keys[] = {"eviction_policy",        "trigger_watermark",
                                              "eviction_ratio",         "extra_logging_enabled",
                                              "extra_logging_interval", NULL};

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list[i] != NULL; i++) {
        if (strcmp(list[i], s) == 0)
            return true;
    }
    return false;
}

bool lmc_l2_config_is_common_key(const char *key)
{
    return key != NULL && in_list(g_common_keys, key);
}

/* The value as JSON text for "(got ...)", shortened so a huge value cannot flood a message. */
static void describe(const lmc_json *v, char *buf, size_t len)
{
    char *text = lmc_json_dumps(v, 0, -1, NULL);
    if (text == NULL) {
        snprintf(buf, len, "a %s", lmc_json_type_name(lmc_json_type_of(v)));
        return;
    }
    if (strlen(text) > 64)
        snprintf(buf, len, "%.61s...", text);
    else
        snprintf(buf, len, "%s", text);
    free(text);
}

lmc_status lmc_l2_config_bad_value(lmc_error *err, const char *type, const char *field,
                                   const lmc_json *v, const char *expectation)
{
    char got[80];
    describe(v, got, sizeof(got));
    return lmc_error_set(err, LMC_ERR_INVALID,
                         PREFIX ": field '%s' of type '%s' must be %s (got %s)", field, type,
                         expectation, got);
}

static lmc_status missing(lmc_error *err, const char *type, const char *field)
{
    return lmc_error_set(err, LMC_ERR_INVALID, PREFIX ": field '%s' of type '%s' is required",
                         field, type);
}

lmc_status lmc_l2_config_check_fields(const lmc_json *cfg, const char *type,
                                      const char *const *allowed, lmc_error *err)
{
    for (size_t i = 0; i < lmc_json_size(cfg); i++) {
        const char *key = lmc_json_object_key_at(cfg, i);
        if (lmc_l2_config_is_common_key(key) || (allowed != NULL && in_list(allowed, key)))
            continue;
        return lmc_error_set(err, LMC_ERR_INVALID, PREFIX ": unknown field '%s' for type '%s'", key,
                             type);
    }
    return LMC_OK;
}

lmc_status lmc_l2_config_string(const lmc_json *cfg, const char *type, const char *field,
                                bool required, const char **out, lmc_error *err)
{
    *out = NULL;
    const lmc_json *v = lmc_json_object_get(cfg, field);
    if (v == NULL)
        return required ? missing(err, type, field) : LMC_OK;
    size_t len = 0;
    const char *s = lmc_json_get_string(v, &len);
    if (s == NULL || len == 0)
        return lmc_l2_config_bad_value(err, type, field, v, "a non-empty string");
    if (strlen(s) != len)
        return lmc_l2_config_bad_value(err, type, field, v, "a string without NUL characters");
    *out = s;
    return LMC_OK;
}

lmc_status lmc_l2_config_bool(const lmc_json *cfg, const char *type, const char *field, bool dflt,
                              bool *out, lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(cfg, field);
    if (v == NULL) {
        *out = dflt;
        return LMC_OK;
    }
    if (lmc_json_type_of(v) != LMC_JSON_BOOL)
        return lmc_l2_config_bad_value(err, type, field, v, "true or false");
    *out = lmc_json_get_bool(v);
    return LMC_OK;
}

static bool is_number(const lmc_json *v)
{
    lmc_json_type t = lmc_json_type_of(v);
    return t == LMC_JSON_INT || t == LMC_JSON_FLOAT;
}

lmc_status lmc_l2_config_number(const lmc_json *cfg, const char *type, const char *field,
                                bool required, double min, bool min_exclusive, double dflt,
                                double *out, lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(cfg, field);
    if (v == NULL) {
        if (required)
            return missing(err, type, field);
        *out = dflt;
        return LMC_OK;
    }
    double d = lmc_json_get_number(v);
    if (!is_number(v) || !isfinite(d) || (min_exclusive ? d <= min : d < min)) {
        char expectation[64];
        char bound[32];
        lmc_json_format_float(min, bound, sizeof(bound));
        /* "0.0" reads oddly in a message about a bound; print integral bounds as integers. */
        if (min == floor(min) && fabs(min) < 1e15)
            snprintf(bound, sizeof(bound), "%.0f", min);
        snprintf(expectation, sizeof(expectation), "a number %s %s",
                 min_exclusive ? ">" : ">=", bound);
        return lmc_l2_config_bad_value(err, type, field, v, expectation);
    }
    *out = d;
    return LMC_OK;
}

lmc_status lmc_l2_config_positive_int(const lmc_json *cfg, const char *type, const char *field,
                                      int64_t dflt, int64_t *out, lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(cfg, field);
    if (v == NULL) {
        *out = dflt;
        return LMC_OK;
    }
    if (lmc_json_type_of(v) != LMC_JSON_INT || lmc_json_get_int(v) <= 0)
        return lmc_l2_config_bad_value(err, type, field, v, "an integer > 0");
    *out = lmc_json_get_int(v);
    return LMC_OK;
}

/* A number in (0, 1], the range of both eviction fractions. */
static lmc_status check_fraction(const lmc_json *ev, const char *type, const char *field,
                                 lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(ev, field);
    if (v == NULL)
        return LMC_OK;
    double d = lmc_json_get_number(v);
    if (!is_number(v) || !(d > 0.0 && d <= 1.0)) {
        char name[64];
        snprintf(name, sizeof(name), "eviction.%s", field);
        return lmc_l2_config_bad_value(err, type, name, v, "a number in (0, 1]");
    }
    return LMC_OK;
}

static lmc_status check_eviction(const lmc_json *ev, const char *type, lmc_error *err)
{
    if (lmc_json_type_of(ev) != LMC_JSON_OBJECT)
        return lmc_l2_config_bad_value(err, type, "eviction", ev, "an object");
    for (size_t i = 0; i < lmc_json_size(ev); i++) {
        const char *key = lmc_json_object_key_at(ev, i);
        if (!in_list(g_eviction_keys, key))
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 PREFIX ": unknown field 'eviction.%s' for type '%s'", key, type);
    }
    const lmc_json *policy = lmc_json_object_get(ev, "eviction_policy");
    if (policy == NULL)
        return missing(err, type, "eviction.eviction_policy");
    const char *name = lmc_json_get_string(policy, NULL);
    if (name == NULL || lmc_eviction_find(name) == NULL) {
        char expectation[300];
        snprintf(expectation, sizeof(expectation), "one of %s", lmc_eviction_policy_list());
        return lmc_l2_config_bad_value(err, type, "eviction.eviction_policy", policy, expectation);
    }
    lmc_status st = check_fraction(ev, type, "trigger_watermark", err);
    if (st == LMC_OK)
        st = check_fraction(ev, type, "eviction_ratio", err);
    if (st != LMC_OK)
        return st;
    const lmc_json *flag = lmc_json_object_get(ev, "extra_logging_enabled");
    if (flag != NULL && lmc_json_type_of(flag) != LMC_JSON_BOOL)
        return lmc_l2_config_bad_value(err, type, "eviction.extra_logging_enabled", flag,
                                       "true or false");
    const lmc_json *interval = lmc_json_object_get(ev, "extra_logging_interval");
    if (interval != NULL && (!is_number(interval) || !(lmc_json_get_number(interval) > 0.0) ||
                             !isfinite(lmc_json_get_number(interval))))
        return lmc_l2_config_bad_value(err, type, "eviction.extra_logging_interval", interval,
                                       "a number > 0");
    return LMC_OK;
}

/* virtual_latency_us in [0, 1 h] and virtual_bandwidth_gbps >= one byte per second. */
static lmc_status check_virtual_model(const lmc_json *cfg, const char *type, lmc_error *err)
{
    double us, gbps;
    lmc_status st =
        lmc_l2_config_number(cfg, type, "virtual_latency_us", false, 0.0, false, 0.0, &us, err);
    if (st == LMC_OK && us > MAX_VIRTUAL_LATENCY_US)
        st = lmc_l2_config_bad_value(err, type, "virtual_latency_us",
                                     lmc_json_object_get(cfg, "virtual_latency_us"),
                                     "a number in [0, 3600000000]");
    if (st == LMC_OK)
        st = lmc_l2_config_number(cfg, type, "virtual_bandwidth_gbps", false, 0.0, true, 1.0, &gbps,
                                  err);
    /* Compared as a double: a huge value must not overflow a cast. */
    if (st == LMC_OK && gbps * 1e9 < 1.0)
        st = lmc_l2_config_bad_value(err, type, "virtual_bandwidth_gbps",
                                     lmc_json_object_get(cfg, "virtual_bandwidth_gbps"),
                                     "at least one byte per second");
    return st;
}

lmc_status lmc_l2_check_config(const lmc_json *cfg, lmc_error *err)
{
    if (cfg == NULL || lmc_json_type_of(cfg) != LMC_JSON_OBJECT)
        return lmc_error_set(err, LMC_ERR_INVALID, PREFIX ": expected a JSON object");
    const lmc_json *tv = lmc_json_object_get(cfg, "type");
    if (tv == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, PREFIX ": field 'type' is required (known: %s)",
                             lmc_l2_type_names());
    const char *type = lmc_json_get_string(tv, NULL);
    if (type == NULL) {
        char got[80];
        describe(tv, got, sizeof(got));
        return lmc_error_set(err, LMC_ERR_INVALID,
                             PREFIX ": field 'type' must be a string (got %s)", got);
    }
    const lmc_l2_adapter_ops *ops = lmc_l2_find_type(type);
    if (ops == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, PREFIX ": unknown type '%s' (known: %s)", type,
                             lmc_l2_type_names());
    if (lmc_json_object_get(cfg, "serde") != NULL)
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             PREFIX ": field 'serde' is not supported by this build");
    bool b;
    lmc_status st = lmc_l2_config_bool(cfg, type, "shared", false, &b, err);
    if (st == LMC_OK)
        st = lmc_l2_config_bool(cfg, type, "persist_enabled", true, &b, err);
    if (st != LMC_OK)
        return st;
    const lmc_json *ev = lmc_json_object_get(cfg, "eviction");
    if (ev != NULL && (st = check_eviction(ev, type, err)) != LMC_OK)
        return st;
    if ((st = check_virtual_model(cfg, type, err)) != LMC_OK)
        return st;
    return ops->check_config(cfg, err);
}
