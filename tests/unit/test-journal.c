// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The NIC layer's files: the formats of IF.base and the owner files (exact
 * text, strict parsing, canonical round trips), atomic files in the run
 * directory, process start times, and the per-interface lock (holder pid
 * and program named on -EBUSY). */
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

static struct dmt_err jerr;	/* messages of the file layer */

static uint32_t *dup32(const uint32_t *v, uint32_t n)
{
	uint32_t *p = malloc(n * sizeof(*p) + 4);

	memcpy(p, v, n * sizeof(*p));
	return p;
}

/* ---- the many-owners formats ---- */

static void sample_base(struct dmt_base *b)
{
	static const uint32_t rss[] = { 0, 1, 2, 3, 4, 5, 6, 7 };

	memset(b, 0, sizeof(*b));
	snprintf(b->ifname, sizeof(b->ifname), "dsim1");
	b->ifindex = 7;
	b->netns = 4026531840ull;
	b->baseline = (struct dmt_shared){ .tds = 1, .hds = 256, .ntuple = 0,
					   .rss_size = 8, .rss = dup32(rss, 8) };
	b->rss_default = true;
	b->applied = (struct dmt_shared){ .tds = 2, .hds = 0, .ntuple = 1,
					  .rss_size = 8, .rss = dup32(rss, 8) };
	for (int i = 0; i < 8; i++)
		b->applied.rss[i] = (uint32_t)i % 6;
}

static const char base_text[] =
	"devmemtcp-base 2\n"
	"ifname dsim1\n"
	"ifindex 7\n"
	"netns 4026531840\n"
	"tds 1\n"
	"hds 256\n"
	"ntuple 0\n"
	"rss 8 0 1 2 3 4 5 6 7\n"
	"rss-default 1\n"
	"applied tds=2 hds=0 ntuple=1\n"
	"applied-rss 8 0 1 2 3 4 5 0 1\n"
	"end\n";

static void sample_owner(struct dmt_owner *o)
{
	static const uint32_t q[] = { 6, 7 }, ct[] = { 6, 7, 6, 7 }, before[] = { 4, 9 };
	struct devmemtcp_flow f;

	memset(o, 0, sizeof(*o));
	o->pid = 4242;
	o->start = 987654;
	o->handle = 3;
	snprintf(o->comm, sizeof(o->comm), "my loader");	/* a blank */
	snprintf(o->ifname, sizeof(o->ifname), "dsim1");
	o->ifindex = 7;
	o->netns = 4026531840ull;
	o->queues = dup32(q, 2);
	o->nqueues = 2;
	o->ctx = DMT_CTX_PLACED;
	o->ctx_id = 2;
	o->ctx_indir = dup32(ct, 4);
	o->ctx_size = 4;
	o->rules = calloc(2, sizeof(*o->rules));
	o->nrules = 2;
	devmemtcp_flow_parse("dst-ip 10.0.0.1 dst-port 5201", &f);
	dmt_flow_to_spec(&f, 0, true, &o->rules[0].fs);
	o->rules[0] = (struct dmt_orule){ .id = 0, .placed = true, .location = 1023,
					  .rss_context = 2, .fs = o->rules[0].fs };
	devmemtcp_flow_parse("tcp6 dst-ip 2001:db8::1 dst-port 5201", &f);
	dmt_flow_to_spec(&f, 7, false, &o->rules[1].fs);
	o->rules[1].id = 5;
	o->rules[1].before = dup32(before, 2);
	o->rules[1].nbefore = 2;
}

