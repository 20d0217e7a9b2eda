// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp-broker (devmemtcp-broker(8)): devmem NIC setup and binding
 * for processes without CAP_NET_ADMIN.  This file owns the program: its
 * options, the policy file (read, checked, parsed, names resolved), the
 * listening socket (systemd's, or its own), who each client is (the
 * socket's credentials and /proc), recovery of what dead owners left at
 * start, the event loop and the idle exit.  The clients' requests are
 * session.c's, what they do to the system nicops.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"	/* DMT_TEST_HOOKS */
#include "nicops.h"

#define SETTLE_MS 250		/* how often lingering handles and udmabufs are looked at */
#define MAX_IDLE_S 86400
#define FD_RESERVE 8		/* descriptors kept free for the clients it has */
#define ACCEPT_PAUSE_MS 100	/* out of descriptors: not accepting for so long */

struct options {
	const char *conf;
	const char *socket;
	int idle_s;		/* 0: never */
	bool check;
	int verbose;
};

static bool to_journal;

static void say(int level, const char *msg)
{
	if (to_journal)
		fprintf(stderr, "<%d>%s\n", level, msg);
	else
		fprintf(stderr, "devmemtcp-broker: %s\n", msg);
}

static void log_line(struct brk *b, int level, const char *msg)
{
	say(level, msg);
}

static void lib_log(void *user, int level, const char *msg)
{
	say(level, msg);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: devmemtcp-broker [--config FILE] [--socket PATH] [--idle-exit SECONDS]\n"
		   "                        [--check] [--verbose]\n\n"
		   "Set up devmem TCP receive (NIC queues, flows, bind-rx) and bind-tx for\n"
		   "processes without CAP_NET_ADMIN, as the policy FILE (default %s,\n"
		   "devmemtcp-broker.conf(5)) allows, and hand each its binding's netlink socket.\n"
		   "Listens on PATH (default %s; the socket systemd passes when\n"
		   "socket-activated) and exits after SECONDS (default 60, 0 never) with no client\n"
		   "and nothing held.  --check parses FILE, prints its rules and exits.\n",
		   DMT_BRK_CONF, DMT_BRK_SOCKET);
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "idle-exit", required_argument, NULL, 'i' },
		{ "check", no_argument, NULL, 'k' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int c;

	*o = (struct options){ DMT_BRK_CONF, DMT_BRK_SOCKET, 60, false, 0 };
	while ((c = getopt_long(argc, argv, "c:s:i:kvh", lo, NULL)) != -1) {
		switch (c) {
		case 'c': o->conf = optarg; break;
		case 's': o->socket = optarg; break;
		case 'k': o->check = true; break;
		case 'v': o->verbose++; break;
		case 'h': usage(stdout); exit(0);
		case 'i':
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0 || v > MAX_IDLE_S) {
				fprintf(stderr, "devmemtcp-broker: --idle-exit: \"%s\" is not 0 to %d seconds\n",
					optarg, MAX_IDLE_S);
				return 2;
			}
			o->idle_s = (int)v;
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	return 0;
}

/* ---- the policy ------------------------------------------------------- */

static int lookup(bool group, const char *name, uint32_t *id)
{
	char buf[4096];
	struct passwd pw, *pp = NULL;
	struct group gr, *gp = NULL;
	int ret;

	if (group) {
		ret = getgrnam_r(name, &gr, buf, sizeof(buf), &gp);
		if (!ret && gp)
			*id = gp->gr_gid;
	} else {
		ret = getpwnam_r(name, &pw, buf, sizeof(buf), &pp);
		if (!ret && pp)
			*id = pp->pw_uid;
	}
	if (ret)
		return -ret;
	return (group ? !!gp : !!pp) ? 0 : -ENOENT;
}

/* The file, as root's alone: regular, not writable by others, bounded. */
static int read_conf(const char *path, char **text, size_t *len)
{
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > DMT_POL_FILE_MAX ||
	    (st.st_uid != 0 && st.st_uid != geteuid()) || st.st_mode & 022) {
		fprintf(stderr, "devmemtcp-broker: %s must be a regular file of root's that others cannot write, of at most %d bytes\n",
			path, DMT_POL_FILE_MAX);
		close(fd);
		return -EPERM;
	}
	*text = malloc((size_t)st.st_size + 1);
	n = *text ? read(fd, *text, (size_t)st.st_size + 1) : -1;
	close(fd);
	if (n < 0 || n > st.st_size) {
		free(*text);
		return n < 0 ? -EIO : -EFBIG;
	}
	*len = (size_t)n;
	return 0;
}

