/*
 * recorder.h -- writes captured calls to a .lct file.
 *
 * Owns: the output file, the batch buffers (a batch pipe of 4, about
 * 512 KiB each at most), the writer thread "trace-writer", the deferred
 * header and the drop count (seed section 5; spec/trace-format.md section
 * 5). It is an event-bus subscriber: the TRACE_CALL callback runs on the
 * bus's drain thread, turns a captured call into a Record frame (codecs,
 * then msgpack) and appends it to the current batch; a batch goes to the
 * writer thread once it holds 256 KiB, and whenever the bus goes idle, and
 * the writer writes the batches to the file in order, one write(2) each,
 * while the drain thread encodes the next. When the writer falls 4 batches
 * behind, the drain thread waits for it (as it used to wait in write(2)).
 *
 * The header write is deferred: attach_config writes it with the config
 * JSON and digest; otherwise the first record (or close) writes one with
 * empty config and digest. So a header is never rewritten in place and the
 * file is always readable.
 *
 * A frame is never split across a failed write: when a write fails or is
 * short, the file is truncated back to the last complete frame and the
 * batch's records are dropped and counted (and a header lost that way is
 * written again, with empty config and digest, in front of the next
 * batch). Unencodable records are dropped and counted too. At close the count is logged, and when it is not zero a
 * final record with qualname LMC_TRACE_DROPPED_QUALNAME and args
 * {"dropped_count": N} is written (LMCache's reader accepts it as an
 * ordinary record; its replay skips it as an unknown qualname).
 *
 * Threads: the callback runs on the drain thread; attach/write_record/
 * flush/close may run on any thread. One mutex serialises the encoding
 * side (the current batch, the header and closed flags); the file belongs
 * to the writer thread until close joins it (recorder.c has the details).
 * attach_config, flush and close return only once their bytes are in the
 * file (or counted as dropped); records and writes count what the writer
 * has written so far, and every record encoded before close is written,
 * in order, before close returns.
 */
#ifndef LMC_TRACE_RECORDER_H
#define LMC_TRACE_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "obs/event_bus.h"
#include "trace/value.h"

#define LMC_TRACE_DROPPED_QUALNAME "lmcache.trace.recorder.dropped_records"

typedef struct lmc_trace_recorder lmc_trace_recorder;

/*
 * Create path by core/file.h's rule (mode 0600, never through a symlink;
 * an existing file of the user's is truncated and set to 0600, another
 * user's refused), note the start times, turn the trace gate on (when
 * captures_calls), log the path at INFO.
 */
lmc_status lmc_trace_recorder_open(const char *path, const char *level, bool captures_calls,
                                   lmc_trace_recorder **out, lmc_error *err);
/* The same; exclusive also refuses a path that exists (LMC_ERR_BUSY). */
lmc_status lmc_trace_recorder_create(const char *path, const char *level, bool captures_calls,
                                     bool exclusive, lmc_trace_recorder **out, lmc_error *err);

/* Write the header now with this config (first call only; ignored after). */
void lmc_trace_recorder_attach_config(lmc_trace_recorder *r, const char *config_json,
                                      const char *digest_hex);

/*
 * Append one record (t_mono_abs_s: monotonic seconds; stored relative to
 * the start). Drops and counts it when it cannot be encoded or the
 * recorder is closed.
 */
void lmc_trace_recorder_write_record(lmc_trace_recorder *r, const char *qualname,
                                     const lmc_trace_arg *args, size_t nargs, double t_wall,
                                     double t_mono_abs_s);

/* The bus subscription: TRACE_CALL -> a record; shutdown -> close. */
lmc_event_subscriber lmc_trace_recorder_subscriber(lmc_trace_recorder *r);

/* The bus whose drop count is added to ours (events it could not queue). */
void lmc_trace_recorder_set_bus(lmc_trace_recorder *r, lmc_event_bus *bus);

/* Send buffered frames to the file now, and wait until they are written. */
void lmc_trace_recorder_flush(lmc_trace_recorder *r);

/*
 * The bus ran dry (its idle hook): hand the buffered records to the writer
 * without waiting for it, unless a batch went to the writer in the last
 * 20 ms. A server between requests then writes a few dozen times a second
 * at most, not after every pause of the bus (which woke the writer ~1,000
 * times a second for a few records each), and a killed server loses the
 * records of about the last 0.1 s at most (the bus's sleep between idle
 * calls, plus the 20 ms).
 */
void lmc_trace_recorder_flush_idle(lmc_trace_recorder *r);

/*
 * Idempotent: gate off, fallback header, flush, dropped-count record, fsync
 * (a failure is logged; close still completes), close the fd, log.
 */
void lmc_trace_recorder_close(lmc_trace_recorder *r);

/* Close if needed and free. */
void lmc_trace_recorder_destroy(lmc_trace_recorder *r);

uint64_t lmc_trace_recorder_dropped(lmc_trace_recorder *r);
uint64_t lmc_trace_recorder_records(lmc_trace_recorder *r); /* written to the file */
/* Batches written to the file whole (the header's write included); each is
 * one write(2) unless the kernel wrote it short. */
uint64_t lmc_trace_recorder_writes(lmc_trace_recorder *r);
const char *lmc_trace_recorder_path(const lmc_trace_recorder *r);
bool lmc_trace_recorder_closed(lmc_trace_recorder *r);

#endif
