/*
 * test_mp_reader.c -- the bounds-checked msgpack reader (core/mp_reader.h):
 * every type and encoding, every truncation point, counts that cannot fit,
 * the depth limit of skip, the uint64 range, the number helpers and the
 * error messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "core/byteorder.h"
#include "core/mp_reader.h"
#include "core/msgpack_util.h"

/* One encoded value and what reading it must give. */
typedef struct sample {
    const char *name;
    const uint8_t *bytes;
    size_t len;
} sample;

#define S(name, ...)                                                                               \
    {                                                                                              \
        name, (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})               \
    }

/* Every encoding of the format, with a short value each. */
static const sample SAMPLES[] = {
    S("positive fixint", 0x05),
    S("negative fixint", 0xff),
    S("nil", 0xc0),
    S("false", 0xc2),
    S("true", 0xc3),
    S("uint8", 0xcc, 0xc8),
    S("uint16", 0xcd, 0x12, 0x34),
    S("uint32", 0xce, 0x12, 0x34, 0x56, 0x78),
    S("uint64", 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
    S("int8", 0xd0, 0x80),
    S("int16", 0xd1, 0xff, 0x00),
    S("int32", 0xd2, 0x80, 0x00, 0x00, 0x00),
    S("int64", 0xd3, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00),
    S("float32", 0xca, 0x3f, 0xc0, 0x00, 0x00),
    S("float64", 0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18),
    S("fixstr", 0xa3, 'a', 'b', 'c'),
    S("str8", 0xd9, 0x02, 'h', 'i'),
    S("str16", 0xda, 0x00, 0x02, 'h', 'i'),
    S("str32", 0xdb, 0x00, 0x00, 0x00, 0x02, 'h', 'i'),
    S("bin8", 0xc4, 0x02, 0x01, 0x02),
    S("bin16", 0xc5, 0x00, 0x02, 0x01, 0x02),
    S("bin32", 0xc6, 0x00, 0x00, 0x00, 0x02, 0x01, 0x02),
    S("fixext1", 0xd4, 0x07, 0xaa),
    S("fixext2", 0xd5, 0x07, 0xaa, 0xbb),
    S("fixext4", 0xd6, 0x07, 1, 2, 3, 4),
    S("fixext8", 0xd7, 0x07, 1, 2, 3, 4, 5, 6, 7, 8),
    S("fixext16", 0xd8, 0x07, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
    S("ext8", 0xc7, 0x02, 0xf9, 0x01, 0x02),
    S("ext16", 0xc8, 0x00, 0x02, 0xf9, 0x01, 0x02),
    S("ext32", 0xc9, 0x00, 0x00, 0x00, 0x02, 0xf9, 0x01, 0x02),
    S("fixarray", 0x92, 0x01, 0x02),
    S("array16", 0xdc, 0x00, 0x02, 0x01, 0x02),
    S("array32", 0xdd, 0x00, 0x00, 0x00, 0x02, 0x01, 0x02),
    S("fixmap", 0x81, 0xa1, 'k', 0x01),
    S("map16", 0xde, 0x00, 0x01, 0xa1, 'k', 0x01),
    S("map32", 0xdf, 0x00, 0x00, 0x00, 0x01, 0xa1, 'k', 0x01),
    S("nested", 0x82, 0xa1, 'a', 0x91, 0x90, 0xa1, 'b', 0x81, 0xc0, 0xc3),
};
#define N_SAMPLES (sizeof(SAMPLES) / sizeof(SAMPLES[0]))

static lmc_mp_item next_ok(const void *bytes, size_t len, size_t want_used)
{
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, bytes, len);
    lmc_mp_item it;
    memset(&it, 0, sizeof(it));
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_int_equal(lmc_mp_offset(&r), want_used);
    return it;
}

static void test_reads_every_scalar_encoding(void **state)
{
    (void)state;
    lmc_mp_item it = next_ok("\x05", 1, 1);
    assert_int_equal(it.type, LMC_MP_UINT);
    assert_int_equal(it.v.u, 5);
    it = next_ok("\xff", 1, 1);
    assert_int_equal(it.type, LMC_MP_INT);
    assert_int_equal(it.v.i, -1);
    it = next_ok("\xc0", 1, 1);
    assert_int_equal(it.type, LMC_MP_NIL);
    it = next_ok("\xc2", 1, 1);
    assert_int_equal(it.type, LMC_MP_BOOL);
    assert_false(it.v.b);
    it = next_ok("\xc3", 1, 1);
    assert_true(it.v.b);
    it = next_ok("\xcc\xc8", 2, 2);
    assert_int_equal(it.type, LMC_MP_UINT);
    assert_int_equal(it.v.u, 200);
    it = next_ok("\xcd\x12\x34", 3, 3);
    assert_int_equal(it.v.u, 0x1234);
    it = next_ok("\xce\x12\x34\x56\x78", 5, 5);
    assert_int_equal(it.v.u, 0x12345678);
    it = next_ok("\xd0\x80", 2, 2);
    assert_int_equal(it.type, LMC_MP_INT);
    assert_int_equal(it.v.i, -128);
    it = next_ok("\xd1\xff\x00", 3, 3);
    assert_int_equal(it.v.i, -256);
    it = next_ok("\xd2\x80\x00\x00\x00", 5, 5);
    assert_int_equal(it.v.i, INT32_MIN);
    it = next_ok("\xd3\x80\x00\x00\x00\x00\x00\x00\x00", 9, 9);
    assert_int_equal(it.type, LMC_MP_INT);
    assert_true(it.v.i == INT64_MIN);
    it = next_ok("\xca\x3f\xc0\x00\x00", 5, 5);
    assert_int_equal(it.type, LMC_MP_FLOAT);
    assert_true(it.f32);
    assert_true(it.v.f == 1.5);
    it = next_ok("\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18", 9, 9);
    assert_false(it.f32);
    assert_true(it.v.f == 3.141592653589793);
}

static void test_signed_encodings_of_non_negative_values_are_uint(void **state)
{
    (void)state;
    /* msgpack-c's rule: the value decides, not the encoding. */
    lmc_mp_item it = next_ok("\xd0\x05", 2, 2);
    assert_int_equal(it.type, LMC_MP_UINT);
    assert_int_equal(it.v.u, 5);
    it = next_ok("\xd3\x7f\xff\xff\xff\xff\xff\xff\xff", 9, 9);
    assert_int_equal(it.type, LMC_MP_UINT);
    assert_true(it.v.u == (uint64_t)INT64_MAX);
}

static void test_uint64_range_is_kept_and_reported_apart_from_int64(void **state)
{
    (void)state;
    lmc_mp_item it = next_ok("\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9, 9);
    assert_int_equal(it.type, LMC_MP_UINT);
    assert_true(it.v.u == UINT64_MAX);
    int64_t v = 42;
    assert_false(lmc_mp_get_int64(&it, &v)); /* above INT64_MAX: not an int64 */
    assert_int_equal(v, 42);
    double d;
    assert_true(lmc_mp_get_double(&it, &d));
    assert_true(d == 18446744073709551615.0);
    it = next_ok("\xcf\x80\x00\x00\x00\x00\x00\x00\x00", 9, 9);
    assert_false(lmc_mp_get_int64(&it, &v)); /* 2^63 */
    it = next_ok("\xcf\x7f\xff\xff\xff\xff\xff\xff\xff", 9, 9);
    assert_true(lmc_mp_get_int64(&it, &v));
    assert_true(v == INT64_MAX);
    it = next_ok("\xd3\x80\x00\x00\x00\x00\x00\x00\x00", 9, 9);
    assert_true(lmc_mp_get_int64(&it, &v));
    assert_true(v == INT64_MIN);
}

static void test_number_helpers_refuse_other_types(void **state)
{
    (void)state;
    static const char *const others[] = {"\xc0", "\xc3", "\xa1x",    "\xc4\x01x",
                                         "\x90", "\x80", "\xd4\x01x"};
    static const size_t lens[] = {1, 1, 2, 3, 1, 1, 3};
    for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++) {
        lmc_mp_item it = next_ok(others[k], lens[k], lens[k]);
        int64_t v = 7;
        double d = 7;
        assert_false(lmc_mp_get_int64(&it, &v));
        assert_false(lmc_mp_get_double(&it, &d));
        assert_int_equal(v, 7);
        assert_true(d == 7);
    }
    /* A float is a double but never an int64. */
    lmc_mp_item f = next_ok("\xca\x3f\xc0\x00\x00", 5, 5);
    int64_t v;
    assert_false(lmc_mp_get_int64(&f, &v));
    lmc_mp_item i = next_ok("\xff", 1, 1);
    double d;
    assert_true(lmc_mp_get_double(&i, &d));
    assert_true(d == -1.0);
}

static void test_reads_strs_bins_and_exts_as_pointers_into_the_buffer(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_SAMPLES; k++) {
        const sample *s = &SAMPLES[k];
        lmc_mp_reader r;
        lmc_mp_reader_init(&r, s->bytes, s->len);
        lmc_mp_item it;
        assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
        if (it.type != LMC_MP_STR && it.type != LMC_MP_BIN && it.type != LMC_MP_EXT)
            continue;
        /* The payload is the buffer's tail, so it ends where the value ends. */
        assert_ptr_equal(it.v.s.ptr + it.v.s.len, (const char *)s->bytes + s->len);
        assert_int_equal(lmc_mp_left(&r), 0);
        if (it.type == LMC_MP_EXT)
            assert_true(it.ext_type == 0x07 || it.ext_type == -7);
    }
    lmc_mp_item it = next_ok("\xd9\x02hi", 4, 4);
    assert_int_equal(it.type, LMC_MP_STR);
    assert_int_equal(it.v.s.len, 2);
    assert_memory_equal(it.v.s.ptr, "hi", 2);
    assert_true(lmc_mp_str_is(&it, "hi"));
    assert_false(lmc_mp_str_is(&it, "h"));
    assert_false(lmc_mp_str_is(&it, "hii"));
    it = next_ok("\xc5\x00\x02hi", 5, 5);
    assert_int_equal(it.type, LMC_MP_BIN);
    assert_false(lmc_mp_str_is(&it, "hi")); /* a bin is not a str */
    it = next_ok("\xa0", 1, 1);
    assert_int_equal(it.v.s.len, 0);
    assert_true(lmc_mp_str_is(&it, ""));
}

