/*
 * test_trace_codec.c -- the codec registry and wire forms (spec/trace-format.md
 * section 2, LMCache's test_codecs.py), msgspec's scalar encodings (section
 * 1.2), the decode arena and the Python-style value rendering.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/msgpack_util.h"
#include "helpers/trace_test_util.h"
#include "trace/codec.h"
#include "trace/value.h"

static const char KEY_HEX_NO_SALT[] =
    "82 a55f5f745f5f a94f626a6563744b6579 a176 84 aa6368756e6b5f68617368 c40101"
    " aa6d6f64656c5f6e616d65 a16d a76b765f72616e6b 01 af6f626a6563745f67726f75705f6964 00";
static const char KEY_HEX_SALT[] =
    "82 a55f5f745f5f a94f626a6563744b6579 a176 85 aa6368756e6b5f68617368 c40101"
    " aa6d6f64656c5f6e616d65 a16d a76b765f72616e6b 01 af6f626a6563745f67726f75705f6964 00"
    " aa63616368655f73616c74 a0";

typedef struct fixture {
    lmc_arena arena;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    lmc_arena_init(&f->arena, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_arena_free(&f->arena);
    free(f);
    return 0;
}

static lmc_arena *arena(void **state)
{
    return &((fixture *)*state)->arena;
}

static void assert_encodes_to(const lmc_tv *v, const char *hex)
{
    msgpack_sbuffer sb;
    tt_encode(v, &sb);
    tt_assert_hex(sb.data, sb.size, hex);
    msgpack_sbuffer_destroy(&sb);
}

static void assert_msg_contains(const lmc_error *err, const char *want)
{
    if (strstr(err->msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", err->msg, want);
}

static lmc_tv key_tv(const lmc_object_key *k)
{
    lmc_tv v = {.kind = LMC_TV_OBJECT_KEY, .u.key = k};
    return v;
}

static lmc_tv list_tv(uint32_t kind, lmc_tv *items, size_t n)
{
    lmc_tv v = {.kind = kind, .u.list = {items, n}};
    return v;
}

/* ---------------------------------------------------------------------- */
/* Pass-through natives                                                    */
/* ---------------------------------------------------------------------- */

static void test_passthrough_ints(void **state)
{
    const int64_t ints[] = {0, 1, -1};
    for (size_t i = 0; i < 3; i++) {
        lmc_tv in = lmc_tv_int(ints[i]);
        lmc_tv out = tt_round_trip(&in, arena(state));
        assert_int_equal(out.kind, LMC_TV_INT);
        assert_int_equal(out.u.i, ints[i]);
    }
}

static void test_passthrough_float(void **state)
{
    lmc_tv in = lmc_tv_float(3.14);
    assert_encodes_to(&in, "cb 40091eb851eb851f");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_FLOAT);
    assert_true(out.u.f == 3.14);
}

static void test_passthrough_str(void **state)
{
    lmc_tv in = lmc_tv_str("hi", 2);
    assert_encodes_to(&in, "a2 6869");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_STR);
    assert_int_equal(out.u.s.len, 2);
    assert_memory_equal(out.u.s.ptr, "hi", 2);
}

static void test_passthrough_bytes_as_bin8(void **state)
{
    lmc_tv in = {.kind = LMC_TV_BIN, .u.s = {"bytes", 5}};
    assert_encodes_to(&in, "c4 05 6279746573");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_BIN);
    assert_int_equal(out.u.s.len, 5);
    assert_memory_equal(out.u.s.ptr, "bytes", 5);
}

static void test_passthrough_bools(void **state)
{
    lmc_tv t = lmc_tv_bool(true), f = lmc_tv_bool(false);
    assert_encodes_to(&t, "c3");
    assert_encodes_to(&f, "c2");
    lmc_tv out = tt_round_trip(&t, arena(state));
    assert_int_equal(out.kind, LMC_TV_BOOL);
    assert_true(out.u.b);
    out = tt_round_trip(&f, arena(state));
    assert_int_equal(out.kind, LMC_TV_BOOL);
    assert_false(out.u.b);
}

static void test_passthrough_nil(void **state)
{
    lmc_tv in = lmc_tv_nil();
    assert_encodes_to(&in, "c0");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_NIL);
}

static void test_decoded_strings_are_copied_into_the_arena(void **state)
{
    uint8_t bytes[] = {0xa2, 'h', 'i'};
    lmc_tv out;
    assert_int_equal(tt_decode(bytes, sizeof(bytes), arena(state), &out, NULL), LMC_OK);
    bytes[1] = 'X';
    assert_memory_equal(out.u.s.ptr, "hi", 2);
    assert_int_equal(out.u.s.ptr[2], '\0');
}

/* ---------------------------------------------------------------------- */
/* msgspec's scalar and container encodings                                */
/* ---------------------------------------------------------------------- */

static void test_ints_use_the_smallest_msgspec_form_at_every_boundary(void **state)
{
    (void)state;
    static const struct {
        int64_t v;
        const char *hex;
    } cases[] = {
        {0, "00"},
        {127, "7f"},
        {128, "cc80"},
        {200, "ccc8"},
        {255, "ccff"},
        {256, "cd0100"},
        {1000, "cd03e8"},
        {65535, "cdffff"},
        {65536, "ce00010000"},
        {4294967295LL, "ceffffffff"},
        {4294967296LL, "cf0000000100000000"},
        {INT64_MAX, "cf7fffffffffffffff"},
        {-1, "ff"},
        {-32, "e0"},
        {-33, "d0df"},
        {-128, "d080"},
        {-129, "d1ff7f"},
        {-32768, "d18000"},
        {-32769, "d2ffff7fff"},
        {-2147483648LL, "d280000000"},
        {-2147483649LL, "d3ffffffff7fffffff"},
        {INT64_MIN, "d38000000000000000"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lmc_tv v = lmc_tv_int(cases[i].v);
        assert_encodes_to(&v, cases[i].hex);
    }
}

static void test_ints_round_trip_at_every_boundary(void **state)
{
    static const int64_t vals[] = {127, 128, 255,  256,  65535,  65536,  4294967295, INT64_MAX,
                                   -32, -33, -128, -129, -32768, -32769, INT64_MIN};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        lmc_tv in = lmc_tv_int(vals[i]);
        lmc_tv out = tt_round_trip(&in, arena(state));
        assert_int_equal(out.kind, LMC_TV_INT);
        assert_true(out.u.i == vals[i]);
    }
}

