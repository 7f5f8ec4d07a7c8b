/*
 * fs.c -- the "fs" L2 adapter: one file per key under base_path (spec 8.2).
 *
 * Owns: the files it writes (raw object bytes, no header, written to a tmp
 * file then renamed so a reader never sees half a file), its worker, the
 * lookup lock counts (key -> refcount) and, when max_capacity_gb > 0, the
 * tracked sizes (key -> bytes) that eviction and accounting rely on.
 *
 * Threads: one worker, "l2-fs-<n>" (l2/worker.h: its queue serves lookups
 * first and stores last), runs every task. Unlock and delete run
 * synchronously on the caller's thread. `lock` guards `locks`, `sizes` and
 * `recovered`; file I/O and listener callbacks happen outside it.
 *
 * Deleting a file a reader has open is safe: POSIX keeps it readable. A
 * delete racing a lookup can make the later load miss, which the prefetch
 * path treats like any other miss.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/key_format.h"
#include "core/keymap.h"
#include "core/keyvec.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "l2/adapter_impl.h"
#include "l2/worker.h"

#define COMPONENT "l2-fs"
#define TYPE "fs"
#define DIRECT_ALIGN 4096u
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct fs_adapter {
    lmc_l2_adapter *base;
    char *base_path; /* no trailing '/' */
    char *tmp_dir;   /* base_path/relative_tmp_dir, or NULL: tmp files sit beside the data */
    char *relative_tmp_dir;
    /* Every file is opened relative to these, never through a symlink (O_NOFOLLOW). */
    int base_fd;
    int tmp_fd;         /* base_fd when tmp files sit beside the data */
    int64_t read_ahead; /* 0 = read in one go */
    bool use_odirect;
    bool recover_on_start;
    uint64_t capacity; /* bytes; 0 = unbounded, nothing tracked */

    pthread_mutex_t lock;
    lmc_keymap *locks;    /* key -> lookup lock count (> 0) */
    lmc_keymap *sizes;    /* capacity > 0: key -> file size, the keys eviction may delete */
    lmc_keyvec recovered; /* keys found at start, for late listeners */

    lmc_l2_workers *workers;
    atomic_bool warned_unaligned;
} fs_adapter;

static atomic_uint g_instances; /* numbers the worker threads: l2-fs-0, l2-fs-1, ... */

/* ------------------------------------------------------------------ */
/* Names                                                                */
/* ------------------------------------------------------------------ */

/*
 * Model names in file names. LMCache writes "/" as "-SEP-", which a model
 * name may itself contain ("a/b" and "a-SEP-b" would share files). Here a
 * name whose LMCache spelling reads back as itself -- no '%', no control
 * byte, no "-SEP-" a reader would take for a '/' -- keeps that spelling
 * (the files of such models are LMCache's); any other is percent-encoded
 * ('%', '/', control bytes, and the '-' that starts a literal "-SEP-", as
 * %XX), which always puts a '%' in it. A reader decodes a model part with a
 * '%' by percent-decoding alone and one without by LMCache's rule, so the
 * two forms never meet and every model has a file name of its own.
 */
#define SEP "-SEP-"

static bool model_byte_plain(unsigned char c)
{
    return c != '%' && c != '/' && c >= 0x20 && c != 0x7f;
}

/* LMCache's spelling of model, into out (5 * LMC_MODEL_NAME_MAX + 1 bytes); its length. */
static size_t sep_form(const char *model, char *out)
{
    size_t n = 0;
    for (const char *p = model; *p != '\0'; p++) {
        if (*p == '/') {
            memcpy(out + n, SEP, 5);
            n += 5;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return n;
}

/* LMCache's reading: "-SEP-" as '/', left to right; n bytes of in into out (n + 1 bytes). */
static size_t sep_decode(const char *in, size_t n, char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 5 && memcmp(in + i, SEP, 5) == 0) {
            out[m++] = '/';
            i += 5;
        } else {
            out[m++] = in[i++];
        }
    }
    out[m] = '\0';
    return m;
}

/* Whether LMCache's spelling of model is unambiguous (see above). */
static bool sep_form_ok(const char *model)
{
    size_t ml = strlen(model);
    if (ml > LMC_MODEL_NAME_MAX)
        return false;
    for (size_t i = 0; i < ml; i++)
        if (!model_byte_plain((unsigned char)model[i]) && model[i] != '/')
            return false;
    char enc[5 * LMC_MODEL_NAME_MAX + 1], dec[5 * LMC_MODEL_NAME_MAX + 1];
    size_t el = sep_form(model, enc);
    return sep_decode(enc, el, dec) == ml && memcmp(dec, model, ml) == 0;
}

