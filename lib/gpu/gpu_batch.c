// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer: coalesced gathers (opts.coalesce_bytes,
 * devmemtcp_gpu_flush) and gathers that place linear fragments
 * (devmemtcp_gpu_gather_recv).
 *
 * Coalescing.  Every stream-ordered submission the driver offers costs
 * several microseconds of CPU (an empty cuLaunchKernel 3.7 to 4.1 us on an
 * H200's host, bench/results/gather-h200-round3.md), and a receive of
 * 256 KiB arrives every 2.6 us at 800 Gb/s: there must be fewer launches
 * than receives.  So gathers wait in a batch, the parameter of one inline
 * launch (gather_abi.h: up to 1024 descriptors and 8 destinations), and
 * one launch queues them all, with one fence for all their tokens.  The
 * batch is queued:
 *   - by the gather that brings it to coalesce_bytes or fills its
 *     descriptors or destinations; before a gather that would take it
 *     past one of them (that gather opens the next batch);
 *   - by a gather call that finds the batch's first gather older than
 *     coalesce_us (with that gather);
 *   - before a gather on another stream, and before a gather whose bytes
 *     overlap the batch's (what it writes or reads against what the batch
 *     writes or reads): the warps of one launch run in no order;
 *   - by devmemtcp_gpu_flush, devmemtcp_gpu_fence_new,
 *     devmemtcp_gpu_release_after and devmemtcp_gpu_free;
 *   - by a wait for the tokens of one of its gathers (the done callback of
 *     their deferred release with wait true: devmemtcp_rx_release_all,
 *     devmemtcp_rx_free), on whatever thread waits.
 * Gathers join the batch in the order of the calls, and the batch is
 * queued before anything the handle queues after them: on the stream,
 * everything that goes through the handle keeps the calls' order.  What
 * the caller queues itself on the stream must wait for
 * devmemtcp_gpu_flush (devmemtcp_gpu_flush(3) says so).
 *
 * Linear bytes.  A gather with linear fragments copies the span of the
 * linear buffer that they cover into the handle's staging memory (pinned
 * host memory, mapped into the GPU's address space) and its descriptors
 * read them there: the launch that places the device fragments places the
 * linear ones, with no other driver call.  Staging is a ring; the bytes of
 * a launch are reused once its fence says it ran (the fence its tokens
 * wait on, or one made for it).  A gather too large for a batch (more than
 * 1024 pieces or 8 destinations) takes the launches of dmt_gpu_gather,
 * which place linear fragments from the staging too (gpu->linear_dev).
 *
 * Threads.  The handle is used by one thread at a time, but the done
 * callback of a deferred release may run on any thread and queue the
 * batch it waits for: the batch is under s->lock.  Lock order: the
 * receiver's lock (the callback runs under it), s->lock, gpu->lock
 * (fences); a gather call hands its tokens to the receiver after it has
 * dropped s->lock.  A batch object lives while a release waits on it; it
 * holds a reference on the handle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fork.h"
#include "gpu.h"

#define COALESCE_US_DEFAULT 20u
#define STAGE_MIN (1ull << 20)

enum gb_state { GB_OPEN, GB_QUEUED, GB_FAILED };

/* The gathers of one launch: what their deferred releases wait on. */
struct gbatch {
	struct devmemtcp_gpu *gpu;	/* a reference of ours */
	struct devmemtcp_gpu_fence *f;	/* once queued; NULL: none needed */
	unsigned int users;		/* releases waiting + 1 for the handle */
	int state;			/* enum gb_state, under s->lock */
	bool need_fence;		/* tokens or staged bytes wait on it */
	bool staged;			/* it reads staging */
	uint64_t stage_end;		/* where its staged bytes end */
	struct gbatch *next;		/* s->held, s->dead */
};

