// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Gather benchmark: devmemtcp_gpu_gather against the same GPU's
 * device-to-device copy of the same bytes, in the same run.  Prints
 * Markdown, one section per -t name:
 *
 *   dist     1 GiB of fragments per distribution (4 KiB, 1448 B, mixed)
 *            against one copy of the bytes, per-fragment cuMemcpyAsync and
 *            cuMemcpyBatchAsync; descriptors copied first
 *   sweep    64 KiB ... 256 MiB per call, 64 calls queued, against one
 *            cuMemcpyDtoDAsync of the same size per call; every variant
 *   cpu      CPU time of a call, 16 ... 4096 fragments, every variant
 *   latency  call to bytes in place on an idle GPU (gather + stream
 *            synchronise), against copy + synchronise; a column per
 *            variant, the persistent kernel's among them
 *   fence    how soon the CPU sees a kernel done: the kernel's own write
 *            of a pinned word (dmt_spin_write), library fences polled and
 *            waited for, events, stream synchronise
 *   graph    gathers as a CUDA graph's kernel node, its parameter set per
 *            call, against the library's inline launch; every call's
 *            bytes checked
 *   micro    CPU cost of the driver calls a gather could be built from
 *            (launches by parameter size, events, stream memory
 *            operations, CUDA graphs, context switches)
 *   tune     warps per fragment at receive sizes
 *   tune-large  descriptors per warp, cache hints, block size at -s MiB
 *
 *   bench-gather [-d device] [-s MiB] [-r reps] [-t section,...]
 *
 * Variants: launches (inline when the batch fits in the kernel parameter,
 * else descriptors in a pinned slot), slots only (write-combined or
 * cached), and the persistent kernel (DEVMEMTCP_GPU_PERSISTENT).  GPU
 * GB/s = 1e9 bytes gathered per second between two events; before a timed
 * run a spinning kernel holds the stream while the CPU queues the calls,
 * so the GPU time is the GPU's alone and the CPU's is reported apart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static struct bench B;
static uint64_t total_target = 1ull << 30;
static int reps = 10;

static const struct variant var_auto = { "inline, launch with programmatic dependence (default; more than 1024: a slot)" };
/* the same with as many slots as calls are queued: no call waits */
static const struct variant var_auto64 = {
	"inline, launch with programmatic dependence (default; more than 1024: a slot)",
	.slots = 64, .max_frags = 65536 };
static const struct variant var_graph = {
	"inline through a graph (DEVMEMTCP_GPU_GRAPHS)",
	.flags = DEVMEMTCP_GPU_GRAPHS };
static const struct variant var_graph64 = {
	"inline through a graph (DEVMEMTCP_GPU_GRAPHS)",
	.flags = DEVMEMTCP_GPU_GRAPHS, .slots = 64, .max_frags = 65536 };
static const struct variant var_nopdl = {
	"inline, plain cuLaunchKernel", .no_pdl = true };
static const struct variant var_nopdl64 = {
	"inline, plain cuLaunchKernel", .no_pdl = true, .slots = 64,
	.max_frags = 65536 };
static const struct variant var_ring = { "launch, descriptors in a pinned slot",
					 .mode = "ring", .slots = 64,
					 .max_frags = 65536 };
static const struct variant var_persist = { "persistent kernel",
					    .flags = DEVMEMTCP_GPU_PERSISTENT,
					    .slots = 64, .max_frags = 65536 };
static const struct variant *const variants[] = { &var_auto64, &var_graph64,
						  &var_nopdl64, &var_ring };
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

/* ---- dist: large batches, the kernel against copies ------------------------ */

static double time_d2d(uint64_t bytes)
{
	double t[64];

	CK(B.cu->cuMemcpyDtoDAsync(B.dst, B.src, bytes, B.st));	/* warm */
	for (int r = 0; r < reps; r++) {
		CK(B.cu->cuEventRecord(B.ev0, B.st));
		CK(B.cu->cuMemcpyDtoDAsync(B.dst, B.src + 4096 * (uint64_t)r,
					   bytes, B.st));
		CK(B.cu->cuEventRecord(B.ev1, B.st));
		t[r] = event_ms(&B);
	}
	return median(t, reps);
}

/* GPU ms of one gather; *cpu_ns: CPU time of the call per fragment. */
static double time_gather(struct devmemtcp_gpu *g,
			  const struct devmemtcp_frag *f, size_t n,
			  uint64_t total, double *cpu_ns)
{
	double t[64], c[64];

	gather(&B, g, f, n, B.dst, total, B.st);	/* warm */
	CK(B.cu->cuStreamSynchronize(B.st));
	for (int r = 0; r < reps; r++) {
		double t0;

		/* 2 ms of spinning hides building ~1M descriptors. */
		dmt_gpu_spin(g, B.st, 2 * 1000 * 1000 + n * 4);
		CK(B.cu->cuEventRecord(B.ev0, B.st));
		t0 = now_s();
		gather(&B, g, f, n, B.dst, total, B.st);
		c[r] = (now_s() - t0) * 1e9 / (double)n;
		CK(B.cu->cuEventRecord(B.ev1, B.st));
		t[r] = event_ms(&B);
	}
	if (cpu_ns)
		*cpu_ns = median(c, reps);
	return median(t, reps);
}

/* The bytes gathered into to against the source. */
static int verify_at(const struct devmemtcp_frag *f, size_t n, uint64_t total,
		     CUdeviceptr to)
{
	uint8_t *got = malloc(total);
	uint64_t pos = 0;
	int ret = 0;

	if (!got)
		abort();
	CK(B.cu->cuMemcpyDtoH(got, to, total));
	for (size_t i = 0; i < n && !ret; i++) {
		if (bench_same(&B, got + pos, f[i].addr - B.src, f[i].len)) {
			fprintf(stderr, "MISMATCH fragment %zu\n", i);
			ret = -1;
		}
		pos += f[i].len;
	}
	free(got);
	return ret;
}

static int verify(const struct devmemtcp_frag *f, size_t n, uint64_t total)
{
	return verify_at(f, n, total, B.dst);
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
	CK(B.cu->cuStreamSynchronize(B.st));
	t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		CK(B.cu->cuMemcpyDtoDAsync(B.dst + pos, f[i].addr, f[i].len, B.st));
		pos += f[i].len;
	}
	CK(B.cu->cuStreamSynchronize(B.st));
	return bytes / (now_s() - t0) / 1e9;
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

	if (!B.cu->cuMemcpyBatchAsync || !dsts || !srcs || !sizes) {
		free(dsts);
		free(srcs);
		free(sizes);
		return -1;
	}
	for (size_t i = 0; i < k; i++) {
		dsts[i] = B.dst + bytes;
		srcs[i] = f[i].addr;
		sizes[i] = f[i].len;
		bytes += f[i].len;
	}
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	for (int rep = 0; rep < 3; rep++) {
		CK(B.cu->cuStreamSynchronize(B.st));
		t0 = now_s();
		if (B.cu->batch_fail_idx)
			r = ((batch128_fn)B.cu->cuMemcpyBatchAsync)(dsts, srcs, sizes,
								   k, &attr, &attr_idx,
								   1, &fail, B.st);
		else
			r = ((batch13_fn)B.cu->cuMemcpyBatchAsync)(dsts, srcs, sizes,
								  k, &attr, &attr_idx,
								  1, B.st);
		if (r != CUDA_SUCCESS)
			break;
		CK(B.cu->cuStreamSynchronize(B.st));
		if (best < bytes / (now_s() - t0) / 1e9)
			best = bytes / (now_s() - t0) / 1e9;
	}
	free(dsts);
	free(srcs);
	free(sizes);
	return r == CUDA_SUCCESS ? best : -1;
}

