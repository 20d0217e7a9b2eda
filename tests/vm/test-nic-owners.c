// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-owners IFACE orders|kill|race|threads|fork|thread|stale: many
 * owners of the receiver's simulated NIC (dsim1), every payload byte
 * validated.
 *
 * orders   4 processes, each with its own queues and flow, each receives
 *          64 MiB, started and stopped in random orders; no payload byte
 *          arrives as ordinary data while the others come and go (the
 *          longest wait for data is printed); the NIC is byte-identical to
 *          the start after the last one closes (full ethtool dump).
 * kill     SIGKILL one of 4 owners mid-transfer: the other three finish
 *          validated; its rule and RSS context stay until the next close of
 *          another owner, which removes them; the end state is the start.
 * race     100 rounds of two processes opening at the same instant (a test
 *          delay inside the critical section makes them interleave): the
 *          rules and the RSS table are exactly what the owners' union needs
 *          (no lost update); every tenth round both ask for the same queue
 *          and one gets EBUSY naming the other; meanwhile a third owner
 *          receives without a linear byte or a stall over a second.
 * threads  8 handles in one process, from 8 threads, each receiving on its
 *          own queue.
 * fork     an owner bound to a udmabuf forks a child that keeps the
 *          binding's netlink socket, and exits: while the child holds the
 *          binding, another owner's open and close leave the gone owner's
 *          rule and RSS context, and the default RSS table (read with
 *          SIOCETHTOOL) never points at its queues; probe says why; once
 *          the child exits, a recover cleans up and the NIC is as before.
 * thread   the same with an owner whose main thread calls pthread_exit()
 *          while another thread keeps every descriptor (/proc shows Z):
 *          that owner is alive.
 * stale    restore --all undoes a live handle's setup and a new owner puts
 *          an identical rule at the same location: the stale handle's
 *          close leaves that rule.
 *
 * SEED=N repeats the random orders of a run (it prints its seed); ROUNDS=N
 * runs fewer race rounds while debugging.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness-nic.h"
#include "pattern.h"

#define OWNERS 4

static struct devmemtcp_ctx *ctx;
static const char *ifname;

/* What an owner process tells the test, one message per write. */
struct report {
	char kind;		/* 'S' set up, 'E' open failed, 'M' mid-transfer,
				 * 'R' received, 'C' closed */
	int err;
	uint32_t nq, q[2], ctx_id;
	uint64_t rt, io;	/* setup netlink round trips, ioctls */
	uint32_t binding;	/* survivors: the binding id ... */
	pid_t keeper;		/* ... and the child that keeps it (fork) */
	struct nic_rx_result rx;
	char msg[512];
};

struct owner {
	pid_t pid;
	int port;
	int cmd;		/* write: commands to the owner */
	int rep;		/* read: its reports */
	struct vm_sender *snd;
	struct report setup;
};

static void tell(int fd, const struct report *r)
{
	(void)!write(fd, r, sizeof(*r));
}

static int hear(struct owner *o, char kind, struct report *r)
{
	T_CHECK(read(o->rep, r, sizeof(*r)) == (ssize_t)sizeof(*r),
		"owner on port %d said nothing", o->port);
	T_CHECK(r->kind == kind, "owner on port %d: '%c' not '%c': %s", o->port,
		r->kind, kind, r->msg);
	return 0;
}

static void say_mid(void *arg)
{
	struct report m = { .kind = 'M' };

	tell(*(int *)arg, &m);
}

/* Wait for a connection on l or a command on cmd: true for the command. */
static bool next_is_command(int l, int cmd)
{
	fd_set s;

	FD_ZERO(&s);
	FD_SET(l, &s);
	FD_SET(cmd, &s);
	if (select((l > cmd ? l : cmd) + 1, &s, NULL, NULL, NULL) < 0)
		return true;
	return FD_ISSET(cmd, &s);
}

/*
 * An owner process: open IFACE with nq queues (queue: that one) and a flow
 * to port, bound to a 32 MiB udmabuf unless no_buf (a racer, which opens
 * when the command pipe says 'o'); say 'S'; unless no_buf receive
 * connections (each reported 'R') until the command pipe says 'c' (or,
 * with one, after one), then close and say 'C'.
 */
