// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Connection setup: listen writes a handle naming two listening sockets
 * (control and data), connect opens both without blocking and sends a
 * hello on the control socket carrying the handle's nonce and the data
 * socket's source port, accept pairs the two up.  NCCL calls connect and
 * accept again and again until they return a comm.  Everything in a handle
 * and a hello comes from the peer (wire.h checks it): no byte of either
 * is trusted as a pointer or an index.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"
#include "stage.h"
#include "unpack.h"

struct dmtn_comm *dmtn_comm_new(enum dmtn_comm_kind kind, int dev)
{
	struct dmtn_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->magic = DMTN_COMM_MAGIC;
	c->kind = kind;
	c->dev = dev;
	c->traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
	c->ctrl_lfd = c->data_lfd = c->ctrl_fd = c->data_fd = -1;
	c->wake_fd = -1;
	pthread_mutex_init(&c->mu, NULL);
	for (int i = 0; i < DMTN_PENDING_CTRL; i++)
		c->pend_ctrl[i].fd = -1;
	for (int i = 0; i < DMTN_PENDING_DATA; i++)
		c->pend_data[i].fd = -1;
	for (int i = 0; i < DMTN_NREQS; i++)
		c->free_reqs[i] = DMTN_NREQS - 1 - i;
	c->nfree = DMTN_NREQS;
	return c;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void dmtn_comm_free(struct dmtn_comm *c)
{
	if (!c)
		return;
	dmtn_helper_stop(c);
	/* NCCL closes a comm once its kernels are done with it: what the
	 * queue still holds goes back with the receive handle */
	dmtn_unpack_closing(c);
	dmtn_devmem_rx_close(c);
	dmtn_unpack_free(c);
	dmtn_devmem_tx_close(c);
	dmtn_flow_put(c->flow);
	close_fd(&c->ctrl_lfd);
	close_fd(&c->data_lfd);
	for (int i = 0; i < DMTN_PENDING_CTRL; i++)
		close_fd(&c->pend_ctrl[i].fd);
	for (int i = 0; i < DMTN_PENDING_DATA; i++)
		close_fd(&c->pend_data[i].fd);
	close_fd(&c->ctrl_fd);
	close_fd(&c->data_fd);
	free(c->bounce);
	pthread_mutex_destroy(&c->mu);
	c->magic = 0;
	free(c);
}

static void addr_text(const struct sockaddr *sa, socklen_t len, char *out,
		      size_t size)
{
	char host[INET6_ADDRSTRLEN], port[8];

	if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(out, size, "?");
		return;
	}
	snprintf(out, size, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
		 host, port);
}

/* Nagle would hold back the 16-byte headers; the class is NCCL's
 * per-communicator traffic class, used as the IP TOS / traffic class. */
static void sock_tune(int fd, int family, int traffic_class)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (traffic_class == NCCL_NET_TRAFFIC_CLASS_UNDEF)
		return;
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &traffic_class,
			   sizeof(traffic_class));
	else
		setsockopt(fd, IPPROTO_IP, IP_TOS, &traffic_class,
			   sizeof(traffic_class));
}

