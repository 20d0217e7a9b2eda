// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite, devmemtcp-broker: hand-started brokers in a network and
 * mount namespace the test creates (veth va/vb, no header split), their
 * clients forked and switched to uids that lack every capability.  What
 * needs no devmem-capable NIC is here: the policy file (errors with their
 * line, the canonical text), the idle exit (with and without a client),
 * malformed and oversized requests (answered with the reason, then the
 * connection closed, no fd left behind in the broker), other
 * connections' handle ids and queues, every policy refusal, a client in
 * another network namespace, the udmabuf checks, probe's report, and
 * that a setup through the broker fails with the message the library
 * gives when called directly, and that the NIC nearest a GPU is the same
 * without CAP_NET_ADMIN as with it.  The vm suite (tests/vm/test-broker.c)
 * does the rest on the simulated NIC.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <net/if.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <dirent.h>

#include "broker.h"
#include "devmemtcp.h"
#include "harness.h"
#include "sysfsfixture.h"
#include "ctxfixture.h"
#include "nicfixture.h"

#ifndef TEST_BUILDDIR
#define TEST_BUILDDIR "."
#endif

#define BROKER TEST_BUILDDIR "/broker/devmemtcp-broker"

static struct devmemtcp_ctx *ctx;
static char dir[64], sock[100], conf[128], logpath[128];

static int setup(void **state)
{
	FILE *f;

	if (nicfix_setup(dir, sizeof(dir), "dmt-host-broker", &ctx) || chmod(dir, 0755))
		return -1;
	snprintf(sock, sizeof(sock), "%s/broker.sock", dir);
	snprintf(conf, sizeof(conf), "%s/broker.conf", dir);
	snprintf(logpath, sizeof(logpath), "%s/broker.log", dir);
	setenv("DEVMEMTCP_BROKER_SOCKET", sock, 1);
	f = fopen(conf, "w");
	if (!f)
		return -1;
	fprintf(f, "# host-broker\n"
		   "allow uid 65534 interface va queues 1 ports 5201-5210,6000 udmabuf 64M tx\n"
		   "allow uid 65533 interface vb queues 2 ports any\n"
		   "allow uid 65531 interface vb udmabuf 1M\n"
		   "allow uid 65530 interface va queues 3,5-7 ports any\n");
	fclose(f);
	return chmod(conf, 0644);
}

static void reap_leftover(void);

static int teardown(void **state)
{
	reap_leftover();
	unsetenv("DEVMEMTCP_BROKER_SOCKET");
	return nicfix_teardown(dir, ctx);
}

/* ---- brokers and raw clients ------------------------------------------- */

/* This process's name as the kernel keeps it (/proc/self/comm): the
 * broker names the client by it, and under valgrind it is valgrind's. */
static const char *self_comm(void)
{
	static char comm[32];
	FILE *f = fopen("/proc/self/comm", "r");

	if (!f || !fgets(comm, sizeof(comm), f))
		snprintf(comm, sizeof(comm), "?");
	if (f)
		fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	return comm;
}

/* recv and recvmsg that wait on after EINTR: a socket with a receive
 * timeout is not restarted after a signal or a freeze of the process. */
static ssize_t recv_r(int fd, void *b, size_t n, int flags)
{
	ssize_t r;

	do
		r = recv(fd, b, n, flags);
	while (r < 0 && errno == EINTR);
	return r;
}

