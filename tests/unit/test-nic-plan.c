// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The transactional NIC setup against an in-memory NIC (fake-nic.h): the
 * plan (queues, RSS tables), setup + close leaving every setting identical,
 * a failure at every step and a driver error at every change undone, a
 * crash at every step recovered, the lock, foreign rules and tables left
 * alone, flows added and removed, and the exact errors for bad input.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctxfixture.h"
#include "fake-nic.h"
#include "nicfixture.h"

static struct dmt_err jerr;	/* messages of the file layer */

static struct fake_nic *nic_state;	/* shared with forked children */
static struct devmemtcp_ctx *ctx;
static char dir[64];
static char before[16384], after[16384];

static int setup(void **state)
{
	nic_state = fake_shared();
	if (!nic_state)
		return -1;
	dmt_test_lock_wait_ms = 50;	/* -EBUSY at once, not after 10 s */
	return nicfix_setup(dir, sizeof(dir), "dmt-nic", &ctx);
}

static int teardown(void **state)
{
	return nicfix_teardown(dir, ctx);
}

static int each(void **state)
{
	fake_init(nic_state);
	dmt_nic_fail_step = 0;
	dmt_nic_crash_step = 0;
	fake_dump(nic_state, before, sizeof(before));
	return nicfix_rm(dir, "eth0.*");
}

