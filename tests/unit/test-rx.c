// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The receive handle on a socket pair: plain data is a steering miss, the
 * release calls refuse tokens never received, stats honour sz. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "allocfixture.h"
#include "buf.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_rx *rx;
static int sv[2];

static int setup(void **state)
{
	if (devmemtcp_ctx_new(NULL, &ctx) ||
	    t_tcp_pair(sv) ||
	    devmemtcp_rx_new(ctx, sv[0], NULL, &rx))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
	devmemtcp_ctx_free(ctx);
	return 0;
}

static void test_plain_data_is_miss(void **state)
{
	struct devmemtcp_frag f[4];
	char lin[64];
	DEVMEMTCP_OPTS(rx_stats, st);

	assert_int_equal(write(sv[1], "hello world", 11), 11);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 4, lin, sizeof(lin)), 1);
	assert_int_equal(f[0].flags, DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(f[0].offset, 0);
	assert_int_equal(f[0].len, 11);
	assert_memory_equal(lin, "hello world", 11);
	assert_int_equal(devmemtcp_rx_stats(rx, &st), 0);
	assert_int_equal(st.steering_misses, 1);
	assert_int_equal(st.linear_bytes, 11);
	assert_int_equal(st.bytes, 11);
	assert_int_equal(st.frags, 0);
	assert_int_equal(st.recv_calls, 1);
	/* linear entries need no release; releasing them is a no-op */
	assert_int_equal(devmemtcp_rx_release(rx, f, 1), 0);
	/* end of stream */
	shutdown(sv[1], SHUT_WR);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 4, lin, sizeof(lin)), 0);
}

static void test_release_unknown_token(void **state)
{
	struct devmemtcp_frag f = { .offset = 0, .len = 4096, .token = 3,
				    .binding_id = 1 };

	/* ERRORS devmemtcp_rx_release EINVAL */
	assert_int_equal(devmemtcp_rx_release(rx, &f, 1), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_release: token 3 of fragment 0 is not outstanding (released already, listed twice, or never received): nothing was released");
}

static int never(void *arg, bool wait)
{
	return 0;
}

static void test_release_after_checks(void **state)
{
	struct devmemtcp_frag f = { .token = 1 };

	/* ERRORS devmemtcp_rx_release_after EINVAL */
	assert_int_equal(devmemtcp_rx_release_after(rx, &f, 1, NULL, NULL), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_release_after: done is NULL: use devmemtcp_rx_release() for immediate release");
	/* ERRORS devmemtcp_rx_release_after EINVAL */
	assert_int_equal(devmemtcp_rx_release_after(rx, &f, 1, never, NULL), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_release_after: token 1 of fragment 0 is not outstanding (released already, listed twice, or never received): nothing was released");
	/* nothing outstanding: flush and release_all release nothing */
	assert_int_equal(devmemtcp_rx_flush(rx), 0);
	assert_int_equal(devmemtcp_rx_release_all(rx), 0);
}

static void test_add_buf_checks(void **state)
{
	const struct devmemtcp_segment seg = { 0, 1 << 20, 0x100000 };
	struct devmemtcp_buf *buf;
	char want[256];

	/* a bare buffer object with a segment table (add_buf reads it: see
	 * unit/segments); the handle takes a reference to it */
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->size = 1 << 20;
	assert_int_equal(dmt_buf_set_segments(buf, &seg, 1), 0);
	/* ERRORS devmemtcp_rx_add_buf EINVAL */
	assert_int_equal(devmemtcp_rx_add_buf(rx, 0, buf), -EINVAL);
	snprintf(want, sizeof(want),
		 "devmemtcp_rx_add_buf: binding id 0, buf %p: pass devmemtcp_binding_id() and the bound buffer",
		 (void *)buf);
	assert_string_equal(devmemtcp_rx_errmsg(rx), want);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, NULL), -EINVAL);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, buf), 0);
	/* ERRORS devmemtcp_rx_add_buf EEXIST */
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, buf), -EEXIST);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_add_buf: binding 4 is already registered");
	devmemtcp_buf_free(buf);
}

