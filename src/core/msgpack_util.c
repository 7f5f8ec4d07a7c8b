/*
 * msgpack_util.c -- helpers for msgpack_object (see msgpack_util.h).
 */
#include "core/msgpack_util.h"

#include <stdlib.h>

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

int lmc_msgpack_sbuffer_write(void *sbuf, const char *buf, size_t len)
{
    return msgpack_sbuffer_write(sbuf, buf, len);
}

/* At least LMC_MP_WINDOW_BYTES free at the sbuffer's end, grown by doubling
 * from msgpack-c's initial size, as msgpack_sbuffer_write grows it. */
static int sbuffer_room(msgpack_sbuffer *sb)
{
    if (sb->alloc - sb->size >= LMC_MP_WINDOW_BYTES)
        return 0;
    size_t want = sb->size + LMC_MP_WINDOW_BYTES;
    if (want < sb->size)
        return -1;
    size_t n = sb->alloc > 0 ? sb->alloc : MSGPACK_SBUFFER_INIT_SIZE;
    while (n < want) {
        if (n > SIZE_MAX / 2)
            return -1;
        n *= 2;
    }
    char *d = realloc(sb->data, n);
    if (d == NULL)
        return -1;
    sb->data = d;
    sb->alloc = n;
    return 0;
}

static int window_room(lmc_mp_window *w)
{
    if (w->sb == NULL) {
        w->start = w->buf;
        w->end = w->buf + sizeof(w->buf);
        return 0;
    }
    if (sbuffer_room(w->sb) != 0)
        return -1;
    w->start = (uint8_t *)w->sb->data + w->sb->size;
    w->end = (uint8_t *)w->sb->data + w->sb->alloc;
    return 0;
}

int lmc_mp_window_open(lmc_mp_window *w, msgpack_packer *pk)
{
    w->pk = pk;
    w->sb = pk->callback == lmc_msgpack_sbuffer_write ? pk->data : NULL;
    return window_room(w);
}

int lmc_mp_window_close(lmc_mp_window *w, uint8_t *p)
{
    size_t n = (size_t)(p - w->start);
    w->start = w->end = p; /* nothing more goes in until it is opened again */
    if (w->sb != NULL) {
        w->sb->size += n;
        return 0;
    }
    return n > 0 ? w->pk->callback(w->pk->data, (const char *)p - n, n) : 0;
}

int lmc_mp_window_flush(lmc_mp_window *w, uint8_t *p)
{
    int r = lmc_mp_window_close(w, p);
    return r != 0 ? r : window_room(w);
}

/* At most 5 bytes per item: a window holds this many. */
#define U32_BATCH (LMC_MP_WINDOW_BYTES / 5)

int lmc_msgpack_pack_uint32_array(msgpack_packer *pk, const uint32_t *v, size_t n)
{
    if (n > UINT32_MAX || msgpack_pack_array(pk, n) != 0)
        return -1;
    if (n == 0)
        return 0;
    lmc_mp_window w;
    if (lmc_mp_window_open(&w, pk) != 0)
        return -1;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < U32_BATCH ? n - done : U32_BATCH;
        uint8_t *o = w.start;
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
        done += k;
        int r = done < n ? lmc_mp_window_flush(&w, o) : lmc_mp_window_close(&w, o);
        if (r != 0)
            return r;
    }
    return 0;
}