static ssize_t recvmsg_r(int fd, struct msghdr *m, int flags)
{
	ssize_t r;

	do
		r = recvmsg(fd, m, flags);
	while (r < 0 && errno == EINTR);
	return r;
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* The broker started last, until stop_broker reaps it. */
static pid_t broker_pid;

/* A broker that a failed test left running (its assertion jumped past
 * stop_broker) goes, so that the next test's broker can take the socket. */
static void reap_leftover(void)
{
	if (broker_pid <= 0)
		return;
	/* 0: still running; a test that waited for its exit reaped it */
	if (waitpid(broker_pid, NULL, WNOHANG) == 0) {
		kill(broker_pid, SIGKILL);
		waitpid(broker_pid, NULL, 0);
		unlink(sock);
	}
	broker_pid = 0;
}

/* How a broker is started: extra environment ("NAME=VALUE", NULL-ended)
 * and its RLIMIT_NOFILE (0: as this process's). */
struct broker_env {
	const char *const *env;
	rlim_t nofile;
	const char *conf;	/* NULL: the test's */
};

/* A broker with idle_s as --idle-exit; its pid, at once. */
static pid_t spawn_broker(int idle_s, const struct broker_env *be)
{
	char idle[16];
	pid_t pid;

	reap_leftover();
	snprintf(idle, sizeof(idle), "%d", idle_s);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		/* the broker must not outlive this test (a failed assertion
		 * longjmps past stop_broker) nor hold the test runner's output
		 * pipe open: it dies with this process and writes to its log */
		if (log < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 ||
		    prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
			_exit(126);
		for (const char *const *e = be ? be->env : NULL; e && *e; e++)
			putenv((char *)*e);
		execl(BROKER, BROKER, "--config", be && be->conf ? be->conf : conf, "--socket", sock,
		      "--idle-exit", idle, (char *)NULL);
		_exit(127);
	}
	broker_pid = pid;
	return pid;
}

/* Until the broker answers a connection (5 s at most). */
static void wait_broker(void)
{
	int fd = -1;

	for (int i = 0; i < 500 && fd < 0; i++) {
		fd = raw_connect();
		if (fd < 0)
			usleep(10000);
	}
	assert_true(fd >= 0);
	close(fd);
}

/* A broker with idle_s as --idle-exit; its pid.  Waits until it answers. */
static pid_t start_broker_with(int idle_s, const struct broker_env *be)
{
	pid_t pid = spawn_broker(idle_s, be);

	wait_broker();
	/* the descriptor limit is set from here once the broker answers, not
	 * in the child: under valgrind the child is valgrind's until it
	 * execs, and valgrind aborts when its own descriptors fall above a
	 * lowered limit */
	if (be && be->nofile &&
	    prlimit(pid, RLIMIT_NOFILE, &(struct rlimit){ be->nofile, be->nofile }, NULL))
		fail_msg("prlimit(RLIMIT_NOFILE) of the broker: %s", strerror(errno));
	return pid;
}

static pid_t start_broker(int idle_s)
{
	return start_broker_with(idle_s, NULL);
}

static void stop_broker(pid_t pid)
{
	int st;

	if (pid == broker_pid)
		broker_pid = 0;
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		/* what it said: a sanitizer's report, a crash */
		t_note("the broker ended with status 0x%x; its log:", st);
		t_run("tail -40 %s >&2", logpath);
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* Files open in process pid. */
static int fds_of(pid_t pid)
{
	char path[64];
	struct dirent *d;
	int n = 0;
	DIR *dp;

	snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
	dp = opendir(path);
	assert_non_null(dp);
	while ((d = readdir(dp)))
		n += d->d_name[0] != '.';
	closedir(dp);
	return n;
}

/* Send len bytes of msg with nfds fds, read the reply into r (its fd into
 * *rfd when not NULL): the reply's length, 0 at EOF. */
static ssize_t raw_call(int fd, const void *msg, size_t len, const int *fds, int nfds,
			struct dmt_brk_reply *r, int *rfd)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { r, sizeof(*r) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} sctl;
	struct iovec siov = { (void *)msg, len };
	struct msghdr s = { .msg_iov = &siov, .msg_iovlen = 1 };
	int got[4], n;
	ssize_t ret;

	if (nfds) {
		struct cmsghdr *cm;

		memset(&sctl, 0, sizeof(sctl));
		s.msg_control = sctl.buf;
		s.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&s);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	if (sendmsg(fd, &s, MSG_NOSIGNAL) != (ssize_t)len)
		return -errno;
	memset(r, 0, sizeof(*r));
	ret = recvmsg_r(fd, &m, MSG_CMSG_CLOEXEC);
	if (ret < 0)
		return -errno;
	n = dmt_brk_take_fds(&m, got, 4);
	for (int i = 0; i < n && i < 4; i++) {
		if (rfd && i == 0)
			*rfd = got[0];
		else
			close(got[i]);
	}
	return ret;
}

/* The broker answered err with msg, then closed the connection. */
static void expect_refused_and_closed(int fd, const void *msg, size_t len, const int *fds,
				      int nfds, int err, const char *text)
{
	struct dmt_brk_reply r;

	assert_int_equal(raw_call(fd, msg, len, fds, nfds, &r, NULL), sizeof(r));
	assert_int_equal(r.err, err);
	assert_string_equal(r.msg, text);
	assert_int_equal(recv_r(fd, &r, sizeof(r), 0), 0);	/* EOF */
}

/* A request of type with body bytes from body. */
static size_t req(void *buf, unsigned int type, const void *body, size_t n)
{
	dmt_brk_hdr_init(buf, type, n, 7);
	memcpy((char *)buf + sizeof(struct dmt_brk_hdr), body, n);
	return sizeof(struct dmt_brk_hdr) + n;
}

/* ---- in a child with another uid ---------------------------------------- */

struct answer {
	int ret;
	char msg[1024];
	char msg2[1024];
	ssize_t after;		/* what came after the reply (0: EOF) */
	struct devmemtcp_probe probe;
	struct devmemtcp_nic_rank ranks[8];
};

/* Run fn as uid (no capabilities: a non-root uid loses them all) and
 * bring back what it answered. */
typedef void as_uid_fn(struct answer *a, struct devmemtcp_ctx *c, const void *arg);

static void as_uid(uid_t uid, as_uid_fn *fn, const void *arg, struct answer *a)
{
	struct answer *shared = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int st;

	assert_true(shared != MAP_FAILED);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
		struct devmemtcp_ctx *c;

		if (setgroups(0, NULL) || setgid(uid) || setuid(uid) || devmemtcp_ctx_new(&co, &c))
			_exit(9);
		fn(shared, c, arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	*a = *shared;
	munmap(shared, sizeof(*a));
}

static void keep(struct answer *a, struct devmemtcp_ctx *c, int ret)
{
	a->ret = ret;
	snprintf(a->msg, sizeof(a->msg), "%s", devmemtcp_ctx_errmsg(c));
}

/* ---- tests ---------------------------------------------------------------- */

/* ---- descriptors whose close sleeps -------------------------------------- */

/* A TCP socket over loopback whose close sleeps until its peer reads:
 * SO_LINGER {1, INT_MAX}, data it could not send yet (the peer's window
 * is full), so the FIN waits behind it.  *peer: the other end, which
 * never reads; closing it resets the connection and ends the wait. */
static int lingering_socket(int *peer)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct linger lg = { 1, INT_MAX };
	socklen_t len = sizeof(a);
	static char junk[65536];
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), s, small = 4096;
	ssize_t n, sent = 0;

	assert_true(l >= 0);
	assert_int_equal(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	*peer = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*peer >= 0);
	close(l);
	while ((n = send(s, junk, sizeof(junk), MSG_DONTWAIT)) > 0)
		sent += n;
	assert_true(sent > 0 && errno == EAGAIN);
	assert_int_equal(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	return s;
}

/* Send len bytes of msg with fd (-1: none) on conn and wait at most ms
 * for the reply: its length (0: none came in time); *secs the time it
 * took. */
static ssize_t timed_call(int conn, const void *msg, size_t len, int fd, int ms,
			  struct dmt_brk_reply *r, double *secs)
{
	struct pollfd pfd = { .fd = conn, .events = POLLIN };
	double t0 = t_now();
	ssize_t n = 0;

	memset(r, 0, sizeof(*r));
	if (dmt_brk_send(conn, msg, len, &fd, fd >= 0, 0))
		return -1;
	if (poll(&pfd, 1, ms) == 1)
		n = recv(conn, r, sizeof(*r), MSG_DONTWAIT);
	*secs = t_now() - t0;
	return n;
}

/* This process (root, whom no rule names) sends the lingering socket fd
 * with a bind-rx request on a connection of its own and closes its copy,
 * the broker holding off meanwhile (a test hook: it reads no request
 * while the file hold exists), so that the broker holds the last
 * reference; the connection, after the reply (refused) came.  (Stopping
 * the broker would not do: a stop signal ends the sleep of a close that
 * lingers.) */
static int send_lingering(const char *hold, int fd)
{
	struct {
		struct dmt_brk_hdr h;
		struct dmt_brk_bind b;
		uint32_t q;
	} m = { .b = { .ifindex = if_nametoindex("va"), .nqueues = 1 } };
	struct pollfd pfd;
	struct dmt_brk_reply r;
	int conn = raw_connect();

	assert_true(conn >= 0);
	dmt_brk_hdr_init(&m.h, DMT_BRK_BIND_RX, sizeof(m.b) + sizeof(m.q), 7);
	close(open(hold, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	assert_int_equal(dmt_brk_send(conn, &m, sizeof(m), &fd, 1, 0), 0);
	close(fd);
	assert_int_equal(unlink(hold), 0);
	pfd = (struct pollfd){ .fd = conn, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	assert_int_equal(recv_r(conn, &r, sizeof(r), 0), sizeof(r));
	assert_int_equal(r.err, -EACCES);
	assert_non_null(strstr(r.msg, "may not use va: no rule of "));
	return conn;
}

/* What uid 65534 (whom a rule names) asks while the broker holds
 * lingering sockets: each reply and how long it took, as
 * "secs errno message\n". */
static void permitted_calls(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	struct {
		struct dmt_brk_hdr h;
		union {
			struct dmt_brk_policy p;
			struct {
				struct dmt_brk_bind b;
				uint32_t q;
			} bind;
			struct dmt_brk_udmabuf u;
		};
	} m;
	struct dmt_brk_reply r;
	int conn, mfd = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t n = 0;
	double secs;

	if (mfd < 0 || ftruncate(mfd, 1 << 20))
		_exit(5);
	/* the policy (answered by the broker's loop) */
	memset(&m, 0, sizeof(m));
	snprintf(m.p.ifname, sizeof(m.p.ifname), "va");
	dmt_brk_hdr_init(&m.h, DMT_BRK_POLICY, sizeof(m.p), 1);
	conn = raw_connect();
	if (timed_call(conn, &m, sizeof(m.h) + sizeof(m.p), -1, 2000, &r, &secs) != sizeof(r))
		r.err = 1;
	n += (size_t)snprintf(a->msg + n, sizeof(a->msg) - n, "%.3f %d allowed %u\n", secs,
			      r.err, r.u.policy.allowed);
	close(conn);
	/* a bind-rx with a buffer, refused (its fd dropped by a helper) */
	memset(&m, 0, sizeof(m));
	m.bind.b.ifindex = if_nametoindex("va");
	m.bind.b.nqueues = 1;
	dmt_brk_hdr_init(&m.h, DMT_BRK_BIND_RX, sizeof(m.bind), 2);
	conn = raw_connect();
	if (timed_call(conn, &m, sizeof(m.h) + sizeof(m.bind), mfd, 2000, &r, &secs) !=
	    sizeof(r))
		r.err = 1;
	n += (size_t)snprintf(a->msg + n, sizeof(a->msg) - n, "%.3f %d %s\n", secs, r.err,
			      r.msg);
	close(conn);
	/* a udmabuf, whose memfd a helper looks at */
	memset(&m, 0, sizeof(m));
	dmt_brk_hdr_init(&m.h, DMT_BRK_UDMABUF, sizeof(m.u), 3);
	conn = raw_connect();
	if (timed_call(conn, &m, sizeof(m.h) + sizeof(m.u), mfd, 2000, &r, &secs) != sizeof(r))
		r.err = 1;
	n += (size_t)snprintf(a->msg + n, sizeof(a->msg) - n, "%.3f %d %s\n", secs, r.err,
			      r.msg);
	close(conn);
	close(mfd);
}

/* Descriptors whose close sleeps (a TCP socket that lingers) sent by a
 * user whom no rule names: refused, and the broker goes on answering a
 * permitted user at once; that user's further requests wait while two
 * of its descriptors are still being dropped (the per-user bound on work
 * in flight), and are answered once they are. */
static void test_lingering_fds(void **state)
{
	struct dmt_brk_policy p = { .ifname = "va" };
	char hold[160], env[200];
	const char *envs[] = { env, NULL };
	struct broker_env be = { envs, 0 };
	uint64_t m[8];
	int peer[2], conn[2], third;
	struct dmt_brk_reply r;
	struct answer a;
	char *line, *save;
	double secs;
	pid_t pid;
	size_t n;

	snprintf(hold, sizeof(hold), "%s/hold", dir);
	snprintf(env, sizeof(env), "DEVMEMTCP_TEST_BROKER_HOLD=%s", hold);
	pid = start_broker_with(0, &be);
	conn[0] = send_lingering(hold, lingering_socket(&peer[0]));
	as_uid(65534, permitted_calls, NULL, &a);
	t_note("uid 65534 while the broker drops one lingering socket (s errno message):\n%s", a.msg);
	line = strtok_r(a.msg, "\n", &save);
	assert_non_null(line);
	assert_true(sscanf(line, "%lf", &secs) == 1 && secs < 1.0);
	assert_string_equal(strchr(line, ' ') + 1, "0 allowed 1");
	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	assert_true(sscanf(line, "%lf", &secs) == 1 && secs < 1.0);
	assert_string_equal(strchr(line, ' ') + 1,
			    "-1 devmemtcp-broker: RX queue 0 of va is not a queue of this process's handles: set it up with devmemtcp_nic_open first");
	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	assert_true(sscanf(line, "%lf", &secs) == 1 && secs < 1.0);
	assert_string_equal(strchr(line, ' ') + 1,
			    "-22 devmemtcp-broker: the memfd must be sealed with F_SEAL_SHRINK and F_SEAL_GROW, not F_SEAL_WRITE (seals 0x0)");

	/* two of root's in flight: its next request waits */
	conn[1] = send_lingering(hold, lingering_socket(&peer[1]));
	third = raw_connect();
	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	assert_int_equal(timed_call(third, m, n, -1, 500, &r, &secs), 0);
	as_uid(65534, permitted_calls, NULL, &a);
	assert_true(sscanf(a.msg, "%lf", &secs) == 1 && secs < 1.0);
	/* the peers reset their connections: the closes end */
	close(peer[0]);
	close(peer[1]);
	{
		struct pollfd pfd = { .fd = third, .events = POLLIN };

		assert_int_equal(poll(&pfd, 1, 2000), 1);
	}
	assert_int_equal(recv_r(third, &r, sizeof(r), 0), sizeof(r));
	assert_int_equal(r.err, 0);
	close(third);
	close(conn[0]);
	close(conn[1]);
	stop_broker(pid);
}

/* A parse error refuses to start, naming the file and the line; --check
 * prints the canonical rules. */
static void test_config(void **state)
{
	char bad[160], out[1024], cmd[512], want[512];
	FILE *f;

	snprintf(bad, sizeof(bad), "%s/bad.conf", dir);
	f = fopen(bad, "w");
	assert_non_null(f);
	fprintf(f, "allow uid 1 interface va\n\n# comment\nallow uid 2 interfaces va\n");
	fclose(f);
	chmod(bad, 0644);
	snprintf(cmd, sizeof(cmd), "%s --check --config %s 2>&1", BROKER, bad);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 1);
	snprintf(want, sizeof(want),
		 "devmemtcp-broker: %s:4: unknown word \"interfaces\" (interface, queues, ports, udmabuf, udmabuf-total, tx)\n",
		 bad);
	assert_string_equal(out, want);
	/* a starting broker refuses it the same way */
	snprintf(cmd, sizeof(cmd), "%s --config %s --socket %s/x.sock 2>&1", BROKER, bad, dir);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 1);
	assert_string_equal(out, want);
	chmod(bad, 0666);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 1);
	ctxfix_expect_text(out,
			   "devmemtcp-broker: %s must be a regular file of root's that others cannot write, of at most 65536 bytes\n",
			   bad);
	snprintf(cmd, sizeof(cmd), "%s --check --config %s", BROKER, conf);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 0);
	assert_string_equal(out,
			    "allow uid 65534 interface va queues 1 ports 5201-5210,6000 udmabuf 64M tx\n"
			    "allow uid 65533 interface vb queues 2 ports any\n"
			    "allow uid 65531 interface vb queues 1 udmabuf 1M\n"
			    "allow uid 65530 interface va queues 3,5-7 ports any\n");
	/* queue ids: ranges checked, refused with their line */
	f = fopen(bad, "w");
	assert_non_null(f);
	fprintf(f, "# queues\nallow uid 1 interface va queues 3,7-5\n");
	fclose(f);
	chmod(bad, 0644);
	snprintf(cmd, sizeof(cmd), "%s --check --config %s 2>&1", BROKER, bad);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 1);
	ctxfix_expect_text(out,
			   "devmemtcp-broker: %s:2: queues: a count from 1 to 64, or queue ids Q[-R][,...] from 0 to 4095 with Q <= R (queues 3,5-7; one queue: queues 4-4)\n",
			   bad);
	f = fopen(bad, "w");
	assert_non_null(f);
	fprintf(f, "allow uid 1 interface va queues 3-5,5\n");
	fclose(f);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 1);
	ctxfix_expect_text(out, "devmemtcp-broker: %s:1: queue ranges 3-5 and 5-5 overlap\n", bad);
	/* no rules at all: --check says so */
	f = fopen(bad, "w");
	assert_non_null(f);
	fprintf(f, "# nothing allowed\n");
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s --check --config %s", BROKER, bad);
	assert_int_equal(t_capture(out, sizeof(out), cmd), 0);
	ctxfix_expect_text(out, "# %s has no rules: the broker refuses every request\n", bad);
}

