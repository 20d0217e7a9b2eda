// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A fake CUDA driver for the Python tests: loaded in place of libcuda.so.1
 * ($DEVMEMTCP_LIBCUDA, read by the library in test builds and by the
 * extension), it lets the stream handling of gathers and DLPack views run
 * on a machine without a GPU.  Test builds only; never installed.
 *
 * One device (ordinal 0, "device memory" is host memory).  Streams are
 * their handles; NULL and CU_STREAM_LEGACY are the one legacy default
 * stream, CU_STREAM_PER_THREAD is the calling thread's own stream, every
 * other handle a non-blocking stream of its own, so an event on the legacy
 * stream covers none of the others' work.  Nothing runs by itself: the
 * test queues a long kernel on a stream (fakecuda_busy) and ends it
 * (fakecuda_finish); every other operation completes at once, and a
 * gather kernel copies its descriptors' bytes as it is launched.  An event
 * completes once the work queued on its stream before it was recorded has.
 * A host wait (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize)
 * cannot block on the test, which runs on the same thread: it ends the work
 * it waits for, as if it had waited, and is counted.
 *
 * Every launch, copy, record and wait goes into a log the test reads
 * (fakecuda_call): kind, stream handle, and the thread that called.
 * FAKECUDA_NOCOPY=1 (bench/python-pipeline.py --fake): kernels copy nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* gettid */
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gather_index.h"	/* where a gather puts an output position */
#include "gpu.h"	/* the driver types and the gather descriptors */

#define FC_MAX_STREAMS 256
#define FC_LOG 4096
#define FC_FN_GATHER ((CUfunction)(uintptr_t)0x6a7)
#define FC_FN_GATHER_INLINE ((CUfunction)(uintptr_t)0x6a8)
#define FC_FN_SPIN ((CUfunction)(uintptr_t)0x5b1)

enum fc_kind { FC_LAUNCH = 1, FC_RECORD, FC_COPY, FC_CTX_SYNC, FC_STREAM_SYNC,
	       FC_EVENT_SYNC };

struct fakecuda_call {
	uint32_t kind;		/* enum fc_kind */
	uint32_t tid;
	uint64_t stream;	/* the handle as given */
};

/* A stream as the driver sees it: handle, and for the per-thread default
 * stream its thread. */
struct fc_stream {
	uint64_t handle;
	uint32_t tid;
	uint64_t queued;	/* long kernels queued by the test */
	uint64_t done;		/* ... and ended */
};

struct CUevent_st {
	struct fc_stream *s;	/* NULL until recorded */
	uint64_t target;	/* s->queued when recorded */
};

static struct {
	pthread_mutex_t lock;
	struct fc_stream streams[FC_MAX_STREAMS];
	size_t nstreams;
	struct fakecuda_call log[FC_LOG];
	uint64_t ncalls;
	uint64_t modules;
} fc = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread int fc_depth;	/* contexts pushed on this thread */

static uint32_t fc_tid(void)
{
	return (uint32_t)gettid();
}

/* With fc.lock held; NULL when the table is full. */
static struct fc_stream *fc_stream(CUstream st)
{
	uint64_t h = (uint64_t)(uintptr_t)st;
	uint32_t tid = 0;

	if (h == 0)
		h = 1;		/* NULL: the legacy default stream */
	if (h == 2)
		tid = fc_tid();
	for (size_t i = 0; i < fc.nstreams; i++)
		if (fc.streams[i].handle == h && fc.streams[i].tid == tid)
			return &fc.streams[i];
	if (fc.nstreams == FC_MAX_STREAMS)
		return NULL;
	fc.streams[fc.nstreams] = (struct fc_stream){ .handle = h, .tid = tid };
	return &fc.streams[fc.nstreams++];
}

static void fc_log(enum fc_kind kind, CUstream st)
{
	fc.log[fc.ncalls % FC_LOG] = (struct fakecuda_call){
		kind, fc_tid(), (uint64_t)(uintptr_t)st };
	fc.ncalls++;
}

/* A call on st: logged; CUDA_ERROR_INVALID_VALUE for a stream beyond the
 * table, or (like the driver) without a current context. */
