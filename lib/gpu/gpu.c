// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer: the handle (its context, the kernels, pinned slots, the
 * persistent kernel when asked for) and the entry points.  The launches
 * are in gpu_launch.c, the persistent kernel's host side in gpu_persist.c,
 * descriptors and views in gpu_desc.c, fences and releases held back by
 * them in gpu_fence.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf/cuda.h"
#include "core/fork.h"
#include "gpu.h"

#define GPU_MAX_FRAGS_DEFAULT (1u << 18)
#define GPU_SLOTS_DEFAULT 4u
/* Persistent: more jobs in flight, each of the size of a few receives. */
#define GPU_PERSIST_MAX_FRAGS_DEFAULT (1u << 14)
#define GPU_PERSIST_SLOTS_DEFAULT 32u
/* Inline launches carry up to this many descriptors (16 KiB). */
#define GPU_INLINE_MAX_DEFAULT 1024u

static const uint32_t inline_sizes[DMT_INLINE_NSIZES] = DMT_INLINE_SIZES;

static size_t slot_bytes(const struct devmemtcp_gpu *gpu)
{
	return (size_t)gpu->max_frags * sizeof(struct dmt_gather_desc) +
	       DMT_GATHER_DST_MAX * sizeof(struct dmt_gather_dst);
}

/* A context switch costs more than a check: push only when another
 * context is current (the caller's runtime usually has ours current). */
int dmt_gpu_ctx_enter(struct devmemtcp_gpu *gpu, bool *pushed)
{
	CUcontext cur = NULL;
	CUresult r;

	*pushed = false;
	if (gpu->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == gpu->cctx)
		return 0;
	r = gpu->cu->cuCtxPushCurrent(gpu->cctx);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r, "cuCtxPushCurrent",
				    NULL);
	*pushed = true;
	return 0;
}

void dmt_gpu_ctx_leave(struct devmemtcp_gpu *gpu, bool pushed)
{
	CUcontext c;

	if (pushed)
		gpu->cu->cuCtxPopCurrent(&c);
}

/* Everything but the struct itself; called with the context current. */
static void gpu_destroy(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;

	for (uint32_t i = 0; gpu->slots && i < gpu->nslots; i++) {
		if (gpu->slots[i].done) {
			if (gpu->slots[i].busy)
				cu->cuEventSynchronize(gpu->slots[i].done);
			cu->cuEventDestroy(gpu->slots[i].done);
		}
	}
	dmt_batch_fini(gpu);
	dmt_persist_fini(gpu);	/* before the slots it reads go */
	dmt_gpu_graphs_fini(gpu);	/* before the kernels they launch go */
	dmt_gpu_fences_fini(gpu);
	if (gpu->aux)
		cu->cuStreamDestroy(gpu->aux);
	gpu->aux = NULL;
	if (gpu->dev_copy)
		cu->cuMemFree(gpu->dev_copy);
	if (gpu->host)
		cu->cuMemFreeHost(gpu->host);
	if (gpu->mod)
		cu->cuModuleUnload(gpu->mod);
	free(gpu->slots);
	gpu->slots = NULL;
	free(gpu->inl);
	gpu->inl = NULL;
}

void dmt_gpu_unref(struct devmemtcp_gpu *gpu)
{
	bool last;

	pthread_mutex_lock(&gpu->lock);
	last = --gpu->refs == 0;
	pthread_mutex_unlock(&gpu->lock);
	if (!last)
		return;
	if (dmt_forked(gpu->fork_gen)) {
		/* CUDA does not survive fork(): the parent's context, streams
		 * and slots are not this process's to free */
		free(gpu);
		return;
	}
	gpu->cu->cuCtxPushCurrent(gpu->cctx);
	gpu_destroy(gpu);
	dmt_gpu_ctx_leave(gpu, true);
	gpu->cu->cuDevicePrimaryCtxRelease(gpu->dev);
	pthread_mutex_destroy(&gpu->lock);
	free(gpu);
}

/* Tuning knobs for tests and the benchmark (test builds only), not an
 * interface. */
