/*
 * test_bitmap.c -- unit tests for the fixed-size bitmap.
 *
 * Sizes 1, 63, 64, 65 and 130 cover a partial single word, an exactly full
 * word, and a partial tail word after full ones; size 0 is tested for every
 * operation. Allocation failure is provoked with sizes no allocator can
 * satisfy (ASan is told to return NULL rather than abort, below).
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdlib.h>
#include <string.h>

#include "lmcache/bitmap.h"

/* Under ASan an impossible calloc must return NULL, as it does in libc. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static const size_t ODD_SIZES[] = {1, 63, 64, 65, 130};
#define N_ODD_SIZES (sizeof(ODD_SIZES) / sizeof(ODD_SIZES[0]))

/* Build a bitmap from "0101..." (bit 0 leftmost). */
static lmc_bitmap from_str(const char *s)
{
    lmc_bitmap bm;
    size_t n = strlen(s);
    assert_int_equal(lmc_bitmap_init(&bm, n, 0), LMC_OK);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '1')
            lmc_bitmap_set(&bm, i);
    }
    return bm;
}

static void assert_bits(const lmc_bitmap *bm, const char *expected)
{
    char buf[512];
    assert_true(strlen(expected) < sizeof(buf));
    lmc_bitmap_to_string(bm, buf, sizeof(buf));
    assert_string_equal(buf, expected);
}

/* The invariant: no bit at or past the size is set in the last word. */
static void assert_tail_zero(const lmc_bitmap *bm)
{
    if (bm->size == 0) {
        assert_null(bm->words);
        return;
    }
    size_t r = bm->size % 64;
    if (r != 0)
        assert_int_equal(bm->words[bm->size / 64] >> r, 0);
}

/* ---- size 0 -------------------------------------------------------------- */

static void test_bitmap_empty_init_has_no_words(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 0, 5), LMC_OK);
    assert_int_equal(bm.size, 0);
    assert_null(bm.words);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_empty_setters_are_ignored(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 0, 0), LMC_OK);
    const size_t idx[] = {0, 1, 64};
    lmc_bitmap_set(&bm, 0);
    lmc_bitmap_clear(&bm, 0);
    lmc_bitmap_set_range(&bm, 0, 100);
    lmc_bitmap_batched_set(&bm, idx, 3);
    lmc_bitmap_batched_set(&bm, NULL, 0);
    assert_int_equal(bm.size, 0);
    assert_null(bm.words);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_empty_test_is_false(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 0, 0), LMC_OK);
    assert_false(lmc_bitmap_test(&bm, 0));
    assert_false(lmc_bitmap_test(&bm, SIZE_MAX));
    lmc_bitmap_free(&bm);
}

static void test_bitmap_empty_counts_are_zero(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 0, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_popcount(&bm), 0);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), 0);
    assert_int_equal(lmc_bitmap_count_leading_zeros(&bm), 0);
    assert_int_equal(lmc_bitmap_highest_set_bit(&bm), -1);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_empty_indices_and_gather_find_nothing(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 0, 0), LMC_OK);
    size_t out[1] = {99};
    assert_int_equal(lmc_bitmap_indices(&bm, out, 1), 0);
    assert_int_equal(lmc_bitmap_indices(&bm, NULL, 0), 0);
    assert_int_equal(out[0], 99);
    const int src[3] = {1, 2, 3};
    int dst[1] = {-1};
    assert_int_equal(lmc_bitmap_gather(&bm, src, 3, sizeof(int), dst), 0);
    assert_int_equal(dst[0], -1);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_empty_and_or_not_give_empty(void **state)
{
    (void)state;
    lmc_bitmap e, r;
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_and(&r, &e, &e), LMC_OK);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
    lmc_bitmap_free(&r);
    assert_int_equal(lmc_bitmap_or(&r, &e, &e), LMC_OK);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
    lmc_bitmap_free(&r);
    assert_int_equal(lmc_bitmap_not(&r, &e), LMC_OK);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&e);
}

static void test_bitmap_empty_and_with_nonempty_is_empty(void **state)
{
    (void)state;
    lmc_bitmap e, a = from_str("111"), r;
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_and(&r, &e, &a), LMC_OK);
    assert_int_equal(r.size, 0);
    lmc_bitmap_free(&r);
    assert_int_equal(lmc_bitmap_and(&r, &a, &e), LMC_OK);
    assert_int_equal(r.size, 0);
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&e);
}

