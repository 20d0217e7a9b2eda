// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The DRM provider without a DRM device: node discovery and every error.
 * Nodes are files in a temporary directory (DEVMEMTCP_TEST_DRM_DIR).  Files
 * that are not DRM nodes go through the real libdrm, which refuses them as
 * it refuses any non-DRM file; drivers (their names, dumb buffers, PRIME
 * export, render and primary nodes) are played by a fake behind the
 * provider's ops table, keyed by the file a descriptor has open.  The
 * permission case runs in a child as an unprivileged user, since root
 * opens any file.  tests/vm/test-drm-*.c run the real thing on vgem.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "ctxfixture.h"
#include "drm-provider.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;
static char dir[] = "/tmp/devmemtcp-drm-XXXXXX";

/* ---- a fake driver ------------------------------------------------------ */

enum export_kind {
	EXPORT_MEMFD,		/* a mappable fd of the object's size */
	EXPORT_READONLY,	/* a file the CPU cannot map writable */
	EXPORT_PIPE,		/* no size */
};

struct fake_node {
	const char *name;	/* file in dir */
	const char *driver;
	int dumb_err;		/* create_dumb fails with it */
	bool render;
	const char *primary;	/* of its device; NULL: not found */
	int export_err;
	enum export_kind export_kind;
};

#define MAX_HANDLES 16

static struct {
	struct fake_node nodes[8];
	int nnodes;
	const char *devices[4];	/* libdrm's list: names in dir */
	int ndevices;
	uint64_t handle_size[MAX_HANDLES];	/* 0: no such handle */
	const char *handle_node[MAX_HANDLES];
	int live;		/* handles created and not destroyed */
	const char *last_node;	/* where the last dumb buffer was made */
	uint64_t last_size;
} fake;

static const struct fake_node *fake_of(int fd)
{
	char link[64], path[512];
	ssize_t n;
	const char *base;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return NULL;
	path[n] = '\0';
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	for (int i = 0; i < fake.nnodes; i++)
		if (!strcmp(fake.nodes[i].name, base))
			return &fake.nodes[i];
	return NULL;
}

static int fake_devices(char (*out)[DMT_DRM_PATH_MAX], int max)
{
	int k;

	for (k = 0; k < fake.ndevices && k < max; k++)
		snprintf(out[k], DMT_DRM_PATH_MAX, "%s/%s", dir, fake.devices[k]);
	return k;
}

static int fake_driver(int fd, char *name, size_t len)
{
	const struct fake_node *n = fake_of(fd);

	if (!n)
		return -ENOTTY;
	snprintf(name, len, "%s", n->driver);
	return 0;
}

static bool fake_is_render(int fd)
{
	const struct fake_node *n = fake_of(fd);

	return n && n->render;
}

static int fake_primary(int fd, char *path, size_t len)
{
	const struct fake_node *n = fake_of(fd);

	if (!n || !n->primary)
		return -ENOENT;
	snprintf(path, len, "%s/%s", dir, n->primary);
	return 0;
}

static int fake_create_dumb(int fd, uint64_t size, uint32_t *handle)
{
	const struct fake_node *n = fake_of(fd);

	assert_non_null(n);
	assert_int_equal(size % 4096, 0);
	if (n->dumb_err)
		return n->dumb_err;
	for (uint32_t h = 1; h < MAX_HANDLES; h++) {
		if (fake.handle_size[h])
			continue;
		fake.handle_size[h] = size;
		fake.handle_node[h] = n->name;
		fake.live++;
		fake.last_node = n->name;
		fake.last_size = size;
		*handle = h;
		return 0;
	}
	return -ENOMEM;
}

static void fake_destroy_dumb(int fd, uint32_t handle)
{
	assert_true(handle < MAX_HANDLES && fake.handle_size[handle]);
	fake.handle_size[handle] = 0;
	fake.live--;
}

