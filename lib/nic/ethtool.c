// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The ethtool layer: genl family "ethtool" for rings, channels, features
 * and RSS (where the kernel has the netlink op), SIOCETHTOOL for RSS on
 * older kernels, RSS contexts and ntuple rules.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <dirent.h>
#include <unistd.h>
#include <linux/ethtool_netlink.h>
#include <linux/sockios.h>

#include "ethtool.h"
#include "core/uapi.h"

/* The DMT_ ids of uapi.h must agree with the system header where it has
 * them. */
_Static_assert(DMT_ETHTOOL_MSG_FEATURES_GET == ETHTOOL_MSG_FEATURES_GET, "");
_Static_assert(DMT_ETHTOOL_MSG_FEATURES_SET == ETHTOOL_MSG_FEATURES_SET, "");
_Static_assert(DMT_ETHTOOL_MSG_RINGS_GET == ETHTOOL_MSG_RINGS_GET, "");
_Static_assert(DMT_ETHTOOL_MSG_RINGS_SET == ETHTOOL_MSG_RINGS_SET, "");
_Static_assert(DMT_ETHTOOL_MSG_CHANNELS_GET == ETHTOOL_MSG_CHANNELS_GET, "");
_Static_assert(DMT_ETHTOOL_MSG_RINGS_GET_REPLY == ETHTOOL_MSG_RINGS_GET_REPLY, "");
_Static_assert(DMT_ETHTOOL_MSG_CHANNELS_GET_REPLY == ETHTOOL_MSG_CHANNELS_GET_REPLY, "");
_Static_assert(DMT_ETHTOOL_MSG_FEATURES_GET_REPLY == ETHTOOL_MSG_FEATURES_GET_REPLY, "");
_Static_assert(DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT == ETHTOOL_A_RINGS_TCP_DATA_SPLIT, "");
_Static_assert(DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT == ETHTOOL_A_CHANNELS_COMBINED_COUNT, "");
_Static_assert(DMT_ETHTOOL_A_FEATURES_NOCHANGE == ETHTOOL_A_FEATURES_NOCHANGE, "");
_Static_assert(DMT_ETHTOOL_A_BITSET_MASK == ETHTOOL_A_BITSET_MASK, "");
/* SIOCETHTOOL passes these structs as they are: their LP64 layout is the
 * kernel's ioctl ABI (include/uapi/linux/ethtool.h), so check it here. */
#if defined(__LP64__)
_Static_assert(sizeof(struct ethtool_rxnfc) == 192, "ethtool_rxnfc");
_Static_assert(sizeof(struct ethtool_rx_flow_spec) == 168, "rx_flow_spec");
_Static_assert(offsetof(struct ethtool_rxnfc, fs) == 16, "rxnfc.fs");
_Static_assert(offsetof(struct ethtool_rxnfc, rss_context) == 184, "");
_Static_assert(offsetof(struct ethtool_rxnfc, rule_locs) == 188, "");
#endif
_Static_assert(offsetof(struct ethtool_rx_flow_spec, m_u) == 76, "");
_Static_assert(offsetof(struct ethtool_rx_flow_spec, location) == 160, "");
_Static_assert(offsetof(struct ethtool_rxfh, rss_config) == 24, "");

#define RXH_XFRM_NO_CHANGE_ 0xff
#define MAX_INDIR 4096		/* no driver has more (mlx5: 2048) */
#define MAX_RULES 65536

const struct dmt_eth_ops *dmt_eth_ops_override;
void *dmt_eth_priv_override;

int dmt_kernel_version(const char *release)
{
	unsigned int a = 0, b = 0, c = 0;

	if (!release || sscanf(release, "%u.%u.%u", &a, &b, &c) < 2)
		return 0;
	if (c > 255)
		c = 255;
	return (int)((a << 16) | (b << 8) | c);
}

/* "rings-get on eth0 failed: EOPNOTSUPP (kernel: ...)" on e->err. */
static int eth_fail(struct dmt_eth *e, int code, const char *what)
{
	const char *ext = e->nl && e->nl->extack[0] ? e->nl->extack : NULL;

	if (ext)
		return dmt_err_set(e->err, code,
				   "%s on %s failed: %s (kernel: %s)", what,
				   e->ifname, dmt_errno_name(code), ext);
	return dmt_err_set(e->err, code, "%s on %s failed: %s", what,
			   e->ifname, dmt_errno_name(code));
}

/* ---------------------------------------------------------------------- */
/* netlink message builders and parsers                                    */

static void put_header(struct nlmsghdr *nlh, uint16_t attr, int ifindex,
		       uint32_t flags)
{
	struct nlattr *nest = mnl_attr_nest_start(nlh, attr);

	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_HEADER_DEV_INDEX, (uint32_t)ifindex);
	if (flags)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_HEADER_FLAGS, flags);
	mnl_attr_nest_end(nlh, nest);
}

struct nlmsghdr *dmt_eth_rings_get_msg(void *buf, uint16_t family, int ifindex)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_RINGS_GET, DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_RINGS_HEADER, ifindex, 0);
	return nlh;
}

struct nlmsghdr *dmt_eth_rings_set_msg(void *buf, uint16_t family, int ifindex,
				       int tds, int64_t hds)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_RINGS_SET, DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_RINGS_HEADER, ifindex, 0);
	if (tds >= 0)
		mnl_attr_put_u8(nlh, DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT,
				(uint8_t)tds);
	if (hds >= 0)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH,
				 (uint32_t)hds);
	return nlh;
}

static uint32_t attr_u32(const struct nlattr *a)
{
	return mnl_attr_get_payload_len(a) >= 4 ? mnl_attr_get_u32(a) : 0;
}