static void test_bitmap_empty_or_with_nonempty_is_the_nonempty(void **state)
{
    (void)state;
    lmc_bitmap e, a = from_str("1010"), r;
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_or(&r, &e, &a), LMC_OK);
    assert_bits(&r, "1010");
    lmc_bitmap_free(&r);
    assert_int_equal(lmc_bitmap_or(&r, &a, &e), LMC_OK);
    assert_bits(&r, "1010");
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&e);
}

static void test_bitmap_empty_or_into_changes_nothing(void **state)
{
    (void)state;
    lmc_bitmap e, a = from_str("0110");
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    lmc_bitmap_or_into(&e, &a);
    assert_int_equal(e.size, 0);
    assert_null(e.words);
    lmc_bitmap_or_into(&a, &e);
    assert_bits(&a, "0110");
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&e);
}

static void test_bitmap_empty_to_string_is_empty(void **state)
{
    (void)state;
    lmc_bitmap e;
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    char buf[4] = "xyz";
    lmc_bitmap_to_string(&e, buf, sizeof(buf));
    assert_string_equal(buf, "");
    lmc_bitmap_free(&e);
}

static void test_bitmap_empty_copy_is_empty_and_equal(void **state)
{
    (void)state;
    lmc_bitmap e, c;
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_copy(&c, &e), LMC_OK);
    assert_int_equal(c.size, 0);
    assert_null(c.words);
    assert_true(lmc_bitmap_equal(&c, &e));
    lmc_bitmap_free(&c);
    lmc_bitmap_free(&e);
}

static void test_bitmap_free_is_safe_on_zeroed_and_twice(void **state)
{
    (void)state;
    lmc_bitmap z = {0};
    lmc_bitmap_free(&z);
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 10, 3), LMC_OK);
    lmc_bitmap_free(&bm);
    assert_int_equal(bm.size, 0);
    assert_null(bm.words);
    lmc_bitmap_free(&bm);
}

/* ---- init ---------------------------------------------------------------- */

static void test_bitmap_init_sets_first_n_bits(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        for (size_t n = 0; n <= size; n++) {
            lmc_bitmap bm;
            assert_int_equal(lmc_bitmap_init(&bm, size, n), LMC_OK);
            assert_int_equal(bm.size, size);
            for (size_t i = 0; i < size; i++)
                assert_int_equal(lmc_bitmap_test(&bm, i), i < n);
            assert_int_equal(lmc_bitmap_popcount(&bm), n);
            assert_tail_zero(&bm);
            lmc_bitmap_free(&bm);
        }
    }
}

static void test_bitmap_init_clamps_first_n_to_size(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        const size_t overs[] = {size + 1, size + 64, SIZE_MAX};
        for (size_t k = 0; k < 3; k++) {
            lmc_bitmap bm;
            assert_int_equal(lmc_bitmap_init(&bm, size, overs[k]), LMC_OK);
            assert_int_equal(lmc_bitmap_popcount(&bm), size);
            assert_int_equal(lmc_bitmap_count_leading_ones(&bm), size);
            assert_tail_zero(&bm);
            lmc_bitmap_free(&bm);
        }
    }
}

static void test_bitmap_init_fails_with_nomem_and_zeroes_bitmap(void **state)
{
    (void)state;
    lmc_bitmap bm = {.size = 123, .words = (uint64_t *)&bm};
    assert_int_equal(lmc_bitmap_init(&bm, SIZE_MAX, 0), LMC_ERR_NOMEM);
    assert_int_equal(bm.size, 0);
    assert_null(bm.words);
    lmc_bitmap_free(&bm);
}

/* ---- set / clear / test ---------------------------------------------------- */

static void test_bitmap_set_and_clear_change_one_bit(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 130, 0), LMC_OK);
    const size_t idx[] = {0, 1, 63, 64, 65, 127, 128, 129};
    for (size_t k = 0; k < sizeof(idx) / sizeof(idx[0]); k++) {
        lmc_bitmap_set(&bm, idx[k]);
        assert_true(lmc_bitmap_test(&bm, idx[k]));
        assert_int_equal(lmc_bitmap_popcount(&bm), 1);
        lmc_bitmap_clear(&bm, idx[k]);
        assert_false(lmc_bitmap_test(&bm, idx[k]));
        assert_int_equal(lmc_bitmap_popcount(&bm), 0);
    }
    lmc_bitmap_free(&bm);
}

