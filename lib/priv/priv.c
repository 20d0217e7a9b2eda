// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The two tables of privileged operations, the choice of a context's
 * table, and what crosses over to the broker whatever the table (priv.h);
 * the broker's side of each operation is broker_ops.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "priv.h"
#include "buf/buf.h"
#include "nic/netdev.h"
#include "nic/nic.h"

const struct dmt_priv_ops *dmt_priv_choose(void)
{
	return !dmt_cap_net_admin() && dmt_brk_present() ? &dmt_priv_broker
							  : &dmt_priv_local;
}

/* A setup made here, unless this open asks for the broker. */
static int local_nic_open(struct devmemtcp_ctx *ctx, const char *ifname,
			  const struct devmemtcp_nic_opts *opts,
			  struct devmemtcp_nic **nicp)
{
	int ret;

	if (DMT_OPT(opts, devmemtcp_nic_opts, flags, 0) & DEVMEMTCP_NIC_BROKER)
		return dmt_brk_nic_open(ctx, ifname, opts, nicp);
	ret = dmt_nic_open_self(ctx, ifname, opts, nicp);
	if ((ret == -EACCES || ret == -EPERM) && !dmt_cap_net_admin()) {
		/* refused for want of privilege, and no broker to ask: say
		 * both ways out, not only the run directory's */
		char why[DMT_ERRMSG_MAX / 2];

		snprintf(why, sizeof(why), "%s", devmemtcp_ctx_errmsg(ctx));
		ret = dmt_err(ctx, &ctx->err, -EPERM,
			      "devmemtcp_nic_open on %s: no CAP_NET_ADMIN and no broker: start devmemtcp-broker (systemctl start devmemtcp-broker.socket; its socket is %s) or run with CAP_NET_ADMIN (%s)",
			      ifname ? ifname : "(null)", dmt_brk_path(), why);
	}
	return ret;
}

int dmt_priv_bind_local(struct devmemtcp_ctx *ctx, struct dmt_err *err,
			struct dmt_bind_call *call, struct devmemtcp_binding **binding)
{
	int ret;

	if (call->asked)
		return dmt_brk_bind_op(ctx, err, call, binding);
	ret = dmt_bind_local(ctx, err, call, binding);
	/* Kernels let anyone bind-tx (it has no permission flag); where one
	 * does not, the broker does it. */
	if (call->tx && ret == -EPERM && call->sent && !dmt_cap_net_admin() &&
	    dmt_brk_present()) {
		dmt_err_clear(err);
		call->sent = false;
		ret = dmt_brk_bind_op(ctx, err, call, binding);
	}
	return ret;
}

/* Why we cannot open dev (-EACCES, -EPERM, -ENOENT) when a broker can
 * make the buffer instead; 0 when we can or none is there. */
static int broker_makes_it(const char *dev)
{
	int why;

	if (strcmp(dev, "/dev/udmabuf") ||
	    !faccessat(AT_FDCWD, "/dev/udmabuf", R_OK | W_OK, AT_EACCESS))
		return 0;
	why = -errno;
	if (why != -EACCES && why != -EPERM && why != -ENOENT)
		return 0;
	return dmt_brk_present() ? why : 0;
}

int dmt_priv_udmabuf(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		     long limit_mb)
{
	const char *dev = dmt_udmabuf_dev();
	int why = broker_makes_it(dev);

	if (why)
		return dmt_brk_udmabuf_op(ctx, buf, huge, dev, why);
	return dmt_udmabuf_local(ctx, buf, huge, dev, limit_mb);
}

void dmt_priv_probe(struct devmemtcp_probe *report, bool *nomem)
{
	report->cap_net_admin = dmt_cap_net_admin();
	dmt_brk_probe(report, nomem);
}

const struct dmt_priv_ops dmt_priv_local = {
	.name = "local",
	.nic_open = local_nic_open,
	.bind = dmt_priv_bind_local,
	.udmabuf = dmt_priv_udmabuf,
	.probe = dmt_priv_probe,
};

/* bind-tx needs no privilege on most kernels: through the broker only when
 * the caller asks, or when the kernel refuses (dmt_priv_bind_local). */
static int brk_bind(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    struct dmt_bind_call *a, struct devmemtcp_binding **bindingp)
{
	if (a->tx && !a->asked)
		return dmt_priv_bind_local(ctx, err, a, bindingp);
	return dmt_brk_bind_op(ctx, err, a, bindingp);
}

const struct dmt_priv_ops dmt_priv_broker = {
	.name = "devmemtcp-broker",
	.nic_open = dmt_brk_nic_open,
	.bind = brk_bind,
	.udmabuf = dmt_priv_udmabuf,
	.probe = dmt_priv_probe,
};
