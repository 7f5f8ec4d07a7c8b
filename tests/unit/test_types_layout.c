/*
 * test_types_layout.c -- the torch dtype table and MemoryLayoutDesc.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "lmcache/types.h"

static void assert_invalid(lmc_status st, const lmc_error *err, const char *want)
{
    assert_int_equal(st, LMC_ERR_INVALID);
    assert_int_equal(err->code, LMC_ERR_INVALID);
    if (strstr(err->msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", err->msg, want);
}

static void assert_desc_zero(const lmc_layout_desc *d)
{
    lmc_layout_desc zero;
    memset(&zero, 0, sizeof(zero));
    assert_memory_equal(d, &zero, sizeof(zero));
}

static lmc_shape shape_of(size_t ndim, const int64_t *dims)
{
    lmc_shape s;
    memset(&s, 0, sizeof(s));
    s.ndim = (uint32_t)ndim;
    memcpy(s.dims, dims, ndim * sizeof(dims[0]));
    return s;
}

/* ---------------------------------------------------------------------- */
/* dtypes                                                                  */
/* ---------------------------------------------------------------------- */

static const struct {
    lmc_dtype dt;
    const char *name;
    size_t itemsize;
} DTYPES[] = {
    {LMC_DTYPE_FLOAT16, "torch.float16", 2},
    {LMC_DTYPE_BFLOAT16, "torch.bfloat16", 2},
    {LMC_DTYPE_FLOAT32, "torch.float32", 4},
    {LMC_DTYPE_FLOAT64, "torch.float64", 8},
    {LMC_DTYPE_INT8, "torch.int8", 1},
    {LMC_DTYPE_UINT8, "torch.uint8", 1},
    {LMC_DTYPE_INT16, "torch.int16", 2},
    {LMC_DTYPE_UINT16, "torch.uint16", 2},
    {LMC_DTYPE_INT32, "torch.int32", 4},
    {LMC_DTYPE_UINT32, "torch.uint32", 4},
    {LMC_DTYPE_INT64, "torch.int64", 8},
    {LMC_DTYPE_UINT64, "torch.uint64", 8},
    {LMC_DTYPE_BOOL, "torch.bool", 1},
    {LMC_DTYPE_COMPLEX32, "torch.complex32", 4},
    {LMC_DTYPE_COMPLEX64, "torch.complex64", 8},
    {LMC_DTYPE_COMPLEX128, "torch.complex128", 16},
    {LMC_DTYPE_FLOAT8_E4M3FN, "torch.float8_e4m3fn", 1},
    {LMC_DTYPE_FLOAT8_E5M2, "torch.float8_e5m2", 1},
    {LMC_DTYPE_FLOAT8_E4M3FNUZ, "torch.float8_e4m3fnuz", 1},
    {LMC_DTYPE_FLOAT8_E5M2FNUZ, "torch.float8_e5m2fnuz", 1},
    {LMC_DTYPE_QINT8, "torch.qint8", 1},
    {LMC_DTYPE_QUINT8, "torch.quint8", 1},
    {LMC_DTYPE_QINT32, "torch.qint32", 4},
};
#define NDTYPES (sizeof(DTYPES) / sizeof(DTYPES[0]))

static void test_dtype_table_covers_every_enum_value(void **state)
{
    (void)state;
    assert_int_equal(NDTYPES, LMC_DTYPE_COUNT_ - 1);
}

static void test_dtype_names_and_itemsizes(void **state)
{
    (void)state;
    for (size_t i = 0; i < NDTYPES; i++) {
        assert_string_equal(lmc_dtype_name(DTYPES[i].dt), DTYPES[i].name);
        assert_int_equal(lmc_dtype_itemsize(DTYPES[i].dt), DTYPES[i].itemsize);
    }
}

