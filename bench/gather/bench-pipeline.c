// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Pipeline benchmark: one CPU thread doing what a data loader does with
 * each receive, on the GPU:
 *
 *   1. the library's receive processing (what devmemtcp_rx_recv does after
 *      recvmsg: control messages parsed, tokens recorded, device addresses
 *      looked up) of synthetic control messages laid out as the kernel
 *      lays them out, fragments of 4 KiB at random pages of a GPU buffer;
 *   2. devmemtcp_gpu_gather of the receive into the next slice of a
 *      destination ring;
 *   3. devmemtcp_gpu_release_after on the same stream, and
 *      devmemtcp_rx_flush (which devmemtcp_rx_recv does before it blocks):
 *      completed fences hand their tokens to a counting DONTNEED hook.
 *      Coalesced rows release COALESCE receives at a time, with one
 *      release_after (one fence) after the last one's gather; gather_release
 *      rows do 2 and 3 in one devmemtcp_gpu_gather_release (the gather's
 *      kernel signals the fence), then flush.
 *
 * The recvmsg system call itself is not run (there is no devmem NIC here).
 * Per receive size and gather variant: receives and GB/s sustained (wall
 * time), GB/s per CPU core (bytes over the thread's CPU time), CPU µs per
 * receive and its split between the three steps.  Baselines in the same
 * run: steps 1 and 3 with an immediate release and no GPU work, and a
 * contiguous cuMemcpyDtoDAsync of the receive's size instead of the gather.
 *
 *   bench-pipeline [-d device] [-T seconds per row]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmsgfixture.h"	/* tests/lib: the receive processing and its cmsgs */
#include "common.h"

#define NIC_BUF (256ull << 20)	/* the GPU buffer the NIC writes */
#define RING 64			/* destination slices */
#define CTRLS 256		/* control buffers, used in turn */
#define IN_FLIGHT 128		/* receives queued on the GPU at most */
#define CMSG_FRAG CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))
#define COALESCE 8		/* receives behind one release_after */
#define MAX_FRAGS 1024		/* per receive */

static struct bench B;
static double seconds = 1.0;
static uint64_t freed;

static int dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	uint32_t c = 0;

	(void)arg;
	for (size_t i = 0; i < n; i++)
		c += t[i].token_count;
	freed += c;
	return (int)c;
}

/* A connected TCP socket on loopback: the receiver wants a stream. */
static int tcp_pair(int *peer, int *lst)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int c;

	*lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*lst < 0 || c < 0 || bind(*lst, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(*lst, 1) ||
	    getsockname(*lst, (struct sockaddr *)&a, &len) ||
	    connect(c, (struct sockaddr *)&a, sizeof(a)))
		abort();
	*peer = accept(*lst, NULL, NULL);
	if (*peer < 0)
		abort();
	return c;
}

/* CTRLS control buffers of n fragments each; tokens are unique across
 * all of them, so a token is reused only CTRLS receives later. */
static char *make_ctrls(uint32_t n)
{
	char *all = aligned_alloc(64, (size_t)CTRLS * n * CMSG_FRAG);

	if (!all)
		abort();
	for (uint32_t k = 0; k < CTRLS; k++) {
		char *ctrl = all + (size_t)k * n * CMSG_FRAG;

		for (uint32_t i = 0; i < n; i++) {
			struct cmsghdr *cm = (struct cmsghdr *)(ctrl + i * CMSG_FRAG);
			struct dmt_dmabuf_cmsg d = {
				.frag_offset = rnd() % (NIC_BUF / 4096) * 4096,
				.frag_size = 4096,
				.frag_token = k * n + i,
				.dmabuf_id = 1,
			};

			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_DEVMEM_DMABUF;
			cm->cmsg_len = CMSG_LEN(sizeof(d));
			memcpy(CMSG_DATA(cm), &d, sizeof(d));
		}
	}
	return all;
}