static void test_reads_container_headers_only(void **state)
{
    (void)state;
    lmc_mp_item it = next_ok("\x92\x01\x02", 3, 1);
    assert_int_equal(it.type, LMC_MP_ARRAY);
    assert_int_equal(it.v.n, 2);
    it = next_ok("\xdc\x00\x02\x01\x02", 5, 3);
    assert_int_equal(it.v.n, 2);
    it = next_ok("\xdd\x00\x00\x00\x02\x01\x02", 7, 5);
    assert_int_equal(it.v.n, 2);
    it = next_ok("\x81\xa1k\x01", 4, 1);
    assert_int_equal(it.type, LMC_MP_MAP);
    assert_int_equal(it.v.n, 1);
    it = next_ok("\xde\x00\x01\xa1k\x01", 6, 3);
    assert_int_equal(it.v.n, 1);
    it = next_ok("\xdf\x00\x00\x00\x01\xa1k\x01", 8, 5);
    assert_int_equal(it.v.n, 1);
    it = next_ok("\x90", 1, 1);
    assert_int_equal(it.v.n, 0);
}

static void test_matches_msgpack_c_on_packed_values(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    static const int64_t ints[] = {
        0,      1,         127,       128,       255,       256,          65535,
        65536,  INT32_MAX, -1,        -32,       -33,       -128,         -129,
        -32768, -32769,    INT32_MIN, INT64_MAX, INT64_MIN, 4294967296LL, -4294967296LL};
    size_t n = sizeof(ints) / sizeof(ints[0]);
    for (size_t k = 0; k < n; k++)
        msgpack_pack_int64(&pk, ints[k]);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    msgpack_pack_float(&pk, 0.25f);
    msgpack_pack_double(&pk, -2.5);
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, sb.data, sb.size);
    for (size_t k = 0; k < n; k++) {
        lmc_mp_item it;
        assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
        assert_int_equal(it.type, ints[k] < 0 ? LMC_MP_INT : LMC_MP_UINT);
        int64_t v;
        assert_true(lmc_mp_get_int64(&it, &v));
        assert_true(v == ints[k]);
    }
    lmc_mp_item it;
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_true(it.type == LMC_MP_UINT && it.v.u == UINT64_MAX);
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_true(it.type == LMC_MP_FLOAT && it.f32 && it.v.f == 0.25);
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_true(it.type == LMC_MP_FLOAT && !it.f32 && it.v.f == -2.5);
    assert_int_equal(lmc_mp_left(&r), 0);
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED); /* nothing left */
    msgpack_sbuffer_destroy(&sb);
}

