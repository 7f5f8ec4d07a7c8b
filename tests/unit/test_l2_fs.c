/*
 * test_l2_fs.c -- the "fs" L2 adapter: on-disk names and bytes, lookup
 * locks against deletion, loads, usage accounting, recovery and shutdown.
 *
 * Each test gets a fresh directory under /tmp, removed afterwards.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "helpers/file_test_util.h"
#include "helpers/l2_test_util.h"
#include "helpers/thread_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"

typedef struct fixture {
    char dir[64];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || !l2_tmpdir(f->dir))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    l2_rmtree(f->dir);
    free(f);
    return 0;
}

/* An fs adapter over the fixture's directory; extra is more JSON members or "". */
static lmc_l2_adapter *fs_adapter(const fixture *f, const char *extra)
{
    lmc_error err;
    lmc_error_clear(&err);
    lmc_l2_adapter *a = l2_adapter_from(&err, "{\"type\": \"fs\", \"base_path\": \"%s\"%s%s}",
                                        f->dir, extra[0] != '\0' ? ", " : "", extra);
    if (a == NULL)
        print_error("create failed: %s\n", err.msg);
    return a;
}

static void path_of(const fixture *f, const lmc_object_key *key, char *buf, size_t len)
{
    char name[512];
    lmc_l2_fs_key_name(key, name, sizeof(name));
    int w = snprintf(buf, len, "%s/%s", f->dir, name);
    assert_true(w > 0 && (size_t)w < len);
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    }
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------ */
/* Names                                                                */
/* ------------------------------------------------------------------ */

static void test_fs_key_name_follows_the_spec(void **state)
{
    (void)state;
    char name[512];
    lmc_object_key k = l2_key("org/model", 0xdeadbeef, lmc_compute_kv_rank(2, 1, 2, 1), 3, "u1");
    lmc_l2_fs_key_name(&k, name, sizeof(name));
    assert_string_equal(name, "org-SEP-model@0x02010201@3@deadbeef@u1.data");
    k = l2_key("llama", 0x0000002a, 0, 0, NULL);
    lmc_l2_fs_key_name(&k, name, sizeof(name));
    assert_string_equal(name, "llama@0x00000000@0@0000002a.data");
    k = l2_key("a/b/c", 1, 0x1ff, 255, "");
    lmc_l2_fs_key_name(&k, name, sizeof(name));
    assert_string_equal(name, "a-SEP-b-SEP-c@0x000001ff@ff@00000001.data");
    /* the length it wanted is returned when the buffer is short */
    assert_int_equal(lmc_l2_fs_key_name(&k, name, 8),
                     strlen("a-SEP-b-SEP-c@0x000001ff@ff@00000001.data"));
    assert_int_equal(strlen(name), 7);
}

static void test_fs_parse_name_reverses_key_name(void **state)
{
    (void)state;
    lmc_object_key keys[] = {
        l2_key("org/model", 0xdeadbeef, lmc_compute_kv_rank(2, 1, 2, 1), 3, "u1"),
        l2_key("m", 0, 0, 0, NULL),
        l2_key("x/y", 7, -1, 17, "salt_with-dash"),
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char name[512];
        lmc_l2_fs_key_name(&keys[i], name, sizeof(name));
        lmc_object_key back;
        assert_true(lmc_l2_fs_parse_name(name, &back));
        assert_true(lmc_object_key_equal(&back, &keys[i]));
    }
    static const char *const bad[] = {
        "m@0x00000000@0@00.tmp",      /* not .data */
        "m@0x00000000@00.data",       /* 3 parts */
        "m@0x00000000@0@00@s@t.data", /* 6 parts */
        "m@00000000@0@00.data",       /* no 0x */
        "m@0x0000000g@0@00.data",     /* not hex */
        "m@0x00000000@0@0.data",      /* odd hash length */
        "m@0x00000000@0@AB.data",     /* not the canonical (lowercase) spelling */
        "m@0x000000001@0@00.data",    /* not the canonical rank width */
        "m@0x00000000@00@00.data",    /* not the canonical group */
        "m@0x00000000@0@00@.data",    /* empty salt */
        ".data",
        "",
        "plain.txt",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lmc_object_key k;
        if (lmc_l2_fs_parse_name(bad[i], &k))
            print_error("parsed '%s'\n", bad[i]);
        assert_false(lmc_l2_fs_parse_name(bad[i], &k));
    }
}

/* ------------------------------------------------------------------ */
/* Store                                                                */
/* ------------------------------------------------------------------ */

