// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm suite, end to end through the real kernel devmem path and the
 * simulated NIC (issue: simulated NIC).  Run as root in the guest:
 *
 *   test-e2e [transfer|multiflow|miss|unbind|close-outstanding|hds-off|corrupt|all]
 *
 * Every payload byte is checked against the pattern "byte i is i % 251"
 * by reading the udmabuf the NIC wrote.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <net/if.h>

#include "devmemtcp.h"
#include "pattern.h"
#include "vmlib.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define BUF_SIZE (32u << 20)
#define MAX_FRAGS 1024
#define LINEAR (4u << 20)

static struct devmemtcp_ctx *ctx;

struct rx_result {
	uint64_t bytes;
	int64_t bad_at;		/* stream offset of the first bad byte, -1 */
	uint8_t got, want;
	int queue_ok;		/* queue-get showed the binding during receive */
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

static struct devmemtcp_buf *new_udmabuf(void)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = BUF_SIZE);
	struct devmemtcp_buf *buf;

	if (devmemtcp_buf_new(ctx, &o, &buf)) {
		fprintf(stderr, "udmabuf: %s\n", devmemtcp_ctx_errmsg(ctx));
		return NULL;
	}
	return buf;
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
	DEVMEMTCP_OPTS(nic_opts, o, .queues = queues, .nqueues = nq,
		       .flows = flows, .nflows = nports, .buf = buf);
	if (devmemtcp_nic_open(ctx, VM_RX_IF, &o, &nic)) {
		fprintf(stderr, "nic_open: %s\n", devmemtcp_ctx_errmsg(ctx));
		return NULL;
	}
	return nic;
}

/* One flow of bytes through a prepared NIC: receive and validate. */
static int one_flow(int port, uint64_t bytes, struct devmemtcp_buf *buf,
		    uint32_t binding_id, uint32_t queue, bool release,
		    struct rx_args *a)
{
	struct vm_sender *s;
	pthread_t t;

	memset(a, 0, sizeof(*a));
	a->lfd = vm_listen(VM_RX_ADDR4, port);
	VM_CHECK(a->lfd >= 0, "listen");
	a->buf = buf;
	a->binding_id = binding_id;
	a->ifindex = (int)if_nametoindex(VM_RX_IF);
	a->queue = queue;
	a->release = release;
	a->close_first = !release;
	pthread_create(&t, NULL, receive_main, a);
	s = vm_send_start(VM_RX_ADDR4, port, bytes, PERIOD);
	VM_CHECK(vm_send_wait(s) == 0, "sender failed");
	pthread_join(t, NULL);
	close(a->lfd);
	VM_CHECK(a->ret == 0, "receiver failed");
	return 0;
}

