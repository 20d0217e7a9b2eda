// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The privileged operations through devmemtcp-broker (priv.h): the
 * handle, binding, buffer and report each request gives back to the
 * caller, over the client of broker_client.c.
 */
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "broker.h"
#include "priv.h"
#include "buf/buf.h"
#include "nic/netdev.h"
#include "nic/nic.h"

/* ---- a NIC handle set up by the broker ---------------------------------- */

/* A handle's state here: its connection (the broker owns the NIC state on
 * the process's behalf for as long as it lives), its handle there. */
struct brk_nic {
	struct dmt_brk *brk;
	uint32_t handle;
	uint32_t rules;
};

static const struct dmt_nic_ops brk_nic_ops;

/* What the broker's open gave this handle: queues, binding, setup cost. */
static int remote_opened(struct devmemtcp_nic *nic, const char *ifname,
			 const struct dmt_brk_open_reply *r, int fd,
			 struct devmemtcp_buf *buf)
{
	struct brk_nic *st = nic->remote;

	nic->me.queues = dmt_calloc(r->nqueues ? r->nqueues : 1, sizeof(uint32_t));
	if (!nic->me.queues) {
		if (fd >= 0)
			close(fd);
		return dmt_err_set(&nic->eerr, -ENOMEM, "devmemtcp_nic_open: out of memory");
	}
	memcpy(nic->me.queues, r->queues, r->nqueues * sizeof(uint32_t));
	nic->me.nqueues = r->nqueues;
	nic->me.ctx = r->rss_context ? DMT_CTX_PLACED : DMT_CTX_NONE;
	nic->me.ctx_id = r->rss_context;
	st->handle = r->handle;
	st->rules = r->rules;
	nic->setup_rt = r->setup_round_trips;
	nic->setup_ioctls = r->setup_ioctls;
	nic->setup_steps = r->steps;
	snprintf(nic->eth.ifname, sizeof(nic->eth.ifname), "%s", ifname);
	nic->eth.ifindex = (int)if_nametoindex(ifname);
	if (fd < 0)
		return 0;
	return dmt_binding_adopt(nic->ctx, &nic->eerr, false, nic->eth.ifindex,
				 nic->me.queues, nic->me.nqueues, buf, fd, r->binding_id,
				 &nic->binding);
}

static void brk_nic_free(struct devmemtcp_nic *nic)
{
	struct brk_nic *st = nic->remote;

	dmt_brk_close(st->brk);
	dmt_nic_free(nic);
}

/* The handle set up by devmemtcp-broker for this process (devmemtcp(7),
 * "Privileges"). */
int dmt_brk_nic_open(struct devmemtcp_ctx *ctx, const char *ifname,
		     const struct devmemtcp_nic_opts *opts, struct devmemtcp_nic **nicp)
{
	struct devmemtcp_buf *buf = DMT_OPT(opts, devmemtcp_nic_opts, buf, NULL);
	const struct devmemtcp_bind_opts *bo =
		DMT_OPT(opts, devmemtcp_nic_opts, bind_opts, NULL);
	uint32_t page = DMT_OPT(bo, devmemtcp_bind_opts, rx_page_size, 0);
	struct dmt_brk_open_reply r;
	struct devmemtcp_nic *nic;
	struct brk_nic *st;
	int fd, err;

	err = dmt_nic_check_open(ctx, opts, nicp);
	if (err)
		return err;
	/* the broker sees the dma-buf, not its segments */
	if (buf && dmt_buf_check_pages(buf, page ? page : (uint64_t)sysconf(_SC_PAGESIZE),
				       page, "devmemtcp_nic_open", &ctx->err))
		return dmt_err_log(ctx, &ctx->err);
	err = dmt_nic_new_remote(ctx, &brk_nic_ops, sizeof(*st), &nic);
	if (err)
		return err;
	st = nic->remote;
	err = dmt_brk_open(&nic->eerr, ifname, opts, &st->brk, &r, &fd);
	if (!err)
		err = remote_opened(nic, ifname, &r, fd, buf);
	if (err) {
		dmt_err(ctx, &ctx->err, err, "%s", nic->eerr.msg);
		brk_nic_free(nic);
		return err;
	}
	*nicp = nic;
	return 0;
}

