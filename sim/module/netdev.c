// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim net_device: the netdev ops (open/stop, stats, features), the
 * life cycle of the RX queues (one NAPI and one page pool each) and the
 * queue management API through which the core restarts a single queue with
 * a memory provider installed, plus the per-queue counters (rtnl stats and
 * netdev qstats).  A queue being restarted keeps its backlog: frames "on
 * the wire" wait for the new memory.  On kernels with NIC page sizes (7.3)
 * the NIC page size of a queue (rx_page_size, e.g. from a dma-buf binding)
 * sets the order of its page pool, as on real drivers with
 * QCFG_RX_PAGE_SIZE.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/etherdevice.h>
#include <net/netdev_rx_queue.h>
#include <net/page_pool/helpers.h>

struct dsim_queue_mem {
	struct page_pool *pp;
	unsigned int page_order;
};

/* ------------------------------------------------------------------ */
/* NAPI and memory providers across kernel versions                     */

static void dsim_napi_enable(struct napi_struct *napi)
{
#if DSIM_OPS_LOCKED
	napi_enable_locked(napi);
#else
	napi_enable(napi);
#endif
}

static void dsim_napi_disable(struct napi_struct *napi)
{
#if DSIM_OPS_LOCKED
	napi_disable_locked(napi);
#else
	napi_disable(napi);
#endif
}

bool dsim_rxq_has_mp(struct net_device *dev, unsigned int idx)
{
	return !!__netif_get_rx_queue(dev, idx)->mp_params.mp_priv;
}

#if !DSIM_HAVE_HDS_THRESH
bool dsim_any_mp(struct net_device *dev)
{
	unsigned int i;

	for (i = 0; i < dev->real_num_rx_queues; i++)
		if (dsim_rxq_has_mp(dev, i))
			return true;
	return false;
}
#endif

/* ------------------------------------------------------------------ */
/* RX queues: page pool and NAPI                                        */

static int dsim_create_pp(struct dsim_priv *priv, unsigned int idx,
			  unsigned int order, struct page_pool **ppp)
{
	struct page_pool_params pp = {
		.flags = PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV,
		.order = order,
		/* the same memory in the ring, whatever the page size */
		.pool_size = max_t(u32, priv->rx_ring >> order, DSIM_RING_MIN),
		.nid = NUMA_NO_NODE,
		.dev = priv->dmadev,
		/* NAPI is attached when the queue starts: a pool that is
		 * allocated but freed without being started (failed restart)
		 * must not point at the live NAPI.
		 */
		.napi = NULL,
		.dma_dir = DMA_FROM_DEVICE,
		.max_len = PAGE_SIZE << order,
		.offset = 0,
		.netdev = priv->dev,
		.queue_idx = idx,
	};
	struct page_pool *pool;

	/* Unreadable netmem (a memory provider) only with header split:
	 * without it the core's page_pool_check_memory_provider() fails a
	 * bind with -ENODATA, as on a real NIC whose payload is not split.
	 */
	if (dsim_prof_unreadable(priv))
		pp.flags |= PP_FLAG_ALLOW_UNREADABLE_NETMEM;

	pool = page_pool_create(&pp);
	if (IS_ERR(pool))
		return PTR_ERR(pool);
	*ppp = pool;
	return 0;
}

/* ------------------------------------------------------------------ */
/* NIC page size (queue configs, 7.3)                                  */

#if DSIM_HAVE_QCFG
static unsigned int dsim_qcfg_order(const struct netdev_queue_config *qcfg)
{
	return qcfg->rx_page_size > PAGE_SIZE ?
	       ilog2(qcfg->rx_page_size) - PAGE_SHIFT : 0;
}

static void dsim_default_qcfg(struct net_device *dev,
			      struct netdev_queue_config *qcfg)
{
	qcfg->rx_page_size = PAGE_SIZE;
}

/* The default profile's range, or the profile's driver's (profile.c). */
static int dsim_validate_qcfg(struct net_device *dev,
			      struct netdev_queue_config *qcfg,
			      struct netlink_ext_ack *extack)
{
	return dsim_prof_validate_page_size(dev, qcfg->rx_page_size, extack);
}
#endif

/* The page order queue @idx runs with now: the core's queue config, where
 * a binding's rx_page_size overrides the device default.
 */
static unsigned int dsim_cfg_order(struct dsim_priv *priv, unsigned int idx)
{
#if DSIM_HAVE_QCFG
	struct netdev_queue_config qcfg;

	netdev_queue_config(priv->dev, idx, &qcfg);
	return dsim_qcfg_order(&qcfg);
#else
	return 0;
#endif
}

