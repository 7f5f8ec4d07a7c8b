/*
 * fuzz_flags.c -- libFuzzer target: a StorageManager command line.
 *
 * The input is split on NUL bytes into arguments (argv[0] is a fixed
 * program name), then lmc_sm_config_init + lmc_sm_config_parse_all (every
 * flag's value parsing, --l2-adapter JSON validation, the required-flag and
 * cross checks) + lmc_sm_config_free. On success the config is also turned
 * into its JSON form and digest, as the recorder's header does.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "storage/config.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmc_log_set_level(LMC_LOG_OFF);
    /* One NUL-terminated copy; each argument is a slice of it. */
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "lmcache";
    for (size_t pos = 0; pos < size && argc < MAX_ARGS;) {
        argv[argc++] = buf + pos;
        pos += strlen(buf + pos) + 1;
    }
    argv[argc] = NULL;

    lmc_sm_config cfg;
    if (lmc_sm_config_init(&cfg) == LMC_OK) {
        lmc_error err;
        if (lmc_sm_config_parse_all(&cfg, argc, argv, &err) == LMC_OK) {
            lmc_json_free(lmc_sm_config_to_json(&cfg));
            char *json = NULL;
            char digest[65];
            if (lmc_sm_config_digest(&cfg, &json, digest) == LMC_OK)
                free(json);
            lmc_sm_config copy;
            if (lmc_sm_config_copy(&copy, &cfg) == LMC_OK)
                lmc_sm_config_free(&copy);
        }
        lmc_sm_config_free(&cfg);
    }
    free(buf);
    return 0;
}
