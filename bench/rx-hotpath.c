// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Receive hot path benchmark: the library's processing of a recvmsg
 * (control-message parsing, token bookkeeping, address lookup) + release
 * batching per 4 KiB fragment, on control buffers laid out as the kernel
 * lays them out (no devmem NIC needed).  Three ways to return
 * tokens are compared in the same run:
 *
 *   library   merged ranges, batches of up to 1024 frags (this library)
 *   ncdevmem  one SO_DEVMEM_DONTNEED per fragment
 *   kperf     unmerged batches of 128 single-token entries
 *
 * Token returns go to the kernel for real: SO_DEVMEM_DONTNEED on a TCP
 * socket that holds no tokens, which costs a full syscall and frees
 * nothing (the kernel skips unknown tokens).  With --no-syscall a counter
 * stands in for the kernel, isolating the user-space cost.
 *
 * usage: rx-hotpath [--frags N] [--batch F] [--mode all|library|ncdevmem|kperf]
 *                   [--no-syscall]
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmsgfixture.h"	/* tests/lib: the receive processing and its cmsgs */

#define CMSG_FRAG CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))

static int tcp_fd = -1;
static bool use_syscall = true;
static uint64_t syscalls;

static int dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	syscalls++;
	if (use_syscall) {
		int ret = setsockopt(tcp_fd, SOL_SOCKET, SO_DEVMEM_DONTNEED, t,
				     (socklen_t)(n * sizeof(*t)));
		if (ret < 0)
			return -errno;
	}
	/* report everything freed so the library does not retry */
	uint32_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += t[i].token_count;
	return (int)c;
}

/* One recvmsg worth of control messages: batch fragments of 4 KiB with
 * consecutive tokens starting at tok, scattered over the dma-buf. */
static void fill_ctrl(struct msghdr *msg, char *ctrl, uint32_t batch,
		      uint32_t tok)
{
	struct cmsghdr *cm;

	msg->msg_control = ctrl;
	msg->msg_controllen = batch * CMSG_FRAG;
	cm = CMSG_FIRSTHDR(msg);
	for (uint32_t i = 0; i < batch; i++, cm = CMSG_NXTHDR(msg, cm)) {
		struct dmt_dmabuf_cmsg d = {
			.frag_offset = (uint64_t)((tok + i) * 7919u % 16384u) * 4096,
			.frag_size = 4096,
			.frag_token = tok + i,
			.dmabuf_id = 1,
		};
		cmsgfix_dmabuf(cm, &d);
	}
}

/* A connected TCP socket over loopback (the receive handle wants one); the
 * other end stays open, never written to. */
static int tcp_connected(int *peer)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), fd;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, len) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len))
		return -1;
	*peer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*peer < 0 || connect(*peer, (struct sockaddr *)&sa, len))
		return -1;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	return fd;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum mode { LIBRARY, NCDEVMEM, KPERF };
static const char *mode_name[] = { "library", "ncdevmem", "kperf" };

/*
 * Run frags fragments through the library's receive processing (the code
 * devmemtcp_rx_recv runs after recvmsg: parse, token accounting, address
 * lookup, statistics) and then one of the three release strategies.
 * Returns ns.
 */
static double run(enum mode mode, uint64_t frags, uint32_t batch,
		  uint64_t *calls)
{
	struct devmemtcp_segment seg = { 0, 64ull << 20, 0x7f0000000000 };
	struct devmemtcp_frag *f = calloc(batch, sizeof(*f));
	char *ctrl = aligned_alloc(64, batch * CMSG_FRAG);
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	struct dmt_tokens *t;
	struct msghdr msg = { 0 };
	double t0, t1;

	/* a buffer object with the segment table only: no dma-buf needed */
	if (devmemtcp_ctx_new(NULL, &ctx) ||
	    dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf))
		abort();
	buf->size = seg.len;
	if (dmt_buf_set_segments(buf, &seg, 1) ||
	    devmemtcp_rx_new(ctx, tcp_fd, NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, 1, buf))
		abort();
	t = dmt_rx_tokens(rx);
	t->dontneed = dontneed;
	syscalls = 0;
	/* the kernel reuses small token numbers: the pool cycles */
	fill_ctrl(&msg, ctrl, batch, 0);
	t0 = now();
	for (uint64_t done = 0; done < frags; done += batch) {
		int n = dmt_rx_process(rx, &msg, (size_t)batch * 4096, f, batch);

		if (n != (int)batch || !f[0].addr)
			abort();
		switch (mode) {
		case LIBRARY:
			if (devmemtcp_rx_release(rx, f, (size_t)n) ||
			    devmemtcp_rx_flush(rx) < 0)	/* before the next recv */
				abort();
			break;
		case NCDEVMEM:
			for (int i = 0; i < n; i++) {
				struct dmt_dmabuf_token one = { f[i].token, 1 };
				size_t bad;

				dmt_tokens_take(t, &f[i], 1, &bad);
				dontneed(NULL, &one, 1);
			}
			break;
		case KPERF: {
			struct dmt_dmabuf_token v[128];
			size_t bad, k = 0;

			dmt_tokens_take(t, f, (size_t)n, &bad);
			for (int i = 0; i < n; i++) {
				v[k].token_start = f[i].token;
				v[k++].token_count = 1;
				if (k == 128 || i == n - 1) {
					dontneed(NULL, v, k);
					k = 0;
				}
			}
			break;
		}
		}
	}
	t1 = now();
	*calls = syscalls;
	devmemtcp_rx_free(rx);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	free(f);
	free(ctrl);
	return t1 - t0;
}

