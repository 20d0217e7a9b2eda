// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm suite: the rows of the driver table (sim/module/PROFILES.md) on the
 * simulated NIC loaded with profile=PROFILE, on the receiver dsim1.
 *
 *   test-profile PROFILE rows   the driver's and the kernel's answers and
 *                               refusals, each with its errno and exact
 *                               extack text, straight through netlink and
 *                               the ethtool ioctl (leaves the device
 *                               changed: reload the module after it)
 *   test-profile PROFILE lib    what the library makes of it on a freshly
 *                               loaded device: devmemtcp_nic_probe()'s facts
 *                               and fixes, devmemtcp_nic_open() and close
 *                               leaving the device as it was
 *   test-profile PROFILE state  print the device's state (what lib compares)
 *
 * Each check prints "check NAME: ..." with the NAME of PROFILES.md's last
 * column.  The kernel decides which rows apply: 7.3 (the newest) or 6.12.
 * Needs a huge page in the guest (run.sh --hugepages) for rx-page-size.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "harness-nic.h"
#include "ethtool.h"
#include "nic.h"
#include "nl.h"
#include "uapi.h"

#define ETHTOOL_MSG_CHANNELS_SET 18
#define Q 15			/* the queue the bind rows use */

static struct devmemtcp_ctx *ctx;
static const char *ifname;
static const char *prof;
static struct dmt_nl *gnl, *rnl;	/* generic, rtnetlink */
static struct dmt_err eerr;
static struct dmt_eth eth;
static uint16_t efam, nfam;
static int ifindex, kv;

static bool is(const char *p)
{
	return strcmp(prof, p) == 0;
}

/* ---- raw requests: the kernel's errno, its extack in *nl ---- */

static void put_header(struct nlmsghdr *nlh, uint16_t type)
{
	struct nlattr *n = mnl_attr_nest_start(nlh, type);

	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_HEADER_DEV_INDEX, (uint32_t)ifindex);
	mnl_attr_nest_end(nlh, n);
}

/* rings-set of the attributes >= 0 */
static int rings_set(int tds, int64_t hds, int64_t rx_buf_len, int64_t rx)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, efam, DMT_ETHTOOL_MSG_RINGS_SET,
					       DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_RINGS_HEADER);
	if (rx >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX, (uint32_t)rx);
	if (rx_buf_len >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX_BUF_LEN, (uint32_t)rx_buf_len);
	if (tds >= 0)
		mnl_attr_put_u8(nlh, DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT, (uint8_t)tds);
	if (hds >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH, (uint32_t)hds);
	return dmt_nl_talk(gnl, nlh, NULL, NULL);
}

struct rings_raw {
	bool tds_set, hds_set;
	int tds;
	uint32_t hds, hds_max, rx_buf_len, rx, rx_max;
};

static int rings_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rings_raw *r = data;
	const struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		switch (mnl_attr_get_type(a)) {
		case DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT:
			r->tds_set = true;
			r->tds = mnl_attr_get_u8(a);
			break;
		case DMT_ETHTOOL_A_RINGS_HDS_THRESH:
			r->hds_set = true;
			r->hds = mnl_attr_get_u32(a);
			break;
		case DMT_ETHTOOL_A_RINGS_HDS_THRESH_MAX: r->hds_max = mnl_attr_get_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_RX_BUF_LEN: r->rx_buf_len = mnl_attr_get_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_RX: r->rx = mnl_attr_get_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_RX_MAX: r->rx_max = mnl_attr_get_u32(a); break;
		}
	}
	return MNL_CB_OK;
}

static int rings_get(struct rings_raw *r)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, efam, DMT_ETHTOOL_MSG_RINGS_GET,
					       DMT_ETHTOOL_FAMILY_VERSION, 0);

	memset(r, 0, sizeof(*r));
	put_header(nlh, DMT_ETHTOOL_A_RINGS_HEADER);
	return dmt_nl_talk(gnl, nlh, rings_cb, r);
}

/* RSS context create (0: its id in *id) and delete through netlink,
 * for the kernel's texts */
static int rss_ctx_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr))
		if (mnl_attr_get_type(a) == 2)	/* ETHTOOL_A_RSS_CONTEXT */
			*(uint32_t *)data = mnl_attr_get_u32(a);
	return MNL_CB_OK;
}

static int rss_ctx(bool create, uint32_t *id)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, efam, create ? DMT_ETHTOOL_MSG_RSS_CREATE_ACT :
					       DMT_ETHTOOL_MSG_RSS_DELETE_ACT,
					       DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, 1);	/* ETHTOOL_A_RSS_HEADER */
	if (!create)
		mnl_attr_put_u32(nlh, 2, *id);
	return dmt_nl_talk(gnl, nlh, create ? rss_ctx_cb : NULL, id);
}

static int chan_set(int64_t rx, int64_t tx, int64_t comb, int64_t other)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, efam, ETHTOOL_MSG_CHANNELS_SET,
					       DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_CHANNELS_HEADER);
	if (rx >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_CHANNELS_RX_COUNT, (uint32_t)rx);
	if (tx >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_CHANNELS_TX_COUNT, (uint32_t)tx);
	if (other >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_CHANNELS_OTHER_COUNT, (uint32_t)other);
	if (comb >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT, (uint32_t)comb);
	return dmt_nl_talk(gnl, nlh, NULL, NULL);
}

/* bind-rx of buf to queue q on a socket of its own (*keep: the socket,
 * holding the binding, or NULL after a failure; the extack in *keep or,
 * on failure, in the message printed by the check). */
static char bind_extack[512];

