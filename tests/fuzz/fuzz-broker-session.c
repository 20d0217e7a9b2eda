// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp-broker's session layer (broker/session.c): brk_serve
 * and the jobs it hands to helpers, over real SOCK_SEQPACKET socket
 * pairs, with its operations (struct brk_ops) faked.  The input is a
 * program: clients connect with credentials the harness gives (what
 * SO_PEERCRED would say), send requests (built from the input, or raw
 * bytes) with memfds and pipes attached (SCM_RIGHTS), read their replies,
 * close what they were sent, hang up, die; the jobs run (inline, as a
 * helper would), lingering handles settle.  Each fake operation takes its
 * outcome from the input too.
 *
 * What is checked, besides no crash, no leak, no undefined behaviour:
 * every reply passes the client's check (dmt_brk_reply_check) and answers
 * the client's requests in order; a connection ends only after its
 * request was answered or refused; the operations see only what the
 * policy allows (an interface and queues within the user's rule and
 * quota, flows within its ports, bind-tx only with tx, a udmabuf within
 * its size and within udmabuf-total with what the user still holds);
 * a handle is used only by the connection that opened it (or closed when
 * its connection went), a queue bound only by the process whose handle
 * owns it; at the end every handle is closed or forgotten once and no
 * file descriptor is left open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "session.h"

#define NCLIENTS 6
#define NIFS 3
#define NQUEUES 8
#define MAX_NICS 64
#define MAX_HELD 16		/* fds a client keeps from its replies */
#define MAX_PENDING 8

static const char policy_text[] =
	"allow uid 1000 interface fz0 queues 4 ports any udmabuf 64K udmabuf-total 128K tx\n"
	"allow uid 1001 interface fz0,fz1 queues 2 ports 5000-5010,6000\n"
	"allow uid 1002 interface fz1 queues 1,3-4 ports any\n"
	"allow gid 2000 interface * queues 1 ports 7000 udmabuf 8K\n"
	"allow everyone interface fz2 queues 1\n";
static const char *const ifnames[NIFS] = { "fz0", "fz1", "fz2" };

/* A handle the fake NIC opened. */
struct fake_nic {
	bool used;
	bool bound_rx;		/* opened with a buffer */
	pid_t pid;
	uint32_t uid;
	int ifindex;
	uint32_t nqueues;
	uint32_t queues[DMT_BRK_MAX_QUEUES];
	int bind_end;		/* our end of the binding's "netlink socket" */
};

/* A binding made by bind-rx or bind-tx. */
struct fake_binding {
	bool used;
	int ifindex;
	uint32_t nqueues;
	uint32_t queues[DMT_BRK_MAX_QUEUES];
	int end;
};

struct client {
	bool on;
	int fd;			/* the client's end */
	struct brk_peer peer;
	bool dead;		/* its process exited */
	uint16_t types[MAX_PENDING];	/* requests not answered yet */
	uint32_t seqs[MAX_PENDING];
	bool v1[MAX_PENDING];		/* sent as protocol version 1 */
	int npending;
	int held[MAX_HELD];	/* fds it received */
	bool held_buf[MAX_HELD];	/* a udmabuf of ... */
	uint64_t held_size[MAX_HELD];
	int nheld;
	uint32_t seq;
};

static struct {
	struct fz *f;
	struct dmt_policy policy;
	struct brk b;
	struct client c[NCLIENTS];
	struct fake_nic nics[MAX_NICS];
	struct fake_binding bindings[MAX_NICS];
	const struct brk_client *current;	/* whose request runs, NULL none */
	int opened, closed;
} s;

static bool fate_fails(void)
{
	return fz_u8(s.f) % 4 == 0;
}

static int fake_fail(char *msg)
{
	snprintf(msg, DMT_BRK_ERRMSG_MAX, "fake: failed");
	return -EIO;
}

static struct dmt_pol_who_is who_of(const struct brk_client *c)
{
	return (struct dmt_pol_who_is){ c->peer.uid, c->peer.groups, c->peer.ngroups };
}

/* A pipe: its write end for the client, its read end ours (POLLHUP once
 * every copy of the write end is closed). */
static void pipe_pair(int *mine, int *theirs)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC))
		abort();
	*mine = p[0];
	*theirs = p[1];
}

static bool end_alive(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return !(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP));
}

static bool fd_open(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) >= 0;
}