static void test_uint64_above_int64_max_decodes_as_uint_and_round_trips(void **state)
{
    /* msgpack (and LMCache) take integers up to 2^64-1. */
    uint8_t bytes[] = {0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    lmc_tv out;
    assert_int_equal(tt_decode(bytes, sizeof(bytes), arena(state), &out, NULL), LMC_OK);
    assert_int_equal(out.kind, LMC_TV_UINT);
    assert_true(out.u.u == UINT64_MAX);
    assert_encodes_to(&out, "cf ffffffffffffffff");
    lmc_tv edge = lmc_tv_uint((uint64_t)INT64_MAX + 1);
    lmc_tv back = tt_round_trip(&edge, arena(state));
    assert_int_equal(back.kind, LMC_TV_UINT);
    assert_true(back.u.u == (uint64_t)INT64_MAX + 1);
    lmc_tv small = lmc_tv_uint(5); /* what fits int64 stays an INT */
    assert_int_equal(small.kind, LMC_TV_INT);
}

static void test_floats_are_always_float64(void **state)
{
    (void)state;
    lmc_tv v = lmc_tv_float(1.5);
    assert_encodes_to(&v, "cb 3ff8000000000000");
    v = lmc_tv_float(0.0);
    assert_encodes_to(&v, "cb 0000000000000000");
}

static void test_float32_on_the_wire_decodes_as_float(void **state)
{
    uint8_t bytes[] = {0xca, 0x3f, 0xc0, 0x00, 0x00}; /* 1.5f */
    lmc_tv out;
    assert_int_equal(tt_decode(bytes, sizeof(bytes), arena(state), &out, NULL), LMC_OK);
    assert_int_equal(out.kind, LMC_TV_FLOAT);
    assert_true(out.u.f == 1.5);
}

static void test_str_lengths_use_fixstr_str8_str16(void **state)
{
    (void)state;
    char s[300];
    memset(s, 'a', sizeof(s));
    msgpack_sbuffer sb;
    lmc_tv v = lmc_tv_str(s, 31);
    tt_encode(&v, &sb);
    assert_int_equal(sb.size, 32);
    assert_int_equal((uint8_t)sb.data[0], 0xbf);
    msgpack_sbuffer_destroy(&sb);
    v = lmc_tv_str(s, 32);
    tt_encode(&v, &sb);
    assert_int_equal(sb.size, 34);
    tt_assert_hex(sb.data, 2, "d920");
    msgpack_sbuffer_destroy(&sb);
    v = lmc_tv_str(s, 256);
    tt_encode(&v, &sb);
    assert_int_equal(sb.size, 259);
    tt_assert_hex(sb.data, 3, "da0100");
    msgpack_sbuffer_destroy(&sb);
}

static void test_empty_bytes_and_long_bytes_use_bin_forms(void **state)
{
    (void)state;
    lmc_tv v = {.kind = LMC_TV_BIN, .u.s = {"", 0}};
    assert_encodes_to(&v, "c400");
    static char big[256];
    v.u.s.ptr = big;
    v.u.s.len = sizeof(big);
    msgpack_sbuffer sb;
    tt_encode(&v, &sb);
    tt_assert_hex(sb.data, 3, "c50100");
    msgpack_sbuffer_destroy(&sb);
}

static void test_sixteen_items_use_array16_and_map16(void **state)
{
    (void)state;
    lmc_tv items[16], keys[16];
    char names[16][2];
    for (int i = 0; i < 16; i++) {
        items[i] = lmc_tv_int(i);
        names[i][0] = (char)('a' + i);
        keys[i] = lmc_tv_str(names[i], 1);
    }
    msgpack_sbuffer sb;
    lmc_tv list = list_tv(LMC_TV_LIST, items, 16);
    tt_encode(&list, &sb);
    tt_assert_hex(sb.data, 4, "dc0010 00");
    msgpack_sbuffer_destroy(&sb);
    lmc_tv map = {.kind = LMC_TV_MAP, .u.map = {keys, items, 16}};
    tt_encode(&map, &sb);
    tt_assert_hex(sb.data, 5, "de0010 a161");
    msgpack_sbuffer_destroy(&sb);
    lmc_tv empty = {.kind = LMC_TV_MAP, .u.map = {NULL, NULL, 0}};
    assert_encodes_to(&empty, "80");
}

/* ---------------------------------------------------------------------- */
/* Containers                                                              */
/* ---------------------------------------------------------------------- */

static void test_list_round_trips(void **state)
{
    lmc_tv items[3] = {lmc_tv_int(1), lmc_tv_str("two", 3), lmc_tv_nil()};
    lmc_tv in = list_tv(LMC_TV_LIST, items, 3);
    assert_encodes_to(&in, "93 01 a374776f c0");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_LIST);
    assert_int_equal(out.u.list.n, 3);
    assert_int_equal(out.u.list.items[0].u.i, 1);
    assert_memory_equal(out.u.list.items[1].u.s.ptr, "two", 3);
    assert_int_equal(out.u.list.items[2].kind, LMC_TV_NIL);
}

static void test_map_round_trips_in_insertion_order(void **state)
{
    lmc_tv keys[2] = {lmc_tv_str("y", 1), lmc_tv_str("x", 1)};
    lmc_tv vals[2] = {lmc_tv_int(2), lmc_tv_int(1)};
    lmc_tv in = {.kind = LMC_TV_MAP, .u.map = {keys, vals, 2}};
    assert_encodes_to(&in, "82 a179 02 a178 01");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_MAP);
    assert_int_equal(out.u.map.n, 2);
    assert_memory_equal(out.u.map.keys[0].u.s.ptr, "y", 1);
    assert_int_equal(out.u.map.vals[0].u.i, 2);
    assert_memory_equal(out.u.map.keys[1].u.s.ptr, "x", 1);
    assert_int_equal(out.u.map.vals[1].u.i, 1);
}

static void test_tuple_encodes_to_the_spec_bytes(void **state)
{
    (void)state;
    lmc_tv items[2] = {lmc_tv_int(1), lmc_tv_int(2)};
    lmc_tv in = list_tv(LMC_TV_TUPLE, items, 2);
    assert_encodes_to(&in, "82 a5 5f5f745f5f a5 7475706c65 a1 76 92 01 02");
}

static void test_tuple_stays_a_tuple(void **state)
{
    lmc_tv items[2] = {lmc_tv_int(1), lmc_tv_int(2)};
    lmc_tv in = list_tv(LMC_TV_TUPLE, items, 2);
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_TUPLE);
    assert_int_equal(out.u.list.n, 2);
    assert_int_equal(out.u.list.items[1].u.i, 2);
}

static void test_nested_tuple_inside_a_list_inside_a_map(void **state)
{
    lmc_tv inner[1] = {lmc_tv_str("a", 1)};
    lmc_tv tup = list_tv(LMC_TV_TUPLE, inner, 1);
    lmc_tv lst = list_tv(LMC_TV_LIST, &tup, 1);
    lmc_tv key = lmc_tv_str("k", 1);
    lmc_tv in = {.kind = LMC_TV_MAP, .u.map = {&key, &lst, 1}};
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.u.map.vals[0].kind, LMC_TV_LIST);
    assert_int_equal(out.u.map.vals[0].u.list.items[0].kind, LMC_TV_TUPLE);
}

/* ---------------------------------------------------------------------- */
/* ObjectKey                                                               */
/* ---------------------------------------------------------------------- */

static void test_object_key_round_trips(void **state)
{
    lmc_object_key k = tt_key("llama", 0xdeadbeef, lmc_compute_kv_rank(1, 0, 1, 0), 0, NULL);
    lmc_tv in = key_tv(&k);
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_OBJECT_KEY);
    assert_true(lmc_object_key_equal(out.u.key, &k));
}

static void test_object_key_with_group_and_salt_round_trips(void **state)
{
    lmc_object_key k = tt_key("llama", 42, 3, 7, "tenant-a");
    lmc_tv in = key_tv(&k);
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_true(lmc_object_key_equal(out.u.key, &k));
    assert_int_equal(out.u.key->object_group_id, 7);
    assert_string_equal(out.u.key->cache_salt, "tenant-a");
}

