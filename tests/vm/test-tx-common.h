/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the devmem TX tests of the vm suite (tests/vm/test-tx-*.c):
 * arguments, network namespaces, the receivers (library devmem RX, or a
 * plain socket) that validate every byte against the stream pattern, and a
 * sender that reuses a ring of dma-buf slots only after the library
 * reported them free, checking each report against the peer's ACKs.
 *
 * Arguments (all optional):
 *   --tx-if IF --tx-addr A --tx-ns NS    sending device (default dsim0,
 *                                        10.0.0.1, no netns change)
 *   --rx-if IF --rx-addr A --rx-ns NS    receiving device (dsim1, 10.0.0.2)
 *   --setup         create netns dmt-tx / dmt-rx, move the devices there,
 *                   address them and bring them up (with ip(8)); undone at
 *                   exit
 *   --bytes N       transfer size (K/M/G suffixes)
 *   --port P        first TCP port
 * Exit: 0 pass, 1 fail, 77 skip (with the reason printed).
 */
#ifndef DEVMEMTCP_TEST_TX_COMMON_H
#define DEVMEMTCP_TEST_TX_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/tcp.h>	/* tcp_info with tcpi_bytes_acked */
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "../../tools/pattern.h"
#include "vmlib.h"

#define PERIOD PATTERN_PERIOD_DEFAULT

/* each test uses a part of these helpers */
#pragma GCC diagnostic ignored "-Wunused-function"

struct targs {
	const char *tx_if, *rx_if, *tx_addr, *rx_addr, *tx_ns, *rx_ns;
	uint64_t bytes;
	int port;
	bool setup;
	bool quick;		/* skip the throughput comparison */
};

static const char *test_name = "test-tx";

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: FAIL: ", test_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

__attribute__((format(printf, 1, 2), noreturn)) static void skip(const char *fmt, ...)
{
	va_list ap;

	printf("%s: SKIP: ", test_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	exit(77);
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", test_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t parse_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	}
	return (uint64_t)v;
}

static bool setup_done;
static struct targs *setup_args;

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : 1;
}

static void teardown_ns(void)
{
	if (!setup_done || !setup_args)
		return;
	setup_done = false;
	/* physical-like devices go back to the initial namespace */
	run("ip netns del dmt-tx 2>/dev/null; ip netns del dmt-rx 2>/dev/null");
	usleep(200000);
}

/* Two namespaces with one device each, so that traffic between the two
 * addresses really crosses the (simulated) wire. */
static void setup_ns(struct targs *a)
{
	/* a previous test's namespaces are deleted asynchronously: their
	 * devices come back to this namespace a moment later */
	for (int i = 0; i < 150 && (if_nametoindex(a->tx_if) == 0 ||
				     if_nametoindex(a->rx_if) == 0); i++)
		usleep(100000);
	if (if_nametoindex(a->tx_if) == 0 || if_nametoindex(a->rx_if) == 0)
		fail("no %s / %s here after 15 s: is devmemsim loaded?", a->tx_if,
		     a->rx_if);
	bool v6 = strchr(a->tx_addr, ':');
	const char *plen = v6 ? "64" : "24", *nodad = v6 ? " nodad" : "";

	if (run("ip netns add dmt-tx && ip netns add dmt-rx && "
		"ip link set %s netns dmt-tx && ip link set %s netns dmt-rx && "
		"ip -n dmt-tx addr add %s/%s dev %s%s && ip -n dmt-rx addr add %s/%s dev %s%s && "
		"ip -n dmt-tx link set lo up && ip -n dmt-rx link set lo up && "
		"ip -n dmt-tx link set %s up && ip -n dmt-rx link set %s up",
		a->tx_if, a->rx_if, a->tx_addr, plen, a->tx_if, nodad,
		a->rx_addr, plen, a->rx_if, nodad, a->tx_if, a->rx_if))
		fail("--setup: could not build the namespaces with ip(8)");
	a->tx_ns = "dmt-tx";
	a->rx_ns = "dmt-rx";
	setup_done = true;
	setup_args = a;
	atexit(teardown_ns);
}