static int bind_rx(struct devmemtcp_buf *buf, uint32_t q, uint32_t page,
		   struct dmt_nl **keep)
{
	char b[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_nl_genl_msg(b, nfam, DMT_NETDEV_CMD_BIND_RX,
					       DMT_NETDEV_FAMILY_VERSION, 0);
	struct dmt_nl *nl;
	struct nlattr *n;
	int err;

	*keep = NULL;
	err = dmt_nl_open(&nl, NETLINK_GENERIC);
	if (err)
		return err;
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_IFINDEX, (uint32_t)ifindex);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_FD, (uint32_t)devmemtcp_buf_fd(buf));
	n = mnl_attr_nest_start(nlh, DMT_NETDEV_A_DMABUF_QUEUES);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_ID, q);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_TYPE, 0);
	mnl_attr_nest_end(nlh, n);
	if (page)
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE, page);
	err = dmt_nl_talk(nl, nlh, NULL, NULL);
	snprintf(bind_extack, sizeof(bind_extack), "%s", err ? nl->extack : "");
	if (err)
		dmt_nl_close(nl);
	else
		*keep = nl;
	return err;
}

static int rule_ins(const struct ethtool_rx_flow_spec *fs, uint32_t ctx_id, uint32_t *loc)
{
	struct ethtool_rxnfc nfc = { .cmd = ETHTOOL_SRXCLSRLINS, .fs = *fs };
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret;

	nfc.rss_context = ctx_id;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&nfc;
	ret = ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : 0;
	close(fd);
	if (!ret && loc)
		*loc = nfc.fs.location;
	return ret;
}

static int nfc_get(uint32_t cmd, struct ethtool_rxnfc *nfc, uint32_t loc)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret;

	memset(nfc, 0, sizeof(*nfc));
	nfc->cmd = cmd;
	nfc->fs.location = loc;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)nfc;
	ret = ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : 0;
	close(fd);
	return ret;
}

static int rule_del(uint32_t loc)
{
	struct ethtool_rxnfc nfc = { .cmd = ETHTOOL_SRXCLSRLDEL };
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret;

	nfc.fs.location = loc;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&nfc;
	ret = ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : 0;
	close(fd);
	return ret;
}

/* tcp4 (udp4) to dst port, masks on what is set */
static struct ethtool_rx_flow_spec spec(uint32_t type, const char *dst, int dport,
					uint64_t action)
{
	struct ethtool_rx_flow_spec fs = { .flow_type = type, .ring_cookie = action };

	if (dst) {
		inet_pton(AF_INET, dst, &fs.h_u.tcp_ip4_spec.ip4dst);
		fs.m_u.tcp_ip4_spec.ip4dst = 0xffffffff;
	}
	if (dport) {
		fs.h_u.tcp_ip4_spec.pdst = htons((uint16_t)dport);
		fs.m_u.tcp_ip4_spec.pdst = 0xffff;
	}
	return fs;
}

/* A generic-mode XDP program (XDP_PASS), with frags support or not: its
 * attach through rtnetlink, or detach (prog -1). */
static int xdp_prog(bool frags)
{
	struct bpf_insn insns[2] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_XDP;
	a.expected_attach_type = BPF_XDP;
	a.insns = (uintptr_t)insns;
	a.insn_cnt = 2;
	a.license = (uintptr_t)"GPL";
	a.prog_flags = frags ? BPF_F_XDP_HAS_FRAGS : 0;
	return (int)syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof(a));
}

static int xdp_attach(int prog)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_nl_msg(buf, RTM_SETLINK, 0);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	struct nlattr *n;

	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	n = mnl_attr_nest_start(nlh, IFLA_XDP);
	mnl_attr_put_u32(nlh, IFLA_XDP_FD, (uint32_t)prog);
	mnl_attr_put_u32(nlh, IFLA_XDP_FLAGS, XDP_FLAGS_SKB_MODE);
	mnl_attr_nest_end(nlh, n);
	return dmt_nl_talk(rnl, nlh, NULL, NULL);
}

/* ---- checks ---- */

/* err must be want, with the kernel's extack text (NULL: any, "": none) */
static int expect(const char *name, int err, int want, const char *text, const char *extack)
{
	T_CHECK(err == want, "%s: %s: %s (\"%s\"), want %s", prof, name, dmt_errno_name(err),
		extack, dmt_errno_name(want));
	T_CHECK(!text || strcmp(extack, text) == 0, "%s: %s: extack \"%s\", want \"%s\"",
		prof, name, extack, text ? text : "");
	printf("check %s: %s%s%s%s\n", name, err ? dmt_errno_name(err) : "ok",
	       extack[0] ? " \"" : "", extack, extack[0] ? "\"" : "");
	return 0;
}

#define EXPECT(name, call, want, text, nlsock)					\
	do {									\
		int _e = (call);						\
		struct dmt_nl *_n = (nlsock);					\
		T_TRY(expect(name, _e, want, text, _n ? _n->extack : ""));	\
	} while (0)

#define EXPECT_BIND(name, call, want, text)					\
	do {									\
		int _e = (call);						\
		T_TRY(expect(name, _e, want, text, bind_extack));		\
	} while (0)

static struct devmemtcp_buf *buf4k, *buf2m;

static void unbind(struct dmt_nl **b)
{
	dmt_nl_close(*b);
	*b = NULL;
}

/* tcp-data-split and hds-thresh as bind-rx needs them, the driver's way */
static int make_ready(void)
{
	if (is("mlx5"))
		T_CHECK(eth.ops->feature_set(&eth, "rx-gro-hw", true) == 0, "rx-gro-hw on");
	T_CHECK(rings_set(DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED, -1, -1, -1) == 0,
		"tcp-data-split on: %s", gnl->extack);
	if (is("bnxt") || is("fbnic"))
		T_CHECK(rings_set(-1, 0, -1, -1) == 0, "hds-thresh 0: %s", gnl->extack);
	return 0;
}

/* ---- rows, 7.3 ---- */

