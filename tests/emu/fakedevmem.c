// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A fake devmem kernel for the Python tests and the benchmark: preloaded
 * (LD_PRELOAD), it answers recvmsg(MSG_SOCK_DEVMEM) and
 * setsockopt(SO_DEVMEM_DONTNEED) (and poll() for readiness) on the
 * sockets attached to it with
 * synthetic fragments laid out exactly as the kernel lays them out, and
 * keeps the kernel's side of the token books: which tokens are out, and
 * whether any came back twice or unknown.  Everything else goes to libc.
 * Test builds only; never installed.
 *
 * Per socket, a queue of "receives" (lists of fragments: dma-buf offset
 * and length, or linear bytes) is served in order, cut where the caller's
 * byte count or control buffer ends (the rest comes next time with a new
 * token, as the kernel does); with a cycle, one list repeats forever once
 * the queue is empty; otherwise the real socket answers (its data, or the
 * end of the stream).  Linear bytes are the pattern "stream byte i is
 * i % 251".
 *
 * The same library is the emulated devmem NIC (emu.h, tests/emu/README.md)
 * when $DEVMEMTCP_EMU names its state: sockets not attached here go to it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <devmemtcp.h>

#include "emu.h"
#include "pattern.h"
#include "uapi.h"

#define FAKE_LINEAR 1u
#define MAX_FD 4096
#define MAX_TOKENS (1u << 20)
#define KERNEL_MAX_FRAGS 1024

struct fake_frag {
	uint64_t offset;
	uint32_t len;
	uint32_t flags;
};

struct fakedev_stats {
	uint64_t recvs;
	uint64_t frags;
	uint64_t bytes;
	uint64_t dontneed_calls;
	uint64_t freed;
	uint64_t bad;		/* tokens returned that were not out */
	uint64_t outstanding;
	uint64_t outstanding_max;
};

struct batch {
	struct fake_frag *f;
	size_t n;
	struct batch *next;
};

struct fake_sock {
	uint32_t binding;
	struct batch *head, *tail;
	struct fake_frag *cycle;
	size_t ncycle;
	size_t pos;		/* fragment of the batch being served */
	uint32_t done;		/* bytes of it already delivered */
	uint64_t stream;	/* bytes delivered */
	uint64_t bits[MAX_TOKENS / 64];
	struct fakedev_stats st;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_sock *socks[MAX_FD];
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static int (*real_setsockopt)(int, int, int, const void *, socklen_t);
static int (*real_poll)(struct pollfd *, nfds_t, int);

/* The libc functions, as the emulator resolved them (a dlsym(RTLD_NEXT)
 * here as the function's last call may become a tail call, and then asks
 * for the symbol after the dynamic loader's instead of after ours). */
__attribute__((constructor)) static void fake_init(void)
{
	emu_real_init();
	real_recvmsg = emu_real.recvmsg;
	real_setsockopt = emu_real.setsockopt;
	*(void **)&real_poll = *(void **)&emu_real.poll;
}

/* ---- control (ctypes) ----------------------------------------------------- */

int fakedev_attach(int fd, uint32_t binding);
int fakedev_detach(int fd);
int fakedev_push(int fd, const struct fake_frag *f, size_t n);
int fakedev_cycle(int fd, const struct fake_frag *f, size_t n);
int fakedev_stats(int fd, struct fakedev_stats *st);
int fakedev_active(void);
double fakedev_bench_c(int fd, int buf_fd, uint64_t iters, uint32_t max_frags,
		       uint32_t max_bytes, uint32_t binding, uint64_t size);

int fakedev_active(void)
{
	return real_recvmsg != NULL;
}

int fakedev_attach(int fd, uint32_t binding)
{
	struct fake_sock *s;

	if (fd < 0 || fd >= MAX_FD)
		return -EBADF;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->binding = binding;
	pthread_mutex_lock(&lock);
	free(socks[fd]);
	socks[fd] = s;
	pthread_mutex_unlock(&lock);
	return 0;
}

static void free_sock(struct fake_sock *s)
{
	struct batch *b, *next;

	if (!s)
		return;
	for (b = s->head; b; b = next) {
		next = b->next;
		free(b->f);
		free(b);
	}
	free(s->cycle);
	free(s);
}

int fakedev_detach(int fd)
{
	if (fd < 0 || fd >= MAX_FD)
		return -EBADF;
	pthread_mutex_lock(&lock);
	free_sock(socks[fd]);
	socks[fd] = NULL;
	pthread_mutex_unlock(&lock);
	return 0;
}

static struct fake_frag *copy_frags(const struct fake_frag *f, size_t n)
{
	struct fake_frag *c = malloc((n ? n : 1) * sizeof(*c));