static void test_dtype_from_name_round_trips(void **state)
{
    (void)state;
    for (size_t i = 0; i < NDTYPES; i++) {
        lmc_dtype dt = LMC_DTYPE_INVALID;
        lmc_error err;
        assert_int_equal(lmc_dtype_from_name(DTYPES[i].name, strlen(DTYPES[i].name), &dt, &err),
                         LMC_OK);
        assert_int_equal(dt, DTYPES[i].dt);
    }
}

static void test_dtype_from_name_accepts_aliases(void **state)
{
    (void)state;
    static const struct {
        const char *alias;
        lmc_dtype dt;
    } aliases[] = {
        {"torch.half", LMC_DTYPE_FLOAT16},     {"torch.float", LMC_DTYPE_FLOAT32},
        {"torch.double", LMC_DTYPE_FLOAT64},   {"torch.short", LMC_DTYPE_INT16},
        {"torch.int", LMC_DTYPE_INT32},        {"torch.long", LMC_DTYPE_INT64},
        {"torch.cfloat", LMC_DTYPE_COMPLEX64}, {"torch.cdouble", LMC_DTYPE_COMPLEX128},
        {"torch.chalf", LMC_DTYPE_COMPLEX32},
    };
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        lmc_dtype dt = LMC_DTYPE_INVALID;
        assert_int_equal(lmc_dtype_from_name(aliases[i].alias, strlen(aliases[i].alias), &dt, NULL),
                         LMC_OK);
        assert_int_equal(dt, aliases[i].dt);
    }
}

static void test_dtype_from_name_uses_len_not_nul(void **state)
{
    (void)state;
    /* "torch.float16" cut to 11 bytes is "torch.float": the alias for float32. */
    lmc_dtype dt = LMC_DTYPE_INVALID;
    assert_int_equal(lmc_dtype_from_name("torch.float16", 11, &dt, NULL), LMC_OK);
    assert_int_equal(dt, LMC_DTYPE_FLOAT32);
    const char unterminated[9] = {'t', 'o', 'r', 'c', 'h', '.', 'i', 'n', 't'};
    assert_int_equal(lmc_dtype_from_name(unterminated, 9, &dt, NULL), LMC_OK);
    assert_int_equal(dt, LMC_DTYPE_INT32);
}

static void test_dtype_from_name_unknown(void **state)
{
    (void)state;
    lmc_dtype dt = LMC_DTYPE_FLOAT16;
    lmc_error err;
    assert_invalid(lmc_dtype_from_name("torch.float17", 13, &dt, &err), &err,
                   "unknown torch dtype 'torch.float17'");
    assert_int_equal(dt, LMC_DTYPE_INVALID);
    assert_invalid(lmc_dtype_from_name("float16", 7, &dt, &err), &err,
                   "unknown torch dtype 'float16'");
    assert_invalid(lmc_dtype_from_name("torch.int8XYZ", 11, &dt, &err), &err,
                   "unknown torch dtype 'torch.int8X'");
    assert_invalid(lmc_dtype_from_name("", 0, &dt, &err), &err, "unknown torch dtype ''");
    assert_invalid(lmc_dtype_from_name("invalid", 7, &dt, &err), &err,
                   "unknown torch dtype 'invalid'");
}

static void test_dtype_invalid_values(void **state)
{
    (void)state;
    assert_string_equal(lmc_dtype_name(LMC_DTYPE_INVALID), "invalid");
    assert_string_equal(lmc_dtype_name(LMC_DTYPE_COUNT_), "invalid");
    assert_string_equal(lmc_dtype_name((lmc_dtype)-3), "invalid");
    assert_int_equal(lmc_dtype_itemsize(LMC_DTYPE_INVALID), 0);
    assert_int_equal(lmc_dtype_itemsize(LMC_DTYPE_COUNT_), 0);
}

/* ---------------------------------------------------------------------- */
/* MemoryLayoutDesc                                                        */
/* ---------------------------------------------------------------------- */

