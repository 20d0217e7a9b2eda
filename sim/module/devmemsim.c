// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim - a pair of simulated Ethernet NICs that support Device Memory
 * TCP (devmem) RX and netmem TX.
 *
 * Two net_devices (default "dsim0" and "dsim1") are connected like two NICs
 * with a cable between them.  A frame transmitted on one is parsed, steered
 * (ntuple rule, else Toeplitz RSS over the indirection table or an RSS
 * context) to an RX queue of the peer, and written there the way a NIC's DMA
 * would: with header split on, the headers land in the skb's linear part and
 * the payload in netmem allocated from that queue's page pool.  When the
 * queue has a dma-buf memory provider bound, the payload is written through
 * the net_iov's DMA address; the simulated device has no IOMMU in front of
 * it, so the DMA address is a physical address.
 *
 * Each RX queue has its own NAPI and page pool, and the queue management API
 * (queue_mgmt_ops) lets the core restart a single queue with a memory
 * provider installed.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/version.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/platform_device.h>
#include <linux/dma-mapping.h>
#include <linux/dma-direct.h>
#include <linux/netdevice.h>
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/u64_stats_sync.h>
#include <linux/skbuff.h>
#include <linux/rtnetlink.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/checksum.h>
#include <net/dsfield.h>
#include <net/netdev_queues.h>
#include <net/netdev_rx_queue.h>
#include <net/page_pool/helpers.h>
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

/* queue_mgmt_ops take a struct netdev_queue_config (7.0). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 0, 0)
#define DSIM_QCFG 1
#else
#define DSIM_QCFG 0
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

#define DSIM_DRV_NAME		"devmemsim"
#define DSIM_MAX_QUEUES		64
#define DSIM_INDIR_SIZE		128
#define DSIM_KEY_SIZE		40
#define DSIM_MAX_RSS_CTX	8	/* context ids 1..7 */
#define DSIM_MAX_RULES		64
#define DSIM_RING_MAX		4096
#define DSIM_RING_DEFAULT	1024
#define DSIM_HDS_THRESH_MAX	1024
#define DSIM_HDS_THRESH_DEFAULT	256
#define DSIM_BACKLOG		256	/* source skbs queued per RX queue */
#define DSIM_MAX_MTU		9000

static int num_queues = 4;
module_param(num_queues, int, 0444);
MODULE_PARM_DESC(num_queues, "RX and TX queues per device (1-64, default 4)");

static char *name0 = "dsim0";
module_param(name0, charp, 0444);
MODULE_PARM_DESC(name0, "name of the first device (default dsim0)");

static char *name1 = "dsim1";
module_param(name1, charp, 0444);
MODULE_PARM_DESC(name1, "name of the second device (default dsim1)");

struct dsim_priv;

struct dsim_rq {
	struct napi_struct napi;
	struct sk_buff_head backlog;	/* frames "on the wire" to this queue */
	struct page_pool *pp;
	struct dsim_priv *priv;
	unsigned int idx;
	bool napi_on;

	struct u64_stats_sync syncp;
	u64_stats_t packets;
	u64_stats_t bytes;
	u64_stats_t alloc_fail;
	u64_stats_t drops;
};

struct dsim_tq {
	struct u64_stats_sync syncp;
	u64_stats_t packets;
	u64_stats_t bytes;
	u64_stats_t drops;
};

struct dsim_queue_mem {
	struct page_pool *pp;
};

struct dsim_rule {
	bool used;
	u32 rss_ctx;		/* with FLOW_RSS */
	struct ethtool_rx_flow_spec fs;
};

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

struct dsim_priv {
	struct net_device *dev;
	struct platform_device *pdev;
	struct dsim_priv __rcu *peer;
	unsigned int nq;
	struct dsim_rq *rq;
	struct dsim_tq *tq;

	/* configuration */
	bool hds;			/* tcp-data-split on */
	u32 hds_thresh;
	u32 rx_ring, tx_ring;
	bool indir_user;		/* indirection table set by user */

	spinlock_t cfg_lock;		/* rules, indir, contexts (datapath reads) */
	u32 indir[DSIM_INDIR_SIZE];
	u8 key[DSIM_KEY_SIZE];
	bool ctx_used[DSIM_MAX_RSS_CTX];
	u32 ctx_indir[DSIM_MAX_RSS_CTX][DSIM_INDIR_SIZE];
	struct dsim_rule rules[DSIM_MAX_RULES];
	unsigned int nrules;

	/* fault injection */
	struct dentry *dbg;
	spinlock_t fault_lock;
	u64 corrupt_offset;		/* 1-based stream byte to corrupt, 0 off */
	int corrupt_state;		/* DSIM_CORRUPT_* */
	struct dsim_flow ct_flow;	/* the flow being corrupted */
	u32 ct_seq;			/* TCP sequence number of the byte */
	u64 payload_seen;		/* TCP payload bytes since knob set */
	u32 drop_every;
	u64 frames_seen;
	atomic_t fail_restart;
	atomic_t fail_alloc;
};

enum {
	DSIM_CORRUPT_OFF,
	DSIM_CORRUPT_ARMED,	/* waiting for the SYN of the next connection */
	DSIM_CORRUPT_TRACKING,	/* waiting for the byte */
};

static struct dsim_priv *dsim_privs[2];
static struct dentry *dsim_dbg_root;

/* ------------------------------------------------------------------ */
/* locking helpers for NAPI across kernel versions                      */

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

static void dsim_pp_attach_napi(struct dsim_rq *rq)
{
#if DSIM_HAVE_PP_ENABLE_DIRECT
	if (rq->pp)
		page_pool_enable_direct_recycling(rq->pp, &rq->napi);
#endif
}

static bool dsim_rxq_has_mp(struct net_device *dev, unsigned int idx)
{
	return !!__netif_get_rx_queue(dev, idx)->mp_params.mp_priv;
}

static bool __maybe_unused dsim_any_mp(struct net_device *dev)
{
	unsigned int i;

	for (i = 0; i < dev->real_num_rx_queues; i++)
		if (dsim_rxq_has_mp(dev, i))
			return true;
	return false;
}

/* ------------------------------------------------------------------ */
/* page pools                                                          */

static struct page_pool *dsim_create_pp(struct dsim_priv *priv, unsigned int idx)
{
	struct page_pool_params pp = {
		.flags = PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV,
		.order = 0,
		.pool_size = priv->rx_ring,
		.nid = NUMA_NO_NODE,
		.dev = &priv->pdev->dev,
		/* NAPI is attached when the queue starts: a pool that is
		 * allocated but freed without being started (failed restart)
		 * must not point at the live NAPI.
		 */
		.napi = NULL,
		.dma_dir = DMA_FROM_DEVICE,
		.max_len = PAGE_SIZE,
		.offset = 0,
		.netdev = priv->dev,
		.queue_idx = idx,
	};

	/* Unreadable netmem (a memory provider) only with header split:
	 * without it the core's page_pool_check_memory_provider() fails a
	 * bind with -ENODATA, as on a real NIC whose payload is not split.
	 */
	if (priv->hds)
		pp.flags |= PP_FLAG_ALLOW_UNREADABLE_NETMEM;

	return page_pool_create(&pp);
}

/* ------------------------------------------------------------------ */
/* RX side                                                             */

static void dsim_rx_drop(struct dsim_rq *rq)
{
	u64_stats_update_begin(&rq->syncp);
	u64_stats_inc(&rq->drops);
	u64_stats_update_end(&rq->syncp);
}

/* Copy @len bytes at @off of the transmitted skb into @dst.  Payload of an
 * unreadable (devmem TX) skb is read through the net_iov's DMA address, as
 * the NIC's DMA engine would.
 */
