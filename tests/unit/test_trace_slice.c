/*
 * test_trace_slice.c -- `trace slice` (trace/slice.h): the slice marker's
 * encoding, the header and records of a slice (times rebased, bodies
 * otherwise byte-identical), the filters, the source's markers, and the
 * output file's safety rules (never the input, temp file + rename, 0600).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/digest.h"
#include "helpers/trace_test_util.h"
#include "trace/codec.h"
#include "trace/format.h"
#include "trace/marker.h"
#include "trace/reader.h"
#include "trace/recorder.h"
#include "trace/slice.h"

#define QUAL(m) LMC_TRACE_QUALNAME_PREFIX m
#define CONFIG "{\"l1_size_gb\": 1}"
#define DIGEST "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* ---------------------------------------------------------------------- */
/* The marker                                                              */
/* ---------------------------------------------------------------------- */

static void test_the_marker_is_a_record_of_plain_msgpack_values(void **state)
{
    (void)state;
    const char *names[2] = {"finish_write", "reserve_write"};
    lmc_trace_slice_note n = {.source = "rec.lct",
                              .source_sha256 = DIGEST,
                              .from = 5.0,
                              .has_to = true,
                              .to = 7.5,
                              .qualnames = names,
                              .n_qualnames = 2,
                              .max_records = 100,
                              .records = 42,
                              .source_records = 1000,
                              .source_malformed = 1,
                              .source_dropped = 3};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_slice_encode_marker(&sb, 2.0, 1767225607.0, &n, NULL), LMC_OK);
    /* No codec wrapper anywhere: LMCache's reader and replay take it as an ordinary record. */
    assert_null(memmem(sb.data, sb.size, "__t__", 5));

    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    assert_int_equal(lmc_get_be32((const uint8_t *)sb.data), sb.size - 4);
    assert_int_equal(lmc_trace_decode_record(sb.data + 4, sb.size - 4, &a, &rec, NULL), LMC_OK);
    assert_string_equal(rec.qualname, LMC_TRACE_SLICE_QUALNAME);
    assert_non_null(lmc_trace_marker_find(rec.qualname, rec.qualname_len));
    assert_true(rec.t_mono == 2.0 && rec.t_wall == 1767225607.0);
    static const char *const order[] = {
        "source",           "source_sha256", "from",    "to",
        "qualnames",        "max_records",   "records", "source_records",
        "source_malformed", "source_dropped"};
    assert_int_equal(rec.nargs, 10);
    for (size_t i = 0; i < rec.nargs; i++)
        assert_string_equal(rec.args[i].name, order[i]);
    assert_int_equal(rec.args[0].value.kind, LMC_TV_STR);
    assert_memory_equal(rec.args[0].value.u.s.ptr, "rec.lct", 7);
    assert_memory_equal(rec.args[1].value.u.s.ptr, DIGEST, 64);
    assert_true(rec.args[2].value.kind == LMC_TV_FLOAT && rec.args[2].value.u.f == 5.0);
    assert_true(rec.args[3].value.kind == LMC_TV_FLOAT && rec.args[3].value.u.f == 7.5);
    assert_int_equal(rec.args[4].value.kind, LMC_TV_LIST);
    assert_int_equal(rec.args[4].value.u.list.n, 2);
    assert_memory_equal(rec.args[4].value.u.list.items[1].u.s.ptr, "reserve_write", 13);
    const int64_t ints[5] = {100, 42, 1000, 1, 3};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(rec.args[5 + i].value.kind, LMC_TV_INT);
        assert_int_equal(rec.args[5 + i].value.u.i, ints[i]);
    }
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

static void test_an_open_window_and_no_limit_are_none(void **state)
{
    (void)state;
    lmc_trace_slice_note n = {.source = "x", .source_sha256 = ""};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(lmc_trace_slice_encode_marker(&sb, 0.0, 0.0, &n, NULL), LMC_OK);
    lmc_arena a;
    lmc_arena_init(&a, 0);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_decode_record(sb.data + 4, sb.size - 4, &a, &rec, NULL), LMC_OK);
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "to")->value.kind, LMC_TV_NIL);
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "max_records")->value.kind,
                     LMC_TV_NIL);
    assert_int_equal(lmc_trace_args_find(rec.args, rec.nargs, "qualnames")->value.u.list.n, 0);
    /* The qualnames arg is an empty fixarray: 0x90 after its name. */
    assert_non_null(memmem(sb.data, sb.size, "\xa9qualnames\x90", 11));
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&sb);
}

/* ---------------------------------------------------------------------- */
/* Slices of a file                                                        */
/* ---------------------------------------------------------------------- */