static void gpu_knobs(struct devmemtcp_gpu *gpu)
{
	const char *mode = dmt_hook_env("DEVMEMTCP_GATHER_MODE");
	int v;

	v = dmt_hook_env_int("DEVMEMTCP_GATHER_PER");
	if (v >= 1 && v <= 32)
		gpu->per_warp = (uint32_t)v;
	v = dmt_hook_env_int("DEVMEMTCP_GATHER_SPLIT");
	if (v >= 1 && v <= (int)DMT_SPLIT_MAX)
		gpu->split = (uint32_t)v;
	v = dmt_hook_env_int("DEVMEMTCP_GATHER_WARPS");
	if (v >= 1 && v <= 8)
		gpu->warps_per_block = (uint32_t)v;
	if (mode && !strcmp(mode, "ring") && gpu->mode == DMT_GATHER_AUTO)
		gpu->mode = DMT_GATHER_RING;
	gpu->inline_1d = dmt_hook_env_int("DEVMEMTCP_GATHER_INLINE_1D") > 0;
	if (dmt_hook_env("DEVMEMTCP_GATHER_INLINE_MAX")) {
		v = dmt_hook_env_int("DEVMEMTCP_GATHER_INLINE_MAX");
		gpu->inline_max = v < (int)gpu->inline_max ? (uint32_t)v
							   : gpu->inline_max;
	}
}

static int get_function(struct devmemtcp_gpu *gpu, CUfunction *fn,
			const char *name)
{
	CUresult r = gpu->cu->cuModuleGetFunction(fn, gpu->mod, name);

	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuModuleGetFunction", name);
	return 0;
}

static int gpu_load_kernels(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	char iname[32];
	CUresult r;
	int ret, sms = 0, cc = 0;

	/* built without nvcc (or a test of such a build): gathers say so */
	if (!dmt_gather_fatbin_size ||
	    dmt_hook_env_int("DEVMEMTCP_TEST_NO_GATHER_KERNELS") > 0)
		return 0;
	r = cu->cuModuleLoadData(&gpu->mod, dmt_gather_fatbin);
	if (r != CUDA_SUCCESS) {
		gpu->mod = NULL;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuModuleLoadData(gather kernels)",
				    "the kernels are built for sm_80 and sm_90 with PTX: the driver may be older than the CUDA toolkit that built them, update the NVIDIA driver");
	}
	cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
				 gpu->dev);
	gpu->sms = sms > 0 ? (uint32_t)sms : 1;
	if (cu->cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
				     gpu->dev) == CUDA_SUCCESS && cc > 0)
		gpu->cc_major = (uint32_t)cc;
	ret = get_function(gpu, &gpu->fn_gather, "dmt_gather");
	for (int k = 0; !ret && k < DMT_INLINE_NSIZES; k++) {
		snprintf(iname, sizeof(iname), "dmt_gather_inline%u",
			 inline_sizes[k]);
		ret = get_function(gpu, &gpu->fn_inline[k], iname);
	}
	if (!ret)
		ret = get_function(gpu, &gpu->fn_spin, "dmt_spin");
	if (!ret)
		ret = get_function(gpu, &gpu->fn_nop, "dmt_nop");
	return ret;
}

static int gpu_alloc_slots(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	size_t per = slot_bytes(gpu), total = per * gpu->nslots;
	CUdeviceptr hdev = 0;
	CUresult r;

	gpu->slots = dmt_calloc(gpu->nslots, sizeof(*gpu->slots));
	gpu->inl = dmt_malloc(sizeof(*gpu->inl) + DMT_GATHER_DST_MAX *
			      sizeof(struct dmt_gather_desc));
	if (!gpu->slots || !gpu->inl)
		return dmt_err_nomem(gpu->ctx, &gpu->ctx->err,
				     "devmemtcp_gpu_new");
	gpu->slot_stride = per;
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

/* A stream of the handle's own that stays idle: querying it tells
 * whether the context failed (a fence whose write never comes). */
static int gpu_aux_stream(struct devmemtcp_gpu *gpu)
{
	CUresult r = gpu->cu->cuStreamCreate(&gpu->aux, CU_STREAM_NON_BLOCKING);

	if (r != CUDA_SUCCESS) {
		gpu->aux = NULL;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuStreamCreate", NULL);
	}
	return 0;
}

#define GPU_FLAGS                                                              \
	((uint32_t)(DEVMEMTCP_GPU_DESC_COPY | DEVMEMTCP_GPU_PERSISTENT |       \
		    DEVMEMTCP_GPU_GRAPHS))
#define GPU_NO_INLINE                                                          \
	((uint32_t)(DEVMEMTCP_GPU_DESC_COPY | DEVMEMTCP_GPU_PERSISTENT))
#define GPU_COALESCE_MAX (64u << 20)

/* Coalesced gathers are inline launches (gpu_batch.c). */
static int gpu_coalesce_check(struct devmemtcp_ctx *ctx,
			      const struct devmemtcp_gpu_opts *opts)
{
	uint32_t bytes = DMT_OPT_GET(opts, devmemtcp_gpu_opts, coalesce_bytes, 0);

	if (bytes > GPU_COALESCE_MAX)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: opts.coalesce_bytes %u is above %u (64 MiB): a batch that large only delays its bytes",
			       bytes, GPU_COALESCE_MAX);
	if (bytes && (opts->flags & GPU_NO_INLINE))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: opts.coalesce_bytes coalesces gathers into inline launches, and with DEVMEMTCP_GPU_%s there are none: leave one of them off",
			       opts->flags & DEVMEMTCP_GPU_PERSISTENT ? "PERSISTENT"
								    : "DESC_COPY");
	return 0;
}

