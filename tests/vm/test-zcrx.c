// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm suite: io_uring zero-copy receive (zcrx) through the real kernel and
 * the simulated NIC.  Run as root in the guest:
 *
 *   test-zcrx [support|transfer|transfer-dmabuf|multi|overflow|miss|errors|all]
 *
 * Every payload byte is checked against the pattern "byte i is i % 251"
 * by reading the udmabuf the NIC (or the kernel's copy fallback) wrote.
 * On kernels before 6.15 "all" runs support only: the clear EOPNOTSUPP.
 * "all" compares the NIC's ethtool state before and after.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <net/if.h>

#include "devmemtcp.h"
#include "harness-nic.h"
#include "harness.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define BUF_SIZE (32u << 20)
#define MAX_FRAGS 256
#define LINEAR 4096
#define QUEUE 3

static struct devmemtcp_ctx *ctx;
static int ifindex;

/* ---- one receiving socket -------------------------------------------------- */

struct zsock {
	int lfd, fd, port;
	struct devmemtcp_rx *rx;
	struct vm_sender *snd;
	uint64_t want;		/* bytes the sender sends */
	uint64_t bytes;		/* validated so far */
	int64_t bad_at;
	bool eof;
	/* held fragments (random release order) */
	struct devmemtcp_frag held[4096];
	size_t nheld;
};

static uint64_t rnd_state = 0x5eed2cc0ffee1234ull;

/* Check the fragments' bytes against the stream pattern. */
static int validate(struct zsock *z, struct devmemtcp_buf *buf,
		    const struct devmemtcp_frag *f, int n)
{
	static uint8_t tmp[65536];

	for (int i = 0; i < n; i++) {
		long at;

		T_CHECK(!(f[i].flags & (DEVMEMTCP_FRAG_LINEAR | DEVMEMTCP_FRAG_FOREIGN)),
			"zcrx fragment with flags %#x", f[i].flags);
		uint64_t addr = 0;

		T_CHECK(f[i].len && f[i].len <= sizeof(tmp), "fragment of %u bytes", f[i].len);
		T_CHECK(f[i].offset + f[i].len <= devmemtcp_buf_size(buf),
			"fragment [%llu, +%u) outside the buffer",
			(unsigned long long)f[i].offset, f[i].len);
		T_CHECK(devmemtcp_buf_addr(buf, f[i].offset, &addr) == 0 && addr == f[i].addr,
			"fragment address %#llx, buffer says %#llx",
			(unsigned long long)f[i].addr, (unsigned long long)addr);
		T_CHECK(devmemtcp_buf_read(buf, f[i].offset, tmp, f[i].len) == 0, "%s",
			devmemtcp_buf_errmsg(buf));
		at = pattern_check(tmp, f[i].len, z->bytes, PERIOD);
		if (at >= 0 && z->bad_at < 0)
			z->bad_at = (int64_t)(z->bytes + (uint64_t)at);
		z->bytes += f[i].len;
	}
	return 0;
}

/* Listen on port, start the sender, accept, and make the receive handle
 * on z (nonblock: the socket is non-blocking). */
static int zsock_open(struct zsock *s, int port, uint64_t bytes,
		      struct devmemtcp_zcrx *z, bool nonblock)
{
	DEVMEMTCP_OPTS(rx_opts, o, .zcrx = z);

	memset(s, 0, sizeof(*s));
	s->bad_at = -1;
	s->port = port;
	s->want = bytes;
	s->lfd = t_listen(VM_RX_ADDR4, port);
	T_CHECK(s->lfd >= 0, "listen %d", port);
	s->snd = vm_send_start(VM_RX_ADDR4, port, bytes, PERIOD);
	T_CHECK(s->snd, "sender");
	s->fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0));
	T_CHECK(s->fd >= 0, "accept");
	T_CHECK(devmemtcp_rx_new(ctx, s->fd, &o, &s->rx) == 0, "rx_new: %s",
		devmemtcp_ctx_errmsg(ctx));
	return 0;
}

static int zsock_close(struct zsock *s)
{
	int snd = vm_send_wait(s->snd);

	devmemtcp_rx_free(s->rx);
	close(s->fd);
	close(s->lfd);
	T_CHECK(snd == 0, "sender to port %d failed", s->port);
	return 0;
}

/* ---- setup ----------------------------------------------------------------- */

