// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-broker IFACE rx|two|denied|kill|broker-kill|quota|all: unprivileged
 * receivers through devmemtcp-broker on the simulated NIC (dsim1).  The
 * test runs as root, starts brokers by hand (--idle-exit) with a policy of
 * its own, and forks clients that drop to uids without any capability
 * (setresuid to a non-root uid clears them all), which use the library's
 * ordinary calls: the library goes through the broker by itself.
 *
 * rx           uid 1001: a udmabuf (made by the broker where /dev/udmabuf
 *              is root's), devmemtcp_nic_open with a flow and the buffer,
 *              64 MiB received with every byte checked; the netlink socket
 *              the broker handed back gives no privilege (a well-formed
 *              bind-rx and an ethtool rings change sent on it fail with
 *              EPERM); after the close, bind-tx of the same buffer and
 *              16 MiB sent with devmem TX to an ordinary receiver, intact
 *              (kernels with devmem TX); the NIC as before at the end.
 * two          uids 1001 and 1002 at once on disjoint queues, 32 MiB each,
 *              validated.
 * denied       uid 1003, whom no rule names: EACCES naming the policy file.
 * kill         SIGKILL of a client holding a binding: the binding goes, the
 *              broker undoes the client's rule and context, the NIC is as
 *              before, and the broker then exits idle by itself.
 * broker-kill  the broker dies (SIGKILL, a test hook) in the middle of a
 *              client's setup: the client hears that it closed the
 *              connection; the next broker leaves the half setup to its
 *              live owner, and the same client sets up again through it
 *              (under another file name) and closes; once the client has
 *              exited, the next broker's start restores the NIC and
 *              removes every file of the setup.
 * quota        uid 1004 (udmabuf 1M udmabuf-total 3M): three udmabufs made
 *              by the broker, the fourth refused with EDQUOT naming
 *              udmabuf-total, one more made once one is freed.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <dirent.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness-nic.h"
#include "pattern.h"

#define TDIR "/run/dmt-vm-broker"
#define SOCK TDIR "/broker.sock"
#define CONF TDIR "/broker.conf"
#define LOG TDIR "/broker.log"
#define RUN_DIR "/run/devmemtcp"

#define BUF_SIZE (32u << 20)
#define TX_BYTES (16u << 20)
#define TX_PORT 5405

static struct devmemtcp_ctx *ctx;
static const char *ifname;
static char broker[4096];
/* what a failed test may have left running, ended by the next one */
static pid_t running[8];
static int nrunning;

static void leave(pid_t pid)
{
	if (nrunning < 8)
		running[nrunning++] = pid;
}

static void gone(pid_t pid)
{
	for (int i = 0; i < nrunning; i++)
		if (running[i] == pid)
			running[i] = 0;
}

/* The start of each test: nothing of an earlier one running, the NIC
 * recovered from what it left. */
static void reset(void)
{
	for (int i = 0; i < nrunning; i++)
		if (running[i] > 0 && !kill(running[i], SIGKILL))
			waitpid(running[i], NULL, 0);
	nrunning = 0;
	unlink(SOCK);
	devmemtcp_nic_recover(ctx, ifname, NULL);
}

/* ---- the broker ---------------------------------------------------------- */

static int write_conf(void)
{
	FILE *f;

	T_CHECK(mkdir(TDIR, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", TDIR, strerror(errno));
	T_CHECK(chmod(TDIR, 0755) == 0, "chmod %s", TDIR);
	f = fopen(CONF, "w");
	T_CHECK(f, "%s: %s", CONF, strerror(errno));
	fprintf(f, "# test-broker\n"
		   "allow uid 1001 interface %s queues 2 ports 5400-5409 udmabuf 64M tx\n"
		   "allow uid 1002 interface %s queues 1 ports 5410-5419 udmabuf 64M\n"
		   "allow uid 1004 interface %s udmabuf 1M udmabuf-total 3M\n",
		ifname, ifname, ifname);
	fclose(f);
	T_CHECK(chmod(CONF, 0644) == 0, "chmod %s", CONF);
	setenv("DEVMEMTCP_BROKER_SOCKET", SOCK, 1);
	return 0;
}

static void show_log(void)
{
	t_run("sed 's/^/  broker: /' %s >&2", LOG);
}

/* A broker (crash_step: the DEVMEMTCP_NIC_CRASH_STEP of its opens) that
 * accepts connections (a killed one leaves its socket file behind); its
 * pid, or -1 (printed). */
static pid_t broker_start(int idle_s, int crash_step)
{
	char idle[16];
	pid_t pid;

	snprintf(idle, sizeof(idle), "%d", idle_s);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int log = open(LOG, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		char step[16];

		if (log < 0 || dup2(log, 2) < 0 || close_range(3, ~0u, 0))
			_exit(126);
		snprintf(step, sizeof(step), "%d", crash_step);
		if (crash_step)
			setenv("DEVMEMTCP_NIC_CRASH_STEP", step, 1);
		execl(broker, broker, "--config", CONF, "--socket", SOCK, "--idle-exit", idle,
		      "--verbose", (char *)NULL);
		_exit(127);
	}
	leave(pid);
	for (int i = 0; i < 500; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = SOCK };
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		bool up = fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa));

		if (fd >= 0)
			close(fd);
		if (up)
			return pid;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
		usleep(10000);
	}
	fprintf(stderr, "FAIL: %s did not start listening on %s\n", broker, SOCK);
	show_log();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* The broker exits by itself (idle) within s seconds, with status 0. */
static int broker_exits(pid_t pid, double s)
{
	double end = t_now() + s;
	int st;

	while (t_now() < end) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		T_CHECK(w >= 0, "waitpid: %s", strerror(errno));
		if (w == pid) {
			gone(pid);
			T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "broker exit status 0x%x", st);
			return 0;
		}
		usleep(50000);
	}
	show_log();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	T_CHECK(false, "the broker did not exit idle within %.0f s", s);
	return 0;
}