/* Every proper prefix of every sample is truncated, and the reader does not move. */
static void test_every_truncation_point_is_reported_without_moving(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_SAMPLES; k++) {
        const sample *s = &SAMPLES[k];
        for (size_t cut = 0; cut < s->len; cut++) {
            uint8_t *copy = malloc(cut > 0 ? cut : 1); /* exact size: ASan sees any overread */
            assert_non_null(copy);
            memcpy(copy, s->bytes, cut);
            lmc_mp_reader r;
            lmc_mp_reader_init(&r, copy, cut);
            lmc_mp_result res = lmc_mp_skip(&r, LMC_MP_MAX_DEPTH);
            if (res != LMC_MP_TRUNCATED)
                fail_msg("%s cut to %zu bytes: skip gave %d", s->name, cut, (int)res);
            /* next alone: a header that is itself complete may read fine. */
            lmc_mp_reader_init(&r, copy, cut);
            lmc_mp_item it;
            res = lmc_mp_next(&r, &it);
            if (res != LMC_MP_OK) {
                assert_int_equal(res, LMC_MP_TRUNCATED);
                assert_int_equal(lmc_mp_offset(&r), 0);
            }
            lmc_mp_reader_init(&r, copy, cut);
            res = lmc_mp_skip(&r, LMC_MP_ANY_DEPTH);
            assert_int_equal(res, LMC_MP_TRUNCATED);
            free(copy);
        }
        /* Whole: skip consumes exactly the value. */
        lmc_mp_reader r;
        lmc_mp_reader_init(&r, s->bytes, s->len);
        assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_OK);
        assert_int_equal(lmc_mp_left(&r), 0);
    }
}

