// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * GPU layer (8): gather kernels on CUDA streams, no-copy views, and fences
 * that hold token releases back until the GPU is done with the bytes.
 *
 * A gather writes 16-byte descriptors into one of a few pinned,
 * write-combined host slots and launches one kernel per slot; the kernel
 * reads the descriptors over PCIe itself, so the transfer overlaps the
 * copying instead of preceding it.  Each slot carries an event; a slot is
 * reused only after its event completed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "gpu.h"

#define GPU_MAX_FRAGS_DEFAULT (1u << 18)
#define GPU_SLOTS_DEFAULT 4u
#define GPU_WARPS_PER_BLOCK 8u
/* Bytes a warp copies, in 2 to 32 fragments.  Few: the last wave of blocks
 * ends soon after the others; not too few: fetching its descriptors over
 * PCIe stays a small part of a warp's life.  On an H200, 2 fragments of
 * 4 KiB, 4-8 of 1448 B and 2 of a mixed set (10 KiB on average) were best
 * (bench/results/gather-h200.md); one fragment per warp was 4x slower. */
#define GPU_BYTES_PER_WARP (8u << 10)
#define GPU_PER_WARP_MIN 2u
/* Output positions are 32-bit: a launch covers less than 4 GiB. */
#define GPU_POS_MAX 0xffffffffull

struct gpu_slot {
	struct dmt_gather_desc *desc;	/* pinned host */
	struct dmt_gather_dst *dst;	/* pinned host */
	CUdeviceptr desc_dev;		/* what the kernel reads */
	CUdeviceptr dst_dev;
	CUevent done;
	bool busy;
};

struct devmemtcp_gpu_fence {
	struct devmemtcp_gpu *gpu;
	CUevent ev;
	struct devmemtcp_gpu_fence *next;
};

struct devmemtcp_gpu {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;
	const struct dmt_cuda *cu;
	int ordinal;
	CUdevice dev;
	CUcontext cctx;
	CUmodule mod;
	CUfunction fn_gather;
	CUfunction fn_spin;
	uint32_t per_warp;		/* fixed descriptors per warp, 0: auto */
	uint32_t warps_per_block;
	uint32_t flags;
	uint32_t max_frags;
	uint32_t nslots;
	uint32_t next_slot;
	struct gpu_slot *slots;
	void *host;			/* every slot's pinned memory */
	CUdeviceptr dev_copy;		/* DEVMEMTCP_GPU_DESC_COPY buffers */
	/* Fences outlive devmemtcp_gpu_free: the last reference frees. */
	pthread_mutex_t lock;
	unsigned long refs;
	struct devmemtcp_gpu_fence *free_fences;
};

static size_t slot_bytes(const struct devmemtcp_gpu *gpu)
{
	return (size_t)gpu->max_frags * sizeof(struct dmt_gather_desc) +
	       DMT_GATHER_DST_MAX * sizeof(struct dmt_gather_dst);
}

static int ctx_push(struct devmemtcp_gpu *gpu)
{
	CUresult r = gpu->cu->cuCtxPushCurrent(gpu->cctx);

	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r, "cuCtxPushCurrent",
				    NULL);
	return 0;
}

static void ctx_pop(struct devmemtcp_gpu *gpu)
{
	CUcontext c;

	gpu->cu->cuCtxPopCurrent(&c);
}

/* Everything but the struct itself; called with the context current. */
static void gpu_destroy(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	struct devmemtcp_gpu_fence *f, *next;

	for (uint32_t i = 0; gpu->slots && i < gpu->nslots; i++) {
		if (gpu->slots[i].done) {
			if (gpu->slots[i].busy)
				cu->cuEventSynchronize(gpu->slots[i].done);
			cu->cuEventDestroy(gpu->slots[i].done);
		}
	}
	for (f = gpu->free_fences; f; f = next) {
		next = f->next;
		cu->cuEventDestroy(f->ev);
		free(f);
	}
	gpu->free_fences = NULL;
	if (gpu->dev_copy)
		cu->cuMemFree(gpu->dev_copy);
	if (gpu->host)
		cu->cuMemFreeHost(gpu->host);
	if (gpu->mod)
		cu->cuModuleUnload(gpu->mod);
	free(gpu->slots);
	gpu->slots = NULL;
}

