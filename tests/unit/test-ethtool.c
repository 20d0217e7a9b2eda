// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The ethtool layer: ioctl struct layouts, netlink messages byte by byte,
 * parsing of replies recorded from a real kernel
 * (tests/unit/data/ethtool-replies.h, tests/tools/nlrecord-ethtool.py) and
 * of synthetic replies for attributes no device here has (tcp-data-split,
 * hds-thresh), flow specs and their text form.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "ethtool.h"
#include "nl.h"
#include "uapi.h"
#include "data/ethtool-replies.h"

static struct dmt_nl fake = { .portid = REC_ETH_PORTID };

static void reset(void)
{
	fake.portid = REC_ETH_PORTID;
	fake.extack[0] = '\0';
	fake.bad_attr_off = 0;
	fake.miss_type = 0;
}

/* ---- the SIOCETHTOOL ABI: struct layouts on LP64 ---- */

static void test_layouts(void **state)
{
	assert_int_equal(sizeof(struct ethtool_rxnfc), 192);
	assert_int_equal(offsetof(struct ethtool_rxnfc, flow_type), 4);
	assert_int_equal(offsetof(struct ethtool_rxnfc, data), 8);
	assert_int_equal(offsetof(struct ethtool_rxnfc, fs), 16);
	assert_int_equal(offsetof(struct ethtool_rxnfc, rule_cnt), 184);
	assert_int_equal(offsetof(struct ethtool_rxnfc, rss_context), 184);
	assert_int_equal(offsetof(struct ethtool_rxnfc, rule_locs), 188);
	assert_int_equal(sizeof(struct ethtool_rx_flow_spec), 168);
	assert_int_equal(offsetof(struct ethtool_rx_flow_spec, h_u), 4);
	assert_int_equal(offsetof(struct ethtool_rx_flow_spec, h_ext), 56);
	assert_int_equal(offsetof(struct ethtool_rx_flow_spec, m_u), 76);
	assert_int_equal(offsetof(struct ethtool_rx_flow_spec, m_ext), 128);
	assert_int_equal(offsetof(struct ethtool_rx_flow_spec, ring_cookie), 152);
	assert_int_equal(offsetof(struct ethtool_rx_flow_spec, location), 160);
	assert_int_equal(sizeof(union ethtool_flow_union), 52);
	assert_int_equal(offsetof(struct ethtool_tcpip4_spec, ip4dst), 4);
	assert_int_equal(offsetof(struct ethtool_tcpip4_spec, psrc), 8);
	assert_int_equal(offsetof(struct ethtool_tcpip4_spec, pdst), 10);
	assert_int_equal(offsetof(struct ethtool_tcpip6_spec, ip6dst), 16);
	assert_int_equal(offsetof(struct ethtool_tcpip6_spec, psrc), 32);
	assert_int_equal(offsetof(struct ethtool_tcpip6_spec, pdst), 34);
	assert_int_equal(offsetof(struct ethtool_rxfh, indir_size), 8);
	assert_int_equal(offsetof(struct ethtool_rxfh, hfunc), 16);
	assert_int_equal(offsetof(struct ethtool_rxfh, rss_config), 24);
	assert_int_equal(ETHTOOL_SRXCLSRLINS, 0x32);
	assert_int_equal(ETHTOOL_SRXCLSRLDEL, 0x31);
	assert_int_equal(ETHTOOL_GRXCLSRLALL, 0x30);
	assert_int_equal(ETHTOOL_GRSSH, 0x46);
	assert_int_equal(ETHTOOL_SRSSH, 0x47);
	assert_int_equal(ETH_RXFH_CONTEXT_ALLOC, 0xffffffffu);
	assert_int_equal(FLOW_RSS, 0x20000000);
	assert_int_equal(TCP_V6_FLOW, 0x05);
}

/* ---- messages ---- */

static const uint8_t *payload(const struct nlmsghdr *nlh)
{
	return (const uint8_t *)nlh + sizeof(*nlh);
}

