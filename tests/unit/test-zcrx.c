// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * io_uring zero-copy receive without a kernel: the completion parser on
 * CQEs laid out as io_uring/zcrx.c writes them into a CQE32 ring, and the
 * argument and option checks of devmemtcp_zcrx_new, a handle whose
 * kernel is the test, and what a forked child may do with a parent's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "buf.h"
#include "ctxfixture.h"
#include "forkfixture.h"
#include "fork.h"
#include "zcrx.h"
#include "harness.h"
#include "testhooks.h"

#define MB (1ull << 20)
#define AREA (32 * MB)
#define PAGE 4096u

/*
 * One completion as io_zcrx_queue_cqe() writes it: user_data, res = len,
 * flags = IORING_CQE_F_MORE, then the zcrx half with off = the offset in
 * the area + the area's token (area id << IORING_ZCRX_AREA_SHIFT) and a
 * zero pad.  The final completion of the request (io_req_set_res) is a
 * plain CQE without F_MORE whose zcrx half is left as it was.
 */
static void put_cqe(uint8_t *p, uint64_t user_data, int32_t res, uint32_t flags,
		    uint64_t off)
{
	uint64_t pad = 0;

	memcpy(p, &user_data, 8);
	memcpy(p + 8, &res, 4);
	memcpy(p + 12, &flags, 4);
	memcpy(p + 16, &off, 8);
	memcpy(p + 24, &pad, 8);
}

static int parse(const uint8_t *p, struct dmt_zcrx_completion *c)
{
	return dmt_zcrx_cqe_parse(p, 0, AREA, PAGE, c);
}

static void test_data(void **state)
{
	uint8_t cqe[32];
	struct dmt_zcrx_completion c;

	(void)state;
	/* a page-pool buffer: offset 0 of buffer 5, a full MSS */
	put_cqe(cqe, 0x100000001ull, 1448, DMT_IORING_CQE_F_MORE, 5 * PAGE);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_DATA);
	assert_int_equal(c.user_data, 0x100000001ull);
	assert_int_equal(c.off, 5 * PAGE);
	assert_int_equal(c.len, 1448);
	assert_int_equal(c.res, 1448);
	/* a fragment in the middle of a buffer, ending at its end */
	put_cqe(cqe, 7, 2048, DMT_IORING_CQE_F_MORE, 9 * PAGE + 2048);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_DATA);
	assert_int_equal(c.off, 9 * PAGE + 2048);
	assert_int_equal(c.len, 2048);
	/* the last byte of the area */
	put_cqe(cqe, 7, 1, DMT_IORING_CQE_F_MORE, AREA - 1);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_DATA);
	assert_int_equal(c.off, AREA - 1);
}

static void test_area_token(void **state)
{
	const uint64_t token = 3ull << DMT_IORING_ZCRX_AREA_SHIFT;
	uint8_t cqe[32];
	struct dmt_zcrx_completion c;

	(void)state;
	/* area 3: its token is removed from the offset */
	put_cqe(cqe, 1, 100, DMT_IORING_CQE_F_MORE, token | (2 * PAGE + 8));
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, token, AREA, PAGE, &c),
			 DMT_ZCRX_CQE_DATA);
	assert_int_equal(c.off, 2 * PAGE + 8);
	/* another area's completion is refused */
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, 0, AREA, PAGE, &c), -EPROTO);
	put_cqe(cqe, 1, 100, DMT_IORING_CQE_F_MORE, 2 * PAGE);
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, token, AREA, PAGE, &c), -EPROTO);
}

static void test_large_buffers(void **state)
{
	uint8_t cqe[32];
	struct dmt_zcrx_completion c;

	(void)state;
	/* rx_buf_len 64 KiB (7.0): a completion may cover more than a page */
	put_cqe(cqe, 1, 9000, DMT_IORING_CQE_F_MORE, 65536 + 4096);
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, 0, AREA, 65536, &c), DMT_ZCRX_CQE_DATA);
	assert_int_equal(c.len, 9000);
	/* ... which with 4 KiB buffers would cross one */
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, 0, AREA, PAGE, &c), -EPROTO);
	/* a buffer size that is no power of two cannot be */
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, 0, AREA, 65536 + 4096, &c), -EPROTO);
	assert_int_equal(dmt_zcrx_cqe_parse(cqe, 0, AREA, 0, &c), -EPROTO);
}

static void test_ends(void **state)
{
	uint8_t cqe[32];
	struct dmt_zcrx_completion c;

	(void)state;
	/* end of stream: res 0, no F_MORE (the zcrx half is stale) */
	put_cqe(cqe, 9, 0, 0, 0xdeadbeefull);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_END);
	assert_int_equal(c.user_data, 9);
	assert_int_equal(c.len, 0);
	/* failures: the copy fallback without a buffer, another provider's
	 * buffer, a full CQ, a cancel */
	put_cqe(cqe, 9, -ENOMEM, 0, 0);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_ERROR);
	assert_int_equal(c.res, -ENOMEM);
	put_cqe(cqe, 9, -EFAULT, 0, 0);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_ERROR);
	assert_int_equal(c.res, -EFAULT);
	put_cqe(cqe, 9, -ENOSPC, 0, 0);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_ERROR);
	put_cqe(cqe, 9, -ECANCELED, 0, 0);
	assert_int_equal(parse(cqe, &c), DMT_ZCRX_CQE_ERROR);
	assert_int_equal(c.res, -ECANCELED);
}

