// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * io_uring zero-copy receive for the unit tests (test builds only): a
 * zcrx handle whose kernel is the test.  Its rings are plain memory that
 * the test reads and fills as the kernel would (dmt_zcrx_fake_rings), so
 * the completion parser, the refill ring, the fragment table and the
 * sockets of zcrx.c run unchanged without io_uring.
 */
#include <stdio.h>
#include <unistd.h>

#include "buf/buf.h"
#include "core/fork.h"
#include "zcrx.h"

#if DMT_TEST_HOOKS
struct fake_mem {
	uint32_t sq_head, sq_tail, cq_head, cq_tail;
	struct dmt_io_uring_sqe sqes[DMT_ZCRX_SQ_ENTRIES];
	uint8_t cqes[256 * DMT_ZCRX_CQE_SIZE];
};

int dmt_zcrx_fake_new(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf,
		      uint32_t rq_entries, struct devmemtcp_zcrx **zp,
		      struct dmt_zcrx_fake_rings *r)
{
	struct devmemtcp_zcrx *z = dmt_calloc(1, sizeof(*z));
	struct fake_mem *m = dmt_calloc(1, sizeof(*m));
	uint8_t *base;

	if (!z || !m || !rq_entries || (rq_entries & (rq_entries - 1))) {
		free(z);
		free(m);
		return z && m ? -EINVAL : -ENOMEM;
	}
	z->ctx = ctx;
	z->ring_fd = -1;
	z->refs = 1;
	z->fork_gen = dmt_fork_gen();
	z->ifindex = 1;
	z->buf = buf;
	z->free_slot = DMT_ZCRX_NO_SLOT;
	z->st.sz = sizeof(z->st);
	snprintf(z->ifname, sizeof(z->ifname), "fake");
	pthread_mutex_init(&z->lock, NULL);
	z->fake_mem = m;
	z->sqes = m->sqes;
	z->sq_head = &m->sq_head;
	z->sq_tail = &m->sq_tail;
	z->sq_mask = z->sq_entries = DMT_ZCRX_SQ_ENTRIES;
	z->sq_mask--;
	z->cq_head = &m->cq_head;
	z->cq_tail = &m->cq_tail;
	z->cq_entries = 256;
	z->cq_mask = 255;
	z->cqes = m->cqes;
	z->area_size = buf->size;
	z->buf_size = (uint32_t)sysconf(_SC_PAGESIZE);
	z->dmabuf_area = !buf->cpu_map;
	z->rq_entries = rq_entries;
	if (dmt_zcrx_region_alloc(z)) {
		dmt_zcrx_destroy(z);
		return -ENOMEM;
	}
	/* the kernel's layout: head and tail a cache line apart, then rqes */
	base = z->region;
	z->rq_head = (uint32_t *)base;
	z->rq_tail = (uint32_t *)(base + 64);
	z->rqes = (struct dmt_zcrx_rqe *)(base + 128);
	z->enabled = true;
	z->thread = pthread_self();
	*r = (struct dmt_zcrx_fake_rings){
		.sqes = m->sqes, .sq_head = &m->sq_head, .sq_tail = &m->sq_tail,
		.sq_entries = DMT_ZCRX_SQ_ENTRIES, .cqes = m->cqes, .cq_head = &m->cq_head,
		.cq_tail = &m->cq_tail, .cq_entries = 256, .rqes = z->rqes,
		.rq_head = z->rq_head, .rq_tail = z->rq_tail,
		.rq_entries = rq_entries, .area_token = 0,
	};
	*zp = z;
	return 0;
}
#endif
