// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The ethtool family's messages: builders of the requests (rings,
 * channels, features, RSS) and parsers of their replies.  Pure: no
 * socket, no system call; the unit tests and the fuzz harness feed them.
 * Sending them is ethtool.c's.
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

#define MAX_INDIR 4096		/* no driver has more (mlx5: 2048) */

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
