// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Control messages of recvmsg(MSG_SOCK_DEVMEM) → fragments in stream order. */
#include <string.h>

#include "rx.h"

static inline struct cmsghdr *next_cmsg(struct cmsghdr *cm, const char *end)
{
	if (cm->cmsg_len < sizeof(*cm))
		return NULL;
	cm = (struct cmsghdr *)((char *)cm + CMSG_ALIGN(cm->cmsg_len));
	if ((const char *)(cm + 1) > end)
		return NULL;
	return cm;
}

int dmt_cmsg_parse(const struct msghdr *msg, size_t ret,
		   struct devmemtcp_frag *frags, size_t max,
		   struct dmt_parse *out)
{
	const char *end = (const char *)msg->msg_control + msg->msg_controllen;
	uint64_t linear_off = 0, dmabuf_bytes = 0;
	uint32_t ndmabuf = 0, nlinear = 0, nunknown = 0;
	struct cmsghdr *cm;
	size_t n = 0;

	/* CMSG_NXTHDR is an out-of-line glibc call: walk inline instead */
	for (cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm;
	     cm = next_cmsg(cm, end)) {
		const struct dmt_dmabuf_cmsg *dc;
		struct devmemtcp_frag *f;

		/* never read a header whose body is cut off */
		if ((const char *)cm + cm->cmsg_len > end)
			break;
		if (cm->cmsg_level != SOL_SOCKET ||
		    (cm->cmsg_type != SCM_DEVMEM_DMABUF &&
		     cm->cmsg_type != SCM_DEVMEM_LINEAR)) {
			nunknown++;
			continue;
		}
		if (cm->cmsg_len < CMSG_LEN(sizeof(*dc)))
			return -EPROTO;
		if (n == max)
			return -ENOBUFS;
		dc = (const struct dmt_dmabuf_cmsg *)CMSG_DATA(cm);
		f = &frags[n++];
		if (cm->cmsg_type == SCM_DEVMEM_DMABUF) {
			f->offset = dc->frag_offset;
			f->addr = 0;
			f->len = dc->frag_size;
			f->token = dc->frag_token;
			f->binding_id = dc->dmabuf_id;
			f->flags = 0;
			dmabuf_bytes += dc->frag_size;
			ndmabuf++;
		} else {
			/* only frag_size is meaningful */
			f->offset = linear_off;
			f->addr = 0;
			f->len = dc->frag_size;
			f->token = 0;
			f->binding_id = 0;
			f->flags = DEVMEMTCP_FRAG_LINEAR;
			linear_off += dc->frag_size;
			nlinear++;
		}
	}
	out->linear_bytes = linear_off;
	out->dmabuf_bytes = dmabuf_bytes;
	out->ndmabuf = ndmabuf;
	out->nlinear = nlinear;
	out->nunknown = nunknown;
	if (!ndmabuf && !nlinear) {
		/* plain data: the flow is not on a devmem queue */
		if (!ret)
			return 0;
		if (!max)
			return -ENOBUFS;
		frags[0] = (struct devmemtcp_frag){ .offset = 0, .len = (uint32_t)ret,
						   .flags = DEVMEMTCP_FRAG_LINEAR };
		out->linear_bytes = ret;
		return 1;
	}
	if (linear_off + dmabuf_bytes != ret)
		return -EPROTO;
	return (int)n;
}
