// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A context's constructor and destructor.  They live at the top of the
 * library because a context is made with its table of privileged
 * operations (priv.h): the one place that knows both implementations
 * chooses between them, once per context.  The rest of the context is
 * core's (dmt_ctx_alloc, dmt_ctx_release), its query socket nl's.
 */
#include "priv.h"
#include "nl/nl.h"

DEVMEMTCP_EXPORT int devmemtcp_ctx_new(const struct devmemtcp_ctx_opts *opts,
				       struct devmemtcp_ctx **ctxp)
{
	DMT_KEEP_ERRNO;
	int ret = dmt_ctx_alloc(opts, ctxp);

	if (ret)
		return ret;
	(*ctxp)->priv = dmt_priv_choose();
	return 0;
}

DEVMEMTCP_EXPORT void devmemtcp_ctx_free(struct devmemtcp_ctx *ctx)
{
	DMT_KEEP_ERRNO;
	if (!ctx)
		return;
	dmt_ctx_nl_close(ctx);
	dmt_ctx_release(ctx);
}
