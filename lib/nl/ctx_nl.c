// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The context's query socket: one generic netlink socket per context,
 * opened on first use, used only under the context's lock, so that threads
 * sharing a context never interleave one request/reply sequence (nl.h).
 */
#include <string.h>

#include "core/fork.h"
#include "nl.h"

struct dmt_nl *dmt_ctx_nl(struct devmemtcp_ctx *ctx, int *errp)
{
	int ret;

	pthread_mutex_lock(&ctx->lock);
	if (ctx->nl && dmt_forked(ctx->nl_gen)) {
		/* a forked child: the parent's socket would mix our replies
		 * with its; our copy goes, a socket of our own comes */
		dmt_nl_close(ctx->nl);
		ctx->nl = NULL;
	}
	if (!ctx->nl) {
		ctx->nl_gen = dmt_fork_gen();
		ret = dmt_nl_open(&ctx->nl, NETLINK_GENERIC);
		if (ret) {
			*errp = dmt_err(ctx, &ctx->err, ret,
					"cannot open a generic netlink socket: %s",
					strerror(-ret));
			pthread_mutex_unlock(&ctx->lock);
			return NULL;
		}
	}
	return ctx->nl;
}

void dmt_ctx_nl_put(struct devmemtcp_ctx *ctx)
{
	pthread_mutex_unlock(&ctx->lock);
}

void dmt_ctx_nl_close(struct devmemtcp_ctx *ctx)
{
	dmt_nl_close(ctx->nl);
	ctx->nl = NULL;
}