static void test_object_keys_inside_a_list_round_trip(void **state)
{
    lmc_object_key k[3];
    lmc_tv items[3];
    for (int i = 0; i < 3; i++) {
        k[i] = tt_key("m", (uint32_t)i, 0, 0, NULL);
        items[i] = key_tv(&k[i]);
    }
    lmc_tv in = list_tv(LMC_TV_LIST, items, 3);
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.u.list.n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(out.u.list.items[i].kind, LMC_TV_OBJECT_KEY);
        assert_true(lmc_object_key_equal(out.u.list.items[i].u.key, &k[i]));
    }
}

static void test_a_list_of_object_keys_encodes_as_its_keys_one_by_one(void **state)
{
    (void)state;
    /* Different models, salts, ranks (negative too) and hash lengths, so
     * the list path's per-pointer length cache and int forms are exercised. */
    lmc_object_key k[5] = {
        tt_key("m", 1, 0, 0, NULL),
        tt_key("m", 2, 300, 70000, "tenant-a"),
        tt_key("meta-llama/Llama-3.1-8B-Instruct-with-a-long-name", 3, -5, 1, NULL),
        tt_key("m", 4, -200, 5000000000LL, "tenant-a"),
        tt_key("m", 5, 1, 2, ""),
    };
    k[4].chunk_hash_len = 32;
    lmc_tv items[5];
    for (int i = 0; i < 5; i++)
        items[i] = key_tv(&k[i]);
    lmc_tv list = list_tv(LMC_TV_LIST, items, 5);
    msgpack_sbuffer whole;
    tt_encode(&list, &whole);

    msgpack_sbuffer each;
    msgpack_sbuffer_init(&each);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &each, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 5);
    for (int i = 0; i < 5; i++) {
        msgpack_sbuffer one;
        tt_encode(&items[i], &one);
        msgpack_sbuffer_write(&each, one.data, one.size);
        msgpack_sbuffer_destroy(&one);
    }
    assert_int_equal(whole.size, each.size);
    assert_memory_equal(whole.data, each.data, each.size);
    msgpack_sbuffer_destroy(&whole);
    msgpack_sbuffer_destroy(&each);
}

/*
 * A long keys list -- runs of keys that share their fields, then changes of
 * hash length, model, salt, rank and group, and keys too long for the list
 * path in between -- encodes as its keys one by one, whether the packer
 * writes to an sbuffer in place (lmc_msgpack_sbuffer_packer_init, as the
 * recorder's does) or through another callback; both cross many windows.
 */
static void test_a_long_list_of_object_keys_encodes_the_same_in_place_and_staged(void **state)
{
    (void)state;
    enum { N = 300 };
    static char long_model[600];
    memset(long_model, 'L', sizeof(long_model) - 1);
    static const size_t hash_lens[] = {32, 32, 32, 4, 0, 64, 1, 32};
    uint8_t hash[LMC_CHUNK_HASH_MAX];
    lmc_object_key *k = calloc(N, sizeof(*k));
    lmc_tv *items = calloc(N, sizeof(*items));
    assert_non_null(k);
    assert_non_null(items);
    for (int i = 0; i < N; i++) {
        for (size_t b = 0; b < sizeof(hash); b++)
            hash[b] = (uint8_t)(i * 31 + b);
        const char *model = i % 97 == 50 ? long_model : i % 40 < 20 ? "meta-llama/Llama-3.1-8B" : "m";
        const char *salt = i % 60 < 45 ? "" : "tenant-a";
        assert_int_equal(lmc_object_key_make_n(&k[i], hash, hash_lens[(i / 7) % 8], model,
                                               strlen(model), i / 50, (i / 25) % 3, salt,
                                               strlen(salt), NULL),
                         LMC_OK);
        items[i] = key_tv(&k[i]);
    }
    lmc_tv list = list_tv(LMC_TV_LIST, items, N);

    msgpack_sbuffer each;
    msgpack_sbuffer_init(&each);
    msgpack_packer pe;
    msgpack_packer_init(&pe, &each, msgpack_sbuffer_write);
    msgpack_pack_array(&pe, N);
    for (int i = 0; i < N; i++) {
        msgpack_sbuffer one;
        tt_encode(&items[i], &one);
        msgpack_sbuffer_write(&each, one.data, one.size);
        msgpack_sbuffer_destroy(&one);
    }
    assert_true(each.size > 4 * LMC_MP_WINDOW_BYTES);

    for (int in_place = 0; in_place < 2; in_place++) {
        msgpack_sbuffer whole;
        msgpack_sbuffer_init(&whole);
        msgpack_packer pk;
        if (in_place)
            lmc_msgpack_sbuffer_packer_init(&pk, &whole);
        else
            msgpack_packer_init(&pk, &whole, msgpack_sbuffer_write);
        lmc_error err;
        assert_int_equal(lmc_codec_encode_value(&pk, &list, &err), LMC_OK);
        assert_int_equal(whole.size, each.size);
        assert_memory_equal(whole.data, each.data, each.size);
        msgpack_sbuffer_destroy(&whole);
    }
    msgpack_sbuffer_destroy(&each);
    free(items);
    free(k);
}

static void test_object_key_schema2_encoding_appends_cache_salt(void **state)
{
    (void)state;
    uint8_t h = 0x01;
    lmc_object_key k;
    assert_int_equal(lmc_object_key_make(&k, &h, 1, "m", 1, 0, NULL, NULL), LMC_OK);
    lmc_tv in = key_tv(&k);
    assert_encodes_to(&in, KEY_HEX_SALT);
}

static void test_object_key_spec_vector_without_salt_decodes(void **state)
{
    size_t n;
    uint8_t *bytes = tt_unhex(KEY_HEX_NO_SALT, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_OK);
    free(bytes);
    assert_int_equal(out.kind, LMC_TV_OBJECT_KEY);
    assert_int_equal(out.u.key->chunk_hash_len, 1);
    assert_int_equal(out.u.key->chunk_hash[0], 0x01);
    assert_string_equal(out.u.key->model_name, "m");
    assert_int_equal(out.u.key->kv_rank, 1);
    assert_int_equal(out.u.key->object_group_id, 0);
    assert_string_equal(out.u.key->cache_salt, "");
}

static void test_object_key_without_group_defaults_to_zero(void **state)
{
    /* {"__t__":"ObjectKey","v":{chunk_hash, model_name, kv_rank}} */
    const char *hex = "82 a55f5f745f5f a94f626a6563744b6579 a176 83 aa6368756e6b5f68617368 c40101"
                      " aa6d6f64656c5f6e616d65 a16d a76b765f72616e6b 05";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, NULL), LMC_OK);
    free(bytes);
    assert_int_equal(out.u.key->kv_rank, 5);
    assert_int_equal(out.u.key->object_group_id, 0);
}

static void test_object_key_invalid_model_name_is_a_format_error(void **state)
{
    /* model_name "a@b" */
    const char *hex = "82 a55f5f745f5f a94f626a6563744b6579 a176 83 aa6368756e6b5f68617368 c40101"
                      " aa6d6f64656c5f6e616d65 a3614062 a76b765f72616e6b 05";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "ObjectKey");
    assert_msg_contains(&err, "'@'");
}

static void test_object_key_missing_kv_rank_is_a_format_error(void **state)
{
    const char *hex = "82 a55f5f745f5f a94f626a6563744b6579 a176 82 aa6368756e6b5f68617368 c40101"
                      " aa6d6f64656c5f6e616d65 a16d";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "invalid ObjectKey payload: missing field 'kv_rank'");
}