static void gpu_unref(struct devmemtcp_gpu *gpu)
{
	bool last;

	pthread_mutex_lock(&gpu->lock);
	last = --gpu->refs == 0;
	pthread_mutex_unlock(&gpu->lock);
	if (!last)
		return;
	gpu->cu->cuCtxPushCurrent(gpu->cctx);
	gpu_destroy(gpu);
	ctx_pop(gpu);
	gpu->cu->cuDevicePrimaryCtxRelease(gpu->dev);
	pthread_mutex_destroy(&gpu->lock);
	free(gpu);
}

static int gpu_load_kernels(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	const char *name, *per;
	CUresult r;

	if (!dmt_gather_fatbin_size)
		return 0;	/* built without nvcc: gathers say so */
	r = cu->cuModuleLoadData(&gpu->mod, dmt_gather_fatbin);
	if (r != CUDA_SUCCESS) {
		gpu->mod = NULL;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuModuleLoadData(gather kernels)",
				    "the kernels are built for sm_80 and sm_90 with PTX: the driver may be older than the CUDA toolkit that built them, update the NVIDIA driver");
	}
	/* Tuning knobs for the benchmark (test builds only), not an
	 * interface. */
	name = dmt_hook_env("DEVMEMTCP_GATHER_KERNEL");
	if (!name || !*name)
		name = "dmt_gather";
	per = dmt_hook_env("DEVMEMTCP_GATHER_PER");
	if (per && atoi(per) >= 1 && atoi(per) <= 32)
		gpu->per_warp = (uint32_t)atoi(per);
	per = dmt_hook_env("DEVMEMTCP_GATHER_WARPS");
	gpu->warps_per_block = GPU_WARPS_PER_BLOCK;
	if (per && atoi(per) >= 1 && atoi(per) <= 8)
		gpu->warps_per_block = (uint32_t)atoi(per);
	r = cu->cuModuleGetFunction(&gpu->fn_gather, gpu->mod, name);
	if (r == CUDA_SUCCESS)
		r = cu->cuModuleGetFunction(&gpu->fn_spin, gpu->mod, "dmt_spin");
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuModuleGetFunction(dmt_gather)", NULL);
	return 0;
}

static int gpu_alloc_slots(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	size_t per = slot_bytes(gpu), total = per * gpu->nslots;
	CUdeviceptr hdev = 0;
	CUresult r;

	gpu->slots = dmt_calloc(gpu->nslots, sizeof(*gpu->slots));
	if (!gpu->slots)
		return dmt_err_nomem(gpu->ctx, &gpu->ctx->err,
				     "devmemtcp_gpu_new");
	/* Write-combined: the CPU only writes descriptors, the GPU reads
	 * them once, across PCIe. */
	r = cu->cuMemHostAlloc(&gpu->host, total,
			       CU_MEMHOSTALLOC_DEVICEMAP |
				       (dmt_hook_env("DEVMEMTCP_GATHER_CACHED")
						? 0
						: CU_MEMHOSTALLOC_WRITECOMBINED));
	if (r != CUDA_SUCCESS) {
		gpu->host = NULL;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuMemHostAlloc(descriptors)",
				    "lower opts.max_frags or opts.slots, or raise the locked-memory limit (ulimit -l)");
	}
	r = cu->cuMemHostGetDevicePointer(&hdev, gpu->host, 0);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuMemHostGetDevicePointer", NULL);
	if (gpu->flags & DEVMEMTCP_GPU_DESC_COPY) {
		r = cu->cuMemAlloc(&gpu->dev_copy, total);
		if (r != CUDA_SUCCESS) {
			gpu->dev_copy = 0;
			return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
					    "cuMemAlloc(descriptors)", NULL);
		}
		hdev = gpu->dev_copy;
	}
	for (uint32_t i = 0; i < gpu->nslots; i++) {
		struct gpu_slot *s = &gpu->slots[i];
		size_t off = per * i;
		size_t doff = (size_t)gpu->max_frags * sizeof(*s->desc);

		s->desc = (void *)((char *)gpu->host + off);
		s->dst = (void *)((char *)gpu->host + off + doff);
		s->desc_dev = hdev + off;
		s->dst_dev = hdev + off + doff;
		r = cu->cuEventCreate(&s->done, CU_EVENT_DISABLE_TIMING);
		if (r != CUDA_SUCCESS) {
			s->done = NULL;
			return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
					    "cuEventCreate", NULL);
		}
	}
	return 0;
}

