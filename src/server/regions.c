/*
 * regions.c -- the clients' KV regions and layouts (see regions.h).
 *
 * Fixed tables (MAX_REGIONS regions, MAX_LAYOUTS layouts) under one
 * mutex; a region is found by instance id, a layout by (model, world
 * size), both by a scan (few entries).
 */
#include "server/regions.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

#define LOG_COMP "server"
#define MAX_REGIONS 256
#define MAX_LAYOUTS 64

typedef struct layout_entry {
    char *model_name;
    int64_t world_size;
    int64_t bytes_per_token;
    lmc_layout_desc layout; /* one chunk: [chunk_size, bytes_per_token] uint8 */
    bool used;
} layout_entry;

struct lmc_regions {
    int chunk_size;
    pthread_mutex_t mu;
    lmc_region regions[MAX_REGIONS];
    layout_entry layouts[MAX_LAYOUTS];
};

lmc_status lmc_regions_create(int chunk_size, lmc_regions **out, lmc_error *err)
{
    lmc_regions *rs = calloc(1, sizeof(*rs));
    if (rs == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "server: out of memory");
    rs->chunk_size = chunk_size;
    pthread_mutex_init(&rs->mu, NULL);
    *out = rs;
    return LMC_OK;
}

static void region_unmap(lmc_region *r)
{
    if (r->base)
        munmap(r->base, r->bytes);
    free(r->model_name);
    memset(r, 0, sizeof(*r));
}

void lmc_regions_destroy(lmc_regions *rs)
{
    if (rs == NULL)
        return;
    for (int i = 0; i < MAX_REGIONS; i++)
        if (rs->regions[i].used)
            region_unmap(&rs->regions[i]);
    for (int i = 0; i < MAX_LAYOUTS; i++)
        free(rs->layouts[i].model_name);
    pthread_mutex_destroy(&rs->mu);
    free(rs);
}

/* Caller holds mu. */
static lmc_region *region_find(lmc_regions *rs, int64_t instance_id)
{
    for (int i = 0; i < MAX_REGIONS; i++) {
        if (rs->regions[i].used && rs->regions[i].instance_id == instance_id)
            return &rs->regions[i];
    }
    return NULL;
}

/* Caller holds mu. */
static layout_entry *layout_find(lmc_regions *rs, const char *model, int64_t world_size)
{
    for (int i = 0; i < MAX_LAYOUTS; i++) {
        if (rs->layouts[i].used && rs->layouts[i].world_size == world_size &&
            strcmp(rs->layouts[i].model_name, model) == 0)
            return &rs->layouts[i];
    }
    return NULL;
}

lmc_status lmc_regions_register(lmc_regions *rs, int64_t instance_id, const lmc_kv_region_desc *d,
                                const char *model_name, int64_t world_size, int64_t worker_id,
                                lmc_error *err)
{
    if (d->bytes_per_token > (int64_t)1 << 30 || d->tokens_per_block > (int64_t)1 << 20)
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: block too large");
    if (rs->chunk_size % d->tokens_per_block != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "register_kv_cache: tokens_per_block %lld does not divide the chunk "
                             "size %d",
                             (long long)d->tokens_per_block, rs->chunk_size);
    __int128 need = (__int128)d->num_blocks * d->tokens_per_block * d->bytes_per_token;
    if (need > ((__int128)1 << 40))
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: region too large");
    int fd = shm_open(d->shm_name, O_RDWR, 0);
    if (fd < 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "register_kv_cache: cannot open shm '%s': %s",
                             d->shm_name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (__int128)st.st_size < need) {
        close(fd);
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "register_kv_cache: shm '%s' holds %lld bytes but %lld blocks of "
                             "%lld x %lld need %lld",
                             d->shm_name, (long long)st.st_size, (long long)d->num_blocks,
                             (long long)d->tokens_per_block, (long long)d->bytes_per_token,
                             (long long)need);
    }
    void *base = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return lmc_error_set(err, LMC_ERR_IO, "register_kv_cache: mmap: %s", strerror(errno));

    lmc_layout_desc layout;
    int64_t dims[2] = {rs->chunk_size, d->bytes_per_token};
    lmc_layout_desc_make1(&layout, dims, 2, LMC_DTYPE_UINT8, NULL);

    lmc_status rc = LMC_OK;
    pthread_mutex_lock(&rs->mu);
    layout_entry *le = layout_find(rs, model_name, world_size);
    if (le != NULL && le->bytes_per_token != d->bytes_per_token) {
        rc =
            lmc_error_set(err, LMC_ERR_INVALID,
                          "register_kv_cache: model '%s' (world size %lld) is registered with %lld "
                          "bytes per token, not %lld",
                          model_name, (long long)world_size, (long long)le->bytes_per_token,
                          (long long)d->bytes_per_token);
        goto unlock;
    }
    lmc_region *r = region_find(rs, instance_id);
    if (r != NULL) {
        region_unmap(r); /* re-registration replaces the mapping */
    } else {
        for (int i = 0; i < MAX_REGIONS && r == NULL; i++)
            if (!rs->regions[i].used)
                r = &rs->regions[i];
    }
    if (le == NULL) {
        for (int i = 0; i < MAX_LAYOUTS && le == NULL; i++)
            if (!rs->layouts[i].used)
                le = &rs->layouts[i];
        if (le != NULL) {
            le->model_name = strdup(model_name);
            le->world_size = world_size;
            le->bytes_per_token = d->bytes_per_token;
            le->layout = layout;
            le->used = le->model_name != NULL;
        }
    }
    if (r == NULL || le == NULL || !le->used) {
        rc = lmc_error_set(err, LMC_ERR_BUSY, "register_kv_cache: too many registrations");
        goto unlock;
    }
    *r = (lmc_region){.instance_id = instance_id,
                      .model_name = strdup(model_name),
                      .world_size = world_size,
                      .worker_id = worker_id,
                      .num_blocks = d->num_blocks,
                      .tokens_per_block = d->tokens_per_block,
                      .bytes_per_token = d->bytes_per_token,
                      .base = base,
                      .bytes = (size_t)need,
                      .used = true};
    base = NULL;