static int gpu_opts_check(struct devmemtcp_ctx *ctx,
			  const struct devmemtcp_gpu_opts *opts)
{
	int ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_gpu_opts);

	if (ret || !opts)
		return ret;
	if (opts->flags & ~GPU_FLAGS)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: unknown flags %#x in opts.flags",
			       opts->flags & ~GPU_FLAGS);
	if ((opts->flags & GPU_NO_INLINE) == GPU_NO_INLINE)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: DEVMEMTCP_GPU_DESC_COPY and DEVMEMTCP_GPU_PERSISTENT do not go together: the persistent kernel reads descriptors from pinned memory");
	if ((opts->flags & DEVMEMTCP_GPU_GRAPHS) && (opts->flags & GPU_NO_INLINE))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: DEVMEMTCP_GPU_GRAPHS changes how inline gathers are launched, and with DEVMEMTCP_GPU_%s there are none: leave one of the flags off",
			       opts->flags & DEVMEMTCP_GPU_PERSISTENT ? "PERSISTENT"
								    : "DESC_COPY");
	if (opts->max_frags > (1u << 26))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: opts.max_frags %u is above %u: larger gathers are split into launches anyway",
			       opts->max_frags, 1u << 26);
	if (opts->slots > 64)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_gpu_new: opts.slots %u is above 64",
			       opts->slots);
	return gpu_coalesce_check(ctx, opts);
}

/* Options into the handle; the persistent kernel takes slots by powers of
 * two (job j is in slot j % slots). */
