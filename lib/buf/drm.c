// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The DRM provider: a dumb buffer allocated on a DRM node (or a GEM handle
 * of the caller's DRM fd), exported as a dma-buf with PRIME and mapped for
 * the CPU.  The CPU mapping is the device address, as for udmabuf: right
 * for drivers without a GPU address space (vgem); memory a GPU addresses
 * otherwise goes through DEVMEMTCP_PROVIDER_IMPORT with its own segments.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "config.h"
#if HAVE_LIBDRM
#include <xf86drm.h>
#endif

#include "drm-provider.h"
#include "core/uapi.h"

/* Nodes looked at, at most: more DRM devices than any machine has. */
#define DMT_DRM_MAX_NODES 32

const struct dmt_drm_ops *dmt_drm_ops_override;

/* ---- libdrm ---------------------------------------------------------- */

#if HAVE_LIBDRM
static int libdrm_devices(char (*out)[DMT_DRM_PATH_MAX], int max)
{
	drmDevicePtr devs[DMT_DRM_MAX_NODES];
	int n, k = 0;

	/* libdrm knows only /dev/dri and sysfs: tests with their own
	 * directory of nodes leave it out */
	if (dmt_hook_env("DEVMEMTCP_TEST_DRM_DIR"))
		return 0;
	n = drmGetDevices2(0, devs, DMT_DRM_MAX_NODES);
	if (n <= 0)
		return 0;
	if (n > DMT_DRM_MAX_NODES)
		n = DMT_DRM_MAX_NODES;
	for (int i = 0; i < n && k < max; i++)
		if (devs[i]->available_nodes & (1 << DRM_NODE_PRIMARY))
			snprintf(out[k++], DMT_DRM_PATH_MAX, "%s",
				 devs[i]->nodes[DRM_NODE_PRIMARY]);
	drmFreeDevices(devs, n);
	return k;
}

static int libdrm_driver(int fd, char *name, size_t len)
{
	drmVersionPtr v;

	errno = 0;
	v = drmGetVersion(fd);
	if (!v)
		return errno ? -errno : -ENOTTY;
	snprintf(name, len, "%s", v->name ? v->name : "");
	drmFreeVersion(v);
	return 0;
}

static bool libdrm_is_render(int fd)
{
	return drmGetNodeTypeFromFd(fd) == DRM_NODE_RENDER;
}

static int libdrm_primary(int fd, char *path, size_t len)
{
	char *p = drmGetPrimaryDeviceNameFromFd(fd);

	if (!p)
		return -ENOENT;
	snprintf(path, len, "%s", p);
	free(p);
	return 0;
}

/* Rows of 4096 bytes (1024 pixels of 32 bits): every driver's pitch
 * alignment divides that, so the buffer is exactly size bytes. */
static int libdrm_create_dumb(int fd, uint64_t size, uint32_t *handle)
{
	struct drm_mode_create_dumb c = {
		.height = (uint32_t)(size / 4096),
		.width = 1024,
		.bpp = 32,
	};

	if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &c))
		return -errno;
	*handle = c.handle;
	return 0;
}

static void libdrm_destroy_dumb(int fd, uint32_t handle)
{
	struct drm_mode_destroy_dumb d = { .handle = handle };

	drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &d);
}

static int libdrm_export(int fd, uint32_t handle, int *prime_fd)
{
	if (drmPrimeHandleToFD(fd, handle, DRM_CLOEXEC | DRM_RDWR, prime_fd))
		return errno ? -errno : -EIO;
	return 0;
}

static const struct dmt_drm_ops libdrm_ops = {
	.devices = libdrm_devices,
	.driver = libdrm_driver,
	.is_render = libdrm_is_render,
	.primary = libdrm_primary,
	.create_dumb = libdrm_create_dumb,
	.destroy_dumb = libdrm_destroy_dumb,
	.export = libdrm_export,
};
#define DMT_DRM_REAL_OPS (&libdrm_ops)
#else
#define DMT_DRM_REAL_OPS NULL
#endif

/* NULL: built without libdrm. */
static const struct dmt_drm_ops *drm_ops(void)
{
	return dmt_drm_ops_override ? dmt_drm_ops_override : DMT_DRM_REAL_OPS;
}

