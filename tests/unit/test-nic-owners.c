// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Many owners of one interface, against the in-memory NIC (fake-nic.h):
 * the shared settings derived from the owner set (pure, and on the NIC as
 * owners come and go in every order), queue planning (free queues, EBUSY,
 * ENOSPC, queues that others' rules and RSS contexts feed), flows of different owners kept disjoint, a failure and a crash
 * injected at every step of open and close while other owners exist (each
 * leaving exactly what the other owners need), an administrator's change
 * left alone, the broker's owner identity, restore --all, zombies, and 8
 * threads opening and closing handles at once.  Queues that queue-get
 * shows bound (fake-nic.h's q[]) stay out of the default RSS table whoever
 * owns them, and a gone owner's steering stays while its queues are bound;
 * a zombie leader whose threads live is alive.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctxfixture.h"
#include "fake-nic.h"
#include "nicfixture.h"

static struct fake_nic *nic_state;	/* shared with forked children */
static struct devmemtcp_ctx *ctx;
static char dir[64];
static char before[16384], after[16384], with_owners[16384];
static struct dmt_err jerr;

static int setup(void **state)
{
	nic_state = fake_shared();
	if (!nic_state)
		return -1;
	dmt_test_lock_wait_ms = 2000;
	return nicfix_setup_logged(dir, sizeof(dir), "dmt-owners", &ctx);
}

static int teardown(void **state)
{
	return nicfix_teardown(dir, ctx);
}

static int each(void **state)
{
	fake_init(nic_state);
	dmt_nic_fail_step = dmt_nic_crash_step = 0;
	dmt_test_nic_close_fail_step = dmt_test_nic_close_crash_step = 0;
	nicfix_logged[0] = '\0';
	fake_dump(nic_state, before, sizeof(before));
	return nicfix_rm(dir, "eth0.*");
}

static void dump_is(const char *want)
{
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(want, after);
}

static bool files_left(void)
{
	return nicfix_files_left(dir, "eth0");
}

static struct devmemtcp_flow flow(const char *text)
{
	struct devmemtcp_flow f;

	assert_int_equal(devmemtcp_flow_parse(text, &f), 0);
	return f;
}

/* An owner with nq queues and one flow to port; 0 or the error. */
static int own(struct devmemtcp_nic **nic, uint32_t nq, int port)
{
	char text[64];
	struct devmemtcp_flow f;
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = nq, .flows = &f, .nflows = 1);

	snprintf(text, sizeof(text), "dst-port %d", port);
	f = flow(text);
	return devmemtcp_nic_open(ctx, "eth0", &o, nic);
}

/* No entry of the default table points at a queue of an owner. */
static void table_avoids(struct devmemtcp_nic *const *nics, int n)
{
	for (int k = 0; k < n; k++) {
		const uint32_t *q;
		int nq = devmemtcp_nic_queues(nics[k], &q);

		for (int i = 0; i < FAKE_INDIR; i++)
			for (int j = 0; j < nq; j++)
				assert_true(nic_state->indir[i] != q[j]);
	}
}

/* ---- pure ---- */

static void test_derive(void **state)
{
	uint32_t rss[16], q67[] = { 6, 7 }, q5[] = { 5 }, q3[] = { 3 };
	struct dmt_base b = { 0 };
	struct dmt_owner a = { .queues = q67, .nqueues = 2 },
			 c = { .queues = q5, .nqueues = 1, .nrules = 1 },
			 k = { .queues = q3, .nqueues = 1, .keep_rss = true };
	const struct dmt_owner *set[3] = { 0 };
	struct dmt_shared t;

	for (int i = 0; i < 16; i++)
		rss[i] = (uint32_t)i % 8;
	b.baseline = (struct dmt_shared){ .tds = 1, .hds = 256, .ntuple = 0,
					  .rss_size = 16, .rss = rss };
	/* nobody: the baseline */
	assert_int_equal(dmt_derive_shared(&b, 8, set, 0, NULL, 0, false, &t), 0);
	assert_int_equal(t.tds, 1);
	assert_int_equal(t.hds, 256);
	assert_int_equal(t.ntuple, 0);
	assert_memory_equal(t.rss, rss, sizeof(rss));
	dmt_shared_free(&t);
	/* one owner without rules: header split, no ntuple yet, the table
	 * spread over the six others */
	set[0] = &a;
	assert_int_equal(dmt_derive_shared(&b, 8, set, 1, NULL, 0, false, &t), 0);
	assert_int_equal(t.tds, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(t.hds, 0);
	assert_int_equal(t.ntuple, 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(t.rss[i], (uint32_t)i % 6);
	dmt_shared_free(&t);
	/* ... about to add rules: ntuple */
	assert_int_equal(dmt_derive_shared(&b, 8, set, 1, NULL, 0, true, &t), 0);
	assert_int_equal(t.ntuple, 1);
	dmt_shared_free(&t);
	/* two owners, one with a rule; one that keeps RSS counts for
	 * nothing in the table */
	set[1] = &c;
	set[2] = &k;
	assert_int_equal(dmt_derive_shared(&b, 8, set, 3, NULL, 0, false, &t), 0);
	assert_int_equal(t.ntuple, 1);
	for (int i = 0; i < 16; i++)
		assert_int_equal(t.rss[i], (uint32_t)i % 5);
	dmt_shared_free(&t);
	/* bound queues stay out whoever has them, but a keep_rss owner's */
	{
		uint32_t bound[] = { 1, 3, 6 };

		assert_int_equal(dmt_derive_shared(&b, 8, set, 3, bound, 3, false, &t), 0);
		for (int i = 0; i < 16; i++)
			assert_int_equal(t.rss[i], (uint32_t)(i % 4 < 1 ? 0 : i % 4 + 1));
		dmt_shared_free(&t);
		/* nobody left, a queue still bound: header split stays on,
		 * the table stays off it */
		assert_int_equal(dmt_derive_shared(&b, 8, set, 0, bound + 1, 1, false, &t), 0);
		assert_int_equal(t.tds, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
		assert_int_equal(t.hds, 0);
		assert_int_equal(t.ntuple, 0);
		for (int i = 0; i < 16; i++)
			assert_int_equal(t.rss[i], (uint32_t)(i % 7 < 3 ? i % 7 : i % 7 + 1));
		dmt_shared_free(&t);
		/* every queue bound or owned: the table as the owners left it */
		{
			uint32_t all[] = { 0, 1, 2, 3, 4, 5, 6, 7 }, applied[16];

			for (int i = 0; i < 16; i++)
				applied[i] = 4;
			b.applied = (struct dmt_shared){ .rss_size = 16, .rss = applied };
			assert_int_equal(dmt_derive_shared(&b, 8, set, 1, all, 8, false, &t), 0);
			assert_memory_equal(t.rss, applied, sizeof(applied));
			dmt_shared_free(&t);
			b.applied = (struct dmt_shared){ 0 };
		}
	}
	/* an unreported hds-thresh stays unreported, an unreported
	 * tcp-data-split is turned on all the same (mlx5_core shows it only
	 * once set); ntuple on before stays on */
	b.baseline.tds = -1;
	b.baseline.hds = -1;
	b.baseline.ntuple = 1;
	assert_int_equal(dmt_derive_shared(&b, 8, set, 1, NULL, 0, false, &t), 0);
	assert_int_equal(t.tds, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(t.hds, -1);
	assert_int_equal(t.ntuple, 1);
	dmt_shared_free(&t);
	/* no RSS table at all */
	b.baseline.rss_size = 0;
	b.baseline.rss = NULL;
	assert_int_equal(dmt_derive_shared(&b, 8, set, 2, NULL, 0, false, &t), 0);
	assert_int_equal(t.rss_size, 0);
	assert_null(t.rss);
}

static void test_overlap(void **state)
{
	static const struct {
		const char *a, *b;
		bool meet;
	} cases[] = {
		{ "dst-port 5201", "dst-port 5201", true },
		{ "dst-port 5201", "dst-port 5202", false },
		{ "dst-port 5201", "src-ip 10.0.0.9 dst-port 5201", true },
		{ "dst-ip 10.0.0.1 dst-port 5201", "src-ip 10.0.0.9 dst-ip 10.0.0.1", true },
		{ "dst-ip 10.0.0.1", "dst-ip 10.0.0.2", false },
		{ "dst-ip 10.0.0.0/24", "dst-ip 10.0.0.2", true },
		{ "dst-ip 10.0.1.0/24", "dst-ip 10.0.0.2", false },
		{ "src-port 1", "dst-port 2", true },
		{ "tcp6 dst-port 5201", "dst-port 5201", false },
		{ "tcp6 dst-ip 2001:db8::/64", "tcp6 dst-ip 2001:db8::1 dst-port 9", true },
		{ "tcp6 dst-ip 2001:db8::/64", "tcp6 dst-ip 2001:db9::1", false },
	};
	struct ethtool_rx_flow_spec a, b;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct devmemtcp_flow fa = flow(cases[i].a), fb = flow(cases[i].b);

		dmt_flow_to_spec(&fa, 1, false, &a);
		dmt_flow_to_spec(&fb, 2, true, &b);
		if (dmt_spec_overlap(&a, &b) != cases[i].meet ||
		    dmt_spec_overlap(&b, &a) != cases[i].meet)
			fail_msg("%s / %s: not %d", cases[i].a, cases[i].b, cases[i].meet);
	}
	/* an IP rule of the same family: the protocol and the ports count */
	{
		struct devmemtcp_flow fa = flow("dst-ip 10.0.0.1 dst-port 80");

		dmt_flow_to_spec(&fa, 1, false, &a);
		memset(&b, 0, sizeof(b));
		b.flow_type = IP_USER_FLOW;
		b.h_u.usr_ip4_spec.ip4dst = a.h_u.tcp_ip4_spec.ip4dst;
		b.m_u.usr_ip4_spec.ip4dst = 0xffffffff;
		assert_true(dmt_spec_overlap(&a, &b));
		b.h_u.usr_ip4_spec.proto = IPPROTO_UDP;
		b.m_u.usr_ip4_spec.proto = 0xff;
		assert_false(dmt_spec_overlap(&a, &b));
		b.h_u.usr_ip4_spec.proto = IPPROTO_TCP;
		assert_true(dmt_spec_overlap(&b, &a));
		memcpy((uint8_t *)&b.h_u.usr_ip4_spec.l4_4_bytes + 2, &a.h_u.tcp_ip4_spec.pdst, 2);
		memset((uint8_t *)&b.m_u.usr_ip4_spec.l4_4_bytes + 2, 0xff, 2);
		assert_true(dmt_spec_overlap(&a, &b));
		((uint8_t *)&b.h_u.usr_ip4_spec.l4_4_bytes)[3] ^= 1;
		assert_false(dmt_spec_overlap(&a, &b));
	}
}

/* ---- owners on the NIC ---- */

/* Three owners opened and closed in every order: while they live the
 * table avoids all their queues and each has its context and rule; after
 * the last close the NIC is exactly as before. */
static void test_orders(void **state)
{
	static const int orders[6][3] = {
		{ 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 },
	};

	for (int r = 0; r < 6; r++) {
		struct devmemtcp_nic *nic[3];
		int live = 3;

		assert_int_equal(own(&nic[0], 2, 5201), 0);
		assert_int_equal(own(&nic[1], 1, 5202), 0);
		assert_int_equal(own(&nic[2], 2, 5203), 0);
		table_avoids(nic, 3);
		fake_dump(nic_state, after, sizeof(after));
		assert_non_null(strstr(after, "-> *:5201 context 1"));
		assert_non_null(strstr(after, "-> *:5202 queue 5"));
		assert_non_null(strstr(after, "-> *:5203 context 2"));
		for (int k = 0; k < 3; k++) {
			struct devmemtcp_nic *rest[3];
			int m = 0;

			assert_int_equal(devmemtcp_nic_close(nic[orders[r][k]]), 0);
			nic[orders[r][k]] = NULL;
			live--;
			for (int j = 0; j < 3; j++)
				if (nic[j])
					rest[m++] = nic[j];
			if (live)
				table_avoids(rest, m);
			assert_int_equal(nic_state->tds_cfg,
					 live ? DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED : 0);
		}
		dump_is(before);
		assert_false(files_left());
	}
}

static void test_queue_plan(void **state)
{
	static const uint32_t q7[] = { 7 }, q5[] = { 5, 4 };
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q7, .nqueues = 1);
	struct devmemtcp_nic *a, *b, *c;
	const uint32_t *q;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), 0);
	/* explicit ids another owner holds */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), -EBUSY);
	ctxfix_expect_errmsg(ctx,
			     "eth0: RX queue 7 of eth0 is owned by pid %d (%s): pick another queue, or let the library pick free ones (queues = NULL)",
			     getpid(), t_own_comm());
	/* free ones: the highest not taken */
	o.queues = NULL;
	o.nqueues = 2;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), 0);
	assert_int_equal(devmemtcp_nic_queues(b, &q), 2);
	assert_int_equal(q[0], 5);
	assert_int_equal(q[1], 6);
	o.queues = q5;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &c), -EBUSY);
	/* too many: how many are free */
	o.queues = NULL;
	o.nqueues = 5;
	/* ERRORS devmemtcp_nic_open ENOSPC */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &c), -ENOSPC);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: eth0 has 4 free RX queues (8 in all, 3 owned by 1 process, 1 kept for other traffic): ask for at most 4");
	o.nqueues = 4;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &c), 0);
	assert_int_equal(devmemtcp_nic_queues(c, &q), 4);
	assert_int_equal(q[0], 1);
	assert_int_equal(q[3], 4);
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_int_equal(nic_state->indir[i], 0);
	o.nqueues = 1;
	{
		struct devmemtcp_nic *d;

		assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &d), -ENOSPC);
		assert_string_equal(devmemtcp_ctx_errmsg(ctx),
				    "eth0: eth0 has 0 free RX queues (8 in all, 7 owned by 1 process, 1 kept for other traffic): ask for at most 0");
	}
	assert_int_equal(devmemtcp_nic_close(c), 0);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(before);
}