static int rows_report(void)
{
	struct ethtool_drvinfo di;
	struct rings_raw r;
	static const struct { const char *p, *drv; int tds; int hds, hds_max; } want[] = {
		{ "gve", "gve", 1, -1, -1 },
		{ "bnxt", "bnxt_en", 2, 640, 1023 },
		{ "mlx5", "mlx5_core", -1, 0, 0 },
		{ "fbnic", "fbnic", 2, 1536, 3584 },
	};
	int i;

	for (i = 0; i < 4 && !is(want[i].p); i++)
		;
	T_CHECK(i < 4, "unknown profile %s", prof);
	T_CHECK(dmt_eth_drvinfo(&eth, &di) == 0 && strcmp(di.driver, want[i].drv) == 0,
		"driver %s", di.driver);
	printf("check driver: %s\n", di.driver);
	T_CHECK(rings_get(&r) == 0, "rings-get: %s", gnl->extack);
	T_CHECK(want[i].tds < 0 ? !r.tds_set : r.tds_set && r.tds == want[i].tds,
		"tcp-data-split reported %d (%d), want %d", r.tds_set, r.tds, want[i].tds);
	printf("check tds-report: %s\n", !r.tds_set ? "not reported" : r.tds == 2 ? "on" : "off");
	T_CHECK(want[i].hds < 0 ? !r.hds_set :
		r.hds_set && r.hds == (uint32_t)want[i].hds && r.hds_max == (uint32_t)want[i].hds_max,
		"hds-thresh %d %u/%u", r.hds_set, r.hds, r.hds_max);
	printf("check hds: %s %u max %u\n", r.hds_set ? "reported" : "none", r.hds, r.hds_max);
	if (want[i].hds < 0)
		EXPECT("hds", rings_set(-1, 0, -1, -1), -EOPNOTSUPP,
		       "setting hds-thresh is not supported", gnl);
	else
		EXPECT("hds", rings_set(-1, want[i].hds_max + 1, -1, -1), -EINVAL,
		       "requested ring size exceeds maximum", gnl);
	if (is("bnxt")) {
		/* reported on because hardware GRO is: off without it */
		T_CHECK(eth.ops->feature_set(&eth, "rx-gro-hw", false) == 0, "gro off");
		T_CHECK(rings_get(&r) == 0 && r.tds == 1, "bnxt without GRO: tds %d", r.tds);
		T_CHECK(eth.ops->feature_set(&eth, "rx-gro-hw", true) == 0, "gro on");
		T_CHECK(rings_get(&r) == 0 && r.tds == 2, "bnxt with GRO: tds %d", r.tds);
		printf("check tds-report: bnxt follows hardware GRO\n");
	}
	/* reported or not, the kernel checks what was configured */
	EXPECT_BIND("bind-tds", bind_rx(buf4k, Q, 0, &(struct dmt_nl *){ 0 }), -EINVAL,
		    "tcp-data-split is disabled");
	return 0;
}

static int rows_tds(void)
{
	struct dmt_nl *b;
	struct rings_raw r;

	if (is("gve")) {
		EXPECT("tds-on", rings_set(2, -1, -1, -1), 0, "", gnl);
		EXPECT("tds-off", rings_set(1, -1, -1, -1), 0, "", gnl);
		T_CHECK(rings_get(&r) == 0 && r.tds == 1, "gve off: %d", r.tds);
	} else if (is("bnxt")) {
		EXPECT("tds-on", rings_set(2, -1, -1, -1), 0, "", gnl);
		EXPECT_BIND("bind-hds", bind_rx(buf4k, Q, 0, &b), -EINVAL, "hds-thresh is not zero");
		/* off while configured on: refused without a word; auto works */
		EXPECT("tds-off", rings_set(1, -1, -1, -1), -EINVAL, "", gnl);
		EXPECT("tds-off", rings_set(0, -1, -1, -1), 0, "", gnl);
	} else if (is("mlx5")) {
		EXPECT("tds-on", rings_set(2, -1, -1, -1), -EINVAL,
		       "mlx5_core: TCP-data-split is not supported when GRO HW is disabled", gnl);
		T_CHECK(eth.ops->feature_set(&eth, "rx-gro-hw", true) == 0, "rx-gro-hw on");
		EXPECT("tds-on", rings_set(2, -1, -1, -1), 0, "", gnl);
		T_CHECK(rings_get(&r) == 0 && r.tds_set && r.tds == 2, "mlx5 on: %d", r.tds);
		/* the driver keeps hardware GRO while header split is on */
		{
			struct dmt_feature f;

			T_CHECK(eth.ops->feature_set(&eth, "rx-gro-hw", false) == 0 &&
				eth.ops->feature_get(&eth, "rx-gro-hw", &f) == 0 && f.active,
				"mlx5 let hardware GRO go");
			printf("check tds-on: mlx5 keeps rx-gro-hw on\n");
		}
	} else {
		EXPECT("tds-off", rings_set(1, -1, -1, -1), -EINVAL,
		       "fbnic: Cannot disable TCP data split", gnl);
		EXPECT("tds-on", rings_set(2, -1, -1, -1), 0, "", gnl);
		EXPECT_BIND("bind-hds", bind_rx(buf4k, Q, 0, &b), -EINVAL, "hds-thresh is not zero");
	}
	return 0;
}

static int rows_buffers(void)
{
	struct dmt_nl *b;
	struct rings_raw r;
	char layout[128];

	if (is("gve")) {
		T_CHECK(rings_get(&r) == 0 && r.rx_buf_len == 4096, "rx-buf-len %u", r.rx_buf_len);
		EXPECT("rxbuflen", rings_set(-1, -1, 1024, -1), -EINVAL,
		       "gve: Rx buf len can only be 2048 or 4096", gnl);
		EXPECT("rxbuflen", rings_set(-1, -1, 2048, -1), 0, "", gnl);
		T_CHECK(t_capture(layout, sizeof(layout),
				  "cat /sys/kernel/debug/devmemsim/dsim1/layout") == 0 &&
			strncmp(layout, "buf_size 2048 ", 14) == 0, "layout: %s", layout);
		printf("check layout: %s", layout);
		T_CHECK(rings_set(-1, -1, 4096, -1) == 0, "rx-buf-len 4096");
	} else {
		EXPECT("rxbuflen", rings_set(-1, -1, 2048, -1), -EOPNOTSUPP,
		       "setting rx buf len not supported", gnl);
	}
	T_TRY(make_ready());
	if (is("gve") || is("fbnic")) {
		EXPECT_BIND("page-size", bind_rx(buf2m, Q, 65536, &b), -EOPNOTSUPP,
			    "device does not support: rx_page_size");
	} else {
		/* the driver's own limit, without a text */
		EXPECT_BIND("page-size", bind_rx(buf2m, Q, is("bnxt") ? 65536 : 262144, &b),
			    -ERANGE, "");
		EXPECT_BIND("page-size", bind_rx(buf2m, Q, is("bnxt") ? 32768 : 131072, &b),
			    0, "");
		unbind(&b);
	}
	return 0;
}