static void test_fs_store_writes_raw_bytes_under_the_key_name(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key keys[2] = {l2_key("org/model", 0xdeadbeef, 0x02010201, 3, "u1"),
                              l2_key("plain", 5, 0, 0, NULL)};
    uint8_t b0[1000], b1[3];
    l2_fill(b0, sizeof(b0), 1);
    l2_fill(b1, sizeof(b1), 9);
    lmc_memory_obj objs[2] = {{b0, sizeof(b0), 4096, 0}, {b1, sizeof(b1), 4096, 4096}};
    assert_int_equal(l2_store_sync(a, keys, objs, 2), 1003);

    char path[256];
    snprintf(path, sizeof(path), "%s/org-SEP-model@0x02010201@3@deadbeef@u1.data", f->dir);
    assert_int_equal(l2_file_size(path), 1000); /* obj.size bytes, not the slot */
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    uint8_t back[1001];
    assert_int_equal(fread(back, 1, sizeof(back), fp), 1000);
    fclose(fp);
    assert_memory_equal(back, b0, 1000);
    snprintf(path, sizeof(path), "%s/plain@0x00000000@0@00000005.data", f->dir);
    assert_int_equal(l2_file_size(path), 3);
    assert_int_equal(count_entries(f->dir), 2); /* no tmp file left behind */
    lmc_l2_adapter_destroy(a);
    assert_int_equal(l2_file_size(path), 3); /* files outlive the adapter */
}

static void test_fs_store_of_existing_key_writes_zero_bytes_and_succeeds(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[64];
    l2_fill(b, sizeof(b), 3);
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 64);
    int64_t again = l2_store_sync(a, &k, &obj, 1);
    assert_int_equal(again, 0);
    assert_true(lmc_l2_store_ok(again)); /* 0 is success, not failure */
    assert_false(lmc_l2_store_ok(-1));
    lmc_l2_adapter_destroy(a);
}

static void test_fs_store_error_fails_task_but_writes_other_keys(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    char longname[400];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    lmc_object_key keys[3] = {l2_key("m", 1, 0, 0, NULL), l2_key(longname, 2, 0, 0, NULL),
                              l2_key("m", 3, 0, 0, NULL)};
    uint8_t b[16] = {0};
    lmc_memory_obj objs[3] = {{b, 16, 16, 0}, {b, 16, 16, 0}, {b, 16, 16, 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 3), -1);
    char path[512];
    path_of(f, &keys[0], path, sizeof(path));
    assert_int_equal(l2_file_size(path), 16);
    path_of(f, &keys[2], path, sizeof(path));
    assert_int_equal(l2_file_size(path), 16);
    assert_int_equal(count_entries(f->dir), 2);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_store_over_a_directory_fails(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    char path[256];
    path_of(f, &k, path, sizeof(path));
    assert_int_equal(mkdir(path, 0755), 0);
    uint8_t b[16] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), -1); /* not mistaken for a present key */
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    char bits[2];
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "0");
    lmc_l2_adapter_destroy(a);
}

static void test_fs_relative_tmp_dir_is_created_and_left_empty(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"relative_tmp_dir\": \"work/tmp/\"");
    assert_non_null(a);
    char tmp[128];
    snprintf(tmp, sizeof(tmp), "%s/work/tmp", f->dir);
    struct stat st;
    assert_int_equal(stat(tmp, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[100] = {7};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 100);
    assert_int_equal(count_entries(tmp), 0);
    char path[256];
    path_of(f, &k, path, sizeof(path));
    assert_int_equal(l2_file_size(path), 100);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_base_path_is_created_if_missing(void **state)
{
    fixture *f = *state;
    char deep[128];
    snprintf(deep, sizeof(deep), "%s/a/b/c/", f->dir);
    lmc_l2_adapter *a = l2_adapter_from(NULL, "{\"type\": \"fs\", \"base_path\": \"%s\"}", deep);
    assert_non_null(a);
    struct stat st;
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Lookup, lock, delete                                                 */
/* ------------------------------------------------------------------ */

static void test_fs_lookup_sets_a_bit_per_existing_file(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key keys[4] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL),
                              l2_key("m", 3, 0, 0, NULL), l2_key("m", 1, 0, 0, "s")};
    uint8_t b[8] = {0};
    lmc_memory_obj objs[2] = {{b, 8, 8, 0}, {b, 8, 8, 0}};
    lmc_object_key stored[2] = {keys[0], keys[2]};
    assert_int_equal(l2_store_sync(a, stored, objs, 2), 16);
    char bits[8];
    l2_lookup_sync(a, keys, 4, bits);
    assert_string_equal(bits, "1010");        /* the salt is part of the key */
    lmc_l2_adapter_submit_unlock(a, keys, 4); /* unlocking misses is a no-op */
    lmc_l2_adapter_destroy(a);
}

