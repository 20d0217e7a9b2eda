// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Devmem TX without a NIC: the sendmsg a send builds (cmsg layout, iovecs
 * holding dma-buf offsets, flags), splitting at 1024 iovecs and at the
 * byte cap, resuming partial sends, error-queue parsing of completions laid
 * out as the kernel does for IPv4 and IPv6 (coalesced ranges, the copied
 * code, sequence wrap), the range bookkeeping (never free before its
 * completion), the public calls' argument checks on real sockets, and
 * what a forked child may do with a parent's TX handle and binding.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <libmnl/libmnl.h>
#include <linux/errqueue.h>
#include <linux/genetlink.h>

#include "ctxfixture.h"
#include "forkfixture.h"
#include "devmemtcp.h"
#include "buf.h"
#include "fork.h"
#include "harness.h"
#include "netdev.h"
#include "nl.h"
#include "tx.h"

/* ---- a fake kernel: sendmsg and the error queue ------------------------- */

#define MAX_CALLS 64

struct call {
	size_t niov;
	uint64_t bytes;
	int flags;
	struct iovec first, last;
	/* the control message as sent */
	size_t controllen;
	int level, type;
	size_t cmsg_len;
	uint32_t id;
};

static struct fake {
	struct call calls[MAX_CALLS];
	size_t ncalls;
	/* per call: > 0 send at most that many bytes, < 0 fail with -errno,
	 * 0 send everything; after the script ends, send everything */
	long script[MAX_CALLS];
	size_t nscript;
	/* error-queue messages: recorded control buffers */
	struct {
		char buf[256];
		size_t len;
	} errq[MAX_CALLS];
	size_t errq_head, errq_len;
	uint32_t zc_seq;	/* what the fake kernel numbers the next send */
	int polls;
	bool poll_times_out;	/* the kernel completes nothing */
	bool poll_error;	/* POLLERR without a completion: a socket error */
} fk;

static ssize_t fake_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct call *c = &fk.calls[fk.ncalls];
	struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
	long s = fk.ncalls < fk.nscript ? fk.script[fk.ncalls] : 0;
	uint64_t total = 0;

	assert_true(fk.ncalls < MAX_CALLS);
	fk.ncalls++;
	for (size_t i = 0; i < msg->msg_iovlen; i++)
		total += msg->msg_iov[i].iov_len;
	c->niov = msg->msg_iovlen;
	c->bytes = total;
	c->flags = flags;
	c->first = msg->msg_iov[0];
	c->last = msg->msg_iov[msg->msg_iovlen - 1];
	c->controllen = msg->msg_controllen;
	assert_non_null(cm);
	c->level = cm->cmsg_level;
	c->type = cm->cmsg_type;
	c->cmsg_len = cm->cmsg_len;
	memcpy(&c->id, CMSG_DATA(cm), sizeof(c->id));
	if (s < 0) {
		errno = (int)-s;
		return -1;
	}
	if (s > 0 && (uint64_t)s < total)
		total = (uint64_t)s;
	fk.zc_seq++;
	return (ssize_t)total;
}

/* Queue one zero-copy completion as ip_recv_error/ipv6_recv_error lay it
 * out: the cmsg carries sock_extended_err followed by the offender's
 * address (zeroed for zero-copy notifications). */
static void queue_notif(int family, uint32_t lo, uint32_t hi, bool copied)
{
	struct msghdr msg = { 0 };
	struct sock_extended_err ee = { 0 };
	struct cmsghdr *cm;
	size_t addrlen = family == AF_INET6 ? sizeof(struct sockaddr_in6)
					    : sizeof(struct sockaddr_in);
	char *buf = fk.errq[fk.errq_len].buf;

	memset(buf, 0, sizeof(fk.errq[0].buf));
	ee.ee_errno = 0;
	ee.ee_origin = SO_EE_ORIGIN_ZEROCOPY;
	ee.ee_code = copied ? SO_EE_CODE_ZEROCOPY_COPIED : 0;
	ee.ee_info = lo;
	ee.ee_data = hi;
	msg.msg_control = buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(ee) + addrlen);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = family == AF_INET6 ? SOL_IPV6 : SOL_IP;
	cm->cmsg_type = family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR;
	cm->cmsg_len = CMSG_LEN(sizeof(ee) + addrlen);
	memcpy(CMSG_DATA(cm), &ee, sizeof(ee));
	fk.errq[fk.errq_len++].len = msg.msg_controllen;
}

static ssize_t fake_recvmsg(int fd, struct msghdr *msg, int flags)
{
	assert_true(flags & MSG_ERRQUEUE);
	assert_true(flags & MSG_DONTWAIT);
	if (fk.errq_head == fk.errq_len) {
		errno = EAGAIN;
		return -1;
	}
	assert_true(msg->msg_controllen >= fk.errq[fk.errq_head].len);
	memcpy(msg->msg_control, fk.errq[fk.errq_head].buf,
	       fk.errq[fk.errq_head].len);
	msg->msg_controllen = fk.errq[fk.errq_head].len;
	fk.errq_head++;
	return 0;
}

/* Each poll "lets time pass": the kernel completes everything sent. */
static int fake_poll(struct pollfd *p, nfds_t n, int timeout)
{
	fk.polls++;
	if (fk.poll_times_out) {
		usleep(timeout > 0 ? (useconds_t)timeout * 1000 : 0);
		return 0;
	}
	if (fk.errq_head == fk.errq_len && fk.zc_seq && !fk.poll_error)
		queue_notif(AF_INET, 0, fk.zc_seq - 1, false);
	p[0].revents = POLLERR;
	return 1;
}

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_tx tx;

static void fake_init(const struct devmemtcp_tx_opts *opts, uint64_t size)
{
	memset(&fk, 0, sizeof(fk));
	assert_int_equal(dmt_tx_init(&tx, ctx, 42, AF_INET, 7, 1, size, opts),
			 0);
	tx.sys_sendmsg = fake_sendmsg;
	tx.sys_recvmsg = fake_recvmsg;
	tx.sys_poll = fake_poll;
}

static int setup(void **state)
{
	return devmemtcp_ctx_new(NULL, &ctx);
}

static int teardown(void **state)
{
	devmemtcp_ctx_free(ctx);
	return 0;
}

static int fake_teardown(void **state)
{
	dmt_tx_fini(&tx);
	return 0;
}

/* ---- the sendmsg a send builds ------------------------------------------ */

