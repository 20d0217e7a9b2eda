// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer: launching gathers.
 *
 * A gather that fits in a kernel parameter (up to inline_max descriptors
 * and DMT_INLINE_DST_MAX destinations: the size of a receive) is launched
 * inline: its descriptors travel with the launch, so there is no pinned
 * slot to wait for, no event to record, and the kernel reads no descriptor
 * over PCIe before it copies.  Larger gathers write their descriptors into
 * one of a few pinned, write-combined host slots and launch one kernel per
 * slot; the kernel reads them over PCIe itself, so the transfer overlaps
 * the copying instead of preceding it.  Each slot carries an event; a slot
 * is reused only after its event completed.  With DEVMEMTCP_GPU_PERSISTENT
 * the slots feed the persistent kernel instead (gpu_persist.c).
 *
 * A gather is launched with programmatic dependence (sm_90 and later,
 * cuLaunchKernelEx): it may start while the kernel before it on the
 * stream finishes, loads its descriptors, and waits for that kernel before
 * it touches memory (gather.cu).  Not with DEVMEMTCP_GPU_DESC_COPY, whose
 * descriptors a copy on the stream brings just before the kernel.
 * Gathers back to back on a stream, the way a data loader queues them,
 * thus overlap one's launch with the previous one's copying: on an H200
 * the 4 KiB-fragment gathers of 64 KiB to 4 MiB ran at 1.1 to 1.6 times
 * the speed of one cuMemcpyDtoDAsync each of the same bytes
 * (bench/results/gather-h200-round3.md).
 *
 * With DEVMEMTCP_GPU_GRAPHS an inline gather is queued instead through a
 * CUDA graph of one kernel node, kept per stream and kernel size: the node
 * is set to this gather's parameter and grid
 * (cuGraphExecKernelNodeSetParams), then the graph is launched on the
 * stream, ordered there exactly as a launch would be.  That costs less CPU
 * than a launch, but a graph launch cannot overlap the kernel before it.
 * Each stream has graphs of its own, because
 * the launches of one executable graph are also ordered behind each other:
 * graphs shared by two streams would tie the streams together.  Streams
 * being captured into the caller's graph, and the per-thread default
 * stream (one handle, a different stream on every thread), take plain
 * launches, as does every gather when the driver has no graph calls.
 *
 * Every launch is cut by dmt_gather_geometry: a batch of a few fragments
 * is spread over many warps (several per fragment) so that it keeps the
 * SMs busy rather than a handful of them.  Inline launches that split
 * fragments do so on a two-dimensional grid (the warp's descriptor follows
 * from its block), launches from slots stage each block's descriptors in
 * shared memory (gather.cu).
 */
#include "gpu.h"

static const uint32_t inline_sizes[DMT_INLINE_NSIZES] = DMT_INLINE_SIZES;

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

/* staged: the kernel reads the descriptors from memory (a slot). */
static void geometry(const struct devmemtcp_gpu *gpu,
		     const struct dmt_gather_batch *b, bool staged,
		     struct dmt_gather_geom *g)
{
	dmt_gather_geometry(b->nd, b->bytes, gpu->sms, gpu->per_warp,
			    gpu->split, gpu->warps_per_block, g);
	if (staged && !gpu->warps_per_block)
		dmt_gather_geometry_staged(g);
}

static struct dmt_gather_args launch_args(const struct dmt_gather_batch *b,
					  const struct dmt_gather_geom *g)
{
	return (struct dmt_gather_args){ .bias = b->dst[0].bias, .n = b->nd,
					 .ndst = b->ndst, .per = g->per,
					 .split = g->split };
}

/* pdl: the kernel may start while the kernel before it on the stream
 * finishes (it waits for it before touching memory: gather.cu). */