static int fake_export(int fd, uint32_t handle, int *prime_fd)
{
	const struct fake_node *n = fake_of(fd);
	char path[512];
	int pfd, p[2];

	assert_non_null(n);
	if (n->export_err)
		return n->export_err;
	if (handle >= MAX_HANDLES || !fake.handle_size[handle])
		return -ENOENT;
	switch (n->export_kind) {
	case EXPORT_MEMFD:
		pfd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
		assert_true(pfd >= 0);
		assert_int_equal(ftruncate(pfd, (off_t)fake.handle_size[handle]), 0);
		break;
	case EXPORT_READONLY:
		snprintf(path, sizeof(path), "%s/%s", dir, n->name);
		assert_int_equal(truncate(path, 4096), 0);
		pfd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(pfd >= 0);
		break;
	default:
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		close(p[1]);
		pfd = p[0];
		break;
	}
	*prime_fd = pfd;
	return 0;
}

static const struct dmt_drm_ops fake_ops = {
	.devices = fake_devices,
	.driver = fake_driver,
	.is_render = fake_is_render,
	.primary = fake_primary,
	.create_dumb = fake_create_dumb,
	.destroy_dumb = fake_destroy_dumb,
	.export = fake_export,
};

/* A node file in dir (mode 0600 unless given) played by the fake. */
static void add_node(const struct fake_node *n)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, n->name);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	if (n->driver) {
		assert_true(fake.nnodes < 8);
		fake.nodes[fake.nnodes++] = *n;
	}
}

/* A file named name in dir that no driver plays: not a DRM node. */
static void add_file(const char *name, mode_t mode)
{
	struct fake_node n = { .name = name };
	char path[512];

	add_node(&n);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(chmod(path, mode), 0);
}

static void empty_dir(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -f %s/*", dir);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	if (!mkdtemp(dir) || chmod(dir, 0755))
		return -1;
	return ctxfix_ctx_silent(&ctx);
}

static int teardown(void **state)
{
	empty_dir();
	rmdir(dir);
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* Each test: an empty node directory, the real libdrm. */
static int test_setup(void **state)
{
	empty_dir();
	memset(&fake, 0, sizeof(fake));
	dmt_drm_ops_override = NULL;
	setenv("DEVMEMTCP_TEST_DRM_DIR", dir, 1);
	*state = (void *)(intptr_t)t_count_fds();
	return 0;
}

static int test_teardown(void **state)
{
	unsetenv("DEVMEMTCP_TEST_DRM_DIR");
	dmt_drm_ops_override = NULL;
	/* no node, dma-buf or pipe left open, no GEM handle left */
	assert_int_equal(t_count_fds(), (int)(intptr_t)*state);
	assert_int_equal(fake.live, 0);
	return 0;
}

static int drm_new(const char *path, uint64_t size, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_DRM,
		       .size = size, .drm_path = path);

	*buf = (void *)1;
	return devmemtcp_buf_new(ctx, &o, buf);
}

static char *node_path(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* ctx's message equals fmt with dir in place of every "@" (one at most). */
static void assert_msg(const char *fmt)
{
	char want[1024];
	const char *at = strchr(fmt, '@');

	if (at)
		snprintf(want, sizeof(want), "%.*s%s%s", (int)(at - fmt), fmt, dir, at + 1);
	else
		snprintf(want, sizeof(want), "%s", fmt);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
}

/* ---- discovery and errors through the real libdrm ------------------------ */

#if HAVE_LIBDRM
static void test_no_device(void **state)
{
	struct devmemtcp_buf *buf;

	assert_int_equal(drm_new(NULL, 4096, &buf), -ENOENT);
	assert_null(buf);
	assert_msg("drm: no DRM device in @: load a DRM driver, e.g. 'modprobe vgem' (kernel option CONFIG_DRM_VGEM), or name the node in opts.drm_path");
	/* render nodes are not candidates: the kernel makes no dumb buffers there */
	add_file("renderD128", 0600);
	add_file("card", 0600);
	add_file("cardX", 0600);
	add_file("card01", 0600);
	assert_int_equal(drm_new(NULL, 4096, &buf), -ENOENT);
}

/* Without the test directory, libdrm and /dev/dri decide: on a machine
 * without DRM the message names /dev/dri. */
static void test_no_device_system(void **state)
{
	struct devmemtcp_buf *buf;

	unsetenv("DEVMEMTCP_TEST_DRM_DIR");
	if (access("/dev/dri", F_OK) == 0) {
		print_message("this machine has /dev/dri: its DRM devices are tested in the vm suite\n");
		return;
	}
	assert_int_equal(drm_new(NULL, 4096, &buf), -ENOENT);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "drm: no DRM device in /dev/dri: load a DRM driver, e.g. 'modprobe vgem' (kernel option CONFIG_DRM_VGEM), or name the node in opts.drm_path");
}

