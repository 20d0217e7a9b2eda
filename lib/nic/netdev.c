// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The genl family "netdev": queue-get, qstats-get, bind-rx, bind-tx. */
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "buf/buf.h"
#include "core/fork.h"
#include "core/privops.h"
#include "netdev.h"
#include "core/uapi.h"

/* Resolve "netdev", or record on err why not. */
static int netdev_family(struct dmt_err *err, struct dmt_nl *nl, uint16_t *id)
{
	int ret = dmt_nl_netdev_family(nl, id);

	if (ret == -ENOENT)
		return dmt_err_set(err, -EOPNOTSUPP,
				   "the kernel has no \"netdev\" generic netlink family: devmem TCP needs Linux 6.12 or newer (bind-tx 6.16)");
	if (ret)
		return dmt_err_set(err, ret,
				   "resolving the \"netdev\" netlink family failed: %s",
				   strerror(-ret));
	return 0;
}

/* ---- queue-get ---------------------------------------------------------- */

static int queue_attr_cb(const struct nlattr *attr, void *data)
{
	struct devmemtcp_queue *q = data;
	uint16_t type = mnl_attr_get_type(attr);

	switch (type) {
	case DMT_NETDEV_A_QUEUE_ID:
	case DMT_NETDEV_A_QUEUE_IFINDEX:
	case DMT_NETDEV_A_QUEUE_TYPE:
	case DMT_NETDEV_A_QUEUE_NAPI_ID:
	case DMT_NETDEV_A_QUEUE_DMABUF:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
			return MNL_CB_ERROR;
		break;
	}
	switch (type) {
	case DMT_NETDEV_A_QUEUE_ID:
		q->id = mnl_attr_get_u32(attr);
		break;
	case DMT_NETDEV_A_QUEUE_IFINDEX:
		q->ifindex = mnl_attr_get_u32(attr);
		break;
	case DMT_NETDEV_A_QUEUE_TYPE:
		q->type = mnl_attr_get_u32(attr);
		break;
	case DMT_NETDEV_A_QUEUE_NAPI_ID:
		q->napi_id = mnl_attr_get_u32(attr);
		break;
	case DMT_NETDEV_A_QUEUE_DMABUF:
		q->dmabuf_id = mnl_attr_get_u32(attr);
		break;
	case DMT_NETDEV_A_QUEUE_IO_URING:
		q->io_uring = 1;
		break;
	case DMT_NETDEV_A_QUEUE_XSK:
		q->xsk = 1;
		break;
	}
	return MNL_CB_OK;
}

int dmt_queue_parse(const struct nlmsghdr *nlh, struct devmemtcp_queue *q)
{
	memset(q, 0, sizeof(*q));
	return dmt_nl_genl_parse(nlh, queue_attr_cb, q);
}

struct queue_dump {
	struct devmemtcp_queue *queues;
	size_t max;
	size_t n;
};

static int queue_cb(const struct nlmsghdr *nlh, void *data)
{
	struct queue_dump *d = data;
	struct devmemtcp_queue q;
	int ret = dmt_queue_parse(nlh, &q);

	if (ret)
		return ret;
	if (d->n < d->max)
		d->queues[d->n] = q;
	d->n++;
	return MNL_CB_OK;
}

int dmt_queue_list(struct dmt_nl *nl, int ifindex,
		   struct devmemtcp_queue *queues, size_t max)
{
	char buf[256];
	struct queue_dump d = { queues, max, 0 };
	struct nlmsghdr *nlh;
	uint16_t family;
	int ret;

	ret = dmt_nl_netdev_family(nl, &family);
	if (ret)
		return ret;
	nlh = dmt_nl_genl_msg(buf, family, DMT_NETDEV_CMD_QUEUE_GET,
			      DMT_NETDEV_FAMILY_VERSION, NLM_F_DUMP);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_IFINDEX, (uint32_t)ifindex);
	ret = dmt_nl_talk(nl, nlh, queue_cb, &d);
	if (ret)
		return ret;
	return (int)d.n;
}

