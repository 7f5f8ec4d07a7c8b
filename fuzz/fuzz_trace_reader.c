/*
 * fuzz_trace_reader.c -- libFuzzer target: a whole .lct file.
 *
 * The input is written to a memfd (no file on disk) and opened through
 * /proc/self/fd/N. Pass 1 reads every record with lmc_trace_reader_next
 * (header, frames, Record decoding, the codecs); pass 2, on a second open,
 * walks the peek path (lmc_trace_reader_next_peek plus the int-arg lookup)
 * and lmc_trace_count_records.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "trace/reader.h"

/* Bound the records per input so a long (valid) trace cannot stall the run. */
#define MAX_RECORDS 100000

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmc_log_set_level(LMC_LOG_OFF);
    int fd = memfd_create("fuzz.lct", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (!write_all(fd, data, size))
        goto out;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    lmc_trace_reader *r = NULL;
    if (lmc_trace_reader_open(path, &r, NULL) == LMC_OK) {
        (void)lmc_trace_reader_header(r);
        lmc_trace_record rec;
        for (int i = 0; i < MAX_RECORDS && lmc_trace_reader_next(r, &rec) == LMC_OK; i++)
            ;
        (void)lmc_trace_reader_records(r);
        (void)lmc_trace_reader_malformed(r);
        (void)lmc_trace_reader_truncated(r);
        lmc_trace_reader_close(r);
    }

    r = NULL;
    if (lmc_trace_reader_open(path, &r, NULL) == LMC_OK) {
        double t;
        const char *q;
        size_t qlen;
        int64_t v;
        for (int i = 0; i < MAX_RECORDS && lmc_trace_reader_next_peek(r, &t, &q, &qlen) == LMC_OK;
             i++)
            (void)lmc_trace_reader_peek_int_arg(r, "dropped_count", &v);
        lmc_trace_reader_close(r);
    }
    uint64_t n;
    (void)lmc_trace_count_records(path, &n, NULL);
out:
    close(fd);
    return 0;
}
