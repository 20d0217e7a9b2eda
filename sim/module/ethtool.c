// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim ethtool: rings (sizes, tcp-data-split, hds-thresh), channels
 * (combined 1..num_queues; a change restarts all queues), RSS (indirection
 * table, key, Toeplitz only, contexts 1..7 sharing the device key), ntuple
 * rules (64, any location, tcp4/udp4/tcp6/udp6/ip4/ip6, queue, drop or RSS
 * context) and the per-queue statistics of -S (RX: also the buffers the
 * payload went to and the NIC pages they came from).  Steering reads the tables
 * under cfg_lock (steer.c).
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/ethtool_netlink.h>

static void dsim_get_drvinfo(struct net_device *dev, struct ethtool_drvinfo *info)
{
	struct dsim_priv *priv = netdev_priv(dev);

	strscpy(info->driver, dsim_prof->driver, sizeof(info->driver));
	strscpy(info->bus_info, dev_name(priv->dmadev), sizeof(info->bus_info));
	if (dsim_prof->id != DSIM_PROF_DEFAULT)
		snprintf(info->fw_version, sizeof(info->fw_version), "devmemsim-%s",
			 dsim_prof->name);
}

/* ------------------------------------------------------------------ */
/* rings and channels                                                  */

static void dsim_get_ringparam(struct net_device *dev,
			       struct ethtool_ringparam *ring,
			       struct kernel_ethtool_ringparam *kring,
			       struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);

	if (dsim_prof->id != DSIM_PROF_DEFAULT) {
		dsim_prof_get_ringparam(dev, ring, kring);
		return;
	}
	ring->rx_max_pending = DSIM_RING_MAX;
	ring->tx_max_pending = DSIM_RING_MAX;
	ring->rx_pending = priv->rx_ring;
	ring->tx_pending = priv->tx_ring;
	kring->tcp_data_split = priv->hds ? ETHTOOL_TCP_DATA_SPLIT_ENABLED :
					    ETHTOOL_TCP_DATA_SPLIT_DISABLED;
#if DSIM_HAVE_HDS_THRESH
	kring->hds_thresh = priv->hds_thresh;
	kring->hds_thresh_max = DSIM_HDS_THRESH_MAX;
#endif
}

static int dsim_set_ringparam(struct net_device *dev,
			      struct ethtool_ringparam *ring,
			      struct kernel_ethtool_ringparam *kring,
			      struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	bool hds;

	if (dsim_prof->id != DSIM_PROF_DEFAULT)
		return dsim_prof_set_ringparam(dev, ring, kring, extack);
	if (ring->rx_pending < DSIM_RING_MIN || ring->rx_pending > DSIM_RING_MAX ||
	    ring->tx_pending < DSIM_RING_MIN || ring->tx_pending > DSIM_RING_MAX) {
		NL_SET_ERR_MSG(extack, "ring size out of range (64..4096)");
		return -EINVAL;
	}
	hds = kring->tcp_data_split == ETHTOOL_TCP_DATA_SPLIT_ENABLED;

#if !DSIM_HAVE_HDS_THRESH
	/* newer cores refuse this themselves */
	if (!hds && dsim_any_mp(dev)) {
		NL_SET_ERR_MSG(extack,
			       "can't disable tcp-data-split while device has memory provider enabled");
		return -EINVAL;
	}
#else
	if (kring->hds_thresh > DSIM_HDS_THRESH_MAX) {
		NL_SET_ERR_MSG(extack, "hds-thresh exceeds maximum");
		return -EINVAL;
	}
	WRITE_ONCE(priv->hds_thresh, kring->hds_thresh);
#endif
	WRITE_ONCE(priv->hds, hds);
	/* ring sizes only size the page pools; applied on next (re)start */
	priv->rx_ring = ring->rx_pending;
	priv->tx_ring = ring->tx_pending;
	return 0;
}

static void dsim_get_channels(struct net_device *dev, struct ethtool_channels *ch)
{
	struct dsim_priv *priv = netdev_priv(dev);

	if (dsim_prof->id != DSIM_PROF_DEFAULT) {
		dsim_prof_get_channels(dev, ch);
		return;
	}
	ch->max_combined = priv->nq;
	ch->combined_count = dev->real_num_rx_queues;
}

