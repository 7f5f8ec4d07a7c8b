/*
 * file.h -- creating the files a program writes where others may plant
 * links: a trace, counters, reports.
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
#include <stdint.h>

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
 * A random value for a name the program chooses (a trace path, a shared
 * memory region) when a predictable one may be taken: by a file left from
 * an earlier process with the same pid, or planted. From getrandom(2);
 * rand() if that fails.
 */
uint32_t lmc_file_nonce(void);

#endif
