// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp-broker's clients, their handles and their requests
 * (session.h).  Every request is checked whole before anything is done
 * (lib/priv/broker_msg.c), then against the policy: the interface, the number
 * of queues the user owns there, the destination port of every flow,
 * bind-tx, the udmabuf size; a handle is reachable only from the
 * connection that opened it, a queue bound only by the process whose
 * handle owns it.  Refusals name the policy file and the rule.  A
 * request that carries a descriptor is refused here or carried out by a
 * job (brk_job_run on a helper, brk_job_done back here): session.h says
 * why and how.
 */
#include <errno.h>
#include <fcntl.h>
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

/* ---- users and clients ---------------------------------------------------- */

static struct brk_user *user_get(struct brk *b, uint32_t uid)
{
	struct brk_user *u;

	for (u = b->users; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = b->users;
	b->users = u;
	return u;
}

/* A user with nothing left goes. */
static void user_put(struct brk *b, struct brk_user *u)
{
	if (u->conns || u->work || u->nbufs)
		return;
	for (struct brk_user **p = &b->users; *p; p = &(*p)->next) {
		if (*p == u) {
			*p = u->next;
			free(u);
			return;
		}
	}
}

int brk_fds_queued(int fd)
{
	char path[64], line[128];
	int n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "scm_fds: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

static struct brk_job *job_new(struct brk_user *u, enum brk_step step)
{
	struct brk_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->step = step;
	j->user = u;
	j->sock = -1;
	j->rfd = -1;
	j->keep = -1;
	u->work++;
	return j;
}

static void job_queue(struct brk *b, struct brk_job *j)
{
	struct brk_job **p = &b->queue;

	while (*p)
		p = &(*p)->next;
	j->next = NULL;
	*p = j;
}

/* Close connection socket fd of user u.  Its receive queue may hold
 * messages with a client's fds, which closing it releases, here: after
 * shutdown (nothing more can come), a socket that holds none is closed on
 * the loop, another by a helper.  (Releasing a unix socket can start the
 * kernel's collection of unreachable in-flight fds, which runs on a
 * kernel worker since Linux 6.10, not in the caller.) */
static void close_conn(struct brk *b, struct brk_user *u, int fd)
{
	struct brk_job *j;

	shutdown(fd, SHUT_RD);
	if (brk_fds_queued(fd) == 0 || !(j = job_new(u, BRK_STEP_CLOSE))) {
		/* no memory for a job: better a sleep than a leak */
		close(fd);
		u->conns--;
		user_put(b, u);
		return;
	}
	j->conn = true;
	j->fds[j->nfds++] = fd;
	job_queue(b, j);
}

int brk_accept(struct brk *b, int fd, const struct brk_peer *peer,
	       struct brk_client **cp)
{
	struct brk_user *u = user_get(b, peer->uid);
	struct brk_client *c;

	if (!u) {
		shutdown(fd, SHUT_RD);
		close(fd);	/* no memory even to count it */
		return -ENOMEM;
	}
	u->conns++;
	if (b->nclients >= BRK_MAX_CLIENTS || u->conns > BRK_MAX_CLIENTS_PER_UID) {
		brk_log(b, DEVMEMTCP_LOG_WARN,
			"pid %ld (%s) uid %u: refused: %u connections, %u of them of this uid",
			(long)peer->pid, peer->comm, peer->uid, b->nclients, u->conns - 1);
		close_conn(b, u, fd);
		return -EUSERS;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close_conn(b, u, fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->peer = *peer;
	c->user = u;
	c->next = b->clients;
	b->clients = c;
	b->nclients++;
	brk_log(b, DEVMEMTCP_LOG_DEBUG, "pid %ld (%s) uid %u connected", (long)peer->pid,
		peer->comm, peer->uid);
	if (cp)
		*cp = c;
	return 0;
}

bool brk_readable(const struct brk *b, const struct brk_client *c)
{
	return !c->busy && !c->gone && c->user->work < BRK_MAX_WORK_PER_UID;
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

/* Queues of ifname that uid owns through this broker, lingering ones too,
 * and those an open under way reserved. */
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
	/* a bind a helper is making relies on its queues being this
	 * process's: it stays, out of its connection's reach, until then */
	if (h->pins) {
		if (h->client)
			h->client->nhandles--;
		h->client = NULL;
		h->deferred = true;
		return 0;
	}
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
		if (h->id == id && h->client == c && !h->opening)
			return h;
	set_err(r, -ENOENT, "devmemtcp-broker: %u is not a handle of this connection", id);
	return NULL;
}

/* The handle of c's process that owns queue of ifindex, or NULL. */
static struct brk_handle *process_owns(const struct brk *b, const struct brk_client *c,
				       int ifindex, uint32_t queue)
{
	for (struct brk_handle *h = b->handles; h; h = h->next) {
		if (h->opening || h->ifindex != ifindex || h->pid != c->peer.pid ||
		    h->start != c->peer.start)
			continue;
		for (uint32_t i = 0; i < h->nqueues; i++)
			if (h->queues[i] == queue)
				return h;
	}
	return NULL;
}

/* The handles a bind relies on, until it is done (release_handle waits). */
static void pin(struct brk_job *j, struct brk_handle *h)
{
	for (uint32_t i = 0; i < j->npins; i++)
		if (j->pins[i] == h)
			return;
	h->pins++;
	j->pins[j->npins++] = h;
}

static void unpin(struct brk *b, struct brk_job *j)
{
	char msg[DMT_BRK_ERRMSG_MAX];

	for (uint32_t i = 0; i < j->npins; i++) {
		struct brk_handle *h = j->pins[i];

		if (--h->pins == 0 && h->deferred) {
			h->deferred = false;
			release_handle(b, h, msg);
		}
	}
	j->npins = 0;
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
	if (rule->nqranges) {
		char named[DMT_POL_MAX_QRANGES * 12];

		dmt_policy_queues_str(rule, named, sizeof(named));
		if (!q->u.open.nids)
			return set_err(r, -EPERM,
				       "devmemtcp-broker: uid %u may use RX queues %s of %s only (rule at %s:%u): ask for them by id (devmemtcp_nic_opts.queues, devmemtcp recv --queues)",
				       c->peer.uid, named, ifname, b->conf, rule->line);
		for (uint32_t i = 0; i < q->u.open.nids; i++)
			if (!dmt_policy_queue_ok(rule, q->u.open.ids[i]))
				return set_err(r, -EPERM,
					       "devmemtcp-broker: uid %u asked for RX queue %u of %s, which the rule at %s:%u does not name (queues %s)",
					       c->peer.uid, q->u.open.ids[i], ifname, b->conf,
					       rule->line, named);
	}
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

/* h, opened: numbered, its queues as the open's reply says. */
static void handle_opened(struct brk *b, struct brk_handle *h, void *nic, int ifindex,
			  struct dmt_brk_open_reply *r)
{
	if (++b->next_id == 0)
		b->next_id = 1;
	h->id = b->next_id;
	h->opening = false;
	h->nic = nic;
	h->ifindex = ifindex;
	h->nqueues = r->nqueues < DMT_BRK_MAX_QUEUES ? r->nqueues : DMT_BRK_MAX_QUEUES;
	memcpy(h->queues, r->queues, h->nqueues * sizeof(uint32_t));
	r->handle = h->id;
}

/* A handle of c on the open's interface, in the list (want queues
 * reserved while it opens), or NULL (out of memory, in r). */
static struct brk_handle *handle_new(struct brk *b, struct brk_client *c,
				     const struct dmt_brk_req *q, struct dmt_brk_reply *r)
{
	struct brk_handle *h = calloc(1, sizeof(*h));

	if (!h) {
		set_err(r, -ENOMEM, "devmemtcp-broker: out of memory");
		return NULL;
	}
	h->opening = true;
	h->client = c;
	h->pid = c->peer.pid;
	h->start = c->peer.start;
	h->uid = c->peer.uid;
	memcpy(h->ifname, q->u.open.ifname, sizeof(h->ifname));
	h->nqueues = q->u.open.nids ? q->u.open.nids : q->u.open.nqueues ? q->u.open.nqueues : 1;
	h->next = b->handles;
	b->handles = h;
	b->nhandles++;
	c->nhandles++;
	return h;
}

/* The options of an open as the library takes them (pointing into q). */
#define OPEN_OPTS(q)                                                                   \
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = (q)->u.open.rx_page_size,         \
		       .no_verify = !!((q)->u.open.flags & DMT_BRK_OPEN_NO_VERIFY));    \
	DEVMEMTCP_OPTS(nic_opts, o, .flags = nic_flags((q)->u.open.flags),             \
		       .queues = (q)->u.open.nids ? (q)->u.open.ids : NULL,             \
		       .nqueues = (q)->u.open.nids ? (q)->u.open.nids : (q)->u.open.nqueues, \
		       .flows = (q)->u.open.nflows ? (q)->u.open.flows : NULL,          \
		       .nflows = (q)->u.open.nflows, .bind_opts = &bo)

/* 0: answered in r; 1: with a buffer, a job binds it (the handle is in
 * the list, opening, its queues reserved). */
static int do_open(struct brk *b, struct brk_client *c, struct brk_job *j)
{
	const struct dmt_brk_req *q = &j->q;
	struct dmt_brk_reply *r = &j->r;
	OPEN_OPTS(q);
	struct brk_handle *h;
	void *nic = NULL;

	if (open_allowed(b, c, q, r))
		return 0;
	h = handle_new(b, c, q, r);
	if (!h)
		return 0;
	if (q->u.open.flags & DMT_BRK_OPEN_BIND) {
		j->h = h;
		j->pid = c->peer.pid;
		j->start = c->peer.start;
		return 1;
	}
	r->err = b->ops->open(b, q->u.open.ifname, &o, -1, c->peer.pid, c->peer.start,
			      &nic, &r->u.open, &j->rfd, r->msg);
	if (r->err) {
		unlink_handle(b, h);
		free(h);
		return 0;
	}
	handle_opened(b, h, nic, b->ops->ifindex(b, h->ifname), &r->u.open);
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

/* The policy's answers before a bind: 1 (a job binds), or 0 with the
 * refusal in r. */
static int do_bind(struct brk *b, struct brk_client *c, struct brk_job *j)
{
	const struct dmt_brk_req *q = &j->q;
	struct dmt_brk_reply *r = &j->r;
	bool tx = q->type == DMT_BRK_BIND_TX;
	int ifindex = (int)q->u.bind.ifindex;
	const struct dmt_pol_rule *rule;
	char name[IF_NAMESIZE];

	if (b->ops->ifname(b, ifindex, name)) {
		set_err(r, -ENODEV,
			"devmemtcp-broker: no interface has index %d in the broker's network namespace",
			ifindex);
		return 0;
	}
	rule = rule_for(b, c, name, r);
	if (!rule)
		return 0;
	if (tx && !rule->tx) {
		set_err(r, -EACCES,
			"devmemtcp-broker: uid %u may not bind-tx on %s: the rule at %s:%u has no \"tx\"",
			c->peer.uid, name, b->conf, rule->line);
		return 0;
	}
	for (uint32_t i = 0; i < q->u.bind.nqueues; i++) {
		if (!process_owns(b, c, ifindex, q->u.bind.queues[i])) {
			set_err(r, -EPERM,
				"devmemtcp-broker: RX queue %u of %s is not a queue of this process's handles: set it up with devmemtcp_nic_open first",
				q->u.bind.queues[i], name);
			return 0;
		}
	}
	/* they stay the process's until the helper has bound them */
	for (uint32_t i = 0; i < q->u.bind.nqueues; i++)
		pin(j, process_owns(b, c, ifindex, q->u.bind.queues[i]));
	return 1;
}

static int do_udmabuf(struct brk *b, struct brk_client *c, struct brk_job *j)
{
	struct dmt_brk_reply *r = &j->r;
	struct dmt_pol_who_is w;

	who_is(c, &w);
	j->max = dmt_policy_udmabuf(b->policy, &w);
	if (!j->max) {
		set_err(r, -EACCES,
			"devmemtcp-broker: no rule of %s lets uid %u have udmabufs made (udmabuf SIZE, devmemtcp-broker.conf(5))",
			b->conf, c->peer.uid);
		return 0;
	}
	return 1;
}

/* ---- the udmabufs the broker made ------------------------------------------ */

/* Forget u's udmabufs that nobody but the broker holds any more. */
static void bufs_sweep(struct brk *b, struct brk_user *u)
{
	for (struct brk_buf **p = &u->bufs; *p;) {
		struct brk_buf *f = *p;

		if (f->keep < 0 || b->ops->buf_alive(b, f->keep) != 0) {
			p = &f->next;
			continue;
		}
		*p = f->next;
		close(f->keep);		/* ours, the last: the udmabuf goes */
		u->nbufs--;
		u->buf_bytes -= f->size;
		b->nbufs--;
		free(f);
	}
}

/* Room for a udmabuf of size bytes for c's user, counted there (in
 * *bufp) from now: 0, or the refusal in r.  The quota holds whatever
 * connections the user has: the library opens one per request. */
static int buf_reserve(struct brk *b, struct brk_client *c, uint64_t size,
		       struct dmt_brk_reply *r, struct brk_buf **bufp)
{
	struct brk_user *u = c->user;
	const struct dmt_pol_rule *rule;
	struct dmt_pol_who_is w;
	struct brk_buf *f;
	uint64_t total;

	who_is(c, &w);
	bufs_sweep(b, u);
	total = dmt_policy_udmabuf_total(b->policy, &w, &rule);
	if (u->nbufs >= BRK_MAX_UDMABUFS_PER_UID)
		return set_err(r, -EDQUOT,
			       "devmemtcp-broker: uid %u has %u udmabufs alive that the broker made, the most one user may have at once",
			       u->uid, u->nbufs);
	if (!rule || u->buf_bytes + size > total)
		return set_err(r, -EDQUOT,
			       "devmemtcp-broker: uid %u has %u udmabuf%s alive that the broker made, %llu bytes in all: %llu bytes more would pass the %llu it may have at once (%s of the rule at %s:%u)",
			       u->uid, u->nbufs, u->nbufs == 1 ? "" : "s",
			       (unsigned long long)u->buf_bytes, (unsigned long long)size,
			       (unsigned long long)total,
			       rule && rule->udmabuf_total ? "udmabuf-total"
							   : "udmabuf-total: by default 4 times udmabuf,",
			       b->conf, rule ? rule->line : 0);
	f = calloc(1, sizeof(*f));
	if (!f)
		return set_err(r, -ENOMEM, "devmemtcp-broker: out of memory");
	f->keep = -1;
	f->size = size;
	f->next = u->bufs;
	u->bufs = f;
	u->nbufs++;
	u->buf_bytes += size;
	b->nbufs++;
	*bufp = f;
	return 0;
}

/* The udmabuf of f was made (keep the broker's copy) or not (keep -1). */
static void buf_made(struct brk *b, struct brk_user *u, struct brk_buf *f, int keep)
{
	if (keep >= 0) {
		f->keep = keep;
		return;
	}
	for (struct brk_buf **p = &u->bufs; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	u->nbufs--;
	u->buf_bytes -= f->size;
	b->nbufs--;
	free(f);
}

_Static_assert(DMT_POL_MAX_QRANGES <= DMT_BRK_MAX_QRANGES && DMT_POL_MAX_QID < DMT_BRK_QUEUE_IDS,
	       "a rule's queue ids fit the policy answer");

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
	/* the ids in increasing order (the rule's ranges are disjoint) */
	p->nqranges = rule->nqranges;
	for (uint32_t i = 0; i < rule->nqranges; i++) {
		uint32_t k = i;

		for (; k && p->qranges[k - 1][0] > rule->qranges[i][0]; k--) {
			p->qranges[k][0] = p->qranges[k - 1][0];
			p->qranges[k][1] = p->qranges[k - 1][1];
		}
		p->qranges[k][0] = (uint16_t)rule->qranges[i][0];
		p->qranges[k][1] = (uint16_t)rule->qranges[i][1];
	}
	return 0;
}

/* 0: answered in j->r; 1: a job carries it out (the request takes a
 * buffer, whose fd waits in the socket). */
static int dispatch(struct brk *b, struct brk_client *c, struct brk_job *j)
{
	const struct dmt_brk_req *q = &j->q;
	struct dmt_brk_reply *r = &j->r;

	switch (q->type) {
	case DMT_BRK_OPEN:
		return do_open(b, c, j);
	case DMT_BRK_CLOSE:
	case DMT_BRK_ADD_FLOW:
	case DMT_BRK_REMOVE_FLOW:
		do_handle(b, c, q, r);
		return 0;
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX:
		return do_bind(b, c, j);
	case DMT_BRK_UDMABUF:
		return do_udmabuf(b, c, j);
	case DMT_BRK_POLICY:
		do_policy(b, c, q, r);
		return 0;
	}
	set_err(r, -EINVAL, "devmemtcp-broker: request type %u", q->type);
	return 0;
}

/* ---- one message ------------------------------------------------------- */

/* What to do with the message of c that j->q will hold (the len bytes
 * at m, fds: descriptors came with it, left in the socket): 1, a job
 * carries it out; 0, answered in j->r; < 0, answered, and c must go. */
static int answer(struct brk *b, struct brk_client *c, const void *m, size_t len,
		  bool trunc, bool fds, struct brk_job *j)
{
	char why[256];
	int ret;

	ret = dmt_brk_req_parse(m, len, trunc, fds ? DMT_BRK_NFDS_SOME : 0, -1, &j->q, why,
				sizeof(why));
	if (ret) {
		set_err(&j->r, ret, "devmemtcp-broker refused a malformed request: %s", why);
		return ret;
	}
	if (c->peer.refused) {
		set_err(&j->r, c->peer.refused, "devmemtcp-broker: %s", c->peer.why);
		return c->peer.refused;
	}
	/* a connection acts for the process that made it, and only while
	 * that process lives */
	if (!b->ops->alive(c->peer.pid, c->peer.start)) {
		set_err(&j->r, -ESRCH,
			"devmemtcp-broker: pid %ld, which made this connection, has exited: each process connects for itself",
			(long)c->peer.pid);
		return -ESRCH;
	}
	return dispatch(b, c, j);
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

/* j's reply to c, with j->rfd when there is one: 0 or a negative errno
 * (a client that does not read its replies goes). */
static int send_reply(struct brk *b, struct brk_client *c, struct brk_job *j)
{
	struct dmt_brk_reply *r = &j->r;
	size_t len;

	log_request(b, c, &j->q, r);
	len = dmt_brk_reply_init(r, &j->q);
	r->nfds = j->rfd >= 0;
	return dmt_brk_send(c->fd, r, len, &j->rfd, j->rfd >= 0, MSG_DONTWAIT);
}

static void job_free(struct brk *b, struct brk_job *j)
{
	struct brk_user *u = j->user;

	u->work--;
	free(j);
	user_put(b, u);
}

int brk_serve(struct brk *b, struct brk_client *c)
{
	uint64_t m[DMT_BRK_MSG_MAX / sizeof(uint64_t)];
	struct iovec iov = { m, sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct brk_job *j;
	bool fds;
	ssize_t n;
	int ret, sent;

	/* A look only: with no room for them, the descriptors the message
	 * carries stay in the socket (MSG_CTRUNC says there are some). */
	n = recvmsg(c->fd, &msg, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	fds = msg.msg_flags & MSG_CTRUNC;
	if (n == 0 && !fds)
		return -ENOTCONN;	/* the client closed its end */
	/* a message without descriptors is taken at once */
	if (!fds && recv(c->fd, NULL, 0, MSG_DONTWAIT | MSG_TRUNC) < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	j = job_new(c->user, BRK_STEP_RECV);
	if (!j)
		return -ENOMEM;
	j->c = c;
	j->sock = c->fd;
	ret = answer(b, c, m, (size_t)n, msg.msg_flags & MSG_TRUNC, fds, j);
	if (ret == 1) {
		c->busy = true;
		job_queue(b, j);
		return 0;
	}
	sent = send_reply(b, c, j);
	if (j->rfd >= 0)
		close(j->rfd);	/* ours (the broker made it), the client has it */
	j->rfd = -1;
	if (fds && ret == 0 && sent == 0) {
		/* refused: a helper takes the message, its fds not installed */
		j->step = BRK_STEP_DISCARD;
		c->busy = true;
		job_queue(b, j);
		return 0;
	}
	/* a client that goes with fds in its socket: brk_drop */
	job_free(b, j);
	return sent ? sent : ret < 0 ? ret : 0;
}

/* ---- jobs ----------------------------------------------------------------- */

struct brk_job *brk_job_next(struct brk *b)
{
	for (struct brk_job **p = &b->queue; *p; p = &(*p)->next) {
		struct brk_job *j = *p;

		if (j->user->running >= BRK_MAX_WORK_PER_UID)
			continue;
		*p = j->next;
		j->next = NULL;
		j->user->running++;
		b->recv_running += j->step == BRK_STEP_RECV || j->step == BRK_STEP_MAKE;
		return j;
	}
	return NULL;
}

/* Helper: the open of a handle with the client's dma-buf. */
static void job_open(const struct brk *b, struct brk_job *j)
{
	const struct dmt_brk_req *q = &j->q;
	OPEN_OPTS(q);

	j->r.err = b->ops->open((struct brk *)b, q->u.open.ifname, &o, q->fd, j->pid, j->start,
				&j->nic, &j->r.u.open, &j->rfd, j->r.msg);
	if (!j->r.err)
		j->ifindex = b->ops->ifindex((struct brk *)b, q->u.open.ifname);
}

/* Helper: take the message with its fds and carry the request out. */
static void job_recv(const struct brk *b, struct brk_job *j)
{
	uint64_t m[DMT_BRK_MSG_MAX / sizeof(uint64_t)];
	union {
		char buf[CMSG_SPACE(BRK_MAX_FDS_IN * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { m, sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	struct dmt_brk_reply *r = &j->r;
	unsigned int type = j->q.type;
	char why[256];
	ssize_t n;
	int ret;

	n = recvmsg(j->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0) {
		set_err(r, -errno, "devmemtcp-broker: reading the request: %s", strerror(errno));
		j->drop = true;
		return;
	}
	/* room for the most a message carries: cut only when out of fds */
	j->nfds = dmt_brk_take_fds(&msg, j->fds, BRK_MAX_FDS_IN);
	if (j->nfds > BRK_MAX_FDS_IN)
		j->nfds = BRK_MAX_FDS_IN;
	if (msg.msg_flags & MSG_CTRUNC) {
		set_err(r, -EMFILE,
			"devmemtcp-broker is out of file descriptors: the request's were dropped; try again later");
		return;
	}
	ret = dmt_brk_req_parse(m, (size_t)n, msg.msg_flags & MSG_TRUNC, j->nfds,
				j->nfds ? j->fds[0] : -1, &j->q, why, sizeof(why));
	if (!ret && j->q.type != type)
		ret = -EPROTO;	/* cannot be: the message the loop read */
	if (ret) {
		set_err(r, ret, "devmemtcp-broker refused a malformed request: %s", why);
		j->drop = true;
		return;
	}
	switch (type) {
	case DMT_BRK_OPEN:
		job_open(b, j);
		break;
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX:
		r->err = b->ops->bind((struct brk *)b, type == DMT_BRK_BIND_TX,
				      (int)j->q.u.bind.ifindex, j->q.u.bind.queues,
				      j->q.u.bind.nqueues, j->q.fd, j->q.u.bind.rx_page_size,
				      !(j->q.u.bind.flags & DMT_BRK_BIND_NO_VERIFY), &j->rfd,
				      &r->u.binding_id, r->msg);
		break;
	case DMT_BRK_UDMABUF:
		/* made once its bytes are counted (the loop, then MAKE) */
		r->err = b->ops->udmabuf_size((struct brk *)b, j->q.fd, j->max, &j->size, r->msg);
		break;
	}
	if (r->err && j->rfd >= 0) {
		j->fds[j->nfds++] = j->rfd;
		j->rfd = -1;
	}
}

/* Helper: take what waits in connection socket fd (shut for reading:
 * nothing more comes), its fds not installed, so that its client reads
 * the end of the connection rather than a reset. */
static void drain(int fd)
{
	for (int k = 0; k < 100000; k++) {
		char byte;
		struct iovec iov = { &byte, 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);

		/* 0: the end, or a message of 0 bytes (with fds: cut) */
		if (n < 0 || (n == 0 && !(msg.msg_flags & MSG_CTRUNC) && brk_fds_queued(fd) <= 0))
			return;
	}
}

void brk_job_run(const struct brk *b, struct brk_job *j)
{
	switch (j->step) {
	case BRK_STEP_RECV:
		job_recv(b, j);
		break;
	case BRK_STEP_MAKE:
		j->r.err = b->ops->udmabuf((struct brk *)b, j->q.fd, j->size, &j->rfd, &j->keep,
					   j->r.msg);
		if (!j->r.err)
			j->r.u.size = j->size;
		break;
	case BRK_STEP_DISCARD: {
		/* the message the loop refused: with no room for its fds, the
		 * kernel drops them here, never installed (no flush) */
		char byte;
		struct iovec iov = { &byte, 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

		if (recvmsg(j->sock, &msg, MSG_DONTWAIT) < 0)
			j->drop = true;
		break;
	}
	case BRK_STEP_CLOSE:
		if (j->conn)
			drain(j->fds[0]);
		for (int i = 0; i < j->nfds; i++)
			close(j->fds[i]);
		j->nfds = 0;
		break;
	}
}

/* Back from a helper with the request carried out: the handle's or the
 * connection's books, the reply, then the fds to a helper to close. */
static void recv_done(struct brk *b, struct brk_job *j)
{
	struct brk_client *c = j->c;
	struct brk_handle *h = j->h;

	if (h && j->r.err) {
		unlink_handle(b, h);
		free(h);
	} else if (h) {
		handle_opened(b, h, j->nic, j->ifindex, &j->r.u.open);
	}
	unpin(b, j);
	if (j->step == BRK_STEP_MAKE) {
		buf_made(b, j->user, j->buf, j->r.err ? -1 : j->keep);
		j->buf = NULL;
		j->keep = -1;
	} else if (j->q.type == DMT_BRK_UDMABUF && !j->r.err &&
		   !buf_reserve(b, c, j->size, &j->r, &j->buf)) {
		j->step = BRK_STEP_MAKE;	/* c stays busy */
		job_queue(b, j);
		return;
	}
	if (send_reply(b, c, j) || j->drop)
		c->gone = true;
	c->busy = false;
	j->c = NULL;
	if (j->rfd >= 0)
		j->fds[j->nfds++] = j->rfd;	/* our copy: the client has it */
	j->rfd = -1;
	if (c->gone)
		brk_drop(b, c);
	if (j->nfds) {
		j->step = BRK_STEP_CLOSE;
		job_queue(b, j);
	} else {
		job_free(b, j);
	}
}

void brk_job_done(struct brk *b, struct brk_job *j)
{
	struct brk_client *c = j->c;

	j->user->running--;
	switch (j->step) {
	case BRK_STEP_RECV:
	case BRK_STEP_MAKE:
		b->recv_running--;
		recv_done(b, j);
		return;
	case BRK_STEP_DISCARD:
		c->busy = false;
		if (j->drop)
			c->gone = true;
		job_free(b, j);
		if (c->gone)
			brk_drop(b, c);
		return;
	case BRK_STEP_CLOSE:
		if (j->conn)
			j->user->conns--;
		job_free(b, j);
		return;
	}
}

/* ---- the end of a client -------------------------------------------------- */

static void unlink_client(struct brk *b, struct brk_client *c)
{
	char msg[DMT_BRK_ERRMSG_MAX];
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
		if (h->client != c)
			continue;
		if (h->opening) {	/* at exit: its job never ran */
			unlink_handle(b, h);
			free(h);
		} else {
			release_handle(b, h, msg);
		}
	}
	brk_log(b, DEVMEMTCP_LOG_DEBUG, "pid %ld (%s) uid %u disconnected", (long)c->peer.pid,
		c->peer.comm, c->peer.uid);
}

void brk_drop(struct brk *b, struct brk_client *c)
{
	if (c->busy) {
		c->gone = true;
		return;
	}
	unlink_client(b, c);
	close_conn(b, c->user, c->fd);
	free(c);
}

uint32_t brk_settle(struct brk *b)
{
	char msg[DMT_BRK_ERRMSG_MAX];
	struct brk_handle *h, *next;
	uint32_t left = 0;

	for (struct brk_user *u = b->users, *un; u; u = un) {
		un = u->next;
		bufs_sweep(b, u);
		user_put(b, u);
	}
	left += b->nbufs;

	for (h = b->handles; h; h = next) {
		next = h->next;
		if (h->client || h->pins)
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
	/* a udmabuf made that lives keeps its bytes counted: a broker that
	 * exited would not know of it */
	return !b->clients && !b->handles && !b->nbufs;
}

void brk_fini(struct brk *b)
{
	struct brk_handle *h;
	struct brk_job *j;

	/* queued jobs are not run: what they hold goes with the process,
	 * whose exit drops it without lingering */
	while ((j = b->queue)) {
		b->queue = j->next;
		if (j->c)
			j->c->busy = false;
		j->user->work--;
		free(j);
	}
	while (b->clients) {
		struct brk_client *c = b->clients;

		unlink_client(b, c);
		/* a socket that still holds a client's fds, or one a helper
		 * reads, is left to the exit too */
		if (!c->busy && brk_fds_queued(c->fd) == 0)
			close(c->fd);
		free(c);
	}
	while ((h = b->handles)) {
		brk_log(b, DEVMEMTCP_LOG_INFO,
			"handle %u of pid %ld on %s still has a binding: left to its owner (undone after it exits by the next open, close or 'devmemtcp restore %s')",
			h->id, (long)h->pid, h->ifname, h->ifname);
		b->ops->forget(b, h->nic);
		unlink_handle(b, h);
		free(h);
	}
	while (b->users) {
		struct brk_user *u = b->users;

		b->users = u->next;
		while (u->bufs) {
			struct brk_buf *f = u->bufs;

			u->bufs = f->next;
			if (f->keep >= 0)
				close(f->keep);
			free(f);
		}
		free(u);
	}
	b->nbufs = 0;
}
