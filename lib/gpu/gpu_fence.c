// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer: fences, and token releases held back by them.
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
 * writes into a word that went back to the pool.
 *
 * The words come from a pool of the process, one per primary context (the
 * pool retains it, so its pinned pages outlive every handle), kept until
 * the library is unloaded.  cuMemHostAlloc and cuMemFreeHost may wait for
 * the whole device: a handle's end gives its words back (zeroed, their
 * last writes landed) instead of freeing them, and a page is allocated only
 * when the pool has no free word left, with the context current.  So
 * neither making nor freeing a handle, nor a fence made on any thread,
 * waits for the work queued on unrelated streams.
 */
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
	struct fence_page *page;	/* the word's, in the pool */
	uint32_t seq;			/* the value written for this use */
	struct devmemtcp_gpu_fence *next;
};

/* A page of pinned words of the pool: never freed. */
struct fence_page {
	struct fence_page *next;
	uint32_t *words;
	CUdeviceptr dev;
	CUdeviceptr cnt;	/* the words' block counters (gather_release) */
	uint32_t nfree;
	uint64_t free[FENCE_PAGE_WORDS / 64];	/* bit set: word free */
};

/* The words of one primary context. */
struct fence_pool {
	struct fence_pool *next;
	const struct dmt_cuda *cu;
	CUcontext cctx;
	struct fence_page *pages;
};

/* Reachable until the library is unloaded; only grows. */
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fence_pool *pools;

static bool word_reached(const struct devmemtcp_gpu_fence *f)
{
	return __atomic_load_n(f->word, __ATOMIC_ACQUIRE) == f->seq;
}

/* gpu's pool, made (retaining the primary context) when first needed
 * (pools_lock held). */
static int pool_of(struct devmemtcp_gpu *gpu, struct dmt_err *err,
		   const char *what, struct fence_pool **pp)
{
	struct fence_pool *pool;
	CUcontext c;
	CUresult r;

	for (pool = pools; pool; pool = pool->next) {
		if (pool->cu == gpu->cu && pool->cctx == gpu->cctx) {
			*pp = pool;
			return 0;
		}
	}
	pool = dmt_calloc(1, sizeof(*pool));
	if (!pool)
		return dmt_err_nomem(gpu->ctx, err, what);
	r = gpu->cu->cuDevicePrimaryCtxRetain(&c, gpu->dev);
	if (r != CUDA_SUCCESS) {
		free(pool);
		return dmt_cuda_err(gpu->ctx, err, r,
				    "cuDevicePrimaryCtxRetain(fences)", NULL);
	}
	pool->cu = gpu->cu;
	pool->cctx = gpu->cctx;
	pool->next = pools;
	pools = pool;
	*pp = pool;
	return 0;
}

/* A new page of free words (pools_lock held, the context current). */
static int page_new(struct devmemtcp_gpu *gpu, struct dmt_err *err,
		    const char *what, struct fence_pool *pool)
{
	struct fence_page *p = dmt_calloc(1, sizeof(*p));
	CUresult r;

	if (!p)
		return dmt_err_nomem(gpu->ctx, err, what);
	r = gpu->cu->cuMemHostAlloc((void **)&p->words,
				    FENCE_PAGE_WORDS * sizeof(uint32_t),
				    CU_MEMHOSTALLOC_DEVICEMAP);
	if (r != CUDA_SUCCESS) {
		free(p);
		return dmt_cuda_err(gpu->ctx, err, r,
				    "cuMemHostAlloc(fences)",
				    "raise the locked-memory limit (ulimit -l)");
	}
	memset(p->words, 0, FENCE_PAGE_WORDS * sizeof(uint32_t));
	r = gpu->cu->cuMemHostGetDevicePointer(&p->dev, p->words, 0);
	if (r != CUDA_SUCCESS) {
		/* the words are left allocated: freeing could wait for
		 * the GPU */
		free(p);
		return dmt_cuda_err(gpu->ctx, err, r,
				    "cuMemHostGetDevicePointer(fences)", NULL);
	}
	memset(p->free, 0xff, sizeof(p->free));
	p->nfree = FENCE_PAGE_WORDS;
	p->next = pool->pages;
	pool->pages = p;
	return 0;
}

/* A page of gpu's pool with a free word, made if there is none
 * (pools_lock held, the context current). */
