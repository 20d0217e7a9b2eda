// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Receive: recvmsg(MSG_SOCK_DEVMEM) into fragments, token release, stats. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "buf/buf.h"
#include "core/fork.h"
#include "rx.h"
#include "zcrx.h"

#define CMSG_FRAG_SPACE CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))
#define DEFAULT_CTRL_FRAGS 64
/* Initial control buffer at most: 400000 fragments' worth */
#define MAX_CTRL_SIZE (16u << 20)

struct rx_buf {
	uint32_t id;
	struct devmemtcp_buf *buf;	/* a reference of the handle's */
};

/*
 * Threads: one thread receives (devmemtcp_rx_recv) while any thread may
 * release (rx_release, rx_release_after, rx_flush, rx_release_all) and
 * read the statistics.  lock covers the token manager, the registered
 * buffers, the statistics and err; the receiving thread drops it while
 * blocked in recvmsg, so a release never waits for data to arrive.  ctrl,
 * ctrl_cap and ctrl_extra belong to the receiving thread alone.
 */
struct devmemtcp_rx {
	struct devmemtcp_ctx *ctx;
	pthread_mutex_t lock;
	struct dmt_err err;
	int fd;
	char *ctrl;
	size_t ctrl_cap;	/* allocated */
	size_t ctrl_extra;	/* room for cmsgs other than devmem ones */
	struct rx_buf *bufs;
	size_t nbufs;
	size_t last;		/* index of the last binding looked up */
	struct dmt_tokens tokens;
	struct devmemtcp_rx_stats st;
	bool warned_miss;
	bool general;		/* no annot_run: dmt_rx_set_general */
	struct dmt_zcrx_sock *zc;	/* io_uring zcrx socket, NULL: devmem */
	unsigned int fork_gen;	/* fork.h */
};

static int sock_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	int fd = *(const int *)arg;
	int ret = setsockopt(fd, SOL_SOCKET, SO_DEVMEM_DONTNEED, t,
			     (socklen_t)(n * sizeof(*t)));

	return ret < 0 ? -errno : ret;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_new(struct devmemtcp_ctx *ctx, int fd,
				      const struct devmemtcp_rx_opts *opts,
				      struct devmemtcp_rx **rxp)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_rx *rx;
	int domain, ret;

	if (!ctx)
		return -EINVAL;
	if (!rxp)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_rx_new: rx pointer is NULL");
	*rxp = NULL;
	ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_rx_opts);
	if (!ret)
		ret = DMT_OPTS_RESERVED(ctx, &ctx->err, opts, devmemtcp_rx_opts,
					reserved);
	if (ret)
		return ret;
	if (DMT_OPT(opts, devmemtcp_rx_opts, zcrx, NULL) && dmt_forked(opts->zcrx->fork_gen))
		return dmt_fork_refuse(ctx, &ctx->err, "devmemtcp_rx_new", "zcrx handle");
	ret = dmt_tcp_check(ctx, "devmemtcp_rx_new", "devmem TCP", fd, &domain);
	if (ret)
		return ret;
	if (DMT_OPT(opts, devmemtcp_rx_opts, ctrl_size, 0) > MAX_CTRL_SIZE)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_rx_new: opts.ctrl_size %zu is more than %u bytes: 0 (the default, room for %u fragments) or what max_frags of devmemtcp_rx_recv needs is enough; the buffer grows when the kernel needs more",
			       DMT_OPT(opts, devmemtcp_rx_opts, ctrl_size, 0),
			       MAX_CTRL_SIZE, DEFAULT_CTRL_FRAGS);
	rx = dmt_calloc(1, sizeof(*rx));
	if (!rx)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_rx_new");
	rx->ctx = ctx;
	rx->fd = fd;
	rx->fork_gen = dmt_fork_gen();
	if (DMT_OPT(opts, devmemtcp_rx_opts, zcrx, NULL)) {
		ret = dmt_zcrx_sock_new(opts->zcrx, fd, &ctx->err, &rx->zc);
		if (ret) {
			free(rx);
			return ret;
		}
	}
	rx->ctrl_cap = DMT_OPT(opts, devmemtcp_rx_opts, ctrl_size,
			       DEFAULT_CTRL_FRAGS * CMSG_FRAG_SPACE);
	if (rx->ctrl_cap < CMSG_FRAG_SPACE)
		rx->ctrl_cap = CMSG_FRAG_SPACE;
	rx->ctrl = dmt_malloc(rx->ctrl_cap);
	if (!rx->ctrl) {
		dmt_zcrx_sock_free(rx->zc);
		free(rx);
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_rx_new");
	}
	/* zcrx: tokens are fragment ids, returned through the refill ring */
	dmt_tokens_init(&rx->tokens,
			DMT_OPT(opts, devmemtcp_rx_opts, release_batch, 0),
			rx->zc ? dmt_zcrx_refill : sock_dontneed,
			rx->zc ? (void *)rx->zc : &rx->fd);
	pthread_mutex_init(&rx->lock, NULL);
	rx->st.sz = sizeof(rx->st);
	*rxp = rx;
	return 0;
}