static void port_set(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/* A socket listening on d's address and port (0: any); fd or -errno. */
static int listen_on(const struct dmtn_dev *d, uint16_t port)
{
	struct sockaddr_storage ss = d->addr;
	int fd, one = 1, err;

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	port_set(&ss, port);
	/* With SO_REUSEADDR two sockets (two ranks listening at once) may
	 * both bind a port that neither listens on yet: listen() says which
	 * one has it, the other gets EADDRINUSE there.  A burst of
	 * connections between two accept calls (NCCL's proxy has other work)
	 * must not fill the queue: the kernel would drop the peer's SYN, and
	 * its connect would wait a second for the retry. */
	if (bind(fd, (struct sockaddr *)&ss, d->addrlen) || listen(fd, 128)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* A socket listening on d's address and a port of [lo, hi], tried from a
 * random one on (lo 0: any port); fd (its port in *port) or -errno
 * (-EADDRINUSE: every port of the range taken). */
static int listen_socket(const struct dmtn_dev *d, uint16_t *port,
			 uint16_t lo, uint16_t hi)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint32_t n = lo ? (uint32_t)hi - lo + 1 : 1, start = 0;
	int fd = -EADDRINUSE, err;

	if (n > 1 && getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = 0;
	for (uint32_t i = 0; i < n && fd == -EADDRINUSE; i++)
		fd = listen_on(d, lo ? (uint16_t)(lo + (start + i) % n) : 0);
	if (fd < 0)
		return fd;
	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		err = -errno;
		close(fd);
		return err;
	}
	*port = ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					: ((struct sockaddr_in6 *)&ss)->sin6_port;
	return fd;
}

/* How long an accepted connection may wait for its hello (control) or for
 * a hello to name it (data).  Test builds take another value from
 * DEVMEMTCP_TEST_NCCL_PENDING_MS. */
static unsigned int pending_ms(void)
{
#if DMTN_TEST_HOOKS
	const char *v = secure_getenv("DEVMEMTCP_TEST_NCCL_PENDING_MS");

	if (v && *v)
		return (unsigned int)strtoul(v, NULL, 10);
#endif
	return DMTN_PENDING_MS;
}

nccl_result_t dmtn_listen(int dev, void *handle, void **listen_comm)
{
	struct dmtn_comm *l;
	struct dmtn_dev *d;
	uint16_t cport = 0, dport = 0;
	int ret;

	if (!handle || !listen_comm)
		return NCCL_ERR_INTERNAL;
	*listen_comm = NULL;
	if (dev < 0 || dev >= dmtn.ndev) {
		DMTN_WARN("listen: no device %d (there are %d)", dev, dmtn.ndev);
		return NCCL_ERR_INVALID_ARGUMENT;
	}
	d = &dmtn.dev[dev];
	l = dmtn_comm_new(DMTN_COMM_LISTEN, dev);
	if (!l)
		return NCCL_ERR_SYSTEM;
	l->pending_ms = pending_ms();
	l->ctrl_lfd = ret = listen_socket(d, &cport, 0, 0);
	/* only the data port is steered: it is the one a devmemtcp-broker
	 * policy may restrict */
	if (ret >= 0)
		l->data_lfd = ret = listen_socket(d, &dport, dmtn.cfg.port_lo,
						  dmtn.cfg.port_hi);
	if (ret < 0) {
		if (ret == -EADDRINUSE && dmtn.cfg.port_lo)
			DMTN_WARN("listen on %s: every port of NCCL_DEVMEMTCP_PORT_RANGE=%u-%u is in use: widen the range",
				  d->name, dmtn.cfg.port_lo, dmtn.cfg.port_hi);
		else
			DMTN_WARN("listen on %s: %s", d->name, strerror(-ret));
		goto err;
	}
	/* never 0: connect refuses a handle with nonce 0 */
	do {
		if (getrandom(&l->nonce, sizeof(l->nonce), 0) != sizeof(l->nonce)) {
			DMTN_WARN("listen: getrandom: %s", strerror(errno));
			goto err;
		}
	} while (!l->nonce);
	/* Steer the data port before the handle leaves: the peer's first
	 * bytes already land in the bound buffer. */
	if (d->devmem && dmtn.cfg.rx)
		dmtn_devmem_steer(d, ntohs(dport), &l->flow);
	dmtn_handle_write(handle, (const struct sockaddr *)&d->addr, cport, dport,
			  l->nonce);
	*listen_comm = l;
	return NCCL_OK;
err:
	dmtn_comm_free(l);
	return NCCL_ERR_SYSTEM;
}

nccl_result_t dmtn_close_listen(void *listen_comm)
{
	struct dmtn_comm *l = dmtn_comm_get(listen_comm, DMTN_COMM_LISTEN,
					    __func__);

	if (!l)
		return NCCL_ERR_INTERNAL;
	dmtn_comm_free(l);
	return NCCL_OK;
}

/* ---- connect ------------------------------------------------------------ */

/* Connections in progress are kept in a table of the process, never in
 * the handle (stage.c says how a call finds its own). */

static void comm_free_any(void *c)
{
	dmtn_comm_free(c);
}

void dmtn_stage_teardown(void)
{
	dmtn_stage_drain(comm_free_any);
}

static int connect_socket(const struct sockaddr_storage *ss, socklen_t len,
			  const char *bind_dev, int traffic_class)
{
	int fd, err;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	sock_tune(fd, ss->ss_family, traffic_class);
	/* devmem TX sends only through the device the dma-buf is bound to */
	if (bind_dev && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, bind_dev,
				   (socklen_t)strlen(bind_dev)))
		goto err;
	if (connect(fd, (const struct sockaddr *)ss, len) && errno != EINPROGRESS)
		goto err;
	return fd;
err:
	err = -errno;
	close(fd);
	return err;
}

/* 1 connected, 0 not yet, < 0 failed */
static int connect_done(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0;

	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return err ? -err : 1;
}

/* 1 all sent, 0 not yet, < 0 failed */
static int send_some(int fd, const void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = send(fd, (const char *)buf + *off, len - *off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		*off += (size_t)n;
	}
	return 1;
}

static int connect_start(struct dmtn_comm *c, const struct dmtn_peer *p)
{
	const struct dmtn_dev *d = &dmtn.dev[c->dev];
	const char *bind_dev = d->devmem && dmtn.cfg.tx ? d->name : NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd;

	fd = connect_socket(&p->ctrl, p->addrlen, NULL, c->traffic_class);
	if (fd < 0)
		return fd;
	c->ctrl_fd = fd;
	fd = connect_socket(&p->data, p->addrlen, bind_dev, c->traffic_class);
	if (fd < 0)
		return fd;
	c->data_fd = fd;
	/* connect() has bound the source port already */
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	c->hello_out = (struct dmtn_hello){
		.magic = DMTN_HELLO_MAGIC,
		.version = DMTN_PROTO_VERSION,
		.data_port = ss.ss_family == AF_INET
				     ? ((struct sockaddr_in *)&ss)->sin_port
				     : ((struct sockaddr_in6 *)&ss)->sin6_port,
		.nonce = p->nonce,
	};
	c->stage = 1;
	return 0;
}

/* Advance a connection in progress: 1 established, 0 not yet, < 0 failed */
static int connect_step(struct dmtn_comm *c)
{
	int r1, r2;

	if (c->stage == 1) {
		r1 = connect_done(c->ctrl_fd);
		r2 = connect_done(c->data_fd);
		if (r1 < 0 || r2 < 0)
			return r1 < 0 ? r1 : r2;
		if (!r1 || !r2)
			return 0;
		c->stage = 2;
	}
	return send_some(c->ctrl_fd, &c->hello_out, sizeof(c->hello_out),
			 &c->hello_sent);
}

static void log_send_path(const struct dmtn_comm *c)
{
	const struct dmtn_dev *d = &dmtn.dev[c->dev];

	DMTN_INFO(DMTN_INIT_NET,
		  "send comm %p dev %d (%s) to %s: %s", (const void *)c, c->dev,
		  d->name, c->peer,
		  !d->devmem ? "plain TCP"
		  : dmtn.cfg.tx ? "plain TCP, devmem TX for dma-buf registrations"
				: "plain TCP (NCCL_DEVMEMTCP_TX=0)");
}

nccl_result_t dmtn_connect(int dev, int traffic_class, void *handle,
			   void **send_comm)
{
	void *h = handle;
	struct dmtn_peer peer;
	struct dmtn_comm *c;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char why[160];
	int ret;

	if (!h || !send_comm)
		return NCCL_ERR_INTERNAL;
	*send_comm = NULL;
	if (dev < 0 || dev >= dmtn.ndev) {
		DMTN_WARN("connect: no device %d (there are %d)", dev, dmtn.ndev);
		return NCCL_ERR_INVALID_ARGUMENT;
	}
	switch (dmtn_handle_parse(h, &peer, why, sizeof(why))) {
	case DMTN_HANDLE_OK:
		break;
	case DMTN_HANDLE_FOREIGN:
		DMTN_WARN("connect: the handle (%s) was not made by listen of this plugin (magic %#x, version %u): are both ranks using libnccl-net-devmemtcp?",
			  why, DMTN_HANDLE_MAGIC, DMTN_PROTO_VERSION);
		return NCCL_ERR_INTERNAL;
	default:
		DMTN_WARN("connect: the handle from the listening rank is not valid: %s; it was changed on its way (NCCL's bootstrap is not authenticated) or written by another version of this plugin",
			  why);
		return NCCL_ERR_INTERNAL;
	}
	if (!peer.stage_key && !peer.stage_slot) {
		c = dmtn_comm_new(DMTN_COMM_SEND, dev);
		if (!c)
			return NCCL_ERR_SYSTEM;
		c->traffic_class = traffic_class;
		ret = dmtn_stage_add(c, h, &peer.stage_slot);
		if (ret < 0) {
			DMTN_WARN("connect: %s", ret == -ENOSPC
				  ? "65536 connections are in progress already"
				  : strerror(-ret));
			dmtn_comm_free(c);
			return NCCL_ERR_SYSTEM;
		}
		ret = connect_start(c, &peer);
		if (ret < 0)
			goto err;
	} else {
		c = dmtn_stage_claim(&peer, h);
		if (!c) {
			DMTN_WARN("connect: the handle names a connection in progress (slot %llu) that this process did not start or has finished: listen writes its bytes 40 to 55 as zeros, so the handle was changed on its way (NCCL's bootstrap is not authenticated) or copied while its connect was in progress",
				  (unsigned long long)peer.stage_slot);
			return NCCL_ERR_INTERNAL;
		}
	}
	ret = connect_step(c);
	if (ret < 0)
		goto err;
	if (!ret) {
		dmtn_stage_release(h, peer.stage_slot, false);
		return NCCL_OK;
	}
	dmtn_stage_release(h, peer.stage_slot, true);
	c->stage = 0;
	if (!getpeername(c->data_fd, (struct sockaddr *)&ss, &len))
		addr_text((struct sockaddr *)&ss, len, c->peer, sizeof(c->peer));
	log_send_path(c);
	*send_comm = c;
	return NCCL_OK;
err:
	dmtn_stage_release(h, peer.stage_slot, true);
	addr_text((const struct sockaddr *)&peer.ctrl, peer.addrlen, c->peer,
		  sizeof(c->peer));
	DMTN_WARN("connect to %s from %s: %s", c->peer, dmtn.dev[dev].name,
		  strerror(-ret));
	dmtn_comm_free(c);
	return NCCL_ERR_SYSTEM;
}

/* ---- accept ------------------------------------------------------------- */

/*
 * Anyone who can reach a listen's ports can connect to them, so accept
 * keeps several connections pending and lets none of them hold it up:
 * control connections each read their hello, which must come within the
 * deadline (DMTN_PENDING_MS from the accept); data connections wait for a
 * hello with this listen's nonce to name them (same host, source port)
 * and are dropped when none did by the deadline.  When a table is full the
 * connection dropped for a new one is the oldest of the host that has the
 * most pending, leaving alone control connections whose hello was good
 * and the data connections they name: a flood from one host pushes out its
 * own connections, not a peer's.  The peer's connect writes its hello as
 * soon as both its connections are up, so a good hello is the common case
 * on the first call that sees the connection.
 */
static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool same_host(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET
		       ? ((const struct sockaddr_in *)ss)->sin_port
		       : ((const struct sockaddr_in6 *)ss)->sin6_port;
}

/* Does control connection c (with a good hello) name data connection d? */
static bool names(const struct dmtn_pending *c, const struct dmtn_pending *d)
{
	return c->fd >= 0 && c->hello_ok && d->fd >= 0 &&
	       same_host(&c->peer, &d->peer) &&
	       port_of(&d->peer) == c->hello.data_port;
}

static bool named(const struct dmtn_comm *l, const struct dmtn_pending *d)
{
	for (int i = 0; i < DMTN_PENDING_CTRL; i++)
		if (names(&l->pend_ctrl[i], d))
			return true;
	return false;
}

static void pending_drop(const struct dmtn_comm *l, struct dmtn_pending *p,
			 bool ctrl, const char *why)
{
	char from[INET6_ADDRSTRLEN + 8];

	addr_text((const struct sockaddr *)&p->peer, sizeof(p->peer), from,
		  sizeof(from));
	DMTN_INFO(NCCL_SUBSYS_NET, "listen comm %p: dropped a %s connection from %s: %s",
		  (const void *)l, ctrl ? "control" : "data", from, why);
	close_fd(&p->fd);
}

/* Read what has come of control connection p's hello and check it. */
static void hello_read(const struct dmtn_comm *l, struct dmtn_pending *p)
{
	char why[160];

	while (p->got < sizeof(p->hello)) {
		ssize_t n = recv(p->fd, (char *)&p->hello + p->got,
				 sizeof(p->hello) - p->got, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			pending_drop(l, p, true, n ? strerror(errno)
					       : "closed before its hello");
			return;
		}
		p->got += (size_t)n;
	}
	if (p->hello_ok)
		return;
	if (dmtn_hello_check(&p->hello, l->nonce, why, sizeof(why))) {
		pending_drop(l, p, true, why);
		return;
	}
	p->hello_ok = true;
}

/* Drop what outlived the deadline. */
static void pending_expire(struct dmtn_comm *l, uint64_t now)
{
	char why[96];

	for (int i = 0; i < DMTN_PENDING_CTRL; i++) {
		struct dmtn_pending *p = &l->pend_ctrl[i];

		if (p->fd < 0 || now - p->since < l->pending_ms)
			continue;
		snprintf(why, sizeof(why), p->hello_ok
			 ? "the data connection its hello names did not come within %u ms"
			 : "no hello within %u ms", l->pending_ms);
		pending_drop(l, p, true, why);
	}
	for (int i = 0; i < DMTN_PENDING_DATA; i++) {
		struct dmtn_pending *p = &l->pend_data[i];

		if (p->fd < 0 || now - p->since < l->pending_ms || named(l, p))
			continue;
		snprintf(why, sizeof(why), "no hello named it within %u ms",
			 l->pending_ms);
		pending_drop(l, p, false, why);
	}
}

/* The entry of v (n of them) a new connection takes: a free one, or the
 * one dropped for it. */
static struct dmtn_pending *pending_slot(const struct dmtn_comm *l,
					 struct dmtn_pending *v, int n,
					 bool ctrl)
{
	bool kept[DMTN_PENDING_DATA > DMTN_PENDING_CTRL ? DMTN_PENDING_DATA
							: DMTN_PENDING_CTRL];
	struct dmtn_pending *victim = NULL;
	int most = 0;

	for (int i = 0; i < n; i++)
		if (v[i].fd < 0)
			return &v[i];
	for (int i = 0; i < n; i++)
		kept[i] = ctrl ? v[i].hello_ok : named(l, &v[i]);
	for (int i = 0; i < n; i++) {
		int count = 0;

		if (kept[i])
			continue;
		for (int j = 0; j < n; j++)
			count += !kept[j] && same_host(&v[i].peer, &v[j].peer);
		if (!victim || count > most ||
		    (count == most && v[i].since < victim->since)) {
			victim = &v[i];
			most = count;
		}
	}
	if (victim) {
		pending_drop(l, victim, ctrl,
			     "the listen has too many connections pending, most of them from this host");
		return victim;
	}
	/* every one kept: someone has the nonce and floods; oldest first */
	for (int i = 0; i < n; i++)
		if (!victim || v[i].since < victim->since)
			victim = &v[i];
	pending_drop(l, victim, ctrl,
		     "the listen has too many connections pending, all of them named by a good hello");
	return victim;
}

/* Take what waits on listening socket lfd into v; a control connection's
 * hello is read at once, so that a good one protects its data connection
 * from the drops that data connections accepted after it may cause. */
static void accept_all(struct dmtn_comm *l, int lfd, struct dmtn_pending *v,
		       int n, bool ctrl, uint64_t now)
{
	/* bounded, so that a flood cannot keep one call here */
	for (int k = 0; k < 4 * n; k++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		struct dmtn_pending *p;
		int fd = accept4(lfd, (struct sockaddr *)&ss, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		/* EAGAIN, or EMFILE and the like: the next call tries again */
		if (fd < 0)
			return;
		p = pending_slot(l, v, n, ctrl);
		*p = (struct dmtn_pending){ .fd = fd, .since = now, .peer = ss };
		if (ctrl)
			hello_read(l, p);
	}
}

static void log_recv_path(const struct dmtn_comm *c)
{
	const struct dmtn_dev *d = &dmtn.dev[c->dev];

	if (c->drx)
		return;		/* dmtn_devmem_rx_open said which */
	DMTN_INFO(DMTN_INIT_NET, "recv comm %p dev %d (%s) from %s: plain TCP%s",
		  (const void *)c, c->dev, d->name, c->peer,
		  !d->devmem ? ""
		  : !dmtn.cfg.rx ? " (NCCL_DEVMEMTCP_RX=0)"
				 : " (devmem RX is not set up, see above)");
}

/* NCCL allocated a device handle for c (its device offered UNPACK): fill
 * it with c's unpack queue.  0, or -1 (said why). */
static int dev_handle_fill(struct dmtn_comm *c, nccl_dev_handle_t *h)
{
	if (h->type != NCCL_NET_DEVICE_UNPACK ||
	    !dmtn_dev_unpack(&dmtn.dev[c->dev])) {
		DMTN_WARN("accept: NCCL asks for device offload type %d version %d on dev %d, which this plugin did not offer",
			  h->type, h->version, c->dev);
		return -1;
	}
	return dmtn_unpack_attach(c, h) ? -1 : 0;
}

nccl_result_t dmtn_accept(void *listen_comm, void **recv_comm,
			  nccl_dev_handle_t **dev_handle)
{
	struct dmtn_comm *l = dmtn_comm_get(listen_comm, DMTN_COMM_LISTEN,
					    __func__);
	struct dmtn_pending *cp = NULL, *dp = NULL;
	struct dmtn_comm *c;
	uint64_t now = now_ms();

	if (!l || !recv_comm)
		return NCCL_ERR_INTERNAL;
	*recv_comm = NULL;
	pending_expire(l, now);
	for (int i = 0; i < DMTN_PENDING_CTRL; i++)
		if (l->pend_ctrl[i].fd >= 0)
			hello_read(l, &l->pend_ctrl[i]);
	accept_all(l, l->ctrl_lfd, l->pend_ctrl, DMTN_PENDING_CTRL, true, now);
	accept_all(l, l->data_lfd, l->pend_data, DMTN_PENDING_DATA, false, now);
	for (int i = 0; !dp && i < DMTN_PENDING_CTRL; i++)
		for (int j = 0; !dp && j < DMTN_PENDING_DATA; j++)
			if (names(&l->pend_ctrl[i], &l->pend_data[j])) {
				cp = &l->pend_ctrl[i];
				dp = &l->pend_data[j];
			}
	if (!dp)
		return NCCL_OK;		/* a hello or its data connection is still coming */
	c = dmtn_comm_new(DMTN_COMM_RECV, l->dev);
	if (!c)
		return NCCL_ERR_SYSTEM;	/* the pair stays pending */
	c->ctrl_fd = cp->fd;
	c->data_fd = dp->fd;
	cp->fd = dp->fd = -1;
	sock_tune(c->ctrl_fd, cp->peer.ss_family, NCCL_NET_TRAFFIC_CLASS_UNDEF);
	addr_text((const struct sockaddr *)&dp->peer, sizeof(dp->peer), c->peer,
		  sizeof(c->peer));
	/* the data socket is steered to a devmem queue: plain reads of it
	 * would fail, so a comm that cannot receive devmem is an error */
	if (l->flow && dmtn_devmem_rx_open(c, l->flow)) {
		dmtn_comm_free(c);
		return NCCL_ERR_SYSTEM;
	}
	if (dev_handle && *dev_handle && dev_handle_fill(c, *dev_handle)) {
		dmtn_comm_free(c);
		return NCCL_ERR_SYSTEM;
	}
	log_recv_path(c);
	*recv_comm = c;
	return NCCL_OK;
}
