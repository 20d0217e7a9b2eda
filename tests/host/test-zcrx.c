// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite: io_uring zero-copy receive on this machine's kernel, as root,
 * inside a network namespace the test creates.  A veth has no queue
 * management API: the registration is refused with a message that fits the
 * kernel (no zcrx before 6.15, no dma-buf area before 6.16, no queue API),
 * with nothing left open; without CAP_NET_ADMIN the kernel says EPERM.
 */
#include <errno.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "harness.h"
#include "ctxfixture.h"

static struct devmemtcp_ctx *ctx;
static int va;
static int memfd = -1;
static struct devmemtcp_buf *buf;

/* A 1 MiB buffer over a memfd: device memory as far as zcrx can tell
 * (no CPU mapping), so it becomes a dma-buf area. */
static int setup(void **state)
{
	(void)state;
	return ctxfix_memfd_setup(1 << 20, &ctx, &memfd, &buf);
}

static int teardown(void **state)
{
	(void)state;
	return ctxfix_memfd_teardown(ctx, memfd, buf);
}

/* What this kernel must say before it looks at the device, or NULL. */
static const char *kernel_refusal(char *msg, size_t len)
{
	int kv = t_kernel_version();

	if (kv < 615)
		snprintf(msg, len,
			 "io_uring zero-copy receive needs Linux 6.15 (6.16 for dma-buf areas): this kernel is %s",
			 t_kernel_release());
	else if (kv < 616)
		snprintf(msg, len,
			 "io_uring zero-copy receive needs Linux 6.15 (6.16 for dma-buf areas): this kernel is %s, which takes only host memory (a user-memory area)",
			 t_kernel_release());
	else
		return NULL;
	return msg;
}

static void test_veth_refused(void **state)
{
	struct devmemtcp_zcrx *z = NULL;
	int fds = t_count_fds(), ret;
	const char *want;
	char msg[256];

	(void)state;
	ret = devmemtcp_zcrx_new(ctx, va, 0, buf, NULL, &z);
	printf("zcrx on va: %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	assert_null(z);
	want = kernel_refusal(msg, sizeof(msg));
	if (!want)
		want = "va cannot do zero-copy receive: its driver lacks the queue management API or a DMA device (drivers with it: bnxt_en, mlx5, gve, fbnic)";
	/* ERRORS devmemtcp_zcrx_new EOPNOTSUPP */
	assert_int_equal(ret, -EOPNOTSUPP);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	/* the ring, its mappings and the netlink socket are gone */
	assert_int_equal(t_count_fds(), fds);
}

static void test_without_cap_net_admin(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];
		struct devmemtcp_zcrx *z = NULL;
		const char *want;
		char msg[256];
		int ret;

		syscall(SYS_capget, &h, d);
		d[0].effective &= ~(1u << CAP_NET_ADMIN);
		if (syscall(SYS_capset, &h, d))
			_exit(3);
		ret = devmemtcp_zcrx_new(ctx, va, 0, buf, NULL, &z);
		want = kernel_refusal(msg, sizeof(msg));
		/* ERRORS devmemtcp_zcrx_new EPERM */
		if (ret != (want ? -EOPNOTSUPP : -EPERM))
			_exit(4);
		if (!want)
			want = "registering a zcrx queue needs CAP_NET_ADMIN: run as root or give the program CAP_NET_ADMIN";
		if (strcmp(devmemtcp_ctx_errmsg(ctx), want)) {
			fprintf(stderr, "message: %s\n", devmemtcp_ctx_errmsg(ctx));
			_exit(5);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* An interface index of no interface here: the kernel says ENODEV before
 * it looks at the driver. */
static void test_no_interface(void **state)
{
	struct devmemtcp_zcrx *z = NULL;
	const char *want;
	char msg[256];
	int ret;

	(void)state;
	ret = devmemtcp_zcrx_new(ctx, 99999, 0, buf, NULL, &z);
	assert_null(z);
	want = kernel_refusal(msg, sizeof(msg));
	if (want) {
		assert_int_equal(ret, -EOPNOTSUPP);
		assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
		return;
	}
	/* ERRORS devmemtcp_zcrx_new ENODEV */
	assert_int_equal(ret, -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "ifindex 99999 is no interface of this thread's network namespace");
}

/* What probe says agrees with what zcrx_new found. */
static void test_probe(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	char msg[256];

	(void)state;
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &p) >= 0);
	printf("probe: zcrx %d, dma-buf areas %d, %s\n", p.zcrx, p.zcrx_dmabuf, p.zcrx_msg);
	if (t_kernel_version() < 615) {
		kernel_refusal(msg, sizeof(msg));
		assert_int_equal(p.zcrx, 0);
		assert_int_equal(p.zcrx_dmabuf, 0);
		assert_string_equal(p.zcrx_msg, msg);
	} else {
		/* 6.15 and later, unless built without CONFIG_IO_URING_ZCRX */
		assert_true(p.zcrx == 1 || strstr(p.zcrx_msg, "CONFIG_IO_URING_ZCRX"));
		assert_int_equal(p.zcrx_dmabuf, p.zcrx == 1 && t_kernel_version() >= 616);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_veth_refused),
		cmocka_unit_test(test_without_cap_net_admin),
		cmocka_unit_test(test_no_interface),
		cmocka_unit_test(test_probe),
	};

	T_TRY(host_netns(&va));
	return cmocka_run_group_tests_name("host-zcrx", tests, setup, teardown);
}