/* Idle: no client connected and nothing held for --idle-exit seconds. */
static void test_idle_exit(void **state)
{
	double t0 = t_now(), t;
	pid_t pid = start_broker(1);
	int st, fd;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	t = t_now() - t0;
	t_note("idle exit after %.2f s with --idle-exit 1", t);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(t >= 0.9 && t < 4);
	assert_int_equal(access(sock, F_OK), -1);	/* its socket went with it */

	pid = start_broker(1);
	fd = raw_connect();
	assert_true(fd >= 0);
	usleep(2200 * 1000);
	assert_int_equal(waitpid(pid, &st, WNOHANG), 0);	/* a client: it stays */
	t0 = t_now();
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	t = t_now() - t0;
	t_note("exit %.2f s after its last client left", t);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(t >= 0.9 && t < 4);
}

/* The socket is made 0666 (anyone may connect: the policy decides)
 * without a chmod of its path: a path swapped for a symbolic link right
 * after bind (a test hook holds the broker there) leaves the file the
 * link points to as it was. */
static void test_socket_mode(void **state)
{
	char fifo[160], victim[160], link[160], env[200];
	const char *envs[] = { env, NULL };
	struct broker_env be = { envs, 0 };
	struct stat st, bound;
	pid_t pid;
	int fd;

	snprintf(fifo, sizeof(fifo), "%s/bound.fifo", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(env, sizeof(env), "DEVMEMTCP_TEST_BROKER_BOUND_FIFO=%s", fifo);
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(chmod(victim, 0600), 0);
	pid = spawn_broker(0, &be);
	/* opens once the broker, bound, waits in the hook */
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(lstat(sock, &bound), 0);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(rename(link, sock), 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	/* SIGTERM is read in the loop, after the socket is set up */
	stop_broker(pid);
	assert_int_equal(stat(victim, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(S_ISSOCK(bound.st_mode));
	assert_int_equal(bound.st_mode & 07777, 0666);
	unlink(victim);
	unlink(fifo);
}

/* CPU time (user and system) of process pid so far, in seconds. */
static double cpu_of(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	assert_non_null(p);
	/* fields 14 and 15, counted from the state (field 3) */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				&ut, &st), 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A policy request on fd: whether it was answered (err 0) within ms. */
static bool policy_answered(int fd, int ms)
{
	uint64_t m[8];
	struct dmt_brk_policy p = { .ifname = "va" };
	struct dmt_brk_reply r;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t n = req(m, DMT_BRK_POLICY, &p, sizeof(p));

	if (send(fd, m, n, MSG_NOSIGNAL) != (ssize_t)n)
		return false;
	if (poll(&pfd, 1, ms) != 1)
		return false;
	return recv_r(fd, &r, sizeof(r), 0) == sizeof(r) && r.err == 0;
}

/* Out of descriptors (RLIMIT_NOFILE, here lowered for it), the broker
 * stops accepting for a while instead of polling the listening socket
 * over and over: it uses next to no CPU while connections wait, serves
 * the clients it has (keeping descriptors for that), and takes the
 * waiting ones once descriptors are free again. */
static void test_out_of_fds(void **state)
{
	struct broker_env be = { NULL, 32 };
	int fds[40], answered[40], nans = 0, waiting = -1;
	double cpu0, cpu1, t0;
	pid_t pid = start_broker_with(0, &be);

	for (int i = 0; i < 40; i++) {
		fds[i] = raw_connect();
		assert_true(fds[i] >= 0);
	}
	usleep(300 * 1000);
	cpu0 = cpu_of(pid);
	usleep(1500 * 1000);
	cpu1 = cpu_of(pid);
	t_note("broker CPU time over 1.5 s with 40 connections and RLIMIT_NOFILE 32: %.3f s",
	       cpu1 - cpu0);
	assert_true(cpu1 - cpu0 < 0.15);
	/* taken in the order they came: after the first that waits, all do */
	for (int i = 0; i < 40 && waiting < 0; i++) {
		if (policy_answered(fds[i], 200))
			answered[nans++] = fds[i];
		else
			waiting = fds[i];
	}
	t_note("%d of 40 connections served", nans);
	assert_true(nans >= 1 && nans < 40 && waiting >= 0);
	/* the clients it has are served */
	t0 = t_now();
	assert_true(policy_answered(answered[0], 1000));
	assert_true(t_now() - t0 < 1.0);
	/* descriptors free again: a connection that waited is taken */
	for (int i = 0; i < nans; i++)
		close(answered[i]);
	t0 = t_now();
	assert_true(policy_answered(waiting, 2000));
	t_note("a waiting connection served %.3f s after descriptors were freed",
	       t_now() - t0);
	for (int i = 0; i < 40; i++) {
		bool was = false;

		for (int k = 0; k < nans; k++)
			was |= answered[k] == fds[i];
		if (!was)
			close(fds[i]);
	}
	stop_broker(pid);
}

/* A udmabuf request with two fds: the reply, then what came after it. */
static void two_fds(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	uint64_t m[8];
	struct dmt_brk_reply r;
	int mfd = memfd_create("x", MFD_CLOEXEC), two[2] = { mfd, mfd }, fd = raw_connect();
	size_t n = req(m, DMT_BRK_UDMABUF, &(struct dmt_brk_udmabuf){ 0 },
		       sizeof(struct dmt_brk_udmabuf));

	a->ret = raw_call(fd, m, n, two, 2, &r, NULL) == sizeof(r) ? r.err : 1;
	snprintf(a->msg, sizeof(a->msg), "%s", r.msg);
	a->after = recv_r(fd, &r, sizeof(r), 0);
}

/* Malformed and oversized requests: the reason, then the connection
 * closes; the broker goes on, with no fd more than before. */
static void test_malformed(void **state)
{
	char big[9000] = { 0 };
	uint64_t m[DMT_BRK_MSG_MAX / 8 + 1];
	struct dmt_brk_open o = { .ifname = "va" };
	struct dmt_brk_policy p = { .ifname = "va" };
	struct dmt_brk_flow w = { .family = 3 };
	struct dmt_brk_hdr *h = (struct dmt_brk_hdr *)m;
	pid_t pid = start_broker(0);
	int fds0, fd, mfd = memfd_create("x", MFD_CLOEXEC);
	struct dmt_brk_reply r;
	struct answer a;
	size_t n;

	/* counted once the connection start_broker() tried with is gone */
	usleep(100 * 1000);
	fds0 = fds_of(pid);
	fd = raw_connect();
	expect_refused_and_closed(fd, "abcd", 4, NULL, 0, -EPROTO,
				  "devmemtcp-broker refused a malformed request: not a devmemtcp-broker request (4 bytes, no magic)");
	close(fd);

	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	h->version = 3;
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, NULL, 0, -EPROTONOSUPPORT,
				  "devmemtcp-broker refused a malformed request: protocol version 3: this broker speaks version 2 (run a libdevmemtcp and a devmemtcp-broker of one release)");
	close(fd);

	/* a library of protocol version 1 reads the refusal: a reply of
	 * that version's size and number */
	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	h->version = 1;
	fd = raw_connect();
	assert_int_equal(raw_call(fd, m, n, NULL, 0, &r, NULL), DMT_BRK_REPLY_V1_SIZE);
	assert_int_equal(r.hdr.version, 1);
	assert_int_equal(r.hdr.len, DMT_BRK_REPLY_V1_SIZE);
	assert_int_equal(r.hdr.type, DMT_BRK_POLICY | DMT_BRK_REPLY);
	assert_int_equal(r.hdr.seq, 7);
	assert_int_equal(r.err, -EPROTONOSUPPORT);
	assert_int_equal(r.nfds, 0);
	assert_string_equal(r.msg, "devmemtcp-broker refused a malformed request: protocol version 1: this broker speaks version 2 (run a libdevmemtcp and a devmemtcp-broker of one release)");
	assert_int_equal(recv(fd, &r, sizeof(r), 0), 0);	/* EOF */
	close(fd);

	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	h->len = 100;
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, NULL, 0, -EINVAL,
				  "devmemtcp-broker refused a malformed request: the header says 100 bytes but the message has 32");
	close(fd);

	req(big, DMT_BRK_POLICY, &p, sizeof(p));
	fd = raw_connect();
	expect_refused_and_closed(fd, big, sizeof(big), NULL, 0, -EMSGSIZE,
				  "devmemtcp-broker refused a malformed request: a message of more than 8192 bytes");
	close(fd);

	n = req(m, 99, &p, sizeof(p));
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, NULL, 0, -EINVAL,
				  "devmemtcp-broker refused a malformed request: unknown request type 99");
	close(fd);

	memcpy(o.ifname, "../x", 5);
	n = req(m, DMT_BRK_OPEN, &o, sizeof(o));
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, NULL, 0, -EINVAL,
				  "devmemtcp-broker refused a malformed request: the interface name is not a valid name (1-15 printable bytes, no '/', ':' or blank)");
	close(fd);

	memset(o.ifname, 0, sizeof(o.ifname));
	memcpy(o.ifname, "va", 3);
	o.nflows = 65;
	n = req(m, DMT_BRK_OPEN, &o, sizeof(o));
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, NULL, 0, -EINVAL,
				  "devmemtcp-broker refused a malformed request: 0 queue ids, 0 queues, 65 flows: at most 64 queues and 64 flows go in one open");
	close(fd);

	o.nflows = 1;	/* and no flow after it */
	n = req(m, DMT_BRK_OPEN, &o, sizeof(o));
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, NULL, 0, -EINVAL,
				  "devmemtcp-broker refused a malformed request: a open request of 40 body bytes, not 128");
	close(fd);

	memcpy((char *)m + sizeof(*h) + sizeof(o), &w, sizeof(w));
	n = req(m, DMT_BRK_OPEN, &o, sizeof(o));
	h->len += sizeof(w);
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n + sizeof(w), NULL, 0, -EINVAL,
				  "devmemtcp-broker refused a malformed request: family 3 is neither AF_INET nor AF_INET6");
	close(fd);

	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	fd = raw_connect();
	expect_refused_and_closed(fd, m, n, &mfd, 1, -EINVAL,
				  "devmemtcp-broker refused a malformed request: file descriptors came with a policy request, which takes none");
	close(fd);

	/* the fds a request carries are counted once a helper takes them:
	 * for a request the policy allows */
	as_uid(65534, two_fds, NULL, &a);
	assert_int_equal(a.ret, -EINVAL);
	assert_string_equal(a.msg,
			    "devmemtcp-broker refused a malformed request: 2 file descriptors came with it, not 1");
	assert_int_equal(a.after, 0);	/* EOF */

	/* still there, as it was */
	fd = raw_connect();
	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	assert_int_equal(raw_call(fd, m, n, NULL, 0, &r, NULL), sizeof(r));
	assert_int_equal(r.err, 0);
	assert_int_equal(r.hdr.type, DMT_BRK_POLICY | DMT_BRK_REPLY);
	assert_int_equal(r.hdr.seq, 7);
	close(fd);
	close(mfd);
	usleep(100 * 1000);
	assert_int_equal(fds_of(pid), fds0);
	stop_broker(pid);
}