static void test_recv_args(void **state)
{
	struct devmemtcp_frag f[1];
	char lin[8];

	/* ERRORS devmemtcp_rx_recv EINVAL */
	assert_int_equal(devmemtcp_rx_recv(rx, NULL, 1, lin, 8), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(rx),
			    "devmemtcp_rx_recv: need a fragment array (max_frags > 0) and a linear buffer of len > 0 bytes");
	assert_int_equal(devmemtcp_rx_recv(rx, f, 0, lin, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_recv(rx, f, 1, NULL, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_recv(NULL, f, 1, lin, 8), -EINVAL);
	assert_int_equal(devmemtcp_rx_fd(rx), sv[0]);
	assert_int_equal(devmemtcp_rx_fd(NULL), -EINVAL);
}

static void test_stats_sz(void **state)
{
	struct devmemtcp_rx_stats st;

	memset(&st, 0xaa, sizeof(st));
	st.sz = offsetof(struct devmemtcp_rx_stats, linear_bytes);
	assert_int_equal(devmemtcp_rx_stats(rx, &st), 0);
	assert_int_equal(st.bytes, 0);
	/* fields past the caller's sz are not written */
	assert_int_equal(st.linear_bytes, 0xaaaaaaaaaaaaaaaaull);
	st.sz = 0;
	assert_int_equal(devmemtcp_rx_stats(rx, &st), -EINVAL);
}

static void test_nonblocking_eagain(void **state)
{
	struct devmemtcp_frag f[1];
	char lin[8];
	struct timeval tv = { 0, 1000 };

	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* ERRORS devmemtcp_rx_recv EAGAIN */
	assert_int_equal(devmemtcp_rx_recv(rx, f, 1, lin, 8), -EAGAIN);
	/* an ordinary outcome of the hot path: no message is recorded */
	assert_string_equal(devmemtcp_rx_errmsg(rx), "");
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal interrupts a blocking receive: EINTR, and like EAGAIN no
 * message (the caller decides whether to retry). */
static void test_recv_eintr(void **state)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { .it_value = { 0, 50000 } };
	struct devmemtcp_frag f[1];
	char lin[8];

	/* no SA_RESTART: recvmsg returns EINTR */
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	/* ERRORS devmemtcp_rx_recv EINTR */
	assert_int_equal(devmemtcp_rx_recv(rx, f, 1, lin, 8), -EINTR);
	assert_string_equal(devmemtcp_rx_errmsg(rx), "");
	sigaction(SIGALRM, &old, NULL);
}

/* The linear buffer is read-only: the kernel's copy faults. */
static void test_recv_efault(void **state)
{
	struct devmemtcp_frag f[1];
	long page = sysconf(_SC_PAGESIZE);
	char *ro = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char want[512];

	assert_true(ro != MAP_FAILED);
	assert_int_equal(write(sv[1], "x", 1), 1);
	/* ERRORS devmemtcp_rx_recv EFAULT */
	assert_int_equal(devmemtcp_rx_recv(rx, f, 1, ro, (size_t)page), -EFAULT);
	snprintf(want, sizeof(want),
		 "recvmsg(MSG_SOCK_DEVMEM) failed with EFAULT: the linear buffer (%p, %ld bytes) is not writable, or devmem data reached a socket read without MSG_SOCK_DEVMEM",
		 (void *)ro, page);
	assert_string_equal(devmemtcp_rx_errmsg(rx), want);
	munmap(ro, (size_t)page);
}

/* ---- token returns the kernel refuses ------------------------------------ */

static int dontneed_ret;

static int refusing_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	(void)arg;
	(void)t;
	(void)n;
	return dontneed_ret;
}

/* A receive handle that hands every release to the kernel at once
 * (release_batch 1, or queues them with batch 0), holding tokens 0..n-1
 * of binding 9; SO_DEVMEM_DONTNEED then fails with err. */
static struct devmemtcp_rx *holding(int err, uint32_t batch, struct devmemtcp_frag *f, size_t n)
{
	DEVMEMTCP_OPTS(rx_opts, ro, .release_batch = batch);
	struct devmemtcp_rx *r;

	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &ro, &r), 0);
	alloc_receive_tokens(r, f, n);
	dmt_rx_tokens(r)->dontneed = refusing_dontneed;
	dontneed_ret = err;
	return r;
}

