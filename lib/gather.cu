// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
//
// Gather kernel (layer 8): copy scattered fragments into packed
// destinations.  Built by nvcc into a fatbin that is embedded in the library
// and loaded with cuModuleLoadData (lib/gpu.c); the layout of the
// descriptors is shared with lib/gpu.h.
//
// One warp owns 32 consecutive descriptors: each lane loads one (a single
// coalesced 512-byte read, straight from pinned host memory), then the warp
// copies the 32 fragments one after another.  A fragment is copied with
// 16-byte stores to the destination after a head of up to 15 bytes; when
// the source is then not 16-byte aligned too, every lane loads the aligned
// 16-byte word under its chunk, takes the following word from the next lane
// (__shfl_sync) and realigns the pair with funnel shifts.  No byte loop runs
// for more than 15 bytes per fragment end, so a misaligned fragment moves as
// fast as an aligned one.
//
// Reading whole aligned words can touch up to 15 bytes before and after a
// fragment; those bytes lie in the same 16-byte word as fragment bytes, so in
// the same page, and are never written.

#include <stdint.h>

struct dmt_gather_desc {
	unsigned long long src;	// device address of the fragment
	unsigned int len;	// bytes
	unsigned int pos;	// byte position in this launch's output stream
};

struct dmt_gather_dst {
	unsigned long long start;	// first output position of this destination
	unsigned long long bias;	// device address = bias + pos
};

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

// CS: streaming cache hints (ld/st.global.cs), else plain accesses.
template <bool CS>
static __device__ __forceinline__ uint4 ld16(const uint4 *p)
{
	return CS ? __ldcs(p) : *p;
}

template <bool CS>
static __device__ __forceinline__ void st16(uint4 *p, uint4 v)
{
	if (CS)
		__stcs(p, v);
	else
		*p = v;
}

template <bool CS>
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
				w[u] = ld16<CS>(s + j);
		}
#pragma unroll
		for (int u = 0; u < DMT_UNROLL_ALIGNED; u++) {
			unsigned int j = base + u * 32 + lane;

			if (j < nch)
				st16<CS>(d + j, w[u]);
		}
	}
}

// Chunk j of the output is realign(s[j], s[j + 1]); s is the aligned word
// under the first source byte, so words 0..nch are read.
template <bool CS, int Q>
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
				w[u] = ld16<CS>(s + j);
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
				st16<CS>(d + j, realign<Q>(w[u], next, sh));
		}
	}
}

// Every load of a fragment's first row (head and tail bytes included) is
// issued before its first store: stores may alias later loads as far as
// the compiler knows, so a load placed after a store waits for it, and a
// fragment would cost several memory round trips instead of one.
template <bool CS>
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
		body_aligned<CS>((const uint4 *)s, (uint4 *)(d + head), nch, lane);
		break;
	case 1:
		body_shift<CS, 0>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	case 2:
		body_shift<CS, 1>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	case 3:
		body_shift<CS, 2>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	default:
		body_shift<CS, 3>((const uint4 *)s, (uint4 *)(d + head), nch, sh,
			      lane);
		break;
	}
	if (lane < head)
		d[lane] = hb;
	if (lane < tail)
		d[head + 16 * nch + lane] = tb;
}

// descs: n descriptors in output order, per (1..32) of them for each warp.
// With ndst > 1, dsts holds the destinations (sorted by start, first start
// 0) and is staged in dynamic shared memory; with ndst <= 1, every output
// byte goes to bias + pos.
template <bool CS>
static __device__ __forceinline__ void
gather(const struct dmt_gather_desc *descs, unsigned int n,
       const struct dmt_gather_dst *dsts, unsigned int ndst,
       unsigned long long bias, unsigned int per)
{
	extern __shared__ struct dmt_gather_dst sdst[];
	const unsigned int lane = threadIdx.x & 31;
	const unsigned int first =
		((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * per;
	unsigned long long my_src = 0, my_dst = 0;
	unsigned int my_len = 0, cnt;

	if (ndst > 1) {
		for (unsigned int i = threadIdx.x; i < ndst; i += blockDim.x)
			sdst[i] = dsts[i];
		__syncthreads();
	}
	if (first >= n)
		return;
	cnt = min(per, n - first);
	if (lane < cnt) {
		const uint4 v = __ldcv((const uint4 *)(descs + first + lane));
		unsigned long long b = bias;

		my_src = (unsigned long long)v.x | (unsigned long long)v.y << 32;
		my_len = v.z;
		if (ndst > 1) {
			unsigned int lo = 0, hi = ndst - 1;

			while (lo < hi) {
				unsigned int mid = (lo + hi + 1) / 2;

				if (sdst[mid].start <= v.w)
					lo = mid;
				else
					hi = mid - 1;
			}
			b = sdst[lo].bias;
		}
		my_dst = b + v.w;
	}
	for (unsigned int k = 0; k < cnt; k++) {
		unsigned long long s = __shfl_sync(DMT_FULL, my_src, k);
		unsigned long long d = __shfl_sync(DMT_FULL, my_dst, k);
		unsigned int l = __shfl_sync(DMT_FULL, my_len, k);

		copy_frag<CS>(s, d, l, lane);
	}
}

// Plain loads and stores measured faster than streaming hints (.cs) on an
// H200 for every size distribution (bench/results/gather-h200.md).
extern "C" __global__ void __launch_bounds__(256)
dmt_gather(const struct dmt_gather_desc *descs, unsigned int n,
	   const struct dmt_gather_dst *dsts, unsigned int ndst,
	   unsigned long long bias, unsigned int per)
{
	gather<false>(descs, n, dsts, ndst, bias, per);
}

// The same with streaming cache hints (DEVMEMTCP_GATHER_KERNEL, benchmark).
extern "C" __global__ void __launch_bounds__(256)
dmt_gather_cs(const struct dmt_gather_desc *descs, unsigned int n,
	      const struct dmt_gather_dst *dsts, unsigned int ndst,
	      unsigned long long bias, unsigned int per)
{
	gather<true>(descs, n, dsts, ndst, bias, per);
}

// Spin for at least ns nanoseconds (tests: keep a stream busy so that a
// deferred release has something to wait for).
extern "C" __global__ void dmt_spin(unsigned long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		__nanosleep(1000);
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
}