static void parse_args(struct targs *a, int argc, char **argv,
		       uint64_t def_bytes, int def_port)
{
	static const struct option opts[] = {
		{ "tx-if", required_argument, NULL, 1 },
		{ "rx-if", required_argument, NULL, 2 },
		{ "tx-addr", required_argument, NULL, 3 },
		{ "rx-addr", required_argument, NULL, 4 },
		{ "tx-ns", required_argument, NULL, 5 },
		{ "rx-ns", required_argument, NULL, 6 },
		{ "bytes", required_argument, NULL, 7 },
		{ "port", required_argument, NULL, 8 },
		{ "setup", no_argument, NULL, 9 },
		{ "quick", no_argument, NULL, 10 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;

	test_name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	*a = (struct targs){ "dsim0", "dsim1", "10.0.0.1", "10.0.0.2", NULL,
			     NULL, def_bytes, def_port, false, false };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 1: a->tx_if = optarg; break;
		case 2: a->rx_if = optarg; break;
		case 3: a->tx_addr = optarg; break;
		case 4: a->rx_addr = optarg; break;
		case 5: a->tx_ns = optarg; break;
		case 6: a->rx_ns = optarg; break;
		case 7: a->bytes = parse_bytes(optarg); break;
		case 8: a->port = atoi(optarg); break;
		case 9: a->setup = true; break;
		case 10: a->quick = true; break;
		default:
			printf("usage: %s [--setup] [--tx-if IF] [--tx-addr A] [--tx-ns NS]\n"
			       "       [--rx-if IF] [--rx-addr A] [--rx-ns NS] [--bytes N] [--port P] [--quick]\n",
			       test_name);
			exit(c == 'h' ? 0 : 2);
		}
	}
	if (a->setup)
		setup_ns(a);
	signal(SIGPIPE, SIG_IGN);
}

static void enter_ns(const char *ns)
{
	if (ns && vm_enter(ns))
		fail("entering netns %s: %s", ns, strerror(errno));
}

/* Does this kernel have devmem TX (6.16+)? */
static bool kernel_has_tx(char *rel, size_t len)
{
	struct utsname u;
	int maj = 0, min = 0;

	uname(&u);
	snprintf(rel, len, "%s", u.release);
	sscanf(u.release, "%d.%d", &maj, &min);
	return maj > 6 || (maj == 6 && min >= 16);
}

static struct devmemtcp_ctx *new_ctx(void)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_level = DEVMEMTCP_LOG_WARN);
	struct devmemtcp_ctx *ctx;
	int r = devmemtcp_ctx_new(&o, &ctx);

	if (r)
		fail("devmemtcp_ctx_new: %s", strerror(-r));
	return ctx;
}

static struct devmemtcp_buf *new_udmabuf(struct devmemtcp_ctx *ctx,
					 uint64_t size)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = size);
	struct devmemtcp_buf *buf;
	int r = devmemtcp_buf_new(ctx, &o, &buf);

	if (r == -ENOENT || r == -EOPNOTSUPP)
		skip("no udmabuf: %s", devmemtcp_ctx_errmsg(ctx));
	if (r)
		fail("udmabuf of %" PRIu64 " bytes: %s", size,
		     devmemtcp_ctx_errmsg(ctx));
	return buf;
}

/*
 * bind-tx on ifname.  On a kernel without devmem TX, the test is that the
 * library says so clearly: -EOPNOTSUPP and "needs Linux 6.16"; then the
 * program exits 0 (or 1 when the error is not that).
 */
static struct devmemtcp_binding *bind_tx_or_explain(struct devmemtcp_ctx *ctx,
						    const char *ifname,
						    struct devmemtcp_buf *buf)
{
	struct devmemtcp_binding *b = NULL;
	char rel[65];
	bool has = kernel_has_tx(rel, sizeof(rel));
	int ifindex = (int)if_nametoindex(ifname);
	int r;

