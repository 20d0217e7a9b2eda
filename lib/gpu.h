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

/* The embedded fatbin (generated from lib/gather.cu); absent without nvcc. */
extern const unsigned char dmt_gather_fatbin[];
extern const size_t dmt_gather_fatbin_size;

/* Tests: queue a kernel that spins for ns nanoseconds on stream. */
int dmt_gpu_spin(struct devmemtcp_gpu *gpu, void *stream, uint64_t ns);
/* Tests and benchmarks: the driver API table of gpu. */
const struct dmt_cuda *dmt_gpu_cuda(const struct devmemtcp_gpu *gpu);

#endif