static void test_rings_get_msg(void **state)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_eth_rings_get_msg(buf, 21, 3);
	static const uint8_t want[] = {
		15, 1, 0, 0,			/* RINGS_GET, version 1 */
		12, 0, 0x01, 0x80,		/* HEADER, nested */
		8, 0, 1, 0, 3, 0, 0, 0,		/* DEV_INDEX 3 */
	};

	assert_int_equal(nlh->nlmsg_len, 16 + sizeof(want));
	assert_int_equal(nlh->nlmsg_type, 21);
	assert_memory_equal(payload(nlh), want, sizeof(want));
}

static void test_rings_set_msg(void **state)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = dmt_eth_rings_set_msg(buf, 21, 3, 2, 0);
	static const uint8_t want[] = {
		16, 1, 0, 0,			/* RINGS_SET */
		12, 0, 0x01, 0x80, 8, 0, 1, 0, 3, 0, 0, 0,
		5, 0, 11, 0, 2, 0, 0, 0,	/* TCP_DATA_SPLIT = ENABLED */
		8, 0, 17, 0, 0, 0, 0, 0,	/* HDS_THRESH = 0 */
	};

	/* the bytes as dmt_nl_talk sends them: libmnl < 1.0.5 leaves the
	 * padding after the u8 uninitialised, talk zeroes it */
	dmt_nl_zero_padding(nlh);
	assert_int_equal(nlh->nlmsg_len, 16 + sizeof(want));
	assert_memory_equal(payload(nlh), want, sizeof(want));

	/* unchanged attributes are left out */
	nlh = dmt_eth_rings_set_msg(buf, 21, 3, -1, 256);
	assert_int_equal(nlh->nlmsg_len, 16 + 4 + 12 + 8);
	assert_int_equal(payload(nlh)[18], 17);
	assert_int_equal(payload(nlh)[20], 0);
	assert_int_equal(payload(nlh)[21], 1);	/* 256 little endian */
	nlh = dmt_eth_rings_set_msg(buf, 21, 3, 0, -1);
	assert_int_equal(nlh->nlmsg_len, 16 + 4 + 12 + 8);
	assert_int_equal(payload(nlh)[18], 11);
	assert_int_equal(payload(nlh)[20], 0);	/* UNKNOWN: back to auto */
}

static void test_feature_set_msg(void **state)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	static const uint8_t want_on[] = {
		12, 1, 0, 0,				/* FEATURES_SET */
		20, 0, 0x01, 0x80,			/* HEADER */
		8, 0, 1, 0, 3, 0, 0, 0,			/* DEV_INDEX 3 */
		8, 0, 3, 0, 2, 0, 0, 0,			/* FLAGS OMIT_REPLY */
		40, 0, 0x03, 0x80,			/* WANTED */
		36, 0, 0x03, 0x80,			/* BITS */
		32, 0, 0x01, 0x80,			/* BIT */
		21, 0, 2, 0, 'r', 'x', '-', 'n', 't', 'u', 'p', 'l', 'e', '-',
		'f', 'i', 'l', 't', 'e', 'r', 0, 0, 0, 0,	/* NAME */
		4, 0, 3, 0,				/* VALUE */
	};

	nlh = dmt_eth_feature_set_msg(buf, 21, 3, "rx-ntuple-filter", true);
	dmt_nl_zero_padding(nlh);	/* as sent (the NAME's padding) */
	assert_int_equal(nlh->nlmsg_len, 16 + sizeof(want_on));
	assert_memory_equal(payload(nlh), want_on, sizeof(want_on));
	/* off: the same bit listed without VALUE (masked bitset) */
	nlh = dmt_eth_feature_set_msg(buf, 21, 3, "rx-ntuple-filter", false);
	assert_int_equal(nlh->nlmsg_len, 16 + sizeof(want_on) - 4);
	assert_int_equal(payload(nlh)[24], 36);
}

