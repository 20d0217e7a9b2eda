// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Buffer objects: provider dispatch, the page-grid check, CPU access; the
 * import provider.  The provider API is provider.c. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "buf.h"
#include "core/uapi.h"
#include "core/fork.h"

int dmt_buf_alloc(struct devmemtcp_ctx *ctx, int provider,
		  struct devmemtcp_buf **bufp)
{
	struct devmemtcp_buf *buf = dmt_calloc(1, sizeof(*buf));

	if (!buf)
		return -ENOMEM;
	buf->refs = 1;
	buf->ctx = ctx;
	buf->provider = provider;
	buf->fd = -1;
	buf->fork_gen = dmt_fork_gen();
	*bufp = buf;
	return 0;
}

struct devmemtcp_buf *dmt_buf_get(const struct devmemtcp_buf *cbuf)
{
	/* the count is not part of the buffer's value: const callers too */
	struct devmemtcp_buf *buf = (struct devmemtcp_buf *)cbuf;

	__atomic_add_fetch(&buf->refs, 1, __ATOMIC_RELAXED);
	return buf;
}

static void buf_destroy(struct devmemtcp_buf *buf)
{
	/* a parent's provider memory (CUDA's) is the parent's: a child
	 * closes its copy of the dma-buf below and calls no driver */
	if (buf->ops && buf->ops->release && !dmt_forked(buf->fork_gen))
		buf->ops->release(buf);
	if (buf->cpu_map)
		munmap(buf->cpu_map, buf->size);
	if (buf->own_fd && buf->fd >= 0)
		close(buf->fd);
	dmt_segmap_drop(buf);
	free(buf->segs);
	free(buf);
}

void dmt_buf_put(struct devmemtcp_buf *buf)
{
	if (buf && !__atomic_sub_fetch(&buf->refs, 1, __ATOMIC_ACQ_REL))
		buf_destroy(buf);
}

int dmt_buf_check_pages(const struct devmemtcp_buf *buf, uint64_t page,
			bool nic_page, const char *op, struct dmt_err *err)
{
	for (size_t i = 0; i < buf->nsegs; i++) {
		const struct devmemtcp_segment *s = &buf->segs[i];
		uint64_t end = s->offset + s->len;
		bool start_off = s->offset % page;

		if (!start_off && (!(end % page) || end == buf->size))
			continue;
		return dmt_err_set(err, -EINVAL,
				   "%s: segment [0x%llx, +0x%llx) of the buffer %s at 0x%llx, not a multiple of the %llu-byte page%s: a fragment of the NIC could span two device ranges; make every segment boundary a multiple of %llu%s",
				   op, (unsigned long long)s->offset,
				   (unsigned long long)s->len,
				   start_off ? "starts" : "ends",
				   (unsigned long long)(start_off ? s->offset : end),
				   (unsigned long long)page,
				   nic_page ? " (rx_page_size)" : "",
				   (unsigned long long)page,
				   nic_page ? ", or lower rx_page_size" : "");
	}
	return 0;
}

/* fd's file lives on the dma-buf filesystem.  Test builds may let a
 * memfd stand in, where a test machine has no dma-buf exporter. */
static bool is_dmabuf(int fd)
{
	struct statfs st;

	if (fstatfs(fd, &st) == 0 && st.f_type == DMT_DMA_BUF_MAGIC)
		return true;
#if DMT_TEST_HOOKS
	if (dmt_hook_env("DEVMEMTCP_TEST_DMABUF_MEMFD") &&
	    fcntl(fd, F_GET_SEALS) >= 0)
		return true;
#endif
	return false;
}

/* The caller's fd is a dma-buf of at least opts->size bytes. */
static int import_check(struct devmemtcp_ctx *ctx,
			const struct devmemtcp_buf_opts *opts)
{
	off_t size;

	if (opts->fd < 0)
		return dmt_err(ctx, &ctx->err, -EBADF,
			       "import: opts.fd %d is not a dma-buf fd: pass the fd your exporter gave you",
			       opts->fd);
	if (!opts->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "import: opts.size is 0: pass the dma-buf's size in bytes");
	size = lseek(opts->fd, 0, SEEK_END);
	if (size < 0 && errno == EBADF)
		return dmt_err(ctx, &ctx->err, -EBADF,
			       "import: opts.fd %d is not an open file descriptor",
			       opts->fd);
	if (!is_dmabuf(opts->fd))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "import: opts.fd %d is not a dma-buf: pass the fd your exporter gave you (cuMemGetHandleForAddressRange, drmPrimeHandleToFD, UDMABUF_CREATE)",
			       opts->fd);
	/* a dma-buf's end is its size */
	if (size >= 0 && opts->size > (uint64_t)size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "import: opts.size %llu is larger than the dma-buf (%lld bytes): pass its size (lseek(fd, 0, SEEK_END) gives it)",
			       (unsigned long long)opts->size, (long long)size);
	return 0;
}