static void assert_unchanged(void)
{
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

static bool journal_exists(void)
{
	return nicfix_files_left(dir, "eth0");
}

/* The journal of this process's only handle on eth0. */
static void read_owner(struct dmt_owner *o)
{
	char prefix[64], **names, *text;
	size_t n, len;

	snprintf(prefix, sizeof(prefix), "eth0.owner.%d.", getpid());
	assert_int_equal(dmt_rundir_list(nicfix_rd(dir), prefix, &names, &n, &jerr), 0);
	assert_int_equal(n, 1);
	assert_int_equal(dmt_file_read(nicfix_rd(dir), names[0], &text, &len, &jerr), 0);
	assert_int_equal(dmt_owner_parse(text, len, o, NULL), 0);
	free(text);
	free(names[0]);
	free(names);
}

static void read_base(struct dmt_base *b)
{
	char *text;
	size_t len;

	assert_int_equal(dmt_file_read(nicfix_rd(dir), "eth0.base", &text, &len, &jerr), 0);
	assert_int_equal(dmt_base_parse(text, len, b, NULL), 0);
	free(text);
}

static struct devmemtcp_flow flow(const char *text)
{
	struct devmemtcp_flow f;

	assert_int_equal(devmemtcp_flow_parse(text, &f), 0);
	return f;
}

/* ---- plan ---- */

static void test_plan_queues(void **state)
{
	uint32_t out[8];
	char why[256];
	static const uint32_t req[] = { 2, 5 }, dup[] = { 2, 2 }, far[] = { 1, 8 };

	assert_int_equal(dmt_plan_queues(8, NULL, 0, 0, false, out, why, sizeof(why)), 1);
	assert_int_equal(out[0], 7);
	assert_int_equal(dmt_plan_queues(8, NULL, 0, 3, false, out, why, sizeof(why)), 3);
	assert_int_equal(out[0], 5);
	assert_int_equal(out[2], 7);
	assert_int_equal(dmt_plan_queues(8, req, 2, 2, false, out, why, sizeof(why)), 2);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 5);
	assert_int_equal(dmt_plan_queues(8, dup, 2, 2, false, out, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "RX queue 2 is listed twice: list each queue once");
	assert_int_equal(dmt_plan_queues(8, far, 2, 2, false, out, why, sizeof(why)), -ERANGE);
	assert_string_equal(why, "RX queue 8 is out of range: the interface has 8 RX queues (0-7); pick a lower index or add channels with ethtool -L");
	assert_int_equal(dmt_plan_queues(8, NULL, 0, 9, false, out, why, sizeof(why)), -ERANGE);
	assert_string_equal(why, "9 devmem queues asked for but the interface has 8 RX queues: ask for fewer or add channels with ethtool -L");
	assert_int_equal(dmt_plan_queues(8, NULL, 0, 8, false, out, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "all 8 RX queues would be devmem queues, leaving none for other traffic: use fewer queues or add channels with ethtool -L");
	assert_int_equal(dmt_plan_queues(1, NULL, 0, 1, true, out, why, sizeof(why)), 1);
	assert_int_equal(dmt_plan_queues(8, req, 0, 0, false, out, why, sizeof(why)), -EINVAL);
}

static void test_plan_rss(void **state)
{
	uint32_t cur[16], out[16];
	static const uint32_t q67[] = { 6, 7 }, q0[] = { 0 };

	for (int i = 0; i < 16; i++)
		cur[i] = i % 8;
	assert_true(dmt_rss_is_default(cur, 16, 8));
	assert_false(dmt_rss_is_default(cur, 16, 7));
	/* default: an even spread over the other queues */
	assert_int_equal(dmt_plan_rss(cur, 16, 8, q67, 2, out), 1);
	for (int i = 0; i < 16; i++)
		assert_int_equal(out[i], i % 6);
	/* a custom table keeps its entries elsewhere */
	for (int i = 0; i < 16; i++)
		cur[i] = i < 8 ? 1 : 7;
	assert_int_equal(dmt_plan_rss(cur, 16, 8, q67, 2, out), 1);
	for (int i = 0; i < 8; i++)
		assert_int_equal(out[i], 1);
	for (int i = 8; i < 16; i++)
		assert_int_equal(out[i], (uint32_t)(i - 8) % 6);
	/* nothing points at the devmem queues: no change */
	for (int i = 0; i < 16; i++)
		cur[i] = i % 3;
	assert_int_equal(dmt_plan_rss(cur, 16, 8, q67, 2, out), 0);
	assert_memory_equal(out, cur, sizeof(cur));
	/* nothing left */
	assert_int_equal(dmt_plan_rss(cur, 16, 1, q0, 1, out), -EINVAL);
	dmt_plan_ctx(16, q67, 2, out);
	assert_int_equal(out[0], 6);
	assert_int_equal(out[1], 7);
	assert_int_equal(out[15], 7);
}

/* ---- round trips ---- */

static void test_setup_close_identical(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-ip 10.0.0.1 dst-port 5201"),
				       flow("tcp6 dst-ip 2001:db8::1 dst-port 5201") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);
	DEVMEMTCP_OPTS(nic_stats, st);
	struct devmemtcp_nic *nic;
	const uint32_t *q;
	struct dmt_owner me;
	struct dmt_base b;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(devmemtcp_nic_queues(nic, &q), 2);
	assert_int_equal(q[0], 6);
	assert_int_equal(q[1], 7);
	assert_null(devmemtcp_nic_binding(nic));
	/* header split on, hds-thresh 0, RSS off queues 6-7, a context over
	 * them, ntuple on, one rule per flow to the context */
	assert_int_equal(fake_tds(nic_state), DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(nic_state->hds, 0);
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_int_equal(nic_state->indir[i], (uint32_t)i % 6);
	assert_true(nic_state->ctx[1].used);
	assert_int_equal(nic_state->ctx[1].indir[0], 6);
	assert_int_equal(nic_state->ctx[1].indir[1], 7);
	assert_true(nic_state->ntuple_on);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> 10.0.0.1:5201 context 1"));
	assert_non_null(strstr(after, "rule 30: tcp6 *:* -> [2001:db8::1]:5201 context 1"));
	assert_int_equal(devmemtcp_nic_stats(nic, &st), 0);
	assert_int_equal(st.steps, 6);
	assert_int_equal(st.rules, 2);
	assert_int_equal(st.rss_context, 1);
	assert_int_equal(st.setup_round_trips, 0);	/* no netlink here */
	/* the files describe it all while the handle lives */
	read_owner(&me);
	assert_int_equal(me.pid, getpid());
	assert_false(me.closed);
	assert_int_equal(me.nqueues, 2);
	assert_int_equal(me.queues[0], 6);
	assert_int_equal(me.ctx, DMT_CTX_PLACED);
	assert_int_equal(me.ctx_id, 1);
	assert_int_equal(me.nrules, 2);
	assert_true(me.rules[1].placed);
	assert_int_equal(me.rules[1].location, 30);
	assert_int_equal(me.rules[1].rss_context, 1);
	dmt_owner_free(&me);
	read_base(&b);
	assert_int_equal(b.baseline.tds, DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED);
	assert_int_equal(b.baseline.hds, 256);
	assert_int_equal(b.baseline.ntuple, 0);
	assert_true(b.rss_default);
	assert_int_equal(b.applied.tds, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(b.applied.hds, 0);
	assert_int_equal(b.applied.ntuple, 1);
	assert_memory_equal(b.applied.rss, nic_state->indir, sizeof(nic_state->indir));
	assert_false(b.has_applying);
	assert_int_equal(b.theirs, 0);
	dmt_base_free(&b);

	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
	assert_false(journal_exists());
}

static void test_one_queue_no_context(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-port 5201"), flow("dst-port 5202") };
	DEVMEMTCP_OPTS(nic_opts, o, .flows = f, .nflows = 2);
	struct devmemtcp_nic *nic;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:5201 queue 7"));
	assert_non_null(strstr(after, "rule 30: tcp4 *:* -> *:5202 queue 7"));
	assert_null(strstr(after, "context"));
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

static void test_no_context_round_robin(void **state)
{
	static const uint32_t q[] = { 1, 4 };
	struct devmemtcp_flow f[3] = { flow("dst-port 1"), flow("dst-port 2"),
				       flow("dst-port 3 queue 0") };
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q, .nqueues = 2, .flows = f,
		       .nflows = 3, .flags = DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	struct devmemtcp_nic *nic;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:1 queue 1"));
	assert_non_null(strstr(after, "rule 30: tcp4 *:* -> *:2 queue 4"));
	assert_non_null(strstr(after, "rule 29: tcp4 *:* -> *:3 queue 1"));
	assert_null(strstr(after, "context"));
	/* the default table avoids 1 and 4 */
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_true(nic_state->indir[i] != 1 && nic_state->indir[i] != 4);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

static void test_contexts_unsupported(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *nic;

	nic_state->ctx_supported = false;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:5201 queue 6"));
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

/* fbnic has one additional RSS context: with it taken (or all of a
 * driver's), the kernel says EBUSY and flows go to queues */
static void test_contexts_taken(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *nic;

	for (int c = 1; c <= FAKE_CTX; c++)
		nic_state->ctx[c].used = true;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:5201 queue 6"));
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

static void test_already_configured(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o);
	DEVMEMTCP_OPTS(nic_stats, st);
	struct devmemtcp_nic *nic;

	/* header split on, table already off queue 7, ntuple on */
	nic_state->tds_cfg = DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	nic_state->hds = 0;
	for (int i = 0; i < FAKE_INDIR; i++)
		nic_state->indir[i] = i % 7;
	nic_state->indir_user = true;
	fake_dump(nic_state, before, sizeof(before));
	nic_state->changes = 0;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(nic_state->changes, 0);
	assert_int_equal(devmemtcp_nic_stats(nic, &st), 0);
	assert_int_equal(st.steps, 0);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

static void test_explicit_tds_restored(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o);
	struct devmemtcp_nic *nic;

	/* the user pinned "off" explicitly: auto would show off too, but an
	 * auto-default of "on" must not be mistaken for it */
	nic_state->tds_cfg = DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED;
	nic_state->tds_default = DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

/* bnxt_en (with hardware GRO) and fbnic show tcp-data-split on while the
 * kernel's configuration, which bind-rx checks, is still "auto": set it,
 * and put "auto" back */
static void test_tds_shown_not_configured(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o);
	struct devmemtcp_nic *nic;

	nic_state->tds_show = FAKE_TDS_ALWAYS_ON;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(nic_state->tds_cfg, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(nic_state->hds, 0);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_int_equal(nic_state->tds_cfg, DMT_ETHTOOL_TCP_DATA_SPLIT_UNKNOWN);
	assert_unchanged();
}

/* mlx5_core shows tcp-data-split only once it is configured: turn it on
 * all the same, and back to auto (shown as nothing) */
static void test_tds_shown_once_set(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o);
	struct devmemtcp_nic *nic;

	nic_state->tds_show = FAKE_TDS_CFG_ONLY;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(nic_state->tds_cfg, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_int_equal(nic_state->tds_cfg, DMT_ETHTOOL_TCP_DATA_SPLIT_UNKNOWN);
	assert_unchanged();
}

/* ---- failures ---- */

static void test_fail_every_step(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-ip 10.0.0.1 dst-port 5201"),
				       flow("tcp6 dst-port 5201") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);
	static const char *const at[] = {
		"header split", "RSS table", "ntuple feature", "RSS context",
		"ntuple rule for flow 0", "ntuple rule for flow 1",
	};
	struct devmemtcp_nic *nic;
	int n, ret;

	for (n = 1;; n++) {
		dmt_nic_fail_step = n;
		ret = devmemtcp_nic_open(ctx, "eth0", &o, &nic);
		if (ret == 0)
			break;
		assert_true(n <= (int)ARRAY_SIZE(at));
		/* ERRORS devmemtcp_nic_open EIO */
		assert_int_equal(ret, -EIO);
		ctxfix_expect_errmsg(ctx,
				     "setting up eth0 for devmem failed at %s: failure injected by DEVMEMTCP_NIC_FAIL_STEP=%d; the %d finished steps were undone",
				     at[n - 1], n, n - 1);
		assert_unchanged();
		assert_false(journal_exists());
	}
	assert_int_equal(n, ARRAY_SIZE(at) + 1);
	dmt_nic_fail_step = 0;
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

static void test_driver_error_every_change(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-port 5201"), flow("dst-port 5202") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 3, .flows = f, .nflows = 2);
	struct devmemtcp_nic *nic;
	int n;

	for (n = 1;; n++) {
		nic_state->changes = 0;
		nic_state->fail_op_at = n;
		if (devmemtcp_nic_open(ctx, "eth0", &o, &nic) == 0)
			break;
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "failed: EIO; the "));
		assert_unchanged();
	}
	assert_int_equal(n, 7);
	nic_state->fail_op_at = 0;
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

static void test_undo_failure_keeps_journal(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o);
	struct devmemtcp_nic *nic;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	/* the first change of close (RSS back to default) fails */
	nic_state->changes = 0;
	nic_state->fail_op_at = 1;
	/* ERRORS devmemtcp_nic_close EIO */
	assert_int_equal(devmemtcp_nic_close(nic), -EIO);
	ctxfix_expect_errmsg(ctx,
			     "closing the devmem setup of eth0 failed at RSS table: rss-set on eth0 failed: EIO; what is left is recorded in %s: "
			     "the next open or close on eth0, or 'devmemtcp restore eth0', finishes it", dir);
	assert_true(journal_exists());
	nic_state->fail_op_at = 0;
	/* what was left is finished by recover */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	assert_false(journal_exists());
	assert_unchanged();
}

/* ---- crashes ---- */

static pid_t run_child(int crash_step, bool kill_after_insert, bool finish)
{
	struct devmemtcp_flow f[2] = { flow("dst-ip 10.0.0.1 dst-port 5201"),
				       flow("tcp6 dst-port 5201") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);
	pid_t pid = fork();

	if (pid == 0) {
		struct devmemtcp_nic *nic;

		dmt_nic_crash_step = crash_step;
		nic_state->kill_after_insert = kill_after_insert;
		if (devmemtcp_nic_open(ctx, "eth0", &o, &nic) < 0)
			_exit(3);
		if (finish)
			raise(SIGKILL);	/* set up, then killed mid-transfer */
		_exit(4);
	}
	return pid;
}

/* A crash at each step of the setup, and after it: the next open (even
 * rounds) or restore (odd rounds) undoes what the dead process left. */
static void test_crash_every_step(void **state)
{
	int n, status;

	for (n = 1; n <= 7; n++) {
		DEVMEMTCP_OPTS(nic_opts, o, .queues = (const uint32_t[]){ 1 }, .nqueues = 1);
		struct devmemtcp_nic *nic;
		pid_t pid;

		each(state);
		pid = run_child(n, false, n == 7);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), SIGKILL);
		assert_true(journal_exists());
		if (n % 2 == 0) {
			assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
			/* only this handle's own changes now: no rule, no context */
			fake_dump(nic_state, after, sizeof(after));
			assert_null(strstr(after, "rule"));
			assert_null(strstr(after, "context"));
			assert_int_equal(devmemtcp_nic_close(nic), 0);
		} else {
			assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
		}
		assert_unchanged();
		assert_false(journal_exists());
		assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 0);
	}
}

static void test_crash_inside_insert(void **state)
{
	int status;
	pid_t pid = run_child(0, true, false);

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	/* the rule is in the NIC, the journal has it as pending */
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> 10.0.0.1:5201 context 1"));
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	assert_unchanged();
}

static void test_open_recovers(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .flags = DEVMEMTCP_NIC_RECOVER);
	struct devmemtcp_nic *nic;
	int status;
	pid_t pid = run_child(0, false, true);

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	/* only this handle's own changes now: one queue, no rules */
	fake_dump(nic_state, after, sizeof(after));
	assert_null(strstr(after, "rule"));
	assert_null(strstr(after, "context"));
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

/* Two handles of one process are two owners with their own queues; a
 * lock held too long gives EBUSY naming its holder. */
static void test_two_owners_and_busy_lock(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o);
	struct devmemtcp_nic *a, *b;
	const uint32_t *q;
	char want[512];
	pid_t child;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), 0);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), 0);
	assert_int_equal(devmemtcp_nic_queues(a, &q), 1);
	assert_int_equal(q[0], 7);
	assert_int_equal(devmemtcp_nic_queues(b, &q), 1);
	assert_int_equal(q[0], 6);
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_int_equal(nic_state->indir[i], (uint32_t)i % 6);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_true(nic_state->indir[i] != 6);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_unchanged();

	child = nicfix_lock_child(dir, "eth0");
	assert_true(child > 0);
	/* ERRORS devmemtcp_nic_open EBUSY */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), -EBUSY);
	snprintf(want, sizeof(want),
		 "eth0: pid %d (%s) holds %s/eth0.lock and has not let go for 50 ms: if that process hangs, stop it",
		 child, t_own_comm(), dir);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	/* ERRORS devmemtcp_nic_recover EBUSY */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), -EBUSY);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	nicfix_kill(child);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &b), 0);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	assert_unchanged();
}