/* K_GATHER_REL: devmemtcp_gpu_gather_release, then a flush */
enum kind { K_NONE, K_D2D, K_GATHER, K_GATHER_REL };

struct row {
	double wall, cpu;
	uint64_t receives;
	double us[3];		/* median wall µs of the three steps */
	bool ok;
};

/* Release the cnt fragments at frags (behind the stream's work unless
 * kind is K_NONE), then flush. */
static void release(struct devmemtcp_gpu *g, enum kind kind,
		    struct devmemtcp_rx *rx, const struct devmemtcp_frag *frags,
		    size_t cnt)
{
	int ret = 0;

	if (cnt)
		ret = kind == K_NONE
			      ? devmemtcp_rx_release(rx, frags, cnt)
			      : devmemtcp_gpu_release_after(g, rx, frags, cnt,
							    B.st);
	if (ret < 0 || devmemtcp_rx_flush(rx) < 0) {
		fprintf(stderr, "release: %s / %s\n", devmemtcp_rx_errmsg(rx),
			g ? devmemtcp_gpu_errmsg(g) : "");
		exit(1);
	}
}

/* Receive i: process its control messages, gather (or copy), release
 * (with coalesce > 1: the fragments wait in all, and every coalesce-th
 * receive releases those of the last coalesce receives); the wall time of
 * the three steps into *t[0..2] unless t is NULL. */
static void one_receive(struct devmemtcp_gpu *g, enum kind kind, uint32_t n,
			struct devmemtcp_rx *rx, const char *ctrls, uint64_t i,
			struct devmemtcp_frag *all, uint32_t coalesce,
			double *const *t)
{
	struct devmemtcp_frag *frags = all + (i % coalesce) * n;
	const uint64_t size = (uint64_t)n * 4096;
	struct msghdr msg = {
		.msg_control = (void *)(ctrls + (i % CTRLS) * n * CMSG_FRAG),
		.msg_controllen = n * CMSG_FRAG,
	};
	CUdeviceptr to = B.dst + (i % RING) * size;
	double a, b, c;

	a = now_s();
	if (dmt_rx_process(rx, &msg, size, frags, n) != (int)n)
		abort();
	b = now_s();
	if (kind == K_GATHER) {
		gather(&B, g, frags, n, to, size, B.st);
	} else if (kind == K_GATHER_REL) {
		struct devmemtcp_gpu_iov d = { to, size };

		if (devmemtcp_gpu_gather_release(g, rx, frags, n, &d, 1, B.st)) {
			fprintf(stderr, "gather_release: %s\n",
				devmemtcp_gpu_errmsg(g));
			exit(1);
		}
	} else if (kind == K_D2D)
		CK(B.cu->cuMemcpyDtoDAsync(to, B.src + (i % 64) * size, size,
					   B.st));
	c = now_s();
	if (kind == K_GATHER_REL) {
		if (devmemtcp_rx_flush(rx) < 0)
			exit(1);
	} else {
		release(g, kind, rx, all,
			(i + 1) % coalesce ? 0 : (size_t)coalesce * n);
	}
	if (t) {
		*t[0] = b - a;
		*t[1] = c - b;
		*t[2] = now_s() - c;
	}
}

/* Run receives of n fragments for `seconds`, coalesce at a time released. */
static void run(struct devmemtcp_gpu *g, enum kind kind, uint32_t n,
		uint32_t coalesce, struct devmemtcp_rx *rx, const char *ctrls,
		struct row *row)
{
	static struct devmemtcp_frag frags[COALESCE * MAX_FRAGS];
	static double st[3][1 << 16];
	const uint64_t size = (uint64_t)n * 4096;
	CUevent marks[IN_FLIGHT / 32];
	double t_end, c0, w0;
	uint64_t i = 0;
	int ns = 0;

