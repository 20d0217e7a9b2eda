// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp_nic_probe(): what an interface and this kernel offer for devmem
 * TCP, and for each problem the fix in plain words.  Read-only, except
 * with DEVMEMTCP_PROBE_TRY_BIND (a small udmabuf bound to the last RX
 * queue and released at once: the kernel advertises devmem support by no
 * flag, so a bind attempt is the only sure test).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include "buf/drm-provider.h"
#include "core/privops.h"
#include "ethtool.h"
#include "netdev.h"
#include "nic.h"
#include "core/uapi.h"
#include "zcrx_ifq.h"

static void problem(struct devmemtcp_probe *p, const char *fix,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void problem(struct devmemtcp_probe *p, const char *fix,
		    const char *fmt, ...)
{
	struct devmemtcp_probe_problem *pr;
	va_list ap;

	if (p->nproblems >= DEVMEMTCP_PROBE_MAX_PROBLEMS)
		return;
	pr = &p->problems[p->nproblems++];
	va_start(ap, fmt);
	vsnprintf(pr->what, sizeof(pr->what), fmt, ap);
	va_end(ap);
	snprintf(pr->fix, sizeof(pr->fix), "%s", fix);
}

/* ---- XDP: rtnetlink IFLA_XDP / IFLA_XDP_ATTACHED ---- */

static int xdp_cb(const struct nlmsghdr *nlh, void *data)
{
	bool *xdp = data;
	const struct nlattr *a, *x;

	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg)) {
		if (mnl_attr_get_type(a) != IFLA_XDP)
			continue;
		mnl_attr_for_each_nested(x, a)
			if (mnl_attr_get_type(x) == IFLA_XDP_ATTACHED &&
			    mnl_attr_get_payload_len(x) >= 1 &&
			    mnl_attr_get_u8(x) != XDP_ATTACHED_NONE)
				*xdp = true;
	}
	return MNL_CB_OK;
}

/* RTM_GETLINK of ifindex: whether an XDP program is attached. */
static int xdp_attached(int ifindex, bool *xdp)
{
	char buf[256];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	struct dmt_nl *nl;
	int ret;

	*xdp = false;
	nlh = dmt_nl_msg(buf, RTM_GETLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	/* A socket of its own: the question is rtnetlink's (the context's
	 * socket is generic netlink). */
	ret = dmt_nl_open(&nl, NETLINK_ROUTE);
	if (ret)
		return ret;
	ret = dmt_nl_talk(nl, nlh, xdp_cb, xdp);
	dmt_nl_close(nl);
	return ret;
}

/* ---- small readers ---- */

static int64_t read_int_file(const char *path)
{
	FILE *f = fopen(path, "re");
	long long v;

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* An owner has queue q. */
static bool owned(const struct devmemtcp_probe *p, uint32_t q)
{
	for (int i = 0; i < p->nowners && i < DEVMEMTCP_PROBE_MAX_OWNERS; i++)
		for (uint32_t k = 0; k < p->owners[i].nqueues && k < 16; k++)
			if (p->owners[i].queues[k] == q)
				return true;
	return false;
}

/* The last RX queue that no owner has and nothing is bound to. */
static int free_queue(const struct devmemtcp_probe *p, const bool *busy, uint32_t *q)
{
	for (int i = p->rx_queues - 1; i >= 0; i--) {
		if (busy[i] || owned(p, (uint32_t)i))
			continue;
		*q = (uint32_t)i;
		return 0;
	}
	return -EBUSY;
}

static void try_bind(struct devmemtcp_ctx *ctx, struct devmemtcp_probe *p,
		     const bool *busy)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 2u << 20);
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_binding *b = NULL;
	uint32_t q;
	int err;

	if (p->rx_queues <= 0) {
		p->try_bind = -ENODEV;
		snprintf(p->try_bind_msg, sizeof(p->try_bind_msg),
			 "the number of RX queues is unknown");
		return;
	}
	if (free_queue(p, busy, &q) < 0) {
		p->try_bind = -EBUSY;
		snprintf(p->try_bind_msg, sizeof(p->try_bind_msg),
			 "not tried: every RX queue is owned or has a binding");
		return;
	}
	err = devmemtcp_buf_new(ctx, &bo, &buf);
	if (err < 0) {
		p->try_bind = err;
		snprintf(p->try_bind_msg, sizeof(p->try_bind_msg),
			 "could not create a 2 MiB udmabuf: %s",
			 devmemtcp_ctx_errmsg(ctx));
		return;
	}
	err = devmemtcp_bind_rx(ctx, p->ifindex, &q, 1, buf, NULL, &b);
	if (err < 0) {
		p->try_bind = err;
		snprintf(p->try_bind_msg, sizeof(p->try_bind_msg), "%s",
			 devmemtcp_ctx_errmsg(ctx));
	} else {
		p->try_bind = 1;
		snprintf(p->try_bind_msg, sizeof(p->try_bind_msg),
			 "bound a 2 MiB udmabuf to RX queue %u (binding %u) and released it",
			 q, devmemtcp_binding_id(b));
		devmemtcp_binding_close(b);
	}
	devmemtcp_buf_free(buf);
}