static void test_path_missing(void **state)
{
	struct devmemtcp_buf *buf;

	assert_int_equal(drm_new(node_path("card7"), 4096, &buf), -ENOENT);
	assert_msg("drm: @/card7 does not exist: load the device's DRM driver ('modprobe vgem' for a virtual one, kernel option CONFIG_DRM_VGEM) or name another node in opts.drm_path");
}

/* libdrm on a file that is not a DRM node: DRM_IOCTL_VERSION fails. */
static void test_not_drm(void **state)
{
	struct devmemtcp_buf *buf;

	add_file("card0", 0600);
	/* ERRORS devmemtcp_buf_new ENODEV */
	assert_int_equal(drm_new(NULL, 4096, &buf), -ENODEV);
	assert_msg("drm: @/card0 is not a DRM device node (DRM_IOCTL_VERSION: Inappropriate ioctl for device): name a node of /dev/dri in opts.drm_path");
	assert_int_equal(drm_new("/dev/null", 4096, &buf), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "drm: /dev/null is not a DRM device node (DRM_IOCTL_VERSION: Inappropriate ioctl for device): name a node of /dev/dri in opts.drm_path");
}

struct child_result {
	int ret;
	char msg[1024];
};

/* devmemtcp_buf_new as an unprivileged user (root would open anything). */
static void drm_new_unprivileged(const char *path, struct child_result *r)
{
	int p[2], status;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct devmemtcp_buf *buf;
		struct child_result cr = { 0 };

		close(p[0]);
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
			_exit(2);
		cr.ret = drm_new(path, 4096, &buf);
		snprintf(cr.msg, sizeof(cr.msg), "%s", devmemtcp_ctx_errmsg(ctx));
		_exit(write(p[1], &cr, sizeof(cr)) == sizeof(cr) ? 0 : 3);
	}
	close(p[1]);
	assert_int_equal(read(p[0], r, sizeof(*r)), sizeof(*r));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_permission(void **state)
{
	struct child_result r;
	char want[1024];

	add_file("card0", 0);	/* only root may open it: the child is not root */
	snprintf(want, sizeof(want),
		 "drm: no permission to open %s/card0: run as root or give your user access to it (its group, often 'video' or 'render', or a udev rule)",
		 dir);
	drm_new_unprivileged(NULL, &r);
	/* ERRORS devmemtcp_buf_new EACCES */
	assert_int_equal(r.ret, -EACCES);
	assert_string_equal(r.msg, want);
	drm_new_unprivileged(node_path("card0"), &r);
	assert_int_equal(r.ret, -EACCES);
	assert_string_equal(r.msg, want);
}
#else
static void test_without_libdrm(void **state)
{
	struct devmemtcp_buf *buf;

	assert_int_equal(drm_new(NULL, 4096, &buf), -EOPNOTSUPP);
	ctxfix_expect_errmsg(ctx,
			     "drm: libdevmemtcp %s was built without libdrm: install libdrm-dev and rebuild",
			     devmemtcp_version());
}
#endif