static void test_cmsg_layout(void **state)
{
	char ctrl[DMT_TX_CTRL_SIZE] __attribute__((aligned(8)));
	struct msghdr msg = { 0 };
	struct cmsghdr *cm;
	uint32_t id;

	memset(ctrl, 0xaa, sizeof(ctrl));
	dmt_tx_put_cmsg(&msg, ctrl, sizeof(ctrl), 0x12345678);
	assert_ptr_equal(msg.msg_control, ctrl);
	assert_int_equal(msg.msg_controllen, CMSG_SPACE(4));
	cm = CMSG_FIRSTHDR(&msg);
	assert_int_equal(cm->cmsg_level, SOL_SOCKET);
	assert_int_equal(cm->cmsg_type, SCM_DEVMEM_DMABUF);
#if defined(__x86_64__) || defined(__aarch64__)
	assert_int_equal(SCM_DEVMEM_DMABUF, 79);
	assert_int_equal(cm->cmsg_len, 20);	/* 16-byte header + __u32 */
	assert_int_equal(msg.msg_controllen, 24);
#endif
	/* a bare __u32, exactly: the kernel rejects any other length */
	assert_int_equal(cm->cmsg_len, CMSG_LEN(sizeof(uint32_t)));
	memcpy(&id, CMSG_DATA(cm), 4);
	assert_int_equal(id, 0x12345678);
	/* padding zeroed, one cmsg only */
	for (size_t i = CMSG_LEN(4); i < CMSG_SPACE(4); i++)
		assert_int_equal(ctrl[i], 0);
	assert_null(CMSG_NXTHDR(&msg, cm));
}

static void test_send_builds_msg(void **state)
{
	const struct devmemtcp_tx_piece p[] = {
		{ 4096, 100 }, { 12345, 7 }, { 0, 0 }, { 65536, 4096 },
	};
	DEVMEMTCP_OPTS(tx_stats, st);

	fake_init(NULL, 1 << 20);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 4, 0), 100 + 7 + 4096);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(fk.calls[0].niov, 3);	/* the empty piece skipped */
	assert_int_equal(fk.calls[0].bytes, 4203);
	assert_true(fk.calls[0].flags & MSG_ZEROCOPY);
	assert_false(fk.calls[0].flags & MSG_DONTWAIT);
	assert_false(fk.calls[0].flags & MSG_MORE);
	/* iov_base is the dma-buf offset */
	assert_int_equal((uintptr_t)fk.calls[0].first.iov_base, 4096);
	assert_int_equal(fk.calls[0].first.iov_len, 100);
	assert_int_equal((uintptr_t)fk.calls[0].last.iov_base, 65536);
	assert_int_equal(fk.calls[0].last.iov_len, 4096);
	assert_int_equal(fk.calls[0].level, SOL_SOCKET);
	assert_int_equal(fk.calls[0].type, SCM_DEVMEM_DMABUF);
	assert_int_equal(fk.calls[0].cmsg_len, CMSG_LEN(4));
	assert_int_equal(fk.calls[0].controllen, CMSG_SPACE(4));
	assert_int_equal(fk.calls[0].id, 7);

	assert_int_equal(devmemtcp_tx_send(&tx, p, 1,
					   DEVMEMTCP_TX_DONTWAIT |
						   DEVMEMTCP_TX_MORE),
			 100);
	assert_true(fk.calls[1].flags & MSG_DONTWAIT);
	assert_true(fk.calls[1].flags & MSG_MORE);
	assert_int_equal(devmemtcp_tx_stats(&tx, &st), 0);
	assert_int_equal(st.send_calls, 2);
	assert_int_equal(st.sendmsg_calls, 2);
	assert_int_equal(st.bytes_sent, 4303);
	assert_int_equal(st.sends_in_flight, 2);
	assert_int_equal(st.bytes_in_flight, 4303);
	/* nothing at all: no syscall */
	assert_int_equal(devmemtcp_tx_send(&tx, NULL, 0, 0), 0);
	assert_int_equal(fk.ncalls, 2);
	/* unknown flags */
	/* ERRORS devmemtcp_tx_send EINVAL */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0x100), -EINVAL);
	assert_string_equal(devmemtcp_tx_errmsg(&tx), "devmemtcp_tx_send: unknown flags 0x100");
}

static void test_range_check(void **state)
{
	const struct devmemtcp_tx_piece ok[] = { { 0, 4096 }, { 4095, 1 } };
	const struct devmemtcp_tx_piece end[] = { { 0, 1 }, { 4000, 97 } };
	const struct devmemtcp_tx_piece wrap[] = { { 8, UINT64_MAX - 4 } };
	const struct devmemtcp_tx_piece far[] = { { 4097, 0 } };
	size_t bad = 99;
	uint64_t total = 0;

	assert_int_equal(dmt_tx_check_pieces(ok, 2, 4096, &bad, &total), 0);
	assert_int_equal(total, 4097);
	assert_int_equal(dmt_tx_check_pieces(end, 2, 4096, &bad, &total),
			 -ERANGE);
	assert_int_equal(bad, 1);
	assert_int_equal(dmt_tx_check_pieces(wrap, 1, 4096, &bad, &total),
			 -ERANGE);
	assert_int_equal(bad, 0);
	assert_int_equal(dmt_tx_check_pieces(far, 1, 4096, &bad, &total),
			 -ERANGE);

	fake_init(NULL, 4096);
	/* ERRORS devmemtcp_tx_send ERANGE */
	assert_int_equal(devmemtcp_tx_send(&tx, end, 2, 0), -ERANGE);
	assert_int_equal(fk.ncalls, 0);	/* nothing sent at all */
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "devmemtcp_tx_send: piece 1 [4000, +97) does not lie inside the 4096-byte dma-buf: pass offsets and lengths within the bound buffer");
}

static void test_split_at_1024_iovs(void **state)
{
	struct devmemtcp_tx_piece *p = calloc(2500, sizeof(*p));
	struct devmemtcp_tx_done d[8];

	/* every other page: nothing merges */
	for (size_t i = 0; i < 2500; i++)
		p[i] = (struct devmemtcp_tx_piece){ i * 8192 + 3, 5 };
	fake_init(NULL, 2500ull * 8192);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 2500, 0), 2500 * 5);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[0].niov, 1024);
	assert_int_equal(fk.calls[1].niov, 1024);
	assert_int_equal(fk.calls[2].niov, 452);
	assert_int_equal((uintptr_t)fk.calls[1].first.iov_base, 1024 * 8192 + 3);
	assert_int_equal((uintptr_t)fk.calls[2].last.iov_base, 2499 * 8192 + 3);
	assert_int_equal(tx.track.in_flight, 3);
	assert_int_equal(tx.track.next_seq, 3);
	/* the second call's 1024 ranges come back on its completion only */
	queue_notif(AF_INET, 1, 1, false);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 8), 8);
	assert_int_equal(d[0].offset, 1024 * 8192 + 3);
	assert_int_equal(d[0].len, 5);
	assert_int_equal(d[0].seq, 1);
	assert_int_equal(d[7].offset, 1031 * 8192 + 3);
	assert_int_equal(tx.track.done_len, 1016);
	free(p);
}

