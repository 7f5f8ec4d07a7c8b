/*
 * task.c -- the task record every adapter type runs (see adapter_impl.h).
 *
 * Owns: one task's private copies of its keys and memory-object handles,
 * its result bitmap and its store scratch, in one allocation. Threads: none;
 * a task belongs to one thread at a time (its submitter, then a worker).
 */
#include <stdlib.h>
#include <string.h>

#include "l2/adapter_impl.h"

/* Round up so the arrays that follow the header stay aligned. */
static size_t align_up(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

lmc_l2_task *lmc_l2_task_new(lmc_l2_task_kind kind, uint64_t id, const lmc_object_key *keys,
                             const lmc_memory_obj *objs, size_t n)
{
    if (n > SIZE_MAX / 2 / (sizeof(lmc_object_key) + sizeof(lmc_memory_obj) + sizeof(uint64_t)))
        return NULL;
    size_t keys_off = align_up(sizeof(lmc_l2_task));
    size_t objs_off = align_up(keys_off + (keys != NULL ? n * sizeof(lmc_object_key) : 0));
    size_t sizes_off = align_up(objs_off + (objs != NULL ? n * sizeof(lmc_memory_obj) : 0));
    size_t total = sizes_off + (kind == LMC_L2_TASK_STORE ? n * sizeof(uint64_t) : 0);
    char *mem = calloc(1, total);
    if (mem == NULL)
        return NULL;
    lmc_l2_task *t = (lmc_l2_task *)mem;
    t->kind = kind;
    t->id = id;
    t->n = n;
    if (keys != NULL) {
        t->keys = (lmc_object_key *)(mem + keys_off);
        if (n > 0)
            memcpy(t->keys, keys, n * sizeof(lmc_object_key));
    }
    if (objs != NULL) {
        t->objs = (lmc_memory_obj *)(mem + objs_off);
        if (n > 0)
            memcpy(t->objs, objs, n * sizeof(lmc_memory_obj));
    }
    if (kind == LMC_L2_TASK_STORE) {
        t->sizes = (uint64_t *)(mem + sizes_off);
    } else if (lmc_bitmap_init(&t->bitmap, n, 0) != LMC_OK) {
        /* Allocated here, not at completion, so a worker never has a result it cannot report. */
        free(mem);
        return NULL;
    }
    return t;
}

void lmc_l2_task_free(lmc_l2_task *t)
{
    if (t == NULL)
        return;
    lmc_bitmap_free(&t->bitmap);
    free(t);
}

void lmc_l2_task_complete(lmc_l2_adapter *a, lmc_l2_task *t)
{
    switch (t->kind) {
    case LMC_L2_TASK_STORE:
        lmc_l2_complete_store(a, t->id, t->result);
        break;
    case LMC_L2_TASK_LOOKUP:
        lmc_l2_complete_lookup(a, t->id, &t->bitmap);
        break;
    case LMC_L2_TASK_LOAD:
        lmc_l2_complete_load(a, t->id, &t->bitmap);
        break;
    }
    lmc_l2_task_free(t);
}

void lmc_l2_task_fail(lmc_l2_adapter *a, lmc_l2_task *t)
{
    t->result = -1;
    for (size_t i = 0; i < t->n; i++)
        lmc_bitmap_clear(&t->bitmap, i);
    lmc_l2_task_complete(a, t);
}