/* Queues of ifindex that uid owns through open handles. */
static uint32_t owned(uint32_t uid, int ifindex)
{
	uint32_t n = 0;

	for (int i = 0; i < MAX_NICS; i++)
		if (s.nics[i].used && s.nics[i].uid == uid && s.nics[i].ifindex == ifindex)
			n += s.nics[i].nqueues;
	return n;
}

/* ---- the fake operations -------------------------------------------- */

static int op_open(struct brk *b, const char *ifname, const struct devmemtcp_nic_opts *o,
		   int dmabuf, pid_t pid, uint64_t start, void **nicp,
		   struct dmt_brk_open_reply *r, int *nl_fd, char *msg)
{
	const struct brk_client *c = s.current;
	struct dmt_pol_who_is w;
	const struct dmt_pol_rule *rule;
	struct fake_nic *n = NULL;
	int ifindex = b->ops->ifindex(b, ifname);
	uint32_t want = o->nqueues ? o->nqueues : 1;

	/* only for the client whose request this is, as the policy allows */
	FZ_CHECK(c && c->peer.pid == pid && c->peer.start == start && !c->peer.refused);
	w = who_of(c);
	rule = dmt_policy_match(&s.policy, &w, ifname);
	FZ_CHECK(rule != NULL);
	FZ_CHECK(!(o->flags & DEVMEMTCP_NIC_KEEP_RSS));
	FZ_CHECK(owned(c->peer.uid, ifindex) + want <= rule->queues);
	/* a rule that names queue ids: asked for by id, each named */
	FZ_CHECK(!rule->nqranges || o->queues);
	for (uint32_t i = 0; rule->nqranges && i < o->nqueues; i++)
		FZ_CHECK(dmt_policy_queue_ok(rule, o->queues[i]));
	for (size_t i = 0; i < o->nflows; i++)
		FZ_CHECK(dmt_policy_flow_ok(rule, &o->flows[i]));
	FZ_CHECK(dmabuf < 0 || fd_open(dmabuf));
	*nl_fd = -1;
	if (!ifindex || fate_fails())
		return fake_fail(msg);
	for (int i = 0; i < MAX_NICS && !n; i++)
		if (!s.nics[i].used)
			n = &s.nics[i];
	if (!n || want > NQUEUES)
		return fake_fail(msg);
	memset(n, 0, sizeof(*n));
	n->used = true;
	n->pid = pid;
	n->uid = c->peer.uid;
	n->ifindex = ifindex;
	n->nqueues = want;
	n->bind_end = -1;
	for (uint32_t i = 0; i < want; i++)
		n->queues[i] = o->queues ? o->queues[i] : NQUEUES - 1 - i;
	r->nqueues = want;
	memcpy(r->queues, n->queues, want * sizeof(uint32_t));
	if (dmabuf >= 0) {
		n->bound_rx = true;
		pipe_pair(&n->bind_end, nl_fd);
		r->binding_id = 1 + (uint32_t)(n - s.nics);
	}
	*nicp = n;
	s.opened++;
	return 0;
}

static void nic_gone(struct fake_nic *n)
{
	FZ_CHECK(n >= s.nics && n < s.nics + MAX_NICS && n->used);
	if (n->bind_end >= 0)
		close(n->bind_end);
	n->used = false;
	s.closed++;
}

/* A handle is closed by its own connection's request, or when that
 * connection went (current NULL). */
static void check_owner(const struct fake_nic *n)
{
	FZ_CHECK(n >= s.nics && n < s.nics + MAX_NICS && n->used);
	if (s.current)
		FZ_CHECK(s.current->peer.pid == n->pid);
}

static int op_close(struct brk *b, void *nic, char *msg)
{
	check_owner(nic);
	nic_gone(nic);
	return fate_fails() ? fake_fail(msg) : 0;
}

static void op_forget(struct brk *b, void *nic)
{
	nic_gone(nic);
}

static int op_add_flow(struct brk *b, void *nic, const struct devmemtcp_flow *f, char *msg)
{
	struct fake_nic *n = nic;
	struct dmt_pol_who_is w;
	const struct dmt_pol_rule *rule;

	check_owner(n);
	FZ_CHECK(s.current != NULL);
	w = who_of(s.current);
	rule = dmt_policy_match(&s.policy, &w, ifnames[n->ifindex - 1]);
	FZ_CHECK(rule && dmt_policy_flow_ok(rule, f));
	return fate_fails() ? fake_fail(msg) : fz_u8(s.f);
}