static int rows_rss(void)
{
	struct dmt_rss rss = { 0 };
	uint32_t id, id2;
	static const struct { const char *p; uint32_t indir, key; } want[] = {
		{ "gve", 128, 40 }, { "bnxt", 64, 40 }, { "mlx5", 256, 40 }, { "fbnic", 256, 54 },
	};
	uint32_t ind[256];
	int i;

	for (i = 0; !is(want[i].p); i++)
		;
	T_CHECK(eth.ops->rss_get(&eth, 0, &rss) == 0 && rss.indir_size == want[i].indir &&
		rss.key_size == want[i].key, "rss %u/%u", rss.indir_size, rss.key_size);
	printf("check rss: %u entries, %u-byte key\n", rss.indir_size, rss.key_size);
	for (uint32_t k = 0; k < rss.indir_size; k++)
		ind[k] = k % 2;
	if (is("gve")) {
		EXPECT("rss-ctx", rss_ctx(true, &id), -EOPNOTSUPP, "", gnl);
	} else if (is("fbnic")) {
		EXPECT("rss-ctx", rss_ctx(true, &id), 0, "", gnl);
		T_CHECK(id == 1, "fbnic context %u", id);
		EXPECT("rss-ctx", rss_ctx(true, &id2), -EBUSY, "error allocating context ID", gnl);
		T_CHECK(rss_ctx(false, &id) == 0, "ctx delete: %s", gnl->extack);
	} else {
		EXPECT("rss-ctx", rss_ctx(true, &id), 0, "", gnl);
		T_CHECK(rss_ctx(false, &id) == 0, "ctx delete: %s", gnl->extack);
		if (is("bnxt")) {
			T_CHECK(t_run("ip link set %s down", ifname) == 0, "down");
			EXPECT("rss-ctx", rss_ctx(true, &id), -EAGAIN,
			       "bnxt_en: Unable to set RSS contexts when interface is down", gnl);
			T_CHECK(t_run("ip link set %s up", ifname) == 0, "up");
		}
	}
	/* the library's way (ioctl or netlink, whichever this kernel has) */
	if (!is("gve")) {
		T_CHECK(eth.ops->rss_ctx_create(&eth, ind, rss.indir_size, &id) == 0,
			"rss context: %s", eerr.msg);
		T_CHECK(eth.ops->rss_ctx_delete(&eth, id) == 0, "ctx delete");
	}
	dmt_rss_free(&rss);
	return 0;
}

/* Send one UDP datagram to port from the sender's namespace. */
static void *udp_one(void *arg)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(uintptr_t)arg) };
	int fd;

	if (vm_enter(VM_TX_NS))
		return NULL;
	inet_pton(AF_INET, VM_RX_ADDR4, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return NULL;
}

/* RX packets of queue q (ethtool -S) */
static long rxq_packets(int q)
{
	char out[65536], key[32], *p;

	snprintf(key, sizeof(key), "rx%d_packets: ", q);
	if (t_capture(out, sizeof(out), "ethtool -S dsim1") != 0 || !(p = strstr(out, key)))
		return -1;
	return strtol(p + strlen(key), NULL, 10);
}