static void test_object_key_payload_must_be_a_map(void **state)
{
    const char *hex = "82 a55f5f745f5f a94f626a6563744b6579 a176 90";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "expected a map, got array");
}

/* The ObjectKey wire form built field by field with msgpack-c's packer. */
static void reference_key_bytes(const lmc_object_key *k, msgpack_sbuffer *sb)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    const char *names[] = {"__t__",   "ObjectKey",       "v",         "chunk_hash", "model_name",
                           "kv_rank", "object_group_id", "cache_salt"};
#define REF_STR(s, n) (msgpack_pack_str(&pk, (n)), msgpack_pack_str_body(&pk, (s), (n)))
#define REF_NAME(i) REF_STR(names[i], strlen(names[i]))
    msgpack_pack_map(&pk, 2);
    REF_NAME(0);
    REF_NAME(1);
    REF_NAME(2);
    msgpack_pack_map(&pk, 5);
    REF_NAME(3);
    msgpack_pack_bin(&pk, k->chunk_hash_len);
    msgpack_pack_bin_body(&pk, k->chunk_hash, k->chunk_hash_len);
    REF_NAME(4);
    REF_STR(k->model_name, strlen(k->model_name));
    REF_NAME(5);
    msgpack_pack_int64(&pk, k->kv_rank);
    REF_NAME(6);
    msgpack_pack_int64(&pk, k->object_group_id);
    REF_NAME(7);
    REF_STR(k->cache_salt, strlen(k->cache_salt));
#undef REF_NAME
#undef REF_STR
}

static void assert_key_matches_reference(const lmc_object_key *k)
{
    msgpack_sbuffer want, got;
    reference_key_bytes(k, &want);
    lmc_tv v = key_tv(k);
    tt_encode(&v, &got);
    char *hex = tt_hex(want.data, want.size);
    tt_assert_hex(got.data, got.size, hex);
    free(hex);
    msgpack_sbuffer_destroy(&want);
    msgpack_sbuffer_destroy(&got);
}

static void test_object_key_bytes_match_msgpack_c_for_every_field_form(void **state)
{
    (void)state;
    static const int64_t ranks[] = {0,     127,        128,          255,       256, 65535,
                                    65536, 0x01000100, 4294967296LL, INT64_MAX, -1,  -32,
                                    -33,   -129,       -40000,       INT64_MIN};
    static const int64_t groups[] = {0, 7, 200, 70000, 5000000000LL};
    static const size_t hash_lens[] = {0, 1, 32, 64};
    static const size_t salt_lens[] = {0, 5, 31, 32, 128};
    uint8_t hash[64];
    char salt[129];
    for (size_t i = 0; i < sizeof(hash); i++)
        hash[i] = (uint8_t)(i * 37 + 1);
    memset(salt, 's', sizeof(salt));
    for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++) {
        for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
            for (size_t h = 0; h < 4; h++) {
                for (size_t sl = 0; sl < 5; sl++) {
                    lmc_object_key k;
                    assert_int_equal(lmc_object_key_make_n(&k, hash, hash_lens[h],
                                                           "meta-llama/Llama-3.1-8B", 23, ranks[r],
                                                           groups[g], salt, salt_lens[sl], NULL),
                                     LMC_OK);
                    assert_key_matches_reference(&k);
                }
            }
        }
    }
}

static void test_object_key_with_a_long_model_name_matches_msgpack_c(void **state)
{
    (void)state;
    char model[1025];
    memset(model, 'M', 1024);
    model[1024] = '\0';
    char salt[129];
    memset(salt, 'x', 128);
    salt[128] = '\0';
    static const size_t model_lens[] = {255, 256, 400, 1024};
    for (size_t i = 0; i < 4; i++) {
        model[model_lens[i]] = '\0';
        lmc_object_key k;
        uint8_t h[64] = {9};
        assert_int_equal(lmc_object_key_make(&k, h, 64, model, 3, 1, salt, NULL), LMC_OK);
        assert_key_matches_reference(&k);
        model[model_lens[i]] = 'M';
    }
}

/* ---------------------------------------------------------------------- */
/* MemoryLayoutDesc, torch.Size, torch.dtype, TrimPolicy                   */
/* ---------------------------------------------------------------------- */

static lmc_layout_desc two_tensor_layout(void)
{
    lmc_shape shapes[2] = {{2, {4, 8}}, {3, {2, 16, 64}}};
    lmc_dtype dtypes[2] = {LMC_DTYPE_FLOAT16, LMC_DTYPE_BFLOAT16};
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make(&d, shapes, 2, dtypes, 2, NULL), LMC_OK);
    return d;
}

static void test_layout_with_two_shapes_round_trips(void **state)
{
    lmc_layout_desc d = two_tensor_layout();
    lmc_tv in = {.kind = LMC_TV_LAYOUT, .u.layout = &d};
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_LAYOUT);
    assert_true(lmc_layout_desc_equal(out.u.layout, &d));
    assert_int_equal(out.u.layout->dtypes[1], LMC_DTYPE_BFLOAT16);
}

static void test_layout_wire_form_is_shapes_then_dtype_names(void **state)
{
    (void)state;
    lmc_layout_desc d;
    int64_t dims[2] = {2, 300};
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 2, LMC_DTYPE_FLOAT16, NULL), LMC_OK);
    lmc_tv in = {.kind = LMC_TV_LAYOUT, .u.layout = &d};
    /* {"__t__":"MemoryLayoutDesc","v":{"shapes":[[2,300]],"dtypes":["torch.float16"]}} */
    assert_encodes_to(&in, "82 a55f5f745f5f b04d656d6f72794c61796f757444657363 a176"
                           " 82 a6736861706573 91 92 02 cd012c"
                           " a6647479706573 91 ad746f7263682e666c6f61743136");
}

/* The layout's wire form built piece by piece with msgpack-c's packer. */
static void reference_layout_bytes(const lmc_layout_desc *d, msgpack_sbuffer *sb)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
#define REF_CSTR(s) (msgpack_pack_str(&pk, strlen(s)), msgpack_pack_str_body(&pk, (s), strlen(s)))
    msgpack_pack_map(&pk, 2);
    REF_CSTR("__t__");
    REF_CSTR("MemoryLayoutDesc");
    REF_CSTR("v");
    msgpack_pack_map(&pk, 2);
    REF_CSTR("shapes");
    msgpack_pack_array(&pk, d->count);
    for (uint32_t i = 0; i < d->count; i++) {
        msgpack_pack_array(&pk, d->shapes[i].ndim);
        for (uint32_t j = 0; j < d->shapes[i].ndim; j++)
            msgpack_pack_int64(&pk, d->shapes[i].dims[j]);
    }
    REF_CSTR("dtypes");
    msgpack_pack_array(&pk, d->count);
    for (uint32_t i = 0; i < d->count; i++)
        REF_CSTR(lmc_dtype_name(d->dtypes[i]));
#undef REF_CSTR
}

