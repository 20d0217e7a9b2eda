/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * devmemtcp-emu and CUDA: what the test build's CUDA shim
 * (libdevmemtcp-emucuda.so, emucuda.c) tells the emulator when the library
 * exports GPU memory as a dma-buf, and the driver calls the emulator makes
 * to write received payload there (and read it for devmem TX).  Also the
 * driver ABI of cuMemcpy2DAsync, which lib/buf/cuda.h does not need.
 */
#ifndef DEVMEMTCP_EMU_CUDA_H
#define DEVMEMTCP_EMU_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* CUDA_MEMCPY2D (cuda.h, driver API) */
struct emu_memcpy2d {
	size_t srcXInBytes, srcY;
	int srcMemoryType;
	const void *srcHost;
	unsigned long long srcDevice;
	void *srcArray;
	size_t srcPitch;
	size_t dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	unsigned long long dstDevice;
	void *dstArray;
	size_t dstPitch;
	size_t WidthInBytes, Height;
};

#define EMU_CU_MEMORYTYPE_HOST 1
#define EMU_CU_MEMORYTYPE_DEVICE 2

/* The real driver's entry points (CUresult is an int). */
struct emu_cuda_ops {
	int (*ctx_push)(void *ctx);
	int (*ctx_pop)(void **ctx);
	int (*stream_create)(void **s, unsigned int flags);
	int (*stream_sync)(void *s);
	int (*host_alloc)(void **p, size_t n, unsigned int flags);
	int (*htod_async)(unsigned long long d, const void *s, size_t n, void *st);
	int (*dtoh_async)(void *d, unsigned long long s, size_t n, void *st);
	int (*copy2d_async)(const struct emu_memcpy2d *c, void *st);
	/* cuMemcpyBatchAsync (CUDA >= 12.8), NULL without: the 13.0
	 * signature, or with batch_fail_idx the 12.8 one (size_t *failIdx
	 * before the stream) */
	void *batch_async;
	int batch_fail_idx;
	/* the scatter kernel (emu-scatter.cu) and its device staging */
	int (*mem_alloc)(unsigned long long *d, size_t n);
	int (*mem_free)(unsigned long long d);
	int (*module_load)(void **mod, const void *image);
	int (*module_fn)(void **fn, void *mod, const char *name);
	int (*launch)(void *fn, unsigned int gx, unsigned int gy, unsigned int gz,
		      unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
		      void *st, void **params, void **extra);
};

/* CUmemcpyAttributes */
struct emu_memcpy_attr {
	int srcAccessOrder;
	int srcLocType, srcLocId;
	int dstLocType, dstLocId;
	unsigned int flags;
};

#define EMU_CU_MEMCPY_SRC_ACCESS_ORDER_STREAM 1
#define EMU_CU_MEM_LOCATION_TYPE_DEVICE 1
#define EMU_CU_MEM_LOCATION_TYPE_HOST 2

typedef int (*emu_batch13_fn)(unsigned long long *dsts, unsigned long long *srcs, size_t *sizes,
			      size_t count, struct emu_memcpy_attr *attrs, size_t *attr_idx,
			      size_t nattrs, void *st);
typedef int (*emu_batch128_fn)(unsigned long long *dsts, unsigned long long *srcs, size_t *sizes,
			       size_t count, struct emu_memcpy_attr *attrs, size_t *attr_idx,
			       size_t nattrs, size_t *fail_idx, void *st);

/* The scatter kernel's table: where each piece goes (emu-scatter.cu); its
 * parameters: (table, count, staging, dma-buf), device addresses but the
 * unsigned int count. */
struct emu_scatter_desc {
	uint64_t dst;		/* dma-buf offset */
	uint32_t src;		/* offset in the device staging */
	uint32_t len;
};

/*
 * The shim calls this (found with dlsym in the preloaded emulator) after
 * cuMemGetHandleForAddressRange gave fd for [dptr, dptr + size) of the
 * context ctx: the emulator finds the memory behind that dma-buf by its
 * inode from then on.
 */
typedef void (*emu_cuda_export_fn)(int fd, unsigned long long dptr, size_t size,
				   void *ctx, const struct emu_cuda_ops *ops);
#define EMU_CUDA_EXPORT_SYM "devmemtcp_emu_cuda_export"

#endif
