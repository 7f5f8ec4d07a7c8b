/*
 * test_file.c -- the rule for the files the tools write (core/file.h):
 * outputs written whole go to a file beside the path and are renamed over
 * it; a symlink is refused, never followed or replaced; a device or FIFO
 * is written in place, never replaced; another user's file is refused;
 * every failure leaves nothing behind. lmc_file_create (files written in
 * place: the trace, --counters-output) refuses the same things in the same
 * words.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "helpers/file_test_util.h"
#include "helpers/sm_test_util.h"

typedef struct fixture {
    char *dir;
    char path[512];
    char victim[512];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = sm_test_mkdtemp();
    snprintf(f->path, sizeof(f->path), "%s/out.txt", f->dir);
    snprintf(f->victim, sizeof(f->victim), "%s/victim", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sm_test_rmdir(f->dir);
    free(f);
    return 0;
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return NULL;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* The names in dir, sorted, space-separated ("" when empty). */
static const char *listing(const char *dir)
{
    static char buf[512];
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0) {
            strncat(buf, names[i]->d_name, sizeof(buf) - strlen(buf) - 2);
            strcat(buf, " ");
        }
        free(names[i]);
    }
    free(names);
    return buf;
}

static void test_write_all_replaces_a_file_with_mode_0600_and_leaves_nothing_else(void **state)
{
    fixture *f = *state;
    put(f->path, "old contents");
    chmod(f->path, 0644);
    lmc_error err;
    assert_int_equal(lmc_file_write_all("--csv", f->path, "new", &err), LMC_OK);
    assert_string_equal(slurp(f->path), "new");
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_string_equal(listing(f->dir), "out.txt ");
}

static void test_a_symlink_is_refused_and_left_as_it_is(void **state)
{
    fixture *f = *state;
    put(f->victim, "keep");
    assert_int_equal(symlink(f->victim, f->path), 0);
    lmc_error err;
    FILE *fp = NULL;
    assert_int_equal(lmc_file_fopen("--jsonl-out", f->path, &fp, &err), LMC_ERR_INVALID);
    assert_null(fp);
    char want[640];
    snprintf(want, sizeof(want),
             "cannot write --jsonl-out '%s': it is a symbolic link: refusing to write through it",
             f->path);
    assert_string_equal(err.msg, want);
    assert_string_equal(slurp(f->victim), "keep");
    /* A whole output does not replace the link either (/dev/stdout is one). */
    assert_int_equal(lmc_file_write_all(NULL, f->path, "mine", &err), LMC_ERR_INVALID);
    assert_int_equal(lmc_file_out_check("--html", f->path, &err), LMC_ERR_INVALID);
    struct stat st;
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_string_equal(slurp(f->victim), "keep");
    assert_string_equal(listing(f->dir), "out.txt victim ");
    /* Nor a file written in place (O_NOFOLLOW), in the same words. */
    int fd = -1;
    assert_int_equal(lmc_file_create("trace file", f->path, false, &fd, &err), LMC_ERR_INVALID);
    assert_int_equal(fd, -1);
    snprintf(want, sizeof(want),
             "cannot write trace file '%s': it is a symbolic link: refusing to write through it",
             f->path);
    assert_string_equal(err.msg, want);
    assert_string_equal(slurp(f->victim), "keep");
}

