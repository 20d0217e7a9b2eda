// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The CUDA buffer provider: GPU memory exported as a dma-buf.  libcuda.so.1
 * is loaded at run time, so machines without the NVIDIA driver still load
 * and use the library with the other providers.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cuda.h"

#define DMT_LIBCUDA "libcuda.so.1"

static struct dmt_cuda cuda;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_status;			/* 0 or a negative errno */
static char cuda_why[512];		/* why loading failed */

static void cuda_load_once(void)
{
	/* test builds: another file, to test a missing or broken driver */
	const char *name = dmt_hook_env("DEVMEMTCP_LIBCUDA");
	const char *missing = NULL;
	CUresult r;

	if (!name || !*name)
		name = DMT_LIBCUDA;
	cuda.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!cuda.handle) {
		cuda_status = -ENOENT;
		snprintf(cuda_why, sizeof(cuda_why),
			 "%s not found (%s): install the NVIDIA driver (it ships libcuda.so.1) or use another provider",
			 name, dlerror());
		return;
	}
#define DMT_CUDA_SYM(name, sym, args)                                          \
	if (!(cuda.name = (CUresult (*) args)dlsym(cuda.handle, sym)) &&      \
	    !missing)                                                          \
		missing = sym;
	DMT_CUDA_FUNCS(DMT_CUDA_SYM)
#undef DMT_CUDA_SYM
	if (missing) {
		cuda_status = -ENOSYS;
		snprintf(cuda_why, sizeof(cuda_why),
			 "%s lacks %s: the NVIDIA driver is too old, install driver 525 or newer (CUDA 12)",
			 name, missing);
		dlclose(cuda.handle);
		cuda.handle = NULL;
		return;
	}
#define DMT_CUDA_OPT_SYM(name, sym, args)                                      \
	cuda.name = (CUresult (*) args)dlsym(cuda.handle, sym);
	DMT_CUDA_OPTIONAL(DMT_CUDA_OPT_SYM)
#undef DMT_CUDA_OPT_SYM
	cuda.cuMemcpyBatchAsync = dlsym(cuda.handle, "cuMemcpyBatchAsync_v2");
	if (!cuda.cuMemcpyBatchAsync) {
		cuda.cuMemcpyBatchAsync = dlsym(cuda.handle, "cuMemcpyBatchAsync");
		cuda.batch_fail_idx = cuda.cuMemcpyBatchAsync != NULL;
	}
	cuda.cuDriverGetVersion(&cuda.driver_version);
	r = cuda.cuInit(0);
	if (r != CUDA_SUCCESS) {
		const char *ename = "?";

		cuda.cuGetErrorName(r, &ename);
		cuda_status = r == CUDA_ERROR_NO_DEVICE ||
				      r == CUDA_ERROR_STUB_LIBRARY
			? -ENODEV
			: dmt_cuda_errno(r);
		snprintf(cuda_why, sizeof(cuda_why),
			 "cuInit failed: %s: %s",
			 ename,
			 r == CUDA_ERROR_NO_DEVICE
				 ? "no NVIDIA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
			 : r == CUDA_ERROR_STUB_LIBRARY
				 ? "libcuda.so.1 is the toolkit's stub: install the NVIDIA driver"
				 : "check that the NVIDIA kernel module is loaded (nvidia-smi)");
	}
}

static void cuda_load(void)
{
	int saved = errno;	/* dlopen and cuInit set it */

	cuda_load_once();
	errno = saved;
}

const struct dmt_cuda *dmt_cuda_get(const struct devmemtcp_ctx *ctx,
				    struct dmt_err *err, int *errp)
{
	pthread_once(&cuda_once, cuda_load);
	if (cuda_status) {
		*errp = dmt_err(ctx, err, cuda_status, "%s", cuda_why);
		return NULL;
	}
	*errp = 0;
	return &cuda;
}