static double distribution_row(enum dist d, struct devmemtcp_gpu *g_copy)
{
	struct devmemtcp_frag *f;
	uint64_t total;
	size_t n = make_frags(d, total_target, B.src, B.src_size, &f, &total);
	double dt, gt, gct, cpu, pf, bt;
	int bad;

	dt = time_d2d(total);
	gt = time_gather(B.gpu, f, n, total, &cpu);
	bad = verify(f, n, total);
	gct = g_copy ? time_gather(g_copy, f, n, total, NULL) : 0;
	if (!bad && g_copy)
		bad = verify(f, n, total);
	pf = per_frag_gbps(f, n);
	bt = batch_gbps(f, n);
	printf("| %s | %zu | %.0f | %.0f | **%.1f %%** | %.0f (%.1f %%) | %.2f | %.2f | ",
	       dist_name[d], n, total / (dt * 1e-3) / 1e9, total / (gt * 1e-3) / 1e9,
	       100 * dt / gt, gct ? total / (gct * 1e-3) / 1e9 : 0,
	       gct ? 100 * dt / gct : 0, cpu, pf);
	if (bt < 0)
		printf("n/a | ");
	else
		printf("%.2f | ", bt);
	printf("%s |\n", bad ? "MISMATCH" : "bytes equal");
	fflush(stdout);
	free(f);
	return bad ? -1 : dt / gt;
}

static int section_dist(void)
{
	static const struct variant copy = { "descriptors copied first",
					     .flags = DEVMEMTCP_GPU_DESC_COPY,
					     .max_frags = 1u << 20, .slots = 2 };
	struct devmemtcp_gpu *g_copy = variant_open(&B, &copy);
	double ratio[D_N];
	int bad = 0;

	printf("\n## Large batches: %llu MiB of fragments per call, median of %d\n\n",
	       (unsigned long long)(total_target >> 20), reps);
	printf("Baseline: one cuMemcpyDtoDAsync of the same number of bytes (contiguous).\n\n");
	printf("| distribution | frags | d2d GB/s | gather GB/s | gather / d2d | gather, descriptors copied first | CPU ns/frag | per-frag cuMemcpyAsync GB/s | cuMemcpyBatchAsync GB/s | check |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
	for (int d = 0; d < D_N; d++) {
		ratio[d] = distribution_row((enum dist)d, g_copy);
		bad |= ratio[d] < 0;
	}
	printf("\nTargets: 4 KiB >= 95 %% (%.1f %%: %s), 1448 B >= 80 %% (%.1f %%: %s), mixed >= 70 %% (%.1f %%: %s)\n",
	       100 * ratio[D_4K], ratio[D_4K] >= 0.95 ? "met" : "MISSED",
	       100 * ratio[D_1448], ratio[D_1448] >= 0.80 ? "met" : "MISSED",
	       100 * ratio[D_MIXED], ratio[D_MIXED] >= 0.70 ? "met" : "MISSED");
	devmemtcp_gpu_free(g_copy);
	return bad;
}

/* ---- sweep: batch sizes against per-call copies ------------------------------ */

static const uint64_t sweep_sizes[] = {
	64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20,
};

/* Calls of about size bytes each from f: starts[c]..starts[c + 1]. */
static size_t cut_calls(const struct devmemtcp_frag *f, size_t n,
			uint64_t size, size_t *starts, size_t max_calls,
			uint64_t *bytes)
{
	size_t calls = 0, i = 0;

	while (calls < max_calls) {
		uint64_t b = 0;
		size_t j = i;

		while (j < n && b < size)
			b += f[j++].len;
		if (b < size)
			break;	/* not enough left for a whole call */
		starts[calls] = i;
		bytes[calls++] = b;
		i = j;
	}
	starts[calls] = i;
	return calls;
}

/* GPU GB/s of calls queued behind a spin; CPU µs per call (median). */
static double queued_gbps(struct devmemtcp_gpu *g,
			  const struct devmemtcp_frag *f, const size_t *starts,
			  const uint64_t *bytes, size_t calls, uint64_t size,
			  double *cpu_us)
{
	uint64_t span = B.dst_size / size * size, sum = 0, off = 0;
	double ct[64], t0;

	gather(&B, g, f + starts[0], starts[1] - starts[0], B.dst, bytes[0],
	       B.st);	/* warm (and start a persistent kernel) */
	CK(B.cu->cuStreamSynchronize(B.st));
	dmt_gpu_spin(g, B.st, 20 * 1000 * 1000);
	CK(B.cu->cuEventRecord(B.ev0, B.st));
	for (size_t c = 0; c < calls; c++) {
		if (off + bytes[c] > span)
			off = 0;
		t0 = now_s();
		gather(&B, g, f + starts[c], starts[c + 1] - starts[c],
		       B.dst + off, bytes[c], B.st);
		ct[c] = (now_s() - t0) * 1e6;
		off += bytes[c];
		sum += bytes[c];
	}
	CK(B.cu->cuEventRecord(B.ev1, B.st));
	*cpu_us = median(ct, (int)calls);
	return sum / (event_ms(&B) * 1e-3) / 1e9;
}

/* The same bytes as calls contiguous copies of size, queued the same way. */
static double queued_d2d_gbps(size_t calls, uint64_t size)
{
	uint64_t span = B.dst_size / size * size;

	dmt_gpu_spin(B.gpu, B.st, 2 * 1000 * 1000);
	CK(B.cu->cuEventRecord(B.ev0, B.st));
	for (size_t c = 0; c < calls; c++)
		CK(B.cu->cuMemcpyDtoDAsync(B.dst + c * size % span,
					   B.src + c * size % (B.src_size / 2),
					   size, B.st));
	CK(B.cu->cuEventRecord(B.ev1, B.st));
	return calls * size / (event_ms(&B) * 1e-3) / 1e9;
}

#define SWEEP_REPS 5

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static int section_sweep(void)
{
	struct devmemtcp_gpu *g[NVARIANTS];

	for (size_t v = 0; v < NVARIANTS; v++)
		g[v] = variant_open(&B, variants[v]);
	printf("\n## Batch-size sweep: up to 64 calls of each size queued behind a spinning kernel, GPU time\n\n");
	printf("Baseline: one cuMemcpyDtoDAsync of the same size per call, queued the same way. Each GB/s is the median of %d measurements, the baseline's and the variants' taken in turn; CPU µs: median time of one gather call.\n\n", SWEEP_REPS);
	printf("| fragments | bytes per call | frags per call | d2d per call GB/s | variant | gather GB/s | gather / d2d | CPU µs per call |\n");
	printf("|---|---:|---:|---:|---|---:|---:|---:|\n");
	for (int d = 0; d < 3; d++) {
		struct devmemtcp_frag *f;
		uint64_t total, bytes[65];
		size_t n = make_frags((enum dist)d, 1ull << 30, B.src, B.src_size,
				      &f, &total), starts[66];

		for (size_t s = 0; s < sizeof(sweep_sizes) / sizeof(sweep_sizes[0]); s++) {
			uint64_t size = sweep_sizes[s];
			double dt[SWEEP_REPS], gt[NVARIANTS][SWEEP_REPS],
				cpu[NVARIANTS][SWEEP_REPS], dtm;
			size_t calls;

			if (size > B.dst_size)
				continue;
			calls = cut_calls(f, n, size, starts, 64, bytes);
			if (!calls)
				continue;
			for (int r = 0; r < SWEEP_REPS; r++) {
				dt[r] = queued_d2d_gbps(calls, size);
				for (size_t v = 0; v < NVARIANTS; v++)
					if (g[v])
						gt[v][r] = queued_gbps(g[v], f, starts,
								       bytes, calls,
								       size,
								       &cpu[v][r]);
			}
			dtm = median_of(dt, SWEEP_REPS);
			for (size_t v = 0; v < NVARIANTS; v++) {
				double gm;

				if (!g[v])
					continue;
				gm = median_of(gt[v], SWEEP_REPS);
				printf("| %s | %llu KiB | %zu | %.0f | %s | %.0f | **%.1f %%** | %.1f |\n",
				       dist_short[d], (unsigned long long)(size >> 10),
				       (starts[calls] - starts[0]) / calls, dtm,
				       variants[v]->name, gm, 100 * gm / dtm,
				       median_of(cpu[v], SWEEP_REPS));
				fflush(stdout);
			}
		}
		free(f);
	}
	for (size_t v = 0; v < NVARIANTS; v++)
		devmemtcp_gpu_free(g[v]);
	return 0;
}

/* ---- cpu: the CPU cost of a call ---------------------------------------------- */

static int section_cpu(void)
{
	static const size_t counts[] = { 16, 64, 256, 1024, 4096 };
	static const struct variant *const vs[] = { &var_auto, &var_graph,
						    &var_nopdl, &var_ring,
						    &var_persist };
	struct devmemtcp_frag *f;
	uint64_t total;
	size_t n = make_frags(D_4K, 256ull << 20, B.src, B.src_size, &f, &total);

	printf("\n## CPU time of a gather call (4 KiB fragments; 2000 calls, the stream synchronised every 64)\n\n");
	printf("| variant | fragments per call | µs per call (median) | µs (90th percentile) | ns per fragment |\n");
	printf("|---|---:|---:|---:|---:|\n");
	for (size_t v = 0; v < sizeof(vs) / sizeof(vs[0]); v++) {
		struct devmemtcp_gpu *g = variant_open(&B, vs[v]);

		if (!g)
			continue;
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			size_t k = counts[i], calls = 2000;
			static double c[2000];
			double p90;

			for (size_t j = 0; j < calls; j++) {
				double t0 = now_s();

				gather(&B, g, f + (j * k) % (n - k), k, B.dst,
				       k * 4096, B.st);
				c[j] = (now_s() - t0) * 1e6;
				if (j % 64 == 63)
					CK(B.cu->cuStreamSynchronize(B.st));
			}
			CK(B.cu->cuStreamSynchronize(B.st));
			median(c, (int)calls);	/* sorts */
			p90 = c[calls * 9 / 10];
			printf("| %s | %zu | %.2f | %.2f | %.2f |\n", vs[v]->name, k,
			       c[calls / 2], p90, c[calls / 2] * 1e3 / k);
			fflush(stdout);
		}
		devmemtcp_gpu_free(g);
	}
	free(f);
	return 0;
}

