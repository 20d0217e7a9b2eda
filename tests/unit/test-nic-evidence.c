// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A journal is evidence, not an order: recovery undoes a change only when
 * the device still shows what the dead process set, and applies nothing of
 * a journal written for another interface, device or namespace.  A foreign
 * ntuple rule that would capture a flow first is refused with the rule and
 * the fix.  A handle whose setup someone else undid touches only what its
 * file still records.  Against the in-memory NIC (fake-nic.h); the dead
 * process is a forked child killed after its setup.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctxfixture.h"
#include "fake-nic.h"
#include "nicfixture.h"

static struct fake_nic *nic_state;
static struct devmemtcp_ctx *ctx;
static char dir[64];
static char before[16384], after[16384];

/* Keep what the library logs at warning level and above. */
static int setup(void **state)
{
	nic_state = fake_shared();
	if (!nic_state)
		return -1;
	setenv("DEVMEMTCP_TEST_LOCK_WAIT_MS", "50", 1);
	return nicfix_setup_logged(dir, sizeof(dir), "dmt-evidence", &ctx);
}

static int teardown(void **state)
{
	return nicfix_teardown(dir, ctx);
}

static int each(void **state)
{
	fake_init(nic_state);
	nicfix_logged[0] = '\0';
	return nicfix_rm(dir, "*");
}

static struct devmemtcp_flow flow(const char *text)
{
	struct devmemtcp_flow f;

	assert_int_equal(devmemtcp_flow_parse(text, &f), 0);
	return f;
}

/* A process that sets up eth0 with opts and is killed. */
static void crashed_owner(const struct devmemtcp_nic_opts *o, bool in_insert)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct devmemtcp_nic *nic;

		nic_state->kill_after_insert = in_insert;
		if (devmemtcp_nic_open(ctx, "eth0", o, &nic))
			_exit(3);
		raise(SIGKILL);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	nic_state->kill_after_insert = false;
}

/* Rewrite every journal file of the run directory: each line starting
 * with from is replaced by to (NULL: dropped); names starting with
 * from_name are renamed to start with to_name. */
static void tamper(const char *from, const char *to, const char *from_name,
		   const char *to_name)
{
	char names[32][NAME_MAX + 1];
	struct dirent *d;
	int n = 0;
	DIR *dp = opendir(dir);

	assert_non_null(dp);
	while ((d = readdir(dp)) && n < 32)
		if (d->d_name[0] != '.' && !strstr(d->d_name, ".lock"))
			snprintf(names[n++], sizeof(names[0]), "%s", d->d_name);
	closedir(dp);
	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX], tmp[PATH_MAX], line[4096];
		FILE *in, *out;

		assert_true(snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path));
		snprintf(tmp, sizeof(tmp), "%s/tampered", dir);
		in = fopen(path, "r");
		out = fopen(tmp, "w");
		assert_non_null(in);
		assert_non_null(out);
		while (fgets(line, sizeof(line), in)) {
			if (from && strncmp(line, from, strlen(from)) == 0) {
				if (to)
					fputs(to, out);
				continue;
			}
			fputs(line, out);
		}
		fclose(in);
		fclose(out);
		assert_int_equal(chmod(tmp, 0600), 0);
		assert_int_equal(unlink(path), 0);
		if (from_name && strncmp(names[i], from_name, strlen(from_name)) == 0)
			assert_true(snprintf(path, sizeof(path), "%s/%s%s", dir, to_name,
					     names[i] + strlen(from_name)) < (int)sizeof(path));
		assert_int_equal(rename(tmp, path), 0);
	}
}

/* ---- item: recovery trusts only evidence ---- */

/* The dead owner's context was deleted and its id reused by someone else
 * with another table: not ours, left alone. */
static void test_context_id_reused(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = &f, .nflows = 1);

	crashed_owner(&o, false);
	assert_true(nic_state->ctx[1].used);
	/* an administrator removes our rule and context, makes their own */
	memset(nic_state->rule, 0, sizeof(nic_state->rule));
	for (int i = 0; i < FAKE_INDIR; i++)
		nic_state->ctx[1].indir[i] = 2;
	fake_dump(nic_state, before, sizeof(before));
	assert_true(devmemtcp_nic_recover(ctx, "eth0", NULL) >= 0);
	assert_true(nic_state->ctx[1].used);
	for (int i = 0; i < FAKE_INDIR; i++)
		assert_int_equal(nic_state->ctx[1].indir[i], 2);
	assert_non_null(strstr(nicfix_logged, "RSS context 1 on eth0 differs from what pid "));
	assert_non_null(strstr(nicfix_logged, ": left alone"));
}

/* Someone deleted the dead owner's rule and put theirs at its location,
 * with the same flow type and action: not ours, left alone. */