struct setup {
	struct devmemtcp_nic *nic;
	struct devmemtcp_buf *buf;
	struct devmemtcp_zcrx *z;
};

/* The NIC with QUEUE kept for zcrx and ports[] steered there, a udmabuf
 * and a zcrx handle on QUEUE. */
static int setup_open(struct setup *s, const int *ports, size_t nports,
		      const struct devmemtcp_zcrx_opts *zo)
{
	struct devmemtcp_flow flows[8];
	uint32_t q = QUEUE;
	char text[96];

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < nports; i++) {
		snprintf(text, sizeof(text), "tcp4 dst-ip %s dst-port %d", VM_RX_ADDR4,
			 ports[i]);
		T_CHECK(devmemtcp_flow_parse(text, &flows[i]) == 0, "flow %s", text);
	}
	DEVMEMTCP_OPTS(nic_opts, no, .queues = &q, .nqueues = 1, .flows = flows,
		       .nflows = nports);
	T_CHECK(devmemtcp_nic_open(ctx, VM_RX_IF, &no, &s->nic) == 0, "nic_open: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(t_udmabuf(ctx, BUF_SIZE, &s->buf) == 0, "udmabuf");
	T_CHECK(devmemtcp_zcrx_new(ctx, ifindex, QUEUE, s->buf, zo, &s->z) == 0,
		"zcrx_new: %s", devmemtcp_ctx_errmsg(ctx));
	return 0;
}

/* Queues of the interface with an io_uring provider, or a negative errno. */
static int io_uring_queues(void)
{
	struct devmemtcp_queue q[64];
	int n = devmemtcp_queue_list(ctx, ifindex, q, 64), used = 0;

	for (int i = 0; i < n && i < 64; i++)
		used += q[i].io_uring;
	return n < 0 ? n : used;
}