/* One probe: the report being filled and what it reads through. */
struct probe {
	struct devmemtcp_probe r;
	struct dmt_eth e;
	struct dmt_err eerr;	/* the ethtool layer's last message */
	struct dmt_nl *nl;
	int kv;			/* kernel version, dmt_kernel_version() */
	bool nomem;		/* a step ran out of memory: the report would lie */
	bool busy[512];		/* RX queues with a binding, io_uring or AF_XDP */
	uint32_t binding[512];	/* the binding on each RX queue */
};

static int probe_args_check(struct devmemtcp_ctx *ctx,
			    const struct devmemtcp_probe_opts *opts,
			    const struct devmemtcp_probe *report)
{
	int err;

	if (!report)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_nic_probe: report is NULL");
	if (report->sz < offsetof(struct devmemtcp_probe, problems))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "struct devmemtcp_probe: sz is %zu: set .sz = sizeof(struct devmemtcp_probe)",
			       report->sz);
	err = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_probe_opts);
	if (!err)
		err = DMT_OPTS_RESERVED(ctx, &ctx->err, opts, devmemtcp_probe_opts,
					reserved);
	if (err)
		return err;
	if (DMT_OPT(opts, devmemtcp_probe_opts, flags, 0) & ~(uint32_t)DEVMEMTCP_PROBE_TRY_BIND)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_nic_probe: unknown flags 0x%x",
			       DMT_OPT(opts, devmemtcp_probe_opts, flags, 0));
	return 0;
}

/* The kernel release and what this process and host allow. */
static void probe_host_facts(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct utsname u;

	if (uname(&u) == 0)
		snprintf(p->kernel, sizeof(p->kernel), "%s", u.release);
	pr->kv = dmt_kernel_version(p->kernel);
	p->optmem_max = read_int_file("/proc/sys/net/core/optmem_max");
	p->udmabuf_limit_mb = read_int_file("/sys/module/udmabuf/parameters/size_limit_mb");
}

/* Resolve ifname and open the sockets; every number starts unknown. */
static int probe_open(struct devmemtcp_ctx *ctx, struct probe *pr,
		      const char *ifname)
{
	struct devmemtcp_probe *p = &pr->r;
	int err;

	memset(pr, 0, sizeof(*pr));
	p->rx_queues = p->tx_queues = -1;
	p->tcp_data_split = -1;
	p->hds_thresh = p->hds_thresh_max = -1;
	p->ntuple = p->ntuple_fixed = p->ntuple_rules = p->ntuple_table_size = -1;
	p->rss_table_size = p->rss_contexts = p->rss_context_count = -1;
	p->xsk_queues = p->dmabuf_queues = p->io_uring_queues = -1;

	err = dmt_eth_init(&pr->e, &pr->eerr, NULL, ifname);
	if (err < 0)
		return dmt_err(ctx, &ctx->err, err, "%s", pr->eerr.msg);
	snprintf(p->ifname, sizeof(p->ifname), "%s", ifname);
	p->ifindex = pr->e.ifindex;
	probe_host_facts(pr);
	/* The probe's own socket, not the context's: its steps wait between
	 * their requests (the broker's answer, a trial bind) and must not hold
	 * the context's lock meanwhile. */
	err = dmt_nl_open(&pr->nl, NETLINK_GENERIC);
	if (err < 0) {
		dmt_eth_fini(&pr->e);
		return dmt_err(ctx, &ctx->err, err,
			       "cannot open a generic netlink socket: %s",
			       dmt_errno_name(err));
	}
	pr->e.nl = pr->nl;
	return 0;
}

