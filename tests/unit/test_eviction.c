/*
 * test_eviction.c -- the eviction registry, the target arithmetic and each
 * policy (LRU, IsolatedLRU, ARC, S3FIFO, noop).
 *
 * Keys are named by their chunk hash ("a", "b", ...), so a test can say
 * `created(p, "a b c")` and expect victims "c b a".
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "storage/eviction.h"

#define MAX_KEYS 32

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

static lmc_object_key key_named(const char *name, size_t len, const char *salt)
{
    lmc_object_key k;
    lmc_error err;
    lmc_status st = lmc_object_key_make(&k, name, len, "model", 0, 0, salt, &err);
    if (st != LMC_OK)
        fail_msg("lmc_object_key_make: %s", err.msg);
    return k;
}

/* Parse space-separated names into keys with the given salt. */
static size_t keys_of(const char *names, const char *salt, lmc_object_key *out)
{
    size_t n = 0;
    const char *s = names;
    while (*s) {
        while (*s == ' ')
            s++;
        const char *end = s;
        while (*end && *end != ' ')
            end++;
        if (end > s) {
            assert_true(n < MAX_KEYS);
            out[n++] = key_named(s, (size_t)(end - s), salt);
        }
        s = end;
    }
    return n;
}

static void created_salted(lmc_eviction_policy *p, const char *names, const char *salt)
{
    lmc_object_key keys[MAX_KEYS];
    lmc_eviction_on_created(p, keys, keys_of(names, salt, keys));
}

static void created(lmc_eviction_policy *p, const char *names)
{
    created_salted(p, names, NULL);
}

static void touched(lmc_eviction_policy *p, const char *names)
{
    lmc_object_key keys[MAX_KEYS];
    lmc_eviction_on_touched(p, keys, keys_of(names, NULL, keys));
}

static void removed_salted(lmc_eviction_policy *p, const char *names, const char *salt)
{
    lmc_object_key keys[MAX_KEYS];
    lmc_eviction_on_removed(p, keys, keys_of(names, salt, keys));
}

static void removed(lmc_eviction_policy *p, const char *names)
{
    removed_salted(p, names, NULL);
}

/* The victims' names, space-separated, oldest first. */
static char g_victims[1024];

static const char *victims_full(lmc_eviction_policy *p, double ratio, lmc_evict_filter filter,
                                void *ud, const char *salt)
{
    lmc_keyvec v = LMC_KEYVEC_INIT;
    assert_int_equal(lmc_eviction_get_actions(p, ratio, filter, ud, salt, &v), LMC_OK);
    size_t used = 0;
    g_victims[0] = '\0';
    for (size_t i = 0; i < v.len; i++) {
        int w = snprintf(g_victims + used, sizeof(g_victims) - used, "%s%.*s", i ? " " : "",
                         (int)v.keys[i].chunk_hash_len, (const char *)v.keys[i].chunk_hash);
        assert_true(w > 0 && (size_t)w < sizeof(g_victims) - used);
        used += (size_t)w;
    }
    lmc_keyvec_free(&v);
    return g_victims;
}

static const char *victims(lmc_eviction_policy *p, double ratio)
{
    return victims_full(p, ratio, NULL, NULL, NULL);
}

/* A ratio small enough to select exactly one key. */
#define ONE 1e-9

/* Filter: reject the key whose name is the NUL-terminated string ud. */
static bool reject_named(const lmc_object_key *key, void *ud)
{
    const char *name = ud;
    return !(key->chunk_hash_len == strlen(name) &&
             memcmp(key->chunk_hash, name, key->chunk_hash_len) == 0);
}

static lmc_eviction_policy *make(const char *name)
{
    lmc_eviction_policy *p = NULL;
    lmc_error err;
    assert_int_equal(lmc_eviction_policy_create(name, &p, &err), LMC_OK);
    assert_non_null(p);
    return p;
}

/* ---------------------------------------------------------------------- */
/* Registry                                                                */
/* ---------------------------------------------------------------------- */

