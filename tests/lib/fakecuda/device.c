// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The fake CUDA driver (fakecuda.h says what it models): its settings,
 * error names, the one device, the contexts and memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

struct fk_settings fk;

/* The settings of the top of fakecuda.h, read as the driver is loaded. */
__attribute__((constructor)) static void fk_settings_read(void)
{
	const char *streams = getenv("DEVMEMTCP_FAKE_CUDA_STREAMS");
	const char *nccl = getenv("DEVMEMTCP_FAKE_CUDA_NCCL");
	const char *nocopy = getenv("DEVMEMTCP_FAKE_CUDA_NOCOPY");

	if (streams && strcmp(streams, "async") && strcmp(streams, "manual"))
		fk_die("DEVMEMTCP_FAKE_CUDA_STREAMS=%s: async or manual", streams);
	fk.nccl = nccl && !strcmp(nccl, "1");
	fk.manual = fk.nccl || (streams && !strcmp(streams, "manual"));
	fk.nocopy = nocopy && !strcmp(nocopy, "1");
}

/* DEVMEMTCP_FAKE_CUDA_FAIL=NAME=CODE: what entry point fn returns while it
 * is set (0: nothing asked). */
CUresult fk_injected(const char *fn)
{
	const char *spec = getenv("DEVMEMTCP_FAKE_CUDA_FAIL");
	size_t len = strlen(fn);

	if (!spec || strncmp(spec, fn, len) || spec[len] != '=')
		return CUDA_SUCCESS;
	return (CUresult)atoi(spec + len + 1);
}

/* A state no driver call can reach (a test's or the library's misuse):
 * say what, and abort. */
void fk_die(const char *fmt, ...)
{
	va_list ap;

	fputs("fake-cuda: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* Seconds on the monotonic clock. */
double fk_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleep us microseconds, signals or not. */
void fk_pause_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- errors, the driver, the device ------------------------------------------ */

/* Flags must be 0, as the driver wants them. */
FK_EXPORT CUresult cuInit(unsigned int flags)
{
	FK_INJECT();
	return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGetErrorName(CUresult r, const char **s)
{
	*s = r == CUDA_ERROR_NOT_READY		? "CUDA_ERROR_NOT_READY"
	     : r == FK_ERR_NOT_FOUND		? "CUDA_ERROR_NOT_FOUND"
	     : r == CUDA_ERROR_INVALID_VALUE	? "CUDA_ERROR_INVALID_VALUE"
	     : r == FK_ERR_INVALID_CONTEXT	? "CUDA_ERROR_INVALID_CONTEXT"
	     : r == FK_ERR_ILLEGAL_STATE	? "CUDA_ERROR_ILLEGAL_STATE"
						: "CUDA_ERROR_FAKE";
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
	(void)r;
	*s = "fake-cuda error";
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	(void)d;
	snprintf(name, (size_t)len, "fake GPU (host memory, lib/gpu/gather.cu transcribed)");
	return CUDA_SUCCESS;
}

/* The GPU's PCI address: $DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID (a device of a
 * synthetic sysfs tree, DEVMEMTCP_TEST_SYSFS), else none on PCI. */
FK_EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d)
{
	const char *v = getenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID");

	if (d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!v)
		return FK_ERR_NOT_FOUND;
	snprintf(id, (size_t)len, "%s", v);
	return CUDA_SUCCESS;
}

/* An H200-like device of 4 SMs; 64-bit stream memory operations unless
 * DEVMEMTCP_FAKE_CUDA_NO_MEMOPS is set. */
FK_EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
	if (d)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*v = 4;
		break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
		*v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
		*v = !getenv("DEVMEMTCP_FAKE_CUDA_NO_MEMOPS");
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*v = 9;
		break;
	default:
		*v = 0;
	}
	return CUDA_SUCCESS;
}

/* ---- contexts: the primary one, a stack per thread ----------------------------- */

static struct CUctx_st {
	int dev;
} the_ctx;
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