struct dmt_gpu_batch {
	pthread_mutex_t lock;
	struct dmt_gather_inline *p;	/* the open batch's launch parameter */
	uint32_t cap;			/* descriptors of p; 0: no batches */
	struct gbatch *open;		/* the open batch, NULL: none */
	CUstream stream;		/* its stream */
	uint32_t nd, ndst, calls;
	uint64_t bytes;			/* output positions it covers */
	uint64_t t0;			/* when its first gather came */
	uint64_t slo, shi;		/* device bytes it reads (staging aside) */
	struct {
		uint64_t lo, hi;
	} dr[DMT_INLINE_DST_MAX];	/* and writes, per destination entry */
	/* staging: head and tail count bytes ever taken (the position in the
	 * ring is the count modulo stage_size); [tail, head) is in use */
	uint8_t *stage;
	CUdeviceptr stage_dev;
	uint64_t stage_size, head, tail;
	struct gbatch *held, *held_last;	/* queued, reading staging */
	struct gbatch *dead;		/* to free once s->lock is dropped */
	struct dmt_batch_stats st;
	/* dmt_batch_gather makes the context current at its first driver
	 * call (batch_ctx): most gathers only join the open batch */
	bool ctx_lazy, ctx_entered, ctx_pushed;
};

/* ---- batch objects -------------------------------------------------------- */

static struct gbatch *gb_new(struct devmemtcp_gpu *gpu)
{
	struct gbatch *b = dmt_calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->gpu = gpu;
	b->users = 1;
	b->state = GB_OPEN;
	pthread_mutex_lock(&gpu->lock);
	gpu->refs++;
	pthread_mutex_unlock(&gpu->lock);
	return b;
}

/* Once queued (or failed), with its fence set: what gb_done reads
 * without s->lock (s->lock held). */
static void gb_set_state(struct gbatch *b, int state)
{
	__atomic_store_n(&b->state, state, __ATOMIC_RELEASE);
}

/* Drop a use: true when it was the last (then gb_free it, s->lock not
 * held). */
static bool gb_unuse(struct gbatch *b)
{
	return __atomic_sub_fetch(&b->users, 1, __ATOMIC_ACQ_REL) == 0;
}

static void gb_free(struct gbatch *b)
{
	struct devmemtcp_gpu *gpu = b->gpu;

	if (b->f) {
		/* a fence nobody waited for (a failed deferral) may still
		 * be written: retired until it is */
		if (dmt_gpu_fence_peek(b->f, false) == 1)
			dmt_gpu_fence_put(b->f);
		else
			dmt_gpu_fence_retire(b->f);
	}
	free(b);
	dmt_gpu_unref(gpu);
}

/* s->lock held: free it once the lock is dropped (unlock_reap). */
static void gb_unuse_locked(struct dmt_gpu_batch *s, struct gbatch *b)
{
	if (gb_unuse(b)) {
		b->next = s->dead;
		s->dead = b;
	}
}

/* Drop s->lock, then free what died under it (the last may be the last
 * reference of the handle: s is not touched after it). */
static void unlock_reap(struct dmt_gpu_batch *s)
{
	struct gbatch *d = s->dead;

	s->dead = NULL;
	pthread_mutex_unlock(&s->lock);
	while (d) {
		struct gbatch *next = d->next;

		gb_free(d);
		d = next;
	}
}

/* The context current before a driver call under s->lock: the callers
 * but dmt_batch_gather made it so already (s->lock held). */
static int batch_ctx(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s)
{
	int ret;

	if (!s->ctx_lazy || s->ctx_entered)
		return 0;
	ret = dmt_gpu_ctx_enter(gpu, &s->ctx_pushed);
	if (!ret)
		s->ctx_entered = true;
	return ret;
}

/* ---- staging ---------------------------------------------------------------- */

/* Queued launches that have read their staged bytes give them back;
 * wait: for the oldest at least (s->lock held). */
static void stage_reclaim(struct dmt_gpu_batch *s, bool wait)
{
	while (s->held) {
		struct gbatch *b = s->held;

		if (b->state == GB_QUEUED && b->f &&
		    dmt_gpu_fence_peek(b->f, wait) == 0)
			return;
		/* read, failed to queue, or the context failed (nothing
		 * runs any more) */
		s->tail = b->stage_end;
		s->held = b->next;
		if (!s->held)
			s->held_last = NULL;
		gb_unuse_locked(s, b);
		wait = false;
	}
}

static void stage_hold(struct dmt_gpu_batch *s, struct gbatch *b)
{
	b->next = NULL;
	if (s->held_last)
		s->held_last->next = b;
	else
		s->held = b;
	s->held_last = b;
}

static int flush_locked(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s,
			uint64_t stage_end, uint64_t *why, const char *fn);

/* A staging ring of at least 2 * len bytes: the old one emptied and
 * freed first (s->lock held, the context current). */