static void test_a_link_to_our_own_stderr_is_written_through_it(void **state)
{
    (void)state;
    if (access("/dev/stderr", F_OK) != 0)
        skip();
    int p[2];
    assert_int_equal(pipe(p), 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
    lmc_error err;
    lmc_status st = lmc_file_write_all("--html", "/dev/stderr", "to stderr", &err);
    FILE *fp = NULL;
    lmc_status st2 = lmc_file_fopen("--jsonl-out", "/dev/stderr", &fp, &err);
    if (fp != NULL) {
        fputs(" and on", fp);
        fclose(fp);
    }
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    char got[64] = {0};
    ssize_t n = read(p[0], got, sizeof(got) - 1);
    close(p[0]);
    assert_int_equal(st, LMC_OK);
    assert_int_equal(st2, LMC_OK);
    assert_true(n > 0);
    assert_string_equal(got, "to stderr and on");
    struct stat ls;
    assert_int_equal(lstat("/dev/stderr", &ls), 0);
    assert_true(S_ISLNK(ls.st_mode));
}

static void test_dev_null_is_written_in_place_and_stays_a_device(void **state)
{
    (void)state;
    struct stat before, after;
    assert_int_equal(stat("/dev/null", &before), 0);
    lmc_error err;
    assert_int_equal(lmc_file_out_check("--html", "/dev/null", &err), LMC_OK);
    assert_int_equal(lmc_file_write_all("--html", "/dev/null", "<html></html>", &err), LMC_OK);
    FILE *fp = NULL;
    assert_int_equal(lmc_file_fopen("--jsonl-out", "/dev/null", &fp, &err), LMC_OK);
    fputs("{}\n", fp);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(stat("/dev/null", &after), 0);
    assert_true(S_ISCHR(after.st_mode));
    assert_int_equal(after.st_rdev, before.st_rdev);
    assert_int_equal(after.st_mode, before.st_mode);
}

static void test_a_full_device_is_an_error_naming_it_and_is_not_replaced(void **state)
{
    (void)state;
    file_test_need_dev_full();
    lmc_error err;
    assert_int_equal(lmc_file_write_all("-o", "/dev/full", "bytes", &err), LMC_ERR_IO);
    assert_string_equal(err.msg, "cannot write -o '/dev/full': No space left on device");
    file_test_assert_dev_full_kept();
}

typedef struct fifo_reader {
    const char *path;
    char got[64];
} fifo_reader;

static void *read_fifo(void *arg)
{
    fifo_reader *r = arg;
    int fd = open(r->path, O_RDONLY);
    size_t n = 0;
    ssize_t k;
    while (fd >= 0 && n < sizeof(r->got) - 1 &&
           (k = read(fd, r->got + n, sizeof(r->got) - 1 - n)) > 0)
        n += (size_t)k;
    r->got[n] = '\0';
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void test_a_fifo_is_written_in_place_and_check_does_not_open_it(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkfifo(f->path, 0600), 0);
    lmc_error err;
    /* No reader: a check that opened the FIFO would wait here for ever. */
    assert_int_equal(lmc_file_out_check(NULL, f->path, &err), LMC_OK);
    fifo_reader r = {.path = f->path};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_fifo, &r), 0);
    assert_int_equal(lmc_file_write_all(NULL, f->path, "through the pipe", &err), LMC_OK);
    pthread_join(t, NULL);
    assert_string_equal(r.got, "through the pipe");
    struct stat st;
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_string_equal(listing(f->dir), "out.txt ");
}

static void test_a_directory_or_a_missing_one_is_an_error_and_leaves_nothing(void **state)
{
    fixture *f = *state;
    lmc_error err;
    char want[1024];
    assert_int_equal(lmc_file_write_all("--output", f->dir, "x", &err), LMC_ERR_IO);
    snprintf(want, sizeof(want), "cannot write --output '%s': Is a directory", f->dir);
    assert_string_equal(err.msg, want);
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/nodir/x.csv", f->dir);
    assert_int_equal(lmc_file_out_check(NULL, missing, &err), LMC_ERR_IO);
    snprintf(want, sizeof(want), "cannot write '%s': No such file or directory", missing);
    assert_string_equal(err.msg, want);
    FILE *fp = NULL;
    assert_int_equal(lmc_file_fopen("--jsonl-out", missing, &fp, &err), LMC_ERR_IO);
    int fd = -1;
    assert_int_equal(lmc_file_create("trace file", missing, true, &fd, &err), LMC_ERR_IO);
    assert_int_equal(fd, -1);
    snprintf(want, sizeof(want), "cannot write trace file '%s': cannot create it: %s", missing,
             strerror(ENOENT));
    assert_string_equal(err.msg, want);
    assert_string_equal(listing(f->dir), "");
}

