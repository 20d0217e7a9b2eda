// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The fake CUDA driver's kernels (fakecuda.h says what it models): the
 * modules, the gather kernels as C transcriptions of lib/gpu/gather.cu
 * (sharing its index arithmetic, lib/gpu/gather_index.h), the persistent
 * kernel, the emulated NIC's scatter kernel from its own source, launches
 * and graphs of one kernel node.  A launch is queued on its stream
 * (streams.c), which runs it in its turn.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "fakecuda.h"
#include "gather_index.h"

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
	{ "dmt_gather_inline512", F_INLINE, DMT_INLINE_HDR + 512 * 16 },
	{ "dmt_gather_inline768", F_INLINE, DMT_INLINE_HDR + 768 * 16 },
	{ "dmt_gather_inline1024", F_INLINE, DMT_INLINE_HDR + 1024 * 16 },
	{ "dmt_gather_persist", F_PERSIST, sizeof(struct dmt_persist_params) },
	{ "dmt_spin", F_SPIN, 0 },
	{ "dmt_spin_write", F_SPIN_WRITE, 0 },
	{ "dmt_nop", F_NOP, 0 },
	/* the emulated NIC's (tests/emu/emu-scatter.cu), from PTX text */
	{ "dmt_emu_scatter", F_EMU_SCATTER, 0 },
};

struct fk_launch {
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

/* A copy a warp makes (device addresses). */
static void copy(uint64_t src, uint64_t dst, uint64_t len)
{
	memmove(fk_mem(dst), fk_mem(src), len);
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
		fk_die("a warp reads a descriptor its block did not stage");
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
		fk_die("a block stages more descriptors than its shared memory holds");
	memcpy(staged, (const void *)&descs[d0], (d1 - d0) * sizeof(*staged));
	for (uint32_t w = 0; w < warps; w++)
		gather_warp(staged, d0, d1, sdst, n, ndst, bias, per, split,
			    vw0 + w);
}

/* The destination table in the block's shared memory, which must hold it. */
static const struct dmt_gather_dst *stage_dsts(const struct fk_launch *l,
					       const struct dmt_gather_dst *dsts,
					       uint32_t ndst)
{
	static __thread struct dmt_gather_dst sdst[DMT_GATHER_DST_MAX];

	if (ndst > 1) {
		if (ndst > DMT_GATHER_DST_MAX || l->smem < ndst * sizeof(*sdst))
			fk_die("destination table larger than the shared memory of the launch");
		memcpy(sdst, dsts, ndst * sizeof(*sdst));
	}
	return sdst;
}

/* dmt_gather: descriptors in memory, a one-dimensional grid. */
static void gather_grid(const struct fk_launch *l,
			const struct dmt_gather_desc *descs,
			const struct dmt_gather_dst *dsts,
			const struct dmt_gather_args *a)
{
	const struct dmt_gather_dst *sdst = stage_dsts(l, dsts, a->ndst);
	uint32_t warps = l->block / 32;

	if (l->gridy != 1)
		fk_die("a launch from a slot with a two-dimensional grid");
	for (uint32_t b = 0; b < l->grid; b++)
		gather_block(descs, sdst, a->n, a->ndst, a->bias, a->per,
			     a->split, b * warps, warps);
}

/* dmt_gather_inline<N>: descriptors in the parameter; with gridDim.y > 1,
 * warp w of block (x, y) copies slice y of descriptor x * warps + w. */
static void gather_inline(const struct fk_launch *l,
			  const struct dmt_gather_inline *in, uint32_t nmax)
{
	const struct dmt_gather_args *a = &in->a;
	const struct dmt_gather_dst *sdst = stage_dsts(l, in->dst, a->ndst);
	uint32_t warps = l->block / 32;

	if (a->n > nmax)
		fk_die("an inline launch with more descriptors than its parameter holds");
	if (l->gridy == 1) {
		for (uint32_t vw = 0; vw < l->grid * warps; vw++)
			gather_warp(in->desc, 0, nmax, sdst, a->n, a->ndst,
				    a->bias, a->per, a->split, vw);
		return;
	}
	if (a->split != l->gridy || a->per != 1)
		fk_die("a two-dimensional inline launch whose arguments disagree with its grid");
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

/* gather.cu's try_stop: block 0 stops the grid at job s, unless the host
 * has announced that job and asked for no stop. */
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

/* Wait for job s (true: stop instead), block 0 giving up when idle. */
static bool wait_job(const struct block *bl, struct dmt_persist_dev *dev,
		     uint64_t *go, struct dmt_persist_host *h, uint32_t s,
		     uint64_t *gp)
{
	const struct dmt_persist_params *p = bl->p;
	double t0 = fk_now();
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
		    ((fk_now() - t0) * 1e9 >= p->idle_ns ||
		     ((++polls & 63) == 0 &&
		      __atomic_load_n(&h->stop_req, __ATOMIC_RELAXED)))) {
			if (try_stop(p, dev, h, s))
				return true;
			t0 = fk_now();
		}
		fk_pause_us(2);
	}
}