/* ---- latency: call to bytes in place ---------------------------------------- */

static void nop_launch(CUstream st)
{
	CK(B.cu->cuLaunchKernel(B.gpu->fn_nop, 1, 1, 1, 32, 1, 1, 0, st, NULL,
				NULL));
}

/* The persistent kernel stops when idle: the first gather restarts it. */
static void latency_restart(struct devmemtcp_gpu *g,
			    const struct devmemtcp_frag *f, size_t n)
{
	const size_t k = 256;
	uint64_t l0 = dmt_gpu_persist_launches(g);
	double t[50];

	for (int r = 0; r < 50; r++) {
		double t0;

		usleep(5000);
		t0 = now_s();
		gather(&B, g, f + (r * k) % (n - k), k, B.dst, k * 4096, B.st);
		CK(B.cu->cuStreamSynchronize(B.st));
		t[r] = (now_s() - t0) * 1e6;
	}
	median(t, 50);
	printf("\nPersistent kernel after 5 ms idle (it stops after 1 ms and restarts): 1 MiB gather + sync %.1f µs median (%.1f at the 90th percentile); %llu restarts in 50 calls.\n",
	       t[25], t[45], (unsigned long long)(dmt_gpu_persist_launches(g) - l0));
}

/* Median (and into *p90 the 90th percentile) µs of R calls of fn. */
#define LAT_R 200
static double lat_us(void (*fn)(int r, void *arg), void *arg, double *p90)
{
	double t[LAT_R];

	for (int r = 0; r < LAT_R; r++) {
		double t0 = now_s();

		fn(r, arg);
		CK(B.cu->cuStreamSynchronize(B.st));
		t[r] = (now_s() - t0) * 1e6;
	}
	median(t, LAT_R);
	*p90 = t[LAT_R * 9 / 10];
	return t[LAT_R / 2];
}

struct lat_arg {
	struct devmemtcp_gpu *g;
	const struct devmemtcp_frag *f;
	size_t n, k;
	uint64_t size;
};

static void lat_gather(int r, void *arg);

/*
 * Back-to-back gathers through the persistent kernel with other idle
 * times: when the time from the call to the bytes in place follows the
 * idle time, a job completes only when the kernel stops (the job or its
 * done word is seen only then); when it stays near 1 ms whatever the
 * idle time, something else waits about 1 ms (compare the fence
 * section's stream waits on a word a kernel writes).  The last run has
 * the streams wait for the kernel's done word in pinned host memory
 * rather than device memory.
 */
