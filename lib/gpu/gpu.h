/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the gpu layer (lib/gpu/), shared by its files and the tests.  It owns
 * devmemtcp_gpu: the gather kernels (gather.cu, embedded as a fatbin;
 * gather_none.c when built without nvcc), the CPU side of a gather
 * (gpu_desc.c: descriptors, launch geometry, views), the launches
 * (gpu_launch.c: inline or from pinned slots), coalesced gathers and
 * gathers that place linear fragments (gpu_batch.c), the persistent kernel
 * (gpu_persist.c), and fences that hold token releases back until the GPU
 * is done with the bytes (gpu_fence.c), and waiting on the CPU for a word
 * the GPU writes (wait.c).  It may call the CUDA driver table
 * (buf/cuda.h), the buf layer's segment index (buf/buf.h) and the rx
 * layer's receive API (to defer releases on a fence); it knows nothing of
 * sockets, netlink or the NIC (tests/layers.txt: gpu may call core, buf, rx).
 */
#ifndef DEVMEMTCP_GPU_H
#define DEVMEMTCP_GPU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf/cuda.h"
#include "gather_abi.h"
#include "core/internal.h"

/* How gathers are launched. */
enum dmt_gather_mode {
	DMT_GATHER_AUTO,	/* inline when the batch fits, else a slot */
	DMT_GATHER_RING,	/* always a slot (test builds: DEVMEMTCP_GATHER_MODE=ring) */
	DMT_GATHER_PERSIST,	/* DEVMEMTCP_GPU_PERSISTENT */
};

struct gpu_slot {
	struct dmt_gather_desc *desc;	/* pinned host */
	struct dmt_gather_dst *dst;	/* pinned host */
	CUdeviceptr desc_dev;		/* what the kernel reads */
	CUdeviceptr dst_dev;
	CUevent done;			/* launches: reuse once complete */
	bool busy;
	uint32_t seq;			/* persistent: last job placed here */
};

/* The host side of the persistent kernel (gpu_persist.c). */
struct dmt_persist {
	CUfunction fn;
	CUstream stream;		/* the kernel's own, non-blocking */
	CUdeviceptr dev;		/* struct dmt_persist_dev, go[], cnt[] */
	CUdeviceptr go;			/* go[0] */
	struct dmt_persist_host *host;	/* pinned, cached, mapped */
	CUdeviceptr host_dev;
	struct dmt_persist_job *jobs;	/* in the same allocation */
	CUdeviceptr jobs_dev;
	uint32_t seq;			/* last job announced */
	uint32_t gen;			/* generation launched last, 0: none */
	bool running;			/* as far as the host knows */
	uint32_t blocks;
	uint64_t idle_ns;
	uint64_t launches;		/* kernel (re)starts, for the benchmark */
	bool single_ops;		/* test knob: no cuStreamBatchMemOp */
	bool done_host;			/* test knob: wait for host->done */
};

/*
 * Inline gathers go through CUDA graphs (gpu_launch.c): for each stream a
 * graph per inline kernel size, of one kernel node.  A few streams are
 * kept, the one used least recently makes room for a new one.
 */
#define DMT_GRAPH_STREAMS 4

struct gpu_graph {
	CUstream stream;
	uint64_t used;			/* 0: free, else the clock at its last use */
	CUgraph graph[DMT_INLINE_NSIZES];
	CUgraphNode node[DMT_INLINE_NSIZES];
	CUgraphExec exec[DMT_INLINE_NSIZES];
};