static void test_registry_lists_names_in_order(void **state)
{
    (void)state;
    static const char *const want[] = {"LRU", "ARC", "S3FIFO", "IsolatedLRU", "noop"};
    assert_int_equal(lmc_eviction_policy_count, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(lmc_eviction_policy_names()[i], want[i]);
}

static void test_registry_finds_every_listed_name(void **state)
{
    (void)state;
    for (size_t i = 0; i < lmc_eviction_policy_count; i++) {
        const lmc_eviction_ops *ops = lmc_eviction_find(lmc_eviction_policy_names()[i]);
        assert_non_null(ops);
        assert_string_equal(ops->name, lmc_eviction_policy_names()[i]);
    }
    assert_ptr_equal(lmc_eviction_find("LRU"), &lmc_eviction_lru_ops);
    assert_ptr_equal(lmc_eviction_find("noop"), &lmc_eviction_noop_ops);
}

/*
 * Everything that lists policies is derived from the one table: the names
 * array, the joined list of messages, and the count agree with it, and
 * only a policy with the salt_buckets op isolates.
 */
static void test_registry_names_and_list_are_derived_from_the_table(void **state)
{
    (void)state;
    size_t n = lmc_eviction_policy_count;
    assert_null(lmc_eviction_policy_at(n));
    char list[256];
    snprintf(list, sizeof(list), "%s", lmc_eviction_policy_list());
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(list, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
        assert_true(k < n);
        assert_ptr_equal(lmc_eviction_find(tok),
                         lmc_eviction_policy_at(k)); /* each once, in order */
        k++;
    }
    assert_int_equal(k, n);
    size_t isolating = 0;
    for (size_t i = 0; i < n; i++) {
        const lmc_eviction_ops *ops = lmc_eviction_policy_at(i);
        assert_ptr_equal(lmc_eviction_policy_names()[i], ops->name);
        isolating += lmc_eviction_ops_isolating(ops);
        lmc_eviction_policy *p = make(ops->name);
        assert_int_equal(lmc_eviction_policy_supports_isolation(p), ops->salt_buckets != NULL);
        if (!lmc_eviction_ops_isolating(ops))
            assert_int_equal(lmc_eviction_bucket_count(p), 0);
        lmc_eviction_policy_destroy(p);
    }
    assert_int_equal(isolating, 1); /* IsolatedLRU */
    assert_true(lmc_eviction_ops_isolating(&lmc_eviction_isolated_lru_ops));
}

static void test_registry_match_is_exact(void **state)
{
    (void)state;
    assert_null(lmc_eviction_find("lru"));
    assert_null(lmc_eviction_find("LRU "));
    assert_null(lmc_eviction_find(""));
    assert_null(lmc_eviction_find(NULL));
}

static void test_create_unknown_policy_is_invalid_and_names_choices(void **state)
{
    (void)state;
    lmc_eviction_policy *p = (lmc_eviction_policy *)&p; /* must be reset to NULL */
    lmc_error err;
    assert_int_equal(lmc_eviction_policy_create("FIFO", &p, &err), LMC_ERR_INVALID);
    assert_null(p);
    assert_int_equal(err.code, LMC_ERR_INVALID);
    assert_string_equal(err.msg, "unknown eviction policy 'FIFO' (expected one of LRU, ARC, "
                                 "S3FIFO, IsolatedLRU, noop)");
}

static void test_create_reports_name_and_isolation(void **state)
{
    (void)state;
    for (size_t i = 0; i < lmc_eviction_policy_count; i++) {
        lmc_eviction_policy *p = make(lmc_eviction_policy_names()[i]);
        assert_string_equal(lmc_eviction_policy_name(p), lmc_eviction_policy_names()[i]);
        assert_int_equal(lmc_eviction_policy_supports_isolation(p),
                         strcmp(lmc_eviction_policy_names()[i], "IsolatedLRU") == 0);
        assert_int_equal(lmc_eviction_tracked(p), 0);
        lmc_eviction_policy_destroy(p);
    }
    lmc_eviction_policy_destroy(NULL); /* allowed */
}

/* ---------------------------------------------------------------------- */
/* Target arithmetic                                                       */
/* ---------------------------------------------------------------------- */

static void test_target_zero_ratio_is_zero(void **state)
{
    (void)state;
    assert_int_equal(lmc_eviction_target(100, 0.0), 0);
    assert_int_equal(lmc_eviction_target(100, -0.5), 0);
}

static void test_target_nan_ratio_is_zero(void **state)
{
    (void)state;
    assert_int_equal(lmc_eviction_target(100, NAN), 0);
}

static void test_target_ratio_above_one_is_clamped(void **state)
{
    (void)state;
    assert_int_equal(lmc_eviction_target(100, 1.5), 100);
    assert_int_equal(lmc_eviction_target(100, INFINITY), 100);
    assert_int_equal(lmc_eviction_target(SIZE_MAX, 1.0), SIZE_MAX);
}

static void test_target_floors_the_product(void **state)
{
    (void)state;
    assert_int_equal(lmc_eviction_target(10, 0.25), 2);
    assert_int_equal(lmc_eviction_target(100, 0.2), 20);
    assert_int_equal(lmc_eviction_target(7, 0.99), 6);
}

static void test_target_tiny_ratio_gives_one(void **state)
{
    (void)state;
    assert_int_equal(lmc_eviction_target(3, 1e-12), 1);
    assert_int_equal(lmc_eviction_target(1, 0.5), 1);
}

static void test_target_of_empty_is_zero(void **state)
{
    (void)state;
    assert_int_equal(lmc_eviction_target(0, 0.5), 0);
    assert_int_equal(lmc_eviction_target(0, 1.0), 0);
}

/* ---------------------------------------------------------------------- */
/* LRU                                                                     */
/* ---------------------------------------------------------------------- */

static void test_lru_evicts_request_suffix_first(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c");
    assert_int_equal(lmc_eviction_tracked(p), 3);
    assert_string_equal(victims(p, 1.0), "c b a");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_older_requests_are_evicted_first(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b");
    created(p, "c d");
    assert_string_equal(victims(p, 1.0), "b a d c");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_recreation_moves_key_to_end(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c");
    created(p, "c");
    assert_int_equal(lmc_eviction_tracked(p), 3);
    assert_string_equal(victims(p, 1.0), "b a c");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_touch_moves_to_end_in_reverse_order(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c d");
    touched(p, "c d");
    assert_string_equal(victims(p, 1.0), "b a d c");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_touch_ignores_untracked_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a");
    touched(p, "x a");
    assert_int_equal(lmc_eviction_tracked(p), 1);
    assert_string_equal(victims(p, 1.0), "a");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_filter_skips_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c d");
    /* target = floor(4 * 0.5) = 2, taken from the oldest eligible keys */
    assert_string_equal(victims_full(p, 0.5, reject_named, "d", NULL), "c b");
    assert_string_equal(victims_full(p, 0.5, reject_named, "c", NULL), "d b");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_ratio_selects_that_fraction_of_tracked_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c d e f g h i j");
    assert_string_equal(victims(p, 0.3), "j i h");
    assert_string_equal(victims(p, ONE), "j");
    assert_string_equal(victims(p, 0.0), "");
    lmc_eviction_policy_destroy(p);
}

static void test_lru_get_actions_does_not_remove_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c");
    assert_string_equal(victims(p, ONE), "c");
    assert_string_equal(victims(p, ONE), "c");
    assert_int_equal(lmc_eviction_tracked(p), 3);
    lmc_eviction_policy_destroy(p);
}

static void test_lru_get_actions_appends_to_out(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b");
    lmc_keyvec v = LMC_KEYVEC_INIT;
    assert_int_equal(lmc_eviction_get_actions(p, 1.0, NULL, NULL, NULL, &v), LMC_OK);
    assert_int_equal(lmc_eviction_get_actions(p, 1.0, NULL, NULL, NULL, &v), LMC_OK);
    assert_int_equal(v.len, 4);
    lmc_keyvec_free(&v);
    lmc_eviction_policy_destroy(p);
}

static void test_lru_on_removed_forgets_key(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("LRU");
    created(p, "a b c");
    removed(p, "b x"); /* x was never tracked: ignored */
    assert_int_equal(lmc_eviction_tracked(p), 2);
    assert_string_equal(victims(p, 1.0), "c a");
    lmc_eviction_policy_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* IsolatedLRU                                                             */
/* ---------------------------------------------------------------------- */

static void test_isolated_keeps_one_lru_per_salt(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a b", "alice");
    created_salted(p, "c d", "bob");
    created_salted(p, "e", NULL);
    assert_int_equal(lmc_eviction_tracked(p), 5);
    assert_int_equal(lmc_eviction_bucket_count(p), 3);
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, "alice"), "b a");
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, "bob"), "d c");
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, ""), "e");
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_requires_a_salt(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a", "alice");
    lmc_keyvec v = LMC_KEYVEC_INIT;
    assert_int_equal(lmc_eviction_get_actions(p, 1.0, NULL, NULL, NULL, &v), LMC_ERR_INVALID);
    assert_int_equal(v.len, 0);
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_target_comes_from_bucket_size(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a b c d", "alice");
    created_salted(p, "e f g h i j k l m n o p", "bob");
    /* floor(4 * 0.5) = 2, not floor(16 * 0.5) = 8 */
    assert_string_equal(victims_full(p, 0.5, NULL, NULL, "alice"), "d c");
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_unknown_salt_gives_no_victims(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a", "alice");
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, "mallory"), "");
    assert_int_equal(lmc_eviction_bucket_count(p), 1);
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_salt_is_matched_by_content(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a", "alice");
    char salt[] = "alice"; /* not the interned pointer */
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, salt), "a");
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_touch_and_filter_stay_in_bucket(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a b c", "alice");
    lmc_object_key k = key_named("c", 1, "alice");
    lmc_eviction_on_touched(p, &k, 1);
    assert_string_equal(victims_full(p, 1.0, reject_named, "a", "alice"), "b c");
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_empty_buckets_are_dropped(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    created_salted(p, "a b", "alice");
    created_salted(p, "c", "bob");
    assert_int_equal(lmc_eviction_bucket_count(p), 2);
    removed_salted(p, "a b", "alice");
    assert_int_equal(lmc_eviction_bucket_count(p), 1);
    assert_int_equal(lmc_eviction_tracked(p), 1);
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, "alice"), "");
    removed_salted(p, "c", "bob");
    assert_int_equal(lmc_eviction_bucket_count(p), 0);
    assert_int_equal(lmc_eviction_tracked(p), 0);
    lmc_eviction_policy_destroy(p);
}

