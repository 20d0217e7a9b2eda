// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A stand-in for libcuda.so.1 on machines without an NVIDIA GPU (tests
 * only; DEVMEMTCP_LIBCUDA points the library at it): the driver entry
 * points the library, the GPU tests and the benchmarks call, on host
 * memory.  Device addresses are host addresses; each stream is a thread
 * that runs its operations in order, so work is asynchronous as on a GPU;
 * events, stream memory operations and CUDA graphs behave as the driver
 * documents them.  The gather kernels run as C transcriptions of
 * lib/gpu/gather.cu: a launch runs every warp of its grid (so a grid too small
 * for its descriptors leaves bytes out), the persistent kernel runs one
 * thread per block with the same go/done/stop protocol.  It checks what a
 * GPU would fault on: a block of more than 256 threads, a destination
 * table larger than the shared memory given, an unknown kernel.
 *
 * What it cannot tell: the speed of anything, and whether the real
 * kernels do what their transcriptions here do.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda.h"
#include "gather_index.h"
#include "gpu.h"
#include "../emu/emu-cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define FAKE_SMS 4
#define ERR_NOT_FOUND 500
#define ERR_LAUNCH 719
#define ERR_INVALID_CONTEXT 201

static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;

/*
 * Driver failures the tests ask for: DEVMEMTCP_FAKE_CUDA_FAIL=NAME=CODE
 * makes entry point NAME return CODE while it is set;
 * DEVMEMTCP_FAKE_CUDA_NO_MEMOPS=1: a device without 64-bit stream memory
 * operations; DEVMEMTCP_FAKE_CUDA_CAPTURING=1: every stream is being
 * captured into a graph.
 */
static CUresult injected(const char *fn)
{
	const char *spec = getenv("DEVMEMTCP_FAKE_CUDA_FAIL");
	size_t len = strlen(fn);

	if (!spec || strncmp(spec, fn, len) || spec[len] != '=')
		return CUDA_SUCCESS;
	return (CUresult)atoi(spec + len + 1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pause_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void die(const char *what)
{
	fprintf(stderr, "fake-cuda: %s\n", what);
	abort();
}

/* ---- allocations (for cuPointerGetAttribute) -------------------------------- */

struct alloc {
	uintptr_t base;
	size_t size;
	struct alloc *next;
};
static struct alloc *allocs;

static void alloc_add(uintptr_t base, size_t size)
{
	struct alloc *a = malloc(sizeof(*a));

	if (!a)
		die("out of memory");
	*a = (struct alloc){ base, size, NULL };
	pthread_mutex_lock(&big);
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&big);
}

static void alloc_del(uintptr_t base)
{
	pthread_mutex_lock(&big);
	for (struct alloc **p = &allocs; *p; p = &(*p)->next) {
		if ((*p)->base == base) {
			struct alloc *a = *p;

			*p = a->next;
			free(a);
			break;
		}
	}
	pthread_mutex_unlock(&big);
}

static const struct alloc *alloc_find(uintptr_t p)
{
	const struct alloc *found = NULL;

	pthread_mutex_lock(&big);
	for (struct alloc *a = allocs; a; a = a->next)
		if (p - a->base < a->size)
			found = a;
	pthread_mutex_unlock(&big);
	return found;
}

/* ---- kernels ------------------------------------------------------------------ */

enum fn_id { F_GATHER, F_INLINE, F_PERSIST, F_SPIN, F_SPIN_WRITE, F_NOP, F_EMU_SCATTER };

struct CUfunc_st {
	const char *name;
	enum fn_id id;
	size_t psize;		/* bytes of the one struct parameter */
};

static struct CUfunc_st fns[] = {
	{ "dmt_gather", F_GATHER, 0 },
	{ "dmt_gather_inline16", F_INLINE, DMT_INLINE_HDR + 16 * 16 },
	{ "dmt_gather_inline64", F_INLINE, DMT_INLINE_HDR + 64 * 16 },
	{ "dmt_gather_inline256", F_INLINE, DMT_INLINE_HDR + 256 * 16 },
	{ "dmt_gather_inline1024", F_INLINE, DMT_INLINE_HDR + 1024 * 16 },
	{ "dmt_gather_persist", F_PERSIST, sizeof(struct dmt_persist_params) },
	{ "dmt_spin", F_SPIN, 0 },
	{ "dmt_spin_write", F_SPIN_WRITE, 0 },
	{ "dmt_nop", F_NOP, 0 },
	/* the emulated NIC's (tests/emu/emu-scatter.cu), from PTX text */
	{ "dmt_emu_scatter", F_EMU_SCATTER, 0 },
};

struct launch {
	const struct CUfunc_st *fn;
	unsigned int grid, gridy, block, smem;
	CUdeviceptr descs, dsts;	/* F_GATHER */
	struct dmt_gather_args a;	/* F_GATHER */
	struct dmt_gather_fence f;	/* F_GATHER */
	unsigned long long ns;		/* F_SPIN, F_SPIN_WRITE */
	uint64_t addr;			/* F_SPIN_WRITE; F_EMU_SCATTER: the staging */
	uint32_t value;			/* F_EMU_SCATTER: the pieces */
	/* the kernel's parameter struct is 16-byte aligned */
	unsigned char param[DMT_INLINE_HDR + 1024 * 16] __attribute__((aligned(16)));
};

static void copy(uint64_t src, uint64_t dst, uint64_t len)
{
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len);
}

