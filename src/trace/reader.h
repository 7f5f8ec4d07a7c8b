/*
 * reader.h -- streaming .lct reader.
 *
 * Owns: the open file, a read buffer, the decoded header and the arenas
 * the current record's args are decoded into (spec/trace-format.md section
 * 1.5).
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
 * Records stream one at a time, in one pass: a pipe (/dev/stdin) reads as
 * well as a file. A record is exactly what LMCache's TraceReader yields
 * (trace/validate.h): every way of reading one -- next_peek for `trace
 * info`, next_record and next for replay, count_records for a total --
 * applies the same checks, so they count the same records. A frame that
 * fails them is malformed: "TraceReader: skipping malformed record at
 * offset P: <err>" is logged and the frame skipped. A truncated tail (1-3
 * prefix bytes, or a short body) logs "TraceReader: truncated frame ... at
 * offset P" and ends the stream. Frames may be as long as the u32 prefix
 * says (4 GiB - 1); the buffer grows to the largest frame only once the
 * file has really supplied its bytes, and shrinks back after it.
 *
 * A record's args are decoded only when asked for (next, or next_record
 * then decode_args), straight from the bytes. A record whose args do not
 * decode through the codecs is still a record (args_error says why), as
 * LMCache's replay skips it but its reader yields it. Decoding one record
 * takes at most LMC_TRACE_DECODE_FACTOR times its frame plus
 * LMC_TRACE_DECODE_SLACK bytes; args that would need more (only lists or
 * maps of very many tiny values can) do not decode, with a message saying
 * so.
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

/* The bound on one record's decoded args: FACTOR x its frame + SLACK bytes. */
#define LMC_TRACE_DECODE_FACTOR 8u
#define LMC_TRACE_DECODE_SLACK (1u << 20)

typedef struct lmc_trace_reader lmc_trace_reader;

lmc_status lmc_trace_reader_open(const char *path, lmc_trace_reader **out, lmc_error *err);
void lmc_trace_reader_close(lmc_trace_reader *r); /* NULL is fine */

const lmc_trace_header *lmc_trace_reader_header(const lmc_trace_reader *r);

/*
 * The next record, args not decoded (rec->args NULL, args_decoded false).
 * Valid until the next call. LMC_OK, or LMC_ERR_EOF at the end (clean or
 * truncated), or LMC_ERR_IO (logged) if read(2) fails; after the end,
 * always LMC_ERR_EOF.
 */
lmc_status lmc_trace_reader_next_record(lmc_trace_reader *r, lmc_trace_record *rec);

/*
 * Decode the args of rec, the record the last call returned, through the
 * codecs (a no-op when they are decoded already). LMC_OK, or
 * LMC_ERR_FORMAT/LMC_ERR_NOMEM with the reason in err and in
 * rec->args_error (rec->args then NULL).
 */
lmc_status lmc_trace_reader_decode_args(lmc_trace_reader *r, lmc_trace_record *rec, lmc_error *err);

/*
 * next_record, then decode_args. A record whose args do not decode still
 * returns LMC_OK, with no args and args_error set.
 */
lmc_status lmc_trace_reader_next(lmc_trace_reader *r, lmc_trace_record *rec);

/*
 * The next record's t_mono and qualname only (nothing decoded). The
 * qualname (not NUL-terminated; it may hold NUL) is valid until the next
 * call.
 */
lmc_status lmc_trace_reader_next_peek(lmc_trace_reader *r, double *t_mono, const char **qualname,
                                      size_t *qualname_len);

/*
 * The integer argument `name` of the record just returned (by any next
 * call; the last one when the name repeats), read from its bytes without
 * decoding the others. peek_u64_arg: LMC_OK with *value; LMC_ERR_NOT_FOUND
 * when the record has no integer argument of that name; LMC_ERR_FORMAT when
 * it is a negative integer; LMC_ERR_INVALID when no record is current
 * (before the first, at the end). peek_int_arg is the same for a value that
 * fits int64_t (LMC_ERR_NOT_FOUND for one above INT64_MAX).
 */
lmc_status lmc_trace_reader_peek_u64_arg(lmc_trace_reader *r, const char *name, uint64_t *value);
lmc_status lmc_trace_reader_peek_int_arg(lmc_trace_reader *r, const char *name, int64_t *value);

/*
 * The recorder's dropped-records marker (LMC_TRACE_DROPPED_QUALNAME), the
 * record just returned: add its dropped_count, an unsigned 64-bit count, to
 * *total (saturating). A negative or missing count is reported once and
 * ignored, never wrapped around.
 */
void lmc_trace_reader_add_dropped_count(lmc_trace_reader *r, uint64_t *total);

/* Counters so far. */
uint64_t lmc_trace_reader_records(const lmc_trace_reader *r);   /* returned */
uint64_t lmc_trace_reader_malformed(const lmc_trace_reader *r); /* frames skipped */
bool lmc_trace_reader_truncated(const lmc_trace_reader *r);     /* tail was cut */

/*
 * Count the records of a file (the next_peek pass), for progress totals.
 * A path that is not a regular file (a pipe, /dev/stdin) cannot be read
 * twice: LMC_ERR_UNSUPPORTED, *count 0, nothing read from it.
 */
lmc_status lmc_trace_count_records(const char *path, uint64_t *count, lmc_error *err);

#endif
