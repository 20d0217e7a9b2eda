// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The devmemtcp-broker protocol (broker.h): building requests and
 * checking every field of what arrives, in both directions.  Pure
 * functions: the broker's request parser is fuzzed (tests/fuzz).
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"
#include "core/internal.h"
#include "nic/nic.h"

_Static_assert(sizeof(struct dmt_brk_hdr) == 16, "header layout");
_Static_assert(sizeof(struct dmt_brk_flow) == 88, "flow layout");
_Static_assert(sizeof(struct dmt_brk_open) == 40, "open layout");
_Static_assert(sizeof(struct dmt_brk_add_flow) == 96, "add-flow layout");
_Static_assert(sizeof(struct dmt_brk_bind) == 16, "bind layout");
_Static_assert(offsetof(struct dmt_brk_reply, u) % 8 == 0, "reply layout");
_Static_assert(offsetof(struct dmt_brk_open_reply, setup_round_trips) % 8 == 0,
	       "open reply layout");
_Static_assert(offsetof(struct dmt_brk_policy_reply, udmabuf_max) % 8 == 0,
	       "policy reply layout");
_Static_assert(sizeof(struct dmt_brk_reply) % 8 == 0, "reply size");
/* version 1's reply: its largest answer, the policy's, ended at conf */
_Static_assert(offsetof(struct dmt_brk_reply, u) +
	       offsetof(struct dmt_brk_policy_reply, nqranges) == DMT_BRK_REPLY_V1_SIZE &&
	       sizeof(struct dmt_brk_open_reply) <= DMT_BRK_REPLY_V1_SIZE -
	       offsetof(struct dmt_brk_reply, u), "version 1 reply layout");
_Static_assert(sizeof(struct dmt_brk_reply) == 1480, "reply size");
_Static_assert(DMT_MAX_QUEUES <= 65536, "queue ids in 16 bits");
_Static_assert(DMT_BRK_ERRMSG_MAX == DMT_ERRMSG_MAX, "a reply carries a whole message");
_Static_assert(DMT_BRK_QUEUE_IDS == DMT_MAX_QUEUES, "the queue ids the library takes");

static const char *const type_names[DMT_BRK_TYPE_END] = {
	[DMT_BRK_OPEN] = "open",
	[DMT_BRK_CLOSE] = "close",
	[DMT_BRK_ADD_FLOW] = "add-flow",
	[DMT_BRK_REMOVE_FLOW] = "remove-flow",
	[DMT_BRK_BIND_RX] = "bind-rx",
	[DMT_BRK_BIND_TX] = "bind-tx",
	[DMT_BRK_UDMABUF] = "udmabuf",
	[DMT_BRK_POLICY] = "policy",
};

const char *dmt_brk_type_name(unsigned int type, char *buf, size_t len)
{
	if (type && type < DMT_BRK_TYPE_END)
		return type_names[type];
	snprintf(buf, len, "request type %u", type);
	return buf;
}

void dmt_brk_hdr_init(struct dmt_brk_hdr *h, unsigned int type, size_t body,
		      uint32_t seq)
{
	h->magic = DMT_BRK_MAGIC;
	h->version = DMT_BRK_VERSION;
	h->type = (uint16_t)type;
	h->len = (uint32_t)(sizeof(*h) + body);
	h->seq = seq;
}

size_t dmt_brk_reply_init(struct dmt_brk_reply *r, const struct dmt_brk_req *q)
{
	size_t len = q->version == 1 ? DMT_BRK_REPLY_V1_SIZE : sizeof(*r);

	dmt_brk_hdr_init(&r->hdr, q->type | DMT_BRK_REPLY, len - sizeof(r->hdr), q->seq);
	if (q->version == 1)
		r->hdr.version = 1;
	return len;
}

void dmt_brk_flow_to_wire(const struct devmemtcp_flow *f, struct dmt_brk_flow *w)
{
	memset(w, 0, sizeof(*w));
	w->family = (uint32_t)f->family;
	w->flags = f->flags;
	memcpy(w->src_addr, f->src_addr, 16);
	memcpy(w->src_mask, f->src_mask, 16);
	memcpy(w->dst_addr, f->dst_addr, 16);
	memcpy(w->dst_mask, f->dst_mask, 16);
	w->src_port = f->src_port;
	w->src_port_mask = f->src_port_mask;
	w->dst_port = f->dst_port;
	w->dst_port_mask = f->dst_port_mask;
	w->queue = f->queue;
}