static void test_bitmap_set_ignores_out_of_range_index(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap bm;
        assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
        lmc_bitmap_set(&bm, size);
        lmc_bitmap_set(&bm, size + 1);
        lmc_bitmap_set(&bm, SIZE_MAX);
        assert_int_equal(lmc_bitmap_popcount(&bm), 0);
        assert_tail_zero(&bm);
        lmc_bitmap_free(&bm);
    }
}

static void test_bitmap_clear_ignores_out_of_range_index(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 65, 65), LMC_OK);
    lmc_bitmap_clear(&bm, 65);
    lmc_bitmap_clear(&bm, SIZE_MAX);
    assert_int_equal(lmc_bitmap_popcount(&bm), 65);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_test_out_of_range_is_false(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 63, 63), LMC_OK);
    assert_true(lmc_bitmap_test(&bm, 62));
    assert_false(lmc_bitmap_test(&bm, 63));
    assert_false(lmc_bitmap_test(&bm, 64));
    assert_false(lmc_bitmap_test(&bm, SIZE_MAX));
    lmc_bitmap_free(&bm);
}

static void test_bitmap_batched_set_sets_listed_indices(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 8, 0), LMC_OK);
    const size_t idx[] = {6, 1, 3, 1};
    lmc_bitmap_batched_set(&bm, idx, 4);
    assert_bits(&bm, "01010010");
    lmc_bitmap_free(&bm);
}

static void test_bitmap_batched_set_drops_out_of_range_indices(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 65, 0), LMC_OK);
    const size_t idx[] = {0, 65, 64, 66, 127, 128, SIZE_MAX};
    lmc_bitmap_batched_set(&bm, idx, sizeof(idx) / sizeof(idx[0]));
    assert_int_equal(lmc_bitmap_popcount(&bm), 2);
    assert_true(lmc_bitmap_test(&bm, 0));
    assert_true(lmc_bitmap_test(&bm, 64));
    assert_tail_zero(&bm);
    lmc_bitmap_free(&bm);
}

/* ---- set_range -------------------------------------------------------------- */

static void test_bitmap_set_range_sets_half_open_interval(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 10, 0), LMC_OK);
    lmc_bitmap_set_range(&bm, 2, 5);
    assert_bits(&bm, "0011100000");
    lmc_bitmap_free(&bm);
}

static void test_bitmap_set_range_matches_bit_by_bit_for_every_interval(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        for (size_t start = 0; start <= size; start++) {
            for (size_t end = start; end <= size; end++) {
                lmc_bitmap bm;
                assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
                lmc_bitmap_set_range(&bm, start, end);
                assert_int_equal(lmc_bitmap_popcount(&bm), end - start);
                for (size_t i = 0; i < size; i++)
                    assert_int_equal(lmc_bitmap_test(&bm, i), i >= start && i < end);
                lmc_bitmap_free(&bm);
            }
        }
    }
}

static void test_bitmap_set_range_keeps_existing_bits(void **state)
{
    (void)state;
    lmc_bitmap bm = from_str("1000000001");
    lmc_bitmap_set_range(&bm, 4, 6);
    assert_bits(&bm, "1000110001");
    lmc_bitmap_free(&bm);
}

static void test_bitmap_set_range_clips_end_and_keeps_tail_zero(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap bm;
        assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
        lmc_bitmap_set_range(&bm, 0, SIZE_MAX);
        assert_int_equal(lmc_bitmap_popcount(&bm), size);
        assert_tail_zero(&bm);
        lmc_bitmap_free(&bm);
    }
}

static void test_bitmap_set_range_empty_or_reversed_is_ignored(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 130, 0), LMC_OK);
    lmc_bitmap_set_range(&bm, 5, 5);
    lmc_bitmap_set_range(&bm, 70, 3);
    lmc_bitmap_set_range(&bm, 130, 200);
    lmc_bitmap_set_range(&bm, SIZE_MAX, SIZE_MAX);
    assert_int_equal(lmc_bitmap_popcount(&bm), 0);
    lmc_bitmap_free(&bm);
}

/* ---- counts over odd sizes --------------------------------------------------- */

static void test_bitmap_popcount_counts_set_bits_for_odd_sizes(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap bm;
        assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
        size_t expected = 0;
        for (size_t i = 0; i < size; i += 3) {
            lmc_bitmap_set(&bm, i);
            expected++;
        }
        assert_int_equal(lmc_bitmap_popcount(&bm), expected);
        lmc_bitmap_set(&bm, size - 1);
        expected += (size - 1) % 3 != 0;
        assert_int_equal(lmc_bitmap_popcount(&bm), expected);
        lmc_bitmap_free(&bm);
    }
}

