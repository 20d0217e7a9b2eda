// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
//
// Gather kernels of the gpu layer: copy scattered fragments into packed
// destinations.  Built by nvcc into a fatbin that is embedded in the library
// and loaded with cuModuleLoadData (lib/gpu/gpu.c); the layouts they share with
// the host are in gather_abi.h.
//
// Three ways in: dmt_gather reads a launch's descriptors from a pinned slot
// (lib/gpu/gpu_launch.c); dmt_gather_inline<N> from its own kernel parameter
// (receive-sized gathers: nothing to fetch over PCIe first); and
// dmt_gather_persist stays resident and takes jobs from slots announced by
// stream memory operations (lib/gpu/gpu_persist.c).  All cut a batch into warps
// as struct dmt_gather_args says: per descriptors a warp (large batches:
// each lane takes one descriptor, then the warp copies them one after
// another) or split warps a descriptor (small batches: each warp a 16-byte
// aligned slice of one fragment, so few fragments still keep many SMs
// busy).  Descriptors in memory are first staged in shared memory by the
// whole block, one coalesced read over PCIe: a warp never fetches a
// descriptor by itself, so splitting costs no extra PCIe round trips.
//
// A fragment is copied with 16-byte stores to the destination after a head
// of up to 15 bytes; when the source is then not 16-byte aligned too, every
// lane loads the aligned 16-byte word under its chunk, takes the following
// word from the next lane (__shfl_sync) and realigns the pair with funnel
// shifts.  No byte loop runs for more than 15 bytes per fragment end, so a
// misaligned fragment moves as fast as an aligned one.
//
// Reading whole aligned words can touch up to 15 bytes before and after a
// fragment (or a slice of it); those bytes lie in the same 16-byte word as
// fragment bytes, so in the same page, and are never written.

#include <stdint.h>

#include "gather_abi.h"
#include "gather_index.h"

#define DMT_FULL 0xffffffffu
#define DMT_UNROLL 4		/* shifted rows: 32 x 4 x 16 B = 2 KiB */
#define DMT_UNROLL_ALIGNED 4	/* aligned rows too (8: 104 registers) */

static __device__ __forceinline__ uint4 shfl_next(uint4 v, unsigned int lane)
{
	unsigned int from = (lane + 1) & 31;
	uint4 r;

	r.x = __shfl_sync(DMT_FULL, v.x, from);
	r.y = __shfl_sync(DMT_FULL, v.y, from);
	r.z = __shfl_sync(DMT_FULL, v.z, from);
	r.w = __shfl_sync(DMT_FULL, v.w, from);
	return r;
}

// Bytes [4Q + sh/8, 4Q + sh/8 + 16) of the 32-byte pair (a, b).
template <int Q>
static __device__ __forceinline__ uint4 realign(uint4 a, uint4 b,
						unsigned int sh)
{
	const unsigned int w[8] = { a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w };
	uint4 r;

	r.x = __funnelshift_r(w[Q + 0], w[Q + 1], sh);
	r.y = __funnelshift_r(w[Q + 1], w[Q + 2], sh);
	r.z = __funnelshift_r(w[Q + 2], w[Q + 3], sh);
	r.w = __funnelshift_r(w[Q + 3], w[Q + 4], sh);
	return r;
}

static __device__ __forceinline__ void body_aligned(const uint4 *s, uint4 *d,
						    unsigned int nch,
						    unsigned int lane)
{
	for (unsigned int base = 0; base < nch;
	     base += 32 * DMT_UNROLL_ALIGNED) {
		uint4 w[DMT_UNROLL_ALIGNED];

#pragma unroll
		for (int u = 0; u < DMT_UNROLL_ALIGNED; u++) {
			unsigned int j = base + u * 32 + lane;

			if (j < nch)
				w[u] = s[j];
		}
#pragma unroll
		for (int u = 0; u < DMT_UNROLL_ALIGNED; u++) {
			unsigned int j = base + u * 32 + lane;

			if (j < nch)
				d[j] = w[u];
		}
	}
}