	if (!ifindex)
		fail("no interface %s in the sender's namespace", ifname);
	r = devmemtcp_bind_tx(ctx, ifindex, buf, NULL, &b);
	if (!has) {
		if (r != -EOPNOTSUPP)
			fail("kernel %s has no devmem TX: expected -EOPNOTSUPP from devmemtcp_bind_tx, got %d (%s)",
			     rel, r, devmemtcp_ctx_errmsg(ctx));
		if (!strstr(devmemtcp_ctx_errmsg(ctx), "needs Linux 6.16"))
			fail("kernel %s: -EOPNOTSUPP but the message does not say \"needs Linux 6.16\": %s",
			     rel, devmemtcp_ctx_errmsg(ctx));
		note("PASS (kernel %s without devmem TX): devmemtcp_bind_tx -> -EOPNOTSUPP: %s",
		     rel, devmemtcp_ctx_errmsg(ctx));
		exit(0);
	}
	if (r)
		fail("devmemtcp_bind_tx on %s (kernel %s): %d: %s", ifname,
		     rel, r, devmemtcp_ctx_errmsg(ctx));
	note("bind-tx on %s: binding %u", ifname, devmemtcp_binding_id(b));
	return b;
}

static int connect_to(const char *addr, int port, const char *bind_dev)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	bool v6 = strchr(addr, ':');
	int fd, tries;

	for (tries = 0; tries < 100; tries++) {
		fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC,
			    0);
		if (fd < 0)
			fail("socket: %s", strerror(errno));
		if (bind_dev && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE,
					   bind_dev, (socklen_t)strlen(bind_dev)))
			fail("SO_BINDTODEVICE %s: %s", bind_dev, strerror(errno));
		if (v6) {
			inet_pton(AF_INET6, addr, &a6.sin6_addr);
			a6.sin6_port = htons((uint16_t)port);
			if (!connect(fd, (struct sockaddr *)&a6, sizeof(a6)))
				return fd;
		} else {
			inet_pton(AF_INET, addr, &a4.sin_addr);
			a4.sin_port = htons((uint16_t)port);
			if (!connect(fd, (struct sockaddr *)&a4, sizeof(a4)))
				return fd;
		}
		close(fd);
		usleep(50000);
	}
	fail("connect to %s port %d: %s", addr, port, strerror(errno));
}

static int listen_on(const char *addr, int port)
{
	struct sockaddr_storage ss = { 0 };
	bool v6 = strchr(addr, ':');
	socklen_t len;
	int one = 1, fd;

	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fail("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr, &a->sin6_addr);
		a->sin6_port = htons((uint16_t)port);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &a->sin_addr);
		a->sin_port = htons((uint16_t)port);
		len = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 4))
		fail("listen on %s port %d: %s", addr, port, strerror(errno));
	return fd;
}

/* ---- receivers ------------------------------------------------------------ */

/* What a receiver child reports back through its pipe. */
struct rx_result {
	int ok;			/* 1: every byte as expected */
	uint64_t bytes;
	uint64_t dmabuf_bytes;
	uint64_t linear_bytes;
	uint64_t frags;
	uint64_t tokens_released;
	uint64_t bad_pos;	/* first bad stream position */
	double secs;		/* first byte to end of stream */
	char msg[512];
};

enum rx_mode {
	RX_DEVMEM,	/* library RX on a bound queue (header split on) */
	RX_PLAIN,	/* an ordinary socket */
};

struct rx_spec {
	enum rx_mode mode;
	bool validate;
	int port;
};