static int gpu_new_impl(struct devmemtcp_ctx *ctx,
			const struct devmemtcp_gpu_opts *opts,
			struct devmemtcp_gpu **gpup)
{
	struct devmemtcp_gpu *gpu;
	int ret;

	if (!ctx)
		return -EINVAL;
	if (!gpup)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: gpu pointer is NULL");
	*gpup = NULL;
	ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_gpu_opts);
	if (ret)
		return ret;
	if (opts && (opts->flags & ~(uint32_t)DEVMEMTCP_GPU_DESC_COPY))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: unknown flags %#x in opts.flags",
			       opts->flags & ~(uint32_t)DEVMEMTCP_GPU_DESC_COPY);
	if (opts && opts->max_frags > (1u << 26))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: opts.max_frags %u is above %u: larger gathers are split into launches anyway",
			       opts->max_frags, 1u << 26);
	if (opts && opts->slots > 64)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: opts.slots %u is above 64",
			       opts->slots);
	gpu = dmt_calloc(1, sizeof(*gpu));
	if (!gpu)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_gpu_new");
	gpu->ctx = ctx;
	gpu->refs = 1;
	pthread_mutex_init(&gpu->lock, NULL);
	gpu->ordinal = DMT_OPT(opts, devmemtcp_gpu_opts, cuda_device, 0);
	gpu->flags = DMT_OPT(opts, devmemtcp_gpu_opts, flags, 0);
	gpu->max_frags = DMT_OPT(opts, devmemtcp_gpu_opts, max_frags,
				 GPU_MAX_FRAGS_DEFAULT);
	gpu->nslots = DMT_OPT(opts, devmemtcp_gpu_opts, slots,
			      GPU_SLOTS_DEFAULT);
	gpu->cu = dmt_cuda_get(ctx, &ctx->err, &ret);
	if (!gpu->cu)
		goto err_free;
	ret = dmt_cuda_ctx_enter(ctx, &ctx->err, gpu->cu, gpu->ordinal,
				 &gpu->dev, &gpu->cctx);
	if (ret)
		goto err_free;
	ret = gpu_load_kernels(gpu);
	if (!ret)
		ret = gpu_alloc_slots(gpu);
	if (ret) {
		gpu_destroy(gpu);
		dmt_cuda_ctx_leave(gpu->cu, gpu->dev);
		goto err_free;
	}
	ctx_pop(gpu);
	*gpup = gpu;
	return 0;

err_free:
	pthread_mutex_destroy(&gpu->lock);
	free(gpu);
	return ret;
}

DEVMEMTCP_EXPORT void devmemtcp_gpu_free(struct devmemtcp_gpu *gpu)
{
	DMT_KEEP_ERRNO;
	if (gpu)
		gpu_unref(gpu);
}

DEVMEMTCP_EXPORT const char *devmemtcp_gpu_errmsg(const struct devmemtcp_gpu *gpu)
{
	DMT_KEEP_ERRNO;
	return gpu ? gpu->err.msg : "";
}

const struct dmt_cuda *dmt_gpu_cuda(const struct devmemtcp_gpu *gpu)
{
	return gpu->cu;
}

/* ------------------------------------------------------------------------ */
/* Gather.                                                                   */

