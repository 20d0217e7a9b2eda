// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The plugin's environment variables (devmemtcp-nccl(7), ENVIRONMENT) as
 * NCCL sees them, without devmem: each case in a child process that sets
 * the variables, dlopens the plugin and calls init through
 * ncclNetPlugin_v8, then getProperties of device 0.
 *
 *   test-nccl-env PLUGIN
 *
 * A malformed value of every variable fails init with ncclInvalidUsage
 * and a WARN that names the variable and its value; NCCL_DEVMEMTCP_MAX_RECVS
 * is the maxRecvs NCCL is told.  The variables that act on devmem
 * (RX, TX, NQUEUES, LINEAR_SIZE, RECOVER) are tested over the emulated NIC
 * (emu-nccl.sh).  Exit 0 pass, 1 fail.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net_abi.h"

static char warned[4096];

static void logger(enum nccl_log_level level, unsigned long flags,
		   const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(warned);

	(void)flags;
	(void)file;
	(void)line;
	if (level != NCCL_LOG_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(warned + n, sizeof(warned) - n, fmt, ap);
	va_end(ap);
	n = strlen(warned);
	if (n + 1 < sizeof(warned))
		strcpy(warned + n, "\n");
}

static const char *plugin;

/* In a child: set "NAME=VALUE", init; want_ret the result, want_warn a
 * text the WARNs contain (NULL: no WARN), want_max the maxRecvs of device
 * 0 when init succeeds (0: not checked).  0 pass, 1 fail. */
static int one(const char *assign, int want_ret, const char *want_warn,
	       int want_max)
{
	struct nccl_net_v8 *t;
	struct nccl_net_props_v8 p;
	char *env = strdup(assign);
	void *h;
	int ret;

	if (*env)
		putenv(env);
	h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
	t = h ? dlsym(h, "ncclNetPlugin_v8") : NULL;
	if (!t) {
		printf("FAIL %s: %s\n", assign, dlerror());
		return 1;
	}
	ret = t->init(logger);
	if (ret != want_ret) {
		printf("FAIL %s: init returned %d, not %d; WARN: %s\n", assign,
		       ret, want_ret, warned);
		return 1;
	}
	if (want_warn ? !strstr(warned, want_warn) : warned[0] != 0) {
		printf("FAIL %s: WARN \"%s\", expected %s%s\n", assign,
		       warned, want_warn ? "one containing " : "none",
		       want_warn ? want_warn : "");
		return 1;
	}
	if (!ret && want_max) {
		memset(&p, 0, sizeof(p));
		if (t->get_properties(0, &p) || p.max_recvs != want_max) {
			printf("FAIL %s: maxRecvs %d, not %d\n", assign,
			       p.max_recvs, want_max);
			return 1;
		}
	}
	return 0;
}

static int run(const char *assign, int want_ret, const char *want_warn,
	       int want_max)
{
	int st;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(one(assign, want_ret, want_warn, want_max) | fflush(stdout));
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		printf("FAIL %s (child status %d)\n", assign, st);
		return 1;
	}
	printf("ok %s\n", *assign ? assign : "(defaults)");
	return 0;
}

/* A malformed value: init refuses it, the WARN says NAME=VALUE: ... */
/* devmemtcp_nic_open always undoes what a dead process left, whatever its
 * flags: RECOVER=0 cannot be obeyed and must not look obeyed */
static const char *recover_0(const char *name)
{
	return strcmp(name, "NCCL_DEVMEMTCP_RECOVER") ? NULL
	       : "NCCL_DEVMEMTCP_RECOVER=0 changes nothing: devmemtcp_nic_open always undoes what a dead process left";
}

static int bad(const char *assign, const char *why)
{
	char w[512];

	snprintf(w, sizeof(w), "%s: %s", assign, why);
	return run(assign, NCCL_ERR_INVALID_USAGE, w, 0);
}
#define BAD bad

