// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim driver profiles: with profile=gve|bnxt|mlx5|fbnic the devices
 * answer ethtool and the queue API as that driver does in the kernel the
 * module runs on (6.12 or 7.3): the same reported values, limits and
 * defaults, the same refusals with the same errnos and extack texts, the
 * same NIC page sizes and payload placement.  PROFILES.md gives each
 * behaviour with the file:line of the driver it comes from; the comments
 * here cite the same places (7.3 unless said).  Values a device or its
 * firmware reports are fixed to the ones PROFILES.md names.
 * profile=default is the simulated NIC as it always was: every hook below
 * is called for the other profiles only.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/etherdevice.h>
#include <linux/ethtool_netlink.h>

static const struct dsim_profile dsim_profiles[] = {
	{
		.id = DSIM_PROF_DEFAULT, .name = "default", .driver = DSIM_DRV_NAME,
		.mod = "devmemsim: ",
		.rx_ring_max = DSIM_RING_MAX, .tx_ring_max = DSIM_RING_MAX,
		.ring_min = DSIM_RING_MIN,
		.rx_ring_def = DSIM_RING_DEFAULT, .tx_ring_def = DSIM_RING_DEFAULT,
		.hds_thresh = DSIM_HAVE_HDS_THRESH, .hds_def = DSIM_HDS_THRESH_DEFAULT,
		.hds_max = DSIM_HDS_THRESH_MAX,
		.page_size_max = PAGE_SIZE << DSIM_MAX_PAGE_ORDER,
		.indir_size = DSIM_INDIR_SIZE, .key_size = DSIM_KEY_SIZE,
		.max_ctx = DSIM_MAX_RSS_CTX, .max_rules = DSIM_MAX_RULES,
		.loc = DSIM_LOC_BOTH, .loc_special = true,
		.ntuple_on = true, .ntuple_present = true,
		.ch_modes = DSIM_CH_COMBINED, .queue_ops = true, .unreadable = true,
	},
	{
		/* DQO RDA, header buffers, 4 KiB buffers, 64 flow rules
		 * (gve_adminq.c:955-1000: the device's options) */
		.id = DSIM_PROF_GVE, .name = "gve", .driver = "gve", .mod = "gve: ",
		.rx_ring_max = 4096, .tx_ring_max = 4096, .ring_min = 64,
		.rx_ring_def = 1024, .tx_ring_def = 1024,
		.rx_buf_len = DSIM_PROF_NEW,	/* gve_ethtool.c:984-985 */
		.indir_size = 128, .key_size = 40,	/* gve.h:75-76 */
		.max_rules = 64, .loc = DSIM_LOC_CALLER,
		.ntuple_present = true,		/* gve_adminq.c:998 */
		.ch_modes = DSIM_CH_SEPARATE,	/* gve_ethtool.c:485-498 */
		.queue_ops = true,		/* gve_main.c:2766 */
		.unreadable = DSIM_PROF_NEW,	/* gve_buffer_mgmt_dqo.c:262 */
	},
	{
		/* a P5 PF whose firmware has the queue API, the ntuple VNIC,
		 * multiple RSS contexts and TPA */
		.id = DSIM_PROF_BNXT, .name = "bnxt", .driver = "bnxt_en",
		.mod = "bnxt_en: ",
		.rx_ring_max = 8191, .tx_ring_max = 2047,	/* bnxt.h:822-825 */
		.ring_min = 19,			/* MAX_SKB_FRAGS + 2, bnxt.h:830 */
		.rx_ring_def = 511, .tx_ring_def = 511,
		.hds_thresh = DSIM_PROF_NEW, .hds_max = 1023,	/* bnxt.h:2857 */
		.page_size_max = 32768,		/* bnxt.h:767 */
		.indir_size = 64, .key_size = 40,	/* bnxt.c:6723, bnxt_ethtool.c:1874 */
		.max_ctx = 33,			/* bnxt_ethtool.c:5730 */
		.max_rules = 5120,		/* bnxt.c:17335-17339, bnxt.h:2697 */
		.loc = DSIM_LOC_ANY_FIRST, .loc_special = true,
		.ntuple_on = true, .ntuple_present = true,	/* bnxt.c:15293 */
		.ch_modes = DSIM_CH_COMBINED | DSIM_CH_SEPARATE,
		.queue_ops = true, .unreadable = DSIM_PROF_NEW,	/* bnxt.c:3946 */
	},
	{
		/* striding RQ with hardware GRO, CONFIG_MLX5_EN_ARFS */
		.id = DSIM_PROF_MLX5, .name = "mlx5", .driver = "mlx5_core",
		.mod = "mlx5_core: ",
		.rx_ring_max = 8192, .tx_ring_max = 8192,	/* en.h:130-134 */
		/* rx: 1 << (1 + MLX5E_LOG_MAX_RX_WQE_BULK), en.h:124-132 */
		.ring_min = 16, .rx_ring_def = 1024, .tx_ring_def = 1024,
		.hds_thresh = DSIM_PROF_NEW,	/* reported 0, max 0 */
		.page_size_max = 131072,	/* en/params.c:497-507 */
		.pack_align = 256,		/* en.h:98-103 */
		.indir_size = 256, .key_size = 40,	/* en/rqt.c:186 */
		.max_ctx = 16,			/* en/rx_res.h:13 */
		.max_rules = 1024, .loc = DSIM_LOC_CALLER,	/* en_fs_ethtool.c:552 */
		.ntuple_present = true,		/* en_main.c:5960 */
		.ch_modes = DSIM_CH_COMBINED,
		.queue_ops = DSIM_PROF_NEW,	/* en_main.c:5817 */
		.unreadable = DSIM_PROF_NEW,	/* en_main.c:1024-1026 */
	},
	{
		.id = DSIM_PROF_FBNIC, .name = "fbnic", .driver = "fbnic",
		.mod = "fbnic: ",
		.rx_ring_max = 65536, .tx_ring_max = 65536,	/* fbnic_txrx.h:42 */
		.ring_min = 64, .rx_ring_def = 1024, .tx_ring_def = 1024,
		.hds_thresh = DSIM_PROF_NEW, .hds_def = 1536, .hds_max = 3584,
		.pack_align = 128,		/* fbnic_txrx.c:1033-1034 */
		.indir_size = 256, .key_size = 54,	/* fbnic_csr.h:702-786 */
		.max_ctx = 2,			/* fbnic_ethtool.c:2027 */
		.max_rules = 48, .loc = DSIM_LOC_ANY_LAST, .loc_special = true,
		.ntuple_on = DSIM_PROF_NEW, .ntuple_fixed = true,
		.ntuple_present = DSIM_PROF_NEW,	/* fbnic_netdev.c:819 */
		.ch_modes = DSIM_CH_COMBINED | DSIM_CH_SEPARATE, .ch_other = 1,
		.queue_ops = DSIM_PROF_NEW,	/* fbnic_netdev.c:761 */
		.unreadable = DSIM_PROF_NEW,	/* fbnic_txrx.c:1611 */
	},
};

