/*
 * reader.h -- streaming .lct reader.
 *
 * Owns: the open file, a read buffer, the decoded header and an arena for
 * the current record (spec/trace-format.md section 1.5).
 *
 * Opening reads the header strictly; errors name the file (Python repr
 * quotes) and the problem, in LMCache's words:
 *   trace file 'x.lct': unexpected EOF reading frame length   (empty file)
 *   trace file 'x.lct': truncated frame length prefix at offset 0
 *   trace file 'x.lct': truncated frame body at offset 4 (got X of N)
 *   trace file 'x.lct': bad magic (got b'WRNG', expected b'LMCT')
 *   trace file 'x.lct': unsupported format_version V (this build expects 1)
 *   trace file 'x.lct': unsupported trace_schema_version V (this build supports 1, 2)
 * plus "cannot open: <strerror>" and msgpack/shape errors of the header.
 *
 * Records stream one at a time. A truncated tail (1-3 prefix bytes, or a
 * short body) logs a WARNING ("TraceReader: truncated frame ... at offset
 * P") and ends the stream; a frame that does not decode as a Record logs
 * "TraceReader: skipping malformed record at offset P: <err>" and is
 * skipped. A frame length above LMC_TRACE_MAX_FRAME is treated as a
 * truncated (corrupt) tail.
 *
 * Threads: one reader per thread.
 */
#ifndef LMC_TRACE_READER_H
#define LMC_TRACE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "trace/format.h"

typedef struct lmc_trace_reader lmc_trace_reader;

lmc_status lmc_trace_reader_open(const char *path, lmc_trace_reader **out, lmc_error *err);
void lmc_trace_reader_close(lmc_trace_reader *r); /* NULL is fine */

const lmc_trace_header *lmc_trace_reader_header(const lmc_trace_reader *r);

/*
 * The next record, decoded (args through the codecs). Valid until the next
 * call. LMC_OK, or LMC_ERR_EOF at the end (clean or truncated), or
 * LMC_ERR_IO (logged) if read(2) fails; after the end, always LMC_ERR_EOF.
 */
lmc_status lmc_trace_reader_next(lmc_trace_reader *r, lmc_trace_record *rec);

/*
 * The next record with its args not decoded yet: t_mono and qualname (a
 * NUL-terminated copy); t_wall and offset 0, args NULL, nargs 0. Valid
 * until the next call. Same results as lmc_trace_reader_next_peek (it is
 * as fast); lmc_trace_reader_decode_args then decodes the args of a record
 * the caller wants, so a pass can decode only the records it needs.
 */
lmc_status lmc_trace_reader_next_record(lmc_trace_reader *r, lmc_trace_record *rec);

/*
 * Decode the whole of rec, the record the last next_record returned, as
 * lmc_trace_reader_next would have (args through the codecs, t_wall),
 * except that offset stays 0.
 * LMC_OK; LMC_ERR_FORMAT or LMC_ERR_NOMEM, the reason in err, when its
 * args do not decode (rec keeps t_mono and qualname, args NULL);
 * LMC_ERR_INVALID when no record is current.
 */
lmc_status lmc_trace_reader_decode_args(lmc_trace_reader *r, lmc_trace_record *rec, lmc_error *err);

/*
 * The next record's t_mono and qualname only (fast; args not decoded).
 * The qualname is valid until the next call.
 */
lmc_status lmc_trace_reader_next_peek(lmc_trace_reader *r, double *t_mono, const char **qualname,
                                      size_t *qualname_len);

/*
 * After lmc_trace_reader_next_peek returned LMC_OK: the integer argument
 * name of the record just peeked, into *value. Returns LMC_OK when it was
 * found; LMC_ERR_NOT_FOUND when the record has no argument of that name,
 * or it is not an integer; LMC_ERR_FORMAT when the record's args do not
 * decode; LMC_ERR_INVALID when no record is peeked (before the first
 * peek, after lmc_trace_reader_next, at the end). *value is set only on
 * LMC_OK. Decodes that one record's args, so it is meant for rare records
 * such as the recorder's dropped-count marker.
 */
lmc_status lmc_trace_reader_peek_int_arg(lmc_trace_reader *r, const char *name, int64_t *value);

/* Counters so far. */
uint64_t lmc_trace_reader_records(const lmc_trace_reader *r);   /* returned */
uint64_t lmc_trace_reader_malformed(const lmc_trace_reader *r); /* skipped */
bool lmc_trace_reader_truncated(const lmc_trace_reader *r);     /* tail was cut */

/* Count the records of a file quickly (peek pass); for progress totals. */
lmc_status lmc_trace_count_records(const char *path, uint64_t *count, lmc_error *err);

#endif
