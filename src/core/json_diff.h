/*
 * json_diff.h -- where two JSON values differ, as paths.
 *
 * Owns nothing. The replay uses it to name the config fields in which the
 * recorded StorageManager config and the replay's differ, instead of a bare
 * digest mismatch: "l2_adapter_config.adapters[0].base_path".
 *
 * Paths: object members join with '.', array items with "[i]"; the root is
 * "" (the whole value differs: different types, or different scalars). Two
 * objects differ at every key one of them lacks and, recursively, at every
 * shared key whose values differ, in a's key order then b's extra keys.
 * Arrays compare item by item; items past the shorter one differ at their
 * index. Scalars of different types differ (1 and 1.0 do: their JSON text,
 * and so the config digest, differs); floats compare exactly.
 *
 * Threads: none; reentrant.
 */
#ifndef LMC_CORE_JSON_DIFF_H
#define LMC_CORE_JSON_DIFF_H

#include <stddef.h>

#include "core/json.h"

/* Called once per differing path (NUL-terminated, valid during the call). */
typedef void (*lmc_json_diff_cb)(const char *path, void *ud);

/* Report every path where a and b differ to cb (may be NULL); returns how many. */
size_t lmc_json_diff(const lmc_json *a, const lmc_json *b, lmc_json_diff_cb cb, void *ud);

/*
 * The same walk, with the two values at each path (NULL for the side that
 * lacks it), for a caller that shows what changed ("0.1 -> 0.01").
 */
typedef void (*lmc_json_diff_values_cb)(const char *path, const lmc_json *a, const lmc_json *b,
                                        void *ud);
size_t lmc_json_diff_values(const lmc_json *a, const lmc_json *b, lmc_json_diff_values_cb cb,
                            void *ud);

/*
 * The value at a path written as the diff writes them ("a.b[0].c"; ""
 * is v itself), or NULL when there is none. A key holding '.' or '[' cannot
 * be named this way.
 */
const lmc_json *lmc_json_at_path(const lmc_json *v, const char *path);

#endif