static void test_rule_replaced(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201"), theirs = flow("dst-port 9999");
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);

	crashed_owner(&o, false);
	assert_true(nic_state->rule[31].used);
	assert_int_equal(nic_state->rule[31].fs.ring_cookie, 7);
	dmt_flow_to_spec(&theirs, 7, false, &nic_state->rule[31].fs);
	nic_state->rule[31].fs.location = 31;
	assert_true(devmemtcp_nic_recover(ctx, "eth0", NULL) >= 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> *:9999 queue 7"));
	assert_non_null(strstr(nicfix_logged, "rule at location 31 on eth0 differs from what pid "));
}

/* A rule inserted just before the crash (location unknown) is found by
 * its content; with two candidates nothing is guessed. */
static void test_pending_rule_ambiguous(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);

	crashed_owner(&o, true);
	assert_true(nic_state->rule[31].used);
	/* an identical rule appears elsewhere since */
	nic_state->rule[3] = nic_state->rule[31];
	nic_state->rule[3].fs.location = 3;
	assert_true(devmemtcp_nic_recover(ctx, "eth0", NULL) >= 0);
	assert_true(nic_state->rule[31].used);
	assert_true(nic_state->rule[3].used);
	assert_non_null(strstr(nicfix_logged, "2 rules on eth0 match the rule pid "));
}

/* A journal names the interface it was written for. */
static void test_journal_of_another_interface(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2);

	crashed_owner(&o, false);
	tamper(NULL, NULL, "eth0.", "eth1.");
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth1", NULL), -ESTALE);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), " was written for eth0, not eth1: nothing of it is applied"));
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

/* The device was replaced: its ifindex differs from the journal's. */
static void test_ifindex_changed(void **state)
{
	static const char replaced[] =
		"%s/eth0.base was written when eth0 had ifindex 9; it has 1 now (the device was replaced): "
		"nothing of it is applied; delete it once the old device's settings no longer matter";
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2);
	struct devmemtcp_nic *nic;

	crashed_owner(&o, false);
	tamper("ifindex ", "ifindex 9\n", NULL, NULL);
	fake_dump(nic_state, before, sizeof(before));
	/* ERRORS devmemtcp_nic_recover ESTALE */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), -ESTALE);
	ctxfix_expect_errmsg(ctx, replaced, dir);
	/* ERRORS devmemtcp_nic_open ESTALE */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -ESTALE);
	ctxfix_expect_errmsg(ctx, replaced, dir);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

/* A journal that does not say which network namespace it belongs to is
 * not applied to this one's device of the same name. */
static void test_no_namespace(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2);

	crashed_owner(&o, false);
	tamper("netns ", NULL, NULL, NULL);
	fake_dump(nic_state, before, sizeof(before));
	assert_true(devmemtcp_nic_recover(ctx, "eth0", NULL) < 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

/* A journal written in another network namespace: neither restore nor
 * the next open applies it here. */
static void test_other_namespace(void **state)
{
	static const char other[] =
		"%s/eth0.base was written in network namespace net:[12345], this is net:[%llu]: "
		"run devmemtcp restore eth0 in that namespace (ip netns exec NAME ...)";
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2);
	struct devmemtcp_nic *nic;

	crashed_owner(&o, false);
	tamper("netns ", "netns 12345\n", NULL, NULL);
	fake_dump(nic_state, before, sizeof(before));
	/* ERRORS devmemtcp_nic_recover EXDEV */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), -EXDEV);
	ctxfix_expect_errmsg(ctx, other, dir, (unsigned long long)dmt_netns_id());
	/* ERRORS devmemtcp_nic_open EXDEV */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EXDEV);
	ctxfix_expect_errmsg(ctx, other, dir, (unsigned long long)dmt_netns_id());
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

/* A journal with a line this version cannot have written. */
static void test_malformed(void **state)
{
	static const char bad[] =
		"%s/%s is malformed (line 11): undo what it records by hand, then delete it";
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2);
	struct devmemtcp_nic *nic;
	char name[NAME_MAX + 1] = "";
	struct dirent *d;
	DIR *dp;

	crashed_owner(&o, false);
	tamper("queues ", "queues two\n", NULL, NULL);
	dp = opendir(dir);
	assert_non_null(dp);
	while ((d = readdir(dp)))
		if (!strncmp(d->d_name, "eth0.owner.", 11))
			snprintf(name, sizeof(name), "%s", d->d_name);
	closedir(dp);
	fake_dump(nic_state, before, sizeof(before));
	/* ERRORS devmemtcp_nic_recover EBADMSG */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), -EBADMSG);
	ctxfix_expect_errmsg(ctx, bad, dir, name);
	/* ERRORS devmemtcp_nic_open EBADMSG */
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EBADMSG);
	ctxfix_expect_errmsg(ctx, bad, dir, name);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