static void owner_main(int port, uint32_t nq, const uint32_t *queue, bool no_buf,
		       int cmd, int rep, int connections)
{
	struct report r = { .kind = 'S' };
	struct devmemtcp_flow f;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_nic *nic;
	DEVMEMTCP_OPTS(nic_opts, o, .queues = queue, .nqueues = queue ? 1 : nq,
		       .flows = &f, .nflows = 1);
	DEVMEMTCP_OPTS(nic_stats, st);
	const uint32_t *q;
	char text[96], c = 0;
	int l = -1;

	snprintf(text, sizeof(text), "dst-ip %s dst-port %d", VM_RX_ADDR4, port);
	devmemtcp_flow_parse(text, &f);
	if (!no_buf && t_udmabuf(ctx, 32u << 20, &buf))
		_exit(3);
	o.buf = buf;
	if (no_buf)	/* a racer: open when told, with the other one */
		(void)!read(cmd, &c, 1);
	r.err = devmemtcp_nic_open(ctx, ifname, &o, &nic);
	if (r.err) {
		r.kind = 'E';
		snprintf(r.msg, sizeof(r.msg), "%s", devmemtcp_ctx_errmsg(ctx));
		tell(rep, &r);
		_exit(0);
	}
	r.nq = (uint32_t)devmemtcp_nic_queues(nic, &q);
	for (uint32_t i = 0; i < r.nq && i < 2; i++)
		r.q[i] = q[i];
	devmemtcp_nic_stats(nic, &st);
	r.rt = st.setup_round_trips;
	r.io = st.setup_ioctls;
	r.ctx_id = st.rss_context;
	if (!no_buf)
		l = t_listen(VM_RX_ADDR4, port);
	tell(rep, &r);
	for (int n = 0; !no_buf && n != connections; n++) {
		struct report rr = { .kind = 'R' };

		/* connections < 0: more until told to stop */
		if (connections < 0 && next_is_command(l, cmd))
			break;
		if (nic_receive(ctx, l, buf, devmemtcp_binding_id(devmemtcp_nic_binding(nic)),
				&rr.rx, n ? NULL : say_mid, &rep))
			rr.err = -EIO;
		tell(rep, &rr);
	}
	(void)!read(cmd, &c, 1);
	r = (struct report){ .kind = 'C', .err = devmemtcp_nic_close(nic) };
	if (r.err)
		snprintf(r.msg, sizeof(r.msg), "%s", devmemtcp_ctx_errmsg(ctx));
	tell(rep, &r);
	devmemtcp_buf_free(buf);
	_exit(0);
}

static int owner_start(struct owner *o, int port, uint32_t nq, const uint32_t *queue,
		       bool no_buf, int connections)
{
	int c[2], r[2];

	T_CHECK(pipe(c) == 0 && pipe(r) == 0, "pipe");
	memset(o, 0, sizeof(*o));
	o->port = port;
	o->pid = fork();
	if (o->pid == 0) {
		DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
		int cmd = fcntl(c[0], F_DUPFD, 100), rep = fcntl(r[1], F_DUPFD, 100);

		/* Nothing of the parent's: an inherited copy of a sender's
		 * socket would keep that connection from ever ending. */
		if (cmd < 0 || rep < 0 || dup2(cmd, 3) != 3 || dup2(rep, 4) != 4 ||
		    close_range(5, ~0u, 0) || devmemtcp_ctx_new(&co, &ctx))
			_exit(9);
		owner_main(port, nq, queue, no_buf, 3, 4, connections);
	}
	close(c[0]);
	close(r[1]);
	o->cmd = c[1];
	o->rep = r[0];
	return 0;
}

/* Tell an owner to close, hear it close, reap it. */
static int owner_stop(struct owner *o)
{
	struct report r;
	int st;

	(void)!write(o->cmd, "c", 1);
	T_TRY(hear(o, 'C', &r));
	T_CHECK(r.err == 0, "owner on port %d: close: %s", o->port, r.msg);
	waitpid(o->pid, &st, 0);
	close(o->cmd);
	close(o->rep);
	T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "owner on port %d exit %d", o->port, st);
	return 0;
}

/* Every byte there and right, none as ordinary data; with max_gap, no
 * wait for data longer than that (a lost segment early in a connection
 * costs TCP a 1 s retransmit timeout, which 4 transfers at once under
 * emulation do see: the stall bound is for one transfer while owners come
 * and go, as the race test has it). */
static int rx_ok(const struct owner *o, const struct report *r, uint64_t bytes,
		 double max_gap)
{
	T_CHECK(r->err == 0, "owner on port %d: receive failed", o->port);
	T_CHECK(r->rx.bytes == bytes, "owner on port %d: %llu bytes, not %llu", o->port,
		(unsigned long long)r->rx.bytes, (unsigned long long)bytes);
	T_CHECK(r->rx.bad_at < 0, "owner on port %d: byte %lld is wrong", o->port,
		(long long)r->rx.bad_at);
	T_CHECK(r->rx.linear == 0, "owner on port %d: %llu payload bytes arrived as ordinary data",
		o->port, (unsigned long long)r->rx.linear);
	T_CHECK(!max_gap || r->rx.max_gap < max_gap,
		"owner on port %d: a stall of %.2f s ending at %.3f (%u over 0.25 s)",
		o->port, r->rx.max_gap, r->rx.max_gap_at, r->rx.slow);
	return 0;
}

