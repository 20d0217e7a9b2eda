// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The devmemtcp program says the library's fixes its own way (tool_fix(),
 * tools/common.c): the library's messages as its tests assert them become
 * the program's, word for word, and every text the program rewrites is
 * still one the library says (in a C file of lib/), so that a change of
 * the library's wording cannot leave the program printing the old fix.
 */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common.h"

static void rewritten(const char *lib, const char *tool)
{
	char buf[1024];

	if (strcmp(tool_fix(lib, buf, sizeof(buf)), tool))
		fail_msg("tool_fix(\"%s\")\n  is \"%s\"\nwant \"%s\"", lib, buf, tool);
}

static void test_messages(void **state)
{
	(void)state;
	/* bind-rx without header split (tests/unit/test-netlink.c) */
	rewritten("bind-rx on eth1 failed: enable header split on eth1: ethtool -G eth1 tcp-data-split on (or use devmemtcp_nic_open()) (kernel: \"tcp-data-split is disabled\")",
		  "bind-rx on eth1 failed: enable header split on eth1: ethtool -G eth1 tcp-data-split on (or pass --setup) (kernel: \"tcp-data-split is disabled\")");
	/* nic_open behind a foreign rule (tests/unit/test-nic-plan.c) */
	rewritten("flow 0 (tcp4 dst-port 5201): rule 4 on eth0 (tcp4 dst-port 5201 queue 0) matches these packets first and steers them elsewhere: delete it (ethtool -N eth0 delete 4) or pass DEVMEMTCP_NIC_ALLOW_SHADOW",
		  "flow 0 (tcp4 dst-port 5201): rule 4 on eth0 (tcp4 dst-port 5201 queue 0) matches these packets first and steers them elsewhere: delete it (ethtool -N eth0 delete 4)");
	/* nic_open without RSS (tests/unit/test-nic-plan.c) */
	rewritten("cannot set up devmem: eth0 has no RSS indirection table, so other traffic cannot be kept off the devmem queues: pass DEVMEMTCP_NIC_KEEP_RSS if you steer it some other way",
		  "cannot set up devmem: eth0 has no RSS indirection table, so other traffic cannot be kept off the devmem queues: steer it some other way and run devmemtcp recv without --setup");
	/* probe's fixes (lib/nic/probe.c) */
	rewritten("ethtool -G eth0 tcp-data-split on (devmemtcp_nic_open() does it and undoes it)",
		  "ethtool -G eth0 tcp-data-split on (devmemtcp recv --setup does it and undoes it)");
	rewritten("use a NIC with RSS, or steer other traffic away yourself (DEVMEMTCP_NIC_KEEP_RSS)",
		  "use a NIC with RSS, or steer other traffic away yourself and run devmemtcp recv without --setup");
	/* anything else as it is; a short buffer cut, never overrun */
	rewritten("modprobe udmabuf", "modprobe udmabuf");
	char small[8];
	assert_string_equal(tool_fix("(or use devmemtcp_nic_open())", small, sizeof(small)), "(or pas");
}

/* The text nftw() looks for, and whether a C file of lib/ has it. */
static const char *wanted;
static int seen;

static int look_in(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	size_t n = strlen(path);
	FILE *f;
	char *buf;
	long len;

	(void)st;
	(void)ftw;
	if (type != FTW_F || n < 3 || strcmp(path + n - 2, ".c"))
		return 0;
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	seen = strstr(buf, wanted) != NULL;
	free(buf);
	return seen;
}

/* Whether text is in one of the library's C files (lib/ and its folders). */
static int in_library(const char *text)
{
	wanted = text;
	seen = 0;
	assert_int_not_equal(nftw(SRCDIR "/lib", look_in, 16, FTW_PHYS), -1);
	return seen;
}

static void test_library_says_them(void **state)
{
	(void)state;
	for (const struct tool_fix_entry *f = tool_fixes; f->lib; f++)
		if (!in_library(f->lib))
			fail_msg("no file of lib/ says \"%s\" any more: update tool_fixes in tools/common.c", f->lib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_library_says_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