const struct dsim_profile *dsim_prof = &dsim_profiles[0];

static struct ethtool_ops dsim_prof_ethtool_ops;

int dsim_profile_select(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(dsim_profiles); i++) {
		if (strcmp(name, dsim_profiles[i].name))
			continue;
		if (i && !DSIM_PROF_LTS && !DSIM_PROF_NEW) {
			pr_err("profile=%s describes the drivers of 6.12 and 7.3, not of this kernel\n",
			       name);
			return -EINVAL;
		}
		dsim_prof = &dsim_profiles[i];
		return 0;
	}
	pr_err("profile must be default, gve, bnxt, mlx5 or fbnic\n");
	return -EINVAL;
}

static bool dsim_is(enum dsim_prof_id id)
{
	return dsim_prof->id == id;
}

/* ------------------------------------------------------------------ */
/* the device: features, ethtool ops, queue ops                        */

/* bnxt: the aggregation rings are on, and with them what ethtool reports
 * as tcp-data-split: header split, hardware GRO or LRO, or an MTU whose
 * buffer does not fit a page (bnxt.c:4912-4921, bnxt_ethtool.c:831-839).
 */
static bool dsim_bnxt_agg(const struct dsim_priv *priv)
{
	const struct net_device *dev = priv->dev;
	u32 rx_size = SKB_DATA_ALIGN(dev->mtu + ETH_HLEN + NET_IP_ALIGN + 8);
	u32 rx_space = rx_size + ALIGN(max(NET_SKB_PAD, XDP_PACKET_HEADROOM), 8) +
		       SKB_DATA_ALIGN(sizeof(struct skb_shared_info));

	return priv->bnxt_hds || (dev->features & (NETIF_F_GRO_HW | NETIF_F_LRO)) ||
	       rx_space > PAGE_SIZE;
}

void dsim_profile_setup(struct net_device *dev)
{
	struct ethtool_ops *ops = &dsim_prof_ethtool_ops;
	const struct dsim_profile *p = dsim_prof;

	*ops = dsim_ethtool_ops;
	ops->supported_ring_params = 0;
	/* none of the four adds a rule's queue to its RSS context's choice:
	 * the core refuses such rules (net/ethtool/ioctl.c:1203-1211) */
	ops->cap_rss_rxnfc_adds = 0;
	ops->rxfh_max_num_contexts = p->max_ctx;
	ops->rxfh_indir_space = p->indir_size;
	switch (p->id) {
	case DSIM_PROF_DEFAULT:
		return;
	case DSIM_PROF_GVE:
		/* gve_ethtool.c:984-985; 6.12 gve_ethtool.c:908 */
		ops->supported_ring_params = ETHTOOL_RING_USE_TCP_DATA_SPLIT;
#if DSIM_PROF_NEW
		ops->supported_ring_params |= ETHTOOL_RING_USE_RX_BUF_LEN;
#endif
		ops->create_rxfh_context = NULL;	/* gve_ethtool.c:989-1010 */
		ops->modify_rxfh_context = NULL;
		ops->remove_rxfh_context = NULL;
		dev->features &= ~NETIF_F_NTUPLE;	/* gve_main.c:2892 */
		break;
	case DSIM_PROF_BNXT:
#if DSIM_PROF_NEW
		ops->supported_ring_params = ETHTOOL_RING_USE_TCP_DATA_SPLIT |
					     ETHTOOL_RING_USE_HDS_THRS;
#endif
		ops->rxfh_per_ctx_key = 1;		/* bnxt_ethtool.c:5729 */
		dev->hw_features |= NETIF_F_GRO_HW;	/* bnxt.c:17280-17282 */
		dev->features |= NETIF_F_GRO_HW;
		dev->max_mtu = 9500;			/* bnxt.h:769 */
		break;
	case DSIM_PROF_MLX5:
#if DSIM_PROF_NEW
		ops->supported_ring_params = ETHTOOL_RING_USE_TCP_DATA_SPLIT |
					     ETHTOOL_RING_USE_HDS_THRS;
#endif
		dev->hw_features |= NETIF_F_GRO_HW;	/* en_main.c:5882-5886 */
		dev->features &= ~(NETIF_F_GRO_HW | NETIF_F_NTUPLE); /* 5948, 5960 */
		break;
	case DSIM_PROF_FBNIC:
#if DSIM_PROF_NEW
		ops->supported_ring_params = ETHTOOL_RING_USE_TCP_DATA_SPLIT |
					     ETHTOOL_RING_USE_HDS_THRS;
		/* fbnic_netdev.c:816-819: on, not in hw_features (fixed) */
		dev->hw_features &= ~NETIF_F_NTUPLE;
#else
		/* 6.12: no ring parameters, no ntuple filters */
		ops->get_ringparam = NULL;
		ops->set_ringparam = NULL;
		dev->hw_features &= ~NETIF_F_NTUPLE;
		dev->features &= ~NETIF_F_NTUPLE;
#endif
		break;
	}
	dev->ethtool_ops = ops;
	if (!p->queue_ops)
		dev->queue_mgmt_ops = NULL;
#ifdef DSIM_NETMEM_TX
	if (!DSIM_PROF_NEW)
		dev->netmem_tx = 0;
#endif
}

