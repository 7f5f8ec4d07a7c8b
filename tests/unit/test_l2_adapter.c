/*
 * test_l2_adapter.c -- the L2 adapter base and registry: config
 * validation, task ids, result hand-off, usage accounting, listeners and
 * status. The base is exercised through the mock type (fast, in memory);
 * fs and mock behaviour have their own files.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"

#define MOCK_CFG "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 100}"

/* ------------------------------------------------------------------ */
/* Config validation                                                    */
/* ------------------------------------------------------------------ */

typedef struct config_case {
    const char *json;
    const char *message; /* the exact expected message */
} config_case;

static void expect_rejected(const config_case *c)
{
    lmc_json *cfg = l2_json(c->json);
    assert_non_null(cfg);
    lmc_error err;
    lmc_error_clear(&err);
    lmc_status st = lmc_l2_check_config(cfg, &err);
    if (st == LMC_OK || strcmp(err.msg, c->message) != 0)
        print_error("config %s\n  expected: %s\n  got:      %s\n", c->json, c->message, err.msg);
    assert_int_not_equal(st, LMC_OK);
    assert_string_equal(err.msg, c->message);
    /* create validates the same way */
    lmc_l2_adapter *a = NULL;
    assert_int_not_equal(lmc_l2_adapter_create(cfg, &a, NULL), LMC_OK);
    assert_null(a);
    lmc_json_free(cfg);
}

static void expect_accepted(const char *json)
{
    lmc_json *cfg = l2_json(json);
    assert_non_null(cfg);
    lmc_error err;
    lmc_error_clear(&err);
    lmc_status st = lmc_l2_check_config(cfg, &err);
    if (st != LMC_OK)
        print_error("config %s rejected: %s\n", json, err.msg);
    assert_int_equal(st, LMC_OK);
    lmc_json_free(cfg);
}