/* One block of the persistent kernel: jobs in turn until told to stop. */
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
		fk_die("out of memory");
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
				fk_die("persistent job with too many destinations");
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

/* The persistent kernel: a thread per block, until they all stop. */
static void persist_grid(const struct fk_launch *l)
{
	const struct dmt_persist_params *p = (const void *)l->param;
	pthread_t th[64];
	struct block bl[64];

	if (l->grid > 64 || (p->nslots & (p->nslots - 1)))
		fk_die("persistent kernel: grid above 64 or slots not a power of two");
	if (l->smem < DMT_GATHER_DST_MAX * sizeof(struct dmt_gather_dst))
		fk_die("persistent kernel without room for destination tables");
	for (unsigned int b = 0; b < l->grid; b++) {
		bl[b] = (struct block){ p, b, l->grid };
		if (pthread_create(&th[b], NULL, persist_block, &bl[b]))
			fk_die("pthread_create");
	}
	for (unsigned int b = 0; b < l->grid; b++)
		pthread_join(th[b], NULL);
}

/* The launch's fence, once every block has run (gather.cu's fence_signal:
 * the last block to finish resets the counter and writes the word). */
static void fence_signal(const struct dmt_gather_fence *f)
{
	if (!f->word)
		return;
	if (!f->cnt || *(uint32_t *)fk_mem(f->cnt))
		fk_die("a gather fence whose block counter is missing or not zero");
	/* the blocks' increments end with the last one's reset */
	__atomic_store_n((uint32_t *)fk_mem(f->word), f->seq, __ATOMIC_SEQ_CST);
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
#include "../../emu/emu-scatter.cu"

static void emu_scatter(const struct fk_launch *l)
{
	gridDim.x = l->grid;
	blockDim.x = l->block;
	for (blockIdx.x = 0; blockIdx.x < l->grid; blockIdx.x++)
		for (threadIdx.x = 0; threadIdx.x < l->block; threadIdx.x++)
			dmt_emu_scatter(fk_mem(l->descs), l->value,
					fk_mem(l->addr), fk_mem(l->dsts));
}

/* Run launch l (its stream's turn has come), then free it.  With
 * DEVMEMTCP_FAKE_CUDA_NOCOPY=1 the gathers copy nothing but still signal
 * their fences. */
void fk_run_kernel(struct fk_launch *l)
{
	const struct dmt_gather_inline *in = (const void *)l->param;

	switch (l->fn->id) {
	case F_GATHER:
		if (!fk.nocopy)
			gather_grid(l, fk_mem(l->descs), fk_mem(l->dsts), &l->a);
		fence_signal(&l->f);
		break;
	case F_INLINE:
		if (!fk.nocopy)
			gather_inline(l, in, (uint32_t)((l->fn->psize - DMT_INLINE_HDR) /
							sizeof(struct dmt_gather_desc)));
		fence_signal(&in->f);
		break;
	case F_PERSIST:
		persist_grid(l);
		break;
	case F_SPIN:
		fk_pause_us(l->ns / 1000);
		break;
	case F_SPIN_WRITE:
		fk_pause_us(l->ns / 1000);
		__atomic_store_n((uint32_t *)fk_mem(l->addr), l->value,
				 __ATOMIC_SEQ_CST);
		break;
	case F_EMU_SCATTER:
		emu_scatter(l);
		break;
	case F_NOP:
		break;
	}
	free(l);
}

/* ---- modules, launches --------------------------------------------------------------- */

/* A module: the library's fatbin (the_module), or PTX text (the emulated
 * NIC's scatter kernel), whose functions must be entries it declares. */
static struct CUmod_st {
	char *ptx;
} the_module;
static uint64_t modules_loaded;

FK_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *img)
{
	const char *text = img;

	FK_INJECT();
	if (!img)
		return CUDA_ERROR_INVALID_VALUE;
	if (strncmp(text, "//", 2) && text[0] != '.') {
		*m = &the_module;
	} else {
		*m = calloc(1, sizeof(**m));
		if (!*m || !((*m)->ptx = strdup(text)))
			fk_die("out of memory");
	}
	__atomic_add_fetch(&modules_loaded, 1, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

/* Modules loaded so far (a test: whether the library has the gather
 * kernels, and when it loads them). */
FK_EXPORT uint64_t fakecuda_modules(void);
uint64_t fakecuda_modules(void)
{
	return __atomic_load_n(&modules_loaded, __ATOMIC_RELAXED);
}

FK_EXPORT CUresult cuModuleUnload(CUmodule m)
{
	if (m != &the_module) {
		free(m->ptx);
		free(m);
	}
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	char entry[128];

	snprintf(entry, sizeof(entry), ".entry %s(", name);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		if (strcmp(fns[i].name, name))
			continue;
		if ((fns[i].id == F_EMU_SCATTER) != (m->ptx != NULL) ||
		    (m->ptx && !strstr(m->ptx, entry)))
			return FK_ERR_NOT_FOUND;
		*f = &fns[i];
		return CUDA_SUCCESS;
	}
	return FK_ERR_NOT_FOUND;
}

/* A launch of f with its parameters copied (as the driver copies them),
 * dying on what a GPU would refuse or fault on. */
static struct fk_launch *launch_new(CUfunction f, unsigned int gx,
				 unsigned int gy, unsigned int bx,
				 unsigned int smem, void **params)
{
	struct fk_launch *l = calloc(1, sizeof(*l));

	if (!l)
		fk_die("out of memory");
	if (!gx || !gy || !bx || bx > 256 ||
	    (bx % 32 && (f->id == F_GATHER || f->id == F_INLINE)))
		fk_die("launch with an empty grid, a block of more than 256 threads or a gather of part of a warp");
	if (gy > 1 && f->id != F_INLINE)
		fk_die("a two-dimensional grid for a kernel that has none");
	if (f->id == F_PERSIST && fk.manual)
		fk_die("the persistent kernel runs until stopped: it needs DEVMEMTCP_FAKE_CUDA_STREAMS=async");
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

FK_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
			       unsigned int gz, unsigned int bx, unsigned int by,
			       unsigned int bz, unsigned int smem, CUstream st,
			       void **params, void **extra)
{
	if (gz != 1 || by != 1 || bz != 1 || extra)
		fk_die("launch of a shape the library never uses");
	FK_INJECT();
	if (smem > 48 * 1024)
		return FK_ERR_LAUNCH;
	return fk_queue_launch(__func__, st,
			       launch_new(f, gx, gy, bx, smem, params));
}

/* The one attribute the library sets: programmatic dependent launch.  The
 * fake runs a stream's operations one after another, as a GPU does when
 * the kernel before does not let this one start early. */
FK_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f,
				 void **params, void **extra)
{
	if (c->gridDimZ != 1 || c->blockDimY != 1 || c->blockDimZ != 1 ||
	    extra || c->numAttrs != 1 ||
	    c->attrs[0].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
	    c->attrs[0].value.programmaticStreamSerializationAllowed != 1 ||
	    (f->id != F_INLINE && f->id != F_GATHER))
		fk_die("cuLaunchKernelEx of a shape or attribute the library never uses");
	FK_INJECT();
	if (c->sharedMemBytes > 48 * 1024)
		return FK_ERR_LAUNCH;
	return fk_queue_launch(__func__, c->hStream,
			       launch_new(f, c->gridDimX, c->gridDimY,
					  c->blockDimX, c->sharedMemBytes, params));
}