static int rows_ntuple(void)
{
	struct ethtool_rxnfc nfc;
	struct ethtool_rx_flow_spec fs = spec(TCP_V4_FLOW, NULL, 5201, 3);
	struct dmt_feature f;
	uint32_t loc, l2;

	T_CHECK(eth.ops->feature_get(&eth, DMT_NTUPLE_FEATURE, &f) == 0, "features");
	T_CHECK(nfc_get(ETHTOOL_GRXCLSRLCNT, &nfc, 0) == 0, "GRXCLSRLCNT");
	printf("check ntuple: %s%s, GRXCLSRLCNT data 0x%llx\n", f.active ? "on" : "off",
	       f.nochange || !f.hw ? " [fixed]" : "", (unsigned long long)nfc.data);
	if (is("gve")) {
		T_CHECK(!f.active && f.hw && nfc.data == 64, "gve ntuple %d/%d %llx", f.active,
			f.hw, (unsigned long long)nfc.data);
		EXPECT("ntuple", rule_ins(&fs, 0, &loc), -EOPNOTSUPP, "", (struct dmt_nl *)NULL);
		T_CHECK(eth.ops->feature_set(&eth, DMT_NTUPLE_FEATURE, true) == 0, "ntuple on");
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), -EINVAL, "", (struct dmt_nl *)NULL);
		fs.location = 5;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		T_CHECK(loc == 5, "loc %u", loc);
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), -EINVAL, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW, NULL, 5202, RX_CLS_FLOW_DISC);
		fs.location = 6;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), -EOPNOTSUPP, "", (struct dmt_nl *)NULL);
		/* a rule to the RSS table keeps only its queue, 0 */
		fs = spec(TCP_V4_FLOW | FLOW_RSS, NULL, 5203, 0);
		fs.location = 7;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		T_CHECK(nfc_get(ETHTOOL_GRXCLSRULE, &nfc, 7) == 0 &&
			nfc.fs.flow_type == TCP_V4_FLOW && nfc.fs.ring_cookie == 0,
			"gve rule 7: type 0x%x queue %llu", nfc.fs.flow_type,
			(unsigned long long)nfc.fs.ring_cookie);
		/* a location with no rule: the device's EINVAL */
		T_CHECK(rule_del(7) == 0, "delete 7");
		EXPECT("ntuple-loc", rule_del(7), -EINVAL, "", (struct dmt_nl *)NULL);
	} else if (is("bnxt")) {
		T_CHECK(f.active && !f.nochange && nfc.data == (5120 | RX_CLS_LOC_SPECIAL),
			"bnxt ntuple %d %llx", f.active, (unsigned long long)nfc.data);
		fs.location = 5;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), -EINVAL, "", (struct dmt_nl *)NULL);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		T_CHECK(loc == 0, "loc %u", loc);
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), -EEXIST, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW, NULL, 0, 3);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), -EOPNOTSUPP, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW | FLOW_EXT, NULL, 5202, 3);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), -EOPNOTSUPP, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW, NULL, 5202, RX_CLS_FLOW_DISC);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW | FLOW_RSS, NULL, 5203, 0);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-act", rule_ins(&fs, 9, &loc), -EINVAL, "", (struct dmt_nl *)NULL);
		T_CHECK(eth.ops->feature_set(&eth, DMT_NTUPLE_FEATURE, false) == 0, "ntuple off");
		fs = spec(TCP_V4_FLOW, NULL, 5204, 3);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple", rule_ins(&fs, 0, &loc), -EPERM, "", (struct dmt_nl *)NULL);
	} else if (is("mlx5")) {
		T_CHECK(!f.active && f.hw && nfc.data == 0, "mlx5 ntuple %d %llx", f.active,
			(unsigned long long)nfc.data);
		{
			struct ethtool_rxnfc *all = calloc(1, sizeof(*all) + 4);

			all->cmd = ETHTOOL_GRXCLSRLALL;
			all->rule_cnt = 0;
			{
				struct ifreq ifr = { 0 };
				int fd = socket(AF_INET, SOCK_DGRAM, 0);

				snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
				ifr.ifr_data = (void *)all;
				T_CHECK(ioctl(fd, SIOCETHTOOL, &ifr) == 0 && all->data == 1024,
					"GRXCLSRLALL data %llu", (unsigned long long)all->data);
				close(fd);
			}
			printf("check ntuple: mlx5 GRXCLSRLALL data %llu\n",
			       (unsigned long long)all->data);
			free(all);
		}
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), -ENOSPC, "", (struct dmt_nl *)NULL);
		/* with the feature (aRFS) off */
		fs = spec(UDP_V4_FLOW, NULL, 7001, 3);
		fs.location = 1;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		fs = spec(UDP_V4_FLOW, VM_RX_ADDR4, 7001, 4);
		fs.location = 2;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		/* the rule matching more fields wins over the lower location
		 * (RSS kept off queues 3 and 4, and the neighbour resolved) */
		{
			uint32_t ind[256];
			long before, b3, after;
			pthread_t t;

			for (int k = 0; k < 256; k++)
				ind[k] = 5 + k % 11;
			T_CHECK(eth.ops->rss_set(&eth, 0, ind, 256) == 0, "rss table");
			pthread_create(&t, NULL, udp_one, (void *)(uintptr_t)7999);
			pthread_join(t, NULL);
			usleep(300000);
			before = rxq_packets(4);
			b3 = rxq_packets(3);

			pthread_create(&t, NULL, udp_one, (void *)(uintptr_t)7001);
			pthread_join(t, NULL);
			usleep(200000);
			after = rxq_packets(4);
			T_CHECK(after == before + 1 && rxq_packets(3) == b3,
				"mlx5 precedence: queue 4 %ld -> %ld", before, after);
			T_CHECK(eth.ops->rss_set(&eth, 0, NULL, 0) == 0, "rss default");
			printf("check ntuple-loc: mlx5 rule matching more fields won\n");
		}
		/* a used location is replaced */
		fs = spec(UDP_V4_FLOW, NULL, 7002, 3);
		fs.location = 1;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		T_CHECK(nfc_get(ETHTOOL_GRXCLSRLCNT, &nfc, 0) == 0 && nfc.rule_cnt == 2,
			"mlx5 replace: %u rules", nfc.rule_cnt);
		fs = spec(TCP_V4_FLOW, NULL, 5205, 3);
		fs.m_u.tcp_ip4_spec.tos = 0xff;
		fs.location = 3;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), -EINVAL, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW, NULL, 5206, RX_CLS_FLOW_DISC);
		fs.location = 4;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
	} else {
		T_CHECK(f.active && (f.nochange || !f.hw) && nfc.data == (48 | RX_CLS_LOC_SPECIAL),
			"fbnic ntuple %d %llx", f.active, (unsigned long long)nfc.data);
		fs.location = 5;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), -EINVAL, "", (struct dmt_nl *)NULL);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-loc", rule_ins(&fs, 0, &loc), 0, "", (struct dmt_nl *)NULL);
		fs = spec(TCP_V4_FLOW, NULL, 5202, RX_CLS_FLOW_DISC);
		fs.location = RX_CLS_LOC_ANY;
		EXPECT("ntuple-act", rule_ins(&fs, 0, &l2), 0, "", (struct dmt_nl *)NULL);
		T_CHECK(loc == 47 && l2 == 46, "fbnic locations %u %u", loc, l2);
		/* eight destination addresses, not nine */
		for (int k = 1; k <= 9; k++) {
			char a[32];

			snprintf(a, sizeof(a), "10.78.0.%d", k);
			fs = spec(TCP_V4_FLOW, a, 5300, 3);
			fs.location = RX_CLS_LOC_ANY;
			EXPECT("ntuple-act", rule_ins(&fs, 0, &l2), k <= 8 ? 0 : -ENOSPC, "",
			       (struct dmt_nl *)NULL);
		}
	}
	return 0;
}

/* the core: no driver here adds a rule's queue to its context's choice */
static int rows_rss_offset(void)
{
	struct ethtool_rx_flow_spec fs = spec(TCP_V4_FLOW | FLOW_RSS, NULL, 5210, 1);

	fs.location = is("gve") || is("mlx5") ? 20 : RX_CLS_LOC_ANY;
	EXPECT("ntuple-act", rule_ins(&fs, 0, NULL), -EINVAL, "", (struct dmt_nl *)NULL);
	return 0;
}