static void test_impossible(void **state)
{
	uint8_t cqe[32];
	struct dmt_zcrx_completion c;

	(void)state;
	/* bytes that end the request: a multishot receive never does that */
	put_cqe(cqe, 1, 100, 0, 0);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	/* F_MORE with no bytes, or an error */
	put_cqe(cqe, 1, 0, DMT_IORING_CQE_F_MORE, 0);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	put_cqe(cqe, 1, -EINVAL, DMT_IORING_CQE_F_MORE, 0);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	/* outside the area, or past its end */
	put_cqe(cqe, 1, 100, DMT_IORING_CQE_F_MORE, AREA);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	put_cqe(cqe, 1, 2, DMT_IORING_CQE_F_MORE, AREA - 1);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	/* across a buffer boundary */
	put_cqe(cqe, 1, 200, DMT_IORING_CQE_F_MORE, PAGE - 100);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	/* a length near 2^31 must not wrap the checks */
	put_cqe(cqe, 1, INT32_MAX, DMT_IORING_CQE_F_MORE, 0);
	assert_int_equal(parse(cqe, &c), -EPROTO);
	put_cqe(cqe, 1, 100, DMT_IORING_CQE_F_MORE, UINT64_MAX >> 16);
	assert_int_equal(parse(cqe, &c), -EPROTO);
}

/* A snapshot of a CQE32 ring: data for two sockets, then one's end. */
static void test_ring(void **state)
{
	uint8_t ring[4 * 32 + 1];
	uint8_t *cq = ring + 1;	/* not even 8-byte aligned */
	struct dmt_zcrx_completion c[4];
	int kinds[4];

	(void)state;
	put_cqe(cq, 0x100000001ull, 1448, DMT_IORING_CQE_F_MORE, 0);
	put_cqe(cq + 32, 0x200000002ull, 1448, DMT_IORING_CQE_F_MORE, PAGE);
	put_cqe(cq + 64, 0x100000001ull, 600, DMT_IORING_CQE_F_MORE, 2 * PAGE);
	put_cqe(cq + 96, 0x100000001ull, 0, 0, 0);
	for (int i = 0; i < 4; i++)
		kinds[i] = parse(cq + 32 * i, &c[i]);
	assert_int_equal(kinds[0], DMT_ZCRX_CQE_DATA);
	assert_int_equal(kinds[1], DMT_ZCRX_CQE_DATA);
	assert_int_equal(kinds[2], DMT_ZCRX_CQE_DATA);
	assert_int_equal(kinds[3], DMT_ZCRX_CQE_END);
	assert_int_equal(c[1].user_data, 0x200000002ull);
	assert_int_equal(c[1].off, PAGE);
	assert_int_equal(c[2].len, 600);
}

/* ---- devmemtcp_zcrx_new before the kernel ------------------------------- */

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_buf *buf;
static int memfd = -1;

static int setup(void **state)
{
	(void)state;
	return ctxfix_memfd_setup(2 * MB, &ctx, &memfd, &buf);
}

static int teardown(void **state)
{
	(void)state;
	return ctxfix_memfd_teardown(ctx, memfd, buf);
}

static void expect(int ret, int want, const char *msg)
{
	assert_int_equal(ret, want);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), msg);
}

static void test_new_args(void **state)
{
	struct devmemtcp_zcrx *z = (void *)1;
	char want[256];

	(void)state;
	assert_int_equal(devmemtcp_zcrx_new(NULL, 1, 0, buf, NULL, &z), -EINVAL);
	/* ERRORS devmemtcp_zcrx_new EINVAL */
	expect(devmemtcp_zcrx_new(ctx, 1, 0, buf, NULL, NULL), -EINVAL,
	       "devmemtcp_zcrx_new: zcrx pointer is NULL");
	snprintf(want, sizeof(want),
		 "devmemtcp_zcrx_new: ifindex 0, buf %p: pass if_nametoindex() of the interface and a buffer",
		 (void *)buf);
	expect(devmemtcp_zcrx_new(ctx, 0, 0, buf, NULL, &z), -EINVAL, want);
	assert_null(z);
	expect(devmemtcp_zcrx_new(ctx, 1, 0, NULL, NULL, &z), -EINVAL,
	       "devmemtcp_zcrx_new: ifindex 1, buf (nil): pass if_nametoindex() of the interface and a buffer");
}

static void test_new_opts(void **state)
{
	struct devmemtcp_zcrx *z = NULL;
	char msg[256];

	(void)state;
	DEVMEMTCP_OPTS(zcrx_opts, flags, .flags = 2);
	expect(devmemtcp_zcrx_new(ctx, 1, 0, buf, &flags, &z), -EINVAL,
	       "devmemtcp_zcrx_new: unknown flags 0x2");
	DEVMEMTCP_OPTS(zcrx_opts, rq, .rq_entries = 100);
	/* ERRORS devmemtcp_zcrx_new EINVAL */
	expect(devmemtcp_zcrx_new(ctx, 1, 0, buf, &rq, &z), -EINVAL,
	       "devmemtcp_zcrx_new: rq_entries 100 and cq_entries 0 must be 0 or powers of two (at most 32768 and 65536)");
	DEVMEMTCP_OPTS(zcrx_opts, big, .rq_entries = 65536, .cq_entries = 64);
	expect(devmemtcp_zcrx_new(ctx, 1, 0, buf, &big, &z), -EINVAL,
	       "devmemtcp_zcrx_new: rq_entries 65536 and cq_entries 64 must be 0 or powers of two (at most 32768 and 65536)");
	/* an options struct from a newer caller with unknown fields set */
	struct {
		struct devmemtcp_zcrx_opts o;
		uint64_t newer;
	} tail = { .o = { .sz = sizeof(tail) }, .newer = 1 };
	assert_int_equal(devmemtcp_zcrx_new(ctx, 1, 0, buf, &tail.o, &z), -EINVAL);
	assert_null(z);
	snprintf(msg, sizeof(msg), "%s", devmemtcp_ctx_errmsg(ctx));
	assert_non_null(strstr(msg, "devmemtcp_zcrx_opts"));
}