/* Someone else's ntuple rule (to queue 7) and RSS context (over 5 and
 * 6) feed queues no owner made: asked for by id they are refused with
 * the rule or context and the fix, and never picked as free ones. */
static void test_foreign_steering(void **state)
{
	static const uint32_t q7[] = { 7 }, q6[] = { 6 }, q3[] = { 3 };
	struct devmemtcp_flow ssh = flow("dst-port 22");
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q7, .nqueues = 1);
	struct devmemtcp_nic *a, *b;
	char foreign[16384];
	const uint32_t *q;

	nic_state->ntuple_on = true;
	nic_state->rule[3].used = true;
	dmt_flow_to_spec(&ssh, 7, false, &nic_state->rule[3].fs);
	nic_state->rule[3].fs.location = 3;
	nic_state->ctx[2].used = true;
	for (int i = 0; i < FAKE_INDIR; i++)
		nic_state->ctx[2].indir[i] = 5 + i % 2;
	fake_dump(nic_state, foreign, sizeof(foreign));

	/* ERRORS devmemtcp_nic_open EBUSY */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), -EBUSY);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: RX queue 7 of eth0 receives the packets of ntuple rule 3 (tcp4 *:* -> *:22 queue 7), which no devmemtcp owner made: "
			    "pick another queue, or delete the rule (ethtool -N eth0 delete 3)");
	o.queues = q6;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), -EBUSY);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: RX queue 6 of eth0 is in RSS context 2, which no devmemtcp owner made: "
			    "pick another queue, or delete the context and the rules that use it (ethtool -X eth0 context 2 delete)");
	dump_is(foreign);
	/* free ones: not those */
	o.queues = NULL;
	o.nqueues = 5;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), -ENOSPC);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: eth0 has 4 free RX queues (8 in all, 0 owned by 0 processes, 3 fed by ntuple rules or RSS contexts outside devmemtcp, "
			    "1 kept for other traffic): ask for at most 4");
	o.nqueues = 2;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), 0);
	assert_int_equal(devmemtcp_nic_queues(a, &q), 2);
	assert_int_equal(q[0], 3);
	assert_int_equal(q[1], 4);
	/* an owner's steering is no one else's: the next owner is told it
	 * is owned */
	o.queues = q3;
	o.nqueues = 1;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), -EBUSY);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "eth0: RX queue 3 of eth0 is owned by pid"));
	o.queues = NULL;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), 0);
	assert_int_equal(devmemtcp_nic_queues(b, &q), 1);
	assert_int_equal(q[0], 2);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(foreign);
	assert_false(files_left());
}