static int queue_list_locked(struct devmemtcp_ctx *ctx, struct dmt_nl *nl,
			     int ifindex, struct devmemtcp_queue *queues,
			     size_t max)
{
	char name[DMT_IFNAME_MAX];
	uint16_t family;
	int ret;

	ret = netdev_family(&ctx->err, nl, &family);
	if (ret)
		return dmt_err_log(ctx, &ctx->err);
	ret = dmt_queue_list(nl, ifindex, queues, max);
	if (ret == -ENODEV)
		return dmt_err(ctx, &ctx->err, ret,
			       "no network interface has index %d: check the name with 'ip link'",
			       ifindex);
	if (ret < 0)
		return dmt_err(ctx, &ctx->err, ret,
			       "queue-get on %s failed: %s%s%s",
			       dmt_ifname(ifindex, name), strerror(-ret),
			       nl->extack[0] ? ": " : "", nl->extack);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_queue_list(struct devmemtcp_ctx *ctx,
					  int ifindex,
					  struct devmemtcp_queue *queues,
					  size_t max)
{
	DMT_KEEP_ERRNO;
	struct dmt_nl *nl;
	int ret = 0;

	if (!ctx)
		return -EINVAL;
	if (ifindex <= 0 || (max && !queues))
		return dmt_ctx_err(ctx, -EINVAL,
				   "devmemtcp_queue_list: ifindex %d and %zu entries at %p: pass an ifindex from if_nametoindex() and an array for max entries",
				   ifindex, max, (void *)queues);
	nl = dmt_ctx_nl(ctx, &ret);
	if (!nl)
		return ret;
	ret = queue_list_locked(ctx, nl, ifindex, queues, max);
	dmt_ctx_nl_put(ctx);
	return ret;
}

/* ---- qstats-get --------------------------------------------------------- */

struct qstats_req {
	int type;
	int queue;
	bool found;
	struct devmemtcp_qstats *out;
};

struct qstats_row {
	int64_t type;
	int64_t id;
	uint64_t val[DMT_NETDEV_A_QSTATS_RX_HW_DROPS + 1];
	bool have[DMT_NETDEV_A_QSTATS_RX_HW_DROPS + 1];
};

static int qstats_attr_cb(const struct nlattr *attr, void *data)
{
	struct qstats_row *row = data;
	uint16_t type = mnl_attr_get_type(attr);
	uint16_t len = mnl_attr_get_payload_len(attr);
	uint64_t v;

	/* NLA_UINT: 4 or 8 bytes on the wire */
	if (len == 4)
		v = mnl_attr_get_u32(attr);
	else if (len == 8)
		v = mnl_attr_get_u64(attr);
	else
		return MNL_CB_OK;
	if (type == DMT_NETDEV_A_QSTATS_QUEUE_TYPE)
		row->type = (int64_t)v;
	else if (type == DMT_NETDEV_A_QSTATS_QUEUE_ID)
		row->id = (int64_t)v;
	else if (type < ARRAY_SIZE(row->val)) {
		row->val[type] = v;
		row->have[type] = true;
	}
	return MNL_CB_OK;
}

static int qstats_cb(const struct nlmsghdr *nlh, void *data)
{
	struct qstats_req *req = data;
	struct qstats_row row = { .type = -1, .id = -1 };
	struct devmemtcp_qstats *o = req->out;

	mnl_attr_parse(nlh, sizeof(struct genlmsghdr), qstats_attr_cb, &row);
	if (req->queue >= 0 && (row.type != req->type || row.id != req->queue))
		return MNL_CB_OK;
#define QS(field, attr) \
	o->field = row.have[attr] ? row.val[attr] : UINT64_MAX
	QS(rx_packets, DMT_NETDEV_A_QSTATS_RX_PACKETS);
	QS(rx_bytes, DMT_NETDEV_A_QSTATS_RX_BYTES);
	QS(rx_alloc_fail, DMT_NETDEV_A_QSTATS_RX_ALLOC_FAIL);
	QS(rx_hw_drops, DMT_NETDEV_A_QSTATS_RX_HW_DROPS);
	QS(tx_packets, DMT_NETDEV_A_QSTATS_TX_PACKETS);
	QS(tx_bytes, DMT_NETDEV_A_QSTATS_TX_BYTES);
#undef QS
	req->found = true;
	return MNL_CB_OK;
}

static int qstats_locked(struct devmemtcp_ctx *ctx, struct dmt_nl *nl,
			 int ifindex, struct qstats_req *req)
{
	char buf[256], name[DMT_IFNAME_MAX];
	struct nlmsghdr *nlh;
	uint16_t family;
	int ret;

	ret = netdev_family(&ctx->err, nl, &family);
	if (ret)
		return dmt_err_log(ctx, &ctx->err);
	nlh = dmt_nl_genl_msg(buf, family, DMT_NETDEV_CMD_QSTATS_GET,
			      DMT_NETDEV_FAMILY_VERSION, NLM_F_DUMP);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QSTATS_IFINDEX, (uint32_t)ifindex);
	if (req->queue >= 0)
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_QSTATS_SCOPE,
				 DMT_NETDEV_QSTATS_SCOPE_QUEUE);
	ret = dmt_nl_talk(nl, nlh, qstats_cb, req);
	if (ret == -EOPNOTSUPP)
		return dmt_err(ctx, &ctx->err, ret,
			       "the driver of %s reports no queue statistics (no netdev_stat_ops)",
			       dmt_ifname(ifindex, name));
	if (ret)
		return dmt_err(ctx, &ctx->err, ret,
			       "qstats-get on %s failed: %s%s%s",
			       dmt_ifname(ifindex, name), strerror(-ret),
			       nl->extack[0] ? ": " : "", nl->extack);
	if (!req->found)
		return dmt_err(ctx, &ctx->err, -ENOENT,
			       "%s reports no statistics for %s queue %d: check the queue index with devmemtcp_queue_list()",
			       dmt_ifname(ifindex, name),
			       req->type == DEVMEMTCP_QUEUE_RX ? "RX" : "TX",
			       req->queue);
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_qstats_get(struct devmemtcp_ctx *ctx,
					  int ifindex, int type, int queue,
					  struct devmemtcp_qstats *stats)
{
	DMT_KEEP_ERRNO;
	struct qstats_req req = { type, queue, false, stats };
	struct dmt_nl *nl;
	size_t sz;
	int ret = 0;