/* No queue of these owners in the default RSS table. */
static int table_avoids(const struct owner *o, int n)
{
	uint64_t mask = nic_rss_queues();

	T_CHECK(mask, "%s: no RSS table", ifname);
	for (int i = 0; i < n; i++)
		for (uint32_t k = 0; k < o[i].setup.nq; k++)
			T_CHECK(!(mask & (1ull << o[i].setup.q[k])),
				"queue %u of the owner on port %d is in the RSS table (0x%llx)",
				o[i].setup.q[k], o[i].port, (unsigned long long)mask);
	return 0;
}

static unsigned int seed;

static void shuffle(int *v, int n)
{
	for (int i = 0; i < n; i++)
		v[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = rand_r(&seed) % (i + 1), t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
}

/* Start the owners in order[], each sending bytes once set up. */
static int start_all(struct owner *o, const int *order, int port0, uint64_t bytes)
{
	for (int k = 0; k < OWNERS; k++) {
		struct owner *w = &o[order[k]];

		T_TRY(owner_start(w, port0 + order[k], 2, NULL, false, 1));
		T_TRY(hear(w, 'S', &w->setup));
		printf("owners: %.3f port %d up with %d others (queues %u,%u, context %u): %llu netlink round trips, %llu ioctls\n",
		       t_now(), w->port, k, w->setup.q[0], w->setup.q[1], w->setup.ctx_id,
		       (unsigned long long)w->setup.rt, (unsigned long long)w->setup.io);
		w->snd = vm_send_start(VM_RX_ADDR4, w->port, bytes, PATTERN_PERIOD_DEFAULT);
		T_CHECK(w->snd, "sender");
	}
	return 0;
}

static int test_orders(void)
{
	struct owner o[OWNERS];
	int start[OWNERS], stop[OWNERS];
	char *before = nic_dump(), *after;
	double t0 = t_now();

	shuffle(start, OWNERS);
	shuffle(stop, OWNERS);
	printf("orders: start %d %d %d %d, stop %d %d %d %d\n", start[0], start[1],
	       start[2], start[3], stop[0], stop[1], stop[2], stop[3]);
	T_TRY(start_all(o, start, 5310, 64ull << 20));
	T_TRY(table_avoids(o, OWNERS));
	for (int k = 0; k < OWNERS; k++) {
		struct owner *w = &o[stop[k]];
		struct report r;

		T_TRY(hear(w, 'M', &r));
		T_TRY(hear(w, 'R', &r));
		T_TRY(rx_ok(w, &r, 64ull << 20, 0));
		T_CHECK(vm_send_wait(w->snd) == 0, "sender of port %d", w->port);
		printf("orders: %.3f port %d received 64 MiB, every byte right, longest wait %.3f s at %.3f, %u over 0.25 s\n",
		       t_now(), w->port, r.rx.max_gap, r.rx.max_gap_at, r.rx.slow);
		T_TRY(owner_stop(w));
		printf("orders: %.3f port %d closed\n", t_now(), w->port);
	}
	after = nic_dump();
	T_TRY(nic_same(before, after, "after the last of 4 owners closed"));
	printf("orders: 4 x 64 MiB validated, NIC as before (%.1f s)\n", t_now() - t0);
	free(before);
	free(after);
	return 0;
}

/* ethtool -n shows a rule to this port. */
static bool rule_for(int port)
{
	char cmd[96], out[32768], want[32];

	snprintf(cmd, sizeof(cmd), "ethtool -n %s", ifname);
	t_capture(out, sizeof(out), cmd);
	snprintf(want, sizeof(want), "Dest port: %d ", port);
	return strstr(out, want) != NULL;
}

static bool context_exists(uint32_t id)
{
	return t_run("ethtool -x %s context %u >/dev/null 2>&1", ifname, id) == 0;
}

static int test_kill(void)
{
	struct owner o[OWNERS];
	int start[OWNERS], stop[OWNERS], victim, first;
	char *before = nic_dump(), *after;
	double t0 = t_now();
	struct report r;
	int st;

	shuffle(start, OWNERS);
	shuffle(stop, OWNERS);
	victim = stop[0];
	first = stop[1];
	printf("kill: start %d %d %d %d, kill %d, then stop %d %d %d\n", start[0], start[1],
	       start[2], start[3], victim, stop[1], stop[2], stop[3]);
	T_TRY(start_all(o, start, 5320, 32ull << 20));
	T_TRY(hear(&o[victim], 'M', &r));
	kill(o[victim].pid, SIGKILL);
	waitpid(o[victim].pid, &st, 0);
	T_CHECK(WIFSIGNALED(st), "victim status %d", st);
	vm_send_wait(o[victim].snd);	/* fails: the peer is gone */
	/* nobody has touched the NIC since: its rule and context are there */
	T_CHECK(rule_for(o[victim].port), "the dead owner's rule vanished early");
	T_CHECK(context_exists(o[victim].setup.ctx_id), "its context vanished early");
	for (int k = 1; k < OWNERS; k++) {
		struct owner *w = &o[stop[k]];

		T_TRY(hear(w, 'M', &r));
		T_TRY(hear(w, 'R', &r));
		T_TRY(rx_ok(w, &r, 32ull << 20, 0));
		T_CHECK(vm_send_wait(w->snd) == 0, "sender of port %d", w->port);
		T_TRY(owner_stop(w));
		if (w == &o[first]) {
			/* the next close by another owner removed the dead one's */
			T_CHECK(!rule_for(o[victim].port), "the dead owner's rule is still there");
			T_CHECK(!context_exists(o[victim].setup.ctx_id),
				"the dead owner's RSS context %u is still there", o[victim].setup.ctx_id);
			printf("kill: the close of port %d removed the dead owner's rule and context %u\n",
			       w->port, o[victim].setup.ctx_id);
		}
	}
	after = nic_dump();
	T_TRY(nic_same(before, after, "after the survivors closed"));
	printf("kill: 3 x 32 MiB validated around a SIGKILLed owner, NIC as before (%.1f s)\n",
	       t_now() - t0);
	free(before);
	free(after);
	return 0;
}

/* ---- race ---- */

static atomic_bool stop_sending;
static atomic_int sent;

/* Keep one owner receiving, 16 MiB per connection, until told to stop. */
static void *bg_sender(void *arg)
{
	int port = *(int *)arg;

	while (!atomic_load(&stop_sending)) {
		if (vm_send_wait(vm_send_start(VM_RX_ADDR4, port, 16ull << 20,
					       PATTERN_PERIOD_DEFAULT)))
			break;
		atomic_fetch_add(&sent, 1);
	}
	return NULL;
}

/* The rules are exactly those to these ports (SIOCETHTOOL, not the
 * library). */
static int rules_are(int round, const int *want, int n)
{
	int ports[16], got = nic_rule_ports(ports, 16);

	T_CHECK(got == n, "round %d: %d rules, not %d", round, got, n);
	for (int i = 0; i < n; i++) {
		bool found = false;

		for (int k = 0; k < got; k++)
			found |= ports[k] == want[i];
		T_CHECK(found, "round %d: no rule for port %d", round, want[i]);
	}
	return 0;
}

/* Two processes, released at once; conflict: both ask for queue q. */
static int race_round(int round, const struct owner *bg, bool conflict)
{
	static const uint32_t q1 = 1;
	struct owner w[2];
	struct report r[2];
	int port = 5500 + 2 * (round % 50);
	int won = -1;

	for (int i = 0; i < 2; i++)
		T_TRY(owner_start(&w[i], port + i, 1, conflict ? &q1 : NULL, true, 0));
	(void)!write(w[0].cmd, "o", 1);	/* go, both */
	(void)!write(w[1].cmd, "o", 1);
	for (int i = 0; i < 2; i++) {
		T_CHECK(read(w[i].rep, &r[i], sizeof(r[i])) == (ssize_t)sizeof(r[i]), "racer");
		if (r[i].kind == 'S')
			won = won < 0 ? i : 2;
	}
	if (conflict) {
		char want[160];
		int lost = !won;

		T_CHECK(won == 0 || won == 1, "round %d: %s both got queue 1", round,
			won == 2 ? "" : "neither");
		T_CHECK(r[lost].err == -EBUSY, "round %d: %d %s", round, r[lost].err, r[lost].msg);
		snprintf(want, sizeof(want), "RX queue 1 of %s is owned by pid %d (test-nic-owner",
			 ifname, w[won].pid);
		T_CHECK(strstr(r[lost].msg, want), "round %d: %s", round, r[lost].msg);
		waitpid(w[lost].pid, NULL, 0);
		close(w[lost].cmd);
		close(w[lost].rep);
		w[won].setup = r[won];
		T_TRY(rules_are(round, (const int[]){ bg->port, w[won].port }, 2));
		T_TRY(table_avoids((const struct owner[]){ *bg, w[won] }, 2));
		T_TRY(owner_stop(&w[won]));
		return rules_are(round, &bg->port, 1);
	}
	T_CHECK(won == 2, "round %d: %s / %s", round, r[0].msg, r[1].msg);
	T_CHECK(r[0].q[0] != r[1].q[0], "round %d: both got queue %u", round, r[0].q[0]);
	w[0].setup = r[0];
	w[1].setup = r[1];
	/* no lost update: both rules, and neither queue in the table */
	T_TRY(rules_are(round, (const int[]){ bg->port, port, port + 1 }, 3));
	T_TRY(table_avoids((const struct owner[]){ *bg, w[0], w[1] }, 3));
	/* and they close at the same instant too */
	(void)!write(w[0].cmd, "c", 1);
	(void)!write(w[1].cmd, "c", 1);
	for (int i = 0; i < 2; i++) {
		T_TRY(hear(&w[i], 'C', &r[i]));
		T_CHECK(r[i].err == 0, "round %d: close: %s", round, r[i].msg);
		waitpid(w[i].pid, NULL, 0);
		close(w[i].cmd);
		close(w[i].rep);
	}
	T_TRY(rules_are(round, &bg->port, 1));
	return table_avoids(bg, 1);
}

static int test_race(void)
{
	int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 100;

	char *before = nic_dump(), *after;
	double t0 = t_now(), worst = 0, worst_at = 0;
	struct owner bg;
	struct report r;
	pthread_t snd;
	int port = 5400, conns = 0;

	T_TRY(owner_start(&bg, port, 1, NULL, false, -1));
	T_TRY(hear(&bg, 'S', &bg.setup));
	T_CHECK(pthread_create(&snd, NULL, bg_sender, &port) == 0, "thread");
	/* the critical sections last 10 ms longer: the racers overlap */
	setenv("DEVMEMTCP_TEST_LOCK_DELAY_MS", "10", 1);
	for (int round = 0; round < rounds; round++) {
		T_TRY(race_round(round, &bg, round % 10 == 9));
		if (round % 10 == 9)
			printf("race: %.3f %d rounds\n", t_now(), round + 1);
	}
	unsetenv("DEVMEMTCP_TEST_LOCK_DELAY_MS");
	atomic_store(&stop_sending, true);
	(void)!write(bg.cmd, "c", 1);
	pthread_join(snd, NULL);
	/* every connection the background owner took */
	while (read(bg.rep, &r, sizeof(r)) == (ssize_t)sizeof(r) && r.kind != 'C') {
		if (r.kind != 'R')
			continue;
		T_TRY(rx_ok(&bg, &r, 16ull << 20, 1.0));
		if (r.rx.max_gap > worst) {
			worst = r.rx.max_gap;
			worst_at = r.rx.max_gap_at;
		}
		conns++;
	}
	T_CHECK(r.kind == 'C' && r.err == 0, "background owner: close: %s", r.msg);
	waitpid(bg.pid, NULL, 0);
	T_CHECK(conns >= 1 && conns >= atomic_load(&sent), "background owner took %d of %d",
		conns, atomic_load(&sent));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after 100 racing rounds"));
	printf("race: %d rounds (%d conflicts), no lost update; meanwhile %d x 16 MiB validated, longest wait %.3f s at %.3f (%.1f s)\n",
	       rounds, rounds / 10, conns, worst, worst_at, t_now() - t0);
	free(before);
	free(after);
	return 0;
}

/* ---- threads ---- */

struct thread_arg {
	int port;
	uint32_t queue;
	struct nic_rx_result rx;
	char msg[512];
	int ret;
};

/* Every thread's open is done (or failed) before any receives and
 * closes: the handles exist at once, so their queues are distinct (a
 * queue given back by a close may well go to the next open). */
static pthread_barrier_t all_open;

static void *thread_main(void *p)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	struct thread_arg *a = p;
	struct devmemtcp_ctx *tctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_nic *nic = NULL;
	struct devmemtcp_flow f;
	struct vm_sender *snd = NULL;
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
	const uint32_t *q;
	char text[96];
	int l;

	a->ret = -1;
	snprintf(text, sizeof(text), "dst-ip %s dst-port %d", VM_RX_ADDR4, a->port);
	devmemtcp_flow_parse(text, &f);
	if (devmemtcp_ctx_new(&co, &tctx) || t_udmabuf(tctx, 16u << 20, &buf)) {
		snprintf(a->msg, sizeof(a->msg), "context or buffer");
	} else {
		o.buf = buf;
		if (devmemtcp_nic_open(tctx, ifname, &o, &nic))
			snprintf(a->msg, sizeof(a->msg), "open: %s", devmemtcp_ctx_errmsg(tctx));
	}
	pthread_barrier_wait(&all_open);
	if (!nic)
		goto out;
	devmemtcp_nic_queues(nic, &q);
	a->queue = q[0];
	l = t_listen(VM_RX_ADDR4, a->port);
	snd = vm_send_start(VM_RX_ADDR4, a->port, 8u << 20, PATTERN_PERIOD_DEFAULT);
	a->ret = nic_receive(tctx, l, buf, devmemtcp_binding_id(devmemtcp_nic_binding(nic)),
			     &a->rx, NULL, NULL);
	close(l);
	if (vm_send_wait(snd))
		a->ret = -1;
out:
	if (nic && devmemtcp_nic_close(nic)) {
		snprintf(a->msg, sizeof(a->msg), "close: %s", devmemtcp_ctx_errmsg(tctx));
		a->ret = -1;
	}
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(tctx);
	return NULL;
}

