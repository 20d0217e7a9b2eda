/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the cmocka suites (unit and host) whose tests need a context
 * and, for some, a buffer that needs no device: the group setups and
 * teardowns they had each written out.
 */
#ifndef DEVMEMTCP_TEST_BUFFIXTURE_H
#define DEVMEMTCP_TEST_BUFFIXTURE_H

#include <stdint.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "harness.h"

/* A context that logs nothing at all (log level none); 0 or a negative
 * errno. */
static inline int buffix_ctx_silent(struct devmemtcp_ctx **ctx)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_level = DEVMEMTCP_LOG_NONE);

	return devmemtcp_ctx_new(&o, ctx);
}

/* A context whose log goes nowhere (t_quiet) and a buffer of size bytes
 * imported from a memfd (t_memfd_buf): device memory as far as the
 * library can tell; 0 or -1. */
static inline int buffix_memfd_setup(uint64_t size, struct devmemtcp_ctx **ctx,
				     int *memfd, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);

	if (devmemtcp_ctx_new(&co, ctx))
		return -1;
	return t_memfd_buf(*ctx, size, memfd, buf) ? -1 : 0;
}

static inline int buffix_memfd_teardown(struct devmemtcp_ctx *ctx, int memfd,
					struct devmemtcp_buf *buf)
{
	devmemtcp_buf_free(buf);
	close(memfd);
	devmemtcp_ctx_free(ctx);
	return 0;
}

#endif
