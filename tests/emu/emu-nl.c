// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The emulated NIC's generic netlink: requests of the "netdev" and
 * "ethtool" families that name an emulated NIC are answered here, as the
 * kernel would answer them for the simulated NIC (replies, acks, errors
 * with their extack texts); the answers wait on the socket until it is
 * read.  Requests for other devices go to the kernel; one that names an
 * emulated NIC but that the emulator does not model fails loudly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#include "emu.h"
#include "uapi.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif
#ifndef NLM_F_CAPPED
#define NLM_F_CAPPED 0x100
#endif
#ifndef NLM_F_ACK_TLVS
#define NLM_F_ACK_TLVS 0x200
#endif
#define NLMSGERR_MSG 1
#define NLMSGERR_OFFS 2
#define NLMSGERR_MISS_TYPE 5
#define NLMSGERR_MISS_NEST 6

#define NL_MAX_FD 65536
#define REPLY_MAX (256u << 10)

/* One datagram waiting to be read. */
struct nlq {
	struct nlq *next;
	size_t len;
	char data[];
};

struct nlfd {
	uint64_t ino;
	uint64_t netns;
	uint32_t portid;
	bool genl;
	struct nlq *head, *tail;
};

static pthread_mutex_t nl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nlfd *nlfds[NL_MAX_FD];
static uint16_t fam_netdev, fam_ethtool;
static pthread_once_t fam_once = PTHREAD_ONCE_INIT;

/* ---- family ids, resolved on a socket of our own --------------------------- */

static uint16_t resolve_family(int fd, const char *name, uint32_t seq)
{
	char buf[8192];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct genlmsghdr *g;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	nlh->nlmsg_type = GENL_ID_CTRL;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->cmd = CTRL_CMD_GETFAMILY;
	g->version = 1;
	mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, name);
	if (emu_real.sendto(fd, buf, nlh->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 0;
	n = emu_real.recvmsg(fd, &m, 0);
	for (nlh = (struct nlmsghdr *)buf; n > 0 && mnl_nlmsg_ok(nlh, (int)n);
	     nlh = mnl_nlmsg_next(nlh, (int *)&n)) {
		struct nlattr *a;

		if (nlh->nlmsg_type != GENL_ID_CTRL)
			continue;
		mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr))
			if (mnl_attr_get_type(a) == CTRL_ATTR_FAMILY_ID)
				return mnl_attr_get_u16(a);
	}
	return 0;
}

static uint16_t family_id(const char *name)
{
	int fd = emu_real.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	uint16_t id;

	if (fd < 0)
		return 0;
	id = resolve_family(fd, name, 1);
	emu_real.close(fd);
	return id;
}

static void families(void)
{
	fam_netdev = family_id("netdev");
	fam_ethtool = family_id("ethtool");
	if (!fam_netdev || !fam_ethtool)
		emu_log("the kernel lacks the %s generic netlink family: the emulator needs it to recognise requests",
			fam_netdev ? "ethtool" : "netdev");
}

/* ---- the sockets ------------------------------------------------------------- */

static struct nlfd *nlfd_get(int fd)
{
	struct nlfd *f;
	struct stat st;
	struct sockaddr_nl sa;
	socklen_t len = sizeof(sa);
	int proto = 0;
	socklen_t plen = sizeof(proto);

	if (fd < 0 || fd >= NL_MAX_FD || fstat(fd, &st))
		return NULL;
	f = nlfds[fd];
	if (f && f->ino == (uint64_t)st.st_ino)
		return f;
	if (f) {
		/* an fd number reused behind our back */
		while (f->head) {
			struct nlq *q = f->head;

			f->head = q->next;
			free(q);
		}
		free(f);
		nlfds[fd] = NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->ino = st.st_ino;
	if (!getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &plen))
		f->genl = proto == NETLINK_GENERIC;
	if (!getsockname(fd, (struct sockaddr *)&sa, &len))
		f->portid = sa.nl_pid;
	f->netns = emu_fd_netns(fd);
	nlfds[fd] = f;
	return f;
}

static void queue_reply(struct nlfd *f, const void *data, size_t len)
{
	struct nlq *q = malloc(sizeof(*q) + len);

	if (!q)
		return;
	q->next = NULL;
	q->len = len;
	memcpy(q->data, data, len);
	if (f->tail)
		f->tail->next = q;
	else
		f->head = q;
	f->tail = q;
}

bool emu_nl_pending(int fd)
{
	bool p;

	if (fd < 0 || fd >= NL_MAX_FD || !nlfds[fd])
		return false;
	pthread_mutex_lock(&nl_lock);
	p = nlfds[fd] && nlfds[fd]->head;
	pthread_mutex_unlock(&nl_lock);
	return p;
}

void emu_nl_close(int fd)
{
	struct nlfd *f;

	if (fd < 0 || fd >= NL_MAX_FD || !nlfds[fd])
		return;
	pthread_mutex_lock(&nl_lock);
	f = nlfds[fd];
	nlfds[fd] = NULL;
	pthread_mutex_unlock(&nl_lock);
	if (!f)
		return;
	if (f->genl && emu_sh)
		emu_nl_socket_closing(fd, f->ino);
	while (f->head) {
		struct nlq *q = f->head;

		f->head = q->next;
		free(q);
	}
	free(f);
}

void emu_nl_forget(void)
{
	for (int i = 0; i < NL_MAX_FD; i++)
		nlfds[i] = NULL;
}