static void test_split_by_bytes_and_opts(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 10000 }, { 20000, 3000 } };
	DEVMEMTCP_OPTS(tx_opts, o, .max_iovs = 4000, .max_call_bytes = 4096);

	fake_init(&o, 1 << 20);
	assert_int_equal(tx.max_iovs, 1024);	/* capped at UIO_MAXIOV */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 2, 0), 13000);
	/* 4096 | 4096 | 1808 + 2288 | 712 */
	assert_int_equal(fk.ncalls, 4);
	assert_int_equal(fk.calls[0].bytes, 4096);
	assert_int_equal(fk.calls[1].bytes, 4096);
	assert_int_equal((uintptr_t)fk.calls[1].first.iov_base, 4096);
	assert_int_equal(fk.calls[2].niov, 2);
	assert_int_equal((uintptr_t)fk.calls[2].first.iov_base, 8192);
	assert_int_equal(fk.calls[2].first.iov_len, 1808);
	assert_int_equal((uintptr_t)fk.calls[2].last.iov_base, 20000);
	assert_int_equal(fk.calls[2].last.iov_len, 2288);
	assert_int_equal((uintptr_t)fk.calls[3].first.iov_base, 22288);
	assert_int_equal(fk.calls[3].bytes, 712);
}

static void test_partial_resume(void **state)
{
	const struct devmemtcp_tx_piece p[] = {
		{ 1000, 300 }, { 5000, 200 }, { 9000, 500 },
	};
	struct devmemtcp_tx_done d[8];
	DEVMEMTCP_OPTS(tx_stats, st);

	fake_init(NULL, 1 << 20);
	/* the kernel takes 350 bytes, then 1, then 149, then the rest */
	fk.script[0] = 350;
	fk.script[1] = 1;
	fk.script[2] = -EINTR;
	fk.script[3] = 149;
	fk.nscript = 4;
	assert_int_equal(devmemtcp_tx_send(&tx, p, 3, 0), 1000);
	assert_int_equal(fk.ncalls, 5);
	/* call 2 resumes inside the second piece */
	assert_int_equal(fk.calls[1].niov, 2);
	assert_int_equal((uintptr_t)fk.calls[1].first.iov_base, 5050);
	assert_int_equal(fk.calls[1].first.iov_len, 150);
	assert_int_equal((uintptr_t)fk.calls[2].first.iov_base, 5051);
	assert_int_equal((uintptr_t)fk.calls[3].first.iov_base, 5051);
	assert_int_equal((uintptr_t)fk.calls[4].first.iov_base, 9000);
	assert_int_equal(fk.calls[4].bytes, 500);
	/* four sendmsg moved bytes: four sequence numbers, exact ranges */
	assert_int_equal(tx.track.next_seq, 4);
	assert_int_equal(devmemtcp_tx_stats(&tx, &st), 0);
	assert_int_equal(st.partial_sends, 3);
	assert_int_equal(st.sendmsg_calls, 4);
	queue_notif(AF_INET6, 0, 0, false);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 8), 2);
	assert_int_equal(d[0].offset, 1000);
	assert_int_equal(d[0].len, 300);
	assert_int_equal(d[1].offset, 5000);
	assert_int_equal(d[1].len, 50);
	queue_notif(AF_INET6, 1, 3, false);
	/* 5050+1 and 5051+149 merge with each other but not with 9000 */
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 8), 2);
	assert_int_equal(d[0].offset, 5050);
	assert_int_equal(d[0].len, 150);
	assert_int_equal(d[0].seq, 1);
	assert_int_equal(d[1].offset, 9000);
	assert_int_equal(d[1].len, 500);
	assert_int_equal(tx.track.in_flight, 0);
	assert_int_equal(tx.track.bytes_in_flight, 0);
}

static void test_nonblocking_partial(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 8192 } };

	fake_init(NULL, 1 << 20);
	fk.script[0] = 3000;
	fk.script[1] = -EAGAIN;
	fk.nscript = 2;
	/* DONTWAIT: stop after a short send, the caller resumes */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, DEVMEMTCP_TX_DONTWAIT),
			 3000);
	assert_int_equal(fk.ncalls, 1);
	/* a non-blocking socket without the flag: EAGAIN ends the loop */
	/* ERRORS devmemtcp_tx_send EAGAIN */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EAGAIN);
	/* an ordinary outcome of a non-blocking send: no message */
	assert_string_equal(devmemtcp_tx_errmsg(&tx), "");
	assert_int_equal(tx.track.next_seq, 1);	/* no number consumed */
}

static void test_enobufs_waits(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 100 }, { 200, 100 } };
	DEVMEMTCP_OPTS(tx_opts, o, .max_call_bytes = 100);
	DEVMEMTCP_OPTS(tx_stats, st);

	fake_init(&o, 1 << 20);
	fk.script[0] = 0;
	fk.script[1] = -ENOBUFS;	/* optmem full of notifications */
	fk.nscript = 2;
	assert_int_equal(devmemtcp_tx_send(&tx, p, 2, 0), 200);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(devmemtcp_tx_stats(&tx, &st), 0);
	assert_int_equal(st.nobufs_waits, 1);
	assert_int_equal(st.completions, 1);	/* seq 0 reaped meanwhile */
	assert_int_equal(st.sends_in_flight, 1);

	/* ENOBUFS with nothing in flight is a real shortage */
	fake_teardown(state);
	fake_init(&o, 1 << 20);
	fk.script[0] = -ENOBUFS;
	fk.nscript = 1;
	/* ERRORS devmemtcp_tx_send ENOBUFS */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -ENOBUFS);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg(MSG_ZEROCOPY) on fd 42 failed with ENOBUFS with nothing in flight: raise net.core.optmem_max");
}

