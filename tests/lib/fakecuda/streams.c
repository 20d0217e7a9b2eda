// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The fake CUDA driver's streams (fakecuda.h says what it models): each a
 * queue of operations run in order, by a thread of its own (async) or by
 * the threads that queue work and wait for it (manual); events, copies,
 * stream memory operations, host waits, the call log and the entry points
 * the tests call to hold a stream's work.  One lock guards every queue,
 * event and the log; operations run without it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* gettid */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"
#include "../../emu/emu-cuda.h"

enum op_kind { OP_HOLD, OP_KERNEL, OP_COPY, OP_COPY2D, OP_SET, OP_EVENT, OP_WRITE, OP_WAIT32 };

struct op {
	enum op_kind k;
	struct op *next;
	struct fk_launch *l;		/* OP_KERNEL */
	uint64_t to, from, len, value;
	uint64_t rows, spitch, dpitch;	/* OP_COPY2D: len bytes a row */
	int width;			/* OP_WRITE: 4 or 8 bytes */
	CUevent ev;			/* OP_EVENT */
	unsigned long evseq;
	bool held;			/* OP_HOLD: until the test ends it */
};

struct CUstream_st {
	uint64_t handle;	/* as named (NULL: 1, the legacy stream) */
	uint32_t tid;		/* CU_STREAM_PER_THREAD: its thread */
	bool blocking;		/* made without CU_STREAM_NON_BLOCKING */
	bool lazy;		/* NCCL mode: runs when the host waits */
	struct op *head, *tail;
	bool running;		/* an operation of its is running */
	bool quit;
	bool threaded;
	pthread_t th;
	pthread_cond_t cv;	/* its thread's: work came, a hold ended */
	struct CUstream_st *next;
};

struct CUevent_st {
	unsigned long recorded, completed;
	struct CUstream_st *s;	/* where last recorded */
	uint64_t handle;	/* ... as named there */
	int refs;		/* the handle and each record not yet run */
	double t;
};

struct fakecuda_call {
	uint32_t kind;		/* enum fk_call_kind */
	uint32_t tid;
	uint64_t stream;	/* the handle as given */
};

#define LOG_SIZE 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;	/* an operation ended */
static struct CUstream_st *streams;
static struct fakecuda_call call_log[LOG_SIZE];
static uint64_t ncalls;

/* ---- running operations ---------------------------------------------------------- */

/* Run one operation (without the lock). */
static void exec(struct op *o)
{
	switch (o->k) {
	case OP_HOLD:
		break;
	case OP_KERNEL:
		fk_run_kernel(o->l);
		break;
	case OP_COPY:
		memmove(fk_mem(o->to), fk_mem(o->from), o->len);
		break;
	case OP_COPY2D:
		for (uint64_t r = 0; r < o->rows; r++)
			memmove(fk_mem(o->to + r * o->dpitch),
				fk_mem(o->from + r * o->spitch), o->len);
		break;
	case OP_SET:
		memset(fk_mem(o->to), (int)o->value, o->len);
		break;
	case OP_EVENT:
		o->ev->t = fk_now();
		break;
	case OP_WRITE:
		atomic_thread_fence(memory_order_seq_cst);
		if (o->width == 8)
			__atomic_store_n((uint64_t *)fk_mem(o->to), o->value,
					 __ATOMIC_SEQ_CST);
		else
			__atomic_store_n((uint32_t *)fk_mem(o->to),
					 (uint32_t)o->value, __ATOMIC_SEQ_CST);
		break;
	case OP_WAIT32:
		/* async: the stream's thread waits; manual: it runs once met */
		while ((int32_t)(__atomic_load_n((uint32_t *)fk_mem(o->to),
						 __ATOMIC_SEQ_CST) -
				 (uint32_t)o->value) < 0)
			fk_pause_us(2);
		break;
	}
}

/* With mu: drop a reference of e (its handle's or a record's). */
static void event_put(CUevent e)
{
	if (!--e->refs)
		free(e);
}

