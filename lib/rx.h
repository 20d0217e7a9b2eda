/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* Private: control-message parsing and the token manager (layer 6). */
#ifndef DEVMEMTCP_RX_H
#define DEVMEMTCP_RX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "internal.h"
#include "uapi.h"

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

static inline struct cmsghdr *next_cmsg(struct cmsghdr *cm, const char *end)
{
	if (cm->cmsg_len < sizeof(*cm))
		return NULL;
	cm = (struct cmsghdr *)((char *)cm + CMSG_ALIGN(cm->cmsg_len));
	if ((const char *)(cm + 1) > end)
		return NULL;
	return cm;
}

static inline __attribute__((always_inline)) int
dmt_cmsg_parse_cb(const struct msghdr *msg, size_t ret,
				    struct devmemtcp_frag *frags, size_t max,
				    struct dmt_parse *out, dmt_frag_cb cb,
				    void *arg)
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

/* The receive path after recvmsg: parse, account tokens, look up device
 * addresses, flag foreign bindings, count statistics.  Returns the number
 * of fragments or a negative errno (message on rx).  Exposed for the
 * benchmark, which feeds it synthetic control buffers. */
struct devmemtcp_rx;
int dmt_rx_process(struct devmemtcp_rx *rx, const struct msghdr *msg,
		   size_t got, struct devmemtcp_frag *frags, size_t max);
/* The token manager of rx (the benchmark swaps its DONTNEED hook). */
struct dmt_tokens *dmt_rx_tokens(struct devmemtcp_rx *rx);

/* ---- token manager ------------------------------------------------------ */

/* Hands tokens back to the kernel: returns the number of frags freed or a
 * negative errno.  The default is setsockopt(SO_DEVMEM_DONTNEED). */
typedef int (*dmt_dontneed_fn)(void *arg, const struct dmt_dmabuf_token *t,
			       size_t n);

struct dmt_deferred {
	devmemtcp_done_fn done;
	void *arg;
	size_t ntokens;		/* tokens of this entry in dtoks[] */
	bool finished;		/* done() said 1; tokens not all queued yet */
};

struct dmt_tokens {
	uint64_t *bits;		/* bit t set: token t outstanding */
	size_t nwords;
	uint64_t outstanding;
	uint64_t outstanding_max;
	/* queued for release, merged into ranges */
	struct dmt_dmabuf_token pending[DMT_MAX_DONTNEED_TOKENS];
	size_t npending;
	uint32_t pending_frags;
	uint32_t batch;		/* flush at this many frags, <= 1024 */
	/* deferred releases, FIFO; their tokens back to back in dtoks */
	struct dmt_deferred *dq;
	size_t dq_head, dq_len, dq_cap;
	uint32_t *dtoks;
	size_t dt_head, dt_len, dt_cap;
	uint64_t deferred_pending;
	/* counters */
	uint64_t released;
	uint64_t dontneed_calls;
	uint64_t partial_returns;
	uint64_t lost;		/* tokens the kernel did not know */
	dmt_dontneed_fn dontneed;
	void *dontneed_arg;
};

void dmt_tokens_init(struct dmt_tokens *t, uint32_t batch,
		     dmt_dontneed_fn fn, void *arg);
void dmt_tokens_fini(struct dmt_tokens *t);
/* A fragment with this token was received.  -EEXIST if it already was
 * outstanding (the kernel never does that), -ENOMEM. */
int dmt_tokens_received_slow(struct dmt_tokens *t, uint32_t token);

static inline int dmt_tokens_received(struct dmt_tokens *t, uint32_t token)
{
	size_t w = token / 64;
	uint64_t m = 1ull << (token % 64);

	if (__builtin_expect(w >= t->nwords || (t->bits[w] & m), 0))
		return dmt_tokens_received_slow(t, token);
	t->bits[w] |= m;
	t->outstanding++;
	return 0;
}

/* After a batch of dmt_tokens_received(): update the high-water mark of
 * tokens held (outstanding, queued for release, or deferred). */
static inline void dmt_tokens_update_max(struct dmt_tokens *t)
{
	uint64_t held = t->outstanding + t->pending_frags + t->deferred_pending;

	if (held > t->outstanding_max)
		t->outstanding_max = held;
}
bool dmt_tokens_is_outstanding(const struct dmt_tokens *t, uint32_t token);
/*
 * Take the tokens of frags out of the outstanding set, all or nothing:
 * returns 0, or -EINVAL with *bad set to the index of the first fragment
 * whose token is not outstanding (or repeats).  LINEAR entries are skipped.
 */
int dmt_tokens_take(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		    size_t n, size_t *bad);
/* Queue one taken token for release (may flush).  0 or negative errno. */
int dmt_tokens_queue(struct dmt_tokens *t, uint32_t token);
/* take + queue in one pass over frags (all or nothing like take). */
int dmt_tokens_release(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		       size_t n, size_t *bad);
/* Give pending tokens to the kernel, retrying partial returns.  Returns
 * the number freed or a negative errno. */
int dmt_tokens_flush(struct dmt_tokens *t);
/* Defer already-taken tokens until done(arg) says so. */
int dmt_tokens_defer(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		     size_t n, devmemtcp_done_fn done, void *arg);
/* Poll deferred entries in order (blocking when wait) and queue the tokens
 * of finished ones.  Returns the number of tokens queued or an errno. */
int dmt_tokens_poll(struct dmt_tokens *t, bool wait);
/* Queue every outstanding token (after waiting for deferred ones). */
int dmt_tokens_release_all(struct dmt_tokens *t);

#endif
