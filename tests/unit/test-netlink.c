// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Netlink: message building, and parsing of reply bytes recorded from a
 * real kernel (tests/unit/data/netdev-replies.h, tests/tools/nlrecord.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "netdev.h"
#include "nl.h"
#include "uapi.h"
#include "data/netdev-replies.h"

static struct dmt_nl fake = { .portid = REC_PORTID };

static void reset(void)
{
	fake.extack[0] = '\0';
	fake.bad_attr_off = 0;
	fake.miss_type = 0;
}

static uint16_t family_seen;

static int family_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr))
		if (mnl_attr_get_type(a) == CTRL_ATTR_FAMILY_ID)
			family_seen = mnl_attr_get_u16(a);
	return MNL_CB_OK;
}

static void test_getfamily_reply(void **state)
{
	int err = 1;

	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_getfamily_netdev,
				      sizeof(rec_getfamily_netdev),
				      REC_GETFAMILY_NETDEV_SEQ, family_cb, NULL,
				      &err),
			 MNL_CB_STOP);
	assert_int_equal(err, 0);
	assert_int_equal(family_seen, REC_NETDEV_FAMILY);
}

static int queue_cb(const struct nlmsghdr *nlh, void *data)
{
	struct devmemtcp_queue *q = data;
	size_t i = 0;

	while (q[i].ifindex)
		i++;
	assert_int_equal(dmt_queue_parse(nlh, &q[i]), 0);
	return MNL_CB_OK;
}

/* The op list of the recorded 6.18 reply: what probe and bind-tx read. */
static void test_family_ops_recorded(void **state)
{
	const struct nlmsghdr *nlh = (const void *)rec_getfamily_netdev;
	struct dmt_genl_family f;

	assert_int_equal(dmt_nl_family_parse(nlh, &f), 0);
	assert_int_equal(f.id, REC_NETDEV_FAMILY);
	assert_true(f.ops_listed);
	/* dev-get, page-pool-get, queue-get, napi-get, qstats-get, bind-rx,
	 * napi-set, bind-tx */
	assert_int_equal(f.nops, 8);
	assert_true(dmt_nl_family_has_op(&f, DMT_NETDEV_CMD_BIND_RX));
	assert_true(dmt_nl_family_has_op(&f, DMT_NETDEV_CMD_BIND_TX));
	assert_true(dmt_nl_family_has_op(&f, DMT_NETDEV_CMD_QUEUE_GET));
	assert_false(dmt_nl_family_has_op(&f, 16));	/* queue-create, 7.0 */
}

/* bind-tx is known by the op list alone: 6.12 lists 1..14, 6.16+ 15 too. */
static void test_family_has_bind_tx(void **state)
{
	char buf[1024];
	struct dmt_genl_family f;
	struct nlmsghdr *nlh;
	struct nlattr *ops, *op;

	for (int with = 0; with < 2; with++) {
		nlh = dmt_nl_genl_msg(buf, GENL_ID_CTRL, CTRL_CMD_NEWFAMILY, 2, 0);
		mnl_attr_put_u16(nlh, CTRL_ATTR_FAMILY_ID, 30);
		mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, "netdev");
		ops = mnl_attr_nest_start(nlh, CTRL_ATTR_OPS);
		for (uint32_t cmd = 1; cmd <= 14 + (uint32_t)with * 2; cmd++) {
			op = mnl_attr_nest_start(nlh, (uint16_t)cmd);
			mnl_attr_put_u32(nlh, CTRL_ATTR_OP_ID, cmd);
			mnl_attr_put_u32(nlh, CTRL_ATTR_OP_FLAGS, 0);
			mnl_attr_nest_end(nlh, op);
		}
		mnl_attr_nest_end(nlh, ops);
		assert_int_equal(dmt_nl_family_parse(nlh, &f), 0);
		assert_int_equal(f.id, 30);
		assert_true(f.ops_listed);
		assert_int_equal(f.nops, 14 + with * 2);
		assert_int_equal(dmt_nl_family_has_op(&f, DMT_NETDEV_CMD_BIND_TX),
				 with);
		assert_true(dmt_nl_family_has_op(&f, DMT_NETDEV_CMD_BIND_RX));
	}
	/* no op list at all: nothing can be told from it */
	nlh = dmt_nl_genl_msg(buf, GENL_ID_CTRL, CTRL_CMD_NEWFAMILY, 2, 0);
	mnl_attr_put_u16(nlh, CTRL_ATTR_FAMILY_ID, 30);
	assert_int_equal(dmt_nl_family_parse(nlh, &f), 0);
	assert_false(f.ops_listed);
	assert_int_equal(f.nops, 0);
	/* shorter than a genl header */
	nlh->nlmsg_len = NLMSG_HDRLEN + 2;
	assert_int_equal(dmt_nl_family_parse(nlh, &f), -EBADMSG);
}