// Chunk j of the output is realign(s[j], s[j + 1]); s is the aligned word
// under the first source byte, so words 0..nch are read.
template <int Q>
static __device__ __forceinline__ void body_shift(const uint4 *s, uint4 *d,
						  unsigned int nch,
						  unsigned int sh,
						  unsigned int lane)
{
	for (unsigned int base = 0; base < nch; base += 32 * DMT_UNROLL) {
		uint4 w[DMT_UNROLL];
		uint4 extra = make_uint4(0, 0, 0, 0);
		unsigned int je = base + 32 * DMT_UNROLL;

#pragma unroll
		for (int u = 0; u < DMT_UNROLL; u++) {
			unsigned int j = base + u * 32 + lane;

			w[u] = make_uint4(0, 0, 0, 0);
			if (j <= nch)
				w[u] = s[j];
		}
		if (lane == 0 && je <= nch)
			extra = s[je];	// next round's lane 0 word: keep cached
#pragma unroll
		for (int u = 0; u < DMT_UNROLL; u++) {
			unsigned int j = base + u * 32 + lane;
			// Lane 31 needs the word after its own: lane 0's word
			// of the next row, so lane 0 sends that one.
			uint4 send = w[u];
			uint4 next;

			if (lane == 0)
				send = u + 1 < DMT_UNROLL ? w[(u + 1) % DMT_UNROLL]
							  : extra;
			next = shfl_next(send, lane);
			if (j < nch)
				d[j] = realign<Q>(w[u], next, sh);
		}
	}
}

// Every load of a fragment's first row (head and tail bytes included) is
// issued before its first store: stores may alias later loads as far as
// the compiler knows, so a load placed after a store waits for it, and a
// fragment would cost several memory round trips instead of one.
static __device__ __forceinline__ void copy_frag(unsigned long long src,
						 unsigned long long dst,
						 unsigned int len,
						 unsigned int lane)
{
	const unsigned char *s = (const unsigned char *)src;
	unsigned char *d = (unsigned char *)dst;
	unsigned int head, nch, tail, r, sh;
	unsigned char hb = 0, tb = 0;

	if (len < 64) {
		unsigned char b0 = 0, b1 = 0;

		if (lane < len)
			b0 = s[lane];
		if (lane + 32 < len)
			b1 = s[lane + 32];
		if (lane < len)
			d[lane] = b0;
		if (lane + 32 < len)
			d[lane + 32] = b1;
		return;
	}
	head = (16 - (unsigned int)(dst & 15)) & 15;
	nch = (len - head) >> 4;
	tail = (len - head) & 15;
	if (lane < head)
		hb = s[lane];
	if (lane < tail)
		tb = s[head + 16 * nch + lane];
	s += head;
	r = (unsigned int)((unsigned long long)s & 15);
	sh = 8 * (r & 3);
	s -= r;
	switch (r ? 1 + (r >> 2) : 0) {
	case 0:
		body_aligned((const uint4 *)s, (uint4 *)(d + head), nch, lane);
		break;
	case 1:
		body_shift<0>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	case 2:
		body_shift<1>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	case 3:
		body_shift<2>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	default:
		body_shift<3>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	}
	if (lane < head)
		d[lane] = hb;
	if (lane < tail)
		d[head + 16 * nch + lane] = tb;
}

// Destination tables of launches with ndst > 1 (dynamic shared memory).
extern __shared__ struct dmt_gather_dst dmt_sdst[];

// Where a table is read from: memory (pinned host or device memory, with
// ld.global.cv: a slot is rewritten for every launch, so never from a
// stale cache line), or the kernel parameter itself (inline launches).
enum { DESC_GLOBAL, DESC_PARAM };

template <int SRC>
static __device__ __forceinline__ uint4 load16(const void *p)
{
	if (SRC == DESC_GLOBAL)
		return __ldcv((const uint4 *)p);
	return *(const uint4 *)p;
}

// Slice part of split of descriptor v (dmt_slice: a 16-byte multiple of
// it); output positions go where dmt_out_addr says, through the
// destination table staged in shared memory when there is one.
static __device__ __forceinline__ void
copy_slice(uint4 v, const struct dmt_gather_dst *sdst, unsigned int ndst,
	   unsigned long long bias, unsigned int split, unsigned int part,
	   unsigned int lane)
{
	uint64_t off;
	const unsigned int len = dmt_slice(v.z, split, part, &off);

	if (!len)
		return;
	copy_frag(((unsigned long long)v.x |
			  (unsigned long long)v.y << 32) + off,
			 dmt_out_addr(sdst, ndst, bias, v.w) + off, len, lane);
}

