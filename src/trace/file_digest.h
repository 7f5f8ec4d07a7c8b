/*
 * file_digest.h -- the digest that names a trace file: XXH3-128 of its
 * bytes, as 32 lowercase hex digits in XXH3's canonical (big-endian) order,
 * which is what `xxh128sum FILE` prints.
 *
 * A replay result carries it (trace.digest), so that `trace compare` can
 * tell whether two results replayed the same trace. It covers every byte,
 * header included: a copy of a file has its digest, a re-recording or a
 * slice does not. XXH3 rather than SHA-256: the digest identifies a file
 * among a user's own recordings (no adversary), and it reads at memory
 * speed, so hashing the file beside the replay costs a few percent of a
 * virtual-time replay where SHA-256 would cost half of it.
 *
 * Owns nothing past a call. Threads: none; reentrant.
 */
#ifndef LMC_TRACE_FILE_DIGEST_H
#define LMC_TRACE_FILE_DIGEST_H

#include "lmcache/status.h"

#define LMC_TRACE_DIGEST_HEX_LEN 32

/*
 * The digest of the file at path into hex (33 bytes: 32 hex and a NUL).
 * Only a regular file has one: anything else (a pipe, a terminal) is
 * LMC_ERR_UNSUPPORTED, since reading it here would take the bytes the
 * replay needs. LMC_ERR_NOT_FOUND / LMC_ERR_IO naming the path when it
 * cannot be opened or read.
 */
lmc_status lmc_trace_file_digest(const char *path, char hex[LMC_TRACE_DIGEST_HEX_LEN + 1],
                                 lmc_error *err);

#endif