/* Let the queue's NAPI run with the pool it has now; it looks at the
 * backlog at once (frames may have waited there, and the peer's stopped TX
 * queues wake from the poll).
 */
static void dsim_rq_napi_on(struct dsim_rq *rq)
{
#if DSIM_HAVE_PP_ENABLE_DIRECT
	if (rq->pp)
		page_pool_enable_direct_recycling(rq->pp, &rq->napi);
#endif
	netif_queue_set_napi(rq->priv->dev, rq->idx, NETDEV_QUEUE_TYPE_RX, &rq->napi);
	dsim_napi_enable(&rq->napi);
	rq->napi_on = true;
	napi_schedule(&rq->napi);
}

static void dsim_rq_napi_off(struct dsim_rq *rq)
{
	if (rq->napi_on) {
		dsim_napi_disable(&rq->napi);
		rq->napi_on = false;
	}
}

static int dsim_rq_start(struct dsim_priv *priv, unsigned int i)
{
	struct dsim_rq *rq = &priv->rq[i];

	if (!rq->pp) {
		unsigned int order = dsim_cfg_order(priv, i);
		int err = dsim_create_pp(priv, i, order, &rq->pp);

		if (err)
			return err;
		rq->page_order = order;
	}
	dsim_rq_napi_on(rq);
	return 0;
}

static void dsim_rq_stop(struct dsim_priv *priv, unsigned int i)
{
	struct dsim_rq *rq = &priv->rq[i];

	if (rq->napi_on) {
		dsim_rq_napi_off(rq);
		netif_queue_set_napi(priv->dev, i, NETDEV_QUEUE_TYPE_RX, NULL);
	}
	skb_queue_purge(&rq->backlog);
	if (rq->pp) {
		page_pool_disable_direct_recycling(rq->pp);
		page_pool_destroy(rq->pp);
		rq->pp = NULL;
	}
}

void dsim_stop_all(struct dsim_priv *priv)
{
	unsigned int i;

	for (i = 0; i < priv->nq; i++)
		dsim_rq_stop(priv, i);
	dsim_wake_peer_txqs(priv);
}

int dsim_start_all(struct dsim_priv *priv)
{
	unsigned int i;
	int err;

	for (i = 0; i < priv->dev->real_num_rx_queues; i++) {
		err = dsim_rq_start(priv, i);
		if (err)
			goto err;
	}
	return 0;
err:
	while (i--)
		dsim_rq_stop(priv, i);
	return err;
}

/* ------------------------------------------------------------------ */
/* queue management API                                                */

static int dsim_queue_mem_alloc(struct net_device *dev, DSIM_QCFG_PARAM
				void *per_queue_mem, int idx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_queue_mem *qmem = per_queue_mem;

	if (idx < 0 || idx >= priv->nq)
		return -EINVAL;
	if (dsim_fault_restart(priv)) {
		netdev_info(dev, "fault injection: failing restart of queue %d\n", idx);
		return -EIO;
	}
	qmem->pp = NULL;
#if DSIM_HAVE_QCFG
	qmem->page_order = dsim_qcfg_order(qcfg);
#else
	qmem->page_order = 0;
#endif
	return dsim_create_pp(priv, idx, qmem->page_order, &qmem->pp);
}

static void dsim_queue_mem_free(struct net_device *dev, void *per_queue_mem)
{
	struct dsim_queue_mem *qmem = per_queue_mem;

	if (qmem->pp) {
		page_pool_destroy(qmem->pp);
		qmem->pp = NULL;
	}
}

static int dsim_queue_start(struct net_device *dev, DSIM_QCFG_PARAM
			    void *per_queue_mem, int idx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_queue_mem *qmem = per_queue_mem;
	struct dsim_rq *rq = &priv->rq[idx];

	if (WARN_ON(rq->pp))
		return -EBUSY;
	rq->pp = qmem->pp;
	rq->page_order = qmem->page_order;
	qmem->pp = NULL;
	if (!netif_running(dev))	/* 6.12 restarts closed devices too */
		return 0;
	dsim_rq_napi_on(rq);
	return 0;
}

