// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Allocation-failure injection over every setup path that runs without
 * privileges: the N-th allocation of the library fails (test hooks,
 * dmt_test_alloc_fail), for N = 1, 2, ... until the path completes without
 * an injected failure.  Every failing N must return -ENOMEM with a message
 * that says out of memory (where the call has an object to put one on),
 * leave nothing behind (the sanitizer and valgrind runs check leaks; the
 * fake NIC is compared with its state before; no journal is left), and the
 * path must work afterwards.  The NIC walks run twice, the second time with
 * every allocation from the N-th on failing (memory stays out): there, and
 * for a failed close, what the call could not undo must be finished by a
 * plain recover, as its message says.  Each walk prints how many
 * allocations its path makes.  The bind paths are in tests/host/test-alloc.c, the GPU ones
 * in tests/gpu.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "allocfixture.h"
#include "buf.h"
#include "fake-nic.h"
#include "netdev.h"
#include "nicfixture.h"
#include "rx.h"
#include "tx.h"

static struct devmemtcp_ctx *ctx;
static char dir[64];

/* ---- context, buffers ---------------------------------------------------- */

static void test_ctx_new(void **state)
{
	struct devmemtcp_ctx *c;
	long n;
	int ret;

	for (n = 1;; n++) {
		c = (void *)1;
		alloc_arm(ctx, n);
		ret = devmemtcp_ctx_new(NULL, &c);
		if (!alloc_injected(n))
			break;
		/* no context: the message is the thread's */
		/* ERRORS devmemtcp_ctx_new ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		assert_null(c);
		assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_ctx_new: out of memory");
	}
	assert_int_equal(ret, 0);
	devmemtcp_ctx_free(c);
	alloc_walked("devmemtcp_ctx_new", n);
}

/*
 * devmemtcp_buf_new(o) with the n-th allocation failing, n = 1, 2, ... until
 * no allocation failed: each failure -ENOMEM saying out of memory, after
 * which intact(arg) must hold.  The last call's result (*buf set on 0);
 * *n: the walk's end, for alloc_walked().
 */
static int walk_buf_new(const struct devmemtcp_buf_opts *o, const char *what,
			void (*intact)(const void *arg), const void *arg,
			struct devmemtcp_buf **buf, long *n)
{
	int ret;

	for (*n = 1;; ++*n) {
		alloc_arm(ctx, *n);
		ret = devmemtcp_buf_new(ctx, o, buf);
		if (!alloc_injected(*n))
			return ret;
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom(what, *n, devmemtcp_ctx_errmsg(ctx));
		intact(arg);
	}
}

/* The caller's fd is still open. */
static void fd_open(const void *fd)
{
	assert_true(fcntl(*(const int *)fd, F_GETFD) >= 0);
}

/* The process has as many fds open as before. */
static void fds_as_before(const void *fds)
{
	assert_int_equal(t_count_fds(), *(const int *)fds);
}

static void test_buf_import(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = 1 << 20);
	struct devmemtcp_buf *buf;
	long n;
	int ret;

	/* a memfd: whether import takes it is not this test's business,
	 * only what its allocations do */
	o.fd = memfd_create("dmt-alloc", MFD_CLOEXEC);
	assert_true(o.fd >= 0);
	assert_int_equal(ftruncate(o.fd, 1 << 20), 0);
	ret = walk_buf_new(&o, "devmemtcp_buf_new(import)", fd_open, &o.fd,
			   &buf, &n);
	assert_int_not_equal(ret, -ENOMEM);
	if (!ret)
		devmemtcp_buf_free(buf);
	close(o.fd);
	alloc_walked("devmemtcp_buf_new(import)", n);
}

static void test_buf_udmabuf(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 1 << 20);
	struct devmemtcp_buf *buf;
	int fds = t_count_fds();
	long n;
	int ret;

	if (access("/dev/udmabuf", R_OK | W_OK)) {
		print_message("skipped: /dev/udmabuf is missing (modprobe udmabuf)\n");
		skip();
	}
	ret = walk_buf_new(&o, "devmemtcp_buf_new(udmabuf)", fds_as_before,
			   &fds, &buf, &n);
	assert_int_equal(ret, 0);
	devmemtcp_buf_free(buf);
	assert_int_equal(t_count_fds(), fds);
	alloc_walked("devmemtcp_buf_new(udmabuf)", n);
}

/* ---- receive ------------------------------------------------------------- */