static int load_policy(const char *path, struct dmt_policy *p)
{
	unsigned int line = 0;
	char *text = NULL, why[256];
	size_t len = 0;
	int ret = read_conf(path, &text, &len);

	memset(p, 0, sizeof(*p));
	if (ret == -ENOENT) {
		fprintf(stderr, "devmemtcp-broker: no policy file %s: every request is refused (devmemtcp-broker.conf(5))\n",
			path);
		return 0;
	}
	if (ret) {
		if (ret != -EPERM)
			fprintf(stderr, "devmemtcp-broker: cannot read %s: %s\n", path, strerror(-ret));
		return ret;
	}
	ret = dmt_policy_parse(text, len, p, &line, why, sizeof(why));
	free(text);
	if (!ret)
		ret = dmt_policy_resolve(p, lookup, &line, why, sizeof(why));
	if (ret) {
		fprintf(stderr, "devmemtcp-broker: %s:%u: %s\n", path, line, why);
		dmt_policy_free(p);
	}
	return ret;
}

/* ---- the socket -------------------------------------------------------- */

/* The socket systemd passed (LISTEN_FDS), or -1. */
static int activated_socket(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	int type = 0, listening = 0;
	socklen_t len = sizeof(int);

	if (!pid || !fds || atol(pid) != (long)getpid() || strcmp(fds, "1"))
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_SEQPACKET ||
	    getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) || !listening) {
		fprintf(stderr, "devmemtcp-broker: the socket systemd passed is not a listening SOCK_SEQPACKET socket (ListenSequentialPacket=)\n");
		return -2;
	}
	fcntl(3, F_SETFD, FD_CLOEXEC);
	fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK);
	return 3;
}

