/*
 * thread_test_util.h -- this process's threads by name, as the tests that
 * check a module's thread names and lifetimes read them (/proc/self/task).
 */
#ifndef LMC_TEST_THREAD_TEST_UTIL_H
#define LMC_TEST_THREAD_TEST_UTIL_H

#include <stddef.h>

/* Threads whose name starts with prefix and, unless suffix is NULL, ends with suffix. */
size_t thread_test_count(const char *prefix, const char *suffix);

/*
 * thread_test_count once it equals want, or after 1 s: a new thread names
 * itself only once it runs, and a joined one can linger in /proc/self/task
 * for a moment after pthread_join returns (the kernel clears the tid
 * before it reaps the task).
 */
size_t thread_test_settle(const char *prefix, const char *suffix, size_t want);

#endif
