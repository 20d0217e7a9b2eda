// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The emulated NIC's receive path.  A TCP socket whose flow arrives on an
 * emulated NIC is steered as the sim steers it (the first matching ntuple
 * rule, else RSS: Toeplitz over the 4-tuple into the indirection table).
 * When its queue has a dma-buf bound, a devmem receive takes the bytes
 * waiting on the real socket as the wire would carry them (segments of
 * one MSS; with rx_mix, pieces of 1 byte to one MSS), gives each segment
 * RX buffers from the queue's page pool in the sim's layout (a NIC page
 * per buffer, fixed-size buffers several to a page, or payloads packed
 * back to back), receives the bytes straight into them (the dma-buf's
 * mapping) or into staging copied to GPU memory, and hands them out as
 * SCM_DEVMEM_DMABUF control messages with tokens, cut where the caller's
 * byte count or control buffer ends (the rest of a buffer comes next time
 * with a new token, as the kernel does).  A segment that finds no free
 * page waits (page-pool starvation, counted as rx-alloc-fail); a queue
 * without a dma-buf gives plain data.  SO_DEVMEM_DONTNEED returns tokens
 * as the kernel does; a closed socket gives back what it held.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "emu.h"
#include "uapi.h"

#define MAX_FD 65536
#define PULL_MAX (4u << 20)
#define MAX_PIECES 1024		/* IOV_MAX */
#define EMU_PLAIN 10000		/* arrive(): the queue has no dma-buf */
#define CM_SPACE CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))

struct pbuf {
	uint32_t binding, page, off, len, done;
};

struct esock {
	pthread_mutex_t lock;
	uint64_t ino;
	bool classified;
	int nic;		/* -1: not on an emulated NIC */
	struct emu_flow fl;
	uint32_t mss;
	int slot;		/* token table in the process file, -1: none yet */
	int last_q;
	uint64_t stream;	/* bytes taken from the real socket */
	uint32_t frame_left;	/* of the TSO frame on the wire */
	int64_t corrupt_at;	/* stream offset to flip, -1 */
	int err;		/* to report on the next receive */
	bool dead;		/* closed while a receive waited: it frees */
	struct pbuf pend[EMU_MAX_PENDING];
	uint32_t phead, pn;
};

static pthread_mutex_t es_lock = PTHREAD_MUTEX_INITIALIZER;
static struct esock *esocks[MAX_FD];

__thread struct emu_timing *emu_tls_timing;
static struct emu_timing timing;	/* the process's, under es_lock */

/* Exported for benchmarks (dlsym): this process's emulation cost. */
__attribute__((visibility("default"))) void devmemtcp_emu_timing(struct emu_timing *t);

void devmemtcp_emu_timing(struct emu_timing *t)
{
	pthread_mutex_lock(&es_lock);
	*t = timing;
	pthread_mutex_unlock(&es_lock);
}

void emu_timing_add(const struct emu_timing *t)
{
	pthread_mutex_lock(&es_lock);
	timing.recvs += t->recvs;
	timing.emu_ns += t->emu_ns;
	timing.copy_ns += t->copy_ns;
	timing.sys_ns += t->sys_ns;
	timing.wait_ns += t->wait_ns;
	timing.bytes += t->bytes;
	timing.copy_calls += t->copy_calls;
	timing.copy_xfers += t->copy_xfers;
	timing.copy_bytes += t->copy_bytes;
	pthread_mutex_unlock(&es_lock);
}

/* ---- steering --------------------------------------------------------------------- */

uint32_t emu_toeplitz(const uint8_t *key, const struct emu_flow *fl)
{
	uint8_t buf[36];
	unsigned int alen = fl->family == AF_INET6 ? 16 : 4, n;
	uint32_t hash = 0, v;

	memcpy(buf, fl->saddr, alen);
	memcpy(buf + alen, fl->daddr, alen);
	memcpy(buf + 2 * alen, &fl->sport, 2);
	memcpy(buf + 2 * alen + 2, &fl->dport, 2);
	n = 2 * alen + 4;
	v = (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];
	for (unsigned int i = 0; i < n; i++)
		for (unsigned int b = 0; b < 8; b++) {
			if (buf[i] & (0x80 >> b))
				hash ^= v;
			v <<= 1;
			if (i + 4 < EMU_KEY && (key[i + 4] & (0x80 >> b)))
				v |= 1;
		}
	return hash;
}

static bool mask_match(const void *pkt, const void *val, const void *mask, size_t len)
{
	const uint8_t *p = pkt, *v = val, *m = mask;

	for (size_t i = 0; i < len; i++)
		if ((p[i] & m[i]) != (v[i] & m[i]))
			return false;
	return true;
}

