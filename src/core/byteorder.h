/*
 * byteorder.h -- big-endian loads and stores of 16, 32 and 64-bit integers.
 *
 * msgpack and the .lct frame prefix are big-endian; the token hash feeds
 * token ids to SHA-256 big-endian. These are the one copy of that rule:
 * byte by byte, so they work on any alignment and any host byte order
 * (compilers turn them into a load and a byte swap). The 32-bit store is
 * a byte swap and a memcpy where the compiler has one: in the token hash's
 * conversion loop gcc 12 vectorised the byte-by-byte form into single-byte
 * stores, which cost more than the SHA-256 of the bytes they made.
 *
 * Owns nothing. Threads: pure functions.
 */
#ifndef LMC_CORE_BYTEORDER_H
#define LMC_CORE_BYTEORDER_H

#include <stdint.h>
#include <string.h>

static inline uint16_t lmc_get_be16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t lmc_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t lmc_get_be64(const uint8_t *p)
{
    return (uint64_t)lmc_get_be32(p) << 32 | lmc_get_be32(p + 4);
}

static inline void lmc_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void lmc_put_be32(uint8_t *p, uint32_t v)
{
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
    memcpy(p, &v, sizeof(v));
#else
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
#endif
}

static inline void lmc_put_be64(uint8_t *p, uint64_t v)
{
    lmc_put_be32(p, (uint32_t)(v >> 32));
    lmc_put_be32(p + 4, (uint32_t)v);
}

#endif