/* A stale socket file of a broker that is gone goes; a live one stays. */
static int clear_path(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, live;

	if (lstat(sa->sun_path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	live = fd >= 0 && !connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	if (fd >= 0)
		close(fd);
	if (live)
		return -EADDRINUSE;
	return unlink(sa->sun_path) ? -errno : 0;
}

#if DMT_TEST_HOOKS
/* Tests: hold the start right after the socket has its name, until a
 * byte comes through the FIFO $DEVMEMTCP_TEST_BROKER_BOUND_FIFO. */
static void hook_bound(void)
{
	const char *fifo = dmt_serve_hook_env("DEVMEMTCP_TEST_BROKER_BOUND_FIFO");
	char c;
	int fd;

	if (!fifo || !*fifo)
		return;
	fd = open(fifo, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (read(fd, &c, 1) < 0)
		c = 0;
	close(fd);
}
#else
static void hook_bound(void)
{
}
#endif

static int own_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "devmemtcp-broker: %s: path too long\n", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ret = clear_path(&sa);
	if (ret) {
		fprintf(stderr, "devmemtcp-broker: %s: %s\n", path,
			ret == -EADDRINUSE ? "another broker listens there"
			: ret == -EEXIST   ? "exists and is not a socket"
					   : strerror(-ret));
		return -1;
	}
	/* Anyone may connect (the policy decides): the socket's mode is set
	 * on the socket itself before bind gives it a name, which takes it
	 * minus the umask (cleared for the call: no thread runs yet).  No
	 * chmod of the path, which a symbolic link swapped in after bind
	 * would redirect. */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ret = fd < 0 || fchmod(fd, 0666);
	if (!ret) {
		mode_t old = umask(0);

		ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		umask(old);
	}
	if (!ret)
		hook_bound();
	if (ret || listen(fd, 64)) {
		fprintf(stderr, "devmemtcp-broker: listening on %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* ---- who connected ----------------------------------------------------- */

/* The effective uid of pid (/proc/PID/status), or -1. */
static long proc_euid(pid_t pid)
{
	char path[64], line[256];
	unsigned long r, e;
	long uid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			uid = (long)e;
			break;
		}
	fclose(f);
	return uid;
}

static void proc_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	snprintf(comm, len, "?");
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, (int)len, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
}

/* Another network namespace than ours (1), the same (0), unknown (-errno:
 * reading another user's ns link needs CAP_SYS_PTRACE). */
static int other_netns(pid_t pid)
{
	char path[64], theirs[64] = "", ours[64] = "";
	ssize_t a, b;
	int err;

	snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
	a = readlink(path, theirs, sizeof(theirs) - 1);
#if DMT_TEST_HOOKS
	/* tests: as without CAP_SYS_PTRACE for another user's process */
	if (dmt_serve_hook_env("DEVMEMTCP_TEST_BROKER_NETNS_UNREADABLE")) {
		a = -1;
		errno = EACCES;
	}
#endif
	err = a <= 0 ? (a < 0 ? errno : EIO) : 0;
	b = readlink("/proc/self/ns/net", ours, sizeof(ours) - 1);
	if (!err && b <= 0)
		err = b < 0 ? errno : EIO;
	if (err)
		return -err;
	return strcmp(theirs, ours) != 0;
}

static void refuse(struct brk_peer *p, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct brk_peer *p, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	p->refused = code;
}

/* The process at the other end: its credentials as the kernel recorded
 * them at connect, its start time, checked to be that user's (a pid
 * reused in between is refused).  A peer that may do nothing hears why
 * on its first request. */
static int peer_of(int fd, struct brk_peer *p)
{
	gid_t groups[BRK_MAX_GROUPS - 1];
	socklen_t len = sizeof(struct ucred);
	struct ucred cr;
	uint64_t again;
	bool zombie;
	int ns;

	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
		p->uid = UINT32_MAX;	/* nobody's: counted apart */
		snprintf(p->comm, sizeof(p->comm), "?");
		refuse(p, -EPROTO, "SO_PEERCRED: %s", strerror(errno));
		return 0;
	}
	p->pid = cr.pid;
	p->uid = cr.uid;
	p->gid = cr.gid;
	p->groups[p->ngroups++] = cr.gid;
	len = sizeof(groups);
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len))
		for (size_t i = 0; i < len / sizeof(gid_t); i++)
			p->groups[p->ngroups++] = groups[i];
	proc_comm(cr.pid, p->comm, sizeof(p->comm));
	if (dmt_serve_proc_start(cr.pid, &p->start, &zombie) || zombie)
		refuse(p, -ESRCH, "pid %ld has exited", (long)cr.pid);
	else if (proc_euid(cr.pid) != (long)cr.uid ||
		 dmt_serve_proc_start(cr.pid, &again, &zombie) || again != p->start)
		refuse(p, -ESRCH, "pid %ld is no longer the process of uid %u that connected",
		       (long)cr.pid, cr.uid);
	else if ((ns = other_netns(cr.pid)) == 1)
		refuse(p, -EXDEV,
		       "pid %ld (%s) is in another network namespace than the broker: it sets up the interfaces of its own namespace (run a broker there)",
		       (long)cr.pid, p->comm);
	else if (ns < 0)	/* it may be in another: not known is not the same */
		refuse(p, -EACCES,
		       "cannot read the network namespace of pid %ld (%s): %s: refused, since the broker sets up only for processes in its own namespace (it reads /proc/PID/ns/net, which needs CAP_SYS_PTRACE for other users' processes)",
		       (long)cr.pid, p->comm, strerror(-ns));
	return 0;
}

/* ---- start and loop ---------------------------------------------------- */

/* Descriptors: as many as the hard limit allows (poll(2), not select(2),
 * so any number is fine); each client holds one, more while it sends. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* What owners that died before this start left (and, after a broker that
 * was killed, the setups it was making): devmemtcp restore on every
 * interface with files in the run directory.  A setup whose owner lives
 * stays its own; the handles of this broker are numbered above every
 * owner's file, so none of its files is taken for another. */
