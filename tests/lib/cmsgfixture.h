/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Control messages as the kernel writes them on a devmem recvmsg, for the
 * tests and benchmarks that feed the receive processing without a socket,
 * and what they feed: the receive processing and its token books (rx/rx.h:
 * dmt_rx_process, dmt_rx_tokens) and buffers with a segment table
 * (buf/buf.h: dmt_buf_alloc, dmt_buf_set_segments).  Benchmarks include
 * the public header and the toolkit only; this is where they reach the
 * receive layer.
 */
#ifndef DEVMEMTCP_TEST_CMSGFIXTURE_H
#define DEVMEMTCP_TEST_CMSGFIXTURE_H

#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "rx.h"
#include "uapi.h"

/* One SCM_DEVMEM_DMABUF message carrying d at cm. */
static inline void cmsgfix_dmabuf(struct cmsghdr *cm,
				  const struct dmt_dmabuf_cmsg *d)
{
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_DEVMEM_DMABUF;
	cm->cmsg_len = CMSG_LEN(sizeof(*d));
	memcpy(CMSG_DATA(cm), d, sizeof(*d));
}

#endif
