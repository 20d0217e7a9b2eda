/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the table of privileged operations, the seam between what a
 * process may do itself and what devmemtcp-broker does for it.  Every
 * context carries one (ctx->priv), chosen when the context is made
 * (lib/priv/context.c): the local implementation, or the broker's when
 * the process lacks CAP_NET_ADMIN and a broker is there.  The layers
 * that need a privileged operation (nic: open and bind; buf: the udmabuf
 * provider; nic: probe) call it through their context and never ask
 * which implementation it is; both implementations live in lib/priv/.
 * Declared here, in core, below every layer that calls it; it calls
 * nothing.
 */
#ifndef DEVMEMTCP_PRIVOPS_H
#define DEVMEMTCP_PRIVOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* What one bind asks for (devmemtcp_bind_rx, devmemtcp_bind_tx). */
struct dmt_bind_call {
	bool tx;
	const char *op;		/* the exported function, for messages */
	int ifindex;
	const uint32_t *queues;
	size_t nqueues;
	struct devmemtcp_buf *buf;
	uint32_t page_size;	/* 0: the kernel's default */
	bool verify;		/* check with queue-get that the queues took it */
	bool asked;		/* the caller asked for the broker (opts.broker) */
	bool sent;		/* out: the request reached the kernel */
};

struct dmt_priv_ops {
	const char *name;	/* "local", "devmemtcp-broker" */
	/*
	 * devmemtcp_nic_open for this process, its arguments checked (a
	 * DEVMEMTCP_NIC_BROKER flag is read here).  The handle keeps the
	 * operations of the implementation that made it (nic.h).
	 */
	int (*nic_open)(struct devmemtcp_ctx *ctx, const char *ifname,
			const struct devmemtcp_nic_opts *opts,
			struct devmemtcp_nic **nic);
	/*
	 * bind-rx or bind-tx of call->buf, its arguments checked: a binding
	 * that owns the netlink socket holding it.  The message of a failure
	 * on err, not logged.
	 */
	int (*bind)(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    struct dmt_bind_call *call, struct devmemtcp_binding **binding);
	/*
	 * The dma-buf of a udmabuf buffer of buf->size bytes (huge: 2 MiB
	 * pages; limit_mb: the module's size_limit_mb, 0 unknown): buf->fd,
	 * own_fd and its CPU mapping set.  0, or a negative errno with the
	 * message on ctx->err.
	 */
	int (*udmabuf)(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		       long limit_mb);
	/*
	 * Probe's privilege facts: CAP_NET_ADMIN, whether this process would
	 * go through the broker, and what its policy allows on
	 * report->ifname.  *nomem when a step ran out of memory.
	 */
	void (*probe)(struct devmemtcp_probe *report, bool *nomem);
};

#endif
