// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Gather benchmark: devmemtcp_gpu_gather against the same GPU's
 * device-to-device copy of the same bytes, one cuMemcpyAsync per fragment
 * and cuMemcpyBatchAsync; the CPU cost per fragment of a gather call; and a
 * batch-size sweep.  Prints a Markdown report.
 *
 *   bench-gather [-d device] [-s total_MiB] [-r reps]
 *
 * Bandwidth counts the bytes gathered (not read + written) per second of
 * GPU time between two events.  Before every timed gather a spin kernel
 * keeps the GPU busy while the CPU builds the descriptors, so the GPU time
 * is the kernel's alone; the CPU cost is reported separately.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "cuda.h"
#include "gpu.h"

#define CK(call)                                                               \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		if (r_ != CUDA_SUCCESS) {                                      \
			fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__,  \
				__LINE__, #call, r_);                          \
			exit(1);                                               \
		}                                                              \
	} while (0)

static const struct dmt_cuda *cu;
static struct devmemtcp_ctx *ctx;
static struct devmemtcp_gpu *gpu, *gpu_copy;
static CUstream st;
static CUevent ev0, ev1;
static CUdeviceptr src, dst;
static uint64_t src_size, total_target;
static int reps = 10;
static uint8_t *pattern;
#define PATTERN_SIZE (64ull << 20)

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum dist { D_4K, D_1448, D_MIXED, D_4K_SEQ, D_N };
static const char *const dist_name[] = {
	"4 KiB, page-aligned source",
	"1448 B, page-aligned source, packed destination",
	"mixed sizes, arbitrary source offsets",
	"4 KiB, source pages in order (no randomness)",
};

/* Fragments totalling about bytes: source pages in random order. */
static size_t make_frags(enum dist d, uint64_t bytes,
			 struct devmemtcp_frag **fp, uint64_t *totalp)
{
	size_t cap = bytes / 1024 + 16, n = 0;
	uint64_t pages = src_size / 4096, total = 0;
	struct devmemtcp_frag *f = calloc(cap, sizeof(*f));

	while (total < bytes && n < cap) {
		uint32_t len;
		uint64_t off;

		switch (d) {
		case D_4K:
			len = 4096;
			off = rnd() % pages * 4096;
			break;
		case D_4K_SEQ:
			len = 4096;
			off = n % pages * 4096;
			break;
		case D_1448:
			len = 1448;
			off = rnd() % pages * 4096;
			break;
		default:
			switch (rnd() % 10) {
			case 0: case 1: case 2:
				len = 1448;
				break;
			case 3: case 4: case 5:
				len = 4096;
				break;
			case 6: case 7:
				len = 1 + (uint32_t)(rnd() % 9000);
				break;
			default:
				len = 9000 + (uint32_t)(rnd() % 56537);
			}
			off = rnd() % (src_size - len);
		}
		f[n] = (struct devmemtcp_frag){ .offset = off, .addr = src + off,
						.len = len, .token = (uint32_t)n };
		total += len;
		n++;
	}
	*fp = f;
	*totalp = total;
	return n;
}

static double event_ms(void)
{
	float ms;

	CK(cu->cuEventSynchronize(ev1));
	CK(cu->cuEventElapsedTime(&ms, ev0, ev1));
	return ms;
}

static double time_d2d(uint64_t bytes)
{
	double t[64];

	CK(cu->cuMemcpyDtoDAsync(dst, src, bytes, st));	/* warm */
	for (int r = 0; r < reps; r++) {
		CK(cu->cuEventRecord(ev0, st));
		CK(cu->cuMemcpyDtoDAsync(dst, src + 4096 * (uint64_t)r, bytes, st));
		CK(cu->cuEventRecord(ev1, st));
		t[r] = event_ms();
	}
	return median(t, reps);
}