static void probe_close(struct probe *pr)
{
	dmt_eth_fini(&pr->e);
	dmt_nl_close(pr->nl);
}

/* Devmem in the kernel: the ops of the netdev family. */
static void probe_kernel(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct dmt_genl_family ops;

	if (dmt_nl_family_get(pr->nl, DMT_NETDEV_FAMILY_NAME, &ops) == 0) {
		p->has_netdev_family = true;
		p->has_bind_rx = dmt_nl_family_has_op(&ops, DMT_NETDEV_CMD_BIND_RX);
		p->has_bind_tx = dmt_nl_family_has_op(&ops, DMT_NETDEV_CMD_BIND_TX);
	}
	if (!p->has_bind_rx)
		problem(p, "boot Linux 6.12 or newer (devmem TX needs 6.16)",
			"the kernel (%s) has no devmem TCP: the netdev netlink family %s",
			p->kernel, p->has_netdev_family ? "lacks bind-rx" : "is missing");
	else if (!p->has_bind_tx)
		problem(p, "boot Linux 6.16 or newer for devmem TX (RX works as is)",
			"the kernel (%s) has devmem RX but no devmem TX (bind-tx)",
			p->kernel);
}

static void probe_driver(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct ethtool_drvinfo di;

	if (dmt_eth_drvinfo(&pr->e, &di))
		return;
	snprintf(p->driver, sizeof(p->driver), "%s", di.driver);
	snprintf(p->driver_version, sizeof(p->driver_version), "%s", di.version);
	snprintf(p->bus_info, sizeof(p->bus_info), "%s", di.bus_info);
}

/* queue-get: the queues by type and those taken by AF_XDP or a provider. */
static void probe_queue_list(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct devmemtcp_queue q[512];
	int nq = dmt_queue_list(pr->nl, pr->e.ifindex, q, ARRAY_SIZE(q));
	int rx = 0, tx = 0;

	if (nq < 0)
		return;
	p->xsk_queues = p->dmabuf_queues = p->io_uring_queues = 0;
	for (int i = 0; i < nq && i < (int)ARRAY_SIZE(q); i++) {
		if (q[i].type == DEVMEMTCP_QUEUE_RX && q[i].id < ARRAY_SIZE(pr->busy)) {
			pr->busy[q[i].id] = q[i].dmabuf_id || q[i].io_uring || q[i].xsk;
			pr->binding[q[i].id] = q[i].dmabuf_id;
		}
		rx += q[i].type == DEVMEMTCP_QUEUE_RX;
		tx += q[i].type == DEVMEMTCP_QUEUE_TX;
		p->xsk_queues += q[i].xsk;
		p->dmabuf_queues += q[i].dmabuf_id != 0;
		p->io_uring_queues += q[i].io_uring;
	}
	if (p->rx_queues < 0) {
		p->rx_queues = rx;
		p->tx_queues = tx;
	}
}