static int page_with_free(struct devmemtcp_gpu *gpu, struct dmt_err *err,
			  const char *what, struct fence_page **pp)
{
	struct fence_pool *pool = NULL;
	struct fence_page *p;
	int ret = pool_of(gpu, err, what, &pool);

	if (ret)
		return ret;
	for (p = pool->pages; p && !p->nfree; p = p->next)
		;
	if (!p) {
		ret = page_new(gpu, err, what, pool);
		if (ret)
			return ret;
		p = pool->pages;
	}
	*pp = p;
	return 0;
}

/* A word for f from the pool (gpu->lock held, the context current). */
static int word_get(struct devmemtcp_gpu *gpu, struct devmemtcp_gpu_fence *f,
		    const char *what)
{
	struct fence_page *p;
	unsigned int i, b;
	int ret;

	pthread_mutex_lock(&pools_lock);
	ret = page_with_free(gpu, &gpu->err, what, &p);
	if (ret) {
		pthread_mutex_unlock(&pools_lock);
		return ret;
	}
	for (i = 0; !p->free[i]; i++)
		;
	b = (unsigned int)__builtin_ctzll(p->free[i]);
	p->free[i] &= ~(1ull << b);
	p->nfree--;
	pthread_mutex_unlock(&pools_lock);
	f->page = p;
	f->word = p->words + i * 64 + b;
	f->word_dev = p->dev + (i * 64 + b) * sizeof(uint32_t);
	f->seq = 0;
	return 0;
}

/* f's word back to the pool, zeroed: its last write has landed. */
static void word_put(struct devmemtcp_gpu_fence *f)
{
	struct fence_page *p = f->page;
	unsigned int k = (unsigned int)(f->word - p->words);

	pthread_mutex_lock(&pools_lock);
	__atomic_store_n(f->word, 0, __ATOMIC_RELAXED);
	p->free[k / 64] |= 1ull << (k % 64);
	p->nfree++;
	pthread_mutex_unlock(&pools_lock);
	f->word = NULL;
	f->page = NULL;
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

/* A fence object of gpu's, with a reference on gpu for it; what: the
 * public call, for messages. */
static int fence_get(struct devmemtcp_gpu *gpu,
		     struct devmemtcp_gpu_fence **fp, const char *what)
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
			ret = dmt_err_nomem(gpu->ctx, &gpu->err, what);
		else if (!gpu->fence_events)
			ret = word_get(gpu, f, what);
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
void dmt_gpu_fence_retire(struct devmemtcp_gpu_fence *f)
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
	/* the context current before a word is taken: the pool may grow */
	ret = dmt_gpu_ctx_enter(gpu, &pushed);
	if (ret)
		return ret;
	ret = fence_get(gpu, &f, "devmemtcp_gpu_fence_new");
	if (!ret) {
		ret = fence_queue(gpu, f, (CUstream)stream);
		if (ret)
			fence_put(f);	/* nothing queued */
	}
	dmt_gpu_ctx_leave(gpu, pushed);
	if (ret)
		return ret;
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

/* Until f's word shows its value: spin, then sleep in growing steps,
 * looking at the context's health now and then. */
static int word_wait(struct devmemtcp_gpu_fence *f)
{
	struct dmt_wait w = { 0 };
	uint64_t t_check = 0;
	int ret = 0;

	while (!word_reached(f)) {
		if (!dmt_wait_step(&w))
			continue;
		if (dmt_mono_ns() >= t_check) {
			ret = context_state(f->gpu);
			if (ret)
				break;
			t_check = dmt_mono_ns() + FENCE_CHECK_NS;
		}
	}
	__atomic_fetch_add(&f->gpu->fence_sleeps, w.sleeps, __ATOMIC_RELAXED);
	return ret;
}

int dmt_gpu_fence_peek(struct devmemtcp_gpu_fence *f, bool wait)
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
	return 1;
}

void dmt_gpu_fence_put(struct devmemtcp_gpu_fence *f)
{
	fence_put(f);
}

int dmt_gpu_fence_done(struct devmemtcp_gpu_fence *f, bool wait)
{
	int ret = dmt_gpu_fence_peek(f, wait);

	if (ret == 1)
		fence_put(f);
	return ret;
}

/*
 * Fences that a gather kernel signals (devmemtcp_gpu_gather_release): the
 * word is a pool word as for any fence, the kernel's last block writes its
 * value, counting blocks in a counter of device memory beside the word
 * (one per word, zero between uses: the last block resets it before it
 * writes the word, and a word is used again only once its write landed).
 * A page's counters are allocated when one of its words is first used so,
 * with pools_lock held and the context current.
 */