typedef struct fixture {
    char dir[64];
    char in[128], out[128];
    msgpack_sbuffer sb;
    lmc_object_key key;
    lmc_layout_desc layout;
} fixture;

static void header(fixture *f, const char *level)
{
    lmc_trace_header h = {.magic = "LMCT",
                          .magic_len = 4,
                          .format_version = 1,
                          .level = (char *)level,
                          .trace_schema_version = 2,
                          .t_mono_start = 100.0,
                          .t_wall_start = 1767225600.0,
                          .sm_config_json = CONFIG,
                          .sm_config_digest = DIGEST};
    assert_int_equal(lmc_trace_encode_header(&f->sb, &h, NULL), LMC_OK);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    tt_tmpdir(f->dir);
    snprintf(f->in, sizeof(f->in), "%s/in.lct", f->dir);
    snprintf(f->out, sizeof(f->out), "%s/out.lct", f->dir);
    msgpack_sbuffer_init(&f->sb);
    f->key = tt_key("m", 0x01020304, 0x01000100, 0, "salt");
    int64_t dims[2] = {2, 8};
    assert_int_equal(lmc_layout_desc_make1(&f->layout, dims, 2, LMC_DTYPE_BFLOAT16, NULL), LMC_OK);
    tt_log_capture_start();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tt_log_capture_stop();
    msgpack_sbuffer_destroy(&f->sb);
    tt_rmtree(f->dir);
    free(f);
    return 0;
}

/* One record of the kind the recorder writes, at t. */
static void add(fixture *f, double t, const char *q)
{
    lmc_tv items[1] = {{.kind = LMC_TV_OBJECT_KEY, .u.key = &f->key}};
    lmc_trace_arg a[3] = {
        {"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, 1}}},
        {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &f->layout}},
        {"mode", 4, lmc_tv_str("new", 3)},
    };
    assert_int_equal(lmc_trace_encode_record(&f->sb, t, 1767225600.0 + t, q, strlen(q), a, 3, NULL),
                     LMC_OK);
}

static lmc_status slice(fixture *f, const lmc_trace_slice_options *opt, lmc_trace_slice_result *r,
                        lmc_error *err)
{
    tt_write_file(f->in, f->sb.data, f->sb.size);
    return lmc_trace_slice(f->in, f->out, opt, r, err);
}

/* The records of a file: t_mono and qualname of up to max of them; returns the count. */
static size_t read_all(const char *path, double *t, char (*q)[128], size_t max)
{
    lmc_trace_reader *rd;
    lmc_error err;
    if (lmc_trace_reader_open(path, &rd, &err) != LMC_OK)
        fail_msg("open: %s", err.msg);
    size_t n = 0;
    lmc_trace_record rec;
    while (lmc_trace_reader_next(rd, &rec) == LMC_OK) {
        if (n < max) {
            t[n] = rec.t_mono;
            snprintf(q[n], sizeof(q[n]), "%s", rec.qualname);
        }
        n++;
    }
    lmc_trace_reader_close(rd);
    return n;
}

static void test_a_slice_keeps_the_header_and_rebases_the_window(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    for (int i = 0; i < 10; i++)
        add(f, (double)i, i % 2 ? QUAL("finish_write") : QUAL("reserve_write"));
    lmc_trace_slice_options opt = {
        .filter = {.has_from = true, .from = 3.0, .has_to = true, .to = 6.0}};
    lmc_trace_slice_result r;
    lmc_error err;
    assert_int_equal(slice(f, &opt, &r, &err), LMC_OK);
    assert_int_equal(r.records, 3);
    assert_int_equal(r.source_records, 10);

    lmc_trace_reader *rd;
    assert_int_equal(lmc_trace_reader_open(f->out, &rd, &err), LMC_OK);
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    assert_true(h->t_mono_start == 103.0 && h->t_wall_start == 1767225603.0);
    assert_string_equal(h->sm_config_json, CONFIG);
    assert_string_equal(h->sm_config_digest, DIGEST);
    assert_string_equal(h->level, "storage");
    assert_int_equal(h->trace_schema_version, 2);
    lmc_trace_reader_close(rd);

    double t[8];
    char q[8][128];
    assert_int_equal(read_all(f->out, t, q, 8), 4);
    assert_true(t[0] == 0.0 && t[1] == 1.0 && t[2] == 2.0);
    assert_string_equal(q[0], QUAL("finish_write")); /* t = 3 */
    assert_string_equal(q[3], LMC_TRACE_SLICE_QUALNAME);
    assert_true(t[3] == 2.0); /* the marker sits at the last record: a replay waits no longer */

    /* The digest in the note is the source file's. */
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex(f->sb.data, f->sb.size, hex);
    assert_string_equal(r.source_sha256, hex);
}

