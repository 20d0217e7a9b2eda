// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Suite gpu: the CUDA provider, address mapping and the gather on a real
 * NVIDIA GPU.  Exits 77 and says why where there is none.  Test gpu-fake
 * runs it on the fake CUDA driver, tests/lib/fakecuda
 * (DEVMEMTCP_TEST_FAKE_GPU set), which executes the kernels' logic on the
 * CPU.
 *
 * Every gather is checked byte for byte against a CPU reference built from
 * the same source bytes, into a destination poisoned beforehand, with
 * poisoned guard bytes around it that must survive.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "cuda.h"
#include "buf.h"
#include "gpu.h"
#include "harness.h"
#include "forkfixture.h"
#include "rx.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
#define POISON 0xa5
#define GUARD 4096
#define SRC_SIZE (64ull << 20)

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_gpu *gpu;
static const struct dmt_cuda *cu;
static CUcontext cctx;
static CUstream stream;

/* Two source buffers (one built from 2 MiB physical chunks) and their
 * contents as the CPU wrote them. */
struct src {
	struct devmemtcp_buf *buf;
	uint8_t *host;
	uint64_t size;
};
static struct src srcs[2];

static uint64_t rng = 0x9e3779b97f4a7c15ull;

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

static uint64_t rnd_range(uint64_t lo, uint64_t hi)	/* [lo, hi] */
{
	return lo + rnd() % (hi - lo + 1);
}

#define CK(call)                                                               \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		if (r_ != CUDA_SUCCESS)                                        \
			fail_msg("%s: CUresult %d", #call, r_);               \
	} while (0)

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 8 <= n; i += 8) {
		uint64_t v = rnd();

		memcpy(p + i, &v, 8);
	}
	for (size_t i = n & ~(size_t)7; i < n; i++)
		p[i] = (uint8_t)rnd();
}

static int src_new(struct src *s, uint64_t chunk)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = SRC_SIZE, .cuda_chunk_size = chunk);
	const struct devmemtcp_segment *seg;
	int ret;

	ret = devmemtcp_buf_new(ctx, &o, &s->buf);
	if (ret)
		return ret;
	s->size = devmemtcp_buf_size(s->buf);
	s->host = malloc(s->size);
	if (!s->host)
		return -ENOMEM;
	fill_random(s->host, s->size);
	devmemtcp_buf_segments(s->buf, &seg);
	if (cu->cuMemcpyHtoD(seg[0].addr, s->host, s->size) != CUDA_SUCCESS)
		return -EIO;
	return 0;
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	CUdevice dev;
	int ret;

	if (devmemtcp_ctx_new(&co, &ctx))
		return -1;
	ret = devmemtcp_gpu_new(ctx, NULL, &gpu);
	if (ret == -ENOENT || ret == -ENODEV || ret == -ENOSYS)
		exit(t_skipped("no usable NVIDIA GPU: %s", devmemtcp_ctx_errmsg(ctx)));
	if (ret) {
		printf("devmemtcp_gpu_new: %d: %s\n", ret,
		       devmemtcp_ctx_errmsg(ctx));
		return -1;
	}
	cu = dmt_gpu_cuda(gpu);
	if (cu->cuDeviceGet(&dev, 0) ||
	    cu->cuDevicePrimaryCtxRetain(&cctx, dev) ||
	    cu->cuCtxPushCurrent(cctx) ||
	    cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))
		return -1;
	ret = src_new(&srcs[0], 0);
	if (!ret)
		ret = src_new(&srcs[1], 2u << 20);
	if (ret) {
		printf("CUDA buffer: %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
		if (ret == -EOPNOTSUPP)
			exit(t_skipped("this GPU or driver cannot export dma-bufs"));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	for (int i = 0; i < 2; i++) {
		devmemtcp_buf_free(srcs[i].buf);
		free(srcs[i].host);
	}
	cu->cuStreamDestroy(stream);
	devmemtcp_gpu_free(gpu);
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* ---- provider ----------------------------------------------------------- */

static void check_is_dmabuf(int fd)
{
	char path[64], line[256];
	bool exp_name = false;
	FILE *f;

	if (getenv("DEVMEMTCP_TEST_FAKE_GPU"))
		return;	/* the stand-in exports memfds */

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "exp_name:", 9))
			exp_name = true;
	fclose(f);
	assert_true(exp_name);	/* only dma-bufs have an exporter name */
}

static void test_alloc_exports_dmabuf(void **state)
{
	for (int i = 0; i < 2; i++) {
		const struct devmemtcp_segment *seg;
		uint8_t back[8192];
		uint64_t a;

		assert_true(devmemtcp_buf_fd(srcs[i].buf) >= 0);
		check_is_dmabuf(devmemtcp_buf_fd(srcs[i].buf));
		assert_int_equal(devmemtcp_buf_provider(srcs[i].buf),
				 DEVMEMTCP_PROVIDER_CUDA);
		assert_int_equal(srcs[i].size, SRC_SIZE);
		assert_int_equal(devmemtcp_buf_segments(srcs[i].buf, &seg), 1);
		assert_int_equal(seg[0].offset, 0);
		assert_int_equal(seg[0].len, SRC_SIZE);
		assert_int_equal(devmemtcp_buf_addr(srcs[i].buf, 12345, &a), 0);
		assert_int_equal(a, seg[0].addr + 12345);
		assert_int_equal(devmemtcp_buf_addr(srcs[i].buf, SRC_SIZE, &a),
				 -ERANGE);
		/* Across the boundary of two physical chunks (buffer 1). */
		CK(cu->cuMemcpyDtoH(back, seg[0].addr + (2u << 20) - 4096,
				    sizeof(back)));
		assert_memory_equal(back, srcs[i].host + (2u << 20) - 4096,
				    sizeof(back));
	}
}

static void test_alloc_errors(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, nosize, .provider = DEVMEMTCP_PROVIDER_CUDA);
	DEVMEMTCP_OPTS(buf_opts, nodev, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = 1 << 20, .cuda_device = 999);
	struct devmemtcp_buf *b;

	assert_int_equal(devmemtcp_buf_new(ctx, &nosize, &b), -EINVAL);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "opts.size is 0"));
	assert_int_equal(devmemtcp_buf_new(ctx, &nodev, &b), -ENODEV);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx),
			       "CUDA device 999 does not exist"));
}

/* Import a pointer that is not page aligned: dma-buf offset 0 is the page
 * under it, and the pointer keeps its offset in the segment table. */
static void test_import_keeps_pointer_offset(void **state)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	const struct devmemtcp_segment *seg;
	struct devmemtcp_buf *b;
	CUdeviceptr mem, ptr;
	uint64_t a, off;

	CK(cu->cuMemAlloc(&mem, 4 << 20));
	ptr = mem + 3 * page + 100;
	{
		DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
			       .size = 10000, .cuda_ptr = ptr);

		assert_int_equal(devmemtcp_buf_new(ctx, &o, &b), 0);
	}
	check_is_dmabuf(devmemtcp_buf_fd(b));
	assert_int_equal(devmemtcp_buf_segments(b, &seg), 1);
	assert_int_equal(seg[0].addr, mem + 3 * page);
	assert_int_equal(devmemtcp_buf_size(b),
			 (100 + 10000 + page - 1) / page * page);
	off = ptr - seg[0].addr;
	assert_int_equal(off, 100);
	assert_int_equal(devmemtcp_buf_addr(b, off, &a), 0);
	assert_int_equal(a, ptr);
	devmemtcp_buf_free(b);

	{
		DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
			       .size = 8 << 20, .cuda_ptr = mem);

		assert_int_equal(devmemtcp_buf_new(ctx, &o, &b), -EINVAL);
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx),
				       "outside its allocation"));
	}
	CK(cu->cuMemFree(mem));
}

/* ---- gather ------------------------------------------------------------- */

enum dist { D_TINY, D_ANY, D_1448, D_4K, D_MIXED, D_NDIST };
static const char *const dist_name[] = { "1..64 B", "1 B..64 KiB", "1448 B",
					 "4 KiB", "mixed" };

static uint32_t pick_len(enum dist d)
{
	switch (d) {
	case D_TINY:
		return (uint32_t)rnd_range(1, 64);
	case D_ANY:
		return (uint32_t)rnd_range(1, 65536);
	case D_1448:
		return 1448;
	case D_4K:
		return 4096;
	default:
		switch (rnd() % 5) {
		case 0:
			return 1448;
		case 1:
			return 4096;
		case 2:
			return (uint32_t)rnd_range(1, 200);
		case 3:
			return (uint32_t)rnd_range(1, 9000);
		default:
			return (uint32_t)rnd_range(1, 65536);
		}
	}
}

/* n fragments from both buffers; linear ones (every 37th when linear)
 * have no address.  Returns the total length. */
