/*
 * test_replay_outcome.c -- the outcome module (replay/outcome.h): the
 * counter table, the reason of every per-key L1 result, totals and the
 * figures derived from them, the canonical lines, and the outcome digest
 * (equal streams give equal digests; any changed outcome changes it).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <string.h>

#include "replay/outcome.h"

#define Q "lmcache.v1.distributed.storage_manager.StorageManager."

static void test_counter_table_rows_of_one_op_are_contiguous_and_named(void **state)
{
    (void)state;
    const lmc_outcome_counter_info *ci, *prev = NULL;
    bool seen[LMC_TRACE_OP_COUNT_] = {false};
    for (size_t c = 0; (ci = lmc_outcome_counter_get(c)) != NULL; c++) {
        assert_true(ci->op > LMC_TRACE_OP_NONE && ci->op < LMC_TRACE_OP_COUNT_);
        assert_true(ci->name[0] != '\0' && ci->doc[0] != '\0');
        if (prev == NULL || prev->op != ci->op) {
            assert_false(seen[ci->op]); /* an op's rows come in one run */
            seen[ci->op] = true;
        }
        prev = ci;
    }
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++)
        assert_true(seen[op]); /* every traced op has an outcome */
    assert_null(lmc_outcome_counter_get(LMC_OC_COUNT_));
    assert_string_equal(lmc_outcome_op_name(LMC_TRACE_OP_SUBMIT_PREFETCH), "submit_prefetch");
}

static void test_reserve_reasons_by_code_mode_and_state(void **state)
{
    (void)state;
    assert_int_equal(lmc_outcome_reserve_reason(LMC_L1_SUCCESS, LMC_WRITE_NEW, 0),
                     LMC_OC_RESERVE_WRITE_reserved);
    assert_int_equal(lmc_outcome_reserve_reason(LMC_L1_OUT_OF_MEMORY, LMC_WRITE_ALL, 0),
                     LMC_OC_RESERVE_WRITE_out_of_memory);
    /* KEY_NOT_WRITABLE covers five situations; the key's state after the call tells them apart. */
    assert_true(lmc_outcome_reserve_needs_state(LMC_L1_KEY_NOT_WRITABLE));
    assert_false(lmc_outcome_reserve_needs_state(LMC_L1_OUT_OF_MEMORY));
    assert_int_equal(
        lmc_outcome_reserve_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_WRITE_NEW, LMC_L1_STATE_READY),
        LMC_OC_RESERVE_WRITE_already_present);
    assert_int_equal(lmc_outcome_reserve_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_WRITE_NEW,
                                                LMC_L1_STATE_READ_LOCKED),
                     LMC_OC_RESERVE_WRITE_already_present);
    assert_int_equal(
        lmc_outcome_reserve_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_WRITE_NEW, LMC_L1_STATE_WRITING),
        LMC_OC_RESERVE_WRITE_write_locked);
    assert_int_equal(lmc_outcome_reserve_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_WRITE_ALL,
                                                LMC_L1_STATE_READ_LOCKED),
                     LMC_OC_RESERVE_WRITE_read_locked);
    assert_int_equal(
        lmc_outcome_reserve_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_WRITE_ALL, LMC_L1_STATE_READY),
        LMC_OC_RESERVE_WRITE_not_writable);
    assert_int_equal(
        lmc_outcome_reserve_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_WRITE_UPDATE, LMC_L1_STATE_ABSENT),
        LMC_OC_RESERVE_WRITE_absent);
    assert_int_equal(lmc_outcome_reserve_reason(LMC_L1_KEY_IS_LOCKED, LMC_WRITE_ALL, 0),
                     LMC_OC_RESERVE_WRITE_other);
}