static int import_create(struct devmemtcp_ctx *ctx,
			 const struct devmemtcp_buf_opts *opts,
			 struct devmemtcp_buf *buf)
{
	struct devmemtcp_segment whole;
	int ret;

	if (!opts->segments && opts->nsegments)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "import: nsegments is %zu but segments is NULL: pass the segment table, or nsegments 0 for one segment over the whole dma-buf",
			       opts->nsegments);
	ret = import_check(ctx, opts);
	if (ret)
		return ret;
	buf->size = opts->size;
	if (opts->segments) {
		ret = dmt_buf_set_segments(buf, opts->segments,
					   opts->nsegments);
	} else {
		whole = (struct devmemtcp_segment){ 0, buf->size, 0 };
		ret = dmt_buf_set_segments(buf, &whole, 1);
	}
	if (ret)
		return ret;
	/* only now: a failed import leaves the fd to the caller */
	buf->fd = opts->fd;
	buf->own_fd = !(opts->flags & DEVMEMTCP_BUF_KEEP_FD);
	return 0;
}

static const struct dmt_buf_provider import_provider = {
	.create = import_create,
};

static const struct dmt_buf_provider *const providers[] = {
	[DEVMEMTCP_PROVIDER_UDMABUF] = &dmt_udmabuf_provider,
	[DEVMEMTCP_PROVIDER_IMPORT] = &import_provider,
	[DEVMEMTCP_PROVIDER_CUDA] = &dmt_cuda_provider,
	[DEVMEMTCP_PROVIDER_DRM] = &dmt_drm_provider,
};

/*
 * The caller's options as this version's struct, every field read through
 * the caller's sz: fields an older caller's struct lacks read as zero (fd
 * as -1).  Providers get this copy, never the caller's struct.
 */
static void buf_opts_read(const struct devmemtcp_buf_opts *u,
			  struct devmemtcp_buf_opts *o)
{
#define GET(field, def) DMT_OPT_GET(u, devmemtcp_buf_opts, field, def)
	*o = (struct devmemtcp_buf_opts){
		.sz = sizeof(*o),
		.provider = GET(provider, 0),
		.flags = GET(flags, 0),
		.size = GET(size, 0),
		.fd = GET(fd, -1),
		.segments = GET(segments, NULL),
		.nsegments = GET(nsegments, 0),
		.cuda_device = GET(cuda_device, 0),
		.cuda_ptr = GET(cuda_ptr, 0),
		.cuda_chunk_size = GET(cuda_chunk_size, 0),
		.drm_path = GET(drm_path, NULL),
		.drm_fd = GET(drm_fd, -1),
		.drm_handle = GET(drm_handle, 0),
	};
#undef GET
}

DEVMEMTCP_EXPORT int devmemtcp_buf_new(struct devmemtcp_ctx *ctx,
				       const struct devmemtcp_buf_opts *uopts,
				       struct devmemtcp_buf **bufp)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_buf_opts o, *opts = &o;
	struct devmemtcp_buf *buf;
	int ret;

	if (!ctx)
		return -EINVAL;
	if (!bufp)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_buf_new: buf pointer is NULL");
	*bufp = NULL;
	if (!uopts)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_buf_new: opts is NULL: set at least .provider and .size");
	ret = DMT_OPTS_CHECK(ctx, &ctx->err, uopts, devmemtcp_buf_opts);
	if (ret)
		return ret;
	buf_opts_read(uopts, &o);
	if (opts->provider >= ARRAY_SIZE(providers) || !providers[opts->provider])
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_buf_new: unknown provider %u: use DEVMEMTCP_PROVIDER_UDMABUF, _IMPORT, _CUDA or _DRM",
			       opts->provider);
	ret = dmt_buf_alloc(ctx, (int)opts->provider, &buf);
	if (ret)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_buf_new");
	buf->ops = providers[opts->provider];
	ret = buf->ops->create(ctx, opts, buf);
	if (ret) {
		devmemtcp_buf_free(buf);
		return ret;
	}
	*bufp = buf;
	return 0;
}

