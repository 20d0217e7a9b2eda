/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: io_uring zero-copy receive, its control-plane half
 * (zcrx_ifq.c): devmemtcp_zcrx_new and devmemtcp_zcrx_free make and end
 * the ring and register the interface queue; probe asks what the kernel
 * offers.  It calls the receive half (rx/zcrx.h) for the handle's memory,
 * netdev for queue-get and ethtool to explain a refusal.
 */
#ifndef DEVMEMTCP_ZCRX_IFQ_H
#define DEVMEMTCP_ZCRX_IFQ_H

struct dmt_zcrx_support {
	int zcrx;		/* 1 this kernel has it, 0 no, -1 unknown */
	int dmabuf;		/* dma-buf areas: 1, 0, -1 */
	char msg[160];		/* why not, or "" */
};

/* What this kernel offers (a small ring, no registration): 0, or -ENOMEM
 * when the answer is unknown for lack of memory. */
int dmt_zcrx_support(struct dmt_zcrx_support *s);

#endif
