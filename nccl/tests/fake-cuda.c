// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * libcuda.so.1 for test-nccl-net --cuda: the driver calls the plugin makes,
 * over host memory.  Every pointer is "GPU memory" of device 0 and a copy
 * is a memcpy, made when its stream is synchronised.
 *
 * It models the state the plugin runs in under NCCL: the application has
 * queued work on the legacy default stream that waits for the collective
 * (PyTorch's current stream waits for the NCCL stream's event), and the
 * collective's kernel waits for the bytes the plugin copies.  Work on the
 * legacy default stream, or on a blocking stream (which synchronises with
 * it), would never start: such a call fails at once with a message instead
 * of hanging.  Copies also need a context current on the calling thread.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_ILLEGAL_STATE 401
#define CUDA_ERROR_UNKNOWN 999
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define MAX_COPIES 64

struct CUctx_st {
	int dev;
};

struct copy {
	void *dst;
	const void *src;
	size_t n;
};

struct CUstream_st {
	unsigned int flags;
	int ncopies;
	struct copy copies[MAX_COPIES];
};

/* the driver's entry points, as the plugin resolves them */
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, CUdevice d);
CUresult cuCtxPushCurrent_v2(struct CUctx_st *ctx);
CUresult cuCtxPopCurrent_v2(struct CUctx_st **ctx);
CUresult cuCtxGetCurrent(struct CUctx_st **ctx);
CUresult cuCtxGetDevice(CUdevice *d);
CUresult cuPointerGetAttribute(void *out, int attr, CUdeviceptr p);
CUresult cuGetErrorName(CUresult r, const char **name);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n,
			      struct CUstream_st *s);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n,
			      struct CUstream_st *s);
CUresult cuStreamSynchronize(struct CUstream_st *s);
CUresult cuStreamCreate(struct CUstream_st **s, unsigned int flags);
CUresult cuStreamDestroy_v2(struct CUstream_st *s);
CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p,
				      unsigned int flags);

static struct CUctx_st primary = { 0 };
/* both ranks of the harness may share a stream */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* this thread's context stack (the plugin pushes one at a time) */
static __thread struct CUctx_st *stack[8];
static __thread int depth;

EXPORT CUresult cuInit(unsigned int flags)
{
	return flags ? CUDA_ERROR_INVALID_VALUE : 0;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*d = ordinal;
	return 0;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*ctx = &primary;
	return 0;
}

EXPORT CUresult cuCtxPushCurrent_v2(struct CUctx_st *ctx)
{
	if (!ctx || depth == 8)
		return CUDA_ERROR_INVALID_VALUE;
	stack[depth++] = ctx;
	return 0;
}

EXPORT CUresult cuCtxPopCurrent_v2(struct CUctx_st **ctx)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*ctx = stack[--depth];
	return 0;
}

EXPORT CUresult cuCtxGetCurrent(struct CUctx_st **ctx)
{
	*ctx = depth ? stack[depth - 1] : NULL;
	return 0;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = stack[depth - 1]->dev;
	return 0;
}

EXPORT CUresult cuPointerGetAttribute(void *out, int attr, CUdeviceptr p)
{
	if (attr != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL || !p)
		return CUDA_ERROR_INVALID_VALUE;
	*(int *)out = 0;
	return 0;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **name)
{
	switch (r) {
	case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
	case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
	case CUDA_ERROR_ILLEGAL_STATE: *name = "CUDA_ERROR_ILLEGAL_STATE"; break;
	default: *name = "CUDA_ERROR_UNKNOWN"; break;
	}
	return 0;
}

/* Work on the legacy default stream waits for the kernel that waits for
 * this very work. */
static CUresult legacy(const char *fn)
{
	fprintf(stderr,
		"fake libcuda: %s on the legacy default stream (or a blocking stream) would wait for work queued ahead of it, which waits for the collective this copy feeds: deadlock\n",
		fn);
	return CUDA_ERROR_ILLEGAL_STATE;
}

static CUresult copy_check(const char *fn, struct CUstream_st *s)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!s || !(s->flags & CU_STREAM_NON_BLOCKING))
		return legacy(fn);
	return 0;
}

static CUresult enqueue(struct CUstream_st *s, void *dst, const void *src,
			size_t n)
{
	CUresult r = 0;

	pthread_mutex_lock(&lock);
	if (s->ncopies == MAX_COPIES)
		r = CUDA_ERROR_UNKNOWN;
	else
		s->copies[s->ncopies++] = (struct copy){ dst, src, n };
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	(void)dst; (void)src; (void)n;
	return depth ? legacy("cuMemcpyHtoD_v2") : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	(void)dst; (void)src; (void)n;
	return depth ? legacy("cuMemcpyDtoH_v2") : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
				     size_t n, struct CUstream_st *s)
{
	CUresult r = copy_check("cuMemcpyHtoDAsync_v2", s);

	return r ? r : enqueue(s, (void *)(uintptr_t)dst, src, n);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n,
				     struct CUstream_st *s)
{
	CUresult r = copy_check("cuMemcpyDtoHAsync_v2", s);

	return r ? r : enqueue(s, dst, (const void *)(uintptr_t)src, n);
}

EXPORT CUresult cuStreamSynchronize(struct CUstream_st *s)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!s || !(s->flags & CU_STREAM_NON_BLOCKING))
		return legacy("cuStreamSynchronize");
	pthread_mutex_lock(&lock);
	for (int i = 0; i < s->ncopies; i++)
		memcpy(s->copies[i].dst, s->copies[i].src, s->copies[i].n);
	s->ncopies = 0;
	pthread_mutex_unlock(&lock);
	return 0;
}

EXPORT CUresult cuStreamCreate(struct CUstream_st **s, unsigned int flags)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*s = calloc(1, sizeof(**s));
	if (!*s)
		return CUDA_ERROR_UNKNOWN;
	(*s)->flags = flags;
	return 0;
}

EXPORT CUresult cuStreamDestroy_v2(struct CUstream_st *s)
{
	free(s);
	return 0;
}

/*
 * Pinned host memory mapped for the GPU (the plugin's device unpack queue):
 * the device address is the host address plus FAKE_CUDA_DEVMAP_OFF, so
 * that a test can tell which of the two a pointer handed to NCCL's kernel
 * holds (test-nccl-unpack queue translates it back).  Needs a context.
 */
#define FAKE_CUDA_DEVMAP_OFF (1ull << 44)
#define CU_MEMHOSTALLOC_PORTABLE 0x1
#define CU_MEMHOSTALLOC_DEVICEMAP 0x2

EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!size || (flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)))
		return CUDA_ERROR_INVALID_VALUE;
	/* not zeroed, as the driver's is not */
	*p = malloc(size);
	if (!*p)
		return CUDA_ERROR_UNKNOWN;
	memset(*p, 0x5a, size);
	return 0;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	free(p);
	return 0;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p,
					     unsigned int flags)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!p || flags)
		return CUDA_ERROR_INVALID_VALUE;
	*d = (CUdeviceptr)(uintptr_t)p + FAKE_CUDA_DEVMAP_OFF;
	return 0;
}
