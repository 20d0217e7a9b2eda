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
#include "rx.h"

static struct devmemtcp_ctx *ctx;

static void arm(long n)
{
	dmt_err_clear(&ctx->err);
	dmt_test_alloc_fail(n, false);
}

static bool injected(long n)
{
	return dmt_test_alloc_fail(0, false) >= n;
}

static void expect_oom(const char *path, long n, const char *msg)
{
	if (!strstr(msg, "out of memory") && !strstr(msg, strerror(ENOMEM)))
		fail_msg("%s, allocation %ld failed: the message does not say out of memory: \"%s\"",
			 path, n, msg);
}

static void walked(const char *path, long n)
{
	print_message("%s: %ld allocation%s, each failure -ENOMEM\n", path,
		      n - 1, n == 2 ? "" : "s");
}

static void test_gpu_new(void **state)
{
	struct devmemtcp_gpu *gpu;
	long n;
	int ret;

	for (n = 1;; n++) {
		gpu = NULL;
		arm(n);
		ret = devmemtcp_gpu_new(ctx, NULL, &gpu);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		assert_null(gpu);
		expect_oom("devmemtcp_gpu_new", n, devmemtcp_ctx_errmsg(ctx));
	}
	assert_int_equal(ret, 0);
	devmemtcp_gpu_free(gpu);
	walked("devmemtcp_gpu_new", n);
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
		arm(n);
		ret = devmemtcp_buf_new(ctx, &o, &buf);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		assert_null(buf);
		expect_oom("devmemtcp_buf_new(cuda)", n, devmemtcp_ctx_errmsg(ctx));
	}
	assert_int_equal(ret, 0);
	assert_int_equal(devmemtcp_buf_size(buf), 4 << 20);
	devmemtcp_buf_free(buf);
	walked("devmemtcp_buf_new(cuda)", n);
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
		arm(n);
		ret = devmemtcp_gpu_fence_new(gpu, NULL, &fence);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		assert_null(fence);
		expect_oom("devmemtcp_gpu_fence_new", n, devmemtcp_gpu_errmsg(gpu));
		devmemtcp_gpu_free(gpu);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);
	devmemtcp_gpu_free(gpu);
	walked("devmemtcp_gpu_fence_new", n);
}

/* A connected TCP pair over loopback: *peer gets the other end. */
static int tcp_pair(int *peer)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c;

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	*peer = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*peer >= 0);
	close(l);
	return c;
}

static int returned;

static int count_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	int freed = 0;

	for (size_t i = 0; i < n; i++)
		freed += (int)t[i].token_count;
	returned += freed;
	return freed;
}

/* ntok fragments with tokens 0..ntok-1, as the kernel lays them out. */
static void receive_tokens(struct devmemtcp_rx *rx, struct devmemtcp_frag *f,
			   size_t ntok)
{
	size_t space = CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg));
	char *ctrl = calloc(ntok, space);
	struct msghdr msg = { .msg_control = ctrl,
			      .msg_controllen = ntok * space };

	for (size_t i = 0; i < ntok; i++) {
		struct cmsghdr *cm = (struct cmsghdr *)(ctrl + i * space);
		struct dmt_dmabuf_cmsg c = { i * 4096, 4096, (uint32_t)i, 9, 0 };

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_DEVMEM_DMABUF;
		cm->cmsg_len = CMSG_LEN(sizeof(c));
		memcpy(CMSG_DATA(cm), &c, sizeof(c));
	}
	assert_int_equal(dmt_rx_process(rx, &msg, ntok * 4096, f, ntok),
			 (int)ntok);
	free(ctrl);
}

/* The tokens are released once the stream's work is done, whatever
 * failed on the way: a failed call keeps them for the caller. */
static void test_release_after(void **state)
{
	enum { NTOK = 64 };
	struct devmemtcp_frag f[NTOK];
	struct devmemtcp_gpu *gpu;
	struct devmemtcp_rx *rx;
	int peer, fd = tcp_pair(&peer);
	long n;
	int ret;

	for (n = 1;; n++) {
		assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &gpu), 0);
		assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), 0);
		dmt_rx_tokens(rx)->dontneed = count_dontneed;
		returned = 0;
		receive_tokens(rx, f, NTOK);
		arm(n);
		ret = devmemtcp_gpu_release_after(gpu, rx, f, NTOK, NULL);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		expect_oom("devmemtcp_gpu_release_after", n, devmemtcp_gpu_errmsg(gpu));
		/* nothing was deferred: the same fragments release now */
		assert_int_equal(devmemtcp_rx_release(rx, f, NTOK), 0);
		devmemtcp_rx_free(rx);
		assert_int_equal(returned, NTOK);
		devmemtcp_gpu_free(gpu);
	}
	assert_int_equal(ret, 0);
	devmemtcp_rx_free(rx);	/* waits for the fence */
	assert_int_equal(returned, NTOK);
	devmemtcp_gpu_free(gpu);
	close(fd);
	close(peer);
	walked("devmemtcp_gpu_release_after", n);
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
