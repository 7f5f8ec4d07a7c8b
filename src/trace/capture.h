/*
 * capture.h -- the trace gate and the capture hooks at the StorageManager's
 * entry points (the C form of LMCache's @enable_tracing).
 *
 * Owns: the process-wide trace gate (one atomic bool, the only global
 * besides the log level and the codec registry) and the event bus that
 * captured calls go to. Each traced StorageManager function starts with
 * LMC_TRACE(<op>, <args>) (the ops are the rows of trace/ops.def): when the
 * gate is off that is one predictable branch; when it is on, the caller
 * stamps the event (the bus's cheapest clock), copies its raw arguments (keys, layout,
 * scalars) into a reservation in the bus's ring, commits it and returns.
 * Encoding happens later on the bus's drain thread (recorder.c), so capture
 * never blocks and never fails the call: a full ring drops the event and
 * counts it.
 *
 * Entry only: the event is published before the real work, so a call that
 * then fails is still recorded (replay re-runs it and sees the outcome).
 *
 * Threads: the hooks run on any caller thread. lmc_trace_set_enabled and
 * lmc_trace_capture_set_bus are called by the recorder's lifecycle.
 */
#ifndef LMC_TRACE_CAPTURE_H
#define LMC_TRACE_CAPTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/types.h"
#include "trace/ops.h"

extern atomic_bool lmc_trace_gate;

static inline bool lmc_trace_enabled(void)
{
    return atomic_load_explicit(&lmc_trace_gate, memory_order_relaxed);
}

void lmc_trace_set_enabled(bool on);

struct lmc_event_bus;
/* Where captured calls go (NULL: nowhere; events are then dropped). */
void lmc_trace_capture_set_bus(struct lmc_event_bus *bus);

/*
 * The captured form of one call, as the drain thread sees it (pointers into
 * the event payload; valid during the callback only).
 */
typedef struct lmc_trace_call {
    lmc_trace_op op; /* (its time is the event's: ev->mono_ns, ev->timestamp) */
    const lmc_object_key *keys;
    size_t n_keys;
    bool has_layout;
    lmc_layout_desc layout; /* rebuilt from the compact copy */
    int32_t mode;           /* an lmc_write_mode */
    uint32_t extra_count;
    const char *external_request_id; /* not NUL-terminated */
    size_t external_request_id_len;
    int32_t policy; /* an lmc_trim_policy */
} lmc_trace_call;

/* Parse a TRACE_CALL payload; false when it is malformed. */
bool lmc_trace_call_decode(const void *payload, size_t len, lmc_trace_call *out);

/*
 * The arguments of one traced call, by field; which of them an op has
 * (and in what order the recorder writes them) is its row in
 * trace/ops.def. Fields the op does not have are left zero.
 */
typedef struct lmc_trace_capture_args {
    const lmc_object_key *keys;
    size_t n_keys;
    const lmc_layout_desc *layout; /* NULL: none given */
    int32_t mode;                  /* an lmc_write_mode */
    uint32_t extra_count;
    const char *external_request_id; /* NUL-terminated; NULL: "" */
    int32_t policy;                  /* an lmc_trim_policy */
} lmc_trace_capture_args;

/*
 * The bytes a capture of args puts in the event's payload (the ring takes
 * 16 more, rounded up to 64): what a capture copies, for the capture
 * benchmark's control copy of the same size.
 */
size_t lmc_trace_capture_bytes(const lmc_trace_capture_args *args);

/* The capture behind LMC_TRACE (call it only when the gate is on). */
void lmc_trace_capture(lmc_trace_op op, const lmc_trace_capture_args *args);

/*
 * The capture line at a traced function's entry: the op's ID from
 * trace/ops.def, then its arguments as designated initializers of
 * lmc_trace_capture_args, e.g.
 *
 *   LMC_TRACE(FINISH_READ, .keys = keys, .n_keys = n, .extra_count = extra_count);
 *
 * The arguments are evaluated only when the gate is on.
 */
#define LMC_TRACE(ID, ...)                                                                         \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                              \
            lmc_trace_capture(LMC_TRACE_OP_##ID, &(const lmc_trace_capture_args){__VA_ARGS__});    \
    } while (0)

#endif
