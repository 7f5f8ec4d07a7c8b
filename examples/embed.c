/*
 * embed.c -- a program that embeds a StorageManager through the public API.
 *
 * It builds a config (a 64 MiB L1 with LRU eviction; any StorageManager flag
 * on the command line is applied on top, e.g. --l2-adapter), creates the
 * StorageManager, writes four objects, prefetches them, reads them back and
 * checks every byte. Exit status 0 when all is well.
 *
 * It includes nothing but <lmcache/lmcache.h> and is built with include/ as
 * its only include directory (CMakeLists.txt), which keeps the public
 * headers honest: a public header that needs something from src/ breaks
 * this build.
 *
 *   build/examples/embed [--l1-size-gb GB] [--eviction-policy POLICY] ...
 */
#define _POSIX_C_SOURCE 200809L

#include <lmcache/lmcache.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#define N_KEYS 4
#define OBJ_BYTES 4096

/* The byte at offset off of key i: distinct per key, so a mix-up shows. */
static uint8_t pattern(size_t i, size_t off)
{
    return (uint8_t)(i * 37u + off * 11u + 1u);
}

/* The defaults of this example, then whatever the command line adds. */
static lmc_status build_config(lmc_sm_config *cfg, int argc, char **argv, lmc_error *err)
{
    lmc_status st = lmc_sm_config_init(cfg);
    if (st != LMC_OK)
        return lmc_error_set(err, st, "config: out of memory");
    if ((st = lmc_sm_config_set(cfg, "--l1-size-gb", "0.0625", err)) != LMC_OK ||
        (st = lmc_sm_config_set(cfg, "--eviction-policy", "LRU", err)) != LMC_OK)
        return st;
    for (int i = 1; i < argc;) {
        bool consumed = false;
        st = lmc_sm_config_parse_arg(cfg, argc, argv, &i, &consumed, err);
        if (st != LMC_OK)
            return st;
        if (!consumed)
            return lmc_error_set(err, LMC_ERR_INVALID, "unknown argument '%s'", argv[i]);
    }
    return lmc_sm_config_finish(cfg, err);
}

/*
 * Poll until the prefetch has its answer (at once when every key is in L1):
 * LMC_ERR_BUSY means the L2 part still runs, and out of memory keeps the
 * answer for a later poll, so both are retried; anything else is final.
 */
static lmc_status wait_prefetch(lmc_storage_manager *sm, const lmc_prefetch_handle *h,
                                lmc_bitmap *found, lmc_error *err)
{
    const struct timespec ms = {0, 1000 * 1000};
    for (int tries = 0; tries < 10000; tries++) {
        lmc_status st = lmc_sm_query_prefetch_status(sm, h, found);
        if (st == LMC_OK)
            return LMC_OK;
        if (st != LMC_ERR_BUSY && st != LMC_ERR_NOMEM)
            return lmc_error_set(err, st, "prefetch: %s", lmc_status_str(st));
        nanosleep(&ms, NULL);
    }
    return lmc_error_set(err, LMC_ERR_TIMEOUT, "prefetch: no answer after 10 s");
}

static lmc_status run(lmc_storage_manager *sm, lmc_error *err)
{
    lmc_object_key keys[N_KEYS];
    lmc_layout_desc layout;
    lmc_l1_error errs[N_KEYS];
    lmc_memory_obj objs[N_KEYS];
    lmc_prefetch_handle handle = {0};
    lmc_bitmap found = {0};
    lmc_sm_read_ctx ctx = {0};
    bool entered = false;
    lmc_status st = LMC_OK;

    const int64_t dims[1] = {OBJ_BYTES};
    st = lmc_layout_desc_make1(&layout, dims, 1, LMC_DTYPE_UINT8, err);
    for (size_t i = 0; i < N_KEYS && st == LMC_OK; i++) {
        uint8_t hash[32] = {(uint8_t)(i + 1)};
        st = lmc_object_key_make(&keys[i], hash, sizeof(hash), "example/model", 0, 0, NULL, err);
    }
    if (st != LMC_OK)
        goto out;

    /* Write: reserve, fill the returned memory, commit. */
    size_t reserved = lmc_sm_reserve_write(sm, keys, N_KEYS, &layout, LMC_WRITE_NEW, errs, objs);
    if (reserved != N_KEYS) {
        st = lmc_error_set(err, LMC_ERR_INTERNAL, "reserve_write: %zu of %d keys reserved",
                           reserved, N_KEYS);
        goto out;
    }
    for (size_t i = 0; i < N_KEYS; i++)
        for (size_t b = 0; b < objs[i].size; b++)
            objs[i].data[b] = pattern(i, b);
    lmc_sm_finish_write(sm, keys, N_KEYS, errs);

    /* Prefetch: read-lock the keys (from L2 if they left L1) and wait. */
    st = lmc_sm_submit_prefetch_task(sm, keys, N_KEYS, &layout, 0, NULL, LMC_TRIM_PREFIX, &handle,
                                     err);
    if (st == LMC_OK)
        st = wait_prefetch(sm, &handle, &found, err);
    if (st != LMC_OK)
        goto out;
    if (lmc_bitmap_popcount(&found) != N_KEYS) {
        /* (The read locks of the keys that were found go with the StorageManager.) */
        st = lmc_error_set(err, LMC_ERR_NOT_FOUND, "prefetch: %zu of %d keys found",
                           lmc_bitmap_popcount(&found), N_KEYS);
        goto out;
    }

    /* Read the prefetched objects in place, then release their read locks. */
    st = lmc_sm_read_prefetched_enter(sm, keys, N_KEYS, &ctx);
    if (st != LMC_OK) {
        st = lmc_error_set(err, st, "read_prefetched: %s", lmc_status_str(st));
        goto out;
    }
    entered = true;
    if (!ctx.ok) {
        st = lmc_error_set(err, LMC_ERR_NOT_FOUND, "read_prefetched: not every key is readable");
        goto out;
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        for (size_t b = 0; b < ctx.objs[i].size; b++) {
            if (ctx.objs[i].data[b] != pattern(i, b)) {
                st = lmc_error_set(err, LMC_ERR_INTERNAL, "key %zu: byte %zu differs", i, b);
                goto out;
            }
        }
    }

out:
    if (entered) {
        /* ok objects and no failure: exit releases nothing, finish does. */
        bool failed = st != LMC_OK;
        bool release = ctx.ok && !failed;
        lmc_sm_read_prefetched_exit(sm, &ctx, failed);
        if (release)
            lmc_sm_finish_read_prefetched(sm, keys, N_KEYS, 0, NULL);
    }
    lmc_bitmap_free(&found);
    lmc_prefetch_handle_clear(&handle);
    return st;
}

int main(int argc, char **argv)
{
    lmc_sm_config cfg;
    lmc_storage_manager *sm = NULL;
    lmc_error err;
    lmc_error_clear(&err);

    lmc_status st = build_config(&cfg, argc, argv, &err);
    if (st == LMC_OK)
        st = lmc_sm_create(&cfg, &sm, &err);
    /* create copied the config. */
    lmc_sm_config_free(&cfg);
    if (st == LMC_OK)
        st = run(sm, &err);
    lmc_sm_destroy(sm);
    if (st != LMC_OK) {
        fprintf(stderr, "embed: %s\n", err.msg);
        return 1;
    }
    printf("embed: %d objects of %d bytes written, prefetched and read back\n", N_KEYS, OBJ_BYTES);
    return 0;
}
