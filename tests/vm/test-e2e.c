// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm suite, end to end through the real kernel devmem path and the
 * simulated NIC.  Run as root in the guest:
 *
 *   test-e2e [--bytes N] [--flow-bytes N] [--buf N] [--rx-page-size N]
 *            [transfer|multiflow|miss|unbind|close-outstanding|hds-off|busy|
 *             starve|corrupt|all]...
 *
 * Every payload byte is checked against the pattern "byte i is i % 251"
 * by reading the udmabuf the NIC wrote.  --bytes sizes the transfer
 * (default 64M), --flow-bytes each multiflow flow (4M), --buf the udmabuf
 * (32M); --rx-page-size binds with that NIC page size, backing the udmabuf
 * with huge pages.  The transfer prints the layout of the fragments it got
 * and checks it against the simulated NIC's buffer layout (its module
 * parameters rx_buf_size, rx_pack and rx_mix).  The same program runs on
 * the emulated NIC (tests/emu), whose results are compared with these.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <net/if.h>

#include "devmemtcp.h"
#include "pattern.h"
#include "harness.h"
#include "frag-layout.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define MAX_FRAGS 1024
#define LINEAR (4u << 20)

static struct devmemtcp_ctx *ctx;

static struct {
	uint64_t bytes;		/* transfer */
	uint64_t flow_bytes;	/* multiflow, each flow */
	uint64_t buf_size;
	uint32_t rx_page_size;	/* 0: the kernel's default NIC page */
} opt = { 64ull << 20, 4ull << 20, 32ull << 20, 0 };

/* A udmabuf of size bytes for binding: huge pages for NIC pages over 4
 * KiB, whose dma-buf segments must be aligned to the NIC page. */
static int e2e_buf_of(uint64_t size, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = size, .flags = DEVMEMTCP_BUF_HUGETLB);

	if (opt.rx_page_size <= 4096)
		return t_udmabuf(ctx, size, buf);
	if (devmemtcp_buf_new(ctx, &o, buf)) {
		fprintf(stderr, "hugetlb udmabuf of %llu bytes: %s\n",
			(unsigned long long)size, devmemtcp_ctx_errmsg(ctx));
		return -1;
	}
	return 0;
}

/* The udmabuf most tests bind. */
static int e2e_buf(struct devmemtcp_buf **buf)
{
	return e2e_buf_of(opt.buf_size, buf);
}

struct rx_result {
	uint64_t bytes;
	int64_t bad_at;		/* stream offset of the first bad byte, -1 */
	uint8_t got, want;
	int queue_ok;		/* queue-get showed the binding during receive */
	uint32_t first_token, max_token;
	struct devmemtcp_rx_stats st;
};

struct rx_args {
	int lfd;
	struct devmemtcp_buf *buf;
	uint32_t binding_id;
	int ifindex;
	uint32_t queue;		/* check queue-get for this queue if binding_id */
	bool release;		/* return tokens (false: leave them outstanding) */
	bool close_first;	/* close the socket before freeing the handle */
	struct layout *layout;	/* fragments recorded here unless NULL */
	struct rx_result r;
	int ret;
};