static void test_layout_bytes_match_msgpack_c_for_every_int_form(void **state)
{
    (void)state;
    static const int64_t dims[] = {0,     1,     127,   128,          255,          256,
                                   65535, 65536, 70000, 4294967295LL, 4294967296LL, INT64_MAX};
    enum { NDIMS = sizeof(dims) / sizeof(dims[0]) };
    for (size_t first = 0; first + LMC_SHAPE_MAX_DIMS - 1 <= NDIMS; first++) {
        lmc_shape shapes[LMC_LAYOUT_MAX_TENSORS];
        lmc_dtype dtypes[LMC_LAYOUT_MAX_TENSORS];
        for (uint32_t i = 0; i < LMC_LAYOUT_MAX_TENSORS; i++) {
            shapes[i].ndim = 1 + (uint32_t)((first + i) % LMC_SHAPE_MAX_DIMS);
            /* A 0 in every shape keeps its byte size from overflowing. */
            for (uint32_t j = 0; j < shapes[i].ndim; j++)
                shapes[i].dims[j] = j == 0 ? 0 : dims[first + j - 1];
            dtypes[i] = i % 2 ? LMC_DTYPE_BFLOAT16 : LMC_DTYPE_FLOAT8_E4M3FNUZ;
        }
        for (size_t count = 1; count <= LMC_LAYOUT_MAX_TENSORS; count++) {
            lmc_layout_desc d;
            assert_int_equal(lmc_layout_desc_make(&d, shapes, count, dtypes, count, NULL), LMC_OK);
            msgpack_sbuffer want, got;
            reference_layout_bytes(&d, &want);
            lmc_tv in = {.kind = LMC_TV_LAYOUT, .u.layout = &d};
            tt_encode(&in, &got);
            char *hex = tt_hex(want.data, want.size);
            tt_assert_hex(got.data, got.size, hex);
            free(hex);
            msgpack_sbuffer_destroy(&want);
            msgpack_sbuffer_destroy(&got);
        }
    }
}

static void test_layout_length_mismatch_is_a_format_error(void **state)
{
    /* shapes [[1]], dtypes [] */
    const char *hex = "82 a55f5f745f5f b04d656d6f72794c61796f757444657363 a176"
                      " 82 a6736861706573 91 91 01 a6647479706573 90";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "same length");
}

static void test_torch_size_round_trips(void **state)
{
    lmc_shape s = {3, {1, 2, 3}};
    lmc_tv in = {.kind = LMC_TV_SIZE, .u.size = &s};
    /* {"__t__":"torch.Size","v":[1,2,3]} */
    assert_encodes_to(&in, "82 a55f5f745f5f aa746f7263682e53697a65 a176 93 010203");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_SIZE);
    assert_int_equal(out.u.size->ndim, 3);
    assert_int_equal(out.u.size->dims[0], 1);
    assert_int_equal(out.u.size->dims[2], 3);
}

static void test_dtypes_round_trip(void **state)
{
    const lmc_dtype dts[] = {LMC_DTYPE_FLOAT16, LMC_DTYPE_BFLOAT16, LMC_DTYPE_FLOAT32,
                             LMC_DTYPE_UINT8};
    for (size_t i = 0; i < 4; i++) {
        lmc_tv in = {.kind = LMC_TV_DTYPE, .u.dtype = dts[i]};
        lmc_tv out = tt_round_trip(&in, arena(state));
        assert_int_equal(out.kind, LMC_TV_DTYPE);
        assert_int_equal(out.u.dtype, dts[i]);
    }
}

static void test_dtype_wire_form_is_the_torch_name(void **state)
{
    (void)state;
    lmc_tv in = {.kind = LMC_TV_DTYPE, .u.dtype = LMC_DTYPE_BFLOAT16};
    /* {"__t__":"torch.dtype","v":"torch.bfloat16"} */
    assert_encodes_to(
        &in, "82 a55f5f745f5f ab746f7263682e6474797065 a176 ae746f7263682e62666c6f61743136");
}

static void test_unknown_dtype_is_rejected(void **state)
{
    /* {"__t__":"torch.dtype","v":"torch.nope"} */
    const char *hex = "82 a55f5f745f5f ab746f7263682e6474797065 a176 aa746f7263682e6e6f7065";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_string_equal(err.msg, "trace.codecs: unknown torch dtype 'torch.nope'");
}

static void test_every_trim_policy_member_round_trips(void **state)
{
    const lmc_trim_policy all[] = {LMC_TRIM_PREFIX, LMC_TRIM_SEGMENTED_PREFIX, LMC_TRIM_SPARSE};
    for (size_t i = 0; i < 3; i++) {
        lmc_tv in = {.kind = LMC_TV_TRIM_POLICY, .u.trim = all[i]};
        lmc_tv out = tt_round_trip(&in, arena(state));
        assert_int_equal(out.kind, LMC_TV_TRIM_POLICY);
        assert_int_equal(out.u.trim, all[i]);
    }
    lmc_tv in = {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_SPARSE};
    /* the member name: "SPARSE" */
    assert_encodes_to(&in, "82 a55f5f745f5f aa5472696d506f6c696379 a176 a6535041525345");
}

/* ---------------------------------------------------------------------- */
/* PrefetchHandle                                                          */
/* ---------------------------------------------------------------------- */

static void test_prefetch_handle_round_trips(void **state)
{
    const uint32_t found[] = {0, 1, 3};
    const uint32_t l2[] = {2, 4};
    lmc_prefetch_handle h;
    assert_int_equal(lmc_prefetch_handle_make(&h, 17, "req-1", found, 3, 5, 12.25, l2, 2), LMC_OK);
    lmc_tv in = {.kind = LMC_TV_PREFETCH_HANDLE, .u.handle = &h};
    lmc_tv out = tt_round_trip(&in, arena(state));
    lmc_prefetch_handle_clear(&h);
    assert_int_equal(out.kind, LMC_TV_PREFETCH_HANDLE);
    const lmc_prefetch_handle *o = out.u.handle;
    assert_int_equal(o->prefetch_request_id, 17);
    assert_string_equal(o->external_request_id, "req-1");
    assert_int_equal(o->l1_found_count, 3);
    assert_memory_equal(o->l1_found_indices, found, sizeof(found));
    assert_int_equal(o->total_requested_keys, 5);
    assert_true(o->submit_time == 12.25);
    assert_int_equal(o->l2_orig_count, 2);
    assert_memory_equal(o->l2_orig_indices, l2, sizeof(l2));
}

static void test_prefetch_handle_wire_form_has_the_derived_hit_count(void **state)
{
    (void)state;
    const uint32_t found[] = {0};
    lmc_prefetch_handle h;
    assert_int_equal(lmc_prefetch_handle_make(&h, -1, "r", found, 1, 1, 0.5, NULL, 0), LMC_OK);
    lmc_tv in = {.kind = LMC_TV_PREFETCH_HANDLE, .u.handle = &h};
    assert_encodes_to(&in, "82 a55f5f745f5f ae507265666574636848616e646c65 a176 87"
                           " b370726566657463685f726571756573745f6964 ff"
                           " b365787465726e616c5f726571756573745f6964 a172"
                           " b36c315f7072656669785f6869745f636f756e74 01"
                           " b06c315f666f756e645f696e6469636573 91 00"
                           " b4746f74616c5f7265717565737465645f6b657973 01"
                           " ab7375626d69745f74696d65 cb3fe0000000000000"
                           " af6c325f6f7269675f696e6469636573 90");
    lmc_prefetch_handle_clear(&h);
}

