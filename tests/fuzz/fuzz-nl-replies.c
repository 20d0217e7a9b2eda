// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Every netlink reply parser of the library, reached the way the library
 * reaches it: a request sent through dmt_nl_talk and the kernel's replies
 * read back.  The harness links with --wrap for libmnl's socket calls, so
 * that the "kernel" is this file: family lookups (CTRL_CMD_GETFAMILY) get
 * a well-formed answer, every other recvfrom returns the input's next
 * chunk.  The requests: queue-get dumps (dmt_queue_list and
 * devmemtcp_queue_list), qstats-get, bind-rx with its queue-get check,
 * the ethtool reads (rings, channels, features, RSS get and dump), the
 * route lookup that explains a TX ENODEV, and devmemtcp_nic_probe (which
 * adds the XDP link query).  Input: which request (u8), flags (u8), then
 * chunks of (u16 length, bytes).  Flag 1 sets every message's sequence
 * number and port to the request's, so recorded replies are seeds as
 * they are.
 */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>

#include "buf.h"
#include "ethtool.h"
#include "fuzz.h"
#include "netdev.h"
#include "nl.h"
#include "tx.h"
#include "uapi.h"

#define PORTID 4242u
#define NETDEV_ID 20
#define ETHTOOL_ID 21

/* ---- the kernel ---------------------------------------------------------- */

static struct {
	struct fz f;
	bool patch;
	uint32_t seq;		/* of the last request */
	const char *family;	/* a family lookup to answer, or NULL */
	unsigned int sockets;	/* open */
} K;

struct mnl_socket *__wrap_mnl_socket_open2(int bus, int flags);
int __wrap_mnl_socket_setsockopt(const struct mnl_socket *nl, int type,
				 void *buf, socklen_t len);
int __wrap_mnl_socket_bind(struct mnl_socket *nl, unsigned int groups,
			   pid_t pid);
unsigned int __wrap_mnl_socket_get_portid(const struct mnl_socket *nl);
int __wrap_mnl_socket_close(struct mnl_socket *nl);
ssize_t __wrap_mnl_socket_sendto(const struct mnl_socket *nl, const void *req,
				 size_t len);
ssize_t __wrap_mnl_socket_recvfrom(const struct mnl_socket *nl, void *buf,
				   size_t len);

struct mnl_socket *__wrap_mnl_socket_open2(int bus, int flags)
{
	(void)bus;
	(void)flags;
	K.sockets++;
	return malloc(1);	/* only ever passed back to us */
}

int __wrap_mnl_socket_setsockopt(const struct mnl_socket *nl, int type,
				 void *buf, socklen_t len)
{
	return 0;
}

int __wrap_mnl_socket_bind(struct mnl_socket *nl, unsigned int groups,
			   pid_t pid)
{
	return 0;
}

unsigned int __wrap_mnl_socket_get_portid(const struct mnl_socket *nl)
{
	return PORTID;
}

int __wrap_mnl_socket_close(struct mnl_socket *nl)
{
	FZ_CHECK(K.sockets > 0);
	K.sockets--;
	free(nl);
	return 0;
}

static int name_cb(const struct nlattr *a, void *data)
{
	if (mnl_attr_get_type(a) == CTRL_ATTR_FAMILY_NAME &&
	    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
		*(const char **)data = mnl_attr_get_str(a);
	return MNL_CB_OK;
}

ssize_t __wrap_mnl_socket_sendto(const struct mnl_socket *nl, const void *req,
				 size_t len)
{
	const struct nlmsghdr *nlh = req;
	const struct genlmsghdr *g = mnl_nlmsg_get_payload(nlh);
	const char *name = NULL;

	/* the library's requests are well formed */
	FZ_CHECK(len >= sizeof(*nlh) && nlh->nlmsg_len == len);
	K.seq = nlh->nlmsg_seq;
	K.family = NULL;
	if (nlh->nlmsg_type == GENL_ID_CTRL && g->cmd == CTRL_CMD_GETFAMILY) {
		mnl_attr_parse(nlh, sizeof(*g), name_cb, &name);
		K.family = name && !strcmp(name, DMT_NETDEV_FAMILY_NAME) ? "n"
			 : name && !strcmp(name, DMT_ETHTOOL_FAMILY_NAME) ? "e"
									   : "?";
	}
	return (ssize_t)len;
}

static struct nlmsghdr *put(char *buf, size_t *off, uint16_t type)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf + *off);

	nlh->nlmsg_type = type;
	nlh->nlmsg_seq = K.seq;
	nlh->nlmsg_pid = PORTID;
	return nlh;
}