DEVMEMTCP_EXPORT void devmemtcp_rx_free(struct devmemtcp_rx *rx)
{
	DMT_KEEP_ERRNO;
	if (!rx)
		return;
	if (dmt_forked(rx->fork_gen)) {
		/* a parent's: its tokens, deferred releases and zcrx ring
		 * stay the parent's; only this process's memory goes */
		dmt_zcrx_sock_forget(rx->zc);
		dmt_tokens_fini(&rx->tokens);
		for (size_t i = 0; i < rx->nbufs; i++)
			dmt_buf_put(rx->bufs[i].buf);
		free(rx->bufs);
		free(rx->ctrl);
		free(rx);
		return;
	}
	devmemtcp_rx_release_all(rx);
	dmt_zcrx_sock_free(rx->zc);
	dmt_tokens_fini(&rx->tokens);
	pthread_mutex_destroy(&rx->lock);
	for (size_t i = 0; i < rx->nbufs; i++)
		dmt_buf_put(rx->bufs[i].buf);
	free(rx->bufs);
	free(rx->ctrl);
	free(rx);
}

DEVMEMTCP_EXPORT const char *devmemtcp_rx_errmsg(const struct devmemtcp_rx *rx)
{
	DMT_KEEP_ERRNO;
	return rx ? rx->err.msg : "";
}

DEVMEMTCP_EXPORT int devmemtcp_rx_fd(const struct devmemtcp_rx *rx)
{
	DMT_KEEP_ERRNO;
	return rx ? rx->fd : -EINVAL;
}

static int add_buf_locked(struct devmemtcp_rx *rx, uint32_t binding_id,
			  const struct devmemtcp_buf *buf)
{
	struct rx_buf *v;

	if (!binding_id || !buf)
		return dmt_err(rx->ctx, &rx->err, -EINVAL,
			       "devmemtcp_rx_add_buf: binding id %u, buf %p: pass devmemtcp_binding_id() and the bound buffer",
			       binding_id, (const void *)buf);
	for (size_t i = 0; i < rx->nbufs; i++) {
		if (rx->bufs[i].id == binding_id)
			return dmt_err(rx->ctx, &rx->err, -EEXIST,
				       "devmemtcp_rx_add_buf: binding %u is already registered",
				       binding_id);
	}
	/* the binding's page is not known here: the host page is the least */
	if (dmt_buf_check_pages(buf, (uint64_t)sysconf(_SC_PAGESIZE), false,
				"devmemtcp_rx_add_buf", &rx->err))
		return dmt_err_log(rx->ctx, &rx->err);
	v = dmt_realloc(rx->bufs, (rx->nbufs + 1) * sizeof(*v));
	if (!v)
		return dmt_err_nomem(rx->ctx, &rx->err, "devmemtcp_rx_add_buf");
	v[rx->nbufs++] = (struct rx_buf){ binding_id, dmt_buf_get(buf) };
	rx->bufs = v;
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_add_buf(struct devmemtcp_rx *rx,
					  uint32_t binding_id,
					  const struct devmemtcp_buf *buf)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!rx)
		return -EINVAL;
	if (dmt_forked(rx->fork_gen))
		return dmt_fork_refuse(rx->ctx, &rx->err, "devmemtcp_rx_add_buf", "receiver");
	pthread_mutex_lock(&rx->lock);
	ret = add_buf_locked(rx, binding_id, buf);
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