/* Queue counts: ethtool channels, else queue-get, else sysfs. */
static void probe_queues(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct dmt_channels ch;
	uint32_t rx, tx;
	char fix[320];

	if (pr->e.ops->channels_get(&pr->e, &ch) == 0) {
		p->rx_queues = (int)(ch.rx + ch.combined);
		p->tx_queues = (int)(ch.tx + ch.combined);
	}
	probe_queue_list(pr);
	if (p->rx_queues <= 0 && dmt_sysfs_queues(p->ifname, &rx, &tx) == 0) {
		p->rx_queues = (int)rx;
		p->tx_queues = (int)tx;
	}
	if (p->rx_queues >= 0 && p->rx_queues < 2) {
		snprintf(fix, sizeof(fix),
			 "give the device more RX queues (ethtool -L %s combined 2, or rx 2); "
			 "for veth: ip link add ... numrxqueues 2", p->ifname);
		problem(p, fix,
			"%s has %d RX queue%s: devmem needs one queue for itself and one for other traffic",
			p->ifname, p->rx_queues, p->rx_queues == 1 ? "" : "s");
	}
}

static void probe_link(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	char fix[320];

	if (dmt_eth_is_up(&pr->e) != 0)
		return;
	snprintf(fix, sizeof(fix), "ip link set %s up", p->ifname);
	problem(p, fix,
		"%s is down: its queues cannot take a binding and queue-get lists none",
		p->ifname);
}

/* Header split: tcp-data-split on, hds-thresh 0. */
static void probe_rings(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	const char *ifname = p->ifname;
	struct dmt_rings r;
	char fix[320];

	if (pr->e.ops->rings_get(&pr->e, &r) == 0 && r.has_tds) {
		p->tcp_data_split = r.tds;
		if (r.has_hds)
			p->hds_thresh = r.hds_thresh;
		if (r.has_hds_max)
			p->hds_thresh_max = r.hds_thresh_max;
	}
	if (p->tcp_data_split < 0 && !strcmp(p->driver, "mlx5_core")) {
		struct dmt_feature f;

		/* mlx5_core shows it only once configured, which needs
		 * hardware GRO (devmemtcp(7), HARDWARE) */
		if (pr->e.ops->feature_get(&pr->e, "rx-gro-hw", &f) == 0 && f.present &&
		    !f.active) {
			snprintf(fix, sizeof(fix),
				 "ethtool -K %s rx-gro-hw on (then devmemtcp_nic_open() turns header split on and back)",
				 ifname);
			problem(p, fix,
				"header split (tcp-data-split) is not set on %s: mlx5_core splits headers only with hardware GRO, which is off",
				ifname);
		}
		return;
	}
	if (p->tcp_data_split < 0 && !strcmp(p->driver, "gve")) {
		problem(p, "use a gve device with the DQO RDA queue format that offers header split, without an XDP program",
			"%s (driver gve) has no header split: gve splits headers only on the DQO RDA queue format of a device that offers it",
			ifname);
		return;
	}
	if (p->tcp_data_split < 0) {
		problem(p, "use a NIC whose driver supports devmem TCP (gve, bnxt_en, mlx5, fbnic); "
			   "virtual devices (veth, loopback) cannot",
			"%s (driver %s) does not support header split (tcp-data-split)",
			ifname, p->driver[0] ? p->driver : "unknown");
		return;
	}
	if (p->tcp_data_split != DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED) {
		snprintf(fix, sizeof(fix),
			 "ethtool -G %s tcp-data-split on (devmemtcp_nic_open() does it and undoes it)",
			 ifname);
		problem(p, fix, "header split (tcp-data-split) is %s on %s",
			p->tcp_data_split ? "off" : "auto", ifname);
	}
	if (p->hds_thresh > 0) {
		snprintf(fix, sizeof(fix),
			 "ethtool -G %s hds-thresh 0 (devmemtcp_nic_open() does it and undoes it)",
			 ifname);
		problem(p, fix, "hds-thresh is %lld on %s: bind-rx needs 0",
			(long long)p->hds_thresh, ifname);
	}
	/* no hds-thresh shown (gve): the kernel's is 0, which bind-rx needs */
}

