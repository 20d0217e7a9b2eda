// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The receive cmsg parser (lib/rx/cmsg.c, rx.h) on arbitrary control buffers.
 * Input: max fragments (u8), the byte count recvmsg returned (u32), then
 * the control buffer, in a heap block of exactly its length.  The parse
 * must end, stay inside the buffer, and when it succeeds describe exactly
 * the bytes received.
 */
#include <errno.h>

#include "fuzz.h"
#include "rx.h"

/* Every dma-buf fragment the parse produces, errors included. */
static int count_frag(void *arg, struct devmemtcp_frag *f)
{
	(void)f;
	(*(size_t *)arg)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	struct devmemtcp_frag frags[64];
	struct dmt_parse p;
	struct msghdr msg = { 0 };
	size_t max = fz_u8(&f) % (ARRAY_SIZE(frags) + 1);
	size_t ret = fz_u32(&f), len;
	uint8_t *ctrl = fz_rest(&f, &len);
	uint64_t linear = 0, dmabuf = 0;
	size_t seen = 0;
	int n;

	msg.msg_control = ctrl;
	msg.msg_controllen = len;
	n = dmt_cmsg_parse_cb(&msg, ret, frags, max, &p, count_frag, &seen);
	/* each fragment has its own cmsg in the buffer: none is read twice */
	FZ_CHECK(seen <= len / CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg)));
	FZ_CHECK(n == -ENOBUFS || n == -EPROTO || (n >= 0 && (size_t)n <= max));
	if (n >= 0) {
		for (int i = 0; i < n; i++) {
			if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR) {
				/* linear bytes sit back to back in the buffer */
				FZ_CHECK(frags[i].offset == linear);
				linear += frags[i].len;
			} else {
				FZ_CHECK(frags[i].flags == 0);
				dmabuf += frags[i].len;
			}
		}
		FZ_CHECK(linear == p.linear_bytes);
		FZ_CHECK(dmabuf == p.dmabuf_bytes);
		FZ_CHECK(linear + dmabuf == ret);
		if (p.ndmabuf + p.nlinear)
			FZ_CHECK((size_t)n == p.ndmabuf + p.nlinear);
		else	/* plain data: one LINEAR fragment, none for 0 bytes */
			FZ_CHECK((size_t)n == (ret ? 1u : 0u));
	}
	free(ctrl);
	return 0;
}