static int slot_acquire(struct devmemtcp_gpu *gpu, struct gpu_slot **sp)
{
	struct gpu_slot *s = &gpu->slots[gpu->next_slot];
	CUresult r;

	gpu->next_slot = (gpu->next_slot + 1) % gpu->nslots;
	if (s->busy) {
		r = gpu->cu->cuEventSynchronize(s->done);
		if (r != CUDA_SUCCESS)
			return dmt_cuda_err(gpu->ctx, &gpu->err, r,
					    "cuEventSynchronize(previous gather)",
					    "an earlier kernel on the stream failed");
		s->busy = false;
	}
	*sp = s;
	return 0;
}

static int slot_launch(struct devmemtcp_gpu *gpu, struct gpu_slot *s,
		       uint32_t nd, uint32_t ndst, uint64_t bytes,
		       CUstream stream)
{
	const struct dmt_cuda *cu = gpu->cu;
	CUdeviceptr descs = s->desc_dev, dsts = s->dst_dev;
	unsigned long long bias = s->dst[0].bias;
	uint32_t per, warps, blocks;
	void *params[] = { &descs, &nd, &dsts, &ndst, &bias, &per };
	CUresult r;

	if (!nd)
		return 0;
	per = gpu->per_warp;
	if (!per) {
		uint64_t avg = bytes / nd + 1;

		per = (uint32_t)((GPU_BYTES_PER_WARP + avg - 1) / avg);
		per = per < GPU_PER_WARP_MIN ? GPU_PER_WARP_MIN
		      : per > 32	     ? 32
					     : per;
	}
	warps = (nd + per - 1) / per;
	blocks = (warps + gpu->warps_per_block - 1) / gpu->warps_per_block;
	/* The descriptors went through write-combining buffers. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (gpu->flags & DEVMEMTCP_GPU_DESC_COPY) {
		r = cu->cuMemcpyHtoDAsync(descs, s->desc,
					  (size_t)nd * sizeof(*s->desc), stream);
		if (r == CUDA_SUCCESS && ndst > 1)
			r = cu->cuMemcpyHtoDAsync(dsts, s->dst,
						  (size_t)ndst * sizeof(*s->dst),
						  stream);
		if (r != CUDA_SUCCESS)
			return dmt_cuda_err(gpu->ctx, &gpu->err, r,
					    "cuMemcpyHtoDAsync(descriptors)",
					    NULL);
	}
	r = cu->cuLaunchKernel(gpu->fn_gather, blocks, 1, 1,
			       32 * gpu->warps_per_block, 1, 1,
			       ndst > 1 ? ndst * sizeof(struct dmt_gather_dst) : 0,
			       stream, params, NULL);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuLaunchKernel(dmt_gather)",
				    "is stream a stream of this GPU's primary context?");
	r = cu->cuEventRecord(s->done, stream);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r, "cuEventRecord",
				    NULL);
	s->busy = true;
	return 0;
}

/* Validate: every non-linear fragment has an address; the bytes fit. */
static int gather_check(struct devmemtcp_gpu *gpu,
			const struct devmemtcp_frag *frags, size_t n,
			const struct devmemtcp_gpu_iov *dsts, size_t ndst)
{
	uint64_t need = 0, room = 0;

	for (size_t i = 0; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (!f->addr && f->len && !(f->flags & DEVMEMTCP_FRAG_LINEAR))
			return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
				       "fragment %zu (binding %u, offset %#llx) has no device address: register its binding's buffer with devmemtcp_rx_add_buf",
				       i, f->binding_id,
				       (unsigned long long)f->offset);
		need += f->len;
	}
	for (size_t i = 0; i < ndst; i++)
		room += dsts[i].len;
	if (need > room)
		return dmt_err(gpu->ctx, &gpu->err, -ENOSPC,
			       "the fragments hold %llu bytes but the destinations only %llu: give more room",
			       (unsigned long long)need,
			       (unsigned long long)room);
	return 0;
}