/* ring sizes the driver refuses, each its way */
static int rows_rings(void)
{
	if (is("gve")) {
		EXPECT("rings", rings_set(-1, -1, -1, 1000), -EINVAL, "", gnl);
	} else if (is("bnxt")) {
		char buf[MNL_SOCKET_BUFFER_SIZE];
		struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, efam, DMT_ETHTOOL_MSG_RINGS_SET,
						       DMT_ETHTOOL_FAMILY_VERSION, 0);

		put_header(nlh, DMT_ETHTOOL_A_RINGS_HEADER);
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_TX, 18);
		EXPECT("rings", dmt_nl_talk(gnl, nlh, NULL, NULL), -EINVAL, "", gnl);
	} else if (is("mlx5")) {
		EXPECT("rings", rings_set(-1, -1, -1, 8), -EINVAL, "mlx5_core: rx (8) < min (16)", gnl);
	} else {
		EXPECT("rings", rings_set(-1, -1, -1, 32), -EINVAL,
		       "fbnic: requested ring size too small", gnl);
	}
	return 0;
}

static int rows_channels(void)
{
	struct dmt_channels c;

	T_CHECK(eth.ops->channels_get(&eth, &c) == 0, "channels");
	printf("check channels: combined %u rx %u tx %u other %u (max %u/%u/%u/%u)\n",
	       c.combined, c.rx, c.tx, c.other, c.combined_max, c.rx_max, c.tx_max, c.other_max);
	if (is("gve")) {
		T_CHECK(c.combined == 0 && c.rx == 16 && c.tx == 16 && c.combined_max == 0,
			"gve channels");
		EXPECT("channels", chan_set(0, 0, 8, -1), -EINVAL, NULL, gnl);
		EXPECT("channels", chan_set(8, 16, -1, -1), 0, "", gnl);
		T_CHECK(chan_set(16, 16, -1, -1) == 0, "back");
	} else if (is("mlx5")) {
		T_CHECK(c.combined == 16 && c.rx_max == 0, "mlx5 channels");
		EXPECT("channels", chan_set(8, 8, 0, -1), -EINVAL, NULL, gnl);
	} else if (is("bnxt")) {
		T_CHECK(c.combined == 16 && c.rx_max == 16, "bnxt channels");
		EXPECT("channels", chan_set(8, 4, 0, -1), 0, "", gnl);
		T_CHECK(eth.ops->channels_get(&eth, &c) == 0 && c.rx == 8 && c.tx == 4 &&
			c.combined == 0, "bnxt separate");
		T_CHECK(chan_set(0, 0, 16, -1) == 0, "back: %s", gnl->extack);
	} else {
		T_CHECK(c.combined == 16 && c.other == 1 && c.other_max == 1, "fbnic channels");
		EXPECT("channels", chan_set(-1, -1, 8, 0), -EINVAL, NULL, gnl);
	}
	return 0;
}

/* while queue Q is bound: the core's refusals, a ring change that keeps
 * the binding, XDP both ways */
static int rows_bound(void)
{
	struct dmt_nl *b;
	struct devmemtcp_queue q[64];
	int n, prog, progf;
	bool bound = false;

	EXPECT_BIND("devmem", bind_rx(buf4k, Q, 0, &b), 0, "");
	if (is("gve"))
		EXPECT("bound-channels", chan_set(15, -1, -1, -1), -EINVAL,
		       "requested channel counts are too low for existing memory provider setting (16)",
		       gnl);
	else
		EXPECT("bound-channels", chan_set(-1, -1, 15, -1), -EINVAL,
		       "requested channel counts are too low for existing memory provider setting (16)",
		       gnl);
	EXPECT("bound-rings", rings_set(1, -1, -1, -1), -EINVAL,
	       "can't disable tcp-data-split while device has memory provider enabled", gnl);
	if (is("gve"))
		EXPECT("bound-rings", rings_set(-1, 100, -1, -1), -EOPNOTSUPP,
		       "setting hds-thresh is not supported", gnl);
	else
		EXPECT("bound-rings", rings_set(-1, 100, -1, -1), -EINVAL,
		       "can't set non-zero hds_thresh while device is memory provider enabled", gnl);
	/* a ring change the core lets through restarts the queues: the
	 * binding stays */
	EXPECT("bound-rings", rings_set(-1, -1, -1, 512), 0, "", gnl);
	n = devmemtcp_queue_list(ctx, ifindex, q, 64);
	for (int i = 0; i < n && i < 64; i++)
		bound |= q[i].type == DEVMEMTCP_QUEUE_RX && q[i].id == Q && q[i].dmabuf_id;
	T_CHECK(bound, "queue %d lost its binding in the ring change", Q);
	prog = xdp_prog(false);
	progf = xdp_prog(true);
	T_CHECK(prog >= 0 && progf >= 0, "BPF_PROG_LOAD: %s", strerror(errno));
	EXPECT("xdp", xdp_attach(prog), -EBUSY,
	       "unable to install XDP to device using tcp-data-split", rnl);
	EXPECT("xdp", xdp_attach(progf), -EBUSY,
	       "unable to install XDP to device using memory provider", rnl);
	unbind(&b);
	/* mlx5 keeps hardware GRO for header split, which generic XDP needs
	 * off: the kernel warns "failed to disable GRO_HW!" (PROFILES.md) */
	if (!is("mlx5")) {
		EXPECT("xdp", xdp_attach(progf), 0, "", rnl);
		EXPECT_BIND("xdp", bind_rx(buf4k, Q, 0, &b), -EEXIST,
			    "unable to custom memory provider to device with XDP program attached");
		T_CHECK(xdp_attach(-1) == 0, "XDP detach: %s", rnl->extack);
	}
	close(prog);
	close(progf);
	return 0;
}

/* ---- rows, 6.12 ---- */