/* ---- others' settings ---- */

static void test_foreign_untouched(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-port 5201"), flow("tcp6 dst-port 5201") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);
	struct devmemtcp_flow mine = flow("src-ip 10.1.1.1 dst-port 22");
	struct devmemtcp_nic *nic;
	char foreign[160];
	uint32_t ctx_table[FAKE_INDIR];

	/* someone's rule at 31, someone's context 1, a custom table */
	nic_state->ntuple_on = true;
	nic_state->rule[31].used = true;
	dmt_flow_to_spec(&mine, 2, false, &nic_state->rule[31].fs);
	nic_state->rule[31].fs.location = 31;
	nic_state->ctx[1].used = true;
	for (int i = 0; i < FAKE_INDIR; i++) {
		nic_state->ctx[1].indir[i] = 3;
		nic_state->indir[i] = i % 2 ? 7 : 2;
	}
	nic_state->indir_user = true;
	memcpy(ctx_table, nic_state->ctx[1].indir, sizeof(ctx_table));
	fake_dump(nic_state, before, sizeof(before));
	dmt_spec_str(&nic_state->rule[31].fs, 0, foreign, sizeof(foreign));

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 10.1.1.1:* -> *:22 queue 2"));
	assert_non_null(strstr(after, "rule 30: tcp4 *:* -> *:5201 context 2"));
	assert_memory_equal(nic_state->ctx[1].indir, ctx_table, sizeof(ctx_table));
	/* entries that pointed at queue 2 still do; queue 7's moved */
	for (int i = 0; i < FAKE_INDIR; i += 2)
		assert_int_equal(nic_state->indir[i], 2);
	for (int i = 1; i < FAKE_INDIR; i += 2)
		assert_true(nic_state->indir[i] < 6);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

/* Changes others made while the handle lived are theirs: close leaves them. */
static void test_others_changes_after_open(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-port 5201"), flow("dst-port 5202") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2,
		       .flags = DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	struct devmemtcp_flow theirs = flow("dst-port 9999");
	struct devmemtcp_nic *nic;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	/* someone deletes our rule 31 and puts theirs there (action queue 1),
	 * sets their own table, and turns header split off */
	dmt_flow_to_spec(&theirs, 1, false, &nic_state->rule[31].fs);
	nic_state->rule[31].fs.location = 31;
	for (int i = 0; i < FAKE_INDIR; i++)
		nic_state->indir[i] = 5;
	nic_state->tds_cfg = DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED;
	nic_state->hds = 512;
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:9999 queue 1"));
	assert_null(strstr(after, "rule 30"));		/* ours is gone */
	assert_non_null(strstr(after, "rss (user): 5 5 5 5"));
	assert_non_null(strstr(after, "tds cfg 1 shows 1 hds 512 ntuple 1"));
	assert_false(journal_exists());
}

static void test_conflicts(void **state)
{
	struct devmemtcp_flow f[2] = { flow("dst-ip 10.0.0.1 dst-port 5201"),
				       flow("dst-ip 10.0.0.1 dst-port 5201 queue 1") };
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);
	struct devmemtcp_flow ssh = flow("dst-port 22");
	struct devmemtcp_nic *nic;

	nic_state->changes = 0;
	/* ERRORS devmemtcp_nic_open EEXIST */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EEXIST);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: flow 1 (tcp4 *:* -> 10.0.0.1:5201) matches the same packets as flow 0 of this handle: remove one of them");
	assert_int_equal(nic_state->changes, 0);

	/* same match as a rule someone else owns */
	nic_state->ntuple_on = true;
	nic_state->rule[4].used = true;
	dmt_flow_to_spec(&ssh, 0, false, &nic_state->rule[4].fs);
	fake_dump(nic_state, before, sizeof(before));
	f[0] = flow("dst-port 22");
	o.nflows = 1;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EEXIST);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "setting up eth0 for devmem failed at ntuple rule for flow 0: flow 0 (tcp4 *:* -> *:22): rule 4 on eth0 (tcp4 *:* -> *:22 queue 0) "
			    "matches these packets first and steers them elsewhere: delete it (ethtool -N eth0 delete 4) or pass DEVMEMTCP_NIC_ALLOW_SHADOW; "
			    "the 4 finished steps were undone");
	assert_unchanged();
}