	if (!ctx)
		return -EINVAL;
	if (!stats || stats->sz < sizeof(size_t))
		return dmt_ctx_err(ctx, -EINVAL,
				   "devmemtcp_qstats_get: stats is NULL or its sz is not set: set .sz = sizeof(struct devmemtcp_qstats)");
	if (ifindex <= 0 || (type != DEVMEMTCP_QUEUE_RX &&
			     type != DEVMEMTCP_QUEUE_TX))
		return dmt_ctx_err(ctx, -EINVAL,
				   "devmemtcp_qstats_get: ifindex %d, type %d: pass an ifindex and DEVMEMTCP_QUEUE_RX or _TX",
				   ifindex, type);
	sz = stats->sz;
	memset(stats, 0, sz < sizeof(*stats) ? sz : sizeof(*stats));
	stats->sz = sz;
	nl = dmt_ctx_nl(ctx, &ret);
	if (!nl)
		return ret;
	ret = qstats_locked(ctx, nl, ifindex, &req);
	dmt_ctx_nl_put(ctx);
	return ret;
}

/* ---- bind-rx / bind-tx -------------------------------------------------- */

struct nlmsghdr *dmt_bind_msg(void *buf, uint16_t family, bool tx,
			      int ifindex, const uint32_t *queues,
			      size_t nqueues, int fd, uint32_t rx_page_size)
{
	struct nlmsghdr *nlh;
	struct nlattr *nest;

	nlh = dmt_nl_genl_msg(buf, family,
			      tx ? DMT_NETDEV_CMD_BIND_TX
				 : DMT_NETDEV_CMD_BIND_RX,
			      DMT_NETDEV_FAMILY_VERSION, 0);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_IFINDEX, (uint32_t)ifindex);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_FD, (uint32_t)fd);
	for (size_t i = 0; i < nqueues; i++) {
		nest = mnl_attr_nest_start(nlh, DMT_NETDEV_A_DMABUF_QUEUES);
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_ID, queues[i]);
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_TYPE,
				 DMT_NETDEV_QUEUE_TYPE_RX);
		mnl_attr_nest_end(nlh, nest);
	}
	if (rx_page_size)
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE,
				 rx_page_size);
	return nlh;
}

static int bind_reply_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nlattr *attr;

	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr)) {
		if (mnl_attr_get_type(attr) == DMT_NETDEV_A_DMABUF_ID &&
		    mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
			*(uint32_t *)data = mnl_attr_get_u32(attr);
	}
	return MNL_CB_OK;
}

/*
 * The extack texts bind-rx and bind-tx fail with (net/core/netdev-genl.c,
 * devmem.c, netdev_rx_queue.c; matched as prefixes because some carry
 * numbers after them) and the fix for each.
 */