static void test_rx_new(void **state)
{
	struct devmemtcp_rx *rx;
	int peer, fd = alloc_tcp_pair(&peer);
	long n;
	int ret;

	for (n = 1;; n++) {
		alloc_arm(ctx, n);
		ret = devmemtcp_rx_new(ctx, fd, NULL, &rx);
		if (!alloc_injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom("devmemtcp_rx_new", n, devmemtcp_ctx_errmsg(ctx));
	}
	assert_int_equal(ret, 0);
	devmemtcp_rx_free(rx);
	close(fd);
	close(peer);
	alloc_walked("devmemtcp_rx_new", n);
}

static struct devmemtcp_buf *host_buf(uint64_t size)
{
	struct devmemtcp_segment seg = { 0, size, 1ull << 40 };
	struct devmemtcp_buf *buf;

	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->size = size;
	assert_int_equal(dmt_buf_set_segments(buf, &seg, 1), 0);
	return buf;
}

static void test_rx_add_buf(void **state)
{
	struct devmemtcp_buf *buf = host_buf(1 << 20);
	struct devmemtcp_rx *rx;
	int peer, fd = alloc_tcp_pair(&peer);
	long n;
	int ret;

	assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), 0);
	for (n = 1;; n++) {
		alloc_arm(ctx, n);
		ret = devmemtcp_rx_add_buf(rx, 9, buf);
		if (!alloc_injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom("devmemtcp_rx_add_buf", n, devmemtcp_rx_errmsg(rx));
	}
	assert_int_equal(ret, 0);
	/* registered once, as if nothing had failed */
	assert_int_equal(devmemtcp_rx_add_buf(rx, 9, buf), -EEXIST);
	devmemtcp_rx_free(rx);
	devmemtcp_buf_free(buf);
	close(fd);
	close(peer);
	alloc_walked("devmemtcp_rx_add_buf", n);
}

/* A receive that needs a larger control buffer than the handle has: the
 * bytes must still be there for the next call when it fails. */
static void test_rx_recv_growth(void **state)
{
	static char data[1000], lin[4096];
	struct devmemtcp_frag *frags = calloc(4096, sizeof(*frags));
	struct devmemtcp_rx *rx;
	int peer, fd = alloc_tcp_pair(&peer);
	long n;
	int ret;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)i;
	assert_int_equal(send(peer, data, sizeof(data), 0), sizeof(data));
	for (n = 1;; n++) {
		assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), 0);
		alloc_arm(ctx, n);
		ret = devmemtcp_rx_recv(rx, frags, 4096, lin, sizeof(lin));
		if (!alloc_injected(n))
			break;
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom("devmemtcp_rx_recv", n, devmemtcp_rx_errmsg(rx));
		devmemtcp_rx_free(rx);
	}
	/* plain data (not on a devmem queue): one linear fragment, intact */
	assert_int_equal(ret, 1);
	assert_int_equal(frags[0].len, sizeof(data));
	assert_memory_equal(lin, data, sizeof(data));
	devmemtcp_rx_free(rx);
	free(frags);
	close(fd);
	close(peer);
	alloc_walked("devmemtcp_rx_recv (control buffer growth)", n);
}

static int done_now(void *arg, bool wait)
{
	return 1;
}

/* Deferred releases queue tokens in growing vectors: a failure must keep
 * every token the user's to release again. */
static void test_rx_release_after(void **state)
{
	enum { NTOK = 3000 };
	struct devmemtcp_frag *f = calloc(NTOK, sizeof(*f));
	struct devmemtcp_buf *buf = host_buf(NTOK * 4096ull);
	struct devmemtcp_rx *rx;
	int peer, fd = alloc_tcp_pair(&peer);
	long n;
	int ret;

	for (n = 1;; n++) {
		assert_int_equal(devmemtcp_rx_new(ctx, fd, NULL, &rx), 0);
		assert_int_equal(devmemtcp_rx_add_buf(rx, 9, buf), 0);
		alloc_receive_tokens(rx, f, NTOK);
		alloc_arm(ctx, n);
		ret = devmemtcp_rx_release_after(rx, f, NTOK, done_now, NULL);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_rx_release_after ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		assert_string_equal(devmemtcp_rx_errmsg(rx),
				    "devmemtcp_rx_release_after: out of memory: nothing was deferred, the fragments are still the caller's");
		/* nothing was deferred: the same release works now */
		assert_int_equal(devmemtcp_rx_release(rx, f, NTOK), 0);
		assert_int_equal(devmemtcp_rx_flush(rx) >= 0, 1);
		devmemtcp_rx_free(rx);
		assert_int_equal(alloc_returned, NTOK);
	}
	assert_int_equal(ret, 0);
	assert_true(devmemtcp_rx_flush(rx) >= 0);
	devmemtcp_rx_free(rx);
	assert_int_equal(alloc_returned, NTOK);
	devmemtcp_buf_free(buf);
	free(f);
	close(fd);
	close(peer);
	alloc_walked("devmemtcp_rx_release_after", n);
}

/* ---- transmit ------------------------------------------------------------ */