static void test_finish_read_and_read_enter_reasons_by_code(void **state)
{
    (void)state;
    assert_int_equal(lmc_outcome_finish_write_reason(LMC_L1_SUCCESS), LMC_OC_FINISH_WRITE_finished);
    assert_int_equal(lmc_outcome_finish_write_reason(LMC_L1_KEY_NOT_EXIST),
                     LMC_OC_FINISH_WRITE_not_in_l1);
    assert_int_equal(lmc_outcome_finish_write_reason(LMC_L1_KEY_IN_WRONG_STATE),
                     LMC_OC_FINISH_WRITE_not_reserved);
    assert_int_equal(lmc_outcome_finish_write_reason(LMC_L1_OUT_OF_MEMORY),
                     LMC_OC_FINISH_WRITE_other);
    assert_int_equal(lmc_outcome_read_reason(LMC_L1_SUCCESS, 0), LMC_OC_READ_ENTER_found);
    assert_int_equal(lmc_outcome_read_reason(LMC_L1_KEY_NOT_EXIST, 0), LMC_OC_READ_ENTER_not_in_l1);
    assert_true(lmc_outcome_read_needs_state(LMC_L1_KEY_NOT_READABLE));
    assert_int_equal(lmc_outcome_read_reason(LMC_L1_KEY_NOT_READABLE, LMC_L1_STATE_WRITING),
                     LMC_OC_READ_ENTER_write_locked);
    assert_int_equal(lmc_outcome_read_reason(LMC_L1_KEY_NOT_READABLE, LMC_L1_STATE_READY),
                     LMC_OC_READ_ENTER_not_read_locked);
    assert_int_equal(lmc_outcome_read_reason(LMC_L1_KEY_IS_LOCKED, 0), LMC_OC_READ_ENTER_other);
    assert_int_equal(lmc_outcome_finish_read_reason(LMC_L1_SUCCESS), LMC_OC_FINISH_READ_released);
    assert_int_equal(lmc_outcome_finish_read_reason(LMC_L1_KEY_NOT_EXIST),
                     LMC_OC_FINISH_READ_not_in_l1);
    assert_int_equal(lmc_outcome_finish_read_reason(LMC_L1_KEY_IN_WRONG_STATE),
                     LMC_OC_FINISH_READ_not_read_locked);
    assert_int_equal(lmc_outcome_finish_read_reason(LMC_L1_KEY_NOT_READABLE),
                     LMC_OC_FINISH_READ_other);
}

static void test_engine_store_reasons_by_code_and_state(void **state)
{
    (void)state;
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_SUCCESS, LMC_L1_STATE_ABSENT),
                     LMC_OC_SUBMIT_PREFETCH_stored);
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_OUT_OF_MEMORY, LMC_L1_STATE_ABSENT),
                     LMC_OC_SUBMIT_PREFETCH_store_out_of_memory);
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_L1_STATE_WRITING),
                     LMC_OC_SUBMIT_PREFETCH_store_write_locked);
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_L1_STATE_READY),
                     LMC_OC_SUBMIT_PREFETCH_store_present);
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_L1_STATE_READ_LOCKED),
                     LMC_OC_SUBMIT_PREFETCH_store_present);
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_KEY_NOT_WRITABLE, LMC_L1_STATE_ABSENT),
                     LMC_OC_SUBMIT_PREFETCH_store_other);
    assert_int_equal(lmc_outcome_store_reason(LMC_L1_KEY_IS_LOCKED, LMC_L1_STATE_READY),
                     LMC_OC_SUBMIT_PREFETCH_store_other);
    /* Every engine row is one of submit_prefetch_task's, so a lookup's record carries them. */
    for (size_t c = LMC_OC_SUBMIT_PREFETCH_hit_keys; c <= LMC_OC_SUBMIT_PREFETCH_store_other; c++)
        assert_int_equal(lmc_outcome_counter_get(c)->op, LMC_TRACE_OP_SUBMIT_PREFETCH);
}