struct devmemtcp_gpu {
	struct devmemtcp_ctx *ctx;
	unsigned int fork_gen;		/* fork.h */
	struct dmt_err err;
	const struct dmt_cuda *cu;
	int ordinal;
	CUdevice dev;
	CUcontext cctx;
	CUmodule mod;
	CUfunction fn_gather;		/* from a slot */
	CUfunction fn_inline[DMT_INLINE_NSIZES];
	CUfunction fn_spin;
	CUfunction fn_nop;
	uint32_t sms;			/* multiprocessors */
	uint32_t cc_major;		/* compute capability, 0: unknown */
	/* test-build knobs (0: automatic) */
	uint32_t per_warp;
	uint32_t split;
	uint32_t warps_per_block;
	int mode;			/* enum dmt_gather_mode */
	uint32_t inline_max;		/* descriptors of an inline launch */
	bool inline_1d;			/* test knob: no two-dimensional grids */
	uint32_t flags;
	uint32_t max_frags;
	uint32_t nslots;
	uint32_t next_slot;
	struct gpu_slot *slots;
	size_t slot_stride;
	void *host;			/* every slot's pinned memory */
	CUdeviceptr dev_copy;		/* DEVMEMTCP_GPU_DESC_COPY buffers */
	struct dmt_gather_inline *inl;	/* an inline launch's parameter */
	struct dmt_persist *ps;		/* DEVMEMTCP_GPU_PERSISTENT */
	struct gpu_graph graphs[DMT_GRAPH_STREAMS];
	uint64_t graph_clock;
	bool graphs_off;		/* plain launches only */
	bool pdl;			/* plain inline launches overlap (sm_90) */
	uint64_t graph_launches;	/* gathers launched through a graph */
	uint64_t pdl_launches;		/* and with programmatic dependence */
	uint64_t kernel_fences;		/* gather_release fences a launch carried */
	CUstream aux;			/* idle: tells whether the context failed */
	/* Fences outlive devmemtcp_gpu_free: the last reference frees. */
	pthread_mutex_t lock;
	unsigned long refs;
	bool fence_events;		/* events, not words (gpu_fence.c) */
	uint64_t fence_sleeps;		/* tests: sleeps of fence waits */
	struct devmemtcp_gpu_fence *free_fences;
	struct devmemtcp_gpu_fence *retired_fences;
	/* gpu_batch.c: coalescing and linear bytes */
	uint32_t coalesce_bytes;	/* 0: gathers queued by their call */
	uint32_t coalesce_us;
	uint64_t linear_dev;		/* what dmt_gpu_gather's builds place
					 * linear fragments from (0: holes) */
	struct dmt_gpu_batch *batch;
};

/* The parameter of dmt_gather_inline<N>: header, then N descriptors
 * (the kernel's struct is 16-byte aligned; the driver copies it from
 * here). */
struct dmt_gather_inline {
	struct dmt_gather_args a;
	struct dmt_gather_fence f;
	struct dmt_gather_dst dst[DMT_INLINE_DST_MAX];
	struct dmt_gather_desc desc[];
};

/* gather.cu asserts the same. */
_Static_assert(offsetof(struct dmt_gather_inline, desc) == DMT_INLINE_HDR,
	       "inline parameter header");
_Static_assert(sizeof(struct dmt_gather_args) == 24, "dmt_gather_args");
_Static_assert(sizeof(struct dmt_gather_fence) == 24, "dmt_gather_fence");
_Static_assert(sizeof(struct dmt_persist_dev) == 128, "dmt_persist_dev");
_Static_assert(sizeof(struct dmt_persist_host) == 128, "dmt_persist_host");
_Static_assert(sizeof(struct dmt_persist_job) == 64, "dmt_persist_job");

/*
 * Waiting on the CPU for a word the GPU writes: spin (with a pause) for
 * DMT_WAIT_SPIN_NS, about as prompt as polling, then sleep in steps that
 * double from DMT_WAIT_SLEEP_MIN_NS up to DMT_WAIT_SLEEP_MAX_NS, so that a
 * long wait does not hold a core.  dmt_wait_step returns false while
 * spinning, true after a sleep (the caller then looks at the context's
 * health, its timeout...).
 */
#define DMT_WAIT_SPIN_NS (200ull * 1000)
#define DMT_WAIT_SLEEP_MIN_NS (10ull * 1000)
#define DMT_WAIT_SLEEP_MAX_NS (1000ull * 1000)

struct dmt_wait {
	uint64_t t0;		/* 0: not started */
	uint64_t step;		/* the next sleep */
	uint64_t sleeps;	/* for the tests */
};

uint64_t dmt_mono_ns(void);
bool dmt_wait_step(struct dmt_wait *w);

/* Drop a reference; the last one destroys the handle (gpu.c). */
void dmt_gpu_unref(struct devmemtcp_gpu *gpu);

