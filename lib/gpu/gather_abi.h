/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the memory layouts that the gather kernels (gather.cu, compiled
 * by nvcc as C++) and the host side of the gpu layer (gpu*.c) share.  One
 * header for both, so that the two can never disagree about a field; it
 * includes nothing but <stdint.h> and <stddef.h>.
 */
#ifndef DEVMEMTCP_GATHER_ABI_H
#define DEVMEMTCP_GATHER_ABI_H

#include <stddef.h>
#include <stdint.h>

/* One piece of a gather, as the kernels read it. */
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

/*
 * How one launch is cut into warps.  With split == 1, warp w copies
 * descriptors [w * per, w * per + per); with split > 1 (then per == 1),
 * split warps share descriptor w / split, each a 16-byte aligned slice of
 * it, so that a launch of few fragments still keeps many SMs busy.  An
 * inline launch with split > 1 has a two-dimensional grid instead: warp w
 * of block (x, y) copies slice y of descriptor x * warps_per_block + w, so
 * that it knows its descriptor from its block's place alone and loads it
 * at once, beside the arguments (gridDim.y == split).
 */
struct dmt_gather_args {
	uint64_t bias;		/* ndst <= 1: output position p goes to bias + p */
	uint32_t n;		/* descriptors */
	uint32_t ndst;		/* destinations (> 1: a table, staged in shared memory) */
	uint32_t per;		/* descriptors per warp, 1..32 */
	uint32_t split;		/* warps per descriptor, 1..DMT_SPLIT_MAX */
};

#define DMT_SPLIT_MAX 32u

/*
 * A fence that a launch signals when every block has finished reading its
 * fragments (devmemtcp_gpu_gather_release): each block, once all its warps
 * are done, adds one to the counter (device memory); the block that makes
 * it the launch's block count sets it back to 0 and writes seq to the word
 * (pinned host memory, mapped).  word == 0: no fence.
 */
struct dmt_gather_fence {
	uint64_t word;		/* device address of the fence word */
	uint64_t cnt;		/* device address of its block counter */
	uint32_t seq;
	uint32_t pad;
};

/* Host and device code alike (gather.cu is compiled by nvcc as C++). */
#ifdef __CUDACC__
#define DMT_HD __host__ __device__
#else
#define DMT_HD
#endif

/*
 * Launches whose descriptors are in memory (pinned slots, the persistent
 * kernel) stage a block's descriptors in shared memory first, one
 * coalesced read: warps of a block then never fetch the same descriptor
 * over PCIe twice, whatever the split.  A block of up to 8 warps covers at
 * most 8 x 32 descriptors.
 */
#define DMT_STAGE_MAX 256u

/* The descriptors [*d0, *d1) that the nwarps warps vw0, vw0 + 1, ... of a
 * launch of n descriptors cut as per and split say take. */
static inline DMT_HD void dmt_warp_range(uint32_t vw0, uint32_t nwarps,
					 uint32_t n, uint32_t per,
					 uint32_t split, uint32_t *d0,
					 uint32_t *d1)
{
	uint64_t lo, hi;

	if (split > 1) {
		lo = vw0 / split;
		hi = ((uint64_t)vw0 + nwarps - 1) / split + 1;
	} else {
		lo = (uint64_t)vw0 * per;
		hi = ((uint64_t)vw0 + nwarps) * per;
	}
	*d0 = (uint32_t)(lo < n ? lo : n);
	*d1 = (uint32_t)(hi < n ? hi : n);
}

/*
 * Inline launches carry their descriptors in the kernel parameter itself
 * (no pinned memory, no event, no read over PCIe): the header below, up to
 * DMT_INLINE_DST_MAX destinations, then N descriptors for the kernel
 * dmt_gather_inline<N> (N of DMT_INLINE_SIZES).
 */
#define DMT_INLINE_DST_MAX 8u
#define DMT_INLINE_HDR 176u	/* offset of the descriptors */
#define DMT_INLINE_NSIZES 6
#define DMT_INLINE_SIZES { 16u, 64u, 256u, 512u, 768u, 1024u }

