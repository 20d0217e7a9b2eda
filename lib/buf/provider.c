// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The provider API (buf.h): what a provider calls to give its buffer a
 * segment table or a CPU mapping.  It calls the segment index (segmap.c)
 * and no provider, so that buf.c, which calls the providers, and the
 * providers, which call this, make no circle.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "buf.h"

static int seg_cmp(const void *a, const void *b)
{
	const struct devmemtcp_segment *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int dmt_buf_set_segments(struct devmemtcp_buf *buf,
			 const struct devmemtcp_segment *src, size_t n)
{
	const struct devmemtcp_ctx *ctx = buf->ctx;
	struct dmt_err *err = &buf->ctx->err;
	uint64_t size = buf->size;
	struct devmemtcp_segment *segs;

	if (!n || !src)
		return dmt_err(ctx, err, -EINVAL,
			       "segment table is empty: give at least one segment");
	/* bounds the table's size too: n * 24 <= size * 24 fits for any
	 * buffer a machine can map, and is checked all the same */
	if (n > size || n > SIZE_MAX / sizeof(*segs))
		return dmt_err(ctx, err, -EINVAL,
			       "segment table: %zu segments for a %llu-byte dma-buf: every segment covers at least one byte, so there are at most as many segments as bytes",
			       n, (unsigned long long)size);
	segs = dmt_malloc(n * sizeof(*segs));
	if (!segs)
		return dmt_err_nomem(ctx, err, "copying the segment table");
	memcpy(segs, src, n * sizeof(*segs));
	qsort(segs, n, sizeof(*segs), seg_cmp);
	for (size_t i = 0; i < n; i++) {
		const struct devmemtcp_segment *s = &segs[i];

		if (!s->len || s->offset >= size || s->len > size - s->offset) {
			dmt_err(ctx, err, -EINVAL,
				"segment [%#llx, +%#llx) is empty or outside the %llu-byte dma-buf: every segment must lie inside the buffer",
				(unsigned long long)s->offset,
				(unsigned long long)s->len,
				(unsigned long long)size);
			free(segs);
			return -EINVAL;
		}
		if (s->addr + s->len < s->addr) {
			dmt_err(ctx, err, -EINVAL,
				"segment at offset %#llx: address %#llx + length %#llx wraps around",
				(unsigned long long)s->offset,
				(unsigned long long)s->addr,
				(unsigned long long)s->len);
			free(segs);
			return -EINVAL;
		}
		if (i && segs[i - 1].offset + segs[i - 1].len > s->offset) {
			dmt_err(ctx, err, -EINVAL,
				"segments at offsets %#llx and %#llx overlap: each dma-buf offset may map to one address",
				(unsigned long long)segs[i - 1].offset,
				(unsigned long long)s->offset);
			free(segs);
			return -EINVAL;
		}
	}
	if (dmt_segmap_set(buf, segs, n)) {
		free(segs);
		return -ENOMEM;
	}
	free(buf->segs);
	buf->segs = segs;
	buf->nsegs = n;
	return 0;
}

int dmt_buf_map_cpu(struct devmemtcp_buf *buf, const char *who,
		    const char *hint)
{
	struct devmemtcp_segment seg;
	int ret;

	buf->cpu_map = mmap(NULL, buf->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			    buf->fd, 0);
	if (buf->cpu_map == MAP_FAILED) {
		ret = -errno;
		buf->cpu_map = NULL;
		return dmt_err(buf->ctx, &buf->ctx->err, ret,
			       "%s: mmap of the dma-buf failed: %s%s", who,
			       strerror(-ret), hint);
	}
	seg = (struct devmemtcp_segment){ 0, buf->size,
					  (uint64_t)(uintptr_t)buf->cpu_map };
	return dmt_buf_set_segments(buf, &seg, 1);
}