static int stage_grow(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s,
		      uint64_t len, const char *fn)
{
	uint64_t size = STAGE_MIN;
	CUresult r;
	void *host;
	int ret;

	while (size < 2 * len)
		size *= 2;
	ret = flush_locked(gpu, s, s->head, &s->st.by_order, fn);
	if (ret < 0)
		return ret;
	while (s->held)
		stage_reclaim(s, true);
	if (s->stage)
		gpu->cu->cuMemFreeHost(s->stage);
	s->stage = NULL;
	s->stage_size = s->head = s->tail = 0;
	r = gpu->cu->cuMemHostAlloc(&host, size, CU_MEMHOSTALLOC_DEVICEMAP);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuMemHostAlloc(linear bytes' staging)",
				    "raise the locked-memory limit (ulimit -l)");
	r = gpu->cu->cuMemHostGetDevicePointer(&s->stage_dev, host, 0);
	if (r != CUDA_SUCCESS) {
		gpu->cu->cuMemFreeHost(host);
		return dmt_cuda_err(gpu->ctx, &gpu->err, r,
				    "cuMemHostGetDevicePointer(staging)", NULL);
	}
	s->stage = host;
	s->stage_size = size;
	s->st.stage_size = size;
	return 0;
}

/* len contiguous bytes of staging: *pos their place in the ring.  Queues
 * the open batch and waits for launches when the ring is full (s->lock
 * held, the context current). */
static int stage_take(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s,
		      uint64_t len, uint64_t *pos, const char *fn)
{
	int ret = batch_ctx(gpu, s);

	if (ret)
		return ret;
	if (len > s->stage_size / 2) {
		ret = stage_grow(gpu, s, len, fn);
		if (ret)
			return ret;
	}
	for (;;) {
		uint64_t ph = s->head % s->stage_size;
		uint64_t skip = ph + len > s->stage_size ? s->stage_size - ph : 0;

		if (s->head + skip + len - s->tail <= s->stage_size) {
			s->head += skip;
			*pos = s->head % s->stage_size;
			s->head += len;
			return 0;
		}
		stage_reclaim(s, false);
		if (s->head + skip + len - s->tail <= s->stage_size)
			continue;
		if (!s->held) {
			/* what holds it is the open batch */
			ret = flush_locked(gpu, s, s->head, &s->st.by_size, fn);
			if (ret < 0)
				return ret;
			continue;
		}
		stage_reclaim(s, true);
	}
}

/* ---- queueing a batch -------------------------------------------------------- */

static void batch_reset(struct dmt_gpu_batch *s)
{
	s->nd = s->ndst = s->calls = 0;
	s->bytes = 0;
	s->slo = UINT64_MAX;
	s->shi = 0;
}

/*
 * Queue the open batch (s->lock held, the context current): one inline
 * launch, with a fence when releases or staged bytes wait on it.  Its
 * staged bytes end at stage_end.  Returns the number of gathers it
 * carried, or a negative errno when the launch failed: then nothing of
 * it runs, its releases return the tokens (no kernel reads them), and the
 * message on gpu names fn.
 */
static int flush_locked(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s,
			uint64_t stage_end, uint64_t *why, const char *fn)
{
	struct gbatch *b = s->open;
	struct dmt_gather_batch v = { .desc = s->p->desc, .dst = s->p->dst,
				      .nd = s->nd, .ndst = s->ndst,
				      .bytes = s->bytes };
	struct devmemtcp_gpu_fence *f = NULL;
	struct dmt_gather_fence kf;
	uint32_t calls = s->calls;
	int ret;

	if (!b)
		return 0;
	s->open = NULL;
	ret = batch_ctx(gpu, s);	/* failing: as a failed launch */
	if (!ret) {
		if (b->need_fence &&
		    !__atomic_load_n(&gpu->fence_events, __ATOMIC_RELAXED) &&
		    dmt_gpu_fence_kernel(gpu, &f, &kf))
			f = NULL;	/* a fence on the stream below instead */
		if (b->staged)	/* staged bytes out */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
		ret = dmt_gpu_launch_inline(gpu, s->p, &v, f ? &kf : NULL,
					    s->stream);
		if (f)
			dmt_gpu_fence_kernel_end(f, &kf, !ret);
	}
	if (!ret && f) {
		b->f = f;
		gpu->kernel_fences++;
	} else if (!ret && b->need_fence &&
		   dmt_gpu_fence_new(gpu, s->stream, &b->f)) {
		/* no fence to be had: wait for the stream now */
		b->f = NULL;
		gpu->cu->cuStreamSynchronize(s->stream);
	}
	b->stage_end = stage_end;
	if (ret && gpu->coalesce_bytes) {
		char msg[DMT_ERRMSG_MAX];

		snprintf(msg, sizeof(msg), "%s", gpu->err.msg);
		gb_set_state(b, GB_FAILED);
		dmt_err(gpu->ctx, &gpu->err, ret,
			"%s: queueing a batch of %u coalesced gathers failed: %s: their destinations were not written, and their tokens go back to the kernel",
			fn, calls, msg);
	} else if (ret) {
		gb_set_state(b, GB_FAILED);	/* the call's own gather: said so */
	} else {
		gb_set_state(b, GB_QUEUED);
		s->st.launches++;
		s->st.gathers += calls;
		(*why)++;
	}
	batch_reset(s);
	if (b->staged)
		stage_hold(s, b);	/* the handle's use, until read */
	else
		gb_unuse_locked(s, b);
	return ret ? ret : (int)calls;
}