static int launch(struct devmemtcp_gpu *gpu, CUfunction fn,
		  const struct dmt_gather_geom *g, uint32_t ndst, void **params,
		  CUstream stream, bool pdl)
{
	unsigned int smem = ndst > 1 ? ndst * sizeof(struct dmt_gather_dst) : 0;
	CUresult r;

	if (pdl) {
		CUlaunchAttribute at = {
			.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
			.value.programmaticStreamSerializationAllowed = 1,
		};
		CUlaunchConfig c = { .gridDimX = g->gx, .gridDimY = g->gy,
				     .gridDimZ = 1, .blockDimX = 32 * g->wpb,
				     .blockDimY = 1, .blockDimZ = 1,
				     .sharedMemBytes = smem, .hStream = stream,
				     .attrs = &at, .numAttrs = 1 };

		r = gpu->cu->cuLaunchKernelEx(&c, fn, params, NULL);
		gpu->pdl_launches += r == CUDA_SUCCESS;
	} else {
		r = gpu->cu->cuLaunchKernel(fn, g->gx, g->gy, 1, 32 * g->wpb, 1,
					    1, smem, stream, params, NULL);
	}
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    pdl ? "cuLaunchKernelEx(dmt_gather)"
					: "cuLaunchKernel(dmt_gather)",
				    "is stream a stream of this GPU's primary context?");
	return 0;
}

static int slot_launch(struct devmemtcp_gpu *gpu, struct gpu_slot *s,
		       const struct dmt_gather_batch *b,
		       const struct dmt_gather_geom *g,
		       const struct dmt_gather_fence *fence, bool *fenced,
		       CUstream stream)
{
	const struct dmt_cuda *cu = gpu->cu;
	struct dmt_gather_args a = launch_args(b, g);
	struct dmt_gather_fence f = fence ? *fence : (struct dmt_gather_fence){ 0 };
	CUdeviceptr descs = s->desc_dev, dsts = s->dst_dev;
	void *params[] = { &descs, &dsts, &a, &f };
	CUresult r;
	int ret;

	/* The descriptors went through write-combining buffers. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (gpu->flags & DEVMEMTCP_GPU_DESC_COPY) {
		r = cu->cuMemcpyHtoDAsync(descs, s->desc,
					  (size_t)b->nd * sizeof(*s->desc),
					  stream);
		if (r == CUDA_SUCCESS && b->ndst > 1)
			r = cu->cuMemcpyHtoDAsync(dsts, s->dst,
						  (size_t)b->ndst * sizeof(*s->dst),
						  stream);
		if (r != CUDA_SUCCESS)
			return dmt_cuda_err(gpu->ctx, &gpu->err, r,
					    "cuMemcpyHtoDAsync(descriptors)",
					    NULL);
	}
	/* descriptors copied by the stream: the kernel must not start early */
	ret = launch(gpu, gpu->fn_gather, g, b->ndst, params, stream,
		     gpu->pdl && !(gpu->flags & DEVMEMTCP_GPU_DESC_COPY));
	if (ret)
		return ret;
	*fenced = fence != NULL;	/* the kernel will write it */
	r = cu->cuEventRecord(s->done, stream);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r, "cuEventRecord",
				    NULL);
	s->busy = true;
	return 0;
}

/*
 * Build and queue batch after batch through the slots.  Every fragment is
 * checked before the first is queued: all of them while building the
 * first batch, or by dmt_gather_check when there are more.
 */
