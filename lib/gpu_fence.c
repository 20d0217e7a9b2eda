// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * GPU layer (8): fences, and token releases held back by them.
 *
 * A fence completes once the work queued on its stream before it has
 * finished.  Where the driver has stream memory operations, the stream
 * writes a sequence number into a word of pinned host memory
 * (cuStreamWriteValue32, performed after the work before it, with a
 * memory barrier): a fence costs one driver call to make and none to poll,
 * a plain read, which is what devmemtcp_rx_flush and devmemtcp_rx_recv do
 * for every deferred release.  Without them (or when the driver refuses
 * one), a fence is a CUDA event (cuEventRecord, cuEventQuery).
 *
 * Fence objects are recycled through the handle (a fence that completed
 * goes back to its free list), and each keeps its word: the value it waits
 * for grows with every use, so an earlier use's write never completes a
 * later one.  A fence whose write is queued but that was never handed out
 * (devmemtcp_gpu_release_after failing after it was made) is retired until
 * the write has landed, and the handle's end waits for it: the GPU never
 * writes into freed memory.
 */
#include <sched.h>
#include <time.h>

#include "gpu.h"

#define FENCE_PAGE_WORDS 1024u	/* one 4 KiB page of words */
/* While waiting, a look at the context's health this often: a kernel that
 * faulted before the write means the write never comes. */
#define FENCE_CHECK_NS (1000ull * 1000)

struct devmemtcp_gpu_fence {
	struct devmemtcp_gpu *gpu;
	CUevent ev;			/* made when first needed */
	bool evented;			/* this use: the event, not the word */
	volatile uint32_t *word;	/* pinned, mapped (NULL: events only) */
	CUdeviceptr word_dev;
	uint32_t seq;			/* the value written for this use */
	struct devmemtcp_gpu_fence *next;
};