/* Handle ids are a connection's own: another's (or none) is ENOENT and
 * the connection stays. */
static void test_other_ids(void **state)
{
	uint64_t m[64];
	struct dmt_brk_handle hc = { .handle = 1 }, hr = { .handle = 99, .flow_id = 7 };
	struct dmt_brk_add_flow af = { .handle = 5, .flow = { .family = AF_INET } };
	struct dmt_brk_policy p = { .ifname = "va" };
	pid_t pid = start_broker(0);
	struct dmt_brk_reply r;
	int fd = raw_connect();
	size_t n;

	n = req(m, DMT_BRK_CLOSE, &hc, sizeof(hc));
	assert_int_equal(raw_call(fd, m, n, NULL, 0, &r, NULL), sizeof(r));
	assert_int_equal(r.err, -ENOENT);
	assert_string_equal(r.msg, "devmemtcp-broker: 1 is not a handle of this connection");
	n = req(m, DMT_BRK_REMOVE_FLOW, &hr, sizeof(hr));
	assert_int_equal(raw_call(fd, m, n, NULL, 0, &r, NULL), sizeof(r));
	assert_int_equal(r.err, -ENOENT);
	assert_string_equal(r.msg, "devmemtcp-broker: 99 is not a handle of this connection");
	n = req(m, DMT_BRK_ADD_FLOW, &af, sizeof(af));
	assert_int_equal(raw_call(fd, m, n, NULL, 0, &r, NULL), sizeof(r));
	assert_int_equal(r.err, -ENOENT);
	n = req(m, DMT_BRK_POLICY, &p, sizeof(p));
	assert_int_equal(raw_call(fd, m, n, NULL, 0, &r, NULL), sizeof(r));
	assert_int_equal(r.err, 0);
	assert_int_equal(r.u.policy.allowed, 0);	/* root has no rule */
	close(fd);
	stop_broker(pid);
}

/* bind-rx on queue 0 of ifname, or bind-tx on it (arg "tx:IF"). */
static void bind_on(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	DEVMEMTCP_OPTS(bind_opts, bo, .broker = true);
	const char *ifname = arg;
	struct devmemtcp_binding *b = NULL;
	struct devmemtcp_buf *buf;
	uint32_t q = 0;
	int mfd;

	if (t_memfd_buf(c, 1 << 20, &mfd, &buf))
		_exit(8);
	if (!strncmp(ifname, "tx:", 3))
		keep(a, c, devmemtcp_bind_tx(c, (int)if_nametoindex(ifname + 3), buf, &bo, &b));
	else
		keep(a, c, devmemtcp_bind_rx(c, (int)if_nametoindex(ifname), &q, 1, buf, NULL, &b));
	devmemtcp_buf_free(buf);
	close(mfd);
}

