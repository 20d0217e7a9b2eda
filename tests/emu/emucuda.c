// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * libdevmemtcp-emucuda.so: the test build's CUDA shim for the emulated
 * devmem NIC (a test tool, never installed).  The library loads it in
 * place of libcuda.so.1 (DEVMEMTCP_LIBCUDA=.../libdevmemtcp-emucuda.so,
 * test builds only); it loads the real driver ($DEVMEMTCP_EMU_LIBCUDA,
 * default libcuda.so.1 -- the same one PyTorch or the program use) and
 * forwards every entry point the library resolves to it unchanged, by a
 * jump that keeps the caller's arguments, with two exceptions:
 *
 *   cuMemGetHandleForAddressRange: after the real export, it tells the
 *     emulator (preloaded, emu-cuda.h) which GPU memory the new dma-buf
 *     fd stands for, and the driver calls to write there; where the driver
 *     cannot export dma-bufs, a memfd of the size stands in for the
 *     dma-buf (the emulator never needs the export itself).
 *   cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED): 1 for that
 *     reason ($DEVMEMTCP_EMU_REAL_DMABUF=1 keeps the driver's answer and
 *     its refusals).
 *
 * x86-64 and arm64 only (the forwarding jumps are written in assembly).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu-cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CUDA_ERROR_STUB_LIBRARY 34

typedef int CUresult;

/* Every entry point lib/buf/cuda.h resolves (by its versioned symbol), and the
 * ones the emulator itself needs, except the two written out below. */
#define SHIM_SYMS(X)                                                                 \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)         \
	X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)                          \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)                    \
	X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuCtxSynchronize)               \
	X(cuCtxGetCurrent) X(cuPointerGetAttribute) X(cuMemGetAllocationGranularity)   \
	X(cuMemCreate) X(cuMemRelease) X(cuMemAddressReserve) X(cuMemAddressFree)      \
	X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemAlloc_v2) X(cuMemFree_v2)   \
	X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer_v2)             \
	X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyHtoDAsync_v2)                  \
	X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemcpy2DAsync_v2)          \
	X(cuMemsetD8Async) X(cuModuleLoadData) X(cuModuleUnload)                       \
	X(cuModuleGetFunction) X(cuLaunchKernel) X(cuStreamCreate)                     \
	X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuStreamQuery)                  \
	X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord) X(cuEventQuery)         \
	X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWriteValue32_v2)         \
	X(cuStreamWriteValue64_v2) X(cuStreamWaitValue32_v2) X(cuStreamBatchMemOp_v2)  \
	X(cuLaunchKernelEx) X(cuStreamIsCapturing) X(cuGraphCreate)                    \
	X(cuGraphAddKernelNode_v2) X(cuGraphInstantiateWithFlags)                      \
	X(cuGraphExecKernelNodeSetParams_v2) X(cuGraphLaunch) X(cuGraphExecDestroy)    \
	X(cuGraphDestroy)

/* An entry point the real driver lacks, or no driver. */
static CUresult missing(void)
{
	return CUDA_ERROR_STUB_LIBRARY;
}

#if defined(__x86_64__)
#define JUMP(sym) "\tjmp *real_" #sym "(%rip)\n"
#elif defined(__aarch64__)
#define JUMP(sym) "\tadrp x16, real_" #sym "\n\tldr x16, [x16, :lo12:real_" #sym "]\n\tbr x16\n"
#else
#error "emucuda.c forwards with x86-64 or arm64 jumps only"
#endif

#define TRAMPOLINE(sym)                                                              \
	__attribute__((visibility("hidden"), used)) void *real_##sym = (void *)missing; \
	__asm__(".pushsection .text\n.globl " #sym "\n.type " #sym ", @function\n"  \
		#sym ":\n" JUMP(sym) ".size " #sym ", .-" #sym "\n.popsection\n");
SHIM_SYMS(TRAMPOLINE)

static CUresult (*real_attr)(int *, int, int);
static CUresult (*real_export)(void *, unsigned long long, size_t, int, unsigned long long);
static struct emu_cuda_ops ops;

__attribute__((constructor)) static void shim_init(void)
{
	const char *name = getenv("DEVMEMTCP_EMU_LIBCUDA");
	void *h = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	void *p;

	if (!h) {
		fprintf(stderr, "devmemtcp-emucuda: %s\n", dlerror());
		return;
	}
#define RESOLVE(sym)                                                   \
	p = dlsym(h, #sym);                                            \
	if (p)                                                         \
		real_##sym = p;
	SHIM_SYMS(RESOLVE)
#undef RESOLVE
	*(void **)&real_attr = dlsym(h, "cuDeviceGetAttribute");
	*(void **)&real_export = dlsym(h, "cuMemGetHandleForAddressRange");
	*(void **)&ops.ctx_push = real_cuCtxPushCurrent_v2;
	*(void **)&ops.ctx_pop = real_cuCtxPopCurrent_v2;
	*(void **)&ops.stream_create = real_cuStreamCreate;
	*(void **)&ops.stream_sync = real_cuStreamSynchronize;
	*(void **)&ops.host_alloc = real_cuMemHostAlloc;
	*(void **)&ops.htod_async = real_cuMemcpyHtoDAsync_v2;
	*(void **)&ops.dtoh_async = real_cuMemcpyDtoHAsync_v2;
	*(void **)&ops.copy2d_async = real_cuMemcpy2DAsync_v2;
	*(void **)&ops.mem_alloc = real_cuMemAlloc_v2;
	*(void **)&ops.mem_free = real_cuMemFree_v2;
	*(void **)&ops.module_load = real_cuModuleLoadData;
	*(void **)&ops.module_fn = real_cuModuleGetFunction;
	*(void **)&ops.launch = real_cuLaunchKernel;
	ops.batch_async = dlsym(h, "cuMemcpyBatchAsync_v2");
	if (!ops.batch_async) {
		ops.batch_async = dlsym(h, "cuMemcpyBatchAsync");
		ops.batch_fail_idx = ops.batch_async != NULL;
	}
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int dev);
EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, unsigned long long p, size_t size,
					      int type, unsigned long long flags);

static int keep_real(void)
{
	const char *e = getenv("DEVMEMTCP_EMU_REAL_DMABUF");

	return e && !strcmp(e, "1");
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
	CUresult r = real_attr ? real_attr(v, attr, dev) : CUDA_ERROR_STUB_LIBRARY;

	if (!r && attr == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED && !keep_real())
		*v = 1;
	return r;
}

EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, unsigned long long p, size_t size,
					      int type, unsigned long long flags)
{
	emu_cuda_export_fn tell = (emu_cuda_export_fn)dlsym(RTLD_DEFAULT, EMU_CUDA_EXPORT_SYM);
	CUresult r = real_export ? real_export(handle, p, size, type, flags)
				 : CUDA_ERROR_STUB_LIBRARY;
	void *ctx = NULL;

	if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)
		return r;
	if (r && !keep_real()) {
		int fd = memfd_create("devmemtcp-emu-cuda-dmabuf", MFD_CLOEXEC);

		if (fd < 0 || ftruncate(fd, (off_t)size)) {
			if (fd >= 0)
				close(fd);
			return r;
		}
		*(int *)handle = fd;
		r = 0;
	}
	if (r)
		return r;
	((CUresult (*)(void **))real_cuCtxGetCurrent)(&ctx);
	if (tell)
		tell(*(int *)handle, p, size, ctx, &ops);
	else
		fprintf(stderr, "devmemtcp-emucuda: the emulator (libdevmemtcp-emu.so) is not preloaded: it cannot find this GPU memory\n");
	return 0;
}