static void latency_idle(const struct devmemtcp_frag *f, size_t n)
{
	static const char *const idle_us[] = { "100", "10000", "1000" };
	struct lat_arg a = { .f = f, .n = n, .k = 256, .size = 1 << 20 };

	for (size_t i = 0; i < sizeof(idle_us) / sizeof(idle_us[0]); i++) {
		uint64_t l0;
		double m, p90;

		/* the last: the streams wait for a word in host memory */
		bool host = i == sizeof(idle_us) / sizeof(idle_us[0]) - 1;

		setenv("DEVMEMTCP_GATHER_IDLE_US", idle_us[i], 1);
		if (host)
			setenv("DEVMEMTCP_GATHER_DONE_HOST", "1", 1);
		a.g = variant_open(&B, &var_persist);
		unsetenv("DEVMEMTCP_GATHER_IDLE_US");
		unsetenv("DEVMEMTCP_GATHER_DONE_HOST");
		if (!a.g)
			continue;
		l0 = dmt_gpu_persist_launches(a.g);
		m = lat_us(lat_gather, &a, &p90);
		printf("\nPersistent kernel stopping after %s µs idle%s: 1 MiB back to back, call to bytes in place %.1f µs median (%.1f at the 90th percentile); %llu starts in %d calls.\n",
		       idle_us[i],
		       host ? ", the streams waiting for a done word in pinned host memory" : "",
		       m, p90,
		       (unsigned long long)(dmt_gpu_persist_launches(a.g) - l0),
		       LAT_R);
		fflush(stdout);
		devmemtcp_gpu_free(a.g);
	}
}


static void lat_nop(int r, void *arg)
{
	(void)r;
	(void)arg;
	nop_launch(B.st);
}

static void lat_d2d(int r, void *arg)
{
	const struct lat_arg *a = arg;

	(void)r;
	CK(B.cu->cuMemcpyDtoDAsync(B.dst, B.src, a->size, B.st));
}

static void lat_gather(int r, void *arg)
{
	const struct lat_arg *a = arg;

	gather(&B, a->g, a->f + (r * a->k) % (a->n - a->k), a->k, B.dst,
	       a->size, B.st);
}

static int section_latency(void)
{
	static const uint64_t sizes[] = { 64 << 10, 256 << 10, 1 << 20, 4 << 20 };
	static const struct variant *const vs[] = { &var_auto, &var_ring,
						    &var_persist };
	struct devmemtcp_gpu *g[3];
	struct devmemtcp_frag *f;
	uint64_t total;
	size_t n = make_frags(D_4K, 64ull << 20, B.src, B.src_size, &f, &total);
	double persist_1m = -1, p90;

	for (int v = 0; v < 3; v++)
		g[v] = variant_open(&B, vs[v]);
	printf("\n## Latency on an idle GPU: from the call to the bytes in place (call + cuStreamSynchronize), 4 KiB fragments, µs, median of %d (90th percentile)\n\n", LAT_R);
	printf("| bytes | empty kernel | d2d copy | gather: launch (inline) | gather: pinned slot | gather: persistent kernel |\n");
	printf("|---:|---:|---:|---:|---:|---:|\n");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct lat_arg a = { .f = f, .n = n, .k = sizes[s] / 4096,
				     .size = sizes[s] };
		double m;

		printf("| %llu KiB", (unsigned long long)(sizes[s] >> 10));
		m = lat_us(lat_nop, NULL, &p90);
		printf(" | %.1f (%.1f)", m, p90);
		m = lat_us(lat_d2d, &a, &p90);
		printf(" | %.1f (%.1f)", m, p90);
		for (int v = 0; v < 3; v++) {
			if (!g[v]) {
				printf(" | -");
				continue;
			}
			a.g = g[v];
			m = lat_us(lat_gather, &a, &p90);
			printf(" | %s%.1f%s (%.1f)", v == 2 ? "**" : "", m,
			       v == 2 ? "**" : "", p90);
			if (v == 2 && sizes[s] == 1 << 20)
				persist_1m = m;
		}
		printf(" |\n");
		fflush(stdout);
	}
	if (g[2])
		latency_restart(g[2], f, n);
	latency_idle(f, n);
	if (persist_1m >= 0)
		printf("\nPersistent kernel, 1 MiB, call to bytes in place: %.1f µs median (target <= 20 µs: %s).\n",
		       persist_1m, persist_1m <= 20 ? "met" : "not met");
	printf("\nTarget: <= 20 µs at 1 MiB.\n");
	for (int v = 0; v < 3; v++)
		devmemtcp_gpu_free(g[v]);
	free(f);
	return 0;
}

/* ---- fence: how soon a waiter sees what the GPU published --------------------- */

#define FENCE_DELAY_NS 50000ull	/* the kernel's work before it publishes */

static CUfunction fn_spin_write;
static volatile uint32_t *fence_word;	/* pinned, mapped */
static CUdeviceptr fence_word_dev;
static CUevent fence_ev;

/* The kernel writes the word itself; the CPU polls it. */
static void fw_word(int r, void *arg)
{
	unsigned long long ns = FENCE_DELAY_NS, addr = fence_word_dev;
	unsigned int value = (unsigned int)r + 1;
	void *params[] = { &ns, &addr, &value };
	double t0 = now_s();

	(void)arg;
	CK(B.cu->cuLaunchKernel(fn_spin_write, 1, 1, 1, 1, 1, 1, 0, B.st,
				params, NULL));
	while (__atomic_load_n(fence_word, __ATOMIC_ACQUIRE) != value) {
		if (now_s() - t0 > 1.0) {
			fprintf(stderr, "dmt_spin_write: the word did not change within 1 s\n");
			exit(1);
		}
	}
}

/* A library fence behind the kernel, polled (wait: waited for). */
static void fence_after(bool wait)
{
	struct devmemtcp_gpu_fence *f;
	int ret;

	if (dmt_gpu_spin(B.gpu, B.st, FENCE_DELAY_NS) ||
	    devmemtcp_gpu_fence_new(B.gpu, B.st, &f)) {
		fprintf(stderr, "fence: %s\n", devmemtcp_gpu_errmsg(B.gpu));
		exit(1);
	}
	while ((ret = devmemtcp_gpu_fence_done(f, wait)) == 0)
		;
	if (ret != 1) {
		fprintf(stderr, "fence_done: %s\n", devmemtcp_gpu_errmsg(B.gpu));
		exit(1);
	}
}

static void fw_fence_poll(int r, void *arg)
{
	(void)r;
	(void)arg;
	fence_after(false);
}

static void fw_fence_wait(int r, void *arg)
{
	(void)r;
	(void)arg;
	fence_after(true);
}

static void fw_event(int r, void *arg)
{
	CUresult res;

	(void)r;
	(void)arg;
	dmt_gpu_spin(B.gpu, B.st, FENCE_DELAY_NS);
	CK(B.cu->cuEventRecord(fence_ev, B.st));
	while ((res = B.cu->cuEventQuery(fence_ev)) == CUDA_ERROR_NOT_READY)
		;
	CK(res);
}