/* ---- finding nodes ----------------------------------------------------- */

/* Where the nodes are; test builds may point it elsewhere. */
static const char *drm_dir(void)
{
	const char *p = dmt_hook_env("DEVMEMTCP_TEST_DRM_DIR");

	return p && *p ? p : "/dev/dri";
}

struct node_name {
	int kind;		/* 0 card, 1 render */
	long num;
	char name[24];
};

/* "card<N>" or (with render) "renderD<N>": its kind and number. */
static bool node_parse(const char *name, bool render, struct node_name *nn)
{
	static const char *const prefix[] = { "card", "renderD" };

	for (int k = 0; k < (render ? 2 : 1); k++) {
		size_t pl = strlen(prefix[k]), dl;
		const char *d = name + pl;

		if (strncmp(name, prefix[k], pl))
			continue;
		dl = strspn(d, "0123456789");
		if (!dl || d[dl] || dl > 9 || (d[0] == '0' && dl > 1))
			return false;
		nn->kind = k;
		nn->num = strtol(d, NULL, 10);
		memcpy(nn->name, name, pl + dl + 1);	/* at most 17 bytes */
		return true;
	}
	return false;
}

static int node_cmp(const void *a, const void *b)
{
	const struct node_name *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind - y->kind;
	return x->num < y->num ? -1 : x->num > y->num;
}

/*
 * The card nodes (and with render the render nodes) in dir, cards first,
 * each by number: their paths into out[0..max), how many there are (at
 * most DMT_DRM_MAX_NODES are looked at).
 */
static int scan_nodes(const char *dir, bool render, char (*out)[DMT_DRM_PATH_MAX],
		      int max)
{
	struct node_name nn[DMT_DRM_MAX_NODES];
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < DMT_DRM_MAX_NODES)
		if (node_parse(e->d_name, render, &nn[n]))
			n++;
	closedir(d);
	qsort(nn, (size_t)n, sizeof(nn[0]), node_cmp);
	if (strlen(dir) + 1 + sizeof(nn[0].name) > DMT_DRM_PATH_MAX)
		return 0;	/* no directory of DRM nodes has so long a path */
	for (int i = 0; i < n && i < max; i++)
		snprintf(out[i], DMT_DRM_PATH_MAX, "%.*s/%s",
			 (int)(DMT_DRM_PATH_MAX - 1 - sizeof(nn[0].name)), dir,
			 nn[i].name);
	return n;
}

/*
 * Where to try allocating: the primary nodes of the devices libdrm knows,
 * in its order, then the card nodes it did not report (libdrm skips
 * devices on buses it does not know, such as vgem's faux bus from Linux
 * 6.15 on).  Render nodes are not candidates: the kernel allows dumb
 * buffers only on primary nodes.
 */
static int drm_candidates(const struct dmt_drm_ops *ops,
			  char (*out)[DMT_DRM_PATH_MAX], int max)
{
	char scanned[DMT_DRM_MAX_NODES][DMT_DRM_PATH_MAX];
	int n = ops->devices(out, max), m;

	if (n < 0)
		n = 0;
	m = scan_nodes(drm_dir(), false, scanned, DMT_DRM_MAX_NODES);
	for (int i = 0; i < m && i < DMT_DRM_MAX_NODES && n < max; i++) {
		bool known = false;

		for (int j = 0; j < n && !known; j++)
			known = !strcmp(out[j], scanned[i]);
		if (!known)
			memcpy(out[n++], scanned[i], DMT_DRM_PATH_MAX);
	}
	return n;
}

int dmt_drm_probe(struct devmemtcp_probe_drm *nodes, int max)
{
	const struct dmt_drm_ops *ops = drm_ops();
	char paths[DMT_DRM_MAX_NODES][DMT_DRM_PATH_MAX];
	int n;

	if (!ops)
		return -1;
	n = scan_nodes(drm_dir(), true, paths, DMT_DRM_MAX_NODES);
	for (int i = 0; i < n && i < max; i++) {
		struct devmemtcp_probe_drm *p = &nodes[i];
		int fd = open(paths[i], O_RDONLY | O_CLOEXEC);

		memset(p, 0, sizeof(*p));
		snprintf(p->node, sizeof(p->node), "%.63s", paths[i]);
		if (fd < 0) {
			p->error = -errno;
			continue;
		}
		p->error = ops->driver(fd, p->driver, sizeof(p->driver));
		if (p->error)
			p->driver[0] = '\0';
		close(fd);
	}
	return n;
}

