// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer: the persistent gather kernel (DEVMEMTCP_GPU_PERSISTENT).
 *
 * One block per SM stays resident on a stream of the handle's own and
 * takes jobs in order; every block takes part in every job.  Job j is the
 * batch in slot j % nslots (descriptors and destinations in pinned host
 * memory, as for launches, and a job record).  A gather costs no launch:
 * it writes the batch, then queues two stream memory operations on the
 * caller's stream, in one cuStreamBatchMemOp where the driver has it: a
 * 64-bit write of the job's go word (performed once the work queued before
 * it has finished, so the gather is ordered after that work) and a wait
 * for the kernel's done word to reach j (so the work queued after it is
 * ordered after the gather).
 *
 * The kernel stops by itself after idle_ns without a job, so that a device
 * synchronisation (cudaDeviceSynchronize) returns, and the next gather
 * starts it again.  A gather announces its job in host memory before it
 * queues the go word; the stopping block writes its intent in host memory
 * before it reads the announcements.  With a sequentially consistent fence
 * between the write and the read on both sides, either the kernel sees the
 * job and stays, or the host sees the intent and waits for the outcome:
 * intent withdrawn, or every block gone, and then it starts the next
 * generation at job j.  The device side is in gather.cu.
 */

#include "gpu.h"

#define PERSIST_IDLE_NS (1000ull * 1000)	/* stop after 1 ms without work */
#define PERSIST_THREADS 256u
/* A wait for the kernel longer than this is a failure. */
#define PERSIST_WAIT_NS (10ull * 1000 * 1000 * 1000)

static volatile uint32_t *slot_done(const struct dmt_persist *ps)
{
	return (volatile uint32_t *)(ps->host + 1);
}

/* 0 while the kernel's stream runs or ran to its end, else its failure
 * (a kernel fault is sticky: every later call reports it). */
static int stream_state(struct devmemtcp_gpu *gpu)
{
	CUresult r = gpu->cu->cuStreamQuery(gpu->ps->stream);

	if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY)
		return 0;
	return dmt_cuda_err(gpu->ctx, &gpu->err, r,
			    "persistent gather kernel",
			    "a gather read or wrote an address it may not");
}

struct waiter {
	bool (*done)(const struct waiter *w);
	const struct dmt_persist *ps;
	volatile const uint32_t *word;
	uint32_t want;
	uint64_t intent;
};

/* Spin, then sleep in growing steps (dmt_wait_step), until w->done(w);
 * -ETIMEDOUT after PERSIST_WAIT_NS, or the kernel's failure. */