static int page_counters(struct devmemtcp_gpu *gpu, struct fence_page *p)
{
	static const uint32_t zero[FENCE_PAGE_WORDS];
	CUdeviceptr cnt;
	CUresult r;
	int ret = 0;

	pthread_mutex_lock(&pools_lock);
	if (!p->cnt) {
		r = gpu->cu->cuMemAlloc(&cnt, sizeof(zero));
		if (r == CUDA_SUCCESS) {
			r = gpu->cu->cuMemcpyHtoD(cnt, zero, sizeof(zero));
			if (r == CUDA_SUCCESS)
				p->cnt = cnt;
			else
				gpu->cu->cuMemFree(cnt);
		}
		if (r != CUDA_SUCCESS)
			ret = dmt_cuda_err(gpu->ctx, &gpu->err, r,
					   "cuMemAlloc(fence counters)", NULL);
	}
	pthread_mutex_unlock(&pools_lock);
	return ret;
}

int dmt_gpu_fence_kernel(struct devmemtcp_gpu *gpu,
			 struct devmemtcp_gpu_fence **fp,
			 struct dmt_gather_fence *kf)
{
	struct devmemtcp_gpu_fence *f;
	int ret;

	*fp = NULL;
	if (__atomic_load_n(&gpu->fence_events, __ATOMIC_RELAXED))
		return 0;
	ret = fence_get(gpu, &f, "devmemtcp_gpu_gather_release");
	if (ret)
		return ret;
	if (!f->word) {
		fence_put(f);
		return 0;
	}
	ret = page_counters(gpu, f->page);
	if (ret) {
		fence_put(f);
		return ret;
	}
	f->evented = false;
	*kf = (struct dmt_gather_fence){
		.word = f->word_dev,
		.cnt = f->page->cnt + (CUdeviceptr)(f->word - f->page->words) *
						sizeof(uint32_t),
		.seq = f->seq + 1 ?: 1,
	};
	*fp = f;
	return 0;
}

void dmt_gpu_fence_kernel_end(struct devmemtcp_gpu_fence *f,
			      const struct dmt_gather_fence *kf, bool launched)
{
	if (!launched) {
		fence_put(f);	/* nothing will write its word */
		return;
	}
	f->seq = kf->seq;
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
		dmt_gpu_fence_retire(f);
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

/* devmemtcp_gpu_new: a free word in the pool, so that the fences of the
 * handle take pinned memory without allocating it (the context current). */
int dmt_gpu_fences_prepare(struct devmemtcp_gpu *gpu)
{
	struct fence_page *p;
	int ret;

	if (gpu->fence_events)
		return 0;
	pthread_mutex_lock(&pools_lock);
	ret = page_with_free(gpu, &gpu->ctx->err, "devmemtcp_gpu_new", &p);
	pthread_mutex_unlock(&pools_lock);
	return ret;
}

/*
 * Every fence is back (the handle's last reference went): free them and
 * give their words back to the pool.  A retired fence's write is waited
 * for first; if the context failed, the words stay out of the pool rather
 * than be used again under a write that may still come.  No pinned memory
 * is freed: cuMemFreeHost would wait for the whole device.
 */
void dmt_gpu_fences_fini(struct devmemtcp_gpu *gpu)
{
	const struct dmt_cuda *cu = gpu->cu;
	struct devmemtcp_gpu_fence *f, *next;
	bool keep_words = false;

	for (f = gpu->retired_fences; f; f = next) {
		next = f->next;
		keep_words |= word_wait(f) != 0;
	}
	for (f = gpu->retired_fences; f; f = next) {
		next = f->next;
		if (f->word && !keep_words)
			word_put(f);
		free(f);
	}
	gpu->retired_fences = NULL;
	for (f = gpu->free_fences; f; f = next) {
		next = f->next;
		if (f->ev)
			cu->cuEventDestroy(f->ev);
		if (f->word && !keep_words)
			word_put(f);
		free(f);
	}
	gpu->free_fences = NULL;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_fence_done(void *fence, bool wait)
{
	DMT_KEEP_ERRNO;
	int saved = errno, ret;

	ret = fence ? dmt_gpu_fence_done(fence, wait)
		    : dmt_err(NULL, NULL, -EINVAL,
			      "devmemtcp_gpu_fence_done: fence is NULL");
	errno = saved;
	return ret;
}
