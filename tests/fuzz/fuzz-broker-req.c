// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The devmemtcp-broker request parser (dmt_brk_req_parse) on messages as
 * the broker reads them from a client's socket: any bytes, cut by the
 * socket (MSG_TRUNC) or not, with the number of fds that came with them
 * (SCM_RIGHTS; 5 stands for a cut control buffer, DMT_BRK_NFDS_SOME for
 * some not counted yet: the loop's look at a message it did not take).
 * The first byte of the input is that, the rest the message.
 *
 * A request is refused with one of the documented errnos and a reason, or
 * taken whole: every field in range, the fd only when the type takes one,
 * and the message built again from what was taken (dmt_brk_hdr_init and
 * dmt_brk_flow_to_wire, the client's builders) gives the same bytes, so
 * nothing the client sent is dropped or changed.  Either way the reply
 * the broker makes of it passes the client's check (dmt_brk_reply_check).
 * An input of exactly a reply's size (this version's or version 1's) is
 * also checked as a reply, as the client takes one.
 */
#include <errno.h>

#include "broker.h"
#include "fuzz.h"
#include "nic.h"

/* An fd number the parser must pass through, never use. */
#define FAKE_FD 1000

/* A refusal says why (the reply's message), in words that end. */
static void check_why(int ret, const char *why, size_t len)
{
	if (ret)
		FZ_CHECK(memchr(why, 0, len) != NULL && why[0] != '\0');
}

static void check_ids(const uint32_t *ids, uint32_t n)
{
	FZ_CHECK(n <= DMT_BRK_MAX_QUEUES);
	for (uint32_t i = 0; i < n; i++) {
		FZ_CHECK(ids[i] < DMT_MAX_QUEUES);
		for (uint32_t k = 0; k < i; k++)
			FZ_CHECK(ids[k] != ids[i]);
	}
}

static void check_ifname(const char *name)
{
	size_t n = strnlen(name, IF_NAMESIZE);

	FZ_CHECK(n < IF_NAMESIZE && dmt_ifname_valid(name, n));
	for (size_t i = n; i < IF_NAMESIZE; i++)
		FZ_CHECK(name[i] == '\0');
}

static void check_flow(const struct devmemtcp_flow *f)
{
	FZ_CHECK(f->family == AF_INET || f->family == AF_INET6);
	FZ_CHECK((f->flags & ~(uint32_t)DEVMEMTCP_FLOW_QUEUE) == 0);
}

/* What the parser promises of an accepted request. */
static void check_fields(const struct dmt_brk_req *q)
{
	switch (q->type) {
	case DMT_BRK_OPEN:
		check_ifname(q->u.open.ifname);
		FZ_CHECK((q->u.open.flags & ~DMT_BRK_OPEN_KNOWN) == 0);
		FZ_CHECK(q->u.open.nqueues <= DMT_BRK_MAX_QUEUES);
		check_ids(q->u.open.ids, q->u.open.nids);
		FZ_CHECK(q->u.open.nflows <= DMT_BRK_MAX_FLOWS);
		for (uint32_t i = 0; i < q->u.open.nflows; i++)
			check_flow(&q->u.open.flows[i]);
		break;
	case DMT_BRK_CLOSE:
		FZ_CHECK(q->u.h.flow_id == 0);
		break;
	case DMT_BRK_ADD_FLOW:
		check_flow(&q->u.h.flow);
		break;
	case DMT_BRK_REMOVE_FLOW:
	case DMT_BRK_UDMABUF:
		break;
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX:
		FZ_CHECK(q->u.bind.ifindex >= 1 && q->u.bind.ifindex <= INT32_MAX);
		FZ_CHECK((q->u.bind.flags & ~DMT_BRK_BIND_NO_VERIFY) == 0);
		if (q->type == DMT_BRK_BIND_TX)
			FZ_CHECK(q->u.bind.nqueues == 0 && q->u.bind.rx_page_size == 0);
		else
			FZ_CHECK(q->u.bind.nqueues >= 1);
		check_ids(q->u.bind.queues, q->u.bind.nqueues);
		break;
	case DMT_BRK_POLICY:
		check_ifname(q->u.policy.ifname);
		break;
	default:
		FZ_CHECK(!"an unknown request type was accepted");
	}
}

static uint8_t *put(uint8_t *p, const void *v, size_t len)
{
	memcpy(p, v, len);
	return p + len;
}

static uint8_t *put_flow(uint8_t *p, const struct devmemtcp_flow *f)
{
	struct dmt_brk_flow w;

	dmt_brk_flow_to_wire(f, &w);
	return put(p, &w, sizeof(w));
}

/* The wire form of an accepted request, into out (DMT_BRK_MSG_MAX bytes):
 * its length. */
static size_t build(const struct dmt_brk_req *q, uint8_t *out)
{
	struct dmt_brk_hdr *h = (struct dmt_brk_hdr *)out;
	uint8_t *b = out + sizeof(*h), *p = b;

	switch (q->type) {
	case DMT_BRK_OPEN: {
		struct dmt_brk_open o = {
			.flags = q->u.open.flags, .nqueues = q->u.open.nqueues,
			.nids = q->u.open.nids, .nflows = q->u.open.nflows,
			.rx_page_size = q->u.open.rx_page_size,
		};

		memcpy(o.ifname, q->u.open.ifname, IF_NAMESIZE);
		p = put(p, &o, sizeof(o));
		p = put(p, q->u.open.ids, o.nids * sizeof(uint32_t));
		for (uint32_t i = 0; i < o.nflows; i++)
			p = put_flow(p, &q->u.open.flows[i]);
		break;
	}
	case DMT_BRK_CLOSE:
	case DMT_BRK_REMOVE_FLOW: {
		struct dmt_brk_handle hb = { q->u.h.handle, q->u.h.flow_id };

		p = put(p, &hb, sizeof(hb));
		break;
	}
	case DMT_BRK_ADD_FLOW: {
		struct dmt_brk_add_flow a = { .handle = q->u.h.handle };

		dmt_brk_flow_to_wire(&q->u.h.flow, &a.flow);
		p = put(p, &a, sizeof(a));
		break;
	}
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX: {
		struct dmt_brk_bind r = { q->u.bind.ifindex, q->u.bind.nqueues,
					  q->u.bind.rx_page_size, q->u.bind.flags };

		p = put(p, &r, sizeof(r));
		p = put(p, q->u.bind.queues, r.nqueues * sizeof(uint32_t));
		break;
	}
	case DMT_BRK_UDMABUF: {
		struct dmt_brk_udmabuf u = { 0 };

		p = put(p, &u, sizeof(u));
		break;
	}
	case DMT_BRK_POLICY:
		p = put(p, q->u.policy.ifname, IF_NAMESIZE);
		break;
	}
	FZ_CHECK((size_t)(p - out) <= DMT_BRK_MSG_MAX);
	dmt_brk_hdr_init(h, q->type, (size_t)(p - b), q->seq);
	return (size_t)(p - out);
}

/* The reply the broker sends for a request it parsed with ret and why
 * (brk_serve: a refusal's message, or an answer without fds) must pass
 * the client's check of a reply to that request; a version-1 request's
 * refusal is in version 1's size and number, which this client refuses
 * as another release's (a version-1 client reads it). */
static void check_reply_made(const struct dmt_brk_req *q, int ret, const char *why)
{
	struct dmt_brk_reply *r = calloc(1, sizeof(*r));
	char rwhy[320];
	size_t len;
	int got;

	if (!r)
		abort();
	len = dmt_brk_reply_init(r, q);
	r->err = ret;
	if (ret)
		snprintf(r->msg, sizeof(r->msg), "devmemtcp-broker refused a malformed request: %s",
			 why);
	got = dmt_brk_reply_check(r, len, q->type, q->seq, 0, DMT_BRK_MAX_FDS, rwhy,
				  sizeof(rwhy));
	if (q->version == 1) {
		FZ_CHECK((ret == -EPROTONOSUPPORT || ret == -EMSGSIZE) &&
			 len == DMT_BRK_REPLY_V1_SIZE &&
			 r->hdr.version == 1 && r->hdr.len == len && got == -EPROTONOSUPPORT);
		free(r);
		return;
	}
	if (got)
		fprintf(stderr, "the client refuses the reply: %s\n", rwhy);
	FZ_CHECK(len == sizeof(*r) && got == 0);
	free(r);
}

static void check_request(const uint8_t *msg, size_t len, bool trunc, int nfds, int fd)
{
	struct dmt_brk_req *q = malloc(sizeof(*q));
	uint8_t *again = malloc(DMT_BRK_MSG_MAX);
	struct dmt_brk_hdr h;
	char why[256];
	size_t n;
	int ret;

	if (!q || !again)
		abort();
	memset(why, 0xa5, sizeof(why));
	memset(q, 0x5a, sizeof(*q));
	ret = dmt_brk_req_parse(msg, len, trunc, nfds, fd, q, why, sizeof(why));
	FZ_CHECK(ret == 0 || ret == -EMSGSIZE || ret == -EPROTO || ret == -EPROTONOSUPPORT ||
		 ret == -EINVAL);
	check_why(ret, why, sizeof(why));
	if (len >= sizeof(h)) {
		memcpy(&h, msg, sizeof(h));
		FZ_CHECK(q->type == h.type && q->seq == h.seq &&
			 q->version == (h.magic == DMT_BRK_MAGIC ? h.version : 0));
	} else {
		FZ_CHECK(q->type == 0 && q->seq == 0 && q->version == 0);
	}
	if (trunc || len > DMT_BRK_MSG_MAX)
		FZ_CHECK(ret == -EMSGSIZE);
	check_reply_made(q, ret, why);
	if (ret) {
		FZ_CHECK(q->fd == -1);
		goto out;
	}
	FZ_CHECK(q->type >= DMT_BRK_OPEN && q->type < DMT_BRK_TYPE_END);
	FZ_CHECK(nfds == 0 || nfds == 1 || nfds == DMT_BRK_NFDS_SOME);
	FZ_CHECK(q->fd == (nfds == 1 ? fd : -1));
	check_fields(q);
	n = build(q, again);
	if (n != len || memcmp(again, msg, len))
		fprintf(stderr, "an accepted request of %zu bytes builds again as %zu other bytes\n",
			len, n);
	FZ_CHECK(n == len && memcmp(again, msg, len) == 0);
out:
	free(again);
	free(q);
}

/* The input as a reply the client received with nfds fds: accepted only
 * when it says what the client relies on. */
static void check_reply(const uint8_t *msg, size_t len, int nfds)
{
	const struct dmt_brk_reply *r = (const struct dmt_brk_reply *)msg;
	unsigned int type = r->hdr.type & ~DMT_BRK_REPLY;
	char why[320];
	int ret;

	memset(why, 0xa5, sizeof(why));
	ret = dmt_brk_reply_check(r, len, type, r->hdr.seq, nfds, DMT_BRK_MAX_FDS, why,
				  sizeof(why));
	FZ_CHECK(ret == 0 || ret == -EPROTO || ret == -EPROTONOSUPPORT);
	check_why(ret, why, sizeof(why));
	/* another release's: told by its header alone */
	FZ_CHECK((ret == -EPROTONOSUPPORT) ==
		 (r->hdr.magic == DMT_BRK_MAGIC && r->hdr.version != DMT_BRK_VERSION));
	if (ret)
		return;
	FZ_CHECK(len == sizeof(*r));
	FZ_CHECK(r->hdr.type & DMT_BRK_REPLY);
	FZ_CHECK(r->err <= 0 && r->err >= -4095);
	FZ_CHECK(memchr(r->msg, 0, sizeof(r->msg)) != NULL);
	FZ_CHECK(!r->err || r->msg[0]);
	FZ_CHECK(r->nfds == (uint32_t)nfds && nfds <= DMT_BRK_MAX_FDS && (!r->err || !nfds));
	if (type == DMT_BRK_OPEN)
		FZ_CHECK(r->u.open.nqueues <= DMT_BRK_MAX_QUEUES);
	if (type == DMT_BRK_POLICY) {
		const struct dmt_brk_policy_reply *p = &r->u.policy;

		FZ_CHECK(p->nports <= DMT_BRK_MAX_PORTS &&
			 memchr(p->conf, 0, sizeof(p->conf)));
		FZ_CHECK(p->nqranges <= DMT_BRK_MAX_QRANGES && !p->reserved);
		for (uint32_t i = 0; i < p->nqranges; i++)
			FZ_CHECK(p->qranges[i][0] <= p->qranges[i][1] &&
				 p->qranges[i][1] < DMT_MAX_QUEUES &&
				 (!i || p->qranges[i - 1][1] < p->qranges[i][0]));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	uint8_t how = fz_u8(&f);
	/* bits 0-2: fds that came (0-4 as taken, 5: a cut control buffer,
	 * 6 and 7: some, not counted), bit 3: the message was cut (MSG_TRUNC) */
	int nfds = (how & 7) < 6 ? how & 7 : DMT_BRK_NFDS_SOME;
	bool trunc = how & 8;
	size_t len = fz_left(&f);
	/* exactly the message's bytes, so that a read past them is seen */
	uint8_t *msg = calloc(1, len ? len : 1);

	if (!msg)
		abort();
	fz_bytes(&f, msg, len);
	check_request(msg, len, trunc, nfds, nfds > 0 ? FAKE_FD : -1);
	if ((len == sizeof(struct dmt_brk_reply) || len == DMT_BRK_REPLY_V1_SIZE) && nfds >= 0 &&
	    nfds <= DMT_BRK_MAX_FDS + 1)
		check_reply(msg, len, nfds);
	free(msg);
	return 0;
}
