/*
 * fuzz_mp_reader.c -- libFuzzer target: the msgpack reader itself
 * (core/mp_reader.h), on any bytes.
 *
 * Walks the input three ways and checks they agree: item by item with
 * lmc_mp_next (containers' counts added to a pending count), with
 * lmc_mp_skip at the depth limit and with no limit. Every read stays in
 * the buffer (ASan: the input is an exact-size heap block) and a failed
 * read leaves the reader where it was. When the input starts with a value
 * the reader accepts (nested at most 31 deep), msgpack-c must accept it too
 * and end at the same byte (its allocations are then bounded: every count
 * fitted in the input).
 */
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mp_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
    if (!ok)
        abort();
}

/* Item by item, as a decoder would; returns what skip must say. */
static lmc_mp_result walk(lmc_mp_reader *r)
{
    uint64_t pending = 1;
    while (pending > 0) {
        const uint8_t *at = r->p;
        lmc_mp_item it;
        lmc_mp_result res = lmc_mp_next(r, &it);
        if (res != LMC_MP_OK) {
            check(r->p == at);
            return res;
        }
        check(r->p > at && r->p <= r->end);
        pending--;
        if (it.type == LMC_MP_ARRAY || it.type == LMC_MP_MAP) {
            uint64_t n = (uint64_t)it.v.n << (it.type == LMC_MP_MAP);
            check(n <= lmc_mp_left(r)); /* counts always fit */
            pending += n;
        } else if (it.type == LMC_MP_STR || it.type == LMC_MP_BIN || it.type == LMC_MP_EXT) {
            check((const uint8_t *)it.v.s.ptr + it.v.s.len <= r->p);
        }
        int64_t i;
        double d;
        if (lmc_mp_get_int64(&it, &i))
            check(it.type == LMC_MP_INT || (it.type == LMC_MP_UINT && (uint64_t)i == it.v.u));
        check(lmc_mp_get_double(&it, &d) ==
              (it.type == LMC_MP_UINT || it.type == LMC_MP_INT || it.type == LMC_MP_FLOAT));
    }
    return LMC_MP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);

    lmc_mp_reader a, b, c;
    lmc_mp_reader_init(&a, copy, size);
    lmc_mp_reader_init(&b, copy, size);
    lmc_mp_reader_init(&c, copy, size);
    lmc_mp_result walked = walk(&a);
    lmc_mp_result any = lmc_mp_skip(&b, LMC_MP_ANY_DEPTH);
    lmc_mp_result bounded = lmc_mp_skip(&c, LMC_MP_MAX_DEPTH);
    check(walked == any);
    if (any == LMC_MP_OK)
        check(a.p == b.p);
    /* The depth limit only adds TOO_DEEP, found before whatever comes later. */
    check(bounded == any || bounded == LMC_MP_TOO_DEEP);
    if (bounded == LMC_MP_OK)
        check(c.p == b.p);
    /*
     * msgpack-c also refuses an empty container at depth 32 (the reader
     * allows empty ones at any depth): compare where that cannot arise.
     */
    lmc_mp_reader_init(&c, copy, size);
    if (lmc_mp_skip(&c, LMC_MP_MAX_DEPTH - 1) == LMC_MP_OK) {
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        check(msgpack_unpack_next(&up, (const char *)copy, size, &off) == MSGPACK_UNPACK_SUCCESS);
        check(off == lmc_mp_offset(&c));
        msgpack_unpacked_destroy(&up);
    }

    /* lmc_mp_take_uint agrees with lmc_mp_next on what it takes. */
    lmc_mp_reader_init(&a, copy, size);
    lmc_mp_reader_init(&b, copy, size);
    uint64_t u;
    if (lmc_mp_take_uint(&a, &u)) {
        lmc_mp_item it;
        check(lmc_mp_next(&b, &it) == LMC_MP_OK && it.type == LMC_MP_UINT && it.v.u == u &&
              a.p == b.p);
    } else {
        check(a.p == copy);
    }
    free(copy);
    return 0;
}