/* With mu: o ran; an event's record completes. */
static void complete(struct op *o)
{
	if (o->k == OP_EVENT) {
		if (o->evseq > o->ev->completed)
			o->ev->completed = o->evseq;
		event_put(o->ev);
	}
	free(o);
	pthread_cond_broadcast(&idle_cv);
}

/* An operation that never ran (its call failed). */
static void op_free(struct op *o)
{
	if (o->k == OP_KERNEL)
		free(o->l);
	free(o);
}

/* A stream memory wait's condition holds (GEQ, with wrap-around). */
static bool wait_met(const struct op *o)
{
	return (int32_t)(__atomic_load_n((uint32_t *)fk_mem(o->to), __ATOMIC_SEQ_CST) -
			 (uint32_t)o->value) >= 0;
}

/* With mu: whether the stream's next operation may start. */
static bool runnable(const struct CUstream_st *s)
{
	const struct op *o = s->head;

	if (!o || s->running)
		return false;
	if (o->k == OP_HOLD)
		return !o->held;
	return o->k != OP_WAIT32 || !fk.manual || wait_met(o);
}

/* With mu: take the next operation, run it without the lock. */
static void run_next(struct CUstream_st *s)
{
	struct op *o = s->head;

	s->head = o->next;
	if (!s->head)
		s->tail = NULL;
	s->running = true;
	pthread_mutex_unlock(&mu);
	exec(o);
	pthread_mutex_lock(&mu);
	s->running = false;
	complete(o);
}

/* With mu, manual streams: run s's operations on this thread, as far as
 * they may go. */
static void drain(struct CUstream_st *s)
{
	while (runnable(s))
		run_next(s);
}

/* With mu, manual streams: every stream as far as it may go (a stream
 * memory wait may have been met); lazy ones too when the host waits for
 * the whole device. */
static void drain_all(bool lazy_too)
{
	bool again = true;

	while (again) {
		again = false;
		for (struct CUstream_st *s = streams; s; s = s->next) {
			if ((lazy_too || !s->lazy) && runnable(s)) {
				drain(s);
				again = true;
				break;	/* the list may have changed */
			}
		}
	}
}

/* The thread of an async stream. */
static void *worker(void *arg)
{
	struct CUstream_st *s = arg;

	pthread_mutex_lock(&mu);
	for (;;) {
		while (!runnable(s) && !(s->quit && !s->head))
			pthread_cond_wait(&s->cv, &mu);
		if (!s->head)
			break;
		run_next(s);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* fork(): the lock is taken around it, so that the child gets it free.
 * The streams' threads stay in the parent: the child runs its streams'
 * work on the threads that wait for it, as manual streams do (what a
 * thread was running when the process forked is lost). */
static void fork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&mu);
}

