/*
 * test_trace_large_frame.c -- a frame far above the reader's buffer: a
 * 300 MiB record written through the recorder reads back whole (issue 13,
 * item 2: LMCache's frames may be as long as the u32 prefix says, and the
 * recorder never writes one the reader refuses).
 *
 * Memory: the blob is calloc'd and only its first and last pages written,
 * so the source costs two pages; the recorder's batch and the reader's
 * buffer hold the frame once each. Labelled "large" in CMake (a generous
 * timeout: under ASan the copies take seconds).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers/trace_test_util.h"
#include "trace/reader.h"
#include "trace/recorder.h"

#define BLOB (300u * 1024 * 1024)
#define PAGE 4096u

static void put_small(lmc_trace_recorder *r, const char *q, int64_t i)
{
    lmc_trace_arg a[1] = {{"i", 1, lmc_tv_int(i)}};
    lmc_trace_recorder_write_record(r, q, a, 1, 1767225600.0, 0.0);
}

static void test_a_300_mib_frame_from_the_recorder_reads_back(void **state)
{
    (void)state;
    char dir[64];
    tt_tmpdir(dir);
    char path[128];
    snprintf(path, sizeof(path), "%s/big.lct", dir);

    uint8_t *blob = calloc(BLOB, 1);
    assert_non_null(blob);
    memset(blob, 0xab, PAGE);
    memset(blob + BLOB - PAGE, 0xcd, PAGE);
    lmc_trace_recorder *rec;
    assert_int_equal(lmc_trace_recorder_open(path, "storage", false, &rec, NULL), LMC_OK);
    put_small(rec, "small.before", 1);
    lmc_trace_arg big[1] = {{"blob", 4, {.kind = LMC_TV_BIN, .u.s = {(const char *)blob, BLOB}}}};
    lmc_trace_recorder_write_record(rec, "big.one", big, 1, 1767225600.0, 0.0);
    put_small(rec, "small.after", 2);
    lmc_trace_recorder_close(rec);
    assert_int_equal(lmc_trace_recorder_dropped(rec), 0);
    lmc_trace_recorder_destroy(rec);
    free(blob);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true((uint64_t)st.st_size > BLOB);

    /* The peek pass (trace info) and the count see all three records. */
    uint64_t n = 0;
    assert_int_equal(lmc_trace_count_records(path, &n, NULL), LMC_OK);
    assert_int_equal(n, 3);

    /* The decoding pass gets the blob whole, pointing into the reader's buffer. */
    lmc_trace_reader *r;
    assert_int_equal(lmc_trace_reader_open(path, &r, NULL), LMC_OK);
    lmc_trace_record record;
    assert_int_equal(lmc_trace_reader_next(r, &record), LMC_OK);
    assert_string_equal(record.qualname, "small.before");
    assert_int_equal(lmc_trace_reader_next(r, &record), LMC_OK);
    assert_string_equal(record.qualname, "big.one");
    assert_null(record.args_error);
    const lmc_trace_arg *a = lmc_trace_args_find(record.args, record.nargs, "blob");
    assert_non_null(a);
    assert_int_equal(a->value.kind, LMC_TV_BIN);
    assert_int_equal(a->value.u.s.len, BLOB);
    const uint8_t *b = (const uint8_t *)a->value.u.s.ptr;
    assert_int_equal(b[0], 0xab);
    assert_int_equal(b[PAGE - 1], 0xab);
    assert_int_equal(b[PAGE], 0);
    assert_int_equal(b[BLOB - 1], 0xcd);
    assert_int_equal(lmc_trace_reader_next(r, &record), LMC_OK);
    assert_string_equal(record.qualname, "small.after");
    assert_int_equal(lmc_trace_args_find(record.args, record.nargs, "i")->value.u.i, 2);
    assert_int_equal(lmc_trace_reader_next(r, &record), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_malformed(r), 0);
    assert_false(lmc_trace_reader_truncated(r));
    lmc_trace_reader_close(r);
    tt_rmtree(dir);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_300_mib_frame_from_the_recorder_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