int emu_nl_recv(int fd, struct msghdr *msg, int flags, ssize_t *ret)
{
	struct nlfd *f;
	struct nlq *q;
	size_t off = 0;

	if (fd < 0 || fd >= NL_MAX_FD || !nlfds[fd])
		return 0;
	pthread_mutex_lock(&nl_lock);
	f = nlfds[fd];
	q = f ? f->head : NULL;
	if (!q) {
		pthread_mutex_unlock(&nl_lock);
		return 0;
	}
	for (size_t i = 0; i < msg->msg_iovlen && off < q->len; i++) {
		size_t n = q->len - off < msg->msg_iov[i].iov_len ?
			   q->len - off : msg->msg_iov[i].iov_len;

		memcpy(msg->msg_iov[i].iov_base, q->data + off, n);
		off += n;
	}
	msg->msg_flags = off < q->len ? MSG_TRUNC : 0;
	if (msg->msg_name && msg->msg_namelen >= sizeof(struct sockaddr_nl)) {
		struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

		memcpy(msg->msg_name, &sa, sizeof(sa));
		msg->msg_namelen = sizeof(sa);
	}
	msg->msg_controllen = 0;
	*ret = (flags & MSG_TRUNC) ? (ssize_t)q->len : (ssize_t)off;
	if (!(flags & MSG_PEEK)) {
		f->head = q->next;
		if (!f->head)
			f->tail = NULL;
		free(q);
	}
	pthread_mutex_unlock(&nl_lock);
	return 1;
}

/* ---- replies ---------------------------------------------------------------- */

struct reply {
	struct nlfd *f;
	const struct nlmsghdr *req;
	int fd;
	char *buf;
	size_t len;
	bool ext_ack, cap_ack;
};

static bool sockopt_on(int fd, int opt)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return !getsockopt(fd, SOL_NETLINK, opt, &v, &len) && v;
}

/* Flush the datagram built so far to the socket's queue. */
static void reply_flush(struct reply *r)
{
	if (!r->len)
		return;
	queue_reply(r->f, r->buf, r->len);
	r->len = 0;
}

/* A new message in the reply datagram. */
static struct nlmsghdr *reply_msg(struct reply *r, uint16_t type, uint16_t flags,
				  uint8_t cmd)
{
	struct nlmsghdr *nlh;
	struct genlmsghdr *g;

	/* datagrams of at most 8 KiB, as the kernel's dumps */
	if (r->len > 6144)
		reply_flush(r);
	nlh = mnl_nlmsg_put_header(r->buf + r->len);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	nlh->nlmsg_seq = r->req->nlmsg_seq;
	nlh->nlmsg_pid = r->f->portid;
	if (type >= NLMSG_MIN_TYPE) {
		g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
		g->cmd = cmd;
		g->version = 1;
	}
	return nlh;
}

static void reply_end(struct reply *r, struct nlmsghdr *nlh)
{
	r->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

/* NLMSG_ERROR: the ack (err 0) or the error with the kernel's extack:
 * text, the offset of the attribute at fault (bad), a missing attribute
 * (miss, in nest miss_nest). */
static void reply_error(struct reply *r, int err, const char *text,
			const struct nlattr *bad, int miss, const struct nlattr *miss_nest)
{
	struct nlmsghdr *nlh;
	struct nlmsgerr *e;
	size_t payload = r->cap_ack || !err ? sizeof(struct nlmsghdr) : r->req->nlmsg_len;

	nlh = reply_msg(r, NLMSG_ERROR, 0, 0);
	if (!nlh)
		return;
	e = mnl_nlmsg_put_extra_header(nlh, sizeof(int) + payload);
	e->error = err;
	memcpy(&e->msg, r->req, payload);
	if (r->cap_ack || !err)
		nlh->nlmsg_flags |= NLM_F_CAPPED;
	if (r->ext_ack && (text || bad || miss)) {
		nlh->nlmsg_flags |= NLM_F_ACK_TLVS;
		if (text)
			mnl_attr_put_strz(nlh, NLMSGERR_MSG, text);
		if (bad)
			mnl_attr_put_u32(nlh, NLMSGERR_OFFS,
					 (uint32_t)((const char *)bad - (const char *)r->req));
		if (miss) {
			mnl_attr_put_u32(nlh, NLMSGERR_MISS_TYPE, (uint32_t)miss);
			if (miss_nest)
				mnl_attr_put_u32(nlh, NLMSGERR_MISS_NEST,
						 (uint32_t)((const char *)miss_nest -
							    (const char *)r->req));
		}
	}
	reply_end(r, nlh);
}

static void reply_ack(struct reply *r)
{
	if (r->req->nlmsg_flags & NLM_F_ACK)
		reply_error(r, 0, NULL, NULL, 0, NULL);
}

static void reply_done(struct reply *r)
{
	struct nlmsghdr *nlh = reply_msg(r, NLMSG_DONE, NLM_F_MULTI, 0);
	int *v;

	if (!nlh)
		return;
	v = mnl_nlmsg_put_extra_header(nlh, sizeof(int));
	*v = 0;
	reply_end(r, nlh);
}

/* ---- attributes ------------------------------------------------------------ */

#define MAX_ATTR 32

static void parse_attrs(const struct nlattr *first, const void *end,
			const struct nlattr **tb)
{
	const struct nlattr *a;

	memset(tb, 0, MAX_ATTR * sizeof(*tb));
	for (a = first; (const char *)a + sizeof(*a) <= (const char *)end &&
	     a->nla_len >= sizeof(*a) && (const char *)a + a->nla_len <= (const char *)end;
	     a = (const void *)((const char *)a + MNL_ALIGN(a->nla_len))) {
		uint16_t t = mnl_attr_get_type(a);

		if (t < MAX_ATTR && !tb[t])
			tb[t] = a;
	}
}

static void req_attrs(const struct nlmsghdr *nlh, const struct nlattr **tb)
{
	parse_attrs(mnl_nlmsg_get_payload_offset(nlh, sizeof(struct genlmsghdr)),
		    (const char *)nlh + nlh->nlmsg_len, tb);
}

static void nest_attrs(const struct nlattr *nest, const struct nlattr **tb)
{
	parse_attrs(mnl_attr_get_payload(nest),
		    (const char *)nest + nest->nla_len, tb);
}

static uint32_t u32_of(const struct nlattr *a)
{
	return a && mnl_attr_get_payload_len(a) >= 4 ? mnl_attr_get_u32(a) : 0;
}

/* NLA_UINT: 4 bytes when it fits, else 8. */
static void put_uint(struct nlmsghdr *nlh, uint16_t type, uint64_t v)
{
	if (v <= UINT32_MAX)
		mnl_attr_put_u32(nlh, type, (uint32_t)v);
	else
		mnl_attr_put_u64(nlh, type, v);
}

/* ---- the netdev family --------------------------------------------------------- */

static void put_queue(struct nlmsghdr *nlh, const struct emu_nic *n, uint32_t type,
		      uint32_t q)
{
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_ID, q);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_IFINDEX, (uint32_t)n->ifindex);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_TYPE, type);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_NAPI_ID, 8192 + q);
	if (type == DMT_NETDEV_QUEUE_TYPE_RX && n->qbinding[q])
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_DMABUF, n->qbinding[q]);
}

