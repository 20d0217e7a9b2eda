// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* cmsg parsing on control buffers laid out as the kernel lays them out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rx.h"

/* A control buffer filled the way put_cmsg() fills it. */
struct ctrl {
	union {
		char buf[64 * CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))];
		struct cmsghdr align;
	} u;
	size_t len;
	struct msghdr msg;
};

static void ctrl_init(struct ctrl *c)
{
	memset(c, 0, sizeof(*c));
}

static void put(struct ctrl *c, int level, int type, const void *data,
		size_t dlen)
{
	struct cmsghdr *cm = (struct cmsghdr *)(c->u.buf + c->len);

	cm->cmsg_level = level;
	cm->cmsg_type = type;
	cm->cmsg_len = CMSG_LEN(dlen);
	memcpy(CMSG_DATA(cm), data, dlen);
	c->len += CMSG_SPACE(dlen);
	c->msg.msg_control = c->u.buf;
	c->msg.msg_controllen = c->len;
}

static void put_dmabuf(struct ctrl *c, uint64_t off, uint32_t size,
		       uint32_t token, uint32_t id)
{
	struct dmt_dmabuf_cmsg d = { off, size, token, id, 0 };

	put(c, SOL_SOCKET, SCM_DEVMEM_DMABUF, &d, sizeof(d));
}

static void put_linear(struct ctrl *c, uint32_t size)
{
	struct dmt_dmabuf_cmsg d = { 0, size, 0, 0, 0 };

	put(c, SOL_SOCKET, SCM_DEVMEM_LINEAR, &d, sizeof(d));
}

static void test_layout(void **state)
{
	/* uio.h: 24 bytes; CMSG_SPACE 40 on LP64 */
	assert_int_equal(sizeof(struct dmt_dmabuf_cmsg), 24);
	assert_int_equal(offsetof(struct dmt_dmabuf_cmsg, frag_token), 12);
	assert_int_equal(offsetof(struct dmt_dmabuf_cmsg, dmabuf_id), 16);
	assert_int_equal(sizeof(struct dmt_dmabuf_token), 8);
	if (sizeof(long) == 8)
		assert_int_equal(CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg)), 40);
	assert_int_equal(SCM_DEVMEM_DMABUF, 79);
	assert_int_equal(SCM_DEVMEM_LINEAR, 78);
	assert_int_equal(SO_DEVMEM_DONTNEED, 80);
	assert_int_equal(MSG_SOCK_DEVMEM, 0x2000000);
}

static void test_dmabuf_only(void **state)
{
	struct devmemtcp_frag f[8];
	struct dmt_parse p;
	struct ctrl c;

	ctrl_init(&c);
	put_dmabuf(&c, 0x10000, 4096, 7, 3);
	put_dmabuf(&c, 0x3000, 4096, 8, 3);
	put_dmabuf(&c, 0x5a8, 100, 9, 3);
	assert_int_equal(dmt_cmsg_parse(&c.msg, 8292, f, 8, &p), 3);
	assert_int_equal(p.ndmabuf, 3);
	assert_int_equal(p.dmabuf_bytes, 8292);
	assert_int_equal(p.linear_bytes, 0);
	assert_int_equal(f[0].offset, 0x10000);
	assert_int_equal(f[1].offset, 0x3000);
	assert_int_equal(f[2].offset, 0x5a8);
	assert_int_equal(f[2].len, 100);
	assert_int_equal(f[2].token, 9);
	assert_int_equal(f[2].binding_id, 3);
	assert_int_equal(f[2].flags, 0);
}