static void fork_child(void)
{
	fk.manual = true;
	pthread_cond_init(&idle_cv, NULL);
	for (struct CUstream_st *s = streams; s; s = s->next) {
		s->threaded = false;
		s->running = false;
		pthread_cond_init(&s->cv, NULL);
	}
	pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- streams ----------------------------------------------------------------- */

/* With mu: a new stream, in the list (async: with its thread). */
static struct CUstream_st *stream_add(struct CUstream_st *s)
{
	pthread_cond_init(&s->cv, NULL);
	s->lazy = fk.nccl;
	if (!fk.manual) {
		if (pthread_create(&s->th, NULL, worker, s))
			fk_die("pthread_create: a stream's thread");
		s->threaded = true;
	}
	s->next = streams;
	streams = s;
	return s;
}

/* The calling thread, as the log and the per-thread streams know it. */
static uint32_t thread_id(void)
{
	return (uint32_t)gettid();
}

/* With mu: the stream st names (NULL and CU_STREAM_LEGACY the legacy one,
 * CU_STREAM_PER_THREAD the caller's own), made the first time a handle the
 * fake did not make is named. */
static struct CUstream_st *stream_get(CUstream st)
{
	uint64_t h = (uintptr_t)st ? (uintptr_t)st : 1;
	uint32_t tid = h == 2 ? thread_id() : 0;
	struct CUstream_st *s;

	for (s = streams; s; s = s->next)
		if (s->handle == h && s->tid == tid)
			return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		fk_die("out of memory");
	s->handle = h;
	s->tid = tid;
	return stream_add(s);
}

/* With mu: NCCL mode refuses work on the legacy default stream, the
 * per-thread one and blocking streams (fakecuda.h says why). */
static bool refused(const char *fn, const struct CUstream_st *s)
{
	if (!fk.nccl || (s->handle > 2 && !s->blocking))
		return false;
	fprintf(stderr,
		"fake-cuda: %s on the legacy default stream (or a blocking stream) would wait for work queued ahead of it, which waits for the collective this copy feeds: deadlock\n",
		fn);
	return true;
}

/* With mu: a call into the log the tests read. */
static void log_call(enum fk_call_kind kind, uint64_t handle)
{
	call_log[ncalls % LOG_SIZE] = (struct fakecuda_call){ kind, thread_id(), handle };
	ncalls++;
}

/* With mu: the held work of s ends, up to (not past) operation upto. */
static void end_holds(struct CUstream_st *s, const struct op *upto)
{
	for (struct op *o = s->head; o && o != upto; o = o->next)
		if (o->k == OP_HOLD)
			o->held = false;
	pthread_cond_signal(&s->cv);
}

/* With mu: no thread is running anything (manual streams: nothing will
 * change unless a call comes). */
static bool all_stopped(void)
{
	for (struct CUstream_st *s = streams; s; s = s->next)
		if (s->running)
			return false;
	return true;
}

/* With mu: a host wait that nothing queued can end (manual streams). */
static void stuck(const struct CUstream_st *s)
{
	fk_die("a host wait on stream %#llx, whose next operation waits for the value at %#llx that nothing queued writes",
	       (unsigned long long)s->handle, (unsigned long long)s->head->to);
}

/* With mu: the host waits for s (and ends its held work). */
static void wait_stream(struct CUstream_st *s)
{
	end_holds(s, NULL);
	for (;;) {
		if (fk.manual) {
			drain(s);
			drain_all(false);
		}
		if (!s->head && !s->running)
			return;
		if (fk.manual && !runnable(s) && all_stopped())
			stuck(s);
		pthread_cond_wait(&idle_cv, &mu);
	}
}

/* With mu: the host waits for every stream. */
static void wait_device(void)
{
	struct CUstream_st *s;

	for (s = streams; s; s = s->next)
		end_holds(s, NULL);
	for (;;) {
		if (fk.manual)
			drain_all(true);
		for (s = streams; s && !s->head && !s->running; s = s->next)
			;
		if (!s)
			return;
		if (fk.manual && all_stopped())
			stuck(s);
		pthread_cond_wait(&idle_cv, &mu);
	}
}

/* The host waits for the whole device (cuMemFreeHost, and cuMemHostAlloc
 * when asked), unlogged. */
void fk_device_sync(void)
{
	pthread_mutex_lock(&mu);
	wait_device();
	pthread_mutex_unlock(&mu);
}

/* Queue o on st for entry point fn (logged as kind): refused without a
 * context, and in NCCL mode on the streams it refuses; o is freed then. */
static CUresult submit(const char *fn, CUstream st, enum fk_call_kind kind,
		       struct op *o)
{
	struct CUstream_st *s;

	if (fk_no_context()) {
		op_free(o);
		return FK_ERR_INVALID_CONTEXT;
	}
	pthread_mutex_lock(&mu);
	s = stream_get(st);
	if (refused(fn, s)) {
		pthread_mutex_unlock(&mu);
		op_free(o);
		return FK_ERR_ILLEGAL_STATE;
	}
	log_call(kind, (uintptr_t)st);
	if (o->k == OP_EVENT) {
		o->evseq = ++o->ev->recorded;
		o->ev->s = s;
		o->ev->handle = (uintptr_t)st;
		o->ev->refs++;
	}
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	if (!fk.manual)
		pthread_cond_signal(&s->cv);
	else if (!s->lazy)
		drain_all(false);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

/* A new operation of kind k. */
static struct op *op_new(enum op_kind k)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o)
		fk_die("out of memory");
	o->k = k;
	return o;
}

