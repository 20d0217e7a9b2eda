// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * io_uring zcrx against devmem recvmsg + SO_DEVMEM_DONTNEED, in the QEMU
 * guest with the simulated NIC (run as root, like the vm tests):
 *
 *   bench-zcrx [MiB [LINE]]     (default 8 MiB; LINE 1-4: only that line of
 *                               part 1, e.g. under strace -c to check the counts)
 *
 * Counts, not times (emulation makes times meaningless):
 *  1. system calls per fragment of the receive path, from the library's
 *     counters (recvmsg and DONTNEED calls of devmemtcp_rx_stats;
 *     io_uring_enter, getsockopt and ring setup of devmemtcp_zcrx_stats):
 *     devmem with one DONTNEED per fragment (ncdevmem's way), devmem with
 *     the library's batches, zcrx into a user-memory and a dma-buf area;
 *  2. the refill ring while the application holds fragments (a sliding
 *     window of H fragments of a 2048-buffer area): entries written,
 *     releases that waited for room, the ring's fill, receives re-armed,
 *     and the queue's allocation failures (qstats) that holding causes,
 *     with devmem at the same hold as the reference.
 * Every byte is still checked against the pattern.  On kernels before
 * 6.15 only the devmem lines run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <net/if.h>

#include "devmemtcp.h"
#include "harness.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define BUF_SIZE (8u << 20)	/* 2048 buffers: 8 MiB of MSS frames fill it 1.4 times */
#define MAX_FRAGS 256
#define LINEAR (4u << 20)
#define QUEUE 3
#define HOLD_MAX (BUF_SIZE / 4096)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct devmemtcp_ctx *ctx;
static int ifindex;
static uint8_t *linear;
static struct devmemtcp_frag *held;	/* FIFO of held fragments */

struct run {
	const char *name;
	bool zcrx;
	uint32_t zflags;	/* zcrx_opts.flags */
	uint32_t rq_entries;
	uint32_t batch;		/* rx_opts.release_batch */
	size_t hold;		/* fragments held before the oldest goes back */
	uint64_t bytes;
	/* results */
	struct devmemtcp_rx_stats rs;
	struct devmemtcp_zcrx_stats zs;
	uint64_t alloc_fail, drops;
	uint64_t syscalls;
	uint64_t stalls;	/* the held window given back: no data for STALL_MS */
};

/* A receive that waits this long while fragments are held gives them all
 * back: out-of-order segments may hold every buffer the held ones leave,
 * and then the segment the kernel dropped finds none when it comes again
 * (devmemtcp_zcrx_new(3), "Holding buffers") */
#define STALL_MS 200

struct rig {
	struct devmemtcp_nic *nic;
	struct devmemtcp_buf *buf;
	struct devmemtcp_zcrx *z;
	uint32_t binding;
};

static int rig_open(struct rig *g, const struct run *r, int port)
{
	DEVMEMTCP_OPTS(zcrx_opts, zo, .flags = r->zflags, .rq_entries = r->rq_entries);
	struct devmemtcp_flow flow;
	uint32_t q = QUEUE;
	char text[96];

	memset(g, 0, sizeof(*g));
	T_CHECK(t_udmabuf(ctx, BUF_SIZE, &g->buf) == 0, "udmabuf");
	snprintf(text, sizeof(text), "tcp4 dst-ip %s dst-port %d", VM_RX_ADDR4, port);
	T_CHECK(devmemtcp_flow_parse(text, &flow) == 0, "flow");
	DEVMEMTCP_OPTS(nic_opts, no, .queues = &q, .nqueues = 1, .flows = &flow,
		       .nflows = 1, .buf = r->zcrx ? NULL : g->buf);
	T_CHECK(devmemtcp_nic_open(ctx, VM_RX_IF, &no, &g->nic) == 0, "nic_open: %s",
		devmemtcp_ctx_errmsg(ctx));
	if (r->zcrx)
		T_CHECK(devmemtcp_zcrx_new(ctx, ifindex, QUEUE, g->buf, &zo, &g->z) == 0,
			"zcrx_new: %s", devmemtcp_ctx_errmsg(ctx));
	else
		g->binding = devmemtcp_binding_id(devmemtcp_nic_binding(g->nic));
	return 0;
}

static int rig_close(struct rig *g)
{
	devmemtcp_zcrx_free(g->z);
	T_CHECK(devmemtcp_nic_close(g->nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(g->buf);
	return 0;
}

static int qstats(uint64_t *alloc_fail, uint64_t *drops)
{
	struct devmemtcp_qstats q = { .sz = sizeof(q) };

	T_CHECK(devmemtcp_qstats_get(ctx, ifindex, DEVMEMTCP_QUEUE_RX, QUEUE, &q) == 0,
		"qstats: %s", devmemtcp_ctx_errmsg(ctx));
	*alloc_fail = q.rx_alloc_fail == UINT64_MAX ? 0 : q.rx_alloc_fail;
	*drops = q.rx_hw_drops == UINT64_MAX ? 0 : q.rx_hw_drops;
	return 0;
}

/* Check n fragments against the stream at *pos (linear ones in linear). */
static int check(struct devmemtcp_buf *buf, const struct devmemtcp_frag *f, int n,
		 uint64_t *pos)
{
	static uint8_t tmp[65536];

	for (int i = 0; i < n; i++) {
		const uint8_t *src = tmp;

		if (f[i].flags & DEVMEMTCP_FRAG_LINEAR)
			src = linear + f[i].offset;
		else
			T_CHECK(devmemtcp_buf_read(buf, f[i].offset, tmp, f[i].len) == 0,
				"%s", devmemtcp_buf_errmsg(buf));
		T_CHECK(pattern_check(src, f[i].len, *pos, PERIOD) < 0,
			"bad byte near stream offset %llu", (unsigned long long)*pos);
		*pos += f[i].len;
	}
	return 0;
}

/* One transfer of r->bytes, holding up to r->hold fragments. */
static int run_one(struct run *r, int port)
{
	DEVMEMTCP_OPTS(rx_opts, ro, .release_batch = r->batch);
	struct devmemtcp_frag frags[MAX_FRAGS];
	struct devmemtcp_rx *rx = NULL;
	uint64_t pos = 0, af0, dr0;
	size_t nheld = 0;
	struct vm_sender *snd;
	struct rig g;
	int lfd, fd, n;

	T_TRY(rig_open(&g, r, port));
	ro.zcrx = g.z;
	T_TRY(qstats(&af0, &dr0));
	lfd = t_listen(VM_RX_ADDR4, port);
	T_CHECK(lfd >= 0, "listen");
	snd = vm_send_start(VM_RX_ADDR4, port, r->bytes, PERIOD);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	T_CHECK(fd >= 0 && devmemtcp_rx_new(ctx, fd, &ro, &rx) == 0, "rx_new: %s",
		devmemtcp_ctx_errmsg(ctx));
	if (!r->zcrx)
		T_CHECK(devmemtcp_rx_add_buf(rx, g.binding, g.buf) == 0, "add_buf");
	if (r->hold) {
		struct timeval tv = { 0, STALL_MS * 1000 };

		T_CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0,
			"SO_RCVTIMEO");
	}
	for (;;) {
		size_t over;

		n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, linear, LINEAR);
		if (n == -EAGAIN) {
			/* a stall: every held fragment goes back */
			over = nheld;
			r->stalls += nheld > 0;
		} else if (n <= 0) {
			break;
		} else {
			T_TRY(check(g.buf, frags, n, &pos));
			memcpy(held + nheld, frags, (size_t)n * sizeof(*frags));
			nheld += (size_t)n;
			/* the oldest beyond the window go back, in order */
			over = nheld > r->hold ? nheld - r->hold : 0;
		}
		if (over) {
			T_CHECK(devmemtcp_rx_release(rx, held, over) == 0, "release: %s",
				devmemtcp_rx_errmsg(rx));
			memmove(held, held + over, (nheld - over) * sizeof(*held));
			nheld -= over;
		}
	}
	T_CHECK(n == 0, "recv: %s", devmemtcp_rx_errmsg(rx));
	T_CHECK(devmemtcp_rx_release(rx, held, nheld) == 0 && devmemtcp_rx_flush(rx) >= 0,
		"release");
	T_CHECK(pos == r->bytes, "%llu of %llu bytes", (unsigned long long)pos,
		(unsigned long long)r->bytes);
	r->rs.sz = sizeof(r->rs);
	devmemtcp_rx_stats(rx, &r->rs);
	if (g.z) {
		r->zs.sz = sizeof(r->zs);
		devmemtcp_zcrx_stats(g.z, &r->zs);
		r->syscalls = r->zs.syscalls;
	} else {
		r->syscalls = r->rs.recv_calls + r->rs.dontneed_calls;
	}
	T_TRY(qstats(&r->alloc_fail, &r->drops));
	r->alloc_fail -= af0;
	r->drops -= dr0;
	devmemtcp_rx_free(rx);
	close(fd);
	close(lfd);
	T_CHECK(vm_send_wait(snd) == 0, "sender");
	return rig_close(&g);
}

static double per_frag(uint64_t n, const struct run *r)
{
	return r->rs.frags ? (double)n / (double)r->rs.frags : 0;
}

static int syscalls_table(uint64_t mib, bool have_zcrx, int only)
{
	struct run runs[] = {
		{ "devmem, one DONTNEED per fragment", false, 0, 0, 1, 0, 0 },
		{ "devmem, library batches", false, 0, 0, 0, 0, 0 },
		{ "zcrx, user-memory area", true, 0, 0, 0, 0, 0 },
		{ "zcrx, dma-buf area", true, DEVMEMTCP_ZCRX_DMABUF_AREA, 0, 0, 0, 0 },
	};
	double base;

	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		if ((runs[i].zcrx && !have_zcrx) || (only && only != (int)i + 1))
			continue;
		runs[i].bytes = mib << 20;
		T_TRY(run_one(&runs[i], 7600 + (int)i));
	}
	base = per_frag(runs[1].syscalls, &runs[1]);
	printf("\n1. System calls per fragment of the receive path, %llu MiB each\n\n",
	       (unsigned long long)mib);
	printf("| receive | frags | recvmsg | DONTNEED | io_uring_enter | other | syscalls/frag | vs devmem batches |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		struct run *r = &runs[i];
		double spf = per_frag(r->syscalls, r);

		if (r->zcrx && !have_zcrx) {
			printf("| %s | - | - | - | - | - | needs Linux 6.15 (this is %s) | - |\n",
			       r->name, t_kernel_release());
			continue;
		}
		if (only && only != (int)i + 1)
			continue;
		printf("| %s | %llu | %llu | %llu | %llu | %llu | %.4f | %.2fx |\n", r->name,
		       (unsigned long long)r->rs.frags,
		       (unsigned long long)(r->zcrx ? 0 : r->rs.recv_calls),
		       (unsigned long long)(r->zcrx ? 0 : r->rs.dontneed_calls),
		       (unsigned long long)r->zs.enter_calls,
		       (unsigned long long)(r->zcrx ? r->zs.syscalls - r->zs.enter_calls : 0),
		       spf, base > 0 ? spf / base : 0.0);
	}
	return 0;
}