/* ---- allocating on a node ---------------------------------------------- */

struct drm_node {
	char path[PATH_MAX];		/* opts.drm_path, or a found node */
	char driver[DMT_DRM_NAME_MAX];
	int fd;
	uint32_t handle;
};

/* Open node->path and learn its driver: 0, or a negative errno with the
 * message recorded on err. */
static int node_open(const struct dmt_drm_ops *ops, struct drm_node *node,
		     struct dmt_err *err)
{
	const char *path = node->path;
	int ret;

	node->fd = open(path, O_RDWR | O_CLOEXEC);
	if (node->fd < 0) {
		ret = -errno;
		if (ret == -ENOENT)
			return dmt_err_set(err, ret,
					   "drm: %s does not exist: load the device's DRM driver ('modprobe vgem' for a virtual one, kernel option CONFIG_DRM_VGEM) or name another node in opts.drm_path",
					   path);
		if (ret == -EACCES || ret == -EPERM)
			return dmt_err_set(err, ret,
					   "drm: no permission to open %s: run as root or give your user access to it (its group, often 'video' or 'render', or a udev rule)",
					   path);
		return dmt_err_set(err, ret, "drm: cannot open %s: %s", path,
				   strerror(-ret));
	}
	ret = ops->driver(node->fd, node->driver, sizeof(node->driver));
	if (ret) {
		close(node->fd);
		node->fd = -1;
		return dmt_err_set(err, -ENODEV,
				   "drm: %s is not a DRM device node (DRM_IOCTL_VERSION: %s): name a node of /dev/dri in opts.drm_path",
				   path, strerror(-ret));
	}
	return 0;
}

static void node_close(struct drm_node *node)
{
	if (node->fd >= 0)
		close(node->fd);
	node->fd = -1;
}

/* A render node refused the dumb buffer (the kernel allows them only on
 * primary nodes): move node to its device's primary node. */
static int node_to_primary(const struct dmt_drm_ops *ops, struct drm_node *node,
			   struct dmt_err *err)
{
	char primary[DMT_DRM_PATH_MAX];

	if (ops->primary(node->fd, primary, sizeof(primary)))
		return dmt_err_set(err, -EOPNOTSUPP,
				   "drm: %s is a render node, where the kernel allows no dumb buffers, and the primary node of its device (%s) was not found: name the device's card node in opts.drm_path",
				   node->path, node->driver);
	node_close(node);
	memcpy(node->path, primary, sizeof(primary));	/* NUL-terminated */
	return 0;
}

/*
 * A dumb buffer of size bytes on node->path (or on the primary node of
 * its device when it is a render node): 0 with node->fd and node->handle
 * set, or a negative errno with the message recorded on err and node
 * closed.
 */
static int node_alloc(const struct dmt_drm_ops *ops, struct drm_node *node,
		      uint64_t size, struct dmt_err *err)
{
	bool followed = false;
	int ret;

again:
	ret = node_open(ops, node, err);
	if (ret)
		return ret;
	ret = ops->create_dumb(node->fd, size, &node->handle);
	if (ret == -EACCES && !followed && ops->is_render(node->fd)) {
		followed = true;
		ret = node_to_primary(ops, node, err);
		if (ret)
			goto err;
		goto again;
	}
	if (!ret)
		return 0;
	if (ret == -ENOSYS || ret == -EOPNOTSUPP || ret == -ENOTTY)
		ret = dmt_err_set(err, -EOPNOTSUPP,
				  "drm: the %s driver of %s cannot allocate buffers (it has no dumb buffers): allocate with its own API and pass the GEM handle in opts.drm_fd and opts.drm_handle, or use vgem ('modprobe vgem')",
				  node->driver, node->path);
	else
		ret = dmt_err_set(err, ret,
				  "drm: DRM_IOCTL_MODE_CREATE_DUMB of %llu bytes on %s (%s) failed: %s",
				  (unsigned long long)size, node->path,
				  node->driver, strerror(-ret));
err:
	node_close(node);
	return ret;
}

