/*
 * msgpack_util.c -- helpers for msgpack_object (see msgpack_util.h).
 */
#include "core/msgpack_util.h"

#include "core/byteorder.h"

bool lmc_msgpack_item_of(const msgpack_object *o, lmc_mp_item *out)
{
    *out = (lmc_mp_item){.type = LMC_MP_NIL};
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        return true;
    case MSGPACK_OBJECT_BOOLEAN:
        out->type = LMC_MP_BOOL;
        out->v.b = o->via.boolean;
        return true;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        out->type = LMC_MP_UINT;
        out->v.u = o->via.u64;
        return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        out->type = LMC_MP_INT;
        out->v.i = o->via.i64;
        return true;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        out->type = LMC_MP_FLOAT;
        out->f32 = o->type == MSGPACK_OBJECT_FLOAT32;
        out->v.f = o->via.f64;
        return true;
    case MSGPACK_OBJECT_STR:
        out->type = LMC_MP_STR;
        out->v.s.ptr = o->via.str.ptr;
        out->v.s.len = o->via.str.size;
        return true;
    case MSGPACK_OBJECT_BIN:
        out->type = LMC_MP_BIN;
        out->v.s.ptr = o->via.bin.ptr;
        out->v.s.len = o->via.bin.size;
        return true;
    case MSGPACK_OBJECT_EXT:
        out->type = LMC_MP_EXT;
        out->ext_type = o->via.ext.type;
        out->v.s.ptr = o->via.ext.ptr;
        out->v.s.len = o->via.ext.size;
        return true;
    case MSGPACK_OBJECT_ARRAY:
        out->type = LMC_MP_ARRAY;
        out->v.n = o->via.array.size;
        return true;
    case MSGPACK_OBJECT_MAP:
        out->type = LMC_MP_MAP;
        out->v.n = o->via.map.size;
        return true;
    }
    return false; /* not a type msgpack-c defines */
}

const char *lmc_msgpack_type_name(const msgpack_object *o)
{
    lmc_mp_item it;
    return lmc_msgpack_item_of(o, &it) ? lmc_mp_type_name(it.type) : "unknown";
}

bool lmc_msgpack_get_int64(const msgpack_object *o, int64_t *out)
{
    lmc_mp_item it;
    return lmc_msgpack_item_of(o, &it) && lmc_mp_get_int64(&it, out);
}

bool lmc_msgpack_get_double(const msgpack_object *o, double *out)
{
    lmc_mp_item it;
    return lmc_msgpack_item_of(o, &it) && lmc_mp_get_double(&it, out);
}

/* Items per batch: at most 5 bytes each. */
#define U32_BATCH 256

int lmc_msgpack_pack_uint32_array(msgpack_packer *pk, const uint32_t *v, size_t n)
{
    if (n > UINT32_MAX || msgpack_pack_array(pk, n) != 0)
        return -1;
    uint8_t buf[U32_BATCH * 5];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < U32_BATCH ? n - done : U32_BATCH;
        uint8_t *o = buf;
        for (size_t i = 0; i < k; i++) {
            uint32_t x = v[done + i];
            if (x < 0x80) {
                *o++ = (uint8_t)x;
            } else if (x < 0x100) {
                *o++ = 0xcc;
                *o++ = (uint8_t)x;
            } else if (x < 0x10000) {
                *o++ = 0xcd;
                lmc_put_be16(o, (uint16_t)x);
                o += 2;
            } else {
                *o++ = 0xce;
                lmc_put_be32(o, x);
                o += 4;
            }
        }
        int r = pk->callback(pk->data, (const char *)buf, (size_t)(o - buf));
        if (r != 0)
            return r;
        done += k;
    }
    return 0;
}