static void test_send_errors_explained(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 100 } };

	fake_init(NULL, 1 << 20);
	fk.script[0] = -EINVAL;
	fk.script[1] = -EFAULT;
	fk.script[2] = -EMSGSIZE;
	fk.script[3] = -EOPNOTSUPP;
	fk.script[4] = -EHOSTUNREACH;
	fk.script[5] = -ENETUNREACH;
	fk.script[6] = -EPIPE;
	fk.script[7] = -ECONNRESET;
	fk.nscript = 8;
	/* ERRORS devmemtcp_tx_send EINVAL */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EINVAL);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg(MSG_ZEROCOPY, SCM_DEVMEM_DMABUF) on fd 42 failed with EINVAL: the kernel does not know TX binding 7 (closed, or an RX binding), SO_ZEROCOPY is off, or the kernel predates devmem TX (Linux 6.16)");
	/* ERRORS devmemtcp_tx_send EFAULT */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EFAULT);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg on fd 42 failed with EFAULT: an offset lies outside the dma-buf as bound (binding 7, 1048576 bytes)");
	/* ERRORS devmemtcp_tx_send EMSGSIZE */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EMSGSIZE);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg on fd 42 failed with EMSGSIZE: more pieces than one packet may carry (MAX_SKB_FRAGS): merge adjacent pieces or lower max_iovs");
	/* ERRORS devmemtcp_tx_send EOPNOTSUPP */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg with SCM_DEVMEM_DMABUF on fd 42 failed with EOPNOTSUPP: this kernel cannot send from device memory: devmem TX needs Linux 6.16 or newer");
	/* ERRORS devmemtcp_tx_send EHOSTUNREACH ENETUNREACH */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EHOSTUNREACH);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg on fd 42 failed: No route to host: no route to the peer");
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -ENETUNREACH);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg on fd 42 failed: Network is unreachable: no route to the peer");
	/* ERRORS devmemtcp_tx_send EPIPE ECONNRESET */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -EPIPE);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg on fd 42 failed: Broken pipe: the connection is closed; in-flight ranges complete as the kernel frees them");
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), -ECONNRESET);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "sendmsg on fd 42 failed: Connection reset by peer: the connection is closed; in-flight ranges complete as the kernel frees them");
	assert_int_equal(tx.track.next_seq, 0);
	assert_int_equal(tx.track.nrecs, 0);
}

/* ---- error-queue parsing ------------------------------------------------- */

static void parse_one(int family, uint32_t lo, uint32_t hi, bool copied)
{
	struct msghdr msg = { 0 };
	struct dmt_tx_notif n;

	memset(&fk, 0, sizeof(fk));
	queue_notif(family, lo, hi, copied);
	msg.msg_control = fk.errq[0].buf;
	msg.msg_controllen = fk.errq[0].len;
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), 1);
	assert_true(n.zerocopy);
	assert_int_equal(n.lo, lo);
	assert_int_equal(n.hi, hi);
	assert_int_equal(n.copied, copied);
	assert_int_equal(n.ee_errno, 0);
}

static void test_parse_errqueue(void **state)
{
	struct msghdr msg = { 0 };
	struct dmt_tx_notif n;
	struct cmsghdr *cm;
	char buf[128] __attribute__((aligned(8)));
	struct sock_extended_err ee = { .ee_errno = EHOSTUNREACH,
					.ee_origin = SO_EE_ORIGIN_ICMP };

	parse_one(AF_INET, 0, 0, false);
	parse_one(AF_INET6, 5, 17, false);	/* coalesced */
	parse_one(AF_INET, 3, 3, true);
	parse_one(AF_INET6, 0xfffffffe, 1, true); /* wrapped */

	/* an ICMP error is not a completion */
	memset(buf, 0, sizeof(buf));
	msg.msg_control = buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(ee));
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_IP;
	cm->cmsg_type = IP_RECVERR;
	cm->cmsg_len = CMSG_LEN(sizeof(ee));
	memcpy(CMSG_DATA(cm), &ee, sizeof(ee));
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), 1);
	assert_false(n.zerocopy);
	assert_int_equal(n.ee_errno, EHOSTUNREACH);
	/* truncated */
	cm->cmsg_len = CMSG_LEN(4);
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), -EBADMSG);
	/* another level: nothing */
	cm->cmsg_level = SOL_SOCKET;
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), 0);
	msg.msg_controllen = 0;
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), 0);
}

/* dmt_tx_parse_errqueue in a child given 5 s: its result, or -ETIME when
 * it does not return (a walk that never ends). */
static int parse_errqueue_timed(const struct msghdr *msg)
{
	struct dmt_tx_notif n;
	pid_t pid = fork();
	int status, r;

	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(5);
		r = dmt_tx_parse_errqueue(msg, &n);
		_exit(r < 0 ? 100 - r : r);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status))
		return -ETIME;
	r = WEXITSTATUS(status);
	return r >= 100 ? 100 - r : r;
}

/*
 * Lengths the kernel never writes must not take the parser outside
 * msg_controllen or into an endless walk.  Reproducers:
 * tests/fuzz/corpus/errqueue/regress-*.
 */
static void test_parse_errqueue_lengths(void **state)
{
	struct sock_extended_err ee = { .ee_origin = SO_EE_ORIGIN_ZEROCOPY,
					.ee_info = 1, .ee_data = 9 };
	struct msghdr msg = { 0 };
	struct dmt_tx_notif n;
	struct cmsghdr *cm;
	char buf[128] __attribute__((aligned(8)));

	/* the buffer ends after the header: the error behind it is not ours */
	memset(buf, 0, sizeof(buf));
	msg.msg_control = buf;
	msg.msg_controllen = sizeof(*cm);
	cm = (struct cmsghdr *)buf;
	cm->cmsg_level = SOL_IP;
	cm->cmsg_type = IP_RECVERR;
	cm->cmsg_len = CMSG_LEN(sizeof(ee));
	memcpy(CMSG_DATA(cm), &ee, sizeof(ee));
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), 0);
	assert_false(n.zerocopy);
	/* ... or ends inside the error */
	msg.msg_controllen = CMSG_LEN(sizeof(ee)) - 4;
	assert_int_equal(dmt_tx_parse_errqueue(&msg, &n), 0);

	/* another cmsg first, whose length wraps when rounded up */
	msg.msg_controllen = CMSG_SPACE(8) + CMSG_SPACE(sizeof(ee));
	cm->cmsg_level = SOL_IP;
	cm->cmsg_type = IP_PKTINFO;
	cm->cmsg_len = SIZE_MAX;
	cm = (struct cmsghdr *)(buf + CMSG_SPACE(8));
	cm->cmsg_level = SOL_IP;
	cm->cmsg_type = IP_RECVERR;
	cm->cmsg_len = CMSG_LEN(sizeof(ee));
	memcpy(CMSG_DATA(cm), &ee, sizeof(ee));
	assert_int_equal(parse_errqueue_timed(&msg), 0);
}

