// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The NCCL plugin against a hostile peer: one process, the v11 table,
 * loopback (NCCL_DEVMEMTCP_IFNAME==lo unless set); connect and accept do
 * not block, so one thread plays both sides, as NCCL's proxy thread does.
 *
 *   test-nccl-hostile PLUGIN handles [--seed N]
 *       connect() with handles a hostile rank could send, or anyone who can
 *       change NCCL's bootstrap traffic (it is not authenticated): random
 *       bytes; random bytes behind the right magic and version; a real
 *       handle whose connector bytes (40..55, where a connect in progress
 *       is kept) hold a wild address, the address of a static, the
 *       address of a freed comm, or random bytes; a real handle with one
 *       field broken at a time.  Each must fail with ncclInternalError and
 *       the WARN that says why.  Then NCCL's own use of handles: one buffer
 *       passed again and again until connect returns a comm (and left as
 *       listen wrote it), a second buffer holding the same listen handle (a
 *       second connection, never the first one's comm), and a copy of a
 *       buffer taken while its connect was in progress (one of the two gets
 *       the comm, the other an error, never both the comm); a connect
 *       left in progress is freed by finalize.
 *
 *   test-nccl-hostile PLUGIN accept
 *       accept() while connections that say nothing, or the wrong thing,
 *       reach the listen's ports: one silent connection to the control
 *       port before the peer; 8 silent connections to the data port after
 *       the peer's; 40 silent ones from another address (127.0.0.2) between
 *       a peer's data connection and its hello; a hello with another
 *       nonce.  The peer is accepted within 1 s each time (and its comm
 *       carries its bytes); a wrong hello is dropped at once, silent
 *       connections once their deadline passed (300 ms here, through the
 *       test builds' DEVMEMTCP_TEST_NCCL_PENDING_MS).
 *
 * Every case runs in a child process, so that a crash (or a sanitizer's
 * report) is reported as the case that crashed; the others still run.
 * Exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net_abi.h"

/* The handle as the plugin's listen writes it (its wire format): what
 * comes from the peer, then bytes the connector keeps for itself, zero
 * from listen, then zeros up to NCCL_NET_HANDLE_MAXSIZE. */
#define H_MAGIC 0		/* u32 */
#define H_VERSION 4		/* u16 */
#define H_FAMILY 6		/* u16 */
#define H_ADDR 8		/* 16 bytes */
#define H_CTRL_PORT 24		/* u16, network order */
#define H_DATA_PORT 26		/* u16, network order */
#define H_SCOPE 28		/* u32 */
#define H_NONCE 32		/* u64 */
#define H_STAGE 40		/* the connector's: 16 bytes */
#define HANDLE_MAGIC 0x444d544eu

#define RANDOM_HANDLES 20000

static const struct nccl_net_v11 *net;
static void *ctx;
static uint64_t seed;

/* ---- NCCL's logger: the last WARN ----------------------------------------- */

static char last_warn[2048];
static unsigned int nwarn;

static void logger(enum nccl_log_level level, unsigned long flags,
		   const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	if (level != NCCL_LOG_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(last_warn, sizeof(last_warn), fmt, ap);
	va_end(ap);
	nwarn++;
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s: ", __func__, __LINE__, \
				#cond);                                        \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			return -1;                                             \
		}                                                              \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: reproducible from the seed printed at the start */
static uint64_t rnd(void)
{
	seed ^= seed >> 12;
	seed ^= seed << 25;
	seed ^= seed >> 27;
	return seed * 0x2545f4914f6cdd1dull;
}

static void rnd_fill(void *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		((uint8_t *)p)[i] = (uint8_t)(rnd() >> 56);
}

static void put16(uint8_t *h, size_t off, uint16_t v)
{
	memcpy(h + off, &v, sizeof(v));
}

static void put32(uint8_t *h, size_t off, uint32_t v)
{
	memcpy(h + off, &v, sizeof(v));
}

static void put64(uint8_t *h, size_t off, uint64_t v)
{
	memcpy(h + off, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *h, size_t off)
{
	uint16_t v;

	memcpy(&v, h + off, sizeof(v));
	return v;
}

static uint64_t get64(const uint8_t *h, size_t off)
{
	uint64_t v;

	memcpy(&v, h + off, sizeof(v));
	return v;
}

static int net_connect(void *h, void **sc)
{
	nccl_dev_handle_t *dh = NULL;

	return net->connect(ctx, 0, h, sc, &dh);
}

static int net_accept(void *lc, void **rc)
{
	nccl_dev_handle_t *dh = NULL;

	return net->accept(lc, rc, &dh);
}

/* A connect that must be refused: ncclInternalError, no comm, and a WARN
 * containing a and b (b may be NULL). */
static int refused(uint8_t *h, const char *what, const char *a, const char *b)
{
	void *sc = (void *)1;
	unsigned int before = nwarn;
	int ret = net_connect(h, &sc);

	CHECK(ret == NCCL_ERR_INTERNAL && sc == NULL,
	      "connect with %s: returned %d and sendComm %p, expected ncclInternalError (%d) and NULL",
	      what, ret, sc, NCCL_ERR_INTERNAL);
	CHECK(nwarn > before, "connect with %s: no WARN", what);
	CHECK(strstr(last_warn, a) && (!b || strstr(last_warn, b)),
	      "connect with %s: the WARN \"%s\" does not say \"%s\"%s%s", what,
	      last_warn, a, b ? " and " : "", b ? b : "");
	return 0;
}

/* ---- listen, and connections NCCL's way ------------------------------------ */

static int listen_handle(uint8_t *h, void **lc)
{
	int ret;

	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	ret = net->listen(ctx, 0, h, lc);
	CHECK(ret == NCCL_OK && *lc, "listen: %d", ret);
	return 0;
}

/* Connect with buffer h and accept on lc until both give a comm, within
 * limit seconds. */
static int pair(uint8_t *h, void *lc, void **sc, void **rc, double limit)
{
	double end = now_s() + limit;

	*sc = *rc = NULL;
	while (!*sc || !*rc) {
		if (!*sc)
			CHECK(net_connect(h, sc) == NCCL_OK, "connect: %s", last_warn);
		if (!*rc)
			CHECK(net_accept(lc, rc) == NCCL_OK, "accept: %s", last_warn);
		CHECK(now_s() < end, "no connection after %g s (sendComm %p, recvComm %p)",
		      limit, *sc, *rc);
	}
	return 0;
}

/* ---- the cases ----------------------------------------------------------------- */

static int case_random(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];

	for (int i = 0; i < RANDOM_HANDLES; i++) {
		rnd_fill(h, sizeof(h));
		if (refused(h, "random bytes", "handle", NULL))
			return -1;
	}
	return 0;
}

/* Random behind the right magic and version: past the first check. */
static int case_random_body(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];

	for (int i = 0; i < RANDOM_HANDLES; i++) {
		rnd_fill(h, sizeof(h));
		put32(h, H_MAGIC, HANDLE_MAGIC);
		put16(h, H_VERSION, 1);
		if (refused(h, "random bytes behind the magic", "handle", NULL))
			return -1;
	}
	return 0;
}

/* A real handle, its connector bytes set to v (8 bytes, as a pointer
 * would be) and then to random bytes. */
static int stage_case(uint64_t v, const char *what)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	void *lc;

	if (listen_handle(h, &lc))
		return -1;
	put64(h, H_STAGE, v);
	if (refused(h, what, "names a connection in progress", NULL))
		return -1;
	for (int i = 0; i < 1000; i++) {
		rnd_fill(h + H_STAGE, 16);
		if (refused(h, "random connector bytes", "names a connection in progress", NULL))
			return -1;
	}
	CHECK(net->close_listen(lc) == NCCL_OK, "closeListen");
	return 0;
}

static int case_stage_wild(void)
{
	return stage_case(0x4141414141414141ull, "a wild address in the connector bytes");
}

static uint64_t a_static[2];

static int case_stage_static(void)
{
	return stage_case((uintptr_t)a_static, "the address of a static in the connector bytes");
}

/* The address of a comm that was closed (freed). */
static int case_stage_freed(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *sc, *rc;

	if (listen_handle(h, &lc) || pair(h, lc, &sc, &rc, 10))
		return -1;
	CHECK(net->close_send(sc) == NCCL_OK && net->close_recv(rc) == NCCL_OK &&
	      net->close_listen(lc) == NCCL_OK, "closing");
	return stage_case((uintptr_t)sc, "the address of a freed comm in the connector bytes");
}

/* One field broken at a time: each named in the WARN. */
static int case_fields(void)
{
	static const struct {
		const char *what, *says;
		size_t off, len;
		const char *bytes;
		int family;		/* set the family too (0: leave) */
	} bad[] = {
		{ "version 2", "was not made by listen", H_VERSION, 2, "\x02\x00", 0 },
		{ "family 0", "family", H_FAMILY, 2, "\x00\x00", 0 },
		{ "family AF_UNIX", "family", H_FAMILY, 2, "\x01\x00", 0 },
		{ "IPv4 with bytes after the address", "address", H_ADDR + 4, 1, "\x01", 0 },
		{ "address 0.0.0.0", "address", H_ADDR, 4, "\x00\x00\x00\x00", 0 },
		{ "address 224.0.0.1", "address", H_ADDR, 4, "\xe0\x00\x00\x01", 0 },
		{ "address 255.255.255.255", "address", H_ADDR, 4, "\xff\xff\xff\xff", 0 },
		{ "address ::", "address", H_ADDR, 16,
		  "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", AF_INET6 },
		{ "address ff02::1", "address", H_ADDR, 16,
		  "\xff\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", AF_INET6 },
		{ "address fe80::1", "address", H_ADDR, 16,
		  "\xfe\x80\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", AF_INET6 },
		{ "control port 0", "port", H_CTRL_PORT, 2, "\x00\x00", 0 },
		{ "data port 0", "port", H_DATA_PORT, 2, "\x00\x00", 0 },
		{ "scope id 1", "scope id", H_SCOPE, 4, "\x01\x00\x00\x00", 0 },
		{ "nonce 0", "nonce", H_NONCE, 8, "\0\0\0\0\0\0\0\0", 0 },
		{ "a byte after the connector bytes", "reserved", 56, 1, "\x01", 0 },
		{ "the last byte", "reserved", NCCL_NET_HANDLE_MAXSIZE - 1, 1, "\x80", 0 },
	};
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE], real[NCCL_NET_HANDLE_MAXSIZE];
	void *lc;

	if (listen_handle(real, &lc))
		return -1;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(h, real, sizeof(h));
		if (bad[i].family)
			put16(h, H_FAMILY, (uint16_t)bad[i].family);
		memcpy(h + bad[i].off, bad[i].bytes, bad[i].len);
		if (refused(h, bad[i].what, bad[i].says,
			    strcmp(bad[i].says, "was not made by listen") ? "is not valid" : NULL))
			return -1;
	}
	/* both ports the same */
	memcpy(h, real, sizeof(h));
	memcpy(h + H_DATA_PORT, h + H_CTRL_PORT, 2);
	if (refused(h, "the same port twice", "port", "is not valid"))
		return -1;
	CHECK(net->close_listen(lc) == NCCL_OK, "closeListen");
	return 0;
}

