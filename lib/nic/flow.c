// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Flow text: devmemtcp_flow_parse() turns the ethtool -N words ("tcp4
 * dst-ip 10.0.0.2/24 dst-port 5201 queue 1") into a struct devmemtcp_flow.
 * It has no object to keep a message on, so a refusal's message is the
 * calling thread's (dmt_err_thread(), read with devmemtcp_ctx_errmsg(NULL)).
 * Part of the NIC layer's input; it calls only the shared helpers.  Below
 * it, a flow as an ntuple rule: the ethtool_rx_flow_spec of a flow, the
 * comparison of two specs, a spec's text for messages, and whether two
 * specs can match one packet (dmt_spec_overlap) (pure).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/internal.h"
#include "ethtool.h"
#include "nic.h"

/* The words, each at most once; a bit per word in struct flow_text.seen. */
enum flow_word { W_TCP4, W_TCP6, W_SRC_IP, W_DST_IP, W_SRC_PORT, W_DST_PORT, W_QUEUE };

static const char *const words[] = {
	[W_TCP4] = "tcp4", [W_TCP6] = "tcp6", [W_SRC_IP] = "src-ip",
	[W_DST_IP] = "dst-ip", [W_SRC_PORT] = "src-port",
	[W_DST_PORT] = "dst-port", [W_QUEUE] = "queue",
};

struct flow_text {
	const char *text;	/* as given, for messages */
	struct devmemtcp_flow f;
	unsigned int seen;	/* 1 << enum flow_word */
	const char *fam_word;	/* what set f.family: "tcp4", "dst-ip ADDR"... */
	char fam_why[INET6_ADDRSTRLEN + 16];
};