/* ---- range bookkeeping ---------------------------------------------------- */

static void sent(struct dmt_tx_track *t, uint64_t off, uint64_t len)
{
	struct iovec iov = { (void *)(uintptr_t)off, (size_t)len };

	assert_int_equal(dmt_tx_track_reserve(t, 1), 0);
	assert_int_equal(dmt_tx_track_sent(t, &iov, 1, len), 0);
}

static void test_track_order_and_dups(void **state)
{
	struct dmt_tx_track t;
	struct devmemtcp_tx_done d[16];
	struct iovec iov[3] = {
		{ (void *)(uintptr_t)0, 100 },
		{ (void *)(uintptr_t)100, 100 },	/* contiguous: merged */
		{ (void *)(uintptr_t)500, 100 },
	};

	dmt_tx_track_init(&t, 0, NULL, NULL);
	assert_int_equal(dmt_tx_track_reserve(&t, 3), 0);
	/* only 250 bytes went out: 0..200 and 500..550 */
	assert_int_equal(dmt_tx_track_sent(&t, iov, 3, 250), 0);
	sent(&t, 1000, 10);	/* seq 1 */
	sent(&t, 2000, 10);	/* seq 2 */
	assert_int_equal(t.in_flight, 3);
	assert_int_equal(t.bytes_in_flight, 270);
	/* nothing is free before its completion */
	assert_int_equal(dmt_tx_track_pop(&t, d, 16), 0);
	/* out of order: 2 first */
	assert_int_equal(dmt_tx_track_complete(&t, 2, 2, false), 1);
	assert_int_equal(dmt_tx_track_pop(&t, d, 16), 1);
	assert_int_equal(d[0].offset, 2000);
	assert_int_equal(d[0].seq, 2);
	assert_int_equal(t.nrecs, 3);	/* the head is still open */
	/* 0..2 again: 2 is a duplicate, 0 and 1 are new */
	assert_int_equal(dmt_tx_track_complete(&t, 0, 2, true), 3);
	assert_int_equal(dmt_tx_track_pop(&t, d, 16), 3);
	assert_int_equal(d[0].offset, 0);
	assert_int_equal(d[0].len, 200);
	assert_int_equal(d[0].flags, DEVMEMTCP_TX_DONE_COPIED);
	assert_int_equal(d[1].offset, 500);
	assert_int_equal(d[1].len, 50);
	assert_int_equal(d[2].offset, 1000);
	assert_int_equal(t.unknown_completions, 1);
	assert_int_equal(t.copied_completions, 2);
	assert_int_equal(t.nrecs, 0);
	assert_int_equal(t.in_flight, 0);
	assert_int_equal(t.bytes_in_flight, 0);
	/* a completion for something never sent */
	assert_int_equal(dmt_tx_track_complete(&t, 3, 9, false), 0);
	assert_int_equal(t.unknown_completions, 8);
	assert_int_equal(dmt_tx_track_complete(&t, 1, 1, false), 0);
	assert_int_equal(t.unknown_completions, 9);
	dmt_tx_track_fini(&t);
}

static void test_track_wrap(void **state)
{
	struct dmt_tx_track t;
	struct devmemtcp_tx_done d[16];

	dmt_tx_track_init(&t, 0xfffffffd, NULL, NULL);
	for (int i = 0; i < 6; i++)	/* fffffffd fffffffe ffffffff 0 1 2 */
		sent(&t, (uint64_t)i * 4096, 4096);
	assert_int_equal(t.next_seq, 3);
	/* one coalesced notification across the wrap */
	assert_int_equal(dmt_tx_track_complete(&t, 0xfffffffe, 1, false), 4);
	/* contiguous ranges merge on the done queue */
	assert_int_equal(dmt_tx_track_pop(&t, d, 16), 1);
	assert_int_equal(d[0].offset, 4096);
	assert_int_equal(d[0].len, 4 * 4096);
	assert_int_equal(d[0].seq, 0xfffffffe);
	assert_int_equal(t.nrecs, 6);	/* head fffffffd still open */
	/* a range partly before the head (already done) and partly after */
	assert_int_equal(dmt_tx_track_complete(&t, 0xfffffff0, 0xfffffffd,
					       false), 1);
	assert_int_equal(t.unknown_completions, 13);
	assert_int_equal(t.nrecs, 1);
	assert_int_equal(t.head_seq, 2);
	assert_int_equal(dmt_tx_track_complete(&t, 2, 40, false), 1);
	assert_int_equal(t.unknown_completions, 13 + 38);
	assert_int_equal(t.nrecs, 0);
	assert_int_equal(dmt_tx_track_pop(&t, d, 16), 2);
	assert_int_equal(d[0].offset, 0);
	assert_int_equal(d[1].offset, 5 * 4096);
	dmt_tx_track_fini(&t);
}

/* Many sends in flight (ring growth), completed in random-sized coalesced
 * chunks: every byte is reported exactly once, never before its
 * completion. */
static void test_track_stress(void **state)
{
	enum { N = 5000 };
	static uint8_t freed[N];
	struct dmt_tx_track t;
	struct devmemtcp_tx_done d[64];
	uint32_t done_upto = 0;
	size_t got;

	memset(freed, 0, sizeof(freed));
	dmt_tx_track_init(&t, 0xffffff00, NULL, NULL);
	srand(1);
	for (uint32_t i = 0; i < N; i++) {
		struct iovec iov[3] = {
			{ (void *)(uintptr_t)(i * 16ull), 4 },
			{ (void *)(uintptr_t)(i * 16ull + 4), 4 },
			{ (void *)(uintptr_t)(i * 16ull + 12), 4 },
		};

		assert_int_equal(dmt_tx_track_reserve(&t, 3), 0);
		assert_int_equal(dmt_tx_track_sent(&t, iov, 3, 12), 0);
	}
	while (done_upto < N) {
		uint32_t k = 1 + (uint32_t)rand() % 50;

		if (done_upto + k > N)
			k = N - done_upto;
		assert_true(dmt_tx_track_complete(&t, 0xffffff00 + done_upto,
						  0xffffff00 + done_upto + k - 1,
						  false) > 0);
		while ((got = dmt_tx_track_pop(&t, d, 64))) {
			for (size_t j = 0; j < got; j++) {
				/* byte ranges map back to send indexes */
				for (uint64_t b = d[j].offset;
				     b < d[j].offset + d[j].len; b++) {
					uint32_t s = (uint32_t)(b / 16);

					assert_true(s < done_upto + k);
					assert_true(b % 16 < 8 || b % 16 >= 12);
					freed[s]++;
				}
			}
		}
		done_upto += k;
	}
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(freed[i], 12);
	assert_int_equal(t.in_flight, 0);
	assert_int_equal(t.completions, N);
	assert_int_equal(t.unknown_completions, 0);
	dmt_tx_track_fini(&t);
}