static int test_threads(void)
{
	struct thread_arg a[8];
	pthread_t t[8];
	char *before = nic_dump(), *after;
	double t0 = t_now();
	uint32_t seen = 0;

	T_CHECK(pthread_barrier_init(&all_open, NULL, 8) == 0, "barrier");
	for (int i = 0; i < 8; i++) {
		a[i] = (struct thread_arg){ .port = 5600 + i };
		T_CHECK(pthread_create(&t[i], NULL, thread_main, &a[i]) == 0, "thread");
	}
	for (int i = 0; i < 8; i++) {
		struct owner o = { .port = a[i].port };
		struct report r;

		pthread_join(t[i], NULL);
		r = (struct report){ .rx = a[i].rx };
		T_CHECK(a[i].ret == 0, "thread %d: %s", i, a[i].msg);
		T_TRY(rx_ok(&o, &r, 8u << 20, 0));
		T_CHECK(!(seen & (1u << a[i].queue)), "queue %u twice", a[i].queue);
		seen |= 1u << a[i].queue;
	}
	pthread_barrier_destroy(&all_open);
	after = nic_dump();
	T_TRY(nic_same(before, after, "after 8 threads closed"));
	printf("threads: 8 handles in one process on queues 0x%x, 8 x 8 MiB validated, NIC as before (%.1f s)\n",
	       seen, t_now() - t0);
	free(before);
	free(after);
	return 0;
}

