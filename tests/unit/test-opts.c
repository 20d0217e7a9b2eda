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

#include "ctxfixture.h"
#include "devmemtcp.h"
#include "harness.h"

#define END(T, f) (offsetof(struct devmemtcp_##T, f) + sizeof(((struct devmemtcp_##T *)0)->f))

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
	/* ERRORS devmemtcp_rx_new EBADF */
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_int_equal(cap.calls, 1);
	assert_int_equal(cap.level, DEVMEMTCP_LOG_ERR);
	assert_string_equal(cap.last, devmemtcp_ctx_errmsg(ctx));
	assert_string_equal(cap.last,
			    "devmemtcp_rx_new: fd 32767 is not a socket (Bad file descriptor): pass a connected TCP socket");
	devmemtcp_ctx_free(ctx);
}

/* A context with a capturing callback at level, DEVMEMTCP_LOG=env: a
 * failing call is not logged, its message is kept. */
static void not_logged(int level, const char *env)
{
	struct log_capture cap = { 0 };
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = capture, .log_user = &cap,
		       .log_level = level);
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;

	setenv("DEVMEMTCP_LOG", env, 1);
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_int_equal(cap.calls, 0);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "is not a socket"));
	devmemtcp_ctx_free(ctx);
	unsetenv("DEVMEMTCP_LOG");
}

static void test_ctx_log_level_none(void **state)
{
	/* NONE is 0, which means "default": the env var decides */
	not_logged(DEVMEMTCP_LOG_NONE, "none");
}

/* Run fn with stderr going to a file; what it wrote, in out. */
static void capture_stderr(void (*fn)(void), char *out, size_t len)
{
	int saved = dup(2), fd = memfd_create("stderr", MFD_CLOEXEC);
	ssize_t n;

	assert_true(saved >= 0 && fd >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	fn();
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	n = pread(fd, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
}

static void fail_rx_new(void)
{
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;
	struct devmemtcp_flow f;

	assert_int_equal(devmemtcp_ctx_new(NULL, &ctx), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "is not a socket"));
	devmemtcp_ctx_free(ctx);
	/* no object either: still silent */
	assert_int_equal(devmemtcp_flow_parse("dst-port 0", &f), -EINVAL);
}

/*
 * The library is silent by default: errors are returned and kept on the
 * object; DEVMEMTCP_LOG or a log callback turns output on.
 */
static void test_silent_by_default(void **state)
{
	char out[4096];

	unsetenv("DEVMEMTCP_LOG");
	capture_stderr(fail_rx_new, out, sizeof(out));
	assert_string_equal(out, "");
	setenv("DEVMEMTCP_LOG", "err", 1);
	capture_stderr(fail_rx_new, out, sizeof(out));
	assert_string_equal(out,
			    "devmemtcp: devmemtcp_rx_new: fd 32767 is not a socket (Bad file descriptor): pass a connected TCP socket\n"
			    "devmemtcp: flow \"dst-port 0\": port \"0\" is not 1..65535\n");
	unsetenv("DEVMEMTCP_LOG");
}

/* A callback with the level left 0 gets the errors; DEVMEMTCP_LOG still
 * sets the level. */
static void test_callback_turns_logging_on(void **state)
{
	struct log_capture cap = { 0 };
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = capture, .log_user = &cap);
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;

	unsetenv("DEVMEMTCP_LOG");
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_int_equal(cap.calls, 1);
	assert_int_equal(cap.level, DEVMEMTCP_LOG_ERR);
	assert_string_equal(cap.last, devmemtcp_ctx_errmsg(ctx));
	devmemtcp_ctx_free(ctx);
	setenv("DEVMEMTCP_LOG", "none", 1);
	cap.calls = 0;
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, 0x7fff, NULL, &rx), -EBADF);
	assert_int_equal(cap.calls, 0);
	devmemtcp_ctx_free(ctx);
	unsetenv("DEVMEMTCP_LOG");
}

/* An explicit "nothing", whatever the environment says. */
static void test_log_off(void **state)
{
	not_logged(DEVMEMTCP_LOG_OFF, "debug");
}

/* A log level outside the enum is refused, naming the range. */
static void test_log_level_range(void **state)
{
	struct devmemtcp_ctx *c = (void *)1;

	for (int level = -2; level <= 42; level += 44) {
		DEVMEMTCP_OPTS(ctx_opts, co, .log_level = level);
		char want[256];

		c = (void *)1;
		/* ERRORS devmemtcp_ctx_new EINVAL */
		assert_int_equal(devmemtcp_ctx_new(&co, &c), -EINVAL);
		assert_null(c);
		snprintf(want, sizeof(want),
			 "devmemtcp_ctx_new: log_level %d is not a log level: use DEVMEMTCP_LOG_OFF (-1), 0 (the default) or 1 to 7 (DEVMEMTCP_LOG_ERR 3 to DEVMEMTCP_LOG_DEBUG 7)",
			 level);
		assert_string_equal(devmemtcp_ctx_errmsg(NULL), want);
	}
	for (int level = -1; level <= 7; level++) {
		DEVMEMTCP_OPTS(ctx_opts, co, .log_level = level);

		assert_int_equal(devmemtcp_ctx_new(&co, &c), 0);
		devmemtcp_ctx_free(c);
	}
}