static void test_config_rejects_bad_top_level(void **state)
{
    (void)state;
    static const config_case cases[] = {
        {"[1, 2]", "--l2-adapter: expected a JSON object"},
        {"\"fs\"", "--l2-adapter: expected a JSON object"},
        {"{}", "--l2-adapter: field 'type' is required (known: fault_inject, fs, mock, resp)"},
        {"{\"type\": 3}", "--l2-adapter: field 'type' must be a string (got 3)"},
        {"{\"type\": \"xyz\"}",
         "--l2-adapter: unknown type 'xyz' (known: fault_inject, fs, mock, resp)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_rejected(&cases[i]);
    lmc_error err;
    assert_int_equal(lmc_l2_check_config(NULL, &err), LMC_ERR_INVALID);
}

static void test_config_rejects_each_bad_fs_field(void **state)
{
    (void)state;
    static const config_case cases[] = {
        {"{\"type\": \"fs\"}", "--l2-adapter: field 'base_path' of type 'fs' is required"},
        {"{\"type\": \"fs\", \"base_path\": \"\"}",
         "--l2-adapter: field 'base_path' of type 'fs' must be a non-empty string (got \"\")"},
        {"{\"type\": \"fs\", \"base_path\": 7}",
         "--l2-adapter: field 'base_path' of type 'fs' must be a non-empty string (got 7)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"foo\": 1}",
         "--l2-adapter: unknown field 'foo' for type 'fs'"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"max_capacity_gb\": -1}",
         "--l2-adapter: field 'max_capacity_gb' of type 'fs' must be a number >= 0 (got -1)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"max_capacity_gb\": \"1\"}",
         "--l2-adapter: field 'max_capacity_gb' of type 'fs' must be a number >= 0 (got \"1\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"max_capacity_gb\": true}",
         "--l2-adapter: field 'max_capacity_gb' of type 'fs' must be a number >= 0 (got true)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"relative_tmp_dir\": \"/abs\"}",
         "--l2-adapter: field 'relative_tmp_dir' of type 'fs' must be a relative path without "
         "'..' (got \"/abs\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"relative_tmp_dir\": \"a/../../b\"}",
         "--l2-adapter: field 'relative_tmp_dir' of type 'fs' must be a relative path without "
         "'..' (got \"a/../../b\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"relative_tmp_dir\": \"..\"}",
         "--l2-adapter: field 'relative_tmp_dir' of type 'fs' must be a relative path without "
         "'..' (got \"..\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"read_ahead_size\": 0}",
         "--l2-adapter: field 'read_ahead_size' of type 'fs' must be an integer > 0 (got 0)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"read_ahead_size\": 1.5}",
         "--l2-adapter: field 'read_ahead_size' of type 'fs' must be an integer > 0 (got 1.5)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"use_odirect\": \"yes\"}",
         "--l2-adapter: field 'use_odirect' of type 'fs' must be true or false (got \"yes\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"recover_on_start\": 1}",
         "--l2-adapter: field 'recover_on_start' of type 'fs' must be true or false (got 1)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_rejected(&cases[i]);
}

static void test_config_rejects_each_bad_mock_field(void **state)
{
    (void)state;
    static const config_case cases[] = {
        {"{\"type\": \"mock\", \"mock_bandwidth_gb\": 1}",
         "--l2-adapter: field 'max_size_gb' of type 'mock' is required"},
        {"{\"type\": \"mock\", \"max_size_gb\": 1}",
         "--l2-adapter: field 'mock_bandwidth_gb' of type 'mock' is required"},
        {"{\"type\": \"mock\", \"max_size_gb\": 0, \"mock_bandwidth_gb\": 1}",
         "--l2-adapter: field 'max_size_gb' of type 'mock' must be a number > 0 (got 0)"},
        {"{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": -0.5}",
         "--l2-adapter: field 'mock_bandwidth_gb' of type 'mock' must be a number > 0 (got -0.5)"},
        {"{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, \"base_path\": \"x\"}",
         "--l2-adapter: unknown field 'base_path' for type 'mock'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_rejected(&cases[i]);
}

static void test_config_rejects_each_bad_common_field(void **state)
{
    (void)state;
    static const config_case cases[] = {
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"serde\": {\"type\": \"fp8\"}}",
         "--l2-adapter: field 'serde' is not supported by this build"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"shared\": \"no\"}",
         "--l2-adapter: field 'shared' of type 'fs' must be true or false (got \"no\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"persist_enabled\": 0}",
         "--l2-adapter: field 'persist_enabled' of type 'fs' must be true or false (got 0)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": \"LRU\"}",
         "--l2-adapter: field 'eviction' of type 'fs' must be an object (got \"LRU\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": {}}",
         "--l2-adapter: field 'eviction.eviction_policy' of type 'fs' is required"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": {\"eviction_policy\": "
         "\"FIFO\"}}",
         "--l2-adapter: field 'eviction.eviction_policy' of type 'fs' must be one of LRU, ARC, "
         "S3FIFO, IsolatedLRU, noop (got \"FIFO\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": {\"eviction_policy\": "
         "\"LRU\", \"trigger_watermark\": 0}}",
         "--l2-adapter: field 'eviction.trigger_watermark' of type 'fs' must be a number in (0, "
         "1] (got 0)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": {\"eviction_policy\": "
         "\"LRU\", \"trigger_watermark\": 1.5}}",
         "--l2-adapter: field 'eviction.trigger_watermark' of type 'fs' must be a number in (0, "
         "1] (got 1.5)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": {\"eviction_policy\": "
         "\"LRU\", \"eviction_ratio\": 0}}",
         "--l2-adapter: field 'eviction.eviction_ratio' of type 'fs' must be a number in (0, 1] "
         "(got 0)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"eviction\": {\"eviction_policy\": "
         "\"LRU\", \"size\": 3}}",
         "--l2-adapter: unknown field 'eviction.size' for type 'fs'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_rejected(&cases[i]);
}

static void test_config_accepts_valid_objects(void **state)
{
    (void)state;
    expect_accepted("{\"type\": \"fs\", \"base_path\": \"/tmp/x\"}");
    expect_accepted("{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"relative_tmp_dir\": "
                    "\"a/b..c\", \"read_ahead_size\": 4096, \"use_odirect\": true, "
                    "\"max_capacity_gb\": 0.5, \"recover_on_start\": false, \"shared\": true, "
                    "\"persist_enabled\": false, \"eviction\": {\"eviction_policy\": \"ARC\", "
                    "\"trigger_watermark\": 1, \"eviction_ratio\": 0.1}}");
    expect_accepted(MOCK_CFG);
    expect_accepted("{\"type\": \"mock\", \"max_size_gb\": 0.001, \"mock_bandwidth_gb\": 0.01, "
                    "\"eviction\": {\"eviction_policy\": \"noop\"}}");
}

static void test_config_checks_the_virtual_model_keys(void **state)
{
    (void)state;
    static const config_case cases[] = {
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"virtual_latency_us\": -1}",
         "--l2-adapter: field 'virtual_latency_us' of type 'fs' must be a number >= 0 (got -1)"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"virtual_latency_us\": \"5\"}",
         "--l2-adapter: field 'virtual_latency_us' of type 'fs' must be a number >= 0 (got \"5\")"},
        {"{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"virtual_latency_us\": 4e9}",
         "--l2-adapter: field 'virtual_latency_us' of type 'fs' must be a number in [0, "
         "3600000000] (got 4000000000.0)"},
        {"{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
         "\"virtual_bandwidth_gbps\": 0}",
         "--l2-adapter: field 'virtual_bandwidth_gbps' of type 'mock' must be a number > 0 (got "
         "0)"},
        {"{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
         "\"virtual_bandwidth_gbps\": 1e-10}",
         "--l2-adapter: field 'virtual_bandwidth_gbps' of type 'mock' must be at least one byte "
         "per second (got 1e-10)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_rejected(&cases[i]);
    /* Common keys: every type takes them. */
    expect_accepted("{\"type\": \"fs\", \"base_path\": \"/tmp/x\", \"virtual_latency_us\": 0, "
                    "\"virtual_bandwidth_gbps\": 1e300}");
    expect_accepted("{\"type\": \"resp\", \"virtual_latency_us\": 250.5, "
                    "\"virtual_bandwidth_gbps\": 0.5}");
    expect_accepted("{\"type\": \"fault_inject\", \"virtual_latency_us\": 1, \"inner\": "
                    "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
                    "\"virtual_bandwidth_gbps\": 3}}");
}

static void test_virtual_model_has_per_type_defaults_and_takes_the_keys(void **state)
{
    (void)state;
    lmc_l2_adapter *fs =
        l2_adapter_from(NULL, "{\"type\": \"fs\", \"base_path\": \"/tmp/lmc-vm\"}");
    assert_non_null(fs);
    lmc_l2_virtual_model m = lmc_l2_adapter_virtual_model(fs);
    assert_int_equal(m.latency_ns, 50000);
    assert_true(m.bytes_per_s == 2e9);
    lmc_l2_adapter_destroy(fs);
    l2_rmtree("/tmp/lmc-vm");

    /* mock: no latency, and its own bandwidth (GiB/s) unless the key says otherwise. */
    lmc_l2_adapter *mock = l2_adapter_from(NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, "
                                                 "\"mock_bandwidth_gb\": 4}");
    m = lmc_l2_adapter_virtual_model(mock);
    assert_int_equal(m.latency_ns, 0);
    assert_true(m.bytes_per_s == 4.0 * 1024 * 1024 * 1024);
    lmc_l2_adapter_destroy(mock);
    mock = l2_adapter_from(NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": "
                                 "4, \"virtual_latency_us\": 7.5, \"virtual_bandwidth_gbps\": 3}");
    m = lmc_l2_adapter_virtual_model(mock);
    assert_int_equal(m.latency_ns, 7500);
    assert_true(m.bytes_per_s == 3e9);
    lmc_l2_adapter_destroy(mock);

    const lmc_l2_adapter_ops *resp = lmc_l2_find_type("resp");
    assert_true(resp->virtual_latency_us == 100.0 && resp->virtual_bandwidth_gbps == 1.0);
}

/*
 * The name list is derived from the registry table, so it cannot drift:
 * every name in it resolves, in table order, and every registered type
 * appears in it exactly once.
 */
static void test_type_names_are_the_registry_table(void **state)
{
    (void)state;
    char list[256];
    snprintf(list, sizeof(list), "%s", lmc_l2_type_names());
    size_t n_types = lmc_l2_type_count();
    assert_true(n_types >= 4);
    assert_null(lmc_l2_type_at(n_types));
    unsigned seen[16] = {0};
    assert_true(n_types <= 16);
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(list, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
        const lmc_l2_adapter_ops *ops = lmc_l2_find_type(tok);
        assert_non_null(ops);
        assert_true(k < n_types);
        assert_ptr_equal(ops, lmc_l2_type_at(k)); /* table order */
        seen[k]++;
        k++;
    }
    assert_int_equal(k, n_types);
    for (size_t i = 0; i < n_types; i++) {
        assert_int_equal(seen[i], 1);
        assert_non_null(lmc_l2_type_at(i)->help);
    }
}

static void test_registry_lists_every_type(void **state)
{
    (void)state;
    assert_ptr_equal(lmc_l2_find_type("fault_inject"), &lmc_l2_fault_inject_ops);
    assert_ptr_equal(lmc_l2_find_type("fs"), &lmc_l2_fs_ops);
    assert_ptr_equal(lmc_l2_find_type("mock"), &lmc_l2_mock_ops);
    assert_ptr_equal(lmc_l2_find_type("resp"), &lmc_l2_resp_ops);
    assert_null(lmc_l2_find_type("FS"));
    assert_null(lmc_l2_find_type(NULL));
    assert_non_null(lmc_l2_fs_ops.help);
    assert_non_null(lmc_l2_mock_ops.help);
    assert_non_null(lmc_l2_resp_ops.help);
}

static void test_create_reports_io_error_naming_base_path(void **state)
{
    (void)state;
    char dir[64];
    assert_true(l2_tmpdir(dir));
    char file[128];
    snprintf(file, sizeof(file), "%s/plain", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    lmc_error err;
    lmc_l2_adapter *a =
        l2_adapter_from(&err, "{\"type\": \"fs\", \"base_path\": \"%s/sub\"}", file);
    assert_null(a);
    assert_int_equal(err.code, LMC_ERR_IO);
    assert_non_null(strstr(err.msg, "base_path"));
    assert_non_null(strstr(err.msg, file));
    l2_rmtree(dir);
}

/* ------------------------------------------------------------------ */
/* Common keys as parsed at create                                      */
/* ------------------------------------------------------------------ */

static void test_eviction_settings_get_defaults(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(
        NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
              "\"eviction\": {\"eviction_policy\": \"LRU\", \"eviction_ratio\": 0.5}}");
    assert_non_null(a);
    lmc_l2_eviction_settings s;
    assert_true(lmc_l2_adapter_eviction_settings(a, &s));
    assert_string_equal(s.policy, "LRU");
    assert_true(s.trigger_watermark == 0.8);
    assert_true(s.eviction_ratio == 0.5);
    const lmc_json *ev = lmc_l2_adapter_eviction_config(a);
    assert_non_null(ev);
    assert_true(lmc_json_get_number(lmc_json_object_get(ev, "trigger_watermark")) == 0.8);
    assert_false(lmc_l2_adapter_is_shared(a));
    assert_true(lmc_l2_adapter_persist_enabled(a));
    lmc_l2_adapter_destroy(a);
}

static void test_no_eviction_object_means_no_settings(void **state)
{
    (void)state;
    lmc_l2_adapter *a =
        l2_adapter_from(NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
                              "\"shared\": true, \"persist_enabled\": false}");
    assert_non_null(a);
    lmc_l2_eviction_settings s;
    assert_false(lmc_l2_adapter_eviction_settings(a, &s));
    assert_null(lmc_l2_adapter_eviction_config(a));
    assert_true(lmc_l2_adapter_is_shared(a));
    assert_false(lmc_l2_adapter_persist_enabled(a));
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* fds, task ids, results                                               */
/* ------------------------------------------------------------------ */

static void test_fds_are_distinct_across_kinds_and_adapters(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    lmc_l2_adapter *b = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    assert_non_null(b);
    int fds[6] = {lmc_l2_adapter_store_fd(a),  lmc_l2_adapter_lookup_fd(a),
                  lmc_l2_adapter_load_fd(a),   lmc_l2_adapter_store_fd(b),
                  lmc_l2_adapter_lookup_fd(b), lmc_l2_adapter_load_fd(b)};
    for (int i = 0; i < 6; i++) {
        assert_true(fds[i] >= 0);
        for (int j = i + 1; j < 6; j++)
            assert_int_not_equal(fds[i], fds[j]);
    }
    assert_string_equal(lmc_l2_adapter_type(a), "mock");
    lmc_l2_adapter_destroy(a);
    lmc_l2_adapter_destroy(b);
}

static void test_task_ids_are_unique_and_increasing_from_zero(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    lmc_object_key key = l2_key("m", 1, 0, 0, NULL);
    uint8_t buf[16] = {0};
    lmc_memory_obj obj = {buf, sizeof(buf), sizeof(buf), 0};
    uint64_t ids[6];
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &key, 1, &ids[0]), LMC_OK);
    assert_int_equal(lmc_l2_adapter_submit_store(a, &key, &obj, 1, &ids[1]), LMC_OK);
    assert_int_equal(lmc_l2_adapter_submit_load(a, &key, &obj, 1, &ids[2]), LMC_OK);
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &key, 1, &ids[3]), LMC_OK);
    assert_int_equal(lmc_l2_adapter_submit_store(a, &key, &obj, 1, &ids[4]), LMC_OK);
    assert_int_equal(lmc_l2_adapter_submit_load(a, &key, &obj, 1, &ids[5]), LMC_OK);
    assert_int_equal(ids[0], 0);
    for (int i = 1; i < 6; i++)
        assert_int_equal(ids[i], ids[i - 1] + 1);
    lmc_bitmap bm;
    for (int i = 0; i < 6; i += 3) {
        assert_true(l2_wait_lookup(a, ids[i], &bm));
        lmc_bitmap_free(&bm);
        assert_true(l2_wait_load(a, ids[i + 2], &bm));
        lmc_bitmap_free(&bm);
    }
    lmc_l2_store_result r[2];
    assert_true(l2_wait_stores(a, 2, r));
    lmc_l2_adapter_destroy(a);
}

static void test_each_result_is_returned_once(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    lmc_object_key key = l2_key("m", 1, 0, 0, NULL);
    uint8_t buf[16] = {0};
    lmc_memory_obj obj = {buf, sizeof(buf), sizeof(buf), 0};
    uint64_t sid, lid, did;
    assert_int_equal(lmc_l2_adapter_submit_store(a, &key, &obj, 1, &sid), LMC_OK);
    int64_t result;
    assert_true(l2_wait_store(a, sid, &result));
    assert_int_equal(result, 16);
    lmc_l2_store_result *more = NULL;
    assert_int_equal(lmc_l2_adapter_pop_completed_stores(a, &more), 0);
    assert_null(more);

    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &key, 1, &lid), LMC_OK);
    lmc_bitmap bm;
    assert_true(l2_wait_lookup(a, lid, &bm));
    lmc_bitmap_free(&bm);
    assert_false(lmc_l2_adapter_take_lookup_result(a, lid, &bm));

    assert_int_equal(lmc_l2_adapter_submit_load(a, &key, &obj, 1, &did), LMC_OK);
    assert_true(l2_wait_load(a, did, &bm));
    lmc_bitmap_free(&bm);
    assert_false(lmc_l2_adapter_take_load_result(a, did, &bm));
    /* a lookup id is not a load id */
    assert_false(lmc_l2_adapter_take_load_result(a, lid, &bm));
    lmc_l2_adapter_submit_unlock(a, &key, 1);
    lmc_l2_adapter_destroy(a);
}

static void test_submit_rejects_missing_arrays(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    lmc_object_key key = l2_key("m", 1, 0, 0, NULL);
    uint64_t id;
    assert_int_equal(lmc_l2_adapter_submit_store(a, &key, NULL, 1, &id), LMC_ERR_INVALID);
    assert_int_equal(lmc_l2_adapter_submit_load(a, NULL, NULL, 1, &id), LMC_ERR_INVALID);
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &key, 1, NULL), LMC_ERR_INVALID);
    /* an empty task is fine and completes */
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, NULL, 0, &id), LMC_OK);
    lmc_bitmap bm;
    assert_true(l2_wait_lookup(a, id, &bm));
    assert_int_equal(bm.size, 0);
    lmc_bitmap_free(&bm);
    lmc_l2_adapter_destroy(a);
}

static void test_destroy_with_tasks_in_flight_does_not_hang_or_leak(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(
        NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 0.001}");
    assert_non_null(a);
    static uint8_t buf[1 << 20];
    lmc_memory_obj obj = {buf, sizeof(buf), sizeof(buf), 0};
    for (uint32_t i = 0; i < 8; i++) {
        lmc_object_key key = l2_key("m", i, 0, 0, NULL);
        uint64_t id;
        assert_int_equal(lmc_l2_adapter_submit_store(a, &key, &obj, 1, &id), LMC_OK);
        assert_int_equal(lmc_l2_adapter_submit_lookup(a, &key, 1, &id), LMC_OK);
        assert_int_equal(lmc_l2_adapter_submit_load(a, &key, &obj, 1, &id), LMC_OK);
    }
    lmc_l2_adapter_destroy(a); /* ~8 s of simulated transfers: must return at once */
}

/* ------------------------------------------------------------------ */
/* Usage, listeners, status                                             */
/* ------------------------------------------------------------------ */

static void test_usage_fraction_is_minus_one_without_capacity(void **state)
{
    (void)state;
    lmc_l2_usage u = {100, 0};
    assert_true(lmc_l2_usage_fraction(&u) == -1.0);
    u.capacity_bytes = 400;
    assert_true(lmc_l2_usage_fraction(&u) == 0.25);
}

typedef struct capture {
    int level;
    char msg[512];
} capture;

static void capture_sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    (void)component;
    capture *c = ud;
    c->level = (int)level;
    snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

static void test_usage_underflow_clamps_at_zero_with_warning(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, "alice");
    uint64_t size = 100;
    lmc_l2_notify_stored(a, &k, &size, 1);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 100);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "alice"), 100);
    capture c = {0, ""};
    lmc_log_set_level(LMC_LOG_WARNING);
    lmc_log_set_sink(capture_sink, &c);
    size = 250;
    lmc_l2_notify_deleted(a, &k, &size, 1);
    lmc_log_set_sink(NULL, NULL);
    lmc_log_set_level(LMC_LOG_ERROR);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "alice"), 0);
    assert_int_equal(c.level, LMC_LOG_WARNING);
    assert_non_null(strstr(c.msg, "clamped at 0"));
    lmc_l2_adapter_destroy(a);
}