static int rows_lts(void)
{
	struct ethtool_drvinfo di;
	struct rings_raw r;
	struct dmt_nl *b;
	int err;

	T_CHECK(dmt_eth_drvinfo(&eth, &di) == 0, "drvinfo");
	printf("check driver: %s\n", di.driver);
	err = rings_get(&r);
	if (is("fbnic")) {
		EXPECT("tds-report", err, -EOPNOTSUPP, NULL, gnl);
		EXPECT("tds-on", rings_set(2, -1, -1, -1), -EOPNOTSUPP, NULL, gnl);
	} else {
		int want = is("bnxt") ? 2 : 1;

		T_CHECK(err == 0 && r.tds_set && r.tds == want && !r.hds_set,
			"tcp-data-split %d/%d, want %d", r.tds_set, r.tds, want);
		printf("check tds-report: %s\n", r.tds == 2 ? "on" : "off");
		if (is("gve"))
			EXPECT("tds-on", rings_set(2, -1, -1, -1), 0, "", gnl);
		else
			EXPECT("tds-on", rings_set(2, -1, -1, -1), -EOPNOTSUPP,
			       "setting TCP data split is not supported", gnl);
	}
	/* gve and bnxt restart the queue without unreadable memory; mlx5
	 * and fbnic have no queue management */
	if (is("gve") || is("bnxt"))
		EXPECT_BIND("devmem", bind_rx(buf4k, Q, 0, &b), -ENODATA, "");
	else
		EXPECT_BIND("devmem", bind_rx(buf4k, Q, 0, &b), -EOPNOTSUPP, "");
	return 0;
}

/* ---- the device's state, read in this process (ethtool programs cost a
 * second each under TCG): rings, channels, the features the library may
 * touch, the RSS table and contexts, every ntuple rule ---- */

static void dump_rules(FILE *m)
{
	struct ethtool_rxnfc cnt, *all;
	struct ifreq ifr = { 0 };
	int fd;

	if (nfc_get(ETHTOOL_GRXCLSRLCNT, &cnt, 0)) {
		fprintf(m, "rules: none\n");
		return;
	}
	all = calloc(1, sizeof(*all) + cnt.rule_cnt * 4 + 4);
	all->cmd = ETHTOOL_GRXCLSRLALL;
	all->rule_cnt = cnt.rule_cnt;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)all;
	if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) {
		fprintf(m, "rules %u\n", all->rule_cnt);
		for (uint32_t i = 0; i < all->rule_cnt; i++) {
			struct ethtool_rxnfc r;
			const uint8_t *b = (const uint8_t *)&r.fs;

			if (nfc_get(ETHTOOL_GRXCLSRULE, &r, all->rule_locs[i]))
				continue;
			fprintf(m, "rule %u ctx %u:", all->rule_locs[i],
				(r.fs.flow_type & FLOW_RSS) ? r.rss_context : 0);
			for (size_t k = 0; k < sizeof(r.fs); k++)
				fprintf(m, "%02x", b[k]);
			fputc('\n', m);
		}
	}
	close(fd);
	free(all);
}

static char *dump_state(void)
{
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	struct rings_raw r;
	struct dmt_channels c;
	struct dmt_feature f;
	struct dmt_rss *list = NULL;
	size_t n = 0;
	static const char *const feats[] = { DMT_NTUPLE_FEATURE, "rx-gro-hw", "rx-hashing" };

	if (rings_get(&r) == 0)
		fprintf(m, "rings rx %u/%u rx-buf-len %u tcp-data-split %d hds %d %u/%u\n",
			r.rx, r.rx_max, r.rx_buf_len, r.tds_set ? r.tds : -1, r.hds_set, r.hds,
			r.hds_max);
	else
		fprintf(m, "rings: none\n");
	if (eth.ops->channels_get(&eth, &c) == 0)
		fprintf(m, "channels %u %u %u %u\n", c.rx, c.tx, c.other, c.combined);
	for (size_t i = 0; i < sizeof(feats) / sizeof(feats[0]); i++)
		if (eth.ops->feature_get(&eth, feats[i], &f) == 0)
			fprintf(m, "%s %d %d\n", feats[i], f.present, f.active);
	if (eth.ops->rss_dump(&eth, &list, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			fprintf(m, "rss context %u hfunc %u:", list[i].context, list[i].hfunc);
			for (uint32_t k = 0; k < list[i].indir_size; k++)
				fprintf(m, " %u", list[i].indir[k]);
			fputc('\n', m);
			dmt_rss_free(&list[i]);
		}
		free(list);
	}
	dump_rules(m);
	fclose(m);
	return out;
}

/* ---- the library ---- */

static int lib_open_close(struct devmemtcp_buf *buf, const char *want_err, int want)
{
	struct devmemtcp_flow f[2];
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2, .buf = buf);
	struct devmemtcp_nic *nic = NULL;
	char *before, *after;
	int err;

	T_CHECK(devmemtcp_flow_parse("dst-ip " VM_RX_ADDR4 " dst-port 6201", &f[0]) == 0 &&
		devmemtcp_flow_parse("tcp6 dst-ip " VM_RX_ADDR6 " dst-port 6201", &f[1]) == 0,
		"flows");
	before = dump_state();
	err = devmemtcp_nic_open(ctx, ifname, &o, &nic);
	printf("check lib-open: %s%s%s\n", err ? dmt_errno_name(err) : "ok",
	       err ? ": " : "", err ? devmemtcp_ctx_errmsg(ctx) : "");
	T_CHECK(err == want, "%s: nic_open %s: %s", prof, dmt_errno_name(err),
		devmemtcp_ctx_errmsg(ctx));
	if (want_err)
		T_CHECK(strcmp(devmemtcp_ctx_errmsg(ctx), want_err) == 0,
			"%s: nic_open said \"%s\", want \"%s\"", prof,
			devmemtcp_ctx_errmsg(ctx), want_err);
	if (!err) {
		T_CHECK(devmemtcp_nic_binding(nic) != NULL, "no binding");
		T_CHECK(devmemtcp_nic_close(nic) == 0, "close: %s", devmemtcp_ctx_errmsg(ctx));
	}
	after = dump_state();
	T_TRY(nic_same(before, after, "nic_open and close"));
	printf("check lib-restore: the device is as it was\n");
	free(before);
	free(after);
	return 0;
}

