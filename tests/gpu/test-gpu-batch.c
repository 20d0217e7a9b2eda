// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Suite gpu: coalesced gathers (opts.coalesce_bytes, devmemtcp_gpu_flush)
 * and gathers of whole receives, linear fragments included
 * (devmemtcp_gpu_gather_recv), on a real NVIDIA GPU; exits 77 where there
 * is none.  Test gpu-batch-fake runs it on the fake CUDA driver
 * (tests/lib/fakecuda).
 *
 * Receives are made as devmemtcp_rx_recv makes them (the library's
 * receive processing of control messages laid out as the kernel lays
 * them out), their token returns counted: every token comes back exactly
 * once, and never while a gather that reads its bytes may still run.
 * Every destination is compared byte for byte with what the CPU expects.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "buf.h"
#include "cuda.h"
#include "gpu.h"
#include "harness.h"
#include "rx.h"

#define SRC_SIZE (64ull << 20)
#define NTOKENS (1u << 16)
#define RECV 64			/* fragments of a receive (256 KiB) */
#define LINEAR_MAX (1u << 20)

static struct devmemtcp_ctx *ctx;
static const struct dmt_cuda *cu;
static CUcontext cctx;
static CUstream stream, stream2;
static struct devmemtcp_gpu *plain;	/* default options */
static struct devmemtcp_buf *src;
static uint8_t *src_host;
static CUdeviceptr src_dev;
static bool fake;

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define CK(call)                                                               \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		if (r_ != CUDA_SUCCESS)                                        \
			fail_msg("%s: CUresult %d", #call, r_);               \
	} while (0)

/* ---- a receiver whose token returns are counted --------------------------- */

static uint8_t live[NTOKENS];	/* 1: handed out, not yet returned */
static uint32_t returned;
static bool double_return;

static int count_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	uint32_t c = 0;

	(void)arg;
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < t[i].token_count; k++) {
			uint32_t tok = t[i].token_start + k;

			if (tok >= NTOKENS || !live[tok])
				double_return = true;
			else
				live[tok] = 0;
			c++;
		}
	__atomic_add_fetch(&returned, c, __ATOMIC_SEQ_CST);
	return (int)c;
}

struct recv {
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	int sv[2];
	uint32_t next_tok;
};

static void recv_open(struct recv *r)
{
	struct devmemtcp_segment s = { 0, SRC_SIZE, src_dev };

	memset(live, 0, sizeof(live));
	returned = 0;
	double_return = false;
	r->next_tok = 0;
	assert_int_equal(t_tcp_pair(r->sv), 0);
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &r->buf), 0);
	r->buf->size = SRC_SIZE;
	assert_int_equal(dmt_buf_set_segments(r->buf, &s, 1), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, r->sv[1], NULL, &r->rx), 0);
	assert_int_equal(devmemtcp_rx_add_buf(r->rx, 1, r->buf), 0);
	dmt_rx_tokens(r->rx)->dontneed = count_dontneed;
}

static void recv_close(struct recv *r)
{
	devmemtcp_rx_free(r->rx);
	devmemtcp_buf_free(r->buf);
	close(r->sv[0]);
	close(r->sv[1]);
	assert_false(double_return);
}

/* A receive of n fragments of len bytes at random places of the source
 * (nlin of them, every third from the second, or all when nlin >= n,
 * linear: their bytes in linear, whose first *linear_len bytes it fills),
 * its bytes in order into want when not NULL.  Returns the bytes. */
static uint64_t receive(struct recv *r, struct devmemtcp_frag *f, uint32_t n,
			uint32_t len, uint32_t nlin, uint8_t *linear,
			size_t *linear_len, uint8_t *want)
{
	const size_t sp = CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg));
	char *ctrl = aligned_alloc(8, n * sp);
	struct msghdr msg = { .msg_control = ctrl, .msg_controllen = n * sp };
	uint64_t pos = 0, lin = 0;
	struct cmsghdr *cm;
	uint32_t i = 0, l = 0;

	assert_non_null(ctrl);
	memset(ctrl, 0, n * sp);
	for (cm = CMSG_FIRSTHDR(&msg); i < n; i++, cm = CMSG_NXTHDR(&msg, cm)) {
		struct dmt_dmabuf_cmsg d = { .frag_size = len };
		bool is_lin = nlin >= n || (l < nlin && i % 3 == 1);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_len = CMSG_LEN(sizeof(d));
		if (is_lin) {
			l++;
			cm->cmsg_type = SCM_DEVMEM_LINEAR;
			for (uint32_t k = 0; k < len; k++)
				linear[lin + k] = (uint8_t)rnd();
			if (want)
				memcpy(want + pos, linear + lin, len);
			lin += len;
		} else {
			d.frag_offset = rnd() % (SRC_SIZE / 4096) * 4096 +
					(len <= 2048 ? rnd() % 2 * 2048 : 0);
			d.frag_token = r->next_tok % NTOKENS;
			d.dmabuf_id = 1;
			assert_int_equal(live[d.frag_token], 0);
			live[d.frag_token] = 1;
			r->next_tok++;
			cm->cmsg_type = SCM_DEVMEM_DMABUF;
			if (want)
				memcpy(want + pos, src_host + d.frag_offset, len);
		}
		memcpy(CMSG_DATA(cm), &d, sizeof(d));
		pos += len;
	}
	assert_int_equal(dmt_rx_process(r->rx, &msg, pos, f, n), (int)n);
	free(ctrl);
	if (linear_len)
		*linear_len = lin;
	return pos;
}