static int dsim_src_copy(struct dsim_priv *txp, const struct sk_buff *skb,
			 unsigned int off, void *dst, unsigned int len)
{
	const struct skb_shared_info *sh;
	unsigned int pos, i;

	if (likely(skb_frags_readable(skb)))
		return skb_copy_bits(skb, off, dst, len);

	if (skb_has_frag_list(skb))
		return -EFAULT;

	pos = skb_headlen(skb);
	if (off < pos) {
		unsigned int n = min(len, pos - off);

		memcpy(dst, skb->data + off, n);
		off += n;
		dst += n;
		len -= n;
	}

	sh = skb_shinfo(skb);
	for (i = 0; i < sh->nr_frags && len; i++) {
		const skb_frag_t *frag = &sh->frags[i];
		unsigned int fsz = skb_frag_size(frag);
		unsigned int foff, n;
		netmem_ref nm;
		const u8 *src;

		if (off >= pos + fsz) {
			pos += fsz;
			continue;
		}
		foff = off - pos;
		n = min(len, fsz - foff);
		nm = skb_frag_netmem(frag);
		if (netmem_is_net_iov(nm)) {
			dma_addr_t dma = netmem_get_dma_addr(nm);
			phys_addr_t pa;

			pa = dma_to_phys(&txp->pdev->dev, dma) +
			     skb_frag_off(frag) + foff;
			if (!pfn_valid(PHYS_PFN(pa)) ||
			    !pfn_valid(PHYS_PFN(pa + n - 1)))
				return -EFAULT;
			src = phys_to_virt(pa);
			memcpy(dst, src, n);
		} else {
			struct page *page = skb_frag_page(frag);
			unsigned int poff = skb_frag_off(frag) + foff;

			/* may span several (compound) pages */
			while (n) {
				unsigned int c = min_t(unsigned int, n,
						       PAGE_SIZE - offset_in_page(poff));
				void *va = kmap_local_page(page + (poff >> PAGE_SHIFT));

				memcpy(dst, va + offset_in_page(poff), c);
				kunmap_local(va);
				dst += c;
				poff += c;
				n -= c;
				off += c;
				len -= c;
			}
			pos += fsz;
			continue;
		}
		dst += n;
		off += n;
		len -= n;
		pos += fsz;
	}
	return len ? -EFAULT : 0;
}

/* Where a "DMA" write into @nm lands, as a kernel virtual address. */
static void *dsim_netmem_va(struct dsim_priv *priv, netmem_ref nm)
{
	phys_addr_t pa;

	if (!netmem_is_net_iov(nm))
		return page_address(netmem_to_page(nm));

	/* No IOMMU: the device address is the physical address. */
	pa = dma_to_phys(&priv->pdev->dev, page_pool_get_dma_addr_netmem(nm));
	if (!pfn_valid(PHYS_PFN(pa)))
		return NULL;
	return phys_to_virt(pa);
}

static bool dsim_same_flow(const struct dsim_flow *a, const struct dsim_flow *b)
{
	return a->v6 == b->v6 && a->sport == b->sport && a->dport == b->dport &&
	       !memcmp(a->saddr, b->saddr, sizeof(a->saddr)) &&
	       !memcmp(a->daddr, b->daddr, sizeof(a->daddr));
}

/*
 * corrupt_offset = N: the N-th payload byte (1-based TCP stream offset) of
 * the first TCP connection whose SYN this device receives after the knob was
 * written is XOR'ed with 0xff, once; then the knob reads 0 again.
 * Returns the offset of that byte inside this frame's payload, or -1.
 */
static int dsim_fault_corrupt_pos(struct dsim_priv *priv, const struct dsim_flow *fl,
				  const struct tcphdr *th, unsigned int plen)
{
	int pos = -1;

	spin_lock(&priv->fault_lock);
	priv->payload_seen += plen;
	if (priv->corrupt_state == DSIM_CORRUPT_ARMED && th->syn && !th->ack) {
		priv->ct_flow = *fl;
		priv->ct_seq = ntohl(th->seq) + (u32)priv->corrupt_offset;
		priv->corrupt_state = DSIM_CORRUPT_TRACKING;
	} else if (priv->corrupt_state == DSIM_CORRUPT_TRACKING && plen &&
		   dsim_same_flow(fl, &priv->ct_flow)) {
		u32 d = priv->ct_seq - ntohl(th->seq);

		if (d < plen)
			pos = d;
	}
	spin_unlock(&priv->fault_lock);
	return pos;
}

static void dsim_fault_corrupt_apply(struct dsim_priv *priv, u8 *byte)
{
	spin_lock(&priv->fault_lock);
	if (priv->corrupt_state == DSIM_CORRUPT_TRACKING) {
		*byte ^= 0xff;
		pr_info("%s: corrupted stream byte %llu (seq %u)\n",
			netdev_name(priv->dev), priv->corrupt_offset, priv->ct_seq);
		priv->corrupt_state = DSIM_CORRUPT_OFF;
		priv->corrupt_offset = 0;
	}
	spin_unlock(&priv->fault_lock);
}

static bool dsim_fault_drop(struct dsim_priv *priv)
{
	bool drop = false;
	u32 every = READ_ONCE(priv->drop_every);

	if (!every)
		return false;
	spin_lock(&priv->fault_lock);
	priv->frames_seen++;
	if (priv->frames_seen % every == 0)
		drop = true;
	spin_unlock(&priv->fault_lock);
	return drop;
}

/*
 * Build one received frame on @rq from the headers in @hdr (@hlen bytes,
 * already fixed up for this segment) and @plen payload bytes of @src at
 * @poff.  Payload of TCP frames goes to page-pool netmem when header split
 * is on.
 */
static int dsim_rx_frame(struct dsim_rq *rq, struct dsim_priv *txp,
			 struct sk_buff *src, const struct dsim_flow *fl,
			 const u8 *hdr, unsigned int hlen,
			 unsigned int poff, unsigned int plen, u32 hash)
{
	struct dsim_priv *priv = rq->priv;
	struct net_device *dev = priv->dev;
	struct sk_buff *skb;
	bool split;
	int frag = 0, cpos = -1;

	if (fl->tcp)
		cpos = dsim_fault_corrupt_pos(priv, fl,
					      (const struct tcphdr *)(hdr + fl->l4off),
					      plen);
	if (dsim_fault_drop(priv)) {
		dsim_rx_drop(rq);
		return 0;
	}

	split = fl->tcp && plen && READ_ONCE(priv->hds) &&
		hlen + plen > READ_ONCE(priv->hds_thresh) && rq->pp;

	skb = napi_alloc_skb(&rq->napi, split ? hlen : hlen + plen);
	if (!skb) {
		u64_stats_update_begin(&rq->syncp);
		u64_stats_inc(&rq->alloc_fail);
		u64_stats_update_end(&rq->syncp);
		return -ENOMEM;
	}
	skb_put_data(skb, hdr, hlen);

	if (!split) {
		u8 *p = skb_put(skb, plen);

		if (plen && dsim_src_copy(txp, src, poff, p, plen))
			goto drop;
		if (cpos >= 0)
			dsim_fault_corrupt_apply(priv, p + cpos);
	} else {
		skb_mark_for_recycle(skb);
		while (plen) {
			unsigned int n = min_t(unsigned int, plen, PAGE_SIZE);
			netmem_ref nm;
			u8 *va;

			if (frag >= MAX_SKB_FRAGS)
				goto drop;
			if (atomic_add_unless(&priv->fail_alloc, -1, 0))
				nm = 0;
			else
				nm = page_pool_alloc_netmems(rq->pp, GFP_ATOMIC | __GFP_NOWARN);
			if (!nm) {
				u64_stats_update_begin(&rq->syncp);
				u64_stats_inc(&rq->alloc_fail);
				u64_stats_update_end(&rq->syncp);
				goto drop;
			}
			va = dsim_netmem_va(priv, nm);
			if (!va || dsim_src_copy(txp, src, poff, va, n)) {
				page_pool_put_full_netmem(rq->pp, nm, true);
				goto drop;
			}
			if (cpos >= 0 && cpos < n)
				dsim_fault_corrupt_apply(priv, va + cpos);
			cpos -= n;
			skb_add_rx_frag_netmem(skb, frag++, nm, 0, n, PAGE_SIZE);
			poff += n;
			plen -= n;
		}
	}

	skb->protocol = eth_type_trans(skb, dev);
	skb->ip_summed = fl->l4 ? CHECKSUM_UNNECESSARY : CHECKSUM_NONE;
	skb_record_rx_queue(skb, rq->idx);
	if (fl->ip)
		skb_set_hash(skb, hash, fl->l4 ? PKT_HASH_TYPE_L4 : PKT_HASH_TYPE_L3);

	u64_stats_update_begin(&rq->syncp);
	u64_stats_inc(&rq->packets);
	u64_stats_add(&rq->bytes, skb->len + ETH_HLEN);
	u64_stats_update_end(&rq->syncp);

	napi_gro_receive(&rq->napi, skb);
	return 0;

drop:
	dsim_rx_drop(rq);
	kfree_skb(skb);
	return 0;
}