static void put_model(lmc_fixbuf *o, const char *model)
{
    static const char hex[] = "0123456789ABCDEF";
    if (sep_form_ok(model)) {
        for (const char *p = model; *p != '\0'; p++)
            lmc_fixbuf_append(o, *p == '/' ? SEP : p, *p == '/' ? 5 : 1);
        return;
    }
    for (const char *p = model; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (model_byte_plain(c) && strncmp(p, SEP, 5) != 0) {
            lmc_fixbuf_append(o, p, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 0xF]};
            lmc_fixbuf_append(o, esc, 3);
        }
    }
}

size_t lmc_l2_fs_key_name(const lmc_object_key *key, char *buf, size_t len)
{
    lmc_fixbuf o = LMC_FIXBUF(buf, len);
    put_model(&o, key->model_name != NULL ? key->model_name : "");
    lmc_object_key_put_fields(&o, key);
    lmc_fixbuf_append(&o, ".data", 5);
    return lmc_fixbuf_finish(&o);
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* A %XX digit: either case (the canonical check keeps only put_model's upper case). */
static int hex_digit(char c)
{
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : hex_value(c);
}

/* 1..16 hex digits into *out. */
static bool parse_hex_u64(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 16)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hex_value(s[i]);
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

bool lmc_l2_fs_parse_name(const char *name, lmc_object_key *out)
{
    size_t len = strlen(name);
    if (len <= 5 || len >= 4096 || strcmp(name + len - 5, ".data") != 0)
        return false;
    len -= 5;
    const char *parts[5];
    size_t lens[5];
    size_t np = 0;
    const char *start = name;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && name[i] != '@')
            continue;
        if (np == 5)
            return false;
        parts[np] = start;
        lens[np] = (size_t)(name + i - start);
        np++;
        start = name + i + 1;
    }
    if (np != 4 && np != 5)
        return false;

    /* The two spellings of put_model: percent-encoded when it holds a '%'. */
    char model[4096];
    size_t mlen = 0;
    if (memchr(parts[0], '%', lens[0]) != NULL) {
        for (size_t i = 0; i < lens[0];) {
            int hi, lo;
            if (parts[0][i] != '%') {
                model[mlen++] = parts[0][i++];
            } else if (lens[0] - i >= 3 && (hi = hex_digit(parts[0][i + 1])) >= 0 &&
                       (lo = hex_digit(parts[0][i + 2])) >= 0) {
                model[mlen++] = (char)(hi << 4 | lo);
                i += 3;
            } else {
                return false;
            }
        }
        model[mlen] = '\0';
        if (strlen(model) != mlen)
            return false; /* an encoded NUL */
    } else {
        mlen = sep_decode(parts[0], lens[0], model);
    }

    const char *r = parts[1];
    size_t rlen = lens[1];
    if (rlen < 3 || r[0] != '0' || r[1] != 'x')
        return false;
    bool negative = r[2] == '-';
    uint64_t rank, group;
    if (!parse_hex_u64(r + 2 + negative, rlen - 2 - negative, &rank) ||
        rank > (negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return false;
    if (!parse_hex_u64(parts[2], lens[2], &group) || group > (uint64_t)INT64_MAX)
        return false;

    uint8_t hash[LMC_CHUNK_HASH_MAX];
    if (lens[3] % 2 != 0 || lens[3] / 2 > LMC_CHUNK_HASH_MAX)
        return false;
    for (size_t i = 0; i < lens[3] / 2; i++) {
        int hi = hex_value(parts[3][2 * i]), lo = hex_value(parts[3][2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        hash[i] = (uint8_t)(hi << 4 | lo);
    }
    if (np == 5 && lens[4] == 0)
        return false;

    lmc_object_key key;
    int64_t kv_rank = negative ? (int64_t)(0 - rank) : (int64_t)rank;
    if (lmc_object_key_make_n(&key, hash, lens[3] / 2, model, mlen, kv_rank, (int64_t)group,
                              np == 5 ? parts[4] : "", np == 5 ? lens[4] : 0, NULL) != LMC_OK)
        return false;
    /* Only the canonical spelling counts, so one key never maps to two files. */
    char again[4096];
    if (lmc_l2_fs_key_name(&key, again, sizeof(again)) != len + 5 || strcmp(again, name) != 0)
        return false;
    *out = key;
    return true;
}

/*
 * The file name of key in base_fd, or with tmp its temporary name in
 * tmp_fd. False when it does not fit in a file name.
 */
static bool key_file(const fs_adapter *fs, const lmc_object_key *key, bool tmp, char *buf,
                     size_t len)
{
    char name[NAME_MAX + 1];
    size_t n = lmc_l2_fs_key_name(key, name, sizeof(name));
    if (n >= sizeof(name))
        return false;
    int w;
    if (!tmp || fs->tmp_dir != NULL)
        w = snprintf(buf, len, "%s", name);
    else
        w = snprintf(buf, len, "%.*s.tmp", (int)(n - 5), name);
    return w >= 0 && (size_t)w < len && (size_t)w <= NAME_MAX;
}

/* For messages: the path a name stands for. */
static const char *path_of(const fs_adapter *fs, bool tmp, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", tmp && fs->tmp_dir != NULL ? fs->tmp_dir : fs->base_path, name);
    return buf;
}

/* A regular file (not a link, a FIFO or a directory) named name in dir. */
static bool regular_at(int dir, const char *name, struct stat *st)
{
    return fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode);
}

/* ------------------------------------------------------------------ */
/* File I/O                                                             */
/* ------------------------------------------------------------------ */

static bool direct_ok(fs_adapter *fs, const lmc_memory_obj *obj)
{
    if (!fs->use_odirect)
        return false;
    bool aligned = (uintptr_t)obj->data % DIRECT_ALIGN == 0 && obj->size % DIRECT_ALIGN == 0;
    if (!aligned && !atomic_exchange(&fs->warned_unaligned, true))
        LMC_WARN(COMPONENT,
                 "use_odirect: object of %" PRIu64 " bytes is not %u-aligned; using "
                 "buffered I/O for such objects",
                 obj->size, DIRECT_ALIGN);
    return aligned;
}

/*
 * openat(2) that never follows a symlink, retrying without O_DIRECT where
 * the filesystem refuses it (tmpfs). Files are the server user's alone.
 */
static int open_maybe_direct(int dir, const char *name, int flags, bool direct)
{
    flags |= O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dir, name, flags | (direct ? O_DIRECT : 0), 0600);
    if (fd < 0 && direct && errno == EINVAL)
        fd = openat(dir, name, flags, 0600);
    return fd;
}

/* Write all bytes; 0 or an errno. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            /* O_DIRECT refused at write time: drop it and retry buffered. */
            if (errno == EINVAL && (fcntl(fd, F_GETFL) & O_DIRECT) != 0 &&
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) == 0)
                continue;
            return errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* tmp file then rename onto final; 0 or an errno (the tmp file is removed on failure). */
static int write_file(fs_adapter *fs, const char *tmp, const char *final, const lmc_memory_obj *obj)
{
    int fd = open_maybe_direct(fs->tmp_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC, direct_ok(fs, obj));
    if (fd < 0)
        return errno;
    int e = write_all(fd, obj->data, obj->size);
    if (close(fd) != 0 && e == 0)
        e = errno;
    /* rename replaces whatever sits at final, a link included, without following it. */
    if (e == 0 && renameat(fs->tmp_fd, tmp, fs->base_fd, final) != 0)
        e = errno;
    if (e != 0)
        unlinkat(fs->tmp_fd, tmp, 0);
    return e;
}

/* Fill obj from the file; true only when it was filled completely. */
static bool read_file(fs_adapter *fs, const char *name, const lmc_memory_obj *obj)
{
    bool direct = direct_ok(fs, obj);
    /* O_NONBLOCK: a FIFO planted under the name must not park the worker in open. */
    int fd = open_maybe_direct(fs->base_fd, name, O_RDONLY | O_NONBLOCK, direct);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return false;
    }
    uint64_t done = 0;
    /* The first read asks for read_ahead bytes only (not with O_DIRECT: it needs aligned sizes). */
    uint64_t want = fs->read_ahead > 0 && !direct && (uint64_t)fs->read_ahead < obj->size
                        ? (uint64_t)fs->read_ahead
                        : obj->size;
    while (done < obj->size) {
        ssize_t r = read(fd, obj->data + done, want - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EINVAL && (fcntl(fd, F_GETFL) & O_DIRECT) != 0 &&
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) == 0)
            continue;
        if (r <= 0)
            break;
        done += (uint64_t)r;
        if (done == want)
            want = obj->size;
    }
    close(fd);
    return done == obj->size;
}