	if (c)
		memcpy(c, f, n * sizeof(*c));
	return c;
}

int fakedev_push(int fd, const struct fake_frag *f, size_t n)
{
	struct batch *b = calloc(1, sizeof(*b));
	int ret = -EBADF;

	if (!b || !(b->f = copy_frags(f, n))) {
		free(b);
		return -ENOMEM;
	}
	b->n = n;
	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < MAX_FD && socks[fd]) {
		struct fake_sock *s = socks[fd];

		if (s->tail)
			s->tail->next = b;
		else
			s->head = b;
		s->tail = b;
		ret = 0;
	}
	pthread_mutex_unlock(&lock);
	if (ret) {
		free(b->f);
		free(b);
	}
	return ret;
}

int fakedev_cycle(int fd, const struct fake_frag *f, size_t n)
{
	struct fake_frag *c = copy_frags(f, n);
	int ret = -EBADF;

	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < MAX_FD && socks[fd]) {
		free(socks[fd]->cycle);
		socks[fd]->cycle = c;
		socks[fd]->ncycle = n;
		c = NULL;
		ret = 0;
	}
	pthread_mutex_unlock(&lock);
	free(c);
	return ret;
}

int fakedev_stats(int fd, struct fakedev_stats *st)
{
	int ret = -EBADF;

	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < MAX_FD && socks[fd]) {
		*st = socks[fd]->st;
		ret = 0;
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

/* ---- the fake kernel ------------------------------------------------------ */

static int token_alloc(struct fake_sock *s, uint32_t *tok)
{
	for (uint32_t w = 0; w < MAX_TOKENS / 64; w++) {
		if (s->bits[w] == ~0ull)
			continue;
		*tok = w * 64 + (uint32_t)__builtin_ctzll(~s->bits[w]);
		s->bits[w] |= 1ull << (*tok % 64);
		if (++s->st.outstanding > s->st.outstanding_max)
			s->st.outstanding_max = s->st.outstanding;
		return 0;
	}
	return -ENOSPC;
}

/* The fragments of the current receive: the queue's head, else the cycle. */
static const struct fake_frag *current(struct fake_sock *s, size_t *n)
{
	if (s->head) {
		*n = s->head->n;
		return s->head->f;
	}
	*n = s->ncycle;
	return s->cycle;
}

static void advance(struct fake_sock *s, size_t n)
{
	s->done = 0;
	if (++s->pos < n)
		return;
	s->pos = 0;
	if (s->head) {
		struct batch *b = s->head;

		s->head = b->next;
		if (!s->head)
			s->tail = NULL;
		free(b->f);
		free(b);
	}
}

static void pattern(uint8_t *dst, size_t len, uint64_t pos)
{
	pattern_fill(dst, len, pos, PATTERN_PERIOD_DEFAULT);
}

static ssize_t fake_recv(struct fake_sock *s, struct msghdr *msg)
{
	const size_t space = CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg));
	size_t room = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0;
	size_t ctl = msg->msg_controllen, used = 0, got = 0, n;
	const struct fake_frag *f = current(s, &n);
	uint8_t *lin = msg->msg_iovlen ? msg->msg_iov[0].iov_base : NULL;
	char *cbuf = msg->msg_control;
	size_t lin_off = 0;

	if (ctl < space)
		return -ETOOSMALL;
	/* one receive: this batch only (a cycle is one batch too) */
	while (got < room && used + space <= ctl) {
		const struct fake_frag *fr = &f[s->pos];
		uint32_t take = fr->len - s->done;
		struct cmsghdr *cm = (struct cmsghdr *)(cbuf + used);
		struct dmt_dmabuf_cmsg d = { 0 };
		size_t before = s->pos;

		if (take > room - got)
			take = (uint32_t)(room - got);
		if (fr->flags & FAKE_LINEAR) {
			pattern(lin + lin_off, take, s->stream);
			lin_off += take;
			d.frag_size = take;
			cm->cmsg_type = SCM_DEVMEM_LINEAR;
		} else {
			if (token_alloc(s, &d.frag_token))
				break;
			d.frag_offset = fr->offset + s->done;
			d.frag_size = take;
			d.dmabuf_id = s->binding;
			cm->cmsg_type = SCM_DEVMEM_DMABUF;
			s->st.frags++;
		}
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_len = CMSG_LEN(sizeof(d));
		memcpy(CMSG_DATA(cm), &d, sizeof(d));
		used += space;
		got += take;
		s->stream += take;
		s->done += take;
		if (s->done == fr->len)
			advance(s, n);
		if (before == n - 1 && s->pos == 0 && !s->done)
			break;	/* the receive ends with its batch */
	}
	msg->msg_controllen = used;
	msg->msg_flags = 0;
	s->st.recvs++;
	s->st.bytes += got;
	return (ssize_t)got;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct fake_sock *s;
	ssize_t ret;
	size_t n;

	if ((flags & MSG_SOCK_DEVMEM) && fd >= 0 && fd < MAX_FD) {
		pthread_mutex_lock(&lock);
		s = socks[fd];
		if (s && current(s, &n) && n) {
			ret = fake_recv(s, msg);
			pthread_mutex_unlock(&lock);
			if (ret < 0) {
				errno = (int)-ret;
				return -1;
			}
			return ret;
		}
		pthread_mutex_unlock(&lock);
	}
	if (emu_on()) {
		if (emu_nl_recv(fd, msg, flags, &ret))
			return ret;
		if ((flags & MSG_ERRQUEUE) && emu_tx_errqueue(fd, msg, flags, &ret))
			return ret;
		if ((flags & MSG_SOCK_DEVMEM) && emu_rx_recvmsg(fd, msg, flags, &ret))
			return ret;
	}
	return real_recvmsg(fd, msg, flags);
}