/* Defaults of a profile's device (after dsim_priv_init's). */
void dsim_profile_init_priv(struct dsim_priv *priv)
{
	const struct dsim_profile *p = dsim_prof;

	priv->indir_size = p->indir_size;
	priv->max_ctx = p->max_ctx;
	priv->max_rules = p->max_rules;
	if (dsim_is(DSIM_PROF_DEFAULT))
		return;
	priv->rx_ring = p->rx_ring_def;
	priv->tx_ring = p->tx_ring_def;
	priv->hds = dsim_is(DSIM_PROF_FBNIC);	/* the hardware always splits */
	priv->hds_thresh = p->hds_def;
#if DSIM_HAVE_HDS_THRESH
	if (dsim_is(DSIM_PROF_BNXT))	/* bnxt.c:4883-4892 */
		priv->hds_thresh = max_t(u32, 256, SZ_1K - NET_SKB_PAD -
					 SKB_DATA_ALIGN(sizeof(struct skb_shared_info)));
	priv->dev->cfg->hds_thresh = priv->hds_thresh;
#else
	priv->hds_thresh = 0;
#endif
	if (dsim_is(DSIM_PROF_GVE) && DSIM_PROF_NEW)
		priv->layout.buf_size = SZ_4K;	/* gve_adminq.c:969-972 */
	if (p->pack_align) {
		priv->layout.pack = true;
		priv->layout.align = p->pack_align;
	}
}

/* May the page pools take unreadable netmem (a dma-buf provider)? */
bool dsim_prof_unreadable(const struct dsim_priv *priv)
{
	if (!dsim_prof->unreadable)
		return false;
	switch (dsim_prof->id) {
	case DSIM_PROF_BNXT:		/* bnxt.c:3946-3947: always */
	case DSIM_PROF_FBNIC:		/* fbnic_txrx.c:1611: a queue with a provider */
		return true;
	default:			/* header split on (gve, mlx5: SHAMPO) */
		return priv->hds;
	}
}

netdev_features_t dsim_prof_fix_features(struct net_device *dev,
					 netdev_features_t features)
{
#if DSIM_HAVE_HDS_THRESH
	/* en_main.c:4624-4629 */
	if (dsim_is(DSIM_PROF_MLX5) &&
	    dev->cfg->hds_config == ETHTOOL_TCP_DATA_SPLIT_ENABLED &&
	    !(features & NETIF_F_GRO_HW)) {
		netdev_warn(dev, "Keeping HW-GRO enabled, TCP header-data split depends on it\n");
		features |= NETIF_F_GRO_HW;
	}
#endif
	return features;
}

/* ------------------------------------------------------------------ */
/* rings                                                               */

void dsim_prof_get_ringparam(struct net_device *dev, struct ethtool_ringparam *ring,
			     struct kernel_ethtool_ringparam *kring)
{
	struct dsim_priv *priv = netdev_priv(dev);
	const struct dsim_profile *p = dsim_prof;