static void *receive_main(void *arg)
{
	struct rx_args *a = arg;
	struct rx_result *r = &a->r;
	struct devmemtcp_frag *frags = calloc(MAX_FRAGS, sizeof(*frags));
	uint8_t *linear = malloc(LINEAR), *tmp = malloc(65536);
	struct devmemtcp_rx *rx = NULL;
	int fd, n;

	memset(r, 0, sizeof(*r));
	r->bad_at = -1;
	r->st.sz = sizeof(r->st);
	a->ret = 1;
	fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0 || devmemtcp_rx_new(ctx, fd, NULL, &rx))
		goto out;
	if (a->buf && devmemtcp_rx_add_buf(rx, a->binding_id, a->buf))
		goto out;
	while ((n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, linear, LINEAR)) > 0) {
		if (a->binding_id && !r->queue_ok) {
			struct devmemtcp_queue q[32];
			int nq = devmemtcp_queue_list(ctx, a->ifindex, q, 32);

			for (int i = 0; i < nq && i < 32; i++)
				if (q[i].type == DEVMEMTCP_QUEUE_RX && q[i].id == a->queue &&
				    q[i].dmabuf_id == a->binding_id)
					r->queue_ok = 1;
		}
		for (int i = 0; i < n; i++) {
			const struct devmemtcp_frag *f = &frags[i];
			const uint8_t *src = NULL;
			long at;

			if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
				src = linear + f->offset;
			} else if (!(f->flags & DEVMEMTCP_FRAG_FOREIGN) && a->buf) {
				if (a->layout)
					layout_add(a->layout, f->offset, f->len);
				if (!r->first_token)
					r->first_token = f->token;
				if (f->token > r->max_token)
					r->max_token = f->token;
				if (devmemtcp_buf_read(a->buf, f->offset, tmp, f->len)) {
					fprintf(stderr, "%s\n", devmemtcp_buf_errmsg(a->buf));
					goto out;
				}
				src = tmp;
			}
			if (src && r->bad_at < 0) {
				at = pattern_check(src, f->len, r->bytes, PERIOD);
				if (at >= 0) {
					r->bad_at = (int64_t)(r->bytes + (uint64_t)at);
					r->got = src[at];
					r->want = pattern_byte((uint64_t)r->bad_at, PERIOD);
				}
			}
			r->bytes += f->len;
		}
		if (a->release && devmemtcp_rx_release(rx, frags, (size_t)n)) {
			fprintf(stderr, "%s\n", devmemtcp_rx_errmsg(rx));
			goto out;
		}
	}
	if (n < 0) {
		fprintf(stderr, "recv: %s\n", devmemtcp_rx_errmsg(rx));
		goto out;
	}
	if (a->release && devmemtcp_rx_flush(rx) < 0)
		goto out;
	devmemtcp_rx_stats(rx, &r->st);
	a->ret = 0;
out:
	if (a->close_first && fd >= 0) {
		close(fd);
		fd = -1;
	}
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	free(frags);
	free(linear);
	free(tmp);
	return NULL;
}

/* nic_open on the receiver with these queues and dst ports (port i to
 * queue index i % nqueues), binding buf when given. */
static struct devmemtcp_nic *prepare(const uint32_t *queues, uint32_t nq,
				     const int *ports, size_t nports,
				     struct devmemtcp_buf *buf)
{
	struct devmemtcp_flow flows[16];
	struct devmemtcp_nic *nic;
	char text[128];

	for (size_t i = 0; i < nports; i++) {
		snprintf(text, sizeof(text), "tcp4 dst-ip %s dst-port %d queue %zu",
			 VM_RX_ADDR4, ports[i], i % nq);
		if (devmemtcp_flow_parse(text, &flows[i])) {
			fprintf(stderr, "flow '%s' does not parse\n", text);
			return NULL;
		}
	}
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = opt.rx_page_size);
	DEVMEMTCP_OPTS(nic_opts, o, .queues = queues, .nqueues = nq,
		       .flows = flows, .nflows = nports, .buf = buf,
		       .bind_opts = &bo);
	if (devmemtcp_nic_open(ctx, VM_RX_IF, &o, &nic)) {
		fprintf(stderr, "nic_open: %s\n", devmemtcp_ctx_errmsg(ctx));
		return NULL;
	}
	return nic;
}

/* The setup most tests use: queue 3, with a udmabuf bound unless with_buf
 * is false, and a rule steering port there unless port is 0. */
struct queue3 {
	uint32_t q;
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	uint32_t id;		/* the binding, 0 without a buffer */
};

static int queue3_open(struct queue3 *s, int port, bool with_buf)
{
	memset(s, 0, sizeof(*s));
	s->q = 3;
	if (with_buf)
		T_CHECK(e2e_buf(&s->buf) == 0, "udmabuf");
	s->nic = prepare(&s->q, 1, &port, port ? 1 : 0, s->buf);
	T_CHECK(s->nic, "setup");
	if (s->buf)
		s->id = devmemtcp_binding_id(devmemtcp_nic_binding(s->nic));
	return 0;
}