/* ---- drivers, through the fake ---------------------------------------- */

static void fake_on(void)
{
	dmt_drm_ops_override = &fake_ops;
}

/* A buffer made on the fake: its size, provider, CPU-address segment. */
static void check_buf(struct devmemtcp_buf *buf, uint64_t size)
{
	const struct devmemtcp_segment *segs;
	uint64_t addr;

	assert_int_equal(devmemtcp_buf_provider(buf), DEVMEMTCP_PROVIDER_DRM);
	assert_int_equal(devmemtcp_buf_size(buf), size);
	assert_true(devmemtcp_buf_fd(buf) >= 0);
	assert_int_equal(devmemtcp_buf_segments(buf, &segs), 1);
	assert_int_equal(segs[0].offset, 0);
	assert_int_equal(segs[0].len, size);
	assert_int_equal(devmemtcp_buf_addr(buf, size - 1, &addr), 0);
	assert_int_equal(addr, (uint64_t)(uintptr_t)buf->cpu_map + size - 1);
	/* the mapping is the dma-buf's: a byte written there is in the fd */
	((volatile char *)buf->cpu_map)[size - 1] = 'x';
	char c = 0;
	assert_int_equal(pread(devmemtcp_buf_fd(buf), &c, 1, (off_t)size - 1), 1);
	assert_int_equal(c, 'x');
}

static void test_alloc(void **state)
{
	struct fake_node vgem = { "card0", "vgem" };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&vgem);
	assert_int_equal(drm_new(NULL, 5000, &buf), 0);
	assert_string_equal(fake.last_node, "card0");
	assert_int_equal(fake.last_size, 8192);		/* rounded up to pages */
	check_buf(buf, 8192);
	assert_int_equal(fake.live, 0);	/* the dma-buf holds the object */
	devmemtcp_buf_free(buf);
	assert_int_equal(drm_new(node_path("card0"), 4096, &buf), 0);
	check_buf(buf, 4096);
	devmemtcp_buf_free(buf);
}

/* CPU access to a host-mapped buffer checks its range and memory before
 * touching the dma-buf. */
static void test_cpu_access_checks(void **state)
{
	struct fake_node vgem = { "card0", "vgem" };
	struct devmemtcp_buf *buf;
	char x[200] = { 0 };

	fake_on();
	add_node(&vgem);
	assert_int_equal(drm_new(NULL, 4096, &buf), 0);
	/* ERRORS devmemtcp_buf_read ERANGE */
	assert_int_equal(devmemtcp_buf_read(buf, 4000, x, sizeof(x)), -ERANGE);
	assert_string_equal(devmemtcp_buf_errmsg(buf),
			    "devmemtcp_buf_read: bytes [4000, +200) are outside the 4096-byte buffer");
	/* ERRORS devmemtcp_buf_write ERANGE */
	assert_int_equal(devmemtcp_buf_write(buf, 4097, x, 0), -ERANGE);
	assert_string_equal(devmemtcp_buf_errmsg(buf),
			    "devmemtcp_buf_write: bytes [4097, +0) are outside the 4096-byte buffer");
	/* ERRORS devmemtcp_buf_read EINVAL */
	assert_int_equal(devmemtcp_buf_read(buf, 0, NULL, 1), -EINVAL);
	assert_string_equal(devmemtcp_buf_errmsg(buf),
			    "devmemtcp_buf_read: NULL memory for 1 bytes");
	devmemtcp_buf_free(buf);
}

/* libdrm's devices first, in its order, then the card nodes it did not
 * report, by number; the first that allocates wins. */
