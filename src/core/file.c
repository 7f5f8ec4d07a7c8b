/*
 * file.c -- creating files by the rule of file.h.
 */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Every opener's messages: "cannot write --csv 'x': why" ("cannot write 'x':
 * why" when what is NULL or ""), as the offline tools have always said.
 */
static lmc_status write_error(lmc_error *err, lmc_status code, const char *what, const char *path,
                              const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static lmc_status write_error(lmc_error *err, lmc_status code, const char *what, const char *path,
                              const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    bool named = what != NULL && what[0] != '\0';
    return lmc_error_set(err, code, "cannot write %s%s'%s': %s", named ? what : "",
                         named ? " " : "", path, why);
}

/* Why a symbolic link is not written through (every opener's message). */
#define LINK_REFUSED "it is a symbolic link: refusing to write through it"

/* A regular file at path (its stat st) may be written only if it is ours. */
static lmc_status check_owner(const char *what, const char *path, const struct stat *st,
                              lmc_error *err)
{
    if (st->st_uid == geteuid())
        return LMC_OK;
    return write_error(err, LMC_ERR_INVALID, what, path,
                       "it belongs to uid %u: refusing to overwrite another user's file",
                       (unsigned)st->st_uid);
}

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
            return write_error(err, LMC_ERR_INVALID, what, path, "%s", LINK_REFUSED);
        if (e == EEXIST)
            return write_error(err, LMC_ERR_BUSY, what, path, "it exists already");
        return write_error(err, LMC_ERR_IO, what, path, "cannot create it: %s", strerror(e));
    }
    struct stat st;
    lmc_status rc = LMC_OK;
    if (fstat(fd, &st) != 0) {
        rc = write_error(err, LMC_ERR_IO, what, path, "cannot stat it: %s", strerror(errno));
    } else if (S_ISREG(st.st_mode)) {
        rc = check_owner(what, path, &st, err);
        if (rc == LMC_OK && (st.st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0)
            rc = write_error(err, LMC_ERR_IO, what, path, "cannot set mode 0600: %s",
                             strerror(errno));
        else if (rc == LMC_OK && st.st_size > 0 && ftruncate(fd, 0) != 0)
            rc =
                write_error(err, LMC_ERR_IO, what, path, "cannot truncate it: %s", strerror(errno));
    }
    if (rc != LMC_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return LMC_OK;
}

/* Our standard output or error when path leads to it (/dev/stdout, /proc/self/fd/2), else -1. */
static int own_stream(const char *path)
{
    struct stat t, s;
    if (stat(path, &t) != 0)
        return -1;
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
        if (fstat(fd, &s) == 0 && s.st_dev == t.st_dev && s.st_ino == t.st_ino)
            return fd;
    return -1;
}

/*
 * What path is now, by the rule of the outputs: absent or a regular file
 * of ours (*beside: write a file beside it), a device or FIFO (!*beside:
 * write it in place), or an error. A symlink is refused, even where a
 * rename would replace the link rather than follow it (/dev/stdout is a
 * link, and replacing it as root breaks the machine), unless it leads to
 * our own standard output or error: *own is then that descriptor, to
 * write through a dup of it (sharing its offset, so a redirected stdout
 * is appended to, not overwritten from its start); else -1.
 */
static lmc_status out_target(const char *what, const char *path, bool *beside, int *own,
                             lmc_error *err)
{
    *beside = true;
    *own = -1;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return LMC_OK;
        return write_error(err, LMC_ERR_IO, what, path, "%s", strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        *own = own_stream(path);
        if (*own >= 0) {
            *beside = false;
            return LMC_OK;
        }
        return write_error(err, LMC_ERR_INVALID, what, path, "%s", LINK_REFUSED);
    }
    if (S_ISDIR(st.st_mode))
        return write_error(err, LMC_ERR_IO, what, path, "%s", strerror(EISDIR));
    if (!S_ISREG(st.st_mode)) {
        *beside = false; /* a device or a FIFO: written in place, never replaced by a file */
        return LMC_OK;
    }
    return check_owner(what, path, &st, err);
}

/*
 * path opened for writing where it is: through a dup of our own stream
 * (own >= 0), else with O_NOFOLLOW, so a link planted since out_target
 * looked is refused (ELOOP), not followed. The fd, or -1 with errno.
 */
static int open_in_place(const char *path, int own, int flags)
{
    if (own >= 0)
        return fcntl(own, F_DUPFD_CLOEXEC, 0);
    return open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
}

lmc_status lmc_file_fopen(const char *what, const char *path, FILE **out, lmc_error *err)
{
    *out = NULL;
    bool beside;
    int own;
    lmc_status st = out_target(what, path, &beside, &own, err);
    if (st != LMC_OK)
        return st;
    int fd = open_in_place(path, own, O_CREAT | O_TRUNC);
    if (fd < 0)
        return write_error(err, errno == ELOOP ? LMC_ERR_INVALID : LMC_ERR_IO, what, path, "%s",
                           errno == ELOOP ? LINK_REFUSED : strerror(errno));
    struct stat fs;
    if (beside && fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && (fs.st_mode & 07777) != 0600)
        (void)fchmod(fd, 0600); /* an existing file of ours keeps its data private too */
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        int e = errno;
        close(fd);
        return write_error(err, LMC_ERR_NOMEM, what, path, "%s", strerror(e));
    }
    *out = f;
    return LMC_OK;
}