static int refill_table(uint64_t mib)
{
	struct run runs[] = {
		{ "zcrx", true, 0, 0, 0, 0, 0 },
		{ "zcrx", true, 0, 0, 0, 512, 0 },
		{ "zcrx", true, 0, 0, 0, 1536, 0 },
		{ "zcrx", true, 0, 0, 0, 1792, 0 },
		{ "zcrx, 64-entry ring", true, 0, 64, 0, 1536, 0 },
		{ "devmem", false, 0, 0, 0, 1536, 0 },
		{ "devmem", false, 0, 0, 0, 1792, 0 },
	};

	printf("\n2. Refill under held buffers: %llu MiB, an area of %u buffers, the newest H fragments held (stalls: all given back after %d ms without data, when out-of-order segments held the rest)\n\n",
	       (unsigned long long)mib, BUF_SIZE / 4096, STALL_MS);
	printf("| receive | H | frags | held max | refills | waited | waiting max | ring max | rearms | rx-alloc-fail | drops | io_uring_enter/frag | stalls |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		struct run *r = &runs[i];

		r->bytes = mib << 20;
		T_TRY(run_one(r, 7700 + (int)i));
		if (!r->zcrx) {
			printf("| %s | %zu | %llu | %llu | %llu (DONTNEED calls %llu) | - | - | - | - | %llu | %llu | - | %llu |\n",
			       r->name, r->hold, (unsigned long long)r->rs.frags,
			       (unsigned long long)r->rs.tokens_outstanding_max,
			       (unsigned long long)r->rs.tokens_released,
			       (unsigned long long)r->rs.dontneed_calls,
			       (unsigned long long)r->alloc_fail, (unsigned long long)r->drops,
			       (unsigned long long)r->stalls);
			continue;
		}
		printf("| %s | %zu | %llu | %llu | %llu | %llu | %llu | %llu / %u | %llu | %llu | %llu | %.4f | %llu |\n",
		       r->name, r->hold, (unsigned long long)r->zs.frags,
		       (unsigned long long)r->zs.held_max, (unsigned long long)r->zs.refills,
		       (unsigned long long)r->zs.refill_queued,
		       (unsigned long long)r->zs.refill_queue_max,
		       (unsigned long long)r->zs.refill_ring_max, r->zs.rq_entries,
		       (unsigned long long)r->zs.rearms, (unsigned long long)r->alloc_fail,
		       (unsigned long long)r->drops, per_frag(r->zs.enter_calls, r),
		       (unsigned long long)r->stalls);
		T_CHECK(r->zs.held_max >= r->hold, "held max %llu < %zu",
			(unsigned long long)r->zs.held_max, r->hold);
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 0) : 8;
	int only = argc > 2 ? atoi(argv[2]) : 0;
	bool have = t_kernel_version() >= 615;
	double t0 = t_now();
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	T_CHECK(mib > 0 && mib <= 1024 && only >= 0 && only <= 4,
		"usage: %s [MiB [LINE]]", argv[0]);
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0 && vm_enter(VM_RX_NS) == 0,
		"cannot set up the namespaces (is devmemsim loaded?)");
	T_CHECK(devmemtcp_ctx_new(NULL, &ctx) == 0, "ctx");
	ifindex = (int)if_nametoindex(VM_RX_IF);
	linear = malloc(LINEAR);
	held = calloc(HOLD_MAX + MAX_FRAGS, sizeof(*held));
	T_CHECK(linear && held, "memory");
	printf("bench-zcrx on %s, simulated NIC %s queue %d, 4 KiB buffers\n",
	       t_kernel_release(), VM_RX_IF, QUEUE);
	ret = syscalls_table(mib, have, only);
	if (!ret && have && !only)
		ret = refill_table(mib);
	else if (!ret)
		printf("\n2. Refill under held buffers: needs Linux 6.15 (this is %s)\n",
		       t_kernel_release());
	printf("\nbench-zcrx: %s in %.1f s\n", ret ? "FAIL" : "done", t_now() - t0);
	free(linear);
	free(held);
	devmemtcp_ctx_free(ctx);
	return ret ? T_EXIT_FAIL : T_EXIT_PASS;
}