/* The done callback of the deferred releases of a batch's gathers: a
 * wait for an open batch queues it. */
static int gb_done(void *arg, bool wait)
{
	struct gbatch *b = arg;
	struct devmemtcp_gpu *gpu = b->gpu;
	struct dmt_gpu_batch *s = gpu->batch;
	struct devmemtcp_gpu_fence *f;
	int state, ret = 0;

	/* every receive and flush polls the oldest deferred release: no
	 * lock to learn that its batch is still open, or to read the fence
	 * of a queued one (set before the state) */
	state = __atomic_load_n(&b->state, __ATOMIC_ACQUIRE);
	if (state == GB_OPEN && !wait)
		return 0;
	if (state != GB_OPEN) {
		f = b->f;
	} else {
		bool pushed;

		pthread_mutex_lock(&s->lock);
		if (b->state == GB_OPEN) {
			ret = dmt_gpu_ctx_enter(gpu, &pushed);
			if (!ret) {
				flush_locked(gpu, s, s->head, &s->st.by_wait,
					     "waiting for the tokens of a coalesced gather");
				dmt_gpu_ctx_leave(gpu, pushed);
			}
		}
		state = b->state;
		f = b->f;
		unlock_reap(s);
		if (ret)
			return ret;	/* still open: the tokens stay */
	}
	ret = state == GB_FAILED || !f ? 1 : dmt_gpu_fence_peek(f, wait);
	if (ret == 1 && gb_unuse(b))
		gb_free(b);
	return ret;
}

/* ---- adding a gather ------------------------------------------------------------ */

static bool overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

/* Whether the new gather v (built at the batch's end: positions from
 * v->pos0) touches bytes the open batch writes, or writes bytes it
 * reads. */
static bool conflicts(const struct dmt_gpu_batch *s,
		      const struct dmt_gather_batch *v)
{
	for (uint32_t j = 0; j < v->ndst; j++) {
		uint64_t end = j + 1 < v->ndst ? v->dst[j + 1].start
					       : v->pos0 + v->bytes;
		uint64_t w0 = v->dst[j].bias + v->dst[j].start;
		uint64_t w1 = v->dst[j].bias + end;

		if (overlap(w0, w1, s->slo, s->shi))
			return true;
		for (uint32_t k = 0; k < s->ndst; k++)
			if (overlap(w0, w1, s->dr[k].lo, s->dr[k].hi))
				return true;
	}
	for (uint32_t k = 0; k < s->ndst; k++)
		if (overlap(v->lo, v->hi, s->dr[k].lo, s->dr[k].hi))
			return true;
	return false;
}

/* Append the built gather v to the open batch, whose descriptors it
 * follows in p already, built at the batch's end (s->lock held). */
