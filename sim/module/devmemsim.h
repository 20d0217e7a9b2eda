/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * devmemsim - a pair of simulated Ethernet NICs that support Device Memory
 * TCP (devmem) RX and netmem TX.  This private header holds what the files
 * of the module share: the kernel-version switches, the limits, the per
 * device and per queue state, and the functions one file calls in another.
 *
 * Two net_devices (default "dsim0" and "dsim1") are connected like two NICs
 * with a cable between them.  A frame transmitted on one (tx.c) is steered
 * (steer.c: ntuple rule, else Toeplitz RSS) onto an RX queue's backlog of
 * the peer, whose NAPI writes it the way a NIC's DMA would (rx.c): with
 * header split on, the headers land in the skb's linear part and the payload
 * in netmem from that queue's page pool, through the net_iov's DMA address
 * when a dma-buf memory provider is bound.  netdev.c owns the net_device,
 * queue and page pool life cycle including the queue management API,
 * ethtool.c the ethtool configuration, debugfs.c the fault-injection knobs
 * and their datapath hooks, dev.c the parent devices (platform devices
 * without an IOMMU, or PCI devices behind one), the translation of a DMA
 * address to the memory a "DMA" touches, the module parameters and module
 * init/exit.
 *
 * Copyright (c) the libdevmemtcp authors.
 */
#ifndef DEVMEMSIM_H
#define DEVMEMSIM_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/version.h>
#include <linux/netdevice.h>
#include <linux/platform_device.h>
#include <linux/skbuff.h>
#include <linux/tcp.h>
#include <linux/u64_stats_sync.h>
#include <linux/ethtool.h>
#include <linux/prandom.h>
#include <net/netdev_queues.h>
#include <net/netmem.h>

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 15, 0)
#include <net/netdev_lock.h>
/* queue_mgmt_ops implies the netdev instance ("ops") lock: ndo_open/stop,
 * ethtool ops and queue restarts run with netdev_lock held.
 */
#define DSIM_OPS_LOCKED 1
#else
#define DSIM_OPS_LOCKED 0
#endif

/* queue_mgmt_ops mem_alloc/start take a struct netdev_queue_config (7.0). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 0, 0)
#define DSIM_QCFG_PARAM struct netdev_queue_config *qcfg,
#else
#define DSIM_QCFG_PARAM
#endif

/* NIC pages larger than PAGE_SIZE: the queue config's rx_page_size with
 * ndo_default_qcfg/ndo_validate_qcfg and QCFG_RX_PAGE_SIZE, set by bind-rx
 * (NETDEV_A_DMABUF_RX_PAGE_SIZE).  7.3 has them; 7.0's queue configs lack
 * the hooks, and nothing before 7.3 was checked.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 3, 0)
#define DSIM_HAVE_QCFG 1
#else
#define DSIM_HAVE_QCFG 0
#endif

/* ethtool hds-thresh (6.14) and dev->cfg. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 14, 0)
#define DSIM_HAVE_HDS_THRESH 1
#else
#define DSIM_HAVE_HDS_THRESH 0
#endif

/* devmem TX: dev->netmem_tx (6.16), an enum from 7.2. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 2, 0)
#define DSIM_NETMEM_TX NETMEM_TX_DMA
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define DSIM_NETMEM_TX true
#endif

/* page_pool_enable_direct_recycling() (6.16) */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define DSIM_HAVE_PP_ENABLE_DIRECT 1
#else
#define DSIM_HAVE_PP_ENABLE_DIRECT 0
#endif

/* ethtool_ops->get_rx_ring_count (6.19); GRXRINGS goes there, not to
 * get_rxnfc, on kernels that have it.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 19, 0)
#define DSIM_HAVE_RX_RING_COUNT 1
#else
#define DSIM_HAVE_RX_RING_COUNT 0
#endif

/* The driver profiles (profile.c): the kernels whose drivers they
 * describe.  6.12 (the LTS) and 7.3 are the ones read; a profile other
 * than "default" loads on those only.
 */
#define DSIM_PROF_LTS	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0) && \
			 LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0))
#define DSIM_PROF_NEW	(LINUX_VERSION_CODE >= KERNEL_VERSION(7, 3, 0))