/* Pinned words, a page at a time, kept until the handle's end. */
struct dmt_fence_page {
	struct dmt_fence_page *next;
	uint32_t *words;
	CUdeviceptr dev;
	uint32_t used;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool word_reached(const struct devmemtcp_gpu_fence *f)
{
	return __atomic_load_n(f->word, __ATOMIC_ACQUIRE) == f->seq;
}

/* A word for f (gpu->lock held). */
static int word_get(struct devmemtcp_gpu *gpu, struct devmemtcp_gpu_fence *f)
{
	struct dmt_fence_page *p = gpu->fence_pages;
	CUresult r;

	if (!p || p->used == FENCE_PAGE_WORDS) {
		p = dmt_calloc(1, sizeof(*p));
		if (!p)
			return dmt_err_nomem(gpu->ctx, &gpu->err,
					     "devmemtcp_gpu_fence_new");
		r = gpu->cu->cuMemHostAlloc((void **)&p->words,
					    FENCE_PAGE_WORDS * sizeof(uint32_t),
					    CU_MEMHOSTALLOC_DEVICEMAP);
		if (r == CUDA_SUCCESS) {
			memset(p->words, 0, FENCE_PAGE_WORDS * sizeof(uint32_t));
			r = gpu->cu->cuMemHostGetDevicePointer(&p->dev, p->words, 0);
			if (r != CUDA_SUCCESS)
				gpu->cu->cuMemFreeHost(p->words);
		}
		if (r != CUDA_SUCCESS) {
			free(p);
			return dmt_cuda_err(gpu->ctx, &gpu->err, r,
					    "cuMemHostAlloc(fences)",
					    "raise the locked-memory limit (ulimit -l)");
		}
		p->next = gpu->fence_pages;
		gpu->fence_pages = p;
	}
	f->word = p->words + p->used;
	f->word_dev = p->dev + p->used * sizeof(uint32_t);
	p->used++;
	return 0;
}

/* Retired fences whose writes have landed go back to the free list
 * (gpu->lock held). */
static void reclaim(struct devmemtcp_gpu *gpu)
{
	struct devmemtcp_gpu_fence **pp = &gpu->retired_fences;

	while (*pp) {
		struct devmemtcp_gpu_fence *f = *pp;

		if (!word_reached(f)) {
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		f->next = gpu->free_fences;
		gpu->free_fences = f;
	}
}

/* A fence object of gpu's, with a reference on gpu for it. */
static int fence_get(struct devmemtcp_gpu *gpu,
		     struct devmemtcp_gpu_fence **fp)
{
	struct devmemtcp_gpu_fence *f;
	int ret = 0;

	pthread_mutex_lock(&gpu->lock);
	if (!gpu->free_fences && gpu->retired_fences)
		reclaim(gpu);
	f = gpu->free_fences;
	if (f) {
		gpu->free_fences = f->next;
	} else {
		f = dmt_calloc(1, sizeof(*f));
		if (!f)
			ret = dmt_err_nomem(gpu->ctx, &gpu->err,
					    "devmemtcp_gpu_fence_new");
		else if (!gpu->fence_events)
			ret = word_get(gpu, f);
		if (ret) {
			free(f);
			f = NULL;
		}
	}
	if (f) {
		f->gpu = gpu;
		gpu->refs++;
	}
	pthread_mutex_unlock(&gpu->lock);
	*fp = f;
	return ret;
}

/* Back to the free list: the fence completed, or nothing was queued. */
static void fence_put(struct devmemtcp_gpu_fence *f)
{
	struct devmemtcp_gpu *gpu = f->gpu;

	pthread_mutex_lock(&gpu->lock);
	f->next = gpu->free_fences;
	gpu->free_fences = f;
	pthread_mutex_unlock(&gpu->lock);
	dmt_gpu_unref(gpu);
}

/* Never handed out, its write still to come: retired until it lands. */
static void fence_retire(struct devmemtcp_gpu_fence *f)
{
	struct devmemtcp_gpu *gpu = f->gpu;

	if (f->evented) {
		/* an event is recorded anew next time: no write to wait for */
		fence_put(f);
		return;
	}
	pthread_mutex_lock(&gpu->lock);
	f->next = gpu->retired_fences;
	gpu->retired_fences = f;
	pthread_mutex_unlock(&gpu->lock);
	dmt_gpu_unref(gpu);
}

static int record_event(struct devmemtcp_gpu *gpu,
			struct devmemtcp_gpu_fence *f, CUstream stream)
{
	CUresult r;

	if (!f->ev) {
		r = gpu->cu->cuEventCreate(&f->ev, CU_EVENT_DISABLE_TIMING);
		if (r != CUDA_SUCCESS) {
			f->ev = NULL;
			return dmt_cuda_err(gpu->ctx, &gpu->err, r,
					    "cuEventCreate", NULL);
		}
	}
	r = gpu->cu->cuEventRecord(f->ev, stream);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r, "cuEventRecord",
				    "is stream a stream of this GPU's primary context?");
	f->evented = true;
	return 0;
}

/* Queue f's completion on stream (the context current). */
static int fence_queue(struct devmemtcp_gpu *gpu,
		       struct devmemtcp_gpu_fence *f, CUstream stream)
{
	uint32_t seq = f->seq + 1 ?: 1;
	CUresult r;

	f->evented = false;
	if (!f->word || __atomic_load_n(&gpu->fence_events, __ATOMIC_RELAXED))
		return record_event(gpu, f, stream);
	r = gpu->cu->cuStreamWriteValue32(stream, f->word_dev, seq,
					  CU_STREAM_WRITE_VALUE_DEFAULT);
	if (r == CUDA_ERROR_NOT_SUPPORTED) {
		/* this driver or device will not: events from now on */
		__atomic_store_n(&gpu->fence_events, true, __ATOMIC_RELAXED);
		return record_event(gpu, f, stream);
	}
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuStreamWriteValue32(fence)",
				    "is stream a stream of this GPU's primary context?");
	f->seq = seq;
	return 0;
}

int dmt_gpu_fence_new(struct devmemtcp_gpu *gpu, void *stream,
		      struct devmemtcp_gpu_fence **fencep)
{
	struct devmemtcp_gpu_fence *f;
	bool pushed = false;
	int ret;

	*fencep = NULL;
	ret = fence_get(gpu, &f);
	if (ret)
		return ret;
	ret = dmt_gpu_ctx_enter(gpu, &pushed);
	if (!ret) {
		ret = fence_queue(gpu, f, (CUstream)stream);
		dmt_gpu_ctx_leave(gpu, pushed);
	}
	if (ret) {
		fence_put(f);	/* nothing queued */
		return ret;
	}
	*fencep = f;
	return 0;
}