int main(int argc, char **argv)
{
	uint64_t frags = 4u << 20;
	uint32_t batch = 256;	/* 1 MiB per recvmsg */
	const char *only = "all";
	double ns[3] = { 0 };
	uint64_t calls[3] = { 0 };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--frags") && i + 1 < argc)
			frags = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = (uint32_t)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--no-syscall"))
			use_syscall = false;
		else {
			fprintf(stderr, "usage: %s [--frags N] [--batch F] [--mode all|library|ncdevmem|kperf] [--no-syscall]\n",
				argv[0]);
			return 2;
		}
	}
	if (!batch || batch > 4096)
		batch = 256;
	frags = (frags + batch - 1) / batch * batch;
	int peer = -1;

	tcp_fd = tcp_connected(&peer);
	if (tcp_fd < 0) {
		fprintf(stderr, "rx-hotpath: a loopback TCP connection: %s\n", strerror(errno));
		return 1;
	}
	if (use_syscall) {
		struct dmt_dmabuf_token probe = { 1, 1 };
		if (setsockopt(tcp_fd, SOL_SOCKET, SO_DEVMEM_DONTNEED, &probe,
			       sizeof(probe)) < 0) {
			printf("# this kernel has no SO_DEVMEM_DONTNEED (%s): counting calls instead of making them\n",
			       strerror(errno));
			use_syscall = false;
		}
	}
	printf("# rx hot path: %llu fragments of 4 KiB per run (best of 5), %u per recvmsg, token return %s\n",
	       (unsigned long long)((frags / 5 + batch - 1) / batch * batch), batch,
	       use_syscall ? "through the real SO_DEVMEM_DONTNEED syscall" : "counted, not made");
	printf("%-10s %12s %14s %16s\n", "mode", "ns/frag", "syscalls/frag", "frags/syscall");
	uint64_t per_run = (frags / 5 + batch - 1) / batch * batch;

	/* five rounds, modes interleaved, best of each: this machine is
	 * shared, and the minimum is the cost without interference */
	for (int rep = 0; rep < 5; rep++) {
		for (int m = 0; m < 3; m++) {
			double t;

			if (strcmp(only, "all") && strcmp(only, mode_name[m]))
				continue;
			t = run((enum mode)m, per_run, batch, &calls[m]);
			if (!rep || t < ns[m])
				ns[m] = t;
		}
	}
	frags = per_run;
	for (int m = 0; m < 3; m++) {
		if (strcmp(only, "all") && strcmp(only, mode_name[m]))
			continue;
		printf("%-10s %12.2f %14.5f %16.1f\n", mode_name[m], ns[m] / (double)frags,
		       (double)calls[m] / (double)frags,
		       calls[m] ? (double)frags / (double)calls[m] : 0.0);
	}
	if (!strcmp(only, "all")) {
		printf("ratio ncdevmem/library time: %.1fx, syscalls: %.0fx\n",
		       ns[1] / ns[0], (double)calls[1] / (double)calls[0]);
		printf("ratio kperf/library    time: %.1fx, syscalls: %.1fx\n",
		       ns[2] / ns[0], (double)calls[2] / (double)calls[0]);
	}
	close(tcp_fd);
	close(peer);
	return 0;
}