static int broker_stop(pid_t pid)
{
	int st;

	T_CHECK(kill(pid, SIGTERM) == 0, "kill");
	T_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	gone(pid);
	T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "broker exit status 0x%x", st);
	return 0;
}

/* ---- clients --------------------------------------------------------------- */

/* What a client tells the test, one message per write. */
struct report {
	char kind;		/* 'S' set up, 'R' received, 'T' sent, 'C' closed,
				 * 'E' failed */
	int err;
	uint32_t nq, q[2], binding;
	bool brk_udmabuf;	/* the client cannot open /dev/udmabuf */
	struct nic_rx_result rx;
	char msg[768];
};

struct client {
	pid_t pid;
	uid_t uid;
	int port;
	int cmd;		/* write: 'c' close, 'x' exit */
	int rep;		/* read: reports */
	struct vm_sender *snd;
	struct report setup;
};

struct client_args {
	uid_t uid;
	int port;
	bool with_buf;
	bool check_nl;		/* try privileged requests on the binding's socket */
	bool tx;		/* after the close: bind-tx and send TX_BYTES */
	bool retry;		/* a failed open is reported, then tried again
				 * when the test says 'o' */
};

static void tell(int fd, const struct report *r)
{
	(void)!write(fd, r, sizeof(*r));
}

static int hear(struct client *c, char kind, struct report *r)
{
	T_CHECK(read(c->rep, r, sizeof(*r)) == (ssize_t)sizeof(*r),
		"uid %u said nothing", c->uid);
	T_CHECK(r->kind == kind, "uid %u: '%c' (%d) not '%c': %s", c->uid, r->kind, r->err,
		kind, r->msg);
	return 0;
}

static int fail(int rep, int err, const char *what, const char *detail)
{
	struct report r = { .kind = 'E', .err = err };

	snprintf(r.msg, sizeof(r.msg), "%s%s", what, detail);
	tell(rep, &r);
	_exit(0);
}

/* The generic netlink sockets this process has open: a bit per fd < 64. */
static uint64_t genl_fds(void)
{
	uint64_t m = 0;

	for (int fd = 0; fd < 64; fd++) {
		int dom = 0, proto = 0;
		socklen_t len = sizeof(int);

		if (!getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) && dom == AF_NETLINK &&
		    !getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) &&
		    proto == NETLINK_GENERIC)
			m |= 1ull << fd;
	}
	return m;
}

struct nlreq {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char attrs[256];
};

static void put(struct nlreq *m, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)m + NLMSG_ALIGN(m->n.nlmsg_len));

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	m->n.nlmsg_len = NLMSG_ALIGN(m->n.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void put_u32(struct nlreq *m, uint16_t type, uint32_t v)
{
	put(m, type, &v, sizeof(v));
}

static struct nlattr *nest_start(struct nlreq *m, uint16_t type)
{
	struct nlattr *a = (struct nlattr *)((char *)m + NLMSG_ALIGN(m->n.nlmsg_len));

	a->nla_type = type | NLA_F_NESTED;
	m->n.nlmsg_len = NLMSG_ALIGN(m->n.nlmsg_len) + NLA_HDRLEN;
	return a;
}

static void nest_end(struct nlreq *m, struct nlattr *a)
{
	a->nla_len = (uint16_t)((char *)m + m->n.nlmsg_len - (char *)a);
}

static void req_init(struct nlreq *m, uint16_t family, uint8_t cmd, uint8_t version)
{
	memset(m, 0, sizeof(*m));
	m->n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	m->n.nlmsg_type = family;
	m->n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	m->n.nlmsg_seq = 77;
	m->g.cmd = cmd;
	m->g.version = version;
}

/* Send m on fd and read its answer: the error of the ack (0 or negative),
 * or 1 when the answer was not an ack. */
static int nl_ask(int fd, struct nlreq *m)
{
	char buf[8192];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	ssize_t n;

	if (send(fd, m, m->n.nlmsg_len, 0) < 0)
		return -errno;
	n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n))
		if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_seq == 77)
			return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return 1;
}