static void test_new_buf_size(void **state)
{
	struct devmemtcp_buf *odd = NULL;
	struct devmemtcp_zcrx *z = NULL;

	(void)state;
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .fd = memfd, .size = 1000, .flags = DEVMEMTCP_BUF_KEEP_FD);
	assert_int_equal(devmemtcp_buf_new(ctx, &bo, &odd), 0);
	expect(devmemtcp_zcrx_new(ctx, 1, 0, odd, NULL, &z), -EINVAL,
	       "devmemtcp_zcrx_new: the buffer's size 1000 is not a multiple of the page size");
	assert_null(z);
	devmemtcp_buf_free(odd);
}

/* The handle cannot be allocated. */
static void test_new_no_memory(void **state)
{
	struct devmemtcp_zcrx *z = (void *)1;

	(void)state;
	dmt_test_alloc_fail(1, false);
	/* ERRORS devmemtcp_zcrx_new ENOMEM */
	expect(devmemtcp_zcrx_new(ctx, 1, 0, buf, NULL, &z), -ENOMEM,
	       "devmemtcp_zcrx_new: out of memory");
	dmt_test_alloc_fail(0, false);
	assert_null(z);
}

/* NULL handles: no crash, the documented errno. */
static void test_null(void **state)
{
	struct devmemtcp_zcrx_stats st = { .sz = sizeof(st) };

	(void)state;
	devmemtcp_zcrx_free(NULL);
	assert_string_equal(devmemtcp_zcrx_errmsg(NULL), "");
	/* ERRORS devmemtcp_zcrx_wait EINVAL */
	assert_int_equal(devmemtcp_zcrx_wait(NULL, 0), -EINVAL);
	/* no handle: the message is the thread's */
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_zcrx_wait: zcrx is NULL");
	assert_int_equal(devmemtcp_zcrx_stats(NULL, &st), -EINVAL);
}

/* ---- the handle against a fake kernel ---------------------------------------- */

/* The kernel's side of a fake handle's rings. */
struct kern {
	struct dmt_zcrx_fake_rings r;
	struct {
		int fd;
		uint64_t tag;
	} armed[8];
	int narmed, cancels;
};