int dmt_eth_rings_parse(const struct nlmsghdr *nlh, struct dmt_rings *r)
{
	const struct nlattr *a;

	memset(r, 0, sizeof(*r));
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		switch (mnl_attr_get_type(a)) {
		case DMT_ETHTOOL_A_RINGS_RX_MAX: r->rx_max = attr_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_TX_MAX: r->tx_max = attr_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_RX: r->rx = attr_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_TX: r->tx = attr_u32(a); break;
		case DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT:
			if (mnl_attr_get_payload_len(a) < 1)
				return -EBADMSG;
			r->has_tds = true;
			r->tds = mnl_attr_get_u8(a);
			break;
		case DMT_ETHTOOL_A_RINGS_HDS_THRESH:
			if (mnl_attr_get_payload_len(a) < 4)
				return -EBADMSG;
			r->has_hds = true;
			r->hds_thresh = mnl_attr_get_u32(a);
			break;
		case DMT_ETHTOOL_A_RINGS_HDS_THRESH_MAX:
			if (mnl_attr_get_payload_len(a) < 4)
				return -EBADMSG;
			r->has_hds_max = true;
			r->hds_thresh_max = mnl_attr_get_u32(a);
			break;
		}
	}
	return 0;
}

struct nlmsghdr *dmt_eth_channels_get_msg(void *buf, uint16_t family,
					  int ifindex)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_CHANNELS_GET, DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_CHANNELS_HEADER, ifindex, 0);
	return nlh;
}

int dmt_eth_channels_parse(const struct nlmsghdr *nlh, struct dmt_channels *c)
{
	const struct nlattr *a;

	memset(c, 0, sizeof(*c));
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		uint32_t v = attr_u32(a);

		switch (mnl_attr_get_type(a)) {
		case DMT_ETHTOOL_A_CHANNELS_RX_MAX: c->rx_max = v; break;
		case DMT_ETHTOOL_A_CHANNELS_TX_MAX: c->tx_max = v; break;
		case DMT_ETHTOOL_A_CHANNELS_OTHER_MAX: c->other_max = v; break;
		case DMT_ETHTOOL_A_CHANNELS_COMBINED_MAX: c->combined_max = v; break;
		case DMT_ETHTOOL_A_CHANNELS_RX_COUNT: c->rx = v; break;
		case DMT_ETHTOOL_A_CHANNELS_TX_COUNT: c->tx = v; break;
		case DMT_ETHTOOL_A_CHANNELS_OTHER_COUNT: c->other = v; break;
		case DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT: c->combined = v; break;
		}
	}
	return 0;
}

/* Verbose (named) bitsets: no COMPACT flag in the request header, so every
 * listed bit carries its name and the library needs no string set. */
struct nlmsghdr *dmt_eth_features_get_msg(void *buf, uint16_t family,
					  int ifindex)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_FEATURES_GET, DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_FEATURES_HEADER, ifindex, 0);
	return nlh;
}

/* 1 if name is set in bitset attribute bs, 0 if listed clear or absent
 * (*listed tells which). */
static int bitset_bit(const struct nlattr *bs, const char *name, bool *listed)
{
	const struct nlattr *a, *bits = NULL;
	bool nomask = false;

	*listed = false;
	mnl_attr_for_each_nested(a, bs) {
		if (mnl_attr_get_type(a) == DMT_ETHTOOL_A_BITSET_NOMASK)
			nomask = true;
		else if (mnl_attr_get_type(a) == DMT_ETHTOOL_A_BITSET_BITS)
			bits = a;
	}
	if (!bits)
		return 0;
	mnl_attr_for_each_nested(a, bits) {
		const struct nlattr *b;
		const char *bname = NULL;
		bool value = false;

		if (mnl_attr_get_type(a) != DMT_ETHTOOL_A_BITSET_BITS_BIT)
			continue;
		mnl_attr_for_each_nested(b, a) {
			if (mnl_attr_get_type(b) == DMT_ETHTOOL_A_BITSET_BIT_NAME &&
			    mnl_attr_validate(b, MNL_TYPE_NUL_STRING) == 0)
				bname = mnl_attr_get_str(b);
			else if (mnl_attr_get_type(b) ==
				 DMT_ETHTOOL_A_BITSET_BIT_VALUE)
				value = true;
		}
		if (bname && strcmp(bname, name) == 0) {
			*listed = true;
			/* nomask: only set bits are listed */
			return nomask || value;
		}
	}
	return 0;
}

int dmt_eth_features_parse(const struct nlmsghdr *nlh, const char *name,
			   struct dmt_feature *f)
{
	const struct nlattr *a;
	bool listed;

	memset(f, 0, sizeof(*f));
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		switch (mnl_attr_get_type(a)) {
		case DMT_ETHTOOL_A_FEATURES_HW:
			f->hw = bitset_bit(a, name, &listed);
			f->present |= listed;
			break;
		case DMT_ETHTOOL_A_FEATURES_WANTED:
			f->wanted = bitset_bit(a, name, &listed);
			f->present |= listed;
			break;
		case DMT_ETHTOOL_A_FEATURES_ACTIVE:
			f->active = bitset_bit(a, name, &listed);
			f->present |= listed;
			break;
		case DMT_ETHTOOL_A_FEATURES_NOCHANGE:
			f->nochange = bitset_bit(a, name, &listed);
			f->present |= listed;
			break;
		}
	}
	return 0;
}