/* The id of a generic netlink family, asked on a socket of our own. */
static int family_id(const char *name)
{
	struct nlreq m;
	char buf[8192];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC), id = -1;
	ssize_t n;

	if (fd < 0)
		return -1;
	req_init(&m, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1);
	m.n.nlmsg_flags = NLM_F_REQUEST;
	put(&m, CTRL_ATTR_FAMILY_NAME, name, strlen(name) + 1);
	if (send(fd, &m, m.n.nlmsg_len, 0) < 0 || (n = recv(fd, buf, sizeof(buf), 0)) <= 0) {
		close(fd);
		return -1;
	}
	if (NLMSG_OK(h, (size_t)n) && h->nlmsg_type == GENL_ID_CTRL) {
		struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN);
		int left = (int)h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

		while (left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left) {
			if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
				id = *(uint16_t *)((char *)a + NLA_HDRLEN);
			left -= NLA_ALIGN(a->nla_len);
			a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len));
		}
	}
	close(fd);
	return id;
}

/* On the binding's socket nl (the broker opened it with CAP_NET_ADMIN):
 * a bind-rx of the buffer on queue q and turning header split off on the
 * interface both fail with EPERM, since the kernel checks the sender too. */
static int nl_unprivileged(int nl, int dmabuf, uint32_t q, char *why, size_t len)
{
	int netdev = family_id("netdev"), ethtool = family_id("ethtool");
	uint32_t ifindex = if_nametoindex(ifname);
	struct nlattr *nest, *hdr;
	struct nlreq m;
	uint8_t off = 1;	/* ETHTOOL_TCP_DATA_SPLIT_DISABLED */
	int ret;

	if (netdev < 0 || ethtool < 0) {
		snprintf(why, len, "families netdev %d, ethtool %d", netdev, ethtool);
		return -1;
	}
	req_init(&m, (uint16_t)netdev, 13 /* NETDEV_CMD_BIND_RX */, 1);
	put_u32(&m, 1 /* NETDEV_A_DMABUF_IFINDEX */, ifindex);
	put_u32(&m, 3 /* NETDEV_A_DMABUF_FD */, (uint32_t)dmabuf);
	nest = nest_start(&m, 2 /* NETDEV_A_DMABUF_QUEUES */);
	put_u32(&m, 1 /* NETDEV_A_QUEUE_ID */, q);
	put_u32(&m, 3 /* NETDEV_A_QUEUE_TYPE */, 0 /* RX */);
	nest_end(&m, nest);
	ret = nl_ask(nl, &m);
	if (ret != -EPERM) {
		snprintf(why, len, "bind-rx on the broker's socket: %d (%s), not EPERM", ret,
			 ret < 0 ? strerror(-ret) : "no ack");
		return -1;
	}
	req_init(&m, (uint16_t)ethtool, 16 /* ETHTOOL_MSG_RINGS_SET */, 1);
	hdr = nest_start(&m, 1 /* ETHTOOL_A_RINGS_HEADER */);
	put_u32(&m, 1 /* ETHTOOL_A_HEADER_DEV_INDEX */, ifindex);
	nest_end(&m, hdr);
	put(&m, 11 /* ETHTOOL_A_RINGS_TCP_DATA_SPLIT */, &off, 1);
	ret = nl_ask(nl, &m);
	if (ret != -EPERM) {
		snprintf(why, len, "rings-set on the broker's socket: %d (%s), not EPERM", ret,
			 ret < 0 ? strerror(-ret) : "no ack");
		return -1;
	}
	return 0;
}

/* bind-tx of buf on ifname through the broker, and TX_BYTES of the pattern
 * sent from it to the receiver at VM_TX_ADDR4:TX_PORT (tx.c's check of the
 * kernel: EOPNOTSUPP before 6.16). */
