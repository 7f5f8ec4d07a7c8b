/*
 * test_types_intern_concurrency.c -- lmc_intern: canonical pointers, exact
 * byte semantics (embedded NUL, no terminator needed) and thread safety.
 * The _concurrency suffix puts it in the TSan run.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmcache/types.h"

static void test_intern_equal_strings_share_a_pointer(void **state)
{
    (void)state;
    char a[] = "meta-llama/Llama-3-8B";
    char b[] = "meta-llama/Llama-3-8B";
    const char *pa = lmc_intern(a, strlen(a));
    const char *pb = lmc_intern(b, strlen(b));
    assert_non_null(pa);
    assert_ptr_equal(pa, pb);
    assert_ptr_not_equal(pa, a);
    assert_string_equal(pa, a);
}

static void test_intern_different_strings_differ(void **state)
{
    (void)state;
    const char *x = lmc_intern("abc", 3);
    const char *y = lmc_intern("abd", 3);
    const char *z = lmc_intern("ab", 2);
    assert_ptr_not_equal(x, y);
    assert_ptr_not_equal(x, z);
    assert_string_equal(z, "ab");
}

static void test_intern_uses_len_and_terminates_the_copy(void **state)
{
    (void)state;
    const char raw[5] = {'h', 'e', 'l', 'l', 'o'}; /* no NUL */
    const char *p = lmc_intern(raw, 3);
    assert_string_equal(p, "hel");
    assert_ptr_equal(p, lmc_intern("hel", 3));
}

static void test_intern_keeps_embedded_nul(void **state)
{
    (void)state;
    const char *p = lmc_intern("a\0b", 3);
    const char *q = lmc_intern("a\0b", 3);
    const char *r = lmc_intern("a\0c", 3);
    const char *s = lmc_intern("a", 1);
    assert_ptr_equal(p, q);
    assert_ptr_not_equal(p, r);
    assert_ptr_not_equal(p, s);
    assert_memory_equal(p, "a\0b", 4); /* the three bytes and a NUL terminator */
}

static void test_intern_empty_string(void **state)
{
    (void)state;
    const char *e1 = lmc_intern("", 0);
    const char *e2 = lmc_intern("xyz", 0);
    const char *e3 = lmc_intern(NULL, 0);
    assert_non_null(e1);
    assert_string_equal(e1, "");
    assert_ptr_equal(e1, e2);
    assert_ptr_equal(e1, e3);
}

static void test_intern_many_strings_survive_growth(void **state)
{
    (void)state;
    enum { N = 20000 };
    const char **ptrs = calloc(N, sizeof(*ptrs));
    assert_non_null(ptrs);
    char buf[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(buf, sizeof(buf), "growth-%d", i);
        ptrs[i] = lmc_intern(buf, (size_t)n);
        assert_non_null(ptrs[i]);
    }
    for (int i = 0; i < N; i++) {
        int n = snprintf(buf, sizeof(buf), "growth-%d", i);
        assert_ptr_equal(lmc_intern(buf, (size_t)n), ptrs[i]);
        assert_string_equal(ptrs[i], buf);
    }
    free(ptrs);
}

/* ---------------------------------------------------------------------- */
/* Threads                                                                 */
/* ---------------------------------------------------------------------- */

enum { NTHREADS = 4, NSTRINGS = 50000, ROUNDS = 2 }; /* enough to grow the table mid-run */

typedef struct worker {
    int id;
    const char *ptrs[NSTRINGS];
    int failures;
} worker;

static pthread_barrier_t g_start;

/*
 * Every thread interns the same NSTRINGS strings (some with embedded NUL),
 * each starting at a different offset and walking in a different
 * direction, so inserts, lookups and table growth interleave.
 */
static void *intern_worker(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&g_start);
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < NSTRINGS; k++) {
            int i = (w->id % 2 == 0) ? (k + w->id * 997) % NSTRINGS
                                     : (NSTRINGS - 1 - (k + w->id * 997) % NSTRINGS);
            char buf[48];
            int n = snprintf(buf, sizeof(buf), "thread-shared-%d", i);
            if (i % 7 == 0)
                buf[6] = '\0'; /* embedded NUL */
            const char *p = lmc_intern(buf, (size_t)n);
            if (p == NULL || memcmp(p, buf, (size_t)n) != 0 || p[n] != '\0') {
                w->failures++;
                continue;
            }
            if (round == 0)
                w->ptrs[i] = p;
            else if (w->ptrs[i] != p)
                w->failures++;
        }
    }
    return NULL;
}

static void test_intern_threads_agree_on_pointers(void **state)
{
    (void)state;
    static worker workers[NTHREADS];
    pthread_t threads[NTHREADS];
    assert_int_equal(pthread_barrier_init(&g_start, NULL, NTHREADS), 0);
    for (int t = 0; t < NTHREADS; t++) {
        memset(&workers[t], 0, sizeof(workers[t]));
        workers[t].id = t;
        assert_int_equal(pthread_create(&threads[t], NULL, intern_worker, &workers[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    pthread_barrier_destroy(&g_start);

    for (int t = 0; t < NTHREADS; t++)
        assert_int_equal(workers[t].failures, 0);
    for (int i = 0; i < NSTRINGS; i++) {
        assert_non_null(workers[0].ptrs[i]);
        for (int t = 1; t < NTHREADS; t++)
            assert_ptr_equal(workers[t].ptrs[i], workers[0].ptrs[i]);
    }
    /* Distinct strings got distinct pointers. */
    assert_ptr_not_equal(workers[0].ptrs[1], workers[0].ptrs[2]);
    assert_ptr_not_equal(workers[0].ptrs[0], workers[0].ptrs[7]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern_equal_strings_share_a_pointer),
        cmocka_unit_test(test_intern_different_strings_differ),
        cmocka_unit_test(test_intern_uses_len_and_terminates_the_copy),
        cmocka_unit_test(test_intern_keeps_embedded_nul),
        cmocka_unit_test(test_intern_empty_string),
        cmocka_unit_test(test_intern_many_strings_survive_growth),
        cmocka_unit_test(test_intern_threads_agree_on_pointers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
