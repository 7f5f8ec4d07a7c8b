/*
 * capture.h -- the trace capture hooks at the StorageManager's entry points.
 *
 * Each traced StorageManager function starts with one of these macros. They
 * are the C form of LMCache's @enable_tracing: when the trace gate is off
 * the cost is one predictable branch; when it is on, the caller copies its
 * raw arguments into the event ring and returns.
 *
 * Until the capture module lands, the hooks compile to nothing.
 */
#ifndef LMC_TRACE_CAPTURE_H
#define LMC_TRACE_CAPTURE_H

#define LMC_TRACE_RESERVE_WRITE(keys, n, layout, mode) ((void)0)
#define LMC_TRACE_FINISH_WRITE(keys, n) ((void)0)
#define LMC_TRACE_SUBMIT_PREFETCH(keys, n, layout, extra_count, external_request_id, policy)     \
    ((void)0)
#define LMC_TRACE_FINISH_READ(keys, n, extra_count) ((void)0)
#define LMC_TRACE_READ_ENTER(keys, n) ((void)0)
#define LMC_TRACE_READ_EXIT(keys, n) ((void)0)

#endif