static bool rule_match(const struct ethtool_rx_flow_spec *fs, const struct emu_flow *fl)
{
	uint32_t type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);
	const union ethtool_flow_union *v = &fs->h_u, *m = &fs->m_u;
	bool v6 = fl->family == AF_INET6;
	uint8_t tos = 0, proto = 6;	/* TCP; no tos/tclass on our segments */

	switch (type) {
	case TCP_V4_FLOW:
		return !v6 &&
		       mask_match(fl->saddr, &v->tcp_ip4_spec.ip4src, &m->tcp_ip4_spec.ip4src, 4) &&
		       mask_match(fl->daddr, &v->tcp_ip4_spec.ip4dst, &m->tcp_ip4_spec.ip4dst, 4) &&
		       mask_match(&tos, &v->tcp_ip4_spec.tos, &m->tcp_ip4_spec.tos, 1) &&
		       mask_match(&fl->sport, &v->tcp_ip4_spec.psrc, &m->tcp_ip4_spec.psrc, 2) &&
		       mask_match(&fl->dport, &v->tcp_ip4_spec.pdst, &m->tcp_ip4_spec.pdst, 2);
	case TCP_V6_FLOW:
		return v6 &&
		       mask_match(fl->saddr, v->tcp_ip6_spec.ip6src, m->tcp_ip6_spec.ip6src, 16) &&
		       mask_match(fl->daddr, v->tcp_ip6_spec.ip6dst, m->tcp_ip6_spec.ip6dst, 16) &&
		       mask_match(&tos, &v->tcp_ip6_spec.tclass, &m->tcp_ip6_spec.tclass, 1) &&
		       mask_match(&fl->sport, &v->tcp_ip6_spec.psrc, &m->tcp_ip6_spec.psrc, 2) &&
		       mask_match(&fl->dport, &v->tcp_ip6_spec.pdst, &m->tcp_ip6_spec.pdst, 2);
	case IP_USER_FLOW:
		return !v6 &&
		       mask_match(fl->saddr, &v->usr_ip4_spec.ip4src, &m->usr_ip4_spec.ip4src, 4) &&
		       mask_match(fl->daddr, &v->usr_ip4_spec.ip4dst, &m->usr_ip4_spec.ip4dst, 4) &&
		       mask_match(&tos, &v->usr_ip4_spec.tos, &m->usr_ip4_spec.tos, 1) &&
		       mask_match(&proto, &v->usr_ip4_spec.proto, &m->usr_ip4_spec.proto, 1);
	case IPV6_USER_FLOW:
		return v6 &&
		       mask_match(fl->saddr, v->usr_ip6_spec.ip6src, m->usr_ip6_spec.ip6src, 16) &&
		       mask_match(fl->daddr, v->usr_ip6_spec.ip6dst, m->usr_ip6_spec.ip6dst, 16) &&
		       mask_match(&tos, &v->usr_ip6_spec.tclass, &m->usr_ip6_spec.tclass, 1) &&
		       mask_match(&proto, &v->usr_ip6_spec.l4_proto, &m->usr_ip6_spec.l4_proto, 1);
	}
	return false;	/* UDP rules do not match TCP */
}

/* The RX queue of flow fl on n (the sim's dsim_steer); -1: dropped. */
int emu_steer_locked(const struct emu_nic *n, const struct emu_flow *fl)
{
	uint32_t h = emu_toeplitz(n->key, fl);
	int q = -2;

	if (n->nrules && n->ntuple) {
		for (int i = 0; i < EMU_MAX_RULES; i++) {
			const struct emu_rule *r = &n->rules[i];

			if (!r->used || !rule_match(&r->fs, fl))
				continue;
			if (r->fs.ring_cookie == RX_CLS_FLOW_DISC)
				return -1;
			q = (int)ethtool_get_flow_spec_ring(r->fs.ring_cookie);
			if (r->fs.flow_type & FLOW_RSS) {
				const uint32_t *indir = n->indir;

				if (r->rss_ctx && r->rss_ctx < EMU_MAX_CTX && n->ctx_used[r->rss_ctx])
					indir = n->ctx_indir[r->rss_ctx];
				q += (int)indir[h % EMU_INDIR];
			}
			break;
		}
	}
	if (q == -2)
		q = (int)n->indir[h % EMU_INDIR];
	if (q >= (int)n->nq)
		q = 0;
	return q;
}

/* ---- sockets ---------------------------------------------------------------------- */

static void to_flow_addr(const struct sockaddr_storage *ss, int *family, uint8_t *addr,
			 uint16_t *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		*family = AF_INET;
		memcpy(addr, &a->sin_addr, 4);
		*port = a->sin_port;
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;

		*port = a->sin6_port;
		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			*family = AF_INET;
			memcpy(addr, &a->sin6_addr.s6_addr[12], 4);
		} else {
			*family = AF_INET6;
			memcpy(addr, &a->sin6_addr, 16);
		}
	}
}

/* Is local address addr (family) one of ifname's, in this thread's
 * network namespace? */
static bool addr_on(const char *ifname, int family, const uint8_t *addr)
{
	struct ifaddrs *ifa, *i;
	bool yes = false;

	if (getifaddrs(&ifa))
		return false;
	for (i = ifa; i && !yes; i = i->ifa_next) {
		if (!i->ifa_addr || strcmp(i->ifa_name, ifname) || i->ifa_addr->sa_family != family)
			continue;
		if (family == AF_INET)
			yes = !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, addr, 4);
		else
			yes = !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, addr, 16);
	}
	freeifaddrs(ifa);
	return yes;
}