/* Owners' flows must not overlap: the packets would go to one of them. */
static void test_owners_flows_disjoint(void **state)
{
	struct devmemtcp_flow f = flow("src-ip 10.0.0.9 dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *a, *b;

	assert_int_equal(own(&a, 1, 5201), 0);
	fake_dump(nic_state, with_owners, sizeof(with_owners));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), -EEXIST);
	ctxfix_expect_errmsg(ctx,
			     "setting up eth0 for devmem failed at ntuple rule for flow 0: flow 0 (tcp4 10.0.0.9:* -> *:5201) overlaps flow 0 "
			     "(tcp4 *:* -> *:5201) of pid %d (%s) on eth0: each process must steer packets no other one does; "
			     "the 1 finished steps were undone",
			     getpid(), t_own_comm());
	dump_is(with_owners);
	f = flow("src-ip 10.0.0.9 dst-port 5202");
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), 0);
	/* ERRORS devmemtcp_nic_add_flow EAFNOSUPPORT */
	assert_int_equal(devmemtcp_nic_add_flow(b, &(struct devmemtcp_flow){ 0 }), -EAFNOSUPPORT);
	assert_string_equal(devmemtcp_nic_errmsg(b),
			    "adding a flow on eth0: flow 1: family 0 is neither AF_INET nor AF_INET6");
	f = flow("dst-port 5201");
	assert_int_equal(devmemtcp_nic_add_flow(b, &f), -EEXIST);
	assert_non_null(strstr(devmemtcp_nic_errmsg(b), "adding a flow on eth0: flow 1 (tcp4 *:* -> *:5201) overlaps flow 0"));
	assert_int_equal(devmemtcp_nic_close(b), 0);
	dump_is(with_owners);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(before);
}

