/*
 * ops.h -- the identities of the traced StorageManager operations, derived
 * from the one table in trace/ops.def.
 *
 * Owns: the op enum, LMCache's qualname of each op and its argument list
 * (LMCache's parameter names and what each one is, in signature order).
 * Capture (trace/capture.h) tags each captured call with an op; the
 * recorder encodes a call's arguments by walking its op's list; the
 * replay's default dispatcher (replay/dispatch.c) registers one handler
 * per op. Replay includes this header, never the capture one.
 *
 * Threads: none; everything here is constant.
 */
#ifndef LMC_TRACE_OPS_H
#define LMC_TRACE_OPS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum lmc_trace_op {
    LMC_TRACE_OP_NONE = 0, /* not an op: a zeroed capture is never valid */
#define LMC_TRACE_OP(ID, name, method, ...) LMC_TRACE_OP_##ID,
#include "trace/ops.def"
#undef LMC_TRACE_OP
    LMC_TRACE_OP_COUNT_
} lmc_trace_op;

/*
 * What an argument is: which field of the captured call holds it
 * (lmc_trace_capture_args in trace/capture.h) and how the recorder writes
 * it.
 */
typedef enum lmc_trace_arg_kind {
    LMC_TRACE_ARG_KEYS,                /* .keys/.n_keys: a list of ObjectKeys */
    LMC_TRACE_ARG_LAYOUT,              /* .layout: a MemoryLayoutDesc */
    LMC_TRACE_ARG_MODE,                /* .mode: a WriteMode, written as its name */
    LMC_TRACE_ARG_EXTRA_COUNT,         /* .extra_count: an int */
    LMC_TRACE_ARG_EXTERNAL_REQUEST_ID, /* .external_request_id: a str ("" for NULL) */
    LMC_TRACE_ARG_POLICY,              /* .policy: a TrimPolicy */
} lmc_trace_arg_kind;

/* The most arguments any op has (ops.c checks every row against it). */
#define LMC_TRACE_MAX_ARGS 5

typedef struct lmc_trace_arg_spec {
    const char *name; /* LMCache's parameter name */
    size_t name_len;
    lmc_trace_arg_kind kind;
} lmc_trace_arg_spec;

typedef struct lmc_trace_op_info {
    const char *qualname; /* "lmcache.v1.distributed.storage_manager.StorageManager.<method>" */
    const char *name;     /* the table's short name: "reserve_write", "read_enter" */
    const lmc_trace_arg_spec *args; /* in LMCache's signature order */
    size_t nargs;
} lmc_trace_op_info;

/* The table row of op, or NULL when op is not an op. */
const lmc_trace_op_info *lmc_trace_op_get(lmc_trace_op op);

/* LMCache's qualname of op, or NULL when op is not an op. */
const char *lmc_trace_op_qualname(lmc_trace_op op);

/*
 * The short form of a qualname (len bytes at q): what follows
 * LMC_TRACE_QUALNAME_PREFIX ("reserve_write",
 * "read_prefetched_results.__enter__"), its length in *method_len; NULL
 * when q does not start with the prefix (a foreign qualname has no short
 * form).
 */
const char *lmc_trace_qualname_method(const char *q, size_t len, size_t *method_len);

/* Whether s (len bytes) is the short form of one of the table's qualnames. */
bool lmc_trace_op_is_method(const char *s, size_t len);

#endif
