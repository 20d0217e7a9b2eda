/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The devmemtcp Python extension: shared declarations.  Its own functions
 * and variables are named dmtpy_ (the library it links statically names
 * its private ones dmt_; the two never meet).
 *
 * Ownership.  Every library handle lives in a "core": a small C struct
 * with an atomic reference count.  The Python object holds one reference;
 * so does everything that needs the handle after the Python object may be
 * gone (a Fragments set holds its receiver, a receiver its buffers, a
 * DLPack export its fragment set).  close() drops the Python object's
 * reference: the handle is freed at once unless something still uses it,
 * and then by whoever drops the last reference.  Cores never touch Python
 * objects, so the last reference may go on any thread without the GIL (a
 * DLPack deleter called by PyTorch, say).
 *
 * A call holds a reference of its own, too, on every core (and fragment
 * set) it uses across anything that lets other Python code run: a section
 * without the GIL, an argument's conversion (__index__, fileno()), a
 * DLPack producer's methods, an allocation that starts the garbage
 * collector (whose callbacks are Python code).  It takes it where it
 * checks that the object is open, before any of these.  A close() or
 * release() meanwhile, from another thread or from code the call runs,
 * then takes effect when the call drops its reference: the call finishes
 * on what it started with, and the handle is freed (the tokens go back)
 * once, after it.
 *
 * No callback into the library ever takes the GIL, and no library lock is
 * ever waited for while this code holds a lock the library may need: a
 * deleter can never deadlock against a Python thread.
 */
#ifndef DMT_PY_H
#define DMT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <devmemtcp.h>

#include "dlpack.h"

/*
 * Releases from any thread.  The library lets devmemtcp_rx_release(),
 * _release_after(), _flush(), _add_buf(), _stats() and
 * devmemtcp_gpu_release_after() run on any thread while another blocks in
 * devmemtcp_rx_recv() (DEVMEMTCP_RELEASE_ANY_THREAD), so the extension
 * calls them directly; a release from a thread other than the receiving
 * one flushes at once.  Builds against a library without it are refused.
 */
#ifndef DEVMEMTCP_RELEASE_ANY_THREAD
#error "libdevmemtcp is too old: the binding needs releases from any thread (DEVMEMTCP_RELEASE_ANY_THREAD)"
#endif

#define RX_MAX_BUFS 16
#define MAX_GPUS 16

/* ---- reference-counted cores -------------------------------------------- */

struct core {
	atomic_long refs;
	void (*destroy)(struct core *c);
};

static inline void core_init(struct core *c, void (*destroy)(struct core *))
{
	atomic_init(&c->refs, 1);
	c->destroy = destroy;
}

