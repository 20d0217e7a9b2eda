// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Memory registrations and the data path: isend/irecv post requests; a
 * mover moves as many bytes as the sockets take without blocking.  A send
 * comm writes each message's header on the control socket and its payload
 * on the data socket in order; a receive comm reads headers ahead and
 * assigns each message to a buffer of the oldest receive not yet filled
 * (by tag within a grouped receive).  Requests are done in posting order.
 *
 * The mover is a helper thread of the comm (NCCL_DEVMEMTCP_THREADS=1, the
 * default), as NCCL's socket transport has when asked for threads: it
 * copies while NCCL's proxy thread posts and tests other comms, and sleeps
 * in poll() when the sockets cannot move; test() then only reads a
 * request's state.  Without one, isend, irecv and test move the bytes in
 * NCCL's proxy thread.  Between the two threads: NCCL's thread fills a
 * request and then publishes it (q_tail, release); the helper alone reads
 * the sockets and the comm's moving state, and stores DONE into a request
 * (release) after it has stopped looking at it, so that NCCL's thread may
 * free and reuse it at once; the first error is stored atomically.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugin.h"
#include "unpack.h"

#define BOUNCE_SIZE (4u << 20)
/* Largest single send()/recv(): keeps one huge message from starving the
 * others on the same proxy thread. */
#define IO_MAX (64u << 20)

struct dmtn_comm *dmtn_comm_get(void *p, enum dmtn_comm_kind kind,
				const char *fn)
{
	struct dmtn_comm *c = p;
	static const char *const names[] = { "?", "listen", "send", "recv" };

	if (!c || c->magic != DMTN_COMM_MAGIC || (kind && c->kind != kind)) {
		DMTN_WARN("%s: %p is not a %s comm of this plugin", fn, p,
			  names[kind]);
		return NULL;
	}
	return c;
}

static nccl_result_t comm_error(const struct dmtn_comm *c)
{
	return __atomic_load_n(&c->error, __ATOMIC_ACQUIRE);
}

static enum dmtn_req_state req_state(const struct dmtn_req *r)
{
	return __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
}

static void req_state_set(struct dmtn_req *r, enum dmtn_req_state st)
{
	__atomic_store_n(&r->state, st, __ATOMIC_RELEASE);
}

/* Record the first error of a comm; every later call returns it. */
__attribute__((format(printf, 3, 4)))
static nccl_result_t comm_fail(struct dmtn_comm *c, nccl_result_t err,
			       const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (comm_error(c))
		return comm_error(c);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	DMTN_WARN("%s comm %p (%s, peer %s): %s",
		  c->kind == DMTN_COMM_SEND ? "send" : "recv", (void *)c,
		  dmtn.dev[c->dev].name, c->peer, msg);
	__atomic_store_n(&c->error, err, __ATOMIC_RELEASE);
	return err;
}

static nccl_result_t sock_error(struct dmtn_comm *c, int err, const char *what)
{
	if (err == EPIPE || err == ECONNRESET || err == 0)
		return comm_fail(c, NCCL_ERR_REMOTE,
				 "%s: the connection was closed by the peer%s%s",
				 what, err ? ": " : "", err ? strerror(err) : "");
	return comm_fail(c, NCCL_ERR_SYSTEM, "%s: %s", what, strerror(err));
}

static bool bounce_ready(struct dmtn_comm *c)
{
	if (c->bounce)
		return true;
	c->bounce = malloc(BOUNCE_SIZE);
	c->bounce_size = c->bounce ? BOUNCE_SIZE : 0;
	return c->bounce != NULL;
}

/* ---- registrations ------------------------------------------------------ */

static nccl_result_t mr_new(void *comm, void *data, size_t size, int type,
			    const char *fn, struct dmtn_mr **out)
{
	struct dmtn_comm *c = dmtn_comm_get(comm, 0, fn);
	struct dmtn_mr *mr;
	int ret;

	if (!c || c->kind == DMTN_COMM_LISTEN || !out)
		return NCCL_ERR_INTERNAL;
	if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
		DMTN_WARN("%s: memory type %d: only NCCL_PTR_HOST (1) and NCCL_PTR_CUDA (2) exist",
			  fn, type);
		return NCCL_ERR_INTERNAL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NCCL_ERR_SYSTEM;
	mr->magic = DMTN_MR_MAGIC;
	mr->comm = c;
	mr->base = (uintptr_t)data;
	mr->size = size;
	mr->type = type;
	mr->cuda_dev = -1;
	mr->setup = c->kind == DMTN_COMM_RECV && !c->recv_started;
	if (type == NCCL_PTR_CUDA) {
		ret = dmtn_cuda_ptr_device(data, &mr->cuda_dev);
		if (ret) {
			DMTN_WARN("%s: %p is not CUDA memory this process can use: %s",
				  fn, data, dmtn_cuda_why());
			free(mr);
			return NCCL_ERR_CUDA;
		}
	}
	*out = mr;
	return NCCL_OK;
}