static void test_bad_input(void **state)
{
	static const uint32_t q9[] = { 9 };
	struct devmemtcp_flow f = flow("dst-port 1 queue 1"), all = { .family = AF_INET };
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q9, .nqueues = 1);
	struct devmemtcp_nic *nic = (void *)1;
	struct { struct devmemtcp_nic_opts o; uint64_t newer; } big = {
		.o = { .sz = sizeof(big) }, .newer = 1 };

	/* ERRORS devmemtcp_nic_open ERANGE */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -ERANGE);
	assert_null(nic);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: RX queue 9 is out of range: the interface has 8 RX queues (0-7); pick a lower index or add channels with ethtool -L");
	/* the message names the count asked for, not a clamped one */
	o = (struct devmemtcp_nic_opts){ .sz = sizeof(o), .nqueues = 100 };
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -ERANGE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: 100 devmem queues asked for but the interface has 8 RX queues: ask for fewer or add channels with ethtool -L");
	o = (struct devmemtcp_nic_opts){ .sz = sizeof(o), .flows = &f, .nflows = 1 };
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -ERANGE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: flow 0: queue index 1 is out of range: the handle has 1 devmem queues (indexes 0-0)");
	o.flows = &all;
	/* ERRORS devmemtcp_nic_open EINVAL */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "eth0: flow 0 matches every TCP packet: give at least one address or port with a non-zero mask");
	all.family = 12345;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EAFNOSUPPORT);
	o = (struct devmemtcp_nic_opts){ .sz = sizeof(o), .nflows = 2 };
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_nic_open: nflows is 2 but flows is NULL");
	o = (struct devmemtcp_nic_opts){ .sz = sizeof(o), .flags = 0x100 };
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_nic_open: unknown flags 0x100");
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &big.o, &nic), -EINVAL);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0/x", NULL, &nic), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "invalid interface name \"eth0/x\": a name has 1 to 15 characters without '/', ':' or spaces");
	assert_int_equal(devmemtcp_nic_open(ctx, "", NULL, &nic), -EINVAL);
	assert_int_equal(devmemtcp_nic_open(ctx, "abcdefghijklmnop", NULL, &nic), -EINVAL);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", NULL, NULL), -EINVAL);
	assert_int_equal(devmemtcp_nic_open(NULL, "eth0", NULL, &nic), -EINVAL);
	assert_int_equal(devmemtcp_nic_close(NULL), 0);
	assert_string_equal(devmemtcp_nic_errmsg(NULL), "");
	/* ERRORS devmemtcp_nic_queues EINVAL */
	assert_int_equal(devmemtcp_nic_queues(NULL, NULL), -EINVAL);
	/* no handle: the message is the thread's */
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_nic_queues: nic is NULL");
	/* ERRORS devmemtcp_nic_remove_flow EINVAL */
	assert_int_equal(devmemtcp_nic_remove_flow(NULL, 0), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_nic_remove_flow: nic is NULL");
	/* ERRORS devmemtcp_nic_stats EINVAL */
	assert_int_equal(devmemtcp_nic_stats(NULL, NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "devmemtcp_nic_stats: nic or stats is NULL, or stats->sz is not set: set .sz = sizeof(struct devmemtcp_nic_stats)");
	assert_null(devmemtcp_nic_binding(NULL));
	assert_unchanged();
}

static void test_unsupported(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 1");
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *nic;

	nic_state->has_tds = false;
	fake_dump(nic_state, before, sizeof(before));
	/* ERRORS devmemtcp_nic_open EOPNOTSUPP */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "cannot set up devmem: eth0 does not support header split (tcp-data-split): devmem TCP needs a driver with header split and queue management (gve, bnxt_en, mlx5, fbnic)");
	fake_init(nic_state);
	nic_state->rss = false;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "cannot set up devmem: eth0 has no RSS indirection table, so other traffic cannot be kept off the devmem queues: pass DEVMEMTCP_NIC_KEEP_RSS if you steer it some other way");
	o.flags = DEVMEMTCP_NIC_KEEP_RSS;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
	fake_init(nic_state);
	nic_state->ntuple_hw = false;
	fake_dump(nic_state, before, sizeof(before));
	o.flags = 0;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "setting up eth0 for devmem failed at ntuple feature: eth0 cannot turn on ntuple filters (rx-ntuple-filter is off [fixed]): "
			    "devmem needs a NIC whose driver supports ntuple flow steering; the 2 finished steps were undone");
	assert_unchanged();
}