static uint32_t acquire(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Take the SQEs: remember each socket's receive (the latest per fd). */
static void k_sqes(struct kern *k)
{
	uint32_t tail = acquire(k->r.sq_tail);

	while (*k->r.sq_head != tail) {
		const struct dmt_io_uring_sqe *sqe =
			&k->r.sqes[*k->r.sq_head & (k->r.sq_entries - 1)];
		int i;

		if (sqe->opcode == DMT_IORING_OP_ASYNC_CANCEL) {
			k->cancels++;
		} else {
			assert_int_equal(sqe->opcode, DMT_IORING_OP_RECV_ZC);
			assert_int_equal(sqe->ioprio, DMT_IORING_RECV_MULTISHOT);
			assert_int_equal(sqe->len, 0);
			for (i = 0; i < k->narmed && k->armed[i].fd != sqe->fd; i++)
				;
			if (i == k->narmed)
				k->narmed++;
			k->armed[i].fd = sqe->fd;
			k->armed[i].tag = sqe->user_data;
		}
		__atomic_store_n(k->r.sq_head, *k->r.sq_head + 1, __ATOMIC_RELEASE);
	}
}

static uint64_t k_tag(struct kern *k, int fd)
{
	k_sqes(k);
	for (int i = 0; i < k->narmed; i++)
		if (k->armed[i].fd == fd)
			return k->armed[i].tag;
	fail_msg("no receive armed for fd %d", fd);
	return 0;
}

static void k_post(struct kern *k, uint64_t tag, int32_t res, uint32_t flags,
		   uint64_t off)
{
	uint32_t tail = *k->r.cq_tail;

	put_cqe(k->r.cqes + (size_t)(tail & (k->r.cq_entries - 1)) * 32, tag, res, flags,
		off | k->r.area_token);
	__atomic_store_n(k->r.cq_tail, tail + 1, __ATOMIC_RELEASE);
}

static void k_data(struct kern *k, int fd, uint64_t off, int32_t len)
{
	k_post(k, k_tag(k, fd), len, DMT_IORING_CQE_F_MORE, off);
}

/* Take up to max refill entries. */
static uint32_t k_refills(struct kern *k, struct dmt_zcrx_rqe *out, uint32_t max)
{
	uint32_t head = *k->r.rq_head, tail = acquire(k->r.rq_tail), n = 0;

	for (; head != tail && n < max; head++)
		out[n++] = k->r.rqes[head & (k->r.rq_entries - 1)];
	__atomic_store_n(k->r.rq_head, head, __ATOMIC_RELEASE);
	return n;
}

struct fake {
	struct devmemtcp_zcrx *z;
	struct kern k;
	int fd[2];
	int peer[2];		/* the other ends: the sockets are connected */
	struct devmemtcp_rx *rx[2];
};

/* A fake handle on area b with nsocks receive handles. */
static void fake_open_on(struct fake *f, struct devmemtcp_buf *b, uint32_t rq_entries,
			 int nsocks)
{
	memset(f, 0, sizeof(*f));
	assert_int_equal(dmt_zcrx_fake_new(ctx, b, rq_entries, &f->z, &f->k.r), 0);
	for (int i = 0; i < nsocks; i++) {
		DEVMEMTCP_OPTS(rx_opts, ro, .zcrx = f->z);

		int sv[2];

		assert_int_equal(t_tcp_pair(sv), 0);
		f->fd[i] = sv[0];
		f->peer[i] = sv[1];
		assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
		assert_int_equal(devmemtcp_rx_new(ctx, f->fd[i], &ro, &f->rx[i]), 0);
	}
}

/* ... on the dma-buf area of the fixture's buffer. */
static void fake_open(struct fake *f, uint32_t rq_entries, int nsocks)
{
	fake_open_on(f, buf, rq_entries, nsocks);
}

static void fake_close(struct fake *f)
{
	for (int i = 0; i < 2; i++) {
		if (!f->rx[i])
			continue;
		devmemtcp_rx_free(f->rx[i]);
		close(f->fd[i]);
		close(f->peer[i]);
	}
	devmemtcp_zcrx_free(f->z);
}

static struct devmemtcp_zcrx_stats fstats(const struct fake *f)
{
	struct devmemtcp_zcrx_stats st = { .sz = sizeof(st) };

	assert_int_equal(devmemtcp_zcrx_stats(f->z, &st), 0);
	return st;
}

static int recv_n(struct devmemtcp_rx *rx, struct devmemtcp_frag *frags, size_t max)
{
	static char lin[64];

	return devmemtcp_rx_recv(rx, frags, max, lin, 1 << 30);
}

static void test_fake_receive(void **state)
{
	struct devmemtcp_frag fr[8];
	struct dmt_zcrx_rqe rqe[8];
	struct devmemtcp_rx_stats rs = { .sz = sizeof(rs) };
	struct devmemtcp_zcrx_stats st;
	struct fake f;
	char want[256];

	(void)state;
	fake_open(&f, 64, 1);
	/* nothing yet: the first receive arms the socket's multishot receive */
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_data(&f.k, f.fd[0], 0, 1448);
	k_data(&f.k, f.fd[0], 4096, 1448);
	k_data(&f.k, f.fd[0], 2 * 4096 + 100, 500);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 3);
	assert_int_equal(fr[0].offset, 0);
	assert_int_equal(fr[0].len, 1448);
	assert_int_equal(fr[1].offset, 4096);
	assert_int_equal(fr[2].offset, 2 * 4096 + 100);
	assert_int_equal(fr[2].len, 500);
	for (int i = 0; i < 3; i++) {
		/* the import buffer maps offset o to address o */
		assert_int_equal(fr[i].addr, fr[i].offset);
		assert_int_equal(fr[i].flags, 0);
		assert_int_equal(fr[i].binding_id, 0);
	}
	assert_true(fr[0].token != fr[1].token && fr[1].token != fr[2].token);
	/* released out of order: the kernel gets exactly those buffers */
	assert_int_equal(devmemtcp_rx_release(f.rx[0], &fr[2], 1), 0);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], &fr[0], 1), 0);
	assert_true(devmemtcp_rx_flush(f.rx[0]) >= 0);
	assert_int_equal(k_refills(&f.k, rqe, 8), 2);
	assert_true((rqe[0].off == 2 * 4096 + 100 && rqe[1].off == 0) ||
		    (rqe[1].off == 2 * 4096 + 100 && rqe[0].off == 0));
	assert_int_equal(rqe[0].len + rqe[1].len, 1948);
	/* a release twice is refused, nothing goes to the kernel */
	snprintf(want, sizeof(want),
		 "devmemtcp_rx_release: token %u of fragment 0 is not outstanding (released already, listed twice, or never received): nothing was released",
		 fr[0].token);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], &fr[0], 1), -EINVAL);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]), want);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], &fr[1], 1), 0);
	assert_true(devmemtcp_rx_flush(f.rx[0]) >= 0);
	assert_int_equal(k_refills(&f.k, rqe, 8), 1);
	assert_int_equal(rqe[0].off, 4096);
	st = fstats(&f);
	assert_int_equal(st.frags, 3);
	assert_int_equal(st.completions, 3);
	assert_int_equal(st.held, 0);
	assert_int_equal(st.held_max, 3);
	assert_int_equal(st.refills, 3);
	assert_int_equal(st.sockets, 1);
	assert_int_equal(st.copy_count, -1);
	devmemtcp_rx_stats(f.rx[0], &rs);
	assert_int_equal(rs.frags, 3);
	assert_int_equal(rs.dmabuf_bytes, 3396);
	assert_int_equal(rs.tokens_outstanding, 0);
	assert_int_equal(rs.tokens_released, 3);
	/* end of stream, and it stays so */
	k_post(&f.k, k_tag(&f.k, f.fd[0]), 0, 0, 0);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 0);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 0);
	fake_close(&f);
}