static void test_bitmap_count_leading_ones_for_odd_sizes(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        for (size_t n = 0; n <= size; n++) {
            lmc_bitmap bm;
            assert_int_equal(lmc_bitmap_init(&bm, size, n), LMC_OK);
            /* A set bit after the first gap must not extend the run. */
            if (n + 1 < size)
                lmc_bitmap_set(&bm, size - 1);
            assert_int_equal(lmc_bitmap_count_leading_ones(&bm), n);
            lmc_bitmap_free(&bm);
        }
    }
}

static void test_bitmap_count_leading_zeros_for_odd_sizes(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap bm;
        assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
        assert_int_equal(lmc_bitmap_count_leading_zeros(&bm), size); /* all clear */
        lmc_bitmap_free(&bm);
        for (size_t first = 0; first < size; first++) {
            assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
            lmc_bitmap_set(&bm, first);
            lmc_bitmap_set(&bm, size - 1);
            assert_int_equal(lmc_bitmap_count_leading_zeros(&bm), first);
            lmc_bitmap_free(&bm);
        }
    }
}

static void test_bitmap_highest_set_bit_for_odd_sizes(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap bm;
        assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
        assert_int_equal(lmc_bitmap_highest_set_bit(&bm), -1);
        for (size_t i = 0; i < size; i++) {
            lmc_bitmap_set(&bm, i);
            assert_int_equal(lmc_bitmap_highest_set_bit(&bm), (int64_t)i);
        }
        lmc_bitmap_clear(&bm, size - 1);
        assert_int_equal(lmc_bitmap_highest_set_bit(&bm), (int64_t)size - 2);
        lmc_bitmap_free(&bm);
    }
}

static void test_bitmap_highest_set_bit_only_bit_zero(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 130, 1), LMC_OK);
    assert_int_equal(lmc_bitmap_highest_set_bit(&bm), 0);
    lmc_bitmap_free(&bm);
}

/* ---- and / or / not / or_into -------------------------------------------------- */

static void test_bitmap_and_uses_shorter_length(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("1101"), b = from_str("100111"), r;
    assert_int_equal(lmc_bitmap_and(&r, &a, &b), LMC_OK);
    assert_bits(&r, "1001");
    lmc_bitmap_free(&r);
    assert_int_equal(lmc_bitmap_and(&r, &b, &a), LMC_OK);
    assert_bits(&r, "1001");
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_and_drops_longer_inputs_bits_past_shorter_size(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap a, b, r;
        assert_int_equal(lmc_bitmap_init(&a, size, size), LMC_OK);
        assert_int_equal(lmc_bitmap_init(&b, size + 70, size + 70), LMC_OK);
        assert_int_equal(lmc_bitmap_and(&r, &a, &b), LMC_OK);
        assert_int_equal(r.size, size);
        assert_int_equal(lmc_bitmap_popcount(&r), size);
        assert_tail_zero(&r);
        lmc_bitmap_free(&r);
        lmc_bitmap_free(&a);
        lmc_bitmap_free(&b);
    }
}