static void test_a_record_not_reissued_counts_apart_and_digests_its_keys(void **state)
{
    (void)state;
    lmc_replay_outcome o;
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_READ_ENTER, NULL, 5);
    o.not_reissued = true;
    o.keys_hash = 0x0123456789abcdefull;
    lmc_replay_record_view rec = {
        .index = 3, .qualname = Q "read_prefetched_results.__enter__", .outcome = &o};
    char buf[512];
    lmc_outcome_encode_record(buf, sizeof(buf), &rec);
    assert_string_equal(buf, "3 " Q "read_prefetched_results.__enter__ not_reissued keys=5 "
                             "kh=0123456789abcdef\n");
    lmc_replay_totals t = {0};
    lmc_replay_totals_add(&t, &o);
    lmc_replay_outcome lookup;
    lmc_replay_outcome_begin(&lookup, LMC_TRACE_OP_SUBMIT_PREFETCH, NULL, 10);
    lookup.v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = 6;
    lookup.v[LMC_OC_SUBMIT_PREFETCH_hit_keys] = 6;
    lookup.v[LMC_OC_SUBMIT_PREFETCH_stored] = 3;
    lookup.v[LMC_OC_SUBMIT_PREFETCH_store_present] = 1;
    lmc_replay_totals_add(&t, &lookup);
    /* Not a read of this replay: only its keys, for the recording's own hit rate. */
    assert_int_equal(t.records[LMC_TRACE_OP_READ_ENTER], 0);
    assert_int_equal(t.keys[LMC_TRACE_OP_READ_ENTER], 0);
    assert_int_equal(t.not_reissued[LMC_TRACE_OP_READ_ENTER], 1);
    assert_int_equal(t.not_reissued_keys[LMC_TRACE_OP_READ_ENTER], 5);
    lmc_replay_figures f = lmc_replay_figures_of(&t);
    assert_int_equal(f.recorded_reads, 0);
    assert_int_equal(f.not_reissued_records, 1);
    assert_true(f.recorded_hit_rate == 0.5);
    assert_true(f.engine_hit_rate == 0.6);
    assert_int_equal(f.engine_hit_keys, 6);
    assert_int_equal(f.engine_stored_keys, 3);
    assert_int_equal(f.engine_refused_keys, 1);
}

static void test_the_found_part_of_a_prefetch_from_its_handle_and_bitmap(void **state)
{
    (void)state;
    uint32_t l1[] = {0, 1, 3};
    lmc_prefetch_handle h = {.prefetch_request_id = 7,
                             .l1_found_indices = l1,
                             .l1_found_count = 3,
                             .total_requested_keys = 6};
    lmc_replay_outcome o;
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_SUBMIT_PREFETCH, NULL, 6);
    o.pending = true;
    /* Only the L1 hits known: the prefix is their leading run. */
    lmc_outcome_prefetch_finish(&o, &h, NULL, true);
    assert_false(o.pending);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_found_prefix], 2);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_l2_hits], 0);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_missed], 3);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_unfinished], 1);
    /* The found-key bitmap: keys 0-3 found (key 2 from L2), 4 and 5 missed. */
    lmc_bitmap bm;
    assert_int_equal(lmc_bitmap_init(&bm, 6, 4), LMC_OK);
    lmc_outcome_prefetch_finish(&o, &h, &bm, false);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_found_prefix], 4);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_l2_hits], 1);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_missed], 2);
    assert_int_equal(o.v[LMC_OC_SUBMIT_PREFETCH_unfinished], 0);
    lmc_bitmap_free(&bm);
}