/* A queue no handle of the process owns is not its to bind; a user no
 * rule names binds nothing; bind-tx needs "tx" in the rule, and with it
 * goes through. */
static void test_bind_not_owned(void **state)
{
	pid_t pid = start_broker(0);
	struct answer a;
	long p = 0;

	as_uid(65534, bind_on, "va", &a);
	assert_int_equal(a.ret, -EPERM);
	assert_string_equal(a.msg,
			    "devmemtcp-broker: RX queue 0 of va is not a queue of this process's handles: set it up with devmemtcp_nic_open first");

	as_uid(65532, bind_on, "va", &a);
	/* ERRORS devmemtcp_bind_rx EACCES */
	assert_int_equal(a.ret, -EACCES);
	assert_int_equal(sscanf(a.msg, "devmemtcp-broker: uid 65532 (pid %ld,", &p), 1);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: uid 65532 (pid %ld, %s) may not use va: no rule of %s allows it; an administrator can add one (devmemtcp-broker.conf(5))",
			   p, self_comm(), conf);

	as_uid(65533, bind_on, "tx:vb", &a);
	/* ERRORS devmemtcp_bind_tx EACCES */
	assert_int_equal(a.ret, -EACCES);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: uid 65533 may not bind-tx on vb: the rule at %s:3 has no \"tx\"",
			   conf);
	/* with "tx" the policy lets it through: to the buffer's check (a
	 * memfd stands in for the dma-buf here) */
	as_uid(65534, bind_on, "tx:va", &a);
	assert_int_equal(a.ret, -EBADF);
	assert_string_equal(a.msg,
			    "devmemtcp-broker: the fd sent is not a dma-buf (/memfd:devmemtcp-test (deleted))");
	stop_broker(pid);
}

struct open_try {
	const char *ifname;
	const char *flow;	/* NULL: none */
	uint32_t nqueues;
	uint32_t flags;
	const uint32_t *ids;	/* NULL: nqueues is a count */
};

static void open_as(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	const struct open_try *t = arg;
	struct devmemtcp_flow f;
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = t->nqueues, .flags = t->flags,
		       .queues = t->ids,
		       .flows = t->flow ? &f : NULL, .nflows = t->flow ? 1 : 0);
	struct devmemtcp_nic *nic = NULL;

	if (t->flow && devmemtcp_flow_parse(t->flow, &f))
		_exit(7);
	keep(a, c, devmemtcp_nic_open(c, t->ifname, &o, &nic));
	devmemtcp_nic_close(nic);
}

/* What the policy refuses, refused before the NIC is touched. */
static void try_open(uid_t uid, const struct open_try *t, struct answer *a)
{
	as_uid(uid, open_as, t, a);
}

static void test_policy(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1);
	struct devmemtcp_flow f;
	struct devmemtcp_nic *nic = (void *)1;
	char direct[1024];
	pid_t pid = start_broker(0);
	struct answer a;

	try_open(65534, &(struct open_try){ "va", "dst-port 22", 1, 0 }, &a);
	assert_int_equal(a.ret, -EACCES);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: flow 0 steers destination port 22, and uid 65534 may steer only destination ports 5201-5210,6000 (rule at %s:2)",
			   conf);

	try_open(65534, &(struct open_try){ "va", "dst-ip 10.9.0.1", 1, 0 }, &a);
	assert_int_equal(a.ret, -EACCES);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: flow 0 names no destination port, and uid 65534 may steer only destination ports 5201-5210,6000 (rule at %s:2)",
			   conf);

	try_open(65534, &(struct open_try){ "va", "dst-port 5201", 2, 0 }, &a);
	/* ERRORS devmemtcp_nic_open EDQUOT */
	assert_int_equal(a.ret, -EDQUOT);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: uid 65534 may own 1 queue of va at once (rule at %s:2) and owns 0: 2 more are too many",
			   conf);

	try_open(65534, &(struct open_try){ "va", "dst-port 5201", 1, DEVMEMTCP_NIC_KEEP_RSS }, &a);
	assert_int_equal(a.ret, -EPERM);
	assert_string_equal(a.msg,
			    "devmemtcp-broker: DEVMEMTCP_NIC_KEEP_RSS leaves other traffic on the devmem queues of va, in memory the caller can read: not through the broker");

	try_open(65534, &(struct open_try){ "vb", "dst-port 5201", 1, 0 }, &a);
	assert_int_equal(a.ret, -EACCES);
	assert_true(strstr(a.msg, conf) != NULL);
	assert_true(!strncmp(a.msg, "devmemtcp-broker: uid 65534 (pid ", 33));

	/* a rule that names queues: those, asked for by id */
	try_open(65530, &(struct open_try){ "va", "dst-port 5201", 1, 0 }, &a);
	/* ERRORS devmemtcp_nic_open EPERM */
	assert_int_equal(a.ret, -EPERM);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: uid 65530 may use RX queues 3,5-7 of va only (rule at %s:5): ask for them by id (devmemtcp_nic_opts.queues, devmemtcp recv --queues)",
			   conf);
	try_open(65530, &(struct open_try){ "va", "dst-port 5201", 2, 0,
					    (const uint32_t[]){ 5, 4 } }, &a);
	assert_int_equal(a.ret, -EPERM);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: uid 65530 asked for RX queue 4 of va, which the rule at %s:5 does not name (queues 3,5-7)",
			   conf);
	/* named ones pass the policy: the NIC answers (veth: 1 RX queue) */
	try_open(65530, &(struct open_try){ "va", "dst-port 5201", 1, 0,
					    (const uint32_t[]){ 5 } }, &a);
	assert_int_equal(a.ret, -ERANGE);
	assert_true(strstr(a.msg, "RX queue 5 is out of range") != NULL);

	try_open(65532, &(struct open_try){ "va", "dst-port 5201", 1, 0 }, &a);
	assert_int_equal(a.ret, -EACCES);
	assert_true(strstr(a.msg, "may not use va: no rule of ") != NULL);
	assert_true(strstr(a.msg, conf) != NULL);

	/* allowed: the setup fails on veth with the message a direct call has */
	assert_int_equal(devmemtcp_flow_parse("dst-port 5201", &f), 0);
	o.flows = &f;
	o.nflows = 1;
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EOPNOTSUPP);
	snprintf(direct, sizeof(direct), "%s", devmemtcp_ctx_errmsg(ctx));
	try_open(65534, &(struct open_try){ "va", "dst-port 5201", 1, 0 }, &a);
	assert_int_equal(a.ret, -EOPNOTSUPP);
	assert_string_equal(a.msg, direct);
	stop_broker(pid);
}

static void open_other_netns(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	DEVMEMTCP_OPTS(nic_opts, o, .flags = DEVMEMTCP_NIC_BROKER);
	struct devmemtcp_nic *nic = NULL;

	keep(a, c, devmemtcp_nic_open(c, "va", &o, &nic));
	devmemtcp_nic_close(nic);
}

/* A client in another network namespace sets up its own interfaces. */
static void test_netns(void **state)
{
	pid_t pid = start_broker(0), child;
	struct answer *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int st;

	child = fork();
	if (child == 0) {
		DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
		struct devmemtcp_ctx *c;

		if (unshare(CLONE_NEWNET) || devmemtcp_ctx_new(&co, &c))
			_exit(9);
		open_other_netns(a, c, NULL);
		_exit(0);
	}
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_int_equal(a->ret, -EXDEV);
	assert_true(strstr(a->msg, "is in another network namespace than the broker: it sets up the interfaces of its own namespace (run a broker there)") != NULL);
	munmap(a, sizeof(*a));
	stop_broker(pid);
}

/* A client whose network namespace the broker cannot read (a test hook
 * fails the read, as for another user's process without CAP_SYS_PTRACE)
 * is refused: it may be in another namespace. */
static void test_netns_unreadable(void **state)
{
	const char *envs[] = { "DEVMEMTCP_TEST_BROKER_NETNS_UNREADABLE=1", NULL };
	struct broker_env be = { envs, 0 };
	pid_t pid = start_broker_with(0, &be);
	struct answer a;
	long p = 0;

	try_open(65534, &(struct open_try){ "va", "dst-port 5201", 1, 0 }, &a);
	assert_int_equal(a.ret, -EACCES);
	assert_int_equal(sscanf(a.msg, "devmemtcp-broker: cannot read the network namespace of pid %ld", &p), 1);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: cannot read the network namespace of pid %ld (%s): Permission denied: refused, since the broker sets up only for processes in its own namespace (it reads /proc/PID/ns/net, which needs CAP_SYS_PTRACE for other users' processes)",
			   p, self_comm());
	stop_broker(pid);
}