static int test_transfer(void)
{
	const uint64_t bytes = 64ull << 20;
	struct devmemtcp_buf *buf = new_udmabuf();
	uint32_t q = 3;
	int port = 6001;
	struct devmemtcp_nic *nic = prepare(&q, 1, &port, 1, buf);
	struct rx_args a;
	uint32_t id;

	VM_CHECK(buf && nic, "setup");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	VM_CHECK(id > 0, "no binding");
	if (one_flow(port, bytes, buf, id, q, true, &a))
		return 1;
	printf("transfer: %llu bytes, %llu dmabuf, %llu linear, %llu frags, %llu tokens released, %llu dontneed calls in %llu receives, outstanding max %llu\n",
	       (unsigned long long)a.r.bytes, (unsigned long long)a.r.st.dmabuf_bytes,
	       (unsigned long long)a.r.st.linear_bytes, (unsigned long long)a.r.st.frags,
	       (unsigned long long)a.r.st.tokens_released,
	       (unsigned long long)a.r.st.dontneed_calls,
	       (unsigned long long)a.r.st.recv_calls,
	       (unsigned long long)a.r.st.tokens_outstanding_max);
	VM_CHECK(a.r.bytes == bytes, "got %llu bytes", (unsigned long long)a.r.bytes);
	VM_CHECK(a.r.bad_at < 0, "bad byte at %lld", (long long)a.r.bad_at);
	VM_CHECK(a.r.st.frags > 0 && a.r.st.dmabuf_bytes >= bytes - a.r.st.linear_bytes,
		 "payload did not land in the dma-buf");
	VM_CHECK(a.r.st.dmabuf_bytes > bytes / 2, "only %llu bytes in device memory",
		 (unsigned long long)a.r.st.dmabuf_bytes);
	VM_CHECK(a.r.st.tokens_outstanding == 0, "%llu tokens outstanding",
		 (unsigned long long)a.r.st.tokens_outstanding);
	VM_CHECK(a.r.st.tokens_released == a.r.st.frags, "released %llu of %llu",
		 (unsigned long long)a.r.st.tokens_released, (unsigned long long)a.r.st.frags);
	VM_CHECK(a.r.st.steering_misses == 0 && a.r.st.foreign_frags == 0, "steering");
	VM_CHECK(a.r.queue_ok, "queue-get did not show binding %u on queue %u", id, q);
	/* more bytes than the 32 MiB buffer: tokens were recycled, merged,
	 * and returned with at most one DONTNEED per receive (+ the last) */
	VM_CHECK(a.r.st.dontneed_calls > 0 &&
		 a.r.st.dontneed_calls <= a.r.st.recv_calls + 1,
		 "%llu DONTNEED calls for %llu receives", (unsigned long long)a.r.st.dontneed_calls,
		 (unsigned long long)a.r.st.recv_calls);
	VM_CHECK(a.r.st.frags > bytes / 4096, "%llu frags", (unsigned long long)a.r.st.frags);
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(buf);
	return 0;
}

static int test_multiflow(void)
{
	enum { FLOWS = 8 };
	struct devmemtcp_buf *buf = new_udmabuf();
	uint32_t queues[2] = { 2, 3 };
	int ports[FLOWS];
	struct rx_args a[FLOWS];
	struct vm_sender *s[FLOWS];
	pthread_t t[FLOWS];
	struct devmemtcp_nic *nic;
	struct devmemtcp_qstats qs[2];
	uint64_t per_flow = 4ull << 20;
	uint32_t id;

	for (int i = 0; i < FLOWS; i++)
		ports[i] = 6100 + i;
	nic = prepare(queues, 2, ports, FLOWS, buf);
	VM_CHECK(buf && nic, "setup");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	for (int i = 0; i < FLOWS; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].lfd = vm_listen(VM_RX_ADDR4, ports[i]);
		VM_CHECK(a[i].lfd >= 0, "listen");
		a[i].buf = buf;
		a[i].binding_id = id;
		a[i].ifindex = (int)if_nametoindex(VM_RX_IF);
		a[i].queue = queues[i % 2];
		a[i].release = true;
		pthread_create(&t[i], NULL, receive_main, &a[i]);
	}
	for (int i = 0; i < FLOWS; i++)
		s[i] = vm_send_start(VM_RX_ADDR4, ports[i], per_flow, PERIOD);
	for (int i = 0; i < FLOWS; i++) {
		VM_CHECK(vm_send_wait(s[i]) == 0, "sender %d", i);
		pthread_join(t[i], NULL);
		close(a[i].lfd);
		VM_CHECK(a[i].ret == 0, "receiver %d", i);
		VM_CHECK(a[i].r.bytes == per_flow, "flow %d: %llu bytes", i,
			 (unsigned long long)a[i].r.bytes);
		VM_CHECK(a[i].r.bad_at < 0, "flow %d: bad byte at %lld", i,
			 (long long)a[i].r.bad_at);
		VM_CHECK(a[i].r.st.frags > 0 && a[i].r.st.steering_misses == 0 &&
			 a[i].r.st.foreign_frags == 0, "flow %d steering", i);
		VM_CHECK(a[i].r.st.tokens_outstanding == 0, "flow %d tokens", i);
		VM_CHECK(a[i].r.queue_ok, "flow %d: queue %u not bound", i, a[i].queue);
	}
	/* both queues carried traffic */
	for (int i = 0; i < 2; i++) {
		qs[i].sz = sizeof(qs[i]);
		if (devmemtcp_qstats_get(ctx, (int)if_nametoindex(VM_RX_IF),
					 DEVMEMTCP_QUEUE_RX, (int)queues[i], &qs[i]) == 0)
			VM_CHECK(qs[i].rx_bytes > 2 * per_flow, "queue %u: %llu bytes",
				 queues[i], (unsigned long long)qs[i].rx_bytes);
		else
			printf("multiflow: qstats unavailable: %s\n", devmemtcp_ctx_errmsg(ctx));
	}
	printf("multiflow: %d flows x %llu bytes over queues 2 and 3 validated\n", FLOWS,
	       (unsigned long long)per_flow);
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	return 0;
}