#define DSIM_DRV_NAME		"devmemsim"
#define DSIM_MAX_QUEUES		64
#define DSIM_INDIR_SIZE		128	/* the default profile's table */
#define DSIM_INDIR_MAX		256	/* the largest of any profile */
#define DSIM_KEY_SIZE		40	/* Toeplitz key the hash reads */
#define DSIM_KEY_MAX		54	/* the longest key a profile reports */
#define DSIM_MAX_RSS_CTX	8	/* default profile: context ids 1..7 */
#define DSIM_RSS_CTX_MAX	33	/* any profile: ids below this */
#define DSIM_MAX_RULES		64	/* default profile */
#define DSIM_RING_MIN		64
#define DSIM_RING_MAX		4096
#define DSIM_RING_DEFAULT	1024
#define DSIM_HDS_THRESH_MAX	1024
#define DSIM_HDS_THRESH_DEFAULT	256
#define DSIM_BACKLOG		256	/* source skbs queued per RX queue */
#define DSIM_MAX_MTU		9000
#define DSIM_MAX_HLEN		256	/* eth+ip+tcp headers a TCP frame may have */
/* NIC pages larger than PAGE_SIZE (rx_page_size, 7.x): up to 64 KiB in
 * the default profile, 128 KiB in mlx5's */
#define DSIM_MAX_PAGE_ORDER	(16 - PAGE_SHIFT)
#define DSIM_PAGE_ORDER_MAX	(17 - PAGE_SHIFT)
#define DSIM_MIN_BUF_SIZE	1024	/* rx_buf_size: 9000-byte MTU in <= 9 frags */

/* Per-queue counters; a TX queue leaves DSIM_ALLOC_FAIL at 0. */
enum dsim_ctr {
	DSIM_PACKETS,
	DSIM_BYTES,
	DSIM_ALLOC_FAIL,
	DSIM_DROPS,
	DSIM_BUFS,		/* RX buffers (skb frags) the payload went to */
	DSIM_PAGES,		/* RX: NIC pages those buffers were carved from */
	DSIM_NR_CTRS
};

struct dsim_stats {
	struct u64_stats_sync syncp;
	u64_stats_t ctr[DSIM_NR_CTRS];
};

struct dsim_priv;

struct dsim_rq {
	struct napi_struct napi;
	struct sk_buff_head backlog;	/* frames "on the wire" to this queue */
	struct page_pool *pp;
	unsigned int page_order;	/* of pp's NIC pages */
	struct dsim_priv *priv;
	unsigned int idx;
	bool napi_on;
	struct rnd_state mix;		/* segment sizes with rx_mix */
	struct dsim_stats stats;
};

struct dsim_tq {
	struct dsim_stats stats;
};

struct dsim_rule {
	bool used;
	u32 rss_ctx;		/* with FLOW_RSS */
	u32 prio;		/* mlx5: matched fields (more win) */
	struct ethtool_rx_flow_spec fs;
};

/* What the parser found in a frame. */
struct dsim_flow {
	bool ip;		/* IPv4 or IPv6 parsed */
	bool v6;
	bool l4;		/* ports valid */
	u8 l4proto;
	bool tcp;
	__be32 saddr[4], daddr[4];
	__be16 sport, dport;
	u8 tos;
	unsigned int l3off, l4off, hlen;	/* hlen: eth+ip+l4 header bytes */
};

/* A transmitted skb being received: its sender, its flow and RSS hash. */
struct dsim_wire {
	struct dsim_priv *txp;
	struct sk_buff *skb;
	struct dsim_flow fl;
	u32 hash;
};

/* How received payload is laid out in the NIC's buffers (module
 * parameters, fixed at load time). */
struct dsim_layout {
	u32 buf_size;		/* 0: one buffer per NIC page */
	bool pack;		/* payloads back to back (page-pool fragments) */
	u32 align;		/* pack: each payload's start, 0 = the API's */
	bool mix;		/* TCP segments of 1 byte to one MSS on the wire */
};

enum dsim_prof_id {
	DSIM_PROF_DEFAULT,
	DSIM_PROF_GVE,
	DSIM_PROF_BNXT,
	DSIM_PROF_MLX5,
	DSIM_PROF_FBNIC,
};

/* ntuple rule locations: who picks them */
enum dsim_loc_policy {
	DSIM_LOC_BOTH,		/* a location, or any (driver: first free) */
	DSIM_LOC_ANY_FIRST,	/* only "any": the first free (bnxt) */
	DSIM_LOC_ANY_LAST,	/* only "any": the highest free (fbnic) */
	DSIM_LOC_CALLER,	/* only a location (gve, mlx5) */
};