static int dsim_set_channels(struct net_device *dev, struct ethtool_channels *ch)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int n = ch->combined_count, ntx = n;
	bool running = netif_running(dev);
	unsigned int i;
	int err;

	if (dsim_prof->id != DSIM_PROF_DEFAULT) {
		err = dsim_prof_check_channels(dev, ch, &n, &ntx);
		if (err)
			return err;
		if (n > priv->nq || ntx > priv->nq)
			return -EINVAL;
	} else if (ch->rx_count || ch->tx_count || ch->other_count || !n || n > priv->nq) {
		return -EINVAL;
	}
	/* the core refuses to drop a queue with a memory provider; be sure */
	for (i = n; i < dev->real_num_rx_queues; i++)
		if (dsim_rxq_has_mp(dev, i))
			return -EBUSY;

	if (running) {
		netif_tx_stop_all_queues(dev);
		dsim_stop_all(priv);
	}
	err = netif_set_real_num_tx_queues(dev, ntx);
	if (!err)
		err = netif_set_real_num_rx_queues(dev, n);
	if (!err && !netif_is_rxfh_configured(dev)) {
		spin_lock_bh(&priv->cfg_lock);
		dsim_fill_indir(priv->indir, priv->indir_size, n);
		spin_unlock_bh(&priv->cfg_lock);
	}
	if (running) {
		int err2 = dsim_start_all(priv);

		if (!err)
			err = err2;
		netif_tx_start_all_queues(dev);
	}
	return err;
}

/* ------------------------------------------------------------------ */
/* RSS and RSS contexts                                                */

static u32 dsim_get_rxfh_indir_size(struct net_device *dev)
{
	struct dsim_priv *priv = netdev_priv(dev);

	return priv->indir_size;
}

static u32 dsim_get_rxfh_key_size(struct net_device *dev)
{
	return dsim_prof->key_size;
}