/* copy_slice of gather.cu: slice part of split of descriptor v. */
static void copy_slice(const struct dmt_gather_desc *v,
		       const struct dmt_gather_dst *sdst, uint32_t ndst,
		       uint64_t bias, uint32_t split, uint32_t part)
{
	uint64_t off;
	uint32_t len = dmt_slice(v->len, split, part, &off);

	if (len)
		copy(v->src + off, dmt_out_addr(sdst, ndst, bias, v->pos) + off, len);
}

/* Descriptor d of a block that has [d0, d1) of them (staged in shared
 * memory, or the whole parameter of an inline launch). */
static const struct dmt_gather_desc *desc_at(const struct dmt_gather_desc *descs,
					     uint32_t d0, uint32_t d1,
					     uint32_t d)
{
	if (d < d0 || d >= d1)
		die("a warp reads a descriptor its block did not stage");
	return &descs[d - d0];
}

/* gather_warp of gather.cu. */
static void gather_warp(const struct dmt_gather_desc *descs, uint32_t d0,
			uint32_t d1, const struct dmt_gather_dst *sdst,
			uint32_t n, uint32_t ndst, uint64_t bias, uint32_t per,
			uint32_t split, uint32_t vw)
{
	uint32_t first, part;
	uint32_t cnt = dmt_warp_share(vw, n, per, split, &first, &part);

	if (cnt && split > 1) {
		copy_slice(desc_at(descs, d0, d1, first), sdst, ndst, bias,
			   split, part);
		return;
	}
	for (uint32_t k = first; k < first + cnt; k++) {
		const struct dmt_gather_desc *v = desc_at(descs, d0, d1, k);

		copy(v->src, dmt_out_addr(sdst, ndst, bias, v->pos), v->len);
	}
}

/* gather_block of gather.cu: the block stages the descriptors its warps
 * vw0 .. vw0 + warps - 1 take, once, then each warp copies its share. */
static void gather_block(const struct dmt_gather_desc *descs,
			 const struct dmt_gather_dst *sdst, uint32_t n,
			 uint32_t ndst, uint64_t bias, uint32_t per,
			 uint32_t split, uint32_t vw0, uint32_t warps)
{
	struct dmt_gather_desc staged[DMT_STAGE_MAX];
	uint32_t d0, d1;

	dmt_warp_range(vw0, warps, n, per, split, &d0, &d1);
	if (d1 - d0 > DMT_STAGE_MAX)
		die("a block stages more descriptors than its shared memory holds");
	memcpy(staged, (const void *)&descs[d0], (d1 - d0) * sizeof(*staged));
	for (uint32_t w = 0; w < warps; w++)
		gather_warp(staged, d0, d1, sdst, n, ndst, bias, per, split,
			    vw0 + w);
}

static const struct dmt_gather_dst *stage_dsts(const struct launch *l,
					       const struct dmt_gather_dst *dsts,
					       uint32_t ndst)
{
	static __thread struct dmt_gather_dst sdst[DMT_GATHER_DST_MAX];

	if (ndst > 1) {
		if (ndst > DMT_GATHER_DST_MAX || l->smem < ndst * sizeof(*sdst))
			die("destination table larger than the shared memory of the launch");
		memcpy(sdst, dsts, ndst * sizeof(*sdst));
	}
	return sdst;
}

/* dmt_gather: descriptors in memory, a one-dimensional grid. */
static void gather_grid(const struct launch *l,
			const struct dmt_gather_desc *descs,
			const struct dmt_gather_dst *dsts,
			const struct dmt_gather_args *a)
{
	const struct dmt_gather_dst *sdst = stage_dsts(l, dsts, a->ndst);
	uint32_t warps = l->block / 32;

	if (l->gridy != 1)
		die("a launch from a slot with a two-dimensional grid");
	for (uint32_t b = 0; b < l->grid; b++)
		gather_block(descs, sdst, a->n, a->ndst, a->bias, a->per,
			     a->split, b * warps, warps);
}

/* dmt_gather_inline<N>: descriptors in the parameter; with gridDim.y > 1,
 * warp w of block (x, y) copies slice y of descriptor x * warps + w. */
static void gather_inline(const struct launch *l,
			  const struct dmt_gather_inline *in, uint32_t nmax)
{
	const struct dmt_gather_args *a = &in->a;
	const struct dmt_gather_dst *sdst = stage_dsts(l, in->dst, a->ndst);
	uint32_t warps = l->block / 32;

	if (a->n > nmax)
		die("an inline launch with more descriptors than its parameter holds");
	if (l->gridy == 1) {
		for (uint32_t vw = 0; vw < l->grid * warps; vw++)
			gather_warp(in->desc, 0, nmax, sdst, a->n, a->ndst,
				    a->bias, a->per, a->split, vw);
		return;
	}
	if (a->split != l->gridy || a->per != 1)
		die("a two-dimensional inline launch whose arguments disagree with its grid");
	for (uint32_t x = 0; x < l->grid; x++)
		for (uint32_t y = 0; y < l->gridy; y++)
			for (uint32_t w = 0; w < warps; w++)
				if (x * warps + w < a->n)
					copy_slice(&in->desc[x * warps + w], sdst,
						   a->ndst, a->bias, l->gridy, y);
}