static void test_discovery_order(void **state)
{
	struct fake_node nodumb = { "card2", "nodumb", .dumb_err = -ENOSYS };
	struct fake_node vgem = { "card10", "vgem" };
	struct fake_node vgem9 = { "card9", "vgem" };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&nodumb);
	add_node(&vgem);
	add_node(&vgem9);
	fake.devices[fake.ndevices++] = "card10";
	assert_int_equal(drm_new(NULL, 4096, &buf), 0);
	assert_string_equal(fake.last_node, "card10");	/* libdrm's */
	devmemtcp_buf_free(buf);
	fake.ndevices = 0;
	assert_int_equal(drm_new(NULL, 4096, &buf), 0);
	assert_string_equal(fake.last_node, "card9");	/* card2 cannot */
	devmemtcp_buf_free(buf);
}

/* No node can: the first one's error. */
static void test_discovery_first_error(void **state)
{
	struct fake_node nodumb = { "card1", "nodumb", .dumb_err = -EOPNOTSUPP };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&nodumb);
	add_file("card3", 0600);	/* not a DRM node */
	assert_int_equal(drm_new(NULL, 4096, &buf), -EOPNOTSUPP);
	assert_msg("drm: the nodumb driver of @/card1 cannot allocate buffers (it has no dumb buffers): allocate with its own API and pass the GEM handle in opts.drm_fd and opts.drm_handle, or use vgem ('modprobe vgem')");
	fake.devices[fake.ndevices++] = "card3";
	assert_int_equal(drm_new(NULL, 4096, &buf), -ENODEV);
	assert_msg("drm: @/card3 is not a DRM device node (DRM_IOCTL_VERSION: Inappropriate ioctl for device): name a node of /dev/dri in opts.drm_path");
}

static void test_no_dumb(void **state)
{
	struct fake_node nosys = { "card0", "accel", .dumb_err = -ENOSYS };
	struct fake_node notty = { "card1", "other", .dumb_err = -ENOTTY };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&nosys);
	add_node(&notty);
	/* ERRORS devmemtcp_buf_new EOPNOTSUPP */
	assert_int_equal(drm_new(node_path("card0"), 4096, &buf), -EOPNOTSUPP);
	assert_msg("drm: the accel driver of @/card0 cannot allocate buffers (it has no dumb buffers): allocate with its own API and pass the GEM handle in opts.drm_fd and opts.drm_handle, or use vgem ('modprobe vgem')");
	assert_int_equal(drm_new(node_path("card1"), 4096, &buf), -EOPNOTSUPP);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "the other driver of"));
}

static void test_create_fails(void **state)
{
	struct fake_node full = { "card0", "vgem", .dumb_err = -ENOMEM };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&full);
	assert_int_equal(drm_new(NULL, 1 << 20, &buf), -ENOMEM);
	assert_msg("drm: DRM_IOCTL_MODE_CREATE_DUMB of 1048576 bytes on @/card0 (vgem) failed: Cannot allocate memory");
}

/* A render node names its device: the buffer is made on the primary node. */
static void test_render_node(void **state)
{
	struct fake_node card = { "card0", "vgem" };
	struct fake_node render = { "renderD128", "vgem", .dumb_err = -EACCES,
				    .render = true, .primary = "card0" };
	struct fake_node lonely = { "renderD129", "solo", .dumb_err = -EACCES,
				    .render = true };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&card);
	add_node(&render);
	add_node(&lonely);
	assert_int_equal(drm_new(node_path("renderD128"), 4096, &buf), 0);
	assert_string_equal(fake.last_node, "card0");
	devmemtcp_buf_free(buf);
	assert_int_equal(drm_new(node_path("renderD129"), 4096, &buf), -EOPNOTSUPP);
	assert_msg("drm: @/renderD129 is a render node, where the kernel allows no dumb buffers, and the primary node of its device (solo) was not found: name the device's card node in opts.drm_path");
}

static void test_export_fails(void **state)
{
	struct fake_node bad = { "card0", "vgem", .export_err = -EMFILE };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&bad);
	assert_int_equal(drm_new(NULL, 4096, &buf), -EMFILE);
	assert_msg("drm: PRIME export of GEM handle 1 on @/card0 (vgem) failed: Too many open files");
	/* test_teardown: the handle was destroyed, the node closed */
}