static void test_live_flows(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flags = DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	struct devmemtcp_flow a = flow("dst-ip 10.0.0.1 dst-port 5201");
	struct devmemtcp_flow b = flow("tcp6 src-ip 2001:db8::9/64 dst-port 5201 queue 1");
	static char with[16384];
	struct devmemtcp_nic *nic;
	int ia, ib;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_false(nic_state->ntuple_on);	/* not needed yet */
	ia = devmemtcp_nic_add_flow(nic, &a);
	assert_int_equal(ia, 0);
	assert_true(nic_state->ntuple_on);
	ib = devmemtcp_nic_add_flow(nic, &b);
	assert_int_equal(ib, 1);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> 10.0.0.1:5201 queue 6"));
	assert_non_null(strstr(after, "rule 30: tcp6 [2001:db8::/64]:* -> *:5201 queue 7"));
	/* ERRORS devmemtcp_nic_add_flow EEXIST */
	assert_int_equal(devmemtcp_nic_add_flow(nic, &a), -EEXIST);
	assert_string_equal(devmemtcp_nic_errmsg(nic),
			    "adding a flow on eth0: flow 2 (tcp4 *:* -> 10.0.0.1:5201) matches the same packets as flow 0 of this handle: remove one of them");
	assert_int_equal(devmemtcp_nic_remove_flow(nic, ia), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_null(strstr(after, "rule 31"));
	/* ERRORS devmemtcp_nic_remove_flow ENOENT */
	assert_int_equal(devmemtcp_nic_remove_flow(nic, ia), -ENOENT);
	assert_string_equal(devmemtcp_nic_errmsg(nic),
			    "flow 0 is not a flow of this handle: use the id devmemtcp_nic_add_flow() returned");
	assert_int_equal(devmemtcp_nic_add_flow(nic, NULL), -EINVAL);
	/* an insert the driver refuses leaves nothing behind */
	fake_dump(nic_state, with, sizeof(with));
	nic_state->changes = 0;
	nic_state->fail_op_at = 1;
	assert_int_equal(devmemtcp_nic_add_flow(nic, &a), -EIO);
	nic_state->fail_op_at = 0;
	assert_string_equal(devmemtcp_nic_errmsg(nic),
			    "adding a flow on eth0: ETHTOOL_SRXCLSRLINS on eth0 failed: EIO");
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(with, after);
	/* re-adding works and gets a new id */
	assert_int_equal(devmemtcp_nic_add_flow(nic, &a), 2);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

/* The kernel refuses a change (no CAP_NET_ADMIN, the interface gone):
 * open undoes what it did, close and restore keep what is left. */
static void test_kernel_refuses(void **state)
{
	static const int errs[] = { EPERM, ENODEV };
	struct devmemtcp_nic *nic;
	int status;
	pid_t dead;

	nic_state->changes = 0;
	nic_state->fail_op_at = 1;
	nic_state->fail_errno = EPERM;
	/* ERRORS devmemtcp_nic_open EPERM */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", NULL, &nic), -EPERM);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "setting up eth0 for devmem failed at header split: rings-set on eth0 failed: EPERM; the 0 finished steps were undone");
	nic_state->fail_op_at = 0;
	assert_unchanged();
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(devmemtcp_nic_open(ctx, "eth0", NULL, &nic), 0);
		nic_state->changes = 0;
		nic_state->fail_op_at = 1;
		nic_state->fail_errno = errs[i];
		/* ERRORS devmemtcp_nic_close EPERM ENODEV */
		assert_int_equal(devmemtcp_nic_close(nic), -errs[i]);
		ctxfix_expect_errmsg(ctx,
				     "closing the devmem setup of eth0 failed at RSS table: rss-set on eth0 failed: %s; what is left is recorded in %s: "
				     "the next open or close on eth0, or 'devmemtcp restore eth0', finishes it",
				     errs[i] == EPERM ? "EPERM" : "ENODEV", dir);
		nic_state->fail_op_at = 0;
		assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
		assert_unchanged();
	}
	/* a dead owner's setup: restore without the capability */
	dead = run_child(0, false, true);
	assert_int_equal(waitpid(dead, &status, 0), dead);
	nic_state->changes = 0;
	nic_state->fail_op_at = 1;
	nic_state->fail_errno = EPERM;
	/* ERRORS devmemtcp_nic_recover EPERM */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), -EPERM);
	ctxfix_expect_errmsg(ctx,
			     "undoing what pid %d (%s) left on eth0 failed at deleting the rule at location 30: EPERM",
			     dead, t_own_comm());
	nic_state->fail_op_at = 0;
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	assert_unchanged();
}