/* A receive that waits with poll() first sees the fake data as readable. */
int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	int ready = 0;
	size_t cnt;

	pthread_mutex_lock(&lock);
	for (nfds_t i = 0; i < n; i++) {
		int fd = fds[i].fd;

		fds[i].revents = 0;
		if ((fds[i].events & POLLIN) && fd >= 0 && fd < MAX_FD &&
		    socks[fd] && current(socks[fd], &cnt) && cnt) {
			fds[i].revents = POLLIN;
			ready++;
		}
	}
	pthread_mutex_unlock(&lock);
	ready += emu_poll_ready(fds, n);
	return ready ? ready : emu_poll_wait(fds, n, timeout);
}

static int dontneed(struct fake_sock *s, const struct dmt_dmabuf_token *t,
		    size_t n)
{
	uint32_t seen = 0;
	int freed = 0;

	s->st.dontneed_calls++;
	for (size_t i = 0; i < n; i++) {
		for (uint32_t k = 0; k < t[i].token_count; k++) {
			uint32_t tok = t[i].token_start + k;

			if (seen++ == KERNEL_MAX_FRAGS)
				return freed;
			if (tok >= MAX_TOKENS || !(s->bits[tok / 64] & (1ull << (tok % 64)))) {
				s->st.bad++;
				continue;
			}
			s->bits[tok / 64] &= ~(1ull << (tok % 64));
			s->st.outstanding--;
			s->st.freed++;
			freed++;
		}
	}
	return freed;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct fake_sock *s;
	int ret;

	if (level == SOL_SOCKET && name == SO_DEVMEM_DONTNEED && fd >= 0 &&
	    fd < MAX_FD) {
		pthread_mutex_lock(&lock);
		s = socks[fd];
		if (s) {
			if (len % sizeof(struct dmt_dmabuf_token) ||
			    len / sizeof(struct dmt_dmabuf_token) > DMT_MAX_DONTNEED_TOKENS)
				ret = -EINVAL;
			else
				ret = dontneed(s, val, len / sizeof(struct dmt_dmabuf_token));
			pthread_mutex_unlock(&lock);
			if (ret < 0) {
				errno = -ret;
				return -1;
			}
			return ret;
		}
		pthread_mutex_unlock(&lock);
		if (emu_rx_dontneed(fd, val, len, &ret))
			return ret;
	}
	return real_setsockopt(fd, level, name, val, len);
}

/* ---- the C side of the benchmark ------------------------------------------ */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*
 * iters receive + release calls through the public C API on fd (attached
 * with a cycle by the caller), the same work Rx.recv() + release() does,
 * with buf_fd (a dma-buf, or what the test build takes as one) imported as
 * the binding's buffer; returns nanoseconds per call, or a negative errno.
 */
double fakedev_bench_c(int fd, int buf_fd, uint64_t iters, uint32_t max_frags,
		       uint32_t max_bytes, uint32_t binding, uint64_t size)
{
	struct devmemtcp_segment seg = { 0, size, 0x7f0000000000ull };
	struct devmemtcp_frag *f = calloc(max_frags, sizeof(*f));
	void *linear = malloc(max_bytes);
	struct devmemtcp_ctx *ctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_rx *rx = NULL;
	double t0, t1, ret = -ENOMEM;
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = size, .fd = buf_fd, .segments = &seg, .nsegments = 1,
		       .flags = DEVMEMTCP_BUF_KEEP_FD);

	if (!f || !linear)
		goto out;
	ret = -EINVAL;
	if (devmemtcp_ctx_new(NULL, &ctx) || devmemtcp_buf_new(ctx, &bo, &buf) ||
	    devmemtcp_rx_new(ctx, fd, NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, binding, buf))
		goto out;
	t0 = now_ns();
	for (uint64_t i = 0; i < iters; i++) {
		int n = devmemtcp_rx_recv(rx, f, max_frags, linear, max_bytes);

		if (n <= 0 || devmemtcp_rx_release(rx, f, (size_t)n)) {
			ret = n < 0 ? n : -EIO;
			goto out;
		}
	}
	t1 = now_ns();
	ret = (t1 - t0) / (double)iters;
out:
	devmemtcp_rx_free(rx);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	free(f);
	free(linear);
	return ret;
}