/* ---- the persistent kernel, one thread per block -------------------------------- */

struct block {
	const struct dmt_persist_params *p;
	unsigned int b, grid;
};

static bool try_stop(const struct dmt_persist_params *p,
		     struct dmt_persist_dev *dev, struct dmt_persist_host *h,
		     uint32_t s)
{
	uint32_t a, req;

	__atomic_store_n(&h->exiting, (uint64_t)p->gen << 32 | s,
			 __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_seq_cst);
	a = __atomic_load_n(&h->announced, __ATOMIC_RELAXED);
	req = __atomic_load_n(&h->stop_req, __ATOMIC_RELAXED);
	if (!req && (int32_t)(a - s) >= 0) {
		__atomic_store_n(&h->exiting, 0, __ATOMIC_RELAXED);
		atomic_thread_fence(memory_order_seq_cst);
		return false;
	}
	__atomic_store_n(&dev->stop, (uint64_t)p->gen << 32 | s,
			 __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_seq_cst);
	return true;
}

static bool wait_job(const struct block *bl, struct dmt_persist_dev *dev,
		     uint64_t *go, struct dmt_persist_host *h, uint32_t s,
		     uint64_t *gp)
{
	const struct dmt_persist_params *p = bl->p;
	double t0 = now();
	unsigned int polls = 0;

	for (;;) {
		uint64_t g;

		if (DMT_STOPS(__atomic_load_n(&dev->stop, __ATOMIC_ACQUIRE),
			      p->gen, s))
			return true;
		g = __atomic_load_n(&go[s & (p->nslots - 1)], __ATOMIC_ACQUIRE);
		if (DMT_GO_SEQ(g) == DMT_GO_SEQ(s)) {
			atomic_thread_fence(memory_order_seq_cst);
			if (DMT_STOPS(__atomic_load_n(&dev->stop, __ATOMIC_ACQUIRE),
				      p->gen, s))
				return true;
			*gp = g;
			return false;
		}
		if (bl->b == 0 &&
		    ((now() - t0) * 1e9 >= p->idle_ns ||
		     ((++polls & 63) == 0 &&
		      __atomic_load_n(&h->stop_req, __ATOMIC_RELAXED)))) {
			if (try_stop(p, dev, h, s))
				return true;
			t0 = now();
		}
		pause_us(2);
	}
}