static void test_layout_nbytes_sums_every_tensor(void **state)
{
    (void)state;
    const int64_t d0[] = {2, 16, 8, 128};
    const int64_t d1[] = {3, 5};
    lmc_shape shapes[] = {shape_of(4, d0), shape_of(2, d1)};
    lmc_dtype dtypes[] = {LMC_DTYPE_BFLOAT16, LMC_DTYPE_FLOAT32};
    lmc_layout_desc d;
    lmc_error err;
    assert_int_equal(lmc_layout_desc_make(&d, shapes, 2, dtypes, 2, &err), LMC_OK);
    assert_int_equal(d.count, 2);
    assert_int_equal(lmc_shape_numel(&d.shapes[0]), 2 * 16 * 8 * 128);
    assert_int_equal(lmc_layout_desc_nbytes(&d), 2 * 16 * 8 * 128 * 2 + 3 * 5 * 4);
}

static void test_layout_zero_dim_shape_has_one_element(void **state)
{
    (void)state;
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make1(&d, NULL, 0, LMC_DTYPE_FLOAT64, NULL), LMC_OK);
    assert_int_equal(lmc_shape_numel(&d.shapes[0]), 1);
    assert_int_equal(lmc_layout_desc_nbytes(&d), 8);
}

static void test_layout_zero_sized_dim_gives_zero_bytes(void **state)
{
    (void)state;
    /* Large dims before a 0 must not be mistaken for an overflow. */
    const int64_t dims[] = {INT64_C(1) << 40, INT64_C(1) << 40, 0};
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 3, LMC_DTYPE_FLOAT16, NULL), LMC_OK);
    assert_int_equal(lmc_layout_desc_nbytes(&d), 0);
}

static void test_layout_empty_is_allowed(void **state)
{
    (void)state;
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make(&d, NULL, 0, NULL, 0, NULL), LMC_OK);
    assert_int_equal(d.count, 0);
    assert_int_equal(lmc_layout_desc_nbytes(&d), 0);
}

static void test_layout_unused_parts_are_zero(void **state)
{
    (void)state;
    lmc_shape s;
    memset(&s, 0x7F, sizeof(s)); /* junk past ndim */
    s.ndim = 2;
    s.dims[0] = 4;
    s.dims[1] = 5;
    lmc_dtype dt = LMC_DTYPE_UINT8;
    lmc_layout_desc a, b;
    memset(&a, 0xFF, sizeof(a));
    memset(&b, 0xEE, sizeof(b));
    assert_int_equal(lmc_layout_desc_make(&a, &s, 1, &dt, 1, NULL), LMC_OK);
    const int64_t dims[] = {4, 5};
    assert_int_equal(lmc_layout_desc_make1(&b, dims, 2, LMC_DTYPE_UINT8, NULL), LMC_OK);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_int_equal(a.shapes[0].dims[2], 0);
    assert_int_equal(a.shapes[1].ndim, 0);
    assert_int_equal(a.dtypes[1], LMC_DTYPE_INVALID);
}

static void test_layout_rejects_length_mismatch(void **state)
{
    (void)state;
    const int64_t dims[] = {1};
    lmc_shape shapes[] = {shape_of(1, dims), shape_of(1, dims)};
    lmc_dtype dtypes[] = {LMC_DTYPE_FLOAT16};
    lmc_layout_desc d;
    lmc_error err;
    memset(&d, 0xFF, sizeof(d));
    assert_invalid(lmc_layout_desc_make(&d, shapes, 2, dtypes, 1, &err), &err,
                   "MemoryLayoutDesc: shapes and dtypes must have the same length (2 vs 1)");
    assert_desc_zero(&d);
}

