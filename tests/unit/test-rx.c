// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The receive handle on a socket pair: plain data is a steering miss, the
 * release calls refuse tokens never received, stats honour sz. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_rx *rx;
static int sv[2];

static int setup(void **state)
{
	if (devmemtcp_ctx_new(NULL, &ctx) ||
	    t_tcp_pair(sv) ||
	    devmemtcp_rx_new(ctx, sv[0], NULL, &rx))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
	devmemtcp_ctx_free(ctx);
	return 0;
}

static void test_plain_data_is_miss(void **state)
{
	struct devmemtcp_frag f[4];
	char lin[64];
	DEVMEMTCP_OPTS(rx_stats, st);

	assert_int_equal(write(sv[1], "hello world", 11), 11);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 4, lin, sizeof(lin)), 1);
	assert_int_equal(f[0].flags, DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(f[0].offset, 0);
	assert_int_equal(f[0].len, 11);
	assert_memory_equal(lin, "hello world", 11);
	assert_int_equal(devmemtcp_rx_stats(rx, &st), 0);
	assert_int_equal(st.steering_misses, 1);
	assert_int_equal(st.linear_bytes, 11);
	assert_int_equal(st.bytes, 11);
	assert_int_equal(st.frags, 0);
	assert_int_equal(st.recv_calls, 1);
	/* linear entries need no release; releasing them is a no-op */
	assert_int_equal(devmemtcp_rx_release(rx, f, 1), 0);
	/* end of stream */
	shutdown(sv[1], SHUT_WR);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 4, lin, sizeof(lin)), 0);
}

static void test_release_unknown_token(void **state)
{
	struct devmemtcp_frag f = { .offset = 0, .len = 4096, .token = 3,
				    .binding_id = 1 };

	assert_int_equal(devmemtcp_rx_release(rx, &f, 1), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_release: token 3 of fragment 0 is not outstanding (released already, listed twice, or never received): nothing was released");
}

static int never(void *arg, bool wait)
{
	return 0;
}

static void test_release_after_checks(void **state)
{
	struct devmemtcp_frag f = { .token = 1 };

	assert_int_equal(devmemtcp_rx_release_after(rx, &f, 1, NULL, NULL), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_release_after: done is NULL: use devmemtcp_rx_release() for immediate release");
	assert_int_equal(devmemtcp_rx_release_after(rx, &f, 1, never, NULL), -EINVAL);
	/* nothing outstanding: flush and release_all release nothing */
	assert_int_equal(devmemtcp_rx_flush(rx), 0);
	assert_int_equal(devmemtcp_rx_release_all(rx), 0);
}

static void test_add_buf_checks(void **state)
{
	const struct devmemtcp_segment seg = { 0, 1 << 20, 0x100000 };
	struct devmemtcp_buf *buf;

	/* a bare buffer object with a segment table (add_buf reads it: see
	 * unit/segments); the handle takes a reference to it */
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->size = 1 << 20;
	assert_int_equal(dmt_buf_set_segments(buf, &seg, 1), 0);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 0, buf), -EINVAL);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, NULL), -EINVAL);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, buf), 0);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, buf), -EEXIST);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_add_buf: binding 4 is already registered");
	devmemtcp_buf_free(buf);
}

static void test_recv_args(void **state)
{
	struct devmemtcp_frag f[1];
	char lin[8];

	assert_int_equal(devmemtcp_rx_recv(rx, NULL, 1, lin, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 0, lin, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 1, NULL, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_recv(NULL, f, 1, lin, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_fd(rx), sv[0]);
	assert_int_equal(devmemtcp_rx_fd(NULL), -EINVAL);
}

static void test_stats_sz(void **state)
{
	struct devmemtcp_rx_stats st;

	memset(&st, 0xaa, sizeof(st));
	st.sz = offsetof(struct devmemtcp_rx_stats, linear_bytes);
	assert_int_equal(devmemtcp_rx_stats(rx, &st), 0);
	assert_int_equal(st.bytes, 0);
	/* fields past the caller's sz are not written */
	assert_int_equal(st.linear_bytes, 0xaaaaaaaaaaaaaaaaull);
	st.sz = 0;
	assert_int_equal(devmemtcp_rx_stats(rx, &st), -EINVAL);
}

static void test_nonblocking_eagain(void **state)
{
	struct devmemtcp_frag f[1];
	char lin[8];
	struct timeval tv = { 0, 1000 };

	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(devmemtcp_rx_recv(rx, f, 1, lin, 8), -EAGAIN);
}

int main(void)
{
#define T_(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T_(test_plain_data_is_miss),
		T_(test_release_unknown_token),
		T_(test_release_after_checks),
		T_(test_add_buf_checks),
		T_(test_recv_args),
		T_(test_stats_sz),
		T_(test_nonblocking_eagain),
	};

	return cmocka_run_group_tests_name("rx", tests, NULL, NULL);
}