static void test_prefetch_handle_older_form_fills_a_prefix_of_hits(void **state)
{
    /* {prefetch_request_id 3, external_request_id "r", l1_prefix_hit_count 2,
     *  total_requested_keys 4, submit_time 1.0} */
    const char *hex = "82 a55f5f745f5f ae507265666574636848616e646c65 a176 85"
                      " b370726566657463685f726571756573745f6964 03"
                      " b365787465726e616c5f726571756573745f6964 a172"
                      " b36c315f7072656669785f6869745f636f756e74 02"
                      " b4746f74616c5f7265717565737465645f6b657973 04"
                      " ab7375626d69745f74696d65 cb3ff0000000000000";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_OK);
    free(bytes);
    const lmc_prefetch_handle *h = out.u.handle;
    assert_int_equal(h->prefetch_request_id, 3);
    assert_int_equal(h->l1_found_count, 2);
    assert_int_equal(h->l1_found_indices[0], 0);
    assert_int_equal(h->l1_found_indices[1], 1);
    assert_int_equal(h->total_requested_keys, 4);
    assert_int_equal(h->l2_orig_count, 0);
}

static void test_prefetch_handle_hit_count_beyond_total_is_rejected(void **state)
{
    /* older form with l1_prefix_hit_count 2^40 and total 4 */
    const char *hex = "82 a55f5f745f5f ae507265666574636848616e646c65 a176 85"
                      " b370726566657463685f726571756573745f6964 03"
                      " b365787465726e616c5f726571756573745f6964 a172"
                      " b36c315f7072656669785f6869745f636f756e74 cf0000010000000000"
                      " b4746f74616c5f7265717565737465645f6b657973 04"
                      " ab7375626d69745f74696d65 cb3ff0000000000000";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "l1_prefix_hit_count");
}

/* ---------------------------------------------------------------------- */
/* set                                                                     */
/* ---------------------------------------------------------------------- */

static void test_set_of_object_keys_comes_back_as_a_set(void **state)
{
    lmc_object_key k[2] = {tt_key("m", 1, 0, 0, NULL), tt_key("m", 2, 0, 0, NULL)};
    lmc_tv items[2] = {key_tv(&k[0]), key_tv(&k[1])};
    lmc_tv in = list_tv(LMC_TV_SET, items, 2);
    msgpack_sbuffer sb;
    tt_encode(&in, &sb);
    /* {"__t__":"set","v":[...]} */
    tt_assert_hex(sb.data, 14, "82 a55f5f745f5f a3736574 a176 92");
    msgpack_sbuffer_destroy(&sb);
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, LMC_TV_SET);
    assert_int_equal(out.u.list.n, 2);
    assert_true(lmc_object_key_equal(out.u.list.items[0].u.key, &k[0]));
    assert_true(lmc_object_key_equal(out.u.list.items[1].u.key, &k[1]));
}

/* ---------------------------------------------------------------------- */
/* Errors and the registry                                                 */
/* ---------------------------------------------------------------------- */

static void test_unknown_kind_has_no_codec(void **state)
{
    (void)state;
    lmc_tv payload = lmc_tv_int(1);
    lmc_tv v = {.kind = LMC_TV_KIND_MAX - 1, .u.ext = &payload};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    lmc_error err;
    assert_int_equal(lmc_codec_encode_value(&pk, &v, &err), LMC_ERR_UNSUPPORTED);
    assert_msg_contains(&err, "trace.codecs: no codec registered for type 'kind 63'");
    msgpack_sbuffer_destroy(&sb);
}

static void test_unknown_tag_is_rejected(void **state)
{
    /* {"__t__":"Nope","v":1} */
    const char *hex = "82 a55f5f745f5f a44e6f7065 a176 01";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_string_equal(err.msg, "trace.codecs: unknown tag 'Nope'");
}

static void test_tagged_value_without_payload_is_rejected(void **state)
{
    const char *hex = "81 a55f5f745f5f a5 7475706c65";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "has no 'v'");
}

static void test_non_string_tag_is_rejected(void **state)
{
    const char *hex = "82 a55f5f745f5f 01 a176 01";
    size_t n;
    uint8_t *bytes = tt_unhex(hex, &n);
    lmc_tv out;
    lmc_error err;
    assert_int_equal(tt_decode(bytes, n, arena(state), &out, &err), LMC_ERR_FORMAT);
    free(bytes);
    assert_msg_contains(&err, "must be a str");
}

static void test_lookup_by_kind_and_tag(void **state)
{
    (void)state;
    const lmc_codec *c = lmc_codec_for_kind(LMC_TV_OBJECT_KEY);
    assert_non_null(c);
    assert_string_equal(c->tag, "ObjectKey");
    assert_ptr_equal(lmc_codec_for_tag("torch.dtype", 11), lmc_codec_for_kind(LMC_TV_DTYPE));
    assert_null(lmc_codec_for_tag("torch.dtyp", 10));
    assert_null(lmc_codec_for_kind(LMC_TV_TUPLE)); /* built in, not registered */
    assert_null(lmc_codec_for_kind(LMC_TV_INT));
    assert_null(lmc_codec_for_kind(1000));
}

/* A test-only kind standing in for LMCache's AttnWindowDesc: a list of ints. */
#define KIND_ATTN (LMC_TV_BUILTIN_COUNT_ + 1)

static lmc_status enc_attn(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    return lmc_codec_encode_value(pk, v->u.ext, err);
}

static lmc_status dec_attn(const msgpack_object *payload, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    if (payload->type != MSGPACK_OBJECT_ARRAY)
        return lmc_error_set(err, LMC_ERR_FORMAT, "AttnWindowDesc: expected a list");
    lmc_tv *inner = lmc_arena_alloc(a, sizeof(*inner));
    if (inner == NULL)
        return LMC_ERR_NOMEM;
    lmc_status st = lmc_codec_decode_value(payload, a, inner, err);
    if (st != LMC_OK)
        return st;
    out->kind = KIND_ATTN;
    out->u.ext = inner;
    return LMC_OK;
}

static const lmc_codec ATTN_CODEC = {KIND_ATTN, "AttnWindowDesc", "AttnWindowDesc", enc_attn,
                                     dec_attn};

static void register_attn_once(void)
{
    if (lmc_codec_for_kind(KIND_ATTN) == NULL) {
        lmc_error err;
        if (lmc_codec_register(&ATTN_CODEC, &err) != LMC_OK)
            fail_msg("register: %s", err.msg);
    }
}

static void test_registered_codec_round_trips(void **state)
{
    register_attn_once();
    lmc_tv ints[3] = {lmc_tv_int(-1), lmc_tv_int(4), lmc_tv_int(1)};
    lmc_tv payload = list_tv(LMC_TV_LIST, ints, 3);
    lmc_tv in = {.kind = KIND_ATTN, .u.ext = &payload};
    /* {"__t__":"AttnWindowDesc","v":[-1,4,1]} */
    assert_encodes_to(&in, "82 a55f5f745f5f ae4174746e57696e646f7744657363 a176 93 ff0401");
    lmc_tv out = tt_round_trip(&in, arena(state));
    assert_int_equal(out.kind, KIND_ATTN);
    assert_int_equal(out.u.ext->u.list.n, 3);
    assert_int_equal(out.u.ext->u.list.items[0].u.i, -1);
    char buf[64];
    lmc_tv_format(&out, buf, sizeof(buf));
    assert_string_equal(buf, "AttnWindowDesc([-1, 4, 1])");
}

static void test_duplicate_kind_registration_fails(void **state)
{
    (void)state;
    register_attn_once();
    lmc_codec again = ATTN_CODEC;
    again.tag = "OtherTag";
    lmc_error err;
    assert_int_equal(lmc_codec_register(&again, &err), LMC_ERR_INVALID);
    assert_msg_contains(&err, "already registered for type 'AttnWindowDesc'");
}

