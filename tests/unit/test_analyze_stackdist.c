/*
 * test_analyze_stackdist.c -- byte-weighted stack distances against a
 * brute-force LRU.
 *
 * The reference is the cache the header describes, simulated directly: a
 * list in recency order; a miss inserts at the front, then the back is
 * evicted until the bytes fit (the new object too, when it alone does not).
 * For random streams, at every capacity where the answer can change (each
 * distance + own size, and one byte below it) and a few more, the number of
 * hits must be exactly the number of accesses with distance + size <= C.
 * The distances themselves are checked against the reference's infinite
 * stack (the count and the bytes above the id). Streams are long enough to
 * compact the timeline many times and to grow it.
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

#include "analyze/stackdist.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* A stream of n accesses over n_ids ids, skewed (small ids more often) or uniform. */
static uint32_t *make_stream(size_t n, uint32_t n_ids, bool skewed)
{
    uint32_t *s = malloc(n * sizeof(*s));
    assert_non_null(s);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd() % n_ids;
        if (skewed)
            r = (r * (rnd() % n_ids)) / n_ids; /* product of two uniforms: mass near 0 */
        s[i] = (uint32_t)r;
    }
    return s;
}

/* Hits of the reference LRU of cap bytes over the stream. */
static uint64_t brute_hits(const uint32_t *s, size_t n, const uint64_t *size, uint32_t n_ids,
                           uint64_t cap)
{
    uint32_t *list = malloc((size_t)n_ids * sizeof(*list)); /* MRU first */
    assert_non_null(list);
    size_t len = 0;
    uint64_t total = 0, hits = 0;
    for (size_t i = 0; i < n; i++) {
        size_t at = len;
        for (size_t j = 0; j < len; j++) {
            if (list[j] == s[i]) {
                at = j;
                break;
            }
        }
        if (at < len) {
            hits++;
            memmove(list + 1, list, at * sizeof(*list));
            list[0] = s[i];
            continue;
        }
        memmove(list + 1, list, len * sizeof(*list));
        list[0] = s[i];
        len++;
        total += size[s[i]];
        while (len > 0 && total > cap)
            total -= size[list[--len]];
    }
    free(list);
    return hits;
}

typedef struct run {
    lmc_stackdist_access_result *r;
    size_t n;
} run;

/* Stack distances of the stream, checked against an infinite reference stack on the way. */
static run distances(const uint32_t *s, size_t n, const uint64_t *size, uint32_t n_ids)
{
    lmc_stackdist *sd = lmc_stackdist_create();
    assert_non_null(sd);
    run out = {calloc(n, sizeof(*out.r)), n};
    uint32_t *stack = malloc((size_t)n_ids * sizeof(*stack));
    assert_non_null(out.r);
    assert_non_null(stack);
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(lmc_stackdist_access(sd, s[i], size[s[i]], &out.r[i]), LMC_OK);
        size_t at = depth;
        uint64_t above = 0;
        for (size_t j = 0; j < depth; j++) {
            if (stack[j] == s[i]) {
                at = j;
                break;
            }
            above += size[stack[j]];
        }
        assert_int_equal(out.r[i].size, size[s[i]]);
        if (at == depth) {
            assert_true(out.r[i].cold);
            depth++;
        } else {
            assert_false(out.r[i].cold);
            assert_int_equal(out.r[i].keys, at);
            assert_int_equal(out.r[i].bytes, above);
        }
        memmove(stack + 1, stack, at * sizeof(*stack)); /* a cold id: at is the old depth */
        stack[0] = s[i];
    }
    uint64_t bytes = 0;
    for (size_t j = 0; j < depth; j++)
        bytes += size[stack[j]];
    assert_int_equal(lmc_stackdist_ids(sd), depth);
    assert_int_equal(lmc_stackdist_bytes(sd), bytes);
    free(stack);
    lmc_stackdist_destroy(sd);
    return out;
}

static uint64_t predicted_hits(const run *r, uint64_t cap)
{
    uint64_t hits = 0;
    for (size_t i = 0; i < r->n; i++)
        hits += !r->r[i].cold && r->r[i].bytes + r->r[i].size <= cap;
    return hits;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The whole check for one random stream. */
static void check_stream(size_t n, uint32_t n_ids, bool skewed, uint64_t max_size)
{
    uint64_t *size = malloc((size_t)n_ids * sizeof(*size));
    assert_non_null(size);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_ids; i++) {
        size[i] = 1 + rnd() % max_size;
        total += size[i];
    }
    uint32_t *s = make_stream(n, n_ids, skewed);
    run r = distances(s, n, size, n_ids);

    /* Every capacity where a prediction flips, one below it, and a spread. */
    size_t n_caps = 0;
    uint64_t *caps = malloc((2 * n + 16) * sizeof(*caps));
    assert_non_null(caps);
    for (size_t i = 0; i < n; i++) {
        if (r.r[i].cold)
            continue;
        caps[n_caps++] = r.r[i].bytes + r.r[i].size;
        caps[n_caps++] = r.r[i].bytes + r.r[i].size - 1;
    }
    for (int k = 0; k < 16; k++)
        caps[n_caps++] = total * (uint64_t)k / 15;
    qsort(caps, n_caps, sizeof(*caps), cmp_u64);
    size_t distinct = 0;
    for (size_t i = 0; i < n_caps; i++) {
        if (distinct == 0 || caps[distinct - 1] != caps[i])
            caps[distinct++] = caps[i];
    }
    /* At most ~60 capacities through the reference (it is quadratic); spread over the list. */
    size_t step = distinct / 60 + 1;
    for (size_t i = 0; i < distinct; i += step)
        assert_int_equal(predicted_hits(&r, caps[i]), brute_hits(s, n, size, n_ids, caps[i]));
    /* And every flip point of the smallest capacities, where the curve changes fastest. */
    for (size_t i = 0; i < distinct && i < 40; i++)
        assert_int_equal(predicted_hits(&r, caps[i]), brute_hits(s, n, size, n_ids, caps[i]));
    free(caps);
    free(r.r);
    free(s);
    free(size);
}