static void test_counts_that_cannot_fit_are_truncated_before_anything_is_read(void **state)
{
    (void)state;
    /* dd ff ff ff ff: the 5-byte value that asks msgpack-c for 64 GiB. */
    static const uint8_t huge_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, huge_array, sizeof(huge_array));
    lmc_mp_item it;
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED);
    assert_int_equal(lmc_mp_offset(&r), 0);
    /* Unchecked: the header itself reads, the count is the caller's to judge. */
    assert_int_equal(lmc_mp_next_unchecked(&r, &it), LMC_MP_OK);
    assert_int_equal(it.type, LMC_MP_ARRAY);
    assert_int_equal(it.v.n, 0xffffffffu);

    /* A map of n pairs needs 2n bytes: 2 pairs in 3 bytes do not fit. */
    static const uint8_t map2[] = {0x82, 0x01, 0x02, 0x03};
    lmc_mp_reader_init(&r, map2, sizeof(map2));
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED);
    static const uint8_t map16[] = {0xde, 0x00, 0x02, 0x01, 0x02, 0x03};
    lmc_mp_reader_init(&r, map16, sizeof(map16));
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED);
    /* 4 bytes for 2 pairs fit (the values may still be truncated later). */
    static const uint8_t map2ok[] = {0x82, 0x01, 0x02, 0x03, 0x04};
    lmc_mp_reader_init(&r, map2ok, sizeof(map2ok));
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_int_equal(it.v.n, 2);

    /* A str whose declared length runs past the end. */
    static const uint8_t str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'};
    lmc_mp_reader_init(&r, str32, sizeof(str32));
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED);
    static const uint8_t ext32[] = {0xc9, 0x7f, 0xff, 0xff, 0xff, 0x01, 'x'};
    lmc_mp_reader_init(&r, ext32, sizeof(ext32));
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED);
}

static void test_reserved_byte_c1_is_invalid(void **state)
{
    (void)state;
    static const uint8_t bad[] = {0x91, 0xc1};
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, bad, sizeof(bad));
    lmc_mp_item it;
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_INVALID);
    assert_int_equal(lmc_mp_offset(&r), 1);
    lmc_mp_reader_init(&r, bad, sizeof(bad));
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_INVALID);
    lmc_error err;
    assert_int_equal(lmc_mp_error_set(&err, "Thing", &r, LMC_MP_INVALID), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Thing: invalid msgpack byte 0xc1 at byte 1");
}

static uint8_t *nest(size_t depth, uint8_t open, size_t *len)
{
    uint8_t *b = malloc(depth + 1);
    assert_non_null(b);
    memset(b, open, depth);
    b[depth] = 0xc0;
    *len = depth + 1;
    return b;
}

static void test_skip_enforces_its_depth_limit(void **state)
{
    (void)state;
    size_t len;
    /* 32 nested one-item lists around nil: the innermost list is at depth 31. */
    uint8_t *ok = nest(LMC_MP_MAX_DEPTH, 0x91, &len);
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, ok, len);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_OK);
    assert_int_equal(lmc_mp_left(&r), 0);
    free(ok);

    uint8_t *deep = nest(LMC_MP_MAX_DEPTH + 1, 0x91, &len);
    lmc_mp_reader_init(&r, deep, len);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_TOO_DEEP);
    assert_int_equal(lmc_mp_offset(&r), LMC_MP_MAX_DEPTH); /* at the list too many */
    lmc_error err;
    lmc_mp_error_set(&err, "Record", &r, LMC_MP_TOO_DEEP);
    assert_string_equal(err.msg, "Record: msgpack data nested deeper than 32 levels (at byte 32)");
    /* A smaller limit. */
    lmc_mp_reader_init(&r, deep, len);
    assert_int_equal(lmc_mp_skip(&r, 3), LMC_MP_TOO_DEEP);
    assert_int_equal(lmc_mp_offset(&r), 3);
    free(deep);

    /* Empty containers do not count as a level. */
    uint8_t *empty = nest(LMC_MP_MAX_DEPTH, 0x91, &len);
    empty[len - 1] = 0x90;
    lmc_mp_reader_init(&r, empty, len);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_OK);
    free(empty);
}