static void udmabuf_try(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	uint64_t m[8];
	struct dmt_brk_reply r;
	int fd = raw_connect(), p[2], mfd, n, len;
	char *out = a->msg;

	/* each refusal as "errno:message\n" */
	len = (int)req(m, DMT_BRK_UDMABUF, &(struct dmt_brk_udmabuf){ 0 },
		       sizeof(struct dmt_brk_udmabuf));
	if (pipe(p))
		_exit(5);
	n = 0;
	raw_call(fd, m, (size_t)len, p, 1, &r, NULL);
	n += snprintf(out + n, 1024 - (size_t)n, "%d:%s\n", r.err, r.msg);
	mfd = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, 4096))
		_exit(6);
	raw_call(fd, m, (size_t)len, &mfd, 1, &r, NULL);
	n += snprintf(out + n, 1024 - (size_t)n, "%d:%.150s\n", r.err, r.msg);
	fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	raw_call(fd, m, (size_t)len, &mfd, 1, &r, NULL);
	n += snprintf(out + n, 1024 - (size_t)n, "%d:%.150s\n", r.err, r.msg);
	close(mfd);
	mfd = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, 128 << 20))
		_exit(6);
	fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	raw_call(fd, m, (size_t)len, &mfd, 1, &r, NULL);
	n += snprintf(out + n, 1024 - (size_t)n, "%d:%.150s\n", r.err, r.msg);
	close(mfd);
	close(fd);
}

static void udmabuf_denied(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	uint64_t m[8];
	struct dmt_brk_reply r;
	int fd = raw_connect(), mfd = memfd_create("x", MFD_CLOEXEC);
	size_t len = req(m, DMT_BRK_UDMABUF, &(struct dmt_brk_udmabuf){ 0 },
			 sizeof(struct dmt_brk_udmabuf));

	raw_call(fd, m, len, &mfd, 1, &r, NULL);
	a->ret = r.err;
	snprintf(a->msg, sizeof(a->msg), "%s", r.msg);
}

/* The memfd of a udmabuf is looked at before /dev/udmabuf is asked. */
static void test_udmabuf_checks(void **state)
{
	pid_t pid = start_broker(0);
	struct answer a;

	as_uid(65534, udmabuf_try, NULL, &a);
	assert_true(!strncmp(a.msg, "-9:devmemtcp-broker: the fd sent for a udmabuf is not a memfd (pipe:[", 68));
	assert_non_null(strstr(a.msg,
			       "\n-22:devmemtcp-broker: the memfd must be sealed with F_SEAL_SHRINK and F_SEAL_GROW, not F_SEAL_WRITE (seals 0x0)\n"
			       "-22:devmemtcp-broker: the memfd's pages are not all allocated (0 of 4096 bytes): fallocate it first\n"
			       "-7:devmemtcp-broker: a udmabuf of 134217728 bytes: it must be a multiple of 4096 bytes and at most 67108864 (the policy's udmabuf)\n"));
	as_uid(65532, udmabuf_denied, NULL, &a);
	assert_int_equal(a.ret, -EACCES);
	ctxfix_expect_text(a.msg,
			   "devmemtcp-broker: no rule of %s lets uid 65532 have udmabufs made (udmabuf SIZE, devmemtcp-broker.conf(5))",
			   conf);
	stop_broker(pid);
}

/* A udmabuf request on a connection of its own for a sealed, allocated
 * memfd of size bytes: the reply's errno and message, the dma-buf in
 * *dmabuf. */
static int udmabuf_call(uint64_t size, int *dmabuf, char *msg, size_t len)
{
	uint64_t m[8];
	struct dmt_brk_reply r;
	int fd = raw_connect(), mfd = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t n = req(m, DMT_BRK_UDMABUF, &(struct dmt_brk_udmabuf){ 0 },
		       sizeof(struct dmt_brk_udmabuf));

	*dmabuf = -1;
	if (fd < 0 || mfd < 0 || ftruncate(mfd, (off_t)size) ||
	    fallocate(mfd, 0, 0, (off_t)size) ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) ||
	    raw_call(fd, m, n, &mfd, 1, &r, dmabuf) != sizeof(r))
		_exit(6);
	close(mfd);
	close(fd);
	snprintf(msg, len, "%s", r.msg);
	return r.err;
}

/* uid 65531 (udmabuf 1M): udmabufs through the broker, each on a
 * connection of its own, while it holds them, then after it closed two:
 * a line "errno message" each. */
static void udmabuf_quota(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	int n = *(const int *)arg, fds[8], k = 0;
	size_t off = 0;
	char msg[1024];

	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF, .size = 1 << 20);
	struct devmemtcp_buf *buf = NULL;

	for (int i = 0; i <= n; i++) {
		int err = udmabuf_call(1 << 20, &fds[k], msg, sizeof(msg));

		k += fds[k] >= 0;
		off += (size_t)snprintf(a->msg + off, sizeof(a->msg) - off, "%d %s\n", err, msg);
	}
	/* as the library asks, where it cannot open /dev/udmabuf */
	a->ret = devmemtcp_buf_new(c, &o, &buf);
	snprintf(a->msg2, sizeof(a->msg2), "%s", devmemtcp_ctx_errmsg(c));
	devmemtcp_buf_free(buf);
	close(fds[0]);
	close(fds[1]);
	udmabuf_call(1 << 20, &fds[0], msg, sizeof(msg));
	snprintf(a->msg + off, sizeof(a->msg) - off, "after closing two: %s\n",
		 fds[0] >= 0 ? "made" : msg);
}

/* The udmabufs the broker makes count for their user, whatever the
 * connection, while they live: at most udmabuf-total bytes at once (by
 * default 4 times udmabuf), EDQUOT naming the keyword, and room again
 * once they are closed.  (A test hook makes pipes stand in for them where
 * no /dev/udmabuf is.) */
static void test_udmabuf_quota(void **state)
{
	const char *envs[] = { "DEVMEMTCP_TEST_BROKER_FAKE_UDMABUF=1", NULL };
	char conf2[160], want[1024];
	struct broker_env be = { envs, 0, NULL };
	struct answer a;
	pid_t pid;
	int n;
	FILE *f;

	pid = start_broker_with(0, &be);
	n = 4;
	as_uid(65531, udmabuf_quota, &n, &a);
	t_note("uid 65531 with udmabuf 1M (default total):\n%s", a.msg);
	snprintf(want, sizeof(want),
		 "0 \n0 \n0 \n0 \n"
		 "-122 devmemtcp-broker: uid 65531 has 4 udmabufs alive that the broker made, 4194304 bytes in all: 1048576 bytes more would pass the 4194304 it may have at once (udmabuf-total: by default 4 times udmabuf, of the rule at %s:4)\n"
		 "after closing two: made\n", conf);
	assert_string_equal(a.msg, want);
	/* ERRORS devmemtcp_buf_new EDQUOT */
	assert_int_equal(a.ret, -EDQUOT);
	ctxfix_expect_text(a.msg2,
			   "udmabuf: cannot open /dev/udmabuf (ENOENT) and devmemtcp-broker did not make the buffer: devmemtcp-broker: uid 65531 has 4 udmabufs alive that the broker made, 4194304 bytes in all: 1048576 bytes more would pass the 4194304 it may have at once (udmabuf-total: by default 4 times udmabuf, of the rule at %s:4)",
			   conf);
	stop_broker(pid);

	snprintf(conf2, sizeof(conf2), "%s/quota.conf", dir);
	f = fopen(conf2, "w");
	assert_non_null(f);
	fprintf(f, "allow uid 65531 interface vb udmabuf 1M udmabuf-total 2M\n");
	fclose(f);
	be.conf = conf2;
	pid = start_broker_with(0, &be);
	n = 2;
	as_uid(65531, udmabuf_quota, &n, &a);
	snprintf(want, sizeof(want),
		 "0 \n0 \n"
		 "-122 devmemtcp-broker: uid 65531 has 2 udmabufs alive that the broker made, 2097152 bytes in all: 1048576 bytes more would pass the 2097152 it may have at once (udmabuf-total of the rule at %s:1)\n"
		 "after closing two: made\n", conf2);
	assert_string_equal(a.msg, want);
	stop_broker(pid);
}

static void probe_as(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{

	a->probe.sz = sizeof(a->probe);
	a->ret = devmemtcp_nic_probe(c, "va", NULL, &a->probe);
}

/* devmemtcp probe va: its broker line (msg) and the broker object of
 * --json (msg2). */
static void probe_tool_as(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "%s/tools/devmemtcp probe va | grep '^broker '", TEST_BUILDDIR);
	a->ret = t_capture(a->msg, sizeof(a->msg), cmd);
	snprintf(cmd, sizeof(cmd), "%s/tools/devmemtcp probe --json va | grep -o '\"broker\":{[^}]*}'",
		 TEST_BUILDDIR);
	a->ret |= t_capture(a->msg2, sizeof(a->msg2), cmd);
}