DEVMEMTCP_EXPORT void devmemtcp_buf_free(struct devmemtcp_buf *buf)
{
	DMT_KEEP_ERRNO;
	dmt_buf_put(buf);
}

DEVMEMTCP_EXPORT const char *devmemtcp_buf_errmsg(const struct devmemtcp_buf *buf)
{
	DMT_KEEP_ERRNO;
	return buf ? buf->err.msg : "";
}

DEVMEMTCP_EXPORT int devmemtcp_buf_fd(const struct devmemtcp_buf *buf)
{
	DMT_KEEP_ERRNO;
	return buf ? buf->fd : -EINVAL;
}

DEVMEMTCP_EXPORT uint64_t devmemtcp_buf_size(const struct devmemtcp_buf *buf)
{
	DMT_KEEP_ERRNO;
	return buf ? buf->size : 0;
}

DEVMEMTCP_EXPORT int devmemtcp_buf_provider(const struct devmemtcp_buf *buf)
{
	DMT_KEEP_ERRNO;
	return buf ? buf->provider : -EINVAL;
}

DEVMEMTCP_EXPORT size_t devmemtcp_buf_segments(const struct devmemtcp_buf *buf,
					       const struct devmemtcp_segment **segs)
{
	DMT_KEEP_ERRNO;
	if (!buf)
		return 0;
	if (segs)
		*segs = buf->segs;
	return buf->nsegs;
}

DEVMEMTCP_EXPORT int devmemtcp_buf_addr(const struct devmemtcp_buf *buf,
					uint64_t off, uint64_t *addr)
{
	DMT_KEEP_ERRNO;
	long i;

	if (!buf || !addr)
		return -EINVAL;
	i = dmt_segments_find(buf->segs, buf->nsegs, off);
	if (i < 0)
		return -ERANGE;
	*addr = buf->segs[i].addr + (off - buf->segs[i].offset);
	return 0;
}

static int cpu_access(struct devmemtcp_buf *buf, uint64_t off, void *mem,
		      size_t len, bool write)
{
	const char *what = write ? "devmemtcp_buf_write" : "devmemtcp_buf_read";
	struct dmt_dma_buf_sync sync;
	uint64_t dir = write ? DMT_DMA_BUF_SYNC_WRITE : DMT_DMA_BUF_SYNC_READ;
	int ret = 0;

	if (!buf)
		return -EINVAL;
	if (!buf->cpu_map)
		return dmt_err(buf->ctx, &buf->err, -EOPNOTSUPP,
			       "%s: the buffer is device memory (provider %d), which the CPU cannot read: copy it on the device instead",
			       what, buf->provider);
	if (len && !mem)
		return dmt_err(buf->ctx, &buf->err, -EINVAL,
			       "%s: NULL memory for %zu bytes", what, len);
	if (off > buf->size || len > buf->size - off)
		return dmt_err(buf->ctx, &buf->err, -ERANGE,
			       "%s: bytes [%llu, +%zu) are outside the %llu-byte buffer",
			       what, (unsigned long long)off, len,
			       (unsigned long long)buf->size);
	sync.flags = DMT_DMA_BUF_SYNC_START | dir;
	if (ioctl(buf->fd, DMT_DMA_BUF_IOCTL_SYNC, &sync))
		return dmt_err(buf->ctx, &buf->err, -errno,
			       "%s: DMA_BUF_IOCTL_SYNC start failed: %s", what,
			       strerror(errno));
	if (write)
		memcpy((char *)buf->cpu_map + off, mem, len);
	else
		memcpy(mem, (char *)buf->cpu_map + off, len);
	sync.flags = DMT_DMA_BUF_SYNC_END | dir;
	if (ioctl(buf->fd, DMT_DMA_BUF_IOCTL_SYNC, &sync))
		ret = dmt_err(buf->ctx, &buf->err, -errno,
			      "%s: DMA_BUF_IOCTL_SYNC end failed: %s", what,
			      strerror(errno));
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_buf_read(struct devmemtcp_buf *buf, uint64_t off,
					void *dst, size_t len)
{
	DMT_KEEP_ERRNO;
	return cpu_access(buf, off, dst, len, false);
}

DEVMEMTCP_EXPORT int devmemtcp_buf_write(struct devmemtcp_buf *buf,
					 uint64_t off, const void *src,
					 size_t len)
{
	DMT_KEEP_ERRNO;
	return cpu_access(buf, off, (void *)src, len, true);
}