/* ------------------------------------------------------------------ */
/* The worker's tasks                                                   */
/* ------------------------------------------------------------------ */

static bool run_store(void *ud, size_t index, lmc_l2_task *t)
{
    fs_adapter *fs = ud;
    char path[NAME_MAX + 1], tmp[NAME_MAX + 1], shown[PATH_MAX];
    bool failed = false;
    uint64_t written = 0;
    size_t nn = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (lmc_l2_workers_stopping(fs->workers)) {
            failed = true; /* shutting down: the rest is not attempted */
            break;
        }
        lmc_object_key key = t->keys[i];
        const lmc_memory_obj *obj = &t->objs[i];
        if (!key_file(fs, &key, false, path, sizeof(path)) ||
            !key_file(fs, &key, true, tmp, sizeof(tmp))) {
            char name[256];
            lmc_object_key_format(&key, name, sizeof(name));
            LMC_WARN(COMPONENT, "store of %s: file name too long", name);
            failed = true;
            continue;
        }
        /* Anything but a regular file (a directory, say) is not data: writing over it fails. */
        struct stat st;
        bool exists = regular_at(fs->base_fd, path, &st);
        uint64_t size = exists ? (uint64_t)st.st_size : obj->size;
        if (!exists) {
            int e = write_file(fs, tmp, path, obj);
            if (e != 0) {
                LMC_WARN(COMPONENT, "store to '%s' failed: %s",
                         path_of(fs, false, path, shown, sizeof(shown)), strerror(e));
                failed = true;
                continue;
            }
            written += obj->size;
        }
        /*
         * With a capacity, a key counts once however it got there (written
         * now, or found on disk untracked); without one, only new writes do.
         */
        bool report = !exists;
        if (fs->capacity > 0) {
            bool tracked;
            pthread_mutex_lock(&fs->lock);
            lmc_l2_count_get(fs->sizes, &key, &tracked);
            lmc_status ps = tracked ? LMC_OK : lmc_l2_count_put(fs->sizes, &key, size);
            pthread_mutex_unlock(&fs->lock);
            report = !tracked && ps == LMC_OK;
            if (ps != LMC_OK)
                LMC_ERROR(COMPONENT, "store to '%s': not tracked (out of memory)",
                          path_of(fs, false, path, shown, sizeof(shown)));
        }
        if (report) {
            t->keys[nn] = key; /* nn <= i: only keys already handled are overwritten */
            t->sizes[nn] = size;
            nn++;
        }
    }
    t->result = failed ? -1 : (int64_t)written;
    lmc_l2_notify_stored(fs->base, t->keys, t->sizes, nn);
    lmc_l2_task_complete(fs->base, t);
    return true;
}