static void test_fs_lookup_lock_blocks_delete_until_unlock(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[32] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 32);
    char bits[4], path[256];
    path_of(f, &k, path, sizeof(path));
    l2_lookup_sync(a, &k, 1, bits);
    l2_lookup_sync(a, &k, 1, bits); /* locked twice */
    assert_string_equal(bits, "1");
    lmc_l2_adapter_delete(a, &k, 1);
    assert_int_equal(l2_file_size(path), 32);
    lmc_l2_adapter_submit_unlock(a, &k, 1);
    lmc_l2_adapter_delete(a, &k, 1);
    assert_int_equal(l2_file_size(path), 32); /* one lock is still held */
    lmc_l2_adapter_submit_unlock(a, &k, 1);
    lmc_l2_adapter_delete(a, &k, 1);
    assert_int_equal(l2_file_size(path), -1);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_delete_without_capacity_unlinks_and_reports_size(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    assert_false(lmc_l2_adapter_supports_global_eviction(a));
    lmc_l2_usage u = lmc_l2_adapter_get_usage(a);
    assert_true(lmc_l2_usage_fraction(&u) == -1.0);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[48] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 48);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 48);
    lmc_l2_adapter_delete(a, &k, 1);
    char path[256];
    path_of(f, &k, path, sizeof(path));
    assert_int_equal(l2_file_size(path), -1);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    lmc_l2_adapter_destroy(a);
}

typedef struct deletions {
    size_t n;
    uint64_t bytes;
} deletions;

static void count_deleted(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    (void)keys;
    deletions *d = ud;
    d->n += n;
    for (size_t i = 0; i < n; i++)
        d->bytes += sizes[i];
}

static void test_fs_delete_with_capacity_skips_untracked_keys(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1, \"recover_on_start\": false");
    assert_non_null(a);
    deletions d = {0, 0};
    lmc_l2_listener l = {NULL, NULL, count_deleted, &d};
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l), LMC_OK);
    /* a file the adapter never accounted (not stored by it, not recovered) */
    lmc_object_key k = l2_key("m", 9, 0, 0, NULL);
    char path[256];
    path_of(f, &k, path, sizeof(path));
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("abc", fp);
    fclose(fp);
    lmc_l2_adapter_delete(a, &k, 1);
    assert_int_equal(l2_file_size(path), 3);
    assert_int_equal(d.n, 0);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_delete_of_vanished_file_counts_as_deleted(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1");
    assert_non_null(a);
    deletions d = {0, 0};
    lmc_l2_listener l = {NULL, NULL, count_deleted, &d};
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l), LMC_OK);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[10] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 10);
    char path[256];
    path_of(f, &k, path, sizeof(path));
    assert_int_equal(unlink(path), 0);
    lmc_l2_adapter_delete(a, &k, 1);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.bytes, 10);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Load                                                                 */
/* ------------------------------------------------------------------ */

static void test_fs_load_fills_buffers_and_misses_what_is_absent(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key keys[3] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL),
                              l2_key("m", 3, 0, 0, NULL)};
    uint8_t src0[300], src2[77];
    l2_fill(src0, sizeof(src0), 11);
    l2_fill(src2, sizeof(src2), 22);
    lmc_memory_obj in[2] = {{src0, 300, 300, 0}, {src2, 77, 77, 0}};
    lmc_object_key stored[2] = {keys[0], keys[2]};
    assert_int_equal(l2_store_sync(a, stored, in, 2), 377);

    uint8_t dst0[300] = {0}, dst1[50] = {0}, dst2[77] = {0};
    lmc_memory_obj out[3] = {{dst0, 300, 300, 0}, {dst1, 50, 50, 0}, {dst2, 77, 77, 0}};
    char bits[4];
    l2_load_sync(a, keys, out, 3, bits);
    assert_string_equal(bits, "101");
    assert_memory_equal(dst0, src0, sizeof(src0));
    assert_memory_equal(dst2, src2, sizeof(src2));
    lmc_l2_adapter_destroy(a);
}

static void test_fs_load_of_short_file_is_a_miss(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t src[200];
    l2_fill(src, sizeof(src), 5);
    lmc_memory_obj obj = {src, sizeof(src), sizeof(src), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 200);
    char path[256], bits[2];
    path_of(f, &k, path, sizeof(path));
    assert_int_equal(truncate(path, 150), 0);
    uint8_t dst[200];
    lmc_memory_obj out = {dst, sizeof(dst), sizeof(dst), 0};
    l2_load_sync(a, &k, &out, 1, bits);
    assert_string_equal(bits, "0");
    /* a buffer no larger than the file is filled: a hit */
    out.size = 150;
    l2_load_sync(a, &k, &out, 1, bits);
    assert_string_equal(bits, "1");
    assert_memory_equal(dst, src, 150);
    lmc_l2_adapter_destroy(a);
}

static size_t g_accessed;

static void count_accessed(void *ud, const lmc_object_key *keys, size_t n)
{
    (void)ud;
    (void)keys;
    g_accessed += n;
}