/* Flush releases until `count` tokens came back or timeout_s passed. */
static bool wait_returned(struct recv *r, uint32_t count, double timeout_s)
{
	double t0 = now_s();

	while (__atomic_load_n(&returned, __ATOMIC_SEQ_CST) < count &&
	       now_s() - t0 < timeout_s)
		assert_true(devmemtcp_rx_flush(r->rx) >= 0);
	return returned >= count;
}

static struct devmemtcp_gpu *coalescing(uint32_t bytes, uint32_t us)
{
	DEVMEMTCP_OPTS(gpu_opts, o, .coalesce_bytes = bytes, .coalesce_us = us);
	struct devmemtcp_gpu *g = NULL;

	if (devmemtcp_gpu_new(ctx, &o, &g))
		fail_msg("devmemtcp_gpu_new: %s", devmemtcp_ctx_errmsg(ctx));
	return g;
}

static void check_bytes(CUdeviceptr dst, const uint8_t *want, uint64_t len,
			const char *what)
{
	uint8_t *got = malloc(len);
	uint64_t bad;

	assert_non_null(got);
	CK(cu->cuMemcpyDtoH(got, dst, len));
	for (bad = 0; bad < len && got[bad] == want[bad]; bad++)
		;
	if (bad < len)
		fail_msg("%s: byte %llu of %llu differs: %#x, want %#x", what,
			 (unsigned long long)bad, (unsigned long long)len,
			 got[bad], want[bad]);
	free(got);
}

/* ---- setup ------------------------------------------------------------------ */

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = SRC_SIZE);
	const struct devmemtcp_segment *seg;
	CUdevice dev;
	int ret;

	(void)state;
	fake = getenv("DEVMEMTCP_TEST_FAKE_GPU") != NULL;
	if (devmemtcp_ctx_new(&co, &ctx))
		return -1;
	ret = devmemtcp_gpu_new(ctx, NULL, &plain);
	if (ret == -ENOENT || ret == -ENODEV || ret == -ENOSYS)
		exit(t_skipped("no usable NVIDIA GPU: %s", devmemtcp_ctx_errmsg(ctx)));
	if (ret) {
		printf("devmemtcp_gpu_new: %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
		return -1;
	}
	cu = dmt_gpu_cuda(plain);
	if (cu->cuDeviceGet(&dev, 0) || cu->cuDevicePrimaryCtxRetain(&cctx, dev) ||
	    cu->cuCtxPushCurrent(cctx) ||
	    cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) ||
	    cu->cuStreamCreate(&stream2, CU_STREAM_NON_BLOCKING))
		return -1;
	ret = devmemtcp_buf_new(ctx, &bo, &src);
	if (ret) {
		printf("CUDA buffer: %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
		if (ret == -EOPNOTSUPP)
			exit(t_skipped("this GPU or driver cannot export dma-bufs"));
		return -1;
	}
	devmemtcp_buf_segments(src, &seg);
	src_dev = seg[0].addr;
	src_host = malloc(SRC_SIZE);
	if (!src_host)
		return -1;
	for (uint64_t i = 0; i < SRC_SIZE; i += 8) {
		uint64_t v = rnd();

		memcpy(src_host + i, &v, 8);
	}
	return cu->cuMemcpyHtoD(src_dev, src_host, SRC_SIZE) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	devmemtcp_buf_free(src);
	free(src_host);
	cu->cuStreamDestroy(stream);
	cu->cuStreamDestroy(stream2);
	devmemtcp_gpu_free(plain);
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* ---- coalescing ------------------------------------------------------------ */

/*
 * 256 KiB receives into consecutive slices of a ring, 1 MiB batches: a
 * batch is queued by the gather that brings it to 1 MiB (the fourth),
 * never holds back 1 MiB or more, the pending gathers' tokens stay held
 * until their launch ran (however long one waits), devmemtcp_gpu_flush
 * queues what is left, and every byte and token arrives.
 */
static void test_coalesce_by_size(void **state)
{
	enum { N = 10 };
	const uint64_t size = RECV * 4096ull;
	struct devmemtcp_gpu *g = coalescing(1u << 20, 1000u * 1000);
	struct devmemtcp_frag f[RECV];
	uint8_t *want = malloc(N * size);
	struct dmt_batch_stats st;
	struct recv r;
	CUdeviceptr dst;

	(void)state;
	assert_non_null(want);
	recv_open(&r);
	CK(cu->cuMemAlloc(&dst, N * size));
	CK(cu->cuMemsetD8Async(dst, 0, N * size, stream));
	CK(cu->cuStreamSynchronize(stream));
	for (int i = 0; i < N; i++) {
		struct devmemtcp_gpu_iov d = { dst + i * size, size };

		receive(&r, f, RECV, 4096, 0, NULL, NULL, want + i * size);
		assert_int_equal(devmemtcp_gpu_gather_release(g, r.rx, f, RECV, &d, 1, stream), 0);
		dmt_batch_stats(g, &st);
		assert_int_equal(st.launches, (uint64_t)(i + 1) / 4);
		assert_int_equal(st.pending_gathers, (uint32_t)(i + 1) % 4);
		assert_true(st.pending_bytes < (1u << 20));
		assert_int_equal(st.pending_bytes, (uint64_t)((i + 1) % 4) * size);
	}
	assert_int_equal(st.by_size, 2);
	/* 8 gathers ran; the 2 pending ones' tokens stay held */
	CK(cu->cuStreamSynchronize(stream));
	assert_true(wait_returned(&r, 8 * RECV, 10));
	usleep(20 * 1000);
	assert_true(devmemtcp_rx_flush(r.rx) >= 0);
	assert_int_equal(returned, 8 * RECV);
	/* the flush queues them: 2 gathers in one launch */
	assert_int_equal(devmemtcp_gpu_flush(g), 2);
	assert_int_equal(devmemtcp_gpu_flush(g), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.launches, 3);
	assert_int_equal(st.by_flush, 1);
	assert_int_equal(st.pending_max, 3 * size);
	assert_true(wait_returned(&r, N * RECV, 10));
	CK(cu->cuStreamSynchronize(stream));
	check_bytes(dst, want, N * size, "ring of 10 receives");
	devmemtcp_gpu_free(g);
	recv_close(&r);
	CK(cu->cuMemFree(dst));
	free(want);
}

/*
 * The bound, over random receive sizes and batch sizes: after every call
 * the batch holds back less than coalesce_bytes, and never bytes of more
 * than 1024 pieces or 8 destinations; whatever the cut, the bytes arrive.
 */
static void test_coalesce_bound(void **state)
{
	static const uint32_t limits[] = { 4096, 65536, 300000, 1u << 20, 4u << 20 };
	enum { CALLS = 60, MAXF = 300 };
	struct devmemtcp_frag *f = calloc(MAXF, sizeof(*f));
	uint8_t *want = malloc(CALLS * MAXF * 4096ull);
	struct recv r;
	CUdeviceptr dst;

	(void)state;
	assert_true(f && want);
	recv_open(&r);
	CK(cu->cuMemAlloc(&dst, CALLS * MAXF * 4096ull));
	for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++) {
		struct devmemtcp_gpu *g = coalescing(limits[li], 1000u * 1000);
		uint64_t at = 0, sent = 0, base = returned;
		struct dmt_batch_stats st;

		for (int c = 0; c < CALLS; c++) {
			uint32_t n = 1 + (uint32_t)(rnd() % MAXF);
			uint32_t len = rnd() % 2 ? 4096 : 1448;
			struct devmemtcp_gpu_iov d[3];
			uint64_t bytes = (uint64_t)n * len, cut = rnd() % bytes;

			receive(&r, f, n, len, 0, NULL, NULL, want + at);
			/* two or three destinations, back to back */
			d[0] = (struct devmemtcp_gpu_iov){ dst + at, cut };
			d[1] = (struct devmemtcp_gpu_iov){ dst + at + cut, (bytes - cut) / 2 };
			d[2] = (struct devmemtcp_gpu_iov){ d[1].addr + d[1].len,
							   bytes - cut - d[1].len };
			if (devmemtcp_gpu_gather_release(g, r.rx, f, n, d, 3, stream))
				fail_msg("limit %u, call %d: %s", limits[li], c,
					 devmemtcp_gpu_errmsg(g));
			dmt_batch_stats(g, &st);
			if (st.pending_bytes >= limits[li])
				fail_msg("limit %u: %llu bytes held back", limits[li],
					 (unsigned long long)st.pending_bytes);
			at += bytes;
			sent += n;
		}
		assert_true(st.pending_max < limits[li]);
		assert_true(devmemtcp_gpu_flush(g) >= 0);
		assert_true(wait_returned(&r, (uint32_t)(base + sent), 10));
		CK(cu->cuStreamSynchronize(stream));
		check_bytes(dst, want, at, "random cuts");
		print_message("  limit %7u: %llu launches for %d gathers (%llu by size)\n",
			      limits[li], (unsigned long long)st.launches + 1, CALLS,
			      (unsigned long long)st.by_size);
		devmemtcp_gpu_free(g);
	}
	recv_close(&r);
	CK(cu->cuMemFree(dst));
	free(f);
	free(want);
}