// Copy the share of warp vw of a launch cut as struct dmt_gather_args
// says (dmt_warp_share); descs[i] is descriptor d0 + i (staged in shared
// memory, or the kernel parameter).  Every branch depends on vw alone, so
// the warp stays converged for the shuffles of copy_frag.
static __device__ __forceinline__ void
gather_warp(const struct dmt_gather_desc *descs, unsigned int d0,
	    const struct dmt_gather_dst *sdst, unsigned int n,
	    unsigned int ndst, unsigned long long bias, unsigned int per,
	    unsigned int split, unsigned int vw, unsigned int lane)
{
	unsigned long long my_src = 0, my_dst = 0;
	unsigned int my_len = 0;
	uint32_t first, part;
	const unsigned int cnt = dmt_warp_share(vw, n, per, split, &first, &part);

	if (!cnt)
		return;
	if (split > 1) {
		// one address for the whole warp: one request
		copy_slice(*(const uint4 *)(descs + first - d0), sdst, ndst,
			   bias, split, part, lane);
		return;
	}
	if (lane < cnt) {
		const uint4 v = *(const uint4 *)(descs + first - d0 + lane);

		my_src = (unsigned long long)v.x | (unsigned long long)v.y << 32;
		my_len = v.z;
		my_dst = dmt_out_addr(sdst, ndst, bias, v.w);
	}
	for (unsigned int k = 0; k < cnt; k++) {
		unsigned long long s = __shfl_sync(DMT_FULL, my_src, k);
		unsigned long long d = __shfl_sync(DMT_FULL, my_dst, k);
		unsigned int l = __shfl_sync(DMT_FULL, my_len, k);

		copy_frag(s, d, l, lane);
	}
}

// Stage a launch's destination table in shared memory (ndst > 1).
template <int SRC>
static __device__ __forceinline__ void
stage_dsts(struct dmt_gather_dst *sdst, const struct dmt_gather_dst *dsts,
	   unsigned int ndst)
{
	for (unsigned int i = threadIdx.x; i < ndst; i += blockDim.x) {
		const uint4 v = load16<SRC>(dsts + i);

		sdst[i].start = (unsigned long long)v.x |
				(unsigned long long)v.y << 32;
		sdst[i].bias = (unsigned long long)v.z |
			       (unsigned long long)v.w << 32;
	}
	__syncthreads();
}

// A block's descriptors, staged from memory.
__shared__ uint4 dmt_sdesc[DMT_STAGE_MAX];

// Stage descriptors [d0, d1) of descs (at most DMT_STAGE_MAX), one
// 16-byte load a thread: the block's whole share in one coalesced read
// instead of one read over PCIe per warp (or per warp of a split).
static __device__ __forceinline__ void
stage_descs(const struct dmt_gather_desc *descs, unsigned int d0,
	    unsigned int d1)
{
	for (unsigned int i = threadIdx.x; d0 + i < d1; i += blockDim.x)
		dmt_sdesc[i] = __ldcv((const uint4 *)(descs + d0 + i));
	__syncthreads();
}

// The launch's fence (gather_abi.h), by every block once all its warps
// are done: their loads have returned (each fed a store), so the block has
// read every fragment byte it will.  All threads of the block call it.
static __device__ __forceinline__ void
fence_signal(const struct dmt_gather_fence &f)
{
	if (!f.word)
		return;
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned int *cnt = (unsigned int *)f.cnt;
		const unsigned int blocks = gridDim.x * gridDim.y;

		__threadfence();
		if (atomicAdd(cnt, 1u) == blocks - 1) {
			*(volatile unsigned int *)cnt = 0;	// for the word's next use
			__threadfence_system();
			*(volatile unsigned int *)f.word = f.seq;
		}
	}
}