static void recover_dead(struct devmemtcp_ctx *ctx)
{
	char **names = NULL, done[64][IF_NAMESIZE];
	size_t n = 0, ndone = 0;
	unsigned long maxh = 0;

	if (dmt_serve_run_dir_names(&names, &n) < 0 && !n)
		return;
	for (size_t i = 0; i < n; i++) {
		char ifname[IF_NAMESIZE] = "";
		const char *dot = strchr(names[i], '.');
		bool seen = false;
		int ret;

		if (dot && dot - names[i] < IF_NAMESIZE &&
		    (!strcmp(dot, ".base") || !strncmp(dot, ".owner.", 7)))
			memcpy(ifname, names[i], (size_t)(dot - names[i]));
		if (ifname[0] && !strncmp(dot, ".owner.", 7)) {
			unsigned long h = strtoul(strrchr(names[i], '.') + 1, NULL, 10);

			if (h > maxh && h <= UINT32_MAX)
				maxh = h;
		}
		for (size_t k = 0; k < ndone && !seen; k++)
			seen = !strcmp(done[k], ifname);
		free(names[i]);
		if (!ifname[0] || seen || ndone == 64)
			continue;
		memcpy(done[ndone++], ifname, IF_NAMESIZE);
		ret = devmemtcp_nic_recover(ctx, ifname, NULL);
		if (ret > 0)
			fprintf(stderr, "devmemtcp-broker: %s: undid what owners that died left\n", ifname);
		else if (ret < 0)
			fprintf(stderr, "devmemtcp-broker: %s: %s\n", ifname, devmemtcp_ctx_errmsg(ctx));
	}
	free(names);
	dmt_serve_handle_base((unsigned int)maxh);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Until when (now_s()) the listening socket is left alone: out of
 * descriptors, accept would fail at once, and the socket stays readable,
 * so polling it would spin.  A client that goes frees one: then sooner. */
static double accept_paused_until;

/* Room for one more client: descriptors are taken lowest first, so when
 * the lowest free one is within FD_RESERVE of the limit, at most that
 * many are left, kept for serving the clients the broker has (their
 * /proc files, the descriptors their requests carry and get). */
static bool fd_room(int lfd)
{
	struct rlimit rl;
	int probe = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
	bool room = probe >= 0 && !getrlimit(RLIMIT_NOFILE, &rl) &&
		    (rl.rlim_cur == RLIM_INFINITY || (rlim_t)probe + FD_RESERVE < rl.rlim_cur);

	if (probe >= 0)
		close(probe);
	return room;
}

static void pause_accept(struct brk *b, int err)
{
	struct rlimit rl = { 0, 0 };

	getrlimit(RLIMIT_NOFILE, &rl);
	if (!accept_paused_until)
		brk_log(b, DEVMEMTCP_LOG_WARN,
			"%s (RLIMIT_NOFILE %llu): not accepting connections until clients go",
			err ? strerror(err) : "almost out of file descriptors",
			(unsigned long long)rl.rlim_cur);
	accept_paused_until = now_s() + ACCEPT_PAUSE_MS / 1000.0;
}

static void accept_all(struct brk *b, int lfd)
{
	for (int i = 0; i < 16; i++) {
		struct brk_peer peer;
		int fd;

		if (!fd_room(lfd)) {
			pause_accept(b, 0);
			return;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				pause_accept(b, errno);
			return;
		}
		accept_paused_until = 0;
		peer_of(fd, &peer);
		brk_accept(b, fd, &peer, NULL);	/* the session's, even refused */
	}
}

/* ---- the helpers ------------------------------------------------------- */

/* BRK_WORKERS threads that run the session's jobs (session.h): the loop
 * hands over the jobs that may start (todo), a helper runs one and puts
 * it on done, and the eventfd tells the loop, which finishes it. */
struct pool {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct brk_job *todo, **todo_tail;
	struct brk_job *done;		/* last first */
	int efd;
	bool stop;
	const struct brk *b;
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	uint64_t one = 1;

	for (;;) {
		struct brk_job *j;

		pthread_mutex_lock(&p->lock);
		while (!p->todo && !p->stop)
			pthread_cond_wait(&p->more, &p->lock);
		if (p->stop) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		j = p->todo;
		p->todo = j->next;
		if (!p->todo)
			p->todo_tail = &p->todo;
		pthread_mutex_unlock(&p->lock);
		brk_job_run(p->b, j);
		pthread_mutex_lock(&p->lock);
		j->next = p->done;
		p->done = j;
		pthread_mutex_unlock(&p->lock);
		if (write(p->efd, &one, sizeof(one)) < 0)
			continue;	/* the counter is full: the loop wakes anyway */
	}
}

static int pool_start(struct pool *p, const struct brk *b)
{
	pthread_attr_t attr;
	int n = 0;

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->more, NULL);
	p->todo_tail = &p->todo;
	p->b = b;
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->efd < 0)
		return -errno;
	/* detached: one that sleeps in a close at exit is not waited for */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < BRK_WORKERS; i++) {
		pthread_t t;

		n += !pthread_create(&t, &attr, worker, p);
	}
	pthread_attr_destroy(&attr);
	return n ? 0 : -EAGAIN;
}