struct nlmsghdr *dmt_eth_feature_set_msg(void *buf, uint16_t family,
					 int ifindex, const char *name, bool on)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_FEATURES_SET, DMT_ETHTOOL_FAMILY_VERSION, 0);
	struct nlattr *bs, *bits, *bit;

	put_header(nlh, DMT_ETHTOOL_A_FEATURES_HEADER, ifindex,
		   DMT_ETHTOOL_FLAG_OMIT_REPLY);
	/* With a mask (no NOMASK): only the listed bit changes. */
	bs = mnl_attr_nest_start(nlh, DMT_ETHTOOL_A_FEATURES_WANTED);
	bits = mnl_attr_nest_start(nlh, DMT_ETHTOOL_A_BITSET_BITS);
	bit = mnl_attr_nest_start(nlh, DMT_ETHTOOL_A_BITSET_BITS_BIT);
	mnl_attr_put_strz(nlh, DMT_ETHTOOL_A_BITSET_BIT_NAME, name);
	if (on)
		mnl_attr_put(nlh, DMT_ETHTOOL_A_BITSET_BIT_VALUE, 0, NULL);
	mnl_attr_nest_end(nlh, bit);
	mnl_attr_nest_end(nlh, bits);
	mnl_attr_nest_end(nlh, bs);
	return nlh;
}

struct nlmsghdr *dmt_eth_rss_get_msg(void *buf, uint16_t family, int ifindex,
				     uint32_t context, bool dump)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_RSS_GET, DMT_ETHTOOL_FAMILY_VERSION,
		dump ? NLM_F_DUMP : 0);

	put_header(nlh, DMT_ETHTOOL_A_RSS_HEADER, ifindex, 0);
	if (!dump && context)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_CONTEXT, context);
	return nlh;
}

void dmt_rss_free(struct dmt_rss *rss)
{
	if (!rss)
		return;
	free(rss->indir);
	free(rss->key);
	rss->indir = NULL;
	rss->key = NULL;
}

int dmt_rss_copy(struct dmt_rss *dst, const struct dmt_rss *src)
{
	*dst = *src;
	dst->indir = NULL;
	dst->key = NULL;
	if (src->indir_size) {
		dst->indir = dmt_malloc(src->indir_size * sizeof(uint32_t));
		if (!dst->indir)
			return -ENOMEM;
		memcpy(dst->indir, src->indir, src->indir_size * sizeof(uint32_t));
	}
	if (src->key_size) {
		dst->key = dmt_malloc(src->key_size);
		if (!dst->key) {
			dmt_rss_free(dst);
			return -ENOMEM;
		}
		memcpy(dst->key, src->key, src->key_size);
	}
	return 0;
}

int dmt_eth_rss_parse(const struct nlmsghdr *nlh, struct dmt_rss *rss)
{
	const struct nlattr *a;
	int err = 0;

	memset(rss, 0, sizeof(*rss));
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		uint16_t len = mnl_attr_get_payload_len(a);

		switch (mnl_attr_get_type(a)) {
		case DMT_ETHTOOL_A_RSS_CONTEXT: rss->context = attr_u32(a); break;
		case DMT_ETHTOOL_A_RSS_HFUNC: rss->hfunc = attr_u32(a); break;
		case DMT_ETHTOOL_A_RSS_INPUT_XFRM:
			rss->input_xfrm = attr_u32(a);
			break;
		case DMT_ETHTOOL_A_RSS_INDIR:
			if (len % 4 || len / 4 > MAX_INDIR) {
				err = -EBADMSG;
				goto err;
			}
			free(rss->indir);
			rss->indir = len ? dmt_malloc(len) : NULL;
			if (len && !rss->indir) {
				err = -ENOMEM;
				goto err;
			}
			if (len)
				memcpy(rss->indir, mnl_attr_get_payload(a), len);
			rss->indir_size = len / 4;
			break;
		case DMT_ETHTOOL_A_RSS_HKEY:
			free(rss->key);
			rss->key = len ? dmt_malloc(len) : NULL;
			if (len && !rss->key) {
				err = -ENOMEM;
				goto err;
			}
			if (len)
				memcpy(rss->key, mnl_attr_get_payload(a), len);
			rss->key_size = len;
			break;
		}
	}
	return 0;
err:
	dmt_rss_free(rss);
	return err;
}

struct nlmsghdr *dmt_eth_rss_set_msg(void *buf, uint16_t family, int ifindex,
				     uint32_t context, const uint32_t *indir,
				     uint32_t n)
{
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, family,
		DMT_ETHTOOL_MSG_RSS_SET, DMT_ETHTOOL_FAMILY_VERSION, 0);

	put_header(nlh, DMT_ETHTOOL_A_RSS_HEADER, ifindex, 0);
	if (context)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_CONTEXT, context);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RSS_INDIR, n * sizeof(uint32_t), indir);
	return nlh;
}

/* ---------------------------------------------------------------------- */
/* netlink requests                                                        */

static int eth_family(struct dmt_eth *e, uint16_t *fam)
{
	int err;

	if (!e->nl)
		return -EOPNOTSUPP;
	if (!e->nl->ethtool_family) {
		/* Resolve the id and learn from the op list which RSS ops
		 * exist (RSS_GET 6.5, RSS_SET 6.17) in the same round trip,
		 * instead of trying them. */
		struct dmt_genl_family f;

		if (dmt_nl_family_get(e->nl, DMT_ETHTOOL_FAMILY_NAME, &f) == 0) {
			e->nl->ethtool_family = f.id;
			e->no_nl_rss_get =
				!dmt_nl_family_has_op(&f, DMT_ETHTOOL_MSG_RSS_GET);
			e->no_nl_rss_set =
				!dmt_nl_family_has_op(&f, DMT_ETHTOOL_MSG_RSS_SET);
		}
	}
	err = dmt_nl_ethtool_family(e->nl, fam);
	if (err < 0)
		return dmt_err_set(e->err, err,
				   "the kernel has no ethtool netlink family (%s): "
				   "it needs CONFIG_ETHTOOL_NETLINK (5.6 or newer)",
				   dmt_errno_name(err));
	return 0;
}

/* Request buffers: the largest message (RSS set of MAX_INDIR entries). */
#define REQ_SIZE (MNL_SOCKET_BUFFER_SIZE + MAX_INDIR * 4)

struct one_reply {
	int (*parse)(const struct nlmsghdr *nlh, void *out);
	void *out;
	int err;
	bool seen;
};

