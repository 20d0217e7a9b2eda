/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* Private: buffer objects and their providers (layer 5). */
#ifndef DEVMEMTCP_BUF_H
#define DEVMEMTCP_BUF_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"

struct devmemtcp_buf {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;
	int provider;		/* enum devmemtcp_provider */
	int fd;			/* the dma-buf */
	bool own_fd;		/* closed by devmemtcp_buf_free */
	uint64_t size;
	struct devmemtcp_segment *segs;	/* sorted by offset, disjoint */
	size_t nsegs;
	void *cpu_map;		/* host-backed buffers: mmap of fd, else NULL */
	/* Provider cleanup, called first by devmemtcp_buf_free (may be NULL). */
	void (*release)(struct devmemtcp_buf *buf);
	void *priv;		/* provider state */
};

/* A zeroed buffer with fd = -1, provider set. */
int dmt_buf_alloc(struct devmemtcp_ctx *ctx, int provider,
		  struct devmemtcp_buf **buf);

/*
 * Copy and validate a segment table: every segment non-empty, inside
 * [0, size), no overlaps (they are sorted here); gaps are allowed (offsets
 * of a gap have no address).  0 or -EINVAL with a message on err.
 */
int dmt_segments_set(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     struct devmemtcp_segment **dst, size_t *ndst,
		     const struct devmemtcp_segment *src, size_t n,
		     uint64_t size);
/* Binary search: index of the segment holding off, or -1. */
long dmt_segments_find(const struct devmemtcp_segment *segs, size_t n,
		       uint64_t off);

/* Providers.  Each fills buf->fd, size, segments, cpu_map, release, priv;
 * on failure returns a negative errno with the message on ctx->err. */
int dmt_udmabuf_new(struct devmemtcp_ctx *ctx,
		    const struct devmemtcp_buf_opts *opts,
		    struct devmemtcp_buf *buf);
int dmt_import_new(struct devmemtcp_ctx *ctx,
		   const struct devmemtcp_buf_opts *opts,
		   struct devmemtcp_buf *buf);
/* lib/cuda.c; a stub returning -EOPNOTSUPP when CUDA support is not built. */
int dmt_cuda_buf_new(struct devmemtcp_ctx *ctx,
		     const struct devmemtcp_buf_opts *opts,
		     struct devmemtcp_buf *buf);
/* lib/drm.c; a stub returning -EOPNOTSUPP without libdrm. */
int dmt_drm_buf_new(struct devmemtcp_ctx *ctx,
		    const struct devmemtcp_buf_opts *opts,
		    struct devmemtcp_buf *buf);

#endif