static void test_isolated_many_salts_grow_the_table(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("IsolatedLRU");
    char salt[16];
    for (int i = 0; i < 100; i++) {
        snprintf(salt, sizeof(salt), "s%d", i);
        created_salted(p, "a b", salt);
    }
    assert_int_equal(lmc_eviction_bucket_count(p), 100);
    assert_int_equal(lmc_eviction_tracked(p), 200);
    for (int i = 0; i < 100; i++) {
        snprintf(salt, sizeof(salt), "s%d", i);
        assert_string_equal(victims_full(p, 1.0, NULL, NULL, salt), "b a");
    }
    lmc_eviction_policy_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* ARC                                                                     */
/*                                                                         */
/* With p = 0 victims come from T1 (oldest first) before T2, which makes  */
/* list membership visible in the victim order.                            */
/* ---------------------------------------------------------------------- */

static void test_arc_second_create_promotes_t1_to_t2(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a");
    created(p, "b");
    created(p, "c");
    created(p, "a"); /* T1 -> T2 */
    created(p, "d");
    assert_int_equal(lmc_eviction_tracked(p), 4);
    assert_string_equal(victims(p, 1.0), "b c d a");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_touch_promotes_t1_to_t2(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a b c");
    touched(p, "c x"); /* x is unknown: ignored */
    assert_int_equal(lmc_eviction_tracked(p), 3);
    assert_string_equal(victims(p, 1.0), "b a c");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_created_keys_are_processed_in_reverse_order(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a b c");
    assert_string_equal(victims(p, 1.0), "c b a");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_get_actions_does_not_remove_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a b c");
    assert_string_equal(victims(p, ONE), "c");
    assert_string_equal(victims(p, ONE), "c");
    assert_int_equal(lmc_eviction_tracked(p), 3);
    lmc_eviction_policy_destroy(p);
}

static void test_arc_filter_skips_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a b c");
    assert_string_equal(victims_full(p, 1.0, reject_named, "b", NULL), "c a");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_pending_victim_retires_to_ghost(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a");
    created(p, "b");
    created(p, "c");
    assert_string_equal(victims(p, ONE), "a"); /* a is now pending */
    removed(p, "a");                           /* T1 -> B1 */
    assert_int_equal(lmc_eviction_tracked(p), 2);
    created(p, "a"); /* B1 hit: p = 1, a -> T2 */
    created(p, "d");
    /* T1 = [b c d] stays >= p until it is empty, then T2 */
    assert_string_equal(victims(p, 1.0), "b c d a");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_removal_of_non_pending_key_forgets_it(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a");
    created(p, "b");
    created(p, "c");
    removed(p, "a"); /* not a victim: no ghost */
    assert_int_equal(lmc_eviction_tracked(p), 2);
    created(p, "a"); /* a brand-new key again: T1 */
    created(p, "d");
    assert_string_equal(victims(p, 1.0), "b c a d");
    lmc_eviction_policy_destroy(p);
}

/* T1 = [e], T2 = [c d a b] and p = 2, reached through two B1 ghost hits. */
static lmc_eviction_policy *arc_with_p_two(void)
{
    lmc_eviction_policy *p = make("ARC");
    created(p, "a");
    created(p, "b");
    created(p, "c");
    created(p, "d");
    touched(p, "c");
    touched(p, "d"); /* T1 = [a b], T2 = [c d] */
    assert_string_equal(victims(p, 0.5), "a b");
    removed(p, "a b"); /* B1 = [a b] */
    created(p, "a");   /* B1 hit: p = 1 */
    created(p, "b");   /* B1 hit: p = 2 */
    created(p, "e");   /* T1 = [e] */
    return p;
}

static void test_arc_b1_ghost_hit_grows_t1_target(void **state)
{
    (void)state;
    lmc_eviction_policy *p = arc_with_p_two();
    /* |T1| = 1 < p = 2: the victim comes from T2 although T1 is not empty */
    assert_string_equal(victims(p, ONE), "c");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_b2_ghost_hit_shrinks_t1_target(void **state)
{
    (void)state;
    lmc_eviction_policy *p = arc_with_p_two();
    assert_string_equal(victims(p, ONE), "c");
    removed(p, "c"); /* T2 -> B2 */
    created(p, "c"); /* B2 hit: p = 1 */
    /* |T1| = 1 >= p = 1: T1 goes first again */
    assert_string_equal(victims(p, ONE), "e");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_victims_split_by_virtual_t1_size(void **state)
{
    (void)state;
    lmc_eviction_policy *p = arc_with_p_two();
    created(p, "f"); /* T1 = [e f] */
    /* |T1| = 2 >= 2: e; then T1 counts as 1 < 2: c, d, ...; T1 last */
    assert_string_equal(victims(p, 1.0), "e c d a b f");
    lmc_eviction_policy_destroy(p);
}

static void test_arc_tracked_excludes_ghosts(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("ARC");
    created(p, "a b c");
    assert_string_equal(victims(p, 1.0), "c b a");
    removed(p, "a b c");
    assert_int_equal(lmc_eviction_tracked(p), 0);
    assert_string_equal(victims(p, 1.0), "");
    lmc_eviction_policy_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* S3FIFO                                                                  */
/* ---------------------------------------------------------------------- */

static void test_s3fifo_small_is_evicted_before_main(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a");
    created(p, "b");
    touched(p, "a"); /* small -> main */
    created(p, "c");
    created(p, "d");
    assert_int_equal(lmc_eviction_tracked(p), 4);
    assert_string_equal(victims(p, 1.0), "b c d a");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_touch_promotes_small_to_main(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a");
    created(p, "b");
    created(p, "c");
    touched(p, "a");
    assert_string_equal(victims(p, ONE), "b");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_touch_refreshes_inside_main(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a");
    created(p, "b");
    touched(p, "a");
    touched(p, "b"); /* main = [a b] */
    touched(p, "a"); /* main = [b a] */
    assert_string_equal(victims(p, 1.0), "b a");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_created_keys_enter_small_in_reverse_order(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a b c");
    created(p, "a"); /* already resident: unchanged */
    assert_int_equal(lmc_eviction_tracked(p), 3);
    assert_string_equal(victims(p, 1.0), "c b a");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_ghost_readmission_goes_straight_to_main(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a");
    created(p, "b");
    assert_string_equal(victims(p, ONE), "a");
    removed(p, "a"); /* small -> ghost */
    assert_int_equal(lmc_eviction_tracked(p), 1);
    created(p, "a"); /* ghost hit: main */
    created(p, "c");
    assert_string_equal(victims(p, 1.0), "b c a");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_ghost_set_is_bounded_by_peak_resident_count(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "x");
    touched(p, "x"); /* main = [x] */
    created(p, "a"); /* peak resident count: 2 */
    removed(p, "a");
    created(p, "b");
    removed(p, "b");
    created(p, "c");
    removed(p, "c"); /* ghost = [b c]; a fell out */
    created(p, "a"); /* no ghost hit: small */
    assert_string_equal(victims(p, ONE), "a");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_filter_skips_keys_across_queues(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a");
    created(p, "b");
    touched(p, "b"); /* small = [a], main = [b] */
    assert_string_equal(victims_full(p, ONE, reject_named, "a", NULL), "b");
    lmc_eviction_policy_destroy(p);
}

static void test_s3fifo_get_actions_does_not_remove_keys(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("S3FIFO");
    created(p, "a b");
    assert_string_equal(victims(p, ONE), "b");
    assert_string_equal(victims(p, ONE), "b");
    assert_int_equal(lmc_eviction_tracked(p), 2);
    lmc_eviction_policy_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* noop                                                                    */
/* ---------------------------------------------------------------------- */

static void test_noop_never_evicts(void **state)
{
    (void)state;
    lmc_eviction_policy *p = make("noop");
    created(p, "a b c");
    touched(p, "a");
    assert_int_equal(lmc_eviction_tracked(p), 0);
    assert_string_equal(victims(p, 1.0), "");
    assert_string_equal(victims_full(p, 1.0, NULL, NULL, "alice"), "");
    removed(p, "a b c");
    lmc_eviction_policy_destroy(p);
}

/* ---------------------------------------------------------------------- */
/* Concurrency smoke test: four threads, overlapping keys, every op.       */
/* ---------------------------------------------------------------------- */

#define SMOKE_KEYS 64
#define SMOKE_ITERS 3000
#define SMOKE_THREADS 4

typedef struct smoke {
    lmc_eviction_policy *p;
    const char *salt; /* for get_actions: NULL unless the policy isolates */
    lmc_object_key keys[SMOKE_KEYS];
    unsigned seed;
} smoke;

typedef struct smoke_arg {
    smoke *sm;
    unsigned id;
} smoke_arg;

static bool reject_odd_keys(const lmc_object_key *key, void *ud)
{
    (void)ud;
    return key->chunk_hash[0] % 2 == 0;
}

static void *smoke_thread(void *arg)
{
    const smoke_arg *a = arg;
    smoke *sm = a->sm;
    unsigned x = a->id * 2654435761u + 1;
    lmc_keyvec v = LMC_KEYVEC_INIT;
    for (unsigned i = 0; i < SMOKE_ITERS; i++) {
        x = x * 1103515245u + 12345u;
        size_t start = (x >> 8) % SMOKE_KEYS;
        size_t n = 1 + (x >> 20) % 4;
        if (start + n > SMOKE_KEYS)
            n = SMOKE_KEYS - start;
        switch ((x >> 4) % 4) {
        case 0:
            lmc_eviction_on_created(sm->p, &sm->keys[start], n);
            break;
        case 1:
            lmc_eviction_on_touched(sm->p, &sm->keys[start], n);
            break;
        case 2:
            lmc_eviction_on_removed(sm->p, &sm->keys[start], n);
            break;
        default:
            lmc_keyvec_reset(&v);
            if (lmc_eviction_get_actions(sm->p, 0.25, (x & 1) ? reject_odd_keys : NULL, NULL,
                                         sm->salt, &v) != LMC_OK) {
                lmc_keyvec_free(&v);
                return (void *)1;
            }
            lmc_eviction_on_removed(sm->p, v.keys, v.len);
            break;
        }
        (void)lmc_eviction_tracked(sm->p);
    }
    lmc_keyvec_free(&v);
    return NULL;
}

static void run_smoke(const char *name)
{
    static smoke sm;
    sm.p = make(name);
    sm.salt = lmc_eviction_policy_supports_isolation(sm.p) ? "" : NULL;
    for (size_t i = 0; i < SMOKE_KEYS; i++) {
        uint8_t hash[2] = {(uint8_t)i, 0x5a};
        lmc_error err;
        assert_int_equal(
            lmc_object_key_make(&sm.keys[i], hash, sizeof(hash), "model", 0, 0, NULL, &err),
            LMC_OK);
    }
    pthread_t t[SMOKE_THREADS];
    smoke_arg args[SMOKE_THREADS];
    for (unsigned i = 0; i < SMOKE_THREADS; i++) {
        args[i] = (smoke_arg){&sm, i};
        assert_int_equal(pthread_create(&t[i], NULL, smoke_thread, &args[i]), 0);
    }
    for (unsigned i = 0; i < SMOKE_THREADS; i++) {
        void *ret = NULL;
        assert_int_equal(pthread_join(t[i], &ret), 0);
        assert_null(ret);
    }
    assert_true(lmc_eviction_tracked(sm.p) <= SMOKE_KEYS);
    /* Whatever survived is consistent: removing every key empties the policy. */
    lmc_eviction_on_removed(sm.p, sm.keys, SMOKE_KEYS);
    assert_int_equal(lmc_eviction_tracked(sm.p), 0);
    assert_string_equal(victims_full(sm.p, 1.0, NULL, NULL, sm.salt), "");
    lmc_eviction_policy_destroy(sm.p);
}

static void test_lru_is_safe_under_concurrent_ops(void **state)
{
    (void)state;
    run_smoke("LRU");
}

static void test_isolated_lru_is_safe_under_concurrent_ops(void **state)
{
    (void)state;
    run_smoke("IsolatedLRU");
}

static void test_arc_is_safe_under_concurrent_ops(void **state)
{
    (void)state;
    run_smoke("ARC");
}

static void test_s3fifo_is_safe_under_concurrent_ops(void **state)
{
    (void)state;
    run_smoke("S3FIFO");
}

static void test_noop_is_safe_under_concurrent_ops(void **state)
{
    (void)state;
    run_smoke("noop");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_lists_names_in_order),
        cmocka_unit_test(test_registry_finds_every_listed_name),
        cmocka_unit_test(test_registry_names_and_list_are_derived_from_the_table),
        cmocka_unit_test(test_registry_match_is_exact),
        cmocka_unit_test(test_create_unknown_policy_is_invalid_and_names_choices),
        cmocka_unit_test(test_create_reports_name_and_isolation),
        cmocka_unit_test(test_target_zero_ratio_is_zero),
        cmocka_unit_test(test_target_nan_ratio_is_zero),
        cmocka_unit_test(test_target_ratio_above_one_is_clamped),
        cmocka_unit_test(test_target_floors_the_product),
        cmocka_unit_test(test_target_tiny_ratio_gives_one),
        cmocka_unit_test(test_target_of_empty_is_zero),
        cmocka_unit_test(test_lru_evicts_request_suffix_first),
        cmocka_unit_test(test_lru_older_requests_are_evicted_first),
        cmocka_unit_test(test_lru_recreation_moves_key_to_end),
        cmocka_unit_test(test_lru_touch_moves_to_end_in_reverse_order),
        cmocka_unit_test(test_lru_touch_ignores_untracked_keys),
        cmocka_unit_test(test_lru_filter_skips_keys),
        cmocka_unit_test(test_lru_ratio_selects_that_fraction_of_tracked_keys),
        cmocka_unit_test(test_lru_get_actions_does_not_remove_keys),
        cmocka_unit_test(test_lru_get_actions_appends_to_out),
        cmocka_unit_test(test_lru_on_removed_forgets_key),
        cmocka_unit_test(test_isolated_keeps_one_lru_per_salt),
        cmocka_unit_test(test_isolated_requires_a_salt),
        cmocka_unit_test(test_isolated_target_comes_from_bucket_size),
        cmocka_unit_test(test_isolated_unknown_salt_gives_no_victims),
        cmocka_unit_test(test_isolated_salt_is_matched_by_content),
        cmocka_unit_test(test_isolated_touch_and_filter_stay_in_bucket),
        cmocka_unit_test(test_isolated_empty_buckets_are_dropped),
        cmocka_unit_test(test_isolated_many_salts_grow_the_table),
        cmocka_unit_test(test_arc_second_create_promotes_t1_to_t2),
        cmocka_unit_test(test_arc_touch_promotes_t1_to_t2),
        cmocka_unit_test(test_arc_created_keys_are_processed_in_reverse_order),
        cmocka_unit_test(test_arc_get_actions_does_not_remove_keys),
        cmocka_unit_test(test_arc_filter_skips_keys),
        cmocka_unit_test(test_arc_pending_victim_retires_to_ghost),
        cmocka_unit_test(test_arc_removal_of_non_pending_key_forgets_it),
        cmocka_unit_test(test_arc_b1_ghost_hit_grows_t1_target),
        cmocka_unit_test(test_arc_b2_ghost_hit_shrinks_t1_target),
        cmocka_unit_test(test_arc_victims_split_by_virtual_t1_size),
        cmocka_unit_test(test_arc_tracked_excludes_ghosts),
        cmocka_unit_test(test_s3fifo_small_is_evicted_before_main),
        cmocka_unit_test(test_s3fifo_touch_promotes_small_to_main),
        cmocka_unit_test(test_s3fifo_touch_refreshes_inside_main),
        cmocka_unit_test(test_s3fifo_created_keys_enter_small_in_reverse_order),
        cmocka_unit_test(test_s3fifo_ghost_readmission_goes_straight_to_main),
        cmocka_unit_test(test_s3fifo_ghost_set_is_bounded_by_peak_resident_count),
        cmocka_unit_test(test_s3fifo_filter_skips_keys_across_queues),
        cmocka_unit_test(test_s3fifo_get_actions_does_not_remove_keys),
        cmocka_unit_test(test_noop_never_evicts),
        cmocka_unit_test(test_lru_is_safe_under_concurrent_ops),
        cmocka_unit_test(test_isolated_lru_is_safe_under_concurrent_ops),
        cmocka_unit_test(test_arc_is_safe_under_concurrent_ops),
        cmocka_unit_test(test_s3fifo_is_safe_under_concurrent_ops),
        cmocka_unit_test(test_noop_is_safe_under_concurrent_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