static int one_reply_cb(const struct nlmsghdr *nlh, void *data)
{
	struct one_reply *r = data;

	if (r->seen)
		return MNL_CB_OK;
	r->seen = true;
	r->err = r->parse(nlh, r->out);
	return r->err < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

static int talk_one(struct dmt_eth *e, struct nlmsghdr *req,
		    int (*parse)(const struct nlmsghdr *, void *), void *out,
		    const char *what)
{
	struct one_reply r = { .parse = parse, .out = out };
	int err = dmt_nl_talk(e->nl, req, parse ? one_reply_cb : NULL, &r);

	if (err == 0 && r.err < 0)
		err = r.err;
	if (err == 0 && parse && !r.seen)
		err = -EBADMSG;
	if (err < 0)
		return eth_fail(e, err, what);
	return 0;
}

static int parse_rings(const struct nlmsghdr *nlh, void *out)
{
	return dmt_eth_rings_parse(nlh, out);
}

static int parse_channels(const struct nlmsghdr *nlh, void *out)
{
	return dmt_eth_channels_parse(nlh, out);
}

static int real_rings_get(struct dmt_eth *e, struct dmt_rings *r)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint16_t fam;
	int err = eth_family(e, &fam);

	if (err < 0)
		return err;
	return talk_one(e, dmt_eth_rings_get_msg(buf, fam, e->ifindex),
			parse_rings, r, "rings-get");
}

static int real_rings_set(struct dmt_eth *e, int tds, int64_t hds)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint16_t fam;
	int err = eth_family(e, &fam);

	if (err < 0)
		return err;
	return talk_one(e, dmt_eth_rings_set_msg(buf, fam, e->ifindex, tds, hds),
			NULL, NULL, "rings-set");
}

static int real_channels_get(struct dmt_eth *e, struct dmt_channels *c)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint16_t fam;
	int err = eth_family(e, &fam);

	if (err < 0)
		return err;
	return talk_one(e, dmt_eth_channels_get_msg(buf, fam, e->ifindex),
			parse_channels, c, "channels-get");
}

struct feat_arg {
	const char *name;
	struct dmt_feature *f;
};

static int parse_features(const struct nlmsghdr *nlh, void *out)
{
	struct feat_arg *fa = out;

	return dmt_eth_features_parse(nlh, fa->name, fa->f);
}

static int real_feature_get(struct dmt_eth *e, const char *name,
			    struct dmt_feature *f)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct feat_arg fa = { name, f };
	uint16_t fam;
	int err = eth_family(e, &fam);

	if (err < 0)
		return err;
	return talk_one(e, dmt_eth_features_get_msg(buf, fam, e->ifindex),
			parse_features, &fa, "features-get");
}

static int real_feature_set(struct dmt_eth *e, const char *name, bool on)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint16_t fam;
	int err = eth_family(e, &fam);

	if (err < 0)
		return err;
	return talk_one(e, dmt_eth_feature_set_msg(buf, fam, e->ifindex, name, on),
			NULL, NULL, "features-set");
}

/* ---------------------------------------------------------------------- */
/* SIOCETHTOOL                                                             */

static int eth_ioctl(struct dmt_eth *e, void *data)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, e->ifname, sizeof(ifr.ifr_name) - 1);
	ifr.ifr_data = data;
	e->ioctls++;
	if (ioctl(e->ioctl_fd, SIOCETHTOOL, &ifr) < 0)
		return -errno;
	return 0;
}

static int ioctl_fail(struct dmt_eth *e, int code, const char *what)
{
	return dmt_err_set(e->err, code, "%s on %s failed: %s%s", what,
			   e->ifname, dmt_errno_name(code),
			   code == -EPERM ? " (needs CAP_NET_ADMIN)" : "");
}

int dmt_eth_drvinfo(struct dmt_eth *e, struct ethtool_drvinfo *info)
{
	int err;

	memset(info, 0, sizeof(*info));
	info->cmd = ETHTOOL_GDRVINFO;
	err = eth_ioctl(e, info);
	return err < 0 ? ioctl_fail(e, err, "ETHTOOL_GDRVINFO") : 0;
}

int dmt_eth_rx_rings(struct dmt_eth *e, uint32_t *n)
{
	struct ethtool_rxnfc nfc = { .cmd = ETHTOOL_GRXRINGS };
	int err = eth_ioctl(e, &nfc);

	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_GRXRINGS");
	*n = (uint32_t)nfc.data;
	return 0;
}

/* Indirection table size and key size of context (ETHTOOL_GRSSH, sizes 0). */
static int rssh_sizes(struct dmt_eth *e, uint32_t context, uint32_t *indir,
		      uint32_t *key, uint8_t *hfunc)
{
	struct ethtool_rxfh rxfh;
	int err;

	memset(&rxfh, 0, sizeof(rxfh));
	rxfh.cmd = ETHTOOL_GRSSH;
	rxfh.rss_context = context;
	err = eth_ioctl(e, &rxfh);
	if (err < 0)
		return err;
	*indir = rxfh.indir_size;
	*key = rxfh.key_size;
	if (hfunc)
		*hfunc = rxfh.hfunc;
	return 0;
}

static int ioctl_rss_get(struct dmt_eth *e, uint32_t context,
			 struct dmt_rss *rss)
{
	uint32_t ni, nk;
	uint8_t hf;
	struct ethtool_rxfh *rxfh;
	int err = rssh_sizes(e, context, &ni, &nk, &hf);