static int lib_probe(void)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	const struct devmemtcp_probe_problem *pr;
	char what[200], fix[320];
	int n = devmemtcp_nic_probe(ctx, ifname, NULL, &p);

	T_CHECK(n >= 0, "probe: %s", devmemtcp_ctx_errmsg(ctx));
	for (int i = 0; i < (int)p.nproblems; i++)
		printf("probe: %s\n       fix: %s\n", p.problems[i].what, p.problems[i].fix);
	for (int i = 0; i < (int)p.nproblems; i++)
		T_CHECK(!strstr(p.problems[i].what, "does not report hds-thresh"),
			"%s: probe: %s", prof, p.problems[i].what);
	if (kv < 703)
		return 0;
	if (is("mlx5")) {
		T_CHECK(p.ntuple_table_size == 1024, "mlx5 rule table %d", p.ntuple_table_size);
		snprintf(what, sizeof(what),
			 "header split (tcp-data-split) is not set on %s: mlx5_core splits headers only with hardware GRO, which is off",
			 ifname);
		snprintf(fix, sizeof(fix),
			 "ethtool -K %s rx-gro-hw on (then devmemtcp_nic_open() turns header split on and back)",
			 ifname);
		pr = t_probe_problem(&p, what);
		T_CHECK(pr && strcmp(pr->fix, fix) == 0, "mlx5: no problem \"%s\" with fix \"%s\"",
			what, fix);
	} else if (is("gve")) {
		T_CHECK(p.ntuple_table_size == 64 && p.hds_thresh < 0, "gve probe");
		snprintf(what, sizeof(what), "header split (tcp-data-split) is off on %s", ifname);
		T_CHECK(t_probe_problem(&p, what), "gve: no problem \"%s\"", what);
	} else {
		/* shown on (not configured: nic_open does it); hds-thresh */
		T_CHECK(p.tcp_data_split == 2, "%s: tcp-data-split %d", prof, p.tcp_data_split);
		snprintf(what, sizeof(what), "hds-thresh is %d on %s: bind-rx needs 0",
			 is("bnxt") ? 640 : 1536, ifname);
		snprintf(fix, sizeof(fix),
			 "ethtool -G %s hds-thresh 0 (devmemtcp_nic_open() does it and undoes it)",
			 ifname);
		pr = t_probe_problem(&p, what);
		T_CHECK(pr && strcmp(pr->fix, fix) == 0, "%s: no problem \"%s\"", prof, what);
		T_CHECK(p.ntuple_table_size == (is("bnxt") ? 5120 : 48), "%s: rule table %d", prof,
			p.ntuple_table_size);
	}
	printf("check lib-probe: ok\n");
	return 0;
}

static int lib(void)
{
	struct devmemtcp_buf *buf;
	char want[512];

	T_TRY(lib_probe());
	T_CHECK(t_udmabuf(ctx, 8u << 20, &buf) == 0, "udmabuf");
	if (kv < 703) {
		/* no devmem with these drivers on 6.12: refused, nothing left */
		T_TRY(lib_open_close(buf, NULL, is("gve") || is("bnxt") ? -ENODATA : -EOPNOTSUPP));
	} else if (is("mlx5")) {
		snprintf(want, sizeof(want),
			 "setting up %s for devmem failed at header split: rings-set on %s failed: EINVAL "
			 "(kernel: mlx5_core: TCP-data-split is not supported when GRO HW is disabled): "
			 "turn hardware GRO on first (ethtool -K %s rx-gro-hw on); the 0 finished steps were undone",
			 ifname, ifname, ifname);
		T_TRY(lib_open_close(buf, want, -EINVAL));
		T_CHECK(t_run("ethtool -K %s rx-gro-hw on", ifname) == 0, "rx-gro-hw on");
		T_TRY(lib_open_close(buf, NULL, 0));
	} else {
		T_TRY(lib_open_close(buf, NULL, 0));
	}
	devmemtcp_buf_free(buf);
	return 0;
}

static int rows(void)
{
	if (kv < 703)
		return rows_lts();
	T_TRY(rows_report());
	T_TRY(rows_tds());
	T_TRY(rows_buffers());
	T_TRY(rows_rss());
	T_TRY(rows_ntuple());
	T_TRY(rows_rss_offset());
	T_TRY(rows_rings());
	T_TRY(rows_channels());
	T_TRY(rows_bound());
	return 0;
}

int main(int argc, char **argv)
{
	char *nargv[3];
	int ret;

	if (argc != 3 || (strcmp(argv[2], "rows") && strcmp(argv[2], "lib") &&
			  strcmp(argv[2], "state"))) {
		fprintf(stderr, "usage: %s gve|bnxt|mlx5|fbnic rows|lib|state\n", argv[0]);
		return 2;
	}
	prof = argv[1];
	nargv[0] = argv[0];
	nargv[1] = (char *)VM_RX_IF;
	nargv[2] = NULL;
	T_TRY(nic_init(2, nargv, &ctx, &ifname));
	kv = t_kernel_version();
	ifindex = (int)if_nametoindex(ifname);
	T_CHECK(dmt_nl_open(&gnl, NETLINK_GENERIC) == 0 && dmt_nl_open(&rnl, NETLINK_ROUTE) == 0,
		"netlink");
	T_CHECK(dmt_nl_ethtool_family(gnl, &efam) == 0 && dmt_nl_netdev_family(gnl, &nfam) == 0,
		"families");
	T_CHECK(dmt_eth_init(&eth, &eerr, gnl, ifname) == 0, "eth: %s", eerr.msg);
	if (!strcmp(argv[2], "state")) {
		char *st = dump_state();

		fputs(st, stdout);
		free(st);
		return 0;
	}
	T_CHECK(t_udmabuf(ctx, 2u << 20, &buf4k) == 0, "udmabuf");
	if (!strcmp(argv[2], "lib")) {
		ret = lib();
	} else {
		DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
			       .size = 2u << 20, .flags = DEVMEMTCP_BUF_HUGETLB);

		T_CHECK(kv < 703 || devmemtcp_buf_new(ctx, &bo, &buf2m) == 0,
			"hugetlb udmabuf: %s", devmemtcp_ctx_errmsg(ctx));
		ret = rows();
	}
	if (!ret)
		printf("test-profile %s %s: ok\n", prof, argv[2]);
	return ret;
}