static void test_fs_load_reports_hits_as_accessed(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1");
    assert_non_null(a);
    g_accessed = 0;
    lmc_l2_listener l = {NULL, count_accessed, NULL, NULL};
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l), LMC_OK);
    lmc_object_key keys[2] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL)};
    uint8_t b[8] = {1};
    lmc_memory_obj objs[2] = {{b, 8, 8, 0}, {b, 8, 8, 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 1), 8);
    char bits[3];
    l2_load_sync(a, keys, objs, 2, bits);
    assert_string_equal(bits, "10");
    assert_int_equal(g_accessed, 1);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_odirect_and_read_ahead_round_trip(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"use_odirect\": true, \"read_ahead_size\": 1000");
    assert_non_null(a);
    uint8_t *aligned = NULL;
    assert_int_equal(posix_memalign((void **)&aligned, 4096, 3 * 8192), 0);
    l2_fill(aligned, 8192, 42);
    uint8_t unaligned_src[5000];
    l2_fill(unaligned_src, sizeof(unaligned_src), 43);
    lmc_object_key keys[2] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL)};
    /* one object O_DIRECT-eligible, one not (it falls back to buffered I/O) */
    lmc_memory_obj in[2] = {{aligned, 8192, 8192, 0}, {unaligned_src, 5000, 5000, 0}};
    assert_int_equal(l2_store_sync(a, keys, in, 2), 13192);
    uint8_t *dst = aligned + 8192;
    memset(dst, 0, 2 * 8192);
    lmc_memory_obj out[2] = {{dst, 8192, 8192, 0}, {dst + 8192 + 1, 5000, 5000, 0}};
    char bits[3];
    l2_load_sync(a, keys, out, 2, bits);
    assert_string_equal(bits, "11");
    assert_memory_equal(dst, aligned, 8192);
    assert_memory_equal(dst + 8193, unaligned_src, 5000);
    lmc_json *s = lmc_l2_adapter_report_status(a);
    assert_true(lmc_json_get_bool(lmc_json_object_get(s, "use_odirect")));
    lmc_json_free(s);
    free(aligned);
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Usage and recovery                                                   */
/* ------------------------------------------------------------------ */

static void test_fs_usage_is_accounted_with_capacity(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 0.5");
    assert_non_null(a);
    assert_true(lmc_l2_adapter_supports_global_eviction(a));
    lmc_object_key keys[3] = {l2_key("m", 1, 0, 0, "alice"), l2_key("m", 2, 0, 0, "alice"),
                              l2_key("m", 3, 0, 0, NULL)};
    uint8_t b[4096] = {0};
    lmc_memory_obj objs[3] = {{b, 1000, 4096, 0}, {b, 2000, 4096, 0}, {b, 4096, 4096, 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 3), 7096);
    lmc_l2_usage u = lmc_l2_adapter_get_usage(a);
    assert_int_equal(u.bytes_used, 7096);
    assert_int_equal(u.capacity_bytes, 1u << 29);
    assert_true(lmc_l2_usage_fraction(&u) == 7096.0 / (double)(1u << 29));
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "alice"), 3000);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, ""), 4096);
    /* storing again adds nothing */
    assert_int_equal(l2_store_sync(a, keys, objs, 3), 0);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 7096);
    lmc_l2_adapter_delete(a, keys, 2);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "alice"), 0);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 4096);
    lmc_json *s = lmc_l2_adapter_report_status(a);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(s, "files_tracked")), 1);
    lmc_json_free(s);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_store_adopts_an_untracked_existing_file(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1, \"recover_on_start\": false");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    char path[256];
    path_of(f, &k, path, sizeof(path));
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("0123456789", fp);
    fclose(fp);
    uint8_t b[64] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 0);           /* nothing written... */
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 10); /* ...but now accounted */
    lmc_l2_adapter_delete(a, &k, 1);
    assert_int_equal(l2_file_size(path), -1);
    lmc_l2_adapter_destroy(a);
}

typedef struct replayed {
    size_t n;
    uint64_t bytes;
    bool saw_salted;
} replayed;

static void on_replayed(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    replayed *r = ud;
    r->n += n;
    for (size_t i = 0; i < n; i++) {
        r->bytes += sizes[i];
        if (strcmp(keys[i].cache_salt, "bob") == 0 && strcmp(keys[i].model_name, "org/m") == 0)
            r->saw_salted = true;
    }
}

