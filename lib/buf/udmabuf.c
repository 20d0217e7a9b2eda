// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The udmabuf provider: host memory (memfd) exported as a dma-buf. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "core/privops.h"
#include "core/uapi.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#define DMT_MFD_HUGE_2MB (21U << 26)

/* Path of the device node; test builds may point it elsewhere. */
const char *dmt_udmabuf_dev(void)
{
	const char *p = dmt_hook_env("DEVMEMTCP_UDMABUF_DEV");

	return p && *p ? p : "/dev/udmabuf";
}

/* udmabuf's directory in sysfs; test builds may point it elsewhere. */
static const char *udmabuf_sysfs(void)
{
	const char *p = dmt_hook_env("DEVMEMTCP_TEST_UDMABUF_SYSFS");

	return p && *p ? p : "/sys/module/udmabuf";
}

/* A loadable module has an initstate; one built into the kernel has
 * only its parameters. */
static bool udmabuf_builtin(void)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/initstate", udmabuf_sysfs());
	return access(path, F_OK) != 0 && errno == ENOENT;
}

/* The module's size_limit_mb parameter, or 0 when unknown. */
static long udmabuf_limit_mb(void)
{
	char path[PATH_MAX];
	FILE *f;
	long mb = 0;

	snprintf(path, sizeof(path), "%s/parameters/size_limit_mb", udmabuf_sysfs());
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &mb) != 1)
		mb = 0;
	fclose(f);
	return mb;
}

/* Flags and size; *size rounded up to the page (or huge page) size. */
static int udmabuf_size(struct devmemtcp_ctx *ctx,
			const struct devmemtcp_buf_opts *opts, long limit,
			uint64_t *size)
{
	bool huge = opts->flags & DEVMEMTCP_BUF_HUGETLB;
	uint64_t align = huge ? 2u << 20 : (uint64_t)sysconf(_SC_PAGESIZE);

	if (opts->segments || opts->nsegments)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "udmabuf: segments are for imported dma-bufs (DEVMEMTCP_PROVIDER_IMPORT): a udmabuf is one segment over its memfd; leave segments NULL and nsegments 0");
	if (opts->flags & ~(uint32_t)DEVMEMTCP_BUF_HUGETLB)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "udmabuf: flags %#x: only DEVMEMTCP_BUF_HUGETLB applies to udmabuf",
			       opts->flags);
	if (!opts->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "udmabuf: size is 0: give the buffer size in bytes");
	/* a memfd is sized with an off_t: round up without wrapping */
	if (opts->size > (uint64_t)INT64_MAX - (align - 1))
		return dmt_err(ctx, &ctx->err, -E2BIG,
			       "udmabuf: %llu bytes is more than a memfd can hold (at most %lld bytes): give a smaller size",
			       (unsigned long long)opts->size, (long long)INT64_MAX);
	*size = (opts->size + align - 1) & ~(align - 1);
	if (limit > 0 && *size > (uint64_t)limit << 20 && udmabuf_builtin())
		return dmt_err(ctx, &ctx->err, -E2BIG,
			       "udmabuf: %llu bytes exceed udmabuf's size_limit_mb of %ld MiB: udmabuf is built into this kernel: boot it with udmabuf.size_limit_mb=%llu or use a smaller buffer",
			       (unsigned long long)*size, limit,
			       (unsigned long long)((*size + (1 << 20) - 1) >> 20));
	if (limit > 0 && *size > (uint64_t)limit << 20)
		return dmt_err(ctx, &ctx->err, -E2BIG,
			       "udmabuf: %llu bytes exceed the udmabuf module's size_limit_mb of %ld MiB: reload it with 'modprobe -r udmabuf; modprobe udmabuf size_limit_mb=%llu' or use a smaller buffer",
			       (unsigned long long)*size, limit,
			       (unsigned long long)((*size + (1 << 20) - 1) >> 20));
	return 0;
}

/* The device node: an fd, or a negative errno that names the fix. */
static int udmabuf_open(struct devmemtcp_ctx *ctx, const char *dev)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC), ret;

	if (fd >= 0)
		return fd;
	ret = -errno;
	if (ret == -ENOENT)
		return dmt_err(ctx, &ctx->err, -ENOENT,
			       "udmabuf: %s does not exist: load the module with 'modprobe udmabuf' (kernel option CONFIG_UDMABUF)",
			       dev);
	if (ret == -EACCES || ret == -EPERM)
		return dmt_err(ctx, &ctx->err, ret,
			       "udmabuf: no permission to open %s: run as root or give your user access to it (udev rule, group)",
			       dev);
	return dmt_err(ctx, &ctx->err, ret, "udmabuf: cannot open %s: %s",
		       dev, strerror(-ret));
}