static const struct {
	const char *text;	/* prefix of the kernel's message */
	const char *fix;
} extack_fixes[] = {
	{ "tcp-data-split is disabled",
	  "enable header split on %s: ethtool -G %s tcp-data-split on (or use devmemtcp_nic_open())" },
	{ "hds-thresh is not zero",
	  "set the header-split threshold of %s to 0: ethtool -G %s hds-thresh 0" },
	{ "rx queue index out of range",
	  "a queue index is not below the RX queue count of %s: check 'ethtool -l %s'" },
	{ "designated queue already memory provider bound",
	  "a queue of %s already has a dma-buf or io_uring bound: close that binding first or pick other queues (devmemtcp probe %s)" },
	{ "designated queue already in use by AF_XDP",
	  "an AF_XDP socket uses a queue of %s: close it or pick other queues (devmemtcp probe %s)" },
	{ "unable to bind dmabuf to device with XDP program attached",
	  "detach the XDP program of %s first: ip link set %s xdp off" },
	{ "unable to custom memory provider to device with XDP program attached",
	  "detach the XDP program of %s first: ip link set %s xdp off" },
	{ "Failed to bind dmabuf to device",
	  "the dma-buf exporter refused to attach to the DMA device of %s (%s): peer-to-peer DMA between this memory and the NIC is not possible; check IOMMU/ACS settings and the exporter's P2P support" },
	{ "Failed to map dmabuf attachment",
	  "the dma-buf could not be mapped for the DMA device of %s (%s): check IOMMU/P2P settings and that the buffer is resident" },
	{ "Device doesn't support DMA",
	  "%s has no DMA device (%s is virtual): bind on the physical NIC" },
	{ "DMA device mismatch",
	  "the queues of %s belong to different DMA devices (multi-PF NIC?): bind each PF's queues separately (%s)" },
	{ "dma-buf SG length must be PAGE_SIZE aligned",
	  "the dma-buf's scatter list is not page aligned for %s (%s): allocate page-aligned memory" },
	{ "device does not support: rx_page_size",
	  "the driver of %s cannot use rx-page-size (%s): leave rx_page_size 0" },
	{ "rx-page-size must be a power of 2",
	  "rx_page_size must be a power of two of at least the page size (%s %s)" },
	{ "dmabuf sg entry",
	  "the dma-buf's segments are not aligned to rx_page_size for %s (%s): use hugepage-backed memory or a smaller rx_page_size" },
	{ "rx queue leased to a virtual netdev",
	  "a queue of %s is leased to a virtual device (%s): bind through that device or release the lease" },
	{ "rx queue belongs to a virtual netdev",
	  "%s is a virtual device (%s): bind on the physical device that leased the queue" },
	{ "Driver does not support netmem TX",
	  "the driver of %s cannot send from device memory (%s): use a NIC whose driver supports devmem TX (gve, fbnic, bnxt, mlx5)" },
	{ "No DMA-capable device found for netmem TX",
	  "%s has no physical queue for netmem TX (%s): lease a queue of the physical NIC first" },
};

/* The fix for a known extack text into fix; false when the text is unknown. */
static bool extack_fix(const char *extack, const char *name, char *fix,
		       size_t len)
{
	if (!extack || !extack[0])
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(extack_fixes); i++) {
		if (strncmp(extack, extack_fixes[i].text,
			    strlen(extack_fixes[i].text)))
			continue;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		/* every fix text takes the interface name twice */
		snprintf(fix, len, extack_fixes[i].fix, name, name);
#pragma GCC diagnostic pop
		return true;
	}
	return false;
}