static const struct devmemtcp_buf *lookup_buf(struct devmemtcp_rx *rx,
					      uint32_t id)
{
	if (rx->last < rx->nbufs && rx->bufs[rx->last].id == id)
		return rx->bufs[rx->last].buf;
	for (size_t i = 0; i < rx->nbufs; i++) {
		if (rx->bufs[i].id == id) {
			rx->last = i;
			return rx->bufs[i].buf;
		}
	}
	return NULL;
}

/*
 * What the receive processing keeps in registers over one receive: the
 * tokens of the current bitmap word not yet recorded (a receive's tokens
 * come in runs that share a word: one test and one store per run, not a
 * store per token chained to the one before through memory), and the
 * binding looked up last with its first segment.
 */
struct annot {
	struct devmemtcp_rx *rx;
	uint64_t *bits;			/* the bitmap, nwords words */
	size_t nwords, w;
	uint64_t mask;			/* tokens of word w to record */
	uint32_t id;			/* the binding of buf */
	const struct devmemtcp_buf *buf;	/* NULL: none looked up */
	uint64_t s_off, s_len, s_addr;	/* its only segment (s_len 0: not one) */
};

static void outstanding_twice(struct devmemtcp_rx *rx, uint32_t token)
{
	dmt_log(rx->ctx, DEVMEMTCP_LOG_WARN,
		"token %u received while still outstanding", token);
}

/* Record the tokens of a->mask (in word a->w). */
static void annot_commit(struct annot *a)
{
	struct dmt_tokens *t = &a->rx->tokens;
	uint64_t old, mask = a->mask;

	if (!mask)
		return;
	a->mask = 0;
	old = a->bits[a->w];
	if (__builtin_expect(old & mask, 0)) {
		/* the kernel never does that: said per token, as before */
		for (uint64_t m = old & mask; m; m &= m - 1)
			outstanding_twice(a->rx, (uint32_t)(a->w * 64) +
							(uint32_t)__builtin_ctzll(m));
		mask &= ~old;
	}
	a->bits[a->w] = old | mask;
	t->outstanding += (uint64_t)__builtin_popcountll(mask);
}

/* One token by the token manager itself (outside the bitmap, or a repeat
 * within this receive). */
static int annot_one(struct annot *a, uint32_t token)
{
	struct dmt_tokens *t = &a->rx->tokens;
	int ret;

	annot_commit(a);
	ret = dmt_tokens_received(t, token);
	a->bits = t->bits;	/* it may have grown */
	a->nwords = t->nwords;
	if (ret == -ENOMEM)
		return ret;
	if (ret)
		outstanding_twice(a->rx, token);
	return 0;
}

/* Look binding id up and keep it, with its only segment, as the one
 * looked up last; the buffer or NULL. */
static const struct devmemtcp_buf *annot_bind(struct annot *a, uint32_t id)
{
	const struct devmemtcp_buf *buf = lookup_buf(a->rx, id);

	a->id = id;
	a->buf = buf;
	a->s_len = 0;
	if (buf && buf->nsegs == 1) {
		a->s_off = buf->segs[0].offset;
		a->s_len = buf->segs[0].len;
		a->s_addr = buf->segs[0].addr;
	}
	return buf;
}