/* NEWFAMILY with every op, then the ack; or ENOENT. */
static size_t answer_family(char *buf)
{
	struct nlmsghdr *nlh;
	struct nlmsgerr *e;
	size_t off = 0;

	if (K.family[0] != '?') {
		struct genlmsghdr *g;
		struct nlattr *ops;

		nlh = put(buf, &off, GENL_ID_CTRL);
		g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
		g->cmd = CTRL_CMD_NEWFAMILY;
		mnl_attr_put_u16(nlh, CTRL_ATTR_FAMILY_ID,
				 K.family[0] == 'n' ? NETDEV_ID : ETHTOOL_ID);
		ops = mnl_attr_nest_start(nlh, CTRL_ATTR_OPS);
		for (uint32_t op = 1; op <= 48; op++) {
			struct nlattr *o = mnl_attr_nest_start(nlh, (uint16_t)op);

			mnl_attr_put_u32(nlh, CTRL_ATTR_OP_ID, op);
			mnl_attr_nest_end(nlh, o);
		}
		mnl_attr_nest_end(nlh, ops);
		off += nlh->nlmsg_len;
	}
	nlh = put(buf, &off, NLMSG_ERROR);
	e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
	e->error = K.family[0] == '?' ? -ENOENT : 0;
	off += nlh->nlmsg_len;
	K.family = NULL;
	return off;
}

ssize_t __wrap_mnl_socket_recvfrom(const struct mnl_socket *nl, void *buf,
				   size_t len)
{
	size_t n, off;

	FZ_CHECK(len >= 8192);
	if (K.family)
		return (ssize_t)answer_family(buf);
	if (!fz_left(&K.f)) {
		errno = EIO;	/* the input is used up: a dead socket */
		return -1;
	}
	n = fz_u16(&K.f);
	if (n > len)
		n = len;
	n = fz_bytes(&K.f, buf, n);
	/* make the messages answer this request, as far as they can be walked */
	for (off = 0; K.patch && n - off >= sizeof(struct nlmsghdr);) {
		struct nlmsghdr *nlh = (struct nlmsghdr *)((char *)buf + off);
		size_t step = MNL_ALIGN((size_t)nlh->nlmsg_len);

		nlh->nlmsg_seq = K.seq;
		nlh->nlmsg_pid = PORTID;
		if (step < sizeof(*nlh) || step > n - off)
			break;
		off += step;
	}
	return (ssize_t)n;
}

/* ---- the requests -------------------------------------------------------- */

static void check_ret(int ret)
{
	/* a negative errno the caller can print, or a count */
	FZ_CHECK(ret >= -4095);
}

static void queues(struct devmemtcp_ctx *ctx, bool own_socket)
{
	struct devmemtcp_queue q[8];
	struct dmt_nl *nl;

	if (!own_socket) {
		check_ret(devmemtcp_queue_list(ctx, 3, q, ARRAY_SIZE(q)));
		return;
	}
	FZ_CHECK(dmt_nl_open(&nl, NETLINK_GENERIC) == 0);
	check_ret(dmt_queue_list(nl, 3, q, ARRAY_SIZE(q)));
	dmt_nl_close(nl);
}

static void qstats(struct devmemtcp_ctx *ctx, uint8_t flags)
{
	struct devmemtcp_qstats st = { .sz = sizeof(st) };

	check_ret(devmemtcp_qstats_get(ctx, 3, flags & 2 ? DEVMEMTCP_QUEUE_TX
							 : DEVMEMTCP_QUEUE_RX,
				       flags & 4 ? -1 : (flags >> 4), &st));
}