static void test_layout_rejects_too_many_tensors(void **state)
{
    (void)state;
    lmc_shape shapes[LMC_LAYOUT_MAX_TENSORS + 1];
    lmc_dtype dtypes[LMC_LAYOUT_MAX_TENSORS + 1];
    memset(shapes, 0, sizeof(shapes));
    for (size_t i = 0; i < LMC_LAYOUT_MAX_TENSORS + 1; i++)
        dtypes[i] = LMC_DTYPE_FLOAT16;
    lmc_layout_desc d;
    lmc_error err;
    assert_int_equal(lmc_layout_desc_make(&d, shapes, LMC_LAYOUT_MAX_TENSORS, dtypes,
                                          LMC_LAYOUT_MAX_TENSORS, &err),
                     LMC_OK);
    assert_invalid(lmc_layout_desc_make(&d, shapes, 9, dtypes, 9, &err), &err,
                   "MemoryLayoutDesc: 9 tensors; at most 8 supported");
}

static void test_layout_rejects_too_many_dims(void **state)
{
    (void)state;
    lmc_shape s;
    memset(&s, 0, sizeof(s));
    s.ndim = LMC_SHAPE_MAX_DIMS + 1;
    lmc_dtype dt = LMC_DTYPE_FLOAT16;
    lmc_layout_desc d;
    lmc_error err;
    assert_invalid(lmc_layout_desc_make(&d, &s, 1, &dt, 1, &err), &err,
                   "MemoryLayoutDesc: shapes[0] has 9 dims; at most 8 supported");
    int64_t dims[LMC_SHAPE_MAX_DIMS + 1] = {0};
    assert_invalid(lmc_layout_desc_make1(&d, dims, 9, LMC_DTYPE_FLOAT16, &err), &err,
                   "MemoryLayoutDesc: shapes[0] has 9 dims; at most 8 supported");
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 8, LMC_DTYPE_FLOAT16, &err), LMC_OK);
}

static void test_layout_rejects_negative_dim(void **state)
{
    (void)state;
    const int64_t ok[] = {1};
    const int64_t bad[] = {4, 2, -1};
    lmc_shape shapes[] = {shape_of(1, ok), shape_of(3, bad)};
    lmc_dtype dtypes[] = {LMC_DTYPE_FLOAT16, LMC_DTYPE_FLOAT16};
    lmc_layout_desc d;
    lmc_error err;
    assert_invalid(lmc_layout_desc_make(&d, shapes, 2, dtypes, 2, &err), &err,
                   "MemoryLayoutDesc: shapes[1] dim 2 is -1; dims must be >= 0");
    assert_invalid(lmc_layout_desc_make1(&d, bad, 3, LMC_DTYPE_FLOAT16, &err), &err,
                   "dims must be >= 0");
}

static void test_layout_rejects_invalid_dtype(void **state)
{
    (void)state;
    const int64_t dims[] = {2};
    lmc_layout_desc d;
    lmc_error err;
    assert_invalid(lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_INVALID, &err), &err,
                   "MemoryLayoutDesc: dtypes[0] is not a valid dtype (0)");
    assert_invalid(lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_COUNT_, &err), &err,
                   "is not a valid dtype");
}

static void test_layout_rejects_null_arrays(void **state)
{
    (void)state;
    lmc_dtype dt = LMC_DTYPE_FLOAT16;
    lmc_layout_desc d;
    lmc_error err;
    assert_invalid(lmc_layout_desc_make(&d, NULL, 1, &dt, 1, &err), &err, "must not be NULL");
    assert_invalid(lmc_layout_desc_make1(&d, NULL, 2, dt, &err), &err, "must not be NULL");
}