static void test_queue_dump(void **state)
{
	struct devmemtcp_queue q[4];
	int err = 1;

	memset(q, 0, sizeof(q));
	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_queue_dump_va,
				      sizeof(rec_queue_dump_va),
				      REC_QUEUE_DUMP_VA_SEQ, queue_cb, q, &err),
			 MNL_CB_STOP);
	assert_int_equal(err, 0);
	/* veth: one RX and one TX queue, no dma-buf */
	assert_int_equal(q[0].ifindex, REC_VA_IFINDEX);
	assert_int_equal(q[0].id, 0);
	assert_int_equal(q[0].type, DEVMEMTCP_QUEUE_RX);
	assert_int_equal(q[0].dmabuf_id, 0);
	assert_int_equal(q[1].ifindex, REC_VA_IFINDEX);
	assert_int_equal(q[1].type, DEVMEMTCP_QUEUE_TX);
	assert_int_equal(q[2].ifindex, 0);
}

static void test_seq_mismatch_skipped(void **state)
{
	int err = 1;

	reset();
	/* a late reply to another request is not ours */
	assert_int_equal(dmt_nl_parse(&fake, rec_bind_rx_veth,
				      sizeof(rec_bind_rx_veth), 1, NULL, NULL,
				      &err),
			 MNL_CB_OK);
	assert_int_equal(err, 0);
}

static void test_bind_veth_error(void **state)
{
	struct dmt_err e = { 0 };
	int err = 0;

	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_bind_rx_veth,
				      sizeof(rec_bind_rx_veth),
				      REC_BIND_RX_VETH_SEQ, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -EOPNOTSUPP);
	assert_string_equal(fake.extack, "");
	assert_int_equal(fake.bad_attr_off, 20);	/* the ifindex attribute */
	dmt_bind_explain(&e, false, 999999, err, fake.extack);
	assert_int_equal(e.code, -EOPNOTSUPP);
	assert_string_equal(e.msg,
			    "bind-rx on ifindex 999999 failed: the driver of ifindex 999999 does not support devmem TCP (it lacks the queue management API / unreadable netmem), or the kernel predates bind-rx (Linux 6.12)");
}

static void test_bind_nodev(void **state)
{
	int err = 0;

	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_bind_rx_nodev,
				      sizeof(rec_bind_rx_nodev),
				      REC_BIND_RX_NODEV_SEQ, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -ENODEV);
}