/*
 * No node named: try the candidates in order; the first that allocates
 * wins.  When none does, the first one's error is the answer (each is
 * logged at debug level).
 */
static int drm_find(struct devmemtcp_ctx *ctx, const struct dmt_drm_ops *ops,
		    uint64_t size, struct drm_node *node)
{
	char paths[DMT_DRM_MAX_NODES][DMT_DRM_PATH_MAX];
	struct dmt_err err;
	int n = drm_candidates(ops, paths, DMT_DRM_MAX_NODES);

	if (!n)
		return dmt_err(ctx, &ctx->err, -ENOENT,
			       "drm: no DRM device in %s: load a DRM driver, e.g. 'modprobe vgem' (kernel option CONFIG_DRM_VGEM), or name the node in opts.drm_path",
			       drm_dir());
	for (int i = 0; i < n; i++) {
		memcpy(node->path, paths[i], DMT_DRM_PATH_MAX);
		if (!node_alloc(ops, node, size, &err))
			return 0;
		dmt_log(ctx, DEVMEMTCP_LOG_DEBUG, "%s", err.msg);
		if (!i)
			ctx->err = err;
	}
	return dmt_err_log(ctx, &ctx->err);
}

/* ---- the dma-buf ------------------------------------------------------- */

/* PRIME export of handle on fd (what names fd in messages): the dma-buf
 * fd, or a negative errno with the message on ctx->err. */
static int drm_export(struct devmemtcp_ctx *ctx, const struct dmt_drm_ops *ops,
		      int fd, uint32_t handle, const char *what,
		      const char *driver)
{
	int pfd = -1, ret = ops->export(fd, handle, &pfd);

	if (!ret)
		return pfd;
	if (ret == -ENOENT)
		return dmt_err(ctx, &ctx->err, ret,
			       "drm: GEM handle %u does not exist on %s (%s): pass a handle of that DRM fd",
			       handle, what, driver);
	return dmt_err(ctx, &ctx->err, ret,
		       "drm: PRIME export of GEM handle %u on %s (%s) failed: %s",
		       handle, what, driver, strerror(-ret));
}

/* buf owns pfd from here (devmemtcp_buf_free closes it); its size is the
 * dma-buf's. */
static int drm_own(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf,
		   int pfd, const char *driver)
{
	off_t end;

	buf->fd = pfd;
	buf->own_fd = true;
	end = lseek(pfd, 0, SEEK_END);
	if (end <= 0)
		return dmt_err(ctx, &ctx->err, end < 0 ? -errno : -EINVAL,
			       "drm: the %s dma-buf has no size (lseek: %s)",
			       driver, end < 0 ? strerror(errno) : "0 bytes");
	buf->size = (uint64_t)end;
	return 0;
}

static int drm_map(struct devmemtcp_buf *buf)
{
	return dmt_buf_map_cpu(buf, "drm",
			       ": the DRM provider uses the CPU mapping as the device address (drivers without a GPU address space, such as vgem); pass GPU memory as a PRIME fd with its device addresses through DEVMEMTCP_PROVIDER_IMPORT");
}

/* Name the dma-buf after its maker ("devmemtcp:vgem" in fdinfo and
 * debugfs); a kernel that cannot leaves it unnamed. */
static void drm_name(int pfd, const char *driver)
{
	char name[DMT_DMA_BUF_NAME_LEN];

	snprintf(name, sizeof(name), "devmemtcp:%.21s", driver);
	(void)ioctl(pfd, DMT_DMA_BUF_SET_NAME, name);
}

/* ---- the provider ------------------------------------------------------ */

