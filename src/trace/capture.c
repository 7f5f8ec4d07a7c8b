/*
 * capture.c -- the trace gate and the caller-side capture (see capture.h).
 *
 * A captured call is one event on the bus whose payload is a flat copy of
 * the call's arguments in this process's own layout:
 *
 *   wire_hdr | shapes[layout_count] | dtypes[layout_count] |
 *   external_request_id bytes | padding to 8 | keys[n_keys]
 *
 * Keys are copied as whole structs: they are fixed-size values whose string
 * fields point at interned strings that live until exit, so the copy stays
 * valid on the drain thread. Only the used part of a layout is copied (one
 * tensor is 80 bytes instead of the struct's 600). The payload never leaves
 * the process; the recorder turns it into msgpack.
 */
#include "trace/capture.h"

#include <string.h>

#include "obs/event_bus.h"

atomic_bool lmc_trace_gate = false;

static _Atomic(lmc_event_bus *) g_bus = NULL;

void lmc_trace_set_enabled(bool on)
{
    atomic_store_explicit(&lmc_trace_gate, on, memory_order_release);
}

void lmc_trace_capture_set_bus(lmc_event_bus *bus)
{
    atomic_store_explicit(&g_bus, bus, memory_order_release);
}

typedef struct wire_hdr {
    uint32_t op;
    uint32_t n_keys;
    int32_t mode;
    uint32_t extra_count;
    int32_t policy;
    uint32_t layout_count; /* 0: the op has no layout */
    uint32_t ext_len;
    uint32_t reserved;
} wire_hdr;

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* The header, shapes and dtypes of the largest layout, and the padding. */
#define HEAD_MAX                                                                                   \
    (sizeof(wire_hdr) + LMC_LAYOUT_MAX_TENSORS * (sizeof(lmc_shape) + sizeof(int32_t)) + 8)

/* Write the header, the layout's shapes and its dtypes at dst; returns the bytes written. */
static inline size_t put_head(uint8_t *dst, const wire_hdr *h, const lmc_layout_desc *layout,
                              uint32_t lc)
{
    memcpy(dst, h, sizeof(*h));
    size_t at = sizeof(*h);
    if (lc > 0) {
        /* One tensor is the usual case: a fixed-size copy the compiler
         * inlines, where a variable one is a call into libc. */
        if (lc == 1)
            memcpy(dst + at, layout->shapes, sizeof(lmc_shape));
        else
            memcpy(dst + at, layout->shapes, lc * sizeof(lmc_shape));
        at += lc * sizeof(lmc_shape);
        for (uint32_t i = 0; i < lc; i++) {
            int32_t dt = (int32_t)layout->dtypes[i];
            memcpy(dst + at, &dt, sizeof(dt));
            at += sizeof(dt);
        }
    }
    return at;
}

/* The head's bytes, unpadded: the header, lc shapes and dtypes, the id. */
static inline size_t head_bytes(uint32_t lc, size_t ext_len)
{
    return sizeof(wire_hdr) + lc * (sizeof(lmc_shape) + sizeof(int32_t)) + ext_len;
}

/* The payload's pieces for a: tensors copied, id length, head (unpadded), total. */
typedef struct wire_size {
    uint32_t lc;
    size_t ext_len;
    size_t head;
    size_t len;
} wire_size;

static inline wire_size size_of(const lmc_trace_capture_args *a)
{
    wire_size z;
    z.lc = a->layout ? a->layout->count : 0;
    if (z.lc > LMC_LAYOUT_MAX_TENSORS)
        z.lc = LMC_LAYOUT_MAX_TENSORS;
    z.ext_len = a->external_request_id ? strlen(a->external_request_id) : 0;
    z.head = head_bytes(z.lc, z.ext_len);
    z.len = pad8(z.head) + a->n_keys * sizeof(lmc_object_key);
    return z;
}

size_t lmc_trace_capture_bytes(const lmc_trace_capture_args *a)
{
    return size_of(a).len;
}