/* The message of a failed SO_DEVMEM_DONTNEED, and the errno. */
static void expect_dontneed_msg(struct devmemtcp_rx *r, int ret, int err)
{
	char want[256];

	assert_int_equal(ret, err);
	snprintf(want, sizeof(want),
		 "SO_DEVMEM_DONTNEED failed: %s: the tokens stay queued on the handle and go to the kernel at the next flush",
		 strerror(-err));
	assert_string_equal(devmemtcp_rx_errmsg(r), want);
}

/* The kernel takes them once it can: the tokens were kept. */
static void expect_kept(struct devmemtcp_rx *r, int n)
{
	dmt_rx_tokens(r)->dontneed = alloc_dontneed;
	alloc_returned = 0;
	assert_int_equal(devmemtcp_rx_flush(r), n);
	assert_int_equal(alloc_returned, n);
	devmemtcp_rx_free(r);
}

static void test_release_dontneed_fails(void **state)
{
	static const int errs[] = { -ENOMEM, -EFAULT };
	struct devmemtcp_frag f[2];
	struct devmemtcp_rx *r;

	for (size_t i = 0; i < 2; i++) {
		r = holding(errs[i], 1, f, 2);
		/* ERRORS devmemtcp_rx_release ENOMEM EFAULT */
		expect_dontneed_msg(r, devmemtcp_rx_release(r, f, 2), errs[i]);
		/* released all the same: a second release is refused */
		assert_int_equal(devmemtcp_rx_release(r, f, 1), -EINVAL);
		expect_kept(r, 2);
	}
}

static void test_flush_dontneed_fails(void **state)
{
	static const int errs[] = { -ENOMEM, -EFAULT };
	struct devmemtcp_frag f[3];
	struct devmemtcp_rx *r;

	for (size_t i = 0; i < 2; i++) {
		r = holding(0, 0, f, 3);
		assert_int_equal(devmemtcp_rx_release(r, f, 3), 0);
		dontneed_ret = errs[i];
		/* ERRORS devmemtcp_rx_flush ENOMEM EFAULT */
		expect_dontneed_msg(r, devmemtcp_rx_flush(r), errs[i]);
		expect_kept(r, 3);
	}
}

static void test_release_all_dontneed_fails(void **state)
{
	static const int errs[] = { -ENOMEM, -EFAULT };
	struct devmemtcp_frag f[3];
	struct devmemtcp_rx *r;

	for (size_t i = 0; i < 2; i++) {
		r = holding(errs[i], 0, f, 3);
		/* ERRORS devmemtcp_rx_release_all ENOMEM EFAULT */
		expect_dontneed_msg(r, devmemtcp_rx_release_all(r), errs[i]);
		/* every token is queued on the handle */
		assert_int_equal(devmemtcp_rx_release(r, f, 1), -EINVAL);
		expect_kept(r, 3);
	}
}

/* Due releases go to the kernel before a receive: their failure fails the
 * receive, which takes nothing. */
