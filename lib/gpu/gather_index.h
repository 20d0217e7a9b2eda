/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the index arithmetic of a gather, one copy for the kernels
 * (gather.cu, compiled by nvcc as C++: __host__ __device__) and for the
 * CPU executions of a launch that the tests run (the fake libcuda's
 * kernels, tests/lib/fakecuda/kernels.c; tests/gpu/test-gather-cpu.c): which
 * descriptors a warp copies, which slice of a descriptor a warp of a
 * split copies, and where an output position goes.  What the CPU
 * executions check is then the arithmetic the GPU runs, not a copy of it.
 * Pure functions of their arguments; it includes only gather_abi.h.
 */
#ifndef DEVMEMTCP_GATHER_INDEX_H
#define DEVMEMTCP_GATHER_INDEX_H

#include "gather_abi.h"

#ifdef __CUDACC__
#define DMT_HDI __host__ __device__ __forceinline__
#else
#define DMT_HDI inline
#endif

/*
 * Device address of output position pos: bias + pos when the launch has
 * at most one destination, else through its destination table sdst
 * (sorted by start, the first at 0): the bias of the last one that
 * starts at or before pos.
 */
static DMT_HDI uint64_t dmt_out_addr(const struct dmt_gather_dst *sdst,
				     uint32_t ndst, uint64_t bias,
				     uint32_t pos)
{
	if (ndst > 1) {
		uint32_t lo = 0, hi = ndst - 1;

		while (lo < hi) {
			uint32_t mid = (lo + hi + 1) / 2;

			if (sdst[mid].start <= pos)
				lo = mid;
			else
				hi = mid - 1;
		}
		bias = sdst[lo].bias;
	}
	return bias + pos;
}

/*
 * Slice part of split of a descriptor of len bytes: a 16-byte multiple of
 * it, so that every slice keeps the source/destination alignment of the
 * whole.  Its offset in *off; returns its length, 0 when the slice lies
 * past the end (a short descriptor has fewer slices than warps).
 */
static DMT_HDI uint32_t dmt_slice(uint32_t len, uint32_t split, uint32_t part,
				  uint64_t *off)
{
	const uint64_t slice = (((uint64_t)len + split - 1) / split + 15) & ~15ull;

	*off = part * slice;
	if (*off >= len)
		return 0;
	return (uint32_t)(slice < len - *off ? slice : len - *off);
}

/*
 * What warp vw of a launch of n descriptors, cut as per and split say
 * (struct dmt_gather_args), copies.  split > 1: slice *part of descriptor
 * *first, returning 1 (0: the warp has none).  split == 1: descriptors
 * [*first, *first + count), returning count (0: none), *part 0.
 */
static DMT_HDI uint32_t dmt_warp_share(uint32_t vw, uint32_t n, uint32_t per,
				       uint32_t split, uint32_t *first,
				       uint32_t *part)
{
	*part = 0;
	if (split > 1) {
		*first = vw / split;
		*part = vw % split;
		return *first < n ? 1 : 0;
	}
	*first = vw * per;	/* 32 bits, as the kernel always had it */
	if (*first >= n)
		return 0;
	return n - *first < per ? n - *first : per;
}

#endif