/* Token, address and steering check of one freshly parsed fragment. */
static inline __attribute__((always_inline)) int
annotate(void *arg, struct devmemtcp_frag *f)
{
	struct annot *a = arg;
	struct devmemtcp_rx *rx = a->rx;
	const struct devmemtcp_buf *buf;
	uint32_t tok = f->token;
	size_t w = tok / 64;
	uint64_t m = 1ull << (tok % 64);
	long s;

	if (w != a->w || (a->mask & m) || w >= a->nwords) {
		annot_commit(a);
		if (w >= a->nwords || (a->bits[w] & m)) {
			int ret = annot_one(a, tok);

			if (ret)
				return ret;
			goto lookup;
		}
		a->w = w;
	}
	a->mask |= m;
lookup:
	if (__builtin_expect(f->binding_id == a->id && a->buf, 1)) {
		buf = a->buf;
	} else {
		buf = annot_bind(a, f->binding_id);
	}
	if (__builtin_expect(!buf, 0)) {
		f->flags |= DEVMEMTCP_FRAG_FOREIGN;
		if (!rx->st.foreign_frags)
			dmt_err(rx->ctx, &rx->err, -EREMOTEIO,
				"fragment of dma-buf binding %u, which this receiver does not know (%zu registered): the flow is steered to a queue bound to another buffer; fix the ntuple rule or register the buffer with devmemtcp_rx_add_buf()",
				f->binding_id, rx->nbufs);
		rx->st.foreign_frags++;
		return 0;
	}
	/* most buffers have one segment: check it before searching */
	if (a->s_len) {
		if (f->offset - a->s_off < a->s_len)
			f->addr = a->s_addr + (f->offset - a->s_off);
		return 0;
	}
	s = dmt_segments_find(buf->segs, buf->nsegs, f->offset);
	if (s >= 0)
		f->addr = buf->segs[s].addr + (f->offset - buf->segs[s].offset);
	return 0;
}

/*
 * The common receive, with everything in registers: back-to-back
 * SCM_DEVMEM_DMABUF cmsgs of the kernel's size, of one registered binding
 * with one segment, each token inside the bitmap and new.  Makes the
 * fragments of those from *cmp on, exactly as annotate() would, and leaves
 * *cmp at the first cmsg that is anything else (NULL: none left), having
 * done nothing for it: the general parse goes on from there.  Returns the
 * fragments made; p gets their count and bytes.
 */
static size_t annot_run(struct annot *a, const struct msghdr *msg,
			struct cmsghdr **cmp, struct devmemtcp_frag *frags,
			size_t max, struct dmt_parse *p)
{
	const size_t step = CMSG_LEN(sizeof(struct dmt_dmabuf_cmsg));
	const char *c = (const char *)*cmp;
	const char *end = (const char *)msg->msg_control + msg->msg_controllen;
	const struct cmsghdr *cm = *cmp;
	const struct devmemtcp_buf *buf;
	uint64_t *bits = a->bits, mask = 0, bytes = 0, s_off, s_len, s_addr;
	size_t nwords = a->nwords, w = SIZE_MAX, n = 0, lim;
	uint32_t id;

	/* step == CMSG_SPACE(the body): the next cmsg starts right after */
	_Static_assert(CMSG_LEN(sizeof(struct dmt_dmabuf_cmsg)) ==
		       CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg)), "cmsg step");
	if ((size_t)(end - c) < step || cm->cmsg_len != step ||
	    cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_DEVMEM_DMABUF)
		return 0;
	id = ((const struct dmt_dmabuf_cmsg *)CMSG_DATA(cm))->dmabuf_id;
	buf = annot_bind(a, id);
	if (!buf || buf->nsegs != 1)
		return 0;
	s_off = a->s_off;
	s_len = a->s_len;
	s_addr = a->s_addr;
	lim = (size_t)(end - c) / step;	/* whole cmsgs left, at most max */
	if (lim > max)
		lim = max;
	while (n < lim) {
		const struct dmt_dmabuf_cmsg *dc;
		struct devmemtcp_frag *f;
		uint64_t m, off;
		uint32_t tok;
		size_t tw;

		cm = (const struct cmsghdr *)c;
		dc = (const struct dmt_dmabuf_cmsg *)CMSG_DATA(cm);
		if (cm->cmsg_len != step || cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_DEVMEM_DMABUF || dc->dmabuf_id != id)
			break;
		tok = dc->frag_token;
		tw = tok / 64;
		m = 1ull << (tok % 64);
		if (tw != w) {
			/* a new word: the general path says why not */
			if (tw >= nwords || (bits[tw] & m))
				break;
			a->w = w;
			a->mask = mask;
			annot_commit(a);
			w = tw;
			mask = 0;
		} else if (mask & m) {
			break;	/* a repeat within the receive */
		}
		mask |= m;
		off = dc->frag_offset;
		f = &frags[n++];
		f->offset = off;
		f->addr = off - s_off < s_len ? s_addr + (off - s_off) : 0;
		f->len = dc->frag_size;
		f->token = tok;
		f->binding_id = id;
		f->flags = 0;
		bytes += dc->frag_size;
		c += step;
	}
	a->w = w;
	a->mask = mask;
	p->ndmabuf = (uint32_t)n;
	p->dmabuf_bytes = bytes;
	*cmp = dmt_cmsg_at(c, end);
	return n;
}

