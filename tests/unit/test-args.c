// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Arguments near the limits of their types are refused before anything is
 * allocated or opened, with checked arithmetic: a udmabuf size near 2^64,
 * a segment count whose table size overflows, a control buffer of
 * SIZE_MAX bytes, UINT32_MAX devmem queues.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "ctxfixture.h"
#include "harness.h"
#include "testhooks.h"

static struct devmemtcp_ctx *ctx;

static int setup(void **state)
{
	return ctxfix_ctx_silent(&ctx);
}

static int teardown(void **state)
{
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* Allocations the library made since the previous call. */
static long allocations(void)
{
	return dmt_test_alloc_fail(0, false);
}

static void test_udmabuf_size_near_2_64(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = UINT64_MAX - 4095);
	struct devmemtcp_buf *buf = (void *)1;

	/* the device is never opened: a missing one would say so */
	setenv("DEVMEMTCP_UDMABUF_DEV", "/nonexistent/udmabuf", 1);
	/* ERRORS devmemtcp_buf_new E2BIG */
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -E2BIG);
	assert_null(buf);
	ctxfix_expect_errmsg(ctx,
			     "udmabuf: %llu bytes is more than a memfd can hold (at most %lld bytes): give a smaller size",
			     (unsigned long long)o.size, (long long)INT64_MAX);
	/* rounding up to 2 MiB pages must not wrap either */
	o.flags = DEVMEMTCP_BUF_HUGETLB;
	o.size = (uint64_t)INT64_MAX - 4095;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -E2BIG);
	unsetenv("DEVMEMTCP_UDMABUF_DEV");
}

static void test_segment_count_overflow(void **state)
{
	struct devmemtcp_segment segs[2] = { { 0, 4096, 0 }, { 4096, 4096, 8192 } };
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .flags = DEVMEMTCP_BUF_KEEP_FD, .size = 8192,
		       .segments = segs);
	struct devmemtcp_buf *buf = (void *)1;

	o.fd = memfd_create("t", MFD_CLOEXEC);
	assert_int_equal(ftruncate(o.fd, 8192), 0);
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	/* nsegments * sizeof(segment) wraps to 40 bytes */
	o.nsegments = SIZE_MAX / sizeof(struct devmemtcp_segment) + 2;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_null(buf);
	ctxfix_expect_errmsg(ctx,
			     "segment table: %zu segments for a 8192-byte dma-buf: every segment covers at least one byte, so there are at most as many segments as bytes",
			     o.nsegments);
	/* more segments than bytes, without overflow */
	o.nsegments = 8193;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	/* the two real ones are fine */
	o.nsegments = 2;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), 0);
	devmemtcp_buf_free(buf);
	unsetenv("DEVMEMTCP_TEST_DMABUF_MEMFD");
	close(o.fd);
}

static void test_ctrl_size_max(void **state)
{
	DEVMEMTCP_OPTS(rx_opts, o, .ctrl_size = SIZE_MAX);
	struct devmemtcp_rx *rx = (void *)1;
	int sv[2];

	assert_int_equal(t_tcp_pair(sv), 0);
	allocations();
	assert_int_equal(devmemtcp_rx_new(ctx, sv[1], &o, &rx), -EINVAL);
	assert_int_equal(allocations(), 0);
	assert_null(rx);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_rx_new: opts.ctrl_size %zu is more than 16777216 bytes: 0 (the default, room for 64 fragments) or what max_frags of devmemtcp_rx_recv needs is enough; the buffer grows when the kernel needs more",
			     (size_t)SIZE_MAX);
	/* the largest allowed one is allocated */
	o.ctrl_size = 16u << 20;
	assert_int_equal(devmemtcp_rx_new(ctx, sv[1], &o, &rx), 0);
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
}

static void test_nqueues_max(void **state)
{
	char dir[] = "/tmp/devmemtcp-args-XXXXXX";
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = UINT32_MAX);
	struct devmemtcp_nic *nic = (void *)1;

	assert_non_null(mkdtemp(dir));
	o.run_dir = dir;
	allocations();
	/* ERRORS devmemtcp_nic_open E2BIG */
	assert_int_equal(devmemtcp_nic_open(ctx, "dmt-none0", &o, &nic), -E2BIG);
	assert_int_equal(allocations(), 0);
	assert_null(nic);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_nic_open: nqueues 4294967295 is more than any NIC has (at most 4096 queues)");
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udmabuf_size_near_2_64),
		cmocka_unit_test(test_segment_count_overflow),
		cmocka_unit_test(test_ctrl_size_max),
		cmocka_unit_test(test_nqueues_max),
	};

	return cmocka_run_group_tests_name("args", tests, setup, teardown);
}