	ring->rx_max_pending = p->rx_ring_max;
	ring->tx_max_pending = p->tx_ring_max;
	ring->rx_pending = priv->rx_ring;
	ring->tx_pending = priv->tx_ring;
	switch (p->id) {
	case DSIM_PROF_DEFAULT:
		break;
	case DSIM_PROF_GVE:		/* gve_ethtool.c:543-563 */
#if DSIM_PROF_NEW
		kring->rx_buf_len = priv->layout.buf_size;
#endif
		kring->tcp_data_split = priv->hds ? ETHTOOL_TCP_DATA_SPLIT_ENABLED :
						    ETHTOOL_TCP_DATA_SPLIT_DISABLED;
		break;
	case DSIM_PROF_BNXT:		/* bnxt_ethtool.c:824-847 */
		if (dsim_bnxt_agg(priv)) {
			ring->rx_max_pending = 2047;
			ring->rx_jumbo_max_pending = 8191;
			kring->tcp_data_split = ETHTOOL_TCP_DATA_SPLIT_ENABLED;
		} else {
			ring->rx_jumbo_max_pending = 0;
			kring->tcp_data_split = ETHTOOL_TCP_DATA_SPLIT_DISABLED;
		}
#if DSIM_HAVE_HDS_THRESH
		kring->hds_thresh_max = p->hds_max;
#endif
		break;
	case DSIM_PROF_MLX5:
#if DSIM_HAVE_HDS_THRESH
		/* en_ethtool.c:362-381: tcp-data-split left as configured */
		kring->hds_thresh = 0;
		kring->hds_thresh_max = 0;
#else
		/* 6.12 en_ethtool.c:348-351: on with SHAMPO (hardware GRO) */
		kring->tcp_data_split = (dev->features & NETIF_F_GRO_HW) ?
					ETHTOOL_TCP_DATA_SPLIT_ENABLED :
					ETHTOOL_TCP_DATA_SPLIT_DISABLED;
#endif
		break;
	case DSIM_PROF_FBNIC:		/* fbnic_ethtool.c:294-314 */
		ring->rx_mini_max_pending = p->rx_ring_max;
		ring->rx_jumbo_max_pending = p->rx_ring_max;
		ring->rx_mini_pending = 256;
		ring->rx_jumbo_pending = 256;
		kring->tcp_data_split = ETHTOOL_TCP_DATA_SPLIT_ENABLED;
#if DSIM_HAVE_HDS_THRESH
		kring->hds_thresh_max = p->hds_max;
		kring->hds_thresh = priv->hds_thresh;
#endif
		break;
	}
}

/* The configured header split the core holds (7.x), for the drivers
 * that compare with it. */
static u8 dsim_hds_config(struct net_device *dev)
{
#if DSIM_HAVE_HDS_THRESH
	return dev->cfg->hds_config;
#else
	return ETHTOOL_TCP_DATA_SPLIT_UNKNOWN;
#endif
}

static int dsim_gve_set_rings(struct net_device *dev, struct ethtool_ringparam *ring,
			      struct kernel_ethtool_ringparam *kring,
			      struct netlink_ext_ack *extack, bool *restart)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 len = kring->rx_buf_len;
	bool hds = priv->hds;

#if DSIM_PROF_NEW
	/* gve_main.c:2111-2141 */
	if (len != priv->layout.buf_size) {
		if (len != SZ_2K && len != SZ_4K) {
			NL_SET_ERR_MSG(extack, "gve: Rx buf len can only be 2048 or 4096");
			return -EINVAL;
		}
		*restart = true;
	}
#else
	len = 0;
#endif
	/* gve_main.c:2143-2166: "auto" changes nothing */
	if (kring->tcp_data_split != ETHTOOL_TCP_DATA_SPLIT_UNKNOWN)
		hds = kring->tcp_data_split == ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	*restart |= hds != priv->hds;
	/* gve_ethtool.c:566-601 */
	if (ring->rx_pending != priv->rx_ring || ring->tx_pending != priv->tx_ring) {
		if (ring->rx_pending < 64 || ring->tx_pending < 64) {
			netdev_err(dev, "Requested descriptor count out of range\n");
			return -EINVAL;
		}
		if (!is_power_of_2(ring->rx_pending) || !is_power_of_2(ring->tx_pending)) {
			netdev_err(dev, "Requested descriptor count has to be a power of 2\n");
			return -EINVAL;
		}
		*restart = true;
	}
	if (len)
		priv->layout.buf_size = len;
	WRITE_ONCE(priv->hds, hds);
	return 0;
}

static int dsim_bnxt_set_rings(struct net_device *dev, struct ethtool_ringparam *ring,
			       struct kernel_ethtool_ringparam *kring,
			       struct netlink_ext_ack *extack, bool *restart)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u8 tds = kring->tcp_data_split;
	bool mod;

	/* bnxt_ethtool.c:849-897 */
	if (ring->rx_pending > 8191 || ring->tx_pending > 2047 ||
	    ring->tx_pending < dsim_prof->ring_min)
		return -EINVAL;
	mod = DSIM_PROF_NEW && tds != dsim_hds_config(dev);
	if (tds == ETHTOOL_TCP_DATA_SPLIT_DISABLED && mod)
		return -EINVAL;
	if (mod)	/* on: BNXT_FLAG_HDS; "auto": cleared */
		priv->bnxt_hds = tds == ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	WRITE_ONCE(priv->hds, priv->bnxt_hds);
#if DSIM_HAVE_HDS_THRESH
	WRITE_ONCE(priv->hds_thresh, kring->hds_thresh);
#endif
	*restart = true;	/* bnxt_close_nic() + bnxt_open_nic() */
	return 0;
}