/* Two owners live; a third one's open fails at each of its steps: every
 * failure leaves the NIC exactly as the two need it. */
static void test_fail_every_open_step(void **state)
{
	struct devmemtcp_nic *a, *b, *c;
	int n;

	assert_int_equal(own(&a, 1, 5201), 0);
	assert_int_equal(own(&b, 2, 5202), 0);
	fake_dump(nic_state, with_owners, sizeof(with_owners));
	for (n = 1;; n++) {
		dmt_nic_fail_step = n;
		if (own(&c, 2, 5203) == 0)
			break;
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "failure injected by DEVMEMTCP_NIC_FAIL_STEP"));
		dump_is(with_owners);
	}
	dmt_nic_fail_step = 0;
	assert_int_equal(n, 4);		/* RSS table, context, rule, then past the last */
	table_avoids((struct devmemtcp_nic *[]){ a, b, c }, 3);
	assert_int_equal(devmemtcp_nic_close(c), 0);
	dump_is(with_owners);
	/* a driver error at each change instead */
	for (n = 1;; n++) {
		nic_state->changes = 0;
		nic_state->fail_op_at = n;
		if (own(&c, 2, 5203) == 0)
			break;
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "failed: EIO; the "));
		dump_is(with_owners);
	}
	nic_state->fail_op_at = 0;
	assert_int_equal(devmemtcp_nic_close(c), 0);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(before);
	assert_false(files_left());
}