static void append(struct dmt_gpu_batch *s, const struct dmt_gather_batch *v)
{
	struct dmt_gather_dst *pd = s->p->dst;

	for (uint32_t j = 0; j < v->ndst; j++) {
		uint64_t start = v->dst[j].start, bias = v->dst[j].bias;
		uint64_t end = j + 1 < v->ndst ? v->dst[j + 1].start
					       : v->pos0 + v->bytes;

		if (!j && s->ndst && pd[s->ndst - 1].bias == bias) {
			s->dr[s->ndst - 1].hi = bias + end;	/* contiguous */
			continue;
		}
		pd[s->ndst] = (struct dmt_gather_dst){ s->ndst ? start : 0, bias };
		s->dr[s->ndst].lo = bias + start;
		s->dr[s->ndst].hi = bias + end;
		s->ndst++;
	}
	s->nd += v->nd;
	s->bytes += v->bytes;
	s->calls++;
	if (v->lo < s->slo)
		s->slo = v->lo;
	if (v->hi > s->shi)
		s->shi = v->hi;
}

/* Destination entries v adds to the open batch. */
static uint32_t dst_need(const struct dmt_gpu_batch *s,
			 const struct dmt_gather_batch *v)
{
	bool joins = s->ndst && s->p->dst[s->ndst - 1].bias == v->dst[0].bias;

	return v->ndst - joins;
}

/* The gather v, built at the end of a batch that has just been queued,
 * moved to the start of the next: its descriptors to the front of p,
 * positions from 0. */
static void rebase(struct dmt_gpu_batch *s, struct dmt_gather_batch *v)
{
	const uint64_t at = v->pos0;

	memmove(s->p->desc, v->desc, v->nd * sizeof(*v->desc));
	v->desc = s->p->desc;
	for (uint32_t i = 0; i < v->nd; i++)
		v->desc[i].pos -= (uint32_t)at;
	for (uint32_t j = 0; j < v->ndst; j++) {
		v->dst[j].start -= at;
		v->dst[j].bias += at;
	}
	v->pos0 = 0;
}

/* A gather too large for a batch: queued at once by dmt_gpu_gather (the
 * open batch is queued before it), a batch object of its own for the
 * releases and the staged bytes. */
static int gather_big(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s,
		      bool release, const struct devmemtcp_frag *frags,
		      size_t n, const struct devmemtcp_gpu_iov *dsts,
		      size_t ndst, CUstream stream, uint64_t linear,
		      bool staged, uint64_t call_start, struct gbatch **bp,
		      const char *fn)
{
	struct devmemtcp_gpu_fence *f = NULL;
	struct dmt_gather_fence kf;
	bool fenced = false, need = release || staged;
	struct gbatch *b;
	int ret;

	ret = flush_locked(gpu, s, call_start, &s->st.by_order, fn);
	if (ret < 0)
		return ret;
	ret = batch_ctx(gpu, s);
	if (ret)
		return ret;
	b = gb_new(gpu);
	if (!b)
		return dmt_err_nomem(gpu->ctx, &gpu->err, fn);
	if (need && !__atomic_load_n(&gpu->fence_events, __ATOMIC_RELAXED) &&
	    dmt_gpu_fence_kernel(gpu, &f, &kf))
		f = NULL;
	gpu->linear_dev = linear;
	if (staged)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ret = dmt_gpu_gather(gpu, frags, n, dsts, ndst, f ? &kf : NULL,
			     &fenced, stream);
	gpu->linear_dev = 0;
	if (f)
		dmt_gpu_fence_kernel_end(f, &kf, fenced);
	if (ret) {
		/* a launch of a split gather may be queued, with the fence or
		 * before it, and read the staged bytes: they wait for it */
		if (fenced)
			b->f = f;
		else if (staged && dmt_gpu_fence_new(gpu, stream, &b->f))
			gpu->cu->cuStreamSynchronize(stream);
		gb_set_state(b, GB_QUEUED);
		b->staged = staged;
		b->stage_end = s->head;
		if (staged)
			stage_hold(s, b);
		else
			gb_unuse_locked(s, b);
		return ret;
	}
	if (fenced) {
		b->f = f;
		gpu->kernel_fences++;
	} else if (need && dmt_gpu_fence_new(gpu, stream, &b->f)) {
		b->f = NULL;
		gpu->cu->cuStreamSynchronize(stream);
	}
	gb_set_state(b, GB_QUEUED);
	b->need_fence = need;
	b->staged = staged;
	b->stage_end = s->head;
	s->st.big++;
	if (release) {
		__atomic_add_fetch(&b->users, 1, __ATOMIC_RELAXED);
		*bp = b;
	}
	if (staged)
		stage_hold(s, b);
	else
		gb_unuse_locked(s, b);
	return 0;
}

