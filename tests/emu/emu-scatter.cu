// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The emulated devmem NIC's scatter kernel (a test tool; emu-mem.c):
 * received payload arrives in GPU memory in one host-to-device copy, into
 * the emulator's device staging, with a table of where each piece goes;
 * this kernel puts every piece at its place in the bound dma-buf.  Each
 * piece's staging address is the same as its destination's modulo 16, so
 * that all but the bytes up to the first 16-byte boundary and after the
 * last move 16 at a time.
 *
 * The build does not compile it for a GPU: emu-scatter-ptx.py turns it
 * into the PTX text of emu-scatter-ptx.h (nvcc, by hand), which the
 * emulator loads with cuModuleLoadData, and the emu suite checks that the
 * header is this source's PTX and that ptxas assembles it
 * (emu-scatter-ptx).  The fake driver (tests/lib/fakecuda) runs this
 * same source on the CPU, a thread at a time: it defines uint4 and the
 * thread and block indexes first.
 */
#ifdef __CUDACC__
#define EMU_SCATTER_FN extern "C" __global__
#else
#define EMU_SCATTER_FN static
#endif
#include <stdint.h>

#include "emu-cuda.h"

/* Blocks take pieces in turn (grid-stride over the n pieces), the threads
 * of a block share a piece's bytes. */
EMU_SCATTER_FN void dmt_emu_scatter(const struct emu_scatter_desc *d, unsigned int n,
				    const unsigned char *src, unsigned char *dst)
{
	for (unsigned int i = blockIdx.x; i < n; i += gridDim.x) {
		const unsigned char *s = src + d[i].src;
		unsigned char *t = dst + d[i].dst;
		unsigned int len = d[i].len, head, body, k;

		head = (16 - (unsigned int)((uintptr_t)t & 15)) & 15;
		if (head > len || (((uintptr_t)s ^ (uintptr_t)t) & 15))
			head = len;	/* short, or not congruent: bytes */
		body = (len - head) / 16;
		for (k = threadIdx.x; k < head; k += blockDim.x)
			t[k] = s[k];
		for (k = threadIdx.x; k < body; k += blockDim.x)
			((uint4 *)(t + head))[k] = ((const uint4 *)(s + head))[k];
		for (k = head + body * 16 + threadIdx.x; k < len; k += blockDim.x)
			t[k] = s[k];
	}
}