static void gpu_config(struct devmemtcp_gpu *gpu,
		       const struct devmemtcp_gpu_opts *opts)
{
	bool persist;

	gpu->ordinal = DMT_OPT(opts, devmemtcp_gpu_opts, cuda_device, 0);
	gpu->flags = DMT_OPT(opts, devmemtcp_gpu_opts, flags, 0);
	persist = gpu->flags & DEVMEMTCP_GPU_PERSISTENT;
	gpu->mode = persist ? DMT_GATHER_PERSIST : DMT_GATHER_AUTO;
	gpu->max_frags = DMT_OPT(opts, devmemtcp_gpu_opts, max_frags,
				 persist ? GPU_PERSIST_MAX_FRAGS_DEFAULT
					 : GPU_MAX_FRAGS_DEFAULT);
	gpu->nslots = DMT_OPT(opts, devmemtcp_gpu_opts, slots,
			      persist ? GPU_PERSIST_SLOTS_DEFAULT
				      : GPU_SLOTS_DEFAULT);
	if (persist)
		while (gpu->nslots & (gpu->nslots - 1))
			gpu->nslots++;
	/* descriptors copied to the device: never inline */
	gpu->inline_max = gpu->flags & DEVMEMTCP_GPU_DESC_COPY
				  ? 0
				  : GPU_INLINE_MAX_DEFAULT;
	gpu->coalesce_bytes = DMT_OPT(opts, devmemtcp_gpu_opts, coalesce_bytes, 0);
	gpu->coalesce_us = DMT_OPT(opts, devmemtcp_gpu_opts, coalesce_us, 0);
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
	ret = gpu_opts_check(ctx, opts);
	if (ret)
		return ret;
	gpu = dmt_calloc(1, sizeof(*gpu));
	if (!gpu)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_gpu_new");
	gpu->ctx = ctx;
	gpu->fork_gen = dmt_fork_gen();
	gpu->refs = 1;
	pthread_mutex_init(&gpu->lock, NULL);
	gpu_config(gpu, opts);
	gpu->cu = dmt_cuda_get(ctx, &ctx->err, &ret);
	if (!gpu->cu)
		goto err_free;
	ret = dmt_cuda_ctx_enter(ctx, &ctx->err, gpu->cu, gpu->ordinal,
				 &gpu->dev, &gpu->cctx);
	if (ret)
		goto err_free;
	ret = gpu_load_kernels(gpu);
	gpu_knobs(gpu);
	dmt_gpu_launch_init(gpu);
	dmt_gpu_fences_init(gpu);
	if (!ret)
		ret = gpu_alloc_slots(gpu);
	if (!ret)
		ret = dmt_batch_init(gpu);
	if (!ret)
		ret = gpu_aux_stream(gpu);
	if (!ret)
		ret = dmt_gpu_fences_prepare(gpu);
	if (!ret && gpu->mode == DMT_GATHER_PERSIST && gpu->mod)
		ret = dmt_persist_init(gpu);
	if (ret) {
		gpu_destroy(gpu);
		dmt_cuda_ctx_leave(gpu->cu, gpu->dev);
		goto err_free;
	}
	dmt_gpu_ctx_leave(gpu, true);
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
	if (!gpu)
		return;
	/* queues what waits; a parent's handle in a forked child: the
	 * parent's batch is not this process's to launch (no driver call) */
	if (!dmt_forked(gpu->fork_gen))
		dmt_batch_close(gpu);
	dmt_gpu_unref(gpu);
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


/*
 * A gather whose last launch signals a fence once it has read every
 * fragment; the tokens wait on that fence.  Where no launch can carry one
 * (a gather of holes only, the persistent kernel, a handle whose fences
 * are events), the release waits for the stream instead, as
 * devmemtcp_gpu_release_after would.
 */
static int gather_release(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
			  const struct devmemtcp_frag *frags, size_t n,
			  const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			  CUstream stream)
{
	struct devmemtcp_gpu_fence *f = NULL;
	struct dmt_gather_fence kf;
	bool fenced = false;
	int ret;

	if (gpu->mode != DMT_GATHER_PERSIST) {
		ret = dmt_gpu_fence_kernel(gpu, &f, &kf);
		if (ret)
			return ret;
	}
	ret = dmt_gpu_gather(gpu, frags, n, dsts, ndst, f ? &kf : NULL,
			     &fenced, stream);
	if (f)
		dmt_gpu_fence_kernel_end(f, &kf, fenced);
	if (ret) {
		if (fenced)
			dmt_gpu_fence_retire(f);	/* its write may come */
		return ret;
	}
	if (!fenced)
		return dmt_gpu_release_after(gpu, rx, frags, n, stream);
	gpu->kernel_fences++;
	ret = devmemtcp_rx_release_after(rx, frags, n, devmemtcp_gpu_fence_done,
					 f);
	if (ret < 0) {
		dmt_gpu_fence_retire(f);
		return dmt_err(gpu->ctx, &gpu->err, ret,
			       "devmemtcp_rx_release_after: %s (the gather is queued; the fragments are still the caller's)",
			       devmemtcp_rx_errmsg(rx));
	}
	return 0;
}


int dmt_gather_args(struct devmemtcp_gpu *gpu, const char *fn, bool need_rx,
		    const struct devmemtcp_rx *rx, const void *frags, size_t n,
		    const void *dsts, size_t ndst)
{
	if (!gpu)
		return dmt_err(NULL, NULL, -EINVAL, "%s: gpu is NULL", fn);
	if (dmt_forked(gpu->fork_gen))
		return dmt_fork_refuse(gpu->ctx, &gpu->err, fn, "GPU handle");
	if (need_rx && !rx)
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL, "%s: rx is NULL",
			       fn);
	if ((n && !frags) || (ndst && !dsts))
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
			       "%s: frags or dsts is NULL with a non-zero count",
			       fn);
	if (!gpu->fn_gather)
		return dmt_err(gpu->ctx, &gpu->err, -EOPNOTSUPP,
			       "this libdevmemtcp was built without the gather kernels: install the CUDA toolkit (nvcc) and rebuild with -Dcuda=enabled");
	return 0;
}

/* devmemtcp_gpu_gather, and with release (rx) devmemtcp_gpu_gather_release;
 * fn: the public call, for messages. */