static int dsim_mlx5_set_rings(struct net_device *dev, struct ethtool_ringparam *ring,
			       struct kernel_ethtool_ringparam *kring,
			       struct netlink_ext_ack *extack, bool *restart)
{
	struct dsim_priv *priv = netdev_priv(dev);
	bool hds = priv->hds;

#if DSIM_HAVE_HDS_THRESH
	/* en_ethtool.c:393-411 */
	if (kring->tcp_data_split == ETHTOOL_TCP_DATA_SPLIT_ENABLED &&
	    !(dev->features & NETIF_F_GRO_HW)) {
		NL_SET_ERR_MSG(extack,
			       "mlx5_core: TCP-data-split is not supported when GRO HW is disabled");
		return -EINVAL;
	}
	hds = kring->tcp_data_split == ETHTOOL_TCP_DATA_SPLIT_ENABLED;
#endif
	/* en_ethtool.c:418-437 */
	if (ring->rx_pending < dsim_prof->ring_min) {
		NL_SET_ERR_MSG_FMT(extack, "mlx5_core: rx (%d) < min (%d)",
				   ring->rx_pending, dsim_prof->ring_min);
		return -EINVAL;
	}
	if (ring->tx_pending < 64) {
		NL_SET_ERR_MSG_FMT(extack, "mlx5_core: tx (%d) < min (%d)",
				   ring->tx_pending, 64);
		return -EINVAL;
	}
	ring->rx_pending = roundup_pow_of_two(ring->rx_pending);
	ring->tx_pending = roundup_pow_of_two(ring->tx_pending);
	*restart = hds != priv->hds || ring->rx_pending != priv->rx_ring ||
		   ring->tx_pending != priv->tx_ring;
	WRITE_ONCE(priv->hds, hds);
	return 0;
}

static int dsim_fbnic_set_rings(struct net_device *dev, struct ethtool_ringparam *ring,
				struct kernel_ethtool_ringparam *kring,
				struct netlink_ext_ack *extack, bool *restart)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 mini = roundup_pow_of_two(max(ring->rx_mini_pending, 1u));
	u32 jumbo = roundup_pow_of_two(max(ring->rx_jumbo_pending, 1u));

	/* fbnic_ethtool.c:333-374 */
	ring->rx_pending = ring->rx_pending ? roundup_pow_of_two(ring->rx_pending) : 0;
	ring->tx_pending = ring->tx_pending ? roundup_pow_of_two(ring->tx_pending) : 0;
	if (ring->rx_pending < 64 || mini < 64 || jumbo < 64 || ring->tx_pending < 64) {
		NL_SET_ERR_MSG(extack, "fbnic: requested ring size too small");
		return -EINVAL;
	}
	if (kring->tcp_data_split == ETHTOOL_TCP_DATA_SPLIT_DISABLED) {
		NL_SET_ERR_MSG(extack, "fbnic: Cannot disable TCP data split");
		return -EINVAL;
	}
#if DSIM_HAVE_HDS_THRESH
	WRITE_ONCE(priv->hds_thresh, kring->hds_thresh);
#else
	(void)priv;
#endif
	*restart = true;	/* a clone of the rings swapped in */
	return 0;
}

int dsim_prof_set_ringparam(struct net_device *dev, struct ethtool_ringparam *ring,
			    struct kernel_ethtool_ringparam *kring,
			    struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	bool restart = false;
	int err = -EOPNOTSUPP;

	switch (dsim_prof->id) {
	case DSIM_PROF_GVE:
		err = dsim_gve_set_rings(dev, ring, kring, extack, &restart);
		break;
	case DSIM_PROF_BNXT:
		err = dsim_bnxt_set_rings(dev, ring, kring, extack, &restart);
		break;
	case DSIM_PROF_MLX5:
		err = dsim_mlx5_set_rings(dev, ring, kring, extack, &restart);
		break;
	case DSIM_PROF_FBNIC:
		err = dsim_fbnic_set_rings(dev, ring, kring, extack, &restart);
		break;
	default:
		break;
	}
	if (err)
		return err;
	priv->rx_ring = ring->rx_pending;
	priv->tx_ring = ring->tx_pending;
	/* the driver reconfigures its queues; a bound queue's provider is
	 * the queue's, and the new pool takes it up again */
	if (restart && netif_running(dev)) {
		netif_tx_stop_all_queues(dev);
		dsim_stop_all(priv);
		err = dsim_start_all(priv);
		netif_tx_start_all_queues(dev);
	}
	return err;
}

/* ------------------------------------------------------------------ */
/* channels                                                            */

void dsim_prof_get_channels(struct net_device *dev, struct ethtool_channels *ch)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 rx = dev->real_num_rx_queues, tx = dev->real_num_tx_queues;

	if (dsim_prof->ch_modes & DSIM_CH_SEPARATE) {
		ch->max_rx = priv->nq;
		ch->max_tx = priv->nq;
	}
	if (dsim_prof->ch_modes & DSIM_CH_COMBINED)
		ch->max_combined = priv->nq;
	ch->max_other = ch->other_count = dsim_prof->ch_other;
	if ((dsim_prof->ch_modes & DSIM_CH_COMBINED) && rx == tx) {
		ch->combined_count = rx;
	} else {
		ch->rx_count = rx;
		ch->tx_count = tx;
	}
}