int dmt_bind_explain(struct dmt_err *err, bool tx, int ifindex, int code,
		     const char *extack)
{
	const char *op = tx ? "bind-tx" : "bind-rx";
	const char *text = extack ? extack : "", *sep = text[0] ? ": " : "";
	char name[DMT_IFNAME_MAX], fix[512];
	struct utsname u;

	dmt_ifname(ifindex, name);
	/* the one attribute of ours a kernel may not know */
	if (!tx && code == -EINVAL && !strcmp(text, "Unknown attribute type")) {
		if (uname(&u))
			snprintf(u.release, sizeof(u.release), "?");
		return dmt_err_set(err, -EOPNOTSUPP,
				   "%s on %s failed: this kernel (%s) has no rx-page-size for bind-rx (NETDEV_A_DMABUF_RX_PAGE_SIZE): leave rx_page_size 0 (kernel: \"%s\")",
				   op, name, u.release, text);
	}
	if (extack_fix(extack, name, fix, sizeof(fix)))
		return dmt_err_set(err, code, "%s on %s failed: %s (kernel: \"%s\")",
				   op, name, fix, extack);
	switch (code) {
	case -EPERM:
		dmt_err_set(err, code,
			    "%s on %s failed: permission denied: %s needs CAP_NET_ADMIN; run as root or grant it (setcap cap_net_admin+ep PROGRAM)",
			    op, name, op);
		break;
	case -ENODEV:
		dmt_err_set(err, code,
			    "%s failed: no network interface has index %d (or it went away): check the name with 'ip link'",
			    op, ifindex);
		break;
	case -EOPNOTSUPP:
		dmt_err_set(err, code,
			    "%s on %s failed: the driver of %s does not support devmem TCP%s (it lacks the queue management API / %s), or the kernel predates %s (Linux %s)",
			    op, name, name, tx ? " TX" : "",
			    tx ? "netmem TX" : "unreadable netmem", op,
			    tx ? "6.16" : "6.12");
		break;
	case -ENODATA:
		/* the kernel checks header split itself from 6.14 on */
		dmt_err_set(err, code,
			    "%s on %s failed: the driver restarted the queue but its page pool did not take the dma-buf: turn header split on (ethtool -G %s tcp-data-split on; Linux 6.12 and 6.13 bind without checking it), or the driver lacks unreadable-netmem support",
			    op, name, name);
		break;
	case -E2BIG:
		dmt_err_set(err, code,
			    "%s on %s failed: the driver's page pool page size does not match the binding's niov size: leave rx_page_size 0 or pick the driver's buffer size",
			    op, name);
		break;
	case -EBADF:
		dmt_err_set(err, code,
			    "%s on %s failed: the dma-buf fd is not valid: pass the fd of a live dma-buf (devmemtcp_buf_fd())",
			    op, name);
		break;
	case -ERANGE:
	case -EINVAL:
		dmt_err_set(err, code,
			    "%s on %s failed: %s%s%s: check that every queue index is below the RX queue count ('ethtool -l %s') and that header split is on with hds-thresh 0 ('ethtool -g %s')",
			    op, name, strerror(-code), sep, text, name, name);
		break;
	case -EEXIST:
	case -EBUSY:
		dmt_err_set(err, code,
			    "%s on %s failed: %s%s%s: a queue is already bound to a dma-buf, io_uring or AF_XDP, or XDP is attached (devmemtcp probe %s)",
			    op, name, strerror(-code), sep, text, name);
		break;
	default:
		dmt_err_set(err, code, "%s on %s failed: %s%s%s", op, name,
			    strerror(-code), sep, text);
	}
	return err->code;
}

static int bind_args_check(struct dmt_err *err, const struct dmt_bind_call *a)
{
	if (a->ifindex <= 0)
		return dmt_err_set(err, -ENODEV,
				   "%s: ifindex %d is not an interface: get it with if_nametoindex()",
				   a->op, a->ifindex);
	if (!a->buf)
		return dmt_err_set(err, -EINVAL,
				   "%s: buf is NULL: create one with devmemtcp_buf_new()",
				   a->op);
	if (!a->tx && (!a->queues || !a->nqueues))
		return dmt_err_set(err, -EINVAL,
				   "%s: no queues given: pass at least one RX queue index",
				   a->op);
	if (a->nqueues > DMT_MAX_QUEUES)
		return dmt_err_set(err, -E2BIG,
				   "%s: %zu queues is more than any NIC has",
				   a->op, a->nqueues);
	for (size_t i = 0; !a->tx && i < a->nqueues; i++)
		for (size_t j = 0; j < i; j++)
			if (a->queues[i] == a->queues[j])
				return dmt_err_set(err, -EINVAL,
						   "%s: queue %u is listed twice: list each queue once",
						   a->op, a->queues[i]);
	if (a->page_size & (a->page_size - 1))
		return dmt_err_set(err, -EINVAL,
				   "%s: rx_page_size %u is not a power of two: use 0 (page size) or a power of two such as 65536",
				   a->op, a->page_size);
	if (!a->tx)
		return dmt_buf_check_pages(a->buf,
					   a->page_size ? a->page_size
							: (uint64_t)sysconf(_SC_PAGESIZE),
					   a->page_size, a->op, err);
	return 0;
}