static void test_skip_without_a_limit_takes_any_depth_without_recursion(void **state)
{
    (void)state;
    size_t len;
    uint8_t *deep = nest(1000000, 0x91, &len);
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, deep, len);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_ANY_DEPTH), LMC_MP_OK);
    assert_int_equal(lmc_mp_left(&r), 0);
    /* Without the innermost value: truncated. */
    lmc_mp_reader_init(&r, deep, len - 1);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_ANY_DEPTH), LMC_MP_TRUNCATED);
    free(deep);
}

static void test_skip_walks_maps_and_stops_after_one_value(void **state)
{
    (void)state;
    /* {"a": [[], "b", {nil: true}]} then 0x07 */
    static const uint8_t v[] = {0x81, 0xa1, 'a', 0x93, 0x90, 0xa1, 'b', 0x81, 0xc0, 0xc3, 0x07};
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, v, sizeof(v));
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_OK);
    assert_int_equal(lmc_mp_offset(&r), sizeof(v) - 1);
    lmc_mp_item it;
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_int_equal(it.v.u, 7);
}

static void test_take_consumes_only_an_exact_match(void **state)
{
    (void)state;
    static const uint8_t v[] = "\xaa"
                               "chunk_hash\xa1x";
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, v, sizeof(v) - 1);
    assert_false(lmc_mp_take(&r,
                             "\xaa"
                             "chunk_hasX",
                             11));
    assert_int_equal(lmc_mp_offset(&r), 0);
    assert_false(lmc_mp_take(&r,
                             "\xaa"
                             "chunk_hash\xa1xyz",
                             14)); /* longer than what is left */
    assert_true(lmc_mp_take(&r,
                            "\xaa"
                            "chunk_hash",
                            11));
    assert_int_equal(lmc_mp_offset(&r), 11);
    assert_false(lmc_mp_take(&r, "\xa1y", 2)); /* short literals too */
    assert_true(lmc_mp_take(&r, "\xa1x", 2));
    assert_int_equal(lmc_mp_left(&r), 0);
}

static void test_take_uint_reads_only_the_unsigned_encodings(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t len;
        uint64_t want;
    } ok[] = {
        {"\x00", 1, 0},
        {"\x7f", 1, 127},
        {"\xcc\xff", 2, 255},
        {"\xcd\x12\x34", 3, 0x1234},
        {"\xce\x12\x34\x56\x78", 5, 0x12345678},
        {"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9, UINT64_MAX},
    };
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
        lmc_mp_reader r;
        lmc_mp_reader_init(&r, ok[k].bytes, ok[k].len);
        uint64_t u = 0;
        assert_true(lmc_mp_take_uint(&r, &u));
        assert_true(u == ok[k].want);
        assert_int_equal(lmc_mp_left(&r), 0);
        /* Truncated: nothing consumed. */
        lmc_mp_reader_init(&r, ok[k].bytes, ok[k].len - 1);
        assert_false(lmc_mp_take_uint(&r, &u));
        assert_int_equal(lmc_mp_offset(&r), 0);
    }
    /* Signed encodings (even of values >= 0), negative fixints and other types: not taken. */
    static const char *const no[] = {"\xd0\x05", "\xff", "\xc0", "\xa1x", "\xca\0\0\0\0"};
    static const size_t lens[] = {2, 1, 1, 2, 5};
    for (size_t k = 0; k < sizeof(no) / sizeof(no[0]); k++) {
        lmc_mp_reader r;
        lmc_mp_reader_init(&r, no[k], lens[k]);
        uint64_t u = 7;
        assert_false(lmc_mp_take_uint(&r, &u));
        assert_int_equal(lmc_mp_offset(&r), 0);
        assert_true(u == 7);
    }
}

static void test_error_messages_name_the_problem_and_the_offset(void **state)
{
    (void)state;
    static const uint8_t v[] = {0x92, 0x01, 0xcd, 0x01};
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, v, sizeof(v));
    lmc_mp_item it;
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_OK);
    lmc_mp_result res = lmc_mp_next(&r, &it);
    assert_int_equal(res, LMC_MP_TRUNCATED);
    lmc_error err;
    assert_int_equal(lmc_mp_error_set(&err, "Header", &r, res), LMC_ERR_FORMAT);
    assert_string_equal(err.msg, "Header: msgpack data is truncated (at byte 2)");
    assert_int_equal(lmc_mp_error_set(&err, "Header", &r, LMC_MP_OK), LMC_OK);
}