static bool run_lookup(void *ud, size_t index, lmc_l2_task *t)
{
    fs_adapter *fs = ud;
    char name[NAME_MAX + 1];
    struct stat st;
    for (size_t i = 0; i < t->n; i++) {
        if (key_file(fs, &t->keys[i], false, name, sizeof(name)) &&
            regular_at(fs->base_fd, name, &st))
            lmc_bitmap_set(&t->bitmap, i);
    }
    /* Lock before publishing, so eviction cannot delete a hit the caller is about to load. */
    pthread_mutex_lock(&fs->lock);
    lmc_l2_lock_hits(fs->locks, t);
    pthread_mutex_unlock(&fs->lock);
    lmc_l2_task_complete(fs->base, t);
    return true;
}

static bool run_load(void *ud, size_t index, lmc_l2_task *t)
{
    fs_adapter *fs = ud;
    char name[NAME_MAX + 1];
    size_t nn = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (lmc_l2_workers_stopping(fs->workers))
            break;
        if (!key_file(fs, &t->keys[i], false, name, sizeof(name)) ||
            !read_file(fs, name, &t->objs[i]))
            continue;
        lmc_bitmap_set(&t->bitmap, i);
        t->keys[nn++] = t->keys[i];
    }
    lmc_l2_notify_accessed(fs->base, t->keys, nn);
    lmc_l2_task_complete(fs->base, t);
    return true;
}

static lmc_status fs_submit(void *impl, lmc_l2_task_kind kind, uint64_t id,
                            const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n)
{
    return lmc_l2_workers_enqueue(((fs_adapter *)impl)->workers, kind, id, keys, objs, n);
}

/* Synchronous: a count decrement cannot fail, so "eventually" is "now". */
static void fs_submit_unlock(void *impl, const lmc_object_key *keys, size_t n)
{
    fs_adapter *fs = impl;
    pthread_mutex_lock(&fs->lock);
    lmc_l2_unlock_keys(fs->locks, keys, n);
    pthread_mutex_unlock(&fs->lock);
}