static void test_bitmap_or_uses_longer_length(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("1100"), b = from_str("010001"), r;
    assert_int_equal(lmc_bitmap_or(&r, &a, &b), LMC_OK);
    assert_bits(&r, "110001");
    lmc_bitmap_free(&r);
    assert_int_equal(lmc_bitmap_or(&r, &b, &a), LMC_OK);
    assert_bits(&r, "110001");
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_or_across_words_keeps_longer_tail(void **state)
{
    (void)state;
    lmc_bitmap a, b, r;
    assert_int_equal(lmc_bitmap_init(&a, 65, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_init(&b, 130, 0), LMC_OK);
    lmc_bitmap_set(&a, 64);
    lmc_bitmap_set(&b, 0);
    lmc_bitmap_set(&b, 129);
    assert_int_equal(lmc_bitmap_or(&r, &a, &b), LMC_OK);
    assert_int_equal(r.size, 130);
    size_t idx[4];
    assert_int_equal(lmc_bitmap_indices(&r, idx, 4), 3);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 64);
    assert_int_equal(idx[2], 129);
    assert_tail_zero(&r);
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_not_complements_same_length(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("10110"), r;
    assert_int_equal(lmc_bitmap_not(&r, &a), LMC_OK);
    assert_bits(&r, "01001");
    lmc_bitmap_free(&r);
    lmc_bitmap_free(&a);
}

static void test_bitmap_not_keeps_tail_zero_for_odd_sizes(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        lmc_bitmap a, r;
        assert_int_equal(lmc_bitmap_init(&a, size, 0), LMC_OK);
        assert_int_equal(lmc_bitmap_not(&r, &a), LMC_OK);
        assert_int_equal(r.size, size);
        assert_int_equal(lmc_bitmap_popcount(&r), size);
        assert_int_equal(lmc_bitmap_count_leading_ones(&r), size);
        assert_int_equal(lmc_bitmap_highest_set_bit(&r), (int64_t)size - 1);
        assert_tail_zero(&r);
        lmc_bitmap_free(&r);
        lmc_bitmap_free(&a);
    }
}

static void test_bitmap_not_twice_gives_original(void **state)
{
    (void)state;
    lmc_bitmap a, r1, r2;
    assert_int_equal(lmc_bitmap_init(&a, 130, 0), LMC_OK);
    const size_t idx[] = {0, 5, 63, 64, 100, 129};
    lmc_bitmap_batched_set(&a, idx, 6);
    assert_int_equal(lmc_bitmap_not(&r1, &a), LMC_OK);
    assert_int_equal(lmc_bitmap_popcount(&r1), 124);
    assert_int_equal(lmc_bitmap_not(&r2, &r1), LMC_OK);
    assert_true(lmc_bitmap_equal(&r2, &a));
    lmc_bitmap_free(&r2);
    lmc_bitmap_free(&r1);
    lmc_bitmap_free(&a);
}

static void test_bitmap_or_into_keeps_target_length_and_tail_zero(void **state)
{
    (void)state;
    lmc_bitmap a, b;
    assert_int_equal(lmc_bitmap_init(&a, 65, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_init(&b, 130, 130), LMC_OK);
    lmc_bitmap_or_into(&a, &b);
    assert_int_equal(a.size, 65);
    assert_int_equal(lmc_bitmap_popcount(&a), 65);
    assert_tail_zero(&a);
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_or_into_with_shorter_source(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("000001"), b = from_str("101");
    lmc_bitmap_or_into(&a, &b);
    assert_bits(&a, "101001");
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_or_into_same_length(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("1100"), b = from_str("0101");
    lmc_bitmap_or_into(&a, &b);
    assert_bits(&a, "1101");
    assert_bits(&b, "0101");
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

/* ---- allocation failure of derived bitmaps ------------------------------------ */

/*
 * A bitmap claiming SIZE_MAX bits over a one-word buffer: the derived-bitmap
 * functions must fail allocating before they ever read its words.
 */
static uint64_t g_fake_word;
static const lmc_bitmap HUGE_BM = {.size = SIZE_MAX, .words = &g_fake_word};

static void test_bitmap_copy_fails_with_nomem(void **state)
{
    (void)state;
    lmc_bitmap r;
    assert_int_equal(lmc_bitmap_copy(&r, &HUGE_BM), LMC_ERR_NOMEM);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
}

static void test_bitmap_and_fails_with_nomem(void **state)
{
    (void)state;
    lmc_bitmap r;
    assert_int_equal(lmc_bitmap_and(&r, &HUGE_BM, &HUGE_BM), LMC_ERR_NOMEM);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
}

static void test_bitmap_or_fails_with_nomem(void **state)
{
    (void)state;
    lmc_bitmap small = from_str("1"), r;
    assert_int_equal(lmc_bitmap_or(&r, &small, &HUGE_BM), LMC_ERR_NOMEM);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
    lmc_bitmap_free(&small);
}

static void test_bitmap_not_fails_with_nomem(void **state)
{
    (void)state;
    lmc_bitmap r;
    assert_int_equal(lmc_bitmap_not(&r, &HUGE_BM), LMC_ERR_NOMEM);
    assert_int_equal(r.size, 0);
    assert_null(r.words);
}

/* ---- indices / gather ------------------------------------------------------------- */

static void test_bitmap_indices_lists_set_bits_ascending(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 130, 0), LMC_OK);
    const size_t idx[] = {129, 64, 3, 63, 0, 65};
    lmc_bitmap_batched_set(&bm, idx, 6);
    size_t out[8];
    assert_int_equal(lmc_bitmap_indices(&bm, out, 8), 6);
    const size_t expected[] = {0, 3, 63, 64, 65, 129};
    for (size_t k = 0; k < 6; k++)
        assert_int_equal(out[k], expected[k]);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_indices_returns_full_count_beyond_cap(void **state)
{
    (void)state;
    lmc_bitmap bm = from_str("0111011");
    size_t out[3] = {0, 0, 99};
    assert_int_equal(lmc_bitmap_indices(&bm, out, 2), 5);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 99); /* past cap: untouched */
    lmc_bitmap_free(&bm);
}

static void test_bitmap_gather_copies_selected_elements(void **state)
{
    (void)state;
    lmc_bitmap bm = from_str("10110");
    const int src[5] = {10, 11, 12, 13, 14};
    int dst[5] = {0};
    assert_int_equal(lmc_bitmap_gather(&bm, src, 5, sizeof(int), dst), 3);
    assert_int_equal(dst[0], 10);
    assert_int_equal(dst[1], 12);
    assert_int_equal(dst[2], 13);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_gather_stops_at_n(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 130, 130), LMC_OK);
    uint64_t src[70], dst[70];
    for (size_t i = 0; i < 70; i++)
        src[i] = 1000 + i;
    memset(dst, 0, sizeof(dst));
    /* n = 65 ends one bit into the second word. */
    assert_int_equal(lmc_bitmap_gather(&bm, src, 65, sizeof(uint64_t), dst), 65);
    for (size_t i = 0; i < 65; i++)
        assert_int_equal(dst[i], 1000 + i);
    assert_int_equal(dst[65], 0);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_gather_with_n_past_size_uses_size(void **state)
{
    (void)state;
    lmc_bitmap bm = from_str("011");
    const char src[6] = {'a', 'b', 'c', 'd', 'e', 'f'};
    char dst[6] = {0};
    assert_int_equal(lmc_bitmap_gather(&bm, src, 6, 1, dst), 2);
    assert_int_equal(dst[0], 'b');
    assert_int_equal(dst[1], 'c');
    assert_int_equal(dst[2], 0);
    lmc_bitmap_free(&bm);
}

static void test_bitmap_gather_copies_multibyte_elements_whole(void **state)
{
    (void)state;
    typedef struct {
        char s[3];
    } triple;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 100, 0), LMC_OK);
    lmc_bitmap_set(&bm, 1);
    lmc_bitmap_set(&bm, 99);
    triple src[100], dst[2];
    for (size_t i = 0; i < 100; i++)
        memset(src[i].s, (int)('A' + i % 26), 3);
    assert_int_equal(lmc_bitmap_gather(&bm, src, 100, sizeof(triple), dst), 2);
    assert_memory_equal(dst[0].s, "BBB", 3);
    assert_memory_equal(dst[1].s, "VVV", 3); /* 99 % 26 = 21 -> 'V' */
    lmc_bitmap_free(&bm);
}

/* ---- to_string -------------------------------------------------------------------- */

static void test_bitmap_to_string_puts_bit_zero_leftmost(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 4, 0), LMC_OK);
    lmc_bitmap_set(&bm, 1);
    lmc_bitmap_set(&bm, 3);
    assert_bits(&bm, "0101");
    lmc_bitmap_free(&bm);
}

