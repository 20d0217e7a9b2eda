// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The few CUDA driver calls the plugin makes itself: which GPU a pointer
 * is on, copies between host and GPU memory (CUDA buffers on connections
 * without devmem, fragments that arrived as plain data), and a stream for
 * the gathers.
 *
 * Copies run on a non-blocking stream of the plugin's own, one per device,
 * and are waited for with cuStreamSynchronize: never on the legacy default
 * stream.  The application has work queued there that waits for the
 * collective (PyTorch's current stream waits for the NCCL stream), and the
 * collective's kernel waits for the bytes being copied; a copy queued
 * behind that work would never run.  libcuda.so.1 is loaded on first use, so the
 * plugin loads and runs the plain path on machines without a GPU.  Each
 * call runs in the device's primary context, the one NCCL and PyTorch use.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define MAX_GPUS 64

static struct {
	void *lib;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuCtxPushCurrent)(CUcontext);
	CUresult (*cuCtxPopCurrent)(CUcontext *);
	CUresult (*cuCtxGetCurrent)(CUcontext *);
	CUresult (*cuCtxGetDevice)(CUdevice *);
	CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuStreamCreate)(CUstream *, unsigned int);
	CUresult (*cuStreamDestroy)(CUstream);
	CUresult (*cuGetErrorName)(CUresult, const char **);
	CUresult (*cuMemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUcontext ctx[MAX_GPUS];
	CUstream copy_stream[MAX_GPUS];	/* non-blocking, for copies */
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
static int cu_status = -ENOENT;
static char cu_why[256] = "CUDA was not needed yet";

#define CU_SYM(field, name)                                                    \
	do {                                                                   \
		*(void **)&cu.field = dlsym(cu.lib, name);                     \
		if (!cu.field) {                                               \
			snprintf(cu_why, sizeof(cu_why),                       \
				 "libcuda.so.1 has no %s: the NVIDIA driver is too old", \
				 name);                                        \
			return;                                                \
		}                                                              \
	} while (0)

static void cu_load(void)
{
	CUresult r;

	cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu.lib) {
		snprintf(cu_why, sizeof(cu_why),
			 "libcuda.so.1 cannot be loaded (%s): install the NVIDIA driver",
			 dlerror());
		return;
	}
	CU_SYM(cuInit, "cuInit");
	CU_SYM(cuDeviceGet, "cuDeviceGet");
	CU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	CU_SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
	CU_SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
	CU_SYM(cuCtxGetCurrent, "cuCtxGetCurrent");
	CU_SYM(cuCtxGetDevice, "cuCtxGetDevice");
	CU_SYM(cuPointerGetAttribute, "cuPointerGetAttribute");
	CU_SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	CU_SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	CU_SYM(cuStreamSynchronize, "cuStreamSynchronize");
	CU_SYM(cuStreamCreate, "cuStreamCreate");
	CU_SYM(cuStreamDestroy, "cuStreamDestroy_v2");
	CU_SYM(cuGetErrorName, "cuGetErrorName");
	/* device unpack only (unpack.c) */
	*(void **)&cu.cuMemHostAlloc = dlsym(cu.lib, "cuMemHostAlloc");
	*(void **)&cu.cuMemFreeHost = dlsym(cu.lib, "cuMemFreeHost");
	*(void **)&cu.cuMemHostGetDevicePointer = dlsym(cu.lib, "cuMemHostGetDevicePointer_v2");
	r = cu.cuInit(0);
	if (r) {
		snprintf(cu_why, sizeof(cu_why), "cuInit failed with CUDA error %d", r);
		return;
	}
	cu_status = 0;
}

static int cu_ready(void)
{
	pthread_once(&cu_once, cu_load);
	return cu_status;
}

/* Record why a call failed; -EIO. */
static int cu_fail(const char *what, CUresult r)
{
	const char *ename = "?";

	if (cu.cuGetErrorName)
		cu.cuGetErrorName(r, &ename);
	pthread_mutex_lock(&cu_lock);
	snprintf(cu_why, sizeof(cu_why), "%s failed: %s (%d)", what, ename, r);
	pthread_mutex_unlock(&cu_lock);
	return -EIO;
}

const char *dmtn_cuda_why(void)
{
	return cu_why;
}

/* Make dev's primary context current on this thread (retained once). */
static int ctx_push(int dev)
{
	CUcontext ctx;
	CUdevice d;
	CUresult r;

	if (cu_ready())
		return cu_status;
	if (dev < 0 || dev >= MAX_GPUS)
		return -EINVAL;
	pthread_mutex_lock(&cu_lock);
	ctx = cu.ctx[dev];
	r = 0;
	if (!ctx) {
		r = cu.cuDeviceGet(&d, dev);
		if (!r)
			r = cu.cuDevicePrimaryCtxRetain(&ctx, d);
		if (!r)
			cu.ctx[dev] = ctx;
	}
	pthread_mutex_unlock(&cu_lock);
	if (r)
		return cu_fail("retaining the primary context", r);
	r = cu.cuCtxPushCurrent(ctx);
	return r ? cu_fail("cuCtxPushCurrent", r) : 0;
}