static int persist_wait(struct devmemtcp_gpu *gpu, const struct waiter *w,
			const char *what)
{
	struct dmt_wait dw = { 0 };
	int ret;

	while (!w->done(w)) {
		if (!dmt_wait_step(&dw))
			continue;
		ret = stream_state(gpu);
		if (ret)
			return ret;
		if (dmt_mono_ns() - dw.t0 > PERSIST_WAIT_NS)
			return dmt_err(gpu->ctx, &gpu->err, -ETIMEDOUT,
				       "persistent gather kernel: waited %llu s for %s: is the stream of an earlier gather blocked for good?",
				       (unsigned long long)(PERSIST_WAIT_NS / 1000000000ull),
				       what);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return 0;
}

/* *word has reached want (cyclic). */
static bool reached(const struct waiter *w)
{
	return (int32_t)(*w->word - w->want) >= 0;
}

static bool equals(const struct waiter *w)
{
	return *w->word == w->want;
}

/* The stopping block withdrew its intent, or every block has gone. */
static bool decided(const struct waiter *w)
{
	return w->ps->host->exiting != w->intent ||
	       w->ps->host->exited == w->ps->gen;
}

static int persist_launch(struct devmemtcp_gpu *gpu, uint32_t j)
{
	struct dmt_persist *ps = gpu->ps;
	struct dmt_persist_params p = {
		.desc_base = gpu->slots[0].desc_dev,
		.dst_base = gpu->slots[0].dst_dev,
		.slot_stride = gpu->slot_stride,
		.jobs = ps->jobs_dev,
		.dev = ps->dev,
		.host = ps->host_dev,
		.idle_ns = ps->idle_ns,
		.nslots = gpu->nslots,
		.seq0 = j,
		.gen = ps->gen + 1,
	};
	void *params[] = { &p };
	CUresult r;

	r = gpu->cu->cuLaunchKernel(ps->fn, ps->blocks, 1, 1, PERSIST_THREADS,
				    1, 1,
				    DMT_GATHER_DST_MAX * sizeof(struct dmt_gather_dst),
				    ps->stream, params, NULL);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuLaunchKernel(dmt_gather_persist)", NULL);
	ps->gen++;
	ps->running = true;
	ps->launches++;
	return 0;
}

/* Announce job j; make sure a generation of the kernel will take it. */
static int announce(struct devmemtcp_gpu *gpu, uint32_t j)
{
	struct dmt_persist *ps = gpu->ps;
	struct dmt_persist_host *h = ps->host;
	int ret;

	h->announced = j;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (ps->running && h->exited == ps->gen)
		ps->running = false;	/* stopped when idle */
	if (ps->running && h->exiting == ((uint64_t)ps->gen << 32 | j)) {
		struct waiter w = { .done = decided, .ps = ps,
				    .intent = (uint64_t)ps->gen << 32 | j };

		ret = persist_wait(gpu, &w, "the kernel to decide whether it stops");
		if (ret)
			return ret;
		if (h->exited == ps->gen)
			ps->running = false;
	}
	return ps->running ? 0 : persist_launch(gpu, j);
}

int dmt_persist_slot(struct devmemtcp_gpu *gpu, struct gpu_slot **sp)
{
	struct dmt_persist *ps = gpu->ps;
	uint32_t k = (ps->seq + 1) & (gpu->nslots - 1);
	struct gpu_slot *s = &gpu->slots[k];
	struct waiter w = { .done = reached, .word = &slot_done(ps)[k],
			    .want = s->seq };
	int ret = 0;

	if (!reached(&w))
		ret = persist_wait(gpu, &w, "a slot's previous job");
	*sp = s;
	return ret;
}

/* The caller's stream is being captured into a graph: the go and done
 * words of one job would be replayed for later ones. */
static int captured(struct devmemtcp_gpu *gpu, CUstream stream)
{
	int status = CU_STREAM_CAPTURE_STATUS_NONE;

	if (!gpu->cu->cuStreamIsCapturing ||
	    gpu->cu->cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS ||
	    status == CU_STREAM_CAPTURE_STATUS_NONE)
		return 0;
	return dmt_err(gpu->ctx, &gpu->err, -EOPNOTSUPP,
		       "a gather of a handle with DEVMEMTCP_GPU_PERSISTENT cannot be captured into a CUDA graph: capture with a handle without it");
}

/*
 * The go word could not be queued after the job was announced: the kernel
 * would wait for it for good.  Turn the job into an empty one and write
 * its go word from here.
 */
static void abandon(struct devmemtcp_gpu *gpu, struct gpu_slot *s, uint32_t j)
{
	struct dmt_persist *ps = gpu->ps;
	uint32_t k = j & (gpu->nslots - 1);
	uint64_t go = DMT_GO(j, 0, 1, 1, 0);

	gpu->cu->cuMemcpyHtoD(ps->go + k * sizeof(uint64_t), &go, sizeof(go));
	ps->seq = j;
	s->seq = j;
}

/* The go word of job j and the wait for it, in one call of the driver
 * when it has cuStreamBatchMemOp (about the cost of one stream memory
 * operation instead of two).  The wait is queued only after the write:
 * nothing else of the caller's can come between them. */
static CUresult queue_ops(struct devmemtcp_gpu *gpu, CUstream stream,
			  uint32_t j, uint64_t go, bool *wrote)
{
	struct dmt_persist *ps = gpu->ps;
	const struct dmt_cuda *cu = gpu->cu;
	CUdeviceptr go_addr = ps->go + (j & (gpu->nslots - 1)) * sizeof(uint64_t);
	CUdeviceptr done = ps->done_host ?
		ps->host_dev + offsetof(struct dmt_persist_host, done) :
		ps->dev + offsetof(struct dmt_persist_dev, done);
	CUresult r;

	*wrote = false;
	if (cu->cuStreamBatchMemOp && !ps->single_ops) {
		CUstreamBatchMemOpParams ops[2] = {
			{ .writeValue = { .operation = CU_STREAM_MEM_OP_WRITE_VALUE_64,
					  .address = go_addr, .value64 = go,
					  .flags = CU_STREAM_WRITE_VALUE_DEFAULT } },
			{ .waitValue = { .operation = CU_STREAM_MEM_OP_WAIT_VALUE_32,
					 .address = done, .value = j,
					 .flags = CU_STREAM_WAIT_VALUE_GEQ } },
		};

		r = cu->cuStreamBatchMemOp(stream, 2, ops, 0);
		*wrote = r == CUDA_SUCCESS;
		return r;
	}
	r = cu->cuStreamWriteValue64(stream, go_addr, go,
				     CU_STREAM_WRITE_VALUE_DEFAULT);
	if (r != CUDA_SUCCESS)
		return r;
	*wrote = true;
	return cu->cuStreamWaitValue32(stream, done, j, CU_STREAM_WAIT_VALUE_GEQ);
}

int dmt_persist_queue(struct devmemtcp_gpu *gpu, struct gpu_slot *s,
		      const struct dmt_gather_batch *b,
		      const struct dmt_gather_geom *g, CUstream stream)
{
	struct dmt_persist *ps = gpu->ps;
	uint32_t j = ps->seq + 1, k = j & (gpu->nslots - 1);
	struct dmt_persist_job *job = &ps->jobs[k];
	bool wrote;
	CUresult r;
	int ret;

	ret = captured(gpu, stream);
	if (ret)
		return ret;
	job->bias = b->dst[0].bias;
	job->ndst = b->ndst;
	job->seq = j;
	/* the batch went through write-combining buffers */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ret = announce(gpu, j);
	if (ret)
		return ret;
	r = queue_ops(gpu, stream, j,
		      DMT_GO(j, b->nd, g->per, g->split, b->ndst > 1), &wrote);
	if (!wrote) {
		abandon(gpu, s, j);
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuStreamWriteValue64(persistent gather)",
				    "is stream a stream of this GPU's primary context?");
	}
	ps->seq = j;
	s->seq = j;
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuStreamWaitValue32(persistent gather)",
				    "the gather is queued, but work queued after it on the stream may run before it");
	return 0;
}