/* Probe says whether setup would go through the broker and what the
 * policy allows. */
static void test_probe(void **state)
{
	pid_t pid = start_broker(0);
	struct answer a;
	char want[512];

	as_uid(65534, probe_as, NULL, &a);
	assert_true(a.ret >= 0);
	assert_int_equal(a.probe.broker, 1);
	assert_int_equal(a.probe.broker_state, 1);
	assert_int_equal(a.probe.broker_allowed, 1);
	assert_int_equal(a.probe.broker_queues, 1);
	assert_int_equal(a.probe.broker_queues_used, 0);
	assert_int_equal(a.probe.broker_tx, 1);
	assert_int_equal(a.probe.broker_udmabuf, 64ull << 20);
	ctxfix_expect_text(a.probe.broker_msg, "flows to ports 5201-5210,6000 (rule at %s:2)", conf);
	for (uint32_t i = 0; i < a.probe.nproblems; i++)
		assert_null(strstr(a.probe.problems[i].what, "CAP_NET_ADMIN"));

	assert_int_equal(a.probe.broker_nqranges, 0);	/* any id */

	/* a rule that names queue ids: the report, probe's text and JSON */
	as_uid(65530, probe_as, NULL, &a);
	assert_int_equal(a.probe.broker_allowed, 1);
	assert_int_equal(a.probe.broker_queues, 4);
	assert_int_equal(a.probe.broker_nqranges, 2);
	assert_int_equal(a.probe.broker_qranges[0][0], 3);
	assert_int_equal(a.probe.broker_qranges[0][1], 3);
	assert_int_equal(a.probe.broker_qranges[1][0], 5);
	assert_int_equal(a.probe.broker_qranges[1][1], 7);
	ctxfix_expect_text(a.probe.broker_msg, "flows to any port (rule at %s:5)", conf);
	as_uid(65530, probe_tool_as, NULL, &a);
	snprintf(want, sizeof(want),
		 "broker         would be used (no CAP_NET_ADMIN); va allowed: 4 queues of ids 3,5-7 (0 in use), flows to any port (rule at %s:5), udmabuf none, bind-tx no\n",
		 conf);
	assert_string_equal(a.msg, want);
	snprintf(want, sizeof(want),
		 "\"broker\":{\"used\":true,\"state\":\"answered\",\"errno\":null,\"allowed\":true,\"queues\":4,\"queues_used\":0,\"tx\":false,\"udmabuf\":0,\"queue_ids\":[[3,3],[5,7]],\"msg\":\"flows to any port (rule at %s:5)\"}\n",
		 conf);
	assert_string_equal(a.msg2, want);
	as_uid(65534, probe_tool_as, NULL, &a);
	snprintf(want, sizeof(want),
		 "broker         would be used (no CAP_NET_ADMIN); va allowed: 1 queue of any id (0 in use), flows to ports 5201-5210,6000 (rule at %s:2), udmabuf up to 64 MiB, bind-tx yes\n",
		 conf);
	assert_string_equal(a.msg, want);
	assert_non_null(strstr(a.msg2, ",\"queue_ids\":[],"));

	as_uid(65532, probe_as, NULL, &a);
	assert_int_equal(a.probe.broker_allowed, 0);
	ctxfix_expect_text(a.probe.broker_msg, "no rule of %s lets uid 65532 use va", conf);
	snprintf(want, sizeof(want),
		 "this process lacks CAP_NET_ADMIN and devmemtcp-broker refuses it va: no rule of %s lets uid 65532 use va",
		 conf);
	assert_non_null(t_probe_problem(&a.probe, want));

	/* root: not needed, but the policy still says what root may do */
	a.probe.sz = sizeof(a.probe);
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &a.probe) >= 0);
	assert_int_equal(a.probe.broker, 0);
	assert_int_equal(a.probe.broker_state, 1);
	stop_broker(pid);

	/* no broker */
	a.probe.sz = sizeof(a.probe);
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &a.probe) >= 0);
	assert_int_equal(a.probe.broker_state, 0);
	ctxfix_expect_text(a.probe.broker_msg, "none installed (no socket at %s)", sock);
}

/* ---- the transport: no broker, a dead one, one that hangs up -------------- */

/* A UNIX seqpacket socket at path: listening, or only bound (what a killed
 * broker leaves: connect is refused). */
static int fake_socket(const char *path, bool listening)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (listening)
		assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_seen++;
}

/*
 * A "broker" of root's that reads one request; its pid.  hang_up: it then
 * hangs up, and while the client waits for the reply interrupts it with
 * SIGUSR1 (caught with SA_RESTART, as an application would: a socket with
 * a receive timeout is not restarted, its recvmsg fails with EINTR).
 * Otherwise it never answers (the test kills it).
 */
static pid_t one_request(int lfd, bool hang_up)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		char m[DMT_BRK_MSG_MAX];
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0 || recv(fd, m, sizeof(m), 0) <= 0)
			_exit(1);
		while (!hang_up)
			pause();
		usleep(50000);
		kill(getppid(), SIGUSR1);
		usleep(50000);
		_exit(0);
	}
	return pid;
}

/* A process that sends this one SIGUSR1 every 20 ms for 10 s; its pid. */
static pid_t signaller(void)
{
	pid_t parent = getpid(), pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 500; i++) {
			usleep(20000);
			kill(parent, SIGUSR1);
		}
		_exit(0);
	}
	return pid;
}

/* A broker of protocol version 1 (the release before the policy answer
 * named queue ids): it refuses one request of a newer library as it
 * did, in a reply of its size; its pid. */
static pid_t old_broker_once(int lfd)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct dmt_brk_reply r = { 0 };
		struct dmt_brk_hdr h;
		char m[DMT_BRK_MSG_MAX];
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0 || recv(fd, m, sizeof(m), 0) < (ssize_t)sizeof(h))
			_exit(1);
		memcpy(&h, m, sizeof(h));
		r.hdr = (struct dmt_brk_hdr){ DMT_BRK_MAGIC, 1, (uint16_t)(h.type | DMT_BRK_REPLY),
					      DMT_BRK_REPLY_V1_SIZE, h.seq };
		r.err = -EPROTONOSUPPORT;
		snprintf(r.msg, sizeof(r.msg),
			 "devmemtcp-broker refused a malformed request: protocol version %u: this broker speaks version 1",
			 h.version);
		_exit(send(fd, &r, DMT_BRK_REPLY_V1_SIZE, 0) != DMT_BRK_REPLY_V1_SIZE);
	}
	return pid;
}

static int open_through(void)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1, .flags = DEVMEMTCP_NIC_BROKER);
	struct devmemtcp_nic *nic = NULL;

	return devmemtcp_nic_open(ctx, "va", &o, &nic);
}

static int bind_through(void)
{
	DEVMEMTCP_OPTS(bind_opts, bo, .broker = true);
	struct devmemtcp_binding *b = NULL;
	struct devmemtcp_buf *buf;
	uint32_t q = 0;
	int mfd, ret;

	assert_int_equal(t_memfd_buf(ctx, 1 << 20, &mfd, &buf), 0);
	ret = devmemtcp_bind_rx(ctx, (int)if_nametoindex("va"), &q, 1, buf, &bo, &b);
	devmemtcp_buf_free(buf);
	close(mfd);
	return ret;
}

/* An open and a bind-rx through the broker at path both fail with err,
 * its name in the message. */
static void expect_unreachable(const char *path, int err, const char *name)
{
	char want[512];

	snprintf(want, sizeof(want),
		 "cannot reach devmemtcp-broker at %s: %s: start it (systemctl start devmemtcp-broker.socket), or run with CAP_NET_ADMIN",
		 path, name);
	assert_int_equal(open_through(), err);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	assert_int_equal(bind_through(), err);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
}