int dmt_brk_flow_from_wire(const struct dmt_brk_flow *w, struct devmemtcp_flow *f,
			   char *why, size_t whylen)
{
	if (w->family != AF_INET && w->family != AF_INET6) {
		snprintf(why, whylen, "family %u is neither AF_INET nor AF_INET6", w->family);
		return -EINVAL;
	}
	if (w->flags & ~(uint32_t)DEVMEMTCP_FLOW_QUEUE) {
		snprintf(why, whylen, "unknown flow flags 0x%x", w->flags);
		return -EINVAL;
	}
	if (w->reserved) {
		snprintf(why, whylen, "a reserved flow field is not zero");
		return -EINVAL;
	}
	memset(f, 0, sizeof(*f));
	f->family = (int)w->family;
	f->flags = w->flags;
	memcpy(f->src_addr, w->src_addr, 16);
	memcpy(f->src_mask, w->src_mask, 16);
	memcpy(f->dst_addr, w->dst_addr, 16);
	memcpy(f->dst_mask, w->dst_mask, 16);
	f->src_port = w->src_port;
	f->src_port_mask = w->src_port_mask;
	f->dst_port = w->dst_port;
	f->dst_port_mask = w->dst_port_mask;
	f->queue = w->queue;
	return 0;
}

/* An interface name field: a valid name, NUL-terminated, zero after. */
static int ifname_field(const char *field, char *out, char *why, size_t whylen)
{
	size_t n = strnlen(field, IF_NAMESIZE);

	if (n == IF_NAMESIZE || !dmt_ifname_valid(field, n)) {
		snprintf(why, whylen,
			 "the interface name is not a valid name (1-15 printable bytes, no '/', ':' or blank)");
		return -EINVAL;
	}
	for (size_t i = n; i < IF_NAMESIZE; i++) {
		if (field[i]) {
			snprintf(why, whylen, "bytes after the interface name are not zero");
			return -EINVAL;
		}
	}
	memcpy(out, field, IF_NAMESIZE);
	return 0;
}

/* The body is exactly want bytes. */
static int body_size(size_t have, size_t want, const char *what, char *why,
		     size_t whylen)
{
	if (have == want)
		return 0;
	snprintf(why, whylen, "a %s request of %zu body bytes, not %zu", what, have, want);
	return -EINVAL;
}

static int parse_ids(const uint8_t *p, uint32_t n, uint32_t *out, const char *what,
		     char *why, size_t whylen)
{
	memcpy(out, p, (size_t)n * sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++) {
		if (out[i] >= DMT_MAX_QUEUES) {
			snprintf(why, whylen, "%s %u is out of range", what, out[i]);
			return -EINVAL;
		}
		for (uint32_t k = 0; k < i; k++) {
			if (out[k] == out[i]) {
				snprintf(why, whylen, "%s %u is listed twice", what, out[i]);
				return -EINVAL;
			}
		}
	}
	return 0;
}

