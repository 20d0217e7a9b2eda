/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the receive layer (lib/rx/).  It owns struct devmemtcp_rx: the
 * recvmsg(MSG_SOCK_DEVMEM) call and its control buffer, the parsing of
 * the devmem control messages into fragments (cmsg.c, and inline here for
 * the hot path), the device address of each fragment from the registered
 * buffers' segment tables, and per-socket statistics.  It may call the
 * buffer layer (buf.h, read only) and the token manager (tokens.h), which
 * keeps the tokens it receives; it never touches netlink or the NIC.
 */
#ifndef DEVMEMTCP_RX_H
#define DEVMEMTCP_RX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/internal.h"
#include "tokens.h"
#include "core/uapi.h"

/* ---- cmsg parsing ------------------------------------------------------- */

struct dmt_parse {
	uint64_t linear_bytes;
	uint64_t dmabuf_bytes;
	uint32_t ndmabuf;	/* SCM_DEVMEM_DMABUF cmsgs */
	uint32_t nlinear;	/* SCM_DEVMEM_LINEAR cmsgs */
	uint32_t nunknown;	/* other cmsgs, skipped */
};

/*
 * Turn the control buffer of a recvmsg(MSG_SOCK_DEVMEM) that returned ret
 * bytes into at most max fragments in stream order (tokens, addresses and
 * FOREIGN flags are the caller's business).  Plain data with no devmem
 * cmsg becomes one LINEAR fragment.  Returns the number of fragments, or
 * -ENOBUFS when there are more cmsgs than max, or -EPROTO when the cmsgs
 * do not account for exactly ret bytes.
 */
int dmt_cmsg_parse(const struct msghdr *msg, size_t ret,
		   struct devmemtcp_frag *frags, size_t max,
		   struct dmt_parse *out);

/* Called on each dma-buf fragment as it is parsed; < 0 stops the parse. */
typedef int (*dmt_frag_cb)(void *arg, struct devmemtcp_frag *f);

/*
 * The parse, going on from cm (NULL: no cmsg left) after n0 fragments
 * that a caller's own loop made of the cmsgs before it, all dma-buf ones:
 * out holds their counts (ndmabuf, dmabuf_bytes) on entry.
 */
static inline __attribute__((always_inline)) int
dmt_cmsg_parse_at(const struct msghdr *msg, size_t ret,
		  struct devmemtcp_frag *frags, size_t max,
		  struct dmt_parse *out, dmt_frag_cb cb, void *arg,
		  struct cmsghdr *cm, size_t n0)
{
	const char *end = (const char *)msg->msg_control + msg->msg_controllen;
	uint64_t linear_off = 0, dmabuf_bytes = out->dmabuf_bytes;
	uint32_t ndmabuf = out->ndmabuf, nlinear = 0, nunknown = 0;
	size_t n = n0;

	/* CMSG_NXTHDR is an out-of-line glibc call and trusts cmsg_len: walk
	 * inline, stopping at a cmsg whose body is cut off */
	for (; cm; cm = dmt_cmsg_next(cm, end)) {
		const struct dmt_dmabuf_cmsg *dc;
		struct devmemtcp_frag *f;

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
			if (cb) {
				int err = cb(arg, f);

				if (err < 0)
					return err;
			}
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

static inline __attribute__((always_inline)) int
dmt_cmsg_parse_cb(const struct msghdr *msg, size_t ret,
		  struct devmemtcp_frag *frags, size_t max,
		  struct dmt_parse *out, dmt_frag_cb cb, void *arg)
{
	*out = (struct dmt_parse){ 0 };
	return dmt_cmsg_parse_at(msg, ret, frags, max, out, cb, arg,
				 dmt_cmsg_first(msg), 0);
}

/* The receive path after recvmsg: parse, account tokens, look up device
 * addresses, flag foreign bindings, count statistics.  Returns the number
 * of fragments or a negative errno (message on rx).  Exposed for the
 * benchmark, which feeds it synthetic control buffers. */
struct devmemtcp_rx;
int dmt_rx_process(struct devmemtcp_rx *rx, const struct msghdr *msg,
		   size_t got, struct devmemtcp_frag *frags, size_t max);
/* Every receive through the general parse, not the run of plain cmsgs
 * first (the benchmark compares the two in one run). */
void dmt_rx_set_general(struct devmemtcp_rx *rx, bool general);
/* The token manager of rx (the benchmark swaps its DONTNEED hook). */
struct dmt_tokens *dmt_rx_tokens(struct devmemtcp_rx *rx);

#endif