/* A close that fails at each of its steps while others live: what is
 * left is finished by the next operation of anyone. */
static void test_fail_every_close_step(void **state)
{
	struct devmemtcp_nic *a, *b, *c;
	char abc[16384];
	int n;

	assert_int_equal(own(&a, 1, 5201), 0);
	assert_int_equal(own(&b, 2, 5202), 0);
	fake_dump(nic_state, with_owners, sizeof(with_owners));
	for (n = 1;; n++) {
		int err;

		assert_int_equal(own(&c, 2, 5203), 0);
		if (n == 1)
			fake_dump(nic_state, abc, sizeof(abc));
		dump_is(abc);
		dmt_test_nic_close_fail_step = n;
		err = devmemtcp_nic_close(c);
		dmt_test_nic_close_fail_step = 0;
		if (err == 0)
			break;
		assert_int_equal(err, -EIO);
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "failure injected by DEVMEMTCP_TEST_NIC_CLOSE_FAIL_STEP"));
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "the next open or close on eth0, or 'devmemtcp restore eth0', finishes it"));
		/* the closed handle's leftovers are dead although we live */
		assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
		dump_is(with_owners);
	}
	assert_int_equal(n, 4);		/* the rule, the context, the table */
	dump_is(with_owners);
	/* a driver error at each change of the close */
	for (n = 1;; n++) {
		int err;

		assert_int_equal(own(&c, 2, 5203), 0);
		nic_state->changes = 0;
		nic_state->fail_op_at = n;
		err = devmemtcp_nic_close(c);
		nic_state->fail_op_at = 0;
		if (err == 0)
			break;
		assert_int_equal(err, -EIO);
		assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
		dump_is(with_owners);
	}
	dump_is(with_owners);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(before);
	assert_false(files_left());
}

/* A child that opens an owner (queues 2, port 5203) and is killed: at
 * step open_step of the open, right after change change_n, at step
 * close_step of its close, or (all 0) after a full open. */
static void crashing_owner(int open_step, int change_n, int close_step)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct devmemtcp_nic *c;

		dmt_nic_crash_step = open_step;
		nic_state->changes = 0;
		nic_state->kill_after_change = change_n;
		if (own(&c, 2, 5203))
			_exit(3);
		dmt_test_nic_close_crash_step = close_step;
		if (close_step)
			devmemtcp_nic_close(c);
		raise(SIGKILL);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	nic_state->kill_after_change = 0;
}

/* Two owners live; a third process dies at every step of its open and
 * close, before and after each change: the next operation of anyone
 * (alternately a recover, an open and a close of another owner) removes
 * what it left, and the NIC is what the two need. */
