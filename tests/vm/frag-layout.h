/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The layout of received payload in the NIC's pages, computed from the
 * fragments a receiver got (dma-buf offset and length): where in its NIC
 * page each fragment starts, how many consecutive fragments share a page,
 * their sizes, and the tokens per SO_DEVMEM_DONTNEED from the receive
 * statistics.  The vm tests print it and check it against the buffer
 * layout the simulated NIC was loaded with (its module parameters).
 */
#ifndef DEVMEMTCP_FRAG_LAYOUT_H
#define DEVMEMTCP_FRAG_LAYOUT_H

#include <stdint.h>

#include "devmemtcp.h"

/* Where the NIC put the payload, from the fragments a receiver got. */
struct layout {
	uint32_t page;			/* NIC page size */
	uint64_t frags, bytes;
	uint64_t at_zero, align8, align64;
	uint64_t eighth[8];		/* offsets in the page by eighths */
	uint64_t small;			/* fragments under 64 bytes */
	uint32_t len_min, len_max;
	uint64_t runs[8];		/* fragments per page visit: 1 2 3 4 5-8 9-16 17-32 33+ */
	uint64_t visits, run;
	uint64_t last_page;
	uint8_t *seen;			/* offsets seen, one bit each */
	uint64_t distinct;
	uint64_t straddle;		/* fragments crossing a NIC page end */
};

/* For NIC pages of page bytes (a power of two); layout_free() after. */
void layout_init(struct layout *l, uint32_t page);
void layout_free(struct layout *l);
/* One fragment, in stream order. */
void layout_add(struct layout *l, uint64_t offset, uint32_t len);
/* "layout: ..." lines on stdout; st: the receiver's statistics. */
void layout_print(struct layout *l, const struct devmemtcp_rx_stats *st);
/* 0 when the fragments show the simulated NIC's layout, else T_EXIT_FAIL
 * (printed). */
int layout_check(const struct layout *l);

#endif
