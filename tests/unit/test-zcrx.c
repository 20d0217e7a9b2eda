// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * io_uring zero-copy receive without a kernel: the completion parser on
 * CQEs laid out as io_uring/zcrx.c writes them into a CQE32 ring, and the
 * argument and option checks of devmemtcp_zcrx_new.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "zcrx.h"
#include "harness.h"

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
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);

	(void)state;
	if (devmemtcp_ctx_new(&co, &ctx))
		return -1;
	memfd = memfd_create("zcrx-test", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, 2 * MB))
		return -1;
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .fd = memfd, .size = 2 * MB, .flags = DEVMEMTCP_BUF_KEEP_FD);
	return devmemtcp_buf_new(ctx, &bo, &buf) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	devmemtcp_buf_free(buf);
	close(memfd);
	devmemtcp_ctx_free(ctx);
	return 0;
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

/* NULL handles: no crash, the documented errno. */
static void test_null(void **state)
{
	struct devmemtcp_zcrx_stats st = { .sz = sizeof(st) };

	(void)state;
	devmemtcp_zcrx_free(NULL);
	assert_string_equal(devmemtcp_zcrx_errmsg(NULL), "");
	assert_int_equal(devmemtcp_zcrx_wait(NULL, 0), -EINVAL);
	assert_int_equal(devmemtcp_zcrx_stats(NULL, &st), -EINVAL);
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
		cmocka_unit_test(test_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