/* Another owner's file cannot be read (malformed): the close still undoes
 * the handle's own rule and context, which the device shows, and leaves
 * the shared settings, which depend on every owner, to the next
 * operation; once the file is dealt with, a recover restores the rest. */
static void test_close_with_malformed_file(void **state)
{
	struct devmemtcp_flow f = flow("dst-ip 10.0.0.1 dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *nic;
	char path[PATH_MAX];
	struct dmt_err e;

	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(dmt_file_write(nicfix_rd(dir), "eth0.owner.1.1.1", "garbage\n", 8, &e), 0);
	snprintf(path, sizeof(path), "%s/eth0.owner.1.1.1", dir);
	assert_int_equal(devmemtcp_nic_close(nic), -EBADMSG);
	ctxfix_expect_errmsg(ctx, "closing the devmem setup of eth0 failed: %s is malformed (line 1): undo what it records by hand, then delete it; "
			     "what is left is recorded in %s: the next open or close on eth0, or 'devmemtcp restore eth0', finishes it",
			     path, dir);
	for (int i = 0; i < FAKE_RULES; i++)
		assert_false(nic_state->rule[i].used);
	for (int c = 1; c <= FAKE_CTX; c++)
		assert_false(nic_state->ctx[c].used);
	assert_int_equal(nic_state->tds_cfg, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED);
	assert_int_equal(unlink(path), 0);
	assert_true(nicfix_files_left(dir, "eth0"));	/* the baseline */

	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", NULL), 1);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	assert_false(nicfix_files_left(dir, "eth0"));
}

/* ---- item: shadowing foreign rules ---- */

/* A foreign rule more specific than ours, at a lower location (matched
 * first), steering elsewhere: part of our flow would arrive as ordinary
 * data.  Refused with the rule and the fix; nothing is left behind. */
static void test_shadowed_by_more_specific(void **state)
{
	struct devmemtcp_flow f = flow("dst-ip 10.0.0.1 dst-port 5201"),
			      theirs = flow("src-ip 10.0.0.9 dst-ip 10.0.0.1 dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *nic;

	nic_state->ntuple_on = true;
	nic_state->rule[0].used = true;
	dmt_flow_to_spec(&theirs, 0, false, &nic_state->rule[0].fs);
	nic_state->rule[0].fs.location = 0;
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), -EEXIST);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx),
			       "flow 0 (tcp4 *:* -> 10.0.0.1:5201): rule 0 on eth0 (tcp4 10.0.0.9:* -> 10.0.0.1:5201 queue 0) "
			       "matches these packets first and steers them elsewhere: delete it (ethtool -N eth0 delete 0) "
			       "or pass DEVMEMTCP_NIC_ALLOW_SHADOW"));
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	/* the caller who knows better says so */
	o.flags = DEVMEMTCP_NIC_ALLOW_SHADOW;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_non_null(strstr(after, "rule 0: tcp4 10.0.0.9:* -> 10.0.0.1:5201 queue 0"));
	assert_non_null(strstr(after, "rule 31: tcp4 *:* -> 10.0.0.1:5201 queue 7"));
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
}

/* The same on a live handle: the flow is refused and no rule stays. */
static void test_add_flow_shadowed(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201"), theirs = flow("dst-port 5201");
	DEVMEMTCP_OPTS(nic_opts, o, .flags = DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	struct devmemtcp_nic *nic;

	theirs.family = AF_INET;
	nic_state->ntuple_on = true;
	nic_state->rule[2].used = true;
	dmt_flow_to_spec(&theirs, 0, false, &nic_state->rule[2].fs);
	nic_state->rule[2].fs.ring_cookie = RX_CLS_FLOW_DISC;	/* a drop rule */
	nic_state->rule[2].fs.location = 2;
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_add_flow(nic, &f), -EEXIST);
	assert_non_null(strstr(devmemtcp_nic_errmsg(nic), ": rule 2 on eth0 ("));
	assert_non_null(strstr(devmemtcp_nic_errmsg(nic),
			       ") matches these packets first and steers them elsewhere: delete it (ethtool -N eth0 delete 2)"));
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
}

/* ---- item: a handle whose setup someone else undid ---- */

/* restore --all undid a live handle's setup, and a new owner put an
 * identical rule at the same location. */
static void undone_then_reused(const struct devmemtcp_nic_opts *o, struct devmemtcp_nic **a,
			       struct devmemtcp_nic **b, char *with_b, size_t len)
{
	DEVMEMTCP_OPTS(nic_opts, all, .flags = DEVMEMTCP_NIC_RECOVER_ALL);

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", o, a), 0);
	fake_dump(nic_state, with_b, len);
	assert_non_null(strstr(with_b, "rule 31: tcp4 *:* -> *:5201 queue 6"));
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", &all), 1);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", o, b), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(with_b, after);
}