static void test_opts_sz_zero(void **state)
{
	struct devmemtcp_ctx_opts o;

	memset(&o, 0, sizeof(o));
	struct devmemtcp_ctx *ctx = (void *)1;
	/* ERRORS devmemtcp_ctx_new EINVAL */
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), -EINVAL);
	assert_null(ctx);
	/* no context: the message is the thread's */
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "struct devmemtcp_ctx_opts: sz is 0: initialise it with DEVMEMTCP_OPTS() or set .sz = sizeof(struct devmemtcp_ctx_opts)");
	/* ERRORS devmemtcp_ctx_new EINVAL */
	assert_int_equal(devmemtcp_ctx_new(NULL, NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "devmemtcp_ctx_new: ctx pointer is NULL: pass the address of a struct devmemtcp_ctx *");
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
	assert_int_equal(t_tcp_pair(sv), 0);
	memset(&big, 0, sizeof(big));
	big.o.sz = sizeof(big);
	/* a newer caller's zero tail is accepted */
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &big.o, &rx), 0);
	devmemtcp_rx_free(rx);
	/* a non-zero field this version does not know is refused */
	big.newer_field = 1;
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &big.o, &rx), -EINVAL);
	ctxfix_expect_errmsg(ctx,
			     "struct devmemtcp_rx_opts has non-zero bytes at offset %zu, beyond the %zu bytes this library version knows: upgrade libdevmemtcp or leave newer fields zero",
			     sizeof(struct devmemtcp_rx_opts), sizeof(struct devmemtcp_rx_opts));
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
	char want[256];
	int fd, sv[2];

	assert_int_equal(devmemtcp_ctx_new(NULL, &ctx), 0);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	/* ERRORS devmemtcp_rx_new EPROTOTYPE */
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), -EPROTOTYPE);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_rx_new: fd %d is not a TCP socket (a datagram socket): devmem TCP needs a connected TCP socket (IPv4 or IPv6)",
			     fd);
	close(fd);
	/* a Unix stream socket is a stream, not TCP */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], NULL, &rx), -EPROTOTYPE);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_rx_new: fd %d is not a TCP socket (an AF_UNIX socket): devmem TCP needs a connected TCP socket (IPv4 or IPv6)",
			     sv[0]);
	close(sv[0]);
	close(sv[1]);
	/* TCP, but not connected: a new socket, a listening one */
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* ERRORS devmemtcp_rx_new ENOTCONN */
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), -ENOTCONN);
	snprintf(want, sizeof(want),
		 "devmemtcp_rx_new: fd %d is not connected (Transport endpoint is not connected): connect() it first, or pass the socket accept() returns",
		 fd);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), -ENOTCONN);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	close(fd);
	fd = memfd_create("x", 0);
	/* ERRORS devmemtcp_rx_new ENOTSOCK */
	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), -ENOTSOCK);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_rx_new: fd %d is not a socket (Socket operation on non-socket): pass a connected TCP socket",
			     fd);
	close(fd);
	/* ERRORS devmemtcp_rx_new EINVAL */
	assert_int_equal(devmemtcp_rx_new(ctx, 0, NULL, NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_rx_new: rx pointer is NULL");
	devmemtcp_ctx_free(ctx);
}

/* The message for a non-zero byte between a struct's last field and its
 * size (padding, or a reserved field). */
static const char *reserved_msg(const char *type, size_t at, size_t end)
{
	static char want[512];

	snprintf(want, sizeof(want),
		 "struct %s has a non-zero reserved byte at offset %zu (its fields end at %zu): declare it with DEVMEMTCP_OPTS() or zero it with memset, and leave reserved fields zero",
		 type, at, end);
	return want;
}

/* Bytes after the last field, inside the struct, are checked too: a later
 * version may put a field there. */
static void test_opts_reserved_bytes(void **state)
{
	DEVMEMTCP_OPTS(rx_opts, ro);
	DEVMEMTCP_OPTS(ctx_opts, co);
	DEVMEMTCP_OPTS(bind_opts, bo);
	DEVMEMTCP_OPTS(probe_opts, po);
	struct devmemtcp_probe report = { .sz = sizeof(report) };
	struct devmemtcp_binding *b;
	struct devmemtcp_ctx *ctx, *c2;
	struct devmemtcp_rx *rx;
	int sv[2];

	assert_int_equal(devmemtcp_ctx_new(NULL, &ctx), 0);
	assert_int_equal(t_tcp_pair(sv), 0);
	/* rx_opts: byte 20, the reserved field before zcrx */
	assert_true(END(rx_opts, release_batch) < offsetof(struct devmemtcp_rx_opts, zcrx));
	((unsigned char *)&ro)[END(rx_opts, release_batch)] = 1;
	/* ERRORS devmemtcp_rx_new EINVAL */
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &ro, &rx), -EINVAL);
	ctxfix_expect_errmsg(ctx,
			     "struct devmemtcp_rx_opts has a non-zero reserved byte at offset %zu: declare it with DEVMEMTCP_OPTS() or zero it with memset, and leave reserved fields zero",
			     END(rx_opts, release_batch));
	/* ctx_opts: byte 28 */
	assert_true(END(ctx_opts, log_level) < sizeof(co));
	((unsigned char *)&co)[sizeof(co) - 1] = 1;
	c2 = (void *)1;
	/* ERRORS devmemtcp_ctx_new EINVAL */
	assert_int_equal(devmemtcp_ctx_new(&co, &c2), -EINVAL);
	assert_null(c2);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    reserved_msg("devmemtcp_ctx_opts", sizeof(co) - 1, END(ctx_opts, log_level)));
	/* bind_opts: byte 14, refused before the interface is looked at */
	assert_true(END(bind_opts, broker) < sizeof(bo));
	((unsigned char *)&bo)[END(bind_opts, broker)] = 1;
	assert_int_equal(devmemtcp_bind_tx(ctx, 0, NULL, &bo, &b), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    reserved_msg("devmemtcp_bind_opts", END(bind_opts, broker),
					 END(bind_opts, broker)));
	/* probe_opts: byte 12, the reserved field before run_dir, refused
	 * before the interface is looked at */
	assert_true(END(probe_opts, flags) < offsetof(struct devmemtcp_probe_opts, run_dir));
	((unsigned char *)&po)[END(probe_opts, flags)] = 1;
	assert_int_equal(devmemtcp_nic_probe(ctx, "lo", &po, &report), -EINVAL);
	ctxfix_expect_errmsg(ctx,
			     "struct devmemtcp_probe_opts has a non-zero reserved byte at offset %zu: declare it with DEVMEMTCP_OPTS() or zero it with memset, and leave reserved fields zero",
			     END(probe_opts, flags));
	close(sv[0]);
	close(sv[1]);
	devmemtcp_ctx_free(ctx);
}

