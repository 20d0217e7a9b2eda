// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The udmabuf provider: host memory (memfd) exported as a dma-buf. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "uapi.h"

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

/* Path of the device node; tests point it elsewhere. */
static const char *udmabuf_dev(void)
{
	const char *p = getenv("DEVMEMTCP_UDMABUF_DEV");

	return p && *p ? p : "/dev/udmabuf";
}

/* The module's size_limit_mb parameter, or 0 when unknown. */
static long udmabuf_limit_mb(void)
{
	FILE *f = fopen("/sys/module/udmabuf/parameters/size_limit_mb", "re");
	long mb = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%ld", &mb) != 1)
		mb = 0;
	fclose(f);
	return mb;
}

int dmt_udmabuf_new(struct devmemtcp_ctx *ctx,
		    const struct devmemtcp_buf_opts *opts,
		    struct devmemtcp_buf *buf)
{
	bool huge = opts->flags & DEVMEMTCP_BUF_HUGETLB;
	uint64_t align = huge ? 2u << 20 : (uint64_t)sysconf(_SC_PAGESIZE);
	const char *dev = udmabuf_dev();
	struct dmt_udmabuf_create create = { 0 };
	struct devmemtcp_segment seg;
	int devfd, memfd, fd, ret;
	long limit;

	if (opts->flags & ~(uint32_t)DEVMEMTCP_BUF_HUGETLB)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "udmabuf: flags %#x: only DEVMEMTCP_BUF_HUGETLB applies to udmabuf",
			       opts->flags);
	if (!opts->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "udmabuf: size is 0: give the buffer size in bytes");
	buf->size = (opts->size + align - 1) & ~(align - 1);
	limit = udmabuf_limit_mb();
	if (limit > 0 && buf->size > (uint64_t)limit << 20)
		return dmt_err(ctx, &ctx->err, -E2BIG,
			       "udmabuf: %llu bytes exceed the udmabuf module's size_limit_mb of %ld MiB: reload it with 'modprobe -r udmabuf; modprobe udmabuf size_limit_mb=%llu' or use a smaller buffer",
			       (unsigned long long)buf->size, limit,
			       (unsigned long long)((buf->size + (1 << 20) - 1) >> 20));

	devfd = open(dev, O_RDWR | O_CLOEXEC);
	if (devfd < 0) {
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
	memfd = memfd_create("devmemtcp", MFD_ALLOW_SEALING | MFD_CLOEXEC |
				      (huge ? MFD_HUGETLB | DMT_MFD_HUGE_2MB : 0));
	if (memfd < 0) {
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: memfd_create%s failed: %s%s", huge ? "(MFD_HUGETLB)" : "",
			      strerror(errno),
			      huge ? ": reserve 2 MiB huge pages (sysctl vm.nr_hugepages)" : "");
		goto err_dev;
	}
	if (ftruncate(memfd, (off_t)buf->size)) {
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: sizing the memfd to %llu bytes failed: %s%s",
			      (unsigned long long)buf->size, strerror(errno),
			      huge ? ": not enough free huge pages (vm.nr_hugepages)" : "");
		goto err_memfd;
	}
	/* udmabuf requires F_SEAL_SHRINK and refuses F_SEAL_WRITE */
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: sealing the memfd failed: %s",
			      strerror(errno));
		goto err_memfd;
	}
	create.memfd = (uint32_t)memfd;
	create.flags = DMT_UDMABUF_FLAGS_CLOEXEC;
	create.offset = 0;
	create.size = buf->size;
	fd = ioctl(devfd, DMT_UDMABUF_CREATE, &create);
	if (fd < 0) {
		ret = -errno;
		if (ret == -EINVAL && limit <= 0)
			dmt_err(ctx, &ctx->err, ret,
				"udmabuf: UDMABUF_CREATE of %llu bytes failed: %s: the size may exceed the module's size_limit_mb (default 64)",
				(unsigned long long)buf->size, strerror(-ret));
		else
			dmt_err(ctx, &ctx->err, ret,
				"udmabuf: UDMABUF_CREATE of %llu bytes failed: %s",
				(unsigned long long)buf->size, strerror(-ret));
		goto err_memfd;
	}
	buf->fd = fd;
	buf->own_fd = true;
	buf->cpu_map = mmap(NULL, buf->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			    fd, 0);
	if (buf->cpu_map == MAP_FAILED) {
		buf->cpu_map = NULL;
		ret = dmt_err(ctx, &ctx->err, -errno,
			      "udmabuf: mmap of the dma-buf failed: %s",
			      strerror(errno));
		goto err_memfd;
	}
	/* Host memory: the "device address" of offset x is the CPU mapping. */
	seg = (struct devmemtcp_segment){ 0, buf->size,
					  (uint64_t)(uintptr_t)buf->cpu_map };
	ret = dmt_segments_set(ctx, &ctx->err, &buf->segs, &buf->nsegs, &seg, 1,
			       buf->size);
	if (ret)
		goto err_memfd;
	/* the dma-buf holds the pages; the memfd is no longer needed */
	close(memfd);
	close(devfd);
	return 0;

err_memfd:
	close(memfd);
err_dev:
	close(devfd);
	return ret;
}