/* The RX and TX queue counts @ch asks for, or the driver's refusal. */
int dsim_prof_check_channels(struct net_device *dev, const struct ethtool_channels *ch,
			     unsigned int *rx, unsigned int *tx)
{
	u32 c = ch->combined_count;

	switch (dsim_prof->id) {
	case DSIM_PROF_GVE:		/* gve_ethtool.c:512-518 */
		if (c || !ch->rx_count || !ch->tx_count)
			return -EINVAL;
		break;
	case DSIM_PROF_BNXT:		/* bnxt_ethtool.c:966-977 */
		if (ch->other_count || (!c && (!ch->rx_count || !ch->tx_count)) ||
		    (c && (ch->rx_count || ch->tx_count)))
			return -EINVAL;
		break;
	case DSIM_PROF_MLX5:		/* en_ethtool.c:511-516 */
		if (!c) {
			netdev_info(dev, "mlx5e_ethtool_set_channels: combined_count=0 not supported\n");
			return -EINVAL;
		}
		break;
	case DSIM_PROF_FBNIC:		/* fbnic_ethtool.c:1623-1628 */
		if ((ch->rx_count && ch->tx_count && c) ||
		    ch->other_count != dsim_prof->ch_other)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	*rx = c + ch->rx_count;
	*tx = c + ch->tx_count;
	if (!*rx || !*tx)
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------------ */
/* RSS contexts and NIC pages                                          */

int dsim_prof_check_ctx(struct net_device *dev, const struct ethtool_rxfh_param *rxfh,
			struct netlink_ext_ack *extack)
{
	switch (dsim_prof->id) {
	case DSIM_PROF_BNXT:		/* bnxt_ethtool.c:1944-1964 */
		if (rxfh->hfunc && rxfh->hfunc != ETH_RSS_HASH_TOP) {
			NL_SET_ERR_MSG(extack, "bnxt_en: RSS hash function not supported");
			return -EOPNOTSUPP;
		}
		if (!netif_running(dev)) {
			NL_SET_ERR_MSG(extack,
				       "bnxt_en: Unable to set RSS contexts when interface is down");
			return -EAGAIN;
		}
		return 0;
	case DSIM_PROF_FBNIC:		/* fbnic_ethtool.c:1478-1482 */
		if (rxfh->hfunc && rxfh->hfunc != ETH_RSS_HASH_TOP) {
			NL_SET_ERR_MSG(extack, "fbnic: RSS hash function not supported");
			return -EOPNOTSUPP;
		}
		return 0;
	default:
		if (rxfh->hfunc != ETH_RSS_HASH_NO_CHANGE &&
		    rxfh->hfunc != ETH_RSS_HASH_TOP) {
			NL_SET_ERR_MSG(extack, "only the Toeplitz hash is supported");
			return -EOPNOTSUPP;
		}
		return 0;
	}
}

int dsim_prof_validate_page_size(struct net_device *dev, u32 size,
				 struct netlink_ext_ack *extack)
{
	switch (dsim_prof->id) {
	case DSIM_PROF_BNXT:		/* bnxt.c:16332-16351: no extack */
		if (!is_power_of_2(size) || size < PAGE_SIZE ||
		    size > dsim_prof->page_size_max)
			return -ERANGE;
		return 0;
	case DSIM_PROF_MLX5:		/* en_main.c:5669-5691: dmesg only */
		if (!is_power_of_2(size)) {
			netdev_err(dev, "rx_page_size not power of 2: %u", size);
			return -EINVAL;
		}
		if (size < PAGE_SIZE || size > dsim_prof->page_size_max) {
			netdev_err(dev, "Selected rx_page_size %u not in supported range [%lu, %u]\n",
				   size, PAGE_SIZE, dsim_prof->page_size_max);
			return -ERANGE;
		}
		return 0;
	default:
		if (!is_power_of_2(size) || size < PAGE_SIZE ||
		    size > PAGE_SIZE << DSIM_MAX_PAGE_ORDER) {
			NL_SET_ERR_MSG_FMT(extack,
					   "rx_page_size %u not supported: a power of two from %lu to %lu",
					   size, PAGE_SIZE, PAGE_SIZE << DSIM_MAX_PAGE_ORDER);
			return -ERANGE;
		}
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* ntuple rules                                                        */

static bool dsim_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/* mlx5: the fields a rule matches, which order the rules
 * (en_fs_ethtool.c:572-660, 95-110: more fields, higher priority). */
u32 dsim_prof_rule_prio(const struct ethtool_rx_flow_spec *fs)
{
	const union ethtool_flow_union *m = &fs->m_u;
	u32 n = 1;

	switch (fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS)) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
		n += !!m->tcp_ip4_spec.ip4src + !!m->tcp_ip4_spec.ip4dst +
		     !!m->tcp_ip4_spec.psrc + !!m->tcp_ip4_spec.pdst;
		break;
	case IP_USER_FLOW:
		n += !!m->usr_ip4_spec.ip4src + !!m->usr_ip4_spec.ip4dst +
		     !!m->usr_ip4_spec.proto;
		break;
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
		n += !dsim_zero(m->tcp_ip6_spec.ip6src, 16) +
		     !dsim_zero(m->tcp_ip6_spec.ip6dst, 16) +
		     !!m->tcp_ip6_spec.psrc + !!m->tcp_ip6_spec.pdst;
		break;
	case IPV6_USER_FLOW:
		n += !dsim_zero(m->usr_ip6_spec.ip6src, 16) +
		     !dsim_zero(m->usr_ip6_spec.ip6dst, 16) + !!m->usr_ip6_spec.l4_proto;
		break;
	}
	return n;
}

static int dsim_gve_check_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	struct ethtool_rx_flow_spec *fs = &info->fs;
	u32 type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);

	if (!(priv->dev->features & NETIF_F_NTUPLE))	/* gve_ethtool.c:823 */
		return -EOPNOTSUPP;
	if (fs->ring_cookie == RX_CLS_FLOW_DISC)	/* gve_flow_rule.c:123 */
		return -EOPNOTSUPP;
	if (fs->ring_cookie >= priv->dev->real_num_rx_queues)
		return -EINVAL;
	if (!type || type > ESP_V6_FLOW)		/* gve_flow_rule.c:131-133 */
		return -EINVAL;
	/* the device keeps the match and the queue, not the flags */
	fs->flow_type = type;
	memset(&fs->h_ext, 0, sizeof(fs->h_ext));
	memset(&fs->m_ext, 0, sizeof(fs->m_ext));
	info->rss_context = 0;
	return 0;
}

