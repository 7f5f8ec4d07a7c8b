/*
 * ops.c -- the rows of trace/ops.def as data (see ops.h).
 *
 * Each row expands twice: once into its argument array, once into its
 * slot of the op table, indexed by the enum that ops.h derives from the
 * same rows, so the three cannot disagree.
 */
#include "trace/ops.h"

#include <string.h>

#include "trace/format.h"

#define LMC_TRACE_ARG(param, KIND)                                                                 \
    {                                                                                              \
        param, sizeof(param) - 1, LMC_TRACE_ARG_##KIND                                             \
    }

#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    static const lmc_trace_arg_spec args_##name[] = {__VA_ARGS__};                                 \
    _Static_assert(sizeof(args_##name) / sizeof(args_##name[0]) <= LMC_TRACE_MAX_ARGS,             \
                   "trace op " #name ": raise LMC_TRACE_MAX_ARGS");
#include "trace/ops.def"
#undef LMC_TRACE_OP

static const lmc_trace_op_info ops[LMC_TRACE_OP_COUNT_] = {
#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    [LMC_TRACE_OP_##ID] = {LMC_TRACE_QUALNAME_PREFIX method, #name, args_##name,                   \
                           sizeof(args_##name) / sizeof(args_##name[0])},
#include "trace/ops.def"
#undef LMC_TRACE_OP
};

const lmc_trace_op_info *lmc_trace_op_get(lmc_trace_op op)
{
    return op > LMC_TRACE_OP_NONE && op < LMC_TRACE_OP_COUNT_ ? &ops[op] : NULL;
}

const char *lmc_trace_op_qualname(lmc_trace_op op)
{
    const lmc_trace_op_info *info = lmc_trace_op_get(op);
    return info ? info->qualname : NULL;
}

const char *lmc_trace_qualname_method(const char *q, size_t len, size_t *method_len)
{
    size_t plen = sizeof(LMC_TRACE_QUALNAME_PREFIX) - 1;
    if (q == NULL || len <= plen || memcmp(q, LMC_TRACE_QUALNAME_PREFIX, plen) != 0)
        return NULL;
    *method_len = len - plen;
    return q + plen;
}

bool lmc_trace_op_is_method(const char *s, size_t len)
{
    size_t plen = sizeof(LMC_TRACE_QUALNAME_PREFIX) - 1;
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++) {
        const char *q = ops[op].qualname;
        if (strlen(q) == plen + len && memcmp(q + plen, s, len) == 0)
            return true;
    }
    return false;
}