static void fs_delete_keys(void *impl, const lmc_object_key *keys, size_t n)
{
    fs_adapter *fs = impl;
    lmc_object_key *victims = malloc(n * sizeof(*victims));
    uint64_t *sizes = malloc(n * sizeof(*sizes));
    if (victims == NULL || sizes == NULL) {
        LMC_ERROR(COMPONENT, "delete of %zu keys skipped (out of memory)", n);
        goto out;
    }
    /* Take the victims out of tracking first, so a second delete cannot pick them too. */
    size_t m = 0;
    pthread_mutex_lock(&fs->lock);
    for (size_t i = 0; i < n; i++) {
        bool present;
        if (lmc_l2_count_get(fs->locks, &keys[i], &present) > 0)
            continue; /* a lookup holds it for a coming load */
        uint64_t size = 0;
        if (fs->capacity > 0) {
            size = lmc_l2_count_get(fs->sizes, &keys[i], &present);
            if (!present)
                continue; /* never accounted, so never ours to evict */
            lmc_keymap_remove(fs->sizes, &keys[i], NULL);
        }
        victims[m] = keys[i];
        sizes[m] = size;
        m++;
    }
    pthread_mutex_unlock(&fs->lock);

    size_t d = 0;
    char name[NAME_MAX + 1], path[PATH_MAX];
    for (size_t i = 0; i < m; i++) {
        if (!key_file(fs, &victims[i], false, name, sizeof(name)))
            continue;
        path_of(fs, false, name, path, sizeof(path));
        if (fs->capacity == 0) {
            struct stat st;
            sizes[i] = fstatat(fs->base_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
                           ? (uint64_t)st.st_size
                           : 0;
        }
        if (unlinkat(fs->base_fd, name, 0) != 0 && errno != ENOENT) {
            LMC_WARN(COMPONENT, "delete of '%s' failed: %s", path, strerror(errno));
            if (fs->capacity > 0) {
                pthread_mutex_lock(&fs->lock);
                if (lmc_l2_count_put(fs->sizes, &victims[i], sizes[i]) != LMC_OK)
                    LMC_ERROR(COMPONENT, "'%s': no longer tracked (out of memory)", path);
                pthread_mutex_unlock(&fs->lock);
            }
            continue;
        }
        victims[d] = victims[i];
        sizes[d] = sizes[i];
        d++;
    }
    lmc_l2_notify_deleted(fs->base, victims, sizes, d);
out:
    free(victims);
    free(sizes);
}

static void fs_replay_recovered(void *impl, const lmc_l2_listener *l)
{
    fs_adapter *fs = impl;
    pthread_mutex_lock(&fs->lock);
    size_t n = fs->recovered.len;
    lmc_object_key *keys = n > 0 ? malloc(n * sizeof(*keys)) : NULL;
    uint64_t *sizes = n > 0 ? malloc(n * sizeof(*sizes)) : NULL;
    size_t m = 0;
    for (size_t i = 0; keys != NULL && sizes != NULL && i < n; i++) {
        bool present;
        uint64_t size = lmc_l2_count_get(fs->sizes, &fs->recovered.keys[i], &present);
        if (!present)
            continue; /* evicted since */
        keys[m] = fs->recovered.keys[i];
        sizes[m] = size;
        m++;
    }
    pthread_mutex_unlock(&fs->lock);
    if (n > 0 && (keys == NULL || sizes == NULL))
        LMC_ERROR(COMPONENT, "replay of %zu recovered keys skipped (out of memory)", n);
    else if (m > 0)
        l->on_stored(l->ud, keys, sizes, m);
    free(keys);
    free(sizes);
}

/* ------------------------------------------------------------------ */
/* Status                                                               */
/* ------------------------------------------------------------------ */

static bool fs_is_healthy(void *impl)
{
    fs_adapter *fs = impl;
    return lmc_l2_workers_get_stats(fs->workers).alive;
}

static void fs_report_status(void *impl, lmc_json *status)
{
    fs_adapter *fs = impl;
    pthread_mutex_lock(&fs->lock);
    size_t tracked = lmc_keymap_size(fs->sizes);
    size_t locked = lmc_keymap_size(fs->locks);
    pthread_mutex_unlock(&fs->lock);
    lmc_l2_workers_stats ws = lmc_l2_workers_get_stats(fs->workers);
    lmc_json_object_set(status, "base_path", lmc_json_string(fs->base_path));
    lmc_json_object_set(status, "relative_tmp_dir",
                        fs->relative_tmp_dir != NULL ? lmc_json_string(fs->relative_tmp_dir)
                                                     : lmc_json_null());
    lmc_json_object_set(status, "use_odirect", lmc_json_bool(fs->use_odirect));
    lmc_json_object_set(status, "worker_alive", lmc_json_bool(ws.alive));
    lmc_json_object_set(status, "files_tracked", lmc_json_int((int64_t)tracked));
    lmc_json_object_set(status, "locked_keys", lmc_json_int((int64_t)locked));
    lmc_json_object_set(status, "pending_tasks", lmc_json_int((int64_t)ws.queued));
}

/* ------------------------------------------------------------------ */
/* Config, create, destroy                                              */
/* ------------------------------------------------------------------ */

static const char *const g_fields[] = {
    "base_path",       "relative_tmp_dir", "read_ahead_size",        "use_odirect",
    "max_capacity_gb", "recover_on_start", "allow_shared_base_path", NULL};

/* Relative, and no ".." component that could climb out of base_path. */
static bool tmp_dir_ok(const char *p)
{
    if (p[0] == '/')
        return false;
    for (const char *c = p; *c != '\0';) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return false;
        c += n;
        if (*c == '/')
            c++;
    }
    return true;
}