static CUresult fc_on(enum fc_kind kind, CUstream st, struct fc_stream **sp)
{
	struct fc_stream *s;

	if (!fc_depth)
		return 201;	/* CUDA_ERROR_INVALID_CONTEXT */
	pthread_mutex_lock(&fc.lock);
	s = fc_stream(st);
	if (s)
		fc_log(kind, st);
	pthread_mutex_unlock(&fc.lock);
	if (sp)
		*sp = s;
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- what the tests call ------------------------------------------------ */

int fakecuda_busy(uint64_t stream);
void fakecuda_finish(uint64_t stream);
int fakecuda_idle(uint64_t stream);
uint64_t fakecuda_calls(void);
int fakecuda_call(uint64_t i, struct fakecuda_call *out);
uint64_t fakecuda_modules(void);

/* Queue a long kernel on stream (CU_STREAM_PER_THREAD: the caller's). */
int fakecuda_busy(uint64_t stream)
{
	struct fc_stream *s;

	pthread_mutex_lock(&fc.lock);
	s = fc_stream((CUstream)(uintptr_t)stream);
	if (s)
		s->queued++;
	pthread_mutex_unlock(&fc.lock);
	return s ? 0 : -1;
}

/* End the long kernels queued on stream. */
void fakecuda_finish(uint64_t stream)
{
	struct fc_stream *s;

	pthread_mutex_lock(&fc.lock);
	s = fc_stream((CUstream)(uintptr_t)stream);
	if (s)
		s->done = s->queued;
	pthread_mutex_unlock(&fc.lock);
}

/* 1 when no long kernel of stream's is running. */
int fakecuda_idle(uint64_t stream)
{
	struct fc_stream *s;
	int idle;

	pthread_mutex_lock(&fc.lock);
	s = fc_stream((CUstream)(uintptr_t)stream);
	idle = !s || s->done == s->queued;
	pthread_mutex_unlock(&fc.lock);
	return idle;
}

/* Calls logged so far, and call i of them (0 when it left the log). */
uint64_t fakecuda_calls(void)
{
	uint64_t n;

	pthread_mutex_lock(&fc.lock);
	n = fc.ncalls;
	pthread_mutex_unlock(&fc.lock);
	return n;
}

int fakecuda_call(uint64_t i, struct fakecuda_call *out)
{
	int ok;

	pthread_mutex_lock(&fc.lock);
	ok = i < fc.ncalls && fc.ncalls - i <= FC_LOG;
	if (ok)
		*out = fc.log[i % FC_LOG];
	pthread_mutex_unlock(&fc.lock);
	return ok;
}

/* Modules loaded (the library's gather kernels, when it has them). */
uint64_t fakecuda_modules(void)
{
	return fc.modules;
}

/* ---- the driver API -------------------------------------------------------- */

#define FC_UNSUPPORTED(name, args)                                             \
	CUresult name args;                                                    \
	CUresult name args                                                     \
	{                                                                      \
		return CUDA_ERROR_NOT_SUPPORTED;                               \
	}

/* The entry points a gather and a view do not use: the CUDA buffer
 * provider and synchronous copies. */
FC_UNSUPPORTED(cuPointerGetAttribute, (void *data, int attr, CUdeviceptr p))
FC_UNSUPPORTED(cuMemGetAllocationGranularity,
	       (size_t *g, const CUmemAllocationProp *prop, int option))
FC_UNSUPPORTED(cuMemCreate, (CUmemGenericAllocationHandle *h, size_t size,
			     const CUmemAllocationProp *prop,
			     unsigned long long flags))
FC_UNSUPPORTED(cuMemRelease, (CUmemGenericAllocationHandle h))
FC_UNSUPPORTED(cuMemAddressReserve, (CUdeviceptr *p, size_t size, size_t align,
				     CUdeviceptr addr, unsigned long long flags))
FC_UNSUPPORTED(cuMemAddressFree, (CUdeviceptr p, size_t size))
FC_UNSUPPORTED(cuMemMap, (CUdeviceptr p, size_t size, size_t offset,
			  CUmemGenericAllocationHandle h,
			  unsigned long long flags))
FC_UNSUPPORTED(cuMemUnmap, (CUdeviceptr p, size_t size))
FC_UNSUPPORTED(cuMemSetAccess, (CUdeviceptr p, size_t size,
				const CUmemAccessDesc *desc, size_t count))
FC_UNSUPPORTED(cuMemGetHandleForAddressRange,
	       (void *handle, CUdeviceptr p, size_t size, int type,
		unsigned long long flags))
FC_UNSUPPORTED(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *s, size_t n))
FC_UNSUPPORTED(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n))
FC_UNSUPPORTED(cuEventElapsedTime, (float *ms, CUevent a, CUevent b))
FC_UNSUPPORTED(cuDeviceGetAttribute, (int *v, int attr, CUdevice d))

