/*
 * l2_test_util.h -- helpers for the L2 adapter tests.
 *
 * Every wait is bounded (5 s) so a broken adapter fails a test instead of
 * hanging the suite.
 */
#ifndef LMC_TEST_L2_TEST_UTIL_H
#define LMC_TEST_L2_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "l2/adapter.h"

#define L2_WAIT_MS 5000

/* poll(2) fd for readability up to timeout_ms; drains it when readable. */
bool l2_wait_fd(int fd, int timeout_ms);

/* Wait for one task's result (false on timeout). */
bool l2_wait_lookup(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out);
bool l2_wait_load(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out);
/* Collect exactly `want` store results into out (false on timeout). */
bool l2_wait_stores(lmc_l2_adapter *a, size_t want, lmc_l2_store_result *out);
/* The result of store task_id, when it is the only store in flight. */
bool l2_wait_store(lmc_l2_adapter *a, uint64_t task_id, int64_t *result);

/*
 * Submit-and-wait wrappers for one task, asserting (cmocka) that the submit
 * succeeds and the result arrives. They drain the adapter's eventfds, so use
 * them only where no other thread waits on the same adapter.
 */
/* A store task; its result (bytes stored, or negative on failure). */
int64_t l2_store_sync(lmc_l2_adapter *a, const lmc_object_key *keys, const lmc_memory_obj *objs,
                      size_t n);
/* A lookup (or load) task; its bitmap as a "0101" string in bits (n + 1 bytes). */
void l2_lookup_sync(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n, char *bits);
void l2_load_sync(lmc_l2_adapter *a, const lmc_object_key *keys, const lmc_memory_obj *objs,
                  size_t n, char *bits);

/*
 * Poll for one task's lookup (take = lmc_l2_adapter_take_lookup_result) or
 * load result without touching the eventfds (false after L2_WAIT_MS): for
 * threads that share an adapter with others that wait on it.
 */
typedef bool (*l2_take_fn)(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out);
bool l2_poll_take(lmc_l2_adapter *a, l2_take_fn take, uint64_t task_id, lmc_bitmap *out);

/*
 * Which of keys the adapter holds: a lookup, polled as above, whose locks
 * are then released so the probe leaves nothing behind. Asserts the submit
 * and the result; the caller frees the bitmap.
 */
lmc_bitmap l2_holds(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n);

/* n bytes that differ with seed: buf[i] = seed + 7 i (mod 256). */
void l2_fill(uint8_t *buf, size_t n, uint8_t seed);

/* Poll is_healthy until it equals want, up to ms; false on timeout. */
bool l2_wait_healthy(lmc_l2_adapter *a, bool want, int ms);

/* Both lmc_l2_check_config and lmc_l2_adapter_create of json fail with LMC_ERR_INVALID; the
 * check's message is exactly msg. */
void l2_assert_config_invalid(const char *json, const char *msg);

/* An integer field of the adapter's status, or of its member object (when
 * object is not NULL); -1 when absent. */
int64_t l2_status_int(lmc_l2_adapter *a, const char *object, const char *field);

/* A key with a 4-byte big-endian chunk hash (as LMCache's tests build them). */
lmc_object_key l2_key(const char *model, uint32_t hash, int64_t kv_rank, int64_t group,
                      const char *salt);

/* Parse JSON text; NULL on error. */
lmc_json *l2_json(const char *text);

/* Create an adapter from JSON text (printf-style); NULL on failure, message in err. */
lmc_l2_adapter *l2_adapter_from(lmc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A fresh directory under /tmp (path written into buf of 64 bytes) and rm -rf. */
bool l2_tmpdir(char buf[64]);
void l2_rmtree(const char *path);

/* Whether a file exists / its size (-1 when missing). */
long long l2_file_size(const char *path);

#endif