static ssize_t send_all(int fd, const struct msghdr *msg, int flags)
{
	ssize_t total = 0;

	for (size_t i = 0; i < msg->msg_iovlen; i++)
		total += (ssize_t)msg->msg_iov[i].iov_len;
	return total;
}

static void test_tx_new_send(void **state)
{
	struct devmemtcp_buf *buf = host_buf(64 << 20);
	struct devmemtcp_binding b = { .tx = true, .id = 4, .ifindex = 1,
				       .buf = buf };
	struct devmemtcp_tx_piece p[300];
	struct devmemtcp_tx *tx;
	int peer, fd = alloc_tcp_pair(&peer);
	long n;
	ssize_t sent;
	int ret;

	for (n = 1;; n++) {
		alloc_arm(ctx, n);
		ret = devmemtcp_tx_new(ctx, fd, &b, NULL, &tx);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_tx_new ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom("devmemtcp_tx_new", n, devmemtcp_ctx_errmsg(ctx));
	}
	assert_int_equal(ret, 0);
	devmemtcp_tx_free(tx);
	alloc_walked("devmemtcp_tx_new", n);

	/* 300 pieces that do not touch: one range each to track */
	for (int i = 0; i < 300; i++)
		p[i] = (struct devmemtcp_tx_piece){ (uint64_t)i * 8192, 4096 };
	for (n = 1;; n++) {
		assert_int_equal(devmemtcp_tx_new(ctx, fd, &b, NULL, &tx), 0);
		tx->sys_sendmsg = send_all;
		alloc_arm(ctx, n);
		sent = devmemtcp_tx_send(tx, p, 300, 0);
		if (!alloc_injected(n))
			break;
		assert_int_equal(sent, -ENOMEM);
		alloc_expect_oom("devmemtcp_tx_send", n, devmemtcp_tx_errmsg(tx));
		devmemtcp_tx_free(tx);
	}
	assert_int_equal(sent, 300 * 4096);
	devmemtcp_tx_free(tx);
	devmemtcp_buf_free(buf);
	close(fd);
	close(peer);
	alloc_walked("devmemtcp_tx_send", n);
}

/* ---- the NIC, against the fake one --------------------------------------- */

static struct fake_nic *fnic;
static char before[16384], after[16384];

/* Files the NIC layer leaves for eth0: its owners' files and the
 * baseline (the lock file stays, empty, by design). */
static int nic_files(bool remove)
{
	struct dirent *d;
	DIR *dp = opendir(dir);
	int n = 0;

	if (!dp)
		return 0;
	while ((d = readdir(dp))) {
		char path[512];

		if (strncmp(d->d_name, "eth0.owner.", 11) &&
		    strcmp(d->d_name, "eth0.base"))
			continue;
		n++;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (remove)
			unlink(path);
	}
	closedir(dp);
	return n;
}

static bool journal_exists(void)
{
	return nic_files(false) > 0;
}

static void nic_reset(void)
{
	fake_init(fnic);
	nic_files(true);
	fake_dump(fnic, before, sizeof(before));
}

static void assert_nic_unchanged(const char *path, long n)
{
	fake_dump(fnic, after, sizeof(after));
	if (strcmp(before, after))
		fail_msg("%s, allocation %ld failed: the NIC was not restored:\n%s\nnow:\n%s",
			 path, n, before, after);
	if (journal_exists())
		fail_msg("%s, allocation %ld failed: a journal was left", path, n);
}

static struct devmemtcp_nic_opts nic_opts(struct devmemtcp_flow *f)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);

	assert_int_equal(devmemtcp_flow_parse("dst-ip 10.0.0.1 dst-port 5201", &f[0]), 0);
	assert_int_equal(devmemtcp_flow_parse("tcp6 dst-port 5201", &f[1]), 0);
	return o;
}

/* What a failed call left: nothing, or what a plain recover (by anyone:
 * this process lives, so its owner file must say closed) finishes, as
 * the message says. */
static void assert_recover_finishes(const char *path, long n, const char *msg)
{
	if (journal_exists() && !strstr(msg, "'devmemtcp restore eth0'"))
		fail_msg("%s, allocation %ld failed: files are left but the message does not say restore finishes: \"%s\"",
			 path, n, msg);
	assert_true(devmemtcp_nic_recover(ctx, "eth0", NULL) >= 0);
	assert_nic_unchanged(path, n);
}

/* The walks of open and close; sticky: memory stays out from the N-th
 * allocation on. */