static void test_fs_recovery_restores_usage_and_replays_to_late_listeners(void **state)
{
    fixture *f = *state;
    const char *cfg = "\"max_capacity_gb\": 1, \"relative_tmp_dir\": \"tmp\"";
    lmc_l2_adapter *a = fs_adapter(f, cfg);
    assert_non_null(a);
    lmc_object_key keys[3] = {l2_key("org/m", 1, 5, 2, "bob"), l2_key("m", 2, 0, 0, NULL),
                              l2_key("m", 3, 0, 0, NULL)};
    uint8_t b[500] = {0};
    lmc_memory_obj objs[3] = {{b, 100, 100, 0}, {b, 200, 200, 0}, {b, 500, 500, 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 3), 800);
    lmc_l2_adapter_destroy(a);

    /* Junk that recovery must ignore: unparsable names, a symlink, a directory, a .tmp. */
    char p[256], target[256];
    snprintf(p, sizeof(p), "%s/notes.txt", f->dir);
    FILE *fp = fopen(p, "w");
    fputs("hello", fp);
    fclose(fp);
    snprintf(p, sizeof(p), "%s/m@0x00000000@0@00000002.tmp", f->dir);
    fp = fopen(p, "w");
    fputs("partial", fp);
    fclose(fp);
    path_of(f, &keys[1], target, sizeof(target));
    lmc_object_key linked = l2_key("m", 4, 0, 0, NULL);
    path_of(f, &linked, p, sizeof(p));
    assert_int_equal(symlink(target, p), 0);
    lmc_object_key dirkey = l2_key("m", 5, 0, 0, NULL);
    path_of(f, &dirkey, p, sizeof(p));
    assert_int_equal(mkdir(p, 0755), 0);

    a = fs_adapter(f, cfg);
    assert_non_null(a);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 800);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "bob"), 100);
    /* an eviction listener registered after create learns the recovered keys */
    lmc_l2_adapter_delete(a, &keys[2], 1);
    replayed r = {0, 0, false};
    lmc_l2_listener l = {on_replayed, NULL, NULL, &r};
    assert_int_equal(lmc_l2_adapter_add_listener(a, &l), LMC_OK);
    lmc_l2_adapter_replay_recovered(a, &l);
    assert_int_equal(r.n, 2); /* the deleted one is not replayed */
    assert_int_equal(r.bytes, 300);
    assert_true(r.saw_salted);
    /* recovered keys are tracked: lookup hits, delete works */
    char bits[3];
    l2_lookup_sync(a, keys, 2, bits);
    assert_string_equal(bits, "11");
    lmc_l2_adapter_submit_unlock(a, keys, 2);
    lmc_l2_adapter_delete(a, keys, 2);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_recovery_can_be_turned_off(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "\"max_capacity_gb\": 1");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[100] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 100);
    lmc_l2_adapter_destroy(a);
    a = fs_adapter(f, "\"max_capacity_gb\": 1, \"recover_on_start\": false");
    assert_non_null(a);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    char bits[2];
    l2_lookup_sync(a, &k, 1, bits); /* the file is still there */
    assert_string_equal(bits, "1");
    lmc_l2_adapter_submit_unlock(a, &k, 1);
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Worker and shutdown                                                  */
/* ------------------------------------------------------------------ */

static void test_fs_lookups_overtake_queued_stores(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    enum { N = 10, SIZE = 8 << 20 };
    uint8_t *b = calloc(1, SIZE);
    assert_non_null(b);
    for (uint32_t i = 0; i < N; i++) {
        lmc_object_key k = l2_key("big", i, 0, 0, NULL);
        lmc_memory_obj obj = {b, SIZE, SIZE, 0};
        uint64_t id;
        assert_int_equal(lmc_l2_adapter_submit_store(a, &k, &obj, 1, &id), LMC_OK);
    }
    lmc_object_key k = l2_key("other", 1, 0, 0, NULL);
    uint64_t lid;
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &k, 1, &lid), LMC_OK);
    lmc_bitmap bm;
    assert_true(l2_wait_lookup(a, lid, &bm));
    lmc_bitmap_free(&bm);
    lmc_l2_store_result *r = NULL;
    size_t done = lmc_l2_adapter_pop_completed_stores(a, &r);
    free(r);
    assert_true(done < N);
    lmc_l2_store_result all[N];
    assert_true(l2_wait_stores(a, N - done, all));
    free(b);
    lmc_l2_adapter_destroy(a);
}

static void test_fs_destroy_completes_every_pending_task_once(void **state)
{
    fixture *f = *state;
    /* Drive the fs ops directly, reporting into a mock adapter's base, so the
     * results can still be read after the fs state is gone. */
    lmc_l2_adapter *sink =
        l2_adapter_from(NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}");
    assert_non_null(sink);
    char text[256];
    snprintf(text, sizeof(text), "{\"type\": \"fs\", \"base_path\": \"%s\"}", f->dir);
    lmc_json *cfg = l2_json(text);
    void *impl = NULL;
    assert_int_equal(lmc_l2_fs_ops.create(sink, cfg, &impl, NULL), LMC_OK);
    lmc_json_free(cfg);
    enum { N = 20, SIZE = 4 << 20 };
    uint8_t *b = calloc(1, SIZE);
    assert_non_null(b);
    for (uint32_t i = 0; i < N; i++) {
        lmc_object_key k = l2_key("big", i, 0, 0, NULL);
        lmc_memory_obj obj = {b, SIZE, SIZE, 0};
        assert_int_equal(lmc_l2_fs_ops.submit(impl, LMC_L2_TASK_STORE, 100 + i, &k, &obj, 1),
                         LMC_OK);
    }
    lmc_object_key k = l2_key("x", 1, 0, 0, NULL);
    assert_int_equal(lmc_l2_fs_ops.submit(impl, LMC_L2_TASK_LOOKUP, 500, &k, NULL, 1), LMC_OK);
    lmc_l2_fs_ops.destroy(impl);
    free(b);

    lmc_l2_store_result *r = NULL;
    size_t n = lmc_l2_adapter_pop_completed_stores(sink, &r);
    assert_int_equal(n, N);
    bool seen[N] = {false};
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(r[i].task_id >= 100 && r[i].task_id < 100 + N);
        assert_false(seen[r[i].task_id - 100]);
        seen[r[i].task_id - 100] = true;
        failed += r[i].result == -1;
    }
    free(r);
    assert_true(failed >= 1);
    lmc_bitmap bm;
    assert_true(lmc_l2_adapter_take_lookup_result(sink, 500, &bm));
    lmc_bitmap_free(&bm);
    lmc_l2_adapter_destroy(sink);
}