static int dsim_parse(const struct sk_buff *skb, struct dsim_flow *fl);
static u32 dsim_flow_hash(const u8 *key, const struct dsim_flow *fl);

/* Process one transmitted skb (possibly a TSO super-frame): returns frames made. */
static int dsim_rx_one(struct dsim_rq *rq, struct sk_buff *src)
{
	struct dsim_priv *priv = rq->priv;
	struct dsim_priv *txp;
	struct dsim_flow fl;
	u8 hdr[256];
	unsigned int payload, mss, nsegs, i;
	u32 hash;
	int frames = 0;

	rcu_read_lock();
	txp = rcu_dereference(priv->peer);
	if (!txp) {
		rcu_read_unlock();
		dsim_rx_drop(rq);
		return 1;
	}

	dsim_parse(src, &fl);
	hash = dsim_flow_hash(priv->key, &fl);

	if (!fl.tcp || !skb_is_gso(src)) {
		unsigned int hlen = fl.tcp ? fl.hlen : min_t(unsigned int, src->len, ETH_HLEN);

		if (!fl.tcp && !skb_frags_readable(src))
			goto bad;
		if (!fl.tcp) {
			/* non-TCP: everything is "header" (never split) */
			hlen = min_t(unsigned int, src->len, sizeof(hdr));
		}
		if (hlen > sizeof(hdr) || dsim_src_copy(txp, src, 0, hdr, hlen))
			goto bad;
		dsim_rx_frame(rq, txp, src, &fl, hdr, hlen, hlen,
			      src->len - hlen, hash);
		rcu_read_unlock();
		return 1;
	}

	/* TSO: cut the payload into MSS-sized frames as the NIC would */
	if (fl.hlen > sizeof(hdr) || dsim_src_copy(txp, src, 0, hdr, fl.hlen))
		goto bad;
	mss = skb_shinfo(src)->gso_size;
	payload = src->len - fl.hlen;
	if (!mss)
		goto bad;
	nsegs = DIV_ROUND_UP(payload, mss);
	for (i = 0; i < nsegs; i++) {
		u8 seg[256];
		unsigned int off = i * mss;
		unsigned int plen = min(mss, payload - off);
		struct tcphdr *th = (struct tcphdr *)(seg + fl.l4off);

		memcpy(seg, hdr, fl.hlen);
		if (!fl.v6) {
			struct iphdr *iph = (struct iphdr *)(seg + fl.l3off);

			iph->tot_len = htons(fl.hlen - fl.l3off + plen);
			if (!(skb_shinfo(src)->gso_type & SKB_GSO_TCP_FIXEDID))
				iph->id = htons(ntohs(iph->id) + i);
			iph->check = 0;
			iph->check = ip_fast_csum((u8 *)iph, iph->ihl);
		} else {
			struct ipv6hdr *ip6 = (struct ipv6hdr *)(seg + fl.l3off);

			ip6->payload_len = htons(fl.hlen - fl.l3off -
						 sizeof(*ip6) + plen);
		}
		th->seq = htonl(ntohl(th->seq) + off);
		if (i)
			th->cwr = 0;
		if (i != nsegs - 1) {
			th->fin = 0;
			th->psh = 0;
		}
		dsim_rx_frame(rq, txp, src, &fl, seg, fl.hlen,
			      fl.hlen + off, plen, hash);
		frames++;
	}
	rcu_read_unlock();
	return frames;

bad:
	rcu_read_unlock();
	dsim_rx_drop(rq);
	return 1;
}

static void dsim_wake_peer_txqs(struct dsim_priv *priv)
{
	struct dsim_priv *peer;
	unsigned int i;

	rcu_read_lock();
	peer = rcu_dereference(priv->peer);
	if (peer) {
		for (i = 0; i < peer->dev->real_num_tx_queues; i++) {
			struct netdev_queue *txq = netdev_get_tx_queue(peer->dev, i);

			if (netif_tx_queue_stopped(txq))
				netif_tx_wake_queue(txq);
		}
	}
	rcu_read_unlock();
}

static int dsim_poll(struct napi_struct *napi, int budget)
{
	struct dsim_rq *rq = container_of(napi, struct dsim_rq, napi);
	struct sk_buff *skb;
	int done = 0;

	while (done < budget && (skb = skb_dequeue(&rq->backlog))) {
		done += dsim_rx_one(rq, skb);
		/* frees the TX skb: completes MSG_ZEROCOPY / devmem TX */
		consume_skb(skb);
	}

	if (skb_queue_len(&rq->backlog) < DSIM_BACKLOG / 2)
		dsim_wake_peer_txqs(rq->priv);

	if (done >= budget)
		return budget;

	if (napi_complete_done(napi, done) &&
	    !skb_queue_empty_lockless(&rq->backlog))
		napi_schedule(napi);
	return done;
}

/* ------------------------------------------------------------------ */
/* parsing, RSS, ntuple                                                */

static int dsim_parse(const struct sk_buff *skb, struct dsim_flow *fl)
{
	const struct ethhdr *eth;
	unsigned int off = ETH_HLEN;

	memset(fl, 0, sizeof(*fl));
	if (skb_headlen(skb) < ETH_HLEN)
		return -EINVAL;
	eth = (const struct ethhdr *)skb->data;
	fl->l3off = off;

	if (eth->h_proto == htons(ETH_P_IP)) {
		struct iphdr _iph;
		const struct iphdr *iph;

		iph = skb_header_pointer(skb, off, sizeof(_iph), &_iph);
		if (!iph || iph->ihl < 5 || iph->version != 4)
			return 0;
		fl->ip = true;
		fl->saddr[0] = iph->saddr;
		fl->daddr[0] = iph->daddr;
		fl->tos = iph->tos;
		fl->l4proto = iph->protocol;
		if (ip_is_fragment(iph))
			return 0;
		off += iph->ihl * 4;
	} else if (eth->h_proto == htons(ETH_P_IPV6)) {
		struct ipv6hdr _ip6;
		const struct ipv6hdr *ip6;
		__be16 frag_off;
		u8 nexthdr;
		int l4;

		ip6 = skb_header_pointer(skb, off, sizeof(_ip6), &_ip6);
		if (!ip6 || ip6->version != 6)
			return 0;
		fl->ip = true;
		fl->v6 = true;
		memcpy(fl->saddr, &ip6->saddr, 16);
		memcpy(fl->daddr, &ip6->daddr, 16);
		fl->tos = ipv6_get_dsfield(ip6);
		nexthdr = ip6->nexthdr;
		l4 = ipv6_skip_exthdr(skb, off + sizeof(*ip6), &nexthdr, &frag_off);
		if (l4 < 0 || (frag_off & htons(~0x7)))
			return 0;
		fl->l4proto = nexthdr;
		off = l4;
	} else {
		return 0;
	}

	fl->l4off = off;
	if (fl->l4proto == IPPROTO_TCP) {
		struct tcphdr _th;
		const struct tcphdr *th;

		th = skb_header_pointer(skb, off, sizeof(_th), &_th);
		if (!th || th->doff < 5)
			return 0;
		fl->sport = th->source;
		fl->dport = th->dest;
		fl->l4 = true;
		fl->hlen = off + th->doff * 4;
		if (fl->hlen > skb->len || fl->hlen > 256)
			return 0;
		fl->tcp = true;
	} else if (fl->l4proto == IPPROTO_UDP) {
		struct udphdr _uh;
		const struct udphdr *uh;

		uh = skb_header_pointer(skb, off, sizeof(_uh), &_uh);
		if (!uh)
			return 0;
		fl->sport = uh->source;
		fl->dport = uh->dest;
		fl->l4 = true;
		fl->hlen = off + sizeof(*uh);
	}
	return 0;
}