static int queue3_close(struct queue3 *s)
{
	T_CHECK(devmemtcp_nic_close(s->nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(s->buf);
	return 0;
}

/* A receiver thread for port, checking queue-get for queue when bound,
 * recording the fragments' layout in lay unless NULL. */
static int receive_start(struct rx_args *a, int port, struct devmemtcp_buf *buf,
			 uint32_t binding_id, uint32_t queue, bool release,
			 struct layout *lay, pthread_t *t)
{
	memset(a, 0, sizeof(*a));
	a->layout = lay;
	a->lfd = t_listen(VM_RX_ADDR4, port);
	T_CHECK(a->lfd >= 0, "listen");
	a->buf = buf;
	a->binding_id = binding_id;
	a->ifindex = (int)if_nametoindex(VM_RX_IF);
	a->queue = queue;
	a->release = release;
	a->close_first = !release;
	pthread_create(t, NULL, receive_main, a);
	return 0;
}

/* One flow of bytes through a prepared NIC: receive and validate. */
static int flow_layout(int port, uint64_t bytes, const struct queue3 *s, bool release,
		       struct rx_args *a, struct layout *lay)
{
	struct vm_sender *snd;
	pthread_t t;

	T_TRY(receive_start(a, port, s->buf, s->id, s->q, release, lay, &t));
	snd = vm_send_start(VM_RX_ADDR4, port, bytes, PERIOD);
	T_CHECK(vm_send_wait(snd) == 0, "sender failed");
	pthread_join(t, NULL);
	close(a->lfd);
	T_CHECK(a->ret == 0, "receiver failed");
	return 0;
}

static int one_flow(int port, uint64_t bytes, const struct queue3 *s, bool release,
		    struct rx_args *a)
{
	return flow_layout(port, bytes, s, release, a, NULL);
}

/* The transfer on an open queue; its caller closes the queue whatever
 * this returns, so that a failure does not leave the queue owned for the
 * tests after it. */
static int transfer_on(struct queue3 *q)
{
	const uint64_t bytes = opt.bytes;
	struct layout lay;
	struct rx_args a;
	int ret;

	T_CHECK(q->id > 0, "no binding");
	layout_init(&lay, opt.rx_page_size ? opt.rx_page_size : 4096);
	ret = flow_layout(6001, bytes, q, true, &a, &lay);
	layout_print(&lay, &a.r.st);
	if (!ret)
		ret = layout_check(&lay);
	layout_free(&lay);
	T_TRY(ret);
	printf("transfer: %llu bytes, %llu dmabuf, %llu linear, %llu frags, %llu tokens released, %llu dontneed calls in %llu receives, outstanding max %llu\n",
	       (unsigned long long)a.r.bytes, (unsigned long long)a.r.st.dmabuf_bytes,
	       (unsigned long long)a.r.st.linear_bytes, (unsigned long long)a.r.st.frags,
	       (unsigned long long)a.r.st.tokens_released,
	       (unsigned long long)a.r.st.dontneed_calls,
	       (unsigned long long)a.r.st.recv_calls,
	       (unsigned long long)a.r.st.tokens_outstanding_max);
	printf("transfer: tokens from %u, highest %u\n", a.r.first_token, a.r.max_token);
	T_CHECK(a.r.bytes == bytes, "got %llu bytes", (unsigned long long)a.r.bytes);
	T_CHECK(a.r.bad_at < 0, "bad byte at %lld", (long long)a.r.bad_at);
	T_CHECK(a.r.st.frags > 0 && a.r.st.dmabuf_bytes >= bytes - a.r.st.linear_bytes,
		"payload did not land in the dma-buf");
	T_CHECK(a.r.st.dmabuf_bytes > bytes / 2, "only %llu bytes in device memory",
		(unsigned long long)a.r.st.dmabuf_bytes);
	T_CHECK(a.r.st.tokens_outstanding == 0, "%llu tokens outstanding",
		(unsigned long long)a.r.st.tokens_outstanding);
	T_CHECK(a.r.st.tokens_released == a.r.st.frags, "released %llu of %llu",
		(unsigned long long)a.r.st.tokens_released, (unsigned long long)a.r.st.frags);
	T_CHECK(a.r.st.steering_misses == 0 && a.r.st.foreign_frags == 0, "steering");
	T_CHECK(a.r.queue_ok, "queue-get did not show binding %u on queue %u", q->id, q->q);
	/* more bytes than the buffer: tokens were recycled, merged, and
	 * returned with at most one DONTNEED per receive (+ the last) */
	T_CHECK(a.r.st.dontneed_calls > 0 &&
		a.r.st.dontneed_calls <= a.r.st.recv_calls + 1,
		"%llu DONTNEED calls for %llu receives", (unsigned long long)a.r.st.dontneed_calls,
		(unsigned long long)a.r.st.recv_calls);
	T_CHECK(a.r.st.frags > bytes / 4096, "%llu frags", (unsigned long long)a.r.st.frags);
	return 0;
}

static int test_transfer(void)
{
	struct queue3 s;
	int ret, cret;

	T_TRY(queue3_open(&s, 6001, true));
	ret = transfer_on(&s);
	cret = queue3_close(&s);
	return ret ? ret : cret;
}

static int test_multiflow(void)
{
	enum { FLOWS = 8 };
	struct devmemtcp_buf *buf;
	uint32_t queues[2] = { 2, 3 };
	int ports[FLOWS];
	struct rx_args a[FLOWS];
	struct vm_sender *s[FLOWS];
	pthread_t t[FLOWS];
	struct devmemtcp_nic *nic;
	struct devmemtcp_qstats qs[2];
	uint64_t per_flow = opt.flow_bytes;
	uint32_t id;

	T_CHECK(e2e_buf(&buf) == 0, "udmabuf");
	for (int i = 0; i < FLOWS; i++)
		ports[i] = 6100 + i;
	nic = prepare(queues, 2, ports, FLOWS, buf);
	T_CHECK(nic, "setup");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	for (int i = 0; i < FLOWS; i++)
		T_TRY(receive_start(&a[i], ports[i], buf, id, queues[i % 2], true, NULL, &t[i]));
	for (int i = 0; i < FLOWS; i++)
		s[i] = vm_send_start(VM_RX_ADDR4, ports[i], per_flow, PERIOD);
	for (int i = 0; i < FLOWS; i++) {
		T_CHECK(vm_send_wait(s[i]) == 0, "sender %d", i);
		pthread_join(t[i], NULL);
		close(a[i].lfd);
		T_CHECK(a[i].ret == 0, "receiver %d", i);
		T_CHECK(a[i].r.bytes == per_flow, "flow %d: %llu bytes", i,
			(unsigned long long)a[i].r.bytes);
		T_CHECK(a[i].r.bad_at < 0, "flow %d: bad byte at %lld", i,
			(long long)a[i].r.bad_at);
		T_CHECK(a[i].r.st.frags > 0 && a[i].r.st.steering_misses == 0 &&
			a[i].r.st.foreign_frags == 0, "flow %d steering", i);
		T_CHECK(a[i].r.st.tokens_outstanding == 0, "flow %d tokens", i);
		T_CHECK(a[i].r.queue_ok, "flow %d: queue %u not bound", i, a[i].queue);
	}
	/* both queues carried traffic */
	for (int i = 0; i < 2; i++) {
		qs[i].sz = sizeof(qs[i]);
		if (devmemtcp_qstats_get(ctx, (int)if_nametoindex(VM_RX_IF),
					 DEVMEMTCP_QUEUE_RX, (int)queues[i], &qs[i]) == 0)
			T_CHECK(qs[i].rx_bytes > 2 * per_flow, "queue %u: %llu bytes",
				queues[i], (unsigned long long)qs[i].rx_bytes);
		else
			printf("multiflow: qstats unavailable: %s\n", devmemtcp_ctx_errmsg(ctx));
	}
	printf("multiflow: %d flows x %llu bytes over queues 2 and 3 validated\n", FLOWS,
	       (unsigned long long)per_flow);
	T_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	return 0;
}

static int test_miss(void)
{
	struct queue3 s;
	struct rx_args a;

	/* bound queue, but no rule for this flow: RSS keeps it off queue 3 */
	T_TRY(queue3_open(&s, 0, true));
	T_TRY(one_flow(6200, 1 << 20, &s, true, &a));
	T_CHECK(a.r.bytes == 1 << 20 && a.r.bad_at < 0, "data");
	T_CHECK(a.r.st.steering_misses > 0, "no steering miss reported");
	T_CHECK(a.r.st.frags == 0 && a.r.st.linear_bytes == 1 << 20, "frags %llu",
		(unsigned long long)a.r.st.frags);
	printf("miss: %llu receives of plain data reported as steering misses\n",
	       (unsigned long long)a.r.st.steering_misses);
	return queue3_close(&s);
}

static int bound_queues(int ifindex)
{
	struct devmemtcp_queue q[32];
	int n = devmemtcp_queue_list(ctx, ifindex, q, 32), bound = 0;

	for (int i = 0; i < n && i < 32; i++)
		bound += q[i].dmabuf_id != 0;
	return n < 0 ? n : bound;
}

static int test_unbind(void)
{
	int ifindex = (int)if_nametoindex(VM_RX_IF);
	struct queue3 s, plain;
	struct rx_args a;

	T_TRY(queue3_open(&s, 6300, true));
	T_CHECK(bound_queues(ifindex) == 1, "not bound");
	T_CHECK(devmemtcp_nic_close(s.nic) == 0, "nic_close");
	T_CHECK(bound_queues(ifindex) == 0, "still bound after close");
	/* the same queue, steered again but without a binding: plain data */
	T_TRY(queue3_open(&plain, 6300, false));
	T_TRY(one_flow(6300, 2 << 20, &plain, true, &a));
	T_CHECK(a.r.bytes == 2 << 20 && a.r.bad_at < 0, "data");
	T_CHECK(a.r.st.frags == 0 && a.r.st.steering_misses > 0, "devmem after unbind");
	printf("unbind: queue-get shows no dma-buf; queue 3 carries plain data\n");
	T_TRY(queue3_close(&plain));
	devmemtcp_buf_free(s.buf);
	return 0;
}

static int test_close_outstanding(void)
{
	struct queue3 s;
	struct rx_args a;

	T_TRY(queue3_open(&s, 6400, true));
	/* 8 MiB received, no token returned, socket closed with them held */
	T_TRY(one_flow(6400, 8 << 20, &s, false, &a));
	T_CHECK(a.r.bytes == 8 << 20 && a.r.bad_at < 0, "data");
	T_CHECK(a.r.st.tokens_released == 0 && a.r.st.tokens_outstanding == a.r.st.frags,
		"tokens were returned");
	T_TRY(queue3_close(&s));
	/* the queue works again with a new binding: nothing leaked */
	T_TRY(queue3_open(&s, 6400, true));
	T_TRY(one_flow(6400, 40 << 20, &s, true, &a));
	T_CHECK(a.r.bytes == 40 << 20 && a.r.bad_at < 0 && a.r.st.frags > 0, "second transfer");
	T_TRY(queue3_close(&s));
	printf("close-outstanding: %llu tokens left to the kernel on close; queue reusable\n",
	       (unsigned long long)a.r.st.frags);
	return 0;
}

static int test_hds_off(void)
{
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *b = NULL;
	int ifindex = (int)if_nametoindex(VM_RX_IF);
	uint32_t q = 3;
	int ret;

	T_CHECK(t_udmabuf(ctx, opt.buf_size, &buf) == 0, "udmabuf");
	/* nothing has turned header split on: the simulated NIC starts with it off */
	ret = devmemtcp_bind_rx(ctx, ifindex, &q, 1, buf, NULL, &b);
	printf("hds-off: bind-rx returned %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	if (t_kernel_version() >= 614) {
		T_CHECK(ret == -EINVAL, "expected -EINVAL, got %d", ret);
		T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx),
				"bind-rx on dsim1 failed: enable header split on dsim1: ethtool -G dsim1 tcp-data-split on (or use devmemtcp_nic_open()) (kernel: \"tcp-data-split is disabled\")"),
			"message: %s", devmemtcp_ctx_errmsg(ctx));
	} else {
		/* 6.12 does not check header split: the driver's page pool
		 * without unreadable-netmem support refuses the provider */
		T_CHECK(ret < 0, "6.12: bind with header split off succeeded");
		T_CHECK(strstr(devmemtcp_ctx_errmsg(ctx), "bind-rx on dsim1 failed") != NULL,
			"message: %s", devmemtcp_ctx_errmsg(ctx));
	}
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	return 0;
}