void dmt_rx_set_general(struct devmemtcp_rx *rx, bool general)
{
	pthread_mutex_lock(&rx->lock);
	rx->general = general;
	pthread_mutex_unlock(&rx->lock);
}

struct dmt_tokens *dmt_rx_tokens(struct devmemtcp_rx *rx)
{
	return &rx->tokens;
}

/* The receive processing, with rx->lock held. */
static int process_locked(struct devmemtcp_rx *rx, const struct msghdr *msg,
			  size_t got, struct devmemtcp_frag *frags, size_t max)
{
	struct dmt_parse p = { 0 };
	struct annot a = { .rx = rx, .bits = rx->tokens.bits,
			   .nwords = rx->tokens.nwords };
	struct cmsghdr *cm = dmt_cmsg_first(msg);
	size_t n0 = cm && !rx->general ? annot_run(&a, msg, &cm, frags, max, &p)
				       : 0;
	int n;

	n = dmt_cmsg_parse_at(msg, got, frags, max, &p, annotate, &a, cm, n0);
	annot_commit(&a);	/* also after a failed parse: what it took */
	dmt_tokens_update_max(&rx->tokens);
	if (n == -ENOMEM)
		return dmt_err_nomem(rx->ctx, &rx->err,
				     "recording the tokens received");
	if (n < 0) {
		if (msg->msg_flags & MSG_CTRUNC)
			return dmt_err(rx->ctx, &rx->err, -ENOBUFS,
				       "recvmsg: control messages were truncated (MSG_CTRUNC) and %zu bytes are not fully described: they are lost; the control buffer has been grown",
				       got);
		return dmt_err(rx->ctx, &rx->err, n,
			       "recvmsg returned %zu bytes that the control messages do not account for: unexpected kernel behaviour",
			       got);
	}
	rx->st.bytes += got;
	rx->st.linear_bytes += p.linear_bytes;
	rx->st.dmabuf_bytes += p.dmabuf_bytes;
	rx->st.frags += p.ndmabuf;
	if (!p.ndmabuf && !p.nlinear) {
		rx->st.steering_misses++;
		if (!rx->warned_miss) {
			rx->warned_miss = true;
			dmt_log(rx->ctx, DEVMEMTCP_LOG_WARN,
				"fd %d: plain data on a devmem receive: the flow is not steered to a queue with a dma-buf bound (check the ntuple rule and RSS)",
				rx->fd);
		}
	}
	return n;
}

int dmt_rx_process(struct devmemtcp_rx *rx, const struct msghdr *msg,
		   size_t got, struct devmemtcp_frag *frags, size_t max)
{
	int n;

	pthread_mutex_lock(&rx->lock);
	n = process_locked(rx, msg, got, frags, max);
	pthread_mutex_unlock(&rx->lock);
	return n;
}

/* Record (and log) a message on rx from outside its lock. */
static int __attribute__((format(printf, 3, 4)))
rx_err(struct devmemtcp_rx *rx, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pthread_mutex_lock(&rx->lock);
	code = dmt_verr(rx->ctx, &rx->err, code, fmt, ap);
	pthread_mutex_unlock(&rx->lock);
	va_end(ap);
	return code;
}

static int dontneed_failed(struct devmemtcp_rx *rx, int ret)
{
	return dmt_err(rx->ctx, &rx->err, ret,
		       "SO_DEVMEM_DONTNEED failed: %s: the tokens stay queued on the handle and go to the kernel at the next flush",
		       strerror(-ret));
}

/* Queue the tokens of finished deferred releases and hand every queued
 * release to the kernel (rx->lock held); the number freed, or errno. */