/* close, add_flow, remove_flow of a broker's handle; message on the
 * handle (close: the context). */
static int remote_call(struct devmemtcp_nic *nic, unsigned int type, uint32_t flow_id,
		       const struct devmemtcp_flow *flow)
{
	struct brk_nic *st = nic->remote;
	int ret = dmt_brk_handle_call(st->brk, &nic->eerr, type, st->handle,
				      flow_id, flow);

	if (ret < 0)
		dmt_err(nic->ctx, type == DMT_BRK_CLOSE ? &nic->ctx->err : &nic->err, ret,
			"%s", nic->eerr.msg);
	else if (type == DMT_BRK_ADD_FLOW)
		st->rules++;
	else if (type == DMT_BRK_REMOVE_FLOW)
		st->rules--;
	return ret;
}

static int brk_nic_close(struct devmemtcp_nic *nic)
{
	int err = remote_call(nic, DMT_BRK_CLOSE, 0, NULL);

	brk_nic_free(nic);
	return err;
}

static int brk_nic_add_flow(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow)
{
	return remote_call(nic, DMT_BRK_ADD_FLOW, 0, flow);
}

static int brk_nic_remove_flow(struct devmemtcp_nic *nic, int flow_id)
{
	if (flow_id < 0)
		return dmt_err(nic->ctx, &nic->err, -ENOENT,
			       "flow %d is not a flow of this handle: use the id devmemtcp_nic_add_flow() returned",
			       flow_id);
	return remote_call(nic, DMT_BRK_REMOVE_FLOW, (uint32_t)flow_id, NULL);
}

static uint32_t brk_nic_flows(const struct devmemtcp_nic *nic)
{
	const struct brk_nic *st = nic->remote;

	return st->rules;
}

static const struct dmt_nic_ops brk_nic_ops = {
	.close = brk_nic_close,
	.free = brk_nic_free,
	.add_flow = brk_nic_add_flow,
	.remove_flow = brk_nic_remove_flow,
	.flows = brk_nic_flows,
};

/* ---- bind-rx, bind-tx ---------------------------------------------------- */

/* The broker binds, we keep its socket. */
int dmt_brk_bind_op(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    struct dmt_bind_call *a, struct devmemtcp_binding **bindingp)
{
	uint32_t id = 0;
	int fd, ret;

	ret = dmt_brk_bind(err, a->tx, a->ifindex, a->queues, a->nqueues,
			   devmemtcp_buf_fd(a->buf), a->page_size, a->verify, &fd, &id);
	if (ret)
		return ret;
	return dmt_binding_adopt(ctx, err, a->tx, a->ifindex, a->queues, a->nqueues,
				 a->buf, fd, id, bindingp);
}

/* ---- udmabuf ------------------------------------------------------------- */

/*
 * Without access to /dev/udmabuf (a user, a container) devmemtcp-broker
 * makes the dma-buf: over our memfd, whose pages we allocate first, so
 * that they are ours (our memory cgroup's) before the broker pins them.
 * Each page is also written once through our mapping: a page that
 * fallocate() made is not up to date, and the first fault on it zeroes
 * it, which after the pinning would wipe what the NIC wrote there.
 */
