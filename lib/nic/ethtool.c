// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The ethtool layer: genl family "ethtool" for rings, channels, features
 * and RSS (where the kernel has the netlink op), SIOCETHTOOL for RSS on
 * older kernels, RSS contexts and ntuple rules: the requests and their
 * round trips.  The messages themselves are built and parsed in
 * ethtool_msg.c; a flow's rule spec is made in flow.c.
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