static void test_layout_rejects_byte_size_overflow(void **state)
{
    (void)state;
    const int64_t dims[] = {INT64_C(1) << 62, 4};
    lmc_layout_desc d;
    lmc_error err;
    assert_invalid(lmc_layout_desc_make1(&d, dims, 2, LMC_DTYPE_UINT8, &err), &err,
                   "overflows 64 bits");
    const int64_t half[] = {INT64_C(1) << 62};
    lmc_shape shapes[] = {shape_of(1, half), shape_of(1, half), shape_of(1, half),
                          shape_of(1, half), shape_of(1, half)};
    lmc_dtype dtypes[] = {LMC_DTYPE_UINT8, LMC_DTYPE_UINT8, LMC_DTYPE_UINT8, LMC_DTYPE_UINT8,
                          LMC_DTYPE_UINT8};
    assert_int_equal(lmc_layout_desc_make(&d, shapes, 3, dtypes, 3, &err), LMC_OK);
    assert_invalid(lmc_layout_desc_make(&d, shapes, 4, dtypes, 4, &err), &err,
                   "total byte size overflows 64 bits");
}

static void test_layout_equality(void **state)
{
    (void)state;
    const int64_t d0[] = {2, 3};
    const int64_t d1[] = {2, 4};
    const int64_t d2[] = {2, 3, 1};
    lmc_layout_desc base, same, other_dim, other_ndim, other_dtype, two;
    assert_int_equal(lmc_layout_desc_make1(&base, d0, 2, LMC_DTYPE_FLOAT16, NULL), LMC_OK);
    assert_int_equal(lmc_layout_desc_make1(&same, d0, 2, LMC_DTYPE_FLOAT16, NULL), LMC_OK);
    assert_int_equal(lmc_layout_desc_make1(&other_dim, d1, 2, LMC_DTYPE_FLOAT16, NULL), LMC_OK);
    assert_int_equal(lmc_layout_desc_make1(&other_ndim, d2, 3, LMC_DTYPE_FLOAT16, NULL), LMC_OK);
    assert_int_equal(lmc_layout_desc_make1(&other_dtype, d0, 2, LMC_DTYPE_BFLOAT16, NULL), LMC_OK);
    lmc_shape shapes[] = {shape_of(2, d0), shape_of(2, d0)};
    lmc_dtype dtypes[] = {LMC_DTYPE_FLOAT16, LMC_DTYPE_FLOAT16};
    assert_int_equal(lmc_layout_desc_make(&two, shapes, 2, dtypes, 2, NULL), LMC_OK);

    assert_true(lmc_layout_desc_equal(&base, &same));
    assert_false(lmc_layout_desc_equal(&base, &other_dim));
    assert_false(lmc_layout_desc_equal(&base, &other_ndim));
    assert_false(lmc_layout_desc_equal(&base, &other_dtype));
    assert_false(lmc_layout_desc_equal(&base, &two));
    assert_false(lmc_layout_desc_equal(&two, &base));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table_covers_every_enum_value),
        cmocka_unit_test(test_dtype_names_and_itemsizes),
        cmocka_unit_test(test_dtype_from_name_round_trips),
        cmocka_unit_test(test_dtype_from_name_accepts_aliases),
        cmocka_unit_test(test_dtype_from_name_uses_len_not_nul),
        cmocka_unit_test(test_dtype_from_name_unknown),
        cmocka_unit_test(test_dtype_invalid_values),
        cmocka_unit_test(test_layout_nbytes_sums_every_tensor),
        cmocka_unit_test(test_layout_zero_dim_shape_has_one_element),
        cmocka_unit_test(test_layout_zero_sized_dim_gives_zero_bytes),
        cmocka_unit_test(test_layout_empty_is_allowed),
        cmocka_unit_test(test_layout_unused_parts_are_zero),
        cmocka_unit_test(test_layout_rejects_length_mismatch),
        cmocka_unit_test(test_layout_rejects_too_many_tensors),
        cmocka_unit_test(test_layout_rejects_too_many_dims),
        cmocka_unit_test(test_layout_rejects_negative_dim),
        cmocka_unit_test(test_layout_rejects_invalid_dtype),
        cmocka_unit_test(test_layout_rejects_null_arrays),
        cmocka_unit_test(test_layout_rejects_byte_size_overflow),
        cmocka_unit_test(test_layout_equality),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