static void classify(int fd, struct esock *s)
{
	struct sockaddr_storage self, peer;
	socklen_t sl = sizeof(self), pl = sizeof(peer), ol = sizeof(int);
	int dom = 0, proto = 0, lfam, pfam, candidates = 0, cand = -1;
	uint64_t netns;

	s->nic = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &ol) ||
	    getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &ol) ||
	    (dom != AF_INET && dom != AF_INET6) || proto != IPPROTO_TCP) {
		s->classified = true;
		return;
	}
	if (getsockname(fd, (struct sockaddr *)&self, &sl) ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl))
		return;		/* not connected yet: ask again next time */
	s->classified = true;
	to_flow_addr(&self, &lfam, s->fl.daddr, &s->fl.dport);
	to_flow_addr(&peer, &pfam, s->fl.saddr, &s->fl.sport);
	s->fl.family = lfam;
	netns = emu_fd_netns(fd);
	emu_lock();
	for (int i = 0; i < EMU_MAX_NICS; i++) {
		if (!emu_sh->nics[i].used || emu_sh->nics[i].netns_ino != netns)
			continue;
		candidates++;
		cand = i;
		if (netns == emu_thread_netns() && addr_on(emu_sh->nics[i].ifname, lfam, s->fl.daddr)) {
			s->nic = i;
			break;
		}
	}
	/* in another thread's namespace: the one NIC there, if only one */
	if (s->nic < 0 && candidates == 1 && netns != emu_thread_netns())
		s->nic = cand;
	if (s->nic >= 0 && emu_sh->nics[s->nic].corrupt_offset) {
		/* the sim's corrupt_offset: the first connection after the write */
		s->corrupt_at = (int64_t)emu_sh->nics[s->nic].corrupt_offset - 1;
		emu_sh->nics[s->nic].corrupt_offset = 0;
	}
	emu_unlock();
	ol = sizeof(s->mss);
	if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &s->mss, &ol) || !s->mss)
		s->mss = lfam == AF_INET6 ? 1428 : 1448;
}

/* Give back what the socket held (tokens, unread buffers): its close. */
static void esock_release(struct esock *s)
{
	struct emu_procfile *pf;

	if (s->slot < 0 && !s->pn)
		return;
	emu_lock();
	pf = emu_proc_self();
	if (pf && s->slot >= 0)
		emu_tsock_release_locked(pf, s->slot);	/* pending too */
	emu_unlock();
	s->slot = -1;
	s->pn = 0;
}

static struct esock *esock_get(int fd)
{
	struct esock *s;
	struct stat st;

	if (fd < 0 || fd >= MAX_FD || fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		return NULL;
	pthread_mutex_lock(&es_lock);
	s = esocks[fd];
	if (s && s->ino != (uint64_t)st.st_ino) {
		/* the fd was closed and reused behind our back */
		esock_release(s);
		free(s);
		s = esocks[fd] = NULL;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s) {
			pthread_mutex_unlock(&es_lock);
			return NULL;
		}
		pthread_mutex_init(&s->lock, NULL);
		s->ino = st.st_ino;
		s->slot = -1;
		s->corrupt_at = -1;
		s->nic = -1;
		esocks[fd] = s;
	}
	if (!s->classified)
		classify(fd, s);
	pthread_mutex_unlock(&es_lock);
	return s;
}

void emu_sock_closed(int fd)
{
	struct esock *s;

	if (fd < 0 || fd >= MAX_FD || !esocks[fd])
		return;
	pthread_mutex_lock(&es_lock);
	s = esocks[fd];
	esocks[fd] = NULL;
	pthread_mutex_unlock(&es_lock);
	if (!s)
		return;
	if (pthread_mutex_trylock(&s->lock)) {
		/* another thread waits in a receive on it: that thread gives
		 * back what the socket held when it returns */
		__atomic_store_n(&s->dead, true, __ATOMIC_RELEASE);
		return;
	}
	esock_release(s);
	pthread_mutex_unlock(&s->lock);
	free(s);
}

bool emu_rx_pending(int fd)
{
	return fd >= 0 && fd < MAX_FD && esocks[fd] && esocks[fd]->pn;
}

void emu_rx_forget(void)
{
	for (int i = 0; i < MAX_FD; i++)
		esocks[i] = NULL;	/* the parent's; not ours to release */
}

/* ---- tokens ------------------------------------------------------------------------ */

static int slot_get(struct esock *s, struct emu_procfile *pf)
{
	if (s->slot >= 0)
		return s->slot;
	for (int i = 0; i < EMU_PROC_SOCKS; i++)
		if (!pf->socks[i].used) {
			pf->socks[i].used = 1;
			pf->socks[i].ino = s->ino;
			pf->socks[i].hint = 0;
			pf->socks[i].count = 0;
			pf->socks[i].npend = 0;
			pf->socks[i].phead = 0;
			emu_tsock_bits(pf, i)[0] |= 1;	/* tokens start at 1 */
			s->slot = i;
			return i;
		}
	return emu_unmodelled("more than %d devmem sockets in one process", EMU_PROC_SOCKS);
}