/* Toeplitz hash (as Microsoft RSS) over src addr, dst addr, src port,
 * dst port.
 */
static u32 dsim_toeplitz(const u8 *key, const u8 *data, unsigned int len)
{
	u32 hash = 0, v;
	unsigned int i, b;

	v = (key[0] << 24) | (key[1] << 16) | (key[2] << 8) | key[3];
	for (i = 0; i < len; i++) {
		for (b = 0; b < 8; b++) {
			if (data[i] & (0x80 >> b))
				hash ^= v;
			v <<= 1;
			if (i + 4 < DSIM_KEY_SIZE && (key[i + 4] & (0x80 >> b)))
				v |= 1;
		}
	}
	return hash;
}

static u32 dsim_flow_hash(const u8 *key, const struct dsim_flow *fl)
{
	u8 buf[36];
	unsigned int alen, n;

	if (!fl->ip)
		return 0;
	alen = fl->v6 ? 16 : 4;
	memcpy(buf, fl->saddr, alen);
	memcpy(buf + alen, fl->daddr, alen);
	n = 2 * alen;
	if (fl->l4) {
		memcpy(buf + n, &fl->sport, 2);
		memcpy(buf + n + 2, &fl->dport, 2);
		n += 4;
	}
	return dsim_toeplitz(key, buf, n);
}

static bool dsim_mask_match(const void *pkt, const void *val, const void *mask,
			    unsigned int len)
{
	const u8 *p = pkt, *v = val, *m = mask;
	unsigned int i;

	for (i = 0; i < len; i++)
		if ((p[i] & m[i]) != (v[i] & m[i]))
			return false;
	return true;
}

static bool dsim_rule_match(const struct ethtool_rx_flow_spec *fs,
			    const struct dsim_flow *fl)
{
	u32 type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);

	if (!fl->ip)
		return false;

	switch (type) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW: {
		const struct ethtool_tcpip4_spec *v = &fs->h_u.tcp_ip4_spec;
		const struct ethtool_tcpip4_spec *m = &fs->m_u.tcp_ip4_spec;

		if (fl->v6 || !fl->l4 ||
		    fl->l4proto != (type == TCP_V4_FLOW ? IPPROTO_TCP : IPPROTO_UDP))
			return false;
		return dsim_mask_match(&fl->saddr[0], &v->ip4src, &m->ip4src, 4) &&
		       dsim_mask_match(&fl->daddr[0], &v->ip4dst, &m->ip4dst, 4) &&
		       dsim_mask_match(&fl->sport, &v->psrc, &m->psrc, 2) &&
		       dsim_mask_match(&fl->dport, &v->pdst, &m->pdst, 2) &&
		       dsim_mask_match(&fl->tos, &v->tos, &m->tos, 1);
	}
	case TCP_V6_FLOW:
	case UDP_V6_FLOW: {
		const struct ethtool_tcpip6_spec *v = &fs->h_u.tcp_ip6_spec;
		const struct ethtool_tcpip6_spec *m = &fs->m_u.tcp_ip6_spec;

		if (!fl->v6 || !fl->l4 ||
		    fl->l4proto != (type == TCP_V6_FLOW ? IPPROTO_TCP : IPPROTO_UDP))
			return false;
		return dsim_mask_match(fl->saddr, v->ip6src, m->ip6src, 16) &&
		       dsim_mask_match(fl->daddr, v->ip6dst, m->ip6dst, 16) &&
		       dsim_mask_match(&fl->sport, &v->psrc, &m->psrc, 2) &&
		       dsim_mask_match(&fl->dport, &v->pdst, &m->pdst, 2) &&
		       dsim_mask_match(&fl->tos, &v->tclass, &m->tclass, 1);
	}
	case IP_USER_FLOW: {
		const struct ethtool_usrip4_spec *v = &fs->h_u.usr_ip4_spec;
		const struct ethtool_usrip4_spec *m = &fs->m_u.usr_ip4_spec;

		if (fl->v6)
			return false;
		return dsim_mask_match(&fl->saddr[0], &v->ip4src, &m->ip4src, 4) &&
		       dsim_mask_match(&fl->daddr[0], &v->ip4dst, &m->ip4dst, 4) &&
		       dsim_mask_match(&fl->tos, &v->tos, &m->tos, 1) &&
		       dsim_mask_match(&fl->l4proto, &v->proto, &m->proto, 1);
	}
	case IPV6_USER_FLOW: {
		const struct ethtool_usrip6_spec *v = &fs->h_u.usr_ip6_spec;
		const struct ethtool_usrip6_spec *m = &fs->m_u.usr_ip6_spec;

		if (!fl->v6)
			return false;
		return dsim_mask_match(fl->saddr, v->ip6src, m->ip6src, 16) &&
		       dsim_mask_match(fl->daddr, v->ip6dst, m->ip6dst, 16) &&
		       dsim_mask_match(&fl->tos, &v->tclass, &m->tclass, 1) &&
		       dsim_mask_match(&fl->l4proto, &v->l4_proto, &m->l4_proto, 1);
	}
	}
	return false;
}

/* Pick the RX queue of @rx for a frame; -1 means drop. Called with BH off. */
static int dsim_steer(struct dsim_priv *rx, const struct sk_buff *skb)
{
	unsigned int nrx = rx->dev->real_num_rx_queues;
	struct dsim_flow fl;
	u32 hash;
	int q = -1;
	unsigned int i;

	dsim_parse(skb, &fl);
	hash = dsim_flow_hash(rx->key, &fl);

	spin_lock(&rx->cfg_lock);
	if (rx->nrules && (rx->dev->features & NETIF_F_NTUPLE)) {
		for (i = 0; i < DSIM_MAX_RULES; i++) {
			const struct dsim_rule *r = &rx->rules[i];

			if (!r->used || !dsim_rule_match(&r->fs, &fl))
				continue;
			if (r->fs.ring_cookie == RX_CLS_FLOW_DISC) {
				q = -1;
				goto out;
			}
			q = ethtool_get_flow_spec_ring(r->fs.ring_cookie);
			if (r->fs.flow_type & FLOW_RSS) {
				u32 c = r->rss_ctx;

				if (c && c < DSIM_MAX_RSS_CTX && rx->ctx_used[c])
					q += rx->ctx_indir[c][hash % DSIM_INDIR_SIZE];
				else
					q += rx->indir[hash % DSIM_INDIR_SIZE];
			}
			goto out;
		}
	}
	q = rx->indir[hash % DSIM_INDIR_SIZE];
out:
	spin_unlock(&rx->cfg_lock);
	if (q >= (int)nrx)
		q = 0;
	return q;
}

/* ------------------------------------------------------------------ */
/* TX side                                                             */

static netdev_tx_t dsim_start_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u16 qid = skb_get_queue_mapping(skb);
	struct dsim_tq *tq = &priv->tq[qid < priv->nq ? qid : 0];
	struct netdev_queue *txq = netdev_get_tx_queue(dev, qid);
	unsigned int len = skb->len;
	struct dsim_priv *peer;
	struct dsim_rq *rq;
	int q;

	rcu_read_lock();
	peer = rcu_dereference(priv->peer);
	if (!peer || !netif_running(peer->dev) || skb->len < ETH_HLEN)
		goto drop;

	q = dsim_steer(peer, skb);
	if (q < 0)
		goto drop;
	/* a queue being restarted keeps its backlog: it is processed when
	 * the queue starts again with its new memory
	 */
	rq = &peer->rq[q];
	if (skb_queue_len(&rq->backlog) >= 2 * DSIM_BACKLOG)
		goto drop;

	/* the frame is now "on the wire": keep it until the peer DMAs it */
	skb_queue_tail(&rq->backlog, skb);
	if (skb_queue_len(&rq->backlog) >= DSIM_BACKLOG) {
		netif_tx_stop_queue(txq);
		/* the peer may have drained meanwhile */
		if (skb_queue_len(&rq->backlog) < DSIM_BACKLOG)
			netif_tx_wake_queue(txq);
	}
	napi_schedule(&rq->napi);
	rcu_read_unlock();

	u64_stats_update_begin(&tq->syncp);
	u64_stats_inc(&tq->packets);
	u64_stats_add(&tq->bytes, len);
	u64_stats_update_end(&tq->syncp);
	return NETDEV_TX_OK;