static void test_usage_is_kept_per_salt(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    lmc_object_key keys[3] = {l2_key("m", 1, 0, 0, "alice"), l2_key("m", 2, 0, 0, "bob"),
                              l2_key("m", 3, 0, 0, NULL)};
    uint64_t sizes[3] = {10, 20, 30};
    lmc_l2_notify_stored(a, keys, sizes, 3);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "alice"), 10);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "bob"), 20);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, ""), 30);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, NULL), 30);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "carol"), 0);
    lmc_l2_notify_deleted(a, &keys[1], &sizes[1], 1);
    lmc_l2_salt_usage *u = NULL;
    size_t n = lmc_l2_adapter_salt_usages(a, &u);
    assert_int_equal(n, 2); /* bob is at 0: positive entries only */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        assert_string_not_equal(u[i].salt, "bob");
        total += u[i].bytes;
    }
    assert_int_equal(total, 40);
    free(u);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 40);
    lmc_l2_adapter_destroy(a);
}

typedef struct events {
    size_t stored, accessed, deleted;
    uint64_t stored_bytes, deleted_bytes;
} events;

static void on_stored(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    (void)keys;
    events *e = ud;
    e->stored += n;
    for (size_t i = 0; i < n; i++)
        e->stored_bytes += sizes[i];
}

