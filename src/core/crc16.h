/*
 * crc16.h -- CRC-16/XMODEM (CRC-16-CCITT: polynomial 0x1021, initial value
 * 0, no reflection, no final xor), the checksum Redis Cluster hashes keys
 * with. None of the libraries this project links has it.
 *
 * Owns nothing (a constant table). Threads: reentrant.
 */
#ifndef LMC_CORE_CRC16_H
#define LMC_CORE_CRC16_H

#include <stddef.h>
#include <stdint.h>

/* The CRC of len bytes at data ("123456789" gives 0x31c3). data may be NULL when len is 0. */
uint16_t lmc_crc16_xmodem(const void *data, size_t len);

#endif