static void test_crash_everywhere(void **state)
{
	struct devmemtcp_nic *a, *b, *d;
	int round = 0;

	assert_int_equal(own(&a, 1, 5201), 0);
	assert_int_equal(own(&b, 2, 5202), 0);
	fake_dump(nic_state, with_owners, sizeof(with_owners));
	for (int kind = 0; kind < 3; kind++) {
		for (int n = 1; n <= 5; n++, round++) {
			if (kind == 0)
				crashing_owner(n, 0, 0);
			else if (kind == 1)
				crashing_owner(0, n, 0);
			else
				crashing_owner(0, 0, n);
			assert_true(files_left());
			switch (round % 3) {
			case 0:
				assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
				break;
			case 1:
				assert_int_equal(own(&d, 1, 5209), 0);
				assert_int_equal(devmemtcp_nic_close(d), 0);
				break;
			case 2:
				assert_int_equal(devmemtcp_nic_close(b), 0);
				assert_int_equal(own(&b, 2, 5202), 0);
				break;
			}
			dump_is(with_owners);
		}
	}
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(before);
	assert_false(files_left());
}

/* Settings an administrator changed while owners live are theirs: left
 * alone on every later change and when the last owner goes, reported
 * once. */
static void test_admin_changes(void **state)
{
	struct devmemtcp_nic *a, *b;

	assert_int_equal(own(&a, 1, 5201), 0);
	assert_int_equal(own(&b, 1, 5202), 0);
	for (int i = 0; i < FAKE_INDIR; i++)
		nic_state->indir[i] = 1;
	nic_state->hds = 128;
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_non_null(strstr(nicfix_logged, "the default RSS table of eth0 was changed by someone else since devmemtcp set it: left alone"));
	nicfix_logged[0] = '\0';
	assert_int_equal(own(&b, 1, 5202), 0);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	assert_null(strstr(nicfix_logged, "RSS table"));	/* once */
	assert_non_null(strstr(nicfix_logged, "hds-thresh of eth0 was changed by someone else"));
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_int_equal(nic_state->indir[i], 1);
	assert_int_equal(nic_state->hds, 128);
	assert_int_equal(nic_state->tds_cfg, 0);	/* ours: restored */
	assert_false(nic_state->ntuple_on);
	assert_false(files_left());
}

/* The broker records its client as the owner: the setup dies with the
 * client, not with the broker's handle. */
static void test_open_as_client(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1);
	struct devmemtcp_nic *nic;
	char prefix[64], **names;
	uint64_t start;
	bool zombie;
	size_t n;
	int p[2];
	char c;
	pid_t client;

	assert_int_equal(pipe(p), 0);
	client = fork();
	if (client == 0) {
		(void)!read(p[0], &c, 1);
		_exit(0);
	}
	assert_int_equal(dmt_proc_start(client, &start, &zombie), 0);
	assert_int_equal(dmt_nic_open_as(ctx, "eth0", &o, client, start, &nic), 0);
	snprintf(prefix, sizeof(prefix), "eth0.owner.%d.%llu.", client, (unsigned long long)start);
	assert_int_equal(dmt_rundir_list(nicfix_rd(dir), prefix, &names, &n, &jerr), 0);
	assert_int_equal(n, 1);
	free(names[0]);
	free(names);
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 0);	/* alive */
	(void)!write(p[1], "x", 1);
	waitpid(client, NULL, 0);
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	dump_is(before);
	assert_false(files_left());
	/* the broker's handle closes without complaint */
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	dump_is(before);
	close(p[0]);
	close(p[1]);
}

/* restore --all: live owners are undone too, on the operator's word. */
static void test_recover_all(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, all, .flags = DEVMEMTCP_NIC_RECOVER_ALL);
	DEVMEMTCP_OPTS(nic_opts, bad, .flags = DEVMEMTCP_NIC_KEEP_RSS);
	struct devmemtcp_nic *a;

	assert_int_equal(own(&a, 2, 5201), 0);
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 0);
	/* ERRORS devmemtcp_nic_recover EINVAL */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", &bad), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_nic_recover: flags 0x4: only DEVMEMTCP_NIC_RECOVER_ALL applies");
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", &all), 1);
	dump_is(before);
	assert_false(files_left());
	assert_int_equal(devmemtcp_nic_close(a), 0);
	dump_is(before);
}

/* A process that exited (its only thread) but was not reaped is dead:
 * its descriptors are gone. */
