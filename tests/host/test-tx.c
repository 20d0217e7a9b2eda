// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite, devmem TX: bind-tx against this machine's kernel inside a
 * network namespace the test creates.  veth has no netmem TX: on a kernel
 * with bind-tx (6.16+) the library must surface the kernel's "Driver does
 * not support netmem TX"; on an older kernel it must say "needs Linux 6.16"
 * (found from the netdev family's op list).  No fds leak either way.
 */
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "harness.h"
#include "buf.h"

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_buf *buf;
static int va;

static bool kernel_has_bind_tx(void)
{
	return t_kernel_version() >= 616;
}

static void test_bind_tx_veth(void **state)
{
	struct devmemtcp_binding *b = (void *)1;
	const char *m;
	int before;

	/* the first failure opens the context's query socket (kept) */
	devmemtcp_bind_tx(ctx, va, buf, NULL, &b);
	before = t_count_fds();

	assert_int_equal(devmemtcp_bind_tx(ctx, va, buf, NULL, &b), -EOPNOTSUPP);
	assert_null(b);
	m = devmemtcp_ctx_errmsg(ctx);
	print_message("%s\n", m);
	assert_non_null(strstr(m, "bind-tx on va failed"));
	if (kernel_has_bind_tx()) {
		assert_non_null(strstr(m, "Driver does not support netmem TX"));
		assert_null(strstr(m, "needs Linux 6.16"));
	} else {
		assert_non_null(strstr(m, "needs Linux 6.16"));
	}
	/* the binding's netlink socket is gone again */
	assert_int_equal(t_count_fds(), before);
}

static void test_bind_tx_args(void **state)
{
	struct devmemtcp_binding *b = NULL;
	DEVMEMTCP_OPTS(bind_opts, o, .rx_page_size = 65536);

	assert_int_equal(devmemtcp_bind_tx(ctx, 0, buf, NULL, &b), -ENODEV);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "if_nametoindex"));
	assert_int_equal(devmemtcp_bind_tx(ctx, va, NULL, NULL, &b), -EINVAL);
	assert_int_equal(devmemtcp_bind_tx(ctx, va, buf, NULL, NULL), -EINVAL);
	assert_int_equal(devmemtcp_bind_tx(ctx, va, buf, &o, &b), -EINVAL);
	/* an interface index nobody has: the kernel's ENODEV, explained */
	assert_int_equal(devmemtcp_bind_tx(ctx, 99999, buf, NULL, &b),
			 kernel_has_bind_tx() ? -ENODEV : -EOPNOTSUPP);
}

static int setup(void **state)
{
	if (devmemtcp_ctx_new(NULL, &ctx) ||
	    dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf))
		return -1;
	/* bind-tx refuses veth before it looks at the dma-buf */
	buf->size = 1 << 20;
	return 0;
}

static int teardown(void **state)
{
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_tx_veth),
		cmocka_unit_test(test_bind_tx_args),
	};

	T_TRY(host_netns(&va));
	return cmocka_run_group_tests_name("host-tx", tests, setup, teardown);
}