static void queue_get(struct reply *r, const struct emu_nic *n, const struct nlattr **tb)
{
	bool dump = r->req->nlmsg_flags & NLM_F_DUMP;
	struct nlmsghdr *nlh;

	if (!dump) {
		uint32_t type = u32_of(tb[DMT_NETDEV_A_QUEUE_TYPE]);
		uint32_t q = u32_of(tb[DMT_NETDEV_A_QUEUE_ID]);
		int miss = !tb[DMT_NETDEV_A_QUEUE_ID] ? DMT_NETDEV_A_QUEUE_ID :
			   !tb[DMT_NETDEV_A_QUEUE_TYPE] ? DMT_NETDEV_A_QUEUE_TYPE : 0;

		if (miss) {
			reply_error(r, -EINVAL, NULL, NULL, miss, NULL);
			return;
		}
		if (type > DMT_NETDEV_QUEUE_TYPE_TX || q >= n->nq) {
			reply_error(r, -EINVAL, NULL, NULL, 0, NULL);
			return;
		}
		nlh = reply_msg(r, r->req->nlmsg_type, 0, DMT_NETDEV_CMD_QUEUE_GET);
		put_queue(nlh, n, type, q);
		reply_end(r, nlh);
		reply_ack(r);
		return;
	}
	for (uint32_t type = 0; type <= 1; type++)
		for (uint32_t q = 0; q < n->nq; q++) {
			nlh = reply_msg(r, r->req->nlmsg_type, NLM_F_MULTI,
					DMT_NETDEV_CMD_QUEUE_GET);
			put_queue(nlh, n, type, q);
			reply_end(r, nlh);
		}
	reply_done(r);
}

static void qstats_row(struct reply *r, const struct emu_nic *n, int type, int q,
		       const struct emu_qstats *s)
{
	struct nlmsghdr *nlh = reply_msg(r, r->req->nlmsg_type, NLM_F_MULTI,
					 DMT_NETDEV_CMD_QSTATS_GET);

	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QSTATS_IFINDEX, (uint32_t)n->ifindex);
	if (q >= 0) {
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_QSTATS_QUEUE_TYPE, (uint32_t)type);
		mnl_attr_put_u32(nlh, DMT_NETDEV_A_QSTATS_QUEUE_ID, (uint32_t)q);
	}
	if (type == DMT_NETDEV_QUEUE_TYPE_RX || q < 0) {
		put_uint(nlh, DMT_NETDEV_A_QSTATS_RX_PACKETS, s[0].packets);
		put_uint(nlh, DMT_NETDEV_A_QSTATS_RX_BYTES, s[0].bytes);
		put_uint(nlh, DMT_NETDEV_A_QSTATS_RX_ALLOC_FAIL, s[0].alloc_fail);
		put_uint(nlh, DMT_NETDEV_A_QSTATS_RX_HW_DROPS, s[0].drops);
	}
	if (type == DMT_NETDEV_QUEUE_TYPE_TX || q < 0) {
		const struct emu_qstats *t = q < 0 ? &s[1] : &s[0];

		put_uint(nlh, DMT_NETDEV_A_QSTATS_TX_PACKETS, t->packets);
		put_uint(nlh, DMT_NETDEV_A_QSTATS_TX_BYTES, t->bytes);
	}
	reply_end(r, nlh);
}

static void qstats_get(struct reply *r, const struct emu_nic *n, const struct nlattr **tb)
{
	if (!(r->req->nlmsg_flags & NLM_F_DUMP)) {
		reply_error(r, -EOPNOTSUPP, NULL, NULL, 0, NULL);
		return;
	}
	if (tb[DMT_NETDEV_A_QSTATS_SCOPE]) {
		for (uint32_t q = 0; q < n->nq; q++)
			qstats_row(r, n, DMT_NETDEV_QUEUE_TYPE_RX, (int)q, &n->rxq[q]);
		for (uint32_t q = 0; q < n->nq; q++)
			qstats_row(r, n, DMT_NETDEV_QUEUE_TYPE_TX, (int)q, &n->txq[q]);
	} else {
		struct emu_qstats sum[2] = { { 0 } };

		for (uint32_t q = 0; q < n->nq; q++) {
			sum[0].packets += n->rxq[q].packets;
			sum[0].bytes += n->rxq[q].bytes;
			sum[0].alloc_fail += n->rxq[q].alloc_fail;
			sum[0].drops += n->rxq[q].drops;
			sum[1].packets += n->txq[q].packets;
			sum[1].bytes += n->txq[q].bytes;
		}
		qstats_row(r, n, -1, -1, sum);
	}
	reply_done(r);
}

