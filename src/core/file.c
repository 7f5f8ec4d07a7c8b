/*
 * file.c -- creating files by the rule of file.h.
 */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

lmc_status lmc_file_create(const char *what, const char *path, bool exclusive, int *fd_out,
                           lmc_error *err)
{
    *fd_out = -1;
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (exclusive ? O_EXCL : 0);
    /* Not O_TRUNC yet: whose file it is decides whether it may be emptied. */
    int fd = open(path, flags, 0600);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "%s '%s' is a symbolic link: refusing to write through it", what,
                                 path);
        if (e == EEXIST)
            return lmc_error_set(err, LMC_ERR_BUSY, "%s '%s' exists already", what, path);
        return lmc_error_set(err, LMC_ERR_IO, "%s '%s': cannot create: %s", what, path,
                             strerror(e));
    }
    struct stat st;
    lmc_status rc = LMC_OK;
    if (fstat(fd, &st) != 0) {
        rc =
            lmc_error_set(err, LMC_ERR_IO, "%s '%s': cannot stat: %s", what, path, strerror(errno));
    } else if (S_ISREG(st.st_mode)) {
        if (st.st_uid != geteuid())
            rc = lmc_error_set(err, LMC_ERR_INVALID,
                               "%s '%s' belongs to uid %u: refusing to overwrite another user's "
                               "file",
                               what, path, (unsigned)st.st_uid);
        else if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0)
            rc = lmc_error_set(err, LMC_ERR_IO, "%s '%s': cannot set mode 0600: %s", what, path,
                               strerror(errno));
        else if (st.st_size > 0 && ftruncate(fd, 0) != 0)
            rc = lmc_error_set(err, LMC_ERR_IO, "%s '%s': cannot truncate: %s", what, path,
                               strerror(errno));
    }
    if (rc != LMC_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return LMC_OK;
}

uint32_t lmc_file_nonce(void)
{
    uint32_t x = 0;
    if (getrandom(&x, sizeof(x), 0) != sizeof(x))
        x = (uint32_t)rand();
    return x;
}