unlock:
    pthread_mutex_unlock(&rs->mu);
    if (base != NULL)
        munmap(base, (size_t)need);
    if (rc == LMC_OK)
        LMC_INFO(LOG_COMP,
                 "registered KV cache of instance %lld: %s, %lld blocks x %lld tokens "
                 "x %lld bytes (model %s, world size %lld, worker %lld)",
                 (long long)instance_id, d->shm_name, (long long)d->num_blocks,
                 (long long)d->tokens_per_block, (long long)d->bytes_per_token, model_name,
                 (long long)world_size, (long long)worker_id);
    return rc;
}

lmc_status lmc_regions_unregister(lmc_regions *rs, int64_t instance_id, lmc_error *err)
{
    pthread_mutex_lock(&rs->mu);
    lmc_region *r = region_find(rs, instance_id);
    if (r)
        region_unmap(r);
    pthread_mutex_unlock(&rs->mu);
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "unregister_kv_cache: unknown instance %lld",
                             (long long)instance_id);
    return LMC_OK;
}

lmc_status lmc_regions_layout(lmc_regions *rs, const char *op, const char *model,
                              int64_t world_size, lmc_layout_desc *out, lmc_error *err)
{
    pthread_mutex_lock(&rs->mu);
    layout_entry *le = layout_find(rs, model, world_size);
    if (le)
        *out = le->layout;
    pthread_mutex_unlock(&rs->mu);
    if (le == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND,
                             "%s: no KV cache registered for model '%s' with world size %lld", op,
                             model, (long long)world_size);
    return LMC_OK;
}

lmc_status lmc_regions_acquire(lmc_regions *rs, const char *op, int64_t instance_id,
                               const char *model, int64_t start, int64_t end,
                               const int64_t *block_ids, size_t n_block_ids, lmc_region *out,
                               lmc_error *err)
{
    pthread_mutex_lock(&rs->mu);
    lmc_region *r = region_find(rs, instance_id);
    if (r)
        *out = *r;
    pthread_mutex_unlock(&rs->mu);
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOT_FOUND, "%s: unknown instance %lld", op,
                             (long long)instance_id);
    if (out->bytes_per_token != 0 && strcmp(out->model_name, model) != 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: instance %lld is registered for model '%s', not '%s'", op,
                             (long long)instance_id, out->model_name, model);
    size_t need = (size_t)((end - start) / out->tokens_per_block);
    if (n_block_ids < need)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%s: %zu block ids cover fewer than the %zu blocks of [%lld, %lld)",
                             op, n_block_ids, need, (long long)start, (long long)end);
    for (size_t i = 0; i < need; i++) {
        if (block_ids[i] < 0 || block_ids[i] >= out->num_blocks)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "%s: block id %lld (item %zu) is outside the %lld registered "
                                 "blocks",
                                 op, (long long)block_ids[i], i, (long long)out->num_blocks);
    }
    return LMC_OK;
}

void lmc_regions_release(lmc_regions *rs, lmc_region *r)
{
    (void)rs;
    (void)r; /* a copy of the entry: nothing is held yet (see regions.h) */
}

/* Copy between one chunk's object and its blocks (to_blocks: retrieve). */
static void copy_chunk(const lmc_region_copy *rc, size_t chunk, uint8_t *obj, bool to_blocks,
                       size_t skip_blocks)
{
    const lmc_region *r = rc->r;
    size_t bpc = rc->blocks_per_chunk;
    const int64_t *ids = rc->block_ids + chunk * bpc;
    size_t block_bytes = (size_t)(r->tokens_per_block * r->bytes_per_token);
    for (size_t b = skip_blocks; b < bpc; b++) {
        uint8_t *blk = r->base + (size_t)ids[b] * block_bytes;
        if (to_blocks)
            memcpy(blk, obj + b * block_bytes, block_bytes);
        else
            memcpy(obj + b * block_bytes, blk, block_bytes);
    }
}

static void region_to_object(void *ctx, size_t chunk, const lmc_memory_obj *obj)
{
    copy_chunk(ctx, chunk, obj->data, false, 0);
}

static void region_from_object(void *ctx, size_t chunk, const lmc_memory_obj *obj)
{
    const lmc_region_copy *rc = ctx;
    size_t tpb = (size_t)rc->r->tokens_per_block;
    size_t chunk_tok0 = chunk * rc->chunk_size;
    size_t skip = rc->skip_tokens > chunk_tok0 ? rc->skip_tokens - chunk_tok0 : 0;
    size_t skip_blocks = skip / tpb;
    if (skip_blocks > rc->blocks_per_chunk)
        skip_blocks = rc->blocks_per_chunk;
    copy_chunk(rc, chunk, obj->data, true, skip_blocks);
}

lmc_kv_copy lmc_region_copy_init(lmc_region_copy *rc, const lmc_region *r, const int64_t *block_ids,
                                 int chunk_size, size_t skip_tokens)
{
    *rc = (lmc_region_copy){.r = r,
                            .block_ids = block_ids,
                            .blocks_per_chunk = (size_t)chunk_size / (size_t)r->tokens_per_block,
                            .chunk_size = (size_t)chunk_size,
                            .skip_tokens = skip_tokens};
    return (lmc_kv_copy){
        .to_object = region_to_object, .from_object = region_from_object, .ctx = rc};
}