/* A kernel launch (kernels.c), queued on st. */
CUresult fk_queue_launch(const char *fn, CUstream st, struct fk_launch *l)
{
	struct op *o = op_new(OP_KERNEL);

	o->l = l;
	return submit(fn, st, FK_CALL_LAUNCH, o);
}

FK_EXPORT CUresult cuStreamCreate(CUstream *st, unsigned int flags)
{
	struct CUstream_st *s;

	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->handle = (uintptr_t)s;
	s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
	pthread_mutex_lock(&mu);
	*st = stream_add(s);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

/* Waits for the stream's work (the driver lets it finish), then frees it. */
FK_EXPORT CUresult cuStreamDestroy_v2(CUstream st)
{
	struct CUstream_st *s;

	if ((uintptr_t)st <= 2)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	s = stream_get(st);
	wait_stream(s);
	for (struct CUstream_st **p = &streams; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	s->quit = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&mu);
	if (s->threaded)
		pthread_join(s->th, NULL);
	pthread_cond_destroy(&s->cv);
	free(s);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuStreamSynchronize(CUstream st)
{
	struct CUstream_st *s;

	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	s = stream_get(st);
	if (refused(__func__, s)) {
		pthread_mutex_unlock(&mu);
		return FK_ERR_ILLEGAL_STATE;
	}
	log_call(FK_CALL_STREAM_SYNC, (uintptr_t)st);
	wait_stream(s);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

/* Done once the work queued on st has run; a query, not a wait: it ends
 * nothing and is not logged. */
FK_EXPORT CUresult cuStreamQuery(CUstream st)
{
	struct CUstream_st *s;
	bool busy;

	FK_INJECT();
	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	if (fk.manual)
		drain_all(false);
	s = stream_get(st);
	busy = s->head || s->running;
	pthread_mutex_unlock(&mu);
	return busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

FK_EXPORT CUresult cuStreamIsCapturing(CUstream st, int *status)
{
	(void)st;
	*status = getenv("DEVMEMTCP_FAKE_CUDA_CAPTURING") ? 1 /* active */
							  : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

/* Every stream's work ends: the host waited for it. */
FK_EXPORT CUresult cuCtxSynchronize(void)
{
	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	log_call(FK_CALL_CTX_SYNC, 0);
	wait_device();
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------------------ */

FK_EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	(void)flags;
	*e = calloc(1, sizeof(**e));
	if (!*e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	(*e)->refs = 1;
	return CUDA_SUCCESS;
}

/* A record not yet run keeps the event until it has (as the driver frees
 * its resources once the work completes). */
FK_EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	pthread_mutex_lock(&mu);
	event_put(e);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuEventRecord(CUevent e, CUstream st)
{
	struct op *o;

	FK_INJECT();
	o = op_new(OP_EVENT);
	o->ev = e;
	return submit(__func__, st, FK_CALL_RECORD, o);
}

FK_EXPORT CUresult cuEventQuery(CUevent e)
{
	bool done;

	FK_INJECT();
	pthread_mutex_lock(&mu);
	if (fk.manual)
		drain_all(false);
	done = e->completed >= e->recorded;
	pthread_mutex_unlock(&mu);
	return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* The host waits for the work before the event's last record (and ends
 * what of it is held). */
FK_EXPORT CUresult cuEventSynchronize(CUevent e)
{
	unsigned long want;

	FK_INJECT();
	pthread_mutex_lock(&mu);
	want = e->recorded;
	if (want)
		log_call(FK_CALL_EVENT_SYNC, e->handle);
	if (e->completed < want) {
		const struct op *rec = e->s->head;

		while (rec && !(rec->k == OP_EVENT && rec->ev == e && rec->evseq == want))
			rec = rec->next;
		/* (a record no longer queued is running: nothing before it is) */
		if (rec)
			end_holds(e->s, rec);
	}
	while (e->completed < want) {
		if (fk.manual) {
			drain(e->s);
			drain_all(false);
			if (e->completed >= want)
				break;
			if (all_stopped())
				stuck(e->s);
		}
		pthread_cond_wait(&idle_cv, &mu);
	}
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	*ms = (float)((b->t - a->t) * 1e3);
	if (*ms <= 0)
		*ms = 1e-3f;
	return CUDA_SUCCESS;
}

/* ---- copies ------------------------------------------------------------------------- */

/* Synchronous copies run on the legacy default stream (refused in NCCL
 * mode); here at once. */
static CUresult copy_now(const char *fn, void *d, const void *s, size_t n)
{
	if (fk_no_context())
		return FK_ERR_INVALID_CONTEXT;
	if (fk.nccl) {
		struct CUstream_st legacy = { .handle = 1 };

		refused(fn, &legacy);
		return FK_ERR_ILLEGAL_STATE;
	}
	memmove(d, s, n);
	return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
	return copy_now(__func__, fk_mem(d), s, n);
}

FK_EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
	return copy_now(__func__, d, fk_mem(s), n);
}

/* Queue a copy of n bytes (pointers kept: the bytes are read when it
 * runs, as from pinned memory). */
static CUresult copy_async(const char *fn, uint64_t d, uint64_t s, size_t n,
			   CUstream st)
{
	struct op *o = op_new(OP_COPY);

	o->to = d;
	o->from = s;
	o->len = n;
	return submit(fn, st, FK_CALL_COPY, o);
}

FK_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n,
					CUstream st)
{
	return copy_async(__func__, d, (uintptr_t)s, n, st);
}

FK_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n,
					CUstream st)
{
	return copy_async(__func__, (uintptr_t)d, s, n, st);
}

FK_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n,
					CUstream st)
{
	return copy_async(__func__, d, s, n, st);
}

/* The 13.0 signature: every copy in order on the stream. */
FK_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs,
					 size_t *sizes, size_t count,
					 struct emu_memcpy_attr *attrs,
					 size_t *attr_idx, size_t nattrs,
					 CUstream st)
{
	(void)attrs;
	(void)attr_idx;
	if (!nattrs || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		CUresult r = copy_async(__func__, dsts[i], srcs[i], sizes[i], st);

		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}

/* Host or device memory on either side (the same here); no arrays. */
FK_EXPORT CUresult cuMemcpy2DAsync_v2(const struct emu_memcpy2d *c, CUstream st)
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
	return submit(__func__, st, FK_CALL_COPY, o);
}

FK_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n,
				   CUstream st)
{
	struct op *o = op_new(OP_SET);

	o->to = d;
	o->value = v;
	o->len = n;
	return submit(__func__, st, FK_CALL_COPY, o);
}