/* ---- the handle: reap, wait, callback ------------------------------------ */

static struct devmemtcp_tx_done cb_got[64];
static size_t cb_n, cb_calls;

static void done_cb(void *user, const struct devmemtcp_tx_done *d, size_t n)
{
	assert_ptr_equal(user, &cb_n);
	for (size_t i = 0; i < n && cb_n < 64; i++)
		cb_got[cb_n++] = d[i];
	cb_calls++;
}

static void test_reap_wait_callback(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 4096 }, { 8192, 4096 } };
	struct devmemtcp_tx_done d[4];
	DEVMEMTCP_OPTS(tx_opts, o, .done_fn = done_cb, .done_user = &cb_n,
		       .max_call_bytes = 4096);
	DEVMEMTCP_OPTS(tx_stats, st);

	/* queue mode: wait polls, then reap hands the ranges out */
	fake_init(NULL, 1 << 20);
	assert_int_equal(devmemtcp_tx_wait(&tx, 0), 0);	/* nothing in flight */
	assert_int_equal(devmemtcp_tx_send(&tx, p, 2, 0), 8192);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 4), 0);
	assert_int_equal(devmemtcp_tx_wait(&tx, 1000), 2);
	assert_int_equal(fk.polls, 1);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 1), 1);
	assert_int_equal(d[0].offset, 0);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 4), 1);
	assert_int_equal(d[0].offset, 8192);
	assert_int_equal(devmemtcp_tx_reap(&tx, NULL, 0), 0);
	/* ERRORS devmemtcp_tx_reap EINVAL */
	assert_int_equal(devmemtcp_tx_reap(&tx, NULL, 3), -EINVAL);
	assert_string_equal(devmemtcp_tx_errmsg(&tx), "devmemtcp_tx_reap: out is NULL with max 3");
	fake_teardown(state);

	/* callback mode: ranges go to the callback, reap returns counts */
	cb_n = cb_calls = 0;
	fake_init(&o, 1 << 20);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 2, 0), 8192);
	assert_int_equal(tx.track.next_seq, 2);
	queue_notif(AF_INET, 1, 1, false);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 4), 1);
	assert_int_equal(cb_n, 1);
	assert_int_equal(cb_got[0].offset, 8192);
	assert_int_equal(cb_got[0].seq, 1);
	queue_notif(AF_INET, 0, 0, true);
	assert_int_equal(devmemtcp_tx_wait(&tx, -1), 1);
	assert_int_equal(cb_n, 2);
	assert_int_equal(cb_got[1].offset, 0);
	assert_int_equal(cb_got[1].flags, DEVMEMTCP_TX_DONE_COPIED);
	assert_int_equal(devmemtcp_tx_stats(&tx, &st), 0);
	assert_int_equal(st.notifications, 2);
	assert_int_equal(st.completions, 2);
	assert_int_equal(st.copied_completions, 1);
	assert_int_equal(st.ranges_done, 2);
	assert_int_equal(st.bytes_done, 8192);
	assert_int_equal(st.sends_in_flight, 0);
	assert_int_equal(st.bytes_in_flight, 0);
}

static void test_wait_timeout(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 4096 } };

	fake_init(NULL, 1 << 20);
	fk.poll_times_out = true;
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), 4096);
	/* 0 ms: a non-blocking check */
	/* ERRORS devmemtcp_tx_wait ETIMEDOUT */
	assert_int_equal(devmemtcp_tx_wait(&tx, 0), -ETIMEDOUT);
	assert_int_equal(fk.polls, 0);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "fd 42: no completion within 0 ms (1 sends, 4096 bytes in flight): is the peer reading?");
	assert_int_equal(devmemtcp_tx_wait(&tx, 30), -ETIMEDOUT);
	assert_true(fk.polls >= 1);
	/* the completion arrives late: still reported, once */
	fk.poll_times_out = false;
	assert_int_equal(devmemtcp_tx_wait(&tx, 30), 1);
	assert_int_equal(devmemtcp_tx_wait(&tx, 30), 0);
	assert_int_equal(tx.track.ranges_done, 1);
}

/* Out of memory while queueing a completion: the kernel will not repeat
 * it, so the handle keeps it and a later call delivers it. */
static void test_completion_kept_on_enomem(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 4096 }, { 8192, 4096 } };
	struct devmemtcp_tx_done d[4];
	DEVMEMTCP_OPTS(tx_opts, o, .max_call_bytes = 4096);

	fake_init(&o, 1 << 20);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 2, 0), 8192);
	queue_notif(AF_INET, 0, 1, false);
	tx.track.fail_alloc = true;
	/* ERRORS devmemtcp_tx_reap ENOMEM */
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 4), -ENOMEM);
	assert_int_equal(fk.errq_head, 1);	/* read from the kernel */
	assert_int_equal(tx.track.in_flight, 2);
	assert_int_equal(tx.track.notifications, 0);
	assert_string_equal(devmemtcp_tx_errmsg(&tx),
			    "out of memory queueing completed ranges (the completion is kept; call again)");
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 4), 2);
	assert_int_equal(d[0].offset, 0);
	assert_int_equal(d[0].len, 4096);
	assert_int_equal(d[1].offset, 8192);
	assert_int_equal(d[1].seq, 1);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 4), 0);
	assert_int_equal(tx.track.in_flight, 0);
	assert_int_equal(tx.track.notifications, 1);
}

/* The peer reset the connection with sends in flight: the socket reports
 * its error instead of a completion. */