static int send_tx(struct devmemtcp_ctx *c, struct devmemtcp_buf *buf, char *why,
		   size_t len)
{
	DEVMEMTCP_OPTS(bind_opts, bo, .broker = true);
	struct devmemtcp_tx_piece piece = { 0, TX_BYTES };
	struct devmemtcp_binding *b;
	struct devmemtcp_tx *tx;
	uint8_t *img = malloc(TX_BYTES);
	ssize_t sent;
	int fd, ret;

	if (!img)
		return -ENOMEM;
	pattern_fill(img, TX_BYTES, 0, PATTERN_PERIOD_DEFAULT);
	ret = devmemtcp_buf_write(buf, 0, img, TX_BYTES);
	free(img);
	if (ret) {
		snprintf(why, len, "buf_write: %s", devmemtcp_ctx_errmsg(c));
		return ret;
	}
	ret = devmemtcp_bind_tx(c, (int)if_nametoindex(ifname), buf, &bo, &b);
	if (ret) {
		snprintf(why, len, "%s", devmemtcp_ctx_errmsg(c));
		return ret;
	}
	fd = t_connect(VM_TX_ADDR4, TX_PORT, NULL);
	if (fd < 0 || devmemtcp_tx_new(c, fd, b, NULL, &tx)) {
		snprintf(why, len, "connect or tx_new: %s", devmemtcp_ctx_errmsg(c));
		return -EIO;
	}
	sent = devmemtcp_tx_send(tx, &piece, 1, 0);
	while (sent == TX_BYTES && (ret = devmemtcp_tx_wait(tx, 10000)) > 0)
		;
	if (sent != TX_BYTES || ret < 0) {
		snprintf(why, len, "sent %zd, wait %d: %s", sent, ret, devmemtcp_tx_errmsg(tx));
		ret = -EIO;
	}
	devmemtcp_tx_free(tx);
	close(fd);
	devmemtcp_binding_close(b);
	return ret < 0 ? ret : 0;
}

static void client_main(const struct client_args *a, int cmd, int rep)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	struct report r = { .kind = 'S' };
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_nic *nic;
	struct devmemtcp_flow f;
	struct devmemtcp_ctx *c;
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1, .flows = &f, .nflows = 1);
	const uint32_t *q;
	uint64_t before;
	char text[96], ch = 0;
	int l;

	if (setgroups(0, NULL) || setresgid(a->uid, a->uid, a->uid) ||
	    setresuid(a->uid, a->uid, a->uid) || devmemtcp_ctx_new(&co, &c))
		fail(rep, -EPERM, "switching uid failed", "");
	snprintf(text, sizeof(text), "dst-ip %s dst-port %d", VM_RX_ADDR4, a->port);
	devmemtcp_flow_parse(text, &f);
	if (a->with_buf) {
		r.err = t_udmabuf(c, BUF_SIZE, &buf);
		if (r.err)
			fail(rep, r.err, "udmabuf: ", devmemtcp_ctx_errmsg(c));
		r.brk_udmabuf = access("/dev/udmabuf", R_OK | W_OK) != 0;
	}
	o.buf = buf;
	before = genl_fds();
	r.err = devmemtcp_nic_open(c, ifname, &o, &nic);
	if (r.err && a->retry) {
		struct report e = { .kind = 'E', .err = r.err };

		snprintf(e.msg, sizeof(e.msg), "%s", devmemtcp_ctx_errmsg(c));
		tell(rep, &e);
		(void)!read(cmd, &ch, 1);
		r.err = devmemtcp_nic_open(c, ifname, &o, &nic);
	}
	if (r.err)
		fail(rep, r.err, "", devmemtcp_ctx_errmsg(c));
	r.nq = (uint32_t)devmemtcp_nic_queues(nic, &q);
	for (uint32_t i = 0; i < r.nq && i < 2; i++)
		r.q[i] = q[i];
	r.binding = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	if (a->check_nl) {
		uint64_t got = genl_fds() & ~before;

		/* the open brought exactly one: the binding's */
		if (!got || (got & (got - 1)))
			fail(rep, -EPROTO, "the open brought no single netlink socket", "");
		if (nl_unprivileged(__builtin_ctzll(got), devmemtcp_buf_fd(buf), q[0], r.msg,
				    sizeof(r.msg)))
			fail(rep, -EPROTO, "", r.msg);
	}
	l = a->with_buf ? t_listen(VM_RX_ADDR4, a->port) : -1;
	tell(rep, &r);
	if (a->with_buf) {
		struct report rr = { .kind = 'R' };

		if (nic_receive(c, l, buf, r.binding, &rr.rx, NULL, NULL))
			rr.err = -EIO;
		close(l);
		tell(rep, &rr);
	}
	(void)!read(cmd, &ch, 1);
	r = (struct report){ .kind = 'C', .err = devmemtcp_nic_close(nic) };
	if (r.err)
		snprintf(r.msg, sizeof(r.msg), "%s", devmemtcp_ctx_errmsg(c));
	tell(rep, &r);
	if (a->tx) {
		r = (struct report){ .kind = 'T' };
		r.err = send_tx(c, buf, r.msg, sizeof(r.msg));
		tell(rep, &r);
	}
	(void)!read(cmd, &ch, 1);
	devmemtcp_buf_free(buf);
	_exit(0);
}

