/*
 * registry.c -- the table of L2 adapter types.
 *
 * Owns: the constant list of registered types, the one list of them: the
 * names for messages and --help are derived from it. Adding a type is one
 * line here plus its own file. The table is read-only after compilation and
 * its derived name list is built once (pthread_once), so any thread may
 * call these functions.
 */
#include <pthread.h>
#include <string.h>

#include "core/names.h"
#include "l2/adapter_impl.h"

static const lmc_l2_adapter_ops *const g_types[] = {
    &lmc_l2_fault_inject_ops,
    &lmc_l2_fs_ops,
    &lmc_l2_mock_ops,
    &lmc_l2_resp_ops,
};

#define N_TYPES (sizeof(g_types) / sizeof(g_types[0]))

/* Derived from g_types at first use. */
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;
static char g_names[256];

static void build_names(void)
{
    const char *names[N_TYPES];
    for (size_t i = 0; i < N_TYPES; i++)
        names[i] = g_types[i]->type;
    lmc_names_join(names, N_TYPES, ", ", NULL, g_names, sizeof(g_names));
}

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

size_t lmc_l2_type_count(void)
{
    return N_TYPES;
}

const lmc_l2_adapter_ops *lmc_l2_type_at(size_t i)
{
    return i < N_TYPES ? g_types[i] : NULL;
}

const char *lmc_l2_type_names(void)
{
    pthread_once(&g_names_once, build_names);
    return g_names;
}