/* ---- bindings that outlive their owner ---- */

static int keeper_cmd;

/* Keeps every descriptor of the process (the binding's netlink socket
 * among them) until the command pipe says so. */
static void *keeper(void *arg)
{
	char c;

	(void)arg;
	alarm(120);	/* never outlive a failed test for long */
	(void)!read(keeper_cmd, &c, 1);
	_exit(0);
}

/* An owner of 2 queues with a flow to port, bound to a 16 MiB udmabuf,
 * that says 'S' and then leaves its binding to a forked child (thread
 * false: it exits) or to a thread (thread true: main calls
 * pthread_exit()). */
static void survivor_main(int port, bool thread, int cmd, int rep)
{
	struct report r = { .kind = 'S' };
	struct devmemtcp_flow f;
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = &f, .nflows = 1);
	DEVMEMTCP_OPTS(nic_stats, st);
	const uint32_t *q;
	pthread_t t;
	char text[96];

	snprintf(text, sizeof(text), "dst-ip %s dst-port %d", VM_RX_ADDR4, port);
	devmemtcp_flow_parse(text, &f);
	if (t_udmabuf(ctx, 16u << 20, &buf))
		_exit(3);
	o.buf = buf;
	r.err = devmemtcp_nic_open(ctx, ifname, &o, &nic);
	if (r.err) {
		r.kind = 'E';
		snprintf(r.msg, sizeof(r.msg), "%s", devmemtcp_ctx_errmsg(ctx));
		tell(rep, &r);
		_exit(0);
	}
	r.nq = (uint32_t)devmemtcp_nic_queues(nic, &q);
	for (uint32_t i = 0; i < r.nq && i < 2; i++)
		r.q[i] = q[i];
	devmemtcp_nic_stats(nic, &st);
	r.ctx_id = st.rss_context;
	r.binding = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	keeper_cmd = cmd;
	if (thread) {
		tell(rep, &r);
		if (pthread_create(&t, NULL, keeper, NULL))
			_exit(4);
		pthread_exit(NULL);
	}
	r.keeper = fork();
	if (r.keeper == 0)
		keeper(NULL);
	tell(rep, &r);
	_exit(0);	/* without closing: the child has it all */
}