/* A stream of its own (the library keeps one, idle, to ask whether the
 * context failed): a new handle, far from those the tests use. */
CUresult cuStreamCreate(CUstream *s, unsigned int flags);
CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	static uint64_t next = 0x5e000000;

	*s = (CUstream)(uintptr_t)__atomic_add_fetch(&next, 16, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuStreamDestroy_v2(CUstream s)
{
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags);
CUresult cuInit(unsigned int flags)
{
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v);
CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult r, const char **s);
CUresult cuGetErrorName(CUresult r, const char **s)
{
	*s = r == CUDA_ERROR_NOT_READY ? "CUDA_ERROR_NOT_READY" : "CUDA_ERROR_FAKE";
	return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char **s);
CUresult cuGetErrorString(CUresult r, const char **s)
{
	*s = "an error of the fake CUDA driver";
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

/* As the driver writes it: upper-case hex (devmemtcp_nic_near_gpu
 * lowers it). */
CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d);
CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(id, (size_t)len, "0000:1B:00.0");
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d);
CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	snprintf(name, (size_t)len, "fake CUDA device");
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	*c = (CUcontext)(uintptr_t)0xc0;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext c);
CUresult cuCtxPushCurrent_v2(CUcontext c)
{
	fc_depth++;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *c);
CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
	if (!fc_depth)
		return 201;	/* CUDA_ERROR_INVALID_CONTEXT */
	fc_depth--;
	*c = (CUcontext)(uintptr_t)0xc0;
	return CUDA_SUCCESS;
}

/* The context on top of this thread's stack (the library pushes its own
 * only when another is current). */
CUresult cuCtxGetCurrent(CUcontext *c);
CUresult cuCtxGetCurrent(CUcontext *c)
{
	*c = fc_depth ? (CUcontext)(uintptr_t)0xc0 : NULL;
	return CUDA_SUCCESS;
}

/* Every stream's long kernels end: the host waited for them. */
CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize(void)
{
	CUresult r = fc_on(FC_CTX_SYNC, NULL, NULL);

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&fc.lock);
	for (size_t i = 0; i < fc.nstreams; i++)
		fc.streams[i].done = fc.streams[i].queued;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream st);
CUresult cuStreamSynchronize(CUstream st)
{
	struct fc_stream *s;
	CUresult r = fc_on(FC_STREAM_SYNC, st, &s);

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&fc.lock);
	s->done = s->queued;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

/* Done once the work queued on st has ended; a query, not a wait, so it
 * ends nothing and is not logged. */
CUresult cuStreamQuery(CUstream st);
CUresult cuStreamQuery(CUstream st)
{
	struct fc_stream *s;
	CUresult r;

	if (!fc_depth)
		return 201;	/* CUDA_ERROR_INVALID_CONTEXT */
	pthread_mutex_lock(&fc.lock);
	s = fc_stream(st);
	r = !s ? CUDA_ERROR_INVALID_VALUE
	       : s->done >= s->queued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&fc.lock);
	return r;
}

/* Host memory, pinned or not, is what the device sees. */
CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags);
CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags)
{
	*p = calloc(1, size);
	return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p);
CUresult cuMemFreeHost(void *p)
{
	free(p);
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags)
{
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	void *m = calloc(1, size);

	*p = (CUdeviceptr)(uintptr_t)m;
	return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemFree_v2(CUdeviceptr p)
{
	free((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n,
			      CUstream st);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n,
			      CUstream st)
{
	CUresult r = fc_on(FC_COPY, st, NULL);

	if (r == CUDA_SUCCESS)
		memcpy((void *)(uintptr_t)d, src, n);
	return r;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n,
			      CUstream st);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n,
			      CUstream st)
{
	CUresult r = fc_on(FC_COPY, st, NULL);

	if (r == CUDA_SUCCESS)
		memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)src, n);
	return r;
}

CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st);
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st)
{
	CUresult r = fc_on(FC_COPY, st, NULL);

	if (r == CUDA_SUCCESS)
		memset((void *)(uintptr_t)d, v, n);
	return r;
}

CUresult cuModuleLoadData(CUmodule *m, const void *img);
CUresult cuModuleLoadData(CUmodule *m, const void *img)
{
	__atomic_add_fetch(&fc.modules, 1, __ATOMIC_RELAXED);
	*m = (CUmodule)(uintptr_t)0x30d;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule m);
CUresult cuModuleUnload(CUmodule m)
{
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	*f = !strncmp(name, "dmt_gather_inline", 17) ? FC_FN_GATHER_INLINE
	     : !strncmp(name, "dmt_gather", 10)	  ? FC_FN_GATHER
						  : FC_FN_SPIN;
	return CUDA_SUCCESS;
}

/* The gather kernels' work (lib/gpu/gather.cu), done at launch: each
 * descriptor's bytes go to the destination holding its output position,
 * found as the kernels find it (gather_index.h). */
static void fc_gather_run(const struct dmt_gather_args *a,
			  const struct dmt_gather_desc *d,
			  const struct dmt_gather_dst *dst)
{
	for (uint32_t i = 0; i < a->n; i++)
		memcpy((void *)(uintptr_t)dmt_out_addr(dst, a->ndst, a->bias, d[i].pos),
		       (const void *)(uintptr_t)d[i].src, d[i].len);
}

/* dmt_gather(descs, dsts, args): the descriptors in a pinned slot. */
static void fc_gather(void **params)
{
	fc_gather_run((const struct dmt_gather_args *)params[2],
		      (const void *)(uintptr_t)*(CUdeviceptr *)params[0],
		      (const void *)(uintptr_t)*(CUdeviceptr *)params[1]);
}

/* dmt_gather_inline<N>(p): args, destinations and descriptors in the
 * parameter itself. */
static void fc_gather_inline(void **params)
{
	const struct dmt_gather_inline *p = params[0];

	fc_gather_run(&p->a, p->desc, p->dst);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
			unsigned int gz, unsigned int bx, unsigned int by,
			unsigned int bz, unsigned int smem, CUstream st,
			void **params, void **extra);
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
			unsigned int gz, unsigned int bx, unsigned int by,
			unsigned int bz, unsigned int smem, CUstream st,
			void **params, void **extra)
{
	/* FAKECUDA_NOCOPY=1: kernels copy nothing, so that a benchmark of the
	 * binding's cost per call is not the CPU's copying */
	static int nocopy = -1;
	CUresult r = fc_on(FC_LAUNCH, st, NULL);

	if (nocopy < 0)
		nocopy = getenv("FAKECUDA_NOCOPY") && *getenv("FAKECUDA_NOCOPY") == '1';
	if (nocopy)
		return r;
	if (r == CUDA_SUCCESS && f == FC_FN_GATHER)
		fc_gather(params);
	if (r == CUDA_SUCCESS && f == FC_FN_GATHER_INLINE)
		fc_gather_inline(params);
	return r;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags);
CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	*e = calloc(1, sizeof(**e));
	return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventDestroy_v2(CUevent e);
CUresult cuEventDestroy_v2(CUevent e)
{
	free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream st);
CUresult cuEventRecord(CUevent e, CUstream st)
{
	struct fc_stream *s;
	CUresult r = fc_on(FC_RECORD, st, &s);

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&fc.lock);
	e->s = s;
	e->target = s->queued;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e);
CUresult cuEventQuery(CUevent e)
{
	CUresult r;

	pthread_mutex_lock(&fc.lock);
	r = !e->s || e->s->done >= e->target ? CUDA_SUCCESS
					     : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&fc.lock);
	return r;
}

/* The work before the event ends: the host waited for it. */
CUresult cuEventSynchronize(CUevent e);
CUresult cuEventSynchronize(CUevent e)
{
	pthread_mutex_lock(&fc.lock);
	if (e->s) {
		fc_log(FC_EVENT_SYNC, (CUstream)(uintptr_t)e->s->handle);
		if (e->s->done < e->target)
			e->s->done = e->target;
	}
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}