/* Child: receive one connection per spec (in order), report each. */
static void rx_child(const struct targs *a, const struct rx_spec *specs,
		     size_t nspecs, int ready_fd, int res_fd)
{
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_nic *nic = NULL;
	struct devmemtcp_binding *b = NULL;
	struct devmemtcp_flow flows[8];
	const size_t lin_len = 1 << 20;
	uint8_t *lin = malloc(lin_len), *tmp = malloc(1 << 16);
	int lfd[8], r;
	char text[160];
	bool devmem = false;

	enter_ns(a->rx_ns);
	ctx = new_ctx();
	for (size_t i = 0; i < nspecs; i++) {
		lfd[i] = listen_on(a->rx_addr, specs[i].port);
		if (specs[i].mode != RX_DEVMEM)
			continue;
		snprintf(text, sizeof(text), "%s dst-ip %s dst-port %d",
			 strchr(a->rx_addr, ':') ? "tcp6" : "tcp4", a->rx_addr,
			 specs[i].port);
		if (devmemtcp_flow_parse(text, &flows[0]))
			fail("flow %s", text);
		devmem = true;
	}
	if (devmem) {
		DEVMEMTCP_OPTS(nic_opts, no, .nqueues = 1, .flows = flows,
			       .nflows = 0);

		buf = new_udmabuf(ctx, 64ull << 20);
		/* one flow per devmem spec, all to the bound queue */
		no.nflows = 0;
		for (size_t i = 0; i < nspecs; i++) {
			if (specs[i].mode != RX_DEVMEM)
				continue;
			snprintf(text, sizeof(text), "%s dst-ip %s dst-port %d",
				 strchr(a->rx_addr, ':') ? "tcp6" : "tcp4",
				 a->rx_addr, specs[i].port);
			devmemtcp_flow_parse(text, &flows[no.nflows++]);
		}
		no.buf = buf;
		r = devmemtcp_nic_open(ctx, a->rx_if, &no, &nic);
		if (r)
			fail("receiver: devmemtcp_nic_open %s: %s", a->rx_if,
			     devmemtcp_ctx_errmsg(ctx));
		b = devmemtcp_nic_binding(nic);
	}
	if (write(ready_fd, "R", 1) != 1)
		_exit(1);
	close(ready_fd);

	for (size_t i = 0; i < nspecs; i++) {
		struct rx_result res = { .ok = 1 };
		struct devmemtcp_rx *rx = NULL;
		struct devmemtcp_frag frags[256];
		uint64_t pos = 0;
		double t0 = 0;
		int fd = accept(lfd[i], NULL, NULL);

		if (fd < 0)
			fail("accept: %s", strerror(errno));
		if (specs[i].mode == RX_DEVMEM) {
			DEVMEMTCP_OPTS(rx_stats, st);

			if (devmemtcp_rx_new(ctx, fd, NULL, &rx) ||
			    devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(b), buf))
				fail("devmemtcp_rx_new: %s", devmemtcp_ctx_errmsg(ctx));
			for (;;) {
				int n = devmemtcp_rx_recv(rx, frags, 256, lin,
							  lin_len);

				if (n == 0)
					break;
				if (n < 0) {
					if (n == -EINTR || n == -EAGAIN)
						continue;
					snprintf(res.msg, sizeof(res.msg),
						 "devmemtcp_rx_recv: %s",
						 devmemtcp_rx_errmsg(rx));
					res.ok = 0;
					break;
				}
				if (!t0)
					t0 = now_s();
				for (int k = 0; k < n; k++) {
					const struct devmemtcp_frag *f = &frags[k];
					const uint8_t *src;
					long bad;

					if (f->flags & DEVMEMTCP_FRAG_FOREIGN) {
						snprintf(res.msg, sizeof(res.msg),
							 "fragment of foreign binding %u",
							 f->binding_id);
						res.ok = 0;
					}
					if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
						src = lin + f->offset;
						res.linear_bytes += f->len;
					} else {
						res.dmabuf_bytes += f->len;
						res.frags++;
						src = NULL;
					}
					if (specs[i].validate && res.ok) {
						if (!src) {
							if (f->len > (1 << 16) ||
							    devmemtcp_buf_read(buf, f->offset, tmp, f->len))
								fail("buf_read %u at %" PRIu64, f->len, f->offset);
							src = tmp;
						}
						bad = pattern_check(src, f->len, pos, PERIOD);
						if (bad >= 0) {
							res.ok = 0;
							res.bad_pos = pos + (uint64_t)bad;
							snprintf(res.msg, sizeof(res.msg),
								 "byte at stream offset %" PRIu64 " is %u, expected %u (%s fragment, dma-buf offset %" PRIu64 ")",
								 res.bad_pos, src[bad],
								 pattern_byte(res.bad_pos, PERIOD),
								 f->flags & DEVMEMTCP_FRAG_LINEAR ? "linear" : "dma-buf",
								 f->offset + (uint64_t)bad);
						}
					}
					pos += f->len;
				}
				if (devmemtcp_rx_release(rx, frags, (size_t)n))
					fail("release: %s", devmemtcp_rx_errmsg(rx));
			}
			devmemtcp_rx_release_all(rx);
			devmemtcp_rx_stats(rx, &st);
			res.tokens_released = st.tokens_released;
			if (st.tokens_outstanding && res.ok) {
				res.ok = 0;
				snprintf(res.msg, sizeof(res.msg),
					 "%" PRIu64 " tokens still outstanding",
					 st.tokens_outstanding);
			}
			devmemtcp_rx_free(rx);
		} else {
			for (;;) {
				ssize_t n = recv(fd, lin, lin_len, 0);
				long bad;

				if (n == 0)
					break;
				if (n < 0) {
					if (errno == EINTR)
						continue;
					snprintf(res.msg, sizeof(res.msg),
						 "recv: %s", strerror(errno));
					res.ok = 0;
					break;
				}
				if (!t0)
					t0 = now_s();
				if (specs[i].validate && res.ok) {
					bad = pattern_check(lin, (size_t)n, pos, PERIOD);
					if (bad >= 0) {
						res.ok = 0;
						res.bad_pos = pos + (uint64_t)bad;
						snprintf(res.msg, sizeof(res.msg),
							 "byte at stream offset %" PRIu64 " is %u, expected %u",
							 res.bad_pos, lin[bad],
							 pattern_byte(res.bad_pos, PERIOD));
					}
				}
				res.linear_bytes += (uint64_t)n;
				pos += (uint64_t)n;
			}
		}
		res.secs = t0 ? now_s() - t0 : 0;
		res.bytes = pos;
		close(fd);
		close(lfd[i]);
		if (write(res_fd, &res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(1);
	}
	if (nic)
		devmemtcp_nic_close(nic);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	_exit(0);
}

