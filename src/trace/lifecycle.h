/*
 * lifecycle.h -- turning tracing on in a server (LMCache's
 * maybe_initialize_trace_recorder).
 *
 * Owns nothing after the call: it builds the recorder, attaches the
 * StorageManager config (which writes the header), registers the recorder
 * on the bus, and points the capture hooks at the bus. Shutdown then goes
 * through lmc_event_bus_stop: final drain, then the recorder's shutdown,
 * which closes the file -- so a stopped server always leaves a complete
 * file.
 *
 * Threads: call from the server's start-up thread, before requests arrive.
 */
#ifndef LMC_TRACE_LIFECYCLE_H
#define LMC_TRACE_LIFECYCLE_H

#include <stddef.h>

#include "lmcache/status.h"
#include "obs/event_bus.h"
#include "trace/recorder.h"

/*
 * level NULL or "": tracing off, *out = NULL, LMC_OK. level other than
 * "storage": LMC_ERR_INVALID "unsupported trace level 'x'; expected
 * 'storage'". output NULL or "": $TMPDIR (or /tmp)/lmcache-trace-<pid>-<UTC
 * %Y%m%d-%H%M%S>.lct, announced at INFO, created exclusively (a file or
 * link already there is left alone and a random "-xxxxxxxx" goes before
 * ".lct" instead). An explicit output is created by core/file.h's rule:
 * never through a symlink, an existing file of the user's overwritten with
 * mode 0600, another user's refused.
 */
lmc_status lmc_trace_maybe_init(lmc_event_bus *bus, const char *level, const char *output,
                                const char *config_json, const char *digest_hex,
                                lmc_trace_recorder **out, lmc_error *err);

/* The default output path (for tests): writes into buf, returns buf. */
char *lmc_trace_default_path(char *buf, size_t len);

#endif