static int survivor_start(struct owner *o, int port, bool thread)
{
	int c[2], r[2];

	T_CHECK(pipe(c) == 0 && pipe(r) == 0, "pipe");
	memset(o, 0, sizeof(*o));
	o->port = port;
	o->pid = fork();
	if (o->pid == 0) {
		DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
		int cmd = fcntl(c[0], F_DUPFD, 100), rep = fcntl(r[1], F_DUPFD, 100);

		if (cmd < 0 || rep < 0 || dup2(cmd, 3) != 3 || dup2(rep, 4) != 4 ||
		    close_range(5, ~0u, 0) || devmemtcp_ctx_new(&co, &ctx))
			_exit(9);
		survivor_main(port, thread, 3, 4);
	}
	close(c[0]);
	close(r[1]);
	o->cmd = c[1];
	o->rep = r[0];
	return 0;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* How many of the owner's queues queue-get shows bound to binding. */
static int bound_to(const struct report *s, uint32_t binding)
{
	struct devmemtcp_queue q[64];
	int n = devmemtcp_queue_list(ctx, (int)if_nametoindex(ifname), q, 64), hits = 0;

	for (int i = 0; i < n && i < 64; i++)
		for (uint32_t k = 0; k < s->nq; k++)
			hits += q[i].type == DEVMEMTCP_QUEUE_RX && q[i].id == s->q[k] &&
				q[i].dmabuf_id == binding;
	return hits;
}

/* While the binding is held: the owner's rule and context are there and
 * the default table avoids its queues. */
static int held(const struct owner *p, const char *when)
{
	T_CHECK(bound_to(&p->setup, p->setup.binding) == 2,
		"%s: queue-get does not show binding %u on queues %u and %u", when,
		p->setup.binding, p->setup.q[0], p->setup.q[1]);
	if (table_avoids(p, 1)) {
		printf("%s: the default RSS table points at a queue that carries binding %u\n",
		       when, p->setup.binding);
		return T_EXIT_FAIL;
	}
	T_CHECK(rule_for(p->port), "%s: the rule of the owner whose binding lives was deleted", when);
	T_CHECK(context_exists(p->setup.ctx_id), "%s: its RSS context %u was deleted", when,
		p->setup.ctx_id);
	return 0;
}

static char logged[8192];

static void capture(void *user, int level, const char *msg)
{
	size_t n = strlen(logged);

	(void)user;
	if (level <= DEVMEMTCP_LOG_WARN)
		snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
}

static int test_survivor(bool thread)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = capture, .log_level = DEVMEMTCP_LOG_WARN);
	const char *how = thread ? "thread" : "fork";
	struct devmemtcp_probe pr = { .sz = sizeof(pr) };
	struct devmemtcp_ctx *octx;
	struct devmemtcp_nic *other;
	char *before = nic_dump(), *after, want[512];
	struct owner p;
	double t0 = t_now();
	int st;

	T_CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, "subreaper");
	T_CHECK(devmemtcp_ctx_new(&co, &octx) == 0, "ctx");
	T_TRY(survivor_start(&p, 5710, thread));
	T_TRY(hear(&p, 'S', &p.setup));
	if (thread) {
		for (int i = 0; i < 5000 && proc_state(p.pid) != 'Z'; i++)
			usleep(1000);
		T_CHECK(proc_state(p.pid) == 'Z', "pid %d: state %c, not Z", p.pid,
			proc_state(p.pid));
	} else {
		T_CHECK(waitpid(p.pid, &st, 0) == p.pid && WIFEXITED(st), "owner exit %d", st);
	}
	printf("%s: %.3f owner pid %d %s on queues %u,%u (context %u) with binding %u held by %s\n",
	       how, t_now(), p.pid, thread ? "is a zombie leader" : "exited", p.setup.q[0],
	       p.setup.q[1], p.setup.ctx_id, p.setup.binding,
	       thread ? "its thread" : "its child");
	T_TRY(held(&p, "the owner gone"));

	/* another owner comes and goes: two reconciles */
	{
		struct devmemtcp_flow f;
		char text[96];
		DEVMEMTCP_OPTS(nic_opts, oo, .nqueues = 1, .flows = &f, .nflows = 1);

		snprintf(text, sizeof(text), "dst-ip %s dst-port 5711", VM_RX_ADDR4);
		devmemtcp_flow_parse(text, &f);
		T_CHECK(devmemtcp_nic_open(octx, ifname, &oo, &other) == 0, "open: %s",
			devmemtcp_ctx_errmsg(octx));
	}
	T_TRY(held(&p, "after another owner's open"));
	snprintf(want, sizeof(want),
		 "the setup of %s by pid %d (%s) stays: RX queue %u still carries dma-buf %u",
		 ifname, p.pid, t_own_comm(), p.setup.q[0], p.setup.binding);
	T_CHECK(thread ? !strstr(logged, "stays: RX queue") : strstr(logged, want) != NULL,
		"logged: %s", logged);
	if (!thread) {
		T_CHECK(devmemtcp_nic_probe(ctx, ifname, NULL, &pr) >= 0, "probe: %s",
			devmemtcp_ctx_errmsg(ctx));
		snprintf(want, sizeof(want),
			 "pid %d (%s) ended without closing its devmem setup of %s; RX queue %u still carries its binding",
			 p.pid, t_own_comm(), ifname, p.setup.q[0]);
		T_CHECK(t_probe_problem(&pr, want), "probe does not say: %s", want);
	}
	T_CHECK(devmemtcp_nic_close(other) == 0, "close: %s", devmemtcp_ctx_errmsg(octx));
	T_TRY(held(&p, "after another owner's close"));

	/* the binding goes: the next operation cleans up */
	(void)!write(p.cmd, "c", 1);
	if (thread)
		T_CHECK(waitpid(p.pid, &st, 0) == p.pid && WIFEXITED(st), "owner exit %d", st);
	else
		T_CHECK(waitpid(p.setup.keeper, &st, 0) == p.setup.keeper && WIFEXITED(st),
			"keeper exit %d", st);
	T_CHECK(bound_to(&p.setup, p.setup.binding) == 0, "binding %u still on the queues",
		p.setup.binding);
	T_CHECK(devmemtcp_nic_recover(ctx, ifname, NULL) == 1, "recover: %s",
		devmemtcp_ctx_errmsg(ctx));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after the binding was gone"));
	close(p.cmd);
	close(p.rep);
	devmemtcp_ctx_free(octx);
	printf("%s: the binding held by %s kept its owner's steering through two reconciles, the default table never pointed at it, then all was undone (%.1f s)\n",
	       how, thread ? "a thread of a zombie leader" : "the child of a gone owner", t_now() - t0);
	free(before);
	free(after);
	return 0;
}