/* Another process holds the lock through close: the handle's file stays
 * for the next owner to undo. */
static void test_close_busy(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, all, .flags = DEVMEMTCP_NIC_RECOVER_ALL);
	struct devmemtcp_nic *nic;
	pid_t child;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", NULL, &nic), 0);
	child = nicfix_lock_child(dir, "eth0");
	assert_true(child > 0);
	/* ERRORS devmemtcp_nic_close EBUSY */
	assert_int_equal(devmemtcp_nic_close(nic), -EBUSY);
	ctxfix_expect_errmsg(ctx,
			     "closing the devmem setup of eth0 failed: eth0: pid %d (%s) holds %s/eth0.lock and has not let go for 50 ms: "
			     "if that process hangs, stop it; what is left is recorded in %s: the next open or close on eth0 "
			     "after this process ends, or 'devmemtcp restore --all eth0', finishes it",
			     child, t_own_comm(), dir, dir);
	nicfix_kill(child);
	/* the file is this live process's: kept until it exits, or until
	 * restore --all */
	assert_true(journal_exists());
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 0);
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", &all), 1);
	assert_unchanged();
}

/* Flows added to a live handle that the NIC or the handle cannot take. */
static void test_add_flow_refused(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flags = DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	struct devmemtcp_flow far = flow("dst-port 5201 queue 2"), f = flow("dst-port 5201");
	struct devmemtcp_flow other = flow("dst-port 9");
	struct devmemtcp_nic *nic;
	char want[512];
	pid_t child;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	/* ERRORS devmemtcp_nic_add_flow EINVAL */
	assert_int_equal(devmemtcp_nic_add_flow(nic, NULL), -EINVAL);
	assert_string_equal(devmemtcp_nic_errmsg(nic), "devmemtcp_nic_add_flow: flow is NULL");
	/* ERRORS devmemtcp_nic_add_flow ERANGE */
	assert_int_equal(devmemtcp_nic_add_flow(nic, &far), -ERANGE);
	assert_string_equal(devmemtcp_nic_errmsg(nic),
			    "adding a flow on eth0: flow 0: queue index 2 is out of range: the handle has 2 devmem queues (indexes 0-1)");
	/* ERRORS devmemtcp_nic_add_flow EBUSY */
	child = nicfix_lock_child(dir, "eth0");
	assert_true(child > 0);
	assert_int_equal(devmemtcp_nic_add_flow(nic, &f), -EBUSY);
	snprintf(want, sizeof(want),
		 "adding a flow on eth0: eth0: pid %d (%s) holds %s/eth0.lock and has not let go for 50 ms: if that process hangs, stop it",
		 child, t_own_comm(), dir);
	assert_string_equal(devmemtcp_nic_errmsg(nic), want);
	nicfix_kill(child);
	/* every location taken by someone else's rule */
	nic_state->ntuple_on = true;
	for (int i = 0; i < FAKE_RULES; i++) {
		nic_state->rule[i].used = true;
		dmt_flow_to_spec(&other, 0, false, &nic_state->rule[i].fs);
		nic_state->rule[i].fs.h_u.tcp_ip4_spec.pdst = htons((uint16_t)(100 + i));
		nic_state->rule[i].fs.location = (uint32_t)i;
	}
	/* ERRORS devmemtcp_nic_add_flow ENOSPC */
	assert_int_equal(devmemtcp_nic_add_flow(nic, &f), -ENOSPC);
	assert_string_equal(devmemtcp_nic_errmsg(nic),
			    "adding a flow on eth0: the ntuple rule table of eth0 is full (32 of 32 rules): delete rules with ethtool -N eth0 delete LOC");
	memset(nic_state->rule, 0, sizeof(nic_state->rule));
	nic_state->ntuple_on = false;
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
	/* a NIC without ntuple filters */
	nic_state->ntuple_hw = false;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	/* ERRORS devmemtcp_nic_add_flow EOPNOTSUPP */
	assert_int_equal(devmemtcp_nic_add_flow(nic, &f), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_nic_errmsg(nic),
			    "adding a flow on eth0: eth0 cannot turn on ntuple filters (rx-ntuple-filter is off [fixed]): devmem needs a NIC whose driver supports ntuple flow steering");
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	assert_unchanged();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_queues),
		cmocka_unit_test(test_plan_rss),
		cmocka_unit_test_setup(test_setup_close_identical, each),
		cmocka_unit_test_setup(test_one_queue_no_context, each),
		cmocka_unit_test_setup(test_no_context_round_robin, each),
		cmocka_unit_test_setup(test_contexts_unsupported, each),
		cmocka_unit_test_setup(test_contexts_taken, each),
		cmocka_unit_test_setup(test_already_configured, each),
		cmocka_unit_test_setup(test_explicit_tds_restored, each),
		cmocka_unit_test_setup(test_tds_shown_not_configured, each),
		cmocka_unit_test_setup(test_tds_shown_once_set, each),
		cmocka_unit_test_setup(test_fail_every_step, each),
		cmocka_unit_test_setup(test_driver_error_every_change, each),
		cmocka_unit_test_setup(test_undo_failure_keeps_journal, each),
		cmocka_unit_test_setup(test_crash_every_step, each),
		cmocka_unit_test_setup(test_crash_inside_insert, each),
		cmocka_unit_test_setup(test_open_recovers, each),
		cmocka_unit_test_setup(test_two_owners_and_busy_lock, each),
		cmocka_unit_test_setup(test_foreign_untouched, each),
		cmocka_unit_test_setup(test_others_changes_after_open, each),
		cmocka_unit_test_setup(test_conflicts, each),
		cmocka_unit_test_setup(test_bad_input, each),
		cmocka_unit_test_setup(test_unsupported, each),
		cmocka_unit_test_setup(test_live_flows, each),
		cmocka_unit_test_setup(test_kernel_refuses, each),
		cmocka_unit_test_setup(test_close_busy, each),
		cmocka_unit_test_setup(test_add_flow_refused, each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