/* GPU time of one gather; *cpu_ns: CPU time of the call per fragment. */
static double time_gather(struct devmemtcp_gpu *g,
			  const struct devmemtcp_frag *f, size_t n,
			  uint64_t total, double *cpu_ns)
{
	struct devmemtcp_gpu_iov d = { dst, total };
	double t[64], c[64];
	int ret;

	ret = devmemtcp_gpu_gather(g, f, n, &d, 1, st);	/* warm */
	if (ret) {
		fprintf(stderr, "gather: %s\n", devmemtcp_gpu_errmsg(g));
		exit(1);
	}
	CK(cu->cuStreamSynchronize(st));
	for (int r = 0; r < reps; r++) {
		double t0;

		/* 2 ms of spinning hides building ~1M descriptors. */
		dmt_gpu_spin(g, st, 2 * 1000 * 1000 + n * 4);
		CK(cu->cuEventRecord(ev0, st));
		t0 = now();
		ret = devmemtcp_gpu_gather(g, f, n, &d, 1, st);
		c[r] = (now() - t0) * 1e9 / (double)n;
		if (ret) {
			fprintf(stderr, "gather: %s\n", devmemtcp_gpu_errmsg(g));
			exit(1);
		}
		CK(cu->cuEventRecord(ev1, st));
		t[r] = event_ms();
	}
	if (cpu_ns)
		*cpu_ns = median(c, reps);
	return median(t, reps);
}

static uint8_t host_src_byte(uint64_t off)
{
	return pattern[off % PATTERN_SIZE];
}

/* The gathered bytes against the source pattern. */
static int verify(const struct devmemtcp_frag *f, size_t n, uint64_t total)
{
	uint8_t *got = malloc(total);
	uint64_t pos = 0;

	CK(cu->cuMemcpyDtoH(got, dst, total));
	for (size_t i = 0; i < n; i++) {
		uint64_t o = f[i].offset;

		/* contiguous runs of the pattern */
		for (uint32_t k = 0; k < f[i].len;) {
			uint64_t po = (o + k) % PATTERN_SIZE;
			uint64_t run = PATTERN_SIZE - po;

			if (run > f[i].len - k)
				run = f[i].len - k;
			if (memcmp(got + pos + k, pattern + po, run)) {
				for (uint64_t b = 0; b < run; b++)
					if (got[pos + k + b] != host_src_byte(o + k + b)) {
						fprintf(stderr,
							"MISMATCH fragment %zu byte %llu\n",
							i, (unsigned long long)(k + b));
						break;
					}
				free(got);
				return -1;
			}
			k += (uint32_t)run;
		}
		pos += f[i].len;
	}
	free(got);
	return 0;
}

/* One cuMemcpyAsync per fragment, on a prefix of the list (it is slow). */
static double per_frag_gbps(const struct devmemtcp_frag *f, size_t n)
{
	uint64_t bytes = 0, pos = 0;
	double t0;

	if (n > 20000)
		n = 20000;
	for (size_t i = 0; i < n; i++)
		bytes += f[i].len;
	CK(cu->cuStreamSynchronize(st));
	t0 = now();
	for (size_t i = 0; i < n; i++) {
		CK(cu->cuMemcpyDtoDAsync(dst + pos, f[i].addr, f[i].len, st));
		pos += f[i].len;
	}
	CK(cu->cuStreamSynchronize(st));
	return bytes / (now() - t0) / 1e9;
}

typedef CUresult (*batch13_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
			       CUmemcpyAttributes *, size_t *, size_t, CUstream);
typedef CUresult (*batch128_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				CUmemcpyAttributes *, size_t *, size_t,
				size_t *, CUstream);

