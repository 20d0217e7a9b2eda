/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Control messages as the kernel writes them on a devmem recvmsg, for the
 * tests and benchmarks that feed the receive processing without a socket.
 */
#ifndef DEVMEMTCP_TEST_CMSGFIXTURE_H
#define DEVMEMTCP_TEST_CMSGFIXTURE_H

#include <string.h>
#include <sys/socket.h>

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
