/*
 * file.h -- creating the files a program writes where others may plant
 * links: a trace, counters, reports, replay outputs, sliced traces.
 *
 * Owns nothing. The rule (docs/security.md, "Files"): a file is created
 * with mode 0600 and opened without following a symlink in its last
 * component (O_NOFOLLOW); an exclusive create (a name the program chose,
 * e.g. the default trace path) also refuses a file that exists (O_EXCL);
 * otherwise an existing regular file the user owns is truncated and set to
 * mode 0600, and one that another user owns is refused. Non-regular files
 * (/dev/null, a FIFO) are opened as they are.
 *
 * Threads: reentrant.
 */
#ifndef LMC_CORE_FILE_H
#define LMC_CORE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lmcache/status.h"

/*
 * Open path for writing by the rule above; *fd_out is O_CLOEXEC. Errors
 * name the file: LMC_ERR_INVALID for a symlink or another user's file,
 * LMC_ERR_BUSY when exclusive and it exists, LMC_ERR_IO otherwise.
 * what names the file in messages ("trace file").
 */
lmc_status lmc_file_create(const char *what, const char *path, bool exclusive, int *fd_out,
                           lmc_error *err);

/*
 * The offline tools' outputs (replay results, reports, sliced and synthetic
 * traces) follow the same rule, with messages "cannot write WHAT 'PATH':
 * why" (WHAT is the flag that named the file; NULL or "" for none): never
 * through a symlink (refused, unless it leads to our own standard output
 * or error, as /dev/stdout does: that is written through a dup of the
 * descriptor), never another user's file, mode 0600, and a device or FIFO
 * that exists (/dev/null, /dev/full) written as it is.
 *
 * lmc_file_fopen: a stream for a file written as it goes (per-record
 * JSONL, a synthetic trace), created or truncated. *out is NULL on error.
 */
lmc_status lmc_file_fopen(const char *what, const char *path, FILE **out, lmc_error *err);

/*
 * An output written whole, then put in place (a sliced trace, a report, a
 * summary): its bytes go to a new file beside path (mkostemp: created
 * exclusively, mode 0600) and commit renames it over path, so no reader
 * sees half of it and a failure leaves path as it was. path must not be a
 * symlink, a directory or another user's file. An existing path that is
 * not a regular file (/dev/null, a FIFO, a terminal) is written in place,
 * never replaced: renaming over /dev/full would put a file in the
 * device's place.
 */
typedef struct lmc_file_out {
    const char *what, *path; /* borrowed until commit or abort */
    char tmp[4096];          /* the file beside path; "" when writing path in place */
    int fd;                  /* -1 once committed or aborted */
} lmc_file_out;

/* An lmc_file_out not opened yet: abort on it does nothing. */
#define LMC_FILE_OUT_INIT ((lmc_file_out){.fd = -1})

lmc_status lmc_file_out_open(lmc_file_out *o, const char *what, const char *path, lmc_error *err);
/* Would open succeed now? The same checks, and a file made beside path and
 * removed again; a device or FIFO is not opened. Leaves nothing behind. */
lmc_status lmc_file_out_check(const char *what, const char *path, lmc_error *err);
/* All n bytes, or an error that names the file. */
lmc_status lmc_file_out_write(lmc_file_out *o, const void *data, size_t n, lmc_error *err);
/* fsync, close, rename over path, fsync the directory; on error, as abort. */
lmc_status lmc_file_out_commit(lmc_file_out *o, lmc_error *err);
/* Close and remove the file beside path (nothing when committed). Idempotent. */
void lmc_file_out_abort(lmc_file_out *o);
/* open, write, commit: text (its strlen) as the whole of path. */
lmc_status lmc_file_write_all(const char *what, const char *path, const char *text, lmc_error *err);

/*
 * LMC_ERR_IO with the outputs' message for a write to a stream from
 * lmc_file_fopen that failed (fwrite, fflush or fclose): "cannot write
 * WHAT 'PATH': strerror(errnum)".
 */
lmc_status lmc_file_write_error(const char *what, const char *path, int errnum, lmc_error *err);

/*
 * A random value for a name the program chooses (a trace path, a shared
 * memory region) when a predictable one may be taken: by a file left from
 * an earlier process with the same pid, or planted. From getrandom(2);
 * rand() if that fails.
 */
uint32_t lmc_file_nonce(void);

#endif
