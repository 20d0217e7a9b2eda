// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The library's side of devmemtcp-broker (broker.h): whether one is there,
 * the connection, one request with its reply and fds, and the requests
 * the library makes (for the broker's table of privileged operations,
 * broker_ops.c).  A process without CAP_NET_ADMIN sets
 * up through the broker with the same calls and gets the same messages:
 * the broker relays the errno and message of the library call it made.
 */
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker.h"
#include "core/testhooks.h"
#include "nic/nic.h"

struct dmt_brk {
	int fd;
	uint32_t seq;
};

const char *dmt_brk_path(void)
{
	const char *env = secure_getenv("DEVMEMTCP_BROKER_SOCKET");

	return env && *env ? env : DMT_BRK_SOCKET;
}

bool dmt_cap_net_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return false;
	return d[0].effective & (1u << CAP_NET_ADMIN);
}

bool dmt_brk_present(void)
{
	struct stat st;

	return stat(dmt_brk_path(), &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The broker is root's: a socket of anyone else is not it. */
static int check_peer(struct dmt_err *err, int fd, const char *path)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return dmt_err_set(err, -errno, "devmemtcp-broker at %s: SO_PEERCRED: %s",
				   path, dmt_errno_name(-errno));
	if (cred.uid != 0)
		return dmt_err_set(err, -EPERM,
				   "the process listening at %s (pid %ld) runs as uid %u, not root: it is not devmemtcp-broker",
				   path, (long)cred.pid, cred.uid);
	return 0;
}

/* How long a request waits for its reply, in all: DMT_BRK_REPLY_TIMEOUT_MS
 * (test builds: $DEVMEMTCP_TEST_BROKER_TIMEOUT_MS when set). */
static long reply_timeout_ms(void)
{
	int ms = dmt_hook_env_int("DEVMEMTCP_TEST_BROKER_TIMEOUT_MS");

	return ms > 0 ? ms : DMT_BRK_REPLY_TIMEOUT_MS;
}

static struct timeval ms_tv(long ms)
{
	return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

int dmt_brk_connect(struct dmt_err *err, struct dmt_brk **bp)
{
	const char *path = dmt_brk_path();
	struct timeval tv = ms_tv(reply_timeout_ms());
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct dmt_brk *b;
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return dmt_err_set(err, -ENAMETOOLONG,
				   "the devmemtcp-broker socket path %s is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dmt_err_set(err, -errno, "a socket for devmemtcp-broker: %s",
				   dmt_errno_name(-errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = dmt_err_set(err, -errno,
				  "cannot reach devmemtcp-broker at %s: %s: start it (systemctl start devmemtcp-broker.socket), or run with CAP_NET_ADMIN",
				  path, dmt_errno_name(-errno));
		goto err_close;
	}
	ret = check_peer(err, fd, path);
	if (ret)
		goto err_close;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	b = dmt_calloc(1, sizeof(*b));
	if (!b) {
		ret = dmt_err_set(err, -ENOMEM, "devmemtcp-broker connection: out of memory");
		goto err_close;
	}
	b->fd = fd;
	*bp = b;
	return 0;

err_close:
	close(fd);
	return ret;
}

void dmt_brk_close(struct dmt_brk *b)
{
	if (!b)
		return;
	close(b->fd);
	free(b);
}

static int send_req(struct dmt_brk *b, struct dmt_err *err, struct dmt_brk_hdr *req,
		    int fd)
{
	char tn[32];
	int ret = dmt_brk_send(b->fd, req, req->len, &fd, fd >= 0, 0);

	if (!ret)
		return 0;
	if (ret == -EAGAIN)
		ret = -ETIMEDOUT;
	return dmt_err_set(err, ret, "sending the %s request to devmemtcp-broker failed: %s%s",
			   dmt_brk_type_name(req->type, tn, sizeof(tn)), dmt_errno_name(ret),
			   ret == -EPIPE || ret == -ECONNRESET
				   ? ": it closed the connection (it exited or was restarted: see its log)"
				   : "");
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/*
 * recvmsg on the broker socket within the reply timeout, counted from the
 * call.  A signal ends the wait even with SA_RESTART (the socket has a
 * receive timeout); the request is out, so the wait goes on for what is
 * left of the timeout, not for a new one: signals arriving steadily cannot
 * stretch it.  Past the deadline: -1 with errno EAGAIN, as a timeout.
 */
static ssize_t recv_by_deadline(int fd, struct msghdr *msg)
{
	long total = reply_timeout_ms(), left;
	int64_t end = dmt_now_ms() + total;
	bool shortened = false;
	struct timeval tv;
	ssize_t n;

	for (;;) {
		n = recvmsg(fd, msg, MSG_CMSG_CLOEXEC);
		if (n >= 0 || errno != EINTR)
			break;
		left = (long)(end - dmt_now_ms());
		if (left <= 0) {
			errno = EAGAIN;
			break;
		}
		tv = ms_tv(left);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		shortened = true;
	}
	if (shortened) {
		int e = errno;

		tv = ms_tv(total);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		errno = e;
	}
	return n;
}

static int recv_reply(struct dmt_brk *b, struct dmt_err *err, unsigned int type,
		      struct dmt_brk_reply *r, int *fds, int max)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { r, sizeof(*r) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	char tn[32], why[320];
	ssize_t n;
	int nfds, ret;

	n = recv_by_deadline(b->fd, &msg);
	if (n <= 0) {
		ret = n == 0 ? -EPIPE : errno == EAGAIN ? -ETIMEDOUT : -errno;
		return dmt_err_set(err, ret,
				   "devmemtcp-broker did not answer the %s request: %s%s",
				   dmt_brk_type_name(type, tn, sizeof(tn)), dmt_errno_name(ret),
				   n == 0 ? ": it closed the connection (it exited: see its log)" : "");
	}
	nfds = dmt_brk_take_fds(&msg, fds, max);
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		n = sizeof(*r) + 1;	/* checked as too long below */
	ret = dmt_brk_reply_check(r, (size_t)n, type, b->seq, nfds, max, why, sizeof(why));
	if (ret) {
		close_fds(fds, nfds < max ? nfds : max);
		return dmt_err_set(err, ret, "%s%s",
				   ret == -EPROTONOSUPPORT ? "" : "devmemtcp-broker sent a malformed reply: ",
				   why);
	}
	return 0;
}

int dmt_brk_call(struct dmt_brk *b, struct dmt_err *err, struct dmt_brk_hdr *req,
		 int fd, struct dmt_brk_reply *r, int *rfds, int max_fds)
{
	int ret;

	for (int i = 0; i < max_fds; i++)
		rfds[i] = -1;
	req->seq = ++b->seq;
	ret = send_req(b, err, req, fd);
	if (!ret)
		ret = recv_reply(b, err, req->type, r, rfds, max_fds);
	if (ret)
		return ret;
	if (r->err)
		return dmt_err_set(err, r->err, "%s", r->msg);
	return 0;
}

/* ---- the requests -------------------------------------------------------- */

/* One request on a connection of its own. */
static int call_once(struct dmt_err *err, struct dmt_brk_hdr *req, int fd,
		     struct dmt_brk_reply *r, int *rfds, int max_fds)
{
	struct dmt_brk *b;
	int ret = dmt_brk_connect(err, &b);

	if (ret)
		return ret;
	ret = dmt_brk_call(b, err, req, fd, r, rfds, max_fds);
	dmt_brk_close(b);
	return ret;
}

static uint32_t open_flags(const struct devmemtcp_nic_opts *opts)
{
	uint32_t f = DMT_OPT(opts, devmemtcp_nic_opts, flags, 0), w = 0;
	const struct devmemtcp_bind_opts *bo =
		DMT_OPT(opts, devmemtcp_nic_opts, bind_opts, NULL);

	if (f & DEVMEMTCP_NIC_NO_RSS_CONTEXT)
		w |= DMT_BRK_OPEN_NO_RSS_CONTEXT;
	if (f & DEVMEMTCP_NIC_ALLOW_SHADOW)
		w |= DMT_BRK_OPEN_ALLOW_SHADOW;
	if (f & DEVMEMTCP_NIC_KEEP_RSS)
		w |= DMT_BRK_OPEN_KEEP_RSS;
	if (DMT_OPT(opts, devmemtcp_nic_opts, buf, NULL))
		w |= DMT_BRK_OPEN_BIND;
	if (DMT_OPT(bo, devmemtcp_bind_opts, no_verify, false))
		w |= DMT_BRK_OPEN_NO_VERIFY;
	return w;
}

/* The open request into buf (DMT_BRK_MSG_MAX bytes). */
static int open_msg(struct dmt_err *err, const char *ifname,
		    const struct devmemtcp_nic_opts *opts, void *buf)
{
	const uint32_t *ids = DMT_OPT(opts, devmemtcp_nic_opts, queues, NULL);
	uint32_t nq = DMT_OPT(opts, devmemtcp_nic_opts, nqueues, 0);
	const struct devmemtcp_flow *flows = DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL);
	size_t nflows = DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0);
	const struct devmemtcp_bind_opts *bo =
		DMT_OPT(opts, devmemtcp_nic_opts, bind_opts, NULL);
	struct dmt_brk_open *o = (struct dmt_brk_open *)((struct dmt_brk_hdr *)buf + 1);
	uint8_t *p = (uint8_t *)(o + 1);

	if (nq > DMT_BRK_MAX_QUEUES || nflows > DMT_BRK_MAX_FLOWS)
		return dmt_err_set(err, -E2BIG,
				   "devmemtcp_nic_open through devmemtcp-broker: %u queues and %zu flows: at most %u queues and %u flows",
				   nq, nflows, DMT_BRK_MAX_QUEUES, DMT_BRK_MAX_FLOWS);
	memset(o, 0, sizeof(*o));
	memcpy(o->ifname, ifname, strlen(ifname));
	o->flags = open_flags(opts);
	o->nqueues = ids ? 0 : nq;
	o->nids = ids ? nq : 0;
	o->nflows = (uint32_t)nflows;
	o->rx_page_size = DMT_OPT(bo, devmemtcp_bind_opts, rx_page_size, 0);
	if (o->nids)
		memcpy(p, ids, o->nids * sizeof(uint32_t));
	p += o->nids * sizeof(uint32_t);
	for (size_t i = 0; i < nflows; i++, p += sizeof(struct dmt_brk_flow)) {
		struct dmt_brk_flow w;

		dmt_brk_flow_to_wire(&flows[i], &w);
		memcpy(p, &w, sizeof(w));
	}
	dmt_brk_hdr_init(buf, DMT_BRK_OPEN, (size_t)(p - (uint8_t *)o), 0);
	return 0;
}

int dmt_brk_open(struct dmt_err *err, const char *ifname,
		 const struct devmemtcp_nic_opts *opts, struct dmt_brk **bp,
		 struct dmt_brk_open_reply *out, int *nl_fd)
{
	struct devmemtcp_buf *buf = DMT_OPT(opts, devmemtcp_nic_opts, buf, NULL);
	uint64_t msg[DMT_BRK_MSG_MAX / sizeof(uint64_t)];
	struct dmt_brk_reply *r;
	struct dmt_brk *b;
	int ret;

	*bp = NULL;
	*nl_fd = -1;
	if (!ifname || !dmt_ifname_valid(ifname, strnlen(ifname, IF_NAMESIZE)))
		return dmt_err_set(err, -EINVAL,
				   "invalid interface name \"%s\": a name has 1 to %d characters without '/', ':' or spaces",
				   ifname ? ifname : "(null)", IF_NAMESIZE - 1);
	ret = open_msg(err, ifname, opts, msg);
	if (ret)
		return ret;
	r = dmt_malloc(sizeof(*r));
	if (!r)
		return dmt_err_set(err, -ENOMEM, "devmemtcp_nic_open: out of memory");
	ret = dmt_brk_connect(err, &b);
	if (ret)
		goto out;
	ret = dmt_brk_call(b, err, (struct dmt_brk_hdr *)msg,
			   buf ? devmemtcp_buf_fd(buf) : -1, r, nl_fd, 1);
	if (!ret && !!r->u.open.binding_id != (*nl_fd >= 0))
		ret = dmt_err_set(err, -EPROTO,
				  "devmemtcp-broker sent binding %u with %s netlink socket",
				  r->u.open.binding_id, *nl_fd >= 0 ? "a" : "no");
	if (ret) {
		close_fds(nl_fd, 1);
		dmt_brk_close(b);
		goto out;
	}
	*out = r->u.open;
	*bp = b;
out:
	free(r);
	return ret;
}

int dmt_brk_handle_call(struct dmt_brk *b, struct dmt_err *err, unsigned int type,
			uint32_t handle, uint32_t flow_id,
			const struct devmemtcp_flow *flow)
{
	struct {
		struct dmt_brk_hdr h;
		struct dmt_brk_add_flow a;
	} m = { 0 };
	struct dmt_brk_handle *hb = (struct dmt_brk_handle *)&m.a;
	struct dmt_brk_reply *r = dmt_malloc(sizeof(*r));
	int fd, ret;

	if (!r)
		return dmt_err_set(err, -ENOMEM, "out of memory");
	if (type == DMT_BRK_ADD_FLOW) {
		m.a.handle = handle;
		dmt_brk_flow_to_wire(flow, &m.a.flow);
		dmt_brk_hdr_init(&m.h, type, sizeof(m.a), 0);
	} else {
		hb->handle = handle;
		hb->flow_id = flow_id;
		dmt_brk_hdr_init(&m.h, type, sizeof(*hb), 0);
	}
	ret = dmt_brk_call(b, err, &m.h, -1, r, &fd, 0);
	if (!ret && type == DMT_BRK_ADD_FLOW)
		ret = r->u.flow_id > INT32_MAX ? dmt_err_set(err, -EPROTO,
				"devmemtcp-broker sent flow id %u", r->u.flow_id)
					      : (int)r->u.flow_id;
	free(r);
	return ret;
}

int dmt_brk_bind(struct dmt_err *err, bool tx, int ifindex, const uint32_t *queues,
		 size_t nqueues, int fd, uint32_t rx_page_size, bool verify,
		 int *nl_fd, uint32_t *id)
{
	struct {
		struct dmt_brk_hdr h;
		struct dmt_brk_bind b;
		uint32_t q[DMT_BRK_MAX_QUEUES];
	} m;
	struct dmt_brk_reply *r;
	int ret;

	*nl_fd = -1;
	if (nqueues > DMT_BRK_MAX_QUEUES)
		return dmt_err_set(err, -E2BIG,
				   "bind-rx through devmemtcp-broker: %zu queues: at most %u",
				   nqueues, DMT_BRK_MAX_QUEUES);
	memset(&m, 0, sizeof(m));
	m.b.ifindex = (uint32_t)ifindex;
	m.b.nqueues = tx ? 0 : (uint32_t)nqueues;
	m.b.rx_page_size = rx_page_size;
	m.b.flags = verify ? 0 : DMT_BRK_BIND_NO_VERIFY;
	if (!tx)
		memcpy(m.q, queues, nqueues * sizeof(uint32_t));
	dmt_brk_hdr_init(&m.h, tx ? DMT_BRK_BIND_TX : DMT_BRK_BIND_RX,
			 sizeof(m.b) + m.b.nqueues * sizeof(uint32_t), 0);
	r = dmt_malloc(sizeof(*r));
	if (!r)
		return dmt_err_set(err, -ENOMEM, "out of memory");
	ret = call_once(err, &m.h, fd, r, nl_fd, 1);
	if (!ret && (*nl_fd < 0 || !r->u.binding_id)) {
		close_fds(nl_fd, 1);
		ret = dmt_err_set(err, -EPROTO,
				  "devmemtcp-broker answered the bind without a binding");
	}
	if (!ret)
		*id = r->u.binding_id;
	free(r);
	return ret;
}

int dmt_brk_udmabuf(struct dmt_err *err, int memfd, int *dmabuf_fd)
{
	struct {
		struct dmt_brk_hdr h;
		struct dmt_brk_udmabuf u;
	} m = { 0 };
	struct dmt_brk_reply *r = dmt_malloc(sizeof(*r));
	int ret;

	*dmabuf_fd = -1;
	if (!r)
		return dmt_err_set(err, -ENOMEM, "udmabuf: out of memory");
	dmt_brk_hdr_init(&m.h, DMT_BRK_UDMABUF, sizeof(m.u), 0);
	ret = call_once(err, &m.h, memfd, r, dmabuf_fd, 1);
	if (!ret && *dmabuf_fd < 0)
		ret = dmt_err_set(err, -EPROTO,
				  "devmemtcp-broker answered the udmabuf request without a dma-buf");
	free(r);
	return ret;
}

int dmt_brk_policy(struct dmt_err *err, const char *ifname,
		   struct dmt_brk_policy_reply *out)
{
	struct {
		struct dmt_brk_hdr h;
		struct dmt_brk_policy p;
	} m = { 0 };
	struct dmt_brk_reply *r = dmt_malloc(sizeof(*r));
	int fd, ret;

	if (!r)
		return dmt_err_set(err, -ENOMEM, "out of memory");
	snprintf(m.p.ifname, sizeof(m.p.ifname), "%s", ifname);
	dmt_brk_hdr_init(&m.h, DMT_BRK_POLICY, sizeof(m.p), 0);
	ret = call_once(err, &m.h, -1, r, &fd, 0);
	if (!ret)
		*out = r->u.policy;
	free(r);
	return ret;
}