static int dsim_queue_stop(struct net_device *dev, void *per_queue_mem, int idx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_queue_mem *qmem = per_queue_mem;
	struct dsim_rq *rq = &priv->rq[idx];

	dsim_rq_napi_off(rq);
	/* frames still on the wire stay in the backlog for the new memory */
	qmem->pp = rq->pp;
	qmem->page_order = rq->page_order;
	rq->pp = NULL;
	if (qmem->pp)
		page_pool_disable_direct_recycling(qmem->pp);
	return 0;
}

static const struct netdev_queue_mgmt_ops dsim_queue_mgmt_ops = {
	.ndo_queue_mem_size	= sizeof(struct dsim_queue_mem),
	.ndo_queue_mem_alloc	= dsim_queue_mem_alloc,
	.ndo_queue_mem_free	= dsim_queue_mem_free,
	.ndo_queue_start	= dsim_queue_start,
	.ndo_queue_stop		= dsim_queue_stop,
#if DSIM_HAVE_QCFG
	.ndo_default_qcfg	= dsim_default_qcfg,
	.ndo_validate_qcfg	= dsim_validate_qcfg,
	.supported_params	= QCFG_RX_PAGE_SIZE,
#endif
};

/* Profiles whose driver has no NIC page sizes (gve, fbnic). */
static const struct netdev_queue_mgmt_ops dsim_queue_mgmt_ops_4k = {
	.ndo_queue_mem_size	= sizeof(struct dsim_queue_mem),
	.ndo_queue_mem_alloc	= dsim_queue_mem_alloc,
	.ndo_queue_mem_free	= dsim_queue_mem_free,
	.ndo_queue_start	= dsim_queue_start,
	.ndo_queue_stop		= dsim_queue_stop,
};

/* ------------------------------------------------------------------ */
/* counters: rtnl stats and netdev qstats                               */

void dsim_stats_read(const struct dsim_stats *s, u64 v[DSIM_NR_CTRS])
{
	unsigned int start, c;

	do {
		start = u64_stats_fetch_begin(&s->syncp);
		for (c = 0; c < DSIM_NR_CTRS; c++)
			v[c] = u64_stats_read(&s->ctr[c]);
	} while (u64_stats_fetch_retry(&s->syncp, start));
}

/* Add the counters of queues @from..nq-1 (RX or TX) to @sum. */
static void dsim_stats_sum(struct dsim_priv *priv, bool tx, unsigned int from,
			   u64 sum[DSIM_NR_CTRS])
{
	unsigned int i, c;

	for (i = from; i < priv->nq; i++) {
		u64 v[DSIM_NR_CTRS];

		dsim_stats_read(dsim_queue_stats(priv, tx, i), v);
		for (c = 0; c < DSIM_NR_CTRS; c++)
			sum[c] += v[c];
	}
}

static void dsim_get_stats64(struct net_device *dev,
			     struct rtnl_link_stats64 *s)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u64 rx[DSIM_NR_CTRS] = {}, tx[DSIM_NR_CTRS] = {};

	dsim_stats_sum(priv, false, 0, rx);
	dsim_stats_sum(priv, true, 0, tx);
	s->rx_packets += rx[DSIM_PACKETS];
	s->rx_bytes += rx[DSIM_BYTES];
	s->rx_dropped += rx[DSIM_DROPS] + rx[DSIM_ALLOC_FAIL];
	s->tx_packets += tx[DSIM_PACKETS];
	s->tx_bytes += tx[DSIM_BYTES];
	s->tx_dropped += tx[DSIM_DROPS];
}

static void dsim_qstats_rx(const u64 v[DSIM_NR_CTRS],
			   struct netdev_queue_stats_rx *stats)
{
	stats->packets = v[DSIM_PACKETS];
	stats->bytes = v[DSIM_BYTES];
	stats->alloc_fail = v[DSIM_ALLOC_FAIL];
	stats->hw_drops = v[DSIM_DROPS];
}

static void dsim_qstats_tx(const u64 v[DSIM_NR_CTRS],
			   struct netdev_queue_stats_tx *stats)
{
	stats->packets = v[DSIM_PACKETS];
	stats->bytes = v[DSIM_BYTES];
	stats->hw_drops = v[DSIM_DROPS];
}

static void dsim_get_queue_stats_rx(struct net_device *dev, int idx,
				    struct netdev_queue_stats_rx *stats)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u64 v[DSIM_NR_CTRS];

	dsim_stats_read(&priv->rq[idx].stats, v);
	dsim_qstats_rx(v, stats);
}