/* Hand the jobs that may start to the helpers. */
static void pool_feed(struct pool *p, struct brk *b)
{
	struct brk_job *j;

	while ((j = brk_job_next(b))) {
		pthread_mutex_lock(&p->lock);
		j->next = NULL;
		*p->todo_tail = j;
		p->todo_tail = &j->next;
		pthread_cond_signal(&p->more);
		pthread_mutex_unlock(&p->lock);
	}
}

/* Finish the jobs the helpers are done with, in the order they ended. */
static void pool_reap(struct pool *p, struct brk *b)
{
	struct brk_job *j, *fifo = NULL;
	uint64_t v;

	if (read(p->efd, &v, sizeof(v)) < 0)
		v = 0;
	pthread_mutex_lock(&p->lock);
	j = p->done;
	p->done = NULL;
	pthread_mutex_unlock(&p->lock);
	while (j) {
		struct brk_job *next = j->next;

		j->next = fifo;
		fifo = j;
		j = next;
	}
	while ((j = fifo)) {
		fifo = j->next;
		brk_job_done(b, j);
	}
}

/* Exit: no more jobs are taken (those waiting stay on the list, their
 * fds go with the process); the idle helpers end, one that sleeps in a
 * close ends with the process. */
static void pool_stop(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->more);
	pthread_mutex_unlock(&p->lock);
}

#if DMT_TEST_HOOKS
/* Tests: while the file $DEVMEMTCP_TEST_BROKER_HOLD exists, the loop
 * reads no request (a client's descriptors in flight stay there until
 * the test has done what it must first). */
static void hook_hold(void)
{
	const char *path = dmt_serve_hook_env("DEVMEMTCP_TEST_BROKER_HOLD");

	while (path && *path && access(path, F_OK) == 0)
		usleep(1000);
}
#else
static void hook_hold(void)
{
}
#endif