static void test_zombie_owner(void **state)
{
	int p[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		struct devmemtcp_nic *nic;

		if (own(&nic, 2, 5201))
			_exit(3);
		_exit(0);	/* without closing: the files stay */
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 0);	/* it exited */
	close(p[0]);
	for (int i = 0; i < 1000; i++) {
		uint64_t s;
		bool z = false;

		if (dmt_proc_start(pid, &s, &z) == 0 && z)
			break;
		usleep(1000);
	}
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	dump_is(before);
	waitpid(pid, NULL, 0);
}

/* ---- bound queues ---- */

/* The default table points at none of the queues in q[0..n). */
static void table_avoids_queues(const uint32_t *q, int n)
{
	for (int i = 0; i < FAKE_INDIR; i++)
		for (int j = 0; j < n; j++)
			if (nic_state->indir[i] == q[j])
				fail_msg("entry %d of the default RSS table points at queue %u, which carries a binding",
					 i, q[j]);
}

/* A child process that opens an owner (2 queues, a flow to port 5201:
 * queues 6 and 7, context 1, the rule at 31) and exits without closing,
 * after the test put dma-buf 7 on its queues, as if a child of it had
 * kept the binding's netlink socket. */
static pid_t owner_leaves_binding(void)
{
	int go[2], ready[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	if (pid == 0) {
		struct devmemtcp_nic *nic;

		if (own(&nic, 2, 5201))
			_exit(3);
		(void)!write(ready[1], "x", 1);
		(void)!read(go[0], &c, 1);
		_exit(0);	/* without closing: its file stays */
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	nic_state->q[6].dmabuf = nic_state->q[7].dmabuf = 7;
	(void)!write(go[1], "x", 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
	return pid;
}

/* An owner is gone but its queues still carry its binding (held by a
 * process that inherited the socket): another owner's open and close
 * leave its rule and context, and neither puts its queues back in the
 * default table; once the binding is gone, the next operation cleans. */
static void test_gone_owner_still_bound(void **state)
{
	static const uint32_t held[] = { 6, 7 };
	struct devmemtcp_nic *b;
	char want[512];
	pid_t gone = owner_leaves_binding();

	assert_int_equal(own(&b, 1, 5202), 0);
	table_avoids_queues(held, 2);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:5201 context 1"));
	assert_true(nic_state->ctx[1].used);
	snprintf(want, sizeof(want),
		 "the setup of eth0 by pid %d (%s) stays: RX queue 6 still carries dma-buf 7 (its process, or one that inherited or was passed the binding, holds it); "
		 "its rules and RSS context stay, and its queues stay out of the default RSS table, until the binding is gone",
		 gone, t_own_comm());
	if (!strstr(nicfix_logged, want))
		fail_msg("logged:\n%s\nnot:\n%s", nicfix_logged, want);
	/* the last live owner goes: the shared settings stay for the gone one */
	assert_int_equal(devmemtcp_nic_close(b), 0);
	table_avoids_queues(held, 2);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:5201 context 1"));
	assert_int_equal(nic_state->tds_cfg, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	/* restore --all does not take bound queues back either */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0",
					       &(struct devmemtcp_nic_opts){ .sz = sizeof(struct devmemtcp_nic_opts),
									     .flags = DEVMEMTCP_NIC_RECOVER_ALL }), 0);
	table_avoids_queues(held, 2);
	assert_true(nic_state->ctx[1].used);
	/* the binding is gone: the next operation undoes the rest */
	nic_state->q[6].dmabuf = nic_state->q[7].dmabuf = 0;
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	dump_is(before);
	assert_false(files_left());
}

/* A queue nobody's file names carries a binding (io_uring, AF_XDP, a
 * dma-buf bound by another program): while owners set the default table,
 * it never points there, also after the last owner went. */
static void test_unowned_bound_queue(void **state)
{
	static const uint32_t held[] = { 3 };
	struct devmemtcp_nic *a, *b;

	assert_int_equal(own(&a, 1, 5201), 0);
	nic_state->q[3].io_uring = true;
	assert_int_equal(own(&b, 1, 5202), 0);
	table_avoids_queues(held, 1);
	table_avoids((struct devmemtcp_nic *[]){ a, b }, 2);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	table_avoids_queues(held, 1);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	table_avoids_queues(held, 1);
	assert_true(files_left());	/* the baseline, until it is gone */
	assert_non_null(strstr(nicfix_logged,
			       "RX queue 3 of eth0 still carries io_uring zcrx although no devmemtcp owner is left: the default RSS table stays off it"));
	nic_state->q[3].io_uring = false;
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	dump_is(before);
	assert_false(files_left());
}

/* The state letter of /proc/PID/stat. */
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

static int leader_pipe[2];

static void *keep_descriptors(void *arg)
{
	char c;

	(void)arg;
	(void)!read(leader_pipe[0], &c, 1);
	_exit(0);
}

/* The main thread of an owner calls pthread_exit(): /proc shows the
 * process as a zombie, but its other thread lives and holds every
 * descriptor (a binding's netlink socket too): the owner is alive. */
static void test_zombie_leader_with_threads(void **state)
{
	uint64_t start;
	bool zombie = true;
	pid_t pid;

	assert_int_equal(pipe(leader_pipe), 0);
	pid = fork();
	if (pid == 0) {
		struct devmemtcp_nic *nic;
		pthread_t t;

		alarm(30);	/* never outlive a failed test for long */
		if (own(&nic, 2, 5201) ||
		    pthread_create(&t, NULL, keep_descriptors, NULL))
			_exit(3);
		pthread_exit(NULL);
	}
	for (int i = 0; i < 2000 && proc_state(pid) != 'Z'; i++)
		usleep(1000);
	assert_int_equal(proc_state(pid), 'Z');
	assert_int_equal(dmt_proc_start(pid, &start, &zombie), 0);
	assert_false(zombie);
	fake_dump(nic_state, with_owners, sizeof(with_owners));
	assert_non_null(strstr(with_owners, "-> *:5201 context 1"));
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 0);
	dump_is(with_owners);
	/* the last thread ends: now it is gone */
	(void)!write(leader_pipe[1], "x", 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	dump_is(before);
	assert_false(files_left());
	close(leader_pipe[0]);
	close(leader_pipe[1]);
}

/* 8 threads, each with its own context, opening and closing handles with
 * a flow each: the lock serialises them; all succeed; the NIC ends as it
 * began. */
struct thread_arg {
	int id;
	int errors;
	char msg[512];
};

static void *thread_main(void *p)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	struct thread_arg *a = p;
	struct devmemtcp_ctx *tctx;

	if (devmemtcp_ctx_new(&co, &tctx)) {
		a->errors++;
		return NULL;
	}
	for (int i = 0; i < 10; i++) {
		char text[64];
		struct devmemtcp_flow f;
		DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
		struct devmemtcp_nic *nic;

		snprintf(text, sizeof(text), "dst-port %d", 6000 + a->id);
		devmemtcp_flow_parse(text, &f);
		if (devmemtcp_nic_open(tctx, "eth0", &o, &nic)) {
			a->errors++;
			snprintf(a->msg, sizeof(a->msg), "%s", devmemtcp_ctx_errmsg(tctx));
			continue;
		}
		if (devmemtcp_nic_close(nic)) {
			a->errors++;
			snprintf(a->msg, sizeof(a->msg), "%s", devmemtcp_ctx_errmsg(tctx));
		}
	}
	devmemtcp_ctx_free(tctx);
	return NULL;
}

static void test_threads(void **state)
{
	struct thread_arg args[7];
	pthread_t t[7];

	/* 7 threads: 8 queues, one kept for other traffic; the lock is
	 * polled, not queued: the full wait */
	dmt_test_lock_wait_ms = 0;
	for (int i = 0; i < 7; i++) {
		args[i] = (struct thread_arg){ .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, thread_main, &args[i]), 0);
	}
	for (int i = 0; i < 7; i++) {
		pthread_join(t[i], NULL);
		if (args[i].errors)
			fail_msg("thread %d: %d errors: %s", i, args[i].errors, args[i].msg);
	}
	dmt_test_lock_wait_ms = 2000;
	dump_is(before);
	assert_false(files_left());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_derive),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test_setup(test_orders, each),
		cmocka_unit_test_setup(test_queue_plan, each),
		cmocka_unit_test_setup(test_foreign_steering, each),
		cmocka_unit_test_setup(test_owners_flows_disjoint, each),
		cmocka_unit_test_setup(test_fail_every_open_step, each),
		cmocka_unit_test_setup(test_fail_every_close_step, each),
		cmocka_unit_test_setup(test_crash_everywhere, each),
		cmocka_unit_test_setup(test_admin_changes, each),
		cmocka_unit_test_setup(test_open_as_client, each),
		cmocka_unit_test_setup(test_recover_all, each),
		cmocka_unit_test_setup(test_zombie_owner, each),
		cmocka_unit_test_setup(test_gone_owner_still_bound, each),
		cmocka_unit_test_setup(test_unowned_bound_queue, each),
		cmocka_unit_test_setup(test_zombie_leader_with_threads, each),
		cmocka_unit_test_setup(test_threads, each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