int dmt_cuda_errno(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_INVALID_VALUE:
		return -EINVAL;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_INVALID_DEVICE:
	case CUDA_ERROR_STUB_LIBRARY:
		return -ENODEV;
	case CUDA_ERROR_NOT_READY:
		return -EAGAIN;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

int dmt_cuda_err(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 CUresult r, const char *what, const char *hint)
{
	const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";

	if (cuda.cuGetErrorName)
		cuda.cuGetErrorName(r, &name);
	if (cuda.cuGetErrorString)
		cuda.cuGetErrorString(r, &text);
	return dmt_err(ctx, err, dmt_cuda_errno(r), "%s failed: %s (%s)%s%s",
		       what, name ? name : "?", text ? text : "?",
		       hint ? ": " : "", hint ? hint : "");
}

int dmt_cuda_ctx_enter(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		       const struct dmt_cuda *cu, int ordinal, CUdevice *dev,
		       CUcontext *cctx)
{
	int count = 0;
	CUresult r;

	r = cu->cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, err, r, "cuDeviceGetCount", NULL);
	if (ordinal < 0 || ordinal >= count)
		return dmt_err(ctx, err, -ENODEV,
			       "CUDA device %d does not exist: this machine has %d (ordinals 0..%d, see nvidia-smi and CUDA_VISIBLE_DEVICES)",
			       ordinal, count, count - 1);
	r = cu->cuDeviceGet(dev, ordinal);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, err, r, "cuDeviceGet", NULL);
	r = cu->cuDevicePrimaryCtxRetain(cctx, *dev);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, err, r, "cuDevicePrimaryCtxRetain",
				    "the GPU may be in exclusive-process mode and in use by another process");
	r = cu->cuCtxPushCurrent(*cctx);
	if (r != CUDA_SUCCESS) {
		cu->cuDevicePrimaryCtxRelease(*dev);
		return dmt_cuda_err(ctx, err, r, "cuCtxPushCurrent", NULL);
	}
	return 0;
}

void dmt_cuda_ctx_leave(const struct dmt_cuda *cu, CUdevice dev)
{
	CUcontext c;

	cu->cuCtxPopCurrent(&c);
	cu->cuDevicePrimaryCtxRelease(dev);
}

/* ------------------------------------------------------------------------ */
/* The provider.                                                             */

struct cuda_buf {
	const struct dmt_cuda *cu;
	CUdevice dev;
	CUcontext cctx;
	int ordinal;
	CUdeviceptr va;		/* allocate: the reserved range */
	size_t va_size;
	size_t nchunks;
	size_t chunk;		/* bytes per physical chunk (last may be less) */
	CUmemGenericAllocationHandle *handles;
};

static void cuda_buf_unmap(struct cuda_buf *cb)
{
	const struct dmt_cuda *cu = cb->cu;

	if (cb->va) {
		cu->cuMemUnmap(cb->va, cb->va_size);
		cu->cuMemAddressFree(cb->va, cb->va_size);
		cb->va = 0;
	}
	for (size_t i = 0; i < cb->nchunks; i++)
		if (cb->handles[i])
			cu->cuMemRelease(cb->handles[i]);
	free(cb->handles);
	cb->handles = NULL;
	cb->nchunks = 0;
}

static void cuda_buf_release(struct devmemtcp_buf *buf)
{
	struct cuda_buf *cb = buf->priv;
	CUcontext c;

	if (!cb)
		return;
	/* The exporter's dma-buf goes first, the memory behind it after. */
	if (buf->own_fd && buf->fd >= 0)
		close(buf->fd);
	buf->fd = -1;
	cb->cu->cuCtxPushCurrent(cb->cctx);
	cuda_buf_unmap(cb);
	cb->cu->cuCtxPopCurrent(&c);
	cb->cu->cuDevicePrimaryCtxRelease(cb->dev);
	free(cb);
	buf->priv = NULL;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int cuda_check_dmabuf(struct devmemtcp_ctx *ctx, struct cuda_buf *cb)
{
	int v = 0;
	CUresult r;

	r = cb->cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
					 cb->dev);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r,
				    "cuDeviceGetAttribute(DMA_BUF_SUPPORTED)",
				    NULL);
	if (!v)
		return dmt_err(ctx, &ctx->err, -EOPNOTSUPP,
			       "CUDA device %d cannot export dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0): load the NVIDIA open kernel modules (nvidia.ko from open-gpu-kernel-modules) on Linux 5.12 or newer",
			       cb->ordinal);
	return 0;
}

static int cuda_export(struct devmemtcp_ctx *ctx, struct cuda_buf *cb,
		       CUdeviceptr base, size_t size, int *fd)
{
	CUresult r;

	*fd = -1;
	r = cb->cu->cuMemGetHandleForAddressRange(fd, base, size,
						  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
						  0);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r,
				    "cuMemGetHandleForAddressRange(DMA_BUF_FD)",
				    "the range must be device memory, mapped in full; the NVIDIA open kernel modules are required");
	return 0;
}