static void bind_rx(struct devmemtcp_ctx *ctx, uint8_t flags)
{
	static const uint32_t q[] = { 1, 2 };
	struct devmemtcp_segment seg = { 0, 1 << 20, 1ull << 32 };
	DEVMEMTCP_OPTS(bind_opts, o, .no_verify = flags & 2);
	struct devmemtcp_binding *b = NULL;
	struct devmemtcp_buf *buf;
	int ret;

	if (dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf))
		abort();
	buf->size = 1 << 20;
	FZ_CHECK(dmt_buf_set_segments(buf, &seg, 1) == 0);
	ret = devmemtcp_bind_rx(ctx, 3, q, ARRAY_SIZE(q), buf, &o, &b);
	check_ret(ret);
	if (ret == 0) {
		FZ_CHECK(b && devmemtcp_binding_id(b) != 0);
		devmemtcp_binding_close(b);
	} else {
		FZ_CHECK(!b);
	}
	devmemtcp_buf_free(buf);
}

static void ethtool(uint8_t flags)
{
	struct dmt_err err = { 0 };
	struct dmt_eth e;
	struct dmt_rings r;
	struct dmt_channels c;
	struct dmt_feature feat;
	struct dmt_rss rss, *list = NULL;
	size_t n = 0;
	struct dmt_nl *nl;

	FZ_CHECK(dmt_nl_open(&nl, NETLINK_GENERIC) == 0);
	memset(&e, 0, sizeof(e));
	e.err = &err;
	e.nl = nl;
	e.ops = &dmt_eth_real_ops;
	e.ioctl_fd = -1;	/* the ioctl fallbacks fail with EBADF */
	e.ifindex = 3;
	snprintf(e.ifname, sizeof(e.ifname), "fz0");
	switch (flags >> 4) {
	case 0:
		check_ret(e.ops->rings_get(&e, &r));
		break;
	case 1:
		check_ret(e.ops->channels_get(&e, &c));
		break;
	case 2:
		check_ret(e.ops->feature_get(&e, "rx-ntuple-filter", &feat));
		break;
	case 3:
	case 4:
		if (e.ops->rss_get(&e, flags >> 4 == 3 ? 0 : 1, &rss) == 0) {
			FZ_CHECK(!rss.indir_size || rss.indir);
			dmt_rss_free(&rss);
		}
		break;
	default:
		if (e.ops->rss_dump(&e, &list, &n) == 0) {
			for (size_t i = 0; i < n; i++)
				dmt_rss_free(&list[i]);
			free(list);
		}
		break;
	}
	FZ_CHECK(memchr(err.msg, '\0', sizeof(err.msg)));
	dmt_nl_close(nl);
}

static void route(struct devmemtcp_ctx *ctx)
{
	struct devmemtcp_tx tx;

	FZ_CHECK(dmt_tx_init(&tx, ctx, fz_tcp_socket(), AF_INET, 4, 1, 1 << 20, NULL) == 0);
	FZ_CHECK(dmt_tx_explain_enodev(&tx) == -ENODEV);
	FZ_CHECK(strstr(tx.err.msg, "ENODEV"));
	dmt_tx_fini(&tx);
}

static void probe(struct devmemtcp_ctx *ctx)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };

	check_ret(devmemtcp_nic_probe(ctx, "lo", NULL, &p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = fz_quiet);
	struct devmemtcp_ctx *ctx;
	uint8_t op, flags;

	K.f = fz_init(data, size);
	op = fz_u8(&K.f);
	flags = fz_u8(&K.f);
	K.patch = flags & 1;
	K.family = NULL;
	FZ_CHECK(devmemtcp_ctx_new(&o, &ctx) == 0);
	switch (op % 8) {
	case 0:
	case 1:
		queues(ctx, op & 1);
		break;
	case 2:
		qstats(ctx, flags);
		break;
	case 3:
		bind_rx(ctx, flags);
		break;
	case 4:
	case 5:
		ethtool(flags);
		break;
	case 6:
		route(ctx);
		break;
	case 7:
		probe(ctx);
		break;
	}
	devmemtcp_ctx_free(ctx);
	/* every socket opened was closed */
	FZ_CHECK(K.sockets == 0);
	return 0;
}