static int op_remove_flow(struct brk *b, void *nic, int id, char *msg)
{
	check_owner(nic);
	FZ_CHECK(id >= 0);
	return fate_fails() ? fake_fail(msg) : 0;
}

static int op_bind(struct brk *b, bool tx, int ifindex, const uint32_t *queues, size_t nq,
		   int dmabuf, uint32_t rx_page_size, bool verify, int *nl_fd, uint32_t *id,
		   char *msg)
{
	const struct brk_client *c = s.current;
	struct dmt_pol_who_is w;
	const struct dmt_pol_rule *rule;
	struct fake_binding *fb = NULL;

	FZ_CHECK(c && !c->peer.refused && fd_open(dmabuf));
	FZ_CHECK(ifindex >= 1 && ifindex <= NIFS);
	w = who_of(c);
	rule = dmt_policy_match(&s.policy, &w, ifnames[ifindex - 1]);
	FZ_CHECK(rule && (!tx || rule->tx));
	FZ_CHECK(!tx || nq == 0);
	/* every queue one that a handle of the calling process owns */
	for (size_t i = 0; i < nq; i++) {
		bool mine = false;

		for (int k = 0; k < MAX_NICS && !mine; k++) {
			const struct fake_nic *n = &s.nics[k];

			if (!n->used || n->pid != c->peer.pid || n->ifindex != ifindex)
				continue;
			for (uint32_t q = 0; q < n->nqueues; q++)
				mine |= n->queues[q] == queues[i];
		}
		FZ_CHECK(mine);
	}
	*nl_fd = -1;
	if (fate_fails())
		return fake_fail(msg);
	for (int i = 0; i < MAX_NICS && !fb; i++)
		if (!s.bindings[i].used)
			fb = &s.bindings[i];
	if (!fb)
		return fake_fail(msg);
	fb->used = true;
	fb->ifindex = ifindex;
	fb->nqueues = (uint32_t)nq;
	memcpy(fb->queues, queues, nq * sizeof(uint32_t));
	pipe_pair(&fb->end, nl_fd);
	*id = 100 + (uint32_t)(fb - s.bindings);
	return 0;
}

/* What the client still holds of udmabufs: bytes. */
static uint64_t held_bufs(uint32_t uid)
{
	uint64_t n = 0;

	for (int i = 0; i < NCLIENTS; i++) {
		if (!s.c[i].on || s.c[i].peer.uid != uid)
			continue;
		for (int k = 0; k < s.c[i].nheld; k++)
			n += s.c[i].held_buf[k] ? s.c[i].held_size[k] : 0;
	}
	return n;
}

static int op_udmabuf_size(struct brk *b, int memfd, uint64_t max, uint64_t *size, char *msg)
{
	struct dmt_pol_who_is w;
	struct stat st;

	FZ_CHECK(s.current && !s.current->peer.refused && fd_open(memfd));
	w = who_of(s.current);
	FZ_CHECK(max && max == dmt_policy_udmabuf(&s.policy, &w));
	if (fcntl(memfd, F_GET_SEALS) < 0 || fstat(memfd, &st) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > max || fate_fails())
		return fake_fail(msg);
	*size = (uint64_t)st.st_size;
	return 0;
}

static int op_udmabuf(struct brk *b, int memfd, uint64_t size, int *dmabuf, int *keep,
		      char *msg)
{
	const struct dmt_pol_rule *rule;
	struct dmt_pol_who_is w;

	FZ_CHECK(s.current && fd_open(memfd));
	w = who_of(s.current);
	/* within what the user may have alive, with what it still holds */
	FZ_CHECK(held_bufs(s.current->peer.uid) + size <=
		 dmt_policy_udmabuf_total(&s.policy, &w, &rule));
	*dmabuf = *keep = -1;
	if (fate_fails())
		return fake_fail(msg);
	pipe_pair(keep, dmabuf);
	return 0;
}

static int op_buf_alive(struct brk *b, int keep)
{
	FZ_CHECK(fd_open(keep));
	return end_alive(keep);
}