void lmc_trace_capture(lmc_trace_op op, const lmc_trace_capture_args *a)
{
    lmc_event_bus *bus = atomic_load_explicit(&g_bus, memory_order_acquire);
    if (bus == NULL)
        return;
    const lmc_layout_desc *layout = a->layout;
    const char *ext = a->external_request_id;
    size_t n = a->n_keys;
    wire_size z = size_of(a);
    size_t keys_at = pad8(z.head);
    wire_hdr h = {.op = (uint32_t)op,
                  .n_keys = (uint32_t)n,
                  .mode = a->mode,
                  .extra_count = a->extra_count,
                  .policy = a->policy,
                  .layout_count = layout ? (z.lc ? z.lc : UINT32_MAX) : 0,
                  .ext_len = (uint32_t)z.ext_len};
    static const uint8_t zeros[8] = {0};

    /*
     * The bus stamps the event on this thread, before the claim, with its
     * cheapest clock (the TSC where it can): the call's time. It is the
     * only clock read; the drain side turns it into the CLOCK_MONOTONIC
     * and wall-clock times the record carries (ev->mono_ns, ev->timestamp),
     * where LMCache reads time.time() and time.monotonic() at publish. The
     * two agree up to wall-clock adjustments during the run.
     */
    lmc_event_reservation r;
    if (!lmc_event_bus_reserve_now(bus, LMC_EVENT_TRACE_CALL, z.len, &r))
        return; /* full: counted by the bus */
    uint8_t *dst = lmc_event_bus_span(&r);
    if (dst != NULL) {
        /* The usual case: the event does not wrap, so every piece is copied
         * once, straight into its slots. The padding's word is zeroed
         * first (the pieces before it overwrite what it covers of them: the
         * head is >= 32 bytes), a store where a memset is a call. */
        memcpy(dst + keys_at - 8, zeros, 8);
        size_t at = put_head(dst, &h, layout, z.lc);
        if (z.ext_len > 0) /* (memcpy from NULL is undefined even for 0 bytes) */
            memcpy(dst + at, ext, z.ext_len);
        if (n == 1) /* fixed size: inlined (see put_head) */
            memcpy(dst + keys_at, a->keys, sizeof(lmc_object_key));
        else if (n > 0)
            memcpy(dst + keys_at, a->keys, n * sizeof(lmc_object_key));
        r.written = z.len;
    } else {
        /* At the ring end: the head goes through the stack, then each piece
         * through the wrapping write. */
        _Alignas(8) uint8_t buf[HEAD_MAX];
        lmc_event_bus_write(&r, buf, put_head(buf, &h, layout, z.lc));
        lmc_event_bus_write(&r, ext, z.ext_len);
        lmc_event_bus_write(&r, zeros, keys_at - z.head);
        lmc_event_bus_write(&r, a->keys, n * sizeof(lmc_object_key));
    }
    lmc_event_bus_commit(&r);
}

bool lmc_trace_call_decode(const void *payload, size_t len, lmc_trace_call *out)
{
    const uint8_t *p = payload;
    wire_hdr h;
    if (len < sizeof(h))
        return false;
    memcpy(&h, p, sizeof(h));
    if (h.op == 0 || h.op >= LMC_TRACE_OP_COUNT_)
        return false;
    uint32_t lc = h.layout_count == UINT32_MAX ? 0 : h.layout_count;
    if (lc > LMC_LAYOUT_MAX_TENSORS)
        return false;
    size_t head = head_bytes(lc, h.ext_len);
    if (head > len || (len - pad8(head)) / sizeof(lmc_object_key) != h.n_keys ||
        pad8(head) + (size_t)h.n_keys * sizeof(lmc_object_key) != len)
        return false;
    const uint8_t *keys = p + pad8(head);
    if ((uintptr_t)keys % _Alignof(lmc_object_key) != 0)
        return false;

    memset(out, 0, sizeof(*out));
    out->op = (lmc_trace_op)h.op;
    out->keys = (const lmc_object_key *)(const void *)keys;
    out->n_keys = h.n_keys;
    out->mode = h.mode;
    out->extra_count = h.extra_count;
    out->policy = h.policy;
    out->has_layout = h.layout_count != 0;
    if (lc > 0) {
        out->layout.count = lc;
        memcpy(out->layout.shapes, p + sizeof(h), lc * sizeof(lmc_shape));
        int32_t dt[LMC_LAYOUT_MAX_TENSORS];
        memcpy(dt, p + sizeof(h) + lc * sizeof(lmc_shape), lc * sizeof(int32_t));
        for (uint32_t i = 0; i < lc; i++)
            out->layout.dtypes[i] = (lmc_dtype)dt[i];
    }
    out->external_request_id =
        (const char *)p + sizeof(h) + lc * (sizeof(lmc_shape) + sizeof(int32_t));
    out->external_request_id_len = h.ext_len;
    return true;
}
