// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim steering: parse a frame (Ethernet, IPv4/IPv6 with extension
 * headers skipped, TCP or UDP) and pick the RX queue it lands on, as the
 * NIC's classifier would: the first matching ntuple rule in location order
 * when ntuple is on (a drop rule drops; a rule with an RSS context adds the
 * context's choice to its queue), else RSS: a Toeplitz hash (Microsoft RSS,
 * 40-byte key) over addresses and ports into the 128-entry indirection
 * table.  The tables themselves are configured through ethtool.c.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/dsfield.h>

/* ------------------------------------------------------------------ */
/* parsing                                                             */

/* Each step returns the offset of the next header, or 0 to stop there. */
static unsigned int dsim_parse_ipv4(const struct sk_buff *skb, unsigned int off,
				    struct dsim_flow *fl)
{
	const struct iphdr *iph;
	struct iphdr _iph;

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
	return off + iph->ihl * 4;
}

static unsigned int dsim_parse_ipv6(const struct sk_buff *skb, unsigned int off,
				    struct dsim_flow *fl)
{
	const struct ipv6hdr *ip6;
	struct ipv6hdr _ip6;
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
	return l4;
}

static void dsim_parse_l4(const struct sk_buff *skb, unsigned int off,
			  struct dsim_flow *fl)
{
	fl->l4off = off;
	if (fl->l4proto == IPPROTO_TCP) {
		const struct tcphdr *th;
		struct tcphdr _th;

		th = skb_header_pointer(skb, off, sizeof(_th), &_th);
		if (!th || th->doff < 5)
			return;
		fl->sport = th->source;
		fl->dport = th->dest;
		fl->l4 = true;
		fl->hlen = off + th->doff * 4;
		fl->tcp = fl->hlen <= skb->len && fl->hlen <= DSIM_MAX_HLEN;
	} else if (fl->l4proto == IPPROTO_UDP) {
		const struct udphdr *uh;
		struct udphdr _uh;

		uh = skb_header_pointer(skb, off, sizeof(_uh), &_uh);
		if (!uh)
			return;
		fl->sport = uh->source;
		fl->dport = uh->dest;
		fl->l4 = true;
		fl->hlen = off + sizeof(*uh);
	}
}

void dsim_parse(const struct sk_buff *skb, struct dsim_flow *fl)
{
	const struct ethhdr *eth;
	unsigned int off = 0;

	memset(fl, 0, sizeof(*fl));
	if (skb_headlen(skb) < ETH_HLEN)
		return;
	eth = (const struct ethhdr *)skb->data;
	fl->l3off = ETH_HLEN;
	if (eth->h_proto == htons(ETH_P_IP))
		off = dsim_parse_ipv4(skb, ETH_HLEN, fl);
	else if (eth->h_proto == htons(ETH_P_IPV6))
		off = dsim_parse_ipv6(skb, ETH_HLEN, fl);
	if (off)
		dsim_parse_l4(skb, off, fl);
}

/* ------------------------------------------------------------------ */
/* RSS                                                                 */

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

u32 dsim_flow_hash(const u8 *key, const struct dsim_flow *fl)
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

/* The default indirection table of @size entries: queues 0..@nqueues-1
 * round robin. */
void dsim_fill_indir(u32 *indir, unsigned int size, unsigned int nqueues)
{
	unsigned int i;

	for (i = 0; i < size; i++)
		indir[i] = ethtool_rxfh_indir_default(i, nqueues);
}

/* ------------------------------------------------------------------ */
/* ntuple rules                                                        */

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

/* Addresses (4 or 16 bytes, as the flow's family) and tos/traffic class. */
static bool dsim_match_ip(const struct dsim_flow *fl,
			  const void *src, const void *msrc,
			  const void *dst, const void *mdst, u8 tos, u8 mtos)
{
	unsigned int alen = fl->v6 ? 16 : 4;

	return dsim_mask_match(fl->saddr, src, msrc, alen) &&
	       dsim_mask_match(fl->daddr, dst, mdst, alen) &&
	       dsim_mask_match(&fl->tos, &tos, &mtos, 1);
}

static bool dsim_match_ports(const struct dsim_flow *fl, __be16 psrc, __be16 mpsrc,
			     __be16 pdst, __be16 mpdst)
{
	return dsim_mask_match(&fl->sport, &psrc, &mpsrc, 2) &&
	       dsim_mask_match(&fl->dport, &pdst, &mpdst, 2);
}

/* A tcp4/udp4/tcp6/udp6 rule: the family and protocol must be the flow's. */
static bool dsim_match_l4(const struct dsim_flow *fl, bool v6, u32 type, u32 tcp_type)
{
	return fl->v6 == v6 && fl->l4 &&
	       fl->l4proto == (type == tcp_type ? IPPROTO_TCP : IPPROTO_UDP);
}