static int dsim_get_rxfh(struct net_device *dev, struct ethtool_rxfh_param *rxfh)
{
	struct dsim_priv *priv = netdev_priv(dev);
	const u32 *indir = priv->indir;
	u32 c = rxfh->rss_context;

	rxfh->hfunc = ETH_RSS_HASH_TOP;
	spin_lock_bh(&priv->cfg_lock);
	if (c) {
		if (c >= priv->max_ctx || !priv->ctx_used[c]) {
			spin_unlock_bh(&priv->cfg_lock);
			return -ENOENT;
		}
		indir = priv->ctx_indir[c];
	}
	if (rxfh->indir)
		memcpy(rxfh->indir, indir, priv->indir_size * sizeof(*indir));
	if (rxfh->key)
		memcpy(rxfh->key, priv->key, dsim_prof->key_size);
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

static int dsim_check_hfunc(const struct ethtool_rxfh_param *rxfh,
			    struct netlink_ext_ack *extack)
{
	if (rxfh->hfunc != ETH_RSS_HASH_NO_CHANGE &&
	    rxfh->hfunc != ETH_RSS_HASH_TOP) {
		NL_SET_ERR_MSG(extack, "only the Toeplitz hash is supported");
		return -EOPNOTSUPP;
	}
	return 0;
}

static int dsim_set_rxfh(struct net_device *dev, struct ethtool_rxfh_param *rxfh,
			 struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	int err = dsim_check_hfunc(rxfh, extack);

	if (err)
		return err;
	if (rxfh->rss_context)	/* old-style contexts are not offered */
		return -EOPNOTSUPP;
	spin_lock_bh(&priv->cfg_lock);
	if (rxfh->indir)
		memcpy(priv->indir, rxfh->indir, priv->indir_size * sizeof(u32));
	if (rxfh->key)
		memcpy(priv->key, rxfh->key, dsim_prof->key_size);
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

/* What creating or modifying context @rxfh->rss_context may ask for;
 * @exists: it must be in use already (modify) or may be new (create).
 */
static int dsim_check_ctx(struct dsim_priv *priv, const struct ethtool_rxfh_param *rxfh,
			  bool exists, struct netlink_ext_ack *extack)
{
	u32 id = rxfh->rss_context;
	int err = dsim_prof->id == DSIM_PROF_DEFAULT ? dsim_check_hfunc(rxfh, extack) :
		  dsim_prof_check_ctx(priv->dev, rxfh, extack);

	if (err)
		return err;
	if (!id || id >= priv->max_ctx)
		return exists ? -ENOENT : -EINVAL;
	if (exists && !priv->ctx_used[id])
		return -ENOENT;
	/* bnxt keeps a key per context (the simulated NIC hashes with the
	 * device key) */
	if (rxfh->key && dsim_prof->id != DSIM_PROF_BNXT) {
		NL_SET_ERR_MSG(extack, "RSS contexts share the device key");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Create (@create) or modify context @rxfh->rss_context: a new context
 * without a table gets the default spread over the active queues.
 */
static int dsim_set_rxfh_context(struct net_device *dev,
				 struct ethtool_rxfh_context *ctx,
				 const struct ethtool_rxfh_param *rxfh,
				 bool create, struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 id = rxfh->rss_context;
	int err = dsim_check_ctx(priv, rxfh, !create, extack);

	if (err)
		return err;
	spin_lock_bh(&priv->cfg_lock);
	if (rxfh->indir)
		memcpy(priv->ctx_indir[id], rxfh->indir, priv->indir_size * sizeof(u32));
	else if (create && !priv->ctx_used[id])
		dsim_fill_indir(priv->ctx_indir[id], priv->indir_size,
				dev->real_num_rx_queues);
	if (create) {
		memcpy(ethtool_rxfh_context_indir(ctx), priv->ctx_indir[id],
		       priv->indir_size * sizeof(u32));
		memcpy(ethtool_rxfh_context_key(ctx), priv->key, dsim_prof->key_size);
		ctx->hfunc = ETH_RSS_HASH_TOP;
		priv->ctx_used[id] = true;
	}
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

static int dsim_create_rxfh_context(struct net_device *dev,
				    struct ethtool_rxfh_context *ctx,
				    const struct ethtool_rxfh_param *rxfh,
				    struct netlink_ext_ack *extack)
{
	return dsim_set_rxfh_context(dev, ctx, rxfh, true, extack);
}

static int dsim_modify_rxfh_context(struct net_device *dev,
				    struct ethtool_rxfh_context *ctx,
				    const struct ethtool_rxfh_param *rxfh,
				    struct netlink_ext_ack *extack)
{
	return dsim_set_rxfh_context(dev, ctx, rxfh, false, extack);
}

static bool dsim_ctx_in_use(struct dsim_priv *priv, u32 rss_context)
{
	unsigned int i;

	for (i = 0; i < priv->max_rules; i++)
		if (priv->rules[i].used &&
		    (priv->rules[i].fs.flow_type & FLOW_RSS) &&
		    priv->rules[i].rss_ctx == rss_context)
			return true;
	return false;
}

static int dsim_remove_rxfh_context(struct net_device *dev,
				    struct ethtool_rxfh_context *ctx,
				    u32 rss_context,
				    struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	int err = 0;

	if (!rss_context || rss_context >= priv->max_ctx ||
	    !priv->ctx_used[rss_context])
		return -ENOENT;
	spin_lock_bh(&priv->cfg_lock);
	if (dsim_ctx_in_use(priv, rss_context)) {
		NL_SET_ERR_MSG(extack, "RSS context is used by an ntuple rule");
		err = -EBUSY;
	} else {
		priv->ctx_used[rss_context] = false;
	}
	spin_unlock_bh(&priv->cfg_lock);
	return err;
}

/* ------------------------------------------------------------------ */
/* ntuple rules                                                        */

#if DSIM_HAVE_RX_RING_COUNT
static u32 dsim_get_rx_ring_count(struct net_device *dev)
{
	return dev->real_num_rx_queues;
}
#endif

static int dsim_get_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	const struct dsim_rule *r;
	int err = 0;

	if (info->fs.location >= priv->max_rules)
		return -EINVAL;
	spin_lock_bh(&priv->cfg_lock);
	r = &priv->rules[info->fs.location];
	if (!r->used) {
		/* gve: the device does not find it (gve_flow_rule.c:227) */
		err = dsim_prof->id == DSIM_PROF_GVE ? -EINVAL : -ENOENT;
	} else {
		info->fs = r->fs;
		if (info->fs.flow_type & FLOW_RSS)
			info->rss_context = r->rss_ctx;
	}
	spin_unlock_bh(&priv->cfg_lock);
	return err;
}

static int dsim_get_rule_locs(struct dsim_priv *priv, struct ethtool_rxnfc *info,
			      u32 *rule_locs)
{
	unsigned int i, n = 0;
	int err = 0;

	info->data = priv->max_rules;
	spin_lock_bh(&priv->cfg_lock);
	for (i = 0; i < priv->max_rules; i++) {
		if (!priv->rules[i].used)
			continue;
		if (n >= info->rule_cnt) {
			err = -EMSGSIZE;
			break;
		}
		rule_locs[n++] = i;
	}
	spin_unlock_bh(&priv->cfg_lock);
	if (!err)
		info->rule_cnt = n;
	return err;
}

static int dsim_get_rxnfc(struct net_device *dev, struct ethtool_rxnfc *info,
			  u32 *rule_locs)
{
	struct dsim_priv *priv = netdev_priv(dev);

	switch (info->cmd) {
	case ETHTOOL_GRXRINGS:
		info->data = dev->real_num_rx_queues;
		return 0;
	case ETHTOOL_GRXCLSRLCNT:
		spin_lock_bh(&priv->cfg_lock);
		info->rule_cnt = priv->nrules;
		spin_unlock_bh(&priv->cfg_lock);
		info->data = priv->max_rules;
		if (dsim_prof->loc_special)
			info->data |= RX_CLS_LOC_SPECIAL;
		/* mlx5 gives the count only (en_fs_ethtool.c:1003-1005) */
		if (dsim_prof->id == DSIM_PROF_MLX5)
			info->data = 0;
		return 0;
	case ETHTOOL_GRXCLSRULE:
		return dsim_get_rule(priv, info);
	case ETHTOOL_GRXCLSRLALL:
		return dsim_get_rule_locs(priv, info, rule_locs);
	}
	return -EOPNOTSUPP;
}

/* Flow types, fields and actions a rule may use. Called with cfg_lock held. */
static int dsim_check_fs(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	struct ethtool_rx_flow_spec *fs = &info->fs;
	u32 type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);
	static const u8 zero[sizeof(struct ethtool_flow_ext)];

	switch (type) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
	case IP_USER_FLOW:
	case IPV6_USER_FLOW:
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (type == IP_USER_FLOW &&
	    (fs->m_u.usr_ip4_spec.l4_4_bytes ||
	     (fs->h_u.usr_ip4_spec.ip_ver &&
	      fs->h_u.usr_ip4_spec.ip_ver != ETH_RX_NFC_IP4)))
		return -EOPNOTSUPP;
	if (type == IPV6_USER_FLOW && fs->m_u.usr_ip6_spec.l4_4_bytes)
		return -EOPNOTSUPP;
	if ((fs->flow_type & (FLOW_EXT | FLOW_MAC_EXT)) &&
	    memcmp(&fs->m_ext, zero, sizeof(zero)))
		return -EOPNOTSUPP;

	if (fs->ring_cookie == RX_CLS_FLOW_DISC)
		return 0;
	if (ethtool_get_flow_spec_ring_vf(fs->ring_cookie))
		return -EINVAL;
	if ((fs->flow_type & FLOW_RSS) && info->rss_context &&
	    (info->rss_context >= priv->max_ctx || !priv->ctx_used[info->rss_context]))
		return -ENOENT;
	if (ethtool_get_flow_spec_ring(fs->ring_cookie) >= priv->dev->real_num_rx_queues)
		return -EINVAL;
	return 0;
}

/* The location a rule goes to: the one asked for, or the first (last)
 * free one for RX_CLS_LOC_ANY/FIRST (LAST); DSIM_MAX_RULES if none.
 */
static u32 dsim_rule_loc(struct dsim_priv *priv, u32 loc)
{
	if (loc == RX_CLS_LOC_ANY || loc == RX_CLS_LOC_FIRST) {
		for (loc = 0; loc < DSIM_MAX_RULES; loc++)
			if (!priv->rules[loc].used)
				return loc;
	} else if (loc == RX_CLS_LOC_LAST) {
		for (loc = DSIM_MAX_RULES; loc-- > 0;)
			if (!priv->rules[loc].used)
				return loc;
	}
	return min_t(u32, loc, DSIM_MAX_RULES);
}

static int dsim_rule_insert(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	struct dsim_rule *r;
	u32 loc;
	int err;

	spin_lock_bh(&priv->cfg_lock);
	if (dsim_prof->id != DSIM_PROF_DEFAULT) {
		err = dsim_prof_check_rule(priv, info);
		if (!err)
			err = dsim_prof_rule_loc(priv, info->fs.location, &loc);
		if (err)
			goto out;
		goto place;
	}
	err = dsim_check_fs(priv, info);
	if (err)
		goto out;
	loc = dsim_rule_loc(priv, info->fs.location);
	if (loc >= DSIM_MAX_RULES) {
		err = info->fs.location >= RX_CLS_LOC_LAST ? -ENOSPC : -EINVAL;
		goto out;
	}
place:
	r = &priv->rules[loc];
	if (!r->used)
		priv->nrules++;
	r->used = true;
	r->fs = info->fs;
	r->fs.location = loc;
	r->rss_ctx = (info->fs.flow_type & FLOW_RSS) ? info->rss_context : 0;
	r->prio = dsim_prof->id == DSIM_PROF_MLX5 ? dsim_prof_rule_prio(&info->fs) : 0;
	info->fs.location = loc;
out:
	spin_unlock_bh(&priv->cfg_lock);
	return err;
}

int dsim_rule_delete(struct dsim_priv *priv, u32 loc)
{
	int err = 0;

	if (loc >= priv->max_rules)
		return -EINVAL;
	spin_lock_bh(&priv->cfg_lock);
	if (priv->rules[loc].used) {
		memset(&priv->rules[loc], 0, sizeof(priv->rules[loc]));
		priv->nrules--;
	} else {
		err = dsim_prof->id == DSIM_PROF_GVE ? -EINVAL : -ENOENT;
	}
	spin_unlock_bh(&priv->cfg_lock);
	return err;
}

static int dsim_set_rxnfc(struct net_device *dev, struct ethtool_rxnfc *info)
{
	struct dsim_priv *priv = netdev_priv(dev);

	switch (info->cmd) {
	case ETHTOOL_SRXCLSRLINS:
		if (dsim_prof->id == DSIM_PROF_DEFAULT &&
		    !(dev->features & NETIF_F_NTUPLE))
			return -EOPNOTSUPP;
		return dsim_rule_insert(priv, info);
	case ETHTOOL_SRXCLSRLDEL:
		return dsim_rule_delete(priv, info->fs.location);
	}
	return -EOPNOTSUPP;
}

/* ------------------------------------------------------------------ */
/* statistics (-S): rxN_packets/bytes/alloc_fail/drops, txN_...        */

struct dsim_stat_name {
	const char *name;
	enum dsim_ctr ctr;
};

static const struct dsim_stat_name dsim_rx_stat_names[] = {
	{ "packets", DSIM_PACKETS },
	{ "bytes", DSIM_BYTES },
	{ "alloc_fail", DSIM_ALLOC_FAIL },
	{ "drops", DSIM_DROPS },
	{ "bufs", DSIM_BUFS },
	{ "pages", DSIM_PAGES },
};

static const struct dsim_stat_name dsim_tx_stat_names[] = {
	{ "packets", DSIM_PACKETS },
	{ "bytes", DSIM_BYTES },
	{ "drops", DSIM_DROPS },
};

/* All RX queues' counters, then all TX queues'. */
static const struct dsim_stat_set {
	const char *dir;
	bool tx;
	const struct dsim_stat_name *names;
	unsigned int n;
} dsim_stat_sets[] = {
	{ "rx", false, dsim_rx_stat_names, ARRAY_SIZE(dsim_rx_stat_names) },
	{ "tx", true, dsim_tx_stat_names, ARRAY_SIZE(dsim_tx_stat_names) },
};

static int dsim_get_sset_count(struct net_device *dev, int sset)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int s, n = 0;

	if (sset != ETH_SS_STATS)
		return -EOPNOTSUPP;
	for (s = 0; s < ARRAY_SIZE(dsim_stat_sets); s++)
		n += priv->nq * dsim_stat_sets[s].n;
	return n;
}

static void dsim_get_strings(struct net_device *dev, u32 sset, u8 *data)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int s, i, j;

	if (sset != ETH_SS_STATS)
		return;
	for (s = 0; s < ARRAY_SIZE(dsim_stat_sets); s++) {
		const struct dsim_stat_set *set = &dsim_stat_sets[s];

		for (i = 0; i < priv->nq; i++)
			for (j = 0; j < set->n; j++)
				ethtool_sprintf(&data, "%s%u_%s", set->dir, i,
						set->names[j].name);
	}
}

static void dsim_get_ethtool_stats(struct net_device *dev,
				   struct ethtool_stats *stats, u64 *data)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int s, i, j;

	for (s = 0; s < ARRAY_SIZE(dsim_stat_sets); s++) {
		const struct dsim_stat_set *set = &dsim_stat_sets[s];

		for (i = 0; i < priv->nq; i++) {
			u64 v[DSIM_NR_CTRS];

			dsim_stats_read(dsim_queue_stats(priv, set->tx, i), v);
			for (j = 0; j < set->n; j++)
				*data++ = v[set->names[j].ctr];
		}
	}
}

