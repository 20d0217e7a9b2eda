// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Messages that must not mislead: a bind the driver's page pool refused
 * (header split off on kernels that do not check it) names header split;
 * rx_page_size on a kernel whose bind-rx lacks the attribute is
 * EOPNOTSUPP, as documented; every errno the library may print has its
 * name, never "errno 27".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <cmocka.h>

#include "netdev.h"

static void test_bind_enodata_names_header_split(void **state)
{
	struct dmt_err e = { 0 };

	dmt_bind_explain(&e, false, 999999, -ENODATA, "");
	/* ERRORS devmemtcp_bind_rx ENODATA */
	assert_int_equal(e.code, -ENODATA);
	assert_string_equal(e.msg,
			    "bind-rx on ifindex 999999 failed: the driver restarted the queue but its page pool did not take the dma-buf: turn header split on (ethtool -G ifindex 999999 tcp-data-split on; Linux 6.12 and 6.13 bind without checking it), or the driver lacks unreadable-netmem support");
}

static void test_bind_rx_page_size_unknown(void **state)
{
	struct dmt_err e = { 0 };
	struct utsname u;
	char want[512];

	assert_int_equal(uname(&u), 0);
	/* what a kernel without NETDEV_A_DMABUF_RX_PAGE_SIZE answers */
	dmt_bind_explain(&e, false, 999999, -EINVAL, "Unknown attribute type");
	assert_int_equal(e.code, -EOPNOTSUPP);
	snprintf(want, sizeof(want),
		 "bind-rx on ifindex 999999 failed: this kernel (%s) has no rx-page-size for bind-rx (NETDEV_A_DMABUF_RX_PAGE_SIZE): leave rx_page_size 0 (kernel: \"Unknown attribute type\")",
		 u.release);
	assert_string_equal(e.msg, want);
	/* other texts keep their errno */
	dmt_bind_explain(&e, false, 999999, -EINVAL, "hds-thresh is not zero");
	assert_int_equal(e.code, -EINVAL);
}

/* Refusals of the kernel the test machines cannot provoke everywhere, as
 * the binds explain them: the capability some kernels require for bind-tx,
 * a dma-buf fd closed behind the buffer's back, a driver whose page pool
 * has another page size than the binding. */
static void test_bind_kernel_refusals(void **state)
{
	struct dmt_err e = { 0 };

	/* ERRORS devmemtcp_bind_tx EPERM */
	dmt_bind_explain(&e, true, 999999, -EPERM, "");
	assert_int_equal(e.code, -EPERM);
	assert_string_equal(e.msg,
			    "bind-tx on ifindex 999999 failed: permission denied: bind-tx needs CAP_NET_ADMIN; run as root or grant it (setcap cap_net_admin+ep PROGRAM)");
	/* ERRORS devmemtcp_bind_tx EBADF */
	dmt_bind_explain(&e, true, 999999, -EBADF, "");
	assert_int_equal(e.code, -EBADF);
	assert_string_equal(e.msg,
			    "bind-tx on ifindex 999999 failed: the dma-buf fd is not valid: pass the fd of a live dma-buf (devmemtcp_buf_fd())");
	/* ERRORS devmemtcp_bind_rx E2BIG */
	dmt_bind_explain(&e, false, 999999, -E2BIG, "");
	assert_int_equal(e.code, -E2BIG);
	assert_string_equal(e.msg,
			    "bind-rx on ifindex 999999 failed: the driver's page pool page size does not match the binding's niov size: leave rx_page_size 0 or pick the driver's buffer size");
}

static void test_errno_names(void **state)
{
	char num[32];

	for (int e = 1; e <= 133; e++) {
		snprintf(num, sizeof(num), "errno %d", e);
		if (e == 41 || e == 58)	/* unused numbers on Linux */
			continue;
		if (!strcmp(dmt_errno_name(-e), num) || dmt_errno_name(e)[0] != 'E')
			fail_msg("errno %d has no name: \"%s\"", e, dmt_errno_name(e));
	}
	assert_string_equal(dmt_errno_name(-EFBIG), "EFBIG");
	assert_string_equal(dmt_errno_name(EPROTOTYPE), "EPROTOTYPE");
	assert_string_equal(dmt_errno_name(-ENOTCONN), "ENOTCONN");
	assert_string_equal(dmt_errno_name(-EREMOTEIO), "EREMOTEIO");
	/* the kernel's own, which reach user space */
	assert_string_equal(dmt_errno_name(-524), "ENOTSUPP");
	assert_string_equal(dmt_errno_name(-525), "ETOOSMALL");
	assert_string_equal(dmt_errno_name(-4000), "errno 4000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_enodata_names_header_split),
		cmocka_unit_test(test_bind_rx_page_size_unknown),
		cmocka_unit_test(test_bind_kernel_refusals),
		cmocka_unit_test(test_errno_names),
	};

	return cmocka_run_group_tests_name("messages", tests, NULL, NULL);
}