/* One round: wait, then serve whatever is ready.  false: a signal. */
static bool round_once(struct brk *b, struct pool *pool, int sfd, int lfd, int timeout_ms)
{
	struct pollfd pfd[3 + BRK_MAX_CLIENTS];
	struct brk_client *who[3 + BRK_MAX_CLIENTS];
	double paused = accept_paused_until - now_s();
	nfds_t n = 3;

	pfd[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	/* paused: not polled (a negative fd), looked at again after it */
	pfd[1] = (struct pollfd){ .fd = paused > 0 ? -1 : lfd, .events = POLLIN };
	pfd[2] = (struct pollfd){ .fd = pool->efd, .events = POLLIN };
	if (paused > 0 && (timeout_ms < 0 || paused * 1000 + 1 < timeout_ms))
		timeout_ms = (int)(paused * 1000) + 1;
	/* a client whose request is under way, or whose uid has as much
	 * under way as it may, is not read until that is done */
	for (struct brk_client *c = b->clients; c && n < sizeof(pfd) / sizeof(pfd[0]);
	     c = c->next) {
		if (!brk_readable(b, c))
			continue;
		who[n] = c;
		pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	}
	if (poll(pfd, n, timeout_ms) < 0)
		return errno == EINTR;
	if (pfd[0].revents)
		return false;
	hook_hold();
	for (nfds_t i = 3; i < n; i++) {
		if (!pfd[i].revents)
			continue;
		if (!(pfd[i].revents & POLLIN) || brk_serve(b, who[i]) < 0) {
			brk_drop(b, who[i]);
			accept_paused_until = 0;	/* a descriptor is free */
		}
	}
	if (pfd[2].revents & POLLIN)
		pool_reap(pool, b);
	if (pfd[1].revents & POLLIN || (paused > 0 && now_s() >= accept_paused_until))
		accept_all(b, lfd);
	pool_feed(pool, b);
	return true;
}

/* Lingering handles and udmabufs made: looked at every SETTLE_MS. */
static uint32_t lingering(const struct brk *b)
{
	uint32_t n = b->nbufs;

	for (const struct brk_handle *h = b->handles; h; h = h->next)
		n += !h->client;
	return n;
}

/* Until a signal, or idle_s seconds (0: never) with no client connected
 * and no handle held. */
static void serve(struct brk *b, struct pool *pool, int sfd, int lfd, int idle_s)
{
	double idle_since = now_s(), settled = idle_since;

	for (;;) {
		uint32_t linger = lingering(b);
		double now = now_s();
		bool busy;
		int timeout = linger ? SETTLE_MS : -1;

		if (brk_idle(b) && idle_s) {
			int left = (int)((idle_since + idle_s - now) * 1000) + 1;

			if (left <= 0) {
				brk_log(b, DEVMEMTCP_LOG_INFO, "idle for %d s: exiting", idle_s);
				return;
			}
			timeout = timeout < 0 || left < timeout ? left : timeout;
		}
		busy = !brk_idle(b);
		if (!round_once(b, pool, sfd, lfd, timeout)) {
			brk_log(b, DEVMEMTCP_LOG_INFO, "signalled: exiting");
			return;
		}
		now = now_s();
		if (linger && now - settled >= SETTLE_MS / 1000.0) {
			brk_settle(b);
			settled = now;
		}
		if (busy || !brk_idle(b))
			idle_since = now;
	}
}

/* Exit: the requests helpers are carrying out (NIC changes) finish and
 * are answered; nothing new starts. */
static void drain(struct brk *b, struct pool *pool)
{
	while (b->recv_running) {
		struct pollfd pfd = { .fd = pool->efd, .events = POLLIN };

		if (poll(&pfd, 1, 1000) > 0)
			pool_reap(pool, b);
	}
	pool_stop(pool);
}

int main(int argc, char **argv)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = lib_log);
	struct devmemtcp_ctx *ctx = NULL;
	struct brk_ops ops = brk_nic_ops;
	struct dmt_policy policy;
	/* static: the helpers use it until the process ends */
	static struct pool pool;
	struct options o;
	sigset_t sigs;
	int lfd, sfd, ret;
	bool own;
	struct brk b;

	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret;
	to_journal = secure_getenv("JOURNAL_STREAM") != NULL;
	raise_nofile();
	if (load_policy(o.conf, &policy))
		return 1;
	if (o.check) {
		char *text = NULL;
		size_t len;

		ret = dmt_policy_format(&policy, &text, &len);
		if (!ret)
			fputs(text, stdout);
		/* a comment: the output stays a policy file */
		if (!ret && !policy.n)
			printf("# %s has no rules: the broker refuses every request\n", o.conf);
		free(text);
		dmt_policy_free(&policy);
		return ret ? 1 : 0;
	}
	if (geteuid() != 0 || !dmt_cap_net_admin()) {
		fprintf(stderr, "devmemtcp-broker: runs as root with CAP_NET_ADMIN (it changes NICs and uses root's run directory %s)\n",
			dmt_serve_run_dir());
		dmt_policy_free(&policy);
		return 1;
	}
	co.log_level = o.verbose ? DEVMEMTCP_LOG_INFO : DEVMEMTCP_LOG_WARN;
	if (devmemtcp_ctx_new(&co, &ctx)) {
		dmt_policy_free(&policy);
		return 1;
	}
	/* blocked before the socket exists: a SIGTERM from whoever saw it
	 * appear ends the loop, not the process half-way */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	lfd = activated_socket();
	own = lfd == -1;
	if (own)
		lfd = own_socket(o.socket);
	if (lfd < 0 || sfd < 0) {
		ret = 1;
		goto out;
	}
	recover_dead(ctx);
	ops.log = log_line;
	brk_init(&b, &ops, ctx, &policy, o.conf);
	ret = pool_start(&pool, &b);
	if (ret) {
		fprintf(stderr, "devmemtcp-broker: its helper threads: %s\n", strerror(-ret));
		ret = 1;
		goto out;
	}
	b.log_level = o.verbose > 1 ? DEVMEMTCP_LOG_DEBUG : DEVMEMTCP_LOG_INFO;
	brk_log(&b, DEVMEMTCP_LOG_INFO, "listening on %s with %zu rules from %s%s",
		own ? o.socket : "the socket systemd passed", policy.n, o.conf,
		o.idle_s ? "" : ", no idle exit");
	serve(&b, &pool, sfd, lfd, o.idle_s);
	drain(&b, &pool);
	brk_fini(&b);
	ret = 0;
out:
	if (sfd >= 0)
		close(sfd);
	/* the listening socket is not closed here: connections still in
	 * its backlog may hold a client's fds, whose release at a close
	 * could sleep; the exit releases them without lingering */
	if (own && lfd >= 0)
		unlink(o.socket);
	devmemtcp_ctx_free(ctx);
	dmt_policy_free(&policy);
	return ret;
}