	memset(rss, 0, sizeof(*rss));
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_GRSSH");
	if (ni > MAX_INDIR || nk > 1024)
		return ioctl_fail(e, -EOVERFLOW, "ETHTOOL_GRSSH");
	rxfh = dmt_calloc(1, sizeof(*rxfh) + ni * 4 + nk);
	if (!rxfh)
		return -ENOMEM;
	rxfh->cmd = ETHTOOL_GRSSH;
	rxfh->rss_context = context;
	rxfh->indir_size = ni;
	rxfh->key_size = nk;
	err = eth_ioctl(e, rxfh);
	if (err < 0) {
		free(rxfh);
		return ioctl_fail(e, err, "ETHTOOL_GRSSH");
	}
	rss->context = context;
	rss->hfunc = rxfh->hfunc;
	rss->input_xfrm = rxfh->rsvd8[0];
	rss->indir_size = ni;
	rss->key_size = nk;
	rss->indir = ni ? dmt_malloc(ni * 4) : NULL;
	rss->key = nk ? dmt_malloc(nk) : NULL;
	if ((ni && !rss->indir) || (nk && !rss->key)) {
		free(rxfh);
		dmt_rss_free(rss);
		return -ENOMEM;
	}
	if (ni)
		memcpy(rss->indir, rxfh->rss_config, ni * 4);
	if (nk)
		memcpy(rss->key, (uint8_t *)rxfh->rss_config + ni * 4, nk);
	free(rxfh);
	return 0;
}

static int parse_rss(const struct nlmsghdr *nlh, void *out)
{
	return dmt_eth_rss_parse(nlh, out);
}

static int real_rss_get(struct dmt_eth *e, uint32_t context, struct dmt_rss *rss)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint16_t fam;
	int err;

	memset(rss, 0, sizeof(*rss));
	if (e->no_nl_rss_get || eth_family(e, &fam) < 0)
		return ioctl_rss_get(e, context, rss);
	err = dmt_nl_talk(e->nl, dmt_eth_rss_get_msg(buf, fam, e->ifindex,
						     context, false),
			  one_reply_cb,
			  &(struct one_reply){ .parse = parse_rss, .out = rss });
	if (err == -EOPNOTSUPP && !e->nl->extack[0]) {
		/* < 6.5: no RSS_GET; or the driver has no get_rxfh, which
		 * the ioctl reports the same way. */
		e->no_nl_rss_get = true;
		return ioctl_rss_get(e, context, rss);
	}
	if (err < 0) {
		dmt_rss_free(rss);
		return eth_fail(e, err, "rss-get");
	}
	rss->context = context;
	return 0;
}

struct rss_list {
	struct dmt_rss *v;
	size_t n, cap;
	int err;
};

static int rss_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rss_list *l = data;
	struct dmt_rss *v;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;

		v = dmt_realloc(l->v, cap * sizeof(*v));
		if (!v) {
			l->err = -ENOMEM;
			return MNL_CB_ERROR;
		}
		l->v = v;
		l->cap = cap;
	}
	l->err = dmt_eth_rss_parse(nlh, &l->v[l->n]);
	if (l->err < 0)
		return MNL_CB_ERROR;
	l->n++;
	return MNL_CB_OK;
}

static int real_rss_dump(struct dmt_eth *e, struct dmt_rss **list, size_t *n)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct rss_list l = { 0 };
	uint16_t fam;
	int err;

	*list = NULL;
	*n = 0;
	if (e->no_nl_rss_get || eth_family(e, &fam) < 0)
		goto single;
	err = dmt_nl_talk(e->nl, dmt_eth_rss_get_msg(buf, fam, e->ifindex, 0,
						     true), rss_dump_cb, &l);
	if (err == 0 && l.err < 0)
		err = l.err;
	if (err == -EOPNOTSUPP && l.n == 0 && !e->nl->extack[0])
		goto single;	/* dump arrived in 6.11 */
	if (err < 0) {
		for (size_t i = 0; i < l.n; i++)
			dmt_rss_free(&l.v[i]);
		free(l.v);
		return eth_fail(e, err, "rss-get dump");
	}
	/* The request header's ifindex limits the dump to this device. */
	*list = l.v;
	*n = l.n;
	return 0;
single:
	l.v = dmt_calloc(1, sizeof(*l.v));
	if (!l.v)
		return -ENOMEM;
	err = real_rss_get(e, 0, l.v);
	if (err < 0) {
		free(l.v);
		return err;
	}
	*list = l.v;
	*n = 1;
	return 0;
}

/* ETHTOOL_SRSSH: the indirection table of context (n == 0: default spread
 * or, for context != 0, delete), hash function and key unchanged. */
static int ioctl_srssh(struct dmt_eth *e, uint32_t context, const uint32_t *indir,
		       uint32_t n, uint32_t *new_context)
{
	struct ethtool_rxfh *rxfh = dmt_calloc(1, sizeof(*rxfh) + n * 4);
	int err;

	if (!rxfh)
		return -ENOMEM;
	rxfh->cmd = ETHTOOL_SRSSH;
	rxfh->rss_context = context;
	rxfh->indir_size = n;
	rxfh->key_size = 0;
	rxfh->hfunc = 0;	/* ETH_RSS_HASH_NO_CHANGE */
	/* input_xfrm (6.8) lives in what older kernels check as reserved. */
	if (e->kernel_version >= 0x060800)
		rxfh->rsvd8[0] = RXH_XFRM_NO_CHANGE_;
	if (n)
		memcpy(rxfh->rss_config, indir, n * 4);
	err = eth_ioctl(e, rxfh);
	if (err == 0 && new_context)
		*new_context = rxfh->rss_context;
	free(rxfh);
	return err;
}

