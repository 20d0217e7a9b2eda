// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp-broker's clients, their handles and their requests
 * (session.h).  Every request is checked whole before anything is done
 * (lib/broker_msg.c), then against the policy: the interface, the number
 * of queues the user owns there, the destination port of every flow,
 * bind-tx, the udmabuf size; a handle is reachable only from the
 * connection that opened it, a queue bound only by the process whose
 * handle owns it.  Refusals name the policy file and the rule.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "session.h"

void brk_init(struct brk *b, const struct brk_ops *ops, void *priv,
	      const struct dmt_policy *policy, const char *conf)
{
	memset(b, 0, sizeof(*b));
	b->ops = ops;
	b->priv = priv;
	b->policy = policy;
	b->conf = conf;
	b->log_level = DEVMEMTCP_LOG_INFO;
}

void brk_log(struct brk *b, int level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (level > b->log_level || !b->ops->log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	b->ops->log(b, level, line);
}

static int set_err(struct dmt_brk_reply *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int set_err(struct dmt_brk_reply *r, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	r->err = code;
	return code;
}

/* ---- clients ------------------------------------------------------------ */

int brk_accept(struct brk *b, int fd, const struct brk_peer *peer,
	       struct brk_client **cp)
{
	struct brk_client *c;
	uint32_t same = 0;

	for (c = b->clients; c; c = c->next)
		same += c->peer.uid == peer->uid;
	if (b->nclients >= BRK_MAX_CLIENTS || same >= BRK_MAX_CLIENTS_PER_UID) {
		brk_log(b, DEVMEMTCP_LOG_WARN,
			"pid %ld (%s) uid %u: refused: %u connections, %u of them of this uid",
			(long)peer->pid, peer->comm, peer->uid, b->nclients, same);
		return -EUSERS;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = fd;
	c->peer = *peer;
	c->next = b->clients;
	b->clients = c;
	b->nclients++;
	brk_log(b, DEVMEMTCP_LOG_DEBUG, "pid %ld (%s) uid %u connected", (long)peer->pid,
		peer->comm, peer->uid);
	if (cp)
		*cp = c;
	return 0;
}

static void who_is(const struct brk_client *c, struct dmt_pol_who_is *w)
{
	w->uid = c->peer.uid;
	w->gids = c->peer.groups;
	w->ngids = c->peer.ngroups;
}

/* The rule for c on ifname, or NULL with the refusal in r. */
static const struct dmt_pol_rule *rule_for(struct brk *b, const struct brk_client *c,
					   const char *ifname, struct dmt_brk_reply *r)
{
	struct dmt_pol_who_is w;
	const struct dmt_pol_rule *rule;

	who_is(c, &w);
	rule = dmt_policy_match(b->policy, &w, ifname);
	if (!rule)
		set_err(r, -EACCES,
			"devmemtcp-broker: uid %u (pid %ld, %s) may not use %s: no rule of %s allows it; an administrator can add one (devmemtcp-broker.conf(5))",
			c->peer.uid, (long)c->peer.pid, c->peer.comm, ifname, b->conf);
	return rule;
}

/* "5201-5210,6000", or "none" */
static const char *ports_str(const struct dmt_pol_rule *rule, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (rule->any_port)
		return "any";
	for (uint32_t i = 0; i < rule->nports && n < len; i++) {
		n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? "," : "", rule->ports[i][0]);
		if (n < len && rule->ports[i][1] != rule->ports[i][0])
			n += (size_t)snprintf(buf + n, len - n, "-%u", rule->ports[i][1]);
	}
	return rule->nports ? buf : "none";
}

/* Every flow within the rule's ports, or the refusal in r. */
static int flows_ok(struct brk *b, const struct brk_client *c,
		    const struct dmt_pol_rule *rule, const struct devmemtcp_flow *f,
		    uint32_t n, uint32_t first, struct dmt_brk_reply *r)
{
	char ports[160];

	for (uint32_t i = 0; i < n; i++) {
		if (dmt_policy_flow_ok(rule, &f[i]))
			continue;
		if (f[i].dst_port_mask != 0xffff)
			return set_err(r, -EACCES,
				       "devmemtcp-broker: flow %u names no destination port, and uid %u may steer only destination ports %s (rule at %s:%u)",
				       first + i, c->peer.uid, ports_str(rule, ports, sizeof(ports)),
				       b->conf, rule->line);
		return set_err(r, -EACCES,
			       "devmemtcp-broker: flow %u steers destination port %u, and uid %u may steer only destination ports %s (rule at %s:%u)",
			       first + i, f[i].dst_port, c->peer.uid,
			       ports_str(rule, ports, sizeof(ports)), b->conf, rule->line);
	}
	return 0;
}

/* Queues of ifname that uid owns through this broker, lingering ones too. */
static uint32_t queues_of(const struct brk *b, uint32_t uid, const char *ifname)
{
	uint32_t n = 0;

	for (const struct brk_handle *h = b->handles; h; h = h->next)
		if (h->uid == uid && !strcmp(h->ifname, ifname))
			n += h->nqueues;
	return n;
}

/* ---- handles ------------------------------------------------------------ */

static void unlink_handle(struct brk *b, struct brk_handle *h)
{
	for (struct brk_handle **p = &b->handles; *p; p = &(*p)->next) {
		if (*p == h) {
			*p = h->next;
			b->nhandles--;
			break;
		}
	}
	if (h->client)
		h->client->nhandles--;
}

/* Undo the handle's setup; its binding is gone. */
static int close_handle(struct brk *b, struct brk_handle *h, char *msg)
{
	int ret = b->ops->close(b, h->nic, msg);

	brk_log(b, ret ? DEVMEMTCP_LOG_WARN : DEVMEMTCP_LOG_INFO,
		"handle %u of pid %ld on %s closed%s%s", h->id, (long)h->pid, h->ifname,
		ret ? ": " : "", ret ? msg : "");
	unlink_handle(b, h);
	free(h);
	return ret;
}

/* Close it, or, while its queues carry a binding, keep its steering until
 * the binding is gone (brk_settle). */
static int release_handle(struct brk *b, struct brk_handle *h, char *msg)
{
	if (b->ops->bound(b, h->ifindex, h->queues, h->nqueues) > 0) {
		brk_log(b, DEVMEMTCP_LOG_INFO,
			"handle %u of pid %ld on %s: a binding is still on its queues: closing it once the binding is gone",
			h->id, (long)h->pid, h->ifname);
		if (h->client)
			h->client->nhandles--;
		h->client = NULL;
		return 0;
	}
	return close_handle(b, h, msg);
}

/* c's handle id, or NULL with the refusal in r. */
static struct brk_handle *find_handle(struct brk *b, const struct brk_client *c,
				      uint32_t id, struct dmt_brk_reply *r)
{
	for (struct brk_handle *h = b->handles; h; h = h->next)
		if (h->id == id && h->client == c)
			return h;
	set_err(r, -ENOENT, "devmemtcp-broker: %u is not a handle of this connection", id);
	return NULL;
}

/* queue of ifindex belongs to a handle of c's process. */
static bool process_owns(const struct brk *b, const struct brk_client *c, int ifindex,
			 uint32_t queue)
{
	for (const struct brk_handle *h = b->handles; h; h = h->next) {
		if (h->ifindex != ifindex || h->pid != c->peer.pid || h->start != c->peer.start)
			continue;
		for (uint32_t i = 0; i < h->nqueues; i++)
			if (h->queues[i] == queue)
				return true;
	}
	return false;
}

/* ---- requests ------------------------------------------------------------ */

static uint32_t nic_flags(uint32_t wire)
{
	return (wire & DMT_BRK_OPEN_NO_RSS_CONTEXT ? DEVMEMTCP_NIC_NO_RSS_CONTEXT : 0) |
	       (wire & DMT_BRK_OPEN_ALLOW_SHADOW ? DEVMEMTCP_NIC_ALLOW_SHADOW : 0);
}

/* The policy's answers before an open: 0 or the refusal in r. */
static int open_allowed(struct brk *b, const struct brk_client *c,
			const struct dmt_brk_req *q, struct dmt_brk_reply *r)
{
	uint32_t want = q->u.open.nids ? q->u.open.nids
				       : q->u.open.nqueues ? q->u.open.nqueues : 1;
	const char *ifname = q->u.open.ifname;
	const struct dmt_pol_rule *rule = rule_for(b, c, ifname, r);
	uint32_t used;

	if (!rule)
		return r->err;
	/* the queues would stay in the default RSS table: other users'
	 * payload would land in this client's memory */
	if (q->u.open.flags & DMT_BRK_OPEN_KEEP_RSS)
		return set_err(r, -EPERM,
			       "devmemtcp-broker: DEVMEMTCP_NIC_KEEP_RSS leaves other traffic on the devmem queues of %s, in memory the caller can read: not through the broker",
			       ifname);
	used = queues_of(b, c->peer.uid, ifname);
	if (used + want > rule->queues)
		return set_err(r, -EDQUOT,
			       "devmemtcp-broker: uid %u may own %u queue%s of %s at once (rule at %s:%u) and owns %u: %u more are too many",
			       c->peer.uid, rule->queues, rule->queues == 1 ? "" : "s", ifname,
			       b->conf, rule->line, used, want);
	if (c->nhandles >= BRK_MAX_HANDLES_PER_CLIENT)
		return set_err(r, -EMFILE,
			       "devmemtcp-broker: this connection has %d handles already, the most it may have",
			       BRK_MAX_HANDLES_PER_CLIENT);
	return flows_ok(b, c, rule, q->u.open.flows, q->u.open.nflows, 0, r);
}

static int do_open(struct brk *b, struct brk_client *c, const struct dmt_brk_req *q,
		   struct dmt_brk_reply *r, int *rfd)
{
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = q->u.open.rx_page_size,
		       .no_verify = !!(q->u.open.flags & DMT_BRK_OPEN_NO_VERIFY));
	DEVMEMTCP_OPTS(nic_opts, o, .flags = nic_flags(q->u.open.flags),
		       .queues = q->u.open.nids ? q->u.open.ids : NULL,
		       .nqueues = q->u.open.nids ? q->u.open.nids : q->u.open.nqueues,
		       .flows = q->u.open.nflows ? q->u.open.flows : NULL,
		       .nflows = q->u.open.nflows, .bind_opts = &bo);
	struct brk_handle *h;
	int ret = open_allowed(b, c, q, r);

	if (ret)
		return ret;
	h = calloc(1, sizeof(*h));
	if (!h)
		return set_err(r, -ENOMEM, "devmemtcp-broker: out of memory");
	ret = b->ops->open(b, q->u.open.ifname, &o, q->fd, c->peer.pid, c->peer.start,
			   &h->nic, &r->u.open, rfd, r->msg);
	if (ret) {
		free(h);
		r->err = ret;
		return ret;
	}
	if (++b->next_id == 0)
		b->next_id = 1;
	h->id = b->next_id;
	h->client = c;
	h->pid = c->peer.pid;
	h->start = c->peer.start;
	h->uid = c->peer.uid;
	memcpy(h->ifname, q->u.open.ifname, sizeof(h->ifname));
	h->ifindex = b->ops->ifindex(b, h->ifname);
	h->nqueues = r->u.open.nqueues < DMT_BRK_MAX_QUEUES ? r->u.open.nqueues
							   : DMT_BRK_MAX_QUEUES;
	memcpy(h->queues, r->u.open.queues, h->nqueues * sizeof(uint32_t));
	h->next = b->handles;
	b->handles = h;
	b->nhandles++;
	c->nhandles++;
	r->u.open.handle = h->id;
	return 0;
}

static int do_handle(struct brk *b, struct brk_client *c, const struct dmt_brk_req *q,
		     struct dmt_brk_reply *r)
{
	struct brk_handle *h = find_handle(b, c, q->u.h.handle, r);
	const struct dmt_pol_rule *rule;
	int ret;

	if (!h)
		return r->err;
	if (q->type == DMT_BRK_CLOSE) {
		r->err = release_handle(b, h, r->msg);
		return r->err;
	}
	if (q->type == DMT_BRK_REMOVE_FLOW) {
		if (q->u.h.flow_id > INT32_MAX)
			return set_err(r, -ENOENT, "flow %u is not a flow of this handle",
				       q->u.h.flow_id);
		r->err = b->ops->remove_flow(b, h->nic, (int)q->u.h.flow_id, r->msg);
		return r->err;
	}
	rule = rule_for(b, c, h->ifname, r);
	if (!rule || flows_ok(b, c, rule, &q->u.h.flow, 1, 0, r))
		return r->err;
	ret = b->ops->add_flow(b, h->nic, &q->u.h.flow, r->msg);
	if (ret < 0)
		r->err = ret;
	else
		r->u.flow_id = (uint32_t)ret;
	return ret < 0 ? ret : 0;
}

static int do_bind(struct brk *b, struct brk_client *c, const struct dmt_brk_req *q,
		   struct dmt_brk_reply *r, int *rfd)
{
	bool tx = q->type == DMT_BRK_BIND_TX;
	int ifindex = (int)q->u.bind.ifindex, ret;
	const struct dmt_pol_rule *rule;
	char name[IF_NAMESIZE];

	if (b->ops->ifname(b, ifindex, name))
		return set_err(r, -ENODEV,
			       "devmemtcp-broker: no interface has index %d in the broker's network namespace",
			       ifindex);
	rule = rule_for(b, c, name, r);
	if (!rule)
		return r->err;
	if (tx && !rule->tx)
		return set_err(r, -EACCES,
			       "devmemtcp-broker: uid %u may not bind-tx on %s: the rule at %s:%u has no \"tx\"",
			       c->peer.uid, name, b->conf, rule->line);
	for (uint32_t i = 0; i < q->u.bind.nqueues; i++)
		if (!process_owns(b, c, ifindex, q->u.bind.queues[i]))
			return set_err(r, -EPERM,
				       "devmemtcp-broker: RX queue %u of %s is not a queue of this process's handles: set it up with devmemtcp_nic_open first",
				       q->u.bind.queues[i], name);
	ret = b->ops->bind(b, tx, ifindex, q->u.bind.queues, q->u.bind.nqueues, q->fd,
			   q->u.bind.rx_page_size, !(q->u.bind.flags & DMT_BRK_BIND_NO_VERIFY),
			   rfd, &r->u.binding_id, r->msg);
	r->err = ret;
	return ret;
}

static int do_udmabuf(struct brk *b, struct brk_client *c, const struct dmt_brk_req *q,
		      struct dmt_brk_reply *r, int *rfd)
{
	struct dmt_pol_who_is w;
	uint64_t max;
	int ret;

	who_is(c, &w);
	max = dmt_policy_udmabuf(b->policy, &w);
	if (!max)
		return set_err(r, -EACCES,
			       "devmemtcp-broker: no rule of %s lets uid %u have udmabufs made (udmabuf SIZE, devmemtcp-broker.conf(5))",
			       b->conf, c->peer.uid);
	if (c->nbufs >= BRK_MAX_UDMABUFS_PER_CLIENT)
		return set_err(r, -EMFILE,
			       "devmemtcp-broker: this connection had %d udmabufs made, the most it may",
			       BRK_MAX_UDMABUFS_PER_CLIENT);
	ret = b->ops->udmabuf(b, q->fd, max, rfd, &r->u.size, r->msg);
	c->nbufs += !ret;
	r->err = ret;
	return ret;
}

static int do_policy(struct brk *b, struct brk_client *c, const struct dmt_brk_req *q,
		     struct dmt_brk_reply *r)
{
	struct dmt_brk_policy_reply *p = &r->u.policy;
	const struct dmt_pol_rule *rule;
	struct dmt_pol_who_is w;

	who_is(c, &w);
	rule = dmt_policy_match(b->policy, &w, q->u.policy.ifname);
	p->uid = c->peer.uid;
	snprintf(p->conf, sizeof(p->conf), "%s", b->conf);
	p->used_queues = queues_of(b, c->peer.uid, q->u.policy.ifname);
	if (!rule)
		return 0;
	p->allowed = 1;
	p->line = rule->line;
	p->max_queues = rule->queues;
	p->tx = rule->tx;
	p->udmabuf_max = dmt_policy_udmabuf(b->policy, &w);
	p->any_port = rule->any_port;
	p->nports = rule->nports;
	memcpy(p->ports, rule->ports, sizeof(p->ports));
	return 0;
}

static int dispatch(struct brk *b, struct brk_client *c, const struct dmt_brk_req *q,
		    struct dmt_brk_reply *r, int *rfd)
{
	switch (q->type) {
	case DMT_BRK_OPEN:
		return do_open(b, c, q, r, rfd);
	case DMT_BRK_CLOSE:
	case DMT_BRK_ADD_FLOW:
	case DMT_BRK_REMOVE_FLOW:
		return do_handle(b, c, q, r);
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX:
		return do_bind(b, c, q, r, rfd);
	case DMT_BRK_UDMABUF:
		return do_udmabuf(b, c, q, r, rfd);
	case DMT_BRK_POLICY:
		return do_policy(b, c, q, r);
	}
	return set_err(r, -EINVAL, "devmemtcp-broker: request type %u", q->type);
}

/* ---- one message ------------------------------------------------------- */

/* Answer the message; < 0 when the client must go after the reply. */
static int answer(struct brk *b, struct brk_client *c, const void *m, size_t len,
		  bool trunc, int nfds, int fd, struct dmt_brk_req *q,
		  struct dmt_brk_reply *r, int *rfd)
{
	char why[256];
	int ret;

	ret = dmt_brk_req_parse(m, len, trunc, nfds, fd, q, why, sizeof(why));
	if (ret) {
		set_err(r, ret, "devmemtcp-broker refused a malformed request: %s", why);
		return ret;
	}
	if (c->peer.refused) {
		set_err(r, c->peer.refused, "devmemtcp-broker: %s", c->peer.why);
		return c->peer.refused;
	}
	/* a connection acts for the process that made it, and only while
	 * that process lives */
	if (!b->ops->alive(c->peer.pid, c->peer.start)) {
		set_err(r, -ESRCH,
			"devmemtcp-broker: pid %ld, which made this connection, has exited: each process connects for itself",
			(long)c->peer.pid);
		return -ESRCH;
	}
	dispatch(b, c, q, r, rfd);
	return 0;
}

static void log_request(struct brk *b, const struct brk_client *c,
			const struct dmt_brk_req *q, const struct dmt_brk_reply *r)
{
	char tn[32];

	brk_log(b, r->err ? DEVMEMTCP_LOG_WARN : DEVMEMTCP_LOG_INFO,
		"pid %ld (%s) uid %u: %s%s%s: %s", (long)c->peer.pid, c->peer.comm,
		c->peer.uid, dmt_brk_type_name(q->type, tn, sizeof(tn)),
		q->type == DMT_BRK_OPEN || q->type == DMT_BRK_POLICY ? " " : "",
		q->type == DMT_BRK_OPEN	    ? q->u.open.ifname
		: q->type == DMT_BRK_POLICY ? q->u.policy.ifname
					    : "",
		r->err ? r->msg : "ok");
}

int brk_serve(struct brk *b, struct brk_client *c)
{
	uint64_t m[DMT_BRK_MSG_MAX / sizeof(uint64_t)];
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { m, sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	struct dmt_brk_reply *r = NULL;
	struct dmt_brk_req *q = NULL;
	int fds[4] = { -1, -1, -1, -1 }, nfds, rfd = -1, keep, ret;
	ssize_t n;

	n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	nfds = dmt_brk_take_fds(&msg, fds, 4);
	if (n == 0) {
		ret = -ENOTCONN;	/* the client closed its end */
		goto out;
	}
	if (msg.msg_flags & MSG_CTRUNC)
		nfds = 5;		/* more than any request carries */
	q = malloc(sizeof(*q));
	r = calloc(1, sizeof(*r));
	if (!q || !r) {
		ret = -ENOMEM;
		goto out;
	}
	keep = answer(b, c, m, (size_t)n, msg.msg_flags & MSG_TRUNC, nfds, fds[0], q, r, &rfd);
	log_request(b, c, q, r);
	dmt_brk_hdr_init(&r->hdr, q->type | DMT_BRK_REPLY, sizeof(*r) - sizeof(r->hdr), q->seq);
	r->nfds = rfd >= 0;
	/* a client that does not read its replies goes */
	ret = dmt_brk_send(c->fd, r, sizeof(*r), &rfd, rfd >= 0, MSG_DONTWAIT);
	if (!ret)
		ret = keep;
out:
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (rfd >= 0)
		close(rfd);
	free(q);
	free(r);
	return ret;
}

void brk_drop(struct brk *b, struct brk_client *c)
{
	char msg[DMT_ERRMSG_MAX];
	struct brk_handle *h, *next;

	for (struct brk_client **p = &b->clients; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			b->nclients--;
			break;
		}
	}
	for (h = b->handles; h; h = next) {
		next = h->next;
		if (h->client == c)
			release_handle(b, h, msg);
	}
	brk_log(b, DEVMEMTCP_LOG_DEBUG, "pid %ld (%s) uid %u disconnected", (long)c->peer.pid,
		c->peer.comm, c->peer.uid);
	close(c->fd);
	free(c);
}

uint32_t brk_settle(struct brk *b)
{
	char msg[DMT_ERRMSG_MAX];
	struct brk_handle *h, *next;
	uint32_t left = 0;

	for (h = b->handles; h; h = next) {
		next = h->next;
		if (h->client)
			continue;
		if (b->ops->bound(b, h->ifindex, h->queues, h->nqueues) > 0)
			left++;
		else
			close_handle(b, h, msg);
	}
	return left;
}

bool brk_idle(const struct brk *b)
{
	return !b->clients && !b->handles;
}

void brk_fini(struct brk *b)
{
	struct brk_handle *h;

	while (b->clients)
		brk_drop(b, b->clients);
	while ((h = b->handles)) {
		brk_log(b, DEVMEMTCP_LOG_INFO,
			"handle %u of pid %ld on %s still has a binding: left to its owner (undone after it exits by the next open, close or 'devmemtcp restore %s')",
			h->id, (long)h->pid, h->ifname, h->ifname);
		b->ops->forget(b, h->nic);
		unlink_handle(b, h);
		free(h);
	}
}