static uint64_t make_frags(struct devmemtcp_frag *f, size_t n, enum dist d,
			   bool linear)
{
	uint64_t total = 0;

	for (size_t i = 0; i < n; i++) {
		int b = (int)(rnd() & 1);
		uint32_t len = pick_len(d);
		uint64_t off;

		if (d == D_1448 || d == D_4K)
			off = rnd_range(0, srcs[b].size / 4096 - 1) * 4096;
		else
			off = rnd_range(0, srcs[b].size - len);
		f[i] = (struct devmemtcp_frag){ .offset = off, .len = len,
						.token = (uint32_t)i,
						.binding_id = (uint32_t)b + 1 };
		if (linear && i % 37 == 5) {
			f[i].flags = DEVMEMTCP_FRAG_LINEAR;
		} else {
			assert_int_equal(devmemtcp_buf_addr(srcs[b].buf, off,
							    &f[i].addr), 0);
		}
		total += len;
	}
	return total;
}

/* Source bytes of fragment f, NULL for linear ones. */
static const uint8_t *frag_bytes(const struct devmemtcp_frag *f)
{
	if (f->flags & DEVMEMTCP_FRAG_LINEAR)
		return NULL;
	return srcs[f->binding_id - 1].host + f->offset;
}

/*
 * Gather into ndst destinations laid out in one allocation with poisoned
 * gaps between them and guards around, then compare everything.
 */
static void gather_and_check(struct devmemtcp_gpu *g,
			     const struct devmemtcp_frag *f, size_t n,
			     uint64_t total, size_t ndst,
			     const uint8_t *(*bytes)(const struct devmemtcp_frag *))
{
	struct devmemtcp_gpu_iov *dst = calloc(ndst, sizeof(*dst));
	uint64_t *place = calloc(ndst, sizeof(*place));
	uint64_t span, pos = 0, cut[64];
	uint8_t *want, *got;
	CUdeviceptr mem;
	size_t bad;

	assert_true(ndst <= 64);
	/* Random cut points, destinations at random misalignment. */
	for (size_t i = 0; i + 1 < ndst; i++)
		cut[i] = rnd_range(0, total);
	cut[ndst - 1] = total;
	for (size_t i = 0; i + 1 < ndst; i++)	/* sort */
		for (size_t j = i + 1; j + 1 < ndst; j++)
			if (cut[j] < cut[i]) {
				uint64_t t = cut[i];

				cut[i] = cut[j];
				cut[j] = t;
			}
	span = GUARD;
	for (size_t i = 0; i < ndst; i++) {
		span += rnd_range(0, 15);
		place[i] = span;
		dst[i].len = cut[i] - (i ? cut[i - 1] : 0);
		span += dst[i].len + rnd_range(0, 64);
	}
	span += GUARD;

	CK(cu->cuMemAlloc(&mem, span));
	CK(cu->cuMemsetD8Async(mem, POISON, span, stream));
	for (size_t i = 0; i < ndst; i++)
		dst[i].addr = mem + place[i];
	want = malloc(span);
	got = malloc(span);
	assert_non_null(want);
	assert_non_null(got);
	memset(want, POISON, span);
	{
		size_t di = 0;
		uint64_t doff = 0;

		for (size_t i = 0; i < n; i++) {
			const uint8_t *s = bytes(&f[i]);

			for (uint32_t k = 0; k < f[i].len;) {
				uint64_t room, take;

				while (dst[di].len == doff) {
					di++;
					doff = 0;
				}
				room = dst[di].len - doff;
				take = f[i].len - k < room ? f[i].len - k : room;
				if (s)
					memcpy(want + place[di] + doff, s + k,
					       take);
				k += (uint32_t)take;
				doff += take;
				pos += take;
			}
		}
	}
	assert_int_equal(pos, total);

	assert_int_equal(devmemtcp_gpu_gather(g, f, n, dst, ndst, stream), 0);
	CK(cu->cuStreamSynchronize(stream));
	CK(cu->cuMemcpyDtoH(got, mem, span));
	for (bad = 0; bad < span && got[bad] == want[bad]; bad++)
		;
	if (bad < span)
		fail_msg("byte %zu of %llu differs: got %#x want %#x (%zu frags, %zu dsts)",
			 bad, (unsigned long long)span, got[bad], want[bad], n,
			 ndst);
	CK(cu->cuMemFree(mem));
	free(want);
	free(got);
	free(dst);
	free(place);
}

static void run_dist(struct devmemtcp_gpu *g, enum dist d, bool linear,
		     size_t ndst)
{
	/* Keep each round near 48 MiB of fragments. */
	static const size_t count[] = { 20000, 1500, 20000, 12000, 8000 };
	size_t n = count[d];
	struct devmemtcp_frag *f = calloc(n, sizeof(*f));
	uint64_t total;

	assert_non_null(f);
	total = make_frags(f, n, d, linear);
	print_message("  %-12s %6zu frags %10llu bytes into %zu dst%s%s\n",
		      dist_name[d], n, (unsigned long long)total, ndst,
		      ndst > 1 ? "s" : "", linear ? ", linear holes" : "");
	gather_and_check(g, f, n, total, ndst, frag_bytes);
	free(f);
}

static void test_gather_one_dst(void **state)
{
	for (int d = 0; d < D_NDIST; d++)
		run_dist(gpu, (enum dist)d, false, 1);
}

static void test_gather_many_dsts(void **state)
{
	for (int d = 0; d < D_NDIST; d++)
		run_dist(gpu, (enum dist)d, d % 2 == 0, 1 + rnd() % 40);
}

static void test_gather_linear_holes(void **state)
{
	run_dist(gpu, D_MIXED, true, 1);
	run_dist(gpu, D_4K, true, 3);
}

/*
 * The ways a gather can go: inline launches (small batches), launches from
 * pinned slots, several warps per fragment, and the persistent kernel.
 * Test builds select them with DEVMEMTCP_GATHER_* knobs at devmemtcp_gpu_new.
 */
struct variant {
	const char *name;
	const char *mode;	/* DEVMEMTCP_GATHER_MODE */
	const char *split;	/* DEVMEMTCP_GATHER_SPLIT */
	uint32_t flags, max_frags, slots;
	bool done_host;		/* DEVMEMTCP_GATHER_DONE_HOST */
	bool no_pdl;		/* DEVMEMTCP_GATHER_NO_PDL */
};

static const struct variant variants[] = {
	{ "auto (inline up to 1024 descriptors, programmatic dependent launch)" },
	{ "inline through graphs", .flags = DEVMEMTCP_GPU_GRAPHS },
	{ "inline by plain launches, without programmatic dependence",
	  .no_pdl = true },
	{ "slots only", .mode = "ring" },
	{ "slots, 3 warps per fragment", .mode = "ring", .split = "3" },
	{ "inline, 8 warps per fragment", .split = "8" },
	{ "persistent", .flags = DEVMEMTCP_GPU_PERSISTENT },
	{ "persistent, jobs of 64", .flags = DEVMEMTCP_GPU_PERSISTENT,
	  .max_frags = 64, .slots = 4 },
	{ "persistent, streams wait for a done word in host memory",
	  .flags = DEVMEMTCP_GPU_PERSISTENT, .done_host = true },
};

static struct devmemtcp_gpu *variant_new(const struct variant *v)
{
	DEVMEMTCP_OPTS(gpu_opts, o, .flags = v->flags,
		       .max_frags = v->max_frags, .slots = v->slots);
	struct devmemtcp_gpu *g = NULL;

	if (v->mode)
		setenv("DEVMEMTCP_GATHER_MODE", v->mode, 1);
	if (v->split)
		setenv("DEVMEMTCP_GATHER_SPLIT", v->split, 1);
	if (v->done_host)
		setenv("DEVMEMTCP_GATHER_DONE_HOST", "1", 1);
	if (v->no_pdl)
		setenv("DEVMEMTCP_GATHER_NO_PDL", "1", 1);
	if (devmemtcp_gpu_new(ctx, &o, &g))
		fail_msg("%s: %s", v->name, devmemtcp_ctx_errmsg(ctx));
	unsetenv("DEVMEMTCP_GATHER_MODE");
	unsetenv("DEVMEMTCP_GATHER_SPLIT");
	unsetenv("DEVMEMTCP_GATHER_DONE_HOST");
	unsetenv("DEVMEMTCP_GATHER_NO_PDL");
	assert_true(!v->done_host || g->ps->done_host);
	/* the fake is a compute capability 9 device, like an H200 */
	if (g->cc_major >= 9)
		assert_int_equal(g->pdl, !v->no_pdl);
	/* both drivers the suite runs on have graph calls */
	assert_int_equal(g->graphs_off, !(v->flags & DEVMEMTCP_GPU_GRAPHS));
	return g;
}