/* The kernel cuts a formatted extack message at 79 characters. */
static void extack_fmt(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void extack_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len < 80 ? len : 80, fmt, ap);
	va_end(ap);
}

static void bind_dmabuf(struct reply *r, int nic, const struct nlattr **tb, bool tx)
{
	struct emu_nic *n = &emu_sh->nics[nic];
	const struct nlattr *a, *qtb[MAX_ATTR];
	uint64_t qmask = 0, size, dev, ino;
	uint32_t page = 4096, id;
	uint8_t kind, huge;
	char msg[EMU_MSG_MAX];
	struct emu_binding *b = NULL;
	struct nlmsghdr *nlh;
	int fd, err, miss;

	if (!tx && !emu_cap_net_admin()) {
		reply_error(r, -EPERM, NULL, NULL, 0, NULL);
		return;
	}
	miss = !tb[DMT_NETDEV_A_DMABUF_IFINDEX] ? DMT_NETDEV_A_DMABUF_IFINDEX :
	       !tb[DMT_NETDEV_A_DMABUF_FD] ? DMT_NETDEV_A_DMABUF_FD :
	       !tx && !tb[DMT_NETDEV_A_DMABUF_QUEUES] ? DMT_NETDEV_A_DMABUF_QUEUES : 0;
	if (miss) {
		reply_error(r, -EINVAL, NULL, NULL, miss, NULL);
		return;
	}
	if (tx && tb[DMT_NETDEV_A_DMABUF_QUEUES]) {
		emu_unmodelled("bind-tx with queues");
		reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", NULL, 0, NULL);
		return;
	}
	if (tb[DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE]) {
		page = u32_of(tb[DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE]);
		if (page < 4096) {
			reply_error(r, -EINVAL, "integer out of range",
				    tb[DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE], 0, NULL);
			return;
		}
		if (page & (page - 1)) {
			reply_error(r, -EINVAL, "rx-page-size must be a power of 2",
				    tb[DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE], 0, NULL);
			return;
		}
	}
	/* every queue nest: ID and TYPE, type RX, an existing queue */
	mnl_attr_for_each(a, r->req, sizeof(struct genlmsghdr)) {
		uint32_t q;

		if (mnl_attr_get_type(a) != DMT_NETDEV_A_DMABUF_QUEUES)
			continue;
		nest_attrs(a, qtb);
		miss = !qtb[DMT_NETDEV_A_QUEUE_ID] ? DMT_NETDEV_A_QUEUE_ID :
		       !qtb[DMT_NETDEV_A_QUEUE_TYPE] ? DMT_NETDEV_A_QUEUE_TYPE : 0;
		if (miss) {
			reply_error(r, -EINVAL, NULL, NULL, miss, a);
			return;
		}
		if (u32_of(qtb[DMT_NETDEV_A_QUEUE_TYPE]) != DMT_NETDEV_QUEUE_TYPE_RX) {
			reply_error(r, -EINVAL, NULL, qtb[DMT_NETDEV_A_QUEUE_TYPE], 0, NULL);
			return;
		}
		q = u32_of(qtb[DMT_NETDEV_A_QUEUE_ID]);
		if (q >= n->nq) {
			reply_error(r, -EINVAL, NULL, qtb[DMT_NETDEV_A_QUEUE_ID], 0, NULL);
			return;
		}
		qmask |= 1ull << q;
	}
	if (!tx && !qmask) {
		/* an empty list: nothing to bind (ncdevmem's first check) */
		reply_error(r, -EINVAL, NULL, NULL, 0, NULL);
		return;
	}
	fd = (int)u32_of(tb[DMT_NETDEV_A_DMABUF_FD]);
	err = emu_mem_probe(fd, &size, &kind, &huge, &dev, &ino, msg, sizeof(msg));
	if (err) {
		reply_error(r, err, msg[0] ? msg : NULL, NULL, 0, NULL);
		return;
	}
	if (size % page) {
		reply_error(r, -EINVAL, "dma-buf SG length must be PAGE_SIZE aligned", NULL, 0, NULL);
		return;
	}
	/* the sg entries: 2 MiB ones for huge pages and GPU memory (up to
	 * the sim's 64 KiB NIC pages), page-sized ones for plain shmem */
	if (!tx && page > 4096 && kind == EMU_MEM_CPU && !huge) {
		extack_fmt(msg, sizeof(msg),
			   "dmabuf sg entry (addr=0x%016llx, len=%u) not aligned to niov size %u",
			   0x100000000ull + 4096, 4096u, page);
		reply_error(r, -EINVAL, msg, NULL, 0, NULL);
		return;
	}
	emu_lock();
	emu_reap_locked();
	for (uint32_t q = 0; !tx && q < n->nq; q++) {
		if (!(qmask & (1ull << q)))
			continue;
		if (n->hds_cfg != DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED) {
			emu_unlock();
			reply_error(r, -EINVAL, "tcp-data-split is disabled", NULL, 0, NULL);
			return;
		}
		if (n->hds_thresh) {
			emu_unlock();
			reply_error(r, -EINVAL, "hds-thresh is not zero", NULL, 0, NULL);
			return;
		}
		if (n->qbinding[q]) {
			emu_unlock();
			reply_error(r, -EEXIST, "designated queue already memory provider bound",
				    NULL, 0, NULL);
			return;
		}
		if (page > 65536) {
			emu_unlock();
			snprintf(msg, sizeof(msg),
				 "rx_page_size %u not supported: a power of two from 4096 to 65536", page);
			reply_error(r, -ERANGE, msg, NULL, 0, NULL);
			return;
		}
	}
	for (int i = 0; i < EMU_MAX_BINDINGS && !b; i++)
		if (!emu_sh->bindings[i].used)
			b = &emu_sh->bindings[i];
	if (!b) {
		emu_unlock();
		emu_unmodelled("more than %d bindings", EMU_MAX_BINDINGS);
		reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", NULL, 0, NULL);
		return;
	}
	memset(b, 0, sizeof(*b));
	id = emu_sh->next_binding ? emu_sh->next_binding : 1;
	while (emu_binding_get(id) || !id)
		id++;
	emu_sh->next_binding = id + 1;
	b->used = 1;
	b->id = id;
	b->tx = tx;
	b->mem_kind = kind;
	b->hugetlb = huge;
	b->nic = nic;
	b->qmask = qmask;
	b->page_size = page;
	b->size = size;
	b->npages = (uint32_t)(size / page);
	b->dmabuf_dev = dev;
	b->dmabuf_ino = ino;
	b->owner_pid = getpid();
	b->owner_start = emu_proc_start(getpid());
	b->sock_ino = r->f->ino;
	/* the binding holds the dma-buf, whatever the caller does with its fd */
	b->mem_fd = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	if (!tx && !emu_pool_map(b, true)) {
		emu_real.close(b->mem_fd);
		memset(b, 0, sizeof(*b));
		emu_unlock();
		reply_error(r, -ENOMEM, NULL, NULL, 0, NULL);
		return;
	}
	for (uint32_t q = 0; !tx && q < n->nq; q++)
		if (qmask & (1ull << q)) {
			n->qbinding[q] = id;
			n->qpage[q] = page;
		}
	emu_unlock();
	nlh = reply_msg(r, r->req->nlmsg_type, 0,
			tx ? DMT_NETDEV_CMD_BIND_TX : DMT_NETDEV_CMD_BIND_RX);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_DMABUF_ID, id);
	reply_end(r, nlh);
	reply_ack(r);
}