static void test_rss_msgs(void **state)
{
	char buf[8192];
	static const uint32_t t[4] = { 0, 1, 2, 0 };
	struct nlmsghdr *nlh;
	const struct nlattr *a;
	int seen = 0;

	nlh = dmt_eth_rss_get_msg(buf, 21, 3, 0, false);
	assert_int_equal(payload(nlh)[0], 38);
	assert_int_equal(nlh->nlmsg_len, 16 + 4 + 12);
	nlh = dmt_eth_rss_get_msg(buf, 21, 3, 5, false);
	assert_int_equal(nlh->nlmsg_len, 16 + 4 + 12 + 8);
	nlh = dmt_eth_rss_get_msg(buf, 21, 3, 5, true);
	assert_true(nlh->nlmsg_flags & NLM_F_DUMP);
	assert_int_equal(nlh->nlmsg_len, 16 + 4 + 12);

	nlh = dmt_eth_rss_set_msg(buf, 21, 3, 7, t, 4);
	assert_int_equal(payload(nlh)[0], 48);
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		switch (mnl_attr_get_type(a)) {
		case DMT_ETHTOOL_A_RSS_CONTEXT:
			assert_int_equal(mnl_attr_get_u32(a), 7);
			seen |= 1;
			break;
		case DMT_ETHTOOL_A_RSS_INDIR:
			assert_int_equal(mnl_attr_get_payload_len(a), 16);
			assert_memory_equal(mnl_attr_get_payload(a), t, 16);
			seen |= 2;
			break;
		}
	}
	assert_int_equal(seen, 3);
}

/* ---- replies ---- */

static struct nlmsghdr *reply(char *buf, uint8_t cmd)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, 21, cmd, 1, 0);
	struct nlattr *h = mnl_attr_nest_start(nlh, 1);

	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_HEADER_DEV_INDEX, 3);
	mnl_attr_put_strz(nlh, DMT_ETHTOOL_A_HEADER_DEV_NAME, "eth0");
	mnl_attr_nest_end(nlh, h);
	return nlh;
}

static void test_rings_parse(void **state)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = reply(buf, DMT_ETHTOOL_MSG_RINGS_GET_REPLY);
	struct dmt_rings r;

	/* a 6.14+ driver with header split (bnxt-like defaults) */
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX_MAX, 8192);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_TX_MAX, 4096);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX, 1024);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_TX, 512);
	mnl_attr_put_u8(nlh, DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT, 1);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH, 256);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH_MAX, 1023);
	assert_int_equal(dmt_eth_rings_parse(nlh, &r), 0);
	assert_int_equal(r.rx_max, 8192);
	assert_int_equal(r.tx_max, 4096);
	assert_int_equal(r.rx, 1024);
	assert_int_equal(r.tx, 512);
	assert_true(r.has_tds);
	assert_int_equal(r.tds, DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED);
	assert_true(r.has_hds);
	assert_int_equal(r.hds_thresh, 256);
	assert_true(r.has_hds_max);
	assert_int_equal(r.hds_thresh_max, 1023);

	/* 6.12: header split but no hds-thresh attributes */
	nlh = reply(buf, DMT_ETHTOOL_MSG_RINGS_GET_REPLY);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX, 1024);
	mnl_attr_put_u8(nlh, DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT, 2);
	assert_int_equal(dmt_eth_rings_parse(nlh, &r), 0);
	assert_true(r.has_tds);
	assert_int_equal(r.tds, 2);
	assert_false(r.has_hds);
	assert_false(r.has_hds_max);

	/* no header split at all (virtio-like) */
	nlh = reply(buf, DMT_ETHTOOL_MSG_RINGS_GET_REPLY);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX, 256);
	assert_int_equal(dmt_eth_rings_parse(nlh, &r), 0);
	assert_false(r.has_tds);

	/* a truncated hds-thresh is rejected */
	nlh = reply(buf, DMT_ETHTOOL_MSG_RINGS_GET_REPLY);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH, 2, "\0\0");
	assert_int_equal(dmt_eth_rings_parse(nlh, &r), -EBADMSG);
}

static int channels_cb(const struct nlmsghdr *nlh, void *data)
{
	assert_int_equal(dmt_eth_channels_parse(nlh, data), 0);
	return MNL_CB_OK;
}