static lmc_status fs_check_config(const lmc_json *cfg, lmc_error *err)
{
    const char *s;
    bool b;
    int64_t i;
    double d;
    lmc_status st = lmc_l2_config_check_fields(cfg, TYPE, g_fields, err);
    if (st == LMC_OK)
        st = lmc_l2_config_string(cfg, TYPE, "base_path", true, &s, err);
    if (st == LMC_OK)
        st = lmc_l2_config_string(cfg, TYPE, "relative_tmp_dir", false, &s, err);
    if (st == LMC_OK && s != NULL && !tmp_dir_ok(s))
        st = lmc_l2_config_bad_value(err, TYPE, "relative_tmp_dir",
                                     lmc_json_object_get(cfg, "relative_tmp_dir"),
                                     "a relative path without '..'");
    if (st == LMC_OK)
        st = lmc_l2_config_positive_int(cfg, TYPE, "read_ahead_size", 0, &i, err);
    if (st == LMC_OK)
        st = lmc_l2_config_bool(cfg, TYPE, "use_odirect", false, &b, err);
    if (st == LMC_OK)
        st = lmc_l2_config_number(cfg, TYPE, "max_capacity_gb", false, 0.0, false, 0.0, &d, err);
    if (st == LMC_OK)
        st = lmc_l2_config_bool(cfg, TYPE, "recover_on_start", true, &b, err);
    if (st == LMC_OK)
        st = lmc_l2_config_bool(cfg, TYPE, "allow_shared_base_path", false, &b, err);
    return st;
}

/* mkdir -p (new directories are the user's alone); 0 or an errno. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf))
        return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return errno;
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* Account the files a previous run left; unparsable names and non-files are ignored. */
static void recover(fs_adapter *fs)
{
    int dfd = openat(fs->base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (dir == NULL) {
        if (dfd >= 0)
            close(dfd);
        LMC_WARN(COMPONENT, "recovery: cannot open '%s': %s", fs->base_path, strerror(errno));
        return;
    }
    uint64_t *sizes = NULL;
    size_t cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        lmc_object_key key;
        struct stat st;
        if (!lmc_l2_fs_parse_name(de->d_name, &key) ||
            fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        bool tracked;
        lmc_l2_count_get(fs->sizes, &key, &tracked);
        if (tracked)
            continue;
        if (fs->recovered.len == cap) {
            size_t ncap = cap == 0 ? 64 : cap * 2;
            uint64_t *ns = realloc(sizes, ncap * sizeof(*ns));
            if (ns == NULL)
                break;
            sizes = ns;
            cap = ncap;
        }
        if (lmc_keyvec_push(&fs->recovered, &key) != LMC_OK)
            break;
        if (lmc_l2_count_put(fs->sizes, &key, (uint64_t)st.st_size) != LMC_OK) {
            fs->recovered.len--;
            break;
        }
        sizes[fs->recovered.len - 1] = (uint64_t)st.st_size;
        total += (uint64_t)st.st_size;
    }
    if (de != NULL)
        LMC_ERROR(COMPONENT, "recovery of '%s' stopped early (out of memory)", fs->base_path);
    closedir(dir);
    lmc_l2_notify_stored(fs->base, fs->recovered.keys, sizes, fs->recovered.len);
    if (fs->recovered.len > 0)
        LMC_INFO(COMPONENT, "recovered %zu files (%" PRIu64 " bytes) from '%s'", fs->recovered.len,
                 total, fs->base_path);
    free(sizes);
}

/* ------------------------------------------------------------------ */
/* What a base_path holds (for tools: replay's warning and --clear-l2)   */
/* ------------------------------------------------------------------ */

/*
 * A name this adapter writes: a key's canonical name, or its temporary
 * name (the ".data" swapped for ".tmp" beside the data; the data name
 * itself in relative_tmp_dir).
 */
static bool is_own_name(const char *name, bool in_tmp_dir)
{
    lmc_object_key key;
    if (lmc_l2_fs_parse_name(name, &key))
        return true;
    size_t len = strlen(name);
    if (in_tmp_dir || len <= 4 || len >= NAME_MAX + 8 || strcmp(name + len - 4, ".tmp") != 0)
        return false;
    char data[NAME_MAX + 16];
    snprintf(data, sizeof(data), "%.*s.data", (int)(len - 4), name);
    return lmc_l2_fs_parse_name(data, &key);
}

static lmc_status scan_dir(const char *path, bool in_tmp_dir, bool remove, lmc_l2_fs_objects *out,
                           lmc_error *err)
{
    DIR *dir = opendir(path);
    if (dir == NULL) {
        if (errno == ENOENT)
            return LMC_OK; /* nothing written there yet */
        return lmc_error_set(err, LMC_ERR_IO, "fs L2 adapter: cannot read '%s': %s", path,
                             strerror(errno));
    }
    lmc_status st = LMC_OK;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        struct stat sb;
        /* Regular files only, never through a symlink: nothing else is ours. */
        if (!is_own_name(de->d_name, in_tmp_dir) ||
            fstatat(dirfd(dir), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        out->files++;
        out->bytes += (uint64_t)sb.st_size;
        if (!remove)
            continue;
        if (unlinkat(dirfd(dir), de->d_name, 0) != 0) {
            st = lmc_error_set(err, LMC_ERR_IO, "fs L2 adapter: cannot remove '%s/%s': %s", path,
                               de->d_name, strerror(errno));
            break;
        }
        out->removed++;
    }
    closedir(dir);
    return st;
}

lmc_status lmc_l2_fs_scan(const lmc_json *cfg, bool remove, lmc_l2_fs_objects *out, lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    const char *type = lmc_json_get_string(lmc_json_object_get(cfg, "type"), NULL);
    const char *base = lmc_json_get_string(lmc_json_object_get(cfg, "base_path"), NULL);
    if (type == NULL || strcmp(type, TYPE) != 0 || base == NULL)
        return LMC_OK;
    lmc_status st = scan_dir(base, false, remove, out, err);
    const char *rel = lmc_json_get_string(lmc_json_object_get(cfg, "relative_tmp_dir"), NULL);
    if (st == LMC_OK && rel != NULL && tmp_dir_ok(rel)) {
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof(tmp), "%s/%s", base, rel) < (int)sizeof(tmp))
            st = scan_dir(tmp, true, remove, out, err);
    }
    return st;
}