/* ntuple filters: the feature and the rule table. */
static void probe_ntuple(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct dmt_feature f;
	uint32_t cnt, size;
	bool special;
	char fix[320];

	if (pr->e.ops->feature_get(&pr->e, DMT_NTUPLE_FEATURE, &f) == 0 &&
	    f.present) {
		p->ntuple = f.active;
		p->ntuple_fixed = f.nochange || !f.hw;
	}
	if (dmt_eth_rule_count(&pr->e, &cnt, &size, &special) == 0) {
		p->ntuple_rules = (int)cnt;
		p->ntuple_table_size = (int)size;
	}
	if (p->ntuple < 0 || (p->ntuple == 0 && p->ntuple_fixed == 1)) {
		problem(p, "use a NIC with ntuple flow steering; without it flows cannot be steered to the devmem queues",
			"%s has no ntuple filters (rx-ntuple-filter %s)", p->ifname,
			p->ntuple < 0 ? "unknown" : "off [fixed]");
	} else if (p->ntuple == 0) {
		snprintf(fix, sizeof(fix),
			 "ethtool -K %s ntuple on (devmemtcp_nic_open() does it and undoes it)",
			 p->ifname);
		problem(p, fix, "ntuple filters (rx-ntuple-filter) are off on %s",
			p->ifname);
	}
}

/* RSS: the default table's size and the extra contexts. */
static void probe_rss(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct dmt_rss *list;
	size_t n;

	if (pr->e.ops->rss_dump(&pr->e, &list, &n) == 0) {
		p->rss_context_count = 0;
		for (size_t i = 0; i < n; i++) {
			if (list[i].context == 0)
				p->rss_table_size = (int)list[i].indir_size;
			else
				p->rss_context_count++;
			dmt_rss_free(&list[i]);
		}
		free(list);
		if (p->rss_context_count > 0)
			p->rss_contexts = 1;
	}
	if (p->rss_table_size <= 0) {
		p->rss_table_size = -1;
		problem(p, "use a NIC with RSS, or steer other traffic away yourself (DEVMEMTCP_NIC_KEEP_RSS)",
			"%s has no RSS indirection table: other traffic cannot be kept off the devmem queues",
			p->ifname);
	}
}

/* What excludes devmem on a queue: XDP, AF_XDP, another memory provider. */
static void probe_exclusive(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	int taken = p->dmabuf_queues + p->io_uring_queues;
	char fix[320];

	if (xdp_attached(pr->e.ifindex, &p->xdp) == 0 && p->xdp) {
		snprintf(fix, sizeof(fix),
			 "detach it (ip link set dev %s xdp off): devmem and XDP exclude each other",
			 p->ifname);
		problem(p, fix, "an XDP program is attached to %s", p->ifname);
	}
	if (p->xsk_queues > 0)
		problem(p, "pick queues without AF_XDP sockets, or close them",
			"%d queue%s of %s are used by AF_XDP", p->xsk_queues,
			p->xsk_queues == 1 ? "" : "s", p->ifname);
	if (p->dmabuf_queues > 0 || p->io_uring_queues > 0)
		problem(p, "pick other queues, or stop the process that bound them (its netlink socket or io_uring owns the binding)",
			"%d queue%s of %s already have a memory provider (dma-buf %d, io_uring %d)",
			taken, taken == 1 ? "" : "s", p->ifname,
			p->dmabuf_queues, p->io_uring_queues);
}

static void probe_host(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;

	if (!p->cap_net_admin && p->broker_state == 1 && p->broker_allowed == 0)
		problem(p, "ask an administrator for a rule in the devmemtcp-broker policy (devmemtcp-broker.conf(5)), or run with CAP_NET_ADMIN",
			"this process lacks CAP_NET_ADMIN and devmemtcp-broker refuses it %s: %s",
			p->ifname, p->broker_msg);
	else if (!p->cap_net_admin && p->broker_state == -EPROTONOSUPPORT)
		problem(p, "install devmemtcp-broker and libdevmemtcp of one release, and restart the broker after upgrading (systemctl restart devmemtcp-broker), or run with CAP_NET_ADMIN",
			"this process lacks CAP_NET_ADMIN and devmemtcp-broker speaks another protocol: %s",
			p->broker_msg);
	else if (!p->cap_net_admin && p->broker_state < 0)
		problem(p, "start devmemtcp-broker (systemctl start devmemtcp-broker.socket), or run with CAP_NET_ADMIN",
			"this process lacks CAP_NET_ADMIN and devmemtcp-broker does not answer: %s",
			p->broker_msg);
	else if (!p->cap_net_admin && p->broker_state != 1)
		problem(p, "run as root, or give the program CAP_NET_ADMIN (setcap cap_net_admin+ep PROGRAM), or install devmemtcp-broker(8)",
			"this process lacks CAP_NET_ADMIN, which bind-rx and every ethtool change need");
	if (p->udmabuf_limit_mb < 0)
		problem(p, "modprobe udmabuf (only needed for host-memory buffers and --try-bind)",
			"the udmabuf module is not loaded");
	if (p->optmem_max >= 0 && p->optmem_max < 65536)
		problem(p, "sysctl -w net.core.optmem_max=131072",
			"net.core.optmem_max is %lld: MSG_ZEROCOPY sends (devmem TX) fail with ENOBUFS when it is small",
			(long long)p->optmem_max);
}

