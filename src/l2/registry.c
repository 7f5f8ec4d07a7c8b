/*
 * registry.c -- the table of L2 adapter types.
 *
 * Owns: the constant list of registered types. Adding a type is one line
 * here plus its own file. Read-only after compilation, so any thread may
 * call these functions.
 */
#include <string.h>

#include "l2/adapter.h"

static const lmc_l2_adapter_ops *const g_types[] = {
    &lmc_l2_fault_inject_ops,
    &lmc_l2_fs_ops,
    &lmc_l2_mock_ops,
    &lmc_l2_resp_ops,
};

#define N_TYPES (sizeof(g_types) / sizeof(g_types[0]))

const lmc_l2_adapter_ops *lmc_l2_find_type(const char *type)
{
    if (type == NULL)
        return NULL;
    for (size_t i = 0; i < N_TYPES; i++) {
        if (strcmp(g_types[i]->type, type) == 0)
            return g_types[i];
    }
    return NULL;
}

const char *lmc_l2_type_names(void)
{
    /* Kept in step with g_types by the registry test. */
    return "fault_inject, fs, mock, resp";
}