static void fs_free(fs_adapter *fs)
{
    if (fs->tmp_fd >= 0 && fs->tmp_fd != fs->base_fd)
        close(fs->tmp_fd);
    if (fs->base_fd >= 0)
        close(fs->base_fd);
    lmc_keymap_destroy(fs->locks);
    lmc_keymap_destroy(fs->sizes);
    lmc_keyvec_free(&fs->recovered);
    free(fs->base_path);
    free(fs->tmp_dir);
    free(fs->relative_tmp_dir);
    pthread_mutex_destroy(&fs->lock);
    free(fs);
}

/*
 * A directory the adapter may keep KV data in: this user's and writable by
 * no one else, unless allow_shared_base_path says the operator shares it
 * on purpose. Another user who can write there could plant links or
 * files that the server would serve as some model's KV data.
 */
static lmc_status check_dir(int fd, const char *what, const char *path, bool shared, lmc_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return lmc_error_set(err, LMC_ERR_IO, "--l2-adapter: type 'fs': cannot stat %s '%s': %s",
                             what, path, strerror(errno));
    if (shared)
        return LMC_OK;
    if (st.st_uid != geteuid())
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: type 'fs': %s '%s' belongs to uid %u, not this user "
                             "(uid %u); use a directory of your own, or set "
                             "\"allow_shared_base_path\": true if it is shared on purpose",
                             what, path, (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: type 'fs': %s '%s' is writable by group or others "
                             "(mode %03o); chmod go-w it, or set \"allow_shared_base_path\": "
                             "true if it is shared on purpose",
                             what, path, (unsigned)(st.st_mode & 0777));
    return LMC_OK;
}

/*
 * relative_tmp_dir under base_fd, one component at a time, created where
 * missing and never through a symlink. -1 with errno on failure.
 */
static int open_tmp_dir(int base_fd, const char *rel)
{
    int fd = dup(base_fd);
    for (const char *c = rel; fd >= 0 && *c != '\0';) {
        size_t n = strcspn(c, "/");
        if (n > 0 && !(n == 1 && c[0] == '.')) {
            char comp[NAME_MAX + 1];
            if (n > NAME_MAX) {
                close(fd);
                errno = ENAMETOOLONG;
                return -1;
            }
            memcpy(comp, c, n);
            comp[n] = '\0';
            if (mkdirat(fd, comp, 0700) != 0 && errno != EEXIST) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
            }
            int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int e = errno;
            close(fd);
            errno = e;
            fd = next;
        }
        c += n;
        if (*c == '/')
            c++;
    }
    return fd;
}