	for (int m = 0; m < IN_FLIGHT / 32; m++)
		CK(B.cu->cuEventCreate(&marks[m], CU_EVENT_DISABLE_TIMING));
	freed = 0;
	w0 = now_s();
	c0 = thread_cpu_s();
	t_end = w0 + seconds;
	for (;; i++) {
		if (!(i % 256) && now_s() > t_end)
			break;
		/* at most IN_FLIGHT receives queued: tokens come back in
		 * time to be received again CTRLS receives later */
		if (kind != K_NONE && !(i % 32)) {
			CUevent *e = &marks[(i / 32) % (IN_FLIGHT / 32)];

			if (i >= IN_FLIGHT)
				CK(B.cu->cuEventSynchronize(*e));
			CK(B.cu->cuEventRecord(*e, B.st));
		}
		one_receive(g, kind, n, rx, ctrls, i, frags, coalesce,
			    ns < (1 << 16) ? (double *[]){ &st[0][ns], &st[1][ns],
							   &st[2][ns] }
					   : NULL);
		ns += ns < (1 << 16);
	}
	/* the receives of an incomplete last group */
	if (kind != K_GATHER_REL)
		release(g, kind, rx, frags, (size_t)(i % coalesce) * n);
	CK(B.cu->cuStreamSynchronize(B.st));
	row->wall = now_s() - w0;
	row->cpu = thread_cpu_s() - c0;
	row->receives = i;
	for (int k = 0; k < 3; k++)
		row->us[k] = median(st[k], ns) * 1e6;
	/* the last receive's bytes are in its slice */
	row->ok = true;
	if (kind == K_GATHER || kind == K_GATHER_REL) {
		uint8_t *got = malloc(size);
		uint64_t pos = 0;

		if (!got)
			abort();
		const struct devmemtcp_frag *last =
			frags + ((i - 1) % coalesce) * n;

		CK(B.cu->cuMemcpyDtoH(got, B.dst + ((i - 1) % RING) * size, size));
		for (uint32_t k = 0; k < n; k++) {
			if (bench_same(&B, got + pos, last[k].addr - B.src,
				       last[k].len))
				row->ok = false;
			pos += last[k].len;
		}
		free(got);
	}
	while (devmemtcp_rx_release_all(rx) > 0)
		;
	for (int m = 0; m < IN_FLIGHT / 32; m++)
		B.cu->cuEventDestroy(marks[m]);
}

static void print_row(uint32_t n, const char *what, const struct row *r)
{
	double bytes = (double)r->receives * n * 4096;

	printf("| %u KiB (%u frags) | %s | %.0f k | **%.1f** | **%.1f** | %.2f | %.2f / %.2f / %.2f | %s |\n",
	       n * 4, n, what, r->receives / r->wall / 1e3, bytes / r->wall / 1e9,
	       bytes / r->cpu / 1e9, r->cpu / r->receives * 1e6, r->us[0], r->us[1],
	       r->us[2], r->ok ? "bytes equal" : "MISMATCH");
	fflush(stdout);
}

/* A receiver on a connected socket (fds: its three sockets) with the NIC's
 * buffer, one segment over the GPU source memory, as binding 1; its token
 * returns go to the counting hook. */
static struct devmemtcp_rx *receiver(struct devmemtcp_buf **bufp, int *fds)
{
	struct devmemtcp_segment seg = { 0, NIC_BUF, B.src };
	struct devmemtcp_rx *rx;

