/*
 * file_test_util.h -- files a test plants where the code under test must
 * not write (a symlink's target, a file under a predictable name).
 */
#ifndef LMC_TEST_FILE_TEST_UTIL_H
#define LMC_TEST_FILE_TEST_UTIL_H

/* Create path holding "precious" (fails the test on error). */
void file_test_plant_victim(const char *path);
/* path still holds exactly "precious". */
void file_test_assert_victim(const char *path);

/* Skip the calling test unless /dev/full is the character device it should be. */
void file_test_need_dev_full(void);
/* /dev/full is still a character device (a rename over it would make it a file). */
void file_test_assert_dev_full_kept(void);

#endif