static void test_distances_match_brute_force_lru_uniform_sizes(void **state)
{
    (void)state;
    rng_state = 0x9e3779b97f4a7c15ull;
    check_stream(6000, 300, true, 1);
    check_stream(6000, 300, false, 1);
}

static void test_distances_match_brute_force_lru_byte_weights(void **state)
{
    (void)state;
    rng_state = 0x1234567ull;
    for (int t = 0; t < 6; t++)
        check_stream(4000, 50 + (uint32_t)(rnd() % 400), t % 2 == 0, 1 + rnd() % 100000);
}

static void test_object_larger_than_capacity_is_never_a_hit(void **state)
{
    (void)state;
    /* ids 0 (size 10) and 1 (size 100), capacity 50: the big one never stays. */
    uint64_t size[2] = {10, 100};
    uint32_t s[] = {0, 1, 1, 0, 0, 1, 0};
    run r = distances(s, 7, size, 2);
    assert_int_equal(predicted_hits(&r, 50), brute_hits(s, 7, size, 2, 50));
    assert_int_equal(predicted_hits(&r, 50), 1); /* the 0 right after a 0 */
    assert_int_equal(predicted_hits(&r, 110), brute_hits(s, 7, size, 2, 110));
    free(r.r);
}

static void test_timeline_compacts_and_grows_over_many_ids(void **state)
{
    (void)state;
    /* 40,000 distinct ids in three cyclic rounds, then id 7 twice. */
    lmc_stackdist *sd = lmc_stackdist_create();
    assert_non_null(sd);
    lmc_stackdist_access_result res;
    const uint32_t n = 40000;
    for (int round = 0; round < 3; round++) {
        for (uint32_t id = 0; id < n; id++) {
            assert_int_equal(lmc_stackdist_access(sd, id, 2, &res), LMC_OK);
            if (round == 0) {
                assert_true(res.cold);
            } else {
                assert_false(res.cold);
                assert_int_equal(res.keys, n - 1);
                assert_int_equal(res.bytes, 2ull * (n - 1));
            }
        }
    }
    assert_int_equal(lmc_stackdist_access(sd, 7, 2, &res), LMC_OK);
    assert_int_equal(res.keys, n - 8); /* ids 8 .. n-1 came since */
    assert_int_equal(lmc_stackdist_access(sd, 7, 2, &res), LMC_OK);
    assert_int_equal(res.keys, 0);
    assert_int_equal(res.bytes, 0);
    assert_int_equal(lmc_stackdist_ids(sd), n);
    assert_int_equal(lmc_stackdist_bytes(sd), 2ull * n);
    lmc_stackdist_destroy(sd);
}

static void test_size_is_fixed_at_the_first_access(void **state)
{
    (void)state;
    lmc_stackdist *sd = lmc_stackdist_create();
    assert_non_null(sd);
    lmc_stackdist_access_result res;
    assert_int_equal(lmc_stackdist_access(sd, 3, 100, &res), LMC_OK);
    assert_int_equal(lmc_stackdist_access(sd, 4, 7, &res), LMC_OK);
    assert_int_equal(lmc_stackdist_access(sd, 3, 5, &res), LMC_OK);
    assert_int_equal(res.size, 100);
    assert_int_equal(res.bytes, 7);
    assert_int_equal(res.keys, 1);
    assert_int_equal(lmc_stackdist_access(sd, UINT32_MAX, 1, &res), LMC_ERR_INVALID);
    assert_int_equal(lmc_stackdist_bytes(sd), 107);
    lmc_stackdist_destroy(sd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distances_match_brute_force_lru_uniform_sizes),
        cmocka_unit_test(test_distances_match_brute_force_lru_byte_weights),
        cmocka_unit_test(test_object_larger_than_capacity_is_never_a_hit),
        cmocka_unit_test(test_timeline_compacts_and_grows_over_many_ids),
        cmocka_unit_test(test_size_is_fixed_at_the_first_access),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