static int op_bound(struct brk *b, int ifindex, const uint32_t *queues, size_t n)
{
	for (int i = 0; i < MAX_NICS; i++) {
		const struct fake_nic *f = &s.nics[i];
		const struct fake_binding *fb = &s.bindings[i];

		if (f->used && f->bind_end >= 0 && f->ifindex == ifindex && end_alive(f->bind_end))
			for (size_t k = 0; k < n; k++)
				for (uint32_t q = 0; q < f->nqueues; q++)
					if (f->queues[q] == queues[k])
						return 1;
		if (fb->used && fb->ifindex == ifindex && end_alive(fb->end))
			for (size_t k = 0; k < n; k++)
				for (uint32_t q = 0; q < fb->nqueues; q++)
					if (fb->queues[q] == queues[k])
						return 1;
	}
	return fz_u8(s.f) % 8 == 0 ? -EIO : 0;
}

static int op_ifindex(struct brk *b, const char *ifname)
{
	for (int i = 0; i < NIFS; i++)
		if (!strcmp(ifname, ifnames[i]))
			return i + 1;
	return 0;
}

static int op_ifname(struct brk *b, int ifindex, char *name)
{
	if (ifindex < 1 || ifindex > NIFS)
		return -ENODEV;
	snprintf(name, IF_NAMESIZE, "%s", ifnames[ifindex - 1]);
	return 0;
}

static bool op_alive(pid_t pid, uint64_t start)
{
	for (int i = 0; i < NCLIENTS; i++)
		if (s.c[i].on && s.c[i].peer.pid == pid)
			return !s.c[i].dead;
	return false;
}

static void op_log(struct brk *b, int level, const char *msg)
{
	FZ_CHECK(msg[0] != '\0');
}

static const struct brk_ops fake_ops = {
	.open = op_open,
	.close = op_close,
	.forget = op_forget,
	.add_flow = op_add_flow,
	.remove_flow = op_remove_flow,
	.bind = op_bind,
	.udmabuf_size = op_udmabuf_size,
	.udmabuf = op_udmabuf,
	.buf_alive = op_buf_alive,
	.bound = op_bound,
	.ifindex = op_ifindex,
	.ifname = op_ifname,
	.alive = op_alive,
	.log = op_log,
};

/* ---- the broker's side ----------------------------------------------- */

static struct brk_client *broker_side(const struct client *c)
{
	for (struct brk_client *bc = s.b.clients; bc; bc = bc->next)
		if (bc->peer.pid == c->peer.pid)
			return bc;
	return NULL;
}

/* Every job there is, as the helpers would run them, one at a time. */
static void run_jobs(void)
{
	struct brk_job *j;

	while ((j = brk_job_next(&s.b))) {
		FZ_CHECK(j->user->running <= BRK_MAX_WORK_PER_UID);
		s.current = j->c;
		brk_job_run(&s.b, j);
		s.current = NULL;
		brk_job_done(&s.b, j);
	}
}

/* The broker reads what the client sent, if it may. */
static void serve(struct client *c)
{
	struct brk_client *bc = broker_side(c);
	int ret;

	if (!bc || !brk_readable(&s.b, bc))
		return;
	s.current = bc;
	ret = brk_serve(&s.b, bc);
	s.current = NULL;
	if (ret < 0)
		brk_drop(&s.b, bc);
}

/* ---- the clients ------------------------------------------------------ */

static void connect_client(int i)
{
	struct client *c = &s.c[i];
	static const uint32_t uids[] = { 1000, 1001, 1002, 1003, 0 };
	int sv[2];

	if (c->on)
		return;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		abort();
	memset(c, 0, sizeof(*c));
	c->on = true;
	c->fd = sv[0];
	c->peer.pid = 100 + i + 10 * (fz_u8(s.f) % 2);	/* two processes may share a pid slot */
	c->peer.start = 1;
	c->peer.uid = uids[fz_u8(s.f) % 5];
	c->peer.gid = c->peer.uid == 1002 ? 2000 : c->peer.uid;
	c->peer.groups[c->peer.ngroups++] = c->peer.gid;
	snprintf(c->peer.comm, sizeof(c->peer.comm), "fz%d", i);
	if (fz_u8(s.f) % 8 == 0) {
		c->peer.refused = -EXDEV;
		snprintf(c->peer.why, sizeof(c->peer.why), "in another network namespace");
	}
	/* a pid reused by another client: the broker tells them apart by
	 * the pid, as it would (start times differ in truth) */
	for (int k = 0; k < NCLIENTS; k++)
		if (k != i && s.c[k].on && s.c[k].peer.pid == c->peer.pid)
			c->peer.pid += 1000;
	brk_accept(&s.b, sv[1], &c->peer, NULL);
}