static int test_miss(void)
{
	struct devmemtcp_buf *buf = new_udmabuf();
	uint32_t q = 3;
	/* bound queue, but no rule for this flow: RSS keeps it off queue 3 */
	struct devmemtcp_nic *nic = prepare(&q, 1, NULL, 0, buf);
	struct rx_args a;
	uint32_t id;

	VM_CHECK(buf && nic, "setup");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	if (one_flow(6200, 1 << 20, buf, id, q, true, &a))
		return 1;
	VM_CHECK(a.r.bytes == 1 << 20 && a.r.bad_at < 0, "data");
	VM_CHECK(a.r.st.steering_misses > 0, "no steering miss reported");
	VM_CHECK(a.r.st.frags == 0 && a.r.st.linear_bytes == 1 << 20, "frags %llu",
		 (unsigned long long)a.r.st.frags);
	printf("miss: %llu receives of plain data reported as steering misses\n",
	       (unsigned long long)a.r.st.steering_misses);
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	return 0;
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
	struct devmemtcp_buf *buf = new_udmabuf();
	int ifindex = (int)if_nametoindex(VM_RX_IF);
	uint32_t q = 3;
	int port = 6300;
	struct devmemtcp_nic *nic = prepare(&q, 1, &port, 1, buf);
	struct rx_args a;

	VM_CHECK(buf && nic, "setup");
	VM_CHECK(bound_queues(ifindex) == 1, "not bound");
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	VM_CHECK(bound_queues(ifindex) == 0, "still bound after close");
	/* the same queue, steered again but without a binding: plain data */
	nic = prepare(&q, 1, &port, 1, NULL);
	VM_CHECK(nic, "setup 2");
	if (one_flow(port, 2 << 20, NULL, 0, q, true, &a))
		return 1;
	VM_CHECK(a.r.bytes == 2 << 20 && a.r.bad_at < 0, "data");
	VM_CHECK(a.r.st.frags == 0 && a.r.st.steering_misses > 0, "devmem after unbind");
	printf("unbind: queue-get shows no dma-buf; queue 3 carries plain data\n");
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	return 0;
}

static int test_close_outstanding(void)
{
	struct devmemtcp_buf *buf = new_udmabuf();
	uint32_t q = 3;
	int port = 6400;
	struct devmemtcp_nic *nic = prepare(&q, 1, &port, 1, buf);
	struct rx_args a;
	uint32_t id;

	VM_CHECK(buf && nic, "setup");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	/* 8 MiB received, no token returned, socket closed with them held */
	if (one_flow(port, 8 << 20, buf, id, q, false, &a))
		return 1;
	VM_CHECK(a.r.bytes == 8 << 20 && a.r.bad_at < 0, "data");
	VM_CHECK(a.r.st.tokens_released == 0 && a.r.st.tokens_outstanding == a.r.st.frags,
		 "tokens were returned");
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	/* the queue works again with a new binding: nothing leaked */
	buf = new_udmabuf();
	nic = prepare(&q, 1, &port, 1, buf);
	VM_CHECK(buf && nic, "setup 2");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	if (one_flow(port, 40 << 20, buf, id, q, true, &a))
		return 1;
	VM_CHECK(a.r.bytes == 40 << 20 && a.r.bad_at < 0 && a.r.st.frags > 0, "second transfer");
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	printf("close-outstanding: %llu tokens left to the kernel on close; queue reusable\n",
	       (unsigned long long)a.r.st.frags);
	return 0;
}