/* channel shapes */
#define DSIM_CH_COMBINED	BIT(0)	/* combined N */
#define DSIM_CH_SEPARATE	BIT(1)	/* rx N tx M */

/*
 * A driver whose answers the device gives (profile.c; the table with its
 * sources is PROFILES.md).  The values a device or its firmware would
 * report are the ones PROFILES.md gives for the simulated NIC.
 */
struct dsim_profile {
	enum dsim_prof_id id;
	const char *name;		/* profile= */
	const char *driver;		/* ethtool -i */
	const char *mod;		/* NL_SET_ERR_MSG_MOD prefix */
	/* rings */
	u32 rx_ring_max, tx_ring_max, ring_min, rx_ring_def, tx_ring_def;
	bool hds_thresh;		/* has hds-thresh */
	u32 hds_def, hds_max;
	bool rx_buf_len;		/* rx-buf-len settable (gve) */
	u32 page_size_max;		/* rx-page-size, 0: none */
	u32 pack_align;			/* payloads packed at this step, 0: not */
	/* RSS */
	u32 indir_size, key_size;
	u32 max_ctx;			/* rxfh_max_num_contexts, 0: none */
	/* ntuple */
	u32 max_rules;
	enum dsim_loc_policy loc;
	bool loc_special;		/* GRXCLSRLCNT says RX_CLS_LOC_SPECIAL */
	bool ntuple_on, ntuple_fixed, ntuple_present;
	/* channels */
	u32 ch_modes;
	u32 ch_other;			/* fbnic: 1, fixed */
	/* devmem */
	bool queue_ops;			/* queue management ops */
	bool unreadable;		/* page pools may take unreadable netmem */
};

extern const struct dsim_profile *dsim_prof;

struct dsim_priv {
	struct net_device *dev;
	struct device *dmadev;		/* the parent: DMA goes through it */
	struct platform_device *pdev;	/* the platform parent, or NULL */
	struct iommu_domain *iommu;	/* dmadev's translating domain, or NULL */
	struct dsim_layout layout;
	atomic64_t dma_faults;		/* "DMA" to an address not mapped */
	atomic64_t dma_remapped;	/* pages "DMA'd" at an IOVA != their address */
	struct dsim_priv __rcu *peer;
	unsigned int nq;
	struct dsim_rq *rq;
	struct dsim_tq *tq;

	/* configuration */
	bool hds;			/* the NIC splits headers now */
	u32 hds_thresh;
	u32 rx_ring, tx_ring;
	bool bnxt_hds;			/* bnxt: BNXT_FLAG_HDS */

	spinlock_t cfg_lock;		/* rules, indir, contexts (datapath reads) */
	u32 indir_size;			/* entries of every table */
	u32 max_ctx;			/* context ids below this */
	u32 max_rules;
	u32 indir[DSIM_INDIR_MAX];
	u8 key[DSIM_KEY_MAX];
	bool ctx_used[DSIM_RSS_CTX_MAX];
	u32 ctx_indir[DSIM_RSS_CTX_MAX][DSIM_INDIR_MAX];
	struct dsim_rule *rules;	/* max_rules */
	unsigned int nrules;

	/* fault injection */
	struct dentry *dbg;
	spinlock_t fault_lock;
	u64 corrupt_offset;		/* 1-based stream byte to corrupt, 0 off */
	int corrupt_state;		/* DSIM_CORRUPT_* (debugfs.c) */
	struct dsim_flow ct_flow;	/* the flow being corrupted */
	u32 ct_seq;			/* TCP sequence number of the byte */
	u64 payload_seen;		/* TCP payload bytes since knob set */
	u32 drop_every;
	u64 frames_seen;
	atomic_t fail_restart;
	atomic_t fail_alloc;
};

static inline void dsim_stats_inc(struct dsim_stats *s, enum dsim_ctr c)
{
	u64_stats_update_begin(&s->syncp);
	u64_stats_inc(&s->ctr[c]);
	u64_stats_update_end(&s->syncp);
}

static inline void dsim_stats_packet(struct dsim_stats *s, unsigned int len)
{
	u64_stats_update_begin(&s->syncp);
	u64_stats_inc(&s->ctr[DSIM_PACKETS]);
	u64_stats_add(&s->ctr[DSIM_BYTES], len);
	u64_stats_update_end(&s->syncp);
}