static void test_totals_and_figures_of_a_small_replay(void **state)
{
    (void)state;
    lmc_replay_totals t = {0};
    lmc_replay_outcome o;
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_SUBMIT_PREFETCH, NULL, 10);
    o.v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = 4;
    o.v[LMC_OC_SUBMIT_PREFETCH_l2_hits] = 2;
    o.v[LMC_OC_SUBMIT_PREFETCH_missed] = 4;
    lmc_replay_totals_add(&t, &o);
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_READ_ENTER, NULL, 6);
    o.v[LMC_OC_READ_ENTER_found] = 6;
    o.v[LMC_OC_READ_ENTER_context_ok] = 1;
    lmc_replay_totals_add(&t, &o);
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_READ_ENTER, NULL, 4);
    o.v[LMC_OC_READ_ENTER_found] = 1;
    o.v[LMC_OC_READ_ENTER_not_in_l1] = 3;
    lmc_replay_totals_add(&t, &o);
    lmc_replay_totals_add(&t, NULL); /* a record without an outcome counts nothing */
    lmc_replay_figures f = lmc_replay_figures_of(&t);
    assert_int_equal(f.lookups, 1);
    assert_int_equal(f.looked_up_keys, 10);
    assert_int_equal(f.found_keys, 6);
    assert_true(f.chunk_hit_rate == 0.6);
    assert_true(f.l1_hit_rate == 0.4);
    assert_true(f.l2_hit_rate == 0.2);
    assert_int_equal(f.recorded_reads, 2);
    assert_int_equal(f.reads_still_hit, 1);
    assert_int_equal(f.failed_reads, 1);
    assert_true(f.read_agreement == 0.5);
    assert_int_equal(f.read_keys_missed, 3);
    assert_true(f.key_agreement == 0.7);
    /* Nothing recorded: full agreement, no hit rate. */
    lmc_replay_totals none = {0};
    f = lmc_replay_figures_of(&none);
    assert_true(f.read_agreement == 1.0 && f.key_agreement == 1.0 && f.chunk_hit_rate == 0.0);
    /* The figure table walks the struct's fields in order. */
    assert_string_equal(lmc_replay_figure_get(0)->name, "lookups");
    f = lmc_replay_figures_of(&t);
    const lmc_replay_figure_info *fi;
    for (size_t i = 0; (fi = lmc_replay_figure_get(i)) != NULL; i++) {
        if (strcmp(fi->name, "chunk_hit_rate") == 0) {
            assert_true(fi->is_ratio);
            assert_true(lmc_replay_figure_value(&f, i) == 0.6);
        } else if (strcmp(fi->name, "failed_reads") == 0) {
            assert_false(fi->is_ratio);
            assert_true(lmc_replay_figure_value(&f, i) == 1.0);
        }
    }
}

static void test_canonical_record_line_has_no_timing(void **state)
{
    (void)state;
    lmc_replay_outcome o;
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_READ_EXIT, NULL, 3);
    o.v[LMC_OC_READ_EXIT_matched] = 1;
    lmc_replay_record_view v = {.index = 7,
                                .qualname = Q "read_prefetched_results.__exit__",
                                .latency_s = 0.5,
                                .t_mono = 1.25,
                                .lateness_s = 0.1,
                                .outcome = &o};
    char buf[512];
    size_t n = lmc_outcome_encode_record(buf, sizeof(buf), &v);
    assert_string_equal(buf, "7 " Q "read_prefetched_results.__exit__ keys=3 kh=0000000000000000 "
                             "matched=1 released=0\n");
    assert_int_equal(n, strlen(buf));
    v.latency_s = 9.0; /* timing never enters the line */
    v.lateness_s = 9.0;
    char again[512];
    lmc_outcome_encode_record(again, sizeof(again), &v);
    assert_string_equal(again, buf);
    lmc_replay_record_view skipped = {
        .index = 8, .qualname = "x.y", .failed = true, .skipped = true};
    lmc_outcome_encode_record(buf, sizeof(buf), &skipped);
    assert_string_equal(buf, "8 x.y skipped\n");
    lmc_replay_record_view failed = {.index = 9, .qualname = "x.y", .failed = true};
    lmc_outcome_encode_record(buf, sizeof(buf), &failed);
    assert_string_equal(buf, "9 x.y failed\n");
    /* A short buffer is cut, and the length says how much was wanted. */
    assert_int_equal(lmc_outcome_encode_record(buf, 4, &failed), strlen("9 x.y failed\n"));
    assert_string_equal(buf, "9 x");
}

static void test_totals_line_lists_every_final_counter(void **state)
{
    (void)state;
    lmc_replay_totals t = {0};
    t.sm.l2_loaded_bytes = 4096;
    t.l1_peak_used_bytes = 123;
    lmc_replay_record_counts rc = {5, 1, 2, 0};
    size_t n = lmc_replay_totals_fields(&t, &rc, NULL, 0);
    assert_int_equal(n, 4 + 2 * (LMC_TRACE_OP_COUNT_ - 1) + LMC_OC_COUNT_ + 9);
    char buf[8192];
    lmc_outcome_encode_totals(buf, sizeof(buf), &t, &rc);
    const char *head = "totals records.replayed=5 records.skipped=1 records.failed=2 "
                       "records.malformed=0 reserve_write.records=0 reserve_write.keys=0 "
                       "reserve_write.reserved=0 ";
    assert_true(strncmp(buf, head, strlen(head)) == 0);
    assert_non_null(strstr(buf, " l1.peak_used_bytes=123 "));
    assert_non_null(strstr(buf, " l2.loaded_bytes=4096 "));
    assert_non_null(strstr(buf, " l2.evicted_keys=0\n"));
}