/* One destination: no fragment is split, output is bias + pos. */
static int gather_one(struct devmemtcp_gpu *gpu,
		      const struct devmemtcp_frag *frags, size_t n,
		      uint64_t addr, CUstream stream)
{
	size_t i = 0;
	int ret;

	while (i < n) {
		struct gpu_slot *s = NULL;
		struct dmt_gather_desc *d;
		uint32_t nd = 0, max = gpu->max_frags;
		uint64_t pos = 0;

		ret = slot_acquire(gpu, &s);
		if (ret)
			return ret;
		d = s->desc;
		for (; i < n && nd < max; i++) {
			const struct devmemtcp_frag *f = &frags[i];

			if (pos + f->len > GPU_POS_MAX)
				break;
			if (!(f->flags & DEVMEMTCP_FRAG_LINEAR) && f->len) {
				d[nd].src = f->addr;
				d[nd].len = f->len;
				d[nd].pos = (uint32_t)pos;
				nd++;
			}
			pos += f->len;
		}
		s->dst[0] = (struct dmt_gather_dst){ 0, addr };
		ret = slot_launch(gpu, s, nd, 1, pos, stream);
		if (ret)
			return ret;
		addr += pos;
	}
	return 0;
}

/* Several destinations: fragments are cut where a destination ends. */
static int gather_many(struct devmemtcp_gpu *gpu,
		       const struct devmemtcp_frag *frags, size_t n,
		       const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		       CUstream stream)
{
	size_t i = 0, di = 0;
	uint64_t foff = 0, doff = 0;
	int ret;

	while (di < ndst && dsts[di].len == 0)
		di++;
	while (i < n) {
		struct gpu_slot *s = NULL;
		struct dmt_gather_desc *d;
		uint32_t nd = 0, nt = 0, max = gpu->max_frags;
		uint64_t pos = 0;

		ret = slot_acquire(gpu, &s);
		if (ret)
			return ret;
		d = s->desc;
		s->dst[nt++] = (struct dmt_gather_dst){
			0, di < ndst ? dsts[di].addr + doff : 0 };
		while (i < n) {
			const struct devmemtcp_frag *f = &frags[i];
			uint64_t take, rem = f->len - foff, room;

			if (!rem) {
				i++;
				foff = 0;
				continue;
			}
			room = dsts[di].len - doff;
			if (!room) {
				if (nt == DMT_GATHER_DST_MAX)
					break;
				di++;
				doff = 0;
				s->dst[nt++] = (struct dmt_gather_dst){
					pos, dsts[di].addr - pos };
				continue;
			}
			take = rem < room ? rem : room;
			if (pos + take > GPU_POS_MAX)
				take = GPU_POS_MAX - pos;
			if (!take)
				break;
			if (!(f->flags & DEVMEMTCP_FRAG_LINEAR)) {
				if (nd == max)
					break;
				d[nd].src = f->addr + foff;
				d[nd].len = (uint32_t)take;
				d[nd].pos = (uint32_t)pos;
				nd++;
			}
			pos += take;
			doff += take;
			foff += take;
		}
		ret = slot_launch(gpu, s, nd, nt, pos, stream);
		if (ret)
			return ret;
	}
	return 0;
}