/* A kernel on another stream writes a word of device memory; the bench
 * stream waits for it (cuStreamWaitValue32), as the callers' streams wait
 * for the persistent kernel's done word. */
static CUstream fence_st2;
static CUdeviceptr fence_dword;

static void fw_stream_wait(int r, void *arg)
{
	unsigned long long ns = FENCE_DELAY_NS, addr = fence_dword;
	unsigned int value = (unsigned int)r + 1;
	void *params[] = { &ns, &addr, &value };

	(void)arg;
	CK(B.cu->cuStreamWaitValue32(B.st, fence_dword, value,
				     CU_STREAM_WAIT_VALUE_GEQ));
	CK(B.cu->cuLaunchKernel(fn_spin_write, 1, 1, 1, 1, 1, 1, 0, fence_st2,
				params, NULL));
}

/* The same with the word in pinned host memory. */
static void fw_stream_wait_host(int r, void *arg)
{
	unsigned long long ns = FENCE_DELAY_NS, addr = fence_word_dev;
	unsigned int value = (unsigned int)r + 1;
	void *params[] = { &ns, &addr, &value };

	(void)arg;
	CK(B.cu->cuStreamWaitValue32(B.st, fence_word_dev, value,
				     CU_STREAM_WAIT_VALUE_GEQ));
	CK(B.cu->cuLaunchKernel(fn_spin_write, 1, 1, 1, 1, 1, 1, 0, fence_st2,
				params, NULL));
}

static void fw_sync(int r, void *arg)
{
	(void)r;
	(void)arg;
	dmt_gpu_spin(B.gpu, B.st, FENCE_DELAY_NS);
}

static int section_fence(void)
{
	static const struct {
		const char *name;
		void (*fn)(int r, void *arg);
	} ways[] = {
		{ "the kernel writes a pinned word (dmt_spin_write), the CPU polls it: the floor", fw_word },
		{ "devmemtcp_gpu_fence_new behind the kernel, fence_done(f, false) polled", fw_fence_poll },
		{ "devmemtcp_gpu_fence_new behind the kernel, fence_done(f, true)", fw_fence_wait },
		{ "cuEventRecord behind the kernel, cuEventQuery polled", fw_event },
		{ "cuStreamSynchronize", fw_sync },
		{ "a kernel on another stream writes a device word, the stream waits for it (cuStreamWaitValue32), cuStreamSynchronize", fw_stream_wait },
		{ "the same with a word of pinned host memory", fw_stream_wait_host },
	};
	void *host;

	if (B.cu->cuModuleGetFunction(&fn_spin_write, B.gpu->mod,
				      "dmt_spin_write") != CUDA_SUCCESS) {
		printf("\n## Fence latency: skipped (the kernels have no dmt_spin_write)\n");
		return 0;
	}
	CK(B.cu->cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP));
	CK(B.cu->cuMemHostGetDevicePointer(&fence_word_dev, host, 0));
	fence_word = host;
	*fence_word = 0;
	CK(B.cu->cuEventCreate(&fence_ev, CU_EVENT_DISABLE_TIMING));
	CK(B.cu->cuStreamCreate(&fence_st2, CU_STREAM_NON_BLOCKING));
	CK(B.cu->cuMemAlloc(&fence_dword, 64));
	CK(B.cu->cuMemsetD8Async(fence_dword, 0, 64, fence_st2));
	CK(B.cu->cuStreamSynchronize(fence_st2));
	printf("\n## Fence latency: a kernel works %llu µs, then how soon the CPU sees it done (µs from the launch, median of %d; 90th percentile)\n\n",
	       FENCE_DELAY_NS / 1000, LAT_R);
	printf("| wait | µs | 90th | µs past the kernel's %llu |\n|---|---:|---:|---:|\n",
	       FENCE_DELAY_NS / 1000);
	for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++) {
		double p90, m = lat_us(ways[i].fn, NULL, &p90);

		*fence_word = 0;
		printf("| %s | %.1f | %.1f | **%.1f** |\n", ways[i].name, m, p90,
		       m - FENCE_DELAY_NS / 1e3);
		fflush(stdout);
	}
	B.cu->cuEventDestroy(fence_ev);
	CK(B.cu->cuStreamSynchronize(fence_st2));
	B.cu->cuStreamDestroy(fence_st2);
	CK(B.cu->cuMemFree(fence_dword));
	CK(B.cu->cuMemFreeHost(host));
	return 0;
}

/* ---- micro: what the calls cost ---------------------------------------------- */

struct micro {
	const char *name;
	void (*fn)(void *arg);
	void *arg;
};

static CUdeviceptr word;
static CUgraph graph;
static CUgraphExec gexec;
static CUgraphNode gnode;
static CUfunction inline_fn[DMT_INLINE_NSIZES];
static struct dmt_gather_inline *inl;
static CUevent ev_done;

static void m_nop(void *a)
{
	(void)a;
	nop_launch(B.st);
}

static void m_inline(void *a)
{
	void *params[] = { inl };

	CK(B.cu->cuLaunchKernel(inline_fn[(uintptr_t)a], 1, 1, 1, 32, 1, 1, 0,
				B.st, params, NULL));
}

static void m_event(void *a)
{
	(void)a;
	CK(B.cu->cuEventRecord(B.ev0, B.st));
}

static void m_query(void *a)
{
	(void)a;
	B.cu->cuEventQuery(ev_done);
}

static void m_write32(void *a)
{
	(void)a;
	CK(B.cu->cuStreamWriteValue32(B.st, word, 1, 0));
}

static void m_write64(void *a)
{
	(void)a;
	CK(B.cu->cuStreamWriteValue64(B.st, word, 1, 0));
}

static void m_wait32(void *a)
{
	(void)a;
	CK(B.cu->cuStreamWaitValue32(B.st, word, 0, CU_STREAM_WAIT_VALUE_GEQ));
}

static void m_d2d(void *a)
{
	(void)a;
	CK(B.cu->cuMemcpyDtoDAsync(B.dst, B.src, 1 << 20, B.st));
}

static void m_graph(void *a)
{
	(void)a;
	CK(B.cu->cuGraphLaunch(gexec, B.st));
}

static void m_graph_update(void *a)
{
	void *params[] = { inl };
	CUDA_KERNEL_NODE_PARAMS p = { .func = inline_fn[2], .gridDimX = 1,
				      .gridDimY = 1, .gridDimZ = 1,
				      .blockDimX = 32, .blockDimY = 1,
				      .blockDimZ = 1, .kernelParams = params };

	(void)a;
	CK(B.cu->cuGraphExecKernelNodeSetParams(gexec, gnode, &p));
	CK(B.cu->cuGraphLaunch(gexec, B.st));
}

static void m_getcur(void *a)
{
	CUcontext c;

	(void)a;
	B.cu->cuCtxGetCurrent(&c);
}