/* A queue that has a dma-buf: a second bind-rx on it is refused. */
static int test_busy(void)
{
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *b = NULL;
	int ifindex = (int)if_nametoindex(VM_RX_IF);
	struct queue3 s;
	int ret;

	T_TRY(queue3_open(&s, 6600, true));
	T_CHECK(t_udmabuf(ctx, 1 << 20, &buf) == 0, "udmabuf");
	ret = devmemtcp_bind_rx(ctx, ifindex, &s.q, 1, buf, NULL, &b);
	printf("busy: bind-rx returned %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	T_CHECK(ret == -EEXIST, "expected -EEXIST, got %d", ret);
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx),
			"bind-rx on dsim1 failed: a queue of dsim1 already has a dma-buf or io_uring bound: close that binding first or pick other queues (devmemtcp probe dsim1) (kernel: \"designated queue already memory provider bound\")"),
		"message: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	return queue3_close(&s);
}

/*
 * Out of pages: a receiver that keeps every token starves the queue (a 2
 * MiB buffer, 4 MiB sent): its receive times out (SO_RCVTIMEO) while the
 * NIC counts rx-alloc-fail; once it gives the tokens back every byte
 * arrives, none lost or wrong.
 */
static int test_starve(void)
{
	const uint64_t bytes = 4 << 20;
	struct devmemtcp_frag *held = calloc(65536, sizeof(*held));
	struct devmemtcp_frag *f = calloc(MAX_FRAGS, sizeof(*f));
	uint8_t *linear = malloc(LINEAR), *tmp = malloc(65536);
	struct devmemtcp_qstats qs = { .sz = sizeof(qs) };
	struct timeval tv = { 1, 0 };
	struct devmemtcp_rx *rx = NULL;
	struct vm_sender *snd;
	struct queue3 s;
	uint64_t got = 0, at_stall = 0;
	size_t nheld = 0;
	int lfd, fd = -1, n, stall = 0, ret = T_EXIT_FAIL;

	T_CHECK(held && f && linear && tmp, "memory");
	memset(&s, 0, sizeof(s));
	s.q = 3;
	T_CHECK(e2e_buf_of(2 << 20, &s.buf) == 0, "udmabuf");
	{
		int port = 6700;

		s.nic = prepare(&s.q, 1, &port, 1, s.buf);
	}
	T_CHECK(s.nic, "setup");
	s.id = devmemtcp_binding_id(devmemtcp_nic_binding(s.nic));
	lfd = t_listen(VM_RX_ADDR4, 6700);
	T_CHECK(lfd >= 0, "listen");
	snd = vm_send_start(VM_RX_ADDR4, 6700, bytes, PERIOD);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    devmemtcp_rx_new(ctx, fd, NULL, &rx) || devmemtcp_rx_add_buf(rx, s.id, s.buf))
		goto out;
	while (got < bytes) {
		n = devmemtcp_rx_recv(rx, f, MAX_FRAGS, linear, LINEAR);
		if (n == -EAGAIN && !stall) {
			/* every page is held: the NIC has none for what comes */
			stall = 1;
			at_stall = got;
			devmemtcp_qstats_get(ctx, (int)if_nametoindex(VM_RX_IF),
					     DEVMEMTCP_QUEUE_RX, 3, &qs);
			printf("starve: receive returned %d (%s) after %llu bytes with %zu tokens held; rx-alloc-fail %llu\n",
			       n, strerror(-n), (unsigned long long)got, nheld,
			       (unsigned long long)qs.rx_alloc_fail);
			if (devmemtcp_rx_release(rx, held, nheld))
				goto out;
			nheld = 0;
			continue;
		}
		if (n <= 0) {
			fprintf(stderr, "starve: receive returned %d: %s\n", n, devmemtcp_rx_errmsg(rx));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			const uint8_t *src = linear + f[i].offset;

			if (!(f[i].flags & DEVMEMTCP_FRAG_LINEAR)) {
				if (devmemtcp_buf_read(s.buf, f[i].offset, tmp, f[i].len))
					goto out;
				src = tmp;
			}
			if (pattern_check(src, f[i].len, got, PERIOD) >= 0) {
				fprintf(stderr, "starve: bad byte in [%llu, +%u)\n",
					(unsigned long long)got, f[i].len);
				goto out;
			}
			got += f[i].len;
			if (stall)
				continue;
			if (nheld == 65536)
				goto out;
			held[nheld++] = f[i];
		}
		if (stall && devmemtcp_rx_release(rx, f, (size_t)n))
			goto out;
	}
	ret = 0;