/* Gathers of the size of a receive (1..3000 fragments) into 1, up to 8
 * (inline) and more destinations, with holes, through every variant. */
/* DEVMEMTCP_TEST_VARIANTS=N: the first N variants only (a tool too slow
 * for the persistent kernel's polling). */
static size_t nvariants(void)
{
	const char *v = getenv("DEVMEMTCP_TEST_VARIANTS");
	size_t n = v ? strtoul(v, NULL, 0) : 0;

	return n && n < ARRAY_SIZE(variants) ? n : ARRAY_SIZE(variants);
}

static void test_gather_receive_sizes(void **state)
{
	static const size_t sizes[] = { 1, 2, 16, 64, 255, 256, 1000, 1024,
					1025, 3000 };

	for (size_t v = 0; v < nvariants(); v++) {
		struct devmemtcp_gpu *g = variant_new(&variants[v]);

		print_message("  %s\n", variants[v].name);
		for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
			size_t n = sizes[i];
			struct devmemtcp_frag *f = calloc(n, sizeof(*f));
			enum dist d = (enum dist)(i % D_NDIST);
			uint64_t total;

			assert_non_null(f);
			total = make_frags(f, n, d, i % 3 == 1);
			gather_and_check(g, f, n, total, 1, frag_bytes);
			gather_and_check(g, f, n, total, 1 + rnd() % 8, frag_bytes);
			gather_and_check(g, f, n, total, 9 + rnd() % 30, frag_bytes);
			free(f);
		}
		devmemtcp_gpu_free(g);
	}
}

/* Large gathers (many launches or jobs) through every variant. */
static void test_gather_variants_large(void **state)
{
	for (size_t v = 1; v < nvariants(); v++) {
		struct devmemtcp_gpu *g = variant_new(&variants[v]);

		print_message("  %s\n", variants[v].name);
		run_dist(g, D_MIXED, true, 1);
		run_dist(g, D_1448, false, 13);
		devmemtcp_gpu_free(g);
	}
}

/* Tiny slots force many launches and slot reuse; DESC_COPY reads the
 * descriptors from device memory instead. */
static void test_gather_split_launches(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, small, .max_frags = 64, .slots = 2);
	DEVMEMTCP_OPTS(gpu_opts, copy, .flags = DEVMEMTCP_GPU_DESC_COPY,
		       .max_frags = 1000, .slots = 3);
	struct devmemtcp_gpu *g;

	assert_int_equal(devmemtcp_gpu_new(ctx, &small, &g), 0);
	run_dist(g, D_MIXED, true, 1);
	run_dist(g, D_1448, false, 17);
	devmemtcp_gpu_free(g);
	assert_int_equal(devmemtcp_gpu_new(ctx, &copy, &g), 0);
	run_dist(g, D_ANY, false, 1);
	run_dist(g, D_MIXED, true, 5);
	devmemtcp_gpu_free(g);
}

/*
 * A buffer whose offset space maps to two disjoint device ranges: the
 * halves of source buffer 0, swapped (a segment table as an import of its
 * dma-buf would give).  Fragments within a 4 KiB page, as from the NIC, and
 * fragments a caller builds across the middle, where the next byte is half
 * a buffer away: they are gathered run by run.
 */
static struct devmemtcp_gpu *persistent_new(unsigned int idle_us);
static uint8_t *swapped_host;	/* the buffer's bytes in dma-buf order */

static const uint8_t *swapped_bytes(const struct devmemtcp_frag *f)
{
	return swapped_host + f->offset;
}

static void test_gather_disjoint_segments(void **state)
{
	const uint64_t half = srcs[0].size / 2;
	const struct devmemtcp_segment *seg0;
	struct devmemtcp_segment segs[2];
	struct devmemtcp_gpu *persist = persistent_new(1000);
	struct devmemtcp_buf *swapped;
	struct devmemtcp_frag *f;
	CUdeviceptr base;
	uint64_t total = 0, small = 0;
	size_t n = 6000;

	devmemtcp_buf_segments(srcs[0].buf, &seg0);
	base = seg0[0].addr;
	segs[0] = (struct devmemtcp_segment){ 0, half, base + half };
	segs[1] = (struct devmemtcp_segment){ half, half, base };
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &swapped), 0);
	swapped->size = srcs[0].size;
	assert_int_equal(dmt_buf_set_segments(swapped, segs, 2), 0);
	swapped_host = malloc(srcs[0].size);
	assert_non_null(swapped_host);
	memcpy(swapped_host, srcs[0].host + half, half);
	memcpy(swapped_host + half, srcs[0].host, half);
	f = calloc(n, sizeof(*f));
	for (size_t i = 0; i < n; i++) {
		uint64_t page = rnd_range(0, srcs[0].size / 4096 - 1);
		uint32_t in = (uint32_t)rnd_range(0, 4095);
		uint32_t len = (uint32_t)rnd_range(1, 4096 - in);

		f[i].offset = page * 4096 + in;
		if (i % 10 == 3) {	/* across the middle */
			len = (uint32_t)rnd_range(2, 65536);
			f[i].offset = half - rnd_range(1, len - 1);
		}
		f[i].len = len;
		assert_int_equal(devmemtcp_buf_addr(swapped, f[i].offset,
						    &f[i].addr), 0);
		/* the mapping itself */
		if (f[i].offset < half)
			assert_int_equal(f[i].addr, base + half + f[i].offset);
		else
			assert_int_equal(f[i].addr, base + f[i].offset - half);
		total += len;
		if (i < 64)
			small += len;
	}
	gather_and_check(gpu, f, n, total, 1, swapped_bytes);
	gather_and_check(gpu, f, n, total, 7, swapped_bytes);
	gather_and_check(gpu, f, 64, small, 1, swapped_bytes);	/* inline */
	gather_and_check(persist, f, n, total, 5, swapped_bytes);
	gather_and_check(persist, f, 64, small, 1, swapped_bytes);
	free(f);
	free(swapped_host);
	devmemtcp_buf_free(swapped);
	devmemtcp_gpu_free(persist);
}

/* ---- ordering on the caller's stream, the persistent kernel ------------- */

/* A gather and the bytes it must produce, into a fresh allocation. */
struct job {
	struct devmemtcp_frag *f;
	size_t n;
	uint64_t total;
	CUdeviceptr dst;
	uint8_t *want;
};

static void job_new(struct job *j, size_t n, enum dist d)
{
	uint64_t pos = 0;

	j->n = n;
	j->f = calloc(n, sizeof(*j->f));
	assert_non_null(j->f);
	j->total = make_frags(j->f, n, d, false);
	j->want = malloc(j->total);
	assert_non_null(j->want);
	for (size_t i = 0; i < n; i++) {
		memcpy(j->want + pos, frag_bytes(&j->f[i]), j->f[i].len);
		pos += j->f[i].len;
	}
	CK(cu->cuMemAlloc(&j->dst, j->total));
}

static void job_gather(struct devmemtcp_gpu *g, struct job *j, CUstream st)
{
	struct devmemtcp_gpu_iov d = { j->dst, j->total };

	if (devmemtcp_gpu_gather(g, j->f, j->n, &d, 1, st))
		fail_msg("gather: %s", devmemtcp_gpu_errmsg(g));
}

/* The bytes at dev (synchronous copy) are the job's. */
static void job_check(const struct job *j, CUdeviceptr dev, const char *what)
{
	uint8_t *got = malloc(j->total);
	size_t bad = 0;

	assert_non_null(got);
	CK(cu->cuMemcpyDtoH(got, dev, j->total));
	while (bad < j->total && got[bad] == j->want[bad])
		bad++;
	if (bad < j->total)
		fail_msg("%s: byte %zu of %llu differs", what, bad,
			 (unsigned long long)j->total);
	free(got);
}

static void job_free(struct job *j)
{
	CK(cu->cuMemFree(j->dst));
	free(j->f);
	free(j->want);
}

/*
 * A gather runs after the work queued before it on the stream (a poisoning
 * memset behind a spinning kernel) and before the work queued after it (a
 * copy of its destination), in every variant.
 */
static void test_gather_ordered_on_stream(void **state)
{
	for (size_t v = 0; v < nvariants(); v++) {
		struct devmemtcp_gpu *g = variant_new(&variants[v]);
		CUdeviceptr copy;
		struct job j;

		job_new(&j, 300, D_MIXED);
		CK(cu->cuMemAlloc(&copy, j.total));
		assert_int_equal(dmt_gpu_spin(g, stream, 100ull * 1000 * 1000), 0);
		CK(cu->cuMemsetD8Async(j.dst, POISON, j.total, stream));
		job_gather(g, &j, stream);
		CK(cu->cuMemcpyDtoDAsync(copy, j.dst, j.total, stream));
		CK(cu->cuStreamSynchronize(stream));
		print_message("  %s\n", variants[v].name);
		job_check(&j, j.dst, "destination");
		job_check(&j, copy, "copy queued after the gather");
		CK(cu->cuMemFree(copy));
		job_free(&j);
		devmemtcp_gpu_free(g);
	}
}

