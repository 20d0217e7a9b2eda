// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Control messages of recvmsg(MSG_SOCK_DEVMEM) → fragments in stream order. */
#include <string.h>

#include "rx.h"

int dmt_cmsg_parse(const struct msghdr *msg, size_t ret,
		   struct devmemtcp_frag *frags, size_t max,
		   struct dmt_parse *out)
{
	struct cmsghdr *cm;
	size_t n = 0;
	uint64_t linear_off = 0;

	memset(out, 0, sizeof(*out));
	for (cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm;
	     cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		const struct dmt_dmabuf_cmsg *dc;
		struct devmemtcp_frag *f;

		/* glibc hands out a last header whose body is cut off */
		if ((const char *)cm + cm->cmsg_len >
		    (const char *)msg->msg_control + msg->msg_controllen)
			break;

		if (cm->cmsg_level != SOL_SOCKET ||
		    (cm->cmsg_type != SCM_DEVMEM_DMABUF &&
		     cm->cmsg_type != SCM_DEVMEM_LINEAR)) {
			out->nunknown++;
			continue;
		}
		if (cm->cmsg_len < CMSG_LEN(sizeof(*dc)))
			return -EPROTO;
		if (n == max)
			return -ENOBUFS;
		dc = (const struct dmt_dmabuf_cmsg *)CMSG_DATA(cm);
		f = &frags[n++];
		if (cm->cmsg_type == SCM_DEVMEM_LINEAR) {
			/* only frag_size is meaningful */
			f->offset = linear_off;
			f->addr = 0;
			f->len = dc->frag_size;
			f->token = 0;
			f->binding_id = 0;
			f->flags = DEVMEMTCP_FRAG_LINEAR;
			linear_off += dc->frag_size;
			out->linear_bytes += dc->frag_size;
			out->nlinear++;
		} else {
			f->offset = dc->frag_offset;
			f->addr = 0;
			f->len = dc->frag_size;
			f->token = dc->frag_token;
			f->binding_id = dc->dmabuf_id;
			f->flags = 0;
			out->dmabuf_bytes += dc->frag_size;
			out->ndmabuf++;
		}
	}
	if (!out->ndmabuf && !out->nlinear) {
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
	if (out->linear_bytes + out->dmabuf_bytes != ret)
		return -EPROTO;
	return (int)n;
}