static void test_bitmap_to_string_spans_words(void **state)
{
    (void)state;
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 65, 0), LMC_OK);
    lmc_bitmap_set(&bm, 64);
    char buf[70];
    lmc_bitmap_to_string(&bm, buf, sizeof(buf));
    assert_int_equal(strlen(buf), 65);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(buf[i], '0');
    assert_int_equal(buf[64], '1');
    lmc_bitmap_free(&bm);
}

static void test_bitmap_to_string_truncates_to_buffer(void **state)
{
    (void)state;
    lmc_bitmap bm = from_str("110011");
    char buf[4];
    lmc_bitmap_to_string(&bm, buf, sizeof(buf));
    assert_string_equal(buf, "110");
    lmc_bitmap_free(&bm);
}

static void test_bitmap_to_string_zero_length_buffer_is_untouched(void **state)
{
    (void)state;
    lmc_bitmap bm = from_str("1");
    char buf[1] = {'x'};
    lmc_bitmap_to_string(&bm, buf, 0);
    assert_int_equal(buf[0], 'x');
    lmc_bitmap_to_string(&bm, NULL, 0);
    lmc_bitmap_free(&bm);
}

/* ---- equal / copy ----------------------------------------------------------------- */

static void test_bitmap_equal_when_same_size_and_bits(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("0110"), b = from_str("0110");
    assert_true(lmc_bitmap_equal(&a, &b));
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_equal_false_when_bits_differ(void **state)
{
    (void)state;
    lmc_bitmap a, b;
    assert_int_equal(lmc_bitmap_init(&a, 130, 0), LMC_OK);
    assert_int_equal(lmc_bitmap_init(&b, 130, 0), LMC_OK);
    lmc_bitmap_set(&b, 129);
    assert_false(lmc_bitmap_equal(&a, &b));
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
}

static void test_bitmap_equal_false_when_sizes_differ(void **state)
{
    (void)state;
    lmc_bitmap a = from_str("011"), b = from_str("0110"), e;
    assert_int_equal(lmc_bitmap_init(&e, 0, 0), LMC_OK);
    assert_false(lmc_bitmap_equal(&a, &b));
    assert_false(lmc_bitmap_equal(&b, &a));
    assert_false(lmc_bitmap_equal(&e, &a));
    lmc_bitmap_free(&a);
    lmc_bitmap_free(&b);
    lmc_bitmap_free(&e);
}

static void test_bitmap_copy_is_equal_and_independent(void **state)
{
    (void)state;
    lmc_bitmap a, c;
    assert_int_equal(lmc_bitmap_init(&a, 130, 70), LMC_OK);
    assert_int_equal(lmc_bitmap_copy(&c, &a), LMC_OK);
    assert_true(lmc_bitmap_equal(&c, &a));
    assert_ptr_not_equal(c.words, a.words);
    lmc_bitmap_set(&c, 129);
    assert_false(lmc_bitmap_test(&a, 129));
    assert_false(lmc_bitmap_equal(&c, &a));
    lmc_bitmap_free(&c);
    lmc_bitmap_free(&a);
}

/* ---- model check ------------------------------------------------------------------ */

/* A small deterministic PRNG so the test is reproducible. */
static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void test_bitmap_matches_bool_array_model_under_random_operations(void **state)
{
    (void)state;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t s = 0; s < N_ODD_SIZES; s++) {
        size_t size = ODD_SIZES[s];
        bool model[130] = {false};
        lmc_bitmap bm;
        assert_int_equal(lmc_bitmap_init(&bm, size, 0), LMC_OK);
        for (int step = 0; step < 2000; step++) {
            size_t i = (size_t)(xorshift(&seed) % (size + 8)); /* some out of range */
            size_t j = (size_t)(xorshift(&seed) % (size + 8));
            switch (xorshift(&seed) % 4) {
            case 0:
                lmc_bitmap_set(&bm, i);
                if (i < size)
                    model[i] = true;
                break;
            case 1:
            case 2:
                lmc_bitmap_clear(&bm, i);
                if (i < size)
                    model[i] = false;
                break;
            default:
                lmc_bitmap_set_range(&bm, i, i + j % 5);
                for (size_t k = i; k < i + j % 5 && k < size; k++)
                    model[k] = true;
                break;
            }
            size_t pop = 0, ones = 0, zeros = 0;
            int64_t high = -1;
            while (ones < size && model[ones])
                ones++;
            while (zeros < size && !model[zeros])
                zeros++;
            for (size_t k = 0; k < size; k++) {
                pop += model[k];
                if (model[k])
                    high = (int64_t)k;
            }
            assert_int_equal(lmc_bitmap_popcount(&bm), pop);
            assert_int_equal(lmc_bitmap_count_leading_ones(&bm), ones);
            assert_int_equal(lmc_bitmap_count_leading_zeros(&bm), zeros);
            assert_int_equal(lmc_bitmap_highest_set_bit(&bm), high);
            assert_tail_zero(&bm);
        }
        lmc_bitmap_free(&bm);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitmap_empty_init_has_no_words),
        cmocka_unit_test(test_bitmap_empty_setters_are_ignored),
        cmocka_unit_test(test_bitmap_empty_test_is_false),
        cmocka_unit_test(test_bitmap_empty_counts_are_zero),
        cmocka_unit_test(test_bitmap_empty_indices_and_gather_find_nothing),
        cmocka_unit_test(test_bitmap_empty_and_or_not_give_empty),
        cmocka_unit_test(test_bitmap_empty_and_with_nonempty_is_empty),
        cmocka_unit_test(test_bitmap_empty_or_with_nonempty_is_the_nonempty),
        cmocka_unit_test(test_bitmap_empty_or_into_changes_nothing),
        cmocka_unit_test(test_bitmap_empty_to_string_is_empty),
        cmocka_unit_test(test_bitmap_empty_copy_is_empty_and_equal),
        cmocka_unit_test(test_bitmap_free_is_safe_on_zeroed_and_twice),
        cmocka_unit_test(test_bitmap_init_sets_first_n_bits),
        cmocka_unit_test(test_bitmap_init_clamps_first_n_to_size),
        cmocka_unit_test(test_bitmap_init_fails_with_nomem_and_zeroes_bitmap),
        cmocka_unit_test(test_bitmap_set_and_clear_change_one_bit),
        cmocka_unit_test(test_bitmap_set_ignores_out_of_range_index),
        cmocka_unit_test(test_bitmap_clear_ignores_out_of_range_index),
        cmocka_unit_test(test_bitmap_test_out_of_range_is_false),
        cmocka_unit_test(test_bitmap_batched_set_sets_listed_indices),
        cmocka_unit_test(test_bitmap_batched_set_drops_out_of_range_indices),
        cmocka_unit_test(test_bitmap_set_range_sets_half_open_interval),
        cmocka_unit_test(test_bitmap_set_range_matches_bit_by_bit_for_every_interval),
        cmocka_unit_test(test_bitmap_set_range_keeps_existing_bits),
        cmocka_unit_test(test_bitmap_set_range_clips_end_and_keeps_tail_zero),
        cmocka_unit_test(test_bitmap_set_range_empty_or_reversed_is_ignored),
        cmocka_unit_test(test_bitmap_popcount_counts_set_bits_for_odd_sizes),
        cmocka_unit_test(test_bitmap_count_leading_ones_for_odd_sizes),
        cmocka_unit_test(test_bitmap_count_leading_zeros_for_odd_sizes),
        cmocka_unit_test(test_bitmap_highest_set_bit_for_odd_sizes),
        cmocka_unit_test(test_bitmap_highest_set_bit_only_bit_zero),
        cmocka_unit_test(test_bitmap_and_uses_shorter_length),
        cmocka_unit_test(test_bitmap_and_drops_longer_inputs_bits_past_shorter_size),
        cmocka_unit_test(test_bitmap_or_uses_longer_length),
        cmocka_unit_test(test_bitmap_or_across_words_keeps_longer_tail),
        cmocka_unit_test(test_bitmap_not_complements_same_length),
        cmocka_unit_test(test_bitmap_not_keeps_tail_zero_for_odd_sizes),
        cmocka_unit_test(test_bitmap_not_twice_gives_original),
        cmocka_unit_test(test_bitmap_or_into_keeps_target_length_and_tail_zero),
        cmocka_unit_test(test_bitmap_or_into_with_shorter_source),
        cmocka_unit_test(test_bitmap_or_into_same_length),
        cmocka_unit_test(test_bitmap_copy_fails_with_nomem),
        cmocka_unit_test(test_bitmap_and_fails_with_nomem),
        cmocka_unit_test(test_bitmap_or_fails_with_nomem),
        cmocka_unit_test(test_bitmap_not_fails_with_nomem),
        cmocka_unit_test(test_bitmap_indices_lists_set_bits_ascending),
        cmocka_unit_test(test_bitmap_indices_returns_full_count_beyond_cap),
        cmocka_unit_test(test_bitmap_gather_copies_selected_elements),
        cmocka_unit_test(test_bitmap_gather_stops_at_n),
        cmocka_unit_test(test_bitmap_gather_with_n_past_size_uses_size),
        cmocka_unit_test(test_bitmap_gather_copies_multibyte_elements_whole),
        cmocka_unit_test(test_bitmap_to_string_puts_bit_zero_leftmost),
        cmocka_unit_test(test_bitmap_to_string_spans_words),
        cmocka_unit_test(test_bitmap_to_string_truncates_to_buffer),
        cmocka_unit_test(test_bitmap_to_string_zero_length_buffer_is_untouched),
        cmocka_unit_test(test_bitmap_equal_when_same_size_and_bits),
        cmocka_unit_test(test_bitmap_equal_false_when_bits_differ),
        cmocka_unit_test(test_bitmap_equal_false_when_sizes_differ),
        cmocka_unit_test(test_bitmap_copy_is_equal_and_independent),
        cmocka_unit_test(test_bitmap_matches_bool_array_model_under_random_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
