// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Options structs: sz handling, unknown tail bytes, defaults; ctx logging. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"

struct log_capture {
	int calls;
	int level;
	char last[1024];
};

static void capture(void *user, int level, const char *msg)
{
	struct log_capture *c = user;

	c->calls++;
	c->level = level;
	snprintf(c->last, sizeof(c->last), "%s", msg);
}

static void test_ctx_log_callback(void **state)
{
	struct log_capture cap = { 0 };
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = capture, .log_user = &cap,
		       .log_level = DEVMEMTCP_LOG_DEBUG);
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;

	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), 0);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "");
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_int_equal(cap.calls, 1);
	assert_int_equal(cap.level, DEVMEMTCP_LOG_ERR);
	assert_string_equal(cap.last, devmemtcp_ctx_errmsg(ctx));
	assert_string_equal(cap.last,
			    "devmemtcp_rx_new: fd 32767 is not a socket (Bad file descriptor): pass a connected TCP socket");
	devmemtcp_ctx_free(ctx);
}

static void test_ctx_log_level_none(void **state)
{
	struct log_capture cap = { 0 };
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = capture, .log_user = &cap,
		       .log_level = DEVMEMTCP_LOG_NONE);
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;

	/* NONE is 0, which means "default": the env var decides */
	setenv("DEVMEMTCP_LOG", "none", 1);
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_int_equal(cap.calls, 0);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "is not a socket"));
	devmemtcp_ctx_free(ctx);
	unsetenv("DEVMEMTCP_LOG");
}

static void test_opts_sz_zero(void **state)
{
	struct devmemtcp_ctx_opts o;

	memset(&o, 0, sizeof(o));
	struct devmemtcp_ctx *ctx = (void *)1;
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), -EINVAL);
	assert_null(ctx);
	assert_int_equal(devmemtcp_ctx_new(NULL, NULL), -EINVAL);
}

static void test_opts_tail(void **state)
{
	struct devmemtcp_ctx *ctx;
	struct {
		struct devmemtcp_rx_opts o;
		uint64_t newer_field;
	} big;
	struct devmemtcp_rx *rx;
	int sv[2];

	assert_int_equal(devmemtcp_ctx_new(NULL, &ctx), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&big, 0, sizeof(big));
	big.o.sz = sizeof(big);
	/* a newer caller's zero tail is accepted */
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &big.o, &rx), 0);
	devmemtcp_rx_free(rx);
	/* a non-zero field this version does not know is refused */
	big.newer_field = 1;
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &big.o, &rx), -EINVAL);
	char want[256];
	snprintf(want, sizeof(want),
		 "struct devmemtcp_rx_opts has non-zero bytes at offset %zu, beyond the %zu bytes this library version knows: upgrade libdevmemtcp or leave newer fields zero",
		 sizeof(struct devmemtcp_rx_opts), sizeof(struct devmemtcp_rx_opts));
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	/* an older caller's shorter struct is accepted: sz covers ctrl_size only */
	struct devmemtcp_rx_opts small = { .sz = offsetof(struct devmemtcp_rx_opts, release_batch),
					   .ctrl_size = 4096, .release_batch = 12345 };
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &small, &rx), 0);
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
	devmemtcp_ctx_free(ctx);
}

static void test_rx_new_checks(void **state)
{
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;
	int fd;

	assert_int_equal(devmemtcp_ctx_new(NULL, &ctx), 0);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), -EPROTOTYPE);
	char want[160];
	snprintf(want, sizeof(want),
		 "devmemtcp_rx_new: fd %d is not a stream socket: devmem TCP needs a connected TCP socket",
		 fd);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	close(fd);
	fd = memfd_create("x", 0);
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), -ENOTSOCK);
	close(fd);
	assert_int_equal(devmemtcp_rx_new(ctx, 0, NULL, NULL), -EINVAL);
	devmemtcp_ctx_free(ctx);
}

static void test_version(void **state)
{
	char v[32];

	snprintf(v, sizeof(v), "%d.%d.%d", DEVMEMTCP_VERSION_MAJOR,
		 DEVMEMTCP_VERSION_MINOR, DEVMEMTCP_VERSION_MICRO);
	assert_string_equal(devmemtcp_version(), v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctx_log_callback),
		cmocka_unit_test(test_ctx_log_level_none),
		cmocka_unit_test(test_opts_sz_zero),
		cmocka_unit_test(test_opts_tail),
		cmocka_unit_test(test_rx_new_checks),
		cmocka_unit_test(test_version),
	};

	return cmocka_run_group_tests_name("opts", tests, NULL, NULL);
}