static void test_type_names(void **state)
{
    (void)state;
    assert_string_equal(lmc_mp_type_name(LMC_MP_NIL), "nil");
    assert_string_equal(lmc_mp_type_name(LMC_MP_BOOL), "bool");
    assert_string_equal(lmc_mp_type_name(LMC_MP_UINT), "int");
    assert_string_equal(lmc_mp_type_name(LMC_MP_INT), "int");
    assert_string_equal(lmc_mp_type_name(LMC_MP_FLOAT), "float");
    assert_string_equal(lmc_mp_type_name(LMC_MP_STR), "str");
    assert_string_equal(lmc_mp_type_name(LMC_MP_BIN), "bin");
    assert_string_equal(lmc_mp_type_name(LMC_MP_ARRAY), "array");
    assert_string_equal(lmc_mp_type_name(LMC_MP_MAP), "map");
    assert_string_equal(lmc_mp_type_name(LMC_MP_EXT), "ext");
}

static void test_empty_and_null_buffers_are_truncated(void **state)
{
    (void)state;
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, NULL, 0);
    lmc_mp_item it;
    assert_int_equal(lmc_mp_left(&r), 0);
    assert_int_equal(lmc_mp_next(&r, &it), LMC_MP_TRUNCATED);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_MAX_DEPTH), LMC_MP_TRUNCATED);
    assert_int_equal(lmc_mp_skip(&r, LMC_MP_ANY_DEPTH), LMC_MP_TRUNCATED);
}

/* msgpack_util reads msgpack-c's objects by the same rules. */
static void test_msgpack_objects_follow_the_reader_rules(void **state)
{
    (void)state;
    msgpack_object o = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = UINT64_MAX};
    int64_t v = 3;
    double d = 0;
    assert_false(lmc_msgpack_get_int64(&o, &v));
    assert_int_equal(v, 3);
    assert_true(lmc_msgpack_get_double(&o, &d));
    o.via.u64 = 42;
    assert_true(lmc_msgpack_get_int64(&o, &v));
    assert_int_equal(v, 42);
    o = (msgpack_object){.type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = -5};
    assert_true(lmc_msgpack_get_int64(&o, &v));
    assert_int_equal(v, -5);
    o = (msgpack_object){.type = MSGPACK_OBJECT_FLOAT32, .via.f64 = 0.5};
    assert_false(lmc_msgpack_get_int64(&o, &v));
    assert_true(lmc_msgpack_get_double(&o, &d));
    assert_true(d == 0.5);
    assert_string_equal(lmc_msgpack_type_name(&o), "float");
    o = (msgpack_object){.type = MSGPACK_OBJECT_STR};
    assert_false(lmc_msgpack_get_double(&o, &d));
    assert_string_equal(lmc_msgpack_type_name(&o), "str");
    o = (msgpack_object){.type = MSGPACK_OBJECT_ARRAY};
    assert_string_equal(lmc_msgpack_type_name(&o), "array");
    o = (msgpack_object){.type = (msgpack_object_type)0x7f};
    assert_string_equal(lmc_msgpack_type_name(&o), "unknown");
}

static void test_byte_order_helpers_round_trip(void **state)
{
    (void)state;
    uint8_t b[8];
    lmc_put_be16(b, 0x1234);
    assert_memory_equal(b, "\x12\x34", 2);
    assert_int_equal(lmc_get_be16(b), 0x1234);
    lmc_put_be32(b, 0x89abcdefu);
    assert_memory_equal(b, "\x89\xab\xcd\xef", 4);
    assert_int_equal(lmc_get_be32(b), 0x89abcdefu);
    lmc_put_be64(b, 0x0123456789abcdefull);
    assert_memory_equal(b, "\x01\x23\x45\x67\x89\xab\xcd\xef", 8);
    assert_true(lmc_get_be64(b) == 0x0123456789abcdefull);
}

/* A packer callback that keeps what it is handed, counts the calls, and can refuse. */
typedef struct recording_sink {
    msgpack_sbuffer sb;
    size_t calls;
    int fail_at; /* the call (1-based) that returns -7; 0: none */
} recording_sink;

static int recording_write(void *data, const char *buf, size_t len)
{
    recording_sink *s = data;
    if (++s->calls == (size_t)s->fail_at)
        return -7;
    return msgpack_sbuffer_write(&s->sb, buf, len);
}

/* Every width's boundaries, an empty list and lists longer than one window,
 * written in place (lmc_msgpack_sbuffer_packer_init) and staged (any other
 * callback): msgpack-c's bytes either way. */