/* ---- graphs: one kernel node --------------------------------------------------------- */

struct CUgraph_st {
	struct fk_launch *l;
};

struct CUgraphExec_st {
	struct fk_launch *l;
};

FK_EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned int flags)
{
	(void)flags;
	*g = calloc(1, sizeof(**g));
	return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* A graph kernel node's launch. */
static struct fk_launch *node_launch(const CUDA_KERNEL_NODE_PARAMS *p)
{
	return launch_new(p->func, p->gridDimX, p->gridDimY, p->blockDimX,
			  p->sharedMemBytes, p->kernelParams);
}

FK_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph g,
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

FK_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g,
					    unsigned long long flags)
{
	(void)flags;
	FK_INJECT();
	*e = calloc(1, sizeof(**e));
	if (!*e || !((*e)->l = malloc(sizeof(*g->l))))
		fk_die("out of memory");
	memcpy((*e)->l, g->l, sizeof(*g->l));
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e,
						  CUgraphNode node,
						  const CUDA_KERNEL_NODE_PARAMS *p)
{
	(void)node;
	FK_INJECT();
	/* the driver refuses another kernel than the node's */
	if (p->func != e->l->fn)
		return CUDA_ERROR_INVALID_VALUE;
	free(e->l);
	e->l = node_launch(p);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	struct fk_launch *l;

	FK_INJECT();
	l = malloc(sizeof(*l));
	if (!l)
		fk_die("out of memory");
	memcpy(l, e->l, sizeof(*l));
	return fk_queue_launch(__func__, s, l);
}

FK_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
	free(e->l);
	free(e);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGraphDestroy(CUgraph g)
{
	free(g->l);
	free(g);
	return CUDA_SUCCESS;
}
