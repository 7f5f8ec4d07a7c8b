/*
 * trace_test_util.h -- helpers for the trace codec, format and reader tests:
 * hex comparison, msgpack round trips, a capturing log sink, temp files.
 */
#ifndef LMC_TEST_TRACE_TEST_UTIL_H
#define LMC_TEST_TRACE_TEST_UTIL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "trace/format.h"
#include "trace/value.h"

/* Parse hex (spaces ignored) into a malloc'd buffer; *n gets its length. */
uint8_t *tt_unhex(const char *hex, size_t *n);

/* Lowercase hex of n bytes into a malloc'd string. */
char *tt_hex(const void *p, size_t n);

/* Fail the test unless the n bytes at p equal the hex string (spaces ignored). */
void tt_assert_hex(const void *p, size_t n, const char *hex);

/* Encode one value (through the codecs) into a fresh sbuffer the caller destroys. */
void tt_encode(const lmc_tv *v, msgpack_sbuffer *sb);

/* Decode msgpack bytes as one value into the arena; returns the status, err filled. */
lmc_status tt_decode(const void *bytes, size_t n, lmc_arena *a, lmc_tv *out, lmc_error *err);

/* Encode then decode; fails the test if either step fails. */
lmc_tv tt_round_trip(const lmc_tv *v, lmc_arena *a);

/* A key from a short chunk hash, as the tests build them. */
lmc_object_key tt_key(const char *model, uint32_t hash, int64_t kv_rank, int64_t group,
                      const char *salt);

/* Capture log messages at or above WARNING (up to 64, 512 bytes each). */
void tt_log_capture_start(void);
void tt_log_capture_stop(void);
size_t tt_log_count(void);
/* How many captured messages contain needle. */
size_t tt_log_count_containing(const char *needle);
const char *tt_log_message(size_t i);

/*
 * A trace built in memory frame by frame (a storage-level header of the
 * given trace_schema_version, t_mono_start 100, no recorded config), then
 * written to a file. Each step fails the test on error.
 */
typedef struct tt_trace {
    msgpack_sbuffer buf;
} tt_trace;

void tt_trace_begin(tt_trace *t, int64_t schema);
/* One record of n keys, with a layout_desc argument when lay is not NULL and a mode when mode is.
 */
void tt_trace_keys_record(tt_trace *t, double t_mono, const char *qualname,
                          const lmc_object_key *keys, size_t n, const lmc_layout_desc *lay,
                          const char *mode);
/* The same with an extra_count argument too (LMCache's submit_prefetch_task, finish_read). */
void tt_trace_keys_record_extra(tt_trace *t, double t_mono, const char *qualname,
                                const lmc_object_key *keys, size_t n, const lmc_layout_desc *lay,
                                int64_t extra_count);
void tt_trace_end(tt_trace *t, const char *path);

/* A fresh directory under /tmp (buf of at least 64 bytes) and its removal. */
void tt_tmpdir(char *buf);
void tt_rmtree(const char *path);
/* Write bytes to a file (replacing it); fails the test on error. */
void tt_write_file(const char *path, const void *p, size_t n);

/*
 * A trace file built in memory: dir is a fresh temporary directory, path
 * dir/t.lct, and sb starts with the Header frame of a storage-level trace
 * of schema 2 (sm_config_json "", the digest given; "" for none). Append
 * records with lmc_trace_encode_record, then tt_trace_file_write; free
 * removes the directory.
 */
typedef struct tt_trace_file {
    char dir[64];
    char path[128];
    msgpack_sbuffer sb;
} tt_trace_file;

void tt_trace_file_init(tt_trace_file *f, const char *digest);
void tt_trace_file_write(const tt_trace_file *f);
void tt_trace_file_free(tt_trace_file *f);

/*
 * cmocka setup and teardown around a tt_trace_file (digest "abc") in
 * *state, with the log captured.
 */
int tt_trace_file_setup(void **state);
int tt_trace_file_teardown(void **state);

#endif