static void test_uint32_arrays_pack_as_msgpack_c_packs_them(void **state)
{
    (void)state;
    static const uint32_t edges[] = {0,     1,     0x7f,    0x80,    0xff,       0x100,
                                     0xffff, 0x10000, 0xffffff, 0x1000000, UINT32_MAX};
    static uint32_t v[5000];
    for (size_t n = 0; n < sizeof(v) / sizeof(v[0]); n++)
        v[n] = n < 11 ? edges[n] : (uint32_t)(n * 2654435761u) >> (n % 32);
    size_t lens[] = {0, 1, 11, 255, 256, 257, 1000, 1638, 1639, 5000};
    for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
        msgpack_sbuffer want, got;
        recording_sink staged = {.calls = 0};
        msgpack_sbuffer_init(&want);
        msgpack_sbuffer_init(&got);
        msgpack_sbuffer_init(&staged.sb);
        msgpack_packer pw, pg, ps;
        msgpack_packer_init(&pw, &want, msgpack_sbuffer_write);
        lmc_msgpack_sbuffer_packer_init(&pg, &got);
        msgpack_packer_init(&ps, &staged, recording_write);
        msgpack_pack_array(&pw, lens[t]);
        for (size_t i = 0; i < lens[t]; i++)
            msgpack_pack_uint32(&pw, v[i]);
        assert_int_equal(lmc_msgpack_pack_uint32_array(&pg, v, lens[t]), 0);
        assert_int_equal(lmc_msgpack_pack_uint32_array(&ps, v, lens[t]), 0);
        assert_int_equal(got.size, want.size);
        assert_memory_equal(got.data, want.data, want.size);
        assert_int_equal(staged.sb.size, want.size);
        assert_memory_equal(staged.sb.data, want.data, want.size);
        /* Staged: the array header, then one call per window's worth of items. */
        size_t windows = (lens[t] + LMC_MP_WINDOW_BYTES / 5 - 1) / (LMC_MP_WINDOW_BYTES / 5);
        assert_int_equal(staged.calls, 1 + windows);
        msgpack_sbuffer_destroy(&want);
        msgpack_sbuffer_destroy(&got);
        msgpack_sbuffer_destroy(&staged.sb);
    }
}

/* The window: bytes written in place land in the sbuffer in order with what
 * was packed through the packer while it was empty, across growth; staged,
 * a refusing callback's code comes back from flush and close. */
static void test_a_window_writes_in_place_or_staged_and_reports_refusals(void **state)
{
    (void)state;
    for (int in_place = 0; in_place < 2; in_place++) {
        msgpack_sbuffer want;
        recording_sink staged = {.calls = 0};
        msgpack_sbuffer got;
        msgpack_sbuffer_init(&want);
        msgpack_sbuffer_init(&got);
        msgpack_sbuffer_init(&staged.sb);
        msgpack_packer pw, pk;
        msgpack_packer_init(&pw, &want, msgpack_sbuffer_write);
        if (in_place)
            lmc_msgpack_sbuffer_packer_init(&pk, &got);
        else
            msgpack_packer_init(&pk, &staged, recording_write);
        lmc_mp_window w;
        assert_int_equal(lmc_mp_window_open(&w, &pk), 0);
        assert_true(w.end - w.start >= LMC_MP_WINDOW_BYTES);
        for (int round = 0; round < 40; round++) {
            /* A window's worth of bytes by hand, then an item through the packer. */
            uint8_t *p = w.start;
            for (size_t i = 0; i < LMC_MP_WINDOW_BYTES; i++)
                *p++ = (uint8_t)(0x80 | ((round + i) & 0x7f)); /* not msgpack: bytes */
            msgpack_pack_bin_body(&pw, w.start, LMC_MP_WINDOW_BYTES);
            assert_int_equal(lmc_mp_window_flush(&w, p), 0);
            assert_int_equal(msgpack_pack_int(&pk, round), 0);
            assert_int_equal(msgpack_pack_int(&pw, round), 0);
            assert_int_equal(lmc_mp_window_flush(&w, w.start), 0); /* room after it */
        }
        uint8_t *p = w.start;
        *p++ = 0xc0;
        assert_int_equal(lmc_mp_window_close(&w, p), 0);
        msgpack_pack_nil(&pw);
        const msgpack_sbuffer *out = in_place ? &got : &staged.sb;
        assert_int_equal(out->size, want.size);
        assert_memory_equal(out->data, want.data, want.size);
        if (in_place)
            assert_int_equal(staged.calls, 0);
        msgpack_sbuffer_destroy(&want);
        msgpack_sbuffer_destroy(&got);
        msgpack_sbuffer_destroy(&staged.sb);
    }
    /* A staged callback that refuses: flush and close return its code. */
    recording_sink refusing = {.fail_at = 1};
    msgpack_sbuffer_init(&refusing.sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &refusing, recording_write);
    lmc_mp_window w;
    assert_int_equal(lmc_mp_window_open(&w, &pk), 0);
    uint8_t *p = w.start;
    *p++ = 1;
    assert_int_equal(lmc_mp_window_flush(&w, p), -7);
    refusing.fail_at = 3;
    assert_int_equal(lmc_mp_window_open(&w, &pk), 0);
    p = w.start;
    *p++ = 2;
    assert_int_equal(lmc_mp_window_flush(&w, p), 0);
    p = w.start;
    *p++ = 3;
    assert_int_equal(lmc_mp_window_close(&w, p), -7);
    assert_int_equal(lmc_mp_window_close(&w, w.start), 0); /* empty: no call */
    assert_int_equal(refusing.calls, 3);
    assert_int_equal(refusing.sb.size, 1);
    assert_int_equal((uint8_t)refusing.sb.data[0], 2);
    /* And the array packer passes a refusal on. */
    refusing.calls = 0;
    refusing.fail_at = 2; /* the header goes, the first window does not */
    static const uint32_t v[3] = {1, 2, 3};
    assert_int_equal(lmc_msgpack_pack_uint32_array(&pk, v, 3), -7);
    msgpack_sbuffer_destroy(&refusing.sb);
}