static void m_pushpop(void *a)
{
	CUcontext c;

	(void)a;
	B.cu->cuCtxPushCurrent(B.cctx);
	B.cu->cuCtxPopCurrent(&c);
}

static void m_capturing(void *a)
{
	int st;

	(void)a;
	B.cu->cuStreamIsCapturing(B.st, &st);
}

static void m_fence(void *a)
{
	struct devmemtcp_gpu_fence *f;

	(void)a;
	if (devmemtcp_gpu_fence_new(B.gpu, B.st, &f) ||
	    devmemtcp_gpu_fence_done(f, true) != 1)
		abort();
}

/* Median µs per call over batches of 64 calls, synchronised between. */
static double micro_us(const struct micro *m)
{
	double t[64];

	for (int b = 0; b < 40; b++) {
		double t0 = now_s();

		for (int i = 0; i < 64; i++)
			m->fn(m->arg);
		if (b >= 8)
			t[b - 8] = (now_s() - t0) * 1e6 / 64;
		CK(B.cu->cuStreamSynchronize(B.st));
	}
	return median(t, 32);
}

static bool graph_setup(void)
{
	void *params[] = { inl };
	CUDA_KERNEL_NODE_PARAMS p = { .func = inline_fn[2], .gridDimX = 1,
				      .gridDimY = 1, .gridDimZ = 1,
				      .blockDimX = 32, .blockDimY = 1,
				      .blockDimZ = 1, .kernelParams = params };

	if (!B.cu->cuGraphCreate || !B.cu->cuGraphAddKernelNode ||
	    !B.cu->cuGraphInstantiate || !B.cu->cuGraphLaunch ||
	    !B.cu->cuGraphExecKernelNodeSetParams)
		return false;
	CK(B.cu->cuGraphCreate(&graph, 0));
	CK(B.cu->cuGraphAddKernelNode(&gnode, graph, NULL, 0, &p));
	CK(B.cu->cuGraphInstantiate(&gexec, graph, 0));
	return true;
}

static int section_micro(void)
{
	static const uint32_t sizes[DMT_INLINE_NSIZES] = DMT_INLINE_SIZES;
	struct micro m[32];
	char names[DMT_INLINE_NSIZES][96];
	int k = 0;
	bool graphs;

	inl = calloc(1, sizeof(*inl) + 1024 * sizeof(struct dmt_gather_desc));
	if (!inl)
		abort();
	for (int i = 0; i < DMT_INLINE_NSIZES; i++) {
		char fn[32];

		snprintf(fn, sizeof(fn), "dmt_gather_inline%u", sizes[i]);
		CK(B.cu->cuModuleGetFunction(&inline_fn[i], B.gpu->mod, fn));
	}
	CK(B.cu->cuMemAlloc(&word, 64));
	CK(B.cu->cuMemsetD8Async(word, 0, 64, B.st));
	CK(B.cu->cuEventCreate(&ev_done, CU_EVENT_DISABLE_TIMING));
	CK(B.cu->cuEventRecord(ev_done, B.st));
	CK(B.cu->cuStreamSynchronize(B.st));
	graphs = graph_setup();

	m[k++] = (struct micro){ "cuLaunchKernel, empty kernel, no parameter", m_nop };
	for (int i = 0; i < DMT_INLINE_NSIZES; i++) {
		snprintf(names[i], sizeof(names[i]),
			 "cuLaunchKernel, inline gather of 0 descriptors, %u-byte parameter",
			 DMT_INLINE_HDR + sizes[i] * 16);
		m[k++] = (struct micro){ names[i], m_inline, (void *)(uintptr_t)i };
	}
	m[k++] = (struct micro){ "cuEventRecord", m_event };
	m[k++] = (struct micro){ "cuEventQuery (complete)", m_query };
	m[k++] = (struct micro){ "devmemtcp_gpu_fence_new + fence_done(wait) (idle stream)", m_fence };
	if (B.cu->cuStreamWriteValue32)
		m[k++] = (struct micro){ "cuStreamWriteValue32 (device memory)", m_write32 };
	if (B.cu->cuStreamWriteValue64)
		m[k++] = (struct micro){ "cuStreamWriteValue64 (device memory)", m_write64 };
	if (B.cu->cuStreamWaitValue32)
		m[k++] = (struct micro){ "cuStreamWaitValue32 (already true)", m_wait32 };
	m[k++] = (struct micro){ "cuMemcpyDtoDAsync, 1 MiB", m_d2d };
	if (graphs) {
		m[k++] = (struct micro){ "cuGraphLaunch, one inline-gather node (4.2 KB parameter)", m_graph };
		m[k++] = (struct micro){ "cuGraphExecKernelNodeSetParams + cuGraphLaunch, same node", m_graph_update };
	}
	m[k++] = (struct micro){ "cuCtxGetCurrent", m_getcur };
	m[k++] = (struct micro){ "cuCtxPushCurrent + cuCtxPopCurrent", m_pushpop };
	if (B.cu->cuStreamIsCapturing)
		m[k++] = (struct micro){ "cuStreamIsCapturing", m_capturing };

	printf("\n## CPU cost of driver calls (median of 32 batches of 64 calls, the stream synchronised between batches)\n\n");
	printf("| call | µs per call |\n|---|---:|\n");
	for (int i = 0; i < k; i++) {
		printf("| %s | %.2f |\n", m[i].name, micro_us(&m[i]));
		fflush(stdout);
	}
	if (graphs) {
		B.cu->cuGraphExecDestroy(gexec);
		B.cu->cuGraphDestroy(graph);
	}
	B.cu->cuEventDestroy(ev_done);
	B.cu->cuMemFree(word);
	free(inl);
	return 0;
}

/* ---- graph: gathers through a CUDA graph, the node's parameter set per call ---- */

/* One graph per inline kernel size: a kernel node of that kernel (the node's
 * function cannot change once instantiated). */
struct graph_gather {
	struct devmemtcp_gpu *g;
	struct dmt_gather_inline *p;
	CUgraph graph[DMT_INLINE_NSIZES];
	CUgraphNode node[DMT_INLINE_NSIZES];
	CUgraphExec exec[DMT_INLINE_NSIZES];
};

/* Queue the gather of f[0..n) into [to, to + len) as a launch of the graph
 * of its size, after setting the node's parameter to this gather's
 * descriptors and grid (built as the library builds an inline launch). */