static int parse_open(const uint8_t *b, size_t n, struct dmt_brk_req *req,
		      char *why, size_t whylen)
{
	struct dmt_brk_open o;
	size_t want;
	int err;

	if (n < sizeof(o))
		return body_size(n, sizeof(o), "open", why, whylen);
	memcpy(&o, b, sizeof(o));
	err = ifname_field(o.ifname, req->u.open.ifname, why, whylen);
	if (err)
		return err;
	if (o.flags & ~DMT_BRK_OPEN_KNOWN || o.reserved) {
		snprintf(why, whylen, "unknown open flags 0x%x or a reserved field set",
			 o.flags & ~DMT_BRK_OPEN_KNOWN);
		return -EINVAL;
	}
	if (o.nids > DMT_BRK_MAX_QUEUES || o.nqueues > DMT_BRK_MAX_QUEUES ||
	    o.nflows > DMT_BRK_MAX_FLOWS) {
		snprintf(why, whylen,
			 "%u queue ids, %u queues, %u flows: at most %u queues and %u flows go in one open",
			 o.nids, o.nqueues, o.nflows, DMT_BRK_MAX_QUEUES, DMT_BRK_MAX_FLOWS);
		return -EINVAL;
	}
	want = sizeof(o) + o.nids * sizeof(uint32_t) + o.nflows * sizeof(struct dmt_brk_flow);
	err = body_size(n, want, "open", why, whylen);
	if (!err)
		err = parse_ids(b + sizeof(o), o.nids, req->u.open.ids, "queue", why, whylen);
	b += sizeof(o) + o.nids * sizeof(uint32_t);
	for (uint32_t i = 0; i < o.nflows && !err; i++) {
		struct dmt_brk_flow w;

		memcpy(&w, b + i * sizeof(w), sizeof(w));
		err = dmt_brk_flow_from_wire(&w, &req->u.open.flows[i], why, whylen);
	}
	if (err)
		return err;
	req->u.open.flags = o.flags;
	req->u.open.nqueues = o.nqueues;
	req->u.open.nids = o.nids;
	req->u.open.nflows = o.nflows;
	req->u.open.rx_page_size = o.rx_page_size;
	return 0;
}

static int parse_handle(const uint8_t *b, size_t n, unsigned int type,
			struct dmt_brk_req *req, char *why, size_t whylen)
{
	struct dmt_brk_add_flow a;
	struct dmt_brk_handle h;
	int err;

	if (type == DMT_BRK_ADD_FLOW) {
		err = body_size(n, sizeof(a), "add-flow", why, whylen);
		if (err)
			return err;
		memcpy(&a, b, sizeof(a));
		if (a.reserved) {
			snprintf(why, whylen, "a reserved field is not zero");
			return -EINVAL;
		}
		req->u.h.handle = a.handle;
		return dmt_brk_flow_from_wire(&a.flow, &req->u.h.flow, why, whylen);
	}
	err = body_size(n, sizeof(h), type == DMT_BRK_CLOSE ? "close" : "remove-flow",
			why, whylen);
	if (err)
		return err;
	memcpy(&h, b, sizeof(h));
	if (type == DMT_BRK_CLOSE && h.flow_id) {
		snprintf(why, whylen, "a close names no flow");
		return -EINVAL;
	}
	req->u.h.handle = h.handle;
	req->u.h.flow_id = h.flow_id;
	return 0;
}

static int parse_bind(const uint8_t *b, size_t n, bool tx, struct dmt_brk_req *req,
		      char *why, size_t whylen)
{
	const char *what = tx ? "bind-tx" : "bind-rx";
	struct dmt_brk_bind r;
	int err;

	if (n < sizeof(r))
		return body_size(n, sizeof(r), what, why, whylen);
	memcpy(&r, b, sizeof(r));
	if (r.flags & ~DMT_BRK_BIND_NO_VERIFY || r.ifindex == 0 || r.ifindex > INT32_MAX) {
		snprintf(why, whylen, "%s: ifindex %u or flags 0x%x out of range", what,
			 r.ifindex, r.flags);
		return -EINVAL;
	}
	if (tx ? r.nqueues || r.rx_page_size : !r.nqueues || r.nqueues > DMT_BRK_MAX_QUEUES) {
		snprintf(why, whylen, "%s with %u queues and rx_page_size %u", what,
			 r.nqueues, r.rx_page_size);
		return -EINVAL;
	}
	err = body_size(n, sizeof(r) + r.nqueues * sizeof(uint32_t), what, why, whylen);
	if (!err)
		err = parse_ids(b + sizeof(r), r.nqueues, req->u.bind.queues, "queue", why,
				whylen);
	if (err)
		return err;
	req->u.bind.ifindex = r.ifindex;
	req->u.bind.nqueues = r.nqueues;
	req->u.bind.rx_page_size = r.rx_page_size;
	req->u.bind.flags = r.flags;
	return 0;
}