static int setup_close(struct setup *s)
{
	devmemtcp_zcrx_free(s->z);
	/* the provider is gone when free returns: the NIC restore works */
	T_CHECK(io_uring_queues() == 0, "io_uring provider left on a queue");
	T_CHECK(devmemtcp_nic_close(s->nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(s->buf);
	return 0;
}

static struct devmemtcp_zcrx_stats zstats(struct devmemtcp_zcrx *z)
{
	struct devmemtcp_zcrx_stats st = { .sz = sizeof(st) };

	devmemtcp_zcrx_stats(z, &st);
	return st;
}

static void print_zstats(const char *name, const struct devmemtcp_zcrx_stats *st, double secs)
{
	printf("%s: %llu frags, %llu bytes, %llu completions, %llu io_uring_enter (%.4f per frag), %llu system calls, %llu refills (%llu queued, %llu waiting, queue max %llu, ring of %u, ring max %llu), held max %llu, %llu rearms, copy fallbacks %lld (%lld bytes), area %u x %u B (%s), %.1f s\n",
	       name, (unsigned long long)st->frags, (unsigned long long)st->bytes,
	       (unsigned long long)st->completions, (unsigned long long)st->enter_calls,
	       st->frags ? (double)st->enter_calls / (double)st->frags : 0.0,
	       (unsigned long long)st->syscalls, (unsigned long long)st->refills,
	       (unsigned long long)st->refill_queued, (unsigned long long)st->refill_waiting,
	       (unsigned long long)st->refill_queue_max, st->rq_entries,
	       (unsigned long long)st->refill_ring_max, (unsigned long long)st->held_max,
	       (unsigned long long)st->rearms, (long long)st->copy_count,
	       (long long)st->copy_bytes, st->area_buffers, st->buffer_size,
	       st->dmabuf_area ? "dma-buf area" : "user-memory area", secs);
}

/* ---- tests ----------------------------------------------------------------- */

/* What probe reports; before 6.15 the clear EOPNOTSUPP of zcrx_new. */
static int test_support(void)
{
	struct devmemtcp_buf *buf;
	struct devmemtcp_zcrx *z = NULL;
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	char want[256];
	int ret;

	if (t_kernel_version() >= 615) {
		T_CHECK(devmemtcp_nic_probe(ctx, VM_RX_IF, NULL, &p) >= 0, "probe");
		printf("support: probe on %s: zcrx %d, dma-buf areas %d\n",
		       t_kernel_release(), p.zcrx, p.zcrx_dmabuf);
		T_CHECK(p.zcrx == 1 && p.zcrx_dmabuf == (t_kernel_version() >= 616) &&
			!p.zcrx_msg[0], "probe: zcrx %d dmabuf %d: %s", p.zcrx,
			p.zcrx_dmabuf, p.zcrx_msg);
		return 0;
	}
	T_CHECK(t_udmabuf(ctx, 1 << 20, &buf) == 0, "udmabuf");
	ret = devmemtcp_zcrx_new(ctx, ifindex, QUEUE, buf, NULL, &z);
	snprintf(want, sizeof(want),
		 "io_uring zero-copy receive needs Linux 6.15 (6.16 for dma-buf areas): this kernel is %s",
		 t_kernel_release());
	printf("support: zcrx_new returned %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	T_CHECK(ret == -EOPNOTSUPP && !z, "expected -EOPNOTSUPP, got %d", ret);
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "message: %s", devmemtcp_ctx_errmsg(ctx));
	/* probe says the same */
	T_CHECK(devmemtcp_nic_probe(ctx, VM_RX_IF, NULL, &p) >= 0, "probe");
	T_CHECK(p.zcrx == 0 && p.zcrx_dmabuf == 0 && !strcmp(p.zcrx_msg, want),
		"probe: zcrx %d dmabuf %d: %s", p.zcrx, p.zcrx_dmabuf, p.zcrx_msg);
	devmemtcp_buf_free(buf);
	return 0;
}

/* bytes through one socket into an area of the udmabuf, every byte checked,
 * every fragment released after it was checked. */
static int transfer(const char *name, int port, uint64_t bytes, uint32_t flags)
{
	DEVMEMTCP_OPTS(zcrx_opts, zo, .flags = flags);
	struct devmemtcp_frag frags[MAX_FRAGS];
	struct devmemtcp_rx_stats rs = { .sz = sizeof(rs) };
	struct devmemtcp_zcrx_stats st;
	static uint8_t linear[LINEAR];
	struct setup s;
	struct zsock z;
	double t0 = t_now();
	int n;

	T_TRY(setup_open(&s, &port, 1, &zo));
	T_TRY(zsock_open(&z, port, bytes, s.z, false));
	while ((n = devmemtcp_rx_recv(z.rx, frags, MAX_FRAGS, linear, sizeof(linear))) > 0) {
		T_TRY(validate(&z, s.buf, frags, n));
		T_CHECK(devmemtcp_rx_release(z.rx, frags, (size_t)n) == 0, "release: %s",
			devmemtcp_rx_errmsg(z.rx));
	}
	T_CHECK(n == 0, "recv: %d: %s", n, devmemtcp_rx_errmsg(z.rx));
	T_CHECK(devmemtcp_rx_flush(z.rx) >= 0, "flush");
	devmemtcp_rx_stats(z.rx, &rs);
	st = zstats(s.z);
	print_zstats(name, &st, t_now() - t0);
	T_CHECK(z.bytes == bytes, "got %llu of %llu bytes", (unsigned long long)z.bytes,
		(unsigned long long)bytes);
	T_CHECK(z.bad_at < 0, "bad byte at stream offset %lld", (long long)z.bad_at);
	T_CHECK(rs.frags == st.frags && rs.dmabuf_bytes == bytes && rs.linear_bytes == 0,
		"rx stats: %llu frags, %llu dmabuf bytes", (unsigned long long)rs.frags,
		(unsigned long long)rs.dmabuf_bytes);
	T_CHECK(rs.tokens_outstanding == 0 && rs.tokens_released == rs.frags,
		"tokens: %llu outstanding, %llu of %llu released",
		(unsigned long long)rs.tokens_outstanding,
		(unsigned long long)rs.tokens_released, (unsigned long long)rs.frags);
	/* more bytes than the area: buffers were recycled through the ring */
	T_CHECK(st.held == 0 && st.refills + st.refill_waiting == st.frags &&
		st.frags >= bytes / 4096,
		"zcrx: held %llu, refills %llu + %llu waiting, frags %llu",
		(unsigned long long)st.held, (unsigned long long)st.refills,
		(unsigned long long)st.refill_waiting, (unsigned long long)st.frags);
	T_CHECK(st.steering_misses == 0 && rs.steering_misses == 0, "steering misses");
	T_CHECK(st.copy_count <= 0, "%lld copy fallbacks on a steered flow",
		(long long)st.copy_count);
	T_CHECK(st.enter_calls < st.frags, "%llu io_uring_enter calls for %llu frags",
		(unsigned long long)st.enter_calls, (unsigned long long)st.frags);
	T_TRY(zsock_close(&z));
	return setup_close(&s);
}

static int test_transfer(void)
{
	return transfer("transfer (user-memory area)", 7001, 64ull << 20, 0);
}

static int test_transfer_dmabuf(void)
{
	return transfer("transfer-dmabuf (the udmabuf as a dma-buf area)", 7002,
			64ull << 20, DEVMEMTCP_ZCRX_DMABUF_AREA);
}

/* Releases from another thread: a batch of fragments and its socket. */
struct release_job {
	pthread_mutex_t lock;	/* the application's lock of the receive handles */
	pthread_cond_t cond;
	struct devmemtcp_rx *rx;
	struct devmemtcp_frag frags[4096];
	size_t n;
	bool stop;
	int failed;
	uint64_t released;
};

static void *releaser_main(void *arg)
{
	struct release_job *j = arg;

	pthread_mutex_lock(&j->lock);
	while (!j->stop || j->n) {
		if (!j->n) {
			pthread_cond_wait(&j->cond, &j->lock);
			continue;
		}
		/* while the ring's thread may wait in io_uring_enter: the
		 * refill ring is written from this thread */
		if (devmemtcp_rx_release(j->rx, j->frags, j->n) ||
		    devmemtcp_rx_flush(j->rx) < 0)
			j->failed++;
		j->released += j->n;
		j->n = 0;
		pthread_cond_broadcast(&j->cond);
	}
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/* Release a random half of s's held fragments in random order: on this
 * thread, or (every other time) handed to the releaser thread. */
static int release_random(struct zsock *s, struct release_job *j, bool other_thread)
{
	size_t k = s->nheld / 2 + 1;
	struct devmemtcp_frag out[4096];

	if (k > s->nheld)
		k = s->nheld;
	for (size_t i = 0; i < k; i++) {
		size_t pick = t_rand(&rnd_state) % s->nheld;

		out[i] = s->held[pick];
		s->held[pick] = s->held[--s->nheld];
	}
	pthread_mutex_lock(&j->lock);
	if (other_thread) {
		/* handed over: released while this thread goes on (and may
		 * wait in the ring) */
		while (j->n)
			pthread_cond_wait(&j->cond, &j->lock);
		memcpy(j->frags, out, k * sizeof(*out));
		j->rx = s->rx;
		j->n = k;
		pthread_cond_broadcast(&j->cond);
	} else {
		T_CHECK(devmemtcp_rx_release(s->rx, out, k) == 0, "release: %s",
			devmemtcp_rx_errmsg(s->rx));
	}
	pthread_mutex_unlock(&j->lock);
	return 0;
}

static int test_multi(void)
{
	enum { SOCKS = 4 };
	const uint64_t per = 8ull << 20;
	int ports[SOCKS] = { 7101, 7102, 7103, 7104 };
	struct release_job job = { .lock = PTHREAD_MUTEX_INITIALIZER,
				   .cond = PTHREAD_COND_INITIALIZER };
	struct devmemtcp_frag frags[MAX_FRAGS];
	static uint8_t linear[LINEAR];
	static struct zsock zs[SOCKS];
	struct devmemtcp_zcrx_stats st;
	unsigned int rounds = 0, open = SOCKS;
	pthread_t releaser;
	struct setup s;
	double t0 = t_now();

	printf("multi: %d sockets on %s queue %d, random release order (seed %#llx)\n",
	       SOCKS, VM_RX_IF, QUEUE, (unsigned long long)rnd_state);
	T_TRY(setup_open(&s, ports, SOCKS, NULL));
	for (int i = 0; i < SOCKS; i++)
		T_TRY(zsock_open(&zs[i], ports[i], per, s.z, true));
	pthread_create(&releaser, NULL, releaser_main, &job);
	while (open) {
		int ready = devmemtcp_zcrx_wait(s.z, 10000);

		T_CHECK(ready > 0, "zcrx_wait: %d: %s", ready, devmemtcp_zcrx_errmsg(s.z));
		for (int i = 0; i < SOCKS; i++) {
			struct zsock *z = &zs[i];
			int n;

			if (z->eof)
				continue;
			pthread_mutex_lock(&job.lock);
			n = devmemtcp_rx_recv(z->rx, frags, MAX_FRAGS, linear, sizeof(linear));
			pthread_mutex_unlock(&job.lock);
			if (n == -EAGAIN)
				continue;
			T_CHECK(n >= 0, "socket %d: recv %d: %s", i, n, devmemtcp_rx_errmsg(z->rx));
			if (n == 0) {
				z->eof = true;
				open--;
				/* the rest of its fragments in random order */
				while (z->nheld)
					T_TRY(release_random(z, &job, rounds++ % 2));
				continue;
			}
			T_TRY(validate(z, s.buf, frags, n));
			memcpy(z->held + z->nheld, frags, (size_t)n * sizeof(*frags));
			z->nheld += (size_t)n;
			/* hold up to 1024 fragments, then give back some */
			while (z->nheld > 1024)
				T_TRY(release_random(z, &job, rounds++ % 2));
		}
	}
	pthread_mutex_lock(&job.lock);
	job.stop = true;
	pthread_cond_broadcast(&job.cond);
	pthread_mutex_unlock(&job.lock);
	pthread_join(releaser, NULL);
	/* releases of this thread wait for a receive or a flush */
	for (int i = 0; i < SOCKS; i++)
		T_CHECK(devmemtcp_rx_flush(zs[i].rx) >= 0, "flush");
	st = zstats(s.z);
	print_zstats("multi", &st, t_now() - t0);
	printf("multi: %llu fragments released from another thread, in %u random rounds\n",
	       (unsigned long long)job.released, rounds);
	T_CHECK(job.failed == 0, "releases on the other thread failed");
	T_CHECK(job.released > 0, "nothing released from the other thread");
	for (int i = 0; i < SOCKS; i++) {
		struct devmemtcp_rx_stats rs = { .sz = sizeof(rs) };

		devmemtcp_rx_stats(zs[i].rx, &rs);
		T_CHECK(zs[i].bytes == per && zs[i].bad_at < 0,
			"socket %d: %llu bytes, bad at %lld", i,
			(unsigned long long)zs[i].bytes, (long long)zs[i].bad_at);
		T_CHECK(rs.tokens_outstanding == 0 && rs.steering_misses == 0,
			"socket %d: %llu outstanding", i, (unsigned long long)rs.tokens_outstanding);
		T_TRY(zsock_close(&zs[i]));
	}
	T_CHECK(st.held == 0 && st.frags >= SOCKS * per / 4096 && st.held_max > 1024,
		"held %llu (max %llu), %llu frags", (unsigned long long)st.held,
		(unsigned long long)st.held_max, (unsigned long long)st.frags);
	return setup_close(&s);
}

/* A refill ring of 64 entries and 2048 fragments held, then released at
 * once: the releases queue and the ring's thread drains them. */
static int test_overflow(void)
{
	DEVMEMTCP_OPTS(zcrx_opts, zo, .rq_entries = 64);
	const uint64_t bytes = 16ull << 20;
	int port = 7201, n;
	struct devmemtcp_frag frags[MAX_FRAGS];
	static uint8_t linear[LINEAR];
	static struct zsock z;
	struct devmemtcp_zcrx_stats st;
	struct setup s;
	double t0 = t_now();

	T_TRY(setup_open(&s, &port, 1, &zo));
	T_TRY(zsock_open(&z, port, bytes, s.z, false));
	while ((n = devmemtcp_rx_recv(z.rx, frags, MAX_FRAGS, linear, sizeof(linear))) > 0) {
		T_TRY(validate(&z, s.buf, frags, n));
		memcpy(z.held + z.nheld, frags, (size_t)n * sizeof(*frags));
		z.nheld += (size_t)n;
		if (z.nheld >= 2048) {
			T_CHECK(devmemtcp_rx_release(z.rx, z.held, z.nheld) == 0, "release");
			z.nheld = 0;
		}
	}
	T_CHECK(n == 0, "recv: %s", devmemtcp_rx_errmsg(z.rx));
	T_CHECK(devmemtcp_rx_release(z.rx, z.held, z.nheld) == 0, "release");
	T_CHECK(devmemtcp_rx_flush(z.rx) >= 0, "flush");
	st = zstats(s.z);
	print_zstats("overflow", &st, t_now() - t0);
	T_CHECK(z.bytes == bytes && z.bad_at < 0, "%llu bytes, bad at %lld",
		(unsigned long long)z.bytes, (long long)z.bad_at);
	T_CHECK(st.rq_entries == 64, "rq_entries %u", st.rq_entries);
	T_CHECK(st.refill_queued > 0 && st.refill_queue_max >= 2048 - 64,
		"queued %llu, queue max %llu", (unsigned long long)st.refill_queued,
		(unsigned long long)st.refill_queue_max);
	T_CHECK(st.held_max >= 2048, "held max %llu", (unsigned long long)st.held_max);
	T_TRY(zsock_close(&z));
	/* the queued ones reached the ring, except those freed with the ring */
	T_CHECK(st.held == 0, "held %llu", (unsigned long long)st.held);
	return setup_close(&s);
}

/* A flow without a rule: RSS delivers it on another queue. */
static int test_miss(void)
{
	int rule_port = 7300, port = 7301, n;
	struct devmemtcp_frag frags[MAX_FRAGS];
	struct devmemtcp_rx_stats rs = { .sz = sizeof(rs) };
	struct devmemtcp_zcrx_stats st;
	static uint8_t linear[LINEAR];
	static struct zsock z;
	struct setup s;
	char want[512];

	/* user-memory area: the kernel copies, the bytes arrive */
	T_TRY(setup_open(&s, &rule_port, 1, NULL));
	T_TRY(zsock_open(&z, port, 4 << 20, s.z, false));
	while ((n = devmemtcp_rx_recv(z.rx, frags, MAX_FRAGS, linear, sizeof(linear))) > 0) {
		T_TRY(validate(&z, s.buf, frags, n));
		T_CHECK(devmemtcp_rx_release(z.rx, frags, (size_t)n) == 0, "release");
	}
	T_CHECK(n == 0, "recv: %s", devmemtcp_rx_errmsg(z.rx));
	devmemtcp_rx_stats(z.rx, &rs);
	st = zstats(s.z);
	print_zstats("miss (user-memory area)", &st, 0);
	printf("miss: %llu receives reported as steering misses\n",
	       (unsigned long long)rs.steering_misses);
	T_CHECK(z.bytes == 4 << 20 && z.bad_at < 0, "data");
	T_CHECK(rs.steering_misses > 0 && rs.steering_misses == st.steering_misses,
		"steering misses: rx %llu, zcrx %llu", (unsigned long long)rs.steering_misses,
		(unsigned long long)st.steering_misses);
	if (st.copy_count >= 0)
		T_CHECK(st.copy_count > 0 && st.copy_bytes > 0,
			"copy fallbacks %lld, %lld bytes", (long long)st.copy_count,
			(long long)st.copy_bytes);
	T_TRY(zsock_close(&z));
	T_TRY(setup_close(&s));

	/* dma-buf area: the kernel cannot copy, the receive fails and says why */
	DEVMEMTCP_OPTS(zcrx_opts, zo, .flags = DEVMEMTCP_ZCRX_DMABUF_AREA);
	T_TRY(setup_open(&s, &rule_port, 1, &zo));
	T_TRY(zsock_open(&z, port + 1, 1 << 20, s.z, false));
	n = devmemtcp_rx_recv(z.rx, frags, MAX_FRAGS, linear, sizeof(linear));
	printf("miss (dma-buf area): recv returned %d: %s\n", n, devmemtcp_rx_errmsg(z.rx));
	snprintf(want, sizeof(want),
		 "fd %d: the flow arrives on another queue than %s queue %d: the kernel cannot place its bytes in this zcrx area (steering miss); steer it to queue %d with an ntuple rule (devmemtcp_nic_open() flows), or use a user-memory area, into which the kernel copies",
		 z.fd, VM_RX_IF, QUEUE, QUEUE);
	T_CHECK(n == -EREMOTEIO, "expected -EREMOTEIO, got %d", n);
	T_CHECK(!strcmp(devmemtcp_rx_errmsg(z.rx), want), "message: %s",
		devmemtcp_rx_errmsg(z.rx));
	/* closing with unread data resets the connection: the sender ends */
	devmemtcp_rx_free(z.rx);
	close(z.fd);
	close(z.lfd);
	vm_send_wait(z.snd);
	return setup_close(&s);
}

struct other_thread {
	struct devmemtcp_zcrx *z;
	int ret;
	char msg[512];
};

static void *other_wait(void *arg)
{
	struct other_thread *o = arg;

	o->ret = devmemtcp_zcrx_wait(o->z, 0);
	snprintf(o->msg, sizeof(o->msg), "%s", devmemtcp_zcrx_errmsg(o->z));
	return NULL;
}

static int expect_msg(int ret, int want_ret, const char *want)
{
	printf("errors: %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	T_CHECK(ret == want_ret, "expected %d, got %d", want_ret, ret);
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "message: %s",
		devmemtcp_ctx_errmsg(ctx));
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal interrupts the wait: EINTR, and no message (the handle's
 * stays what it was). */
static int wait_interrupted(struct devmemtcp_zcrx *z)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { .it_value = { 0, 100000 } };
	char before[512];
	int ret;

	snprintf(before, sizeof(before), "%s", devmemtcp_zcrx_errmsg(z));
	/* no SA_RESTART: io_uring_enter returns EINTR */
	T_CHECK(sigaction(SIGALRM, &sa, &old) == 0, "sigaction");
	T_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
	ret = devmemtcp_zcrx_wait(z, 5000);
	sigaction(SIGALRM, &old, NULL);
	printf("errors: wait interrupted: %d: %s\n", ret, devmemtcp_zcrx_errmsg(z));
	/* ERRORS devmemtcp_zcrx_wait EINTR */
	T_CHECK(ret == -EINTR, "wait interrupted: %d", ret);
	T_CHECK(!strcmp(devmemtcp_zcrx_errmsg(z), before), "message after EINTR: %s",
		devmemtcp_zcrx_errmsg(z));
	return 0;
}

/* A queue an AF_XDP socket uses, and a user-memory area the kernel cannot
 * pin (its pages are PROT_NONE). */
static int refused_by_kernel(struct devmemtcp_buf *buf)
{
	struct devmemtcp_zcrx *z2 = NULL;
	struct devmemtcp_buf *locked;
	uint64_t addr = 0;
	char want[512];
	int xsk = t_xsk_bind(ifindex, QUEUE - 1);

	T_CHECK(xsk >= 0, "AF_XDP socket on queue %d", QUEUE - 1);
	/* ERRORS devmemtcp_zcrx_new EBUSY */
	snprintf(want, sizeof(want), "queue %d of %s is used by AF_XDP: pick another queue",
		 QUEUE - 1, VM_RX_IF);
	T_TRY(expect_msg(devmemtcp_zcrx_new(ctx, ifindex, QUEUE - 1, buf, NULL, &z2), -EBUSY, want));
	close(xsk);
	T_CHECK(t_udmabuf(ctx, 1 << 20, &locked) == 0, "udmabuf");
	T_CHECK(devmemtcp_buf_addr(locked, 0, &addr) == 0, "addr");
	T_CHECK(mprotect((void *)(uintptr_t)addr, 1 << 20, PROT_NONE) == 0, "mprotect");
	/* ERRORS devmemtcp_zcrx_new EFAULT */
	T_TRY(expect_msg(devmemtcp_zcrx_new(ctx, ifindex, QUEUE - 1, locked, NULL, &z2), -EFAULT,
			 "the kernel could not pin the buffer's memory as a user-memory area: register it as a dma-buf area (DEVMEMTCP_ZCRX_DMABUF_AREA)"));
	T_CHECK(!z2, "handle on failure");
	mprotect((void *)(uintptr_t)addr, 1 << 20, PROT_READ | PROT_WRITE);
	devmemtcp_buf_free(locked);
	return 0;
}

static int test_errors(void)
{
	struct devmemtcp_zcrx *z2 = NULL;
	struct other_thread o = { 0 };
	pthread_t t;
	struct setup s;
	char want[512];
	int port = 7401;

	T_TRY(setup_open(&s, &port, 1, NULL));
	/* a second handle on the same queue */
	/* ERRORS devmemtcp_zcrx_new EEXIST */
	snprintf(want, sizeof(want),
		 "queue %d of %s already has a memory provider (a dma-buf binding or another zcrx), or an XDP program is attached to %s: pick another queue or release it",
		 QUEUE, VM_RX_IF, VM_RX_IF);
	T_TRY(expect_msg(devmemtcp_zcrx_new(ctx, ifindex, QUEUE, s.buf, NULL, &z2), -EEXIST, want));
	/* ERRORS devmemtcp_zcrx_new ERANGE */
	snprintf(want, sizeof(want),
		 "%s has no RX queue 99: pick a queue below its RX queue count (ethtool -l %s)",
		 VM_RX_IF, VM_RX_IF);
	T_TRY(expect_msg(devmemtcp_zcrx_new(ctx, ifindex, 99, s.buf, NULL, &z2), -ERANGE, want));
	/* the ring belongs to the first thread that drives it */
	T_CHECK(devmemtcp_zcrx_wait(s.z, 0) == 0, "wait: %s", devmemtcp_zcrx_errmsg(s.z));
	o.z = s.z;
	pthread_create(&t, NULL, other_wait, &o);
	pthread_join(t, NULL);
	snprintf(want, sizeof(want),
		 "the zcrx handle of %s queue %d is driven by another thread: receive on all its sockets from that one thread (io_uring single issuer)",
		 VM_RX_IF, QUEUE);
	printf("errors: another thread: %d: %s\n", o.ret, o.msg);
	T_CHECK(o.ret == -EBUSY && !strcmp(o.msg, want), "other thread: %d: %s", o.ret, o.msg);
	T_TRY(wait_interrupted(s.z));
	T_TRY(refused_by_kernel(s.buf));
	T_TRY(setup_close(&s));
	/* header split is off again: the kernel refuses, the library says why */
	T_CHECK(t_udmabuf(ctx, 1 << 20, &s.buf) == 0, "udmabuf");
	snprintf(want, sizeof(want),
		 "header split is off on %s: enable it (ethtool -G %s tcp-data-split on) or set the NIC up with devmemtcp_nic_open()",
		 VM_RX_IF, VM_RX_IF);
	T_TRY(expect_msg(devmemtcp_zcrx_new(ctx, ifindex, QUEUE, s.buf, NULL, &z2), -EINVAL, want));
	T_CHECK(!z2, "handle on failure");
	devmemtcp_buf_free(s.buf);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
	bool zcrx;		/* needs a kernel with zcrx */
} tests[] = {
	{ "support", test_support, false },
	{ "transfer", test_transfer, true },
	{ "transfer-dmabuf", test_transfer_dmabuf, true },
	{ "multi", test_multi, true },
	{ "overflow", test_overflow, true },
	{ "miss", test_miss, true },
	{ "errors", test_errors, true },
};

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "all";
	bool all = !strcmp(which, "all"), have = t_kernel_version() >= 615;
	char *before = NULL, *after = NULL;
	char *nargv[] = { argv[0], (char *)VM_RX_IF, NULL };
	struct devmemtcp_ctx *nctx;
	const char *nif;
	int failed = 0, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0 && vm_enter(VM_RX_NS) == 0,
		"cannot set up the namespaces (is devmemsim loaded?)");
	T_TRY(nic_init(2, nargv, &nctx, &nif));
	before = nic_dump();
	T_CHECK(devmemtcp_ctx_new(NULL, &ctx) == 0, "ctx");
	ifindex = (int)if_nametoindex(VM_RX_IF);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		double t0;
		int r;

		if (!all && strcmp(which, tests[i].name))
			continue;
		if (all && tests[i].zcrx && !have) {
			printf("--- %s: needs Linux 6.15 (this is %s): support checks the EOPNOTSUPP\n",
			       tests[i].name, t_kernel_release());
			continue;
		}
		printf("--- %s\n", tests[i].name);
		t0 = t_now();
		r = tests[i].fn();
		printf("%s %s (%.1f s)\n", r ? "FAIL" : "PASS", tests[i].name, t_now() - t0);
		failed += r != 0;
		ran++;
	}
	devmemtcp_ctx_free(ctx);
	after = nic_dump();
	if (nic_same(before, after, "after the zcrx tests"))
		failed++;
	else
		printf("teardown: the NIC's ethtool state is as before the tests\n");
	free(before);
	free(after);
	if (!ran) {
		fprintf(stderr, "no test named %s\n", which);
		return 2;
	}
	printf("%d passed, %d failed\n", ran - failed, failed);
	return failed ? T_EXIT_FAIL : T_EXIT_PASS;
}