static int tok_alloc(struct emu_procfile *pf, int slot, uint32_t *tok)
{
	struct emu_tsock *ts = &pf->socks[slot];
	uint64_t *bits = emu_tsock_bits(pf, slot);

	for (uint32_t w = ts->hint; w < EMU_MAX_TOK / 64; w++) {
		if (bits[w] == ~0ull)
			continue;
		*tok = w * 64 + (uint32_t)__builtin_ctzll(~bits[w]);
		bits[w] |= 1ull << (*tok % 64);
		ts->hint = w;
		ts->count++;
		return 0;
	}
	return emu_unmodelled("more than %u tokens outstanding on one socket", EMU_MAX_TOK);
}

/* The process file keeps the buffers received and not read yet (for the
 * reaper) in a ring in the order they arrived, the order they are read. */
static void pend_record(struct emu_procfile *pf, int slot, uint32_t binding, uint32_t page)
{
	struct emu_tsock *ts = &pf->socks[slot];

	if (ts->npend < EMU_MAX_PENDING)
		ts->pend[(ts->phead + ts->npend++) % EMU_MAX_PENDING] =
			(struct emu_tok){ binding, page };
}

static void pend_forget(struct emu_procfile *pf, int slot, uint32_t binding, uint32_t page)
{
	struct emu_tsock *ts = &pf->socks[slot];
	struct emu_tok *head = &ts->pend[ts->phead];

	for (uint32_t i = 0; i < ts->npend; i++) {
		struct emu_tok *t = &ts->pend[(ts->phead + i) % EMU_MAX_PENDING];

		if (t->binding == binding && t->page == page) {
			*t = *head;	/* the oldest, nearly always itself */
			ts->phead = (ts->phead + 1) % EMU_MAX_PENDING;
			ts->npend--;
			return;
		}
	}
}

/* Hand out pending buffers as devmem cmsgs (locked). */
static size_t deliver_locked(struct esock *s, struct emu_procfile *pf, struct msghdr *msg,
			     size_t *used, size_t room, uint64_t *frags, int *err)
{
	struct emu_tok *toks = emu_tsock_toks(pf, s->slot);
	struct emu_binding *b = NULL;
	struct emu_pool *p = NULL;
	size_t out = 0;

	while (s->pn && out < room && *used + CM_SPACE <= msg->msg_controllen) {
		struct pbuf *pb = &s->pend[s->phead];
		uint32_t take = pb->len - pb->done, tok = 0;
		struct dmt_dmabuf_cmsg d = { 0 };
		struct cmsghdr *cm = (struct cmsghdr *)((char *)msg->msg_control + *used);

		if (!b || b->id != pb->binding) {
			b = emu_binding_get(pb->binding);
			p = b ? emu_pool_map(b, false) : NULL;
		}
		if (!p) {
			*err = emu_unmodelled("binding %u of a received buffer is gone: emulator bug",
					      pb->binding);
			return out;
		}
		if (take > room - out)
			take = (uint32_t)(room - out);
		*err = tok_alloc(pf, s->slot, &tok);
		if (*err)
			return out;
		toks[tok] = (struct emu_tok){ pb->binding, pb->page };
		d.frag_offset = (uint64_t)pb->page * p->page_size + pb->off + pb->done;
		d.frag_size = take;
		d.frag_token = tok;
		d.dmabuf_id = pb->binding;
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_DEVMEM_DMABUF;
		cm->cmsg_len = CMSG_LEN(sizeof(d));
		memcpy(CMSG_DATA(cm), &d, sizeof(d));
		*used += CM_SPACE;
		pb->done += take;
		out += take;
		(*frags)++;
		if (pb->done < pb->len) {
			/* the token takes a reference of its own */
			emu_pool_refs(p)[pb->page]++;
			b->held++;
			continue;
		}
		/* the "skb" is consumed: its reference becomes the token's */
		pend_forget(pf, s->slot, pb->binding, pb->page);
		s->phead = (s->phead + 1) % EMU_MAX_PENDING;
		s->pn--;
	}
	return out;
}

/* ---- arrival: the NIC writes what the wire brings ------------------------------------ */

/* The page pool's fragment allocator (page_pool_alloc_frag_netmem): size
 * bytes (8-aligned) after the previous ones in the current page, a fresh
 * page when they do not fit; the pool's own reference on its current page
 * goes when it moves on, and a page whose buffers all came back is reused
 * at once. */