static void test_base_format(void **state)
{
	struct dmt_base b, k;
	char *text, *again;
	size_t len, len2;
	int line = -1;

	sample_base(&b);
	assert_int_equal(dmt_base_format(&b, &text, &len), 0);
	assert_string_equal(text, base_text);
	assert_int_equal(len, strlen(base_text));
	assert_int_equal(dmt_base_parse(text, len, &k, &line), 0);
	assert_int_equal(line, 0);
	assert_string_equal(k.ifname, "dsim1");
	assert_int_equal(k.ifindex, 7);
	assert_int_equal(k.netns, 4026531840ull);
	assert_int_equal(k.baseline.tds, 1);
	assert_int_equal(k.baseline.hds, 256);
	assert_int_equal(k.baseline.ntuple, 0);
	assert_int_equal(k.baseline.rss_size, 8);
	assert_memory_equal(k.baseline.rss, b.baseline.rss, 32);
	assert_true(k.rss_default);
	assert_int_equal(k.applied.tds, 2);
	assert_int_equal(k.applied.hds, 0);
	assert_int_equal(k.applied.ntuple, 1);
	assert_memory_equal(k.applied.rss, b.applied.rss, 32);
	assert_false(k.has_applying);
	assert_int_equal(k.theirs, 0);
	free(text);
	dmt_base_free(&k);

	/* unreported settings, a change in flight, an administrator's */
	b.baseline.tds = -1;
	b.baseline.hds = -1;
	b.applied.hds = -1;
	b.has_applying = true;
	b.applying = (struct dmt_shared){ .tds = 0, .hds = -1, .ntuple = 0 };
	b.theirs = DMT_S_TDS | DMT_S_RSS;
	assert_int_equal(dmt_base_format(&b, &text, &len), 0);
	assert_non_null(strstr(text, "\ntds -\nhds -\n"));
	assert_non_null(strstr(text, "\napplied tds=2 hds=- ntuple=1\n"));
	assert_non_null(strstr(text, "\napplying tds=0 hds=- ntuple=0\napplying-rss 0\ntheirs tds rss\nend\n"));
	assert_int_equal(dmt_base_parse(text, len, &k, NULL), 0);
	assert_int_equal(k.baseline.tds, -1);
	assert_int_equal(k.baseline.hds, -1);
	assert_true(k.has_applying);
	assert_int_equal(k.applying.tds, 0);
	assert_int_equal(k.applying.rss_size, 0);
	assert_int_equal(k.theirs, DMT_S_TDS | DMT_S_RSS);
	assert_int_equal(dmt_base_format(&k, &again, &len2), 0);
	assert_string_equal(text, again);
	free(text);
	free(again);
	dmt_base_free(&k);
	dmt_base_free(&b);
}

static void test_owner_format(void **state)
{
	struct dmt_owner o, k;
	char *text, *again, name[64];
	size_t len, len2;

	sample_owner(&o);
	assert_int_equal(dmt_owner_format(&o, &text, &len), 0);
	assert_non_null(strstr(text,
		"devmemtcp-owner 2\npid 4242\nstart 987654\nhandle 3\ncomm my_loader\n"
		"ifname dsim1\nifindex 7\nnetns 4026531840\nstate open\nkeep-rss 0\nqueues 2 6 7\n"
		"context 2 table 4 6 7 6 7\nrule 0 placed 1023 ctx 2 spec 01000020"));
	assert_non_null(strstr(text, "\nrule 5 pending ctx 0 spec 05000000"));
	assert_non_null(strstr(text, " before 2 4 9\nend\n"));
	assert_int_equal(dmt_owner_parse(text, len, &k, NULL), 0);
	assert_int_equal(k.pid, 4242);
	assert_int_equal(k.start, 987654);
	assert_int_equal(k.handle, 3);
	assert_string_equal(k.comm, "my_loader");
	assert_false(k.closed);
	assert_int_equal(k.nqueues, 2);
	assert_int_equal(k.queues[1], 7);
	assert_int_equal(k.ctx, DMT_CTX_PLACED);
	assert_int_equal(k.ctx_id, 2);
	assert_int_equal(k.ctx_size, 4);
	assert_int_equal(k.nrules, 2);
	assert_true(k.rules[0].placed);
	assert_int_equal(k.rules[0].location, 1023);
	assert_int_equal(k.rules[0].rss_context, 2);
	assert_memory_equal(&k.rules[0].fs, &o.rules[0].fs, sizeof(o.rules[0].fs));
	assert_false(k.rules[1].placed);
	assert_int_equal(k.rules[1].id, 5);
	assert_int_equal(k.rules[1].nbefore, 2);
	assert_int_equal(k.rules[1].before[1], 9);
	assert_memory_equal(&k.rules[1].fs, &o.rules[1].fs, sizeof(o.rules[1].fs));
	assert_int_equal(dmt_owner_format(&k, &again, &len2), 0);
	assert_string_equal(text, again);
	free(again);
	dmt_owner_name(&k, name, sizeof(name));
	assert_string_equal(name, "dsim1.owner.4242.987654.3");
	free(text);
	dmt_owner_free(&k);

	/* a pending context, closed, keeping RSS, no rules */
	o.ctx = DMT_CTX_PENDING;
	o.ctx_before = dup32(o.queues, 2);
	o.nctx_before = 2;
	o.closed = true;
	o.keep_rss = true;
	for (uint32_t i = 0; i < o.nrules; i++)
		free(o.rules[i].before);
	o.nrules = 0;
	assert_int_equal(dmt_owner_format(&o, &text, &len), 0);
	assert_non_null(strstr(text, "\nstate closed\nkeep-rss 1\nqueues 2 6 7\n"
				     "context pending before 2 6 7 table 4 6 7 6 7\nend\n"));
	assert_int_equal(dmt_owner_parse(text, len, &k, NULL), 0);
	assert_int_equal(k.ctx, DMT_CTX_PENDING);
	assert_int_equal(k.nctx_before, 2);
	assert_true(k.closed);
	assert_true(k.keep_rss);
	free(text);
	dmt_owner_free(&k);
	dmt_owner_free(&o);
}

