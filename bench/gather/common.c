// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* What the GPU benchmarks share (common.h). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *const dist_name[D_N] = {
	"4 KiB, page-aligned source",
	"1448 B, page-aligned source, packed destination",
	"mixed sizes, arbitrary source offsets",
	"4 KiB, source pages in order (no randomness)",
};

const char *const dist_short[D_N] = { "4 KiB", "1448 B", "mixed", "4 KiB seq" };

size_t make_frags(enum dist d, uint64_t bytes, CUdeviceptr base, uint64_t size,
		  struct devmemtcp_frag **fp, uint64_t *totalp)
{
	size_t cap = bytes / 1024 + 16, n = 0;
	uint64_t pages = size / 4096, total = 0;
	struct devmemtcp_frag *f = calloc(cap, sizeof(*f));

	if (!f)
		abort();
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
			off = rnd() % (size - len);
		}
		f[n] = (struct devmemtcp_frag){ .offset = off, .addr = base + off,
						.len = len, .token = (uint32_t)n };
		total += len;
		n++;
	}
	*fp = f;
	*totalp = total;
	return n;
}

static void quiet(void *user, int level, const char *msg)
{
	(void)user;
	if (level <= DEVMEMTCP_LOG_ERR)
		fprintf(stderr, "devmemtcp: %s\n", msg);
}

int bench_open(struct bench *b, int device, uint64_t src_size,
	       uint64_t dst_size)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = quiet);
	DEVMEMTCP_OPTS(gpu_opts, go, .cuda_device = device);
	uint8_t *pattern;
	int ret;

	memset(b, 0, sizeof(*b));
	b->device = device;
	if (devmemtcp_ctx_new(&co, &b->ctx))
		return 1;
	ret = devmemtcp_gpu_new(b->ctx, &go, &b->gpu);
	if (ret) {
		printf("SKIP: %s\n", devmemtcp_ctx_errmsg(b->ctx));
		return ret == -ENOENT || ret == -ENODEV ? 77 : 1;
	}
	b->cu = dmt_gpu_cuda(b->gpu);
	CK(b->cu->cuDeviceGet(&b->dev, device));
	CK(b->cu->cuDevicePrimaryCtxRetain(&b->cctx, b->dev));
	CK(b->cu->cuCtxPushCurrent(b->cctx));
	CK(b->cu->cuDeviceGetName(b->name, sizeof(b->name), b->dev));
	CK(b->cu->cuStreamCreate(&b->st, CU_STREAM_NON_BLOCKING));
	CK(b->cu->cuEventCreate(&b->ev0, CU_EVENT_DEFAULT));
	CK(b->cu->cuEventCreate(&b->ev1, CU_EVENT_DEFAULT));
	b->src_size = src_size;
	b->dst_size = dst_size;
	CK(b->cu->cuMemAlloc(&b->src, src_size));
	CK(b->cu->cuMemAlloc(&b->dst, dst_size));
	pattern = malloc(PATTERN_SIZE);
	if (!pattern)
		abort();
	for (uint64_t i = 0; i < PATTERN_SIZE; i += 8) {
		uint64_t v = rnd();

		memcpy(pattern + i, &v, 8);
	}
	for (uint64_t o = 0; o < src_size; o += PATTERN_SIZE)
		CK(b->cu->cuMemcpyHtoD(b->src + o, pattern,
				       src_size - o < PATTERN_SIZE ? src_size - o
								   : PATTERN_SIZE));
	b->pattern = pattern;
	return -1;
}

int bench_same(const struct bench *b, const uint8_t *got, uint64_t off,
	       uint64_t len)
{
	for (uint64_t k = 0; k < len;) {
		uint64_t po = (off + k) % PATTERN_SIZE, run = PATTERN_SIZE - po;

		if (run > len - k)
			run = len - k;
		if (memcmp(got + k, b->pattern + po, run))
			return -1;
		k += run;
	}
	return 0;
}

void bench_close(struct bench *b)
{
	b->cu->cuStreamSynchronize(b->st);
	b->cu->cuMemFree(b->src);
	b->cu->cuMemFree(b->dst);
	b->cu->cuEventDestroy(b->ev0);
	b->cu->cuEventDestroy(b->ev1);
	b->cu->cuStreamDestroy(b->st);
	devmemtcp_gpu_free(b->gpu);
	devmemtcp_ctx_free(b->ctx);
	free(b->pattern);
}

void bench_header(const struct bench *b, const char *title)
{
	time_t t = time(NULL);
	int sms = 0;

	b->cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
				    b->dev);
	printf("# %s\n\n", title);
	printf("- GPU: %s (device %d, %d SMs), CUDA driver API %d.%d\n", b->name,
	       b->device, sms, b->cu->driver_version / 1000,
	       b->cu->driver_version % 1000 / 10);
	printf("- date: %s", asctime(gmtime(&t)));
}

struct devmemtcp_gpu *variant_open(const struct bench *b,
				   const struct variant *v)
{
	DEVMEMTCP_OPTS(gpu_opts, o, .cuda_device = b->device, .flags = v->flags,
		       .max_frags = v->max_frags, .slots = v->slots);
	struct devmemtcp_gpu *g = NULL;

	/* gpu-run.sh: the tests found the persistent kernel stuck */
	if ((v->flags & DEVMEMTCP_GPU_PERSISTENT) && getenv("BENCH_NO_PERSIST")) {
		printf("\n(%s: not run, BENCH_NO_PERSIST is set)\n", v->name);
		return NULL;
	}
	if (v->mode)
		setenv("DEVMEMTCP_GATHER_MODE", v->mode, 1);
	if (v->split)
		setenv("DEVMEMTCP_GATHER_SPLIT", v->split, 1);
	if (v->inline_max)
		setenv("DEVMEMTCP_GATHER_INLINE_MAX", v->inline_max, 1);
	if (v->cached)
		setenv("DEVMEMTCP_GATHER_CACHED", "1", 1);
	if (v->no_pdl)
		setenv("DEVMEMTCP_GATHER_NO_PDL", "1", 1);
	if (devmemtcp_gpu_new(b->ctx, &o, &g)) {
		printf("\n(%s: %s)\n", v->name, devmemtcp_ctx_errmsg(b->ctx));
		g = NULL;
	}
	unsetenv("DEVMEMTCP_GATHER_MODE");
	unsetenv("DEVMEMTCP_GATHER_SPLIT");
	unsetenv("DEVMEMTCP_GATHER_INLINE_MAX");
	unsetenv("DEVMEMTCP_GATHER_CACHED");
	unsetenv("DEVMEMTCP_GATHER_NO_PDL");
	return g;
}

void gather(const struct bench *b, struct devmemtcp_gpu *g,
	    const struct devmemtcp_frag *f, size_t n, CUdeviceptr to,
	    uint64_t len, CUstream st)
{
	struct devmemtcp_gpu_iov d = { to, len };

	(void)b;
	if (devmemtcp_gpu_gather(g, f, n, &d, 1, st)) {
		fprintf(stderr, "gather: %s\n", devmemtcp_gpu_errmsg(g));
		exit(1);
	}
}

double event_ms(const struct bench *b)
{
	float ms;

	CK(b->cu->cuEventSynchronize(b->ev1));
	CK(b->cu->cuEventElapsedTime(&ms, b->ev0, b->ev1));
	return ms;
}