/*
 * Place the gather in the open batch, or in a new one, or queue it at
 * once (too large); *bp: the batch its tokens wait on (a use taken for
 * them), NULL when nothing of it reads device bytes (s->lock held, the
 * context current).
 */
static int add(struct devmemtcp_gpu *gpu, struct dmt_gpu_batch *s,
	       bool release, const struct devmemtcp_frag *frags, size_t n,
	       const struct devmemtcp_gpu_iov *dsts, size_t ndst,
	       CUstream stream, uint64_t linear, bool staged,
	       uint64_t call_start, struct gbatch **bp, const char *fn)
{
	struct dmt_gather_dst td[DMT_INLINE_DST_MAX];
	struct dmt_gather_cursor cur = { 0 };
	struct dmt_gather_batch v = { .desc = s->p->desc + s->nd, .dst = td,
				      .max_desc = s->cap - s->nd,
				      .max_dst = DMT_INLINE_DST_MAX,
				      .linear = linear, .pos0 = s->bytes };
	uint64_t now;
	uint64_t *why = NULL;
	int ret = 0;

	if (v.max_desc)
		ret = dmt_gather_build(gpu->ctx, &gpu->err, frags, n, dsts,
				       ndst, &cur, &v);
	if (ret)
		return ret;
	if (cur.i < n && s->nd) {
		/* not with the open batch: alone, then */
		ret = flush_locked(gpu, s, call_start, &s->st.by_size, fn);
		if (ret < 0)
			return ret;
		cur = (struct dmt_gather_cursor){ 0 };
		v.desc = s->p->desc;
		v.max_desc = s->cap;
		v.pos0 = 0;
		ret = dmt_gather_build(gpu->ctx, &gpu->err, frags, n, dsts,
				       ndst, &cur, &v);
		if (ret)
			return ret;
	}
	if (cur.i < n)
		return gather_big(gpu, s, release, frags, n, dsts, ndst,
				  stream, linear, staged, call_start, bp, fn);
	if (!v.nd)
		return 0;	/* holes only: nothing to read */
	if (s->nd &&
	    ((gpu->coalesce_bytes && s->bytes + v.bytes > gpu->coalesce_bytes) ||
	     s->ndst + dst_need(s, &v) > DMT_INLINE_DST_MAX ||
	     conflicts(s, &v))) {
		bool order = s->bytes + v.bytes <= gpu->coalesce_bytes &&
			     s->ndst + dst_need(s, &v) <= DMT_INLINE_DST_MAX;

		ret = flush_locked(gpu, s, call_start,
				   order ? &s->st.by_order : &s->st.by_size, fn);
		if (ret < 0)
			return ret;
		rebase(s, &v);	/* the batch is new */
	}
	now = gpu->coalesce_bytes ? dmt_mono_ns() : 0;
	if (!s->open) {
		s->open = gb_new(gpu);
		if (!s->open)
			return dmt_err_nomem(gpu->ctx, &gpu->err, fn);
		s->stream = stream;
		s->t0 = now;
	}
	append(s, &v);
	s->open->need_fence |= release || staged;
	s->open->staged |= staged;
	if (release) {
		__atomic_add_fetch(&s->open->users, 1, __ATOMIC_RELAXED);
		*bp = s->open;
	}
	if (!gpu->coalesce_bytes)
		why = &s->st.by_call;
	else if (s->bytes >= gpu->coalesce_bytes || s->nd == s->cap ||
		 s->ndst == DMT_INLINE_DST_MAX)
		why = &s->st.by_size;
	else if (now - s->t0 >= (uint64_t)gpu->coalesce_us * 1000)
		why = &s->st.by_age;
	if (s->bytes > s->st.pending_max && !why)
		s->st.pending_max = s->bytes;
	if (why) {
		/* the launch may fail; the gather is in it all the same:
		 * its tokens are the batch's */
		ret = flush_locked(gpu, s, s->head, why, fn);
		return ret < 0 ? ret : 0;
	}
	return 0;
}

/* The span [*lo, *hi) of the linear buffer (len bytes) that the linear
 * fragments cover (*hi == 0: none). */
