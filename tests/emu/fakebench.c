// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The C side of bench/python-pipeline.py, in the fake kernel's library (so
 * that both sides run in one process on the same fake receives): what a
 * data loader does with each receive on one thread, through the public
 * API.  Test builds only; never installed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <devmemtcp.h>

double fakedev_bench_pipeline_c(int fd, int buf_fd, uint64_t iters,
				uint32_t max_frags, uint32_t max_bytes,
				uint32_t binding, uint64_t size,
				uint64_t buf_addr, int device, uint32_t gpu_flags,
				uint64_t dst, uint64_t dst_len, uint64_t stream);

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*
 * iters times: devmemtcp_rx_recv of one receive on fd (attached to the
 * fake kernel with a cycle by the caller) and devmemtcp_gpu_gather_release
 * of its fragments into [dst, dst + dst_len) on stream; the stream
 * synchronised once at the end (a fence waited for).  buf_fd (a dma-buf,
 * or what a test build takes as one) is imported as the binding's buffer,
 * its bytes at device address buf_addr of CUDA device `device`.  Returns
 * nanoseconds per receive, or a negative errno.
 */
double fakedev_bench_pipeline_c(int fd, int buf_fd, uint64_t iters,
				uint32_t max_frags, uint32_t max_bytes,
				uint32_t binding, uint64_t size,
				uint64_t buf_addr, int device, uint32_t gpu_flags,
				uint64_t dst, uint64_t dst_len, uint64_t stream)
{
	struct devmemtcp_segment seg = { 0, size, buf_addr };
	struct devmemtcp_frag *f = calloc(max_frags, sizeof(*f));
	struct devmemtcp_gpu_iov d = { dst, dst_len };
	void *linear = malloc(max_bytes);
	struct devmemtcp_gpu_fence *fence = NULL;
	struct devmemtcp_ctx *ctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_gpu *gpu = NULL;
	struct devmemtcp_rx *rx = NULL;
	double t0, ret = -ENOMEM;
	int r;
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = size, .fd = buf_fd, .segments = &seg, .nsegments = 1,
		       .flags = DEVMEMTCP_BUF_KEEP_FD);
	DEVMEMTCP_OPTS(gpu_opts, go, .cuda_device = device, .flags = gpu_flags);

	if (!f || !linear)
		goto out;
	ret = -EINVAL;
	if (devmemtcp_ctx_new(NULL, &ctx) || devmemtcp_buf_new(ctx, &bo, &buf) ||
	    devmemtcp_rx_new(ctx, fd, NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, binding, buf) ||
	    devmemtcp_gpu_new(ctx, &go, &gpu))
		goto out;
	t0 = now_ns();
	for (uint64_t i = 0; i < iters; i++) {
		int n = devmemtcp_rx_recv(rx, f, max_frags, linear, max_bytes);

		if (n <= 0) {
			ret = n < 0 ? n : -EIO;
			goto out;
		}
		r = devmemtcp_gpu_gather_release(gpu, rx, f, (size_t)n, &d, 1,
						 (void *)(uintptr_t)stream);
		if (r) {
			ret = r;
			goto out;
		}
	}
	r = devmemtcp_gpu_fence_new(gpu, (void *)(uintptr_t)stream, &fence);
	if (!r)
		r = devmemtcp_gpu_fence_done(fence, true) == 1 ? 0 : -EIO;
	ret = r ? r : (now_ns() - t0) / (double)iters;
out:
	devmemtcp_gpu_free(gpu);
	devmemtcp_rx_free(rx);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	free(f);
	free(linear);
	return ret;
}