static void *seen_user = (void *)1;

static void record_user(void *user, int level, const char *msg)
{
	seen_user = user;
}

/*
 * An older caller's smaller struct: fields past its sz are never read,
 * whatever the bytes there hold.
 */
static void test_opts_smaller_sz(void **state)
{
	int marker;
	struct devmemtcp_ctx_opts co = { .sz = END(ctx_opts, log_fn),
					 .log_fn = record_user,
					 .log_user = &marker,
					 .log_level = DEVMEMTCP_LOG_ERR };
	/* provider and flags only: the size is past sz */
	struct devmemtcp_buf_opts bo = { .sz = END(buf_opts, flags),
					 .provider = DEVMEMTCP_PROVIDER_UDMABUF,
					 .size = 1 << 20 };
	struct devmemtcp_bind_opts bio = { .sz = sizeof(size_t), .rx_page_size = 4096 };
	struct devmemtcp_segment seg = { 0, 4096, 0x1000 };
	const struct devmemtcp_segment *segs;
	struct devmemtcp_binding *b;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf = (void *)1;

	assert_int_equal(devmemtcp_ctx_new(&co, &ctx), 0);
	assert_int_equal(devmemtcp_buf_new(ctx, &bo, &buf), -EINVAL);
	assert_null(buf);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "udmabuf: size is 0: give the buffer size in bytes");
	assert_null(seen_user);		/* log_user was past sz */
	/* import: the segment table is past sz, one segment maps it all */
	bo = (struct devmemtcp_buf_opts){ .sz = END(buf_opts, fd),
					  .provider = DEVMEMTCP_PROVIDER_IMPORT,
					  .flags = DEVMEMTCP_BUF_KEEP_FD,
					  .size = 8192, .segments = &seg,
					  .nsegments = 1 };
	bo.fd = memfd_create("t", MFD_CLOEXEC);
	assert_int_equal(ftruncate(bo.fd, 8192), 0);
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	assert_int_equal(devmemtcp_buf_new(ctx, &bo, &buf), 0);
	unsetenv("DEVMEMTCP_TEST_DMABUF_MEMFD");
	assert_int_equal(devmemtcp_buf_segments(buf, &segs), 1);
	assert_int_equal(segs[0].offset, 0);
	assert_int_equal(segs[0].len, 8192);
	assert_int_equal(segs[0].addr, 0);
	devmemtcp_buf_free(buf);
	close(bo.fd);
	/* bind_opts: rx_page_size past sz is not there, so bind-tx does not
	 * refuse it and goes on to the interface */
	assert_int_equal(devmemtcp_bind_tx(ctx, 0, NULL, &bio, &b), -ENODEV);
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
		cmocka_unit_test(test_silent_by_default),
		cmocka_unit_test(test_callback_turns_logging_on),
		cmocka_unit_test(test_log_off),
		cmocka_unit_test(test_log_level_range),
		cmocka_unit_test(test_opts_sz_zero),
		cmocka_unit_test(test_opts_tail),
		cmocka_unit_test(test_rx_new_checks),
		cmocka_unit_test(test_opts_reserved_bytes),
		cmocka_unit_test(test_opts_smaller_sz),
		cmocka_unit_test(test_version),
	};

	return cmocka_run_group_tests_name("opts", tests, NULL, NULL);
}