/* The NIC a netdev request names (by its ifindex attribute), -1: none of
 * ours, -2: a request about every device of a namespace with one. */
static int netdev_target(struct reply *r, uint8_t cmd, const struct nlattr **tb)
{
	int attr;

	switch (cmd) {
	case DMT_NETDEV_CMD_QUEUE_GET:
		attr = DMT_NETDEV_A_QUEUE_IFINDEX;
		break;
	case DMT_NETDEV_CMD_QSTATS_GET:
		attr = DMT_NETDEV_A_QSTATS_IFINDEX;
		break;
	default:
		attr = 1;	/* DEV_IFINDEX, DMABUF_IFINDEX, ... */
	}
	if (!tb[attr]) {
		for (int i = 0; i < EMU_MAX_NICS; i++)
			if (emu_sh->nics[i].used && emu_sh->nics[i].netns_ino == r->f->netns)
				return -2;
		return -1;
	}
	return emu_nic_by_index(r->f->netns, (int)u32_of(tb[attr]));
}

static int netdev_request(struct reply *r)
{
	const struct genlmsghdr *g = mnl_nlmsg_get_payload(r->req);
	const struct nlattr *tb[MAX_ATTR];
	int nic;

	req_attrs(r->req, tb);
	nic = netdev_target(r, g->cmd, tb);
	if (nic == -1)
		return 0;
	if (nic == -2 && g->cmd != DMT_NETDEV_CMD_QUEUE_GET &&
	    g->cmd != DMT_NETDEV_CMD_QSTATS_GET && g->cmd != DMT_NETDEV_CMD_DEV_GET)
		goto unmodelled;
	if (nic == -2) {
		if (g->cmd == DMT_NETDEV_CMD_DEV_GET)
			return 0;	/* the real devices' xdp features */
		goto unmodelled;
	}
	switch (g->cmd) {
	case DMT_NETDEV_CMD_QUEUE_GET:
		queue_get(r, &emu_sh->nics[nic], tb);
		return 1;
	case DMT_NETDEV_CMD_QSTATS_GET:
		qstats_get(r, &emu_sh->nics[nic], tb);
		return 1;
	case DMT_NETDEV_CMD_BIND_RX:
		bind_dmabuf(r, nic, tb, false);
		return 1;
	case DMT_NETDEV_CMD_BIND_TX:
		bind_dmabuf(r, nic, tb, true);
		return 1;
	}
unmodelled:
	emu_unmodelled("netdev command %u%s%s", g->cmd, nic >= 0 ? " on " : " (all devices)",
		       nic >= 0 ? emu_sh->nics[nic].ifname : "");
	reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: request not modelled", NULL, 0, NULL);
	return 1;
}

/* ---- the ethtool family ----------------------------------------------------- */

static void put_header(struct nlmsghdr *nlh, const struct emu_nic *n)
{
	struct nlattr *nest = mnl_attr_nest_start(nlh, 1);

	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_HEADER_DEV_INDEX, (uint32_t)n->ifindex);
	mnl_attr_put_strz(nlh, DMT_ETHTOOL_A_HEADER_DEV_NAME, n->ifname);
	mnl_attr_nest_end(nlh, nest);
}

static void rings_get(struct reply *r, const struct emu_nic *n)
{
	struct nlmsghdr *nlh = reply_msg(r, r->req->nlmsg_type, 0,
					 DMT_ETHTOOL_MSG_RINGS_GET_REPLY);

	put_header(nlh, n);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX_MAX, EMU_RING_MAX);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_TX_MAX, EMU_RING_MAX);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_RX, n->rx_ring);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_TX, n->tx_ring);
	mnl_attr_put_u8(nlh, DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT,
			n->hds ? DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED
			       : DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH, n->hds_thresh);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RINGS_HDS_THRESH_MAX, EMU_HDS_MAX);
	reply_end(r, nlh);
	reply_ack(r);
}

static bool any_binding(const struct emu_nic *n)
{
	for (uint32_t q = 0; q < n->nq; q++)
		if (n->qbinding[q])
			return true;
	return false;
}