static void nic_walks(bool sticky)
{
	const char *open_path = sticky ? "devmemtcp_nic_open (memory stays out)"
				       : "devmemtcp_nic_open";
	const char *close_path = sticky ? "devmemtcp_nic_close (memory stays out)"
					: "devmemtcp_nic_close";
	struct devmemtcp_flow f[2];
	struct devmemtcp_nic_opts o = nic_opts(f);
	struct devmemtcp_nic *nic;
	long n;
	int ret;

	nic_reset();
	for (n = 1;; n++) {
		if (sticky)
			alloc_arm_sticky(ctx, n);
		else
			alloc_arm(ctx, n);
		ret = devmemtcp_nic_open(ctx, "eth0", &o, &nic);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_nic_open ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom(open_path, n, devmemtcp_ctx_errmsg(ctx));
		if (sticky)
			assert_recover_finishes(open_path, n, devmemtcp_ctx_errmsg(ctx));
		else
			assert_nic_unchanged(open_path, n);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_nic_unchanged(open_path, 0);
	alloc_walked(open_path, n);

	/* close: whatever it could not undo, recover finishes */
	for (n = 1;; n++) {
		assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
		if (sticky)
			alloc_arm_sticky(ctx, n);
		else
			alloc_arm(ctx, n);
		ret = devmemtcp_nic_close(nic);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_nic_close ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom(close_path, n, devmemtcp_ctx_errmsg(ctx));
		assert_recover_finishes(close_path, n, devmemtcp_ctx_errmsg(ctx));
	}
	assert_int_equal(ret, 0);
	assert_nic_unchanged(close_path, 0);
	alloc_walked(close_path, n);
}

/* A failed open undoes everything itself; a failed close leaves what
 * recover finishes. */
static void test_nic_open_close(void **state)
{
	nic_walks(false);
}

/*
 * Memory stays out, so that the undo of a failed open or close cannot
 * allocate either.  What undo cannot reach without memory (the shared
 * settings need every owner's file read) must stay recorded where the
 * next operation of anyone finds it: a recover afterwards restores the
 * NIC and leaves no file.
 */
static void test_nic_sticky(void **state)
{
	nic_walks(true);
}

/* A process set the NIC up and died: its journal is left. */
static void crashed_owner(void)
{
	struct devmemtcp_flow f[2];
	struct devmemtcp_nic_opts o = nic_opts(f);
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct devmemtcp_nic *nic;

		if (devmemtcp_nic_open(ctx, "eth0", &o, &nic) < 0)
			_exit(3);
		raise(SIGKILL);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_true(journal_exists());
}

static void test_nic_recover(void **state)
{
	long n;
	int ret;

	for (n = 1;; n++) {
		nic_reset();
		crashed_owner();
		alloc_arm(ctx, n);
		ret = devmemtcp_nic_recover(ctx, "eth0", NULL);
		if (!alloc_injected(n))
			break;
		/* ERRORS devmemtcp_nic_recover ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		alloc_expect_oom("devmemtcp_nic_recover", n, devmemtcp_ctx_errmsg(ctx));
		/* the journal is kept until the undo is done: again, whole */
		assert_true(journal_exists());
		assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
		assert_nic_unchanged("devmemtcp_nic_recover", n);
	}
	assert_int_equal(ret, 1);
	assert_nic_unchanged("devmemtcp_nic_recover", 0);
	alloc_walked("devmemtcp_nic_recover", n);
}

static void test_flow_parse(void **state)
{
	struct devmemtcp_flow f;
	long n;
	int ret;

	for (n = 1;; n++) {
		alloc_arm(ctx, n);
		ret = devmemtcp_flow_parse("dst-ip 10.0.0.1 dst-port 5201", &f);
		if (!alloc_injected(n))
			break;
		/* no object: the message is the thread's */
		/* ERRORS devmemtcp_flow_parse ENOMEM */
		assert_int_equal(ret, -ENOMEM);
		assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_flow_parse: out of memory");
	}
	assert_int_equal(ret, 0);
	alloc_walked("devmemtcp_flow_parse", n);
}

static int setup(void **state)
{
	fnic = fake_shared();	/* shared with the forked owners */
	if (!fnic)
		return -1;
	fake_init(fnic);
	return nicfix_setup(dir, sizeof(dir), "dmt-alloc", &ctx);
}

static int teardown(void **state)
{
	dmt_test_alloc_fail(0, false);
	return nicfix_teardown(dir, ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctx_new),
		cmocka_unit_test(test_buf_import),
		cmocka_unit_test(test_buf_udmabuf),
		cmocka_unit_test(test_rx_new),
		cmocka_unit_test(test_rx_add_buf),
		cmocka_unit_test(test_rx_recv_growth),
		cmocka_unit_test(test_rx_release_after),
		cmocka_unit_test(test_tx_new_send),
		cmocka_unit_test(test_nic_open_close),
		cmocka_unit_test(test_nic_sticky),
		cmocka_unit_test(test_nic_recover),
		cmocka_unit_test(test_flow_parse),
	};

	return cmocka_run_group_tests_name("alloc", tests, setup, teardown);
}