static int test_hds_off(void)
{
	struct devmemtcp_buf *buf = new_udmabuf();
	struct devmemtcp_binding *b = NULL;
	int ifindex = (int)if_nametoindex(VM_RX_IF);
	uint32_t q = 3;
	int ret;

	VM_CHECK(buf, "udmabuf");
	/* nothing has turned header split on: the simulated NIC starts with it off */
	ret = devmemtcp_bind_rx(ctx, ifindex, &q, 1, buf, NULL, &b);
	printf("hds-off: bind-rx returned %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	if (vm_kernel_version() >= 614) {
		VM_CHECK(ret == -EINVAL, "expected -EINVAL, got %d", ret);
		VM_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx),
				 "bind-rx on dsim1 failed: enable header split on dsim1: ethtool -G dsim1 tcp-data-split on (or use devmemtcp_nic_open()) (kernel: \"tcp-data-split is disabled\")"),
			 "message: %s", devmemtcp_ctx_errmsg(ctx));
	} else {
		/* 6.12 does not check header split: the driver's page pool
		 * without unreadable-netmem support refuses the provider */
		VM_CHECK(ret < 0, "6.12: bind with header split off succeeded");
		VM_CHECK(strstr(devmemtcp_ctx_errmsg(ctx), "bind-rx on dsim1 failed") != NULL,
			 "message: %s", devmemtcp_ctx_errmsg(ctx));
	}
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	return 0;
}

static int test_corrupt(void)
{
	const uint64_t target = 5 * 1000 * 1000 + 7;	/* 1-based payload byte */
	struct devmemtcp_buf *buf = new_udmabuf();
	uint32_t q = 3;
	int port = 6500;
	struct devmemtcp_nic *nic = prepare(&q, 1, &port, 1, buf);
	struct rx_args a;
	uint32_t id;

	VM_CHECK(buf && nic, "setup");
	id = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	VM_CHECK(vm_sim_knob(VM_RX_IF, "corrupt_offset", target) == 0, "debugfs knob");
	if (one_flow(port, 8 << 20, buf, id, q, true, &a))
		return 1;
	printf("corrupt: validation reports stream offset %lld (got 0x%02x, expected 0x%02x)\n",
	       (long long)a.r.bad_at, a.r.got, a.r.want);
	VM_CHECK(a.r.bad_at == (int64_t)(target - 1), "bad byte reported at %lld, corrupted %llu",
		 (long long)a.r.bad_at, (unsigned long long)(target - 1));
	VM_CHECK((a.r.got ^ a.r.want) == 0xff, "corruption pattern");
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close");
	devmemtcp_buf_free(buf);
	return 0;
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
	{ "corrupt", test_corrupt },
};

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "all";
	int failed = 0, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (vm_topology() || vm_enter("dmtB")) {
		fprintf(stderr, "cannot set up the namespaces (is devmemsim loaded?)\n");
		return 1;
	}
	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(which, "all") && strcmp(which, tests[i].name))
			continue;
		printf("--- %s\n", tests[i].name);
		int r = tests[i].fn();
		printf("%s %s\n", r ? "FAIL" : "PASS", tests[i].name);
		failed += r != 0;
		ran++;
	}
	devmemtcp_ctx_free(ctx);
	if (!ran) {
		fprintf(stderr, "no test named %s\n", which);
		return 2;
	}
	printf("%d passed, %d failed\n", ran - failed, failed);
	return failed ? 1 : 0;
}