/* The digest of a stream of n reserve_write outcomes, the i-th reserving v[i] keys. */
static void digest_of(const uint32_t *v, size_t n, char hex[65])
{
    lmc_outcome_digest *d = lmc_outcome_digest_create();
    assert_non_null(d);
    lmc_replay_totals t = {0};
    for (size_t i = 0; i < n; i++) {
        lmc_replay_outcome o;
        lmc_replay_outcome_begin(&o, LMC_TRACE_OP_RESERVE_WRITE, NULL, 4);
        o.v[LMC_OC_RESERVE_WRITE_reserved] = v[i];
        o.v[LMC_OC_RESERVE_WRITE_out_of_memory] = 4 - v[i];
        lmc_replay_record_view rec = {
            .index = i + 1, .qualname = Q "reserve_write", .latency_s = (double)i, .outcome = &o};
        lmc_outcome_digest_record(d, &rec);
        lmc_replay_totals_add(&t, &o);
    }
    lmc_replay_record_counts rc = {n, 0, 0, 0};
    lmc_outcome_digest_finish(d, &t, &rc, hex);
    lmc_outcome_digest_destroy(d);
}

static void test_keys_hash_depends_on_every_field_and_the_order(void **state)
{
    (void)state;
    lmc_object_key k[2];
    assert_int_equal(lmc_object_key_make(&k[0], "\x01\x02", 2, "m", 1, 0, NULL, NULL), LMC_OK);
    assert_int_equal(lmc_object_key_make(&k[1], "\x01\x03", 2, "m", 1, 0, "s", NULL), LMC_OK);
    uint64_t h = lmc_outcome_keys_hash(k, 2);
    assert_int_equal(h, lmc_outcome_keys_hash(k, 2));
    lmc_object_key swapped[2] = {k[1], k[0]};
    assert_int_not_equal(h, lmc_outcome_keys_hash(swapped, 2));
    lmc_object_key one = k[0];
    one.chunk_hash[1] ^= 1; /* one byte of one key */
    lmc_object_key changed[2] = {one, k[1]};
    assert_int_not_equal(h, lmc_outcome_keys_hash(changed, 2));
    lmc_object_key rank = k[0];
    rank.kv_rank = 2;
    changed[0] = rank;
    assert_int_not_equal(h, lmc_outcome_keys_hash(changed, 2));
    assert_int_not_equal(lmc_outcome_keys_hash(k, 1), h);
}

static void test_equal_outcome_streams_give_equal_digests_and_any_change_differs(void **state)
{
    (void)state;
    uint32_t a[] = {4, 4, 3, 0}, b[] = {4, 4, 3, 0}, c[] = {4, 3, 4, 0};
    char ha[65], hb[65], hc[65];
    digest_of(a, 4, ha);
    digest_of(b, 4, hb);
    digest_of(c, 4, hc); /* the same totals, in another order */
    assert_string_equal(ha, hb);
    assert_int_equal(strlen(ha), 64);
    assert_string_not_equal(ha, hc);
    digest_of(a, 3, hc); /* one record fewer */
    assert_string_not_equal(ha, hc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_table_rows_of_one_op_are_contiguous_and_named),
        cmocka_unit_test(test_reserve_reasons_by_code_mode_and_state),
        cmocka_unit_test(test_finish_read_and_read_enter_reasons_by_code),
        cmocka_unit_test(test_engine_store_reasons_by_code_and_state),
        cmocka_unit_test(test_a_record_not_reissued_counts_apart_and_digests_its_keys),
        cmocka_unit_test(test_the_found_part_of_a_prefetch_from_its_handle_and_bitmap),
        cmocka_unit_test(test_totals_and_figures_of_a_small_replay),
        cmocka_unit_test(test_canonical_record_line_has_no_timing),
        cmocka_unit_test(test_totals_line_lists_every_final_counter),
        cmocka_unit_test(test_keys_hash_depends_on_every_field_and_the_order),
        cmocka_unit_test(test_equal_outcome_streams_give_equal_digests_and_any_change_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