static int real_rss_set(struct dmt_eth *e, uint32_t context,
			const uint32_t *indir, uint32_t n)
{
	char *buf;
	uint16_t fam;
	int err;

	if (n > MAX_INDIR)
		return dmt_err_set(e->err, -EINVAL,
				   "RSS table of %u entries is too large", n);
	if (n == 0 || e->no_nl_rss_set || eth_family(e, &fam) < 0)
		goto ioctl;
	buf = dmt_malloc(REQ_SIZE);
	if (!buf)
		return -ENOMEM;
	err = dmt_nl_talk(e->nl, dmt_eth_rss_set_msg(buf, fam, e->ifindex,
						     context, indir, n),
			  NULL, NULL);
	free(buf);
	if (err == -EOPNOTSUPP && !e->nl->extack[0]) {
		e->no_nl_rss_set = true;	/* < 6.17 */
		goto ioctl;
	}
	if (err < 0)
		return eth_fail(e, err, "rss-set");
	return 0;
ioctl:
	err = ioctl_srssh(e, context, indir, n, NULL);
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_SRSSH");
	return 0;
}

static int real_rss_ctx_create(struct dmt_eth *e, const uint32_t *indir,
			       uint32_t n, uint32_t *context)
{
	int err = ioctl_srssh(e, ETH_RXFH_CONTEXT_ALLOC, indir, n, context);

	if (err == -EOPNOTSUPP || err == -EINVAL)
		return dmt_err_set(e->err, err,
				   "creating an RSS context on %s failed: %s "
				   "(the driver has no additional RSS contexts)",
				   e->ifname, dmt_errno_name(err));
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_SRSSH (create RSS context)");
	return 0;
}

static int real_rss_ctx_delete(struct dmt_eth *e, uint32_t context)
{
	int err = ioctl_srssh(e, context, NULL, 0, NULL);

	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_SRSSH (delete RSS context)");
	return 0;
}

int dmt_eth_rule_count(struct dmt_eth *e, uint32_t *count, uint32_t *table_size,
		       bool *special_locs)
{
	struct ethtool_rxnfc nfc;
	int err;

	memset(&nfc, 0, sizeof(nfc));
	nfc.cmd = ETHTOOL_GRXCLSRLCNT;
	err = eth_ioctl(e, &nfc);
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_GRXCLSRLCNT");
	*count = nfc.rule_cnt;
	e->special_locs = !!(nfc.data & RX_CLS_LOC_SPECIAL);
	if (table_size)
		*table_size = (uint32_t)(nfc.data & ~(uint64_t)RX_CLS_LOC_SPECIAL);
	if (special_locs)
		*special_locs = nfc.data & RX_CLS_LOC_SPECIAL;
	if (table_size && !*table_size && nfc.rule_cnt <= MAX_RULES) {
		/* mlx5_core gives the count only; the size comes with the
		 * list, as ethtool's rule manager reads it */
		struct ethtool_rxnfc *all = dmt_calloc(1, sizeof(*all) + nfc.rule_cnt * 4);

		if (!all)
			return -ENOMEM;
		all->cmd = ETHTOOL_GRXCLSRLALL;
		all->rule_cnt = nfc.rule_cnt;
		err = eth_ioctl(e, all);
		*table_size = err < 0 ? 0 : (uint32_t)all->data;
		free(all);
		if (err < 0)
			return ioctl_fail(e, err, "ETHTOOL_GRXCLSRLALL");
	}
	return 0;
}

static int rule_locs(struct dmt_eth *e, uint32_t **locs, uint32_t *n,
		     uint32_t *table_size, bool *special)
{
	struct ethtool_rxnfc *nfc;
	uint32_t cnt;
	int err = dmt_eth_rule_count(e, &cnt, table_size, special);

	*locs = NULL;
	*n = 0;
	if (err < 0)
		return err;
	if (cnt > MAX_RULES)
		return ioctl_fail(e, -EOVERFLOW, "ETHTOOL_GRXCLSRLCNT");
	nfc = dmt_calloc(1, sizeof(*nfc) + cnt * 4);
	if (!nfc)
		return -ENOMEM;
	nfc->cmd = ETHTOOL_GRXCLSRLALL;
	nfc->rule_cnt = cnt;
	err = eth_ioctl(e, nfc);
	if (err < 0) {
		free(nfc);
		return ioctl_fail(e, err, "ETHTOOL_GRXCLSRLALL");
	}
	if (nfc->rule_cnt < cnt)
		cnt = nfc->rule_cnt;
	*locs = dmt_malloc((cnt ? cnt : 1) * 4);
	if (!*locs) {
		free(nfc);
		return -ENOMEM;
	}
	memcpy(*locs, nfc->rule_locs, cnt * 4);
	*n = cnt;
	free(nfc);
	return 0;
}

static int rule_get(struct dmt_eth *e, uint32_t loc, struct dmt_rule *r)
{
	struct ethtool_rxnfc nfc;
	int err;

	memset(&nfc, 0, sizeof(nfc));
	nfc.cmd = ETHTOOL_GRXCLSRULE;
	nfc.fs.location = loc;
	err = eth_ioctl(e, &nfc);
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_GRXCLSRULE");
	r->location = loc;
	r->fs = nfc.fs;
	r->rss_context = (nfc.fs.flow_type & FLOW_RSS) ? nfc.rss_context : 0;
	return 0;
}

static int real_rule_list(struct dmt_eth *e, struct dmt_rule **rules, size_t *n,
			  uint32_t *table_size)
{
	uint32_t *locs, nl;
	struct dmt_rule *v;
	int err = rule_locs(e, &locs, &nl, table_size, NULL);

	*rules = NULL;
	*n = 0;
	if (err < 0)
		return err;
	v = dmt_calloc(nl ? nl : 1, sizeof(*v));
	if (!v) {
		free(locs);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nl; i++) {
		err = rule_get(e, locs[i], &v[i]);
		if (err < 0) {
			free(v);
			free(locs);
			return err;
		}
	}
	free(locs);
	*rules = v;
	*n = nl;
	return 0;
}