static void test_duplicate_tag_registration_fails(void **state)
{
    (void)state;
    lmc_codec c = ATTN_CODEC;
    c.kind = LMC_TV_BUILTIN_COUNT_ + 2;
    c.tag = "ObjectKey";
    lmc_error err;
    assert_int_equal(lmc_codec_register(&c, &err), LMC_ERR_INVALID);
    assert_msg_contains(&err, "tag 'ObjectKey' is already registered");
    assert_null(lmc_codec_for_kind(LMC_TV_BUILTIN_COUNT_ + 2));
}

static void test_a_long_registered_tag_is_wrapped_correctly(void **state)
{
    (void)state;
    static const char tag[] = "AVeryLongTagNameThatDoesNotFitTheSmallPrecomputedWrapperBuf";
    lmc_codec c = {LMC_TV_BUILTIN_COUNT_ + 5, "Long", tag, enc_attn, dec_attn};
    if (lmc_codec_for_kind(c.kind) == NULL)
        assert_int_equal(lmc_codec_register(&c, NULL), LMC_OK);
    lmc_tv payload = lmc_tv_int(1);
    lmc_tv v = {.kind = c.kind, .u.ext = &payload};
    msgpack_sbuffer sb;
    tt_encode(&v, &sb);
    size_t n = strlen(tag);
    assert_int_equal(sb.size, 1 + 6 + 2 + n + 2 + 1);
    tt_assert_hex(sb.data, 9, "82 a55f5f745f5f d93b");
    assert_memory_equal(sb.data + 9, tag, n);
    tt_assert_hex(sb.data + 9 + n, 3, "a176 01");
    msgpack_sbuffer_destroy(&sb);
}

static void test_tuple_tag_and_native_kinds_cannot_be_registered(void **state)
{
    (void)state;
    lmc_codec c = ATTN_CODEC;
    c.kind = LMC_TV_BUILTIN_COUNT_ + 3;
    c.tag = "tuple";
    assert_int_equal(lmc_codec_register(&c, NULL), LMC_ERR_INVALID);
    c.kind = LMC_TV_INT;
    c.tag = "MyInt";
    assert_int_equal(lmc_codec_register(&c, NULL), LMC_ERR_INVALID);
    c.kind = LMC_TV_KIND_MAX;
    assert_int_equal(lmc_codec_register(&c, NULL), LMC_ERR_INVALID);
}

/* ---------------------------------------------------------------------- */
/* Args                                                                    */
/* ---------------------------------------------------------------------- */

static void test_encode_args_keeps_order_and_round_trips(void **state)
{
    lmc_object_key k = tt_key("m", 9, 0, 0, NULL);
    lmc_tv keys[1] = {key_tv(&k)};
    lmc_trace_arg args[3] = {
        {"y", 1, lmc_tv_str("s", 1)},
        {"x", 1, lmc_tv_int(300)},
        {"keys", 4, list_tv(LMC_TV_LIST, keys, 1)},
    };
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    assert_int_equal(lmc_codec_encode_args(&pk, args, 3, NULL), LMC_OK);
    tt_assert_hex(sb.data, 11, "83 a179 a173 a178 cd012c a4");

    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
    lmc_trace_arg *out;
    size_t n;
    assert_int_equal(lmc_codec_decode_args(&up.data, arena(state), &out, &n, NULL), LMC_OK);
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);

    assert_int_equal(n, 3);
    assert_string_equal(out[0].name, "y");
    assert_string_equal(out[1].name, "x");
    assert_int_equal(out[1].value.u.i, 300);
    const lmc_trace_arg *ka = lmc_trace_args_find(out, n, "keys");
    assert_non_null(ka);
    assert_int_equal(ka->value.kind, LMC_TV_LIST);
    assert_true(lmc_object_key_equal(ka->value.u.list.items[0].u.key, &k));
    assert_null(lmc_trace_args_find(out, n, "nope"));
}

static void test_encode_args_names_the_failing_argument(void **state)
{
    (void)state;
    lmc_tv payload = lmc_tv_nil();
    lmc_trace_arg args[1] = {{"weird", 5, {.kind = LMC_TV_KIND_MAX - 2, .u.ext = &payload}}};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    lmc_error err;
    assert_int_equal(lmc_codec_encode_args(&pk, args, 1, &err), LMC_ERR_UNSUPPORTED);
    assert_msg_contains(&err, "argument 'weird'");
    assert_msg_contains(&err, "no codec");
    msgpack_sbuffer_destroy(&sb);
}

static void test_decode_args_requires_string_keys(void **state)
{
    uint8_t bytes[] = {0x81, 0x01, 0x02};
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, (const char *)bytes, sizeof(bytes), NULL),
                     MSGPACK_UNPACK_SUCCESS);
    lmc_trace_arg *out;
    size_t n;
    lmc_error err;
    assert_int_equal(lmc_codec_decode_args(&up.data, arena(state), &out, &n, &err), LMC_ERR_FORMAT);
    msgpack_unpacked_destroy(&up);
    assert_msg_contains(&err, "keys must be str");
}

static void test_decoding_deep_nesting_is_bounded(void **state)
{
    /* A hand-built 200-deep chain of one-element arrays (msgpack-c itself caps at 32). */
    enum { DEPTH = 200 };
    msgpack_object *objs = calloc(DEPTH + 1, sizeof(*objs));
    for (int i = 0; i < DEPTH; i++) {
        objs[i].type = MSGPACK_OBJECT_ARRAY;
        objs[i].via.array.size = 1;
        objs[i].via.array.ptr = &objs[i + 1];
    }
    objs[DEPTH].type = MSGPACK_OBJECT_NIL;
    lmc_tv out;
    lmc_error err;
    assert_int_equal(lmc_codec_decode_value(&objs[0], arena(state), &out, &err), LMC_ERR_FORMAT);
    assert_msg_contains(&err, "nested deeper");
    free(objs);
    /* The depth counter unwound: a flat value still decodes. */
    msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
    assert_int_equal(lmc_codec_decode_value(&nil, arena(state), &out, NULL), LMC_OK);
}

static void test_encoding_a_cyclic_value_is_bounded(void **state)
{
    (void)state;
    lmc_tv self;
    self.kind = LMC_TV_LIST;
    self.u.list.items = &self;
    self.u.list.n = 1;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    lmc_error err;
    assert_int_equal(lmc_codec_encode_value(&pk, &self, &err), LMC_ERR_INVALID);
    assert_msg_contains(&err, "nested deeper");
    msgpack_sbuffer_destroy(&sb);
}

/* ---------------------------------------------------------------------- */
/* Arena and rendering                                                     */
/* ---------------------------------------------------------------------- */

static void test_arena_allocations_are_16_byte_aligned_and_distinct(void **state)
{
    (void)state;
    lmc_arena a;
    lmc_arena_init(&a, 1024);
    char *prev = NULL;
    for (size_t i = 1; i < 200; i++) {
        char *p = lmc_arena_alloc(&a, i);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0xab, i);
        assert_true(p != prev);
        prev = p;
    }
    lmc_arena_free(&a);
}

