// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim receive path: an RX queue's NAPI takes the transmitted skbs
 * waiting in its backlog and writes each as the frames a NIC would DMA.
 * A TSO super-frame is cut into MSS-sized frames.  With header split on,
 * a TCP frame's headers go to the skb's linear part and its payload to
 * page-pool netmem of the queue, one netmem per 4 KiB, written through the
 * net_iov's DMA address when a dma-buf is bound (the CPU never touches the
 * buffer otherwise); other frames are copied whole into the linear part.
 * The fault knobs (debugfs.c) act here, and freeing the source skb after
 * it is "DMA'd" completes the sender's MSG_ZEROCOPY.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/etherdevice.h>
#include <net/page_pool/helpers.h>

/* Where a "DMA" write into @nm lands, as a kernel virtual address. */
static void *dsim_netmem_va(struct dsim_priv *priv, netmem_ref nm, unsigned int len)
{
	if (!netmem_is_net_iov(nm))
		return page_address(netmem_to_page(nm));
	return dsim_dma_va(priv, page_pool_get_dma_addr_netmem(nm), len);
}

static netmem_ref dsim_rx_alloc_netmem(struct dsim_rq *rq)
{
	netmem_ref nm = 0;

	if (!dsim_fault_alloc(rq->priv))
		nm = page_pool_alloc_netmems(rq->pp, GFP_ATOMIC | __GFP_NOWARN);
	if (!nm)
		dsim_stats_inc(&rq->stats, DSIM_ALLOC_FAIL);
	return nm;
}

/* Header split: @plen payload bytes at @poff of the source into netmem
 * frags of @skb; the byte at @cpos (if >= 0) is the one to corrupt.
 */
static int dsim_rx_payload_netmem(struct dsim_rq *rq, const struct dsim_wire *w,
				  struct sk_buff *skb, unsigned int poff,
				  unsigned int plen, int cpos)
{
	int frag = 0;

	skb_mark_for_recycle(skb);
	while (plen) {
		unsigned int n = min_t(unsigned int, plen, PAGE_SIZE);
		netmem_ref nm;
		u8 *va;

		if (frag >= MAX_SKB_FRAGS)
			return -EMSGSIZE;
		nm = dsim_rx_alloc_netmem(rq);
		if (!nm)
			return -ENOMEM;
		va = dsim_netmem_va(rq->priv, nm, n);
		if (!va || dsim_src_copy(w->txp, w->skb, poff, va, n)) {
			page_pool_put_full_netmem(rq->pp, nm, true);
			return -EFAULT;
		}
		if (cpos >= 0 && (unsigned int)cpos < n)
			dsim_fault_corrupt_apply(rq->priv, va + cpos);
		cpos -= n;
		skb_add_rx_frag_netmem(skb, frag++, nm, 0, n, PAGE_SIZE);
		poff += n;
		plen -= n;
	}
	return 0;
}

/* No split: the payload follows the headers in the linear part. */
static int dsim_rx_payload_linear(struct dsim_rq *rq, const struct dsim_wire *w,
				  struct sk_buff *skb, unsigned int poff,
				  unsigned int plen, int cpos)
{
	u8 *p = skb_put(skb, plen);

	if (plen && dsim_src_copy(w->txp, w->skb, poff, p, plen))
		return -EFAULT;
	if (cpos >= 0)
		dsim_fault_corrupt_apply(rq->priv, p + cpos);
	return 0;
}

static void dsim_rx_deliver(struct dsim_rq *rq, const struct dsim_wire *w,
			    struct sk_buff *skb)
{
	const struct dsim_flow *fl = &w->fl;

	skb->protocol = eth_type_trans(skb, rq->priv->dev);
	skb->ip_summed = fl->l4 ? CHECKSUM_UNNECESSARY : CHECKSUM_NONE;
	skb_record_rx_queue(skb, rq->idx);
	if (fl->ip)
		skb_set_hash(skb, w->hash, fl->l4 ? PKT_HASH_TYPE_L4 : PKT_HASH_TYPE_L3);
	dsim_stats_packet(&rq->stats, skb->len + ETH_HLEN);
	napi_gro_receive(&rq->napi, skb);
}

/*
 * Build one received frame on @rq from the headers in @hdr (@hlen bytes,
 * already fixed up for this segment) and @plen payload bytes of the source
 * at @poff.  Payload of TCP frames goes to page-pool netmem when header
 * split is on and the frame is longer than hds-thresh.
 */
