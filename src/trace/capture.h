/*
 * capture.h -- the trace gate and the capture hooks at the StorageManager's
 * entry points (the C form of LMCache's @enable_tracing).
 *
 * Owns: the process-wide trace gate (one atomic bool, the only global
 * besides the log level and the codec registry) and the event bus that
 * captured calls go to. Each traced StorageManager function starts with one
 * of the LMC_TRACE_* macros: when the gate is off that is one predictable
 * branch; when it is on, the caller samples the monotonic clock, copies its
 * raw arguments (keys, layout, scalars) into a reservation in the bus's
 * ring, commits it and returns. Encoding happens later on the bus's drain
 * thread (recorder.c), so capture never blocks and never fails the call:
 * a full ring drops the event and counts it.
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

/* The traced operations, in LMCache's qualname order. */
typedef enum lmc_trace_op {
    LMC_TRACE_OP_RESERVE_WRITE = 1,
    LMC_TRACE_OP_FINISH_WRITE,
    LMC_TRACE_OP_SUBMIT_PREFETCH,
    LMC_TRACE_OP_FINISH_READ,
    LMC_TRACE_OP_READ_ENTER,
    LMC_TRACE_OP_READ_EXIT,
    LMC_TRACE_OP_COUNT_
} lmc_trace_op;

/* LMCache's qualname of an op, e.g.
 * "lmcache.v1.distributed.storage_manager.StorageManager.reserve_write". */
const char *lmc_trace_op_qualname(lmc_trace_op op);

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
    lmc_trace_op op;
    uint64_t t_mono_ns; /* CLOCK_MONOTONIC at publish, on the caller thread */
    const lmc_object_key *keys;
    size_t n_keys;
    bool has_layout;
    lmc_layout_desc layout; /* rebuilt from the compact copy */
    int32_t mode;           /* reserve_write: an lmc_write_mode */
    uint32_t extra_count;
    const char *external_request_id; /* not NUL-terminated */
    size_t external_request_id_len;
    int32_t policy; /* submit_prefetch_task: an lmc_trim_policy */
} lmc_trace_call;

/* Parse a TRACE_CALL payload; false when it is malformed. */
bool lmc_trace_call_decode(const void *payload, size_t len, lmc_trace_call *out);

/* The capture functions behind the macros (call only when the gate is on). */
void lmc_trace_capture_keys(lmc_trace_op op, const lmc_object_key *keys, size_t n);
void lmc_trace_capture_reserve_write(const lmc_object_key *keys, size_t n,
                                     const lmc_layout_desc *layout, int mode);
void lmc_trace_capture_submit_prefetch(const lmc_object_key *keys, size_t n,
                                       const lmc_layout_desc *layout, uint32_t extra_count,
                                       const char *external_request_id, int policy);
void lmc_trace_capture_finish_read(const lmc_object_key *keys, size_t n, uint32_t extra_count);

#define LMC_TRACE_RESERVE_WRITE(keys, n, layout, mode)                                             \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                             \
            lmc_trace_capture_reserve_write((keys), (n), (layout), (int)(mode));                  \
    } while (0)
#define LMC_TRACE_FINISH_WRITE(keys, n)                                                            \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                             \
            lmc_trace_capture_keys(LMC_TRACE_OP_FINISH_WRITE, (keys), (n));                       \
    } while (0)
#define LMC_TRACE_SUBMIT_PREFETCH(keys, n, layout, extra_count, external_request_id, policy)     \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                             \
            lmc_trace_capture_submit_prefetch((keys), (n), (layout), (extra_count),               \
                                              (external_request_id), (int)(policy));              \
    } while (0)
#define LMC_TRACE_FINISH_READ(keys, n, extra_count)                                                \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                             \
            lmc_trace_capture_finish_read((keys), (n), (extra_count));                            \
    } while (0)
#define LMC_TRACE_READ_ENTER(keys, n)                                                              \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                             \
            lmc_trace_capture_keys(LMC_TRACE_OP_READ_ENTER, (keys), (n));                         \
    } while (0)
#define LMC_TRACE_READ_EXIT(keys, n)                                                               \
    do {                                                                                           \
        if (__builtin_expect(lmc_trace_enabled(), 0))                                             \
            lmc_trace_capture_keys(LMC_TRACE_OP_READ_EXIT, (keys), (n));                          \
    } while (0)

#endif