const struct ethtool_ops dsim_ethtool_ops = {
	.supported_ring_params	= ETHTOOL_RING_USE_TCP_DATA_SPLIT
#if DSIM_HAVE_HDS_THRESH
				  | ETHTOOL_RING_USE_HDS_THRS
#endif
				  ,
	.cap_rss_rxnfc_adds	= 1,
#ifdef ETHTOOL_OP_NEEDS_RTNL_SCHANNELS
	/* netif_set_real_num_tx_queues() changes qdiscs: needs RTNL (7.3+
	 * runs ethtool ops of ops-locked drivers without it otherwise)
	 */
	.op_needs_rtnl		= ETHTOOL_OP_NEEDS_RTNL_SCHANNELS,
#endif
	.rxfh_indir_space	= DSIM_INDIR_SIZE,
	.rxfh_max_num_contexts	= DSIM_MAX_RSS_CTX,
	.get_drvinfo		= dsim_get_drvinfo,
	.get_link		= ethtool_op_get_link,
	.get_sset_count		= dsim_get_sset_count,
	.get_strings		= dsim_get_strings,
	.get_ethtool_stats	= dsim_get_ethtool_stats,
	.get_ringparam		= dsim_get_ringparam,
	.set_ringparam		= dsim_set_ringparam,
	.get_channels		= dsim_get_channels,
	.set_channels		= dsim_set_channels,
	.get_rxnfc		= dsim_get_rxnfc,
	.set_rxnfc		= dsim_set_rxnfc,
#if DSIM_HAVE_RX_RING_COUNT
	.get_rx_ring_count	= dsim_get_rx_ring_count,
#endif
	.get_rxfh_indir_size	= dsim_get_rxfh_indir_size,
	.get_rxfh_key_size	= dsim_get_rxfh_key_size,
	.get_rxfh		= dsim_get_rxfh,
	.set_rxfh		= dsim_set_rxfh,
	.create_rxfh_context	= dsim_create_rxfh_context,
	.modify_rxfh_context	= dsim_modify_rxfh_context,
	.remove_rxfh_context	= dsim_remove_rxfh_context,
};