/*
 * With DEVMEMTCP_GPU_GRAPHS, inline gathers go through graphs of their own
 * stream: gathers of every
 * inline size, alternating over more streams than the handle keeps graphs
 * for, each after a spin on its stream, land each in its own destination,
 * and each was one graph launch; the handle then holds the graphs of the
 * streams used last.  Streams being captured and the per-thread default
 * stream take plain launches.
 */
static void test_gather_graphs_per_stream(void **state)
{
	enum { NS = DMT_GRAPH_STREAMS + 2, ROUNDS = 3 };
	static const size_t sizes[] = { 3, 16, 40, 64, 200, 256, 700, 1024 };
	struct job j[ROUNDS][NS];
	DEVMEMTCP_OPTS(gpu_opts, o, .flags = DEVMEMTCP_GPU_GRAPHS);
	struct devmemtcp_gpu *g;
	CUstream s[NS];
	uint64_t launches0;
	size_t k = 0;

	(void)state;
	assert_int_equal(devmemtcp_gpu_new(ctx, &o, &g), 0);
	assert_false(g->graphs_off);
	launches0 = g->graph_launches;
	for (int i = 0; i < NS; i++)
		CK(cu->cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NS; i++) {
			job_new(&j[r][i], sizes[k++ % ARRAY_SIZE(sizes)], D_4K);
			assert_int_equal(dmt_gpu_spin(g, s[i], 20ull * 1000), 0);
			CK(cu->cuMemsetD8Async(j[r][i].dst, POISON, j[r][i].total,
					       s[i]));
			job_gather(g, &j[r][i], s[i]);
		}
	}
	for (int i = 0; i < NS; i++)
		CK(cu->cuStreamSynchronize(s[i]));
	for (int r = 0; r < ROUNDS; r++)
		for (int i = 0; i < NS; i++) {
			job_check(&j[r][i], j[r][i].dst, "gather through a graph");
			job_free(&j[r][i]);
		}
	assert_int_equal(g->graph_launches - launches0, ROUNDS * NS);
	for (int i = 0; i < DMT_GRAPH_STREAMS; i++) {
		bool kept = false;

		for (int c = 0; c < DMT_GRAPH_STREAMS; c++)
			kept |= g->graphs[c].used &&
				g->graphs[c].stream == s[NS - DMT_GRAPH_STREAMS + i];
		assert_true(kept);
	}

	/* the per-thread default stream: a plain launch */
	launches0 = g->graph_launches;
	job_new(&j[0][0], 64, D_4K);
	job_gather(g, &j[0][0], CU_STREAM_PER_THREAD);
	CK(cu->cuStreamSynchronize(CU_STREAM_PER_THREAD));
	job_check(&j[0][0], j[0][0].dst, "gather on the per-thread stream");
	assert_int_equal(g->graph_launches, launches0);
	/* a stream being captured (the fake driver's knob): a plain launch */
	if (getenv("DEVMEMTCP_TEST_FAKE_GPU")) {
		CK(cu->cuMemsetD8Async(j[0][0].dst, POISON, j[0][0].total, s[0]));
		setenv("DEVMEMTCP_FAKE_CUDA_CAPTURING", "1", 1);
		job_gather(g, &j[0][0], s[0]);
		unsetenv("DEVMEMTCP_FAKE_CUDA_CAPTURING");
		CK(cu->cuStreamSynchronize(s[0]));
		job_check(&j[0][0], j[0][0].dst, "gather on a capturing stream");
		assert_int_equal(g->graph_launches, launches0);
	}
	job_free(&j[0][0]);
	for (int i = 0; i < NS; i++)
		CK(cu->cuStreamDestroy(s[i]));
	devmemtcp_gpu_free(g);
}

/*
 * Gathers queued back to back, each reading what the one before wrote:
 * stage k gathers the fragments of buffer k - 1, in a shuffled order,
 * into buffer k.  All are queued behind a spinning kernel, so on a GPU
 * that can, each launch is ready to start while the one before still
 * runs (programmatic dependent launch): a gather that read its source or
 * wrote its destination before the previous one completed gives the wrong
 * bytes.  Fragments of 4 KiB (warps share a fragment: the two-dimensional
 * grid) and of 256 bytes (a warp a fragment: the one-dimensional one),
 * and 3000 of them (launches from pinned slots), through every variant
 * that launches.
 */
static void chain(struct devmemtcp_gpu *g, uint32_t fl, size_t n)
{
	enum { STAGES = 6 };
	const uint64_t size = (uint64_t)fl * n;
	struct devmemtcp_frag *f = calloc(n, sizeof(*f));
	size_t *perm = calloc(n, sizeof(*perm));
	uint8_t *want = malloc(size), *next = malloc(size), *got = malloc(size);
	CUdeviceptr b[STAGES + 1];

	assert_true(f && perm && want && next && got);
	for (int k = 0; k <= STAGES; k++) {
		CK(cu->cuMemAlloc(&b[k], size));
		CK(cu->cuMemsetD8Async(b[k], POISON, size, stream));
	}
	CK(cu->cuStreamSynchronize(stream));
	fill_random(want, size);
	CK(cu->cuMemcpyHtoD(b[0], want, size));
	assert_int_equal(dmt_gpu_spin(g, stream, 50ull * 1000 * 1000), 0);
	for (int k = 1; k <= STAGES; k++) {
		struct devmemtcp_gpu_iov d = { b[k], size };

		for (size_t i = 0; i < n; i++)
			perm[i] = i;
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = rnd() % (i + 1), t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
		}
		for (size_t i = 0; i < n; i++) {
			f[i] = (struct devmemtcp_frag){ .addr = b[k - 1] + perm[i] * fl,
							.len = fl };
			memcpy(next + i * fl, want + perm[i] * fl, fl);
		}
		memcpy(want, next, size);
		if (devmemtcp_gpu_gather(g, f, n, &d, 1, stream))
			fail_msg("gather: %s", devmemtcp_gpu_errmsg(g));
	}
	CK(cu->cuStreamSynchronize(stream));
	CK(cu->cuMemcpyDtoH(got, b[STAGES], size));
	assert_memory_equal(got, want, size);
	for (int k = 0; k <= STAGES; k++)
		CK(cu->cuMemFree(b[k]));
	free(f);
	free(perm);
	free(want);
	free(next);
	free(got);
}

static void test_gather_chain_back_to_back(void **state)
{
	(void)state;
	for (size_t v = 0; v < nvariants(); v++) {
		struct devmemtcp_gpu *g;
		uint64_t pdl0, graph0;

		if (variants[v].flags & DEVMEMTCP_GPU_PERSISTENT)
			continue;
		g = variant_new(&variants[v]);
		pdl0 = g->pdl_launches;
		graph0 = g->graph_launches;
		print_message("  %s\n", variants[v].name);
		chain(g, 4096, 64);
		chain(g, 256, 1024);
		chain(g, 1448, 700);
		/* how the 18 inline gathers were launched */
		if (!variants[v].mode) {
			bool graphs = variants[v].flags & DEVMEMTCP_GPU_GRAPHS;

			assert_int_equal(g->graph_launches - graph0,
					 graphs ? 18 : 0);
			assert_int_equal(g->pdl_launches - pdl0,
					 !graphs && g->pdl ? 18 : 0);
		}
		/* more pieces than an inline launch takes: from slots, with
		 * programmatic dependence too */
		pdl0 = g->pdl_launches;
		chain(g, 256, 3000);
		if (g->pdl && !(variants[v].flags & DEVMEMTCP_GPU_DESC_COPY))
			assert_true(g->pdl_launches - pdl0 >= 6);
		devmemtcp_gpu_free(g);
	}
}

static struct devmemtcp_gpu *persistent_new(unsigned int idle_us)
{
	DEVMEMTCP_OPTS(gpu_opts, o, .flags = DEVMEMTCP_GPU_PERSISTENT);
	struct devmemtcp_gpu *g = NULL;
	char v[32];

	snprintf(v, sizeof(v), "%u", idle_us);
	setenv("DEVMEMTCP_GATHER_IDLE_US", v, 1);
	assert_int_equal(devmemtcp_gpu_new(ctx, &o, &g), 0);
	unsetenv("DEVMEMTCP_GATHER_IDLE_US");
	return g;
}

static char warned[512];