/* gpu_fence.c: fences and releases held back by them.  init after the
 * driver table is known, prepare with the context current (a word of the
 * process's pool ready); fini once no fence is out (last reference). */
void dmt_gpu_fences_init(struct devmemtcp_gpu *gpu);
void dmt_gpu_fences_fini(struct devmemtcp_gpu *gpu);
int dmt_gpu_fences_prepare(struct devmemtcp_gpu *gpu);
int dmt_gpu_fence_new(struct devmemtcp_gpu *gpu, void *stream,
		      struct devmemtcp_gpu_fence **fencep);
int dmt_gpu_fence_done(struct devmemtcp_gpu_fence *f, bool wait);
int dmt_gpu_release_after(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
			  const struct devmemtcp_frag *frags, size_t n,
			  void *stream);
/* A fence for a gather kernel to signal (gpu_fence.c, the context
 * current): *fp and *kf set, or *fp NULL when this handle's fences are
 * events (then release after the stream instead).  Once the gather is
 * queued, dmt_gpu_fence_kernel_end says whether a launch carried it; a
 * carried fence not handed to anyone goes to dmt_gpu_fence_retire. */
int dmt_gpu_fence_kernel(struct devmemtcp_gpu *gpu,
			 struct devmemtcp_gpu_fence **fp,
			 struct dmt_gather_fence *kf);
void dmt_gpu_fence_kernel_end(struct devmemtcp_gpu_fence *f,
			      const struct dmt_gather_fence *kf, bool launched);
void dmt_gpu_fence_retire(struct devmemtcp_gpu_fence *f);

/* Make gpu's context current if it is not; *pushed says whether
 * gpu_ctx_leave must pop it. */
int dmt_gpu_ctx_enter(struct devmemtcp_gpu *gpu, bool *pushed);
void dmt_gpu_ctx_leave(struct devmemtcp_gpu *gpu, bool pushed);

/* gpu_launch.c: decide at devmemtcp_gpu_new how inline gathers are
 * launched (graphs, programmatic dependent launch); destroy the handle's
 * graphs (the context current). */
void dmt_gpu_launch_init(struct devmemtcp_gpu *gpu);
void dmt_gpu_graphs_fini(struct devmemtcp_gpu *gpu);

/* gpu_launch.c: the whole gather (validated already: n > 0), by launches
 * or through the persistent kernel; the context is current.  fence, if
 * not NULL, rides on the last launch; *fenced (fenced may be NULL) says
 * whether a launch that carries it was queued, also when the call fails
 * after it (not when nothing but holes was launched, nor through the
 * persistent kernel). */
int dmt_gpu_gather(struct devmemtcp_gpu *gpu,
		   const struct devmemtcp_frag *frags, size_t n,
		   const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		   const struct dmt_gather_fence *fence, bool *fenced,
		   CUstream stream);

struct dmt_gather_batch;
/* gpu_launch.c: queue the inline launch of parameter p, whose batch b
 * (b->desc == p->desc, b->dst == p->dst) is built; fence, if not NULL,
 * rides on it.  The context is current. */
int dmt_gpu_launch_inline(struct devmemtcp_gpu *gpu, struct dmt_gather_inline *p,
			  const struct dmt_gather_batch *b,
			  const struct dmt_gather_fence *fence, CUstream stream);

/* gpu_fence.c: whether f completed (1), not yet (0; wait: block until it
 * does), or its wait failed (< 0), without giving it back: for a fence
 * that several releases share (gpu_batch.c); dmt_gpu_fence_put gives it
 * back once it completed. */
int dmt_gpu_fence_peek(struct devmemtcp_gpu_fence *f, bool wait);
void dmt_gpu_fence_put(struct devmemtcp_gpu_fence *f);

/* The checks every gather call makes, in this order: the handle, a forked
 * child's use of a parent's handle (core/fork.h), rx where the call
 * releases (need_rx), the arrays, the kernels; 0, or the negative errno
 * with its message on the handle.  fn: the public call, for messages. */
int dmt_gather_args(struct devmemtcp_gpu *gpu, const char *fn, bool need_rx,
		    const struct devmemtcp_rx *rx, const void *frags, size_t n,
		    const void *dsts, size_t ndst);

