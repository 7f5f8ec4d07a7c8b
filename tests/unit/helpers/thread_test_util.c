/*
 * thread_test_util.c -- see thread_test_util.h.
 */
#include "helpers/thread_test_util.h"

/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

size_t thread_test_count(const char *prefix, const char *suffix)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], name[64] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread ended meanwhile */
        if (fgets(name, sizeof(name), f) != NULL) {
            name[strcspn(name, "\n")] = '\0';
            size_t len = strlen(name), sl = suffix != NULL ? strlen(suffix) : 0;
            n += strncmp(name, prefix, strlen(prefix)) == 0 &&
                 (suffix == NULL || (len >= sl && strcmp(name + len - sl, suffix) == 0));
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

size_t thread_test_settle(const char *prefix, const char *suffix, size_t want)
{
    size_t n = thread_test_count(prefix, suffix);
    for (int i = 0; i < 1000 && n != want; i++) {
        usleep(1000);
        n = thread_test_count(prefix, suffix);
    }
    return n;
}