/* cuMemcpyBatchAsync of (a prefix of) the fragments: -1 if unavailable. */
static double batch_gbps(const struct devmemtcp_frag *f, size_t n)
{
	CUmemcpyAttributes attr = { 0 };
	size_t attr_idx = 0, fail = 0, k = n > 65536 ? 65536 : n;
	CUdeviceptr *dsts = calloc(k, sizeof(*dsts)), *srcs = calloc(k, sizeof(*srcs));
	size_t *sizes = calloc(k, sizeof(*sizes));
	uint64_t bytes = 0;
	double t0, best = -1;
	CUresult r = CUDA_SUCCESS;

	if (!cu->cuMemcpyBatchAsync)
		return -1;
	for (size_t i = 0; i < k; i++) {
		dsts[i] = dst + bytes;
		srcs[i] = f[i].addr;
		sizes[i] = f[i].len;
		bytes += f[i].len;
	}
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	for (int rep = 0; rep < 3; rep++) {
		CK(cu->cuStreamSynchronize(st));
		t0 = now();
		if (cu->batch_fail_idx)
			r = ((batch128_fn)cu->cuMemcpyBatchAsync)(dsts, srcs, sizes,
								 k, &attr, &attr_idx,
								 1, &fail, st);
		else
			r = ((batch13_fn)cu->cuMemcpyBatchAsync)(dsts, srcs, sizes,
								k, &attr, &attr_idx,
								1, st);
		if (r != CUDA_SUCCESS)
			break;
		CK(cu->cuStreamSynchronize(st));
		if (best < bytes / (now() - t0) / 1e9)
			best = bytes / (now() - t0) / 1e9;
	}
	free(dsts);
	free(srcs);
	free(sizes);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuMemcpyBatchAsync: CUresult %d\n", r);
		return -1;
	}
	return best;
}

/* Descriptors per warp and cache hints (DEVMEMTCP_GATHER_PER/_KERNEL). */
static void tuning(void)
{
	static const char *const pers[] = { "1", "2", "4", "8", "16", "32" };
	struct devmemtcp_frag *f[3];
	uint64_t total[3];
	size_t n[3];

	printf("\n## Tuning: descriptors per warp and cache hints (GB/s; auto = 8 KiB per warp, 2 to 32 fragments)\n\n");
	printf("| kernel | per warp | 4 KiB | 1448 B | mixed |\n|---|---|---:|---:|---:|\n");
	for (int d = 0; d < 3; d++)
		n[d] = make_frags((enum dist)d, total_target, &f[d], &total[d]);
	for (int k = 0; k < 5; k++) {
		for (int p = -1; p < (k >= 2 ? 0 : 6); p++) {
			DEVMEMTCP_OPTS(gpu_opts, o, .max_frags = 1u << 20, .slots = 2);
			struct devmemtcp_gpu *g;

			setenv("DEVMEMTCP_GATHER_KERNEL",
			       k == 1 ? "dmt_gather_cs" : "dmt_gather", 1);
			if (k == 2)
				setenv("DEVMEMTCP_GATHER_CACHED", "1", 1);
			if (k >= 3)
				setenv("DEVMEMTCP_GATHER_WARPS", k == 3 ? "4" : "2", 1);
			if (p >= 0)
				setenv("DEVMEMTCP_GATHER_PER", pers[p], 1);
			else
				unsetenv("DEVMEMTCP_GATHER_PER");
			if (devmemtcp_gpu_new(ctx, &o, &g)) {
				fprintf(stderr, "tuning: %s\n", devmemtcp_ctx_errmsg(ctx));
				return;
			}
			unsetenv("DEVMEMTCP_GATHER_CACHED");
			unsetenv("DEVMEMTCP_GATHER_WARPS");
			printf("| %s | %s |",
			       k == 4 ? "plain, 2 warps per block (default 8)"
			       : k == 3 ? "plain, 4 warps per block (default 8)"
			       : k == 2 ? "plain, descriptors in cached (not write-combined) host memory"
			       : k ? "cs hints" : "plain (default)",
			       p >= 0 ? pers[p] : "auto");
			for (int d = 0; d < 3; d++)
				printf(" %.0f |", total[d] / (time_gather(g, f[d], n[d], total[d], NULL) * 1e-3) / 1e9);
			printf("\n");
			fflush(stdout);
			devmemtcp_gpu_free(g);
		}
	}
	unsetenv("DEVMEMTCP_GATHER_KERNEL");
	unsetenv("DEVMEMTCP_GATHER_PER");
	for (int d = 0; d < 3; d++)
		free(f[d]);
}