/* Every queue of the binding shows its id in queue-get. */
static int verify_bound(struct dmt_err *err, struct devmemtcp_binding *b)
{
	struct devmemtcp_queue qs[256];
	char name[DMT_IFNAME_MAX];
	int n;

	n = dmt_queue_list(b->nl, b->ifindex, qs, ARRAY_SIZE(qs));
	if (n < 0)
		return dmt_err_set(err, n,
				   "bind-rx on %s succeeded but queue-get to verify it failed: %s",
				   dmt_ifname(b->ifindex, name), strerror(-n));
	/* test builds: a driver that did not install the binding */
	if (dmt_hook_env("DEVMEMTCP_TEST_BIND_UNSEEN"))
		n = 0;
	for (size_t i = 0; i < b->nqueues; i++) {
		bool seen = false;

		for (int j = 0; j < n && j < (int)ARRAY_SIZE(qs); j++) {
			if (qs[j].type != DMT_NETDEV_QUEUE_TYPE_RX ||
			    qs[j].id != b->queues[i])
				continue;
			seen = true;
			if (qs[j].dmabuf_id != b->id)
				return dmt_err_set(err, -EIO,
						   "bind-rx on %s returned binding %u but queue-get shows RX queue %u with dma-buf binding %u: the driver did not install the memory provider",
						   dmt_ifname(b->ifindex, name),
						   b->id, b->queues[i],
						   qs[j].dmabuf_id);
		}
		if (!seen)
			return dmt_err_set(err, -EIO,
					   "bind-rx on %s: queue-get does not list RX queue %u after binding it",
					   dmt_ifname(b->ifindex, name),
					   b->queues[i]);
	}
	return 0;
}

static struct devmemtcp_binding *binding_new(struct devmemtcp_ctx *ctx,
					     const struct dmt_bind_call *a)
{
	struct devmemtcp_binding *b = dmt_calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->ctx = ctx;
	b->fork_gen = dmt_fork_gen();
	b->tx = a->tx;
	b->ifindex = a->ifindex;
	b->buf = dmt_buf_get(a->buf);	/* the binding keeps it alive */
	if (a->nqueues) {
		b->queues = dmt_malloc(a->nqueues * sizeof(*b->queues));
		if (!b->queues) {
			dmt_buf_put(b->buf);
			free(b);
			return NULL;
		}
		memcpy(b->queues, a->queues, a->nqueues * sizeof(*b->queues));
		b->nqueues = a->nqueues;
	}
	return b;
}

/* Send the bind over the binding's socket; its reply gives b->id. */
static int bind_request(struct dmt_err *err, struct devmemtcp_binding *b,
			struct dmt_bind_call *a)
{
	struct nlmsghdr *nlh;
	uint16_t family;
	char *msg;
	int ret;

	ret = netdev_family(err, b->nl, &family);
	if (ret)
		return ret;
	msg = dmt_calloc(1, MNL_SOCKET_BUFFER_SIZE + a->nqueues * 32);
	if (!msg)
		return dmt_err_set(err, -ENOMEM, "%s: out of memory", a->op);
	nlh = dmt_bind_msg(msg, family, a->tx, a->ifindex, a->queues,
			   a->nqueues, devmemtcp_buf_fd(a->buf), a->page_size);
	a->sent = true;
	ret = dmt_nl_talk(b->nl, nlh, bind_reply_cb, &b->id);
	free(msg);
	if (ret)
		return dmt_bind_explain(err, a->tx, a->ifindex, ret,
					b->nl->extack);
	if (!b->id)
		return dmt_err_set(err, -EPROTO,
				   "%s: the kernel acknowledged the bind but sent no binding id",
				   a->op);
	return 0;
}

int dmt_binding_adopt(struct devmemtcp_ctx *ctx, struct dmt_err *err, bool tx,
		      int ifindex, const uint32_t *queues, size_t nqueues,
		      struct devmemtcp_buf *buf, int fd, uint32_t id,
		      struct devmemtcp_binding **bindingp)
{
	struct dmt_bind_call a = { .tx = tx, .ifindex = ifindex, .queues = queues,
				   .nqueues = nqueues, .buf = buf };
	struct devmemtcp_binding *b = binding_new(ctx, &a);
	int ret;