static void test_fake_demux(void **state)
{
	struct devmemtcp_frag fr[8];
	struct fake f;

	(void)state;
	fake_open(&f, 64, 2);
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 0);	/* arms both */
	k_data(&f.k, f.fd[0], 0, 100);
	k_data(&f.k, f.fd[1], 4096, 200);
	k_data(&f.k, f.fd[0], 8192, 300);
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 2);
	/* each socket gets its own completions, in order */
	assert_int_equal(recv_n(f.rx[1], fr, 8), 1);
	assert_int_equal(fr[0].offset, 4096);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 2);
	assert_int_equal(fr[0].offset, 0);
	assert_int_equal(fr[1].offset, 8192);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], fr, 2), 0);
	/* len bounds the bytes handed out (the first whatever its length) */
	k_data(&f.k, f.fd[1], 3 * 4096, 1000);
	k_data(&f.k, f.fd[1], 4 * 4096, 1000);
	k_data(&f.k, f.fd[1], 5 * 4096, 1000);
	assert_int_equal(devmemtcp_rx_recv(f.rx[1], fr + 1, 7, fr, 1500), 1);
	assert_int_equal(devmemtcp_rx_recv(f.rx[1], fr + 2, 7, fr, 2000), 2);
	/* a socket freed with fragments waiting: they go back, its receive is
	 * cancelled */
	k_data(&f.k, f.fd[0], 6 * 4096, 10);
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 1);
	devmemtcp_rx_free(f.rx[0]);
	f.rx[0] = NULL;
	close(f.fd[0]);
	k_sqes(&f.k);
	assert_int_equal(f.k.cancels, 1);
	assert_int_equal(fstats(&f).sockets, 1);
	fake_close(&f);
}

static void test_fake_refill_full(void **state)
{
	struct devmemtcp_frag *fr = calloc(128, sizeof(*fr));
	struct dmt_zcrx_rqe rqe[128];
	struct devmemtcp_zcrx_stats st;
	struct fake f;
	int n = 0;

	(void)state;
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 128), -EAGAIN);
	for (int i = 0; i < 100; i++)
		k_data(&f.k, f.fd[0], (uint64_t)i * 4096, 1448);
	while (n < 100) {
		int got = recv_n(f.rx[0], fr + n, (size_t)(128 - n));

		assert_true(got > 0);
		n += got;
	}
	/* 100 releases, a ring of 64: 36 wait for the ring's thread */
	assert_int_equal(devmemtcp_rx_release(f.rx[0], fr, 100), 0);
	assert_true(devmemtcp_rx_flush(f.rx[0]) >= 0);
	st = fstats(&f);
	assert_int_equal(st.refills, 64);
	assert_int_equal(st.refill_queued, 36);
	assert_int_equal(st.refill_waiting, 36);
	assert_int_equal(st.refill_ring_max, 64);
	assert_int_equal(st.held, 0);
	assert_int_equal(k_refills(&f.k, rqe, 128), 64);
	/* the ring's thread moves them once the kernel made room */
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 0);
	assert_int_equal(k_refills(&f.k, rqe, 128), 36);
	st = fstats(&f);
	assert_int_equal(st.refills, 100);
	assert_int_equal(st.refill_waiting, 0);
	assert_int_equal(st.refill_queue_max, 36);
	fake_close(&f);
	free(fr);
}

static void test_fake_ends(void **state)
{
	struct devmemtcp_frag fr[8];
	struct fake f;
	char want[512];

	(void)state;
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	/* a full CQ ends the receive: armed again */
	k_post(&f.k, k_tag(&f.k, f.fd[0]), -ENOSPC, 0, 0);
	f.k.narmed = 0;
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	assert_int_equal(fstats(&f).rearms, 1);
	k_data(&f.k, f.fd[0], 4096, 10);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 1);
	/* bytes from another provider's queue: a steering miss */
	k_post(&f.k, k_tag(&f.k, f.fd[0]), -EFAULT, 0, 0);
	/* ERRORS devmemtcp_rx_recv EREMOTEIO */
	snprintf(want, sizeof(want),
		 "fd %d: the flow arrives on another queue than fake queue 0 (one with another memory provider): the kernel cannot place its bytes in this zcrx area (steering miss); steer it to queue 0 with an ntuple rule (devmemtcp_nic_open() flows)",
		 f.fd[0]);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EREMOTEIO);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]), want);
	/* the error stays */
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EREMOTEIO);
	fake_close(&f);

	/* the copy fallback into a dma-buf area (this buffer has no CPU
	 * mapping), no steering information: header split is suspect */
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_post(&f.k, k_tag(&f.k, f.fd[0]), -ENOMEM, 0, 0);
	snprintf(want, sizeof(want),
		 "fd %d: the NIC did not split some payload from its headers and the kernel cannot copy it into a dma-buf area: check header split (tcp-data-split on, hds-thresh 0) or use a user-memory area",
		 f.fd[0]);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EREMOTEIO);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]), want);
	fake_close(&f);

	/* a completion outside the area ends the socket's stream */
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_data(&f.k, f.fd[0], 2 * MB, 100);
	/* ERRORS devmemtcp_rx_recv EPROTO */
	snprintf(want, sizeof(want),
		 "fd %d: the kernel wrote a completion outside the zcrx area: unexpected kernel behaviour",
		 f.fd[0]);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EPROTO);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]), want);
	/* bytes after the hole are not handed out: their buffer goes back */
	k_data(&f.k, f.fd[0], 4096, 100);
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 1);	/* ended counts */
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EPROTO);
	{
		struct dmt_zcrx_rqe rqe[4];

		assert_int_equal(k_refills(&f.k, rqe, 4), 1);
		assert_int_equal(rqe[0].off, 4096);
		assert_int_equal(rqe[0].len, 100);
	}
	fake_close(&f);
}