static int real_rule_insert(struct dmt_eth *e,
			    const struct ethtool_rx_flow_spec *fs,
			    uint32_t rss_context, uint32_t *loc)
{
	struct ethtool_rxnfc nfc;
	int err;

	memset(&nfc, 0, sizeof(nfc));
	nfc.cmd = ETHTOOL_SRXCLSRLINS;
	nfc.fs = *fs;
	nfc.rss_context = rss_context;
	nfc.fs.location = *loc;
	if (*loc == RX_CLS_LOC_ANY && e->special_locs != 1) {
		uint32_t *locs, n, size;
		bool special;

		/* Drivers that do not pick locations themselves need a free
		 * slot, as ethtool's rmgr finds one. */
		err = rule_locs(e, &locs, &n, &size, &special);
		if (err < 0)
			return err;
		if (!special) {
			uint32_t l = 0;

			for (l = 0; l < size; l++) {
				uint32_t i;

				for (i = 0; i < n && locs[i] != l; i++)
					;
				if (i == n)
					break;
			}
			if (l >= size) {
				free(locs);
				return dmt_err_set(e->err, -ENOSPC,
						   "the ntuple rule table of %s is full (%u of %u rules): "
						   "delete rules with ethtool -N %s delete LOC",
						   e->ifname, n, size, e->ifname);
			}
			nfc.fs.location = l;
		}
		free(locs);
	}
	err = eth_ioctl(e, &nfc);
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_SRXCLSRLINS");
	*loc = nfc.fs.location;
	return 0;
}

static int real_rule_delete(struct dmt_eth *e, uint32_t loc)
{
	struct ethtool_rxnfc nfc;
	int err;

	memset(&nfc, 0, sizeof(nfc));
	nfc.cmd = ETHTOOL_SRXCLSRLDEL;
	nfc.fs.location = loc;
	err = eth_ioctl(e, &nfc);
	if (err < 0)
		return ioctl_fail(e, err, "ETHTOOL_SRXCLSRLDEL");
	return 0;
}

const struct dmt_eth_ops dmt_eth_real_ops = {
	.rings_get = real_rings_get,
	.rings_set = real_rings_set,
	.channels_get = real_channels_get,
	.feature_get = real_feature_get,
	.feature_set = real_feature_set,
	.rss_get = real_rss_get,
	.rss_dump = real_rss_dump,
	.rss_set = real_rss_set,
	.rss_ctx_create = real_rss_ctx_create,
	.rss_ctx_delete = real_rss_ctx_delete,
	.rule_insert = real_rule_insert,
	.rule_delete = real_rule_delete,
	.rule_list = real_rule_list,
};

/* ---------------------------------------------------------------------- */