static void test_channels_recorded(void **state)
{
	struct dmt_channels c;
	int err = 1;

	reset();
	memset(&c, 0xff, sizeof(c));
	assert_int_equal(dmt_nl_parse(&fake, rec_channels_get_va,
				      sizeof(rec_channels_get_va),
				      REC_CHANNELS_GET_VA_SEQ, channels_cb, &c,
				      &err),
			 MNL_CB_STOP);
	assert_int_equal(err, 0);
	assert_int_equal(c.rx, 4);
	assert_int_equal(c.tx, 3);
	assert_int_equal(c.combined, 0);
	assert_int_equal(c.rx_max, 4);
	assert_int_equal(c.tx_max, 3);
}

struct feat_req {
	const char *name;
	struct dmt_feature f;
};

static int features_cb(const struct nlmsghdr *nlh, void *data)
{
	struct feat_req *r = data;

	assert_int_equal(dmt_eth_features_parse(nlh, r->name, &r->f), 0);
	return MNL_CB_OK;
}

static void test_features_recorded(void **state)
{
	struct feat_req r = { .name = "rx-ntuple-filter" };
	int err = 1;

	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_features_get_va,
				      sizeof(rec_features_get_va),
				      REC_FEATURES_GET_VA_SEQ, features_cb, &r,
				      &err),
			 MNL_CB_STOP);
	assert_int_equal(err, 0);
	/* veth: "ntuple-filters: off [fixed]" */
	assert_true(r.f.present);
	assert_false(r.f.hw);
	assert_false(r.f.active);
	assert_false(r.f.wanted);

	r = (struct feat_req){ .name = "tx-scatter-gather" };
	dmt_nl_parse(&fake, rec_features_get_va, sizeof(rec_features_get_va),
		     REC_FEATURES_GET_VA_SEQ, features_cb, &r, &err);
	assert_true(r.f.present);
	assert_true(r.f.hw);
	assert_true(r.f.active);
	assert_true(r.f.wanted);

	r = (struct feat_req){ .name = "no-such-feature" };
	dmt_nl_parse(&fake, rec_features_get_va, sizeof(rec_features_get_va),
		     REC_FEATURES_GET_VA_SEQ, features_cb, &r, &err);
	assert_false(r.f.present);
}

static void test_errors_recorded(void **state)
{
	int err = 0;

	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_rings_get_va,
				      sizeof(rec_rings_get_va),
				      REC_RINGS_GET_VA_SEQ, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -EOPNOTSUPP);
	reset();
	err = 0;
	assert_int_equal(dmt_nl_parse(&fake, rec_rss_get_va,
				      sizeof(rec_rss_get_va),
				      REC_RSS_GET_VA_SEQ, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -EOPNOTSUPP);
	/* turning on a fixed feature: the kernel answers with a reply
	 * telling what it could not change, or an error */
	reset();
	err = 1;
	dmt_nl_parse(&fake, rec_features_set_ntuple_va,
		     sizeof(rec_features_set_ntuple_va),
		     REC_FEATURES_SET_NTUPLE_VA_SEQ, NULL, NULL, &err);
	assert_true(err <= 0);
}

static void test_rss_parse(void **state)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = reply(buf, DMT_ETHTOOL_MSG_RSS_GET_REPLY);
	uint32_t t[8] = { 0, 1, 2, 3, 0, 1, 2, 3 };
	uint8_t key[40];
	struct dmt_rss rss, copy;

	for (int i = 0; i < 40; i++)
		key[i] = (uint8_t)i;
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_CONTEXT, 3);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_HFUNC, 1);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RSS_INDIR, sizeof(t), t);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RSS_HKEY, sizeof(key), key);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_INPUT_XFRM, 0);
	assert_int_equal(dmt_eth_rss_parse(nlh, &rss), 0);
	assert_int_equal(rss.context, 3);
	assert_int_equal(rss.hfunc, 1);
	assert_int_equal(rss.indir_size, 8);
	assert_memory_equal(rss.indir, t, sizeof(t));
	assert_int_equal(rss.key_size, 40);
	assert_memory_equal(rss.key, key, 40);
	assert_int_equal(dmt_rss_copy(&copy, &rss), 0);
	assert_memory_equal(copy.indir, t, sizeof(t));
	dmt_rss_free(&rss);
	dmt_rss_free(&copy);

	nlh = reply(buf, DMT_ETHTOOL_MSG_RSS_GET_REPLY);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RSS_INDIR, 6, t);
	assert_int_equal(dmt_eth_rss_parse(nlh, &rss), -EBADMSG);
	assert_null(rss.indir);
}