static int linear_span(struct devmemtcp_gpu *gpu,
		       const struct devmemtcp_frag *frags, size_t n, size_t len,
		       uint64_t *lo, uint64_t *hi, const char *fn)
{
	uint64_t l = UINT64_MAX, h = 0;

	for (size_t i = 0; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (!(f->flags & DEVMEMTCP_FRAG_LINEAR) || !f->len)
			continue;
		if (f->offset > len || f->len > len - f->offset)
			return dmt_err(gpu->ctx, &gpu->err, -EINVAL,
				       "%s: linear fragment %zu (offset %llu, %u bytes) lies outside the linear buffer of %zu bytes: give the buffer and length devmemtcp_rx_recv filled",
				       fn, i, (unsigned long long)f->offset,
				       f->len, len);
		if (f->offset < l)
			l = f->offset;
		if (f->offset + f->len > h)
			h = f->offset + f->len;
	}
	*lo = l;
	*hi = h;
	return 0;
}

int dmt_batch_gather(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
		     const struct devmemtcp_frag *frags, size_t n,
		     const void *linear, size_t len,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     CUstream stream, const char *fn)
{
	struct dmt_gpu_batch *s = gpu->batch;
	uint64_t lo = 0, hi = 0, ldev = 0, call_start;
	struct gbatch *b = NULL;
	bool staged = false;
	int ret;

	if (linear) {
		ret = linear_span(gpu, frags, n, len, &lo, &hi, fn);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&s->lock);
	s->ctx_lazy = true;
	if (s->open && s->stream != stream) {
		ret = flush_locked(gpu, s, s->head, &s->st.by_order, fn);
		if (ret < 0)
			goto out;
	}
	call_start = s->head;
	if (hi) {
		uint64_t pos;

		ret = stage_take(gpu, s, hi - lo, &pos, fn);
		if (ret)
			goto out;
		call_start = s->head - (hi - lo);
		memcpy(s->stage + pos, (const uint8_t *)linear + lo, hi - lo);
		ldev = s->stage_dev + pos - lo;
		staged = true;
		s->st.staged_bytes += hi - lo;
	}
	ret = add(gpu, s, rx != NULL, frags, n, dsts, ndst, stream, ldev,
		  staged, call_start, &b, fn);
	if (ret && b) {
		/* nothing deferred: the fragments stay the caller's */
		gb_unuse_locked(s, b);
		b = NULL;
	}
	if (ret && staged &&
	    !(s->held_last && s->held_last->stage_end > call_start))
		s->head = call_start;	/* nothing reads this call's bytes */
	s->st.pending_bytes = s->bytes;
	s->st.pending_gathers = s->calls;
out:
	if (s->ctx_entered)
		dmt_gpu_ctx_leave(gpu, s->ctx_pushed);
	s->ctx_lazy = s->ctx_entered = s->ctx_pushed = false;
	unlock_reap(s);
	if (ret || !rx)
		return ret;
	ret = b ? devmemtcp_rx_release_after(rx, frags, n, gb_done, b)
		: devmemtcp_rx_release(rx, frags, n);
	if (ret < 0) {
		if (b && gb_unuse(b))
			gb_free(b);
		return dmt_err(gpu->ctx, &gpu->err, ret,
			       "%s: %s (the gather stays queued; the fragments are still the caller's)",
			       b ? "devmemtcp_rx_release_after"
				 : "devmemtcp_rx_release",
			       devmemtcp_rx_errmsg(rx));
	}
	return 0;
}

int dmt_batch_flush(struct devmemtcp_gpu *gpu, const char *fn, bool asked)
{
	struct dmt_gpu_batch *s = gpu->batch;
	bool pushed;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (s->open) {
		ret = dmt_gpu_ctx_enter(gpu, &pushed);
		if (!ret) {
			ret = flush_locked(gpu, s, s->head,
					   asked ? &s->st.by_flush
						 : &s->st.by_order, fn);
			dmt_gpu_ctx_leave(gpu, pushed);
		}
		s->st.pending_bytes = 0;
		s->st.pending_gathers = 0;
	}
	unlock_reap(s);
	return ret;
}

/* ---- the handle's ------------------------------------------------------------- */