struct rx_proc {
	pid_t pid;
	int res_fd;
};

static struct rx_proc start_receiver(const struct targs *a,
				     const struct rx_spec *specs,
				     size_t nspecs)
{
	int ready[2], res[2];
	struct rx_proc p;
	char c;

	if (pipe2(ready, O_CLOEXEC) || pipe2(res, O_CLOEXEC))
		fail("pipe: %s", strerror(errno));
	fflush(NULL);
	p.pid = fork();
	if (p.pid < 0)
		fail("fork: %s", strerror(errno));
	if (!p.pid) {
		setup_done = false;	/* the parent undoes --setup */
		close(ready[0]);
		close(res[0]);
		rx_child(a, specs, nspecs, ready[1], res[1]);
	}
	close(ready[1]);
	close(res[1]);
	if (read(ready[0], &c, 1) != 1) {
		int st = 0;

		waitpid(p.pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			exit(77);
		fail("the receiver died while setting up (status %d)", st);
	}
	close(ready[0]);
	p.res_fd = res[0];
	return p;
}

static struct rx_result receiver_result(struct rx_proc *p)
{
	struct rx_result r;
	ssize_t n = read(p->res_fd, &r, sizeof(r));

	if (n != (ssize_t)sizeof(r))
		fail("the receiver sent no result (%zd)", n);
	return r;
}

static void receiver_wait(struct rx_proc *p)
{
	int st = 0;

	close(p->res_fd);
	waitpid(p->pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail("the receiver exited with status %d", st);
}

/* ---- the sender: a ring of dma-buf slots reused after completion ---------- */

struct slot_piece {
	uint64_t off;		/* dma-buf offset */
	uint64_t len;
	uint64_t pos;		/* stream position of its first byte */
};

struct slot {
	bool busy;
	uint64_t bytes;		/* stream bytes in flight from this slot */
	uint64_t done;		/* of which reported free */
	struct slot_piece *pieces;
	size_t npieces;
};

struct sender {
	struct devmemtcp_tx *tx;
	int fd;
	uint64_t slot_size;
	size_t nslots;
	struct slot *slots;
	uint64_t reported;	/* bytes reported free */
	uint64_t early;		/* bytes reported before the peer ACKed them */
	uint64_t copied_ranges;
	uint64_t ranges;
	char why[256];
};

static uint64_t bytes_acked(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return UINT64_MAX;
	return ti.tcpi_bytes_acked;
}

/* Library callback: ranges free again.  Each must belong to a busy slot,
 * never be reported twice, and already be ACKed by the peer. */
static void on_done(void *user, const struct devmemtcp_tx_done *d, size_t n)
{
	struct sender *s = user;
	uint64_t acked = bytes_acked(s->fd);

	for (size_t i = 0; i < n; i++) {
		uint64_t off = d[i].offset, end = off + d[i].len;
		struct slot *sl;

		s->ranges++;
		if (d[i].flags & DEVMEMTCP_TX_DONE_COPIED)
			s->copied_ranges++;
		while (off < end) {
			size_t k = (size_t)(off / s->slot_size);
			uint64_t slot_end = (k + 1) * s->slot_size, seg;

			if (k >= s->nslots)
				fail("done range at %" PRIu64 " beyond the ring", off);
			sl = &s->slots[k];
			seg = (end < slot_end ? end : slot_end) - off;
			if (!sl->busy)
				fail("range [%" PRIu64 ", +%" PRIu64 ") reported free but slot %zu has nothing in flight",
				     off, seg, k);
			for (size_t p = 0; p < sl->npieces; p++) {
				const struct slot_piece *pc = &sl->pieces[p];
				uint64_t lo = off > pc->off ? off : pc->off;
				uint64_t hi = off + seg < pc->off + pc->len ? off + seg : pc->off + pc->len;

				if (lo >= hi)
					continue;
				if (pc->pos + (hi - pc->off) > acked) {
					s->early += hi - lo;
					snprintf(s->why, sizeof(s->why),
						 "stream bytes up to %" PRIu64 " reported free with only %" PRIu64 " ACKed",
						 pc->pos + (hi - pc->off), acked);
				}
			}
			sl->done += seg;
			s->reported += seg;
			if (sl->done > sl->bytes)
				fail("slot %zu: %" PRIu64 " bytes reported free of %" PRIu64 " sent (a range reported twice)",
				     k, sl->done, sl->bytes);
			if (sl->done == sl->bytes)
				sl->busy = false;
			off += seg;
		}
	}
}

static struct devmemtcp_tx *sender_open(struct sender *s,
					struct devmemtcp_ctx *ctx, int fd,
					struct devmemtcp_binding *b,
					uint64_t slot_size, size_t nslots,
					size_t max_pieces, uint64_t call_bytes)
{
	DEVMEMTCP_OPTS(tx_opts, o, .done_fn = on_done, .done_user = s,
		       .max_call_bytes = call_bytes);
	int r;

	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->slot_size = slot_size;
	s->nslots = nslots;
	s->slots = calloc(nslots, sizeof(*s->slots));
	for (size_t i = 0; i < nslots; i++)
		s->slots[i].pieces = calloc(max_pieces, sizeof(struct slot_piece));
	r = devmemtcp_tx_new(ctx, fd, b, &o, &s->tx);
	if (r)
		fail("devmemtcp_tx_new: %s", devmemtcp_ctx_errmsg(ctx));
	return s->tx;
}

/* Wait until slot k may be rewritten. */
static void sender_claim(struct sender *s, size_t k)
{
	while (s->slots[k].busy) {
		int r = devmemtcp_tx_wait(s->tx, 20000);

		if (r < 0)
			fail("devmemtcp_tx_wait: %s", devmemtcp_tx_errmsg(s->tx));
	}
}

/* Send the pieces of slot k (already written), all of them. */
static void sender_send(struct sender *s, size_t k)
{
	struct slot *sl = &s->slots[k];
	struct devmemtcp_tx_piece *p = malloc(sl->npieces * sizeof(*p));
	ssize_t r;

	sl->bytes = 0;
	sl->done = 0;
	for (size_t i = 0; i < sl->npieces; i++) {
		p[i] = (struct devmemtcp_tx_piece){ sl->pieces[i].off,
						    sl->pieces[i].len };
		sl->bytes += sl->pieces[i].len;
	}
	sl->busy = true;
	r = devmemtcp_tx_send(s->tx, p, sl->npieces, 0);
	if (r != (ssize_t)sl->bytes)
		fail("devmemtcp_tx_send of %zu pieces (%" PRIu64 " bytes): %zd: %s",
		     sl->npieces, sl->bytes, r, devmemtcp_tx_errmsg(s->tx));
	free(p);
}

/* Wait for every completion, then check the accounting. */
static void sender_finish(struct sender *s, uint64_t total)
{
	DEVMEMTCP_OPTS(tx_stats, st);
	int r;

	while ((r = devmemtcp_tx_wait(s->tx, 20000)) > 0)
		;
	if (r < 0)
		fail("waiting for the last completions: %s",
		     devmemtcp_tx_errmsg(s->tx));
	devmemtcp_tx_stats(s->tx, &st);
	note("sender: %" PRIu64 " bytes in %" PRIu64 " sendmsg calls (%" PRIu64 " partial, %" PRIu64 " ENOBUFS waits); %" PRIu64 " notifications completed %" PRIu64 " calls (%" PRIu64 " copied), %" PRIu64 " ranges free",
	     st.bytes_sent, st.sendmsg_calls, st.partial_sends,
	     st.nobufs_waits, st.notifications, st.completions,
	     st.copied_completions, st.ranges_done);
	if (st.bytes_sent != total)
		fail("sent %" PRIu64 " of %" PRIu64 " bytes", st.bytes_sent, total);
	if (st.completions != st.sendmsg_calls || st.sends_in_flight)
		fail("%" PRIu64 " sendmsg calls but %" PRIu64 " completions (%" PRIu64 " in flight)",
		     st.sendmsg_calls, st.completions, st.sends_in_flight);
	if (st.bytes_done != total || s->reported != total)
		fail("%" PRIu64 " / %" PRIu64 " bytes reported free of %" PRIu64,
		     st.bytes_done, s->reported, total);
	if (st.unknown_completions)
		fail("%" PRIu64 " completions for sequence numbers never sent",
		     st.unknown_completions);
	if (s->early)
		fail("%" PRIu64 " bytes reported free before the peer ACKed them: %s",
		     s->early, s->why);
	if (st.copied_completions)
		note("note: the kernel copied %" PRIu64 " sends instead of zero-copy",
		     st.copied_completions);
	for (size_t i = 0; i < s->nslots; i++)
		if (s->slots[i].busy)
			fail("slot %zu still busy after the last completion", i);
}

static void sender_close(struct sender *s)
{
	devmemtcp_tx_free(s->tx);
	for (size_t i = 0; i < s->nslots; i++)
		free(s->slots[i].pieces);
	free(s->slots);
}

#endif