/* ---- stream memory operations ----------------------------------------------------- */

/* Queue a write of v (w bytes) to addr, which must be w-aligned. */
static CUresult write_value(const char *fn, CUstream st, CUdeviceptr addr,
			    uint64_t v, int w)
{
	struct op *o;

	if (addr % (unsigned int)w)
		return CUDA_ERROR_INVALID_VALUE;	/* as the driver */
	o = op_new(OP_WRITE);
	o->to = addr;
	o->value = v;
	o->width = w;
	return submit(fn, st, FK_CALL_MEMOP, o);
}

FK_EXPORT CUresult cuStreamWriteValue32_v2(CUstream st, CUdeviceptr addr,
					   uint32_t v, unsigned int flags)
{
	(void)flags;
	FK_INJECT();
	return write_value(__func__, st, addr, v, 4);
}

FK_EXPORT CUresult cuStreamWriteValue64_v2(CUstream st, CUdeviceptr addr,
					   uint64_t v, unsigned int flags)
{
	(void)flags;
	FK_INJECT();
	return write_value(__func__, st, addr, v, 8);
}

FK_EXPORT CUresult cuStreamWaitValue32_v2(CUstream st, CUdeviceptr addr,
					  uint32_t v, unsigned int flags)
{
	struct op *o;

	FK_INJECT();
	if (flags != CU_STREAM_WAIT_VALUE_GEQ)
		fk_die("wait flags other than GEQ");
	if (addr % 4)
		return CUDA_ERROR_INVALID_VALUE;
	o = op_new(OP_WAIT32);
	o->to = addr;
	o->value = v;
	return submit(__func__, st, FK_CALL_MEMOP, o);
}