/* The run reader takes the four short uint encodings and stops, unmoved, at anything else. */
static void test_uint32_runs_stop_before_other_items_and_truncation(void **state)
{
    (void)state;
    static const uint8_t b[] = {0x05, 0xcc, 0xc8, 0xcd, 0x12, 0x34, 0xce, 0x89, 0xab, 0xcd, 0xef,
                                0xcf, 0, 0, 0, 0, 0, 0, 0, 7, /* uint 64: not taken */
                                0x7f, 0xcd, 0x01};           /* then a truncated uint 16 */
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, b, sizeof(b));
    uint32_t out[8] = {0};
    assert_int_equal(lmc_mp_take_uint32s(&r, out, 8), 4);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], 200);
    assert_int_equal(out[2], 0x1234);
    assert_int_equal(out[3], 0x89abcdefu);
    assert_int_equal(r.p - b, 11);
    uint64_t u = 0;
    assert_true(lmc_mp_take_uint(&r, &u)); /* the caller's general path */
    assert_int_equal(u, 7);
    assert_int_equal(lmc_mp_take_uint32s(&r, out, 8), 1);
    assert_int_equal(out[0], 0x7f);
    assert_int_equal(r.p - b, 21);
    assert_int_equal(lmc_mp_take_uint32s(&r, out, 8), 0); /* the truncated uint 16 */
    assert_int_equal(r.p - b, 21);
    /* n bounds the run. */
    lmc_mp_reader_init(&r, b, sizeof(b));
    assert_int_equal(lmc_mp_take_uint32s(&r, out, 2), 2);
    assert_int_equal(r.p - b, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_every_scalar_encoding),
        cmocka_unit_test(test_signed_encodings_of_non_negative_values_are_uint),
        cmocka_unit_test(test_uint64_range_is_kept_and_reported_apart_from_int64),
        cmocka_unit_test(test_number_helpers_refuse_other_types),
        cmocka_unit_test(test_reads_strs_bins_and_exts_as_pointers_into_the_buffer),
        cmocka_unit_test(test_reads_container_headers_only),
        cmocka_unit_test(test_matches_msgpack_c_on_packed_values),
        cmocka_unit_test(test_every_truncation_point_is_reported_without_moving),
        cmocka_unit_test(test_counts_that_cannot_fit_are_truncated_before_anything_is_read),
        cmocka_unit_test(test_reserved_byte_c1_is_invalid),
        cmocka_unit_test(test_skip_enforces_its_depth_limit),
        cmocka_unit_test(test_skip_without_a_limit_takes_any_depth_without_recursion),
        cmocka_unit_test(test_skip_walks_maps_and_stops_after_one_value),
        cmocka_unit_test(test_take_consumes_only_an_exact_match),
        cmocka_unit_test(test_take_uint_reads_only_the_unsigned_encodings),
        cmocka_unit_test(test_error_messages_name_the_problem_and_the_offset),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_empty_and_null_buffers_are_truncated),
        cmocka_unit_test(test_msgpack_objects_follow_the_reader_rules),
        cmocka_unit_test(test_byte_order_helpers_round_trip),
        cmocka_unit_test(test_uint32_arrays_pack_as_msgpack_c_packs_them),
        cmocka_unit_test(test_a_window_writes_in_place_or_staged_and_reports_refusals),
        cmocka_unit_test(test_uint32_runs_stop_before_other_items_and_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