static void *persist_block(void *arg)
{
	const struct block *bl = arg;
	const struct dmt_persist_params *p = bl->p;
	struct dmt_persist_dev *dev = (struct dmt_persist_dev *)(uintptr_t)p->dev;
	uint64_t *go = (uint64_t *)(dev + 1);
	uint32_t *cnt = (uint32_t *)(go + p->nslots);
	struct dmt_persist_host *h = (struct dmt_persist_host *)(uintptr_t)p->host;
	uint32_t *slot_done = (uint32_t *)(h + 1);
	const struct dmt_persist_job *jobs =
		(const struct dmt_persist_job *)(uintptr_t)p->jobs;
	struct dmt_gather_dst *sdst = malloc(DMT_GATHER_DST_MAX * sizeof(*sdst));

	if (!sdst)
		die("out of memory");
	for (uint32_t s = p->seq0;; s++) {
		uint32_t slot = s & (p->nslots - 1), n, per, split, ndst = 1;
		const struct dmt_gather_desc *descs =
			(const void *)(uintptr_t)(p->desc_base + slot * p->slot_stride);
		const struct dmt_gather_dst *dsts =
			(const void *)(uintptr_t)(p->dst_base + slot * p->slot_stride);
		uint64_t g = 0, bias = 0, nw;

		if (wait_job(bl, dev, go, h, s, &g))
			break;
		n = DMT_GO_GET_N(g);
		per = DMT_GO_GET_PER(g);
		split = DMT_GO_GET_SPLIT(g);
		if (DMT_GO_GET_MULTI(g)) {
			ndst = __atomic_load_n(&jobs[slot].ndst, __ATOMIC_RELAXED);
			if (ndst > DMT_GATHER_DST_MAX)
				die("persistent job with too many destinations");
			memcpy(sdst, dsts, ndst * sizeof(*sdst));
		} else {
			bias = __atomic_load_n(&jobs[slot].bias, __ATOMIC_RELAXED);
		}
		nw = ((uint64_t)n + per - 1) / per * split;
		for (uint64_t vw = bl->b * 8; vw < nw; vw += bl->grid * 8)
			gather_block(descs, sdst, n, ndst, bias, per, split,
				     (uint32_t)vw, 8);
		atomic_thread_fence(memory_order_seq_cst);
		if (__atomic_fetch_add(&cnt[slot], 1, __ATOMIC_SEQ_CST) ==
		    bl->grid - 1) {
			__atomic_store_n(&cnt[slot], 0, __ATOMIC_SEQ_CST);
			__atomic_store_n(&dev->done, s, __ATOMIC_SEQ_CST);
			__atomic_store_n(&h->done, s, __ATOMIC_SEQ_CST);
			__atomic_store_n(&slot_done[slot], s, __ATOMIC_SEQ_CST);
		}
	}
	free(sdst);
	if (__atomic_fetch_add(&dev->nexit, 1, __ATOMIC_SEQ_CST) == bl->grid - 1) {
		__atomic_store_n(&dev->nexit, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&h->exited, p->gen, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void persist_grid(const struct launch *l)
{
	const struct dmt_persist_params *p = (const void *)l->param;
	pthread_t th[64];
	struct block bl[64];

	if (l->grid > 64 || (p->nslots & (p->nslots - 1)))
		die("persistent kernel: grid above 64 or slots not a power of two");
	if (l->smem < DMT_GATHER_DST_MAX * sizeof(struct dmt_gather_dst))
		die("persistent kernel without room for destination tables");
	for (unsigned int b = 0; b < l->grid; b++) {
		bl[b] = (struct block){ p, b, l->grid };
		if (pthread_create(&th[b], NULL, persist_block, &bl[b]))
			die("pthread_create");
	}
	for (unsigned int b = 0; b < l->grid; b++)
		pthread_join(th[b], NULL);
}

/* The launch's fence, once every block has run (gather.cu's fence_signal:
 * the last block to finish resets the counter and writes the word). */
static void fence_signal(const struct dmt_gather_fence *f)
{
	uint32_t *cnt = (uint32_t *)(uintptr_t)f->cnt;

	if (!f->word)
		return;
	if (!f->cnt || *cnt)
		die("a gather fence whose block counter is missing or not zero");
	/* the blocks' increments end with the last one's reset */
	__atomic_store_n((uint32_t *)(uintptr_t)f->word, f->seq,
			 __ATOMIC_SEQ_CST);
}

/* The emulated NIC's scatter kernel: its source, run a thread at a time
 * (its threads share nothing but what they read); uint4 aligned as CUDA's,
 * so that UBSan's alignment check sees what a GPU would fault on. */
typedef struct {
	uint32_t x, y, z, w;
} __attribute__((aligned(16))) uint4;
static __thread struct {
	unsigned int x;
} blockIdx, gridDim, threadIdx, blockDim;
#include "../emu/emu-scatter.cu"

static void emu_scatter(const struct launch *l)
{
	gridDim.x = l->grid;
	blockDim.x = l->block;
	for (blockIdx.x = 0; blockIdx.x < l->grid; blockIdx.x++)
		for (threadIdx.x = 0; threadIdx.x < l->block; threadIdx.x++)
			dmt_emu_scatter((const void *)(uintptr_t)l->descs, l->value,
					(const void *)(uintptr_t)l->addr,
					(void *)(uintptr_t)l->dsts);
}

static void run_kernel(const struct launch *l)
{
	const struct dmt_gather_inline *in = (const void *)l->param;

	switch (l->fn->id) {
	case F_GATHER:
		gather_grid(l, (const void *)(uintptr_t)l->descs,
			    (const void *)(uintptr_t)l->dsts, &l->a);
		fence_signal(&l->f);
		break;
	case F_INLINE:
		gather_inline(l, in, (uint32_t)((l->fn->psize - DMT_INLINE_HDR) /
						sizeof(struct dmt_gather_desc)));
		fence_signal(&in->f);
		break;
	case F_PERSIST:
		persist_grid(l);
		break;
	case F_SPIN:
		pause_us(l->ns / 1000);
		break;
	case F_SPIN_WRITE:
		pause_us(l->ns / 1000);
		__atomic_store_n((uint32_t *)(uintptr_t)l->addr, l->value,
				 __ATOMIC_SEQ_CST);
		break;
	case F_EMU_SCATTER:
		emu_scatter(l);
		break;
	case F_NOP:
		break;
	}
}

/* ---- streams ------------------------------------------------------------------ */

enum op_kind { OP_KERNEL, OP_COPY, OP_COPY2D, OP_SET, OP_EVENT, OP_WRITE, OP_WAIT32 };

struct op {
	enum op_kind k;
	struct op *next;
	struct launch *l;
	uint64_t to, from, len, value;
	uint64_t rows, spitch, dpitch;	/* OP_COPY2D: len bytes a row */
	int width;
	CUevent ev;
	unsigned long evseq;
};

struct CUstream_st {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct op *head, *tail;
	bool busy, quit;
};

struct CUevent_st {
	atomic_ulong recorded, completed;
	double t;
};

static struct CUstream_st *legacy;	/* the NULL stream */
static struct CUstream_st *streams[256];
static int nstreams;

static void exec(struct op *o)
{
	switch (o->k) {
	case OP_KERNEL:
		run_kernel(o->l);
		free(o->l);
		break;
	case OP_COPY:
		copy(o->from, o->to, o->len);
		break;
	case OP_COPY2D:
		for (uint64_t r = 0; r < o->rows; r++)
			copy(o->from + r * o->spitch, o->to + r * o->dpitch, o->len);
		break;
	case OP_SET:
		memset((void *)(uintptr_t)o->to, (int)o->value, o->len);
		break;
	case OP_EVENT:
		o->ev->t = now();
		atomic_store(&o->ev->completed, o->evseq);
		break;
	case OP_WRITE:
		atomic_thread_fence(memory_order_seq_cst);
		if (o->width == 8)
			__atomic_store_n((uint64_t *)(uintptr_t)o->to, o->value,
					 __ATOMIC_SEQ_CST);
		else
			__atomic_store_n((uint32_t *)(uintptr_t)o->to,
					 (uint32_t)o->value, __ATOMIC_SEQ_CST);
		break;
	case OP_WAIT32:
		while ((int32_t)(__atomic_load_n((uint32_t *)(uintptr_t)o->to,
						 __ATOMIC_SEQ_CST) -
				 (uint32_t)o->value) < 0)
			pause_us(2);
		break;
	}
}

static void *worker(void *arg)
{
	struct CUstream_st *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct op *o;

		while (!s->head && !s->quit)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head)
			break;
		o = s->head;
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = true;
		pthread_mutex_unlock(&s->mu);
		exec(o);
		free(o);
		pthread_mutex_lock(&s->mu);
		s->busy = false;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static struct CUstream_st *stream_new(void)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		die("out of memory");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, worker, s))
		die("pthread_create");
	pthread_mutex_lock(&big);
	if (nstreams < 256)
		streams[nstreams++] = s;
	pthread_mutex_unlock(&big);
	return s;
}