static int persist_check(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	int v = 0;

	if (!cu->cuStreamWriteValue64 || !cu->cuStreamWaitValue32)
		return dmt_err(gpu->ctx, &gpu->ctx->err, -EOPNOTSUPP,
			       "DEVMEMTCP_GPU_PERSISTENT needs stream memory operations (cuStreamWriteValue64_v2), which this NVIDIA driver lacks: update it, or leave the flag off");
	cu->cuDeviceGetAttribute(&v,
				 CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
				 gpu->dev);
	if (!v)
		return dmt_err(gpu->ctx, &gpu->ctx->err, -EOPNOTSUPP,
			       "DEVMEMTCP_GPU_PERSISTENT needs 64-bit stream memory operations, which CUDA device %d does not support: leave the flag off",
			       gpu->ordinal);
	return 0;
}

/* Device words (zeroed) and host words (zeroed, mapped). */
static int persist_alloc(struct devmemtcp_gpu *gpu)
{
	struct dmt_persist *ps = gpu->ps;
	const struct dmt_cuda *cu = gpu->cu;
	size_t dbytes = sizeof(struct dmt_persist_dev) +
			gpu->nslots * (sizeof(uint64_t) + sizeof(uint32_t));
	size_t done_bytes = (gpu->nslots * sizeof(uint32_t) + 63) & ~(size_t)63;
	size_t hbytes = sizeof(struct dmt_persist_host) + done_bytes +
			gpu->nslots * sizeof(struct dmt_persist_job);
	CUresult r;

	r = cu->cuStreamCreate(&ps->stream, CU_STREAM_NON_BLOCKING);
	if (r != CUDA_SUCCESS) {
		ps->stream = NULL;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuStreamCreate(persistent gathers)", NULL);
	}
	r = cu->cuMemAlloc(&ps->dev, dbytes);
	if (r != CUDA_SUCCESS) {
		ps->dev = 0;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuMemAlloc(persistent gathers)", NULL);
	}
	r = cu->cuMemsetD8Async(ps->dev, 0, dbytes, ps->stream);
	if (r == CUDA_SUCCESS)
		r = cu->cuStreamSynchronize(ps->stream);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuMemsetD8Async(persistent gathers)", NULL);
	ps->go = ps->dev + sizeof(struct dmt_persist_dev);
	/* cached, not write-combined: both sides read these words */
	r = cu->cuMemHostAlloc((void **)&ps->host, hbytes,
			       CU_MEMHOSTALLOC_DEVICEMAP);
	if (r != CUDA_SUCCESS) {
		ps->host = NULL;
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuMemHostAlloc(persistent gathers)",
				    "raise the locked-memory limit (ulimit -l)");
	}
	memset(ps->host, 0, hbytes);
	r = cu->cuMemHostGetDevicePointer(&ps->host_dev, ps->host, 0);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuMemHostGetDevicePointer", NULL);
	ps->jobs = (struct dmt_persist_job *)((char *)(ps->host + 1) + done_bytes);
	ps->jobs_dev = ps->host_dev + sizeof(struct dmt_persist_host) + done_bytes;
	return 0;
}