static int alloc_frag(struct emu_pool *p, uint32_t qi, uint32_t size, uint32_t *page,
		      uint32_t *off)
{
	struct emu_pq *pq = &p->q[qi];
	uint32_t *refs = emu_pool_refs(p);

	size = (size + 7) & ~7u;
	if (pq->frag_page != UINT32_MAX && pq->frag_off + size > p->page_size) {
		uint32_t old = pq->frag_page;

		pq->frag_page = UINT32_MAX;
		if ((refs[old] & 0xffffff) == 1) {
			/* only the pool's reference left: reuse it */
			pq->frag_page = old;
			pq->frag_off = 0;
		} else {
			refs[old]--;
		}
	}
	if (pq->frag_page == UINT32_MAX) {
		if (emu_page_alloc(p, qi, 1, &pq->frag_page))
			return -ENOMEM;
		pq->frag_off = 0;
	}
	*page = pq->frag_page;
	*off = pq->frag_off;
	pq->frag_off += size;
	refs[*page]++;
	return 0;
}

static uint32_t mix_next(uint32_t *st)
{
	/* xorshift32: a fixed sequence per queue */
	uint32_t x = *st ? *st : 1;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*st = x;
	return x;
}

enum { PLAN_OK, PLAN_NOROOM, PLAN_NOPAGE };

struct plan {
	int status;		/* why it ended before the bytes asked for */
	struct emu_piece pc[MAX_PIECES];
	struct pbuf pb[MAX_PIECES];
	size_t n;
	uint64_t bytes, segs, pages;
};

/*
 * Buffers for up to `bytes` bytes on queue index qi of binding b, segment
 * by segment as the wire carries them: TSO frames of tso_segs segments of
 * one MSS (45 by default: 64 KiB, a fast sender's), cut further into pieces of 1 byte to the segment with
 * rx_mix (the sim's dsim_rx_tcp); the last segment before the data ends
 * (end) is as short as the data, a segment the byte count cuts otherwise
 * waits for the next receive.  A segment that cannot get all its buffers
 * is dropped (its buffers go back) and counted as an allocation failure,
 * and so ends the plan.  Locked.
 */
static void plan_locked(struct emu_nic *n, int q, struct emu_binding *b, struct emu_pool *p,
			uint32_t qi, struct esock *s, uint64_t bytes, bool end, size_t maxbufs,
			struct plan *pl)
{
	uint32_t ps = p->page_size, mss = s->mss;
	size_t lastf = SIZE_MAX;	/* the fragment allocator's last buffer */

	pl->n = pl->bytes = pl->segs = pl->pages = 0;
	pl->status = PLAN_OK;
	while (pl->bytes < bytes) {
		uint64_t avail = bytes - pl->bytes, seg, rem;
		uint32_t frame_left = s->frame_left ? s->frame_left
					: (n->tso_segs ? n->tso_segs : 45) * mss;
		size_t first = pl->n;
		bool fail = false, last = false;

		seg = frame_left < mss ? frame_left : mss;
		if (seg > avail) {
			if (!end)
				break;	/* the rest of this segment has not arrived */
			seg = avail;
			last = true;
		}
		if (n->rx_mix)
			seg = 1 + mix_next(&p->q[qi].mix) % seg;
		for (rem = seg; rem && !fail;) {
			uint32_t page, off = 0, len, slot = ps;
			bool frag = false;
			int r;

			if (pl->n == maxbufs) {
				fail = true;
				pl->status = PLAN_NOROOM;
				break;
			}
			if (n->fail_alloc) {
				n->fail_alloc--;
				r = -ENOMEM;
				len = 0;
			} else if (n->rx_buf_size) {
				len = rem < n->rx_buf_size ? (uint32_t)rem : n->rx_buf_size;
				r = alloc_frag(p, qi, n->rx_buf_size, &page, &off);
				slot = n->rx_buf_size;
				frag = true;
			} else if (n->rx_pack) {
				len = rem < ps ? (uint32_t)rem : ps;
				r = alloc_frag(p, qi, len, &page, &off);
				slot = (len + 7) & ~7u;
				frag = true;
			} else {
				len = rem < ps ? (uint32_t)rem : ps;
				r = emu_page_alloc(p, qi, 1, &page);
			}
			if (r) {
				fail = true;
				pl->status = PLAN_NOPAGE;
				n->rxq[q].alloc_fail++;
				emu_sh->st.alloc_fail++;
				break;
			}
			if (frag) {
				/* the allocator left the page of its last buffer
				 * here: nothing after that buffer is anyone's */
				if (lastf != SIZE_MAX && pl->pb[lastf].page != page)
					pl->pc[lastf].slot = ps - pl->pb[lastf].off;
				lastf = pl->n;
			}
			pl->pc[pl->n] = (struct emu_piece){ (uint64_t)page * ps + off, NULL, len, slot };
			pl->pb[pl->n] = (struct pbuf){ b->id, page, off, len, 0 };
			pl->n++;
			rem -= len;
		}
		if (fail) {
			/* the frame is dropped: its buffers go back */
			for (size_t i = first; i < pl->n; i++)
				emu_page_put(b, p, qi, pl->pb[i].page);
			pl->n = first;
			return;
		}
		for (size_t i = first; i < pl->n; i++)
			pl->pages += pl->pb[i].off == 0;
		pl->bytes += seg;
		pl->segs++;
		s->frame_left = last ? 0 : frame_left - (uint32_t)seg;
	}
}