static void test_wait_socket_error(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 4096 } };
	struct linger lg = { 1, 0 };
	char want[256];
	int sv[2];

	fake_init(NULL, 1 << 20);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), 4096);
	/* a real socket whose peer sent RST: SO_ERROR is ECONNRESET */
	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(sv[1]);
	usleep(20000);
	tx.fd = sv[0];
	fk.poll_error = true;
	/* ERRORS devmemtcp_tx_wait ECONNRESET */
	assert_int_equal(devmemtcp_tx_wait(&tx, 1000), -ECONNRESET);
	snprintf(want, sizeof(want),
		 "fd %d: the connection failed (Connection reset by peer) with 1 sends (4096 bytes) not yet completed",
		 sv[0]);
	assert_string_equal(devmemtcp_tx_errmsg(&tx), want);
	close(sv[0]);
}

/* ---- public calls on real sockets ----------------------------------------- */

static int tcp_pair(int *cfd, int *sfd, int family)
{
	struct sockaddr_storage a = { 0 };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in)
					  : sizeof(struct sockaddr_in6);
	int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0)
		return -1;
	a.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
	if (bind(l, (struct sockaddr *)&a, len) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		close(l);
		return -1;
	}
	*cfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cfd < 0 || connect(*cfd, (struct sockaddr *)&a, len)) {
		close(l);
		return -1;
	}
	*sfd = accept(l, NULL, NULL);
	close(l);
	return *sfd < 0 ? -1 : 0;
}

static void test_public_args(void **state)
{
	struct devmemtcp_binding rxb = { .tx = false, .id = 3 };
	struct devmemtcp_binding txb = { .tx = true, .id = 4, .ifindex = 1 };
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_tx *t = (void *)1;
	const struct devmemtcp_tx_piece p[] = { { 0, 100 } };
	DEVMEMTCP_OPTS(tx_opts, o);
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = 4096);
	DEVMEMTCP_OPTS(tx_stats, st);
	int sv[2], cfd, sfd, one = 0;
	socklen_t len = sizeof(one);
	ssize_t r;

	assert_int_equal(devmemtcp_tx_new(NULL, 0, &txb, NULL, &t), -EINVAL);
	assert_int_equal(devmemtcp_tx_new(ctx, 0, NULL, NULL, &t), -EINVAL);
	assert_null(t);
	/* ERRORS devmemtcp_tx_new EINVAL */
	assert_int_equal(devmemtcp_tx_new(ctx, 0, &rxb, NULL, &t), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_tx_new: binding 3 is an RX binding: sending needs one made by devmemtcp_bind_tx()");
	o.sz = 1;
	assert_int_equal(devmemtcp_tx_new(ctx, 0, &txb, &o, &t), -EINVAL);
	o.sz = sizeof(o);
	/* ERRORS devmemtcp_tx_new EBADF */
	assert_int_equal(devmemtcp_tx_new(ctx, -1, &txb, &o, &t), -EBADF);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_tx_new: fd -1 is not a socket (Bad file descriptor): pass a connected TCP socket");
	sv[0] = memfd_create("t", MFD_CLOEXEC);
	/* ERRORS devmemtcp_tx_new ENOTSOCK */
	assert_int_equal(devmemtcp_tx_new(ctx, sv[0], &txb, &o, &t), -ENOTSOCK);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_tx_new: fd %d is not a socket (Socket operation on non-socket): pass a connected TCP socket",
			     sv[0]);
	close(sv[0]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* ERRORS devmemtcp_tx_new EPROTOTYPE */
	assert_int_equal(devmemtcp_tx_new(ctx, sv[0], &txb, NULL, &t),
			 -EPROTOTYPE);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_tx_new: fd %d is not a TCP socket (an AF_UNIX socket): devmem TX needs a connected TCP socket (IPv4 or IPv6)",
			     sv[0]);
	close(sv[0]);
	close(sv[1]);
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* ERRORS devmemtcp_tx_new ENOTCONN */
	assert_int_equal(devmemtcp_tx_new(ctx, sv[0], &txb, NULL, &t),
			 -ENOTCONN);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_tx_new: fd %d is not connected (Transport endpoint is not connected): connect() it first, or pass the socket accept() returns",
			     sv[0]);
	close(sv[0]);

	assert_int_equal(devmemtcp_tx_errmsg(NULL)[0], '\0');
	assert_int_equal(devmemtcp_tx_fd(NULL), -EINVAL);
	assert_int_equal(devmemtcp_tx_send(NULL, p, 1, 0), -EINVAL);
	assert_int_equal(devmemtcp_tx_reap(NULL, NULL, 0), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_tx_reap: tx is NULL");
	/* ERRORS devmemtcp_tx_wait EINVAL */
	assert_int_equal(devmemtcp_tx_wait(NULL, 0), -EINVAL);
	/* no handle: the message is the thread's */
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_tx_wait: tx is NULL");
	assert_int_equal(devmemtcp_tx_stats(NULL, &st), -EINVAL);
	devmemtcp_tx_free(NULL);

	assert_int_equal(devmemtcp_bind_tx(NULL, 1, NULL, NULL, NULL), -EINVAL);
	/* ERRORS devmemtcp_bind_tx EINVAL */
	assert_int_equal(devmemtcp_bind_tx(ctx, 1, NULL, &bo, NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_tx: rx_page_size is an RX setting: leave it 0 for bind-tx");

	/* a connected TCP socket over loopback, both families */
	for (int fam = 0; fam < 2; fam++) {
		int family = fam ? AF_INET6 : AF_INET;

		if (tcp_pair(&cfd, &sfd, family)) {
			print_message("no %s loopback: skipped\n",
				      fam ? "IPv6" : "IPv4");
			continue;
		}
		assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT,
					       &buf), 0);
		buf->size = 1 << 20;
		txb.buf = buf;
		assert_int_equal(devmemtcp_tx_new(ctx, cfd, &txb, NULL, &t), 0);
		assert_int_equal(devmemtcp_tx_fd(t), cfd);
		/* SO_ZEROCOPY is on now */
		assert_int_equal(getsockopt(cfd, SOL_SOCKET, SO_ZEROCOPY, &one,
					    &len), 0);
		assert_int_equal(one, 1);
		assert_int_equal(devmemtcp_tx_wait(t, 0), 0);
		assert_int_equal(devmemtcp_tx_reap(t, NULL, 0), 0);
		/* out of range is caught before the kernel sees it */
		assert_int_equal(devmemtcp_tx_send(t, &(struct devmemtcp_tx_piece){
							   1 << 20, 1 }, 1, 0),
				 -ERANGE);
		/* binding 4 does not exist (or the kernel predates devmem
		 * TX): the kernel says EINVAL, which we explain */
		r = devmemtcp_tx_send(t, p, 1, 0);
		assert_int_equal(r, -EINVAL);
		assert_non_null(strstr(devmemtcp_tx_errmsg(t), "TX binding 4"));
		assert_int_equal(devmemtcp_tx_stats(t, &st), 0);
		assert_int_equal(st.send_calls, 1);
		assert_int_equal(st.bytes_sent, 0);
		assert_int_equal(st.sends_in_flight, 0);
		/* an old caller's smaller stats struct is filled up to its sz */
		{
			struct {
				size_t sz;
				uint64_t bytes_sent;
				uint64_t canary;
			} small = { offsetof(struct devmemtcp_tx_stats,
					     send_calls), 5, 77 };

			assert_int_equal(devmemtcp_tx_stats(
						 t, (struct devmemtcp_tx_stats *)&small),
					 0);
			assert_int_equal(small.bytes_sent, 0);
			assert_int_equal(small.canary, 77);
		}
		devmemtcp_tx_free(t);
		devmemtcp_buf_free(buf);
		close(cfd);
		close(sfd);
	}
}