static int client_start(struct client *cl, const struct client_args *a)
{
	int c[2], r[2];

	T_CHECK(pipe(c) == 0 && pipe(r) == 0, "pipe");
	memset(cl, 0, sizeof(*cl));
	cl->uid = a->uid;
	cl->port = a->port;
	cl->pid = fork();
	T_CHECK(cl->pid >= 0, "fork");
	if (cl->pid == 0) {
		int cmd = fcntl(c[0], F_DUPFD, 100), rep = fcntl(r[1], F_DUPFD, 100);

		if (cmd < 0 || rep < 0 || dup2(cmd, 3) != 3 || dup2(rep, 4) != 4 ||
		    close_range(5, ~0u, 0))
			_exit(9);
		client_main(a, 3, 4);
	}
	leave(cl->pid);
	close(c[0]);
	close(r[1]);
	cl->cmd = c[1];
	cl->rep = r[0];
	return 0;
}

/* Let a client go on ('c': close; then exit) and reap it. */
static int client_end(struct client *c)
{
	int st;

	(void)!write(c->cmd, "x", 1);
	close(c->cmd);
	T_CHECK(waitpid(c->pid, &st, 0) == c->pid, "waitpid");
	gone(c->pid);
	close(c->rep);
	T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid %u exit status 0x%x", c->uid, st);
	return 0;
}

static int client_close(struct client *c)
{
	struct report r;

	(void)!write(c->cmd, "c", 1);
	T_TRY(hear(c, 'C', &r));
	T_CHECK(r.err == 0, "uid %u: close: %s", c->uid, r.msg);
	return 0;
}

static int rx_ok(const struct client *c, const struct report *r, uint64_t bytes)
{
	T_CHECK(r->err == 0, "uid %u: receive failed", c->uid);
	T_CHECK(r->rx.bytes == bytes, "uid %u: %llu bytes, not %llu", c->uid,
		(unsigned long long)r->rx.bytes, (unsigned long long)bytes);
	T_CHECK(r->rx.bad_at < 0, "uid %u: byte %lld is wrong", c->uid, (long long)r->rx.bad_at);
	T_CHECK(r->rx.linear == 0, "uid %u: %llu payload bytes arrived as ordinary data",
		c->uid, (unsigned long long)r->rx.linear);
	return 0;
}

/* The queue q shows binding id (0: none). */
static bool queue_bound(uint32_t q, uint32_t id)
{
	struct devmemtcp_queue qs[64];
	int n = devmemtcp_queue_list(ctx, (int)if_nametoindex(ifname), qs, 64);

	for (int i = 0; i < n && i < 64; i++)
		if (qs[i].type == DEVMEMTCP_QUEUE_RX && qs[i].id == q)
			return qs[i].dmabuf_id == id;
	return false;
}

/* The files of ifname in the run directory. */
static int run_files(void)
{
	DIR *d = opendir(RUN_DIR);
	struct dirent *e;
	size_t len = strlen(ifname);
	int n = 0;

	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, ifname, len) && e->d_name[len] == '.' &&
		     strcmp(e->d_name + len, ".lock");
	if (d)
		closedir(d);
	return n;
}

/* ---- the ordinary receiver of the TX part (in the sender's namespace) --- */

struct plain_rx {
	int lfd;
	uint64_t bytes;
	long bad_at;
};