/* n fragments of len bytes that read dev (caller-built: device memory
 * that is no buffer's). */
static void frags_at(struct devmemtcp_frag *f, uint32_t n, CUdeviceptr dev,
		     uint32_t len)
{
	for (uint32_t i = 0; i < n; i++)
		f[i] = (struct devmemtcp_frag){ .addr = dev + (uint64_t)i * len,
						.len = len };
}

/*
 * Coalescing never reorders work on a stream.  A gather that writes what
 * a pending gather writes, one that reads what it writes and one that
 * writes what it reads each queue the batch first; a gather on another
 * stream too; each later gather's result is the one a stream in call
 * order gives.
 */
static void test_coalesce_order(void **state)
{
	const uint32_t n = 16, len = 4096, size = n * len;
	struct devmemtcp_gpu *g = coalescing(64u << 20, 1000u * 1000);
	struct devmemtcp_frag a[16], b[16];
	struct devmemtcp_gpu_iov d;
	struct dmt_batch_stats st;
	uint8_t *want = malloc(size), *got = malloc(size);
	CUdeviceptr x, y;
	uint64_t order0;

	(void)state;
	assert_true(want && got);
	CK(cu->cuMemAlloc(&x, size));
	CK(cu->cuMemAlloc(&y, size));
	/* write after write: A then B into x, B wins */
	frags_at(a, n, src_dev, len);
	frags_at(b, n, src_dev + (8u << 20), len);
	d = (struct devmemtcp_gpu_iov){ x, size };
	assert_int_equal(devmemtcp_gpu_gather(g, a, n, &d, 1, stream), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.pending_gathers, 1);
	order0 = st.by_order;
	assert_int_equal(devmemtcp_gpu_gather(g, b, n, &d, 1, stream), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.by_order, order0 + 1);
	assert_int_equal(st.pending_gathers, 1);
	/* read after write: y from x (B's bytes), pending behind B */
	frags_at(a, n, x, len);
	d = (struct devmemtcp_gpu_iov){ y, size };
	assert_int_equal(devmemtcp_gpu_gather(g, a, n, &d, 1, stream), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.by_order, order0 + 2);
	/* write after read: x anew from the source's first bytes, while the
	 * pending gather still reads x */
	frags_at(b, n, src_dev, len);
	d = (struct devmemtcp_gpu_iov){ x, size };
	assert_int_equal(devmemtcp_gpu_gather(g, b, n, &d, 1, stream), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.by_order, order0 + 3);
	/* another stream: the batch is queued first (the y written on the
	 * first stream before the other writes half of it) */
	CK(cu->cuStreamSynchronize(stream));
	frags_at(b, n, src_dev + (16u << 20), len);
	d = (struct devmemtcp_gpu_iov){ y + size / 2, size / 2 };
	assert_int_equal(devmemtcp_gpu_gather(g, b, n / 2, &d, 1, stream2), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.by_order, order0 + 4);
	assert_int_equal(devmemtcp_gpu_flush(g), 1);
	CK(cu->cuStreamSynchronize(stream));
	CK(cu->cuStreamSynchronize(stream2));
	/* y: B's bytes (src + 8 MiB) then the other stream's half */
	memcpy(want, src_host + (8u << 20), size / 2);
	memcpy(want + size / 2, src_host + (16u << 20), size / 2);
	check_bytes(y, want, size, "read after write, then another stream");
	check_bytes(x, src_host, size, "write after read");
	devmemtcp_gpu_free(g);
	CK(cu->cuMemFree(x));
	CK(cu->cuMemFree(y));
	free(want);
	free(got);
}