int dmt_persist_init(struct devmemtcp_gpu *gpu)
{
	struct dmt_persist *ps;
	CUresult r;
	int ret, us;

	ret = persist_check(gpu);
	if (ret)
		return ret;
	/* chosen knowingly: see devmemtcp_gpu_new(3) */
	dmt_log(gpu->ctx, DEVMEMTCP_LOG_WARN, "%s", DMT_PERSIST_WARNING);
	ps = dmt_calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	gpu->ps = ps;
	r = gpu->cu->cuModuleGetFunction(&ps->fn, gpu->mod, "dmt_gather_persist");
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->ctx->err, r,
				    "cuModuleGetFunction(dmt_gather_persist)",
				    NULL);
	ps->blocks = gpu->sms ? gpu->sms : 1;
	us = dmt_hook_env_int("DEVMEMTCP_GATHER_IDLE_US");
	ps->idle_ns = us > 0 ? (uint64_t)us * 1000 : PERSIST_IDLE_NS;
	/* test builds: two calls per gather, for the benchmark's comparison */
	ps->single_ops = dmt_hook_env_int("DEVMEMTCP_GATHER_SINGLE_MEMOPS") > 0;
	/* test builds: the callers' streams wait for the done word the kernel
	 * writes in pinned host memory instead of device memory (which of the
	 * two a waiting stream sees sooner is for the benchmark to tell) */
	ps->done_host = dmt_hook_env_int("DEVMEMTCP_GATHER_DONE_HOST") > 0;
	return persist_alloc(gpu);
}

/* Wait for the jobs announced, stop the kernel, wait until it has gone. */
static int persist_stop(struct devmemtcp_gpu *gpu)
{
	struct dmt_persist *ps = gpu->ps;
	struct waiter last = { .done = reached,
			       .word = &slot_done(ps)[ps->seq & (gpu->nslots - 1)],
			       .want = ps->seq };
	struct waiter gone = { .done = equals, .word = &ps->host->exited,
			       .want = ps->gen };
	int ret;

	if (!ps->gen)
		return 0;	/* never started */
	ret = persist_wait(gpu, &last, "the last job");
	if (ret)
		return ret;
	ps->host->stop_req = 1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ret = persist_wait(gpu, &gone, "the kernel to stop");
	if (ret)
		return ret;
	return dmt_cuda_errno(gpu->cu->cuStreamSynchronize(ps->stream));
}

void dmt_persist_fini(struct devmemtcp_gpu *gpu)
{
	struct dmt_persist *ps = gpu->ps;
	const struct dmt_cuda *cu = gpu->cu;

	if (!ps)
		return;
	if (ps->stream && ps->host && persist_stop(gpu)) {
		/* the kernel may still read them: leak rather than fault */
		dmt_log(gpu->ctx, DEVMEMTCP_LOG_WARN,
			"persistent gather kernel did not stop: its memory is not freed");
		gpu->ps = NULL;
		return;
	}
	if (ps->host)
		cu->cuMemFreeHost(ps->host);
	if (ps->dev)
		cu->cuMemFree(ps->dev);
	if (ps->stream)
		cu->cuStreamDestroy(ps->stream);
	free(ps);
	gpu->ps = NULL;
}

uint64_t dmt_gpu_persist_launches(const struct devmemtcp_gpu *gpu)
{
	return gpu->ps ? gpu->ps->launches : 0;
}