static inline void core_get(struct core *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

static inline void core_put(struct core *c)
{
	if (c && atomic_fetch_sub_explicit(&c->refs, 1,
					   memory_order_acq_rel) == 1)
		c->destroy(c);
}

struct ctx_core {
	struct core c;
	struct devmemtcp_ctx *ctx;
};

struct buf_core {
	struct core c;
	struct ctx_core *ctx;
	struct devmemtcp_buf *buf;
	int provider;
	DLDevice device;	/* where the bytes are; device_type 0: unknown */
	bool host;		/* the CPU can map it (segment addresses are CPU addresses) */
	atomic_uint_least64_t held;	/* bytes of live views */
	atomic_uint_least64_t cap;	/* most bytes live views may hold */
};

struct binding_core {
	struct core c;
	struct ctx_core *ctx;
	struct buf_core *buf;
	struct devmemtcp_binding *b;
};

struct gpu_core {
	struct core c;
	struct ctx_core *ctx;
	struct devmemtcp_gpu *gpu;
	int device;
	uint32_t flags;		/* enum devmemtcp_gpu_flags it was made with */
	uint32_t coalesce_bytes;	/* opts.coalesce_bytes it was made with */
	pthread_mutex_t lock;	/* one gather at a time per handle */
};

struct rx_buf {
	uint32_t id;
	struct buf_core *buf;
};

struct rx_core {
	struct core c;
	struct ctx_core *ctx;
	struct devmemtcp_rx *rx;
	int fd;				/* our dup of the socket */
	pthread_mutex_t add_lock;	/* one add_buf at a time (bufs, nbufs) */
	pthread_mutex_t recv_lock;	/* one receive at a time, and its scratch */
	atomic_int receiving;		/* threads inside recv() */
	struct devmemtcp_frag *scratch;
	size_t scratch_max;
	void *linear;
	size_t linear_max;
	atomic_size_t nbufs;		/* entries below are immutable */
	struct rx_buf bufs[RX_MAX_BUFS];
	struct gpu_core *gpus[MAX_GPUS];
	unsigned int gen;		/* dmtpy_fork_gen at creation */
	struct core *zcrx;		/* its Zcrx (zcrx.c), or NULL */
};

struct tx_core {
	struct core c;
	struct ctx_core *ctx;
	struct binding_core *binding;
	struct devmemtcp_tx *tx;
	int fd;
};

struct nic_core {
	struct core c;
	struct ctx_core *ctx;
	struct buf_core *buf;
	struct devmemtcp_nic *nic;
};

/* The fragments of one receive, shared by a Fragments object and the
 * DLPack views exported from it; the tokens go back when the last goes. */
struct fence_ent {
	struct devmemtcp_gpu_fence *fence;
	struct fence_ent *next;
};

struct frag_set {
	atomic_long refs;
	struct rx_core *rx;
	_Atomic(struct fence_ent *) fences;	/* release after all of them */
	atomic_int sync_device;		/* >= 0: wait for this device first */
	uint64_t held[RX_MAX_BUFS];	/* bytes per rx->bufs[i] */
	uint32_t n;
	struct devmemtcp_frag frags[];
};

/* DLPack consumer side: the writable, contiguous bytes of obj. */
struct dmt_dst {
	PyObject *capsule;
	void *managed;		/* DLManagedTensor(Versioned) to delete */
	bool versioned;
	DLDevice device;
	uint64_t addr;
	uint64_t nbytes;
};

/* ---- Python objects ------------------------------------------------------ */

typedef struct {
	PyObject_HEAD
	struct ctx_core *core;
} ContextObject;

typedef struct {
	PyObject_HEAD
	struct buf_core *core;
	PyObject *ctx;
} BufferObject;

typedef struct {
	PyObject_HEAD
	struct binding_core *core;
	PyObject *buffer;
} BindingObject;

typedef struct {
	PyObject_HEAD
	struct nic_core *core;
	PyObject *buffer;
} NicObject;

typedef struct {
	PyObject_HEAD
	struct gpu_core *core;
} GpuObject;

typedef struct {
	PyObject_HEAD
	struct rx_core *core;
	PyObject *sock;		/* keeps the caller's socket object alive */
	size_t max_frags;
	size_t max_bytes;
	/* recv_into(): the destination and stream last given, converted */
	PyObject *dst_obj;
	struct dmt_dst dst;
	PyObject *stream_obj;
	void *stream;
} RxObject;

typedef struct {
	PyObject_HEAD
	struct tx_core *core;
	PyObject *sock;
} TxObject;

typedef struct {
	PyObject_HEAD
	struct frag_set *set;	/* NULL once released */
	PyObject *linear;	/* bytes */
	Py_ssize_t n;
	uint64_t nbytes;
	uint64_t dmabuf_bytes;
} FragmentsObject;

extern PyTypeObject Context_Type, Buffer_Type, Binding_Type, Nic_Type,
	Gpu_Type, Rx_Type, Tx_Type, Fragments_Type;
extern PyObject *DmtError, *DmtTimeoutError;
extern PyTypeObject *Fragment_Type, *Queue_Type, *TxDone_Type;

/* ---- helpers -------------------------------------------------------------- */

/* Raise devmemtcp.Error(-ret, msg or strerror); returns NULL. */
PyObject *dmtpy_raise(int ret, const char *msg);
/* ... with the message of ctx (constructors). */
PyObject *dmtpy_raise_ctx(int ret, const struct ctx_core *ctx);
PyObject *dmtpy_closed(const char *what);

/* Cores of the argument objects with a reference of the caller's own
 * (core_put when done), or NULL with an exception set. */
struct ctx_core *dmtpy_ctx_get(PyObject *obj);
struct buf_core *dmtpy_buf_get(PyObject *obj);
/* int, or an object with fileno(); -1 with an exception set. */
int dmtpy_fd_of(PyObject *obj);
/* An interface name or index; 0 with an exception set. */
int dmtpy_ifindex_of(PyObject *obj, char *name, size_t len);
/* CUstream values of their own (cuda.h), numbered so by DLPack too. */
#define DMT_CU_STREAM_LEGACY ((void *)0x1)
#define DMT_CU_STREAM_PER_THREAD ((void *)0x2)

/* A CUDA stream: None, an int, or an object with __cuda_stream__,
 * .cuda_stream or .ptr.  *dl gets the DLPack stream number (None: -2).
 * 0 or -1 with exception. */
int dmtpy_stream_of(PyObject *obj, void **stream, long long *dl);

void dmtpy_ctx_destroy(struct core *c);
void dmtpy_buf_destroy(struct core *c);
/* A new Gpu core on ctx, which the caller holds (the GIL is released). */
struct gpu_core *dmtpy_gpu_core_new(struct ctx_core *ctx, int device,
				  const struct devmemtcp_gpu_opts *opts,
				  int *ret);
/* The receiver's Gpu for device (created on first use, without the GIL:
 * the caller holds rx); new reference, NULL with an exception set. */
struct gpu_core *dmtpy_rx_gpu(struct rx_core *rx, int device);

/* Fragment sets.  A call that uses a set while other code may run holds
 * a reference of its own (dmt_set_get). */
static inline void dmt_set_get(struct frag_set *set)
{
	atomic_fetch_add_explicit(&set->refs, 1, memory_order_relaxed);
}
/* Drop a reference; the last one hands the tokens to the
 * library (after the fences pushed on the set).  from_any_thread: the
 * caller is not the receiving thread (the tokens then go to the kernel at
 * once).  Returns what the release returned; msg gets the library's
 * message on failure (may be NULL). */
int dmtpy_set_put(struct frag_set *set, bool from_any_thread, char *msg,
		size_t msglen);
/* Release after the work queued on stream (devmemtcp_gpu_release_after),
 * dropping the caller's reference, which must be the last. */
int dmtpy_set_release_gpu(struct frag_set *set, struct gpu_core *gpu,
			void *stream, char *msg, size_t msglen);
/* Gather set into iov on stream, its linear fragments from linear (nlinear
 * bytes; NULL: none) in the same launch, and hand its tokens back when the
 * gather has read them (devmemtcp_gpu_gather_recv), without the GIL; the
 * caller's reference, which must be the only one, goes. */
int dmtpy_set_gather_release(struct frag_set *set, struct gpu_core *g,
			   const void *linear, size_t nlinear,
			   const struct devmemtcp_gpu_iov *iov, void *stream,
			   char *msg, size_t msglen);
/* Release only after fence (which the set now owns) completed. */
int dmtpy_set_push_fence(struct frag_set *set, struct devmemtcp_gpu_fence *f);
/* The bytes of the set are one device range: 1 with *addr, *len; else 0
 * with the reason in why. */
int dmtpy_set_range(const struct frag_set *set, uint64_t *addr, uint64_t *len,
		  char *why, size_t whylen);
/* The buffer of the i-th fragment (NULL: linear or foreign). */
struct buf_core *dmtpy_set_frag_buf(const struct frag_set *set, uint32_t i);

/* DLPack producer side: __dlpack__(**kw) of len bytes at addr in buf
 * (whose device it is), kept alive by set (a reference is taken) or, for
 * a whole-buffer export, by buf; gpu records the fence of the consumer's
 * stream before a set's tokens go back.  kw's values are Python code: the
 * caller holds set (or buf) and gpu. */
PyObject *dmtpy_dlpack_export(PyObject *kw, struct frag_set *set,
			    struct buf_core *buf, struct gpu_core *gpu,
			    uint64_t addr, uint64_t len);
int dmtpy_dlpack_import(PyObject *obj, void *stream, bool have_stream,
		      struct dmt_dst *dst);
void dmtpy_dlpack_done(struct dmt_dst *dst);

/* DMA_BUF_IOCTL_SYNC on a host buffer (start or end of CPU reads/writes). */
int dmtpy_buf_sync(struct buf_core *buf, bool start, bool write);

/* The CUDA driver, loaded on first use for what the library does not do
 * (copies of linear bytes, synchronising a context). */
int dmtpy_cuda_htod(int device, uint64_t dst, const void *src, size_t len,
		  void *stream);
int dmtpy_cuda_sync(int device);

/* fork(): the generation of this process (0 in the process that loaded
 * the module, +1 in each forked child, pthread_atfork).  A receiver made
 * at another generation is a parent's: its tokens, views and CUDA state
 * stay the parent's (the library refuses calls on it with EBADFD). */
extern atomic_uint dmtpy_fork_gen;
static inline bool dmt_parents(unsigned int gen)
{
	return gen != atomic_load_explicit(&dmtpy_fork_gen, memory_order_relaxed);
}

/*
 * Test builds (-Dtest_hooks=true, testhooks.c): dmtpy_test_point() holds a
 * thread that released the GIL at a named point while a test acts from
 * another thread; dmtpy_test_freed() counts the cores of a kind freed.  No-ops
 * in every other build.
 */
#ifndef DMT_PY_TEST_HOOKS
#define DMT_PY_TEST_HOOKS 0
#endif
#if DMT_PY_TEST_HOOKS
void dmtpy_test_point(const char *name);
void dmtpy_test_freed(const char *what);
extern PyMethodDef dmtpy_test_methods[];
#else
static inline void dmtpy_test_point(const char *name)
{
	(void)name;
}
static inline void dmtpy_test_freed(const char *what)
{
	(void)what;
}
#endif

/* Type setup. */
int dmtpy_types_init(PyObject *m);

#endif