/* A sealed memfd of size bytes: an fd or a negative errno. */
int dmt_udmabuf_memfd(struct devmemtcp_ctx *ctx, uint64_t size, bool huge)
{
	int memfd = memfd_create("devmemtcp", MFD_ALLOW_SEALING | MFD_CLOEXEC |
				 (huge ? MFD_HUGETLB | DMT_MFD_HUGE_2MB : 0));
	int ret;

	if (memfd < 0)
		return dmt_err(ctx, &ctx->err, -errno,
			       "udmabuf: memfd_create%s failed: %s%s", huge ? "(MFD_HUGETLB)" : "",
			       strerror(errno),
			       huge ? ": reserve 2 MiB huge pages (sysctl vm.nr_hugepages)" : "");
	if (ftruncate(memfd, (off_t)size)) {
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: sizing the memfd to %llu bytes failed: %s%s",
			      (unsigned long long)size, strerror(errno),
			      huge ? ": not enough free huge pages (vm.nr_hugepages)" : "");
		goto err;
	}
	/* udmabuf requires F_SEAL_SHRINK and refuses F_SEAL_WRITE */
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: sealing the memfd failed: %s",
			      strerror(errno));
		goto err;
	}
	return memfd;

err:
	close(memfd);
	return ret;
}

/* UDMABUF_CREATE over the whole memfd: the dma-buf fd or a negative errno. */
static int udmabuf_create_fd(struct devmemtcp_ctx *ctx, int devfd, int memfd,
			     uint64_t size, long limit)
{
	struct dmt_udmabuf_create create = {
		.memfd = (uint32_t)memfd,
		.flags = DMT_UDMABUF_FLAGS_CLOEXEC,
		.offset = 0,
		.size = size,
	};
	int fd = ioctl(devfd, DMT_UDMABUF_CREATE, &create), ret;

	if (fd >= 0)
		return fd;
	ret = -errno;
	if (ret == -EINVAL && limit <= 0)
		return dmt_err(ctx, &ctx->err, ret,
			       "udmabuf: UDMABUF_CREATE of %llu bytes failed: %s: the size may exceed the module's size_limit_mb (default 64)",
			       (unsigned long long)size, strerror(-ret));
	return dmt_err(ctx, &ctx->err, ret,
		       "udmabuf: UDMABUF_CREATE of %llu bytes failed: %s",
		       (unsigned long long)size, strerror(-ret));
}

/* The CPU mapping, which is also the "device address" of host memory.  It
 * maps the memfd, not the dma-buf: the same pages, but a dma-buf mapping
 * is VM_PFNMAP, which the kernel cannot pin (io_uring zcrx user-memory
 * areas pin it). */
int dmt_udmabuf_map(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf,
		    int memfd)
{
	struct devmemtcp_segment seg;

	buf->cpu_map = mmap(NULL, buf->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			    memfd, 0);
	if (buf->cpu_map == MAP_FAILED) {
		buf->cpu_map = NULL;
		return dmt_err(ctx, &ctx->err, -errno,
			       "udmabuf: mmap of the memfd failed: %s",
			       strerror(errno));
	}
	seg = (struct devmemtcp_segment){ 0, buf->size,
					  (uint64_t)(uintptr_t)buf->cpu_map };
	return dmt_buf_set_segments(buf, &seg, 1);
}

int dmt_udmabuf_local(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		      const char *dev, long limit)
{
	int devfd, memfd, fd, ret;

	devfd = udmabuf_open(ctx, dev);
	if (devfd < 0)
		return devfd;
	memfd = dmt_udmabuf_memfd(ctx, buf->size, huge);
	if (memfd < 0) {
		ret = memfd;
		goto err_dev;
	}
	fd = udmabuf_create_fd(ctx, devfd, memfd, buf->size, limit);
	if (fd < 0) {
		ret = fd;
		goto err_memfd;
	}
	/* buf owns the dma-buf from here: devmemtcp_buf_free closes it */
	buf->fd = fd;
	buf->own_fd = true;
	ret = dmt_udmabuf_map(ctx, buf, memfd);
	/* the dma-buf holds the pages; the memfd is no longer needed */
err_memfd:
	close(memfd);
err_dev:
	close(devfd);
	return ret;
}

/* The dma-buf comes from the context's privileged operations: this
 * process's /dev/udmabuf, or devmemtcp-broker's. */
static int udmabuf_create(struct devmemtcp_ctx *ctx,
			  const struct devmemtcp_buf_opts *opts,
			  struct devmemtcp_buf *buf)
{
	bool huge = opts->flags & DEVMEMTCP_BUF_HUGETLB;
	long limit = udmabuf_limit_mb();
	int ret;

	ret = udmabuf_size(ctx, opts, limit, &buf->size);
	if (ret)
		return ret;
	return ctx->priv->udmabuf(ctx, buf, huge, limit);
}

const struct dmt_buf_provider dmt_udmabuf_provider = {
	.create = udmabuf_create,
};