static void test_record_bodies_differ_from_the_source_only_in_t_mono(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    add(f, 1.25, QUAL("reserve_write"));
    size_t rec_start = f->sb.size;
    add(f, 2.5, QUAL("finish_write"));
    size_t rec_end = f->sb.size;
    lmc_trace_slice_options opt = {.filter = {.has_from = true, .from = 2.0}};
    assert_int_equal(slice(f, &opt, NULL, NULL), LMC_OK);

    /* What the source record would be with t_mono 0.5: the output's first record. */
    msgpack_sbuffer want;
    msgpack_sbuffer_init(&want);
    lmc_tv items[1] = {{.kind = LMC_TV_OBJECT_KEY, .u.key = &f->key}};
    lmc_trace_arg a[3] = {
        {"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, 1}}},
        {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &f->layout}},
        {"mode", 4, lmc_tv_str("new", 3)},
    };
    const char *q = QUAL("finish_write");
    assert_int_equal(lmc_trace_encode_record(&want, 0.5, 1767225602.5, q, strlen(q), a, 3, NULL),
                     LMC_OK);
    FILE *fp = fopen(f->out, "rb");
    assert_non_null(fp);
    uint8_t buf[8192];
    size_t n = fread(buf, 1, sizeof(buf), fp);
    fclose(fp);
    size_t hdr = 4 + lmc_get_be32(buf);
    assert_true(n >= hdr + want.size);
    assert_memory_equal(buf + hdr, want.data, want.size);
    /* Same length as the source's frame: only the 8 bytes of t_mono changed. */
    assert_int_equal(want.size, rec_end - rec_start);
    size_t diff = 0;
    for (size_t i = 0; i < want.size; i++)
        diff += buf[hdr + i] != (uint8_t)f->sb.data[rec_start + i];
    assert_true(diff > 0 && diff <= 8);
    msgpack_sbuffer_destroy(&want);
}

static void test_a_whole_slice_copies_the_source_bytes_then_adds_the_marker(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    for (int i = 0; i < 5; i++)
        add(f, 0.1 * i, QUAL("reserve_write"));
    lmc_trace_slice_options opt = {0};
    assert_int_equal(slice(f, &opt, NULL, NULL), LMC_OK);
    FILE *fp = fopen(f->out, "rb");
    assert_non_null(fp);
    uint8_t *buf = malloc(f->sb.size + 4096);
    size_t n = fread(buf, 1, f->sb.size + 4096, fp);
    fclose(fp);
    assert_true(n > f->sb.size);
    assert_memory_equal(buf, f->sb.data, f->sb.size);
    free(buf);
}

static void test_qualnames_and_max_records_narrow_the_slice(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    for (int i = 0; i < 10; i++)
        add(f, (double)i, i % 2 ? QUAL("finish_write") : QUAL("reserve_write"));
    const char *names[1] = {"finish_write"};
    lmc_trace_slice_options opt = {.filter = {.qualnames = names, .n_qualnames = 1},
                                   .max_records = 3};
    lmc_trace_slice_result r;
    assert_int_equal(slice(f, &opt, &r, NULL), LMC_OK);
    assert_int_equal(r.records, 3);
    double t[8];
    char q[8][128];
    assert_int_equal(read_all(f->out, t, q, 8), 4);
    assert_true(t[0] == 1.0 && t[1] == 3.0 && t[2] == 5.0); /* no --from: rebased by 0 */
    for (int i = 0; i < 3; i++)
        assert_string_equal(q[i], QUAL("finish_write"));
}

static void test_the_sources_markers_are_counted_not_copied(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    add(f, 1.0, QUAL("finish_write"));
    lmc_trace_slice_note old = {.source = "older.lct", .source_sha256 = ""};
    assert_int_equal(lmc_trace_slice_encode_marker(&f->sb, 1.0, 0.0, &old, NULL), LMC_OK);
    lmc_trace_arg d = {"dropped_count", 13, lmc_tv_int(7)};
    assert_int_equal(lmc_trace_encode_record(&f->sb, 2.0, 0.0, LMC_TRACE_DROPPED_QUALNAME,
                                             strlen(LMC_TRACE_DROPPED_QUALNAME), &d, 1, NULL),
                     LMC_OK);
    lmc_trace_slice_options opt = {0};
    lmc_trace_slice_result r;
    assert_int_equal(slice(f, &opt, &r, NULL), LMC_OK);
    assert_int_equal(r.source_records, 1);
    assert_int_equal(r.source_dropped, 7);
    double t[4];
    char q[4][128];
    assert_int_equal(read_all(f->out, t, q, 4), 2);
    assert_string_equal(q[0], QUAL("finish_write"));
    assert_string_equal(q[1], LMC_TRACE_SLICE_QUALNAME);
}