static int flush_due(struct devmemtcp_rx *rx)
{
	int ret = dmt_tokens_poll(&rx->tokens, false);

	if (ret < 0)
		return dmt_err(rx->ctx, &rx->err, ret,
			       "a deferred-release completion failed: %s",
			       strerror(-ret));
	ret = dmt_tokens_flush(&rx->tokens);
	if (ret < 0)
		return dontneed_failed(rx, ret);
	return ret;
}

/* Other control messages took the room of devmem ones (ETOOSMALL or
 * MSG_CTRUNC): leave more room for them from now on. */
static void ctrl_grow(struct devmemtcp_rx *rx, uint64_t *grows)
{
	rx->ctrl_extra = rx->ctrl_extra ? rx->ctrl_extra * 2 : 256;
	(*grows)++;
}

/* The control buffer for max_frags devmem cmsgs plus the extra room;
 * its length in *len. */
static int ctrl_reserve(struct devmemtcp_rx *rx, size_t max_frags, size_t *len)
{
	size_t need = max_frags * CMSG_FRAG_SPACE + rx->ctrl_extra;

	if (need > rx->ctrl_cap) {
		char *c = dmt_realloc(rx->ctrl, need);

		if (!c)
			return -ENOMEM;
		rx->ctrl = c;
		rx->ctrl_cap = need;
	}
	*len = need;
	return 0;
}

static int recv_failed(struct devmemtcp_rx *rx, int ret, const void *linear,
		       size_t len)
{
	if (ret == -EAGAIN || ret == -EINTR)
		return ret;
	if (ret == -EFAULT)
		return rx_err(rx, ret,
			      "recvmsg(MSG_SOCK_DEVMEM) failed with EFAULT: the linear buffer (%p, %zu bytes) is not writable, or devmem data reached a socket read without MSG_SOCK_DEVMEM",
			      linear, len);
	return rx_err(rx, ret, "recvmsg(MSG_SOCK_DEVMEM) failed: %s",
		      strerror(-ret));
}

/* What the receiving thread counted outside the lock. */
struct recv_counts {
	uint64_t calls;
	uint64_t grows;
};

/* recvmsg with room for max_frags devmem cmsgs, growing the room for
 * other cmsgs while the kernel says the first one did not fit.  The bytes
 * received, or a negative errno (with a message unless EAGAIN/EINTR).
 * Runs without rx->lock: it may block. */
static ssize_t recv_devmem(struct devmemtcp_rx *rx, struct msghdr *msg,
			   size_t max_frags, struct recv_counts *c)
{
	ssize_t got;
	size_t len;
	int ret;

	for (;;) {
		ret = ctrl_reserve(rx, max_frags, &len);
		if (ret)
			return dmt_err_nomem(rx->ctx, &rx->err,
					     "growing the control buffer of devmemtcp_rx_recv");
		msg->msg_control = rx->ctrl;
		/* no more devmem cmsgs than fragment slots */
		msg->msg_controllen = len;
		got = recvmsg(rx->fd, msg, MSG_SOCK_DEVMEM);
		c->calls++;
		if (got >= 0)
			return got;
		if (errno != ETOOSMALL)
			return recv_failed(rx, -errno, msg->msg_iov->iov_base,
					   msg->msg_iov->iov_len);
		/* the first cmsg did not fit: other cmsgs take room */
		ctrl_grow(rx, &c->grows);
		if (rx->ctrl_extra > (1u << 20))
			return rx_err(rx, -ENOBUFS,
				      "recvmsg: the kernel reports ETOOSMALL even with %zu bytes of control buffer",
				      max_frags * CMSG_FRAG_SPACE + rx->ctrl_extra);
	}
}

/* The receive of a zcrx socket: fragments from the ring instead of
 * recvmsg, accounted like devmem ones (no linear bytes: the kernel copies
 * those into the area). */
/*
 * zcrx: wait for completions outside the handle's lock (other threads may
 * release meanwhile), then account the tokens under it.  The lock order is
 * the receiver's, then the zcrx handle's.
 */