static void dsim_get_queue_stats_tx(struct net_device *dev, int idx,
				    struct netdev_queue_stats_tx *stats)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u64 v[DSIM_NR_CTRS];

	dsim_stats_read(&priv->tq[idx].stats, v);
	dsim_qstats_tx(v, stats);
}

static void dsim_get_base_stats(struct net_device *dev,
				struct netdev_queue_stats_rx *rx,
				struct netdev_queue_stats_tx *tx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u64 rxv[DSIM_NR_CTRS] = {}, txv[DSIM_NR_CTRS] = {};

	/* queues beyond the active channel count still count */
	dsim_stats_sum(priv, false, dev->real_num_rx_queues, rxv);
	dsim_stats_sum(priv, true, dev->real_num_tx_queues, txv);
	dsim_qstats_rx(rxv, rx);
	dsim_qstats_tx(txv, tx);
}

static const struct netdev_stat_ops dsim_stat_ops = {
	.get_queue_stats_rx	= dsim_get_queue_stats_rx,
	.get_queue_stats_tx	= dsim_get_queue_stats_tx,
	.get_base_stats		= dsim_get_base_stats,
};

/* ------------------------------------------------------------------ */
/* netdev ops                                                          */

static int dsim_open(struct net_device *dev)
{
	struct dsim_priv *priv = netdev_priv(dev);
	int err;

	err = dsim_start_all(priv);
	if (err)
		return err;
	netif_carrier_on(dev);
	netif_tx_start_all_queues(dev);
	return 0;
}

static int dsim_stop(struct net_device *dev)
{
	struct dsim_priv *priv = netdev_priv(dev);

	netif_tx_stop_all_queues(dev);
	dsim_stop_all(priv);
	return 0;
}

static int dsim_set_features(struct net_device *dev, netdev_features_t features)
{
	struct dsim_priv *priv = netdev_priv(dev);

	/* like most NICs: turning ntuple off flushes the rule table */
	/* mlx5's ethtool rules do not depend on the feature, which is aRFS
	 * there (en_main.c:4512) */
	if ((dev->features & NETIF_F_NTUPLE) && !(features & NETIF_F_NTUPLE) &&
	    dsim_prof->id != DSIM_PROF_MLX5) {
		spin_lock_bh(&priv->cfg_lock);
		memset(priv->rules, 0, priv->max_rules * sizeof(*priv->rules));
		priv->nrules = 0;
		spin_unlock_bh(&priv->cfg_lock);
	}
	return 0;
}

static netdev_features_t dsim_fix_features(struct net_device *dev,
					   netdev_features_t features)
{
	return dsim_prof_fix_features(dev, features);
}

static const struct net_device_ops dsim_netdev_ops = {
	.ndo_open		= dsim_open,
	.ndo_stop		= dsim_stop,
	.ndo_start_xmit		= dsim_start_xmit,
	.ndo_get_stats64	= dsim_get_stats64,
	.ndo_set_features	= dsim_set_features,
	.ndo_fix_features	= dsim_fix_features,
	.ndo_set_mac_address	= eth_mac_addr,
	.ndo_validate_addr	= eth_validate_addr,
};

/* alloc_netdev_mqs() setup: Ethernet with SG, HW checksum, TSO, ntuple. */
void dsim_setup(struct net_device *dev)
{
	ether_setup(dev);
	dev->netdev_ops = &dsim_netdev_ops;
	dev->ethtool_ops = &dsim_ethtool_ops;
	dev->stat_ops = &dsim_stat_ops;
	dev->queue_mgmt_ops = &dsim_queue_mgmt_ops;
	dev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	dev->priv_flags &= ~IFF_TX_SKB_SHARING;
	dev->hw_features = NETIF_F_SG | NETIF_F_HW_CSUM | NETIF_F_RXCSUM |
			   NETIF_F_TSO | NETIF_F_TSO6 | NETIF_F_HIGHDMA |
			   NETIF_F_NTUPLE | NETIF_F_GRO;
	dev->features = dev->hw_features;
	dev->vlan_features = 0;
	dev->min_mtu = ETH_MIN_MTU;
	dev->max_mtu = DSIM_MAX_MTU;
	dev->needs_free_netdev = false;
#ifdef DSIM_NETMEM_TX
	dev->netmem_tx = DSIM_NETMEM_TX;
#endif
	if (dsim_prof->id != DSIM_PROF_DEFAULT && !dsim_prof->page_size_max)
		dev->queue_mgmt_ops = &dsim_queue_mgmt_ops_4k;
	dsim_profile_setup(dev);
}
