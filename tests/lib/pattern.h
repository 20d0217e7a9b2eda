/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The stream pattern of the test toolkit (tests/lib/): byte i of a stream
 * is i % period (period 251 by default: a prime, so a page landing at the
 * wrong place shows).  'devmemtcp send' writes it, 'devmemtcp recv -v'
 * checks it, and every C test, benchmark and fake that makes or checks a
 * stream (harness, vm tests, the emulated NIC, the NCCL plugin's tests,
 * the simulated NIC's smoke test) includes this header; Python has
 * devmemtcp._pattern.  It owns the pattern's definition and nothing else,
 * header-only so that anything can include it without linking.
 */
#ifndef DEVMEMTCP_PATTERN_H
#define DEVMEMTCP_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#define PATTERN_PERIOD_DEFAULT 251

static inline uint8_t pattern_byte(uint64_t pos, unsigned int period)
{
	return (uint8_t)(pos % period);
}

static inline void pattern_fill(uint8_t *dst, size_t len, uint64_t pos,
				unsigned int period)
{
	unsigned int v = (unsigned int)(pos % period);

	for (size_t i = 0; i < len; i++) {
		dst[i] = (uint8_t)v;
		if (++v == period)
			v = 0;
	}
}

/* Index of the first byte of src[0..len) that differs from the pattern at
 * stream position pos, or -1. */
static inline long pattern_check(const uint8_t *src, size_t len, uint64_t pos,
				 unsigned int period)
{
	unsigned int v = (unsigned int)(pos % period);

	for (size_t i = 0; i < len; i++) {
		if (src[i] != (uint8_t)v)
			return (long)i;
		if (++v == period)
			v = 0;
	}
	return -1;
}

#endif
