// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp selftest: qualify a NIC for devmem TCP against a second
 * machine, and print one report a user can paste into a bug report.
 *
 *   devmemtcp selftest IFACE --peer HOST   on the machine with the NIC
 *   devmemtcp selftest --serve             on the peer (any NIC)
 *
 * The test sets IFACE up with the library (devmemtcp_nic_open: header
 * split, steering, bind-rx), receives a stream from the peer into a
 * udmabuf checking every byte, provokes the refusals the kernel makes
 * while a queue is bound (a second bind of the queue, fewer channels),
 * sends a stream with devmem TX that the peer checks, closes (the library
 * restores the NIC) and compares the NIC's state before and after.  The
 * peer uses ordinary sockets; the two talk over one TCP control
 * connection in text lines:
 *
 *   HELLO devmemtcp-selftest 1      -> OK <peer's kernel>
 *   SEND <port> <bytes>             the peer connects to the caller's
 *                                   address at <port> and sends the pattern
 *                                   -> DONE <bytes sent> | ERR <why>
 *   RECV <port> <bytes>             the peer listens on <port>
 *                                   -> READY, then, after the stream,
 *                                   DONE <bytes> <first bad offset or -1>
 *   BYE
 *
 * This file owns the command's options, both ends of that exchange, the
 * steps and the report (text or --json).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

#include "common.h"
#include "pattern.h"

#define CMD "devmemtcp selftest"
#define TIMEOUT_S 30
#define MAX_FRAGS 1024
#define LINEAR_SIZE (1u << 20)
#define CHUNK (1u << 20)

struct st_opts {
	const char *ifname, *peer;
	int port;
	long long bytes;
	bool serve, once, json;
};

enum { ST_SKIP = -1, ST_FAIL = 0, ST_OK = 1 };

struct st_step {
	const char *name;
	int result;
	char detail[512];
};

struct st_report {
	char kernel[65], peer_kernel[65];
	char driver[32], driver_version[32], firmware[32], bus[32];
	struct st_step steps[12];
	int nsteps;
	char problems[8][480];
	int nproblems;
	char before[2048], after[2048];
};

static void st_usage(FILE *f)
{
	fprintf(f,
		"usage: devmemtcp selftest IFACE --peer HOST [options]\n"
		"       devmemtcp selftest --serve [options]\n\n"
		"Qualify IFACE for devmem TCP against a peer running 'devmemtcp selftest\n"
		"--serve': set it up with the library, receive a stream into a udmabuf and\n"
		"check every byte, provoke the kernel's refusals while a queue is bound,\n"
		"send a stream with devmem TX that the peer checks, restore, and compare\n"
		"the NIC's state before and after. Prints one report (needs CAP_NET_ADMIN).\n\n"
		"  -P, --peer HOST       the peer's address (IPv4 or IPv6)\n"
		"  -p, --port PORT       the peer's control port (default 5299); the\n"
		"                        streams use PORT+1 (to us) and PORT+2 (to the peer)\n"
		"  -n, --bytes SIZE      bytes of each stream (default 16M)\n"
		"  -j, --json            the report as one JSON object\n"
		"  -s, --serve           be the peer: answer selftests on PORT, forever\n"
		"  -1, --once            with --serve: answer one selftest, then exit\n"
		"  -h, --help            this text\n\n"
		"Exit status: 0 when every step passed or was skipped, 1 when one failed,\n"
		"2 on bad usage.\n");
}

static int st_option(int c, const char *arg, void *opts)
{
	struct st_opts *o = opts;
	unsigned long long v;

	switch (c) {
	case 'P': o->peer = arg; break;
	case 'p':
		if (parse_uint(arg, 1, 65533, &v))
			return bad_value(CMD, "--port", arg, "a port number (1-65533)");
		o->port = (int)v;
		break;
	case 'n':
		o->bytes = parse_size(arg);
		if (o->bytes < 1)
			return bad_value(CMD, "--bytes", arg, "a size (bytes with K, M or G)");
		break;
	case 'j': o->json = true; break;
	case 's': o->serve = true; break;
	case '1': o->once = true; break;
	case 'h': st_usage(stdout); return 0;
	}
	return -1;
}