/* Deferred release (what devmemtcp_gpu_release_after uses): the buffers
 * reach the refill ring only once the completion says so. */
static int done_calls;

static int done_after_two(void *arg, bool wait)
{
	(void)arg;
	return wait || ++done_calls >= 2;
}

static void test_fake_release_after(void **state)
{
	struct devmemtcp_frag fr[8];
	struct dmt_zcrx_rqe rqe[8];
	struct fake f;

	(void)state;
	done_calls = 0;
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_data(&f.k, f.fd[0], 0, 100);
	k_data(&f.k, f.fd[0], 4096, 200);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 2);
	assert_int_equal(devmemtcp_rx_release_after(f.rx[0], fr, 2, done_after_two, NULL), 0);
	assert_int_equal(devmemtcp_rx_flush(f.rx[0]), 0);	/* not done yet */
	assert_int_equal(k_refills(&f.k, rqe, 8), 0);
	assert_int_equal(fstats(&f).held, 2);
	assert_int_equal(devmemtcp_rx_flush(f.rx[0]), 2);	/* done */
	assert_int_equal(k_refills(&f.k, rqe, 8), 2);
	assert_int_equal(fstats(&f).held, 0);
	fake_close(&f);
}

/* The token table cannot grow: the fragments wait for the next receive. */
static void test_fake_no_memory(void **state)
{
	struct devmemtcp_frag fr[8];
	struct fake f;

	(void)state;
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_data(&f.k, f.fd[0], 0, 100);
	k_data(&f.k, f.fd[0], 4096, 200);
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 1);
	dmt_test_alloc_fail(1, false);
	/* ERRORS devmemtcp_rx_recv ENOMEM */
	assert_int_equal(recv_n(f.rx[0], fr, 8), -ENOMEM);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]),
			    "devmemtcp_rx_recv: out of memory for the token table");
	dmt_test_alloc_fail(0, false);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 2);
	assert_int_equal(fr[0].offset, 0);
	assert_int_equal(fr[1].offset, 4096);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], fr, 2), 0);
	fake_close(&f);
}

/* The copy fallback into a user-memory area found no free buffer while
 * the application holds none: no buffer can come back, the receive says
 * so instead of waiting for ever. */
static void test_fake_copy_starved(void **state)
{
	const struct devmemtcp_segment seg = { 0, 2 * MB, 0 };
	struct devmemtcp_buf *host;
	struct devmemtcp_frag fr[8];
	struct fake f;
	char want[512];

	(void)state;
	/* a buffer the CPU maps: a user-memory area, into which the kernel copies */
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &host), 0);
	host->size = 2 * MB;
	host->cpu_map = mmap(NULL, 2 * MB, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(host->cpu_map != MAP_FAILED);
	assert_int_equal(dmt_buf_set_segments(host, &seg, 1), 0);
	fake_open_on(&f, host, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_post(&f.k, k_tag(&f.k, f.fd[0]), -ENOMEM, 0, 0);
	/* ERRORS devmemtcp_rx_recv ENOBUFS */
	snprintf(want, sizeof(want),
		 "fd %d: the kernel must copy this flow's bytes (it arrives on another queue than fake queue 0) and found no free buffer in the area, while the application holds none: steer the flow to queue 0, or use a larger buffer",
		 f.fd[0]);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -ENOBUFS);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]), want);
	fake_close(&f);
	devmemtcp_buf_free(host);
}

struct other {
	struct fake *f;
	int recv, wait;
	char recv_msg[512], wait_msg[512];
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	struct devmemtcp_frag fr[1];

	o->recv = recv_n(o->f->rx[0], fr, 1);
	snprintf(o->recv_msg, sizeof(o->recv_msg), "%s", devmemtcp_rx_errmsg(o->f->rx[0]));
	o->wait = devmemtcp_zcrx_wait(o->f->z, 0);
	snprintf(o->wait_msg, sizeof(o->wait_msg), "%s", devmemtcp_zcrx_errmsg(o->f->z));
	return NULL;
}

/* io_uring has one issuer: the thread that drives the ring first owns it. */
static void test_fake_other_thread(void **state)
{
	static const char busy[] =
		"the zcrx handle of fake queue 0 is driven by another thread: receive on all its sockets from that one thread (io_uring single issuer)";
	struct other o = { 0 };
	struct fake f;
	pthread_t t;

	(void)state;
	fake_open(&f, 64, 1);
	o.f = &f;
	assert_int_equal(pthread_create(&t, NULL, other_thread, &o), 0);
	pthread_join(t, NULL);
	/* ERRORS devmemtcp_rx_recv EBUSY */
	assert_int_equal(o.recv, -EBUSY);
	assert_string_equal(o.recv_msg, busy);
	/* ERRORS devmemtcp_zcrx_wait EBUSY */
	assert_int_equal(o.wait, -EBUSY);
	assert_string_equal(o.wait_msg, busy);
	fake_close(&f);
}