/* ---- stale ---- */

static int test_stale(void)
{
	static const uint32_t q9 = 9;
	DEVMEMTCP_OPTS(nic_opts, all, .flags = DEVMEMTCP_NIC_RECOVER_ALL);
	struct devmemtcp_flow f;
	DEVMEMTCP_OPTS(nic_opts, o, .queues = &q9, .nqueues = 1, .flows = &f, .nflows = 1);
	char *before = nic_dump(), *after, cmd[96], rules_a[4096], rules_b[4096];
	struct devmemtcp_nic *a, *b;
	double t0 = t_now();

	devmemtcp_flow_parse("dst-port 5720", &f);
	snprintf(cmd, sizeof(cmd), "ethtool -n %s", ifname);
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &a) == 0, "open a: %s", devmemtcp_ctx_errmsg(ctx));
	t_capture(rules_a, sizeof(rules_a), cmd);
	T_CHECK(devmemtcp_nic_recover(ctx, ifname, &all) == 1, "restore --all: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(!rule_for(5720), "restore --all left the rule");
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &b) == 0, "open b: %s", devmemtcp_ctx_errmsg(ctx));
	t_capture(rules_b, sizeof(rules_b), cmd);
	T_CHECK(strcmp(rules_a, rules_b) == 0, "not the same rule at the same place:\n%s\n%s",
		rules_a, rules_b);
	T_CHECK(devmemtcp_nic_close(a) == 0, "close a: %s", devmemtcp_ctx_errmsg(ctx));
	T_CHECK(rule_for(5720), "the stale handle's close deleted the new owner's rule");
	T_CHECK(devmemtcp_nic_close(b) == 0, "close b: %s", devmemtcp_ctx_errmsg(ctx));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after both closed"));
	printf("stale: the stale handle's close left the new owner's identical rule (%.1f s)\n",
	       t_now() - t0);
	free(before);
	free(after);
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 2 ? argv[2] : "";

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);	/* children must not inherit a buffer */
	alarm(700);	/* a hang fails here, with the output so far */
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0, "topology");
	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	seed = getenv("SEED") ? (unsigned int)atoi(getenv("SEED")) : (unsigned int)time(NULL);
	printf("%s: SEED=%u\n", what, seed);
	if (strcmp(what, "orders") == 0)
		return test_orders();
	if (strcmp(what, "kill") == 0)
		return test_kill();
	if (strcmp(what, "race") == 0)
		return test_race();
	if (strcmp(what, "threads") == 0)
		return test_threads();
	if (strcmp(what, "fork") == 0 || strcmp(what, "thread") == 0)
		return test_survivor(strcmp(what, "thread") == 0);
	if (strcmp(what, "stale") == 0)
		return test_stale();
	fprintf(stderr, "usage: %s IFACE orders|kill|race|threads|fork|thread|stale\n", argv[0]);
	return 2;
}