static void keep_warning(void *user, int level, const char *msg)
{
	(void)user;
	if (level == DEVMEMTCP_LOG_WARN && strstr(msg, "PERSISTENT"))
		snprintf(warned, sizeof(warned), "%s", msg);
}

/* The persistent kernel is never chosen without a word: it measured
 * slower than launches, and devmemtcp_gpu_new says so. */
static void test_persistent_warns(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = keep_warning,
		       .log_level = DEVMEMTCP_LOG_WARN);
	DEVMEMTCP_OPTS(gpu_opts, o, .flags = DEVMEMTCP_GPU_PERSISTENT);
	struct devmemtcp_ctx *c;
	struct devmemtcp_gpu *g;

	assert_int_equal(devmemtcp_ctx_new(&co, &c), 0);
	warned[0] = 0;
	assert_int_equal(devmemtcp_gpu_new(c, NULL, &g), 0);
	assert_string_equal(warned, "");
	devmemtcp_gpu_free(g);
	assert_int_equal(devmemtcp_gpu_new(c, &o, &g), 0);
	assert_string_equal(warned, "devmemtcp_gpu_new: DEVMEMTCP_GPU_PERSISTENT measured about 1 ms from a gather call to its bytes in place on an NVIDIA H200 (a launch: 12 us at 1 MiB): leave the flag off unless bench-gather -t latency shows otherwise on this machine");
	devmemtcp_gpu_free(g);
	devmemtcp_ctx_free(c);
}

/* The kernel's stream becomes idle within 2 s: it stopped. */
static void wait_stopped(struct devmemtcp_gpu *g)
{
	double t0 = now_s();
	CUresult r;

	while ((r = cu->cuStreamQuery(g->ps->stream)) == CUDA_ERROR_NOT_READY) {
		if (now_s() - t0 > 2)
			fail_msg("the persistent kernel did not stop when idle");
		usleep(1000);
	}
	CK(r);
}

/* Idle, the kernel stops (a device synchronisation returns); the next
 * gather starts it again. */
static void test_persistent_stops_when_idle(void **state)
{
	struct devmemtcp_gpu *g = persistent_new(2000);
	struct job j, k;

	job_new(&j, 64, D_4K);
	job_new(&k, 64, D_1448);
	job_gather(g, &j, stream);
	CK(cu->cuStreamSynchronize(stream));
	job_check(&j, j.dst, "first gather");
	assert_int_equal(dmt_gpu_persist_launches(g), 1);
	wait_stopped(g);
	CK(cu->cuCtxSynchronize());
	/* back to back: the same generation takes both */
	job_gather(g, &k, stream);
	job_gather(g, &j, stream);
	CK(cu->cuStreamSynchronize(stream));
	job_check(&k, k.dst, "gather after the stop");
	job_check(&j, j.dst, "gather after that");
	assert_int_equal(dmt_gpu_persist_launches(g), 2);
	/* many idle stops and restarts, racing the stopping block */
	for (int i = 0; i < 200; i++) {
		job_gather(g, i % 2 ? &j : &k, stream);
		CK(cu->cuStreamSynchronize(stream));
		usleep((useconds_t)(rnd() % 4000));
	}
	job_check(&j, j.dst, "after 200 restarts");
	job_check(&k, k.dst, "after 200 restarts");
	print_message("  %llu kernel starts for 203 gathers with 2 ms idle stops\n",
		      (unsigned long long)dmt_gpu_persist_launches(g));
	devmemtcp_gpu_free(g);
	job_free(&j);
	job_free(&k);
}

/* Gathers on two streams, the first held back by a spinning kernel, and
 * the handle freed while both wait: free waits, the bytes arrive. */
static void test_persistent_streams_and_free(void **state)
{
	struct devmemtcp_gpu *g = persistent_new(1000);
	CUstream other;
	struct job a, b;
	double t0;

	job_new(&a, 500, D_MIXED);
	job_new(&b, 2000, D_4K);
	CK(cu->cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
	t0 = now_s();
	assert_int_equal(dmt_gpu_spin(g, stream, 300ull * 1000 * 1000), 0);
	job_gather(g, &a, stream);
	job_gather(g, &b, other);
	devmemtcp_gpu_free(g);
	assert_true(now_s() - t0 >= 0.29);	/* free waited for the jobs */
	CK(cu->cuStreamSynchronize(other));
	CK(cu->cuStreamSynchronize(stream));
	job_check(&a, a.dst, "held-back stream");
	job_check(&b, b.dst, "other stream");
	CK(cu->cuStreamDestroy(other));
	job_free(&a);
	job_free(&b);
}

static void test_gather_errors(void **state)
{
	struct devmemtcp_frag f[2] = {
		{ .addr = 0, .offset = 0x3000, .len = 10, .binding_id = 4 },
		{ .addr = 0x1000, .len = 10 },
	};
	struct devmemtcp_gpu_iov dst = { 0x1000, 19 };

	/* ERRORS devmemtcp_gpu_gather EINVAL */
	assert_int_equal(devmemtcp_gpu_gather(gpu, f, 2, &dst, 1, stream),
			 -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "fragment 0 (binding 4, offset 0x3000) has no device address: register its binding's buffer with devmemtcp_rx_add_buf");
	f[0].addr = 0x2000;
	/* ERRORS devmemtcp_gpu_gather ENOSPC */
	assert_int_equal(devmemtcp_gpu_gather(gpu, f, 2, &dst, 1, stream),
			 -ENOSPC);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "the fragments hold 20 bytes but the destinations only 19: give more room");
	assert_int_equal(devmemtcp_gpu_gather(gpu, f, 0, &dst, 1, stream), 0);
	assert_int_equal(devmemtcp_gpu_gather(gpu, NULL, 2, &dst, 1, stream),
			 -EINVAL);
}

static void test_view_of_received(void **state)
{
	struct devmemtcp_frag f[3];
	struct devmemtcp_gpu_iov iov[3];
	uint64_t a;

	devmemtcp_buf_addr(srcs[1].buf, 8192, &a);
	f[0] = (struct devmemtcp_frag){ .offset = 8192, .addr = a, .len = 4096 };
	f[1] = (struct devmemtcp_frag){ .offset = 12288, .addr = a + 4096,
					.len = 100 };
	f[2] = (struct devmemtcp_frag){ .offset = 0, .addr = a - 8192,
					.len = 7 };
	assert_int_equal(devmemtcp_gpu_view(gpu, f, 3, iov, 3), 2);
	assert_int_equal(iov[0].addr, a);
	assert_int_equal(iov[0].len, 4196);
	assert_int_equal(iov[1].addr, a - 8192);
	assert_int_equal(iov[1].len, 7);
}

/* ---- deferred release --------------------------------------------------- */

/* Tokens the application holds (1), as received; returned by
 * count_dontneed, which fails the test on a token returned twice or never
 * received, and counts what came back in `returned`. */
#define NTOKENS (1u << 16)
static uint8_t live[NTOKENS];
static uint32_t returned;

static int count_dontneed(void *arg, const struct dmt_dmabuf_token *t,
			  size_t n)
{
	int freed = 0;

	(void)arg;
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < t[i].token_count; j++) {
			uint32_t tok = t[i].token_start + j;

			if (tok >= NTOKENS || !live[tok])
				fail_msg("token %u returned twice or never received", tok);
			live[tok] = 0;
			freed++;
		}
	returned += (uint32_t)freed;
	return freed;
}

/*
 * The token manager's deferred mode with a fence: while a long kernel runs
 * ahead of the gather on the stream, no token goes back; afterwards all do.
 */