/* bnxt: the rule that matches exactly the same (bnxt_ethtool.c:1491-1498). */
static bool dsim_bnxt_dup(struct dsim_priv *priv, const struct ethtool_rx_flow_spec *fs)
{
	unsigned int i, seen = 0;

	for (i = 0; i < priv->max_rules && seen < priv->nrules; i++) {
		const struct ethtool_rx_flow_spec *o = &priv->rules[i].fs;

		if (!priv->rules[i].used)
			continue;
		seen++;
		if ((o->flow_type & ~FLOW_RSS) == (fs->flow_type & ~FLOW_RSS) &&
		    !memcmp(&o->h_u, &fs->h_u, sizeof(fs->h_u)) &&
		    !memcmp(&o->m_u, &fs->m_u, sizeof(fs->m_u)))
			return true;
	}
	return false;
}

static int dsim_bnxt_check_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	struct ethtool_rx_flow_spec *fs = &info->fs;
	u32 type = fs->flow_type & ~(FLOW_EXT | FLOW_RSS);

	/* bnxt_ethtool.c:1538-1575 */
	if (!netif_running(priv->dev))
		return -EAGAIN;
	if (!(priv->dev->features & NETIF_F_NTUPLE))
		return -EPERM;
	if (fs->location != RX_CLS_LOC_ANY)
		return -EINVAL;
	if (fs->flow_type & FLOW_MAC_EXT)
		return -EINVAL;
	if (fs->ring_cookie != RX_CLS_FLOW_DISC &&
	    (ethtool_get_flow_spec_ring_vf(fs->ring_cookie) ||
	     ethtool_get_flow_spec_ring(fs->ring_cookie) >= priv->dev->real_num_rx_queues))
		return -EINVAL;
	/* bnxt_ethtool.c:1374-1531 */
	if (fs->flow_type & FLOW_EXT)
		return -EOPNOTSUPP;
	switch (type) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
	case IP_USER_FLOW:
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
	case IPV6_USER_FLOW:
		break;
	default:		/* ETHER_FLOW's L2 filters are not simulated */
		return -EOPNOTSUPP;
	}
	if (dsim_zero(&fs->m_u, sizeof(fs->m_u)))
		return -EOPNOTSUPP;
	if (dsim_bnxt_dup(priv, fs))
		return -EEXIST;
	if ((fs->flow_type & FLOW_RSS) &&
	    (!info->rss_context || info->rss_context >= priv->max_ctx ||
	     !priv->ctx_used[info->rss_context]))
		return -EINVAL;
	return 0;
}

static int dsim_mlx5_check_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	struct ethtool_rx_flow_spec *fs = &info->fs;
	const union ethtool_flow_union *m = &fs->m_u;

	/* en_fs_ethtool.c:663-720 */
	if (fs->location >= 1024)
		return -ENOSPC;
	if (fs->ring_cookie != RX_CLS_FLOW_DISC &&
	    fs->ring_cookie >= priv->dev->real_num_rx_queues)
		return -EINVAL;
	switch (fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS)) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
		if (m->tcp_ip4_spec.tos)
			return -EINVAL;
		break;
	case IP_USER_FLOW:
		if (m->usr_ip4_spec.l4_4_bytes || m->usr_ip4_spec.tos ||
		    fs->h_u.usr_ip4_spec.ip_ver != ETH_RX_NFC_IP4)
			return -EINVAL;
		break;
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
		if (m->tcp_ip6_spec.tclass)
			return -EINVAL;
		break;
	case IPV6_USER_FLOW:
		if (m->usr_ip6_spec.l4_4_bytes || m->usr_ip6_spec.tclass)
			return -EINVAL;
		break;
	default:		/* ETHER_FLOW is not simulated */
		return -EOPNOTSUPP;
	}
	/* a VLAN match (en_fs_ethtool.c:650-660) is not simulated */
	if (fs->flow_type & FLOW_EXT)
		return -EINVAL;
	/* en_fs_ethtool.c:427-437 */
	if ((fs->flow_type & FLOW_RSS) &&
	    (info->rss_context >= priv->max_ctx ||
	     (info->rss_context && !priv->ctx_used[info->rss_context])))
		return -ENOENT;
	return 0;
}

/* fbnic: the address TCAMs (fbnic_rpc.h:40-41) hold 8 distinct source
 * and 8 distinct destination addresses (with their masks) for all rules. */
struct dsim_addr {
	u8 a[16], m[16];
	unsigned int len;
};

static bool dsim_fbnic_addr_add(const struct ethtool_rx_flow_spec *fs, bool dst,
				struct dsim_addr *set, unsigned int *n)
{
	u32 type = fs->flow_type & ~(FLOW_EXT | FLOW_RSS);
	bool v6 = type == TCP_V6_FLOW || type == UDP_V6_FLOW || type == IPV6_USER_FLOW;
	struct dsim_addr x = { .len = v6 ? 16 : 4 };
	unsigned int i;