static void ctx_pop(void)
{
	CUcontext ctx;

	cu.cuCtxPopCurrent(&ctx);
}

int dmtn_cuda_ptr_device(const void *ptr, int *dev)
{
	int ord = -1;
	CUresult r;

	if (cu_ready())
		return cu_status;
	r = cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				     (CUdeviceptr)(uintptr_t)ptr);
	if (r)
		return cu_fail("cuPointerGetAttribute(DEVICE_ORDINAL)", r);
	*dev = ord;
	return 0;
}

int dmtn_cuda_current_device(int *dev)
{
	CUcontext ctx = NULL;
	CUdevice d;

	if (cu_ready())
		return cu_status;
	if (cu.cuCtxGetCurrent(&ctx) || !ctx || cu.cuCtxGetDevice(&d))
		return -ENODEV;
	*dev = d;
	return 0;
}

/* With dev's context current: its copy stream, made on first use. */
static CUstream copy_stream(int dev, CUresult *r)
{
	CUstream s;

	pthread_mutex_lock(&cu_lock);
	s = cu.copy_stream[dev];
	*r = 0;
	if (!s) {
		*r = cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
		if (!*r)
			cu.copy_stream[dev] = s;
	}
	pthread_mutex_unlock(&cu_lock);
	return *r ? NULL : s;
}

/* Copy between host memory and GPU memory of device dev, done on return. */
static int copy(int dev, void *host, uint64_t dptr, size_t n, bool to_gpu)
{
	const char *what = "cuStreamCreate";
	CUstream s;
	CUresult r;
	int ret = ctx_push(dev);

	if (ret)
		return ret;
	s = copy_stream(dev, &r);
	if (s) {
		what = to_gpu ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
		r = to_gpu ? cu.cuMemcpyHtoDAsync(dptr, host, n, s)
			   : cu.cuMemcpyDtoHAsync(host, dptr, n, s);
	}
	if (!r) {
		what = "cuStreamSynchronize";
		r = cu.cuStreamSynchronize(s);
	}
	ctx_pop();
	return r ? cu_fail(what, r) : 0;
}

int dmtn_cuda_copy_htod(int dev, uint64_t dst, const void *src, size_t n)
{
	return copy(dev, (void *)src, dst, n, true);
}

int dmtn_cuda_copy_dtoh(int dev, void *dst, uint64_t src, size_t n)
{
	return copy(dev, dst, src, n, false);
}

int dmtn_cuda_stream_new(int dev, void **stream)
{
	CUstream s = NULL;
	CUresult r;
	int ret = ctx_push(dev);

	if (ret)
		return ret;
	r = cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	ctx_pop();
	if (r)
		return cu_fail("cuStreamCreate", r);
	*stream = s;
	return 0;
}

void dmtn_cuda_stream_free(int dev, void *stream)
{
	if (!stream || ctx_push(dev))
		return;
	cu.cuStreamDestroy(stream);
	ctx_pop();
}

int dmtn_cuda_host_alloc(int dev, size_t size, void **host, uint64_t *dptr)
{
	CUdeviceptr d = 0;
	void *p = NULL;
	CUresult r;
	int ret = ctx_push(dev);

	if (ret)
		return ret;
	if (!cu.cuMemHostAlloc || !cu.cuMemFreeHost || !cu.cuMemHostGetDevicePointer) {
		ctx_pop();
		pthread_mutex_lock(&cu_lock);
		snprintf(cu_why, sizeof(cu_why),
			 "libcuda.so.1 has no cuMemHostAlloc, cuMemFreeHost or cuMemHostGetDevicePointer_v2: the NVIDIA driver is too old");
		pthread_mutex_unlock(&cu_lock);
		return -ENOSYS;
	}
	r = cu.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE |
						 CU_MEMHOSTALLOC_DEVICEMAP);
	if (!r) {
		r = cu.cuMemHostGetDevicePointer(&d, p, 0);
		if (r)
			cu.cuMemFreeHost(p);
	}
	ctx_pop();
	if (r)
		return cu_fail("cuMemHostAlloc(DEVICEMAP)", r);
	*host = p;
	*dptr = d;
	return 0;
}

void dmtn_cuda_host_free(int dev, void *host)
{
	if (!host || ctx_push(dev))
		return;
	cu.cuMemFreeHost(host);
	ctx_pop();
}