static int64_t ns_left(uint64_t deadline)
{
	uint64_t now = emu_now_ns();

	return !deadline ? -1 : deadline > now ? (int64_t)(deadline - now) : 0;
}

/* Wait for data on fd: 1 there is some (or an error or the end), 0 time
 * is up. */
static int wait_data(int fd, uint64_t deadline, struct emu_timing *t)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int64_t left = ns_left(deadline);
	uint64_t t0 = emu_now_ns();
	int r;

	r = emu_real.poll(&pfd, 1, left < 0 ? -1 : (int)((left + 999999) / 1000000));
	t->wait_ns += emu_now_ns() - t0;
	return r != 0;
}

/* Wait for pages to come back to the pools (unlocked): false when time
 * is up first. */
static bool wait_pages(int q, struct esock *s, uint64_t deadline, uint64_t *since,
		       struct emu_timing *t)
{
	struct emu_nic *n = &emu_sh->nics[s->nic];
	uint64_t t0 = emu_now_ns(), last_count = t0;
	struct timespec ts = { 0, 1000000 };
	bool changed = false;
	uint32_t gen;

	emu_lock();
	gen = emu_sh->pool_gen;
	if (!*since) {
		*since = t0;
		emu_sh->st.starvations++;
	}
	emu_unlock();
	while (!changed && ns_left(deadline) != 0) {
		nanosleep(&ts, NULL);
		if (ts.tv_nsec < 10000000)
			ts.tv_nsec += 1000000;
		emu_lock();
		changed = emu_sh->pool_gen != gen;
		if (!changed && emu_now_ns() - last_count > 200000000ull) {
			/* a retransmission finding the pool empty again */
			n->rxq[q].alloc_fail++;
			emu_sh->st.alloc_fail++;
			last_count = emu_now_ns();
			emu_reap_locked();	/* a dead holder's pages */
			changed = emu_sh->pool_gen != gen;
		}
		emu_unlock();
	}
	emu_lock();
	emu_sh->st.starved_ns += emu_now_ns() - t0;
	emu_unlock();
	t->wait_ns += emu_now_ns() - t0;
	return changed;
}

/*
 * Take up to `want` bytes (whole segments beyond it) of what waits on the
 * real socket into the bound dma-buf as pending buffers: the bytes placed
 * (> 0), 0 at the end of the stream, -EMU_PLAIN when the flow's queue has
 * no dma-buf, -ENOBUFS when not one segment's buffers fit the control
 * messages left, or a negative errno (-EAGAIN: nothing in time).
 */
