/*
 * test_trace_reader_records.c -- reading records without their args, and
 * decoding the args of only the records a pass wants
 * (lmc_trace_reader_next_record, lmc_trace_reader_decode_args), as
 * `trace info` and `trace analyze` read a trace.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/trace_test_util.h"
#include "trace/format.h"
#include "trace/reader.h"

#define QUAL(m) LMC_TRACE_QUALNAME_PREFIX m

/* n records alternating finish_write / reserve_write with arg "i" = i. */
static void write_file(void **state, int n, bool break_record_1)
{
    tt_trace_file *f = *state;
    msgpack_sbuffer *sb = &f->sb;
    for (int i = 0; i < n; i++) {
        size_t start = sb->size;
        lmc_object_key k = tt_key("m", (uint32_t)i, 0, 0, NULL);
        lmc_trace_arg args[2] = {{"i", 1, lmc_tv_int(i)},
                                 {"key", 3, {.kind = LMC_TV_OBJECT_KEY, .u.key = &k}}};
        const char *q = i % 2 ? QUAL("reserve_write") : QUAL("finish_write");
        assert_int_equal(
            lmc_trace_encode_record(sb, (double)i / 4, 1.0 + i, q, strlen(q), args, 2, NULL),
            LMC_OK);
        if (i == 1 && break_record_1) {
            /* The key's kv_rank becomes nil: the record reads, its args do not decode. */
            static const char rank[] = "\xa7kv_rank";
            char *at = memmem(sb->data + start, sb->size - start, rank, sizeof(rank) - 1);
            assert_non_null(at);
            at[sizeof(rank) - 1] = (char)0xc0;
        }
    }
    tt_trace_file_write(f);
}

static lmc_trace_reader *open_file(void **state)
{
    lmc_trace_reader *r;
    assert_int_equal(lmc_trace_reader_open(((tt_trace_file *)*state)->path, &r, NULL), LMC_OK);
    return r;
}

static void test_next_record_gives_time_and_qualname_without_args(void **state)
{
    write_file(state, 3, false);
    lmc_trace_reader *r = open_file(state);
    lmc_trace_record rec;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
        assert_true(rec.t_mono == (double)i / 4);
        assert_string_equal(rec.qualname, i % 2 ? QUAL("reserve_write") : QUAL("finish_write"));
        assert_int_equal(rec.qualname_len, strlen(rec.qualname));
        assert_null(rec.args);
        assert_int_equal(rec.nargs, 0);
    }
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_records(r), 3);
    lmc_trace_reader_close(r);
}

static void test_decode_args_decodes_only_the_records_asked_for(void **state)
{
    write_file(state, 4, false);
    lmc_trace_reader *r = open_file(state);
    lmc_trace_record rec;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
        if (i % 2 == 0)
            continue;
        lmc_error err;
        assert_int_equal(lmc_trace_reader_decode_args(r, &rec, &err), LMC_OK);
        assert_int_equal(rec.nargs, 2);
        const lmc_trace_arg *a = lmc_trace_args_find(rec.args, rec.nargs, "i");
        assert_non_null(a);
        assert_int_equal(a->value.u.i, i);
        a = lmc_trace_args_find(rec.args, rec.nargs, "key");
        assert_non_null(a);
        assert_int_equal(a->value.kind, LMC_TV_OBJECT_KEY);
        assert_string_equal(rec.qualname, QUAL("reserve_write"));
        assert_true(rec.t_mono == (double)i / 4);
    }
    lmc_trace_reader_close(r);
}

static void test_args_that_do_not_decode_are_an_error_and_the_record_stays(void **state)
{
    write_file(state, 3, true);
    lmc_trace_reader *r = open_file(state);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
    lmc_error err;
    lmc_error_clear(&err);
    assert_int_not_equal(lmc_trace_reader_decode_args(r, &rec, &err), LMC_OK);
    assert_true(err.msg[0] != '\0');
    assert_null(rec.args);
    assert_string_equal(rec.qualname, QUAL("reserve_write"));
    assert_true(rec.t_mono == 0.25);
    /* The stream goes on. */
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_decode_args(r, &rec, NULL), LMC_OK);
    assert_true(rec.t_mono == 0.5);
    lmc_trace_reader_close(r);
}

static void test_decode_args_with_no_current_record_is_invalid(void **state)
{
    write_file(state, 1, false);
    lmc_trace_reader *r = open_file(state);
    lmc_trace_record rec;
    memset(&rec, 0, sizeof(rec));
    lmc_error err;
    assert_int_equal(lmc_trace_reader_decode_args(r, &rec, &err), LMC_ERR_INVALID);
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next_record(r, &rec), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_decode_args(r, &rec, &err), LMC_ERR_INVALID);
    lmc_trace_reader_close(r);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tt_trace_file_setup, tt_trace_file_teardown)
    const struct CMUnitTest tests[] = {
        T(test_next_record_gives_time_and_qualname_without_args),
        T(test_decode_args_decodes_only_the_records_asked_for),
        T(test_args_that_do_not_decode_are_an_error_and_the_record_stays),
        T(test_decode_args_with_no_current_record_is_invalid),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
