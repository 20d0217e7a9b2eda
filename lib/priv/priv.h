/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the two implementations of the privileged operations
 * (core/privops.h) and the choice between them.  priv.c holds both
 * tables (the local one: the NIC layer's setup and bind, the udmabuf
 * provider's device), the choice made when a context is made
 * (context.c), and what crosses over to the broker whatever the table
 * (bind-tx refused by a kernel, /dev/udmabuf not ours);
 * broker_ops.c the broker's side of each operation, over its client
 * (broker.h).  This layer is the top
 * of the library: it may call nic, buf, nl and core, and nothing calls it
 * but through a context's table.
 */
#ifndef DEVMEMTCP_PRIV_H
#define DEVMEMTCP_PRIV_H

#include <stdbool.h>

#include "core/internal.h"
#include "core/privops.h"

extern const struct dmt_priv_ops dmt_priv_local;
extern const struct dmt_priv_ops dmt_priv_broker;

/* The table of a new context: the broker's when this process lacks
 * CAP_NET_ADMIN and a broker socket is there, else the local one. */
const struct dmt_priv_ops *dmt_priv_choose(void);

/* The local bind, and bind-tx refused with EPERM by a kernel (without
 * CAP_NET_ADMIN, a broker there) through the broker. */
int dmt_priv_bind_local(struct devmemtcp_ctx *ctx, struct dmt_err *err,
			struct dmt_bind_call *call, struct devmemtcp_binding **binding);
/* /dev/udmabuf, or the broker when that cannot be opened (EACCES, EPERM,
 * ENOENT) and a broker is there, whatever the context's table. */
int dmt_priv_udmabuf(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		     long limit_mb);
/* Probe's privilege facts, whatever the context's table. */
void dmt_priv_probe(struct devmemtcp_probe *report, bool *nomem);

/* ---- broker_ops.c: through devmemtcp-broker ---- */

int dmt_brk_nic_open(struct devmemtcp_ctx *ctx, const char *ifname,
		     const struct devmemtcp_nic_opts *opts, struct devmemtcp_nic **nic);
int dmt_brk_bind_op(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    struct dmt_bind_call *call, struct devmemtcp_binding **binding);
/* A udmabuf made by the broker over our memfd (why: what opening dev
 * said, for the message). */
int dmt_brk_udmabuf_op(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		       const char *dev, int why);
/* The broker's part of probe's report. */
void dmt_brk_probe(struct devmemtcp_probe *p, bool *nomem);

#endif