static void test_bind_missing_attr(void **state)
{
	int err = 0;

	reset();
	assert_int_equal(dmt_nl_parse(&fake, rec_bind_rx_noqueues,
				      sizeof(rec_bind_rx_noqueues),
				      REC_BIND_RX_NOQUEUES_SEQ, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -EINVAL);
	assert_int_equal(fake.miss_type, DMT_NETDEV_A_DMABUF_QUEUES + 1);
}

static void test_extack_fixes(void **state)
{
	struct dmt_err e = { 0 };

	dmt_bind_explain(&e, false, 999999, -EINVAL,
			 "tcp-data-split is disabled");
	assert_string_equal(e.msg,
			    "bind-rx on ifindex 999999 failed: enable header split on ifindex 999999: ethtool -G ifindex 999999 tcp-data-split on (or use devmemtcp_nic_open()) (kernel: \"tcp-data-split is disabled\")");
	dmt_bind_explain(&e, false, 999999, -EINVAL, "hds-thresh is not zero");
	assert_non_null(strstr(e.msg, "hds-thresh 0"));
	dmt_bind_explain(&e, false, 999999, -EEXIST,
			 "designated queue already memory provider bound");
	assert_int_equal(e.code, -EEXIST);
	assert_non_null(strstr(e.msg, "already has a dma-buf or io_uring bound"));
	dmt_bind_explain(&e, false, 999999, -EPERM, "");
	assert_string_equal(e.msg,
			    "bind-rx on ifindex 999999 failed: permission denied: bind-rx needs CAP_NET_ADMIN; run as root or grant it (setcap cap_net_admin+ep PROGRAM)");
	dmt_bind_explain(&e, false, 999999, -ENODATA, "");
	assert_non_null(strstr(e.msg, "page pool did not take the dma-buf"));
	dmt_bind_explain(&e, true, 999999, -EOPNOTSUPP,
			 "Driver does not support netmem TX");
	assert_non_null(strstr(e.msg, "bind-tx on ifindex 999999 failed: the driver of ifindex 999999 cannot send from device memory"));
}

static void test_bind_msg(void **state)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	const uint32_t queues[] = { 2, 3 };
	struct nlmsghdr *nlh;
	const struct genlmsghdr *g;
	const struct nlattr *a, *n;
	int nq = 0;
	bool fd = false, ifx = false;

	nlh = dmt_bind_msg(buf, 27, false, 5, queues, 2, 42, 0);
	assert_int_equal(nlh->nlmsg_type, 27);
	assert_true(nlh->nlmsg_flags & NLM_F_REQUEST);
	g = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(g->cmd, DMT_NETDEV_CMD_BIND_RX);
	assert_int_equal(g->version, 1);
	mnl_attr_for_each(a, nlh, sizeof(*g)) {
		switch (mnl_attr_get_type(a)) {
		case DMT_NETDEV_A_DMABUF_IFINDEX:
			assert_int_equal(mnl_attr_get_u32(a), 5);
			ifx = true;
			break;
		case DMT_NETDEV_A_DMABUF_FD:
			assert_int_equal(mnl_attr_get_u32(a), 42);
			fd = true;
			break;
		case DMT_NETDEV_A_DMABUF_QUEUES:
			mnl_attr_for_each_nested(n, a) {
				if (mnl_attr_get_type(n) == DMT_NETDEV_A_QUEUE_ID)
					assert_int_equal(mnl_attr_get_u32(n), queues[nq]);
				else if (mnl_attr_get_type(n) == DMT_NETDEV_A_QUEUE_TYPE)
					assert_int_equal(mnl_attr_get_u32(n), 0);
				else
					fail();
			}
			nq++;
			break;
		default:
			fail();	/* no RX_PAGE_SIZE unless asked */
		}
	}
	assert_true(fd && ifx);
	assert_int_equal(nq, 2);
	/* bind-tx: ifindex + fd only; rx page size when asked */
	nlh = dmt_bind_msg(buf, 27, true, 5, NULL, 0, 42, 0);
	g = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(g->cmd, DMT_NETDEV_CMD_BIND_TX);
	assert_int_equal(nlh->nlmsg_len, NLMSG_HDRLEN + 4 + 8 + 8);
	nlh = dmt_bind_msg(buf, 27, false, 5, queues, 1, 42, 65536);
	a = (const struct nlattr *)((const char *)nlh + nlh->nlmsg_len - 8);
	assert_int_equal(mnl_attr_get_type(a), DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE);
	assert_int_equal(mnl_attr_get_u32(a), 65536);
}

static void test_uint_sizes(void **state)
{
	/* NLA_UINT: qstats counters come as 4 or 8 bytes */
	char buf[256];
	struct nlmsghdr *nlh = dmt_nl_genl_msg(buf, 20, 12, 1, 0);
	struct devmemtcp_queue q;

	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_ID, 7);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_TYPE, 1);
	mnl_attr_put_u32(nlh, DMT_NETDEV_A_QUEUE_DMABUF, 9);
	assert_int_equal(dmt_queue_parse(nlh, &q), 0);
	assert_int_equal(q.id, 7);
	assert_int_equal(q.type, 1);
	assert_int_equal(q.dmabuf_id, 9);
	/* a u32 attribute of the wrong size is a malformed reply */
	nlh = dmt_nl_genl_msg(buf, 20, 12, 1, 0);
	mnl_attr_put_u16(nlh, DMT_NETDEV_A_QUEUE_ID, 7);
	assert_int_equal(dmt_queue_parse(nlh, &q), -EBADMSG);
}