static void test_check_leaves_an_existing_file_as_it_was(void **state)
{
    fixture *f = *state;
    put(f->path, "old");
    lmc_error err;
    assert_int_equal(lmc_file_out_check("--csv", f->path, &err), LMC_OK);
    assert_string_equal(slurp(f->path), "old");
    assert_string_equal(listing(f->dir), "out.txt ");
}

static void test_an_abandoned_output_is_removed_and_the_old_file_kept(void **state)
{
    fixture *f = *state;
    put(f->path, "old");
    lmc_file_out o;
    lmc_error err;
    assert_int_equal(lmc_file_out_open(&o, NULL, f->path, &err), LMC_OK);
    assert_int_equal(lmc_file_out_write(&o, "half", 4, &err), LMC_OK);
    lmc_file_out_abort(&o);
    lmc_file_out_abort(&o); /* idempotent */
    assert_string_equal(slurp(f->path), "old");
    assert_string_equal(listing(f->dir), "out.txt ");
}

static void test_another_users_file_is_refused(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0)
        skip(); /* only root can make a file another user's */
    put(f->path, "theirs");
    assert_int_equal(chown(f->path, 12345, 12345), 0);
    lmc_error err;
    assert_int_equal(lmc_file_write_all("--html", f->path, "mine", &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "it belongs to uid 12345: refusing to overwrite"));
    FILE *fp = NULL;
    assert_int_equal(lmc_file_fopen("--jsonl-out", f->path, &fp, &err), LMC_ERR_INVALID);
    int fd = -1; /* and lmc_file_create, which would empty it in place */
    assert_int_equal(lmc_file_create("--counters-output", f->path, false, &fd, &err),
                     LMC_ERR_INVALID);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err.msg, "cannot write --counters-output '"));
    assert_non_null(strstr(err.msg, "it belongs to uid 12345: refusing to overwrite"));
    assert_string_equal(slurp(f->path), "theirs");
}

/*
 * lmc_file_create (the trace file, --counters-output): created 0600 in place,
 * an existing file of ours emptied and made 0600, and every refusal in the
 * outputs' words, leaving what was there as it was.
 */
static void test_create_makes_or_empties_a_file_of_ours_with_mode_0600(void **state)
{
    fixture *f = *state;
    lmc_error err;
    int fd = -1;
    assert_int_equal(lmc_file_create("trace file", f->path, true, &fd, &err), LMC_OK);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "new", 3), 3);
    close(fd);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* exclusive: an existing name is an error, and the file is kept */
    assert_int_equal(lmc_file_create("trace file", f->path, true, &fd, &err), LMC_ERR_BUSY);
    assert_int_equal(fd, -1);
    char want[700];
    snprintf(want, sizeof(want), "cannot write trace file '%s': it exists already", f->path);
    assert_string_equal(err.msg, want);
    assert_string_equal(slurp(f->path), "new");

    /* not exclusive: ours is emptied and made private again */
    assert_int_equal(chmod(f->path, 0644), 0);
    assert_int_equal(lmc_file_create("--counters-output", f->path, false, &fd, &err), LMC_OK);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_write_all_replaces_a_file_with_mode_0600_and_leaves_nothing_else, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_symlink_is_refused_and_left_as_it_is, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_link_to_our_own_stderr_is_written_through_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dev_null_is_written_in_place_and_stays_a_device, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_full_device_is_an_error_naming_it_and_is_not_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fifo_is_written_in_place_and_check_does_not_open_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_directory_or_a_missing_one_is_an_error_and_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_leaves_an_existing_file_as_it_was, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_abandoned_output_is_removed_and_the_old_file_kept,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_another_users_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_makes_or_empties_a_file_of_ours_with_mode_0600,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
