/*
 * lmcache.h -- the public API in one include.
 *
 * A program that embeds a StorageManager or talks to `lmcache server`
 * includes this header, adds include/ to its include path and links the
 * library (lmcache_lib); nothing under src/ is needed. examples/embed.c is
 * a complete program using it.
 *
 *   status.h           lmc_status, lmc_error (every call that can fail)
 *   types.h            object keys, layouts, prefetch handles, L1 error codes
 *   bitmap.h           the per-key result bitmap
 *   memory_obj.h       a view of one L1 object's bytes
 *   config.h           the StorageManager config and its flag parser
 *   storage_manager.h  the StorageManager (L1, eviction, L2, controllers)
 *   client.h           a client of `lmcache server`
 */
#ifndef LMCACHE_LMCACHE_H
#define LMCACHE_LMCACHE_H

#include "lmcache/bitmap.h"
#include "lmcache/client.h"
#include "lmcache/config.h"
#include "lmcache/memory_obj.h"
#include "lmcache/status.h"
#include "lmcache/storage_manager.h"
#include "lmcache/types.h"

#endif