/* Replace the first occurrence of from with to in base_text / an owner. */
static char *edit(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	char *out;

	assert_non_null(at);
	out = malloc(strlen(text) - strlen(from) + strlen(to) + 1);
	sprintf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

static void test_base_strict(void **state)
{
	static const struct {
		const char *from, *to;
		int line;
	} bad[] = {
		{ "devmemtcp-base 2\n", "devmemtcp-base 1\n", 1 },
		{ "devmemtcp-base 2\n", "devmemtcp-base 02\n", 1 },
		{ "devmemtcp-base 2\n", "devmemtcp-owner 2\n", 1 },
		{ "ifname dsim1\n", "ifname dsim1/x\n", 2 },
		{ "ifname dsim1\n", "ifname ..\n", 2 },
		{ "ifname dsim1\n", "ifname abcdefghijklmnop\n", 2 },
		{ "ifindex 7\n", "ifindex 0\n", 3 },
		{ "ifindex 7\n", "ifindex 07\n", 3 },
		{ "ifindex 7\n", "ifindex 7 \n", 3 },
		{ "ifindex 7\n", "ifindex  7\n", 3 },
		{ "ifindex 7\n", "ifindex 2147483648\n", 3 },
		{ "netns 4026531840\n", "", 4 },		/* no namespace */
		{ "netns 4026531840\n", "netns 0\n", 4 },
		{ "netns 4026531840\n", "netns 18446744073709551616\n", 4 },
		{ "tds 1\n", "tds 256\n", 5 },
		{ "tds 1\n", "tds -1\n", 5 },
		{ "hds 256\n", "hds 4294967296\n", 6 },
		{ "ntuple 0\n", "ntuple 2\n", 7 },
		{ "ntuple 0\n", "ntuple -\n", 7 },
		{ "rss 8 0 1 2 3 4 5 6 7\n", "rss 9 0 1 2 3 4 5 6 7\n", 8 },
		{ "rss 8 0 1 2 3 4 5 6 7\n", "rss 7 0 1 2 3 4 5 6 7\n", 8 },
		{ "rss 8 0 1 2 3 4 5 6 7\n", "rss 4097\n", 8 },
		{ "rss-default 1\n", "rss-default yes\n", 9 },
		{ "applied tds=2 hds=0 ntuple=1\n", "applied hds=0 tds=2 ntuple=1\n", 10 },
		{ "applied tds=2 hds=0 ntuple=1\n", "applied tds=2 hds=0 ntuple=-\n", 10 },
		{ "applied tds=2 hds=0 ntuple=1\n", "applied tds=2 hds=0 ntuple=1 x=1\n", 10 },
		{ "applied-rss 8", "applied-rss 9", 11 },
		{ "end\n", "theirs\nend\n", 12 },
		{ "end\n", "theirs rss tds\nend\n", 12 },
		{ "end\n", "theirs tds tds\nend\n", 12 },
		{ "end\n", "applying tds=2 hds=0 ntuple=1\nend\n", 13 },	/* no applying-rss */
		{ "end\n", "bogus 1\nend\n", 12 },
		{ "end\n", "end\nend\n", 13 },
		{ "end\n", "end\nx", 13 },
		{ "end\n", "end", 12 },			/* torn: no newline */
		{ "end\n", "", 12 },
		{ "ntuple 0\n", "ntuple 0\r\n", 7 },
		{ "ntuple 0\n", "ntuple\t0\n", 7 },
		{ "tds 1\n", "hds 256\n", 5 },		/* order */
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *t = edit(base_text, bad[i].from, bad[i].to);
		struct dmt_base b;
		int line = -1;

		assert_int_equal(dmt_base_parse(t, strlen(t), &b, &line), -EBADMSG);
		if (line != bad[i].line)
			fail_msg("case %zu (%s): line %d, not %d", i, bad[i].to, line, bad[i].line);
		assert_null(b.baseline.rss);
		assert_null(b.applied.rss);
		free(t);
	}
	/* a NUL inside a line */
	{
		char t[sizeof(base_text)];
		struct dmt_base b;

		memcpy(t, base_text, sizeof(t));
		t[20] = '\0';
		assert_int_equal(dmt_base_parse(t, sizeof(t) - 1, &b, NULL), -EBADMSG);
	}
}

static void test_owner_strict(void **state)
{
	static const struct {
		const char *from, *to;
	} bad[] = {
		{ "pid 4242\n", "pid 0\n" },
		{ "pid 4242\n", "pid 4194305\n" },
		{ "pid 4242\n", "pid 99999999999999999999\n" },
		{ "pid 4242\n", "pid -3\n" },
		{ "pid 4242\n", "" },
		{ "pid 4242\n", "pid 4242 x\n" },
		{ "start 987654\n", "start 987654x\n" },
		{ "handle 3\n", "handle 0\n" },
		{ "comm my_loader\n", "comm my loader\n" },
		{ "comm my_loader\n", "comm \n" },
		{ "comm my_loader\n", "comm aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" },
		{ "state open\n", "state dead\n" },
		{ "keep-rss 0\n", "keep-rss 2\n" },
		{ "queues 2 6 7\n", "queues 2 6 6\n" },
		{ "queues 2 6 7\n", "queues 3 6 7\n" },
		{ "context 2 table", "context 0 table" },
		{ "context 2 table", "context 2 tab" },
		{ "context 2 table 4 6 7 6 7\n", "context 2 table 4 6 7 6 7\ncontext 2 table 4 6 7 6 7\n" },
		{ "rule 0 placed 1023 ctx 2 spec 0", "rule 0 placed 1023 ctx 2 spec 0a" },
		{ "rule 0 placed 1023 ctx 2 spec 01", "rule 0 placed 1023 ctx 2 spec 0A" },
		{ "rule 0 placed", "rule 0 maybe" },
		{ "rule 0 placed 1023 ctx 2", "rule 0 placed 1023 context 2" },
		{ " before 2 4 9\n", "\n" },
		{ " before 2 4 9\n", " before 2 4 4\n" },
		{ "end\n", "queues 0\nend\n" },
	};
	struct dmt_owner o;
	char *text;
	size_t len;

	sample_owner(&o);
	assert_int_equal(dmt_owner_format(&o, &text, &len), 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *t = edit(text, bad[i].from, bad[i].to);
		struct dmt_owner k;

		if (dmt_owner_parse(t, strlen(t), &k, NULL) != -EBADMSG)
			fail_msg("case %zu (%s) accepted", i, bad[i].to);
		assert_null(k.queues);
		assert_null(k.rules);
		free(t);
	}
	free(text);
	dmt_owner_free(&o);
}

/*
 * Every accepted text is canonical: mutated, torn and spliced texts either
 * fail or format back to exactly themselves (the fuzz harness's property,
 * here on a fixed seed), and never leak or crash (ASan in the dev build).
 */
static void test_formats_canonical(void **state)
{
	struct dmt_base b;
	struct dmt_owner o;
	char *texts[2], *m, *again;
	size_t lens[2], len2;
	unsigned int seed = 4242;
	int ok = 0;

	sample_base(&b);
	sample_owner(&o);
	assert_int_equal(dmt_base_format(&b, &texts[0], &lens[0]), 0);
	assert_int_equal(dmt_owner_format(&o, &texts[1], &lens[1]), 0);
	m = malloc(lens[1] + 64);
	for (int round = 0; round < 40000; round++) {
		int which = round & 1;
		size_t n = lens[which];
		int r;

		memcpy(m, texts[which], n);
		for (int e = 0; e < 1 + round % 3 && n > 0; e++) {
			size_t at = (size_t)rand_r(&seed) % n;

			switch (rand_r(&seed) % 5) {
			case 0: m[at] = (char)rand_r(&seed); break;
			case 1: m[at] = "0123456789 \n-=x"[rand_r(&seed) % 15]; break;
			case 2: n = at; break;
			case 3: memmove(m + at + 1, m + at, n - at); m[at] = '0'; n++; break;
			case 4: memmove(m + at, m + at + 1, n - at - 1); n--; break;
			}
		}
		if (which == 0) {
			struct dmt_base k;

			r = dmt_base_parse(m, n, &k, NULL);
			if (r == 0) {
				assert_int_equal(dmt_base_format(&k, &again, &len2), 0);
				dmt_base_free(&k);
			}
		} else {
			struct dmt_owner k;

			r = dmt_owner_parse(m, n, &k, NULL);
			if (r == 0) {
				assert_int_equal(dmt_owner_format(&k, &again, &len2), 0);
				dmt_owner_free(&k);
			}
		}
		if (r != 0) {
			assert_int_equal(r, -EBADMSG);
			continue;
		}
		ok++;
		assert_int_equal(len2, n);
		assert_memory_equal(again, m, n);
		free(again);
	}
	assert_true(ok > 100);	/* digits changed in values stay valid */
	free(m);
	free(texts[0]);
	free(texts[1]);
	dmt_base_free(&b);
	dmt_owner_free(&o);
}

static void test_formats_enomem(void **state)
{
	struct dmt_owner o, k;
	char *text, *t2;
	size_t len, l2;
	int n, r;

	sample_owner(&o);
	assert_int_equal(dmt_owner_format(&o, &text, &len), 0);
	for (n = 1; n < 50; n++) {
		dmt_test_alloc_fail(n, false);
		r = dmt_owner_parse(text, len, &k, NULL);
		dmt_test_alloc_fail(0, false);
		if (r == 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_null(k.rules);
	}
	assert_int_equal(r, 0);
	dmt_owner_free(&k);
	dmt_test_alloc_fail(1, false);
	assert_int_equal(dmt_owner_format(&o, &t2, &l2), -ENOMEM);
	assert_null(t2);
	dmt_test_alloc_fail(0, false);
	free(text);
	dmt_owner_free(&o);
}

static char dir[64];

static int setup_dir(void **state)
{
	dmt_test_lock_wait_ms = 50;	/* -EBUSY at once, not after 10 s */
	return nicfix_mkdir(dir, sizeof(dir), "dmt-journal");
}

static int remove_dir(void **state)
{
	return nicfix_rmdir(dir);
}

static void test_files(void **state)
{
	struct dmt_rundir *rd = nicfix_rd(dir);
	char *text, **names, path[128];
	struct stat st;
	size_t len, n;

	assert_int_equal(dmt_file_read(rd, "dsim0.base", &text, &len, &jerr), -ENOENT);
	assert_null(text);
	assert_int_equal(dmt_file_write(rd, "dsim0.base", "one\n", 4, &jerr), 0);
	snprintf(path, sizeof(path), "%s/dsim0.base", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(dmt_file_read(rd, "dsim0.base", &text, &len, &jerr), 0);
	assert_int_equal(len, 4);
	assert_string_equal(text, "one\n");
	free(text);
	/* replaced, not appended; no temporary left */
	assert_int_equal(dmt_file_write(rd, "dsim0.base", "two\n", 4, &jerr), 0);
	assert_int_equal(dmt_file_read(rd, "dsim0.base", &text, &len, &jerr), 0);
	assert_string_equal(text, "two\n");
	free(text);
	assert_int_equal(dmt_file_write(rd, "dsim0.owner.1.2.3", "x", 1, &jerr), 0);
	assert_int_equal(dmt_file_write(rd, "dsim0.owner.1.2.1", "x", 1, &jerr), 0);
	assert_int_equal(dmt_file_write(rd, "dsim00.owner.1.2.1", "x", 1, &jerr), 0);
	assert_int_equal(dmt_rundir_list(rd, "dsim0.owner.", &names, &n, &jerr), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "dsim0.owner.1.2.1");
	assert_string_equal(names[1], "dsim0.owner.1.2.3");
	free(names[0]);
	free(names[1]);
	free(names);
	assert_int_equal(dmt_rundir_list(rd, "dsim0.", &names, &n, &jerr), 0);
	assert_int_equal(n, 3);		/* no ".dsim0.base.XXXX" temporaries */
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	assert_int_equal(dmt_file_remove(rd, "dsim0.base"), 0);
	assert_int_equal(dmt_file_remove(rd, "dsim0.base"), 0);
	assert_int_equal(dmt_file_read(rd, "dsim0.base", &text, &len, &jerr), -ENOENT);
	dmt_file_remove(rd, "dsim0.owner.1.2.3");
	dmt_file_remove(rd, "dsim0.owner.1.2.1");
	dmt_file_remove(rd, "dsim00.owner.1.2.1");
	/* a directory that cannot be created: its parent is missing */
	{
		struct dmt_rundir nope;

		assert_int_equal(dmt_rundir_open(&nope, "/proc/nope/dir", true, &jerr), -ENOENT);
		assert_string_equal(jerr.msg,
				    "cannot open the run directory /proc/nope/dir (the run_dir option): it or a parent is missing "
				    "(only the last component is created: create its parent, or pass another run_dir)");
	}
}

/* /proc/PID/stat: the start time of a process, a zombie told apart. */
static void test_proc_start(void **state)
{
	uint64_t a, b;
	bool z;
	pid_t child;
	int p[2];
	char c;

	assert_int_equal(dmt_proc_start(getpid(), &a, &z), 0);
	assert_false(z);
	assert_int_equal(dmt_proc_start(getpid(), &b, &z), 0);
	assert_int_equal(a, b);
	assert_int_equal(pipe(p), 0);
	child = fork();
	if (child == 0) {
		(void)!read(p[0], &c, 1);
		_exit(0);
	}
	assert_int_equal(dmt_proc_start(child, &b, &z), 0);
	assert_false(z);
	assert_true(b >= a);
	(void)!write(p[1], "x", 1);
	/* exited, not reaped: a zombie */
	for (int i = 0; i < 1000 && !z; i++) {
		usleep(1000);
		assert_int_equal(dmt_proc_start(child, &b, &z), 0);
	}
	assert_true(z);
	waitpid(child, NULL, 0);
	assert_int_equal(dmt_proc_start(child, &b, &z), -ENOENT);
	close(p[0]);
	close(p[1]);
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

	assert_int_equal(dmt_lock_take(nicfix_rd(dir), "dsim1", &fd, &holder, comm, sizeof(comm), &jerr), 0);
	assert_true(fd >= 0);
	/* a second open file description in this process conflicts too */
	assert_int_equal(dmt_lock_take(nicfix_rd(dir), "dsim1", &fd2, &holder, comm, sizeof(comm), &jerr), -EBUSY);
	assert_int_equal(fd2, -1);
	assert_int_equal(holder, getpid());
	assert_string_equal(comm, t_own_comm());
	/* another interface is independent */
	assert_int_equal(dmt_lock_take(nicfix_rd(dir), "dsim0", &fd2, &holder, comm, sizeof(comm), &jerr), 0);
	dmt_lock_release(fd2);
	dmt_lock_release(fd);

	/* a child holds it; the parent is told the child's pid */
	child = nicfix_lock_child(dir, "dsim1");
	assert_true(child > 0);
	assert_int_equal(dmt_lock_take(nicfix_rd(dir), "dsim1", &fd, &holder, comm, sizeof(comm), &jerr), -EBUSY);
	assert_int_equal(holder, child);
	assert_string_equal(comm, t_own_comm());
	/* it dies: the lock is free again (the kernel drops flocks) */
	nicfix_kill(child);
	assert_int_equal(dmt_lock_take(nicfix_rd(dir), "dsim1", &fd, &holder, comm, sizeof(comm), &jerr), 0);
	dmt_lock_release(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_format),
		cmocka_unit_test(test_owner_format),
		cmocka_unit_test(test_base_strict),
		cmocka_unit_test(test_owner_strict),
		cmocka_unit_test(test_formats_canonical),
		cmocka_unit_test(test_formats_enomem),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_proc_start),
		cmocka_unit_test(test_run_dir),
		cmocka_unit_test(test_lock),
	};

	return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