static void test_recv_dontneed_fails(void **state)
{
	struct devmemtcp_frag f[2], got[2];
	struct devmemtcp_rx *r;
	char lin[8];
	static const int errs[] = { -ENOMEM, -EFAULT };

	for (size_t i = 0; i < 2; i++) {
		r = holding(0, 0, f, 2);
		assert_int_equal(devmemtcp_rx_release(r, f, 2), 0);
		dontneed_ret = errs[i];
		assert_int_equal(write(sv[1], "y", 1), 1);
		/* ERRORS devmemtcp_rx_recv ENOMEM EFAULT */
		expect_dontneed_msg(r, devmemtcp_rx_recv(r, got, 2, lin, sizeof(lin)), errs[i]);
		expect_kept(r, 2);
		/* the byte is still there */
		assert_int_equal(read(sv[0], lin, sizeof(lin)), 1);
	}
}

/* The socket is no TCP socket any more (its descriptor now names a UDP
 * socket): the kernel refuses SO_DEVMEM_DONTNEED with EBADF. */
static void test_flush_not_tcp(void **state)
{
	DEVMEMTCP_OPTS(rx_opts, ro, .release_batch = 0);
	struct devmemtcp_frag f[2];
	struct devmemtcp_rx *r;
	int pair[2], udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(udp >= 0);
	assert_int_equal(t_tcp_pair(pair), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, pair[0], &ro, &r), 0);
	alloc_receive_tokens(r, f, 2);
	assert_int_equal(devmemtcp_rx_release(r, f, 2), 0);
	dmt_rx_tokens(r)->dontneed = dmt_rx_tokens(rx)->dontneed;	/* the kernel's */
	assert_int_equal(dup2(udp, pair[0]), pair[0]);
	/* ERRORS devmemtcp_rx_flush EBADF */
	expect_dontneed_msg(r, devmemtcp_rx_flush(r), -EBADF);
	devmemtcp_rx_free(r);
	close(udp);
	close(pair[0]);
	close(pair[1]);
}

/* ---- deferred releases whose completion fails ----------------------------- */

static int failing_done(void *arg, bool wait)
{
	(void)wait;
	return *(int *)arg;
}

/* A done function's own errno comes back through flush and release_all;
 * the entry stays and is polled again. */
static void test_done_fails(void **state)
{
	DEVMEMTCP_OPTS(rx_opts, ro);
	struct devmemtcp_frag f[3];
	struct devmemtcp_rx *r;
	int done_ret = -ENOLINK;

	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &ro, &r), 0);
	alloc_receive_tokens(r, f, 3);
	assert_int_equal(devmemtcp_rx_release_after(r, f, 2, failing_done, &done_ret), 0);
	/* ERRORS devmemtcp_rx_flush ANY */
	assert_int_equal(devmemtcp_rx_flush(r), -ENOLINK);
	assert_string_equal(devmemtcp_rx_errmsg(r),
			    "a deferred-release completion failed: Link has been severed");
	assert_int_equal(alloc_returned, 0);
	/* ERRORS devmemtcp_rx_release_all ANY */
	assert_int_equal(devmemtcp_rx_release_all(r), -ENOLINK);
	assert_string_equal(devmemtcp_rx_errmsg(r),
			    "releasing every token: a deferred-release completion failed: Link has been severed: its tokens stay held, the others were released");
	/* token 2 went to the kernel; 0 and 1 wait for their completion */
	assert_int_equal(alloc_returned, 1);
	done_ret = 1;
	assert_int_equal(devmemtcp_rx_flush(r), 2);
	assert_int_equal(alloc_returned, 3);
	devmemtcp_rx_free(r);
}

int main(void)
{
#define T_(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T_(test_plain_data_is_miss),
		T_(test_release_unknown_token),
		T_(test_release_after_checks),
		T_(test_add_buf_checks),
		T_(test_recv_args),
		T_(test_stats_sz),
		T_(test_nonblocking_eagain),
		T_(test_recv_eintr),
		T_(test_recv_efault),
		T_(test_release_dontneed_fails),
		T_(test_flush_dontneed_fails),
		T_(test_release_all_dontneed_fails),
		T_(test_recv_dontneed_fails),
		T_(test_flush_not_tcp),
		T_(test_done_fails),
	};

	return cmocka_run_group_tests_name("rx", tests, NULL, NULL);
}