static int gpu_gather_impl(struct devmemtcp_gpu *gpu,
			   const struct devmemtcp_frag *frags,
			   size_t n,
			   const struct devmemtcp_gpu_iov *dsts,
			   size_t ndst, void *stream)
{
	int ret;

	if (!gpu)
		return -EINVAL;
	if ((n && !frags) || (ndst && !dsts))
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
			       "devmemtcp_gpu_gather: frags or dsts is NULL with a non-zero count");
	if (!gpu->fn_gather)
		return dmt_err(gpu->ctx, &gpu->err, -EOPNOTSUPP,
			       "this libdevmemtcp was built without the gather kernels: install the CUDA toolkit (nvcc) and rebuild with -Dcuda=enabled");
	ret = gather_check(gpu, frags, n, dsts, ndst);
	if (ret || !n)
		return ret;
	ret = ctx_push(gpu);
	if (ret)
		return ret;
	if (ndst == 1)
		ret = gather_one(gpu, frags, n, dsts[0].addr, (CUstream)stream);
	else
		ret = gather_many(gpu, frags, n, dsts, ndst, (CUstream)stream);
	ctx_pop(gpu);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_view(struct devmemtcp_gpu *gpu,
					const struct devmemtcp_frag *frags,
					size_t n, struct devmemtcp_gpu_iov *iov,
					size_t max)
{
	DMT_KEEP_ERRNO;
	size_t cnt = 0;
	uint64_t end = 0;	/* end of the last range, stored or not */
	struct dmt_err *err = gpu ? &gpu->err : NULL;
	const struct devmemtcp_ctx *ctx = gpu ? gpu->ctx : NULL;

	if ((n && !frags) || (max && !iov))
		return gpu ? dmt_err(ctx, err, -EINVAL,
				     "devmemtcp_gpu_view: frags or iov is NULL with a non-zero count")
			   : -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (!f->len || (f->flags & DEVMEMTCP_FRAG_LINEAR))
			continue;
		if (!f->addr)
			return gpu ? dmt_err(ctx, err, -EINVAL,
					     "fragment %zu (binding %u, offset %#llx) has no device address: register its binding's buffer with devmemtcp_rx_add_buf",
					     i, f->binding_id,
					     (unsigned long long)f->offset)
				   : -EINVAL;
		if (cnt && end == f->addr) {
			if (cnt <= max)
				iov[cnt - 1].len += f->len;
			end += f->len;
			continue;
		}
		end = f->addr + f->len;
		if (cnt < max)
			iov[cnt] = (struct devmemtcp_gpu_iov){ f->addr, f->len };
		cnt++;
		if (cnt > (size_t)INT32_MAX)
			return gpu ? dmt_err(ctx, err, -EOVERFLOW,
					     "devmemtcp_gpu_view: more than 2^31 ranges: view fewer fragments at once")
				   : -EOVERFLOW;
	}
	return (int)cnt;
}

/* ------------------------------------------------------------------------ */
/* Fences and deferred release.                                              */

static int gpu_fence_new_impl(struct devmemtcp_gpu *gpu,
			      void *stream,
			      struct devmemtcp_gpu_fence **fencep)
{
	struct devmemtcp_gpu_fence *f;
	CUresult r;
	int ret;

	if (!gpu)
		return -EINVAL;
	if (!fencep)
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
			       "devmemtcp_gpu_fence_new: fence pointer is NULL");
	*fencep = NULL;
	pthread_mutex_lock(&gpu->lock);
	f = gpu->free_fences;
	if (f)
		gpu->free_fences = f->next;
	gpu->refs++;
	pthread_mutex_unlock(&gpu->lock);
	ret = ctx_push(gpu);
	if (ret)
		goto err_put;
	if (!f) {
		f = dmt_calloc(1, sizeof(*f));
		if (!f) {
			ret = dmt_err_nomem(gpu->ctx, &gpu->err,
					    "devmemtcp_gpu_fence_new");
			goto err_pop;
		}
		f->gpu = gpu;
		r = gpu->cu->cuEventCreate(&f->ev, CU_EVENT_DISABLE_TIMING);
		if (r != CUDA_SUCCESS) {
			free(f);
			f = NULL;
			ret = dmt_cuda_err(gpu->ctx, &gpu->err, r,
					   "cuEventCreate", NULL);
			goto err_pop;
		}
	}
	r = gpu->cu->cuEventRecord(f->ev, (CUstream)stream);
	if (r != CUDA_SUCCESS) {
		ret = dmt_cuda_err(gpu->ctx, &gpu->err, r, "cuEventRecord",
				   "is stream a stream of this GPU's primary context?");
		goto err_pop;
	}
	ctx_pop(gpu);
	*fencep = f;
	return 0;

err_pop:
	ctx_pop(gpu);
err_put:
	pthread_mutex_lock(&gpu->lock);
	if (f) {
		f->next = gpu->free_fences;
		gpu->free_fences = f;
	}
	pthread_mutex_unlock(&gpu->lock);
	gpu_unref(gpu);
	return ret;
}