/* A freed handle lives on while receive handles use it: they, and new
 * ones, are refused. */
static void test_fake_freed(void **state)
{
	static const char freed[] = "the zcrx handle of fake queue 0 was freed";
	struct devmemtcp_frag fr[1];
	struct devmemtcp_rx *late = (void *)1;
	struct fake f;
	int sv[2];

	(void)state;
	fake_open(&f, 64, 1);
	devmemtcp_zcrx_free(f.z);
	/* ERRORS devmemtcp_rx_recv ESHUTDOWN */
	assert_int_equal(recv_n(f.rx[0], fr, 1), -ESHUTDOWN);
	assert_string_equal(devmemtcp_rx_errmsg(f.rx[0]), freed);
	/* ERRORS devmemtcp_zcrx_wait ESHUTDOWN */
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), -ESHUTDOWN);
	assert_string_equal(devmemtcp_zcrx_errmsg(f.z), freed);
	assert_int_equal(t_tcp_pair(sv), 0);
	DEVMEMTCP_OPTS(rx_opts, ro, .zcrx = f.z);
	/* ERRORS devmemtcp_rx_new ESHUTDOWN */
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], &ro, &late), -ESHUTDOWN);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_rx_new: the zcrx handle was freed");
	assert_null(late);
	close(sv[0]);
	close(sv[1]);
	/* the last receive handle drops the last reference */
	devmemtcp_rx_free(f.rx[0]);
	close(f.fd[0]);
	close(f.peer[0]);
}

/* A zcrx receive takes TCP sockets only: the socket check of
 * devmemtcp_rx_new refuses anything else before the handle sees it. */
static void test_fake_not_tcp(void **state)
{
	struct devmemtcp_rx *rx = (void *)1;
	struct fake f;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	(void)state;
	fake_open(&f, 64, 0);
	DEVMEMTCP_OPTS(rx_opts, ro, .zcrx = f.z);
	assert_int_equal(devmemtcp_rx_new(ctx, fd, &ro, &rx), -EPROTOTYPE);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_rx_new: fd %d is not a TCP socket (a datagram socket): devmem TCP needs a connected TCP socket (IPv4 or IPv6)",
			     fd);
	assert_null(rx);
	assert_int_equal(fstats(&f).sockets, 0);
	close(fd);
	fake_close(&f);
}

/*
 * Releases from other threads while the ring's thread reaps, hands out
 * and drains (a ThreadSanitizer target): two sockets, each released by its
 * own thread, a 64-entry ring.  Every buffer comes back exactly once.
 */
#define T_BUFS 512
#define T_FRAGS 20000

struct releaser {
	pthread_t t;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct devmemtcp_rx *rx;
	struct devmemtcp_frag fr[256];
	int n;			/* > 0: a batch to release; -1: stop */
	int failed;
};

static void *release_main(void *arg)
{
	struct releaser *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->n)
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->n < 0)
			break;
		pthread_mutex_unlock(&r->lock);
		if (devmemtcp_rx_release(r->rx, r->fr, (size_t)r->n) ||
		    devmemtcp_rx_flush(r->rx) < 0)
			r->failed++;
		pthread_mutex_lock(&r->lock);
		r->n = 0;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static bool releaser_idle(struct releaser *r)
{
	bool idle;

	pthread_mutex_lock(&r->lock);
	idle = r->n == 0;
	pthread_mutex_unlock(&r->lock);
	return idle;
}