/*
 * Launch size: up to 64 gathers of one size are queued behind a spin kernel
 * and timed on the GPU, so the GPU-side cost of a launch per batch shows
 * (the CPU builds descriptors at a few ns per fragment, reported apart).
 */
static void sweep(void)
{
	DEVMEMTCP_OPTS(gpu_opts, o, .max_frags = 65536, .slots = 64);
	static const uint64_t sizes[] = {
		64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
		256 << 20,
	};
	struct devmemtcp_frag *f;
	struct devmemtcp_gpu *g;
	uint64_t total;
	size_t n;

	if (devmemtcp_gpu_new(ctx, &o, &g)) {
		fprintf(stderr, "sweep: %s\n", devmemtcp_ctx_errmsg(ctx));
		return;
	}
	n = make_frags(D_4K, 1ull << 30, &f, &total);
	printf("\n## Batch-size sweep (4 KiB fragments, page-aligned source; up to 64 launches queued, GPU time)\n\n");
	printf("| batch | frags/launch | launches | gather GB/s | d2d copies of the batch GB/s | gather / d2d | CPU µs per call |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|\n");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t per = sizes[s] / 4096, calls = n / per;
		struct devmemtcp_gpu_iov d = { dst, sizes[s] };
		double gt, dt, t0, ct[64];
		float ms;

		/* the destination holds total_target bytes: batches wrap
		 * inside it, and larger ones are skipped */
		uint64_t span = total_target / sizes[s] * sizes[s];

		if (!span)
			continue;
		if (calls > 64)
			calls = 64;
		devmemtcp_gpu_gather(g, f, per, &d, 1, st);	/* warm */
		CK(cu->cuStreamSynchronize(st));
		dmt_gpu_spin(g, st, 20 * 1000 * 1000);
		CK(cu->cuEventRecord(ev0, st));
		for (size_t c = 0; c < calls; c++) {
			d.addr = dst + c * sizes[s] % span;
			t0 = now();
			if (devmemtcp_gpu_gather(g, f + c * per, per, &d, 1, st)) {
				fprintf(stderr, "sweep gather: %s\n",
					devmemtcp_gpu_errmsg(g));
				exit(1);
			}
			ct[c] = (now() - t0) * 1e6;
		}
		CK(cu->cuEventRecord(ev1, st));
		CK(cu->cuEventSynchronize(ev1));
		CK(cu->cuEventElapsedTime(&ms, ev0, ev1));
		gt = (double)calls * sizes[s] / (ms * 1e-3) / 1e9;
		/* plain copies of the same batch size, queued the same way */
		dmt_gpu_spin(g, st, 2 * 1000 * 1000);
		CK(cu->cuEventRecord(ev0, st));
		for (size_t c = 0; c < calls; c++)
			CK(cu->cuMemcpyDtoDAsync(dst + c * sizes[s] % span,
						 src + c * sizes[s] % (src_size / 2),
						 sizes[s], st));
		CK(cu->cuEventRecord(ev1, st));
		CK(cu->cuEventSynchronize(ev1));
		CK(cu->cuEventElapsedTime(&ms, ev0, ev1));
		dt = (double)calls * sizes[s] / (ms * 1e-3) / 1e9;
		printf("| %llu KiB | %zu | %zu | %.0f | %.0f | %.1f %% | %.1f |\n",
		       (unsigned long long)(sizes[s] >> 10), per, calls, gt, dt,
		       100 * gt / dt, median(ct, (int)calls));
	}
	free(f);
	devmemtcp_gpu_free(g);
}