static void fence_put(struct devmemtcp_gpu_fence *f)
{
	struct devmemtcp_gpu *gpu = f->gpu;

	pthread_mutex_lock(&gpu->lock);
	f->next = gpu->free_fences;
	gpu->free_fences = f;
	pthread_mutex_unlock(&gpu->lock);
	gpu_unref(gpu);
}

static int gpu_fence_done_impl(void *arg, bool wait)
{
	struct devmemtcp_gpu_fence *f = arg;
	CUresult r;

	if (!f)
		return -EINVAL;
	r = wait ? f->gpu->cu->cuEventSynchronize(f->ev)
		 : f->gpu->cu->cuEventQuery(f->ev);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(f->gpu->ctx, &f->gpu->err, r,
				    wait ? "cuEventSynchronize(fence)"
					 : "cuEventQuery(fence)",
				    "a kernel on the fenced stream failed");
	fence_put(f);
	return 1;
}

static int gpu_release_after_impl(struct devmemtcp_gpu *gpu,
				  struct devmemtcp_rx *rx,
				  const struct devmemtcp_frag *frags,
				  size_t n, void *stream)
{
	struct devmemtcp_gpu_fence *f;
	int ret;

	if (!gpu)
		return -EINVAL;
	if (!rx)
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
			       "devmemtcp_gpu_release_after: rx is NULL");
	ret = gpu_fence_new_impl(gpu, stream, &f);
	if (ret)
		return ret;
	ret = devmemtcp_rx_release_after(rx, frags, n, devmemtcp_gpu_fence_done,
					 f);
	if (ret < 0) {
		fence_put(f);
		return dmt_err(gpu->ctx, &gpu->err, ret,
			       "devmemtcp_rx_release_after: %s",
			       devmemtcp_rx_errmsg(rx));
	}
	return ret;
}

int dmt_gpu_spin(struct devmemtcp_gpu *gpu, void *stream, uint64_t ns)
{
	unsigned long long arg = ns;
	void *params[] = { &arg };
	CUresult r;
	int ret;

	if (!gpu->fn_spin)
		return -EOPNOTSUPP;
	ret = ctx_push(gpu);
	if (ret)
		return ret;
	r = gpu->cu->cuLaunchKernel(gpu->fn_spin, 1, 1, 1, 1, 1, 1, 0,
				    (CUstream)stream, params, NULL);
	ctx_pop(gpu);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuLaunchKernel(dmt_spin)", NULL);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Entry points: errno is left as the caller had it (dlopen and libcuda
 * set it). */

DEVMEMTCP_EXPORT int devmemtcp_gpu_new(struct devmemtcp_ctx *ctx,
				       const struct devmemtcp_gpu_opts *opts,
				       struct devmemtcp_gpu **gpu)
{
	DMT_KEEP_ERRNO;
	int saved = errno, ret = gpu_new_impl(ctx, opts, gpu);

	errno = saved;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_gather(struct devmemtcp_gpu *gpu,
					  const struct devmemtcp_frag *frags,
					  size_t n,
					  const struct devmemtcp_gpu_iov *dsts,
					  size_t ndst, void *stream)
{
	DMT_KEEP_ERRNO;
	int saved = errno;
	int ret = gpu_gather_impl(gpu, frags, n, dsts, ndst, stream);

	errno = saved;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_fence_new(struct devmemtcp_gpu *gpu,
					     void *stream,
					     struct devmemtcp_gpu_fence **fence)
{
	DMT_KEEP_ERRNO;
	int saved = errno, ret = gpu_fence_new_impl(gpu, stream, fence);

	errno = saved;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_fence_done(void *fence, bool wait)
{
	DMT_KEEP_ERRNO;
	int saved = errno, ret = gpu_fence_done_impl(fence, wait);

	errno = saved;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_release_after(struct devmemtcp_gpu *gpu,
						 struct devmemtcp_rx *rx,
						 const struct devmemtcp_frag *frags,
						 size_t n, void *stream)
{
	DMT_KEEP_ERRNO;
	int saved = errno;
	int ret = gpu_release_after_impl(gpu, rx, frags, n, stream);

	errno = saved;
	return ret;
}
