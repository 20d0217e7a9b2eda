/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the GPU layer (8), shared with lib/gather.cu and the tests.  It
 * owns devmemtcp_gpu: the gather kernels (gather.cu, embedded as a fatbin;
 * gather_none.c when built without nvcc), their streams, pinned descriptor
 * slots and events, no-copy views, and fences that hold token releases
 * back until the GPU is done with the bytes.  It may call the CUDA driver
 * table (cuda.h) and the public receive API (to defer releases on a
 * fence); it knows nothing of sockets, buffers' providers or the NIC.
 */
#ifndef DEVMEMTCP_GPU_H
#define DEVMEMTCP_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "cuda.h"
#include "internal.h"

/* One piece of a gather, as the kernel reads it (lib/gather.cu). */
struct dmt_gather_desc {
	uint64_t src;		/* device address */
	uint32_t len;
	uint32_t pos;		/* byte position in the launch's output */
};

/* A destination of a launch: output position start goes to bias + start. */
struct dmt_gather_dst {
	uint64_t start;
	uint64_t bias;
};

/* Destinations per launch (staged in 16 KiB of shared memory). */
#define DMT_GATHER_DST_MAX 1024u

/* ---- the CPU side of a gather (gpu_desc.c): no CUDA needed ---------------- */

/* Where a gather stands between launches. */
struct dmt_gather_cursor {
	size_t i;		/* next fragment */
	uint64_t foff;		/* bytes of it already placed */
	size_t di;		/* current destination */
	uint64_t doff;		/* bytes of it already filled */
};

/* One launch: room for descriptors and destinations, and what was put
 * there. */
struct dmt_gather_batch {
	struct dmt_gather_desc *desc;
	struct dmt_gather_dst *dst;
	uint32_t max_desc;
	uint32_t max_dst;
	uint32_t nd;		/* descriptors filled */
	uint32_t ndst;		/* destinations filled (>= 1) */
	uint64_t bytes;		/* output positions covered, holes included */
};

/* Output positions are 32-bit: a launch covers less than 4 GiB. */
#define DMT_GATHER_POS_MAX 0xffffffffull

/*
 * Fill b with the next launch of the gather of frags into dsts, starting
 * at *cur (zeroed for the first), and advance *cur; the gather is complete
 * when cur->i == n.  Fragments are cut where a destination ends and where
 * b is full; a linear fragment leaves a hole.  Returns 0, or a negative
 * errno with the message on err (logged through ctx): -EINVAL for a
 * fragment without a device address, -ENOSPC when the destinations are
 * too small for the fragments.  Only the fragments that b covers are
 * checked: see dmt_gather_check for the rest.
 */
int dmt_gather_build(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     struct dmt_gather_cursor *cur, struct dmt_gather_batch *b);
/* Check the fragments from *cur on as dmt_gather_build would, without
 * building anything (before queueing the first of several launches). */
int dmt_gather_check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     const struct dmt_gather_cursor *cur);

/* devmemtcp_gpu_view; with err NULL no message is kept. */
int dmt_gpu_view(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 const struct devmemtcp_frag *frags, size_t n,
		 struct devmemtcp_gpu_iov *iov, size_t max);

/* The embedded fatbin (generated from lib/gather.cu); absent without nvcc. */
extern const unsigned char dmt_gather_fatbin[];
extern const size_t dmt_gather_fatbin_size;

/* Tests: queue a kernel that spins for ns nanoseconds on stream. */
int dmt_gpu_spin(struct devmemtcp_gpu *gpu, void *stream, uint64_t ns);
/* Tests and benchmarks: the driver API table of gpu. */
const struct dmt_cuda *dmt_gpu_cuda(const struct devmemtcp_gpu *gpu);

#endif