/* CPU cost of a gather call for small batches (the per-recvmsg case). */
static void cpu_small(void)
{
	static const size_t counts[] = { 16, 64, 256, 1024, 16384 };
	struct devmemtcp_frag *f;
	uint64_t total;
	size_t n;

	DEVMEMTCP_OPTS(gpu_opts, o, .max_frags = 1u << 20, .slots = 4);
	struct devmemtcp_gpu *g[2] = { gpu, NULL };

	setenv("DEVMEMTCP_GATHER_CACHED", "1", 1);
	if (devmemtcp_gpu_new(ctx, &o, &g[1]))
		g[1] = NULL;
	unsetenv("DEVMEMTCP_GATHER_CACHED");
	n = make_frags(D_4K, 256ull << 20, &f, &total);
	printf("\n## CPU cost of a gather call (4 KiB fragments; includes the launch)\n\n");
	printf("| descriptor memory | fragments per call | µs per call | ns per fragment |\n|---|---:|---:|---:|\n");
	for (size_t x = 0; x < 2 * sizeof(counts) / sizeof(counts[0]); x++) {
		int h = x >= sizeof(counts) / sizeof(counts[0]);
		size_t i = x % (sizeof(counts) / sizeof(counts[0]));
		size_t k = counts[i], calls = n / k / 2 > 2000 ? 2000 : n / k / 2;
		double c[2001], t0;

		if (!g[h])
			break;

		for (size_t j = 0; j < calls; j++) {
			struct devmemtcp_gpu_iov d = { dst, k * 4096 };

			t0 = now();
			devmemtcp_gpu_gather(g[h], f + (j * k) % (n - k), k, &d, 1, st);
			c[j] = (now() - t0) * 1e6;
			if (j % 64 == 63)
				CK(cu->cuStreamSynchronize(st));
		}
		CK(cu->cuStreamSynchronize(st));
		printf("| %s | %zu | %.2f | %.1f |\n",
		       h ? "pinned, cached" : "pinned, write-combined (default)",
		       k, median(c, (int)calls), median(c, (int)calls) * 1e3 / k);
	}
	if (g[1])
		devmemtcp_gpu_free(g[1]);
	free(f);
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, int *device)
{
	int opt;

	total_target = 1ull << 30;
	while ((opt = getopt(argc, argv, "d:s:r:h")) != -1) {
		switch (opt) {
		case 'd':
			*device = atoi(optarg);
			break;
		case 's':
			total_target = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'r':
			reps = atoi(optarg);
			if (reps < 1 || reps > 63)
				reps = 10;
			break;
		default:
			fprintf(stderr, "usage: %s [-d device] [-s total_MiB] [-r reps]\n",
				argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	return -1;
}

/* The two gather handles (plain and DESC_COPY); exit status on failure
 * (77: no GPU), else -1. */
static int open_gpus(int device)
{
	DEVMEMTCP_OPTS(gpu_opts, go, .max_frags = 1u << 20, .slots = 2,
		       .cuda_device = device);
	DEVMEMTCP_OPTS(gpu_opts, gc, .max_frags = 1u << 20, .slots = 2,
		       .flags = DEVMEMTCP_GPU_DESC_COPY, .cuda_device = device);
	int ret;

	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	ret = devmemtcp_gpu_new(ctx, &go, &gpu);
	if (ret) {
		printf("SKIP: %s\n", devmemtcp_ctx_errmsg(ctx));
		return ret == -ENOENT || ret == -ENODEV ? 77 : 1;
	}
	if (devmemtcp_gpu_new(ctx, &gc, &gpu_copy)) {
		printf("gpu (DESC_COPY): %s\n", devmemtcp_ctx_errmsg(ctx));
		return 1;
	}
	cu = dmt_gpu_cuda(gpu);
	return -1;
}

/* Stream, events, the source filled with the random pattern, the
 * destination; the device's name into name. */
static void setup_device(int device, char *name, int len)
{
	CUdevice dev;
	CUcontext cctx;

	CK(cu->cuDeviceGet(&dev, device));
	CK(cu->cuDevicePrimaryCtxRetain(&cctx, dev));
	CK(cu->cuCtxPushCurrent(cctx));
	CK(cu->cuDeviceGetName(name, len, dev));
	CK(cu->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	CK(cu->cuEventCreate(&ev0, CU_EVENT_DEFAULT));
	CK(cu->cuEventCreate(&ev1, CU_EVENT_DEFAULT));
	src_size = 4 * total_target;
	CK(cu->cuMemAlloc(&src, src_size));
	CK(cu->cuMemAlloc(&dst, total_target + (1 << 20)));
	pattern = malloc(PATTERN_SIZE);
	for (uint64_t i = 0; i < PATTERN_SIZE; i += 8) {
		uint64_t v = rnd();

		memcpy(pattern + i, &v, 8);
	}
	for (uint64_t o = 0; o < src_size; o += PATTERN_SIZE)
		CK(cu->cuMemcpyHtoD(src + o, pattern, PATTERN_SIZE));
}

/* One row of the main table; the gather's share of d2d bandwidth. */
static double distribution_row(enum dist d)
{
	struct devmemtcp_frag *f;
	uint64_t total;
	size_t n = make_frags(d, total_target, &f, &total);
	double dt, gt, gct, cpu, pf, bt;
	int ok;

	dt = time_d2d(total);
	gt = time_gather(gpu, f, n, total, &cpu);
	ok = verify(f, n, total);
	gct = time_gather(gpu_copy, f, n, total, NULL);
	if (!ok)
		ok = verify(f, n, total);
	pf = per_frag_gbps(f, n);
	bt = batch_gbps(f, n);
	printf("| %s | %zu | %.0f | %.0f | **%.1f %%** | %.0f (%.1f %%) | %.2f | %.2f | ",
	       dist_name[d], n, total / (dt * 1e-3) / 1e9, total / (gt * 1e-3) / 1e9,
	       100 * dt / gt, total / (gct * 1e-3) / 1e9,
	       100 * dt / gct, cpu, pf);
	if (bt < 0)
		printf("n/a | ");
	else
		printf("%.2f | ", bt);
	printf("%s |\n", ok ? "MISMATCH" : "bytes equal");
	fflush(stdout);
	free(f);
	return dt / gt;
}

/* The main table: every distribution against d2d, and the targets. */
static void distributions(const char *name, int device)
{
	time_t tnow = time(NULL);
	double ratio[D_N];

	printf("# Gather benchmark\n\n");
	printf("- GPU: %s (device %d), CUDA driver API %d.%d\n", name, device,
	       cu->driver_version / 1000, cu->driver_version % 1000 / 10);
	printf("- date: %s", asctime(gmtime(&tnow)));
	printf("- %llu MiB of fragments per measurement, median of %d runs; GB/s = 1e9 bytes gathered per second of GPU time (events)\n",
	       (unsigned long long)(total_target >> 20), reps);
	printf("- baseline: one cuMemcpyDtoDAsync of the same number of bytes (contiguous)\n\n");
	printf("| distribution | frags | d2d GB/s | gather GB/s | gather / d2d | gather, descriptors copied first | CPU ns/frag | per-frag cuMemcpyAsync GB/s | cuMemcpyBatchAsync GB/s | check |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
	for (int d = 0; d < D_N; d++)
		ratio[d] = distribution_row((enum dist)d);
	printf("\nTargets: 4 KiB >= 95 %% (%.1f %%: %s), 1448 B >= 80 %% (%.1f %%: %s), mixed >= 70 %% (%.1f %%: %s)\n",
	       100 * ratio[D_4K], ratio[D_4K] >= 0.95 ? "met" : "MISSED",
	       100 * ratio[D_1448], ratio[D_1448] >= 0.80 ? "met" : "MISSED",
	       100 * ratio[D_MIXED], ratio[D_MIXED] >= 0.70 ? "met" : "MISSED");
}

int main(int argc, char **argv)
{
	char name[256] = "";
	int device = 0;
	int status = parse_args(argc, argv, &device);

	if (status >= 0)
		return status;
	status = open_gpus(device);
	if (status >= 0)
		return status;
	setup_device(device, name, sizeof(name));
	distributions(name, device);
	cpu_small();
	sweep();
	tuning();
	devmemtcp_gpu_free(gpu_copy);
	devmemtcp_gpu_free(gpu);
	devmemtcp_ctx_free(ctx);
	return 0;
}