static void fence_holds_tokens(struct devmemtcp_gpu *g)
{
	const size_t n = 1000;
	const uint64_t spin_ns = 1500ull * 1000 * 1000;
	struct devmemtcp_frag *f = calloc(n, sizeof(*f));
	struct devmemtcp_gpu_fence *fence;
	struct dmt_tokens t;
	uint64_t total;
	CUdeviceptr mem;
	struct devmemtcp_gpu_iov dst;
	size_t bad;
	double t0;
	int ret;

	total = make_frags(f, n, D_4K, false);
	CK(cu->cuMemAlloc(&mem, total));
	dst = (struct devmemtcp_gpu_iov){ mem, total };
	dmt_tokens_init(&t, 0, count_dontneed, NULL);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(dmt_tokens_received(&t, f[i].token), 0);
		live[f[i].token] = 1;
	}

	t0 = now_s();
	assert_int_equal(dmt_gpu_spin(g, stream, spin_ns), 0);
	assert_int_equal(devmemtcp_gpu_gather(g, f, n, &dst, 1, stream), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	assert_int_equal(dmt_tokens_take(&t, f, n, &bad), 0);
	assert_int_equal(dmt_tokens_defer(&t, f, n, devmemtcp_gpu_fence_done,
					  fence), 0);

	/* The kernel still spins: nothing may go back. */
	assert_int_equal(dmt_tokens_poll(&t, false), 0);
	assert_true(dmt_tokens_flush(&t) <= 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(live[f[i].token], 1);
	assert_true(now_s() - t0 < spin_ns / 1e9);	/* else the test proves nothing */

	/* Waiting returns them all, not before the spin ended. */
	ret = dmt_tokens_poll(&t, true);
	assert_int_equal(ret, (int)n);
	assert_true(now_s() - t0 >= spin_ns / 1e9 * 0.99);
	assert_int_equal(dmt_tokens_flush(&t), (int)n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(live[f[i].token], 0);
	dmt_tokens_fini(&t);
	CK(cu->cuMemFree(mem));
	free(f);
}

/* A handle whose fences are CUDA events (what drivers without stream
 * memory operations get). */
static struct devmemtcp_gpu *events_new(void)
{
	struct devmemtcp_gpu *g = NULL;

	setenv("DEVMEMTCP_GPU_FENCE_EVENTS", "1", 1);
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
	unsetenv("DEVMEMTCP_GPU_FENCE_EVENTS");
	assert_true(g->fence_events);
	return g;
}

static void test_tokens_held_until_fence(void **state)
{
	struct devmemtcp_gpu *g = persistent_new(1000);
	struct devmemtcp_gpu *ev = events_new();

	assert_false(gpu->fence_events);	/* words, written by the stream */
	fence_holds_tokens(gpu);
	fence_holds_tokens(g);
	fence_holds_tokens(ev);
	devmemtcp_gpu_free(g);
	devmemtcp_gpu_free(ev);
}

static void fence_polls(struct devmemtcp_gpu *g)
{
	struct devmemtcp_gpu_fence *fence;

	assert_int_equal(dmt_gpu_spin(g, stream, 300ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, false), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, false), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	/* fence is freed (recycled) now; a new one on an idle stream */
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	/* the same object again: its next use waits for its own write */
	assert_int_equal(dmt_gpu_spin(g, stream, 100ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, false), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, NULL), -EINVAL);
	assert_int_equal(devmemtcp_gpu_fence_done(NULL, false), -EINVAL);
}

/*
 * fence_done(f, true) is as prompt as polling: it spins (with a pause)
 * for the first 200 µs before it sleeps, so a fence behind 100 µs of
 * work completes without a sleep (at least once in five tries: the
 * machine may be busy); a long wait sleeps, in growing steps.
 */
static void test_fence_wait_spins_first(void **state)
{
	struct devmemtcp_gpu_fence *fence;
	uint64_t s0;
	int unslept = 0;

	for (int i = 0; i < 5; i++) {
		CK(cu->cuStreamSynchronize(stream));
		s0 = gpu->fence_sleeps;
		assert_int_equal(dmt_gpu_spin(gpu, stream, 100ull * 1000), 0);
		assert_int_equal(devmemtcp_gpu_fence_new(gpu, stream, &fence), 0);
		assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
		unslept += gpu->fence_sleeps == s0;
	}
	if (!unslept)
		fail_msg("every wait for a fence behind 100 µs of work slept");
	/* 50 ms: sleeps, but not 20 µs at a time */
	s0 = gpu->fence_sleeps;
	assert_int_equal(dmt_gpu_spin(gpu, stream, 50ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(gpu, stream, &fence), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	assert_true(gpu->fence_sleeps > s0);
	assert_true(gpu->fence_sleeps - s0 < 200);
}

static void test_fence_done_polls(void **state)
{
	struct devmemtcp_gpu *ev = events_new();

	fence_polls(gpu);
	fence_polls(ev);
	devmemtcp_gpu_free(ev);
}

/*
 * A fence made for a release that then failed is never handed out, but
 * its stream still writes its word: it is not used again before that
 * write has landed (a later use's value could be overwritten by it), and
 * the handle's end waits for it.
 */
static void test_fence_retired_until_written(void **state)
{
	struct devmemtcp_frag f = { .addr = 0x1000, .len = 1, .token = 7 };
	struct devmemtcp_gpu_fence *fence, *again;
	struct devmemtcp_gpu *g;
	struct devmemtcp_rx *rx;
	CUstream other;
	int sv[2];

	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], NULL, &rx), 0);
	CK(cu->cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
	/* one fence object, recycled: it is the one the release takes */
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	assert_int_equal(dmt_gpu_spin(g, stream, 300ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_release_after(g, rx, &f, 1, stream),
			 -EINVAL);
	assert_ptr_equal(g->retired_fences, fence);
	assert_null(g->free_fences);
	/* another stream's fence gets another object, and completes */
	assert_int_equal(devmemtcp_gpu_fence_new(g, other, &again), 0);
	assert_ptr_not_equal(again, fence);
	assert_int_equal(devmemtcp_gpu_fence_done(again, true), 1);
	assert_ptr_equal(g->retired_fences, fence);
	/* once the spin is over, the retired one is taken back */
	CK(cu->cuStreamSynchronize(stream));
	assert_int_equal(devmemtcp_gpu_fence_new(g, other, &again), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(g, other, &fence), 0);
	assert_null(g->retired_fences);
	assert_int_equal(devmemtcp_gpu_fence_done(again, true), 1);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	/* retired at the handle's end: freeing waits for the write */
	assert_int_equal(dmt_gpu_spin(g, stream, 100ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_release_after(g, rx, &f, 1, stream),
			 -EINVAL);
	assert_non_null(g->retired_fences);
	devmemtcp_gpu_free(g);
	CK(cu->cuStreamDestroy(other));
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
}

/* A fence may outlive its handle. */
static void test_fence_outlives_gpu(void **state)
{
	struct devmemtcp_gpu_fence *fence;
	struct devmemtcp_gpu *g;

	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
	assert_int_equal(dmt_gpu_spin(g, stream, 100ull * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
	devmemtcp_gpu_free(g);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, false), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
}

/*
 * Fences take their pinned words from the process's pool, filled when a
 * handle is made: neither a fence nor a handle's end allocates or frees
 * pinned memory (cuMemHostAlloc and cuMemFreeHost may wait for the whole
 * device; the stand-in's do, with DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC=1).
 * A word a freed handle gave back is zeroed: a fence that reuses it is
 * not complete before its own write.
 */
static void test_fence_does_not_wait_for_device(void **state)
{
	struct devmemtcp_gpu_fence *fence;
	struct devmemtcp_gpu *g;
	CUstream other;
	double t0;

	CK(cu->cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
	for (int round = 0; round < 2; round++) {
		assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
		assert_int_equal(dmt_gpu_spin(g, stream, 400ull * 1000 * 1000), 0);
		setenv("DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC", "1", 1);
		t0 = now_s();
		/* the first fence of the handle, on an idle stream */
		assert_int_equal(devmemtcp_gpu_fence_new(g, other, &fence), 0);
		assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
		unsetenv("DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC");
		if (now_s() - t0 > 0.2)
			fail_msg("a fence on an idle stream took %.0f ms: it waited for another stream",
				 (now_s() - t0) * 1e3);
		assert_int_equal(cu->cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
		/* behind the spin: a reused word does not say done */
		assert_int_equal(devmemtcp_gpu_fence_new(g, stream, &fence), 0);
		assert_int_equal(devmemtcp_gpu_fence_done(fence, false), 0);
		assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
		devmemtcp_gpu_free(g);
	}
	CK(cu->cuStreamDestroy(other));
}

/* ---- devmemtcp_gpu_gather_release ---------------------------------------- */

/* A receiver whose binding 1 is srcs[0] (dma-buf offset = offset in it),
 * its token returns counted by count_dontneed. */
struct gr {
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	int sv[2];
	uint32_t next_tok;
};

static void gr_open(struct gr *r)
{
	const struct devmemtcp_segment *seg;
	struct devmemtcp_segment s;

	memset(live, 0, sizeof(live));
	returned = 0;
	r->next_tok = 0;
	devmemtcp_buf_segments(srcs[0].buf, &seg);
	s = (struct devmemtcp_segment){ 0, srcs[0].size, seg[0].addr };
	assert_int_equal(t_tcp_pair(r->sv), 0);
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &r->buf), 0);
	r->buf->size = s.len;
	assert_int_equal(dmt_buf_set_segments(r->buf, &s, 1), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, r->sv[1], NULL, &r->rx), 0);
	assert_int_equal(devmemtcp_rx_add_buf(r->rx, 1, r->buf), 0);
	dmt_rx_tokens(r->rx)->dontneed = count_dontneed;
}

static void gr_close(struct gr *r)
{
	devmemtcp_rx_free(r->rx);
	devmemtcp_buf_free(r->buf);
	close(r->sv[0]);
	close(r->sv[1]);
}

/* n fragments of len bytes at random offsets of srcs[0], received through
 * r->rx (new tokens); their bytes, in order, into want. */
static void gr_receive(struct gr *r, struct devmemtcp_frag *f, uint32_t n,
		       uint32_t len, uint8_t *want)
{
	const size_t sp = CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg));
	char *ctrl = aligned_alloc(8, n * sp);
	struct msghdr msg = { .msg_control = ctrl, .msg_controllen = n * sp };
	struct cmsghdr *cm;
	uint32_t i = 0;

	assert_non_null(ctrl);
	memset(ctrl, 0, n * sp);
	for (cm = CMSG_FIRSTHDR(&msg); i < n; i++, cm = CMSG_NXTHDR(&msg, cm)) {
		struct dmt_dmabuf_cmsg d = {
			.frag_offset = rnd_range(0, srcs[0].size / len - 1) * len,
			.frag_size = len,
			.frag_token = r->next_tok % NTOKENS,
			.dmabuf_id = 1,
		};

		assert_int_equal(live[d.frag_token], 0);
		live[d.frag_token] = 1;
		r->next_tok++;
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_DEVMEM_DMABUF;
		cm->cmsg_len = CMSG_LEN(sizeof(d));
		memcpy(CMSG_DATA(cm), &d, sizeof(d));
		if (want)
			memcpy(want + (size_t)i * len, srcs[0].host + d.frag_offset,
			       len);
	}
	assert_int_equal(dmt_rx_process(r->rx, &msg, (size_t)n * len, f, n),
			 (int)n);
	free(ctrl);
}

/* Flush until `count` tokens came back in all or timeout_s passed. */
static bool gr_wait(struct gr *r, uint32_t count, double timeout_s)
{
	double t0 = now_s();

	while (returned < count && now_s() - t0 < timeout_s)
		assert_true(devmemtcp_rx_flush(r->rx) >= 0);
	return returned >= count;
}

/*
 * The tokens of a gather_release come back once the gather has read the
 * bytes: not while the kernel queued before it runs, and while a long
 * kernel queued after it still runs.  The gather's kernel signals the
 * fence (no stream operation but the launch: on the fake driver, one that
 * refuses stream memory operations); the bytes are the fragments'.
 */
static void test_gather_release_tokens(void **state)
{
	const uint64_t before_ns = 300ull * 1000 * 1000, after_ns = 3000ull * 1000 * 1000;
	struct devmemtcp_frag f[64];
	uint8_t *want = malloc(64 * 4096), *got = malloc(64 * 4096);
	struct devmemtcp_gpu_iov d;
	CUdeviceptr dst;
	bool fake = getenv("DEVMEMTCP_TEST_FAKE_GPU") != NULL;
	uint64_t fences0;
	struct gr r;
	double t0, t_back;

	(void)state;
	assert_true(want && got);
	gr_open(&r);
	CK(cu->cuMemAlloc(&dst, 64 * 4096));
	d = (struct devmemtcp_gpu_iov){ dst, 64 * 4096 };
	gr_receive(&r, f, 64, 4096, want);
	t0 = now_s();
	fences0 = gpu->kernel_fences;
	assert_int_equal(dmt_gpu_spin(gpu, stream, before_ns), 0);
	if (fake)
		setenv("DEVMEMTCP_FAKE_CUDA_FAIL", "cuStreamWriteValue32_v2=1", 1);
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, f, 64, &d, 1, stream), 0);
	unsetenv("DEVMEMTCP_FAKE_CUDA_FAIL");
	assert_int_equal(gpu->kernel_fences - fences0, 1);
	assert_int_equal(dmt_gpu_spin(gpu, stream, after_ns), 0);
	/* the kernel before still runs: nothing back */
	assert_true(devmemtcp_rx_flush(r.rx) >= 0);
	assert_int_equal(returned, 0);
	assert_true(now_s() - t0 < before_ns / 1e9);	/* else this proves nothing */
	assert_true(gr_wait(&r, 64, after_ns / 1e9));
	t_back = now_s() - t0;
	assert_true(t_back >= before_ns / 1e9 * 0.99);
	assert_true(t_back < (before_ns + after_ns) / 1e9 * 0.9);
	CK(cu->cuStreamSynchronize(stream));
	CK(cu->cuMemcpyDtoH(got, dst, 64 * 4096));
	assert_memory_equal(got, want, 64 * 4096);
	for (uint32_t i = 0; i < 64; i++)
		assert_int_equal(live[f[i].token], 0);
	CK(cu->cuMemFree(dst));
	gr_close(&r);
	free(want);
	free(got);
}

