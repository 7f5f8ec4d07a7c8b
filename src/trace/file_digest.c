/*
 * file_digest.c -- XXH3-128 of a trace file's bytes (see file_digest.h).
 *
 * Owns nothing past a call: one descriptor and a read buffer, both
 * released before it returns. The file is read with read(2) rather than
 * mapped, as the reader does, so a file truncated meanwhile cannot raise
 * SIGBUS.
 *
 * Threads: none; reentrant.
 */
#include "trace/file_digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/digest.h"

#define READ_SIZE (1u << 20)

lmc_status lmc_trace_file_digest(const char *path, char hex[LMC_TRACE_DIGEST_HEX_LEN + 1],
                                 lmc_error *err)
{
    hex[0] = '\0';
    lmc_status st = LMC_OK;
    uint8_t *buf = NULL;
    XXH3_state_t *state = NULL;
    /* Checked before opening: opening a FIFO with no writer would block. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "trace file '%s': not a regular file, so it has no digest", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return lmc_error_set(err, e == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                             "trace file '%s': cannot open: %s", path, strerror(e));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                           "trace file '%s': not a regular file, so it has no digest", path);
        goto out;
    }
    buf = malloc(READ_SIZE);
    state = XXH3_createState();
    if (buf == NULL || state == NULL || XXH3_128bits_reset(state) != XXH_OK) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "trace file '%s': out of memory", path);
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, buf, READ_SIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = lmc_error_set(err, LMC_ERR_IO, "trace file '%s': cannot read: %s", path,
                               strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        XXH3_128bits_update(state, buf, (size_t)n);
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state));
    lmc_hex_encode(c.digest, sizeof(c.digest), hex);

out:
    XXH3_freeState(state);
    free(buf);
    close(fd);
    return st;
}