/* ---- flows ---- */

static void test_flow_spec_v4(void **state)
{
	struct devmemtcp_flow f;
	struct ethtool_rx_flow_spec fs;
	const uint8_t *b = (const uint8_t *)&fs;
	char s[160];

	assert_int_equal(devmemtcp_flow_parse("src-ip 10.0.0.2 src-port 40000 dst-ip 10.0.0.1 dst-port 5201", &f), 0);
	assert_int_equal(f.family, AF_INET);
	assert_int_equal(dmt_flow_to_spec(&f, 3, false, &fs), 0);
	assert_int_equal(fs.flow_type, TCP_V4_FLOW);
	/* h_u at 4: ip4src, ip4dst, psrc, pdst in network order */
	assert_memory_equal(b + 4, "\x0a\x00\x00\x02\x0a\x00\x00\x01\x9c\x40\x14\x51", 12);
	/* m_u at 76: all ones on the compared fields, tos not compared */
	assert_memory_equal(b + 76, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00", 13);
	assert_int_equal(fs.ring_cookie, 3);
	assert_int_equal(fs.location, RX_CLS_LOC_ANY);
	dmt_spec_str(&fs, 0, s, sizeof(s));
	assert_string_equal(s, "tcp4 10.0.0.2:40000 -> 10.0.0.1:5201 queue 3");

	/* partial: destination port only, to an RSS context */
	assert_int_equal(devmemtcp_flow_parse("tcp4 dst-port 5201", &f), 0);
	assert_int_equal(dmt_flow_to_spec(&f, 3, true, &fs), 0);
	assert_int_equal(fs.flow_type, TCP_V4_FLOW | FLOW_RSS);
	assert_int_equal(fs.ring_cookie, 0);
	assert_int_equal(fs.m_u.tcp_ip4_spec.ip4src, 0);
	assert_int_equal(fs.m_u.tcp_ip4_spec.ip4dst, 0);
	assert_int_equal(fs.m_u.tcp_ip4_spec.psrc, 0);
	assert_int_equal(fs.m_u.tcp_ip4_spec.pdst, 0xffff);
	dmt_spec_str(&fs, 2, s, sizeof(s));
	assert_string_equal(s, "tcp4 *:* -> *:5201 context 2");

	/* a prefix masks the host bits of the address */
	assert_int_equal(devmemtcp_flow_parse("dst-ip 192.168.7.9/24", &f), 0);
	assert_int_equal(dmt_flow_to_spec(&f, 1, false, &fs), 0);
	assert_memory_equal(b + 8, "\xc0\xa8\x07\x00", 4);
	assert_memory_equal(b + 80, "\xff\xff\xff\x00", 4);
	dmt_spec_str(&fs, 0, s, sizeof(s));
	assert_string_equal(s, "tcp4 *:* -> 192.168.7.0/24:* queue 1");
}

static void test_flow_spec_v6(void **state)
{
	struct devmemtcp_flow f;
	struct ethtool_rx_flow_spec fs;
	const uint8_t *b = (const uint8_t *)&fs;
	char s[160];

	assert_int_equal(devmemtcp_flow_parse("tcp6 src-ip 2001:db8::2 dst-ip 2001:db8:1::/48 dst-port 9000 queue 1", &f), 0);
	assert_int_equal(f.family, AF_INET6);
	assert_true(f.flags & DEVMEMTCP_FLOW_QUEUE);
	assert_int_equal(f.queue, 1);
	assert_int_equal(dmt_flow_to_spec(&f, 7, false, &fs), 0);
	assert_int_equal(fs.flow_type, TCP_V6_FLOW);
	/* ip6src at 4, ip6dst at 20, psrc at 36, pdst at 38 */
	assert_memory_equal(b + 4, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x02", 16);
	assert_memory_equal(b + 20, "\x20\x01\x0d\xb8\0\x01\0\0\0\0\0\0\0\0\0\0", 16);
	assert_memory_equal(b + 38, "\x23\x28", 2);
	/* masks: /128, /48, no source port, destination port */
	assert_memory_equal(b + 76, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 16);
	assert_memory_equal(b + 92, "\xff\xff\xff\xff\xff\xff\0\0\0\0\0\0\0\0\0\0", 16);
	assert_memory_equal(b + 108, "\0\0\xff\xff", 4);
	assert_int_equal(fs.ring_cookie, 7);
	dmt_spec_str(&fs, 0, s, sizeof(s));
	assert_string_equal(s, "tcp6 [2001:db8::2]:* -> [2001:db8:1::/48]:9000 queue 7");
}

static void test_flow_parse_errors(void **state)
{
	struct devmemtcp_flow f;

	memset(&f, 0x5a, sizeof(f));
	assert_int_equal(devmemtcp_flow_parse("", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("tcp4", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("dst-ip 10.0.0.1 src-ip ::1", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("tcp6 dst-ip 10.0.0.1", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("dst-port 70000", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("dst-port", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("dst-ip 10.0.0.1/33", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("dst-ip 10.0.0.300", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("to 10.0.0.1", &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse(NULL, &f), -EINVAL);
	assert_int_equal(devmemtcp_flow_parse("dst-port 1", NULL), -EINVAL);
	/* failures leave the flow alone */
	assert_int_equal(f.family, 0x5a5a5a5a);

	/* a flow without a match field matches everything */
	memset(&f, 0, sizeof(f));
	f.family = AF_INET;
	{
		struct ethtool_rx_flow_spec fs;

		assert_int_equal(dmt_flow_to_spec(&f, 0, false, &fs), -EINVAL);
		f.family = AF_UNIX;
		f.dst_port_mask = 0xffff;
		assert_int_equal(dmt_flow_to_spec(&f, 0, false, &fs), -EAFNOSUPPORT);
	}
}

static void test_spec_equal(void **state)
{
	struct devmemtcp_flow f;
	struct ethtool_rx_flow_spec a, b;

	devmemtcp_flow_parse("dst-ip 10.0.0.1 dst-port 5201", &f);
	dmt_flow_to_spec(&f, 2, false, &a);
	dmt_flow_to_spec(&f, 2, false, &b);
	b.location = 17;	/* where it lives does not matter */
	assert_true(dmt_spec_equal(&a, &b));
	dmt_flow_to_spec(&f, 3, false, &b);
	assert_false(dmt_spec_equal(&a, &b));
}

static void test_kernel_version(void **state)
{
	assert_int_equal(dmt_kernel_version("6.18.44-fc-v669"), 0x06122c);
	assert_int_equal(dmt_kernel_version("7.0"), 0x070000);
	assert_int_equal(dmt_kernel_version("6.12.0-1-amd64"), 0x060c00);
	assert_int_equal(dmt_kernel_version("bogus"), 0);
	assert_int_equal(dmt_kernel_version(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layouts),
		cmocka_unit_test(test_rings_get_msg),
		cmocka_unit_test(test_rings_set_msg),
		cmocka_unit_test(test_feature_set_msg),
		cmocka_unit_test(test_rss_msgs),
		cmocka_unit_test(test_rings_parse),
		cmocka_unit_test(test_channels_recorded),
		cmocka_unit_test(test_features_recorded),
		cmocka_unit_test(test_errors_recorded),
		cmocka_unit_test(test_rss_parse),
		cmocka_unit_test(test_flow_spec_v4),
		cmocka_unit_test(test_flow_spec_v6),
		cmocka_unit_test(test_flow_parse_errors),
		cmocka_unit_test(test_spec_equal),
		cmocka_unit_test(test_kernel_version),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