drop:
	rcu_read_unlock();
	u64_stats_update_begin(&tq->syncp);
	u64_stats_inc(&tq->drops);
	u64_stats_update_end(&tq->syncp);
	dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

/* ------------------------------------------------------------------ */
/* open / stop                                                         */

static int dsim_rq_start(struct dsim_priv *priv, unsigned int i)
{
	struct dsim_rq *rq = &priv->rq[i];

	if (!rq->pp) {
		rq->pp = dsim_create_pp(priv, i);
		if (IS_ERR(rq->pp)) {
			int err = PTR_ERR(rq->pp);

			rq->pp = NULL;
			return err;
		}
	}
	dsim_pp_attach_napi(rq);
	netif_queue_set_napi(priv->dev, i, NETDEV_QUEUE_TYPE_RX, &rq->napi);
	dsim_napi_enable(&rq->napi);
	rq->napi_on = true;
	if (!skb_queue_empty(&rq->backlog))
		napi_schedule(&rq->napi);
	return 0;
}

static void dsim_rq_stop(struct dsim_priv *priv, unsigned int i, bool purge)
{
	struct dsim_rq *rq = &priv->rq[i];

	if (rq->napi_on) {
		dsim_napi_disable(&rq->napi);
		netif_queue_set_napi(priv->dev, i, NETDEV_QUEUE_TYPE_RX, NULL);
		rq->napi_on = false;
	}
	if (purge)
		skb_queue_purge(&rq->backlog);
	if (rq->pp) {
		page_pool_disable_direct_recycling(rq->pp);
		page_pool_destroy(rq->pp);
		rq->pp = NULL;
	}
}

static void dsim_stop_all(struct dsim_priv *priv)
{
	unsigned int i;

	for (i = 0; i < priv->nq; i++)
		dsim_rq_stop(priv, i, true);
	dsim_wake_peer_txqs(priv);
}

static int dsim_start_all(struct dsim_priv *priv)
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
		dsim_rq_stop(priv, i, true);
	return err;
}

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

static void dsim_get_stats64(struct net_device *dev,
			     struct rtnl_link_stats64 *s)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int i, start;

	for (i = 0; i < priv->nq; i++) {
		struct dsim_rq *rq = &priv->rq[i];
		struct dsim_tq *tq = &priv->tq[i];
		u64 p, b, d, a;

		do {
			start = u64_stats_fetch_begin(&rq->syncp);
			p = u64_stats_read(&rq->packets);
			b = u64_stats_read(&rq->bytes);
			d = u64_stats_read(&rq->drops);
			a = u64_stats_read(&rq->alloc_fail);
		} while (u64_stats_fetch_retry(&rq->syncp, start));
		s->rx_packets += p;
		s->rx_bytes += b;
		s->rx_dropped += d + a;

		do {
			start = u64_stats_fetch_begin(&tq->syncp);
			p = u64_stats_read(&tq->packets);
			b = u64_stats_read(&tq->bytes);
			d = u64_stats_read(&tq->drops);
		} while (u64_stats_fetch_retry(&tq->syncp, start));
		s->tx_packets += p;
		s->tx_bytes += b;
		s->tx_dropped += d;
	}
}

static int dsim_set_features(struct net_device *dev, netdev_features_t features)
{
	struct dsim_priv *priv = netdev_priv(dev);

	/* like most NICs: turning ntuple off flushes the rule table */
	if ((dev->features & NETIF_F_NTUPLE) && !(features & NETIF_F_NTUPLE)) {
		spin_lock_bh(&priv->cfg_lock);
		memset(priv->rules, 0, sizeof(priv->rules));
		priv->nrules = 0;
		spin_unlock_bh(&priv->cfg_lock);
	}
	return 0;
}

static const struct net_device_ops dsim_netdev_ops = {
	.ndo_open		= dsim_open,
	.ndo_stop		= dsim_stop,
	.ndo_start_xmit		= dsim_start_xmit,
	.ndo_get_stats64	= dsim_get_stats64,
	.ndo_set_features	= dsim_set_features,
	.ndo_set_mac_address	= eth_mac_addr,
	.ndo_validate_addr	= eth_validate_addr,
};

/* ------------------------------------------------------------------ */
/* queue management API                                                */

static int dsim_queue_mem_alloc(struct net_device *dev,
#if DSIM_QCFG
				struct netdev_queue_config *qcfg,
#endif
				void *per_queue_mem, int idx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_queue_mem *qmem = per_queue_mem;

	if (idx < 0 || idx >= priv->nq)
		return -EINVAL;
	if (atomic_add_unless(&priv->fail_restart, -1, 0)) {
		netdev_info(dev, "fault injection: failing restart of queue %d\n", idx);
		return -EIO;
	}
	qmem->pp = dsim_create_pp(priv, idx);
	if (IS_ERR(qmem->pp)) {
		int err = PTR_ERR(qmem->pp);

		qmem->pp = NULL;
		return err;
	}
	return 0;
}

static void dsim_queue_mem_free(struct net_device *dev, void *per_queue_mem)
{
	struct dsim_queue_mem *qmem = per_queue_mem;

	if (qmem->pp) {
		page_pool_destroy(qmem->pp);
		qmem->pp = NULL;
	}
}

static int dsim_queue_start(struct net_device *dev,
#if DSIM_QCFG
			    struct netdev_queue_config *qcfg,
#endif
			    void *per_queue_mem, int idx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_queue_mem *qmem = per_queue_mem;
	struct dsim_rq *rq = &priv->rq[idx];

	if (WARN_ON(rq->pp))
		return -EBUSY;
	rq->pp = qmem->pp;
	qmem->pp = NULL;
	if (!netif_running(dev))	/* 6.12 restarts closed devices too */
		return 0;
	dsim_pp_attach_napi(rq);
	netif_queue_set_napi(dev, idx, NETDEV_QUEUE_TYPE_RX, &rq->napi);
	dsim_napi_enable(&rq->napi);
	rq->napi_on = true;
	napi_schedule(&rq->napi);
	return 0;
}

static int dsim_queue_stop(struct net_device *dev, void *per_queue_mem, int idx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_queue_mem *qmem = per_queue_mem;
	struct dsim_rq *rq = &priv->rq[idx];

	if (rq->napi_on) {
		dsim_napi_disable(&rq->napi);
		rq->napi_on = false;
	}
	/* frames still on the wire stay in the backlog for the new memory */
	qmem->pp = rq->pp;
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
};

/* ------------------------------------------------------------------ */
/* per-queue stats (netdev qstats)                                     */

static void dsim_get_queue_stats_rx(struct net_device *dev, int idx,
				    struct netdev_queue_stats_rx *stats)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_rq *rq = &priv->rq[idx];
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&rq->syncp);
		stats->packets = u64_stats_read(&rq->packets);
		stats->bytes = u64_stats_read(&rq->bytes);
		stats->alloc_fail = u64_stats_read(&rq->alloc_fail);
		stats->hw_drops = u64_stats_read(&rq->drops);
	} while (u64_stats_fetch_retry(&rq->syncp, start));
}

static void dsim_get_queue_stats_tx(struct net_device *dev, int idx,
				    struct netdev_queue_stats_tx *stats)
{
	struct dsim_priv *priv = netdev_priv(dev);
	struct dsim_tq *tq = &priv->tq[idx];
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&tq->syncp);
		stats->packets = u64_stats_read(&tq->packets);
		stats->bytes = u64_stats_read(&tq->bytes);
		stats->hw_drops = u64_stats_read(&tq->drops);
	} while (u64_stats_fetch_retry(&tq->syncp, start));
}