static void rings_set(struct reply *r, struct emu_nic *n, const struct nlattr **tb)
{
	static const int known[] = { 1, DMT_ETHTOOL_A_RINGS_RX, DMT_ETHTOOL_A_RINGS_TX,
				     DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT,
				     DMT_ETHTOOL_A_RINGS_HDS_THRESH };
	uint32_t rx = n->rx_ring, tx = n->tx_ring, hds_thresh = n->hds_thresh;
	uint8_t tds = n->hds_cfg;

	for (int t = 0; t < MAX_ATTR; t++) {
		bool ok = !tb[t];

		for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			ok |= known[k] == t;
		if (!ok) {
			emu_unmodelled("rings-set attribute %d on %s", t, n->ifname);
			reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", tb[t], 0, NULL);
			return;
		}
	}
	if (!emu_cap_net_admin()) {
		reply_error(r, -EPERM, NULL, NULL, 0, NULL);
		return;
	}
	if (tb[DMT_ETHTOOL_A_RINGS_RX])
		rx = u32_of(tb[DMT_ETHTOOL_A_RINGS_RX]);
	if (tb[DMT_ETHTOOL_A_RINGS_TX])
		tx = u32_of(tb[DMT_ETHTOOL_A_RINGS_TX]);
	if (tb[DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT])
		tds = mnl_attr_get_u8(tb[DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT]);
	if (tb[DMT_ETHTOOL_A_RINGS_HDS_THRESH])
		hds_thresh = u32_of(tb[DMT_ETHTOOL_A_RINGS_HDS_THRESH]);
	if (rx > EMU_RING_MAX || tx > EMU_RING_MAX) {
		reply_error(r, -EINVAL, "requested ring size exceeds maximum",
			    tb[rx > EMU_RING_MAX ? DMT_ETHTOOL_A_RINGS_RX : DMT_ETHTOOL_A_RINGS_TX],
			    0, NULL);
		return;
	}
	if (hds_thresh > EMU_HDS_MAX) {
		reply_error(r, -ERANGE, NULL, tb[DMT_ETHTOOL_A_RINGS_HDS_THRESH], 0, NULL);
		return;
	}
	if (tds > DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED) {
		reply_error(r, -EINVAL, NULL, tb[DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT], 0, NULL);
		return;
	}
	emu_lock();
	emu_reap_locked();
	if (any_binding(n)) {
		const char *why = NULL;

		if (tds != DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED)
			why = "can't disable tcp-data-split while device has memory provider enabled";
		else if (hds_thresh)
			why = "can't set non-zero hds_thresh while device is memory provider enabled";
		if (why) {
			emu_unlock();
			reply_error(r, -EINVAL, why, NULL, 0, NULL);
			return;
		}
	}
	if (rx < EMU_RING_MIN || tx < EMU_RING_MIN) {
		emu_unlock();
		reply_error(r, -EINVAL, "ring size out of range (64..4096)", NULL, 0, NULL);
		return;
	}
	n->hds_cfg = tds;
	n->hds = tds == DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	n->hds_thresh = hds_thresh;
	n->rx_ring = rx;
	n->tx_ring = tx;
	emu_unlock();
	reply_ack(r);
}

static void channels_get(struct reply *r, const struct emu_nic *n)
{
	struct nlmsghdr *nlh = reply_msg(r, r->req->nlmsg_type, 0,
					 DMT_ETHTOOL_MSG_CHANNELS_GET_REPLY);

	put_header(nlh, n);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_CHANNELS_COMBINED_MAX, n->nq);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT, n->nq);
	reply_end(r, nlh);
	reply_ack(r);
}

/* The feature bits the emulated NIC reports (verbose bitsets). */
#define NTUPLE_BIT 36		/* NETIF_F_NTUPLE_BIT */
#define RXHASH_BIT 37		/* NETIF_F_RXHASH_BIT */

static void put_bitset(struct nlmsghdr *nlh, uint16_t type, bool ntuple, bool rxhash)
{
	struct nlattr *bs = mnl_attr_nest_start(nlh, type), *bits, *bit;

	mnl_attr_put(nlh, DMT_ETHTOOL_A_BITSET_NOMASK, 0, NULL);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_BITSET_SIZE, 64);
	bits = mnl_attr_nest_start(nlh, DMT_ETHTOOL_A_BITSET_BITS);
	if (ntuple) {
		bit = mnl_attr_nest_start(nlh, DMT_ETHTOOL_A_BITSET_BITS_BIT);
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_BITSET_BIT_INDEX, NTUPLE_BIT);
		mnl_attr_put_strz(nlh, DMT_ETHTOOL_A_BITSET_BIT_NAME, "rx-ntuple-filter");
		mnl_attr_nest_end(nlh, bit);
	}
	if (rxhash) {
		bit = mnl_attr_nest_start(nlh, DMT_ETHTOOL_A_BITSET_BITS_BIT);
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_BITSET_BIT_INDEX, RXHASH_BIT);
		mnl_attr_put_strz(nlh, DMT_ETHTOOL_A_BITSET_BIT_NAME, "rx-hashing");
		mnl_attr_nest_end(nlh, bit);
	}
	mnl_attr_nest_end(nlh, bits);
	mnl_attr_nest_end(nlh, bs);
}

static uint32_t header_flags(const struct nlattr **tb)
{
	const struct nlattr *htb[MAX_ATTR];

	if (!tb[1])
		return 0;
	nest_attrs(tb[1], htb);
	return u32_of(htb[DMT_ETHTOOL_A_HEADER_FLAGS]);
}