static void put_flow(uint8_t **p)
{
	struct dmt_brk_flow w = { .family = fz_u8(s.f) % 8 ? AF_INET : AF_INET6 };

	if (fz_u8(s.f) % 8 == 0)
		w.family = fz_u32(s.f);
	w.flags = fz_u8(s.f) % 8 == 0 ? fz_u32(s.f) : 0;
	w.dst_port = fz_u8(s.f) % 2 ? 5000 + fz_u8(s.f) % 16 : fz_u16(s.f);
	w.dst_port_mask = fz_u8(s.f) % 4 ? 0xffff : fz_u16(s.f);
	w.queue = fz_u8(s.f) % NQUEUES;
	memcpy(*p, &w, sizeof(w));
	*p += sizeof(w);
}

/* A request built from the input: its bytes in m, its length. */
static size_t build(uint8_t *m, uint16_t *type)
{
	struct dmt_brk_hdr *h = (struct dmt_brk_hdr *)m;
	uint8_t *b = m + sizeof(*h), *p = b;
	uint8_t kind = fz_u8(s.f);

	*type = (uint16_t)(1 + fz_u8(s.f) % 8);
	switch (*type) {
	case DMT_BRK_OPEN: {
		struct dmt_brk_open o = { .flags = fz_u8(s.f) & 0x1f };

		snprintf(o.ifname, sizeof(o.ifname), "%s",
			 fz_u8(s.f) % 8 ? ifnames[fz_u8(s.f) % NIFS] : "fz9");
		if (fz_u8(s.f) % 2)
			o.nids = fz_u8(s.f) % 4;
		else
			o.nqueues = fz_u8(s.f) % 4;
		o.nflows = fz_u8(s.f) % 3;
		memcpy(p, &o, sizeof(o));
		p += sizeof(o);
		for (uint32_t i = 0; i < o.nids; i++) {
			uint32_t q = (i * 3 + fz_u8(s.f)) % NQUEUES;

			memcpy(p, &q, sizeof(q));
			p += sizeof(q);
		}
		for (uint32_t i = 0; i < o.nflows; i++)
			put_flow(&p);
		break;
	}
	case DMT_BRK_CLOSE:
	case DMT_BRK_REMOVE_FLOW: {
		struct dmt_brk_handle hb = { fz_u8(s.f) % 8,
					     *type == DMT_BRK_CLOSE ? 0 : fz_u8(s.f) % 4 };

		memcpy(p, &hb, sizeof(hb));
		p += sizeof(hb);
		break;
	}
	case DMT_BRK_ADD_FLOW: {
		uint32_t hv[2] = { fz_u8(s.f) % 8, 0 };

		memcpy(p, hv, sizeof(hv));
		p += sizeof(hv);
		put_flow(&p);
		break;
	}
	case DMT_BRK_BIND_RX:
	case DMT_BRK_BIND_TX: {
		struct dmt_brk_bind r = { .ifindex = 1 + fz_u8(s.f) % (NIFS + 1),
					  .flags = fz_u8(s.f) % 2 };

		r.nqueues = *type == DMT_BRK_BIND_TX ? 0 : 1 + fz_u8(s.f) % 3;
		memcpy(p, &r, sizeof(r));
		p += sizeof(r);
		for (uint32_t i = 0; i < r.nqueues; i++) {
			uint32_t q = (NQUEUES - 1 - i + fz_u8(s.f) % 2) % NQUEUES;

			memcpy(p, &q, sizeof(q));
			p += sizeof(q);
		}
		break;
	}
	case DMT_BRK_UDMABUF:
		memset(p, 0, sizeof(struct dmt_brk_udmabuf));
		p += sizeof(struct dmt_brk_udmabuf);
		break;
	case DMT_BRK_POLICY: {
		struct dmt_brk_policy q = { 0 };

		snprintf(q.ifname, sizeof(q.ifname), "%s", ifnames[fz_u8(s.f) % NIFS]);
		memcpy(p, &q, sizeof(q));
		p += sizeof(q);
		break;
	}
	default:
		break;
	}
	dmt_brk_hdr_init(h, *type, (size_t)(p - b), 0);
	/* now and then, a field of the header or a byte of the body spoiled */
	if (kind % 8 == 1)
		h->len = fz_u32(s.f);
	else if (kind % 8 == 2 && p > b)
		b[fz_u16(s.f) % (size_t)(p - b)] ^= (uint8_t)(1 + fz_u8(s.f));
	else if (kind % 8 == 3)
		h->version = fz_u16(s.f);
	return (size_t)(p - m);
}

