/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: buffer objects (lib/buf/).  This layer owns struct
 * devmemtcp_buf: the dma-buf fd, its size, the segment table that maps
 * dma-buf offsets to device addresses, and CPU access to host-backed
 * buffers.  It makes buffers through providers, each a struct
 * dmt_buf_provider that buf.c calls: udmabuf (udmabuf.c), CUDA (cuda.c),
 * DRM (drm.c, libdrm), and in buf.c itself the import of a caller's fd.
 * A provider may call only the provider API below (dmt_buf_set_segments,
 * dmt_buf_map_cpu: provider.c), the CUDA driver table (cuda.h) and, for
 * a udmabuf, its context's table of privileged operations
 * (core/privops.h); the segment index is segmap.c.  Nothing in this
 * layer calls netdev, rx or tx, which read a buffer's fields.
 */
#ifndef DEVMEMTCP_BUF_H
#define DEVMEMTCP_BUF_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"

struct dmt_buf_provider;

/*
 * Lifetime: a reference count.  The creator holds one (devmemtcp_buf_free
 * drops it), and so does every binding and receive handle that uses the
 * buffer; the last one frees it.
 */
struct devmemtcp_buf {
	unsigned int refs;	/* atomic */
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;
	int provider;		/* enum devmemtcp_provider */
	int fd;			/* the dma-buf */
	bool own_fd;		/* closed by devmemtcp_buf_free */
	uint64_t size;
	struct devmemtcp_segment *segs;	/* sorted by offset, disjoint */
	size_t nsegs;
	void *cpu_map;		/* host-backed buffers: mmap of fd, else NULL */
	const struct dmt_buf_provider *ops;	/* NULL: made by dmt_buf_alloc */
	void *priv;		/* provider state */
	unsigned int fork_gen;	/* fork.h */
};

/* A zeroed buffer with fd = -1, provider set and no provider ops (tests
 * and callers that fill the fields themselves). */
int dmt_buf_alloc(struct devmemtcp_ctx *ctx, int provider,
		  struct devmemtcp_buf **buf);

/* Binary search: index of the segment holding off, or -1. */
long dmt_segments_find(const struct devmemtcp_segment *segs, size_t n,
		       uint64_t off);

/*
 * 0 when every segment of buf starts and ends on a multiple of page (an end
 * at the end of the buffer excepted): the NIC writes no fragment across a
 * page, so no fragment can then cross into another segment.  Else -EINVAL
 * with a message on err naming the first segment that does not; op is the
 * exported function for the message, nic_page whether page is the
 * binding's rx_page_size.
 */
int dmt_buf_check_pages(const struct devmemtcp_buf *buf, uint64_t page,
			bool nic_page, const char *op, struct dmt_err *err);

/*
 * The segment tables of the process that map neighbouring dma-buf offsets
 * to distant device addresses (segmap.c), for the GPU layer to find where
 * a fragment's bytes are.  dmt_buf_set_segments registers buf's table,
 * devmemtcp_buf_free drops it; tables that are one contiguous device range
 * are not kept.  dmt_segmap_set returns 0 or -ENOMEM (nothing changed).
 */
int dmt_segmap_set(const void *owner, const struct devmemtcp_segment *segs,
		   size_t n);
void dmt_segmap_drop(const void *owner);

/*
 * 0 when no such table exists; else a power of two g such that a device
 * range [addr, addr + len) with addr % g + len <= g lies inside one segment
 * of every table (every segment's addr and len are multiples of g).
 */
extern uint64_t dmt_segmap_grain_;
static inline uint64_t dmt_segmap_grain(void)
{
	return __atomic_load_n(&dmt_segmap_grain_, __ATOMIC_ACQUIRE);
}

/* Tables may change under a reader only between these. */
void dmt_segmap_read_lock(void);
void dmt_segmap_read_unlock(void);

/*
 * Under the read lock: where bytes [foff, foff + len) of a fragment at
 * dma-buf offset off and device address addr start (*src), and how many
 * of them are contiguous from there (*run, at least 1).  A fragment of no
 * registered table is taken as it is (addr + foff, len).  -ERANGE when
 * byte foff falls in a gap of its table (it has no device address).
 */
int dmt_segmap_run(uint64_t off, uint64_t addr, uint64_t foff, uint64_t len,
		   uint64_t *src, uint64_t *run);

/* ---- the provider API ---------------------------------------------------- */

/*
 * create fills buf->fd, own_fd, size, cpu_map (host-backed memory only) and
 * priv, and sets the segment table with dmt_buf_set_segments(); on failure
 * it returns a negative errno with the message on ctx->err, and buf.c frees
 * the buffer (calling release).  release (may be NULL) runs first in
 * devmemtcp_buf_free, also after a failed create, and frees priv.
 */
struct dmt_buf_provider {
	int (*create)(struct devmemtcp_ctx *ctx,
		      const struct devmemtcp_buf_opts *opts,
		      struct devmemtcp_buf *buf);
	void (*release)(struct devmemtcp_buf *buf);
};

extern const struct dmt_buf_provider dmt_udmabuf_provider;

/*
 * The udmabuf provider's pieces, for the privileged operations
 * (core/privops.h) that make its dma-buf: the device node
 * ($DEVMEMTCP_UDMABUF_DEV in test builds), this process's UDMABUF_CREATE
 * over a memfd of buf->size bytes (limit: the module's size_limit_mb, 0
 * unknown), a sealed memfd, and the CPU mapping of the memfd as the
 * buffer's one segment.  Messages on ctx->err.
 */
const char *dmt_udmabuf_dev(void);
int dmt_udmabuf_local(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, bool huge,
		      const char *dev, long limit);
int dmt_udmabuf_memfd(struct devmemtcp_ctx *ctx, uint64_t size, bool huge);
int dmt_udmabuf_map(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf, int memfd);
extern const struct dmt_buf_provider dmt_cuda_provider;
extern const struct dmt_buf_provider dmt_drm_provider;	/* drm.c */

/*
 * Validate and copy buf's segment table (buf->size set first): every
 * segment non-empty, inside [0, size), no overlaps (they are sorted here);
 * gaps are allowed (offsets of a gap have no address).  0, -ENOMEM, or
 * -EINVAL with a message on buf->ctx->err.
 */
int dmt_buf_set_segments(struct devmemtcp_buf *buf,
			 const struct devmemtcp_segment *segs, size_t n);

/*
 * Map the whole dma-buf (buf->fd, buf->size) for the CPU, shared and
 * writable, and make that mapping the device address of every offset: one
 * segment.  For memory the CPU and the device see at the same address
 * (host memory; DRM drivers without a GPU address space, such as vgem).
 * 0, or a negative errno with the message on buf->ctx->err: "<who>: mmap
 * of the dma-buf failed: <strerror><hint>" when mmap fails.
 */
int dmt_buf_map_cpu(struct devmemtcp_buf *buf, const char *who,
		    const char *hint);

#endif