/* Reserve total bytes of address space and back them with chunks of
 * cb->chunk bytes (the last may be less), readable and writable. */
static int cuda_map_chunks(struct devmemtcp_ctx *ctx, struct cuda_buf *cb,
			   const CUmemAllocationProp *prop, size_t total,
			   size_t gran)
{
	const struct dmt_cuda *cu = cb->cu;
	CUmemAccessDesc access = { { 0, 0 }, 0 };
	CUresult r;

	r = cu->cuMemAddressReserve(&cb->va, total, gran, 0, 0);
	if (r != CUDA_SUCCESS) {
		cb->va = 0;
		return dmt_cuda_err(ctx, &ctx->err, r, "cuMemAddressReserve",
				    NULL);
	}
	cb->va_size = total;
	for (size_t i = 0; i < cb->nchunks; i++) {
		size_t off = i * cb->chunk;
		size_t len = total - off < cb->chunk ? total - off : cb->chunk;

		r = cu->cuMemCreate(&cb->handles[i], len, prop, 0);
		if (r != CUDA_SUCCESS) {
			cb->handles[i] = 0;
			return dmt_cuda_err(ctx, &ctx->err, r, "cuMemCreate",
					    r == CUDA_ERROR_OUT_OF_MEMORY
						    ? "not enough free GPU memory for opts.size"
						    : NULL);
		}
		r = cu->cuMemMap(cb->va + off, len, 0, cb->handles[i], 0);
		if (r != CUDA_SUCCESS)
			return dmt_cuda_err(ctx, &ctx->err, r, "cuMemMap", NULL);
	}
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = cb->ordinal;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	r = cu->cuMemSetAccess(cb->va, total, &access, 1);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r, "cuMemSetAccess", NULL);
	return 0;
}

static int cuda_alloc(struct devmemtcp_ctx *ctx,
		      const struct devmemtcp_buf_opts *opts,
		      struct cuda_buf *cb, uint64_t *sizep)
{
	const struct dmt_cuda *cu = cb->cu;
	CUmemAllocationProp prop = { 0 };
	size_t gran = 0, total;
	int vmm = 0, rdma = 0, ret;
	CUresult r;

	if (!opts->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "CUDA: opts.size is 0: give the buffer size in bytes");
	cu->cuDeviceGetAttribute(&vmm,
				 CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
				 cb->dev);
	if (!vmm)
		return dmt_err(ctx, &ctx->err, -EOPNOTSUPP,
			       "CUDA device %d does not support the virtual memory management API (cuMemCreate): allocate with cuMemAlloc and pass the pointer as opts.cuda_ptr",
			       cb->ordinal);
	cu->cuDeviceGetAttribute(&rdma,
				 CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
				 cb->dev);

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = cb->ordinal;
	prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
	r = cu->cuMemGetAllocationGranularity(&gran, &prop,
					      CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r,
				    "cuMemGetAllocationGranularity", NULL);
	if (!gran)
		gran = 2u << 20;
	total = round_up(opts->size, gran);
	cb->chunk = opts->cuda_chunk_size ? round_up(opts->cuda_chunk_size, gran)
					  : total;
	if (cb->chunk > total)
		cb->chunk = total;
	cb->nchunks = (total + cb->chunk - 1) / cb->chunk;
	cb->handles = dmt_calloc(cb->nchunks, sizeof(*cb->handles));
	if (!cb->handles) {
		cb->nchunks = 0;
		return dmt_err_nomem(ctx, &ctx->err, "CUDA buffer");
	}
	ret = cuda_map_chunks(ctx, cb, &prop, total, gran);
	if (ret)
		return ret;
	*sizep = total;
	return 0;
}

/*
 * Import: export [ptr, ptr + size) rounded out to host pages.  dma-buf
 * offset 0 is the rounded-down base, so the caller's pointer sits at offset
 * ptr - base; the segment table says so.
 */