/* ---- fork ----------------------------------------------------------------- */

#define REFUSED(fn, what) DMT_FORK_REFUSED(fn, what)

/* The port id of a netlink socket, or 0 when it is closed. */
static uint32_t nl_portid(int fd)
{
	struct sockaddr_nl a = { 0 };
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len) || a.nl_family != AF_NETLINK)
		return 0;
	return a.nl_pid;
}

/*
 * A parent sends (one send in flight) and holds a TX binding while a child
 * uses them: sending, waiting and reaping (which would send on or read the
 * completions of the parent's socket) and a TX handle over the parent's
 * binding fail with EBADFD, saying why, and touch no socket; statistics
 * read; freeing the handle and closing the binding free the child's memory
 * and its copy of the binding's socket only.  The parent's handle and
 * binding work on.
 */
static void test_fork(void **state)
{
	const struct devmemtcp_tx_piece p[] = { { 0, 4096 } };
	struct devmemtcp_binding *b = calloc(1, sizeof(*b));
	struct devmemtcp_tx_done d[2];
	uint32_t portid;
	int status, sv[2], nlfd;
	pid_t pid;

	(void)state;
	fake_init(NULL, 1 << 20);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), 4096);
	assert_non_null(b);
	assert_int_equal(dmt_nl_open(&b->nl, NETLINK_GENERIC), 0);
	b->ctx = ctx;
	b->tx = true;
	b->id = 9;
	b->ifindex = 1;
	b->fork_gen = dmt_fork_gen();
	nlfd = mnl_socket_get_fd(b->nl->sock);
	portid = nl_portid(nlfd);
	assert_true(portid != 0);
	assert_int_equal(t_tcp_pair(sv), 0);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		DEVMEMTCP_OPTS(tx_stats, st);
		struct devmemtcp_tx *mine = (void *)1;
		size_t calls = fk.ncalls;

		/* ERRORS devmemtcp_tx_send EBADFD */
		CHILD_CHECK(devmemtcp_tx_send(&tx, p, 1, 0) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_tx_errmsg(&tx),
				    REFUSED("devmemtcp_tx_send", "TX handle")));
		/* ERRORS devmemtcp_tx_wait EBADFD */
		CHILD_CHECK(devmemtcp_tx_wait(&tx, 0) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_tx_errmsg(&tx),
				    REFUSED("devmemtcp_tx_wait", "TX handle")));
		/* ERRORS devmemtcp_tx_reap EBADFD */
		CHILD_CHECK(devmemtcp_tx_reap(&tx, d, 2) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_tx_errmsg(&tx),
				    REFUSED("devmemtcp_tx_reap", "TX handle")));
		/* no sendmsg, no poll, no read of the error queue */
		CHILD_CHECK(fk.ncalls == calls && fk.polls == 0 && fk.errq_head == 0);
		CHILD_CHECK(devmemtcp_tx_stats(&tx, &st) == 0);
		CHILD_CHECK(st.sends_in_flight == 1 && st.bytes_in_flight == 4096);
		/* ERRORS devmemtcp_tx_new EBADFD */
		CHILD_CHECK(devmemtcp_tx_new(ctx, sv[0], b, NULL, &mine) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx),
				    REFUSED("devmemtcp_tx_new", "binding")));
		CHILD_CHECK(mine == NULL);
		devmemtcp_binding_close(b);
		CHILD_CHECK(fcntl(nlfd, F_GETFD) < 0);	/* its copy went */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the binding's socket is the parent's still: bound, same port */
	assert_int_equal(nl_portid(nlfd), portid);
	assert_int_equal(devmemtcp_tx_wait(&tx, 1000), 1);
	assert_int_equal(devmemtcp_tx_reap(&tx, d, 2), 1);
	assert_int_equal(d[0].offset, 0);
	assert_int_equal(d[0].len, 4096);
	assert_int_equal(devmemtcp_tx_send(&tx, p, 1, 0), 4096);
	devmemtcp_binding_close(b);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmsg_layout),
		cmocka_unit_test_teardown(test_send_builds_msg, fake_teardown),
		cmocka_unit_test_teardown(test_range_check, fake_teardown),
		cmocka_unit_test_teardown(test_split_at_1024_iovs, fake_teardown),
		cmocka_unit_test_teardown(test_split_by_bytes_and_opts,
					  fake_teardown),
		cmocka_unit_test_teardown(test_partial_resume, fake_teardown),
		cmocka_unit_test_teardown(test_nonblocking_partial,
					  fake_teardown),
		cmocka_unit_test_teardown(test_enobufs_waits, fake_teardown),
		cmocka_unit_test_teardown(test_send_errors_explained,
					  fake_teardown),
		cmocka_unit_test(test_parse_errqueue),
		cmocka_unit_test(test_track_order_and_dups),
		cmocka_unit_test(test_track_wrap),
		cmocka_unit_test(test_track_stress),
		cmocka_unit_test_teardown(test_reap_wait_callback, fake_teardown),
		cmocka_unit_test_teardown(test_wait_timeout, fake_teardown),
		cmocka_unit_test_teardown(test_completion_kept_on_enomem,
					  fake_teardown),
		cmocka_unit_test_teardown(test_wait_socket_error, fake_teardown),
		cmocka_unit_test(test_public_args),
		cmocka_unit_test(test_parse_errqueue_lengths),
		cmocka_unit_test_teardown(test_fork, fake_teardown),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
