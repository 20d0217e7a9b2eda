// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The GPU layer without CUDA (suite unit, runs anywhere): a missing
 * libcuda.so.1 gives -ENOENT and a message naming the fix, bad options are
 * refused before CUDA is touched, and the no-copy view works on any
 * fragment list.  $DEVMEMTCP_LIBCUDA points the loader at a file that does
 * not exist, so the result is the same on a machine with a GPU.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = t_quiet);

	setenv("DEVMEMTCP_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	return devmemtcp_ctx_new(&o, &ctx);
}

static int teardown(void **state)
{
	devmemtcp_ctx_free(ctx);
	return 0;
}

static void test_gpu_new_without_libcuda(void **state)
{
	struct devmemtcp_gpu *gpu = (void *)1;
	int ret;

	errno = 4321;
	ret = devmemtcp_gpu_new(ctx, NULL, &gpu);
	/* ERRORS devmemtcp_gpu_new ENOENT */
	assert_int_equal(ret, -ENOENT);
	assert_int_equal(errno, 4321);
	assert_null(gpu);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "/nonexistent/libcuda.so.1 not found (/nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory): "
			    "install the NVIDIA driver (it ships libcuda.so.1) or use another provider");
}

static void test_cuda_buf_without_libcuda(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = 1 << 20);
	struct devmemtcp_buf *buf = (void *)1;

	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -ENOENT);
	assert_null(buf);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx),
			       "install the NVIDIA driver"));
}

static void test_gpu_opts_checked_first(void **state)
{
	struct {
		struct devmemtcp_gpu_opts o;
		uint64_t tail;
	} big = { .o = { .sz = sizeof(big) }, .tail = 1 };
	DEVMEMTCP_OPTS(gpu_opts, flags, .flags = 1u << 7);
	DEVMEMTCP_OPTS(gpu_opts, slots, .slots = 65);
	DEVMEMTCP_OPTS(gpu_opts, gp, .flags = DEVMEMTCP_GPU_GRAPHS | DEVMEMTCP_GPU_PERSISTENT);
	DEVMEMTCP_OPTS(gpu_opts, gc, .flags = DEVMEMTCP_GPU_GRAPHS | DEVMEMTCP_GPU_DESC_COPY);
	struct devmemtcp_gpu *gpu;

	assert_int_equal(devmemtcp_gpu_new(ctx, &big.o, &gpu), -EINVAL);
	/* ERRORS devmemtcp_gpu_new EINVAL */
	assert_int_equal(devmemtcp_gpu_new(ctx, &flags, &gpu), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_gpu_new: unknown flags 0x80 in opts.flags");
	assert_int_equal(devmemtcp_gpu_new(ctx, &gp, &gpu), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_gpu_new: DEVMEMTCP_GPU_GRAPHS changes how inline gathers are launched, and with DEVMEMTCP_GPU_PERSISTENT there are none: leave one of the flags off");
	assert_int_equal(devmemtcp_gpu_new(ctx, &gc, &gpu), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_gpu_new: DEVMEMTCP_GPU_GRAPHS changes how inline gathers are launched, and with DEVMEMTCP_GPU_DESC_COPY there are none: leave one of the flags off");
	assert_int_equal(devmemtcp_gpu_new(ctx, &slots, &gpu), -EINVAL);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "opts.slots 65"));
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, NULL), -EINVAL);
	assert_int_equal(devmemtcp_gpu_new(NULL, NULL, &gpu), -EINVAL);
}

static void test_null_handles(void **state)
{
	struct devmemtcp_gpu_iov dst = { 0x1000, 10 };
	struct devmemtcp_gpu_fence *f;

	devmemtcp_gpu_free(NULL);
	assert_string_equal(devmemtcp_gpu_errmsg(NULL), "");
	assert_int_equal(devmemtcp_gpu_gather(NULL, NULL, 0, &dst, 1, NULL),
			 -EINVAL);
	assert_int_equal(devmemtcp_gpu_fence_new(NULL, NULL, &f), -EINVAL);
	assert_int_equal(devmemtcp_gpu_fence_done(NULL, false), -EINVAL);
	assert_int_equal(devmemtcp_gpu_release_after(NULL, NULL, NULL, 0, NULL),
			 -EINVAL);
}

static void test_view_merges_adjacent(void **state)
{
	struct devmemtcp_frag f[] = {
		{ .addr = 0x10000, .len = 4096 },
		{ .addr = 0x11000, .len = 1000 },	/* adjacent: merged */
		{ .offset = 0, .len = 66, .flags = DEVMEMTCP_FRAG_LINEAR },
		{ .addr = 0x113e8, .len = 24 },		/* adjacent again */
		{ .addr = 0x90000, .len = 1448 },
		{ .addr = 0x90000, .len = 0 },		/* empty: skipped */
		{ .addr = 0x20000, .len = 1 },
	};
	struct devmemtcp_gpu_iov iov[4];

	memset(iov, 0xa5, sizeof(iov));
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 7, iov, 4), 3);
	assert_int_equal(iov[0].addr, 0x10000);
	assert_int_equal(iov[0].len, 4096 + 1000 + 24);
	assert_int_equal(iov[1].addr, 0x90000);
	assert_int_equal(iov[1].len, 1448);
	assert_int_equal(iov[2].addr, 0x20000);
	assert_int_equal(iov[2].len, 1);
	assert_int_equal(iov[3].addr, 0xa5a5a5a5a5a5a5a5ull);

	/* Too little room: the count is still right, nothing overflows. */
	memset(iov, 0xa5, sizeof(iov));
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 7, iov, 1), 3);
	assert_int_equal(iov[0].len, 4096 + 1000 + 24);
	assert_int_equal(iov[1].addr, 0xa5a5a5a5a5a5a5a5ull);
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 7, NULL, 0), 3);
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 0, NULL, 0), 0);
}

static void test_view_refuses_unknown_address(void **state)
{
	struct devmemtcp_frag f[] = {
		{ .addr = 0x10000, .len = 4096 },
		{ .offset = 0x5000, .len = 4096, .binding_id = 9,
		  .flags = DEVMEMTCP_FRAG_FOREIGN },
	};
	struct devmemtcp_gpu_iov iov[2];

	assert_int_equal(devmemtcp_gpu_view(NULL, f, 2, iov, 2), -EINVAL);
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 2, NULL, 2), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_new_without_libcuda),
		cmocka_unit_test(test_cuda_buf_without_libcuda),
		cmocka_unit_test(test_gpu_opts_checked_first),
		cmocka_unit_test(test_null_handles),
		cmocka_unit_test(test_view_merges_adjacent),
		cmocka_unit_test(test_view_refuses_unknown_address),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