static void features_get(struct reply *r, const struct emu_nic *n, const struct nlattr **tb)
{
	struct nlmsghdr *nlh;

	if (header_flags(tb) & DMT_ETHTOOL_FLAG_COMPACT_BITSETS) {
		emu_unmodelled("features-get with compact bitsets on %s", n->ifname);
		reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", NULL, 0, NULL);
		return;
	}
	nlh = reply_msg(r, r->req->nlmsg_type, 0, DMT_ETHTOOL_MSG_FEATURES_GET_REPLY);
	put_header(nlh, n);
	put_bitset(nlh, DMT_ETHTOOL_A_FEATURES_HW, true, true);
	put_bitset(nlh, DMT_ETHTOOL_A_FEATURES_WANTED, n->ntuple, true);
	put_bitset(nlh, DMT_ETHTOOL_A_FEATURES_ACTIVE, n->ntuple, true);
	put_bitset(nlh, DMT_ETHTOOL_A_FEATURES_NOCHANGE, false, false);
	reply_end(r, nlh);
	reply_ack(r);
}

static void features_set(struct reply *r, struct emu_nic *n, const struct nlattr **tb)
{
	const struct nlattr *bs = tb[DMT_ETHTOOL_A_FEATURES_WANTED], *btb[MAX_ATTR], *a, *b;
	int want = -1;

	if (!(header_flags(tb) & DMT_ETHTOOL_FLAG_OMIT_REPLY) || !bs) {
		emu_unmodelled("features-set without ETHTOOL_FLAG_OMIT_REPLY or WANTED on %s",
			       n->ifname);
		reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", NULL, 0, NULL);
		return;
	}
	nest_attrs(bs, btb);
	if (btb[DMT_ETHTOOL_A_BITSET_NOMASK] || !btb[DMT_ETHTOOL_A_BITSET_BITS])
		goto unmodelled;
	mnl_attr_for_each_nested(a, btb[DMT_ETHTOOL_A_BITSET_BITS]) {
		const char *name = NULL;
		bool value = false;

		mnl_attr_for_each_nested(b, a) {
			if (mnl_attr_get_type(b) == DMT_ETHTOOL_A_BITSET_BIT_NAME)
				name = mnl_attr_get_str(b);
			else if (mnl_attr_get_type(b) == DMT_ETHTOOL_A_BITSET_BIT_VALUE)
				value = true;
		}
		if (!name || strcmp(name, "rx-ntuple-filter"))
			goto unmodelled;
		want = value;
	}
	if (!emu_cap_net_admin()) {
		reply_error(r, -EPERM, NULL, NULL, 0, NULL);
		return;
	}
	emu_lock();
	if (want == 0 && n->ntuple) {
		/* the sim drops its rules with the feature */
		memset(n->rules, 0, sizeof(n->rules));
		n->nrules = 0;
	}
	if (want >= 0)
		n->ntuple = (uint8_t)want;
	emu_unlock();
	reply_ack(r);
	return;
unmodelled:
	emu_unmodelled("features-set of a feature other than rx-ntuple-filter on %s", n->ifname);
	reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", NULL, 0, NULL);
}

static void rss_msg(struct reply *r, const struct emu_nic *n, uint32_t ctx, uint16_t flags)
{
	struct nlmsghdr *nlh = reply_msg(r, r->req->nlmsg_type, flags,
					 DMT_ETHTOOL_MSG_RSS_GET_REPLY);

	put_header(nlh, n);
	if (ctx)
		mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_CONTEXT, ctx);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_HFUNC, EMU_RSS_HASH_TOP);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RSS_INDIR, sizeof(n->indir),
		     ctx ? n->ctx_indir[ctx] : n->indir);
	mnl_attr_put(nlh, DMT_ETHTOOL_A_RSS_HKEY, EMU_KEY, n->key);
	mnl_attr_put_u32(nlh, DMT_ETHTOOL_A_RSS_INPUT_XFRM, 0);
	reply_end(r, nlh);
}

static void rss_get(struct reply *r, const struct emu_nic *n, const struct nlattr **tb)
{
	uint32_t ctx = u32_of(tb[DMT_ETHTOOL_A_RSS_CONTEXT]);

	if (r->req->nlmsg_flags & NLM_F_DUMP) {
		rss_msg(r, n, 0, NLM_F_MULTI);
		for (uint32_t c = 1; c < EMU_MAX_CTX; c++)
			if (n->ctx_used[c])
				rss_msg(r, n, c, NLM_F_MULTI);
		reply_done(r);
		return;
	}
	if (ctx && (ctx >= EMU_MAX_CTX || !n->ctx_used[ctx])) {
		reply_error(r, -ENOENT, NULL, NULL, 0, NULL);
		return;
	}
	rss_msg(r, n, ctx, 0);
	reply_ack(r);
}

void emu_fill_indir(uint32_t *indir, uint32_t nq)
{
	for (uint32_t i = 0; i < EMU_INDIR; i++)
		indir[i] = i % nq;
}

static void rss_set(struct reply *r, struct emu_nic *n, const struct nlattr **tb)
{
	const struct nlattr *in = tb[DMT_ETHTOOL_A_RSS_INDIR];
	uint32_t ctx = u32_of(tb[DMT_ETHTOOL_A_RSS_CONTEXT]);
	uint32_t cnt = in ? mnl_attr_get_payload_len(in) / 4 : 0;
	const uint32_t *v = in ? mnl_attr_get_payload(in) : NULL;

	for (int t = 0; t < MAX_ATTR; t++)
		if (tb[t] && t != 1 && t != DMT_ETHTOOL_A_RSS_CONTEXT &&
		    t != DMT_ETHTOOL_A_RSS_INDIR &&
		    !(t == DMT_ETHTOOL_A_RSS_HFUNC &&
		      (u32_of(tb[t]) == 0 || u32_of(tb[t]) == EMU_RSS_HASH_TOP))) {
			emu_unmodelled("rss-set attribute %d on %s", t, n->ifname);
			reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: not modelled", tb[t], 0, NULL);
			return;
		}
	if (!emu_cap_net_admin()) {
		reply_error(r, -EPERM, NULL, NULL, 0, NULL);
		return;
	}
	if (ctx && (ctx >= EMU_MAX_CTX || !n->ctx_used[ctx])) {
		reply_error(r, -ENOENT, NULL, NULL, 0, NULL);
		return;
	}
	if (in && ((mnl_attr_get_payload_len(in) % 4) || (cnt && cnt != EMU_INDIR))) {
		reply_error(r, -EINVAL, NULL, in, 0, NULL);
		return;
	}
	for (uint32_t i = 0; i < cnt; i++)
		if (v[i] >= n->nq) {
			reply_error(r, -EINVAL, NULL, in, 0, NULL);
			return;
		}
	emu_lock();
	if (in) {
		uint32_t *dst = ctx ? n->ctx_indir[ctx] : n->indir;

		if (cnt)
			memcpy(dst, v, sizeof(n->indir));
		else
			emu_fill_indir(dst, n->nq);
		if (!ctx)
			n->rxfh_configured = cnt != 0;
	}
	emu_unlock();
	reply_ack(r);
}