static int st_parse(int argc, char **argv, struct st_opts *o)
{
	static const struct option lopts[] = {
		{ "peer", required_argument, NULL, 'P' },
		{ "port", required_argument, NULL, 'p' },
		{ "bytes", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "serve", no_argument, NULL, 's' },
		{ "once", no_argument, NULL, '1' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int status;

	/* IFACE is the one word besides the options */
	if (argc >= 2 && argv[1][0] != '-') {
		o->ifname = argv[1];
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	status = tool_getopt(CMD, argc, argv, ":P:p:n:jsh1", lopts, st_option, o);
	if (status >= 0)
		return status;
	if (o->serve && (o->ifname || o->peer))
		return usage_error(CMD, "--serve takes neither IFACE nor --peer");
	if (!o->serve && (!o->ifname || !o->peer))
		return usage_error(CMD, "IFACE and --peer HOST are required (or --serve)");
	if (o->once && !o->serve)
		return usage_error(CMD, "--once goes with --serve");
	return -1;
}

/* ---- lines and sockets ---- */

static int st_timeout(int fd)
{
	struct timeval tv = { .tv_sec = TIMEOUT_S };

	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	       setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int st_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int st_say(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	return send(fd, line, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* One line (without its newline) into line: 0, or -1 at EOF or timeout. */
static int st_hear(int fd, char *line, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		char c;
		ssize_t r = recv(fd, &c, 1, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (c == '\n') {
			line[n] = 0;
			return 0;
		}
		line[n++] = c;
	}
	return -1;
}

/* The address of fd's side (local) or its peer's, with port. */
static void st_addr(int fd, bool local, int port, struct sockaddr_storage *sa,
		    socklen_t *len)
{
	*len = sizeof(*sa);
	if (local)
		getsockname(fd, (struct sockaddr *)sa, len);
	else
		getpeername(fd, (struct sockaddr *)sa, len);
	if (sa->ss_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
}

static void st_ntop(const struct sockaddr_storage *sa, char *buf, size_t len)
{
	const void *a = sa->ss_family == AF_INET ?
			(const void *)&((const struct sockaddr_in *)sa)->sin_addr :
			(const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;

	if (!inet_ntop(sa->ss_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

static int st_listen(const struct sockaddr_storage *sa, socklen_t len)
{
	int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, len) || listen(fd, 1)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* accept on lfd within the timeout */
static int st_accept(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	if (poll(&p, 1, TIMEOUT_S * 1000) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* ---- the peer (--serve) ---- */

/* SEND: the pattern to the caller at port. */
static void serve_send(int cfd, int port, long long bytes)
{
	static uint8_t buf[65536];
	struct sockaddr_storage sa;
	socklen_t len;
	long long done = 0;
	int fd;

	st_addr(cfd, false, port, &sa, &len);
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || st_timeout(fd) || connect(fd, (struct sockaddr *)&sa, len)) {
		st_say(cfd, "ERR connect to port %d: %s", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	while (done < bytes) {
		size_t n = bytes - done < (long long)sizeof(buf) ? (size_t)(bytes - done) : sizeof(buf);
		ssize_t w;

		pattern_fill(buf, n, (uint64_t)done, PATTERN_PERIOD_DEFAULT);
		w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += w;
	}
	close(fd);
	st_say(cfd, "DONE %lld", done);
}

/* RECV: listen at port, take one stream, check it. */
static void serve_recv(int cfd, int port)
{
	static uint8_t buf[65536];
	struct sockaddr_storage sa;
	socklen_t len;
	long long got = 0, bad = -1;
	int lfd, fd;

	st_addr(cfd, true, port, &sa, &len);
	lfd = st_listen(&sa, len);
	if (lfd < 0) {
		st_say(cfd, "ERR listen on port %d: %s", port, strerror(errno));
		return;
	}
	st_say(cfd, "READY");
	fd = st_accept(lfd);
	close(lfd);
	if (fd < 0 || st_timeout(fd)) {
		st_say(cfd, "ERR no connection on port %d", port);
		if (fd >= 0)
			close(fd);
		return;
	}
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		long at;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		at = bad < 0 ? pattern_check(buf, (size_t)r, (uint64_t)got,
					     PATTERN_PERIOD_DEFAULT) : -1;
		if (at >= 0)
			bad = got + at;
		got += r;
	}
	close(fd);
	st_say(cfd, "DONE %lld %lld", got, bad);
}

static void serve_one(int cfd)
{
	struct utsname u;
	char line[256];
	long long bytes;
	int port;

	uname(&u);
	while (!st_hear(cfd, line, sizeof(line))) {
		if (!strncmp(line, "HELLO devmemtcp-selftest ", 25))
			st_say(cfd, "OK %s", u.release);
		else if (sscanf(line, "SEND %d %lld", &port, &bytes) == 2)
			serve_send(cfd, port, bytes);
		else if (sscanf(line, "RECV %d %lld", &port, &bytes) == 2)
			serve_recv(cfd, port);
		else if (!strcmp(line, "BYE"))
			break;
		else
			st_say(cfd, "ERR unknown request");
	}
}

static int st_serve(const struct st_opts *o)
{
	struct sockaddr_storage sa;
	socklen_t len;
	int lfd;

	if (tool_sockaddr(CMD, NULL, o->port, &sa, &len))
		return 1;
	lfd = st_listen(&sa, len);
	if (lfd < 0) {
		fprintf(stderr, CMD ": listen on port %d: %s\n", o->port, strerror(errno));
		return 1;
	}
	fprintf(stderr, CMD ": serving on port %d\n", o->port);
	do {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, CMD ": accept: %s\n", strerror(errno));
			break;
		}
		st_timeout(cfd);
		serve_one(cfd);
		close(cfd);
	} while (!o->once);
	close(lfd);
	return 0;
}

/* ---- the NIC: facts and state ---- */

static int st_ioctl(const char *ifname, void *data)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = data;
	ret = ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : 0;
	close(fd);
	return ret;
}

/* What a user would compare: the settings the library changes and
 * restores, and the queue counts, as the kernel shows them. */
static void st_state(struct devmemtcp_ctx *ctx, const char *ifname, char *out, size_t len)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct {
		struct ethtool_rxfh_indir h;
		uint32_t ring[4096];
	} ind = { .h = { .cmd = ETHTOOL_GRXFHINDIR, .size = 4096 } };
	size_t n = 0;

	out[0] = 0;
	if (devmemtcp_nic_probe(ctx, ifname, NULL, &p) < 0) {
		snprintf(out, len, "probe failed: %s", devmemtcp_ctx_errmsg(ctx));
		return;
	}
	n += (size_t)snprintf(out + n, len - n,
			      "tcp-data-split %d, hds-thresh %lld, ntuple %d, rules %d, rss contexts %d, bound queues %d",
			      p.tcp_data_split, (long long)p.hds_thresh, p.ntuple,
			      p.ntuple_rules, p.rss_context_count, p.dmabuf_queues);
	if (!st_ioctl(ifname, &ch) && n < len)
		n += (size_t)snprintf(out + n, len - n, ", channels rx %u tx %u combined %u",
				      ch.rx_count, ch.tx_count, ch.combined_count);
	if (!st_ioctl(ifname, &ind) && n < len) {
		n += (size_t)snprintf(out + n, len - n, ", rss table");
		for (uint32_t i = 0; i < ind.h.size && i < 4096 && n < len; i++)
			n += (size_t)snprintf(out + n, len - n, " %u", ind.ring[i]);
	}
}

static struct st_step *st_step(struct st_report *r, const char *name, int result,
			       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static struct st_step *st_step(struct st_report *r, const char *name, int result,
			       const char *fmt, ...)
{
	struct st_step *s = &r->steps[r->nsteps < 11 ? r->nsteps++ : 11];
	va_list ap;

	s->name = name;
	s->result = result;
	va_start(ap, fmt);
	vsnprintf(s->detail, sizeof(s->detail), fmt, ap);
	va_end(ap);
	return s;
}

/* ---- the test ---- */

struct st_run {
	const struct st_opts *o;
	struct st_report rep;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_probe probe;
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	uint32_t queue;
	int cfd;
	struct sockaddr_storage local;	/* our address on the control connection */
	socklen_t local_len;
};

static void st_facts(struct st_run *r)
{
	struct ethtool_drvinfo di = { .cmd = ETHTOOL_GDRVINFO };
	struct utsname u;

	uname(&u);
	snprintf(r->rep.kernel, sizeof(r->rep.kernel), "%s", u.release);
	if (!st_ioctl(r->o->ifname, &di)) {
		snprintf(r->rep.driver, sizeof(r->rep.driver), "%s", di.driver);
		snprintf(r->rep.driver_version, sizeof(r->rep.driver_version), "%s", di.version);
		snprintf(r->rep.firmware, sizeof(r->rep.firmware), "%s", di.fw_version);
		snprintf(r->rep.bus, sizeof(r->rep.bus), "%s", di.bus_info);
	}
}

static void st_probe(struct st_run *r)
{
	struct devmemtcp_probe *p = &r->probe;
	int n;

	p->sz = sizeof(*p);
	n = devmemtcp_nic_probe(r->ctx, r->o->ifname, NULL, p);
	if (n < 0) {
		st_step(&r->rep, "probe", ST_FAIL, "%s", devmemtcp_ctx_errmsg(r->ctx));
		return;
	}
	for (int i = 0; i < n && i < 8; i++)
		snprintf(r->rep.problems[r->rep.nproblems++], sizeof(r->rep.problems[0]),
			 "%.230s (fix: %.230s)", p->problems[i].what, p->problems[i].fix);
	st_step(&r->rep, "probe", ST_OK,
		"%d problem%s before setup (devmemtcp_nic_open() fixes what it can); bind-rx %s, bind-tx %s",
		n, n == 1 ? "" : "s", p->has_bind_rx ? "yes" : "no", p->has_bind_tx ? "yes" : "no");
}

static int st_connect_peer(struct st_run *r)
{
	struct sockaddr_storage sa;
	socklen_t len;
	char line[256];

	if (tool_sockaddr(CMD, r->o->peer, r->o->port, &sa, &len))
		return -1;
	/* the peer may be starting: retried for TIMEOUT_S */
	for (int i = 0; i < TIMEOUT_S * 10; i++) {
		r->cfd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (r->cfd < 0 || !connect(r->cfd, (struct sockaddr *)&sa, len) ||
		    (errno != ECONNREFUSED && errno != EINTR))
			break;
		close(r->cfd);
		r->cfd = -1;
		usleep(100000);
	}
	if (r->cfd < 0 || st_timeout(r->cfd) ||
	    st_say(r->cfd, "HELLO devmemtcp-selftest 1") ||
	    st_hear(r->cfd, line, sizeof(line)) || strncmp(line, "OK ", 3)) {
		st_step(&r->rep, "peer", ST_FAIL, "no selftest peer at %s port %d: %s (run 'devmemtcp selftest --serve' there)",
			r->o->peer, r->o->port, strerror(errno));
		return -1;
	}
	snprintf(r->rep.peer_kernel, sizeof(r->rep.peer_kernel), "%.64s", line + 3);
	st_addr(r->cfd, true, 0, &r->local, &r->local_len);
	st_step(&r->rep, "peer", ST_OK, "%s port %d, kernel %s", r->o->peer, r->o->port,
		r->rep.peer_kernel);
	return 0;
}

/* the library's setup: one queue, the stream to us steered to it */
static int st_setup(struct st_run *r)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF, .size = 16u << 20);
	struct devmemtcp_flow f;
	char addr[64], text[128];
	const uint32_t *q;
	int err;

	st_ntop(&r->local, addr, sizeof(addr));
	snprintf(text, sizeof(text), "%sdst-ip %s dst-port %d",
		 r->local.ss_family == AF_INET6 ? "tcp6 " : "", addr, r->o->port + 1);
	err = devmemtcp_flow_parse(text, &f);
	if (!err)
		err = devmemtcp_buf_new(r->ctx, &bo, &r->buf);
	if (!err) {
		DEVMEMTCP_OPTS(nic_opts, no, .nqueues = 1, .flows = &f, .nflows = 1, .buf = r->buf);

		err = devmemtcp_nic_open(r->ctx, r->o->ifname, &no, &r->nic);
	}
	if (err) {
		st_step(&r->rep, "setup", ST_FAIL, "%s", devmemtcp_ctx_errmsg(r->ctx));
		return -1;
	}
	devmemtcp_nic_queues(r->nic, &q);
	r->queue = q[0];
	st_step(&r->rep, "setup", ST_OK, "RX queue %u bound (binding %u), flow %s",
		r->queue, devmemtcp_binding_id(devmemtcp_nic_binding(r->nic)), text);
	return 0;
}

/* receive the peer's stream into the buffer, every byte checked */
static void st_rx(struct st_run *r)
{
	struct sockaddr_storage sa = r->local;
	struct devmemtcp_frag *frags = calloc(MAX_FRAGS, sizeof(*frags));
	uint8_t *linear = malloc(LINEAR_SIZE), *tmp = malloc(65536);
	struct devmemtcp_rx *rx = NULL;
	DEVMEMTCP_OPTS(rx_stats, st);
	uint64_t pos = 0;
	int64_t bad = -1;
	char line[256];
	int lfd, fd = -1;

	st_addr(r->cfd, true, r->o->port + 1, &sa, &r->local_len);
	lfd = st_listen(&sa, r->local_len);
	if (!frags || !linear || !tmp || lfd < 0 ||
	    st_say(r->cfd, "SEND %d %lld", r->o->port + 1, r->o->bytes) ||
	    (fd = st_accept(lfd)) < 0 || st_timeout(fd)) {
		st_step(&r->rep, "rx", ST_FAIL, "no stream from the peer on port %d: %s",
			r->o->port + 1, strerror(errno));
		goto out;
	}
	if (devmemtcp_rx_new(r->ctx, fd, NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(devmemtcp_nic_binding(r->nic)), r->buf)) {
		st_step(&r->rep, "rx", ST_FAIL, "%s", rx ? devmemtcp_rx_errmsg(rx) :
			devmemtcp_ctx_errmsg(r->ctx));
		goto out;
	}
	for (;;) {
		int n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, linear, LINEAR_SIZE);

		if (n == -EINTR)
			continue;
		if (n <= 0) {
			if (n < 0) {
				st_step(&r->rep, "rx", ST_FAIL, "after %llu bytes: %s",
					(unsigned long long)pos, devmemtcp_rx_errmsg(rx));
				goto out;
			}
			break;
		}
		for (int i = 0; i < n; i++) {
			const uint8_t *src = tmp;
			long at;

			if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
				src = linear + frags[i].offset;
			else if (devmemtcp_buf_read(r->buf, frags[i].offset, tmp, frags[i].len))
				src = NULL;
			at = src ? pattern_check(src, frags[i].len, pos, PATTERN_PERIOD_DEFAULT) : 0;
			if (at >= 0 && bad < 0)
				bad = (int64_t)pos + at;
			pos += frags[i].len;
		}
		if (devmemtcp_rx_release(rx, frags, (size_t)n)) {
			st_step(&r->rep, "rx", ST_FAIL, "%s", devmemtcp_rx_errmsg(rx));
			goto out;
		}
	}
	devmemtcp_rx_release_all(rx);
	devmemtcp_rx_stats(rx, &st);
	st_hear(r->cfd, line, sizeof(line));
	if (pos != (uint64_t)r->o->bytes || bad >= 0 || !st.dmabuf_bytes)
		st_step(&r->rep, "rx", ST_FAIL,
			"%llu of %lld bytes, first bad byte at %lld, %llu in device memory, %llu as ordinary data%s",
			(unsigned long long)pos, r->o->bytes, (long long)bad,
			(unsigned long long)st.dmabuf_bytes, (unsigned long long)st.linear_bytes,
			!st.dmabuf_bytes ? ": nothing reached the dma-buf (steering or header split)" : "");
	else
		st_step(&r->rep, "rx", ST_OK,
			"%llu bytes checked: %llu in device memory in %llu fragments, %llu as ordinary data",
			(unsigned long long)pos, (unsigned long long)st.dmabuf_bytes,
			(unsigned long long)st.frags, (unsigned long long)st.linear_bytes);
out:
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	free(frags);
	free(linear);
	free(tmp);
}

/* what the kernel refuses while the queue is bound: a second binding, and
 * fewer channels than the bound queue needs (both leave the NIC as is) */
static void st_refusals(struct st_run *r)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS }, set, now = { .cmd = ETHTOOL_GCHANNELS };
	struct devmemtcp_binding *b = NULL;
	int err;

	err = devmemtcp_bind_rx(r->ctx, (int)if_nametoindex(r->o->ifname), &r->queue, 1,
				r->buf, NULL, &b);
	if (err == -EEXIST && strstr(devmemtcp_ctx_errmsg(r->ctx),
				     "designated queue already memory provider bound"))
		st_step(&r->rep, "refuse-rebind", ST_OK, "%s", devmemtcp_ctx_errmsg(r->ctx));
	else
		st_step(&r->rep, "refuse-rebind", ST_FAIL, "a second bind-rx of queue %u: %s",
			r->queue, err ? devmemtcp_ctx_errmsg(r->ctx) : "accepted");
	devmemtcp_binding_close(b);
	if (!r->queue || st_ioctl(r->o->ifname, &ch) ||
	    (ch.combined_count && ch.rx_count > r->queue)) {
		st_step(&r->rep, "refuse-channels", ST_SKIP, "queue 0 is bound, or no channels");
		return;
	}
	set = ch;
	set.cmd = ETHTOOL_SCHANNELS;
	if (ch.combined_count)
		set.combined_count = r->queue - ch.rx_count;
	else
		set.rx_count = r->queue;
	err = st_ioctl(r->o->ifname, &set);
	st_ioctl(r->o->ifname, &now);
	if (err == -EINVAL && now.combined_count == ch.combined_count && now.rx_count == ch.rx_count)
		st_step(&r->rep, "refuse-channels", ST_OK,
			"%u RX queues with queue %u bound: EINVAL, channels unchanged",
			r->queue, r->queue);
	else
		st_step(&r->rep, "refuse-channels", ST_FAIL,
			"%u RX queues with queue %u bound: %s (channels now rx %u combined %u)",
			r->queue, r->queue, err ? strerror(-err) : "accepted",
			now.rx_count, now.combined_count);
}

/* devmem TX to the peer, which checks every byte */
static void st_tx(struct st_run *r)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF, .size = 16u << 20);
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_binding *b = NULL;
	struct devmemtcp_tx *tx = NULL;
	struct sockaddr_storage sa;
	socklen_t len;
	uint8_t *stage = malloc(CHUNK);
	long long pos = 0, got = -1, bad = -1;
	char line[256];
	int fd = -1, slot = 0;
	const int nslots = (16 << 20) / CHUNK;

	if (!r->probe.has_bind_tx) {
		st_step(&r->rep, "tx", ST_SKIP, "the kernel has no devmem TX (bind-tx: Linux 6.16)");
		free(stage);
		return;
	}
	if (!stage || devmemtcp_buf_new(r->ctx, &bo, &buf) ||
	    devmemtcp_bind_tx(r->ctx, (int)if_nametoindex(r->o->ifname), buf, NULL, &b)) {
		st_step(&r->rep, "tx", ST_FAIL, "%s", devmemtcp_ctx_errmsg(r->ctx));
		goto out;
	}
	if (st_say(r->cfd, "RECV %d %lld", r->o->port + 2, r->o->bytes) ||
	    st_hear(r->cfd, line, sizeof(line)) || strcmp(line, "READY")) {
		st_step(&r->rep, "tx", ST_FAIL, "the peer cannot listen on port %d: %s",
			r->o->port + 2, line);
		goto out;
	}
	st_addr(r->cfd, false, r->o->port + 2, &sa, &len);
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || st_timeout(fd) ||
	    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, r->o->ifname, (socklen_t)strlen(r->o->ifname)) ||
	    connect(fd, (struct sockaddr *)&sa, len) || devmemtcp_tx_new(r->ctx, fd, b, NULL, &tx)) {
		st_step(&r->rep, "tx", ST_FAIL, "connecting through %s: %s", r->o->ifname,
			tx || fd < 0 ? strerror(errno) : devmemtcp_ctx_errmsg(r->ctx));
		goto out;
	}
	/* a slot is rewritten only after everything sent was completed
	 * once the ring wrapped: simple and safe */
	while (pos < r->o->bytes) {
		size_t n = r->o->bytes - pos < CHUNK ? (size_t)(r->o->bytes - pos) : CHUNK;
		struct devmemtcp_tx_piece piece = { (uint64_t)slot * CHUNK, n };

		if (slot == 0 && pos)
			while (devmemtcp_tx_wait(tx, TIMEOUT_S * 1000) > 0)
				;
		pattern_fill(stage, n, (uint64_t)pos, PATTERN_PERIOD_DEFAULT);
		if (devmemtcp_buf_write(buf, piece.offset, stage, n) ||
		    devmemtcp_tx_send(tx, &piece, 1, 0) != (ssize_t)n) {
			st_step(&r->rep, "tx", ST_FAIL, "after %lld bytes: %s", pos,
				devmemtcp_tx_errmsg(tx));
			goto out;
		}
		pos += (long long)n;
		slot = (slot + 1) % nslots;
	}
	while (devmemtcp_tx_wait(tx, TIMEOUT_S * 1000) > 0)
		;
	shutdown(fd, SHUT_WR);
	if (st_hear(r->cfd, line, sizeof(line)) || sscanf(line, "DONE %lld %lld", &got, &bad) != 2 ||
	    got != r->o->bytes || bad >= 0)
		st_step(&r->rep, "tx", ST_FAIL, "sent %lld bytes; the peer says: %s", pos, line);
	else
		st_step(&r->rep, "tx", ST_OK, "%lld bytes sent from device memory, checked by the peer",
			pos);
out:
	devmemtcp_tx_free(tx);
	if (fd >= 0)
		close(fd);
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	free(stage);
}

static void st_restore(struct st_run *r)
{
	if (r->nic && devmemtcp_nic_close(r->nic))
		st_step(&r->rep, "restore", ST_FAIL, "%s", devmemtcp_ctx_errmsg(r->ctx));
	r->nic = NULL;
	st_state(r->ctx, r->o->ifname, r->rep.after, sizeof(r->rep.after));
	if (strcmp(r->rep.before, r->rep.after))
		st_step(&r->rep, "restore", ST_FAIL, "the NIC's state differs from before");
	else
		st_step(&r->rep, "restore", ST_OK, "the NIC's state is as before");
}

/* ---- the report ---- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static const char *const result_name[] = { "failed", "ok", "skipped" };

static const char *st_result(int r)
{
	return result_name[r == ST_SKIP ? 2 : r];
}

static void st_print(const struct st_run *r)
{
	const struct st_report *p = &r->rep;

	if (r->o->json) {
		printf("{\"interface\":");
		json_str(r->o->ifname);
		printf(",\"kernel\":");
		json_str(p->kernel);
		printf(",\"driver\":");
		json_str(p->driver);
		printf(",\"driver_version\":");
		json_str(p->driver_version);
		printf(",\"firmware\":");
		json_str(p->firmware);
		printf(",\"bus\":");
		json_str(p->bus);
		printf(",\"peer\":");
		json_str(r->o->peer);
		printf(",\"peer_kernel\":");
		json_str(p->peer_kernel);
		printf(",\"steps\":[");
		for (int i = 0; i < p->nsteps; i++) {
			printf("%s{\"name\":\"%s\",\"result\":\"%s\",\"detail\":", i ? "," : "",
			       p->steps[i].name, st_result(p->steps[i].result));
			json_str(p->steps[i].detail);
			putchar('}');
		}
		printf("],\"problems\":[");
		for (int i = 0; i < p->nproblems; i++) {
			printf("%s", i ? "," : "");
			json_str(p->problems[i]);
		}
		printf("],\"state_before\":");
		json_str(p->before);
		printf(",\"state_after\":");
		json_str(p->after);
		printf("}\n");
		return;
	}
	printf("devmemtcp selftest of %s (libdevmemtcp %s)\n", r->o->ifname, devmemtcp_version());
	printf("kernel          %s\n", p->kernel);
	printf("driver          %s %s, firmware %s, at %s\n", p->driver, p->driver_version,
	       p->firmware[0] ? p->firmware : "unknown", p->bus);
	printf("peer            %s, kernel %s\n", r->o->peer,
	       p->peer_kernel[0] ? p->peer_kernel : "unknown");
	for (int i = 0; i < p->nsteps; i++)
		printf("%-16s%-8s %s\n", p->steps[i].name, st_result(p->steps[i].result),
		       p->steps[i].detail);
	for (int i = 0; i < p->nproblems; i++)
		printf("problem         %s\n", p->problems[i]);
	printf("state before    %s\nstate after     %s\n", p->before, p->after);
}

static int st_run(const struct st_opts *o)
{
	struct st_run r = { .o = o, .cfd = -1 };
	int failed = 0;

	if (tool_ctx_new(CMD, &r.ctx))
		return 1;
	st_facts(&r);
	st_state(r.ctx, o->ifname, r.rep.before, sizeof(r.rep.before));
	st_probe(&r);
	if (!st_connect_peer(&r) && !st_setup(&r)) {
		st_rx(&r);
		st_refusals(&r);
		st_tx(&r);
	}
	st_restore(&r);
	if (r.cfd >= 0) {
		st_say(r.cfd, "BYE");
		close(r.cfd);
	}
	devmemtcp_buf_free(r.buf);
	devmemtcp_ctx_free(r.ctx);
	st_print(&r);
	for (int i = 0; i < r.rep.nsteps; i++)
		failed |= r.rep.steps[i].result == ST_FAIL;
	return failed;
}

int cmd_selftest(int argc, char **argv)
{
	struct st_opts o = { .port = 5299, .bytes = 16ll << 20 };
	int status = st_parse(argc, argv, &o);

	if (status >= 0)
		return status;
	return o.serve ? st_serve(&o) : st_run(&o);
}
