// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Suite gpu: allocation-failure injection over the GPU setup paths (the
 * others are in tests/unit/test-alloc.c and tests/host/test-alloc.c):
 * devmemtcp_gpu_new, a CUDA buffer, devmemtcp_gpu_fence_new and
 * devmemtcp_gpu_release_after.  For N = 1, 2, ... the N-th allocation of
 * the library fails until the path completes without an injected failure;
 * each failing N must return -ENOMEM with a message that says out of
 * memory and leave nothing behind (the sanitizer build checks leaks).
 * Exits 77 and says why where there is no usable NVIDIA GPU.
 */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "harness.h"
#include "allocfixture.h"

static struct devmemtcp_ctx *ctx;

/* The path completed without an injected failure: it must succeed, and
 * says why when it did not. */
static void expect_done(int ret, const char *what, const char *msg)
{
	if (ret)
		print_message("%s: %d (%s): %s\n", what, ret, strerror(-ret),
			      msg);
	assert_int_equal(ret, 0);
}

static void test_gpu_new(void **state)
{
	struct devmemtcp_gpu *gpu;
	long n;
	int ret;

	for (n = 1;; n++) {
		gpu = NULL;
		alloc_arm(ctx, n);
		ret = devmemtcp_gpu_new(ctx, NULL, &gpu);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_gpu_new ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		assert_null(gpu);
		alloc_expect_oom("devmemtcp_gpu_new", n, devmemtcp_ctx_errmsg(ctx));
	}
	expect_done(ret, "devmemtcp_gpu_new", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_gpu_free(gpu);
	alloc_walked("devmemtcp_gpu_new", n);
}

static void test_buf_cuda(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = 4 << 20, .cuda_chunk_size = 2 << 20);
	struct devmemtcp_buf *buf;
	long n;
	int ret;

	for (n = 1;; n++) {
		buf = NULL;
		alloc_arm(ctx, n);
		ret = devmemtcp_buf_new(ctx, &o, &buf);
		if (!alloc_injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		assert_null(buf);
		alloc_expect_oom("devmemtcp_buf_new(cuda)", n, devmemtcp_ctx_errmsg(ctx));
	}
	assert_int_equal(ret, 0);
	assert_int_equal(devmemtcp_buf_size(buf), 4 << 20);
	devmemtcp_buf_free(buf);
	alloc_walked("devmemtcp_buf_new(cuda)", n);
}

static void test_fence_new(void **state)
{
	struct devmemtcp_gpu_fence *fence;
	struct devmemtcp_gpu *gpu;
	long n;
	int ret;

	for (n = 1;; n++) {
		/* a fresh handle: a fence it made before would be reused */
		assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &gpu), 0);
		fence = NULL;
		alloc_arm(ctx, n);
		ret = devmemtcp_gpu_fence_new(gpu, NULL, &fence);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_gpu_fence_new ENOMEM */
		if (ret != -ENOMEM)
			print_message("%d: %s\n", ret, devmemtcp_gpu_errmsg(gpu));
		assert_int_equal(ret, -ENOMEM);
		assert_null(fence);
		alloc_expect_oom("devmemtcp_gpu_fence_new", n, devmemtcp_gpu_errmsg(gpu));
		devmemtcp_gpu_free(gpu);
	}
	expect_done(ret, "devmemtcp_gpu_fence_new", devmemtcp_gpu_errmsg(gpu));
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	devmemtcp_gpu_free(gpu);
	alloc_walked("devmemtcp_gpu_fence_new", n);
}

/* The tokens are released once the stream's work is done, whatever
 * failed on the way: a failed call keeps them for the caller. */
static void test_release_after(void **state)
{
	enum { NTOK = 64 };
	struct devmemtcp_frag f[NTOK];
	struct devmemtcp_gpu *gpu;
	struct devmemtcp_rx *rx;
	int peer, fd = alloc_tcp_pair(&peer);
	long n;
	int ret;

	for (n = 1;; n++) {
		assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &gpu), 0);
		assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), 0);
		alloc_receive_tokens(rx, f, NTOK);
		alloc_arm(ctx, n);
		ret = devmemtcp_gpu_release_after(gpu, rx, f, NTOK, NULL);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_gpu_release_after ENOMEM */
		if (ret != -ENOMEM)
			print_message("%d: %s\n", ret, devmemtcp_gpu_errmsg(gpu));
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom("devmemtcp_gpu_release_after", n, devmemtcp_gpu_errmsg(gpu));
		/* nothing was deferred: the same fragments release now */
		assert_int_equal(devmemtcp_rx_release(rx, f, NTOK), 0);
		devmemtcp_rx_free(rx);
		assert_int_equal(alloc_returned, NTOK);
		devmemtcp_gpu_free(gpu);
	}
	expect_done(ret, "devmemtcp_gpu_release_after",
		    devmemtcp_gpu_errmsg(gpu));
	devmemtcp_rx_free(rx);	/* waits for the fence */
	assert_int_equal(alloc_returned, NTOK);
	devmemtcp_gpu_free(gpu);
	close(fd);
	close(peer);
	alloc_walked("devmemtcp_gpu_release_after", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_new),
		cmocka_unit_test(test_buf_cuda),
		cmocka_unit_test(test_fence_new),
		cmocka_unit_test(test_release_after),
	};
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	struct devmemtcp_gpu *gpu;
	int ret;

	if (devmemtcp_ctx_new(&co, &ctx))
		return T_EXIT_FAIL;
	ret = devmemtcp_gpu_new(ctx, NULL, &gpu);
	if (ret == -ENOENT || ret == -ENODEV || ret == -ENOSYS)
		return t_skipped("no usable NVIDIA GPU: %s",
				 devmemtcp_ctx_errmsg(ctx));
	if (ret) {
		printf("devmemtcp_gpu_new: %d: %s\n", ret,
		       devmemtcp_ctx_errmsg(ctx));
		return T_EXIT_FAIL;
	}
	devmemtcp_gpu_free(gpu);
	ret = cmocka_run_group_tests_name("gpu-alloc", tests, NULL, NULL);
	dmt_test_alloc_fail(0, false);
	devmemtcp_ctx_free(ctx);
	return ret;
}