out:
	T_CHECK(vm_send_wait(snd) == 0, "sender failed");
	if (rx) {
		devmemtcp_rx_release(rx, held, nheld);
		devmemtcp_rx_flush(rx);
	}
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	close(lfd);
	free(held);
	free(f);
	free(linear);
	free(tmp);
	T_TRY(ret);
	T_CHECK(stall, "the receiver never stalled");
	T_CHECK(got == bytes, "got %llu bytes", (unsigned long long)got);
	T_CHECK(qs.rx_alloc_fail > 0 && qs.rx_alloc_fail != UINT64_MAX,
		"no rx-alloc-fail while starving (%llu)", (unsigned long long)qs.rx_alloc_fail);
	printf("starve: stalled at %llu bytes, then all %llu bytes arrived intact\n",
	       (unsigned long long)at_stall, (unsigned long long)got);
	return queue3_close(&s);
}

static int test_corrupt(void)
{
	const uint64_t target = 5 * 1000 * 1000 + 7;	/* 1-based payload byte */
	struct queue3 s;
	struct rx_args a;

	T_TRY(queue3_open(&s, 6500, true));
	T_CHECK(vm_sim_knob(VM_RX_IF, "corrupt_offset", target) == 0, "debugfs knob");
	T_TRY(one_flow(6500, 8 << 20, &s, true, &a));
	printf("corrupt: validation reports stream offset %lld (got 0x%02x, expected 0x%02x)\n",
	       (long long)a.r.bad_at, a.r.got, a.r.want);
	T_CHECK(a.r.bad_at == (int64_t)(target - 1), "bad byte reported at %lld, corrupted %llu",
		(long long)a.r.bad_at, (unsigned long long)(target - 1));
	T_CHECK((a.r.got ^ a.r.want) == 0xff, "corruption pattern");
	return queue3_close(&s);
}