/* 0 while the context is sound, else its (sticky) failure. */
static int context_state(struct devmemtcp_gpu *gpu)
{
	bool pushed;
	CUresult r;
	int ret = dmt_gpu_ctx_enter(gpu, &pushed);

	if (ret)
		return ret;
	r = gpu->cu->cuStreamQuery(gpu->aux);
	dmt_gpu_ctx_leave(gpu, pushed);
	if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY)
		return 0;
	return dmt_cuda_err(gpu->ctx, &gpu->err, r, "waiting for a fence",
			    "a kernel on the fenced stream failed");
}

/* Until f's word shows its value: spin a little, then sleep in short
 * steps, looking at the context's health now and then. */
static int word_wait(struct devmemtcp_gpu_fence *f)
{
	uint64_t t_check = 0;
	unsigned int polls = 0;
	int ret;

	while (!word_reached(f)) {
		if (++polls < 128) {
			sched_yield();
			continue;
		}
		if (mono_ns() >= t_check) {
			ret = context_state(f->gpu);
			if (ret)
				return ret;
			t_check = mono_ns() + FENCE_CHECK_NS;
		}
		nanosleep(&(struct timespec){ 0, 20 * 1000 }, NULL);
	}
	return 0;
}

int dmt_gpu_fence_done(struct devmemtcp_gpu_fence *f, bool wait)
{
	struct devmemtcp_gpu *gpu = f->gpu;
	CUresult r;
	int ret;

	if (!f->evented) {
		if (!word_reached(f)) {
			if (!wait)
				return 0;
			ret = word_wait(f);
			if (ret)
				return ret;
		}
		fence_put(f);
		return 1;
	}
	r = wait ? gpu->cu->cuEventSynchronize(f->ev)
		 : gpu->cu->cuEventQuery(f->ev);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    wait ? "cuEventSynchronize(fence)"
					 : "cuEventQuery(fence)",
				    "a kernel on the fenced stream failed");
	fence_put(f);
	return 1;
}

int dmt_gpu_release_after(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
			  const struct devmemtcp_frag *frags, size_t n,
			  void *stream)
{
	struct devmemtcp_gpu_fence *f;
	int ret;

	ret = dmt_gpu_fence_new(gpu, stream, &f);
	if (ret)
		return ret;
	ret = devmemtcp_rx_release_after(rx, frags, n, devmemtcp_gpu_fence_done,
					 f);
	if (ret < 0) {
		fence_retire(f);
		return dmt_err(gpu->ctx, &gpu->err, ret,
			       "devmemtcp_rx_release_after: %s",
			       devmemtcp_rx_errmsg(rx));
	}
	return ret;
}

void dmt_gpu_fences_init(struct devmemtcp_gpu *gpu)
{
	/* test builds: events, for the benchmark's comparison */
	gpu->fence_events = !gpu->cu->cuStreamWriteValue32 ||
			    dmt_hook_env_int("DEVMEMTCP_GPU_FENCE_EVENTS") > 0;
}

/*
 * Every fence is back (the handle's last reference went): free them.  A
 * retired fence's write is waited for first; if the context failed, the
 * pinned words are left allocated rather than freed under the GPU.
 */
void dmt_gpu_fences_fini(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	struct devmemtcp_gpu_fence *f, *next;
	struct dmt_fence_page *p, *pnext;
	bool keep_words = false;

	for (f = gpu->retired_fences; f; f = next) {
		next = f->next;
		keep_words |= word_wait(f) != 0;
		free(f);
	}
	gpu->retired_fences = NULL;
	for (f = gpu->free_fences; f; f = next) {
		next = f->next;
		if (f->ev)
			cu->cuEventDestroy(f->ev);
		free(f);
	}
	gpu->free_fences = NULL;
	for (p = gpu->fence_pages; p; p = pnext) {
		pnext = p->next;
		if (!keep_words)
			cu->cuMemFreeHost(p->words);
		free(p);
	}
	gpu->fence_pages = NULL;
}