static int gpu_gather_impl(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
			   bool release, const struct devmemtcp_frag *frags,
			   size_t n, const struct devmemtcp_gpu_iov *dsts,
			   size_t ndst, void *stream, const char *fn)
{
	bool pushed;
	int ret;

	ret = dmt_gather_args(gpu, fn, release, rx, frags, n, dsts, ndst);
	if (ret || !n)
		return ret;
	if (gpu->coalesce_bytes)
		return dmt_batch_gather(gpu, release ? rx : NULL, frags, n, NULL,
					0, dsts, ndst, (CUstream)stream, fn);
	ret = dmt_gpu_ctx_enter(gpu, &pushed);
	if (ret)
		return ret;
	ret = release ? gather_release(gpu, rx, frags, n, dsts, ndst,
				       (CUstream)stream)
		      : dmt_gpu_gather(gpu, frags, n, dsts, ndst, NULL, NULL,
				       (CUstream)stream);
	dmt_gpu_ctx_leave(gpu, pushed);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_view(struct devmemtcp_gpu *gpu,
					const struct devmemtcp_frag *frags,
					size_t n, struct devmemtcp_gpu_iov *iov,
					size_t max)
{
	DMT_KEEP_ERRNO;
	return dmt_gpu_view(gpu ? gpu->ctx : NULL, gpu ? &gpu->err : NULL,
			    frags, n, iov, max);
}

/* ------------------------------------------------------------------------ */
/* Fences and deferred release: the arguments here, the rest in gpu_fence.c. */

static int gpu_fence_new_impl(struct devmemtcp_gpu *gpu, void *stream,
			      struct devmemtcp_gpu_fence **fencep)
{
	int ret;

	if (!gpu)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_gpu_fence_new: gpu is NULL");
	if (dmt_forked(gpu->fork_gen))
		return dmt_fork_refuse(gpu->ctx, &gpu->err, "devmemtcp_gpu_fence_new", "GPU handle");
	if (!fencep)
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
			       "devmemtcp_gpu_fence_new: fence pointer is NULL");
	/* after the gathers waiting in a batch */
	ret = dmt_batch_flush(gpu, "devmemtcp_gpu_fence_new", false);
	if (ret < 0)
		return ret;
	return dmt_gpu_fence_new(gpu, stream, fencep);
}

static int gpu_release_after_impl(struct devmemtcp_gpu *gpu,
				  struct devmemtcp_rx *rx,
				  const struct devmemtcp_frag *frags,
				  size_t n, void *stream)
{
	int ret;

	if (!gpu)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_gpu_release_after: gpu is NULL");
	if (dmt_forked(gpu->fork_gen))
		return dmt_fork_refuse(gpu->ctx, &gpu->err, "devmemtcp_gpu_release_after", "GPU handle");
	if (!rx)
		return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
			       "devmemtcp_gpu_release_after: rx is NULL");
	ret = dmt_batch_flush(gpu, "devmemtcp_gpu_release_after", false);
	if (ret < 0)
		return ret;
	return dmt_gpu_release_after(gpu, rx, frags, n, stream);
}

int dmt_gpu_spin(struct devmemtcp_gpu *gpu, void *stream, uint64_t ns)
{
	unsigned long long arg = ns;
	void *params[] = { &arg };
	bool pushed;
	CUresult r;
	int ret;

	if (!gpu->fn_spin)
		return -EOPNOTSUPP;
	ret = dmt_gpu_ctx_enter(gpu, &pushed);
	if (ret)
		return ret;
	r = gpu->cu->cuLaunchKernel(gpu->fn_spin, 1, 1, 1, 1, 1, 1, 0,
				    (CUstream)stream, params, NULL);
	dmt_gpu_ctx_leave(gpu, pushed);
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
	int ret = gpu_gather_impl(gpu, NULL, false, frags, n, dsts, ndst,
				  stream, "devmemtcp_gpu_gather");

	errno = saved;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_gather_release(
	struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
	const struct devmemtcp_frag *frags, size_t n,
	const struct devmemtcp_gpu_iov *dsts, size_t ndst, void *stream)
{
	DMT_KEEP_ERRNO;
	int saved = errno;
	int ret = gpu_gather_impl(gpu, rx, true, frags, n, dsts, ndst, stream,
				  "devmemtcp_gpu_gather_release");

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