/* Would this process set up through devmemtcp-broker, and what may it
 * do there on the interface (with CAP_NET_ADMIN: the privileged
 * operations' facts). */
static void probe_privilege(struct devmemtcp_ctx *ctx, struct probe *pr)
{
	ctx->priv->probe(&pr->r, &pr->nomem);
}

/* The DRM nodes, for the DRM buffer provider: reported, never a problem
 * (devmem needs no DRM device). */
static void probe_drm(struct probe *pr)
{
	pr->r.drm_nodes = dmt_drm_probe(pr->r.drm, DEVMEMTCP_PROBE_MAX_DRM);
}

/* io_uring zero-copy receive, the other backend: what the kernel offers.
 * Informational: it is no problem for devmem. */
static void probe_zcrx(struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	struct dmt_zcrx_support z;

	if (dmt_zcrx_support(&z) == -ENOMEM) {
		pr->nomem = true;
		return;
	}
	p->zcrx = z.zcrx;
	p->zcrx_dmabuf = z.dmabuf;
	snprintf(p->zcrx_msg, sizeof(p->zcrx_msg), "%s", z.msg);
}

/* The owners, from their files (read without the lock: each file is
 * replaced atomically). */
static void probe_owner(struct probe *pr, const struct dmt_owner *o)
{
	struct devmemtcp_probe *p = &pr->r;
	struct devmemtcp_probe_owner *po = &p->owners[p->nowners++];
	int32_t held = -1;

	po->pid = o->pid;
	snprintf(po->comm, sizeof(po->comm), "%.15s", o->comm);
	po->alive = dmt_owner_alive(o);
	po->nqueues = o->nqueues;
	for (uint32_t k = 0; k < o->nqueues && k < ARRAY_SIZE(po->queues); k++) {
		po->queues[k] = o->queues[k];
		if (o->queues[k] < ARRAY_SIZE(pr->binding) && pr->binding[o->queues[k]])
			po->binding = pr->binding[o->queues[k]];
	}
	for (uint32_t k = 0; k < o->nqueues && held < 0; k++)
		if (o->queues[k] < ARRAY_SIZE(pr->busy) && pr->busy[o->queues[k]])
			held = (int32_t)o->queues[k];
	po->nflows = o->nrules;
	po->rss_context = o->ctx == DMT_CTX_PLACED ? o->ctx_id : 0;
	if (!po->alive && held >= 0) {
		char fix[320];

		/* its binding lives on elsewhere: the reconcile waits */
		snprintf(fix, sizeof(fix),
			 "its rules, RSS context and queues stay until the binding is gone: stop the process that holds it "
			 "(a child or a thread of pid %d, or one it was passed to); then the next open or close on %s undoes the rest",
			 po->pid, p->ifname);
		problem(p, fix, "pid %d (%s) ended without closing its devmem setup of %s; RX queue %d still carries its binding",
			po->pid, po->comm, p->ifname, held);
	} else if (!po->alive) {
		char fix[320];

		snprintf(fix, sizeof(fix),
			 "nothing: the next open or close on %s undoes it (or now: devmemtcp restore %s)",
			 p->ifname, p->ifname);
		problem(p, fix, "pid %d (%s) ended without closing its devmem setup of %s",
			po->pid, po->comm, p->ifname);
	}
}