static void graph_gather(struct graph_gather *gg,
			 const struct devmemtcp_frag *f, size_t n,
			 CUdeviceptr to, uint64_t len)
{
	static const uint32_t sizes[DMT_INLINE_NSIZES] = DMT_INLINE_SIZES;
	struct devmemtcp_gpu *g = gg->g;
	struct devmemtcp_gpu_iov iov = { to, len };
	struct dmt_gather_cursor cur = { 0 };
	struct dmt_gather_batch b = { .desc = gg->p->desc, .dst = gg->p->dst,
				      .max_desc = sizes[DMT_INLINE_NSIZES - 1],
				      .max_dst = DMT_INLINE_DST_MAX };
	struct dmt_gather_geom geo;
	void *params[] = { gg->p };
	CUDA_KERNEL_NODE_PARAMS np;
	int k = 0;

	if (dmt_gather_build(g->ctx, &g->err, f, n, &iov, 1, &cur, &b) ||
	    cur.i < n || !b.nd) {
		fprintf(stderr, "graph gather: %zu fragments do not fit one inline launch: %s\n",
			n, devmemtcp_gpu_errmsg(g));
		exit(1);
	}
	while (sizes[k] < b.nd)
		k++;
	dmt_gather_geometry(b.nd, b.bytes, g->sms, g->per_warp, g->split,
			    g->warps_per_block, &geo);
	if (!g->inline_1d)
		dmt_gather_geometry_2d(b.nd, &geo);
	gg->p->a = (struct dmt_gather_args){ .bias = b.dst[0].bias,
					     .n = b.nd, .ndst = b.ndst,
					     .per = geo.per,
					     .split = geo.split };
	np = (CUDA_KERNEL_NODE_PARAMS){ .func = g->fn_inline[k],
					.gridDimX = geo.gx, .gridDimY = geo.gy,
					.gridDimZ = 1, .blockDimX = 32 * geo.wpb,
					.blockDimY = 1, .blockDimZ = 1,
					.kernelParams = params };
	if (!gg->exec[k]) {
		CK(B.cu->cuGraphCreate(&gg->graph[k], 0));
		CK(B.cu->cuGraphAddKernelNode(&gg->node[k], gg->graph[k], NULL,
					      0, &np));
		CK(B.cu->cuGraphInstantiate(&gg->exec[k], gg->graph[k], 0));
	} else {
		CK(B.cu->cuGraphExecKernelNodeSetParams(gg->exec[k],
							gg->node[k], &np));
	}
	CK(B.cu->cuGraphLaunch(gg->exec[k], B.st));
}

static void graph_gather_free(struct graph_gather *gg)
{
	for (int k = 0; k < DMT_INLINE_NSIZES; k++) {
		if (gg->exec[k])
			B.cu->cuGraphExecDestroy(gg->exec[k]);
		if (gg->graph[k])
			B.cu->cuGraphDestroy(gg->graph[k]);
	}
	free(gg->p);
}

/* Gather call c of size bytes from f (graph: through gg, else g). */
static void graph_row_call(struct graph_gather *gg, struct devmemtcp_gpu *g,
			   const struct devmemtcp_frag *f, size_t k,
			   CUdeviceptr to, uint64_t size)
{
	if (gg)
		graph_gather(gg, f, k, to, size);
	else
		gather(&B, g, f, k, to, size, B.st);
}

/* One row: CPU µs per call, GPU GB/s of calls queued behind a spin, call
 * to bytes in place, and every queued call's bytes checked. */
static int graph_row(const char *name, struct graph_gather *gg,
		     struct devmemtcp_gpu *g, const struct devmemtcp_frag *f,
		     size_t n, size_t k, double d2d)
{
	const uint64_t size = (uint64_t)k * 4096;
	size_t calls = B.dst_size / size < 64 ? B.dst_size / size : 64;
	double ct[64], lt[LAT_R], gbps;
	int bad = 0;

	graph_row_call(gg, g, f, k, B.dst, size);	/* warm */
	CK(B.cu->cuStreamSynchronize(B.st));
	dmt_gpu_spin(B.gpu, B.st, 20 * 1000 * 1000);
	CK(B.cu->cuEventRecord(B.ev0, B.st));
	for (size_t c = 0; c < calls; c++) {
		double t0 = now_s();

		graph_row_call(gg, g, f + (c * k) % (n - k), k, B.dst + c * size,
			       size);
		ct[c] = (now_s() - t0) * 1e6;
	}
	CK(B.cu->cuEventRecord(B.ev1, B.st));
	gbps = calls * size / (event_ms(&B) * 1e-3) / 1e9;
	/* each call's own bytes: a parameter set for a later call must not
	 * have reached an earlier launch */
	for (size_t c = 0; c < calls && !bad; c++)
		bad = verify_at(f + (c * k) % (n - k), k, size,
				B.dst + c * size) != 0;
	for (int r = 0; r < LAT_R; r++) {
		double t0 = now_s();

		graph_row_call(gg, g, f + (r * k) % (n - k), k, B.dst, size);
		CK(B.cu->cuStreamSynchronize(B.st));
		lt[r] = (now_s() - t0) * 1e6;
	}
	median(lt, LAT_R);
	printf("| %llu KiB (%zu frags) | %s | %.2f | %.0f | %.1f %% | %.1f | %s |\n",
	       (unsigned long long)(size >> 10), k, name, median(ct, (int)calls),
	       gbps, 100 * gbps / d2d, lt[LAT_R / 2],
	       bad ? "MISMATCH" : "bytes equal");
	fflush(stdout);
	return bad;
}

static int section_graph(void)
{
	static const size_t counts[] = { 16, 64, 256, 1024 };
	struct graph_gather gg = { 0 };
	struct devmemtcp_gpu *g = variant_open(&B, &var_auto);
	struct devmemtcp_gpu *gp = variant_open(&B, &var_graph);
	struct devmemtcp_frag *f;
	uint64_t total;
	size_t n = make_frags(D_4K, 256ull << 20, B.src, B.src_size, &f, &total);
	int bad = 0;

	if (!gp || !B.cu->cuGraphCreate || !B.cu->cuGraphAddKernelNode ||
	    !B.cu->cuGraphInstantiate || !B.cu->cuGraphLaunch ||
	    !B.cu->cuGraphExecKernelNodeSetParams || !g) {
		printf("\n## CUDA graphs: skipped (the driver has no graph calls)\n");
		devmemtcp_gpu_free(gp);
		devmemtcp_gpu_free(g);
		free(f);
		return 0;
	}
	gg.g = g;
	gg.p = calloc(1, DMT_INLINE_HDR + 1024 * sizeof(struct dmt_gather_desc));
	if (!gg.p)
		abort();
	printf("\n## CUDA graph launches against the library's inline launch (4 KiB fragments)\n\n");
	printf("The graph: one kernel node (the inline gather kernel of the call's size), its parameter set with cuGraphExecKernelNodeSetParams, then cuGraphLaunch. CPU µs: median of up to 64 calls queued behind a spinning kernel; GB/s: those calls, GPU time, against as many d2d copies of the size; latency: call + cuStreamSynchronize on an idle GPU; check: every queued call's destination.\n\n");
	printf("| bytes per call | launch | CPU µs per call | GB/s | of d2d | call to bytes µs | check |\n");
	printf("|---|---|---:|---:|---:|---:|---|\n");
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		uint64_t size = counts[i] * 4096;
		size_t calls = B.dst_size / size < 64 ? B.dst_size / size : 64;
		double d2d = queued_d2d_gbps(calls, size);

		bad |= graph_row("library, launch with programmatic dependence (default)",
				 NULL, g, f, n, counts[i], d2d);
		bad |= graph_row("library, inline through its graphs (DEVMEMTCP_GPU_GRAPHS)",
				 NULL, gp, f, n, counts[i], d2d);
		bad |= graph_row("the benchmark's own graph, node parameter set per call",
				 &gg, g, f, n, counts[i], d2d);
	}
	graph_gather_free(&gg);
	devmemtcp_gpu_free(gp);
	devmemtcp_gpu_free(g);
	free(f);
	return bad;
}