/* The operations in order, as their single calls would queue them. */
FK_EXPORT CUresult cuStreamBatchMemOp_v2(CUstream st, unsigned int count,
					 CUstreamBatchMemOpParams *ops,
					 unsigned int flags)
{
	FK_INJECT();
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
			fk_die("a batch of stream memory operations of a kind the library never uses");
		}
	}
	for (unsigned int i = 0; i < count; i++) {
		const struct dmt_memop_value *v = &ops[i].writeValue;
		CUresult r;

		if (ops[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_32)
			r = cuStreamWaitValue32_v2(st, v->address, v->value, v->flags);
		else if (ops[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32)
			r = write_value(__func__, st, v->address, v->value, 4);
		else
			r = write_value(__func__, st, v->address, v->value64, 8);
		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}

/* ---- what the tests call ------------------------------------------------------------- */

FK_EXPORT int fakecuda_busy(uint64_t stream);
FK_EXPORT void fakecuda_finish(uint64_t stream);
FK_EXPORT int fakecuda_idle(uint64_t stream);
FK_EXPORT uint64_t fakecuda_calls(void);
FK_EXPORT int fakecuda_call(uint64_t i, struct fakecuda_call *out);

/* Queue a long kernel on stream (CU_STREAM_PER_THREAD: the caller's): the
 * work behind it waits until fakecuda_finish or a host wait ends it. */
int fakecuda_busy(uint64_t stream)
{
	struct op *o = op_new(OP_HOLD);
	struct CUstream_st *s;

	o->held = true;
	pthread_mutex_lock(&mu);
	s = stream_get((CUstream)(uintptr_t)stream);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_mutex_unlock(&mu);
	return 0;
}

/* End the long kernels queued on stream; what waited behind them runs. */
void fakecuda_finish(uint64_t stream)
{
	struct CUstream_st *s;

	pthread_mutex_lock(&mu);
	s = stream_get((CUstream)(uintptr_t)stream);
	end_holds(s, NULL);
	if (fk.manual)
		drain_all(false);
	pthread_mutex_unlock(&mu);
}

/* 1 when stream has nothing left to run. */
int fakecuda_idle(uint64_t stream)
{
	struct CUstream_st *s;
	int idle;

	pthread_mutex_lock(&mu);
	s = stream_get((CUstream)(uintptr_t)stream);
	idle = !s->head && !s->running;
	pthread_mutex_unlock(&mu);
	return idle;
}

/* Calls logged so far, and call i of them (0 when it left the log). */
uint64_t fakecuda_calls(void)
{
	uint64_t n;

	pthread_mutex_lock(&mu);
	n = ncalls;
	pthread_mutex_unlock(&mu);
	return n;
}

int fakecuda_call(uint64_t i, struct fakecuda_call *out)
{
	int ok;

	pthread_mutex_lock(&mu);
	ok = i < ncalls && ncalls - i <= LOG_SIZE;
	if (ok)
		*out = call_log[i % LOG_SIZE];
	pthread_mutex_unlock(&mu);
	return ok;
}