static void test_fs_worker_thread_is_named_and_reported(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    assert_true(thread_test_settle("l2-fs-", NULL, 1) >= 1);
    lmc_json *s = lmc_l2_adapter_report_status(a);
    assert_non_null(s);
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(s, "type"), NULL), "fs");
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(s, "base_path"), NULL), f->dir);
    assert_true(lmc_json_get_bool(lmc_json_object_get(s, "worker_alive")));
    assert_true(lmc_json_get_bool(lmc_json_object_get(s, "is_healthy")));
    assert_false(lmc_json_get_bool(lmc_json_object_get(s, "use_odirect")));
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(s, "files_tracked")), 0);
    assert_true(lmc_json_get_number(lmc_json_object_get(s, "usage_fraction")) == -1.0);
    lmc_json_free(s);
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Files an attacker could plant                                         */
/* ------------------------------------------------------------------ */

static void test_fs_names_of_a_slash_and_a_literal_sep_differ(void **state)
{
    (void)state;
    /* LMCache writes both as "tenantA-SEP-llama": one model would be served the other's data. */
    lmc_object_key a = l2_key("tenantA/llama", 1, 0, 0, NULL);
    lmc_object_key b = l2_key("tenantA-SEP-llama", 1, 0, 0, NULL);
    char na[512], nb[512];
    lmc_l2_fs_key_name(&a, na, sizeof(na));
    lmc_l2_fs_key_name(&b, nb, sizeof(nb));
    assert_string_equal(na, "tenantA-SEP-llama@0x00000000@0@00000001.data"); /* LMCache's */
    assert_string_equal(nb, "tenantA%2DSEP-llama@0x00000000@0@00000001.data");
    /* Other names LMCache's spelling cannot tell apart, each with a name of its own. */
    static const char *const models[] = {"a-SEP/x",   "a/SEP-x", "50%", "p%2Fq",    "p/q",
                                         "tab\there", "-SEP-",   "/",   "a--SEP--b"};
    char names[9][512];
    for (size_t i = 0; i < 9; i++) {
        lmc_object_key k = l2_key(models[i], 1, 0, 0, NULL);
        lmc_l2_fs_key_name(&k, names[i], sizeof(names[i]));
        lmc_object_key back;
        if (!lmc_l2_fs_parse_name(names[i], &back))
            fail_msg("'%s' (model '%s') does not parse", names[i], models[i]);
        assert_true(lmc_object_key_equal(&back, &k));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(names[i], names[j]);
        assert_null(strchr(names[i], '\t'));
    }
    /* A percent escape that is not the canonical one is not a file of ours. */
    lmc_object_key k;
    assert_false(lmc_l2_fs_parse_name("p%2fq@0x00000000@0@00000001.data", &k));
    assert_false(lmc_l2_fs_parse_name("p%2@0x00000000@0@00000001.data", &k));
    assert_false(lmc_l2_fs_parse_name("p%00q@0x00000000@0@00000001.data", &k));
}

static void test_fs_keeps_the_data_of_a_slash_and_a_literal_sep_apart(void **state)
{
    fixture *f = *state;
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key keys[2] = {l2_key("tenantA/llama", 1, 0, 0, NULL),
                              l2_key("tenantA-SEP-llama", 1, 0, 0, NULL)};
    uint8_t b0[64];
    l2_fill(b0, sizeof(b0), 1);
    lmc_memory_obj obj = {b0, sizeof(b0), sizeof(b0), 0};
    assert_int_equal(l2_store_sync(a, &keys[0], &obj, 1), 64);
    char bits[3];
    l2_lookup_sync(a, keys, 2, bits);
    assert_string_equal(bits, "10"); /* the other tenant finds nothing */
    lmc_l2_adapter_destroy(a);
}