int dmt_batch_init(struct devmemtcp_gpu *gpu)
{
	struct dmt_gpu_batch *s = dmt_calloc(1, sizeof(*s));

	if (!s)
		return dmt_err_nomem(gpu->ctx, &gpu->ctx->err, "devmemtcp_gpu_new");
	/* batches are inline launches: not where gathers never are */
	s->cap = gpu->mode == DMT_GATHER_AUTO ? gpu->inline_max : 0;
	s->p = dmt_malloc(sizeof(*s->p) +
			  (s->cap ? s->cap : 1) * sizeof(struct dmt_gather_desc));
	if (!s->p) {
		free(s);
		return dmt_err_nomem(gpu->ctx, &gpu->ctx->err, "devmemtcp_gpu_new");
	}
	pthread_mutex_init(&s->lock, NULL);
	batch_reset(s);
	if (!gpu->coalesce_us)
		gpu->coalesce_us = COALESCE_US_DEFAULT;
	gpu->batch = s;
	return 0;
}

void dmt_batch_close(struct devmemtcp_gpu *gpu)
{
	struct dmt_gpu_batch *s = gpu->batch;
	bool pushed;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	if (!dmt_gpu_ctx_enter(gpu, &pushed)) {
		flush_locked(gpu, s, s->head, &s->st.by_wait,
			     "devmemtcp_gpu_free");
		while (s->held)
			stage_reclaim(s, true);
		dmt_gpu_ctx_leave(gpu, pushed);
	}
	unlock_reap(s);
}

void dmt_batch_fini(struct devmemtcp_gpu *gpu)
{
	struct dmt_gpu_batch *s = gpu->batch;

	if (!s)
		return;
	/* nothing is held any more: every batch object had a reference */
	if (s->stage)
		gpu->cu->cuMemFreeHost(s->stage);
	pthread_mutex_destroy(&s->lock);
	free(s->p);
	free(s);
	gpu->batch = NULL;
}

void dmt_batch_stats(struct devmemtcp_gpu *gpu, struct dmt_batch_stats *st)
{
	struct dmt_gpu_batch *s = gpu->batch;

	pthread_mutex_lock(&s->lock);
	*st = s->st;
	st->pending_bytes = s->bytes;
	st->pending_gathers = s->calls;
	pthread_mutex_unlock(&s->lock);
}

/* ---- entry points ---------------------------------------------------------------- */

static int gather_recv_impl(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
			    const struct devmemtcp_frag *frags, size_t n,
			    const void *linear, size_t len,
			    const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			    void *stream)
{
	static const char fn[] = "devmemtcp_gpu_gather_recv";
	bool has_linear = false;

	int ret = dmt_gather_args(gpu, fn, false, rx, frags, n, dsts, ndst);

	if (ret || !n)
		return ret;
	if (linear) {
		/* four flags per test: no branch per fragment */
		uint32_t any = 0;
		size_t i = 0;

		for (; i + 4 <= n && !(any & DEVMEMTCP_FRAG_LINEAR); i += 4)
			any |= frags[i].flags | frags[i + 1].flags |
			       frags[i + 2].flags | frags[i + 3].flags;
		for (; i < n; i++)
			any |= frags[i].flags;
		has_linear = any & DEVMEMTCP_FRAG_LINEAR;
	}
	if (!gpu->coalesce_bytes && !has_linear)
		return rx ? devmemtcp_gpu_gather_release(gpu, rx, frags, n, dsts,
							 ndst, stream)
			  : devmemtcp_gpu_gather(gpu, frags, n, dsts, ndst,
						 stream);
	return dmt_batch_gather(gpu, rx, frags, n, has_linear ? linear : NULL,
				len, dsts, ndst, (CUstream)stream, fn);
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_gather_recv(
	struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
	const struct devmemtcp_frag *frags, size_t n, const void *linear,
	size_t len, const struct devmemtcp_gpu_iov *dsts, size_t ndst,
	void *stream)
{
	DMT_KEEP_ERRNO;
	int saved = errno;
	int ret = gather_recv_impl(gpu, rx, frags, n, linear, len, dsts, ndst,
				   stream);

	errno = saved;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_gpu_flush(struct devmemtcp_gpu *gpu)
{
	DMT_KEEP_ERRNO;
	int saved = errno, ret;

	if (!gpu)
		ret = dmt_err(NULL, NULL, -EINVAL, "devmemtcp_gpu_flush: gpu is NULL");
	else if (dmt_forked(gpu->fork_gen))	/* CUDA does not survive fork() */
		ret = dmt_fork_refuse(gpu->ctx, &gpu->err, "devmemtcp_gpu_flush", "GPU handle");
	else
		ret = dmt_batch_flush(gpu, "devmemtcp_gpu_flush", true);
	errno = saved;
	return ret;
}