static void test_arena_reset_keeps_one_block(void **state)
{
    (void)state;
    lmc_arena a;
    lmc_arena_init(&a, 1024);
    for (int i = 0; i < 100; i++)
        assert_non_null(lmc_arena_alloc(&a, 100));
    assert_non_null(lmc_arena_alloc(&a, 100000)); /* a block of its own */
    lmc_arena_reset(&a);
    assert_non_null(a.head);
    char *p = lmc_arena_alloc(&a, 64);
    assert_non_null(p);
    lmc_arena_reset(&a);
    assert_ptr_equal(lmc_arena_alloc(&a, 64), p); /* the kept block is reused */
    lmc_arena_free(&a);
    assert_null(a.head);
}

static void test_arena_huge_request_fails_cleanly(void **state)
{
    (void)state;
    lmc_arena a;
    lmc_arena_init(&a, 0);
    assert_null(lmc_arena_alloc(&a, SIZE_MAX - 8));
    lmc_arena_free(&a);
}

static void test_format_renders_python_style(void **state)
{
    (void)state;
    char buf[256];
    lmc_object_key k;
    uint8_t h[2] = {0x0a, 0x0b};
    assert_int_equal(lmc_object_key_make(&k, h, 2, "m", 0x01000100, 0, NULL, NULL), LMC_OK);
    lmc_tv kv = key_tv(&k);
    lmc_tv_format(&kv, buf, sizeof(buf));
    assert_string_equal(buf, "ObjectKey(m@0x01000100@0@0a0b)");

    lmc_tv one[1] = {lmc_tv_int(1)};
    lmc_tv t1 = list_tv(LMC_TV_TUPLE, one, 1);
    lmc_tv_format(&t1, buf, sizeof(buf));
    assert_string_equal(buf, "(1,)");

    lmc_tv mixed[5] = {lmc_tv_float(0.1), lmc_tv_float(100.0), lmc_tv_float(1e16),
                       lmc_tv_str("it's", 4), lmc_tv_nil()};
    lmc_tv l = list_tv(LMC_TV_LIST, mixed, 5);
    lmc_tv_format(&l, buf, sizeof(buf));
    assert_string_equal(buf, "[0.1, 100.0, 1e+16, \"it's\", None]");

    lmc_tv empty_set = list_tv(LMC_TV_SET, NULL, 0);
    lmc_tv_format(&empty_set, buf, sizeof(buf));
    assert_string_equal(buf, "set()");

    lmc_shape s = {3, {1, 2, 3}};
    lmc_tv sz = {.kind = LMC_TV_SIZE, .u.size = &s};
    lmc_tv_format(&sz, buf, sizeof(buf));
    assert_string_equal(buf, "torch.Size([1, 2, 3])");

    lmc_tv tp = {.kind = LMC_TV_TRIM_POLICY, .u.trim = LMC_TRIM_PREFIX};
    lmc_tv_format(&tp, buf, sizeof(buf));
    assert_string_equal(buf, "TrimPolicy.PREFIX");
}

static void test_format_truncates_like_snprintf(void **state)
{
    (void)state;
    char buf[4];
    lmc_tv s = lmc_tv_str("hello", 5);
    assert_int_equal(lmc_tv_format(&s, buf, sizeof(buf)), 7);
    assert_string_equal(buf, "'he");
    assert_int_equal(lmc_tv_format(&s, NULL, 0), 7);
}

static void test_repr_helpers_match_python(void **state)
{
    (void)state;
    char buf[64];
    lmc_repr_bytes("WRNG", 4, buf, sizeof(buf));
    assert_string_equal(buf, "b'WRNG'");
    lmc_repr_bytes("\x00\xff'", 3, buf, sizeof(buf));
    assert_string_equal(buf, "b\"\\x00\\xff'\"");
    lmc_repr_str("x.lct", 5, buf, sizeof(buf));
    assert_string_equal(buf, "'x.lct'");
    lmc_repr_str("a\\b\n", 4, buf, sizeof(buf));
    assert_string_equal(buf, "'a\\\\b\\n'");
    const double floats[] = {1.0, 0.5, 1e-05, 0.0001, 123456789012345680.0, -2.5, 1.7e308};
    const char *want[] = {"1.0",  "0.5",     "1e-05", "0.0001", "1.2345678901234568e+17",
                          "-2.5", "1.7e+308"};
    for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); i++) {
        lmc_repr_float(floats[i], buf, sizeof(buf));
        assert_string_equal(buf, want[i]);
    }
    lmc_repr_float(NAN, buf, sizeof(buf));
    assert_string_equal(buf, "nan");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_passthrough_ints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passthrough_float, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passthrough_str, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passthrough_bytes_as_bin8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passthrough_bools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passthrough_nil, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decoded_strings_are_copied_into_the_arena, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ints_use_the_smallest_msgspec_form_at_every_boundary,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ints_round_trip_at_every_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uint64_above_int64_max_decodes_as_uint_and_round_trips,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_floats_are_always_float64, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float32_on_the_wire_decodes_as_float, setup, teardown),
        cmocka_unit_test_setup_teardown(test_str_lengths_use_fixstr_str8_str16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_bytes_and_long_bytes_use_bin_forms, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sixteen_items_use_array16_and_map16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_map_round_trips_in_insertion_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tuple_encodes_to_the_spec_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tuple_stays_a_tuple, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_tuple_inside_a_list_inside_a_map, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_key_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_key_with_group_and_salt_round_trips, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_keys_inside_a_list_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_list_of_object_keys_encodes_as_its_keys_one_by_one,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_long_list_of_object_keys_encodes_the_same_in_place_and_staged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_key_schema2_encoding_appends_cache_salt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_key_spec_vector_without_salt_decodes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_key_without_group_defaults_to_zero, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_key_invalid_model_name_is_a_format_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_key_missing_kv_rank_is_a_format_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_object_key_payload_must_be_a_map, setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_key_bytes_match_msgpack_c_for_every_field_form,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_key_with_a_long_model_name_matches_msgpack_c,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_with_two_shapes_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_wire_form_is_shapes_then_dtype_names, setup,
                                        teardown),
        cmocka_unit_test(test_layout_bytes_match_msgpack_c_for_every_int_form),
        cmocka_unit_test_setup_teardown(test_layout_length_mismatch_is_a_format_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_torch_size_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtypes_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtype_wire_form_is_the_torch_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_dtype_is_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_trim_policy_member_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_handle_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_handle_wire_form_has_the_derived_hit_count,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_handle_older_form_fills_a_prefix_of_hits,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_handle_hit_count_beyond_total_is_rejected,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_of_object_keys_comes_back_as_a_set, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unknown_kind_has_no_codec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_tag_is_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tagged_value_without_payload_is_rejected, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_non_string_tag_is_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_by_kind_and_tag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registered_codec_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_kind_registration_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_tag_registration_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_long_registered_tag_is_wrapped_correctly, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tuple_tag_and_native_kinds_cannot_be_registered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_encode_args_keeps_order_and_round_trips, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_encode_args_names_the_failing_argument, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_decode_args_requires_string_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decoding_deep_nesting_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoding_a_cyclic_value_is_bounded, setup, teardown),
        cmocka_unit_test(test_arena_allocations_are_16_byte_aligned_and_distinct),
        cmocka_unit_test(test_arena_reset_keeps_one_block),
        cmocka_unit_test(test_arena_huge_request_fails_cleanly),
        cmocka_unit_test(test_format_renders_python_style),
        cmocka_unit_test(test_format_truncates_like_snprintf),
        cmocka_unit_test(test_repr_helpers_match_python),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