/*
 * gpu_batch.c: coalesced gathers (opts.coalesce_bytes) and gathers that
 * place linear fragments.  init at devmemtcp_gpu_new (the context
 * current); close at devmemtcp_gpu_free (queues what waits, waits for the
 * launches that read staged bytes); fini when the last reference goes.
 */
int dmt_batch_init(struct devmemtcp_gpu *gpu);
void dmt_batch_close(struct devmemtcp_gpu *gpu);
void dmt_batch_fini(struct devmemtcp_gpu *gpu);
/* A gather (validated: gpu has kernels, n > 0) through the batch; fn:
 * the public call, for messages. */
int dmt_batch_gather(struct devmemtcp_gpu *gpu, struct devmemtcp_rx *rx,
		     const struct devmemtcp_frag *frags, size_t n,
		     const void *linear, size_t len,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     CUstream stream, const char *fn);
/* Queue what waits in the batch (asked: devmemtcp_gpu_flush; else
 * before another call of the handle queues on a stream); the number of
 * gathers it carried, or a negative errno (message on gpu, naming fn). */
int dmt_batch_flush(struct devmemtcp_gpu *gpu, const char *fn, bool asked);

/* Tests and benchmarks: what the batch did. */
struct dmt_batch_stats {
	uint64_t launches;		/* batches queued */
	uint64_t gathers;		/* gather calls they carried */
	/* why: full, its first gather too old, devmemtcp_gpu_flush, before
	 * another stream's or an overlapping gather or another call that
	 * queues, not coalescing, a wait for tokens or devmemtcp_gpu_free */
	uint64_t by_size, by_age, by_flush, by_order, by_call, by_wait;
	uint64_t big;			/* gathers too large for a batch */
	uint64_t pending_bytes;		/* in the open batch now */
	uint32_t pending_gathers;
	uint64_t pending_max;		/* most bytes a batch held back */
	uint64_t staged_bytes;		/* linear bytes staged */
	uint64_t stage_size;		/* the staging buffer's size */
};
void dmt_batch_stats(struct devmemtcp_gpu *gpu, struct dmt_batch_stats *s);

/* Logged by devmemtcp_gpu_new with DEVMEMTCP_GPU_PERSISTENT: the mode
 * measured slower than launches (devmemtcp_gpu_new(3)). */
#define DMT_PERSIST_WARNING                                                    \
	"devmemtcp_gpu_new: DEVMEMTCP_GPU_PERSISTENT measured about 1 ms from a gather call to its bytes in place on an NVIDIA H200 (a launch: 12 us at 1 MiB): leave the flag off unless bench-gather -t latency shows otherwise on this machine"

/* gpu_persist.c, with the context current.  init at devmemtcp_gpu_new;
 * fini waits for the jobs announced and stops the kernel. */
int dmt_persist_init(struct devmemtcp_gpu *gpu);
void dmt_persist_fini(struct devmemtcp_gpu *gpu);
/* Queue a built job (slot s, batch b, geometry) on stream. */
struct dmt_gather_batch;
struct dmt_gather_geom;
int dmt_persist_slot(struct devmemtcp_gpu *gpu, struct gpu_slot **sp);
int dmt_persist_queue(struct devmemtcp_gpu *gpu, struct gpu_slot *s,
		      const struct dmt_gather_batch *b,
		      const struct dmt_gather_geom *g, CUstream stream);

/* ---- the CPU side of a gather (gpu_desc.c): no CUDA needed ---------------- */

/* Where a gather stands between launches. */
struct dmt_gather_cursor {
	size_t i;		/* next fragment */
	uint64_t foff;		/* bytes of it already placed */
	size_t di;		/* current destination */
	uint64_t doff;		/* bytes of it already filled */
};

/* One launch: room for descriptors and destinations, and what was put
 * there. */
