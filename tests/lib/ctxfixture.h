/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the cmocka suites (unit and host): a context and, for some, a
 * buffer that needs no device (group setups and teardowns), and the check
 * that a context's message is exactly the one expected.  Include it after
 * <cmocka.h>.
 */
#ifndef DEVMEMTCP_TEST_CTXFIXTURE_H
#define DEVMEMTCP_TEST_CTXFIXTURE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "harness.h"

/* A context that logs nothing at all (log level none); 0 or a negative
 * errno. */
static inline int ctxfix_ctx_silent(struct devmemtcp_ctx **ctx)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_level = DEVMEMTCP_LOG_NONE);

	return devmemtcp_ctx_new(&o, ctx);
}

/* A context whose log goes nowhere (t_quiet) and a buffer of size bytes
 * imported from a memfd (t_memfd_buf): device memory as far as the
 * library can tell; 0 or -1. */
static inline int ctxfix_memfd_setup(uint64_t size, struct devmemtcp_ctx **ctx,
				     int *memfd, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);

	if (devmemtcp_ctx_new(&co, ctx))
		return -1;
	return t_memfd_buf(*ctx, size, memfd, buf) ? -1 : 0;
}

static inline int ctxfix_memfd_teardown(struct devmemtcp_ctx *ctx, int memfd,
					struct devmemtcp_buf *buf)
{
	devmemtcp_buf_free(buf);
	close(memfd);
	devmemtcp_ctx_free(ctx);
	return 0;
}

static inline void ctxfix_vexpect(const char *got, const char *fmt, va_list ap)
{
	char want[1024];

	vsnprintf(want, sizeof(want), fmt, ap);
	assert_string_equal(got, want);
}

/* got is exactly the formatted text. */
__attribute__((format(printf, 2, 3)))
static inline void ctxfix_expect_text(const char *got, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctxfix_vexpect(got, fmt, ap);
	va_end(ap);
}

/* The context's message is exactly the formatted text. */
__attribute__((format(printf, 2, 3)))
static inline void ctxfix_expect_errmsg(struct devmemtcp_ctx *ctx,
					const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctxfix_vexpect(devmemtcp_ctx_errmsg(ctx), fmt, ap);
	va_end(ap);
}

#endif