static void probe_owners(struct probe *pr, const char *run_dir)
{
	struct devmemtcp_probe *p = &pr->r;
	char prefix[IF_NAMESIZE + 8], **names = NULL;
	struct dmt_err why = { 0 };
	struct dmt_rundir rd;
	size_t n = 0;

	p->nowners = -1;
	if (dmt_rundir_open(&rd, dmt_run_dir(run_dir), false, &why) < 0) {
		if (why.code == -ENOENT)
			p->nowners = 0;	/* no directory: nobody */
		return;
	}
	snprintf(prefix, sizeof(prefix), "%s.owner.", p->ifname);
	if (dmt_rundir_list(&rd, prefix, &names, &n, &why) == 0)
		p->nowners = 0;
	for (size_t i = 0; i < n; i++) {
		struct dmt_owner o;
		char *text;
		size_t len;

		if (p->nowners < DEVMEMTCP_PROBE_MAX_OWNERS &&
		    dmt_file_read(&rd, names[i], &text, &len, &why) == 0) {
			if (dmt_owner_parse(text, len, &o, NULL) == 0) {
				probe_owner(pr, &o);
				dmt_owner_free(&o);
			}
			free(text);
		}
		free(names[i]);
	}
	free(names);
	dmt_rundir_close(&rd);
}

/* Which uses of a queue queue-get reports on this kernel. */
static void probe_queue_use(struct probe *pr)
{
	pr->r.queue_use_reported = pr->kv >= 0x061100;
}

/* DEVMEMTCP_PROBE_TRY_BIND: the one sure test, unless the link is down. */
static void probe_try_bind(struct devmemtcp_ctx *ctx, struct probe *pr)
{
	struct devmemtcp_probe *p = &pr->r;
	bool ready = p->tcp_data_split == DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED &&
		     p->hds_thresh <= 0;

	if (dmt_eth_is_up(&pr->e) == 0) {
		p->try_bind = -ENETDOWN;
		snprintf(p->try_bind_msg, sizeof(p->try_bind_msg),
			 "not tried: %s is down", p->ifname);
		return;
	}
	try_bind(ctx, p, pr->busy);
	if (p->try_bind < 0 && p->try_bind != -ENETDOWN && p->try_bind != -EBUSY)
		problem(p, ready ? "see the message: it names the missing piece"
				 : "turn header split on and hds-thresh to 0 first (the bind needs both), then try again",
			"a test bind-rx failed: %s", p->try_bind_msg);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_probe(struct devmemtcp_ctx *ctx,
					 const char *ifname,
					 const struct devmemtcp_probe_opts *opts,
					 struct devmemtcp_probe *report)
{
	DMT_KEEP_ERRNO;
	struct probe pr;
	int err;

	if (!ctx)
		return -EINVAL;
	err = probe_args_check(ctx, opts, report);
	if (err)
		return err;
	err = probe_open(ctx, &pr, ifname);
	if (err)
		return err;
	probe_kernel(&pr);
	probe_driver(&pr);
	probe_queues(&pr);
	probe_link(&pr);
	probe_rings(&pr);
	probe_ntuple(&pr);
	probe_rss(&pr);
	probe_exclusive(&pr);
	probe_privilege(ctx, &pr);
	probe_host(&pr);
	probe_drm(&pr);
	probe_zcrx(&pr);
	probe_queue_use(&pr);
	probe_owners(&pr, DMT_OPT(opts, devmemtcp_probe_opts, run_dir, NULL));
	if (DMT_OPT(opts, devmemtcp_probe_opts, flags, 0) & DEVMEMTCP_PROBE_TRY_BIND)
		probe_try_bind(ctx, &pr);
	probe_close(&pr);
	if (pr.nomem)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_nic_probe");
	dmt_copy_out(report, &pr.r, sizeof(pr.r));
	return (int)pr.r.nproblems;
}
