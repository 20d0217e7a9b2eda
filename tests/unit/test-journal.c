// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The NIC journal (text round trip, malformed input, atomic files) and the
 * per-interface lock (holder pid and program named on -EBUSY). */
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

#include "nicfixture.h"
#include "uapi.h"

static uint32_t *dup32(const uint32_t *v, uint32_t n)
{
	uint32_t *p = malloc(n * sizeof(*p) + 4);

	memcpy(p, v, n * sizeof(*p));
	return p;
}

static void sample(struct dmt_journal *j)
{
	static const uint32_t q[] = { 6, 7 };
	static const uint32_t rss[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	static const uint32_t ctxs[] = { 1 };
	static const uint32_t rules[] = { 4, 9 };
	static const uint32_t ct[] = { 6, 7, 6, 7, 6, 7, 6, 7 };
	struct devmemtcp_flow f;

	memset(j, 0, sizeof(*j));
	j->pid = 4242;
	snprintf(j->comm, sizeof(j->comm), "my loader");	/* space */
	snprintf(j->ifname, sizeof(j->ifname), "dsim0");
	j->ifindex = 5;
	j->netns = 4026531992ull;
	j->queues = dup32(q, 2);
	j->nqueues = 2;
	j->have_prior = true;
	j->has_tds = true;
	j->tds = DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED;
	j->has_hds = true;
	j->hds = 256;
	j->ntuple_on = false;
	j->rss_default = true;
	j->rss_indir = dup32(rss, 8);
	j->rss_size = 8;
	j->prior_ctx = dup32(ctxs, 1);
	j->nprior_ctx = 1;
	j->prior_rules = dup32(rules, 2);
	j->nprior_rules = 2;
	j->changed = DMT_J_RINGS | DMT_J_RSS | DMT_J_NTUPLE | DMT_J_CTX;
	j->rss_set = dup32(ct, 8);
	j->rss_set_size = 8;
	for (int i = 0; i < 8; i++)
		j->rss_set[i] = (uint32_t)i % 6;
	j->ctx_id = 2;
	j->ctx_indir = dup32(ct, 8);
	j->ctx_size = 8;
	j->rules = calloc(2, sizeof(*j->rules));
	j->nrules = 2;
	devmemtcp_flow_parse("dst-ip 10.0.0.1 dst-port 5201", &f);
	dmt_flow_to_spec(&f, 0, true, &j->rules[0].fs);
	j->rules[0].id = 0;
	j->rules[0].placed = true;
	j->rules[0].location = 1023;
	j->rules[0].rss_context = 2;
	devmemtcp_flow_parse("tcp6 dst-ip 2001:db8::1 dst-port 5201", &f);
	dmt_flow_to_spec(&f, 7, false, &j->rules[1].fs);
	j->rules[1].id = 1;
	j->rules[1].placed = false;
	j->rules[1].location = RX_CLS_LOC_ANY;
}

static void test_round_trip(void **state)
{
	struct dmt_journal j, k;
	char *text, *text2;
	size_t len, len2;
	int bad;

	sample(&j);
	assert_int_equal(dmt_journal_format(&j, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	/* human readable: an operator can see what a dead process left */
	assert_non_null(strstr(text, "devmemtcp-journal 1\npid 4242\ncomm my_loader\nifname dsim0\nifindex 5\nnetns 4026531992\nqueues 2 6 7\n"));
	assert_non_null(strstr(text, "\nprior tds=1 hds=256 ntuple=0 rss-default=1\nprior-rss 8 0 1 2 3 4 5 6 7\nprior-contexts 1 1\nprior-rules 2 4 9\n"));
	assert_non_null(strstr(text, "\nchanged rings rss ntuple context\nrss-set 8 0 1 2 3 4 5 0 1\ncontext 2 table 8 6 7 6 7 6 7 6 7\nrule 0 placed 1023 2 "));
	assert_non_null(strstr(text, "\nrule 1 pending 4294967295 0 05000000"));
	assert_int_equal(strcmp(text + len - 4, "end\n"), 0);

	assert_int_equal(dmt_journal_parse(text, len, &k, &bad), 0);
	assert_int_equal(k.pid, 4242);
	assert_string_equal(k.comm, "my_loader");
	assert_string_equal(k.ifname, "dsim0");
	assert_int_equal(k.ifindex, 5);
	assert_int_equal(k.netns, 4026531992ull);
	assert_int_equal(k.nqueues, 2);
	assert_int_equal(k.queues[1], 7);
	assert_true(k.have_prior);
	assert_true(k.has_tds);
	assert_int_equal(k.tds, 1);
	assert_int_equal(k.hds, 256);
	assert_true(k.rss_default);
	assert_int_equal(k.rss_size, 8);
	assert_memory_equal(k.rss_indir, j.rss_indir, 32);
	assert_int_equal(k.nprior_ctx, 1);
	assert_int_equal(k.nprior_rules, 2);
	assert_int_equal(k.prior_rules[1], 9);
	assert_int_equal(k.changed, j.changed);
	assert_int_equal(k.ctx_id, 2);
	assert_int_equal(k.rss_set_size, 8);
	assert_memory_equal(k.rss_set, j.rss_set, 32);
	assert_memory_equal(k.ctx_indir, j.ctx_indir, 32);
	assert_int_equal(k.nrules, 2);
	assert_true(k.rules[0].placed);
	assert_int_equal(k.rules[0].location, 1023);
	assert_int_equal(k.rules[0].rss_context, 2);
	assert_memory_equal(&k.rules[0].fs, &j.rules[0].fs, sizeof(j.rules[0].fs));
	assert_false(k.rules[1].placed);
	assert_memory_equal(&k.rules[1].fs, &j.rules[1].fs, sizeof(j.rules[1].fs));
	/* and formats to the same text */
	assert_int_equal(dmt_journal_format(&k, &text2, &len2), 0);
	assert_int_equal(len, len2);
	assert_string_equal(text, text2);
	free(text);
	free(text2);
	dmt_journal_free(&j);
	dmt_journal_free(&k);
}

static void test_minimal(void **state)
{
	struct dmt_journal j = { .pid = 1 }, k;
	char *text;
	size_t len;

	snprintf(j.ifname, sizeof(j.ifname), "eth0");
	assert_int_equal(dmt_journal_format(&j, &text, &len), 0);
	assert_string_equal(text, "devmemtcp-journal 1\npid 1\ncomm ?\nifname eth0\nifindex 0\nqueues 0\nchanged -\nend\n");
	assert_int_equal(dmt_journal_parse(text, len, &k, NULL), 0);
	assert_false(k.have_prior);
	assert_int_equal(k.changed, 0);
	assert_int_equal(k.nrules, 0);
	free(text);
	dmt_journal_free(&k);
}

static void test_malformed(void **state)
{
	static const struct {
		const char *text;
		int line;
	} bad[] = {
		{ "", 0 },
		{ "devmemtcp-journal 2\nifname a\nend\n", 1 },
		{ "devmemtcp-journal 1\nifname a\n", 2 },		/* no end: torn */
		{ "devmemtcp-journal 1\nend\n", 2 },			/* no ifname */
		{ "devmemtcp-journal 1\nifname a\nbogus 1\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nqueues 3 1 2\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nqueues 1 1 2\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nchanged rings teapot\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nrule 0 placed 1 0 00ff\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nrule 0 maybe 1 0 00\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nprior tds=1 hds=x\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\npid -3\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nend\nifname b\n", 4 },
		{ "devmemtcp-journal 1\nifname abcdefghijklmnopq\nend\n", 2 },
		{ "devmemtcp-journal 1\nifname a\ncontext 1 tab 0\nend\n", 3 },
		{ "devmemtcp-journal 1\nifname a\nnetns x\nend\n", 3 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct dmt_journal j;
		int line = -1;

		assert_int_equal(dmt_journal_parse(bad[i].text, strlen(bad[i].text),
						   &j, &line), -EBADMSG);
		if (bad[i].line)
			assert_int_equal(line, bad[i].line);
		assert_null(j.queues);
		assert_null(j.rules);
	}
}

/* Mutated and truncated journals: parse fails or succeeds, never
 * crashes or leaks (run under ASan in the developer build). */
static void test_parse_fuzz(void **state)
{
	struct dmt_journal j, k;
	char *text, *m;
	size_t len;
	unsigned int seed = 12345;
	int ok = 0;

	sample(&j);
	assert_int_equal(dmt_journal_format(&j, &text, &len), 0);
	m = malloc(len + 1);
	for (int round = 0; round < 20000; round++) {
		size_t n = len;

		memcpy(m, text, len);
		for (int e = 0; e < 1 + round % 4; e++) {
			size_t at = (size_t)rand_r(&seed) % len;

			switch (rand_r(&seed) % 4) {
			case 0: m[at] = (char)rand_r(&seed); break;
			case 1: m[at] = "0123456789 \n-x"[rand_r(&seed) % 15]; break;
			case 2: n = at; break;			/* torn */
			case 3: m[at] = '\n'; break;
			}
		}
		if (dmt_journal_parse(m, n, &k, NULL) == 0) {
			ok++;
			dmt_journal_free(&k);
		}
	}
	/* mutations that keep a valid journal exist (a digit in a value) */
	assert_true(ok > 0);
	free(m);
	free(text);
	dmt_journal_free(&j);
}

/*
 * A journal is accepted only if writing it back keeps all it says: no
 * junk after the header or a number, a pid in 1..4194304 (none: it was
 * written back as "pid 0", which does not parse), a program name as the
 * writer spells it, no state the writer leaves out.  Reproducers:
 * tests/fuzz/corpus/journal/regress-*.
 */
static void test_parse_strict(void **state)
{
	static const char *const bad[] = {
		"devmemtcp-journal 1tcp\npid 7\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1 \npid 7\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1\ncomm x\nifname a\nend\n",	/* no pid */
		"devmemtcp-journal 1\npid 0\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1\npid 4294967295\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1\npid 4194305\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1\npid 12abc\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1\npid +7\ncomm x\nifname a\nend\n",
		"devmemtcp-journal 1\npid 7\nifname a\nend\n",	/* no comm */
		"devmemtcp-journal 1\npid 7\ncomm x\nifname a\nifindex 5x\nend\n",
		"devmemtcp-journal 1\npid 7\ncomm x\nifname a\nifindex -1\nend\n",
		"devmemtcp-journal 1\npid 7\ncomm x\nifname a\nnetns 9 9\nend\n",
		"devmemtcp-journal 1\npid 7\ncomm x\nifname a\nprior-contexts 1 1\nend\n",
		"devmemtcp-journal 1\npid 7\ncomm x\nifname a\nchanged rings\ncontext 2 table 1 3\nend\n",
	};
	static const char comm[] =
		"devmemtcp-journal 1\npid 7\ncomm a\x01 b\nifname a\nend\n";
	static const char max[] =
		"devmemtcp-journal 1\npid 4194304\ncomm \nifname a\nend\n";
	struct dmt_journal j;
	char *text;
	size_t len;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int ret = dmt_journal_parse(bad[i], strlen(bad[i]), &j, NULL);

		if (ret != -EBADMSG)
			fail_msg("accepted: %s", bad[i]);
	}
	/* the program name is kept as it is written back */
	assert_int_equal(dmt_journal_parse(comm, strlen(comm), &j, NULL), 0);
	assert_string_equal(j.comm, "a__b");
	assert_int_equal(dmt_journal_format(&j, &text, &len), 0);
	assert_non_null(strstr(text, "\ncomm a__b\n"));
	free(text);
	dmt_journal_free(&j);
	assert_int_equal(dmt_journal_parse(max, strlen(max), &j, NULL), 0);
	assert_string_equal(j.comm, "?");
	assert_int_equal(j.pid, 4194304);
	dmt_journal_free(&j);
}

static char dir[64];

static int setup_dir(void **state)
{
	return nicfix_mkdir(dir, sizeof(dir), "dmt-journal");
}

static int remove_dir(void **state)
{
	return nicfix_rmdir(dir);
}

static void test_files(void **state)
{
	struct dmt_journal j, k;
	char path[128];
	struct stat st;

	sample(&j);
	assert_int_equal(dmt_journal_read(dir, "dsim0", &k), -ENOENT);
	assert_int_equal(dmt_journal_write(dir, "dsim0", &j), 0);
	snprintf(path, sizeof(path), "%s/dsim0.journal", dir);
	assert_int_equal(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/dsim0.journal.tmp", dir);
	assert_int_equal(stat(path, &st), -1);		/* renamed away */
	assert_int_equal(dmt_journal_read(dir, "dsim0", &k), 0);
	assert_int_equal(k.nrules, 2);
	dmt_journal_free(&k);
	/* rewrite replaces */
	j.nrules = 1;
	assert_int_equal(dmt_journal_write(dir, "dsim0", &j), 0);
	assert_int_equal(dmt_journal_read(dir, "dsim0", &k), 0);
	assert_int_equal(k.nrules, 1);
	dmt_journal_free(&k);
	j.nrules = 2;
	assert_int_equal(dmt_journal_remove(dir, "dsim0"), 0);
	assert_int_equal(dmt_journal_remove(dir, "dsim0"), 0);
	assert_int_equal(dmt_journal_read(dir, "dsim0", &k), -ENOENT);
	/* a directory that cannot be created */
	assert_int_equal(dmt_journal_write("/proc/nope/dir", "dsim0", &j), -ENOENT);
	dmt_journal_free(&j);
}

static void test_run_dir(void **state)
{
	unsetenv("DEVMEMTCP_RUN_DIR");
	assert_string_equal(dmt_run_dir(NULL), "/run/devmemtcp");
	assert_string_equal(dmt_run_dir("/x"), "/x");
	setenv("DEVMEMTCP_RUN_DIR", "/tmp/y", 1);
	assert_string_equal(dmt_run_dir(NULL), "/tmp/y");
	assert_string_equal(dmt_run_dir(""), "/tmp/y");
	unsetenv("DEVMEMTCP_RUN_DIR");
}

static void test_lock(void **state)
{
	int fd, fd2;
	pid_t holder, child;
	char comm[64];

	assert_int_equal(dmt_lock_take(dir, "dsim1", &fd, &holder, comm, sizeof(comm)), 0);
	assert_true(fd >= 0);
	/* a second open file description in this process conflicts too */
	assert_int_equal(dmt_lock_take(dir, "dsim1", &fd2, &holder, comm, sizeof(comm)), -EBUSY);
	assert_int_equal(fd2, -1);
	assert_int_equal(holder, getpid());
	assert_string_equal(comm, t_own_comm());
	/* another interface is independent */
	assert_int_equal(dmt_lock_take(dir, "dsim0", &fd2, &holder, comm, sizeof(comm)), 0);
	dmt_lock_release(fd2, dir, "dsim0");
	dmt_lock_release(fd, dir, "dsim1");

	/* a child holds it; the parent is told the child's pid */
	child = nicfix_lock_child(dir, "dsim1");
	assert_true(child > 0);
	assert_int_equal(dmt_lock_take(dir, "dsim1", &fd, &holder, comm, sizeof(comm)), -EBUSY);
	assert_int_equal(holder, child);
	assert_string_equal(comm, t_own_comm());
	/* it dies: the lock is free again (the kernel drops flocks) */
	nicfix_kill(child);
	assert_int_equal(dmt_lock_take(dir, "dsim1", &fd, &holder, comm, sizeof(comm)), 0);
	dmt_lock_release(fd, dir, "dsim1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_parse_fuzz),
		cmocka_unit_test(test_parse_strict),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_run_dir),
		cmocka_unit_test(test_lock),
	};

	return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
