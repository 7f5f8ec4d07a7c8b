/*
 * fuzz_trace_reader.c -- libFuzzer target: a whole .lct file.
 *
 * The input is written to a memfd (no file on disk) and opened through
 * /proc/self/fd/N, three times:
 *   1. lmc_trace_reader_next: header, frames of any u32 length, the strict
 *      record check, args decoded through the codecs (within their bound);
 *   2. lmc_trace_reader_next_record, then decode_args on every other record
 *      and the u64/int lookups and dropped-count reading on each;
 *   3. lmc_trace_reader_next_peek, as `trace info` reads, and
 *      lmc_trace_count_records.
 * One reader for every command: the three passes must count the same
 * records and the same malformed frames, or the target aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

typedef struct counts {
    bool opened;
    uint64_t records, malformed;
    bool truncated, capped;
} counts;

static counts finish(lmc_trace_reader *r, int n)
{
    counts c = {true, lmc_trace_reader_records(r), lmc_trace_reader_malformed(r),
                lmc_trace_reader_truncated(r), n >= MAX_RECORDS};
    lmc_trace_reader_close(r);
    return c;
}

static counts pass_next(const char *path)
{
    lmc_trace_reader *r = NULL;
    if (lmc_trace_reader_open(path, &r, NULL) != LMC_OK)
        return (counts){0};
    (void)lmc_trace_reader_header(r);
    lmc_trace_record rec;
    int i = 0;
    for (; i < MAX_RECORDS && lmc_trace_reader_next(r, &rec) == LMC_OK; i++) {
        /* Either args, or the reason they do not decode. */
        if (rec.args_error == NULL && rec.nargs > 0 && rec.args == NULL)
            abort();
    }
    return finish(r, i);
}

static counts pass_lazy(const char *path)
{
    lmc_trace_reader *r = NULL;
    if (lmc_trace_reader_open(path, &r, NULL) != LMC_OK)
        return (counts){0};
    lmc_trace_record rec;
    int i = 0;
    uint64_t dropped = 0;
    for (; i < MAX_RECORDS && lmc_trace_reader_next_record(r, &rec) == LMC_OK; i++) {
        if (i % 2 == 0)
            (void)lmc_trace_reader_decode_args(r, &rec, NULL);
        uint64_t u;
        int64_t v;
        (void)lmc_trace_reader_peek_u64_arg(r, "dropped_count", &u);
        (void)lmc_trace_reader_peek_int_arg(r, "keys", &v);
        lmc_trace_reader_add_dropped_count(r, &dropped);
    }
    return finish(r, i);
}

static counts pass_peek(const char *path)
{
    lmc_trace_reader *r = NULL;
    if (lmc_trace_reader_open(path, &r, NULL) != LMC_OK)
        return (counts){0};
    double t;
    const char *q;
    size_t qlen;
    int i = 0;
    while (i < MAX_RECORDS && lmc_trace_reader_next_peek(r, &t, &q, &qlen) == LMC_OK)
        i++;
    return finish(r, i);
}

static bool same(counts a, counts b)
{
    return a.opened == b.opened && a.records == b.records && a.malformed == b.malformed &&
           a.truncated == b.truncated;
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

    counts a = pass_next(path), b = pass_lazy(path), c = pass_peek(path);
    if (!a.capped && !b.capped && !c.capped && (!same(a, b) || !same(a, c)))
        abort(); /* the commands would disagree about this file */
    uint64_t n;
    if (lmc_trace_count_records(path, &n, NULL) == LMC_OK && !c.capped && n != c.records)
        abort();
out:
    close(fd);
    return 0;
}