/* The stale handle's file is gone, so nothing on the device is its own
 * any more: its close leaves the new owner's rule alone, and adding or
 * removing a flow is refused. */
static void test_stale_handle(void **state)
{
	static const uint32_t q6[] = { 6 };
	struct devmemtcp_flow f = flow("dst-port 5201"), g = flow("dst-port 5202");
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q6, .nqueues = 1, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *a, *b;
	char with_b[16384], head[512];
	const char *tail = " is gone or no longer what it wrote; close the handle and open a new one";

	fake_dump(nic_state, before, sizeof(before));
	snprintf(head, sizeof(head),
		 "this handle's setup of eth0 was undone by someone else (devmemtcp restore --all, say): its file %s/eth0.owner.%d.",
		 dir, getpid());
	undone_then_reused(&o, &a, &b, with_b, sizeof(with_b));
	nicfix_logged[0] = '\0';
	assert_int_equal(devmemtcp_nic_close(a), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(with_b, after);
	assert_non_null(strstr(nicfix_logged, head));
	assert_int_equal(devmemtcp_nic_close(b), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);

	undone_then_reused(&o, &a, &b, with_b, sizeof(with_b));
	/* ERRORS devmemtcp_nic_remove_flow ESTALE */
	assert_int_equal(devmemtcp_nic_remove_flow(a, 0), -ESTALE);
	assert_ptr_equal(strstr(devmemtcp_nic_errmsg(a), head),
			 devmemtcp_nic_errmsg(a) + strlen("removing flow 0 on eth0: "));
	assert_non_null(strstr(devmemtcp_nic_errmsg(a), tail));
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(with_b, after);
	/* ERRORS devmemtcp_nic_add_flow ESTALE */
	assert_int_equal(devmemtcp_nic_add_flow(a, &g), -ESTALE);
	assert_ptr_equal(strstr(devmemtcp_nic_errmsg(a), head),
			 devmemtcp_nic_errmsg(a) + strlen("adding a flow on eth0: "));
	assert_non_null(strstr(devmemtcp_nic_errmsg(a), tail));
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(with_b, after);
	assert_int_equal(devmemtcp_nic_close(a), 0);
	assert_int_equal(devmemtcp_nic_close(b), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	assert_false(nicfix_files_left(dir, "eth0"));
}

/* restore --all undid part of a live handle's setup: its rule went, its
 * context could not (a driver error), and its file now records only the
 * context, marked closed.  The handle is stale (ESTALE), and its close
 * undoes what the file records. */
static void test_stale_handle_part_undone(void **state)
{
	struct devmemtcp_flow f = flow("dst-port 5201"), g = flow("dst-port 5202");
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = &f, .nflows = 1);
	DEVMEMTCP_OPTS(nic_opts, all, .flags = DEVMEMTCP_NIC_RECOVER_ALL);
	struct devmemtcp_nic *a;

	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &a), 0);
	nic_state->changes = 0;
	nic_state->fail_op_at = 2;	/* the rule goes, the context stays */
	assert_int_equal(devmemtcp_nic_recover(ctx, "eth0", &all), -EIO);
	nic_state->fail_op_at = 0;
	fake_dump(nic_state, after, sizeof(after));
	assert_null(strstr(after, "rule "));
	assert_non_null(strstr(after, "context 1:"));
	assert_int_equal(devmemtcp_nic_add_flow(a, &g), -ESTALE);
	assert_non_null(strstr(devmemtcp_nic_errmsg(a), "is gone or no longer what it wrote; close the handle and open a new one"));
	assert_int_equal(devmemtcp_nic_close(a), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	assert_false(nicfix_files_left(dir, "eth0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_context_id_reused, each),
		cmocka_unit_test_setup(test_rule_replaced, each),
		cmocka_unit_test_setup(test_pending_rule_ambiguous, each),
		cmocka_unit_test_setup(test_journal_of_another_interface, each),
		cmocka_unit_test_setup(test_ifindex_changed, each),
		cmocka_unit_test_setup(test_other_namespace, each),
		cmocka_unit_test_setup(test_malformed, each),
		cmocka_unit_test_setup(test_no_namespace, each),
		cmocka_unit_test_setup(test_close_with_malformed_file, each),
		cmocka_unit_test_setup(test_shadowed_by_more_specific, each),
		cmocka_unit_test_setup(test_add_flow_shadowed, each),
		cmocka_unit_test_setup(test_stale_handle, each),
		cmocka_unit_test_setup(test_stale_handle_part_undone, each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