static const struct {
	const char *name;
	int (*fn)(void);
} tests[] = {
	{ "hds-off", test_hds_off },	/* first: before anything enabled HDS */
	{ "transfer", test_transfer },
	{ "multiflow", test_multiflow },
	{ "miss", test_miss },
	{ "unbind", test_unbind },
	{ "close-outstanding", test_close_outstanding },
	{ "busy", test_busy },
	{ "starve", test_starve },
	{ "corrupt", test_corrupt },
};

/* --bytes N, --flow-bytes N, --buf N, --rx-page-size N; the index of the
 * first test name, or -1 (printed). */
static int parse_options(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
		uint64_t v = i + 1 < argc ? t_parse_bytes(argv[i + 1]) : 0;

		if (!v) {
			fprintf(stderr, "%s needs a size\n", argv[i]);
			return -1;
		} else if (!strcmp(argv[i], "--bytes")) {
			opt.bytes = v;
		} else if (!strcmp(argv[i], "--flow-bytes")) {
			opt.flow_bytes = v;
		} else if (!strcmp(argv[i], "--buf")) {
			opt.buf_size = v;
		} else if (!strcmp(argv[i], "--rx-page-size")) {
			opt.rx_page_size = (uint32_t)v;
		} else {
			fprintf(stderr, "unknown option %s\n", argv[i]);
			return -1;
		}
	}
	return i;
}

static bool selected(const char *name, int argc, char **argv, int first)
{
	if (first == argc)
		return true;
	for (int i = first; i < argc; i++)
		if (!strcmp(argv[i], "all") || !strcmp(argv[i], name))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	int failed = 0, ran = 0, first = parse_options(argc, argv);

	if (first < 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0 && vm_enter(VM_RX_NS) == 0,
		"cannot set up the namespaces (is devmemsim loaded?)");
	T_CHECK(devmemtcp_ctx_new(NULL, &ctx) == 0, "ctx");
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (!selected(tests[i].name, argc, argv, first))
			continue;
		printf("--- %s\n", tests[i].name);
		int r = tests[i].fn();
		printf("%s %s\n", r ? "FAIL" : "PASS", tests[i].name);
		failed += r != 0;
		ran++;
	}
	devmemtcp_ctx_free(ctx);
	if (!ran) {
		fprintf(stderr, "no test named %s\n", argv[first]);
		return 2;
	}
	printf("%d passed, %d failed\n", ran - failed, failed);
	return failed ? T_EXIT_FAIL : T_EXIT_PASS;
}