/*
 * Every way a gather is queued: inline (1 to 1024 pieces), from slots
 * (3000), in several launches (a handle of 256 descriptors a launch), a
 * handle whose fences are events and a persistent one (both release after
 * the stream instead), all back to back; each token comes back once, each
 * destination holds its bytes, and the handles' fences are reused (300
 * gathers, more than a page of words is never needed).
 */
static void test_gather_release_every_way(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, small, .max_frags = 256);
	static const uint32_t sizes[] = { 1, 16, 64, 200, 1024, 3000 };
	enum { CALLS = 60 };
	struct devmemtcp_gpu *hs[4] = { gpu, NULL, NULL, NULL };
	struct devmemtcp_frag *f = calloc(3000, sizeof(*f));
	uint8_t *want = malloc(3000 * 1448), *got = malloc(3000 * 1448);
	uint32_t sent = 0;
	CUdeviceptr dst[2];
	struct gr r;

	(void)state;
	assert_true(f && want && got);
	assert_int_equal(devmemtcp_gpu_new(ctx, &small, &hs[1]), 0);
	hs[2] = events_new();
	hs[3] = persistent_new(0);
	gr_open(&r);
	CK(cu->cuMemAlloc(&dst[0], 3000 * 1448));
	CK(cu->cuMemAlloc(&dst[1], 3000 * 1448));
	for (int h = 0; h < 4; h++) {
		uint64_t fences0 = hs[h]->kernel_fences;

		for (int c = 0; c < CALLS; c++) {
			uint32_t n = sizes[c % ARRAY_SIZE(sizes)];
			uint32_t len = c & 1 ? 1448 : 4096;
			struct devmemtcp_gpu_iov d;

			if ((uint64_t)n * len > 3000 * 1448)
				len = 1448;
			d = (struct devmemtcp_gpu_iov){ dst[c & 1], (uint64_t)n * len };
			gr_receive(&r, f, n, len, c == CALLS - 1 ? want : NULL);
			if (devmemtcp_gpu_gather_release(hs[h], r.rx, f, n, &d, 1, stream))
				fail_msg("handle %d, call %d: %s", h, c,
					 devmemtcp_gpu_errmsg(hs[h]));
			sent += n;
			if (c == CALLS - 1) {
				CK(cu->cuStreamSynchronize(stream));
				CK(cu->cuMemcpyDtoH(got, dst[c & 1], d.len));
				assert_memory_equal(got, want, d.len);
			}
		}
		assert_true(gr_wait(&r, sent, 30));
		assert_int_equal(returned, sent);
		/* launches signalled them, but for events and the persistent
		 * kernel (after the stream) */
		assert_int_equal(hs[h]->kernel_fences - fences0, h < 2 ? CALLS : 0);
	}
	for (int h = 1; h < 4; h++)
		devmemtcp_gpu_free(hs[h]);
	CK(cu->cuMemFree(dst[0]));
	CK(cu->cuMemFree(dst[1]));
	gr_close(&r);
	free(f);
	free(want);
	free(got);
}

static void test_gather_release_errors(void **state)
{
	struct devmemtcp_frag f[4];
	struct devmemtcp_gpu_iov d;
	CUdeviceptr dst;
	struct gr r;

	(void)state;
	gr_open(&r);
	CK(cu->cuMemAlloc(&dst, 4 * 4096));
	gr_receive(&r, f, 4, 4096, NULL);
	/* ERRORS devmemtcp_gpu_gather_release EINVAL */
	assert_int_equal(devmemtcp_gpu_gather_release(NULL, r.rx, f, 4, &d, 1, stream), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_gather_release: gpu is NULL");
	d = (struct devmemtcp_gpu_iov){ dst, 4 * 4096 };
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, NULL, f, 4, &d, 1, stream), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu), "devmemtcp_gpu_gather_release: rx is NULL");
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, NULL, 4, &d, 1, stream), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu), "devmemtcp_gpu_gather_release: frags or dsts is NULL with a non-zero count");
	/* ERRORS devmemtcp_gpu_gather_release ENOSPC */
	d.len = 4 * 4096 - 1;
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, f, 4, &d, 1, stream), -ENOSPC);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu), "the fragments hold 16384 bytes but the destinations only 16383: give more room");
	/* a token rx does not hold: the gather is queued, nothing deferred */
	d.len = 4 * 4096;
	f[2].token = NTOKENS - 1;
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, f, 4, &d, 1, stream), -EINVAL);
	assert_non_null(strstr(devmemtcp_gpu_errmsg(gpu),
			       "(the gather is queued; the fragments are still the caller's)"));
	CK(cu->cuStreamSynchronize(stream));
	assert_true(devmemtcp_rx_flush(r.rx) >= 0);
	assert_int_equal(returned, 0);
	/* the caller still holds them: released after all */
	f[2].token = 2;
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, f, 4, &d, 1, stream), 0);
	assert_true(gr_wait(&r, 4, 10));
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, f, 0, &d, 1, stream), 0);
	CK(cu->cuMemFree(dst));
	gr_close(&r);
}