static void test_map_fails(void **state)
{
	struct fake_node ro = { "card0", "gpu", .export_kind = EXPORT_READONLY };
	struct fake_node pipe = { "card1", "gpu", .export_kind = EXPORT_PIPE };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&ro);
	add_node(&pipe);
	assert_int_equal(drm_new(node_path("card0"), 4096, &buf), -EACCES);
	assert_msg("drm: mmap of the dma-buf failed: Permission denied: the DRM provider uses the CPU mapping as the device address (drivers without a GPU address space, such as vgem); pass GPU memory as a PRIME fd with its device addresses through DEVMEMTCP_PROVIDER_IMPORT");
	assert_int_equal(drm_new(node_path("card1"), 4096, &buf), -ESPIPE);
	assert_msg("drm: the gpu dma-buf has no size (lseek: Illegal seek)");
}

static void test_bad_opts(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_DRM,
		       .size = 4096, .flags = DEVMEMTCP_BUF_HUGETLB);
	struct fake_node vgem = { "card0", "vgem" };
	struct devmemtcp_buf *buf;
	char want[512];

	fake_on();
	add_node(&vgem);
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_msg("drm: flags 0x1 do not apply to DRM buffers: leave opts.flags 0");
	assert_int_equal(drm_new(NULL, 0, &buf), -EINVAL);
	assert_msg("drm: opts.size is 0: give the buffer size in bytes, or a GEM handle to export in opts.drm_fd and opts.drm_handle (a PRIME fd goes through DEVMEMTCP_PROVIDER_IMPORT)");
	/* the kernel computes a dumb buffer's size in 32 bits */
	assert_int_equal(drm_new(NULL, 0xfffff000ull, &buf), 0);
	assert_int_equal(devmemtcp_buf_size(buf), 0xfffff000ull);
	devmemtcp_buf_free(buf);
	snprintf(want, sizeof(want),
		 "drm: 4294963201 bytes exceed the %llu-byte limit of dumb buffers (the kernel computes their size in 32 bits): use several buffers, or allocate with the driver's own API and pass the GEM handle in opts.drm_fd and opts.drm_handle",
		 0xfffff000ull & ~((unsigned long long)sysconf(_SC_PAGESIZE) - 1));
	assert_int_equal(drm_new(NULL, 0xfffff001ull, &buf), -E2BIG);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	assert_int_equal(drm_new(NULL, UINT64_MAX, &buf), -E2BIG);
}

/* A caller built against 0.1.0 has no drm_fd/drm_handle: whatever follows
 * its struct is not read, and the buffer is allocated. */
static void test_old_caller(void **state)
{
	struct {
		struct devmemtcp_buf_opts o;
		char junk[16];
	} old;
	struct fake_node vgem = { "card0", "vgem" };
	struct devmemtcp_buf *buf;

	fake_on();
	add_node(&vgem);
	memset(&old, 0xa5, sizeof(old));
	memset(&old.o, 0, offsetof(struct devmemtcp_buf_opts, drm_fd));
	old.o.sz = offsetof(struct devmemtcp_buf_opts, drm_fd);
	old.o.provider = DEVMEMTCP_PROVIDER_DRM;
	old.o.size = 4096;
	assert_int_equal(devmemtcp_buf_new(ctx, &old.o, &buf), 0);
	assert_string_equal(fake.last_node, "card0");
	devmemtcp_buf_free(buf);
}

/* ---- a GEM handle of the caller's DRM fd ------------------------------ */

static int import(int fd, uint32_t handle, uint64_t size, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_DRM,
		       .size = size, .drm_fd = fd, .drm_handle = handle);

	return devmemtcp_buf_new(ctx, &o, buf);
}