static ssize_t arrive(int fd, struct esock *s, size_t want, size_t maxbufs, bool nonblock,
		      uint64_t deadline, struct emu_timing *t)
{
	static __thread struct plan pl;
	uint64_t starved_since = 0;

	for (;;) {
		struct emu_nic *n = &emu_sh->nics[s->nic];
		struct emu_procfile *pf;
		struct emu_binding *b;
		struct emu_pool *p;
		struct emu_mem *m;
		struct iovec iov[MAX_PIECES];
		struct msghdr mh = { .msg_iov = iov };
		struct emu_copy_count cc;
		uint64_t pull, t0;
		int inq = 0, q, qi, err = 0;
		ssize_t got;

		t0 = emu_now_ns();
		if (emu_real.ioctl(fd, SIOCINQ, &inq))
			return -errno;
		t->sys_ns += emu_now_ns() - t0;
		if (inq <= 0) {
			char c;

			if (nonblock)
				return -EAGAIN;
			if (!wait_data(fd, deadline, t))
				return -EAGAIN;
			if (emu_real.ioctl(fd, SIOCINQ, &inq))
				return -errno;
			if (inq > 0)
				continue;
			got = emu_real.recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
			if (got == 0)
				return 0;
			if (got < 0 && errno != EAGAIN)
				return -errno;
			continue;
		}
		emu_lock();
		q = emu_steer_locked(n, &s->fl);
		if (q < 0) {
			/* a drop rule: nothing arrives */
			emu_unlock();
			if (nonblock)
				return -EAGAIN;
			usleep(10000);
			continue;
		}
		s->last_q = q;
		b = emu_binding_get(n->qbinding[q]);
		if (!b) {
			emu_unlock();
			return -EMU_PLAIN;
		}
		p = emu_pool_map(b, false);
		qi = p ? emu_pool_qi(p, (uint32_t)q) : -1;
		m = emu_mem_get(b, &err);
		pf = emu_proc_self();
		if (!p || qi < 0 || !m || !pf || slot_get(s, pf) < 0) {
			emu_unlock();
			return err ? err : emu_unmodelled("binding %u's pool cannot be mapped", b->id);
		}
		pull = (uint64_t)inq;
		if (pull > (want + s->mss - 1) / s->mss * s->mss)
			pull = (want + s->mss - 1) / s->mss * s->mss;
		if (pull > PULL_MAX)
			pull = PULL_MAX;
		if (pull > emu_mem_max_pull(m))
			pull = emu_mem_max_pull(m);
		plan_locked(n, q, b, p, (uint32_t)qi, s, pull, pull == (uint64_t)inq, maxbufs, &pl);
		if (!pl.n) {
			emu_unlock();
			if (pl.status == PLAN_NOROOM)
				return -ENOBUFS;
			if (nonblock)
				return -EAGAIN;
			if (!wait_pages(q, s, deadline, &starved_since, t) && ns_left(deadline) == 0)
				return -EAGAIN;
			continue;
		}
		/* the buffers wait for the reader, each holding its page */
		for (size_t i = 0; i < pl.n; i++) {
			s->pend[(s->phead + s->pn + i) % EMU_MAX_PENDING] = pl.pb[i];
			pend_record(pf, s->slot, pl.pb[i].binding, pl.pb[i].page);
		}
		s->pn += (uint32_t)pl.n;
		b->held += pl.n;
		n->rxq[q].packets += pl.segs;
		n->rxq[q].bytes += pl.bytes;
		n->rxq[q].bufs += pl.n;
		n->rxq[q].pages += pl.pages;
		emu_unlock();

		if (emu_mem_place(m, pl.pc, pl.n))
			return -EIO;
		for (size_t i = 0; i < pl.n; i++)
			iov[i] = (struct iovec){ pl.pc[i].host, pl.pc[i].len };
		mh.msg_iovlen = pl.n;
		t0 = emu_now_ns();
		got = emu_real.recvmsg(fd, &mh, MSG_DONTWAIT);
		t->sys_ns += emu_now_ns() - t0;
		if (got != (ssize_t)pl.bytes)
			return emu_unmodelled("the real socket gave %zd of the %llu bytes it reported waiting",
					      got, (unsigned long long)pl.bytes);
		if (s->corrupt_at >= (int64_t)s->stream &&
		    s->corrupt_at < (int64_t)(s->stream + pl.bytes)) {
			uint64_t at = (uint64_t)s->corrupt_at - s->stream;

			for (size_t i = 0; i < pl.n; at -= pl.pc[i++].len)
				if (at < pl.pc[i].len) {
					pl.pc[i].host[at] ^= 0xff;
					break;
				}
			s->corrupt_at = -1;
		}
		t0 = emu_now_ns();
		if (emu_mem_commit(m, &cc))
			return -EIO;
		t->copy_ns += emu_now_ns() - t0;
		if (cc.calls) {
			t->copy_calls += cc.calls;
			t->copy_xfers += cc.xfers;
			t->copy_bytes += cc.bytes;
			emu_lock();
			emu_sh->st.copies += pl.n;
			emu_sh->st.copy_calls += cc.calls;
			emu_sh->st.copy_xfers += cc.xfers;
			emu_sh->st.copy_bytes += cc.bytes;
			emu_unlock();
		}
		s->stream += pl.bytes;
		return (ssize_t)pl.bytes;
	}
}

/* ---- recvmsg(MSG_SOCK_DEVMEM) ------------------------------------------------------- */

static uint64_t rcv_deadline(int fd)
{
	struct timeval tv = { 0 };
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) || (!tv.tv_sec && !tv.tv_usec))
		return 0;
	return emu_now_ns() + (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000;
}