struct dmt_gather_batch {
	struct dmt_gather_desc *desc;
	struct dmt_gather_dst *dst;
	uint32_t max_desc;
	uint32_t max_dst;
	uint32_t nd;		/* descriptors filled */
	uint32_t ndst;		/* destinations filled (>= 1) */
	uint64_t bytes;		/* output positions covered, holes included */
	/* Device address of byte 0 of the linear buffer (a staged copy):
	 * linear fragments are copied from linear + offset; 0: they leave
	 * holes. */
	uint64_t linear;
	/* The output position of its first byte: 0, but for a gather that
	 * joins a coalesced batch (gpu_batch.c), the bytes before it; its
	 * descriptors and destination entries count from there, and bytes
	 * from pos0. */
	uint64_t pos0;
	/* Set by the build: the device bytes its descriptors read, linear
	 * bytes aside ([lo, hi); lo UINT64_MAX and hi 0 when none). */
	uint64_t lo, hi;
};

/* Output positions are 32-bit: a launch covers less than 4 GiB. */
#define DMT_GATHER_POS_MAX 0xffffffffull

/*
 * Fill b with the next launch of the gather of frags into dsts, starting
 * at *cur (zeroed for the first), and advance *cur; the gather is complete
 * when cur->i == n.  Fragments are cut where a destination ends and where
 * b is full; a linear fragment leaves a hole.  Returns 0, or a negative
 * errno with the message on err (logged through ctx): -EINVAL for a
 * fragment without a device address, -ENOSPC when the destinations are
 * too small for the fragments.  Only the fragments that b covers are
 * checked: see dmt_gather_check for the rest.
 */
int dmt_gather_build(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     struct dmt_gather_cursor *cur, struct dmt_gather_batch *b);
/* Check the fragments from *cur on as dmt_gather_build would, without
 * building anything (before queueing the first of several launches). */
int dmt_gather_check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     const struct dmt_gather_cursor *cur);

/* How a launch is cut into warps and blocks. */
struct dmt_gather_geom {
	uint32_t per;		/* descriptors per warp */
	uint32_t split;		/* warps per descriptor */
	uint32_t warps;		/* warps of the launch */
	uint32_t wpb;		/* warps per block */
	uint32_t blocks;	/* gx * gy */
	uint32_t gx, gy;	/* the grid (gy > 1: split, inline launches) */
};

/*
 * The geometry of a launch of nd (> 0) descriptors covering bytes, on a GPU
 * of sms multiprocessors: enough warps to keep every SM busy when the
 * batch is small (several warps per fragment), a few fragments per warp
 * when it is large, and blocks small enough to spread over the SMs.  per,
 * split, wpb: fixed values (test knobs), 0 for automatic.
 */
void dmt_gather_geometry(uint32_t nd, uint64_t bytes, uint32_t sms,
			 uint32_t per, uint32_t split, uint32_t wpb,
			 struct dmt_gather_geom *g);
/* For launches that stage their descriptors (from memory): blocks of at
 * least min(split, 8) warps, so that the warps splitting a fragment share
 * one block and its one read of the descriptor. */
void dmt_gather_geometry_staged(struct dmt_gather_geom *g);
/* The same cut as a two-dimensional grid (gather_abi.h) when g splits
 * descriptors: an inline launch of nd descriptors loads its warps'
 * descriptors without waiting for its arguments. */
void dmt_gather_geometry_2d(uint32_t nd, struct dmt_gather_geom *g);

/* devmemtcp_gpu_view; with err NULL the message is the thread's.  At most
 * dmt_gpu_view_max ranges (INT32_MAX; tests lower it). */
extern size_t dmt_gpu_view_max;
int dmt_gpu_view(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 const struct devmemtcp_frag *frags, size_t n,
		 struct devmemtcp_gpu_iov *iov, size_t max);

/* The embedded fatbin (generated from lib/gpu/gather.cu); absent without nvcc. */
extern const unsigned char dmt_gather_fatbin[];
extern const size_t dmt_gather_fatbin_size;

/* Tests: queue a kernel that spins for ns nanoseconds on stream. */
int dmt_gpu_spin(struct devmemtcp_gpu *gpu, void *stream, uint64_t ns);
/* Tests and benchmarks: the driver API table of gpu. */
const struct dmt_cuda *dmt_gpu_cuda(const struct devmemtcp_gpu *gpu);
/* Benchmarks: how often the persistent kernel was started (0 without). */
uint64_t dmt_gpu_persist_launches(const struct devmemtcp_gpu *gpu);

#endif