static struct CUstream_st *stream_of(CUstream st)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

	/* CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the NULL stream here */
	if ((uintptr_t)st > 2)
		return st;
	pthread_mutex_lock(&mu);
	if (!legacy)
		legacy = stream_new();
	pthread_mutex_unlock(&mu);
	return legacy;
}

static void enqueue(CUstream st, struct op *o)
{
	struct CUstream_st *s = stream_of(st);

	pthread_mutex_lock(&s->mu);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static struct op *op_new(enum op_kind k)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o)
		die("out of memory");
	o->k = k;
	return o;
}

static void stream_sync(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->head || s->busy)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

static bool stream_busy(struct CUstream_st *s)
{
	bool b;

	pthread_mutex_lock(&s->mu);
	b = s->head || s->busy;
	pthread_mutex_unlock(&s->mu);
	return b;
}

/* ---- the entry points ------------------------------------------------------------ */

EXPORT CUresult cuInit(unsigned int flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s)
{
	*s = r == CUDA_ERROR_NOT_READY ? "CUDA_ERROR_NOT_READY"
	     : r == ERR_NOT_FOUND	? "CUDA_ERROR_NOT_FOUND"
	     : r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
	     : r == ERR_INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT"
					     : "CUDA_ERROR_FAKE";
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
	(void)r;
	*s = "fake-cuda error";
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	(void)d;
	snprintf(name, (size_t)len, "fake GPU (host memory, lib/gpu/gather.cu transcribed)");
	return CUDA_SUCCESS;
}

/* The GPU's PCI address: $DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID (a device of a
 * synthetic sysfs tree, DEVMEMTCP_TEST_SYSFS), else none on PCI. */
EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d)
{
	const char *v = getenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID");

	(void)d;
	if (!v)
		return ERR_NOT_FOUND;
	snprintf(id, (size_t)len, "%s", v);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
	(void)d;
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*v = FAKE_SMS;
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

static struct CUctx_st {
	int dummy;
} the_ctx;
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	(void)d;
	if (injected(__func__))
		return injected(__func__);
	*c = &the_ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	(void)d;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c)
{
	if (ctx_depth == 16)
		die("context stack overflow: pushes without pops");
	ctx_stack[ctx_depth++] = c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
	if (!ctx_depth)
		return CUDA_ERROR_INVALID_VALUE;
	*c = ctx_stack[--ctx_depth];
	return CUDA_SUCCESS;
}

/* Replaces the top of the stack (the data-loader example binds its
 * context so). */
EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
	if (!ctx_depth)
		ctx_depth = 1;
	ctx_stack[ctx_depth - 1] = c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
	*c = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
	return CUDA_SUCCESS;
}

/* The one device (the NCCL plugin asks which the current context is on). */
EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	if (!ctx_depth || !ctx_stack[ctx_depth - 1])
		return ERR_INVALID_CONTEXT;
	*d = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	int n;

	pthread_mutex_lock(&big);
	n = nstreams;
	pthread_mutex_unlock(&big);
	for (int i = 0; i < n; i++)
		if (streams[i])
			stream_sync(streams[i]);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
	const struct alloc *a = alloc_find((uintptr_t)p);

	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = a->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a->size;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* ---- virtual memory management: memfd chunks mapped into a reservation ---------- */