/* The part of lmc_file_out_open after out_target: open path in place, or make the file beside it.
 */
static lmc_status out_start(lmc_file_out *o, bool beside, int own, lmc_error *err)
{
    if (!beside) {
        o->fd = open_in_place(o->path, own, 0);
        if (o->fd < 0)
            return write_error(err, LMC_ERR_IO, o->what, o->path, "%s", strerror(errno));
        return LMC_OK;
    }
    if (snprintf(o->tmp, sizeof(o->tmp), "%s.XXXXXX", o->path) >= (int)sizeof(o->tmp)) {
        o->tmp[0] = '\0';
        return write_error(err, LMC_ERR_INVALID, o->what, o->path, "the path is too long");
    }
    /* O_EXCL: a name planted beside path (a link, a file) is an error, never followed. */
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd < 0) {
        int e = errno;
        o->tmp[0] = '\0'; /* nothing of ours to remove */
        return write_error(err, LMC_ERR_IO, o->what, o->path, "%s", strerror(e));
    }
    return LMC_OK;
}

lmc_status lmc_file_out_open(lmc_file_out *o, const char *what, const char *path, lmc_error *err)
{
    *o = (lmc_file_out){.what = what, .path = path, .fd = -1};
    bool beside;
    int own;
    lmc_status st = out_target(what, path, &beside, &own, err);
    return st != LMC_OK ? st : out_start(o, beside, own, err);
}

lmc_status lmc_file_out_check(const char *what, const char *path, lmc_error *err)
{
    bool beside;
    int own;
    lmc_status st = out_target(what, path, &beside, &own, err);
    if (st != LMC_OK || !beside)
        return st; /* a device or FIFO is not opened: a FIFO would wait for its reader */
    lmc_file_out o = {.what = what, .path = path, .fd = -1};
    st = out_start(&o, beside, own, err);
    lmc_file_out_abort(&o);
    return st;
}

lmc_status lmc_file_out_write(lmc_file_out *o, const void *data, size_t n, lmc_error *err)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(o->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            return write_error(err, LMC_ERR_IO, o->what, o->path, "%s", strerror(e));
        }
        p += w;
        n -= (size_t)w;
    }
    return LMC_OK;
}

void lmc_file_out_abort(lmc_file_out *o)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0] != '\0')
        unlink(o->tmp);
    o->tmp[0] = '\0';
}

/* Sync the directory that holds path, so that a rename into it lasts (best effort). */
static void sync_dir_of(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd); /* the file itself is synced already */
        close(dfd);
    }
}

lmc_status lmc_file_out_commit(lmc_file_out *o, lmc_error *err)
{
    lmc_status st = LMC_OK;
    bool replace = o->tmp[0] != '\0';
    if (replace && fsync(o->fd) != 0)
        st = write_error(err, LMC_ERR_IO, o->what, o->path, "cannot sync: %s", strerror(errno));
    int fd = o->fd;
    o->fd = -1;
    if (close(fd) != 0 && st == LMC_OK)
        st = write_error(err, LMC_ERR_IO, o->what, o->path, "cannot close: %s", strerror(errno));
    if (st == LMC_OK && replace && rename(o->tmp, o->path) != 0)
        st = write_error(err, LMC_ERR_IO, o->what, o->path, "cannot rename '%s' over it: %s",
                         o->tmp, strerror(errno));
    if (st != LMC_OK) {
        lmc_file_out_abort(o);
        return st;
    }
    o->tmp[0] = '\0'; /* committed: nothing to remove */
    if (replace)
        sync_dir_of(o->path);
    return LMC_OK;
}

lmc_status lmc_file_write_error(const char *what, const char *path, int errnum, lmc_error *err)
{
    return write_error(err, LMC_ERR_IO, what, path, "%s", strerror(errnum));
}

lmc_status lmc_file_write_all(const char *what, const char *path, const char *text, lmc_error *err)
{
    lmc_file_out o;
    lmc_status st = lmc_file_out_open(&o, what, path, err);
    if (st == LMC_OK)
        st = lmc_file_out_write(&o, text, strlen(text), err);
    if (st == LMC_OK)
        return lmc_file_out_commit(&o, err);
    lmc_file_out_abort(&o);
    return st;
}

uint32_t lmc_file_nonce(void)
{
    uint32_t x = 0;
    if (getrandom(&x, sizeof(x), 0) != sizeof(x))
        x = (uint32_t)rand();
    return x;
}