/* An fd for a request: a memfd of a few pages (sealed and allocated, or
 * not), a pipe's end, or the client's own socket. */
static int make_fd(struct client *c, int *extra)
{
	uint8_t kind = fz_u8(s.f) % 4;
	int fd, p[2];

	*extra = -1;
	if (kind == 3) {
		if (pipe2(p, O_CLOEXEC))
			abort();
		*extra = p[1];
		return p[0];
	}
	if (kind == 2)
		return fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
	fd = memfd_create("fz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)(4096 * (1 + fz_u8(s.f) % 20))))
		abort();
	if (kind == 0)
		fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	return fd;
}

/* sendmsg of len bytes with nfds fds (0-3) */
static int send_fds(int sock, const void *m, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)m, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static void send_request(struct client *c)
{
	uint8_t m[DMT_BRK_MSG_MAX + 64];
	int fds[3], extra[3], nfds = fz_u8(s.f) % 4;
	struct dmt_brk_hdr h = { 0 };
	uint16_t type = 0;
	uint32_t seq = 0;
	size_t len;

	if (nfds == 3 && fz_u8(s.f) % 2)
		nfds = 1;	/* mostly none or one, as requests carry */
	if (fz_u8(s.f) % 8 == 0) {	/* raw bytes */
		len = fz_u16(s.f) % 600;
		fz_bytes(s.f, m, len);
	} else {
		len = build(m, &type);
	}
	if (len >= sizeof(struct dmt_brk_hdr)) {
		seq = ++c->seq;
		memcpy(&type, m + 6, sizeof(type));
		memcpy(m + 12, &seq, sizeof(seq));
		memcpy(&h, m, sizeof(h));
	} else {
		type = 0;	/* the broker answers what it could not read as type 0 */
	}
	if (c->npending == MAX_PENDING)
		return;	/* no room to remember what it asked */
	for (int i = 0; i < nfds; i++)
		fds[i] = make_fd(c, &extra[i]);
	if (send_fds(c->fd, m, len, fds, nfds) == 0) {
		c->types[c->npending] = type;
		c->v1[c->npending] = h.magic == DMT_BRK_MAGIC && h.version == 1;
		c->seqs[c->npending++] = seq;
	}
	for (int i = 0; i < nfds; i++) {
		close(fds[i]);
		if (extra[i] >= 0)
			close(extra[i]);
	}
}

static void drop_held(struct client *c, int k)
{
	close(c->held[k]);
	c->held[k] = c->held[--c->nheld];
	c->held_buf[k] = c->held_buf[c->nheld];
	c->held_size[k] = c->held_size[c->nheld];
}

/* The replies that came: each the answer to the oldest request. */
static void read_replies(struct client *c)
{
	for (;;) {
		union {
			char buf[CMSG_SPACE(4 * sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct dmt_brk_reply r;
		struct iovec iov = { &r, sizeof(r) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };
		char why[320];
		int fds[4], n, ret;
		ssize_t len = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (len < 0 && errno == ECONNRESET)
			continue;	/* it hung up with requests unread; replies may wait */
		if (len <= 0) {
			if (len == 0)
				c->npending = 0;	/* it hung up: nothing more comes */
			return;
		}
		n = dmt_brk_take_fds(&msg, fds, 4);
		FZ_CHECK(c->npending > 0);
		ret = dmt_brk_reply_check(&r, (size_t)len, c->types[0], c->seqs[0], n, 1, why,
					  sizeof(why));
		/* a version-1 request is refused as version 1's client reads it:
		 * in that size and number, which this client refuses */
		if (c->v1[0])
			FZ_CHECK(ret == -EPROTONOSUPPORT && len == DMT_BRK_REPLY_V1_SIZE &&
				 r.hdr.version == 1 && r.hdr.len == len &&
				 (r.err == -EPROTONOSUPPORT || r.err == -EMSGSIZE) && !n);
		else if (ret)
			fprintf(stderr, "the client refuses a reply: %s\n", why);
		FZ_CHECK(c->v1[0] || ret == 0);
		if (n == 1 && c->nheld < MAX_HELD) {
			c->held_buf[c->nheld] = c->types[0] == DMT_BRK_UDMABUF;
			c->held_size[c->nheld] = r.u.size;
			c->held[c->nheld++] = fds[0];
		} else if (n == 1) {
			close(fds[0]);
		}
		memmove(c->types, c->types + 1, (size_t)(c->npending - 1) * sizeof(c->types[0]));
		memmove(c->seqs, c->seqs + 1, (size_t)(c->npending - 1) * sizeof(c->seqs[0]));
		memmove(c->v1, c->v1 + 1, (size_t)(c->npending - 1) * sizeof(c->v1[0]));
		c->npending--;
	}
}

static void hang_up(struct client *c)
{
	read_replies(c);
	close(c->fd);
	c->fd = -1;
}

/* The client is gone entirely: what it held closed too. */
static void client_gone(struct client *c)
{
	if (c->fd >= 0)
		hang_up(c);
	while (c->nheld)
		drop_held(c, 0);
	c->on = false;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		abort();
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct fz f = fz_init(data, size);
	unsigned int line;
	char why[256];
	int fds0 = count_fds();

	if (!ready) {
		if (dmt_policy_parse(policy_text, sizeof(policy_text) - 1, &s.policy, &line, why,
				     sizeof(why)))
			abort();
		ready = true;
	}
	{
		struct dmt_policy keep = s.policy;

		memset(&s, 0, sizeof(s));
		s.policy = keep;
	}
	s.f = &f;
	for (int i = 0; i < NCLIENTS; i++)
		s.c[i].fd = -1;
	brk_init(&s.b, &fake_ops, NULL, &s.policy, "/fz/broker.conf");
	s.b.log_level = DEVMEMTCP_LOG_DEBUG;
	for (int steps = 0; fz_left(&f) && steps < 200; steps++) {
		uint8_t op = fz_u8(&f);
		struct client *c = &s.c[op / 16 % NCLIENTS];

		switch (op % 16) {
		case 0:
		case 1:
			connect_client(op / 16 % NCLIENTS);
			break;
		case 2:
		case 3:
		case 4:
		case 5:
			if (c->on && c->fd >= 0) {
				send_request(c);
				serve(c);
			}
			break;
		case 6:
		case 7:
			run_jobs();
			break;
		case 8:
			if (c->on && c->fd >= 0)
				read_replies(c);
			break;
		case 9:
			if (c->on && c->nheld)
				drop_held(c, fz_u8(&f) % c->nheld);
			break;
		case 10:
			if (c->on && c->fd >= 0) {
				hang_up(c);
				serve(c);	/* the broker sees the end */
			}
			break;
		case 11:
			if (c->on)
				c->dead = true;
			break;
		case 12:
			brk_settle(&s.b);
			break;
		case 13:
			for (int i = 0; i < NCLIENTS; i++)
				if (s.c[i].on && s.c[i].fd >= 0)
					serve(&s.c[i]);
			break;
		case 14:
			if (c->on) {
				struct brk_client *bc = broker_side(c);

				if (bc)
					brk_drop(&s.b, bc);
				client_gone(c);
			}
			break;
		default:
			run_jobs();
			for (int i = 0; i < NCLIENTS; i++)
				if (s.c[i].on && s.c[i].fd >= 0)
					read_replies(&s.c[i]);
			break;
		}
	}
	/* the end: every request answered, clients gone, bindings gone */
	run_jobs();
	for (int i = 0; i < NCLIENTS; i++) {
		struct client *c = &s.c[i];
		struct brk_client *bc;

		if (!c->on)
			continue;
		for (int k = 0; k < 4 && c->fd >= 0; k++) {
			serve(c);
			run_jobs();
			read_replies(c);
		}
		bc = broker_side(c);
		if (bc)
			brk_drop(&s.b, bc);
		run_jobs();
		client_gone(c);
	}
	run_jobs();
	for (int i = 0; i < MAX_NICS; i++)
		if (s.bindings[i].used) {
			close(s.bindings[i].end);
			s.bindings[i].used = false;
		}
	brk_settle(&s.b);
	/* no client, every binding gone: nothing held any more */
	FZ_CHECK(brk_idle(&s.b) && !s.b.queue && !s.b.users);
	brk_fini(&s.b);
	FZ_CHECK(s.opened == s.closed);
	for (int i = 0; i < MAX_NICS; i++)
		FZ_CHECK(!s.nics[i].used);
	FZ_CHECK(count_fds() == fds0);
	return 0;
}