int emu_rx_recvmsg(int fd, struct msghdr *msg, int flags, ssize_t *ret)
{
	struct emu_timing t = { 0 };
	uint64_t t0 = emu_now_ns(), frags = 0, deadline = 0;
	size_t room = 0, out = 0, used = 0;
	struct esock *s;
	bool nonblock;
	int err = 0;

	if (!emu_on())
		return 0;
	s = esock_get(fd);
	if (!s || s->nic < 0)
		return 0;
	if (flags & ~(MSG_SOCK_DEVMEM | MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_NOSIGNAL)) {
		emu_unmodelled("recvmsg(MSG_SOCK_DEVMEM) with flags %#x", flags);
		errno = EOPNOTSUPP;
		*ret = -1;
		return 1;
	}
	for (size_t i = 0; i < msg->msg_iovlen; i++)
		room += msg->msg_iov[i].iov_len;
	if (room > 0x7fffffff)
		room = 0x7fffffff;
	nonblock = (flags & MSG_DONTWAIT) || (fcntl(fd, F_GETFL) & O_NONBLOCK);
	if (!nonblock)
		deadline = rcv_deadline(fd);
	pthread_mutex_lock(&s->lock);
	if (s->err && !s->pn) {
		err = -s->err;
		s->err = 0;
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (s->pn) {
			struct emu_procfile *pf;

			emu_lock();
			pf = emu_proc_self();
			out += deliver_locked(s, pf, msg, &used, room - out, &frags, &err);
			emu_unlock();
			if (err)
				break;
		}
		if (out >= room || s->pn)
			break;	/* the bytes asked for, or no room for more cmsgs */
		if (msg->msg_controllen - used < CM_SPACE) {
			if (!out && !used) {
				/* the kernel refuses when a devmem frag comes */
				int q;

				emu_lock();
				q = emu_steer_locked(&emu_sh->nics[s->nic], &s->fl);
				r = q >= 0 && emu_sh->nics[s->nic].qbinding[q];
				emu_unlock();
				if (r) {
					err = -ETOOSMALL;
					break;
				}
				goto plain;
			}
			break;
		}
		r = arrive(fd, s, room - out,
			   (msg->msg_controllen - used) / CM_SPACE < MAX_PIECES ?
			   (msg->msg_controllen - used) / CM_SPACE : MAX_PIECES,
			   nonblock || out, deadline, &t);
		if (r > 0)
			continue;
		if (r == -EMU_PLAIN) {
			if (out)
				break;
			goto plain;
		}
		if (r == 0 || ((r == -EAGAIN || r == -ENOBUFS) && out))
			break;
		if (r == -ENOBUFS)
			r = -ETOOSMALL;
		if (out) {
			s->err = (int)-r;
			break;
		}
		err = (int)r;
		break;
	}
out:
	if (__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) {
		esock_release(s);
		pthread_mutex_unlock(&s->lock);
		free(s);
		s = NULL;
	} else {
		pthread_mutex_unlock(&s->lock);
	}
	if (err && !out) {
		errno = -err;
		*ret = -1;
	} else {
		msg->msg_controllen = used;
		msg->msg_flags = 0;
		*ret = (ssize_t)out;
	}
	if (out || frags) {
		emu_lock();
		emu_sh->st.recvs++;
		emu_sh->st.frags += frags;
		emu_sh->st.bytes += out;
		emu_unlock();
	}
	t.recvs = 1;
	t.bytes = out;
	t.emu_ns = emu_now_ns() - t0 - t.sys_ns - t.copy_ns - t.wait_ns;
	emu_timing_add(&t);
	return 1;
plain:
	{
		int nic = s->nic, q = s->last_q;
		uint32_t mss = s->mss;

		if (__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) {
			esock_release(s);
			pthread_mutex_unlock(&s->lock);
			free(s);
		} else {
			pthread_mutex_unlock(&s->lock);
		}
		*ret = emu_real.recvmsg(fd, msg, flags);
		if (*ret > 0) {
			emu_lock();
			emu_sh->nics[nic].rxq[q].bytes += (uint64_t)*ret;
			emu_sh->nics[nic].rxq[q].packets += ((uint64_t)*ret + mss - 1) / mss;
			emu_sh->st.plain_bytes += (uint64_t)*ret;
			emu_unlock();
		}
	}
	return 1;
}

/* ---- SO_DEVMEM_DONTNEED ------------------------------------------------------------- */

int emu_rx_dontneed(int fd, const void *val, socklen_t len, int *ret)
{
	const struct dmt_dmabuf_token *t = val;
	struct emu_binding *b = NULL;
	struct emu_pool *p = NULL;
	struct emu_procfile *pf;
	struct emu_tsock *ts;
	struct esock *s;
	struct stat st;
	uint32_t seen = 0, freed = 0, unknown = 0;
	uint64_t *bits;
	struct emu_tok *toks;

	if (!emu_on() || fd < 0 || fd >= MAX_FD || !esocks[fd] || fstat(fd, &st))
		return 0;
	s = esocks[fd];
	if (s->ino != (uint64_t)st.st_ino || s->slot < 0)
		return 0;
	if (len % sizeof(*t) || len > sizeof(*t) * DMT_MAX_DONTNEED_TOKENS) {
		errno = EINVAL;
		*ret = -1;
		return 1;
	}
	if (len && !val) {
		errno = EFAULT;
		*ret = -1;
		return 1;
	}
	emu_lock();
	pf = emu_proc_self();
	ts = &pf->socks[s->slot];
	bits = emu_tsock_bits(pf, s->slot);
	toks = emu_tsock_toks(pf, s->slot);
	for (size_t i = 0; i < len / sizeof(*t); i++) {
		for (uint32_t k = 0; k < t[i].token_count; k++) {
			uint32_t tok = t[i].token_start + k;

			if (++seen > DMT_MAX_DONTNEED_FRAGS)
				goto done;
			if (!tok || tok >= EMU_MAX_TOK || !(bits[tok / 64] & (1ull << (tok % 64)))) {
				unknown++;
				continue;
			}
			bits[tok / 64] &= ~(1ull << (tok % 64));
			if (tok / 64 < ts->hint)
				ts->hint = tok / 64;
			ts->count--;
			if (!b || !b->used || b->id != toks[tok].binding) {
				b = emu_binding_get(toks[tok].binding);
				p = b ? emu_pool_map(b, false) : NULL;
			}
			if (p) {
				emu_page_put(b, p, 0, toks[tok].page);
				b->held--;
				emu_binding_maybe_free(b);	/* b->used 0 when it went */
			}
			freed++;
		}
	}
done:
	emu_sh->st.dontneed_calls++;
	emu_sh->st.tokens_freed += freed;
	emu_sh->st.tokens_unknown += unknown;
	emu_unlock();
	*ret = (int)freed;
	return 1;
}