static void test_the_input_is_never_overwritten(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    add(f, 0.0, QUAL("finish_write"));
    tt_write_file(f->in, f->sb.data, f->sb.size);
    lmc_trace_slice_options opt = {0};
    lmc_error err;
    assert_int_equal(lmc_trace_slice(f->in, f->in, &opt, NULL, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "is the input file"));
    /* Through a symlink and a hard link too. */
    char link_path[160], hard[160];
    snprintf(link_path, sizeof(link_path), "%s/sym.lct", f->dir);
    snprintf(hard, sizeof(hard), "%s/hard.lct", f->dir);
    assert_int_equal(symlink(f->in, link_path), 0);
    assert_int_equal(link(f->in, hard), 0);
    assert_int_equal(lmc_trace_slice(f->in, link_path, &opt, NULL, &err), LMC_ERR_INVALID);
    assert_int_equal(lmc_trace_slice(f->in, hard, &opt, NULL, &err), LMC_ERR_INVALID);
    struct stat st;
    assert_int_equal(stat(f->in, &st), 0);
    assert_int_equal((size_t)st.st_size, f->sb.size);
}

/* The names in dir, other than . and .., joined by spaces. */
static void dir_listing(const char *dir, char *buf, size_t len)
{
    buf[0] = '\0';
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t used = strlen(buf), n = strlen(e->d_name);
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || used + n + 2 > len)
            continue;
        memcpy(buf + used, e->d_name, n);
        memcpy(buf + used + n, " ", 2);
    }
    closedir(d);
}

static void test_a_failed_slice_leaves_the_output_as_it_was(void **state)
{
    fixture *f = *state;
    header(f, "events");
    add(f, 0.0, QUAL("finish_write"));
    tt_write_file(f->out, "old", 3);
    lmc_trace_slice_options opt = {0};
    lmc_error err;
    assert_int_equal(slice(f, &opt, NULL, &err), LMC_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "only storage-level traces"));
    struct stat st;
    assert_int_equal(stat(f->out, &st), 0);
    assert_int_equal(st.st_size, 3);
    char names[256];
    dir_listing(f->dir, names, sizeof(names));
    assert_non_null(strstr(names, "in.lct "));
    assert_non_null(strstr(names, "out.lct "));
    assert_int_equal(strlen(names), strlen("in.lct out.lct ")); /* no temporary file left */
}

static void test_the_output_replaces_a_file_with_mode_0600_and_refuses_a_symlink(void **state)
{
    fixture *f = *state;
    header(f, "storage");
    add(f, 0.0, QUAL("finish_write"));
    tt_write_file(f->out, "old", 3);
    chmod(f->out, 0644);
    lmc_trace_slice_options opt = {0};
    assert_int_equal(slice(f, &opt, NULL, NULL), LMC_OK);
    struct stat st;
    assert_int_equal(lstat(f->out, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(st.st_size > 3);
    /* A link there is neither followed nor replaced. */
    unlink(f->out);
    char victim[160];
    snprintf(victim, sizeof(victim), "%s/victim", f->dir);
    tt_write_file(victim, "keep", 4);
    assert_int_equal(symlink(victim, f->out), 0);
    lmc_error err;
    assert_int_equal(slice(f, &opt, NULL, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "is a symbolic link: refusing to write through it"));
    assert_int_equal(lstat(f->out, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_size, 4);
}

static void test_a_directory_or_a_missing_source_is_an_error(void **state)
{
    fixture *f = *state;
    lmc_trace_slice_options opt = {0};
    lmc_error err;
    assert_int_equal(lmc_trace_slice(f->in, f->out, &opt, NULL, &err), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "in.lct"));
    header(f, "storage");
    tt_write_file(f->in, f->sb.data, f->sb.size);
    assert_int_equal(lmc_trace_slice(f->in, f->dir, &opt, NULL, &err), LMC_ERR_IO);
    assert_non_null(strstr(err.msg, "Is a directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_marker_is_a_record_of_plain_msgpack_values),
        cmocka_unit_test(test_an_open_window_and_no_limit_are_none),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_a_slice_keeps_the_header_and_rebases_the_window),
        T(test_record_bodies_differ_from_the_source_only_in_t_mono),
        T(test_a_whole_slice_copies_the_source_bytes_then_adds_the_marker),
        T(test_qualnames_and_max_records_narrow_the_slice),
        T(test_the_sources_markers_are_counted_not_copied),
        T(test_the_input_is_never_overwritten),
        T(test_a_failed_slice_leaves_the_output_as_it_was),
        T(test_the_output_replaces_a_file_with_mode_0600_and_refuses_a_symlink),
        T(test_a_directory_or_a_missing_source_is_an_error),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