#define GRAN (2u << 20)

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g,
					      const CUmemAllocationProp *prop,
					      int option)
{
	(void)prop;
	(void)option;
	*g = GRAN;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
			    const CUmemAllocationProp *prop,
			    unsigned long long flags)
{
	int fd = memfd_create("fake-cuda", MFD_CLOEXEC);

	(void)prop;
	(void)flags;
	if (fd < 0 || ftruncate(fd, (off_t)size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*h = (CUmemGenericAllocationHandle)fd + 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	close((int)h - 1);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align,
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
	alloc_add((uintptr_t)*p, size);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size)
{
	alloc_del((uintptr_t)p);
	munmap((void *)(uintptr_t)p, size);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset,
			 CUmemGenericAllocationHandle h, unsigned long long flags)
{
	(void)flags;
	if (mmap((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, (int)h - 1, (off_t)offset) == MAP_FAILED)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size)
{
	mmap((void *)(uintptr_t)p, size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size,
			       const CUmemAccessDesc *desc, size_t count)
{
	(void)p;
	(void)size;
	(void)desc;
	(void)count;
	return CUDA_SUCCESS;
}

/* Not a dma-buf: a memfd of the size (tests on the fake skip the check). */
EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p,
					      size_t size, int type,
					      unsigned long long flags)
{
	int fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);

	(void)p;
	(void)type;
	(void)flags;
	if (fd < 0 || ftruncate(fd, (off_t)size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)handle = fd;
	return CUDA_SUCCESS;
}

/* ---- plain memory ------------------------------------------------------------------ */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	/* the driver aligns large allocations to pages and more */
	void *m = aligned_alloc(4096, (size + 4095) / 4096 * 4096);

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (uintptr_t)m;
	alloc_add((uintptr_t)m, size);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	alloc_del((uintptr_t)p);
	free((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

/*
 * Pinned host memory belongs to the current context: without one the
 * driver answers CUDA_ERROR_INVALID_CONTEXT.  cuMemFreeHost waits for the
 * whole device, as the driver's does; so does cuMemHostAlloc while
 * DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC=1 (drivers that do).
 */
static bool no_context(void)
{
	return !ctx_depth;
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags)
{
	const char *sync = getenv("DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC");

	(void)flags;
	if (injected(__func__))
		return injected(__func__);
	if (no_context())
		return ERR_INVALID_CONTEXT;
	if (sync && !strcmp(sync, "1"))
		cuCtxSynchronize();
	*p = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
	return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	if (no_context())
		return ERR_INVALID_CONTEXT;
	cuCtxSynchronize();
	free(p);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p,
					     unsigned int flags)
{
	(void)flags;
	if (no_context())
		return ERR_INVALID_CONTEXT;
	*d = (uintptr_t)p;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
	memcpy((void *)(uintptr_t)d, s, n);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
	memcpy(d, (const void *)(uintptr_t)s, n);
	return CUDA_SUCCESS;
}

static CUresult copy_async(CUdeviceptr d, uint64_t s, size_t n, CUstream st)
{
	struct op *o = op_new(OP_COPY);

	o->to = d;
	o->from = s;
	o->len = n;
	enqueue(st, o);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n,
				     CUstream st)
{
	return copy_async(d, (uintptr_t)s, n, st);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st)
{
	return copy_async((uintptr_t)d, s, n, st);
}

/* The 13.0 signature: every copy in order on the stream. */
EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				      size_t count, struct emu_memcpy_attr *attrs,
				      size_t *attr_idx, size_t nattrs, CUstream st)
{
	(void)attrs;
	(void)attr_idx;
	if (!nattrs || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++)
		copy_async(dsts[i], srcs[i], sizes[i], st);
	return CUDA_SUCCESS;
}

/* Host or device memory on either side (the same here); no arrays. */
EXPORT CUresult cuMemcpy2DAsync_v2(const struct emu_memcpy2d *c, CUstream st)
{
	struct op *o;

	if (c->srcArray || c->dstArray || c->srcPitch < c->WidthInBytes ||
	    c->dstPitch < c->WidthInBytes)
		return CUDA_ERROR_INVALID_VALUE;
	o = op_new(OP_COPY2D);
	o->from = (c->srcMemoryType == EMU_CU_MEMORYTYPE_HOST ? (uintptr_t)c->srcHost : c->srcDevice) +
		  c->srcXInBytes + c->srcY * c->srcPitch;
	o->to = (c->dstMemoryType == EMU_CU_MEMORYTYPE_HOST ? (uintptr_t)c->dstHost : c->dstDevice) +
		c->dstXInBytes + c->dstY * c->dstPitch;
	o->len = c->WidthInBytes;
	o->rows = c->Height;
	o->spitch = c->srcPitch;
	o->dpitch = c->dstPitch;
	enqueue(st, o);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n,
				     CUstream st)
{
	return copy_async(d, s, n, st);
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n,
				CUstream st)
{
	struct op *o = op_new(OP_SET);

	o->to = d;
	o->value = v;
	o->len = n;
	enqueue(st, o);
	return CUDA_SUCCESS;
}

/* ---- modules, launches --------------------------------------------------------------- */

/* A module: the library's fatbin (the_module), or PTX text (the emulated
 * NIC's scatter kernel), whose functions must be entries it declares. */
static struct CUmod_st {
	char *ptx;
} the_module;

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *img)
{
	const char *text = img;

	if (!img)
		return CUDA_ERROR_INVALID_VALUE;
	if (strncmp(text, "//", 2) && text[0] != '.') {
		*m = &the_module;
		return CUDA_SUCCESS;
	}
	*m = calloc(1, sizeof(**m));
	if (!*m || !((*m)->ptx = strdup(text)))
		die("out of memory");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule m)
{
	if (m != &the_module) {
		free(m->ptx);
		free(m);
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	char entry[128];

	snprintf(entry, sizeof(entry), ".entry %s(", name);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		if (strcmp(fns[i].name, name))
			continue;
		if ((fns[i].id == F_EMU_SCATTER) != (m->ptx != NULL) ||
		    (m->ptx && !strstr(m->ptx, entry)))
			return ERR_NOT_FOUND;
		*f = &fns[i];
		return CUDA_SUCCESS;
	}
	return ERR_NOT_FOUND;
}

static struct launch *launch_new(CUfunction f, unsigned int gx,
				 unsigned int gy, unsigned int bx,
				 unsigned int smem, void **params)
{
	struct launch *l = calloc(1, sizeof(*l));

	if (!l)
		die("out of memory");
	if (!gx || !gy || !bx || bx > 256 ||
	    (bx % 32 && (f->id == F_GATHER || f->id == F_INLINE)))
		die("launch with an empty grid, a block of more than 256 threads or a gather of part of a warp");
	if (gy > 1 && f->id != F_INLINE)
		die("a two-dimensional grid for a kernel that has none");
	l->fn = f;
	l->grid = gx;
	l->gridy = gy;
	l->block = bx;
	l->smem = smem;
	switch (f->id) {
	case F_GATHER:
		l->descs = *(CUdeviceptr *)params[0];
		l->dsts = *(CUdeviceptr *)params[1];
		l->a = *(struct dmt_gather_args *)params[2];
		l->f = *(struct dmt_gather_fence *)params[3];
		break;
	case F_INLINE:
	case F_PERSIST:
		memcpy(l->param, params[0], f->psize);
		break;
	case F_SPIN:
		l->ns = *(unsigned long long *)params[0];
		break;
	case F_SPIN_WRITE:
		l->ns = *(unsigned long long *)params[0];
		l->addr = *(unsigned long long *)params[1];
		l->value = *(unsigned int *)params[2];
		break;
	case F_EMU_SCATTER:
		l->descs = *(CUdeviceptr *)params[0];
		l->value = *(unsigned int *)params[1];
		l->addr = *(CUdeviceptr *)params[2];
		l->dsts = *(CUdeviceptr *)params[3];
		break;
	case F_NOP:
		break;
	}
	return l;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
			       unsigned int gz, unsigned int bx, unsigned int by,
			       unsigned int bz, unsigned int smem, CUstream st,
			       void **params, void **extra)
{
	struct op *o;

	if (gz != 1 || by != 1 || bz != 1 || extra)
		die("launch of a shape the library never uses");
	if (injected(__func__))
		return injected(__func__);
	if (smem > 48 * 1024)
		return ERR_LAUNCH;
	o = op_new(OP_KERNEL);
	o->l = launch_new(f, gx, gy, bx, smem, params);
	enqueue(st, o);
	return CUDA_SUCCESS;
}

/* The one attribute the library sets: programmatic dependent launch.  The
 * fake runs a stream's operations one after another, as a GPU does when
 * the kernel before does not let this one start early. */
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f,
				 void **params, void **extra)
{
	struct op *o;

	if (c->gridDimZ != 1 || c->blockDimY != 1 || c->blockDimZ != 1 ||
	    extra || c->numAttrs != 1 ||
	    c->attrs[0].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
	    c->attrs[0].value.programmaticStreamSerializationAllowed != 1 ||
	    (f->id != F_INLINE && f->id != F_GATHER))
		die("cuLaunchKernelEx of a shape or attribute the library never uses");
	if (injected(__func__))
		return injected(__func__);
	if (c->sharedMemBytes > 48 * 1024)
		return ERR_LAUNCH;
	o = op_new(OP_KERNEL);
	o->l = launch_new(f, c->gridDimX, c->gridDimY, c->blockDimX,
			  c->sharedMemBytes, params);
	enqueue(c->hStream, o);
	return CUDA_SUCCESS;
}

/* ---- streams and events ------------------------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	(void)flags;
	*s = stream_new();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
	stream_sync(s);
	pthread_mutex_lock(&s->mu);
	s->quit = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&big);
	for (int i = 0; i < nstreams; i++)
		if (streams[i] == s)
			streams[i] = NULL;
	pthread_mutex_unlock(&big);
	free(s);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	stream_sync(stream_of(s));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream s)
{
	if (injected(__func__))
		return injected(__func__);
	return stream_busy(stream_of(s)) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	(void)flags;
	*e = calloc(1, sizeof(**e));
	return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	while (atomic_load(&e->completed) != atomic_load(&e->recorded))
		pause_us(10);
	free(e);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
	struct op *o;

	if (injected(__func__))
		return injected(__func__);
	o = op_new(OP_EVENT);
	o->ev = e;
	o->evseq = atomic_fetch_add(&e->recorded, 1) + 1;
	enqueue(s, o);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent e)
{
	if (injected(__func__))
		return injected(__func__);
	return atomic_load(&e->completed) == atomic_load(&e->recorded)
		       ? CUDA_SUCCESS
		       : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
	unsigned long want = atomic_load(&e->recorded);

	if (injected(__func__))
		return injected(__func__);
	while (atomic_load(&e->completed) < want)
		pause_us(5);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	*ms = (float)((b->t - a->t) * 1e3);
	if (*ms <= 0)
		*ms = 1e-3f;
	return CUDA_SUCCESS;
}

static CUresult write_value(CUstream s, CUdeviceptr addr, uint64_t v, int w)
{
	struct op *o = op_new(OP_WRITE);

	o->to = addr;
	o->value = v;
	o->width = w;
	enqueue(s, o);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr,
					uint32_t v, unsigned int flags)
{
	(void)flags;
	if (injected(__func__))
		return injected(__func__);
	return write_value(s, addr, v, 4);
}

EXPORT CUresult cuStreamWriteValue64_v2(CUstream s, CUdeviceptr addr,
					uint64_t v, unsigned int flags)
{
	(void)flags;
	if (addr % 8)
		return CUDA_ERROR_INVALID_VALUE;
	return write_value(s, addr, v, 8);
}

EXPORT CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr,
				       uint32_t v, unsigned int flags)
{
	struct op *o;

	if (flags != CU_STREAM_WAIT_VALUE_GEQ)
		die("wait flags other than GEQ");
	o = op_new(OP_WAIT32);
	o->to = addr;
	o->value = v;
	enqueue(s, o);
	return CUDA_SUCCESS;
}

/* The operations in order, as their single calls would queue them. */
EXPORT CUresult cuStreamBatchMemOp_v2(CUstream s, unsigned int count,
				      CUstreamBatchMemOpParams *ops,
				      unsigned int flags)
{
	if (!count || count > 256 || flags)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int i = 0; i < count; i++) {
		const struct dmt_memop_value *v = &ops[i].writeValue;

		switch (ops[i].operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
			if (v->address % 4)
				return CUDA_ERROR_INVALID_VALUE;
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_64:
			if (v->address % 8)
				return CUDA_ERROR_INVALID_VALUE;
			break;
		default:
			die("a batch of stream memory operations of a kind the library never uses");
		}
	}
	for (unsigned int i = 0; i < count; i++) {
		const struct dmt_memop_value *v = &ops[i].writeValue;

		if (ops[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_32)
			cuStreamWaitValue32_v2(s, v->address, v->value, v->flags);
		else if (ops[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32)
			cuStreamWriteValue32_v2(s, v->address, v->value, v->flags);
		else
			cuStreamWriteValue64_v2(s, v->address, v->value64, v->flags);
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream s, int *status)
{
	(void)s;
	*status = getenv("DEVMEMTCP_FAKE_CUDA_CAPTURING") ? 1 /* active */
							  : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

/* ---- graphs: one kernel node --------------------------------------------------------- */

struct CUgraph_st {
	struct launch *l;
};

struct CUgraphExec_st {
	struct launch *l;
};

EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned int flags)
{
	(void)flags;
	*g = calloc(1, sizeof(**g));
	return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static struct launch *node_launch(const CUDA_KERNEL_NODE_PARAMS *p)
{
	return launch_new(p->func, p->gridDimX, p->gridDimY, p->blockDimX,
			  p->sharedMemBytes, p->kernelParams);
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph g,
					const CUgraphNode *deps, size_t ndeps,
					const CUDA_KERNEL_NODE_PARAMS *p)
{
	(void)deps;
	(void)ndeps;
	free(g->l);
	g->l = node_launch(p);
	*node = (CUgraphNode)g;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g,
					    unsigned long long flags)
{
	(void)flags;
	if (injected(__func__))
		return injected(__func__);
	*e = calloc(1, sizeof(**e));
	if (!*e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	(*e)->l = malloc(sizeof(*g->l));
	memcpy((*e)->l, g->l, sizeof(*g->l));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e,
						  CUgraphNode node,
						  const CUDA_KERNEL_NODE_PARAMS *p)
{
	(void)node;
	if (injected(__func__))
		return injected(__func__);
	/* the driver refuses another kernel than the node's */
	if (p->func != e->l->fn)
		return CUDA_ERROR_INVALID_VALUE;
	free(e->l);
	e->l = node_launch(p);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	struct op *o;

	if (injected(__func__))
		return injected(__func__);
	o = op_new(OP_KERNEL);

	o->l = malloc(sizeof(*e->l));
	if (!o->l)
		die("out of memory");
	memcpy(o->l, e->l, sizeof(*e->l));
	enqueue(s, o);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
	free(e->l);
	free(e);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph g)
{
	free(g->l);
	free(g);
	return CUDA_SUCCESS;
}