	if (!b) {
		close(fd);
		return dmt_err_set(err, -ENOMEM, "the binding of devmemtcp-broker: out of memory");
	}
	/* The broker's socket is the binding's own: it holds the binding. */
	ret = dmt_nl_adopt(&b->nl, fd);
	if (ret) {
		close(fd);
		devmemtcp_binding_close(b);
		return dmt_err_set(err, ret,
				   "the netlink socket devmemtcp-broker sent for binding %u: %s",
				   id, dmt_errno_name(ret));
	}
	b->id = id;
	*bindingp = b;
	return 0;
}

/* A requested RX queue past the count queue-get gives: refused naming the
 * count.  A count that cannot be had (no queue-get, too many queues to
 * list here) leaves the check to the kernel. */
static int bind_queues_in_range(struct dmt_err *err, struct dmt_nl *nl,
				const struct dmt_bind_call *a)
{
	struct devmemtcp_queue qs[256];
	char name[DMT_IFNAME_MAX];
	uint32_t nrx = 0;
	int n = dmt_queue_list(nl, a->ifindex, qs, ARRAY_SIZE(qs));

	if (n <= 0 || n > (int)ARRAY_SIZE(qs))
		return 0;
	for (int j = 0; j < n; j++)
		nrx += qs[j].type == DMT_NETDEV_QUEUE_TYPE_RX;
	for (size_t i = 0; nrx && i < a->nqueues; i++)
		if (a->queues[i] >= nrx)
			return dmt_err_set(err, -ERANGE,
					   "%s: RX queue %u is out of range: %s has %u RX queues (0-%u); pick a lower index or add channels with ethtool -L",
					   a->op, a->queues[i], dmt_ifname(a->ifindex, name),
					   nrx, nrx - 1);
	return 0;
}

int dmt_bind_local(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		   struct dmt_bind_call *a, struct devmemtcp_binding **bindingp)
{
	struct devmemtcp_binding *b = binding_new(ctx, a);
	int ret;

	if (!b)
		return dmt_err_set(err, -ENOMEM, "%s: out of memory", a->op);
	/* A socket of the binding's own: closing it unbinds. */
	ret = dmt_nl_open(&b->nl, NETLINK_GENERIC);
	if (ret) {
		dmt_err_set(err, ret,
			    "%s: cannot open a generic netlink socket: %s",
			    a->op, strerror(-ret));
		goto err_close;
	}
	if (!a->tx)
		ret = bind_queues_in_range(err, b->nl, a);
	if (!ret)
		ret = bind_request(err, b, a);
	if (!ret && a->verify)
		ret = verify_bound(err, b);
	if (ret)
		goto err_close;
	*bindingp = b;
	return 0;

err_close:
	devmemtcp_binding_close(b);	/* unbinds whatever was bound */
	return ret;
}

/*
 * bind-rx or bind-tx of a->buf over a netlink socket that the returned
 * binding owns, by the context's privileged operations (the local ones,
 * or devmemtcp-broker's, whose socket it hands over).  On failure the
 * message is recorded on err, not logged.
 */
static int bind_dmabuf(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		       struct dmt_bind_call *a,
		       struct devmemtcp_binding **bindingp)
{
	int ret;

	if (!bindingp)
		return dmt_err_set(err, -EINVAL, "%s: binding pointer is NULL",
				   a->op);
	*bindingp = NULL;
	ret = bind_args_check(err, a);
	if (ret)
		return ret;
	return ctx->priv->bind(ctx, err, a, bindingp);
}

/*
 * Hand a failed bind's message (if it has one) to ctx and log it once,
 * under the lock that queries on other threads hold while they write
 * their messages there.
 */
static int bind_failed(struct devmemtcp_ctx *ctx, const struct dmt_err *err,
		       int ret)
{
	if (!err->code)
		return ret;
	pthread_mutex_lock(&ctx->lock);
	ctx->err = *err;
	dmt_err_log(ctx, err);
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_bind_rx(struct devmemtcp_ctx *ctx, int ifindex,
				       const uint32_t *queues, size_t nqueues,
				       struct devmemtcp_buf *buf,
				       const struct devmemtcp_bind_opts *opts,
				       struct devmemtcp_binding **binding)
{
	DMT_KEEP_ERRNO;
	struct dmt_bind_call a = { .op = "devmemtcp_bind_rx", .ifindex = ifindex,
				   .queues = queues, .nqueues = nqueues, .buf = buf };
	struct dmt_err err = { 0 };
	int ret;

	if (!ctx)
		return -EINVAL;
	if (binding) {	/* without one, bind_dmabuf says so first */
		*binding = NULL;
		ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_bind_opts);
		if (ret)
			return ret;
	}
	a.page_size = DMT_OPT(opts, devmemtcp_bind_opts, rx_page_size, 0);
	a.verify = !DMT_OPT(opts, devmemtcp_bind_opts, no_verify, false);
	a.asked = DMT_OPT(opts, devmemtcp_bind_opts, broker, false);
	ret = bind_dmabuf(ctx, &err, &a, binding);
	return ret ? bind_failed(ctx, &err, ret) : 0;
}