/*
 * What the caller does after coalesced gathers and before its own work:
 * devmemtcp_gpu_flush, then a copy queued on the stream sees the bytes;
 * devmemtcp_gpu_fence_new and devmemtcp_gpu_release_after queue the batch
 * themselves (their fence covers it); devmemtcp_gpu_free queues it too.
 */
static void test_coalesce_visible(void **state)
{
	const uint32_t n = 32, size = n * 4096;
	struct devmemtcp_gpu *g = coalescing(64u << 20, 1000u * 1000);
	struct devmemtcp_gpu_fence *fence;
	struct devmemtcp_frag f[32];
	struct devmemtcp_gpu_iov d;
	struct dmt_batch_stats st;
	uint8_t *got = malloc(size);
	CUdeviceptr x;
	struct recv r;

	(void)state;
	assert_non_null(got);
	CK(cu->cuMemAlloc(&x, 5 * size));
	CK(cu->cuMemsetD8Async(x, 0, 5 * size, stream));
	/* flush, then the caller's copy on the stream */
	frags_at(f, n, src_dev, 4096);
	d = (struct devmemtcp_gpu_iov){ x, size };
	assert_int_equal(devmemtcp_gpu_gather(g, f, n, &d, 1, stream), 0);
	assert_int_equal(devmemtcp_gpu_flush(g), 1);
	CK(cu->cuMemcpyDtoDAsync(x + 4 * size, x, size, stream));
	CK(cu->cuStreamSynchronize(stream));
	check_bytes(x + 4 * size, src_host, size, "a copy queued after the flush");
	/* a fence made after a coalesced gather covers it */
	frags_at(f, n, src_dev + size, 4096);
	d = (struct devmemtcp_gpu_iov){ x + size, size };
	assert_int_equal(dmt_gpu_spin(g, stream, 50ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_gather(g, f, n, &d, 1, stream), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.pending_gathers, 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	check_bytes(x + size, src_host + size, size, "behind a fence");
	/* release_after queues the batch before its fence */
	recv_open(&r);
	receive(&r, f, n, 4096, 0, NULL, NULL, NULL);
	d = (struct devmemtcp_gpu_iov){ x + 2 * size, size };
	assert_int_equal(devmemtcp_gpu_gather(g, f, n, &d, 1, stream), 0);
	assert_int_equal(devmemtcp_gpu_release_after(g, r.rx, f, n, stream), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.pending_gathers, 0);
	assert_true(wait_returned(&r, n, 10));
	recv_close(&r);
	/* the handle's end queues what waits */
	frags_at(f, n, src_dev + 3 * size, 4096);
	d = (struct devmemtcp_gpu_iov){ x + 3 * size, size };
	assert_int_equal(devmemtcp_gpu_gather(g, f, n, &d, 1, stream), 0);
	devmemtcp_gpu_free(g);
	CK(cu->cuStreamSynchronize(stream));
	check_bytes(x + 3 * size, src_host + 3 * size, size, "queued by devmemtcp_gpu_free");
	CK(cu->cuMemFree(x));
	free(got);
}

/*
 * The age bound: a gather call that finds the batch's first gather older
 * than coalesce_us queues the batch, itself included; a younger one does
 * not.
 */
static void test_coalesce_by_age(void **state)
{
	struct devmemtcp_gpu *g = coalescing(64u << 20, 2000);
	struct devmemtcp_frag f[4];
	struct devmemtcp_gpu_iov d;
	struct dmt_batch_stats st;
	CUdeviceptr x;

	(void)state;
	CK(cu->cuMemAlloc(&x, 16 * 4096));
	frags_at(f, 4, src_dev, 4096);
	d = (struct devmemtcp_gpu_iov){ x, 4 * 4096 };
	assert_int_equal(devmemtcp_gpu_gather(g, f, 4, &d, 1, stream), 0);
	usleep(10 * 1000);
	d.addr += 4 * 4096;
	assert_int_equal(devmemtcp_gpu_gather(g, f, 4, &d, 1, stream), 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.by_age, 1);
	assert_int_equal(st.gathers, 2);
	assert_int_equal(st.pending_gathers, 0);
	/* a young batch stays */
	d.addr += 4 * 4096;
	assert_int_equal(devmemtcp_gpu_gather(g, f, 4, &d, 1, stream), 0);
	d.addr += 4 * 4096;
	assert_int_equal(devmemtcp_gpu_gather(g, f, 2, &d, 1, stream), 0);
	dmt_batch_stats(g, &st);
	if (st.by_age == 1)	/* unless this thread was descheduled 2 ms */
		assert_int_equal(st.pending_gathers, 2);
	devmemtcp_gpu_free(g);
	CK(cu->cuStreamSynchronize(stream));
	check_bytes(x, src_host, 4 * 4096, "by age");
	CK(cu->cuMemFree(x));
}

struct waiter {
	struct devmemtcp_rx *rx;
	int ret;
};

static void *release_all(void *arg)
{
	struct waiter *w = arg;

	w->ret = devmemtcp_rx_release_all(w->rx);
	return NULL;
}

/*
 * The tokens of a pending gather: polling (devmemtcp_rx_flush, a receive)
 * leaves the batch alone, a wait for them (devmemtcp_rx_release_all, here
 * on another thread) queues it, and they come back once it ran, never
 * before.
 */
static void test_coalesce_wait_queues(void **state)
{
	const uint64_t spin_ns = 200ull * 1000 * 1000;
	struct devmemtcp_gpu *g = coalescing(64u << 20, 1000u * 1000);
	struct devmemtcp_frag f[RECV];
	uint8_t *want = malloc(RECV * 4096);
	struct devmemtcp_gpu_iov d;
	struct dmt_batch_stats st;
	struct waiter w;
	pthread_t th;
	struct recv r;
	CUdeviceptr x;
	double t0;

	(void)state;
	assert_non_null(want);
	recv_open(&r);
	CK(cu->cuMemAlloc(&x, RECV * 4096));
	receive(&r, f, RECV, 4096, 0, NULL, NULL, want);
	d = (struct devmemtcp_gpu_iov){ x, RECV * 4096 };
	assert_int_equal(dmt_gpu_spin(g, stream, spin_ns), 0);
	assert_int_equal(devmemtcp_gpu_gather_release(g, r.rx, f, RECV, &d, 1, stream), 0);
	for (int i = 0; i < 3; i++)
		assert_true(devmemtcp_rx_flush(r.rx) >= 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.pending_gathers, 1);
	assert_int_equal(returned, 0);
	t0 = now_s();
	w.rx = r.rx;
	assert_int_equal(pthread_create(&th, NULL, release_all, &w), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(w.ret >= 0);
	assert_int_equal(returned, RECV);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.by_wait, 1);
	assert_int_equal(st.pending_gathers, 0);
	/* behind the spin the handle queued before: not before it ended */
	assert_true(now_s() - t0 >= spin_ns / 1e9 * 0.5);
	check_bytes(x, want, RECV * 4096, "queued by a wait");
	devmemtcp_gpu_free(g);
	recv_close(&r);
	CK(cu->cuMemFree(x));
	free(want);
}

/* ---- linear fragments ---------------------------------------------------------- */

/*
 * devmemtcp_gpu_gather_recv places linear fragments from the linear
 * buffer: receives with a few linear fragments (a steering miss, headers
 * the NIC did not split) and receives that are all linear, 1448 and 4096
 * bytes, with and without coalescing, with and without a release, a
 * gather larger than a batch (from pinned slots) and one through the
 * persistent kernel; enough of them that the staging ring wraps and grows.
 * The linear buffer is overwritten right after each call: the bytes were
 * taken.
 */
static void test_gather_recv_linear(void **state)
{
	enum { CALLS = 40 };
	static const uint32_t frag_counts[] = { 1, 5, 64, 181, 700, 1500 };
	struct devmemtcp_gpu *hs[3];
	struct devmemtcp_frag *f = calloc(1500, sizeof(*f));
	uint8_t *linear = malloc(LINEAR_MAX * 4), *want = malloc(1500 * 4096);
	uint64_t staged0;
	struct recv r;
	CUdeviceptr dst;

	(void)state;
	assert_true(f && linear && want);
	hs[0] = plain;
	hs[1] = coalescing(1u << 20, 1000u * 1000);
	{
		DEVMEMTCP_OPTS(gpu_opts, o, .flags = DEVMEMTCP_GPU_PERSISTENT);

		assert_int_equal(devmemtcp_gpu_new(ctx, &o, &hs[2]), 0);
	}
	recv_open(&r);
	CK(cu->cuMemAlloc(&dst, 2 * 1500 * 4096ull));
	for (int h = 0; h < 3; h++) {
		struct dmt_batch_stats st;
		uint32_t sent = 0;

		dmt_batch_stats(hs[h], &st);
		staged0 = st.staged_bytes;
		for (int c = 0; c < CALLS; c++) {
			uint32_t n = frag_counts[c % 6], len = c & 1 ? 1448 : 4096;
			uint32_t nlin = c % 5 == 4 && n <= 200 ? n : 1 + n / 20;
			CUdeviceptr to = dst + (c & 1) * 1500 * 4096ull;
			struct devmemtcp_gpu_iov d;
			size_t llen;
			uint64_t bytes;

			if (h == 2 && n > 700)
				n = 700;	/* the persistent kernel's slots */
			bytes = receive(&r, f, n, len, nlin, linear, &llen, want);
			d = (struct devmemtcp_gpu_iov){ to, bytes };
			/* every third without rx: released after the stream */
			if (devmemtcp_gpu_gather_recv(hs[h], c % 3 ? r.rx : NULL, f, n,
						      linear, LINEAR_MAX, &d, 1,
						      stream))
				fail_msg("handle %d call %d: %s", h, c,
					 devmemtcp_gpu_errmsg(hs[h]));
			memset(linear, 0xee, llen);	/* taken: reusable now */
			if (!(c % 3))
				assert_true(devmemtcp_gpu_release_after(hs[h], r.rx, f, n,
									stream) >= 0);
			for (uint32_t i = 0; i < n; i++)
				sent += !(f[i].flags & DEVMEMTCP_FRAG_LINEAR);
			assert_true(devmemtcp_gpu_flush(hs[h]) >= 0);
			CK(cu->cuStreamSynchronize(stream));
			if (!(c % 7) || c == CALLS - 1) {
				char what[64];

				snprintf(what, sizeof(what), "handle %d call %d (%u frags, %u linear)",
					 h, c, n, nlin);
				check_bytes(to, want, bytes, what);
			}
		}
		assert_true(wait_returned(&r, sent, 10));
		dmt_batch_stats(hs[h], &st);
		assert_true(st.staged_bytes > staged0);
		print_message("  handle %d: %llu linear bytes staged, ring of %llu\n", h,
			      (unsigned long long)(st.staged_bytes - staged0),
			      (unsigned long long)st.stage_size);
		returned = 0;
		memset(live, 0, sizeof(live));
	}
	devmemtcp_gpu_free(hs[1]);
	devmemtcp_gpu_free(hs[2]);
	recv_close(&r);
	CK(cu->cuMemFree(dst));
	free(f);
	free(linear);
	free(want);
}

/*
 * Staged bytes are reused only once the launch that read them ran:
 * gathers of linear bytes queued behind a long kernel, more of them than
 * the ring holds, each into its own destination; the ring waits for the
 * launches instead of overwriting bytes they have yet to read.
 */
static void test_gather_recv_staging_waits(void **state)
{
	enum { CALLS = 24 };
	const uint32_t len = 64u << 10;	/* 24 x 64 KiB: beyond the 1 MiB ring */
	struct devmemtcp_gpu *g = coalescing(256u << 10, 1000u * 1000);
	struct devmemtcp_frag f = { .len = len, .flags = DEVMEMTCP_FRAG_LINEAR };
	uint8_t *linear = malloc(len), *want = malloc((size_t)CALLS * len);
	struct devmemtcp_gpu_iov d;
	struct dmt_batch_stats st;
	CUdeviceptr dst;

	(void)state;
	assert_true(linear && want);
	CK(cu->cuMemAlloc(&dst, (size_t)CALLS * len));
	assert_int_equal(dmt_gpu_spin(g, stream, 100ull * 1000 * 1000), 0);
	for (int c = 0; c < CALLS; c++) {
		for (uint32_t k = 0; k < len; k++)
			linear[k] = (uint8_t)rnd();
		memcpy(want + (size_t)c * len, linear, len);
		d = (struct devmemtcp_gpu_iov){ dst + (uint64_t)c * len, len };
		assert_int_equal(devmemtcp_gpu_gather_recv(g, NULL, &f, 1, linear, len,
							   &d, 1, stream), 0);
	}
	assert_true(devmemtcp_gpu_flush(g) >= 0);
	dmt_batch_stats(g, &st);
	assert_int_equal(st.stage_size, 1u << 20);
	CK(cu->cuStreamSynchronize(stream));
	check_bytes(dst, want, (size_t)CALLS * len, "linear bytes through a full ring");
	devmemtcp_gpu_free(g);
	CK(cu->cuMemFree(dst));
	free(linear);
	free(want);
}

/* ---- errors ------------------------------------------------------------------------ */

static void test_gather_recv_errors(void **state)
{
	struct devmemtcp_frag f[4];
	uint8_t linear[100];
	struct devmemtcp_gpu_iov d;
	CUdeviceptr x;
	struct recv r;

	(void)state;
	CK(cu->cuMemAlloc(&x, 4 * 4096));
	recv_open(&r);
	receive(&r, f, 4, 4096, 0, NULL, NULL, NULL);
	d = (struct devmemtcp_gpu_iov){ x, 4 * 4096 };
	/* ERRORS devmemtcp_gpu_gather_recv EINVAL */
	assert_int_equal(devmemtcp_gpu_gather_recv(NULL, r.rx, f, 4, NULL, 0, &d, 1, stream), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_gather_recv: gpu is NULL");
	assert_int_equal(devmemtcp_gpu_gather_recv(plain, r.rx, NULL, 4, NULL, 0, &d, 1, stream), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(plain),
			    "devmemtcp_gpu_gather_recv: frags or dsts is NULL with a non-zero count");
	/* a linear fragment beyond the linear buffer */
	f[1] = (struct devmemtcp_frag){ .offset = 60, .len = 41,
					.flags = DEVMEMTCP_FRAG_LINEAR };
	assert_int_equal(devmemtcp_gpu_gather_recv(plain, r.rx, f, 4, linear, sizeof(linear),
						   &d, 1, stream), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(plain),
			    "devmemtcp_gpu_gather_recv: linear fragment 1 (offset 60, 41 bytes) lies outside the linear buffer of 100 bytes: give the buffer and length devmemtcp_rx_recv filled");
	/* ERRORS devmemtcp_gpu_gather_recv ENOSPC */
	f[1].len = 40;
	d.len = 3 * 4096 + 39;
	assert_int_equal(devmemtcp_gpu_gather_recv(plain, r.rx, f, 4, linear, sizeof(linear),
						   &d, 1, stream), -ENOSPC);
	assert_string_equal(devmemtcp_gpu_errmsg(plain),
			    "the fragments hold 12328 bytes but the destinations only 12327: give more room");
	/* nothing was deferred: the tokens are still ours */
	assert_true(devmemtcp_rx_release_all(r.rx) >= 0);
	assert_int_equal(returned, 4);
	recv_close(&r);
	CK(cu->cuMemFree(x));
}

/*
 * A batch whose launch fails: the call that queues it says so, naming the
 * gathers it carried; their tokens go back (nothing will read their
 * bytes).  Only the stand-in driver fails a launch on request.
 */
static void test_flush_errors(void **state)
{
	struct devmemtcp_gpu *g;
	struct devmemtcp_frag f[8];
	struct devmemtcp_gpu_iov d;
	struct recv r;
	CUdeviceptr x;

	(void)state;
	/* ERRORS devmemtcp_gpu_flush EINVAL */
	assert_int_equal(devmemtcp_gpu_flush(NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_flush: gpu is NULL");
	assert_int_equal(devmemtcp_gpu_flush(plain), 0);	/* nothing waits */
	if (!fake) {
		skip();
		return;
	}
	g = coalescing(1u << 20, 1000u * 1000);
	CK(cu->cuMemAlloc(&x, 16 * 4096));
	recv_open(&r);
	receive(&r, f, 8, 4096, 0, NULL, NULL, NULL);
	d = (struct devmemtcp_gpu_iov){ x, 4 * 4096 };
	assert_int_equal(devmemtcp_gpu_gather_release(g, r.rx, f, 4, &d, 1, stream), 0);
	d.addr += 4 * 4096;
	assert_int_equal(devmemtcp_gpu_gather_release(g, r.rx, f + 4, 4, &d, 1, stream), 0);
	setenv("DEVMEMTCP_FAKE_CUDA_FAIL", "cuLaunchKernelEx=999", 1);
	/* ERRORS devmemtcp_gpu_flush EIO */
	assert_int_equal(devmemtcp_gpu_flush(g), -EIO);
	unsetenv("DEVMEMTCP_FAKE_CUDA_FAIL");
	assert_non_null(strstr(devmemtcp_gpu_errmsg(g),
			       "devmemtcp_gpu_flush: queueing a batch of 2 coalesced gathers failed: cuLaunchKernelEx(dmt_gather)"));
	assert_non_null(strstr(devmemtcp_gpu_errmsg(g),
			       "their destinations were not written, and their tokens go back to the kernel"));
	assert_true(wait_returned(&r, 8, 10));
	assert_int_equal(devmemtcp_gpu_flush(g), 0);
	devmemtcp_gpu_free(g);
	recv_close(&r);
	CK(cu->cuMemFree(x));
}

/* Gathers (then a flush) made on a thread with no CUDA context current:
 * what each call returned and said, and whether it left a context
 * current there. */
struct bare {
	struct devmemtcp_gpu *g;
	struct devmemtcp_rx *rx;
	const uint8_t *linear;
	struct devmemtcp_frag *f[8];
	uint32_t n[8];
	struct devmemtcp_gpu_iov d[8];
	CUstream st[8];
	int calls;
	bool flush;
	int ret[9];
	char msg[9][512];
	bool ctx_left[9];
};

static void *bare_thread(void *arg)
{
	struct bare *b = arg;

	for (int i = 0; i < b->calls + b->flush; i++) {
		CUcontext c = NULL;

		b->ret[i] = i < b->calls
			? devmemtcp_gpu_gather_recv(b->g, b->rx, b->f[i], b->n[i],
						    b->linear, LINEAR_MAX, &b->d[i],
						    1, b->st[i])
			: devmemtcp_gpu_flush(b->g);
		snprintf(b->msg[i], sizeof(b->msg[i]), "%s", devmemtcp_gpu_errmsg(b->g));
		b->ctx_left[i] = cu->cuCtxGetCurrent(&c) != CUDA_SUCCESS || c;
	}
	return NULL;
}

static void run_bare(struct bare *b)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, bare_thread, b), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	for (int i = 0; i < b->calls + b->flush; i++)
		if (b->ctx_left[i])
			fail_msg("call %d left a CUDA context current on its thread", i);
}

/*
 * A thread with no CUDA context current (a data loader's worker): the
 * handle makes its context current for the driver calls a gather needs
 * (queueing a batch, staging linear bytes, the flush) and leaves none
 * current; every byte and token arrives.  On the fake driver, a context
 * that cannot be made current: a gather that only joins the open batch
 * needs none and succeeds; the one that must queue that batch fails it
 * as a failed launch would (its tokens go back), and its own fragments
 * stay the caller's.
 */
static void test_gather_no_context(void **state)
{
	enum { N = 5, FEW = 16 };
	const uint64_t size = RECV * 4096ull;
	struct devmemtcp_gpu *g = coalescing(1u << 20, 1000u * 1000);
	struct devmemtcp_frag *f = calloc((N + 2) * RECV, sizeof(*f));
	uint8_t *linear = malloc(LINEAR_MAX), *want = malloc(N * size);
	struct bare b = { .g = g, .linear = linear, .calls = N, .flush = true };
	struct dmt_batch_stats st;
	uint32_t sent = 0;
	struct recv r;
	CUdeviceptr dst;

	(void)state;
	assert_true(f && linear && want);
	recv_open(&r);
	b.rx = r.rx;
	CK(cu->cuMemAlloc(&dst, N * size));
	/* two receives on one stream, the second with 5 linear fragments
	 * (the staging ring is made for them, after the first gather is
	 * queued), three on another (the second gather queued before them),
	 * queued by the flush */
	for (int i = 0; i < N; i++) {
		b.f[i] = f + i * RECV;
		b.n[i] = RECV;
		assert_int_equal(receive(&r, b.f[i], RECV, 4096, i == 1 ? 5 : 0,
					 linear, NULL, want + i * size), size);
		b.d[i] = (struct devmemtcp_gpu_iov){ dst + i * size, size };
		b.st[i] = i < 2 ? stream : stream2;
		for (uint32_t k = 0; k < RECV; k++)
			sent += !(b.f[i][k].flags & DEVMEMTCP_FRAG_LINEAR);
	}
	assert_int_equal(sent, N * RECV - 5);
	run_bare(&b);
	for (int i = 0; i < N; i++)
		if (b.ret[i])
			fail_msg("gather %d: %d: %s", i, b.ret[i], b.msg[i]);
	assert_int_equal(b.ret[N], 3);	/* the flush queued three gathers */
	dmt_batch_stats(g, &st);
	assert_int_equal(st.launches, 3);
	assert_int_equal(st.by_order, 2);
	assert_int_equal(st.by_flush, 1);
	assert_int_equal(st.gathers, N);
	CK(cu->cuStreamSynchronize(stream));
	CK(cu->cuStreamSynchronize(stream2));
	check_bytes(dst, want, N * size, "gathers from a thread without a context");
	assert_true(wait_returned(&r, sent, 10));
	assert_int_equal(returned, sent);

	if (fake) {
		struct bare c = { .g = g, .linear = linear, .rx = r.rx, .calls = 2 };

		for (int i = 0; i < 2; i++) {
			c.f[i] = f + (N + i) * RECV;
			c.n[i] = FEW;
			receive(&r, c.f[i], FEW, 4096, 0, NULL, NULL, NULL);
			c.d[i] = (struct devmemtcp_gpu_iov){ dst + i * size, size };
			c.st[i] = i ? stream2 : stream;
		}
		setenv("DEVMEMTCP_FAKE_CUDA_FAIL", "cuCtxPushCurrent_v2=999", 1);
		run_bare(&c);
		unsetenv("DEVMEMTCP_FAKE_CUDA_FAIL");
		if (c.ret[0])
			fail_msg("a gather joining the batch: %d: %s", c.ret[0], c.msg[0]);
		assert_int_equal(c.ret[1], -EIO);
		assert_string_equal(c.msg[1],
				    "devmemtcp_gpu_gather_recv: queueing a batch of 1 coalesced gathers failed: cuCtxPushCurrent failed: CUDA_ERROR_FAKE (fake-cuda error): their destinations were not written, and their tokens go back to the kernel");
		/* the failed batch's tokens go back, the call's own stay */
		assert_true(wait_returned(&r, sent + FEW, 10));
		assert_int_equal(returned, sent + FEW);
		assert_int_equal(devmemtcp_rx_release(r.rx, c.f[1], FEW), 0);
		assert_true(wait_returned(&r, sent + 2 * FEW, 10));
		assert_int_equal(returned, sent + 2 * FEW);
		dmt_batch_stats(g, &st);
		assert_int_equal(st.launches, 3);
		assert_int_equal(st.pending_gathers, 0);
	}
	devmemtcp_gpu_free(g);
	recv_close(&r);
	CK(cu->cuMemFree(dst));
	free(f);
	free(linear);
	free(want);
}

static void test_coalesce_options(void **state)
{
	struct devmemtcp_gpu *g = NULL;

	(void)state;
	{
		DEVMEMTCP_OPTS(gpu_opts, o, .coalesce_bytes = (64u << 20) + 1);

		assert_int_equal(devmemtcp_gpu_new(ctx, &o, &g), -EINVAL);
		assert_string_equal(devmemtcp_ctx_errmsg(ctx),
				    "devmemtcp_gpu_new: opts.coalesce_bytes 67108865 is above 67108864 (64 MiB): a batch that large only delays its bytes");
	}
	{
		DEVMEMTCP_OPTS(gpu_opts, o, .coalesce_bytes = 1u << 20,
			       .flags = DEVMEMTCP_GPU_PERSISTENT);

		assert_int_equal(devmemtcp_gpu_new(ctx, &o, &g), -EINVAL);
		assert_string_equal(devmemtcp_ctx_errmsg(ctx),
				    "devmemtcp_gpu_new: opts.coalesce_bytes coalesces gathers into inline launches, and with DEVMEMTCP_GPU_PERSISTENT there are none: leave one of them off");
	}
	{
		DEVMEMTCP_OPTS(gpu_opts, o, .coalesce_bytes = 1u << 20,
			       .flags = DEVMEMTCP_GPU_GRAPHS);

		assert_int_equal(devmemtcp_gpu_new(ctx, &o, &g), 0);
		devmemtcp_gpu_free(g);
	}
}

static int watchdog_on(void **state)
{
	const char *v = getenv("DEVMEMTCP_TEST_WATCHDOG");

	(void)state;
	alarm(v ? (unsigned int)strtoul(v, NULL, 0) : 120);
	return 0;
}

static int watchdog_off(void **state)
{
	(void)state;
	alarm(0);
	return 0;
}

#define T(f) cmocka_unit_test_setup_teardown(f, watchdog_on, watchdog_off)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_coalesce_options),
		T(test_coalesce_by_size),
		T(test_coalesce_bound),
		T(test_coalesce_order),
		T(test_coalesce_visible),
		T(test_coalesce_by_age),
		T(test_coalesce_wait_queues),
		T(test_gather_recv_linear),
		T(test_gather_recv_staging_waits),
		T(test_gather_recv_errors),
		T(test_flush_errors),
		T(test_gather_no_context),
	};
	const char *seed = getenv("DEVMEMTCP_TEST_SEED");
	const char *only = getenv("DEVMEMTCP_TEST_ONLY");

	if (only)
		cmocka_set_test_filter(only);
	if (seed)
		rng = strtoull(seed, NULL, 0) | 1;
	printf("seed %#llx\n", (unsigned long long)rng);
	return cmocka_run_group_tests(tests, setup, teardown);
}