static void test_import(void **state)
{
	struct fake_node vgem = { "card0", "vgem" };
	struct devmemtcp_buf *buf;
	uint32_t h;
	int fd;

	fake_on();
	add_node(&vgem);
	fd = open(node_path("card0"), O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fake_create_dumb(fd, 3 * 4096, &h), 0);
	assert_int_equal(import(fd, h, 0, &buf), 0);
	check_buf(buf, 3 * 4096);
	devmemtcp_buf_free(buf);
	assert_int_equal(import(fd, h, 3 * 4096, &buf), 0);
	devmemtcp_buf_free(buf);
	/* the caller keeps its fd and its handle */
	assert_true(fcntl(fd, F_GETFD) >= 0);
	assert_int_equal(fake.handle_size[h], 3 * 4096);

	assert_int_equal(import(fd, h, 4096, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "drm: opts.size 4096 is not the 12288 bytes of GEM handle 1: pass 0 (its size) or its size");
	assert_int_equal(import(fd, 9, 0, &buf), -ENOENT);
	ctxfix_expect_errmsg(ctx,
			     "drm: GEM handle 9 does not exist on opts.drm_fd %d (vgem): pass a handle of that DRM fd", fd);
	fake_destroy_dumb(fd, h);
	close(fd);
}

static void test_import_bad_fd(void **state)
{
	struct devmemtcp_buf *buf;
	int fd;

	fake_on();
	assert_int_equal(import(999, 1, 0, &buf), -EBADF);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "drm: opts.drm_fd 999 is not an open file descriptor: pass the DRM fd that holds GEM handle 1");
	/* not a DRM device: the real libdrm unless built without it */
	dmt_drm_ops_override = NULL;
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
#if HAVE_LIBDRM
	assert_int_equal(import(fd, 1, 0, &buf), -ENODEV);
	ctxfix_expect_errmsg(ctx,
			     "drm: opts.drm_fd %d is not a DRM device (DRM_IOCTL_VERSION: Inappropriate ioctl for device): pass the DRM fd that holds GEM handle 1",
			     fd);
#else
	assert_int_equal(import(fd, 1, 0, &buf), -EOPNOTSUPP);
#endif
	close(fd);
}

/* ---- probe -------------------------------------------------------------- */

static void test_probe_nodes(void **state)
{
	struct fake_node card = { "card0", "vgem" };
	struct fake_node render = { "renderD128", "vgem", .render = true };
	struct devmemtcp_probe_drm nodes[2];

	fake_on();
	assert_int_equal(dmt_drm_probe(nodes, 2), 0);
	add_node(&render);
	add_file("card1", 0600);	/* not DRM */
	add_node(&card);
	add_file("by-path", 0600);	/* not a node */
	assert_int_equal(dmt_drm_probe(nodes, 2), 3);	/* 2 reported */
	assert_string_equal(nodes[0].node, node_path("card0"));
	assert_string_equal(nodes[0].driver, "vgem");
	assert_int_equal(nodes[0].error, 0);
	assert_string_equal(nodes[1].node, node_path("card1"));
	assert_string_equal(nodes[1].driver, "");
	assert_int_equal(nodes[1].error, -ENOTTY);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
#if HAVE_LIBDRM
		T(test_no_device),
		T(test_no_device_system),
		T(test_path_missing),
		T(test_not_drm),
		T(test_permission),
#else
		T(test_without_libdrm),
#endif
		T(test_alloc),
		T(test_cpu_access_checks),
		T(test_discovery_order),
		T(test_discovery_first_error),
		T(test_no_dumb),
		T(test_create_fails),
		T(test_render_node),
		T(test_export_fails),
		T(test_map_fails),
		T(test_bad_opts),
		T(test_old_caller),
		T(test_import),
		T(test_import_bad_fd),
		T(test_probe_nodes),
	};

	return cmocka_run_group_tests_name("drm", tests, setup, teardown);
}