static int zcrx_recv(struct devmemtcp_rx *rx, struct devmemtcp_frag *frags,
		     size_t max, size_t len)
{
	struct dmt_err err = { 0 };
	bool miss = false;
	int n = dmt_zcrx_recv(rx->zc, frags, max, len, &err, &miss);

	pthread_mutex_lock(&rx->lock);
	rx->st.recv_calls++;
	if (n < 0 && err.code)
		rx->err = err;
	for (int i = 0; i < n; i++) {
		if (dmt_tokens_received(&rx->tokens, frags[i].token) == -ENOMEM) {
			/* untracked tokens could never be released: the rest
			 * waits for the next receive */
			dmt_zcrx_unget(rx->zc, frags + i, (size_t)(n - i));
			if (!i) {
				n = dmt_err(rx->ctx, &rx->err, -ENOMEM,
					    "devmemtcp_rx_recv: out of memory for the token table");
				break;
			}
			n = i;
			break;
		}
		rx->st.bytes += frags[i].len;
		rx->st.dmabuf_bytes += frags[i].len;
	}
	dmt_tokens_update_max(&rx->tokens);
	if (n > 0) {
		rx->st.frags += (unsigned)n;
		rx->st.steering_misses += miss;
	}
	pthread_mutex_unlock(&rx->lock);
	return n;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_recv(struct devmemtcp_rx *rx,
				       struct devmemtcp_frag *frags,
				       size_t max_frags, void *linear,
				       size_t len)
{
	DMT_KEEP_ERRNO;
	struct recv_counts c = { 0 };
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t got;
	int ret;

	if (!rx)
		return -EINVAL;
	if (dmt_forked(rx->fork_gen))
		return dmt_fork_refuse(rx->ctx, &rx->err, "devmemtcp_rx_recv", "receiver");
	if (!frags || !max_frags || !linear || !len)
		return rx_err(rx, -EINVAL,
			      "devmemtcp_rx_recv: need a fragment array (max_frags > 0) and a linear buffer of len > 0 bytes");
	if (len > INT_MAX)
		len = INT_MAX;
	/* hand back what is due before we may block */
	pthread_mutex_lock(&rx->lock);
	ret = flush_due(rx);
	pthread_mutex_unlock(&rx->lock);
	if (ret < 0)
		return ret;
	if (rx->zc)
		return zcrx_recv(rx, frags, max_frags > INT_MAX ? INT_MAX : max_frags, len);

	if (max_frags > INT_MAX / CMSG_FRAG_SPACE)
		max_frags = INT_MAX / CMSG_FRAG_SPACE;
	iov.iov_base = linear;
	iov.iov_len = len;
	got = recv_devmem(rx, &msg, max_frags, &c);
	if (got > 0 && (msg.msg_flags & MSG_CTRUNC))
		ctrl_grow(rx, &c.grows);
	pthread_mutex_lock(&rx->lock);
	rx->st.recv_calls += c.calls;
	rx->st.ctrl_grows += c.grows;
	ret = got > 0 ? process_locked(rx, &msg, (size_t)got, frags, max_frags)
		      : (int)got;
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

static int frags_null(struct devmemtcp_rx *rx, const char *fn)
{
	return dmt_err(rx->ctx, &rx->err, -EINVAL, "%s: frags is NULL", fn);
}

static int not_outstanding(struct devmemtcp_rx *rx, const char *fn,
			   const struct devmemtcp_frag *frags, size_t bad)
{
	return dmt_err(rx->ctx, &rx->err, -EINVAL,
		       "%s: token %u of fragment %zu is not outstanding (released already, listed twice, or never received): nothing was released",
		       fn, frags[bad].token, bad);
}

static int release_locked(struct devmemtcp_rx *rx,
			  const struct devmemtcp_frag *frags, size_t n)
{
	size_t bad = 0;
	int ret;

	if (n && !frags)
		return frags_null(rx, "devmemtcp_rx_release");
	ret = dmt_tokens_release(&rx->tokens, frags, n, &bad);
	if (ret == -EINVAL)
		return not_outstanding(rx, "devmemtcp_rx_release", frags, bad);
	if (ret < 0)
		return dontneed_failed(rx, ret);
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_release(struct devmemtcp_rx *rx,
					  const struct devmemtcp_frag *frags,
					  size_t n)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!rx)
		return -EINVAL;
	if (dmt_forked(rx->fork_gen))
		return dmt_fork_refuse(rx->ctx, &rx->err, "devmemtcp_rx_release", "receiver");
	pthread_mutex_lock(&rx->lock);
	ret = release_locked(rx, frags, n);
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

static int release_after_locked(struct devmemtcp_rx *rx,
				const struct devmemtcp_frag *frags, size_t n,
				devmemtcp_done_fn done, void *arg)
{
	size_t bad = 0;
	int ret;

	if (!done)
		return dmt_err(rx->ctx, &rx->err, -EINVAL,
			       "devmemtcp_rx_release_after: done is NULL: use devmemtcp_rx_release() for immediate release");
	if (n && !frags)
		return frags_null(rx, "devmemtcp_rx_release_after");
	ret = dmt_tokens_take_defer(&rx->tokens, frags, n, done, arg, &bad);
	if (ret == -EINVAL)
		return not_outstanding(rx, "devmemtcp_rx_release_after", frags,
				       bad);
	if (ret) {
		return dmt_err(rx->ctx, &rx->err, -ENOMEM,
			       "devmemtcp_rx_release_after: out of memory: nothing was deferred, the fragments are still the caller's");
	}
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_release_after(struct devmemtcp_rx *rx,
						const struct devmemtcp_frag *frags,
						size_t n, devmemtcp_done_fn done,
						void *arg)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!rx)
		return -EINVAL;
	if (dmt_forked(rx->fork_gen))
		return dmt_fork_refuse(rx->ctx, &rx->err, "devmemtcp_rx_release_after", "receiver");
	pthread_mutex_lock(&rx->lock);
	ret = release_after_locked(rx, frags, n, done, arg);
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_flush(struct devmemtcp_rx *rx)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!rx)
		return -EINVAL;
	if (dmt_forked(rx->fork_gen))
		return dmt_fork_refuse(rx->ctx, &rx->err, "devmemtcp_rx_flush", "receiver");
	pthread_mutex_lock(&rx->lock);
	ret = flush_due(rx);
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

static int release_all_locked(struct devmemtcp_rx *rx)
{
	int polled, ret, total = 0;

	/* a failed done keeps its own tokens: release the others anyway */
	polled = dmt_tokens_poll(&rx->tokens, true);
	ret = dmt_tokens_queue_all(&rx->tokens);
	if (ret >= 0) {
		total = ret + (polled > 0 ? polled : 0);
		ret = dmt_tokens_flush(&rx->tokens);
	}
	if (polled < 0)
		return dmt_err(rx->ctx, &rx->err, polled,
			       "releasing every token: a deferred-release completion failed: %s: its tokens stay held, the others were released",
			       strerror(-polled));
	if (ret < 0)
		return dontneed_failed(rx, ret);
	return total;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_release_all(struct devmemtcp_rx *rx)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!rx)
		return -EINVAL;
	if (dmt_forked(rx->fork_gen))
		return dmt_fork_refuse(rx->ctx, &rx->err, "devmemtcp_rx_release_all", "receiver");
	pthread_mutex_lock(&rx->lock);
	ret = release_all_locked(rx);
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_rx_stats(const struct devmemtcp_rx *rx,
					struct devmemtcp_rx_stats *stats)
{
	DMT_KEEP_ERRNO;
	pthread_mutex_t *lock;
	struct devmemtcp_rx_stats s;

	if (!rx || !stats || stats->sz < sizeof(size_t))
		return -EINVAL;
	/* the lock guards what other threads change, not the handle */
	lock = (pthread_mutex_t *)&rx->lock;
	pthread_mutex_lock(lock);
	s = rx->st;
	s.tokens_outstanding = dmt_tokens_held(&rx->tokens);
	s.tokens_outstanding_max = rx->tokens.outstanding_max;
	s.tokens_released = rx->tokens.released;
	s.dontneed_calls = rx->tokens.dontneed_calls;
	s.partial_returns = rx->tokens.partial_returns;
	s.deferred_pending = rx->tokens.deferred_pending;
	pthread_mutex_unlock(lock);
	dmt_copy_out(stats, &s, sizeof(s));
	return 0;
}