/* 1: the kernel's netdev family lists bind-tx, 0: it does not (or there is
 * no netdev family), < 0: could not tell.  A one-off question after a
 * failed bind-tx, on a socket of its own that is closed at once: the
 * context's would be opened by it and stay open (a failed call leaves no
 * descriptor behind, test-alloc checks that). */
static int kernel_has_bind_tx(void)
{
	struct dmt_genl_family f;
	struct dmt_nl *nl;
	int ret;

	ret = dmt_nl_open(&nl, NETLINK_GENERIC);
	if (ret)
		return ret;
	ret = dmt_nl_family_get(nl, DMT_NETDEV_FAMILY_NAME, &f);
	dmt_nl_close(nl);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	return f.ops_listed ? dmt_nl_family_has_op(&f, DMT_NETDEV_CMD_BIND_TX)
			    : -EBADMSG;
}

DEVMEMTCP_EXPORT int devmemtcp_bind_tx(struct devmemtcp_ctx *ctx, int ifindex,
				       struct devmemtcp_buf *buf,
				       const struct devmemtcp_bind_opts *opts,
				       struct devmemtcp_binding **binding)
{
	DMT_KEEP_ERRNO;
	struct dmt_bind_call a = { .tx = true, .op = "devmemtcp_bind_tx",
				   .ifindex = ifindex, .buf = buf };
	struct dmt_err err = { 0 };
	char name[DMT_IFNAME_MAX];
	struct utsname u;
	int ret;

	if (!ctx)
		return -EINVAL;
	ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_bind_opts);
	if (ret)
		return ret;
	if (DMT_OPT(opts, devmemtcp_bind_opts, rx_page_size, 0))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_bind_tx: rx_page_size is an RX setting: leave it 0 for bind-tx");
	a.asked = DMT_OPT(opts, devmemtcp_bind_opts, broker, false);
	ret = bind_dmabuf(ctx, &err, &a, binding);
	if (!ret)
		return 0;
	/* An unknown genl command is EOPNOTSUPP without text, like a driver
	 * without netmem TX on some kernels: ask the op list which it is.
	 * Only the kernel's answers: argument errors stay EINVAL. */
	if (a.sent && (ret == -EOPNOTSUPP || ret == -EINVAL) &&
	    kernel_has_bind_tx() == 0) {
		if (uname(&u))
			snprintf(u.release, sizeof(u.release), "?");
		ret = dmt_err_set(&err, -EOPNOTSUPP,
				  "bind-tx on %s failed: this kernel (%s) has no bind-tx netlink command: devmem TX needs Linux 6.16 or newer (RX works from 6.12)",
				  dmt_ifname(ifindex, name), u.release);
	}
	return bind_failed(ctx, &err, ret);
}

DEVMEMTCP_EXPORT void devmemtcp_binding_close(struct devmemtcp_binding *b)
{
	DMT_KEEP_ERRNO;
	if (!b)
		return;
	/* in a forked child, a parent's binding: closing the child's copy
	 * of the socket leaves the binding bound (the kernel unbinds when
	 * the socket's last descriptor goes), and the buffer's release is
	 * the parent's (dmt_buf_put) */
	dmt_nl_close(b->nl);
	dmt_buf_put(b->buf);
	free(b->queues);
	free(b);
}

DEVMEMTCP_EXPORT uint32_t
devmemtcp_binding_id(const struct devmemtcp_binding *b)
{
	DMT_KEEP_ERRNO;
	return b ? b->id : 0;
}

DEVMEMTCP_EXPORT struct devmemtcp_buf *
devmemtcp_binding_buf(const struct devmemtcp_binding *b)
{
	DMT_KEEP_ERRNO;
	return b ? b->buf : NULL;
}