/* Can sends of c go out with devmem TX? */
static bool tx_devmem(const struct dmtn_comm *c)
{
	return c->kind == DMTN_COMM_SEND && dmtn.dev[c->dev].devmem && dmtn.cfg.tx;
}

nccl_result_t dmtn_reg_mr(void *comm, void *data, size_t size, int type,
			  void **mhandle)
{
	struct dmtn_mr *mr;
	nccl_result_t ret;

	ret = mr_new(comm, data, size, type, __func__, &mr);
	if (ret)
		return ret;
	/* CUDA memory without a dma-buf: exported for devmem TX */
	if (type == NCCL_PTR_CUDA && tx_devmem(mr->comm)) {
		pthread_mutex_lock(&mr->comm->mu);
		dmtn_devmem_mr(mr->comm, mr, -1);
		pthread_mutex_unlock(&mr->comm->mu);
	}
	*mhandle = mr;
	return NCCL_OK;
}

nccl_result_t dmtn_reg_mr_dmabuf(void *comm, void *data, size_t size,
				 int type, uint64_t offset, int fd,
				 void **mhandle)
{
	struct dmtn_mr *mr;
	nccl_result_t ret;

	ret = mr_new(comm, data, size, type, __func__, &mr);
	if (ret)
		return ret;
	mr->dmabuf_offset = offset;
	/* Only sends read a dma-buf by offset; receives land in the bound
	 * buffer and are gathered into data. */
	if (tx_devmem(mr->comm)) {
		pthread_mutex_lock(&mr->comm->mu);
		dmtn_devmem_mr(mr->comm, mr, fd);
		pthread_mutex_unlock(&mr->comm->mu);
	}
	*mhandle = mr;
	return NCCL_OK;
}

/* A registration is usable on any comm of the process (NCCL keeps them per
 * comm, regIsGlobal 0, but nothing here depends on it); devmem TX uses it
 * only on the comm it was bound for. */
static struct dmtn_mr *mr_get(struct dmtn_comm *c, void *mhandle,
			      const char *fn)
{
	struct dmtn_mr *mr = mhandle;

	if (!mr)
		return NULL;
	if (mr->magic != DMTN_MR_MAGIC) {
		DMTN_WARN("%s: %p is not a memory handle of this plugin (comm %p)",
			  fn, mhandle, (void *)c);
		return (struct dmtn_mr *)-1;
	}
	return mr;
}

/*
 * deregMr of memory that a request of c not yet done still uses (NCCL
 * deregisters after its requests are done; an abort may not): the comm
 * fails, so that its mover never looks at the request, and so at mr,
 * again.  Under c->mu.  A registration used on a comm other than the one
 * it was made on and deregistered with (NCCL's are per comm) must outlive
 * that comm's requests.
 */
static void mr_release(struct dmtn_comm *c, const struct dmtn_mr *mr)
{
	unsigned int tail = __atomic_load_n(&c->q_tail, __ATOMIC_ACQUIRE);

	for (unsigned int i = c->q_done; i != tail; i++) {
		const struct dmtn_req *r = c->q[i % DMTN_NREQS];

		for (int k = 0; k < r->n; k++)
			if (r->buf[k].mr == mr) {
				comm_fail(c, NCCL_ERR_INVALID_USAGE,
					  "deregMr of memory that a %s not yet done still uses: the comm stops",
					  r->kind == DMTN_REQ_SEND ? "send" : "receive");
				return;
			}
	}
}

nccl_result_t dmtn_dereg_mr(void *comm, void *mhandle)
{
	struct dmtn_comm *c = dmtn_comm_get(comm, 0, __func__);
	struct dmtn_mr *mr;

	if (!c)
		return NCCL_ERR_INTERNAL;
	mr = mr_get(c, mhandle, __func__);
	if (!mr || mr == (struct dmtn_mr *)-1)
		return NCCL_ERR_INTERNAL;
	/* the comm's helper may be moving bytes of it: it stops first */
	pthread_mutex_lock(&mr->comm->mu);
	mr_release(mr->comm, mr);
	dmtn_devmem_mr_free(mr);
	pthread_mutex_unlock(&mr->comm->mu);
	if (c != mr->comm) {
		pthread_mutex_lock(&c->mu);
		mr_release(c, mr);
		pthread_mutex_unlock(&c->mu);
	}
	mr->magic = 0;
	free(mr);
	return NCCL_OK;
}