static void test_interleaved_linear(void **state)
{
	struct devmemtcp_frag f[8];
	struct dmt_parse p;
	struct ctrl c;

	ctrl_init(&c);
	put_linear(&c, 52);
	put_dmabuf(&c, 0x2000, 1448, 1, 5);
	put_linear(&c, 10);
	put_dmabuf(&c, 0x7000, 4096, 2, 5);
	assert_int_equal(dmt_cmsg_parse(&c.msg, 52 + 1448 + 10 + 4096, f, 8, &p), 4);
	assert_int_equal(p.nlinear, 2);
	assert_int_equal(p.linear_bytes, 62);
	assert_true(f[0].flags & DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(f[0].offset, 0);	/* first linear bytes at buffer start */
	assert_int_equal(f[0].len, 52);
	assert_int_equal(f[1].flags, 0);
	assert_true(f[2].flags & DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(f[2].offset, 52);	/* stream order within the iovec */
	assert_int_equal(f[2].len, 10);
	assert_int_equal(f[3].token, 2);
}

static void test_plain_data(void **state)
{
	struct devmemtcp_frag f[2];
	struct dmt_parse p;
	struct ctrl c;

	ctrl_init(&c);
	assert_int_equal(dmt_cmsg_parse(&c.msg, 1000, f, 2, &p), 1);
	assert_true(f[0].flags & DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(f[0].len, 1000);
	assert_int_equal(p.linear_bytes, 1000);
	assert_int_equal(p.ndmabuf + p.nlinear, 0);
}

static void test_unknown_skipped(void **state)
{
	struct devmemtcp_frag f[4];
	struct dmt_parse p;
	struct ctrl c;
	int ts[4] = { 1, 2, 3, 4 };

	ctrl_init(&c);
	put(&c, SOL_SOCKET, 35 /* SO_TIMESTAMPNS */, ts, sizeof(ts));
	put_dmabuf(&c, 0, 4096, 1, 1);
	put(&c, 6 /* SOL_TCP */, SCM_DEVMEM_DMABUF, ts, sizeof(ts));
	assert_int_equal(dmt_cmsg_parse(&c.msg, 4096, f, 4, &p), 1);
	assert_int_equal(p.nunknown, 2);
	assert_int_equal(f[0].len, 4096);
}

static void test_too_many(void **state)
{
	struct devmemtcp_frag f[2];
	struct dmt_parse p;
	struct ctrl c;

	ctrl_init(&c);
	for (int i = 0; i < 3; i++)
		put_dmabuf(&c, (uint64_t)i * 4096, 4096, (uint32_t)i, 1);
	assert_int_equal(dmt_cmsg_parse(&c.msg, 3 * 4096, f, 2, &p), -ENOBUFS);
}

static void test_bytes_mismatch(void **state)
{
	struct devmemtcp_frag f[4];
	struct dmt_parse p;
	struct ctrl c;

	/* a truncated control buffer lost a cmsg: bytes not accounted for */
	ctrl_init(&c);
	put_dmabuf(&c, 0, 4096, 1, 1);
	assert_int_equal(dmt_cmsg_parse(&c.msg, 8192, f, 4, &p), -EPROTO);
}

static void test_short_cmsg(void **state)
{
	struct devmemtcp_frag f[4];
	struct dmt_parse p;
	struct ctrl c;
	uint32_t half[2] = { 1, 2 };

	ctrl_init(&c);
	put(&c, SOL_SOCKET, SCM_DEVMEM_DMABUF, half, sizeof(half));
	assert_int_equal(dmt_cmsg_parse(&c.msg, 8, f, 4, &p), -EPROTO);
}

static void test_truncated_tail(void **state)
{
	struct devmemtcp_frag f[4];
	struct dmt_parse p;
	struct ctrl c;

	/* msg_controllen cut inside the second cmsg: CMSG_NXTHDR stops */
	ctrl_init(&c);
	put_dmabuf(&c, 0, 4096, 1, 1);
	put_dmabuf(&c, 4096, 4096, 2, 1);
	c.msg.msg_controllen -= 20;
	assert_int_equal(dmt_cmsg_parse(&c.msg, 4096, f, 4, &p), 1);
	assert_int_equal(dmt_cmsg_parse(&c.msg, 8192, f, 4, &p), -EPROTO);
}

/*
 * A cmsg_len near 2^64 must end the walk: rounded up it wraps to 0 (the
 * same cmsg again and again) or points back into the buffer.  Reproducers:
 * tests/fuzz/corpus/cmsg/regress-len-*.
 */
static void test_len_wrap(void **state)
{
	struct devmemtcp_frag f[4];
	struct dmt_parse p;
	struct ctrl c;

	/* the only cmsg claims SIZE_MAX bytes: not a fragment */
	ctrl_init(&c);
	put_dmabuf(&c, 0, 4096, 1, 1);
	((struct cmsghdr *)c.u.buf)->cmsg_len = SIZE_MAX;
	assert_int_equal(dmt_cmsg_parse(&c.msg, 4096, f, 4, &p), 1);
	assert_int_equal(p.ndmabuf, 0);
	assert_true(f[0].flags & DEVMEMTCP_FRAG_LINEAR);

	/* after a good fragment: the walk stops there */
	ctrl_init(&c);
	put_dmabuf(&c, 0, 4096, 1, 1);
	put_dmabuf(&c, 4096, 4096, 2, 1);
	((struct cmsghdr *)(c.u.buf + CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))))
		->cmsg_len = SIZE_MAX - 15;
	assert_int_equal(dmt_cmsg_parse(&c.msg, 4096, f, 4, &p), 1);
	assert_int_equal(p.ndmabuf, 1);
	assert_int_equal(f[0].token, 1);
	((struct cmsghdr *)(c.u.buf + CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))))
		->cmsg_len = SIZE_MAX;
	assert_int_equal(dmt_cmsg_parse(&c.msg, 4096, f, 4, &p), 1);
	assert_int_equal(p.ndmabuf, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_dmabuf_only),
		cmocka_unit_test(test_interleaved_linear),
		cmocka_unit_test(test_plain_data),
		cmocka_unit_test(test_unknown_skipped),
		cmocka_unit_test(test_too_many),
		cmocka_unit_test(test_bytes_mismatch),
		cmocka_unit_test(test_short_cmsg),
		cmocka_unit_test(test_truncated_tail),
		cmocka_unit_test(test_len_wrap),
	};

	return cmocka_run_group_tests_name("cmsg", tests, NULL, NULL);
}