static void on_accessed(void *ud, const lmc_object_key *keys, size_t n)
{
    (void)keys;
    ((events *)ud)->accessed += n;
}

static void on_deleted(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    (void)keys;
    events *e = ud;
    e->deleted += n;
    for (size_t i = 0; i < n; i++)
        e->deleted_bytes += sizes[i];
}

static void test_listeners_hear_stored_accessed_deleted(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    events e1 = {0}, e2 = {0};
    lmc_l2_listener l1 = {on_stored, on_accessed, on_deleted, &e1};
    lmc_l2_listener l2 = {on_stored, NULL, NULL, &e2}; /* NULL callbacks are skipped */
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l1), LMC_OK);
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l2), LMC_OK);
    lmc_object_key keys[2] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL)};
    uint8_t b0[8] = {1}, b1[24] = {2};
    lmc_memory_obj objs[2] = {{b0, 8, 8, 0}, {b1, 24, 24, 0}};
    uint64_t id;
    int64_t res;
    assert_int_equal(lmc_l2_adapter_submit_store(a, keys, objs, 2, &id), LMC_OK);
    assert_true(l2_wait_store(a, id, &res));
    assert_int_equal(e1.stored, 2);
    assert_int_equal(e1.stored_bytes, 32);
    assert_int_equal(e2.stored, 2);
    lmc_bitmap bm;
    assert_int_equal(lmc_l2_adapter_submit_load(a, keys, objs, 2, &id), LMC_OK);
    assert_true(l2_wait_load(a, id, &bm));
    lmc_bitmap_free(&bm);
    assert_int_equal(e1.accessed, 2);
    lmc_l2_adapter_delete(a, keys, 1);
    assert_int_equal(e1.deleted, 1);
    assert_int_equal(e1.deleted_bytes, 8);
    assert_int_equal(e2.deleted, 0);
    lmc_l2_adapter_destroy(a);
}