/* ---- requests ----------------------------------------------------------- */

static struct dmtn_req *req_get(struct dmtn_comm *c, enum dmtn_req_kind kind)
{
	struct dmtn_req *r;

	if (!c->nfree)
		return NULL;
	r = &c->reqs[c->free_reqs[--c->nfree]];
	memset(r, 0, sizeof(*r));
	r->magic = DMTN_REQ_MAGIC;
	r->kind = kind;
	r->state = DMTN_REQ_ACTIVE;
	r->comm = c;
	r->fence_dev = -1;
	return r;
}

static void req_put(struct dmtn_req *r)
{
	struct dmtn_comm *c = r->comm;

	r->magic = 0;
	req_state_set(r, DMTN_REQ_FREE);
	c->free_reqs[c->nfree++] = (int)(r - c->reqs);
}

/* The common start of isend, irecv and iflush: the comm, with *request
 * cleared (on entry NCCL may leave a hint there, such as
 * NCCL_NET_OPTIONAL_RECV_COMPLETION) and its first error returned. */
static nccl_result_t post_start(void *p, enum dmtn_comm_kind kind,
				void **request, const char *fn,
				struct dmtn_comm **cp)
{
	struct dmtn_comm *c = dmtn_comm_get(p, kind, fn);

	*cp = c;
	if (!c || !request)
		return NCCL_ERR_INTERNAL;
	*request = NULL;
	return comm_error(c);
}

/* A request for the end of the comm's queue, not yet in it (post() puts
 * it there once it is filled); NULL when the comm is full (NCCL posts
 * again later). */
static struct dmtn_req *req_new(struct dmtn_comm *c, enum dmtn_req_kind kind)
{
	unsigned int done = __atomic_load_n(&c->q_done, __ATOMIC_ACQUIRE);

	if (c->q_tail - done >= DMTN_NREQS)
		return NULL;
	return req_get(c, kind);
}

/* Does [data, data + size) lie in the registration? */
static nccl_result_t buf_check(struct dmtn_comm *c, struct dmtn_mr *mr,
			       const void *data, size_t size, const char *fn)
{
	uintptr_t p = (uintptr_t)data;

	if (mr == (struct dmtn_mr *)-1)
		return NCCL_ERR_INTERNAL;
	if (mr && (p < mr->base || p - mr->base > mr->size ||
		   size > mr->size - (p - mr->base))) {
		DMTN_WARN("%s: %zu bytes at %p are outside the registration %p (%zu bytes at %#lx)",
			  fn, size, data, (void *)mr, mr->size,
			  (unsigned long)mr->base);
		return NCCL_ERR_INTERNAL;
	}
	if (!data && size)
		return NCCL_ERR_INTERNAL;
	return NCCL_OK;
}

/* ---- send path ---------------------------------------------------------- */

/* Queue the headers of the sends posted since the last call; each send
 * learns here whether it goes out with devmem TX. */
static void queue_headers(struct dmtn_comm *c, unsigned int tail)
{
	while (c->q_hdr != tail) {
		struct dmtn_req *r = c->q[c->q_hdr++ % DMTN_NREQS];
		struct dmtn_rbuf *b = &r->buf[0];
		struct dmtn_msg m = { DMTN_MSG_MAGIC, b->tag, b->size };

		/* at most one header per request in the queue is unsent: a
		 * send is done only once its header went out */
		if (c->ctrl_out_off) {
			memmove(c->ctrl_out, c->ctrl_out + c->ctrl_out_off,
				c->ctrl_out_len - c->ctrl_out_off);
			c->ctrl_out_len -= c->ctrl_out_off;
			c->ctrl_out_off = 0;
		}
		memcpy(c->ctrl_out + c->ctrl_out_len, &m, sizeof(m));
		c->ctrl_out_len += sizeof(m);
		r->hseq = c->hdr_queued++;
		r->devmem_tx = b->mr && b->mr->comm == c && b->mr->tx_binding &&
			       dmtn_devmem_tx_ready(c, b->mr);
		c->moves++;
	}
}

static nccl_result_t flush_headers(struct dmtn_comm *c)
{
	while (c->ctrl_out_off < c->ctrl_out_len) {
		ssize_t n = send(c->ctrl_fd, c->ctrl_out + c->ctrl_out_off,
				 c->ctrl_out_len - c->ctrl_out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return sock_error(c, errno, "sending message headers");
		}
		c->ctrl_out_off += (size_t)n;
		c->moves++;
	}
	/* what went out of ctrl_out, in whole headers */
	c->hdr_sent = c->hdr_queued -
		      (c->ctrl_out_len - c->ctrl_out_off + sizeof(struct dmtn_msg) - 1) /
			      sizeof(struct dmtn_msg);
	if (c->ctrl_out_off == c->ctrl_out_len)
		c->ctrl_out_off = c->ctrl_out_len = 0;
	return NCCL_OK;
}