static int parse_body(const uint8_t *b, size_t n, struct dmt_brk_req *req, char *why,
		      size_t whylen)
{
	struct dmt_brk_udmabuf u;
	struct dmt_brk_policy p;
	int err;

	switch (req->type) {
	case DMT_BRK_OPEN:
		return parse_open(b, n, req, why, whylen);
	case DMT_BRK_CLOSE:
	case DMT_BRK_ADD_FLOW:
	case DMT_BRK_REMOVE_FLOW:
		return parse_handle(b, n, req->type, req, why, whylen);
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX:
		return parse_bind(b, n, req->type == DMT_BRK_BIND_TX, req, why, whylen);
	case DMT_BRK_UDMABUF:
		err = body_size(n, sizeof(u), "udmabuf", why, whylen);
		if (err)
			return err;
		memcpy(&u, b, sizeof(u));
		if (u.flags || u.reserved) {
			snprintf(why, whylen, "udmabuf: flags or reserved field set");
			return -EINVAL;
		}
		return 0;
	case DMT_BRK_POLICY:
		err = body_size(n, sizeof(p), "policy", why, whylen);
		if (err)
			return err;
		memcpy(&p, b, sizeof(p));
		return ifname_field(p.ifname, req->u.policy.ifname, why, whylen);
	}
	snprintf(why, whylen, "unknown request type %u", req->type);
	return -EINVAL;
}

/* The fds a request carries: 1 or 0. */
static int fds_wanted(const struct dmt_brk_req *req)
{
	switch (req->type) {
	case DMT_BRK_OPEN:
		return !!(req->u.open.flags & DMT_BRK_OPEN_BIND);
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX:
	case DMT_BRK_UDMABUF:
		return 1;
	}
	return 0;
}

int dmt_brk_req_parse(const void *msg, size_t len, bool trunc, int nfds, int fd,
		      struct dmt_brk_req *req, char *why, size_t whylen)
{
	struct dmt_brk_hdr h;
	int err, want;