/* Block until r has released what it was given. */
static void releaser_wait(struct releaser *r)
{
	pthread_mutex_lock(&r->lock);
	while (r->n > 0)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

static void releaser_give(struct releaser *r, int n)
{
	pthread_mutex_lock(&r->lock);
	r->n = n;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void test_fake_threads(void **state)
{
	static struct releaser rel[2];
	static bool out[T_BUFS];
	struct dmt_zcrx_rqe rqe[T_BUFS];
	uint32_t free_list[T_BUFS], nfree = T_BUFS, posted = 0, back = 0;
	uint64_t seed = 1;
	struct fake f;

	(void)state;
	fake_open(&f, 64, 2);
	for (uint32_t i = 0; i < T_BUFS; i++)
		free_list[i] = i;
	for (int i = 0; i < 2; i++) {
		rel[i] = (struct releaser){ .rx = f.rx[i] };
		pthread_mutex_init(&rel[i].lock, NULL);
		pthread_cond_init(&rel[i].cond, NULL);
		pthread_create(&rel[i].t, NULL, release_main, &rel[i]);
	}
	assert_int_equal(devmemtcp_zcrx_wait(f.z, 0), 0);
	while (posted < T_FRAGS || back < posted) {
		uint32_t n = k_refills(&f.k, rqe, T_BUFS);

		/* buffers back from the application: each was out, once */
		for (uint32_t i = 0; i < n; i++) {
			uint32_t b = (uint32_t)(rqe[i].off / 4096);

			assert_true(b < T_BUFS && out[b]);
			out[b] = false;
			free_list[nfree++] = b;
		}
		back += n;
		/* the NIC fills a few buffers, for either socket */
		for (int i = 0; i < 16 && nfree && posted < T_FRAGS; i++, posted++) {
			uint32_t pick = (uint32_t)(t_rand(&seed) % nfree), b = free_list[pick];

			free_list[pick] = free_list[--nfree];
			out[b] = true;
			k_data(&f.k, f.fd[posted % 2], (uint64_t)b * 4096, 1 + (int32_t)(b % 4000));
		}
		/* hand out on the ring's thread, release on the others */
		devmemtcp_zcrx_wait(f.z, 0);
		for (int s = 0; s < 2; s++) {
			int got;

			if (!releaser_idle(&rel[s])) {
				/* let it run: under valgrind, whose threads
				 * take turns, a polling loop can keep it
				 * waiting for minutes */
				sched_yield();
				continue;
			}
			got = recv_n(f.rx[s], rel[s].fr, 256);
			if (got > 0)
				releaser_give(&rel[s], got);
			else
				assert_int_equal(got, -EAGAIN);
		}
	}
	for (int i = 0; i < 2; i++) {
		releaser_wait(&rel[i]);
		releaser_give(&rel[i], -1);
		pthread_join(rel[i].t, NULL);
		assert_int_equal(rel[i].failed, 0);
	}
	assert_int_equal(back, T_FRAGS);
	assert_int_equal(nfree, T_BUFS);
	assert_int_equal(fstats(&f).held, 0);
	assert_int_equal(fstats(&f).frags, T_FRAGS);
	fake_close(&f);
}

#define REFUSED(fn, what) DMT_FORK_REFUSED(fn, what)

/*
 * A parent holds two fragments of a zcrx receiver while a child uses its
 * handles: waiting on the ring (which would drive the parent's io_uring)
 * and a receiver of its own on the parent's zcrx handle fail with EBADFD,
 * saying why; statistics read; freeing the receiver and the handle puts
 * nothing in the refill ring and cancels no receive.  The parent's
 * fragments go back once, from the parent.
 */
static void test_fake_fork(void **state)
{
	struct devmemtcp_frag fr[8];
	struct dmt_zcrx_rqe rqe[8];
	struct fake f;
	int status, sv[2];
	pid_t pid;

	(void)state;
	fake_open(&f, 64, 1);
	assert_int_equal(recv_n(f.rx[0], fr, 8), -EAGAIN);
	k_data(&f.k, f.fd[0], 0, 1448);
	k_data(&f.k, f.fd[0], 4096, 1448);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 2);
	assert_int_equal(t_tcp_pair(sv), 0);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		DEVMEMTCP_OPTS(rx_opts, ro, .zcrx = f.z);
		struct devmemtcp_zcrx_stats st = { .sz = sizeof(st) };
		struct devmemtcp_rx *mine = (void *)1;

		CHILD_CHECK(recv_n(f.rx[0], fr, 8) == -EBADFD);
		/* ERRORS devmemtcp_zcrx_wait EBADFD */
		CHILD_CHECK(devmemtcp_zcrx_wait(f.z, 0) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_zcrx_errmsg(f.z),
				    REFUSED("devmemtcp_zcrx_wait", "zcrx handle")));
		/* ERRORS devmemtcp_rx_new EBADFD */
		CHILD_CHECK(devmemtcp_rx_new(ctx, sv[0], &ro, &mine) == -EBADFD);
		CHILD_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx),
				    REFUSED("devmemtcp_rx_new", "zcrx handle")));
		CHILD_CHECK(mine == NULL);
		CHILD_CHECK(devmemtcp_zcrx_stats(f.z, &st) == 0);
		CHILD_CHECK(st.held == 2 && st.sockets == 1 && st.frags == 2);
		devmemtcp_rx_free(f.rx[0]);
		/* nothing went to the (child's view of the) kernel */
		k_sqes(&f.k);
		CHILD_CHECK(f.k.cancels == 0);
		CHILD_CHECK(k_refills(&f.k, rqe, 8) == 0);
		devmemtcp_zcrx_free(f.z);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(sv[0]);
	close(sv[1]);
	/* the parent's: received on, and given back once */
	assert_int_equal(fstats(&f).held, 2);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], fr, 2), 0);
	assert_true(devmemtcp_rx_flush(f.rx[0]) >= 0);
	assert_int_equal(k_refills(&f.k, rqe, 8), 2);
	assert_int_equal(rqe[0].off + rqe[1].off, 4096);
	k_data(&f.k, f.fd[0], 8192, 100);
	assert_int_equal(recv_n(f.rx[0], fr, 8), 1);
	assert_int_equal(fr[0].offset, 8192);
	assert_int_equal(devmemtcp_rx_release(f.rx[0], fr, 1), 0);
	fake_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_area_token),
		cmocka_unit_test(test_large_buffers),
		cmocka_unit_test(test_ends),
		cmocka_unit_test(test_impossible),
		cmocka_unit_test(test_ring),
		cmocka_unit_test_setup_teardown(test_new_args, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_opts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_buf_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_no_memory, setup, teardown),
		cmocka_unit_test(test_null),
		cmocka_unit_test_setup_teardown(test_fake_receive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_demux, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_refill_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_ends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_release_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_no_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_copy_starved, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_other_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_freed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_not_tcp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_fork, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