int main(int argc, char **argv)
{
	static const char *bools[] = {
		"NCCL_DEVMEMTCP_ENABLE", "NCCL_DEVMEMTCP_RX",
		"NCCL_DEVMEMTCP_TX", "NCCL_DEVMEMTCP_CUDA_PTR",
		"NCCL_DEVMEMTCP_RECOVER", "NCCL_DEVMEMTCP_UNPACK",
		"NCCL_DEVMEMTCP_THREADS",
	};
	char a[256], big[300];
	int fail = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: test-nccl-env PLUGIN\n");
		return 2;
	}
	plugin = argv[1];
	/* the defaults, and maxRecvs as set */
	fail += run("", NCCL_OK, NULL, 8);
	fail += run("NCCL_DEVMEMTCP_MAX_RECVS=3", NCCL_OK, NULL, 3);
	fail += run("NCCL_DEVMEMTCP_MAX_RECVS=1", NCCL_OK, NULL, 1);
	fail += run("NCCL_DEVMEMTCP_MAX_RECVS=8", NCCL_OK, NULL, 8);
	fail += BAD("NCCL_DEVMEMTCP_MAX_RECVS=0", "expected a number from 1 to 8");
	fail += BAD("NCCL_DEVMEMTCP_MAX_RECVS=9", "expected a number from 1 to 8");
	fail += BAD("NCCL_DEVMEMTCP_MAX_RECVS=-1", "expected a number from 1 to 8");
	fail += BAD("NCCL_DEVMEMTCP_MAX_RECVS=4x", "expected a number from 1 to 8");
	/* 1/0, yes/no, true/false are taken; anything else is refused */
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
		snprintf(a, sizeof(a), "%s=2", bools[i]);
		fail += BAD(a, "use 1 or 0");
		snprintf(a, sizeof(a), "%s=on", bools[i]);
		fail += BAD(a, "use 1 or 0");
		/* (ENABLE and CUDA_PTR set on act beyond init) */
		if (i > 0 && strcmp(bools[i], "NCCL_DEVMEMTCP_CUDA_PTR")) {
			snprintf(a, sizeof(a), "%s=no", bools[i]);
			fail += run(a, NCCL_OK, recover_0(bools[i]), 8);
			snprintf(a, sizeof(a), "%s=TRUE", bools[i]);
			fail += run(a, NCCL_OK, NULL, 8);
		}
	}
	fail += run("NCCL_DEVMEMTCP_RECOVER=0", NCCL_OK,
		    recover_0("NCCL_DEVMEMTCP_RECOVER"), 8);
	fail += BAD("NCCL_DEVMEMTCP_NQUEUES=0", "expected a number from 1 to 64");
	fail += BAD("NCCL_DEVMEMTCP_NQUEUES=65", "expected a number from 1 to 64");
	fail += BAD("NCCL_DEVMEMTCP_NQUEUES=two", "expected a number from 1 to 64");
	fail += run("NCCL_DEVMEMTCP_NQUEUES=64", NCCL_OK, NULL, 8);
	fail += BAD("NCCL_DEVMEMTCP_BUFFER_SIZE=512K",
		    "expected a number from 1048576 to 1099511627776");
	fail += BAD("NCCL_DEVMEMTCP_BUFFER_SIZE=64Q",
		    "expected a number from 1048576 to 1099511627776");
	fail += run("NCCL_DEVMEMTCP_BUFFER_SIZE=1G", NCCL_OK, NULL, 8);
	fail += BAD("NCCL_DEVMEMTCP_LINEAR_SIZE=4095",
		    "expected a number from 4096 to 1073741824");
	fail += BAD("NCCL_DEVMEMTCP_LINEAR_SIZE=2G",
		    "expected a number from 4096 to 1073741824");
	fail += run("NCCL_DEVMEMTCP_LINEAR_SIZE=4K", NCCL_OK, NULL, 8);
	fail += BAD("NCCL_DEVMEMTCP_MEM=gpu", "use auto, host or cuda");
	fail += BAD("NCCL_DEVMEMTCP_FAMILY=AF_UNIX", "use AF_INET or AF_INET6");
	fail += BAD("NCCL_DEVMEMTCP_PORT_RANGE=5000-4000", "use LO-HI");
	fail += BAD("NCCL_DEVMEMTCP_PORT_RANGE=0-10", "use LO-HI");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memcpy(big, "NCCL_DEVMEMTCP_IFNAME=", 22);
	fail += run(big, NCCL_ERR_INVALID_USAGE,
		    "NCCL_DEVMEMTCP_IFNAME is longer than 255 characters", 0);
	fail += run("NCCL_DEVMEMTCP_IFNAME==no-such-if", NCCL_ERR_SYSTEM,
		    "matches NCCL_DEVMEMTCP_IFNAME==no-such-if", 0);
	printf("%s\n", fail ? "FAIL" : "PASS");
	return fail ? 1 : 0;
}
