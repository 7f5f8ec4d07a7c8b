/*
 * ttl_lock.h -- a counted lock that expires (LMCache's native TTLLock).
 *
 * Owns: one counter and one expiry. A lock with any count silently
 * disappears ttl after its most recent lock(): an expired lock reads as
 * unlocked, and the next lock() starts the count afresh. This is how a
 * crashed client can never pin an L1 object forever.
 *
 * Time is passed in by the caller (milliseconds on a monotonic clock), so
 * tests drive expiry with a fake clock and never sleep.
 *
 * Threads: none; the owner (the L1 manager) guards it with its mutex.
 */
#ifndef LMC_CORE_TTL_LOCK_H
#define LMC_CORE_TTL_LOCK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct lmc_ttl_lock {
    uint64_t count;
    uint64_t expiry_ms; /* the lock is held while now < expiry_ms */
    uint64_t ttl_ms;
} lmc_ttl_lock;

/* A fresh, unlocked lock with the given TTL in seconds. */
void lmc_ttl_lock_init(lmc_ttl_lock *l, uint64_t ttl_seconds);

/*
 * Take n locks. If the lock has expired (now >= expiry) the count restarts
 * at n, otherwise it grows by n. Every lock moves the expiry to now + ttl.
 */
void lmc_ttl_lock_lock(lmc_ttl_lock *l, uint64_t n, uint64_t now_ms);

/* Release n locks; the count never goes below 0. The expiry is untouched. */
void lmc_ttl_lock_unlock(lmc_ttl_lock *l, uint64_t n);

/* count > 0 and now < expiry. */
bool lmc_ttl_lock_is_locked(const lmc_ttl_lock *l, uint64_t now_ms);

/* The count as seen now: 0 once expired. */
uint64_t lmc_ttl_lock_count(const lmc_ttl_lock *l, uint64_t now_ms);

/* Back to unlocked (count 0, expiry 0). */
void lmc_ttl_lock_reset(lmc_ttl_lock *l);

#endif
