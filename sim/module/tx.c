// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim transmit side: ndo_start_xmit puts a frame "on the wire" (the
 * RX backlog of the peer's queue that steering picks) and holds the TX
 * queue back while that backlog is full; the peer's NAPI wakes it.  The
 * transmitted skb is read the way the NIC's DMA engine would read it:
 * devmem TX frags (unreadable net_iovs) through the TX binding's DMA
 * address.  TSO super-frames get their headers fixed up per segment here.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/ip.h>

/* Copy @n bytes at @foff of @frag: a net_iov through its DMA address
 * (page by page: an IOMMU maps each on its own), a page frag (which may
 * span several pages of a compound page) through kmap.
 */
static int dsim_frag_copy(struct dsim_priv *txp, const skb_frag_t *frag,
			  unsigned int foff, u8 *dst, unsigned int n)
{
	netmem_ref nm = skb_frag_netmem(frag);
	unsigned int poff = skb_frag_off(frag) + foff;
	struct page *page;
	unsigned int c;
	const u8 *src;

	if (netmem_is_net_iov(nm)) {
		dma_addr_t dma = netmem_get_dma_addr(nm) + poff;

		for (; n; n -= c, dma += c, dst += c) {
			src = dsim_dma_va(txp, dma, n, &c);
			if (!src)
				return -EFAULT;
			memcpy(dst, src, c);
		}
		return 0;
	}
	page = skb_frag_page(frag);
	while (n) {
		void *va = kmap_local_page(page + (poff >> PAGE_SHIFT));

		c = min_t(unsigned int, n, PAGE_SIZE - offset_in_page(poff));
		memcpy(dst, va + offset_in_page(poff), c);
		kunmap_local(va);
		dst += c;
		poff += c;
		n -= c;
	}
	return 0;
}

/* Copy @len bytes at @off of the transmitted skb into @dst.  Payload of an
 * unreadable (devmem TX) skb is read through the net_iov's DMA address, as
 * the NIC's DMA engine would.
 */
int dsim_src_copy(struct dsim_priv *txp, const struct sk_buff *skb,
		  unsigned int off, void *dst, unsigned int len)
{
	const struct skb_shared_info *sh = skb_shinfo(skb);
	unsigned int pos, i, n;

	if (likely(skb_frags_readable(skb)))
		return skb_copy_bits(skb, off, dst, len);
	if (skb_has_frag_list(skb))
		return -EFAULT;

	pos = skb_headlen(skb);
	if (off < pos) {
		n = min(len, pos - off);
		memcpy(dst, skb->data + off, n);
		off += n;
		dst += n;
		len -= n;
	}
	for (i = 0; i < sh->nr_frags && len; i++) {
		const skb_frag_t *frag = &sh->frags[i];
		unsigned int end = pos + skb_frag_size(frag);

		if (off < end) {
			n = min(len, end - off);
			if (dsim_frag_copy(txp, frag, off - pos, dst, n))
				return -EFAULT;
			off += n;
			dst += n;
			len -= n;
		}
		pos = end;
	}
	return len ? -EFAULT : 0;
}

/* Segment @i of a TCP frame cut on the wire, @plen payload bytes from
 * payload offset @off, @last or not: @seg holds a copy of the frame's
 * headers; fix sequence number, IP length/ID/checksum and the flags only
 * the first or last segment keeps.
 */
void dsim_tso_fix_header(u8 *seg, const struct dsim_flow *fl,
			 const struct sk_buff *src, unsigned int i,
			 unsigned int off, unsigned int plen, bool last)
{
	const struct skb_shared_info *sh = skb_shinfo(src);
	struct tcphdr *th = (struct tcphdr *)(seg + fl->l4off);

	if (!fl->v6) {
		struct iphdr *iph = (struct iphdr *)(seg + fl->l3off);

		iph->tot_len = htons(fl->hlen - fl->l3off + plen);
		if (!(sh->gso_type & SKB_GSO_TCP_FIXEDID))
			iph->id = htons(ntohs(iph->id) + i);
		iph->check = 0;
		iph->check = ip_fast_csum((u8 *)iph, iph->ihl);
	} else {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(seg + fl->l3off);

		ip6->payload_len = htons(fl->hlen - fl->l3off - sizeof(*ip6) + plen);
	}
	th->seq = htonl(ntohl(th->seq) + off);
	if (i)
		th->cwr = 0;
	if (!last) {
		th->fin = 0;
		th->psh = 0;
	}
}

void dsim_wake_peer_txqs(struct dsim_priv *priv)
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

/* Put @skb on the wire to @peer; false when it must be dropped. */
static bool dsim_tx_to_peer(struct dsim_priv *peer, struct sk_buff *skb,
			    struct netdev_queue *txq)
{
	struct dsim_rq *rq;
	int q;

	if (!netif_running(peer->dev) || skb->len < ETH_HLEN)
		return false;
	q = dsim_steer(peer, skb);
	if (q < 0)
		return false;
	/* a queue being restarted keeps its backlog: it is processed when
	 * the queue starts again with its new memory
	 */
	rq = &peer->rq[q];
	if (skb_queue_len(&rq->backlog) >= 2 * DSIM_BACKLOG)
		return false;

	/* the frame is now "on the wire": keep it until the peer DMAs it */
	skb_queue_tail(&rq->backlog, skb);
	if (skb_queue_len(&rq->backlog) >= DSIM_BACKLOG) {
		netif_tx_stop_queue(txq);
		/* the peer may have drained meanwhile */
		if (skb_queue_len(&rq->backlog) < DSIM_BACKLOG)
			netif_tx_wake_queue(txq);
	}
	napi_schedule(&rq->napi);
	return true;
}

netdev_tx_t dsim_start_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct dsim_priv *priv = netdev_priv(dev);
	u16 qid = skb_get_queue_mapping(skb);
	struct dsim_tq *tq = &priv->tq[qid < priv->nq ? qid : 0];
	struct netdev_queue *txq = netdev_get_tx_queue(dev, qid);
	unsigned int len = skb->len;
	struct dsim_priv *peer;
	bool sent;

	rcu_read_lock();
	peer = rcu_dereference(priv->peer);
	sent = peer && dsim_tx_to_peer(peer, skb, txq);
	rcu_read_unlock();

	if (sent) {
		dsim_stats_packet(&tq->stats, len);
	} else {
		dsim_stats_inc(&tq->stats, DSIM_DROPS);
		dev_kfree_skb_any(skb);
	}
	return NETDEV_TX_OK;
}