/* ---- tune: warps per fragment at receive sizes --------------------------------- */

static int section_tune(void)
{
	static const char *const splits[] = { NULL, "1", "2", "4", "8", "16" };
	static const uint64_t sizes[] = { 64 << 10, 256 << 10, 1 << 20, 4 << 20 };
	struct devmemtcp_frag *f[2];
	uint64_t total;
	size_t n[2];

	n[0] = make_frags(D_4K, 512ull << 20, B.src, B.src_size, &f[0], &total);
	n[1] = make_frags(D_1448, 512ull << 20, B.src, B.src_size, &f[1], &total);
	printf("\n## Tuning: warps per fragment at receive sizes (GB/s, 64 calls queued; auto: about 512 B to 2 KiB a warp)\n\n");
	printf("| launch | fragments | bytes per call | auto | 1 | 2 | 4 | 8 | 16 |\n");
	printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int mode = 0; mode < 2; mode++) {
		for (int d = 0; d < 2; d++) {
			for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				size_t starts[66];
				uint64_t bytes[65];
				size_t calls = cut_calls(f[d], n[d], sizes[s], starts,
							 64, bytes);

				printf("| %s | %s | %llu KiB |",
				       mode ? "slot" : "auto (inline up to 1024)",
				       d ? "1448 B" : "4 KiB",
				       (unsigned long long)(sizes[s] >> 10));
				for (int k = 0; k < 6; k++) {
					struct variant v = { "tune", .split = splits[k],
							     .mode = mode ? "ring" : NULL,
							     .slots = 64,
							     .max_frags = 4096 };
					struct devmemtcp_gpu *g = variant_open(&B, &v);
					double cpu;

					if (!g || !calls) {
						printf(" - |");
						continue;
					}
					printf(" %.0f |", queued_gbps(g, f[d], starts,
								      bytes, calls,
								      sizes[s], &cpu));
					devmemtcp_gpu_free(g);
				}
				printf("\n");
				fflush(stdout);
			}
		}
	}
	free(f[0]);
	free(f[1]);
	return 0;
}

/* Descriptors per warp, cache hints and block size at total_target. */
static int section_tune_large(void)
{
	static const char *const pers[] = { "1", "2", "4", "8", "16", "32" };
	struct devmemtcp_frag *f[3];
	uint64_t total[3];
	size_t n[3];

	printf("\n## Tuning at %llu MiB: descriptors per warp and cache hints (GB/s; auto = 8 KiB per warp, 2 to 32 fragments)\n\n",
	       (unsigned long long)(total_target >> 20));
	printf("| kernel | per warp | 4 KiB | 1448 B | mixed |\n|---|---|---:|---:|---:|\n");
	for (int d = 0; d < 3; d++)
		n[d] = make_frags((enum dist)d, total_target, B.src, B.src_size,
				  &f[d], &total[d]);
	for (int k = 0; k < 5; k++) {
		for (int p = -1; p < (k >= 2 ? 0 : 6); p++) {
			DEVMEMTCP_OPTS(gpu_opts, o, .max_frags = 1u << 20, .slots = 2,
				       .cuda_device = B.device);
			struct devmemtcp_gpu *g;

			setenv("DEVMEMTCP_GATHER_MODE", "ring", 1);
			setenv("DEVMEMTCP_GATHER_KERNEL",
			       k == 1 ? "dmt_gather_cs" : "dmt_gather", 1);
			if (k == 2)
				setenv("DEVMEMTCP_GATHER_CACHED", "1", 1);
			if (k >= 3)
				setenv("DEVMEMTCP_GATHER_WARPS", k == 3 ? "4" : "2", 1);
			if (p >= 0)
				setenv("DEVMEMTCP_GATHER_PER", pers[p], 1);
			if (devmemtcp_gpu_new(B.ctx, &o, &g)) {
				fprintf(stderr, "tuning: %s\n", devmemtcp_ctx_errmsg(B.ctx));
				return 1;
			}
			unsetenv("DEVMEMTCP_GATHER_CACHED");
			unsetenv("DEVMEMTCP_GATHER_WARPS");
			unsetenv("DEVMEMTCP_GATHER_PER");
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
	unsetenv("DEVMEMTCP_GATHER_MODE");
	unsetenv("DEVMEMTCP_GATHER_KERNEL");
	for (int d = 0; d < 3; d++)
		free(f[d]);
	return 0;
}

/* ---- main ------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(void);
} sections[] = {
	{ "dist", section_dist },
	{ "sweep", section_sweep },
	{ "cpu", section_cpu },
	{ "latency", section_latency },
	{ "fence", section_fence },
	{ "graph", section_graph },
	{ "micro", section_micro },
	{ "tune", section_tune },
	{ "tune-large", section_tune_large },
};

static int usage(const char *argv0, int status)
{
	fprintf(stderr, "usage: %s [-d device] [-s MiB] [-r reps] [-t dist,sweep,cpu,latency,fence,graph,micro,tune,tune-large]\n",
		argv0);
	return status;
}

int main(int argc, char **argv)
{
	const char *which = "dist,sweep,cpu,latency,fence,graph,micro,tune";
	int device = 0, opt, status = 0;

	while ((opt = getopt(argc, argv, "d:s:r:t:h")) != -1) {
		switch (opt) {
		case 'd':
			device = atoi(optarg);
			break;
		case 's':
			total_target = strtoull(optarg, NULL, 0) << 20;
			if (!total_target)
				return usage(argv[0], 2);
			break;
		case 'r':
			reps = atoi(optarg);
			if (reps < 1 || reps > 63)
				return usage(argv[0], 2);
			break;
		case 't':
			which = optarg;
			break;
		default:
			return usage(argv[0], opt == 'h' ? 0 : 2);
		}
	}
	/* source: 4x the largest batch; destination: a batch plus room */
	status = bench_open(&B, device, 4 * total_target,
			    total_target + (1 << 20));
	if (status >= 0)
		return status;
	status = 0;
	bench_header(&B, "Gather benchmark");
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		char list[256];
		bool on = false;

		snprintf(list, sizeof(list), ",%s,", which);
		{
			char key[64];

			snprintf(key, sizeof(key), ",%s,", sections[i].name);
			on = strstr(list, key) != NULL;
		}
		if (on)
			status |= sections[i].fn();
	}
	bench_close(&B);
	return status ? 1 : 0;
}