static void dsim_rx_frame(struct dsim_rq *rq, const struct dsim_wire *w,
			  const u8 *hdr, unsigned int hlen,
			  unsigned int poff, unsigned int plen)
{
	struct dsim_priv *priv = rq->priv;
	const struct dsim_flow *fl = &w->fl;
	struct sk_buff *skb;
	int cpos = -1;
	bool split;
	int err;

	if (fl->tcp)
		cpos = dsim_fault_corrupt_pos(priv, fl,
					      (const struct tcphdr *)(hdr + fl->l4off),
					      plen);
	if (dsim_fault_drop(priv)) {
		dsim_stats_inc(&rq->stats, DSIM_DROPS);
		return;
	}

	split = fl->tcp && plen && READ_ONCE(priv->hds) &&
		hlen + plen > READ_ONCE(priv->hds_thresh) && rq->pp;
	skb = napi_alloc_skb(&rq->napi, split ? hlen : hlen + plen);
	if (!skb) {
		dsim_stats_inc(&rq->stats, DSIM_ALLOC_FAIL);
		return;
	}
	skb_put_data(skb, hdr, hlen);
	if (split)
		err = dsim_rx_payload_netmem(rq, w, skb, poff, plen, cpos);
	else
		err = dsim_rx_payload_linear(rq, w, skb, poff, plen, cpos);
	if (err) {
		dsim_stats_inc(&rq->stats, DSIM_DROPS);
		kfree_skb(skb);
		return;
	}
	dsim_rx_deliver(rq, w, skb);
}

/* A frame that is not TCP segmentation offload: one frame out. */
static int dsim_rx_single(struct dsim_rq *rq, const struct dsim_wire *w)
{
	u8 hdr[DSIM_MAX_HLEN];
	unsigned int hlen = w->fl.hlen;

	if (!w->fl.tcp) {
		if (!skb_frags_readable(w->skb))
			return -EFAULT;
		/* non-TCP: everything is "header" (never split) */
		hlen = min_t(unsigned int, w->skb->len, sizeof(hdr));
	}
	if (hlen > sizeof(hdr) || dsim_src_copy(w->txp, w->skb, 0, hdr, hlen))
		return -EFAULT;
	dsim_rx_frame(rq, w, hdr, hlen, hlen, w->skb->len - hlen);
	return 1;
}

/* TSO: cut the payload into MSS-sized frames as the NIC would. */
static int dsim_rx_tso(struct dsim_rq *rq, const struct dsim_wire *w)
{
	const struct dsim_flow *fl = &w->fl;
	unsigned int mss = skb_shinfo(w->skb)->gso_size;
	unsigned int payload = w->skb->len - fl->hlen;
	u8 hdr[DSIM_MAX_HLEN], seg[DSIM_MAX_HLEN];
	unsigned int nsegs, i;

	if (!mss || fl->hlen > sizeof(hdr) ||
	    dsim_src_copy(w->txp, w->skb, 0, hdr, fl->hlen))
		return -EFAULT;
	nsegs = DIV_ROUND_UP(payload, mss);
	for (i = 0; i < nsegs; i++) {
		unsigned int off = i * mss;
		unsigned int plen = min(mss, payload - off);

		memcpy(seg, hdr, fl->hlen);
		dsim_tso_fix_header(seg, fl, w->skb, i, plen, i == nsegs - 1);
		dsim_rx_frame(rq, w, seg, fl->hlen, fl->hlen + off, plen);
	}
	return nsegs;
}

/* Receive one transmitted skb (possibly a TSO super-frame): returns the
 * frames it made (NAPI budget), a dropped skb counting as one.
 */
static int dsim_rx_one(struct dsim_rq *rq, struct sk_buff *src)
{
	struct dsim_priv *priv = rq->priv;
	struct dsim_wire w = { .skb = src };
	int frames = -ENODEV;

	rcu_read_lock();
	w.txp = rcu_dereference(priv->peer);
	if (w.txp) {
		dsim_parse(src, &w.fl);
		w.hash = dsim_flow_hash(priv->key, &w.fl);
		if (w.fl.tcp && skb_is_gso(src))
			frames = dsim_rx_tso(rq, &w);
		else
			frames = dsim_rx_single(rq, &w);
	}
	rcu_read_unlock();
	if (frames < 0) {
		dsim_stats_inc(&rq->stats, DSIM_DROPS);
		return 1;
	}
	return frames;
}

int dsim_poll(struct napi_struct *napi, int budget)
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