static int drm_alloc(struct devmemtcp_ctx *ctx, const struct dmt_drm_ops *ops,
		     const struct devmemtcp_buf_opts *opts,
		     struct devmemtcp_buf *buf)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), size;
	struct drm_node node = { .fd = -1 };
	int pfd, ret;

	if (!opts->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "drm: opts.size is 0: give the buffer size in bytes, or a GEM handle to export in opts.drm_fd and opts.drm_handle (a PRIME fd goes through DEVMEMTCP_PROVIDER_IMPORT)");
	if (opts->size > (DMT_DRM_DUMB_MAX & ~(page - 1)))
		return dmt_err(ctx, &ctx->err, -E2BIG,
			       "drm: %llu bytes exceed the %llu-byte limit of dumb buffers (the kernel computes their size in 32 bits): use several buffers, or allocate with the driver's own API and pass the GEM handle in opts.drm_fd and opts.drm_handle",
			       (unsigned long long)opts->size,
			       DMT_DRM_DUMB_MAX & ~(page - 1));
	size = (opts->size + page - 1) & ~(page - 1);
	if (opts->drm_path) {
		snprintf(node.path, sizeof(node.path), "%s", opts->drm_path);
		ret = node_alloc(ops, &node, size, &ctx->err);
		if (ret)
			return dmt_err_log(ctx, &ctx->err);
	} else {
		ret = drm_find(ctx, ops, size, &node);
		if (ret)
			return ret;
	}
	pfd = drm_export(ctx, ops, node.fd, node.handle, node.path, node.driver);
	/* the dma-buf holds the GEM object from here on */
	ops->destroy_dumb(node.fd, node.handle);
	node_close(&node);
	if (pfd < 0)
		return pfd;
	drm_name(pfd, node.driver);
	dmt_log(ctx, DEVMEMTCP_LOG_DEBUG, "drm: %llu-byte dumb buffer on %s (%s)",
		(unsigned long long)size, node.path, node.driver);
	ret = drm_own(ctx, buf, pfd, node.driver);
	return ret ? ret : drm_map(buf);
}

/* drm_handle of the caller's drm_fd: exported, the caller keeps both. */
static int drm_import(struct devmemtcp_ctx *ctx, const struct dmt_drm_ops *ops,
		      const struct devmemtcp_buf_opts *opts, uint32_t handle,
		      struct devmemtcp_buf *buf)
{
	int gem_fd = DMT_OPT(opts, devmemtcp_buf_opts, drm_fd, 0), pfd, ret;
	char what[40], driver[DMT_DRM_NAME_MAX];

	snprintf(what, sizeof(what), "opts.drm_fd %d", gem_fd);
	if (fcntl(gem_fd, F_GETFD) < 0)
		return dmt_err(ctx, &ctx->err, -EBADF,
			       "drm: %s is not an open file descriptor: pass the DRM fd that holds GEM handle %u",
			       what, handle);
	ret = ops->driver(gem_fd, driver, sizeof(driver));
	if (ret)
		return dmt_err(ctx, &ctx->err, -ENODEV,
			       "drm: %s is not a DRM device (DRM_IOCTL_VERSION: %s): pass the DRM fd that holds GEM handle %u",
			       what, strerror(-ret), handle);
	pfd = drm_export(ctx, ops, gem_fd, handle, what, driver);
	if (pfd < 0)
		return pfd;
	ret = drm_own(ctx, buf, pfd, driver);
	if (ret)
		return ret;
	if (opts->size && opts->size != buf->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "drm: opts.size %llu is not the %llu bytes of GEM handle %u: pass 0 (its size) or its size",
			       (unsigned long long)opts->size,
			       (unsigned long long)buf->size, handle);
	return drm_map(buf);
}

static int drm_create(struct devmemtcp_ctx *ctx,
		      const struct devmemtcp_buf_opts *opts,
		      struct devmemtcp_buf *buf)
{
	const struct dmt_drm_ops *ops = drm_ops();
	uint32_t handle = DMT_OPT(opts, devmemtcp_buf_opts, drm_handle, 0);

	if (!ops)
		return dmt_err(ctx, &ctx->err, -EOPNOTSUPP,
			       "drm: libdevmemtcp %s was built without libdrm: install libdrm-dev and rebuild",
			       devmemtcp_version());
	if (opts->flags)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "drm: flags %#x do not apply to DRM buffers: leave opts.flags 0",
			       opts->flags);
	if (handle)
		return drm_import(ctx, ops, opts, handle, buf);
	return drm_alloc(ctx, ops, opts, buf);
}

const struct dmt_buf_provider dmt_drm_provider = {
	.create = drm_create,
};
