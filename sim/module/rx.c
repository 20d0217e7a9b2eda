// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim receive path: an RX queue's NAPI takes the transmitted skbs
 * waiting in its backlog and writes each as the frames a NIC would DMA.
 * The TCP payload of a frame arrives in the segments the wire carries: a
 * TSO super-frame cut into MSS-sized ones, or, with rx_mix, pieces of 1
 * byte to one MSS.  With header split on, a TCP frame's headers go to the
 * skb's linear part and its payload to RX buffers of the queue's page pool
 * laid out as the module parameters say: a whole NIC page per buffer (the
 * default), fixed-size buffers several to a NIC page (rx_buf_size), or
 * payloads packed back to back (rx_pack); the last two through the page
 * pool's fragment API, each buffer its own skb frag holding its own
 * reference on the NIC page.  Every write goes through the buffer's DMA
 * address, translated by the parent's IOMMU when there is one (dev.c);
 * the CPU never touches a bound dma-buf otherwise.  Other frames are
 * copied whole into the linear part.  The fault knobs (debugfs.c) act
 * here, and freeing the source skb after it is "DMA'd" completes the
 * sender's MSG_ZEROCOPY.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/etherdevice.h>
#include <net/page_pool/helpers.h>

/* One RX buffer: where the NIC puts (part of) a frame's payload. */
struct dsim_rx_buf {
	netmem_ref nm;		/* the NIC page */
	unsigned int off;	/* of the buffer in the NIC page */
	unsigned int len;	/* payload bytes it holds */
	unsigned int truesize;
};

/*
 * The next buffer for up to @want payload bytes, as the layout says: a
 * whole NIC page (the default), a buffer of rx_buf_size bytes, or exactly
 * the bytes needed right after the previous payload (rx_pack).  The page
 * pool's fragment allocator moves to a fresh NIC page when the rest of the
 * current one is too small.
 */
static int dsim_rx_buf_get(struct dsim_rq *rq, unsigned int want,
			   struct dsim_rx_buf *b)
{
	const struct dsim_layout *lo = &rq->priv->layout;
	unsigned int psize = PAGE_SIZE << rq->page_order;
	gfp_t gfp = GFP_ATOMIC | __GFP_NOWARN;

	b->nm = 0;
	b->off = 0;
	if (lo->buf_size) {
		b->len = min(want, lo->buf_size);
		b->truesize = lo->buf_size;
	} else {
		b->len = min(want, psize);
		/* packed: the next payload starts at the profile's step
		 * (mlx5's strides, fbnic's 128 bytes) or right after */
		b->truesize = !lo->pack ? psize :
			      lo->align ? ALIGN(b->len, lo->align) : b->len;
	}
	if (!dsim_fault_alloc(rq->priv)) {
		if (lo->buf_size || lo->pack)
			b->nm = page_pool_alloc_frag_netmem(rq->pp, &b->off,
							    b->truesize, gfp);
		else
			b->nm = page_pool_alloc_netmems(rq->pp, gfp);
	}
	if (!b->nm) {
		dsim_stats_inc(&rq->stats, DSIM_ALLOC_FAIL);
		return -ENOMEM;
	}
	dsim_stats_inc(&rq->stats, DSIM_BUFS);
	if (!b->off)
		dsim_stats_inc(&rq->stats, DSIM_PAGES);
	return 0;
}

/* "DMA" the payload bytes at @poff of the source into @b, page by page of
 * its DMA address; the byte at @cpos of the buffer (if there) is the one
 * to corrupt.
 */
static int dsim_rx_dma(struct dsim_rq *rq, const struct dsim_wire *w,
		       const struct dsim_rx_buf *b, unsigned int poff, int cpos)
{
	dma_addr_t dma = page_pool_get_dma_addr_netmem(b->nm) + b->off;
	unsigned int done, n;
	u8 *va;

	for (done = 0; done < b->len; done += n) {
		va = dsim_dma_va(rq->priv, dma + done, b->len - done, &n);
		if (!va || dsim_src_copy(w->txp, w->skb, poff + done, va, n))
			return -EFAULT;
		if (cpos >= 0 && (unsigned int)cpos >= done &&
		    (unsigned int)cpos < done + n)
			dsim_fault_corrupt_apply(rq->priv, va + cpos - done);
	}
	return 0;
}

/* Header split: @plen payload bytes at @poff of the source into RX
 * buffers, one skb frag each; the byte at @cpos (if >= 0) is the one to
 * corrupt.  On error the caller frees the skb and with it the buffers.
 */
static int dsim_rx_payload_netmem(struct dsim_rq *rq, const struct dsim_wire *w,
				  struct sk_buff *skb, unsigned int poff,
				  unsigned int plen, int cpos)
{
	struct dsim_rx_buf b;
	int frag = 0, err;

	skb_mark_for_recycle(skb);
	while (plen) {
		if (frag >= MAX_SKB_FRAGS)
			return -EMSGSIZE;
		err = dsim_rx_buf_get(rq, plen, &b);
		if (err)
			return err;
		skb_add_rx_frag_netmem(skb, frag++, b.nm, b.off, b.len, b.truesize);
		err = dsim_rx_dma(rq, w, &b, poff, cpos);
		if (err)
			return err;
		cpos -= b.len;
		poff += b.len;
		plen -= b.len;
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

/* A frame other than TCP: copied whole, never split. */
static int dsim_rx_other(struct dsim_rq *rq, const struct dsim_wire *w)
{
	u8 hdr[DSIM_MAX_HLEN];
	unsigned int hlen = min_t(unsigned int, w->skb->len, sizeof(hdr));

	if (!skb_frags_readable(w->skb) ||
	    dsim_src_copy(w->txp, w->skb, 0, hdr, hlen))
		return -EFAULT;
	dsim_rx_frame(rq, w, hdr, hlen, hlen, w->skb->len - hlen);
	return 1;
}

/*
 * The TCP segments the wire carries for one transmitted frame: a TSO
 * super-frame cut into MSS-sized segments as the sender's NIC would, any
 * other frame as it is; with rx_mix each of those is cut shorter, to 1
 * byte up to its size, so payloads of mixed sizes arrive.  Returns the
 * frames made.
 */
static int dsim_rx_tcp(struct dsim_rq *rq, const struct dsim_wire *w)
{
	const struct dsim_flow *fl = &w->fl;
	unsigned int payload = w->skb->len - fl->hlen;
	unsigned int mss = skb_is_gso(w->skb) ? skb_shinfo(w->skb)->gso_size : payload;
	u8 hdr[DSIM_MAX_HLEN], seg[DSIM_MAX_HLEN];
	unsigned int off = 0, i = 0, plen;

	if (fl->hlen > sizeof(hdr) ||
	    dsim_src_copy(w->txp, w->skb, 0, hdr, fl->hlen))
		return -EFAULT;
	if (!payload) {
		dsim_rx_frame(rq, w, hdr, fl->hlen, fl->hlen, 0);
		return 1;
	}
	if (!mss)
		return -EFAULT;
	do {
		plen = min(mss, payload - off);
		if (rq->priv->layout.mix)
			plen = 1 + prandom_u32_state(&rq->mix) % plen;
		memcpy(seg, hdr, fl->hlen);
		dsim_tso_fix_header(seg, fl, w->skb, i, off, plen,
				    off + plen == payload);
		dsim_rx_frame(rq, w, seg, fl->hlen, fl->hlen + off, plen);
		off += plen;
		i++;
	} while (off < payload);
	return i;
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
		if (w.fl.tcp)
			frames = dsim_rx_tcp(rq, &w);
		else
			frames = dsim_rx_other(rq, &w);
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