static void dsim_get_base_stats(struct net_device *dev,
				struct netdev_queue_stats_rx *rx,
				struct netdev_queue_stats_tx *tx)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int i;

	/* queues beyond the active channel count still count */
	rx->packets = 0;
	rx->bytes = 0;
	rx->alloc_fail = 0;
	rx->hw_drops = 0;
	tx->packets = 0;
	tx->bytes = 0;
	tx->hw_drops = 0;
	for (i = dev->real_num_rx_queues; i < priv->nq; i++) {
		struct netdev_queue_stats_rx r = {};

		dsim_get_queue_stats_rx(dev, i, &r);
		rx->packets += r.packets;
		rx->bytes += r.bytes;
		rx->alloc_fail += r.alloc_fail;
		rx->hw_drops += r.hw_drops;
	}
	for (i = dev->real_num_tx_queues; i < priv->nq; i++) {
		struct netdev_queue_stats_tx t = {};

		dsim_get_queue_stats_tx(dev, i, &t);
		tx->packets += t.packets;
		tx->bytes += t.bytes;
		tx->hw_drops += t.hw_drops;
	}
}

static const struct netdev_stat_ops dsim_stat_ops = {
	.get_queue_stats_rx	= dsim_get_queue_stats_rx,
	.get_queue_stats_tx	= dsim_get_queue_stats_tx,
	.get_base_stats		= dsim_get_base_stats,
};

/* ------------------------------------------------------------------ */
/* ethtool                                                             */

static void dsim_get_drvinfo(struct net_device *dev, struct ethtool_drvinfo *info)
{
	struct dsim_priv *priv = netdev_priv(dev);

	strscpy(info->driver, DSIM_DRV_NAME, sizeof(info->driver));
	strscpy(info->bus_info, dev_name(&priv->pdev->dev), sizeof(info->bus_info));
}

static void dsim_get_ringparam(struct net_device *dev,
			       struct ethtool_ringparam *ring,
			       struct kernel_ethtool_ringparam *kring,
			       struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);

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

	if (ring->rx_pending < 64 || ring->rx_pending > DSIM_RING_MAX ||
	    ring->tx_pending < 64 || ring->tx_pending > DSIM_RING_MAX) {
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

	ch->max_combined = priv->nq;
	ch->combined_count = dev->real_num_rx_queues;
}

static void dsim_default_indir(struct dsim_priv *priv, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < DSIM_INDIR_SIZE; i++)
		priv->indir[i] = ethtool_rxfh_indir_default(i, n);
}