static void *plain_rx_main(void *arg)
{
	struct plain_rx *p = arg;
	static uint8_t buf[1 << 16];
	int fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	ssize_t n;

	p->bad_at = fd < 0 ? 0 : -1;
	while (fd >= 0 && (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		long at = pattern_check(buf, (size_t)n, p->bytes, PATTERN_PERIOD_DEFAULT);

		if (at >= 0 && p->bad_at < 0)
			p->bad_at = (long)p->bytes + at;
		p->bytes += (uint64_t)n;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* A listening socket on VM_TX_ADDR4:TX_PORT in VM_TX_NS, made by a thread
 * that enters it, and that thread's wait for the one connection. */
static void *plain_rx_listen(void *arg)
{
	struct plain_rx *p = arg;

	p->lfd = vm_enter(VM_TX_NS) ? -1 : t_listen(VM_TX_ADDR4, TX_PORT);
	if (p->lfd >= 0)
		plain_rx_main(p);
	return NULL;
}

/* ---- tests ------------------------------------------------------------------ */

static int test_rx(void)
{
	struct client_args a = { 1001, 5401, true, true, true };
	struct plain_rx p = { -1, 0, -1 };
	char *before, *after;
	struct vm_sender *snd;
	struct client c;
	struct report r;
	pthread_t th;
	pid_t bpid;
	double t0 = t_now();
	bool tx = t_kernel_version() >= 616;

	reset();
	before = nic_dump();
	bpid = broker_start(0, 0);
	T_CHECK(bpid > 0, "broker");
	T_TRY(client_start(&c, &a));
	T_TRY(hear(&c, 'S', &c.setup));
	T_CHECK(c.setup.nq == 1 && c.setup.binding, "uid 1001: %u queues, binding %u",
		c.setup.nq, c.setup.binding);
	T_CHECK(queue_bound(c.setup.q[0], c.setup.binding), "queue %u does not show binding %u",
		c.setup.q[0], c.setup.binding);
	printf("rx: uid 1001 set up queue %u, binding %u, udmabuf %s; the broker's netlink socket refused bind-rx and rings-set with EPERM\n",
	       c.setup.q[0], c.setup.binding,
	       c.setup.brk_udmabuf ? "made by the broker" : "opened directly");
	snd = vm_send_start(VM_RX_ADDR4, a.port, 64ull << 20, PATTERN_PERIOD_DEFAULT);
	T_CHECK(snd, "sender");
	T_TRY(hear(&c, 'R', &r));
	T_CHECK(vm_send_wait(snd) == 0, "sender");
	T_TRY(rx_ok(&c, &r, 64ull << 20));
	printf("rx: uid 1001 received 64 MiB through the broker's setup, every byte right\n");
	if (tx)
		T_CHECK(pthread_create(&th, NULL, plain_rx_listen, &p) == 0, "thread");
	T_TRY(client_close(&c));
	T_TRY(hear(&c, 'T', &r));
	if (tx) {
		pthread_join(th, NULL);
		T_CHECK(r.err == 0, "uid 1001: devmem TX: %s", r.msg);
		T_CHECK(p.bytes == TX_BYTES && p.bad_at < 0, "TX: %llu bytes, bad at %ld",
			(unsigned long long)p.bytes, p.bad_at);
		printf("rx: uid 1001 sent 16 MiB with devmem TX (bind-tx through the broker), intact\n");
	} else {
		T_CHECK(r.err == -EOPNOTSUPP, "bind-tx on %s: %d %s", t_kernel_release(), r.err,
			r.msg);
		printf("rx: bind-tx through the broker on %s: EOPNOTSUPP (%s)\n",
		       t_kernel_release(), r.msg);
	}
	T_TRY(client_end(&c));
	T_CHECK(queue_bound(c.setup.q[0], 0), "queue %u still bound", c.setup.q[0]);
	after = nic_dump();
	T_TRY(nic_same(before, after, "after the client closed"));
	T_TRY(broker_stop(bpid));
	printf("rx: NIC as before (%.1f s)\n", t_now() - t0);
	free(before);
	free(after);
	return 0;
}

static int test_two(void)
{
	struct client_args a[2] = { { 1001, 5402, true }, { 1002, 5411, true } };
	struct client c[2];
	char *before, *after;
	struct report r;
	pid_t bpid;

	reset();
	before = nic_dump();
	bpid = broker_start(0, 0);
	T_CHECK(bpid > 0, "broker");
	for (int i = 0; i < 2; i++) {
		T_TRY(client_start(&c[i], &a[i]));
		T_TRY(hear(&c[i], 'S', &c[i].setup));
	}
	T_CHECK(c[0].setup.q[0] != c[1].setup.q[0], "both on queue %u", c[0].setup.q[0]);
	T_CHECK(c[0].setup.binding != c[1].setup.binding, "one binding %u", c[0].setup.binding);
	for (int i = 0; i < 2; i++) {
		T_CHECK(queue_bound(c[i].setup.q[0], c[i].setup.binding), "queue %u of uid %u",
			c[i].setup.q[0], c[i].uid);
		c[i].snd = vm_send_start(VM_RX_ADDR4, c[i].port, 32ull << 20,
					 PATTERN_PERIOD_DEFAULT);
		T_CHECK(c[i].snd, "sender");
	}
	for (int i = 0; i < 2; i++) {
		T_TRY(hear(&c[i], 'R', &r));
		T_CHECK(vm_send_wait(c[i].snd) == 0, "sender of uid %u", c[i].uid);
		T_TRY(rx_ok(&c[i], &r, 32ull << 20));
	}
	for (int i = 0; i < 2; i++) {
		T_TRY(client_close(&c[i]));
		T_TRY(client_end(&c[i]));
	}
	after = nic_dump();
	T_TRY(nic_same(before, after, "after both clients closed"));
	T_TRY(broker_stop(bpid));
	printf("two: uids 1001 and 1002 on queues %u and %u at once, 32 MiB each validated\n",
	       c[0].setup.q[0], c[1].setup.q[0]);
	free(before);
	free(after);
	return 0;
}

static int test_denied(void)
{
	struct client_args a = { 1003, 5403, false };
	char want[768];
	struct client c;
	struct report r;
	pid_t bpid;

	reset();
	bpid = broker_start(0, 0);
	T_CHECK(bpid > 0, "broker");
	T_TRY(client_start(&c, &a));
	T_CHECK(read(c.rep, &r, sizeof(r)) == (ssize_t)sizeof(r), "uid 1003 said nothing");
	T_CHECK(r.kind == 'E' && r.err == -EACCES, "uid 1003: '%c' %d: %s", r.kind, r.err, r.msg);
	snprintf(want, sizeof(want),
		 "devmemtcp-broker: uid 1003 (pid %ld, test-broker) may not use %s: no rule of %s allows it; an administrator can add one (devmemtcp-broker.conf(5))",
		 (long)c.pid, ifname, CONF);
	T_CHECK(!strcmp(r.msg, want), "message:\n  %s\nnot\n  %s", r.msg, want);
	T_TRY(client_end(&c));
	T_TRY(broker_stop(bpid));
	printf("denied: uid 1003 got EACCES: %s\n", r.msg);
	return 0;
}

/* What uid 1004 saw of its udmabufs (made by the broker). */
struct quota_seen {
	int made;		/* before one was refused */
	int refused;		/* its errno */
	char msg[768];
	int again;		/* after freeing one */
	char again_msg[768];
};

static void quota_client(struct quota_seen *q)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF, .size = 1 << 20);
	struct devmemtcp_buf *bufs[4] = { NULL };
	struct devmemtcp_ctx *c;
	int ret = 0;

	if (setgroups(0, NULL) || setresgid(1004, 1004, 1004) || setresuid(1004, 1004, 1004) ||
	    devmemtcp_ctx_new(&co, &c))
		_exit(9);
	while (q->made < 4 && !(ret = devmemtcp_buf_new(c, &o, &bufs[q->made])))
		q->made++;
	q->refused = ret;
	snprintf(q->msg, sizeof(q->msg), "%s", devmemtcp_ctx_errmsg(c));
	if (q->made)
		devmemtcp_buf_free(bufs[0]);
	q->again = devmemtcp_buf_new(c, &o, &bufs[0]);
	snprintf(q->again_msg, sizeof(q->again_msg), "%s", devmemtcp_ctx_errmsg(c));
	_exit(0);
}

/* The udmabufs the broker makes count for their user while they live
 * (fdinfo's count of the real dma-buf): three of 1 MiB with udmabuf-total
 * 3M, the fourth refused with EDQUOT naming the keyword, and one more made
 * once one of them is freed. */
static int test_quota(void)
{
	struct quota_seen *q = mmap(NULL, sizeof(*q), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char want[768];
	pid_t bpid, pid;
	int st;

	reset();
	T_CHECK(q != MAP_FAILED, "mmap");
	memset(q, 0, sizeof(*q));
	if (access("/dev/udmabuf", F_OK)) {
		printf("quota: SKIP: no /dev/udmabuf in this kernel\n");
		return 0;
	}
	T_CHECK(chmod("/dev/udmabuf", 0600) == 0, "chmod /dev/udmabuf: %s", strerror(errno));
	bpid = broker_start(0, 0);
	T_CHECK(bpid > 0, "broker");
	pid = fork();
	T_CHECK(pid >= 0, "fork");
	if (pid == 0)
		quota_client(q);
	T_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"uid 1004 exit status 0x%x", st);
	snprintf(want, sizeof(want),
		 "udmabuf: cannot open /dev/udmabuf (EACCES) and devmemtcp-broker did not make the buffer: devmemtcp-broker: uid 1004 has 3 udmabufs alive that the broker made, 3145728 bytes in all: 1048576 bytes more would pass the 3145728 it may have at once (udmabuf-total of the rule at %s:4)",
		 CONF);
	T_CHECK(q->made == 3 && q->refused == -EDQUOT, "uid 1004: %d made, then %d: %s", q->made,
		q->refused, q->msg);
	T_CHECK(!strcmp(q->msg, want), "message:\n  %s\nnot\n  %s", q->msg, want);
	T_CHECK(q->again == 0, "after freeing one: %d: %s", q->again, q->again_msg);
	T_TRY(broker_stop(bpid));
	printf("quota: uid 1004 had 3 udmabufs of 1 MiB made, the fourth refused with EDQUOT (%s); one freed, the next made\n",
	       q->msg);
	munmap(q, sizeof(*q));
	return 0;
}

static int test_kill(void)
{
	struct client_args a = { 1002, 5412, true };
	char *before, *after = NULL;
	struct client c;
	pid_t bpid;
	double t0;
	int st;

	reset();
	before = nic_dump();
	bpid = broker_start(2, 0);
	T_CHECK(bpid > 0, "broker");
	T_TRY(client_start(&c, &a));
	T_TRY(hear(&c, 'S', &c.setup));
	T_CHECK(queue_bound(c.setup.q[0], c.setup.binding), "queue %u", c.setup.q[0]);
	T_CHECK(run_files() == 2, "%d files of %s in %s, not the base and the owner's",
		run_files(), ifname, RUN_DIR);
	T_CHECK(kill(c.pid, SIGKILL) == 0, "kill");
	T_CHECK(waitpid(c.pid, &st, 0) == c.pid && WIFSIGNALED(st), "waitpid");
	gone(c.pid);
	close(c.cmd);
	close(c.rep);
	t0 = t_now();
	/* the broker sees the connection end, its handle lingers until the
	 * binding is gone (at once: the client's socket died with it) */
	while (t_now() - t0 < 20) {
		free(after);
		after = nic_dump();
		if (!strcmp(before, after) && !run_files())
			break;
		usleep(100000);
	}
	T_CHECK(queue_bound(c.setup.q[0], 0), "queue %u still bound", c.setup.q[0]);
	T_TRY(nic_same(before, after, "after the client was killed"));
	T_CHECK(run_files() == 0, "%d files of %s left in %s", run_files(), ifname, RUN_DIR);
	printf("kill: the binding went with the client, the broker restored the NIC in %.2f s\n",
	       t_now() - t0);
	T_TRY(broker_exits(bpid, 5));
	printf("kill: the broker then exited idle\n");
	free(before);
	free(after);
	return 0;
}

static int test_broker_kill(void)
{
	struct client_args a = { 1001, 5404, false, .retry = true };
	const char *want = "devmemtcp-broker did not answer the open request: EPIPE: it closed the connection (it exited: see its log)";
	char *before, *after;
	struct client c;
	struct report r;
	pid_t bpid;
	int st;

	reset();
	before = nic_dump();
	bpid = broker_start(0, 2);
	T_CHECK(bpid > 0, "broker");
	T_TRY(client_start(&c, &a));
	T_CHECK(read(c.rep, &r, sizeof(r)) == (ssize_t)sizeof(r), "uid 1001 said nothing");
	/* ERRORS devmemtcp_nic_open EPIPE */
	T_CHECK(r.kind == 'E' && r.err == -EPIPE, "uid 1001: '%c' %d: %s", r.kind, r.err, r.msg);
	T_CHECK(!strcmp(r.msg, want), "message:\n  %s\nnot\n  %s", r.msg, want);
	T_CHECK(waitpid(bpid, &st, 0) == bpid, "waitpid");
	gone(bpid);
	T_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		"the broker was not killed mid-setup: 0x%x", st);
	after = nic_dump();
	T_CHECK(strcmp(before, after) && run_files() == 2,
		"the broker's death left nothing to recover (%d files): the crash step is not mid-setup",
		run_files());
	free(after);
	/* the next broker leaves the half setup to its live owner; the same
	 * client sets up again through it, under another file name */
	bpid = broker_start(0, 0);
	T_CHECK(bpid > 0, "broker");
	(void)!write(c.cmd, "o", 1);
	T_TRY(hear(&c, 'S', &c.setup));
	T_CHECK(run_files() == 3, "%d files of %s in %s, not the base and two owners'",
		run_files(), ifname, RUN_DIR);
	T_TRY(client_close(&c));
	T_TRY(client_end(&c));
	T_TRY(broker_stop(bpid));
	/* the client is gone: the next start recovers, then exits idle */
	bpid = broker_start(1, 0);
	T_CHECK(bpid > 0, "broker");
	T_TRY(broker_exits(bpid, 10));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after the next broker's start"));
	T_CHECK(run_files() == 0, "%d files of %s left in %s", run_files(), ifname, RUN_DIR);
	printf("broker-kill: killed at the second change of a client's setup; the client set up again through the next broker; after it exited, the next start restored the NIC\n");
	free(before);
	free(after);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct t_named tests[] = {
		{ "rx", test_rx },
		{ "two", test_two },
		{ "denied", test_denied },
		{ "kill", test_kill },
		{ "broker-kill", test_broker_kill },
		{ "quota", test_quota },
	};
	char self[2048];
	int ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s IFACE rx|two|denied|kill|broker-kill|quota|all\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);	/* children must not inherit a buffer */
	alarm(600);	/* a hang fails here, with the output so far */
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0, "topology");
	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	snprintf(self, sizeof(self), "%s", strchr(argv[0], '/') ? argv[0] : "./x");
	*strrchr(self, '/') = '\0';
	snprintf(broker, sizeof(broker), "%s/../../broker/devmemtcp-broker", self);
	T_CHECK(access(broker, X_OK) == 0, "%s: %s", broker, strerror(errno));
	T_TRY(write_conf());
	signal(SIGPIPE, SIG_IGN);
	ret = t_run_named("test-broker", tests, sizeof(tests) / sizeof(tests[0]), argv[2]);
	if (ret)
		show_log();
	return ret;
}