static void test_fs_never_follows_a_symlink_inside_base_path(void **state)
{
    fixture *f = *state;
    char outside[128], victim[160];
    assert_true(l2_tmpdir(outside));
    snprintf(victim, sizeof(victim), "%s/victim", outside);
    file_test_plant_victim(victim);
    lmc_l2_adapter *a = fs_adapter(f, "");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL), t = l2_key("m", 2, 0, 0, NULL);
    char path[512], tmp[512];
    path_of(f, &k, path, sizeof(path));
    assert_int_equal(symlink(victim, path), 0);
    /* Planted under a key's name: not a hit, nothing read through it. */
    char bits[2];
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "0");
    uint8_t b[8] = {0};
    lmc_memory_obj obj = {b, 8, 8, 0};
    l2_load_sync(a, &k, &obj, 1, bits);
    assert_string_equal(bits, "0");
    /* A store replaces the link itself. */
    uint8_t data[16];
    l2_fill(data, sizeof(data), 5);
    lmc_memory_obj o16 = {data, 16, 16, 0};
    assert_int_equal(l2_store_sync(a, &k, &o16, 1), 16);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    /* Planted under a temporary name: the store fails rather than write through it. */
    path_of(f, &t, tmp, sizeof(tmp));
    snprintf(tmp + strlen(tmp) - 5, 6, ".tmp");
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(l2_store_sync(a, &t, &o16, 1), -1);
    file_test_assert_victim(victim);
    /* A FIFO under a key's name does not park the worker. */
    lmc_object_key q = l2_key("m", 3, 0, 0, NULL);
    path_of(f, &q, path, sizeof(path));
    assert_int_equal(mkfifo(path, 0600), 0);
    l2_load_sync(a, &q, &obj, 1, bits);
    assert_string_equal(bits, "0");
    lmc_l2_adapter_destroy(a);
    l2_rmtree(outside);
}

static void test_fs_refuses_a_base_path_others_can_write_or_own(void **state)
{
    fixture *f = *state;
    lmc_error err;
    assert_int_equal(chmod(f->dir, 0777), 0);
    lmc_l2_adapter *a = l2_adapter_from(&err, "{\"type\": \"fs\", \"base_path\": \"%s\"}", f->dir);
    assert_null(a);
    assert_non_null(strstr(err.msg, "is writable by group or others (mode 777)"));
    a = l2_adapter_from(&err,
                        "{\"type\": \"fs\", \"base_path\": \"%s\", "
                        "\"allow_shared_base_path\": true}",
                        f->dir);
    assert_non_null(a);
    lmc_l2_adapter_destroy(a);
    assert_int_equal(chmod(f->dir, 0700), 0);
    if (geteuid() == 0) { /* only root can give a directory away */
        assert_int_equal(chown(f->dir, 12345, (gid_t)-1), 0);
        a = l2_adapter_from(&err, "{\"type\": \"fs\", \"base_path\": \"%s\"}", f->dir);
        assert_null(a);
        assert_non_null(strstr(err.msg, "belongs to uid 12345, not this user"));
        assert_int_equal(chown(f->dir, 0, (gid_t)-1), 0);
    }
    /* A relative_tmp_dir that is a link out of base_path. */
    char outside[128], link[256];
    assert_true(l2_tmpdir(outside));
    snprintf(link, sizeof(link), "%s/tmp", f->dir);
    assert_int_equal(symlink(outside, link), 0);
    a = l2_adapter_from(&err,
                        "{\"type\": \"fs\", \"base_path\": \"%s\", "
                        "\"relative_tmp_dir\": \"tmp\"}",
                        f->dir);
    assert_null(a);
    assert_non_null(strstr(err.msg, "a symlink is not followed"));
    l2_rmtree(outside);
}

/* ------------------------------------------------------------------ */
/* What a base_path holds                                               */
/* ------------------------------------------------------------------ */

static void write_bytes(const char *path, size_t n)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    for (size_t i = 0; i < n; i++)
        fputc('x', fp);
    fclose(fp);
}