static int dsim_set_channels(struct net_device *dev, struct ethtool_channels *ch)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int n = ch->combined_count;
	bool running = netif_running(dev);
	unsigned int i;
	int err;

	if (ch->rx_count || ch->tx_count || ch->other_count || !n || n > priv->nq)
		return -EINVAL;
	/* the core refuses to drop a queue with a memory provider; be sure */
	for (i = n; i < dev->real_num_rx_queues; i++)
		if (dsim_rxq_has_mp(dev, i))
			return -EBUSY;

	if (running) {
		netif_tx_stop_all_queues(dev);
		dsim_stop_all(priv);
	}
	err = netif_set_real_num_tx_queues(dev, n);
	if (!err)
		err = netif_set_real_num_rx_queues(dev, n);
	if (!err && !netif_is_rxfh_configured(dev)) {
		spin_lock_bh(&priv->cfg_lock);
		dsim_default_indir(priv, n);
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

static u32 dsim_get_rxfh_indir_size(struct net_device *dev)
{
	return DSIM_INDIR_SIZE;
}

static u32 dsim_get_rxfh_key_size(struct net_device *dev)
{
	return DSIM_KEY_SIZE;
}

static int dsim_get_rxfh(struct net_device *dev, struct ethtool_rxfh_param *rxfh)
{
	struct dsim_priv *priv = netdev_priv(dev);
	const u32 *indir = priv->indir;
	u32 c = rxfh->rss_context;

	rxfh->hfunc = ETH_RSS_HASH_TOP;
	spin_lock_bh(&priv->cfg_lock);
	if (c) {
		if (c >= DSIM_MAX_RSS_CTX || !priv->ctx_used[c]) {
			spin_unlock_bh(&priv->cfg_lock);
			return -ENOENT;
		}
		indir = priv->ctx_indir[c];
	}
	if (rxfh->indir)
		memcpy(rxfh->indir, indir, sizeof(priv->indir));
	if (rxfh->key)
		memcpy(rxfh->key, priv->key, DSIM_KEY_SIZE);
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
		memcpy(priv->indir, rxfh->indir, sizeof(priv->indir));
	if (rxfh->key)
		memcpy(priv->key, rxfh->key, DSIM_KEY_SIZE);
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

static void dsim_ctx_fill(struct dsim_priv *priv, struct ethtool_rxfh_context *ctx,
			  u32 id, const struct ethtool_rxfh_param *rxfh)
{
	u32 *cind = ethtool_rxfh_context_indir(ctx);
	unsigned int i;

	if (rxfh->indir) {
		memcpy(priv->ctx_indir[id], rxfh->indir, sizeof(priv->indir));
	} else if (!priv->ctx_used[id]) {
		for (i = 0; i < DSIM_INDIR_SIZE; i++)
			priv->ctx_indir[id][i] =
				ethtool_rxfh_indir_default(i, priv->dev->real_num_rx_queues);
	}
	memcpy(cind, priv->ctx_indir[id], sizeof(priv->indir));
	memcpy(ethtool_rxfh_context_key(ctx), priv->key, DSIM_KEY_SIZE);
	ctx->hfunc = ETH_RSS_HASH_TOP;
}

static int dsim_create_rxfh_context(struct net_device *dev,
				    struct ethtool_rxfh_context *ctx,
				    const struct ethtool_rxfh_param *rxfh,
				    struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 id = rxfh->rss_context;
	int err = dsim_check_hfunc(rxfh, extack);

	if (err)
		return err;
	if (!id || id >= DSIM_MAX_RSS_CTX)
		return -EINVAL;
	if (rxfh->key) {
		NL_SET_ERR_MSG(extack, "RSS contexts share the device key");
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&priv->cfg_lock);
	dsim_ctx_fill(priv, ctx, id, rxfh);
	priv->ctx_used[id] = true;
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

static int dsim_modify_rxfh_context(struct net_device *dev,
				    struct ethtool_rxfh_context *ctx,
				    const struct ethtool_rxfh_param *rxfh,
				    struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 id = rxfh->rss_context;
	int err = dsim_check_hfunc(rxfh, extack);

	if (err)
		return err;
	if (!id || id >= DSIM_MAX_RSS_CTX || !priv->ctx_used[id])
		return -ENOENT;
	if (rxfh->key) {
		NL_SET_ERR_MSG(extack, "RSS contexts share the device key");
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&priv->cfg_lock);
	if (rxfh->indir)
		memcpy(priv->ctx_indir[id], rxfh->indir, sizeof(priv->indir));
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

static int dsim_remove_rxfh_context(struct net_device *dev,
				    struct ethtool_rxfh_context *ctx,
				    u32 rss_context,
				    struct netlink_ext_ack *extack)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int i;

	if (!rss_context || rss_context >= DSIM_MAX_RSS_CTX ||
	    !priv->ctx_used[rss_context])
		return -ENOENT;
	spin_lock_bh(&priv->cfg_lock);
	for (i = 0; i < DSIM_MAX_RULES; i++) {
		if (priv->rules[i].used &&
		    (priv->rules[i].fs.flow_type & FLOW_RSS) &&
		    priv->rules[i].rss_ctx == rss_context) {
			spin_unlock_bh(&priv->cfg_lock);
			NL_SET_ERR_MSG(extack, "RSS context is used by an ntuple rule");
			return -EBUSY;
		}
	}
	priv->ctx_used[rss_context] = false;
	spin_unlock_bh(&priv->cfg_lock);
	return 0;
}

#if DSIM_HAVE_RX_RING_COUNT
static u32 dsim_get_rx_ring_count(struct net_device *dev)
{
	return dev->real_num_rx_queues;
}
#endif

static int dsim_get_rxnfc(struct net_device *dev, struct ethtool_rxnfc *info,
			  u32 *rule_locs)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int i, n;
	int err = 0;

	switch (info->cmd) {
	case ETHTOOL_GRXRINGS:
		info->data = dev->real_num_rx_queues;
		return 0;
	case ETHTOOL_GRXCLSRLCNT:
		spin_lock_bh(&priv->cfg_lock);
		info->rule_cnt = priv->nrules;
		spin_unlock_bh(&priv->cfg_lock);
		info->data = DSIM_MAX_RULES | RX_CLS_LOC_SPECIAL;
		return 0;
	case ETHTOOL_GRXCLSRULE:
		if (info->fs.location >= DSIM_MAX_RULES)
			return -EINVAL;
		spin_lock_bh(&priv->cfg_lock);
		if (!priv->rules[info->fs.location].used) {
			err = -ENOENT;
		} else {
			info->fs = priv->rules[info->fs.location].fs;
			if (info->fs.flow_type & FLOW_RSS)
				info->rss_context = priv->rules[info->fs.location].rss_ctx;
		}
		spin_unlock_bh(&priv->cfg_lock);
		return err;
	case ETHTOOL_GRXCLSRLALL:
		info->data = DSIM_MAX_RULES;
		spin_lock_bh(&priv->cfg_lock);
		for (i = 0, n = 0; i < DSIM_MAX_RULES; i++) {
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
	return -EOPNOTSUPP;
}

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
	if (fs->flow_type & FLOW_RSS) {
		u32 c = info->rss_context;

		if (c && (c >= DSIM_MAX_RSS_CTX || !priv->ctx_used[c]))
			return -ENOENT;
		if (ethtool_get_flow_spec_ring(fs->ring_cookie) >=
		    priv->dev->real_num_rx_queues)
			return -EINVAL;
		return 0;
	}
	if (ethtool_get_flow_spec_ring(fs->ring_cookie) >=
	    priv->dev->real_num_rx_queues)
		return -EINVAL;
	return 0;
}

static int dsim_set_rxnfc(struct net_device *dev, struct ethtool_rxnfc *info)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u32 loc = info->fs.location;
	int err = 0;

	switch (info->cmd) {
	case ETHTOOL_SRXCLSRLINS:
		if (!(dev->features & NETIF_F_NTUPLE))
			return -EOPNOTSUPP;
		spin_lock_bh(&priv->cfg_lock);
		err = dsim_check_fs(priv, info);
		if (err)
			goto out;
		if (loc == RX_CLS_LOC_ANY || loc == RX_CLS_LOC_FIRST) {
			for (loc = 0; loc < DSIM_MAX_RULES; loc++)
				if (!priv->rules[loc].used)
					break;
		} else if (loc == RX_CLS_LOC_LAST) {
			for (loc = DSIM_MAX_RULES; loc-- > 0;)
				if (!priv->rules[loc].used)
					break;
			if (loc >= DSIM_MAX_RULES)
				loc = DSIM_MAX_RULES;
		}
		if (loc >= DSIM_MAX_RULES) {
			err = info->fs.location >= RX_CLS_LOC_LAST ? -ENOSPC : -EINVAL;
			goto out;
		}
		if (!priv->rules[loc].used)
			priv->nrules++;
		priv->rules[loc].used = true;
		priv->rules[loc].fs = info->fs;
		priv->rules[loc].fs.location = loc;
		priv->rules[loc].rss_ctx =
			(info->fs.flow_type & FLOW_RSS) ? info->rss_context : 0;
		info->fs.location = loc;
		break;
	case ETHTOOL_SRXCLSRLDEL:
		if (loc >= DSIM_MAX_RULES)
			return -EINVAL;
		spin_lock_bh(&priv->cfg_lock);
		if (!priv->rules[loc].used) {
			err = -ENOENT;
			goto out;
		}
		memset(&priv->rules[loc], 0, sizeof(priv->rules[loc]));
		priv->nrules--;
		break;
	default:
		return -EOPNOTSUPP;
	}
out:
	spin_unlock_bh(&priv->cfg_lock);
	return err;
}

static const char * const dsim_rx_stat_names[] = {
	"packets", "bytes", "alloc_fail", "drops",
};

static const char * const dsim_tx_stat_names[] = {
	"packets", "bytes", "drops",
};

static int dsim_get_sset_count(struct net_device *dev, int sset)
{
	struct dsim_priv *priv = netdev_priv(dev);

	if (sset != ETH_SS_STATS)
		return -EOPNOTSUPP;
	return priv->nq * (ARRAY_SIZE(dsim_rx_stat_names) +
			   ARRAY_SIZE(dsim_tx_stat_names));
}

static void dsim_get_strings(struct net_device *dev, u32 sset, u8 *data)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int i, j;

	if (sset != ETH_SS_STATS)
		return;
	for (i = 0; i < priv->nq; i++)
		for (j = 0; j < ARRAY_SIZE(dsim_rx_stat_names); j++)
			ethtool_sprintf(&data, "rx%u_%s", i, dsim_rx_stat_names[j]);
	for (i = 0; i < priv->nq; i++)
		for (j = 0; j < ARRAY_SIZE(dsim_tx_stat_names); j++)
			ethtool_sprintf(&data, "tx%u_%s", i, dsim_tx_stat_names[j]);
}

static void dsim_get_ethtool_stats(struct net_device *dev,
				   struct ethtool_stats *stats, u64 *data)
{
	struct dsim_priv *priv = netdev_priv(dev);
	unsigned int i;

	for (i = 0; i < priv->nq; i++) {
		struct netdev_queue_stats_rx r = {};

		dsim_get_queue_stats_rx(dev, i, &r);
		*data++ = r.packets;
		*data++ = r.bytes;
		*data++ = r.alloc_fail;
		*data++ = r.hw_drops;
	}
	for (i = 0; i < priv->nq; i++) {
		struct netdev_queue_stats_tx t = {};

		dsim_get_queue_stats_tx(dev, i, &t);
		*data++ = t.packets;
		*data++ = t.bytes;
		*data++ = t.hw_drops;
	}
}

static const struct ethtool_ops dsim_ethtool_ops = {
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

/* ------------------------------------------------------------------ */
/* debugfs fault injection                                             */

static int dsim_corrupt_get(void *data, u64 *val)
{
	struct dsim_priv *priv = data;

	spin_lock_bh(&priv->fault_lock);
	*val = priv->corrupt_offset;
	spin_unlock_bh(&priv->fault_lock);
	return 0;
}

static int dsim_corrupt_set(void *data, u64 val)
{
	struct dsim_priv *priv = data;

	if (val > U32_MAX)	/* inside the first 4 GiB of the stream */
		return -EINVAL;
	spin_lock_bh(&priv->fault_lock);
	priv->corrupt_offset = val;
	priv->corrupt_state = val ? DSIM_CORRUPT_ARMED : DSIM_CORRUPT_OFF;
	priv->payload_seen = 0;
	spin_unlock_bh(&priv->fault_lock);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_corrupt_fops, dsim_corrupt_get, dsim_corrupt_set,
			 "%llu\n");

static int dsim_drop_get(void *data, u64 *val)
{
	struct dsim_priv *priv = data;

	*val = READ_ONCE(priv->drop_every);
	return 0;
}

static int dsim_drop_set(void *data, u64 val)
{
	struct dsim_priv *priv = data;

	if (val > U32_MAX)
		return -EINVAL;
	spin_lock_bh(&priv->fault_lock);
	priv->frames_seen = 0;
	WRITE_ONCE(priv->drop_every, val);
	spin_unlock_bh(&priv->fault_lock);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_drop_fops, dsim_drop_get, dsim_drop_set, "%llu\n");

static int dsim_payload_get(void *data, u64 *val)
{
	struct dsim_priv *priv = data;

	spin_lock_bh(&priv->fault_lock);
	*val = priv->payload_seen;
	spin_unlock_bh(&priv->fault_lock);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_payload_fops, dsim_payload_get, NULL, "%llu\n");

/* "state": queue internals, to diagnose stalls */
static int dsim_state_show(struct seq_file *m, void *v)
{
	struct dsim_priv *priv = m->private;
	struct net_device *dev = priv->dev;
	unsigned int i;

	seq_printf(m, "%s: running %d real_rx %u real_tx %u hds %d hds_thresh %u rules %u\n",
		   netdev_name(dev), netif_running(dev), dev->real_num_rx_queues,
		   dev->real_num_tx_queues, READ_ONCE(priv->hds),
		   READ_ONCE(priv->hds_thresh), priv->nrules);
	for (i = 0; i < priv->nq; i++) {
		struct dsim_rq *rq = &priv->rq[i];
		struct netdev_queue_stats_rx r = {};
		struct netdev_queue_stats_tx t = {};

		dsim_get_queue_stats_rx(dev, i, &r);
		dsim_get_queue_stats_tx(dev, i, &t);
		seq_printf(m, "rx%u: backlog %u napi_on %d napi_state 0x%lx pp %d mp %d packets %llu alloc_fail %llu drops %llu\n",
			   i, skb_queue_len(&rq->backlog), rq->napi_on,
			   READ_ONCE(rq->napi.state), !!rq->pp,
			   i < dev->real_num_rx_queues && dsim_rxq_has_mp(dev, i),
			   r.packets, r.alloc_fail, r.hw_drops);
		if (i < dev->num_tx_queues)
			seq_printf(m, "tx%u: stopped %d packets %llu drops %llu\n", i,
				   netif_tx_queue_stopped(netdev_get_tx_queue(dev, i)),
				   t.packets, t.hw_drops);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(dsim_state);

static void dsim_debugfs_init(struct dsim_priv *priv)
{
	if (IS_ERR_OR_NULL(dsim_dbg_root))
		return;
	priv->dbg = debugfs_create_dir(netdev_name(priv->dev), dsim_dbg_root);
	debugfs_create_file_unsafe("corrupt_offset", 0600, priv->dbg, priv,
				   &dsim_corrupt_fops);
	debugfs_create_file_unsafe("drop_every", 0600, priv->dbg, priv,
				   &dsim_drop_fops);
	debugfs_create_file_unsafe("payload_bytes", 0400, priv->dbg, priv,
				   &dsim_payload_fops);
	debugfs_create_atomic_t("fail_restart", 0600, priv->dbg,
				&priv->fail_restart);
	debugfs_create_atomic_t("fail_alloc", 0600, priv->dbg, &priv->fail_alloc);
	debugfs_create_file("state", 0400, priv->dbg, priv, &dsim_state_fops);
}

/* ------------------------------------------------------------------ */
/* device creation                                                     */

static void dsim_setup(struct net_device *dev)
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
}

static struct dsim_priv *dsim_create(const char *name, int id)
{
	struct platform_device *pdev;
	struct net_device *dev;
	struct dsim_priv *priv;
	unsigned int i;
	int err;

	pdev = platform_device_register_simple(DSIM_DRV_NAME, id, NULL, 0);
	if (IS_ERR(pdev))
		return ERR_CAST(pdev);
	/* 64-bit DMA, no IOMMU: DMA address == physical address */
	err = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err)
		goto err_pdev;

	dev = alloc_netdev_mqs(sizeof(*priv), name, NET_NAME_USER, dsim_setup,
			       num_queues, num_queues);
	if (!dev) {
		err = -ENOMEM;
		goto err_pdev;
	}
	SET_NETDEV_DEV(dev, &pdev->dev);
	priv = netdev_priv(dev);
	priv->dev = dev;
	priv->pdev = pdev;
	priv->nq = num_queues;
	priv->rx_ring = DSIM_RING_DEFAULT;
	priv->tx_ring = DSIM_RING_DEFAULT;
	priv->hds = false;
#if DSIM_HAVE_HDS_THRESH
	priv->hds_thresh = DSIM_HDS_THRESH_DEFAULT;
	dev->cfg->hds_thresh = DSIM_HDS_THRESH_DEFAULT;
#else
	priv->hds_thresh = 0;
#endif
	spin_lock_init(&priv->cfg_lock);
	spin_lock_init(&priv->fault_lock);
	atomic_set(&priv->fail_restart, 0);
	atomic_set(&priv->fail_alloc, 0);
	netdev_rss_key_fill(priv->key, sizeof(priv->key));
	dsim_default_indir(priv, num_queues);
	eth_hw_addr_random(dev);

	priv->rq = kcalloc(priv->nq, sizeof(*priv->rq), GFP_KERNEL);
	priv->tq = kcalloc(priv->nq, sizeof(*priv->tq), GFP_KERNEL);
	if (!priv->rq || !priv->tq) {
		err = -ENOMEM;
		goto err_free;
	}
	for (i = 0; i < priv->nq; i++) {
		struct dsim_rq *rq = &priv->rq[i];

		rq->priv = priv;
		rq->idx = i;
		skb_queue_head_init(&rq->backlog);
		u64_stats_init(&rq->syncp);
		u64_stats_init(&priv->tq[i].syncp);
		netif_napi_add(dev, &rq->napi, dsim_poll);
	}
	return priv;

err_free:
	kfree(priv->rq);
	kfree(priv->tq);
	free_netdev(dev);
err_pdev:
	platform_device_unregister(pdev);
	return ERR_PTR(err);
}

static void dsim_free(struct dsim_priv *priv)
{
	struct platform_device *pdev = priv->pdev;
	unsigned int i;

	for (i = 0; i < priv->nq; i++) {
		netif_napi_del(&priv->rq[i].napi);
		skb_queue_purge(&priv->rq[i].backlog);
		/* 6.12 can leave a pool behind on a closed device */
		if (priv->rq[i].pp)
			page_pool_destroy(priv->rq[i].pp);
	}
	kfree(priv->rq);
	kfree(priv->tq);
	free_netdev(priv->dev);
	platform_device_unregister(pdev);
}

static int __init dsim_init(void)
{
	int err, i;

	if (num_queues < 1 || num_queues > DSIM_MAX_QUEUES) {
		pr_err("num_queues must be 1..%d\n", DSIM_MAX_QUEUES);
		return -EINVAL;
	}

	for (i = 0; i < 2; i++) {
		dsim_privs[i] = dsim_create(i ? name1 : name0, i);
		if (IS_ERR(dsim_privs[i])) {
			err = PTR_ERR(dsim_privs[i]);
			dsim_privs[i] = NULL;
			goto err_free;
		}
	}
	rcu_assign_pointer(dsim_privs[0]->peer, dsim_privs[1]);
	rcu_assign_pointer(dsim_privs[1]->peer, dsim_privs[0]);

	err = register_netdev(dsim_privs[0]->dev);
	if (err)
		goto err_free;
	err = register_netdev(dsim_privs[1]->dev);
	if (err) {
		unregister_netdev(dsim_privs[0]->dev);
		goto err_free;
	}
	netif_carrier_on(dsim_privs[0]->dev);
	netif_carrier_on(dsim_privs[1]->dev);

	dsim_dbg_root = debugfs_create_dir(DSIM_DRV_NAME, NULL);
	dsim_debugfs_init(dsim_privs[0]);
	dsim_debugfs_init(dsim_privs[1]);
	pr_info("created %s and %s with %d queues each\n",
		netdev_name(dsim_privs[0]->dev), netdev_name(dsim_privs[1]->dev),
		num_queues);
	return 0;

err_free:
	for (i = 0; i < 2; i++)
		if (dsim_privs[i])
			dsim_free(dsim_privs[i]);
	return err;
}

static void __exit dsim_exit(void)
{
	LIST_HEAD(list);
	int i;

	debugfs_remove_recursive(dsim_dbg_root);

	RCU_INIT_POINTER(dsim_privs[0]->peer, NULL);
	RCU_INIT_POINTER(dsim_privs[1]->peer, NULL);
	synchronize_net();

	rtnl_lock();
	unregister_netdevice_queue(dsim_privs[0]->dev, &list);
	unregister_netdevice_queue(dsim_privs[1]->dev, &list);
	unregister_netdevice_many(&list);
	rtnl_unlock();

	for (i = 0; i < 2; i++)
		dsim_free(dsim_privs[i]);
}

module_init(dsim_init);
module_exit(dsim_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated Ethernet NIC pair with devmem TCP (netmem RX/TX) support");
MODULE_AUTHOR("libdevmemtcp authors");