/* ---- lengths the kernel never sends (reproducers: tests/fuzz/corpus/nl/regress-*) */

static unsigned int calls;

static int count_cb(const struct nlmsghdr *nlh, void *data)
{
	calls++;
	return MNL_CB_OK;
}

/* A reply buffer of exactly len bytes: one message of nlmsg_len mlen
 * (seq 7, our port), its payload zero. */
static unsigned char *reply(size_t len, uint32_t mlen, uint16_t type)
{
	unsigned char *b = calloc(1, len);
	struct nlmsghdr *nlh = (struct nlmsghdr *)b;

	nlh->nlmsg_len = mlen;
	nlh->nlmsg_type = type;
	nlh->nlmsg_seq = 7;
	nlh->nlmsg_pid = REC_PORTID;
	return b;
}

static int parse_len(size_t len, uint32_t mlen, uint16_t type, int *err)
{
	unsigned char *b = reply(len, mlen, type);
	int ret;

	reset();
	calls = 0;
	ret = dmt_nl_parse(&fake, b, len, 7, count_cb, NULL, err);
	free(b);
	return ret;
}

static void test_nlmsg_len_checked(void **state)
{
	int err = 0;

	/* libmnl compares nlmsg_len as an int: >= 2^31 passed as "fits" */
	assert_int_equal(parse_len(32, 0x80000010u, 0x20, &err), MNL_CB_ERROR);
	assert_int_equal(err, -EBADMSG);
	assert_int_equal(calls, 0);
	/* an unaligned length whose padding is not in the buffer: parsers
	 * walk attributes up to the aligned end, 3 bytes past it */
	assert_int_equal(parse_len(25, 25, 0x20, &err), MNL_CB_ERROR);
	assert_int_equal(err, -EBADMSG);
	assert_int_equal(calls, 0);
	/* ... and with its padding there, a message */
	assert_int_equal(parse_len(28, 25, 0x20, &err), MNL_CB_OK);
	assert_int_equal(err, 0);
	assert_int_equal(calls, 1);
	/* bytes after the last message that are no message */
	assert_int_equal(parse_len(24, 16, 0x20, &err), MNL_CB_ERROR);
	assert_int_equal(err, -EBADMSG);
	assert_int_equal(calls, 1);
	/* shorter than a header */
	assert_int_equal(parse_len(16, 12, 0x20, &err), MNL_CB_ERROR);
	assert_int_equal(err, -EBADMSG);
	assert_int_equal(calls, 0);
}

/* NLMSG_ERROR carries 0 or a negative errno; anything else is malformed,
 * never a positive "error" a caller would take for success. */
static void test_error_positive(void **state)
{
	size_t len = NLMSG_HDRLEN + sizeof(struct nlmsgerr);
	unsigned char *b = reply(len, (uint32_t)len, NLMSG_ERROR);
	struct nlmsgerr *e = mnl_nlmsg_get_payload((struct nlmsghdr *)b);
	int err = 0;

	e->error = 5;
	e->msg.nlmsg_len = sizeof(e->msg);
	reset();
	assert_int_equal(dmt_nl_parse(&fake, b, len, 7, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -EBADMSG);
	e->error = -EPERM;
	assert_int_equal(dmt_nl_parse(&fake, b, len, 7, NULL, NULL, &err),
			 MNL_CB_ERROR);
	assert_int_equal(err, -EPERM);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getfamily_reply),
		cmocka_unit_test(test_family_ops_recorded),
		cmocka_unit_test(test_family_has_bind_tx),
		cmocka_unit_test(test_queue_dump),
		cmocka_unit_test(test_seq_mismatch_skipped),
		cmocka_unit_test(test_bind_veth_error),
		cmocka_unit_test(test_bind_nodev),
		cmocka_unit_test(test_bind_missing_attr),
		cmocka_unit_test(test_extack_fixes),
		cmocka_unit_test(test_bind_msg),
		cmocka_unit_test(test_uint_sizes),
		cmocka_unit_test(test_nlmsg_len_checked),
		cmocka_unit_test(test_error_positive),
	};

	return cmocka_run_group_tests_name("netlink", tests, NULL, NULL);
}