/* Plain send of the next bytes of b: bytes moved, or a negative error. */
static ssize_t send_plain(struct dmtn_comm *c, struct dmtn_rbuf *b)
{
	const char *src = b->data + b->done;
	size_t len = b->size - b->done;
	ssize_t n;

	if (b->mr && b->mr->type == NCCL_PTR_CUDA) {
		/* CUDA memory without devmem TX: through host memory */
		if (c->bounce_off == c->bounce_len) {
			if (!bounce_ready(c))
				return -ENOMEM;
			c->bounce_len = len < c->bounce_size ? len : c->bounce_size;
			c->bounce_off = 0;
			if (dmtn_cuda_copy_dtoh(b->mr->cuda_dev, c->bounce,
						(uintptr_t)src, c->bounce_len))
				return -EIO;
			c->st.bounce_bytes += c->bounce_len;
		}
		src = c->bounce + c->bounce_off;
		len = c->bounce_len - c->bounce_off;
	}
	n = send(c->data_fd, src, len < IO_MAX ? len : IO_MAX,
		 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (b->mr && b->mr->type == NCCL_PTR_CUDA)
		c->bounce_off += (size_t)n;
	return n;
}

static nccl_result_t send_progress(struct dmtn_comm *c)
{
	unsigned int tail = __atomic_load_n(&c->q_tail, __ATOMIC_ACQUIRE);
	nccl_result_t ret;

	queue_headers(c, tail);
	ret = flush_headers(c);
	while (!ret && c->q_sent != tail) {
		struct dmtn_req *r = c->q[c->q_sent % DMTN_NREQS];
		struct dmtn_rbuf *b = &r->buf[0];
		ssize_t n = 0;

		if (b->done < b->size) {
			n = r->devmem_tx ? dmtn_devmem_send(c, r, b->mr)
					 : send_plain(c, b);
			if (n < 0)
				return n == -EIO ? comm_fail(c, NCCL_ERR_CUDA, "copying CUDA memory to the host failed: %s", dmtn_cuda_why())
						 : sock_error(c, (int)-n, "sending");
			b->done += (size_t)n;
			c->moves += n > 0;
		}
		if (b->done < b->size || c->hdr_sent <= r->hseq)
			break;
		r->moved = true;
		r->wait = r->devmem_tx;
		c->st.msgs++;
		c->st.bytes += b->size;
		c->q_sent++;
		c->moves++;
	}
	if (!ret && c->dtx && dmtn_devmem_tx_reap(c))
		ret = comm_fail(c, NCCL_ERR_SYSTEM, "devmem TX completions failed (see above)");
	return ret;
}

/* ---- receive path ------------------------------------------------------- */

/* Read headers ahead into c->hdrs. */
static nccl_result_t read_headers(struct dmtn_comm *c)
{
	while (!c->eof && c->h_tail - c->h_head < DMTN_NREQS) {
		ssize_t n = recv(c->ctrl_fd, c->ctrl_in + c->ctrl_in_len,
				 sizeof(c->ctrl_in) - c->ctrl_in_len,
				 MSG_DONTWAIT);
		struct dmtn_msg m;

		if (n < 0)
			return errno == EAGAIN || errno == EINTR
				       ? NCCL_OK
				       : sock_error(c, errno, "reading message headers");
		c->moves++;
		if (n == 0) {
			c->eof = true;
			break;
		}
		c->ctrl_in_len += (size_t)n;
		if (c->ctrl_in_len < sizeof(m))
			continue;
		c->ctrl_in_len = 0;
		if (dmtn_msg_parse(c->ctrl_in, &m))
			return comm_fail(c, NCCL_ERR_INTERNAL,
					 "message header %u has magic %#x, not %#x: the peer does not speak this protocol",
					 c->h_tail, m.magic, DMTN_MSG_MAGIC);
		c->hdrs[c->h_tail++ % DMTN_NREQS] = m;
	}
	return NCCL_OK;
}

/* Give the next message to a buffer of the oldest receive not yet filled. */
static nccl_result_t match_message(struct dmtn_comm *c)
{
	struct dmtn_req *r = c->q[c->q_sent % DMTN_NREQS];
	const struct dmtn_msg *m = &c->hdrs[c->h_head % DMTN_NREQS];
	int i, unmatched = 0;

	for (i = 0; i < r->n; i++)
		if (!r->buf[i].matched && (r->n == 1 || r->buf[i].tag == m->tag))
			break;
	if (i == r->n)
		return comm_fail(c, NCCL_ERR_INTERNAL,
				 "a message with tag %d matches no free buffer of the grouped receive of %d",
				 m->tag, r->n);
	if (m->size > r->buf[i].cap)
		return comm_fail(c, NCCL_ERR_INVALID_USAGE,
				 "a message of %llu bytes (tag %d) does not fit the %zu-byte receive buffer",
				 (unsigned long long)m->size, m->tag,
				 r->buf[i].cap);
	c->h_head++;
	c->moves++;
	r->buf[i].matched = true;
	r->buf[i].size = m->size;
	c->cur_req = r;
	c->cur_buf = i;
	for (int k = 0; k < r->n; k++)
		unmatched += !r->buf[k].matched;
	if (!unmatched)
		c->q_sent++;	/* later messages go to the next receive */
	return NCCL_OK;
}

/* Plain receive into b: bytes moved, 0 when nothing is readable, or a
 * negative errno (-ECONNRESET at end of stream). */
static ssize_t recv_plain(struct dmtn_comm *c, struct dmtn_rbuf *b)
{
	size_t len = b->size - b->done;
	bool cuda = b->mr && b->mr->type == NCCL_PTR_CUDA;
	char *dst = b->data + b->done;
	ssize_t n;

	if (cuda) {
		if (!bounce_ready(c))
			return -ENOMEM;
		dst = c->bounce;
		if (len > c->bounce_size)
			len = c->bounce_size;
	}
	n = recv(c->data_fd, dst, len < IO_MAX ? len : IO_MAX, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	if (cuda) {
		if (dmtn_cuda_copy_htod(b->mr->cuda_dev,
					(uintptr_t)(b->data + b->done),
					c->bounce, (size_t)n))
			return -EIO;
		c->st.bounce_bytes += (uint64_t)n;
	}
	return n;
}

static nccl_result_t recv_complete(struct dmtn_comm *c, struct dmtn_req *r,
				   struct dmtn_rbuf *b)
{
	int left = 0;

	b->complete = true;
	c->cur_req = NULL;
	c->st.msgs++;
	c->st.bytes += b->size;
	c->moves++;
	for (int k = 0; k < r->n; k++)
		left += !r->buf[k].complete;
	if (left)
		return NCCL_OK;
	if (r->unpack)
		dmtn_unpack_complete(c, r);
	r->moved = true;
	if (r->fence_dev < 0)
		return NCCL_OK;
	/* gathers queued: done once the last of them ran */
	r->wait = true;
	return dmtn_devmem_fence(r) ? comm_fail(c, NCCL_ERR_CUDA, "recording the completion of a gather failed (see above)")
				    : NCCL_OK;
}

static nccl_result_t recv_progress(struct dmtn_comm *c)
{
	unsigned int tail = __atomic_load_n(&c->q_tail, __ATOMIC_ACQUIRE);
	nccl_result_t ret;

	for (;;) {
		struct dmtn_rbuf *b;
		ssize_t n = 0;

		ret = read_headers(c);
		if (ret)
			return ret;
		if (!c->cur_req) {
			if (c->q_sent == tail)
				return NCCL_OK;		/* nothing posted */
			if (c->h_head == c->h_tail)
				break;			/* no message yet */
			ret = match_message(c);
			if (ret)
				return ret;
		}
		b = &c->cur_req->buf[c->cur_buf];
		if (b->done < b->size) {
			n = c->drx ? dmtn_devmem_recv(c, c->cur_req, b)
				   : recv_plain(c, b);
			if (n < 0)
				return n == -EIO ? comm_fail(c, NCCL_ERR_CUDA, "moving received bytes to CUDA memory failed: %s", dmtn_cuda_why())
				       : n == -EPROTO ? comm_fail(c, NCCL_ERR_SYSTEM, "devmem receive failed (see above)")
						      : sock_error(c, n == -ECONNRESET ? 0 : (int)-n, "receiving");
			b->done += (size_t)n;
			c->moves += n > 0;
		}
		if (b->done == b->size) {
			ret = recv_complete(c, c->cur_req, b);
			if (ret)
				return ret;
		} else if (!n)
			return NCCL_OK;			/* would block */
	}
	if (c->eof)
		return comm_fail(c, NCCL_ERR_REMOTE,
				 "the connection was closed by the peer with a receive posted and no message to fill it");
	return NCCL_OK;
}

/* ---- moving ------------------------------------------------------------- */

/* Requests are done in posting order: mark those whose bytes moved and
 * whose completion came (devmem TX, a gather) DONE, oldest first; q_done
 * passes each before it becomes DONE, since NCCL's thread may free it at
 * once. */
static nccl_result_t complete(struct dmtn_comm *c)
{
	while (c->q_done != c->q_sent) {
		struct dmtn_req *r = c->q[c->q_done % DMTN_NREQS];

		if (!r->moved)
			break;
		if (r->wait) {
			int d = dmtn_devmem_req_done(r);

			if (d < 0)
				return comm_fail(c, NCCL_ERR_CUDA,
						 "a gather into CUDA memory failed (see above)");
			if (!d)
				break;
		}
		__atomic_store_n(&c->q_done, c->q_done + 1, __ATOMIC_RELEASE);
		c->moves++;
		req_state_set(r, DMTN_REQ_DONE);
	}
	return NCCL_OK;
}

/* Move what the sockets take now, and complete what is done. */
static nccl_result_t move(struct dmtn_comm *c)
{
	nccl_result_t ret;

	if (comm_error(c))
		return comm_error(c);
	ret = c->kind == DMTN_COMM_SEND ? send_progress(c) : recv_progress(c);
	return ret ? ret : complete(c);
}

/* What the helper waits for when nothing moved: the sockets it can move
 * on, a post (wake_fd), and a timeout (ms) while completions are pending
 * (0: spin, for GPU fences). */
static int wait_for(struct dmtn_comm *c, struct pollfd *p)
{
	bool pending = c->q_done != c->q_sent;
	int timeout = -1;

	p[0] = (struct pollfd){ .fd = c->wake_fd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = -1 };
	p[2] = (struct pollfd){ .fd = -1 };
	if (comm_error(c))
		return -1;
	if (c->kind == DMTN_COMM_SEND) {
		if (c->ctrl_out_off < c->ctrl_out_len)
			p[1] = (struct pollfd){ .fd = c->ctrl_fd, .events = POLLOUT };
		if (c->q_sent != c->q_hdr) {
			const struct dmtn_rbuf *b = &c->q[c->q_sent % DMTN_NREQS]->buf[0];

			if (b->done < b->size)
				p[2] = (struct pollfd){ .fd = c->data_fd, .events = POLLOUT };
		}
		/* devmem TX completions come on the error queue (POLLERR) */
		if (pending)
			timeout = 10;
	} else {
		if (!c->eof && c->h_tail - c->h_head < DMTN_NREQS)
			p[1] = (struct pollfd){ .fd = c->ctrl_fd, .events = POLLIN };
		if (c->cur_req)
			p[2] = (struct pollfd){ .fd = c->data_fd, .events = POLLIN };
		if (pending)
			timeout = 0;
	}
	return timeout;
}

static void *helper_main(void *arg)
{
	struct dmtn_comm *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p[3];
		unsigned int tail;
		uint64_t before;
		int timeout;

		/* the posts this pass sees */
		tail = __atomic_load_n(&c->q_tail, __ATOMIC_SEQ_CST);
		pthread_mutex_lock(&c->mu);
		before = c->moves;
		move(c);
		timeout = c->moves != before ? -2 : wait_for(c, p);
		pthread_mutex_unlock(&c->mu);
		if (timeout == -2)
			continue;
		if (!timeout) {
			sched_yield();
			continue;
		}
		/* Dekker with the poster: it publishes, then looks whether we
		 * sleep; we say we sleep, then look for what it published */
		__atomic_store_n(&c->sleeping, true, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&c->q_tail, __ATOMIC_SEQ_CST) != tail ||
		    __atomic_load_n(&c->stop, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&c->sleeping, false, __ATOMIC_SEQ_CST);
			continue;
		}
		if (poll(p, 3, timeout) > 0 && (p[0].revents & POLLIN)) {
			uint64_t v;

			(void)!read(c->wake_fd, &v, sizeof(v));
		}
		__atomic_store_n(&c->sleeping, false, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* The comm's helper thread, started on its first post; without one (off,
 * or it could not be made) NCCL's proxy thread moves the bytes. */
static void helper_start(struct dmtn_comm *c)
{
	static bool said;
	int ret;

	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		ret = errno;
		goto err;
	}
	ret = pthread_create(&c->helper, NULL, helper_main, c);
	if (ret) {
		close(c->wake_fd);
		c->wake_fd = -1;
		goto err;
	}
	c->helper_on = true;
	return;
err:
	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		DMTN_WARN("no helper thread for %s comm %p (%s): NCCL's proxy thread moves its bytes",
			  c->kind == DMTN_COMM_SEND ? "send" : "recv", (void *)c,
			  strerror(ret));
}

void dmtn_helper_stop(struct dmtn_comm *c)
{
	uint64_t one = 1;

	if (!c->helper_on)
		return;
	__atomic_store_n(&c->stop, true, __ATOMIC_SEQ_CST);
	(void)!write(c->wake_fd, &one, sizeof(one));
	pthread_join(c->helper, NULL);
	close(c->wake_fd);
	c->wake_fd = -1;
	c->helper_on = false;
}

/* The common end of isend and irecv: r goes to the end of the queue and to
 * NCCL; the bytes move now (without a helper), or the helper is told. */
static nccl_result_t post(struct dmtn_comm *c, struct dmtn_req *r,
			  void **request)
{
	nccl_result_t ret = NCCL_OK;

	if (dmtn.cfg.threads && !c->helper_on)
		helper_start(c);
	c->q[c->q_tail % DMTN_NREQS] = r;
	__atomic_store_n(&c->q_tail, c->q_tail + 1, __ATOMIC_SEQ_CST);
	if (!c->helper_on) {
		ret = move(c);
	} else if (__atomic_load_n(&c->sleeping, __ATOMIC_SEQ_CST)) {
		uint64_t one = 1;

		(void)!write(c->wake_fd, &one, sizeof(one));
	}
	if (ret)
		return ret;
	*request = r;
	return NCCL_OK;
}

nccl_result_t dmtn_isend(void *send_comm, void *data, size_t size, int tag,
			 void *mhandle, void **request)
{
	struct dmtn_comm *c;
	struct dmtn_mr *mr;
	struct dmtn_req *r;
	nccl_result_t ret;

	ret = post_start(send_comm, DMTN_COMM_SEND, request, __func__, &c);
	if (ret)
		return ret;
	mr = mr_get(c, mhandle, __func__);
	ret = buf_check(c, mr, data, size, __func__);
	if (ret)
		return ret;
	r = req_new(c, DMTN_REQ_SEND);
	if (!r)
		return NCCL_OK;
	r->n = 1;
	r->buf[0] = (struct dmtn_rbuf){ .data = data, .cap = size,
					.size = size, .tag = tag, .mr = mr };
	return post(c, r, request);
}

nccl_result_t dmtn_irecv(void *recv_comm, int n, void **data,
			 const size_t *sizes, const int *tags, void **mhandles,
			 void **request)
{
	struct dmtn_comm *c;
	struct dmtn_req *r;
	nccl_result_t ret;
	int max;

	ret = post_start(recv_comm, DMTN_COMM_RECV, request, __func__, &c);
	if (ret)
		return ret;
	max = c->unpack ? 1 : dmtn.cfg.max_recvs;
	if (n < 1 || n > max || !data || !sizes) {
		DMTN_WARN("irecv: %d buffers: between 1 and maxRecvs (%d) with data and sizes",
			  n, max);
		return NCCL_ERR_INTERNAL;
	}
	for (int i = 0; i < n; i++) {
		struct dmtn_mr *mr = mr_get(c, mhandles ? mhandles[i] : NULL,
					    __func__);

		ret = buf_check(c, mr, data[i], sizes[i], __func__);
		if (ret)
			return ret;
	}
	/* a receive per slot of the unpack queue until NCCL consumed it */
	if (c->unpack && dmtn_unpack_full(c))
		return NCCL_OK;
	r = req_new(c, DMTN_REQ_RECV);
	if (!r)
		return NCCL_OK;
	c->recv_started = true;
	if (c->unpack)
		dmtn_unpack_post(c, r);
	r->n = n;
	for (int i = 0; i < n; i++)
		r->buf[i] = (struct dmtn_rbuf){
			.data = data[i], .cap = sizes[i],
			.tag = tags ? tags[i] : 0,
			.mr = mhandles ? mhandles[i] : NULL,
		};
	return post(c, r, request);
}

nccl_result_t dmtn_iflush(void *recv_comm, int n, void **data, int *sizes,
			  void **mhandles, void **request)
{
	struct dmtn_comm *c;
	struct dmtn_req *r;
	nccl_result_t ret;

	ret = post_start(recv_comm, DMTN_COMM_RECV, request, __func__, &c);
	if (ret)
		return ret;
	/* A receive is reported done only once its bytes are in the
	 * destination (gathers included): nothing is left to flush. */
	r = req_get(c, DMTN_REQ_FLUSH);
	if (!r)
		return NCCL_OK;
	r->state = DMTN_REQ_DONE;
	*request = r;
	return NCCL_OK;
}

/* ---- test and close ----------------------------------------------------- */

nccl_result_t dmtn_test(void *request, int *done, int *sizes)
{
	struct dmtn_req *r = request;
	enum dmtn_req_state st;
	struct dmtn_comm *c;
	nccl_result_t ret;

	st = r && r->magic == DMTN_REQ_MAGIC ? req_state(r) : DMTN_REQ_FREE;
	if (st == DMTN_REQ_FREE || st == DMTN_REQ_CONSUME || !done) {
		DMTN_WARN("test: %p is not a pending request of this plugin",
			  request);
		return NCCL_ERR_INTERNAL;
	}
	c = r->comm;
	*done = 0;
	ret = comm_error(c);
	if (!ret && st != DMTN_REQ_DONE && !c->helper_on && r->kind != DMTN_REQ_FLUSH) {
		ret = move(c);
		st = req_state(r);
	}
	if (ret)
		return ret;
	if (st != DMTN_REQ_DONE)
		return NCCL_OK;
	*done = 1;
	for (int i = 0; sizes && r->kind != DMTN_REQ_FLUSH && i < r->n; i++)
		sizes[i] = r->buf[i].size > INT_MAX ? INT_MAX : (int)r->buf[i].size;
	/* NCCL hands a receive with unpack entries back with irecvConsumed
	 * once its kernel has read them */
	if (r->kind == DMTN_REQ_RECV && r->unpack)
		req_state_set(r, DMTN_REQ_CONSUME);
	else
		req_put(r);
	return NCCL_OK;
}

nccl_result_t dmtn_irecv_consumed(void *recv_comm, int n, void *request)
{
	struct dmtn_comm *c = dmtn_comm_get(recv_comm, DMTN_COMM_RECV, __func__);
	uintptr_t off = (uintptr_t)request - (uintptr_t)(c ? c->reqs : NULL);
	struct dmtn_req *r = request;

	if (!c)
		return NCCL_ERR_INTERNAL;
	/* without a queue a receive is freed when test() reports it: the
	 * request NCCL passes may be another one by now */
	if (!c->unpack)
		return NCCL_OK;
	/* one of this comm's requests, in the state test() left it */
	if (off >= sizeof(c->reqs) || off % sizeof(c->reqs[0]) ||
	    r->magic != DMTN_REQ_MAGIC || r->state != DMTN_REQ_CONSUME ||
	    r->kind != DMTN_REQ_RECV) {
		DMTN_WARN("irecvConsumed: %p is not a receive of recv comm %p that test() reported done",
			  request, (void *)c);
		return NCCL_ERR_INTERNAL;
	}
	if (dmtn_unpack_consumed(c, r))
		return NCCL_ERR_INTERNAL;
	req_put(r);
	/* its fragments' tokens go back now (the helper thread, moving, uses
	 * the same receive handle) */
	pthread_mutex_lock(&c->mu);
	dmtn_devmem_rx_flush(c);
	pthread_mutex_unlock(&c->mu);
	return NCCL_OK;
}

/* Log what the comm carried, and free it. */
static nccl_result_t close_comm(void *p, enum dmtn_comm_kind kind,
				const char *fn)
{
	struct dmtn_comm *c = dmtn_comm_get(p, kind, fn);
	const struct dmtn_stats *s;
	bool send = kind == DMTN_COMM_SEND;

	if (!c)
		return NCCL_ERR_INTERNAL;
	dmtn_helper_stop(c);
	s = &c->st;
	DMTN_INFO(NCCL_SUBSYS_NET,
		  "%s comm %p (%s, peer %s): %llu messages, %llu bytes, %llu through devmem %s, %llu arrived as plain data, %llu copied through host memory, %llu unpacked by NCCL's kernel, %llu gathered by the plugin, %llu bytes at most per devmem receive call",
		  send ? "send" : "recv", (const void *)c, dmtn.dev[c->dev].name,
		  c->peer, (unsigned long long)s->msgs,
		  (unsigned long long)s->bytes,
		  (unsigned long long)s->devmem_bytes, send ? "TX" : "RX",
		  (unsigned long long)s->linear_bytes,
		  (unsigned long long)s->bounce_bytes,
		  (unsigned long long)s->unpack_bytes,
		  (unsigned long long)s->gather_bytes,
		  (unsigned long long)s->max_call);
	dmtn_comm_free(c);
	return NCCL_OK;
}

nccl_result_t dmtn_close_send(void *send_comm)
{
	return close_comm(send_comm, DMTN_COMM_SEND, __func__);
}

nccl_result_t dmtn_close_recv(void *recv_comm)
{
	return close_comm(recv_comm, DMTN_COMM_RECV, __func__);
}
