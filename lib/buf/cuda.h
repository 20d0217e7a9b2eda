/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the CUDA driver API, loaded with dlopen("libcuda.so.1") on first
 * use.  This layer owns the process-wide table of driver entry points and
 * the translation of a CUresult into a negative errno and a message; it
 * calls only libc and libdl.  Its users are the CUDA buffer provider (the
 * rest of cuda.c, a provider of buf.h) and the GPU layer (gpu.h).  The
 * library never links against CUDA and needs no CUDA header: the few types
 * and constants used are declared here with the values of cuda.h (CUDA
 * 13.0), which are ABI and do not change.
 */
#ifndef DEVMEMTCP_CUDA_H
#define DEVMEMTCP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUkern_st *CUkernel;

/* CUDA_KERNEL_NODE_PARAMS_v2 (the one cuGraphAddKernelNode_v2 takes). */
typedef struct {
	CUfunction func;
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	void **kernelParams;
	void **extra;
	CUkernel kern;
	CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;

/* CUlaunchAttribute and CUlaunchConfig (cuLaunchKernelEx), the members
 * the library sets. */
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef struct {
	int id;
	char pad[4];
	union {
		char pad[64];
		int programmaticStreamSerializationAllowed;
	} value;
} CUlaunchAttribute;

typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_STUB_LIBRARY = 34,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_NOT_SUPPORTED = 801,
};

enum {
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
	CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
	CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
};

enum {
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
	CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
	CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};
#define CU_MEMORYTYPE_DEVICE 2

#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_HANDLE_TYPE_NONE 0x0
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM 0x0
#define CU_MEM_ALLOC_GRANULARITY_RECOMMENDED 0x1
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 0x1
#define CU_MEMCPY_SRC_ACCESS_ORDER_STREAM 0x1
#define CU_STREAM_WAIT_VALUE_GEQ 0x0
#define CU_STREAM_WRITE_VALUE_DEFAULT 0x0
#define CU_STREAM_CAPTURE_STATUS_NONE 0
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_STREAM_MEM_OP_WAIT_VALUE_32 1
#define CU_STREAM_MEM_OP_WRITE_VALUE_32 2
#define CU_STREAM_MEM_OP_WRITE_VALUE_64 5

/* CUstreamBatchMemOpParams (the wait and write members). */
struct dmt_memop_value {
	int operation;
	CUdeviceptr address;
	union {
		uint32_t value;
		uint64_t value64;
	};
	unsigned int flags;
	CUdeviceptr alias;	/* the driver's */
};

typedef union {
	int operation;
	struct dmt_memop_value waitValue;
	struct dmt_memop_value writeValue;
	uint64_t pad[6];
} CUstreamBatchMemOpParams;

_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute");
_Static_assert(offsetof(CUlaunchConfig, hStream) == 32 &&
		       offsetof(CUlaunchConfig, numAttrs) == 48,
	       "CUlaunchConfig");
_Static_assert(sizeof(CUstreamBatchMemOpParams) == 48,
	       "CUstreamBatchMemOpParams");
_Static_assert(offsetof(struct dmt_memop_value, flags) == 24,
	       "CUstreamBatchMemOpParams.waitValue.flags");

typedef struct {
	int type;
	int id;
} CUmemLocation;