/*
 * The persistent kernel (DEVMEMTCP_GPU_PERSISTENT).  Job j uses slot
 * j % nslots: its record below and the slot's descriptors and destinations
 * in pinned host memory.  The caller's stream writes the job's go word
 * (device memory, cuStreamWriteValue64) once the work queued before the
 * gather has finished, and waits (cuStreamWaitValue32) for the done word
 * to reach j.  The go word says enough for a warp to fetch its
 * descriptors at once: the low 24 bits of j, n, per and split.
 */
#define DMT_GO_SEQ(j) ((uint64_t)((j) & 0xffffffu))
#define DMT_GO_N_MAX 0x3fffffu	/* descriptors per job */
#define DMT_GO(j, n, per, split, multi)                                        \
	(DMT_GO_SEQ(j) | (uint64_t)(n) << 24 | (uint64_t)((per) - 1) << 46 |  \
	 (uint64_t)((split) - 1) << 51 | (uint64_t)(multi) << 56)
#define DMT_GO_GET_N(g) ((uint32_t)((g) >> 24) & DMT_GO_N_MAX)
#define DMT_GO_GET_PER(g) (((uint32_t)((g) >> 46) & 31u) + 1)
#define DMT_GO_GET_SPLIT(g) (((uint32_t)((g) >> 51) & 31u) + 1)
#define DMT_GO_GET_MULTI(g) ((uint32_t)((g) >> 56) & 1u)

struct dmt_persist_job {
	uint64_t bias;
	uint32_t ndst;
	uint32_t seq;		/* j, for debugging */
	uint64_t pad[6];	/* one 64-byte line per job */
};

/* Device memory of a persistent kernel (cuMemAlloc, zeroed once). */
struct dmt_persist_dev {
	uint32_t done;		/* last job finished (cyclic) */
	uint32_t nexit;		/* blocks of the stopping generation gone */
	/* gen << 32 | j: generation gen stops before job j.  Blocks behind
	 * block 0 still take the jobs before j: they were announced. */
	uint64_t stop;
	uint32_t pad[28];
	/* then uint64_t go[nslots] and uint32_t cnt[nslots] */
};

/* Whether a block of generation gen waiting for job s must stop. */
#define DMT_STOPS(stop, gen, s)                                                \
	((uint32_t)((stop) >> 32) == (gen) &&                                  \
	 (int32_t)((uint32_t)(s) - (uint32_t)(stop)) >= 0)

/* Pinned host memory, mapped, of a persistent kernel. */
struct dmt_persist_host {
	/* written by the CPU */
	volatile uint32_t announced;	/* last job a gather call announced */
	volatile uint32_t stop_req;	/* devmemtcp_gpu_free: stop when idle */
	uint32_t pad0[14];
	/* written by the GPU */
	volatile uint64_t exiting;	/* gen << 32 | j: block 0 may stop before j */
	volatile uint32_t exited;	/* generation whose blocks have all left */
	volatile uint32_t done;		/* last job finished (cyclic), as dev->done */
	uint32_t pad1[12];
	/* then volatile uint32_t slot_done[nslots]: last job finished there */
};

/* The kernel parameter of dmt_gather_persist. */
struct dmt_persist_params {
	uint64_t desc_base;	/* device address of slot 0's descriptors */
	uint64_t dst_base;	/* and of its destinations */
	uint64_t slot_stride;	/* bytes from one slot to the next */
	uint64_t jobs;		/* struct dmt_persist_job[nslots], mapped */
	uint64_t dev;		/* struct dmt_persist_dev */
	uint64_t host;		/* struct dmt_persist_host, mapped */
	uint64_t idle_ns;	/* stop after this long without work */
	uint32_t nslots;
	uint32_t seq0;		/* first job of this generation */
	uint32_t gen;		/* generation, from 1 */
	uint32_t pad;
};

#endif