	memset(req, 0, sizeof(*req));
	req->fd = -1;
	if (len >= sizeof(h)) {
		memcpy(&h, msg, sizeof(h));
		req->type = h.type;
		req->version = h.magic == DMT_BRK_MAGIC ? h.version : 0;
		req->seq = h.seq;
	}
	if (trunc || len > DMT_BRK_MSG_MAX) {
		snprintf(why, whylen, "a message of more than %d bytes", DMT_BRK_MSG_MAX);
		return -EMSGSIZE;
	}
	if (len < sizeof(h) || h.magic != DMT_BRK_MAGIC) {
		snprintf(why, whylen, "not a devmemtcp-broker request (%zu bytes, no magic)", len);
		return -EPROTO;
	}
	if (h.version != DMT_BRK_VERSION) {
		snprintf(why, whylen,
			 "protocol version %u: this broker speaks version %u (run a libdevmemtcp and a devmemtcp-broker of one release)",
			 h.version, DMT_BRK_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (h.len != len) {
		snprintf(why, whylen, "the header says %u bytes but the message has %zu",
			 h.len, len);
		return -EINVAL;
	}
	err = parse_body((const uint8_t *)msg + sizeof(h), len - sizeof(h), req, why, whylen);
	if (err)
		return err;
	want = fds_wanted(req);
	if (nfds == DMT_BRK_NFDS_SOME && !want) {
		char tn[32];

		snprintf(why, whylen, "file descriptors came with a %s request, which takes none",
			 dmt_brk_type_name(req->type, tn, sizeof(tn)));
		return -EINVAL;
	}
	if (nfds != want && nfds != DMT_BRK_NFDS_SOME) {
		snprintf(why, whylen, "%d file descriptors came with it, not %d", nfds, want);
		return -EINVAL;
	}
	req->fd = want && nfds == 1 ? fd : -1;
	return 0;
}

/* The queue id ranges of a policy answer: increasing, disjoint, ids in
 * range. */
static int reply_qranges(const struct dmt_brk_policy_reply *p, char *why, size_t whylen)
{
	if (p->nqranges > DMT_BRK_MAX_QRANGES || p->reserved) {
		snprintf(why, whylen, "a policy reply with %u queue id ranges or a reserved field set",
			 p->nqranges);
		return -EPROTO;
	}
	for (uint32_t i = 0; i < p->nqranges; i++) {
		unsigned int lo = p->qranges[i][0], hi = p->qranges[i][1];

		if (lo > hi || hi >= DMT_MAX_QUEUES || (i && lo <= p->qranges[i - 1][1])) {
			snprintf(why, whylen,
				 "a policy reply whose queue id range %u (%u-%u) is out of order or range",
				 i, lo, hi);
			return -EPROTO;
		}
	}
	return 0;
}

/* The counts of a reply's answer. */
static int reply_counts(const struct dmt_brk_reply *r, unsigned int type, char *why,
			size_t whylen)
{
	if (type == DMT_BRK_OPEN && r->u.open.nqueues > DMT_BRK_MAX_QUEUES) {
		snprintf(why, whylen, "an open reply with %u queues", r->u.open.nqueues);
		return -EPROTO;
	}
	if (type == DMT_BRK_POLICY && (r->u.policy.nports > DMT_BRK_MAX_PORTS ||
				       !memchr(r->u.policy.conf, 0, sizeof(r->u.policy.conf)))) {
		snprintf(why, whylen, "a policy reply with %u port ranges or an unterminated path",
			 r->u.policy.nports);
		return -EPROTO;
	}
	if (type == DMT_BRK_POLICY)
		return reply_qranges(&r->u.policy, why, whylen);
	return 0;
}

int dmt_brk_reply_check(const struct dmt_brk_reply *r, size_t len, unsigned int type,
			uint32_t seq, int nfds, int max_fds, char *why, size_t whylen)
{
	/* a broker of another release: its header is all the two share */
	if (len >= sizeof(r->hdr) && r->hdr.magic == DMT_BRK_MAGIC &&
	    r->hdr.version != DMT_BRK_VERSION) {
		snprintf(why, whylen,
			 "devmemtcp-broker speaks protocol version %u, this libdevmemtcp version %u: run the devmemtcp-broker of this libdevmemtcp's release (restart it after an upgrade)",
			 r->hdr.version, DMT_BRK_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (len != sizeof(*r) || r->hdr.magic != DMT_BRK_MAGIC ||
	    r->hdr.version != DMT_BRK_VERSION || r->hdr.len != sizeof(*r)) {
		snprintf(why, whylen, "a reply of %zu bytes that is not this protocol's (version %u)",
			 len, DMT_BRK_VERSION);
		return -EPROTO;
	}
	if (r->hdr.type != (type | DMT_BRK_REPLY) || r->hdr.seq != seq) {
		snprintf(why, whylen, "a reply of type 0x%x, sequence %u to request %u, sequence %u",
			 r->hdr.type, r->hdr.seq, type, seq);
		return -EPROTO;
	}
	if (r->err > 0 || r->err < -4095 || !memchr(r->msg, 0, sizeof(r->msg)) ||
	    (r->err && !r->msg[0])) {
		snprintf(why, whylen, "a reply with error %d and no terminated message", r->err);
		return -EPROTO;
	}
	if (r->nfds != (uint32_t)nfds || nfds > max_fds || (r->err && nfds)) {
		snprintf(why, whylen, "a reply with %d file descriptors (it says %u, at most %d)",
			 nfds, r->nfds, max_fds);
		return -EPROTO;
	}
	return reply_counts(r, type, why, whylen);
}

/* ---- the socket (both ends) ------------------------------------------- */

int dmt_brk_send(int sock, const void *msg, size_t len, const int *fds, int nfds,
		 int flags)
{
	union {
		char buf[CMSG_SPACE(DMT_BRK_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)msg, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (nfds > DMT_BRK_MAX_FDS)
		return -EINVAL;
	if (nfds > 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	/* a seqpacket send is whole or nothing: after EINTR, send it again */
	for (;;) {
		ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL | flags);

		if (n == (ssize_t)len)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno ? -errno : -EIO;
	}
}

int dmt_brk_take_fds(const struct msghdr *msg, int *fds, int max)
{
	const char *end = (const char *)msg->msg_control + msg->msg_controllen;
	int n = 0;

	for (const struct cmsghdr *cm = dmt_cmsg_first(msg); cm; cm = dmt_cmsg_next(cm, end)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++, n++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n] = fd;
			else
				close(fd);
		}
	}
	return n;
}
