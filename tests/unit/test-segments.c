// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A segment table whose boundaries are off the NIC's page grid is refused
 * where it would meet the NIC: devmemtcp_rx_add_buf (against the host
 * page) and devmemtcp_bind_rx (against rx_page_size or the host page),
 * before any netlink.  The NIC never writes a fragment across a page, so
 * with boundaries on the grid no fragment it returns crosses into another
 * segment.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctxfixture.h"
#include "buf.h"

static struct devmemtcp_ctx *ctx;
static uint64_t page;

static void quiet(void *user, int level, const char *msg)
{
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = quiet);

	page = (uint64_t)sysconf(_SC_PAGESIZE);
	return devmemtcp_ctx_new(&o, &ctx);
}

static int teardown(void **state)
{
	devmemtcp_ctx_free(ctx);
	return 0;
}

static struct devmemtcp_buf *table(uint64_t size,
				   const struct devmemtcp_segment *segs,
				   size_t n)
{
	struct devmemtcp_buf *buf;

	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->size = size;
	assert_int_equal(dmt_buf_set_segments(buf, segs, n), 0);
	return buf;
}

/* A connected TCP socket on loopback (the receiver needs a stream). */
static int tcp_pair(int *peer, int *lst)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int c;

	*lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(*lst >= 0);
	assert_int_equal(bind(*lst, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(*lst, 1), 0);
	assert_int_equal(getsockname(*lst, (struct sockaddr *)&a, &len), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	*peer = accept(*lst, NULL, NULL);
	assert_true(*peer >= 0);
	return c;
}

static void test_rx_add_buf_refuses_boundary_off_page(void **state)
{
	const struct devmemtcp_segment bad[] = {
		{ 0, page + page / 2, 0x200000 },
		{ page + page / 2, 3 * page - page / 2, 0x100000 },
	};
	const struct devmemtcp_segment gap[] = {
		{ 0, page, 0x200000 },
		{ page + 512, page, 0x100000 },
	};
	/* permuted pages, a gap, an end short of a page at the end of the
	 * buffer: all fine */
	const struct devmemtcp_segment good[] = {
		{ 0, page, 0x300000 },
		{ page, page, 0x100000 },
		{ 3 * page, page - 100, 0x200000 },
	};
	struct devmemtcp_buf *b_bad = table(4 * page, bad, 2);
	struct devmemtcp_buf *b_gap = table(4 * page, gap, 2);
	struct devmemtcp_buf *b_good = table(4 * page - 100, good, 3);
	struct devmemtcp_rx *rx;
	char want[512];
	int fd, peer, lst;

	fd = tcp_pair(&peer, &lst);
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), 0);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 1, b_bad), -EINVAL);
	snprintf(want, sizeof(want),
		 "devmemtcp_rx_add_buf: segment [0x0, +%#llx) of the buffer ends at %#llx, not a multiple of the %llu-byte page: a fragment of the NIC could span two device ranges; make every segment boundary a multiple of %llu",
		 (unsigned long long)(page + page / 2),
		 (unsigned long long)(page + page / 2),
		 (unsigned long long)page, (unsigned long long)page);
	assert_string_equal(devmemtcp_rx_errmsg(rx), want);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 2, b_gap), -EINVAL);
	snprintf(want, sizeof(want),
		 "devmemtcp_rx_add_buf: segment [%#llx, +%#llx) of the buffer starts at %#llx, not a multiple of the %llu-byte page: a fragment of the NIC could span two device ranges; make every segment boundary a multiple of %llu",
		 (unsigned long long)(page + 512), (unsigned long long)page,
		 (unsigned long long)(page + 512), (unsigned long long)page,
		 (unsigned long long)page);
	assert_string_equal(devmemtcp_rx_errmsg(rx), want);
	/* refused means not registered: the id is still free */
	assert_int_equal(devmemtcp_rx_add_buf(rx, 1, b_good), 0);
	devmemtcp_rx_free(rx);
	close(fd);
	close(peer);
	close(lst);
	devmemtcp_buf_free(b_bad);
	devmemtcp_buf_free(b_gap);
	devmemtcp_buf_free(b_good);
}

static void test_bind_rx_refuses_boundary_off_page(void **state)
{
	const struct devmemtcp_segment segs[] = {
		{ 0, 2 * page, 0x200000 },
		{ 2 * page, 2 * page, 0x100000 },
	};
	const struct devmemtcp_segment odd[] = {
		{ 0, 100, 0x200000 },
		{ 100, 4 * page - 100, 0x100000 },
	};
	struct devmemtcp_buf *buf = table(4 * page, segs, 2);
	struct devmemtcp_buf *b_odd = table(4 * page, odd, 2);
	struct devmemtcp_binding *b = (void *)1;
	uint32_t q = 0, nic_page = (uint32_t)page * 4;
	DEVMEMTCP_OPTS(bind_opts, o, .rx_page_size = nic_page);

	assert_int_equal(devmemtcp_bind_rx(ctx, 1, &q, 1, b_odd, NULL, &b),
			 -EINVAL);
	assert_null(b);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_bind_rx: segment [0x0, +0x64) of the buffer ends at 0x64, not a multiple of the %llu-byte page: a fragment of the NIC could span two device ranges; make every segment boundary a multiple of %llu",
			     (unsigned long long)page, (unsigned long long)page);
	/* fine for the host page, not for 4 pages per NIC buffer */
	assert_int_equal(devmemtcp_bind_rx(ctx, 1, &q, 1, buf, &o, &b), -EINVAL);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_bind_rx: segment [0x0, +%#llx) of the buffer ends at %#llx, not a multiple of the %u-byte page (rx_page_size): a fragment of the NIC could span two device ranges; make every segment boundary a multiple of %u, or lower rx_page_size",
			     (unsigned long long)(2 * page), (unsigned long long)(2 * page),
			     nic_page, nic_page);
	devmemtcp_buf_free(buf);
	devmemtcp_buf_free(b_odd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rx_add_buf_refuses_boundary_off_page),
		cmocka_unit_test(test_bind_rx_refuses_boundary_off_page),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
