/*
 * fuzz_l2_config.c -- libFuzzer target: one `--l2-adapter` JSON text.
 *
 * The input is parsed with lmc_json_parse (jansson, then the project's
 * tree) and, when it parses, validated with lmc_l2_check_config (the common
 * keys and every registered adapter type's own checks). The tree is also
 * dumped back (lmc_json_dumps, sorted and indented) to cover the emitter.
 * Validation is pure: nothing is created, opened or connected.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/log.h"
#include "l2/adapter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmc_log_set_level(LMC_LOG_OFF);
    lmc_json *cfg = NULL;
    lmc_error err;
    if (lmc_json_parse((const char *)data, size, &cfg, &err) != LMC_OK)
        return 0;
    (void)lmc_l2_check_config(cfg, &err);
    free(lmc_json_dumps(cfg, 0, -1, NULL));
    free(lmc_json_dumps(cfg, LMC_JSON_SORT_KEYS, 2, NULL));
    lmc_json_free(cfg);
    return 0;
}