static void test_transport(void **state)
{
	struct devmemtcp_probe probe;
	struct sigaction old_usr1;
	char path[128];
	int lfd, st;
	pid_t pid, spid;
	double t0;

	snprintf(path, sizeof(path), "%s/none.sock", dir);
	setenv("DEVMEMTCP_BROKER_SOCKET", path, 1);
	unlink(path);
	/* ERRORS devmemtcp_nic_open ENOENT */
	/* ERRORS devmemtcp_bind_rx ENOENT */
	expect_unreachable(path, -ENOENT, "ENOENT");

	/* the socket file of a broker that was killed */
	lfd = fake_socket(path, false);
	/* ERRORS devmemtcp_nic_open ECONNREFUSED */
	/* ERRORS devmemtcp_bind_rx ECONNREFUSED */
	expect_unreachable(path, -ECONNREFUSED, "ECONNREFUSED");
	close(lfd);

	/* one that hangs up on the request (exited, killed mid-setup), a
	 * signal arriving meanwhile: the wait goes on, the answer is EPIPE */
	sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = on_usr1, .sa_flags = SA_RESTART },
		  &old_usr1);
	usr1_seen = 0;
	lfd = fake_socket(path, true);
	pid = one_request(lfd, true);
	/* ERRORS devmemtcp_nic_open EPIPE */
	assert_int_equal(open_through(), -EPIPE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp-broker did not answer the open request: EPIPE: it closed the connection (it exited: see its log)");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pid = one_request(lfd, true);
	/* ERRORS devmemtcp_bind_rx EPIPE */
	assert_int_equal(bind_through(), -EPIPE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp-broker did not answer the bind-rx request: EPIPE: it closed the connection (it exited: see its log)");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(usr1_seen, 2);

	/* one that never answers, signals arriving every 20 ms: the reply
	 * timeout (300 ms here) runs from the request, not from the last
	 * signal, and ends the call with ETIMEDOUT; restarted at each signal,
	 * it would end only with the signals, after 10 s (the bound of 5 s
	 * leaves room for valgrind) */
	setenv("DEVMEMTCP_TEST_BROKER_TIMEOUT_MS", "300", 1);
	usr1_seen = 0;
	pid = one_request(lfd, false);
	spid = signaller();
	t0 = t_now();
	/* ERRORS devmemtcp_nic_open ETIMEDOUT */
	assert_int_equal(open_through(), -ETIMEDOUT);
	t0 = t_now() - t0;
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp-broker did not answer the open request: ETIMEDOUT");
	assert_true(t0 >= 0.29 && t0 < 5.0);
	assert_true(usr1_seen >= 5);
	kill(pid, SIGKILL);
	kill(spid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(waitpid(spid, &st, 0), spid);
	unsetenv("DEVMEMTCP_TEST_BROKER_TIMEOUT_MS");
	sigaction(SIGUSR1, &old_usr1, NULL);

	/* a broker of another release: both versions named, and the fix */
	pid = old_broker_once(lfd);
	/* ERRORS devmemtcp_nic_open EPROTONOSUPPORT */
	assert_int_equal(open_through(), -EPROTONOSUPPORT);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp-broker speaks protocol version 1, this libdevmemtcp version 2: run the devmemtcp-broker of this libdevmemtcp's release (restart it after an upgrade)");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pid = old_broker_once(lfd);
	probe.sz = sizeof(probe);
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &probe) >= 0);
	assert_int_equal(probe.broker_state, -EPROTONOSUPPORT);
	assert_string_equal(probe.broker_msg,
			    "devmemtcp-broker speaks protocol version 1, this libdevmemtcp version 2: run the devmemtcp-broker of this libdevmemtcp's release (restart it after an upgrade)");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(lfd);
	unlink(path);
	setenv("DEVMEMTCP_BROKER_SOCKET", sock, 1);
}

/* ---- the NIC nearest a GPU without CAP_NET_ADMIN --------------------------- */

/* fn of as_uid: nic_rank of the PCI address arg, or near_gpu of CUDA
 * device 0 when arg is NULL. */
static void rank_as(struct answer *a, struct devmemtcp_ctx *c, const void *arg)
{
	keep(a, c, arg ? devmemtcp_nic_rank(c, arg, a->ranks, 8)
		       : devmemtcp_nic_near_gpu(c, 0, a->ranks, 8));
}

/* The same answer as root's: the count and the ranks, or the error and
 * its message. */
static void same_as_root(const struct answer *a, int ret, const struct devmemtcp_nic_rank *r)
{
	assert_int_equal(a->ret, ret);
	if (ret < 0) {
		assert_string_equal(a->msg, devmemtcp_ctx_errmsg(ctx));
		return;
	}
	for (int i = 0; i < ret && i < 8; i++) {
		assert_string_equal(a->ranks[i].ifname, r[i].ifname);
		assert_string_equal(a->ranks[i].pci, r[i].pci);
		assert_int_equal(a->ranks[i].distance, r[i].distance);
		assert_int_equal(a->ranks[i].numa_node, r[i].numa_node);
	}
}

/*
 * devmemtcp_nic_rank and devmemtcp_nic_near_gpu read sysfs (and CUDA for
 * the GPU's address) and nothing a broker provides: a process without
 * CAP_NET_ADMIN, whose context goes through the broker, gets root's
 * answer.  The tree: the stand-in CUDA driver's device 0 at 0000:1b:00.0
 * ($DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID)
 * below a PCIe switch with a NIC, one NIC on its NUMA node, one on the
 * other, lo.
 */
static void test_rank_unprivileged(void **state)
{
	const char *sw = "pci0000:18/0000:18:01.0/0000:19:00.0";
	struct devmemtcp_nic_rank mine[8];
	char root[128], chain[128];
	struct answer a;
	pid_t pid;
	int n;

	(void)state;
	snprintf(root, sizeof(root), "%s/sysfs", dir);
	snprintf(chain, sizeof(chain), "%s/0000:1a:00.0/0000:1b:00.0", sw);
	assert_int_equal(sysfix_pci(root, chain, 0), 0);
	snprintf(chain, sizeof(chain), "%s/0000:1a:01.0/0000:1c:00.0", sw);
	assert_int_equal(sysfix_pci(root, chain, 0), 0);
	assert_int_equal(sysfix_net(root, "ibp28s0", chain), 0);
	assert_int_equal(sysfix_pci(root, "pci0000:00/0000:00:03.0/0000:03:00.0", 0), 0);
	assert_int_equal(sysfix_net(root, "ens3", "pci0000:00/0000:00:03.0/0000:03:00.0"), 0);
	assert_int_equal(sysfix_pci(root, "pci0000:80/0000:80:03.0/0000:81:00.0", 1), 0);
	assert_int_equal(sysfix_net(root, "ens9", "pci0000:80/0000:80:03.0/0000:81:00.0"), 0);
	assert_int_equal(sysfix_net(root, "lo", NULL), 0);
	t_run("chmod -R a+rX %s", root);
	setenv("DEVMEMTCP_TEST_SYSFS", root, 1);
	setenv("DEVMEMTCP_LIBCUDA", TEST_BUILDDIR "/tests/lib/fakecuda/libfakecuda.so", 1);
	/* as the driver spells it (upper-case hex) */
	setenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID", "0000:1B:00.0", 1);
	pid = start_broker(0);

	n = devmemtcp_nic_rank(ctx, "0000:1b:00.0", mine, 8);
	assert_int_equal(n, 3);
	assert_string_equal(mine[0].ifname, "ibp28s0");
	assert_int_equal(mine[0].distance, DEVMEMTCP_PCI_SAME_SWITCH);
	assert_string_equal(mine[1].ifname, "ens3");
	assert_int_equal(mine[1].distance, DEVMEMTCP_PCI_SAME_NUMA);
	assert_string_equal(mine[2].ifname, "ens9");
	assert_int_equal(mine[2].distance, DEVMEMTCP_PCI_OTHER);
	as_uid(65534, rank_as, "0000:1b:00.0", &a);
	same_as_root(&a, n, mine);

	/* through CUDA: the stand-in's device 0 is at 0000:1b:00.0 */
	memset(mine, 0, sizeof(mine));
	n = devmemtcp_nic_near_gpu(ctx, 0, mine, 8);
	t_note("near_gpu(0) as root: %d (%s)", n, n < 0 ? devmemtcp_ctx_errmsg(ctx) : mine[0].ifname);
	assert_int_equal(n, 3);
	assert_string_equal(mine[0].ifname, "ibp28s0");
	as_uid(65534, rank_as, NULL, &a);
	same_as_root(&a, n, mine);

	/* a refusal is the same too */
	n = devmemtcp_nic_rank(ctx, "0000:99:00.0", mine, 8);
	assert_int_equal(n, -ENODEV);
	as_uid(65534, rank_as, "0000:99:00.0", &a);
	same_as_root(&a, n, mine);

	stop_broker(pid);
	unsetenv("DEVMEMTCP_TEST_SYSFS");
	unsetenv("DEVMEMTCP_LIBCUDA");
	unsetenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID");
	t_run("rm -rf %s", root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_idle_exit),
		cmocka_unit_test(test_socket_mode),
		cmocka_unit_test(test_out_of_fds),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_other_ids),
		cmocka_unit_test(test_bind_not_owned),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_netns),
		cmocka_unit_test(test_netns_unreadable),
		cmocka_unit_test(test_udmabuf_checks),
		cmocka_unit_test(test_udmabuf_quota),
		cmocka_unit_test(test_lingering_fds),
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_transport),
		cmocka_unit_test(test_rank_unprivileged),
	};

	T_TRY(host_netns(NULL));
	return cmocka_run_group_tests_name("host-broker", tests, setup, teardown);
}