static void test_listener_table_is_bounded(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(NULL, MOCK_CFG);
    assert_non_null(a);
    events e = {0};
    lmc_l2_listener l = {on_stored, NULL, NULL, &e};
    for (int i = 0; i < LMC_L2_MAX_LISTENERS; i++)
        assert_int_equal(lmc_l2_adapter_add_listener(a, &l), LMC_OK);
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l), LMC_ERR_BUSY);
    assert_int_equal(lmc_l2_adapter_add_listener(a, NULL), LMC_ERR_INVALID);
    /* a type that recovers nothing replays nothing */
    lmc_l2_adapter_replay_recovered(a, &l);
    assert_int_equal(e.stored, 0);
    lmc_l2_adapter_destroy(a);
}

static void test_report_status_has_base_fields(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(
        NULL, "{\"type\": \"mock\", \"max_size_gb\": 0.5, \"mock_bandwidth_gb\": 1}");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint64_t size = 1u << 27; /* 128 MiB of 512 MiB */
    lmc_l2_notify_stored(a, &k, &size, 1);
    lmc_json *s = lmc_l2_adapter_report_status(a);
    assert_non_null(s);
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(s, "type"), NULL), "mock");
    assert_true(lmc_json_get_bool(lmc_json_object_get(s, "is_healthy")));
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(s, "bytes_used")), 1 << 27);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(s, "capacity_bytes")), 1 << 29);
    assert_true(lmc_json_get_number(lmc_json_object_get(s, "usage_fraction")) == 0.25);
    assert_non_null(lmc_json_object_get(s, "num_objects")); /* the type's own fields follow */
    lmc_json_free(s);
    assert_true(lmc_l2_adapter_is_healthy(a));
    assert_true(lmc_l2_adapter_supports_global_eviction(a));
    lmc_l2_adapter_destroy(a);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_rejects_bad_top_level),
        cmocka_unit_test(test_config_rejects_each_bad_fs_field),
        cmocka_unit_test(test_config_rejects_each_bad_mock_field),
        cmocka_unit_test(test_config_rejects_each_bad_common_field),
        cmocka_unit_test(test_config_accepts_valid_objects),
        cmocka_unit_test(test_config_checks_the_virtual_model_keys),
        cmocka_unit_test(test_virtual_model_has_per_type_defaults_and_takes_the_keys),
        cmocka_unit_test(test_type_names_are_the_registry_table),
        cmocka_unit_test(test_registry_lists_every_type),
        cmocka_unit_test(test_create_reports_io_error_naming_base_path),
        cmocka_unit_test(test_eviction_settings_get_defaults),
        cmocka_unit_test(test_no_eviction_object_means_no_settings),
        cmocka_unit_test(test_fds_are_distinct_across_kinds_and_adapters),
        cmocka_unit_test(test_task_ids_are_unique_and_increasing_from_zero),
        cmocka_unit_test(test_each_result_is_returned_once),
        cmocka_unit_test(test_submit_rejects_missing_arrays),
        cmocka_unit_test(test_destroy_with_tasks_in_flight_does_not_hang_or_leak),
        cmocka_unit_test(test_usage_fraction_is_minus_one_without_capacity),
        cmocka_unit_test(test_usage_underflow_clamps_at_zero_with_warning),
        cmocka_unit_test(test_usage_is_kept_per_salt),
        cmocka_unit_test(test_listeners_hear_stored_accessed_deleted),
        cmocka_unit_test(test_listener_table_is_bounded),
        cmocka_unit_test(test_report_status_has_base_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
