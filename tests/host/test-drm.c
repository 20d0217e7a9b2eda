// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite, DRM: what devmemtcp_nic_probe() and the devmemtcp program
 * report about DRM nodes and say when a DRM buffer cannot be made, on this
 * machine's kernel (as root, in a network namespace with veth va/vb).  The
 * nodes are files in a directory the test makes (DEVMEMTCP_TEST_DRM_DIR),
 * which the real libdrm refuses as it refuses every file that is not a DRM
 * node.  Real DRM devices (vgem) are the vm suite's (tests/vm/test-drm-*.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "harness.h"

#ifndef TEST_BUILDDIR
#define TEST_BUILDDIR "."
#endif

static struct devmemtcp_ctx *ctx;
static char dir[] = "/tmp/devmemtcp-hostdrm-XXXXXX";

static char *path_in(const char *name)
{
	static char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	FILE *f;

	if (!mkdtemp(dir))
		return -1;
	/* a file, a device that is not DRM, and a name that is no node */
	f = fopen(path_in("card0"), "w");
	if (!f || fclose(f) || symlink("/dev/null", path_in("renderD128")) ||
	    mkdir(path_in("by-path"), 0755))
		return -1;
	setenv("DEVMEMTCP_TEST_DRM_DIR", dir, 1);
	return devmemtcp_ctx_new(&co, &ctx);
}

static int teardown(void **state)
{
	char cmd[128];

	devmemtcp_ctx_free(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* Run the devmemtcp program (stdout and stderr in out); its exit status. */
static int tool(char *out, size_t len, const char *args)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "%s/tools/devmemtcp %s 2>&1", TEST_BUILDDIR, args);
	return t_capture(out, len, cmd);
}

/* The probe lists every card and render node with its driver or why not. */
static void test_probe(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };

	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &p) >= 0);
	assert_int_equal(p.drm_nodes, 2);
	assert_string_equal(p.drm[0].node, path_in("card0"));
	assert_string_equal(p.drm[0].driver, "");
	assert_int_equal(p.drm[0].error, -ENOTTY);
	assert_string_equal(p.drm[1].node, path_in("renderD128"));
	assert_int_equal(p.drm[1].error, -ENOTTY);
	assert_string_equal(p.drm[2].node, "");

	/* without the directory: libdrm and /dev/dri */
	unsetenv("DEVMEMTCP_TEST_DRM_DIR");
	p = (struct devmemtcp_probe){ .sz = sizeof(p) };
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &p) >= 0);
	if (access("/dev/dri", F_OK))
		assert_int_equal(p.drm_nodes, 0);
	else
		assert_true(p.drm_nodes >= 1);
	setenv("DEVMEMTCP_TEST_DRM_DIR", dir, 1);
}

/* A caller built before the DRM fields: nothing past its struct written. */
static void test_probe_old_caller(void **state)
{
	struct {
		struct devmemtcp_probe p;
		unsigned char guard[64];
	} old;
	size_t old_sz = offsetof(struct devmemtcp_probe, drm_nodes);

	memset(&old, 0x5a, sizeof(old));
	old.p.sz = old_sz;
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &old.p) >= 0);
	assert_int_equal(old.p.sz, old_sz);
	assert_string_equal(old.p.ifname, "va");
	for (size_t i = old_sz; i < sizeof(old); i++)
		assert_int_equal(((unsigned char *)&old)[i], 0x5a);
}

static void test_tool_probe(void **state)
{
	char out[8192], want[512];

	assert_true(tool(out, sizeof(out), "probe va") <= 1);
	snprintf(want, sizeof(want),
		 "\nDRM            %s/card0 (not a DRM node), %s/renderD128 (not a DRM node)\n",
		 dir, dir);
	assert_non_null(strstr(out, want));
	assert_true(tool(out, sizeof(out), "probe va --json") <= 1);
	snprintf(want, sizeof(want),
		 "\"drm_nodes\":2,\"drm\":[{\"node\":\"%s/card0\",\"driver\":null,\"error\":\"not a DRM node\"},",
		 dir);
	assert_non_null(strstr(out, want));
}

/* devmemtcp recv|send --provider: the library's message, exit status 1;
 * a provider it does not know: usage, 2. */
static void test_tool_provider(void **state)
{
	char out[8192], args[256], want[512];

	assert_int_equal(tool(out, sizeof(out), "recv -i va -M gpu"), 2);
	assert_string_equal(out, "devmemtcp recv: bad provider 'gpu': use udmabuf (default) or drm[:NODE] (a DRM dumb buffer)\n");

	snprintf(args, sizeof(args), "recv -i va -p 5999 --provider drm:%s", path_in("card0"));
	assert_int_equal(tool(out, sizeof(out), args), 1);
	snprintf(want, sizeof(want),
		 "devmemtcp recv: drm: %s/card0 is not a DRM device node (DRM_IOCTL_VERSION: Inappropriate ioctl for device): name a node of /dev/dri in opts.drm_path\n",
		 dir);
	assert_non_null(strstr(out, want));

	snprintf(args, sizeof(args), "send -i va -c 10.9.9.9 --provider drm:%s", path_in("card9"));
	assert_int_equal(tool(out, sizeof(out), args), 1);
	snprintf(want, sizeof(want),
		 "devmemtcp send: drm: %s/card9 does not exist: load the device's DRM driver ('modprobe vgem' for a virtual one, kernel option CONFIG_DRM_VGEM) or name another node in opts.drm_path\n",
		 dir);
	assert_non_null(strstr(out, want));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_probe_old_caller),
		cmocka_unit_test(test_tool_probe),
		cmocka_unit_test(test_tool_provider),
	};

	T_TRY(host_netns(NULL));
	return cmocka_run_group_tests_name("host-drm", tests, setup, teardown);
}
