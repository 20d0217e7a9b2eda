// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Allocation-failure injection over the setup paths that talk to this
 * machine's kernel (tests/unit/test-alloc.c has the others): bind-rx and
 * bind-tx on a veth (which cannot bind: the allocations before the
 * kernel's refusal still count), queue and statistics queries through a
 * fresh context, the NIC probe and the NIC setup.  For N = 1, 2, ... the
 * N-th allocation fails until the path gets as far as it does without an
 * injected failure; every failing N must return -ENOMEM with a message
 * that says out of memory, and leave no descriptor behind.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "buf.h"
#include "devmemtcp.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;
static int va;
static char dir[64];

static void arm(long n)
{
	dmt_test_alloc_fail(n, false);
}

static bool injected(long n)
{
	return dmt_test_alloc_fail(0, false) >= n;
}

static void expect_oom(const char *path, long n, const char *msg)
{
	if (!strstr(msg, "out of memory"))
		fail_msg("%s, allocation %ld failed: the message does not say out of memory: \"%s\"",
			 path, n, msg);
}

static void walked(const char *path, long n, int ret)
{
	print_message("%s: %ld allocation%s, each failure -ENOMEM; then %s\n",
		      path, n - 1, n == 2 ? "" : "s",
		      ret < 0 ? strerror(-ret) : "success");
}

/* A buffer over a memfd (the kernel refuses it, after our allocations). */
static struct devmemtcp_buf *memfd_buf(void)
{
	struct devmemtcp_segment seg = { 0, 1 << 20, 1ull << 40 };
	struct devmemtcp_buf *buf;

	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->fd = memfd_create("dmt-alloc", MFD_CLOEXEC);
	assert_true(buf->fd >= 0);
	buf->own_fd = true;
	buf->size = 1 << 20;
	assert_int_equal(dmt_buf_set_segments(buf, &seg, 1), 0);
	return buf;
}

static void walk_bind(bool tx)
{
	const char *path = tx ? "devmemtcp_bind_tx" : "devmemtcp_bind_rx";
	struct devmemtcp_buf *buf = memfd_buf();
	struct devmemtcp_binding *b;
	int fds = t_count_fds();
	uint32_t q = 1;
	long n;
	int ret;

	for (n = 1;; n++) {
		b = (void *)1;
		arm(n);
		ret = tx ? devmemtcp_bind_tx(ctx, va, buf, NULL, &b)
			 : devmemtcp_bind_rx(ctx, va, &q, 1, buf, NULL, &b);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		assert_null(b);
		expect_oom(path, n, devmemtcp_ctx_errmsg(ctx));
		assert_int_equal(t_count_fds(), fds);
	}
	/* veth has no devmem: the kernel's refusal, as without injection */
	assert_int_equal(ret, -EOPNOTSUPP);
	assert_int_equal(t_count_fds(), fds);
	devmemtcp_buf_free(buf);
	walked(path, n, ret);
}

static void test_bind_rx(void **state)
{
	walk_bind(false);
}

static void test_bind_tx(void **state)
{
	walk_bind(true);
}

/* A query on a fresh context opens its netlink socket first. */
static void test_queries(void **state)
{
	struct devmemtcp_queue q[16];
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	struct devmemtcp_qstats st = { .sz = sizeof(st) };
	struct devmemtcp_ctx *c;
	int fds = t_count_fds();
	long n;
	int ret;

	for (int which = 0; which < 2; which++) {
		const char *path = which ? "devmemtcp_qstats_get"
					 : "devmemtcp_queue_list";

		for (n = 1;; n++) {
			assert_int_equal(devmemtcp_ctx_new(&co, &c), 0);
			arm(n);
			ret = which ? devmemtcp_qstats_get(c, va, DEVMEMTCP_QUEUE_RX,
							   -1, &st)
				    : devmemtcp_queue_list(c, va, q, 16);
			if (!injected(n))
				break;
			assert_int_equal(ret, -ENOMEM);
			expect_oom(path, n, devmemtcp_ctx_errmsg(c));
			devmemtcp_ctx_free(c);
			assert_int_equal(t_count_fds(), fds);
		}
		if (!which)
			assert_int_equal(ret, 7);	/* 4 RX + 3 TX queues */
		devmemtcp_ctx_free(c);
		walked(path, n, ret);
	}
}

static void test_probe(void **state)
{
	struct devmemtcp_probe p;
	int fds = t_count_fds();
	long n;
	int ret;

	for (n = 1;; n++) {
		memset(&p, 0, sizeof(p));
		p.sz = sizeof(p);
		arm(n);
		ret = devmemtcp_nic_probe(ctx, "va", NULL, &p);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		expect_oom("devmemtcp_nic_probe", n, devmemtcp_ctx_errmsg(ctx));
		assert_int_equal(t_count_fds(), fds);
	}
	assert_true(ret >= 0);	/* the number of problems found */
	walked("devmemtcp_nic_probe", n, 0);
}

/* veth cannot be set up (no header split): the refusal comes after the
 * lock, the journal and the snapshot, whose allocations all count. */
static void test_nic_open(void **state)
{
	struct devmemtcp_nic *nic;
	int fds = t_count_fds();
	char path[128];
	long n;
	int ret;

	snprintf(path, sizeof(path), "%s/va.journal", dir);
	for (n = 1;; n++) {
		arm(n);
		ret = devmemtcp_nic_open(ctx, "va", NULL, &nic);
		if (!injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		expect_oom("devmemtcp_nic_open", n, devmemtcp_ctx_errmsg(ctx));
		assert_int_equal(t_count_fds(), fds);
		assert_int_equal(access(path, F_OK), -1);
	}
	assert_int_equal(ret, -EOPNOTSUPP);
	walked("devmemtcp_nic_open", n, ret);
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);

	snprintf(dir, sizeof(dir), "/tmp/dmt-halloc-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	setenv("DEVMEMTCP_RUN_DIR", dir, 1);
	return devmemtcp_ctx_new(&co, &ctx);
}

static int teardown(void **state)
{
	char cmd[128];

	dmt_test_alloc_fail(0, false);
	devmemtcp_ctx_free(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_rx),
		cmocka_unit_test(test_bind_tx),
		cmocka_unit_test(test_queries),
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_nic_open),
	};

	T_TRY(host_netns(&va));
	return cmocka_run_group_tests_name("host-alloc", tests, setup, teardown);
}