/* release_after through a real receiver: tokens it never handed out are
 * refused and the fence is not leaked. */
static void test_release_after_refuses_unknown_tokens(void **state)
{
	struct devmemtcp_frag f = { .addr = 0x1000, .len = 1, .token = 7 };
	struct devmemtcp_rx *rx;
	int sv[2];

	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], NULL, &rx), 0);
	assert_int_equal(devmemtcp_gpu_release_after(gpu, rx, &f, 1, stream),
			 -EINVAL);
	assert_non_null(strstr(devmemtcp_gpu_errmsg(gpu),
			       "devmemtcp_rx_release_after"));
	assert_int_equal(devmemtcp_gpu_release_after(gpu, NULL, &f, 1, stream),
			 -EINVAL);
	/* nothing outstanding: an empty release is fine */
	assert_true(devmemtcp_gpu_release_after(gpu, rx, &f, 0, stream) >= 0);
	assert_true(devmemtcp_rx_release_all(rx) >= 0);
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
}

/* ---- fork ---------------------------------------------------------------- */

#define REFUSED(fn) DMT_FORK_REFUSED(fn, "GPU handle")

/*
 * CUDA does not survive fork(): a parent holding received fragments and a
 * GPU handle with a gather waiting in its batch forks; in the child every
 * call that would use the parent's CUDA context fails with EBADFD and the
 * message, views (no driver call) work, and freeing the handle frees the
 * child's memory.  The parent's gathers, releases and flush work on.
 */
static void test_gpu_fork(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, co, .coalesce_bytes = 1u << 20);
	struct devmemtcp_gpu_fence *fence = NULL;
	struct devmemtcp_gpu *batched;
	struct devmemtcp_frag f[4];
	struct devmemtcp_gpu_iov d, iov[4];
	uint8_t want[4 * 4096], got[4 * 4096];
	CUdeviceptr dst;
	struct gr r;
	int status;
	pid_t pid;

	(void)state;
	gr_open(&r);
	CK(cu->cuMemAlloc(&dst, 4 * 4096));
	CK(cu->cuMemsetD8Async(dst, 0, 4 * 4096, stream));
	CK(cu->cuStreamSynchronize(stream));
	d = (struct devmemtcp_gpu_iov){ dst, 4 * 4096 };
	gr_receive(&r, f, 4, 4096, want);
	assert_int_equal(devmemtcp_gpu_new(ctx, &co, &batched), 0);
	/* a gather waiting in the batch: only a flush queues it */
	assert_int_equal(devmemtcp_gpu_gather(batched, f, 4, &d, 1, stream), 0);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char lin[16] = { 0 };

		/* ERRORS devmemtcp_gpu_gather EBADFD */
		CHILD_CHECK(devmemtcp_gpu_gather(gpu, f, 4, &d, 1, stream) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_gpu_errmsg(gpu), REFUSED("devmemtcp_gpu_gather")));
		/* ERRORS devmemtcp_gpu_gather_release EBADFD */
		CHILD_CHECK(devmemtcp_gpu_gather_release(gpu, r.rx, f, 4, &d, 1, stream) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_gpu_errmsg(gpu),
				    REFUSED("devmemtcp_gpu_gather_release")));
		/* ERRORS devmemtcp_gpu_gather_recv EBADFD */
		CHILD_CHECK(devmemtcp_gpu_gather_recv(gpu, r.rx, f, 4, lin, sizeof(lin), &d, 1,
						      stream) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_gpu_errmsg(gpu),
				    REFUSED("devmemtcp_gpu_gather_recv")));
		/* ERRORS devmemtcp_gpu_release_after EBADFD */
		CHILD_CHECK(devmemtcp_gpu_release_after(gpu, r.rx, f, 4, stream) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_gpu_errmsg(gpu),
				    REFUSED("devmemtcp_gpu_release_after")));
		/* ERRORS devmemtcp_gpu_fence_new EBADFD */
		CHILD_CHECK(devmemtcp_gpu_fence_new(gpu, stream, &fence) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_gpu_errmsg(gpu), REFUSED("devmemtcp_gpu_fence_new")));
		CHILD_CHECK(fence == NULL);
		/* ERRORS devmemtcp_gpu_flush EBADFD */
		CHILD_CHECK(devmemtcp_gpu_flush(batched) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_gpu_errmsg(batched), REFUSED("devmemtcp_gpu_flush")));
		/* a view reads the fragments only */
		CHILD_CHECK(devmemtcp_gpu_view(gpu, f, 4, iov, 4) >= 1);
		/* no token went back from the child */
		CHILD_CHECK(returned == 0);
		/* freeing the handle launches nothing: the waiting gather
		 * stays unwritten (the stand-in driver runs in any process,
		 * so the test can look) */
		devmemtcp_gpu_free(batched);
		if (getenv("DEVMEMTCP_TEST_FAKE_GPU")) {
			CHILD_CHECK(cu->cuStreamSynchronize(stream) == CUDA_SUCCESS);
			CHILD_CHECK(cu->cuMemcpyDtoH(got, dst, sizeof(got)) == CUDA_SUCCESS);
			for (size_t i = 0; i < sizeof(got); i++)
				CHILD_CHECK(got[i] == 0);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the parent's batch is there still, and its gather lands */
	assert_int_equal(devmemtcp_gpu_flush(batched), 1);
	CK(cu->cuStreamSynchronize(stream));
	CK(cu->cuMemcpyDtoH(got, dst, sizeof(got)));
	assert_memory_equal(got, want, sizeof(got));
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, r.rx, f, 4, &d, 1, stream), 0);
	assert_true(gr_wait(&r, 4, 10));
	devmemtcp_gpu_free(batched);
	CK(cu->cuMemFree(dst));
	gr_close(&r);
}

/* A test that waits for the GPU for good (a lost gather of the persistent
 * kernel) ends the run (SIGALRM) instead of taking all the time a GPU
 * machine is lent for: after DEVMEMTCP_TEST_WATCHDOG seconds (default 150,
 * 0: never, for slow tools). */
static int watchdog_on(void **state)
{
	const char *v = getenv("DEVMEMTCP_TEST_WATCHDOG");

	alarm(v ? (unsigned int)strtoul(v, NULL, 0) : 150);
	return 0;
}

static int watchdog_off(void **state)
{
	alarm(0);
	return 0;
}

#define T(f) cmocka_unit_test_setup_teardown(f, watchdog_on, watchdog_off)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_alloc_exports_dmabuf),
		T(test_alloc_errors),
		T(test_import_keeps_pointer_offset),
		T(test_gather_one_dst),
		T(test_gather_many_dsts),
		T(test_gather_linear_holes),
		T(test_gather_split_launches),
		T(test_gather_receive_sizes),
		T(test_gather_variants_large),
		T(test_gather_ordered_on_stream),
		T(test_gather_graphs_per_stream),
		T(test_gather_chain_back_to_back),
		T(test_persistent_warns),
		T(test_persistent_stops_when_idle),
		T(test_persistent_streams_and_free),
		T(test_gather_disjoint_segments),
		T(test_gather_errors),
		T(test_view_of_received),
		T(test_tokens_held_until_fence),
		T(test_fence_done_polls),
		T(test_fence_wait_spins_first),
		T(test_fence_retired_until_written),
		T(test_fence_outlives_gpu),
		T(test_fence_does_not_wait_for_device),
		T(test_release_after_refuses_unknown_tokens),
		T(test_gather_release_tokens),
		T(test_gather_release_every_way),
		T(test_gather_release_errors),
		T(test_gpu_fork),
	};
	const char *seed = getenv("DEVMEMTCP_TEST_SEED");
	const char *only = getenv("DEVMEMTCP_TEST_ONLY");	/* a glob */

	if (only)
		cmocka_set_test_filter(only);

	if (seed)
		rng = strtoull(seed, NULL, 0) | 1;
	printf("seed %#llx\n", (unsigned long long)rng);
	return cmocka_run_group_tests(tests, setup, teardown);
}