/* The NIC an ethtool request's header names, -1: none of ours, -2: every
 * device of a namespace with one of ours. */
static int ethtool_target(struct reply *r, const struct nlattr **tb)
{
	const struct nlattr *htb[MAX_ATTR];

	if (tb[1]) {
		nest_attrs(tb[1], htb);
		if (htb[DMT_ETHTOOL_A_HEADER_DEV_INDEX])
			return emu_nic_by_index(r->f->netns,
						(int)u32_of(htb[DMT_ETHTOOL_A_HEADER_DEV_INDEX]));
		if (htb[DMT_ETHTOOL_A_HEADER_DEV_NAME])
			return emu_nic_by_name(r->f->netns,
					       mnl_attr_get_str(htb[DMT_ETHTOOL_A_HEADER_DEV_NAME]));
	}
	for (int i = 0; i < EMU_MAX_NICS; i++)
		if (emu_sh->nics[i].used && emu_sh->nics[i].netns_ino == r->f->netns)
			return -2;
	return -1;
}

static int ethtool_request(struct reply *r)
{
	const struct genlmsghdr *g = mnl_nlmsg_get_payload(r->req);
	const struct nlattr *tb[MAX_ATTR];
	struct emu_nic *n;
	int nic;

	req_attrs(r->req, tb);
	nic = ethtool_target(r, tb);
	if (nic == -1)
		return 0;
	if (nic == -2)
		goto unmodelled;
	n = &emu_sh->nics[nic];
	switch (g->cmd) {
	case DMT_ETHTOOL_MSG_RINGS_GET:
		rings_get(r, n);
		return 1;
	case DMT_ETHTOOL_MSG_RINGS_SET:
		rings_set(r, n, tb);
		return 1;
	case DMT_ETHTOOL_MSG_CHANNELS_GET:
		channels_get(r, n);
		return 1;
	case DMT_ETHTOOL_MSG_FEATURES_GET:
		features_get(r, n, tb);
		return 1;
	case DMT_ETHTOOL_MSG_FEATURES_SET:
		features_set(r, n, tb);
		return 1;
	case DMT_ETHTOOL_MSG_RSS_GET:
		rss_get(r, n, tb);
		return 1;
	case DMT_ETHTOOL_MSG_RSS_SET:
		rss_set(r, n, tb);
		return 1;
	}
unmodelled:
	emu_unmodelled("ethtool netlink command %u%s%s", g->cmd,
		       nic >= 0 ? " on " : " (every device)", nic >= 0 ? n->ifname : "");
	reply_error(r, -EOPNOTSUPP, "devmemtcp-emu: request not modelled", NULL, 0, NULL);
	return 1;
}

int emu_nl_send(int fd, const void *buf, size_t len, ssize_t *ret)
{
	const struct nlmsghdr *nlh = buf;
	struct reply r = { .fd = fd, .req = nlh };
	int handled = 0;

	if (!emu_on() || len < sizeof(*nlh) || nlh->nlmsg_len > len ||
	    nlh->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN)
		return 0;
	pthread_once(&fam_once, families);
	if (!nlh->nlmsg_type || (nlh->nlmsg_type != fam_netdev &&
				 nlh->nlmsg_type != fam_ethtool))
		return 0;
	pthread_mutex_lock(&nl_lock);
	r.f = nlfd_get(fd);
	if (!r.f || !r.f->genl) {
		pthread_mutex_unlock(&nl_lock);
		return 0;
	}
	if (NLMSG_ALIGN(nlh->nlmsg_len) < len) {
		pthread_mutex_unlock(&nl_lock);
		emu_unmodelled("a batch of several netlink requests in one send");
		errno = EOPNOTSUPP;
		*ret = -1;
		return 1;
	}
	r.buf = malloc(REPLY_MAX);
	if (!r.buf) {
		pthread_mutex_unlock(&nl_lock);
		return 0;
	}
	r.ext_ack = sockopt_on(fd, NETLINK_EXT_ACK);
	r.cap_ack = sockopt_on(fd, NETLINK_CAP_ACK);
	if (nlh->nlmsg_type == fam_netdev)
		handled = netdev_request(&r);
	else
		handled = ethtool_request(&r);
	if (getenv("DEVMEMTCP_EMU_DEBUG"))
		emu_log("netlink %s command %u: %s", nlh->nlmsg_type == fam_netdev ? "netdev" : "ethtool",
			((const struct genlmsghdr *)mnl_nlmsg_get_payload(nlh))->cmd,
			handled ? "emulated" : "to the kernel");
	reply_flush(&r);
	pthread_mutex_unlock(&nl_lock);
	free(r.buf);
	if (handled)
		*ret = (ssize_t)len;
	return handled;
}