static int __attribute__((format(printf, 2, 3)))
refuse(const struct flow_text *p, const char *fmt, ...)
{
	struct dmt_err *err = dmt_err_thread();
	va_list ap;
	int n;

	n = snprintf(err->msg, sizeof(err->msg), "flow \"%.200s\": ", p->text);
	va_start(ap, fmt);
	vsnprintf(err->msg + n, sizeof(err->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	err->code = -EINVAL;
	return dmt_err_log(NULL, err);
}

static const char *fam_name(int fam)
{
	return fam == AF_INET ? "IPv4" : "IPv6";
}

/* The family a word implies; refused when it disagrees with an earlier
 * word.  why: "tcp4", or "dst-ip ::1". */
static int set_family(struct flow_text *p, int fam, const char *why)
{
	if (p->f.family && p->f.family != fam) {
		if (!strncmp(why, "tcp", 3))
			return refuse(p, "%s but %s is %s", why, p->fam_why,
				      fam_name(p->f.family));
		return refuse(p, "%s is %s but the flow is %s", why,
			      fam_name(fam), fam_name(p->f.family));
	}
	if (!p->f.family)
		snprintf(p->fam_why, sizeof(p->fam_why), "%s", why);
	p->f.family = fam;
	return 0;
}

static int parse_addr(struct flow_text *p, enum flow_word w, const char *s)
{
	char buf[INET6_ADDRSTRLEN + 8], why[sizeof(p->fam_why)], *slash;
	uint8_t *addr = w == W_SRC_IP ? p->f.src_addr : p->f.dst_addr;
	uint8_t *mask = w == W_SRC_IP ? p->f.src_mask : p->f.dst_mask;
	int fam, plen, alen;

	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (strlen(s) < sizeof(buf) && inet_pton(AF_INET, buf, addr) == 1)
		fam = AF_INET;
	else if (strlen(s) < sizeof(buf) && inet_pton(AF_INET6, buf, addr) == 1)
		fam = AF_INET6;
	else
		return refuse(p, "\"%.60s\" is not an IPv4 or IPv6 address", s);
	alen = fam == AF_INET ? 32 : 128;
	plen = alen;
	if (slash) {
		char *end;
		long v = strtol(slash, &end, 10);

		if (end == slash || *end || v < 0 || v > alen)
			return refuse(p, "prefix length \"%.20s\" of %s is not 1..%d",
				      slash, buf, alen);
		if (v == 0)
			return refuse(p, "%s %s/0 matches every address: leave %s out, or give a prefix length of 1 or more",
				      words[w], buf, words[w]);
		plen = (int)v;
	}
	snprintf(why, sizeof(why), "%s %s", words[w], buf);
	if (set_family(p, fam, why))
		return -EINVAL;
	memset(mask, 0, 16);
	for (int i = 0; i < plen; i++)
		mask[i / 8] |= (uint8_t)(0x80u >> (i % 8));
	for (int i = 0; i < 16; i++)
		addr[i] &= mask[i];
	return 0;
}

/* A decimal number in [min, max]: 0 with *v set, or -1. */
static int parse_num(const char *s, unsigned long min, unsigned long max,
		    unsigned long *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	*v = strtoul(s, &end, 10);
	return *end || *v < min || *v > max ? -1 : 0;
}

static int parse_port(struct flow_text *p, enum flow_word w, const char *s)
{
	unsigned long v;

	if (parse_num(s, 1, 65535, &v))
		return refuse(p, "port \"%.20s\" is not 1..65535", s);
	if (w == W_SRC_PORT) {
		p->f.src_port = (uint16_t)v;
		p->f.src_port_mask = 0xffff;
	} else {
		p->f.dst_port = (uint16_t)v;
		p->f.dst_port_mask = 0xffff;
	}
	return 0;
}

static int parse_word(struct flow_text *p, char **save)
{
	const char *t = strtok_r(NULL, " \t", save), *arg;
	enum flow_word w;

	for (w = 0; w < ARRAY_SIZE(words); w++)
		if (!strcmp(t, words[w]))
			break;
	if (w == ARRAY_SIZE(words))
		return refuse(p, "unknown word \"%.40s\": use tcp4, tcp6, src-ip, dst-ip, src-port, dst-port or queue",
			      t);
	if (p->seen & (1u << w))
		return refuse(p, "%s is given twice: give each word once", words[w]);
	p->seen |= 1u << w;
	if (w == W_TCP4 || w == W_TCP6) {
		if (p->seen & (1u << W_TCP4) && p->seen & (1u << W_TCP6))
			return refuse(p, "tcp4 and tcp6 both given: give one");
		return set_family(p, w == W_TCP4 ? AF_INET : AF_INET6, words[w]);
	}
	arg = strtok_r(NULL, " \t", save);
	if (!arg)
		return refuse(p, "%s needs a value", words[w]);
	if (w == W_SRC_IP || w == W_DST_IP)
		return parse_addr(p, w, arg);
	if (w == W_SRC_PORT || w == W_DST_PORT)
		return parse_port(p, w, arg);
	{
		unsigned long v;

		if (parse_num(arg, 0, 4095, &v))
			return refuse(p, "queue \"%.20s\" is not 0..4095", arg);
		p->f.queue = (uint32_t)v;
		p->f.flags |= DEVMEMTCP_FLOW_QUEUE;
	}
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_flow_parse(const char *text,
					  struct devmemtcp_flow *flow)
{
	DMT_KEEP_ERRNO;
	const unsigned int match = 1u << W_SRC_IP | 1u << W_DST_IP |
				   1u << W_SRC_PORT | 1u << W_DST_PORT;
	struct flow_text p = { .text = text };
	char *copy, *save;
	int err = 0;

	if (!text || !flow)
		return dmt_err(NULL, dmt_err_thread(), -EINVAL,
			       "devmemtcp_flow_parse: text or flow is NULL");
	copy = dmt_strdup(text);
	if (!copy)
		return dmt_err(NULL, dmt_err_thread(), -ENOMEM,
			       "devmemtcp_flow_parse: out of memory");
	/* strtok_r(NULL, ...) goes on from save: start it at the copy */
	for (save = copy + strspn(copy, " \t"); !err && *save;
	     save += strspn(save, " \t"))
		err = parse_word(&p, &save);
	free(copy);
	if (!err && !(p.seen & match))
		err = refuse(&p, "no match field: give at least one of src-ip, dst-ip, src-port, dst-port");
	if (err)
		return err;
	if (!p.f.family)
		p.f.family = AF_INET;	/* ports only: IPv4, as ethtool's tcp4 */
	*flow = p.f;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* flows                                                                   */

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int dmt_flow_to_spec(const struct devmemtcp_flow *flow, uint32_t queue,
		     bool use_ctx, struct ethtool_rx_flow_spec *fs)
{
	memset(fs, 0, sizeof(*fs));
	if (flow->family == AF_INET) {
		struct ethtool_tcpip4_spec *h = &fs->h_u.tcp_ip4_spec;
		struct ethtool_tcpip4_spec *m = &fs->m_u.tcp_ip4_spec;

		fs->flow_type = TCP_V4_FLOW;
		memcpy(&h->ip4src, flow->src_addr, 4);
		memcpy(&m->ip4src, flow->src_mask, 4);
		memcpy(&h->ip4dst, flow->dst_addr, 4);
		memcpy(&m->ip4dst, flow->dst_mask, 4);
		h->ip4src &= m->ip4src;
		h->ip4dst &= m->ip4dst;
		h->psrc = htons(flow->src_port & flow->src_port_mask);
		m->psrc = htons(flow->src_port_mask);
		h->pdst = htons(flow->dst_port & flow->dst_port_mask);
		m->pdst = htons(flow->dst_port_mask);
		if (!m->ip4src && !m->ip4dst && !m->psrc && !m->pdst)
			return -EINVAL;
	} else if (flow->family == AF_INET6) {
		struct ethtool_tcpip6_spec *h = &fs->h_u.tcp_ip6_spec;
		struct ethtool_tcpip6_spec *m = &fs->m_u.tcp_ip6_spec;

		fs->flow_type = TCP_V6_FLOW;
		memcpy(h->ip6src, flow->src_addr, 16);
		memcpy(m->ip6src, flow->src_mask, 16);
		memcpy(h->ip6dst, flow->dst_addr, 16);
		memcpy(m->ip6dst, flow->dst_mask, 16);
		for (int i = 0; i < 4; i++) {
			h->ip6src[i] &= m->ip6src[i];
			h->ip6dst[i] &= m->ip6dst[i];
		}
		h->psrc = htons(flow->src_port & flow->src_port_mask);
		m->psrc = htons(flow->src_port_mask);
		h->pdst = htons(flow->dst_port & flow->dst_port_mask);
		m->pdst = htons(flow->dst_port_mask);
		if (all_zero(flow->src_mask, 16) && all_zero(flow->dst_mask, 16) &&
		    !m->psrc && !m->pdst)
			return -EINVAL;
	} else {
		return -EAFNOSUPPORT;
	}
	if (use_ctx) {
		fs->flow_type |= FLOW_RSS;
		fs->ring_cookie = 0;
	} else {
		fs->ring_cookie = queue;
	}
	fs->location = RX_CLS_LOC_ANY;
	return 0;
}

bool dmt_spec_equal(const struct ethtool_rx_flow_spec *a,
		    const struct ethtool_rx_flow_spec *b)
{
	return a->flow_type == b->flow_type &&
	       memcmp(&a->h_u, &b->h_u, sizeof(a->h_u)) == 0 &&
	       memcmp(&a->m_u, &b->m_u, sizeof(a->m_u)) == 0 &&
	       a->ring_cookie == b->ring_cookie;
}

static void addr_str(int family, const void *addr, const void *mask, char *buf,
		     size_t len)
{
	size_t alen = family == AF_INET ? 4 : 16;
	const uint8_t *m = mask;
	char a[INET6_ADDRSTRLEN];
	int bits = 0;
	bool prefix = true;

	if (all_zero(mask, alen)) {
		snprintf(buf, len, "*");
		return;
	}
	/* A prefix: leading ones, then only zeros. */
	for (size_t i = 0; i < alen * 8; i++) {
		bool set = m[i / 8] & (0x80u >> (i % 8));

		if (set && bits == (int)i)
			bits++;
		else if (set)
			prefix = false;
	}
	inet_ntop(family, addr, a, sizeof(a));
	if (prefix && bits == (int)alen * 8)
		snprintf(buf, len, family == AF_INET6 ? "[%s]" : "%s", a);
	else if (prefix)
		snprintf(buf, len, family == AF_INET6 ? "[%s/%d]" : "%s/%d", a,
			 bits);
	else
		snprintf(buf, len, "%s/mask", a);
}

static void port_str(uint16_t port, uint16_t mask, char *buf, size_t len)
{
	if (!mask)
		snprintf(buf, len, "*");
	else if (mask == 0xffff)
		snprintf(buf, len, "%u", ntohs(port));
	else
		snprintf(buf, len, "%u/0x%x", ntohs(port), ntohs(mask));
}

void dmt_spec_str(const struct ethtool_rx_flow_spec *fs, uint32_t rss_context,
		  char *buf, size_t len)
{
	char s[64], d[64], sp[16], dp[16];
	uint32_t type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);

	if (type == TCP_V4_FLOW) {
		const struct ethtool_tcpip4_spec *h = &fs->h_u.tcp_ip4_spec;
		const struct ethtool_tcpip4_spec *m = &fs->m_u.tcp_ip4_spec;

		addr_str(AF_INET, &h->ip4src, &m->ip4src, s, sizeof(s));
		addr_str(AF_INET, &h->ip4dst, &m->ip4dst, d, sizeof(d));
		port_str(h->psrc, m->psrc, sp, sizeof(sp));
		port_str(h->pdst, m->pdst, dp, sizeof(dp));
	} else if (type == TCP_V6_FLOW) {
		const struct ethtool_tcpip6_spec *h = &fs->h_u.tcp_ip6_spec;
		const struct ethtool_tcpip6_spec *m = &fs->m_u.tcp_ip6_spec;

		addr_str(AF_INET6, h->ip6src, m->ip6src, s, sizeof(s));
		addr_str(AF_INET6, h->ip6dst, m->ip6dst, d, sizeof(d));
		port_str(h->psrc, m->psrc, sp, sizeof(sp));
		port_str(h->pdst, m->pdst, dp, sizeof(dp));
	} else {
		snprintf(buf, len, "flow-type 0x%x", fs->flow_type);
		return;
	}
	if (fs->flow_type & FLOW_RSS)
		snprintf(buf, len, "tcp%c %s:%s -> %s:%s context %u",
			 type == TCP_V4_FLOW ? '4' : '6', s, sp, d, dp,
			 rss_context);
	else
		snprintf(buf, len, "tcp%c %s:%s -> %s:%s queue %llu",
			 type == TCP_V4_FLOW ? '4' : '6', s, sp, d, dp,
			 (unsigned long long)fs->ring_cookie);
}

/* ---------------------------------------------------------------------- */
/* flows                                                                   */

/* Some value matches both (value a under mask ma, b under mb)? */
static bool fields_meet(const void *a, const void *ma, const void *b,
			const void *mb, size_t n)
{
	const uint8_t *x = a, *mx = ma, *y = b, *my = mb;

	for (size_t i = 0; i < n; i++)
		if ((x[i] ^ y[i]) & mx[i] & my[i])
			return false;
	return true;
}

#define MEET(a, ma, b, mb) fields_meet(&(a), &(ma), &(b), &(mb), sizeof(a))

static uint32_t base_type(const struct ethtool_rx_flow_spec *fs)
{
	return fs->flow_type & ~(uint32_t)(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);
}

/* The L4 part of a TCP match (ports, protocol TCP) against an IP rule's
 * protocol and first four bytes of the L4 header (where the ports are). */
static bool l4_meets(const __be16 *psrc, const __be16 *pdst, const __be16 *mpsrc,
		     const __be16 *mpdst, const uint8_t *proto, const uint8_t *mproto,
		     const __be32 *l4, const __be32 *ml4)
{
	uint8_t ports[4], pmask[4], tcp = IPPROTO_TCP, all = 0xff;

	memcpy(ports, psrc, 2);
	memcpy(ports + 2, pdst, 2);
	memcpy(pmask, mpsrc, 2);
	memcpy(pmask + 2, mpdst, 2);
	return fields_meet(&tcp, &all, proto, mproto, 1) &&
	       fields_meet(ports, pmask, l4, ml4, 4);
}

/* tcp (a) against an IP rule (b) of the same family. */
static bool tcp4_meets_ip4(const struct ethtool_rx_flow_spec *a,
			   const struct ethtool_rx_flow_spec *b)
{
	const struct ethtool_tcpip4_spec *h = &a->h_u.tcp_ip4_spec, *m = &a->m_u.tcp_ip4_spec;
	const struct ethtool_usrip4_spec *u = &b->h_u.usr_ip4_spec, *um = &b->m_u.usr_ip4_spec;

	return MEET(h->ip4src, m->ip4src, u->ip4src, um->ip4src) &&
	       MEET(h->ip4dst, m->ip4dst, u->ip4dst, um->ip4dst) &&
	       MEET(h->tos, m->tos, u->tos, um->tos) &&
	       l4_meets(&h->psrc, &h->pdst, &m->psrc, &m->pdst, &u->proto,
			&um->proto, &u->l4_4_bytes, &um->l4_4_bytes);
}

static bool tcp6_meets_ip6(const struct ethtool_rx_flow_spec *a,
			   const struct ethtool_rx_flow_spec *b)
{
	const struct ethtool_tcpip6_spec *h = &a->h_u.tcp_ip6_spec, *m = &a->m_u.tcp_ip6_spec;
	const struct ethtool_usrip6_spec *u = &b->h_u.usr_ip6_spec, *um = &b->m_u.usr_ip6_spec;

	return MEET(h->ip6src, m->ip6src, u->ip6src, um->ip6src) &&
	       MEET(h->ip6dst, m->ip6dst, u->ip6dst, um->ip6dst) &&
	       MEET(h->tclass, m->tclass, u->tclass, um->tclass) &&
	       l4_meets(&h->psrc, &h->pdst, &m->psrc, &m->pdst, &u->l4_proto,
			&um->l4_proto, &u->l4_4_bytes, &um->l4_4_bytes);
}

bool dmt_spec_overlap(const struct ethtool_rx_flow_spec *a,
		      const struct ethtool_rx_flow_spec *b)
{
	uint32_t ta = base_type(a), tb = base_type(b);

	if (ta == TCP_V4_FLOW && tb == TCP_V4_FLOW) {
		const struct ethtool_tcpip4_spec *x = &a->h_u.tcp_ip4_spec, *mx = &a->m_u.tcp_ip4_spec;
		const struct ethtool_tcpip4_spec *y = &b->h_u.tcp_ip4_spec, *my = &b->m_u.tcp_ip4_spec;

		return MEET(x->ip4src, mx->ip4src, y->ip4src, my->ip4src) &&
		       MEET(x->ip4dst, mx->ip4dst, y->ip4dst, my->ip4dst) &&
		       MEET(x->psrc, mx->psrc, y->psrc, my->psrc) &&
		       MEET(x->pdst, mx->pdst, y->pdst, my->pdst) &&
		       MEET(x->tos, mx->tos, y->tos, my->tos);
	}
	if (ta == TCP_V6_FLOW && tb == TCP_V6_FLOW) {
		const struct ethtool_tcpip6_spec *x = &a->h_u.tcp_ip6_spec, *mx = &a->m_u.tcp_ip6_spec;
		const struct ethtool_tcpip6_spec *y = &b->h_u.tcp_ip6_spec, *my = &b->m_u.tcp_ip6_spec;

		return MEET(x->ip6src, mx->ip6src, y->ip6src, my->ip6src) &&
		       MEET(x->ip6dst, mx->ip6dst, y->ip6dst, my->ip6dst) &&
		       MEET(x->psrc, mx->psrc, y->psrc, my->psrc) &&
		       MEET(x->pdst, mx->pdst, y->pdst, my->pdst) &&
		       MEET(x->tclass, mx->tclass, y->tclass, my->tclass);
	}
	if (ta == TCP_V4_FLOW && tb == IP_USER_FLOW)
		return tcp4_meets_ip4(a, b);
	if (tb == TCP_V4_FLOW && ta == IP_USER_FLOW)
		return tcp4_meets_ip4(b, a);
	if (ta == TCP_V6_FLOW && tb == IPV6_USER_FLOW)
		return tcp6_meets_ip6(a, b);
	if (tb == TCP_V6_FLOW && ta == IPV6_USER_FLOW)
		return tcp6_meets_ip6(b, a);
	return false;
}