/* The counters of RX (or TX, @tx) queue @i. */
static inline struct dsim_stats *dsim_queue_stats(struct dsim_priv *priv, bool tx,
						  unsigned int i)
{
	return tx ? &priv->tq[i].stats : &priv->rq[i].stats;
}

/* dev.c */
void *dsim_dma_va(struct dsim_priv *priv, dma_addr_t dma, unsigned int len,
		  unsigned int *n);
const char *dsim_dma_mode(const struct dsim_priv *priv);
void dsim_layout_str(const struct dsim_layout *lo, char *s, size_t len);

/* netdev.c */
void dsim_setup(struct net_device *dev);
int dsim_start_all(struct dsim_priv *priv);
void dsim_stop_all(struct dsim_priv *priv);
bool dsim_rxq_has_mp(struct net_device *dev, unsigned int idx);
#if !DSIM_HAVE_HDS_THRESH
bool dsim_any_mp(struct net_device *dev);
#endif
void dsim_stats_read(const struct dsim_stats *s, u64 v[DSIM_NR_CTRS]);

/* rx.c */
int dsim_poll(struct napi_struct *napi, int budget);

/* tx.c */
netdev_tx_t dsim_start_xmit(struct sk_buff *skb, struct net_device *dev);
int dsim_src_copy(struct dsim_priv *txp, const struct sk_buff *skb,
		  unsigned int off, void *dst, unsigned int len);
void dsim_tso_fix_header(u8 *seg, const struct dsim_flow *fl,
			 const struct sk_buff *src, unsigned int i,
			 unsigned int off, unsigned int plen, bool last);
void dsim_wake_peer_txqs(struct dsim_priv *priv);

/* steer.c */
void dsim_parse(const struct sk_buff *skb, struct dsim_flow *fl);
u32 dsim_flow_hash(const u8 *key, const struct dsim_flow *fl);
int dsim_steer(struct dsim_priv *rx, const struct sk_buff *skb);
void dsim_fill_indir(u32 *indir, unsigned int size, unsigned int nqueues);

/* ethtool.c */
extern const struct ethtool_ops dsim_ethtool_ops;
int dsim_rule_delete(struct dsim_priv *priv, u32 loc);

/* profile.c */
int dsim_profile_select(const char *name);
void dsim_profile_setup(struct net_device *dev);
void dsim_profile_init_priv(struct dsim_priv *priv);
bool dsim_prof_unreadable(const struct dsim_priv *priv);
void dsim_prof_get_ringparam(struct net_device *dev, struct ethtool_ringparam *ring,
			     struct kernel_ethtool_ringparam *kring);
int dsim_prof_set_ringparam(struct net_device *dev, struct ethtool_ringparam *ring,
			    struct kernel_ethtool_ringparam *kring,
			    struct netlink_ext_ack *extack);
void dsim_prof_get_channels(struct net_device *dev, struct ethtool_channels *ch);
int dsim_prof_check_channels(struct net_device *dev, const struct ethtool_channels *ch,
			     unsigned int *rx, unsigned int *tx);
int dsim_prof_check_rule(struct dsim_priv *priv, struct ethtool_rxnfc *info);
int dsim_prof_rule_loc(struct dsim_priv *priv, u32 loc, u32 *out);
u32 dsim_prof_rule_prio(const struct ethtool_rx_flow_spec *fs);
int dsim_prof_check_ctx(struct net_device *dev, const struct ethtool_rxfh_param *rxfh,
			struct netlink_ext_ack *extack);
int dsim_prof_validate_page_size(struct net_device *dev, u32 size,
				 struct netlink_ext_ack *extack);
netdev_features_t dsim_prof_fix_features(struct net_device *dev,
					 netdev_features_t features);

/* debugfs.c */
int dsim_fault_corrupt_pos(struct dsim_priv *priv, const struct dsim_flow *fl,
			   const struct tcphdr *th, unsigned int plen);
void dsim_fault_corrupt_apply(struct dsim_priv *priv, u8 *byte);
bool dsim_fault_drop(struct dsim_priv *priv);
bool dsim_fault_alloc(struct dsim_priv *priv);
bool dsim_fault_restart(struct dsim_priv *priv);
void dsim_debugfs_init(void);
void dsim_debugfs_add(struct dsim_priv *priv);
void dsim_debugfs_remove(struct dsim_priv *priv);
void dsim_debugfs_exit(void);

#endif /* DEVMEMSIM_H */