static bool ifname_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len >= IF_NAMESIZE)
		return false;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (const char *p = name; *p; p++)
		if (*p == '/' || *p == ':' || *p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

int dmt_eth_init(struct dmt_eth *e, struct dmt_err *err, struct dmt_nl *nl,
		 const char *ifname)
{
	struct utsname u;

	memset(e, 0, sizeof(*e));
	e->err = err;
	e->nl = nl;
	e->ioctl_fd = -1;
	e->special_locs = -1;
	e->ops = dmt_eth_ops_override ? dmt_eth_ops_override : &dmt_eth_real_ops;
	e->priv = dmt_eth_priv_override;
	if (!ifname || !ifname_valid(ifname))
		return dmt_err_set(err, -EINVAL,
				   "invalid interface name \"%s\": a name has 1 to %d "
				   "characters without '/', ':' or spaces",
				   ifname ? ifname : "(null)", IF_NAMESIZE - 1);
	memcpy(e->ifname, ifname, strlen(ifname) + 1);
	if (uname(&u) == 0)
		e->kernel_version = dmt_kernel_version(u.release);
	if (dmt_eth_ops_override) {
		e->ifindex = 1;
		return 0;
	}
	e->ifindex = (int)if_nametoindex(ifname);
	if (!e->ifindex)
		return dmt_err_set(err, -ENODEV,
				   "no interface \"%s\" in this network namespace "
				   "(see ip link show)", ifname);
	e->ioctl_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (e->ioctl_fd < 0)
		e->ioctl_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (e->ioctl_fd < 0)
		return dmt_err_set(err, -errno, "socket for SIOCETHTOOL: %s",
				   dmt_errno_name(-errno));
	return 0;
}

void dmt_eth_fini(struct dmt_eth *e)
{
	if (e->ioctl_fd >= 0)
		close(e->ioctl_fd);
	e->ioctl_fd = -1;
}

int dmt_eth_is_up(struct dmt_eth *e)
{
	struct ifreq ifr;

	if (e->ioctl_fd < 0)
		return 1;	/* the unit tests' NIC */
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, e->ifname, sizeof(ifr.ifr_name) - 1);
	if (ioctl(e->ioctl_fd, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	return !!(ifr.ifr_flags & IFF_UP);
}

int dmt_sysfs_queues(const char *ifname, uint32_t *rx, uint32_t *tx)
{
	char path[64 + IF_NAMESIZE];
	struct dirent *d;
	DIR *dir;

	*rx = *tx = 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		*rx += strncmp(d->d_name, "rx-", 3) == 0;
		*tx += strncmp(d->d_name, "tx-", 3) == 0;
	}
	closedir(dir);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* flows                                                                   */

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int dmt_flow_to_spec(const struct devmemtcp_flow *flow, uint32_t queue,
		     bool use_ctx, struct ethtool_rx_flow_spec *fs)
{
	memset(fs, 0, sizeof(*fs));
	if (flow->family == AF_INET) {
		struct ethtool_tcpip4_spec *h = &fs->h_u.tcp_ip4_spec;
		struct ethtool_tcpip4_spec *m = &fs->m_u.tcp_ip4_spec;

		fs->flow_type = TCP_V4_FLOW;
		memcpy(&h->ip4src, flow->src_addr, 4);
		memcpy(&m->ip4src, flow->src_mask, 4);
		memcpy(&h->ip4dst, flow->dst_addr, 4);
		memcpy(&m->ip4dst, flow->dst_mask, 4);
		h->ip4src &= m->ip4src;
		h->ip4dst &= m->ip4dst;
		h->psrc = htons(flow->src_port & flow->src_port_mask);
		m->psrc = htons(flow->src_port_mask);
		h->pdst = htons(flow->dst_port & flow->dst_port_mask);
		m->pdst = htons(flow->dst_port_mask);
		if (!m->ip4src && !m->ip4dst && !m->psrc && !m->pdst)
			return -EINVAL;
	} else if (flow->family == AF_INET6) {
		struct ethtool_tcpip6_spec *h = &fs->h_u.tcp_ip6_spec;
		struct ethtool_tcpip6_spec *m = &fs->m_u.tcp_ip6_spec;

		fs->flow_type = TCP_V6_FLOW;
		memcpy(h->ip6src, flow->src_addr, 16);
		memcpy(m->ip6src, flow->src_mask, 16);
		memcpy(h->ip6dst, flow->dst_addr, 16);
		memcpy(m->ip6dst, flow->dst_mask, 16);
		for (int i = 0; i < 4; i++) {
			h->ip6src[i] &= m->ip6src[i];
			h->ip6dst[i] &= m->ip6dst[i];
		}
		h->psrc = htons(flow->src_port & flow->src_port_mask);
		m->psrc = htons(flow->src_port_mask);
		h->pdst = htons(flow->dst_port & flow->dst_port_mask);
		m->pdst = htons(flow->dst_port_mask);
		if (all_zero(flow->src_mask, 16) && all_zero(flow->dst_mask, 16) &&
		    !m->psrc && !m->pdst)
			return -EINVAL;
	} else {
		return -EAFNOSUPPORT;
	}
	if (use_ctx) {
		fs->flow_type |= FLOW_RSS;
		fs->ring_cookie = 0;
	} else {
		fs->ring_cookie = queue;
	}
	fs->location = RX_CLS_LOC_ANY;
	return 0;
}

bool dmt_spec_equal(const struct ethtool_rx_flow_spec *a,
		    const struct ethtool_rx_flow_spec *b)
{
	return a->flow_type == b->flow_type &&
	       memcmp(&a->h_u, &b->h_u, sizeof(a->h_u)) == 0 &&
	       memcmp(&a->m_u, &b->m_u, sizeof(a->m_u)) == 0 &&
	       a->ring_cookie == b->ring_cookie;
}

static void addr_str(int family, const void *addr, const void *mask, char *buf,
		     size_t len)
{
	size_t alen = family == AF_INET ? 4 : 16;
	const uint8_t *m = mask;
	char a[INET6_ADDRSTRLEN];
	int bits = 0;
	bool prefix = true;

	if (all_zero(mask, alen)) {
		snprintf(buf, len, "*");
		return;
	}
	/* A prefix: leading ones, then only zeros. */
	for (size_t i = 0; i < alen * 8; i++) {
		bool set = m[i / 8] & (0x80u >> (i % 8));

		if (set && bits == (int)i)
			bits++;
		else if (set)
			prefix = false;
	}
	inet_ntop(family, addr, a, sizeof(a));
	if (prefix && bits == (int)alen * 8)
		snprintf(buf, len, family == AF_INET6 ? "[%s]" : "%s", a);
	else if (prefix)
		snprintf(buf, len, family == AF_INET6 ? "[%s/%d]" : "%s/%d", a,
			 bits);
	else
		snprintf(buf, len, "%s/mask", a);
}

static void port_str(uint16_t port, uint16_t mask, char *buf, size_t len)
{
	if (!mask)
		snprintf(buf, len, "*");
	else if (mask == 0xffff)
		snprintf(buf, len, "%u", ntohs(port));
	else
		snprintf(buf, len, "%u/0x%x", ntohs(port), ntohs(mask));
}

void dmt_spec_str(const struct ethtool_rx_flow_spec *fs, uint32_t rss_context,
		  char *buf, size_t len)
{
	char s[64], d[64], sp[16], dp[16];
	uint32_t type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);

	if (type == TCP_V4_FLOW) {
		const struct ethtool_tcpip4_spec *h = &fs->h_u.tcp_ip4_spec;
		const struct ethtool_tcpip4_spec *m = &fs->m_u.tcp_ip4_spec;

		addr_str(AF_INET, &h->ip4src, &m->ip4src, s, sizeof(s));
		addr_str(AF_INET, &h->ip4dst, &m->ip4dst, d, sizeof(d));
		port_str(h->psrc, m->psrc, sp, sizeof(sp));
		port_str(h->pdst, m->pdst, dp, sizeof(dp));
	} else if (type == TCP_V6_FLOW) {
		const struct ethtool_tcpip6_spec *h = &fs->h_u.tcp_ip6_spec;
		const struct ethtool_tcpip6_spec *m = &fs->m_u.tcp_ip6_spec;

		addr_str(AF_INET6, h->ip6src, m->ip6src, s, sizeof(s));
		addr_str(AF_INET6, h->ip6dst, m->ip6dst, d, sizeof(d));
		port_str(h->psrc, m->psrc, sp, sizeof(sp));
		port_str(h->pdst, m->pdst, dp, sizeof(dp));
	} else {
		snprintf(buf, len, "flow-type 0x%x", fs->flow_type);
		return;
	}
	if (fs->flow_type & FLOW_RSS)
		snprintf(buf, len, "tcp%c %s:%s -> %s:%s context %u",
			 type == TCP_V4_FLOW ? '4' : '6', s, sp, d, dp,
			 rss_context);
	else
		snprintf(buf, len, "tcp%c %s:%s -> %s:%s queue %llu",
			 type == TCP_V4_FLOW ? '4' : '6', s, sp, d, dp,
			 (unsigned long long)fs->ring_cookie);
}
