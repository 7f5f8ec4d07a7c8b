/*
 * ttl_lock.c -- a counted lock that expires (see ttl_lock.h).
 *
 * Owns: nothing beyond the struct's three fields. Time is always passed in,
 * so no clock is read here and tests can drive expiry with fake times.
 *
 * Threads: none; no locks of its own. The owner (the L1 manager) calls
 * these under its mutex.
 */
#include "core/ttl_lock.h"

void lmc_ttl_lock_init(lmc_ttl_lock *l, uint64_t ttl_seconds)
{
    l->count = 0;
    l->expiry_ms = 0;
    l->ttl_ms = ttl_seconds * 1000u;
}

void lmc_ttl_lock_lock(lmc_ttl_lock *l, uint64_t n, uint64_t now_ms)
{
    /* An expired lock is stale (its holder may have crashed): start afresh. */
    if (now_ms >= l->expiry_ms)
        l->count = n;
    else
        l->count += n;
    l->expiry_ms = now_ms + l->ttl_ms;
}

void lmc_ttl_lock_unlock(lmc_ttl_lock *l, uint64_t n)
{
    l->count = l->count > n ? l->count - n : 0;
}

bool lmc_ttl_lock_is_locked(const lmc_ttl_lock *l, uint64_t now_ms)
{
    return l->count > 0 && now_ms < l->expiry_ms;
}

uint64_t lmc_ttl_lock_count(const lmc_ttl_lock *l, uint64_t now_ms)
{
    return now_ms < l->expiry_ms ? l->count : 0;
}

void lmc_ttl_lock_reset(lmc_ttl_lock *l)
{
    l->count = 0;
    l->expiry_ms = 0;
}