static int cuda_import_range(struct devmemtcp_ctx *ctx,
			     const struct devmemtcp_buf_opts *opts,
			     struct cuda_buf *cb, CUdeviceptr *basep,
			     uint64_t *sizep)
{
	const struct dmt_cuda *cu = cb->cu;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	CUdeviceptr start = 0, base, end;
	size_t range = 0;
	unsigned int type = 0;
	CUresult r;

	if (!opts->size)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "CUDA import: opts.size is 0: give the length of the range at opts.cuda_ptr");
	r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				      opts->cuda_ptr);
	if (r != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "CUDA import: opts.cuda_ptr %#llx is not device memory: pass a pointer from cuMemAlloc/cudaMalloc or a cuMemMap'ed range",
			       (unsigned long long)opts->cuda_ptr);
	r = cu->cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
				      opts->cuda_ptr);
	if (r == CUDA_SUCCESS)
		r = cu->cuPointerGetAttribute(&range,
					      CU_POINTER_ATTRIBUTE_RANGE_SIZE,
					      opts->cuda_ptr);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r,
				    "cuPointerGetAttribute(RANGE)", NULL);
	base = opts->cuda_ptr & ~(page - 1);
	end = round_up(opts->cuda_ptr + opts->size, page);
	if (opts->cuda_ptr + opts->size > start + range || base < start ||
	    end > round_up(start + range, page))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "CUDA import: [%#llx, +%llu) rounded to pages is [%#llx, %#llx), outside its allocation [%#llx, +%zu): allocate whole pages",
			       (unsigned long long)opts->cuda_ptr,
			       (unsigned long long)opts->size,
			       (unsigned long long)base, (unsigned long long)end,
			       (unsigned long long)start, range);
	*basep = base;
	*sizep = end - base;
	return 0;
}

static int cuda_buf_new(struct devmemtcp_ctx *ctx,
			const struct devmemtcp_buf_opts *opts,
			struct devmemtcp_buf *buf)
{
	struct devmemtcp_segment seg;
	struct cuda_buf *cb;
	CUdeviceptr base = 0;
	uint64_t size = 0;
	int ret, fd = -1, ordinal = opts->cuda_device;
	CUcontext c;

	cb = dmt_calloc(1, sizeof(*cb));
	if (!cb)
		return dmt_err_nomem(ctx, &ctx->err, "CUDA buffer");
	cb->cu = dmt_cuda_get(ctx, &ctx->err, &ret);
	if (!cb->cu)
		goto err_free;
	if (opts->cuda_ptr) {
		/* The pointer says where it lives; cuda_device is ignored. */
		ret = cb->cu->cuPointerGetAttribute(&ordinal,
						    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
						    opts->cuda_ptr);
		if (ret != CUDA_SUCCESS) {
			ret = dmt_err(ctx, &ctx->err, -EINVAL,
				      "CUDA import: opts.cuda_ptr %#llx is not a CUDA pointer: pass device memory from cuMemAlloc/cudaMalloc",
				      (unsigned long long)opts->cuda_ptr);
			goto err_free;
		}
	}
	cb->ordinal = ordinal;
	ret = dmt_cuda_ctx_enter(ctx, &ctx->err, cb->cu, ordinal, &cb->dev,
				 &cb->cctx);
	if (ret)
		goto err_free;
	ret = cuda_check_dmabuf(ctx, cb);
	if (ret)
		goto err_ctx;
	if (opts->cuda_ptr) {
		ret = cuda_import_range(ctx, opts, cb, &base, &size);
	} else {
		ret = cuda_alloc(ctx, opts, cb, &size);
		base = cb->va;
	}
	if (ret)
		goto err_unmap;
	ret = cuda_export(ctx, cb, base, size, &fd);
	if (ret)
		goto err_unmap;
	seg = (struct devmemtcp_segment){ .offset = 0, .len = size,
					  .addr = base };
	buf->size = size;
	ret = dmt_buf_set_segments(buf, &seg, 1);
	if (ret)
		goto err_close;
	cb->cu->cuCtxPopCurrent(&c);
	buf->fd = fd;
	buf->own_fd = true;
	buf->priv = cb;
	return 0;

err_close:
	close(fd);
err_unmap:
	cuda_buf_unmap(cb);
err_ctx:
	dmt_cuda_ctx_leave(cb->cu, cb->dev);
err_free:
	free(cb);
	return ret;
}

static int cuda_create(struct devmemtcp_ctx *ctx,
		       const struct devmemtcp_buf_opts *opts,
		       struct devmemtcp_buf *buf)
{
	int saved = errno, ret = cuda_buf_new(ctx, opts, buf);

	errno = saved;	/* libcuda sets it */
	return ret;
}

const struct dmt_buf_provider dmt_cuda_provider = {
	.create = cuda_create,
	.release = cuda_buf_release,
};