static bool dsim_rule_match(const struct ethtool_rx_flow_spec *fs,
			    const struct dsim_flow *fl)
{
	u32 type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);
	const union ethtool_flow_union *v = &fs->h_u, *m = &fs->m_u;

	if (!fl->ip)
		return false;

	switch (type) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
		return dsim_match_l4(fl, false, type, TCP_V4_FLOW) &&
		       dsim_match_ip(fl, &v->tcp_ip4_spec.ip4src, &m->tcp_ip4_spec.ip4src,
				     &v->tcp_ip4_spec.ip4dst, &m->tcp_ip4_spec.ip4dst,
				     v->tcp_ip4_spec.tos, m->tcp_ip4_spec.tos) &&
		       dsim_match_ports(fl, v->tcp_ip4_spec.psrc, m->tcp_ip4_spec.psrc,
					v->tcp_ip4_spec.pdst, m->tcp_ip4_spec.pdst);
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
		return dsim_match_l4(fl, true, type, TCP_V6_FLOW) &&
		       dsim_match_ip(fl, v->tcp_ip6_spec.ip6src, m->tcp_ip6_spec.ip6src,
				     v->tcp_ip6_spec.ip6dst, m->tcp_ip6_spec.ip6dst,
				     v->tcp_ip6_spec.tclass, m->tcp_ip6_spec.tclass) &&
		       dsim_match_ports(fl, v->tcp_ip6_spec.psrc, m->tcp_ip6_spec.psrc,
					v->tcp_ip6_spec.pdst, m->tcp_ip6_spec.pdst);
	case IP_USER_FLOW:
		return !fl->v6 &&
		       dsim_match_ip(fl, &v->usr_ip4_spec.ip4src, &m->usr_ip4_spec.ip4src,
				     &v->usr_ip4_spec.ip4dst, &m->usr_ip4_spec.ip4dst,
				     v->usr_ip4_spec.tos, m->usr_ip4_spec.tos) &&
		       dsim_mask_match(&fl->l4proto, &v->usr_ip4_spec.proto,
				       &m->usr_ip4_spec.proto, 1);
	case IPV6_USER_FLOW:
		return fl->v6 &&
		       dsim_match_ip(fl, v->usr_ip6_spec.ip6src, m->usr_ip6_spec.ip6src,
				     v->usr_ip6_spec.ip6dst, m->usr_ip6_spec.ip6dst,
				     v->usr_ip6_spec.tclass, m->usr_ip6_spec.tclass) &&
		       dsim_mask_match(&fl->l4proto, &v->usr_ip6_spec.l4_proto,
				       &m->usr_ip6_spec.l4_proto, 1);
	}
	return false;
}

/* The queue the first matching rule picks (-1: drop); false when no rule
 * matches.  In location order, but with mlx5 rules matching more fields
 * first.  Called with cfg_lock held.
 */
static bool dsim_rule_queue(struct dsim_priv *rx, const struct dsim_flow *fl,
			    u32 hash, int *q)
{
	const struct dsim_rule *r = NULL;
	unsigned int i, seen = 0;
	const u32 *indir = rx->indir;

	for (i = 0; i < rx->max_rules && seen < rx->nrules; i++) {
		const struct dsim_rule *c = &rx->rules[i];

		if (!c->used)
			continue;
		seen++;
		if (!dsim_rule_match(&c->fs, fl) || (r && c->prio <= r->prio))
			continue;
		r = c;
		if (!r->prio)
			break;
	}
	if (r) {
		if (r->fs.ring_cookie == RX_CLS_FLOW_DISC) {
			*q = -1;
			return true;
		}
		*q = ethtool_get_flow_spec_ring(r->fs.ring_cookie);
		if (r->fs.flow_type & FLOW_RSS) {
			if (r->rss_ctx && r->rss_ctx < rx->max_ctx &&
			    rx->ctx_used[r->rss_ctx])
				indir = rx->ctx_indir[r->rss_ctx];
			*q += indir[hash % rx->indir_size];
		}
		return true;
	}
	return false;
}

/* Pick the RX queue of @rx for a frame; -1 means drop. Called with BH off. */
int dsim_steer(struct dsim_priv *rx, const struct sk_buff *skb)
{
	struct dsim_flow fl;
	u32 hash;
	int q;

	dsim_parse(skb, &fl);
	hash = dsim_flow_hash(rx->key, &fl);

	spin_lock(&rx->cfg_lock);
	/* mlx5: ethtool rules steer whatever the feature (aRFS) says */
	if (!rx->nrules ||
	    (!(rx->dev->features & NETIF_F_NTUPLE) && dsim_prof->id != DSIM_PROF_MLX5) ||
	    !dsim_rule_queue(rx, &fl, hash, &q))
		q = rx->indir[hash % rx->indir_size];
	spin_unlock(&rx->cfg_lock);
	if (q >= (int)rx->dev->real_num_rx_queues)
		q = 0;
	return q;
}