/* No context is current on the calling thread. */
bool fk_no_context(void)
{
	return !ctx_depth || !ctx_stack[ctx_depth - 1];
}

FK_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	FK_INJECT();
	if (d)
		return CUDA_ERROR_INVALID_DEVICE;
	*c = &the_ctx;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	return d ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

FK_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c)
{
	FK_INJECT();
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if (ctx_depth == 16)
		fk_die("context stack overflow: pushes without pops");
	ctx_stack[ctx_depth++] = c;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
	if (!ctx_depth)
		return FK_ERR_INVALID_CONTEXT;
	*c = ctx_stack[--ctx_depth];
	return CUDA_SUCCESS;
}

/* Replaces the top of the stack (the data-loader example binds its
 * context so); NULL pops it. */
FK_EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
	if (!c) {
		if (ctx_depth)
			ctx_depth--;
		return CUDA_SUCCESS;
	}
	if (!ctx_depth)
		ctx_depth = 1;
	ctx_stack[ctx_depth - 1] = c;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
	*c = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
	return CUDA_SUCCESS;
}

/* The one device (the NCCL plugin asks which the current context is on). */
FK_EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	*d = ctx_stack[ctx_depth - 1]->dev;
	return CUDA_SUCCESS;
}

/* ---- allocations: device memory, reservations, pinned host memory --------------- */

struct alloc {
	uintptr_t base;
	size_t size;
	bool pinned;		/* cuMemHostAlloc */
	struct alloc *next;
};
static pthread_mutex_t allocs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;

/* fork(): the child gets the lock free. */
static void allocs_lock_take(void)
{
	pthread_mutex_lock(&allocs_lock);
}

static void allocs_lock_give(void)
{
	pthread_mutex_unlock(&allocs_lock);
}

__attribute__((constructor)) static void allocs_fork_handlers(void)
{
	pthread_atfork(allocs_lock_take, allocs_lock_give, allocs_lock_give);
}

/* Record an allocation (device memory or pinned host memory). */
static void alloc_add(uintptr_t base, size_t size, bool pinned)
{
	struct alloc *a = malloc(sizeof(*a));

	if (!a)
		fk_die("out of memory");
	*a = (struct alloc){ base, size, pinned, NULL };
	pthread_mutex_lock(&allocs_lock);
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&allocs_lock);
}