/* NCCL's way: one buffer again and again until a comm; it then reads as
 * listen wrote it.  A second buffer with the same listen handle is a
 * second connection. */
static int case_nccl_use(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE], first[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t second[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *sc1 = NULL, *sc2 = NULL, *rc1 = NULL, *rc2 = NULL;
	double end = now_s() + 10;

	if (listen_handle(h, &lc))
		return -1;
	memcpy(first, h, sizeof(h));
	memcpy(second, h, sizeof(h));
	while (!sc1 || !sc2 || !rc2) {
		void **rc = rc1 ? &rc2 : &rc1;

		if (!sc1)
			CHECK(net_connect(first, &sc1) == NCCL_OK, "connect: %s", last_warn);
		if (!sc2)
			CHECK(net_connect(second, &sc2) == NCCL_OK, "connect: %s", last_warn);
		CHECK(net_accept(lc, rc) == NCCL_OK, "accept: %s", last_warn);
		CHECK(now_s() < end, "two connections with one listen handle: sendComms %p %p, recvComms %p %p after 10 s",
		      sc1, sc2, rc1, rc2);
	}
	CHECK(sc1 != sc2 && rc1 != rc2, "two connections share a comm: sendComms %p %p, recvComms %p %p",
	      sc1, sc2, rc1, rc2);
	CHECK(!memcmp(first, h, sizeof(h)) && !memcmp(second, h, sizeof(h)),
	      "a handle buffer does not read as listen wrote it once its connect is done");
	CHECK(net->close_send(sc1) == NCCL_OK && net->close_send(sc2) == NCCL_OK &&
	      net->close_recv(rc1) == NCCL_OK && net->close_recv(rc2) == NCCL_OK &&
	      net->close_listen(lc) == NCCL_OK, "closing");
	return 0;
}

/* A listening socket on 127.0.0.1; its port (network order) in *port. */
static int tcp_listener(int backlog, uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(fd, backlog) || getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	*port = a.sin_port;
	return fd;
}

static int tcp_connect(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	return fd;
}

/*
 * A copy of a buffer taken while its connect is in progress.  The
 * connect is held in progress by a data port whose accept queue is full
 * (the SYN is dropped until the test makes room), then both buffers are
 * passed: the one passed first after the connection is up gets the comm,
 * the other an error.
 */
static int case_copy_in_progress(void)
{
	uint8_t a[NCCL_NET_HANDLE_MAXSIZE], b[NCCL_NET_HANDLE_MAXSIZE];
	uint16_t cport, dport;
	int cl = tcp_listener(4, &cport), dl = tcp_listener(0, &dport);
	int filler = tcp_connect(dport), fd;
	void *lc, *sc = NULL, *other = (void *)1;
	double end = now_s() + 10;
	int ret;

	CHECK(cl >= 0 && dl >= 0 && filler >= 0, "loopback sockets: %s", strerror(errno));
	if (listen_handle(a, &lc))
		return -1;
	put16(a, H_CTRL_PORT, cport);
	put16(a, H_DATA_PORT, dport);
	ret = net_connect(a, &sc);
	CHECK(ret == NCCL_OK && !sc, "connect to a full accept queue: %d, sendComm %p (expected in progress)",
	      ret, sc);
	memcpy(b, a, sizeof(a));
	fd = accept(dl, NULL, NULL);	/* room: the next SYN gets in */
	CHECK(fd >= 0, "accept: %s", strerror(errno));
	close(fd);
	while (!sc) {
		ret = net_connect(b, &sc);
		CHECK(ret == NCCL_OK, "connect with the copy: %d (%s)", ret, last_warn);
		CHECK(now_s() < end, "the copy's connect did not finish in 10 s");
		if (!sc)
			usleep(10000);
	}
	/* the original now: an error, never the comm a second time */
	ret = net_connect(a, &other);
	CHECK(!(ret == NCCL_OK && other == sc),
	      "the buffer and its copy both returned comm %p", sc);
	CHECK(ret == NCCL_ERR_INTERNAL && !other && strstr(last_warn, "names a connection in progress"),
	      "connect with the buffer whose copy got the comm: %d, sendComm %p, WARN \"%s\"",
	      ret, other, last_warn);
	CHECK(net->close_send(sc) == NCCL_OK, "closeSend");
	CHECK(net->close_listen(lc) == NCCL_OK, "closeListen");
	close(filler);
	close(cl);
	close(dl);
	return 0;
}

/* A connect NCCL leaves in progress (an abort, say): finalize frees it,
 * and closes its control connection (which is up: only the data port's
 * queue is full). */
static int case_abandoned(void)
{
	struct nccl_net_comm_config cfg = { NCCL_NET_TRAFFIC_CLASS_UNDEF };
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	uint16_t cport, dport;
	int cl = tcp_listener(4, &cport), dl = tcp_listener(0, &dport);
	int filler = tcp_connect(dport), fd;
	struct pollfd p = { .events = POLLIN };
	void *lc, *sc = NULL;
	char c;
	int ret;

	CHECK(cl >= 0 && dl >= 0 && filler >= 0, "loopback sockets: %s", strerror(errno));
	if (listen_handle(h, &lc))
		return -1;
	put16(h, H_CTRL_PORT, cport);
	put16(h, H_DATA_PORT, dport);
	ret = net_connect(h, &sc);
	CHECK(ret == NCCL_OK && !sc, "connect to a full accept queue: %d, sendComm %p (expected in progress)",
	      ret, sc);
	CHECK(net->close_listen(lc) == NCCL_OK, "closeListen");
	fd = accept(cl, NULL, NULL);
	CHECK(fd >= 0, "accept: %s", strerror(errno));
	CHECK(net->finalize(ctx) == NCCL_OK, "finalize");
	p.fd = fd;
	CHECK(poll(&p, 1, 1000) == 1 && recv(fd, &c, 1, 0) == 0,
	      "finalize did not close the control connection of a connect left in progress");
	CHECK(net->init(&ctx, 0x5eed, &cfg, logger, NULL) == NCCL_OK, "init: %s", last_warn);
	close(fd);
	close(filler);
	close(cl);
	close(dl);
	return 0;
}

/* ---- accept against silent and stray connections ---------------------------- */

#define HELLO_MAGIC 0x444d5448u
#define MSG_MAGIC 0x444d544du
#define SILENT_DATA 8		/* "four or more" */
#define FLOOD 40		/* more than a listen keeps pending */

/* A connection to 127.0.0.1:port (network order) from address from
 * (NULL: 127.0.0.1) that says nothing: its fd. */
static int silent(uint16_t port, const char *from)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in b = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (from && (inet_pton(AF_INET, from, &b.sin_addr) != 1 ||
		     bind(fd, (struct sockaddr *)&b, sizeof(b)))) {
		close(fd);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static uint16_t local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	return getsockname(fd, (struct sockaddr *)&a, &len) ? 0 : a.sin_port;
}

/* A hello as the plugin's connect writes it. */
static int send_hello(int fd, uint16_t data_port, uint64_t nonce)
{
	uint8_t m[16];
	uint32_t magic = HELLO_MAGIC;
	uint16_t version = 1;

	memcpy(m, &magic, 4);
	memcpy(m + 4, &version, 2);
	memcpy(m + 6, &data_port, 2);
	memcpy(m + 8, &nonce, 8);
	return send(fd, m, sizeof(m), MSG_NOSIGNAL) == sizeof(m) ? 0 : -1;
}

/* Has the plugin closed its end of fd? */
static bool closed_by_peer(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, 0) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* Accept on lc until a comm, within limit seconds (from t0). */
static int accept_within(void *lc, void **rc, double t0, double limit,
			 const char *what)
{
	*rc = NULL;
	while (!*rc) {
		CHECK(net_accept(lc, rc) == NCCL_OK, "accept: %s", last_warn);
		CHECK(now_s() - t0 < limit, "%s: the peer was not accepted within %g s",
		      what, limit);
	}
	return 0;
}

/* Five bytes from a hand-made peer (header on ctrl, payload on data)
 * arrive on rc: it was paired with that data connection. */
static int paired_with(void *rc, int ctrl, int data)
{
	uint8_t hdr[16], buf[64];
	uint32_t magic = MSG_MAGIC;
	int32_t tag = 0;
	uint64_t size = 5;
	size_t cap = sizeof(buf);
	void *req = NULL, *p = buf, *ph = NULL;
	int done = 0, got = -1;
	double end = now_s() + 5;

	memcpy(hdr, &magic, 4);
	memcpy(hdr + 4, &tag, 4);
	memcpy(hdr + 8, &size, 8);
	CHECK(send(ctrl, hdr, sizeof(hdr), MSG_NOSIGNAL) == sizeof(hdr) &&
	      send(data, "hello", 5, MSG_NOSIGNAL) == 5, "send: %s", strerror(errno));
	CHECK(net->irecv(rc, 1, &p, &cap, &tag, NULL, &ph, &req) == NCCL_OK && req,
	      "irecv: %s", last_warn);
	while (!done) {
		CHECK(net->test(req, &done, &got) == NCCL_OK, "test: %s", last_warn);
		CHECK(now_s() < end, "the message did not arrive in 5 s");
	}
	CHECK(got == 5 && !memcmp(buf, "hello", 5),
	      "received %d bytes \"%.*s\", expected \"hello\" from the peer's data connection",
	      got, got > 0 ? got : 0, buf);
	return 0;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* A connection to the control port that never says hello, then the peer. */
static int case_silent_ctrl(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *sc, *rc;
	int s;

	if (listen_handle(h, &lc))
		return -1;
	s = silent(get16(h, H_CTRL_PORT), NULL);
	CHECK(s >= 0, "silent connection: %s", strerror(errno));
	if (pair(h, lc, &sc, &rc, 1.0))
		return -1;
	CHECK(net->close_send(sc) == NCCL_OK && net->close_recv(rc) == NCCL_OK &&
	      net->close_listen(lc) == NCCL_OK, "closing");
	close(s);
	return 0;
}

/* The peer connects (its connect returns a comm without any accept), then
 * SILENT_DATA connections to the data port, then accept. */
static int case_silent_data(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	int s[SILENT_DATA];
	void *lc, *sc = NULL, *rc;
	double t0 = now_s();

	if (listen_handle(h, &lc))
		return -1;
	while (!sc) {
		CHECK(net_connect(h, &sc) == NCCL_OK, "connect: %s", last_warn);
		CHECK(now_s() - t0 < 1.0, "connect did not finish in 1 s");
	}
	for (int i = 0; i < SILENT_DATA; i++) {
		s[i] = silent(get16(h, H_DATA_PORT), NULL);
		CHECK(s[i] >= 0, "silent connection %d: %s", i, strerror(errno));
	}
	if (accept_within(lc, &rc, now_s(), 1.0, "after 8 silent data connections"))
		return -1;
	CHECK(net->close_send(sc) == NCCL_OK && net->close_recv(rc) == NCCL_OK &&
	      net->close_listen(lc) == NCCL_OK, "closing");
	close_all(s, SILENT_DATA);
	return 0;
}

/* A hand-made peer opens its data connection; FLOOD silent ones from
 * another address follow while NCCL keeps calling accept; then the peer's
 * control connection and hello.  The comm is the peer's (its bytes). */
static int case_flood_data(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	int s[FLOOD], ctrl, data;
	void *lc, *rc = (void *)1;

	if (listen_handle(h, &lc))
		return -1;
	data = silent(get16(h, H_DATA_PORT), NULL);
	CHECK(data >= 0, "data connection: %s", strerror(errno));
	for (int i = 0; i < FLOOD; i++) {
		s[i] = silent(get16(h, H_DATA_PORT), "127.0.0.2");
		CHECK(s[i] >= 0, "silent connection %d from 127.0.0.2: %s", i, strerror(errno));
		CHECK(net_accept(lc, &rc) == NCCL_OK && !rc,
		      "accept with no hello yet: recvComm %p (%s)", rc, last_warn);
	}
	ctrl = silent(get16(h, H_CTRL_PORT), NULL);
	CHECK(ctrl >= 0 && !send_hello(ctrl, local_port(data), get64(h, H_NONCE)),
	      "control connection: %s", strerror(errno));
	if (accept_within(lc, &rc, now_s(), 1.0, "after 40 silent data connections from 127.0.0.2") ||
	    paired_with(rc, ctrl, data))
		return -1;
	CHECK(net->close_recv(rc) == NCCL_OK && net->close_listen(lc) == NCCL_OK,
	      "closing");
	close_all(s, FLOOD);
	close(ctrl);
	close(data);
	return 0;
}

/* Only a hello with the handle's nonce pairs: a wrong one is dropped at
 * once, and its data connection waits for the right hello. */
static int case_wrong_hello(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	int bad, ctrl, data;
	void *lc, *rc = (void *)1;
	double end = now_s() + 0.5;

	if (listen_handle(h, &lc))
		return -1;
	data = silent(get16(h, H_DATA_PORT), NULL);
	bad = silent(get16(h, H_CTRL_PORT), NULL);
	CHECK(data >= 0 && bad >= 0 &&
	      !send_hello(bad, local_port(data), get64(h, H_NONCE) ^ 1),
	      "connections: %s", strerror(errno));
	while (now_s() < end) {
		CHECK(net_accept(lc, &rc) == NCCL_OK && !rc,
		      "a hello with another nonce was accepted: recvComm %p", rc);
		if (closed_by_peer(bad))
			break;
	}
	CHECK(closed_by_peer(bad), "a control connection with another nonce was not closed in 0.5 s");
	ctrl = silent(get16(h, H_CTRL_PORT), NULL);
	CHECK(ctrl >= 0 && !send_hello(ctrl, local_port(data), get64(h, H_NONCE)),
	      "control connection: %s", strerror(errno));
	if (accept_within(lc, &rc, now_s(), 1.0, "the right hello after a wrong one") ||
	    paired_with(rc, ctrl, data))
		return -1;
	CHECK(net->close_recv(rc) == NCCL_OK && net->close_listen(lc) == NCCL_OK,
	      "closing");
	close(bad);
	close(ctrl);
	close(data);
	return 0;
}

/* Silent connections are dropped by age: with the test builds' deadline
 * of 300 ms (DEVMEMTCP_TEST_NCCL_PENDING_MS), not before 250 ms and
 * within 1.5 s, while NCCL keeps calling accept. */
static int case_age(void)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	int c, d;
	void *lc, *rc = NULL;
	double t0, t;

	setenv("DEVMEMTCP_TEST_NCCL_PENDING_MS", "300", 1);
	if (listen_handle(h, &lc))
		return -1;
	c = silent(get16(h, H_CTRL_PORT), NULL);
	d = silent(get16(h, H_DATA_PORT), NULL);
	CHECK(c >= 0 && d >= 0, "silent connections: %s", strerror(errno));
	t0 = now_s();
	while (!closed_by_peer(c) || !closed_by_peer(d)) {
		CHECK(net_accept(lc, &rc) == NCCL_OK && !rc, "accept: %p %s", rc, last_warn);
		t = now_s() - t0;
		CHECK(t < 1.5, "silent connections still open after %.2f s (control %s, data %s)",
		      t, closed_by_peer(c) ? "closed" : "open",
		      closed_by_peer(d) ? "closed" : "open");
		usleep(10000);
	}
	t = now_s() - t0;
	CHECK(t >= 0.25, "silent connections closed after %.2f s, before their 300 ms", t);
	CHECK(net->close_listen(lc) == NCCL_OK, "closeListen");
	close(c);
	close(d);
	return 0;
}

/* ---- the run ------------------------------------------------------------------ */

static int plugin_open(const char *path)
{
	struct nccl_net_comm_config cfg = { NCCL_NET_TRAFFIC_CLASS_UNDEF };
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	int ndev = 0;

	CHECK(lib, "dlopen %s: %s", path, dlerror());
	net = dlsym(lib, "ncclNetPlugin_v11");
	CHECK(net, "ncclNetPlugin_v11 is not exported");
	CHECK(net->init(&ctx, 0x5eed, &cfg, logger, NULL) == NCCL_OK, "init: %s", last_warn);
	CHECK(net->devices(&ndev) == NCCL_OK && ndev >= 1, "devices: %d", ndev);
	return 0;
}

struct test_case {
	const char *name;
	int (*fn)(void);
};

/* Each case in a child: 0 pass, 1 fail (what it printed says why). */
static int run_case(const struct test_case *t)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		alarm(60);
		seed ^= (uintptr_t)t->name;
		exit(t->fn() || net->finalize(ctx) ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid) {
		perror("waitpid");
		return 1;
	}
	if (WIFSIGNALED(status)) {
		printf("FAIL %s: killed by signal %d (%s): a crash or a sanitizer's report, see above\n",
		       t->name, WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 1;
	}
	printf("%s %s\n", WEXITSTATUS(status) ? "FAIL" : "ok  ", t->name);
	return WEXITSTATUS(status) != 0;
}

static const struct test_case handle_cases[] = {
	{ "random handles", case_random },
	{ "random handles behind the magic", case_random_body },
	{ "connector bytes: a wild address", case_stage_wild },
	{ "connector bytes: the address of a static", case_stage_static },
	{ "connector bytes: the address of a freed comm", case_stage_freed },
	{ "one field broken at a time", case_fields },
	{ "NCCL's use: a buffer again and again, a second buffer", case_nccl_use },
	{ "a copy of a buffer in progress", case_copy_in_progress },
	{ "a connect left in progress at finalize", case_abandoned },
	{ NULL, NULL }
};

static const struct test_case accept_cases[] = {
	{ "a silent control connection, then the peer", case_silent_ctrl },
	{ "the peer, then 8 silent data connections", case_silent_data },
	{ "40 silent data connections from another address before the peer's hello", case_flood_data },
	{ "a hello with another nonce, then the right one", case_wrong_hello },
	{ "silent connections dropped by age", case_age },
	{ NULL, NULL }
};

static void usage(void)
{
	fprintf(stderr, "usage: test-nccl-hostile PLUGIN handles|accept [--seed N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const struct test_case *cases = NULL;
	int fails = 0;

	if (argc < 3)
		usage();
	if (!strcmp(argv[2], "handles"))
		cases = handle_cases;
	else if (!strcmp(argv[2], "accept"))
		cases = accept_cases;
	else
		usage();
	if (argc == 5 && !strcmp(argv[3], "--seed"))
		seed = strtoull(argv[4], NULL, 0);
	else if (argc != 3)
		usage();
	else if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)time(NULL);
	seed |= 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("NCCL_DEVMEMTCP_IFNAME", "=lo", 0);
	printf("seed %#" PRIx64 " (--seed to repeat)\n", seed);
	if (plugin_open(argv[1]))
		return 1;
	for (const struct test_case *t = cases; t->name; t++)
		fails += run_case(t);
	if (net->finalize(ctx) != NCCL_OK)
		fails++;
	printf("%s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