typedef struct {
	int type;			/* CU_MEM_ALLOCATION_TYPE_PINNED */
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct {
	CUmemLocation location;
	int flags;
} CUmemAccessDesc;

typedef struct {
	int srcAccessOrder;
	CUmemLocation srcLocHint;
	CUmemLocation dstLocHint;
	unsigned int flags;
} CUmemcpyAttributes;

/* X(name, symbol, arguments): every entry point used (all return
 * CUresult), by the
 * versioned symbol that cuda.h maps the plain name to. */
#define DMT_CUDA_FUNCS(X)                                                     \
	X(cuInit, "cuInit", (unsigned int flags))                            \
	X(cuDriverGetVersion, "cuDriverGetVersion", (int *v))                  \
	X(cuGetErrorName, "cuGetErrorName", (CUresult r, const char **s))      \
	X(cuGetErrorString, "cuGetErrorString", (CUresult r, const char **s))  \
	X(cuDeviceGet, "cuDeviceGet", (CUdevice *d, int ordinal))              \
	X(cuDeviceGetCount, "cuDeviceGetCount", (int *n))                      \
	X(cuDeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice d)) \
	X(cuDeviceGetAttribute, "cuDeviceGetAttribute",                        \
	  (int *v, int attr, CUdevice d))                                      \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                \
	  (CUcontext *c, CUdevice d))                                          \
	X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",           \
	  (CUdevice d))                                                        \
	X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext c))              \
	X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *c))               \
	X(cuCtxSynchronize, "cuCtxSynchronize", (void))                        \
	X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext *c))                  \
	X(cuPointerGetAttribute, "cuPointerGetAttribute",                      \
	  (void *data, int attr, CUdeviceptr p))                               \
	X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity",      \
	  (size_t *g, const CUmemAllocationProp *prop, int option))            \
	X(cuMemCreate, "cuMemCreate",                                          \
	  (CUmemGenericAllocationHandle *h, size_t size,                       \
	   const CUmemAllocationProp *prop, unsigned long long flags))         \
	X(cuMemRelease, "cuMemRelease", (CUmemGenericAllocationHandle h))      \
	X(cuMemAddressReserve, "cuMemAddressReserve",                          \
	  (CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,        \
	   unsigned long long flags))                                          \
	X(cuMemAddressFree, "cuMemAddressFree", (CUdeviceptr p, size_t size))  \
	X(cuMemMap, "cuMemMap",                                                \
	  (CUdeviceptr p, size_t size, size_t offset,                          \
	   CUmemGenericAllocationHandle h, unsigned long long flags))          \
	X(cuMemUnmap, "cuMemUnmap", (CUdeviceptr p, size_t size))              \
	X(cuMemSetAccess, "cuMemSetAccess",                                    \
	  (CUdeviceptr p, size_t size, const CUmemAccessDesc *desc,            \
	   size_t count))                                                      \
	X(cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange",      \
	  (void *handle, CUdeviceptr p, size_t size, int type,                 \
	   unsigned long long flags))                                          \
	X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *p, size_t size))          \
	X(cuMemFree, "cuMemFree_v2", (CUdeviceptr p))                          \
	X(cuMemHostAlloc, "cuMemHostAlloc",                                    \
	  (void **p, size_t size, unsigned int flags))                         \
	X(cuMemFreeHost, "cuMemFreeHost", (void *p))                           \
	X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2",           \
	  (CUdeviceptr *d, void *p, unsigned int flags))                       \
	X(cuMemcpyHtoD, "cuMemcpyHtoD_v2",                                     \
	  (CUdeviceptr d, const void *s, size_t n))                            \
	X(cuMemcpyDtoH, "cuMemcpyDtoH_v2",                                     \
	  (void *d, CUdeviceptr s, size_t n))                                  \
	X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                           \
	  (CUdeviceptr d, const void *s, size_t n, CUstream st))               \
	X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                           \
	  (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st))               \
	X(cuMemsetD8Async, "cuMemsetD8Async",                                  \
	  (CUdeviceptr d, unsigned char v, size_t n, CUstream st))             \
	X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *m, const void *img)) \
	X(cuModuleUnload, "cuModuleUnload", (CUmodule m))                      \
	X(cuModuleGetFunction, "cuModuleGetFunction",                          \
	  (CUfunction *f, CUmodule m, const char *name))                       \
	X(cuLaunchKernel, "cuLaunchKernel",                                    \
	  (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,    \
	   unsigned int bx, unsigned int by, unsigned int bz,                  \
	   unsigned int smem, CUstream st, void **params, void **extra))       \
	X(cuStreamCreate, "cuStreamCreate", (CUstream *s, unsigned int flags)) \
	X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream s))                 \
	X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream s))            \
	X(cuStreamQuery, "cuStreamQuery", (CUstream s))                        \
	X(cuEventCreate, "cuEventCreate", (CUevent *e, unsigned int flags))    \
	X(cuEventDestroy, "cuEventDestroy_v2", (CUevent e))                    \
	X(cuEventRecord, "cuEventRecord", (CUevent e, CUstream s))             \
	X(cuEventQuery, "cuEventQuery", (CUevent e))                           \
	X(cuEventSynchronize, "cuEventSynchronize", (CUevent e))               \
	X(cuEventElapsedTime, "cuEventElapsedTime",                            \
	  (float *ms, CUevent a, CUevent b))