/* Forget the allocation at base; false when there is none. */
static bool alloc_del(uintptr_t base, bool pinned)
{
	bool found = false;

	pthread_mutex_lock(&allocs_lock);
	for (struct alloc **p = &allocs; *p; p = &(*p)->next) {
		if ((*p)->base == base && (*p)->pinned == pinned) {
			struct alloc *a = *p;

			*p = a->next;
			free(a);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&allocs_lock);
	return found;
}

/* The allocation holding address p (device memory, or pinned memory's
 * host address), as a copy; false when none does. */
static bool alloc_find(uintptr_t p, bool pinned, struct alloc *out)
{
	bool found = false;

	pthread_mutex_lock(&allocs_lock);
	for (struct alloc *a = allocs; a; a = a->next) {
		if (a->pinned == pinned && p - a->base < a->size) {
			*out = *a;
			found = true;
		}
	}
	pthread_mutex_unlock(&allocs_lock);
	return found;
}

/* The host address behind device address addr: itself, but for mapped
 * pinned memory in NCCL mode (its host address plus FK_DEVMAP_OFF). */
void *fk_mem(uint64_t addr)
{
	struct alloc a;

	if (fk.nccl && addr >= FK_DEVMAP_OFF &&
	    alloc_find((uintptr_t)(addr - FK_DEVMAP_OFF), true, &a))
		return (void *)(uintptr_t)(addr - FK_DEVMAP_OFF);
	return (void *)(uintptr_t)addr;
}

FK_EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
	struct alloc a;

	if (!alloc_find((uintptr_t)p, false, &a)) {
		/* NCCL mode: every address is memory of device 0 */
		if (!fk.nccl || !p || attr != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			return CUDA_ERROR_INVALID_VALUE;
		*(int *)data = 0;
		return CUDA_SUCCESS;
	}
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = a.base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a.size;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* ---- virtual memory management: memfd chunks mapped into a reservation ---------- */

#define GRAN (2u << 20)

FK_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g,
						 const CUmemAllocationProp *prop,
						 int option)
{
	(void)prop;
	(void)option;
	*g = GRAN;
	return CUDA_SUCCESS;
}

/* A memfd of size bytes, or -1. */
static int memfd_sized(const char *name, size_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd >= 0 && ftruncate(fd, (off_t)size)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

FK_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
			       const CUmemAllocationProp *prop,
			       unsigned long long flags)
{
	int fd = memfd_sized("fake-cuda", size);

	(void)prop;
	(void)flags;
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*h = (CUmemGenericAllocationHandle)fd + 1;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	close((int)h - 1);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align,
				       CUdeviceptr addr, unsigned long long flags)
{
	size_t a = align ? align : GRAN;
	void *m = mmap(NULL, size + a, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	(void)addr;
	(void)flags;
	if (m == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = ((uintptr_t)m + a - 1) / a * a;
	alloc_add((uintptr_t)*p, size, false);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size)
{
	alloc_del((uintptr_t)p, false);
	munmap((void *)(uintptr_t)p, size);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset,
			    CUmemGenericAllocationHandle h, unsigned long long flags)
{
	(void)flags;
	if (mmap((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, (int)h - 1, (off_t)offset) == MAP_FAILED)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size)
{
	mmap((void *)(uintptr_t)p, size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size,
				  const CUmemAccessDesc *desc, size_t count)
{
	(void)p;
	(void)size;
	(void)desc;
	(void)count;
	return CUDA_SUCCESS;
}

/* Not a dma-buf: a memfd of the size (tests on the fake skip the check). */
FK_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p,
						 size_t size, int type,
						 unsigned long long flags)
{
	int fd = memfd_sized("fake-dmabuf", size);

	(void)p;
	(void)type;
	(void)flags;
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)handle = fd;
	return CUDA_SUCCESS;
}

/* ---- plain device memory --------------------------------------------------------- */

/* Host memory, recorded for cuPointerGetAttribute; not zeroed. */
FK_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	/* the driver aligns large allocations to pages and more */
	void *m = aligned_alloc(4096, (size + 4095) / 4096 * 4096);

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (uintptr_t)m;
	alloc_add((uintptr_t)m, size, false);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	if (!p)
		return CUDA_SUCCESS;
	if (!alloc_del((uintptr_t)p, false))
		return CUDA_ERROR_INVALID_VALUE;
	free((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

/*
 * Pinned host memory belongs to the current context: without one the
 * driver answers CUDA_ERROR_INVALID_CONTEXT.  It is not zeroed.
 * cuMemFreeHost waits for the whole device, as the driver's does; so does
 * cuMemHostAlloc while DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC=1 (drivers that
 * do).
 */
FK_EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags)
{
	const char *sync = getenv("DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC");
	size_t n = (size + 4095) / 4096 * 4096;

	FK_INJECT();
	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	if (!size || (flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE |
					      CU_MEMHOSTALLOC_DEVICEMAP |
					      CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	if (sync && !strcmp(sync, "1"))
		fk_device_sync();
	*p = aligned_alloc(4096, n);
	if (!*p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memset(*p, 0x5a, n);
	alloc_add((uintptr_t)*p, size, true);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemFreeHost(void *p)
{
	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	fk_device_sync();
	if (!alloc_del((uintptr_t)p, true))
		return CUDA_ERROR_INVALID_VALUE;
	free(p);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p,
						unsigned int flags)
{
	struct alloc a;

	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	if (flags || !alloc_find((uintptr_t)p, true, &a))
		return CUDA_ERROR_INVALID_VALUE;
	*d = (uintptr_t)p + (fk.nccl ? FK_DEVMAP_OFF : 0);
	return CUDA_SUCCESS;
}