	if (dmt_buf_alloc(B.ctx, DEVMEMTCP_PROVIDER_IMPORT, bufp))
		abort();
	(*bufp)->size = NIC_BUF;
	if (dmt_buf_set_segments(*bufp, &seg, 1))
		abort();
	fds[0] = tcp_pair(&fds[1], &fds[2]);
	if (devmemtcp_rx_new(B.ctx, fds[0], NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, 1, *bufp)) {
		fprintf(stderr, "rx: %s\n", devmemtcp_ctx_errmsg(B.ctx));
		return NULL;
	}
	dmt_rx_tokens(rx)->dontneed = dontneed;
	return rx;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 16, 64, 256, 1024 };
	static const struct variant vs[] = {
		{ "gather, inline launch with programmatic dependence (default)" },
		{ "gather, inline through a graph (DEVMEMTCP_GPU_GRAPHS)",
		  .flags = DEVMEMTCP_GPU_GRAPHS },
		{ "gather, inline by plain cuLaunchKernel", .no_pdl = true },
	};
	enum { NV = sizeof(vs) / sizeof(vs[0]) };
	struct devmemtcp_gpu *g[NV];
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	int opt, status, fds[3], bad = 0;

	while ((opt = getopt(argc, argv, "d:T:h")) != -1) {
		switch (opt) {
		case 'd':
			B.device = atoi(optarg);
			break;
		case 'T':
			seconds = atof(optarg);
			if (seconds <= 0 || seconds > 60)
				seconds = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-d device] [-T seconds per row]\n",
				argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	status = bench_open(&B, B.device, NIC_BUF, RING * 4096ull * 1024);
	if (status >= 0)
		return status;
	bench_header(&B, "Pipeline benchmark");
	printf("\n## Pipeline: receive processing + gather + release_after, one CPU thread\n\n");
	printf("- %.1f s per row; 4 KiB fragments at random pages of a %llu MiB GPU buffer; destination: a ring of %d slices; at most %d receives queued on the GPU\n",
	       seconds, (unsigned long long)(NIC_BUF >> 20), RING, IN_FLIGHT);
	printf("- GB/s per CPU core = bytes / CPU time of the thread; CPU µs per receive likewise; the steps' µs are medians of wall time per receive\n");
	printf("- not counted: the recvmsg system call (no devmem NIC here)\n\n");

	rx = receiver(&buf, fds);
	if (!rx)
		return 1;
	for (int v = 0; v < NV; v++)
		g[v] = variant_open(&B, &vs[v]);

	printf("| receive | per receive | receives/s | GB/s (wall) | GB/s per CPU core | CPU µs per receive | µs: receive processing / gather / release_after + flush | check |\n");
	printf("|---|---|---:|---:|---:|---:|---|---|\n");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t n = sizes[s];
		char *ctrls = make_ctrls(n);
		struct row r;

		run(NULL, K_NONE, n, 1, rx, ctrls, &r);
		print_row(n, "no GPU work: receive processing + immediate release", &r);
		run(B.gpu, K_D2D, n, 1, rx, ctrls, &r);
		print_row(n, "one contiguous cuMemcpyDtoDAsync of the receive's size (baseline)", &r);
		for (int v = 0; v < NV; v++) {
			if (!g[v])
				continue;
			run(g[v], K_GATHER, n, 1, rx, ctrls, &r);
			print_row(n, vs[v].name, &r);
			bad |= !r.ok;
		}
		/* the gather signals the release itself */
		for (int v = 0; v < 2; v++) {
			char name[160];

			if (!g[v])
				continue;
			run(g[v], K_GATHER_REL, n, 1, rx, ctrls, &r);
			snprintf(name, sizeof(name),
				 "%s; devmemtcp_gpu_gather_release (one call) + flush",
				 vs[v].name);
			print_row(n, name, &r);
			bad |= !r.ok;
		}
		/* one fence per COALESCE receives */
		for (int v = 0; v < NV; v++) {
			char name[128];

			if (!g[v])
				continue;
			run(g[v], K_GATHER, n, COALESCE, rx, ctrls, &r);
			snprintf(name, sizeof(name),
				 "%s; one release_after per %d receives",
				 vs[v].name, COALESCE);
			print_row(n, name, &r);
			bad |= !r.ok;
		}
		free(ctrls);
	}
	printf("\nTarget: >= 50 GB/s per CPU core with 256 KiB receives.\n");
	for (int v = 0; v < NV; v++)
		devmemtcp_gpu_free(g[v]);
	devmemtcp_rx_free(rx);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	devmemtcp_buf_free(buf);
	bench_close(&B);
	return bad;
}