static void test_fs_scan_counts_and_clears_only_files_the_adapter_writes(void **state)
{
    fixture *f = *state;
    char path[1024], name[512];
    lmc_object_key k1 = l2_key("m/x", 1, 0, 0, NULL), k2 = l2_key("m/x", 2, 0, 0, "salt");
    path_of(f, &k1, path, sizeof(path));
    write_bytes(path, 100);
    path_of(f, &k2, path, sizeof(path));
    write_bytes(path, 50);
    /* A temporary file beside the data, left by a killed store. */
    lmc_l2_fs_key_name(&k2, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%.*s.tmp", f->dir, (int)(strlen(name) - 5), name);
    write_bytes(path, 7);
    /* Not ours: another file, a non-canonical name, a directory named like a key, a symlink. */
    snprintf(path, sizeof(path), "%s/notes.txt", f->dir);
    write_bytes(path, 3);
    snprintf(path, sizeof(path), "%s/x.data", f->dir);
    write_bytes(path, 3);
    lmc_object_key k3 = l2_key("m", 3, 0, 0, NULL);
    lmc_l2_fs_key_name(&k3, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    assert_int_equal(mkdir(path, 0755), 0);
    lmc_object_key k4 = l2_key("m", 4, 0, 0, NULL);
    lmc_l2_fs_key_name(&k4, name, sizeof(name));
    char link[1024];
    snprintf(link, sizeof(link), "%s/%s", f->dir, name);
    snprintf(path, sizeof(path), "%s/notes.txt", f->dir);
    assert_int_equal(symlink(path, link), 0);

    char json[256];
    snprintf(json, sizeof(json), "{\"type\": \"fs\", \"base_path\": \"%s\"}", f->dir);
    lmc_json *cfg = l2_json(json);
    lmc_l2_fs_objects o;
    assert_int_equal(lmc_l2_fs_scan(cfg, false, &o, NULL), LMC_OK);
    assert_int_equal(o.files, 3);
    assert_int_equal(o.bytes, 157);
    assert_int_equal(o.removed, 0);
    assert_int_equal(count_entries(f->dir), 7);
    assert_int_equal(lmc_l2_fs_scan(cfg, true, &o, NULL), LMC_OK);
    assert_int_equal(o.removed, 3);
    assert_int_equal(count_entries(f->dir), 4); /* notes.txt, x.data, the directory, the link */
    assert_int_equal(lmc_l2_fs_scan(cfg, false, &o, NULL), LMC_OK);
    assert_int_equal(o.files, 0);
    lmc_json_free(cfg);

    /* Another type, or a base_path that does not exist yet, holds nothing. */
    cfg = l2_json("{\"type\": \"mock\", \"max_size_gb\": 1}");
    assert_int_equal(lmc_l2_fs_scan(cfg, true, &o, NULL), LMC_OK);
    assert_int_equal(o.files, 0);
    lmc_json_free(cfg);
    snprintf(json, sizeof(json), "{\"type\": \"fs\", \"base_path\": \"%s/none\"}", f->dir);
    cfg = l2_json(json);
    assert_int_equal(lmc_l2_fs_scan(cfg, false, &o, NULL), LMC_OK);
    assert_int_equal(o.files, 0);
    lmc_json_free(cfg);
}

static void test_fs_scan_covers_the_relative_tmp_dir(void **state)
{
    fixture *f = *state;
    char path[1024], name[512];
    snprintf(path, sizeof(path), "%s/tmp", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    lmc_object_key k = l2_key("m", 9, 0, 0, NULL);
    lmc_l2_fs_key_name(&k, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/tmp/%s", f->dir, name);
    write_bytes(path, 10);
    char json[256];
    snprintf(json, sizeof(json),
             "{\"type\": \"fs\", \"base_path\": \"%s\", \"relative_tmp_dir\": \"tmp\"}", f->dir);
    lmc_json *cfg = l2_json(json);
    lmc_l2_fs_objects o;
    assert_int_equal(lmc_l2_fs_scan(cfg, true, &o, NULL), LMC_OK);
    assert_int_equal(o.files, 1);
    assert_int_equal(o.removed, 1);
    lmc_json_free(cfg);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fs_key_name_follows_the_spec),
        cmocka_unit_test_setup_teardown(
            test_fs_scan_counts_and_clears_only_files_the_adapter_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_scan_covers_the_relative_tmp_dir, setup, teardown),
        cmocka_unit_test(test_fs_parse_name_reverses_key_name),
        cmocka_unit_test(test_fs_names_of_a_slash_and_a_literal_sep_differ),
        cmocka_unit_test_setup_teardown(test_fs_keeps_the_data_of_a_slash_and_a_literal_sep_apart,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_never_follows_a_symlink_inside_base_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_refuses_a_base_path_others_can_write_or_own, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_store_writes_raw_bytes_under_the_key_name, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_fs_store_of_existing_key_writes_zero_bytes_and_succeeds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_store_error_fails_task_but_writes_other_keys, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_store_over_a_directory_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_relative_tmp_dir_is_created_and_left_empty, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_base_path_is_created_if_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_lookup_sets_a_bit_per_existing_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_lookup_lock_blocks_delete_until_unlock, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_delete_without_capacity_unlinks_and_reports_size,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_delete_with_capacity_skips_untracked_keys, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_delete_of_vanished_file_counts_as_deleted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_load_fills_buffers_and_misses_what_is_absent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_load_of_short_file_is_a_miss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_load_reports_hits_as_accessed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_odirect_and_read_ahead_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_usage_is_accounted_with_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_store_adopts_an_untracked_existing_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_fs_recovery_restores_usage_and_replays_to_late_listeners, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_recovery_can_be_turned_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_lookups_overtake_queued_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_destroy_completes_every_pending_task_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fs_worker_thread_is_named_and_reported, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