// Programmatic dependent launch (sm_90 and later; no-ops before).  A
// gather launched with it (gpu_launch.c) may start while the kernel before
// it on the stream still runs: its blocks load their descriptors (from the
// parameter, or over PCIe from a pinned slot that the CPU filled before
// the launch), then wait (griddepcontrol.wait) until every earlier grid
// has completed and its writes are visible, and only then touch the
// fragments or the destinations.  Every gather lets the next one start as
// soon as all its own blocks are running, so back-to-back gathers overlap
// one's launch and descriptor loads with the previous one's copying.  A
// kernel launched without the attribute returns from the wait at once.
static __device__ __forceinline__ void pdl_allow_next(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

static __device__ __forceinline__ void pdl_wait_previous(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The warps of one block, vw0 onwards, of a launch whose descriptors and
// destinations are in memory.
static __device__ __forceinline__ void
gather_block(const struct dmt_gather_desc *descs,
	     const struct dmt_gather_dst *sdst, unsigned int n,
	     unsigned int ndst, unsigned long long bias, unsigned int per,
	     unsigned int split, unsigned int vw0)
{
	const unsigned int warps = blockDim.x >> 5;
	unsigned int d0, d1;

	dmt_warp_range(vw0, warps, n, per, split, &d0, &d1);
	stage_descs(descs, d0, d1);
	gather_warp((const struct dmt_gather_desc *)dmt_sdesc, d0, sdst, n,
		    ndst, bias, per, split, vw0 + (threadIdx.x >> 5),
		    threadIdx.x & 31);
}

// One launch per batch, descriptors in a pinned slot (or in device memory
// with DEVMEMTCP_GPU_DESC_COPY).  Plain loads and stores measured faster
// than streaming hints (.cs) on an H200 for every size distribution
// (bench/results/gather-h200.md).
// Launched with programmatic dependence (pdl_wait_previous below), it
// reads its descriptors over PCIe while the kernel before it finishes.
extern "C" __global__ void __launch_bounds__(256)
dmt_gather(const struct dmt_gather_desc *descs,
	   const struct dmt_gather_dst *dsts, const struct dmt_gather_args a,
	   const struct dmt_gather_fence f)
{
	const unsigned int vw0 = blockIdx.x * (blockDim.x >> 5);
	unsigned int d0, d1;

	pdl_allow_next();
	if (a.ndst > 1)
		stage_dsts<DESC_GLOBAL>(dmt_sdst, dsts, a.ndst);
	dmt_warp_range(vw0, blockDim.x >> 5, a.n, a.per, a.split, &d0, &d1);
	stage_descs(descs, d0, d1);
	pdl_wait_previous();
	gather_warp((const struct dmt_gather_desc *)dmt_sdesc, d0, dmt_sdst,
		    a.n, a.ndst, a.bias, a.per, a.split,
		    vw0 + (threadIdx.x >> 5), threadIdx.x & 31);
	fence_signal(f);
}

// ---- inline launches ------------------------------------------------------

// 16-byte aligned: lanes load descriptors as uint4 from the parameter.
template <unsigned int N>
struct __align__(16) dmt_inline_param {
	struct dmt_gather_args a;
	struct dmt_gather_fence f;
	struct dmt_gather_dst dst[DMT_INLINE_DST_MAX];
	struct dmt_gather_desc desc[N];
};

static_assert(offsetof(dmt_inline_param<16>, desc) == DMT_INLINE_HDR,
	      "inline header size");
static_assert(sizeof(struct dmt_gather_args) == 24, "dmt_gather_args");
static_assert(sizeof(struct dmt_gather_fence) == 24, "dmt_gather_fence");
static_assert(sizeof(dmt_inline_param<16>) == DMT_INLINE_HDR + 16 * 16,
	      "inline parameter size");
static_assert(sizeof(struct dmt_persist_dev) == 128, "dmt_persist_dev");
static_assert(sizeof(struct dmt_persist_host) == 128, "dmt_persist_host");
static_assert(sizeof(struct dmt_persist_job) == 64, "dmt_persist_job");

// The parameter is read where the launch put it (__grid_constant__: no
// per-thread copy), through the constant cache.  With a two-dimensional
// grid (split > 1) the warp's descriptor comes from its block's place, so
// its load is issued beside those of the arguments rather than after them:
// one round trip to the constant bank less before the first byte moves.
template <unsigned int N>
static __device__ __forceinline__ void
gather_inline(const dmt_inline_param<N> &p)
{
	const unsigned int warps = blockDim.x >> 5, warp = threadIdx.x >> 5;
	const unsigned int d = blockIdx.x * warps + warp;

	pdl_allow_next();
	if (gridDim.y > 1) {
		const uint4 v = *(const uint4 *)&p.desc[min(d, N - 1)];

		if (p.a.ndst > 1)
			stage_dsts<DESC_PARAM>(dmt_sdst, p.dst, p.a.ndst);
		pdl_wait_previous();
		if (d < p.a.n)
			copy_slice(v, dmt_sdst, p.a.ndst, p.a.bias, gridDim.y,
				   blockIdx.y, threadIdx.x & 31);
		fence_signal(p.f);
		return;
	}
	if (p.a.ndst > 1)
		stage_dsts<DESC_PARAM>(dmt_sdst, p.dst, p.a.ndst);
	pdl_wait_previous();
	gather_warp(p.desc, 0, dmt_sdst, p.a.n, p.a.ndst, p.a.bias, p.a.per,
		    p.a.split, d, threadIdx.x & 31);
	fence_signal(p.f);
}

#define DMT_INLINE_KERNEL(N)                                                   \
	extern "C" __global__ void __launch_bounds__(256)                     \
	dmt_gather_inline##N(const __grid_constant__ dmt_inline_param<N> p)   \
	{                                                                      \
		gather_inline<N>(p);                                           \
	}
DMT_INLINE_KERNEL(16)
DMT_INLINE_KERNEL(64)
DMT_INLINE_KERNEL(256)
// over 4 KiB of parameters: CUDA 12.1 and later.  The driver copies the
// whole parameter at each launch: steps of 256 descriptors above 256 keep
// that copy within 4 KiB of what the launch carries
DMT_INLINE_KERNEL(512)
DMT_INLINE_KERNEL(768)
DMT_INLINE_KERNEL(1024)

// ---- the persistent kernel -------------------------------------------------

static __device__ __forceinline__ unsigned long long globaltimer(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// Block 0, idle: stop before job s unless a gather announced it.  The
// host announces a job before it queues its go word and then reads
// exiting; this block writes exiting and then reads announced.  With a
// sequentially consistent fence between each write and read, at least one
// of the two sees the other: either this block sees the job and stays, or
// the host sees that the kernel may be stopping and waits for the outcome
// (exiting cleared, or exited set) before it queues the go word.
static __device__ bool try_stop(const struct dmt_persist_params &p,
				struct dmt_persist_dev *dev,
				volatile struct dmt_persist_host *h,
				unsigned int s)
{
	unsigned int a, req;

	h->exiting = (unsigned long long)p.gen << 32 | s;
	__threadfence_system();		// fence.sc.sys
	a = h->announced;
	req = h->stop_req;
	if (!req && (int)(a - s) >= 0) {
		h->exiting = 0;
		__threadfence_system();
		return false;
	}
	*(volatile unsigned long long *)&dev->stop =
		(unsigned long long)p.gen << 32 | s;
	__threadfence_system();
	return true;
}

// Thread 0 of each block: wait for job s's go word, or for the stop of
// this generation before job s (a block behind block 0 still takes the
// jobs before the stop: they were announced).  Returns 1 to stop.
static __device__ unsigned int wait_job(const struct dmt_persist_params &p,
					struct dmt_persist_dev *dev,
					volatile unsigned long long *go,
					volatile struct dmt_persist_host *h,
					unsigned int s, unsigned long long *gp)
{
	volatile unsigned long long *stop =
		(volatile unsigned long long *)&dev->stop;
	unsigned long long t0 = globaltimer();
	unsigned int ns = 32, polls = 0;

	for (;;) {
		unsigned long long g;

		if (DMT_STOPS(*stop, p.gen, s))
			return 1;
		g = go[s & (p.nslots - 1)];
		if (DMT_GO_SEQ(g) == DMT_GO_SEQ(s)) {
			__threadfence();
			if (DMT_STOPS(*stop, p.gen, s))
				return 1;
			*gp = g;
			return 0;
		}
		if (blockIdx.x == 0 &&
		    (globaltimer() - t0 >= p.idle_ns ||
		     ((++polls & 63) == 0 && h->stop_req))) {
			if (try_stop(p, dev, h, s))
				return 1;
			t0 = globaltimer();
		}
		__nanosleep(ns);
		if (ns < 1024)
			ns <<= 1;
	}
}

// Runs until idle for p.idle_ns (or asked to stop by devmemtcp_gpu_free),
// taking jobs p.seq0, p.seq0 + 1, ... in order.  Every block takes part in
// every job (warps vw = block * warps + warp, strided by the grid); the
// last block to finish a job publishes it in dev->done (the callers'
// streams wait for it), in the host's done (the same, for streams that wait
// on host memory: a test-build knob) and slot_done (the host reuses the
// slot).  Grid: one block of 256 threads per SM; 16 KiB of dynamic shared
// memory for destination tables.
extern "C" __global__ void __launch_bounds__(256)
dmt_gather_persist(const __grid_constant__ struct dmt_persist_params p)
{
	struct dmt_gather_dst *sdst = dmt_sdst;
	__shared__ unsigned long long s_go;
	__shared__ unsigned int s_stop;
	struct dmt_persist_dev *dev = (struct dmt_persist_dev *)p.dev;
	volatile unsigned long long *go = (volatile unsigned long long *)(dev + 1);
	unsigned int *cnt = (unsigned int *)(go + p.nslots);
	volatile struct dmt_persist_host *h =
		(volatile struct dmt_persist_host *)p.host;
	volatile unsigned int *slot_done = (volatile unsigned int *)(h + 1);
	const struct dmt_persist_job *jobs =
		(const struct dmt_persist_job *)p.jobs;
	const unsigned int warps = blockDim.x >> 5;

	for (unsigned int s = p.seq0;; s++) {
		const unsigned int slot = s & (p.nslots - 1);
		const struct dmt_gather_desc *descs =
			(const struct dmt_gather_desc *)(p.desc_base +
							 slot * p.slot_stride);
		const struct dmt_gather_dst *dsts =
			(const struct dmt_gather_dst *)(p.dst_base +
							slot * p.slot_stride);
		unsigned long long g, bias = 0;
		unsigned int n, per, split, ndst = 1, nw;

		if (threadIdx.x == 0) {
			s_stop = wait_job(p, dev, go, h, s, &g);
			s_go = g;
		}
		__syncthreads();
		if (s_stop)
			break;
		g = s_go;
		n = DMT_GO_GET_N(g);
		per = DMT_GO_GET_PER(g);
		split = DMT_GO_GET_SPLIT(g);
		if (DMT_GO_GET_MULTI(g)) {
			ndst = __ldcv(&jobs[slot].ndst);
			stage_dsts<DESC_GLOBAL>(sdst, dsts, ndst);
		} else {
			bias = __ldcv(&jobs[slot].bias);
		}
		nw = (n + per - 1) / per * split;
		// the same trip count for every thread of the block (barriers)
		for (unsigned int vw0 = blockIdx.x * warps; vw0 < nw;
		     vw0 += gridDim.x * warps) {
			__syncthreads();	// the last round's descriptors are read
			gather_block(descs, sdst, n, ndst, bias, per, split, vw0);
		}
		// every thread's bytes visible to the GPU, then the block's count
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0) {
			if (atomicAdd(&cnt[slot], 1) == gridDim.x - 1) {
				atomicExch(&cnt[slot], 0);
				__threadfence();
				*(volatile unsigned int *)&dev->done = s;
				__threadfence_system();
				h->done = s;
				slot_done[slot] = s;
			}
		}
	}
	if (threadIdx.x == 0) {
		__threadfence();
		if (atomicAdd(&dev->nexit, 1) == gridDim.x - 1) {
			atomicExch(&dev->nexit, 0);
			__threadfence_system();
			h->exited = p.gen;
		}
	}
}

// ---- tests and benchmarks ----------------------------------------------------

// Spin for at least ns nanoseconds (tests: keep a stream busy so that a
// deferred release has something to wait for).
extern "C" __global__ void dmt_spin(unsigned long long ns)
{
	unsigned long long t0 = globaltimer();

	do
		__nanosleep(1000);
	while (globaltimer() - t0 < ns);
}

// Nothing (the benchmark's cost of a bare launch).
extern "C" __global__ void dmt_nop(void)
{
}

// Spin for ns nanoseconds, then write value into the 32-bit word at addr
// (device or mapped host memory) as the persistent kernel publishes a job:
// the benchmark's measure of how soon a stream waiting on such a word (or
// the CPU) sees it.
extern "C" __global__ void dmt_spin_write(unsigned long long ns,
					  unsigned long long addr,
					  unsigned int value)
{
	unsigned long long t0 = globaltimer();

	while (globaltimer() - t0 < ns)
		__nanosleep(500);
	__threadfence_system();
	*(volatile unsigned int *)addr = value;
	__threadfence_system();
}