static int gather_slots(struct devmemtcp_gpu *gpu,
			const struct devmemtcp_frag *frags, size_t n,
			const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			const struct dmt_gather_fence *fence, bool *fenced,
			CUstream stream)
{
	bool persist = gpu->mode == DMT_GATHER_PERSIST;
	uint32_t max = gpu->max_frags;
	struct dmt_gather_cursor cur = { 0 };
	bool first = true;
	int ret;

	if (persist && max > DMT_GO_N_MAX)
		max = DMT_GO_N_MAX;
	while (cur.i < n) {
		struct gpu_slot *s = NULL;
		struct dmt_gather_batch b;
		struct dmt_gather_geom g;

		ret = persist ? dmt_persist_slot(gpu, &s)
			      : slot_acquire(gpu, &s);
		if (ret)
			return ret;
		b = (struct dmt_gather_batch){ .desc = s->desc, .dst = s->dst,
					       .max_desc = max,
					       .max_dst = DMT_GATHER_DST_MAX,
					       .linear = gpu->linear_dev };
		ret = dmt_gather_build(gpu->ctx, &gpu->err, frags, n, dsts,
				       ndst, &cur, &b);
		if (!ret && first && cur.i < n)
			ret = dmt_gather_check(gpu->ctx, &gpu->err, frags, n,
					       dsts, ndst, &cur);
		if (ret)
			return ret;
		first = false;
		if (!b.nd)
			continue;	/* only holes */
		geometry(gpu, &b, true, &g);
		/* the fence rides on the last launch: it copies only once
		 * the others ended (same stream), so it ends last */
		ret = persist ? dmt_persist_queue(gpu, s, &b, &g, stream)
			      : slot_launch(gpu, s, &b, &g,
					    cur.i == n ? fence : NULL, fenced,
					    stream);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- inline launches through graphs ---------------------------------------- */

void dmt_gpu_launch_init(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;

	gpu->graphs_off = !(gpu->flags & DEVMEMTCP_GPU_GRAPHS) ||
			  !cu->cuGraphCreate || !cu->cuGraphAddKernelNode ||
			  !cu->cuGraphInstantiate ||
			  !cu->cuGraphExecKernelNodeSetParams ||
			  !cu->cuGraphLaunch || !cu->cuGraphExecDestroy ||
			  !cu->cuGraphDestroy || !cu->cuStreamIsCapturing;
	gpu->pdl = cu->cuLaunchKernelEx && gpu->cc_major >= 9 &&
		   dmt_hook_env_int("DEVMEMTCP_GATHER_NO_PDL") <= 0;
}

static void graph_clear(const struct dmt_cuda *cu, struct gpu_graph *gg)
{
	for (int k = 0; k < DMT_INLINE_NSIZES; k++) {
		/* a graph still running is freed when it completes */
		if (gg->exec[k])
			cu->cuGraphExecDestroy(gg->exec[k]);
		if (gg->graph[k])
			cu->cuGraphDestroy(gg->graph[k]);
	}
	*gg = (struct gpu_graph){ 0 };
}

void dmt_gpu_graphs_fini(struct devmemtcp_gpu *gpu)
{
	for (int i = 0; i < DMT_GRAPH_STREAMS; i++)
		graph_clear(gpu->cu, &gpu->graphs[i]);
}

/* The graphs of stream: its own, or the least recently used ones
 * cleared for it; NULL when stream must take plain launches. */
static struct gpu_graph *graphs_of(struct devmemtcp_gpu *gpu,
				   CUstream stream)
{
	struct gpu_graph *gg = &gpu->graphs[0];
	int status;

	if (stream == CU_STREAM_PER_THREAD ||
	    gpu->cu->cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS ||
	    status != CU_STREAM_CAPTURE_STATUS_NONE)
		return NULL;
	for (int i = 0; i < DMT_GRAPH_STREAMS; i++) {
		struct gpu_graph *c = &gpu->graphs[i];

		if (c->used && c->stream == stream) {
			gg = c;
			goto found;
		}
		if (c->used < gg->used)
			gg = c;
	}
	graph_clear(gpu->cu, gg);
	gg->stream = stream;
found:
	gg->used = ++gpu->graph_clock;
	return gg;
}

/*
 * Queue kernel k of an inline gather through stream's graph of that
 * kernel: 1 when queued, 0 when it must be a plain launch (nothing
 * queued), or a negative errno.  A graph that cannot be made turns
 * graphs off for the handle: the driver would refuse the next one too.
 */
static int graph_launch(struct devmemtcp_gpu *gpu, int k,
			const struct dmt_gather_geom *g, uint32_t ndst,
			void **params, CUstream stream)
{
	const struct dmt_cuda *cu = gpu->cu;
	CUDA_KERNEL_NODE_PARAMS np = {
		.func = gpu->fn_inline[k],
		.gridDimX = g->gx, .gridDimY = g->gy, .gridDimZ = 1,
		.blockDimX = 32 * g->wpb, .blockDimY = 1, .blockDimZ = 1,
		.sharedMemBytes = ndst > 1 ? ndst * sizeof(struct dmt_gather_dst)
					   : 0,
		.kernelParams = params,
	};
	struct gpu_graph *gg = graphs_of(gpu, stream);
	CUresult r;

	if (!gg)
		return 0;
	if (!gg->exec[k]) {
		r = cu->cuGraphCreate(&gg->graph[k], 0);
		if (r == CUDA_SUCCESS)
			r = cu->cuGraphAddKernelNode(&gg->node[k], gg->graph[k],
						     NULL, 0, &np);
		if (r == CUDA_SUCCESS)
			r = cu->cuGraphInstantiate(&gg->exec[k], gg->graph[k],
						   0);
		if (r != CUDA_SUCCESS) {
			graph_clear(cu, gg);
			gpu->graphs_off = true;
			return 0;
		}
	} else if (cu->cuGraphExecKernelNodeSetParams(gg->exec[k], gg->node[k],
						      &np) != CUDA_SUCCESS) {
		graph_clear(cu, gg);
		gpu->graphs_off = true;
		return 0;
	}
	r = cu->cuGraphLaunch(gg->exec[k], stream);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuGraphLaunch(dmt_gather)",
				    "is stream a stream of this GPU's primary context?");
	gpu->graph_launches++;
	return 1;
}

/*
 * The whole gather as one inline launch: 1 when queued, 0 when it does not
 * fit (nothing queued, nothing reported), or a negative errno.
 */
static int gather_inline(struct devmemtcp_gpu *gpu,
			 const struct devmemtcp_frag *frags, size_t n,
			 const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			 const struct dmt_gather_fence *fence, bool *fenced,
			 CUstream stream)
{
	struct dmt_gather_inline *p = gpu->inl;
	struct dmt_gather_cursor cur = { 0 };
	struct dmt_gather_batch b = { .desc = p->desc, .dst = p->dst,
				      .max_desc = gpu->inline_max,
				      .max_dst = DMT_INLINE_DST_MAX,
				      .linear = gpu->linear_dev };
	int ret;

	ret = dmt_gather_build(gpu->ctx, &gpu->err, frags, n, dsts, ndst,
			       &cur, &b);
	if (ret)
		return ret;
	if (cur.i < n)
		return 0;
	if (!b.nd)
		return 1;
	ret = dmt_gpu_launch_inline(gpu, p, &b, fence, stream);
	if (ret < 0)
		return ret;
	*fenced = fence != NULL;
	return 1;
}

int dmt_gpu_launch_inline(struct devmemtcp_gpu *gpu, struct dmt_gather_inline *p,
			  const struct dmt_gather_batch *b,
			  const struct dmt_gather_fence *fence, CUstream stream)
{
	struct dmt_gather_geom g;
	void *params[] = { p };
	unsigned int k = 0;
	int ret;

	while (inline_sizes[k] < b->nd)
		k++;
	geometry(gpu, b, false, &g);
	if (!gpu->inline_1d)
		dmt_gather_geometry_2d(b->nd, &g);
	p->a = launch_args(b, &g);
	p->f = fence ? *fence : (struct dmt_gather_fence){ 0 };
	ret = gpu->graphs_off ? 0
			      : graph_launch(gpu, (int)k, &g, b->ndst, params,
					     stream);
	if (!ret)
		ret = launch(gpu, gpu->fn_inline[k], &g, b->ndst, params, stream,
			     gpu->pdl);
	return ret < 0 ? ret : 0;
}

int dmt_gpu_gather(struct devmemtcp_gpu *gpu,
		   const struct devmemtcp_frag *frags, size_t n,
		   const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		   const struct dmt_gather_fence *fence, bool *fenced,
		   CUstream stream)
{
	bool dummy;
	int ret;

	fenced = fenced ? fenced : &dummy;
	*fenced = false;
	if (gpu->mode == DMT_GATHER_AUTO && n <= gpu->inline_max) {
		ret = gather_inline(gpu, frags, n, dsts, ndst, fence, fenced,
				    stream);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	return gather_slots(gpu, frags, n, dsts, ndst, fence, fenced, stream);
}