/* Entry points the library can do without (NULL when the driver lacks
 * them): stream memory operations (fences, persistent gathers), stream
 * capture state, launches with attributes (programmatic dependent
 * launch) and CUDA graphs (inline gathers: gpu_launch.c). */
#define DMT_CUDA_OPTIONAL(X)                                                   \
	X(cuStreamWriteValue32, "cuStreamWriteValue32_v2",                     \
	  (CUstream s, CUdeviceptr addr, uint32_t value, unsigned int flags))  \
	X(cuStreamWriteValue64, "cuStreamWriteValue64_v2",                     \
	  (CUstream s, CUdeviceptr addr, uint64_t value, unsigned int flags))  \
	X(cuStreamWaitValue32, "cuStreamWaitValue32_v2",                       \
	  (CUstream s, CUdeviceptr addr, uint32_t value, unsigned int flags))  \
	X(cuStreamBatchMemOp, "cuStreamBatchMemOp_v2",                         \
	  (CUstream s, unsigned int count, CUstreamBatchMemOpParams *ops,      \
	   unsigned int flags))                                                \
	X(cuLaunchKernelEx, "cuLaunchKernelEx",                                \
	  (const CUlaunchConfig *c, CUfunction f, void **params, void **extra)) \
	X(cuStreamIsCapturing, "cuStreamIsCapturing",                          \
	  (CUstream s, int *status))                                           \
	X(cuGraphCreate, "cuGraphCreate", (CUgraph *g, unsigned int flags))    \
	X(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2",                     \
	  (CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps, \
	   const CUDA_KERNEL_NODE_PARAMS *p))                                  \
	X(cuGraphInstantiate, "cuGraphInstantiateWithFlags",                   \
	  (CUgraphExec *e, CUgraph g, unsigned long long flags))               \
	X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2", \
	  (CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p))  \
	X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec e, CUstream s))         \
	X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec e))           \
	X(cuGraphDestroy, "cuGraphDestroy", (CUgraph g))                      \
	X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId",                          \
	  (char *id, int len, CUdevice d))

struct dmt_cuda {
	void *handle;
	int driver_version;
#define DMT_CUDA_FIELD(name, sym, args) CUresult (*name) args;
	DMT_CUDA_FUNCS(DMT_CUDA_FIELD)
	DMT_CUDA_OPTIONAL(DMT_CUDA_FIELD)
#undef DMT_CUDA_FIELD
	/* Optional (CUDA >= 12.8), NULL when the driver lacks it.  Set to
	 * the 13.0 signature; batch_fail_idx tells whether the 12.8 one
	 * (with size_t *failIdx before the stream) was found instead. */
	void *cuMemcpyBatchAsync;
	int batch_fail_idx;
};

/*
 * Load libcuda.so.1 (once per process; $DEVMEMTCP_LIBCUDA names another
 * file, for tests) and call cuInit(0).  NULL with *errp and err set
 * ("libcuda.so.1 not found: install the NVIDIA driver ...") on failure.
 */
const struct dmt_cuda *dmt_cuda_get(const struct devmemtcp_ctx *ctx,
				    struct dmt_err *err, int *errp);

/* Negative errno for a CUresult. */
int dmt_cuda_errno(CUresult r);

/* Record "<what> failed: CUDA_ERROR_X (text)<hint>" on err; returns the
 * negative errno of r. */
int dmt_cuda_err(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 CUresult r, const char *what, const char *hint);

/* Retain device ordinal's primary context and make it current (pushed);
 * dmt_cuda_ctx_leave pops and releases it. */
int dmt_cuda_ctx_enter(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		       const struct dmt_cuda *cu, int ordinal,
		       CUdevice *dev, CUcontext *cctx);
void dmt_cuda_ctx_leave(const struct dmt_cuda *cu, CUdevice dev);

#endif