int dmt_brk_udmabuf_op(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		       const char *dev, int why)
{
	uint64_t page = huge ? 2u << 20 : (uint64_t)sysconf(_SC_PAGESIZE);
	struct dmt_err err = { 0 };
	int memfd, fd, ret;

	memfd = dmt_udmabuf_memfd(ctx, buf->size, huge);
	if (memfd < 0)
		return memfd;
	if (fallocate(memfd, 0, 0, (off_t)buf->size)) {
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: allocating the %llu bytes of the memfd failed: %s",
			      (unsigned long long)buf->size, strerror(errno));
		goto out;
	}
	ret = dmt_udmabuf_map(ctx, buf, memfd);
	if (ret)
		goto out;
	for (uint64_t off = 0; off < buf->size; off += page)
		((volatile char *)buf->cpu_map)[off] = 0;
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_GROW)) {
		ret = dmt_err(ctx, &ctx->err, -errno, "udmabuf: sealing the memfd failed: %s",
			      strerror(errno));
		goto out;
	}
	ret = dmt_brk_udmabuf(&err, memfd, &fd);
	if (ret) {
		dmt_err(ctx, &ctx->err, ret, "udmabuf: cannot open %s (%s) and devmemtcp-broker did not make the buffer: %s",
			dev, dmt_errno_name(why), err.msg);
		goto out;
	}
	buf->fd = fd;
	buf->own_fd = true;
out:
	close(memfd);
	return ret;
}

/* ---- probe ---------------------------------------------------------------- */

/* "flows to ports 5201-5210,6000 (rule at /etc/devmemtcp/broker.conf:3)" */
static void broker_allows(struct devmemtcp_probe *p, const struct dmt_brk_policy_reply *r)
{
	char text[1024];
	size_t n;

	if (r->any_port)
		n = (size_t)snprintf(text, sizeof(text), "flows to any port");
	else if (!r->nports)
		n = (size_t)snprintf(text, sizeof(text), "no flows");
	else
		n = (size_t)snprintf(text, sizeof(text), "flows to port%s ",
				     r->nports > 1 || r->ports[0][0] != r->ports[0][1] ? "s" : "");
	for (uint32_t i = 0; i < r->nports && !r->any_port; i++) {
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%u", i ? "," : "",
				      r->ports[i][0]);
		if (r->ports[i][1] != r->ports[i][0])
			n += (size_t)snprintf(text + n, sizeof(text) - n, "-%u", r->ports[i][1]);
	}
	snprintf(text + n, sizeof(text) - n, " (rule at %.255s:%u)", r->conf, r->line);
	snprintf(p->broker_msg, sizeof(p->broker_msg), "%.255s", text);
}

_Static_assert(DEVMEMTCP_PROBE_MAX_QRANGES >= DMT_BRK_MAX_QRANGES,
	       "the policy answer's queue ids fit the report");

/* Would this process set up through devmemtcp-broker, and what may it
 * do there on the interface. */
void dmt_brk_probe(struct devmemtcp_probe *p, bool *nomem)
{
	struct dmt_brk_policy_reply r;
	struct dmt_err err = { 0 };
	int ret;

	p->broker_allowed = -1;
	if (!dmt_brk_present()) {
		snprintf(p->broker_msg, sizeof(p->broker_msg), "none installed (no socket at %.200s)",
			 dmt_brk_path());
		return;
	}
	p->broker = !dmt_cap_net_admin();
	ret = dmt_brk_policy(&err, p->ifname, &r);
	*nomem |= ret == -ENOMEM;
	if (ret) {
		p->broker_state = ret;
		snprintf(p->broker_msg, sizeof(p->broker_msg), "%.255s", err.msg);
		return;
	}
	p->broker_state = 1;
	p->broker_allowed = !!r.allowed;
	if (!r.allowed) {
		snprintf(p->broker_msg, sizeof(p->broker_msg),
			 "no rule of %.180s lets uid %u use %s", r.conf, r.uid, p->ifname);
		return;
	}
	p->broker_queues = r.max_queues;
	p->broker_queues_used = r.used_queues;
	p->broker_tx = r.tx;
	p->broker_udmabuf = r.udmabuf_max;
	p->broker_nqranges = r.nqranges;
	for (uint32_t i = 0; i < r.nqranges; i++) {
		p->broker_qranges[i][0] = r.qranges[i][0];
		p->broker_qranges[i][1] = r.qranges[i][1];
	}
	broker_allows(p, &r);
}