static lmc_status fs_create(lmc_l2_adapter *base, const lmc_json *cfg, void **impl, lmc_error *err)
{
    const char *base_path, *rel;
    double gb;
    lmc_status st = LMC_OK;
    fs_adapter *fs = calloc(1, sizeof(*fs));
    if (fs == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type 'fs': out of memory");
    fs->base = base;
    fs->base_fd = fs->tmp_fd = -1;
    bool shared = false;
    pthread_mutex_init(&fs->lock, NULL);
    /* The config was validated by the base, so the reads below cannot fail. */
    lmc_l2_config_string(cfg, TYPE, "base_path", true, &base_path, NULL);
    lmc_l2_config_string(cfg, TYPE, "relative_tmp_dir", false, &rel, NULL);
    lmc_l2_config_positive_int(cfg, TYPE, "read_ahead_size", 0, &fs->read_ahead, NULL);
    lmc_l2_config_bool(cfg, TYPE, "use_odirect", false, &fs->use_odirect, NULL);
    lmc_l2_config_number(cfg, TYPE, "max_capacity_gb", false, 0.0, false, 0.0, &gb, NULL);
    lmc_l2_config_bool(cfg, TYPE, "recover_on_start", true, &fs->recover_on_start, NULL);
    lmc_l2_config_bool(cfg, TYPE, "allow_shared_base_path", false, &shared, NULL);
    /* Clamped: converting a double beyond the range of uint64_t is undefined. */
    fs->capacity = gb * GIB >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)(gb * GIB);

    fs->base_path = strdup(base_path);
    fs->locks = lmc_keymap_create(0);
    fs->sizes = lmc_keymap_create(0);
    if (fs->base_path == NULL || fs->locks == NULL || fs->sizes == NULL)
        goto nomem;
    size_t len = strlen(fs->base_path);
    while (len > 1 && fs->base_path[len - 1] == '/')
        fs->base_path[--len] = '\0';
    int e = make_dirs(fs->base_path);
    /* base_path itself may be a link the operator made; nothing inside it is followed. */
    if (e == 0 && (fs->base_fd = open(fs->base_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        e = errno;
    if (e != 0) {
        st = lmc_error_set(err, LMC_ERR_IO,
                           "--l2-adapter: type 'fs': cannot create base_path '%s': %s",
                           fs->base_path, strerror(e));
        goto fail;
    }
    if ((st = check_dir(fs->base_fd, "base_path", fs->base_path, shared, err)) != LMC_OK)
        goto fail;
    fs->tmp_fd = fs->base_fd;
    if (rel != NULL) {
        fs->relative_tmp_dir = strdup(rel);
        if (fs->relative_tmp_dir == NULL ||
            asprintf(&fs->tmp_dir, "%s/%s", fs->base_path, rel) < 0) {
            fs->tmp_dir = NULL;
            goto nomem;
        }
        size_t tlen = strlen(fs->tmp_dir);
        while (tlen > 1 && fs->tmp_dir[tlen - 1] == '/')
            fs->tmp_dir[--tlen] = '\0';
        if ((fs->tmp_fd = open_tmp_dir(fs->base_fd, rel)) < 0) {
            e = errno;
            st = lmc_error_set(err, LMC_ERR_IO,
                               "--l2-adapter: type 'fs': cannot create relative_tmp_dir '%s': %s%s",
                               fs->tmp_dir, strerror(e),
                               e == ELOOP || e == ENOTDIR ? " (a symlink is not followed)" : "");
            goto fail;
        }
        if ((st = check_dir(fs->tmp_fd, "relative_tmp_dir", fs->tmp_dir, shared, err)) != LMC_OK)
            goto fail;
    }

    lmc_l2_adapter_set_capacity(base, fs->capacity);
    if (fs->capacity > 0 && fs->recover_on_start)
        recover(fs);

    lmc_l2_workers_config wc = {
        .name = "l2-fs",
        .instances = &g_instances,
        .threads = 1,
        .base = base,
        .hooks = {.run = {[LMC_L2_TASK_LOOKUP] = run_lookup,
                          [LMC_L2_TASK_LOAD] = run_load,
                          [LMC_L2_TASK_STORE] = run_store}},
        .ud = fs,
    };
    if ((st = lmc_l2_workers_start(&wc, &fs->workers, err)) != LMC_OK) {
        lmc_error_prefix(err, "--l2-adapter: type 'fs'");
        goto fail;
    }
    *impl = fs;
    return LMC_OK;

nomem:
    st = lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type 'fs': out of memory");
fail:
    fs_free(fs);
    return st;
}

static void fs_destroy(void *impl)
{
    fs_adapter *fs = impl;
    if (fs == NULL)
        return;
    /* A running store gives up between keys; what never ran is reported failed. */
    lmc_l2_workers_destroy(fs->workers);
    fs_free(fs);
}

const lmc_l2_adapter_ops lmc_l2_fs_ops = {
    .type = TYPE,
    .help = "one file per key under base_path: {\"type\": \"fs\", \"base_path\": DIR, "
            "\"max_capacity_gb\": N, \"relative_tmp_dir\": DIR, \"use_odirect\": BOOL, "
            "\"read_ahead_size\": N, \"recover_on_start\": BOOL, \"allow_shared_base_path\": BOOL}",
    .check_config = fs_check_config,
    .create = fs_create,
    .submit = fs_submit,
    .submit_unlock = fs_submit_unlock,
    .delete_keys = fs_delete_keys,
    .report_status = fs_report_status,
    .is_healthy = fs_is_healthy,
    .destroy = fs_destroy,
    .replay_recovered = fs_replay_recovered,
    .virtual_latency_us = 50.0,
    .virtual_bandwidth_gbps = 2.0,
};