	if (v6) {
		memcpy(x.a, dst ? fs->h_u.tcp_ip6_spec.ip6dst : fs->h_u.tcp_ip6_spec.ip6src, 16);
		memcpy(x.m, dst ? fs->m_u.tcp_ip6_spec.ip6dst : fs->m_u.tcp_ip6_spec.ip6src, 16);
	} else {
		memcpy(x.a, dst ? &fs->h_u.tcp_ip4_spec.ip4dst : &fs->h_u.tcp_ip4_spec.ip4src, 4);
		memcpy(x.m, dst ? &fs->m_u.tcp_ip4_spec.ip4dst : &fs->m_u.tcp_ip4_spec.ip4src, 4);
	}
	if (dsim_zero(x.m, x.len))
		return true;
	for (i = 0; i < x.len; i++)
		x.a[i] &= x.m[i];
	for (i = 0; i < *n; i++)
		if (set[i].len == x.len && !memcmp(set[i].a, x.a, x.len) &&
		    !memcmp(set[i].m, x.m, x.len))
			return true;
	if (*n >= 8)
		return false;
	set[(*n)++] = x;
	return true;
}

static int dsim_fbnic_addrs(struct dsim_priv *priv, const struct ethtool_rx_flow_spec *fs)
{
	struct dsim_addr src[8], dst[8];
	unsigned int i, ns = 0, nd = 0;

	for (i = 0; i < priv->max_rules; i++)
		if (priv->rules[i].used &&
		    (!dsim_fbnic_addr_add(&priv->rules[i].fs, false, src, &ns) ||
		     !dsim_fbnic_addr_add(&priv->rules[i].fs, true, dst, &nd)))
			return -ENOSPC;
	if (!dsim_fbnic_addr_add(fs, false, src, &ns) ||
	    !dsim_fbnic_addr_add(fs, true, dst, &nd))
		return -ENOSPC;
	return 0;
}

static int dsim_fbnic_check_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	struct ethtool_rx_flow_spec *fs = &info->fs;

	/* fbnic_ethtool.c:903-960 */
	if (fs->location != RX_CLS_LOC_ANY)
		return -EINVAL;
	if (fs->ring_cookie != RX_CLS_FLOW_DISC && !(fs->flow_type & FLOW_RSS) &&
	    ethtool_get_flow_spec_ring(fs->ring_cookie) >= priv->dev->real_num_rx_queues)
		return -EINVAL;
	switch (fs->flow_type & ~(FLOW_EXT | FLOW_RSS)) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
		break;
	case IP_USER_FLOW:
		if (fs->m_u.usr_ip4_spec.proto && fs->m_u.usr_ip4_spec.proto != 0xff)
			return -EINVAL;
		break;
	case IPV6_USER_FLOW:
		if (fs->m_u.usr_ip6_spec.l4_proto && fs->m_u.usr_ip6_spec.l4_proto != 0xff)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	/* only context 1 is one; any other FLOW_RSS rule goes to the
	 * default table (fbnic_ethtool.c:931-934) */
	if ((fs->flow_type & FLOW_RSS) && info->rss_context != 1)
		info->rss_context = 0;
	if ((fs->flow_type & FLOW_EXT) &&
	    !dsim_zero(&fs->m_ext, sizeof(fs->m_ext)))
		return -EINVAL;
	return dsim_fbnic_addrs(priv, fs);
}

/* The driver's checks of a rule to insert (cfg_lock held); it may
 * rewrite what the device keeps of it. */
int dsim_prof_check_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info)
{
	switch (dsim_prof->id) {
	case DSIM_PROF_GVE:
		return dsim_gve_check_rule(priv, info);
	case DSIM_PROF_BNXT:
		return dsim_bnxt_check_rule(priv, info);
	case DSIM_PROF_MLX5:
		return dsim_mlx5_check_rule(priv, info);
	case DSIM_PROF_FBNIC:
		return dsim_fbnic_check_rule(priv, info);
	default:
		return -EOPNOTSUPP;
	}
}

/* Where a profile's rule goes: 0 and *out, or the driver's refusal. */
int dsim_prof_rule_loc(struct dsim_priv *priv, u32 loc, u32 *out)
{
	u32 i;

	switch (dsim_prof->loc) {
	case DSIM_LOC_ANY_FIRST:	/* bnxt: the first free software id */
		for (i = 0; i < priv->max_rules; i++)
			if (!priv->rules[i].used)
				break;
		if (i == priv->max_rules)
			return -ENOSPC;
		*out = i;
		return 0;
	case DSIM_LOC_ANY_LAST:		/* fbnic_ethtool.c:889-901 */
		for (i = priv->max_rules; i-- > 0;)
			if (!priv->rules[i].used) {
				*out = i;
				return 0;
			}
		return -ENOSPC;
	case DSIM_LOC_CALLER:
		if (loc >= priv->max_rules)
			return dsim_is(DSIM_PROF_MLX5) ? -ENOSPC : -EINVAL;
		/* gve: the device refuses a used location
		 * (gve_adminq.c:436-442); mlx5 replaces the rule there
		 * (en_fs_ethtool.c:744) */
		if (priv->rules[loc].used && dsim_is(DSIM_PROF_GVE))
			return -EINVAL;
		*out = loc;
		return 0;
	default:
		return -EINVAL;
	}
}
